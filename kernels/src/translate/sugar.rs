//! Rust shorthands for a `match`, rewritten to the `match` they stand for
//! before the passes read a function:
//!
//! ```text
//! matches!(n, 1 | 2 if ok)        =>  match n { 1 | 2 if ok => true, _ => false }
//! if let 3..=5 = n { a } else { b } =>  match n { 3..=5 => { a } _ => { b } }
//! ```
//!
//! Both are Rust's definitions (the standard library's `matches!` is that
//! `match`; `if let` is a two-arm `match`), so inference, emission and the
//! lane-wise twin need nothing new: the patterns are whatever `match`
//! takes. `if let` chains with `&&` are left alone (and refused).

use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Expr, ItemFn};

/// Rewrites the `matches!` and `if let` of `item` in place.
pub(crate) fn as_matches(item: &mut ItemFn) {
    Rewrite.visit_block_mut(&mut item.block);
}

struct Rewrite;

/// `matches!(value, pattern)` or `matches!(value, pattern if guard)`.
struct Matches {
    value: Expr,
    pat: syn::Pat,
    guard: Option<Expr>,
}

impl syn::parse::Parse for Matches {
    fn parse(input: syn::parse::ParseStream) -> syn::Result<Self> {
        let value: Expr = input.parse()?;
        input.parse::<syn::Token![,]>()?;
        let pat = syn::Pat::parse_multi_with_leading_vert(input)?;
        let guard = if input.peek(syn::Token![if]) {
            input.parse::<syn::Token![if]>()?;
            Some(input.parse()?)
        } else {
            None
        };
        if input.peek(syn::Token![,]) {
            input.parse::<syn::Token![,]>()?;
        }
        Ok(Matches { value, pat, guard })
    }
}

fn matches_macro(m: &syn::Macro) -> Option<Expr> {
    let is_matches = m.path.is_ident("matches")
        || (m.path.segments.len() == 2
            && matches!(m.path.segments[0].ident.to_string().as_str(), "std" | "core")
            && m.path.segments[1].ident == "matches");
    if !is_matches {
        return None;
    }
    let Matches { value, pat, guard } = m.parse_body().ok()?;
    let span = m.span();
    let guard = guard.map(|g| quote::quote! { if #g });
    Some(syn::parse_quote_spanned! {span=> match #value { #pat #guard => true, _ => false } })
}

fn if_let(i: &syn::ExprIf) -> Option<Expr> {
    let Expr::Let(l) = &*i.cond else { return None };
    let span = i.span();
    let (pat, value, then) = (&l.pat, &l.expr, &i.then_branch);
    Some(match &i.else_branch {
        Some((_, e)) => syn::parse_quote_spanned! {span=> match #value { #pat => #then, _ => #e } },
        None => syn::parse_quote_spanned! {span=> match #value { #pat => #then, _ => {} } },
    })
}

impl VisitMut for Rewrite {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        syn::visit_mut::visit_expr_mut(self, e);
        let new = match e {
            Expr::Macro(m) => matches_macro(&m.mac),
            Expr::If(i) => if_let(i),
            _ => None,
        };
        if let Some(new) = new {
            *e = new;
        }
        // `else if let` after a plain `if`: the `else` holds the `match`
        // now, which an `else` takes only in a block.
        if let Expr::If(i) = e {
            if let Some((_, els)) = &mut i.else_branch {
                if !matches!(**els, Expr::If(_) | Expr::Block(_)) {
                    let inner = (**els).clone();
                    **els = syn::parse_quote_spanned! {inner.span()=> { #inner } };
                }
            }
        }
    }
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}
