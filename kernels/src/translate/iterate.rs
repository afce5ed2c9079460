//! `for` loops over the elements of arrays, rewritten to loops over their
//! indices before the passes read a function:
//!
//! ```text
//! for (i, x) in a.iter().enumerate() { body }
//! // becomes
//! { let __pl_it0 = &a; for __pl_ix0 in 0..__pl_it0.len() { let i = __pl_ix0; let x = &__pl_it0[__pl_ix0]; body } }
//! ```
//!
//! The rewrite is plain Rust with the same meaning, so inference, emission
//! and the lane-wise twin see only index loops and reference locals. The
//! iterated array is evaluated once, before the loop, as Rust's iterator
//! is (a `for x in m[k].iter()` whose body changes `k` still walks row
//! `k` as it was). Sources: `a.iter()` and `&a` (elements `&T`),
//! `a.iter_mut()` and `&mut a` (`&mut T`), `.copied()`/`.cloned()` (`T`),
//! and a bare `a` or `a.into_iter()`: a reference parameter's elements are
//! references, any other array is copied and its elements are values, as
//! Rust's `IntoIterator` for arrays and array references gives them.
//! Adapters: `.zip(other source)` (as long as the shorter), then
//! `.enumerate()`, then `.rev()`. Patterns: `x`, `mut x`, `&x`, `_`, and
//! tuples of those for `zip`/`enumerate`. Anything else is left alone and
//! refused by inference.

use std::collections::HashSet;

use super::syntax::Idents;
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{Expr, FnArg, ItemFn, Pat, Type};

/// The element of a bare local's loop, `__pl_elem(it, ix)`: `&it[ix]`
/// (`&mut` where `it` is a `&mut` reference) when `it` is a reference,
/// `it[ix]` when it is an array (inference types it, emission writes it).
pub(crate) const ELEMENT: &str = "__pl_elem";

/// Whether `item` (a normal form) holds a bare local's loop element,
/// `__pl_elem(it, ix)`: such a body is the translation's, not Rust.
pub(crate) fn uses_element(item: &ItemFn) -> bool {
    struct Find(bool);
    impl<'ast> Visit<'ast> for Find {
        fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
            self.0 |= crate::translate::infer::is_element(c);
            syn::visit::visit_expr_call(self, c);
        }
    }
    let mut f = Find(false);
    f.visit_item_fn(item);
    f.0
}

/// Rewrites the array `for` loops of `item` in place; whether there were
/// any (the rewritten loops are the translation's, not always valid Rust
/// for the host: `&mut a` of a parameter binding, `__pl_elem`).
pub(crate) fn index_loops(item: &mut ItemFn) -> bool {
    let mut used = Idents::new();
    used.visit_item_fn(item);
    let mut bound_by_let = LetNames(HashSet::new());
    bound_by_let.visit_item_fn(item);
    // Reference parameters no `let` or pattern shadows: a bare `for x in
    // a` over one of them yields references (mutable for `&mut`).
    let ref_params = item
        .sig
        .inputs
        .iter()
        .filter_map(|a| match a {
            FnArg::Typed(t) => match (&*t.pat, &*t.ty) {
                (Pat::Ident(p), Type::Reference(r)) if !bound_by_let.0.contains(&p.ident.to_string()) => {
                    Some((p.ident.to_string(), r.mutability.is_some()))
                }
                _ => None,
            },
            FnArg::Receiver(_) => None,
        })
        .collect();
    let mut r = Rewrite { used: used.0, next: 0, ref_params, found: false };
    r.visit_block_mut(&mut item.block);
    r.found
}

/// Whether `for pat in iter` is an array loop this rewrite takes (the
/// source chain and the pattern's shape), so that a rewrite producing one
/// (`translate/folds.rs`) can leave alone what would not be taken.
pub(crate) fn takes(iter: &Expr, pat: &Pat) -> bool {
    let r = Rewrite { used: HashSet::new(), next: 0, ref_params: Vec::new(), found: false };
    r.chain(iter).is_some_and(|c| split_pattern(pat, c.enumerate, c.sources.len()).is_some())
}

/// The arrays `iter` walks, where it is a source chain this rewrite takes.
pub(crate) fn arrays(iter: &Expr) -> Option<Vec<Expr>> {
    let r = Rewrite { used: HashSet::new(), next: 0, ref_params: Vec::new(), found: false };
    Some(r.chain(iter)?.sources.into_iter().map(|s| s.array).collect())
}

