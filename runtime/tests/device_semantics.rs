//! The device path (`emu`, running the generated CUDA on the CPU) follows
//! the same semantics as `seq`, the reference: MIN/MAX reductions with NaN,
//! INC only on increment-only parameters, Rust's integer division and
//! remainder panics, bounds checks under `PARLOOP_CHECK=1`, kernel names
//! that C++ would choke on, a damaged module cache, and kernels whose
//! locals or reductions outgrow a default stack.
//!
//! Cases that crashed or hung before run in a child process (this test
//! binary re-executed with `PARLOOP_TEST_CASE` naming the case) with a
//! timeout, so that a regression fails the test instead of killing the
//! harness.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parloop::{Access, Backend, Error, ParLoop, Runtime, Strategy};

mod support;

#[path = "support/child.rs"]
mod child;
use child::{in_child, CASE_VAR};

/// Runs `f` on a thread with a large stack (the host backends run large
/// kernels on the caller's stack).
fn big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(256 << 20).spawn(f).unwrap().join().unwrap()
}

fn emu() -> Runtime {
    Runtime::with_backend(Backend::Emu).expect("the emulated device (needs g++)")
}

fn seq() -> Runtime {
    Runtime::with_backend(Backend::Seq).unwrap()
}

/// Eager runtimes whatever `PARLOOP_LAZY` says (CI also runs the suite
/// lazy), for the tests of the error `par_loop` returns: under the lazy
/// trace it comes back at the forcing point instead (`tests/lazy.rs`).
fn eager(backend: Backend) -> Runtime {
    Runtime::with_lazy(backend, false).expect("an eager runtime")
}

