//! The scalar methods, the float constants, `match` and tuples of the
//! kernel subset against Rust: the translation compiled by the host C++ compiler
//! on random inputs (the same C library as Rust's, so bitwise), the device
//! backend against `seq` where the arithmetic is exact (`clamp`, `pow`,
//! `match`, constants, tuples), Rust's panics for `clamp`'s bounds on every backend,
//! and NVRTC accepting every translation. The lane-wise twin (threads) is
//! compared with `seq` too: it now has a form for every float method and
//! for `match`.

mod support;

#[path = "support/device.rs"]
mod device;
#[path = "support/vals.rs"]
mod vals;

use device::device_backend;
use parloop::{Backend, Kernel};
use support::{differential, nvrtc_available, nvrtc_check, Compare, Floats, Ints, Spec};
use vals::{check, run_on, Vals};

fn diff(kernel: &'static Kernel, floats: Floats, ints: Ints, compare: Compare) {
    let spec = Spec { kernel, floats, ints, compare };
    differential(&spec, 2000, 0x0DDB_A11C_AFE5_EED1 ^ kernel.name().len() as u64);
}

// ---------------------------------------------------------------------------
// Float methods.
// ---------------------------------------------------------------------------

#[parloop::kernel]
fn float_methods_f64(x: &f64, y: &f64, o: &mut [f64; 16]) {
    o[0] = x.asin() + x.acos() * 0.5;
    o[1] = x.sinh() - x.cosh() * 0.5 + x.tanh();
    o[2] = x.asinh();
    o[3] = x.acosh();
    o[4] = (*x * 0.5).atanh();
    o[5] = x.exp2() - x.exp_m1();
    o[6] = x.log2() + x.ln_1p();
    o[7] = x.trunc() * 3.0 + x.fract();
    o[8] = x.recip();
    o[9] = x.to_radians() + y.to_degrees();
    o[10] = x.copysign(*y);
    o[11] = x.log(*y);
    o[12] = x.rem_euclid(*y);
    o[13] = x.div_euclid(*y);
    o[14] = x.clamp(-1.5, 2.5) + f64::clamp(*y, -0.25, 0.0);
    let finite = if x.is_finite() { 1.0 } else { 0.0 };
    let infinite = if x.is_infinite() { 2.0 } else { 0.0 };
    let negative = if x.is_sign_negative() { 4.0 } else { 0.0 };
    let positive = if y.is_sign_positive() { 8.0 } else { 0.0 };
    let nan = if y.is_nan() { 16.0 } else { 0.0 };
    o[15] = finite + infinite + negative + positive + nan;
}

#[parloop::kernel]
fn float_methods_f32(x: &f32, y: &f32, o: &mut [f32; 16]) {
    o[0] = x.asin() + x.acos() * 0.5;
    o[1] = x.sinh() - x.cosh() * 0.5 + x.tanh();
    o[2] = x.asinh();
    o[3] = x.acosh();
    o[4] = (*x * 0.5).atanh();
    o[5] = x.exp2() - x.exp_m1();
    o[6] = x.log2() + x.ln_1p();
    o[7] = x.trunc() * 3.0 + x.fract();
    o[8] = x.recip();
    o[9] = x.to_radians() + y.to_degrees();
    o[10] = x.copysign(*y);
    o[11] = x.log(*y);
    o[12] = x.rem_euclid(*y);
    o[13] = x.div_euclid(*y);
    o[14] = x.clamp(-1.5, 2.5) + f32::clamp(*y, -0.25, 0.0);
    let finite = if x.is_finite() { 1.0 } else { 0.0 };
    let infinite = if x.is_infinite() { 2.0 } else { 0.0 };
    let negative = if x.is_sign_negative() { 4.0 } else { 0.0 };
    let positive = if y.is_sign_positive() { 8.0 } else { 0.0 };
    let nan = if y.is_nan() { 16.0 } else { 0.0 };
    o[15] = finite + infinite + negative + positive + nan;
}

/// Rust's `cbrt` is correctly rounded (its own, not the C library's, which
/// differs by up to 3 ulp here): the translation corrects C's result.
#[parloop::kernel]
fn cube_roots(x: &f64, y: &f32, o: &mut f64, p: &mut f32) {
    *o = x.cbrt();
    *p = y.cbrt();
}

#[test]
fn cube_roots_are_correctly_rounded() {
    diff(cube_roots::KERNEL, Floats::WithNan, Ints::Small, Compare::Exact);
    diff(cube_roots::KERNEL, Floats::Small, Ints::Small, Compare::Exact);
}

#[test]
fn float_methods_match_rust_on_random_values() {
    for (floats, kernel) in [
        (Floats::WithNan, float_methods_f64::KERNEL),
        (Floats::Small, float_methods_f64::KERNEL),
        (Floats::WithNan, float_methods_f32::KERNEL),
        (Floats::Small, float_methods_f32::KERNEL),
    ] {
        diff(kernel, floats, Ints::Small, Compare::Exact);
    }
}

