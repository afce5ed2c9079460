//! Pass 1 over expressions: the type of every expression, place and method
//! call, and the checks that need it (constant indices within an array's
//! length, supported methods and their arities, `for` ranges).
//!
//! Separate from `mod.rs` (state, signature, statements) only to keep each
//! file readable: this is one `impl Infer` block.

use syn::spanned::Spanned;
use syn::{BinOp, Expr, Lit, Pat, UnOp};

use super::{key, Infer};
use crate::translate::literals::{constant, int_literal_value, literal_fits_i32};
use crate::translate::methods::{self, Args, Receiver, Yields};
use crate::translate::syntax::{array_len, is_compound, scalar_of_type, LoopRange};
use crate::types::{error, Scalar, Ty, UNKNOWN_LEN};

/// Where kernels accept tuples (see `translate/tuples.rs` and `translate/fields.rs`).
pub(super) const TUPLES: &str =
    "kernels take tuples where they are taken apart: `let (a, b) = ...;`, `(a, b) = ...;`, \
                                 or `let t = ...;` read as `t.0`, `t.1` or copied whole (`let u = t;`, `let (x, y) = t;`), \
                                 and assigned whole, of a tuple \
                                 literal, `x.sin_cos()`, or an `if`, `match` or block whose every value is one \
                                 (and no closure parameter or `for` variable reuses its name: rename one); \
                                 `x.sin_cos().0` is `x.sin()`";

/// Where kernels accept iterator adaptors and closures (see
/// `translate/folds.rs` and `translate/iterate.rs`).
pub(super) const FOLDS: &str = "kernels take iterators as a `for` loop's source (`a.iter()`, `a.iter_mut()`, `&a`, \
                                `.copied()`, then `.zip(b.iter())`, `.enumerate()`, `.rev()`) and as a value ending in \
                                `.sum()`, `.product()`, `.fold(init, f)`, `.any(f)` or `.all(f)` after any `.map(f)`s, \
                                with closures only as those adaptors' arguments (`|v|`, `|&v|`, `|(x, y)|`, \
                                `|acc, v|`; no `return` or `?` inside) or a function's path (`f64::max`); a `fold` \
                                whose initial value has effects walks an array named plainly (bind the row or \
                                the value to a `let` first)";

/// `T::from(x)` with `T` a scalar type: the conversion's target.
pub(crate) fn conversion(c: &syn::ExprCall) -> Option<Scalar> {
    let Expr::Path(p) = &*c.func else { return None };
    if p.qself.is_some() || p.path.segments.len() != 2 || c.args.len() != 1 || p.path.segments[1].ident != "from" {
        return None;
    }
    Scalar::from_name(&p.path.segments[0].ident.to_string())
}

/// The message for a call of a library function by its path.
fn library_call_message(path: &syn::Path) -> String {
    let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let tail = match segs.as_slice() {
        ["std" | "core", rest @ ..] => rest,
        rest => rest,
    };
    match tail {
        ["cmp", f @ ("max" | "min")] => format!(
            "`std::cmp::{f}` in kernels takes two integers, not both literals (it is read as `a.{f}(b)`, and a \
             literal alone has no type to call it on): write `a.{f}(b)` with a typed operand (`2i64.{f}(n)`)"
        ),
        [ty, "into" | "try_from" | "from_bits" | "to_bits"] if Scalar::from_name(ty).is_some() => format!(
            "`{}` is not supported in kernels: convert with `as` (`x as {ty}`), or `{ty}::from(x)` where the \
             conversion is lossless",
            segs.join("::")
        ),
        _ => "call `#[parloop::device]` helpers by their plain name (bring them into scope with `use`); \
              library functions (`std::mem::swap`) are not available in kernels; scalar conversions are `as` casts \
              or `T::from(x)`, `std::cmp::max(a, b)` is `a.max(b)`"
            .to_string(),
    }
}

impl Infer {
    pub(super) fn expr(&mut self, e: &Expr) -> syn::Result<Ty> {
        let t = self.expr_inner(e)?;
        Ok(self.record(e, t))
    }

