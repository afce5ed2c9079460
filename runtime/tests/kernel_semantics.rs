//! The kernel translation against Rust, construct by construct: kernels
//! that `#[parloop::kernel]` accepts, run on `seq` (the Rust function) and
//! on the device backend (emu here: the same CUDA C++ compiled by g++),
//! compared with the kernel called as a plain Rust function, bitwise unless
//! a test says otherwise. Parameters of every shape and type; usize index
//! arithmetic past 32 bits and below zero; `step_by` over wide ranges and
//! with a zero step; `while` conditions with statements; globals of several
//! values; integer and f32 reductions; blocks, shadowing and helpers on
//! rows; local arrays of every type; scalar edge cases on random inputs.
//! What the translation cannot do faithfully is refused at compile time
//! instead (`tests/compile_fail/`: helper types it cannot see, `for mut`,
//! operands whose order matters, blocks under `&&`, references to values).

mod support;

#[path = "support/device.rs"]
mod device;
#[path = "support/vals.rs"]
mod vals;

use device::device_backend;
use parloop::{Access, Backend, Kernel, Runtime};
use support::{differential, Compare, Floats, Ints, Spec};
use vals::{check, run_on, Vals};

fn diff(kernel: &'static Kernel, floats: Floats, ints: Ints, compare: Compare) {
    let spec = Spec { kernel, floats, ints, compare };
    differential(&spec, 1000, 0x5151_7A7A_0F0F_1234 ^ kernel.name().len() as u64);
}

// ---------------------------------------------------------------------------
// `while` conditions that need statements.
// ---------------------------------------------------------------------------

/// A `while` whose condition needs statements, with `continue`.
#[parloop::kernel]
fn while_block_condition(n: &i32, o: &mut i32) {
    let mut i = 0;
    let mut s = 0;
    while {
        i += 1;
        i <= *n
    } {
        if i % 2 == 0 {
            continue;
        }
        s += i;
    }
    *o = s * 100 + i;
}

#[test]
fn while_conditions_with_statements_run_each_iteration() {
    let n = vec![0, 1, 5, 10];
    let mut want = Vec::new();
    for x in &n {
        let mut o = 0;
        while_block_condition(x, &mut o);
        want.push(o);
    }
    check(
        while_block_condition::KERNEL,
        4,
        &[Vals::I32(n.clone()), Vals::I32(vec![0; 4])],
        &[Vals::I32(n), Vals::I32(want)],
    );
}

// ---------------------------------------------------------------------------
// usize kept as C++ int.
// ---------------------------------------------------------------------------

/// usize arithmetic that does not overflow in Rust (64-bit) but does in 32.
#[parloop::kernel]
fn usize_products(o: &mut [f64; 3], h: &mut [u64; 3]) {
    for i in 0..3 {
        let j = i * 2_000_000_000;
        o[i] = j as f64;
        h[i] = ((i + 1) * 1_000_000_007 % 1_000) as u64;
    }
}

#[test]
fn usize_products_of_loop_indices_do_not_wrap_at_32_bits() {
    let (mut o, mut h) = ([0.0; 3], [0u64; 3]);
    usize_products(&mut o, &mut h);
    assert_eq!(o, [0.0, 2e9, 4e9]);
    check(
        usize_products::KERNEL,
        1,
        &[Vals::F64(vec![0.0; 3]), Vals::U64(vec![0; 3])],
        &[Vals::F64(o.to_vec()), Vals::U64(h.to_vec())],
    );
}

/// usize below zero wraps in Rust's release builds, and on the device
/// (64-bit unsigned arithmetic; it went negative in an `int`).
#[parloop::kernel]
fn usize_wraps(o: &mut [f64; 3], c: &mut [u64; 3]) {
    for i in 0..3 {
        let j = i - 1;
        o[i] = (j / 2) as f64;
        c[i] = (j < 2) as u64;
    }
}

