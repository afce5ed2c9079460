//! Rust kernel functions to CUDA C++ `__device__` functions.
//!
//! Two passes over the function body. [`Infer`] resolves every name to a
//! binding and gives every expression a type (see [`crate::types`]); it
//! rejects anything outside the subset with an error at the offending span.
//! [`Emit`] then writes C++ with explicit types, using the prelude's helpers
//! where C++ and Rust disagree (signed overflow, shifts, float-to-int casts,
//! `powi`, `signum`). Shadowed bindings get fresh C++ names.

use std::collections::{HashMap, HashSet};

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{BinOp, Block, Expr, ExprLit, FnArg, ItemFn, Lit, Pat, ReturnType, Stmt, Type, UnOp};

use crate::types::{error, Scalar, Ty, Vars};

/// What the translated function is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FnKind {
    /// A loop kernel: reference parameters only, returns nothing.
    Kernel,
    /// A helper callable from kernels: scalars by value too, may return a scalar.
    Device,
}

/// The shape of a parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Rust name.
    pub name: String,
    /// Element type.
    pub elem: Scalar,
    /// 1 for `T` and `[T; N]`, `N` for `[[T; M]; N]`.
    pub rows: usize,
    /// 1 for `T`, `N` for `[T; N]`, `M` for `[[T; M]; N]`.
    pub cols: usize,
    /// Whether the parameter is an array (`[T; N]` or `[[T; M]; N]`).
    pub array: bool,
    /// Whether it is passed by reference.
    pub by_ref: bool,
    /// Whether the reference is `&mut`.
    pub mutable: bool,
}

impl Param {
    /// The C++ parameter declaration.
    pub fn cpp_decl(&self, cname: &str) -> String {
        let t = cpp_scalar(self.elem, false);
        let c = if self.mutable { "" } else { "const " };
        match (self.by_ref, self.rows > 1) {
            (false, _) => format!("{t} {cname}"),
            (true, false) => format!("{c}{t}* __restrict__ {cname}"),
            (true, true) => format!("{c}{t} (* __restrict__ {cname})[{}]", self.cols),
        }
    }
}

/// A translated function.
#[derive(Clone, Debug)]
pub struct Translation {
    /// The Rust name.
    pub name: String,
    /// The C++ name.
    pub cname: String,
    /// Parameters in order.
    pub params: Vec<Param>,
    /// Return type (`None`: returns nothing).
    pub ret: Option<Scalar>,
    /// The `__device__` function definition.
    pub source: String,
    /// Helper functions called, by Rust name, in order of first call.
    pub calls: Vec<String>,
    /// Per parameter: whether the body only adds to it (`*p += x`,
    /// `p[i] -= x`) and never reads or assigns it otherwise, so that an INC
    /// argument (a zeroed private copy added to the target afterwards) gives
    /// the same result as running on the target itself. `true` for `&`
    /// parameters and by-value helper parameters.
    pub increment_only: Vec<bool>,
    /// Whether the body can panic by Rust's rules in a way the translation
    /// checks in every build: integer division or remainder by a divisor
    /// that is not a positive literal (by zero, or `MIN / -1`). Such checks
    /// report through the prelude's `pl_error` record (see [`crate::PRELUDE`]).
    pub may_panic: bool,
    /// Bytes of the function's locals (every local and array, summed over
    /// all scopes: an upper bound of its frame before spills), for sizing
    /// the emulated device's fiber stacks.
    pub frame_bytes: usize,
}

/// Translates `item` into CUDA C++.
///
/// ```
/// let f: syn::ItemFn = syn::parse_quote! {
///     fn axpy(a: &f32, x: &[f32; 2], y: &mut [f32; 2]) {
///         for i in 0..2 {
///             y[i] += *a * x[i] + 1.0;
///         }
///     }
/// };
/// let t = parloop_kernels::translate(&f, parloop_kernels::FnKind::Kernel).unwrap();
/// assert!(t.source.contains("__device__ inline void pl_fn_axpy(const float* __restrict__ a"));
/// assert!(t.source.contains("for (int i = 0; i < 2; ++i)"));
/// assert!(t.source.contains("1.0f")); // f32 literals stay f32
/// ```
pub fn translate(item: &ItemFn, kind: FnKind) -> syn::Result<Translation> {
    let (mut infer, params, ret) = infer(item, kind)?;
    let name = item.sig.ident.to_string();
    let cname = fn_cname(&name);
    let increment_only = increment_only(item, &infer, &params);
    let frame_bytes = infer.frame_bytes(params.len());
    let mut emit =
        Emit { infer: &mut infer, out: String::new(), indent: 1, pre: Vec::new(), temps: 0, may_panic: false };
    let decls: Vec<String> = params.iter().map(|p| p.cpp_decl(&cpp_ident(&p.name))).collect();
    let ret_c = ret.map_or("void", |s| cpp_scalar(s, false));
    emit.out = format!("__device__ inline {ret_c} {cname}({}) {{\n", decls.join(", "));
    emit.block_body(&item.block, ret.is_some())?;
    emit.out.push_str("}\n");
    let source = std::mem::take(&mut emit.out);
    let may_panic = emit.may_panic;
    Ok(Translation {
        name,
        cname,
        params,
        ret,
        source,
        calls: infer.calls.clone(),
        increment_only,
        may_panic,
        frame_bytes,
    })
}

/// Pass 1 over `item`: its names and types, parameters and return type.
pub(crate) fn infer(item: &ItemFn, kind: FnKind) -> syn::Result<(Infer, Vec<Param>, Option<Scalar>)> {
    let mut infer = Infer::new(kind);
    let params = infer.params(item)?;
    let ret = match &item.sig.output {
        ReturnType::Default => None,
        ReturnType::Type(_, ty) => {
            if kind == FnKind::Kernel {
                return Err(error(ty.span(), "a kernel returns nothing: write results through `&mut` parameters"));
            }
            Some(scalar_of_type(ty)?)
        }
    };
    check_signature(item)?;
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
        return Err(error(sig.generics.span(), "kernels cannot be generic"));
    }
    if let Some(v) = &sig.variadic {
        return Err(error(v.span(), "kernels cannot be variadic"));
    }
    Ok(())
}

