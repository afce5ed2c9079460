//! `match` as C++: the scrutinee once into a constant, then an `if` chain
//! over the arms' pattern tests.
//!
//! Without guards the last arm is the chain's `else` (rustc checks the
//! match exhaustive on the host function, so the value is in its pattern
//! when no earlier arm took it). With guards a flag records that an arm
//! was taken: a guard runs only after its pattern matched and may need
//! statements of its own, which a C++ condition cannot hold.

use syn::spanned::Spanned;
use syn::{Expr, Lit, Pat, RangeLimits};

use super::{cpp_scalar, Emit};
use crate::translate::infer::key;
use crate::translate::literals::{constant, int_literal};
use crate::types::{error, Scalar, Ty};

/// The alternatives of a pattern (`1 | 2 | 3`, also in parentheses or
/// under a binding's `@`); one for any other pattern.
fn alternatives(p: &Pat) -> Vec<&Pat> {
    match p {
        Pat::Paren(inner) => alternatives(&inner.pat),
        Pat::Ident(pi) if pi.subpat.is_some() => alternatives(&pi.subpat.as_ref().expect("checked").1),
        Pat::Or(o) => o.cases.iter().flat_map(alternatives).collect(),
        _ => vec![p],
    }
}

impl Emit<'_> {
    /// Emits match `m` as statements; each arm's value, if `into` names a
    /// temporary, is assigned to it.
    pub(super) fn match_arms(&mut self, m: &syn::ExprMatch, into: Option<&str>) -> syn::Result<()> {
        let scrutinee_ty = self.infer.vars.deref(&self.ty_of(&m.expr));
        let s = self.infer.vars.scalar(&scrutinee_ty).ok_or_else(|| {
            error(m.expr.span(), "cannot infer the type of this value: annotate it, `let x: i32 = ...`")
        })?;
        let v = self.value(&m.expr)?;
        self.flush_pre();
        self.line("{");
        self.indent += 1;
        let sv = self.temp("m");
        let t = cpp_scalar(s, false);
        // `(void)`: NVRTC warns of locals never read (an arm of `_` only,
        // a binding an arm ignores).
        self.line(&format!("const {t} {sv} = {v};"));
        self.line(&format!("(void){sv};"));
        for arm in &m.arms {
            self.pattern_bindings(&arm.pat, &sv, t);
        }
        let n = m.arms.len();
        if m.arms.iter().all(|a| a.guard.is_none()) {
            for (i, arm) in m.arms.iter().enumerate() {
                let last = i + 1 == n;
                let open = match (i, last) {
                    (0, true) => "{".to_string(),
                    (0, false) => format!("if ({}) {{", self.pattern_test(&arm.pat, &sv, s)?),
                    (_, true) => "} else {".to_string(),
                    _ => format!("}} else if ({}) {{", self.pattern_test(&arm.pat, &sv, s)?),
                };
                self.line(&open);
                self.indent += 1;
                self.arm_body(&arm.body, into)?;
                self.indent -= 1;
            }
            self.line("}");
        } else {
            let taken = self.temp("taken");
            self.line(&format!("bool {taken} = false;"));
            for arm in &m.arms {
                let alternatives = alternatives(&arm.pat);
                if let (Some((_, guard)), true) = (&arm.guard, alternatives.len() > 1) {
                    // Rust runs the guard once per alternative that
                    // matches, until it holds (its effects repeat).
                    let ok = self.temp("guard");
                    self.line(&format!("bool {ok} = false;"));
                    for alt in alternatives {
                        let test = self.pattern_test(alt, &sv, s)?;
                        self.line(&format!("if (!{taken} && !{ok} && {test}) {{"));
                        self.indent += 1;
                        let g = self.value(guard)?;
                        self.flush_pre();
                        self.line(&format!("{ok} = {g};"));
                        self.indent -= 1;
                        self.line("}");
                    }
                    self.line(&format!("if ({ok}) {{"));
                    self.indent += 1;
                    self.line(&format!("{taken} = true;"));
                    self.arm_body(&arm.body, into)?;
                    self.indent -= 1;
                    self.line("}");
                    continue;
                }
                let test = self.pattern_test(&arm.pat, &sv, s)?;
                self.line(&format!("if (!{taken} && {test}) {{"));
                self.indent += 1;
                let closes = match &arm.guard {
                    Some((_, guard)) => {
                        let g = self.value(guard)?;
                        self.flush_pre();
                        self.line(&format!("if ({g}) {{"));
                        self.indent += 1;
                        true
                    }
                    None => false,
                };
                self.line(&format!("{taken} = true;"));
                self.arm_body(&arm.body, into)?;
                if closes {
                    self.indent -= 1;
                    self.line("}");
                }
                self.indent -= 1;
                self.line("}");
            }
        }
        self.indent -= 1;
        self.line("}");
        Ok(())
    }

    /// Declares the names pattern `p` binds, each a copy of the scrutinee.
    fn pattern_bindings(&mut self, p: &Pat, sv: &str, t: &str) {
        match p {
            Pat::Paren(inner) => self.pattern_bindings(&inner.pat, sv, t),
            Pat::Ident(pi) => {
                let id = self.infer.resolved[&key(pi)];
                if !self.infer.local_consts.contains(&id) {
                    let name = self.infer.bindings[id].cname.clone();
                    self.line(&format!("{t} {name} = {sv};"));
                    self.line(&format!("(void){name};"));
                }
            }
            _ => {}
        }
    }

    /// Whether the scrutinee `sv` (of type `s`) matches `p`, as a C++
    /// condition.
    fn pattern_test(&mut self, p: &Pat, sv: &str, s: Scalar) -> syn::Result<String> {
        Ok(match p {
            Pat::Wild(_) => "true".into(),
            Pat::Paren(inner) => self.pattern_test(&inner.pat, sv, s)?,
            Pat::Ident(pi) => {
                let id = self.infer.resolved[&key(pi)];
                match &pi.subpat {
                    _ if self.infer.local_consts.contains(&id) => {
                        format!("({sv} == {})", self.infer.bindings[id].cname)
                    }
                    Some((_, sub)) => self.pattern_test(sub, sv, s)?,
                    None => "true".into(),
                }
            }
            Pat::Or(o) => {
                let cases: Vec<String> =
                    o.cases.iter().map(|c| self.pattern_test(c, sv, s)).collect::<syn::Result<_>>()?;
                format!("({})", cases.join(" || "))
            }
            Pat::Lit(l) => format!("({sv} == {})", self.pattern_literal(&l.lit, s)?),
            Pat::Path(p) => format!("({sv} == {})", self.pattern_path(p)),
            Pat::Range(r) => {
                let mut tests = Vec::new();
                if let Some(lo) = &r.start {
                    tests.push(format!("{sv} >= {}", self.pattern_bound(lo, s)?));
                }
                if let Some(hi) = &r.end {
                    let op = if matches!(r.limits, RangeLimits::Closed(_)) { "<=" } else { "<" };
                    tests.push(format!("{sv} {op} {}", self.pattern_bound(hi, s)?));
                }
                format!("({})", tests.join(" && "))
            }
            other => return Err(error(other.span(), "unsupported pattern (checked by inference)")),
        })
    }

    fn pattern_bound(&mut self, e: &Expr, s: Scalar) -> syn::Result<String> {
        match e {
            Expr::Lit(l) => self.pattern_literal(&l.lit, s),
            Expr::Path(p) => Ok(self.pattern_path(p)),
            other => Err(error(other.span(), "unsupported pattern bound (checked by inference)")),
        }
    }

    fn pattern_path(&mut self, p: &syn::ExprPath) -> String {
        match self.infer.resolved.get(&key(p)) {
            Some(&id) => self.infer.bindings[id].cname.clone(),
            None => constant(&p.path).expect("checked by inference").1,
        }
    }

    /// An integer or `bool` literal of a pattern (negative ones included:
    /// syn reads `-1` as one literal), in the scrutinee's type.
    fn pattern_literal(&mut self, lit: &Lit, s: Scalar) -> syn::Result<String> {
        match lit {
            Lit::Bool(b) => Ok(if b.value { "true" } else { "false" }.into()),
            Lit::Int(i) => {
                let v: i128 = i.base10_parse().map_err(|_| error(i.span(), "integer literal out of range"))?;
                if v >= 0 {
                    return Ok(int_literal(v as u128, s));
                }
                let magnitude = v.unsigned_abs();
                Ok(match s {
                    // The most negative values have no positive literal.
                    Scalar::I32 if magnitude == 1 << 31 => "(-2147483647 - 1)".into(),
                    Scalar::I64 if magnitude == 1 << 63 => "(-9223372036854775807ll - 1)".into(),
                    _ => format!("(-{})", int_literal(magnitude, s)),
                })
            }
            other => Err(error(other.span(), "unsupported literal in a pattern (checked by inference)")),
        }
    }

    /// An arm's body as statements, its value (unless it diverges) into
    /// `into`.
    fn arm_body(&mut self, body: &Expr, into: Option<&str>) -> syn::Result<()> {
        match (into, body) {
            (Some(tmp), _) if !matches!(self.ty_of(body), Ty::Never) => match body {
                Expr::Block(b) => self.assign_block(&b.block, tmp),
                _ => {
                    let v = self.value(body)?;
                    self.flush_pre();
                    self.line(&format!("{tmp} = {v};"));
                    Ok(())
                }
            },
            (_, Expr::Block(b)) => self.block_body(&b.block, false),
            _ => self.statement(body),
        }
    }
}
