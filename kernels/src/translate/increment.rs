//! The increment-only analysis ([`super::Translation::increment_only`]):
//! which parameters the body only adds to, so that an INC argument may run
//! on a zeroed private copy.
//!
//! Separate because it is a question about the kernel, answered from pass
//! 1's name resolution, that emission does not need.

use std::collections::{HashMap, HashSet};

use syn::{BinOp, Expr, ItemFn, UnOp};

use super::infer::{key, Infer};
use super::Param;

/// `let _ = p;`, the usual way to silence an unused parameter: in Rust it
/// neither reads nor moves `p`, so it is no use of it.
fn discards_a_name(l: &syn::Local) -> bool {
    matches!(l.pat, syn::Pat::Wild(_))
        && l.init
            .as_ref()
            .is_some_and(|i| i.diverge.is_none() && matches!(&*i.expr, Expr::Path(p) if p.path.get_ident().is_some()))
}

/// The root path of an increment (or reduction) place and its index expressions.
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

/// Per parameter of `item`: whether the body only adds to it (see
/// [`Translation::increment_only`]). Every use of a parameter (after name
/// resolution, so shadowing locals do not count) must be the root of the
/// place of a `+=` or `-=` (`*p`, `p[i]`, `p[i][j]`); the index and the
/// added value may not read it.
///
/// [`Translation::increment_only`]: super::Translation::increment_only
///
/// A parameter (or a place in it) passed as `&mut` to a helper counts as
/// added to where the helper only adds to that parameter: the second
/// result lists, per parameter, the (helper, parameter position) pairs
/// whose own answers decide (`#[parloop::device]` gives each helper an
/// `INCREMENT_ONLY` table; the attribute combines them at compile time).
///
/// The third result gives, per `&mut` parameter that is not only added to,
/// the first expression that uses it otherwise (an assignment, a read in a
/// sum, a call), as source text for the error a user sees on INC.
pub(crate) fn increment_only(item: &ItemFn, infer: &Infer, params: &[Param]) -> IncrementUses {
    use syn::visit::Visit;

    struct Uses<'a> {
        resolved: &'a HashMap<usize, usize>,
        /// The helpers the body calls.
        helpers: &'a [String],
        /// Per parameter: the helper parameters it is passed to as `&mut`.
        via: Vec<Vec<(String, usize)>>,
        /// Path expressions that are roots of increment places.
        roots: HashSet<usize>,
        /// Per parameter: the first use that is no increment, as text.
        other_use: Vec<Option<String>>,
        /// The expressions being visited, outermost first: where a use is
        /// found, the nearest one that says what it does is its text.
        enclosing: Vec<&'a Expr>,
        /// Reference locals (`let r = &mut p[i];`, `let r = p;`, and the
        /// loops over `p.iter_mut()` rewritten to them): binding -> the
        /// parameter whose place they name. Their uses are the
        /// parameter's uses.
        aliases: HashMap<usize, usize>,
    }

    impl Uses<'_> {
        /// The helper `c` calls, by its plain name.
        fn helper(&self, c: &syn::ExprCall) -> Option<String> {
            let Expr::Path(p) = &*c.func else { return None };
            let name = p.path.get_ident()?.to_string();
            self.helpers.contains(&name).then_some(name)
        }

        /// The parameter whose place `arg` passes as `&mut` (`&mut p[i]`,
        /// `&mut *p`, or `p` itself, a reference, or a reference local
        /// naming its place); `indices` gets the place's index expressions.
        fn passed_place<'e>(&self, arg: &'e Expr, indices: &mut Vec<&'e Expr>) -> Option<usize> {
            match arg {
                Expr::Paren(p) => self.passed_place(&p.expr, indices),
                Expr::Reference(r) if r.mutability.is_some() => self.param_of(place_root(&r.expr, indices)?),
                Expr::Path(_) => self.param_of(arg),
                _ => None,
            }
        }

        /// The parameter path expression `e` names, through aliases.
        fn param_of(&self, e: &Expr) -> Option<usize> {
            let &id = self.resolved.get(&key(e))?;
            if id < self.other_use.len() {
                Some(id)
            } else {
                self.aliases.get(&id).copied()
            }
        }
    }

    impl<'ast> Visit<'ast> for Uses<'ast> {
        fn visit_expr(&mut self, e: &'ast Expr) {
            self.enclosing.push(e);
            self.visit_use(e);
            self.enclosing.pop();
        }

        fn visit_local(&mut self, l: &'ast syn::Local) {
            self.visit_binding(l);
        }
    }

    impl<'ast> Uses<'ast> {
        /// [`Visit::visit_expr`] inside `e` (pushed on `enclosing`).
        fn visit_use(&mut self, e: &'ast Expr) {
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
            if let Expr::Call(c) = e {
                if let Some(helper) = self.helper(c) {
                    for (k, arg) in c.args.iter().enumerate() {
                        let mut indices = Vec::new();
                        match self.passed_place(arg, &mut indices) {
                            Some(p) => {
                                if !self.via[p].iter().any(|(h, j)| *h == helper && *j == k) {
                                    self.via[p].push((helper.clone(), k));
                                }
                                for i in indices {
                                    self.visit_expr(i);
                                }
                            }
                            None => self.visit_expr(arg),
                        }
                    }
                    return;
                }
            }
            if let Expr::MethodCall(m) = e {
                // An array's length is its type's, not a use of its values
                // (the index loops over `p.iter_mut()` read it).
                let mut indices = Vec::new();
                if m.method == "len" && m.args.is_empty() && place_root(&m.receiver, &mut indices).is_some() {
                    for i in indices {
                        self.visit_expr(i);
                    }
                    return;
                }
            }
            if let Expr::Path(_) = e {
                if let Some(p) = self.param_of(e) {
                    if !self.roots.contains(&key(e)) && self.other_use[p].is_none() {
                        self.other_use[p] = Some(use_text(&self.enclosing));
                    }
                }
            }
            syn::visit::visit_expr(self, e);
        }

        /// [`Visit::visit_local`]: a reference local names its place.
        fn visit_binding(&mut self, l: &'ast syn::Local) {
            if discards_a_name(l) {
                return;
            }
            // `let r = &mut p[i];` (or `= p`, `= &mut *p`): `r` names
            // `p`'s place, and the `let` itself neither reads nor writes
            // it (its indices are visited as reads).
            if let (Some(init), Some(&id)) = (&l.init, self.resolved.get(&key(l))) {
                let (mut indices, mut place) = (Vec::new(), &*init.expr);
                while let Expr::Paren(p) = place {
                    place = &p.expr;
                }
                let root = match place {
                    Expr::Reference(r) if r.mutability.is_some() => place_root(&r.expr, &mut indices),
                    Expr::Path(_) => Some(place),
                    // A bare local's loop element (`iterate.rs`): a
                    // reference into `it` where `it` is one.
                    Expr::Call(c) if super::infer::is_element(c) => {
                        indices.push(&c.args[1]);
                        place_root(&c.args[0], &mut indices)
                    }
                    _ => None,
                };
                if let Some(p) = root.and_then(|r| self.param_of(r)) {
                    self.aliases.insert(id, p);
                    for i in indices {
                        self.visit_expr(i);
                    }
                    return;
                }
            }
            syn::visit::visit_local(self, l);
        }
    }

    let mut uses = Uses {
        resolved: &infer.resolved,
        helpers: &infer.calls,
        via: vec![Vec::new(); params.len()],
        roots: HashSet::new(),
        other_use: vec![None; params.len()],
        enclosing: Vec::new(),
        aliases: HashMap::new(),
    };
    uses.visit_block(&item.block);
    let other_use: Vec<Option<String>> =
        params.iter().zip(uses.other_use).map(|(p, other)| other.filter(|_| p.mutable)).collect();
    IncrementUses { only: other_use.iter().map(Option::is_none).collect(), via: uses.via, other_use }
}