#[parloop::kernel]
fn min_max_zeros(x: &[f64; 2], y: &[f32; 2], o: &mut [f64; 2], p: &mut [f32; 2]) {
    o[0] = x[0].min(x[1]);
    o[1] = x[0].max(x[1]);
    p[0] = f32::min(y[0], y[1]);
    p[1] = y[0].max(y[1]);
}

/// Of +0 and -0 from data, Rust's `min`/`max` return the receiver (C's
/// `fmin`, as g++ inlined it, returned the other). Rust leaves the choice
/// open (with a literal operand its optimiser picks otherwise, so
/// `tests/differential.rs` compares zeros as equal): this checks the
/// common case, backends against the same compiled Rust.
#[test]
fn min_and_max_of_zeros_and_nan_as_rust() {
    let pairs = [(0.0, -0.0), (-0.0, 0.0), (f64::NAN, -0.0), (1.0, f64::NAN), (2.0, 2.0), (-1.0, 3.0)];
    let x: Vec<f64> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
    let y: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let n = pairs.len();
    let (mut o, mut p) = (vec![0.0; 2 * n], vec![0.0f32; 2 * n]);
    for e in 0..n {
        min_max_zeros(
            x[2 * e..2 * e + 2].try_into().unwrap(),
            y[2 * e..2 * e + 2].try_into().unwrap(),
            (&mut o[2 * e..2 * e + 2]).try_into().unwrap(),
            (&mut p[2 * e..2 * e + 2]).try_into().unwrap(),
        );
    }
    let inputs = [Vals::F64(x.clone()), Vals::F32(y.clone()), Vals::F64(vec![0.0; 2 * n]), Vals::F32(vec![0.0; 2 * n])];
    check(min_max_zeros::KERNEL, n, &inputs, &[Vals::F64(x), Vals::F32(y), Vals::F64(o), Vals::F32(p)]);
    let threads = run_on(Backend::Threads, min_max_zeros::KERNEL, n, &inputs).unwrap();
    let seq = run_on(Backend::Seq, min_max_zeros::KERNEL, n, &inputs).unwrap();
    assert_eq!((threads[2].bits(), threads[3].bits()), (seq[2].bits(), seq[3].bits()));
}

#[parloop::kernel]
fn signums(x: &f64, y: &f32, o: &mut f64, p: &mut f32) {
    *o = x.signum();
    *p = y.signum();
}

/// `signum` of any NaN (negative, signalling, with a payload) is Rust's
/// `NAN`, `0x7ff8000000000000` (`0x7fc00000`), on every backend, bitwise.
#[test]
fn signum_of_nan_is_rusts_nan() {
    let x = vec![
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001),
        f64::from_bits(0xfff8_0000_0000_1234),
        0.0,
        -0.0,
        2.5,
        -3.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    let y: Vec<f32> = vec![
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xffc0_1234),
        0.0,
        -0.0,
        2.5,
        -3.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    let n = x.len();
    let o: Vec<f64> = x.iter().map(|v| v.signum()).collect();
    let p: Vec<f32> = y.iter().map(|v| v.signum()).collect();
    assert_eq!(o[1].to_bits(), 0x7ff8_0000_0000_0000);
    assert_eq!(p[1].to_bits(), 0x7fc0_0000);
    let inputs = [Vals::F64(x.clone()), Vals::F32(y.clone()), Vals::F64(vec![0.0; n]), Vals::F32(vec![0.0; n])];
    check(signums::KERNEL, n, &inputs, &[Vals::F64(x), Vals::F32(y), Vals::F64(o), Vals::F32(p)]);
    let threads = run_on(Backend::Threads, signums::KERNEL, n, &inputs).unwrap();
    let seq = run_on(Backend::Seq, signums::KERNEL, n, &inputs).unwrap();
    assert_eq!((threads[2].bits(), threads[3].bits()), (seq[2].bits(), seq[3].bits()));
}

/// Only floats that vary by element and methods with a lane-wise form:
/// the threads backend runs the twin.
#[parloop::kernel]
fn lane_methods(x: &[f64; 2], o: &mut [f64; 4]) {
    o[0] = x[0].asinh() + x[1].cbrt() * x[0].tanh();
    o[1] = x[0].rem_euclid(1.5) + x[1].copysign(x[0]) + x[0].log(3.0);
    o[2] = x[1].clamp(-0.5, 0.5) + x[0].to_degrees().fract();
    o[3] = x[0].recip().exp_m1() + x[1].trunc();
}

#[test]
fn the_lane_wise_twin_has_every_float_method() {
    assert!(lane_methods::KERNEL.has_lanes(), "lane_methods runs scalar");
    let n = 301;
    let x: Vec<f64> = (0..2 * n).map(|i| ((i * 37 % 101) as f64 - 50.0) * 0.173).collect();
    let want =
        run_on(Backend::Seq, lane_methods::KERNEL, n, &[Vals::F64(x.clone()), Vals::F64(vec![0.0; 4 * n])]).unwrap();
    let got = run_on(Backend::Threads, lane_methods::KERNEL, n, &[Vals::F64(x), Vals::F64(vec![0.0; 4 * n])]).unwrap();
    assert_eq!(got[1].bits(), want[1].bits(), "threads (lanes) vs seq");
}

