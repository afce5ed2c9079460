//! The C++ prelude every translated module starts with: Rust's semantics
//! where C++ differs or leaves behaviour undefined. Signed arithmetic wraps
//! (as Rust's release builds), shift amounts are masked, float-to-integer
//! casts saturate, `powi` multiplies in the order LLVM's `powi` does, and
//! `signum` returns NaN for NaN.
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
__device__ inline float __pl_signum(float x) { return x != x ? x : copysignf(1.0f, x); }
__device__ inline double __pl_signum(double x) { return x != x ? x : copysign(1.0, x); }
/* Panics: the first one is recorded in pl_error (see the crate docs). */
struct pl_error_t { unsigned long long owner; long long code; long long element; long long a; long long b; };
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
