//! The sparse matrix-vector product on the host, and the operator seam the
//! solvers use.
//!
//! The product streams the CSR arrays once: rows are cut into chunks of
//! about equal nonzeros (not equal rows, so that a few long rows do not
//! leave one thread the tail), each chunk a rayon task on `threads` (one
//! pass in order on `seq`); a row adds its products into four
//! accumulators, so that the additions of one row do not wait on each
//! other, and stores its result once. The order of the additions within a
//! row is fixed, so results do not depend on the thread count.

use rayon::prelude::*;

use super::Real;
use crate::backend::Backend;
use crate::decl::{Dat, Set};
use crate::error::{Error, Result};
use crate::exec::LockedArgs;
use crate::matrix::Mat;
use crate::runtime::Runtime;
use crate::types::Access;

/// What the solvers need of a matrix: its shape, `y = A x` and its
/// diagonal. Implemented by [`Mat`](crate::Mat); a solver written against
/// it runs on any operator with these three abilities.
///
/// ```
/// use parloop::linalg::LinearOperator;
/// use parloop::{Dat, Result, Runtime, Set};
///
/// /// y = 2 x, a diagonal operator without a matrix.
/// struct Twice(Set);
/// impl LinearOperator<f64> for Twice {
///     fn name(&self) -> &str { "twice" }
///     fn row_set(&self) -> &Set { &self.0 }
///     fn col_set(&self) -> &Set { &self.0 }
///     fn row_dim(&self) -> usize { 1 }
///     fn col_dim(&self) -> usize { 1 }
///     fn apply(&self, rt: &Runtime, x: &Dat<f64>, y: &Dat<f64>) -> Result<()> {
///         rt.copy_from(y, x)?;
///         rt.scale(2.0, y)
///     }
///     fn diagonal(&self, rt: &Runtime, d: &Dat<f64>) -> Result<()> { rt.fill(d, 2.0) }
/// }
/// let rt = Runtime::with_backend(parloop::Backend::Seq)?;
/// let s = rt.set("s", 2)?;
/// let (x, y) = (rt.dat("x", &s, 1, vec![1.0, 2.0])?, rt.dat("y", &s, 1, vec![0.0; 2])?);
/// Twice(s.clone()).apply(&rt, &x, &y)?;
/// assert_eq!(y.values()?, vec![2.0, 4.0]);
/// # Ok::<(), parloop::Error>(())
/// ```
pub trait LinearOperator<T: Real> {
    /// The operator's name, for messages.
    fn name(&self) -> &str;
    /// The set `y` of `y = A x` lives on.
    fn row_set(&self) -> &Set;
    /// The set `x` lives on.
    fn col_set(&self) -> &Set;
    /// Values per row entity (the dim of `y`).
    fn row_dim(&self) -> usize;
    /// Values per column entity (the dim of `x`).
    fn col_dim(&self) -> usize;
    /// `y = A x`.
    fn apply(&self, rt: &Runtime, x: &Dat<T>, y: &Dat<T>) -> Result<()>;
    /// `d = diag(A)` (`d` on the row set; a square operator).
    fn diagonal(&self, rt: &Runtime, d: &Dat<T>) -> Result<()>;
    /// `y = A x`, returning `x . y` (a solver's `p . Ap`; a square
    /// operator), all-reduced under MPI. By default [`apply`](Self::apply)
    /// then [`Runtime::dot`]; a [`Mat`] on the host adds the dot up in its
    /// product's pass (`linalg::fused`).
    ///
    /// ```
    /// use parloop::linalg::LinearOperator;
    /// use parloop::{Access, Backend, Runtime};
    /// #[parloop::kernel]
    /// fn two(a: &mut f64) {
    ///     *a += 2.0;
    /// }
    /// let rt = Runtime::with_backend(Backend::Threads)?;
    /// let n = rt.set("n", 2)?;
    /// let id = rt.map("id", &n, &n, 1, vec![0, 1])?;
    /// let a = rt.mat::<f64>("A", &rt.sparsity("s", &[(&id, &id)], (1, 1))?)?;
    /// rt.par_loop(two::KERNEL, &n, &[a.arg(&id, &id, Access::INC)])?; // A = 2 I
    /// let x = rt.dat("x", &n, 1, vec![1.0, 2.0])?;
    /// let y = rt.dat("y", &n, 1, vec![0.0; 2])?;
    /// assert_eq!(a.apply_dot(&rt, &x, &y)?, 10.0); // x . 2x
    /// assert_eq!(y.values()?, vec![2.0, 4.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    fn apply_dot(&self, rt: &Runtime, x: &Dat<T>, y: &Dat<T>) -> Result<T> {
        self.apply(rt, x, y)?;
        rt.dot(x, y)
    }
}

