//! SIMD across elements for the CPU backends.
//!
//! A kernel's arithmetic is scalar: one element at a time. For kernels whose
//! float values never steer control flow, `#[parloop::kernel]` also emits
//! *lane-wise* twins in which every float value is a [`Lanes`]: the same
//! value for `W` consecutive elements, four (one AVX2 register of `f64`) or
//! eight (one AVX-512 register). The host adapter gathers those elements
//! into lanes (structure of arrays), calls the twin once per group, and
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

/// Elements per group of the narrowest twin (AVX2): the fewest elements a
/// loop needs for lanes to run.
pub const LANES: usize = 4;

/// One value per element of a group of `W` consecutive elements (4 or 8).
///
/// Arithmetic, compound assignment and the float methods kernels may call
/// work lane by lane, exactly as the scalar operation; `f64` arithmetic,
/// `sqrt`, `abs` and negation use AVX (four lanes) or AVX-512 (eight lanes)
/// instructions, so a `Lanes` exists only where those run: its constructors
/// are `unsafe` with that contract (the adapters run twins only after
/// detecting the instruction set).
///
/// ```
/// use parloop::__private::{avx2, Lanes};
/// if avx2() {
///     // SAFETY: AVX2 was detected.
///     let (a, two) = unsafe { (Lanes::<f64, 4>::from_fn(|l| [1.0, 4.0, 9.0, 16.0][l]), Lanes::splat(2.0)) };
///     let b = a.sqrt() * two;
///     assert_eq!((0..4).map(|l| b.lane(l)).collect::<Vec<_>>(), [2.0, 4.0, 6.0, 8.0]);
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C, align(32))]
pub struct Lanes<T, const W: usize = 4>([T; W]);

impl<T: Copy, const W: usize> Lanes<T, W> {
    /// The same value in every lane.
    ///
    /// # Safety
    /// On x86_64, the CPU runs AVX2, and AVX-512 F and VL where `W` is 8
    /// (lane arithmetic uses them).
    #[inline(always)]
    pub unsafe fn splat(v: T) -> Self {
        Lanes([v; W])
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

/// `[f(0), f(1), .., f(W - 1)]` written out for the widths twins have, the
/// form LLVM's SLP vectoriser turns into vector instructions (a loop or
/// `array::from_fn` it often leaves scalar).
#[inline(always)]
fn written_out<T: Copy, const W: usize>(mut f: impl FnMut(usize) -> T) -> [T; W] {
    // SAFETY: each arm runs only where `W` is the length it builds, so the
    // copies are between arrays of one type.
    unsafe {
        match W {
            4 => std::mem::transmute_copy(&[f(0), f(1), f(2), f(3)]),
            8 => std::mem::transmute_copy(&[f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7)]),
            _ => std::array::from_fn(f),
        }
    }
}

/// `f` on `f64` lanes as vector registers (`f4` on four lanes with AVX,
/// `f8` on eight with AVX-512); `None` for other element types (decided at
/// compile time).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn avx_f64<T: 'static, const W: usize, const N: usize>(
    args: [&Lanes<T, W>; N],
    f4: impl FnOnce([std::arch::x86_64::__m256d; N]) -> std::arch::x86_64::__m256d,
    f8: impl FnOnce([std::arch::x86_64::__m512d; N]) -> std::arch::x86_64::__m512d,
) -> Option<Lanes<T, W>> {
    use std::arch::x86_64::*;
    if std::any::TypeId::of::<T>() != std::any::TypeId::of::<f64>() || !matches!(W, 4 | 8) {
        return None;
    }
    // SAFETY: `T` is `f64`, so a `Lanes<T, W>` is `W` `f64` aligned to 32
    // bytes; a `Lanes` exists only where AVX2 runs, and AVX-512 where `W`
    // is 8 (its constructors' contract).
    unsafe {
        let mut out = MaybeUninit::<Lanes<T, W>>::uninit();
        if W == 4 {
            let x = args.map(|a| _mm256_load_pd((a as *const Lanes<T, W>).cast()));
            _mm256_store_pd(out.as_mut_ptr().cast(), f4(x));
        } else {
            let x = args.map(|a| _mm512_loadu_pd((a as *const Lanes<T, W>).cast()));
            _mm512_storeu_pd(out.as_mut_ptr().cast(), f8(x));
        }
        Some(out.assume_init())
    }
}

