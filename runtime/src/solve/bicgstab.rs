//! BiCGStab (van der Vorst, 1992) for square systems that need not be
//! symmetric: convection-diffusion, upwind schemes, any matrix CG refuses.
//! Right-preconditioned (`A M^-1 u = b`, `x = M^-1 u`), so that the
//! residual it watches is the true one's recursive twin, not a
//! preconditioned one, and the tolerance means what it means for [`cg`].
//!
//! Built from the runtime's vector operations and the operator's product,
//! as [`cg`] is: every backend, and under MPI with all-reduced dots. Not
//! fused into fewer passes as CG's iteration is; per iteration it makes
//! two products, four dots and a norm (one all-reduce each) and about ten
//! vector passes.
//!
//! [`cg`]: super::cg

use crate::decl::Dat;
use crate::error::Result;
use crate::linalg::{LinearOperator, Real};
use crate::runtime::Runtime;

use super::{jacobi_inverse, prepare, start, stopped, CgOptions, CgReport, Preconditioner, SolveFailure, Start};

const SOLVER: &str = "bicgstab";

/// The right preconditioner `M^-1 = diag(A)^-1` (`dinv`), and where
/// `M^-1 p` and `M^-1 s` go.
struct Jacobi<T: Real> {
    phat: Dat<T>,
    shat: Dat<T>,
    dinv: Dat<T>,
}

