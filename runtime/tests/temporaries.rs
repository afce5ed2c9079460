//! Temporaries (issue 15, seed 000's `LazyMalloc`/`LazyFree`): values
//! bitwise those of ordinary dats, eager and lazy, on every backend; the
//! pool reuses a step's buffers in the next step (counted); reading a
//! temporary before it is written is an error naming it.

#[path = "support/device.rs"]
mod device;

use parloop::{Access, Backend, Dat, Error, Map, Runtime, Set};

#[parloop::kernel]
fn zero(t: &mut f64) {
    *t = 0.0;
}

#[parloop::kernel]
fn spread(w: &f64, a: &mut f64, b: &mut f64) {
    *a += 0.25 * *w;
    *b += 0.75 * *w + 1.0;
}

#[parloop::kernel]
fn update(t1: &f64, t2: &f64, p: &mut f64) {
    *p += *t1 / *t2;
}

#[parloop::kernel]
fn tweak(p: &f64, w: &mut f64) {
    *w = 0.5 * *w + 0.1 * *p;
}

struct Mesh {
    nodes: Set,
    edges: Set,
    e2n: Map,
}

fn mesh(rt: &Runtime, n: usize) -> Mesh {
    let nodes = rt.set("nodes", n).unwrap();
    let edges = rt.set("edges", n).unwrap();
    // A ring with a chord pattern: node i to i+1 and to (3i) mod n.
    let map: Vec<i32> = (0..n).flat_map(|i| [i as i32, ((i * 3 + 1) % n) as i32]).collect();
    let e2n = rt.map("e2n", &edges, &nodes, 2, map).unwrap();
    Mesh { nodes, edges, e2n }
}

/// `steps` time steps of the wave's pattern (zero, INC through the map,
/// a direct update reading both), with `t1`, `t2` made afresh each step as
/// temporaries or as ordinary dats; returns `p`'s and `w`'s bits.
fn run(backend: Backend, lazy: bool, temporaries: bool, steps: usize) -> (Vec<u64>, Vec<u64>, parloop::TraceStats) {
    let rt = Runtime::with_lazy(backend, lazy).unwrap();
    let n = 37;
    let m = mesh(&rt, n);
    let p = rt.dat("p", &m.nodes, 1, (0..n).map(|i| 1.0 + i as f64 * 0.01).collect()).unwrap();
    let w = rt.dat("w", &m.edges, 1, (0..n).map(|i| (i as f64).sin()).collect()).unwrap();
    for step in 0..steps {
        let (t1, t2): (Dat<f64>, Dat<f64>) = if temporaries {
            (rt.temporary("t1", &m.nodes, 1).unwrap(), rt.temporary("t2", &m.nodes, 1).unwrap())
        } else {
            (rt.dat("t1", &m.nodes, 1, vec![7.0; n]).unwrap(), rt.dat("t2", &m.nodes, 1, vec![7.0; n]).unwrap())
        };
        rt.par_loop(zero::KERNEL, &m.nodes, &[t1.arg(Access::WRITE)]).unwrap();
        rt.par_loop(zero::KERNEL, &m.nodes, &[t2.arg(Access::WRITE)]).unwrap();
        rt.par_loop(
            spread::KERNEL,
            &m.edges,
            &[w.arg(Access::READ), t1.arg_via(&m.e2n, 0, Access::INC), t2.arg_via(&m.e2n, 1, Access::INC)],
        )
        .unwrap();
        rt.par_loop(update::KERNEL, &m.nodes, &[t1.arg(Access::READ), t2.arg(Access::READ), p.arg(Access::RW)])
            .unwrap();
        rt.par_loop(tweak::KERNEL, &m.edges, &[p.arg_via(&m.e2n, 1, Access::READ), w.arg(Access::RW)]).unwrap();
        if step % 3 == 2 {
            // A host read inside the time loop (lazy: forces this far).
            p.values().unwrap();
        }
    }
    let bits = |v: Vec<f64>| v.into_iter().map(f64::to_bits).collect::<Vec<_>>();
    (bits(p.values().unwrap()), bits(w.values().unwrap()), rt.trace_stats())
}

fn backends() -> [Backend; 3] {
    [Backend::Seq, Backend::Threads, device::device_backend()]
}

