//! Binding argument views to kernel parameters: how a host adapter turns
//! each [`ArgView`] into the `&T`, `&[T; N]` or `&mut [[T; M]; N]` its
//! kernel takes.
//!
//! A parameter's type is a [`KernelParam`] over a [`Shape`]. The scalar
//! adapter binds a batch of elements at a time with a [`Binder`]
//! (`scalar`); the lane-wise adapter binds a group of four or eight
//! elements into [`crate::lanes::Lanes`] with a [`LaneBinder`] (`lanes`).
//! `adapter` holds the macros `#[parloop::kernel]`'s expansion calls to
//! generate both adapters.

mod adapter;
mod lanes;
mod scalar;

pub use lanes::{pipelined, usable, LaneBinder};
pub use scalar::{Binder, BATCH};

use crate::kernel::ParamSig;
use crate::lanes::Lanes;
use crate::types::Scalar;

/// The shapes a kernel parameter may have: `T`, `[T; N]`, `[[T; M]; N]`.
///
/// # Safety
/// `Self` must be exactly `ROWS * COLS` contiguous values of `Elem`.
#[doc(hidden)]
pub unsafe trait Shape: Sized {
    type Elem: Scalar;
    /// The shape with a [`Lanes`] of `W` lanes for each value (see
    /// [`crate::lanes`]).
    type Lane<const W: usize>: Copy;
    const ROWS: usize;
    const COLS: usize;
    /// Whether the shape is an array of rows (`[[T; M]; N]`), even of one
    /// row: the device code declares it as rows, not as a flat array.
    const NESTED: bool = false;
}

// SAFETY: a scalar is one value of itself.
unsafe impl<T: Scalar> Shape for T {
    type Elem = T;
    type Lane<const W: usize> = Lanes<T, W>;
    const ROWS: usize = 1;
    const COLS: usize = 1;
}

// SAFETY: arrays are contiguous with no padding between elements.
unsafe impl<T: Scalar, const N: usize> Shape for [T; N] {
    type Elem = T;
    type Lane<const W: usize> = [Lanes<T, W>; N];
    const ROWS: usize = 1;
    const COLS: usize = N;
}

// SAFETY: as above, rows of `M` values, `N` of them, contiguous.
unsafe impl<T: Scalar, const M: usize, const N: usize> Shape for [[T; M]; N] {
    type Elem = T;
    type Lane<const W: usize> = [[Lanes<T, W>; M]; N];
    const ROWS: usize = N;
    const COLS: usize = M;
    const NESTED: bool = true;
}

/// A kernel parameter type: `&S` or `&mut S` for a [`Shape`] `S`.
#[doc(hidden)]
pub trait KernelParam {
    type Shape: Shape;
    const SIG: ParamSig;
    /// Binds the parameter for batch slot `i` (after [`Binder::prepare`]).
    ///
    /// # Safety
    /// The binder's view must satisfy the [`crate::HostFn`] contract, and the result
    /// must not outlive the binder's next use.
    unsafe fn bind(binder: &mut Binder<Self::Shape>, i: usize) -> Self;
    /// Binds the parameter for element `e` of an unmapped view.
    ///
    /// # Safety
    /// As [`KernelParam::bind`], and [`Binder::unmapped`].
    unsafe fn bind_at(binder: &Binder<Self::Shape>, e: usize) -> Self;
    /// The parameter of a lane-wise twin of `W` lanes: `&S::Lane<W>` or
    /// `&mut S::Lane<W>`.
    type LaneRef<const W: usize>;
    /// Binds the lane-wise parameter (after [`LaneBinder::load`]).
    ///
    /// # Safety
    /// As [`KernelParam::bind`].
    unsafe fn bind_lanes<const W: usize>(binder: &mut LaneBinder<Self::Shape, W>) -> Self::LaneRef<W>;
}

impl<'a, S: Shape> KernelParam for &'a S {
    type Shape = S;
    type LaneRef<const W: usize> = &'a S::Lane<W>;
    #[inline(always)]
    unsafe fn bind_lanes<const W: usize>(binder: &mut LaneBinder<S, W>) -> Self::LaneRef<W> {
        // SAFETY: forwarded contract; `load` initialised the lanes.
        unsafe { &*binder.ptr() }
    }
    const SIG: ParamSig = ParamSig {
        elem: <S::Elem as Scalar>::TYPE,
        rows: S::ROWS,
        cols: S::COLS,
        nested: S::NESTED,
        mutable: false,
        increment_only: true,
        min_only: true,
        max_only: true,
        name: "",
        increment_use: "",
    };
    #[inline(always)]
    unsafe fn bind(binder: &mut Binder<S>, i: usize) -> Self {
        // SAFETY: forwarded contract.
        unsafe { &*binder.ptr(i) }
    }
    #[inline(always)]
    unsafe fn bind_at(binder: &Binder<S>, e: usize) -> Self {
        // SAFETY: forwarded contract.
        unsafe { &*binder.at(e) }
    }
}

impl<'a, S: Shape> KernelParam for &'a mut S {
    type Shape = S;
    type LaneRef<const W: usize> = &'a mut S::Lane<W>;
    #[inline(always)]
    unsafe fn bind_lanes<const W: usize>(binder: &mut LaneBinder<S, W>) -> Self::LaneRef<W> {
        // SAFETY: forwarded contract; each argument has its own lanes.
        unsafe { &mut *binder.ptr() }
    }
    const SIG: ParamSig = ParamSig {
        elem: <S::Elem as Scalar>::TYPE,
        rows: S::ROWS,
        cols: S::COLS,
        nested: S::NESTED,
        mutable: true,
        increment_only: true,
        min_only: true,
        max_only: true,
        name: "",
        increment_use: "",
    };
    #[inline(always)]
    unsafe fn bind(binder: &mut Binder<S>, i: usize) -> Self {
        // SAFETY: forwarded contract.
        unsafe { &mut *binder.ptr(i) }
    }
    #[inline(always)]
    unsafe fn bind_at(binder: &Binder<S>, e: usize) -> Self {
        // SAFETY: forwarded contract; distinct mutable views are distinct dats (validated).
        unsafe { &mut *binder.at(e) }
    }
}