/// A CSR matrix's arrays as the host product reads them: `rows + 1` row
/// pointers, and per entry a column index and a value.
#[derive(Clone, Copy)]
pub(crate) struct CsrRef<'a, T> {
    pub row_ptr: &'a [usize],
    pub cols: &'a [u32],
    pub vals: &'a [T],
    /// The largest column index, when rows may run with SIMD gathers
    /// (`super::gather`: `f64` values, AVX2, `PARLOOP_SIMD` not 0); a
    /// product gathers only from an `x` longer than it. `None`: scalar.
    pub gather: Option<u32>,
    /// The row pointers are known not to decrease (a sparsity's, checked
    /// once: `Sparsity::rows_ascend`), so [`CsrRef::check`] skips that
    /// pass over them.
    pub ascending: bool,
}

/// Nonzeros per work item of the threaded product: a few hundred KiB of
/// matrix per task amortises rayon's scheduling and still balances.
const NNZ_PER_TASK: usize = 1 << 15;

impl<T: Real> CsrRef<'_, T> {
    /// Rows.
    pub fn rows(&self) -> usize {
        self.row_ptr.len().saturating_sub(1)
    }

    /// Checks the arrays against each other and against the lengths of `x`
    /// (every column index below it) and `y` (room for every row); the
    /// product then indexes without surprises. `what` names the matrix.
    pub fn check(&self, what: &str, x_len: usize, y_len: usize) -> Result<()> {
        let bad = |reason: String| Error::Incompatible { op: format!("mult of matrix `{what}`"), reason };
        let rows = self.rows();
        if self.row_ptr.first() != Some(&0) || self.row_ptr.last() != Some(&self.cols.len()) {
            return Err(bad(format!(
                "row pointers run from {:?} to {:?}, the matrix has {} entries",
                self.row_ptr.first(),
                self.row_ptr.last(),
                self.cols.len()
            )));
        }
        if self.vals.len() != self.cols.len() {
            return Err(bad(format!("{} values for {} entries", self.vals.len(), self.cols.len())));
        }
        if let Some(i) = if self.ascending { None } else { first_decrease(self.row_ptr) } {
            return Err(bad(format!("row pointers decrease at row {i}")));
        }
        if y_len < rows {
            return Err(bad(format!("y holds {y_len} values for {rows} rows")));
        }
        // Column indices below `x_len` are the sparsity's invariant (its
        // columns are the column set's entities x dim, which is `x`'s
        // length); `row` indexes `x` with bounds checks all the same.
        if x_len == 0 && !self.cols.is_empty() {
            return Err(bad(format!("x is empty, the matrix has {} entries", self.cols.len())));
        }
        Ok(())
    }

    /// Row `i` of the product with `x`.
    #[inline(always)]
    pub(super) fn row(&self, i: usize, x: &[T]) -> T {
        let (s, e) = (self.row_ptr[i], self.row_ptr[i + 1]);
        let (cols, vals) = (&self.cols[s..e], &self.vals[s..e]);
        // Four independent sums: a row's products are added without each
        // waiting on the previous one (a dependency chain of adds would
        // bound the product by the add latency, not by memory).
        let mut acc = [T::ZERO; 4];
        let mut c4 = cols.chunks_exact(4);
        let mut v4 = vals.chunks_exact(4);
        for (c, v) in (&mut c4).zip(&mut v4) {
            // `x[...]` is bounds-checked: a well-predicted branch, hidden
            // behind the memory traffic the product is bound by.
            acc[0] = acc[0] + v[0] * x[c[0] as usize];
            acc[1] = acc[1] + v[1] * x[c[1] as usize];
            acc[2] = acc[2] + v[2] * x[c[2] as usize];
            acc[3] = acc[3] + v[3] * x[c[3] as usize];
        }
        for (&c, &v) in c4.remainder().iter().zip(v4.remainder()) {
            acc[0] = acc[0] + v * x[c as usize];
        }
        (acc[0] + acc[1]) + (acc[2] + acc[3])
    }

    /// Whether rows may run with SIMD gathers from `x` (see
    /// [`CsrRef::gather`]): an `f64` matrix, a CPU with AVX2, every column
    /// index below `x.len()` and within the gathers' signed 32 bits.
    pub(super) fn gathers(&self, x: &[T]) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            T::TYPE == crate::types::ElemType::F64
                && crate::lanes::vector_isa() != crate::lanes::VectorIsa::None
                && self.gather.is_some_and(|max| (max as usize) < x.len() && max <= i32::MAX as u32)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = x;
            false
        }
    }

    /// `y[i] = (A x)[i]` for the rows in order, on this thread.
    fn mult_rows(&self, first: usize, x: &[T], y: &mut [T]) {
        #[cfg(target_arch = "x86_64")]
        if self.gathers(x) {
            // (`T` is `f64`: the casts keep every slice as it is.)
            let (vals, x) = (bytemuck::cast_slice(self.vals), bytemuck::cast_slice(x));
            // SAFETY: `gathers` checked AVX2 and that every column indexes
            // `x` within 32 bits; `check` the row pointers against the
            // arrays.
            unsafe { super::gather::mult_rows(self.row_ptr, self.cols, vals, first, x, bytemuck::cast_slice_mut(y)) };
            return;
        }
        for (k, yi) in y.iter_mut().enumerate() {
            *yi = self.row(first + k, x);
        }
    }

    /// Row boundaries of chunks of about [`NNZ_PER_TASK`] entries (at least
    /// one row each), from 0 to `rows`.
    pub(super) fn chunks(&self) -> Vec<usize> {
        let rows = self.rows();
        let nnz = self.row_ptr[rows];
        let mut cuts = vec![0];
        let mut target = NNZ_PER_TASK;
        let mut r = 0;
        while target < nnz {
            // First row starting at or after `target` entries
            // (`row_ptr[r] < target`, and `row_ptr[rows] = nnz` is past it).
            r = first_at_or_after(self.row_ptr, r, target);
            if r > *cuts.last().expect("starts with 0") {
                cuts.push(r);
            }
            target = self.row_ptr[r].max(target) + NNZ_PER_TASK;
        }
        if *cuts.last().expect("starts with 0") != rows {
            cuts.push(rows);
        }
        cuts
    }

    /// `y[..rows] = A x`, in parallel over chunks of rows when `parallel`.
    /// Call [`CsrRef::check`] first.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn mult(&self, x: &[T], y: &mut [T], parallel: bool) {
        self.mult_range(0..self.rows(), x, y, parallel);
    }

    /// `y[i] = (A x)[i]` for the rows `rows` only (`y` holds every row),
    /// in parallel over chunks of rows when `parallel`; `x` may be cut
    /// short after the last column these rows read. A distributed product
    /// computes the rows that read no halo entries of `x` while the halo is
    /// exchanged, then the others. Call [`CsrRef::check`] first.
    pub fn mult_range(&self, rows: std::ops::Range<usize>, x: &[T], y: &mut [T], parallel: bool) {
        let y = &mut y[rows.clone()];
        if !parallel {
            self.mult_rows(rows.start, x, y);
            return;
        }
        // The chunks of the whole matrix, cut to the range.
        let mut cuts: Vec<usize> = self.chunks().into_iter().map(|c| c.clamp(rows.start, rows.end)).collect();
        cuts.dedup();
        let mut pieces: Vec<(usize, &mut [T])> = Vec::with_capacity(cuts.len());
        let mut rest = y;
        for w in cuts.windows(2) {
            let (head, tail) = rest.split_at_mut(w[1] - w[0]);
            pieces.push((w[0], head));
            rest = tail;
        }
        pieces.into_par_iter().for_each(|(first, ys)| self.mult_rows(first, x, ys));
    }

    /// `d[i]` = the entry of row `i` in column `i` (0 where the pattern has
    /// none), for the first `d.len()` rows.
    pub fn diagonal(&self, d: &mut [T]) {
        for (i, di) in d.iter_mut().enumerate().take(self.rows()) {
            let (s, e) = (self.row_ptr[i], self.row_ptr[i + 1]);
            *di = match self.cols[s..e].binary_search(&(i as u32)) {
                Ok(k) => self.vals[s + k],
                Err(_) => T::ZERO,
            };
        }
    }
}

