//! Matrices on a device backend (emu here and in CI, the GPU where
//! `PARLOOP_TEST_DEVICE=cuda`) against `seq`: assembly (the deterministic
//! scatter bitwise, the atomic one to rounding), WRITE matrices, blocks,
//! several matrices in one loop, and the sparse product.

#[path = "support/device.rs"]
mod device;

use parloop::{Access, Backend, Runtime, Strategy};

#[path = "support/solvers.rs"]
mod solvers;
use solvers::Rng;

/// A P1-like element matrix from node values, with an entry that depends
/// on the element (so that contributions differ).
#[parloop::kernel]
fn elem3(x: &[[f64; 1]; 3], w: &f64, a: &mut [[f64; 3]; 3]) {
    for i in 0..3 {
        for j in 0..3 {
            a[i][j] += *w * (x[i][0] * (x[j][0] + 1.0) + (i as f64) - 0.5 * (j as f64));
        }
    }
}

/// 2 x 2 blocks on an edge.
#[parloop::kernel]
fn edge_block(x: &[[f64; 2]; 2], a: &mut [[f64; 4]; 4]) {
    for i in 0..4 {
        for j in 0..4 {
            a[i][j] += x[i / 2][i % 2] - 0.25 * x[j / 2][j % 2] + (i * 4 + j) as f64;
        }
    }
}

/// Stores (WRITE) an element's entries, which depend on the element.
#[parloop::kernel]
fn block_write(w: &f64, a: &mut [[f64; 2]; 2]) {
    for i in 0..2 {
        for j in 0..2 {
            a[i][j] = *w * 2.0 + (i * 2 + j) as f64;
        }
    }
}

struct Problem {
    nodes: usize,
    cells: usize,
    map: Vec<i32>,
    x: Vec<f64>,
    w: Vec<f64>,
}

fn problem(nodes: usize, cells: usize, seed: u64) -> Problem {
    let mut rng = Rng(seed);
    Problem {
        nodes,
        cells,
        map: (0..3 * cells).map(|_| rng.below(nodes) as i32).collect(),
        x: (0..nodes).map(|_| rng.unit() - 0.5).collect(),
        w: (0..cells).map(|_| 0.5 + rng.unit()).collect(),
    }
}

/// Assembles `elem3` on `backend` (`strategy` for device loops): the CSR
/// values, and `A x` for the node values.
fn assemble(backend: Backend, strategy: Option<Strategy>, p: &Problem) -> (Vec<f64>, Vec<f64>) {
    let mut rt = Runtime::with_backend(backend).unwrap();
    rt.set_strategy(strategy);
    let nodes = rt.set("nodes", p.nodes).unwrap();
    let cells = rt.set("cells", p.cells).unwrap();
    let c2n = rt.map("c2n", &cells, &nodes, 3, p.map.clone()).unwrap();
    let x = rt.dat("x", &nodes, 1, p.x.clone()).unwrap();
    let w = rt.dat("w", &cells, 1, p.w.clone()).unwrap();
    let s = rt.sparsity("s", &[(&c2n, &c2n)], (1, 1)).unwrap();
    let a = rt.mat::<f64>("A", &s).unwrap();
    // Twice: the second assembly adds onto the first (element matrices are
    // zeroed between them, the values are not).
    for _ in 0..2 {
        rt.par_loop(
            elem3::KERNEL,
            &cells,
            &[x.arg_vec(&c2n, Access::READ), w.arg(Access::READ), a.arg(&c2n, &c2n, Access::INC)],
        )
        .unwrap();
    }
    let y = rt.dat("y", &nodes, 1, vec![f64::NAN; p.nodes]).unwrap();
    rt.mult(&a, &x, &y).unwrap();
    (a.values().unwrap(), y.values().unwrap())
}

fn close(a: &[f64], b: &[f64], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    let scale = a.iter().fold(1e-300f64, |m, v| m.max(v.abs()));
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= 1e-13 * scale, "{what}: entry {k}: {x} vs {y}");
    }
}

#[test]
fn deterministic_device_assembly_equals_seq_bitwise() {
    let device = device::device_backend();
    for (nodes, cells, seed) in [(40, 150, 1), (500, 3000, 2), (7, 200, 3)] {
        let p = problem(nodes, cells, seed);
        let (want, want_y) = assemble(Backend::Seq, None, &p);
        for strategy in [None, Some(Strategy::Staged), Some(Strategy::GlobalColour)] {
            let (got, got_y) = assemble(device, strategy, &p);
            // The contributions are added in element order, as seq adds them.
            assert_eq!(got, want, "{device:?} {strategy:?}, mesh {nodes}x{cells}: values");
            close(&got_y, &want_y, &format!("{device:?} {strategy:?}: A x"));
        }
    }
}

