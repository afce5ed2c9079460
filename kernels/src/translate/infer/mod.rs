//! Pass 1 of the translation: names and types.
//!
//! [`Infer`] resolves every name to a [`Binding`] (a fresh C++ name per
//! shadowing) and gives every expression a type, rejecting anything outside
//! the kernel subset with an error at its span. This file holds the pass's
//! state, its entry point [`infer`], the signature and the statements;
//! expressions are in `expr.rs`. Emission (`super::emit`) and the lane twin
//! (`crate::lanes`) read the results it records.

mod expr;

pub(crate) use expr::{conversion, is_element, is_full_range, is_place};

use std::collections::{HashMap, HashSet};

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Block, Expr, FnArg, ItemFn, Pat, ReturnType, Stmt, Type};

use super::names::{const_cname, cpp_ident};
use super::panics::KernelMacro;
use super::syntax::{array_len, scalar_of_type};
use super::{FnKind, Param};
use crate::types::{error, Scalar, Ty, Vars, UNKNOWN_LEN};

/// Pass 1 over `item`: its names and types, parameters and return type.
pub(crate) fn infer(item: &ItemFn, kind: FnKind) -> syn::Result<(Infer, Vec<Param>, Option<Scalar>)> {
    // The signature's shape first: a generic kernel's parameters (`&T`)
    // would otherwise be reported as unsupported types.
    check_signature(item)?;
    let mut infer = Infer::new(kind);
    infer.ext_rank = index_depths(&item.block);
    let params = infer.params(item)?;
    let ret = match &item.sig.output {
        ReturnType::Default => None,
        ReturnType::Type(_, ty) => {
            if kind == FnKind::Kernel {
                return Err(error(ty.span(), "a kernel returns nothing: write results through `&mut` parameters"));
            }
            if matches!(&**ty, Type::Tuple(_)) {
                return Err(error(
                    ty.span(),
                    "helpers return one scalar or one array: return several values through `&mut` parameters \
                     (`fn f(x: f64, a: &mut f64, b: &mut f64)`)",
                ));
            }
            if let Type::Array(_) = &**ty {
                // An array result: C++ returns it wrapped (`__pl_arr`);
                // `ret` stays `None` (no scalar), `infer.ret` holds it.
                let t = infer.local_type(ty)?;
                infer.ret = t.clone();
                let body_ty = infer.block(&item.block)?;
                // A tail that is another helper's array result.
                let body_ty = match item.block.stmts.last() {
                    Some(Stmt::Expr(tail, None)) => infer.array_result(tail, body_ty, &t)?,
                    _ => body_ty,
                };
                infer.unify(item.block.span(), &body_ty, &t)?;
                return Ok((infer, params, None));
            }
            Some(scalar_of_type(ty)?)
        }
    };
    let ret_ty = match ret {
        Some(s) => infer.vars.known(s),
        None => Ty::Unit,
    };
    infer.ret = ret_ty.clone();
    let body_ty = infer.block(&item.block)?;
    infer.unify(item.block.span(), &body_ty, &ret_ty)?;
    Ok((infer, params, ret))
}