/// Names bound by `let`, `for` and `match` patterns anywhere in the body.
struct LetNames(HashSet<String>);

impl<'ast> Visit<'ast> for LetNames {
    fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
        self.0.insert(p.ident.to_string());
        syn::visit::visit_pat_ident(self, p);
    }
    fn visit_signature(&mut self, _: &'ast syn::Signature) {}
}

struct Rewrite {
    used: HashSet<String>,
    next: usize,
    ref_params: Vec<(String, bool)>,
    found: bool,
}

/// How one source yields its elements.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Yield {
    /// `&T`.
    Shared,
    /// `&mut T`.
    Mut,
    /// What the array's type says, which only inference knows (a bare
    /// local: a reference local yields references, an array by value its
    /// values from a copy taken before the loop): the element is
    /// `__pl_elem(it, ix)`, typed and emitted by the passes (see
    /// [`ELEMENT`]).
    ByType,
    /// `T`, read from the array (borrowed by the loop, so unchanged).
    Value,
}

/// One iterated array.
struct Source {
    array: Expr,
    yields: Yield,
}

/// A recognised iterator chain.
struct Chain {
    sources: Vec<Source>,
    enumerate: bool,
    rev: bool,
}

impl Rewrite {
    fn fresh(&mut self, stem: &str) -> syn::Ident {
        loop {
            let name = format!("__pl_{stem}{}", self.next);
            self.next += 1;
            if !self.used.contains(&name) {
                return syn::Ident::new(&name, Span::call_site());
            }
        }
    }

    /// One source: `a.iter()`, `a.iter_mut()`, `&a`, `&mut a`, `a`,
    /// `a.into_iter()`, each optionally `.copied()` or `.cloned()`.
    fn source(&self, e: &Expr) -> Option<Source> {
        match e {
            Expr::Paren(p) => self.source(&p.expr),
            Expr::Group(g) => self.source(&g.expr),
            Expr::MethodCall(m) if m.args.is_empty() && m.turbofish.is_none() => match m.method.to_string().as_str() {
                "iter" => Some(Source { array: (*m.receiver).clone(), yields: Yield::Shared }),
                "iter_mut" => Some(Source { array: (*m.receiver).clone(), yields: Yield::Mut }),
                "into_iter" => self.source(&m.receiver),
                "copied" | "cloned" => {
                    let inner = self.source(&m.receiver)?;
                    let yields = match inner.yields {
                        Yield::Shared | Yield::Mut | Yield::ByType => Yield::Value,
                        other => other,
                    };
                    Some(Source { array: inner.array, yields })
                }
                _ => None,
            },
            Expr::Reference(r) if is_array_place(&r.expr) => Some(Source {
                array: (*r.expr).clone(),
                yields: if r.mutability.is_some() { Yield::Mut } else { Yield::Shared },
            }),
            Expr::Path(p) if p.path.get_ident().is_some() => {
                let name = p.path.get_ident().expect("checked").to_string();
                let yields = match self.ref_params.iter().find(|(n, _)| *n == name) {
                    Some((_, true)) => Yield::Mut,
                    Some((_, false)) => Yield::Shared,
                    None => Yield::ByType,
                };
                Some(Source { array: e.clone(), yields })
            }
            _ => None,
        }
    }

    /// A whole chain: sources, then `.zip(..)`, `.enumerate()`, `.rev()`
    /// in that order (each at most once).
    fn chain(&self, e: &Expr) -> Option<Chain> {
        let mut adapters = Vec::new();
        let mut cur = e;
        loop {
            match cur {
                Expr::Paren(p) => cur = &p.expr,
                Expr::MethodCall(m)
                    if m.turbofish.is_none()
                        && matches!(
                            (m.method.to_string().as_str(), m.args.len()),
                            ("zip", 1) | ("enumerate", 0) | ("rev", 0)
                        ) =>
                {
                    adapters.push(m);
                    cur = &m.receiver;
                }
                _ => break,
            }
        }
        // Innermost first: zip, enumerate, rev.
        adapters.reverse();
        let first = self.source(cur)?;
        let mut chain = Chain { sources: vec![first], enumerate: false, rev: false };
        let mut stage = 0;
        for m in adapters {
            let (name, at) = match m.method.to_string().as_str() {
                "zip" => ("zip", 1),
                "enumerate" => ("enumerate", 2),
                _ => ("rev", 3),
            };
            if at <= stage {
                return None;
            }
            stage = at;
            match name {
                "zip" => chain.sources.push(self.source(&m.args[0])?),
                "enumerate" => chain.enumerate = true,
                _ => chain.rev = true,
            }
        }
        Some(chain)
    }