/// What [`increment_only`] finds, per parameter.
pub(crate) struct IncrementUses {
    /// Whether the body itself only adds to it.
    pub only: Vec<bool>,
    /// The helpers' parameters it is passed to as `&mut`.
    pub via: Vec<Vec<(String, usize)>>,
    /// The first use that is no increment, as source text.
    pub other_use: Vec<Option<String>>,
}

/// The text of the expression that makes a path (the last of
/// `enclosing`, the expressions around it, outermost first) a use other
/// than an increment: the nearest that does something (an assignment, an
/// operator, a call, a method call; `*p` and `p[i]` alone say nothing),
/// or else the outermost (`*p` in `let v = *p;`).
fn use_text(enclosing: &[&Expr]) -> String {
    let telling = enclosing.iter().rev().find(|e| {
        matches!(e, Expr::Assign(_) | Expr::Binary(_) | Expr::Call(_) | Expr::MethodCall(_) | Expr::Return(_))
    });
    let Some(&shown) = telling.or(enclosing.first()) else { return String::new() };
    let text = tidy(&quote::ToTokens::to_token_stream(shown).to_string());
    // A long expression (a whole `if` condition) is cut: the start names it.
    match text.char_indices().nth(60) {
        Some((cut, _)) => format!("{} ...", &text[..cut]),
        None => text,
    }
}

