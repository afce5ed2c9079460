//! `parloop-kernels`: everything in parloop that becomes device code.
//!
//! This crate will hold the Rust-to-CUDA kernel translator behind
//! `#[parloop::kernel]` and the generated loop templates of the GPU
//! strategies (DESIGN.md sections 3 and 5). Today kernels are declared with
//! `parloop::kernel!`, which runs them on the CPU backends; the translator
//! and the device code generators land with the kernel-language and GPU
//! issues. The crate depends on nothing in parloop, so it can be tested as a
//! plain library.
