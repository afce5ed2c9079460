//! P1 finite elements with an assembled matrix: the Poisson problem and
//! the L2 projection, in 2-D (triangles) and 3-D (tetrahedra).
//!
//! **Poisson** ([`Mode::Poisson`]): find `u_h` in the P1 space `V_h`,
//! equal to the Dirichlet values `g` at the Dirichlet vertices, with
//!
//! ```text
//! integral of grad u_h . grad v  =  integral of f v     for every v in V_h zero there,
//! ```
//!
//! that is `K u = b` with the stiffness matrix `K_ij = integral of grad
//! phi_i . grad phi_j` (one loop over the cells with a matrix argument) and
//! the load vector `b_i = integral of f phi_i` (a loop over the cells
//! incrementing `b` through the cell -> vertex map, a degree-2 quadrature).
//! The Dirichlet rows are replaced by identity rows (`Mat::zero_rows` with
//! 1 on the diagonal) and the same entries of `b` set to `g` (a loop over
//! the boundary subset). Only rows are replaced, so `K` is no longer
//! symmetric; but CG starts from `u = g` on the boundary (0 elsewhere), so
//! its first residual is zero there, and so is every vector it builds from
//! it (residuals, directions): the matrix acts on them as the symmetric
//! positive definite interior block, and CG solves exactly the reduced
//! interior system `K_II u_I = b_I - K_IB g` (the lifting of `g`, done by
//! the solver's first residual).
//!
//! With `f = d pi^2 prod_k sin(pi x_k)` the exact solution is `u = prod_k
//! sin(pi x_k)` on any domain once its values are imposed on the whole
//! boundary ([`Problem::assemble_with_boundary_values`]; on the unit
//! square (cube) they are zero); for P1 the L2 error falls as `h^2` and the
//! H1 seminorm error as `h`. Where part of the boundary is not Dirichlet,
//! the rest is zero-flux Neumann (the natural condition), which this `u`
//! does not satisfy: it is then no solution.
//!
//! **L2 projection** ([`Mode::Projection`]): `M u = b` with the mass
//! matrix `M_ij = integral of phi_i phi_j` (exact element matrices) and
//! `b_i = integral of g phi_i`, no boundary condition: the best L2
//! approximation of `g` in `V_h`, whose L2 error falls as `h^2`.
//!
//! Both solve with Jacobi-preconditioned CG; the errors are integrated by
//! a degree-5 rule in a loop over the cells that reduces into a global.
//!
//! ```
//! use parloop::{Backend, Runtime};
//! use parloop_examples::poisson::{Function, Mode, Problem};
//!
//! let rt = Runtime::with_backend(Backend::Seq)?;
//! let mesh = parloop_mesh::unit_square(16, 16)?;
//! let mut p = Problem::new(&rt, &mesh, Mode::Poisson { dirichlet: "boundary".into() })?;
//! p.assemble(&Function::manufactured_rhs(2))?;
//! let report = p.solve(1e-10)?;
//! let e = p.errors(&Function::manufactured_solution())?;
//! // h = 1/16: L2 error 5.4e-3 (order h^2), H1 seminorm error 0.22 (order h).
//! assert!(report.converged && e.l2 < 6e-3 && e.h1 < 0.25);
//! # Ok::<(), parloop::Error>(())
//! ```

pub mod kernels;

use std::time::Instant;

use parloop::solve::{cg, CgOptions, CgReport, Preconditioner};
use parloop::{Access, Dat, Error, Global, Mat, Runtime, Sparsity, Subset};
use parloop_mesh::{DeclaredMesh, EntityKind, Mesh};

/// The functions the demo integrates, `sines prod_k sin(pi x_k) +
/// constant + square |x|^2`: the right-hand side, the function projected,
/// the exact solution. The kernels get the three coefficients as a global.
///
/// ```
/// use parloop_examples::poisson::Function;
/// let u = Function::manufactured_solution();
/// assert!((u.eval(&[0.5, 0.5]) - 1.0).abs() < 1e-15);
/// assert_eq!(Function::constant(4.0).eval(&[0.3, 0.1, 0.2]), 4.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Function {
    /// Coefficient of `prod_k sin(pi x_k)`.
    pub sines: f64,
    /// The constant term.
    pub constant: f64,
    /// Coefficient of `|x|^2`.
    pub square: f64,
}

