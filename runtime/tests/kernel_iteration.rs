//! Reference locals, `for` over arrays, labelled loops, `matches!`/`if
//! let`, `assert_eq!`/`assert_ne!`, helpers returning arrays, and what
//! ported numerical code writes (iterator reductions, helpers taking
//! arrays by value, tuple fields, `T::from`, `std::cmp::max`,
//! `wrapping_*`) in kernels against Rust: the translation
//! compiled by the host C++ compiler on random inputs (bitwise), the device
//! backend and the lane-wise CPU path against `seq`, the panics' messages on
//! every backend, and NVRTC accepting every translation.
//!
//! The reference locals are the regression test of a silent wrong result:
//! `let r = &mut m[1]; r[0] = x;` was translated as a copy of the row, so
//! the write never reached `m` on the device (Rust's `seq` wrote it).

mod support;

#[path = "support/device.rs"]
mod device;
#[path = "support/vals.rs"]
mod vals;

use device::device_backend;
use parloop::{Backend, Kernel};
use support::{differential, nvrtc_available, nvrtc_check, Compare, Floats, Ints, Spec};
use vals::{run_on, seq_and_device, Vals};

fn diff(kernel: &'static Kernel, floats: Floats) {
    let spec = Spec { kernel, floats, ints: Ints::Full, compare: Compare::Exact };
    differential(&spec, 1000, 0x005E_ED0F_1A7E_u64 ^ kernel.name().len() as u64);
}

/// Deterministic inputs of every parameter for `n` elements.
fn inputs(kernel: &'static Kernel, n: usize) -> Vec<Vals> {
    kernel
        .params()
        .iter()
        .enumerate()
        .map(|(p, s)| {
            let len = n * s.len();
            match s.elem {
                parloop::ElemType::I32 => Vals::I32((0..len).map(|i| ((i * 7 + p) % 13) as i32 - 3).collect()),
                _ => Vals::F64((0..len).map(|i| ((i * 37 + p * 11) % 101) as f64 * 0.25 - 12.0).collect()),
            }
        })
        .collect()
}

/// `seq` equals the device backend and `threads` bitwise.
fn backends_agree(kernel: &'static Kernel) {
    let n = 67;
    let input = inputs(kernel, n);
    let (seq, dev) = seq_and_device(kernel, n, &input);
    let threads = run_on(Backend::Threads, kernel, n, &input).unwrap();
    for p in 0..seq.len() {
        assert_eq!(dev[p].bits(), seq[p].bits(), "{}: device vs seq, parameter {p}", kernel.name());
        assert_eq!(threads[p].bits(), seq[p].bits(), "{}: threads vs seq, parameter {p}", kernel.name());
    }
}

// ---------------------------------------------------------------------------
// Reference locals.
// ---------------------------------------------------------------------------

#[parloop::device]
fn bump_row(row: &mut [f64; 2], by: f64) {
    row[0] += by;
    row[1] -= by * 0.5;
}

#[parloop::device]
fn add_to(x: &mut f64, by: f64) {
    *x += by;
}

#[parloop::kernel]
fn ref_locals(a: &[f64; 3], m: &mut [[f64; 3]; 2], o: &mut [f64; 4]) {
    // A row of a parameter: writes reach the parameter.
    let r = &mut m[1];
    r[0] += a[0];
    *r = [r[2], r[1], r[0]];
    // A scalar element: assigned and incremented through the reference.
    let x = &mut o[0];
    *x = a[1] * 2.0;
    *x += 1.0;
    let y = &o[0];
    let v = *y + a[2] + y * 0.5;
    o[1] = v;
    // Rows of a local array, handed to helpers.
    let mut k = [[0.25f64; 2]; 2];
    let row = &mut k[1];
    bump_row(row, a[0]);
    let s = &mut o[2];
    add_to(s, a[2]);
    o[3] = k[1][0] + k[1][1] + k[0][0];
    // A reborrow and the parameter itself, moved into a local.
    let e = &mut *o;
    e[3] *= 2.0;
    let mm = m;
    mm[0][1] = -a[2];
}

