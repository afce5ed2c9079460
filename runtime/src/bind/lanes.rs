//! The lane binder: gathers one argument of a group of elements into
//! [`Lanes`] before a lane-wise twin runs and scatters the results after it,
//! with [`usable`], which says whether a loop's views allow that.

use std::mem::MaybeUninit;

use super::Shape;
use crate::lanes::{written_out, Lanes};
use crate::types::{Access, ElemType, Scalar};
use crate::views::{ArgView, ViewKind};

/// Whether a lane-wise twin can run a loop with these views: no mapped
/// WRITE or RW (those need each element to see earlier elements' writes),
/// no global MIN or MAX, and a global INC only where the kernel adds to it
/// once per element (`exact_inc`, decided by the attribute), so the
/// reduction keeps the scalar order.
#[doc(hidden)]
pub fn usable(views: &[ArgView], exact_inc: &[bool]) -> bool {
    views.iter().zip(exact_inc).all(|(v, &exact)| match (v.kind, v.access) {
        // Element matrices and element numbers bind one element at a time.
        (ViewKind::Matrix | ViewKind::Index, _) => false,
        (ViewKind::Direct, _) | (_, Access::Read) => true,
        (ViewKind::Global, Access::Inc) => exact,
        (ViewKind::Indirect | ViewKind::Vector, Access::Inc) => true,
        _ => false,
    })
}

/// Whether the lane-wise group loop pipelines groups (computes a group
/// before adding the previous group's increments): where some argument is
/// a mapped increment, whose read-modify-writes chain through targets that
/// neighbouring elements share. Elsewhere there is nothing to overlap.
#[doc(hidden)]
pub fn pipelined(views: &[ArgView]) -> bool {
    views.iter().any(|v| v.access == Access::Inc && matches!(v.kind, ViewKind::Indirect | ViewKind::Vector))
}

/// Gathers one argument of a group of `W` elements into lanes and
/// scatters the results back: the lane-wise counterpart of
/// [`super::Binder`], used where [`usable`] holds.
#[doc(hidden)]
pub struct LaneBinder<S: Shape, const W: usize> {
    view: ArgView,
    buf: MaybeUninit<S::Lane<W>>,
    /// An increment's lanes turned back into one row per element (after
    /// the kernel), so that each element's row is added with one vector
    /// load of the size it was stored with.
    rows: [Row; W],
    /// A global increment into at least `W` accumulators (a host partial
    /// sum, `exec::INC_SLOTS`): the lanes of a group hold distinct
    /// accumulators, loaded before the twin and stored after it, so the
    /// twin's one add per element is the scalar adapter's add.
    slotted: bool,
    /// The first element of the group whose accumulators the lanes hold
    /// already (`usize::MAX` if none): with one group's width of
    /// accumulators, the next group's are the same, and reloading what
    /// was just stored element by element would stall on store-to-load
    /// forwarding (a dot took half as long again).
    held: usize,
}

/// Up to four 8-byte values, aligned for one AVX store.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Row([f64; 4]);

impl<S: Shape, const W: usize> LaneBinder<S, W> {
    /// Values per entity through a vector view's row, and in all.
    const ROW: usize = S::COLS;
    const ALL: usize = S::ROWS * S::COLS;

    #[inline(always)]
    pub fn new(view: ArgView) -> Self {
        view.debug_assert_fits(S::ROWS, S::COLS);
        let slotted = view.kind == ViewKind::Global && view.access == Access::Inc && view.slot_mask + 1 >= W;
        LaneBinder { view, buf: MaybeUninit::uninit(), rows: [Row([0.0; 4]); W], slotted, held: usize::MAX }
    }

    #[inline(always)]
    fn data(&self) -> *mut S::Elem {
        self.view.data.cast()
    }

    /// The lanes of value `k` of the shape.
    #[inline(always)]
    fn lanes(&mut self) -> *mut Lanes<S::Elem, W> {
        self.buf.as_mut_ptr().cast()
    }

    /// The lane-wise value for the kernel (after [`LaneBinder::load`]).
    #[inline(always)]
    pub fn ptr(&mut self) -> *mut S::Lane<W> {
        self.buf.as_mut_ptr()
    }

    /// Entity offset of `map[e][col]`, `len` values per entity.
    ///
    /// # Safety
    /// The view is mapped and `e`, `col` lie in the map.
    #[inline(always)]
    unsafe fn target(&self, e: usize, col: usize, len: usize) -> usize {
        // SAFETY: forwarded; map values were validated against the target set.
        unsafe { *self.view.map.add(e * self.view.arity + col) as usize * len }
    }