/// The first `i` with `p[i] > p[i + 1]`, if any. Blocks of rows are tested
/// without an early exit, so that the comparisons vectorise, and in
/// parallel for long arrays: this runs before every product, and a serial
/// scan of the row pointers cost a tenth of the product's time on two
/// threads.
pub(crate) fn first_decrease(p: &[usize]) -> Option<usize> {
    const BLOCK: usize = 1 << 14;
    let n = p.len().saturating_sub(1); // pairs to compare
    let bad = |b: usize| {
        let (s, e) = (b * BLOCK, ((b + 1) * BLOCK).min(n));
        p[s..e].iter().zip(&p[s + 1..=e]).fold(false, |any, (a, b)| any | (a > b))
    };
    let blocks = n.div_ceil(BLOCK);
    let block =
        if blocks > 4 { (0..blocks).into_par_iter().find_first(|&b| bad(b)) } else { (0..blocks).find(|&b| bad(b)) };
    block.map(|b| b * BLOCK + p[b * BLOCK..].windows(2).position(|w| w[0] > w[1]).expect("the block has one"))
}

/// The first row `r` with `p[r] >= target` (`p` non-decreasing, `p[lo] <
/// target <= p[last]`), found near the guess that rows hold the average
/// count of entries: a few cache lines, where a binary search over all the
/// row pointers misses the cache at every step (the product cuts its chunks
/// before every call).
fn first_at_or_after(p: &[usize], lo: usize, target: usize) -> usize {
    let n = p.len() - 1;
    let per_row = p[n] as f64 / n as f64;
    let guess = lo + ((target - p[lo]) as f64 / per_row) as usize;
    let g = guess.clamp(lo + 1, n);
    // Bracket the answer in (a, b] with p[a] < target <= p[b], by steps
    // doubling away from the guess.
    let (a, b) = if p[g] >= target {
        let (mut b, mut step) = (g, 1);
        loop {
            let c = b.saturating_sub(step).max(lo);
            if c == lo || p[c] < target {
                break (c, b);
            }
            b = c;
            step *= 2;
        }
    } else {
        let (mut a, mut step) = (g, 1);
        loop {
            let c = (a + step).min(n);
            if p[c] >= target {
                break (a, c);
            }
            a = c;
            step *= 2;
        }
    };
    a + 1 + p[a + 1..b].partition_point(|&v| v < target)
}

