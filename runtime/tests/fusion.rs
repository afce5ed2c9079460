//! Fusion of direct loops in the lazy trace (issue 15): random chains of
//! direct loops (every direct access mode, globals read and reduced, host
//! reads between, indirect loops breaking chains) give bitwise the values
//! of the eager run on seq, threads and the device backend; the counter
//! says how many loops ran fused, exactly, and what must not fuse does not.

#[path = "support/device.rs"]
mod device;
#[path = "support/programs.rs"]
mod programs;
#[path = "support/mod.rs"]
mod support;

use parloop::{Access, Backend, Dat, Global, ParLoop, Runtime};
use programs::{add, axpy, bits, largest, scale, spread, square, total};
use proptest::prelude::*;

/// One step of a random program. `on` picks the set (0: nodes, 1: edges);
/// dats are numbered within their set, globals 0 and 1.
#[derive(Clone, Debug)]
enum Op {
    /// `axpy` (RW), `square` (WRITE) or `add` (INC), dat `x` into dat `y`.
    Direct { on: usize, kind: usize, x: usize, y: usize },
    /// Dat `x` summed (INC) or maxed (MAX) into global `g`.
    Reduce { on: usize, max: bool, x: usize, g: usize },
    /// Dat `x` scaled by global `g` (READ).
    Scale { on: usize, g: usize, x: usize },
    /// Edge dat `w` INC into node dat `n` through the map (indirect).
    Spread { w: usize, n: usize },
    /// A host read of a dat (forces what it depends on).
    Read { on: usize, d: usize },
    /// A host read of a global.
    ReadGlobal { g: usize },
}

const DATS: usize = 3;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..2usize, 0..3usize, 0..DATS, 1..DATS).prop_map(|(on, kind, x, k)| Op::Direct { on, kind, x, y: (x + k) % DATS }),
        2 => (0..2usize, any::<bool>(), 0..DATS, 0..2usize).prop_map(|(on, max, x, g)| Op::Reduce { on, max, x, g }),
        2 => (0..2usize, 0..2usize, 0..DATS).prop_map(|(on, g, x)| Op::Scale { on, g, x }),
        1 => (0..DATS, 0..DATS).prop_map(|(w, n)| Op::Spread { w, n }),
        1 => (0..2usize, 0..DATS).prop_map(|(on, d)| Op::Read { on, d }),
        1 => (0..2usize).prop_map(|g| Op::ReadGlobal { g }),
    ]
}

type Bits = Vec<Vec<u64>>;