// ---------------------------------------------------------------------------
// Float constants and `clamp`'s panics.
// ---------------------------------------------------------------------------

#[parloop::device]
const LIMITS: [f64; 3] = [f64::INFINITY, f64::NEG_INFINITY, f64::NAN];

#[parloop::kernel]
fn float_constants(x: &f64, y: &f32, o: &mut [f64; 6], p: &mut [f32; 3]) {
    o[0] = if *x > 0.0 { f64::INFINITY } else { f64::NEG_INFINITY };
    o[1] = f64::NAN;
    o[2] = x.min(LIMITS[0]) + x.max(LIMITS[1]);
    o[3] = LIMITS[2];
    o[4] = if x.is_finite() { x.clamp(f64::NEG_INFINITY, 0.0) } else { f64::MIN_POSITIVE };
    o[5] = f64::INFINITY - f64::MAX;
    p[0] = if *y < 0.0 { f32::INFINITY } else { f32::NEG_INFINITY };
    p[1] = f32::NAN;
    p[2] = y.clamp(f32::NEG_INFINITY, 1.0);
}

#[test]
fn infinities_and_nan_are_rusts_bits() {
    let x = vec![1.0, -2.0, f64::INFINITY, 0.0];
    let y = vec![-1.0f32, 2.0, f32::NAN, -0.0];
    let mut o = vec![0.0; 24];
    let mut p = vec![0.0f32; 12];
    for e in 0..4 {
        let (oe, pe) = (&mut o[6 * e..6 * e + 6], &mut p[3 * e..3 * e + 3]);
        float_constants(&x[e], &y[e], oe.try_into().unwrap(), pe.try_into().unwrap());
    }
    check(
        float_constants::KERNEL,
        4,
        &[Vals::F64(x), Vals::F32(y), Vals::F64(vec![0.0; 24]), Vals::F32(vec![0.0; 12])],
        &[
            Vals::F64(vec![1.0, -2.0, f64::INFINITY, 0.0]),
            Vals::F32(vec![-1.0, 2.0, f32::NAN, -0.0]),
            Vals::F64(o),
            Vals::F32(p),
        ],
    );
}

#[parloop::kernel]
fn clamp_by_data(x: &f64, lo: &f64, hi: &f64, k: &i64, a: &i64, b: &i64, o: &mut f64, m: &mut i64) {
    *o = x.clamp(*lo, *hi);
    *m = (*k).clamp(*a, *b);
}

#[parloop::kernel]
fn clamp_f32_unsigned(x: &f32, lo: &f32, k: &u64, b: &u64, o: &mut f32, m: &mut u64) {
    *o = x.clamp(*lo, 1.0);
    *m = (*k).clamp(3, *b);
}

#[test]
fn clamp_panics_as_rust_does_on_every_backend() {
    // Good bounds: the values agree everywhere.
    let inputs = |lo: f64, a: i64| {
        vec![
            Vals::F64(vec![0.5, -3.0, f64::NAN]),
            Vals::F64(vec![-1.0, -1.0, lo]),
            Vals::F64(vec![1.0, 1.0, 1.0]),
            Vals::I64(vec![5, -9, 0]),
            Vals::I64(vec![-4, -4, a]),
            Vals::I64(vec![4, 4, 4]),
            Vals::F64(vec![0.0; 3]),
            Vals::I64(vec![0; 3]),
        ]
    };
    let good = run_on(Backend::Seq, clamp_by_data::KERNEL, 3, &inputs(-1.0, -4)).unwrap();
    assert_eq!(good[6].bits(), Vals::F64(vec![0.5, -1.0, f64::NAN]).bits());
    assert_eq!(good[7], Vals::I64(vec![4, -4, 0]));
    let dev = run_on(device_backend(), clamp_by_data::KERNEL, 3, &inputs(-1.0, -4)).unwrap();
    assert_eq!(dev[6].bits(), good[6].bits());
    assert_eq!(dev[7], good[7]);
    // Element 2's bounds: a NaN float bound, then inverted integer bounds.
    for (lo, a, message) in [
        (f64::NAN, -4, "min > max, or either was NaN. min = NaN, max = 1.0"),
        (2.5, -4, "min > max, or either was NaN. min = 2.5, max = 1.0"),
        (-1.0, 7, "min > max. min = 7, max = 4"),
    ] {
        for b in [Backend::Seq, Backend::Threads, device_backend()] {
            let e = run_on(b, clamp_by_data::KERNEL, 3, &inputs(lo, a)).expect_err("bad bounds panic");
            assert!(e.contains(message) && e.contains("element 2"), "{b:?}: {e}");
        }
    }
    let f32_inputs = |lo: f32, b: u64| {
        vec![
            Vals::F32(vec![0.5, 3.0]),
            Vals::F32(vec![0.0, lo]),
            Vals::U64(vec![1, 10]),
            Vals::U64(vec![u64::MAX, b]),
            Vals::F32(vec![0.0; 2]),
            Vals::U64(vec![0; 2]),
        ]
    };
    let good = run_on(device_backend(), clamp_f32_unsigned::KERNEL, 2, &f32_inputs(0.1, 5)).unwrap();
    assert_eq!(good[4], Vals::F32(vec![0.5, 1.0]));
    assert_eq!(good[5], Vals::U64(vec![3, 5]));
    for (lo, b, message) in
        [(1.1f32, 5, "min > max, or either was NaN. min = 1.1, max = 1.0"), (0.1, 2, "min > max. min = 3, max = 2")]
    {
        for backend in [Backend::Seq, device_backend()] {
            let e = run_on(backend, clamp_f32_unsigned::KERNEL, 2, &f32_inputs(lo, b)).expect_err("bad bounds");
            assert!(e.contains(message) && e.contains("element 1"), "{backend:?}: {e}");
        }
    }
}