#[test]
fn temporaries_give_bitwise_the_values_of_ordinary_dats_and_reuse_each_steps_buffers() {
    let steps = 8;
    for backend in backends() {
        let (p0, w0, s0) = run(backend, false, false, steps);
        assert_eq!(s0.temporaries_reused, 0, "{backend:?}: no temporaries, nothing reused");
        for lazy in [false, true] {
            let (p, w, stats) = run(backend, lazy, true, steps);
            assert_eq!(p, p0, "{backend:?} lazy={lazy}: p");
            assert_eq!(w, w0, "{backend:?} lazy={lazy}: w");
            // Two temporaries a step; only the first step allocates.
            assert_eq!(stats.temporaries_reused, 2 * (steps as u64 - 1), "{backend:?} lazy={lazy}");
            if lazy {
                assert_eq!(stats.drop_forces, 0, "{backend:?}: dropping a temporary forces nothing");
                assert!(stats.loops_recorded >= 5 * steps as u64);
            }
        }
    }
}

#[test]
fn a_buffer_is_reused_only_by_a_temporary_of_the_same_type_and_length() {
    for lazy in [false, true] {
        let rt = Runtime::with_lazy(Backend::Seq, lazy).unwrap();
        let m = mesh(&rt, 10);
        let a: Dat<f64> = rt.temporary("a", &m.nodes, 1).unwrap();
        a.set_values(&[2.5; 10]).unwrap();
        assert_eq!(a.values().unwrap(), vec![2.5; 10]);
        drop(a);
        // Another length, another type: fresh memory.
        let b: Dat<f64> = rt.temporary("b", &m.nodes, 2).unwrap();
        b.set_values(&[1.0; 20]).unwrap();
        let c: Dat<f32> = rt.temporary("c", &m.nodes, 2).unwrap();
        c.set_values(&[1.0; 20]).unwrap();
        assert_eq!(rt.trace_stats().temporaries_reused, 0, "lazy={lazy}");
        // The same shape: `a`'s buffer, written before read as always.
        let d: Dat<f64> = rt.temporary("a", &m.nodes, 1).unwrap();
        assert!(matches!(d.values(), Err(Error::UnwrittenTemporary { .. })), "lazy={lazy}: unwritten again");
        rt.par_loop(zero::KERNEL, &m.nodes, &[d.arg(Access::WRITE)]).unwrap();
        assert_eq!(d.values().unwrap(), vec![0.0; 10]);
        assert_eq!(rt.trace_stats().temporaries_reused, 1, "lazy={lazy}");
    }
}

#[test]
fn reading_a_temporary_before_it_is_written_is_an_error_naming_it() {
    for lazy in [false, true] {
        let rt = Runtime::with_lazy(Backend::Seq, lazy).unwrap();
        let m = mesh(&rt, 10);
        let p = rt.dat("p", &m.nodes, 1, vec![1.0; 10]).unwrap();
        let w = rt.dat("w", &m.edges, 1, vec![1.0; 10]).unwrap();
        let q = rt.dat("q", &m.nodes, 1, vec![1.0; 10]).unwrap();
        let t: Dat<f64> = rt.temporary("scratch", &m.nodes, 1).unwrap();
        let named = |e: Error, what: &str| {
            let msg = e.to_string();
            assert!(matches!(e, Error::UnwrittenTemporary { .. }), "lazy={lazy} {what}: {msg}");
            assert!(msg.contains("`scratch`"), "lazy={lazy} {what}: {msg}");
            msg
        };
        named(t.values().unwrap_err(), "values");
        named(t.with_values(|v| v.len()).unwrap_err(), "with_values");
        named(t.with_values_mut(|v| v.len()).unwrap_err(), "with_values_mut");
        // A loop reading it, incrementing it, or writing only some
        // entities (through a map) first: refused, nothing recorded.
        let msg = named(
            rt.par_loop(update::KERNEL, &m.nodes, &[t.arg(Access::READ), q.arg(Access::READ), p.arg(Access::RW)])
                .unwrap_err(),
            "READ",
        );
        assert!(msg.contains("update") && msg.contains("argument 0"), "{msg}");
        named(
            rt.par_loop(
                spread::KERNEL,
                &m.edges,
                &[w.arg(Access::READ), t.arg_via(&m.e2n, 0, Access::INC), p.arg_via(&m.e2n, 1, Access::INC)],
            )
            .unwrap_err(),
            "INC",
        );
        let msg = named(
            rt.par_loop(tweak::KERNEL, &m.edges, &[p.arg_via(&m.e2n, 0, Access::READ), w.arg(Access::RW)])
                .and_then(|_| rt.par_loop(zero::KERNEL, &m.edges, &[t.arg_via(&m.e2n, 0, Access::WRITE)]))
                .unwrap_err(),
            "WRITE through a map",
        );
        assert!(msg.contains("Write through a map") && msg.contains("may not write every entity"), "{msg}");
        // A direct WRITE over a subset covers only the subset: said so (the
        // message said "read before it was written ... not direct").
        let some = rt.subset("some", &m.nodes, vec![1, 4]).unwrap();
        let msg = named(rt.par_loop(zero::KERNEL, &some, &[t.arg(Access::WRITE)]).unwrap_err(), "over a subset");
        assert!(msg.contains("over subset `some`") && msg.contains("writes only the subset's entities"), "{msg}");
        assert!(!msg.contains("read before"), "{msg}");
        assert_eq!(rt.trace_stats().loops_recorded, if lazy { 1 } else { 0 });
        // Written by set_values, then readable by loops and the host.
        t.set_values(&[3.0; 10]).unwrap();
        rt.par_loop(update::KERNEL, &m.nodes, &[t.arg(Access::READ), t.arg(Access::READ), p.arg(Access::RW)]).unwrap();
        assert_eq!(p.values().unwrap(), vec![2.0; 10]);
        assert_eq!(t.values().unwrap(), vec![3.0; 10]);
    }
}

