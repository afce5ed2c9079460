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
    /// Binds the parameter for element `e`.
    ///
    /// # Safety
    /// The binder's view must satisfy the [`HostFn`] contract, and the result
    /// must not outlive the binder's next use.
    unsafe fn bind(binder: &mut Binder<Self::Shape>, e: usize) -> Self;
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
    unsafe fn bind(binder: &mut Binder<S>, e: usize) -> Self {
        // SAFETY: forwarded contract.
        unsafe { &*binder.shared(e) }
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
    unsafe fn bind(binder: &mut Binder<S>, e: usize) -> Self {
        // SAFETY: forwarded contract.
        unsafe { &mut *binder.exclusive(e) }
    }
}

/// Turns an [`ArgView`] into parameter references, element by element.
///
/// Direct, single-target READ and global arguments point straight into the
/// data. Vector arguments, and writes through maps, go through a private copy
/// in `scratch`: gathered (READ, RW, WRITE) or zeroed (INC) before the call,
/// written back or added by [`Binder::finish`] after it. Two `&mut`
/// parameters therefore never alias, even when a map repeats a target.
///
/// READ vector arguments are gathered [`BATCH`] elements ahead, into `batch`:
/// a kernel reading a row right after the gather stored it would often load
/// across two pending stores, which stalls store-to-load forwarding (this
/// halved adt_calc's speed). Nothing in a loop writes a READ dat
/// (validation), so gathering early is exact.
#[doc(hidden)]
pub struct Binder<S: Shape> {
    view: ArgView,
    scratch: MaybeUninit<S>,
    batch: [MaybeUninit<S>; BATCH],
    batch_start: usize,
}

/// Elements whose READ vector arguments are gathered at once.
#[doc(hidden)]
pub const BATCH: usize = 8;

impl<S: Shape> Binder<S> {
    #[inline(always)]
    pub fn new(view: ArgView) -> Self {
        Binder {
            view,
            scratch: MaybeUninit::uninit(),
            batch: [const { MaybeUninit::uninit() }; BATCH],
            batch_start: 0,
        }
    }

    /// Prepares elements `start..end` (at most [`BATCH`]): gathers READ
    /// vector arguments.
    ///
    /// # Safety
    /// As [`KernelParam::bind`].
    #[inline(always)]
    pub unsafe fn prepare(&mut self, start: usize, end: usize) {
        if self.view.kind != ViewKind::Vector || self.view.access != Access::Read {
            return;
        }
        self.batch_start = start;
        let src = self.elems();
        for (i, e) in (start..end).enumerate() {
            let dst: *mut S::Elem = self.batch[i].as_mut_ptr().cast();
            for r in 0..S::ROWS {
                // SAFETY: each batch slot holds ROWS rows of COLS values; the
                // target entity holds COLS (validated: dim == COLS).
                unsafe {
                    let t = self.target(e, r, S::COLS);
                    std::ptr::copy_nonoverlapping(src.add(t), dst.add(r * S::COLS), S::COLS);
                }
            }
        }
    }

    #[inline(always)]
    fn elems(&self) -> *mut S::Elem {
        self.view.data.cast()
    }

    #[inline(always)]
    fn scratch(&mut self) -> *mut S::Elem {
        self.scratch.as_mut_ptr().cast()
    }

