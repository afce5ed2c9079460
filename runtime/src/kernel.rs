//! Kernels: a name, a monomorphised host function, a parameter signature and
//! (for the GPU backends) CUDA C++ source.
//!
//! A kernel is an ordinary Rust function whose parameters are references to
//! scalars or fixed arrays. The [`kernel!`](crate::kernel!) macro keeps the
//! function and generates a [`Kernel`] whose host adapter loops over a range
//! of elements and calls the function directly, so the compiler inlines it:
//! there is one indirect call per block, never per element, and nothing is
//! allocated per element.

use std::mem::MaybeUninit;

use crate::types::{Access, ElemType, Scalar};

/// The type and shape of one kernel parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamSig {
    /// Element type.
    pub elem: ElemType,
    /// Rows: 1 for `&T` and `&[T; N]`, `N` for `&[[T; M]; N]`.
    pub rows: usize,
    /// Values per row: 1 for `&T`, `N` for `&[T; N]`, `M` for `&[[T; M]; N]`.
    pub cols: usize,
    /// Whether the parameter is `&mut`.
    pub mutable: bool,
}

impl ParamSig {
    /// Values the parameter holds.
    pub fn len(&self) -> usize {
        self.rows * self.cols
    }

    /// Whether the parameter holds no value (never, for valid shapes).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rust spelling of the parameter type, for messages.
    pub fn describe(&self) -> String {
        let m = if self.mutable { "&mut " } else { "&" };
        match (self.rows, self.cols) {
            (1, 1) => format!("{m}{}", self.elem),
            (1, n) => format!("{m}[{}; {n}]", self.elem),
            (r, c) => format!("{m}[[{}; {c}]; {r}]", self.elem),
        }
    }
}

/// The host entry point of a kernel: runs elements `start..end` with the
/// argument views.
///
/// # Safety
/// The views must describe live, correctly typed and sized data as built by
/// the executor, and no other code may access the written parts meanwhile.
pub type HostFn = unsafe fn(&[ArgView], usize, usize);

/// A kernel: what [`par_loop`](crate::Runtime::par_loop) runs.
#[derive(Debug)]
pub struct Kernel {
    name: &'static str,
    params: &'static [ParamSig],
    host: HostFn,
    cuda_source: Option<&'static str>,
}

impl Kernel {
    /// Builds a kernel from its parts. Used by [`kernel!`](crate::kernel!);
    /// the host function must follow the [`HostFn`] contract for `params`.
    ///
    /// # Safety
    /// `host` must only access the views as `params` describes them.
    pub const unsafe fn from_parts(
        name: &'static str,
        params: &'static [ParamSig],
        host: HostFn,
        cuda_source: Option<&'static str>,
    ) -> Kernel {
        Kernel {
            name,
            params,
            host,
            cuda_source,
        }
    }

    /// The kernel's name (the Rust function's).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The parameter signature.
    pub fn params(&self) -> &'static [ParamSig] {
        self.params
    }

    /// CUDA C++ source of the device function, when available.
    pub fn cuda_source(&self) -> Option<&'static str> {
        self.cuda_source
    }

    pub(crate) fn host(&self) -> HostFn {
        self.host
    }
}

/// How a view reaches its data.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewKind {
    Direct,
    Indirect,
    Vector,
    Global,
}

/// Raw description of one argument's data for the host adapter.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct ArgView {
    pub(crate) data: *mut u8,
    /// Values per entity (the binder uses the equal, validated shape size).
    #[allow(dead_code)]
    pub(crate) dim: usize,
    pub(crate) map: *const i32,
    pub(crate) arity: usize,
    pub(crate) column: usize,
    pub(crate) kind: ViewKind,
    pub(crate) access: Access,
}

/// The shapes a kernel parameter may have: `T`, `[T; N]`, `[[T; M]; N]`.
///
/// # Safety
/// `Self` must be exactly `ROWS * COLS` contiguous values of `Elem`.
#[doc(hidden)]
pub unsafe trait Shape: Sized {
    type Elem: Scalar;
    const ROWS: usize;
    const COLS: usize;
}

