//! The conjugate gradient solver: SPD systems solved to the requested
//! tolerance (the true residual checked here, from the matrix's CSR copy),
//! Laplacians against known solutions, the device backend against seq, and
//! the ways it must refuse to return an `x`: not SPD, singular, NaN,
//! max_iterations.

#[path = "support/device.rs"]
mod device;

use parloop::solve::{bicgstab, cg, CgOptions, Preconditioner, SolveFailure};
use parloop::{Access, Backend, Dat, Error, Mat, Runtime, Set};

#[path = "support/solvers.rs"]
mod solvers;
use solvers::{true_relative_residual, Rng};

/// w [[1, -1], [-1, 1]]: an edge of a weighted graph Laplacian.
#[parloop::kernel]
fn edge(w: &f64, a: &mut [[f64; 2]; 2]) {
    a[0][0] += *w;
    a[0][1] -= *w;
    a[1][0] -= *w;
    a[1][1] += *w;
}

/// s on the diagonal.
#[parloop::kernel]
fn shift(s: &f64, a: &mut f64) {
    *a += *s;
}

/// A matrix `L + diag(shift)` for the graph `conn` (pairs of nodes) with
/// edge weights `w`: SPD when the weights and shifts are positive.
fn graph_matrix(rt: &Runtime, nodes: &Set, conn: &[i32], w: &[f64], shifts: &[f64]) -> Mat<f64> {
    let edges = rt.set("edges", w.len()).unwrap();
    let e2n = rt.map("e2n", &edges, nodes, 2, conn.to_vec()).unwrap();
    let id = rt.map("id", nodes, nodes, 1, (0..nodes.size() as i32).collect()).unwrap();
    let s = rt.sparsity("s", &[(&e2n, &e2n), (&id, &id)], (1, 1)).unwrap();
    let a = rt.mat::<f64>("A", &s).unwrap();
    let wd = rt.dat("w", &edges, 1, w.to_vec()).unwrap();
    let sd = rt.dat("shift", nodes, 1, shifts.to_vec()).unwrap();
    rt.par_loop(edge::KERNEL, &edges, &[wd.arg(Access::READ), a.arg(&e2n, &e2n, Access::INC)]).unwrap();
    rt.par_loop(shift::KERNEL, nodes, &[sd.arg(Access::READ), a.arg(&id, &id, Access::INC)]).unwrap();
    a
}

/// A random connected graph (a path plus random edges) with random weights.
fn random_spd(rt: &Runtime, rng: &mut Rng, n: usize, shift: f64) -> (Set, Mat<f64>) {
    let nodes = rt.set("nodes", n).unwrap();
    let mut conn = Vec::new();
    for i in 1..n {
        conn.extend([i as i32 - 1, i as i32]);
    }
    for _ in 0..3 * n {
        conn.extend([rng.below(n) as i32, rng.below(n) as i32]);
    }
    let w: Vec<f64> = (0..conn.len() / 2).map(|_| 0.1 + rng.unit()).collect();
    let shifts: Vec<f64> = (0..n).map(|_| shift * (0.5 + rng.unit())).collect();
    let a = graph_matrix(rt, &nodes, &conn, &w, &shifts);
    (nodes, a)
}

#[test]
fn random_spd_systems_are_solved_to_the_requested_tolerance() {
    let mut rng = Rng(0x1234_5678);
    for backend in [Backend::Seq, Backend::Threads] {
        for preconditioner in [Preconditioner::Jacobi, Preconditioner::None] {
            for (n, rtol) in [(1, 1e-12), (10, 1e-10), (2000, 1e-8), (5000, 1e-11)] {
                let rt = Runtime::with_backend(backend).unwrap();
                let (nodes, a) = random_spd(&rt, &mut rng, n, 1e-3);
                let b = rt.dat("b", &nodes, 1, (0..n).map(|_| rng.unit() - 0.5).collect()).unwrap();
                let x = rt.dat("x", &nodes, 1, vec![0.0; n]).unwrap();
                let opts = CgOptions { rtol, preconditioner, ..CgOptions::default() };
                let report = cg(&rt, &a, &b, &x, &opts).unwrap();
                let res = true_relative_residual(&a, &b, &x);
                let what = format!("{backend:?} {preconditioner:?} n {n} rtol {rtol:e}");
                assert!(report.converged, "{what}");
                // Our residual and the solver's differ only by rounding.
                assert!(res <= rtol * 1.01, "{what}: true residual {res:e}, report {:e}", report.relative_residual);
                assert!((res - report.relative_residual).abs() <= 1e-3 * rtol, "{what}: {res:e} vs report");
                assert_eq!(report.residual_history.len(), report.iterations + 1, "{what}");
                assert!(report.iterations <= n + 10 || n > 100, "{what}: {} iterations", report.iterations);
            }
        }
    }
}