    fn expr_inner(&mut self, e: &Expr) -> syn::Result<Ty> {
        let span = e.span();
        match e {
            Expr::Lit(l) => self.literal(&l.lit),
            Expr::Paren(p) => self.expr(&p.expr),
            Expr::Group(g) => self.expr(&g.expr),
            Expr::Path(p) => self.path(e, p),
            Expr::Unary(u) => {
                let t = self.expr(&u.expr)?;
                match u.op {
                    UnOp::Deref(_) => match t {
                        Ty::Ref(inner, _) => Ok(*inner),
                        _ => Err(error(
                            span,
                            "only references can be dereferenced: kernel parameters, and locals bound to a place \
                             directly (`let r = &a[i];`); a reference chosen by `if` or `match` is not one: choose \
                             the value instead (`let v = if c { a[0] } else { a[1] };`)",
                        )),
                    },
                    UnOp::Neg(_) => {
                        let t = self.vars.deref(&t);
                        // `-1.0` is a literal (negation is exact), not arithmetic.
                        if !matches!(&*u.expr, Expr::Lit(_)) {
                            self.vars.mark_operated(&t);
                        }
                        if let Some(s) = self.vars.known_scalar(&t) {
                            if !s.is_float() && !s.is_signed_int() {
                                return Err(error(span, format!("cannot negate a `{}`", s.rust())));
                            }
                        }
                        Ok(t)
                    }
                    UnOp::Not(_) => Ok(self.vars.deref(&t)),
                    _ => Err(error(span, "unsupported unary operator")),
                }
            }
            Expr::Binary(b) => self.binary(b),
            Expr::Assign(a) => {
                let l = self.place(&a.left)?;
                let r = self.expr(&a.right)?;
                let want = self.vars.deref(&l);
                let r = self.array_result(&a.right, r, &want)?;
                self.unify(span, &l, &r)?;
                Ok(Ty::Unit)
            }
            Expr::Index(ix) if is_full_range(&ix.index) => {
                // `a[..]`: the whole array (the array loops' form).
                let base = self.expr(&ix.expr)?;
                match self.vars.deref(&base) {
                    t @ Ty::Array(..) => Ok(t),
                    _ => Err(error(ix.expr.span(), "only arrays can be indexed")),
                }
            }
            Expr::Index(ix) => {
                let base = self.expr(&ix.expr)?;
                let idx = self.expr(&ix.index)?;
                let usize_t = self.vars.known(Scalar::Usize);
                self.unify(ix.index.span(), &idx, &usize_t)?;
                match self.vars.deref(&base) {
                    Ty::Array(elem, len) => {
                        // A constant index out of range is rustc's
                        // `unconditional_panic`: an error here too.
                        if let Some(i) = int_literal_value(&ix.index) {
                            if i >= len as u128 {
                                return Err(error(
                                    ix.index.span(),
                                    format!("index out of bounds: the length is {len} but the index is {i}"),
                                ));
                            }
                        }
                        Ok(*elem)
                    }
                    Ty::Var(_) => Err(error(
                        ix.expr.span(),
                        "only arrays can be indexed (a helper's array result needs its type on the `let`: \
                         `let n: [f64; 3] = f(..);`)",
                    )),
                    _ => Err(error(ix.expr.span(), "only arrays can be indexed")),
                }
            }
            Expr::Cast(c) => {
                let from = self.expr(&c.expr)?;
                let to = scalar_of_type(&c.ty)?;
                if self.vars.deref(&from) != from {
                    return Err(error(c.expr.span(), "dereference before casting (`*x as T`)"));
                }
                if !matches!(from, Ty::Var(_)) {
                    return Err(error(c.expr.span(), "only scalars can be cast"));
                }
                Ok(self.vars.known(to))
            }
            Expr::MethodCall(m) => self.method(m),
            Expr::Call(c) if is_element(c) => {
                // `__pl_elem(it, ix)` (`translate/iterate.rs`): a reference
                // to the element where `it` is a reference, the element
                // where it is an array.
                let it = self.expr(&c.args[0])?;
                let ix = self.expr(&c.args[1])?;
                let u = self.vars.known(Scalar::Usize);
                self.unify(c.args[1].span(), &ix, &u)?;
                match it {
                    Ty::Ref(inner, mutable) => match *inner {
                        Ty::Array(elem, _) => Ok(Ty::Ref(elem, mutable)),
                        _ => Err(error(c.args[0].span(), "a `for` loop iterates over an array")),
                    },
                    Ty::Array(elem, _) => Ok(*elem),
                    _ => Err(error(c.args[0].span(), "a `for` loop iterates over an array")),
                }
            }
            // The neutral element of a `sum` or `product`
            // (`translate/folds.rs`): the accumulator's type.
            Expr::Call(c) if crate::translate::folds::neutral(c).is_some() => Ok(self.vars.any()),
            Expr::Call(c) if conversion(c).is_some() => {
                // `f64::from(x)`: the standard library's lossless
                // conversions (rustc checks that `From` has this one) are
                // `as` casts.
                let to = conversion(c).expect("checked");
                let from = self.expr(&c.args[0])?;
                let from = self.vars.deref(&from);
                if !matches!(from, Ty::Var(_)) {
                    return Err(error(c.args[0].span(), "only scalars can be converted"));
                }
                Ok(self.vars.known(to))
            }
            Expr::Call(c) => {
                let Expr::Path(p) = &*c.func else {
                    return Err(error(c.func.span(), "only calls of helper functions by name are supported"));
                };
                let Some(name) = p.path.get_ident().map(|i| i.to_string()) else {
                    return Err(error(c.func.span(), library_call_message(&p.path)));
                };
                if matches!(name.as_str(), "max" | "min") && c.args.len() == 2 {
                    // `use std::cmp::max;` then `max(a, b)`: read as a
                    // helper, rustc would report a missing module.
                    return Err(error(
                        c.func.span(),
                        format!(
                            "`{name}(a, b)` in a kernel: write `a.{name}(b)` or `std::cmp::{name}(a, b)` (a \
                             `#[parloop::device]` helper named `{name}` would be taken for it: rename it)"
                        ),
                    ));
                }
                for a in &c.args {
                    let t = self.expr(a)?;
                    // A scalar argument (or an array's elements, or what a
                    // reference points to) takes the parameter's type, which
                    // is not visible here (see `Vars::ambiguous`; an array
                    // only typed by the helper is declared with the
                    // literals' default: right for f64 and i32, a C++
                    // compile error at the call otherwise).
                    let mut elem = self.vars.deref(&t);
                    while let Ty::Array(inner, _) = elem {
                        elem = *inner;
                    }
                    if let Ty::Var(_) = elem {
                        let p = self.vars.opaque();
                        self.unify(a.span(), &elem, &p)?;
                    }
                    self.pins.push((key(a), t));
                }
                let lent = self.mut_refs();
                unordered_effects(c.args.iter(), &lent)?;
                // The helper's return type is not visible here either:
                // rustc checks it, and a `let` bound to a call needs an
                // annotation.
                let result = self.vars.opaque();
                self.pins.push((key(e), result.clone()));
                if !self.calls.contains(&name) {
                    self.calls.push(name);
                }
                Ok(result)
            }
            Expr::Reference(r) => {
                let t = self.expr(&r.expr)?;
                let t = self.vars.deref(&t);
                // A computed value (`&(a + 1.0)`, `&0.5`) is a temporary,
                // as in Rust: a scalar copied into a C++ local first.
                if !is_place(&r.expr) && !matches!(t, Ty::Var(_)) {
                    return Err(error(
                        span,
                        "a reference to a computed array: bind the array to a `let` and pass a reference to that",
                    ));
                }
                Ok(Ty::Ref(Box::new(t), r.mutability.is_some()))
            }
            Expr::If(i) => {
                let c = self.expr(&i.cond)?;
                let b = self.vars.known(Scalar::Bool);
                self.unify(i.cond.span(), &c, &b)?;
                let then = self.block(&i.then_branch)?;
                self.types.insert(key(&i.then_branch), then.clone());
                match &i.else_branch {
                    None => Ok(Ty::Unit),
                    Some((_, els)) => {
                        let t = self.expr(els)?;
                        let joined = if then == Ty::Never { t.clone() } else { then.clone() };
                        self.unify(els.span(), &then, &t)?;
                        Ok(joined)
                    }
                }
            }
            Expr::Block(b) => {
                if b.label.is_some() {
                    return Err(error(span, "labelled blocks are not supported"));
                }
                self.block(&b.block)
            }
            Expr::ForLoop(f) => self.for_loop(f),
            Expr::While(w) => {
                let c = self.expr(&w.cond)?;
                let b = self.vars.known(Scalar::Bool);
                self.unify(w.cond.span(), &c, &b)?;
                self.block(&w.body)?;
                Ok(Ty::Unit)
            }
            Expr::Loop(l) => {
                self.block(&l.body)?;
                Ok(Ty::Unit)
            }
            Expr::Break(b) => {
                if b.expr.is_some() {
                    return Err(error(span, "`break` with a value is not supported: assign a local, then `break`"));
                }
                Ok(Ty::Never)
            }
            // Labels are rustc's to check (they name an enclosing loop).
            Expr::Continue(_) => Ok(Ty::Never),
            Expr::Return(r) => {
                let ret = self.ret.clone();
                let t = match &r.expr {
                    Some(v) => {
                        let t = self.expr(v)?;
                        self.array_result(v, t, &ret)?
                    }
                    None => Ty::Unit,
                };
                self.unify(span, &t, &ret)?;
                Ok(Ty::Never)
            }
            Expr::Array(a) => {
                // The first element gives the shape (a scalar or a row).
                let mut elem: Option<Ty> = None;
                for x in &a.elems {
                    let tx = self.expr(x)?;
                    let tx = self.vars.deref(&tx);
                    match &elem {
                        None => elem = Some(tx),
                        Some(t) => {
                            let t = t.clone();
                            self.unify(x.span(), &t, &tx)?;
                        }
                    }
                }
                let elem = elem.unwrap_or_else(|| self.vars.any());
                Ok(Ty::Array(Box::new(elem), a.elems.len()))
            }
            Expr::Repeat(r) => {
                let te = self.expr(&r.expr)?;
                let te = self.vars.deref(&te);
                Ok(Ty::Array(Box::new(te), array_len(&r.len)?))
            }
            Expr::Range(_) => Err(error(span, "ranges are only supported as the iterator of a `for` loop")),
            // `()`: an arm or branch that does nothing (`_ => ()`).
            Expr::Tuple(t) if t.elems.is_empty() => Ok(Ty::Unit),
            Expr::Tuple(_) => Err(error(span, TUPLES)),
            Expr::Macro(m) => self.kernel_macro(&m.mac),
            Expr::Closure(_) => Err(error(
                span,
                format!(
                    "closures are only allowed as arguments of iterator adaptors (`.map(f)`, `.fold(init, f)`, \
                     `.any(f)`, `.all(f)`): for a function of your own write a `#[parloop::device]` helper; {FOLDS}"
                ),
            )),
            Expr::Match(m) => self.match_expr(m),
            Expr::Unsafe(_) => Err(error(span, "`unsafe` blocks are not supported in kernels")),
            Expr::Field(f) if matches!(f.member, syn::Member::Unnamed(_)) => Err(error(span, TUPLES)),
            Expr::Field(_) => {
                Err(error(span, "field access is not supported in kernels (no structs: use arrays or locals)"))
            }
            Expr::Struct(_) => {
                Err(error(span, "struct literals are not supported in kernels (no structs: use arrays or locals)"))
            }
            _ => Err(error(
                span,
                "this construct is not supported in kernels; supported: let, arithmetic, comparisons, \
                 compound assignment, indexing, `*` on references, if/else, for over ranges, while, loop, \
                 break, continue, return, blocks, `as` casts, local const, float and integer methods, \
                 calls of #[parloop::device] helpers",
            )),
        }
    }

