//! Vector operations and the host SpMV against plain Rust: every operation
//! on seq, threads and the device backend (emu, or cuda where
//! `PARLOOP_TEST_DEVICE=cuda`), dims 1 to 4, f64 and f32; reductions
//! deterministic run to run and across thread counts; SpMV (and the
//! diagonal) against a dense product of the same element matrices on every
//! backend; errors that name the dats.

#[path = "support/device.rs"]
mod device;

use parloop::{Access, Backend, Dat, Error, Runtime, Set};

#[path = "support/solvers.rs"]
mod solvers;
use solvers::Rng;

fn backends() -> Vec<Backend> {
    vec![Backend::Seq, Backend::Threads, device::device_backend()]
}

/// `a` and `b` agree to `rel` relative to the larger magnitude (and 1e-300).
fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-300)
}

fn assert_all_close(got: &[f64], want: &[f64], rel: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(close(*g, *w, rel), "{what}: value {i}: {g} vs {w}");
    }
}

#[test]
fn vector_operations_match_plain_rust_on_every_backend_and_dim() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for backend in backends() {
        let rt = Runtime::with_backend(backend).unwrap();
        // 5000 entities: several threads chunks (2048) and device blocks.
        let set = rt.set("nodes", 5000).unwrap();
        for dim in 1..=4 {
            let n = 5000 * dim;
            let (xv, yv, mv) = (rng.signed_vec(n), rng.signed_vec(n), rng.signed_vec(n));
            let what = |op: &str| format!("{backend:?} dim {dim} {op}");
            let dat = |name: &str, v: &[f64]| rt.dat(&format!("{name}{dim}"), &set, dim, v.to_vec()).unwrap();
            let (x, y, m) = (dat("x", &xv), dat("y", &yv), dat("m", &mv));
            let w = dat("w", &vec![0.0; n]);

            rt.axpy(0.75, &x, &y).unwrap();
            let want: Vec<f64> = xv.iter().zip(&yv).map(|(a, b)| b + 0.75 * a).collect();
            // 1e-15: a device may fuse the multiply-add (one rounding instead of two).
            assert_all_close(&y.values().unwrap(), &want, 1e-15, &what("axpy"));

            y.set_values(&yv).unwrap();
            rt.axpby(-1.5, &x, 0.25, &y).unwrap();
            let want: Vec<f64> = xv.iter().zip(&yv).map(|(a, b)| -1.5 * a + 0.25 * b).collect();
            assert_all_close(&y.values().unwrap(), &want, 1e-15, &what("axpby"));

            y.set_values(&yv).unwrap();
            rt.scale(3.0, &y).unwrap();
            let want: Vec<f64> = yv.iter().map(|b| 3.0 * b).collect();
            assert_all_close(&y.values().unwrap(), &want, 0.0, &what("scale"));

            y.set_values(&yv).unwrap();
            let want: f64 = xv.iter().zip(&yv).map(|(a, b)| a * b).sum();
            let scale: f64 = xv.iter().zip(&yv).map(|(a, b)| (a * b).abs()).sum();
            let got = rt.dot(&x, &y).unwrap();
            assert!((got - want).abs() <= 1e-14 * scale, "{}: {got} vs {want}", what("dot"));
            let want: f64 = xv.iter().map(|a| a * a).sum::<f64>().sqrt();
            assert!(close(rt.norm2(&x).unwrap(), want, 1e-14), "{}", what("norm2"));
            assert!(close(rt.dot(&x, &x).unwrap(), want * want, 1e-14), "{}", what("dot(x, x)"));

            rt.copy_from(&w, &x).unwrap();
            assert_eq!(w.values().unwrap(), xv, "{}", what("copy_from"));
            rt.fill(&w, -2.5).unwrap();
            assert_eq!(w.values().unwrap(), vec![-2.5; n], "{}", what("fill"));

            rt.pointwise_mult(&w, &x, &m).unwrap();
            let want: Vec<f64> = xv.iter().zip(&mv).map(|(a, b)| a * b).collect();
            assert_all_close(&w.values().unwrap(), &want, 0.0, &what("pointwise_mult"));
            rt.pointwise_divide(&w, &x, &m).unwrap();
            let want: Vec<f64> = xv.iter().zip(&mv).map(|(a, b)| a / b).collect();
            assert_all_close(&w.values().unwrap(), &want, 0.0, &what("pointwise_divide"));
        }
    }
}

