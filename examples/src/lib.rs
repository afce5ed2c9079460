//! parloop demos and the meshes they run on.
//!
//! - [`airfoil`]: OP2's airfoil benchmark (2-D Euler, finite volume, NACA0012
//!   C-grid): the grid generator, the grid file reader and writer, the five
//!   kernels and the time loop.
//! - [`wave`]: seed 000's explicit wave equation, P1 finite elements on
//!   `parloop_mesh::unit_square`, seven loops per step.
//! - [`poisson`]: P1 Poisson (assembled stiffness matrix, Dirichlet rows,
//!   CG) and the L2 projection, 2-D and 3-D, with error integrals.
//! - [`memory`]: what the system has left, to refuse a size before
//!   allocating it.
//! - [`cli`]: what the demos' command lines share (the backend, counts,
//!   the output folder, checked writes).

pub mod airfoil;
pub mod cli;
pub mod distributed;
pub mod memory;
pub mod poisson;
pub mod wave;

/// What a demo calls between declaring its mesh and data and building
/// anything from them (plans, sparsity): under MPI, the partition, e.g.
/// `&|m| rt.partition(&m.cells, &m.cell_vertices, Partitioner::Metis).map(drop)`;
/// [`serial`] otherwise.
pub type Distribute<'a> = &'a dyn Fn(&parloop_mesh::DeclaredMesh) -> Result<(), parloop::Error>;

/// The [`Distribute`] step of a serial run: nothing.
pub fn serial(_: &parloop_mesh::DeclaredMesh) -> Result<(), parloop::Error> {
    Ok(())
}