/// Whether the product runs on the host in parallel for `backend`, or an
/// error naming the matrix for backends without a host product.
pub(crate) fn host_parallelism(rt: &Runtime, what: &str, op: &str) -> Result<bool> {
    match rt.backend() {
        Backend::Seq => Ok(false),
        Backend::Threads => Ok(true),
        other => Err(Error::Backend {
            name: other.name().into(),
            reason: format!("{op} of matrix `{what}` has no host product for this backend"),
        }),
    }
}

/// Checks the operands of `y = A x`: `x` on the column set with the column
/// dim, `y` on the row set with the row dim, distinct dats.
pub(crate) fn check_product<T: Real>(a: &Mat<T>, x: &Dat<T>, y: &Dat<T>) -> Result<()> {
    let (s, what) = (a.sparsity(), a.name());
    check_dat("mult", what, "x", x, s.col_set(), s.col_dim())?;
    check_dat("mult", what, "y", y, s.row_set(), s.row_dim())?;
    if x.id() == y.id() {
        return Err(Error::Incompatible {
            op: format!("mult of matrix `{what}`"),
            reason: format!("x and y are both dat `{}`; the product needs a dat of its own", x.name()),
        });
    }
    Ok(())
}

/// Runs the loops the lazy trace holds that a matrix operation depends on
/// (on `a`'s values and the dats it reads and writes) before it starts,
/// so that the operation's profile row and NVTX range time it alone.
pub(crate) fn force_operands<T: Real>(a: &Mat<T>, read: &[&Dat<T>], written: &[&Dat<T>]) -> Result<()> {
    let values = &a.values_dat().0;
    values.link.force(values.id, false, false)?;
    for (d, write) in read.iter().map(|d| (d, false)).chain(written.iter().map(|d| (d, true))) {
        d.0.link.force(d.0.id, write, false)?;
    }
    Ok(())
}