#[test]
fn aliased_arguments_compute_what_they_say() {
    for backend in backends() {
        let rt = Runtime::with_backend(backend).unwrap();
        let set = rt.set("s", 100).unwrap();
        let v: Vec<f64> = (0..100).map(|i| 1.0 + i as f64).collect();
        let m: Vec<f64> = (0..100).map(|i| 2.0 + (i % 7) as f64).collect();
        let x = rt.dat("x", &set, 1, v.clone()).unwrap();
        let d = rt.dat("d", &set, 1, m.clone()).unwrap();
        let what = format!("{backend:?}");

        rt.axpy(2.0, &x, &x).unwrap(); // x = 2x + x
        assert_eq!(x.values().unwrap(), v.iter().map(|a| 3.0 * a).collect::<Vec<_>>(), "{what} axpy");
        x.set_values(&v).unwrap();
        rt.axpby(2.0, &x, 0.5, &x).unwrap();
        assert_eq!(x.values().unwrap(), v.iter().map(|a| 2.5 * a).collect::<Vec<_>>(), "{what} axpby");
        x.set_values(&v).unwrap();
        rt.copy_from(&x, &x).unwrap();
        assert_eq!(x.values().unwrap(), v, "{what} copy onto itself");

        rt.pointwise_mult(&x, &x, &d).unwrap(); // x = x .* d
        let want: Vec<f64> = v.iter().zip(&m).map(|(a, b)| a * b).collect();
        assert_eq!(x.values().unwrap(), want, "{what} mult w = x");
        x.set_values(&v).unwrap();
        rt.pointwise_mult(&x, &d, &x).unwrap(); // x = d .* x
        assert_eq!(x.values().unwrap(), want, "{what} mult w = y");
        x.set_values(&v).unwrap();
        rt.pointwise_divide(&x, &x, &d).unwrap(); // x = x ./ d
        let want: Vec<f64> = v.iter().zip(&m).map(|(a, b)| a / b).collect();
        assert_eq!(x.values().unwrap(), want, "{what} divide w = x");
        x.set_values(&v).unwrap();
        rt.pointwise_divide(&x, &d, &x).unwrap(); // x = d ./ x
        let want: Vec<f64> = v.iter().zip(&m).map(|(a, b)| b / a).collect();
        assert_eq!(x.values().unwrap(), want, "{what} divide w = y");
        x.set_values(&v).unwrap();
        assert!(matches!(rt.pointwise_mult(&x, &x, &x), Err(Error::Incompatible { .. })));
    }
}

#[test]
fn f32_operations_match_plain_rust() {
    let mut rng = Rng(42);
    for backend in backends() {
        let rt = Runtime::with_backend(backend).unwrap();
        let set = rt.set("s", 3000).unwrap();
        for dim in [1, 3] {
            let n = 3000 * dim;
            let xv: Vec<f32> = rng.signed_vec(n).into_iter().map(|v| v as f32).collect();
            let yv: Vec<f32> = rng.signed_vec(n).into_iter().map(|v| v as f32).collect();
            let x = rt.dat(&format!("x{dim}"), &set, dim, xv.clone()).unwrap();
            let y = rt.dat(&format!("y{dim}"), &set, dim, yv.clone()).unwrap();
            rt.axpy(0.5f32, &x, &y).unwrap();
            for (i, (g, (a, b))) in y.values().unwrap().iter().zip(xv.iter().zip(&yv)).enumerate() {
                let want = b + 0.5 * a;
                assert!((g - want).abs() <= 1e-6 * want.abs().max(1e-30), "{backend:?} {i}: {g} vs {want}");
            }
            let want: f64 = xv.iter().map(|&a| a as f64 * a as f64).sum();
            let got = rt.dot(&x, &x).unwrap() as f64;
            assert!(close(got, want, 1e-5), "{backend:?} dim {dim}: f32 dot {got} vs {want}");
        }
    }
}

