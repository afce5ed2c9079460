//! The translator's main guarantee: a corpus of kernels exercising every
//! construct of the subset, each run on 1000 random inputs (finite values
//! over many magnitudes, zeros of both signs, huge and tiny values, NaN and
//! infinities where valid, integer extremes where Rust defines the result)
//! in Rust and in its CUDA translation compiled by g++. Arithmetic and sqrt
//! must agree bitwise, transcendental functions within 2 ulp. The same
//! corpus must compile with NVRTC for sm_90 without a warning.

mod support;

use support::{differential, nvrtc_available, nvrtc_check, Compare, Floats, Ints, Spec};

#[parloop::kernel]
fn arith_f64(a: &f64, b: &f64, c: &[f64; 3], out: &mut [f64; 3]) {
    out[0] = *a + *b * c[0] - c[1] / *b;
    out[1] = (*a - c[2]) * (c[0] + 0.125) / 3.0;
    out[2] = -*a * 2.5e-3 + 1e10 * *b;
}

#[parloop::kernel]
fn arith_f32(a: &f32, b: &[f32; 2], out: &mut [f32; 2]) {
    out[0] = *a * 0.1 + b[0] / 3.0 - 1.5;
    out[1] = (b[1] - *a) * (b[0] + 2.0) - 0.3;
}

#[parloop::kernel]
fn compound(x: &[f64; 4], y: &mut [f64; 4]) {
    y[0] += x[0];
    y[1] -= x[1] * 2.0;
    y[2] *= x[2];
    y[3] /= x[3] + 0.5;
}

#[parloop::kernel]
fn int_div_rem(a: &i32, b: &i32, out: &mut [i32; 4]) {
    // Rust truncates toward zero and the remainder takes the dividend's sign.
    if *b != 0 {
        out[0] = *a / *b;
        out[1] = *a % *b;
    } else {
        out[0] = 0;
        out[1] = 0;
    }
    let d = *b % 7 - 3;
    if d != 0 {
        out[2] = (*a * 3) / d;
        out[3] = -*a % d;
    } else {
        out[2] = -1;
        out[3] = -1;
    }
}

#[parloop::kernel]
fn i64_arith(a: &i64, b: &i64, out: &mut [i64; 3]) {
    out[0] = *a * *b - 7 * *a + 1_000_000;
    out[1] = if *b != 0 { *a / *b + *a % *b } else { 0 };
    out[2] = (*a).abs() + (*b).min(*a) - (*a).max(-*b);
}

#[parloop::kernel]
fn shifts(a: &u32, b: &i32, c: &u64, out: &mut [u64; 4]) {
    let s = *a % 32;
    out[0] = (*a << s) as u64;
    out[1] = (*b >> (s % 31)) as u64;
    out[2] = *c << (s as u64 % 64);
    out[3] = (*c >> 3) ^ (*c << 61);
}

#[parloop::kernel]
fn bitwise(a: &u32, b: &u32, c: &i64, out: &mut [u32; 3], big: &mut i64) {
    out[0] = (*a & *b) | (!*a ^ 0xF0F0);
    out[1] = *a ^ (*b >> 3);
    out[2] = !(*a | 1);
    *big = (*c & 0xFFFF) ^ !*c;
}

#[parloop::kernel]
fn cast_float_to_int(
    x: &f64,
    y: &f32,
    out: &mut [i32; 2],
    wide: &mut [i64; 2],
    uns: &mut [u32; 2],
    uwide: &mut [u64; 2],
) {
    // Rust saturates: NaN -> 0, out of range -> MIN or MAX.
    out[0] = *x as i32;
    out[1] = *y as i32;
    wide[0] = *x as i64;
    wide[1] = *y as i64;
    uns[0] = *x as u32;
    uns[1] = *y as u32;
    uwide[0] = *x as u64;
    uwide[1] = (*y * 1e10) as u64;
}

#[parloop::kernel]
fn cast_int_to_float(a: &i64, b: &u64, c: &i32, d: &u32, out: &mut [f64; 4], outf: &mut [f32; 4]) {
    out[0] = *a as f64;
    out[1] = *b as f64;
    out[2] = *c as f64;
    out[3] = *d as f64;
    outf[0] = *a as f32;
    outf[1] = *b as f32;
    outf[2] = *c as f32;
    outf[3] = *d as f32;
}