    /// The loop replacing `f`, or `None` where it is not an array loop of
    /// the forms above.
    fn rewrite(&mut self, f: &syn::ExprForLoop) -> Option<Expr> {
        let chain = self.chain(&f.expr)?;
        // The patterns, matched to the chain's shape.
        let (index_pat, element_pats) = split_pattern(&f.pat, chain.enumerate, chain.sources.len())?;
        let span = f.span();
        let ix = self.fresh("ix");
        let mut before: Vec<syn::Stmt> = Vec::new();
        let mut binds: Vec<syn::Stmt> = Vec::new();
        let mut lens: Vec<Expr> = Vec::new();
        let body_names = {
            let mut names = Idents::new();
            names.visit_block(&f.body);
            names.0
        };
        for (src, pat) in chain.sources.iter().zip(&element_pats) {
            // `*p` as the receiver of `[..]` or `.len()` needs its parentheses.
            let array: Expr = match &src.array {
                u @ Expr::Unary(_) => syn::parse_quote_spanned! {span=> (#u) },
                other => other.clone(),
            };
            let array = &array;
            let unused = match pat {
                ElementPat::Wild => true,
                ElementPat::Bind(p) | ElementPat::Deref(p) => !mentions(&body_names, p),
            };
            if unused {
                // Only its length is read: the place evaluated once (its
                // indices' effects and checks), nothing kept (a C++ local
                // read by nobody is a warning), and the length read from
                // the same place at index 0 where an index has effects
                // (in range: every level held the index just evaluated).
                before.push(syn::parse_quote_spanned! {span=> let _ = &#array; });
                let at = if effect_free(array) { array.clone() } else { zero_indices(array) };
                lens.push(syn::parse_quote_spanned! {span=> #at.len() });
                continue;
            }
            let it = self.fresh("it");
            before.push(match src.yields {
                // `[..]`: valid Rust whether `array` is an array or a
                // reference to one (the host runs this form when it pins
                // a helper's result type, `translate::pin_assumptions`).
                Yield::Shared | Yield::Value => syn::parse_quote_spanned! {span=> let #it = &#array[..]; },
                Yield::Mut => syn::parse_quote_spanned! {span=> let #it = &mut #array[..]; },
                Yield::ByType => syn::parse_quote_spanned! {span=> let #it = #array; },
            });
            lens.push(syn::parse_quote_spanned! {span=> #it.len() });
            let element: Expr = match (src.yields, pat) {
                (Yield::ByType, ElementPat::Deref(_)) => syn::parse_quote_spanned! {span=> #it[#ix] },
                (Yield::ByType, _) => {
                    let f = syn::Ident::new(ELEMENT, span);
                    syn::parse_quote_spanned! {span=> #f(#it, #ix) }
                }
                (Yield::Shared, ElementPat::Deref(_)) | (Yield::Value, _) => {
                    syn::parse_quote_spanned! {span=> #it[#ix] }
                }
                (Yield::Mut, ElementPat::Deref(_)) => syn::parse_quote_spanned! {span=> #it[#ix] },
                (Yield::Shared, _) => syn::parse_quote_spanned! {span=> &#it[#ix] },
                (Yield::Mut, _) => syn::parse_quote_spanned! {span=> &mut #it[#ix] },
            };
            if let (false, ElementPat::Bind(p) | ElementPat::Deref(p)) = (unused, pat) {
                binds.push(syn::parse_quote_spanned! {span=> let #p = #element; });
            }
        }
        if let Some(p) = index_pat.filter(|p| mentions(&body_names, p)) {
            binds.insert(0, syn::parse_quote_spanned! {span=> let #p = #ix; });
        }
        let len = lens.into_iter().reduce(|a, b| syn::parse_quote_spanned! {span=> #a.min(#b) }).expect("one source");
        let range: Expr = if chain.rev {
            syn::parse_quote_spanned! {span=> (0..#len).rev() }
        } else {
            syn::parse_quote_spanned! {span=> 0..#len }
        };
        let label = &f.label;
        let body = &f.body.stmts;
        Some(syn::parse_quote_spanned! {span=>
            {
                #( #before )*
                #label for #ix in #range {
                    #( #binds )*
                    #( #body )*
                }
            }
        })
    }
}

/// What one element is bound to.
enum ElementPat {
    /// `_`: nothing.
    Wild,
    /// `x` or `mut x`: the element as the source yields it.
    Bind(Pat),
    /// `&x`: the value behind a yielded reference.
    Deref(Pat),
}

/// Splits a loop pattern into the index pattern (with `enumerate`) and one
/// element pattern per source.
fn split_pattern(p: &Pat, enumerate: bool, sources: usize) -> Option<(Option<Pat>, Vec<ElementPat>)> {
    let (index, rest) = if enumerate {
        let Pat::Tuple(t) = strip(p) else { return None };
        if t.elems.len() != 2 {
            return None;
        }
        let index = match strip(&t.elems[0]) {
            Pat::Wild(_) => None,
            q @ Pat::Ident(i) if i.by_ref.is_none() && i.subpat.is_none() => Some(q.clone()),
            _ => return None,
        };
        (index, &t.elems[1])
    } else {
        (None, p)
    };
    let elements = if sources == 1 {
        vec![element(rest)?]
    } else {
        let Pat::Tuple(t) = strip(rest) else { return None };
        if t.elems.len() != sources {
            return None;
        }
        t.elems.iter().map(element).collect::<Option<Vec<_>>>()?
    };
    Some((index, elements))
}

fn element(p: &Pat) -> Option<ElementPat> {
    match strip(p) {
        Pat::Wild(_) => Some(ElementPat::Wild),
        q @ Pat::Ident(i) if i.by_ref.is_none() && i.subpat.is_none() => Some(ElementPat::Bind(q.clone())),
        Pat::Reference(r) => match strip(&r.pat) {
            q @ Pat::Ident(i) if i.by_ref.is_none() && i.subpat.is_none() => Some(ElementPat::Deref(q.clone())),
            _ => None,
        },
        _ => None,
    }
}

/// Whether the loop body (its names, `body_names`) mentions the name `p`
/// binds: a binding it never reads
/// is not made (C++ would warn about an unused variable; binding has no
/// effect).
fn mentions(body_names: &HashSet<String>, p: &Pat) -> bool {
    let Pat::Ident(i) = strip(p) else { return true };
    body_names.contains(&i.ident.to_string())
}

fn strip(p: &Pat) -> &Pat {
    match p {
        Pat::Paren(q) => strip(&q.pat),
        other => other,
    }
}

/// Whether evaluating `e` twice changes nothing: names, literals, indices,
/// arithmetic and methods of those (no helper call, no assignment).
pub(crate) fn effect_free(e: &Expr) -> bool {
    match e {
        Expr::Lit(_) | Expr::Path(_) => true,
        Expr::Paren(p) => effect_free(&p.expr),
        Expr::Group(g) => effect_free(&g.expr),
        Expr::Unary(u) => effect_free(&u.expr),
        Expr::Binary(b) => {
            !crate::translate::syntax::is_compound(&b.op) && effect_free(&b.left) && effect_free(&b.right)
        }
        Expr::Index(i) => effect_free(&i.expr) && effect_free(&i.index),
        Expr::Cast(c) => effect_free(&c.expr),
        Expr::MethodCall(m) => effect_free(&m.receiver) && m.args.iter().all(effect_free),
        Expr::Reference(r) => r.mutability.is_none() && effect_free(&r.expr),
        _ => false,
    }
}

/// Place `e` with every index `0` (`m[next(&mut c)]` as `m[0]`).
fn zero_indices(e: &Expr) -> Expr {
    match e {
        Expr::Index(i) => {
            let mut i = i.clone();
            *i.expr = zero_indices(&i.expr);
            *i.index = syn::parse_quote!(0);
            Expr::Index(i)
        }
        Expr::Paren(p) => {
            let mut p = p.clone();
            *p.expr = zero_indices(&p.expr);
            Expr::Paren(p)
        }
        other => other.clone(),
    }
}

/// A place an array can be borrowed from: a name, an indexed row, `*p`.
fn is_array_place(e: &Expr) -> bool {
    match e {
        Expr::Path(p) => p.path.get_ident().is_some(),
        Expr::Index(i) => is_array_place(&i.expr),
        Expr::Paren(p) => is_array_place(&p.expr),
        Expr::Unary(u) => matches!(u.op, syn::UnOp::Deref(_)) && is_array_place(&u.expr),
        _ => false,
    }
}

impl VisitMut for Rewrite {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        // Inner loops first, so the body moved into the new loop is final.
        syn::visit_mut::visit_expr_mut(self, e);
        if let Expr::ForLoop(f) = e {
            if let Some(new) = self.rewrite(f) {
                *e = new;
                self.found = true;
            }
        }
    }
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}
