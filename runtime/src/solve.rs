//! Iterative solvers built from the vector operations and the operator's
//! product, so that they run wherever those do (every backend, and under
//! MPI with all-reduced dots).
//!
//! [`cg`] is the preconditioned conjugate gradient method for symmetric
//! positive definite systems, with a Jacobi (diagonal) preconditioner or
//! none. It never returns a wrong `x` silently: it stops with
//! [`Error::NotConverged`] when the iteration limit is reached, when
//! `p . Ap <= 0` or `r . z <= 0` (the matrix or the preconditioner is not
//! positive definite), or when a value is not finite; and before it
//! reports success it checks the true residual `b - A x` (not only the
//! recursively updated one), restarting from it when rounding has let the
//! two drift apart.
//!
//! [`bicgstab`] solves square systems that need not be symmetric (upwind
//! and convection-diffusion discretisations, any matrix CG refuses) with
//! the same options, report and guarantees.

use std::fmt;

use crate::decl::Dat;
use crate::error::{Error, Result};
use crate::linalg::{LinearOperator, Real};
use crate::runtime::Runtime;

mod bicgstab;
pub use bicgstab::bicgstab;

/// The preconditioner of [`cg`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Preconditioner {
    /// None: plain conjugate gradients.
    None,
    /// Jacobi: `z = r ./ diag(A)`; the diagonal must be positive.
    #[default]
    Jacobi,
}

/// What [`cg`] is asked for. It stops when `||r|| <= max(rtol ||b||, atol)`
/// (2-norms of the true residual `r = b - A x`).
///
/// ```
/// use parloop::solve::{CgOptions, Preconditioner};
/// let opts = CgOptions { rtol: 1e-10, ..CgOptions::default() };
/// assert_eq!(opts.preconditioner, Preconditioner::Jacobi);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CgOptions {
    /// Tolerance relative to `||b||` (default 1e-8), in `[0, 1)` as
    /// PETSc's.
    pub rtol: f64,
    /// Absolute tolerance on `||r||` (default 0), finite.
    pub atol: f64,
    /// Iterations at most (default 10 000); reaching it is an error.
    pub max_iterations: usize,
    /// The preconditioner (default Jacobi).
    pub preconditioner: Preconditioner,
    /// Divergence of [`cg`]: it stops with [`SolveFailure::Diverged`] once
    /// the residual exceeds this many times its initial norm (default
    /// 1e4, PETSc's `divtol`; at least 1; `f64::INFINITY` never stops).
    /// A matrix that is not SPD (not symmetric: use [`bicgstab`]) could
    /// otherwise run to `max_iterations`, its residual growing.
    /// [`bicgstab`] checks the value but does not stop on it: its residual
    /// may grow past 1e4 times the initial one on the way to a solution
    /// (an upwind convection-diffusion system did).
    pub divergence_tolerance: f64,
}

impl Default for CgOptions {
    fn default() -> CgOptions {
        CgOptions {
            rtol: 1e-8,
            atol: 0.0,
            max_iterations: 10_000,
            preconditioner: Preconditioner::Jacobi,
            divergence_tolerance: 1e4,
        }
    }
}

/// How a solve went. Two reports are equal when their solves went alike:
/// [`CgReport::iteration_seconds`], a timing, is not compared.
#[derive(Clone, Debug)]
pub struct CgReport {
    /// Iterations run (products with the matrix inside the iteration; the
    /// initial and final residual checks are not counted).
    pub iterations: usize,
    /// `||r||` (2-norm, absolute) before the first iteration and after
    /// each one, as the iteration updates it.
    pub residual_history: Vec<f64>,
    /// `||b - A x|| / ||b||` of the returned `x`, computed from `x` (0 when
    /// `b` is 0). In an error's report: the true residual's when the
    /// iterations ran out or stagnated, else the last updated residual
    /// over `||b||`.
    pub relative_residual: f64,
    /// `||b||`.
    pub rhs_norm: f64,
    /// Whether the tolerance was met (always, in an `Ok` report).
    pub converged: bool,
    /// Times the iteration restarted from the true residual because the
    /// updated one had drifted below the tolerance without it.
    pub restarts: usize,
    /// Wall seconds in the iterations: their products, vector updates and
    /// the host's reads of their sums, not the set-up before (work
    /// vectors, the preconditioner, the first residual) or the true
    /// residuals at a restart and at the end. `iteration_seconds / iterations` is the time an iteration
    /// takes, on a device too (each iteration waits for its sums).
    pub iteration_seconds: f64,
}

