//! The C++ prelude every translated module starts with: Rust's semantics
//! where C++ differs or leaves behaviour undefined. Signed arithmetic wraps
//! (as Rust's release builds), shift amounts are masked, float-to-integer
//! casts saturate, `powi` multiplies in the order LLVM's `powi` does, and
//! `signum` returns Rust's `NAN` (`0x7ff8000000000000`, `0x7fc00000`) for
//! any NaN.
//!
//! Where Rust panics, the translated code reports instead of invoking
//! undefined behaviour (a SIGFPE on the host, garbage on a GPU): integer
//! division or remainder by zero and `MIN / -1` (`MIN % -1`) in every
//! build, and array indices out of bounds in builds with `PARLOOP_CHECK`
//! defined (`PL_IX`; without it `PL_IX(i, n)` is `(i)`, so unchecked code
//! is unchanged). A report goes to the module's `pl_error` record: the
//! first panicking thread claims it (`owner`, by compare-and-swap) and
//! writes the code and operands; the loop entry adds the element after the
//! kernel returns, and the host reads and clears the record after the loop.
//! The panicking operation yields 0 (index 0) and the kernel goes on, so
//! no memory outside the data is touched. Codes: 1 division by zero, 2
//! remainder by zero, 3 division overflow, 4 remainder overflow, 5 index
//! out of bounds (`a` the index, `b` the length).

/// The prelude source. Needs `__device__` defined (CUDA, NVRTC, or empty on
/// the host) and the C math functions declared.
pub const PRELUDE: &str = r#"// parloop kernel prelude: Rust semantics in C++.
#ifndef PARLOOP_PRELUDE
#define PARLOOP_PRELUDE
template <class T> struct __pl_unsigned;
template <> struct __pl_unsigned<int> { typedef unsigned int type; enum { sign = 1 }; };
template <> struct __pl_unsigned<long long> { typedef unsigned long long type; enum { sign = 1 }; };
template <> struct __pl_unsigned<unsigned int> { typedef unsigned int type; enum { sign = 0 }; };
template <> struct __pl_unsigned<unsigned long long> { typedef unsigned long long type; enum { sign = 0 }; };
template <class T> __device__ inline T __pl_wadd(T a, T b) {
    typedef typename __pl_unsigned<T>::type U; return (T)((U)a + (U)b);
}
template <class T> __device__ inline T __pl_wsub(T a, T b) {
    typedef typename __pl_unsigned<T>::type U; return (T)((U)a - (U)b);
}
template <class T> __device__ inline T __pl_wmul(T a, T b) {
    typedef typename __pl_unsigned<T>::type U; return (T)((U)a * (U)b);
}
template <class T> __device__ inline T __pl_wneg(T a) {
    typedef typename __pl_unsigned<T>::type U; return (T)((U)0 - (U)a);
}
template <class T> __device__ inline T __pl_shl(T a, unsigned int n) {
    typedef typename __pl_unsigned<T>::type U; return (T)((U)a << (n & (8u * sizeof(T) - 1u)));
}
template <class T> __device__ inline T __pl_shr(T a, unsigned int n) {
    return (T)(a >> (n & (8u * sizeof(T) - 1u)));
}
template <class T> __device__ inline T __pl_iabs(T a) { return a < (T)0 ? __pl_wneg(a) : a; }
template <class T> __device__ inline T __pl_imin(T a, T b) { return b < a ? b : a; }
template <class T> __device__ inline T __pl_imax(T a, T b) { return b < a ? a : b; }
template <class I, class F> __device__ inline I __pl_f2i(F x, I lo, I hi) {
    if (x != x) return (I)0;
    if (x <= (F)lo) return lo;
    if (x >= (F)hi) return hi;
    return (I)x;
}
// A helper's array result (C++ functions return no arrays): `v` is the
// array, copied with the struct.
template <class A> struct __pl_arr { A v; };
// `as` to an integer from a value whose type the translation cannot see
// (a helper's result): C++ picks Rust's saturating cast for floats.
template <class I, class S> __device__ inline I __pl_as_int(S x, I, I) { return (I)x; }
template <class I> __device__ inline I __pl_as_int(float x, I lo, I hi) { return __pl_f2i<I>(x, lo, hi); }
template <class I> __device__ inline I __pl_as_int(double x, I lo, I hi) { return __pl_f2i<I>(x, lo, hi); }
template <class F> __device__ inline F __pl_powi(F a, int b) {
    const bool recip = b < 0;
    F r = (F)1;
    while (true) {
        if (b & 1) r *= a;
        b /= 2;
        if (b == 0) break;
        a *= a;
    }
    return recip ? (F)1 / r : r;
}
/* Rust's signum: of any NaN (negative, signalling, with a payload) its NAN
   constant, not the operand. */
