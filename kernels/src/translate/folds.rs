//! Iterator reductions as values (`a.iter().sum::<f64>()`, `.product()`,
//! `.fold(init, f)`, `.any(f)`, `.all(f)`, after any number of
//! `.map(f)`), rewritten to `for` loops before the passes read a function:
//!
//! ```text
//! a.iter().zip(b.iter()).map(|(x, y)| x * y).sum::<f64>()
//! // becomes
//! { let mut __pl_acc0: f64 = __pl_neutral(0); for (x, y) in a.iter().zip(b.iter()) { __pl_acc0 += x * y; } __pl_acc0 }
//! ```
//!
//! The loop is an array loop of `translate/iterate.rs` (which runs next),
//! so the sources are the ones a `for` takes and the array is taken once,
//! as Rust's iterator takes it. The closures are inlined: a closure's
//! parameters become the loop's pattern or `let`s, its body the value
//! (accepted only as these adaptors' arguments, with the patterns a `for`
//! takes, and without `return` or `?`, which would leave the closure, not
//! the function). A path (`f64::max`, a helper) is called in its place.
//! Rust's definitions are kept: `sum` starts from its neutral element, the
//! marker `__pl_neutral(0)` (`-0.0` for floats, as the standard library's
//! `Sum` since 1.82, so that `[-0.0].iter().sum()` is `-0.0`; `0` for
//! integers) and `product` from `__pl_neutral(1)`, typed by inference and
//! written out by emission (and, where the host runs this form, by
//! [`resolve_neutrals`]); elements are added in order with `+`
//! (wrapping as the translation's integer `+` does); `any`/`all` stop at
//! the first element that decides them.
//!
//! What does not fit (another adaptor, a pattern a `for` does not take, a
//! `fold` whose initial value could change the iterated row) is left
//! alone and refused by inference with the forms above.

use std::collections::HashSet;

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{Expr, ItemFn, Pat, Stmt, Type};

use super::infer::{key, Infer};
use super::iterate;
use super::syntax::Idents;

/// The neutral element of `sum` (`__pl_neutral(0)`) or `product`
/// (`__pl_neutral(1)`) of the accumulator's type.
pub(crate) const NEUTRAL: &str = "__pl_neutral";

/// Whether `c` is a neutral-element marker; its argument (0 or 1).
pub(crate) fn neutral(c: &syn::ExprCall) -> Option<u8> {
    if c.args.len() != 1 || !matches!(&*c.func, Expr::Path(p) if p.path.is_ident(NEUTRAL)) {
        return None;
    }
    match crate::translate::literals::int_literal_value(&c.args[0]) {
        Some(0) => Some(0),
        Some(1) => Some(1),
        _ => None,
    }
}

/// Rewrites the iterator reductions of `item` in place; whether there
/// were any.
pub(crate) fn as_loops(item: &mut ItemFn) -> bool {
    let mut used = Idents::new();
    used.visit_item_fn(item);
    let mut r = Rewrite { used: used.0, next: 0, found: false };
    r.visit_block_mut(&mut item.block);
    r.found
}

/// Replaces each neutral-element marker of `item` (a normal form that
/// `infer` typed) by a suffixed literal of its type (`-0.0f64`, `1i32`),
/// so that the form is Rust: the host function where it carries pins,
/// and the lane-wise twin. Markers are replaced in place, so the other
/// nodes keep the addresses inference recorded.
pub(crate) fn resolve_neutrals(item: &mut ItemFn, infer: &mut Infer) {
    struct Resolve<'a>(&'a mut Infer);
    impl VisitMut for Resolve<'_> {
        fn visit_expr_mut(&mut self, e: &mut Expr) {
            let Expr::Call(c) = e else { return syn::visit_mut::visit_expr_mut(self, e) };
            let Some(which) = neutral(c) else { return syn::visit_mut::visit_expr_mut(self, e) };
            let t = self.0.types.get(&key(&*e)).cloned();
            let Some(s) = t.and_then(|t| self.0.vars.scalar(&t)) else { return };
            let span = e.span();
            let text = match (s.is_float(), which) {
                (true, 0) => format!("-0.0{}", s.rust()),
                (true, _) => format!("1.0{}", s.rust()),
                (false, w) => format!("{w}{}", s.rust()),
            };
            // Only ever a `let`'s initialiser: no parentheses (rustc
            // would warn about them in the host function).
            if let Ok(lit) = syn::parse_str::<Expr>(&text) {
                *e = syn::parse_quote_spanned! {span=> #lit };
            }
        }
    }
    Resolve(infer).visit_item_fn_mut(item);
}

struct Rewrite {
    used: HashSet<String>,
    next: usize,
    found: bool,
}

