//! SIMD across elements for the CPU backends.
//!
//! A kernel's arithmetic is scalar: one element at a time. For kernels whose
//! float values never steer control flow, `#[parloop::kernel]` also emits a
//! *lane-wise* twin in which every float value is a [`Lanes`]: the same value
//! for [`LANES`] consecutive elements. The host adapter gathers those
//! elements into lanes (structure of arrays), calls the twin once, and
//! scatters the results in element order.
//!
//! Every lane operation is the scalar IEEE operation applied per lane (no
//! fused multiply-add, no reassociation), so the twin computes bit for bit
//! what the scalar kernel computes; LLVM turns the per-lane loops into
//! vector instructions. Increments are written back in the scalar adapter's
//! order, and a global `+=` done once per element starts from `-0.0` (the
//! exact identity of `+`), so a reduction is bitwise the scalar one too.
//!
//! `PARLOOP_SIMD=0` (or [`crate::Runtime::set_simd`]) turns the twins off.

use std::mem::MaybeUninit;
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Rem, RemAssign, Sub, SubAssign};

use crate::kernel::{ArgView, Shape, ViewKind};
use crate::types::{Access, ElemType, Scalar};

/// Elements per lane-wise call: one AVX2 register of `f64`.
pub const LANES: usize = 4;

/// One value per element of a group of [`LANES`] consecutive elements.
///
/// Arithmetic, compound assignment and the float methods kernels may call
/// work lane by lane, exactly as the scalar operation; `f64` arithmetic,
/// `sqrt`, `abs` and negation use AVX instructions, so a `Lanes` exists
/// only where AVX2 does: its constructors are `unsafe` with that contract
/// (the adapters run twins only after detecting AVX2).
///
/// ```
/// use parloop::__private::{avx2, Lanes};
/// if avx2() {
///     // SAFETY: AVX2 was detected.
///     let (a, two) = unsafe { (Lanes::from_fn(|l| [1.0f64, 4.0, 9.0, 16.0][l]), Lanes::splat(2.0)) };
///     let b = a.sqrt() * two;
///     assert_eq!((0..4).map(|l| b.lane(l)).collect::<Vec<_>>(), [2.0, 4.0, 6.0, 8.0]);
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C, align(32))]
pub struct Lanes<T>([T; LANES]);

impl<T: Copy> Lanes<T> {
    /// The same value in every lane.
    ///
    /// # Safety
    /// On x86_64, the CPU runs AVX2 (lane arithmetic uses it).
    #[inline(always)]
    pub unsafe fn splat(v: T) -> Self {
        Lanes([v; LANES])
    }

    /// Lane `l` of `f(l)`: for helper calls, made once per lane.
    ///
    /// # Safety
    /// As [`Lanes::splat`].
    #[inline(always)]
    pub unsafe fn from_fn(f: impl FnMut(usize) -> T) -> Self {
        Lanes(std::array::from_fn(f))
    }

    /// The value of lane `l`.
    #[inline(always)]
    pub fn lane(self, l: usize) -> T {
        self.0[l]
    }
}

/// `f` on `f64` lanes as AVX registers; `None` for other element types
/// (decided at compile time).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn avx_f64<T: 'static, const N: usize>(
    args: [&Lanes<T>; N],
    f: impl FnOnce([std::arch::x86_64::__m256d; N]) -> std::arch::x86_64::__m256d,
) -> Option<Lanes<T>> {
    use std::arch::x86_64::*;
    if std::any::TypeId::of::<T>() != std::any::TypeId::of::<f64>() {
        return None;
    }
    // SAFETY: `T` is `f64`, so a `Lanes<T>` is four aligned `f64`; a
    // `Lanes` exists only where AVX2 runs (its constructors' contract).
    unsafe {
        let x = args.map(|a| _mm256_load_pd((a as *const Lanes<T>).cast()));
        let mut out = std::mem::MaybeUninit::<Lanes<T>>::uninit();
        _mm256_store_pd(out.as_mut_ptr().cast(), f(x));
        Some(out.assume_init())
    }
}