__device__ inline float __pl_signum(float x) {
    return x != x ? __builtin_bit_cast(float, 0x7fc00000u) : copysignf(1.0f, x);
}
__device__ inline double __pl_signum(double x) {
    return x != x ? __builtin_bit_cast(double, 0x7ff8000000000000ull) : copysign(1.0, x);
}
/* Rust's f64::min/max: a NaN operand gives the other; of +0 and -0 Rust
   leaves the result open, and its code returns the receiver unless the
   optimiser sees a constant operand: so does this, where g++'s inlined
   fmin returned the other operand. */
template <class F> __device__ inline F __pl_fmin(F a, F b) { return (b < a || a != a) ? b : a; }
template <class F> __device__ inline F __pl_fmax(F a, F b) { return (a < b || a != a) ? b : a; }
template <class T> __device__ inline T __pl_isignum(T a) { return (T)((a > (T)0) - (a < (T)0)); }
/* `pow` wraps as Rust's release builds do (the product modulo 2^bits). */
template <class T> __device__ inline T __pl_ipow(T a, unsigned int e) {
    T r = (T)1;
    while (e != 0u) {
        if (e & 1u) r = __pl_wmul(r, a);
        e >>= 1;
        if (e != 0u) a = __pl_wmul(a, a);
    }
    return r;
}
/* Float tests without <math.h>'s macros (NVRTC has no headers); no
   operand is evaluated twice by the caller. Without fast math, x - x is
   0 for finite x and NaN for infinities and NaN. */
template <class F> __device__ inline bool __pl_is_nan(F x) { return x != x; }
template <class F> __device__ inline bool __pl_is_finite(F x) { return x - x == (F)0; }
template <class F> __device__ inline bool __pl_is_infinite(F x) { return x == x && !(x - x == (F)0); }
__device__ inline bool __pl_is_sign_negative(double x) { return copysign(1.0, x) < 0.0; }
__device__ inline bool __pl_is_sign_negative(float x) { return copysignf(1.0f, x) < 0.0f; }
template <class F> __device__ inline bool __pl_is_sign_positive(F x) { return !__pl_is_sign_negative(x); }
/* Rust's cbrt is correctly rounded (CORE-MATH's); C's and CUDA's are
   within a few ulp of it. One Newton step on C's result, its residual
   y^3 - x computed exactly with fma (q - a is exact: q is within a few
   ulp of a), leaves about 2^-100 of relative error, so the one rounding
   that follows gives the correctly rounded result unless the root lies
   that close to a midpoint between doubles (about one input in 2^49,
   then possibly 1 ulp off; 2 million random bit patterns agreed with
   Rust bitwise). Scaling by
   2^600 keeps y^3's products normal for tiny and huge x. The f32 result
   is the f64 one rounded: no double rounding can land on an f32
   midpoint, which is farther than an f64 ulp from every f32 cube root. */