#[test]
fn jacobi_needs_fewer_iterations_on_a_badly_scaled_matrix() {
    // Rows scaled over six orders of magnitude: the diagonal preconditioner
    // undoes most of it.
    let mut rng = Rng(77);
    let rt = Runtime::with_backend(Backend::Threads).unwrap();
    let n = 500;
    let nodes = rt.set("nodes", n).unwrap();
    let conn: Vec<i32> = (1..n).flat_map(|i| [i as i32 - 1, i as i32]).collect();
    let w: Vec<f64> = (1..n).map(|i| 10f64.powi((i % 7) as i32 - 3)).collect();
    let shifts: Vec<f64> = (0..n).map(|i| 10f64.powi((i % 5) as i32 - 2)).collect();
    let a = graph_matrix(&rt, &nodes, &conn, &w, &shifts);
    let b = rt.dat("b", &nodes, 1, (0..n).map(|_| rng.unit()).collect()).unwrap();
    let iterations = |p| {
        let x = rt.dat(&format!("x{p:?}"), &nodes, 1, vec![0.0; n]).unwrap();
        let opts = CgOptions { rtol: 1e-10, preconditioner: p, max_iterations: 100_000, ..CgOptions::default() };
        let r = cg(&rt, &a, &b, &x, &opts).unwrap();
        assert!(true_relative_residual(&a, &b, &x) <= 1.01e-10);
        r.iterations
    };
    let (jacobi, none) = (iterations(Preconditioner::Jacobi), iterations(Preconditioner::None));
    assert!(jacobi < none, "Jacobi {jacobi} iterations, none {none}");
}

#[test]
fn one_d_laplacian_converges_to_the_continuous_solution() {
    // -u'' = pi^2 sin(pi x) on (0, 1), u = 0 at both ends: u = sin(pi x).
    // P1 on a uniform mesh of n + 1 intervals: (1/h) tridiag(-1, 2, -1) u = h f
    // (lumped load); the nodal error is O(h^2).
    for backend in [Backend::Seq, Backend::Threads] {
        let rt = Runtime::with_backend(backend).unwrap();
        let n = 200;
        let h = 1.0 / (n + 1) as f64;
        let nodes = rt.set("nodes", n).unwrap();
        // Interior edges between consecutive nodes; the two boundary edges
        // become a diagonal shift of 1/h on the first and last nodes.
        let conn: Vec<i32> = (1..n).flat_map(|i| [i as i32 - 1, i as i32]).collect();
        let w = vec![1.0 / h; n - 1];
        let mut shifts = vec![0.0; n];
        shifts[0] = 1.0 / h;
        shifts[n - 1] = 1.0 / h;
        let a = graph_matrix(&rt, &nodes, &conn, &w, &shifts);
        let xs: Vec<f64> = (1..=n).map(|i| i as f64 * h).collect();
        let pi = std::f64::consts::PI;
        let b = rt.dat("b", &nodes, 1, xs.iter().map(|x| h * pi * pi * (pi * x).sin()).collect()).unwrap();
        let x = rt.dat("x", &nodes, 1, vec![0.0; n]).unwrap();
        let report = cg(&rt, &a, &b, &x, &CgOptions { rtol: 1e-12, ..CgOptions::default() }).unwrap();
        let u = x.values().unwrap();
        let err = xs.iter().zip(&u).map(|(x, u)| (u - (pi * x).sin()).abs()).fold(0.0, f64::max);
        // The lumped load's nodal error is about pi^2 h^2 / 12 of the peak.
        assert!(err < pi * pi * h * h / 6.0, "{backend:?}: max error {err:e} with h = {h:e}");
        assert!(err > 1e-9, "{backend:?}: suspiciously exact: {err:e}");
        // Exact arithmetic would need at most n iterations.
        assert!(report.iterations <= n, "{backend:?}: {} iterations", report.iterations);
    }
}

/// The 5-point stencil as a graph Laplacian (unit weights) of an m x m
/// grid, with the Dirichlet boundary as a diagonal shift.
fn laplacian_2d(rt: &Runtime, m: usize) -> (Set, Mat<f64>) {
    let nodes = rt.set("nodes", m * m).unwrap();
    let id = |i: usize, j: usize| (i * m + j) as i32;
    let mut conn = Vec::new();
    for i in 0..m {
        for j in 0..m {
            if i + 1 < m {
                conn.extend([id(i, j), id(i + 1, j)]);
            }
            if j + 1 < m {
                conn.extend([id(i, j), id(i, j + 1)]);
            }
        }
    }
    let w = vec![1.0; conn.len() / 2];
    // 4 - (neighbours inside): the missing neighbours are boundary nodes.
    let shifts: Vec<f64> = (0..m * m)
        .map(|k| {
            let (i, j) = (k / m, k % m);
            [i == 0, i + 1 == m, j == 0, j + 1 == m].iter().filter(|&&b| b).count() as f64
        })
        .collect();
    (nodes.clone(), graph_matrix(rt, &nodes, &conn, &w, &shifts))
}