/// Runs `program` on sets of `sizes` (nodes, edges); returns every dat's
/// and global's final bits, what the host reads saw, and the counters.
/// `keep`: the program keeps every loop it executes until the end (the
/// trace then runs the user's loops, lending their arguments to fused
/// launches), instead of `par_loop`'s loops that go at once (the trace
/// rebuilds them from its records).
fn run(
    backend: Backend,
    lazy: bool,
    fusion: bool,
    sizes: (usize, usize),
    program: &[Op],
    keep: bool,
) -> (Bits, parloop::TraceStats) {
    let rt = Runtime::with_lazy(backend, lazy).unwrap();
    let mut kept: Vec<ParLoop> = Vec::new();
    let mut par_loop = |k: &'static parloop::Kernel, set: &parloop::Set, args: &[parloop::Arg]| {
        if keep {
            let lp = ParLoop::new(k, set, args).unwrap();
            rt.execute(&lp).unwrap();
            kept.push(lp);
        } else {
            rt.par_loop(k, set, args).unwrap();
        }
    };
    rt.set_fusion(fusion);
    let (nn, ne) = sizes;
    let nodes = rt.set("nodes", nn).unwrap();
    let edges = rt.set("edges", ne).unwrap();
    let map: Vec<i32> = (0..ne).flat_map(|i| [(i % nn) as i32, ((i * 7 + 3) % nn) as i32]).collect();
    let e2n = rt.map("e2n", &edges, &nodes, 2, map).unwrap();
    let sets = [&nodes, &edges];
    let dats: Vec<Vec<Dat<f64>>> = (0..2)
        .map(|s| {
            let n = [nn, ne][s];
            (0..DATS)
                .map(|d| {
                    let values = (0..n).map(|i| ((i * (d + 2) + s) % 17) as f64 * 0.0625 - 0.5).collect();
                    rt.dat(&format!("d{s}{d}"), sets[s], 1, values).unwrap()
                })
                .collect()
        })
        .collect();
    let globals: Vec<Global<f64>> = (0..2).map(|g| rt.global(&format!("g{g}"), &[0.5 + g as f64]).unwrap()).collect();
    let mut seen: Bits = Vec::new();
    for op in program {
        match *op {
            Op::Direct { on, kind, x, y } => {
                let (k, access) = match kind {
                    0 => (axpy::KERNEL, Access::RW),
                    1 => (square::KERNEL, Access::WRITE),
                    _ => (add::KERNEL, Access::INC),
                };
                par_loop(k, sets[on], &[dats[on][x].arg(Access::READ), dats[on][y].arg(access)]);
            }
            Op::Reduce { on, max, x, g } => {
                let (k, access) = if max { (largest::KERNEL, Access::MAX) } else { (total::KERNEL, Access::INC) };
                par_loop(k, sets[on], &[dats[on][x].arg(Access::READ), globals[g].arg(access)]);
            }
            Op::Scale { on, g, x } => {
                par_loop(scale::KERNEL, sets[on], &[globals[g].arg(Access::READ), dats[on][x].arg(Access::RW)]);
            }
            Op::Spread { w, n } => {
                let (a, b) = (dats[0][n].arg_via(&e2n, 0, Access::INC), dats[0][n].arg_via(&e2n, 1, Access::INC));
                par_loop(spread::KERNEL, &edges, &[dats[1][w].arg(Access::READ), a, b]);
            }
            Op::Read { on, d } => seen.push(bits(&dats[on][d].values().unwrap())),
            Op::ReadGlobal { g } => seen.push(bits(&globals[g].values().unwrap())),
        }
    }
    // Everything left, in recording order (then the reads below find
    // nothing to force).
    rt.flush().unwrap();
    for set in &dats {
        for d in set {
            seen.push(bits(&d.values().unwrap()));
        }
    }
    for g in &globals {
        seen.push(bits(&g.values().unwrap()));
    }
    drop(kept);
    (seen, rt.trace_stats())
}

fn fused_equals_eager(backend: Backend, sizes: (usize, usize), program: &[Op]) -> Result<(), TestCaseError> {
    let (eager, _) = run(backend, false, false, sizes, program, false);
    let (fused, stats) = run(backend, true, true, sizes, program, false);
    prop_assert!(fused == eager, "{backend:?}: lazy with fusion differs from eager");
    let (kept, kept_stats) = run(backend, true, true, sizes, program, true);
    prop_assert!(kept == eager, "{backend:?}: lazy with fusion of kept loops differs from eager");
    prop_assert_eq!(kept_stats.loops_fused, stats.loops_fused);
    prop_assert!(stats.loops_fused <= stats.loops_run);
    Ok(())
}

fn sizes() -> impl Strategy<Value = (usize, usize)> {
    // Small, several chunks, and more than `threads` runs inline.
    prop_oneof![Just((7, 11)), Just((2100, 4500)), Just((20000, 300))]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn random_direct_chains_fused_equal_eager_on_host_backends(
        sizes in sizes(),
        program in prop::collection::vec(op(), 1..24),
    ) {
        fused_equals_eager(Backend::Seq, sizes, &program)?;
        fused_equals_eager(Backend::Threads, sizes, &program)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]
    #[test]
    fn random_direct_chains_lazy_equal_eager_on_the_device(program in prop::collection::vec(op(), 1..16)) {
        fused_equals_eager(device::device_backend(), (9, 13), &program)?;
    }
}