/// A function argument of an adaptor.
enum Func {
    /// `|p0, p1| body`: its parameters' patterns (types dropped) and body.
    Closure(Vec<Pat>, Expr),
    /// `f64::max`, `helper`: called in place.
    Path(Expr),
}

/// What ends the chain.
enum Terminal {
    /// `sum` (neutral 0) or `product` (neutral 1), with the turbofish's type.
    Reduce(u8, Option<Type>),
    Fold(Expr, Func),
    /// `any` (`true`) or `all` (`false`): the value that stops the walk.
    Test(bool, Func),
}

/// The loop being built: its pattern, the current element's value (once
/// a stage made one), the statements before the terminal's, and the
/// names the stages' patterns bound.
#[derive(Default)]
struct Loop {
    pat: Option<Pat>,
    value: Option<Expr>,
    stmts: Vec<Stmt>,
    bound: HashSet<String>,
}

fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip(&p.expr),
        Expr::Group(g) => strip(&g.expr),
        e => e,
    }
}

/// `f` as an adaptor's function of `arity` parameters.
fn func(f: &Expr, arity: usize) -> Option<Func> {
    match strip(f) {
        Expr::Closure(c)
            if c.inputs.len() == arity
                && c.asyncness.is_none()
                && c.constness.is_none()
                && c.lifetimes.is_none()
                && c.movability.is_none() =>
        {
            if leaves_closure(&c.body) {
                return None;
            }
            let pats = c
                .inputs
                .iter()
                .map(|p| match p {
                    Pat::Type(t) => (*t.pat).clone(),
                    p => p.clone(),
                })
                .collect();
            Some(Func::Closure(pats, (*c.body).clone()))
        }
        p @ Expr::Path(path) if path.qself.is_none() => Some(Func::Path(p.clone())),
        _ => None,
    }
}

/// Whether `body` has a `return` or `?`: it would leave the closure, and
/// inlined it would leave the function.
fn leaves_closure(body: &Expr) -> bool {
    struct Find(bool);
    impl<'ast> Visit<'ast> for Find {
        fn visit_expr_return(&mut self, _: &'ast syn::ExprReturn) {
            self.0 = true;
        }
        fn visit_expr_try(&mut self, _: &'ast syn::ExprTry) {
            self.0 = true;
        }
    }
    let mut f = Find(false);
    f.visit_expr(body);
    f.0
}

/// The names pattern `p` binds.
fn bound_names(p: &Pat) -> HashSet<String> {
    struct Names(HashSet<String>);
    impl<'ast> Visit<'ast> for Names {
        fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
            self.0.insert(p.ident.to_string());
            syn::visit::visit_pat_ident(self, p);
        }
    }
    let mut n = Names(HashSet::new());
    n.visit_pat(p);
    n.0
}

/// Whether `e` mentions any of `names` (any identifier: conservative).
fn mentions(e: &Expr, names: &HashSet<String>) -> bool {
    let mut ids = Idents::new();
    ids.visit_expr(e);
    ids.0.iter().any(|i| names.contains(i))
}

/// Whether `p` is a plain name or `_` (what a `let` of a stage's value binds).
fn plain(p: &Pat) -> bool {
    match p {
        Pat::Ident(i) => i.by_ref.is_none() && i.subpat.is_none(),
        Pat::Wild(_) => true,
        _ => false,
    }
}

/// Whether an array place's indices are all literals: an effect before
/// the walk cannot change which array it is.
fn fixed_place(e: &Expr) -> bool {
    match strip(e) {
        Expr::Path(_) => true,
        Expr::Index(i) => crate::translate::literals::int_literal_value(&i.index).is_some() && fixed_place(&i.expr),
        Expr::Unary(u) => fixed_place(&u.expr),
        Expr::Reference(r) => fixed_place(&r.expr),
        _ => false,
    }
}

impl Rewrite {
    fn fresh(&mut self, stem: &str) -> syn::Ident {
        loop {
            let name = format!("__pl_{stem}{}", self.next);
            self.next += 1;
            if !self.used.contains(&name) {
                self.used.insert(name.clone());
                return syn::Ident::new(&name, Span::call_site());
            }
        }
    }

