//! The lane-wise twin of a kernel, for SIMD on the CPU backends.
//!
//! The twin has the kernel's body with every float value replaced by a
//! `Lanes<T, W>`: the value for `W` (4 or 8) consecutive elements at once. Which values
//! are floats comes from the translator's type inference, so the rewrite is
//! exact: float parameters and float locals become lanes, a float expression
//! that mentions neither (a literal, a constant, a helper called on
//! constants, a cast of a loop index) is computed once as a scalar and
//! splat, integers and booleans stay scalars and keep the control flow.
//! Helpers called on lanes are called once per lane.
//!
//! A kernel gets no twin (and runs scalar) where lanes would need to differ
//! in control flow or in integer values: a float that decides an `if`, a
//! `while` or a comparison, a float cast to an integer, or an integer
//! parameter. [`lane_twin`] then says why.

use std::collections::HashSet;

use proc_macro2::TokenStream;
use quote::{quote, ToTokens};
use syn::visit::Visit;
use syn::{BinOp, Block, Expr, FnArg, ItemFn, Lit, Pat, Stmt, Type, UnOp};

use crate::translate::{infer, key, FnKind, Infer};
use crate::types::{Scalar, Ty};

/// A kernel's lane-wise twin, as tokens for `#[parloop::kernel]`.
pub struct LaneTwin {
    /// The twin's parameters: `name: &<T as Shape>::Lane<W>` (or `&mut`).
    pub params: Vec<TokenStream>,
    /// The twin's body, a block.
    pub body: TokenStream,
    /// Per parameter: whether the kernel adds to it exactly once per call
    /// (`*p += v`, or `p[i] += v` once per literal `i`, outside loops and
    /// branches, and nowhere else). Such a parameter can be a global INC
    /// reduced in the scalar order: each lane starts from `-0.0`.
    pub exact_inc: Vec<bool>,
}

