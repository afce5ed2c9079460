//! Tuple fields, rewritten away before the passes read a function (after
//! `method_form`, before `tuples`, which then takes the `let`s apart):
//!
//! ```text
//! let t = if c { (x, y) } else { (y, x) };  t.0 + t.1
//! // becomes
//! let (__pl_f0, __pl_f1) = if c { (x, y) } else { (y, x) };  __pl_f0 + __pl_f1
//! x.sin_cos().1   =>  x.cos()
//! (a, b).0        =>  (a)        // where `b` has no effects
//! ```
//!
//! A tuple kept in a local is a name per element; every later use of the
//! local must be a field (`t.0`, also assigned: `t.1 += 1.0`), a whole
//! assignment of another tuple value (`t = (b, a);`) or a read of the
//! whole, which becomes the tuple of its elements (`let u = t;` a copy,
//! itself a kept tuple; `let (a, b) = t;`; elsewhere, `h(t)`, inference
//! refuses the tuple at that use), up to a `let` that shadows it. A local
//! used otherwise (lent `&mut` whole, shadowed in an inner scope, named in
//! a macro) is left alone and refused by inference with the forms above.

use std::collections::HashSet;

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{Block, Expr, ItemFn, Member, Pat, Stmt};

use super::iterate::effect_free;
use super::syntax::Idents;

/// Rewrites the tuple fields of `item` in place; whether there were any.
pub(crate) fn as_destructured(item: &mut ItemFn) -> bool {
    let mut used = Idents::new();
    used.visit_item_fn(item);
    let mut r = Rewrite { used: used.0, next: 0, found: false };
    r.visit_block_mut(&mut item.block);
    if r.found {
        // A copy made in an inner block (`{ let u = t; .. }`) is a tuple
        // literal only once the outer tuple is taken apart.
        r.visit_block_mut(&mut item.block);
    }
    r.found
}

struct Rewrite {
    used: HashSet<String>,
    next: usize,
    found: bool,
}

fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip(&p.expr),
        Expr::Group(g) => strip(&g.expr),
        e => e,
    }
}

/// The number of elements of tuple value `e` in the forms `tuples` takes
/// apart (a literal, `sin_cos()`, an `if`, `match` or block yielding one),
/// judged by the first that says; `tuples` checks the rest.
fn arity(e: &Expr) -> Option<usize> {
    match strip(e) {
        Expr::Tuple(t) if t.elems.len() >= 2 => Some(t.elems.len()),
        Expr::MethodCall(m) if m.method == "sin_cos" && m.args.is_empty() => Some(2),
        Expr::Block(b) => tail_arity(&b.block),
        Expr::If(i) => tail_arity(&i.then_branch).or_else(|| i.else_branch.as_ref().and_then(|(_, e)| arity(e))),
        Expr::Match(m) => m.arms.iter().find_map(|a| arity(&a.body)),
        _ => None,
    }
}

fn tail_arity(b: &Block) -> Option<usize> {
    match b.stmts.last() {
        Some(Stmt::Expr(e, None)) => arity(e),
        _ => None,
    }
}

/// `t` of `let t = ..;` or `let mut t: (..) = ..;`: its name and mutability.
fn tuple_local(local: &syn::Local) -> Option<(&syn::PatIdent, Option<&syn::Type>)> {
    let (pat, ty) = match &local.pat {
        Pat::Type(t) => (&*t.pat, Some(&*t.ty)),
        p => (p, None),
    };
    match pat {
        Pat::Ident(i) if i.by_ref.is_none() && i.subpat.is_none() => Some((i, ty)),
        _ => None,
    }
}

/// Whether pattern `p` binds `name`.
fn binds(p: &Pat, name: &str) -> bool {
    struct Find<'n>(&'n str, bool);
    impl<'ast> Visit<'ast> for Find<'_> {
        fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
            self.1 |= p.ident == self.0;
            syn::visit::visit_pat_ident(self, p);
        }
    }
    let mut f = Find(name, false);
    f.visit_pat(p);
    f.1
}

/// Replaces the uses of tuple local `name` by its elements' names.
struct Uses<'a> {
    name: &'a str,
    elems: &'a [syn::Ident],
    /// Elements assigned or lent mutably (their `let` needs `mut`).
    mutated: HashSet<usize>,
    ok: bool,
}

impl Uses<'_> {
    /// The element `e` names (`t.1`), if it is one of this tuple's.
    fn field(&self, e: &Expr) -> Option<usize> {
        let Expr::Field(f) = strip(e) else { return None };
        let Member::Unnamed(i) = &f.member else { return None };
        matches!(strip(&f.base), Expr::Path(p) if p.path.is_ident(self.name)).then_some(i.index as usize)
    }
}

