//! The Poisson demo and the L2 projection: orders of convergence in 2-D
//! and 3-D on seq, threads and the device backend (emu here and in CI,
//! cuda where `PARLOOP_TEST_DEVICE=cuda`), backends against seq, the error
//! integrals and quadrature rules against exact values, a Gmsh mesh
//! against a dense solve of a system assembled independently here, and
//! the CLI.

use parloop::{Backend, Runtime};
use parloop_examples::poisson::kernels::{TET14, TET4, TRI3, TRI7};
use parloop_examples::poisson::{order, Errors, Function, Mode, Problem};
use parloop_mesh::{unit_cube, unit_square, Mesh};

/// `emu` unless `PARLOOP_TEST_DEVICE` says `cuda` (runtime/tests/support/device.rs).
fn device_backend() -> Backend {
    match std::env::var("PARLOOP_TEST_DEVICE").as_deref() {
        Err(_) | Ok("") | Ok("emu") => Backend::Emu,
        Ok("cuda") => Backend::Cuda,
        Ok(other) => panic!("PARLOOP_TEST_DEVICE={other}: expected emu or cuda"),
    }
}

fn mesh(dim: usize, n: usize) -> Mesh {
    if dim == 2 {
        unit_square(n, n).unwrap()
    } else {
        unit_cube(n, n, n).unwrap()
    }
}

fn poisson() -> Mode {
    Mode::Poisson { dirichlet: "boundary".into() }
}

/// Assembles and solves `mode` for `f` on `backend`; the solution and its
/// errors against `exact`.
fn solve(backend: Backend, mesh: &Mesh, mode: Mode, f: &Function, exact: &Function) -> (Vec<f64>, Errors) {
    let rt = Runtime::with_backend(backend).unwrap();
    let mut p = Problem::new(&rt, mesh, mode).unwrap();
    p.assemble(f).unwrap();
    let report = p.solve(1e-10).unwrap();
    assert!(report.converged && report.relative_residual <= 1e-10, "{report:?}");
    let e = p.errors(exact).unwrap();
    (p.u.values().unwrap(), e)
}

/// max |a - b| / max |b|.
fn relative(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max((x - y).abs())) / scale
}

/// Solves on each mesh size of `sizes` on seq, threads and the device,
/// checks that the backends agree to 1e-10 and that the orders between
/// consecutive meshes lie in `l2` and (if given) `h1`.
fn convergence(dim: usize, sizes: &[usize], mode: Mode, f: &Function, exact: &Function, h1: Option<(f64, f64)>) {
    let l2 = (1.9, 2.1);
    for backend in [Backend::Seq, Backend::Threads, device_backend()] {
        let mut errors = Vec::new();
        for &n in sizes {
            let m = mesh(dim, n);
            let (u, e) = solve(backend, &m, mode.clone(), f, exact);
            if backend != Backend::Seq {
                let (u_seq, _) = solve(Backend::Seq, &m, mode.clone(), f, exact);
                let d = relative(&u, &u_seq);
                eprintln!("{dim}-D n = {n}: {backend} differs from seq by {d:.1e} (relative)");
                assert!(d < 1e-10, "{dim}-D n = {n}: {backend} differs from seq by {d:e}");
            }
            errors.push((n, e));
        }
        for w in errors.windows(2) {
            let ((n0, a), (n1, b)) = (w[0], w[1]);
            let r = n1 as f64 / n0 as f64;
            let (o2, o1) = (order(a.l2, b.l2, r), order(a.h1, b.h1, r));
            eprintln!(
                "{mode:?} {dim}-D {backend} n {n0} -> {n1}: L2 {:.2e} order {o2:.3}, H1 {:.2e} order {o1:.3}",
                b.l2, b.h1
            );
            assert!(l2.0 <= o2 && o2 <= l2.1, "{dim}-D {backend} n {n0} -> {n1}: L2 order {o2}");
            if let Some((lo, hi)) = h1 {
                assert!(lo <= o1 && o1 <= hi, "{dim}-D {backend} n {n0} -> {n1}: H1 order {o1}");
            }
        }
    }
}

