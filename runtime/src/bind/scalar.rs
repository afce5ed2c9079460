//! The scalar binder: resolves one argument's parameter pointers for a
//! batch of elements, with private copies where writes go through a map.

use std::mem::MaybeUninit;

use super::Shape;
use crate::types::{Access, Scalar};
use crate::views::{ArgView, ViewKind};

/// Turns an [`ArgView`] into parameter references, a batch of elements at
/// a time, in three phases the host adapter runs for every batch:
///
/// 1. [`Binder::prepare`] resolves the parameter's pointer for each element
///    of the batch, in a tight loop whose kind of access is decided once per
///    batch: direct and global views point into the data; READ through a map
///    points at the target; vector views are gathered, and writes through
///    maps get a private copy (gathered, or zeroed for INC).
/// 2. The kernel is called per element with pointer loads only.
/// 3. [`Binder::finish`], element by element in order, writes private copies
///    back or adds them, so increments land in the sequential order.
///
/// Two `&mut` parameters therefore never alias, even when a map repeats a
/// target. A mapped RW or WRITE argument must see earlier elements' writes,
/// so a kernel with one runs batches of one element ([`Binder::sequential`]).
/// Resolving ahead also keeps a kernel from loading a gathered row right
/// after its stores, which stalls store-to-load forwarding.
#[doc(hidden)]
pub struct Binder<S: Shape> {
    view: ArgView,
    /// What `finish` does with the private copies.
    writeback: Writeback,
    ptrs: [*mut S; BATCH],
    copies: [MaybeUninit<S>; BATCH],
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Writeback {
    None,
    Copy,
    Add,
    /// A matrix: the element matrix is scattered into the CSR values.
    Matrix,
}

/// Elements per batch of the host adapter.
#[doc(hidden)]
pub const BATCH: usize = 32;

impl<S: Shape> Binder<S> {
    /// Values of one mapped entity: a row for vectors, the shape otherwise.
    const ROW: usize = S::COLS;
    const ALL: usize = S::ROWS * S::COLS;

    #[inline(always)]
    pub fn new(view: ArgView) -> Self {
        view.debug_assert_fits(S::ROWS, S::COLS);
        let mapped = matches!(view.kind, ViewKind::Indirect | ViewKind::Vector);
        let writeback = match view.access {
            _ if view.kind == ViewKind::Matrix => Writeback::Matrix,
            _ if !mapped => Writeback::None,
            Access::Read => Writeback::None,
            Access::Inc => Writeback::Add,
            _ => Writeback::Copy,
        };
        Binder {
            view,
            writeback,
            ptrs: [std::ptr::null_mut(); BATCH],
            copies: [const { MaybeUninit::uninit() }; BATCH],
        }
    }

    /// Whether elements must run one at a time (a mapped RW or WRITE).
    #[inline(always)]
    pub fn sequential(&self) -> bool {
        self.writeback == Writeback::Copy
    }

    /// Whether the view needs no map (direct or global): loops whose views
    /// are all unmapped bind pointers inline, without batches.
    #[inline(always)]
    pub fn unmapped(&self) -> bool {
        matches!(self.view.kind, ViewKind::Direct | ViewKind::Global)
    }

    /// The pointer of element `e` of an unmapped view.
    ///
    /// # Safety
    /// As [`KernelParam::bind`](super::KernelParam::bind); the view is unmapped and `e` in range.
    #[inline(always)]
    pub unsafe fn at(&self, e: usize) -> *mut S {
        // A global's element `e` adds into its accumulator (one, 0, but for
        // a host partial sum: `ArgView::slot`).
        let at = if self.view.kind == ViewKind::Global { (e & self.view.slot_mask) * Self::ALL } else { e * Self::ALL };
        // SAFETY: forwarded contract; the data holds `dim == ALL` values per
        // element, or per accumulator of a global.
        unsafe { self.elems().add(at).cast() }
    }

    #[inline(always)]
    fn elems(&self) -> *mut S::Elem {
        self.view.data.cast()
    }

    /// Offset (in elements) of `map[e][col]`'s entity, `len` values each.
    ///
    /// # Safety
    /// `e` and `col` within the map.
    #[inline(always)]
    unsafe fn target(&self, e: usize, col: usize, len: usize) -> usize {
        // SAFETY: caller guarantees the index lies in the map; values were
        // checked against the target set on creation.
        unsafe { *self.view.map.add(e * self.view.arity + col) as usize * len }
    }