// ---------------------------------------------------------------------------
// Integer methods.
// ---------------------------------------------------------------------------

#[parloop::kernel]
fn int_methods(a: &i32, b: &i64, u: &u32, w: &u64, o: &mut [i64; 8], q: &mut [u64; 2]) {
    o[0] = a.pow(3) as i64;
    o[1] = b.pow(*u % 70);
    o[2] = a.signum() as i64 + b.signum() * 10;
    o[3] = if a.is_positive() {
        1
    } else if a.is_negative() {
        -1
    } else {
        0
    };
    o[4] = (*a).clamp(-100, 100) as i64;
    o[5] = (*b).clamp(i64::MIN, 0);
    o[6] = i32::pow(2, *u % 40) as i64;
    o[7] = (*a).abs().min(7).max(-7) as i64;
    q[0] = w.pow(*u % 65);
    q[1] = u.pow(2) as u64 + (*w).clamp(10, u64::MAX);
}

#[test]
fn integer_methods_wrap_as_release_rust() {
    diff(int_methods::KERNEL, Floats::Small, Ints::Full, Compare::Exact);
}

// ---------------------------------------------------------------------------
// `match`.
// ---------------------------------------------------------------------------

#[parloop::kernel]
fn match_forms(k: &i32, n: &u64, x: &f64, o: &mut [f64; 4], c: &mut [i64; 2]) {
    const FOUR: i32 = 4;
    // A statement with alternatives, ranges, a constant and a block arm.
    match *k {
        0 => o[0] = 1.0,
        1 | 2 => o[0] = 2.0 * x,
        FOUR => o[0] = -1.0,
        -5..=-1 => {
            let t = x * x;
            o[0] = t + 3.0;
        }
        i32::MIN..=-6 => o[0] = f64::NEG_INFINITY,
        _ => o[0] = 0.5,
    }
    // A value, with a binding and guards (one reading the binding).
    o[1] = match *k {
        v if v > 100 => v as f64 * 0.5,
        v @ 10..=20 if *x > 0.0 => v as f64,
        3 => 33.0,
        _ if x.is_nan() => -2.0,
        v => (v % 7) as f64,
    };
    // A u64 scrutinee with half-open ranges and an open end.
    c[0] = match *n {
        0 => 0,
        1..10 => 1,
        10..1000 => 2,
        1000.. => 3,
    };
    // `bool`, and an arm that diverges.
    let mut total = 0i64;
    for i in 0..6 {
        let step = match i % 3 == 0 {
            true => 5,
            false if i == 4 => break,
            false => 1,
        };
        total += step;
    }
    c[1] = total;
    o[2] = match *k % 3 {
        0 => {
            let s = x.sin();
            s * s
        }
        1 => x.cos(),
        _ => return,
    };
    o[3] = 7.0;
}

#[test]
fn match_runs_as_rust_on_every_backend() {
    let ks = vec![0, 1, 2, 4, -3, -6, i32::MIN, 150, 15, 15, 3, 9, 11, -1, 8, 5];
    let ns = vec![0, 5, 10, 999, 1000, u64::MAX, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9];
    let xs = vec![0.5, -1.25, 2.0, 0.0, 3.0, 1.0, -0.5, 2.5, 1.5, -1.5, 0.25, f64::NAN, 7.0, 1.0, 2.0, 3.0];
    let n = ks.len();
    let mut o = vec![0.0; 4 * n];
    let mut c = vec![0i64; 2 * n];
    for e in 0..n {
        let (oe, ce) = (&mut o[4 * e..4 * e + 4], &mut c[2 * e..2 * e + 2]);
        match_forms(&ks[e], &ns[e], &xs[e], oe.try_into().unwrap(), ce.try_into().unwrap());
    }
    let inputs = [
        Vals::I32(ks.clone()),
        Vals::U64(ns.clone()),
        Vals::F64(xs.clone()),
        Vals::F64(vec![0.0; 4 * n]),
        Vals::I64(vec![0; 2 * n]),
    ];
    check(match_forms::KERNEL, n, &inputs, &[Vals::I32(ks), Vals::U64(ns), Vals::F64(xs), Vals::F64(o), Vals::I64(c)]);
    let threads = run_on(Backend::Threads, match_forms::KERNEL, n, &inputs).unwrap();
    let seq = run_on(Backend::Seq, match_forms::KERNEL, n, &inputs).unwrap();
    assert_eq!(threads[3].bits(), seq[3].bits());
}