#[test]
fn poisson_2d_converges_at_order_2_in_l2_and_1_in_h1() {
    let (f, u) = (Function::manufactured_rhs(2), Function::manufactured_solution());
    convergence(2, &[8, 16, 32, 64], poisson(), &f, &u, Some((0.9, 1.1)));
}

#[test]
fn poisson_3d_converges_at_order_2_in_l2_and_1_in_h1() {
    // From n = 8: between 4 and 8 the L2 order is still 1.82 (pre-asymptotic).
    let (f, u) = (Function::manufactured_rhs(3), Function::manufactured_solution());
    convergence(3, &[8, 12, 16, 20], poisson(), &f, &u, Some((0.9, 1.1)));
}

#[test]
fn l2_projection_converges_at_order_2() {
    // g is not zero on the boundary (no boundary condition is imposed).
    let g = Function { sines: 1.0, constant: 0.0, square: 1.0 };
    convergence(2, &[8, 16, 32, 64], Mode::Projection, &g, &g, Some((0.9, 1.1)));
    convergence(3, &[4, 8, 12, 16], Mode::Projection, &g, &g, None);
}

#[test]
fn the_projection_of_a_p1_function_is_itself() {
    // 1 + |x|^2 is not P1, but a constant is: its projection is exact.
    let c = Function::constant(2.5);
    for dim in [2, 3] {
        let (u, e) = solve(Backend::Seq, &mesh(dim, 5), Mode::Projection, &c, &c);
        assert!(u.iter().all(|&x| (x - 2.5).abs() < 1e-9), "{dim}-D: {u:?}");
        assert!(e.l2 < 1e-9 && e.h1 < 1e-9, "{dim}-D: {e:?}");
    }
}

#[test]
fn error_integrals_of_zero_are_the_norms_of_the_exact_solution() {
    // With u_h = 0 (before any solve) the "errors" are the norms of
    // prod sin(pi x_k) over the unit square (cube): L2^2 = 2^-d, H1^2 =
    // d pi^2 2^-d.
    for (dim, n) in [(2, 16), (3, 8)] {
        let rt = Runtime::with_backend(Backend::Seq).unwrap();
        let mut p = Problem::new(&rt, &mesh(dim, n), poisson()).unwrap();
        let e = p.errors(&Function::manufactured_solution()).unwrap();
        let half = 0.5f64.powi(dim as i32);
        let (l2, h1) = (half.sqrt(), (dim as f64 * std::f64::consts::PI.powi(2) * half).sqrt());
        assert!((e.l2 - l2).abs() < 1e-6 * l2, "{dim}-D: L2 {} vs {l2}", e.l2);
        assert!((e.h1 - h1).abs() < 1e-6 * h1, "{dim}-D: H1 {} vs {h1}", e.h1);
    }
}

/// `integral over the reference simplex of prod_k lambda_k^a_k =
/// prod a_k! / (sum a_k + d)!` times `d!` (the rules' weights sum to 1).
fn simplex_moment(powers: &[u32]) -> f64 {
    let fact = |n: u32| (1..=n).map(f64::from).product::<f64>();
    let d = powers.len() as u32 - 1;
    powers.iter().map(|&a| fact(a)).product::<f64>() / fact(powers.iter().sum::<u32>() + d) * fact(d)
}