    fn literal(&mut self, lit: &Lit) -> syn::Result<Ty> {
        match lit {
            Lit::Int(i) => match i.suffix() {
                "" => Ok(self.vars.int()),
                s => match Scalar::from_name(s) {
                    Some(sc) if sc.is_int() => Ok(self.vars.known(sc)),
                    Some(sc) if sc.is_float() => Ok(self.vars.known(sc)),
                    _ => Err(error(i.span(), format!("unsupported literal suffix `{s}`"))),
                },
            },
            Lit::Float(f) => match f.suffix() {
                "" => Ok(self.vars.float()),
                "f32" => Ok(self.vars.known(Scalar::F32)),
                "f64" => Ok(self.vars.known(Scalar::F64)),
                s => Err(error(f.span(), format!("unsupported literal suffix `{s}`"))),
            },
            Lit::Bool(_) => Ok(self.vars.known(Scalar::Bool)),
            other => Err(error(other.span(), "only numeric and boolean literals are supported in kernels")),
        }
    }

    fn path(&mut self, e: &Expr, p: &syn::ExprPath) -> syn::Result<Ty> {
        if let Some(ident) = p.path.get_ident() {
            let name = ident.to_string();
            let Some(id) = self.lookup(&name) else {
                // Not in scope here: a module-level constant, which
                // `#[parloop::device] const` declares for the device.
                return Ok(self.external(e, &name, p.span()));
            };
            self.resolved.insert(key(e), id);
            return Ok(self.bindings[id].ty.clone());
        }
        match constant(&p.path) {
            Some((s, _)) => Ok(self.vars.known(s)),
            None => Err(error(
                p.span(),
                "unsupported path: kernels see their parameters, locals, local consts, \
                 `f64::consts::*`, `f32::consts::*` and the MIN/MAX/EPSILON/MIN_POSITIVE/INFINITY/NEG_INFINITY/NAN \
                 constants of the scalar types",
            )),
        }
    }