#[test]
fn reference_locals_alias_their_place_as_in_rust() {
    diff(ref_locals::KERNEL, Floats::WithNan);
    backends_agree(ref_locals::KERNEL);
    // The values plain Rust gives, for one element.
    let a = [1.5, -2.0, 0.25];
    let (mut m, mut o) = ([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [0.0; 4]);
    ref_locals(&a, &mut m, &mut o);
    let input = vec![Vals::F64(a.to_vec()), Vals::F64(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), Vals::F64(vec![0.0; 4])];
    let (seq, dev) = seq_and_device(ref_locals::KERNEL, 1, &input);
    let want_m: Vec<f64> = m.iter().flatten().copied().collect();
    assert_eq!(seq[1], Vals::F64(want_m.clone()));
    assert_eq!(dev[1], Vals::F64(want_m), "the row written through `r` reaches `m` on the device");
    assert_eq!(dev[2], Vals::F64(o.to_vec()));
}

// ---------------------------------------------------------------------------
// `for` over arrays.
// ---------------------------------------------------------------------------

#[parloop::kernel]
fn iterate(a: &[f64; 3], b: &[f64; 2], m: &mut [[f64; 3]; 2], o: &mut [f64; 7]) {
    let mut s = 0.0;
    for x in a.iter() {
        s += x;
    }
    o[0] = s;
    for (i, &x) in a.iter().enumerate() {
        o[1] += x * (i as f64 + 1.0);
    }
    // Zip as long as the shorter, walked backwards.
    for (x, y) in a.iter().zip(b).rev() {
        o[2] = o[2] * 0.5 + x * y;
    }
    for row in m.iter_mut() {
        for v in row.iter_mut() {
            *v = v.abs() + 1.0;
        }
    }
    // A local array by value: a copy taken before the loop.
    let mut local = [a[2], a[1], a[0]];
    let mut acc = 0.0;
    for v in local {
        local[0] = 100.0;
        acc = acc * 2.0 + v;
    }
    o[3] = acc + local[0];
    for (i, row) in m.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            o[4] += v * (i * 3 + j) as f64;
        }
    }
    let mut c = f64::NEG_INFINITY;
    for x in a.iter().copied() {
        c = c.max(x);
    }
    o[5] = c;
    // The iterated row is fixed when the loop starts (`k` changes inside).
    let mut k = 0;
    for v in &m[k] {
        k = 1;
        o[6] += v * 0.5;
    }
    o[6] += k as f64;
    for (v, _) in o.iter_mut().zip(b) {
        *v -= 1.0;
    }
}

#[parloop::kernel]
fn iterate_bare(a: &[f64; 3], o: &mut [f64; 3]) {
    // A bare reference parameter yields references.
    for (x, y) in a.iter().zip(o.iter_mut()) {
        *y = *x * 2.0 - *y;
    }
    for x in o {
        *x += 0.5;
    }
}

#[test]
fn for_over_arrays_walks_them_as_rust_does() {
    for k in [iterate::KERNEL, iterate_bare::KERNEL] {
        diff(k, Floats::WithNan);
        diff(k, Floats::Small);
        backends_agree(k);
    }
    let a = [0.5, -3.0, 2.0];
    let b = [4.0, 1.0];
    let (mut m, mut o) = ([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], [0.0; 7]);
    iterate(&a, &b, &mut m, &mut o);
    let input = vec![
        Vals::F64(a.to_vec()),
        Vals::F64(b.to_vec()),
        Vals::F64(vec![1.0, -2.0, 3.0, -4.0, 5.0, -6.0]),
        Vals::F64(vec![0.0; 7]),
    ];
    let (seq, dev) = seq_and_device(iterate::KERNEL, 1, &input);
    assert_eq!(seq[3], Vals::F64(o.to_vec()));
    assert_eq!(dev[3], Vals::F64(o.to_vec()));
    assert_eq!(dev[2], Vals::F64(m.iter().flatten().copied().collect()));
}

// ---------------------------------------------------------------------------
// `matches!` and `if let`.
// ---------------------------------------------------------------------------

#[parloop::kernel]
fn sugar(c: &i32, d: &i32, b: &mut f64) {
    if matches!(*c, 1 | 2) {
        *b += 1.0;
    }
    let q = matches!(*c, 3..=7 if *d > 0);
    if q {
        *b += 2.0;
    }
    if let 0 = *d {
        *b += 4.0;
    } else if let -3..=-1 = *d {
        *b += 8.0;
    } else {
        *b += 16.0;
    }
    let v = if let n @ 0..=5 = *c { n * 2 } else { -1 };
    *b += v as f64;
    if let 9 = *c + *d {
        *b *= 3.0;
    }
}

#[test]
fn matches_and_if_let_are_their_match() {
    diff(sugar::KERNEL, Floats::Small);
    backends_agree(sugar::KERNEL);
}

// ---------------------------------------------------------------------------
// `assert_eq!` and `assert_ne!`.
// ---------------------------------------------------------------------------

#[parloop::kernel]
fn compared(a: &f64, o: &mut f64) {
    assert_eq!(a.signum(), 1.0, "a must be positive");
    assert_ne!(*a, 3.0);
    *o = a.sqrt();
}

