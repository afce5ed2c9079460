//! Backends: where and how a loop's elements run.
//!
//! - [`Backend::Seq`]: one thread, plain loops; the reference for every test.
//! - [`Backend::Threads`]: rayon; blocks of one plan colour in parallel.
//! - [`Backend::Emu`], [`Backend::Cuda`]: the device loop runner
//!   (`device_loop`: plan, generate, stage, launch), over the `Device` trait
//!   of `crate::device` (the emulated device, CUDA).

pub(crate) mod device_loop;
pub(crate) mod seq;
pub(crate) mod share;
pub(crate) mod threads;

/// A host loop ready to run, what every host backend's `run(job, range,
/// reduce)` takes: the kernel's adapter, the views of the locked data, the
/// reductions, and how `threads` cuts the work (`seq` ignores it).
pub(crate) struct HostJob<'a> {
    /// The kernel's host adapter (scalar or lane-wise).
    pub host: crate::kernel::HostFn,
    /// One view per argument, of data locked for the loop.
    pub views: &'a [crate::views::ArgView],
    /// The globals the loop reduces.
    pub reductions: &'a [crate::exec::Reduction],
    /// The kernel's name, for errors.
    pub kernel: &'a str,
    /// How `threads` cuts the elements: a coloured plan, or chunks that
    /// never straddle a section boundary.
    pub work: threads::Work<'a>,
}

/// The signature every host backend runs a section with: elements `range`,
/// reductions into the globals when `reduce` (not for the exec halo, whose
/// elements other ranks own and count).
pub(crate) type HostRun = fn(&HostJob, std::ops::Range<usize>, bool) -> crate::error::Result<()>;

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// The backend a [`Runtime`](crate::Runtime) runs loops on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// One thread, elements in order.
    Seq,
    /// All cores through rayon (`RAYON_NUM_THREADS` sets the count).
    Threads,
    /// The emulated device: generated CUDA compiled by the host C++
    /// compiler, so the whole device path runs without a GPU.
    Emu,
    /// An NVIDIA GPU through CUDA (`PARLOOP_DEVICE` picks one, default 0).
    Cuda,
}

impl Backend {
    /// The best backend present: `Cuda` when a GPU can be used, else
    /// `Threads`.
    pub fn auto() -> Backend {
        static AUTO: std::sync::OnceLock<Backend> = std::sync::OnceLock::new();
        *AUTO.get_or_init(|| if crate::device::cuda::present() { Backend::Cuda } else { Backend::Threads })
    }

    /// The name used by `PARLOOP_BACKEND`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Seq => "seq",
            Backend::Threads => "threads",
            Backend::Emu => "emu",
            Backend::Cuda => "cuda",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = Error;

    /// Parses `auto`, `seq`, `threads`, `emu` or `cuda`.
    fn from_str(s: &str) -> Result<Backend, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Backend::auto()),
            "seq" => Ok(Backend::Seq),
            "threads" => Ok(Backend::Threads),
            "emu" => Ok(Backend::Emu),
            "cuda" => Ok(Backend::Cuda),
            _ => Err(Error::Backend {
                name: s.into(),
                reason: "unknown backend; expected auto, seq, threads, emu or cuda".into(),
            }),
        }
    }
}