/// A fresh directory for a module cache.
fn fresh_dir(name: &str) -> PathBuf {
    if std::env::var(CASE_VAR).is_ok() {
        // Children get their cache directory through the environment.
        return std::env::temp_dir();
    }
    let dir = std::env::temp_dir().join(format!("parloop-ds-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ---------------------------------------------------------------- MIN / MAX

#[parloop::kernel]
fn fold_min_max(x: &f64, lo: &mut f64, hi: &mut f64) {
    *lo = lo.min(*x);
    *hi = hi.max(*x);
}

#[parloop::kernel]
fn fold_min_max_f32(x: &f32, lo: &mut f32, hi: &mut f32) {
    *lo = lo.min(*x);
    *hi = hi.max(*x);
}

#[parloop::kernel]
fn scatter_and_min(x: &f64, a: &mut f64, b: &mut f64, lo: &mut f64, hi: &mut f64) {
    *a += *x;
    *b -= 0.5 * *x;
    *lo = lo.min(*x);
    *hi = hi.max(*x);
}

#[parloop::kernel]
fn pairwise_min_max(a: &f64, b: &f64, o: &mut [f64; 2]) {
    o[0] = a.min(*b);
    o[1] = a.max(*b);
}

/// Values with NaNs in several places (first, last, runs).
fn with_nans(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| if i == 0 || i == n - 1 || i % 37 == 5 { f64::NAN } else { (i as f64 * 0.731).sin() * 100.0 })
        .collect()
}

/// Runs `fold_min_max` over `x` from `init` on `rt`: (min, max).
fn min_max_on(rt: &Runtime, x: &[f64], init: (f64, f64)) -> (f64, f64) {
    let set = rt.set("elems", x.len()).unwrap();
    let d = rt.dat("x", &set, 1, x.to_vec()).unwrap();
    let lo = rt.global("lo", &[init.0]).unwrap();
    let hi = rt.global("hi", &[init.1]).unwrap();
    rt.par_loop(fold_min_max::KERNEL, &set, &[d.arg(Access::READ), lo.arg(Access::MIN), hi.arg(Access::MAX)]).unwrap();
    (lo.value().unwrap(), hi.value().unwrap())
}

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[test]
fn min_max_reductions_ignore_nan_as_f64_min_does() {
    let x = with_nans(5000);
    let finite_min = x.iter().copied().fold(f64::NAN, f64::min);
    let finite_max = x.iter().copied().fold(f64::NAN, f64::max);
    assert!(finite_min.is_finite() && finite_max.is_finite());
    for init in [(f64::NAN, f64::NAN), (1e300, -1e300), (-5.0, 5.0)] {
        let expected = (x.iter().copied().fold(init.0, f64::min), x.iter().copied().fold(init.1, f64::max));
        let s = min_max_on(&seq(), &x, init);
        let e = min_max_on(&emu(), &x, init);
        assert!(same(s.0, expected.0) && same(s.1, expected.1), "seq {s:?}, expected {expected:?} from {init:?}");
        assert!(same(e.0, s.0) && same(e.1, s.1), "emu {e:?}, seq {s:?} from {init:?}");
    }
    // All NaN: NaN.
    let all_nan = vec![f64::NAN; 300];
    let e = min_max_on(&emu(), &all_nan, (f64::NAN, f64::NAN));
    assert!(e.0.is_nan() && e.1.is_nan(), "{e:?}");
}

#[test]
fn f32_min_max_reductions_ignore_nan() {
    let x: Vec<f32> = with_nans(3000).iter().map(|&v| v as f32).collect();
    let run = |rt: &Runtime| {
        let set = rt.set("elems", x.len()).unwrap();
        let d = rt.dat("x", &set, 1, x.clone()).unwrap();
        let lo = rt.global("lo", &[f32::NAN]).unwrap();
        let hi = rt.global("hi", &[f32::NAN]).unwrap();
        rt.par_loop(fold_min_max_f32::KERNEL, &set, &[d.arg(Access::READ), lo.arg(Access::MIN), hi.arg(Access::MAX)])
            .unwrap();
        (lo.value().unwrap(), hi.value().unwrap())
    };
    let (s, e) = (run(&seq()), run(&emu()));
    assert!(s.0.is_finite() && s.1.is_finite(), "{s:?}");
    assert_eq!((s.0.to_bits(), s.1.to_bits()), (e.0.to_bits(), e.1.to_bits()), "seq {s:?}, emu {e:?}");
}

#[test]
fn min_max_reductions_ignore_nan_with_every_strategy() {
    let (nedges, nnodes) = (3000, 500);
    let x = with_nans(nedges);
    let map: Vec<i32> = (0..2 * nedges).map(|k| ((k * 7919 + k / 2) % nnodes) as i32).collect();
    let run = |rt: &Runtime| {
        let edges = rt.set("edges", nedges).unwrap();
        let nodes = rt.set("nodes", nnodes).unwrap();
        let pair = rt.map("pair", &edges, &nodes, 2, map.clone()).unwrap();
        let d = rt.dat("x", &edges, 1, x.clone()).unwrap();
        let r = rt.dat("r", &nodes, 1, vec![0.0f64; nnodes]).unwrap();
        let lo = rt.global("lo", &[f64::NAN]).unwrap();
        let hi = rt.global("hi", &[f64::NAN]).unwrap();
        rt.par_loop(
            scatter_and_min::KERNEL,
            &edges,
            &[
                d.arg(Access::READ),
                r.arg_via(&pair, 0, Access::INC),
                r.arg_via(&pair, 1, Access::INC),
                lo.arg(Access::MIN),
                hi.arg(Access::MAX),
            ],
        )
        .unwrap();
        (lo.value().unwrap(), hi.value().unwrap())
    };
    let s = run(&seq());
    assert!(s.0.is_finite() && s.1.is_finite(), "{s:?}");
    for strategy in [Strategy::Staged, Strategy::StagedAtomic, Strategy::Atomic, Strategy::GlobalColour] {
        let mut rt = emu();
        rt.set_strategy(Some(strategy));
        let e = run(&rt);
        assert!(same(e.0, s.0) && same(e.1, s.1), "{strategy:?}: emu {e:?}, seq {s:?}");
    }
}

#[test]
fn translated_min_and_max_of_floats_ignore_nan() {
    let pairs: Vec<(f64, f64)> =
        vec![(f64::NAN, 1.0), (2.0, f64::NAN), (f64::NAN, f64::NAN), (-3.0, 4.0), (f64::INFINITY, f64::NAN)];
    let run = |rt: &Runtime| {
        let set = rt.set("elems", pairs.len()).unwrap();
        let a = rt.dat("a", &set, 1, pairs.iter().map(|p| p.0).collect()).unwrap();
        let b = rt.dat("b", &set, 1, pairs.iter().map(|p| p.1).collect()).unwrap();
        let o = rt.dat("o", &set, 2, vec![0.0f64; 2 * pairs.len()]).unwrap();
        rt.par_loop(pairwise_min_max::KERNEL, &set, &[a.arg(Access::READ), b.arg(Access::READ), o.arg(Access::WRITE)])
            .unwrap();
        o.values().unwrap()
    };
    let (s, e) = (run(&seq()), run(&emu()));
    for (i, (x, y)) in s.iter().zip(&e).enumerate() {
        assert!(same(*x, *y), "value {i}: seq {x}, emu {y}");
    }
    assert_eq!(s[0], 1.0);
    assert_eq!(s[3], 2.0);
    assert!(s[4].is_nan() && s[5].is_nan());
}

// ---------------------------------------------------------------- INC

#[parloop::kernel]
fn assign_global(x: &f64, g: &mut f64) {
    *g = *x;
}

#[parloop::kernel]
fn scale_global(x: &f64, g: &mut f64) {
    *g *= *x;
}

#[parloop::kernel]
fn read_then_add(x: &f64, g: &mut f64) {
    let twice = *g + *x;
    *g += twice;
}

#[parloop::kernel]
fn assign_row(x: &f64, r: &mut [f64; 2]) {
    r[0] += *x;
    r[1] = *x;
}

#[parloop::kernel]
fn only_adds(x: &f64, r: &mut [f64; 2], g: &mut f64) {
    for k in 0..2 {
        r[k] += *x * (k as f64 + 1.0);
    }
    r[1] -= 0.25;
    let g2 = *x * 2.0;
    *g += g2;
}

#[test]
fn inc_on_a_parameter_the_kernel_assigns_is_rejected_on_every_backend() {
    for backend in [Backend::Seq, Backend::Threads, Backend::Emu] {
        let rt = Runtime::with_backend(backend).unwrap();
        let set = rt.set("elems", 5).unwrap();
        let nodes = rt.set("nodes", 3).unwrap();
        let map = rt.map("m", &set, &nodes, 1, vec![0, 1, 2, 0, 1]).unwrap();
        let x = rt.dat("x", &set, 1, vec![1.0f64, 2.0, 3.0, 4.0, 5.0]).unwrap();
        let r = rt.dat("r", &nodes, 2, vec![0.0f64; 6]).unwrap();
        let g = rt.global("g", &[0.0f64]).unwrap();
        for (kernel, param) in [(assign_global::KERNEL, "g"), (scale_global::KERNEL, "g"), (read_then_add::KERNEL, "g")]
        {
            let err = rt.par_loop(kernel, &set, &[x.arg(Access::READ), g.arg(Access::INC)]).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, Error::Argument { arg: 1, .. }), "{backend:?}: {err:?}");
            assert!(text.contains(kernel.name()) && text.contains(&format!("`{param}`")), "{text}");
            assert!(text.contains("INC") && text.contains("RW or WRITE"), "{text}");
        }
        let err = rt.par_loop(assign_row::KERNEL, &set, &[x.arg(Access::READ), r.arg_via(&map, 0, Access::INC)]);
        let text = err.unwrap_err().to_string();
        assert!(text.contains("assign_row") && text.contains("`r`"), "{text}");
        // Nothing ran.
        assert_eq!(g.value().unwrap(), 0.0);
        assert_eq!(r.values().unwrap(), vec![0.0; 6]);
        // The same kernel with RW (each target once) is fine.
        let three = rt.set("three", 3).unwrap();
        let once = rt.map("once", &three, &nodes, 1, vec![2, 0, 1]).unwrap();
        let x3 = rt.dat("x3", &three, 1, vec![1.0f64, 2.0, 3.0]).unwrap();
        rt.par_loop(assign_row::KERNEL, &three, &[x3.arg(Access::READ), r.arg_via(&once, 0, Access::RW)]).unwrap();
        assert_eq!(r.values().unwrap(), vec![2.0, 2.0, 3.0, 3.0, 1.0, 1.0]);
    }
}