impl PartialEq for CgReport {
    fn eq(&self, other: &CgReport) -> bool {
        // Exhaustive, so that a new field is compared or left out here on purpose.
        let CgReport {
            iterations,
            residual_history,
            relative_residual,
            rhs_norm,
            converged,
            restarts,
            iteration_seconds: _,
        } = self;
        *iterations == other.iterations
            && *residual_history == other.residual_history
            && *relative_residual == other.relative_residual
            && *rhs_norm == other.rhs_norm
            && *converged == other.converged
            && *restarts == other.restarts
    }
}

/// Why [`cg`] or [`bicgstab`] stopped without a solution (in
/// [`Error::NotConverged`]).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum SolveFailure {
    /// The iteration limit was reached first.
    MaxIterations {
        /// The limit.
        max_iterations: usize,
    },
    /// A quantity that is positive for an SPD matrix (and an SPD
    /// preconditioner) was not: `p . Ap` (the matrix is not positive
    /// definite, or singular with `b` outside its range) or `r . z` (the
    /// preconditioner is not).
    Breakdown {
        /// "p . Ap" or "r . z".
        quantity: &'static str,
        /// Its value.
        value: f64,
    },
    /// The residual grew past [`CgOptions::divergence_tolerance`] times its
    /// initial norm.
    Diverged {
        /// `||r||` then (as the iteration updates it).
        residual: f64,
        /// `||r||` before the first iteration.
        initial: f64,
        /// Iterations run.
        iterations: usize,
    },
    /// A quantity was NaN or infinite (a NaN or infinity in the matrix, `b`
    /// or `x`).
    NotFinite {
        /// Which ("||b||", "||r||", "p . Ap", "r . z"; BiCGStab's
        /// "r0 . r", "r0 . Ap", "t . s", "t . t").
        quantity: &'static str,
        /// Its value.
        value: f64,
    },
    /// The true residual stopped decreasing: at a restart (the updated
    /// residual met the tolerance, the true one did not) it was no smaller
    /// than at the restart before, or it drifted again at once. The
    /// tolerance is below what the precision reaches (f32, say, or an
    /// ill-conditioned matrix): loosen it or solve in higher precision.
    Stagnated {
        /// Restarts made.
        restarts: usize,
        /// `||b - A x||` at the last one.
        true_residual: f64,
        /// `||b||`: a true residual of its order means no progress at all,
        /// which no precision floor explains (the message says so).
        rhs_norm: f64,
    },
    /// `||b||` is so small or large that the squares the iteration forms
    /// (`r . r`, `p . Ap`) leave the type's range (below `MIN_POSITIVE /
    /// EPSILON` or above `MAX`): scale `b` (and the guess) by a power of two
    /// and the solution back.
    OutOfRange {
        /// `||b||`.
        rhs_norm: f64,
    },
    /// The Jacobi preconditioner met a diagonal entry that is not positive
    /// (an SPD matrix has none).
    BadDiagonal {
        /// The scalar row (entity x dim + component), the entity numbered
        /// as declared (under MPI its global number, not this rank's).
        row: usize,
        /// The entry.
        value: f64,
    },
    /// [`bicgstab`]'s iteration cannot go on: a quantity it divides by
    /// (`r0 . r`, `r0 . Ap`, `omega`) vanished right after it restarted
    /// from the true residual. The matrix is singular with `b` outside its
    /// range, or the method fails on it (rare): try another preconditioner.
    Vanished {
        /// Which quantity.
        quantity: &'static str,
    },
    /// The Jacobi preconditioner met a diagonal entry it cannot divide by:
    /// zero, not finite, or so small that its reciprocal overflows.
    SingularDiagonal {
        /// The scalar row, numbered as in [`SolveFailure::BadDiagonal`].
        row: usize,
        /// The entry.
        value: f64,
    },
}