impl Function {
    /// `u = prod_k sin(pi x_k)`: zero on the boundary of the unit square
    /// (cube), the exact solution for [`Function::manufactured_rhs`].
    pub const fn manufactured_solution() -> Function {
        Function { sines: 1.0, constant: 0.0, square: 0.0 }
    }

    /// `f = -laplace(u) = dim pi^2 prod_k sin(pi x_k)`.
    pub fn manufactured_rhs(dim: usize) -> Function {
        Function { sines: dim as f64 * std::f64::consts::PI.powi(2), constant: 0.0, square: 0.0 }
    }

    /// The constant `c`.
    pub const fn constant(c: f64) -> Function {
        Function { sines: 0.0, constant: c, square: 0.0 }
    }

    /// The value at `x` (2 or 3 coordinates), on the host.
    pub fn eval(&self, x: &[f64]) -> f64 {
        let s: f64 = x.iter().map(|&xk| (std::f64::consts::PI * xk).sin()).product();
        let r2: f64 = x.iter().map(|xk| xk * xk).sum();
        self.sines * s + self.constant + self.square * r2
    }

    fn coefficients(&self) -> [f64; 3] {
        [self.sines, self.constant, self.square]
    }
}

/// Which system [`Problem`] assembles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `-laplace(u) = f`, `u = g` on the vertex group `dirichlet` (`g = 0`
    /// unless given to [`Problem::assemble_with_boundary_values`]):
    /// `"boundary"` is every boundary vertex (the generators' group of
    /// that name, or the vertices of every boundary facet of a mesh that
    /// has none, such as a Gmsh file's); another name is a vertex group
    /// of the mesh (for a Gmsh physical curve (2-D) or surface (3-D)
    /// `"inlet"`, its vertices `"inlet.vertices"`).
    Poisson {
        /// The Dirichlet vertex group.
        dirichlet: String,
    },
    /// The L2 projection `M u = b`, no boundary condition.
    Projection,
}

/// The L2 norm and the H1 seminorm of `u_h - u`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Errors {
    /// `(integral of (u_h - u)^2)^(1/2)`.
    pub l2: f64,
    /// `(integral of |grad (u_h - u)|^2)^(1/2)`.
    pub h1: f64,
}

/// Seconds spent in each phase so far (see [`Problem::timings`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timings {
    /// Declaring the mesh (sets, maps, coordinates, subsets) and the dats.
    pub declare: f64,
    /// Building the sparsity pattern and allocating the matrix.
    pub sparsity: f64,
    /// Matrix and load vector, boundary conditions included.
    pub assembly: f64,
    /// The CG solve (the last one).
    pub solve: f64,
    /// The error integrals (the last ones).
    pub errors: f64,
}

/// A P1 problem on a runtime: the mesh, the matrix, the vectors and the
/// globals the loops read and reduce into.
///
/// ```
/// use parloop::{Backend, Runtime};
/// use parloop_examples::poisson::{Function, Mode, Problem};
///
/// // The L2 projection of g = sin(pi x) sin(pi y) sin(pi z) + |x|^2.
/// let rt = Runtime::with_backend(Backend::Threads)?;
/// let mesh = parloop_mesh::unit_cube(6, 6, 6)?;
/// let mut p = Problem::new(&rt, &mesh, Mode::Projection)?;
/// let g = Function { square: 1.0, ..Function::manufactured_solution() };
/// p.assemble(&g)?;
/// p.solve(1e-10)?;
/// assert_eq!(p.unknowns(), 7 * 7 * 7);
/// assert!(p.errors(&g)?.l2 < 2e-2);
/// assert!(p.timings().assembly > 0.0);
/// # Ok::<(), parloop::Error>(())
/// ```
pub struct Problem<'rt> {
    rt: &'rt Runtime,
    /// The mesh's sets, maps and coordinates on the runtime.
    pub mesh: DeclaredMesh,
    /// The spatial dimension, 2 or 3.
    pub dim: usize,
    /// What is solved.
    pub mode: Mode,
    /// The stiffness (Poisson) or mass (projection) matrix's pattern.
    pub sparsity: Sparsity,
    /// The matrix.
    pub matrix: Mat<f64>,
    /// The right-hand side, per vertex.
    pub rhs: Dat<f64>,
    /// The solution, per vertex.
    pub u: Dat<f64>,
    /// The Dirichlet vertices (Poisson only).
    pub dirichlet: Option<Subset>,
    /// The Dirichlet values `g` (Poisson only; zero unless set by
    /// [`Problem::assemble_with_boundary_values`]).
    boundary_values: Function,
    /// The coefficients of the function the next loop integrates.
    function: Global<f64>,
    /// The two squared errors the error loop reduces into.
    squared: Global<f64>,
    timings: Timings,
}