#[test]
#[cfg_attr(debug_assertions, ignore = "the plain Rust reference overflows where overflow checks are on")]
fn usize_below_zero_wraps_like_release_rust() {
    let (mut o, mut c) = ([0.0; 3], [0u64; 3]);
    usize_wraps(&mut o, &mut c);
    check(
        usize_wraps::KERNEL,
        1,
        &[Vals::F64(vec![0.0; 3]), Vals::U64(vec![0; 3])],
        &[Vals::F64(o.to_vec()), Vals::U64(c.to_vec())],
    );
}

// ---------------------------------------------------------------------------
// Ranges with variable bounds.
// ---------------------------------------------------------------------------

/// `step_by` over an i32 range that spans more than i32::MAX.
#[parloop::kernel]
fn wide_step(a: &i32, b: &i32, o: &mut [i64; 2]) {
    let mut count = 0;
    let mut last = 0i64;
    for i in (*a..*b).step_by(1_000_000_000) {
        count += 1;
        last = i as i64;
        if count == 10 {
            break;
        }
    }
    o[0] = count;
    o[1] = last;
}

#[test]
fn step_by_over_a_wide_i32_range() {
    let (a, b) = (vec![-2_000_000_000, 0, -5], vec![2_000_000_000, 10, 5]);
    let mut want = Vec::new();
    for e in 0..3 {
        let mut o = [0i64; 2];
        wide_step(&a[e], &b[e], &mut o);
        want.extend(o);
    }
    assert_eq!(&want[..2], &[4, 1_000_000_000]);
    check(
        wide_step::KERNEL,
        3,
        &[Vals::I32(a.clone()), Vals::I32(b.clone()), Vals::I64(vec![0; 6])],
        &[Vals::I32(a), Vals::I32(b), Vals::I64(want)],
    );
}

/// An inclusive range over every `u64` (2^64 iterations; the device counted
/// none), ended by `break`; `min` of a 64-bit usize and an `int` index.
#[parloop::kernel]
fn full_width(m: &u64, o: &mut [u64; 4]) {
    let mut c = 0u64;
    for i in 0..=*m {
        c += 1;
        o[1] = i;
        if c == 3 {
            break;
        }
    }
    o[0] = c;
    for i in 0..2 {
        let j = (i - 1).min(5);
        o[2 + i] = j as u64;
    }
}

#[test]
#[cfg_attr(debug_assertions, ignore = "the plain Rust reference overflows where overflow checks are on")]
fn full_width_inclusive_ranges_and_mixed_min() {
    let mut want = [0u64; 4];
    full_width(&u64::MAX, &mut want);
    assert_eq!(want, [3, 2, 5, 0]);
    check(
        full_width::KERNEL,
        1,
        &[Vals::U64(vec![u64::MAX]), Vals::U64(vec![0; 4])],
        &[Vals::U64(vec![u64::MAX]), Vals::U64(want.to_vec())],
    );
}

/// Helpers whose types only their signatures give, used as the usual f64:
/// compared with literals, given negative literals (pinned for rustc in
/// the host function, computed as f64 on the device).
#[parloop::device]
fn dot2(a: &[f64; 2], b: &[f64; 2]) -> f64 {
    a[0] * b[0] + a[1] * b[1]
}

#[parloop::device]
fn shifted(x: f64, by: f64) -> f64 {
    x + by
}

#[parloop::kernel]
fn upwind(u: &[f64; 2], n: &[f64; 2], o: &mut f64) {
    *o = if dot2(u, n) > 0.0 { shifted(-1.0, 0.5) } else { shifted(2.0 * 3.0, -0.25) };
}

#[test]
fn helper_results_compared_with_literals_run_as_f64() {
    let (u, n) = (vec![1.0, -2.0, 0.5, 0.5], vec![1.0, 1.0, 1.0, 1.0]);
    let mut want = Vec::new();
    for e in 0..2 {
        let mut o = 0.0;
        upwind(&[u[2 * e], u[2 * e + 1]], &[n[2 * e], n[2 * e + 1]], &mut o);
        want.push(o);
    }
    assert_eq!(want, [5.75, -0.5]);
    check(
        upwind::KERNEL,
        2,
        &[Vals::F64(u.clone()), Vals::F64(n.clone()), Vals::F64(vec![0.0; 2])],
        &[Vals::F64(u), Vals::F64(n), Vals::F64(want)],
    );
}

