//! `threads` against `seq` on random meshes and loops: direct and indirect
//! arguments, every access mode, vector arguments and global reductions of
//! several element types. Floating-point increments may differ by summation
//! order (1e-12 relative); everything else must be identical. Threaded
//! results must not depend on the thread count.

mod support;

#[path = "support/device.rs"]
mod device;
#[path = "support/mesh_kernels.rs"]
mod mesh_kernels;
use mesh_kernels::{edge_flux, spread, tally};

use device::device_backend;
use parloop::{Access, Backend, Dat, Global, Map, ParLoop, Runtime, Set, Strategy as DeviceStrategy};
use proptest::prelude::*;

/// Direct WRITE and RW, indirect READ through a scalar column.
#[parloop::kernel]
fn relax(src: &[f64; 2], a: &mut f64, b: &mut [u32; 1]) {
    *a += 0.5 * (src[0] + src[1]);
    b[0] = b[0] * 3 + 1;
}

#[derive(Debug, Clone)]
struct Mesh {
    nedges: usize,
    nnodes: usize,
    arity3: Vec<i32>,
    pairs: Vec<i32>,
    weights: Vec<f64>,
    coords: Vec<f64>,
}

fn mesh() -> impl Strategy<Value = Mesh> {
    (prop_oneof![Just(0usize), Just(1usize), 2usize..3000], 1usize..400).prop_flat_map(|(nedges, nnodes)| {
        (
            Just(nedges),
            Just(nnodes),
            proptest::collection::vec(0..nnodes as i32, nedges * 3),
            proptest::collection::vec(0..nnodes as i32, nedges * 2),
            proptest::collection::vec(0.01f64..10.0, nedges),
            proptest::collection::vec(-5.0f64..5.0, nnodes * 2),
        )
            .prop_map(|(nedges, nnodes, arity3, pairs, weights, coords)| Mesh {
                nedges,
                nnodes,
                arity3,
                pairs,
                weights,
                coords,
            })
    })
}

/// Everything a run produces, as bits where exactness is required.
#[derive(Debug, PartialEq)]
struct Outcome {
    res: Vec<f64>,
    total: f64,
    count: u64,
    lo: i32,
    hi: f32,
    tally: Vec<i64>,
    spread: Vec<f32>,
    a: Vec<f64>,
    b: Vec<u32>,
}

fn run(backend: Backend, m: &Mesh, part_size: Option<usize>) -> Outcome {
    run_with(backend, None, m, part_size)
}

/// The reductions of `edge_flux`: count (INC), lo (MIN), hi (MAX), total (INC).
type FluxGlobals<'a> = (&'a Global<u64>, &'a Global<i32>, &'a Global<f32>, &'a Global<f64>);

/// The `edge_flux` loop: INC through both columns of `pair`, a READ vector
/// argument, and every kind of global reduction.
fn edge_flux_loop(edges: &Set, pair: &Map, w: &Dat<f64>, x: &Dat<f64>, res: &Dat<f64>, g: FluxGlobals) -> ParLoop {
    let (count, lo, hi, total) = g;
    ParLoop::new(
        edge_flux::KERNEL,
        edges,
        &[
            w.arg(Access::READ),
            x.arg_vec(pair, Access::READ),
            res.arg_via(pair, 0, Access::INC),
            res.arg_via(pair, 1, Access::INC),
            count.arg(Access::INC),
            lo.arg(Access::MIN),
            hi.arg(Access::MAX),
            total.arg(Access::INC),
        ],
    )
    .unwrap()
}

