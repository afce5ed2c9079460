//! The lazy trace (issue 15): recorded loops give bitwise the results of
//! eager ones, no host read sees a stale value, forcing runs what a read
//! depends on and no more, errors surface at the forcing point naming the
//! loop and where it was recorded, dropped data runs its pending loops,
//! and the DAG is seed 000's.

#[path = "support/device.rs"]
mod device;
#[path = "support/programs.rs"]
mod programs;

use parloop::{Access, Backend, Dat, Error, Map, ParLoop, Runtime, Sections, Set};
use programs::*;
use proptest::prelude::*;

#[parloop::kernel]
fn fails_at_three(i: &i64, x: &mut f64) {
    // Integer division by zero at element 3.
    *x = (6 / (*i - 3)) as f64;
}

#[parloop::kernel]
fn scale_by_two(y: &mut f64) {
    *y *= 2.0;
}

#[parloop::kernel]
fn div_by_three_minus(x: &f64, z: &mut f64) {
    let i = *x as i64;
    *z = (6 / (3 - i)) as f64;
}

fn mesh() -> impl Strategy<Value = Mesh> {
    (1usize..60, 0usize..120).prop_flat_map(|(nodes, edges)| {
        proptest::collection::vec(0..nodes as i32, edges * 2).prop_map(move |map| Mesh { nodes, edges, map })
    })
}

fn op() -> impl Strategy<Value = Op> {
    let d = 0usize..3;
    prop_oneof![
        (any::<bool>(), d.clone(), d.clone()).prop_map(|(square, x, y)| Op::Nodes { square, x, y }),
        (any::<bool>(), d.clone(), d.clone()).prop_map(|(square, x, y)| Op::Edges { square, x, y }),
        (d.clone(), d.clone()).prop_map(|(w, n)| Op::Spread { w, n }),
        (d.clone(), d.clone(), d.clone()).prop_map(|(a, b, e)| Op::Difference { a, b, e }),
        (any::<bool>(), d.clone()).prop_map(|(max, x)| Op::Reduce { max, x }),
        d.clone().prop_map(|x| Op::Scale { x }),
        d.clone().prop_map(Op::ReadNodes),
        d.clone().prop_map(Op::ReadEdges),
        Just(Op::ReadGlobals),
        (d.clone(), -2.0f64..2.0, any::<bool>()).prop_map(|(x, value, closure)| Op::WriteNodes { x, value, closure }),
        (0.1f64..1.5).prop_map(Op::WriteConstant),
        (-1.0f64..1.0).prop_map(Op::ResetReductions),
    ]
}

/// Everything the host saw, in order, as bits, then the final values.
type Seen = Vec<Vec<u64>>;

/// Runs `program` on a fresh runtime; returns what every host read saw and
/// the final values, and the runtime's trace statistics.
fn run(backend: Backend, lazy: bool, m: &Mesh, program: &[Op]) -> (Seen, parloop::TraceStats) {
    let mut rt = Runtime::with_lazy(backend, lazy).unwrap();
    if rt.device_name().is_some() {
        // The automatic choice times candidates: a deterministic strategy,
        // so that two runs can be compared bitwise.
        rt.set_strategy(Some(parloop::Strategy::Staged));
    }
    let data = Program::new(&rt, m);
    let mut seen = Seen::new();
    for op in program {
        data.apply(&rt, op, &mut seen);
    }
    let stats = rt.trace_stats();
    data.read_all(&mut seen);
    (seen, stats)
}

fn lazy_equals_eager(backend: Backend, m: &Mesh, program: &[Op]) -> Result<(), TestCaseError> {
    let (eager, none) = run(backend, false, m, program);
    let (lazy, stats) = run(backend, true, m, program);
    prop_assert_eq!(none, parloop::TraceStats::default());
    let loops = program.iter().filter(|o| o.is_loop()).count() as u64;
    prop_assert_eq!(stats.loops_recorded + stats.eager_fallbacks, loops);
    // Every host read saw what the eager run saw at the same point: none
    // saw a stale value.
    prop_assert_eq!(eager, lazy);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn lazy_equals_eager_bitwise_on_seq(m in mesh(), program in proptest::collection::vec(op(), 1..40)) {
        lazy_equals_eager(Backend::Seq, &m, &program)?;
    }

    #[test]
    fn lazy_equals_eager_bitwise_on_threads(m in mesh(), program in proptest::collection::vec(op(), 1..40)) {
        lazy_equals_eager(Backend::Threads, &m, &program)?;
    }
}

proptest! {
    // Each distinct kernel compiles once per process on the emulator.
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn lazy_equals_eager_bitwise_on_the_device(m in mesh(), program in proptest::collection::vec(op(), 1..24)) {
        lazy_equals_eager(device::device_backend(), &m, &program)?;
    }
}

fn lazy_rt() -> Runtime {
    Runtime::with_lazy(Backend::Seq, true).unwrap()
}

#[test]
fn a_read_forces_what_it_depends_on_and_nothing_else() {
    let rt = lazy_rt();
    let s = rt.set("s", 4).unwrap();
    let x = rt.dat("x", &s, 1, vec![1.0; 4]).unwrap();
    let y = rt.dat("y", &s, 1, vec![0.0; 4]).unwrap();
    let z = rt.dat("z", &s, 1, vec![0.0; 4]).unwrap();
    rt.par_loop(axpy::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::RW)]).unwrap();
    rt.par_loop(square::KERNEL, &s, &[y.arg(Access::READ), z.arg(Access::WRITE)]).unwrap();
    rt.par_loop(square::KERNEL, &s, &[x.arg(Access::READ), x.arg(Access::WRITE)]).unwrap_err();
    let other = rt.dat("other", &s, 1, vec![2.0; 4]).unwrap();
    rt.par_loop(axpy::KERNEL, &s, &[x.arg(Access::READ), other.arg(Access::RW)]).unwrap();
    let st = rt.trace_stats();
    assert_eq!((st.loops_recorded, st.computations_recorded, st.loops_run), (3, 3, 0));
    // y = 0.5 * 0 + 1 + 1 = 2; z needs y's loop too.
    assert_eq!(z.values().unwrap(), vec![3.0; 4]);
    assert_eq!(rt.trace_stats().loops_run, 2);
    assert_eq!(rt.trace_stats().edges_recorded, 1);
    assert_eq!(other.values().unwrap(), vec![3.0; 4]);
    assert_eq!(rt.trace_stats().loops_run, 3);
}

