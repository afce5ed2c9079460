//! The OP2 airfoil benchmark: a 2-D inviscid Euler solver on an unstructured
//! view of a NACA0012 C-grid, with five loops per step (save_soln, adt_calc,
//! res_calc, bres_calc, update).
//!
//! ```
//! use parloop::{Backend, Runtime};
//! use parloop_examples::airfoil::{grid::Grid, Airfoil};
//!
//! let rt = Runtime::with_backend(Backend::Seq)?;
//! let grid = Grid::generate(10, 15)?.rounded();
//! let mut airfoil = Airfoil::new(&rt, &grid)?;
//! let rms = airfoil.step()?;
//! assert!(rms > 0.0 && rms.is_finite());
//! # Ok::<(), parloop::Error>(())
//! ```

pub mod grid;
pub mod kernels;
mod solver;

pub use solver::{Airfoil, FlowConstants, RunError};

use parloop::Error;

/// Bytes of memory this process can still get, as far as the system says:
/// Linux's `MemAvailable` plus free swap, capped by the cgroup's
/// `memory.max` less its `memory.current` where one is set; `None` where
/// none of that can be read.
pub fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = meminfo.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()?;
        kib.checked_mul(1024)
    };
    let mut bytes = field("MemAvailable:")?.saturating_add(field("SwapFree:").unwrap_or(0));
    let cgroup = |file: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{file}")).ok()?.trim().parse().ok()
    };
    if let Some(max) = cgroup("memory.max") {
        bytes = bytes.min(max.saturating_sub(cgroup("memory.current").unwrap_or(0)));
    }
    Some(bytes)
}

/// Refuses, with [`Error::OutOfMemory`], to go on with something that
/// needs `bytes` (`None`: a size that overflows) when that is more than
/// [`available_memory`]; `what` names it in the message.
pub fn check_memory(what: &str, bytes: Option<usize>) -> Result<(), Error> {
    let gb = |b: f64| b / 1e9;
    match (bytes, available_memory()) {
        (None, _) => Err(Error::OutOfMemory { what: format!("{what} (a size beyond usize)"), bytes: usize::MAX }),
        (Some(b), Some(avail)) if b as u64 > avail => Err(Error::OutOfMemory {
            what: format!("{what} (about {:.1} GB; {:.1} GB of memory available)", gb(b as f64), gb(avail as f64)),
            bytes: b,
        }),
        _ => Ok(()),
    }
}

/// OP2's sequential double-precision rms every 100 iterations on the
/// 100x150 grid, copied digit for digit from the reference table
/// (shared/data/airfoil/README.md): the tests and the distributed check
/// compare against it.
#[allow(clippy::excessive_precision)]
pub const REFERENCE_100X150: [f64; 10] = [
    5.09639642815112545e-04,
    3.03392277048367197e-04,
    2.11974917137214047e-04,
    1.55293568002390435e-04,
    1.24173086812545886e-04,
    9.96295075730660473e-05,
    8.10373378319785548e-05,
    6.81040372829913479e-05,
    5.84972493393808742e-05,
    5.10296733643125940e-05,
];
