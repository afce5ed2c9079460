//! Pieces of the kernel subset's Rust syntax that both passes read the same
//! way: scalar and array types, compound assignment operators and the
//! iterator of a `for` loop.
//!
//! Separate so that inference (which rejects what does not parse) and
//! emission (which parses again, knowing it succeeds) share one reading.

use syn::spanned::Spanned;
use syn::{BinOp, Expr, ExprLit, Lit, Type};

use crate::types::{error, Scalar};

pub(super) fn scalar_of_type(ty: &Type) -> syn::Result<Scalar> {
    if let Type::Path(p) = ty {
        if p.qself.is_none() && p.path.segments.len() == 1 {
            if let Some(s) = Scalar::from_name(&p.path.segments[0].ident.to_string()) {
                return Ok(s);
            }
        }
    }
    Err(error(ty.span(), "expected a scalar type: f64, f32, i32, u32, i64, u64, usize or bool"))
}

pub(super) fn array_len(e: &Expr) -> syn::Result<usize> {
    if let Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) = e {
        return i.base10_parse::<usize>().map_err(|_| error(e.span(), "array length must be a small integer"));
    }
    Err(error(
        e.span(),
        "array lengths in kernels must be integer literals (the translation cannot see a constant's value: write the number)",
    ))
}

/// Whether `op` is a compound assignment (`+=`, `<<=`, ...).
pub(super) fn is_compound(op: &BinOp) -> bool {
    use BinOp::*;
    matches!(
        op,
        AddAssign(_)
            | SubAssign(_)
            | MulAssign(_)
            | DivAssign(_)
            | RemAssign(_)
            | BitAndAssign(_)
            | BitOrAssign(_)
            | BitXorAssign(_)
            | ShlAssign(_)
            | ShrAssign(_)
    )
}

/// A `for` loop's iterator: `a..b`, `a..=b`, with `.rev()` and `.step_by(k)`.
pub(super) struct LoopRange<'a> {
    pub(super) start: &'a Expr,
    pub(super) end: &'a Expr,
    pub(super) inclusive: bool,
    pub(super) rev: bool,
    pub(super) step: Option<&'a Expr>,
}

impl<'a> LoopRange<'a> {
    pub(super) fn parse(e: &'a Expr) -> syn::Result<LoopRange<'a>> {
        let unsupported = || {
            error(
                e.span(),
                "`for` loops iterate over integer ranges (`a..b`, `a..=b`, `(a..b).rev()`, `(a..b).step_by(k)`) \
                 or over arrays (`a.iter()`, `a.iter_mut()`, `&a`, `a`, `.copied()`, then `.zip(b.iter())`, \
                 `.enumerate()`, `.rev()` in that order, with `x`, `&x`, `_` or tuple patterns)",
            )
        };
        match e {
            Expr::Paren(p) => LoopRange::parse(&p.expr),
            Expr::Group(g) => LoopRange::parse(&g.expr),
            Expr::Range(r) => {
                let (Some(start), Some(end)) = (&r.start, &r.end) else {
                    return Err(unsupported());
                };
                Ok(LoopRange {
                    start,
                    end,
                    inclusive: matches!(r.limits, syn::RangeLimits::Closed(_)),
                    rev: false,
                    step: None,
                })
            }
            Expr::MethodCall(m) => {
                let mut inner = LoopRange::parse(&m.receiver)?;
                match (m.method.to_string().as_str(), m.args.len()) {
                    ("rev", 0) if !inner.rev && inner.step.is_none() => inner.rev = true,
                    ("rev", 0) if !inner.rev => {
                        return Err(error(
                            m.method.span(),
                            "`.step_by(k).rev()` is not supported in kernels (it counts down from the last value the \
                             step reaches, not from the range's end); `.rev().step_by(k)` is (down from the end by \
                             `k`): or loop over the step numbers, `for j in (0..count).rev() { let i = a + j * k; .. }`",
                        ))
                    }
                    ("step_by", 1) if inner.step.is_none() => inner.step = Some(&m.args[0]),
                    _ => return Err(unsupported()),
                }
                Ok(inner)
            }
            _ => Err(unsupported()),
        }
    }
}

/// Every identifier a syntax tree mentions (`visit_item_fn`, `visit_expr`,
/// ...): the rewrites before the passes name their temporaries outside it,
/// so that no generated name can capture or shadow a user's.
pub(crate) struct Idents(pub(crate) std::collections::HashSet<String>);

impl Idents {
    pub(crate) fn new() -> Idents {
        Idents(std::collections::HashSet::new())
    }
}

impl<'ast> syn::visit::Visit<'ast> for Idents {
    fn visit_ident(&mut self, i: &'ast proc_macro2::Ident) {
        self.0.insert(i.to_string());
    }
}
