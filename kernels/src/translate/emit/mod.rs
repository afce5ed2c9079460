//! Pass 2 of the translation: C++ text.
//!
//! [`Emit`] walks the body again with the types and bindings that
//! `super::infer` recorded and writes C++ with explicit types. This file
//! holds the emitter's state, C++ types and the statements (`let`, `if`,
//! loops, jumps); expressions are in `expr.rs`.

mod arrays;
mod expr;
mod match_arms;

pub(super) use arrays::dims;

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{BinOp, Block, Expr, Stmt, UnOp};

use super::infer::{key, Infer};
use super::literals::{int_literal_value, literal_fits_i32};
use super::syntax::LoopRange;
use crate::types::{error, Scalar, Ty, UNKNOWN_LEN};

/// C++ spelling of a scalar; `narrow` usize values are `int`.
pub(super) fn cpp_scalar(s: Scalar, narrow: bool) -> &'static str {
    if s == Scalar::Usize && narrow {
        "int"
    } else {
        s.cpp()
    }
}

/// Pass 2: C++ text.
pub(super) struct Emit<'a> {
    pub(super) infer: &'a mut Infer,
    pub(super) out: String,
    pub(super) indent: usize,
    /// Statements that must run before the statement being emitted.
    pub(super) pre: Vec<String>,
    pub(super) temps: usize,
    /// Enclosing labelled loops, innermost last: (Rust label, C++ label
    /// stem). `break 'a` is `goto stem_exit;`, `continue 'a` `goto
    /// stem_next;` (C++ has no labelled loops).
    pub(super) labels: Vec<(String, String)>,
    /// Whether a checked integer division or remainder was emitted.
    pub(super) may_panic: bool,
    /// A module-level constant's initialiser: C++ constant expressions
    /// only (Rust rejects overflow and division by zero in constants, so
    /// plain operators have Rust's meaning there).
    pub(super) konst: bool,
    /// The function's return type: a panic site returns its zero.
    pub(super) ret: Option<Scalar>,
    /// `panics::function_id` of the function's C++ name.
    pub(super) function_id: i64,
}