/// `sqrt` and `abs` of `f64` lanes with AVX (both exact, as the scalar
/// calls); `None` for the other methods, and for other element types.
#[cfg(target_arch = "x86_64")]
macro_rules! avx_unary {
    // SAFETY (of the intrinsics): AVX2 runs where a `Lanes` exists.
    (sqrt, $a:expr) => {
        avx_f64([&$a], |[x]| unsafe { std::arch::x86_64::_mm256_sqrt_pd(x) })
    };
    (abs, $a:expr) => {
        avx_f64([&$a], |[x]| unsafe {
            use std::arch::x86_64::*;
            _mm256_andnot_pd(_mm256_set1_pd(-0.0), x)
        })
    };
    ($other:ident, $a:expr) => {
        None::<Self>
    };
}

/// `[f(0), f(1), f(2), f(3)]` written out, the form LLVM's SLP vectoriser
/// turns into one vector instruction (a loop or `array::from_fn` it often
/// leaves scalar).
macro_rules! lanewise {
    (|$l:ident| $e:expr) => {{
        const _: () = assert!(LANES == 4, "lanewise! writes out four lanes");
        [
            {
                let $l = 0;
                $e
            },
            {
                let $l = 1;
                $e
            },
            {
                let $l = 2;
                $e
            },
            {
                let $l = 3;
                $e
            },
        ]
    }};
}

/// The AVX form of a binary operation on `f64` lanes, if it has one.
#[cfg(target_arch = "x86_64")]
macro_rules! avx_binary {
    (none, $a:expr, $b:expr) => {
        None::<Lanes<T>>
    };
    ($avx:ident, $a:expr, $b:expr) => {
        // SAFETY (of the intrinsic): AVX2 runs where a `Lanes` exists.
        avx_f64([&$a, &$b], |[x, y]| unsafe { std::arch::x86_64::$avx(x, y) })
    };
}

macro_rules! binary_ops {
    ($($op:ident $f:ident $opa:ident $fa:ident $avx:ident),*) => {$(
        impl<T: Copy + $op<Output = T> + 'static> $op for Lanes<T> {
            type Output = Self;
            #[inline(always)]
            fn $f(self, o: Self) -> Self {
                #[cfg(target_arch = "x86_64")]
                if let Some(r) = avx_binary!($avx, self, o) {
                    return r;
                }
                Lanes(lanewise!(|l| self.0[l].$f(o.0[l])))
            }
        }
        // `&f64` operands work in kernels (`x + adt` with `adt: &f64`), so
        // `&Lanes` operands work in twins.
        impl<T: Copy + $op<Output = T> + 'static> $op<&Lanes<T>> for Lanes<T> {
            type Output = Self;
            #[inline(always)]
            fn $f(self, o: &Self) -> Self {
                self.$f(*o)
            }
        }
        impl<T: Copy + $op<Output = T> + 'static> $op<Lanes<T>> for &Lanes<T> {
            type Output = Lanes<T>;
            #[inline(always)]
            fn $f(self, o: Lanes<T>) -> Lanes<T> {
                (*self).$f(o)
            }
        }
        impl<T: Copy + $op<Output = T> + 'static> $op<&Lanes<T>> for &Lanes<T> {
            type Output = Lanes<T>;
            #[inline(always)]
            fn $f(self, o: &Lanes<T>) -> Lanes<T> {
                (*self).$f(*o)
            }
        }
        impl<T: Copy + $op<Output = T> + 'static> $opa<&Lanes<T>> for Lanes<T> {
            #[inline(always)]
            fn $fa(&mut self, o: &Self) {
                *self = (*self).$f(*o);
            }
        }
        impl<T: Copy + $op<Output = T> + 'static> $opa for Lanes<T> {
            #[inline(always)]
            fn $fa(&mut self, o: Self) {
                *self = (*self).$f(o);
            }
        }
    )*};
}
binary_ops!(Add add AddAssign add_assign _mm256_add_pd, Sub sub SubAssign sub_assign _mm256_sub_pd,
            Mul mul MulAssign mul_assign _mm256_mul_pd, Div div DivAssign div_assign _mm256_div_pd,
            Rem rem RemAssign rem_assign none);