/// Operands Rust reads before a `match` (or block) value's statements run
/// keep the values they had; guards of alternatives run once per
/// alternative that matches, as Rust's do; `()` arms.
// Rust's reference's example of a guard run per alternative, kept so.
#[allow(clippy::manual_range_patterns)]
#[parloop::kernel]
fn match_order(n: &i32, x: &f64, o: &mut [f64; 4], c: &mut [i32; 2]) {
    let mut k = 1.0;
    o[0] = k + match *n {
        0 => {
            k = 10.0;
            1.0
        }
        _ => 2.0,
    };
    o[1] = k;
    let mut y = *x;
    o[2] = y.max(match *n {
        0 => {
            y = -50.0;
            y
        }
        _ => 0.5,
    }) + scaled(y, {
        y += 1.0;
        y
    });
    let mut count = 0;
    match *n {
        1 | 1..=5
            if {
                count += 1;
                false
            } => {}
        _ => (),
    }
    c[0] = count;
    c[1] = match *n {
        i if i < 0 => -1,
        _ => 1,
    };
    o[3] = y;
}

#[parloop::device]
fn scaled(a: f64, b: f64) -> f64 {
    a * 3.0 + b
}

#[test]
fn match_operands_and_guards_in_rusts_order() {
    let ns = vec![0, 1, 2, -4];
    let xs = vec![0.25, 1.5, -2.0, 3.0];
    let n = ns.len();
    let mut o = vec![0.0; 4 * n];
    let mut c = vec![0; 2 * n];
    for e in 0..n {
        match_order(
            &ns[e],
            &xs[e],
            (&mut o[4 * e..4 * e + 4]).try_into().unwrap(),
            (&mut c[2 * e..2 * e + 2]).try_into().unwrap(),
        );
    }
    // Rust's own example: value 1 matches both alternatives.
    assert_eq!(&c[2..4], &[2, 1]);
    assert_eq!(o[0..2], [2.0, 10.0]);
    check(
        match_order::KERNEL,
        n,
        &[Vals::I32(ns.clone()), Vals::F64(xs.clone()), Vals::F64(vec![0.0; 4 * n]), Vals::I32(vec![0; 2 * n])],
        &[Vals::I32(ns), Vals::F64(xs), Vals::F64(o), Vals::I32(c)],
    );
}

/// Lowercase names in patterns: bindings (also after `@` and before a
/// guard, through `matches!` and `if let`) and local lowercase `const`s (constant
/// patterns, as in Rust: the top block's and a nested block's). A module-level
/// constant there is refused at compile time
/// (`tests/compile_fail/match_lowercase_constant.rs`).
#[allow(non_upper_case_globals)]
#[parloop::kernel]
fn lowercase_patterns(k: &i32, o: &mut [i32; 4]) {
    const four: i32 = 4;
    o[0] = match *k {
        four => 100,
        v @ 0..=2 => v * 10,
        big if big > 5 => big,
        other => -other,
    };
    o[1] = {
        const nine: i32 = 9;
        match *k {
            nine => 1,
            four => 2,
            _ => 3,
        }
    };
    o[2] = match *k % 3 {
        0 => 7,
        s if s < 0 => s,
        s => s + four,
    };
    let m = if matches!(*k, four | 0) { 10 } else { 1 };
    o[3] = m + if let four = *k { four * 2 } else { 0 };
}

#[test]
fn lowercase_pattern_names_are_rusts_on_every_backend() {
    let ks: Vec<i32> = (-3..12).collect();
    let n = ks.len();
    let mut o = vec![0; 4 * n];
    for e in 0..n {
        lowercase_patterns(&ks[e], (&mut o[4 * e..4 * e + 4]).try_into().unwrap());
    }
    // Rust: `four` is the constant, `other` a binding.
    assert_eq!(&o[4 * 7..4 * 8], &[100, 2, 5, 18], "k = 4");
    assert_eq!(&o[0..4], &[3, 3, 7, 1], "k = -3");
    check(
        lowercase_patterns::KERNEL,
        n,
        &[Vals::I32(ks.clone()), Vals::I32(vec![0; 4 * n])],
        &[Vals::I32(ks), Vals::I32(o)],
    );
}

#[parloop::kernel]
fn int_euclid(a: &i64, b: &i64, u: &u32, o: &mut [i64; 5]) {
    let d = if *b == 0 || *b == -1 { 7 } else { *b };
    o[0] = (*a).rem_euclid(d);
    o[1] = (*a).div_euclid(d);
    o[2] = i64::pow(-2, *u % 64);
    o[3] = (*u).rem_euclid(5) as i64 + (*u).div_euclid(3) as i64;
    o[4] = i32::abs(-7) as i64;
}