// SAFETY: a scalar is one value of itself.
unsafe impl<T: Scalar> Shape for T {
    type Elem = T;
    const ROWS: usize = 1;
    const COLS: usize = 1;
}

// SAFETY: arrays are contiguous with no padding between elements.
unsafe impl<T: Scalar, const N: usize> Shape for [T; N] {
    type Elem = T;
    const ROWS: usize = 1;
    const COLS: usize = N;
}

// SAFETY: as above, rows of `M` values, `N` of them, contiguous.
unsafe impl<T: Scalar, const M: usize, const N: usize> Shape for [[T; M]; N] {
    type Elem = T;
    const ROWS: usize = N;
    const COLS: usize = M;
}

/// A kernel parameter type: `&S` or `&mut S` for a [`Shape`] `S`.
#[doc(hidden)]
pub trait KernelParam {
    type Shape: Shape;
    const SIG: ParamSig;
    /// Binds the parameter for batch slot `i` (after [`Binder::prepare`]).
    ///
    /// # Safety
    /// The binder's view must satisfy the [`HostFn`] contract, and the result
    /// must not outlive the binder's next use.
    unsafe fn bind(binder: &mut Binder<Self::Shape>, i: usize) -> Self;
}

impl<S: Shape> KernelParam for &S {
    type Shape = S;
    const SIG: ParamSig = ParamSig {
        elem: <S::Elem as Scalar>::TYPE,
        rows: S::ROWS,
        cols: S::COLS,
        mutable: false,
    };
    #[inline(always)]
    unsafe fn bind(binder: &mut Binder<S>, i: usize) -> Self {
        // SAFETY: forwarded contract.
        unsafe { &*binder.ptr(i) }
    }
}

impl<S: Shape> KernelParam for &mut S {
    type Shape = S;
    const SIG: ParamSig = ParamSig {
        elem: <S::Elem as Scalar>::TYPE,
        rows: S::ROWS,
        cols: S::COLS,
        mutable: true,
    };
    #[inline(always)]
    unsafe fn bind(binder: &mut Binder<S>, i: usize) -> Self {
        // SAFETY: forwarded contract.
        unsafe { &mut *binder.ptr(i) }
    }
}

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
}

/// Elements per batch of the host adapter.
#[doc(hidden)]
pub const BATCH: usize = 16;

impl<S: Shape> Binder<S> {
    /// Values of one mapped entity: a row for vectors, the shape otherwise.
    const ROW: usize = S::COLS;
    const ALL: usize = S::ROWS * S::COLS;

