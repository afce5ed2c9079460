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
    /// Loops fused after this one (`trace::fuse`): each runs over the
    /// same elements right after it, with its own slice of `views`.
    pub then: &'a [Stage],
}

/// A direct loop fused into a host job: its adapter and which of the
/// job's views are its arguments.
pub(crate) struct Stage {
    pub host: crate::kernel::HostFn,
    pub views: std::ops::Range<usize>,
}

impl HostJob<'_> {
    /// Runs elements `start..end` of the job: the kernel, then each fused
    /// stage, `threads::CHUNK` elements at a time (the chunks `threads`
    /// cuts, so a fused pass keeps a chunk's values in cache between the
    /// bodies and its results do not depend on the backend).
    ///
    /// # Safety
    /// As [`crate::kernel::HostFn`]: `views` (this job's views, or a copy
    /// with reductions redirected) describe data locked for the loop.
    pub(crate) unsafe fn call(&self, views: &[crate::views::ArgView], start: usize, end: usize) {
        // SAFETY: forwarded contract.
        unsafe { call(self.host, self.then, views, start, end) }
    }
}

/// [`HostJob::call`] by parts (what `threads`' workers share: the views
/// are not `Sync`).
///
/// # Safety
/// As [`HostJob::call`].
pub(crate) unsafe fn call(
    host: crate::kernel::HostFn,
    then: &[Stage],
    views: &[crate::views::ArgView],
    start: usize,
    end: usize,
) {
    if then.is_empty() {
        // SAFETY: forwarded contract.
        return unsafe { host(views, start, end) };
    }
    let mut s = start;
    while s < end {
        let e = (s + threads::CHUNK).min(end);
        // SAFETY: forwarded contract; each stage gets its own views.
        unsafe {
            host(views, s, e);
            for stage in then {
                (stage.host)(&views[stage.views.clone()], s, e);
            }
        }
        s = e;
    }
}

/// The signature every host backend runs a section with: elements `range`,
/// reductions into the globals when `reduce` (not for the exec halo, whose
/// elements other ranks own and count).
pub(crate) type HostRun = fn(&HostJob, std::ops::Range<usize>, bool) -> crate::error::Result<()>;

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// The backend a [`Runtime`](crate::Runtime) runs loops on.
///
/// ```
/// use parloop::{Backend, Runtime};
/// let backend: Backend = "threads".parse()?; // as PARLOOP_BACKEND spells it
/// let rt = Runtime::with_backend(backend)?;
/// assert_eq!(rt.backend(), Backend::Threads);
/// assert!(matches!(Backend::auto(), Backend::Cuda | Backend::Threads));
/// # Ok::<(), parloop::Error>(())
/// ```
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
    /// An NVIDIA GPU through CUDA (`PARLOOP_DEVICE` picks one; by default
    /// the rank on its node modulo the GPUs there, 0 in a serial run).
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
