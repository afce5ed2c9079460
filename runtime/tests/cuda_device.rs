//! The CUDA path on a real GPU: what the emulated device cannot check.
//! Every device strategy against `seq` on random meshes, kernels of the same
//! loop shape, stream ordering and host/device coherence over long chains of
//! asynchronous loops, pinned staging through a second stream, event timing,
//! NVRTC's options and the PTX cache, dynamic shared memory above 48 KiB,
//! the by-value parameter block with many slots, launches beyond one grid,
//! block sizes, and runtimes on several threads.
//!
//! Without a CUDA device each test prints "skipped: no CUDA device" and
//! passes (CI has no GPU); with `PARLOOP_REQUIRE_CUDA=1` (set by
//! `bundle/run.sh`, see `ci/gpu`) a device that cannot be used is a failure.
//! Tests that need an environment variable at runtime creation run
//! themselves again in a child process with that variable set.

#[path = "support/mesh_kernels.rs"]
mod mesh_kernels;
use mesh_kernels::{edge_flux, spread, tally};

use std::process::Command;
use std::time::Instant;

use parloop::{Access, Backend, Runtime, Strategy};

const STRATEGIES: [Option<Strategy>; 5] =
    [Some(Strategy::Staged), Some(Strategy::StagedAtomic), Some(Strategy::Atomic), Some(Strategy::GlobalColour), None];

fn require_cuda() -> bool {
    std::env::var("PARLOOP_REQUIRE_CUDA").is_ok_and(|v| v.trim() == "1")
}

/// `PARLOOP_CUDA_TEST_EMU=1` runs the tests that do not need CUDA itself on
/// the emulated device instead: a check of the tests, on a machine without
/// a GPU (the others skip).
fn emulated() -> bool {
    std::env::var("PARLOOP_CUDA_TEST_EMU").is_ok_and(|v| v.trim() == "1")
}

/// The device backend under test.
fn device() -> Runtime {
    Runtime::with_backend(if emulated() { Backend::Emu } else { Backend::Cuda }).unwrap()
}

/// A runtime on the GPU, or `None` (having said why) when there is none.
fn cuda() -> Option<Runtime> {
    if emulated() {
        return Some(device());
    }
    match Runtime::with_backend(Backend::Cuda) {
        Ok(rt) => Some(rt),
        Err(e) if require_cuda() => panic!("PARLOOP_REQUIRE_CUDA=1 but the cuda backend cannot start: {e}"),
        Err(e) => {
            println!("skipped: no CUDA device ({e})");
            None
        }
    }
}

macro_rules! cuda_or_skip {
    () => {
        match cuda() {
            Some(rt) => rt,
            None => return,
        }
    };
}

/// For tests of CUDA itself (no emulated run).
macro_rules! only_cuda {
    () => {
        if emulated() {
            println!("skipped: needs CUDA itself");
            return;
        }
    };
}

/// Runs the test `name` again in a child process with `envs` set and checks
/// that it passes; returns `true` in the parent (which has nothing left to
/// do) and `false` in the child (which runs the test's body).
fn run_in_child(name: &str, envs: &[(&str, String)]) -> bool {
    if std::env::var("PARLOOP_CUDA_TEST_CHILD").is_ok_and(|v| v == name) {
        return false;
    }
    if cuda().is_none() {
        return true;
    }
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("PARLOOP_CUDA_TEST_CHILD", name)
        .env("PARLOOP_REQUIRE_CUDA", "1");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "child run of {name} with {envs:?} failed:\n{text}");
    assert!(text.contains("1 passed"), "child run of {name} ran no test:\n{text}");
    true
}