    #[inline(always)]
    pub fn new(view: ArgView) -> Self {
        let mapped = matches!(view.kind, ViewKind::Indirect | ViewKind::Vector);
        let writeback = match view.access {
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
    /// As [`KernelParam::bind`].
    #[inline(always)]
    pub unsafe fn prepare(&mut self, first: usize, n: usize) {
        let data = self.elems();
        let col = self.view.column;
        // SAFETY: every offset lies in the locked data: direct elements and
        // map values are in range (validated), and dims match the shape.
        unsafe {
            match (self.view.kind, self.writeback) {
                (ViewKind::Direct, _) => {
                    for i in 0..n {
                        self.ptrs[i] = data.add((first + i) * Self::ALL).cast();
                    }
                }
                (ViewKind::Global, _) => {
                    for i in 0..n {
                        self.ptrs[i] = data.cast();
                    }
                }
                (ViewKind::Indirect, Writeback::None) => {
                    for i in 0..n {
                        self.ptrs[i] = data.add(self.target(first + i, col, Self::ALL)).cast();
                    }
                }
                (_, Writeback::Add) => {
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
                            std::ptr::copy_nonoverlapping(
                                data.add(t),
                                copy.add(r * Self::ROW),
                                Self::ROW,
                            );
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
    /// As [`KernelParam::bind`], after the kernel ran on slot `i`.
    #[inline(always)]
    pub unsafe fn finish(&mut self, i: usize, e: usize) {
        if self.writeback == Writeback::None {
            return;
        }
        let add = self.writeback == Writeback::Add;
        let copy: *const S::Elem = self.copies[i].as_ptr().cast();
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

/// Declares a kernel: keeps the function for host use and generates a
/// descriptor type of the same name whose `KERNEL` constant is the
/// [`Kernel`] to pass to [`par_loop`](crate::Runtime::par_loop).
///
/// Parameters are `&T`, `&mut T`, `&[T; N]`, `&mut [T; N]`, `&[[T; M]; N]` or
/// `&mut [[T; M]; N]` with `T` one of `f64 f32 i32 u32 i64 u64`.
///
/// ```
/// use parloop::{kernel, Access, Backend, Runtime};
///
/// kernel! {
///     /// Doubles a value and accumulates the total.
///     pub fn double(x: &mut f64, total: &mut f64) {
///         *x *= 2.0;
///         *total += *x;
///     }
/// }
///
/// let rt = Runtime::with_backend(Backend::Seq).unwrap();
/// let nodes = rt.set("nodes", 3);
/// let x = rt.dat("x", &nodes, 1, vec![1.0, 2.0, 3.0]).unwrap();
/// let total = rt.global("total", &[0.0]).unwrap();
/// rt.par_loop(double::KERNEL, &nodes, &[x.arg(Access::RW), total.arg(Access::INC)]).unwrap();
/// assert_eq!(x.values(), vec![2.0, 4.0, 6.0]);
/// assert_eq!(total.value(), 12.0);
/// ```
#[macro_export]
macro_rules! kernel {
    (
        $(#[$attr:meta])*
        $vis:vis fn $name:ident ( $( $param:ident : $ty:ty ),* $(,)? ) $body:block
    ) => {
        $(#[$attr])*
        // Kernels are written in the indexable subset that translates to CUDA.
        #[allow(clippy::too_many_arguments, clippy::needless_range_loop, clippy::manual_memcpy)]
        $vis fn $name( $( $param : $ty ),* ) $body

        #[doc = concat!("The parloop kernel descriptor of [`", stringify!($name), "()`].")]
        #[allow(non_camel_case_types, dead_code)]
        $vis struct $name {}

        impl $name {
            /// The kernel, for `par_loop`.
            #[allow(dead_code)]
            pub const KERNEL: &'static $crate::Kernel = &{
                #[allow(unused_mut, unused_variables, clippy::too_many_arguments)]
                unsafe fn host(views: &[$crate::__private::ArgView], start: usize, end: usize) {
                    let mut views = views.iter();
                    $(
                        let mut $param = $crate::__private::Binder::<
                            <$ty as $crate::__private::KernelParam>::Shape,
                        >::new(*views.next().expect("validated argument count"));
                    )*
                    let mut batch = $crate::__private::BATCH;
                    $( if $param.sequential() { batch = 1; } )*
                    let mut first = start;
                    while first < end {
                        let n = batch.min(end - first);
                        // SAFETY: the executor upholds the HostFn contract.
                        unsafe {
                            $( $param.prepare(first, n); )*
                            for i in 0..n {
                                $name( $( <$ty as $crate::__private::KernelParam>::bind(&mut $param, i) ),* );
                            }
                            for i in 0..n {
                                $( $param.finish(i, first + i); )*
                            }
                        }
                        first += n;
                    }
                }
                // SAFETY: `host` binds each view with its parameter's shape.
                unsafe {
                    $crate::Kernel::from_parts(
                        stringify!($name),
                        &[ $( <$ty as $crate::__private::KernelParam>::SIG ),* ],
                        host,
                        None,
                    )
                }
            };
        }
    };
}