#[test]
fn two_d_laplacian_recovers_a_known_discrete_solution() {
    // b = A u* for a chosen u*, computed here from the stencil itself, not
    // from the assembled matrix.
    let m = 60;
    let u_star: Vec<f64> =
        (0..m * m).map(|k| ((k / m) as f64 * 0.1).sin() * ((k % m) as f64 * 0.07).cos() + 0.5).collect();
    let mut b = vec![0.0; m * m];
    for i in 0..m {
        for j in 0..m {
            let at = |i: isize, j: isize| {
                if i < 0 || j < 0 || i >= m as isize || j >= m as isize {
                    0.0
                } else {
                    u_star[i as usize * m + j as usize]
                }
            };
            let (ii, jj) = (i as isize, j as isize);
            b[i * m + j] = 4.0 * at(ii, jj) - at(ii - 1, jj) - at(ii + 1, jj) - at(ii, jj - 1) - at(ii, jj + 1);
        }
    }
    for backend in [Backend::Seq, Backend::Threads] {
        let rt = Runtime::with_backend(backend).unwrap();
        let (nodes, a) = laplacian_2d(&rt, m);
        let bd = rt.dat("b", &nodes, 1, b.clone()).unwrap();
        let x = rt.dat("x", &nodes, 1, vec![0.0; m * m]).unwrap();
        cg(&rt, &a, &bd, &x, &CgOptions { rtol: 1e-12, ..CgOptions::default() }).unwrap();
        let err = x.values().unwrap().iter().zip(&u_star).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        // cond(A) ~ 1.6e3 for m = 60: 1e-12 relative residual, 1e-8 in x.
        assert!(err < 1e-8, "{backend:?}: max error {err:e}");
    }
}

#[test]
fn seq_and_threads_agree_and_solves_repeat_bitwise() {
    let solve = |backend| {
        let rt = Runtime::with_backend(backend).unwrap();
        let (nodes, a) = laplacian_2d(&rt, 40);
        let b = rt.dat("b", &nodes, 1, (0..1600).map(|k| (k as f64).sin()).collect()).unwrap();
        let x = rt.dat("x", &nodes, 1, vec![0.0; 1600]).unwrap();
        let r = cg(&rt, &a, &b, &x, &CgOptions { rtol: 1e-10, ..CgOptions::default() }).unwrap();
        (r, x.values().unwrap())
    };
    let (r1, x1) = solve(Backend::Threads);
    let (r2, x2) = solve(Backend::Threads);
    assert_eq!(r1, r2);
    assert!(x1.iter().zip(&x2).all(|(a, b)| a.to_bits() == b.to_bits()));
    let (_, xs) = solve(Backend::Seq);
    let diff = xs.iter().zip(&x1).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(diff < 1e-7, "seq and threads differ by {diff:e}");
}

#[test]
fn max_iterations_reached_is_an_error_with_the_report() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let (nodes, a) = laplacian_2d(&rt, 30);
    let b = rt.dat("b", &nodes, 1, vec![1.0; 900]).unwrap();
    let x = rt.dat("x", &nodes, 1, vec![0.0; 900]).unwrap();
    let opts = CgOptions { rtol: 1e-12, max_iterations: 3, ..CgOptions::default() };
    match cg(&rt, &a, &b, &x, &opts) {
        Err(Error::NotConverged {
            failure: SolveFailure::MaxIterations { max_iterations: 3 }, report, matrix, ..
        }) => {
            assert_eq!(matrix, "A");
            assert_eq!(report.iterations, 3);
            assert_eq!(report.residual_history.len(), 4);
            assert!(!report.converged);
            // The last residual is reported, and it is the true one's order.
            let res = true_relative_residual(&a, &b, &x);
            assert!((report.relative_residual - res).abs() <= 1e-8 * res, "{} vs {res}", report.relative_residual);
            assert!(res > 1e-12);
        }
        other => panic!("expected MaxIterations, got {other:?}"),
    }
}

/// The 1-D P1 stiffness plus mass matrix of one edge, in f32.
#[parloop::kernel]
fn edge_f32(x: &[[f32; 1]; 2], a: &mut [[f32; 2]; 2]) {
    let h = x[1][0] - x[0][0];
    for i in 0..2 {
        for j in 0..2 {
            let k = if i == j { 1.0 / h } else { -1.0 / h };
            let m = if i == j { h / 3.0 } else { h / 6.0 };
            a[i][j] += k + m;
        }
    }
}

/// A tolerance f32 cannot reach: the true residual stalls at a floor
/// while the updated one keeps falling below the tolerance. The solve
/// stops after a few restarts with `Stagnated` (it restarted until
/// `max_iterations`, 10 000 iterations, before).
#[test]
fn an_unreachable_tolerance_in_f32_stops_as_stagnated() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let n = 50;
    let nodes = rt.set("nodes", n + 1).unwrap();
    let edges = rt.set("edges", n).unwrap();
    let e2n = rt.map("e2n", &edges, &nodes, 2, (0..n as i32).flat_map(|e| [e, e + 1]).collect()).unwrap();
    let x = rt.dat("x", &nodes, 1, (0..=n).map(|i| i as f32 / n as f32).collect()).unwrap();
    let a = rt.mat::<f32>("A", &rt.sparsity("A", &[(&e2n, &e2n)], (1, 1)).unwrap()).unwrap();
    rt.par_loop(edge_f32::KERNEL, &edges, &[x.arg_vec(&e2n, Access::READ), a.arg(&e2n, &e2n, Access::INC)]).unwrap();
    let b = rt.dat("b", &nodes, 1, vec![1.0f32; n + 1]).unwrap();
    let u = rt.dat("u", &nodes, 1, vec![0.0f32; n + 1]).unwrap();
    let opts = CgOptions { rtol: 1e-7, ..CgOptions::default() };
    match cg(&rt, &a, &b, &u, &opts) {
        Err(err @ Error::NotConverged { failure: SolveFailure::Stagnated { restarts, true_residual, .. }, .. }) => {
            let Error::NotConverged { report, .. } = &err else { unreachable!() };
            assert!(restarts >= 1 && report.restarts == restarts, "{restarts} vs {}", report.restarts);
            assert!(report.iterations < 1000, "{} iterations", report.iterations);
            assert!(true_residual > 1e-7 * report.rhs_norm, "{true_residual:e}");
            assert!(err.to_string().contains("precision"), "{err}");
        }
        other => panic!("expected Stagnated, got {other:?}"),
    }
    // A reachable tolerance in f32 still converges.
    rt.fill(&u, 0.0).unwrap();
    let report = cg(&rt, &a, &b, &u, &CgOptions { rtol: 1e-3, ..CgOptions::default() }).unwrap();
    assert!(report.converged && report.relative_residual <= 1e-3, "{report:?}");
}