#[test]
fn a_host_write_runs_the_pending_readers_first() {
    let rt = lazy_rt();
    let s = rt.set("s", 3).unwrap();
    let x = rt.dat("x", &s, 1, vec![1.0, 2.0, 3.0]).unwrap();
    let y = rt.dat("y", &s, 1, vec![0.0; 3]).unwrap();
    rt.par_loop(square::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::WRITE)]).unwrap();
    x.set_values(&[10.0; 3]).unwrap();
    assert_eq!(rt.trace_stats().loops_run, 1, "the reader of x ran before x changed");
    assert_eq!(y.values().unwrap(), vec![0.0, 3.0, 8.0]);
    // A READ global: the loop sees the value it was recorded with.
    let c = rt.global("c", &[2.0f64]).unwrap();
    rt.par_loop(scale::KERNEL, &s, &[c.arg(Access::READ), y.arg(Access::RW)]).unwrap();
    c.set_values(&[100.0]).unwrap();
    assert_eq!(y.values().unwrap(), vec![0.125, 6.125, 16.125]);
}

/// A host write to a global is recorded like a loop instead of forcing
/// the loops that use the global (the airfoil zeroes `rms` before each
/// sweep's `update` and used to force at each zeroing): loops recorded
/// before it see the old values, loops after it the new ones, a write
/// after a reduction replaces the reduced value, and a read sees it.
#[test]
fn a_host_write_to_a_global_is_recorded_between_the_loops_around_it() {
    let (r, rw, inc) = (Access::READ, Access::RW, Access::INC);
    let mut results = Vec::new();
    for lazy in [false, true] {
        let rt = Runtime::with_lazy(Backend::Seq, lazy).unwrap();
        let s = rt.set("s", 3).unwrap();
        let x = rt.dat("x", &s, 1, vec![1.0, 2.0, 3.0]).unwrap();
        let c = rt.global("c", &[2.0f64]).unwrap();
        let sum = rt.global("sum", &[0.0f64]).unwrap();
        rt.par_loop(scale::KERNEL, &s, &[c.arg(r), x.arg(rw)]).unwrap();
        c.set_values(&[3.0]).unwrap();
        rt.par_loop(scale::KERNEL, &s, &[c.arg(r), x.arg(rw)]).unwrap();
        rt.par_loop(total::KERNEL, &s, &[x.arg(r), sum.arg(inc)]).unwrap();
        sum.set_values(&[100.0]).unwrap();
        rt.par_loop(total::KERNEL, &s, &[x.arg(r), sum.arg(inc)]).unwrap();
        // A wrong length is still an error at the call, recorded or not.
        let err = sum.set_values(&[1.0, 2.0]).unwrap_err();
        assert!(matches!(err, Error::WrongLength { expected: 1, got: 2, .. }), "{err}");
        let st = rt.trace_stats();
        if lazy {
            assert_eq!((st.loops_recorded, st.host_writes_recorded), (4, 2));
            assert_eq!((st.forces, st.loops_run), (0, 0), "a host write forced: {st:?}");
            assert_eq!(rt.forcing_points(), vec![]);
        }
        // x = (x * 2 + 1/8) * 3 + 1/8; sum = 100 + x1 + x2 + x3.
        assert_eq!(sum.value().unwrap(), 137.5);
        assert_eq!(x.values().unwrap(), vec![6.5, 12.5, 18.5]);
        assert_eq!(c.value().unwrap(), 3.0);
        results.push(rt.trace_stats().loops_run);
    }
    assert_eq!(results, vec![0, 4], "the lazy run ran its loops at the reads");
}

/// The last handle of a global with a pending host write goes: the write
/// and the loops around it run first, in order.
#[test]
fn a_global_dropped_with_a_pending_host_write_runs_it_in_order() {
    let rt = lazy_rt();
    let s = rt.set("s", 3).unwrap();
    let x = rt.dat("x", &s, 1, vec![1.0, 2.0, 3.0]).unwrap();
    {
        let c = rt.global("c", &[2.0f64]).unwrap();
        rt.par_loop(scale::KERNEL, &s, &[c.arg(Access::READ), x.arg(Access::RW)]).unwrap();
        c.set_values(&[3.0]).unwrap();
        rt.par_loop(scale::KERNEL, &s, &[c.arg(Access::READ), x.arg(Access::RW)]).unwrap();
        assert_eq!(rt.trace_stats().loops_run, 0);
    }
    let st = rt.trace_stats();
    assert_eq!((st.drop_forces, st.loops_run, st.host_writes_recorded), (1, 2, 1));
    assert_eq!(x.values().unwrap(), vec![6.5, 12.5, 18.5]);
}

/// A loop the user keeps (built once, executed every step) runs as the
/// user's loop itself when forced; a change to it after recording (new
/// tags) makes a new loop and never reaches the recorded one, and a loop
/// dropped before the force runs from the trace's own record.
#[test]
fn kept_loops_run_as_recorded_even_when_changed_or_dropped_afterwards() {
    let run = |lazy: bool| {
        let rt = Runtime::with_lazy(Backend::Seq, lazy).unwrap();
        let s = rt.set("s", 3).unwrap();
        let x = rt.dat("x", &s, 1, vec![1.0, 2.0, 3.0]).unwrap();
        let y = rt.dat("y", &s, 1, vec![0.0; 3]).unwrap();
        let c = rt.global("c", &[2.0f64]).unwrap();
        let step = ParLoop::new(axpy::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::RW)]).unwrap();
        let scaled = ParLoop::new(scale::KERNEL, &s, &[c.arg(Access::READ), y.arg(Access::RW)]).unwrap();
        let mut seen = Vec::new();
        for k in 0..4 {
            rt.execute(&step).unwrap();
            rt.execute(&scaled).unwrap();
            c.set_values(&[1.5 + k as f64]).unwrap();
            seen.push(bits(&y.values().unwrap()));
        }
        // Recorded untagged, then tagged: the recorded loop stays untagged.
        rt.execute(&step).unwrap();
        let step = step.with_tags(&["later"]).unwrap();
        // Recorded, then dropped: it still runs, from the record.
        let once = ParLoop::new(scale::KERNEL, &s, &[c.arg(Access::READ), y.arg(Access::RW)]).unwrap();
        rt.execute(&once).unwrap();
        drop(once);
        seen.push(bits(&y.values().unwrap()));
        rt.execute(&step).unwrap();
        seen.push(bits(&y.values().unwrap()));
        let rows: Vec<(String, u64)> = rt.report().iter().map(|r| (r.label(), r.calls)).collect();
        (seen, rows)
    };
    let (eager, eager_rows) = run(false);
    let (lazy, lazy_rows) = run(true);
    assert_eq!(eager, lazy);
    assert_eq!(eager_rows, lazy_rows);
    assert!(lazy_rows.contains(&("axpy".to_string(), 5)), "{lazy_rows:?}");
    assert!(lazy_rows.contains(&("axpy [later]".to_string(), 1)), "{lazy_rows:?}");
}