#[test]
fn the_counter_counts_exactly_the_loops_that_ran_fused() {
    use Op::*;
    let program = [
        // Three direct node loops, dependent (d00 -> d01 -> d02 -> d02
        // scaled by g0): one launch.
        Direct { on: 0, kind: 1, x: 0, y: 1 },
        Direct { on: 0, kind: 0, x: 1, y: 2 },
        Scale { on: 0, g: 0, x: 2 },
        // An indirect loop: not fusable, ends the chain.
        Spread { w: 0, n: 0 },
        // A sum into g1, then a loop reading g1: not one launch.
        Reduce { on: 0, max: false, x: 0, g: 1 },
        Scale { on: 0, g: 1, x: 1 },
        // Edge loops (another set): siblings and a max into g0, one launch.
        Direct { on: 1, kind: 2, x: 0, y: 1 },
        Direct { on: 1, kind: 0, x: 0, y: 2 },
        Reduce { on: 1, max: true, x: 0, g: 0 },
        // Two node loops: one launch.
        Direct { on: 0, kind: 2, x: 0, y: 1 },
        Reduce { on: 0, max: true, x: 2, g: 1 },
    ];
    for sizes in [(5, 8), (40000, 3000)] {
        for backend in [Backend::Seq, Backend::Threads] {
            let (eager, s0) = run(backend, false, true, sizes, &program, false);
            assert_eq!(s0.loops_fused, 0, "no trace, no fusion");
            let (fused, stats) = run(backend, true, true, sizes, &program, false);
            assert_eq!(fused, eager, "{backend:?} {sizes:?}");
            assert_eq!(stats.loops_fused, 3 + 3 + 2, "{backend:?} {sizes:?}: {stats:?}");
            assert_eq!(stats.loops_run, 11);
            let (apart, off) = run(backend, true, false, sizes, &program, false);
            assert_eq!(apart, eager, "{backend:?} {sizes:?}: fusion off");
            assert_eq!(off.loops_fused, 0, "{backend:?}: fusion off");
            assert_eq!(off.loops_run, 11);
        }
    }
    // The device fuses the same groups, each one launch per section.
    for sizes in [(5, 8), (3000, 700)] {
        let backend = device::device_backend();
        let (eager, _) = run(backend, false, true, sizes, &program, false);
        let (fused, stats) = run(backend, true, true, sizes, &program, false);
        assert_eq!(fused, eager, "{backend:?} {sizes:?}");
        assert_eq!(stats.loops_fused, 3 + 3 + 2, "{backend:?} {sizes:?}: {stats:?}");
        assert_eq!(stats.loops_run, 11);
    }
}

#[test]
fn a_panicking_kernel_in_a_fused_launch_is_a_deferred_error_naming_the_group() {
    #[parloop::kernel]
    fn fails_at_three(x: &f64, y: &mut f64) {
        let i = *x as i64;
        // Integer division by zero where x is 3.
        *y = (6 / (i - 3)) as f64;
    }
    let rt = Runtime::with_lazy(Backend::Seq, true).unwrap();
    let s = rt.set("s", 6).unwrap();
    let x = rt.dat("x", &s, 1, (0..6).map(|i| i as f64).collect()).unwrap();
    let y = rt.dat("y", &s, 1, vec![0.0; 6]).unwrap();
    let z = rt.dat("z", &s, 1, vec![0.0; 6]).unwrap();
    rt.par_loop(axpy::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::RW)]).unwrap();
    rt.par_loop(fails_at_three::KERNEL, &s, &[x.arg(Access::READ), z.arg(Access::WRITE)]).unwrap();
    let err = rt.flush().unwrap_err().to_string();
    assert!(err.contains("axpy+fails_at_three") && err.contains("fusion.rs"), "{err}");
    assert_eq!(rt.trace_stats().loops_fused, 0, "a failed launch is not counted");
}

