//! The C++ prelude every translated module starts with: Rust's semantics
//! where C++ differs or leaves behaviour undefined. Signed arithmetic wraps
//! (as Rust's release builds), shift amounts are masked, float-to-integer
//! casts saturate, `powi` multiplies in the order LLVM's `powi` does, and
//! `signum` returns NaN for NaN.

/// The prelude source. Needs `__device__` defined (CUDA, NVRTC, or empty on
/// the host) and the C math functions declared.
pub const PRELUDE: &str = r#"// parloop kernel prelude: Rust semantics in C++.
#ifndef PARLOOP_PRELUDE
#define PARLOOP_PRELUDE
template <class T> struct __pl_unsigned;
template <> struct __pl_unsigned<int> { typedef unsigned int type; };
template <> struct __pl_unsigned<long long> { typedef unsigned long long type; };
template <> struct __pl_unsigned<unsigned int> { typedef unsigned int type; };
template <> struct __pl_unsigned<unsigned long long> { typedef unsigned long long type; };
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
#endif
"#;
