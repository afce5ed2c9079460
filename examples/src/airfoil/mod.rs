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

pub use solver::{Airfoil, FlowConstants};