impl Emit<'_> {
    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn flush_pre(&mut self) {
        for s in std::mem::take(&mut self.pre) {
            self.line(&s);
        }
    }

    fn ty_of(&self, e: &Expr) -> Ty {
        self.infer.types.get(&key(e)).cloned().unwrap_or(Ty::Unit)
    }

    fn scalar_of(&mut self, e: &Expr) -> syn::Result<Scalar> {
        let t = self.ty_of(e);
        self.infer.vars.scalar(&t).ok_or_else(|| {
            let mut inner = e;
            while let Expr::Paren(p) = inner {
                inner = &p.expr;
            }
            let message = match inner {
                // The translation sees one function at a time: the
                // helper's return type is rustc's to know.
                Expr::Call(c) => {
                    let name = match &*c.func {
                        Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default(),
                        _ => String::new(),
                    };
                    format!(
                        "cannot infer the type of `{name}(..)`'s result here (a kernel is translated without its \
                         helpers' signatures): bind it to a `let` of the helper's return type, \
                         `let v: <its return type> = {name}(..);`, and use `v`"
                    )
                }
                _ => "cannot infer the type of this value (a helper's result or a module-level constant?): \
                      bind it to a `let` annotated with its type (`let v: i32 = ...;`) and use that"
                    .to_string(),
            };
            error(e.span(), message)
        })
    }

    fn temp(&mut self, base: &str) -> String {
        loop {
            let name = format!("pl_{base}{}", self.temps);
            self.temps += 1;
            if !self.infer.used_names.contains(&name) {
                return name;
            }
        }
    }

    pub(super) fn cpp_type_of(&mut self, t: &Ty, span: Span, narrow: bool) -> syn::Result<(String, String)> {
        // (type, array suffix)
        match t {
            Ty::Array(_, UNKNOWN_LEN) => Err(error(
                span,
                "this array's length is not visible here (a row of a module-level constant): annotate its type",
            )),
            Ty::Array(elem, n) => {
                let (inner, suffix) = self.cpp_type_of(elem, span, false)?;
                Ok((inner, format!("[{n}]{suffix}")))
            }
            _ => {
                let s = self.infer.vars.scalar(t).ok_or_else(|| {
                    error(
                        span,
                        "cannot infer this local's type (bound to a helper's result, or to a module-level \
                         constant or its row, whose type this function does not show?): annotate it, \
                         `let x: f64 = ...`, `let row: [f64; 3] = W[q];`",
                    )
                })?;
                Ok((cpp_scalar(s, narrow).into(), String::new()))
            }
        }
    }

    /// Emits the statements of a block (without braces); with `ret`, a tail
    /// expression is returned.
    pub(super) fn block_body(&mut self, b: &Block, ret: bool) -> syn::Result<()> {
        let n = b.stmts.len();
        for (i, stmt) in b.stmts.iter().enumerate() {
            match stmt {
                Stmt::Local(local) => self.local(local)?,
                Stmt::Item(syn::Item::Const(c)) => self.local_const(c)?,
                Stmt::Macro(m) => self.panic_site(&m.mac)?,
                Stmt::Expr(e, semi) => {
                    let tail = i + 1 == n && semi.is_none();
                    if tail && ret && matches!(self.ty_of(e), Ty::Array(..)) {
                        self.return_array(e)?;
                    } else if tail && ret && !matches!(self.ty_of(e), Ty::Unit | Ty::Never) {
                        let v = self.value(e)?;
                        self.flush_pre();
                        self.line(&format!("return {v};"));
                    } else {
                        self.statement(e)?;
                    }
                }
                _ => unreachable!("rejected by inference"),
            }
        }
        Ok(())
    }

    fn nested_block(&mut self, b: &Block) -> syn::Result<()> {
        self.indent += 1;
        self.block_body(b, false)?;
        self.indent -= 1;
        Ok(())
    }

    fn local(&mut self, local: &syn::Local) -> syn::Result<()> {
        if let (syn::Pat::Wild(_), Some(init)) = (&local.pat, &local.init) {
            // `let _ = value;`: the value's effects (a helper's), if any.
            let v = self.value(&init.expr)?;
            self.flush_pre();
            self.line(&format!("(void)({v});"));
            return Ok(());
        }
        let id = self.infer.resolved[&key(local)];
        if let Some(init) = &local.init {
            // An immutable usize whose value provably fits stays `int`
            // (a `mut` one may grow past it later).
            let fits = self.bound(&init.expr).filter(|&m| m <= i32::MAX as u128);
            if self.infer.vars.scalar(&self.infer.bindings[id].ty.clone()) == Some(Scalar::Usize)
                && !pattern_is_mut(&local.pat)
                && fits.is_some()
            {
                self.infer.bindings[id].narrow = true;
                self.infer.bindings[id].max = fits;
            }
        }
        let b = self.infer.bindings[id].clone();
        if let (Ty::Ref(_, mutable), Some(init)) = (&b.ty, &local.init) {
            // A reference to a place: a C++ pointer, as reference
            // parameters are (`auto` gives the element's or the row's
            // pointer type, narrow usize included).
            let p = self.expr(&init.expr)?;
            self.flush_pre();
            let c = if *mutable { "" } else { "const " };
            self.line(&format!("{c}auto* {} = {p};", b.cname));
            return Ok(());
        }
        let (t, suffix) = self.cpp_type_of(&b.ty, local.span(), b.narrow)?;
        let Some(init) = &local.init else {
            self.line(&format!("{t} {}{suffix};", b.cname));
            return Ok(());
        };
        if matches!(b.ty, Ty::Array(..)) {
            return self.array_local(&b.cname, &b.ty, &init.expr, local.span());
        }
        let v = self.value(&init.expr)?;
        self.flush_pre();
        self.line(&format!("{t} {}{suffix} = {v};", b.cname));
        Ok(())
    }

    /// The largest value a usize expression can take, where it combines
    /// literals and narrow indices of known bounds with `+ * / %` and
    /// `min`/`max`; `None` when unknown (a subtraction may wrap, as Rust's
    /// release builds do, to near `usize::MAX`).
    pub(super) fn bound(&self, e: &Expr) -> Option<u128> {
        match e {
            Expr::Lit(_) => int_literal_value(e),
            Expr::Paren(p) => self.bound(&p.expr),
            Expr::Group(g) => self.bound(&g.expr),
            Expr::Path(_) => self
                .infer
                .resolved
                .get(&key(e))
                .and_then(|&id| Some(&self.infer.bindings[id]).filter(|b| b.narrow).and_then(|b| b.max)),
            Expr::Binary(b) => self.binary_bound(b),
            // An array's length (`0..a.len()`).
            Expr::MethodCall(m) if m.args.is_empty() && m.method == "len" => {
                self.infer.lens.get(&key(m)).map(|&n| n as u128).filter(|&n| n != UNKNOWN_LEN as u128)
            }
            Expr::MethodCall(m) if m.args.len() == 1 => {
                let (a, b) = (self.bound(&m.receiver)?, self.bound(&m.args[0])?);
                match m.method.to_string().as_str() {
                    "min" => Some(a.min(b)),
                    "max" => Some(a.max(b)),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    fn binary_bound(&self, b: &syn::ExprBinary) -> Option<u128> {
        let (l, r) = (self.bound(&b.left)?, self.bound(&b.right)?);
        match b.op {
            BinOp::Add(_) => l.checked_add(r),
            BinOp::Mul(_) => l.checked_mul(r),
            BinOp::Div(_) => Some(l),
            BinOp::Rem(_) => Some(l.min(r.saturating_sub(1))),
            _ => None,
        }
    }

    /// Whether a usize operation's result provably fits an `int`, so that
    /// `int` operands may compute it as they are.
    pub(super) fn fits_int(&self, b: &syn::ExprBinary) -> bool {
        self.binary_bound(b).is_some_and(|m| m <= i32::MAX as u128)
    }

    /// An array-valued expression as something indexable.
    pub(super) fn array_source(&mut self, e: &Expr) -> syn::Result<String> {
        match e {
            Expr::Unary(u) if matches!(u.op, UnOp::Deref(_)) => self.expr(&u.expr),
            Expr::Paren(p) => self.array_source(&p.expr),
            Expr::Call(c) if crate::translate::infer::is_element(c) => self.expr(e),
            // A place whose indices have effects (`m[bump(&mut c)]`): its
            // address taken once, since a copy reads or writes it once per
            // element.
            Expr::Index(_) if !crate::translate::iterate::effect_free(e) => {
                let place = self.expr(e)?;
                let tmp = self.temp("row");
                self.pre.push(format!("auto* {tmp} = {place};"));
                Ok(tmp)
            }
            Expr::Call(_) => {
                // A helper's array result (`__pl_arr`): called once, into a
                // temporary whose array the copy then reads.
                let call = self.expr(e)?;
                let tmp = self.temp("res");
                self.pre.push(format!("const auto {tmp} = {call};"));
                Ok(format!("{tmp}.v"))
            }
            _ => self.expr(e),
        }
    }

    /// The largest value of `e` when it is a `for` variable over literal bounds.
    fn loop_max(&self, e: &Expr) -> Option<u128> {
        match e {
            Expr::Paren(p) => self.loop_max(&p.expr),
            Expr::Group(g) => self.loop_max(&g.expr),
            Expr::Path(_) => self.infer.resolved.get(&key(e)).and_then(|&id| self.infer.bindings[id].max),
            _ => None,
        }
    }

    /// Emits `e` as a statement.
    fn statement(&mut self, e: &Expr) -> syn::Result<()> {
        match e {
            Expr::If(i) => self.if_statement(i),
            Expr::Match(m) => self.match_arms(m, None),
            Expr::ForLoop(f) => self.for_loop(f),
            Expr::While(w) => {
                let c = self.value(&w.cond)?;
                if self.pre.is_empty() {
                    self.line(&format!("while ({c}) {{"));
                } else {
                    let pre = std::mem::take(&mut self.pre);
                    self.line("while (true) {");
                    self.indent += 1;
                    for s in pre {
                        self.line(&s);
                    }
                    self.line(&format!("if (!({c})) break;"));
                    self.indent -= 1;
                }
                self.stop_after_panic(&w.body);
                let label = self.enter_label(&w.label);
                self.loop_body(&label, &w.body)?;
                self.line("}");
                self.leave_label(&label, &w.body);
                Ok(())
            }
            Expr::Loop(l) => {
                self.line("while (true) {");
                self.stop_after_panic(&l.body);
                let label = self.enter_label(&l.label);
                self.loop_body(&label, &l.body)?;
                self.line("}");
                self.leave_label(&label, &l.body);
                Ok(())
            }
            Expr::Block(b) => {
                self.line("{");
                self.nested_block(&b.block)?;
                self.line("}");
                Ok(())
            }
            Expr::Break(b) => self.jump(b.label.as_ref(), "break", "exit", b.span()),
            Expr::Continue(c) => self.jump(c.label.as_ref(), "continue", "next", c.span()),
            Expr::Return(r) => {
                match &r.expr {
                    Some(v) if matches!(self.infer.ret, Ty::Array(..)) => self.return_array(v)?,
                    Some(v) => {
                        let v = self.value(v)?;
                        self.flush_pre();
                        self.line(&format!("return {v};"));
                    }
                    None => self.line("return;"),
                }
                Ok(())
            }
            Expr::Paren(p) => self.statement(&p.expr),
            Expr::Macro(m) => self.panic_site(&m.mac),
            // `()`: an arm or a branch that does nothing.
            Expr::Tuple(t) if t.elems.is_empty() => Ok(()),
            Expr::Assign(a) if matches!(self.infer.vars.deref(&self.ty_of(&a.left)), Ty::Array(..)) => {
                let ty = self.infer.vars.deref(&self.ty_of(&a.left));
                self.array_assign(&a.left, &a.right, &ty)
            }
            _ => {
                let s = self.expr(e)?;
                self.flush_pre();
                self.line(&format!("{s};"));
                Ok(())
            }
        }
    }

    /// At the top of a `while` or `loop` body that can panic: Rust stops
    /// at a panic, the device runs on with zeros (`__pl_stopped`), so the
    /// loop ends there rather than wait for a value that never comes.
    fn stop_after_panic(&mut self, body: &Block) {
        if !can_panic(body) {
            return;
        }
        let ret = self.zero_return();
        self.indent += 1;
        self.line(&format!("if (__pl_stopped()) {{ {ret} }}"));
        self.indent -= 1;
    }

    /// Enters a loop with `label` (if any): its C++ stem and Rust name.
    fn enter_label(&mut self, label: &Option<syn::Label>) -> Option<(String, String)> {
        let l = label.as_ref()?;
        let name = l.name.ident.to_string();
        let stem = self.temp(&format!("lbl_{name}_"));
        self.labels.push((name.clone(), stem.clone()));
        Some((name, stem))
    }

    /// A loop's body; with a label some `continue` names, in a block of
    /// its own followed by the `continue` target (a `goto` out of the
    /// block crosses no declaration).
    fn loop_body(&mut self, label: &Option<(String, String)>, body: &Block) -> syn::Result<()> {
        match label {
            Some((name, stem)) if label_used(body, name, false) => {
                self.indent += 1;
                self.line("{");
                self.nested_block(body)?;
                self.line("}");
                self.line(&format!("{stem}_next: ;"));
                self.indent -= 1;
                Ok(())
            }
            _ => self.nested_block(body),
        }
    }

    /// Leaves a labelled loop: the `break` target after it, if used.
    fn leave_label(&mut self, label: &Option<(String, String)>, body: &Block) {
        if let Some((name, stem)) = label {
            self.labels.pop();
            if label_used(body, name, true) {
                self.line(&format!("{stem}_exit: ;"));
            }
        }
    }

    /// The C++ stem of the innermost enclosing loop labelled `l`.
    /// `break` or `continue` (`plain`): C++'s own for the innermost loop,
    /// a `goto` to the labelled loop's `{stem}_{target}` label otherwise.
    fn jump(&mut self, label: Option<&syn::Lifetime>, plain: &str, target: &str, span: Span) -> syn::Result<()> {
        match label {
            Some(l) => {
                let stem = self.label_stem(l, span)?;
                self.line(&format!("goto {stem}_{target};"));
            }
            None => self.line(&format!("{plain};")),
        }
        Ok(())
    }

    fn label_stem(&self, l: &syn::Lifetime, span: Span) -> syn::Result<String> {
        let name = l.ident.to_string();
        self.labels
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, stem)| stem.clone())
            .ok_or_else(|| error(span, format!("no enclosing loop is labelled `'{name}`")))
    }

    /// The `return` after a device panic: zero of the result's type (the
    /// loop's results are discarded).
    fn zero_return(&self) -> String {
        match self.ret {
            Some(s) => format!("return ({})0;", cpp_scalar(s, false)),
            None if matches!(self.infer.ret, Ty::Array(..)) => "return {};".to_string(),
            None => "return;".to_string(),
        }
    }

    /// Returns array value `e` from a helper whose result is an array: a
    /// `__pl_arr` filled as a `let` of the result's type would be.
    fn return_array(&mut self, e: &Expr) -> syn::Result<()> {
        let ty = self.infer.ret.clone();
        let (t, suffix) = self.cpp_type_of(&ty, e.span(), false)?;
        let r = self.temp("ret");
        self.line(&format!("__pl_arr<{t}{suffix}> {r};"));
        self.fill(&format!("{r}.v"), e, &ty)?;
        self.line(&format!("return {r};"));
        Ok(())
    }

    /// A `panic!` or `unreachable!` (an `assert!`'s too, see
    /// `panics::asserts_as_ifs`): the panic record with the site and this
    /// function's id (see `translate/panics.rs`), then a return (the
    /// loop's results are discarded; the record is the error).
    fn panic_site(&mut self, m: &syn::Macro) -> syn::Result<()> {
        let site = self.infer.macros.get(&key(m)).ok_or_else(|| error(m.span(), "unparsed macro"))?.site;
        self.may_panic = true;
        let ret = self.zero_return();
        // Taken out and put back: the buffer (where the values were typed,
        // by address) stays the same.
        let values = self.infer.macros.get_mut(&key(m)).map(|k| std::mem::take(&mut k.values)).unwrap_or_default();
        let r = self.panic_with_values(site, &values, &ret);
        if let Some(k) = self.infer.macros.get_mut(&key(m)) {
            k.values = values;
        }
        r
    }

    /// [`Emit::panic_site`]'s record: the site's, with the values its
    /// message formats.
    fn panic_with_values(&mut self, site: usize, values: &[Expr], ret: &str) -> syn::Result<()> {
        if values.is_empty() {
            self.line(&format!("__pl_panic(11, {site}, {}ll); {ret}", self.function_id));
            return Ok(());
        }
        // The message's values and their types (4 bits a slot), for the
        // runtime to render the site's template (`panic_format`).
        let mut types = 0u64;
        let mut bits = Vec::new();
        for (k, v) in values.iter().enumerate() {
            // A reference formats as its value (`{rho}` of `rho: &f64`).
            let scalar = match self.ty_of(v) {
                Ty::Ref(inner, _) => self.infer.vars.scalar(&inner),
                t => self.infer.vars.scalar(&t),
            };
            let scalar = scalar.ok_or_else(|| error(v.span(), "cannot infer the type of this formatted value"))?;
            types |= crate::panic_format::type_code(scalar) << (4 * k);
            bits.push(format!("__pl_bits({})", self.value(v)?));
        }
        bits.resize(crate::panic_format::MAX_VALUES, "0ll".into());
        self.flush_pre();
        self.line(&format!("__pl_panic_v({site}, {}ll, {types}ll, {}); {ret}", self.function_id, bits.join(", ")));
        Ok(())
    }

    fn if_statement(&mut self, i: &syn::ExprIf) -> syn::Result<()> {
        let c = self.value(&i.cond)?;
        self.flush_pre();
        self.line(&format!("if ({c}) {{"));
        self.nested_block(&i.then_branch)?;
        let mut els = i.else_branch.as_ref().map(|(_, e)| &**e);
        while let Some(e) = els {
            match e {
                Expr::If(inner) => {
                    // `else if` whose condition needs statements nests instead.
                    let c = self.value(&inner.cond)?;
                    if self.pre.is_empty() {
                        self.line(&format!("}} else if ({c}) {{"));
                        self.nested_block(&inner.then_branch)?;
                        els = inner.else_branch.as_ref().map(|(_, e)| &**e);
                    } else {
                        self.pre.clear();
                        self.line("} else {");
                        self.indent += 1;
                        self.if_statement(inner)?;
                        self.indent -= 1;
                        els = None;
                    }
                }
                Expr::Block(b) => {
                    self.line("} else {");
                    self.nested_block(&b.block)?;
                    els = None;
                }
                other => return Err(error(other.span(), "unexpected `else` branch")),
            }
        }
        self.line("}");
        Ok(())
    }

    fn for_loop(&mut self, f: &syn::ExprForLoop) -> syn::Result<()> {
        let id = self.infer.resolved[&key(f)];
        let b = self.infer.bindings[id].clone();
        let (t, _) = self.cpp_type_of(&b.ty, f.span(), b.narrow)?;
        let range = LoopRange::parse(&f.expr)?;
        let start = self.value(range.start)?;
        let end = self.value(range.end)?;
        let step = match range.step {
            Some(s) => Some((self.value(s)?, int_literal_value(s).filter(|&v| v > 0))),
            None => None,
        };
        self.flush_pre();
        let i = &b.cname;
        let cmp = if range.inclusive { "<=" } else { "<" };
        match (range.rev, &step) {
            (false, None) if literal_fits_i32(range.end) => {
                self.line(&format!("for ({t} {i} = {start}; {i} {cmp} {end}; ++{i}) {{"));
            }
            (false, None) if !range.inclusive => {
                let e = self.temp("end");
                self.line(&format!("for ({t} {i} = {start}, {e} = {end}; {i} < {e}; ++{i}) {{"));
            }
            _ => {
                // General form: count the iterations once, derive the index;
                // `continue` stays correct and no bound can overflow.
                let (lo, hi, n, k) = (self.temp("lo"), self.temp("hi"), self.temp("n"), self.temp("k"));
                self.line(&format!("const {t} {lo} = {start};"));
                self.line(&format!("const {t} {hi} = {end};"));
                // Counted and indexed in 64-bit unsigned arithmetic: the
                // span of an `i32` range can pass `i32::MAX`, and an
                // index's offset too before it lands in range (conversions
                // to unsigned are modular, so signed bounds work).
                let step = match step {
                    Some((_, Some(literal))) => format!("{literal}ull"),
                    Some((s, None)) => {
                        // Rust panics on a zero step; the loop runs nothing.
                        self.may_panic = true;
                        let st = self.temp("step");
                        self.line(&format!("const unsigned long long {st} = __pl_step((unsigned long long)({s}));"));
                        st
                    }
                    None => "1ull".into(),
                };
                let u = |x: &str| format!("(unsigned long long)({x})");
                // The last iteration's number, not the count: a full-width
                // inclusive range (`0..=u64::MAX`) has 2^64 iterations.
                let offset = format!("(({} - {}){})", u(&hi), u(&lo), if range.inclusive { "" } else { " - 1ull" });
                let done = self.temp("done");
                self.line(&format!(
                    "const bool {done} = {hi} {} {lo} || {step} == 0ull;",
                    if range.inclusive { "<" } else { "<=" }
                ));
                self.line(&format!("const unsigned long long {n} = {done} ? 0ull : {offset} / {step};"));
                // `continue` goes to the increment, which ends after the last.
                self.line(&format!(
                    "for (unsigned long long {k} = 0, {done}_k = {done}; !{done}_k; {done}_k = ({k} == {n}), ++{k}) {{"
                ));
                self.indent += 1;
                let index = if range.rev {
                    let last = if range.inclusive { u(&hi) } else { format!("({} - 1ull)", u(&hi)) };
                    format!("({t})({last} - {k} * {step})")
                } else {
                    format!("({t})({} + {k} * {step})", u(&lo))
                };
                self.line(&format!("const {t} {i} = {index};"));
                self.indent -= 1;
            }
        }
        let label = self.enter_label(&f.label);
        self.loop_body(&label, &f.body)?;
        self.line("}");
        self.leave_label(&label, &f.body);
        Ok(())
    }
}

/// Whether a `let` pattern binds mutably (`let mut x`, `let mut x: T`).
/// Whether `body` has anything that can panic on the device: a helper
/// call, a panic macro, integer division or remainder (and the methods
/// that divide or check bounds), an index not a literal.
fn can_panic(body: &Block) -> bool {
    struct Finder(bool);
    impl<'ast> syn::visit::Visit<'ast> for Finder {
        fn visit_expr(&mut self, e: &'ast Expr) {
            self.0 |= match e {
                Expr::Call(_) | Expr::Macro(_) => true,
                Expr::Binary(b) => {
                    matches!(b.op, BinOp::Div(_) | BinOp::Rem(_) | BinOp::DivAssign(_) | BinOp::RemAssign(_))
                }
                Expr::Index(ix) => int_literal_value(&ix.index).is_none(),
                Expr::MethodCall(m) => matches!(m.method.to_string().as_str(), "clamp" | "rem_euclid" | "div_euclid"),
                _ => false,
            };
            syn::visit::visit_expr(self, e);
        }
        fn visit_macro(&mut self, _: &'ast syn::Macro) {
            self.0 = true;
        }
    }
    let mut f = Finder(false);
    syn::visit::Visit::visit_block(&mut f, body);
    f.0
}

fn pattern_is_mut(p: &syn::Pat) -> bool {
    match p {
        syn::Pat::Ident(i) => i.mutability.is_some(),
        syn::Pat::Type(t) => pattern_is_mut(&t.pat),
        _ => false,
    }
}

/// Whether `body` has a `break 'name` (`breaks`) or a `continue 'name`.
fn label_used(body: &Block, name: &str, breaks: bool) -> bool {
    struct Find<'n> {
        name: &'n str,
        breaks: bool,
        found: bool,
    }
    impl Find<'_> {
        /// Whether a nested loop's own label hides this one.
        fn hides(&self, label: &Option<syn::Label>) -> bool {
            label.as_ref().is_some_and(|l| l.name.ident == self.name)
        }
    }
    impl<'ast> syn::visit::Visit<'ast> for Find<'_> {
        fn visit_expr_for_loop(&mut self, f: &'ast syn::ExprForLoop) {
            if !self.hides(&f.label) {
                syn::visit::visit_expr_for_loop(self, f);
            }
        }
        fn visit_expr_while(&mut self, w: &'ast syn::ExprWhile) {
            if !self.hides(&w.label) {
                syn::visit::visit_expr_while(self, w);
            }
        }
        fn visit_expr_loop(&mut self, l: &'ast syn::ExprLoop) {
            if !self.hides(&l.label) {
                syn::visit::visit_expr_loop(self, l);
            }
        }
        fn visit_expr_break(&mut self, b: &'ast syn::ExprBreak) {
            self.found |= self.breaks && b.label.as_ref().is_some_and(|l| l.ident == self.name);
            syn::visit::visit_expr_break(self, b);
        }
        fn visit_expr_continue(&mut self, c: &'ast syn::ExprContinue) {
            self.found |= !self.breaks && c.label.as_ref().is_some_and(|l| l.ident == self.name);
        }
    }
    let mut f = Find { name, breaks, found: false };
    syn::visit::Visit::visit_block(&mut f, body);
    f.found
}
