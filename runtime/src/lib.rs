//! # parloop
//!
//! A GPU-first runtime for parallel loops over unstructured meshes. A solver
//! declares sets (nodes, edges, cells), maps between them, data on them
//! (dats) and kernels, then calls [`Runtime::par_loop`]: the runtime plans,
//! colours and runs the kernel over every element, on one core
//! ([`Backend::Seq`]) or all of them ([`Backend::Threads`]).
//!
//! ```
//! use parloop::{Access, Backend, Runtime};
//!
//! /// Edge flux: add to one node what leaves the other.
//! #[parloop::kernel]
//! fn flux(x: &[f64; 2], w: &f64, n1: &mut f64, n2: &mut f64) {
//!     let f = *w * (x[1] - x[0]);
//!     *n1 += f;
//!     *n2 -= f;
//! }
//!
//! let rt = Runtime::with_backend(Backend::Threads)?;
//! let nodes = rt.set("nodes", 4)?;
//! let edges = rt.set("edges", 3)?;
//! let pedge = rt.map("pedge", &edges, &nodes, 2, vec![0, 1, 1, 2, 2, 3])?;
//! let x = rt.dat("x", &edges, 2, vec![0.0, 1.0, 1.0, 3.0, 3.0, 6.0])?;
//! let w = rt.dat("w", &edges, 1, vec![1.0; 3])?;
//! let n = rt.dat("n", &nodes, 1, vec![0.0; 4])?;
//! rt.par_loop(flux::KERNEL, &edges, &[
//!     x.arg(Access::READ),
//!     w.arg(Access::READ),
//!     n.arg_via(&pedge, 0, Access::INC),
//!     n.arg_via(&pedge, 1, Access::INC),
//! ])?;
//! assert_eq!(n.values()?, vec![1.0, 1.0, 1.0, -3.0]);
//! # Ok::<(), parloop::Error>(())
//! ```
//!
//! Environment: `PARLOOP_BACKEND` (`auto`, `seq`, `threads`, `emu`,
//! `cuda`), `PARLOOP_PART_SIZE` (elements per block), `PARLOOP_PROFILE`
//! (`1` prints a per-loop table when the runtime is dropped, `json:FILE`
//! writes JSON), `PARLOOP_LAZY` (`1`: the lazy trace); the README's
//! environment table lists every variable.

#![warn(missing_docs)]

// Lets `#[parloop::kernel]`'s `::parloop::` paths resolve inside this crate too.
extern crate self as parloop;

mod arg;
mod backend;
mod bind;
mod coherence;
mod config;
mod decl;
mod device;
#[cfg(feature = "mpi")]
mod dist;
mod distribution;
mod error;
mod exec;
mod fallible;
mod host_access;
mod kernel;
mod kernel_panic;
mod lanes;
pub mod linalg;
mod matrix;
mod names;
mod pages;
mod par_loop;
mod plan_cache;
mod profile;
mod run;
mod runtime;
pub mod solve;
mod strategy;
mod sync;
mod trace;
mod types;
mod validate;
mod views;
mod word_hash;

pub use arg::Arg;
pub use backend::Backend;
pub use decl::{Dat, Global, Map, Sections, Set, Subset};
pub use device::DeviceProperties;
pub use distribution::ReductionStats;
pub use error::{ArgProblem, Error, Result};
pub use kernel::{DeviceFn, HostFn, Kernel, ParamSig};
pub use matrix::{Csr, Mat, Sparsity};
pub use par_loop::{LoopSet, ParLoop};
pub use parloop_macros::{device, kernel};
pub use profile::LoopReport;
pub use runtime::Runtime;
/// Device increment strategies (see [`Runtime::set_strategy`]).
pub use strategy::Strategy;
pub use trace::{ForcingPoint, TraceStats};
pub use types::{Access, ElemType, Scalar};

/// Distributed runs: MPI set-up, partitioners and the partition report.
#[cfg(feature = "mpi")]
pub mod mpi {
    pub use crate::dist::{initialize, threading, Comm, PartitionReport, Partitioner, SetReport, Universe};
    pub use ::mpi::collective::{CommunicatorCollectives, SystemOperation};
    pub use ::mpi::environment::Threading;
    pub use ::mpi::topology::SimpleCommunicator;
    pub use ::mpi::traits::Communicator;
}

/// Re-exported planner, for callers that want plans or RCM directly.
pub use parloop_planner as planner;

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeExample;

/// Items used by `#[parloop::kernel]`'s expansion; not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use crate::bind::{
        pipelined as lanes_pipelined, usable as lanes_usable, Binder, KernelParam, LaneBinder, Shape, BATCH,
    };
    pub use crate::kernel_panic::ElementGuard;
    pub use crate::lanes::{avx2, vector_isa, Lanes, VectorIsa, LANES};
    pub use crate::views::{ArgView, ViewKind};
}