#[test]
fn atomic_device_assembly_matches_seq_to_rounding() {
    let device = device::device_backend();
    let p = problem(300, 2000, 4);
    let (want, _) = assemble(Backend::Seq, None, &p);
    let (got, _) = assemble(device, Some(Strategy::Atomic), &p);
    close(&got, &want, "atomic scatter");
}

#[test]
fn block_matrices_assemble_on_the_device_as_on_seq() {
    let device = device::device_backend();
    let mut rng = Rng(9);
    let (nnodes, nedges) = (60, 400);
    let map: Vec<i32> = (0..2 * nedges).map(|_| rng.below(nnodes) as i32).collect();
    let xs: Vec<f64> = (0..2 * nnodes).map(|_| rng.unit()).collect();
    let run = |backend: Backend| {
        let rt = Runtime::with_backend(backend).unwrap();
        let nodes = rt.set("nodes", nnodes).unwrap();
        let edges = rt.set("edges", nedges).unwrap();
        let e2n = rt.map("e2n", &edges, &nodes, 2, map.clone()).unwrap();
        let x = rt.dat("x", &nodes, 2, xs.clone()).unwrap();
        let a = rt.mat::<f64>("A", &rt.sparsity("s", &[(&e2n, &e2n)], (2, 2)).unwrap()).unwrap();
        rt.par_loop(edge_block::KERNEL, &edges, &[x.arg_vec(&e2n, Access::READ), a.arg(&e2n, &e2n, Access::INC)])
            .unwrap();
        let y = rt.dat("y", &nodes, 2, vec![0.0; 2 * nnodes]).unwrap();
        rt.mult(&a, &x, &y).unwrap();
        (a.values().unwrap(), y.values().unwrap())
    };
    let (want, want_y) = run(Backend::Seq);
    let (got, got_y) = run(device);
    assert_eq!(got, want);
    close(&got_y, &want_y, "block A x");
}

#[test]
fn write_matrices_store_on_the_device() {
    let device = device::device_backend();
    let n = 50;
    let run = |backend: Backend| {
        let rt = Runtime::with_backend(backend).unwrap();
        let nodes = rt.set("nodes", 2 * n).unwrap();
        let pairs = rt.set("pairs", n).unwrap();
        // Disjoint 2 x 2 blocks, in reverse order.
        let p2n =
            rt.map("p2n", &pairs, &nodes, 2, (0..n as i32).rev().flat_map(|p| [2 * p, 2 * p + 1]).collect()).unwrap();
        let w = rt.dat("w", &pairs, 1, (0..n).map(|i| i as f64).collect()).unwrap();
        let a = rt.mat::<f64>("A", &rt.sparsity("s", &[(&p2n, &p2n)], (1, 1)).unwrap()).unwrap();
        for _ in 0..2 {
            rt.par_loop(block_write::KERNEL, &pairs, &[w.arg(Access::READ), a.arg(&p2n, &p2n, Access::WRITE)]).unwrap();
        }
        a.values().unwrap()
    };
    let want = run(Backend::Seq);
    assert_eq!(want[0], 2.0 * (n - 1) as f64, "seq stores, it does not add");
    assert_eq!(run(device), want);
}

#[test]
fn the_device_product_is_reproducible_and_matches_seq() {
    let device = device::device_backend();
    // Long rows (a dense-ish pattern): several lanes per row.
    let p = problem(30, 2000, 5);
    let (_, want_y) = assemble(Backend::Seq, None, &p);
    let (_, y1) = assemble(device, None, &p);
    let (_, y2) = assemble(device, None, &p);
    assert_eq!(y1, y2, "two runs of the product differ");
    close(&y1, &want_y, "A x, long rows");
}

/// The 1-D P1 stiffness plus a mass-like shift on an edge: SPD assembled.
#[parloop::kernel]
fn laplace_edge(x: &[[f64; 1]; 2], a: &mut [[f64; 2]; 2]) {
    let h = x[1][0] - x[0][0];
    let k = 1.0 / h;
    let m = h / 6.0;
    a[0][0] += k + 2.0 * m;
    a[0][1] += -k + m;
    a[1][0] += -k + m;
    a[1][1] += k + 2.0 * m;
}