impl SolveFailure {
    /// [`SolveFailure::Stagnated`] at `true_residual`, with the restarts
    /// and `||b||` from the solve's report.
    pub(crate) fn stagnated(report: &CgReport, true_residual: f64) -> Self {
        SolveFailure::Stagnated { restarts: report.restarts, true_residual, rhs_norm: report.rhs_norm }
    }
}

impl fmt::Display for SolveFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SolveFailure::MaxIterations { max_iterations } => write!(
                f,
                "the tolerance was not met within max_iterations = {max_iterations} (if the residual grew: \
                 the matrix is not SPD; one with `zero_rows` is SPD for CG only when x starts at \
                 b / diagonal on those rows)"
            ),
            SolveFailure::Diverged { residual, initial, iterations } => write!(
                f,
                "diverged: the residual grew to {residual:e} after {iterations} iterations, {:.1e} times its \
                 initial {initial:e} (past CgOptions::divergence_tolerance): the matrix is not symmetric \
                 positive definite (for a nonsymmetric one, use bicgstab), or it is singular with b outside its \
                 range (a stiffness matrix without a Dirichlet condition, say)",
                residual / initial
            ),
            SolveFailure::Breakdown { quantity, value } => write!(
                f,
                "breakdown: {quantity} = {value:e} <= 0 (the {})",
                if *quantity == "r . z" {
                    "preconditioner is not symmetric positive definite"
                } else {
                    "matrix is not symmetric positive definite, or it is singular with b outside its range: \
                     a stiffness matrix without a Dirichlet condition, say"
                }
            ),
            SolveFailure::NotFinite { quantity, value } => write!(f, "{quantity} = {value} is not finite"),
            SolveFailure::Stagnated { restarts, true_residual, rhs_norm } => {
                let relative = true_residual / rhs_norm;
                write!(
                    f,
                    "the true residual ||b - A x|| stopped decreasing at {true_residual:e} ({relative:.2e} of ||b||) \
                     after {restarts} restarts, while the updated residual met the tolerance: "
                )?;
                // A precision floor of a tenth of ||b|| would take a
                // condition number near 1/eps: far likelier, the system has
                // no solution (the updated residual then drifts from the
                // true one at once).
                if relative > 0.1 || relative.is_nan() {
                    write!(
                        f,
                        "so little progress means the matrix is most likely singular with b outside its range \
                         (a stiffness matrix without a Dirichlet condition, say) or not symmetric positive \
                         definite; were it SPD and only ill-conditioned, the tolerance would be below what this \
                         precision reaches"
                    )
                } else {
                    write!(
                        f,
                        "the tolerance is below what this precision reaches (loosen rtol/atol or solve in higher \
                         precision)"
                    )
                }
            }
            SolveFailure::OutOfRange { rhs_norm } => write!(
                f,
                "||b|| = {rhs_norm:e}: its square leaves the precision's range, where the iteration's sums of \
                 squares would under- or overflow; scale b (and x) by a power of two, and the solution back"
            ),
            SolveFailure::BadDiagonal { row, value } => {
                write!(f, "Jacobi: diagonal entry of row {row} is {value:e}, not positive (the matrix is not SPD)")
            }
            SolveFailure::Vanished { quantity } => write!(
                f,
                "breakdown: {quantity} vanished right after a restart from the true residual (the matrix \
                 is singular with b outside its range, or the method fails on it: try another preconditioner)"
            ),
            SolveFailure::SingularDiagonal { row, value } => write!(
                f,
                "Jacobi: diagonal entry of row {row} is {value:e}, which it cannot divide by (zero, not finite, \
                 or too small to invert): solve without a preconditioner, or reorder the unknowns"
            ),
        }
    }
}

