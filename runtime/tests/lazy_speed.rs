//! Replay of recurring windows in the lazy trace (issue 15): a time step
//! that recurs runs with its kept schedule and plans (counted), gives
//! bitwise the results of the eager run and of the trace without replay,
//! forces exactly what the full path forces (same forcing points, same
//! loops run at each), and anything that differs falls back to the full
//! path.

#[path = "support/programs.rs"]
mod programs;

use parloop::{Access, Backend, ForcingPoint, Runtime, TraceStats};
use programs::*;
use proptest::prelude::*;

/// How a run is made.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Eager,
    Lazy,
    Replay,
}

fn runtime(backend: Backend, mode: Mode) -> Runtime {
    let rt = Runtime::with_lazy(backend, mode != Mode::Eager).unwrap();
    rt.set_replay(mode == Mode::Replay);
    rt
}

fn mesh() -> impl Strategy<Value = Mesh> {
    (1usize..40, 0usize..80).prop_flat_map(|(nodes, edges)| {
        proptest::collection::vec(0..nodes as i32, edges * 2).prop_map(move |map| Mesh { nodes, edges, map })
    })
}

fn op() -> impl Strategy<Value = Op> {
    let d = 0usize..3;
    prop_oneof![
        3 => (any::<bool>(), d.clone(), d.clone()).prop_map(|(square, x, y)| Op::Nodes { square, x, y }),
        2 => (any::<bool>(), d.clone(), d.clone()).prop_map(|(square, x, y)| Op::Edges { square, x, y }),
        2 => (d.clone(), d.clone()).prop_map(|(w, n)| Op::Spread { w, n }),
        2 => (d.clone(), d.clone(), d.clone()).prop_map(|(a, b, e)| Op::Difference { a, b, e }),
        1 => (any::<bool>(), d.clone()).prop_map(|(max, x)| Op::Reduce { max, x }),
        1 => d.clone().prop_map(|x| Op::Scale { x }),
        1 => d.clone().prop_map(Op::ReadNodes),
        1 => d.clone().prop_map(Op::ReadEdges),
        1 => Just(Op::ReadGlobals),
        1 => (d.clone(), -2.0f64..2.0, any::<bool>()).prop_map(|(x, value, closure)| Op::WriteNodes { x, value, closure }),
        1 => (0.1f64..1.5).prop_map(Op::WriteConstant),
        1 => (-1.0f64..1.0).prop_map(Op::ResetReductions),
    ]
}

/// What a run saw: every host read (as bits), the trace's statistics and
/// its forcing points.
struct Seen {
    reads: Vec<Vec<u64>>,
    stats: TraceStats,
    points: Vec<ForcingPoint>,
}

/// Runs `step` `steps` times (the last time with `last` inserted at
/// `at`), each step ending with a read of every dat.
fn run(backend: Backend, mode: Mode, m: &Mesh, step: &[Op], steps: usize, last: Option<(usize, &Op)>) -> Seen {
    let rt = runtime(backend, mode);
    let data = Program::new(&rt, m);
    let mut reads = Vec::new();
    for s in 0..steps {
        let mut ops: Vec<&Op> = step.iter().collect();
        if let (true, Some((at, op))) = (s + 1 == steps, last) {
            ops.insert(at.min(ops.len()), op);
        }
        for op in ops {
            data.apply(&rt, op, &mut reads);
        }
        data.read_all(&mut reads);
    }
    Seen { reads, stats: rt.trace_stats(), points: rt.forcing_points() }
}