/// C++ spelling of a scalar; `narrow` usize values are `int`.
fn cpp_scalar(s: Scalar, narrow: bool) -> &'static str {
    if s == Scalar::Usize && narrow {
        "int"
    } else {
        s.cpp()
    }
}

const CPP_RESERVED: &[&str] = &[
    "alignas",
    "alignof",
    "and",
    "asm",
    "auto",
    "bool",
    "case",
    "catch",
    "char",
    "class",
    "const",
    "constexpr",
    "default",
    "delete",
    "do",
    "double",
    "explicit",
    "export",
    "extern",
    "float",
    "friend",
    "goto",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "operator",
    "or",
    "private",
    "protected",
    "public",
    "register",
    "short",
    "signed",
    "sizeof",
    "static",
    "switch",
    "template",
    "this",
    "throw",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "xor",
    "NULL",
    // Math functions and CUDA names a Rust identifier could shadow.
    "sqrt",
    "sqrtf",
    "fabs",
    "fabsf",
    "fmin",
    "fmax",
    "fma",
    "pow",
    "exp",
    "log",
    "log10",
    "sin",
    "cos",
    "tan",
    "atan",
    "atan2",
    "floor",
    "ceil",
    "round",
    "hypot",
    "copysign",
    "fmod",
    "min",
    "max",
    "abs",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "atomicAdd",
    "atomicMin",
    "atomicMax",
    "atomicCAS",
    "prm",
    // Macros and functions of <math.h>, <stdlib.h>, <string.h>, <stdint.h>.
    "NAN",
    "INFINITY",
    "HUGE_VAL",
    "HUGE_VALF",
    "HUGE_VALL",
    "M_PI",
    "M_E",
    "M_SQRT2",
    "M_LN2",
    "M_LN10",
    "isnan",
    "isinf",
    "isfinite",
    "isnormal",
    "signbit",
    "fpclassify",
    "errno",
    "assert",
    "EXIT_SUCCESS",
    "EXIT_FAILURE",
    "RAND_MAX",
    "SIZE_MAX",
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "UINT32_MAX",
    "UINT64_MAX",
    "abort",
    "malloc",
    "free",
    "memset",
    "memcpy",
];

/// A C++ identifier for a Rust local or parameter: keywords and names of
/// the C/CUDA headers get a trailing underscore; names in the reserved
/// spaces of generated code (`pl_`, `PL_`, `PARLOOP`, any case, and `__`)
/// and non-ASCII names get the prefix `pl_u_` (generated names never start
/// with it), so no user name can collide with a generated one.
pub fn cpp_ident(name: &str) -> String {
    let name = name.strip_prefix("r#").unwrap_or(name);
    if !name.is_ascii() {
        return format!("pl_u_{:016x}", fnv1a(name.as_bytes()));
    }
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("pl_") || lower.starts_with("parloop") || name.starts_with("__") {
        format!("pl_u_{name}")
    } else if CPP_RESERVED.contains(&name) {
        format!("{name}_")
    } else {
        name.to_owned()
    }
}

/// The C++ name of a translated function (kernel or helper): `pl_fn_` and
/// the Rust name, so that no Rust name (`main`, a C++ keyword, a math
/// function, a prelude or emulator identifier) can collide with anything
/// in a module; names longer than 48 bytes (or not ASCII) keep a short
/// prefix and add a hash of the whole name.
pub fn fn_cname(name: &str) -> String {
    let name = name.strip_prefix("r#").unwrap_or(name);
    if name.is_ascii() && name.len() <= 48 {
        return format!("pl_fn_{name}");
    }
    let short: String = name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(24).collect();
    format!("pl_fn_{short}_{:016x}", fnv1a(name.as_bytes()))
}

/// A stable 64-bit FNV-1a hash.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn scalar_of_type(ty: &Type) -> syn::Result<Scalar> {
    if let Type::Path(p) = ty {
        if p.qself.is_none() && p.path.segments.len() == 1 {
            if let Some(s) = Scalar::from_name(&p.path.segments[0].ident.to_string()) {
                return Ok(s);
            }
        }
    }
    Err(error(ty.span(), "expected a scalar type: f64, f32, i32, u32, i64, u64, usize or bool"))
}

fn array_len(e: &Expr) -> syn::Result<usize> {
    if let Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) = e {
        return i.base10_parse::<usize>().map_err(|_| error(e.span(), "array length must be a small integer"));
    }
    Err(error(e.span(), "array lengths in kernels must be integer literals"))
}

#[derive(Clone, Debug)]
pub(crate) struct Binding {
    cname: String,
    pub(crate) ty: Ty,
    /// usize stored as C++ `int` (loop indices with bounds that fit).
    narrow: bool,
    /// A `for` variable over literal bounds (not `mut`): its largest value,
    /// so that indexing an array longer than that needs no check.
    max: Option<u128>,
}

/// Pass 1: names and types.
pub(crate) struct Infer {
    kind: FnKind,
    pub(crate) vars: Vars,
    ret: Ty,
    /// Parameters first, in order, then locals as they are met.
    pub(crate) bindings: Vec<Binding>,
    scopes: Vec<Vec<(String, usize)>>,
    used_names: HashSet<String>,
    /// Type of every expression, by address.
    pub(crate) types: HashMap<usize, Ty>,
    /// Binding of every path expression and `let`/`for` pattern, by address.
    pub(crate) resolved: HashMap<usize, usize>,
    calls: Vec<String>,
}

pub(crate) fn key<T>(node: &T) -> usize {
    node as *const T as usize
}