#[test]
fn quadrature_rules_are_exact_to_their_degree() {
    // Every monomial in the barycentric coordinates up to the degree.
    let check = |name: &str, points: &[(&[f64], f64)], bary: usize, degree: u32| {
        let weights: f64 = points.iter().map(|p| p.1).sum();
        assert!((weights - 1.0).abs() < 1e-15, "{name}: weights sum to {weights}");
        let mut powers = vec![0u32; bary];
        let mut checked = 0;
        loop {
            if powers.iter().sum::<u32>() <= degree {
                let q: f64 = points
                    .iter()
                    .map(|(l, w)| w * powers.iter().zip(*l).map(|(&a, x)| x.powi(a as i32)).product::<f64>())
                    .sum();
                let exact = simplex_moment(&powers);
                assert!((q - exact).abs() < 1e-14 * exact, "{name}: powers {powers:?}: {q} vs {exact}");
                checked += 1;
            }
            // Next exponent tuple (odometer up to `degree` per digit).
            let mut k = 0;
            while k < bary && powers[k] == degree {
                powers[k] = 0;
                k += 1;
            }
            if k == bary {
                break;
            }
            powers[k] += 1;
        }
        assert!(checked > 1);
    };
    let tri3: Vec<(&[f64], f64)> = TRI3.iter().map(|p| (&p[..], 1.0 / 3.0)).collect();
    let tet4: Vec<(&[f64], f64)> = TET4.iter().map(|p| (&p[..], 0.25)).collect();
    let tri7: Vec<(&[f64], f64)> = TRI7.iter().map(|p| (&p[..3], p[3])).collect();
    let tet14: Vec<(&[f64], f64)> = TET14.iter().map(|p| (&p[..4], p[4])).collect();
    check("TRI3", &tri3, 3, 2);
    check("TET4", &tet4, 4, 2);
    check("TRI7", &tri7, 3, 5);
    check("TET14", &tet14, 4, 5);
    for p in TRI7.iter().map(|p| &p[..3]).chain(TET14.iter().map(|p| &p[..4])) {
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-15, "{p:?}");
    }
}

/// `-laplace(u) = f` (constant `f`) with `u = g` on `boundary`, assembled
/// here with the textbook triangle formula `K_ij = e_i . e_j / (4 |T|)`
/// (`e_i` the edge opposite vertex `i`) and `b_i = f |T| / 3`, reduced to
/// the interior vertices (`b_I - K_IB g`) and solved by dense Cholesky.
fn dense_reference(mesh: &Mesh, boundary: &[u32], f: f64, g: &Function) -> Vec<f64> {
    let n = mesh.vertices();
    let mut on_boundary = vec![false; n];
    for &v in boundary {
        on_boundary[v as usize] = true;
    }
    let interior: Vec<usize> = (0..n).filter(|&v| !on_boundary[v]).collect();
    let mut row = vec![usize::MAX; n];
    for (k, &v) in interior.iter().enumerate() {
        row[v] = k;
    }
    let m = interior.len();
    let (mut k, mut b) = (vec![0.0; m * m], vec![0.0; m]);
    for c in mesh.cells.chunks(3) {
        let x = |i: usize| [mesh.coords[2 * c[i] as usize], mesh.coords[2 * c[i] as usize + 1]];
        let e: Vec<[f64; 2]> = (0..3)
            .map(|i| {
                let (a, b) = (x((i + 1) % 3), x((i + 2) % 3));
                [b[0] - a[0], b[1] - a[1]]
            })
            .collect();
        let area = 0.5 * (e[0][0] * e[1][1] - e[0][1] * e[1][0]).abs();
        for i in 0..3 {
            let ri = row[c[i] as usize];
            if ri == usize::MAX {
                continue;
            }
            b[ri] += f * area / 3.0;
            for j in 0..3 {
                let kij = (e[i][0] * e[j][0] + e[i][1] * e[j][1]) / (4.0 * area);
                match row[c[j] as usize] {
                    usize::MAX => b[ri] -= kij * g.eval(&x(j)),
                    rj => k[ri * m + rj] += kij,
                }
            }
        }
    }
    // Cholesky: K = L L^T, L in the lower triangle of k.
    for j in 0..m {
        let d = k[j * m + j] - (0..j).map(|p| k[j * m + p] * k[j * m + p]).sum::<f64>();
        assert!(d > 0.0, "the reference matrix is not positive definite at {j}");
        let d = d.sqrt();
        k[j * m + j] = d;
        for i in j + 1..m {
            let s = k[i * m + j] - (0..j).map(|p| k[i * m + p] * k[j * m + p]).sum::<f64>();
            k[i * m + j] = s / d;
        }
    }
    for i in 0..m {
        b[i] = (b[i] - (0..i).map(|p| k[i * m + p] * b[p]).sum::<f64>()) / k[i * m + i];
    }
    for i in (0..m).rev() {
        b[i] = (b[i] - (i + 1..m).map(|p| k[p * m + i] * b[p]).sum::<f64>()) / k[i * m + i];
    }
    let mut u: Vec<f64> = mesh.coords.chunks(2).map(|x| g.eval(x)).collect();
    for (k, &v) in interior.iter().enumerate() {
        u[v] = b[k];
    }
    u
}

