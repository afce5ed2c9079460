//! Element types a dat or global may hold, and the access modes.

use std::fmt;

mod sealed {
    /// Only parloop's element types are [`Scalar`](super::Scalar)s, and
    /// each knows its variant of a loop's lock (no allocation per locked
    /// argument, see `decl::LoopGuard`).
    pub trait Sealed: Sized {
        // Crate-private types in a public trait's method: nothing outside
        // the crate can name `Sealed`, so nothing outside can call it.
        #[allow(private_interfaces)]
        fn loop_guard(guard: crate::host_access::WriteGuard<'_, Vec<Self>>) -> crate::decl::LoopGuard<'_>;
    }
}

/// The element types of dats and globals: `f64`, `f32`, `i32`, `u32`, `i64`, `u64`.
///
/// The arithmetic here combines reduction partials; integer additions wrap
/// instead of panicking.
pub trait Scalar: bytemuck::Pod + Default + PartialOrd + fmt::Debug + Send + Sync + sealed::Sealed + 'static {
    /// The runtime tag of the type.
    const TYPE: ElemType;
    /// `x` with `ADD_IDENTITY + x == x` for every `x`: `-0.0` for floats
    /// (`+0.0 + -0.0` is `+0.0`), 0 for integers.
    const ADD_IDENTITY: Self;
    /// `self + other` (wrapping for integers).
    fn inc(self, other: Self) -> Self;
    /// The smaller value, as the kernel's `min` (NaN-ignoring for floats).
    fn min_of(self, other: Self) -> Self;
    /// The larger value, as the kernel's `max`.
    fn max_of(self, other: Self) -> Self;
}

