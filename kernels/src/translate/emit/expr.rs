//! Pass 2 over expressions: each expression as a C++ value, following
//! Rust's semantics where C++ differs (wrapping arithmetic, checked
//! division, shifts, saturating casts, float methods). Statements an
//! expression needs first (a block or an `if` with statements as a value)
//! go to the emitter's `pre` list.
//!
//! Separate from `mod.rs` (state, types, statements) only to keep each file
//! readable: this is one `impl Emit` block.

use syn::spanned::Spanned;
use syn::{BinOp, Block, Expr, ExprLit, Lit, Stmt, UnOp};

use super::{cpp_scalar, Emit};
use crate::translate::infer::{conversion, is_place, key};
use crate::translate::literals::{
    constant, float_literal, int_limit, int_literal, int_literal_value, negative_int_literal,
};
use crate::translate::names::fn_cname;
use crate::translate::syntax::{is_compound, scalar_of_type};
use crate::types::{error, Scalar, Ty, UNKNOWN_LEN};

impl Emit<'_> {
    /// `e` as an rvalue, dereferencing scalar references.
    pub(super) fn value(&mut self, e: &Expr) -> syn::Result<String> {
        let s = self.expr(e)?;
        Ok(match self.ty_of(e) {
            Ty::Ref(inner, _) if matches!(*inner, Ty::Var(_)) => format!("(*{s})"),
            _ => s,
        })
    }

    pub(super) fn expr(&mut self, e: &Expr) -> syn::Result<String> {
        let span = e.span();
        match e {
            Expr::Lit(l) => self.literal(e, &l.lit),
            // Every emitted form delimits itself (binary operations carry
            // their parentheses), so source parentheses add nothing.
            Expr::Paren(p) => self.expr(&p.expr),
            Expr::Group(g) => self.expr(&g.expr),
            Expr::Path(p) => {
                if let Some(&id) = self.infer.resolved.get(&key(e)) {
                    return Ok(self.infer.bindings[id].cname.clone());
                }
                if let Some(&id) = self.infer.ext_resolved.get(&key(e)) {
                    return Ok(self.infer.externals[id].cname.clone());
                }
                Ok(constant(&p.path).expect("checked by inference").1)
            }
            Expr::Unary(u) => match u.op {
                UnOp::Deref(_) => {
                    let inner = self.expr(&u.expr)?;
                    // A reference to an array is a pointer to its first
                    // element (or row): the array itself, indexed as one.
                    Ok(match self.infer.vars.deref(&self.ty_of(&u.expr)) {
                        Ty::Array(..) => inner,
                        _ => format!("(*{inner})"),
                    })
                }
                UnOp::Neg(_) => {
                    let s = self.scalar_of(e)?;
                    if let Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) = &*u.expr {
                        return Ok(negative_int_literal(i, s));
                    }
                    let v = self.value(&u.expr)?;
                    if s.is_signed_int() && !self.konst {
                        Ok(format!("__pl_wneg({v})"))
                    } else {
                        Ok(format!("(-{v})"))
                    }
                }
                UnOp::Not(_) => {
                    let s = self.scalar_of(e)?;
                    let v = self.value(&u.expr)?;
                    Ok(if s == Scalar::Bool { format!("(!{v})") } else { format!("(~{v})") })
                }
                _ => Err(error(span, "unsupported unary operator")),
            },
            Expr::Binary(b) => self.binary(b),
            Expr::Assign(a) => {
                let l = self.expr(&a.left)?;
                let r = self.value(&a.right)?;
                Ok(format!("{l} = {r}"))
            }
            Expr::Index(ix) if crate::translate::infer::is_full_range(&ix.index) => self.expr(&ix.expr),
            Expr::Index(ix) => {
                let base = self.expr(&ix.expr)?;
                let idx = self.value(&ix.index)?;
                let len = match self.infer.vars.deref(&self.ty_of(&ix.expr)) {
                    Ty::Array(_, n) => n,
                    _ => unreachable!("checked by inference"),
                };
                // Indices that cannot be out of range (literals, checked by
                // inference; `for` variables over literal bounds below the
                // length) index directly; others through `PL_IX`, which
                // checks only in PARLOOP_CHECK builds.
                let in_range = match &*ix.index {
                    e if int_literal_value(e).is_some() => true,
                    _ if len == UNKNOWN_LEN => false,
                    e => self.loop_max(e).is_some_and(|m| m < len as u128),
                };
                if in_range {
                    Ok(format!("{base}[{idx}]"))
                } else if len == UNKNOWN_LEN {
                    // A module-level constant: its C++ definition knows the
                    // length, which `sizeof` reads without the indices.
                    let (root, depth) = self.index_root(&ix.expr);
                    let zeros = "[0]".repeat(depth);
                    Ok(format!("{base}[PL_IX({idx}, sizeof({root}{zeros}) / sizeof({root}{zeros}[0]))]"))
                } else {
                    Ok(format!("{base}[PL_IX({idx}, {len})]"))
                }
            }
            Expr::Cast(c) => self.cast(c),
            Expr::MethodCall(m) => self.method(e, m),
            Expr::Call(_) if self.konst => Err(error(span, "calls are not supported in module-level constants")),
            Expr::Call(c) if crate::translate::infer::is_element(c) => {
                // `__pl_elem(it, ix)`: `ix` runs below the array's length.
                let it = self.expr(&c.args[0])?;
                let ix = self.value(&c.args[1])?;
                Ok(match self.ty_of(e) {
                    Ty::Ref(inner, _) if !matches!(*inner, Ty::Array(..)) => format!("(&{it}[{ix}])"),
                    _ => format!("{it}[{ix}]"),
                })
            }
            Expr::Call(c) if crate::translate::folds::neutral(c).is_some() => {
                // `sum`'s neutral element is `-0.0` for floats (Rust's
                // `Sum`: `[-0.0].iter().sum()` is `-0.0`), `product`'s 1.
                let s = self.scalar_of(e)?;
                let one = crate::translate::folds::neutral(c) == Some(1);
                Ok(match (s.is_float(), one) {
                    (true, false) => format!("(-{})", float_literal("0.0", s)),
                    (true, true) => float_literal("1.0", s),
                    (false, w) => int_literal(u128::from(w), s),
                })
            }
            Expr::Call(c) if conversion(c).is_some() => {
                // `f64::from(x)`: a lossless conversion, so `as`'s.
                let to = conversion(c).expect("checked");
                self.cast_to(&c.args[0], to, span)
            }
            Expr::Call(c) => {
                let Expr::Path(p) = &*c.func else { unreachable!("checked by inference") };
                let name = fn_cname(&p.path.get_ident().expect("checked").to_string());
                let mut done: Vec<(&Expr, String, bool)> = Vec::new();
                for a in &c.args {
                    let before = self.pre.len();
                    let v = self.arg(a)?;
                    self.keep_order(&mut done, before);
                    done.push((a, v, true));
                }
                let args: Vec<String> = done.into_iter().map(|(_, v, _)| v).collect();
                Ok(format!("{name}({})", args.join(", ")))
            }
            Expr::Reference(r) if !is_place(&r.expr) => {
                // Rust's temporary for a computed value (`&(a + 1.0)`).
                let t = self.ty_of(&r.expr);
                let (ct, _) = self.cpp_type_of(&self.infer.vars.deref(&t), span, false)?;
                let v = self.value(&r.expr)?;
                let tmp = self.temp("r");
                self.pre.push(format!("{ct} {tmp} = {v};"));
                Ok(format!("(&{tmp})"))
            }
            Expr::Reference(r) => {
                let inner = self.expr(&r.expr)?;
                Ok(match self.ty_of(&r.expr) {
                    Ty::Array(..) => inner,
                    Ty::Ref(..) => inner,
                    _ => format!("(&{inner})"),
                })
            }
            Expr::Array(_) | Expr::Repeat(_) if !self.konst => self.array_temp(e),
            Expr::If(_) | Expr::Block(_) | Expr::Match(_) if matches!(self.ty_of(e), Ty::Array(..)) => Err(error(
                span,
                "`if`, `match` and blocks cannot yield arrays in kernels: declare the array first \
                 (`let g: [f64; 2];`), then assign it in \
                 each branch",
            )),
            Expr::If(i) => self.if_value(e, i),
            Expr::Match(m) => self.value_into_temp(e, |emit, tmp| emit.match_arms(m, Some(tmp))),
            Expr::Block(b) => self.value_into_temp(e, |emit, tmp| {
                emit.line("{");
                emit.indent += 1;
                emit.assign_block(&b.block, tmp)?;
                emit.indent -= 1;
                emit.line("}");
                Ok(())
            }),
            _ => Err(error(span, "this expression is not supported as a value here")),
        }
    }

    /// Rust evaluates operands left to right; an operand that needs
    /// statements (a block, an `if` or `match` value) hoists them before
    /// the whole expression, so where statements were emitted since
    /// `before`, the values of the operands evaluated earlier (`done`:
    /// each with whether it still needs a copy) are copied ahead of them
    /// (`c + match n { 0 => { c = 9; 1 } _ => 2 }` adds the old `c`; a
    /// pointer argument `&v[i]` points where `i` said then). Literals need
    /// no copy.
    fn keep_order(&mut self, done: &mut [(&Expr, String, bool)], before: usize) {
        if self.pre.len() == before {
            return;
        }
        let mut at = before;
        for (e, v, pending) in done.iter_mut() {
            if !*pending || matches!(e, Expr::Lit(_)) {
                continue;
            }
            // `auto`: the value's own C++ type (an `int` index stays one,
            // a pointer argument stays the pointer it evaluated to).
            let tmp = self.temp("o");
            self.pre.insert(at, format!("const auto {tmp} = {v};"));
            at += 1;
            *v = tmp;
            *pending = false;
        }
    }

    /// A value that needs statements (a `match`, a block): a temporary
    /// declared, then `fill` emits the statements that assign it, all
    /// before the statement being emitted (in `pre`); the temporary's name.
    fn value_into_temp(
        &mut self,
        e: &Expr,
        fill: impl FnOnce(&mut Self, &str) -> syn::Result<()>,
    ) -> syn::Result<String> {
        let ct = self.value_temp_type(&self.ty_of(e), e.span())?;
        let tmp = self.temp("v");
        let saved_out = std::mem::take(&mut self.out);
        let saved_pre = std::mem::take(&mut self.pre);
        let saved_indent = self.indent;
        // Captured at indent 0: `flush_pre` re-indents every line.
        self.indent = 0;
        fill(self, &tmp)?;
        let body = std::mem::replace(&mut self.out, saved_out);
        self.indent = saved_indent;
        self.pre = saved_pre;
        self.pre.push(format!("{ct} {tmp};"));
        self.pre.extend(body.lines().map(str::to_string));
        Ok(tmp)
    }

    /// The C++ type of the temporary holding an `if`, `match` or block
    /// value; references (`match n { 0 => a, _ => b }` of `&f64`
    /// parameters) are refused rather than copied under a pointer's name.
    fn value_temp_type(&mut self, t: &Ty, span: proc_macro2::Span) -> syn::Result<String> {
        if matches!(t, Ty::Ref(..)) {
            return Err(error(
                span,
                "this `if`, `match` or block yields a reference: dereference in each branch (`0 => *a`)",
            ));
        }
        Ok(self.cpp_type_of(t, span, false)?.0)
    }

    /// The C++ name at the root of an indexed place and how many indices
    /// lie between it and `e` (`W[i]` as the base of `W[i][j]`: `W`, 1).
    fn index_root(&mut self, e: &Expr) -> (String, usize) {
        match e {
            Expr::Paren(p) => self.index_root(&p.expr),
            Expr::Group(g) => self.index_root(&g.expr),
            Expr::Index(ix) => {
                let (root, d) = self.index_root(&ix.expr);
                (root, d + 1)
            }
            Expr::Path(_) => {
                let name = match (self.infer.ext_resolved.get(&key(e)), self.infer.resolved.get(&key(e))) {
                    (Some(&x), _) => self.infer.externals[x].cname.clone(),
                    (_, Some(&b)) => self.infer.bindings[b].cname.clone(),
                    _ => String::new(),
                };
                (name, 0)
            }
            _ => (String::new(), 0),
        }
    }

    /// A call argument: references pass as pointers, scalars by value, and
    /// an array by value (`dot(*x, [1.0, 0.0])`: Rust's types say the
    /// helper takes it so) as a copy in a `__pl_arr`, made where Rust
    /// evaluates the argument: the helper's copy, whatever it or the
    /// caller's later arguments do to the array.
    fn arg(&mut self, a: &Expr) -> syn::Result<String> {
        match self.ty_of(a) {
            Ty::Ref(..) => self.expr(a),
            ty @ Ty::Array(..) => {
                let (t, suffix) = self.cpp_type_of(&ty, a.span(), false)?;
                let tmp = self.temp("a");
                let saved_out = std::mem::take(&mut self.out);
                let saved_pre = std::mem::take(&mut self.pre);
                let saved_indent = self.indent;
                // Captured at indent 0: `flush_pre` re-indents every line.
                self.indent = 0;
                self.line(&format!("__pl_arr<{t}{suffix}> {tmp};"));
                self.fill(&format!("{tmp}.v"), a, &ty)?;
                let body = std::mem::replace(&mut self.out, saved_out);
                self.indent = saved_indent;
                self.pre = saved_pre;
                self.pre.extend(body.lines().map(str::to_string));
                Ok(tmp)
            }
            _ => self.value(a),
        }
    }

    /// Emits `b` with its tail assigned to `tmp`.
    pub(super) fn assign_block(&mut self, b: &Block, tmp: &str) -> syn::Result<()> {
        let n = b.stmts.len();
        for (i, stmt) in b.stmts.iter().enumerate() {
            match stmt {
                Stmt::Expr(e, None) if i + 1 == n && !matches!(self.ty_of(e), Ty::Never) => {
                    let v = self.value(e)?;
                    self.flush_pre();
                    self.line(&format!("{tmp} = {v};"));
                }
                _ => self.block_stmt(b, i)?,
            }
        }
        Ok(())
    }

    fn block_stmt(&mut self, b: &Block, i: usize) -> syn::Result<()> {
        match &b.stmts[i] {
            Stmt::Local(local) => self.local(local),
            Stmt::Macro(m) => self.panic_site(&m.mac),
            Stmt::Item(syn::Item::Const(c)) => self.local_const(c),
            Stmt::Expr(e, _) => self.statement(e),
            _ => unreachable!("rejected by inference"),
        }
    }

    fn if_value(&mut self, e: &Expr, i: &syn::ExprIf) -> syn::Result<String> {
        // Simple branches become a ternary; anything else a temporary.
        let simple = |b: &Block| b.stmts.len() == 1 && matches!(&b.stmts[0], Stmt::Expr(x, None) if is_pure_value(x));
        let else_simple = match &i.else_branch {
            Some((_, els)) => match &**els {
                Expr::Block(b) => simple(&b.block),
                Expr::If(_) => false,
                _ => false,
            },
            None => false,
        };
        if simple(&i.then_branch) && else_simple {
            let Stmt::Expr(t, None) = &i.then_branch.stmts[0] else { unreachable!() };
            let Some((_, els)) = &i.else_branch else { unreachable!() };
            let Expr::Block(eb) = &**els else { unreachable!() };
            let Stmt::Expr(f, None) = &eb.block.stmts[0] else { unreachable!() };
            let c = self.value(&i.cond)?;
            let before = self.pre.len();
            let tv = self.value(t)?;
            let t_pre = self.pre.split_off(before);
            let fv = self.value(f)?;
            let f_pre = self.pre.split_off(before);
            if t_pre.is_empty() && f_pre.is_empty() {
                return Ok(format!("({c} ? {tv} : {fv})"));
            }
            // A branch hoisted statements (a by-value array argument's
            // copy, `h(m[i])`): before the statement they would run
            // whatever `c` decides, so each runs in its own branch.
            let ty = self.ty_of(e);
            let ct = self.value_temp_type(&ty, e.span())?;
            let tmp = self.temp("v");
            self.pre.push(format!("{ct} {tmp};"));
            self.pre.push(format!("if ({c}) {{"));
            self.pre.extend(t_pre.iter().map(|s| format!("    {s}")));
            self.pre.push(format!("    {tmp} = {tv};"));
            self.pre.push("} else {".to_string());
            self.pre.extend(f_pre.iter().map(|s| format!("    {s}")));
            self.pre.push(format!("    {tmp} = {fv};"));
            self.pre.push("}".to_string());
            return Ok(tmp);
        }
        let t = self.ty_of(e);
        let ct = self.value_temp_type(&t, e.span())?;
        let tmp = self.temp("v");
        let c = self.value(&i.cond)?;
        let saved_out = std::mem::take(&mut self.out);
        let saved_pre = std::mem::take(&mut self.pre);
        let saved_indent = self.indent;
        self.indent = 0;
        self.line(&format!("if ({c}) {{"));
        self.indent += 1;
        self.assign_block(&i.then_branch, &tmp)?;
        self.indent -= 1;
        let mut els = i.else_branch.as_ref().map(|(_, e)| &**e);
        while let Some(x) = els {
            match x {
                Expr::If(inner) => {
                    self.line("} else {");
                    self.indent += 1;
                    let v = self.if_value(x, inner)?;
                    self.flush_pre();
                    self.line(&format!("{tmp} = {v};"));
                    self.indent -= 1;
                    els = None;
                }
                Expr::Block(b) => {
                    self.line("} else {");
                    self.indent += 1;
                    self.assign_block(&b.block, &tmp)?;
                    self.indent -= 1;
                    els = None;
                }
                other => return Err(error(other.span(), "unexpected `else` branch")),
            }
        }
        self.line("}");
        let body = std::mem::replace(&mut self.out, saved_out);
        self.indent = saved_indent;
        let mut pre = saved_pre;
        pre.push(format!("{ct} {tmp};"));
        pre.extend(body.lines().map(str::to_string));
        self.pre = pre;
        Ok(tmp)
    }

    fn literal(&mut self, e: &Expr, lit: &Lit) -> syn::Result<String> {
        match lit {
            Lit::Bool(b) => Ok(if b.value { "true" } else { "false" }.into()),
            Lit::Int(i) => {
                let s = self.scalar_of(e)?;
                if s.is_float() {
                    let digits = i.base10_digits();
                    return Ok(float_literal(digits, s));
                }
                let v: u128 = i.base10_parse().map_err(|_| error(i.span(), "integer literal out of range"))?;
                Ok(int_literal(v, s))
            }
            Lit::Float(f) => {
                let s = self.scalar_of(e)?;
                Ok(float_literal(f.base10_digits(), s))
            }
            _ => Err(error(lit.span(), "unsupported literal")),
        }
    }

    fn binary(&mut self, b: &syn::ExprBinary) -> syn::Result<String> {
        use BinOp::*;
        let l_ty = self.ty_of(&b.left);
        let s = self.infer.vars.scalar(&l_ty).ok_or_else(|| {
            error(b.left.span(), "cannot infer the type of this operand (a helper's result?): annotate a `let`")
        })?;
        let compound = is_compound(&b.op);
        // A compound assignment whose place has effects (a helper call or
        // a block in an index) must evaluate it once, after the right
        // operand as Rust does: through a pointer.
        let through_pointer = compound && has_effects(&b.left);
        let (l, r) = if through_pointer {
            let r = self.value(&b.right)?;
            let place = self.expr(&b.left)?;
            let p = self.temp("p");
            self.pre.push(format!("auto* const {p} = &({place});"));
            (format!("(*{p})"), r)
        } else {
            let l = self.value(&b.left)?;
            let hoisted = self.pre.len();
            let r = self.value(&b.right)?;
            if matches!(b.op, And(_) | Or(_)) && self.pre.len() != hoisted {
                // The right operand hoisted statements (a block, an `if`
                // or `match` value, a reduction's loop): before the
                // statement they would run whatever the left operand
                // decides, so they run where Rust evaluates the right
                // operand, only when the left does not decide.
                let r_pre = self.pre.split_off(hoisted);
                let tmp = self.temp("b");
                let run_right = if matches!(b.op, And(_)) { tmp.clone() } else { format!("!{tmp}") };
                self.pre.push(format!("bool {tmp} = {l};"));
                self.pre.push(format!("if ({run_right}) {{"));
                self.pre.extend(r_pre.iter().map(|s| format!("    {s}")));
                self.pre.push(format!("    {tmp} = {r};"));
                self.pre.push("}".to_string());
                return Ok(tmp);
            }
            // A compound assignment evaluates its right operand first, as
            // the C++ does; any other operator reads its left operand first.
            if compound || matches!(b.op, And(_) | Or(_)) {
                (l, r)
            } else {
                let mut done = [(&*b.left, l, true)];
                self.keep_order(&mut done, hoisted);
                let [(_, l, _)] = done;
                (l, r)
            }
        };
        let op = match b.op {
            Add(_) | AddAssign(_) => "+",
            Sub(_) | SubAssign(_) => "-",
            Mul(_) | MulAssign(_) => "*",
            Div(_) | DivAssign(_) => "/",
            Rem(_) | RemAssign(_) => "%",
            BitAnd(_) | BitAndAssign(_) => "&",
            BitOr(_) | BitOrAssign(_) => "|",
            BitXor(_) | BitXorAssign(_) => "^",
            Shl(_) | ShlAssign(_) => "<<",
            Shr(_) | ShrAssign(_) => ">>",
            Eq(_) => "==",
            Ne(_) => "!=",
            Lt(_) => "<",
            Le(_) => "<=",
            Gt(_) => ">",
            Ge(_) => ">=",
            And(_) => "&&",
            Or(_) => "||",
            _ => return Err(error(b.op.span(), "unsupported operator")),
        };
        // The Rust semantics of the operation, as a C++ expression.
        let lhs_place = match (compound, through_pointer) {
            (true, true) => l.clone(),
            (true, false) => self.expr(&b.left)?,
            _ => String::new(),
        };
        if self.konst && op == "%" && s.is_float() {
            return Err(error(b.op.span(), "`%` on floats is not supported in module-level constants"));
        }
        let computed = match op {
            // Constants: Rust rejects overflow, division by zero and
            // oversized shifts at compile time, so plain C++ operators
            // (constant expressions) mean the same.
            _ if self.konst => None,
            "+" | "-" | "*" if s.is_signed_int() => {
                let f = match op {
                    "+" => "__pl_wadd",
                    "-" => "__pl_wsub",
                    _ => "__pl_wmul",
                };
                Some(format!("{f}({l}, {r})"))
            }
            // usize arithmetic on `int` indices would wrap at 32 bits (or
            // be undefined): 64-bit unless the result provably fits.
            "+" | "-" | "*" if s == Scalar::Usize && !self.fits_int(b) => {
                Some(format!("((unsigned long long)({l}) {op} (unsigned long long)({r}))"))
            }
            "%" if s.is_float() => Some(format!("{}({l}, {r})", if s == Scalar::F32 { "fmodf" } else { "fmod" })),
            // Rust panics on a zero divisor and on `MIN / -1`: checked
            // unless the divisor is a positive literal.
            "/" | "%" if s.is_int() && !matches!(int_literal_value(&b.right), Some(v) if v > 0) => {
                self.may_panic = true;
                let f = if op == "/" { "__pl_div" } else { "__pl_rem" };
                Some(format!("{f}<{}>({l}, {r})", cpp_scalar(s, false)))
            }
            "<<" | ">>" => {
                let f = if op == "<<" { "__pl_shl" } else { "__pl_shr" };
                let cast = cpp_scalar(s, false);
                Some(format!("{f}(({cast})({l}), (unsigned int)({r}))"))
            }
            _ => None,
        };
        Ok(match (compound, computed) {
            (true, Some(c)) => format!("{lhs_place} = {c}"),
            (true, None) => format!("{lhs_place} {op}= {r}"),
            (false, Some(c)) => c,
            (false, None) => format!("({l} {op} {r})"),
        })
    }

    fn cast(&mut self, c: &syn::ExprCast) -> syn::Result<String> {
        let to = scalar_of_type(&c.ty)?;
        self.cast_to(&c.expr, to, c.span())
    }

    /// `inner as to`, with Rust's meaning.
    fn cast_to(&mut self, inner: &Expr, to: Scalar, span: proc_macro2::Span) -> syn::Result<String> {
        let from_ty = self.ty_of(inner);
        if self.infer.vars.scalar(&from_ty).is_none() && !self.konst && to != Scalar::Bool {
            // A value whose type only rustc knows (`count(a) as f64`, a
            // helper's result): C++ converts to a float as Rust does from
            // any scalar, and picks Rust's saturating cast to an integer
            // from a float by overloading (`__pl_as_int`).
            let v = self.value(inner)?;
            if to.is_float() {
                return Ok(format!("(({})({v}))", cpp_scalar(to, false)));
            }
            let target = if to == Scalar::Usize { Scalar::U64 } else { to };
            let lo = int_limit(target, "MIN").expect("integer");
            let hi = int_limit(target, "MAX").expect("integer");
            return Ok(format!("__pl_as_int<{}>({v}, {lo}, {hi})", target.cpp()));
        }
        let from = self.scalar_of(inner)?;
        let v = self.value(inner)?;
        if from == to {
            return Ok(v);
        }
        if from.is_float() && to.is_int() && self.konst {
            return Err(error(span, "float-to-integer casts are not supported in module-level constants"));
        }
        if from.is_float() && to.is_int() {
            // Rust saturates: NaN -> 0, out of range -> MIN/MAX.
            let target = if to == Scalar::Usize { Scalar::U64 } else { to };
            let lo = int_limit(target, "MIN").expect("integer");
            let hi = int_limit(target, "MAX").expect("integer");
            return Ok(format!("__pl_f2i<{}>({v}, {lo}, {hi})", target.cpp()));
        }
        Ok(format!("(({})({v}))", cpp_scalar(to, false)))
    }

    fn method(&mut self, e: &Expr, m: &syn::ExprMethodCall) -> syn::Result<String> {
        let name = m.method.to_string();
        if self.konst {
            return Err(error(m.span(), "method calls are not supported in module-level constants"));
        }
        if name == "len" {
            // An array's length, known from its type (inference checked).
            let n =
                self.infer.lens.get(&key(m)).copied().ok_or_else(|| error(m.span(), "`len` of an unknown array"))?;
            return Ok(int_literal(n as u128, Scalar::Usize));
        }
        // The receiver's scalar (a `bool` method's result is not it).
        let recv_ty = self.infer.vars.deref(&self.ty_of(&m.receiver));
        let s = self.infer.vars.scalar(&recv_ty).map_or_else(|| self.scalar_of(e), Ok)?;
        let mut done: Vec<(&Expr, String, bool)> = vec![(&*m.receiver, self.value(&m.receiver)?, true)];
        for a in &m.args {
            let before = self.pre.len();
            let v = self.value(a)?;
            self.keep_order(&mut done, before);
            done.push((a, v, true));
        }
        let mut values = done.into_iter().map(|(_, v, _)| v);
        let recv = values.next().expect("the receiver");
        let args: Vec<String> = values.collect();
        let call = |f: &str, args: &[String]| {
            let all: Vec<&str> = std::iter::once(recv.as_str()).chain(args.iter().map(String::as_str)).collect();
            format!("{f}({})", all.join(", "))
        };
        if s.is_int() {
            // The type spelled out where a template would deduce it from
            // two operands: an `int` index beside a 64-bit usize would not
            // deduce one `T`.
            let t = cpp_scalar(s, false);
            let zero = int_literal(0, s);
            return Ok(match name.as_str() {
                "abs" => call("__pl_iabs", &[]),
                "signum" => call("__pl_isignum", &[]),
                "min" => call(&format!("__pl_imin<{t}>"), &args),
                "max" => call(&format!("__pl_imax<{t}>"), &args),
                "clamp" => {
                    self.may_panic = true;
                    call(&format!("__pl_iclamp<{t}>"), &args)
                }
                "pow" => call(&format!("__pl_ipow<{t}>"), &args),
                // What `+ - *` emit (the translation's arithmetic wraps, as
                // release Rust's does; these wrap in every build).
                "wrapping_add" | "wrapping_sub" | "wrapping_mul" => {
                    let op = match name.as_str() {
                        "wrapping_add" => "+",
                        "wrapping_sub" => "-",
                        _ => "*",
                    };
                    let (a, b) = (&recv, &args[0]);
                    if s.is_signed_int() {
                        format!("__pl_w{}({a}, {b})", &name[9..])
                    } else {
                        // Unsigned C++ arithmetic wraps; `usize` (an `int`
                        // loop index included) in 64 bits.
                        let u = if s == Scalar::Usize { "unsigned long long" } else { t };
                        format!("(({u})({a}) {op} ({u})({b}))")
                    }
                }
                // Rust's panics of `%` and `/` (zero, MIN by -1) included.
                "rem_euclid" | "div_euclid" => {
                    self.may_panic = true;
                    match (s.is_signed_int(), name.as_str()) {
                        (true, _) => call(&format!("__pl_i{name}<{t}>"), &args),
                        // Unsigned: `%` and `/` are already euclidean.
                        (false, "rem_euclid") => call(&format!("__pl_rem<{t}>"), &args),
                        (false, _) => call(&format!("__pl_div<{t}>"), &args),
                    }
                }
                "is_positive" => format!("({recv} > {zero})"),
                "is_negative" => format!("({recv} < {zero})"),
                _ => return Err(error(m.method.span(), format!("`{name}` is a float method"))),
            });
        }
        let f32 = s == Scalar::F32;
        // C's function for the receiver's type (`sqrt`, `sqrtf`).
        let c = |d: &str| if f32 { format!("{d}f") } else { d.to_string() };
        let one = float_literal("1.0", s);
        Ok(match name.as_str() {
            "abs" => call(&c("fabs"), &[]),
            "min" => call("__pl_fmin", &args),
            "max" => call("__pl_fmax", &args),
            "mul_add" => call(&c("fma"), &args),
            "powf" => call(&c("pow"), &args),
            "exp_m1" => call(&c("expm1"), &[]),
            "ln" => call(&c("log"), &[]),
            "ln_1p" => call(&c("log1p"), &[]),
            "sqrt" | "exp" | "exp2" | "log2" | "log10" | "sin" | "cos" | "tan" | "asin" | "acos" | "atan" | "sinh"
            | "cosh" | "tanh" | "floor" | "ceil" | "round" | "trunc" => call(&c(&name), &[]),
            "atan2" | "hypot" | "copysign" => call(&c(&name), &args),
            // Rust's own definitions, not C's (`cbrt` correctly rounded,
            // `asinh` in its reciprocal form, `acosh` below 1 NaN), and
            // the euclidean pair, in the prelude.
            "cbrt" | "asinh" | "acosh" | "atanh" | "fract" | "rem_euclid" | "div_euclid" => {
                call(&format!("__pl_{name}"), &args)
            }
            "is_nan" | "is_finite" | "is_infinite" | "is_sign_positive" | "is_sign_negative" => {
                call(&format!("__pl_{name}"), &[])
            }
            // `self.ln() / base.ln()`, as Rust defines it.
            "log" => format!("({} / {}({}))", call(&c("log"), &[]), c("log"), args[0]),
            "recip" => format!("({one} / {recv})"),
            // Rust multiplies by a constant of the receiver's type.
            "to_radians" | "to_degrees" => {
                let k = match (name.as_str(), f32) {
                    ("to_radians", false) => format!("{:e}", std::f64::consts::PI / 180.0),
                    ("to_degrees", false) => format!("{:e}", 180.0f64 / std::f64::consts::PI),
                    ("to_radians", true) => format!("{:e}f", std::f32::consts::PI / 180.0),
                    // Rust's literal, 57.29577951308232..._f32: the same f32.
                    _ => format!("{:e}f", (180.0f64 / std::f64::consts::PI) as f32),
                };
                format!("({recv} * {k})")
            }
            "clamp" => {
                self.may_panic = true;
                call("__pl_fclamp", &args)
            }
            "signum" => call("__pl_signum", &[]),
            "powi" => call("__pl_powi", &args),
            _ => return Err(error(m.method.span(), format!("unsupported method `{name}`"))),
        })
    }
}