#[parloop::device]
fn add_scaled(x: &mut f64, by: f64) {
    *x += by;
}

#[parloop::device]
fn add_twice(x: &mut f64, by: f64) {
    add_scaled(x, by);
    add_scaled(x, by);
}

#[parloop::device]
fn set_to(x: &mut f64, v: f64) {
    *x = v;
}

#[parloop::device]
fn peek(x: &f64) -> f64 {
    *x
}

/// Increments through helpers that only add (a finite-volume flux helper).
#[parloop::kernel]
fn adds_via_helpers(x: &f64, r: &mut [f64; 2], g: &mut f64) {
    add_scaled(&mut r[0], *x);
    add_twice(&mut r[1], 0.25 * *x);
    add_scaled(g, *x);
}

#[parloop::kernel]
fn assigns_via_helper(x: &f64, r: &mut [f64; 2]) {
    set_to(&mut r[0], *x);
}

#[parloop::kernel]
fn reads_via_helper(x: &f64, r: &mut [f64; 2]) {
    let v = peek(&r[1]);
    r[0] += v + *x;
}

/// 700 elements adding into 60 nodes (two values each) and a global.
struct IncCase {
    set: parloop::Set,
    map: parloop::Map,
    x: parloop::Dat<f64>,
    r: parloop::Dat<f64>,
    g: parloop::Global<f64>,
}

fn inc_case(rt: &Runtime) -> IncCase {
    let set = rt.set("elems", 700).unwrap();
    let nodes = rt.set("nodes", 60).unwrap();
    let map = rt.map("m", &set, &nodes, 1, (0..700).map(|i: i32| i * 13 % 60).collect()).unwrap();
    let x = rt.dat("x", &set, 1, (0..700).map(|i| i as f64 * 0.5).collect()).unwrap();
    let r = rt.dat("r", &nodes, 2, vec![1.0f64; 120]).unwrap();
    let g = rt.global("g", &[3.0f64]).unwrap();
    IncCase { set, map, x, r, g }
}

/// A parameter passed to a helper that only adds to it may be INC (it was
/// refused whatever the helper did); one that assigns or reads it may not.
#[test]
fn inc_through_helpers_that_only_add_matches_seq_and_others_are_refused() {
    let run = |rt: &Runtime| {
        let IncCase { set, map, x, r, g } = inc_case(rt);
        let args = [x.arg(Access::READ), r.arg_via(&map, 0, Access::INC), g.arg(Access::INC)];
        rt.par_loop(adds_via_helpers::KERNEL, &set, &args).unwrap();
        // The refusal says which use it is (it said "assigns, reads, or
        // passes to a helper that does more than add to it").
        for (kernel, what) in [
            (assigns_via_helper::KERNEL, "which the kernel passes it to `set_to`, which does more than add to it"),
            (reads_via_helper::KERNEL, "which the kernel uses it in `peek(&r[1])`"),
        ] {
            let err = rt.par_loop(kernel, &set, &args[..2]).unwrap_err().to_string();
            assert!(err.contains("INC on parameter `r`") && err.contains(what), "{}: {err}", kernel.name());
        }
        (r.values().unwrap(), g.values().unwrap())
    };
    let threads = Runtime::with_backend(Backend::Threads).unwrap();
    let (s, e, t) = (run(&seq()), run(&emu()), run(&threads));
    assert_eq!(s, e);
    assert_eq!(s, t);
    assert_eq!(s.1, vec![3.0 + (0..700).map(|i| i as f64 * 0.5).sum::<f64>()]);
    // Node n gets x of every element mapped to it, once in r[0] and half
    // of it in r[1] (0.25 twice).
    let mut want = vec![1.0f64; 120];
    for i in 0..700 {
        let n = (i * 13 % 60) as usize;
        want[2 * n] += i as f64 * 0.5;
        want[2 * n + 1] += 0.25 * (i as f64 * 0.5) + 0.25 * (i as f64 * 0.5);
    }
    let gap = s.0.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(gap < 1e-9, "{gap}");
}

#[test]
fn inc_on_increment_only_parameters_matches_seq() {
    let run = |rt: &Runtime| {
        let IncCase { set, map, x, r, g } = inc_case(rt);
        rt.par_loop(
            only_adds::KERNEL,
            &set,
            &[x.arg(Access::READ), r.arg_via(&map, 0, Access::INC), g.arg(Access::INC)],
        )
        .unwrap();
        (r.values().unwrap(), g.values().unwrap())
    };
    let (s, e) = (run(&seq()), run(&emu()));
    assert_eq!(s, e);
    assert_eq!(s.1, vec![3.0 + (0..700).map(|i| i as f64).sum::<f64>()]);
}

// ---------------------------------------------------------------- division

#[parloop::kernel]
fn divide_i32(a: &i32, b: &i32, o: &mut i32) {
    *o = *a / *b;
}

#[parloop::kernel]
fn remainder_i32(a: &i32, b: &i32, o: &mut i32) {
    *o = *a % *b;
}

#[parloop::kernel]
fn divide_i64_compound(a: &i64, b: &i64, o: &mut i64) {
    let mut q = *a;
    q /= *b;
    *o = q;
}

#[parloop::kernel]
fn remainder_i64(a: &i64, b: &i64, o: &mut i64) {
    *o = *a % *b;
}

#[parloop::kernel]
fn divide_u32(a: &u32, b: &u32, o: &mut u32) {
    *o = *a / *b;
}