#[test]
fn reductions_are_deterministic_run_to_run_and_across_thread_counts() {
    let mut rng = Rng(7);
    // Values over many magnitudes, so that the order of additions shows.
    let xv: Vec<f64> = (0..100_000).map(|i: i32| rng.signed() * 10f64.powi(i % 17 - 8)).collect();
    let yv = rng.signed_vec(100_000);
    for backend in backends() {
        let rt = Runtime::with_backend(backend).unwrap();
        let set = rt.set("s", 100_000).unwrap();
        let x = rt.dat("x", &set, 1, xv.clone()).unwrap();
        let y = rt.dat("y", &set, 1, yv.clone()).unwrap();
        let first = rt.dot(&x, &y).unwrap();
        for _ in 0..5 {
            assert_eq!(rt.dot(&x, &y).unwrap().to_bits(), first.to_bits(), "{backend:?}: dot changed between runs");
        }
        if backend == Backend::Threads {
            for threads in [1, 2, 3, 8] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let got = pool.install(|| rt.dot(&x, &y).unwrap());
                assert_eq!(got.to_bits(), first.to_bits(), "threads: dot with {threads} threads differs");
            }
        }
    }
}

#[test]
fn mismatched_dats_are_errors_naming_them() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let nodes = rt.set("nodes", 10).unwrap();
    let cells = rt.set("cells", 10).unwrap();
    let x = rt.dat("x", &nodes, 1, vec![1.0; 10]).unwrap();
    let y = rt.dat("y", &cells, 1, vec![1.0; 10]).unwrap();
    let z = rt.dat("z", &nodes, 2, vec![1.0; 20]).unwrap();
    let big = rt.dat("big", &nodes, 5, vec![1.0; 50]).unwrap();
    let msg = rt.axpy(1.0, &x, &y).unwrap_err().to_string();
    assert!(msg.contains("`x`") && msg.contains("`y`") && msg.contains("`cells`") && msg.contains("`nodes`"), "{msg}");
    let msg = rt.dot(&x, &z).unwrap_err().to_string();
    assert!(msg.contains("`z`") && msg.contains("dim 2") && msg.contains("dim 1"), "{msg}");
    let msg = rt.fill(&big, 0.0).unwrap_err().to_string();
    assert!(msg.contains("`big`") && msg.contains("dim 5"), "{msg}");
    // Nothing changed.
    assert_eq!(y.values().unwrap(), vec![1.0; 10]);
}

// ---- SpMV -------------------------------------------------------------

/// Adds a whole element matrix (2 nodes x 2 components).
#[parloop::kernel]
fn elem2(v: &[f64; 16], a: &mut [[f64; 4]; 4]) {
    for i in 0..4 {
        for j in 0..4 {
            a[i][j] += v[i * 4 + j];
        }
    }
}

/// Adds a whole element matrix (2 nodes x 1 component).
#[parloop::kernel]
fn elem1(v: &[f64; 4], a: &mut [[f64; 2]; 2]) {
    for i in 0..2 {
        for j in 0..2 {
            a[i][j] += v[i * 2 + j];
        }
    }
}

/// A random graph of `edges` edges over `nodes` nodes (self-loops and
/// repeats included) with a random element matrix per edge, assembled into
/// a matrix of block size `dim` (1 or 2), and the same matrix dense.
fn random_matrix(rt: &Runtime, rng: &mut Rng, nodes: &Set, edges: usize, dim: usize) -> (parloop::Mat<f64>, Vec<f64>) {
    let n = nodes.size();
    let eset = rt.set(&format!("edges{dim}"), edges).unwrap();
    let conn: Vec<i32> = (0..2 * edges).map(|_| rng.below(n) as i32).collect();
    let e2n = rt.map(&format!("e2n{dim}"), &eset, nodes, 2, conn.clone()).unwrap();
    let r = 2 * dim;
    let v = rng.signed_vec(edges * r * r);
    let vd = rt.dat(&format!("v{dim}"), &eset, r * r, v.clone()).unwrap();
    let s = rt.sparsity(&format!("s{dim}"), &[(&e2n, &e2n)], (dim, dim)).unwrap();
    let a = rt.mat::<f64>(&format!("A{dim}"), &s).unwrap();
    let kernel = if dim == 1 { elem1::KERNEL } else { elem2::KERNEL };
    rt.par_loop(kernel, &eset, &[vd.arg(Access::READ), a.arg(&e2n, &e2n, Access::INC)]).unwrap();
    let size = n * dim;
    let mut dense = vec![0.0; size * size];
    for e in 0..edges {
        for i in 0..r {
            for j in 0..r {
                let row = conn[2 * e + i / dim] as usize * dim + i % dim;
                let col = conn[2 * e + j / dim] as usize * dim + j % dim;
                dense[row * size + col] += v[e * r * r + i * r + j];
            }
        }
    }
    (a, dense)
}