#[parloop::kernel]
fn cast_ints(a: &i64, b: &u32, out: &mut [i32; 2], outu: &mut [u64; 2]) {
    out[0] = *a as i32;
    out[1] = *b as i32;
    outu[0] = *a as u64;
    outu[1] = (*b as i32) as u64;
}

#[parloop::kernel]
fn cast_floats(x: &f64, y: &f32, out: &mut f32, outd: &mut f64) {
    *out = *x as f32;
    *outd = *y as f64 * 0.1;
}

#[parloop::kernel]
fn min_max_f64(a: &f64, b: &f64, out: &mut [f64; 4]) {
    out[0] = a.min(*b);
    out[1] = a.max(*b);
    out[2] = (*a).min(0.0).max(-1.0);
    out[3] = b.max(f64::MIN_POSITIVE);
}

#[parloop::kernel]
fn min_max_f32(a: &f32, b: &f32, out: &mut [f32; 2]) {
    out[0] = a.min(*b);
    out[1] = a.max(*b);
}

#[parloop::kernel]
fn min_max_int(a: &i32, b: &i32, c: &u64, d: &u64, out: &mut [i32; 2], outu: &mut [u64; 2]) {
    out[0] = (*a).min(*b);
    out[1] = (*a).max(*b);
    outu[0] = (*c).min(*d);
    outu[1] = (*c).max(*d);
}

#[parloop::kernel]
fn abs_values(a: &f64, b: &f32, c: &i32, out: &mut f64, outf: &mut f32, outi: &mut i32) {
    *out = a.abs();
    *outf = b.abs();
    *outi = c.abs();
}

#[parloop::kernel]
fn square_roots(a: &f64, b: &f32, out: &mut [f64; 2], outf: &mut f32) {
    out[0] = a.sqrt();
    out[1] = (a * a + 1.0).sqrt();
    *outf = b.sqrt() + (b * b).sqrt();
}

#[parloop::kernel]
fn transcendental_f64(x: &f64, y: &f64, out: &mut [f64; 8]) {
    out[0] = x.exp();
    out[1] = y.abs().ln();
    out[2] = y.abs().log10();
    out[3] = x.sin();
    out[4] = x.cos();
    out[5] = x.tan();
    out[6] = x.atan();
    out[7] = x.atan2(*y);
}

#[parloop::kernel]
fn transcendental_f32(x: &f32, y: &f32, out: &mut [f32; 8]) {
    out[0] = x.exp();
    out[1] = y.abs().ln();
    out[2] = y.abs().log10();
    out[3] = x.sin();
    out[4] = x.cos();
    out[5] = x.tan();
    out[6] = x.atan();
    out[7] = x.atan2(*y);
}

#[parloop::kernel]
fn powers(x: &f64, n: &i32, y: &f32, out: &mut [f64; 3], outf: &mut [f32; 2]) {
    out[0] = x.powi(*n % 8);
    out[1] = x.abs().powf(0.37);
    out[2] = x.powi(-3);
    outf[0] = y.powi(3);
    outf[1] = y.abs().powf(1.5);
}

#[parloop::kernel]
fn fused_and_hypot(a: &f64, b: &f64, c: &f64, f: &f32, out: &mut [f64; 2], outf: &mut [f32; 2]) {
    out[0] = a.mul_add(*b, *c);
    out[1] = a.hypot(*b);
    outf[0] = f.mul_add(2.0, 0.5);
    outf[1] = f.hypot(3.0);
}

#[parloop::kernel]
fn rounding(a: &f64, b: &f32, out: &mut [f64; 4], outf: &mut [f32; 4]) {
    out[0] = a.floor();
    out[1] = a.ceil();
    out[2] = a.round();
    out[3] = a.signum();
    outf[0] = b.floor();
    outf[1] = b.ceil();
    outf[2] = b.round();
    outf[3] = b.signum();
}

#[parloop::kernel]
fn if_chain(a: &f64, b: &i32, out: &mut [f64; 2]) {
    if *a > 10.0 {
        out[0] = 1.0;
    } else if *a < -10.0 {
        out[0] = -1.0;
    } else if *b % 2 == 0 {
        out[0] = 0.5;
    } else {
        out[0] = *a;
    }
    if *b > 0 && *a < 0.0 || *b == -3 {
        out[1] = 2.0 * *a;
    } else {
        out[1] = 0.0;
    }
}