/// Runs `kernel` over `a`, `b` on `rt`: the outputs or the error.
fn divide_on<T: parloop::Scalar + Copy + Default>(
    rt: &Runtime,
    kernel: &'static parloop::Kernel,
    a: &[T],
    b: &[T],
) -> Result<Vec<T>, Error> {
    let set = rt.set("elems", a.len()).unwrap();
    let da = rt.dat("a", &set, 1, a.to_vec()).unwrap();
    let db = rt.dat("b", &set, 1, b.to_vec()).unwrap();
    let o = rt.dat("o", &set, 1, vec![T::default(); a.len()]).unwrap();
    rt.par_loop(kernel, &set, &[da.arg(Access::READ), db.arg(Access::READ), o.arg(Access::WRITE)])?;
    Ok(o.values().unwrap())
}

/// The error of `kernel` on seq and emu must be the same panic, at `element`, with `message`.
fn same_panic<T: parloop::Scalar + Copy + Default + std::fmt::Debug + PartialEq>(
    kernel: &'static parloop::Kernel,
    a: &[T],
    b: &[T],
    element: usize,
    message: &str,
) {
    let s = divide_on(&eager(Backend::Seq), kernel, a, b);
    let e = divide_on(&eager(Backend::Emu), kernel, a, b);
    for (backend, r) in [("seq", &s), ("emu", &e)] {
        match r {
            Err(Error::KernelPanicked { kernel: k, element: el, message: m, .. }) => {
                assert_eq!((k.as_str(), *el, m.as_str()), (kernel.name(), element, message), "{backend}");
            }
            other => panic!("{backend}: expected a panic of `{}` at {element}, got {other:?}", kernel.name()),
        }
    }
    // The runtime goes on: the same loop without the bad element runs and agrees.
    let (mut a2, mut b2) = (a.to_vec(), b.to_vec());
    a2.remove(element);
    b2.remove(element);
    assert_eq!(divide_on(&seq(), kernel, &a2, &b2).unwrap(), divide_on(&emu(), kernel, &a2, &b2).unwrap());
}

#[test]
fn integer_division_follows_rust_instead_of_sigfpe() {
    in_child("integer_division_follows_rust_instead_of_sigfpe", "division", &[], Duration::from_secs(300), || {
        let n = 300;
        let a: Vec<i32> = (0..n).map(|i| i * 37 - 5000).collect();
        let mut b: Vec<i32> = (0..n).map(|i| (i % 11) - 5).map(|v| if v == 0 { 3 } else { v }).collect();
        // Plain values agree first.
        assert_eq!(
            divide_on(&seq(), divide_i32::KERNEL, &a, &b).unwrap(),
            divide_on(&emu(), divide_i32::KERNEL, &a, &b).unwrap()
        );
        b[211] = 0;
        same_panic(divide_i32::KERNEL, &a, &b, 211, "attempt to divide by zero");
        same_panic(remainder_i32::KERNEL, &a, &b, 211, "attempt to calculate the remainder with a divisor of zero");
        let mut a = a;
        b[211] = 3;
        a[17] = i32::MIN;
        b[17] = -1;
        same_panic(divide_i32::KERNEL, &a, &b, 17, "attempt to divide with overflow");
        same_panic(remainder_i32::KERNEL, &a, &b, 17, "attempt to calculate the remainder with overflow");
        let a64: Vec<i64> = (0..200).map(|i| if i == 150 { i64::MIN } else { i * 1_000_000_007 }).collect();
        let mut b64: Vec<i64> = (0..200).map(|i| i % 7 + 1).collect();
        b64[150] = -1;
        same_panic(divide_i64_compound::KERNEL, &a64, &b64, 150, "attempt to divide with overflow");
        same_panic(remainder_i64::KERNEL, &a64, &b64, 150, "attempt to calculate the remainder with overflow");
        let au: Vec<u32> = (0..100).map(|i| i * 3 + 1).collect();
        let mut bu: Vec<u32> = (0..100).map(|i| i % 5 + 1).collect();
        bu[99] = 0;
        same_panic(divide_u32::KERNEL, &au, &bu, 99, "attempt to divide by zero");
    });
}

// ---------------------------------------------------------------- bounds

#[parloop::kernel]
fn pick(i: &u32, x: &[f64; 4], o: &mut f64) {
    *o = x[*i as usize];
}

#[parloop::kernel]
fn pick_local(i: &u32, x: &[f64; 4], o: &mut f64) {
    let mut t = [0.0; 3];
    for k in 0..3 {
        t[k] = x[k] * 2.0;
    }
    *o = t[*i as usize];
}

#[parloop::kernel]
fn rows_in_range(i: &u32, x: &[[f64; 3]; 2], o: &mut [f64; 2]) {
    let j = *i as usize % 3;
    for r in 0..2 {
        o[r] += x[r][j] + x[1 - r][2 - j];
    }
}

fn pick_on(rt: &Runtime, kernel: &'static parloop::Kernel, idx: &[u32]) -> Result<Vec<f64>, Error> {
    let n = idx.len();
    let set = rt.set("elems", n).unwrap();
    let i = rt.dat("i", &set, 1, idx.to_vec()).unwrap();
    let x = rt.dat("x", &set, 4, (0..4 * n).map(|v| v as f64).collect()).unwrap();
    let o = rt.dat("o", &set, 1, vec![0.0f64; n]).unwrap();
    rt.par_loop(kernel, &set, &[i.arg(Access::READ), x.arg(Access::READ), o.arg(Access::WRITE)])?;
    Ok(o.values().unwrap())
}