#[test]
fn a_pending_temporary_dropped_by_the_user_is_released_after_its_last_use_runs() {
    let rt = Runtime::with_lazy(Backend::Seq, true).unwrap();
    let m = mesh(&rt, 12);
    let p = rt.dat("p", &m.nodes, 1, vec![1.0; 12]).unwrap();
    let q = rt.dat("q", &m.nodes, 1, vec![1.0; 12]).unwrap();
    {
        let t: Dat<f64> = rt.temporary("t", &m.nodes, 1).unwrap();
        rt.par_loop(zero::KERNEL, &m.nodes, &[t.arg(Access::WRITE)]).unwrap();
        rt.par_loop(update::KERNEL, &m.nodes, &[q.arg(Access::READ), q.arg(Access::READ), t.arg(Access::RW)]).unwrap();
        rt.par_loop(update::KERNEL, &m.nodes, &[t.arg(Access::READ), q.arg(Access::READ), p.arg(Access::RW)]).unwrap();
    } // dropped with three loops pending: nothing runs yet
    let stats = rt.trace_stats();
    assert_eq!((stats.loops_run, stats.drop_forces), (0, 0));
    // Not released yet: a new temporary of the same shape cannot have its buffer.
    let u: Dat<f64> = rt.temporary("u", &m.nodes, 1).unwrap();
    u.set_values(&[0.0; 12]).unwrap();
    assert_eq!(rt.trace_stats().temporaries_reused, 0);
    // t = 0 + 1/1 = 1, p = 1 + 1/1 = 2.
    assert_eq!(p.values().unwrap(), vec![2.0; 12]);
    assert_eq!(rt.trace_stats().loops_run, 3);
    let v: Dat<f64> = rt.temporary("v", &m.nodes, 1).unwrap();
    v.set_values(&[0.0; 12]).unwrap();
    assert_eq!(rt.trace_stats().temporaries_reused, 1, "t's buffer, released once its loops ran");
}