impl<T: Copy + Neg<Output = T> + 'static> Neg for Lanes<T> {
    type Output = Self;
    #[inline(always)]
    fn neg(self) -> Self {
        #[cfg(target_arch = "x86_64")]
        // SAFETY (of the intrinsics): AVX2 runs where a `Lanes` exists.
        // Negation flips the sign bit, as the scalar `-` does.
        if let Some(r) = avx_f64([&self], |[x]| unsafe {
            use std::arch::x86_64::*;
            _mm256_xor_pd(x, _mm256_set1_pd(-0.0))
        }) {
            return r;
        }
        Lanes(lanewise!(|l| -self.0[l]))
    }
}

impl<T: Copy + Neg<Output = T> + 'static> Neg for &Lanes<T> {
    type Output = Lanes<T>;
    #[inline(always)]
    fn neg(self) -> Lanes<T> {
        -*self
    }
}

macro_rules! float_methods {
    ($t:ty: unary $($u:ident)*; binary $($b:ident)*) => {
        impl Lanes<$t> {
            $(
                #[doc = concat!("`", stringify!($t), "::", stringify!($u), "` per lane.")]
                #[inline(always)]
                pub fn $u(self) -> Self {
                    #[cfg(target_arch = "x86_64")]
                    if let Some(r) = avx_unary!($u, self) {
                        return r;
                    }
                    Lanes(lanewise!(|l| self.0[l].$u()))
                }
            )*
            $(
                #[doc = concat!("`", stringify!($t), "::", stringify!($b), "` per lane.")]
                #[inline(always)]
                pub fn $b(self, o: Self) -> Self {
                    Lanes(lanewise!(|l| self.0[l].$b(o.0[l])))
                }
            )*
            /// `mul_add` per lane (a fused multiply-add, as the scalar call).
            #[inline(always)]
            pub fn mul_add(self, a: Self, b: Self) -> Self {
                Lanes(lanewise!(|l| self.0[l].mul_add(a.0[l], b.0[l])))
            }
            /// `as f64` per lane.
            #[allow(clippy::unnecessary_cast)]
            #[inline(always)]
            pub fn to_f64(self) -> Lanes<f64> {
                Lanes(lanewise!(|l| self.0[l] as f64))
            }
            /// `as f32` per lane.
            #[allow(clippy::unnecessary_cast)]
            #[inline(always)]
            pub fn to_f32(self) -> Lanes<f32> {
                Lanes(lanewise!(|l| self.0[l] as f32))
            }
            /// `powi` per lane.
            #[inline(always)]
            pub fn powi(self, n: i32) -> Self {
                Lanes(lanewise!(|l| self.0[l].powi(n)))
            }
        }
    };
}
float_methods!(f64: unary sqrt abs exp ln log10 sin cos tan atan floor ceil round signum;
               binary min max powf atan2 hypot);
float_methods!(f32: unary sqrt abs exp ln log10 sin cos tan atan floor ceil round signum;
               binary min max powf atan2 hypot);

/// Whether a lane-wise twin can run a loop with these views: no mapped
/// WRITE or RW (those need each element to see earlier elements' writes),
/// no global MIN or MAX, and a global INC only where the kernel adds to it
/// once per element (`exact_inc`, decided by the attribute), so the
/// reduction keeps the scalar order.
#[doc(hidden)]
pub fn usable(views: &[ArgView], exact_inc: &[bool]) -> bool {
    views.iter().zip(exact_inc).all(|(v, &exact)| match (v.kind, v.access) {
        (ViewKind::Direct, _) | (_, Access::Read) => true,
        (ViewKind::Global, Access::Inc) => exact,
        (ViewKind::Indirect | ViewKind::Vector, Access::Inc) => true,
        _ => false,
    })
}

/// Whether this CPU runs AVX2 (checked once).
#[doc(hidden)]
#[inline]
pub fn avx2() -> bool {
    vector_isa() != VectorIsa::None
}