#[test]
fn checked_builds_report_indices_out_of_bounds() {
    in_child(
        "checked_builds_report_indices_out_of_bounds",
        "bounds",
        &[("PARLOOP_CHECK", "1")],
        Duration::from_secs(300),
        || {
            let idx: Vec<u32> = (0..500).map(|k| k % 4).collect();
            assert_eq!(pick_on(&seq(), pick::KERNEL, &idx).unwrap(), pick_on(&emu(), pick::KERNEL, &idx).unwrap());
            for (kernel, len) in [(pick::KERNEL, 4u32), (pick_local::KERNEL, 3)] {
                let mut idx: Vec<u32> = (0..500).map(|k| k % len).collect();
                idx[321] = 7;
                let expected = format!("index out of bounds: the len is {len} but the index is 7");
                for (backend, rt) in [("seq", eager(Backend::Seq)), ("emu", eager(Backend::Emu))] {
                    match pick_on(&rt, kernel, &idx) {
                        Err(Error::KernelPanicked { kernel: k, element, message, .. }) => {
                            assert_eq!((k.as_str(), element, message.as_str()), (kernel.name(), 321, &*expected));
                        }
                        other => panic!("{backend}: expected an index panic, got {other:?}"),
                    }
                }
            }
            // Indices in range: no false alarm, same values as seq (2-D rows, literal and loop indices).
            let run = |rt: &Runtime| {
                let set = rt.set("elems", 400).unwrap();
                let nodes = rt.set("nodes", 50).unwrap();
                let m = rt.map("m", &set, &nodes, 2, (0..800).map(|k: i32| k * 7 % 50).collect()).unwrap();
                let i = rt.dat("i", &set, 1, (0..400u32).collect()).unwrap();
                let x = rt.dat("x", &nodes, 3, (0..150).map(|v| v as f64 * 0.25).collect()).unwrap();
                let o = rt.dat("o", &set, 2, vec![0.0f64; 800]).unwrap();
                rt.par_loop(
                    rows_in_range::KERNEL,
                    &set,
                    &[i.arg(Access::READ), x.arg_vec(&m, Access::READ), o.arg(Access::RW)],
                )
                .unwrap();
                o.values().unwrap()
            };
            assert_eq!(run(&seq()), run(&emu()));
        },
    );
}

/// Checked by default: an index out of range read garbage on the device
/// (and could write over other data) while the host panicked.
#[test]
fn device_indices_are_checked_by_default() {
    in_child(
        "device_indices_are_checked_by_default",
        "default-check",
        &[("PARLOOP_CHECK", "")],
        Duration::from_secs(300),
        || {
            let mut idx: Vec<u32> = (0..64).map(|k| k % 4).collect();
            idx[33] = 9;
            for backend in [Backend::Seq, Backend::Emu] {
                match pick_on(&eager(backend), pick::KERNEL, &idx) {
                    Err(Error::KernelPanicked { element, message, .. }) => {
                        assert_eq!(
                            (element, message.as_str()),
                            (33, "index out of bounds: the len is 4 but the index is 9")
                        );
                    }
                    other => panic!("{backend:?}: expected an index panic, got {other:?}"),
                }
            }
        },
    );
}

#[test]
fn parloop_check_accepts_only_0_and_1() {
    in_child(
        "parloop_check_accepts_only_0_and_1",
        "check-env",
        &[("PARLOOP_CHECK", "yes")],
        Duration::from_secs(60),
        || match Runtime::with_backend(Backend::Emu) {
            Err(Error::Env { var: "PARLOOP_CHECK", value, .. }) => assert_eq!(value, "yes"),
            other => panic!("expected an Env error, got {other:?}"),
        },
    );
}

#[test]
fn checked_and_unchecked_builds_are_different_cached_modules() {
    let dir = fresh_dir("check-cache");
    let cache = dir.to_str().unwrap();
    let test = "checked_and_unchecked_builds_are_different_cached_modules";
    let body = || {
        let idx: Vec<u32> = (0..100).map(|k| k % 4).collect();
        assert_eq!(pick_on(&emu(), pick::KERNEL, &idx).unwrap(), pick_on(&seq(), pick::KERNEL, &idx).unwrap());
    };
    in_child(
        test,
        "unchecked",
        &[("PARLOOP_CACHE_DIR", cache), ("PARLOOP_CHECK", "0")],
        Duration::from_secs(120),
        body,
    );
    let unchecked = if parent() { modules(&dir) } else { Vec::new() };
    in_child(test, "checked", &[("PARLOOP_CACHE_DIR", cache), ("PARLOOP_CHECK", "1")], Duration::from_secs(120), body);
    if !parent() {
        return;
    }
    let all = modules(&dir);
    assert_eq!(unchecked.len(), 1, "{unchecked:?}");
    assert_eq!(all.len(), 2, "{all:?}");
    let checked: Vec<&PathBuf> = all.iter().filter(|p| !unchecked.contains(p)).collect();
    let source = std::fs::read_to_string(checked[0].with_extension("cpp")).unwrap();
    assert!(source.contains("#define PARLOOP_CHECK 1"));
    let source = std::fs::read_to_string(unchecked[0].with_extension("cpp")).unwrap();
    assert!(!source.contains("#define PARLOOP_CHECK 1"));
}

/// The compiled modules in a cache directory.
fn modules(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("emu"))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|x| x == "so"));
    v.sort();
    v
}

// ---------------------------------------------------------------- names

/// Kernels whose names C++ or the generated code would choke on.
#[allow(non_snake_case)]
mod awkward {
    #[parloop::kernel]
    pub fn main(x: &f64, y: &mut f64) {
        *y = *x + 1.0;
    }

    #[parloop::kernel]
    pub fn int(x: &f64, y: &mut f64) {
        *y = *x * 2.0;
    }

    #[parloop::kernel]
    pub fn sqrt(x: &f64, y: &mut f64) {
        *y = x.sqrt() + 3.0;
    }

    #[parloop::kernel]
    pub fn pl_emu_launch(x: &f64, y: &mut f64) {
        *y = *x - 4.0;
    }

    #[parloop::kernel]
    pub fn __pl_div(x: &f64, y: &mut f64) {
        *y = *x / 5.0;
    }

    #[parloop::kernel]
    pub fn atomicAdd(x: &f64, y: &mut f64) {
        *y = *x * 6.0;
    }