#[test]
fn a_temporary_too_large_for_memory_is_an_error_when_first_written() {
    // 2^59 doubles (4 EiB): accepted as a shape, allocated only when a
    // write runs. That allocation aborted the process; `set_values` with a
    // wrong length allocated it before checking the length.
    for lazy in [false, true] {
        let rt = Runtime::with_lazy(Backend::Seq, lazy).unwrap();
        let s = rt.set("huge", 1 << 59).unwrap();
        let t: Dat<f64> = rt.temporary("t", &s, 1).unwrap();
        let err = t.set_values(&[0.0]).unwrap_err();
        assert!(matches!(err, Error::WrongLength { .. }), "{err}");
        let err = match rt.par_loop(zero::KERNEL, &s, &[t.arg(Access::WRITE)]) {
            Err(e) => e,
            Ok(()) => rt.flush().unwrap_err(),
        };
        let msg = err.to_string();
        assert!(msg.contains("`t`") && msg.contains("huge"), "{msg}");
        assert!(
            matches!(err, Error::OutOfMemory { .. })
                || matches!(&err, Error::Deferred { source, .. } if matches!(**source, Error::OutOfMemory { .. })),
            "{err:?}"
        );
    }
    // On a device the buffer is the device's: its error named no dat
    // ("an emulated device buffer needs 8796093022208 bytes").
    for lazy in [false, true] {
        let rt = Runtime::with_lazy(device::device_backend(), lazy).unwrap();
        let s = rt.set("huge", 1 << 40).unwrap();
        let t: Dat<f64> = rt.temporary("t", &s, 1).unwrap();
        let err = match rt.par_loop(zero::KERNEL, &s, &[t.arg(Access::WRITE)]) {
            Err(e) => e,
            Ok(()) => rt.flush().unwrap_err(),
        };
        let msg = err.to_string();
        assert!(msg.contains("`t`") && msg.contains("huge"), "lazy {lazy}: {msg}");
    }
}

#[parloop::kernel]
fn twice(src: &f64, dst: &mut f64) {
    *dst = 2.0 * *src;
}

/// On a device a temporary first written by a device loop has device
/// memory alone; the host copy is made when the host reads or writes it,
/// and a pooled device-only buffer serves a temporary the host writes first.
#[test]
fn a_device_only_temporary_reads_back_takes_host_writes_and_is_pooled() {
    // Eager, so that each buffer is back in the pool when the next
    // temporary is written (the counts below).
    let rt = Runtime::with_lazy(device::device_backend(), false).unwrap();
    let m = mesh(&rt, 300);
    let src = rt.dat("src", &m.nodes, 1, (0..300).map(|i| i as f64).collect()).unwrap();
    let expect: Vec<f64> = (0..300).map(|i| 2.0 * i as f64).collect();
    let t: Dat<f64> = rt.temporary("t", &m.nodes, 1).unwrap();
    rt.par_loop(twice::KERNEL, &m.nodes, &[src.arg(Access::READ), t.arg(Access::WRITE)]).unwrap();
    // A device loop reading it, then the host.
    let u = rt.dat("u", &m.nodes, 1, vec![0.0; 300]).unwrap();
    rt.par_loop(twice::KERNEL, &m.nodes, &[t.arg(Access::READ), u.arg(Access::WRITE)]).unwrap();
    assert_eq!(t.values().unwrap(), expect);
    assert_eq!(u.values().unwrap(), expect.iter().map(|v| 2.0 * v).collect::<Vec<_>>());
    // A host write, then a device loop reads the host's values.
    t.set_values(&vec![1.5; 300]).unwrap();
    rt.par_loop(twice::KERNEL, &m.nodes, &[t.arg(Access::READ), u.arg(Access::WRITE)]).unwrap();
    assert_eq!(u.values().unwrap(), vec![3.0; 300]);
    drop(t);
    // Device memory alone, released, then taken by one the host writes first.
    let a: Dat<f64> = rt.temporary("a", &m.nodes, 1).unwrap();
    rt.par_loop(twice::KERNEL, &m.nodes, &[src.arg(Access::READ), a.arg(Access::WRITE)]).unwrap();
    drop(a);
    let b: Dat<f64> = rt.temporary("b", &m.nodes, 1).unwrap();
    b.set_values(&vec![-1.0; 300]).unwrap();
    rt.par_loop(twice::KERNEL, &m.nodes, &[b.arg(Access::READ), u.arg(Access::WRITE)]).unwrap();
    assert_eq!(u.values().unwrap(), vec![-2.0; 300]);
    assert_eq!(b.values().unwrap(), vec![-1.0; 300]);
    assert_eq!(rt.trace_stats().temporaries_reused, 2);
}