    fn place(&mut self, e: &Expr) -> syn::Result<Ty> {
        match e {
            Expr::Path(_) | Expr::Index(_) | Expr::Unary(syn::ExprUnary { op: UnOp::Deref(_), .. }) => {
                let t = self.expr(e)?;
                if matches!(t, Ty::Ref(..)) {
                    return Err(error(e.span(), "assign through the reference: `*x = ...`"));
                }
                Ok(t)
            }
            Expr::Paren(p) => self.place(&p.expr),
            _ => Err(error(e.span(), "can only assign to locals, `*param` and indexed elements")),
        }
    }

    fn binary(&mut self, b: &syn::ExprBinary) -> syn::Result<Ty> {
        use BinOp::*;
        let span = b.span();
        let compound = is_compound(&b.op);
        let l = if compound { self.place(&b.left)? } else { self.expr(&b.left)? };
        let r = self.expr(&b.right)?;
        if !matches!(b.op, And(_) | Or(_)) {
            // (`&&` and `||` are sequenced in C++ too.)
            let lent = self.mut_refs();
            unordered_effects([&*b.left, &*b.right].into_iter(), &lent)?;
        }
        let (ld, rd) = (self.vars.deref(&l), self.vars.deref(&r));
        if !matches!(b.op, And(_) | Or(_)) {
            if matches!(ld, Ty::Array(..)) || matches!(rd, Ty::Array(..)) {
                let what = if matches!(b.op, Eq(_) | Ne(_) | Lt(_) | Le(_) | Gt(_) | Ge(_)) {
                    "comparing arrays"
                } else {
                    "operators on whole arrays"
                };
                return Err(error(
                    b.op.span(),
                    format!(
                        "{what} is not supported in kernels: work element by element (`x[0] == 0.0 && x[1] == 0.0`, \
                         a `for` loop over the indices, or `a.iter().zip(b.iter()).all(|(u, v)| u == v)`)"
                    ),
                ));
            }
            self.vars.mark_operated(&ld);
            self.vars.mark_operated(&rd);
        }
        match b.op {
            Shl(_) | Shr(_) | ShlAssign(_) | ShrAssign(_) => {
                self.vars.require_int(&ld).map_err(|m| error(b.left.span(), m))?;
                self.vars.require_int(&rd).map_err(|m| error(b.right.span(), m))?;
                Ok(if compound { Ty::Unit } else { ld })
            }
            Eq(_) | Ne(_) | Lt(_) | Le(_) | Gt(_) | Ge(_) => {
                self.unify(span, &ld, &rd)?;
                Ok(self.vars.known(Scalar::Bool))
            }
            And(_) | Or(_) => {
                let bt = self.vars.known(Scalar::Bool);
                self.unify(b.left.span(), &ld, &bt)?;
                self.unify(b.right.span(), &rd, &bt)?;
                Ok(bt)
            }
            _ => {
                self.unify(span, &ld, &rd)?;
                Ok(if compound { Ty::Unit } else { ld })
            }
        }
    }