    #[parloop::kernel]
    pub fn PL_ENTRY(x: &f64, y: &mut f64) {
        *y = *x * 7.0;
    }

    #[parloop::kernel]
    pub fn template(x: &f64, y: &mut f64) {
        let pl_v0 = *x;
        let __x = pl_v0 * 8.0;
        let NAN = __x;
        *y = NAN;
    }

    #[parloop::kernel]
    pub fn a_kernel_name_that_is_much_longer_than_any_file_system_would_accept_as_a_file_name_because_it_goes_on_and_on_and_on_past_two_hundred_and_fifty_five_bytes_which_is_the_limit_of_a_single_path_component_on_linux_file_systems_like_ext4_and_xfs_xxxxxxxxxxxxxxxx(
        x: &f64,
        y: &mut f64,
    ) {
        *y = *x * 9.0;
    }

    #[parloop::kernel]
    pub fn a_kernel_name_that_is_much_longer_than_any_file_system_would_accept_as_a_file_name_because_it_goes_on_and_on_and_on_past_two_hundred_and_fifty_five_bytes_which_is_the_limit_of_a_single_path_component_on_linux_file_systems_like_ext4_and_xfs_yyyyyyyyyyyyyyyy(
        x: &f64,
        y: &mut f64,
    ) {
        *y = *x * 10.0;
    }
}

#[test]
fn kernel_names_that_break_cpp_run_on_the_device() {
    let kernels = [
        awkward::main::KERNEL,
        awkward::int::KERNEL,
        awkward::sqrt::KERNEL,
        awkward::pl_emu_launch::KERNEL,
        awkward::__pl_div::KERNEL,
        awkward::atomicAdd::KERNEL,
        awkward::PL_ENTRY::KERNEL,
        awkward::template::KERNEL,
        awkward::a_kernel_name_that_is_much_longer_than_any_file_system_would_accept_as_a_file_name_because_it_goes_on_and_on_and_on_past_two_hundred_and_fifty_five_bytes_which_is_the_limit_of_a_single_path_component_on_linux_file_systems_like_ext4_and_xfs_xxxxxxxxxxxxxxxx::KERNEL,
        awkward::a_kernel_name_that_is_much_longer_than_any_file_system_would_accept_as_a_file_name_because_it_goes_on_and_on_and_on_past_two_hundred_and_fifty_five_bytes_which_is_the_limit_of_a_single_path_component_on_linux_file_systems_like_ext4_and_xfs_yyyyyyyyyyyyyyyy::KERNEL,
    ];
    assert!(kernels[8].name().len() > 255);
    let run = |rt: &Runtime, kernel: &'static parloop::Kernel| {
        let set = rt.set("elems", 300).unwrap();
        let x = rt.dat("x", &set, 1, (0..300).map(|v| v as f64).collect()).unwrap();
        let y = rt.dat("y", &set, 1, vec![0.0f64; 300]).unwrap();
        rt.par_loop(kernel, &set, &[x.arg(Access::READ), y.arg(Access::WRITE)])
            .unwrap_or_else(|e| panic!("`{}`: {e}", kernel.name()));
        y.values().unwrap()
    };
    let (s, e) = (seq(), emu());
    let mut results = Vec::new();
    for k in kernels {
        let r = run(&s, k);
        assert_eq!(r, run(&e, k), "`{}`", k.name());
        results.push(r);
    }
    // Every kernel ran its own code (the two long names share a prefix).
    for i in 0..results.len() {
        for j in 0..i {
            assert_ne!(results[i], results[j], "`{}` and `{}`", kernels[i].name(), kernels[j].name());
        }
    }
}

// ---------------------------------------------------------------- module cache

#[parloop::kernel]
fn cache_probe(x: &f64, y: &mut f64) {
    *y = *x * 1.5 + 0.25;
}

#[test]
fn a_truncated_cache_entry_is_rebuilt() {
    let dir = fresh_dir("truncated");
    let cache = dir.to_str().unwrap();
    let test = "a_truncated_cache_entry_is_rebuilt";
    let body = || {
        let run = |rt: &Runtime| {
            let set = rt.set("elems", 1000).unwrap();
            let x = rt.dat("x", &set, 1, (0..1000).map(|v| v as f64).collect()).unwrap();
            let y = rt.dat("y", &set, 1, vec![0.0f64; 1000]).unwrap();
            rt.par_loop(cache_probe::KERNEL, &set, &[x.arg(Access::READ), y.arg(Access::WRITE)]).unwrap();
            y.values().unwrap()
        };
        assert_eq!(run(&emu()), run(&seq()));
    };
    let env = [("PARLOOP_CACHE_DIR", cache)];
    in_child(test, "populate", &env, Duration::from_secs(120), body);
    let so = if parent() { modules(&dir) } else { Vec::new() };
    let len = if parent() {
        assert_eq!(so.len(), 1, "{so:?}");
        let len = std::fs::metadata(&so[0]).unwrap().len();
        let file = std::fs::OpenOptions::new().write(true).open(&so[0]).unwrap();
        file.set_len(len / 3).unwrap();
        len
    } else {
        0
    };
    in_child(test, "after-truncation", &env, Duration::from_secs(120), body);
    if parent() {
        assert_eq!(std::fs::metadata(&so[0]).unwrap().len(), len, "the entry was rebuilt");
        // Garbage of the right size is caught by the hash.
        std::fs::write(&so[0], vec![0u8; len as usize]).unwrap();
    }
    in_child(test, "after-corruption", &env, Duration::from_secs(120), body);
    if parent() {
        assert_ne!(std::fs::read(&so[0]).unwrap(), vec![0u8; len as usize], "the entry was rebuilt");
    }
}

/// Whether this process is the test harness's (not a case's child).
fn parent() -> bool {
    std::env::var(CASE_VAR).is_err()
}

// ---------------------------------------------------------------- stacks