#[test]
fn not_positive_definite_matrices_are_refused() {
    // diag(1, -1, 1, -1, ...) plus a little coupling: indefinite.
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let n = 50;
    let nodes = rt.set("nodes", n).unwrap();
    let conn: Vec<i32> = (1..n).flat_map(|i| [i as i32 - 1, i as i32]).collect();
    let shifts: Vec<f64> = (0..n).map(|i| if i % 2 == 0 { 1.0 } else { -1.5 }).collect();
    let a = graph_matrix(&rt, &nodes, &conn, &vec![0.1; n - 1], &shifts);
    let b = rt.dat("b", &nodes, 1, vec![1.0; n]).unwrap();
    let x = rt.dat("x", &nodes, 1, vec![0.0; n]).unwrap();
    // Jacobi sees a negative diagonal entry before iterating.
    let err = cg(&rt, &a, &b, &x, &CgOptions::default()).unwrap_err();
    match &err {
        Error::NotConverged { failure: SolveFailure::BadDiagonal { row: 1, value }, .. } => {
            assert!(*value < 0.0)
        }
        other => panic!("expected BadDiagonal at row 1, got {other:?}"),
    }
    assert!(err.to_string().contains("`A`") && err.to_string().contains("row 1"), "{err}");
    // Stopped before iterating: no "(after 0 iterations, relative residual NaN)".
    assert!(!err.to_string().contains("iterations") && !err.to_string().contains("NaN"), "{err}");
    // Without a preconditioner the iteration meets p . Ap <= 0.
    let opts = CgOptions { preconditioner: Preconditioner::None, ..CgOptions::default() };
    match cg(&rt, &a, &b, &x, &opts) {
        Err(Error::NotConverged { failure: SolveFailure::Breakdown { quantity: "p . Ap", value }, .. }) => {
            assert!(value <= 0.0)
        }
        other => panic!("expected a breakdown, got {other:?}"),
    }
}

#[test]
fn singular_system_without_a_solution_is_not_reported_as_solved() {
    // A graph Laplacian without a shift is singular (constants are its
    // kernel); b = e_0 is not in its range, so no x solves it.
    let rt = Runtime::with_backend(Backend::Threads).unwrap();
    let n = 100;
    let nodes = rt.set("nodes", n).unwrap();
    let conn: Vec<i32> = (1..n).flat_map(|i| [i as i32 - 1, i as i32]).collect();
    let a = graph_matrix(&rt, &nodes, &conn, &vec![1.0; n - 1], &vec![0.0; n]);
    let mut bv = vec![0.0; n];
    bv[0] = 1.0;
    let b = rt.dat("b", &nodes, 1, bv).unwrap();
    let mut breakdowns = 0;
    for p in [Preconditioner::Jacobi, Preconditioner::None] {
        let x = rt.dat(&format!("x{p:?}"), &nodes, 1, vec![0.0; n]).unwrap();
        let opts = CgOptions { rtol: 1e-10, max_iterations: 2000, preconditioner: p, ..CgOptions::default() };
        let err = cg(&rt, &a, &b, &x, &opts).unwrap_err();
        assert!(matches!(err, Error::NotConverged { .. }), "{p:?}: {err:?}");
        // A breakdown names singularity (a missing Dirichlet condition) as
        // a cause, not only a matrix that is not SPD.
        if let Error::NotConverged { failure: SolveFailure::Breakdown { .. }, .. } = &err {
            assert!(err.to_string().contains("singular"), "{p:?}: {err}");
            breakdowns += 1;
        }
        // The true residual of whatever x holds is far from the tolerance.
        assert!(true_relative_residual(&a, &b, &x) > 1e-3, "{p:?}");
    }
    assert!(breakdowns > 0, "neither solve broke down (p . Ap <= 0)");
}

