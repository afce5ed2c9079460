//! Tuples in kernels, rewritten away before the passes read a function:
//! `let (a, b) = E;` and `(a, b) = E;` where `E` is a tuple literal,
//! `x.sin_cos()`, or an `if`, `match` or block whose every value is one.
//!
//! The rewrite is plain Rust with the same meaning, so that inference,
//! emission and the lane-wise twin see only scalars:
//!
//! ```text
//! let (a, b) = if c { (x, y) } else { (y, x) };
//! // becomes
//! let __pl_tup0; let __pl_tup1;
//! if c { __pl_tup0 = x; __pl_tup1 = y; } else { __pl_tup0 = y; __pl_tup1 = x; }
//! let a = __pl_tup0; let b = __pl_tup1;
//! ```
//!
//! The values go through temporaries because the names bound may shadow
//! names the values read (`let (a, b) = (b, a);`), and every element is
//! evaluated, left to right, before any name is bound or assigned, as in
//! Rust. `sin_cos` is Rust's `(self.sin(), self.cos())` with the receiver
//! evaluated once. Anything else tuple-valued (a helper returning a tuple,
//! a tuple kept in a local, nested tuples) is left alone and refused by
//! inference with the forms above in the message.

use std::collections::HashSet;

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{Block, Expr, ItemFn, Pat, Stmt, Type};

use super::syntax::Idents;

/// Rewrites the tuple `let`s and assignments of `item` in place; whether
/// there were any.
pub(crate) fn destructure(item: &mut ItemFn) -> bool {
    let mut used = Idents::new();
    used.visit_item_fn(item);
    let mut r = Rewrite { used: used.0, next: 0, found: false };
    r.visit_item_fn_mut(item);
    r.found
}

struct Rewrite {
    used: HashSet<String>,
    next: usize,
    found: bool,
}

/// Where a tuple's elements go.
enum Target {
    /// `let (p0, p1, ..)`: each element bound by its pattern (`_` binds
    /// nothing), with its type where the `let` is annotated.
    Bind(Vec<(Pat, Option<Type>)>),
    /// `(x, y) = ..`: each element assigned to a place.
    Assign(Vec<Expr>),
}

impl Rewrite {
    fn temp(&mut self) -> syn::Ident {
        loop {
            let name = format!("__pl_tup{}", self.next);
            self.next += 1;
            if !self.used.contains(&name) {
                return syn::Ident::new(&name, Span::call_site());
            }
        }
    }

