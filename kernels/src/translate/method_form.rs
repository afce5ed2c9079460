//! The path form of the scalar methods, `f64::sqrt(x)`, `f64::max(a, b)`,
//! `f32::mul_add(a, b, c)`, `i32::abs(n)`, rewritten as the method form
//! (`x.sqrt()`, `a.max(b)`, ...) before the passes read a function.
//!
//! Both forms are common Rust and rustc compiles the host kernel either
//! way; the translator's passes (and the lane-wise twin's) read the method
//! form only, so the rewrite is done once here rather than in each pass. A
//! literal receiver keeps the path's type as a cast (`f64::exp(1.0)` is
//! `(1.0 as f64).exp()`), so that inference does not default it.
//! `std::cmp::max(a, b)` and `min` (integers: floats are not `Ord`) are
//! read as `a.max(b)` and `a.min(b)` the same way.

use std::borrow::Cow;

use syn::punctuated::Punctuated;
use syn::visit_mut::VisitMut;
use syn::{Expr, ExprCall, ExprCast, ExprMethodCall, ExprParen, ItemFn, Type};

use crate::types::Scalar;

/// `item` with every `T::method(receiver, args...)` call, `T` a scalar
/// type, in method form; borrowed when there is none.
pub(crate) fn method_form(item: &ItemFn) -> Cow<'_, ItemFn> {
    let mut rewritten = item.clone();
    let mut rewrite = Rewrite { found: false };
    rewrite.visit_item_fn_mut(&mut rewritten);
    if rewrite.found {
        Cow::Owned(rewritten)
    } else {
        Cow::Borrowed(item)
    }
}

struct Rewrite {
    found: bool,
}

/// A literal, negated or parenthesised (`2.0`, `-2`, `(-1.5)`): typed by
/// the path's type, not by the literals' default.
fn is_literal(e: &Expr) -> bool {
    match e {
        Expr::Lit(_) => true,
        Expr::Paren(p) => is_literal(&p.expr),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => is_literal(&u.expr),
        _ => false,
    }
}

/// The scalar type and method of a call `T::method(...)` with at least one
/// argument.
fn scalar_path_call(call: &ExprCall) -> Option<(Type, syn::Ident)> {
    let Expr::Path(p) = &*call.func else { return None };
    if p.qself.is_some() || p.path.leading_colon.is_some() || p.path.segments.len() != 2 || call.args.is_empty() {
        return None;
    }
    let (ty, method) = (&p.path.segments[0], &p.path.segments[1]);
    if !ty.arguments.is_none() || !method.arguments.is_none() {
        return None;
    }
    Scalar::from_name(&ty.ident.to_string())?;
    if method.ident == "from" {
        // `f64::from(x)` is a conversion, not a method of `x`.
        return None;
    }
    let ty: Type = syn::parse_quote!(#ty);
    Some((ty, method.ident.clone()))
}

/// `std::cmp::max(a, b)` (or `min`, through `core::cmp` or `cmp`): the
/// method, and the arguments with a non-literal first (so that the
/// receiver has a type: `(n).max(0)`, not `(0).max(n)`, whose literal
/// rustc cannot call a method on). For integers, the only type `Ord`
/// gives these in kernels, `max` and `min` of equal values are the same
/// value, so the order of the operands does not matter; `None` where both
/// are literals.
fn cmp_call(call: &ExprCall) -> Option<(syn::Ident, Expr, Expr)> {
    let Expr::Path(p) = &*call.func else { return None };
    if p.qself.is_some() || call.args.len() != 2 {
        return None;
    }
    let segs: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
    let f = match segs.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["std" | "core", "cmp", f @ ("max" | "min")] | ["cmp", f @ ("max" | "min")] => (*f).to_string(),
        _ => return None,
    };
    let (a, b) = (call.args[0].clone(), call.args[1].clone());
    let (a, b) = match (is_literal(&a), is_literal(&b)) {
        (true, true) => return None,
        (true, false) => (b, a),
        _ => (a, b),
    };
    Some((syn::Ident::new(&f, p.path.segments.last()?.ident.span()), a, b))
}

impl VisitMut for Rewrite {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        // Inner calls first: `f64::max(f64::abs(a), b)`.
        syn::visit_mut::visit_expr_mut(self, e);
        let Expr::Call(call) = e else { return };
        if let Some((method, a, b)) = cmp_call(call) {
            self.found = true;
            *e = syn::parse_quote! { (#a).#method(#b) };
            return;
        }
        let Some((ty, method)) = scalar_path_call(call) else { return };
        self.found = true;
        let mut args: Vec<Expr> = std::mem::take(&mut call.args).into_iter().collect();
        let first = args.remove(0);
        let receiver = match first {
            literal if is_literal(&literal) => Expr::Cast(ExprCast {
                attrs: Vec::new(),
                expr: Box::new(literal),
                as_token: Default::default(),
                ty: Box::new(ty),
            }),
            other => other,
        };
        let receiver =
            Expr::Paren(ExprParen { attrs: Vec::new(), paren_token: Default::default(), expr: Box::new(receiver) });
        *e = Expr::MethodCall(ExprMethodCall {
            attrs: std::mem::take(&mut call.attrs),
            receiver: Box::new(receiver),
            dot_token: Default::default(),
            method,
            turbofish: None,
            paren_token: call.paren_token,
            args: args.into_iter().collect::<Punctuated<Expr, syn::Token![,]>>(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_calls_become_method_calls() {
        let f: ItemFn = syn::parse_quote! {
            fn k(a: &f64, b: &mut f64) {
                *b = f64::max(f64::abs(*a), 2.0) + f64::exp(1.0) + f64::mul_add(*a, 2.0, 3.0) + helper(*a);
            }
        };
        let out = method_form(&f);
        let body = quote::quote!(#out).to_string();
        assert!(body.contains("((* a) . abs ()) . max (2.0)"), "{body}");
        assert!(body.contains("(1.0 as f64) . exp ()"), "{body}");
        assert!(body.contains("(* a) . mul_add (2.0 , 3.0)"), "{body}");
        assert!(body.contains("helper (* a)"), "{body}");
        let g: ItemFn = syn::parse_quote! { fn k(b: &mut i64) { *b = i64::pow(-2, 40); } };
        let out = method_form(&g);
        let body = quote::quote!(#out).to_string();
        assert!(body.contains("(- 2 as i64) . pow (40)"), "{body}");
    }

    #[test]
    fn functions_without_path_calls_are_borrowed() {
        let f: ItemFn = syn::parse_quote! { fn k(a: &f64, b: &mut f64) { *b = a.sqrt() + Q::f(*a); } };
        assert!(matches!(method_form(&f), Cow::Borrowed(_)));
    }
}