/// `step_by` with a step read from data.
#[parloop::kernel]
fn data_step(n: &i32, k: &u32, o: &mut i64) {
    let mut count = 0i64;
    for i in (0..*n).step_by(*k as usize) {
        count += i as i64 + 1;
    }
    *o = count;
}

#[test]
fn a_zero_step_is_rusts_panic_on_every_backend() {
    // The device divided by the step to count the iterations: with zero,
    // a division by zero (a crash of the emulator's process).
    let n = vec![10, 7];
    let good = run_on(
        device_backend(),
        data_step::KERNEL,
        2,
        &[Vals::I32(n.clone()), Vals::U32(vec![3, 2]), Vals::I64(vec![0; 2])],
    );
    assert_eq!(good.unwrap()[2], Vals::I64(vec![1 + 4 + 7 + 10, 1 + 3 + 5 + 7]));
    for b in [Backend::Seq, device_backend()] {
        let e = run_on(b, data_step::KERNEL, 2, &[Vals::I32(n.clone()), Vals::U32(vec![3, 0]), Vals::I64(vec![0; 2])])
            .expect_err("a zero step panics");
        assert!(e.contains("step != 0") && e.contains("element 1"), "{b:?}: {e}");
    }
}

/// Ranges with variable bounds, reversed, stepped, inclusive, empty.
#[parloop::kernel]
fn variable_ranges(a: &i64, b: &i64, k: &u32, o: &mut [i64; 4]) {
    let mut s = 0i64;
    for i in (*a..*b).rev() {
        s = s * 3 + i;
    }
    o[0] = s;
    let mut t = 0i64;
    for i in (*a..=*b).step_by(*k as usize % 5 + 1) {
        t = t * 7 + i;
    }
    o[1] = t;
    let mut u = 0i64;
    for i in (*a..=*b).rev().step_by(*k as usize % 3 + 1) {
        u = u * 5 - i;
    }
    o[2] = u;
    let n = (*k % 6) as usize;
    let mut v = 0i64;
    for i in (0..n).rev() {
        v = v * 2 + i as i64;
    }
    o[3] = v;
}

#[test]
fn variable_ranges_match() {
    let a: Vec<i64> = vec![0, -3, 5, 7, -10, 2];
    let b: Vec<i64> = vec![5, 4, 5, 3, -8, 12];
    let k: Vec<u32> = vec![0, 1, 2, 3, 4, 5];
    let mut want = Vec::new();
    for e in 0..6 {
        let mut o = [0i64; 4];
        variable_ranges(&a[e], &b[e], &k[e], &mut o);
        want.extend(o);
    }
    check(
        variable_ranges::KERNEL,
        6,
        &[Vals::I64(a.clone()), Vals::I64(b.clone()), Vals::U32(k.clone()), Vals::I64(vec![0; 24])],
        &[Vals::I64(a), Vals::I64(b), Vals::U32(k), Vals::I64(want)],
    );
}

// ---------------------------------------------------------------------------
// Parameters of every shape and type, random inputs (g++ and emu).
// ---------------------------------------------------------------------------

#[parloop::kernel]
fn every_shape(
    a: &i64,
    b: &mut [u32; 5],
    c: &[[f32; 3]; 2],
    d: &[[i32; 2]; 3],
    e: &mut [[u64; 2]; 2],
    f: &u32,
    g: &mut [[f32; 2]; 1],
    h: &mut i64,
) {
    for i in 0..b.len() {
        b[i] = (b[i] * 3 + *f) ^ (i as u32);
    }
    for r in 0..c.len() {
        for k in 0..c[r].len() {
            g[0][r] += c[r][k] * 0.1;
        }
    }
    let mut s = 0i64;
    for r in 0..3 {
        s += d[r][0] as i64 * d[r][1] as i64;
    }
    *h = s - *a;
    e[1][0] = e[0][1] + (*a as u64);
    e[0][1] = e[1][1] >> (*f % 64);
    e[1][1] = d.len() as u64 + d[0].len() as u64;
}