#[test]
fn nan_inputs_and_bad_arguments_are_errors() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let (nodes, a) = laplacian_2d(&rt, 5);
    let mut bv = vec![1.0; 25];
    bv[7] = f64::NAN;
    let b = rt.dat("b", &nodes, 1, bv).unwrap();
    let x = rt.dat("x", &nodes, 1, vec![0.0; 25]).unwrap();
    assert!(matches!(
        cg(&rt, &a, &b, &x, &CgOptions::default()),
        Err(Error::NotConverged { failure: SolveFailure::NotFinite { .. }, .. })
    ));
    // A NaN in the initial guess.
    b.set_values(&[1.0; 25]).unwrap();
    x.with_values_mut(|v| v[3] = f64::NAN).unwrap();
    assert!(matches!(
        cg(&rt, &a, &b, &x, &CgOptions::default()),
        Err(Error::NotConverged { failure: SolveFailure::NotFinite { .. }, .. })
    ));
    // b = 0: x = 0 at once.
    b.set_values(&[0.0; 25]).unwrap();
    let r = cg(&rt, &a, &b, &x, &CgOptions::default()).unwrap();
    assert_eq!((r.iterations, r.converged), (0, true));
    assert_eq!(x.values().unwrap(), vec![0.0; 25]);
    // Wrong set, x aliasing b, negative tolerance.
    let other = rt.set("other", 25).unwrap();
    let y = rt.dat("y", &other, 1, vec![0.0; 25]).unwrap();
    let msg = cg(&rt, &a, &b, &y, &CgOptions::default()).unwrap_err().to_string();
    assert!(msg.contains("`y`") && msg.contains("`other`") && msg.contains("`A`"), "{msg}");
    let msg = cg(&rt, &a, &b, &b, &CgOptions::default()).unwrap_err().to_string();
    assert!(msg.contains("both dat `b`"), "{msg}");
    let opts = CgOptions { rtol: -1.0, ..CgOptions::default() };
    assert!(matches!(cg(&rt, &a, &b, &x, &opts), Err(Error::Incompatible { .. })));
    // Tolerances met before any iteration (rtol >= 1 from x = 0, an
    // infinite one) reported convergence having solved nothing.
    b.set_values(&[1.0; 25]).unwrap();
    x.set_values(&[0.0; 25]).unwrap();
    for (rtol, atol) in [(f64::INFINITY, 0.0), (1.0, 0.0), (f64::NAN, 0.0), (1e-8, f64::INFINITY)] {
        let opts = CgOptions { rtol, atol, ..CgOptions::default() };
        let msg = cg(&rt, &a, &b, &x, &opts).unwrap_err().to_string();
        assert!(msg.contains("below 1") && msg.contains(&format!("rtol {rtol}")), "{msg}");
    }
    let opts = CgOptions { rtol: 0.999, ..CgOptions::default() };
    assert!(cg(&rt, &a, &b, &x, &opts).unwrap().iterations >= 1);
}

#[test]
fn the_device_backend_solves_as_the_host_does() {
    // Every step is a parloop loop or the device SpMV: the device solves
    // the same system to the same tolerance, in about as many iterations.
    let solve = |backend| {
        let rt = Runtime::with_backend(backend).unwrap();
        let (nodes, a) = laplacian_2d(&rt, 30);
        let b = rt.dat("b", &nodes, 1, (0..900).map(|k| (k as f64 * 0.3).cos()).collect()).unwrap();
        let x = rt.dat("x", &nodes, 1, vec![0.0; 900]).unwrap();
        let report = cg(&rt, &a, &b, &x, &CgOptions { rtol: 1e-10, ..CgOptions::default() }).unwrap();
        assert!(true_relative_residual(&a, &b, &x) <= 1.01e-10, "{backend:?}");
        (report.iterations, x.values().unwrap())
    };
    let (it_dev, x_dev) = solve(device::device_backend());
    let (it_seq, x_seq) = solve(Backend::Seq);
    assert!(it_dev.abs_diff(it_seq) <= 2, "device {it_dev} iterations, seq {it_seq}");
    let diff = x_dev.iter().zip(&x_seq).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(diff < 1e-7, "device and seq differ by {diff:e}");
}

/// Preconditioned CG written with the public operations one at a time (a
/// product, then its dot; the axpys; `z = r .* dinv` stored, then its dots),
/// as `cg` ran before its passes were fused: the reference the fused
/// solver must follow. Returns the iterations and the residual history.
fn unfused_cg(rt: &Runtime, a: &Mat<f64>, b: &Dat<f64>, x: &Dat<f64>, rtol: f64, jacobi: bool) -> (usize, Vec<f64>) {
    let set = b.set();
    let n = set.size();
    let work = |name: &str| rt.dat(name, set, 1, vec![0.0; n]).unwrap();
    let (r, p, q, z, d) = (work("ref:r"), work("ref:p"), work("ref:q"), work("ref:z"), work("ref:d"));
    rt.diagonal(a, &d).unwrap();
    let dinv = rt.dat("ref:dinv", set, 1, d.values().unwrap().iter().map(|v| 1.0 / v).collect()).unwrap();
    let precondition = |r: &Dat<f64>| {
        if jacobi {
            rt.pointwise_mult(&z, r, &dinv).unwrap();
        } else {
            rt.copy_from(&z, r).unwrap();
        }
        rt.dot(r, &z).unwrap()
    };
    rt.mult(a, x, &q).unwrap();
    rt.copy_from(&r, b).unwrap();
    rt.axpy(-1.0, &q, &r).unwrap();
    let tol = rtol * rt.norm2(b).unwrap();
    let mut history = vec![rt.norm2(&r).unwrap()];
    let mut rz = precondition(&r);
    rt.copy_from(&p, &z).unwrap();
    while *history.last().unwrap() > tol && history.len() < 10_000 {
        rt.mult(a, &p, &q).unwrap();
        let alpha = rz / rt.dot(&p, &q).unwrap();
        rt.axpy(alpha, &p, x).unwrap();
        rt.axpy(-alpha, &q, &r).unwrap();
        let rz_new = precondition(&r);
        history.push(rt.norm2(&r).unwrap());
        rt.axpby(1.0, &z, rz_new / rz, &p).unwrap();
        rz = rz_new;
    }
    (history.len() - 1, history)
}