    fn method(&mut self, m: &syn::ExprMethodCall) -> syn::Result<Ty> {
        let name = m.method.to_string();
        let recv = self.expr(&m.receiver)?;
        let recv = self.vars.deref(&recv);
        self.vars.mark_operated(&recv);
        let lent = self.mut_refs();
        unordered_effects(std::iter::once(&*m.receiver).chain(m.args.iter()), &lent)?;
        let args: Vec<Ty> = m.args.iter().map(|a| self.expr(a)).collect::<syn::Result<_>>()?;
        let arity_err =
            |n: usize| Err(error(m.span(), format!("`{name}` takes {n} argument{}", if n == 1 { "" } else { "s" })));
        if let Some(method) = methods::method(&name) {
            let unsigned =
                |s: Option<Scalar>| matches!(s, Some(Scalar::U32 | Scalar::U64 | Scalar::Usize | Scalar::Bool));
            match method.receiver {
                Receiver::Float => self.vars.require_float(&recv).map_err(|e| error(m.receiver.span(), e))?,
                Receiver::Int | Receiver::SignedInt => {
                    self.vars.require_int(&recv).map_err(|e| error(m.receiver.span(), e))?
                }
                Receiver::Number | Receiver::SignedNumber => {
                    if self.vars.known_scalar(&recv) == Some(Scalar::Bool) {
                        return Err(error(m.span(), format!("`{name}` needs a number, not a `bool`")));
                    }
                }
            }
            if matches!(method.receiver, Receiver::SignedInt | Receiver::SignedNumber)
                && !self.vars.is_float(&recv)
                && unsigned(self.vars.known_scalar(&recv))
            {
                return Err(error(m.span(), format!("`{name}` needs a signed type")));
            }
            match method.args {
                Args::Same(n) => {
                    if args.len() != n {
                        return arity_err(n);
                    }
                    for (a, e) in args.iter().zip(&m.args) {
                        let a = self.vars.deref(a);
                        self.unify(e.span(), &recv, &a)?;
                    }
                }
                Args::I32 | Args::U32 => {
                    if args.len() != 1 {
                        return arity_err(1);
                    }
                    let want = self.vars.known(if method.args == Args::I32 { Scalar::I32 } else { Scalar::U32 });
                    let a = self.vars.deref(&args[0]);
                    self.unify(m.args[0].span(), &a, &want)?;
                }
            }
            return Ok(match method.yields {
                Yields::Receiver => recv,
                Yields::Bool => self.vars.known(Scalar::Bool),
            });
        }
        match name.as_str() {
            "len" => {
                if !args.is_empty() {
                    return arity_err(0);
                }
                // `x.len()` of an array parameter or local: its length, a
                // constant (auto-dereferenced through `&`/`&mut`).
                let mut t = recv.clone();
                while let Ty::Ref(inner, _) = t {
                    t = self.vars.deref(&inner);
                }
                match t {
                    Ty::Array(_, n) if n != crate::types::UNKNOWN_LEN => {
                        self.lens.insert(key(m), n);
                        Ok(self.vars.known(Scalar::Usize))
                    }
                    _ => Err(error(
                        m.span(),
                        "`len` is supported on arrays whose length the kernel's types state (not a module-level \
                         constant's, which the kernel cannot see: write its length)",
                    )),
                }
            }
            "rev" | "step_by" => {
                Err(error(m.span(), "`.rev()` and `.step_by()` are only supported on the range of a `for` loop"))
            }
            "iter" | "iter_mut" | "into_iter" | "map" | "sum" | "product" | "fold" | "zip" | "enumerate" | "copied"
            | "cloned" | "for_each" | "filter" | "any" | "all" | "count" | "max_by" | "min_by" | "reduce"
            | "filter_map" | "take" | "skip" | "chain" | "position" | "find" => Err(error(m.method.span(), FOLDS)),
            "sin_cos" => Err(error(m.span(), TUPLES)),
            "into" | "try_into" => Err(error(
                m.method.span(),
                format!(
                    "`.{name}()` is not supported in kernels (the target type is not visible here): convert with \
                     `as` (`x as f64`), or `f64::from(x)` where the conversion is lossless"
                ),
            )),
            "wrapping_neg" | "wrapping_div" | "wrapping_rem" | "wrapping_shl" | "wrapping_shr" | "wrapping_pow"
            | "checked_add" | "checked_sub" | "checked_mul" | "checked_div" | "saturating_add" | "saturating_sub"
            | "saturating_mul" | "overflowing_add" | "overflowing_sub" | "overflowing_mul" => Err(error(
                m.method.span(),
                format!(
                    "`{name}` is not supported in kernels: integer `+ - *` wrap on the device (as release Rust), \
                     and `wrapping_add`, `wrapping_sub` and `wrapping_mul` wrap everywhere; write the check with \
                     `if` and the operators"
                ),
            )),
            _ => Err(error(
                m.method.span(),
                format!("method `{name}` is not supported in kernels; supported: {}", methods::supported()),
            )),
        }
    }