#[test]
fn a_panicking_kernel_in_a_fused_device_launch_is_a_deferred_error_naming_the_group() {
    #[parloop::kernel]
    fn fails_at_two(x: &f64, y: &mut f64) {
        let i = *x as i64;
        *y = (6 / (i - 2)) as f64;
    }
    let rt = Runtime::with_lazy(device::device_backend(), true).unwrap();
    let s = rt.set("s", 6).unwrap();
    let x = rt.dat("x", &s, 1, (0..6).map(|i| i as f64).collect()).unwrap();
    let y = rt.dat("y", &s, 1, vec![0.0; 6]).unwrap();
    let z = rt.dat("z", &s, 1, vec![0.0; 6]).unwrap();
    rt.par_loop(axpy::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::RW)]).unwrap();
    rt.par_loop(fails_at_two::KERNEL, &s, &[x.arg(Access::READ), z.arg(Access::WRITE)]).unwrap();
    let err = rt.flush().unwrap_err().to_string();
    assert!(err.contains("axpy+fails_at_two") && err.contains("fusion.rs") && err.contains("divide by zero"), "{err}");
    assert_eq!(rt.trace_stats().loops_fused, 0, "a failed launch is not counted");
}

// Multi-component direct dats: a device entry moves them through shared
// memory (coalesced), and in a fused launch every loop naming one dat must
// use one copy, or a later kernel would read what was staged before an
// earlier one wrote.
#[parloop::kernel]
fn rotate(x: &[f64; 2], u: &mut [f64; 2]) {
    u[0] = 0.6 * x[0] - 0.8 * x[1];
    u[1] = 0.8 * x[0] + 0.6 * x[1] + 0.25;
}

#[parloop::kernel]
fn mix(u: &[f64; 2], v: &mut [f64; 3]) {
    v[0] = 0.5 * v[0] + u[0];
    v[1] -= u[0] * u[1];
    v[2] += u[1];
}

#[parloop::kernel]
fn bump(u: &mut [f64; 2], n: &mut f32) {
    u[0] = u[0] * 1.5 - 0.125;
    u[1] = -u[1];
    *n += u[0] as f32;
}

#[parloop::kernel]
fn norms(v: &[f64; 3], s: &mut [f64; 2], m: &mut f64) {
    s[0] += v[0] * v[0] + v[1] * v[1];
    s[1] += v[2];
    if v[2] > *m {
        *m = v[2];
    }
}

/// The group above over `n` elements, as five loops: every dat and global
/// at the end as bits, and the trace's counters.
fn staged_group(backend: Backend, lazy: bool, n: usize) -> (Bits, parloop::TraceStats) {
    let rt = Runtime::with_lazy(backend, lazy).unwrap();
    let s = rt.set("s", n).unwrap();
    let x = rt.dat("x", &s, 2, (0..2 * n).map(|i| ((i * 7) % 23) as f64 * 0.125 - 1.0).collect()).unwrap();
    let u = rt.dat("u", &s, 2, vec![0.0; 2 * n]).unwrap();
    let v = rt.dat("v", &s, 3, (0..3 * n).map(|i| ((i * 5) % 13) as f64 * 0.25).collect()).unwrap();
    let count = rt.global("count", &[0.5f32]).unwrap();
    let sums = rt.global("sums", &[1.0f64, -1.0]).unwrap();
    let top = rt.global("top", &[f64::MIN]).unwrap();
    for _ in 0..2 {
        rt.par_loop(rotate::KERNEL, &s, &[x.arg(Access::READ), u.arg(Access::WRITE)]).unwrap();
        rt.par_loop(mix::KERNEL, &s, &[u.arg(Access::READ), v.arg(Access::RW)]).unwrap();
        rt.par_loop(bump::KERNEL, &s, &[u.arg(Access::RW), count.arg(Access::INC)]).unwrap();
        rt.par_loop(mix::KERNEL, &s, &[u.arg(Access::READ), v.arg(Access::RW)]).unwrap();
        rt.par_loop(norms::KERNEL, &s, &[v.arg(Access::READ), sums.arg(Access::INC), top.arg(Access::MAX)]).unwrap();
        // A host read ends the window: the five loops, one launch.
        let _ = top.value().unwrap();
    }
    let mut out: Bits = vec![bits(&u.values().unwrap()), bits(&v.values().unwrap()), bits(&sums.values().unwrap())];
    out.push(count.values().unwrap().iter().map(|c| u64::from(c.to_bits())).collect());
    out.push(bits(&top.values().unwrap()));
    (out, rt.trace_stats())
}