#[test]
fn fused_passes_follow_the_unfused_iteration_on_every_backend() {
    // `cg` fuses the Jacobi scaling, the updates and the dots into fewer
    // passes; the iterates are those of the operations run one by one, up
    // to the grouping of the additions in `p . Ap`.
    for backend in [Backend::Seq, Backend::Threads, device::device_backend()] {
        for preconditioner in [Preconditioner::None, Preconditioner::Jacobi] {
            let what = format!("{backend:?} {preconditioner:?}");
            let rt = Runtime::with_backend(backend).unwrap();
            let mut rng = Rng(0xfeed);
            let (nodes, a) = random_spd(&rt, &mut rng, 1000, 0.05);
            let bv: Vec<f64> = (0..1000).map(|_| rng.unit() - 0.3).collect();
            let b = rt.dat("b", &nodes, 1, bv).unwrap();
            let x = rt.dat("x", &nodes, 1, vec![0.0; 1000]).unwrap();
            let x_ref = rt.dat("x_ref", &nodes, 1, vec![0.0; 1000]).unwrap();
            let opts = CgOptions { rtol: 1e-10, preconditioner, ..CgOptions::default() };
            let report = cg(&rt, &a, &b, &x, &opts).unwrap();
            let jacobi = preconditioner == Preconditioner::Jacobi;
            let (iterations, history) = unfused_cg(&rt, &a, &b, &x_ref, 1e-10, jacobi);
            assert!(iterations > 20, "{what}: a test problem of {iterations} iterations proves little");
            assert!(report.iterations.abs_diff(iterations) <= 1, "{what}: {} vs {iterations}", report.iterations);
            for (k, (got, want)) in report.residual_history.iter().zip(&history).take(20).enumerate() {
                assert!((got - want).abs() <= 1e-9 * want, "{what}: ||r|| after {k} iterations: {got:e} vs {want:e}");
            }
            let (xv, xr) = (x.values().unwrap(), x_ref.values().unwrap());
            let scale = xr.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let diff = xv.iter().zip(&xr).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            assert!(diff <= 1e-7 * scale, "{what}: x differs by {diff:e} (max |x| {scale:e})");
        }
    }
}

#[test]
fn dirichlet_rows_need_a_consistent_start_and_say_so_otherwise() {
    // A 1-D Laplacian with identity rows at both ends (`zero_rows`, columns
    // kept: unsymmetric), b = 0 there but x = 1: the boundary residual is
    // not zero and CG cannot converge; it must say so, never return an x.
    // From x = b on those rows the same system solves (`Mat::zero_rows`).
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let n = 200;
    let nodes = rt.set("nodes", n).unwrap();
    let conn: Vec<i32> = (1..n).flat_map(|i| [i as i32 - 1, i as i32]).collect();
    let a = graph_matrix(&rt, &nodes, &conn, &vec![1.0; n - 1], &vec![0.0; n]);
    let ends = rt.subset("ends", &nodes, vec![0, n - 1]).unwrap();
    a.zero_rows(&ends, 1.0).unwrap();
    let mut bv = vec![1.0; n];
    bv[0] = 0.0;
    bv[n - 1] = 0.0;
    let b = rt.dat("b", &nodes, 1, bv).unwrap();
    let opts = CgOptions {
        rtol: 1e-10,
        max_iterations: 5_000,
        preconditioner: Preconditioner::Jacobi,
        ..CgOptions::default()
    };
    let x = rt.dat("x", &nodes, 1, vec![1.0; n]).unwrap();
    let err = cg(&rt, &a, &b, &x, &opts).unwrap_err();
    assert!(matches!(err, Error::NotConverged { .. }), "{err}");
    let x = rt.dat("x0", &nodes, 1, vec![0.0; n]).unwrap();
    let report = cg(&rt, &a, &b, &x, &opts).unwrap();
    assert!(true_relative_residual(&a, &b, &x) < 1e-9, "{report:?}");
}

#[test]
fn user_names_like_the_solvers_own_neither_fail_it_nor_are_taken_over() {
    // The solver and the vector operations name their work vectors and
    // globals `cg#N:r`, `dot#N:sum`, ...: a user holding those names made
    // the solve fail with a duplicate name.
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let mut rng = Rng(77);
    let (nodes, a) = random_spd(&rt, &mut rng, 50, 1e-2);
    let mut held = Vec::new();
    for k in 0..64 {
        for role in ["r", "p", "q", "dinv", "dinv:ones"] {
            held.push(rt.dat(&format!("cg#{k}:{role}"), &nodes, 1, vec![k as f64; 50]).unwrap());
        }
        for role in ["rr", "sums", "alpha", "beta"] {
            held.push(rt.dat(&format!("cg#{k}:{role}"), &nodes, 1, vec![k as f64; 50]).unwrap());
        }
        held.push(rt.dat(&format!("dot#{k}:sum"), &nodes, 1, vec![k as f64; 50]).unwrap());
    }
    let b = rt.dat("b", &nodes, 1, (0..50).map(|_| rng.unit()).collect()).unwrap();
    let x = rt.dat("x", &nodes, 1, vec![0.0; 50]).unwrap();
    for preconditioner in [Preconditioner::Jacobi, Preconditioner::None] {
        let opts = CgOptions { rtol: 1e-10, preconditioner, ..CgOptions::default() };
        assert!(cg(&rt, &a, &b, &x, &opts).unwrap().converged);
    }
    assert!(rt.dot(&b, &b).unwrap() > 0.0);
    for d in &held {
        let k: f64 = d.name().split(['#', ':']).nth(1).unwrap().parse().unwrap();
        assert_eq!(d.values().unwrap(), vec![k; 50], "{} kept its values", d.name());
    }
}

