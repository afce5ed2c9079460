//! BiCGStab on systems CG cannot take: nonsymmetric (convection-diffusion
//! with upwinding) and indefinite ones, solved to the requested tolerance
//! (the true residual checked here, from the matrix's CSR copy) and to a
//! known solution; the device backend against seq; and the ways it must
//! refuse to return an `x`: singular, a zero diagonal under Jacobi, NaN,
//! max_iterations, a tolerance the precision cannot reach.

#[path = "support/device.rs"]
mod device;

use parloop::solve::{bicgstab, cg, CgOptions, Preconditioner, SolveFailure};
use parloop::{Access, Backend, Error, Mat, Runtime, Set};

#[path = "support/solvers.rs"]
mod solvers;
use solvers::{true_relative_residual, Rng};

/// Diffusion `d [[1, -1], [-1, 1]]` plus upwind convection from node 0 to
/// node 1 of the edge, `c [[0, 0], [-1, 1]]`: not symmetric when `c != 0`.
#[parloop::kernel]
fn edge(d: &f64, c: &f64, a: &mut [[f64; 2]; 2]) {
    a[0][0] += *d;
    a[0][1] -= *d;
    a[1][0] -= *d + *c;
    a[1][1] += *d + *c;
}

/// s on the diagonal.
#[parloop::kernel]
fn shift(s: &f64, a: &mut f64) {
    *a += *s;
}

/// `diffusion + convection + diag(shifts)` on the graph `conn` (pairs of
/// nodes): nonsingular when the shifts are positive (an M-matrix).
fn graph_matrix(rt: &Runtime, nodes: &Set, conn: &[i32], d: &[f64], c: &[f64], shifts: &[f64]) -> Mat<f64> {
    let edges = rt.set("edges", d.len()).unwrap();
    let e2n = rt.map("e2n", &edges, nodes, 2, conn.to_vec()).unwrap();
    let id = rt.map("id", nodes, nodes, 1, (0..nodes.size() as i32).collect()).unwrap();
    let s = rt.sparsity("s", &[(&e2n, &e2n), (&id, &id)], (1, 1)).unwrap();
    let a = rt.mat::<f64>("A", &s).unwrap();
    let dd = rt.dat("d", &edges, 1, d.to_vec()).unwrap();
    let cd = rt.dat("c", &edges, 1, c.to_vec()).unwrap();
    let sd = rt.dat("shift", nodes, 1, shifts.to_vec()).unwrap();
    rt.par_loop(edge::KERNEL, &edges, &[dd.arg(Access::READ), cd.arg(Access::READ), a.arg(&e2n, &e2n, Access::INC)])
        .unwrap();
    rt.par_loop(shift::KERNEL, nodes, &[sd.arg(Access::READ), a.arg(&id, &id, Access::INC)]).unwrap();
    a
}

/// A random connected graph (a path plus random edges), random diffusion,
/// convection `peclet` times stronger, and small positive shifts.
fn random_convection(rt: &Runtime, rng: &mut Rng, n: usize, peclet: f64) -> (Set, Mat<f64>) {
    let nodes = rt.set("nodes", n).unwrap();
    let mut conn = Vec::new();
    for i in 1..n {
        conn.extend([i as i32 - 1, i as i32]);
    }
    for _ in 0..3 * n {
        conn.extend([rng.below(n) as i32, rng.below(n) as i32]);
    }
    let d: Vec<f64> = (0..conn.len() / 2).map(|_| 0.1 + rng.unit()).collect();
    let c: Vec<f64> = d.iter().map(|d| peclet * d * rng.unit()).collect();
    let shifts: Vec<f64> = (0..n).map(|_| 0.01 + 0.1 * rng.unit()).collect();
    let a = graph_matrix(rt, &nodes, &conn, &d, &c, &shifts);
    (nodes, a)
}

