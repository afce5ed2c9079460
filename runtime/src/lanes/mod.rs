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
//!
//! The lane type, [`Lanes`], and its arithmetic are in `lane`; the
//! instruction set the twins run with is detected once in `isa`. What moves
//! an argument's values into lanes and back, `LaneBinder`, lies with the
//! scalar binder in `crate::bind`.

mod isa;
mod lane;

pub use isa::{avx2, vector_isa, VectorIsa};
pub(crate) use lane::written_out;
pub use lane::Lanes;

/// Elements per group of the narrowest twin (AVX2): the fewest elements a
/// loop needs for lanes to run.
pub const LANES: usize = 4;