/// Builds the lane-wise twin of kernel `item` for `width` lanes; `Err` says
/// why it has none. `private` is the path of the runtime items the twin
/// uses (`Lanes`, `Shape`), `::parloop::__private` in the attribute.
///
/// ```
/// let f: syn::ItemFn = syn::parse_quote! {
///     fn scale(a: &f64, x: &[f64; 2], y: &mut [f64; 2]) {
///         for i in 0..2 {
///             y[i] += *a * x[i] + 1.0;
///         }
///     }
/// };
/// let twin = parloop_kernels::lane_twin(&f, &quote::quote!(p), 4).unwrap();
/// assert!(twin.body.to_string().contains("unsafe { p :: Lanes :: < f64 , 4 > :: splat (1.0) }"));
/// let g: syn::ItemFn = syn::parse_quote! {
///     fn clip(x: &f64, y: &mut f64) {
///         if *x > 0.0 { *y = *x; }
///     }
/// };
/// assert!(parloop_kernels::lane_twin(&g, &quote::quote!(p), 4).is_err());
/// ```
pub fn lane_twin(item: &ItemFn, private: &TokenStream, width: usize) -> Result<LaneTwin, String> {
    let mut normal = crate::translate::normal_form(item);
    // A loop over a bare local array (`__pl_elem`, see `translate::iterate`) has no
    // Rust form here; the kernel runs scalar.
    if crate::translate::uses_element(&normal) {
        return Err("a `for` over a local array".into());
    }
    let (mut inf, params, _) = infer(&normal, FnKind::Kernel).map_err(|e| e.to_string())?;
    // A `sum`'s start (`translate/folds.rs`) as a Rust literal of its type,
    // should the twin take the reduction's loop (it declines its reference
    // locals today).
    crate::translate::resolve_neutrals(&mut normal, &mut inf);
    let item = &normal;
    if !inf.macros.is_empty() {
        // A panic site's element is the lane's, which a group of lanes
        // would not name: such kernels run scalar.
        return Err("an `assert!`, `panic!` or `unreachable!`".into());
    }
    if let Some(p) = params.iter().find(|p| !p.elem.is_float()) {
        return Err(format!("parameter `{}` holds integers", p.name));
    }
    let mut decls = Vec::new();
    let lanes = proc_macro2::Literal::usize_unsuffixed(width);
    for arg in &item.sig.inputs {
        let FnArg::Typed(pt) = arg else { return Err("a `self` parameter".into()) };
        let (Pat::Ident(name), Type::Reference(r)) = (&*pt.pat, &*pt.ty) else {
            return Err("a parameter that is not a plain name of reference type".into());
        };
        let (mutability, elem) = (&r.mutability, &r.elem);
        decls.push(quote! { #name: &#mutability <#elem as #private::Shape>::Lane<#lanes> });
    }
    let mut twin = Twin { inf: &mut inf, private, width, varying: (0..params.len()).collect() };
    let stmts = twin.stmts(&item.block)?;
    let exact_inc = (0..params.len()).map(|p| params[p].mutable && exact_once(&twin, p, &item.block)).collect();
    let body = quote! {{ #stmts }};
    Ok(LaneTwin { params: decls, body, exact_inc })
}

/// The rewrite, with the inference results.
struct Twin<'a> {
    inf: &'a mut Infer,
    private: &'a TokenStream,
    /// Lanes per value.
    width: usize,
    /// Bindings that hold lanes: parameters and float locals.
    varying: HashSet<usize>,
}

type Rewrite = Result<TokenStream, String>;

impl Twin<'_> {
    fn ty(&self, e: &Expr) -> Ty {
        self.inf.types.get(&key(e)).cloned().unwrap_or(Ty::Unit)
    }

    /// The scalar type of `e` when it is a scalar.
    fn scalar(&mut self, e: &Expr) -> Option<Scalar> {
        let t = self.ty(e);
        self.inf.vars.scalar(&t)
    }

    /// The innermost scalar of a (reference to an) array or scalar type.
    fn elem(&mut self, t: &Ty) -> Option<Scalar> {
        match t {
            Ty::Ref(inner, _) | Ty::Array(inner, _) => self.elem(inner),
            t => self.inf.vars.scalar(t),
        }
    }

    /// Whether `e` reads a binding that holds lanes.
    fn varies(&self, e: &Expr) -> bool {
        struct Finder<'b> {
            twin: &'b Twin<'b>,
            found: bool,
        }
        impl<'ast> Visit<'ast> for Finder<'_> {
            fn visit_expr(&mut self, e: &'ast Expr) {
                if let Some(id) = self.twin.inf.resolved.get(&key(e)) {
                    self.found |= self.twin.varying.contains(id);
                }
                syn::visit::visit_expr(self, e);
            }
        }
        let mut f = Finder { twin: self, found: false };
        f.visit_expr(e);
        f.found
    }

    fn lanes_of(&self, s: Scalar) -> TokenStream {
        let private = self.private;
        let t = syn::Ident::new(s.rust(), proc_macro2::Span::call_site());
        let width = proc_macro2::Literal::usize_unsuffixed(self.width);
        quote! { #private::Lanes::<#t, #width> }
    }

    fn stmts(&mut self, b: &Block) -> Rewrite {
        let mut out = TokenStream::new();
        for (i, stmt) in b.stmts.iter().enumerate() {
            out.extend(match stmt {
                Stmt::Local(local) => self.local(local)?,
                // A block's value: a uniform float is splat like any value.
                Stmt::Expr(e, None) if i + 1 == b.stmts.len() => self.value(e)?,
                Stmt::Expr(e, semi) => {
                    let e = self.expr(e)?;
                    quote! { #e #semi }
                }
                other => other.to_token_stream(),
            });
        }
        Ok(out)
    }

    fn block(&mut self, b: &Block) -> Rewrite {
        let s = self.stmts(b)?;
        Ok(quote! {{ #s }})
    }

    fn local(&mut self, local: &syn::Local) -> Rewrite {
        if let (Pat::Wild(_), Some(init)) = (&local.pat, &local.init) {
            let v = self.expr(&init.expr)?;
            return Ok(quote! { let _ = #v; });
        }
        let id = *self.inf.resolved.get(&key(local)).ok_or("an unresolved `let`")?;
        let ty = self.inf.bindings[id].ty.clone();
        if matches!(ty, Ty::Ref(..)) {
            // Lanes of a referenced place are not one place.
            return Err("a reference local".into());
        }
        let init = local.init.as_ref().map(|i| &*i.expr);
        let Some(float) = self.elem(&ty).filter(|s| s.is_float()) else {
            if init.is_some_and(|e| self.varies(e)) {
                return Err("a non-float `let` computed from per-element values".into());
            }
            return Ok(local.to_token_stream());
        };
        let (name, annotation) = match &local.pat {
            Pat::Ident(pi) => (pi, None),
            Pat::Type(pt) => match &*pt.pat {
                Pat::Ident(pi) => (pi, Some(self.lane_type(&pt.ty, float)?)),
                _ => return Err("a `let` pattern".into()),
            },
            _ => return Err("a `let` pattern".into()),
        };
        let init = match init {
            None => None,
            Some(e) => Some(self.value(e)?),
        };
        // Bound after its initialiser, which sees the shadowed binding.
        self.varying.insert(id);
        let annotation = annotation.map(|t| quote! { : #t });
        let init = init.map(|i| quote! { = #i });
        Ok(quote! { let #name #annotation #init; })
    }

    /// `f64` as `Lanes<f64>`, arrays of it likewise; `_` stays.
    fn lane_type(&self, t: &Type, float: Scalar) -> Rewrite {
        match t {
            Type::Array(a) => {
                let inner = self.lane_type(&a.elem, float)?;
                let n = &a.len;
                Ok(quote! { [#inner; #n] })
            }
            Type::Infer(_) => Ok(t.to_token_stream()),
            _ => Ok(self.lanes_of(float)),
        }
    }

    /// `e` where its value is used: uniform floats are splat, array
    /// literals element by element (to any nesting).
    fn value(&mut self, e: &Expr) -> Rewrite {
        match e {
            Expr::Array(a) => {
                let elems = a.elems.iter().map(|e| self.value(e)).collect::<Result<Vec<_>, _>>()?;
                return Ok(quote! { [#(#elems),*] });
            }
            Expr::Repeat(r) => {
                let v = self.value(&r.expr)?;
                let n = &r.len;
                return Ok(quote! { [#v; #n] });
            }
            Expr::Paren(p) if matches!(&*p.expr, Expr::Array(_) | Expr::Repeat(_)) => return self.value(&p.expr),
            _ => {}
        }
        if !self.varies(e) && matches!(self.inf.vars.deref(&self.ty(e)), Ty::Array(..)) {
            // A uniform array (a constant table) would need each value
            // splat: not worth a twin.
            return Err("a uniform array used as a per-element value".into());
        }
        if !self.varies(e) {
            if let Some(s) = self.scalar(e).filter(|s| s.is_float()) {
                let lanes = self.lanes_of(s);
                // SAFETY (in the generated code): twins run only where AVX2 does.
                return Ok(quote! { unsafe { #lanes::splat(#e) } });
            }
        }
        self.expr(e)
    }

    /// `e` rewritten; expressions that do not vary stay as written.
    fn expr(&mut self, e: &Expr) -> Rewrite {
        if !self.varies(e) {
            return Ok(e.to_token_stream());
        }
        self.varying_expr(e)
    }

    fn control(&mut self, e: &Expr) -> Rewrite {
        match e {
            Expr::If(i) => {
                if self.varies(&i.cond) {
                    return Err("a per-element value decides an `if`".into());
                }
                let cond = &i.cond;
                let then = self.block(&i.then_branch)?;
                // Branches are rewritten even where they do not vary, so
                // that both yield lanes when the `if` is a value.
                let els = match i.else_branch.as_ref().map(|(_, e)| &**e) {
                    Some(Expr::Block(b)) => {
                        let b = self.block(&b.block)?;
                        quote! { else #b }
                    }
                    Some(e) => {
                        let e = self.control(e)?;
                        quote! { else #e }
                    }
                    None => quote! {},
                };
                Ok(quote! { if #cond #then #els })
            }
            Expr::ForLoop(f) => {
                let (label, pat, range) = (&f.label, &f.pat, &f.expr);
                let body = self.block(&f.body)?;
                Ok(quote! { #label for #pat in #range #body })
            }
            Expr::While(w) => {
                if self.varies(&w.cond) {
                    return Err("a per-element value decides a `while`".into());
                }
                let (label, cond) = (&w.label, &w.cond);
                let body = self.block(&w.body)?;
                Ok(quote! { #label while #cond #body })
            }
            Expr::Loop(l) => {
                let label = &l.label;
                let body = self.block(&l.body)?;
                Ok(quote! { #label loop #body })
            }
            Expr::Block(b) => self.block(&b.block),
            Expr::Match(m) => {
                if self.varies(&m.expr) || m.arms.iter().any(|a| a.guard.as_ref().is_some_and(|(_, g)| self.varies(g)))
                {
                    return Err("a per-element value decides a `match`".into());
                }
                let scrutinee = &m.expr;
                let mut arms = Vec::new();
                for arm in &m.arms {
                    // Arms are rewritten even where they do not vary, as
                    // `if`'s branches, so that all yield lanes.
                    let body = match &*arm.body {
                        Expr::Block(b) => self.block(&b.block)?,
                        other => self.value(other)?,
                    };
                    let pat = &arm.pat;
                    let guard = arm.guard.as_ref().map(|(_, g)| quote! { if #g });
                    arms.push(quote! { #pat #guard => #body, });
                }
                Ok(quote! { match #scrutinee { #(#arms)* } })
            }
            other => Ok(other.to_token_stream()),
        }
    }

    fn varying_expr(&mut self, e: &Expr) -> Rewrite {
        match e {
            Expr::Paren(p) => {
                let inner = self.expr(&p.expr)?;
                Ok(quote! { (#inner) })
            }
            Expr::Group(g) => self.expr(&g.expr),
            Expr::Path(_) => Ok(e.to_token_stream()),
            Expr::Unary(u) => {
                let inner = self.expr(&u.expr)?;
                match u.op {
                    UnOp::Deref(_) => Ok(quote! { *#inner }),
                    UnOp::Neg(_) => Ok(quote! { -#inner }),
                    _ => Err("`!` of a per-element value".into()),
                }
            }
            Expr::Binary(b) => {
                use BinOp::*;
                match b.op {
                    Add(_) | Sub(_) | Mul(_) | Div(_) | Rem(_) | AddAssign(_) | SubAssign(_) | MulAssign(_)
                    | DivAssign(_) | RemAssign(_) => {
                        let r = self.value(&b.right)?;
                        let op = &b.op;
                        if is_assign_op(&b.op) {
                            let l = self.expr(&b.left)?;
                            return Ok(quote! { #l #op (#r) });
                        }
                        // Parenthesised: a rewritten operand may be a block
                        // (`{ ... }`), which at the start of a statement or
                        // a branch's tail would end the expression there.
                        let l = self.value(&b.left)?;
                        Ok(quote! { (#l) #op (#r) })
                    }
                    _ => Err("a comparison, logical or bitwise operation on per-element values".into()),
                }
            }
            Expr::Assign(a) => {
                let l = self.expr(&a.left)?;
                let r = self.value(&a.right)?;
                Ok(quote! { #l = #r })
            }
            Expr::Index(ix) => {
                if self.varies(&ix.index) {
                    return Err("an index computed from per-element values".into());
                }
                let base = self.expr(&ix.expr)?;
                let index = &ix.index;
                Ok(quote! { #base[#index] })
            }
            Expr::Cast(c) => {
                let (Some(from), Some(to)) = (self.scalar(&c.expr), self.scalar(e)) else {
                    return Err("a cast of an untyped value".into());
                };
                if !from.is_float() || !to.is_float() {
                    return Err("a cast between a per-element float and an integer".into());
                }
                let inner = self.value(&c.expr)?;
                let method = syn::Ident::new(&format!("to_{}", to.rust()), proc_macro2::Span::call_site());
                Ok(quote! { (#inner).#method() })
            }
            Expr::MethodCall(m) => {
                let name = m.method.to_string();
                let recv = self.value(&m.receiver)?;
                let method = &m.method;
                // Lanes have every float method of the subset that yields
                // a float; a test's `bool` would decide control flow.
                if crate::translate::method_yields_bool(&name) {
                    return Err(format!("`{name}` of a per-element value"));
                }
                let args = match name.as_str() {
                    "powi" => {
                        if self.varies(&m.args[0]) {
                            return Err("`powi` with a per-element exponent".into());
                        }
                        vec![m.args[0].to_token_stream()]
                    }
                    // A failed bound check must panic for every lane alike.
                    "clamp" if m.args.iter().any(|a| self.varies(a)) => {
                        return Err("`clamp` with per-element bounds".into())
                    }
                    _ => m.args.iter().map(|a| self.value(a)).collect::<Result<_, _>>()?,
                };
                Ok(quote! { #recv.#method(#(#args),*) })
            }
            Expr::Call(c) => {
                let Some(ret) = self.scalar(e).filter(|s| s.is_float()) else {
                    return Err("a helper returning a non-float from per-element values".into());
                };
                let lanes = self.lanes_of(ret);
                let mut lets = Vec::new();
                let mut uses = Vec::new();
                for (k, a) in c.args.iter().enumerate() {
                    let tmp = syn::Ident::new(&format!("__pl_arg{k}"), proc_macro2::Span::call_site());
                    if self.varies(a) {
                        if !self.scalar(a).is_some_and(|s| s.is_float()) {
                            return Err("a per-element array or reference passed to a helper".into());
                        }
                        let v = self.expr(a)?;
                        lets.push(quote! { let #tmp = #v; });
                        uses.push(quote! { #tmp.lane(__pl_lane) });
                    } else {
                        lets.push(quote! { let #tmp = #a; });
                        uses.push(quote! { #tmp });
                    }
                }
                let f = &c.func;
                // SAFETY (of the generated `unsafe`): lane-wise twins run
                // only where the runtime detected the instruction sets
                // `Lanes` needs (`from_fn`'s contract, as `splat`'s).
                Ok(quote! {{
                    #(#lets)*
                    let __pl_call = |__pl_lane: usize| #f(#(#uses),*);
                    unsafe { #lanes::from_fn(__pl_call) }
                }})
            }
            Expr::If(_) | Expr::Match(_) | Expr::ForLoop(_) | Expr::While(_) | Expr::Loop(_) | Expr::Block(_) => {
                self.control(e)
            }
            Expr::Return(_) | Expr::Break(_) | Expr::Continue(_) => Ok(e.to_token_stream()),
            Expr::Reference(_) => Err("a reference to a per-element value".into()),
            _ => Err("an expression without a lane-wise form".into()),
        }
    }
}

fn is_assign_op(op: &BinOp) -> bool {
    use BinOp::*;
    matches!(op, AddAssign(_) | SubAssign(_) | MulAssign(_) | DivAssign(_) | RemAssign(_))
}

/// Whether parameter `p` is only ever the place of one `+=` per component,
/// outside loops and branches (see [`LaneTwin::exact_inc`]).
fn exact_once(twin: &Twin, p: usize, body: &Block) -> bool {
    struct Count<'b> {
        twin: &'b Twin<'b>,
        p: usize,
        /// Nesting of loops and branches.
        depth: usize,
        /// Components added to, by literal indices.
        added: Vec<Vec<String>>,
        other_use: bool,
    }
    impl Count<'_> {
        fn is_p(&self, e: &Expr) -> bool {
            self.twin.inf.resolved.get(&key(e)) == Some(&self.p)
        }
        /// The literal indices of a place `*p`, `p[i]`, `p[i][j]`.
        fn component(&self, e: &Expr) -> Option<Vec<String>> {
            match e {
                Expr::Unary(u) if matches!(u.op, UnOp::Deref(_)) && self.is_p(&u.expr) => Some(Vec::new()),
                Expr::Paren(p) => self.component(&p.expr),
                Expr::Index(ix) => {
                    let Expr::Lit(syn::ExprLit { lit: Lit::Int(i), .. }) = &*ix.index else { return None };
                    let mut c = if self.is_p(&ix.expr) { Vec::new() } else { self.component(&ix.expr)? };
                    c.push(i.base10_digits().to_owned());
                    Some(c)
                }
                _ => None,
            }
        }
    }
    impl<'ast> Visit<'ast> for Count<'_> {
        fn visit_expr(&mut self, e: &'ast Expr) {
            match e {
                Expr::Binary(b) if matches!(b.op, BinOp::AddAssign(_)) => {
                    if let Some(c) = self.component(&b.left) {
                        if self.depth > 0 || self.added.contains(&c) {
                            self.other_use = true;
                        }
                        self.added.push(c);
                        self.visit_expr(&b.right);
                        return;
                    }
                }
                Expr::If(_) | Expr::Match(_) | Expr::ForLoop(_) | Expr::While(_) | Expr::Loop(_) => {
                    self.depth += 1;
                    syn::visit::visit_expr(self, e);
                    self.depth -= 1;
                    return;
                }
                _ => {}
            }
            if self.is_p(e) {
                self.other_use = true;
            }
            syn::visit::visit_expr(self, e);
        }
    }
    let mut c = Count { twin, p, depth: 0, added: Vec::new(), other_use: false };
    c.visit_block(body);
    !c.other_use && !c.added.is_empty()
}