/// Solves `A x = b` for symmetric positive definite `A` by preconditioned
/// conjugate gradients, from the `x` given (the initial guess). `b` lives
/// on the operator's row set, `x` on its column set (one set and dim: the
/// operator is square).
///
/// Per iteration, two vector passes and a product: the new direction
/// `p = z + beta p` (with `z = r ./ diag(A)` computed on the fly when
/// preconditioned, never stored); `q = A p` with `p . q` added up in the
/// product's pass ([`LinearOperator::apply_dot`]); and one pass for
/// `x += alpha p`, `r -= alpha q` and the new `r . z` and `r . r`. Each
/// pass computes what the separate operations would, in the same order;
/// only `p . q` groups its additions as the product's rows do.
///
/// ```
/// use parloop::linalg::LinearOperator;
/// use parloop::solve::{cg, CgOptions, Preconditioner};
/// use parloop::{Dat, Result, Runtime, Set};
///
/// /// diag(1, 2, 3, 4), without a matrix.
/// struct D(Set, Dat<f64>);
/// impl LinearOperator<f64> for D {
///     fn name(&self) -> &str { "D" }
///     fn row_set(&self) -> &Set { &self.0 }
///     fn col_set(&self) -> &Set { &self.0 }
///     fn row_dim(&self) -> usize { 1 }
///     fn col_dim(&self) -> usize { 1 }
///     fn apply(&self, rt: &Runtime, x: &Dat<f64>, y: &Dat<f64>) -> Result<()> { rt.pointwise_mult(y, &self.1, x) }
///     fn diagonal(&self, rt: &Runtime, d: &Dat<f64>) -> Result<()> { rt.copy_from(d, &self.1) }
/// }
/// let rt = Runtime::with_backend(parloop::Backend::Seq)?;
/// let s = rt.set("s", 4)?;
/// let a = D(s.clone(), rt.dat("d", &s, 1, vec![1.0, 2.0, 3.0, 4.0])?);
/// let b = rt.dat("b", &s, 1, vec![1.0; 4])?;
/// let x = rt.dat("x", &s, 1, vec![0.0; 4])?;
/// let opts = CgOptions { rtol: 1e-12, preconditioner: Preconditioner::None, ..CgOptions::default() };
/// let report = cg(&rt, &a, &b, &x, &opts)?;
/// assert!(report.converged && report.iterations <= 4);
/// assert!((x.values()?[3] - 0.25).abs() < 1e-12);
/// # Ok::<(), parloop::Error>(())
/// ```
pub fn cg<T: Real, A: LinearOperator<T> + ?Sized>(
    rt: &Runtime,
    a: &A,
    b: &Dat<T>,
    x: &Dat<T>,
    opts: &CgOptions,
) -> Result<CgReport> {
    let name = a.name().to_string();
    let roles: &[&str] = match opts.preconditioner {
        Preconditioner::None => &["r", "p", "q"],
        // 1 ./ diag(A); z = r .* dinv is computed where it is used, not stored.
        Preconditioner::Jacobi => &["r", "p", "q", "dinv"],
    };
    let (mut work, _agreed) = prepare("cg", rt, a, b, x, opts, roles)?;
    let (r, p, q) = (work.take(), work.take(), work.take());
    let dinv = match work.rest() {
        None => None,
        Some(d) => Some(jacobi_inverse("cg", true, rt, a, d, &name)?),
    };
    let dinv = dinv.as_ref();

    let (mut report, tol) = match start(rt, "cg", &name, b, x, opts)? {
        Start::Solved(report) => return Ok(report),
        Start::Iterate(report, tol) => (report, tol),
    };
    let fail = |failure, report, rnorm| stopped("cg", &name, failure, report, rnorm);

    // r = b - A x, then the search direction from it; again after a drift.
    let residual = |r: &Dat<T>| -> Result<f64> {
        a.apply(rt, x, &q)?;
        rt.copy_from(r, b)?;
        rt.axpy(-T::ONE, &q, r)?;
        Ok(rt.norm2(r)?.to_f64())
    };

    let mut rnorm = residual(&r)?;
    report.residual_history.push(rnorm);
    let (mut rz_new, _) = rt.cg_sums(&r, dinv)?;
    let mut rz = T::ZERO;
    let mut fresh = true; // p is to be (re)built from z alone
    let mut restart_norm = f64::INFINITY; // the true residual at the last restart
    loop {
        if !rnorm.is_finite() {
            return Err(fail(SolveFailure::NotFinite { quantity: "||r||", value: rnorm }, report, rnorm));
        }
        if rnorm <= tol {
            // Converged as the iteration sees it: confirm with the true
            // residual (one product), restart from it if the two drifted.
            let true_norm = residual(&r)?;
            if true_norm <= tol {
                report.relative_residual = true_norm / report.rhs_norm;
                report.converged = true;
                return Ok(report);
            }
            if !true_norm.is_finite() {
                return Err(fail(SolveFailure::NotFinite { quantity: "||r||", value: true_norm }, report, true_norm));
            }
            // Drifted again right after a restart, or no nearer than at
            // the last restart: the tolerance is below what this
            // precision reaches; stop rather than restart until the
            // iteration limit.
            if report.restarts > 0 && (fresh || true_norm >= restart_norm) {
                let failure = SolveFailure::stagnated(&report, true_norm);
                return Err(fail(failure, report, true_norm));
            }
            restart_norm = true_norm;
            report.restarts += 1;
            rnorm = true_norm;
            rz_new = rt.cg_sums(&r, dinv)?.0;
            fresh = true;
            continue;
        }
        if report.iterations >= opts.max_iterations {
            let true_norm = residual(&r)?;
            let failure = out_of_iterations(opts, &report, rnorm, true_norm);
            return Err(fail(failure, report, true_norm));
        }
        if let Some(failure) = diverged(opts, &report, rnorm) {
            return Err(fail(failure, report, rnorm));
        }
        let rz_f = rz_new.to_f64();
        if !rz_f.is_finite() {
            return Err(fail(SolveFailure::NotFinite { quantity: "r . z", value: rz_f }, report, rnorm));
        }
        // A square that underflowed to 0 (the residual near the bottom of
        // the range: a tolerance of 0, say) is stagnation, not a matrix
        // that is not SPD.
        let underflowed = |v: f64| v == 0.0 && rnorm * rnorm < T::MIN_POSITIVE / T::EPSILON;
        if underflowed(rz_f) {
            let failure = SolveFailure::stagnated(&report, rnorm);
            return Err(fail(failure, report, rnorm));
        }
        if rz_f <= 0.0 {
            return Err(fail(SolveFailure::Breakdown { quantity: "r . z", value: rz_f }, report, rnorm));
        }
        let started = std::time::Instant::now();
        // p = z + beta p (p = z after a (re)start).
        let beta = if fresh { None } else { Some(rz_new / rz) };
        rt.cg_direction(&r, dinv, beta, &p)?;
        fresh = false;
        rz = rz_new;
        // q = A p and p . q in one pass; alpha = r . z / p . q.
        let pq = a.apply_dot(rt, &p, &q)?;
        let pq_f = pq.to_f64();
        if !pq_f.is_finite() {
            return Err(fail(SolveFailure::NotFinite { quantity: "p . Ap", value: pq_f }, report, rnorm));
        }
        if underflowed(pq_f) {
            let failure = SolveFailure::stagnated(&report, rnorm);
            return Err(fail(failure, report, rnorm));
        }
        if pq_f <= 0.0 {
            return Err(fail(SolveFailure::Breakdown { quantity: "p . Ap", value: pq_f }, report, rnorm));
        }
        let alpha = rz / pq;
        // x += alpha p, r -= alpha q, and the new (r . z, r . r): one pass.
        let (rz_next, rr) = rt.cg_update(alpha, &p, &q, x, &r, dinv)?;
        rz_new = rz_next;
        rnorm = rr.to_f64().sqrt();
        report.iteration_seconds += started.elapsed().as_secs_f64();
        report.iterations += 1;
        report.residual_history.push(rnorm);
    }
}