/// Row `r` of the dense `size x size` matrix times `x`, and the sum of the
/// terms' magnitudes (the scale of its rounding error).
fn dense_row_product(dense: &[f64], size: usize, r: usize, x: &[f64]) -> (f64, f64) {
    let row = &dense[r * size..(r + 1) * size];
    let product = row.iter().zip(x).map(|(a, b)| a * b).sum();
    let scale = row.iter().zip(x).map(|(a, b)| (a * b).abs()).sum();
    (product, scale)
}

#[test]
fn spmv_equals_a_dense_product_on_random_matrices() {
    let mut rng = Rng(2024);
    for backend in backends() {
        for (nodes_n, edges, dim) in [(1, 1, 1), (13, 40, 1), (50, 200, 2), (3000, 12_000, 1), (2000, 8000, 2)] {
            let rt = Runtime::with_backend(backend).unwrap();
            let nodes = rt.set("nodes", nodes_n).unwrap();
            let (a, dense) = random_matrix(&rt, &mut rng, &nodes, edges, dim);
            let size = nodes_n * dim;
            let xv = rng.signed_vec(size);
            let x = rt.dat("x", &nodes, dim, xv.clone()).unwrap();
            let y = rt.dat("y", &nodes, dim, vec![f64::NAN; size]).unwrap();
            rt.mult(&a, &x, &y).unwrap();
            let got = y.values().unwrap();
            for (r, &got) in got.iter().enumerate() {
                let (want, scale) = dense_row_product(&dense, size, r, &xv);
                assert!(
                    (got - want).abs() <= 1e-14 * scale.max(1e-300),
                    "{backend:?} {nodes_n} nodes dim {dim}: row {r}: {got} vs {want}"
                );
            }
            // The diagonal, on the same matrix.
            let d = rt.dat("d", &nodes, dim, vec![f64::NAN; size]).unwrap();
            rt.diagonal(&a, &d).unwrap();
            let want: Vec<f64> = (0..size).map(|i| dense[i * size + i]).collect();
            assert_all_close(&d.values().unwrap(), &want, 1e-14, "diagonal");
        }
    }
}

#[test]
fn apply_dot_is_the_product_and_its_dot_on_every_backend() {
    // `Mat::apply_dot` adds `x . y` up in the product's pass on the host
    // (a device runs the product then a dot loop): the same `y` as `mult`,
    // and the dot of `x` with it, for scalar and block rows.
    use parloop::linalg::LinearOperator;
    let mut rng = Rng(77);
    for backend in backends() {
        for (nodes_n, edges, dim) in [(1, 1, 1), (40, 150, 2), (5000, 20_000, 1)] {
            let rt = Runtime::with_backend(backend).unwrap();
            let nodes = rt.set("nodes", nodes_n).unwrap();
            let (a, dense) = random_matrix(&rt, &mut rng, &nodes, edges, dim);
            let size = nodes_n * dim;
            let xv = rng.signed_vec(size);
            let x = rt.dat("x", &nodes, dim, xv.clone()).unwrap();
            let y = rt.dat("y", &nodes, dim, vec![f64::NAN; size]).unwrap();
            let got = a.apply_dot(&rt, &x, &y).unwrap();
            let yv = y.values().unwrap();
            let (mut want, mut scale) = (0.0, 0.0);
            for r in 0..size {
                let (yr, yscale) = dense_row_product(&dense, size, r, &xv);
                assert!((yv[r] - yr).abs() <= 1e-14 * yscale.max(1e-300), "{backend:?} dim {dim} row {r}");
                want += xv[r] * yr;
                scale += (xv[r] * yscale).abs();
            }
            let what = format!("{backend:?} {nodes_n} nodes dim {dim}");
            assert!((got - want).abs() <= 1e-13 * scale, "{what}: x . Ax = {got} vs {want}");
            // Against the separate operations on the same backend.
            let y2 = rt.dat("y2", &nodes, dim, vec![0.0; size]).unwrap();
            rt.mult(&a, &x, &y2).unwrap();
            assert_eq!(y2.values().unwrap(), yv, "{what}: apply_dot's y is mult's y");
            let dot = rt.dot(&x, &y2).unwrap();
            assert!((got - dot).abs() <= 1e-13 * scale, "{what}: {got} vs dot {dot}");
        }
    }
    // Errors as `mult`'s: x and y one dat.
    let rt = Runtime::with_backend(Backend::Threads).unwrap();
    let nodes = rt.set("nodes", 10).unwrap();
    let (a, _) = random_matrix(&rt, &mut rng, &nodes, 20, 1);
    let x = rt.dat("x", &nodes, 1, vec![1.0; 10]).unwrap();
    let err = a.apply_dot(&rt, &x, &x).unwrap_err().to_string();
    assert!(err.contains("both dat `x`"), "{err}");
}