#[test]
fn assert_eq_and_ne_panic_with_rusts_message_on_every_backend() {
    let good = vec![Vals::F64(vec![4.0, 9.0]), Vals::F64(vec![0.0; 2])];
    for b in [Backend::Seq, Backend::Threads, device_backend()] {
        assert_eq!(run_on(b, compared::KERNEL, 2, &good).unwrap()[1], Vals::F64(vec![2.0, 3.0]), "{b:?}");
    }
    for (a, message) in
        [(-4.0, "assertion `left == right` failed: a must be positive"), (3.0, "assertion `left != right` failed")]
    {
        let input = vec![Vals::F64(vec![4.0, a]), Vals::F64(vec![0.0; 2])];
        for b in [Backend::Seq, Backend::Threads, device_backend()] {
            let e = run_on(b, compared::KERNEL, 2, &input).expect_err("the assertion fails");
            assert!(e.contains(message) && e.contains("element 1"), "{b:?}: {e}");
        }
    }
}

#[test]
fn nvrtc_compiles_every_translation_without_warnings() {
    if !nvrtc_available() {
        return;
    }
    for k in
        [ref_locals::KERNEL, iterate::KERNEL, iterate_bare::KERNEL, sugar::KERNEL, compared::KERNEL, spread::KERNEL]
            .into_iter()
            .chain(PORTED)
    {
        nvrtc_check(k).unwrap_or_else(|e| panic!("{}: {e}", k.name()));
    }
}

// ---------------------------------------------------------------------------
// An increment written through `iter_mut`: still an INC kernel.
// ---------------------------------------------------------------------------

#[parloop::kernel]
fn spread(x: &[f64; 2], acc: &mut [f64; 2]) {
    for (a, v) in acc.iter_mut().zip(x) {
        *a += v * 0.5;
    }
}

#[test]
fn increments_through_iter_mut_are_inc_on_every_backend() {
    use parloop::{Access, Runtime};
    // A ring of 40 edges over 40 nodes; values are multiples of 1/2 so
    // every summation order gives the same bits.
    let (n, e) = (40usize, 40usize);
    let map: Vec<i32> = (0..e).flat_map(|i| [i as i32, ((i * 7 + 3) % n) as i32]).collect();
    let x: Vec<f64> = (0..2 * e).map(|i| (i % 9) as f64 - 4.0).collect();
    let mut want = vec![0.0; 2 * n];
    for k in 0..e {
        for col in 0..2 {
            let node = map[2 * k + col] as usize;
            for c in 0..2 {
                want[2 * node + c] += x[2 * k + c] * 0.5;
            }
        }
    }
    for backend in [Backend::Seq, Backend::Threads, device_backend()] {
        let rt = Runtime::with_backend(backend).unwrap();
        let edges = rt.set("edges", e).unwrap();
        let nodes = rt.set("nodes", n).unwrap();
        let m = rt.map("m", &edges, &nodes, 2, map.clone()).unwrap();
        let xd = rt.dat("x", &edges, 2, x.clone()).unwrap();
        let acc = rt.dat("acc", &nodes, 2, vec![0.0; 2 * n]).unwrap();
        for col in 0..2 {
            rt.par_loop(spread::KERNEL, &edges, &[xd.arg(Access::READ), acc.arg_via(&m, col, Access::INC)])
                .unwrap_or_else(|err| panic!("{backend:?}: {err}"));
        }
        assert_eq!(acc.values().unwrap(), want, "{backend:?}");
    }
}

// ---------------------------------------------------------------------------
// Helpers returning arrays.
// ---------------------------------------------------------------------------