/// Whether evaluating `e` can change something (a helper call, an
/// assignment, a block or branch with statements, a panic macro):
/// evaluating it twice would differ from once.
fn has_effects(e: &Expr) -> bool {
    struct Finder(bool);
    impl<'ast> syn::visit::Visit<'ast> for Finder {
        fn visit_expr(&mut self, e: &'ast Expr) {
            self.0 |= match e {
                Expr::Call(_) | Expr::Block(_) | Expr::If(_) | Expr::Match(_) | Expr::Assign(_) | Expr::Macro(_) => {
                    true
                }
                Expr::Binary(b) => is_compound(&b.op),
                _ => false,
            };
            syn::visit::visit_expr(self, e);
        }
    }
    let mut f = Finder(false);
    syn::visit::Visit::visit_expr(&mut f, e);
    f.0
}

/// Whether `e` can be evaluated as part of a C++ expression without
/// statements (no blocks, ifs with statements, loops or jumps). A call's
/// argument may still hoist statements (a by-value array's copy):
/// `if_value` checks what its branches hoisted.
fn is_pure_value(e: &Expr) -> bool {
    match e {
        Expr::Lit(_) | Expr::Path(_) => true,
        Expr::Paren(p) => is_pure_value(&p.expr),
        Expr::Unary(u) => is_pure_value(&u.expr),
        Expr::Binary(b) => is_pure_value(&b.left) && is_pure_value(&b.right),
        Expr::Index(i) => is_pure_value(&i.expr) && is_pure_value(&i.index),
        Expr::Cast(c) => is_pure_value(&c.expr),
        Expr::MethodCall(m) => is_pure_value(&m.receiver) && m.args.iter().all(is_pure_value),
        Expr::Call(c) => c.args.iter().all(is_pure_value),
        // A computed value behind `&` is a temporary made before the
        // statement: not part of a ternary that may not evaluate it.
        Expr::Reference(r) => is_place(&r.expr) && is_pure_value(&r.expr),
        _ => false,
    }
}