const FLOAT_METHODS_1: &[&str] =
    &["sqrt", "abs", "exp", "ln", "log10", "sin", "cos", "tan", "atan", "floor", "ceil", "round", "signum"];
const FLOAT_METHODS_2: &[&str] = &["min", "max", "powf", "atan2", "hypot"];

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
        total.saturating_add(8 * nparams)
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
        }
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
                         (and `T` by value in helpers) with T one of f64, f32, i32, u32, i64, u64";
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
        let (elem, rows, cols, array) = match inner {
            Type::Array(a) => match &*a.elem {
                Type::Array(b) => (elem_of(&b.elem)?, array_len(&a.len)?, array_len(&b.len)?, true),
                e => (elem_of(e)?, 1, array_len(&a.len)?, true),
            },
            Type::Paren(p) => return self.param_type(name, &p.elem),
            t => (elem_of(t)?, 1, 1, false),
        };
        if array && !by_ref {
            return Err(error(ty.span(), supported));
        }
        let s = self.vars.known(elem);
        let base = if !array {
            s
        } else if rows > 1 {
            Ty::Array(Box::new(Ty::Array(Box::new(s), cols)), rows)
        } else {
            Ty::Array(Box::new(s), cols)
        };
        let ty = if by_ref { Ty::Ref(Box::new(base), mutable) } else { base };
        Ok((Param { name: name.into(), elem, rows, cols, array, by_ref, mutable }, ty))
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
                    self.unify(c.expr.span(), &t, &s)?;
                    let id = self.bind(&c.ident.to_string(), s, false);
                    self.resolved.insert(key(c), id);
                    Ty::Unit
                }
                Stmt::Item(item) => {
                    return Err(error(item.span(), "only local `const` items are supported inside kernels"))
                }
                Stmt::Macro(m) => {
                    return Err(error(m.span(), "macros are not supported inside kernels"));
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

    fn local(&mut self, local: &syn::Local) -> syn::Result<()> {
        let (ident, annotated) = match &local.pat {
            Pat::Ident(pi) => (pi, None),
            Pat::Type(pt) => match &*pt.pat {
                Pat::Ident(pi) => (pi, Some(&*pt.ty)),
                p => return Err(error(p.span(), "`let` binds one name here (no patterns or tuples)")),
            },
            p => return Err(error(p.span(), "`let` binds one name here (no patterns or tuples)")),
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
            let t = match &*init.expr {
                Expr::Array(a) => {
                    let elem = self.vars.any();
                    for e in &a.elems {
                        let te = self.expr(e)?;
                        self.unify(e.span(), &te, &elem)?;
                    }
                    self.record(&init.expr, Ty::Array(Box::new(elem), a.elems.len()))
                }
                Expr::Repeat(r) => {
                    let te = self.expr(&r.expr)?;
                    let n = array_len(&r.len)?;
                    self.record(&init.expr, Ty::Array(Box::new(te), n))
                }
                e => self.expr(e)?,
            };
            let t = if matches!(t, Ty::Ref(..)) && !matches!(ty, Ty::Ref(..)) { self.vars.deref(&t) } else { t };
            if matches!(t, Ty::Ref(..)) {
                return Err(error(init.expr.span(), "references cannot be stored in locals; copy the value instead"));
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
        let id = self.bind(&ident.ident.to_string(), ty, false);
        self.resolved.insert(key(local), id);
        Ok(())
    }

    fn expr(&mut self, e: &Expr) -> syn::Result<Ty> {
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
                        _ => Err(error(span, "only references (kernel parameters) can be dereferenced")),
                    },
                    UnOp::Neg(_) => {
                        let t = self.vars.deref(&t);
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
                self.unify(span, &l, &r)?;
                Ok(Ty::Unit)
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
            Expr::Call(c) => {
                let Expr::Path(p) = &*c.func else {
                    return Err(error(c.func.span(), "only calls of helper functions by name are supported"));
                };
                let Some(name) = p.path.get_ident().map(|i| i.to_string()) else {
                    return Err(error(
                        c.func.span(),
                        "call helpers by their plain name (bring them into scope with `use`)",
                    ));
                };
                for a in &c.args {
                    self.expr(a)?;
                }
                if !self.calls.contains(&name) {
                    self.calls.push(name);
                }
                // The helper's return type is not visible here: rustc checks
                // it, and a `let` bound to a call needs an annotation.
                Ok(self.vars.any())
            }
            Expr::Reference(r) => {
                let t = self.expr(&r.expr)?;
                Ok(Ty::Ref(Box::new(self.vars.deref(&t)), r.mutability.is_some()))
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
                if w.label.is_some() {
                    return Err(error(span, "loop labels are not supported"));
                }
                let c = self.expr(&w.cond)?;
                let b = self.vars.known(Scalar::Bool);
                self.unify(w.cond.span(), &c, &b)?;
                self.block(&w.body)?;
                Ok(Ty::Unit)
            }
            Expr::Loop(l) => {
                if l.label.is_some() {
                    return Err(error(span, "loop labels are not supported"));
                }
                self.block(&l.body)?;
                Ok(Ty::Unit)
            }
            Expr::Break(b) => {
                if b.label.is_some() || b.expr.is_some() {
                    return Err(error(span, "`break` with a label or a value is not supported"));
                }
                Ok(Ty::Never)
            }
            Expr::Continue(c) => {
                if c.label.is_some() {
                    return Err(error(span, "`continue` with a label is not supported"));
                }
                Ok(Ty::Never)
            }
            Expr::Return(r) => {
                let t = match &r.expr {
                    Some(v) => self.expr(v)?,
                    None => Ty::Unit,
                };
                let ret = self.ret.clone();
                self.unify(span, &t, &ret)?;
                Ok(Ty::Never)
            }
            Expr::Array(_) | Expr::Repeat(_) => {
                Err(error(span, "array literals are only supported as the value of a `let`"))
            }
            Expr::Range(_) => Err(error(span, "ranges are only supported as the iterator of a `for` loop")),
            Expr::Tuple(_) => Err(error(span, "tuples are not supported in kernels")),
            Expr::Macro(_) => Err(error(span, "macros are not supported inside kernels")),
            Expr::Closure(_) => Err(error(span, "closures are not supported in kernels")),
            Expr::Match(_) => Err(error(span, "`match` is not supported in kernels; use `if`/`else`")),
            Expr::Unsafe(_) => Err(error(span, "`unsafe` blocks are not supported in kernels")),
            Expr::Field(_) => Err(error(span, "field access is not supported in kernels (no structs or tuples)")),
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
            let id = self.lookup(&name).ok_or_else(|| {
                error(p.span(), format!("`{name}` is not a parameter, local or local const of this kernel"))
            })?;
            self.resolved.insert(key(e), id);
            return Ok(self.bindings[id].ty.clone());
        }
        match constant(&p.path) {
            Some((s, _)) => Ok(self.vars.known(s)),
            None => Err(error(
                p.span(),
                "unsupported path: kernels see their parameters, locals, local consts, \
                 `f64::consts::*`, `f32::consts::*` and the MIN/MAX/EPSILON constants of the scalar types",
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
        let (ld, rd) = (self.vars.deref(&l), self.vars.deref(&r));
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
        let args: Vec<Ty> = m.args.iter().map(|a| self.expr(a)).collect::<syn::Result<_>>()?;
        let arity_err =
            |n: usize| Err(error(m.span(), format!("`{name}` takes {n} argument{}", if n == 1 { "" } else { "s" })));
        let is_float = self.vars.is_float(&recv);
        match name.as_str() {
            n if FLOAT_METHODS_1.contains(&n) || (n == "abs") => {
                if !args.is_empty() {
                    return arity_err(0);
                }
                if n != "abs" {
                    self.vars.require_float(&recv).map_err(|e| error(m.receiver.span(), e))?;
                } else if !is_float {
                    // Integer abs is allowed too; an unresolved literal defaults by rustc's rule.
                    let s = self.vars.known_scalar(&recv);
                    if matches!(s, Some(Scalar::U32 | Scalar::U64 | Scalar::Usize | Scalar::Bool)) {
                        return Err(error(m.span(), "`abs` needs a signed type"));
                    }
                }
                Ok(recv)
            }
            n if FLOAT_METHODS_2.contains(&n) => {
                if args.len() != 1 {
                    return arity_err(1);
                }
                if !matches!(n, "min" | "max") {
                    self.vars.require_float(&recv).map_err(|e| error(m.receiver.span(), e))?;
                }
                let a = self.vars.deref(&args[0]);
                self.unify(m.args[0].span(), &recv, &a)?;
                Ok(recv)
            }
            "mul_add" => {
                if args.len() != 2 {
                    return arity_err(2);
                }
                self.vars.require_float(&recv).map_err(|e| error(m.receiver.span(), e))?;
                for (a, e) in args.iter().zip(&m.args) {
                    let a = self.vars.deref(a);
                    self.unify(e.span(), &recv, &a)?;
                }
                Ok(recv)
            }
            "powi" => {
                if args.len() != 1 {
                    return arity_err(1);
                }
                self.vars.require_float(&recv).map_err(|e| error(m.receiver.span(), e))?;
                let i = self.vars.known(Scalar::I32);
                let a = self.vars.deref(&args[0]);
                self.unify(m.args[0].span(), &a, &i)?;
                Ok(recv)
            }
            "is_nan" => {
                if !args.is_empty() {
                    return arity_err(0);
                }
                self.vars.require_float(&recv).map_err(|e| error(m.receiver.span(), e))?;
                Ok(self.vars.known(Scalar::Bool))
            }
            "rev" | "step_by" => {
                Err(error(m.span(), "`.rev()` and `.step_by()` are only supported on the range of a `for` loop"))
            }
            _ => Err(error(
                m.method.span(),
                format!(
                    "method `{name}` is not supported in kernels; supported: sqrt abs min max mul_add powi powf exp \
                     ln log10 sin cos tan atan atan2 floor ceil round signum hypot is_nan (floats), min max abs \
                     (integers)"
                ),
            )),
        }
    }

    fn for_loop(&mut self, f: &syn::ExprForLoop) -> syn::Result<Ty> {
        if f.label.is_some() {
            return Err(error(f.span(), "loop labels are not supported"));
        }
        let Pat::Ident(pi) = &*f.pat else {
            return Err(error(f.pat.span(), "the loop variable must be a plain name"));
        };
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
        let narrow = [range.start, range.end].iter().all(|b| literal_fits_i32(b));
        self.scopes.push(Vec::new());
        let id = self.bind(&pi.ident.to_string(), t, narrow);
        if pi.mutability.is_none() {
            if let Some(hi) = int_literal_value(range.end) {
                // Every value is at most `max` (rev and step_by take a
                // subset; an empty range runs nothing).
                let max = if range.inclusive { hi } else { hi.saturating_sub(1) };
                self.bindings[id].max = Some(max);
            }
        }
        self.resolved.insert(key(f), id);
        self.block(&f.body)?;
        self.scopes.pop();
        Ok(Ty::Unit)
    }
}

/// Whether `op` is a compound assignment (`+=`, `<<=`, ...).
fn is_compound(op: &BinOp) -> bool {
    use BinOp::*;
    matches!(
        op,
        AddAssign(_)
            | SubAssign(_)
            | MulAssign(_)
            | DivAssign(_)
            | RemAssign(_)
            | BitAndAssign(_)
            | BitOrAssign(_)
            | BitXorAssign(_)
            | ShlAssign(_)
            | ShrAssign(_)
    )
}

/// The value of an integer literal (through parentheses).
fn int_literal_value(e: &Expr) -> Option<u128> {
    match e {
        Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) => i.base10_parse::<u128>().ok(),
        Expr::Paren(p) => int_literal_value(&p.expr),
        Expr::Group(g) => int_literal_value(&g.expr),
        _ => None,
    }
}

fn literal_fits_i32(e: &Expr) -> bool {
    match e {
        Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) => i.base10_parse::<i64>().is_ok_and(|v| v < i32::MAX as i64),
        Expr::Paren(p) => literal_fits_i32(&p.expr),
        _ => false,
    }
}

/// A `for` loop's iterator: `a..b`, `a..=b`, with `.rev()` and `.step_by(k)`.
struct LoopRange<'a> {
    start: &'a Expr,
    end: &'a Expr,
    inclusive: bool,
    rev: bool,
    step: Option<&'a Expr>,
}

impl<'a> LoopRange<'a> {
    fn parse(e: &'a Expr) -> syn::Result<LoopRange<'a>> {
        let unsupported = || {
            error(
                e.span(),
                "`for` loops iterate over integer ranges: `a..b`, `a..=b`, `(a..b).rev()`, `(a..b).step_by(k)`",
            )
        };
        match e {
            Expr::Paren(p) => LoopRange::parse(&p.expr),
            Expr::Group(g) => LoopRange::parse(&g.expr),
            Expr::Range(r) => {
                let (Some(start), Some(end)) = (&r.start, &r.end) else {
                    return Err(unsupported());
                };
                Ok(LoopRange {
                    start,
                    end,
                    inclusive: matches!(r.limits, syn::RangeLimits::Closed(_)),
                    rev: false,
                    step: None,
                })
            }
            Expr::MethodCall(m) => {
                let mut inner = LoopRange::parse(&m.receiver)?;
                match (m.method.to_string().as_str(), m.args.len()) {
                    ("rev", 0) if !inner.rev && inner.step.is_none() => inner.rev = true,
                    ("step_by", 1) if inner.step.is_none() => inner.step = Some(&m.args[0]),
                    _ => return Err(unsupported()),
                }
                Ok(inner)
            }
            _ => Err(unsupported()),
        }
    }
}

/// Constants of the scalar types: `f64::consts::PI`, `i32::MAX`, ...
fn constant(path: &syn::Path) -> Option<(Scalar, String)> {
    let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let segs = match segs.as_slice() {
        ["std" | "core", rest @ ..] => rest,
        rest => rest,
    };
    let (ty, name) = match segs {
        [ty, "consts", name] => (Scalar::from_name(ty)?, *name),
        [ty, name] => (Scalar::from_name(ty)?, *name),
        _ => return None,
    };
    let f64_consts = |n: &str| -> Option<f64> {
        use std::f64::consts::*;
        Some(match n {
            "PI" => PI,
            "TAU" => TAU,
            "E" => E,
            "SQRT_2" => SQRT_2,
            "FRAC_1_SQRT_2" => FRAC_1_SQRT_2,
            "LN_2" => LN_2,
            "LN_10" => LN_10,
            "LOG2_E" => LOG2_E,
            "LOG10_E" => LOG10_E,
            "LOG2_10" => LOG2_10,
            "LOG10_2" => LOG10_2,
            "FRAC_PI_2" => FRAC_PI_2,
            "FRAC_PI_3" => FRAC_PI_3,
            "FRAC_PI_4" => FRAC_PI_4,
            "FRAC_PI_6" => FRAC_PI_6,
            "FRAC_PI_8" => FRAC_PI_8,
            "FRAC_1_PI" => FRAC_1_PI,
            "FRAC_2_PI" => FRAC_2_PI,
            "FRAC_2_SQRT_PI" => FRAC_2_SQRT_PI,
            _ => return None,
        })
    };
    let is_const_path = segs.len() == 3;
    let text = match ty {
        Scalar::F64 if is_const_path => format!("{:e}", f64_consts(name)?),
        Scalar::F32 if is_const_path => format!("{:e}f", f64_consts(name)? as f32),
        Scalar::F64 => format!(
            "{:e}",
            match name {
                "MAX" => f64::MAX,
                "MIN" => f64::MIN,
                "EPSILON" => f64::EPSILON,
                "MIN_POSITIVE" => f64::MIN_POSITIVE,
                _ => return None,
            }
        ),
        Scalar::F32 => format!(
            "{:e}f",
            match name {
                "MAX" => f32::MAX,
                "MIN" => f32::MIN,
                "EPSILON" => f32::EPSILON,
                "MIN_POSITIVE" => f32::MIN_POSITIVE,
                _ => return None,
            }
        ),
        s if s.is_int() && !is_const_path => int_limit(s, name)?,
        _ => return None,
    };
    Some((ty, text))
}

fn int_limit(s: Scalar, name: &str) -> Option<String> {
    Some(match (s, name) {
        (Scalar::I32, "MAX") => "2147483647".into(),
        (Scalar::I32, "MIN") => "(-2147483647 - 1)".into(),
        (Scalar::U32, "MAX") => "4294967295u".into(),
        (Scalar::U32, "MIN") => "0u".into(),
        (Scalar::I64, "MAX") => "9223372036854775807ll".into(),
        (Scalar::I64, "MIN") => "(-9223372036854775807ll - 1)".into(),
        (Scalar::U64 | Scalar::Usize, "MAX") => "18446744073709551615ull".into(),
        (Scalar::U64 | Scalar::Usize, "MIN") => "0ull".into(),
        _ => return None,
    })
}

/// Pass 2: C++ text.
struct Emit<'a> {
    infer: &'a mut Infer,
    out: String,
    indent: usize,
    /// Statements that must run before the statement being emitted.
    pre: Vec<String>,
    temps: usize,
    /// Whether a checked integer division or remainder was emitted.
    may_panic: bool,
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
            error(e.span(), "cannot infer the type of this value (a helper's result?): annotate it, `let x: f64 = ...`")
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

    fn cpp_type_of(&mut self, t: &Ty, span: Span, narrow: bool) -> syn::Result<(String, String)> {
        // (type, array suffix)
        match t {
            Ty::Array(elem, n) => {
                let (inner, suffix) = self.cpp_type_of(elem, span, false)?;
                Ok((inner, format!("[{n}]{suffix}")))
            }
            _ => {
                let s = self.infer.vars.scalar(t).ok_or_else(|| {
                    error(
                        span,
                        "cannot infer this local's type (bound to a helper's result?): annotate it, `let x: f64 = ...`",
                    )
                })?;
                Ok((cpp_scalar(s, narrow).into(), String::new()))
            }
        }
    }

    /// Emits the statements of a block (without braces); with `ret`, a tail
    /// expression is returned.
    fn block_body(&mut self, b: &Block, ret: bool) -> syn::Result<()> {
        let n = b.stmts.len();
        for (i, stmt) in b.stmts.iter().enumerate() {
            match stmt {
                Stmt::Local(local) => self.local(local)?,
                Stmt::Item(syn::Item::Const(c)) => {
                    let id = self.infer.resolved[&key(c)];
                    let b = self.infer.bindings[id].clone();
                    let (t, _) = self.cpp_type_of(&b.ty, c.span(), false)?;
                    let v = self.value(&c.expr)?;
                    self.flush_pre();
                    self.line(&format!("const {t} {} = {v};", b.cname));
                }
                Stmt::Expr(e, semi) => {
                    let tail = i + 1 == n && semi.is_none();
                    if tail && ret && !matches!(self.ty_of(e), Ty::Unit | Ty::Never) {
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
        let id = self.infer.resolved[&key(local)];
        if let Some(init) = &local.init {
            // A usize computed from narrow indices and small literals stays `int`.
            if self.infer.vars.scalar(&self.infer.bindings[id].ty.clone()) == Some(Scalar::Usize)
                && self.is_narrow(&init.expr)
            {
                self.infer.bindings[id].narrow = true;
            }
        }
        let b = self.infer.bindings[id].clone();
        let (t, suffix) = self.cpp_type_of(&b.ty, local.span(), b.narrow)?;
        let Some(init) = &local.init else {
            self.line(&format!("{t} {}{suffix};", b.cname));
            return Ok(());
        };
        match &*init.expr {
            Expr::Array(a) => {
                let vals: Vec<String> = a.elems.iter().map(|e| self.value(e)).collect::<syn::Result<_>>()?;
                self.flush_pre();
                self.line(&format!("{t} {}{suffix} = {{{}}};", b.cname, vals.join(", ")));
            }
            Expr::Repeat(r) => {
                let v = self.value(&r.expr)?;
                let n = array_len(&r.len)?;
                self.flush_pre();
                if matches!(self.ty_of(&r.expr), Ty::Array(..)) {
                    return Err(error(r.span(), "nested array repeats are not supported; declare rows separately"));
                }
                self.line(&format!("{t} {}{suffix};", b.cname));
                let k = self.temp("k");
                self.line(&format!("for (int {k} = 0; {k} < {n}; ++{k}) {}[{k}] = {v};", b.cname));
            }
            e if matches!(b.ty, Ty::Array(..)) => {
                // Copy an array (say `let a = *x;`) element by element.
                let src = self.array_source(e)?;
                let Ty::Array(_, n) = &b.ty else { unreachable!() };
                self.flush_pre();
                self.line(&format!("{t} {}{suffix};", b.cname));
                let k = self.temp("k");
                self.line(&format!("for (int {k} = 0; {k} < {n}; ++{k}) {}[{k}] = {src}[{k}];", b.cname));
                if suffix.matches('[').count() > 1 {
                    return Err(error(e.span(), "copying two-dimensional arrays is not supported"));
                }
            }
            e => {
                let v = self.value(e)?;
                self.flush_pre();
                self.line(&format!("{t} {}{suffix} = {v};", b.cname));
            }
        }
        Ok(())
    }

    /// Whether a usize expression only combines narrow (`int`) indices and
    /// small literals with `+ - * / %` and `min`/`max`.
    fn is_narrow(&self, e: &Expr) -> bool {
        match e {
            Expr::Lit(_) => literal_fits_i32(e),
            Expr::Paren(p) => self.is_narrow(&p.expr),
            Expr::Path(_) => self.infer.resolved.get(&key(e)).is_some_and(|&id| self.infer.bindings[id].narrow),
            Expr::Binary(b) => {
                matches!(b.op, BinOp::Add(_) | BinOp::Sub(_) | BinOp::Mul(_) | BinOp::Div(_) | BinOp::Rem(_))
                    && self.is_narrow(&b.left)
                    && self.is_narrow(&b.right)
            }
            Expr::MethodCall(m) => {
                matches!(m.method.to_string().as_str(), "min" | "max")
                    && self.is_narrow(&m.receiver)
                    && m.args.iter().all(|a| self.is_narrow(a))
            }
            _ => false,
        }
    }

    /// An array-valued expression as something indexable.
    fn array_source(&mut self, e: &Expr) -> syn::Result<String> {
        match e {
            Expr::Unary(u) if matches!(u.op, UnOp::Deref(_)) => self.expr(&u.expr),
            Expr::Paren(p) => self.array_source(&p.expr),
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
                self.nested_block(&w.body)?;
                self.line("}");
                Ok(())
            }
            Expr::Loop(l) => {
                self.line("while (true) {");
                self.nested_block(&l.body)?;
                self.line("}");
                Ok(())
            }
            Expr::Block(b) => {
                self.line("{");
                self.nested_block(&b.block)?;
                self.line("}");
                Ok(())
            }
            Expr::Break(_) => {
                self.line("break;");
                Ok(())
            }
            Expr::Continue(_) => {
                self.line("continue;");
                Ok(())
            }
            Expr::Return(r) => {
                match &r.expr {
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
            _ => {
                let s = self.expr(e)?;
                self.flush_pre();
                self.line(&format!("{s};"));
                Ok(())
            }
        }
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
            Some(s) => Some(self.value(s)?),
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
                let step = step.clone().unwrap_or_else(|| "1".into());
                let span = if range.inclusive { format!("({hi} - {lo}) + 1") } else { format!("({hi} - {lo})") };
                self.line(&format!("const {t} {lo} = {start};"));
                self.line(&format!("const {t} {hi} = {end};"));
                self.line(&format!(
                    "const unsigned long long {n} = ({hi} {} {lo}) ? 0ull : ((unsigned long long)({span}) + ({step}) - 1) / ({step});",
                    if range.inclusive { "<" } else { "<=" }
                ));
                self.line(&format!("for (unsigned long long {k} = 0; {k} < {n}; ++{k}) {{"));
                self.indent += 1;
                let index = if range.rev {
                    let last = if range.inclusive { hi.clone() } else { format!("({hi} - 1)") };
                    format!("({t})({last} - ({t})({k} * ({step})))")
                } else {
                    format!("({t})({lo} + ({t})({k} * ({step})))")
                };
                self.line(&format!("const {t} {i} = {index};"));
                self.indent -= 1;
            }
        }
        self.nested_block(&f.body)?;
        self.line("}");
        Ok(())
    }

    /// `e` as an rvalue, dereferencing scalar references.
    fn value(&mut self, e: &Expr) -> syn::Result<String> {
        let s = self.expr(e)?;
        Ok(match self.ty_of(e) {
            Ty::Ref(inner, _) if matches!(*inner, Ty::Var(_)) => format!("(*{s})"),
            _ => s,
        })
    }

    fn expr(&mut self, e: &Expr) -> syn::Result<String> {
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
                Ok(constant(&p.path).expect("checked by inference").1)
            }
            Expr::Unary(u) => match u.op {
                UnOp::Deref(_) => Ok(format!("(*{})", self.expr(&u.expr)?)),
                UnOp::Neg(_) => {
                    let s = self.scalar_of(e)?;
                    if let Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) = &*u.expr {
                        return Ok(negative_int_literal(i, s));
                    }
                    let v = self.value(&u.expr)?;
                    if s.is_signed_int() {
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
                    e => self.loop_max(e).is_some_and(|m| m < len as u128),
                };
                if in_range {
                    Ok(format!("{base}[{idx}]"))
                } else {
                    Ok(format!("{base}[PL_IX({idx}, {len})]"))
                }
            }
            Expr::Cast(c) => self.cast(c),
            Expr::MethodCall(m) => self.method(e, m),
            Expr::Call(c) => {
                let Expr::Path(p) = &*c.func else { unreachable!("checked by inference") };
                let name = fn_cname(&p.path.get_ident().expect("checked").to_string());
                let args: Vec<String> = c.args.iter().map(|a| self.arg(a)).collect::<syn::Result<_>>()?;
                Ok(format!("{name}({})", args.join(", ")))
            }
            Expr::Reference(r) => {
                let inner = self.expr(&r.expr)?;
                Ok(match self.ty_of(&r.expr) {
                    Ty::Array(..) => inner,
                    Ty::Ref(..) => inner,
                    _ => format!("(&{inner})"),
                })
            }
            Expr::If(i) => self.if_value(e, i),
            Expr::Block(b) => {
                let t = self.ty_of(e);
                let (ct, _) = self.cpp_type_of(&t, span, false)?;
                let tmp = self.temp("v");
                let saved_out = std::mem::take(&mut self.out);
                let saved_pre = std::mem::take(&mut self.pre);
                let saved_indent = self.indent;
                // Captured at indent 0: `flush_pre` re-indents every line.
                self.indent = 0;
                self.line("{");
                self.indent += 1;
                self.assign_block(&b.block, &tmp)?;
                self.indent -= 1;
                self.line("}");
                let body = std::mem::replace(&mut self.out, saved_out);
                self.indent = saved_indent;
                self.pre = saved_pre;
                self.pre.push(format!("{ct} {tmp};"));
                self.pre.extend(body.lines().map(str::to_string));
                Ok(tmp)
            }
            _ => Err(error(span, "this expression is not supported as a value here")),
        }
    }

    /// A call argument: arrays and references pass as pointers, scalars by value.
    fn arg(&mut self, a: &Expr) -> syn::Result<String> {
        match self.ty_of(a) {
            Ty::Ref(..) | Ty::Array(..) => self.expr(a),
            _ => self.value(a),
        }
    }

    /// Emits `b` with its tail assigned to `tmp`.
    fn assign_block(&mut self, b: &Block, tmp: &str) -> syn::Result<()> {
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
            Stmt::Item(syn::Item::Const(c)) => {
                let id = self.infer.resolved[&key(c)];
                let bd = self.infer.bindings[id].clone();
                let (t, _) = self.cpp_type_of(&bd.ty, c.span(), false)?;
                let v = self.value(&c.expr)?;
                self.flush_pre();
                self.line(&format!("const {t} {} = {v};", bd.cname));
                Ok(())
            }
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
            let tv = self.value(t)?;
            let fv = self.value(f)?;
            return Ok(format!("({c} ? {tv} : {fv})"));
        }
        let t = self.ty_of(e);
        let (ct, _) = self.cpp_type_of(&t, e.span(), false)?;
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
        let l = self.value(&b.left)?;
        let r = self.value(&b.right)?;
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
        let compound = is_compound(&b.op);
        // The Rust semantics of the operation, as a C++ expression.
        let lhs_place = if compound { self.expr(&b.left)? } else { String::new() };
        let computed = match op {
            "+" | "-" | "*" if s.is_signed_int() => {
                let f = match op {
                    "+" => "__pl_wadd",
                    "-" => "__pl_wsub",
                    _ => "__pl_wmul",
                };
                Some(format!("{f}({l}, {r})"))
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
        let from = self.scalar_of(&c.expr)?;
        let to = scalar_of_type(&c.ty)?;
        let v = self.value(&c.expr)?;
        if from == to {
            return Ok(v);
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
        if name == "is_nan" {
            let v = self.value(&m.receiver)?;
            return Ok(format!("({v} != {v})"));
        }
        let s = self.scalar_of(e)?;
        let recv = self.value(&m.receiver)?;
        let args: Vec<String> = m.args.iter().map(|a| self.value(a)).collect::<syn::Result<_>>()?;
        if s.is_int() {
            return Ok(match name.as_str() {
                "abs" => format!("__pl_iabs({recv})"),
                "min" => format!("__pl_imin({recv}, {})", args[0]),
                "max" => format!("__pl_imax({recv}, {})", args[0]),
                _ => return Err(error(m.method.span(), format!("`{name}` is a float method"))),
            });
        }
        let f32 = s == Scalar::F32;
        let c = |d: &str, f: &str| if f32 { f.to_string() } else { d.to_string() };
        let func = match name.as_str() {
            "sqrt" => c("sqrt", "sqrtf"),
            "abs" => c("fabs", "fabsf"),
            "min" => c("fmin", "fminf"),
            "max" => c("fmax", "fmaxf"),
            "mul_add" => c("fma", "fmaf"),
            "powf" => c("pow", "powf"),
            "exp" => c("exp", "expf"),
            "ln" => c("log", "logf"),
            "log10" => c("log10", "log10f"),
            "sin" => c("sin", "sinf"),
            "cos" => c("cos", "cosf"),
            "tan" => c("tan", "tanf"),
            "atan" => c("atan", "atanf"),
            "atan2" => c("atan2", "atan2f"),
            "floor" => c("floor", "floorf"),
            "ceil" => c("ceil", "ceilf"),
            "round" => c("round", "roundf"),
            "hypot" => c("hypot", "hypotf"),
            "signum" => "__pl_signum".into(),
            "powi" => "__pl_powi".into(),
            _ => return Err(error(m.method.span(), format!("unsupported method `{name}`"))),
        };
        let mut all = vec![recv];
        all.extend(args);
        Ok(format!("{func}({})", all.join(", ")))
    }
}

/// Whether `e` can be evaluated as part of a C++ expression without
/// statements (no blocks, ifs with statements, loops or jumps).
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
        Expr::Reference(r) => is_pure_value(&r.expr),
        _ => false,
    }
}

fn int_literal(v: u128, s: Scalar) -> String {
    match s {
        Scalar::I32 | Scalar::Usize if v <= i32::MAX as u128 => format!("{v}"),
        Scalar::U32 => format!("{v}u"),
        Scalar::I64 => format!("{v}ll"),
        _ => format!("{v}ull"),
    }
}

fn negative_int_literal(i: &syn::LitInt, s: Scalar) -> String {
    let v: u128 = i.base10_parse().unwrap_or(0);
    match s {
        Scalar::I32 if v == 1 << 31 => "(-2147483647 - 1)".into(),
        Scalar::I64 if v == 1 << 63 => "(-9223372036854775807ll - 1)".into(),
        _ => format!("(-{})", int_literal(v, s)),
    }
}

fn float_literal(digits: &str, s: Scalar) -> String {
    let mut d = digits.to_string();
    if !d.contains(['.', 'e', 'E']) {
        d.push_str(".0");
    }
    if d.ends_with('.') {
        d.push('0');
    }
    if s == Scalar::F32 {
        d.push('f');
    }
    d
}

/// Per parameter of `item`: whether the body only adds to it (see
/// [`Translation::increment_only`]). Every use of a parameter (after name
/// resolution, so shadowing locals do not count) must be the root of the
/// place of a `+=` or `-=` (`*p`, `p[i]`, `p[i][j]`); the index and the
/// added value may not read it.
pub(crate) fn increment_only(item: &ItemFn, infer: &Infer, params: &[Param]) -> Vec<bool> {
    use syn::visit::Visit;

    struct Uses<'a> {
        resolved: &'a HashMap<usize, usize>,
        /// Path expressions that are roots of increment places.
        roots: HashSet<usize>,
        other_use: Vec<bool>,
    }

    /// The root path of an increment place and its index expressions.
    fn place_root<'e>(e: &'e Expr, indices: &mut Vec<&'e Expr>) -> Option<&'e Expr> {
        match e {
            Expr::Paren(p) => place_root(&p.expr, indices),
            Expr::Group(g) => place_root(&g.expr, indices),
            Expr::Unary(u) if matches!(u.op, UnOp::Deref(_)) => place_root(&u.expr, indices),
            Expr::Index(ix) => {
                indices.push(&ix.index);
                place_root(&ix.expr, indices)
            }
            Expr::Path(_) => Some(e),
            _ => None,
        }
    }

    impl<'ast> Visit<'ast> for Uses<'_> {
        fn visit_expr(&mut self, e: &'ast Expr) {
            if let Expr::Binary(b) = e {
                if matches!(b.op, BinOp::AddAssign(_) | BinOp::SubAssign(_)) {
                    let mut indices = Vec::new();
                    if let Some(root) = place_root(&b.left, &mut indices) {
                        self.roots.insert(key(root));
                        for i in indices {
                            self.visit_expr(i);
                        }
                        self.visit_expr(&b.right);
                        return;
                    }
                }
            }
            if let Expr::Path(_) = e {
                if let Some(&id) = self.resolved.get(&key(e)) {
                    if id < self.other_use.len() && !self.roots.contains(&key(e)) {
                        self.other_use[id] = true;
                    }
                }
            }
            syn::visit::visit_expr(self, e);
        }
    }

    let mut uses = Uses { resolved: &infer.resolved, roots: HashSet::new(), other_use: vec![false; params.len()] };
    uses.visit_block(&item.block);
    params.iter().zip(uses.other_use).map(|(p, other)| !p.mutable || !other).collect()
}