    /// Value offsets of `map[e][col]` for the group's elements, from `first`
    /// on, `len` values per entity: one walk down the map's column, with
    /// scalar pointer steps (LLVM would otherwise vectorise the index
    /// arithmetic of eight lanes, then extract each address from a vector).
    ///
    /// # Safety
    /// The view is mapped and those elements and `col` lie in the map.
    #[inline(always)]
    unsafe fn targets(&self, first: usize, col: usize, len: usize) -> [usize; W] {
        let arity = self.view.arity;
        let mut t = [0; W];
        // SAFETY: forwarded; map values were validated against the target set.
        unsafe {
            let mut p = self.view.map.add(first * arity + col);
            for t in t.iter_mut() {
                *t = *p as usize * len;
                p = p.add(arity);
            }
        }
        t
    }

    /// Whether AVX transposes can move this shape: 8-byte values (moved
    /// as bits), 1, 2 or 4 per row.
    const TRANSPOSABLE: bool = std::mem::size_of::<S::Elem>() == 8 && matches!(S::COLS, 1 | 2 | 4);

    /// Fills the lanes for elements `first..first + W` (rows of 8-byte
    /// values are transposed in AVX registers).
    ///
    /// # Safety
    /// The view satisfies the [`crate::HostFn`] contract, those elements
    /// exist, [`usable`] holds, and AVX2 runs, and AVX-512 where `W` is 8 (as
    /// wherever a [`Lanes`] of that width exists).
    #[inline(always)]
    pub unsafe fn load(&mut self, first: usize) {
        let data = self.data();
        let lanes = self.lanes();
        let inc = self.view.access == Access::Inc;
        if self.slotted {
            if first != self.held {
                // SAFETY: the accumulators lie in the partial (`slot_mask`).
                unsafe { self.accumulators(first, false) };
            }
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if Self::TRANSPOSABLE && !(inc && self.view.kind != ViewKind::Direct) {
            let col = self.view.column;
            // SAFETY: as below; AVX2 runs, and AVX-512 where `W` is 8 (the
            // caller's contract).
            unsafe {
                match self.view.kind {
                    ViewKind::Direct if Self::ALL == Self::ROW => {
                        let rows = written_out(|l| data.add((first + l) * Self::ALL).cast::<u8>().cast_const());
                        transpose_in::<W>(rows, Self::ROW, lanes.cast());
                        return;
                    }
                    ViewKind::Indirect if Self::ALL == Self::ROW => {
                        let t = self.targets(first, col, Self::ALL);
                        let rows = written_out(|l| data.add(t[l]).cast::<u8>().cast_const());
                        transpose_in::<W>(rows, Self::ROW, lanes.cast());
                        return;
                    }
                    ViewKind::Vector => {
                        for r in 0..S::ROWS {
                            let t = self.targets(first, r, Self::ROW);
                            let rows = written_out(|l| data.add(t[l]).cast::<u8>().cast_const());
                            transpose_in::<W>(rows, Self::ROW, lanes.add(r * Self::ROW).cast());
                        }
                        return;
                    }
                    _ => {}
                }
            }
        }
        // SAFETY: offsets lie in the locked data (validated maps and dims);
        // `lanes` has `ALL` entries.
        unsafe {
            match self.view.kind {
                ViewKind::Direct => {
                    for k in 0..Self::ALL {
                        (*lanes.add(k)).0 = written_out(|l| *data.add((first + l) * Self::ALL + k));
                    }
                }
                ViewKind::Global => {
                    for k in 0..Self::ALL {
                        // An exact increment adds to -0.0, which changes no value.
                        let v = if inc { S::Elem::ADD_IDENTITY } else { *data.add(k) };
                        lanes.add(k).write(Lanes::splat(v));
                    }
                }
                // Mapped increments start from zero, as in the scalar adapter.
                _ if inc => {
                    for k in 0..Self::ALL {
                        lanes.add(k).write(Lanes::splat(S::Elem::default()));
                    }
                }
                ViewKind::Indirect => {
                    let t = self.targets(first, self.view.column, Self::ALL);
                    for k in 0..Self::ALL {
                        (*lanes.add(k)).0 = written_out(|l| *data.add(t[l] + k));
                    }
                }
                ViewKind::Vector => {
                    for r in 0..S::ROWS {
                        let t = self.targets(first, r, Self::ROW);
                        for c in 0..Self::ROW {
                            (*lanes.add(r * Self::ROW + c)).0 = written_out(|l| *data.add(t[l] + c));
                        }
                    }
                }
                // `usable` keeps matrix and index views from lanes.
                ViewKind::Matrix | ViewKind::Index => {}
            }
        }
    }

    /// Moves the accumulators of a group's lanes (element `first + l`'s,
    /// `(first + l) & slot_mask`, distinct as `slotted` holds) into the
    /// lanes, or back when `store`.
    ///
    /// # Safety
    /// As [`LaneBinder::load`]; `slotted`.
    #[inline(always)]
    unsafe fn accumulators(&mut self, first: usize, store: bool) {
        let (data, lanes, mask) = (self.data(), self.lanes(), self.view.slot_mask);
        // SAFETY: the partial holds `slot_mask + 1` accumulators of `ALL`
        // values; AVX2 runs, and AVX-512 where `W` is 8.
        unsafe {
            let rows = written_out(|l| data.add(((first + l) & mask) * Self::ALL).cast::<u8>());
            #[cfg(target_arch = "x86_64")]
            if Self::TRANSPOSABLE && Self::ALL == Self::ROW {
                if store {
                    transpose_out::<W>(lanes.cast_const().cast(), Self::ROW, rows);
                } else {
                    transpose_in::<W>(rows.map(|r| r.cast_const()), Self::ROW, lanes.cast());
                }
                return;
            }
            for k in 0..Self::ALL {
                if store {
                    let v = (*lanes.add(k)).0;
                    (0..W).for_each(|l| *rows[l].cast::<S::Elem>().add(k) = v[l]);
                } else {
                    (*lanes.add(k)).0 = written_out(|l| *rows[l].cast::<S::Elem>().add(k));
                }
            }
        }
    }

    /// Writes a direct argument's lanes back (after the call), and a
    /// slotted global increment's accumulators.
    ///
    /// # Safety
    /// As [`LaneBinder::load`], after it.
    #[inline(always)]
    pub unsafe fn store_direct(&mut self, first: usize) {
        if self.slotted {
            // SAFETY: as `load`, which loaded them.
            unsafe { self.accumulators(first, true) };
            self.held = if self.view.slot_mask + 1 == W { first + W } else { usize::MAX };
            return;
        }
        if self.view.kind != ViewKind::Direct || self.view.access == Access::Read {
            return;
        }
        let data = self.data();
        let lanes = self.lanes();
        #[cfg(target_arch = "x86_64")]
        if Self::TRANSPOSABLE && Self::ALL == Self::ROW {
            // SAFETY: as below; AVX2 runs, and AVX-512 where `W` is 8 (the
            // caller's contract).
            unsafe {
                let rows = written_out(|l| data.add((first + l) * Self::ALL).cast::<u8>());
                transpose_out::<W>(lanes.cast_const().cast(), Self::ROW, rows);
            }
            return;
        }
        // SAFETY: as in `load`.
        unsafe {
            for k in 0..Self::ALL {
                let v = (*lanes.add(k)).0;
                for (l, v) in v.into_iter().enumerate() {
                    *data.add((first + l) * Self::ALL + k) = v;
                }
            }
        }
    }

    /// Whether an increment of this shape takes the AVX path: `f64`
    /// values, one row of 1, 2 or 4.
    const FAST_INC: bool = matches!(S::Elem::TYPE, ElemType::F64) && S::ROWS == 1 && matches!(S::COLS, 1 | 2 | 4);

    /// Turns an increment's lanes into rows (after the kernel, before
    /// [`LaneBinder::store_lane`]).
    ///
    /// # Safety
    /// As [`LaneBinder::store_direct`].
    #[inline(always)]
    pub unsafe fn finish(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if Self::FAST_INC && self.view.access == Access::Inc && self.view.kind != ViewKind::Direct && !self.slotted {
            let rows = written_out(|l| self.rows[l].0.as_mut_ptr().cast::<u8>());
            // SAFETY: AVX2 is present, and AVX-512 where `W` is 8; the lanes
            // hold `ALL` values per lane.
            unsafe { transpose_out::<W>(self.lanes().cast_const().cast(), Self::ALL, rows) };
        }
    }

    /// Adds lane `l`'s increment (element `first + l`) to its targets, or
    /// to the global: called for every lane in order, every argument in
    /// order, as the scalar adapter does.
    ///
    /// # Safety
    /// As [`LaneBinder::store_direct`], after [`LaneBinder::finish`].
    #[inline(always)]
    pub unsafe fn store_lane(&mut self, l: usize, first: usize) {
        if self.view.access != Access::Inc || self.view.kind == ViewKind::Direct || self.slotted {
            return;
        }
        let data = self.data();
        #[cfg(target_arch = "x86_64")]
        if Self::FAST_INC {
            use std::arch::x86_64::*;
            let at = match self.view.kind {
                ViewKind::Global => ((first + l) & self.view.slot_mask) * Self::ALL,
                // SAFETY: as in `load`.
                _ => unsafe { self.target(first + l, self.view.column, Self::ALL) },
            };
            // SAFETY: the target holds `ALL` f64 values (FAST_INC); the
            // row was stored by `finish` with the same width; AVX2 is present.
            unsafe {
                let dst: *mut f64 = data.add(at).cast();
                let row = self.rows[l].0.as_ptr();
                match Self::ALL {
                    4 => _mm256_storeu_pd(dst, _mm256_add_pd(_mm256_loadu_pd(dst), _mm256_loadu_pd(row))),
                    2 => _mm_storeu_pd(dst, _mm_add_pd(_mm_loadu_pd(dst), _mm_loadu_pd(row))),
                    _ => *dst += *row,
                }
            }
            return;
        }
        let lanes = self.lanes();
        // SAFETY: as in `load`.
        unsafe {
            let add = |to: usize, k: usize| {
                let p = data.add(to);
                *p = (*p).inc((*lanes.add(k)).0[l]);
            };
            match self.view.kind {
                ViewKind::Global => {
                    let at = ((first + l) & self.view.slot_mask) * Self::ALL;
                    (0..Self::ALL).for_each(|k| add(at + k, k));
                }
                ViewKind::Indirect => {
                    let t = self.target(first + l, self.view.column, Self::ALL);
                    (0..Self::ALL).for_each(|k| add(t + k, k));
                }
                _ => {
                    for r in 0..S::ROWS {
                        let t = self.target(first + l, r, Self::ROW);
                        (0..Self::ROW).for_each(|c| add(t + c, r * Self::ROW + c));
                    }
                }
            }
        }
    }
}

/// Four rows of `n` (1, 2 or 4) 8-byte values turned into `n` vectors in
/// AVX registers: vector `k` holds value `k` of rows 0..4.
///
/// # Safety
/// AVX2 is present; each row holds `n` values.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn gather4(r: [*const f64; 4], n: usize) -> [std::arch::x86_64::__m256d; 4] {
    use std::arch::x86_64::*;
    // SAFETY: the caller's contract; unaligned loads.
    unsafe {
        let zero = _mm256_setzero_pd();
        match n {
            4 => {
                let (r0, r1, r2, r3) =
                    (_mm256_loadu_pd(r[0]), _mm256_loadu_pd(r[1]), _mm256_loadu_pd(r[2]), _mm256_loadu_pd(r[3]));
                let (t0, t1) = (_mm256_unpacklo_pd(r0, r1), _mm256_unpackhi_pd(r0, r1));
                let (t2, t3) = (_mm256_unpacklo_pd(r2, r3), _mm256_unpackhi_pd(r2, r3));
                [
                    _mm256_permute2f128_pd(t0, t2, 0x20),
                    _mm256_permute2f128_pd(t1, t3, 0x20),
                    _mm256_permute2f128_pd(t0, t2, 0x31),
                    _mm256_permute2f128_pd(t1, t3, 0x31),
                ]
            }
            2 => {
                let a = _mm256_set_m128d(_mm_loadu_pd(r[2]), _mm_loadu_pd(r[0]));
                let b = _mm256_set_m128d(_mm_loadu_pd(r[3]), _mm_loadu_pd(r[1]));
                [_mm256_unpacklo_pd(a, b), _mm256_unpackhi_pd(a, b), zero, zero]
            }
            _ => [_mm256_set_pd(*r[3], *r[2], *r[1], *r[0]), zero, zero, zero],
        }
    }
}