impl CgReport {
    /// A solve's report before its first iteration.
    fn starting(rhs_norm: f64) -> CgReport {
        CgReport {
            iterations: 0,
            residual_history: Vec::new(),
            relative_residual: 0.0,
            rhs_norm,
            converged: false,
            restarts: 0,
            iteration_seconds: 0.0,
        }
    }
}

/// How a solve goes on after [`start`].
pub(crate) enum Start {
    /// `b = 0`: solved by `x = 0` (the report says so).
    Solved(CgReport),
    /// Iterate to the absolute tolerance given, from this report.
    Iterate(CgReport, f64),
}

/// What every solver does with `b` before it iterates: `||b||` must be
/// finite; `b = 0` is solved by `x = 0` whatever the guess (the only
/// solution for a nonsingular `A`; `norm2` is 0 only for a zero `b`, it
/// does not underflow); a `b` whose square leaves the type's range is
/// refused with the remedy (the iterations form squares of residuals,
/// `r . r`, `p . Ap`, which would underflow to a false convergence or
/// overflow). The tolerance is `max(rtol ||b||, atol)`.
pub(crate) fn start<T: Real>(
    rt: &Runtime,
    solver: &'static str,
    matrix: &str,
    b: &Dat<T>,
    x: &Dat<T>,
    opts: &CgOptions,
) -> Result<Start> {
    let bnorm = rt.norm2(b)?.to_f64();
    let mut report = CgReport::starting(bnorm);
    if !bnorm.is_finite() {
        let failure = SolveFailure::NotFinite { quantity: "||b||", value: bnorm };
        return Err(stopped(solver, matrix, failure, report, f64::NAN));
    }
    if bnorm == 0.0 {
        rt.fill(x, T::ZERO)?;
        report.residual_history.push(0.0);
        report.converged = true;
        return Ok(Start::Solved(report));
    }
    let square = bnorm * bnorm;
    if square < T::MIN_POSITIVE / T::EPSILON || square > T::MAX {
        return Err(stopped(solver, matrix, SolveFailure::OutOfRange { rhs_norm: bnorm }, report, f64::NAN));
    }
    Ok(Start::Iterate(report, (opts.rtol * bnorm).max(opts.atol)))
}