#[test]
fn cg_solves_on_the_device_as_on_seq() {
    use parloop::solve::{cg, CgOptions, Preconditioner};
    let device = device::device_backend();
    let n = 400;
    let mut rng = Rng(11);
    // Irregular nodes on [0, 1], edges in a shuffled order.
    let mut xs: Vec<f64> = (0..=n).map(|i| i as f64 / n as f64 + 0.3 * (rng.unit() - 0.5) / n as f64).collect();
    xs[0] = 0.0;
    xs[n] = 1.0;
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let map: Vec<i32> = order.iter().flat_map(|&e| [e as i32, e as i32 + 1]).collect();
    let rhs: Vec<f64> = (0..=n).map(|i| (3.0 * xs[i]).sin()).collect();
    let run = |backend: Backend, preconditioner: Preconditioner| {
        let rt = Runtime::with_backend(backend).unwrap();
        let nodes = rt.set("nodes", n + 1).unwrap();
        let edges = rt.set("edges", n).unwrap();
        let e2n = rt.map("e2n", &edges, &nodes, 2, map.clone()).unwrap();
        let x = rt.dat("x", &nodes, 1, xs.clone()).unwrap();
        let a = rt.mat::<f64>("A", &rt.sparsity("s", &[(&e2n, &e2n)], (1, 1)).unwrap()).unwrap();
        rt.par_loop(laplace_edge::KERNEL, &edges, &[x.arg_vec(&e2n, Access::READ), a.arg(&e2n, &e2n, Access::INC)])
            .unwrap();
        let b = rt.dat("b", &nodes, 1, rhs.clone()).unwrap();
        let u = rt.dat("u", &nodes, 1, vec![0.0; n + 1]).unwrap();
        let opts = CgOptions { rtol: 1e-9, preconditioner, ..CgOptions::default() };
        let report = cg(&rt, &a, &b, &u, &opts).unwrap();
        assert!(report.relative_residual <= 1e-9, "{backend:?}: relative residual {}", report.relative_residual);
        (u.values().unwrap(), report.iterations)
    };
    for preconditioner in [Preconditioner::Jacobi, Preconditioner::None] {
        let (want, want_its) = run(Backend::Seq, preconditioner);
        let (got, got_its) = run(device, preconditioner);
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for (k, (a, b)) in want.iter().zip(&got).enumerate() {
            assert!((a - b).abs() <= 1e-10 * scale, "{preconditioner:?}: u[{k}]: seq {a}, {device:?} {b}");
        }
        assert!(want_its.abs_diff(got_its) <= 2, "{preconditioner:?}: iterations seq {want_its}, {device:?} {got_its}");
    }
}

/// The probe's kernel: two element matrices, set apart.
#[parloop::kernel]
fn k_two_mats(a: &mut [[f64; 2]; 2], b: &mut [[f64; 2]; 2]) {
    a[0][0] += 1.0;
    a[1][1] += 1.0;
    b[0][1] += 2.0;
    b[1][0] += 3.0;
}

/// Two matrices on one sparsity in one loop (A = M + dt K and M, say):
/// each gets its own element matrices on the device, eager and lazy.
#[test]
fn two_matrices_on_one_sparsity_assemble_in_one_loop() {
    let device = device::device_backend();
    for (backend, lazy) in [(Backend::Seq, false), (Backend::Threads, false), (device, false), (device, true)] {
        let rt = Runtime::with_lazy(backend, lazy).unwrap();
        let nodes = rt.set("nodes", 3).unwrap();
        let edges = rt.set("edges", 2).unwrap();
        let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1, 1, 2]).unwrap();
        let sp = rt.sparsity("sp", &[(&e2n, &e2n)], (1, 1)).unwrap();
        let (a, b) = (rt.mat::<f64>("A", &sp).unwrap(), rt.mat::<f64>("B", &sp).unwrap());
        rt.par_loop(k_two_mats::KERNEL, &edges, &[a.arg(&e2n, &e2n, Access::INC), b.arg(&e2n, &e2n, Access::INC)])
            .unwrap_or_else(|e| panic!("{backend:?} lazy {lazy}: {e}"));
        assert_eq!(a.values().unwrap(), [1.0, 0.0, 0.0, 2.0, 0.0, 0.0, 1.0], "{backend:?} lazy {lazy}: A");
        assert_eq!(b.values().unwrap(), [0.0, 2.0, 3.0, 0.0, 2.0, 3.0, 0.0], "{backend:?} lazy {lazy}: B");
    }
}