#[parloop::kernel]
fn if_expressions(a: &f64, b: &f64, out: &mut [f64; 3]) {
    out[0] = if *a > *b { *a - *b } else { *b - *a };
    let t = if *a > 0.0 {
        let s = a.sqrt();
        s * 2.0
    } else if *a < -1.0 {
        -1.0
    } else {
        0.0
    };
    out[1] = t;
    out[2] = {
        let u = *a * 3.0;
        u + *b
    };
}

#[parloop::kernel]
fn loops(x: &[f64; 8], out: &mut [f64; 4]) {
    let mut s = 0.0;
    for i in 0..8 {
        s += x[i];
    }
    out[0] = s;
    let mut p = 1.0;
    for i in (0..8).rev() {
        p = p * 0.5 + x[i];
    }
    out[1] = p;
    let mut q = 0.0;
    for i in (1..=7).step_by(3) {
        q += x[i] * i as f64;
    }
    out[2] = q;
    let mut r = 0.0;
    for i in (0..=6).rev().step_by(2) {
        r = r * 0.25 - x[i];
    }
    out[3] = r;
}

#[parloop::kernel]
fn while_and_loop(a: &f64, n: &i32, out: &mut [f64; 2], count: &mut i32) {
    let mut v = a.abs();
    let mut k = 0;
    while v > 1.0 && k < 2000 {
        v /= 2.0;
        k += 1;
    }
    out[0] = v;
    *count = k;
    let mut i = 0;
    let mut acc = 0.0;
    loop {
        i += 1;
        if i % 3 == 0 {
            continue;
        }
        acc += i as f64 * *a;
        if i > n.abs() % 20 {
            break;
        }
    }
    out[1] = acc;
}

#[parloop::kernel]
fn early_return(a: &f64, out: &mut f64) {
    *out = -1.0;
    if a.is_nan() {
        return;
    }
    if *a < 0.0 {
        *out = 0.0;
        return;
    }
    *out = a.sqrt();
}

#[parloop::kernel]
fn consts_and_shadowing(a: &f64, b: &f32, out: &mut [f64; 3], outf: &mut f32) {
    const SCALE: f64 = 0.5;
    let x = *a * SCALE;
    let x = x + std::f64::consts::PI;
    let x = x * core::f64::consts::E;
    out[0] = x;
    out[1] = f64::EPSILON * *a;
    out[2] = i32::MAX as f64 + u32::MAX as f64 - i64::MIN as f64;
    *outf = *b * std::f32::consts::FRAC_PI_2 + f32::MAX / 1e30;
}

#[parloop::kernel]
fn vector_rows(x: &[[f64; 2]; 3], w: &[f32; 3], out: &mut [[f64; 2]; 3]) {
    for r in 0..3 {
        for c in 0..2 {
            out[r][c] = x[r][c] * w[r] as f64 + x[(r + 1) % 3][1 - c];
        }
    }
}

#[parloop::device]
fn sq(v: f64) -> f64 {
    v * v
}

#[parloop::device]
fn norm2(a: &[f64; 2]) -> f64 {
    (sq(a[0]) + sq(a[1])).sqrt()
}

#[parloop::device]
fn clamp_unit(v: f64) -> f64 {
    if v > 1.0 {
        1.0
    } else if v < -1.0 {
        -1.0
    } else {
        v
    }
}

#[parloop::kernel]
fn helpers(a: &[f64; 2], b: &f64, out: &mut [f64; 2]) {
    let n: f64 = norm2(a);
    out[0] = n + sq(*b);
    out[1] = clamp_unit(*b) * 2.0;
}

#[parloop::kernel]
fn booleans(a: &i32, b: &i32, out: &mut [i32; 3]) {
    let p = *a > 0;
    let q = *b % 3 == 0;
    out[0] = (p && q) as i32;
    out[1] = (p || !q) as i32;
    out[2] = (p ^ q) as i32 + (p & q) as i32;
}

#[parloop::kernel]
fn local_arrays(x: &[f64; 3], out: &mut [f64; 3]) {
    let mut acc = [0.0; 3];
    let w = [0.5, 0.25, 0.125];
    for i in 0..3 {
        acc[i] = x[i] * w[2 - i];
    }
    let copy = *x;
    for i in 0..3 {
        out[i] = acc[i] + copy[(i + 1) % 3];
    }
}