#[test]
fn the_last_handle_dropped_runs_the_loops_pending_on_it() {
    // Decision (seed 003): the trace keeps only weak references to data;
    // dropping the last handle of a dat with pending loops runs them (their
    // other effects, here a reduction, must not be lost).
    let rt = lazy_rt();
    let s = rt.set("s", 5).unwrap();
    let sum = rt.global("sum", &[0.0f64]).unwrap();
    {
        let t = rt.dat("t", &s, 1, vec![2.0; 5]).unwrap();
        rt.par_loop(total::KERNEL, &s, &[t.arg(Access::READ), sum.arg(Access::INC)]).unwrap();
        assert_eq!(rt.trace_stats().loops_run, 0);
    }
    let st = rt.trace_stats();
    assert_eq!((st.drop_forces, st.loops_run), (1, 1));
    assert_eq!(sum.value().unwrap(), 10.0);
    // A dat whose handle is dropped with nothing pending forces nothing.
    drop(rt.dat("u", &s, 1, vec![0.0; 5]).unwrap());
    assert_eq!(rt.trace_stats().drop_forces, 1);
    // A kept Arg is a handle too: the data lives until it goes.
    let arg = {
        let t = rt.dat("t2", &s, 1, vec![1.0; 5]).unwrap();
        rt.par_loop(total::KERNEL, &s, &[t.arg(Access::READ), sum.arg(Access::INC)]).unwrap();
        t.arg(Access::READ)
    };
    assert_eq!(rt.trace_stats().drop_forces, 1);
    drop(arg);
    assert_eq!(rt.trace_stats().drop_forces, 2);
    assert_eq!(sum.value().unwrap(), 15.0);
}

#[test]
fn an_error_surfaces_at_the_forcing_point_naming_the_loop_and_nothing_after_it_runs() {
    let rt = lazy_rt();
    let s = rt.set("s", 6).unwrap();
    let x = rt.dat("x", &s, 1, vec![0.0; 6]).unwrap();
    let y = rt.dat("y", &s, 1, vec![5.0; 6]).unwrap();
    let line = line!() + 1;
    rt.par_loop(fails_at_three::KERNEL, &s, &[parloop::Arg::index(), x.arg(Access::WRITE)]).unwrap();
    rt.par_loop(axpy::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::RW)]).unwrap();
    // Validation errors are still returned by par_loop itself.
    assert!(rt.par_loop(axpy::KERNEL, &s, &[x.arg(Access::READ)]).is_err());
    assert_eq!(rt.trace_stats().loops_recorded, 2);
    let err = y.values().unwrap_err();
    let Error::Deferred { kernel, location, source } = &err else { panic!("{err}") };
    assert_eq!(kernel, "fails_at_three");
    assert!(location.ends_with(&format!("lazy.rs:{line}:8")), "{location}");
    assert!(matches!(**source, Error::KernelPanicked { element: 3, .. }), "{source}");
    // The loop named once, with where it was recorded ("loop `k` recorded
    // at L: loop `k`: the kernel panicked" named it twice).
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("loop `fails_at_three` (recorded at {location}): the kernel panicked")),
        "{text}"
    );
    assert_eq!(text.matches("fails_at_three").count(), 1, "{text}");
    assert_eq!(rt.trace_stats().discarded, 1);
    // The loop after it never ran: y is not what the program computed, and
    // reading it says so (it returned y as declared, as `Ok`).
    let err = y.values().unwrap_err();
    let Error::Discarded { name, kernel, .. } = &err else { panic!("{err}") };
    assert_eq!((name.as_str(), kernel.as_str()), ("y", "fails_at_three"));
    // The failed loop's own output is part-written. An eager `par_loop`
    // returns the error itself; here it surfaced at a read of y, so a read
    // of x is refused too (it gave the half-written values as `Ok`) until
    // x is written whole.
    let err = x.values().unwrap_err();
    assert!(matches!(&err, Error::Discarded { name, .. } if name == "x"), "{err}");
    x.set_values(&[1.0; 6]).unwrap();
    assert_eq!(x.values().unwrap(), vec![1.0; 6]);
}

#[parloop::kernel]
fn copy_into(x: &f64, y: &mut f64) {
    *y = *x;
}

/// Data a failed loop left poisoned is refused by loops that run outside
/// its trace too: an eager loop inside a host access, another runtime's
/// loops and vector operations (each returned the half-written values as
/// `Ok`); a loop writing it whole cures it there as well.
#[test]
fn poisoned_data_is_refused_by_loops_outside_its_trace() {
    let rt = lazy_rt();
    let eager = Runtime::with_lazy(Backend::Seq, false).unwrap();
    let s = rt.set("s", 6).unwrap();
    let x = rt.dat("x", &s, 1, vec![-7.0; 6]).unwrap();
    let o = rt.dat("o", &s, 1, vec![0.0; 6]).unwrap();
    let other = rt.dat("other", &s, 1, vec![0.0; 6]).unwrap();
    rt.par_loop(fails_at_three::KERNEL, &s, &[parloop::Arg::index(), x.arg(Access::WRITE)]).unwrap();
    assert!(matches!(rt.flush(), Err(Error::Deferred { .. })));
    let poisoned = |e: &Error| matches!(e, Error::Discarded { name, .. } if name == "x");
    // An eager loop of the same runtime, inside a host access of another dat.
    let inside =
        other.with_values(|_| rt.par_loop(copy_into::KERNEL, &s, &[x.arg(Access::READ), o.arg(Access::WRITE)]));
    let e = inside.unwrap().unwrap_err();
    assert!(poisoned(&e), "{e}");
    // Another runtime's loop and vector operations.
    let e = eager.par_loop(copy_into::KERNEL, &s, &[x.arg(Access::READ), o.arg(Access::WRITE)]).unwrap_err();
    assert!(poisoned(&e), "{e}");
    assert!(e.to_string().contains("copy_into"), "{e}");
    assert!(poisoned(&eager.axpy(1.0, &x, &o).unwrap_err()));
    assert!(poisoned(&eager.dot(&x, &x).unwrap_err()));
    assert_eq!(o.values().unwrap(), vec![0.0; 6], "nothing ran");
    // A loop that would write it whole but fails (a loop inside a host
    // access of data it reads) cures nothing.
    let failed =
        other.with_values(|_| eager.par_loop(copy_into::KERNEL, &s, &[other.arg(Access::READ), x.arg(Access::WRITE)]));
    assert!(matches!(failed.unwrap(), Err(Error::Busy { .. })));
    assert!(poisoned(&x.values().unwrap_err()));
    // Written whole by the other runtime: cured everywhere.
    eager.fill(&x, 2.0).unwrap();
    eager.par_loop(copy_into::KERNEL, &s, &[x.arg(Access::READ), o.arg(Access::WRITE)]).unwrap();
    assert_eq!(o.values().unwrap(), vec![2.0; 6]);
    assert_eq!(x.values().unwrap(), vec![2.0; 6]);
}