fn data(file: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../mesh/data").join(file)
}

#[test]
fn gmsh_disk_matches_a_dense_solve_and_the_exact_solution() {
    // -laplace(u) = 4 on the unit disk, u = 0 on its boundary: u = 1 - r^2.
    let mesh = parloop_mesh::gmsh::read(data("disk-41-bin.msh")).unwrap();
    assert_eq!(mesh.dim, 2);
    // The file has no "boundary" group: the demo takes every boundary facet's vertices.
    assert!(mesh.vertex_group("boundary").is_none());
    let mut boundary: Vec<u32> = mesh.facets.clone();
    boundary.sort_unstable();
    boundary.dedup();
    // Every boundary vertex lies on the circle, and "upper" and "lower" cover them.
    for &v in &boundary {
        let (x, y) = (mesh.coords[2 * v as usize], mesh.coords[2 * v as usize + 1]);
        assert!((x * x + y * y - 1.0).abs() < 1e-9, "vertex {v} at ({x}, {y})");
    }
    let reference = dense_reference(&mesh, &boundary, 4.0, &Function::constant(0.0));
    let exact = Function { sines: 0.0, constant: 1.0, square: -1.0 };
    for backend in [Backend::Seq, Backend::Threads, device_backend()] {
        let (u, e) = solve(backend, &mesh, poisson(), &Function::constant(4.0), &exact);
        let d = relative(&u, &reference);
        eprintln!("disk on {backend}: {d:.1e} from the dense solve; L2 error {:.2e}, H1 {:.2e}", e.l2, e.h1);
        assert!(d < 1e-9, "{backend}: {d:e} from the dense solve");
        // h = 0.2: the P1 error (and the polygon's, inside the circle) is
        // of order h^2 in L2 and h in H1; ||u||_L2 = sqrt(pi / 3) = 1.02.
        assert!(e.l2 < 0.02 && e.h1 < 0.3, "{backend}: {e:?}");
    }
    // A named group: u = 0 on the upper arc only (homogeneous Neumann on
    // the lower one) is another problem; the dense solve agrees again.
    let upper = mesh.vertex_group("upper").unwrap().entities.clone();
    let reference = dense_reference(&mesh, &upper, 4.0, &Function::constant(0.0));
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let mut p = Problem::new(&rt, &mesh, Mode::Poisson { dirichlet: "upper".into() }).unwrap();
    p.assemble(&Function::constant(4.0)).unwrap();
    p.solve(1e-10).unwrap();
    let d = relative(&p.u.values().unwrap(), &reference);
    assert!(d < 1e-9, "upper arc: {d:e} from the dense solve");
}

#[test]
fn boundary_values_on_a_gmsh_mesh_match_a_dense_solve() {
    // -laplace(u) = 4 with u = g = 2 - |x|^2 on the boundary of the
    // L-shape (not zero there): u = g. The demo imposed zero Dirichlet
    // values whatever the exact solution's were.
    let mesh = parloop_mesh::gmsh::read(data("lshape-41-bin.msh")).unwrap();
    let mut boundary: Vec<u32> = mesh.facets.clone();
    boundary.sort_unstable();
    boundary.dedup();
    let g = Function { sines: 0.0, constant: 2.0, square: -1.0 };
    let reference = dense_reference(&mesh, &boundary, 4.0, &g);
    for backend in [Backend::Seq, Backend::Threads, device_backend()] {
        let rt = Runtime::with_backend(backend).unwrap();
        let mut p = Problem::new(&rt, &mesh, poisson()).unwrap();
        p.assemble_with_boundary_values(&Function::constant(4.0), &g).unwrap();
        let report = p.solve(1e-10).unwrap();
        assert!(report.converged, "{backend}: {report:?}");
        let d = relative(&p.u.values().unwrap(), &reference);
        let e = p.errors(&g).unwrap();
        eprintln!("L-shape on {backend}: {d:.1e} from the dense solve; L2 error {:.2e}, H1 {:.2e}", e.l2, e.h1);
        assert!(d < 1e-9, "{backend}: {d:e} from the dense solve");
        assert!(e.l2 < 0.02 && e.h1 < 0.3, "{backend}: {e:?}");
    }
}

