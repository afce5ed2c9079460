//! Pass 2 for arrays as values: literals (`[a, b]`, `[v; n]`, nested to
//! any depth), copies and assignments of whole arrays, local `const`
//! tables and array literals used as values (`helper(&[1.0, 2.0])`).
//!
//! C++ arrays are not values, so each of these becomes either a brace
//! initialiser (a literal tree whose repeated leaves are simple enough to
//! write more than once) or element-wise statements. Separate from
//! `mod.rs` (statements) and `expr.rs` (scalar values) because the three
//! forms share one set of rules.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Expr, ItemConst};

use super::Emit;
use crate::translate::infer::key;
use crate::translate::syntax::array_len;
use crate::types::{error, Ty};

/// Leaves of a `let`'s brace initialiser at most (more: a fill loop).
const LET_BRACE_MAX: usize = 64;
/// Leaves of a local `const` table's brace initialiser at most (more: a
/// table filled once per call).
const CONST_BRACE_MAX: usize = 4096;
/// Leaves of a module-level constant table at most (it must be a brace
/// initialiser: a C++ constant expression).
pub(in crate::translate) const MODULE_CONST_MAX: usize = 1 << 20;

/// The lengths of an array type, outermost first (`[[T; 2]; 3]`: `[3, 2]`).
pub(in crate::translate) fn dims(t: &Ty) -> Vec<usize> {
    match t {
        Ty::Array(e, n) => {
            let mut d = vec![*n];
            d.extend(dims(e));
            d
        }
        Ty::Ref(e, _) => dims(e),
        _ => Vec::new(),
    }
}

/// `e` without parentheses.
fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip(&p.expr),
        Expr::Group(g) => strip(&g.expr),
        e => e,
    }
}

/// Whether `e` may be written several times in a brace initialiser: a
/// literal, a name or a negated literal (what `[v; n]` repeats in practice;
/// anything else is evaluated once into a temporary).
fn simple_leaf(e: &Expr) -> bool {
    match e {
        Expr::Lit(_) | Expr::Path(_) => true,
        Expr::Paren(p) => simple_leaf(&p.expr),
        Expr::Group(g) => simple_leaf(&g.expr),
        Expr::Unary(u) => matches!(u.op, syn::UnOp::Neg(_)) && matches!(&*u.expr, Expr::Lit(_)),
        _ => false,
    }
}