#[parloop::kernel]
fn must_be_positive(x: &mut f64) {
    assert!(*x > 0.0);
    *x += 1.0;
}

#[parloop::kernel]
fn add_two(a: &mut f64) {
    *a += 2.0;
}

/// A solver (whose Jacobi setup and products read their operands through
/// the library's own closures) runs what its operands depend on only: it
/// returned an unrelated pending loop's failure on the host backends,
/// where those closures ran the whole trace, and `Ok` on the device.
#[test]
fn a_solver_is_not_handed_the_failure_of_an_unrelated_pending_loop() {
    use parloop::solve::{cg, CgOptions};
    for backend in [Backend::Seq, Backend::Threads, device::device_backend()] {
        let rt = Runtime::with_lazy(backend, true).unwrap();
        let other = rt.set("other", 10).unwrap();
        let bad = rt.dat("bad", &other, 1, vec![-1.0; 10]).unwrap();
        rt.par_loop(must_be_positive::KERNEL, &other, &[bad.arg(Access::RW)]).unwrap();
        let nodes = rt.set("nodes", 5).unwrap();
        let id = rt.map("id", &nodes, &nodes, 1, (0..5).collect()).unwrap();
        let s = rt.sparsity("s", &[(&id, &id)], (1, 1)).unwrap();
        let a = rt.mat::<f64>("A", &s).unwrap();
        rt.par_loop(add_two::KERNEL, &nodes, &[a.arg(&id, &id, Access::INC)]).unwrap();
        let b = rt.dat("b", &nodes, 1, vec![1.0; 5]).unwrap();
        let x = rt.dat("x", &nodes, 1, vec![0.0; 5]).unwrap();
        let report = cg(&rt, &a, &b, &x, &CgOptions::default());
        assert!(report.is_ok_and(|r| r.converged), "{backend:?}");
        assert_eq!(x.values().unwrap(), vec![0.5; 5], "{backend:?}");
        // The failure is still there, for the data it concerns.
        let err = bad.values().unwrap_err();
        assert!(matches!(&err, Error::Deferred { kernel, .. } if kernel == "must_be_positive"), "{backend:?}: {err}");
    }
}

#[test]
fn data_a_discarded_loop_would_have_written_stay_refused_until_written_whole() {
    let rt = lazy_rt();
    let s = rt.set("s", 6).unwrap();
    let half = rt.subset("half", &s, vec![0, 1, 2]).unwrap();
    let x = rt.dat("x", &s, 1, vec![0.0; 6]).unwrap();
    let (y, z, w) = (
        rt.dat("y", &s, 1, vec![5.0; 6]).unwrap(),
        rt.dat("z", &s, 1, vec![1.0; 6]).unwrap(),
        rt.dat("w", &s, 1, vec![2.0; 6]).unwrap(),
    );
    let g = rt.global("g", &[0.0f64]).unwrap();
    let v = rt.dat("v", &s, 1, vec![3.0; 6]).unwrap();
    rt.par_loop(fails_at_three::KERNEL, &s, &[parloop::Arg::index(), x.arg(Access::WRITE)]).unwrap();
    // Unrelated to x: discarded all the same (nothing after a failure runs).
    rt.par_loop(scale_by_two::KERNEL, &s, &[y.arg(Access::RW)]).unwrap();
    rt.par_loop(scale_by_two::KERNEL, &s, &[v.arg(Access::RW)]).unwrap();
    rt.par_loop(total::KERNEL, &s, &[z.arg(Access::READ), g.arg(Access::INC)]).unwrap();
    assert!(matches!(x.values(), Err(Error::Deferred { .. })));
    for err in [y.values().unwrap_err(), g.values().unwrap_err()] {
        assert!(matches!(&err, Error::Discarded { kernel, .. } if kernel == "fails_at_three"), "{err}");
        assert!(err.to_string().contains("set_values"), "{err}");
    }
    // z was only read: it is as declared, and fine.
    assert_eq!(z.values().unwrap(), vec![1.0; 6]);
    // A loop reading poisoned data is refused when recorded; so is a
    // write that does not cover the dat (a subset) or a partial host write.
    let err = rt.par_loop(axpy::KERNEL, &s, &[y.arg(Access::READ), w.arg(Access::RW)]).unwrap_err();
    assert!(matches!(&err, Error::Discarded { name, by, .. } if name == "y" && by.contains("axpy")), "{err}");
    assert!(matches!(
        rt.par_loop(square::KERNEL, &half, &[z.arg(Access::READ), y.arg(Access::WRITE)]),
        Err(Error::Discarded { .. })
    ));
    assert!(matches!(y.with_values_mut(|v| v[0] = 1.0), Err(Error::Discarded { .. })));
    assert_eq!(w.values().unwrap(), vec![2.0; 6]);
    // A refused loop cures nothing: v stays refused although the loop
    // would have written it whole (it was cured before y's check refused
    // the loop, and read as declared).
    let err = rt.par_loop(square::KERNEL, &s, &[y.arg(Access::READ), v.arg(Access::WRITE)]).unwrap_err();
    assert!(matches!(err, Error::Discarded { .. }), "{err}");
    assert!(matches!(v.values(), Err(Error::Discarded { .. })));
    // Written whole again: a direct WRITE over its set, a host write.
    rt.par_loop(square::KERNEL, &s, &[z.arg(Access::READ), y.arg(Access::WRITE)]).unwrap();
    assert_eq!(y.values().unwrap(), vec![0.0; 6]);
    g.set_values(&[4.0]).unwrap();
    assert_eq!(g.value().unwrap(), 4.0);
}