    /// A `match` on an integer or a `bool`: literal, range, constant, `_`
    /// and binding patterns, alternatives, guards (rustc checks that it is
    /// exhaustive, on the host function).
    fn match_expr(&mut self, m: &syn::ExprMatch) -> syn::Result<Ty> {
        let scrutinee = self.expr(&m.expr)?;
        let scrutinee = self.vars.deref(&scrutinee);
        // Compared with each pattern: a helper's result typed only by
        // the patterns' literals is pinned for rustc to check.
        self.vars.mark_operated(&scrutinee);
        if !matches!(scrutinee, Ty::Var(_)) || self.vars.is_float(&scrutinee) {
            return Err(error(
                m.expr.span(),
                "`match` in kernels takes integers and `bool`s (compare floats with `if`)",
            ));
        }
        let mut result: Option<Ty> = None;
        for arm in &m.arms {
            self.scopes.push(Vec::new());
            self.pattern(&arm.pat, &scrutinee, true)?;
            if let Some((_, guard)) = &arm.guard {
                let g = self.expr(guard)?;
                let b = self.vars.known(Scalar::Bool);
                self.unify(guard.span(), &g, &b)?;
            }
            let t = self.expr(&arm.body)?;
            self.scopes.pop();
            // As `if`: arms that diverge take any type.
            match &result {
                _ if t == Ty::Never => {}
                None => result = Some(t),
                Some(r) => {
                    let r = r.clone();
                    self.unify(arm.body.span(), &r, &t)?;
                }
            }
        }
        Ok(result.unwrap_or(Ty::Never))
    }