/// `every_shape` without its one-row parameter, for `support::differential`.
#[parloop::kernel]
fn every_shape_rows(
    a: &i64,
    b: &mut [u32; 5],
    c: &[[f32; 3]; 2],
    d: &[[i32; 2]; 3],
    e: &mut [[u64; 2]; 2],
    f: &u32,
    h: &mut i64,
) {
    for i in 0..b.len() {
        b[i] = (b[i] * 3 + *f) ^ (i as u32);
    }
    let mut g = 0.0f32;
    for r in 0..c.len() {
        for k in 0..c[r].len() {
            g += c[r][k] * 0.1;
        }
    }
    let mut s = 0i64;
    for r in 0..3 {
        s += d[r][0] as i64 * d[r][1] as i64;
    }
    *h = s - *a + g as i64;
    e[1][0] = e[0][1] + (*a as u64);
    e[0][1] = e[1][1] >> (*f % 64);
    e[1][1] = d.len() as u64 + d[0].len() as u64;
}

#[test]
fn every_shape_differential() {
    diff(every_shape_rows::KERNEL, Floats::Finite, Ints::Full, Compare::Exact);
}

/// `support::differential` on a kernel with a `&mut [[f32; 2]; 1]`
/// parameter: the harness cast its buffer to rows only when `rows > 1`,
/// where the translation takes rows whenever the parameter is `nested`
/// (now `support::param_expr` does too); g++ rejected the driver.
#[test]
fn differential_harness_on_a_one_row_parameter() {
    diff(every_shape::KERNEL, Floats::Finite, Ints::Full, Compare::Exact);
}

#[test]
fn every_shape_seq_and_device() {
    let n = 5;
    let a: Vec<i64> = vec![1, -2, i64::MAX, i64::MIN, 77];
    let b: Vec<u32> = (0..25).map(|i| i * 2_654_435_761u32.wrapping_mul(i + 1)).collect();
    let c: Vec<f32> = (0..30).map(|i| (i as f32 - 12.5) * 0.37).collect();
    let d: Vec<i32> = (0..30).map(|i| (i * 7919 % 2001) - 1000).collect();
    let e: Vec<u64> = (0..20).map(|i| u64::MAX / (i + 1)).collect();
    let f: Vec<u32> = vec![0, 31, 32, 63, 100];
    let g: Vec<f32> = (0..10).map(|i| i as f32 * -0.5).collect();
    let h: Vec<i64> = vec![0; n];
    let inputs = [
        Vals::I64(a.clone()),
        Vals::U32(b.clone()),
        Vals::F32(c.clone()),
        Vals::I32(d.clone()),
        Vals::U64(e.clone()),
        Vals::U32(f.clone()),
        Vals::F32(g.clone()),
        Vals::I64(h.clone()),
    ];
    let (mut bw, mut ew, mut gw, mut hw) = (b.clone(), e.clone(), g.clone(), h.clone());
    for k in 0..n {
        let cc: [[f32; 3]; 2] = std::array::from_fn(|r| std::array::from_fn(|j| c[k * 6 + r * 3 + j]));
        let dd: [[i32; 2]; 3] = std::array::from_fn(|r| std::array::from_fn(|j| d[k * 6 + r * 2 + j]));
        let mut bb: [u32; 5] = bw[k * 5..k * 5 + 5].try_into().unwrap();
        let mut ee: [[u64; 2]; 2] = std::array::from_fn(|r| std::array::from_fn(|j| ew[k * 4 + r * 2 + j]));
        let mut gg: [[f32; 2]; 1] = [[gw[2 * k], gw[2 * k + 1]]];
        every_shape(&a[k], &mut bb, &cc, &dd, &mut ee, &f[k], &mut gg, &mut hw[k]);
        bw[k * 5..k * 5 + 5].copy_from_slice(&bb);
        ew[k * 4..k * 4 + 4].copy_from_slice(&[ee[0][0], ee[0][1], ee[1][0], ee[1][1]]);
        gw[2 * k..2 * k + 2].copy_from_slice(&gg[0]);
    }
    check(
        every_shape::KERNEL,
        n,
        &inputs,
        &[
            Vals::I64(a),
            Vals::U32(bw),
            Vals::F32(c),
            Vals::I32(d),
            Vals::U64(ew),
            Vals::U32(f),
            Vals::F32(gw),
            Vals::I64(hw),
        ],
    );
}