#[test]
fn integer_euclid_and_negative_literal_receivers() {
    diff(int_euclid::KERNEL, Floats::Small, Ints::Full, Compare::Exact);
    // A zero divisor is Rust's panic on every backend.
    let inputs = [Vals::I64(vec![5, 9]), Vals::I64(vec![3, 0]), Vals::U32(vec![1, 2]), Vals::I64(vec![0; 10])];
    for b in [Backend::Seq, device_backend()] {
        let r = run_on(b, euclid_by_zero::KERNEL, 2, &inputs).expect_err("a zero divisor panics");
        assert!(
            r.contains("attempt to calculate the remainder with a divisor of zero") && r.contains("element 1"),
            "{b:?}: {r}"
        );
    }
}

#[parloop::kernel]
fn euclid_by_zero(a: &i64, b: &i64, u: &u32, o: &mut [i64; 5]) {
    o[0] = (*a).rem_euclid(*b) + *u as i64;
}

/// A `match` on a loop index deciding per-element float work: the lane
/// twin keeps it (the scrutinee is the same in every lane).
#[parloop::kernel]
fn match_in_lanes(x: &[f64; 3], o: &mut f64) {
    let mut s = 0.0;
    for i in 0..3 {
        s += match i {
            0 => x[0] * 2.0,
            1 => x[1].sqrt(),
            _ => x[2].clamp(0.0, 1.0),
        };
    }
    *o = s;
}

#[test]
fn match_on_uniform_values_keeps_the_lane_twin() {
    assert!(match_in_lanes::KERNEL.has_lanes(), "match_in_lanes runs scalar");
    diff(match_in_lanes::KERNEL, Floats::Positive, Ints::Small, Compare::Exact);
    let n = 203;
    let x: Vec<f64> = (0..3 * n).map(|i| (i % 17) as f64 * 0.31).collect();
    let seq =
        run_on(Backend::Seq, match_in_lanes::KERNEL, n, &[Vals::F64(x.clone()), Vals::F64(vec![0.0; n])]).unwrap();
    let threads =
        run_on(Backend::Threads, match_in_lanes::KERNEL, n, &[Vals::F64(x), Vals::F64(vec![0.0; n])]).unwrap();
    assert_eq!(threads[1].bits(), seq[1].bits());
}

// ---------------------------------------------------------------------------
// Tuples.
// ---------------------------------------------------------------------------

#[parloop::kernel]
fn tuple_forms(x: &[f64; 2], k: &i32, o: &mut [f64; 6]) {
    let (a, b) = (x[1], x[0]);
    // Shadowing: the values are read before the names are bound.
    let (a, b) = (b, a);
    let (lo, hi): (f64, f64) = if a < b { (a, b) } else { (b, a) };
    let (m, _) = match *k {
        0 => (1.0, 2.0),
        1 | 2 => {
            let t = a * 2.0;
            (t, t)
        }
        3 => return,
        _ => (lo, hi),
    };
    let mut p = 0.5;
    let mut q = 1.5;
    (p, q) = (q, p + q);
    o[0] = a - b;
    o[1] = hi - lo;
    o[2] = m;
    o[3] = p;
    o[4] = q;
    o[5] = 9.0;
}

#[test]
fn tuples_destructure_as_rust_does() {
    let x = vec![1.0, 2.0, 5.0, -1.0, 0.5, 0.25, 3.0, 3.0, -2.0, 7.0];
    let ks = vec![0, 1, 3, 2, 9];
    let n = ks.len();
    let mut o = vec![0.0; 6 * n];
    for e in 0..n {
        tuple_forms(x[2 * e..2 * e + 2].try_into().unwrap(), &ks[e], (&mut o[6 * e..6 * e + 6]).try_into().unwrap());
    }
    check(
        tuple_forms::KERNEL,
        n,
        &[Vals::F64(x.clone()), Vals::I32(ks.clone()), Vals::F64(vec![0.0; 6 * n])],
        &[Vals::F64(x), Vals::I32(ks), Vals::F64(o)],
    );
}

/// A tuple kept in a local, copied whole (`let mut u = t;`, a copy the
/// later writes to `u` leave `t` without) and taken apart whole.
#[parloop::kernel]
fn tuple_copies(x: &[f64; 2], y: &[f64; 2], o: &mut [f64; 4]) {
    let t = (x[1], y[1]);
    let mut u = t;
    u.0 += 1.0;
    let (a, b) = t;
    o[0] = u.0;
    o[1] = u.1 - a;
    o[2] = t.0 * b;
    {
        let v = u;
        o[3] = v.0 + v.1;
    }
}

#[test]
fn tuples_copy_as_rust_does() {
    let x = vec![1.0, 2.0, 5.0, -1.0, 0.5, 0.25];
    let y = vec![3.0, -4.0, 0.125, 6.0, -2.0, 7.0];
    let n = 3;
    let mut o = vec![0.0; 4 * n];
    for e in 0..n {
        tuple_copies(
            x[2 * e..2 * e + 2].try_into().unwrap(),
            y[2 * e..2 * e + 2].try_into().unwrap(),
            (&mut o[4 * e..4 * e + 4]).try_into().unwrap(),
        );
    }
    assert_eq!(o[0..4], [3.0, -6.0, -8.0, -1.0]);
    check(
        tuple_copies::KERNEL,
        n,
        &[Vals::F64(x.clone()), Vals::F64(y.clone()), Vals::F64(vec![0.0; 4 * n])],
        &[Vals::F64(x), Vals::F64(y), Vals::F64(o)],
    );
}

