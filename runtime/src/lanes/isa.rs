//! The instruction set lane-wise twins run with (AVX2 or AVX-512), detected
//! once per process; a [`super::Lanes`] exists only where it runs.

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