/// The bytes a CSR product `y = A x` moves at least: values, column
/// indices and row pointers once, `x` and `y` once each (the profile's
/// GB/s for `mult`).
pub(crate) fn product_bytes<T: Real>(a: &Mat<T>) -> u64 {
    let s = a.sparsity();
    let csr = std::mem::size_of_val(s.row_ptr())
        + std::mem::size_of_val(s.col_indices())
        + s.nnz() * std::mem::size_of::<T>();
    (csr + (s.cols() + s.rows()) * std::mem::size_of::<T>()) as u64
}

/// Checks that `x` lives on `set` with `dim`, for operation `op` on matrix
/// `what` (`role`: "x", "y", ...).
pub(crate) fn check_dat<T: Real>(op: &str, what: &str, role: &str, x: &Dat<T>, set: &Set, dim: usize) -> Result<()> {
    if x.set() != set || x.dim() != dim {
        return Err(Error::Incompatible {
            op: format!("{op} of matrix `{what}`"),
            reason: format!(
                "{role} is dat `{}` on set `{}` with dim {}, the matrix needs set `{}` with dim {dim}",
                x.name(),
                x.set().name(),
                x.dim(),
                set.name()
            ),
        });
    }
    Ok(())
}

impl Runtime {
    /// `y = A x` (SpMV): `x` on the matrix's column set with its column
    /// dim, `y` on its row set with its row dim (distinct dats). On
    /// `threads` the rows are shared by nonzeros between the cores; results
    /// do not depend on the thread count. On a device, a CSR kernel with a
    /// few lanes per row (`matrix::device`), deterministic. Distributed
    /// (seed 004): each rank computes its owned rows; the halo of `x` is
    /// exchanged when stale, on the host while the rows that read no halo
    /// column are computed, and `y`'s halo is stale afterwards.
    ///
    /// ```
    /// use parloop::{Access, Backend, Runtime};
    /// #[parloop::kernel]
    /// fn edge(a: &mut [[f64; 2]; 2]) {
    ///     a[0][0] += 2.0;
    ///     a[0][1] -= 1.0;
    ///     a[1][0] -= 1.0;
    ///     a[1][1] += 2.0;
    /// }
    /// let rt = Runtime::with_backend(Backend::Threads)?;
    /// let nodes = rt.set("nodes", 2)?;
    /// let edges = rt.set("edges", 1)?;
    /// let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1])?;
    /// let a = rt.mat::<f64>("A", &rt.sparsity("s", &[(&e2n, &e2n)], (1, 1))?)?;
    /// rt.par_loop(edge::KERNEL, &edges, &[a.arg(&e2n, &e2n, Access::INC)])?;
    /// let x = rt.dat("x", &nodes, 1, vec![1.0, 2.0])?;
    /// let y = rt.dat("y", &nodes, 1, vec![0.0; 2])?;
    /// rt.mult(&a, &x, &y)?;
    /// assert_eq!(y.values()?, vec![0.0, 3.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    #[track_caller]
    pub fn mult<T: Real>(&self, a: &Mat<T>, x: &Dat<T>, y: &Dat<T>) -> Result<()> {
        let what = a.name();
        // x is locked as a loop locks it: refuse it here if the lazy trace
        // left it stale (the matrix's values are read as a host read).
        // An unwritten temporary's buffer may hold another's values.
        let checked = check_product(a, x, y)
            .and_then(|()| x.check_poison())
            .and_then(|()| x.check_written(&format!("mult of matrix `{what}` reads it as x")));
        let sets = [a.sparsity().row_set(), x.set(), y.set()];
        crate::Set::agreed_among(sets, &format!("mult of matrix `{what}`"), checked, "")?;
        let args = [x.arg(Access::READ), y.arg(Access::WRITE)];
        force_operands(a, &[x], &[y])?;
        self.library_op(("mult", what), product_bytes(a), || {
            if let Some(device) = self.device() {
                // The halo first, then the product (the device's product
                // reads every row at once).
                self.dist.refresh_device(device, &format!("mult of matrix `{what}`"), &args)?;
                self.mult_on_device(device, a, x, y)?;
                self.dist.written(&args);
                y.written_whole();
                return Ok(());
            }
            self.mult_host(a, x, y, false).map(drop)
        })
    }