/// Solves `A x = b` for a square nonsingular `A` (symmetric or not) by the
/// stabilised biconjugate gradient method, from the `x` given. Options,
/// report and errors are [`cg`](super::cg)'s: it stops when
/// `||b - A x|| <= max(rtol ||b||, atol)`, confirmed on the true residual
/// before it reports success; the Jacobi preconditioner needs diagonal
/// entries it can divide by (of either sign).
///
/// When a quantity the iteration divides by vanishes (the shadow residual
/// `r0` orthogonal to `r` or to `A p`, or `A s = 0`) it restarts from the
/// true residual with `r0 = r`; a breakdown right after a restart is
/// [`SolveFailure::Vanished`] (a singular matrix with `b` outside its
/// range, typically), never a wrong `x` reported as a solution.
///
/// ```
/// use parloop::solve::{bicgstab, CgOptions};
/// use parloop::{Access, Backend, Runtime};
///
/// /// An upwind difference on a chain: u_i - u_{i-1} on each edge (i-1, i),
/// /// added to the row of its downstream node: not symmetric.
/// #[parloop::kernel]
/// fn upwind(a: &mut [[f64; 2]; 2]) {
///     a[1][1] += 1.0;
///     a[1][0] -= 1.0;
/// }
/// #[parloop::kernel]
/// fn one(a: &mut [[f64; 1]; 1]) {
///     a[0][0] += 1.0;
/// }
///
/// let rt = Runtime::with_backend(Backend::Seq)?;
/// let n = 5;
/// let nodes = rt.set("nodes", n)?;
/// let edges = rt.set("edges", n - 1)?;
/// let ends: Vec<i32> = (0..n as i32 - 1).flat_map(|e| [e, e + 1]).collect();
/// let e2n = rt.map("e2n", &edges, &nodes, 2, ends)?;
/// let first = rt.set("first", 1)?;
/// let f2n = rt.map("f2n", &first, &nodes, 1, vec![0])?;
/// let sparsity = rt.sparsity("s", &[(&e2n, &e2n), (&f2n, &f2n)], (1, 1))?;
/// let a = rt.mat::<f64>("A", &sparsity)?;
/// rt.par_loop(upwind::KERNEL, &edges, &[a.arg(&e2n, &e2n, Access::INC)])?;
/// rt.par_loop(one::KERNEL, &first, &[a.arg(&f2n, &f2n, Access::INC)])?;
/// // (A u)_i = u_i - u_{i-1}, u_0 = 1: the solution of A u = (1, 0, ...) is all ones.
/// let b = rt.dat("b", &nodes, 1, vec![1.0, 0.0, 0.0, 0.0, 0.0])?;
/// let u = rt.dat("u", &nodes, 1, vec![0.0; n])?;
/// let report = bicgstab(&rt, &a, &b, &u, &CgOptions { rtol: 1e-12, ..CgOptions::default() })?;
/// assert!(report.converged);
/// assert!(u.values()?.iter().all(|v| (v - 1.0).abs() < 1e-10));
/// # Ok::<(), parloop::Error>(())
/// ```
pub fn bicgstab<T: Real, A: LinearOperator<T> + ?Sized>(
    rt: &Runtime,
    a: &A,
    b: &Dat<T>,
    x: &Dat<T>,
    opts: &CgOptions,
) -> Result<CgReport> {
    let name = a.name().to_string();
    let roles: &[&str] = match opts.preconditioner {
        Preconditioner::None => &["r", "r0", "p", "v", "s", "t"],
        Preconditioner::Jacobi => &["r", "r0", "p", "v", "s", "t", "phat", "shat", "dinv"],
    };
    let (mut work, _agreed) = prepare(SOLVER, rt, a, b, x, opts, roles)?;
    let (r, r0, p, v, s, t) = (work.take(), work.take(), work.take(), work.take(), work.take(), work.take());
    let jacobi = match opts.preconditioner {
        Preconditioner::None => None,
        Preconditioner::Jacobi => {
            let (phat, shat, dinv) = (work.take(), work.take(), work.take());
            Some(Jacobi { phat, shat, dinv: jacobi_inverse(SOLVER, false, rt, a, dinv, &name)? })
        }
    };
    // M^-1 `y` into `out` of the preconditioner (with Jacobi), or `y` itself.
    let precondition = |y: &Dat<T>, out: fn(&Jacobi<T>) -> &Dat<T>| -> Result<Dat<T>> {
        match &jacobi {
            None => Ok(y.clone()),
            Some(m) => {
                rt.pointwise_mult(out(m), &m.dinv, y)?;
                Ok(out(m).clone())
            }
        }
    };

    let (mut report, tol) = match start(rt, SOLVER, &name, b, x, opts)? {
        Start::Solved(report) => return Ok(report),
        Start::Iterate(report, tol) => (report, tol),
    };
    let fail = |failure, report, rnorm| stopped(SOLVER, &name, failure, report, rnorm);

    // r = b - A x (A x in `v`, which the next iteration overwrites).
    let residual = || -> Result<f64> {
        a.apply(rt, x, &v)?;
        rt.copy_from(&r, b)?;
        rt.axpy(-T::ONE, &v, &r)?;
        Ok(rt.norm2(&r)?.to_f64())
    };
    let mut rnorm = residual()?;
    report.residual_history.push(rnorm);

    // The shadow residual r0 = r at the start and at each restart; `fresh`
    // until the first direction from it is built.
    let mut fresh = true;
    let mut r0_norm = rnorm;
    rt.copy_from(&r0, &r)?;
    let (mut rho, mut alpha, mut omega) = (T::ONE, T::ONE, T::ONE);
    let mut restart_norm = f64::INFINITY; // the true residual at the last convergence restart
    let mut converging = false; // the last restart was for a drift at convergence
                                // A quantity the iteration divides by vanished: restart from the true
                                // residual with a new shadow (its norm returned), unless it had just
                                // restarted (`fresh`): then it cannot go on.
    let vanished = |quantity: &'static str, fresh: bool, rnorm: f64, report: &mut CgReport| -> Result<f64> {
        if fresh {
            return Err(fail(SolveFailure::Vanished { quantity }, report.clone(), rnorm));
        }
        report.restarts += 1;
        let true_norm = residual()?;
        rt.copy_from(&r0, &r)?;
        Ok(true_norm)
    };
    loop {
        if !rnorm.is_finite() {
            return Err(fail(SolveFailure::NotFinite { quantity: "||r||", value: rnorm }, report, rnorm));
        }
        if rnorm <= tol {
            // Converged as the iteration sees it: confirm on the true
            // residual; restart from it if the two drifted apart (as cg).
            let true_norm = residual()?;
            if true_norm <= tol {
                report.relative_residual = true_norm / report.rhs_norm;
                report.converged = true;
                return Ok(report);
            }
            if !true_norm.is_finite() {
                return Err(fail(SolveFailure::NotFinite { quantity: "||r||", value: true_norm }, report, true_norm));
            }
            if converging && (fresh || true_norm >= restart_norm) {
                let failure = SolveFailure::stagnated(&report, true_norm);
                return Err(fail(failure, report, true_norm));
            }
            restart_norm = true_norm;
            converging = true;
            report.restarts += 1;
            rnorm = true_norm;
            rt.copy_from(&r0, &r)?;
            r0_norm = rnorm;
            fresh = true;
            continue;
        }
        if report.iterations >= opts.max_iterations {
            let true_norm = residual()?;
            let failure = super::out_of_iterations(opts, &report, rnorm, true_norm);
            return Err(fail(failure, report, true_norm));
        }
        let started = std::time::Instant::now();
        let rho_new = rt.dot(&r0, &r)?;
        let rho_f = rho_new.to_f64();
        if !rho_f.is_finite() {
            return Err(fail(SolveFailure::NotFinite { quantity: "r0 . r", value: rho_f }, report, rnorm));
        }
        // Numerically orthogonal (relative to the norms), not only zero:
        // the next direction would be noise.
        if rho_f.abs() <= T::EPSILON * r0_norm * rnorm {
            rnorm = vanished("r0 . r", fresh, rnorm, &mut report)?;
            r0_norm = rnorm;
            converging = false;
            fresh = true;
            continue;
        }
        // p = r (fresh), else p = r + beta (p - omega v).
        if fresh {
            rt.copy_from(&p, &r)?;
        } else {
            let beta = (rho_new / rho) * (alpha / omega);
            rt.axpy(-omega, &v, &p)?;
            rt.axpby(T::ONE, &r, beta, &p)?;
        }
        let was_fresh = fresh;
        fresh = false;
        rho = rho_new;
        let phat = precondition(&p, |m| &m.phat)?;
        a.apply(rt, &phat, &v)?;
        let r0v = rt.dot(&r0, &v)?;
        let r0v_f = r0v.to_f64();
        if !r0v_f.is_finite() {
            return Err(fail(SolveFailure::NotFinite { quantity: "r0 . Ap", value: r0v_f }, report, rnorm));
        }
        if r0v_f == 0.0 {
            rnorm = vanished("r0 . Ap", was_fresh, rnorm, &mut report)?;
            r0_norm = rnorm;
            converging = false;
            fresh = true;
            continue;
        }
        alpha = rho / r0v;
        // s = r - alpha v; x += alpha phat.
        rt.copy_from(&s, &r)?;
        rt.axpy(-alpha, &v, &s)?;
        rt.axpy(alpha, &phat, x)?;
        let snorm = rt.norm2(&s)?.to_f64();
        if snorm <= tol || !snorm.is_finite() {
            // Half a step reaches the tolerance (or the top of the loop
            // reports what is not finite): r = s.
            rt.copy_from(&r, &s)?;
            rnorm = snorm;
        } else {
            let shat = precondition(&s, |m| &m.shat)?;
            a.apply(rt, &shat, &t)?;
            let (ts, tt) = (rt.dot(&t, &s)?, rt.dot(&t, &t)?);
            let (ts_f, tt_f) = (ts.to_f64(), tt.to_f64());
            if !(ts_f.is_finite() && tt_f.is_finite()) {
                let (quantity, value) = if ts_f.is_finite() { ("t . t", tt_f) } else { ("t . s", ts_f) };
                return Err(fail(SolveFailure::NotFinite { quantity, value }, report, rnorm));
            }
            omega = if tt_f == 0.0 { T::ZERO } else { ts / tt };
            // x += omega shat; r = s - omega t.
            rt.axpy(omega, &shat, x)?;
            rt.copy_from(&r, &s)?;
            rt.axpy(-omega, &t, &r)?;
            rnorm = rt.norm2(&r)?.to_f64();
            if omega.to_f64() == 0.0 && rnorm > tol {
                // The next beta divides by omega: restart (x stays, r is s).
                report.iteration_seconds += started.elapsed().as_secs_f64();
                report.iterations += 1;
                report.residual_history.push(rnorm);
                rnorm = vanished("omega = t . s / t . t", false, rnorm, &mut report)?;
                r0_norm = rnorm;
                converging = false;
                fresh = true;
                continue;
            }
        }
        report.iteration_seconds += started.elapsed().as_secs_f64();
        report.iterations += 1;
        report.residual_history.push(rnorm);
    }
}
