//! Linear algebra on dats and matrices: vector operations (`axpy`, `dot`,
//! ...) built as parloop loops, so that they run on every backend and
//! distributed, and the sparse matrix-vector product.
//!
//! The operations are methods of [`Runtime`](crate::Runtime), since dats do
//! not hold their runtime:
//!
//! ```
//! use parloop::{Backend, Runtime};
//! let rt = Runtime::with_backend(Backend::Threads)?;
//! let nodes = rt.set("nodes", 3)?;
//! let x = rt.dat("x", &nodes, 1, vec![1.0, 2.0, 3.0])?;
//! let y = rt.dat("y", &nodes, 1, vec![1.0; 3])?;
//! rt.axpy(2.0, &x, &y)?;                      // y = 2 x + y
//! assert_eq!(y.values()?, vec![3.0, 5.0, 7.0]);
//! assert_eq!(rt.dot(&x, &y)?, 3.0 + 10.0 + 21.0);
//! # Ok::<(), parloop::Error>(())
//! ```

mod fused;
#[cfg(target_arch = "x86_64")]
mod gather;
mod kernels;
pub(crate) mod spmv;
mod vector;

use std::ops::{Add, Div, Mul, Neg, Sub};

use crate::types::Scalar;

pub use spmv::LinearOperator;

/// The largest dim (block size) of dats the vector operations, and so CG,
/// take.
pub(crate) const MAX_VECTOR_DIM: usize = kernels::MAX_DIM;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for f32 {}
}

/// The element types of the linear-algebra operations: `f64` and `f32`.
/// Sealed; its methods are what the operations and solvers need.
///
/// ```
/// use parloop::linalg::Real;
/// assert_eq!(<f32 as Real>::from_f64(0.5).to_f64(), 0.5);
/// ```
pub trait Real:
    Scalar
    + sealed::Sealed
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// The value as an `f64` (exact for both types).
    fn to_f64(self) -> f64;
    /// The nearest value of this type.
    fn from_f64(v: f64) -> Self;
    /// The square root.
    fn sqrt(self) -> Self;
    /// The smallest positive normal value, as an `f64`.
    const MIN_POSITIVE: f64;
    /// The machine epsilon, as an `f64`.
    const EPSILON: f64;
    /// The largest finite value, as an `f64`.
    const MAX: f64;
    /// The vector kernels for `dim` values per entity.
    #[doc(hidden)]
    fn kernels(dim: usize) -> Option<&'static kernels::VecKernels>;
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const MIN_POSITIVE: f64 = f64::MIN_POSITIVE;
    const EPSILON: f64 = f64::EPSILON;
    const MAX: f64 = f64::MAX;
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
    fn kernels(dim: usize) -> Option<&'static kernels::VecKernels> {
        kernels::f64_table(dim)
    }
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const MIN_POSITIVE: f64 = f32::MIN_POSITIVE as f64;
    const EPSILON: f64 = f32::EPSILON as f64;
    const MAX: f64 = f32::MAX as f64;
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
    fn kernels(dim: usize) -> Option<&'static kernels::VecKernels> {
        kernels::f32_table(dim)
    }
}