#[test]
fn random_nonsymmetric_systems_are_solved_to_the_requested_tolerance_and_the_known_solution() {
    let mut rng = Rng(0x2545_f491);
    for backend in [Backend::Seq, Backend::Threads] {
        for preconditioner in [Preconditioner::Jacobi, Preconditioner::None] {
            for (n, rtol, peclet) in [(1, 1e-12, 0.0), (10, 1e-10, 5.0), (2000, 1e-8, 20.0), (3000, 1e-11, 100.0)] {
                let rt = Runtime::with_backend(backend).unwrap();
                let (nodes, a) = random_convection(&rt, &mut rng, n, peclet);
                let what = format!("{backend:?} {preconditioner:?} n {n} rtol {rtol:e} peclet {peclet}");
                let csr = a.to_csr().unwrap();
                if peclet > 0.0 && n > 1 {
                    // Not symmetric, or the test tests nothing CG could not.
                    let at = |i: usize, j: usize| {
                        (csr.row_ptr[i]..csr.row_ptr[i + 1]).find(|&k| csr.cols[k] == j).map_or(0.0, |k| csr.vals[k])
                    };
                    let asymmetric = (0..n).any(|i| {
                        (csr.row_ptr[i]..csr.row_ptr[i + 1]).any(|k| (csr.vals[k] - at(csr.cols[k], i)).abs() > 1e-3)
                    });
                    assert!(asymmetric, "{what}: the matrix came out symmetric");
                }
                // b = A x* for a known x*.
                let x_star: Vec<f64> = (0..n).map(|_| rng.unit() - 0.5).collect();
                let xs = rt.dat("x_star", &nodes, 1, x_star.clone()).unwrap();
                let b = rt.dat("b", &nodes, 1, vec![0.0; n]).unwrap();
                rt.mult(&a, &xs, &b).unwrap();
                let x = rt.dat("x", &nodes, 1, vec![0.0; n]).unwrap();
                let opts = CgOptions { rtol, preconditioner, ..CgOptions::default() };
                let report = bicgstab(&rt, &a, &b, &x, &opts).unwrap_or_else(|e| panic!("{what}: {e}"));
                let res = true_relative_residual(&a, &b, &x);
                assert!(report.converged, "{what}");
                assert!(res <= rtol * 1.01, "{what}: true residual {res:e}, report {:e}", report.relative_residual);
                assert!((res - report.relative_residual).abs() <= 1e-3 * rtol, "{what}: {res:e} vs report");
                assert_eq!(report.residual_history.len(), report.iterations + 1, "{what}");
                // The solution itself, to the tolerance times a bound on
                // the condition number of these diagonally dominant systems.
                let err = x.values().unwrap().iter().zip(&x_star).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
                let scale = x_star.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                assert!(err <= 1e5 * rtol * scale, "{what}: max error {err:e}");
            }
        }
    }
}