/// The inverse of [`gather4`]: `n` vectors back into four rows.
///
/// # Safety
/// As [`gather4`], with writable rows.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn scatter4(v: [std::arch::x86_64::__m256d; 4], n: usize, r: [*mut f64; 4]) {
    use std::arch::x86_64::*;
    // SAFETY: the caller's contract; unaligned stores.
    unsafe {
        match n {
            4 => {
                let (t0, t1) = (_mm256_unpacklo_pd(v[0], v[1]), _mm256_unpackhi_pd(v[0], v[1]));
                let (t2, t3) = (_mm256_unpacklo_pd(v[2], v[3]), _mm256_unpackhi_pd(v[2], v[3]));
                _mm256_storeu_pd(r[0], _mm256_permute2f128_pd(t0, t2, 0x20));
                _mm256_storeu_pd(r[1], _mm256_permute2f128_pd(t1, t3, 0x20));
                _mm256_storeu_pd(r[2], _mm256_permute2f128_pd(t0, t2, 0x31));
                _mm256_storeu_pd(r[3], _mm256_permute2f128_pd(t1, t3, 0x31));
            }
            2 => {
                let (lo, hi) = (_mm256_unpacklo_pd(v[0], v[1]), _mm256_unpackhi_pd(v[0], v[1]));
                _mm_storeu_pd(r[0], _mm256_castpd256_pd128(lo));
                _mm_storeu_pd(r[1], _mm256_castpd256_pd128(hi));
                _mm_storeu_pd(r[2], _mm256_extractf128_pd(lo, 1));
                _mm_storeu_pd(r[3], _mm256_extractf128_pd(hi, 1));
            }
            _ => {
                // In registers: scalar loads from the vector just stored
                // would not be forwarded from it.
                let (lo, hi) = (_mm256_castpd256_pd128(v[0]), _mm256_extractf128_pd(v[0], 1));
                _mm_storel_pd(r[0], lo);
                _mm_storeh_pd(r[1], lo);
                _mm_storel_pd(r[2], hi);
                _mm_storeh_pd(r[3], hi);
            }
        }
    }
}