    /// The source, the `map`s (innermost first) and the terminal of `m`.
    fn chain(m: &syn::ExprMethodCall) -> Option<(Expr, Vec<Func>, Terminal)> {
        let name = m.method.to_string();
        let terminal = match (name.as_str(), m.args.len()) {
            ("sum" | "product", 0) => {
                let ty = match &m.turbofish {
                    None => None,
                    Some(t) if t.args.len() == 1 => match &t.args[0] {
                        syn::GenericArgument::Type(ty) => Some(ty.clone()),
                        _ => return None,
                    },
                    Some(_) => return None,
                };
                Terminal::Reduce(u8::from(name == "product"), ty)
            }
            ("fold", 2) if m.turbofish.is_none() => Terminal::Fold(m.args[0].clone(), func(&m.args[1], 2)?),
            ("any" | "all", 1) if m.turbofish.is_none() => Terminal::Test(name == "any", func(&m.args[0], 1)?),
            _ => return None,
        };
        let mut maps = Vec::new();
        let mut cur = &*m.receiver;
        loop {
            match strip(cur) {
                Expr::MethodCall(inner)
                    if inner.method == "map" && inner.args.len() == 1 && inner.turbofish.is_none() =>
                {
                    maps.push(func(&inner.args[0], 1)?);
                    cur = &inner.receiver;
                }
                _ => break,
            }
        }
        maps.reverse();
        Some((strip(cur).clone(), maps, terminal))
    }