/// A loop recorded before a failed one and unrelated to it stays pending
/// (nothing forced it), while a later loop writing the same data is
/// discarded: a host write of that data must still run the earlier loop
/// first. The discard took the later loop's place as the data's last
/// writer with it, the earlier loop was out of the data's reach, and it
/// ran at the next flush, over the host write: x ended 20, not 10.
#[test]
fn a_loop_recorded_before_a_failed_one_still_runs_before_a_host_write() {
    for backend in [Backend::Seq, Backend::Threads, Backend::Emu] {
        let rt = Runtime::with_lazy(backend, true).unwrap();
        let s = rt.set("s", 6).unwrap();
        let x = rt.dat("x", &s, 1, vec![1.0; 6]).unwrap();
        let y = rt.dat("y", &s, 1, vec![0.0; 6]).unwrap();
        let z = rt.dat("z", &s, 1, vec![3.0; 6]).unwrap();
        rt.par_loop(scale_by_two::KERNEL, &s, &[x.arg(Access::RW)]).unwrap();
        rt.par_loop(scale_by_two::KERNEL, &s, &[z.arg(Access::RW)]).unwrap();
        rt.par_loop(fails_at_three::KERNEL, &s, &[parloop::Arg::index(), y.arg(Access::WRITE)]).unwrap();
        rt.par_loop(scale_by_two::KERNEL, &s, &[x.arg(Access::RW)]).unwrap();
        assert!(matches!(y.values(), Err(Error::Deferred { .. })), "{backend:?}");
        // The second doubling of x was discarded: x is refused until written whole.
        assert!(matches!(x.values(), Err(Error::Discarded { .. })), "{backend:?}");
        // z's loop, recorded before the failure, runs when z is read.
        assert_eq!(z.values().unwrap(), vec![6.0; 6], "{backend:?}");
        x.set_values(&[10.0; 6]).unwrap();
        rt.flush().unwrap();
        assert_eq!(x.values().unwrap(), vec![10.0; 6], "{backend:?}");
        assert_eq!(rt.trace_stats().discarded, 1, "{backend:?}: the second doubling of x");
    }
}

#[test]
fn a_failed_fused_launch_poisons_what_its_other_loops_wrote() {
    let rt = lazy_rt();
    let s = rt.set("s", 6).unwrap();
    let x = rt.dat("x", &s, 1, (0..6).map(f64::from).collect()).unwrap();
    let y = rt.dat("y", &s, 1, vec![5.0; 6]).unwrap();
    let z = rt.dat("z", &s, 1, vec![0.0; 6]).unwrap();
    // Fused: y may be updated on some chunks only.
    rt.par_loop(axpy::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::RW)]).unwrap();
    rt.par_loop(div_by_three_minus::KERNEL, &s, &[x.arg(Access::READ), z.arg(Access::WRITE)]).unwrap();
    let err = rt.flush().unwrap_err();
    assert!(matches!(&err, Error::Deferred { kernel, .. } if kernel == "axpy+div_by_three_minus"), "{err}");
    assert!(matches!(y.values(), Err(Error::Discarded { .. })));
    y.set_values(&[1.0; 6]).unwrap();
    assert_eq!(y.values().unwrap(), vec![1.0; 6]);
}

#[parloop::kernel]
fn sum_into(a: &f64, g: &mut f64) {
    *g += *a;
}

/// A fused group that fails: the global its other loop reduces never got
/// that loop's sum (an eager run, going on after the first loop's error,
/// makes it), so it is refused until written, not read as `Ok` with its
/// old value; a lone failed loop's global keeps its old value, as eager.
#[test]
fn a_global_a_failed_fused_group_reduces_is_never_read_as_ok() {
    for backend in [Backend::Seq, Backend::Threads, device::device_backend()] {
        let rt = Runtime::with_lazy(backend, true).unwrap();
        let s = rt.set("s", 8).unwrap();
        let x = rt.dat("x", &s, 1, (0..8).map(f64::from).collect()).unwrap();
        let t = rt.dat("t", &s, 1, vec![0.0; 8]).unwrap();
        let g = rt.global("g", &[0.0]).unwrap();
        let quiet = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        // Fused: t written (failing past five), then summed into g.
        rt.par_loop(fails_past_five::KERNEL, &s, &[x.arg(Access::READ), t.arg(Access::WRITE)]).unwrap();
        rt.par_loop(sum_into::KERNEL, &s, &[t.arg(Access::READ), g.arg(Access::INC)]).unwrap();
        let first = rt.flush();
        std::panic::set_hook(quiet);
        assert!(
            matches!(&first, Err(Error::Deferred { kernel, .. }) if kernel == "fails_past_five+sum_into"),
            "{backend:?}: {first:?}"
        );
        for again in 0..2 {
            let got = g.value();
            assert!(matches!(got, Err(Error::Discarded { .. })), "{backend:?}, read {again}: {got:?}");
        }
        g.set_values(&[3.0]).unwrap();
        assert_eq!(g.value().unwrap(), 3.0, "{backend:?}");

        // A lone failed loop's global keeps its value, as an eager run's.
        rt.set_fusion(false);
        let h = rt.global("h", &[7.0]).unwrap();
        let quiet = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        rt.par_loop(fails_after_sum::KERNEL, &s, &[x.arg(Access::READ), h.arg(Access::INC)]).unwrap();
        let lone = rt.flush();
        std::panic::set_hook(quiet);
        assert!(lone.is_err(), "{backend:?}");
        assert_eq!(h.value().unwrap(), 7.0, "{backend:?}");
    }
}

#[parloop::kernel]
fn fails_after_sum(x: &f64, h: &mut f64) {
    *h += *x;
    if *x > 5.0 {
        panic!("past five");
    }
}

#[parloop::kernel]
fn fails_past_five(x: &f64, y: &mut f64) {
    if *x > 5.0 {
        panic!("past five");
    }
    *y = *x + 100.0;
}

#[parloop::kernel]
fn copy_over(a: &f64, b: &mut f64) {
    *b = *a;
}