    /// Values one entity holds: `COLS` for a vector argument (one row per
    /// map column), the whole shape otherwise. Validation guarantees it
    /// equals the view's `dim`; using the constant lets the compiler unroll.
    const fn entity_len(vector: bool) -> usize {
        if vector {
            S::COLS
        } else {
            S::ROWS * S::COLS
        }
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

    /// Copies the entity (or, for a vector, the entities of every column)
    /// of element `e` into the scratch, or zeroes the scratch for INC.
    ///
    /// # Safety
    /// As [`KernelParam::bind`]; the view is indirect or vector.
    #[inline(always)]
    unsafe fn fill_scratch(&mut self, e: usize) {
        let src = self.elems();
        let dst = self.scratch();
        let vector = self.view.kind == ViewKind::Vector;
        let rows = if vector { S::ROWS } else { 1 };
        let len = Self::entity_len(vector);
        if self.view.access == Access::Inc {
            for k in 0..S::ROWS * S::COLS {
                // SAFETY: the scratch holds ROWS * COLS values.
                unsafe { dst.add(k).write(S::Elem::default()) };
            }
            return;
        }
        for r in 0..rows {
            let col = if vector { r } else { self.view.column };
            // SAFETY: the scratch holds `rows * len` values; the target
            // entity holds `len` (validated: dim == len).
            unsafe {
                let t = self.target(e, col, len);
                std::ptr::copy_nonoverlapping(src.add(t), dst.add(r * len), len);
            }
        }
    }

    /// A shared reference for element `e`.
    ///
    /// # Safety
    /// As [`KernelParam::bind`].
    #[inline(always)]
    pub unsafe fn shared(&mut self, e: usize) -> *const S {
        let len = S::ROWS * S::COLS;
        // SAFETY: forwarded contract; see each arm.
        unsafe {
            match self.view.kind {
                ViewKind::Direct => self.elems().add(e * len).cast(),
                ViewKind::Indirect => self
                    .elems()
                    .add(self.target(e, self.view.column, len))
                    .cast(),
                ViewKind::Global => self.elems().cast(),
                // Gathered by `prepare`.
                ViewKind::Vector => self.batch[e - self.batch_start].as_ptr(),
            }
        }
    }

    /// An exclusive reference for element `e`; pair with [`Binder::finish`].
    ///
    /// # Safety
    /// As [`KernelParam::bind`].
    #[inline(always)]
    pub unsafe fn exclusive(&mut self, e: usize) -> *mut S {
        // SAFETY: forwarded contract; direct and global data are not aliased
        // by other parameters (validated), mapped data goes through scratch.
        unsafe {
            match self.view.kind {
                ViewKind::Direct => self.elems().add(e * S::ROWS * S::COLS).cast(),
                ViewKind::Global => self.elems().cast(),
                ViewKind::Indirect | ViewKind::Vector => {
                    self.fill_scratch(e);
                    self.scratch.as_mut_ptr()
                }
            }
        }
    }

    /// After the kernel call: writes back or adds a mapped write's scratch.
    ///
    /// # Safety
    /// As [`KernelParam::bind`], after [`Binder::exclusive`] for the same `e`.
    #[inline(always)]
    pub unsafe fn finish(&mut self, e: usize) {
        if !self.view.access.writes()
            || !matches!(self.view.kind, ViewKind::Indirect | ViewKind::Vector)
        {
            return;
        }
        let dst = self.elems();
        let src = self.scratch();
        let vector = self.view.kind == ViewKind::Vector;
        let rows = if vector { S::ROWS } else { 1 };
        let len = Self::entity_len(vector);
        let inc = self.view.access == Access::Inc;
        for r in 0..rows {
            let col = if vector { r } else { self.view.column };
            // SAFETY: as in fill_scratch; the scratch was initialised by it.
            unsafe {
                let t = self.target(e, col, len);
                for k in 0..len {
                    let v = *src.add(r * len + k);
                    let p = dst.add(t + k);
                    *p = if inc { (*p).inc(v) } else { v };
                }
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
                    let mut first = start;
                    while first < end {
                        let stop = end.min(first + $crate::__private::BATCH);
                        // SAFETY: the executor upholds the HostFn contract.
                        unsafe {
                            $( $param.prepare(first, stop); )*
                            for e in first..stop {
                                $name( $( <$ty as $crate::__private::KernelParam>::bind(&mut $param, e) ),* );
                                $( $param.finish(e); )*
                            }
                        }
                        first = stop;
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
