//! Argument views: what the executor hands a kernel's host adapter, one
//! raw [`ArgView`] per argument (a data pointer, and the map column it goes
//! through). They are the whole interface between the runtime, which locks
//! and validates the data, and the adapters `#[parloop::kernel]` generates,
//! which turn views into parameter references (`crate::bind`).

use crate::types::Access;

/// How a view reaches its data.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewKind {
    Direct,
    Indirect,
    Vector,
    Global,
    /// A matrix: the kernel gets a zeroed element matrix, scattered into
    /// the CSR values after it (`ArgView::ext` is its `MatScatter`).
    Matrix,
    /// The element's number (`ArgView::ext`: the global numbers, or null
    /// when they are the local ones).
    Index,
}

/// Raw description of one argument's data for the host adapter.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct ArgView {
    pub(crate) data: *mut u8,
    /// Values per entity: validated against the kernel parameter's shape,
    /// which the binders use (they check it in debug builds).
    pub(crate) dim: usize,
    pub(crate) map: *const i32,
    pub(crate) arity: usize,
    pub(crate) column: usize,
    pub(crate) kind: ViewKind,
    pub(crate) access: Access,
    /// What `Matrix` and `Index` views need besides (null otherwise).
    pub(crate) ext: *const (),
    /// A global increment's accumulators less one (a power of two less
    /// one; 0 elsewhere): element `e` adds into accumulator
    /// `e & slot_mask`, `dim` values each (see [`crate::exec::INC_SLOTS`]).
    pub(crate) slot_mask: usize,
}

impl ArgView {
    /// Whether the view's values per entity fit a parameter of `rows` rows
    /// of `cols` values: a vector view's entity is one row, any other
    /// view's is the whole parameter (as validation ensures).
    pub(crate) fn fits(&self, rows: usize, cols: usize) -> bool {
        self.dim == if self.kind == ViewKind::Vector { cols } else { rows * cols }
    }

    /// In debug builds, asserts that the view [`fits`](ArgView::fits) a
    /// parameter of `rows` x `cols` (what a binder is built for).
    #[inline(always)]
    pub(crate) fn debug_assert_fits(&self, rows: usize, cols: usize) {
        debug_assert!(self.fits(rows, cols), "argument view of dim {} for a parameter of {rows}x{cols}", self.dim);
    }
}