#[parloop::kernel]
fn wide_inc(x: &f64, g: &mut [f64; 65536]) {
    for k in 0..65536 {
        g[k] += *x * (k % 7) as f64;
    }
}

#[parloop::kernel]
fn big_local_array(x: &f64, o: &mut f64) {
    let mut a = [0.0f64; 200000];
    for k in 0..200000 {
        a[k] = *x + (k % 13) as f64;
    }
    let mut s = 0.0;
    for k in 0..200000 {
        s += a[199999 - k];
    }
    *o = s;
}

#[parloop::kernel]
fn huge_local_array(x: &f64, o: &mut f64) {
    let mut a = [0.0f64; 12_500_000];
    a[12_499_999] = *x;
    *o = a[12_499_999];
}

#[parloop::kernel]
fn inc_4000(x: &f64, g: &mut [f64; 4000]) {
    for k in 0..4000 {
        g[k] += *x * (k % 7) as f64;
    }
}

#[test]
fn a_global_inc_of_65536_values_is_refused_on_emu_instead_of_hanging() {
    in_child(
        "a_global_inc_of_65536_values_is_refused_on_emu_instead_of_hanging",
        "wide-inc",
        &[],
        Duration::from_secs(300),
        || {
            let rt = emu();
            let set = rt.set("elems", 5).unwrap();
            let x = rt.dat("x", &set, 1, vec![1.0f64, 2.0, 3.0, 4.0, 5.0]).unwrap();
            let g = rt.global("g", &vec![1.0f64; 65536]).unwrap();
            let err = rt.par_loop(wide_inc::KERNEL, &set, &[x.arg(Access::READ), g.arg(Access::INC)]).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("wide_inc") && text.contains("limit"), "{text}");
            assert_eq!(g.values().unwrap(), vec![1.0; 65536]);
            // Below the limit: runs, as on seq.
            let run = |rt: Runtime| {
                let set = rt.set("elems", 300).unwrap();
                let x = rt.dat("x", &set, 1, (0..300).map(|v| v as f64).collect()).unwrap();
                let g = rt.global("g", &vec![1.0f64; 4000]).unwrap();
                rt.par_loop(inc_4000::KERNEL, &set, &[x.arg(Access::READ), g.arg(Access::INC)]).unwrap();
                g.values().unwrap()
            };
            let s = big_stack(move || run(seq()));
            assert_eq!(s, run(emu()));
            assert_eq!(s[6], 1.0 + (0..300).sum::<i32>() as f64 * 6.0);
        },
    );
}

#[test]
fn a_kernel_with_a_large_local_array_runs_on_emu_and_a_huge_one_is_refused() {
    in_child(
        "a_kernel_with_a_large_local_array_runs_on_emu_and_a_huge_one_is_refused",
        "big-local",
        &[],
        Duration::from_secs(300),
        || {
            let run = |rt: Runtime| {
                let set = rt.set("elems", 6).unwrap();
                let x = rt.dat("x", &set, 1, vec![0.5f64, 1.0, 1.5, 2.0, 2.5, 3.0]).unwrap();
                let o = rt.dat("o", &set, 1, vec![0.0f64; 6]).unwrap();
                rt.par_loop(big_local_array::KERNEL, &set, &[x.arg(Access::READ), o.arg(Access::WRITE)]).unwrap();
                o.values().unwrap()
            };
            let s = big_stack(move || run(seq()));
            assert_eq!(s, run(emu()));
            // 100 MB of locals per thread: refused with the limit, before anything runs.
            let rt = emu();
            let set = rt.set("elems", 2).unwrap();
            let x = rt.dat("x", &set, 1, vec![1.0f64, 2.0]).unwrap();
            let o = rt.dat("o", &set, 1, vec![0.0f64; 2]).unwrap();
            let err =
                rt.par_loop(huge_local_array::KERNEL, &set, &[x.arg(Access::READ), o.arg(Access::WRITE)]).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("huge_local_array") && text.contains("67108864"), "{text}");
            assert_eq!(o.values().unwrap(), vec![0.0, 0.0]);
        },
    );
}

// ---------------------------------------------------------------- NVRTC

#[test]
fn device_sources_with_panic_reports_and_checks_compile_with_nvrtc() {
    if !support::nvrtc_available() {
        return;
    }
    let rt = seq();
    let edges = rt.set("edges", 40).unwrap();
    let nodes = rt.set("nodes", 12).unwrap();
    let pair = rt.map("pair", &edges, &nodes, 2, (0..80).map(|k: i32| k * 5 % 12).collect()).unwrap();
    let a = rt.dat("a", &edges, 1, vec![1i32; 40]).unwrap();
    let b = rt.dat("b", &edges, 1, vec![2i32; 40]).unwrap();
    let o = rt.dat("o", &edges, 1, vec![0i32; 40]).unwrap();
    let i = rt.dat("i", &edges, 1, vec![0u32; 40]).unwrap();
    let x4 = rt.dat("x4", &edges, 4, vec![0.0f64; 160]).unwrap();
    let y = rt.dat("y", &edges, 1, vec![0.0f64; 40]).unwrap();
    let x = rt.dat("x", &edges, 1, vec![0.0f64; 40]).unwrap();
    let r = rt.dat("r", &nodes, 1, vec![0.0f64; 12]).unwrap();
    let lo = rt.global("lo", &[0.0f64]).unwrap();
    let hi = rt.global("hi", &[0.0f64]).unwrap();
    let sc = rt.dat("sc", &edges, 1, vec![0.5f32; 40]).unwrap();
    let loops = [
        ParLoop::new(
            positive_or_report::KERNEL,
            &edges,
            &[x.arg(Access::READ), a.arg(Access::READ), sc.arg(Access::READ), y.arg(Access::WRITE)],
        ),
        ParLoop::new(divide_i32::KERNEL, &edges, &[a.arg(Access::READ), b.arg(Access::READ), o.arg(Access::WRITE)]),
        ParLoop::new(pick::KERNEL, &edges, &[i.arg(Access::READ), x4.arg(Access::READ), y.arg(Access::WRITE)]),
        ParLoop::new(awkward::main::KERNEL, &edges, &[x.arg(Access::READ), y.arg(Access::WRITE)]),
        ParLoop::new(
            scatter_and_min::KERNEL,
            &edges,
            &[
                x.arg(Access::READ),
                r.arg_via(&pair, 0, Access::INC),
                r.arg_via(&pair, 1, Access::INC),
                lo.arg(Access::MIN),
                hi.arg(Access::MAX),
            ],
        ),
    ];
    for lp in loops {
        let lp = lp.unwrap();
        for strategy in [Strategy::Staged, Strategy::StagedAtomic, Strategy::Atomic, Strategy::GlobalColour] {
            let source = rt.cuda_loop_source(&lp, strategy).unwrap();
            let name = format!("{}/{}", lp.kernel().name(), strategy.name());
            support::nvrtc_compile(&name, &source).unwrap();
            support::nvrtc_compile(&name, &format!("#define PARLOOP_CHECK 1\n{source}")).unwrap();
        }
    }
}

