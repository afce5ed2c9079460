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

pub use crate::memory::{available_memory, check_memory};

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