/// A right-hand side near the ends of the range: its squares under- or
/// overflow. `norm2` underflowed to 0 for b = 1e-170, and CG took that
/// for b = 0 and returned x = 0 as converged; a tolerance of 0 ran the
/// residual into the underflow and was reported as a matrix that is not SPD.
#[test]
fn right_hand_sides_whose_squares_leave_the_range_are_refused_never_zeroed() {
    for backend in [Backend::Seq, Backend::Threads, device::device_backend()] {
        let rt = Runtime::with_backend(backend).unwrap();
        let nodes = rt.set("nodes", 3).unwrap();
        let a = graph_matrix(&rt, &nodes, &[0, 1, 1, 2], &[1.0, 1.0], &[2.0, 2.0, 2.0]);
        for scale in [1e-170, 1e-160, 1e160] {
            let b = rt.dat(&format!("b{scale:e}"), &nodes, 1, vec![scale; 3]).unwrap();
            let x = rt.dat(&format!("x{scale:e}"), &nodes, 1, vec![0.0; 3]).unwrap();
            let norm = rt.norm2(&b).unwrap();
            assert!((norm / (scale * 3f64.sqrt()) - 1.0).abs() < 1e-15, "{backend:?}: norm2 {norm:e} of {scale:e}");
            let err = cg(&rt, &a, &b, &x, &CgOptions::default()).unwrap_err();
            let Error::NotConverged { failure: SolveFailure::OutOfRange { rhs_norm }, .. } = &err else {
                panic!("{backend:?} {scale:e}: {err}")
            };
            assert_eq!(*rhs_norm, norm, "{backend:?}");
            assert!(err.to_string().contains("power of two"), "{err}");
        }
        // A tolerance of 0 on an SPD matrix: the residual falls until its
        // squares underflow, which is stagnation.
        let b = rt.dat("b", &nodes, 1, vec![1.0, -2.0, 0.5]).unwrap();
        let x = rt.dat("x", &nodes, 1, vec![0.0; 3]).unwrap();
        let opts = CgOptions { rtol: 0.0, atol: 0.0, max_iterations: 100_000, ..CgOptions::default() };
        match cg(&rt, &a, &b, &x, &opts) {
            Err(Error::NotConverged { failure: SolveFailure::Stagnated { .. }, .. }) => {}
            // Exact convergence (a zero residual) is fine too.
            Ok(r) => assert!(r.converged && r.relative_residual == 0.0, "{backend:?}: {r:?}"),
            other => panic!("{backend:?}: {other:?}"),
        }
    }
}

/// A tolerance of 0 that runs out of iterations: the updated residual had
/// fallen to 1e-70 and the error reported it, with a hint that the matrix
/// was not SPD. It is reported as stagnation, with the true residual.
#[test]
fn running_out_of_iterations_below_the_precision_reports_the_true_residual() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let (nodes, a) = laplacian_2d(&rt, 20);
    let b = rt.dat("b", &nodes, 1, (0..400).map(|k| (k as f64 * 0.37).sin()).collect()).unwrap();
    for solver in ["cg", "bicgstab"] {
        let x = rt.dat(&format!("x_{solver}"), &nodes, 1, vec![0.0; 400]).unwrap();
        let opts = CgOptions { rtol: 0.0, atol: 0.0, max_iterations: 400, ..CgOptions::default() };
        let got =
            if solver == "cg" { cg(&rt, &a, &b, &x, &opts) } else { parloop::solve::bicgstab(&rt, &a, &b, &x, &opts) };
        match got {
            Err(err @ Error::NotConverged { failure: SolveFailure::Stagnated { .. }, .. }) => {
                let Error::NotConverged { report, .. } = &err else { unreachable!() };
                let res = true_relative_residual(&a, &b, &x);
                assert!(
                    (report.relative_residual - res).abs() <= 0.1 * res,
                    "{solver}: {} vs {res:e}",
                    report.relative_residual
                );
                assert!(res > 1e-18 && res < 1e-12, "{solver}: {res:e}");
                assert!(err.to_string().contains("precision") && !err.to_string().contains("SPD"), "{err}");
            }
            other => panic!("{solver}: expected Stagnated, got {other:?}"),
        }
    }
}

