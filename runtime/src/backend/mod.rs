//! Backends: where and how a loop's elements run.
//!
//! - [`Backend::Seq`]: one thread, plain loops; the reference for every test.
//! - [`Backend::Threads`]: rayon; blocks of one plan colour in parallel.

pub(crate) mod device;
pub(crate) mod seq;
pub(crate) mod threads;

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
}

impl Backend {
    /// The best backend present: `Threads` until a GPU backend exists.
    pub fn auto() -> Backend {
        Backend::Threads
    }

    /// The name used by `PARLOOP_BACKEND`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Seq => "seq",
            Backend::Threads => "threads",
            Backend::Emu => "emu",
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

    /// Parses `auto`, `seq`, `threads` or `emu`; `cuda` is recognised and
    /// reported as not available in this build.
    fn from_str(s: &str) -> Result<Backend, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Backend::auto()),
            "seq" => Ok(Backend::Seq),
            "threads" => Ok(Backend::Threads),
            "emu" => Ok(Backend::Emu),
            "cuda" => Err(Error::Backend {
                name: s.into(),
                reason: "the CUDA device is not part of this build yet; \
                         `emu` runs the device path on the CPU; or use seq, threads, auto"
                    .into(),
            }),
            _ => Err(Error::Backend {
                name: s.into(),
                reason: "unknown backend; expected auto, seq, threads or emu".into(),
            }),
        }
    }
}