/// Temporaries took no name: a dat `x`, a temporary `x` and a second
/// temporary `x` lived together, and messages naming `x` could mean any of
/// them. Now a temporary takes a free variant of a held name.
#[test]
fn a_temporary_takes_a_free_variant_of_a_name_a_live_object_holds() {
    for lazy in [false, true] {
        let rt = Runtime::with_lazy(Backend::Seq, lazy).unwrap();
        let s = rt.set("s", 3).unwrap();
        let x = rt.dat("x", &s, 1, vec![1.0f64; 3]).unwrap();
        let t1: Dat<f64> = rt.temporary("x", &s, 1).unwrap();
        let t2: Dat<f64> = rt.temporary("x", &s, 1).unwrap();
        assert_eq!((x.name(), t1.name(), t2.name()), ("x", "x~2", "x~3"));
        // A message about the temporary names it alone.
        let err = t2.values().unwrap_err().to_string();
        assert!(err.contains("`x~3`"), "{err}");
        // A free name is taken as given, and again once its holder is gone.
        let t: Dat<f64> = rt.temporary("t1", &s, 1).unwrap();
        assert_eq!(t.name(), "t1");
        drop(t);
        let t: Dat<f64> = rt.temporary("t1", &s, 1).unwrap();
        assert_eq!(t.name(), "t1");
        rt.par_loop(zero::KERNEL, &s, &[t.arg(Access::WRITE)]).unwrap();
        assert_eq!(t.values().unwrap(), vec![0.0; 3]);
        // Names a message cannot show are refused, as for dats.
        assert!(matches!(rt.temporary::<f64>("", &s, 1), Err(Error::InvalidDeclaration { .. })));
        assert!(matches!(rt.temporary::<f64>("a\nb", &s, 1), Err(Error::InvalidDeclaration { .. })));
    }
}

/// Three nodes and the matrix `2 I` on them (a diagonal sparsity, every
/// row zeroed with diagonal 2).
fn twice_the_identity(rt: &Runtime) -> (Set, parloop::Mat<f64>) {
    let nodes = rt.set("nodes", 3).unwrap();
    let id = rt.map("id", &nodes, &nodes, 1, vec![0, 1, 2]).unwrap();
    let a = rt.mat::<f64>("A", &rt.sparsity("s", &[(&id, &id)], (1, 1)).unwrap()).unwrap();
    let all = rt.subset("all", &nodes, vec![0, 1, 2]).unwrap();
    a.zero_rows(&all, 2.0).unwrap();
    (nodes, a)
}

/// A product into a fresh temporary wrote it whole, but the temporary
/// stayed "used before it was written" for every read after (its first
/// write was recorded only for loops and `set_values`): read back now,
/// on every backend, eager and lazy; so is a matrix diagonal.
#[test]
fn a_library_operation_is_a_temporarys_first_write() {
    for backend in backends() {
        for lazy in [false, true] {
            let rt = Runtime::with_lazy(backend, lazy).unwrap();
            let (nodes, a) = twice_the_identity(&rt);
            let x = rt.dat("x", &nodes, 1, vec![1.0, 2.0, 3.0]).unwrap();
            let y = rt.temporary::<f64>("y", &nodes, 1).unwrap();
            rt.mult(&a, &x, &y).unwrap();
            assert_eq!(y.values().unwrap(), [2.0, 4.0, 6.0], "{backend} lazy {lazy}");
            assert_eq!(rt.norm2(&y).unwrap(), 56f64.sqrt(), "{backend} lazy {lazy}");
            let d = rt.temporary::<f64>("d", &nodes, 1).unwrap();
            rt.diagonal(&a, &d).unwrap();
            assert_eq!(d.values().unwrap(), [2.0; 3], "{backend} lazy {lazy}");
        }
    }
}

/// A product reads its x: an unwritten temporary there is refused, as a
/// loop's read is (it multiplied whatever the pooled buffer held: another
/// temporary's values).
#[test]
fn a_product_of_an_unwritten_temporary_is_refused() {
    for backend in backends() {
        for lazy in [false, true] {
            let rt = Runtime::with_lazy(backend, lazy).unwrap();
            let (nodes, a) = twice_the_identity(&rt);
            {
                // Its buffer goes back to the pool, holding 42s.
                let t0 = rt.temporary::<f64>("t0", &nodes, 1).unwrap();
                t0.set_values(&[42.0; 3]).unwrap();
            }
            let t = rt.temporary::<f64>("t", &nodes, 1).unwrap();
            let y = rt.dat("y", &nodes, 1, vec![0.0; 3]).unwrap();
            let e = rt.mult(&a, &t, &y).unwrap_err();
            assert!(matches!(&e, Error::UnwrittenTemporary { name, .. } if name == "t"), "{backend} lazy {lazy}: {e}");
            assert!(e.to_string().contains("mult of matrix `A`"), "{e}");
            assert_eq!(y.values().unwrap(), [0.0; 3], "{backend} lazy {lazy}: y unchanged");
        }
    }
}