/// A singular system with no solution (a graph Laplacian, no Dirichlet
/// row, b = e_0 outside its range) is diagnosed as such on every backend:
/// a breakdown or divergence here, or, where rounding keeps `p . Ap` positive (a P1
/// stiffness matrix on emu did), `Stagnated` far above any precision
/// floor, which the message now calls singular too (see the unit test of
/// its wording in `solve.rs`).
#[test]
fn a_singular_system_is_called_singular_on_every_backend() {
    for backend in [Backend::Seq, Backend::Threads, Backend::Emu] {
        let rt = Runtime::with_backend(backend).unwrap();
        let m = 9;
        let nodes = rt.set("nodes", m * m).unwrap();
        let mut conn = Vec::new();
        for i in 0..m {
            for j in 0..m {
                let k = (i * m + j) as i32;
                if i + 1 < m {
                    conn.extend([k, k + m as i32]);
                }
                if j + 1 < m {
                    conn.extend([k, k + 1]);
                }
            }
        }
        let w: Vec<f64> = (0..conn.len() / 2).map(|e| 1.0 + (e % 3) as f64 / 7.0).collect();
        let a = graph_matrix(&rt, &nodes, &conn, &w, &vec![0.0; m * m]);
        let mut e0 = vec![0.0; m * m];
        e0[0] = 1.0;
        let b = rt.dat("b", &nodes, 1, e0).unwrap();
        let x = rt.dat("x", &nodes, 1, vec![0.0; m * m]).unwrap();
        for preconditioner in [Preconditioner::None, Preconditioner::Jacobi] {
            rt.fill(&x, 0.0).unwrap();
            let opts = CgOptions { rtol: 1e-10, preconditioner, ..CgOptions::default() };
            let err = cg(&rt, &a, &b, &x, &opts).unwrap_err();
            assert!(
                matches!(
                    &err,
                    Error::NotConverged {
                        failure: SolveFailure::Breakdown { .. }
                            | SolveFailure::Stagnated { .. }
                            | SolveFailure::Diverged { .. },
                        ..
                    }
                ),
                "{backend:?}, {preconditioner:?}: {err}"
            );
            let text = err.to_string();
            assert!(text.contains("singular") && !text.contains("loosen"), "{backend:?}, {preconditioner:?}: {text}");
        }
    }
}

/// Tridiagonal, nonsymmetric: `1` on the diagonal per edge end, `-1 + 30`
/// above and `-1 - 30` below (its symmetric part is the 1-D Laplacian's,
/// so `p . Ap` stays positive and CG never breaks down).
#[parloop::kernel]
fn skew_edge(a: &mut [[f64; 2]; 2]) {
    a[0][0] += 1.0;
    a[0][1] += 29.0;
    a[1][0] -= 31.0;
    a[1][1] += 1.0;
}

/// CG on a nonsymmetric matrix whose residual grows: it ran all
/// `max_iterations` (10 000) before saying so; now it stops once the
/// residual passes `divergence_tolerance` (PETSc's `divtol`, 1e4) times
/// its initial norm, and names BiCGStab, which solves it.
#[test]
fn a_diverging_solve_stops_early_and_says_why() {
    for backend in [Backend::Seq, Backend::Threads, Backend::Emu] {
        let rt = Runtime::with_backend(backend).unwrap();
        let n = 40;
        let nodes = rt.set("nodes", n).unwrap();
        let edges = rt.set("edges", n - 1).unwrap();
        let e2n = rt.map("e2n", &edges, &nodes, 2, (0..n as i32 - 1).flat_map(|e| [e, e + 1]).collect()).unwrap();
        let a = rt.mat::<f64>("A", &rt.sparsity("s", &[(&e2n, &e2n)], (1, 1)).unwrap()).unwrap();
        rt.par_loop(skew_edge::KERNEL, &edges, &[a.arg(&e2n, &e2n, Access::INC)]).unwrap();
        // Not constant: the interior rows sum to 0.
        let b = rt.dat("b", &nodes, 1, (0..n).map(|i| 1.0 + (i % 5) as f64).collect()).unwrap();
        let x = rt.dat("x", &nodes, 1, vec![0.0; n]).unwrap();
        let err = cg(&rt, &a, &b, &x, &CgOptions::default()).unwrap_err();
        let Error::NotConverged { failure: SolveFailure::Diverged { residual, initial, iterations }, report, .. } =
            &err
        else {
            panic!("{backend:?}: {err}")
        };
        assert!(*iterations < 1000 && report.iterations == *iterations, "{backend:?}: {iterations} iterations");
        assert!(*residual > 1e4 * initial, "{backend:?}: {residual:e} vs {initial:e}");
        assert!(err.to_string().contains("bicgstab"), "{err}");
        // Without the tolerance it runs to the limit, as before.
        rt.fill(&x, 0.0).unwrap();
        let patient = CgOptions { max_iterations: 1500, divergence_tolerance: f64::INFINITY, ..CgOptions::default() };
        let err = cg(&rt, &a, &b, &x, &patient).unwrap_err();
        assert!(matches!(&err, Error::NotConverged { failure: SolveFailure::MaxIterations { .. }, .. }), "{err}");
        // BiCGStab solves it.
        rt.fill(&x, 0.0).unwrap();
        let report = bicgstab(&rt, &a, &b, &x, &CgOptions { rtol: 1e-10, ..CgOptions::default() }).unwrap();
        assert!(report.converged, "{backend:?}: {report:?}");
        // A tolerance below 1 would stop sound solves at their first steps.
        let err = cg(&rt, &a, &b, &x, &CgOptions { divergence_tolerance: 0.5, ..CgOptions::default() }).unwrap_err();
        assert!(err.to_string().contains("divergence_tolerance"), "{err}");
    }
}