/// `sin_cos` (the receiver evaluated once) and its lane-wise twin.
#[parloop::kernel]
fn sines(x: &[f64; 2], o: &mut [f64; 2]) {
    let (s, c) = (x[0] * 0.5 + x[1]).sin_cos();
    let (p, q) = (c, s);
    o[0] = s * p;
    o[1] = c + q;
}

#[test]
fn sin_cos_is_sin_and_cos() {
    diff(sines::KERNEL, Floats::Small, Ints::Small, Compare::Exact);
    assert!(sines::KERNEL.has_lanes(), "sines runs scalar");
    let n = 157;
    let x: Vec<f64> = (0..2 * n).map(|i| (i % 23) as f64 * 0.41 - 4.0).collect();
    let seq = run_on(Backend::Seq, sines::KERNEL, n, &[Vals::F64(x.clone()), Vals::F64(vec![0.0; 2 * n])]).unwrap();
    let threads = run_on(Backend::Threads, sines::KERNEL, n, &[Vals::F64(x), Vals::F64(vec![0.0; 2 * n])]).unwrap();
    assert_eq!(threads[1].bits(), seq[1].bits());
}

// ---------------------------------------------------------------------------
// References to computed values: Rust's temporaries.
// ---------------------------------------------------------------------------

#[parloop::device]
fn twice_ref(x: &f64) -> f64 {
    *x * 2.0
}

#[parloop::device]
fn bump(x: &mut f64) -> f64 {
    *x += 1.0;
    *x
}

#[parloop::kernel]
fn computed_refs(a: &f64, o: &mut [f64; 4]) {
    let mut k = *a;
    o[0] = twice_ref(&(*a + 1.0)) + twice_ref(&0.5);
    // The temporary changes, `k` does not.
    o[1] = bump(&mut (k * 3.0)) + k;
    o[2] = twice_ref(&k.max(2.0));
    o[3] = twice_ref(&if k > 0.0 { k } else { -k });
    k += 1.0;
    o[3] += k;
}

#[test]
fn references_to_computed_values_are_temporaries() {
    let a = vec![1.5, -3.0, 0.0];
    let mut o = vec![0.0; 12];
    for e in 0..3 {
        computed_refs(&a[e], (&mut o[4 * e..4 * e + 4]).try_into().unwrap());
    }
    check(computed_refs::KERNEL, 3, &[Vals::F64(a.clone()), Vals::F64(vec![0.0; 12])], &[Vals::F64(a), Vals::F64(o)]);
}

// ---------------------------------------------------------------------------
// assert!, panic!, unreachable!: Rust's messages on every backend.
// ---------------------------------------------------------------------------

#[parloop::device]
fn checked_sqrt(x: f64) -> f64 {
    assert!(x >= 0.0, "negative depth {{h}}");
    x.sqrt()
}

#[parloop::kernel]
fn guarded(h: &f64, k: &i32, o: &mut f64) {
    assert!(*h < 1.0e6);
    let s = match *k {
        0 => 1.0,
        1 => checked_sqrt(*h),
        2 => panic!(),
        3 => unreachable!("flag 3"),
        _ => unreachable!(),
    };
    if s > 100.0 {
        panic!("too deep");
    }
    *o = s;
}

#[test]
fn kernel_panics_carry_rusts_message_on_every_backend() {
    let run = |b: Backend, h: f64, k: i32| {
        run_on(
            b,
            guarded::KERNEL,
            3,
            &[Vals::F64(vec![4.0, 9.0, h]), Vals::I32(vec![1, 0, k]), Vals::F64(vec![0.0; 3])],
        )
    };
    for b in [Backend::Seq, Backend::Threads, device_backend()] {
        assert_eq!(run(b, 16.0, 1).unwrap()[2], Vals::F64(vec![2.0, 1.0, 4.0]), "{b:?}");
        for (h, k, message) in [
            (2.0e6, 0, "assertion failed: *h < 1.0e6"),
            (-1.0, 1, "negative depth {h}"),
            (1.0, 2, "explicit panic"),
            (1.0, 3, "internal error: entered unreachable code: flag 3"),
            (1.0, 7, "internal error: entered unreachable code"),
            (1.0e5, 1, "too deep"),
        ] {
            let e = run(b, h, k).expect_err("the kernel panics at element 2");
            assert!(
                e.contains(&format!("element 2: {message}"))
                    || e.contains(&format!("element 2 ({message})"))
                    || (e.contains(message) && e.contains("element 2")),
                "{b:?}: {e}"
            );
        }
    }
}

// Found by review: a computed reference in a ternary branch, `sin_cos`
// of a `&mut`, a loop waiting on a helper that panicked, a pointer
// argument fixed before a later argument's statements, a helper's panic
// under the lane-wise twin.