#[test]
fn spmv_is_bitwise_the_same_on_seq_and_threads() {
    // Each row's additions run in one fixed order on every thread count.
    let run = |backend| {
        let mut rng = Rng(99);
        let rt = Runtime::with_backend(backend).unwrap();
        let nodes = rt.set("nodes", 20_000).unwrap();
        let (a, _) = random_matrix_sparse(&rt, &mut rng, &nodes, 100_000);
        let x = rt.dat("x", &nodes, 1, rng.signed_vec(20_000)).unwrap();
        let y = rt.dat("y", &nodes, 1, vec![0.0; 20_000]).unwrap();
        rt.mult(&a, &x, &y).unwrap();
        y.values().unwrap()
    };
    let seq = run(Backend::Seq);
    let threads = run(Backend::Threads);
    assert!(seq.iter().zip(&threads).all(|(a, b)| a.to_bits() == b.to_bits()));
}

/// As [`random_matrix`] with dim 1, without the dense copy (large cases).
fn random_matrix_sparse(rt: &Runtime, rng: &mut Rng, nodes: &Set, edges: usize) -> (parloop::Mat<f64>, ()) {
    let n = nodes.size();
    let eset = rt.set("edges", edges).unwrap();
    let conn: Vec<i32> = (0..2 * edges).map(|_| rng.below(n) as i32).collect();
    let e2n = rt.map("e2n", &eset, nodes, 2, conn).unwrap();
    let vd = rt.dat("v", &eset, 4, rng.signed_vec(edges * 4)).unwrap();
    let s = rt.sparsity("s", &[(&e2n, &e2n)], (1, 1)).unwrap();
    let a = rt.mat::<f64>("A", &s).unwrap();
    rt.par_loop(elem1::KERNEL, &eset, &[vd.arg(Access::READ), a.arg(&e2n, &e2n, Access::INC)]).unwrap();
    (a, ())
}

#[test]
fn spmv_checks_sets_dims_and_aliasing() {
    let mut rng = Rng(5);
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let nodes = rt.set("nodes", 10).unwrap();
    let other = rt.set("other", 10).unwrap();
    let (a, _) = random_matrix(&rt, &mut rng, &nodes, 20, 1);
    let x = rt.dat("x", &nodes, 1, vec![1.0; 10]).unwrap();
    let y = rt.dat("y", &other, 1, vec![0.0; 10]).unwrap();
    let msg = rt.mult(&a, &x, &y).unwrap_err().to_string();
    assert!(msg.contains("`A1`") && msg.contains("`y`") && msg.contains("`other`"), "{msg}");
    let x2 = rt.dat("x2", &nodes, 2, vec![1.0; 20]).unwrap();
    let msg = rt.mult(&a, &x2, &x).unwrap_err().to_string();
    assert!(msg.contains("`x2`") && msg.contains("dim 2"), "{msg}");
    let msg = rt.mult(&a, &x, &x).unwrap_err().to_string();
    assert!(msg.contains("both dat `x`"), "{msg}");

    assert!(x.values().unwrap() == vec![1.0; 10], "a refused product changes nothing");
}