/// The error of a solve that stopped without a solution: its report with
/// the relative residual of `rnorm` (absolute when `||b||` is 0).
pub(crate) fn stopped(
    solver: &'static str,
    matrix: &str,
    failure: SolveFailure,
    mut report: CgReport,
    rnorm: f64,
) -> Error {
    report.relative_residual = if report.rhs_norm > 0.0 { rnorm / report.rhs_norm } else { rnorm };
    Error::NotConverged { solver, matrix: matrix.into(), failure, report: Box::new(report) }
}

/// [`SolveFailure::Diverged`] when `rnorm` is past the divergence
/// tolerance times the initial residual.
fn diverged(opts: &CgOptions, report: &CgReport, rnorm: f64) -> Option<SolveFailure> {
    let initial = *report.residual_history.first()?;
    (rnorm > opts.divergence_tolerance * initial).then_some(SolveFailure::Diverged {
        residual: rnorm,
        initial,
        iterations: report.iterations,
    })
}

/// Why a solve that ran out of iterations stopped, from its updated
/// residual `rnorm` and the true one: reported with the true residual,
/// since the updated one can have fallen far below what the precision
/// reaches (a tolerance of 0 reported "relative residual 3.8e-72" and a
/// hint about matrices that are not SPD); when it has, the tolerance is
/// what is wrong ([`SolveFailure::Stagnated`]).
pub(crate) fn out_of_iterations(opts: &CgOptions, report: &CgReport, rnorm: f64, true_norm: f64) -> SolveFailure {
    if true_norm.is_finite() && rnorm < 1e-3 * true_norm {
        SolveFailure::stagnated(report, true_norm)
    } else {
        SolveFailure::MaxIterations { max_iterations: opts.max_iterations }
    }
}

/// A solver's work vectors, taken in the order of its roles.
pub(crate) struct Work<T: Real>(std::vec::IntoIter<Dat<T>>);

impl<T: Real> Work<T> {
    /// The next role's vector.
    pub(crate) fn take(&mut self) -> Dat<T> {
        self.0.next().expect("one work vector per role")
    }

    /// The next role's vector, if the solver has one more role.
    pub(crate) fn rest(mut self) -> Option<Dat<T>> {
        self.0.next()
    }
}