/// `sqrt` and `abs` of `f64` lanes with AVX or AVX-512 (both exact, as the
/// scalar calls); `None` for the other methods, and for other element types.
#[cfg(target_arch = "x86_64")]
macro_rules! avx_unary {
    // SAFETY (of the intrinsics): the instruction set runs where a `Lanes`
    // of that width exists.
    (sqrt, $a:expr) => {
        avx_f64(
            [&$a],
            |[x]| unsafe { std::arch::x86_64::_mm256_sqrt_pd(x) },
            |[x]| unsafe { std::arch::x86_64::_mm512_sqrt_pd(x) },
        )
    };
    (abs, $a:expr) => {
        avx_f64(
            [&$a],
            |[x]| unsafe {
                use std::arch::x86_64::*;
                _mm256_andnot_pd(_mm256_set1_pd(-0.0), x)
            },
            |[x]| unsafe { std::arch::x86_64::_mm512_abs_pd(x) },
        )
    };
    ($other:ident, $a:expr) => {
        None::<Self>
    };
}

/// The AVX and AVX-512 forms of a binary operation on `f64` lanes, if it
/// has them.
#[cfg(target_arch = "x86_64")]
macro_rules! avx_binary {
    (none, none, $a:expr, $b:expr) => {
        None::<Lanes<T, W>>
    };
    ($avx:ident, $avx512:ident, $a:expr, $b:expr) => {
        // SAFETY (of the intrinsics): the instruction set runs where a
        // `Lanes` of that width exists.
        avx_f64(
            [&$a, &$b],
            |[x, y]| unsafe { std::arch::x86_64::$avx(x, y) },
            |[x, y]| unsafe { std::arch::x86_64::$avx512(x, y) },
        )
    };
}

macro_rules! binary_ops {
    ($($op:ident $f:ident $opa:ident $fa:ident $avx:ident $avx512:ident),*) => {$(
        impl<T: Copy + $op<Output = T> + 'static, const W: usize> $op for Lanes<T, W> {
            type Output = Self;
            #[inline(always)]
            fn $f(self, o: Self) -> Self {
                #[cfg(target_arch = "x86_64")]
                if let Some(r) = avx_binary!($avx, $avx512, self, o) {
                    return r;
                }
                Lanes(written_out(|l| self.0[l].$f(o.0[l])))
            }
        }
        // `&f64` operands work in kernels (`x + adt` with `adt: &f64`), so
        // `&Lanes` operands work in twins.
        impl<T: Copy + $op<Output = T> + 'static, const W: usize> $op<&Lanes<T, W>> for Lanes<T, W> {
            type Output = Self;
            #[inline(always)]
            fn $f(self, o: &Self) -> Self {
                self.$f(*o)
            }
        }
        impl<T: Copy + $op<Output = T> + 'static, const W: usize> $op<Lanes<T, W>> for &Lanes<T, W> {
            type Output = Lanes<T, W>;
            #[inline(always)]
            fn $f(self, o: Lanes<T, W>) -> Lanes<T, W> {
                (*self).$f(o)
            }
        }
        impl<T: Copy + $op<Output = T> + 'static, const W: usize> $op<&Lanes<T, W>> for &Lanes<T, W> {
            type Output = Lanes<T, W>;
            #[inline(always)]
            fn $f(self, o: &Lanes<T, W>) -> Lanes<T, W> {
                (*self).$f(*o)
            }
        }
        impl<T: Copy + $op<Output = T> + 'static, const W: usize> $opa<&Lanes<T, W>> for Lanes<T, W> {
            #[inline(always)]
            fn $fa(&mut self, o: &Self) {
                *self = (*self).$f(*o);
            }
        }
        impl<T: Copy + $op<Output = T> + 'static, const W: usize> $opa for Lanes<T, W> {
            #[inline(always)]
            fn $fa(&mut self, o: Self) {
                *self = (*self).$f(o);
            }
        }
    )*};
}
binary_ops!(Add add AddAssign add_assign _mm256_add_pd _mm512_add_pd,
            Sub sub SubAssign sub_assign _mm256_sub_pd _mm512_sub_pd,
            Mul mul MulAssign mul_assign _mm256_mul_pd _mm512_mul_pd,
            Div div DivAssign div_assign _mm256_div_pd _mm512_div_pd,
            Rem rem RemAssign rem_assign none none);