    /// The current element: the stage's value, or the loop's own element
    /// (a fresh name) where no stage has made one.
    fn current(&mut self, l: &mut Loop) -> Expr {
        if let Some(v) = l.value.take() {
            return v;
        }
        let x = self.fresh("x");
        l.pat = Some(syn::parse_quote! { #x });
        syn::parse_quote! { #x }
    }

    /// Binds the current element to `p`: the loop's pattern where no stage
    /// ran yet, a `let` otherwise.
    fn bind(&mut self, p: &Pat, l: &mut Loop) -> Option<()> {
        match l.value.take() {
            None if l.pat.is_none() => l.pat = Some(p.clone()),
            // (Every stage leaves a value: not reached.)
            None => return None,
            Some(v) => {
                if !plain(p) {
                    return None;
                }
                l.stmts.push(syn::parse_quote! { let #p = #v; });
            }
        }
        Some(())
    }

    /// One stage: `f` applied to the current element (and to `acc`, for
    /// `fold`); its value.
    fn stage(&mut self, f: &Func, acc: Option<&syn::Ident>, l: &mut Loop) -> Option<Expr> {
        match f {
            Func::Closure(pats, body) => {
                let own: HashSet<String> = pats.iter().flat_map(bound_names).collect();
                // An earlier stage's names are in scope in the loop, not
                // in this closure: it must not read an outer name they
                // shadow.
                let shadowed: HashSet<String> = l.bound.difference(&own).cloned().collect();
                if mentions(body, &shadowed) {
                    return None;
                }
                let elem = pats.last().expect("arity checked");
                self.bind(elem, l)?;
                if let (Some(acc), [a, _]) = (acc, pats.as_slice()) {
                    if !plain(a) {
                        return None;
                    }
                    l.stmts.push(syn::parse_quote! { let #a = #acc; });
                }
                l.bound.extend(own);
                Some(body.clone())
            }
            Func::Path(p) => {
                let x = self.current(l);
                Some(match acc {
                    Some(acc) => syn::parse_quote! { #p(#acc, #x) },
                    None => syn::parse_quote! { #p(#x) },
                })
            }
        }
    }

    /// The loop replacing reduction `m`, or `None` where it does not fit.
    fn rewrite(&mut self, m: &syn::ExprMethodCall) -> Option<Expr> {
        let (src, maps, terminal) = Self::chain(m)?;
        let arrays = iterate::arrays(&src)?;
        if let Terminal::Fold(init, _) = &terminal {
            // Rust takes the array before it evaluates the initial value:
            // first here too, unless the value has no effects or cannot
            // change which array it is.
            if !iterate::effect_free(init) && !arrays.iter().all(fixed_place) {
                return None;
            }
        }
        let span = m.span();
        let acc = self.fresh("acc");
        let mut l = Loop::default();
        for f in &maps {
            let v = self.stage(f, None, &mut l)?;
            l.value = Some(v);
        }
        let (init, ty, last): (Expr, Option<Type>, Stmt) = match &terminal {
            Terminal::Reduce(which, ty) => {
                let x = self.current(&mut l);
                let marker = syn::Ident::new(NEUTRAL, span);
                let which_lit = proc_macro2::Literal::u8_unsuffixed(*which);
                let init = syn::parse_quote_spanned! {span=> #marker(#which_lit) };
                let last = if *which == 0 {
                    syn::parse_quote_spanned! {span=> #acc += #x; }
                } else {
                    syn::parse_quote_spanned! {span=> #acc *= #x; }
                };
                (init, ty.clone(), last)
            }
            Terminal::Fold(init, f) => {
                let v = self.stage(f, Some(&acc), &mut l)?;
                (init.clone(), None, syn::parse_quote_spanned! {span=> #acc = #v; })
            }
            Terminal::Test(stop, f) => {
                let v = self.stage(f, None, &mut l)?;
                let c = self.fresh("c");
                l.stmts.push(syn::parse_quote_spanned! {span=> let #c: bool = #v; });
                let test: Expr = if *stop { syn::parse_quote!(#c) } else { syn::parse_quote!(!#c) };
                let start = !*stop;
                let init: Expr = syn::parse_quote!(#start);
                (init, None, syn::parse_quote_spanned! {span=> if #test { #acc = #stop; break; } })
            }
        };
        let pat = l.pat.take()?;
        if !iterate::takes(&src, &pat) {
            return None;
        }
        let stmts = &l.stmts;
        let decl: Stmt = match ty {
            Some(t) => syn::parse_quote_spanned! {span=> let mut #acc: #t = #init; },
            None => syn::parse_quote_spanned! {span=> let mut #acc = #init; },
        };
        Some(syn::parse_quote_spanned! {span=>
            {
                #decl
                for #pat in #src {
                    #( #stmts )*
                    #last
                }
                #acc
            }
        })
    }
}

impl VisitMut for Rewrite {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        // Inner reductions first (one in a closure's body is part of the
        // value moved into the loop).
        syn::visit_mut::visit_expr_mut(self, e);
        if let Expr::MethodCall(m) = e {
            if let Some(new) = self.rewrite(m) {
                *e = new;
                self.found = true;
            }
        }
    }
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(f: ItemFn) -> String {
        let mut f = f;
        assert!(as_loops(&mut f));
        quote::quote!(#f).to_string()
    }

    #[test]
    fn sums_become_loops_from_the_neutral_element() {
        let s = rewritten(syn::parse_quote! {
            fn k(a: &[f64; 3], o: &mut f64) { *o = a.iter().sum::<f64>(); }
        });
        assert!(s.contains("let mut __pl_acc0 : f64 = __pl_neutral (0) ;"), "{s}");
        assert!(s.contains("for __pl_x1 in a . iter () { __pl_acc0 += __pl_x1 ; } __pl_acc0"), "{s}");
    }

    #[test]
    fn closures_become_patterns_and_lets() {
        let s = rewritten(syn::parse_quote! {
            fn k(a: &[f64; 3], b: &[f64; 3], o: &mut f64) {
                *o = a.iter().zip(b.iter()).map(|(x, y)| x * y).map(|p| p + 1.0).fold(0.0, |acc, v| acc.max(v));
            }
        });
        assert!(s.contains("let mut __pl_acc0 = 0.0 ;"), "{s}");
        assert!(
            s.contains("for (x , y) in a . iter () . zip (b . iter ()) { let p = x * y ; let v = p + 1.0 ; let acc = __pl_acc0 ; __pl_acc0 = acc . max (v) ; }"),
            "{s}"
        );
    }

    #[test]
    fn tests_stop_at_the_deciding_element() {
        let s = rewritten(syn::parse_quote! {
            fn k(a: &[f64; 3], o: &mut bool) { *o = a.iter().all(|&v| v > 0.0); }
        });
        assert!(s.contains("let mut __pl_acc0 = true ;"), "{s}");
        assert!(s.contains("for & v in a . iter () { let __pl_c1 : bool = v > 0.0 ; if ! __pl_c1 { __pl_acc0 = false ; break ; } }"), "{s}");
    }

    #[test]
    fn paths_are_called_in_place() {
        let s = rewritten(syn::parse_quote! {
            fn k(a: &[f64; 3], o: &mut f64) { *o = a.iter().copied().fold(f64::NEG_INFINITY, f64::max); }
        });
        assert!(
            s.contains("for __pl_x1 in a . iter () . copied () { __pl_acc0 = f64 :: max (__pl_acc0 , __pl_x1) ; }"),
            "{s}"
        );
    }

    #[test]
    fn what_does_not_fit_is_left_for_inference_to_refuse() {
        for mut f in [
            // Another adaptor, a closure leaving itself, a shadowed capture,
            // an initial value that could move the iterated row.
            syn::parse_quote! { fn k(a: &[f64; 3], o: &mut f64) { *o = a.iter().filter(|v| **v > 0.0).sum::<f64>(); } },
            syn::parse_quote! { fn k(a: &[f64; 3], o: &mut f64) { *o = a.iter().map(|v| { return; }).sum::<f64>(); } },
            syn::parse_quote! { fn k(a: &[f64; 3], x: &f64, o: &mut f64) { *o = a.iter().map(|x| x * 2.0).map(|y| y + x).sum::<f64>(); } },
            syn::parse_quote! { fn k(m: &[[f64; 3]; 2], o: &mut f64) { let mut i = 0; *o = m[i].iter().fold(bump(&mut i), |s, v| s + v); } },
        ] {
            assert!(!as_loops(&mut f), "{}", quote::quote!(#f));
        }
    }
}
