//! The product fused with the dot a solver takes of it right after
//! (`p . Ap` in CG): the rows read `x[i]` (their diagonal column) and write
//! `y[i]` anyway, so the dot costs no pass over memory of its own.
//!
//! Deterministic: each chunk of rows (the product's chunks,
//! `CsrRef::chunks`) adds its terms in row order, and the chunks' sums are
//! added in chunk order, on `seq` as on `threads`: the sum does not depend
//! on the thread count, and the two backends agree bitwise. (It groups the
//! additions unlike [`Runtime::dot`], so the two differ in the last bits.)
//! Under MPI each rank sums its rows so (the rows before the halo's, then
//! the rest) and one all-reduce adds the ranks' sums.

use rayon::prelude::*;

use super::spmv::{check_product, CsrRef};
use super::Real;
use crate::decl::Dat;
use crate::error::Result;
use crate::matrix::Mat;
use crate::runtime::Runtime;

impl<T: Real> CsrRef<'_, T> {
    /// `y[i] = (A x)[i]` for the rows `rows` (`y` holds every row; the
    /// others are left as they are), returning `sum x[i] y[i]` over them:
    /// a square matrix, `x` at least `rows.end` long. In parallel over the
    /// product's chunks of rows when `parallel`. Call [`CsrRef::check`]
    /// first.
    pub fn mult_range_dot(&self, rows: std::ops::Range<usize>, x: &[T], y: &mut [T], parallel: bool) -> T {
        // The chunks of the whole matrix, cut to the range (as the product).
        let mut cuts: Vec<usize> = self.chunks().into_iter().map(|c| c.clamp(rows.start, rows.end)).collect();
        cuts.dedup();
        let mut pieces: Vec<(usize, &mut [T])> = Vec::with_capacity(cuts.len());
        let mut rest = &mut y[rows];
        for w in cuts.windows(2) {
            let (head, tail) = rest.split_at_mut(w[1] - w[0]);
            pieces.push((w[0], head));
            rest = tail;
        }
        let gathers = self.gathers(x);
        let piece = |(first, ys): (usize, &mut [T])| -> T {
            #[cfg(target_arch = "x86_64")]
            if gathers {
                // (`T` is `f64`: the casts keep every slice as it is.)
                let (vals, xf) = (bytemuck::cast_slice(self.vals), bytemuck::cast_slice(x));
                // SAFETY: `gathers` checked AVX2 and that every column
                // indexes `x` within 32 bits; `check` the row pointers; `x`
                // holds the square matrix's rows.
                let sum = unsafe {
                    super::gather::mult_rows_dot(self.row_ptr, self.cols, vals, first, xf, bytemuck::cast_slice_mut(ys))
                };
                return bytemuck::cast(sum);
            }
            let xs = &x[first..first + ys.len()];
            let mut sum = T::ZERO;
            for (k, (yi, &xi)) in ys.iter_mut().zip(xs).enumerate() {
                let v = self.row(first + k, x);
                *yi = v;
                sum = sum + xi * v;
            }
            sum
        };
        let sums: Vec<T> = if parallel {
            pieces.into_par_iter().map(piece).collect()
        } else {
            pieces.into_iter().map(piece).collect()
        };
        sums.into_iter().fold(T::ZERO, |a, b| a + b)
    }
}

impl Runtime {
    /// `y = A x`, returning `x . y` ([`LinearOperator::apply_dot`] of a
    /// [`Mat`]): in one pass over the matrix on `seq` and `threads`, on one
    /// rank or several (each rank's rows, then one all-reduce of the
    /// ranks' sums); on a device, or for a matrix that is not square,
    /// [`Runtime::mult`] then [`Runtime::dot`].
    ///
    /// [`LinearOperator::apply_dot`]: super::LinearOperator::apply_dot
    pub(crate) fn mult_dot<T: Real>(&self, a: &Mat<T>, x: &Dat<T>, y: &Dat<T>) -> Result<T> {
        let s = a.sparsity();
        let checked = check_product(a, x, y).and_then(|()| x.check_poison());
        let sets = [s.row_set(), x.set(), y.set()];
        crate::Set::agreed_among(sets, &format!("mult+dot of matrix `{}`", a.name()), checked, "")?;
        let square = s.row_set() == s.col_set() && s.row_dim() == s.col_dim();
        if !square || self.device().is_some() {
            // Agreed above: the two need not agree again.
            let _agreed = crate::decl::ChecksAgreed::enter();
            self.mult(a, x, y)?;
            return self.dot(x, y);
        }
        super::spmv::force_operands(a, &[x], &[y])?;
        let mine =
            self.library_op(("mult+dot", a.name()), super::spmv::product_bytes(a), || self.mult_host(a, x, y, true))?;
        let mut total = [mine.to_f64()];
        self.dist.sum_over_ranks(y.set(), &mut total)?;
        // One rank: the sum as it is (`T` to `f64` and back is exact).
        Ok(T::from_f64(total[0]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A random square CSR matrix (sorted unique columns, rows of 0 to 30
    /// entries).
    fn random(n: usize, seed: u64) -> (Vec<usize>, Vec<u32>, Vec<f64>) {
        let mut s = seed;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let (mut ptr, mut ci, mut vals) = (vec![0], Vec::new(), Vec::new());
        for _ in 0..n {
            let mut c: Vec<u32> = (0..next() % 31).map(|_| (next() % n as u64) as u32).collect();
            c.sort_unstable();
            c.dedup();
            vals.extend(c.iter().map(|_| (next() % 2000) as f64 / 1000.0 - 1.0));
            ci.extend(c);
            ptr.push(ci.len());
        }
        (ptr, ci, vals)
    }

    #[test]
    fn fused_dot_is_the_product_and_its_dot_on_any_range() {
        for (n, seed) in [(1, 1), (9, 2), (700, 3), (20_000, 4)] {
            let (ptr, ci, vals) = random(n, seed);
            let csr = CsrRef { row_ptr: &ptr, cols: &ci, vals: &vals, gather: None, ascending: false };
            csr.check("a", n, n).unwrap();
            let x: Vec<f64> = (0..n).map(|j| (j as f64 * 0.37).sin()).collect();
            let mut want = vec![0.0; n];
            csr.mult(&x, &mut want, false);
            for rows in [0..n, 0..n / 2, n / 3..n, n / 2..n / 2] {
                let dot: f64 = rows.clone().map(|i| x[i] * want[i]).sum();
                let mut sums = Vec::new();
                for parallel in [false, true] {
                    let mut y = vec![f64::NAN; n];
                    let s = csr.mult_range_dot(rows.clone(), &x, &mut y, parallel);
                    for i in 0..n {
                        if rows.contains(&i) {
                            assert_eq!(y[i], want[i], "n {n} row {i}: the product's own value");
                        } else {
                            assert!(y[i].is_nan(), "n {n} row {i} outside {rows:?} was written");
                        }
                    }
                    assert!((s - dot).abs() <= 1e-12 * (1.0 + dot.abs()), "n {n} {rows:?}: {s} vs {dot}");
                    sums.push(s);
                }
                assert_eq!(sums[0].to_bits(), sums[1].to_bits(), "n {n} {rows:?}: serial and parallel sums differ");
            }
        }
    }
}