macro_rules! scalar {
    (sealed $t:ty, $tag:ident) => {
        impl sealed::Sealed for $t {
            #[allow(private_interfaces)]
            fn loop_guard(guard: crate::host_access::WriteGuard<'_, Vec<Self>>) -> crate::decl::LoopGuard<'_> {
                crate::decl::LoopGuard::$tag(guard)
            }
        }
    };
    ($t:ty, $tag:ident, float) => {
        scalar!(sealed $t, $tag);
        impl Scalar for $t {
            const TYPE: ElemType = ElemType::$tag;
            const ADD_IDENTITY: Self = -0.0;
            #[inline(always)]
            fn inc(self, other: Self) -> Self {
                self + other
            }
            fn min_of(self, other: Self) -> Self {
                self.min(other)
            }
            fn max_of(self, other: Self) -> Self {
                self.max(other)
            }
        }
    };
    ($t:ty, $tag:ident, int) => {
        scalar!(sealed $t, $tag);
        impl Scalar for $t {
            const TYPE: ElemType = ElemType::$tag;
            const ADD_IDENTITY: Self = 0;
            #[inline(always)]
            fn inc(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
            fn min_of(self, other: Self) -> Self {
                Ord::min(self, other)
            }
            fn max_of(self, other: Self) -> Self {
                Ord::max(self, other)
            }
        }
    };
}
scalar!(f64, F64, float);
scalar!(f32, F32, float);
scalar!(i32, I32, int);
scalar!(u32, U32, int);
scalar!(i64, I64, int);
scalar!(u64, U64, int);

/// Runtime tag of a [`Scalar`] type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    /// `f64`
    F64,
    /// `f32`
    F32,
    /// `i32`
    I32,
    /// `u32`
    U32,
    /// `i64`
    I64,
    /// `u64`
    U64,
}

impl ElemType {
    /// The Rust name of the type.
    pub fn name(self) -> &'static str {
        match self {
            ElemType::F64 => "f64",
            ElemType::F32 => "f32",
            ElemType::I32 => "i32",
            ElemType::U32 => "u32",
            ElemType::I64 => "i64",
            ElemType::U64 => "u64",
        }
    }

    /// Size in bytes.
    pub fn size(self) -> usize {
        match self {
            ElemType::F64 | ElemType::I64 | ElemType::U64 => 8,
            ElemType::F32 | ElemType::I32 | ElemType::U32 => 4,
        }
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a loop accesses an argument.
///
/// The constants [`Access::READ`], [`Access::WRITE`], [`Access::RW`],
/// [`Access::INC`], [`Access::MIN`] and [`Access::MAX`] name the modes as OP2
/// and PyOP2 do.
///
/// ```
/// use parloop::Access;
/// assert_eq!(Access::INC.name(), "INC");
/// assert!(Access::INC.writes() && Access::INC.is_reduction());
/// assert!(!Access::READ.writes() && !Access::WRITE.reads());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Read only.
    Read,
    /// Written entirely, not read.
    Write,
    /// Read and written.
    ReadWrite,
    /// Only added to. The rule, on every backend: the kernel may only add
    /// to the parameter (`+=`, `-=`; never assign or read it: `par_loop`
    /// rejects INC on any other, see
    /// [`ParamSig::increment_only`](crate::ParamSig::increment_only)), the
    /// value the parameter starts from is not part of the contract, and the
    /// target ends up as its value before the loop plus everything the
    /// kernel added. (How: a direct argument's parameter is the target
    /// itself, an indirect, vector or matrix argument's a zeroed private
    /// copy added afterwards, a global's a zeroed partial combined at the
    /// end; since the kernel cannot read the parameter, these differ only
    /// in the order float additions round. Hand-written kernels, whose
    /// bodies parloop does not see, must keep the rule themselves.)
    Inc,
    /// Global minimum reduction. For floats the rule is Rust's `f64::min`
    /// (IEEE minNum) on every backend, the device's combining steps (CUDA
    /// `fmin`) included: a NaN operand is ignored, so NaNs in the data or a
    /// NaN initial value give the minimum of the other values; only when
    /// every value is NaN is the result NaN. Integers compare as usual.
    Min,
    /// Global maximum reduction, as [`Access::Min`] with Rust's `f64::max`
    /// (a NaN operand is ignored; all NaN gives NaN).
    Max,
}

impl Access {
    /// [`Access::Read`]
    pub const READ: Access = Access::Read;
    /// [`Access::Write`]
    pub const WRITE: Access = Access::Write;
    /// [`Access::ReadWrite`]
    pub const RW: Access = Access::ReadWrite;
    /// [`Access::Inc`]
    pub const INC: Access = Access::Inc;
    /// [`Access::Min`]
    pub const MIN: Access = Access::Min;
    /// [`Access::Max`]
    pub const MAX: Access = Access::Max;

    /// The OP2 name of the mode.
    pub fn name(self) -> &'static str {
        match self {
            Access::Read => "READ",
            Access::Write => "WRITE",
            Access::ReadWrite => "RW",
            Access::Inc => "INC",
            Access::Min => "MIN",
            Access::Max => "MAX",
        }
    }

    /// Whether the mode modifies the target.
    pub fn writes(self) -> bool {
        self != Access::Read
    }

    /// Whether the mode reads the previous value.
    pub fn reads(self) -> bool {
        !matches!(self, Access::Write)
    }

    /// Whether the mode is a global reduction (INC, MIN, MAX).
    pub fn is_reduction(self) -> bool {
        matches!(self, Access::Inc | Access::Min | Access::Max)
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

// The one conversion point between the runtime's vocabulary and the loop
// generator's (`parloop_kernels`, which knows nothing of the runtime).

impl From<ElemType> for parloop_kernels::Scalar {
    fn from(e: ElemType) -> Self {
        use parloop_kernels::Scalar;
        match e {
            ElemType::F64 => Scalar::F64,
            ElemType::F32 => Scalar::F32,
            ElemType::I32 => Scalar::I32,
            ElemType::U32 => Scalar::U32,
            ElemType::I64 => Scalar::I64,
            ElemType::U64 => Scalar::U64,
        }
    }
}

impl From<Access> for parloop_kernels::loops::Mode {
    fn from(a: Access) -> Self {
        use parloop_kernels::loops::Mode;
        match a {
            Access::Read => Mode::Read,
            Access::Write => Mode::Write,
            Access::ReadWrite => Mode::ReadWrite,
            Access::Inc => Mode::Inc,
            Access::Min => Mode::Min,
            Access::Max => Mode::Max,
        }
    }
}