    /// The host product `y = A x` of [`Runtime::mult`] (the column halo of
    /// `x` exchanged while the rows that need none run); with `dot`, of a
    /// square matrix, also this rank's part of `x . y` over its rows (the
    /// owned values), added chunk by chunk in row order.
    pub(crate) fn mult_host<T: Real>(&self, a: &Mat<T>, x: &Dat<T>, y: &Dat<T>, dot: bool) -> Result<T> {
        let s = a.sparsity();
        let what = a.name();
        let args = [x.arg(Access::READ), y.arg(Access::WRITE)];
        let parallel = host_parallelism(self, what, "mult")?;
        let (row_ptr, cols, gather) = (s.row_ptr(), s.col_indices(), s.gather_bound(self.simd()));
        let split = a.halo_rows_from();
        a.values_dat().with_own_values(|vals| {
            let csr = CsrRef { row_ptr, cols, vals, gather, ascending: s.rows_ascend() };
            let mut locked = LockedArgs::new();
            // Named as the profile names the product (and as the device
            // path locks it): "loop `mult [A]`" in a `Busy` error.
            locked.lock(&format!("mult [{what}]"), &args)?;
            let (xv, yv) = (&locked.views[0], &locked.views[1]);
            let (x_len, y_len) = (x.set().total() * x.dim(), y.set().total() * y.dim());
            csr.check(what, x_len, y_len)?;
            let owned_x = (x.set().size() * x.dim()).min(x_len);
            // SAFETY: the views point at the locked values of `x` and `y`
            // (distinct dats, checked above), `x_len` and `y_len` values
            // long. While the halo is exchanged, MPI writes only `x`'s halo
            // tail (from `owned_x` on), which the first slice leaves out;
            // the rows before `split` read owned columns only.
            let (x_owned, y_all) = unsafe {
                (
                    std::slice::from_raw_parts(xv.data.cast::<T>().cast_const(), owned_x),
                    std::slice::from_raw_parts_mut(yv.data.cast::<T>(), y_len),
                )
            };
            if dot && (csr.rows() > owned_x || split > csr.rows()) {
                return Err(Error::Incompatible {
                    op: format!("mult of matrix `{what}`"),
                    reason: format!(
                        "{} rows for {owned_x} owned values of x; a square matrix has one per value",
                        csr.rows()
                    ),
                });
            }
            let op = format!("mult of matrix `{what}`");
            let mut sum = T::ZERO;
            let mut core = || match dot {
                true => sum = csr.mult_range_dot(0..split, x_owned, y_all, parallel),
                false => csr.mult_range(0..split, x_owned, y_all, parallel),
            };
            self.dist.refresh(&op, &args, &locked.views, &mut core)?;
            // SAFETY: as above; the exchange is over, nothing else writes `x`.
            let x_all = unsafe { std::slice::from_raw_parts(xv.data.cast::<T>().cast_const(), x_len) };
            if dot {
                sum = sum + csr.mult_range_dot(split..csr.rows(), x_all, y_all, parallel);
            } else {
                csr.mult_range(split..csr.rows(), x_all, y_all, parallel);
            }
            locked.release();
            self.dist.written(&args);
            y.written_whole();
            Ok(sum)
        })?
    }

    /// `d = diag(A)` on the host backends: `d` on the row set of a square
    /// matrix (row set = column set, equal dims); rows whose pattern has
    /// no diagonal entry get 0.
    ///
    /// ```
    /// # use parloop::{Access, Backend, Runtime};
    /// # let rt = Runtime::with_backend(Backend::Seq)?;
    /// # let n = rt.set("n", 2)?;
    /// # let id = rt.map("id", &n, &n, 1, vec![0, 1])?;
    /// let a = rt.mat::<f64>("A", &rt.sparsity("s", &[(&id, &id)], (1, 1))?)?;
    /// let d = rt.dat("d", &n, 1, vec![5.0; 2])?;
    /// rt.diagonal(&a, &d)?;
    /// assert_eq!(d.values()?, vec![0.0; 2]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    #[track_caller]
    pub fn diagonal<T: Real>(&self, a: &Mat<T>, d: &Dat<T>) -> Result<()> {
        let s = a.sparsity();
        let what = a.name();
        let op = format!("diagonal of matrix `{what}`");
        let checked = if s.row_set() != s.col_set() || s.row_dim() != s.col_dim() {
            Err(Error::Incompatible {
                op: op.clone(),
                reason: format!(
                    "the matrix maps set `{}` (dim {}) to set `{}` (dim {}); a diagonal needs a square one",
                    s.col_set().name(),
                    s.col_dim(),
                    s.row_set().name(),
                    s.row_dim()
                ),
            })
        } else {
            check_dat("diagonal", what, "d", d, s.row_set(), s.row_dim())
        };
        crate::Set::agreed_among([s.row_set(), d.set()], &op, checked, "")?;
        // The row pointers, column indices and the vector written (the
        // values read are a few per row).
        let bytes = std::mem::size_of_val(s.row_ptr())
            + std::mem::size_of_val(s.col_indices())
            + s.rows() * std::mem::size_of::<T>();
        force_operands(a, &[], &[d])?;
        self.library_op(("diagonal", what), bytes as u64, || {
            // The owned rows only: `d`'s halo is stale after it.
            if let Some(device) = self.device() {
                self.diagonal_on_device(device, a, d)?;
                self.dist.written(&[d.arg(Access::WRITE)]);
                d.written_whole();
                return Ok(());
            }
            let (row_ptr, cols) = (s.row_ptr(), s.col_indices());
            // Every owned row is written: a temporary's first write.
            d.written_whole();
            a.values_dat().with_own_values(|vals| {
                let csr = CsrRef { row_ptr, cols, vals, gather: None, ascending: false };
                d.with_own_values_mut(|dv| csr.diagonal(dv))
            })??;
            self.dist.written(&[d.arg(Access::WRITE)]);
            Ok(())
        })
    }
}