fn run_with(backend: Backend, strategy: Option<DeviceStrategy>, m: &Mesh, part_size: Option<usize>) -> Outcome {
    let mut rt = Runtime::with_backend(backend).unwrap();
    rt.set_part_size(part_size).unwrap();
    rt.set_strategy(strategy);
    let edges = rt.set("edges", m.nedges).unwrap();
    let nodes = rt.set("nodes", m.nnodes).unwrap();
    let pair = rt.map("pair", &edges, &nodes, 2, m.pairs.clone()).unwrap();
    let tri = rt.map("tri", &edges, &nodes, 3, m.arity3.clone()).unwrap();
    let w = rt.dat("w", &edges, 1, m.weights.clone()).unwrap();
    let x = rt.dat("x", &nodes, 2, m.coords.clone()).unwrap();
    let res = rt.dat("res", &nodes, 2, vec![0.0f64; 2 * m.nnodes]).unwrap();
    let count = rt.global("count", &[7u64]).unwrap();
    let lo = rt.global("lo", &[i32::MAX]).unwrap();
    let hi = rt.global("hi", &[f32::MIN]).unwrap();
    let total = rt.global("total", &[0.0f64]).unwrap();
    let flux = edge_flux_loop(&edges, &pair, &w, &x, &res, (&count, &lo, &hi, &total));
    for _ in 0..2 {
        rt.execute(&flux).unwrap();
    }
    let ids: Vec<i64> = (0..m.nedges as i64).map(|i| i * 7919 - 3).collect();
    let id = rt.dat("id", &edges, 1, ids).unwrap();
    let t = rt.dat("t", &nodes, 2, vec![0i64; 2 * m.nnodes]).unwrap();
    rt.par_loop(tally::KERNEL, &edges, &[id.arg(Access::READ), t.arg_via(&tri, 2, Access::INC)]).unwrap();
    let v = rt.dat("v", &edges, 1, m.weights.iter().map(|&w| w as f32).collect()).unwrap();
    let s = rt.dat("s", &nodes, 1, vec![0.0f32; m.nnodes]).unwrap();
    rt.par_loop(spread::KERNEL, &edges, &[v.arg(Access::READ), s.arg_vec(&tri, Access::INC)]).unwrap();
    let a = rt.dat("a", &edges, 1, vec![1.0f64; m.nedges]).unwrap();
    let b = rt.dat("b", &edges, 1, (0..m.nedges as u32).collect()).unwrap();
    rt.par_loop(relax::KERNEL, &edges, &[x.arg_via(&tri, 1, Access::READ), a.arg(Access::RW), b.arg(Access::WRITE)])
        .unwrap();
    Outcome {
        res: res.values().unwrap(),
        total: total.value().unwrap(),
        count: count.value().unwrap(),
        lo: lo.value().unwrap(),
        hi: hi.value().unwrap(),
        tally: t.values().unwrap(),
        spread: s.values().unwrap(),
        a: a.values().unwrap(),
        b: b.values().unwrap(),
    }
}

fn close(a: f64, b: f64, scale: f64) -> bool {
    (a - b).abs() <= 1e-12 * scale.max(a.abs()).max(1e-300)
}

fn assert_matches(seq: &Outcome, other: &Outcome) -> Result<(), TestCaseError> {
    // Increments of mixed sign: compare relative to the magnitude of terms.
    let scale = seq.res.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (i, (x, y)) in seq.res.iter().zip(&other.res).enumerate() {
        prop_assert!(close(*x, *y, scale), "res[{}]: seq {} vs {}", i, x, y);
    }
    prop_assert!(close(seq.total, other.total, scale * seq.count as f64), "total {} vs {}", seq.total, other.total);
    for (i, (x, y)) in seq.spread.iter().zip(&other.spread).enumerate() {
        prop_assert!((x - y).abs() <= 1e-5 * x.abs().max(1.0), "spread[{}]: {} vs {} (f32)", i, x, y);
    }
    prop_assert_eq!(seq.count, other.count);
    prop_assert_eq!(seq.lo, other.lo);
    prop_assert_eq!(seq.hi.to_bits(), other.hi.to_bits());
    prop_assert_eq!(&seq.tally, &other.tally);
    prop_assert_eq!(&seq.a, &other.a);
    prop_assert_eq!(&seq.b, &other.b);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn threads_matches_seq(m in mesh(), part in prop_oneof![Just(None), (1usize..200).prop_map(Some)]) {
        let seq = run(Backend::Seq, &m, None);
        let threads = run(Backend::Threads, &m, part);
        assert_matches(&seq, &threads)?;
        prop_assert_eq!(seq.count, 7 + 2 * m.nedges as u64);
    }
}

/// A deterministic mesh with shared targets everywhere (no randomness, so
/// that reproducibility tests compare like with like).
fn fixed_mesh(nedges: usize, nnodes: usize) -> Mesh {
    Mesh {
        nedges,
        nnodes,
        arity3: (0..nedges * 3).map(|k| ((k * 7919) % nnodes) as i32).collect(),
        pairs: (0..nedges * 2).map(|k| ((k * 104_729 + 11) % nnodes) as i32).collect(),
        weights: (0..nedges).map(|k| 0.01 + (k % 97) as f64 * 0.1).collect(),
        coords: (0..nnodes * 2).map(|k| ((k % 13) as f64 - 6.0) * 0.37).collect(),
    }
}

