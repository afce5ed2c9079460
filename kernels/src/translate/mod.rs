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
//! - `increment`: which parameters the body only adds to.

mod emit;
mod increment;
mod infer;
mod literals;
mod names;
mod syntax;

use syn::ItemFn;

use crate::types::Scalar;
use emit::{cpp_scalar, Emit};
use increment::increment_only;

pub(crate) use infer::{infer, key, Infer};
pub use names::{cpp_ident, fn_cname};

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