// ---------------------------------------------------------------------------
// Globals of dim > 1 read by kernels.
// ---------------------------------------------------------------------------

#[parloop::kernel]
fn read_globals(w: &[f64; 3], m: &[[f64; 2]; 2], k: &i64, u: &[u32; 2], x: &f64, o: &mut [f64; 2]) {
    o[0] = w[0] * *x + w[1] * *x * *x + w[2] + *k as f64;
    o[1] = m[0][0] * m[1][1] - m[0][1] * m[1][0] + (u[0] as f64) * (u[1] as f64) + m.len() as f64;
}

#[test]
fn globals_of_several_values_are_read_alike() {
    let w = [0.5, -1.25, 3.0];
    let m = [1.0, 2.0, -3.0, 4.5];
    let mm = [[1.0, 2.0], [-3.0, 4.5]];
    let (k, u) = (-7i64, [3u32, 4_000_000_000]);
    let xs: Vec<f64> = (0..7).map(|i| i as f64 * 0.3 - 1.0).collect();
    let mut want = Vec::new();
    for x in &xs {
        let mut o = [0.0; 2];
        read_globals(&w, &mm, &k, &u, x, &mut o);
        want.extend(o);
    }
    for b in [Backend::Seq, device_backend()] {
        let rt = Runtime::with_backend(b).unwrap();
        let set = rt.set("e", xs.len()).unwrap();
        let gw = rt.global("w", &w).unwrap();
        let gm = rt.global("m", &m).unwrap();
        let gk = rt.global("k", &[k]).unwrap();
        let gu = rt.global("u", &u).unwrap();
        let x = rt.dat("x", &set, 1, xs.clone()).unwrap();
        let o = rt.dat("o", &set, 2, vec![0.0; 2 * xs.len()]).unwrap();
        rt.par_loop(
            read_globals::KERNEL,
            &set,
            &[
                gw.arg(Access::READ),
                gm.arg(Access::READ),
                gk.arg(Access::READ),
                gu.arg(Access::READ),
                x.arg(Access::READ),
                o.arg(Access::WRITE),
            ],
        )
        .unwrap();
        assert_eq!(o.values().unwrap(), want, "{b:?}");
    }
}

/// Integer reductions into a global of dim 2, and MIN/MAX of f32.
#[parloop::kernel]
fn int_reduce(x: &i64, s: &mut [i64; 2], lo: &mut f32) {
    s[0] += *x;
    s[1] += *x * *x;
    *lo = lo.min(*x as f32 * 0.5);
}

#[test]
fn integer_and_f32_global_reductions() {
    let xs: Vec<i64> = (0..100).map(|i| (i * 37 % 101) - 50).collect();
    let (s0, s1): (i64, i64) = (xs.iter().sum(), xs.iter().map(|x| x * x).sum());
    let lo = xs.iter().map(|&x| x as f32 * 0.5).fold(f32::INFINITY, f32::min);
    for b in [Backend::Seq, device_backend()] {
        let rt = Runtime::with_backend(b).unwrap();
        let set = rt.set("e", xs.len()).unwrap();
        let x = rt.dat("x", &set, 1, xs.clone()).unwrap();
        let s = rt.global("s", &[0i64, 0]).unwrap();
        let g = rt.global("lo", &[f32::INFINITY]).unwrap();
        rt.par_loop(int_reduce::KERNEL, &set, &[x.arg(Access::READ), s.arg(Access::INC), g.arg(Access::MIN)]).unwrap();
        assert_eq!(s.values().unwrap(), vec![s0, s1], "{b:?}");
        assert_eq!(g.values().unwrap(), vec![lo], "{b:?}");
    }
}

// ---------------------------------------------------------------------------
// Blocks, shadowing, helpers on rows, local arrays of every type.
// ---------------------------------------------------------------------------