#[test]
fn threaded_results_are_bitwise_identical_for_any_thread_count() {
    // Above the threads backend's inline threshold (16384 elements), so
    // that the chunks and blocks really run on several threads.
    let m = fixed_mesh(40_000, 3000);
    let pool = |n| rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap();
    let one = pool(1).install(|| run(Backend::Threads, &m, None));
    let two = pool(2).install(|| run(Backend::Threads, &m, None));
    let four = pool(4).install(|| run(Backend::Threads, &m, None));
    let bits = |o: &Outcome| (o.res.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), o.total.to_bits());
    assert_eq!(bits(&one), bits(&two));
    assert_eq!(bits(&one), bits(&four));
    assert_eq!(one, four);
    // And the same as seq within rounding.
    assert_matches(&run(Backend::Seq, &m, None), &one).unwrap();
}

/// The same loops written as plain Rust over the raw arrays: an oracle that
/// shares no code with the runtime (seq and threads share the binder).
fn oracle(m: &Mesh) -> Outcome {
    let mut res = vec![0.0f64; 2 * m.nnodes];
    let (mut count, mut lo, mut hi, mut total) = (7u64, i32::MAX, f32::MIN, 0.0f64);
    for _ in 0..2 {
        // A loop sums a global into eight accumulators, element `e` into
        // accumulator `e % 8`, added into the global in order at its end.
        let mut slots = [0.0f64; 8];
        for e in 0..m.nedges {
            let (a, b) = (m.pairs[2 * e] as usize, m.pairs[2 * e + 1] as usize);
            let w = m.weights[e];
            let f = w * (m.coords[2 * b] - m.coords[2 * a] + 2.0 * m.coords[2 * b + 1]);
            res[2 * a] += f;
            res[2 * a + 1] += 0.5 * w;
            res[2 * b] -= f;
            res[2 * b + 1] += 0.25 * w;
            count += 1;
            lo = lo.min((w * 100.0) as i32);
            hi = hi.max(w as f32);
            slots[e % 8] += f;
        }
        for s in slots {
            total += s;
        }
    }
    let mut tally = vec![0i64; 2 * m.nnodes];
    let mut spread = vec![0.0f32; m.nnodes];
    let mut a = vec![1.0f64; m.nedges];
    let mut b: Vec<u32> = (0..m.nedges as u32).collect();
    for e in 0..m.nedges {
        let t = m.arity3[3 * e + 2] as usize;
        tally[2 * t] = tally[2 * t].wrapping_add(e as i64 * 7919 - 3);
        tally[2 * t + 1] += 1;
        for k in 0..3 {
            spread[m.arity3[3 * e + k] as usize] += m.weights[e] as f32 * (k as f32 + 1.0);
        }
        let s = m.arity3[3 * e + 1] as usize;
        a[e] += 0.5 * (m.coords[2 * s] + m.coords[2 * s + 1]);
        b[e] = b[e].wrapping_mul(3).wrapping_add(1);
    }
    Outcome { res, total, count, lo, hi, tally, spread, a, b }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// seq applies increments in element order and sums globals in the
    /// documented order, as the oracle does: the results are bitwise
    /// equal, repeated map targets included.
    #[test]
    fn seq_matches_a_plain_rust_oracle(m in mesh()) {
        let seq = run(Backend::Seq, &m, None);
        let want = oracle(&m);
        prop_assert_eq!(seq, want);
    }
}

/// Every device strategy on the emulated device against seq.
fn emu_matches_seq(strategy: DeviceStrategy, m: &Mesh, part: Option<usize>) -> Result<(), TestCaseError> {
    let seq = run(Backend::Seq, m, None);
    let emu = run_with(device_backend(), Some(strategy), m, part);
    assert_matches(&seq, &emu)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn emu_staged_matches_seq(m in mesh(), part in prop_oneof![Just(None), (1usize..300).prop_map(Some)]) {
        emu_matches_seq(DeviceStrategy::Staged, &m, part)?;
    }

    #[test]
    fn emu_staged_atomic_matches_seq(m in mesh(), part in prop_oneof![Just(None), (1usize..300).prop_map(Some)]) {
        emu_matches_seq(DeviceStrategy::StagedAtomic, &m, part)?;
    }

    #[test]
    fn emu_atomic_matches_seq(m in mesh()) {
        emu_matches_seq(DeviceStrategy::Atomic, &m, None)?;
    }

    #[test]
    fn emu_global_colour_matches_seq(m in mesh()) {
        emu_matches_seq(DeviceStrategy::GlobalColour, &m, None)?;
    }
}