/// Dirichlet vertices of `mesh` called `name` (see [`Mode::Poisson`]).
fn dirichlet_vertices(mesh: &Mesh, name: &str) -> Result<Vec<usize>, Error> {
    if let Some(g) = mesh.vertex_group(name) {
        return Ok(g.entities.iter().map(|&v| v as usize).collect());
    }
    if name == "boundary" {
        // Every vertex of a boundary facet, sorted and unique (a subset's
        // entities are).
        let mut v: Vec<usize> = mesh.facets.iter().map(|&v| v as usize).collect();
        v.sort_unstable();
        v.dedup();
        return Ok(v);
    }
    let known: Vec<&str> =
        mesh.groups.iter().filter(|g| g.kind == EntityKind::Vertex).map(|g| g.name.as_str()).collect();
    Err(Error::InvalidDeclaration {
        what: "Dirichlet group",
        name: name.into(),
        reason: format!(
            "the mesh has no vertex group `{name}` or `{name}.vertices`; its vertex groups are [{}], and \
             `boundary` is every boundary vertex",
            known.join(", ")
        ),
    })
}

/// Whether the Dirichlet group `name` of `mesh` (see [`Mode::Poisson`])
/// holds every boundary vertex (every vertex of a boundary facet): only
/// then is a function that satisfies `-laplace(u) = f` inside, such as
/// [`Function::manufactured_solution`], the exact solution with its own
/// values as the Dirichlet values. An unknown group is an error naming it.
///
/// ```
/// use parloop_examples::poisson::covers_boundary;
/// let mesh = parloop_mesh::unit_square(4, 4)?;
/// assert!(covers_boundary(&mesh, "boundary")?);
/// assert!(!covers_boundary(&mesh, "left")?);
/// # Ok::<(), parloop::Error>(())
/// ```
pub fn covers_boundary(mesh: &Mesh, name: &str) -> Result<bool, Error> {
    let mut fixed = vec![false; mesh.vertices()];
    for v in dirichlet_vertices(mesh, name)? {
        fixed[v] = true;
    }
    Ok(mesh.facets.iter().all(|&v| fixed[v as usize]))
}

impl<'rt> Problem<'rt> {
    /// Peak memory of one solve on `unit_square(n, n)` (`dim` 2) or
    /// `unit_cube(n, n, n)` (`dim` 3) in bytes (`None` when the count
    /// overflows): 180 bytes per triangle, 140 per tetrahedron, above the
    /// 154 and 108-118 measured (peak resident memory of `poisson
    /// --refinements 1` at n = 400, 800 in 2-D and 40, 80 in 3-D, session
    /// 16: mesh, declarations, sparsity, matrix, CG vectors).
    ///
    /// ```
    /// use parloop_examples::poisson::Problem;
    /// assert_eq!(Problem::estimated_bytes(3, 10), Some(6 * 1000 * 140));
    /// assert_eq!(Problem::estimated_bytes(3, usize::MAX), None);
    /// ```
    pub fn estimated_bytes(dim: usize, n: usize) -> Option<usize> {
        match dim {
            2 => n.checked_mul(n)?.checked_mul(2)?.checked_mul(180),
            _ => n.checked_mul(n)?.checked_mul(n)?.checked_mul(6)?.checked_mul(140),
        }
    }