fn replay_equals_full_path(
    backend: Backend,
    m: &Mesh,
    step: &[Op],
    last: Option<(usize, &Op)>,
) -> Result<(), TestCaseError> {
    // Step 1's window may differ from the later ones: a host access to
    // a dat that no loop has used yet forces nothing (the dat is not
    // linked to the trace), so step 2 may be learnt anew. Steps 3 and 4
    // then recur exactly (the last one may differ).
    let steps = 5;
    let eager = run(backend, Mode::Eager, m, step, steps, last);
    let lazy = run(backend, Mode::Lazy, m, step, steps, last);
    let replay = run(backend, Mode::Replay, m, step, steps, last);
    // Every host read saw what the eager run saw: none saw a stale value.
    prop_assert_eq!(&eager.reads, &lazy.reads);
    prop_assert_eq!(&eager.reads, &replay.reads);
    // Replay forces exactly what the full path forces, where it forces it.
    prop_assert_eq!(&lazy.points, &replay.points);
    prop_assert_eq!(lazy.stats.loops_run, replay.stats.loops_run);
    prop_assert_eq!(lazy.stats.loops_recorded, replay.stats.loops_recorded);
    prop_assert_eq!((lazy.stats.replays, lazy.stats.loops_replayed), (0, 0));
    if step.iter().any(Op::is_loop) {
        prop_assert!(replay.stats.replays >= 2, "{:?}", replay.stats);
        prop_assert!(replay.stats.loops_replayed >= 2, "{:?}", replay.stats);
        // Replayed loops are not in the DAG.
        prop_assert!(replay.stats.computations_recorded < lazy.stats.computations_recorded);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn replay_equals_eager_and_the_full_path_on_seq(
        m in mesh(),
        step in proptest::collection::vec(op(), 1..16),
        extra in op(),
        at in 0usize..16,
        differ in any::<bool>(),
    ) {
        replay_equals_full_path(Backend::Seq, &m, &step, differ.then_some((at, &extra)))?;
    }

    #[test]
    fn replay_equals_eager_and_the_full_path_on_threads(
        m in mesh(),
        step in proptest::collection::vec(op(), 1..16),
        extra in op(),
        at in 0usize..16,
        differ in any::<bool>(),
    ) {
        replay_equals_full_path(Backend::Threads, &m, &step, differ.then_some((at, &extra)))?;
    }
}

/// An airfoil-like step: host writes of the global a loop reduces into
/// (recorded, not forced), a partial force in the middle (a read of a dat
/// that one pending loop writes), a read of the global at the end.
fn airfoil_like(mode: Mode, steps: usize, change_at: Option<usize>) -> (Vec<u64>, TraceStats) {
    let rt = runtime(Backend::Seq, mode);
    let s = rt.set("cells", 5).unwrap();
    let q = rt.dat("q", &s, 1, vec![1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let qold = rt.dat("qold", &s, 1, vec![0.0; 5]).unwrap();
    let res = rt.dat("res", &s, 1, vec![0.0; 5]).unwrap();
    let rms = rt.global("rms", &[0.0f64]).unwrap();
    let (r, w, rw, inc) = (Access::READ, Access::WRITE, Access::RW, Access::INC);
    let mut seen = Vec::new();
    for step in 0..steps {
        rt.par_loop(square::KERNEL, &s, &[q.arg(r), qold.arg(w)]).unwrap();
        for sweep in 0..2 {
            rt.par_loop(axpy::KERNEL, &s, &[q.arg(r), res.arg(rw)]).unwrap();
            rms.set_values(&[0.0]).unwrap();
            if change_at == Some(step) {
                // A loop the kept window does not have.
                rt.par_loop(scale::KERNEL, &s, &[rms.arg(r), res.arg(rw)]).unwrap();
            }
            rt.par_loop(difference::KERNEL, &s, &[qold.arg(r), res.arg(r), q.arg(w)]).unwrap();
            rt.par_loop(total::KERNEL, &s, &[q.arg(r), rms.arg(inc)]).unwrap();
            if sweep == 0 {
                // Forces `axpy` alone (nothing pending before it writes
                // `res`), not the loops and host write around it.
                seen.extend(bits(&res.values().unwrap()));
            }
        }
        seen.push(rms.value().unwrap().to_bits());
    }
    seen.extend(bits(&q.values().unwrap()));
    (seen, rt.trace_stats())
}

#[test]
fn a_recurring_step_is_replayed_with_partial_forces_and_counted() {
    let steps = 6;
    let (eager, _) = airfoil_like(Mode::Eager, steps, None);
    let (lazy, full) = airfoil_like(Mode::Lazy, steps, None);
    let (replayed, stats) = airfoil_like(Mode::Replay, steps, None);
    assert_eq!(eager, lazy);
    assert_eq!(eager, replayed);
    // 7 loops and 2 host writes per step. The first step's first
    // `set_values` is not recorded (rms is not yet in any recorded loop:
    // it is written at once), so the second step differs from the first
    // (one fallback) and is learnt; the other four replay it: its forces
    // are the read of `res` (a partial force) and the final read.
    assert_eq!(stats.loops_recorded, 7 * steps as u64);
    assert_eq!(stats.host_writes_recorded, 2 * steps as u64 - 1);
    assert_eq!(stats.loops_replayed, 7 * (steps as u64 - 2));
    assert_eq!(stats.replays, 2 * (steps as u64 - 2));
    assert_eq!(stats.replay_fallbacks, 1);
    assert_eq!(stats.loops_run, full.loops_run);
    assert_eq!(stats.forces, full.forces);
    assert_eq!(stats.forces_empty, full.forces_empty);
    // Two forces per step, neither at a `set_values`.
    assert_eq!(full.forces, 2 * steps as u64);
    // Only the first two steps' loops went into the DAG (one computation
    // per loop and per host write on one rank).
    assert_eq!(stats.computations_recorded, 8 + 9);
    assert_eq!(full.computations_recorded, 9 * steps as u64 - 1);
}

/// Every loop of a recurring step reuses its record of an earlier step,
/// also when the step's forces run unequal parts of it (here one loop,
/// then six loops and two host writes). The records were once taken in
/// the last force's order only, so a loop of the second force met the
/// first force's records and built a new one.
#[test]
fn a_recurring_step_reuses_its_loop_records_across_unequal_windows() {
    for mode in [Mode::Lazy, Mode::Replay] {
        let (_, six) = airfoil_like(mode, 6, None);
        let (_, twelve) = airfoil_like(mode, 12, None);
        // Seven loops and two host writes per step.
        assert_eq!(twelve.records_reused - six.records_reused, 9 * 6, "{mode:?}");
    }
}

/// Replayed loops look no plan up, so they add no planning time to the
/// profile: the kept plans once carried the learning loop's lookup time,
/// added again on every replay (the airfoil on a 4x4 grid reported 0.7 s
/// of planning in a 0.02 s run, and its "ms per iteration" became 0).
#[test]
fn replays_add_no_planning_time_to_the_profile() {
    let rt = runtime(Backend::Seq, Mode::Replay);
    let s = rt.set("cells", 5).unwrap();
    let q = rt.dat("q", &s, 1, vec![1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let res = rt.dat("res", &s, 1, vec![0.0; 5]).unwrap();
    let one = rt.global("one", &[1.0]).unwrap();
    let step = || {
        rt.par_loop(axpy::KERNEL, &s, &[q.arg(Access::READ), res.arg(Access::RW)]).unwrap();
        rt.par_loop(scale::KERNEL, &s, &[one.arg(Access::READ), res.arg(Access::RW)]).unwrap();
        res.values().unwrap();
    };
    let planning = || rt.report().iter().map(|r| r.plan_seconds).fold(0.0, |a, b| a + b);
    for _ in 0..3 {
        step();
    }
    let (replayed, before) = (rt.trace_stats().loops_replayed, planning());
    for _ in 0..50 {
        step();
    }
    assert!(rt.trace_stats().loops_replayed >= replayed + 100, "{:?}", rt.trace_stats());
    assert!(before > 0.0);
    assert_eq!(planning(), before, "replays added planning time");
}

#[test]
fn a_step_that_differs_falls_back_to_the_full_path() {
    let steps = 5;
    let (eager, _) = airfoil_like(Mode::Eager, steps, Some(3));
    let (replayed, stats) = airfoil_like(Mode::Replay, steps, Some(3));
    assert_eq!(eager, replayed);
    // Step 3's extra loop differs from the kept window: its taped loops
    // went into the DAG, and step 4 replays again (step 1 is learnt, as
    // above).
    assert_eq!(stats.replay_fallbacks, 2, "steps 1 and 3: {stats:?}");
    assert_eq!(stats.loops_recorded, 7 * steps as u64 + 2);
    assert_eq!(stats.loops_replayed, 7 * 2, "steps 2 and 4 replayed: {stats:?}");
}

#[test]
fn replay_off_records_every_loop_in_the_dag() {
    let (_, stats) = airfoil_like(Mode::Lazy, 3, None);
    assert_eq!((stats.replays, stats.loops_replayed, stats.replay_fallbacks), (0, 0, 0));
    // Seven loops and two host writes per step, less the first step's
    // first write (made at once).
    assert_eq!(stats.computations_recorded, 9 * 3 - 1);
}

#[test]
fn dropping_a_taped_dat_runs_its_loops_first() {
    for mode in [Mode::Eager, Mode::Lazy, Mode::Replay] {
        let rt = runtime(Backend::Seq, mode);
        let s = rt.set("s", 3).unwrap();
        let x = rt.dat("x", &s, 1, vec![0.0; 3]).unwrap();
        let t = rt.dat("t", &s, 1, vec![5.0, 6.0, 7.0]).unwrap();
        for _ in 0..3 {
            rt.par_loop(square::KERNEL, &s, &[t.arg(Access::READ), x.arg(Access::WRITE)]).unwrap();
            x.values().unwrap();
        }
        // The window is kept: this loop goes on the tape, then its input
        // is dropped (the last handle) before anything reads x.
        rt.par_loop(square::KERNEL, &s, &[t.arg(Access::READ), x.arg(Access::WRITE)]).unwrap();
        drop(t);
        assert_eq!(x.values().unwrap(), vec![24.0, 35.0, 48.0], "{mode:?}");
        let st = rt.trace_stats();
        if mode != Mode::Eager {
            assert_eq!(st.drop_forces, 1, "{mode:?} {st:?}");
            assert_eq!(st.loops_run, 4, "{mode:?} {st:?}");
        }
        if mode == Mode::Replay {
            // Steps 2 and 3 replayed; the taped loops of the last window
            // went into the DAG when t was dropped.
            assert_eq!(st.loops_replayed, 2, "{st:?}");
            assert_eq!(st.replay_fallbacks, 1, "{st:?}");
        }
    }
}

/// Found by the property test: after a partial force took loops off the
/// tape, later taped loops took the kept plan of another loop (indexed by
/// the tape's length, not the loop's number in the window); on `threads`
/// an indirect INC loop then ran with another loop's colouring.
#[test]
fn a_partial_force_does_not_shift_the_kept_plans() {
    let map = vec![
        0, 0, 0, 1, 0, 0, 0, 0, 1, 2, 0, 0, 0, 2, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 6, 3,
        1, 1, 6, 2, 3, 2, 3, 6, 6, 5, 0, 8, 6, 8, 7, 4, 7, 8, 4, 3, 5, 8, 2, 6, 2, 1, 4, 0, 2, 3, 1, 0, 1, 8, 7, 0, 6,
        7, 7, 8, 8, 3, 3, 4, 3, 8, 6, 2, 8, 3, 6, 8, 3, 3, 4, 7, 0, 8, 1, 6, 7, 1, 2, 4, 5, 2, 2, 8, 1, 4, 8, 8, 6, 8,
        1, 8, 2, 5, 0, 0, 2, 2,
    ];
    let m = Mesh { nodes: 9, edges: 78, map };
    let step = vec![
        Op::ReadGlobals,
        Op::Reduce { max: true, x: 0 },
        Op::Difference { a: 2, b: 2, e: 1 },
        Op::Edges { square: true, x: 2, y: 1 },
        Op::Spread { w: 2, n: 2 },
        Op::Spread { w: 1, n: 2 },
        Op::Spread { w: 2, n: 1 },
        Op::WriteConstant(0.8662665902090397),
        Op::ReadGlobals,
        Op::Reduce { max: false, x: 0 },
        Op::WriteConstant(0.3388703642836782),
        Op::Difference { a: 1, b: 2, e: 1 },
        Op::Difference { a: 0, b: 2, e: 1 },
        Op::Nodes { square: false, x: 1, y: 2 },
    ];
    let eager = run(Backend::Threads, Mode::Eager, &m, &step, 4, None);
    let replay = run(Backend::Threads, Mode::Replay, &m, &step, 4, None);
    assert!(replay.stats.loops_replayed >= 10, "{:?}", replay.stats);
    assert_eq!(eager.reads, replay.reads);
}

#[parloop::kernel]
fn half_y_plus_x(x: &f64, y: &mut f64) {
    *y = 0.5 * *y + *x;
}

/// The trace keeps the records of a window's loops and reuses them for
/// the next window's identical loops (same kernel, set and data ids):
/// steps alternate between one pair of dats and a new pair each time
/// (the old one dropped), and each step must compute on its own data.
#[test]
fn recurring_steps_on_kept_and_on_new_data_each_compute_on_their_own() {
    for mode in [Mode::Eager, Mode::Lazy, Mode::Replay] {
        let rt = runtime(Backend::Seq, mode);
        let s = rt.set("s", 3).unwrap();
        let kept = (rt.dat("kx", &s, 1, vec![1.0, 2.0, 3.0]).unwrap(), rt.dat("ky", &s, 1, vec![0.0; 3]).unwrap());
        // An independent reference: the same arithmetic on plain vectors.
        let mut kept_ref = vec![0.0f64; 3];
        for (step, new) in [false, false, true, false, true, true, false, false].into_iter().enumerate() {
            let fresh;
            let (x, y, mut reference) = if new {
                let v = step as f64 + 0.25;
                fresh = (
                    rt.dat(&format!("x{step}"), &s, 1, vec![v, -v, 2.0 * v]).unwrap(),
                    rt.dat(&format!("y{step}"), &s, 1, vec![1.0; 3]).unwrap(),
                );
                (&fresh.0, &fresh.1, (vec![v, -v, 2.0 * v], vec![1.0f64; 3]))
            } else {
                (&kept.0, &kept.1, (vec![1.0, 2.0, 3.0], kept_ref.clone()))
            };
            for _ in 0..3 {
                rt.par_loop(half_y_plus_x::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::RW)]).unwrap();
                for (y, x) in reference.1.iter_mut().zip(&reference.0) {
                    *y = 0.5 * *y + *x;
                }
            }
            let got: Vec<u64> = y.values().unwrap().iter().map(|v: &f64| v.to_bits()).collect();
            let want: Vec<u64> = reference.1.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "{mode:?} step {step}");
            if !new {
                kept_ref = reference.1;
            }
        }
        let st = rt.trace_stats();
        if mode == Mode::Replay {
            // The kept pair's later windows replayed (a record reused on
            // the tape), the new pairs' windows did not.
            assert!(st.loops_replayed >= 6, "{st:?}");
        }
        if mode != Mode::Eager {
            assert_eq!(st.loops_run, 24, "{mode:?} {st:?}");
        }
    }
}

/// More distinct loops per window than the trace's pool of loop records
/// holds (64): records are evicted, and recycled for loops they do not
/// hold, and every run still computes what eager runs compute; the
/// loops that find their record reuse it.
#[test]
fn more_loops_per_window_than_the_record_pool_holds_compute_as_eager() {
    fn run(mode: Mode) -> (Vec<u64>, TraceStats) {
        let rt = runtime(Backend::Seq, mode);
        let s = rt.set("s", 3).unwrap();
        let x = rt.dat("x", &s, 1, vec![1.0, 2.0, 3.0]).unwrap();
        let ys: Vec<_> = (0..100).map(|i| rt.dat(&format!("y{i}"), &s, 1, vec![i as f64; 3]).unwrap()).collect();
        let mut seen = Vec::new();
        for step in 0..5 {
            // Windows of 100 loops, and on odd steps one of 70 and one of 30.
            for (i, y) in ys.iter().enumerate() {
                rt.par_loop(half_y_plus_x::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::RW)]).unwrap();
                if step % 2 == 1 && i == 69 {
                    rt.flush().unwrap();
                }
            }
            rt.flush().unwrap();
            seen.extend(bits(&ys[99].values().unwrap()));
        }
        for y in &ys {
            seen.extend(bits(&y.values().unwrap()));
        }
        (seen, rt.trace_stats())
    }
    let (eager, _) = run(Mode::Eager);
    for mode in [Mode::Lazy, Mode::Replay] {
        let (seen, stats) = run(mode);
        assert_eq!(seen, eager, "{mode:?}");
        assert!(stats.records_reused >= 200, "{mode:?}: {stats:?}");
    }
}