impl<T: Copy + Neg<Output = T> + 'static, const W: usize> Neg for Lanes<T, W> {
    type Output = Self;
    #[inline(always)]
    fn neg(self) -> Self {
        #[cfg(target_arch = "x86_64")]
        // SAFETY (of the intrinsics): the instruction set runs where a
        // `Lanes` of that width exists. Negation flips the sign bit, as the
        // scalar `-` does.
        if let Some(r) = avx_f64(
            [&self],
            |[x]| unsafe {
                use std::arch::x86_64::*;
                _mm256_xor_pd(x, _mm256_set1_pd(-0.0))
            },
            |[x]| unsafe {
                use std::arch::x86_64::*;
                _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(x), _mm512_set1_epi64(i64::MIN)))
            },
        ) {
            return r;
        }
        Lanes(written_out(|l| -self.0[l]))
    }
}

impl<T: Copy + Neg<Output = T> + 'static, const W: usize> Neg for &Lanes<T, W> {
    type Output = Lanes<T, W>;
    #[inline(always)]
    fn neg(self) -> Lanes<T, W> {
        -*self
    }
}

macro_rules! float_methods {
    ($t:ty: unary $($u:ident)*; binary $($b:ident)*) => {
        impl<const W: usize> Lanes<$t, W> {
            $(
                #[doc = concat!("`", stringify!($t), "::", stringify!($u), "` per lane.")]
                #[inline(always)]
                pub fn $u(self) -> Self {
                    #[cfg(target_arch = "x86_64")]
                    if let Some(r) = avx_unary!($u, self) {
                        return r;
                    }
                    Lanes(written_out(|l| self.0[l].$u()))
                }
            )*
            $(
                #[doc = concat!("`", stringify!($t), "::", stringify!($b), "` per lane.")]
                #[inline(always)]
                pub fn $b(self, o: Self) -> Self {
                    Lanes(written_out(|l| self.0[l].$b(o.0[l])))
                }
            )*
            /// `mul_add` per lane (a fused multiply-add, as the scalar call).
            #[inline(always)]
            pub fn mul_add(self, a: Self, b: Self) -> Self {
                Lanes(written_out(|l| self.0[l].mul_add(a.0[l], b.0[l])))
            }
            /// `as f64` per lane.
            #[allow(clippy::unnecessary_cast)]
            #[inline(always)]
            pub fn to_f64(self) -> Lanes<f64, W> {
                Lanes(written_out(|l| self.0[l] as f64))
            }
            /// `as f32` per lane.
            #[allow(clippy::unnecessary_cast)]
            #[inline(always)]
            pub fn to_f32(self) -> Lanes<f32, W> {
                Lanes(written_out(|l| self.0[l] as f32))
            }
            /// `powi` per lane.
            #[inline(always)]
            pub fn powi(self, n: i32) -> Self {
                Lanes(written_out(|l| self.0[l].powi(n)))
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

/// The instruction set the twins' groups are compiled for at run time:
/// four lanes with AVX2, eight with AVX-512 (whose 32 registers also keep
/// the large twins out of the stack).
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

/// Gathers one argument of a group of `W` elements into lanes and
/// scatters the results back: the lane-wise counterpart of
/// [`crate::kernel::Binder`], used where [`usable`] holds.
#[doc(hidden)]
pub struct LaneBinder<S: Shape, const W: usize> {
    view: ArgView,
    buf: MaybeUninit<S::Lane<W>>,
    /// An increment's lanes turned back into one row per element (after
    /// the kernel), so that each element's row is added with one vector
    /// load of the size it was stored with.
    rows: [Row; W],
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
        LaneBinder { view, buf: MaybeUninit::uninit(), rows: [Row([0.0; 4]); W] }
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
        if Self::FAST_INC && self.view.access == Access::Inc && self.view.kind != ViewKind::Direct {
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