/// The instruction set the twins' groups are compiled for at run time.
///
/// Both run the same four-lane code: AVX-512 adds no lanes, only registers
/// (32 instead of 16), which the large twins need to stay out of the stack.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VectorIsa {
    /// No AVX2: the scalar kernels run.
    None,
    /// AVX2 and FMA.
    Avx2,
    /// AVX2, FMA and AVX-512 F and VL.
    Avx512,
}

/// The best [`VectorIsa`] this CPU runs, capped at AVX2 by
/// `PARLOOP_SIMD=avx2` (to compare the two code paths on one machine);
/// decided once per process.
#[doc(hidden)]
#[inline]
pub fn vector_isa() -> VectorIsa {
    static ISA: std::sync::OnceLock<VectorIsa> = std::sync::OnceLock::new();
    *ISA.get_or_init(|| {
        let detected = detect_isa();
        let capped = std::env::var("PARLOOP_SIMD").is_ok_and(|v| v.trim() == "avx2");
        if capped && detected == VectorIsa::Avx512 {
            VectorIsa::Avx2
        } else {
            detected
        }
    })
}

fn detect_isa() -> VectorIsa {
    #[cfg(target_arch = "x86_64")]
    {
        let avx2 = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        let avx512 = std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl");
        match (avx2, avx512) {
            (true, true) => VectorIsa::Avx512,
            (true, false) => VectorIsa::Avx2,
            _ => VectorIsa::None,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        VectorIsa::None
    }
}

/// Gathers one argument of a group of [`LANES`] elements into lanes and
/// scatters the results back: the lane-wise counterpart of
/// [`crate::kernel::Binder`], used where [`usable`] holds.
#[doc(hidden)]
pub struct LaneBinder<S: Shape> {
    view: ArgView,
    buf: MaybeUninit<S::Lane>,
    /// An increment's lanes turned back into one row per element (after
    /// the kernel), so that each element's row is added with one vector
    /// load of the size it was stored with.
    rows: [Row; LANES],
}

/// Up to four 8-byte values, aligned for one AVX store.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Row([f64; 4]);

impl<S: Shape> LaneBinder<S> {
    /// Values per entity through a vector view's row, and in all.
    const ROW: usize = S::COLS;
    const ALL: usize = S::ROWS * S::COLS;

    #[inline(always)]
    pub fn new(view: ArgView) -> Self {
        LaneBinder { view, buf: MaybeUninit::uninit(), rows: [Row([0.0; 4]); LANES] }
    }

    #[inline(always)]
    fn data(&self) -> *mut S::Elem {
        self.view.data.cast()
    }

    /// The lanes of value `k` of the shape.
    #[inline(always)]
    fn lanes(&mut self) -> *mut Lanes<S::Elem> {
        self.buf.as_mut_ptr().cast()
    }

    /// The lane-wise value for the kernel (after [`LaneBinder::load`]).
    #[inline(always)]
    pub fn ptr(&mut self) -> *mut S::Lane {
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

    /// Whether AVX transposes can move this shape: 8-byte values (moved
    /// as bits), 1, 2 or 4 per row.
    const TRANSPOSABLE: bool = std::mem::size_of::<S::Elem>() == 8 && matches!(S::COLS, 1 | 2 | 4);

    /// Fills the lanes for elements `first..first + LANES` (rows of 8-byte
    /// values are transposed in AVX registers).
    ///
    /// # Safety
    /// The view satisfies the [`crate::HostFn`] contract, those elements
    /// exist, [`usable`] holds, and AVX2 runs (as wherever a [`Lanes`] exists).
    #[inline(always)]
    pub unsafe fn load(&mut self, first: usize) {
        let data = self.data();
        let lanes = self.lanes();
        let inc = self.view.access == Access::Inc;
        #[cfg(target_arch = "x86_64")]
        if Self::TRANSPOSABLE && !(inc && self.view.kind != ViewKind::Direct) {
            let col = self.view.column;
            // SAFETY: as below; AVX2 runs (the caller's contract).
            unsafe {
                match self.view.kind {
                    ViewKind::Direct if Self::ALL == Self::ROW => {
                        let rows = lanewise!(|l| data.add((first + l) * Self::ALL).cast::<u8>().cast_const());
                        transpose_in(rows, Self::ROW, lanes.cast());
                        return;
                    }
                    ViewKind::Indirect if Self::ALL == Self::ROW => {
                        let rows =
                            lanewise!(|l| data.add(self.target(first + l, col, Self::ALL)).cast::<u8>().cast_const());
                        transpose_in(rows, Self::ROW, lanes.cast());
                        return;
                    }
                    ViewKind::Vector => {
                        for r in 0..S::ROWS {
                            let rows =
                                lanewise!(|l| data.add(self.target(first + l, r, Self::ROW)).cast::<u8>().cast_const());
                            transpose_in(rows, Self::ROW, lanes.add(r * Self::ROW).cast());
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
                        (*lanes.add(k)).0 = lanewise!(|l| *data.add((first + l) * Self::ALL + k));
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
                    let t: [usize; LANES] = lanewise!(|l| self.target(first + l, self.view.column, Self::ALL));
                    for k in 0..Self::ALL {
                        (*lanes.add(k)).0 = lanewise!(|l| *data.add(t[l] + k));
                    }
                }
                ViewKind::Vector => {
                    for r in 0..S::ROWS {
                        let t: [usize; LANES] = lanewise!(|l| self.target(first + l, r, Self::ROW));
                        for c in 0..Self::ROW {
                            (*lanes.add(r * Self::ROW + c)).0 = lanewise!(|l| *data.add(t[l] + c));
                        }
                    }
                }
            }
        }
    }

    /// Writes a direct argument's lanes back (after the call).
    ///
    /// # Safety
    /// As [`LaneBinder::load`], after it.
    #[inline(always)]
    pub unsafe fn store_direct(&mut self, first: usize) {
        if self.view.kind != ViewKind::Direct || self.view.access == Access::Read {
            return;
        }
        let data = self.data();
        let lanes = self.lanes();
        #[cfg(target_arch = "x86_64")]
        if Self::TRANSPOSABLE && Self::ALL == Self::ROW {
            // SAFETY: as below; AVX2 runs (the caller's contract).
            unsafe {
                let rows = lanewise!(|l| data.add((first + l) * Self::ALL).cast::<u8>());
                transpose_out(lanes.cast_const().cast(), Self::ROW, rows);
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
        if Self::FAST_INC && self.view.access == Access::Inc && self.view.kind != ViewKind::Direct {
            let rows = lanewise!(|l| self.rows[l].0.as_mut_ptr().cast::<u8>());
            // SAFETY: AVX2 is present; the lanes hold `ALL` values per lane.
            unsafe { transpose_out(self.lanes().cast_const().cast(), Self::ALL, rows) };
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
        if self.view.access != Access::Inc || self.view.kind == ViewKind::Direct {
            return;
        }
        let data = self.data();
        #[cfg(target_arch = "x86_64")]
        if Self::FAST_INC {
            use std::arch::x86_64::*;
            let at = match self.view.kind {
                ViewKind::Global => 0,
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
                ViewKind::Global => (0..Self::ALL).for_each(|k| add(k, k)),
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

/// Lanes from four rows of `n` (1, 2 or 4) 8-byte values: `out[k]` gets
/// value `k` of rows 0..4, built in AVX registers and stored whole (a
/// kernel reading a lane vector then forwards from one store).
///
/// # Safety
/// AVX2 is present; each row holds `n` values; `out` holds `n` lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose_in(rows: [*const u8; LANES], n: usize, out: *mut u8) {
    use std::arch::x86_64::*;
    let r: [*const f64; LANES] = rows.map(|p| p.cast());
    let o: *mut f64 = out.cast();
    // SAFETY: the caller's contract; unaligned loads and stores.
    unsafe {
        match n {
            4 => {
                let (r0, r1, r2, r3) =
                    (_mm256_loadu_pd(r[0]), _mm256_loadu_pd(r[1]), _mm256_loadu_pd(r[2]), _mm256_loadu_pd(r[3]));
                let (t0, t1) = (_mm256_unpacklo_pd(r0, r1), _mm256_unpackhi_pd(r0, r1));
                let (t2, t3) = (_mm256_unpacklo_pd(r2, r3), _mm256_unpackhi_pd(r2, r3));
                _mm256_storeu_pd(o, _mm256_permute2f128_pd(t0, t2, 0x20));
                _mm256_storeu_pd(o.add(4), _mm256_permute2f128_pd(t1, t3, 0x20));
                _mm256_storeu_pd(o.add(8), _mm256_permute2f128_pd(t0, t2, 0x31));
                _mm256_storeu_pd(o.add(12), _mm256_permute2f128_pd(t1, t3, 0x31));
            }
            2 => {
                let a = _mm256_set_m128d(_mm_loadu_pd(r[2]), _mm_loadu_pd(r[0]));
                let b = _mm256_set_m128d(_mm_loadu_pd(r[3]), _mm_loadu_pd(r[1]));
                _mm256_storeu_pd(o, _mm256_unpacklo_pd(a, b));
                _mm256_storeu_pd(o.add(4), _mm256_unpackhi_pd(a, b));
            }
            _ => _mm256_storeu_pd(o, _mm256_set_pd(*r[3], *r[2], *r[1], *r[0])),
        }
    }
}

/// The inverse of [`transpose_in`]: lanes back into four rows.
///
/// # Safety
/// As [`transpose_in`], with writable rows.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose_out(lanes: *const u8, n: usize, rows: [*mut u8; LANES]) {
    use std::arch::x86_64::*;
    let r: [*mut f64; LANES] = rows.map(|p| p.cast());
    let v: *const f64 = lanes.cast();
    // SAFETY: the caller's contract; unaligned loads and stores.
    unsafe {
        match n {
            4 => {
                let (v0, v1, v2, v3) = (
                    _mm256_loadu_pd(v),
                    _mm256_loadu_pd(v.add(4)),
                    _mm256_loadu_pd(v.add(8)),
                    _mm256_loadu_pd(v.add(12)),
                );
                let (t0, t1) = (_mm256_unpacklo_pd(v0, v1), _mm256_unpackhi_pd(v0, v1));
                let (t2, t3) = (_mm256_unpacklo_pd(v2, v3), _mm256_unpackhi_pd(v2, v3));
                _mm256_storeu_pd(r[0], _mm256_permute2f128_pd(t0, t2, 0x20));
                _mm256_storeu_pd(r[1], _mm256_permute2f128_pd(t1, t3, 0x20));
                _mm256_storeu_pd(r[2], _mm256_permute2f128_pd(t0, t2, 0x31));
                _mm256_storeu_pd(r[3], _mm256_permute2f128_pd(t1, t3, 0x31));
            }
            2 => {
                let (x, y) = (_mm256_loadu_pd(v), _mm256_loadu_pd(v.add(4)));
                let (lo, hi) = (_mm256_unpacklo_pd(x, y), _mm256_unpackhi_pd(x, y));
                _mm_storeu_pd(r[0], _mm256_castpd256_pd128(lo));
                _mm_storeu_pd(r[1], _mm256_castpd256_pd128(hi));
                _mm_storeu_pd(r[2], _mm256_extractf128_pd(lo, 1));
                _mm_storeu_pd(r[3], _mm256_extractf128_pd(hi, 1));
            }
            _ => {
                // In registers: scalar loads from the vector just stored
                // would not be forwarded from it.
                let x = _mm256_loadu_pd(v);
                let (lo, hi) = (_mm256_castpd256_pd128(x), _mm256_extractf128_pd(x, 1));
                _mm_storel_pd(r[0], lo);
                _mm_storeh_pd(r[1], lo);
                _mm_storel_pd(r[2], hi);
                _mm_storeh_pd(r[3], hi);
            }
        }
    }
}
