//! The lane type: [`Lanes`], one value per element of a group, with the
//! scalar operations applied lane by lane (vector instructions where the
//! element type is `f64`).

use std::mem::MaybeUninit;
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Rem, RemAssign, Sub, SubAssign};

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
pub struct Lanes<T, const W: usize = 4>(pub(crate) [T; W]);

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
pub(crate) fn written_out<T: Copy, const W: usize>(mut f: impl FnMut(usize) -> T) -> [T; W] {
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
            // SAFETY: this width's instruction set runs wherever a `Lanes` of it exists (`isa`).
            |[x]| unsafe { std::arch::x86_64::_mm256_sqrt_pd(x) },
            // SAFETY: this width's instruction set runs wherever a `Lanes` of it exists (`isa`).
            |[x]| unsafe { std::arch::x86_64::_mm512_sqrt_pd(x) },
        )
    };
    (abs, $a:expr) => {
        avx_f64(
            [&$a],
            // SAFETY: this width's instruction set runs wherever a `Lanes` of it exists (`isa`).
            |[x]| unsafe {
                use std::arch::x86_64::*;
                _mm256_andnot_pd(_mm256_set1_pd(-0.0), x)
            },
            // SAFETY: this width's instruction set runs wherever a `Lanes` of it exists (`isa`).
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
            // SAFETY: this width's instruction set runs wherever a `Lanes` of it exists (`isa`).
            |[x, y]| unsafe { std::arch::x86_64::$avx(x, y) },
            // SAFETY: this width's instruction set runs wherever a `Lanes` of it exists (`isa`).
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
            // SAFETY: this width's instruction set runs wherever a `Lanes` of it exists (`isa`).
            |[x]| unsafe {
                use std::arch::x86_64::*;
                _mm256_xor_pd(x, _mm256_set1_pd(-0.0))
            },
            // SAFETY: this width's instruction set runs wherever a `Lanes` of it exists (`isa`).
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
            /// `clamp` per lane (bounds the same in every lane: the twin
            /// refuses per-element bounds, so a panic is every lane's).
            #[inline(always)]
            pub fn clamp(self, lo: Self, hi: Self) -> Self {
                Lanes(written_out(|l| self.0[l].clamp(lo.0[l], hi.0[l])))
            }
            /// `powi` per lane.
            #[inline(always)]
            pub fn powi(self, n: i32) -> Self {
                Lanes(written_out(|l| self.0[l].powi(n)))
            }
        }
    };
}
// Every float method of the kernel subset that yields a float
// (`parloop_kernels`' method table); the twin refuses the others.
float_methods!(f64: unary sqrt abs exp ln log10 sin cos tan atan floor ceil round signum cbrt exp2 exp_m1 log2
                    ln_1p asin acos sinh cosh tanh asinh acosh atanh trunc fract recip to_radians to_degrees;
               binary min max powf atan2 hypot copysign log rem_euclid div_euclid);
float_methods!(f32: unary sqrt abs exp ln log10 sin cos tan atan floor ceil round signum cbrt exp2 exp_m1 log2
                    ln_1p asin acos sinh cosh tanh asinh acosh atanh trunc fract recip to_radians to_degrees;
               binary min max powf atan2 hypot copysign log rem_euclid div_euclid);