/// A mass-like and a stiffness-like element matrix from one loop.
#[parloop::kernel]
fn mass_and_stiffness(x: &[[f64; 1]; 3], w: &f64, m: &mut [[f64; 3]; 3], k: &mut [[f64; 3]; 3]) {
    for i in 0..3 {
        for j in 0..3 {
            m[i][j] += *w * (if i == j { 2.0 } else { 1.0 }) * (1.0 + x[i][0] * x[j][0]);
            k[i][j] += *w * (x[i][0] - x[j][0] + 0.25 * (i as f64) - (j as f64)) / 3.0;
        }
    }
}

/// Assembles `mass_and_stiffness` into M and K (on one sparsity, or K on
/// a second map's), twice, then a loop with M alone and the two-matrix
/// loop again, so that element matrices are reused between loops.
fn assemble_two(
    backend: Backend,
    strategy: Option<Strategy>,
    lazy: bool,
    p: &Problem,
    map2: &[i32],
    shared: bool,
) -> (Vec<f64>, Vec<f64>) {
    let mut rt = Runtime::with_lazy(backend, lazy).unwrap();
    rt.set_strategy(strategy);
    let nodes = rt.set("nodes", p.nodes).unwrap();
    let cells = rt.set("cells", p.cells).unwrap();
    let c2n = rt.map("c2n", &cells, &nodes, 3, p.map.clone()).unwrap();
    let d2n = rt.map("d2n", &cells, &nodes, 3, map2.to_vec()).unwrap();
    let x = rt.dat("x", &nodes, 1, p.x.clone()).unwrap();
    let w = rt.dat("w", &cells, 1, p.w.clone()).unwrap();
    let s = rt.sparsity("s", &[(&c2n, &c2n)], (1, 1)).unwrap();
    let kmap = if shared { &c2n } else { &d2n };
    let s2 = if shared { s.clone() } else { rt.sparsity("s2", &[(&d2n, &d2n)], (1, 1)).unwrap() };
    let m = rt.mat::<f64>("M", &s).unwrap();
    let k = rt.mat::<f64>("K", &s2).unwrap();
    let both = [
        x.arg_vec(&c2n, Access::READ),
        w.arg(Access::READ),
        m.arg(&c2n, &c2n, Access::INC),
        k.arg(kmap, kmap, Access::INC),
    ];
    for _ in 0..2 {
        rt.par_loop(mass_and_stiffness::KERNEL, &cells, &both).unwrap();
    }
    rt.par_loop(
        elem3::KERNEL,
        &cells,
        &[x.arg_vec(&c2n, Access::READ), w.arg(Access::READ), m.arg(&c2n, &c2n, Access::INC)],
    )
    .unwrap();
    rt.par_loop(mass_and_stiffness::KERNEL, &cells, &both).unwrap();
    (m.values().unwrap(), k.values().unwrap())
}

#[test]
fn two_matrices_in_one_loop_assemble_on_the_device_as_on_seq() {
    let device = device::device_backend();
    for (nodes, cells, seed) in [(40, 150, 21), (500, 3000, 22)] {
        let p = problem(nodes, cells, seed);
        let map2 = problem(nodes, cells, seed + 100).map;
        for shared in [true, false] {
            let (want_m, want_k) = assemble_two(Backend::Seq, None, false, &p, &map2, shared);
            let what = |s: &str| format!("mesh {nodes}x{cells}, one sparsity {shared}: {s}");
            for lazy in [false, true] {
                for strategy in [None, Some(Strategy::Staged), Some(Strategy::GlobalColour)] {
                    let (m, k) = assemble_two(device, strategy, lazy, &p, &map2, shared);
                    assert_eq!(m, want_m, "{}", what(&format!("{device:?} {strategy:?} lazy {lazy}: M")));
                    assert_eq!(k, want_k, "{}", what(&format!("{device:?} {strategy:?} lazy {lazy}: K")));
                }
                let (m, k) = assemble_two(device, Some(Strategy::Atomic), lazy, &p, &map2, shared);
                close(&m, &want_m, &what("atomic M"));
                close(&k, &want_k, &what("atomic K"));
            }
            let (m, k) = assemble_two(Backend::Threads, None, false, &p, &map2, shared);
            close(&m, &want_m, &what("threads M"));
            close(&k, &want_k, &what("threads K"));
        }
    }
}