/// Every solver's entry: its argument checks on this rank and its work
/// vectors (one per role, [`check_system`]), agreed across the ranks with
/// the options (a rank that refused, or stopped at another iteration
/// count, would leave the others waiting in a collective). While the
/// returned guard lives, what the iteration calls (alike on every rank)
/// does not agree again.
pub(crate) fn prepare<T: Real, A: LinearOperator<T> + ?Sized>(
    solver: &str,
    rt: &Runtime,
    a: &A,
    b: &Dat<T>,
    x: &Dat<T>,
    opts: &CgOptions,
    roles: &[&str],
) -> Result<(Work<T>, crate::decl::ChecksAgreed)> {
    // Numbered before the checks, so that a rank whose checks fail keeps
    // the internal names' count the others keep (`PARLOOP_CHECK_RANKS`
    // compares loops by their data's names).
    let n = rt.names.number();
    let checked = check_system(solver, rt, a, b, x, opts, n, roles);
    let args = format!(
        "rtol {:e}, atol {:e}, max_iterations {}, preconditioner {:?}, divergence_tolerance {:e}",
        opts.rtol, opts.atol, opts.max_iterations, opts.preconditioner, opts.divergence_tolerance
    );
    let sets = [a.row_set(), b.set(), x.set()];
    let what = format!("{solver} on matrix `{}`", a.name());
    let work = crate::Set::agreed_among(sets, &what, checked, &args)?;
    Ok((Work(work.into_iter()), crate::decl::ChecksAgreed::enter()))
}

/// The argument checks every solver makes on this rank (a square operator
/// on one set, `b` and `x` on it and distinct, sound tolerances), then its
/// work vectors, one per role, named `<solver>#<n>:<role>`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_system<T: Real, A: LinearOperator<T> + ?Sized>(
    solver: &str,
    rt: &Runtime,
    a: &A,
    b: &Dat<T>,
    x: &Dat<T>,
    opts: &CgOptions,
    n: u64,
    roles: &[&str],
) -> Result<Vec<Dat<T>>> {
    let name = a.name();
    let op = || format!("{solver} on matrix `{name}`");
    if a.row_set() != a.col_set() || a.row_dim() != a.col_dim() {
        return Err(Error::Incompatible {
            op: op(),
            reason: format!(
                "the matrix maps set `{}` (dim {}) to set `{}` (dim {}); {solver} needs a square one on one set",
                a.col_set().name(),
                a.col_dim(),
                a.row_set().name(),
                a.row_dim()
            ),
        });
    }
    let most = crate::linalg::MAX_VECTOR_DIM;
    if a.row_dim() > most {
        return Err(Error::Incompatible {
            op: op(),
            reason: format!(
                "its blocks are {d} x {d} (dim {d}); the solvers' vector operations support dims 1 to {most}",
                d = a.row_dim()
            ),
        });
    }
    crate::linalg::spmv::check_dat(solver, name, "b", b, a.row_set(), a.row_dim())?;
    crate::linalg::spmv::check_dat(solver, name, "x", x, a.col_set(), a.col_dim())?;
    if x.id() == b.id() {
        return Err(Error::Incompatible {
            op: op(),
            reason: format!("x and b are both dat `{}`; the solution needs a dat of its own", x.name()),
        });
    }
    // rtol in [0, 1), as PETSc's KSP asks, since from x = 0 the residual
    // is ||b|| and a larger rtol is met before any iteration (an `inf` or
    // a misplaced factor then reports convergence at once); atol finite,
    // for the same reason.
    // Below 1 the first iteration's residual could stop a sound solve.
    if opts.divergence_tolerance.is_nan() || opts.divergence_tolerance < 1.0 {
        return Err(Error::Incompatible {
            op: op(),
            reason: format!(
                "divergence_tolerance must be at least 1 (f64::INFINITY for none), got {}",
                opts.divergence_tolerance
            ),
        });
    }
    if !((0.0..1.0).contains(&opts.rtol) && opts.atol >= 0.0 && opts.atol.is_finite()) {
        return Err(Error::Incompatible {
            op: op(),
            reason: format!(
                "rtol must be at least 0 and below 1 and atol a finite non-negative number, \
                 got rtol {} and atol {} (a tolerance met before any iteration solves nothing)",
                opts.rtol, opts.atol
            ),
        });
    }

    let len = b.set().total() * b.dim();
    roles
        .iter()
        .map(|role| {
            let name = format!("{solver}#{n}:{role}");
            let zeros = crate::fallible::filled(len, T::ZERO, || {
                format!("{solver} on matrix `{}`: work vector `{name}`", a.name())
            })?;
            rt.internal_dat(&name, b.set(), b.dim(), zeros)
        })
        .collect()
}

