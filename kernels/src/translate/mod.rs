//! Rust kernel functions to CUDA C++ `__device__` functions.
//!
//! Two passes over the function body. [`Infer`] resolves every name to a
//! binding and gives every expression a type (see [`crate::types`]); it
//! rejects anything outside the subset with an error at the offending span.
//! [`Emit`] then writes C++ with explicit types, using the prelude's helpers
//! where C++ and Rust disagree (signed overflow, shifts, float-to-int casts,
//! `powi`, `signum`). Shadowed bindings get fresh C++ names.
//!
//! This module holds the public face of the translator (what a translation
//! is, and [`translate`], which runs the passes in order); each part of the
//! translator lives in its own module:
//!
//! - `infer`: pass 1, names and types (`infer/expr.rs`: expressions);
//! - `emit`: pass 2, C++ text (`emit/expr.rs`: expressions as values);
//! - `names`: C++ identifiers for Rust names (reserved prefixes, keywords,
//!   hashed long names);
//! - `literals`: integer literals' values, and numeric literals and the
//!   scalar types' constants as C++ text;
//! - `syntax`: the pieces of Rust syntax both passes read the same way
//!   (scalar and array types, compound operators, `for` ranges);
//! - `increment`: which parameters the body only adds to;
//! - `sugar`: `matches!` and `if let` as the `match` they stand for;
//! - `folds`: `a.iter().map(..).sum()` (and `product`, `fold`, `any`,
//!   `all`) rewritten to array `for` loops, `method_form`: `f64::sqrt(x)`
//!   read as `x.sqrt()` (and `std::cmp::max(a, b)` as `a.max(b)`),
//!   `fields`: `let t = (a, b); t.0` and `x.sin_cos().0` rewritten to
//!   tuple `let`s and scalars, `iterate`: `for x in a.iter()` (and
//!   `iter_mut`, `zip`, `enumerate`, ...) rewritten to index loops over
//!   reference locals, and `tuples`: `let (a, b) = ...` rewritten to
//!   scalar `let`s (all done before the passes, and before the lane-wise
//!   twin's: [`normal_form`]);
//! - `methods`: the table of scalar methods the passes and the twin read.

mod emit;
mod fields;
mod folds;
mod increment;
mod infer;
mod iterate;
mod literals;
mod method_form;
mod methods;
mod names;
mod panics;
mod sugar;
mod syntax;
mod tuples;

use std::collections::HashMap;

use syn::spanned::Spanned;
use syn::ItemFn;

use proc_macro2::Span;

use crate::types::{error, Scalar, Ty, Vars};
use emit::{cpp_scalar, Emit};
use increment::{increment_only, reductions};

pub(crate) use folds::resolve_neutrals;
pub(crate) use infer::{infer, key, Infer};
pub(crate) use iterate::{uses_element, ELEMENT};
pub(crate) use method_form::method_form;

/// `item` as the passes read it: `assert!`s (and `assert_eq!`,
/// `assert_ne!`) as `if`s around `panic!` (see `panics`), `matches!` and
/// `if let` as `match` (see `sugar`), iterator reductions as array `for`
/// loops (see `folds`), path calls in method form, tuples kept in locals
/// taken apart where they are made (see `fields`), array `for` loops as
/// index loops (see `iterate`), tuple `let`s and assignments rewritten to
/// scalars (see `tuples`).
pub(crate) fn normal_form(item: &ItemFn) -> ItemFn {
    normal_form_with_loops(item).0
}

/// [`normal_form`], and whether array loops were rewritten (see
/// `iterate`: the form is then the translation's, not the host's).
fn normal_form_with_loops(item: &ItemFn) -> (ItemFn, bool) {
    let mut f = item.clone();
    panics::asserts_as_ifs(&mut f);
    panics::formatted_as_lets(&mut f);
    sugar::as_matches(&mut f);
    folds::as_loops(&mut f);
    let mut f = method_form(&f).into_owned();
    fields::as_destructured(&mut f);
    let loops = iterate::index_loops(&mut f);
    tuples::destructure(&mut f);
    (f, loops)
}

/// Whether kernel method `name` yields a `bool` (`is_nan`, ...).
pub(crate) fn method_yields_bool(name: &str) -> bool {
    methods::method(name).is_some_and(|m| m.yields == methods::Yields::Bool)
}
pub use names::{const_cname, cpp_ident, fn_cname};
pub use panics::{function_id, with_debug_asserts};

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
    /// Whether it is an array of rows (`[[T; M]; N]`, even with `N` = 1).
    pub nested: bool,
    /// Whether it is passed by reference (an array passed by value, in a
    /// helper, is the callee's copy: a `__pl_arr` struct).
    pub by_ref: bool,
    /// Whether the reference is `&mut`.
    pub mutable: bool,
}