fn scratch(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("parloop-cuda-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// xorshift64*: deterministic random meshes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

// ---------------------------------------------------------------------------
// Kernels

#[parloop::kernel]
fn add_one(v: &mut f64) {
    *v += 1.0;
}

#[parloop::kernel]
fn add_two(v: &mut f64) {
    *v += 2.0;
}

#[parloop::kernel]
fn inc_one(r: &mut i64) {
    *r += 1;
}

#[parloop::kernel]
fn inc_ten(r: &mut i64) {
    *r += 10;
}

/// Direct RW from another direct dat (integers, so results are exact).
#[parloop::kernel]
fn mix(b: &i64, a: &mut i64) {
    *a = (*a * 3 + *b) % 1_000_003;
}

/// Scatter of edge values to both nodes.
#[parloop::kernel]
fn scatter(a: &i64, n0: &mut i64, n1: &mut i64) {
    *n0 += *a;
    *n1 += 2 * *a;
}

/// Gather back from nodes to edges.
#[parloop::kernel]
fn gather(n: &[[i64; 1]; 2], b: &mut i64) {
    *b = (n[0][0] + 7 * n[1][0]) % 999_983;
}

/// Wide INC: staged bytes grow with the dat's dim.
#[parloop::kernel]
fn wide_inc(w: &f64, r0: &mut [f64; 8], r1: &mut [f64; 8]) {
    for k in 0..8 {
        r0[k] += *w * (k as f64 + 1.0);
        r1[k] -= *w * 0.5;
    }
}

/// Many arguments and maps: many slots of the by-value parameter block.
#[parloop::kernel]
fn many_slots(
    xa: &[[f64; 2]; 4],
    xb: &[[f64; 2]; 4],
    xc: &[[f64; 2]; 3],
    xd: &[[f64; 2]; 3],
    wa: &f64,
    wb: &[f64; 3],
    ia: &i32,
    ra: &mut [[f64; 1]; 4],
    rb: &mut f64,
    rc: &mut f64,
    out: &mut [f64; 2],
    cnt: &mut i64,
    lo: &mut f64,
    hi: &mut f64,
) {
    let mut s = 0.0;
    for k in 0..4 {
        s += xa[k][0] - xb[k][1];
        ra[k][0] += *wa * (k as f64 + 1.0);
    }
    for k in 0..3 {
        s += xc[k][1] * wb[k] + xd[k][0];
    }
    *rb += s;
    *rc -= *wa * (*ia as f64);
    out[0] = s;
    out[1] = *wa + wb[2];
    *cnt += *ia as i64;
    *lo = lo.min(s);
    *hi = hi.max(s);
}

/// Direct loop with a reduction, for launches beyond one grid.
#[parloop::kernel]
fn index_sum(id: &i64, v: &mut i64, total: &mut i64) {
    *v = 2 * *id + 1;
    *total += *id;
}

/// `a * b + c`: one rounding with a fused multiply-add, two without.
#[parloop::kernel]
fn mul_add(a: &f64, b: &f64, c: &f64, out: &mut f64) {
    *out = *a * *b + *c;
}

#[parloop::kernel]
fn min_max(v: &f64, lo: &mut f64, hi: &mut f64) {
    *lo = lo.min(*v);
    *hi = hi.max(*v);
}

// ---------------------------------------------------------------------------
// A random mesh and every loop over it

struct Mesh {
    nedges: usize,
    nnodes: usize,
    pairs: Vec<i32>,
    tri: Vec<i32>,
    /// A permutation of the edges: indirect RW without repeated targets.
    perm: Vec<i32>,
    weights: Vec<f64>,
    coords: Vec<f64>,
}

fn mesh(nedges: usize, nnodes: usize, seed: u64) -> Mesh {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    Mesh {
        nedges,
        nnodes,
        pairs: (0..2 * nedges).map(|_| rng.below(nnodes) as i32).collect(),
        tri: (0..3 * nedges).map(|_| rng.below(nnodes) as i32).collect(),
        perm: {
            let mut p: Vec<i32> = (0..nedges as i32).collect();
            for i in (1..nedges).rev() {
                p.swap(i, rng.below(i + 1));
            }
            p
        },
        weights: (0..nedges).map(|_| 0.01 + 10.0 * rng.unit()).collect(),
        coords: (0..2 * nnodes).map(|_| 10.0 * rng.unit() - 5.0).collect(),
    }
}

#[derive(Debug, PartialEq)]
struct Outcome {
    res: Vec<f64>,
    total: f64,
    count: u64,
    lo: i32,
    hi: f32,
    tally: Vec<i64>,
    spread: Vec<f32>,
    slots: Vec<i64>,
}

fn run_mesh(rt: &mut Runtime, strategy: Option<Strategy>, part: Option<usize>, m: &Mesh, calls: usize) -> Outcome {
    rt.set_strategy(strategy);
    rt.set_part_size(part).unwrap();
    let edges = rt.set("edges", m.nedges).unwrap();
    let nodes = rt.set("nodes", m.nnodes).unwrap();
    let pair = rt.map("pair", &edges, &nodes, 2, m.pairs.clone()).unwrap();
    let tri = rt.map("tri", &edges, &nodes, 3, m.tri.clone()).unwrap();
    let w = rt.dat("w", &edges, 1, m.weights.clone()).unwrap();
    let x = rt.dat("x", &nodes, 2, m.coords.clone()).unwrap();
    let res = rt.dat("res", &nodes, 2, vec![0.0f64; 2 * m.nnodes]).unwrap();
    let ids = rt.dat("ids", &edges, 1, (0..m.nedges as i64).collect()).unwrap();
    let t = rt.dat("t", &nodes, 2, vec![0i64; 2 * m.nnodes]).unwrap();
    let slots = rt.set("slots", m.nedges).unwrap();
    let perm = rt.map("perm", &edges, &slots, 1, m.perm.clone()).unwrap();
    let u = rt.dat("u", &slots, 2, (0..2 * m.nedges as i64).collect()).unwrap();
    let v = rt.dat("v", &edges, 1, m.weights.iter().map(|&w| w as f32).collect()).unwrap();
    let s = rt.dat("s", &nodes, 1, vec![0.0f32; m.nnodes]).unwrap();
    let count = rt.global("count", &[0u64]).unwrap();
    let lo = rt.global("lo", &[i32::MAX]).unwrap();
    let hi = rt.global("hi", &[f32::MIN]).unwrap();
    let total = rt.global("total", &[0.0f64]).unwrap();
    // Several calls: the automatic strategy times each candidate on the
    // first calls, then keeps one.
    for _ in 0..calls {
        rt.par_loop(
            edge_flux::KERNEL,
            &edges,
            &[
                w.arg(Access::READ),
                x.arg_vec(&pair, Access::READ),
                res.arg_via(&pair, 0, Access::INC),
                res.arg_via(&pair, 1, Access::INC),
                count.arg(Access::INC),
                lo.arg(Access::MIN),
                hi.arg(Access::MAX),
                total.arg(Access::INC),
            ],
        )
        .unwrap();
        rt.par_loop(tally::KERNEL, &edges, &[ids.arg(Access::READ), t.arg_via(&tri, 2, Access::INC)]).unwrap();
        rt.par_loop(tally::KERNEL, &edges, &[ids.arg(Access::READ), u.arg_via(&perm, 0, Access::RW)]).unwrap();
        rt.par_loop(spread::KERNEL, &edges, &[v.arg(Access::READ), s.arg_vec(&tri, Access::INC)]).unwrap();
    }
    Outcome {
        res: res.values().unwrap(),
        total: total.value().unwrap(),
        count: count.value().unwrap(),
        lo: lo.value().unwrap(),
        hi: hi.value().unwrap(),
        tally: t.values().unwrap(),
        spread: s.values().unwrap(),
        slots: u.values().unwrap(),
    }
}

fn close(a: f64, b: f64, scale: f64) -> bool {
    a == b || (a - b).abs() <= 1e-12 * scale.max(1.0)
}

fn assert_matches(what: &str, seq: &Outcome, dev: &Outcome) {
    let scale = seq.res.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (k, (a, b)) in seq.res.iter().zip(&dev.res).enumerate() {
        assert!(close(*a, *b, scale), "{what}: res[{k}]: seq {a}, cuda {b}");
    }
    assert_eq!(seq.res.len(), dev.res.len(), "{what}: res length");
    assert!(close(seq.total, dev.total, scale * seq.res.len() as f64), "{what}: total {} vs {}", seq.total, dev.total);
    assert_eq!(seq.count, dev.count, "{what}: count");
    assert_eq!(seq.lo, dev.lo, "{what}: lo");
    assert_eq!(seq.hi, dev.hi, "{what}: hi");
    assert_eq!(seq.tally, dev.tally, "{what}: tally");
    assert_eq!(seq.slots, dev.slots, "{what}: indirect RW");
    for (k, (a, b)) in seq.spread.iter().zip(&dev.spread).enumerate() {
        assert!((a - b).abs() <= 1e-4 * a.abs().max(1.0), "{what}: spread[{k}]: seq {a}, cuda {b}");
    }
}

fn seq() -> Runtime {
    Runtime::with_backend(Backend::Seq).unwrap()
}

// ---------------------------------------------------------------------------
// Tests

#[test]
fn the_device_describes_itself() {
    only_cuda!();
    let rt = cuda_or_skip!();
    let p = rt.device_properties().expect("a device backend has properties");
    let (major, minor) = p.compute_capability.expect("a GPU has a compute capability");
    println!("{p:?}");
    assert!(major >= 5 && (0..10).contains(&minor), "compute capability {major}.{minor}");
    assert!(p.multiprocessors > 0);
    assert!(p.shared_memory_per_block >= 48 * 1024, "{p:?}");
    assert!(p.shared_memory_per_block_optin >= p.shared_memory_per_block, "{p:?}");
    assert!(p.global_memory >= 1 << 30, "{p:?}");
    let name = rt.device_name().unwrap();
    assert!(name.contains(&format!("sm_{major}{minor}")) && name.contains("NVRTC"), "{name}");
}

#[test]
fn copy_bandwidth_is_physically_plausible() {
    only_cuda!();
    let rt = cuda_or_skip!();
    let gbs = rt.copy_bandwidth(256 << 20, 10).unwrap();
    println!("device-to-device copy: {gbs:.0} GB/s");
    assert!(gbs > 10.0 && gbs < 50_000.0, "{gbs} GB/s");
}

#[test]
fn every_strategy_matches_seq_on_random_meshes() {
    let _ = cuda_or_skip!();
    let cases: &[(usize, usize, Option<usize>)] = &[
        (0, 5, None),
        (1, 1, None),
        (2, 3, Some(1)),
        (17, 4, Some(3)),
        (1000, 37, None),
        (3000, 2999, Some(37)),
        (20_000, 900, Some(1024)),
        (200_000, 50_000, None),
    ];
    for (i, &(nedges, nnodes, part)) in cases.iter().enumerate() {
        let m = mesh(nedges, nnodes, i as u64 + 1);
        let want = run_mesh(&mut seq(), None, None, &m, 1);
        for strategy in STRATEGIES {
            // A fresh runtime per case: names are unique per runtime.
            let mut dev = device();
            let calls = if strategy.is_none() { 10 } else { 1 };
            let got = run_mesh(&mut dev, strategy, part, &m, calls);
            let what = format!("{strategy:?}, {nedges} edges, {nnodes} nodes, part {part:?}");
            if calls == 1 {
                assert_matches(&what, &want, &got);
            } else {
                // Exact parts scale with the number of calls.
                assert_eq!(got.count, want.count * calls as u64, "{what}: count");
                assert_eq!(got.lo, want.lo, "{what}: lo");
                assert_eq!(got.hi, want.hi, "{what}: hi");
                let tally: Vec<i64> = want.tally.iter().map(|v| v * calls as i64).collect();
                assert_eq!(got.tally, tally, "{what}: tally");
                let slots: Vec<i64> =
                    want.slots.iter().enumerate().map(|(i, v)| i as i64 + (v - i as i64) * calls as i64).collect();
                assert_eq!(got.slots, slots, "{what}: indirect RW");
            }
        }
    }
}

#[test]
fn deterministic_strategies_are_bitwise_reproducible_on_the_gpu() {
    let _ = cuda_or_skip!();
    let m = mesh(50_000, 3_000, 99);
    for strategy in [Strategy::Staged, Strategy::GlobalColour] {
        let a = run_mesh(&mut device(), Some(strategy), None, &m, 1);
        let b = run_mesh(&mut device(), Some(strategy), None, &m, 1);
        let bits = |o: &Outcome| (o.res.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), o.total.to_bits());
        assert_eq!(bits(&a), bits(&b), "{strategy:?} differs between two runs");
        assert_matches(&format!("{strategy:?}"), &run_mesh(&mut seq(), None, None, &m, 1), &a);
    }
}

#[test]
fn kernels_of_the_same_shape_run_their_own_code() {
    let _ = cuda_or_skip!();
    for strategy in STRATEGIES {
        let mut rt = device();
        rt.set_strategy(strategy);
        let cells = rt.set("cells", 1000).unwrap();
        let nodes = rt.set("nodes", 300).unwrap();
        let m = rt.map("m", &cells, &nodes, 1, (0..1000).map(|i: i32| i * 7 % 300).collect()).unwrap();
        let v = rt.dat("v", &cells, 1, vec![0.0f64; 1000]).unwrap();
        let r = rt.dat("r", &nodes, 1, vec![0i64; 300]).unwrap();
        rt.par_loop(add_one::KERNEL, &cells, &[v.arg(Access::RW)]).unwrap();
        rt.par_loop(add_two::KERNEL, &cells, &[v.arg(Access::RW)]).unwrap();
        rt.par_loop(inc_one::KERNEL, &cells, &[r.arg_via(&m, 0, Access::INC)]).unwrap();
        rt.par_loop(inc_ten::KERNEL, &cells, &[r.arg_via(&m, 0, Access::INC)]).unwrap();
        assert!(
            v.values().unwrap().iter().all(|&x| x == 3.0),
            "{strategy:?}: add_one then add_two gave {:?}",
            &v.values().unwrap()[..4]
        );
        let per_node: Vec<i64> = (0..300).map(|n| 11 * (0..1000).filter(|i| i * 7 % 300 == n).count() as i64).collect();
        assert_eq!(r.values().unwrap(), per_node, "{strategy:?}: inc_one then inc_ten");
    }
}

/// A long chain of dependent loops, queued without waiting, with host reads
/// and writes and new declarations in the middle: every result exact.
fn chain(rt: &mut Runtime, strategy: Option<Strategy>) -> Vec<Vec<i64>> {
    rt.set_strategy(strategy);
    let (nedges, nnodes) = (30_000, 7_000);
    let edges = rt.set("edges", nedges).unwrap();
    let nodes = rt.set("nodes", nnodes).unwrap();
    let pairs: Vec<i32> = (0..2 * nedges).map(|k| ((k * 7919 + k / 2 * 13) % nnodes) as i32).collect();
    let pair = rt.map("pair", &edges, &nodes, 2, pairs).unwrap();
    let a = rt.dat("a", &edges, 1, (0..nedges as i64).collect()).unwrap();
    let b = rt.dat("b", &edges, 1, vec![1i64; nedges]).unwrap();
    let n = rt.dat("n", &nodes, 1, vec![0i64; nnodes]).unwrap();
    let mut seen = Vec::new();
    for step in 0..60 {
        rt.par_loop(mix::KERNEL, &edges, &[b.arg(Access::READ), a.arg(Access::RW)]).unwrap();
        rt.par_loop(
            scatter::KERNEL,
            &edges,
            &[a.arg(Access::READ), n.arg_via(&pair, 0, Access::INC), n.arg_via(&pair, 1, Access::INC)],
        )
        .unwrap();
        rt.par_loop(gather::KERNEL, &edges, &[n.arg_vec(&pair, Access::READ), b.arg(Access::WRITE)]).unwrap();
        match step {
            // Host reads between queued loops.
            10 => seen.push(n.values().unwrap()),
            // Host writes of a dat that queued loops read and write.
            20 => n.set_values(&vec![5i64; nnodes]).unwrap(),
            30 => b.with_values_mut(|v| v.iter_mut().step_by(3).for_each(|x| *x += 11)).unwrap(),
            // A dat declared while loops are queued, used at once.
            40 => {
                let fresh = rt.dat("fresh", &edges, 1, vec![0i64; nedges]).unwrap();
                rt.par_loop(mix::KERNEL, &edges, &[a.arg(Access::READ), fresh.arg(Access::RW)]).unwrap();
                rt.par_loop(mix::KERNEL, &edges, &[fresh.arg(Access::READ), b.arg(Access::RW)]).unwrap();
                seen.push(fresh.values().unwrap());
            }
            _ => {}
        }
    }
    seen.extend([a.values().unwrap(), b.values().unwrap(), n.values().unwrap()]);
    seen
}

#[test]
fn dependent_loops_are_ordered_on_the_stream_and_host_copies_stay_coherent() {
    let _ = cuda_or_skip!();
    let want = chain(&mut seq(), None);
    for strategy in STRATEGIES {
        let got = chain(&mut device(), strategy);
        for (k, (w, g)) in want.iter().zip(&got).enumerate() {
            if let Some(i) = (0..w.len()).find(|&i| w[i] != g[i]) {
                panic!("{strategy:?}: snapshot {k}, entry {i}: seq {}, cuda {}", w[i], g[i]);
            }
        }
        assert_eq!(want, got, "{strategy:?}");
    }
}

#[test]
fn dynamic_shared_memory_above_48_kib_is_opted_in() {
    only_cuda!();
    let rt0 = cuda_or_skip!();
    let optin = rt0.device_properties().unwrap().shared_memory_per_block_optin;
    drop(rt0);
    if optin <= 48 * 1024 {
        println!("skipped: this device offers no shared memory above 48 KiB ({optin} bytes)");
        return;
    }
    // Element e increments nodes 2e and 2e+1 (8 f64 each): a block of `part`
    // elements stages 2 * part * 64 bytes. Parts for about 64 KiB, then for
    // about 90% of the opt-in limit, on one runtime (the module's entry opts
    // in again for the larger launch).
    let parts = [64 * 1024 / 128 + 16, optin * 9 / 10 / 128];
    let nedges = 4 * parts[1] + 5;
    let nnodes = 2 * nedges;
    let values: Vec<i32> = (0..2 * nedges as i32).collect();
    let weights: Vec<f64> = (0..nedges).map(|e| 1.0 + (e % 13) as f64).collect();
    let run = |rt: &mut Runtime, strategy: Option<Strategy>, part: Option<usize>| -> Result<Vec<f64>, parloop::Error> {
        rt.set_strategy(strategy);
        rt.set_part_size(part).unwrap();
        let tag = format!("{part:?}");
        let edges = rt.set(&format!("edges{tag}"), nedges)?;
        let nodes = rt.set(&format!("nodes{tag}"), nnodes)?;
        let map = rt.map(&format!("m{tag}"), &edges, &nodes, 2, values.clone())?;
        let w = rt.dat(&format!("w{tag}"), &edges, 1, weights.clone())?;
        let r = rt.dat(&format!("r{tag}"), &nodes, 8, vec![0.0f64; 8 * nnodes])?;
        rt.par_loop(
            wide_inc::KERNEL,
            &edges,
            &[w.arg(Access::READ), r.arg_via(&map, 0, Access::INC), r.arg_via(&map, 1, Access::INC)],
        )?;
        r.values()
    };
    let want = run(&mut seq(), None, None).unwrap();
    for strategy in [Strategy::Staged, Strategy::StagedAtomic] {
        let mut rt = device();
        for part in parts {
            let got = run(&mut rt, Some(strategy), Some(part))
                .unwrap_or_else(|e| panic!("{strategy:?}, part {part} ({} KiB staged): {e}", part * 128 / 1024));
            assert_eq!(got, want, "{strategy:?}, part {part}");
        }
        // Beyond the opt-in limit: an error (or a correct result if the
        // runtime splits the blocks), never a crash or wrong values.
        match run(&mut rt, Some(strategy), Some(optin / 128 + 64)) {
            Ok(got) => assert_eq!(got, want, "{strategy:?}, part beyond the limit"),
            Err(e) => println!("{strategy:?} beyond the shared-memory limit: {e}"),
        }
    }
}

#[test]
fn the_by_value_parameter_block_carries_many_slots() {
    let _ = cuda_or_skip!();
    let (ncells, nnodes) = (20_000, 3_000);
    let mut rng = Rng(7);
    let m4a: Vec<i32> = (0..4 * ncells).map(|_| rng.below(nnodes) as i32).collect();
    let m4b: Vec<i32> = (0..4 * ncells).map(|_| rng.below(nnodes) as i32).collect();
    let m3c: Vec<i32> = (0..3 * ncells).map(|_| rng.below(nnodes) as i32).collect();
    let m3d: Vec<i32> = (0..3 * ncells).map(|_| rng.below(nnodes) as i32).collect();
    let xs: Vec<Vec<f64>> = (0..4).map(|_| (0..2 * nnodes).map(|_| rng.unit() - 0.5).collect()).collect();
    let wa: Vec<f64> = (0..ncells).map(|_| rng.unit()).collect();
    let wb: Vec<f64> = (0..3 * ncells).map(|_| rng.unit()).collect();
    let ia: Vec<i32> = (0..ncells).map(|_| rng.below(100) as i32 - 50).collect();
    type Result6 = (Vec<f64>, Vec<f64>, Vec<f64>, i64, f64, f64);
    let run = |rt: &mut Runtime, strategy: Option<Strategy>| -> Result6 {
        rt.set_strategy(strategy);
        let cells = rt.set("cells", ncells).unwrap();
        let nodes = rt.set("nodes", nnodes).unwrap();
        let ma = rt.map("ma", &cells, &nodes, 4, m4a.clone()).unwrap();
        let mb = rt.map("mb", &cells, &nodes, 4, m4b.clone()).unwrap();
        let mc = rt.map("mc", &cells, &nodes, 3, m3c.clone()).unwrap();
        let md = rt.map("md", &cells, &nodes, 3, m3d.clone()).unwrap();
        let x: Vec<_> = (0..4).map(|k| rt.dat(&format!("x{k}"), &nodes, 2, xs[k].clone()).unwrap()).collect();
        let wa = rt.dat("wa", &cells, 1, wa.clone()).unwrap();
        let wb = rt.dat("wb", &cells, 3, wb.clone()).unwrap();
        let ia = rt.dat("ia", &cells, 1, ia.clone()).unwrap();
        let ra = rt.dat("ra", &nodes, 1, vec![0.0f64; nnodes]).unwrap();
        let rb = rt.dat("rb", &nodes, 1, vec![0.0f64; nnodes]).unwrap();
        let out = rt.dat("out", &cells, 2, vec![0.0f64; 2 * ncells]).unwrap();
        let cnt = rt.global("cnt", &[0i64]).unwrap();
        let lo = rt.global("lo", &[f64::INFINITY]).unwrap();
        let hi = rt.global("hi", &[f64::NEG_INFINITY]).unwrap();
        rt.par_loop(
            many_slots::KERNEL,
            &cells,
            &[
                x[0].arg_vec(&ma, Access::READ),
                x[1].arg_vec(&mb, Access::READ),
                x[2].arg_vec(&mc, Access::READ),
                x[3].arg_vec(&md, Access::READ),
                wa.arg(Access::READ),
                wb.arg(Access::READ),
                ia.arg(Access::READ),
                ra.arg_vec(&ma, Access::INC),
                rb.arg_via(&mc, 0, Access::INC),
                rb.arg_via(&md, 2, Access::INC),
                out.arg(Access::WRITE),
                cnt.arg(Access::INC),
                lo.arg(Access::MIN),
                hi.arg(Access::MAX),
            ],
        )
        .unwrap();
        (
            ra.values().unwrap(),
            rb.values().unwrap(),
            out.values().unwrap(),
            cnt.value().unwrap(),
            lo.value().unwrap(),
            hi.value().unwrap(),
        )
    };
    let want = run(&mut seq(), None);
    for strategy in STRATEGIES {
        let got = run(&mut device(), strategy);
        let what = format!("{strategy:?}");
        for (k, (a, b)) in want.0.iter().zip(&got.0).enumerate() {
            assert!(close(*a, *b, 100.0), "{what}: ra[{k}]: seq {a}, cuda {b}");
        }
        for (k, (a, b)) in want.1.iter().zip(&got.1).enumerate() {
            assert!(close(*a, *b, 1000.0), "{what}: rb[{k}]: seq {a}, cuda {b}");
        }
        assert_eq!(want.2, got.2, "{what}: direct WRITE");
        assert_eq!((want.3, want.4, want.5), (got.3, got.4, got.5), "{what}: reductions");
    }
}

#[test]
fn direct_loops_beyond_one_grid_cover_every_element() {
    let rt = cuda_or_skip!();
    // More than 4096 blocks of 1024 threads: the grid-stride loop wraps.
    let n = 5_000_000usize;
    let set = rt.set("big", n).unwrap();
    let id = rt.dat("id", &set, 1, (0..n as i64).collect()).unwrap();
    let v = rt.dat("v", &set, 1, vec![0i64; n]).unwrap();
    let total = rt.global("total", &[0i64]).unwrap();
    rt.par_loop(index_sum::KERNEL, &set, &[id.arg(Access::READ), v.arg(Access::WRITE), total.arg(Access::INC)])
        .unwrap();
    assert_eq!(total.value().unwrap(), (n as i64) * (n as i64 - 1) / 2);
    let values = v.values().unwrap();
    if let Some(i) = (0..n).find(|&i| values[i] != 2 * i as i64 + 1) {
        panic!("element {i}: {} instead of {}", values[i], 2 * i + 1);
    }
}

#[test]
fn min_and_max_reductions_treat_nan_as_seq_does() {
    let _ = cuda_or_skip!();
    for (init, data) in [
        (f64::NAN, vec![3.0, -1.0, 7.5, 2.0]),
        (0.0, vec![f64::NAN, 4.0, -2.0, f64::NAN]),
        (f64::INFINITY, vec![f64::NAN; 5]),
    ] {
        let run = |rt: &Runtime| {
            let set = rt.set("s", data.len() * 1000).unwrap();
            let v = rt.dat("v", &set, 1, data.iter().copied().cycle().take(data.len() * 1000).collect()).unwrap();
            let lo = rt.global("lo", &[init]).unwrap();
            let hi = rt.global("hi", &[init]).unwrap();
            rt.par_loop(min_max::KERNEL, &set, &[v.arg(Access::READ), lo.arg(Access::MIN), hi.arg(Access::MAX)])
                .unwrap();
            (lo.value().unwrap().to_bits(), hi.value().unwrap().to_bits())
        };
        let want = run(&seq());
        let got = run(&device());
        assert_eq!(
            (f64::from_bits(want.0), f64::from_bits(want.1)),
            (f64::from_bits(got.0), f64::from_bits(got.1)),
            "init {init}, data {data:?}: seq vs cuda"
        );
        assert_eq!(want, got, "init {init}, data {data:?}: bits");
    }
}

#[test]
fn event_timing_measures_device_work() {
    only_cuda!();
    let path = std::env::temp_dir().join(format!("parloop-cuda-profile-{}.json", std::process::id()));
    if run_in_child(
        "event_timing_measures_device_work",
        &[("PARLOOP_PROFILE", format!("json:{}", path.display())), ("PARLOOP_STRATEGY", "staged".into())],
    ) {
        return;
    }
    // In the child: every loop is timed with events on the compute stream.
    let rt = cuda().unwrap();
    let copy = rt.copy_bandwidth(256 << 20, 5).unwrap();
    let m = mesh(2_000_000, 500_000, 5);
    let edges = rt.set("edges", m.nedges).unwrap();
    let nodes = rt.set("nodes", m.nnodes).unwrap();
    let tri = rt.map("tri", &edges, &nodes, 3, m.tri.clone()).unwrap();
    let v = rt.dat("v", &edges, 1, m.weights.iter().map(|&w| w as f32).collect()).unwrap();
    let s = rt.dat("s", &nodes, 1, vec![0.0f32; m.nnodes]).unwrap();
    let x = rt.set("x", 8 << 20).unwrap();
    let a = rt.dat("a", &x, 1, vec![1.0f64; 8 << 20]).unwrap();
    let start = Instant::now();
    for _ in 0..20 {
        rt.par_loop(spread::KERNEL, &edges, &[v.arg(Access::READ), s.arg_vec(&tri, Access::INC)]).unwrap();
        rt.par_loop(add_one::KERNEL, &x, &[a.arg(Access::RW)]).unwrap();
    }
    assert_eq!(a.values().unwrap()[12345], 21.0);
    let wall = start.elapsed().as_secs_f64();
    let report = rt.report();
    for r in &report {
        println!(
            "{}: {} calls, {:.3} ms, {:.0} GB/s (copy {copy:.0} GB/s)",
            r.name,
            r.calls,
            r.seconds * 1e3,
            r.gb_per_s()
        );
        assert_eq!(r.calls, 20, "{}", r.name);
        assert!(r.seconds > 0.0, "{}: no time recorded", r.name);
        // Launch times alone would give impossible bandwidths.
        assert!(r.gb_per_s() < 1.5 * copy, "{}: {:.0} GB/s beats the copy bandwidth {copy:.0}", r.name, r.gb_per_s());
    }
    let timed: f64 = report.iter().map(|r| r.seconds).sum();
    assert!(timed <= wall * 1.05 + 1e-3, "event times {timed} s exceed the wall time {wall} s");
    // 20 passes over 64 MiB of f64 read and written.
    let direct = report.iter().find(|r| r.name == "add_one").unwrap();
    assert!(direct.seconds >= 20.0 * 2.0 * 64.0 * 1024.0 * 1024.0 / (2.0 * copy * 1e9), "{direct:?}");
}

#[test]
fn nvrtc_compiles_for_the_device_with_line_info_and_the_ptx_cache_is_reused_or_rebuilt() {
    only_cuda!();
    let dir = scratch("cache");
    if run_in_child(
        "nvrtc_compiles_for_the_device_with_line_info_and_the_ptx_cache_is_reused_or_rebuilt",
        &[("PARLOOP_CACHE_DIR", dir.display().to_string())],
    ) {
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let m = mesh(5000, 800, 3);
    let want = run_mesh(&mut seq(), None, None, &m, 1);
    let mut rt = cuda().unwrap();
    let (major, minor) = rt.device_properties().unwrap().compute_capability.unwrap();
    assert_matches("first run", &want, &run_mesh(&mut rt, Some(Strategy::Staged), None, &m, 1));
    drop(rt);
    let ptx_dir = std::path::Path::new(&std::env::var("PARLOOP_CACHE_DIR").unwrap()).join("cuda");
    let list = || {
        let mut v: Vec<_> = std::fs::read_dir(&ptx_dir)
            .unwrap_or_else(|e| panic!("{}: {e}", ptx_dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "ptx"))
            .collect();
        v.sort();
        v
    };
    let files = list();
    assert!(files.len() >= 3, "one module per loop expected in {}: {files:?}", ptx_dir.display());
    for f in &files {
        let ptx = std::fs::read_to_string(f).unwrap();
        assert!(
            ptx.contains(&format!(".target sm_{major}{minor}")),
            "{}: not compiled for sm_{major}{minor}",
            f.display()
        );
        assert!(ptx.contains(".loc"), "{}: no line info (-lineinfo)", f.display());
        assert!(ptx.contains(".entry"), "{}: no entry", f.display());
    }
    // A second runtime compiles nothing: the cache files are untouched.
    let stamps: Vec<_> = files.iter().map(|f| std::fs::metadata(f).unwrap().modified().unwrap()).collect();
    assert_matches("cached run", &want, &run_mesh(&mut cuda().unwrap(), Some(Strategy::Staged), None, &m, 1));
    assert_eq!(list(), files, "the cached run wrote new modules");
    let again: Vec<_> = files.iter().map(|f| std::fs::metadata(f).unwrap().modified().unwrap()).collect();
    assert_eq!(stamps, again, "the cached run rewrote modules");
    // A truncated cache entry is compiled again, not loaded.
    for f in &files {
        let ptx = std::fs::read(f).unwrap();
        std::fs::write(f, &ptx[..ptx.len() / 2]).unwrap();
    }
    assert_matches("after truncation", &want, &run_mesh(&mut cuda().unwrap(), Some(Strategy::Staged), None, &m, 1));
}

#[test]
fn block_sizes_from_32_to_1024_give_the_same_results() {
    const NAME: &str = "block_sizes_from_32_to_1024_give_the_same_results";
    if std::env::var("PARLOOP_CUDA_TEST_CHILD").is_ok_and(|v| v == NAME) {
        let m = mesh(40_000, 5_000, 11);
        let want = run_mesh(&mut seq(), None, None, &m, 1);
        for strategy in STRATEGIES.into_iter().flatten() {
            let got = run_mesh(&mut cuda().unwrap(), Some(strategy), None, &m, 1);
            let what = format!("{strategy:?}, PARLOOP_BLOCK_SIZE={}", std::env::var("PARLOOP_BLOCK_SIZE").unwrap());
            assert_matches(&what, &want, &got);
        }
        return;
    }
    // 96: a block that is not a power of two (the reduction tree's odd shape).
    for block in ["32", "96", "1024"] {
        assert!(run_in_child(NAME, &[("PARLOOP_BLOCK_SIZE", block.into())]));
    }
}

#[test]
fn runtimes_work_from_other_threads_and_side_by_side() {
    let rt = cuda_or_skip!();
    let m = mesh(30_000, 4_000, 21);
    let want = run_mesh(&mut seq(), None, None, &m, 1);
    // A runtime created on this thread, used on another.
    let handle = std::thread::spawn({
        let m = mesh(30_000, 4_000, 21);
        move || {
            let mut rt = rt;
            run_mesh(&mut rt, Some(Strategy::Staged), None, &m, 1)
        }
    });
    assert_matches("runtime moved to another thread", &want, &handle.join().unwrap());
    // Four runtimes on four threads at once.
    let results: Vec<Outcome> = std::thread::scope(|s| {
        let handles: Vec<_> = STRATEGIES[..4]
            .iter()
            .map(|&strategy| {
                let m = &m;
                s.spawn(move || run_mesh(&mut device(), strategy, None, m, 1))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (strategy, got) in STRATEGIES.iter().zip(&results) {
        assert_matches(&format!("{strategy:?} on its own thread"), &want, got);
    }
}

#[test]
fn a_device_that_does_not_exist_is_an_error() {
    only_cuda!();
    if run_in_child("a_device_that_does_not_exist_is_an_error", &[("PARLOOP_DEVICE", "99".into())]) {
        return;
    }
    match Runtime::with_backend(Backend::Cuda) {
        Ok(_) => panic!("PARLOOP_DEVICE=99 gave a runtime"),
        Err(e) => assert!(e.to_string().contains("99"), "the error does not name the device: {e}"),
    }
}

/// What `Device::host_buffer`, `upload_ordered` and `download_ordered` do
/// for halo exchanges (reached through the runtime only under MPI), done
/// with the same driver calls: host memory of a `Vec` (not page-aligned)
/// registered with `cuMemHostRegister`, copied on a second stream that the
/// compute stream then waits for, and read back on the copy stream after
/// the compute stream's kernel.
#[test]
fn pinned_staging_through_a_second_stream_is_ordered() {
    only_cuda!();
    use cudarc::driver::{result, CudaContext, LaunchConfig, PushKernelArg};
    let rt = cuda_or_skip!();
    let (major, minor) = rt.device_properties().unwrap().compute_capability.unwrap();
    drop(rt);
    let ctx = CudaContext::new(0).unwrap();
    let compute = ctx.new_stream().unwrap();
    let copies = ctx.new_stream().unwrap();
    let arch: &'static str = Box::leak(format!("sm_{major}{minor}").into_boxed_str());
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(
        r#"extern "C" __global__ void twice_plus(unsigned long long p, int n) {
            long long* v = (long long*)p;
            for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v[i] = 2 * v[i] + 1;
        }"#,
        cudarc::nvrtc::CompileOptions { arch: Some(arch), ..Default::default() },
    )
    .unwrap();
    let module = ctx.load_module(ptx).unwrap();
    let f = module.load_function("twice_plus").unwrap();
    for n in [1usize, 511, 4097, 3_000_001] {
        // Element 0 is left out: the registered range does not start on a page.
        let mut host: Vec<i64> = (-1..n as i64).collect();
        let data = &mut host[1..];
        let (ptr, bytes) = (data.as_mut_ptr(), n * 8);
        // SAFETY: `data` owns these bytes and stays put until unregistered below.
        unsafe { cudarc::driver::sys::cuMemHostRegister_v2(ptr.cast(), bytes, 0) }.result().unwrap();
        // SAFETY: a fresh allocation of n * 8 bytes, freed below.
        let dev = unsafe { result::malloc_sync(bytes) }.unwrap();
        // Each round uploads the values read back by the last one, doubles
        // them plus one on the compute stream, and reads them back.
        for round in 0..3u32 {
            // SAFETY: `dev` holds n * 8 bytes; `data` stays unchanged until the copy stream is waited for.
            unsafe { result::memcpy_htod_async(dev, &data[..], copies.cu_stream()) }.unwrap();
            compute.join(&copies).unwrap();
            let n_arg = n as i32;
            let mut launch = compute.launch_builder(&f);
            launch.arg(&dev).arg(&n_arg);
            let config = LaunchConfig { grid_dim: (1024, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
            // SAFETY: the kernel's parameters are a device pointer to n i64 and n.
            unsafe { launch.launch(config) }.unwrap();
            copies.join(&compute).unwrap();
            // SAFETY: as above; waited for at once.
            unsafe { result::memcpy_dtoh_async(&mut data[..], dev, copies.cu_stream()) }.unwrap();
            copies.synchronize().unwrap();
            let expect = |i: usize| (0..=round).fold(i as i64, |x, _| 2 * x + 1);
            if let Some(i) = (0..n).find(|&i| data[i] != expect(i)) {
                panic!("n {n}, round {round}: element {i} is {}, expected {}", data[i], expect(i));
            }
        }
        // SAFETY: allocated above and freed once; unregistered before `host` is dropped.
        unsafe {
            result::free_sync(dev).unwrap();
            cudarc::driver::sys::cuMemHostUnregister(ptr.cast()).result().unwrap();
        }
        assert_eq!(host[0], -1, "the byte before the registered range changed");
    }
}

#[test]
fn device_arithmetic_rounds_as_rust_does_without_fused_multiply_adds() {
    let rt = cuda_or_skip!();
    // (1 + 2^-30)(1 - 2^-30) = 1 - 2^-60: rounded to 1.0 on its own, so the
    // sum with -1 is 0.0; a fused multiply-add keeps -2^-60.
    let eps = f64::powi(2.0, -30);
    let n = 1000;
    let a: Vec<f64> = (0..n).map(|i| (1.0 + eps) * (1.0 + i as f64 * 1e-3)).collect();
    let b: Vec<f64> = (0..n).map(|i| (1.0 - eps) / (1.0 + i as f64 * 1e-3)).collect();
    let c: Vec<f64> = (0..n).map(|i| -(1.0 + i as f64 * 1e-3) / (1.0 + i as f64 * 1e-3)).collect();
    let want: Vec<f64> = (0..n).map(|i| a[i] * b[i] + c[i]).collect();
    let fused = (0..n).filter(|&i| a[i].mul_add(b[i], c[i]) != want[i]).count();
    assert!(fused > n / 2, "the inputs must tell fused from unfused arithmetic ({fused} of {n} do)");
    let set = rt.set("s", n).unwrap();
    let dats: Vec<_> =
        [("a", &a), ("b", &b), ("c", &c)].iter().map(|(name, v)| rt.dat(name, &set, 1, v.to_vec()).unwrap()).collect();
    let out = rt.dat("out", &set, 1, vec![f64::NAN; n]).unwrap();
    rt.par_loop(
        mul_add::KERNEL,
        &set,
        &[dats[0].arg(Access::READ), dats[1].arg(Access::READ), dats[2].arg(Access::READ), out.arg(Access::WRITE)],
    )
    .unwrap();
    let got = out.values().unwrap();
    for i in 0..n {
        assert_eq!(got[i].to_bits(), want[i].to_bits(), "element {i}: device {}, Rust {}", got[i], want[i]);
    }
}