#[parloop::device]
fn scale_row(r: &mut [f64; 2], k: f64) {
    r[0] *= k;
    r[1] -= k;
}

#[parloop::device]
fn bump(x: &mut f64, by: f64) {
    *x += by;
}

#[parloop::device]
fn first_negative(r: &[f64; 3]) -> i32 {
    for i in 0..3 {
        if r[i] < 0.0 {
            return i as i32;
        }
    }
    -1
}

#[parloop::kernel]
fn blocks_and_shadowing(x: &[[f64; 3]; 2], m: &mut [[f64; 2]; 2], o: &mut [f64; 4], n: &mut [i32; 2]) {
    let v = x[0][0];
    let v = {
        let v = v * 2.0;
        v + 1.0
    };
    {
        let v = 100.0;
        o[3] = v;
    }
    o[0] = v;
    scale_row(&mut m[1], x[1][2]);
    bump(&mut m[0][1], v);
    bump(&mut o[1], m[1][0]);
    let w = if x[1][0] > 0.0 {
        let t = x[1][0].sqrt();
        t * 3.0
    } else if x[1][0] < -1.0 {
        o[2] = -5.0;
        return;
    } else {
        0.5
    };
    o[2] = w;
    n[0] = first_negative(&x[0]);
    n[1] = first_negative(&x[1]);
}

#[test]
fn blocks_shadowing_and_helpers_on_rows() {
    let n = 4;
    let x: Vec<f64> = vec![
        1.0, 2.0, -3.0, 4.0, 5.0, 6.0, // x[1][0] > 0
        -1.0, 2.0, 3.0, -2.0, 5.0, 6.0, // early return
        0.5, 0.25, 0.125, -0.5, -1.0, 2.0, // else
        0.0, -0.0, 1.0, 9.0, -9.0, 0.5,
    ];
    let m: Vec<f64> = (0..16).map(|i| i as f64 - 7.5).collect();
    let o = vec![0.25; 16];
    let nn = vec![0i32; 8];
    let (mut mw, mut ow, mut nw) = (m.clone(), o.clone(), nn.clone());
    for e in 0..n {
        let xx: [[f64; 3]; 2] = std::array::from_fn(|r| std::array::from_fn(|c| x[e * 6 + r * 3 + c]));
        let mut mm: [[f64; 2]; 2] = std::array::from_fn(|r| std::array::from_fn(|c| mw[e * 4 + r * 2 + c]));
        let mut oo: [f64; 4] = ow[e * 4..e * 4 + 4].try_into().unwrap();
        let mut n2: [i32; 2] = nw[e * 2..e * 2 + 2].try_into().unwrap();
        blocks_and_shadowing(&xx, &mut mm, &mut oo, &mut n2);
        mw[e * 4..e * 4 + 4].copy_from_slice(&[mm[0][0], mm[0][1], mm[1][0], mm[1][1]]);
        ow[e * 4..e * 4 + 4].copy_from_slice(&oo);
        nw[e * 2..e * 2 + 2].copy_from_slice(&n2);
    }
    check(
        blocks_and_shadowing::KERNEL,
        n,
        &[Vals::F64(x.clone()), Vals::F64(m), Vals::F64(o), Vals::I32(nn)],
        &[Vals::F64(x), Vals::F64(mw), Vals::F64(ow), Vals::I32(nw)],
    );
}

#[parloop::kernel]
fn local_arrays_every_type(a: &i32, x: &f32, o: &mut [u64; 6], f: &mut [f32; 2]) {
    let mut b = [false; 3];
    b[1] = *a > 0;
    b[2] = !b[1];
    let mut u = [[0u32; 2]; 2];
    u[1][0] = *a as u32;
    u[0][1] = u[1][0] >> 3;
    let mut l = [0i64; 3];
    l[0] = *a as i64 * 3_000_000_000;
    l[2] = -l[0];
    let w = [[0.1, 0.2, 0.3]; 2];
    let mut ff = [[*x; 2]; 3];
    ff[2][1] *= w[1][2];
    let ul = [*a as u64; 4];
    let copy = u;
    u[0][0] = 7;
    o[0] = b[0] as u64 + 2 * b[1] as u64 + 4 * b[2] as u64;
    o[1] = copy[1][0] as u64 + copy[0][1] as u64 + copy[0][0] as u64;
    o[2] = (l[0] + l[2] + l[1]) as u64 ^ l[0] as u64;
    o[3] = ul[3] + (u.len() * 100 + u[0].len() * 10 + ff.len()) as u64;
    o[4] = ff[0].len() as u64 + w.len() as u64;
    o[5] = u[0][0] as u64;
    f[0] = ff[2][1] + w[0][0];
    f[1] = ff[0][0] * 0.3;
}