    /// Declares `mesh` (2-D or 3-D), the matrix's sparsity (cell -> vertex
    /// with itself), the matrix and the vectors on `rt`, and for Poisson
    /// the Dirichlet subset. An unknown Dirichlet group, or an empty one
    /// (the problem would be singular), is an [`Error::InvalidDeclaration`]
    /// naming it.
    pub fn new(rt: &'rt Runtime, mesh: &Mesh, mode: Mode) -> Result<Problem<'rt>, Error> {
        Problem::new_distributed(rt, mesh, mode, &crate::serial)
    }

    /// [`Problem::new`] with `distribute` called once the mesh, the
    /// Dirichlet subset and the vectors are declared and before the
    /// sparsity is built: under MPI, the partition (every rank declares
    /// the whole mesh; each then keeps its part, subsets included).
    pub fn new_distributed(
        rt: &'rt Runtime,
        mesh: &Mesh,
        mode: Mode,
        distribute: crate::Distribute,
    ) -> Result<Problem<'rt>, Error> {
        let t = Instant::now();
        let prefix = match mode {
            Mode::Poisson { .. } => "poisson",
            Mode::Projection => "projection",
        };
        let m = mesh.declare(rt, prefix)?;
        let dirichlet = match &mode {
            Mode::Poisson { dirichlet } => {
                let vertices = dirichlet_vertices(mesh, dirichlet)?;
                if vertices.is_empty() {
                    return Err(Error::InvalidDeclaration {
                        what: "Dirichlet group",
                        name: dirichlet.clone(),
                        reason: "it holds no vertex, so the Poisson problem has no unique solution".into(),
                    });
                }
                Some(rt.subset(&format!("{prefix}_dirichlet"), &m.vertices, vertices)?)
            }
            Mode::Projection => None,
        };
        let n = mesh.vertices();
        let rhs = rt.dat(&format!("{prefix}_b"), &m.vertices, 1, vec![0.0; n])?;
        let u = rt.dat(&format!("{prefix}_u"), &m.vertices, 1, vec![0.0; n])?;
        let function = rt.global(&format!("{prefix}_f"), &[0.0; 3])?;
        let squared = rt.global(&format!("{prefix}_squared_errors"), &[0.0; 2])?;
        distribute(&m)?;
        let declare = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let cv = &m.cell_vertices;
        let sparsity = rt.sparsity(&format!("{prefix}_pattern"), &[(cv, cv)], (1, 1))?;
        let matrix = rt.mat(&format!("{prefix}_A"), &sparsity)?;
        let timings = Timings { declare, sparsity: t.elapsed().as_secs_f64(), ..Timings::default() };
        Ok(Problem {
            rt,
            dim: mesh.dim,
            mesh: m,
            mode,
            sparsity,
            matrix,
            rhs,
            u,
            dirichlet,
            boundary_values: Function::constant(0.0),
            function,
            squared,
            timings,
        })
    }

    /// Assembles the matrix and the right-hand side for `f` (Poisson: the
    /// right-hand side `f`; projection: the function projected `g`), and
    /// for Poisson applies the Dirichlet condition `u = 0`.
    pub fn assemble(&mut self, f: &Function) -> Result<(), Error> {
        self.assemble_with_boundary_values(f, &Function::constant(0.0))
    }