/// `1 ./ diag(A)` into `dinv`, or an error naming the first diagonal entry
/// that Jacobi cannot use: one that is not positive where `solver` needs
/// an SPD matrix (`spd`), else one whose reciprocal is not finite (zero,
/// not finite, or too small to invert in `T`).
pub(crate) fn jacobi_inverse<T: Real, A: LinearOperator<T> + ?Sized>(
    solver: &'static str,
    spd: bool,
    rt: &Runtime,
    a: &A,
    dinv: Dat<T>,
    name: &str,
) -> Result<Dat<T>> {
    let owned = dinv.set().size() * dinv.dim();
    // A failure of the diagonal itself (a user operator's) is agreed too.
    let bad = a.diagonal(rt, &dinv).and_then(|()| {
        dinv.with_own_values(|d| {
            let dim = dinv.dim();
            d[..owned].iter().enumerate().find_map(|(i, &v)| {
                let row = || dinv.set().declared_entity(i / dim) * dim + i % dim;
                let value = v.to_f64();
                if spd && !(value > 0.0 && value.is_finite()) {
                    Some(SolveFailure::BadDiagonal { row: row(), value })
                } else if !(T::ONE / v).to_f64().is_finite() || !value.is_finite() {
                    Some(SolveFailure::SingularDiagonal { row: row(), value })
                } else {
                    None
                }
            })
        })
    });
    let checked = bad.and_then(|bad| match bad {
        None => Ok(()),
        Some(failure) => {
            // Stopped before iterating: no residual yet (`progress` says nothing).
            let report = CgReport { relative_residual: f64::NAN, ..CgReport::starting(f64::NAN) };
            Err(Error::NotConverged { solver, matrix: name.into(), failure, report: Box::new(report) })
        }
    });
    // A bad diagonal entry is in one rank's rows: agreed, so that the
    // other ranks do not start iterating and wait for it in the first dot
    // (theirs say that another rank failed).
    dinv.set().agreed_data(&format!("{solver} on matrix `{name}`: the Jacobi preconditioner"), checked, "")?;
    // dinv = 1 ./ d, in place (`pointwise_divide` with w = y).
    let ones_name = format!("{}:ones", dinv.name());
    let len = dinv.set().total() * dinv.dim();
    let ones = crate::fallible::filled(len, T::ONE, || format!("{solver} on matrix `{name}`: `{ones_name}`"))?;
    let ones = rt.internal_dat(&ones_name, dinv.set(), dinv.dim(), ones)?;
    rt.pointwise_divide(&dinv, &ones, &dinv)?;
    Ok(dinv)
}

/// The "(after N iterations, ...)" of [`Error::NotConverged`]'s message;
/// nothing when the solver stopped before it iterated and has no
/// residual (a bad Jacobi diagonal).
pub(crate) fn progress(report: &CgReport) -> String {
    if report.iterations == 0 && report.relative_residual.is_nan() {
        return String::new();
    }
    format!(" (after {} iterations, relative residual {:e})", report.iterations, report.relative_residual)
}

#[cfg(test)]
mod tests {
    use super::SolveFailure;

    /// A true residual of the order of ||b|| is no precision floor: the
    /// message called it one ("loosen rtol/atol") when CG on a singular
    /// P1 stiffness matrix (b outside its range) stagnated at 6.3 ||b||
    /// on the emulated device, where the host backends broke down.
    #[test]
    fn stagnation_far_above_any_precision_floor_is_called_singular() {
        let no_progress = SolveFailure::Stagnated { restarts: 1, true_residual: 6.29, rhs_norm: 1.0 }.to_string();
        assert!(no_progress.contains("singular") && !no_progress.contains("loosen"), "{no_progress}");
        assert!(no_progress.contains("6.29e0 of ||b||"), "{no_progress}");
        let floor = SolveFailure::Stagnated { restarts: 3, true_residual: 2e-6, rhs_norm: 4.0 }.to_string();
        assert!(floor.contains("loosen") && !floor.contains("singular"), "{floor}");
    }
}