/// A temporary whose first write fails part-way, after another temporary
/// left its values in the pool: reading it, or a dat copied from it, must
/// be an error (the pool's values are not the program's). They read as
/// `Ok` with the dropped temporary's 42s, or the copy's old values.
#[test]
fn a_temporary_a_failed_loop_wrote_is_never_read_as_ok() {
    for backend in [Backend::Seq, Backend::Threads, device::device_backend()] {
        for fusion in [false, true] {
            let rt = Runtime::with_lazy(backend, true).unwrap();
            rt.set_fusion(fusion);
            let s = rt.set("s", 10).unwrap();
            {
                let t1 = rt.temporary::<f64>("t1", &s, 1).unwrap();
                t1.set_values(&[42.0; 10]).unwrap();
            }
            let t2 = rt.temporary::<f64>("t2", &s, 1).unwrap();
            let x = rt.dat("x", &s, 1, (0..10).map(f64::from).collect()).unwrap();
            let y = rt.dat("y", &s, 1, vec![-1.0; 10]).unwrap();
            let quiet = std::panic::take_hook();
            std::panic::set_hook(Box::new(|_| {}));
            rt.par_loop(fails_past_five::KERNEL, &s, &[x.arg(Access::READ), t2.arg(Access::WRITE)]).unwrap();
            rt.par_loop(copy_over::KERNEL, &s, &[t2.arg(Access::READ), y.arg(Access::WRITE)]).unwrap();
            let first = y.values();
            std::panic::set_hook(quiet);
            let case = format!("{backend:?}, fusion {fusion}");
            assert!(matches!(first, Err(Error::Deferred { .. })), "{case}: {first:?}");
            for (name, again) in [("y", y.values()), ("t2", t2.values())] {
                assert!(again.is_err(), "{case}: {name} read as {again:?}");
            }
            // Written whole again, both read.
            t2.set_values(&[1.0; 10]).unwrap();
            rt.par_loop(copy_over::KERNEL, &s, &[t2.arg(Access::READ), y.arg(Access::WRITE)]).unwrap();
            assert_eq!(y.values().unwrap(), vec![1.0; 10], "{case}");
        }
    }
}

#[test]
fn forcing_points_are_counted_by_source_location() {
    let rt = lazy_rt();
    let s = rt.set("s", 2).unwrap();
    let x = rt.dat("x", &s, 1, vec![1.0; 2]).unwrap();
    let y = rt.dat("y", &s, 1, vec![1.0; 2]).unwrap();
    let mut lines = Vec::new();
    for _ in 0..3 {
        rt.par_loop(axpy::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::RW)]).unwrap();
        lines.push(line!() + 1);
        y.values().unwrap();
    }
    rt.par_loop(axpy::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::RW)]).unwrap();
    let flush_line = line!() + 1;
    rt.flush().unwrap();
    let points = rt.forcing_points();
    let at = |line: u32| points.iter().find(|p| p.location.contains(&format!("lazy.rs:{line}:"))).cloned();
    let read = at(lines[0]).expect("the read is a forcing point");
    assert_eq!((read.count, read.loops), (3, 3));
    assert_eq!(at(flush_line).map(|p| (p.count, p.loops)), Some((1, 1)));
    assert!(rt.report_table().contains(&format!("lazy.rs:{}", lines[0])));
}

/// Forces the runtime makes on its own are listed by what they are: a
/// dropped dat's pending loops, and the profile read, showed as lines of
/// parloop's own source (`runtime/src/trace/mod.rs:873:16`); the summary
/// counted "2 forces (4 found nothing)", the forces that ran something
/// beside those that did not, as if the second were part of the first.
#[test]
fn the_runtimes_own_forcing_points_are_named_not_located_in_its_source() {
    let rt = lazy_rt();
    let s = rt.set("s", 2).unwrap();
    let x = rt.dat("x", &s, 1, vec![1.0; 2]).unwrap();
    let y = rt.dat("y", &s, 1, vec![1.0; 2]).unwrap();
    rt.par_loop(axpy::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::RW)]).unwrap();
    drop(y);
    let table = rt.report_table();
    let points = rt.forcing_points();
    assert!(points.iter().all(|p| !p.location.contains("runtime/src/")), "{points:?}");
    let dropped = points.iter().find(|p| p.location.contains("last handle")).expect("the drop's force");
    assert_eq!((dropped.count, dropped.loops), (1, 1));
    assert!(points.iter().any(|p| p.location.contains("the runtime's own flush")), "{points:?}");
    let stats = rt.trace_stats();
    let forces: u64 = points.iter().map(|p| p.count).sum();
    assert!(table.contains(&format!("{forces} forces ({} found nothing)", stats.forces_empty)), "{table}");
}

#[test]
fn loops_inside_a_host_closure_run_at_once() {
    let rt = lazy_rt();
    let s = rt.set("s", 2).unwrap();
    let x = rt.dat("x", &s, 1, vec![1.0; 2]).unwrap();
    let y = rt.dat("y", &s, 1, vec![1.0; 2]).unwrap();
    let z = rt.dat("z", &s, 1, vec![1.0; 2]).unwrap();
    rt.par_loop(axpy::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::RW)]).unwrap();
    let inside = x.with_values(|_| {
        // Everything recorded ran when the closure began.
        assert_eq!(rt.trace_stats().loops_run, 1);
        (
            rt.par_loop(axpy::KERNEL, &s, &[z.arg(Access::READ), y.arg(Access::RW)]),
            rt.par_loop(square::KERNEL, &s, &[y.arg(Access::READ), x.arg(Access::WRITE)]),
        )
    });
    let (ok, busy) = inside.unwrap();
    ok.unwrap();
    // As without the trace: x is held by the closure.
    assert!(matches!(busy, Err(Error::Busy { .. })), "{busy:?}");
    assert_eq!(y.values().unwrap(), vec![3.25; 2]);
    assert_eq!(rt.trace_stats().eager_fallbacks, 2);
}

#[test]
fn a_time_loop_that_never_reads_keeps_the_trace_bounded() {
    let rt = lazy_rt();
    let s = rt.set("s", 1).unwrap();
    let x = rt.dat("x", &s, 1, vec![0.0]).unwrap();
    let y = rt.dat("y", &s, 1, vec![0.0]).unwrap();
    let lp = ParLoop::new(axpy::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::RW)]).unwrap();
    for _ in 0..2500 {
        rt.execute(&lp).unwrap();
    }
    let st = rt.trace_stats();
    assert_eq!(st.limit_flushes, 2);
    assert_eq!(st.loops_run, 2048);
    assert_eq!(y.values().unwrap()[0], 2.0);
    assert_eq!(rt.trace_stats().loops_run, 2500);
}