impl VisitMut for Uses<'_> {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        // Places first: their element is written.
        match e {
            Expr::Assign(a) => {
                if let Some(k) = self.field(&a.left) {
                    self.mutated.insert(k);
                }
                if matches!(strip(&a.left), Expr::Path(p) if p.path.is_ident(self.name)) {
                    // `t = (b, a);`: every element assigned (`tuples`
                    // takes the assignment apart, where it is of a form
                    // it takes).
                    let elems = self.elems;
                    self.ok &= arity(&a.right) == Some(elems.len());
                    self.mutated.extend(0..elems.len());
                    *a.left = syn::parse_quote! { ( #( #elems ),* ) };
                }
            }
            Expr::Binary(b) if crate::translate::syntax::is_compound(&b.op) => {
                if let Some(k) = self.field(&b.left) {
                    self.mutated.insert(k);
                }
            }
            Expr::Reference(r) if r.mutability.is_some() => {
                if let Some(k) = self.field(&r.expr) {
                    self.mutated.insert(k);
                }
            }
            _ => {}
        }
        if let Some(k) = self.field(e) {
            match self.elems.get(k) {
                Some(x) => *e = syn::parse_quote! { #x },
                None => self.ok = false,
            }
            return;
        }
        if let Expr::Reference(r) = e {
            if r.mutability.is_some() && matches!(strip(&r.expr), Expr::Path(p) if p.path.is_ident(self.name)) {
                // Lent whole to be changed: not a name per element.
                self.ok = false;
                return;
            }
        }
        if let Expr::Path(p) = e {
            if p.path.is_ident(self.name) {
                // The tuple read whole: the tuple of its elements, a copy
                // as Rust's (`let u = t;`, `let (a, b) = t;`, taken apart
                // in turn); where no rewrite takes it apart, inference
                // refuses it at this use.
                let span = p.span();
                let elems = self.elems;
                *e = syn::parse_quote_spanned! {span=> ( #( #elems ),* ) };
                return;
            }
        }
        syn::visit_mut::visit_expr_mut(self, e);
    }
    fn visit_pat_ident_mut(&mut self, p: &mut syn::PatIdent) {
        // Shadowed in an inner scope: its uses there are another value's.
        self.ok &= p.ident != self.name;
        syn::visit_mut::visit_pat_ident_mut(self, p);
    }
    fn visit_macro_mut(&mut self, m: &mut syn::Macro) {
        // Tokens this rewrite does not reach.
        self.ok &= !tokens_mention(m.tokens.clone(), self.name);
    }
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

/// Whether `ts` holds identifier `name`, at any depth.
fn tokens_mention(ts: proc_macro2::TokenStream, name: &str) -> bool {
    ts.into_iter().any(|t| match t {
        proc_macro2::TokenTree::Ident(i) => i == name,
        proc_macro2::TokenTree::Group(g) => tokens_mention(g.stream(), name),
        _ => false,
    })
}

impl Rewrite {
    fn fresh(&mut self) -> syn::Ident {
        loop {
            let name = format!("__pl_f{}", self.next);
            self.next += 1;
            if !self.used.contains(&name) {
                return syn::Ident::new(&name, Span::call_site());
            }
        }
    }

    /// Rewrites `let t = <tuple>;` at `at` of `stmts` and the uses after
    /// it; `false` (nothing changed) where a use does not allow it.
    fn kept_tuple(&mut self, stmts: &mut [Stmt], at: usize) -> bool {
        let Stmt::Local(local) = &stmts[at] else { return false };
        let Some(init) = local.init.as_ref().filter(|i| i.diverge.is_none()) else { return false };
        let Some((ident, ty)) = tuple_local(local) else { return false };
        let n = match ty {
            Some(syn::Type::Tuple(t)) => t.elems.len(),
            Some(_) => return false,
            None => match arity(&init.expr) {
                Some(n) => n,
                None => return false,
            },
        };
        let name = ident.ident.to_string();
        let elems: Vec<syn::Ident> = (0..n).map(|_| self.fresh()).collect();
        let mut rest = stmts[at + 1..].to_vec();
        let mut uses = Uses { name: &name, elems: &elems, mutated: HashSet::new(), ok: true };
        for s in &mut rest {
            if let Stmt::Local(l) = s {
                if binds(&l.pat, &name) {
                    // Shadowed from here on: only its initialiser reads
                    // the tuple.
                    if let Some(i) = &mut l.init {
                        uses.visit_expr_mut(&mut i.expr);
                    }
                    break;
                }
            }
            uses.visit_stmt_mut(s);
        }
        if !uses.ok {
            return false;
        }
        let mutable = ident.mutability.is_some();
        let pats = elems.iter().enumerate().map(|(k, x)| {
            if mutable && uses.mutated.contains(&k) {
                quote::quote! { mut #x }
            } else {
                quote::quote! { #x }
            }
        });
        let value = &init.expr;
        let new: Stmt = match ty {
            Some(t) => syn::parse_quote! { let ( #( #pats ),* ): #t = #value; },
            None => syn::parse_quote! { let ( #( #pats ),* ) = #value; },
        };
        stmts[at] = new;
        stmts[at + 1..].clone_from_slice(&rest);
        true
    }
}

impl VisitMut for Rewrite {
    fn visit_block_mut(&mut self, b: &mut Block) {
        // Inner blocks first: a tuple local there is taken apart before
        // an outer one's uses are scanned.
        syn::visit_mut::visit_block_mut(self, b);
        for at in 0..b.stmts.len() {
            if self.kept_tuple(&mut b.stmts, at) {
                self.found = true;
            }
        }
    }

    fn visit_expr_mut(&mut self, e: &mut Expr) {
        syn::visit_mut::visit_expr_mut(self, e);
        let Expr::Field(f) = e else { return };
        let Member::Unnamed(i) = &f.member else { return };
        let k = i.index as usize;
        let new: Option<Expr> = match strip(&f.base) {
            // `x.sin_cos().1` is Rust's `x.cos()` (the receiver evaluated once either way).
            Expr::MethodCall(m) if m.method == "sin_cos" && m.args.is_empty() && k < 2 => {
                let recv = &m.receiver;
                Some(if k == 0 {
                    syn::parse_quote! { #recv.sin() }
                } else {
                    syn::parse_quote! { #recv.cos() }
                })
            }
            // `(a, b).0`: the other elements are only dropped if
            // evaluating them does nothing.
            Expr::Tuple(t)
                if k < t.elems.len() && t.elems.iter().enumerate().all(|(j, x)| j == k || effect_free(x)) =>
            {
                let x = &t.elems[k];
                Some(syn::parse_quote! { (#x) })
            }
            _ => None,
        };
        if let Some(new) = new {
            *e = new;
            self.found = true;
        }
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(f: ItemFn) -> String {
        let mut f = f;
        assert!(as_destructured(&mut f));
        quote::quote!(#f).to_string()
    }

    #[test]
    fn kept_tuples_become_a_name_per_element() {
        let s = rewritten(syn::parse_quote! {
            fn k(a: &f64, o: &mut f64) {
                let mut t = (*a, 2.0 * *a);
                t.1 += 1.0;
                *o = t.0 + t.1;
                let t = t.0;
                *o += t;
            }
        });
        assert!(s.contains("let (__pl_f0 , mut __pl_f1) = (* a , 2.0 * * a) ;"), "{s}");
        assert!(s.contains("__pl_f1 += 1.0 ; * o = __pl_f0 + __pl_f1 ; let t = __pl_f0 ; * o += t ;"), "{s}");
    }

    #[test]
    fn sin_cos_fields_are_sin_and_cos() {
        let s = rewritten(syn::parse_quote! { fn k(a: &f64, o: &mut f64) { *o = a.sin_cos().0 * a.sin_cos().1; } });
        assert!(s.contains("* o = a . sin () * a . cos () ;"), "{s}");
    }

    #[test]
    fn tuples_read_whole_are_their_elements() {
        let s = rewritten(syn::parse_quote! {
            fn k(a: &f64, o: &mut f64) {
                let t = (*a, 1.0);
                let mut u = t;
                u.0 += 1.0;
                { let v = t; *o = v.1; }
                *o += u.0 + t.0;
            }
        });
        assert!(s.contains("let (__pl_f0 , __pl_f1) = (* a , 1.0) ;"), "{s}");
        assert!(s.contains("let (mut __pl_f2 , __pl_f3) = (__pl_f0 , __pl_f1) ; __pl_f2 += 1.0 ;"), "{s}");
        assert!(s.contains("* o = __pl_f5 ;"), "{s}");
        assert!(s.contains("* o += __pl_f2 + __pl_f0 ;"), "{s}");
    }

    #[test]
    fn tuples_used_whole_are_left_for_inference_to_refuse() {
        for mut f in [
            syn::parse_quote! { fn k(a: &f64, o: &mut f64) { let t = (*a, 1.0); let r = &mut t; r.0 = 2.0; } },
            syn::parse_quote! { fn k(a: &f64, o: &mut f64) { let t = (*a, 1.0); { let t = 2.0; *o = t; } } },
            syn::parse_quote! { fn k(a: &f64, o: &mut f64) { let t = pair(*a); *o = t.0; } },
        ] {
            assert!(!as_destructured(&mut f), "{}", quote::quote!(#f));
        }
    }
}