    /// Resolves pointers for elements `first..first + n` (`n <= BATCH`).
    ///
    /// # Safety
    /// As [`KernelParam::bind`](super::KernelParam::bind).
    #[inline(always)]
    pub unsafe fn prepare(&mut self, first: usize, n: usize) {
        let data = self.elems();
        let col = self.view.column;
        // SAFETY: every offset lies in the locked data: direct elements and
        // map values are in range (validated), and dims match the shape.
        unsafe {
            match (self.view.kind, self.writeback) {
                (ViewKind::Index, _) => {
                    // Validation makes the parameter `&i64`.
                    debug_assert_eq!(std::mem::size_of::<S>(), 8);
                    let numbers: *const usize = self.view.ext.cast();
                    for i in 0..n {
                        let e = first + i;
                        let g = if numbers.is_null() { e } else { *numbers.add(e) };
                        let copy: *mut i64 = self.copies[i].as_mut_ptr().cast();
                        copy.write(g as i64);
                        self.ptrs[i] = copy.cast();
                    }
                }
                (ViewKind::Direct, _) => {
                    for i in 0..n {
                        self.ptrs[i] = data.add((first + i) * Self::ALL).cast();
                    }
                }
                (ViewKind::Global, _) => {
                    let mask = self.view.slot_mask;
                    for i in 0..n {
                        self.ptrs[i] = data.add(((first + i) & mask) * Self::ALL).cast();
                    }
                }
                (ViewKind::Indirect, Writeback::None) => {
                    for i in 0..n {
                        self.ptrs[i] = data.add(self.target(first + i, col, Self::ALL)).cast();
                    }
                }
                (ViewKind::Matrix, _) | (_, Writeback::Add) => {
                    for i in 0..n {
                        let copy: *mut S::Elem = self.copies[i].as_mut_ptr().cast();
                        for k in 0..Self::ALL {
                            copy.add(k).write(S::Elem::default());
                        }
                        self.ptrs[i] = copy.cast();
                    }
                }
                (ViewKind::Vector, _) => {
                    for i in 0..n {
                        let copy: *mut S::Elem = self.copies[i].as_mut_ptr().cast();
                        for r in 0..S::ROWS {
                            let t = self.target(first + i, r, Self::ROW);
                            std::ptr::copy_nonoverlapping(data.add(t), copy.add(r * Self::ROW), Self::ROW);
                        }
                        self.ptrs[i] = copy.cast();
                    }
                }
                (ViewKind::Indirect, _) => {
                    for i in 0..n {
                        let copy: *mut S::Elem = self.copies[i].as_mut_ptr().cast();
                        let t = self.target(first + i, col, Self::ALL);
                        std::ptr::copy_nonoverlapping(data.add(t), copy, Self::ALL);
                        self.ptrs[i] = copy.cast();
                    }
                }
            }
        }
    }

    /// The pointer of batch slot `i`.
    #[inline(always)]
    pub fn ptr(&self, i: usize) -> *mut S {
        self.ptrs[i]
    }

    /// Writes back or adds the private copy of batch slot `i` (element `e`).
    ///
    /// # Safety
    /// As [`KernelParam::bind`](super::KernelParam::bind), after the kernel ran on slot `i`.
    #[inline(always)]
    pub unsafe fn finish(&mut self, i: usize, e: usize) {
        if self.writeback == Writeback::None {
            return;
        }
        let add = self.writeback == Writeback::Add;
        let copy: *const S::Elem = self.copies[i].as_ptr().cast();
        if self.writeback == Writeback::Matrix {
            let write = self.view.access == Access::Write;
            // SAFETY: a matrix view's `ext` is its live `MatScatter` and its
            // data the matrix's locked values (`exec::LockedArgs::lock`); the
            // copy holds the element matrix.
            unsafe { crate::matrix::assembly::scatter(self.view.ext, e, copy, self.elems(), write) };
            return;
        }
        // SAFETY: `prepare` initialised the copy; targets are in range.
        unsafe {
            if self.view.kind == ViewKind::Vector {
                for r in 0..S::ROWS {
                    let t = self.target(e, r, Self::ROW);
                    self.store(t, copy.add(r * Self::ROW), Self::ROW, add);
                }
            } else {
                let t = self.target(e, self.view.column, Self::ALL);
                self.store(t, copy, Self::ALL, add);
            }
        }
    }

    /// Copies or adds `len` values from `src` to the data at offset `to`.
    ///
    /// # Safety
    /// Both ranges are valid for `len` values.
    #[inline(always)]
    unsafe fn store(&self, to: usize, src: *const S::Elem, len: usize, add: bool) {
        let dst = self.elems();
        for k in 0..len {
            // SAFETY: forwarded contract.
            unsafe {
                let v = *src.add(k);
                let p = dst.add(to + k);
                *p = if add { (*p).inc(v) } else { v };
            }
        }
    }
}