/// The 1-D steady convection-diffusion `-eps u'' + u' = 1` on (0, 1), u = 0
/// at both ends, upwind differences on `n` intervals, against the exact
/// solution of the discrete equations (a three-term recurrence solved
/// here by the Thomas algorithm, no parloop).
#[test]
fn upwind_convection_diffusion_matches_a_direct_solve() {
    let (n, eps) = (100, 0.01);
    let h = 1.0 / n as f64;
    let m = n - 1; // interior nodes
                   // Row i: (-eps/h^2 - 1/h) u_{i-1} + (2 eps/h^2 + 1/h) u_i - eps/h^2 u_{i+1} = 1.
    let (lo, di, up) = (-eps / (h * h) - 1.0 / h, 2.0 * eps / (h * h) + 1.0 / h, -eps / (h * h));
    let mut cp = vec![0.0; m];
    let mut dp = vec![0.0; m];
    for i in 0..m {
        let denom = di - if i > 0 { lo * cp[i - 1] } else { 0.0 };
        cp[i] = up / denom;
        dp[i] = (1.0 - if i > 0 { lo * dp[i - 1] } else { 0.0 }) / denom;
    }
    let mut direct = vec![0.0; m];
    for i in (0..m).rev() {
        direct[i] = dp[i] - if i + 1 < m { cp[i] * direct[i + 1] } else { 0.0 };
    }
    for backend in [Backend::Seq, Backend::Threads, device::device_backend()] {
        let rt = Runtime::with_backend(backend).unwrap();
        let nodes = rt.set("nodes", m).unwrap();
        let conn: Vec<i32> = (1..m as i32).flat_map(|i| [i - 1, i]).collect();
        let d = vec![eps / (h * h); m - 1];
        let c = vec![1.0 / h; m - 1];
        // The boundary neighbours' couplings, as shifts: eps/h^2 + 1/h at
        // the inflow node, eps/h^2 at the outflow one.
        let mut shifts = vec![0.0; m];
        shifts[0] += eps / (h * h) + 1.0 / h;
        shifts[m - 1] += eps / (h * h);
        let a = graph_matrix(&rt, &nodes, &conn, &d, &c, &shifts);
        let b = rt.dat("b", &nodes, 1, vec![1.0; m]).unwrap();
        let u = rt.dat("u", &nodes, 1, vec![0.0; m]).unwrap();
        let report = bicgstab(&rt, &a, &b, &u, &CgOptions { rtol: 1e-10, ..CgOptions::default() }).unwrap();
        let err = u.values().unwrap().iter().zip(&direct).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(err < 1e-8, "{backend:?}: max difference from the direct solve {err:e} ({report:?})");
    }
}