#[test]
fn bad_dirichlet_groups_are_errors_naming_them() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let mesh = unit_square(4, 4).unwrap();
    let e = Problem::new(&rt, &mesh, Mode::Poisson { dirichlet: "inlet".into() }).err().unwrap().to_string();
    assert!(e.contains("inlet") && e.contains("left.vertices"), "{e}");
}

fn cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_poisson")).args(args).output().unwrap()
}

#[test]
fn cli_help_runs_errors_and_output() {
    let help = cli(&["--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success());
    for word in
        ["--dim", "--mesh-size", "--mesh", "--rhs", "--dirichlet", "boundary", "--mode", "--output", "--backend"]
    {
        assert!(text.contains(word), "--help lacks {word}: {text}");
    }

    // A mesh far beyond memory is refused before it is generated (it was
    // generated until the kernel killed the process).
    let huge = cli(&["--dim", "3", "--mesh-size", "20000", "--quiet"]);
    let err = String::from_utf8_lossy(&huge.stderr);
    assert!(!huge.status.success() && err.contains("--mesh-size 20000") && err.contains("memory"), "{err}");

    let missing = "/nonexistent/parloop-poisson.msh";
    let bad = cli(&["--mesh", missing]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains(missing), "{err}");
    let bad = cli(&["--rhs", "four"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("four"));
    let bad = cli(&["--mode", "projection", "--rhs", "3"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("projection"));
    let bad = cli(&["--mesh-size", "0"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("0 divisions"));
    // Without the mpi feature (this build), --partition says how to get it.
    if !cfg!(feature = "mpi") {
        let bad = cli(&["--partition", "metis", "--mesh-size", "4"]);
        let err = String::from_utf8_lossy(&bad.stderr);
        assert!(!bad.status.success() && err.contains("--features mpi"), "{err}");
    }

    let dir = std::env::temp_dir().join(format!("parloop-poisson-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ok = cli(&[
        "--backend",
        "seq",
        "--quiet",
        "--mesh-size",
        "8",
        "--refinements",
        "2",
        "--output",
        dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{stdout}{}", String::from_utf8_lossy(&ok.stderr));
    for part in ["unit_square(16, 16)", "289 vertices", "sparsity", "assembly", "CG iterations", "L2 error", "orders"] {
        assert!(stdout.contains(part), "no `{part}` in {stdout}");
    }
    let vtu = std::fs::read(dir.join("poisson.vtu")).unwrap();
    let vtu = String::from_utf8_lossy(&vtu);
    for name in ["\"u\"", "\"exact\"", "\"error\""] {
        assert!(vtu.contains(&format!("Name={name}")), "no point data {name}");
    }
    std::fs::remove_dir_all(&dir).unwrap();

    let disk = data("lshape-22-ascii.msh");
    let ok =
        cli(&["--backend", "seq", "--quiet", "--mesh", disk.to_str().unwrap(), "--rhs", "1", "--dirichlet", "inlet"]);
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success() && stdout.contains("max u"), "{stdout}{}", String::from_utf8_lossy(&ok.stderr));
    let ok = cli(&["--backend", "seq", "--quiet", "--mode", "projection", "--dim", "3", "--mesh-size", "3"]);
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success() && stdout.contains("projection: unit_cube(3, 3, 3)"), "{stdout}");
}

/// `PARLOOP_PROFILE=1` prints the table of the runtime that ran the loops
/// and no other: the runtime that only asks for the rank printed an empty
/// table first (and, with `json:FILE`, wrote the file the real one then
/// had to overwrite).
#[test]
fn cli_profile_shows_one_table() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_poisson"))
        .args(["--mesh-size", "6", "--backend", "seq", "--quiet"])
        .env("PARLOOP_PROFILE", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("parloop profile (").count(), 1, "{err}");
    assert!(err.contains("stiffness"), "{err}");
}

/// The errors the CLI prints are against a true solution, or not printed.
#[test]
fn cli_errors_are_against_a_true_solution_or_refused() {
    let l2 = |stdout: &str| -> f64 {
        let rest = &stdout[stdout.find("L2 error ").expect(stdout) + 9..];
        rest.split(',').next().unwrap().parse().unwrap()
    };
    // On the disk (radius 1, h about 0.2) the manufactured solution is not
    // zero on the boundary: with zero Dirichlet values its "L2 error" was
    // 0.38; with its own values it is the P1 error, 0.047.
    let disk = data("disk-41-bin.msh");
    let out = cli(&["--backend", "seq", "--quiet", "--mesh", disk.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let e = l2(&stdout);
    assert!(e > 0.03 && e < 0.06, "{stdout}");
    // Part of the boundary left free (zero flux there) makes the
    // manufactured solution no solution: refused ("orders" near 0 were printed).
    let out = cli(&["--backend", "seq", "--quiet", "--mesh-size", "4", "--refinements", "2", "--dirichlet", "left"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--dirichlet") && err.contains("--rhs C") && out.stdout.is_empty(), "{err}");
    // With a constant right-hand side it runs, prints the range of u (not
    // a "max u" of 0 for a negative solution) and no empty orders table.
    let out = cli(&["--backend", "seq", "--quiet", "--mesh-size", "4", "--refinements", "2", "--rhs", "-4"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("min u -2.") && stdout.contains("max u 0.0"), "{stdout}");
    assert!(!stdout.contains("orders"), "{stdout}");
}

/// Options that contradict each other or cannot be used are refused
/// before any work.
#[test]
fn cli_refuses_contradictions_before_solving() {
    // --dim was ignored with --mesh.
    let disk = data("disk-41-bin.msh");
    let out = cli(&["--backend", "seq", "--quiet", "--mesh", disk.to_str().unwrap(), "--dim", "3"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(1) && err.contains("--dim") && err.contains("2-D mesh"), "{err}");
    let cube = data("cube_hole-41-bin.msh");
    let out = cli(&["--backend", "seq", "--quiet", "--mesh", cube.to_str().unwrap(), "--dim", "2"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(1) && err.contains("3-D mesh"), "{err}");
    let out = cli(&["--backend", "seq", "--quiet", "--mesh", cube.to_str().unwrap(), "--dim", "3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // --output under a file was found out after the solve, and a file as
    // the folder said "File exists".
    let file = std::env::temp_dir().join(format!("parloop-poisson-cli-file-{}", std::process::id()));
    std::fs::write(&file, "not a folder").unwrap();
    let f = file.to_str().unwrap();
    let under = format!("{f}/sub");
    let out = cli(&["--backend", "seq", "--quiet", "--mesh-size", "4", "--output", &under]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(1) && err.contains(&format!("{f} exists and is not a directory")), "{err}");
    assert!(out.stdout.is_empty(), "it solved first: {}", String::from_utf8_lossy(&out.stdout));
    let out = cli(&["--backend", "seq", "--quiet", "--mesh-size", "4", "--output", f]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(1) && err.contains("exists and is not a directory"), "{err}");
    std::fs::remove_file(&file).unwrap();

    // An empty --backend was taken as auto.
    let out = cli(&["--backend", "", "--quiet", "--mesh-size", "4"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(1) && err.contains("--backend") && err.contains("empty"), "{err}");
    // A negative count said "invalid digit found in string".
    let out = cli(&["--mesh-size", "-3"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(2) && err.contains("not a non-negative integer"), "{err}");
}