    /// [`Problem::assemble`] for Poisson with the Dirichlet condition `u =
    /// g` (the values of `g` at the Dirichlet vertices; [`Problem::solve`]
    /// keeps them). Projection has no Dirichlet condition: `g` is ignored.
    ///
    /// ```
    /// use parloop::{Backend, Runtime};
    /// use parloop_examples::poisson::{Function, Mode, Problem};
    ///
    /// // -laplace(u) = 0 with u = 3 on the boundary: u = 3 everywhere.
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// let mesh = parloop_mesh::unit_square(4, 4)?;
    /// let mut p = Problem::new(&rt, &mesh, Mode::Poisson { dirichlet: "boundary".into() })?;
    /// p.assemble_with_boundary_values(&Function::constant(0.0), &Function::constant(3.0))?;
    /// p.solve(1e-12)?;
    /// assert!(p.u.values()?.iter().all(|u| (u - 3.0).abs() < 1e-10));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn assemble_with_boundary_values(&mut self, f: &Function, g: &Function) -> Result<(), Error> {
        use kernels::*;
        let t = Instant::now();
        let (rt, m) = (self.rt, &self.mesh);
        let (read, inc) = (Access::READ, Access::INC);
        let cv = &m.cell_vertices;
        let element = match (&self.mode, self.dim) {
            (Mode::Poisson { .. }, 2) => stiffness_2d::KERNEL,
            (Mode::Poisson { .. }, _) => stiffness_3d::KERNEL,
            (Mode::Projection, 2) => mass_2d::KERNEL,
            (Mode::Projection, _) => mass_3d::KERNEL,
        };
        // INC adds element matrices into the values: start from zero.
        self.matrix.zero()?;
        rt.par_loop(element, &m.cells, &[m.coords.arg_vec(cv, read), self.matrix.arg(cv, cv, inc)])?;
        self.function.set_values(&f.coefficients())?;
        rt.fill(&self.rhs, 0.0)?;
        let load = if self.dim == 2 { load_2d::KERNEL } else { load_3d::KERNEL };
        rt.par_loop(load, &m.cells, &[m.coords.arg_vec(cv, read), self.function.arg(read), self.rhs.arg_vec(cv, inc)])?;
        if let Some(boundary) = &self.dirichlet {
            self.matrix.zero_rows(boundary, 1.0)?;
            self.boundary_values = *g;
            self.set_boundary_values(boundary, &self.rhs)?;
        }
        self.timings.assembly = t.elapsed().as_secs_f64();
        Ok(())
    }

    /// `v = g` at the Dirichlet vertices `boundary` (a loop over them).
    fn set_boundary_values(&self, boundary: &Subset, v: &Dat<f64>) -> Result<(), Error> {
        let kernel =
            if self.dim == 2 { kernels::boundary_value_2d::KERNEL } else { kernels::boundary_value_3d::KERNEL };
        self.function.set_values(&self.boundary_values.coefficients())?;
        self.rt.par_loop(
            kernel,
            boundary,
            &[self.mesh.coords.arg(Access::READ), self.function.arg(Access::READ), v.arg(Access::WRITE)],
        )
    }

    /// Solves by Jacobi-preconditioned CG to `||b - A u|| <= rtol ||b||`,
    /// from `u` = the Dirichlet values at the Dirichlet vertices, 0
    /// elsewhere. Not converging is an [`Error::NotConverged`].
    pub fn solve(&mut self, rtol: f64) -> Result<CgReport, Error> {
        let t = Instant::now();
        // The Dirichlet values, which keep CG on the interior block (see
        // the module's documentation), and zero elsewhere.
        self.rt.fill(&self.u, 0.0)?;
        if let Some(boundary) = &self.dirichlet {
            self.set_boundary_values(boundary, &self.u)?;
        }
        let opts = CgOptions { rtol, preconditioner: Preconditioner::Jacobi, ..CgOptions::default() };
        let report = cg(self.rt, &self.matrix, &self.rhs, &self.u, &opts)?;
        self.timings.solve = t.elapsed().as_secs_f64();
        Ok(report)
    }

    /// The L2 and H1-seminorm errors of the solution against `exact`,
    /// integrated cell by cell with a degree-5 rule in one loop reducing
    /// into a global.
    pub fn errors(&mut self, exact: &Function) -> Result<Errors, Error> {
        let t = Instant::now();
        let m = &self.mesh;
        let (cv, read) = (&m.cell_vertices, Access::READ);
        self.function.set_values(&exact.coefficients())?;
        self.squared.set_values(&[0.0, 0.0])?;
        let kernel = if self.dim == 2 { kernels::errors_2d::KERNEL } else { kernels::errors_3d::KERNEL };
        self.rt.par_loop(
            kernel,
            &m.cells,
            &[
                m.coords.arg_vec(cv, read),
                self.u.arg_vec(cv, read),
                self.function.arg(read),
                self.squared.arg(Access::INC),
            ],
        )?;
        let s = self.squared.values()?;
        self.timings.errors = t.elapsed().as_secs_f64();
        Ok(Errors { l2: s[0].max(0.0).sqrt(), h1: s[1].max(0.0).sqrt() })
    }

    /// The unknowns CG solves for: the vertices, less the Dirichlet ones
    /// (under MPI: this rank's owned ones).
    pub fn unknowns(&self) -> usize {
        let owned = self.mesh.vertices.size();
        // The subset's owned entities: its indices below the owned count
        // (under MPI it also holds halo vertices, numbered after).
        let fixed = self.dirichlet.as_ref().map_or(0, |d| d.indices().partition_point(|&v| (v as usize) < owned));
        owned - fixed
    }

    /// Seconds per phase so far.
    pub fn timings(&self) -> Timings {
        self.timings
    }
}

/// `log(e_coarse / e_fine) / log(h_coarse / h_fine)`: the observed order of
/// convergence between two meshes.
///
/// ```
/// assert!((parloop_examples::poisson::order(4.0, 1.0, 2.0) - 2.0).abs() < 1e-15);
/// ```
pub fn order(e_coarse: f64, e_fine: f64, refinement: f64) -> f64 {
    (e_coarse / e_fine).ln() / refinement.ln()
}