    /// Checks pattern `p` against the scrutinee's type, binding its names
    /// (`bind`: not inside alternatives, whose every case would bind).
    fn pattern(&mut self, p: &Pat, scrutinee: &Ty, bind: bool) -> syn::Result<()> {
        let supported = "supported patterns: integer and `bool` literals, ranges of them (`1..=4`, `..0`), \
                         constants (`i32::MAX`, a local `const`), `_`, a name (`v`, `v @ 1..=4`), alternatives (`1 | 2`)";
        match p {
            Pat::Wild(_) => Ok(()),
            Pat::Paren(inner) => self.pattern(&inner.pat, scrutinee, bind),
            Pat::Or(o) => o.cases.iter().try_for_each(|c| self.pattern(c, scrutinee, false)),
            Pat::Lit(l) => self.pattern_value(&Expr::Lit(l.clone()), scrutinee),
            Pat::Path(p) => {
                let t = self.pattern_path(p)?;
                self.unify(p.span(), scrutinee, &t)
            }
            Pat::Range(r) => {
                for bound in [&r.start, &r.end].into_iter().flatten() {
                    self.pattern_value(bound, scrutinee)?;
                }
                Ok(())
            }
            Pat::Ident(pi) => {
                let name = pi.ident.to_string();
                if let Some(id) = self.lookup(&name).filter(|id| self.local_consts.contains(id)) {
                    // A local `const` is a constant pattern, as in Rust.
                    let t = self.bindings[id].ty.clone();
                    self.resolved.insert(key(pi), id);
                    return self.unify(pi.span(), scrutinee, &t);
                }
                if pi.by_ref.is_some() {
                    return Err(error(pi.span(), format!("`ref` patterns are not supported; {supported}")));
                }
                if let Some((_, sub)) = &pi.subpat {
                    // `v @ 1..=5`: the subpattern tests, the name binds.
                    self.pattern(sub, scrutinee, false)?;
                }
                if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                    return Err(error(
                        pi.span(),
                        format!(
                            "`{name}` in a pattern: a module-level constant (compare in a guard: \
                             `v if v == {name}`) or a binding (name it in lowercase)?"
                        ),
                    ));
                }
                if !bind {
                    return Err(error(pi.span(), "names cannot be bound inside alternatives (`|`) in kernels"));
                }
                let id = self.bind(&name, scrutinee.clone(), false);
                self.resolved.insert(key(pi), id);
                // In Rust the name is a constant's where one is in scope
                // (`three => ..` with a module-level `const three`
                // matches 3 alone); this pass sees no module items, so
                // rustc is asked (see `Translation::pattern_bindings`).
                self.pattern_bindings.push(pi.ident.clone());
                Ok(())
            }
            other => Err(error(other.span(), supported)),
        }
    }

    /// A literal or constant in a pattern, of the scrutinee's type.
    fn pattern_value(&mut self, e: &Expr, scrutinee: &Ty) -> syn::Result<()> {
        let t = match e {
            Expr::Lit(l) => match &l.lit {
                Lit::Int(_) | Lit::Bool(_) => self.literal(&l.lit)?,
                other => return Err(error(other.span(), "patterns match integer and `bool` literals")),
            },
            Expr::Path(p) => self.pattern_path(p)?,
            other => return Err(error(other.span(), "patterns match literals and constants")),
        };
        self.unify(e.span(), scrutinee, &t)
    }

    /// The type of a constant named in a pattern: a local `const`
    /// (recorded by the path's address) or an integer type's constant.
    fn pattern_path(&mut self, p: &syn::ExprPath) -> syn::Result<Ty> {
        if let Some(id) = p.path.get_ident().and_then(|i| self.lookup(&i.to_string())) {
            if self.local_consts.contains(&id) {
                self.resolved.insert(key(p), id);
                return Ok(self.bindings[id].ty.clone());
            }
        }
        match constant(&p.path) {
            Some((s, _)) if !s.is_float() => Ok(self.vars.known(s)),
            _ => Err(error(
                p.span(),
                "patterns name integer constants (`i32::MAX`) or local `const`s; compare with a module-level \
                 constant in a guard (`v if v <= LIMIT`)",
            )),
        }
    }

    /// A loop bound known here: a literal, an array's length
    /// (`0..a.len()`), or the smaller of two (`a.len().min(b.len())`, from
    /// `zip`).
    fn known_bound(&self, b: &Expr) -> Option<u128> {
        match b {
            Expr::Paren(p) => self.known_bound(&p.expr),
            Expr::MethodCall(m) if m.method == "len" && m.args.is_empty() => {
                self.lens.get(&key(m)).map(|&n| n as u128).filter(|&n| n != UNKNOWN_LEN as u128)
            }
            Expr::MethodCall(m) if m.method == "min" && m.args.len() == 1 => {
                Some(self.known_bound(&m.receiver)?.min(self.known_bound(&m.args[0])?))
            }
            _ => int_literal_value(b),
        }
    }

    fn for_loop(&mut self, f: &syn::ExprForLoop) -> syn::Result<Ty> {
        // The iterator first: an array loop the rewrite did not take
        // (`translate/iterate.rs`) is refused with the forms it takes.
        LoopRange::parse(&f.expr)?;
        let Pat::Ident(pi) = &*f.pat else {
            return Err(error(f.pat.span(), "the loop variable must be a plain name"));
        };
        if pi.mutability.is_some() || pi.by_ref.is_some() || pi.subpat.is_some() {
            // C++ would count with the variable itself, so changing it
            // would change the iteration (Rust's does not).
            return Err(error(
                f.pat.span(),
                "the loop variable must be a plain name, not `mut`: copy it into a `let mut` inside the loop",
            ));
        }
        let range = LoopRange::parse(&f.expr)?;
        let t = self.vars.any();
        for bound in [range.start, range.end] {
            let bt = self.expr(bound)?;
            let bt = self.vars.deref(&bt);
            self.unify(bound.span(), &bt, &t)?;
        }
        self.vars.require_int(&t).map_err(|m| error(f.expr.span(), m))?;
        if let Some(step) = range.step {
            let st = self.expr(step)?;
            let u = self.vars.known(Scalar::Usize);
            self.unify(step.span(), &st, &u)?;
        }
        let known = |b: &Expr| self.known_bound(b);
        let narrow = [range.start, range.end]
            .iter()
            .all(|b| literal_fits_i32(b) || known(b).is_some_and(|v| v <= i32::MAX as u128));
        let end = known(range.end);
        self.scopes.push(Vec::new());
        let id = self.bind(&pi.ident.to_string(), t, narrow);
        if let Some(hi) = end {
            // Every value is at most `max` (rev and step_by take a subset;
            // an empty range runs nothing).
            let max = if range.inclusive { hi } else { hi.saturating_sub(1) };
            self.bindings[id].max = Some(max);
        }
        self.resolved.insert(key(f), id);
        self.block(&f.body)?;
        self.scopes.pop();
        Ok(Ty::Unit)
    }
}