#[test]
fn local_arrays_of_every_scalar_type() {
    let a = vec![5, -9, 0, i32::MAX, i32::MIN];
    let x = vec![1.5f32, -0.1, 3.0e-20, 7.0, f32::MAX];
    let (mut ow, mut fw) = (Vec::new(), Vec::new());
    for e in 0..5 {
        let (mut o, mut f) = ([0u64; 6], [0f32; 2]);
        local_arrays_every_type(&a[e], &x[e], &mut o, &mut f);
        ow.extend(o);
        fw.extend(f);
    }
    check(
        local_arrays_every_type::KERNEL,
        5,
        &[Vals::I32(a.clone()), Vals::F32(x.clone()), Vals::U64(vec![0; 30]), Vals::F32(vec![0.0; 10])],
        &[Vals::I32(a), Vals::F32(x), Vals::U64(ow), Vals::F32(fw)],
    );
}

// ---------------------------------------------------------------------------
// Scalar semantics on random inputs (g++ through support::differential).
// ---------------------------------------------------------------------------

#[parloop::kernel]
fn f32_mixed(x: &f32, y: &f32, z: &f64, o: &mut [f32; 6], d: &mut [f64; 2]) {
    let k = 0.1;
    o[0] = *x * k + *y * 0.7 - 1e-3;
    o[1] = (*x as f64 * 0.1) as f32 - *y / 3.0;
    o[2] = (*z * 0.3) as f32 + *x;
    o[3] = x.mul_add(0.3, *y) + y.powi(2) - x.abs().sqrt();
    o[4] = x.min(*y) * 2.5 + x.max(0.1);
    o[5] = if *x > 0.1 { *x - 0.1 } else { *y + 0.1 };
    d[0] = (*x * 0.1) as f64 + *z * 0.1;
    d[1] = (*x + *y) as f64;
}

#[test]
fn f32_with_literals_and_casts_differential() {
    diff(f32_mixed::KERNEL, Floats::WithNan, Ints::Small, Compare::ZerosEqual);
}

#[test]
fn f32_with_literals_and_casts_device() {
    let n = 64;
    let mut r = support::Rng(12345);
    let x: Vec<f32> = (0..n).map(|_| ((r.unit() - 0.5) * 20.0) as f32).collect();
    let y: Vec<f32> = (0..n).map(|_| ((r.unit() - 0.5) * 200.0) as f32).collect();
    let z: Vec<f64> = (0..n).map(|_| (r.unit() - 0.5) * 1e3).collect();
    let (mut ow, mut dw) = (Vec::new(), Vec::new());
    for e in 0..n {
        let (mut o, mut d) = ([0f32; 6], [0f64; 2]);
        f32_mixed(&x[e], &y[e], &z[e], &mut o, &mut d);
        ow.extend(o);
        dw.extend(d);
    }
    check(
        f32_mixed::KERNEL,
        n,
        &[
            Vals::F32(x.clone()),
            Vals::F32(y.clone()),
            Vals::F64(z.clone()),
            Vals::F32(vec![0.0; 6 * n]),
            Vals::F64(vec![0.0; 2 * n]),
        ],
        &[Vals::F32(x), Vals::F32(y), Vals::F64(z), Vals::F32(ow), Vals::F64(dw)],
    );
}