impl Emit<'_> {
    /// Leaves of `e` as a brace initialiser, or `None` where it is not a
    /// literal tree of scalars. `pure`: repeated leaves may be any
    /// expression (constant initialisers, which Rust evaluates without side
    /// effects); otherwise they must be [`simple_leaf`]s.
    fn brace_leaves(&self, e: &Expr, pure: bool) -> Option<usize> {
        match e {
            Expr::Paren(p) => self.brace_leaves(&p.expr, pure),
            Expr::Group(g) => self.brace_leaves(&g.expr, pure),
            Expr::Array(a) => a.elems.iter().try_fold(0usize, |acc, x| {
                let n = match x {
                    Expr::Array(_) | Expr::Repeat(_) => self.brace_leaves(x, pure)?,
                    x if !matches!(self.ty_of(x), Ty::Array(..)) => 1,
                    _ => return None,
                };
                acc.checked_add(n)
            }),
            Expr::Repeat(r) => {
                let n = array_len(&r.len).ok()?;
                let inner = match &*r.expr {
                    Expr::Array(_) | Expr::Repeat(_) => self.brace_leaves(&r.expr, pure)?,
                    x if matches!(self.ty_of(x), Ty::Array(..)) => return None,
                    x if pure || simple_leaf(x) => 1,
                    _ => return None,
                };
                n.checked_mul(inner)
            }
            _ => None,
        }
    }

    /// The brace initialiser of a literal tree (see [`brace_leaves`]).
    pub(in crate::translate) fn brace(&mut self, e: &Expr) -> syn::Result<String> {
        match e {
            Expr::Paren(p) => self.brace(&p.expr),
            Expr::Group(g) => self.brace(&g.expr),
            Expr::Array(a) => {
                let parts: Vec<String> = a.elems.iter().map(|x| self.brace(x)).collect::<syn::Result<_>>()?;
                Ok(format!("{{{}}}", parts.join(", ")))
            }
            Expr::Repeat(r) => {
                let inner = self.brace(&r.expr)?;
                let n = array_len(&r.len)?;
                Ok(format!("{{{}}}", vec![inner; n].join(", ")))
            }
            leaf => self.value(leaf),
        }
    }

    /// Statements storing the array value `e` (of type `ty`) into `place`,
    /// element by element.
    pub(super) fn fill(&mut self, place: &str, e: &Expr, ty: &Ty) -> syn::Result<()> {
        let elem = match ty {
            Ty::Array(elem, _) => (**elem).clone(),
            _ => return Err(error(e.span(), "expected an array here")),
        };
        let elem_is_array = matches!(elem, Ty::Array(..));
        match e {
            Expr::Paren(p) => self.fill(place, &p.expr, ty),
            Expr::Group(g) => self.fill(place, &g.expr, ty),
            Expr::Array(a) => {
                for (i, x) in a.elems.iter().enumerate() {
                    let at = format!("{place}[{i}]");
                    if elem_is_array {
                        self.fill(&at, x, &elem)?;
                    } else {
                        let v = self.value(x)?;
                        self.flush_pre();
                        self.line(&format!("{at} = {v};"));
                    }
                }
                Ok(())
            }
            Expr::Repeat(r) => {
                let n = array_len(&r.len)?;
                let k = self.temp("k");
                if elem_is_array {
                    // Rust evaluates the repeated value once: a temporary
                    // row, copied to each place.
                    let (t, suffix) = self.cpp_type_of(&elem, r.span(), false)?;
                    let row = self.temp("a");
                    self.line(&format!("{t} {row}{suffix};"));
                    self.fill(&row, &r.expr, &elem)?;
                    let dst = format!("{place}[{k}]");
                    let copy = self.copy_line(&dst, &row, &elem);
                    self.line(&format!("for (int {k} = 0; {k} < {n}; ++{k}) {copy}"));
                    return Ok(());
                }
                let mut v = self.value(&r.expr)?;
                self.flush_pre();
                if !simple_leaf(&r.expr) {
                    let (t, _) = self.cpp_type_of(&elem, r.span(), false)?;
                    let once = self.temp("v");
                    self.line(&format!("const {t} {once} = {v};"));
                    v = once;
                }
                self.line(&format!("for (int {k} = 0; {k} < {n}; ++{k}) {place}[{k}] = {v};"));
                Ok(())
            }
            other => {
                let src = self.array_source(other)?;
                self.flush_pre();
                let copy = self.copy_line(place, &src, ty);
                self.line(&copy);
                Ok(())
            }
        }
    }

    /// One statement copying every element of array `src` to `dst` (both
    /// of type `ty`), nested loops for nested arrays.
    fn copy_line(&mut self, dst: &str, src: &str, ty: &Ty) -> String {
        let mut loops = String::new();
        let (mut d, mut s) = (dst.to_string(), src.to_string());
        for n in dims(ty) {
            let k = self.temp("k");
            loops.push_str(&format!("for (int {k} = 0; {k} < {n}; ++{k}) "));
            d.push_str(&format!("[{k}]"));
            s.push_str(&format!("[{k}]"));
        }
        format!("{loops}{d} = {s};")
    }

    /// A `let` of array type `ty` named `cname`, from `init`.
    pub(super) fn array_local(&mut self, cname: &str, ty: &Ty, init: &Expr, span: Span) -> syn::Result<()> {
        let (t, suffix) = self.cpp_type_of(ty, span, false)?;
        if self.brace_leaves(init, false).is_some_and(|n| n <= LET_BRACE_MAX) {
            let b = self.brace(init)?;
            self.flush_pre();
            self.line(&format!("{t} {cname}{suffix} = {b};"));
            return Ok(());
        }
        self.line(&format!("{t} {cname}{suffix};"));
        self.fill(cname, init, ty)
    }

    /// `place = e` where both are arrays of type `ty`.
    pub(super) fn array_assign(&mut self, place: &Expr, e: &Expr, ty: &Ty) -> syn::Result<()> {
        // Rust evaluates the value first, then the place. A literal may
        // read the array it replaces (`z = [z[1], z[0]]`): built in a
        // temporary first, then copied.
        let mut src = match strip(e) {
            Expr::Array(_) | Expr::Repeat(_) => self.array_temp(e)?,
            other => self.array_source(other)?,
        };
        if !crate::translate::iterate::effect_free(place) {
            // The place's index may change what the value reads
            // (`m[bump(&mut c)] = x[c]`): the value's address is taken
            // first, as Rust reads the value first.
            let tmp = self.temp("src");
            self.pre.push(format!("auto* {tmp} = {src};"));
            src = tmp;
        }
        let place = self.array_source(place)?;
        self.flush_pre();
        let copy = self.copy_line(&place, &src, ty);
        self.line(&copy);
        Ok(())
    }

    /// A local `const` (a scalar, or a table: a `const` C++ array with a
    /// brace initialiser where it is a literal tree of reasonable size).
    pub(super) fn local_const(&mut self, c: &ItemConst) -> syn::Result<()> {
        let id = self.infer.resolved[&key(c)];
        let b = self.infer.bindings[id].clone();
        let (t, suffix) = self.cpp_type_of(&b.ty, c.span(), false)?;
        if !matches!(b.ty, Ty::Array(..)) {
            let v = self.value(&c.expr)?;
            self.flush_pre();
            self.line(&format!("const {t} {} = {v};", b.cname));
            return Ok(());
        }
        if self.brace_leaves(&c.expr, true).is_some_and(|n| n <= CONST_BRACE_MAX) {
            let v = self.brace(&c.expr)?;
            self.flush_pre();
            self.line(&format!("const {t} {}{suffix} = {v};", b.cname));
            return Ok(());
        }
        // A large or computed table: filled where it is declared (the
        // host's `const` is immutable, so no code writes it later).
        self.line(&format!("{t} {}{suffix};", b.cname));
        self.fill(&b.cname, &c.expr, &b.ty)
    }

    /// An array literal used as a value (an argument, an indexed literal):
    /// a temporary filled before the statement.
    pub(super) fn array_temp(&mut self, e: &Expr) -> syn::Result<String> {
        let ty = self.ty_of(e);
        let (t, suffix) = self.cpp_type_of(&ty, e.span(), false)?;
        let tmp = self.temp("a");
        let saved_out = std::mem::take(&mut self.out);
        let saved_pre = std::mem::take(&mut self.pre);
        let saved_indent = self.indent;
        // Captured at indent 0: `flush_pre` re-indents every line.
        self.indent = 0;
        if self.brace_leaves(e, false).is_some_and(|n| n <= LET_BRACE_MAX) {
            let b = self.brace(e)?;
            self.flush_pre();
            self.line(&format!("{t} {tmp}{suffix} = {b};"));
        } else {
            self.line(&format!("{t} {tmp}{suffix};"));
            self.fill(&tmp, e, &ty)?;
        }
        let body = std::mem::replace(&mut self.out, saved_out);
        self.indent = saved_indent;
        self.pre = saved_pre;
        self.pre.extend(body.lines().map(str::to_string));
        Ok(tmp)
    }

    /// A module-level constant's initialiser: a C++ constant expression
    /// (see [`crate::translate::translate_const`]).
    pub(in crate::translate) fn const_init(&mut self, e: &Expr, ty: &Ty) -> syn::Result<String> {
        let v = if matches!(ty, Ty::Array(..)) {
            match self.brace_leaves(e, true) {
                Some(n) if n <= MODULE_CONST_MAX => self.brace(e)?,
                Some(_) => return Err(error(e.span(), "module-level constant tables hold at most 2^20 values")),
                None => {
                    return Err(error(
                        e.span(),
                        "a module-level constant array is written as a literal (`[a, b]`, `[v; n]`, nested)",
                    ))
                }
            }
        } else {
            self.value(e)?
        };
        if !self.pre.is_empty() {
            return Err(error(e.span(), "a constant's initialiser must be an expression without blocks or `if`s"));
        }
        Ok(v)
    }
}