/// Names an expression lends mutably (`&mut s`, `&mut a[2]`, or a `&mut`
/// parameter passed on as it is: a helper may change them) and names it
/// mentions at all.
struct Effects<'l> {
    /// Names of `&mut` references in scope.
    lent: &'l [String],
    mutated: Vec<(String, proc_macro2::Span)>,
    mentioned: Vec<String>,
}

impl<'a> syn::visit::Visit<'a> for Effects<'_> {
    fn visit_expr_call(&mut self, c: &'a syn::ExprCall) {
        for a in &c.args {
            if let Expr::Path(p) = a {
                if let Some(id) = p.path.get_ident().filter(|id| self.lent.iter().any(|l| *id == l)) {
                    self.mutated.push((id.to_string(), a.span()));
                }
            }
        }
        syn::visit::visit_expr_call(self, c);
    }
    fn visit_expr_reference(&mut self, r: &'a syn::ExprReference) {
        if r.mutability.is_some() {
            let mut base = &*r.expr;
            loop {
                match base {
                    Expr::Index(i) => base = &i.expr,
                    Expr::Paren(p) => base = &p.expr,
                    _ => break,
                }
            }
            if let Expr::Path(p) = base {
                if let Some(id) = p.path.get_ident() {
                    self.mutated.push((id.to_string(), r.span()));
                }
            }
        }
        syn::visit::visit_expr_reference(self, r);
    }
    fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
        if let Some(id) = p.path.get_ident() {
            self.mentioned.push(id.to_string());
        }
    }
}

/// Refuses operands (of a call or an operator) whose order matters: one
/// lends a name mutably (to a helper that may change it) while another
/// mentions it. Rust evaluates them left to right; C++ in an order it
/// leaves open (g++ evaluates arguments right to left).
pub(super) fn unordered_effects<'a>(operands: impl Iterator<Item = &'a Expr>, lent: &[String]) -> syn::Result<()> {
    let effects: Vec<Effects> = operands
        .map(|e| {
            let mut fx = Effects { lent, mutated: Vec::new(), mentioned: Vec::new() };
            syn::visit::Visit::visit_expr(&mut fx, e);
            fx
        })
        .collect();
    for (i, a) in effects.iter().enumerate() {
        for (name, span) in &a.mutated {
            if effects.iter().enumerate().any(|(j, b)| j != i && b.mentioned.contains(name)) {
                return Err(error(
                    *span,
                    format!(
                        "`{name}` is lent mutably here and used by another operand of the same call or operator: \
                         their order of evaluation is not fixed on the device; compute them in separate `let`s"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Whether `e` names a place (a local, a parameter, an element or row of
/// one, a dereference) or is an array literal (made a local array), which
/// C++ can take the address of.
pub(crate) fn is_place(e: &Expr) -> bool {
    match e {
        Expr::Path(_) | Expr::Array(_) | Expr::Repeat(_) => true,
        Expr::Index(i) => is_place(&i.expr),
        Expr::Paren(p) => is_place(&p.expr),
        Expr::Group(g) => is_place(&g.expr),
        Expr::Unary(u) => matches!(u.op, UnOp::Deref(_)),
        _ => false,
    }
}

/// Whether `c` is the element of a bare local's array loop,
/// `__pl_elem(it, ix)` (see `translate/iterate.rs`).
pub(crate) fn is_element(c: &syn::ExprCall) -> bool {
    c.args.len() == 2 && matches!(&*c.func, Expr::Path(p) if p.path.is_ident(crate::translate::ELEMENT))
}

/// Whether `e` is `..`, the full range (`a[..]`).
pub(crate) fn is_full_range(e: &Expr) -> bool {
    matches!(e, Expr::Range(r) if r.start.is_none() && r.end.is_none() && matches!(r.limits, syn::RangeLimits::HalfOpen(_)))
}