#[test]
fn fused_device_launches_share_a_staged_copy_of_each_dat() {
    let backend = device::device_backend();
    for n in [1, 3, 257, 5000] {
        let (eager, _) = staged_group(backend, false, n);
        let (fused, stats) = staged_group(backend, true, n);
        assert_eq!(stats.loops_fused, 10, "n {n}: {stats:?}");
        assert_eq!(fused, eager, "{backend:?}, {n} elements: fused differs from eager");
        // And both are seq's (the sums to rounding: blocks add in another order).
        let (seq, _) = staged_group(Backend::Seq, false, n);
        assert_eq!(&fused[..2], &seq[..2], "n {n}: dats differ from seq");
        for (k, (a, b)) in fused[2..].iter().flatten().zip(seq[2..].iter().flatten()).enumerate() {
            let (a, b) = if k == 2 {
                (f64::from(f32::from_bits(*a as u32)), f64::from(f32::from_bits(*b as u32)))
            } else {
                (f64::from_bits(*a), f64::from_bits(*b))
            };
            let tol = if k == 2 { 1e-5 } else { 1e-12 };
            assert!((a - b).abs() <= tol * (1.0 + b.abs()), "n {n}: global value {k}: {a} vs seq {b}");
        }
    }
}

#[test]
fn a_fused_launch_compiles_with_nvrtc_and_refuses_what_cannot_fuse() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let s = rt.set("s", 4).unwrap();
    let t = rt.set("t", 4).unwrap();
    let x = rt.dat("x", &s, 2, vec![0.5; 8]).unwrap();
    let u = rt.dat("u", &s, 2, vec![0.0; 8]).unwrap();
    let v = rt.dat("v", &s, 3, vec![0.0; 12]).unwrap();
    let w = rt.dat("w", &t, 3, vec![0.0; 12]).unwrap();
    let count = rt.global("count", &[0.0f32]).unwrap();
    let sums = rt.global("sums", &[0.0f64; 2]).unwrap();
    let top = rt.global("top", &[0.0f64]).unwrap();
    let loops = [
        ParLoop::new(rotate::KERNEL, &s, &[x.arg(Access::READ), u.arg(Access::WRITE)]).unwrap(),
        ParLoop::new(mix::KERNEL, &s, &[u.arg(Access::READ), v.arg(Access::RW)]).unwrap(),
        ParLoop::new(bump::KERNEL, &s, &[u.arg(Access::RW), count.arg(Access::INC)]).unwrap(),
        ParLoop::new(norms::KERNEL, &s, &[v.arg(Access::READ), sums.arg(Access::INC), top.arg(Access::MAX)]).unwrap(),
    ];
    let refs: Vec<&ParLoop> = loops.iter().collect();
    let source = rt.cuda_fused_source(&refs).unwrap();
    // One entry calls the four kernels in order; u's later uses read the
    // first argument's shared copy (c1), not a copy of their own.
    let body =
        &source[source.find("PL_ENTRY(pl_entry_rotate_and_mix_and_bump_and_norms_direct)").expect("the entry")..];
    let calls: Vec<usize> = ["pl_fn_rotate(", "pl_fn_mix(", "pl_fn_bump(", "pl_fn_norms("]
        .iter()
        .map(|c| body.find(c).unwrap_or_else(|| panic!("{c} not called:\n{body}")))
        .collect();
    assert!(calls.windows(2).all(|w| w[0] < w[1]), "calls out of order: {calls:?}");
    assert!(!body.contains("c2 +") && !body.contains("c4 +"), "u staged twice:\n{body}");
    if support::nvrtc_available() {
        support::nvrtc_compile("rotate+mix+bump+norms", &source).unwrap();
    }
    let other = ParLoop::new(mix::KERNEL, &t, &[x.arg(Access::READ), w.arg(Access::RW)]);
    assert!(other.is_err(), "x is not on set t");
    let other =
        ParLoop::new(norms::KERNEL, &t, &[w.arg(Access::READ), sums.arg(Access::INC), top.arg(Access::MAX)]).unwrap();
    let err = rt.cuda_fused_source(&[&loops[0], &other]).unwrap_err().to_string();
    assert!(err.contains("rotate+norms") && err.contains("set `t`"), "{err}");
    assert!(rt.cuda_fused_source(&[]).is_err());
}