#[parloop::device]
fn cross(a: &[f64; 3], b: &[f64; 3]) -> [f64; 3] {
    [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
}

/// A nested result, an early `return` of one, and a panic on the way.
#[parloop::device]
fn jacobian(x: &[[f64; 2]; 3]) -> [[f64; 2]; 2] {
    if x[0][0].is_nan() {
        return [[0.0; 2]; 2];
    }
    assert!(x[1][1] != 1234.5, "degenerate triangle");
    let mut j = [[0.0; 2]; 2];
    for r in 0..2 {
        for c in 0..2 {
            j[r][c] = x[c + 1][r] - x[0][r];
        }
    }
    j
}

#[parloop::kernel]
fn array_results(a: &[f64; 3], b: &[f64; 3], x: &[[f64; 2]; 3], n: &mut [f64; 3], j: &mut [[f64; 2]; 2], d: &mut f64) {
    let c: [f64; 3] = cross(a, b);
    // The result replaces `n` after the call reads it (Rust evaluates the
    // value first).
    *n = cross(&c, n);
    n[0] += c[1];
    *j = jacobian(x);
    let k: [[f64; 2]; 2] = jacobian(x);
    *d = k[0][0] * k[1][1] - k[0][1] * k[1][0];
}

#[test]
fn helpers_return_arrays_as_rust_does() {
    diff(array_results::KERNEL, Floats::WithNan);
    diff(array_results::KERNEL, Floats::Small);
    backends_agree(array_results::KERNEL);
    // The helper's panic, on every backend.
    let input = |y: f64| {
        vec![
            Vals::F64(vec![1.0, 2.0, 3.0]),
            Vals::F64(vec![0.5, -1.0, 2.0]),
            Vals::F64(vec![0.0, 0.0, 1.0, y, 0.25, 1.0]),
            Vals::F64(vec![1.0, 1.0, 1.0]),
            Vals::F64(vec![0.0; 4]),
            Vals::F64(vec![0.0]),
        ]
    };
    for b in [Backend::Seq, Backend::Threads, device_backend()] {
        run_on(b, array_results::KERNEL, 1, &input(1.0)).unwrap_or_else(|e| panic!("{b:?}: {e}"));
        let e = run_on(b, array_results::KERNEL, 1, &input(1234.5)).expect_err("the helper panics");
        assert!(e.contains("degenerate triangle") && e.contains("element 0"), "{b:?}: {e}");
    }
}

// ---------------------------------------------------------------------------
// Bare loops over reference locals (a review found them iterating copies).
// ---------------------------------------------------------------------------

/// `for row in rows` where `rows` is a reference local, a parameter whose
/// name a pattern elsewhere shadows, planes from `iter_mut` walked bare,
/// an `else if let` after a plain `if`, and bindings the body never reads.
#[allow(clippy::unused_enumerate_index)]
#[parloop::kernel]
fn bare_locals(m: &mut [[f64; 3]; 2], w: &[f64; 2], n: &i32, out: &mut [f64; 3]) {
    let rows = &mut *m;
    for row in rows {
        row[0] += 1.0;
    }
    for (s, row) in w.iter().zip(&mut *m) {
        row[1] = *s * 2.0;
    }
    let mut t = [[[0.0; 2]; 2]; 2];
    for plane in t.iter_mut() {
        for row in plane {
            row[0] = 1.5;
        }
    }
    out[0] = t[1][1][0] + t[0][0][1];
    let local = [w[1], w[0]];
    for v in local {
        out[1] += v;
    }
    if out[1] > 100.0 {
        out[2] = 1.0;
    } else if let 2 | 3 = *n {
        out[2] = 2.0;
    }
    for (_i, x) in w.iter().enumerate() {
        out[2] += x;
    }
    for _x in w.iter() {
        out[2] += 0.25;
    }
    let shadow = matches!(*n, m if m > 2);
    if shadow {
        out[0] += 10.0;
    }
}

#[test]
fn bare_loops_over_reference_locals_write_through() {
    diff(bare_locals::KERNEL, Floats::Small);
    backends_agree(bare_locals::KERNEL);
    let (mut m, w, mut out) = ([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [0.5, -1.0], [0.0; 3]);
    bare_locals(&mut m, &w, &3, &mut out);
    let input = vec![
        Vals::F64(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        Vals::F64(w.to_vec()),
        Vals::I32(vec![3]),
        Vals::F64(vec![0.0; 3]),
    ];
    let (seq, dev) = seq_and_device(bare_locals::KERNEL, 1, &input);
    let want_m: Vec<f64> = m.iter().flatten().copied().collect();
    assert_eq!(seq[0], Vals::F64(want_m.clone()));
    assert_eq!(dev[0], Vals::F64(want_m), "rows written through a reference local reach `m` on the device");
    assert_eq!(dev[3], Vals::F64(out.to_vec()));
}

// ---------------------------------------------------------------------------
// Array loops in a kernel whose host form carries pins.
// ---------------------------------------------------------------------------

#[parloop::device]
fn halve(x: f64) -> f64 {
    x * 0.5
}

/// `halve(..) * 2.0` computes at a type only the helper's signature gives:
/// the translation assumes `f64` and pins it in the host function, which
/// is then the rewritten form, array loops included (valid Rust:
/// `&mut a[..]`).
#[parloop::kernel]
fn pinned_loops(a: &mut [f64; 3], m: &mut [[f64; 3]; 2], s: &mut f64) {
    for x in a.iter_mut() {
        *x = halve(*x) * 2.0 + 1.0;
    }
    for row in m.iter_mut() {
        for v in row.iter_mut() {
            *v = halve(*v) * 3.0;
        }
    }
    for (i, x) in a.iter().enumerate() {
        *s += halve(*x) * i as f64;
    }
}

#[test]
fn array_loops_with_pinned_helper_results_compile_and_agree() {
    diff(pinned_loops::KERNEL, Floats::Small);
    backends_agree(pinned_loops::KERNEL);
}

// ---------------------------------------------------------------------------
// Labelled loops.
// ---------------------------------------------------------------------------

/// `break 'a` and `continue 'a` out of inner loops of every kind (C++
/// `goto`s past the loop or to the end of its body), declarations after
/// the jumps included, an array loop among them.
#[parloop::kernel]
fn labelled(a: &[f64; 4], n: &i32, out: &mut [f64; 3]) {
    'rows: for i in 0..4 {
        for j in 0..4 {
            if a[j] > a[i] {
                continue 'rows;
            }
            if j > 2 && a[i] < 0.0 {
                break 'rows;
            }
            let w = a[j] * 0.5;
            out[0] += w;
        }
        let tail = a[i] + 1.0;
        out[0] += tail;
    }
    let mut k = 0;
    'outer: while k < 8 {
        k += 1;
        let mut m = 0;
        loop {
            m += 1;
            if m > k {
                continue 'outer;
            }
            if m * k > *n {
                break 'outer;
            }
            let p = (m * k) as f64;
            out[1] += p;
        }
    }
    'scan: for (i, x) in a.iter().enumerate().rev() {
        for y in a.iter() {
            if *y > *x + 10.0 {
                continue 'scan;
            }
        }
        if *x > 2.0 {
            out[2] = i as f64;
            break 'scan;
        }
        out[2] -= 1.0;
    }
}