#[parloop::kernel]
fn int_edges(
    a: &i32,
    b: &u32,
    c: &i64,
    d: &u64,
    o: &mut [i32; 5],
    p: &mut [u32; 3],
    q: &mut [i64; 3],
    r: &mut [u64; 3],
) {
    o[0] = a.abs();
    o[1] = *a * 3 - 7;
    o[2] = *a >> (*b % 40);
    o[3] = *a << 31;
    o[4] = (*a as i64 * 5) as i32;
    p[0] = *b - 1000;
    p[1] = (*b).max(7) * 3 + (*b).min(*b / 2);
    p[2] = *b << (*a & 63);
    q[0] = c.abs() - *c;
    q[1] = if *c % 3 != 0 { *c / 3 + *c % (-3) } else { *c };
    q[2] = (*c as u64 >> 1) as i64;
    r[0] = *d - *b as u64;
    r[1] = (*d as f64) as u64;
    r[2] = (*a as f32) as u64 + (-(*c as f64)) as u64;
}

#[test]
fn integer_edges_differential() {
    diff(int_edges::KERNEL, Floats::Finite, Ints::Full, Compare::Exact);
}

#[test]
fn integer_edges_device() {
    let a = vec![i32::MIN, i32::MAX, -1, 0, 7, -1000];
    let b = vec![0u32, u32::MAX, 999, 1001, 33, 64];
    let c = vec![i64::MIN, i64::MAX, -1, 0, -7, 1 << 40];
    let d = vec![0u64, u64::MAX, 5, 1 << 63, 12, 999];
    let n = a.len();
    let (mut ow, mut pw, mut qw, mut rw) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for e in 0..n {
        let (mut o, mut p, mut q, mut r) = ([0i32; 5], [0u32; 3], [0i64; 3], [0u64; 3]);
        int_edges(&a[e], &b[e], &c[e], &d[e], &mut o, &mut p, &mut q, &mut r);
        ow.extend(o);
        pw.extend(p);
        qw.extend(q);
        rw.extend(r);
    }
    check(
        int_edges::KERNEL,
        n,
        &[
            Vals::I32(a.clone()),
            Vals::U32(b.clone()),
            Vals::I64(c.clone()),
            Vals::U64(d.clone()),
            Vals::I32(vec![0; 5 * n]),
            Vals::U32(vec![0; 3 * n]),
            Vals::I64(vec![0; 3 * n]),
            Vals::U64(vec![0; 3 * n]),
        ],
        &[
            Vals::I32(a),
            Vals::U32(b),
            Vals::I64(c),
            Vals::U64(d),
            Vals::I32(ow),
            Vals::U32(pw),
            Vals::I64(qw),
            Vals::U64(rw),
        ],
    );
}

#[parloop::kernel]
fn float_to_int_edges(x: &f64, y: &f32, o: &mut [i32; 2], u: &mut [u32; 2], l: &mut [i64; 2], v: &mut [u64; 2]) {
    o[0] = (*x * 1e9) as i32;
    o[1] = (-*y * 1e9) as i32;
    u[0] = -*x as u32;
    u[1] = (*y * 4.3e9) as u32;
    l[0] = (*x * 1e19) as i64;
    l[1] = *y as i64;
    v[0] = (*x * 2e19) as u64;
    v[1] = (*y * 1e20) as u64;
}

#[test]
fn float_to_int_casts_saturate_differential() {
    diff(float_to_int_edges::KERNEL, Floats::WithNan, Ints::Small, Compare::Exact);
}

#[parloop::kernel]
fn transcendental_f32_more(x: &f32, y: &f32, o: &mut [f32; 8]) {
    o[0] = (x * 0.1).exp();
    o[1] = y.abs().powf(0.5);
    o[2] = x.powi(-2);
    o[3] = (x * 0.01).sin() * 2.0;
    o[4] = x.hypot(*y);
    o[5] = x.atan2(0.5);
    o[6] = (x.abs() + 1.0).ln() * 0.3;
    o[7] = x.signum() * y.round() + x.floor() - y.ceil();
}

#[test]
fn transcendental_f32_with_literals_differential() {
    diff(transcendental_f32_more::KERNEL, Floats::Small, Ints::Small, Compare::Ulps(2));
}