#[test]
fn replayed_windows_run_fused_launches_too() {
    for backend in [Backend::Seq, Backend::Threads] {
        let go = |lazy: bool, fusion: bool| {
            let rt = Runtime::with_lazy(backend, lazy).unwrap();
            rt.set_replay(true);
            rt.set_fusion(fusion);
            let s = rt.set("s", 3000).unwrap();
            let a = rt.dat("a", &s, 1, (0..3000).map(|i| (i % 11) as f64 * 0.25).collect()).unwrap();
            let b = rt.dat("b", &s, 1, vec![0.5; 3000]).unwrap();
            let c = rt.dat("c", &s, 1, vec![0.0; 3000]).unwrap();
            let g = rt.global("g", &[0.0f64]).unwrap();
            let mut seen = Vec::new();
            for _ in 0..5 {
                rt.par_loop(axpy::KERNEL, &s, &[a.arg(Access::READ), b.arg(Access::RW)]).unwrap();
                rt.par_loop(square::KERNEL, &s, &[b.arg(Access::READ), c.arg(Access::WRITE)]).unwrap();
                rt.par_loop(total::KERNEL, &s, &[c.arg(Access::READ), g.arg(Access::INC)]).unwrap();
                // The step's forcing point: the three loops, one launch.
                seen.push(g.value().unwrap().to_bits());
            }
            seen.push(bits(&c.values().unwrap())[17]);
            (seen, rt.trace_stats())
        };
        let (eager, _) = go(false, true);
        let (fused, stats) = go(true, true);
        assert_eq!(fused, eager, "{backend:?}");
        assert_eq!(stats.loops_fused, 15, "{backend:?}: {stats:?}");
        assert!(stats.loops_replayed >= 9, "{backend:?}: steps 2 to 5 replay at least: {stats:?}");
        let (apart, off) = go(true, false);
        assert_eq!(apart, eager, "{backend:?}");
        assert_eq!((off.loops_fused, off.loops_replayed), (0, stats.loops_replayed), "{backend:?}");
    }
}

mod one {
    #[parloop::kernel]
    pub fn bump(x: &mut f64) {
        *x += 1.0;
    }
}

mod two {
    #[parloop::kernel]
    pub fn bump(x: &mut [f64; 2]) {
        x[0] += 2.0;
        x[1] -= 1.0;
    }
}

#[test]
fn kernels_of_one_cxx_name_and_different_bodies_never_share_a_device_launch() {
    // Two kernels named `bump` in two modules have one C++ name; a fused
    // module holds a name once, so fusing them ran one body for both (the
    // runtime's own vector kernels of each dim and type are such twins).
    let go = |lazy: bool| {
        let rt = Runtime::with_lazy(device::device_backend(), lazy).unwrap();
        let s = rt.set("s", 300).unwrap();
        let p = rt.dat("p", &s, 1, (0..300).map(|i| i as f64).collect()).unwrap();
        let u = rt.dat("u", &s, 2, (0..600).map(|i| i as f64 * 0.5).collect()).unwrap();
        let q = rt.dat("q", &s, 1, vec![2.0; 300]).unwrap();
        rt.par_loop(one::bump::KERNEL, &s, &[p.arg(Access::RW)]).unwrap();
        rt.par_loop(two::bump::KERNEL, &s, &[u.arg(Access::RW)]).unwrap();
        rt.par_loop(one::bump::KERNEL, &s, &[q.arg(Access::RW)]).unwrap();
        // All three in one force (a read of p alone would run p's loop alone).
        rt.flush().unwrap();
        let out = (bits(&p.values().unwrap()), bits(&u.values().unwrap()), bits(&q.values().unwrap()));
        (out, rt.trace_stats().loops_fused)
    };
    let (eager, _) = go(false);
    let (lazy, fused) = go(true);
    assert_eq!(lazy, eager);
    // two::bump joins no group; the two one::bump loops around it are not
    // consecutive.
    assert_eq!(fused, 0, "one::bump and two::bump share a launch");
}