#[parloop::kernel]
fn unsigned_arith(a: &u64, b: &u32, out: &mut [u64; 2], outu: &mut [u32; 2]) {
    out[0] = *a * 3 + 12_345_678_901;
    out[1] = (*a + 7) / 2 % 1000;
    outu[0] = *b * 2 + 1;
    outu[1] = (*b).min(500).max(1) - 1;
}

#[parloop::kernel]
fn negation_and_literals(a: &i32, b: &i64, out: &mut [i64; 3], outi: &mut i32) {
    *outi = -*a + (-5) * 2;
    out[0] = -*b;
    out[1] = -(*b % 100) * -3;
    out[2] = 0x1F + 0b101 + 0o17 + 1_000;
}

#[parloop::kernel]
fn f32_accumulate(x: &[f32; 4], out: &mut f32) {
    let mut s = 0.0;
    for i in 0..4 {
        s += x[i] * 0.1;
    }
    *out = s / 3.0 + 1e-3;
}

macro_rules! corpus {
    ($( $name:ident: $floats:ident, $ints:ident, $compare:expr; )*) => {
        fn corpus() -> Vec<Spec> {
            vec![ $( Spec { kernel: $name::KERNEL, floats: Floats::$floats, ints: Ints::$ints, compare: $compare } ),* ]
        }

        /// One test per kernel, so that they build and run in parallel.
        mod differential_tests {
            use super::*;
            $(
                #[test]
                fn $name() {
                    let spec = Spec { kernel: super::$name::KERNEL, floats: Floats::$floats, ints: Ints::$ints, compare: $compare };
                    differential(&spec, 1000, 0x9E37_79B9_7F4A_7C15 ^ stringify!($name).len() as u64);
                }
            )*
        }
    };
}

corpus! {
    arith_f64: WithNan, Small, Compare::Exact;
    arith_f32: WithNan, Small, Compare::Exact;
    compound: WithNan, Small, Compare::Exact;
    int_div_rem: Finite, Small, Compare::Exact;
    i64_arith: Finite, Small, Compare::Exact;
    shifts: Finite, Full, Compare::Exact;
    bitwise: Finite, Full, Compare::Exact;
    cast_float_to_int: WithNan, Small, Compare::Exact;
    cast_int_to_float: Finite, Full, Compare::Exact;
    cast_ints: Finite, Full, Compare::Exact;
    cast_floats: WithNan, Small, Compare::Exact;
    min_max_f64: WithNan, Small, Compare::ZerosEqual;
    min_max_f32: WithNan, Small, Compare::ZerosEqual;
    min_max_int: Finite, Full, Compare::Exact;
    abs_values: WithNan, Small, Compare::Exact;
    square_roots: WithNan, Small, Compare::Exact;
    transcendental_f64: Finite, Small, Compare::Ulps(2);
    transcendental_f32: Finite, Small, Compare::Ulps(2);
    powers: Finite, Small, Compare::Ulps(2);
    fused_and_hypot: WithNan, Small, Compare::Ulps(2);
    rounding: WithNan, Small, Compare::Exact;
    if_chain: WithNan, Small, Compare::Exact;
    if_expressions: WithNan, Small, Compare::Exact;
    loops: WithNan, Small, Compare::Exact;
    while_and_loop: Finite, Small, Compare::Exact;
    early_return: WithNan, Small, Compare::Exact;
    consts_and_shadowing: WithNan, Small, Compare::Exact;
    vector_rows: WithNan, Small, Compare::Exact;
    helpers: WithNan, Small, Compare::Exact;
    booleans: Finite, Small, Compare::Exact;
    local_arrays: WithNan, Small, Compare::Exact;
    unsigned_arith: Finite, Small, Compare::Exact;
    negation_and_literals: Finite, Small, Compare::Exact;
    f32_accumulate: WithNan, Small, Compare::Exact;
}

#[test]
fn the_corpus_covers_at_least_30_kernels() {
    assert!(corpus().len() >= 30, "{} kernels", corpus().len());
}

#[test]
fn every_corpus_kernel_compiles_with_nvrtc_for_sm_90_without_warnings() {
    if !nvrtc_available() {
        return;
    }
    let failures: Vec<String> = corpus().iter().filter_map(|s| nvrtc_check(s.kernel).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