/// Lanes from `W` (4 or 8) rows of `n` (1, 2 or 4) 8-byte values: lane
/// vector `k` at `out` gets value `k` of every row, built in registers and
/// stored whole (a kernel reading a lane vector then forwards from one
/// store).
///
/// # Safety
/// AVX2 is present, and AVX-512 F where `W` is 8; each row holds `n`
/// values; `out` holds `n` lane vectors of `W` values.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose_in<const W: usize>(rows: [*const u8; W], n: usize, out: *mut u8) {
    use std::arch::x86_64::*;
    let o: *mut f64 = out.cast();
    let half = |h: usize| -> [*const f64; 4] { std::array::from_fn(|l| rows[h * 4 + l].cast()) };
    // SAFETY: the caller's contract; unaligned stores.
    unsafe {
        if W == 4 {
            let v = gather4(half(0), n);
            for (k, v) in v.into_iter().enumerate().take(n) {
                _mm256_storeu_pd(o.add(4 * k), v);
            }
        } else {
            let (lo, hi) = (gather4(half(0), n), gather4(half(1), n));
            for k in 0..n {
                _mm512_storeu_pd(o.add(8 * k), _mm512_insertf64x4(_mm512_castpd256_pd512(lo[k]), hi[k], 1));
            }
        }
    }
}

/// The inverse of [`transpose_in`]: lanes back into `W` rows.
///
/// # Safety
/// As [`transpose_in`], with writable rows.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose_out<const W: usize>(lanes: *const u8, n: usize, rows: [*mut u8; W]) {
    use std::arch::x86_64::*;
    let v: *const f64 = lanes.cast();
    let half = |h: usize| -> [*mut f64; 4] { std::array::from_fn(|l| rows[h * 4 + l].cast()) };
    // SAFETY: the caller's contract; unaligned loads.
    unsafe {
        let zero = _mm256_setzero_pd();
        if W == 4 {
            let x: [__m256d; 4] = std::array::from_fn(|k| if k < n { _mm256_loadu_pd(v.add(4 * k)) } else { zero });
            scatter4(x, n, half(0));
        } else {
            let z: [__m512d; 4] =
                std::array::from_fn(|k| if k < n { _mm512_loadu_pd(v.add(8 * k)) } else { _mm512_setzero_pd() });
            scatter4(z.map(|z| _mm512_castpd512_pd256(z)), n, half(0));
            scatter4(z.map(|z| _mm512_extractf64x4_pd(z, 1)), n, half(1));
        }
    }
}