/// A message formatting the element's values, captured and positional,
/// with specs: Rust formats it on the host; the device record carries the
/// values and the runtime renders the same text.
#[parloop::kernel]
fn positive_or_report(rho: &f64, cell: &i32, scale: &f32, out: &mut f64) {
    let c = *cell;
    let twice = 2 * c;
    assert!(*rho > 0.0, "density {} at cell {c} ({twice:>5}) not positive: {0:+.3e}, scale {:?}", *rho, *scale);
    if *rho > 1e6 {
        let big = *rho >= 1e7;
        panic!("cell {c:#06x}: too dense ({:.1}), way too: {big}", *rho);
    }
    *out = rho.sqrt();
}

/// A reference parameter captured by name formats as its value.
#[parloop::kernel]
fn positive_by_reference(rho: &f64, v: &[f64; 2], out: &mut f64) {
    assert!(*rho > 0.0, "rho {rho} first {}", v[1]);
    *out = *rho;
}

#[test]
fn formatted_panic_messages_are_rusts_on_every_backend() {
    for backend in [Backend::Seq, Backend::Emu] {
        let rt = eager(backend);
        let set = rt.set("s", 4).unwrap();
        let rho = rt.dat("rho", &set, 1, vec![1.0, -1.0, 2.0, 3.0]).unwrap();
        let v = rt.dat("v", &set, 2, vec![0.5, 0.25, 0.5, -0.125, 1.0, 1.0, 1.0, 1.0]).unwrap();
        let out = rt.dat("out", &set, 1, vec![0.0; 4]).unwrap();
        let args = [rho.arg(Access::READ), v.arg(Access::READ), out.arg(Access::WRITE)];
        match rt.par_loop(positive_by_reference::KERNEL, &set, &args) {
            Err(Error::KernelPanicked { element: 1, message, .. }) => {
                assert_eq!(message, "rho -1 first -0.125", "{backend:?}")
            }
            other => panic!("{backend:?}: {other:?}"),
        }
    }
    for (bad, expected) in [
        (-2.5, "density -2.5 at cell 37 (   74) not positive: -2.500e0, scale 0.5"),
        (0.0, "density 0 at cell 37 (   74) not positive: +0.000e0, scale 0.5"),
        (3e7, "cell 0x0025: too dense (30000000.0), way too: true"),
    ] {
        for backend in [Backend::Seq, Backend::Threads, Backend::Emu] {
            let rt = eager(backend);
            let n = 64;
            let set = rt.set("cells", n).unwrap();
            let mut rho: Vec<f64> = (0..n).map(|i| 1.0 + i as f64).collect();
            rho[37] = bad;
            let rho = rt.dat("rho", &set, 1, rho).unwrap();
            let cell = rt.dat("cell", &set, 1, (0..n as i32).collect()).unwrap();
            let scale = rt.dat("scale", &set, 1, vec![0.5f32; n]).unwrap();
            let out = rt.dat("out", &set, 1, vec![0.0; n]).unwrap();
            let args = [rho.arg(Access::READ), cell.arg(Access::READ), scale.arg(Access::READ), out.arg(Access::WRITE)];
            match rt.par_loop(positive_or_report::KERNEL, &set, &args) {
                Err(Error::KernelPanicked { element: 37, message, .. }) => assert_eq!(message, expected, "{backend:?}"),
                other => panic!("{backend:?}: {other:?}"),
            }
        }
    }
}

#[parloop::kernel]
fn add_one(y: &mut f64) {
    *y += 1.0;
}

/// Two device runtimes (each with a device of its own) running loops on
/// one dat from two threads: the copy one device held was freed, or read
/// back, while the other thread's kernel used it (a segfault). Now a loop
/// that would take the copy from a device at work is an error, and every
/// loop that ran counted: nothing lost, nothing torn.
#[test]
fn two_device_runtimes_sharing_a_dat_across_threads_never_race() {
    let runtimes = [Arc::new(eager(Backend::Emu)), Arc::new(eager(Backend::Emu))];
    let n = runtimes[0].set("n", 4096).unwrap();
    let x = runtimes[0].dat("x", &n, 1, vec![0.0; 4096]).unwrap();
    let threads: Vec<_> = runtimes
        .iter()
        .map(|rt| {
            let (rt, n, x) = (rt.clone(), n.clone(), x.clone());
            std::thread::spawn(move || {
                let mut ran = 0;
                for _ in 0..60 {
                    match rt.par_loop(add_one::KERNEL, &n, &[x.arg(Access::RW)]) {
                        Ok(()) => ran += 1,
                        Err(Error::Busy { .. } | Error::Backend { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
                ran
            })
        })
        .collect();
    let ran: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(ran > 0);
    let values = x.values().unwrap();
    assert!(values.iter().all(|&v| v == ran as f64), "{ran} loops ran, x[0] = {}", values[0]);
}