fn expect(edges: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = edges.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    v.sort();
    v
}

#[parloop::kernel]
fn phi_expr(p: &f64, phi: &mut f64) {
    *phi -= 0.5 * *p;
}

#[parloop::kernel]
fn zero(t: &mut f64) {
    *t = 0.0;
}

#[parloop::kernel]
fn assemble1(v: &f64, phi: &f64, t: &mut f64) {
    *t = *v * *phi;
}

/// The first three loops of the wave step (seed 000) on `verts`/`cells`.
fn first_three(rt: &Runtime, verts: &Set, cells: &Set, c2v: &Map) -> [Dat<f64>; 4] {
    let p = rt.dat("p", verts, 1, vec![1.0; verts.total()]).unwrap();
    let phi = rt.dat("phi", verts, 1, vec![0.0; verts.total()]).unwrap();
    let v = rt.dat("v", verts, 1, vec![1.0; verts.total()]).unwrap();
    let t1 = rt.dat("t1", cells, 1, vec![0.0; cells.total()]).unwrap();
    rt.par_loop(phi_expr::KERNEL, verts, &[p.arg(Access::READ), phi.arg(Access::INC)]).unwrap();
    rt.par_loop(zero::KERNEL, cells, &[t1.arg(Access::WRITE)]).unwrap();
    rt.par_loop(
        assemble1::KERNEL,
        cells,
        &[v.arg_via(c2v, 0, Access::READ), phi.arg_via(c2v, 1, Access::READ), t1.arg(Access::WRITE)],
    )
    .unwrap();
    let dot = rt.trace_dot_string();
    let path = std::env::temp_dir().join(format!("parloop-lazy-{}.dot", std::process::id()));
    rt.trace_dot(&path).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), dot);
    std::fs::remove_file(&path).unwrap();
    // Kept alive until the DAG is read: dropping them would force.
    [p, phi, v, t1]
}

#[test]
fn the_first_three_wave_loops_give_the_seed_dag_serially() {
    let rt = lazy_rt();
    let verts = rt.set("verts", 4).unwrap();
    let cells = rt.set("cells", 2).unwrap();
    let c2v = rt.map("c2v", &cells, &verts, 2, vec![0, 1, 2, 3]).unwrap();
    let _data = first_three(&rt, &verts, &cells, &c2v);
    assert_eq!(
        rt.trace_edges(),
        expect(&[
            ("top", "phi_expr[core]"),
            ("top", "zero[core]"),
            ("phi_expr[core]", "assemble1[core]"),
            ("zero[core]", "assemble1[core]"),
            ("assemble1[core]", "bot"),
        ])
    );
}

#[test]
fn the_first_three_wave_loops_give_the_seed_dag_with_halos() {
    // One rank's view of a partitioned mesh (seed 004's sections): the
    // halo computations and their edges are those of seed 000's figure.
    let rt = lazy_rt();
    let verts = rt.set_with_sections("verts", Sections { core: 2, owned: 2, exec: 1, non_exec: 1 }).unwrap();
    let cells = rt.set_with_sections("cells", Sections { core: 1, owned: 1, exec: 1, non_exec: 0 }).unwrap();
    let c2v = rt.map("c2v", &cells, &verts, 2, vec![0, 1, 2, 4, 3, 5]).unwrap();
    let _data = first_three(&rt, &verts, &cells, &c2v);
    assert_eq!(
        rt.trace_edges(),
        expect(&[
            ("top", "phi_expr[core,owned]"),
            ("top", "zero[core,owned]"),
            ("top", "HaloSend(v)"),
            ("phi_expr[core,owned]", "HaloSend(phi)"),
            ("phi_expr[core,owned]", "assemble1[core]"),
            ("zero[core,owned]", "assemble1[core]"),
            ("HaloSend(phi)", "HaloRecv(phi)"),
            ("HaloSend(v)", "HaloRecv(v)"),
            ("assemble1[core]", "assemble1[owned]"),
            ("HaloRecv(phi)", "assemble1[owned]"),
            ("HaloRecv(v)", "assemble1[owned]"),
            ("assemble1[owned]", "bot"),
        ])
    );
}

#[parloop::kernel]
fn unit_entry(a: &mut [f64; 1]) {
    a[0] += 1.0;
}

#[test]
fn a_matrix_and_the_product_refuse_stale_data_and_zero_cures_the_matrix() {
    // The device too: its product and diagonal read the matrix's values
    // on the device, where no host read checks them (they once used a
    // discarded assembly's values).
    for backend in [Backend::Seq, Backend::Emu] {
        a_matrix_refuses_stale_data(Runtime::with_lazy(backend, true).unwrap());
    }
}

fn a_matrix_refuses_stale_data(rt: Runtime) {
    let s = rt.set("s", 6).unwrap();
    let id = rt.map("id", &s, &s, 1, (0..6).collect()).unwrap();
    let a = rt.mat::<f64>("A", &rt.sparsity("p", &[(&id, &id)], (1, 1)).unwrap()).unwrap();
    let x = rt.dat("x", &s, 1, vec![0.0; 6]).unwrap();
    let (u, y) = (rt.dat("u", &s, 1, vec![1.0; 6]).unwrap(), rt.dat("y", &s, 1, vec![0.0; 6]).unwrap());
    let clean = rt.dat("clean", &s, 1, vec![1.0; 6]).unwrap();
    rt.par_loop(fails_at_three::KERNEL, &s, &[parloop::Arg::index(), x.arg(Access::WRITE)]).unwrap();
    rt.par_loop(unit_entry::KERNEL, &s, &[a.arg(&id, &id, Access::INC)]).unwrap();
    rt.par_loop(scale_by_two::KERNEL, &s, &[u.arg(Access::RW)]).unwrap();
    assert!(matches!(rt.flush(), Err(Error::Deferred { .. })));
    assert!(matches!(a.values(), Err(Error::Discarded { .. })));
    // The product reads u as a loop would: refused, not computed from it.
    assert!(matches!(rt.mult(&a, &u, &y), Err(Error::Discarded { .. })));
    // With a clean x, the matrix itself is refused, as is its diagonal.
    let err = rt.mult(&a, &clean, &y).unwrap_err();
    assert!(matches!(&err, Error::Discarded { name, .. } if name.contains('A')), "{err}");
    let err = rt.diagonal(&a, &y).unwrap_err();
    assert!(matches!(&err, Error::Discarded { name, .. } if name.contains('A')), "{err}");
    u.set_values(&[1.0; 6]).unwrap();
    a.zero().unwrap();
    rt.par_loop(unit_entry::KERNEL, &s, &[a.arg(&id, &id, Access::INC)]).unwrap();
    rt.mult(&a, &u, &y).unwrap();
    assert_eq!(y.values().unwrap(), vec![1.0; 6]);
    rt.diagonal(&a, &y).unwrap();
    assert_eq!(y.values().unwrap(), vec![1.0; 6]);
}