/// Stores one matrix's entries and adds into another's.
#[parloop::kernel]
fn write_and_add(w: &f64, a: &mut [[f64; 2]; 2], b: &mut [[f64; 2]; 2], c: &mut [[f64; 2]; 2]) {
    for i in 0..2 {
        for j in 0..2 {
            a[i][j] = *w * 2.0 + (i * 2 + j) as f64;
            b[i][j] = *w - (i + 3 * j) as f64;
            c[i][j] += *w * (1.0 + i as f64) + j as f64;
        }
    }
}

/// Two WRITE matrices and an INC one in one loop, on one sparsity and on
/// another (blocks shifted by one node).
#[test]
fn write_matrices_share_a_loop_on_the_device() {
    let device = device::device_backend();
    let n = 50;
    let run = |backend: Backend, lazy: bool, shared: bool| {
        let rt = Runtime::with_lazy(backend, lazy).unwrap();
        let nodes = rt.set("nodes", 2 * n).unwrap();
        let pairs = rt.set("pairs", n).unwrap();
        let p2n =
            rt.map("p2n", &pairs, &nodes, 2, (0..n as i32).rev().flat_map(|p| [2 * p, 2 * p + 1]).collect()).unwrap();
        let n2 = 2 * n as i32;
        let q2n = rt
            .map("q2n", &pairs, &nodes, 2, (0..n as i32).flat_map(|p| [2 * p + 1, (2 * p + 2) % n2]).collect())
            .unwrap();
        let w = rt.dat("w", &pairs, 1, (0..n).map(|i| i as f64).collect()).unwrap();
        let s = rt.sparsity("s", &[(&p2n, &p2n)], (1, 1)).unwrap();
        let (bmap, sb) =
            if shared { (&p2n, s.clone()) } else { (&q2n, rt.sparsity("t", &[(&q2n, &q2n)], (1, 1)).unwrap()) };
        let a = rt.mat::<f64>("A", &s).unwrap();
        let b = rt.mat::<f64>("B", &sb).unwrap();
        let c = rt.mat::<f64>("C", &s).unwrap();
        for _ in 0..2 {
            rt.par_loop(
                write_and_add::KERNEL,
                &pairs,
                &[
                    w.arg(Access::READ),
                    a.arg(&p2n, &p2n, Access::WRITE),
                    b.arg(bmap, bmap, Access::WRITE),
                    c.arg(&p2n, &p2n, Access::INC),
                ],
            )
            .unwrap_or_else(|e| panic!("{backend:?} lazy {lazy}: {e}"));
        }
        (a.values().unwrap(), b.values().unwrap(), c.values().unwrap())
    };
    for shared in [true, false] {
        let want = run(Backend::Seq, false, shared);
        assert_eq!(want.0[0], 2.0 * (n - 1) as f64, "seq stores, it does not add");
        for lazy in [false, true] {
            assert_eq!(run(device, lazy, shared), want, "{device:?} lazy {lazy}, one sparsity {shared}");
        }
    }
}

/// The same matrix twice in one loop is refused on every backend alike,
/// the message naming the user's matrix (not the device's element
/// matrices).
#[test]
fn the_same_matrix_twice_in_one_loop_is_refused_everywhere() {
    let device = device::device_backend();
    for (backend, lazy) in [(Backend::Seq, false), (Backend::Threads, false), (device, false), (device, true)] {
        let rt = Runtime::with_lazy(backend, lazy).unwrap();
        let nodes = rt.set("nodes", 3).unwrap();
        let edges = rt.set("edges", 2).unwrap();
        let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1, 1, 2]).unwrap();
        let a = rt.mat::<f64>("A", &rt.sparsity("sp", &[(&e2n, &e2n)], (1, 1)).unwrap()).unwrap();
        let err = rt
            .par_loop(k_two_mats::KERNEL, &edges, &[a.arg(&e2n, &e2n, Access::INC), a.arg(&e2n, &e2n, Access::INC)])
            .expect_err("the same matrix twice");
        let msg = err.to_string();
        assert!(msg.contains("argument 1 (A)") && !msg.contains("pl_"), "{backend:?} lazy {lazy}: {msg}");
        // Nothing was assembled.
        assert_eq!(a.values().unwrap(), [0.0; 7], "{backend:?} lazy {lazy}");
    }
}