impl<T: Real> LinearOperator<T> for Mat<T> {
    fn name(&self) -> &str {
        Mat::name(self)
    }
    fn row_set(&self) -> &Set {
        self.sparsity().row_set()
    }
    fn col_set(&self) -> &Set {
        self.sparsity().col_set()
    }
    fn row_dim(&self) -> usize {
        self.sparsity().row_dim()
    }
    fn col_dim(&self) -> usize {
        self.sparsity().col_dim()
    }
    fn apply(&self, rt: &Runtime, x: &Dat<T>, y: &Dat<T>) -> Result<()> {
        rt.mult(self, x, y)
    }
    fn diagonal(&self, rt: &Runtime, d: &Dat<T>) -> Result<()> {
        rt.diagonal(self, d)
    }
    fn apply_dot(&self, rt: &Runtime, x: &Dat<T>, y: &Dat<T>) -> Result<T> {
        rt.mult_dot(self, x, y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A random CSR matrix (sorted unique columns) and its dense form.
    fn random(rows: usize, cols: usize, seed: u64) -> (Vec<usize>, Vec<u32>, Vec<f64>, Vec<f64>) {
        let mut s = seed;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut dense = vec![0.0; rows * cols];
        let (mut ptr, mut ci, mut vals) = (vec![0], Vec::new(), Vec::new());
        for r in 0..rows {
            // Row lengths 0 to 40: empty rows, short rows, rows past the unrolling.
            let len = (next() % 41) as usize;
            let mut c: Vec<u32> = (0..len).map(|_| (next() % cols as u64) as u32).collect();
            c.sort_unstable();
            c.dedup();
            for &j in &c {
                let v = (next() % 2000) as f64 / 1000.0 - 1.0;
                dense[r * cols + j as usize] = v;
                ci.push(j);
                vals.push(v);
            }
            ptr.push(ci.len());
        }
        (ptr, ci, vals, dense)
    }

    #[test]
    fn product_equals_the_dense_product_serial_and_parallel() {
        for (rows, cols, seed) in [(1, 1, 1), (7, 3, 2), (300, 200, 3), (5000, 4000, 4)] {
            let (ptr, ci, vals, dense) = random(rows, cols, seed);
            let x: Vec<f64> = (0..cols).map(|j| (j as f64 * 0.37).sin()).collect();
            let csr = CsrRef { row_ptr: &ptr, cols: &ci, vals: &vals, gather: None, ascending: false };
            csr.check("a", cols, rows).unwrap();
            for parallel in [false, true] {
                let mut y = vec![f64::NAN; rows];
                csr.mult(&x, &mut y, parallel);
                for r in 0..rows {
                    let want: f64 = (0..cols).map(|j| dense[r * cols + j] * x[j]).sum();
                    assert!((y[r] - want).abs() <= 1e-13 * (1.0 + want.abs()), "row {r}: {} vs {want}", y[r]);
                }
            }
        }
    }

    #[test]
    fn gathered_rows_are_the_scalar_rows_bitwise() {
        // Rows of 0 to 30 entries: every length modulo four, tails included.
        for (rows, cols, seed) in [(1, 1, 11), (50, 7, 12), (2000, 2000, 13), (4000, 1500, 14)] {
            let (ptr, ci, vals, _) = random(rows, cols, seed);
            let x: Vec<f64> = (0..cols).map(|j| (j as f64 * 0.61).cos() * 1e3).collect();
            let scalar = CsrRef { row_ptr: &ptr, cols: &ci, vals: &vals, gather: None, ascending: false };
            let max = ci.iter().copied().max();
            let simd = CsrRef { gather: max, ..scalar };
            assert!(!scalar.gathers(&x));
            #[cfg(target_arch = "x86_64")]
            assert_eq!(
                simd.gathers(&x),
                max.is_some() && crate::lanes::vector_isa() != crate::lanes::VectorIsa::None,
                "an AVX2 CPU gathers"
            );
            // An `x` too short for the largest column never gathers.
            assert!(!simd.gathers(&x[..max.unwrap_or(0) as usize]));
            for parallel in [false, true] {
                let (mut want, mut got) = (vec![f64::NAN; rows], vec![f64::NAN; rows]);
                scalar.mult(&x, &mut want, parallel);
                simd.mult(&x, &mut got, parallel);
                let bits = |v: &[f64]| v.iter().map(|y| y.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{rows} rows, parallel {parallel}");
                let (dw, dg) = if rows == cols {
                    (
                        scalar.mult_range_dot(0..rows, &x, &mut want, parallel),
                        simd.mult_range_dot(0..rows, &x, &mut got, parallel),
                    )
                } else {
                    (0.0, 0.0)
                };
                assert_eq!(dg.to_bits(), dw.to_bits());
            }
        }
    }

    #[test]
    fn chunk_cuts_and_the_decrease_check_equal_their_plain_definitions() {
        // Skewed row lengths too: the local search starts from a guess of
        // the average row and must still find the first row at or after
        // each target.
        let mut s = 5u64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for case in 0..40 {
            let rows = 1 + (next() % 60_000) as usize;
            let mut ptr = vec![0usize];
            for r in 0..rows {
                let len = match case % 4 {
                    0 => 15,
                    1 => (next() % 40) as usize,
                    2 => {
                        if r % 997 == 0 {
                            50_000
                        } else {
                            (next() % 3) as usize
                        }
                    }
                    _ => {
                        if r < rows / 2 {
                            0
                        } else {
                            30
                        }
                    }
                };
                ptr.push(ptr[r] + len);
            }
            let nnz = ptr[rows];
            // The definition: binary searches over every row pointer.
            let mut want = vec![0];
            let mut target = NNZ_PER_TASK;
            while target < nnz {
                let r = ptr.partition_point(|&p| p < target).min(rows);
                if r > *want.last().unwrap() {
                    want.push(r);
                }
                target = ptr[r].max(target) + NNZ_PER_TASK;
            }
            if *want.last().unwrap() != rows {
                want.push(rows);
            }
            let cols = vec![0u32; nnz];
            let vals = vec![0.0f64; nnz];
            let csr = CsrRef { row_ptr: &ptr, cols: &cols, vals: &vals, gather: None, ascending: false };
            assert_eq!(csr.chunks(), want, "case {case}: {rows} rows, {nnz} entries");
            assert_eq!(first_decrease(&ptr), None, "case {case}");
            for _ in 0..3 {
                let mut bad = ptr.clone();
                let i = (next() % rows as u64) as usize;
                bad[i] = bad[i + 1] + 1;
                let first = bad.windows(2).position(|w| w[0] > w[1]);
                assert_eq!(first_decrease(&bad), first, "case {case}: row pointer {i} raised");
            }
        }
    }

    #[test]
    fn chunks_cover_every_row_once() {
        let (ptr, ci, vals, _) = random(20_000, 100, 9);
        let csr = CsrRef { row_ptr: &ptr, cols: &ci, vals: &vals, gather: None, ascending: false };
        let cuts = csr.chunks();
        assert_eq!((cuts[0], *cuts.last().unwrap()), (0, 20_000));
        assert!(cuts.windows(2).all(|w| w[0] < w[1]), "{cuts:?}");
        assert!(cuts.len() > 2, "several chunks for {} entries", ci.len());
    }
}