#[test]
fn staged_and_global_colour_are_bitwise_reproducible() {
    let m = fixed_mesh(3000, 200);
    for strategy in [DeviceStrategy::Staged, DeviceStrategy::GlobalColour] {
        let a = run_with(device_backend(), Some(strategy), &m, None);
        let b = run_with(device_backend(), Some(strategy), &m, None);
        let bits = |o: &Outcome| {
            (
                o.res.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                o.total.to_bits(),
                o.spread.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(bits(&a), bits(&b), "{strategy:?} is not reproducible");
        assert_matches(&run(Backend::Seq, &m, None), &a).unwrap();
    }
}

#[test]
fn every_generated_loop_of_this_suite_compiles_with_nvrtc_for_sm_90() {
    if !support::nvrtc_available() {
        return;
    }
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let edges = rt.set("edges", 4).unwrap();
    let nodes = rt.set("nodes", 3).unwrap();
    let pair = rt.map("pair", &edges, &nodes, 2, vec![0, 1, 1, 2, 2, 0, 0, 2]).unwrap();
    let tri = rt.map("tri", &edges, &nodes, 3, vec![0, 1, 2, 1, 2, 0, 2, 0, 1, 0, 1, 2]).unwrap();
    let w = rt.dat("w", &edges, 1, vec![1.0f64; 4]).unwrap();
    let x = rt.dat("x", &nodes, 2, vec![0.0f64; 6]).unwrap();
    let res = rt.dat("res", &nodes, 2, vec![0.0f64; 6]).unwrap();
    let id = rt.dat("id", &edges, 1, vec![1i64; 4]).unwrap();
    let t = rt.dat("t", &nodes, 2, vec![0i64; 6]).unwrap();
    let v = rt.dat("v", &edges, 1, vec![1.0f32; 4]).unwrap();
    let s = rt.dat("s", &nodes, 1, vec![0.0f32; 3]).unwrap();
    let a = rt.dat("a", &edges, 1, vec![0.0f64; 4]).unwrap();
    let b = rt.dat("b", &edges, 1, vec![0u32; 4]).unwrap();
    let count = rt.global("count", &[0u64]).unwrap();
    let lo = rt.global("lo", &[0i32]).unwrap();
    let hi = rt.global("hi", &[0.0f32]).unwrap();
    let total = rt.global("total", &[0.0f64]).unwrap();
    let loops = [
        edge_flux_loop(&edges, &pair, &w, &x, &res, (&count, &lo, &hi, &total)),
        ParLoop::new(tally::KERNEL, &edges, &[id.arg(Access::READ), t.arg_via(&tri, 2, Access::INC)]).unwrap(),
        ParLoop::new(spread::KERNEL, &edges, &[v.arg(Access::READ), s.arg_vec(&tri, Access::INC)]).unwrap(),
        ParLoop::new(
            relax::KERNEL,
            &edges,
            &[x.arg_via(&tri, 1, Access::READ), a.arg(Access::RW), b.arg(Access::WRITE)],
        )
        .unwrap(),
    ];
    let mut failures = Vec::new();
    for lp in &loops {
        for strategy in
            [DeviceStrategy::Staged, DeviceStrategy::StagedAtomic, DeviceStrategy::Atomic, DeviceStrategy::GlobalColour]
        {
            let source = rt.cuda_loop_source(lp, strategy).unwrap();
            if let Err(e) = support::nvrtc_compile(&format!("{}/{}", lp.kernel().name(), strategy.name()), &source) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_automatic_strategy_tries_every_candidate_and_stays_correct() {
    let (nedges, nnodes) = (2000, 150);
    let tri: Vec<i32> = (0..nedges * 3).map(|k| ((k * 7919 + k / 3) % nnodes) as i32).collect();
    let weights: Vec<f32> = (0..nedges).map(|k| 0.5 + (k % 7) as f32).collect();
    let run = |backend: Backend| {
        let rt = Runtime::with_backend(backend).unwrap();
        let edges = rt.set("edges", nedges).unwrap();
        let nodes = rt.set("nodes", nnodes).unwrap();
        let map = rt.map("tri", &edges, &nodes, 3, tri.clone()).unwrap();
        let v = rt.dat("v", &edges, 1, weights.clone()).unwrap();
        let s = rt.dat("s", &nodes, 1, vec![0.0f32; nnodes]).unwrap();
        // Four candidates run twice each on the first eight calls (a
        // warm-up, then the timed trial), then the fastest runs.
        for _ in 0..11 {
            rt.par_loop(spread::KERNEL, &edges, &[v.arg(Access::READ), s.arg_vec(&map, Access::INC)]).unwrap();
        }
        s.values().unwrap()
    };
    let seq = run(Backend::Seq);
    let emu = run(device_backend());
    for (k, (a, b)) in seq.iter().zip(&emu).enumerate() {
        assert!((a - b).abs() <= 1e-5 * a.abs().max(1.0), "node {k}: seq {a}, emu {b}");
    }
}