#[parloop::device]
fn grow(x: f64) -> f64 {
    assert!(x > 0.0, "cannot grow from zero");
    x * 2.0
}

#[parloop::device]
fn first(v: &f64, _later: f64) -> f64 {
    *v
}

#[parloop::kernel]
fn review_cases(i: &[f64; 1], v: &[f64; 4], t: &mut f64, o: &mut [f64; 3]) {
    let k = i[0] as usize;
    o[0] = if k < 4 { twice_ref(&(v[k] + 1.0)) } else { 0.0 };
    let (s, c) = t.sin_cos();
    *t = s * s + c * c;
    let mut x = v[0];
    while x < 100.0 {
        x = grow(x);
    }
    o[1] = x;
    let mut j = 0;
    o[2] = first(&v[j], {
        j += 1;
        v[j]
    });
}

#[test]
fn review_cases_run_as_rust() {
    let run = |b: Backend, i: f64, v0: f64| {
        run_on(
            b,
            review_cases::KERNEL,
            2,
            &[
                Vals::F64(vec![1.0, i]),
                Vals::F64(vec![1.0, 2.0, 3.0, 4.0, v0, 2.0, 3.0, 4.0]),
                Vals::F64(vec![0.5, 2.0]),
                Vals::F64(vec![0.0; 6]),
            ],
        )
    };
    for b in [Backend::Seq, Backend::Threads, device_backend()] {
        let got = run(b, 7.0, 3.0).unwrap_or_else(|e| panic!("{b:?}: {e}"));
        assert_eq!(&got[3].bits()[3..], &Vals::F64(vec![0.0, 192.0, 3.0]).bits()[..], "{b:?}");
        // x = 0 never grows: Rust panics; the device stops (no hang).
        let e = run(b, 1.0, 0.0).expect_err("grow panics");
        assert!(e.contains("cannot grow from zero") && e.contains("element 1"), "{b:?}: {e}");
    }
}

/// A helper that can panic keeps the kernel off the lane-wise twin: the
/// twin would name the group's first element.
#[parloop::kernel]
fn grows(x: &f64, o: &mut f64) {
    *o = grow(*x);
}

#[test]
fn a_helper_panic_names_its_element_on_threads() {
    assert!(!grows::KERNEL.has_lanes());
    let x: Vec<f64> = (0..64).map(|k| if k == 37 { 0.0 } else { 1.0 + k as f64 }).collect();
    let e = run_on(Backend::Threads, grows::KERNEL, 64, &[Vals::F64(x), Vals::F64(vec![0.0; 64])]).unwrap_err();
    assert!(e.contains("element 37"), "{e}");
}

#[parloop::device]
fn bucket(s: &mut i32) -> usize {
    *s += 1;
    (*s as usize) % 3
}

/// A compound assignment's place is evaluated once, after its value (the
/// C++ evaluated the place's helper call and block twice).
#[parloop::kernel]
fn compound_once(n: &i32, c: &mut [i32; 3], v: &mut [f64; 4]) {
    let mut s = *n;
    c[bucket(&mut s)] += 1;
    let mut i = 0;
    v[{
        i += 1;
        i
    }] += 1.0;
    v[0] = s as f64 + i as f64;
}

#[test]
fn compound_places_with_effects_evaluate_once() {
    let n = vec![0, 4, -2];
    let (mut c, mut v) = (vec![0; 9], vec![0.0; 12]);
    for e in 0..3 {
        compound_once(
            &n[e],
            (&mut c[3 * e..3 * e + 3]).try_into().unwrap(),
            (&mut v[4 * e..4 * e + 4]).try_into().unwrap(),
        );
    }
    assert_eq!(&c[0..3], &[0, 1, 0]);
    check(
        compound_once::KERNEL,
        3,
        &[Vals::I32(n.clone()), Vals::I32(vec![0; 9]), Vals::F64(vec![0.0; 12])],
        &[Vals::I32(n), Vals::I32(c), Vals::F64(v)],
    );
}

#[test]
fn nvrtc_compiles_every_translation_without_warnings() {
    if !nvrtc_available() {
        return;
    }
    for k in [
        float_methods_f64::KERNEL,
        float_methods_f32::KERNEL,
        cube_roots::KERNEL,
        lane_methods::KERNEL,
        float_constants::KERNEL,
        clamp_by_data::KERNEL,
        clamp_f32_unsigned::KERNEL,
        int_methods::KERNEL,
        match_forms::KERNEL,
        match_in_lanes::KERNEL,
        tuple_forms::KERNEL,
        sines::KERNEL,
        match_order::KERNEL,
        int_euclid::KERNEL,
        computed_refs::KERNEL,
        min_max_zeros::KERNEL,
        guarded::KERNEL,
        review_cases::KERNEL,
        grows::KERNEL,
        compound_once::KERNEL,
        signums::KERNEL,
        lowercase_patterns::KERNEL,
        tuple_copies::KERNEL,
    ] {
        nvrtc_check(k).unwrap_or_else(|e| panic!("{}: {e}", k.name()));
    }
}