#[test]
fn indefinite_diagonals_work_and_a_zero_one_is_named() {
    // diag(1, -1.5, 1, -1.5, ...) plus a little coupling: CG refuses it,
    // BiCGStab with Jacobi solves it.
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let n = 50;
    let nodes = rt.set("nodes", n).unwrap();
    let conn: Vec<i32> = (1..n).flat_map(|i| [i as i32 - 1, i as i32]).collect();
    let shifts: Vec<f64> = (0..n).map(|i| if i % 2 == 0 { 1.0 } else { -1.5 }).collect();
    let a = graph_matrix(&rt, &nodes, &conn, &vec![0.1; n - 1], &vec![0.05; n - 1], &shifts);
    let b = rt.dat("b", &nodes, 1, (0..n).map(|i| (i as f64).cos()).collect()).unwrap();
    let x = rt.dat("x", &nodes, 1, vec![0.0; n]).unwrap();
    assert!(cg(&rt, &a, &b, &x, &CgOptions::default()).is_err());
    rt.fill(&x, 0.0).unwrap();
    let report = bicgstab(&rt, &a, &b, &x, &CgOptions { rtol: 1e-10, ..CgOptions::default() }).unwrap();
    assert!(report.converged && true_relative_residual(&a, &b, &x) <= 1.01e-10, "{report:?}");
    // A zero on the diagonal (row 3, zeroed whole): Jacobi cannot divide by it.
    let z = a;
    z.zero_rows(&rt.subset("row3", &nodes, vec![3]).unwrap(), 0.0).unwrap();
    let err = bicgstab(&rt, &z, &b, &x, &CgOptions::default()).unwrap_err();
    match &err {
        Error::NotConverged {
            solver: "bicgstab", failure: SolveFailure::SingularDiagonal { row: 3, value }, ..
        } => {
            assert_eq!(*value, 0.0)
        }
        other => panic!("expected SingularDiagonal at row 3, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("bicgstab on matrix `A`") && msg.contains("row 3") && !msg.contains("NaN"), "{msg}");
}

#[test]
fn singular_system_without_a_solution_is_not_reported_as_solved() {
    // Diffusion without a shift: every row sums to zero, so constants are
    // in A's kernel (and, A being symmetric here, orthogonal to its
    // range); b = e_0 + e_1 is not, so no x solves A x = b.
    let rt = Runtime::with_backend(Backend::Threads).unwrap();
    let n = 100;
    let nodes = rt.set("nodes", n).unwrap();
    let conn: Vec<i32> = (1..n).flat_map(|i| [i as i32 - 1, i as i32]).collect();
    let a = graph_matrix(&rt, &nodes, &conn, &vec![1.0; n - 1], &vec![0.0; n - 1], &vec![0.0; n]);
    let mut bv = vec![0.0; n];
    bv[0] = 1.0;
    bv[1] = 1.0;
    let b = rt.dat("b", &nodes, 1, bv).unwrap();
    for p in [Preconditioner::Jacobi, Preconditioner::None] {
        let x = rt.dat(&format!("x{p:?}"), &nodes, 1, vec![0.0; n]).unwrap();
        let opts = CgOptions { rtol: 1e-10, max_iterations: 2000, preconditioner: p, ..CgOptions::default() };
        let err = bicgstab(&rt, &a, &b, &x, &opts).unwrap_err();
        assert!(matches!(err, Error::NotConverged { solver: "bicgstab", .. }), "{p:?}: {err:?}");
        assert!(true_relative_residual(&a, &b, &x) > 1e-3, "{p:?}");
    }
}

#[test]
fn repeat_bitwise_and_backends_agree() {
    let solve = |backend| {
        let rt = Runtime::with_backend(backend).unwrap();
        let mut rng = Rng(99);
        let (nodes, a) = random_convection(&rt, &mut rng, 1500, 10.0);
        let b = rt.dat("b", &nodes, 1, (0..1500).map(|k| (k as f64).sin()).collect()).unwrap();
        let x = rt.dat("x", &nodes, 1, vec![0.0; 1500]).unwrap();
        let r = bicgstab(&rt, &a, &b, &x, &CgOptions { rtol: 1e-10, ..CgOptions::default() }).unwrap();
        assert!(true_relative_residual(&a, &b, &x) <= 1.01e-10, "{backend:?}");
        (r, x.values().unwrap())
    };
    let (r1, x1) = solve(Backend::Threads);
    let (r2, x2) = solve(Backend::Threads);
    assert_eq!(r1, r2);
    assert!(x1.iter().zip(&x2).all(|(a, b)| a.to_bits() == b.to_bits()));
    for backend in [Backend::Seq, device::device_backend()] {
        let (r, x) = solve(backend);
        let diff = x.iter().zip(&x1).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(diff < 1e-7, "{backend:?} and threads differ by {diff:e}");
        assert!(r.iterations.abs_diff(r1.iterations) <= 2, "{backend:?}: {} vs {}", r.iterations, r1.iterations);
    }
}

#[test]
fn bad_arguments_nan_and_limits_are_errors() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let mut rng = Rng(5);
    let (nodes, a) = random_convection(&rt, &mut rng, 25, 10.0);
    let mut bv = vec![1.0; 25];
    bv[7] = f64::NAN;
    let b = rt.dat("b", &nodes, 1, bv).unwrap();
    let x = rt.dat("x", &nodes, 1, vec![0.0; 25]).unwrap();
    let not_finite =
        |r: parloop::Result<_>| matches!(r, Err(Error::NotConverged { failure: SolveFailure::NotFinite { .. }, .. }));
    assert!(not_finite(bicgstab(&rt, &a, &b, &x, &CgOptions::default())));
    b.set_values(&[1.0; 25]).unwrap();
    x.with_values_mut(|v| v[3] = f64::INFINITY).unwrap();
    assert!(not_finite(bicgstab(&rt, &a, &b, &x, &CgOptions::default())));
    // b = 0: x = 0 at once.
    b.set_values(&[0.0; 25]).unwrap();
    let r = bicgstab(&rt, &a, &b, &x, &CgOptions::default()).unwrap();
    assert_eq!((r.iterations, r.converged), (0, true));
    assert_eq!(x.values().unwrap(), vec![0.0; 25]);
    // Wrong set, x aliasing b, tolerances that solve nothing: named.
    b.set_values(&[1.0; 25]).unwrap();
    let other = rt.set("other", 25).unwrap();
    let y = rt.dat("y", &other, 1, vec![0.0; 25]).unwrap();
    let msg = bicgstab(&rt, &a, &b, &y, &CgOptions::default()).unwrap_err().to_string();
    assert!(msg.contains("`y`") && msg.contains("`other`") && msg.contains("`A`"), "{msg}");
    let msg = bicgstab(&rt, &a, &b, &b, &CgOptions::default()).unwrap_err().to_string();
    assert!(msg.contains("bicgstab on matrix `A`") && msg.contains("both dat `b`"), "{msg}");
    for (rtol, atol) in [(f64::NAN, 0.0), (1.0, 0.0), (1e-8, -1.0)] {
        let msg = bicgstab(&rt, &a, &b, &x, &CgOptions { rtol, atol, ..CgOptions::default() }).unwrap_err().to_string();
        assert!(msg.contains("bicgstab on matrix `A`") && msg.contains("below 1"), "{msg}");
    }
    // The iteration limit: an error with the report of how far it got.
    rt.fill(&x, 0.0).unwrap();
    let opts = CgOptions { rtol: 1e-14, max_iterations: 2, ..CgOptions::default() };
    match bicgstab(&rt, &a, &b, &x, &opts) {
        Err(Error::NotConverged { failure: SolveFailure::MaxIterations { max_iterations: 2 }, report, .. }) => {
            assert_eq!((report.iterations, report.residual_history.len()), (2, 3));
            let res = true_relative_residual(&a, &b, &x);
            assert!((report.relative_residual - res).abs() <= 1e-6 * res, "{} vs {res}", report.relative_residual);
        }
        other => panic!("expected MaxIterations, got {other:?}"),
    }
}

/// The 1-D convection-diffusion matrix of one edge in f32.
#[parloop::kernel]
fn edge_f32(a: &mut [[f32; 2]; 2]) {
    a[0][0] += 1.0;
    a[0][1] -= 1.0;
    a[1][0] -= 1.5;
    a[1][1] += 1.5;
}

#[parloop::kernel]
fn diag_f32(a: &mut [[f32; 1]; 1]) {
    a[0][0] += 0.01;
}

/// A tolerance f32 cannot reach stops (stagnation or the limit), never
/// with `Ok` and a residual above it; a reachable one converges.
#[test]
fn f32_converges_to_what_it_can_reach_and_stops_otherwise() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let n = 200;
    let nodes = rt.set("nodes", n).unwrap();
    let edges = rt.set("edges", n - 1).unwrap();
    let e2n = rt.map("e2n", &edges, &nodes, 2, (0..n as i32 - 1).flat_map(|e| [e, e + 1]).collect()).unwrap();
    let id = rt.map("id", &nodes, &nodes, 1, (0..n as i32).collect()).unwrap();
    let a = rt.mat::<f32>("A", &rt.sparsity("A", &[(&e2n, &e2n), (&id, &id)], (1, 1)).unwrap()).unwrap();
    rt.par_loop(edge_f32::KERNEL, &edges, &[a.arg(&e2n, &e2n, Access::INC)]).unwrap();
    rt.par_loop(diag_f32::KERNEL, &nodes, &[a.arg(&id, &id, Access::INC)]).unwrap();
    let b = rt.dat("b", &nodes, 1, vec![1.0f32; n]).unwrap();
    let u = rt.dat("u", &nodes, 1, vec![0.0f32; n]).unwrap();
    match bicgstab(&rt, &a, &b, &u, &CgOptions { rtol: 1e-9, max_iterations: 3000, ..CgOptions::default() }) {
        Err(Error::NotConverged {
            failure: SolveFailure::Stagnated { .. } | SolveFailure::MaxIterations { .. },
            ..
        }) => {}
        other => panic!("expected a stop, got {other:?}"),
    }
    rt.fill(&u, 0.0).unwrap();
    let report = bicgstab(&rt, &a, &b, &u, &CgOptions { rtol: 1e-3, ..CgOptions::default() }).unwrap();
    assert!(report.converged && report.relative_residual <= 1e-3, "{report:?}");
}