#[test]
fn vector_operations_run_inside_a_profile_like_loops() {
    // They are parloop loops: the profile lists them by kernel.
    let rt = Runtime::with_backend(Backend::Threads).unwrap();
    let set = rt.set("s", 10).unwrap();
    let x: Dat<f64> = rt.dat("x", &set, 1, vec![1.0; 10]).unwrap();
    rt.scale(2.0, &x).unwrap();
    assert!(rt.report().iter().any(|r| r.name.contains("scale")), "{:?}", rt.report());
}

#[test]
fn matrix_products_and_diagonals_appear_in_the_profile_with_their_bytes() {
    // Not loops, but a solve's largest cost: the profile once left them
    // out, so a CG's table showed its vector passes only.
    for backend in [Backend::Seq, Backend::Emu] {
        let rt = Runtime::with_backend(backend).unwrap();
        let mut rng = Rng(7);
        let nodes = rt.set("nodes", 10).unwrap();
        let (a, _) = random_matrix(&rt, &mut rng, &nodes, 20, 1);
        let x = rt.dat("x", &nodes, 1, vec![1.0; 10]).unwrap();
        let y = rt.dat("y", &nodes, 1, vec![0.0; 10]).unwrap();
        rt.mult(&a, &x, &y).unwrap();
        rt.mult(&a, &x, &y).unwrap();
        rt.diagonal(&a, &y).unwrap();
        let report = rt.report();
        let row = |name: &str| report.iter().find(|r| r.name == name && r.tags == a.name());
        let mult = row("mult").unwrap_or_else(|| panic!("{backend:?}: no mult row in {report:?}"));
        let nnz = a.sparsity().nnz() as u64;
        // Values and column indices, row pointers, x and y, twice.
        assert_eq!(mult.calls, 2, "{backend:?}");
        assert_eq!(mult.bytes, 2 * (nnz * 12 + 11 * 8 + 20 * 8), "{backend:?}");
        assert_eq!(row("diagonal").map(|r| r.calls), Some(1), "{backend:?}: {report:?}");
    }
}

/// `norm2` near the ends of the range: the plain sum of squares
/// underflowed to 0 (3e-200, 4e-200) and overflowed to infinity (3e200,
/// 4e200); scaled by the largest magnitude, both are 5 times the scale, in
/// f64 and f32, on every dim.
#[test]
fn norm2_neither_underflows_nor_overflows() {
    for backend in backends() {
        let rt = Runtime::with_backend(backend).unwrap();
        for dim in 1..=4 {
            let s = rt.set(&format!("s{dim}"), 6).unwrap();
            for scale in [1e-200, 1e-155, 1.0, 1e155, 1e200, 1e-310] {
                let mut v = vec![0.0f64; 6 * dim];
                v[1] = 3.0 * scale;
                v[6 * dim - 1] = -4.0 * scale;
                let x = rt.dat(&format!("x{dim}_{scale:e}"), &s, dim, v).unwrap();
                let n = rt.norm2(&x).unwrap();
                assert!(close(n, 5.0 * scale, 1e-15), "{backend:?} dim {dim}: norm2 {n:e} for {scale:e}");
            }
            for scale in [1e-30f32, 1e30, 1.0] {
                let mut v = vec![0.0f32; 6 * dim];
                v[0] = 3.0 * scale;
                v[2] = 4.0 * scale;
                let x = rt.dat(&format!("y{dim}_{scale:e}"), &s, dim, v).unwrap();
                let n = rt.norm2(&x).unwrap() as f64;
                assert!(close(n, 5.0 * scale as f64, 1e-6), "{backend:?} dim {dim}: f32 norm2 {n:e} for {scale:e}");
            }
            let z = rt.dat(&format!("z{dim}"), &s, dim, vec![0.0f64; 6 * dim]).unwrap();
            assert_eq!(rt.norm2(&z).unwrap(), 0.0);
            let inf = rt.dat(&format!("i{dim}"), &s, dim, vec![f64::INFINITY; 6 * dim]).unwrap();
            assert_eq!(rt.norm2(&inf).unwrap(), f64::INFINITY);
        }
    }
}