    /// The statements replacing a tuple `let` or assignment of `value`
    /// into `target`; `None` where `value` is not a supported tuple value.
    fn statements(&mut self, target: Target, value: &Expr, span: Span) -> Option<Vec<Stmt>> {
        let n = match &target {
            Target::Bind(p) => p.len(),
            Target::Assign(p) => p.len(),
        };
        // No temporary for `_`: its value is evaluated and dropped (a
        // temporary set and never read would be a C++ warning).
        let temps: Vec<Option<syn::Ident>> = (0..n)
            .map(|k| match &target {
                Target::Bind(pats) if matches!(pats[k].0, Pat::Wild(_)) => None,
                _ => Some(self.temp()),
            })
            .collect();
        let fill = self.fill(value, &temps)?;
        let mut out: Vec<Stmt> = Vec::new();
        for (k, t) in temps.iter().enumerate() {
            let Some(t) = t else { continue };
            match &target {
                Target::Bind(pats) if pats[k].1.is_some() => {
                    let ty = pats[k].1.as_ref().expect("checked");
                    out.push(syn::parse_quote_spanned! {span=> let #t: #ty; });
                }
                _ => out.push(syn::parse_quote_spanned! {span=> let #t; }),
            }
        }
        out.push(Stmt::Expr(fill, Some(Default::default())));
        for (k, t) in temps.iter().enumerate() {
            let Some(t) = t else { continue };
            match &target {
                Target::Bind(pats) => {
                    let p = &pats[k].0;
                    out.push(syn::parse_quote_spanned! {span=> let #p = #t; });
                }
                Target::Assign(places) => {
                    let place = &places[k];
                    out.push(syn::parse_quote_spanned! {span=> #place = #t; });
                }
            }
        }
        Some(out)
    }

    /// `value` rewritten to assign its tuple's elements to `temps`: a
    /// unit-typed expression; `None` where it has no such form.
    fn fill(&mut self, value: &Expr, temps: &[Option<syn::Ident>]) -> Option<Expr> {
        let span = value.span();
        match value {
            Expr::Paren(p) => self.fill(&p.expr, temps),
            Expr::Group(g) => self.fill(&g.expr, temps),
            Expr::Tuple(t) if t.elems.len() == temps.len() => {
                if t.elems.iter().any(|e| matches!(e, Expr::Tuple(_))) {
                    return None;
                }
                let stores = t.elems.iter().zip(temps).map(|(e, t)| match t {
                    Some(t) => quote::quote! { #t = #e; },
                    None => quote::quote! { let _ = #e; },
                });
                Some(syn::parse_quote_spanned! {span=> { #( #stores )* } })
            }
            Expr::MethodCall(m) if m.method == "sin_cos" && m.args.is_empty() && temps.len() == 2 => {
                let recv = &m.receiver;
                // A plain place is read twice (a `&mut f64` receiver would
                // be moved into a temporary); anything else once.
                if is_plain(recv) {
                    let s = temps[0].as_ref().map(|s| quote::quote! { #s = #recv.sin(); });
                    let c = temps[1].as_ref().map(|c| quote::quote! { #c = #recv.cos(); });
                    return Some(syn::parse_quote_spanned! {span=> { #s #c } });
                }
                let x = self.temp();
                let s = temps[0].as_ref().map(|s| quote::quote! { #s = #x.sin(); });
                let c = temps[1].as_ref().map(|c| quote::quote! { #c = #x.cos(); });
                Some(syn::parse_quote_spanned! {span=> { let #x = #recv; #s #c } })
            }
            Expr::Block(b) if b.label.is_none() => {
                let block = self.fill_block(&b.block, temps)?;
                Some(Expr::Block(syn::ExprBlock { attrs: b.attrs.clone(), label: None, block }))
            }
            Expr::If(i) => {
                let mut i = i.clone();
                i.then_branch = self.fill_block(&i.then_branch, temps)?;
                let (else_token, els) = i.else_branch.take()?;
                i.else_branch = Some((else_token, Box::new(self.fill(&els, temps)?)));
                Some(Expr::If(i))
            }
            Expr::Match(m) => {
                let mut m = m.clone();
                for arm in &mut m.arms {
                    *arm.body = self.fill(&arm.body, temps)?;
                }
                Some(Expr::Match(m))
            }
            // A value that never arrives (`return`, `break`, `continue`,
            // `panic!`, `unreachable!`).
            Expr::Return(_) | Expr::Break(_) | Expr::Continue(_) => Some(value.clone()),
            Expr::Macro(m) if m.mac.path.is_ident("panic") || m.mac.path.is_ident("unreachable") => Some(value.clone()),
            _ => None,
        }
    }

    /// A block whose tail is a tuple value, rewritten to assign it (a
    /// tail `panic!()` is a `Stmt::Macro`: it diverges).
    fn fill_block(&mut self, b: &Block, temps: &[Option<syn::Ident>]) -> Option<Block> {
        let mut b = b.clone();
        match b.stmts.last_mut() {
            Some(Stmt::Expr(tail, None)) => {
                *tail = self.fill(tail, temps)?;
                Some(b)
            }
            // A block that diverges before its end yields no value.
            Some(Stmt::Expr(Expr::Return(_) | Expr::Break(_) | Expr::Continue(_), Some(_))) => Some(b),
            Some(Stmt::Macro(m)) if m.mac.path.is_ident("panic") || m.mac.path.is_ident("unreachable") => Some(b),
            _ => None,
        }
    }

    /// The statements replacing `stmt`, if it is a tuple `let` or
    /// assignment of a supported form.
    fn rewrite(&mut self, stmt: &Stmt) -> Option<Vec<Stmt>> {
        match stmt {
            Stmt::Local(local) => {
                let init = local.init.as_ref().filter(|i| i.diverge.is_none())?;
                let (pat, ty) = match &local.pat {
                    Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
                    p => (p, None),
                };
                let Pat::Tuple(tuple) = pat else { return None };
                let types: Vec<Option<Type>> = match ty {
                    None => vec![None; tuple.elems.len()],
                    Some(Type::Tuple(t)) if t.elems.len() == tuple.elems.len() => {
                        t.elems.iter().map(|t| Some(t.clone())).collect()
                    }
                    Some(_) => return None,
                };
                if tuple
                    .elems
                    .iter()
                    .any(|p| !matches!(p, Pat::Ident(pi) if pi.subpat.is_none()) && !matches!(p, Pat::Wild(_)))
                {
                    return None;
                }
                let target = Target::Bind(tuple.elems.iter().cloned().zip(types).collect());
                self.statements(target, &init.expr, local.span())
            }
            Stmt::Expr(Expr::Assign(a), Some(_)) => {
                let Expr::Tuple(places) = &*a.left else { return None };
                if places.elems.iter().any(|p| matches!(p, Expr::Tuple(_) | Expr::Infer(_))) {
                    return None;
                }
                let target = Target::Assign(places.elems.iter().cloned().collect());
                let mut stmts = self.statements(target, &a.right, a.span())?;
                // In a block of its own: the temporaries end with it.
                let block = Block { brace_token: Default::default(), stmts: std::mem::take(&mut stmts) };
                Some(vec![Stmt::Expr(Expr::Block(syn::ExprBlock { attrs: Vec::new(), label: None, block }), None)])
            }
            _ => None,
        }
    }
}

impl VisitMut for Rewrite {
    fn visit_block_mut(&mut self, b: &mut Block) {
        // Inner blocks first.
        syn::visit_mut::visit_block_mut(self, b);
        if !b.stmts.iter().any(|s| {
            matches!(s, Stmt::Local(l) if matches!(&l.pat, Pat::Tuple(_) | Pat::Type(_)))
                || matches!(s, Stmt::Expr(Expr::Assign(a), Some(_)) if matches!(&*a.left, Expr::Tuple(_)))
        }) {
            return;
        }
        let mut out = Vec::with_capacity(b.stmts.len());
        for stmt in std::mem::take(&mut b.stmts) {
            match self.rewrite(&stmt) {
                Some(replacement) => {
                    self.found = true;
                    out.extend(replacement);
                }
                None => out.push(stmt),
            }
        }
        b.stmts = out;
    }
}

/// A place or literal that reading twice reads the same (`x`, `*x`,
/// `x[0]`, `2.0`).
fn is_plain(e: &Expr) -> bool {
    match e {
        Expr::Path(_) | Expr::Lit(_) => true,
        Expr::Paren(p) => is_plain(&p.expr),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => is_plain(&u.expr),
        Expr::Index(i) => is_plain(&i.expr) && matches!(&*i.index, Expr::Lit(_) | Expr::Path(_)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(f: ItemFn) -> String {
        let mut f = f;
        assert!(destructure(&mut f));
        quote::quote!(#f).to_string()
    }

    #[test]
    fn literals_go_through_temporaries() {
        let s = rewritten(syn::parse_quote! {
            fn k(a: &mut f64, b: &mut f64) { let (x, mut y) = (*b, *a); y += x; (*a, *b) = (y, x); }
        });
        assert!(s.contains("let __pl_tup0 ; let __pl_tup1 ; { __pl_tup0 = * b ; __pl_tup1 = * a ; }"), "{s}");
        assert!(s.contains("let x = __pl_tup0 ; let mut y = __pl_tup1 ;"), "{s}");
        assert!(s.contains("* a = __pl_tup2 ; * b = __pl_tup3 ;"), "{s}");
    }

    #[test]
    fn branches_and_sin_cos_assign_each_element() {
        let s = rewritten(syn::parse_quote! {
            fn k(a: &f64, o: &mut f64) {
                let (l, r): (f64, f64) = if *a > 0.0 { (1.0, 2.0) } else { a.sin_cos() };
                *o = l + r;
            }
        });
        assert!(s.contains("let __pl_tup0 : f64 ; let __pl_tup1 : f64 ;"), "{s}");
        assert!(s.contains("{ __pl_tup0 = 1.0 ; __pl_tup1 = 2.0 ; }"), "{s}");
        assert!(s.contains("{ __pl_tup0 = a . sin () ; __pl_tup1 = a . cos () ; }"), "{s}");
    }

    #[test]
    fn temporaries_avoid_the_functions_names() {
        let s = rewritten(
            syn::parse_quote! { fn k(__pl_tup0: &f64, o: &mut f64) { let (a, b) = (1.0, *__pl_tup0); *o = a + b; } },
        );
        assert!(s.contains("let __pl_tup1 ; let __pl_tup2 ;"), "{s}");
    }

    #[test]
    fn other_tuple_values_are_left_for_inference_to_refuse() {
        let mut f: ItemFn = syn::parse_quote! { fn k(o: &mut f64) { let (a, b) = pair(); let t = (1.0, 2.0); } };
        assert!(!destructure(&mut f));
    }
}