__device__ inline double __pl_cbrt(double x) {
    double a = x, scale = 1.0;
    if (fabs(x) < 0x1p-900) { a = x * 0x1p600; scale = 0x1p-200; }
    else if (fabs(x) > 0x1p900) { a = x * 0x1p-600; scale = 0x1p200; }
    double y = cbrt(a);
    if (y == 0.0 || !(y - y == 0.0)) return y * scale;
    double p = y * y, pe = fma(y, y, -p);
    double q = p * y, qe = fma(p, y, -q);
    double r = (q - a) + (qe + pe * y);
    return (y - r / (3.0 * p)) * scale;
}
__device__ inline float __pl_cbrt(float x) { return (float)__pl_cbrt((double)x); }
/* Rust's definitions (library/std/src/f64.rs), not C's functions. */
__device__ inline double __pl_fract(double x) { return x - trunc(x); }
__device__ inline float __pl_fract(float x) { return x - truncf(x); }
__device__ inline double __pl_asinh(double x) {
    double ax = fabs(x), ix = 1.0 / ax;
    return copysign(log1p(ax + (ax / (hypot(1.0, ix) + ix))), x);
}
__device__ inline float __pl_asinh(float x) {
    float ax = fabsf(x), ix = 1.0f / ax;
    return copysignf(log1pf(ax + (ax / (hypotf(1.0f, ix) + ix))), x);
}
__device__ inline double __pl_acosh(double x) {
    return x < 1.0 ? __builtin_bit_cast(double, 0x7ff8000000000000ull) : log(x + (sqrt(x - 1.0) * sqrt(x + 1.0)));
}
__device__ inline float __pl_acosh(float x) {
    return x < 1.0f ? __builtin_bit_cast(float, 0x7fc00000u) : logf(x + (sqrtf(x - 1.0f) * sqrtf(x + 1.0f)));
}
__device__ inline double __pl_atanh(double x) { return 0.5 * log1p((2.0 * x) / (1.0 - x)); }
__device__ inline float __pl_atanh(float x) { return 0.5f * log1pf((2.0f * x) / (1.0f - x)); }
__device__ inline double __pl_rem_euclid(double a, double b) {
    double r = fmod(a, b);
    return r < 0.0 ? r + fabs(b) : r;
}
__device__ inline float __pl_rem_euclid(float a, float b) {
    float r = fmodf(a, b);
    return r < 0.0f ? r + fabsf(b) : r;
}
__device__ inline double __pl_div_euclid(double a, double b) {
    double q = trunc(a / b);
    if (fmod(a, b) < 0.0) return b > 0.0 ? q - 1.0 : q + 1.0;
    return q;
}
__device__ inline float __pl_div_euclid(float a, float b) {
    float q = truncf(a / b);
    if (fmodf(a, b) < 0.0f) return b > 0.0f ? q - 1.0f : q + 1.0f;
    return q;
}
/* Panics: the first one is recorded in pl_error (see the crate docs). */
struct pl_error_t { unsigned long long owner; long long code; long long element; long long a; long long b; long long types; long long v[4]; };
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
__device__ pl_error_t pl_error;
__device__ inline unsigned long long __pl_tid() {
    return (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x + 1ull;
}
__device__ inline bool __pl_claim(unsigned long long me) { return atomicCAS(&pl_error.owner, 0ull, me) == 0ull; }
#else
#if defined(PARLOOP_EMU)
/* Per OS thread, as the emulator's state: concurrent launches of one
   library from two threads keep their own records. */
static thread_local pl_error_t pl_error;
extern "C" pl_error_t* pl_emu_error() { return &pl_error; }
inline unsigned long long __pl_tid() { return (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x + 1ull; }
#else
static pl_error_t pl_error;
inline unsigned long long __pl_tid() { return 1ull; }
#endif
inline bool __pl_claim(unsigned long long me) {
    if (pl_error.owner != 0ull) return false;
    pl_error.owner = me;
    return true;
}
#endif
__device__ inline void __pl_panic(long long code, long long a, long long b) {
    if (__pl_claim(__pl_tid())) {
        pl_error.code = code;
        pl_error.a = a;
        pl_error.b = b;
        pl_error.element = -1;
    }
}
/* A panic site whose message formats values: their bits and types (4 bits
   a slot, see parloop_kernels::panic_format) go with the record. */
__device__ inline void __pl_panic_v(long long site, long long fn, long long types, long long v0, long long v1,
                                    long long v2, long long v3) {
    if (__pl_claim(__pl_tid())) {
        pl_error.code = 11;
        pl_error.a = site;
        pl_error.b = fn;
        pl_error.element = -1;
        pl_error.types = types;
        pl_error.v[0] = v0;
        pl_error.v[1] = v1;
        pl_error.v[2] = v2;
        pl_error.v[3] = v3;
    }
}
__device__ inline long long __pl_bits(double x) { return __builtin_bit_cast(long long, x); }
__device__ inline long long __pl_bits(float x) { return (long long)__builtin_bit_cast(unsigned int, x); }
__device__ inline long long __pl_bits(int x) { return (long long)x; }
__device__ inline long long __pl_bits(unsigned int x) { return (long long)x; }
__device__ inline long long __pl_bits(long long x) { return x; }
__device__ inline long long __pl_bits(unsigned long long x) { return (long long)x; }
__device__ inline long long __pl_bits(bool x) { return x ? 1ll : 0ll; }
/* Whether this thread panicked: `while` and `loop` bodies that can panic
   (or call a helper that can) stop at it, since code after a device panic
   runs on with zeros and a loop waiting for a value could never end. */
__device__ inline bool __pl_stopped() { return pl_error.owner == __pl_tid(); }
/* After a kernel call for element `e`: the thread that claimed the record
   adds the element. */
__device__ inline void __pl_panicked_at(long long e) {
    if (pl_error.owner == __pl_tid() && pl_error.element < 0) pl_error.element = e;
}
template <class T> __device__ inline bool __pl_is_min(T a) {
    typedef typename __pl_unsigned<T>::type U;
    return __pl_unsigned<T>::sign && (U)a == ((U)1 << (8u * sizeof(T) - 1u));
}
template <class T> __device__ inline T __pl_div(T a, T b) {
    if (b == (T)0) { __pl_panic(1, 0, 0); return (T)0; }
    if (__pl_unsigned<T>::sign && b == (T)-1 && __pl_is_min(a)) { __pl_panic(3, 0, 0); return (T)0; }
    return a / b;
}
template <class T> __device__ inline T __pl_rem(T a, T b) {
    if (b == (T)0) { __pl_panic(2, 0, 0); return (T)0; }
    if (__pl_unsigned<T>::sign && b == (T)-1 && __pl_is_min(a)) { __pl_panic(4, 0, 0); return (T)0; }
    return a % b;
}
/* `clamp` asserts min <= max (codes 7 and 8 carry the bounds' bits, 9
   and 10 signed and unsigned integer bounds); the receiver is returned. */
__device__ inline double __pl_fclamp(double x, double lo, double hi) {
    if (!(lo <= hi)) {
        __pl_panic(7, __builtin_bit_cast(long long, lo), __builtin_bit_cast(long long, hi));
        return x;
    }
    if (x < lo) x = lo;
    if (x > hi) x = hi;
    return x;
}
__device__ inline float __pl_fclamp(float x, float lo, float hi) {
    if (!(lo <= hi)) {
        __pl_panic(8, (long long)__builtin_bit_cast(unsigned int, lo), (long long)__builtin_bit_cast(unsigned int, hi));
        return x;
    }
    if (x < lo) x = lo;
    if (x > hi) x = hi;
    return x;
}
template <class T> __device__ inline T __pl_iclamp(T x, T lo, T hi) {
    if (!(lo <= hi)) {
        __pl_panic(__pl_unsigned<T>::sign ? 9 : 10, (long long)lo, (long long)hi);
        return x;
    }
    return x < lo ? lo : (hi < x ? hi : x);
}
/* Integer `rem_euclid`/`div_euclid`: `%` and `/` (with their panics), then
   the step to the non-negative remainder (|r| < |b|: no overflow). */
template <class T> __device__ inline T __pl_irem_euclid(T a, T b) {
    T r = __pl_rem(a, b);
    if (r < (T)0) return b < (T)0 ? (T)(r - b) : (T)(r + b);
    return r;
}
template <class T> __device__ inline T __pl_idiv_euclid(T a, T b) {
    T q = __pl_div(a, b);
    if (b != (T)0 && __pl_rem(a, b) < (T)0) return b > (T)0 ? (T)(q - (T)1) : (T)(q + (T)1);
    return q;
}
/* `step_by`'s step: Rust panics on zero; the loop then runs no iteration. */
__device__ inline unsigned long long __pl_step(unsigned long long s) {
    if (s == 0ull) __pl_panic(6, 0, 0);
    return s;
}
__device__ inline unsigned long long __pl_ix(unsigned long long i, unsigned long long n) {
    if (i >= n) { __pl_panic(5, (long long)i, (long long)n); return 0ull; }
    return i;
}
#endif
#ifdef PARLOOP_CHECK
#define PL_IX(i, n) __pl_ix((unsigned long long)(i), (unsigned long long)(n))
#else
#define PL_IX(i, n) (i)
#endif
"#;