#[test]
fn labelled_loops_jump_as_rust_does() {
    diff(labelled::KERNEL, Floats::Small);
    backends_agree(labelled::KERNEL);
}

// ---------------------------------------------------------------------------
// `debug_assert!`: as the build profile has it, on every backend.
// ---------------------------------------------------------------------------

#[parloop::kernel]
fn debug_checked(a: &f64, o: &mut f64) {
    // Read only by the assertion: still named in release (no unused C++
    // local), as Rust's release expansion names it.
    let twice = *a * 2.0;
    debug_assert!(twice >= 0.0, "a is negative");
    debug_assert_ne!(*a, 2.0);
    *o = a.abs().sqrt();
}

#[test]
fn debug_asserts_follow_the_build_profile_on_every_backend() {
    let input = |a: f64| vec![Vals::F64(vec![4.0, a]), Vals::F64(vec![0.0; 2])];
    for b in [Backend::Seq, Backend::Threads, device_backend()] {
        assert_eq!(run_on(b, debug_checked::KERNEL, 2, &input(9.0)).unwrap()[1], Vals::F64(vec![2.0, 3.0]));
        for (a, message) in [(-1.0, "a is negative"), (2.0, "assertion `left != right` failed")] {
            let got = run_on(b, debug_checked::KERNEL, 2, &input(a));
            if cfg!(debug_assertions) {
                let e = got.expect_err("a debug build checks");
                assert!(e.contains(message) && e.contains("element 1"), "{b:?}: {e}");
            } else {
                // Release: not evaluated, on the device either.
                let o = got.unwrap_or_else(|e| panic!("{b:?}: {e}"));
                assert_eq!(o[1], Vals::F64(vec![2.0, a.abs().sqrt()]), "{b:?}");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Effects in array places and sources run once (a review found a row's
// index evaluated once per element).
// ---------------------------------------------------------------------------

#[parloop::device]
fn next(c: &mut u32) -> usize {
    *c += 1;
    (*c - 1) as usize
}

/// Another helper's array result as a tail and as a `return`.
#[parloop::device]
fn cross_or_zero(a: &[f64; 3], b: &[f64; 3]) -> [f64; 3] {
    if a[0] > 100.0 {
        return cross(b, a);
    }
    cross(a, b)
}

#[allow(clippy::into_iter_on_ref)]
#[parloop::kernel]
fn effects_once(a: &[f64; 3], b: &[f64; 3], m: &mut [[f64; 3]; 4], out: &mut [f64; 3]) {
    let mut c = 0u32;
    m[next(&mut c)] = cross_or_zero(a, b);
    m[next(&mut c)] = [a[0], b[0], 1.0];
    let r: [f64; 3] = m[next(&mut c)];
    out[0] = r[0] + c as f64;
    for _ in m[next(&mut c)].iter() {
        out[1] += 1.0;
    }
    out[1] += c as f64;
    // The value is read before the place's index runs.
    let rows = [[a[0], a[1], a[2]], [b[0], b[1], b[2]]];
    let mut d = 0u32;
    m[next(&mut d) + 2] = rows[d as usize];
    let row = &m[0];
    for mut x in row.into_iter().copied() {
        x += 1.0;
        out[2] += x;
    }
}

#[test]
fn effects_in_array_places_and_sources_run_once() {
    diff(effects_once::KERNEL, Floats::Small);
    backends_agree(effects_once::KERNEL);
}

// ---------------------------------------------------------------------------
// What ported numerical code writes: iterator reductions, arrays by value,
// tuple fields, conversions, `std::cmp`, wrapping arithmetic.
// ---------------------------------------------------------------------------

/// The kernels of this part, for NVRTC.
const PORTED: [&Kernel; 9] = [
    short_circuits::KERNEL,
    reductions::KERNEL,
    int_reductions::KERNEL,
    lane_sums::KERNEL,
    pinned_sums::KERNEL,
    by_value::KERNEL,
    guarded_by_value::KERNEL,
    tuple_fields::KERNEL,
    integer_forms::KERNEL,
];

#[parloop::device]
fn norm2(v: [f64; 3]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>()
}

#[parloop::kernel]
fn reductions(a: &[f64; 3], b: &[f64; 3], o: &mut [f64; 11]) {
    o[0] = a.iter().sum::<f64>();
    let p: f64 = a.iter().product();
    o[1] = p;
    o[2] = a.iter().zip(b.iter()).map(|(x, y)| x * y).sum::<f64>();
    o[3] = a.iter().fold(0.0, |acc, &v| acc + v);
    o[4] = a.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    o[5] = if a.iter().any(|v| v.is_nan()) { 1.0 } else { 0.0 };
    o[6] = if b.iter().all(|&v| v > 0.0) { 1.0 } else { -1.0 };
    // Two maps, an index, a reversed walk, a reduction inside a closure.
    o[7] = a.iter().enumerate().map(|(i, v)| v * i as f64).map(|w| w.abs()).sum::<f64>();
    o[8] = a.iter().rev().fold(1.0, |acc, v| acc * 0.5 + v);
    o[9] = b.iter().map(|&y| a.iter().map(|x| x * y).sum::<f64>()).product::<f64>();
    o[10] = norm2(*a) + a.iter().copied().map(f64::abs).fold(0.0, f64::max);
}

/// Integer sums and products wrap on the device as release Rust's do;
/// the inputs here stay in range, so debug builds agree too.
#[parloop::kernel]
fn int_reductions(n: &[i32; 3], m: &mut [i32; 5]) {
    m[0] = n.iter().sum();
    m[1] = n.iter().product::<i32>();
    m[2] = n.iter().map(|&k| k.wrapping_mul(k)).sum::<i32>();
    m[3] = n.iter().fold(i32::MIN, |acc, &k| acc.max(k));
    m[4] = if n.iter().all(|k| *k != 0) { 1 } else { 0 } + n.iter().map(|&k| k as f64).sum::<f64>() as i32;
}

/// Float parameters only, where a kernel may have a lane-wise twin (the
/// twin declines array loops' reference locals today: `threads` runs it
/// scalar, and must agree bitwise all the same).
#[parloop::kernel]
fn lane_sums(a: &[f64; 4], o: &mut [f64; 2]) {
    o[0] = a.iter().map(|v| v * v).sum::<f64>() + a.iter().fold(0.0, |s, &v| s + v * 0.5);
    o[1] = a.iter().product::<f64>();
}

/// `halve(3.0) * 2.0` is computed at a type only the helper gives: the
/// host runs the normal form, sums included (their start a Rust literal).
#[parloop::kernel]
fn pinned_sums(a: &[f64; 3], o: &mut [f64; 2]) {
    let q = halve(3.0) * 2.0;
    if q > 1.0 {
        o[0] = a.iter().sum::<f64>();
    }
    o[1] = a.iter().map(|v| halve(*v)).product::<f64>();
}

#[test]
fn iterator_reductions_compute_what_rust_does() {
    for k in [reductions::KERNEL, lane_sums::KERNEL, pinned_sums::KERNEL] {
        diff(k, Floats::WithNan);
        diff(k, Floats::Small);
        backends_agree(k);
    }
    let small =
        Spec { kernel: int_reductions::KERNEL, floats: Floats::Small, ints: Ints::Small, compare: Compare::Exact };
    differential(&small, 1000, 0x1A7);
    backends_agree(int_reductions::KERNEL);
    // A sum of zeros of both signs starts where Rust's does (`-0.0`, so
    // that a sum of `-0.0`s is `-0.0`), and every backend agrees.
    for zeros in [[-0.0, -0.0, -0.0], [-0.0, 0.0, -0.0]] {
        let mut o = [0.0; 11];
        reductions(&zeros, &zeros, &mut o);
        let input = vec![Vals::F64(zeros.to_vec()), Vals::F64(zeros.to_vec()), Vals::F64(vec![0.0; 11])];
        let (seq, dev) = seq_and_device(reductions::KERNEL, 1, &input);
        assert_eq!(seq[2].bits(), Vals::F64(o.to_vec()).bits(), "{zeros:?}");
        assert_eq!(dev[2].bits(), Vals::F64(o.to_vec()).bits(), "{zeros:?}");
        let threads = run_on(Backend::Threads, reductions::KERNEL, 1, &input).unwrap();
        assert_eq!(threads[2].bits(), Vals::F64(o.to_vec()).bits(), "{zeros:?}");
    }
    assert!(pinned_sums::KERNEL.device_fn().is_some());
}

#[parloop::device]
fn dot3(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// Changes its own copy, and returns it.
#[parloop::device]
fn scaled(mut v: [f64; 3], s: f64) -> [f64; 3] {
    for x in v.iter_mut() {
        *x *= s;
    }
    v
}

#[parloop::device]
fn trace2(m: [[f64; 2]; 2]) -> f64 {
    m[0][0] + m[1][1]
}

/// Writes `out` before reading `a`: passed `(*x, x)`, `a` is the copy of
/// `x` made before the call, as in Rust.
#[parloop::device]
fn overwrite(a: [f64; 3], out: &mut [f64; 3]) -> f64 {
    out[0] = 100.0;
    a[0] + dot3(a, a)
}

#[parloop::kernel]
fn by_value(x: &mut [f64; 3], m: &[[f64; 2]; 2], o: &mut [f64; 5]) {
    let v = [1.0, -2.0, 0.5];
    o[0] = dot3(*x, v);
    o[1] = dot3([x[2], x[1], x[0]], scaled(v, 2.0));
    o[2] = trace2(*m);
    let w: [f64; 3] = scaled(*x, 0.5);
    o[3] = w[0] + w[2] + v[0];
    o[4] = overwrite(*x, x);
}

#[test]
fn helpers_take_arrays_by_value_as_copies() {
    diff(by_value::KERNEL, Floats::WithNan);
    diff(by_value::KERNEL, Floats::Small);
    backends_agree(by_value::KERNEL);
    let (mut x, m, mut o) = ([1.5, -2.0, 3.0], [[1.0, 2.0], [3.0, 4.0]], [0.0; 5]);
    by_value(&mut x, &m, &mut o);
    let input = vec![Vals::F64(vec![1.5, -2.0, 3.0]), Vals::F64(vec![1.0, 2.0, 3.0, 4.0]), Vals::F64(vec![0.0; 5])];
    let (seq, dev) = seq_and_device(by_value::KERNEL, 1, &input);
    assert_eq!(o[4], 1.5 + (1.5 * 1.5 + 4.0 + 9.0), "Rust reads the copy");
    assert_eq!(seq[2], Vals::F64(o.to_vec()));
    assert_eq!(dev[2], Vals::F64(o.to_vec()), "the helper reads its copy on the device");
    assert_eq!(dev[0], Vals::F64(x.to_vec()));
}

#[parloop::device]
fn first(r: [f64; 3]) -> f64 {
    r[0]
}

/// A by-value array argument in one branch of an `if` value: its copy
/// (`m[i]`) is made only where Rust evaluates it, when the branch is taken.
#[parloop::kernel]
fn guarded_by_value(k: &[i32; 1], m: &[[f64; 3]; 2], o: &mut [f64; 2]) {
    let i = (k[0] & 3) as usize;
    o[0] = if i < 2 { first(m[i]) } else { 0.0 };
    o[1] = if i >= 2 { -1.0 } else { first(m[i]) };
}

#[test]
fn by_value_arguments_are_copied_only_in_the_branch_taken() {
    diff(guarded_by_value::KERNEL, Floats::WithNan);
    backends_agree(guarded_by_value::KERNEL);
    // `m[3]` is out of range, in the branch not taken: no panic anywhere.
    let m = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
    for (k, want) in [(3, [0.0, -1.0]), (1, [4.0, 4.0])] {
        let mut o = [9.0; 2];
        guarded_by_value(&[k], &m, &mut o);
        assert_eq!(o, want);
        let input = vec![Vals::I32(vec![k]), Vals::F64(m.concat()), Vals::F64(vec![9.0; 2])];
        let (seq, dev) = seq_and_device(guarded_by_value::KERNEL, 1, &input);
        assert_eq!(seq[2], Vals::F64(o.to_vec()));
        assert_eq!(dev[2], Vals::F64(o.to_vec()), "k = {k}: the device takes the same branch");
        let threads = run_on(Backend::Threads, guarded_by_value::KERNEL, 1, &input).unwrap();
        assert_eq!(threads[2], Vals::F64(o.to_vec()));
    }
}

/// Right operands of `&&`/`||` that hoist statements (a block, a
/// reduction's loop, a by-value copy) run only when Rust evaluates them:
/// a division by zero, or a row out of range, in the operand not
/// evaluated panics nowhere. (Refused before: "must be a plain
/// expression".)
#[parloop::kernel]
fn short_circuits(k: &[i32; 2], m: &[[f64; 3]; 2], o: &mut [f64; 4]) {
    let (a, b) = (k[0], k[1] & 7);
    let big = b != 0 && {
        let q = a / b;
        q > 2
    };
    o[0] = if big { 1.0 } else { 0.0 };
    let i = b as usize;
    let positive = i < 2 && m[i].iter().all(|v| *v > 0.0);
    let any_nan = i >= 2 || m[i].iter().any(|v| v.is_nan()) || first(m[i]) > 1.0;
    o[1] = if positive { 1.0 } else { -1.0 };
    o[2] = if any_nan { 2.0 } else { -2.0 };
    o[3] = if i < 2 && m[i].iter().sum::<f64>() > 0.0 || a < 0 { 3.0 } else { -3.0 };
}

#[test]
fn short_circuit_operands_that_hoist_run_only_when_evaluated() {
    diff(short_circuits::KERNEL, Floats::WithNan);
    backends_agree(short_circuits::KERNEL);
    let m = [[1.0, 2.0, 3.0], [-4.0, f64::NAN, 6.0]];
    for k in [[7, 0], [7, 2], [9, 3], [-5, 1], [6, 1]] {
        let mut o = [9.0; 4];
        short_circuits(&k, &m, &mut o);
        let input = vec![Vals::I32(k.to_vec()), Vals::F64(m.concat()), Vals::F64(vec![9.0; 4])];
        let (seq, dev) = seq_and_device(short_circuits::KERNEL, 1, &input);
        assert_eq!(seq[2].bits(), Vals::F64(o.to_vec()).bits(), "k = {k:?}");
        assert_eq!(dev[2].bits(), Vals::F64(o.to_vec()).bits(), "k = {k:?}: the device evaluates the same operands");
        let threads = run_on(Backend::Threads, short_circuits::KERNEL, 1, &input).unwrap();
        assert_eq!(threads[2].bits(), Vals::F64(o.to_vec()).bits(), "k = {k:?}");
    }
}

#[parloop::kernel]
fn tuple_fields(a: &[f64; 2], o: &mut [f64; 4]) {
    let mut t = if a[0] > a[1] { (a[0], a[1]) } else { (a[1], a[0]) };
    t.1 *= 2.0;
    o[0] = t.0 - t.1;
    o[1] = a[0].sin_cos().0 + a[1].sin_cos().1;
    let polar = (a[0].hypot(a[1]), a[1].atan2(a[0]));
    o[2] = polar.0 * polar.1;
    t = (t.1, t.0);
    o[3] = t.0 + 0.5 * t.1;
}

#[test]
fn tuple_fields_are_their_elements() {
    for floats in [Floats::WithNan, Floats::Small] {
        let spec = Spec { kernel: tuple_fields::KERNEL, floats, ints: Ints::Full, compare: Compare::Ulps(2) };
        differential(&spec, 1000, 0x7u64);
    }
    // Bitwise: the device's `sin`/`cos` are the host's libm here.
    backends_agree(tuple_fields::KERNEL);
}

/// `wrapping_*` (integer `+ - *` wrap on the device), `T::from` (a
/// lossless `as`), `std::cmp::max`/`min` (integer `max`/`min`), over the
/// integers' extremes.
#[parloop::kernel]
fn integer_forms(n: &[i32; 2], x: &[f64; 1], o: &mut [f64; 6], k: &mut [i32; 3]) {
    let u = n[0] as u32;
    let w = i64::from(n[0]) * 3_000_000_000;
    k[0] = n[0].wrapping_add(n[1]);
    k[1] = n[0].wrapping_sub(n[1]).wrapping_mul(n[1]);
    k[2] = std::cmp::max(n[0], n[1]).wrapping_sub(core::cmp::min(7, n[1]).wrapping_add(1));
    o[0] = f64::from(u.wrapping_mul(u).wrapping_sub(3)) + f64::from(std::cmp::min(u, 9));
    o[1] = w.wrapping_mul(w).wrapping_add(i64::from(u)) as f64;
    o[2] = (i64::from(n[0]) + i64::from(n[1])) as f64;
    o[3] = f64::from(n[1]) * 0.5 + f64::from(x[0] as f32);
    o[4] = f64::from(std::cmp::max(2, u)) + f64::from(true) + f64::from(n[0] > 0);
    o[5] = (0usize.wrapping_sub(1) as f64) + (n[0] as usize).wrapping_add(3) as f64;
}

#[test]
fn wrapping_conversions_and_cmp_agree_with_rust_at_the_extremes() {
    diff(integer_forms::KERNEL, Floats::WithNan);
    backends_agree(integer_forms::KERNEL);
}