impl Param {
    /// The C++ parameter declaration.
    pub fn cpp_decl(&self, cname: &str) -> String {
        let t = cpp_scalar(self.elem, false);
        let c = if self.mutable { "" } else { "const " };
        match (self.by_ref, self.nested) {
            // C++ passes no arrays by value: a struct holding one is.
            (false, _) if self.array && self.nested => format!("__pl_arr<{t}[{}][{}]> {cname}", self.rows, self.cols),
            (false, _) if self.array => format!("__pl_arr<{t}[{}]> {cname}", self.cols),
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
    /// Per parameter: the helpers' parameters it is passed to as `&mut`
    /// (helper name, position). It is increment-only when
    /// `increment_only` says so and each of those helpers only adds to
    /// that parameter (their `INCREMENT_ONLY` tables, read at compile
    /// time by the attribute's output).
    pub increment_via: Vec<Vec<(String, usize)>>,
    /// Per parameter that the body itself does more than add to: the first
    /// such use, as source text (`*y = 0.0`), for the error a user sees
    /// when an INC argument meets it.
    pub increment_use: Vec<Option<String>>,
    /// Per parameter: whether a MIN global, and whether a MAX global, may
    /// take it (see `increment::reductions`): the body combines it with
    /// itself by that operation only.
    pub reductions: Vec<(bool, bool)>,
    /// Whether the body can panic by Rust's rules in a way the translation
    /// checks in every build: integer division or remainder by a divisor
    /// that is not a positive literal (by zero, or `MIN / -1`). Such checks
    /// report through the prelude's `pl_error` record (see [`crate::PRELUDE`]).
    pub may_panic: bool,
    /// Bytes of the function's locals (every local and array, summed over
    /// all scopes: an upper bound of its frame before spills), for sizing
    /// the emulated device's fiber stacks.
    pub frame_bytes: usize,
    /// The module-level constants the body reads, in order of first use.
    pub consts: Vec<ConstUse>,
    /// The function for the host, where it must differ from the one given:
    /// the types the translation assumed for values only a helper's
    /// signature types, pinned for rustc to check (`pin_assumptions`).
    pub host: Option<ItemFn>,
    /// The messages of the body's panic sites (`assert!`, `panic!`,
    /// `unreachable!`), in site order (see `panics`).
    pub panics: Vec<String>,
    /// The names the body's patterns bind (`v` of `match x { v => .. }`,
    /// also from `matches!` and `if let`), with their spans. Rust reads
    /// such a name as a constant where one of that name is in scope (a
    /// lowercase module-level `const three` makes `three => ..` match 3
    /// alone); the translation sees no module items and binds it, so
    /// `#[parloop::kernel]` emits `match () { three @ _ => () }` for each,
    /// which rustc refuses ("match bindings cannot shadow constants") at
    /// the pattern exactly where the name is a constant (or a static, a
    /// unit struct).
    pub pattern_bindings: Vec<syn::Ident>,
}

/// A module-level constant a function reads (`#[parloop::device] const`,
/// declared elsewhere): how the function uses it. The translation cannot
/// see the declaration, so it takes the element type from the uses and the
/// rank from the deepest indexing; `#[parloop::kernel]` and
/// `#[parloop::device]` check both against the declaration at compile
/// time, so a mismatch is a compile error, never different arithmetic on
/// the device.
#[derive(Clone, Debug)]
pub struct ConstUse {
    /// The Rust name.
    pub name: String,
    /// The element type the function reads (`None`: not determined by the
    /// uses, say a table only passed whole to a helper).
    pub elem: Option<Scalar>,
    /// How many indices reach an element (0 for a scalar constant).
    pub rank: usize,
    /// The first use.
    pub span: Span,
}

/// A module-level constant translated for the device (see
/// [`translate_const`]).
#[derive(Clone, Debug)]
pub struct ConstTranslation {
    /// The Rust name.
    pub name: String,
    /// The C++ name (`pl_c_` and the Rust name).
    pub cname: String,
    /// The element type.
    pub elem: Scalar,
    /// Array nesting (0 for a scalar).
    pub rank: usize,
    /// The C++ definition: `__device__ constexpr T pl_c_W[4] = {...};`.
    pub source: String,
    /// Module-level constants the initialiser reads.
    pub consts: Vec<ConstUse>,
}

fn const_uses(infer: &mut Infer) -> Vec<ConstUse> {
    let exts = infer.externals.clone();
    exts.into_iter()
        .map(|x| ConstUse { elem: infer.vars.scalar(&x.elem), name: x.name, rank: x.rank, span: x.span })
        .collect()
}

/// Translates a module-level constant (`#[parloop::device] const W: [f64;
/// 4] = [...];`) into a C++ `constexpr` definition, emitted once into every
/// module whose functions read it. Scalars and arrays of any nesting of the
/// scalar types; the initialiser is an expression (arrays: a literal tree)
/// of literals, other such constants, arithmetic and casts.
///
/// ```
/// let c: syn::ItemConst = syn::parse_quote! { const W: [[f64; 2]; 2] = [[0.5; 2], [GM1 * 2.0, -1.0]]; };
/// let t = parloop_kernels::translate_const(&c).unwrap();
/// assert_eq!(t.source, "__device__ constexpr double pl_c_W[2][2] = {{0.5, 0.5}, {(pl_c_GM1 * 2.0), (-1.0)}};\n");
/// assert_eq!((t.rank, t.consts[0].name.as_str(), t.consts[0].rank), (2, "GM1", 0));
/// ```
pub fn translate_const(c: &syn::ItemConst) -> syn::Result<ConstTranslation> {
    let (mut infer, ty) = infer::infer_const(c)?;
    let name = c.ident.to_string();
    let cname = const_cname(&name);
    let mut emit = Emit {
        infer: &mut infer,
        out: String::new(),
        indent: 0,
        pre: Vec::new(),
        temps: 0,
        labels: Vec::new(),
        may_panic: false,
        konst: true,
        ret: None,
        function_id: 0,
    };
    let init = emit.const_init(&c.expr, &ty)?;
    let (t, suffix) = emit.cpp_type_of(&ty, syn::spanned::Spanned::span(&c.ty), false)?;
    let elem = leaf_scalar(&mut infer.vars, &ty)
        .ok_or_else(|| crate::types::error(syn::spanned::Spanned::span(&c.ty), "expected a scalar type"))?;
    let rank = emit::dims(&ty).len();
    let source = format!("__device__ constexpr {t} {cname}{suffix} = {init};\n");
    let consts = const_uses(&mut infer);
    Ok(ConstTranslation { name, cname, elem, rank, source, consts })
}

fn leaf_scalar(vars: &mut Vars, t: &crate::types::Ty) -> Option<Scalar> {
    match t {
        crate::types::Ty::Array(e, _) => leaf_scalar(vars, e),
        t => vars.scalar(t),
    }
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
    // Owned: the pins below rewrite the very nodes inference saw (they are
    // found by address).
    let (mut owned, array_loops) = normal_form_with_loops(item);
    let item = &owned;
    let (mut infer, params, ret) = infer(item, kind)?;
    let name = item.sig.ident.to_string();
    if infer.calls.contains(&name) {
        // Refused here: rustc's own error for it is a cycle in the
        // helper's `DEVICE` constant, which names neither.
        return Err(error(
            item.sig.ident.span(),
            format!(
                "`{name}` calls itself: recursive helpers are not supported in kernels; write the recursion as a loop"
            ),
        ));
    }
    let cname = fn_cname(&name);
    let increment::IncrementUses { only: increment_only, via: increment_via, other_use: increment_use } =
        increment_only(item, &infer, &params);
    let reductions = reductions(item, &infer, &params);
    let frame_bytes = infer.frame_bytes(params.len());
    let mut emit = Emit {
        infer: &mut infer,
        out: String::new(),
        indent: 1,
        pre: Vec::new(),
        temps: 0,
        labels: Vec::new(),
        may_panic: false,
        konst: false,
        ret,
        function_id: function_id(&cname),
    };
    // An array by value arrives in a struct (`__pl_in_a`); the body reads
    // it through a reference to the struct's array under its own name.
    let by_value = |p: &Param| p.array && !p.by_ref;
    let decls: Vec<String> = params
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let c = &emit.infer.bindings[k].cname;
            p.cpp_decl(&if by_value(p) { format!("pl_in_{c}") } else { c.clone() })
        })
        .collect();
    let mut unpack = String::new();
    for (k, p) in params.iter().enumerate().filter(|(_, p)| by_value(p)) {
        let c = emit.infer.bindings[k].cname.clone();
        let t = cpp_scalar(p.elem, false);
        let dims = if p.nested { format!("[{}][{}]", p.rows, p.cols) } else { format!("[{}]", p.cols) };
        unpack.push_str(&format!("    {t} (&{c}){dims} = pl_in_{c}.v;\n"));
    }
    let returns_array = matches!(emit.infer.ret, Ty::Array(..));
    let ret_c = if returns_array {
        // An array result travels in a struct (C++ returns no arrays).
        let ty = emit.infer.ret.clone();
        let (t, suffix) = emit.cpp_type_of(&ty, item.sig.output.span(), false)?;
        format!("__pl_arr<{t}{suffix}>")
    } else {
        ret.map_or("void", |s| cpp_scalar(s, false)).to_string()
    };
    emit.out = format!("__device__ inline {ret_c} {cname}({}) {{\n{unpack}", decls.join(", "));
    emit.block_body(&item.block, ret.is_some() || returns_array)?;
    emit.out.push_str("}\n");
    let source = std::mem::take(&mut emit.out);
    let may_panic = emit.may_panic;
    let consts = const_uses(&mut infer);
    let pins: HashMap<usize, syn::Type> = {
        let pins = std::mem::take(&mut infer.pins);
        pins.into_iter()
            .filter_map(|(at, t)| {
                let s = infer.vars.assumed(&t)?;
                let scalar: syn::Type = syn::parse_str(s.rust()).expect("a scalar type parses");
                Some((
                    at,
                    match t {
                        Ty::Ref(_, true) => syn::parse_quote!(&mut #scalar),
                        Ty::Ref(_, false) => syn::parse_quote!(&#scalar),
                        _ => scalar,
                    },
                ))
            })
            .collect()
    };
    if array_loops && iterate::uses_element(&owned) {
        if let Some(span) = first_pinned(&owned, &pins) {
            // The pins go into the host function, which is then the
            // normal form; a bare local's loop there is not Rust
            // (`__pl_elem`, see `iterate`).
            return Err(error(
                span,
                "this value's type comes from a helper's signature, which the translation cannot see, in a \
                 kernel that loops over a local array (`for v in local`): bind it to an annotated `let` (`let v: f64 = h(x);`)",
            ));
        }
    }
    let host = (!pins.is_empty()).then(|| {
        // The host runs the normal form: its markers become Rust first
        // (in place, so the pins' addresses still hold).
        folds::resolve_neutrals(&mut owned, &mut infer);
        pin_assumptions(&mut owned, &pins);
        owned
    });
    Ok(Translation {
        name,
        cname,
        params,
        ret,
        source,
        calls: infer.calls.clone(),
        increment_only,
        reductions,
        increment_via,
        increment_use,
        may_panic,
        frame_bytes,
        consts,
        host,
        panics: std::mem::take(&mut infer.panic_sites),
        pattern_bindings: std::mem::take(&mut infer.pattern_bindings),
    })
}

/// Rewrites each expression of `pins` (by address) as `{ let __pl_pin: T
/// = expr; __pl_pin }`: the type the translation assumed for a value only
/// a helper's signature types (see `Vars::assumed`) becomes a fact rustc
/// checks, so a helper returning `f32` or taking `i64` is a compile error
/// at the call instead of device code computing in `f64` or `i32`.
/// The span of the first expression of `item` that `pins` names.
fn first_pinned(item: &ItemFn, pins: &HashMap<usize, syn::Type>) -> Option<proc_macro2::Span> {
    struct Find<'a>(&'a HashMap<usize, syn::Type>, Option<proc_macro2::Span>);
    impl<'ast> syn::visit::Visit<'ast> for Find<'_> {
        fn visit_expr(&mut self, e: &'ast syn::Expr) {
            if self.1.is_none() && self.0.contains_key(&(e as *const syn::Expr as usize)) {
                self.1 = Some(e.span());
            }
            syn::visit::visit_expr(self, e);
        }
    }
    let mut f = Find(pins, None);
    syn::visit::Visit::visit_item_fn(&mut f, item);
    f.1
}

pub(crate) fn pin_assumptions(item: &mut ItemFn, pins: &HashMap<usize, syn::Type>) {
    struct Pin<'a>(&'a HashMap<usize, syn::Type>);
    impl syn::visit_mut::VisitMut for Pin<'_> {
        fn visit_expr_mut(&mut self, e: &mut syn::Expr) {
            // Children first: a pinned call may hold pinned arguments.
            syn::visit_mut::visit_expr_mut(self, e);
            if let Some(t) = self.0.get(&(e as *const syn::Expr as usize)) {
                let inner = e.clone();
                *e = syn::parse_quote_spanned! {inner.span()=> { let __pl_pin: #t = #inner; __pl_pin } };
            }
        }
    }
    syn::visit_mut::VisitMut::visit_item_fn_mut(&mut Pin(pins), item);
}