/// A name whose object the program dropped is free again, as in an eager
/// run, though a pending loop still used the object: the declaration runs
/// what is pending first (it was a `DuplicateName` for a set the program
/// no longer has).
#[test]
fn a_dropped_objects_name_is_free_again_with_loops_pending() {
    let rt = lazy_rt();
    let t = rt.set("t", 4).unwrap();
    let out = rt.dat("out", &t, 1, vec![0.0; 4]).unwrap();
    {
        let s = rt.set("s", 3).unwrap();
        let m = rt.map("m", &t, &s, 1, vec![0, 1, 2, 0]).unwrap();
        let x = rt.dat("x", &s, 1, vec![1.0, 2.0, 3.0]).unwrap();
        rt.par_loop(copy_over::KERNEL, &t, &[x.arg_via(&m, 0, Access::READ), out.arg(Access::WRITE)]).unwrap();
    }
    let s = rt.set("s", 5).unwrap();
    let m = rt.map("m", &t, &s, 1, vec![4, 3, 2, 1]).unwrap();
    let x = rt.dat("x", &s, 1, vec![10.0, 20.0, 30.0, 40.0, 50.0]).unwrap();
    assert_eq!(out.values().unwrap(), vec![1.0, 2.0, 3.0, 1.0]);
    rt.par_loop(copy_over::KERNEL, &t, &[x.arg_via(&m, 0, Access::READ), out.arg(Access::WRITE)]).unwrap();
    assert_eq!(out.values().unwrap(), vec![50.0, 40.0, 30.0, 20.0]);
}

#[parloop::kernel]
fn set_one(x: &mut f64) {
    *x = 1.0;
}

#[parloop::kernel]
fn twice_on_diagonal(a: &mut [[f64; 1]; 1]) {
    a[0][0] += 2.0;
}

/// A loop pending in one runtime's trace runs before another runtime's
/// work on its data: that work runs eagerly (its data are the first
/// trace's), and ran as if forced, where a datum's own trace is not
/// forced: `fill` then ran before the pending write (x ended 1, not 0),
/// and `cg` solved with the old right-hand side (`||b|| = 0`, u = 0).
#[test]
fn another_runtimes_work_on_data_with_pending_loops_runs_after_them() {
    for backend in [Backend::Seq, Backend::Threads, Backend::Emu] {
        for lazy in [true, false] {
            let what = format!("{backend:?}, the second runtime lazy: {lazy}");
            let first = Runtime::with_lazy(backend, true).unwrap();
            let second = Runtime::with_lazy(backend, lazy).unwrap();
            let s = first.set("s", 4).unwrap();
            let x = first.dat("x", &s, 1, vec![5.0; 4]).unwrap();
            first.par_loop(set_one::KERNEL, &s, &[x.arg(Access::WRITE)]).unwrap();
            second.fill(&x, 0.0).unwrap();
            assert_eq!(x.values().unwrap(), vec![0.0; 4], "{what}: fill");
            // A loop of the second runtime reading what the first wrote.
            let y = first.dat("y", &s, 1, vec![5.0; 4]).unwrap();
            first.par_loop(set_one::KERNEL, &s, &[x.arg(Access::WRITE)]).unwrap();
            second.par_loop(copy_into::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::WRITE)]).unwrap();
            assert_eq!(y.values().unwrap(), vec![1.0; 4], "{what}: copy");
            // A solve through the second runtime of the first's system.
            let id = first.map("id", &s, &s, 1, vec![0, 1, 2, 3]).unwrap();
            let a = first.mat::<f64>("A", &first.sparsity("A", &[(&id, &id)], (1, 1)).unwrap()).unwrap();
            first.par_loop(twice_on_diagonal::KERNEL, &s, &[a.arg(&id, &id, Access::INC)]).unwrap();
            let b = first.dat("b", &s, 1, vec![0.0; 4]).unwrap();
            let u = first.dat("u", &s, 1, vec![0.0; 4]).unwrap();
            first.par_loop(set_one::KERNEL, &s, &[b.arg(Access::WRITE)]).unwrap();
            let opts = parloop::solve::CgOptions { rtol: 1e-12, ..Default::default() };
            let report = parloop::solve::cg(&second, &a, &b, &u, &opts).unwrap();
            assert_eq!(report.rhs_norm, 2.0, "{what}: cg");
            assert_eq!(u.values().unwrap(), vec![0.5; 4], "{what}: cg");
            first.flush().unwrap();
            second.flush().unwrap();
        }
    }
}

/// Handles of one dat dropped on several threads at once: exactly one of
/// them is the last, and the loops pending on the dat run then. The last
/// handle was found by `Arc::strong_count(..) == 1` before the count went
/// down, so two handles going together could each see the other and
/// neither run them: the loop reading the dat stayed recorded with its
/// data gone, and reading the sum failed (`DataDropped`).
#[test]
fn handles_dropped_together_on_several_threads_run_the_pending_loops_once() {
    let rt = lazy_rt();
    let s = rt.set("s", 4).unwrap();
    let sum = rt.global("sum", &[0.0f64]).unwrap();
    let threads = 8;
    for round in 0..20000 {
        let t = rt.dat("t", &s, 1, vec![1.0; 4]).unwrap();
        rt.par_loop(total::KERNEL, &s, &[t.arg(Access::READ), sum.arg(Access::INC)]).unwrap();
        let handles: Vec<Dat<f64>> = (0..threads).map(|_| t.clone()).collect();
        drop(t);
        let start = std::sync::Barrier::new(threads);
        std::thread::scope(|scope| {
            for h in handles {
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    drop(h);
                });
            }
        });
        assert_eq!(sum.value().unwrap(), 4.0 * (round + 1) as f64, "round {round}");
        assert_eq!(rt.trace_stats().drop_forces, round as u64 + 1, "round {round}");
    }
}