fn check_signature(item: &ItemFn) -> syn::Result<()> {
    let sig = &item.sig;
    if let Some(t) = &sig.asyncness {
        return Err(error(t.span(), "kernels cannot be `async`"));
    }
    if !sig.generics.params.is_empty() {
        return Err(error(
            sig.generics.span(),
            "kernels and helpers cannot be generic: write one for each element type (f64, f32, ...)",
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(error(v.span(), "kernels cannot be variadic"));
    }
    Ok(())
}

/// The deepest indexing of each name in `block` (`w[i][j]`: 2), which is
/// the rank a module-level constant is read with (see [`External`]).
fn index_depths(block: &Block) -> HashMap<String, usize> {
    depths(|v| syn::visit::Visit::visit_block(v, block))
}

/// [`index_depths`] of what `walk` visits. A row bound by a `let`
/// (`let row = W[i];` or `let row: [f64; 4] = W[i];`) adds the row's own
/// depth (its indexing, or its annotation's nesting) to `W`'s.
fn depths(walk: impl FnOnce(&mut Depths)) -> HashMap<String, usize> {
    let mut d = Depths { depth: HashMap::new(), rows: Vec::new() };
    walk(&mut d);
    // Rows of rows: until nothing grows (each round adds at least one to
    // some name, and depths are bounded by the nesting written).
    for _ in 0..=d.rows.len() {
        let mut grew = false;
        for (local, root, k, annotated) in &d.rows {
            let row = d.depth.get(local).copied().unwrap_or(0).max(*annotated);
            let want = k + row;
            let have = d.depth.entry(root.clone()).or_insert(0);
            if *have < want {
                *have = want;
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    d.depth
}

struct Depths {
    depth: HashMap<String, usize>,
    /// `let local = root[..]..[..]` with `k` indices, and the nesting of
    /// the local's annotation.
    rows: Vec<(String, String, usize, usize)>,
}

/// The name at the root of an index chain and the number of indices.
fn index_chain(e: &Expr) -> Option<(String, usize)> {
    let mut depth = 0;
    let mut base = e;
    loop {
        match base {
            Expr::Index(inner) => {
                depth += 1;
                base = &inner.expr;
            }
            Expr::Paren(p) => base = &p.expr,
            Expr::Group(g) => base = &g.expr,
            _ => break,
        }
    }
    match base {
        Expr::Path(p) => p.path.get_ident().map(|n| (n.to_string(), depth)),
        _ => None,
    }
}

fn type_nesting(t: &Type) -> usize {
    match t {
        Type::Array(a) => 1 + type_nesting(&a.elem),
        Type::Paren(p) => type_nesting(&p.elem),
        _ => 0,
    }
}

impl<'ast> syn::visit::Visit<'ast> for Depths {
    fn visit_expr_index(&mut self, ix: &'ast syn::ExprIndex) {
        if let Some((name, depth)) = index_chain(&Expr::Index(ix.clone())) {
            let d = self.depth.entry(name).or_insert(0);
            *d = (*d).max(depth);
        }
        syn::visit::visit_expr_index(self, ix);
    }

    fn visit_local(&mut self, local: &'ast syn::Local) {
        let (name, annotated) = match &local.pat {
            Pat::Ident(pi) => (Some(pi.ident.to_string()), 0),
            Pat::Type(pt) => match &*pt.pat {
                Pat::Ident(pi) => (Some(pi.ident.to_string()), type_nesting(&pt.ty)),
                _ => (None, 0),
            },
            _ => (None, 0),
        };
        if let (Some(name), Some(init)) = (name, &local.init) {
            if let Some((root, k)) = index_chain(&init.expr) {
                if k > 0 {
                    self.rows.push((name, root, k, annotated));
                }
            }
        }
        syn::visit::visit_local(self, local);
    }
}

/// Pass 1 over a module-level constant (`#[parloop::device] const`): its
/// initialiser's names and types, and the constant's type.
pub(crate) fn infer_const(c: &syn::ItemConst) -> syn::Result<(Infer, Ty)> {
    let mut infer = Infer::new(FnKind::Device);
    infer.ext_rank = depths(|v| syn::visit::Visit::visit_expr(v, &c.expr));
    if !c.generics.params.is_empty() {
        return Err(error(c.generics.span(), "device constants cannot be generic"));
    }
    let ty = infer.local_type(&c.ty)?;
    let mut init = &*c.expr;
    while let Expr::Paren(p) = init {
        init = &p.expr;
    }
    if matches!(ty, Ty::Array(..)) && !matches!(init, Expr::Array(_) | Expr::Repeat(_)) {
        return Err(error(
            c.expr.span(),
            "a module-level constant array is written as a literal (`[a, b]`, `[v; n]`, nested)",
        ));
    }
    let t = infer.expr(&c.expr)?;
    let t = infer.vars.deref(&t);
    infer.unify(c.expr.span(), &ty, &t)?;
    Ok((infer, ty))
}

/// A module-level constant the function reads (`#[parloop::device] const
/// W: [f64; 4] = ...;`, declared elsewhere, so its type is not visible to
/// the translation): its element type comes from how the function uses it,
/// its rank from the deepest indexing of it, and `#[parloop::kernel]`
/// checks both against the declaration at compile time (see
/// [`super::ConstUse`]). Its array lengths are [`UNKNOWN_LEN`].
#[derive(Clone, Debug)]
pub(crate) struct External {
    pub(crate) name: String,
    pub(crate) cname: String,
    /// The element's type (a scalar inference variable).
    pub(crate) elem: Ty,
    pub(crate) rank: usize,
    /// The first use, for messages.
    pub(crate) span: Span,
}

#[derive(Clone, Debug)]
pub(crate) struct Binding {
    pub(super) cname: String,
    pub(crate) ty: Ty,
    /// usize stored as C++ `int` (loop indices with bounds that fit).
    pub(super) narrow: bool,
    /// A `for` variable over literal bounds (not `mut`): its largest value,
    /// so that indexing an array longer than that needs no check.
    pub(super) max: Option<u128>,
}

/// Pass 1: names and types.
pub(crate) struct Infer {
    kind: FnKind,
    pub(crate) vars: Vars,
    pub(crate) ret: Ty,
    /// Parameters first, in order, then locals as they are met.
    pub(crate) bindings: Vec<Binding>,
    scopes: Vec<Vec<(String, usize)>>,
    pub(super) used_names: HashSet<String>,
    /// Type of every expression, by address.
    pub(crate) types: HashMap<usize, Ty>,
    /// Binding of every path expression and `let`/`for` pattern, by address.
    pub(crate) resolved: HashMap<usize, usize>,
    pub(super) calls: Vec<String>,
    /// The length of the array of every `.len()` call, by address.
    pub(crate) lens: HashMap<usize, usize>,
    /// Module-level constants read, in order of first use.
    pub(crate) externals: Vec<External>,
    /// The constant each path expression naming one reads, by address.
    pub(crate) ext_resolved: HashMap<usize, usize>,
    /// See [`index_depths`].
    ext_rank: HashMap<String, usize>,
    /// Helper calls and their arguments, by address, with their types:
    /// where a type is only the literals' default, the host function pins
    /// it for rustc to check ([`crate::translate::pin_assumptions`]).
    pub(crate) pins: Vec<(usize, Ty)>,
    /// The bindings that are local `const`s (a constant pattern in a
    /// `match` compares with one; any other name there binds).
    pub(crate) local_consts: HashSet<usize>,
    /// `panic!`s and `unreachable!`s by the address of their `syn::Macro`.
    pub(crate) macros: HashMap<usize, KernelMacro>,
    /// The messages of the panic sites, in site order.
    pub(crate) panic_sites: Vec<String>,
    /// The names patterns bind (`v` of `v => ..`, `v @ 1..=4`), as
    /// written: the attribute has rustc check that none is a module-level
    /// constant (see [`crate::translate::Translation::pattern_bindings`]).
    pub(crate) pattern_bindings: Vec<syn::Ident>,
}

/// Whether an array type has a length the translation cannot see.
pub(crate) fn has_unknown_len(t: &Ty) -> bool {
    match t {
        Ty::Array(e, n) => *n == UNKNOWN_LEN || has_unknown_len(e),
        Ty::Ref(e, _) => has_unknown_len(e),
        _ => false,
    }
}

pub(crate) fn key<T>(node: &T) -> usize {
    node as *const T as usize
}

impl Infer {
    /// Bytes of every local binding (arrays in full, scalars as 8 bytes):
    /// an upper bound of the locals a frame holds at once.
    pub(crate) fn frame_bytes(&mut self, nparams: usize) -> usize {
        fn size(vars: &mut Vars, t: &Ty) -> usize {
            match t {
                Ty::Array(e, n) => size(vars, e).saturating_mul(*n),
                Ty::Ref(..) => 8,
                _ => vars.scalar(t).map_or(8, |s| (s.bits() as usize / 8).max(1)),
            }
        }
        let mut total = 0usize;
        for b in self.bindings.iter().skip(nparams).map(|b| b.ty.clone()).collect::<Vec<_>>() {
            total = total.saturating_add(size(&mut self.vars, &b));
        }
        // Parameters: a pointer or a scalar each, or the copy of an array
        // passed by value.
        for b in self.bindings.iter().take(nparams).map(|b| b.ty.clone()).collect::<Vec<_>>() {
            total = total.saturating_add(if matches!(b, Ty::Array(..)) { size(&mut self.vars, &b) } else { 8 });
        }
        total
    }

    fn new(kind: FnKind) -> Infer {
        Infer {
            kind,
            vars: Vars::default(),
            ret: Ty::Unit,
            bindings: Vec::new(),
            scopes: vec![Vec::new()],
            used_names: HashSet::new(),
            types: HashMap::new(),
            resolved: HashMap::new(),
            calls: Vec::new(),
            lens: HashMap::new(),
            externals: Vec::new(),
            ext_resolved: HashMap::new(),
            ext_rank: HashMap::new(),
            pins: Vec::new(),
            local_consts: HashSet::new(),
            macros: HashMap::new(),
            panic_sites: Vec::new(),
            pattern_bindings: Vec::new(),
        }
    }

    /// The names in scope that are `&mut` references (a helper given one
    /// may change what it points to).
    pub(super) fn mut_refs(&self) -> Vec<String> {
        self.scopes
            .iter()
            .flatten()
            .filter(|(_, id)| matches!(self.bindings[*id].ty, Ty::Ref(_, true)))
            .map(|(name, _)| name.clone())
            .collect()
    }

    fn unify(&mut self, span: Span, a: &Ty, b: &Ty) -> syn::Result<()> {
        self.vars.unify(a, b).map_err(|m| error(span, m))
    }

    fn bind(&mut self, name: &str, ty: Ty, narrow: bool) -> usize {
        let base = cpp_ident(name);
        let mut cname = base.clone();
        let mut k = 1;
        while self.used_names.contains(&cname) {
            cname = format!("{base}_{k}");
            k += 1;
        }
        self.used_names.insert(cname.clone());
        self.bindings.push(Binding { cname, ty, narrow, max: None });
        let id = self.bindings.len() - 1;
        self.scopes.last_mut().expect("a scope").push((name.to_owned(), id));
        id
    }

    /// The type of module-level constant `name` read at `span`, recording
    /// the use.
    pub(super) fn external(&mut self, e: &Expr, name: &str, span: Span) -> Ty {
        let id = match self.externals.iter().position(|x| x.name == name) {
            Some(id) => id,
            None => {
                let elem = self.vars.any();
                let rank = self.ext_rank.get(name).copied().unwrap_or(0);
                self.externals.push(External { name: name.into(), cname: const_cname(name), elem, rank, span });
                self.externals.len() - 1
            }
        };
        self.ext_resolved.insert(key(e), id);
        let x = &self.externals[id];
        (0..x.rank).fold(x.elem.clone(), |t, _| Ty::Array(Box::new(t), UNKNOWN_LEN))
    }

    fn lookup(&self, name: &str) -> Option<usize> {
        self.scopes.iter().rev().flat_map(|s| s.iter().rev()).find(|(n, _)| n == name).map(|&(_, id)| id)
    }

    fn params(&mut self, item: &ItemFn) -> syn::Result<Vec<Param>> {
        let mut params = Vec::new();
        for arg in &item.sig.inputs {
            let FnArg::Typed(pt) = arg else {
                return Err(error(arg.span(), "kernels are free functions: no `self` parameter"));
            };
            let Pat::Ident(pi) = &*pt.pat else {
                return Err(error(pt.pat.span(), "parameters must be plain names"));
            };
            let name = pi.ident.to_string();
            let (param, ty) = self.param_type(&name, &pt.ty)?;
            if self.kind == FnKind::Kernel && !param.by_ref {
                return Err(error(
                    pt.ty.span(),
                    "kernel parameters are references: `&T`, `&mut T`, `&[T; N]`, `&mut [T; N]`, `&[[T; M]; N]`",
                ));
            }
            self.bind(&name, ty, false);
            params.push(param);
        }
        Ok(params)
    }

    fn param_type(&mut self, name: &str, ty: &Type) -> syn::Result<(Param, Ty)> {
        let supported = "supported parameter types: `&T`, `&mut T`, `&[T; N]`, `&mut [T; N]`, `&[[T; M]; N]` \
                         (and `T`, `[T; N]`, `[[T; M]; N]` by value in helpers) with T one of f64, f32, i32, u32, \
                         i64, u64";
        let (inner, by_ref, mutable) = match ty {
            Type::Reference(r) => {
                if r.lifetime.is_some() {
                    return Err(error(r.span(), "kernel parameters take no lifetimes"));
                }
                (&*r.elem, true, r.mutability.is_some())
            }
            other => (other, false, false),
        };
        let elem_of = |t: &Type| -> syn::Result<Scalar> {
            let s = scalar_of_type(t).map_err(|_| error(t.span(), supported))?;
            if matches!(s, Scalar::Usize | Scalar::Bool) {
                return Err(error(t.span(), supported));
            }
            Ok(s)
        };
        let (elem, rows, cols, array, nested) = match inner {
            Type::Array(a) => match &*a.elem {
                Type::Array(b) => (elem_of(&b.elem)?, array_len(&a.len)?, array_len(&b.len)?, true, true),
                e => (elem_of(e)?, 1, array_len(&a.len)?, true, false),
            },
            Type::Paren(p) => return self.param_type(name, &p.elem),
            t => (elem_of(t)?, 1, 1, false, false),
        };
        // An array by value (helpers only: `params` refuses it in a
        // kernel) is the callee's own copy, as in Rust: a `__pl_arr`
        // struct passed by value (see `Param::cpp_decl`).
        let s = self.vars.known(elem);
        let base = if !array {
            s
        } else if nested {
            // `[[T; M]; 1]` too: one row of `M`, not `M` values (its
            // `len()` is 1 and it is indexed `x[0][k]`).
            Ty::Array(Box::new(Ty::Array(Box::new(s), cols)), rows)
        } else {
            Ty::Array(Box::new(s), cols)
        };
        let ty = if by_ref { Ty::Ref(Box::new(base), mutable) } else { base };
        Ok((Param { name: name.into(), elem, rows, cols, array, nested, by_ref, mutable }, ty))
    }

    fn record(&mut self, e: &Expr, t: Ty) -> Ty {
        self.types.insert(key(e), t.clone());
        t
    }

    fn block(&mut self, b: &Block) -> syn::Result<Ty> {
        self.scopes.push(Vec::new());
        let mut ty = Ty::Unit;
        for (i, stmt) in b.stmts.iter().enumerate() {
            let last = i + 1 == b.stmts.len();
            ty = match stmt {
                Stmt::Local(local) => {
                    self.local(local)?;
                    Ty::Unit
                }
                Stmt::Item(syn::Item::Const(c)) => {
                    let s = self.local_type(&c.ty)?;
                    let t = self.expr(&c.expr)?;
                    self.unify(c.expr.span(), &s, &t)?;
                    let id = self.bind(&c.ident.to_string(), s, false);
                    self.resolved.insert(key(c), id);
                    self.local_consts.insert(id);
                    Ty::Unit
                }
                Stmt::Item(item) => {
                    return Err(error(item.span(), "only local `const` items are supported inside kernels"))
                }
                Stmt::Macro(m) => {
                    let t = self.kernel_macro(&m.mac)?;
                    if t == Ty::Never || (last && m.semi_token.is_none()) {
                        t
                    } else {
                        Ty::Unit
                    }
                }
                Stmt::Expr(e, semi) => {
                    let t = self.expr(e)?;
                    let diverges = matches!(e, Expr::Return(_) | Expr::Break(_) | Expr::Continue(_));
                    if semi.is_none() && !last && !matches!(t, Ty::Unit | Ty::Never) {
                        return Err(error(e.span(), "expected `;` after this expression"));
                    }
                    match (semi.is_some(), diverges) {
                        (_, true) => Ty::Never,
                        (true, false) => Ty::Unit,
                        (false, false) => t,
                    }
                }
            };
            if !last && ty != Ty::Never {
                ty = Ty::Unit;
            }
        }
        self.scopes.pop();
        Ok(ty)
    }

    /// A `panic!` or `unreachable!` (never returns).
    pub(super) fn kernel_macro(&mut self, m: &syn::Macro) -> syn::Result<Ty> {
        let parsed = super::panics::parse(m, &mut self.panic_sites)?;
        // The values its message formats: typed where they stand (in the
        // vector's buffer, which the map's entry keeps), scalars only.
        for v in &parsed.values {
            let t = self.expr(v)?;
            let scalar = match &t {
                Ty::Ref(inner, _) => matches!(**inner, Ty::Var(_)),
                t => matches!(t, Ty::Var(_)),
            };
            if !scalar {
                return Err(error(
                    m.span(),
                    "kernel panic messages format scalar values only (f32, f64, integers, bool): format an array's \
                     elements one by one",
                ));
            }
        }
        self.macros.insert(key(m), parsed);
        Ok(Ty::Never)
    }

    fn local_type(&mut self, ty: &Type) -> syn::Result<Ty> {
        match ty {
            Type::Array(a) => {
                let inner = self.local_type(&a.elem)?;
                Ok(Ty::Array(Box::new(inner), array_len(&a.len)?))
            }
            Type::Infer(_) => Ok(self.vars.any()),
            t => {
                let s = scalar_of_type(t)?;
                Ok(self.vars.known(s))
            }
        }
    }

    /// Whether `e` (a reference-typed initialiser) names a place: `&p`
    /// or `&mut p` of a place, or a reference binding itself.
    fn names_place(&self, e: &Expr) -> bool {
        match e {
            Expr::Paren(p) => self.names_place(&p.expr),
            Expr::Group(g) => self.names_place(&g.expr),
            // A place rooted in a binding or a module-level constant
            // (`&f64::MAX` is a value: C++ cannot point at a literal).
            Expr::Reference(r) => expr::is_place(&r.expr) && self.rooted_in_variable(&r.expr),
            Expr::Path(_) => self.resolved.get(&key(e)).is_some_and(|&id| matches!(self.bindings[id].ty, Ty::Ref(..))),
            Expr::Call(c) => expr::is_element(c),
            _ => false,
        }
    }

    /// `t`, the type of `value`, or `want` where `value` is a helper call
    /// (whose result type only rustc knows) and `want` an array type: the
    /// call is then recorded as returning that array.
    pub(super) fn array_result(&mut self, value: &Expr, t: Ty, want: &Ty) -> syn::Result<Ty> {
        let mut call = value;
        while let Expr::Paren(p) = call {
            call = &p.expr;
        }
        if matches!(call, Expr::Call(_)) && matches!(t, Ty::Var(_)) && matches!(want, Ty::Array(..)) {
            // The element type must be stated (an annotation, a parameter
            // or a helper's return type): a literal's default would copy
            // an `[f32; 3]` result into `double`s, and rustc would not see
            // the assumption.
            let mut leaf = want;
            while let Ty::Array(e, _) = leaf {
                leaf = e;
            }
            if self.vars.known_scalar(leaf).is_none() {
                return Err(error(
                    value.span(),
                    "the element type of this helper's array result is not visible here: state it \
                     (`let n: [f32; 3] = f(..);`)",
                ));
            }
            self.types.insert(key(call), want.clone());
            if !std::ptr::eq(call, value) {
                self.types.insert(key(value), want.clone());
            }
            return Ok(want.clone());
        }
        Ok(t)
    }

    /// Whether place `e`'s root is a binding or a module-level constant.
    fn rooted_in_variable(&self, e: &Expr) -> bool {
        match e {
            Expr::Paren(p) => self.rooted_in_variable(&p.expr),
            Expr::Group(g) => self.rooted_in_variable(&g.expr),
            Expr::Index(i) => self.rooted_in_variable(&i.expr),
            Expr::Unary(u) => self.rooted_in_variable(&u.expr),
            Expr::Path(_) => self.resolved.contains_key(&key(e)) || self.ext_resolved.contains_key(&key(e)),
            _ => false,
        }
    }

    fn local(&mut self, local: &syn::Local) -> syn::Result<()> {
        if let (Pat::Wild(_), Some(init)) = (&local.pat, &local.init) {
            // `let _ = value;`: evaluated, bound to nothing.
            if init.diverge.is_some() {
                return Err(error(local.span(), "`let ... else` is not supported in kernels"));
            }
            self.expr(&init.expr)?;
            return Ok(());
        }
        let (ident, annotated) = match &local.pat {
            Pat::Ident(pi) => (pi, None),
            Pat::Type(pt) => match &*pt.pat {
                Pat::Ident(pi) => (pi, Some(&*pt.ty)),
                Pat::Tuple(_) => return Err(error(local.span(), expr::TUPLES)),
                p => return Err(error(p.span(), "`let` binds one name here (no patterns)")),
            },
            Pat::Tuple(_) => return Err(error(local.span(), expr::TUPLES)),
            p => return Err(error(p.span(), "`let` binds one name here (no patterns)")),
        };
        if ident.by_ref.is_some() || ident.subpat.is_some() {
            return Err(error(ident.span(), "`let` binds one name here (no `ref` or `@` patterns)"));
        }
        let mut ty = match annotated {
            Some(t) => self.local_type(t)?,
            None => self.vars.any(),
        };
        if let Some(init) = &local.init {
            if let Some((_, diverge)) = &init.diverge {
                return Err(error(diverge.span(), "`let ... else` is not supported in kernels"));
            }
            let t = self.expr(&init.expr)?;
            // `let n: [f64; 3] = cross(a, b);`: a helper's array result,
            // typed by the annotation (the translation cannot see the
            // helper's signature; rustc checks it).
            let t = self.array_result(&init.expr, t, &ty)?;
            // A reference to a place (`&mut a[i]`, `&k[1]`, `&mut *p`, or a
            // reference parameter or local itself) is kept as a reference:
            // writes through `&mut` reach the place, as in Rust (emitted as
            // a C++ pointer, as reference parameters are). Any other
            // reference (`&(a + 1.0)`) is Rust's temporary: a copy.
            let alias = matches!(t, Ty::Ref(..)) && self.names_place(&init.expr);
            let t = if matches!(t, Ty::Ref(..)) && !alias { self.vars.deref(&t) } else { t };
            if matches!(t, Ty::Ref(..)) && !alias {
                return Err(error(init.expr.span(), "references cannot be stored in locals; copy the value instead"));
            }
            if let (Ty::Ref(..), Some(a)) = (&t, annotated) {
                return Err(error(
                    a.span(),
                    "a reference local takes its type from its place: drop the annotation (`let r = &mut a[i];`)",
                ));
            }
            if let Ty::Ref(inner, _) = &t {
                if matches!(**inner, Ty::Ref(..)) {
                    return Err(error(
                        init.expr.span(),
                        "a reference to a reference: bind the reference itself (`let r = a;`) or reborrow (`&mut *a`)",
                    ));
                }
                if has_unknown_len(inner) {
                    return Err(error(
                        init.expr.span(),
                        "a reference into a module-level constant (`W.iter()`, `&W[i]`), whose length is not \
                         known here: index it in a loop over its range (`for q in 0..4 { .. W[q] .. }`), or copy \
                         it (or its row) into an annotated local (`let w: [f64; 4] = W;`)",
                    ));
                }
                // A reference local is typed by its place.
                ty = t.clone();
            }
            if annotated.is_none() && matches!(t, Ty::Array(..)) {
                // An unannotated array local takes its initialiser's type.
                ty = t.clone();
            }
            // The annotation is what is expected, the initialiser what is found.
            self.unify(init.expr.span(), &ty, &t)?;
        }
        if matches!(ty, Ty::Unit | Ty::Never) {
            return Err(error(local.span(), "a `let` must hold a scalar or an array"));
        }
        if has_unknown_len(&ty) {
            return Err(error(
                local.span(),
                "this copies a row of a module-level constant, whose length the kernel cannot see: \
                 annotate the local (`let row: [f64; 4] = W[i];`)",
            ));
        }
        let id = self.bind(&ident.ident.to_string(), ty, false);
        self.resolved.insert(key(local), id);
        Ok(())
    }
}