/// Token text as written: `* y [0] = f (x) ;` as `*y[0] = f(x);`.
fn tidy(tokens: &str) -> String {
    let ends_word = |w: &str| {
        w.ends_with(|c: char| c.is_alphanumeric() || matches!(c, '_' | ')' | ']'))
            && !matches!(w, "if" | "in" | "return" | "let" | "else" | "match" | "while" | "mut")
    };
    let words: Vec<&str> = tokens.split(' ').filter(|w| !w.is_empty()).collect();
    let mut out = String::with_capacity(tokens.len());
    for (i, w) in words.iter().enumerate() {
        let prev = if i > 0 { words[i - 1] } else { "" };
        // A unary `*`, `&`, `-` or `!` (at the start, or after an operator
        // or an opening bracket) binds to what follows.
        let unary = match prev.strip_suffix(['*', '&', '-', '!']) {
            Some("") => i == 1 || !ends_word(words[i - 2]),
            Some(before) => before.ends_with(['(', '[']),
            None => false,
        };
        let glue = i == 0
            || w.starts_with(['[', ')', ']', ',', ';', '.', '?'])
            || (w.starts_with('(') && ends_word(prev))
            || prev.ends_with(['[', '(', '.'])
            || unary;
        if !glue {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

/// Per parameter of `item`: whether a MIN and whether a MAX global may
/// take it, `(min, max)`. A reduction argument holds the running minimum
/// (maximum) on one backend, a block's on another, the initial value on a
/// third: only a body that combines the parameter with itself by that one
/// operation gives one answer everywhere. Every use of a `&mut` parameter
/// must be one of
/// - `P = P.min(e)` or `P = e.min(P)` (`max`), where `P` is a place of the
///   parameter (`*p`, `p[i]`; `p.min(e)` for `*p.min(e)`),
/// - `if e < P { P = e; }` (or `P > e`, `<=`, `>=`; the other way round for
///   the maximum), with no `else`,
///
/// and `e` may not read the parameter. `&` parameters and those never used
/// may take either; any other use (a read, `+=`, a plain assignment, a
/// helper call) neither.
pub(crate) fn reductions(item: &ItemFn, infer: &Infer, params: &[Param]) -> Vec<(bool, bool)> {
    use syn::visit::Visit;

    #[derive(Clone, Copy, PartialEq)]
    enum Op {
        Min,
        Max,
    }

    struct Uses<'a> {
        resolved: &'a HashMap<usize, usize>,
        /// Path expressions that are roots of reduction places.
        roots: HashSet<usize>,
        seen: Vec<(bool, bool)>,
        other_use: Vec<bool>,
    }

    /// `e` without parentheses and dereferences, as tokens: the same
    /// place written `*p`, `(*p)` or `p` compares equal.
    fn bare(e: &Expr) -> String {
        let mut e = e;
        loop {
            match e {
                Expr::Paren(p) => e = &p.expr,
                Expr::Group(g) => e = &g.expr,
                Expr::Unary(u) if matches!(u.op, UnOp::Deref(_)) => e = &u.expr,
                _ => return quote::ToTokens::to_token_stream(e).to_string(),
            }
        }
    }

    impl Uses<'_> {
        fn param_of(&self, e: &Expr) -> Option<usize> {
            let &id = self.resolved.get(&key(e))?;
            (id < self.other_use.len()).then_some(id)
        }

        /// Marks the place `place` (rooted at a parameter) as reduced by
        /// `op`, visiting its indices; `None` when it is no such place.
        fn reduce(&mut self, place: &Expr, op: Op) -> Option<()> {
            let mut indices = Vec::new();
            let root = place_root(place, &mut indices)?;
            let p = self.param_of(root)?;
            self.roots.insert(key(root));
            match op {
                Op::Min => self.seen[p].0 = true,
                Op::Max => self.seen[p].1 = true,
            }
            for i in indices {
                self.visit_expr(i);
            }
            Some(())
        }

        /// `P = P.min(e)` / `P = e.min(P)`: the value `e` and the op.
        fn combined<'e>(left: &Expr, right: &'e Expr) -> Option<(&'e Expr, &'e Expr, Op)> {
            let Expr::MethodCall(m) = right else { return None };
            let op = match m.method.to_string().as_str() {
                "min" => Op::Min,
                "max" => Op::Max,
                _ => return None,
            };
            let [arg] = m.args.iter().collect::<Vec<_>>()[..] else { return None };
            let target = bare(left);
            if bare(&m.receiver) == target {
                Some((&m.receiver, arg, op))
            } else if bare(arg) == target {
                Some((arg, &m.receiver, op))
            } else {
                None
            }
        }

        /// `if e < P { P = e; }` and its variants: the assignment, the
        /// compared place and the op.
        fn guarded(i: &syn::ExprIf) -> Option<(&syn::ExprAssign, &Expr, Op)> {
            if i.else_branch.is_some() {
                return None;
            }
            let [syn::Stmt::Expr(Expr::Assign(a), _)] = &i.then_branch.stmts[..] else { return None };
            let Expr::Binary(c) = &*i.cond else { return None };
            let (place, value) = (bare(&a.left), bare(&a.right));
            // Whether the place is on the left of the comparison.
            let place_left = if bare(&c.left) == place && bare(&c.right) == value {
                true
            } else if bare(&c.right) == place && bare(&c.left) == value {
                false
            } else {
                return None;
            };
            let less = match c.op {
                BinOp::Lt(_) | BinOp::Le(_) => true,
                BinOp::Gt(_) | BinOp::Ge(_) => false,
                _ => return None,
            };
            // `value < place` (or `place > value`) replaces a larger
            // place: the minimum.
            let op = if less != place_left { Op::Min } else { Op::Max };
            let compared = if place_left { &*c.left } else { &*c.right };
            Some((a, compared, op))
        }
    }

    impl<'ast> Visit<'ast> for Uses<'_> {
        fn visit_expr(&mut self, e: &'ast Expr) {
            if let Expr::Assign(a) = e {
                if let Some((own, value, op)) = Self::combined(&a.left, &a.right) {
                    if self.reduce(&a.left, op).is_some() {
                        if self.reduce(own, op).is_none() {
                            self.visit_expr(own);
                        }
                        self.visit_expr(value);
                        return;
                    }
                }
            }
            if let Expr::If(i) = e {
                if let Some((a, compared, op)) = Self::guarded(i) {
                    if self.reduce(&a.left, op).is_some() {
                        if self.reduce(compared, op).is_none() {
                            self.visit_expr(compared);
                        }
                        // The value, twice: in the condition and assigned.
                        let Expr::Binary(c) = &*i.cond else { unreachable!("checked by guarded") };
                        let other = if std::ptr::eq(&*c.left, compared) { &c.right } else { &c.left };
                        self.visit_expr(other);
                        self.visit_expr(&a.right);
                        return;
                    }
                }
            }
            if let Expr::Path(_) = e {
                if let Some(p) = self.param_of(e) {
                    if !self.roots.contains(&key(e)) {
                        self.other_use[p] = true;
                    }
                }
            }
            syn::visit::visit_expr(self, e);
        }

        fn visit_local(&mut self, l: &'ast syn::Local) {
            if !discards_a_name(l) {
                syn::visit::visit_local(self, l);
            }
        }
    }

    let n = params.len();
    let mut uses = Uses {
        resolved: &infer.resolved,
        roots: HashSet::new(),
        seen: vec![(false, false); n],
        other_use: vec![false; n],
    };
    uses.visit_block(&item.block);
    params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            if !p.mutable {
                return (true, true);
            }
            if uses.other_use[i] {
                return (false, false);
            }
            let (min, max) = uses.seen[i];
            (!max, !min)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::tidy;

    #[test]
    fn token_text_reads_as_written() {
        for (tokens, written) in [
            ("* dt = dt . min (0.5 * * v)", "*dt = dt.min(0.5 * *v)"),
            ("y [i] [0] = - x [0] + f (a , & b [1])", "y[i][0] = -x[0] + f(a, &b[1])"),
            ("a - b * c", "a - b * c"),
            ("if * v > * top", "if *v > *top"),
            ("set_to (& mut r [0] , * x)", "set_to(&mut r[0], *x)"),
            ("f (- a [1] , (* b))", "f(-a[1], (*b))"),
        ] {
            assert_eq!(tidy(tokens), written);
        }
    }
}
