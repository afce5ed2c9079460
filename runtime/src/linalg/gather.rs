//! The host product's rows with AVX2 gathers (`f64` matrices on x86-64).
//!
//! The scalar row (`CsrRef::row`) spends per entry a column load, a bounds
//! check, the load of `x` and a multiply-add: on two cores its instruction
//! stream, not memory, bounds the product (a narrower column index, 16-bit
//! offsets that move a sixth fewer bytes, measured no faster). Here four
//! entries take one load of their columns, one gather of their `x` values,
//! one load of their values, a multiply and an add: about a tenth less
//! time per product on the reference problem (docs/PERFORMANCE.md,
//! session 14). The loops over rows live here too, not only the row: a
//! call from code compiled without AVX2 into a `target_feature` function
//! is not inlined, and a call per row would cost more than it saves.
//!
//! Bitwise the scalar row: lane `j` of the accumulator adds entries `j`,
//! `j + 4`, ... as the scalar row's `acc[j]` does, the tail goes into lane
//! 0, the lanes are summed `(0 + 1) + (2 + 3)`, and multiply and add stay
//! separate (no fused multiply-add), so every backend and
//! `PARLOOP_SIMD=0` give the same results.

use std::arch::x86_64::{
    __m256d, _mm256_add_pd, _mm256_i32gather_pd, _mm256_loadu_pd, _mm256_mul_pd, _mm256_setzero_pd, _mm256_storeu_pd,
    _mm_loadu_si128,
};

/// Row `i`'s product with `x`.
///
/// # Safety
/// The CPU has AVX2; `row_ptr[i + 1] <= cols.len() == vals.len()`,
/// `row_ptr[i] <= row_ptr[i + 1]`; every column index is below `x.len()`
/// and at most `i32::MAX` (the gather's indices are signed 32-bit).
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn row(row_ptr: &[usize], cols: &[u32], vals: &[f64], i: usize, x: &[f64]) -> f64 {
    let (s, e) = (row_ptr[i], row_ptr[i + 1]);
    let (cols, vals) = (&cols[s..e], &vals[s..e]);
    let quads = vals.len() / 4 * 4;
    let mut acc: __m256d = _mm256_setzero_pd();
    let mut k = 0;
    while k < quads {
        // SAFETY: `k + 4 <= quads <= len` for both slices (unaligned
        // loads); the four columns index `x` in bounds (the contract).
        unsafe {
            let idx = _mm_loadu_si128(cols.as_ptr().add(k).cast());
            let xs = _mm256_i32gather_pd::<8>(x.as_ptr(), idx);
            let vs = _mm256_loadu_pd(vals.as_ptr().add(k));
            acc = _mm256_add_pd(acc, _mm256_mul_pd(vs, xs));
        }
        k += 4;
    }
    let mut lanes = [0.0f64; 4];
    // SAFETY: `lanes` holds four values.
    unsafe { _mm256_storeu_pd(lanes.as_mut_ptr(), acc) };
    for (&c, &v) in cols[quads..].iter().zip(&vals[quads..]) {
        lanes[0] += v * x[c as usize];
    }
    (lanes[0] + lanes[1]) + (lanes[2] + lanes[3])
}

/// `y[k] = (A x)[first + k]` for every `k` of `y`.
///
/// # Safety
/// As [`row`], for rows `first..first + y.len()`.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn mult_rows(row_ptr: &[usize], cols: &[u32], vals: &[f64], first: usize, x: &[f64], y: &mut [f64]) {
    for (k, yi) in y.iter_mut().enumerate() {
        // SAFETY: forwarded contract.
        *yi = unsafe { row(row_ptr, cols, vals, first + k, x) };
    }
}

/// As [`mult_rows`], returning `sum x[first + k] y[k]` added in row order.
///
/// # Safety
/// As [`mult_rows`]; `x` holds at least `first + y.len()` values.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn mult_rows_dot(
    row_ptr: &[usize],
    cols: &[u32],
    vals: &[f64],
    first: usize,
    x: &[f64],
    y: &mut [f64],
) -> f64 {
    let xs = &x[first..first + y.len()];
    let mut sum = 0.0;
    for (k, (yi, &xi)) in y.iter_mut().zip(xs).enumerate() {
        // SAFETY: forwarded contract.
        let v = unsafe { row(row_ptr, cols, vals, first + k, x) };
        *yi = v;
        sum += xi * v;
    }
    sum
}
