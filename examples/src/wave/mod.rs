//! The explicit wave example of PyOP2's lazy-evaluation notes (seed 000):
//! the wave equation as a first-order system,
//!
//! ```text
//! d phi / dt = -p,    d p / dt = -laplace(phi)   (so d^2 p / dt^2 = laplace(p)),
//! ```
//!
//! with P1 finite elements on `unit_square(100, 100)`, zero Neumann
//! boundaries, `p = exp(-40 ((x - 0.5)^2 + (y - 0.5)^2))` and `phi = 0` at
//! the start, and the symplectic leapfrog (Stormer-Verlet) step, `dt =
//! 0.001` to `T = 10`:
//!
//! ```text
//! phi -= dt/2 p                         phi_expr   (vertices, direct)
//! t1 = 0;  t1 += dt K phi               zero, assemble1 (cells, INC through cell -> vertex)
//! t2 = 0;  t2 += M_lumped               zero, assemble2 (cells, INC)
//! p += t1 / t2                          expr       (vertices, direct)
//! phi -= dt/2 p                         phi_expr
//! ```
//!
//! with `K_ij = integral of grad v_i . grad v_j` (stiffness) and `M_lumped`
//! the row sums of the mass matrix, `integral of v_i`: seven loops per
//! step with the seed's names. (The seed writes `t1(WRITE)` and
//! `p(WRITE)`; here the assembly increments through the map, INC, and `p`
//! is read and written, RW, as the mathematics says.)
//!
//! The scheme conserves exactly, up to rounding, the modified energy
//! [`Energy::modified`]; the energy itself, `1/2 p.M p + 1/2 phi.K phi`,
//! oscillates within a bound of order `dt^2` around it without drifting.
//!
//! ```
//! use parloop::{Backend, Runtime};
//! use parloop_examples::wave::Wave;
//!
//! let rt = Runtime::with_backend(Backend::Seq)?;
//! let mesh = parloop_mesh::unit_square(10, 10)?;
//! let mut wave = Wave::new(&rt, &mesh, 0.001)?;
//! // Serial: the energy is computed here (`None` on ranks other than 0
//! // under MPI).
//! let e0 = wave.energy()?.expect("a serial run");
//! wave.run(100, |_| {})?;
//! assert!((wave.energy()?.expect("serial").modified / e0.modified - 1.0).abs() < 1e-12);
//! # Ok::<(), parloop::Error>(())
//! ```

pub mod kernels;

use parloop::{Access, Dat, Error, Global, ParLoop, Runtime};
use parloop_mesh::{DeclaredMesh, Mesh};

use kernels::{assemble1, assemble2, expr, phi_expr, zero};

/// The seed's time step and end time.
pub const DT: f64 = 0.001;
/// The seed's end time: 10 000 steps of [`DT`].
pub const T_END: f64 = 10.0;

/// The initial pressure, `exp(-40 ((x - 0.5)^2 + (y - 0.5)^2))`.
pub fn initial_p(x: f64, y: f64) -> f64 {
    (-40.0 * ((x - 0.5) * (x - 0.5) + (y - 0.5) * (y - 0.5))).exp()
}

/// The discrete energies of a state (see [`Wave::energy`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Energy {
    /// `1/2 p.M p + 1/2 phi.K phi` (lumped `M`).
    pub plain: f64,
    /// `plain - dt^2/8 p.K p`: the quadratic invariant of this leapfrog
    /// (drift-kick-drift) step, conserved up to rounding. `0 <= plain -
    /// modified <= dt^2 lambda / 4 plain`, `lambda` the largest eigenvalue
    /// of `M^-1 K`, so the plain energy cannot drift either.
    pub modified: f64,
}

/// The solver on a runtime: the mesh, the dats `p`, `phi`, `t1`, `t2`, the
/// global `dt`, and its loops, validated once.
pub struct Wave<'rt> {
    rt: &'rt Runtime,
    /// The mesh's sets, maps and coordinates on the runtime.
    pub mesh: DeclaredMesh,
    /// Pressure per vertex.
    pub p: Dat<f64>,
    /// Velocity potential per vertex.
    pub phi: Dat<f64>,
    dt: f64,
    _dt: Global<f64>,
    phi_expr: ParLoop,
    zero_t1: ParLoop,
    assemble1: ParLoop,
    zero_t2: ParLoop,
    assemble2: ParLoop,
    expr: ParLoop,
    host: HostMesh,
}

impl<'rt> Wave<'rt> {
    /// Peak memory of the `wave` demo on `unit_square(n, n)` in bytes
    /// (`None` when the count overflows): 120 bytes per triangle, above the
    /// 100-117 measured (peak resident memory at n = 300 and 600, session
    /// 16: the mesh, its declarations, plans and the solver's dats).
    ///
    /// ```
    /// use parloop_examples::wave::Wave;
    /// assert_eq!(Wave::estimated_bytes(100), Some(2 * 100 * 100 * 120));
    /// assert_eq!(Wave::estimated_bytes(usize::MAX), None);
    /// ```
    pub fn estimated_bytes(n: usize) -> Option<usize> {
        n.checked_mul(n)?.checked_mul(2)?.checked_mul(120)
    }

    /// Declares a 2-D triangle `mesh` and the initial state on `rt`. A 3-D
    /// mesh is an [`Error::InvalidDeclaration`].
    pub fn new(rt: &'rt Runtime, mesh: &Mesh, dt: f64) -> Result<Wave<'rt>, Error> {
        Wave::new_distributed(rt, mesh, dt, &crate::serial)
    }

    /// [`Wave::new`] with `distribute` called once the mesh and the dats
    /// are declared and before the loops are built: under MPI, the
    /// partition (every rank declares the whole mesh and keeps its part).
    pub fn new_distributed(
        rt: &'rt Runtime,
        mesh: &Mesh,
        dt: f64,
        distribute: crate::Distribute,
    ) -> Result<Wave<'rt>, Error> {
        if mesh.dim != 2 {
            return Err(Error::InvalidDeclaration {
                what: "mesh",
                name: "wave".into(),
                reason: format!("the wave demo runs on triangles; this mesh is {}-D", mesh.dim),
            });
        }
        let m = mesh.declare(rt, "wave")?;
        let n = mesh.vertices();
        let p0: Vec<f64> = mesh.coords.chunks(2).map(|x| initial_p(x[0], x[1])).collect();
        let p = rt.dat("p", &m.vertices, 1, p0)?;
        let phi = rt.dat("phi", &m.vertices, 1, vec![0.0; n])?;
        let t1 = rt.dat("t1", &m.vertices, 1, vec![0.0; n])?;
        let t2 = rt.dat("t2", &m.vertices, 1, vec![0.0; n])?;
        let dt_global = rt.global("dt", &[dt])?;
        distribute(&m)?;
        let (read, write, rw, inc) = (Access::READ, Access::WRITE, Access::RW, Access::INC);
        let (cells, verts, cv) = (&m.cells, &m.vertices, &m.cell_vertices);
        Ok(Wave {
            rt,
            phi_expr: ParLoop::new(phi_expr::KERNEL, verts, &[p.arg(read), dt_global.arg(read), phi.arg(inc)])?,
            zero_t1: ParLoop::new(zero::KERNEL, verts, &[t1.arg(write)])?,
            assemble1: ParLoop::new(
                assemble1::KERNEL,
                cells,
                &[m.coords.arg_vec(cv, read), phi.arg_vec(cv, read), dt_global.arg(read), t1.arg_vec(cv, inc)],
            )?,
            zero_t2: ParLoop::new(zero::KERNEL, verts, &[t2.arg(write)])?,
            assemble2: ParLoop::new(assemble2::KERNEL, cells, &[m.coords.arg_vec(cv, read), t2.arg_vec(cv, inc)])?,
            expr: ParLoop::new(expr::KERNEL, verts, &[t1.arg(read), t2.arg(read), p.arg(rw)])?,
            host: HostMesh::new(mesh),
            mesh: m,
            p,
            phi,
            dt,
            _dt: dt_global,
        })
    }

    /// One time step: the seed's seven loops.
    pub fn step(&mut self) -> Result<(), Error> {
        let rt = self.rt;
        rt.execute(&self.phi_expr)?;
        rt.execute(&self.zero_t1)?;
        rt.execute(&self.assemble1)?;
        rt.execute(&self.zero_t2)?;
        rt.execute(&self.assemble2)?;
        rt.execute(&self.expr)?;
        rt.execute(&self.phi_expr)
    }

    /// Runs `steps` steps, calling `after(step)` (1-based) after each.
    pub fn run(&mut self, steps: usize, mut after: impl FnMut(usize)) -> Result<(), Error> {
        for s in 1..=steps {
            self.step()?;
            after(s);
        }
        Ok(())
    }

    /// The loops in the order a step runs them (`phi_expr` twice).
    pub fn loops(&self) -> [&ParLoop; 7] {
        [&self.phi_expr, &self.zero_t1, &self.assemble1, &self.zero_t2, &self.assemble2, &self.expr, &self.phi_expr]
    }

    /// The energies of the current state, computed on the host (plain
    /// loops over the triangles, not the runtime's loops). In a
    /// distributed run the state is gathered on rank 0, which computes
    /// them (`None` on the other ranks); every rank must call it.
    pub fn energy(&self) -> Result<Option<Energy>, Error> {
        let (p, phi) = (crate::distributed::whole(&self.p)?, crate::distributed::whole(&self.phi)?);
        Ok(p.zip(phi).map(|(p, phi)| self.host.energy(&p, &phi, self.dt)))
    }
}

/// Bounds on the largest stable time step of a mesh (see [`unstable_dt`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StableDt {
    /// A step this small or smaller is stable.
    pub at_least: f64,
    /// A step this large or larger is unstable.
    pub below: f64,
}

/// Whether the leapfrog step with `dt` is unstable on `mesh` (a 2-D
/// triangle mesh), checked before stepping: the step is stable while `dt^2
/// lambda_max < 4`, `lambda_max` the largest eigenvalue of `M^-1 K` (`M`
/// the lumped mass, `K` the stiffness); above, the shortest modes grow
/// exponentially. `None` where `dt` is stable or too close to the limit
/// to tell; where it is shown unstable, bounds on the limit `2 /
/// sqrt(lambda_max)`.
///
/// Two bounds on `lambda_max`: from above, the largest `lambda_max(K_e,
/// M_e)` of a triangle (the Rayleigh quotient of the sums is at most the
/// largest of the triangles'), which accepts most steps at once; from
/// below, Rayleigh quotients of power iterations, which show the others
/// unstable. On `unit_square(n, n)` the limit is between `h / 1.5` and
/// about `h / 1.43` (`lambda_max` a little above `8 n^2`): only a `dt` in
/// that band may stay unproven either way (a run that grows is still
/// caught after it).
///
/// ```
/// use parloop_examples::wave::unstable_dt;
/// let mesh = parloop_mesh::unit_square(100, 100)?;
/// assert_eq!(unstable_dt(&mesh, 0.001), None);
/// let limit = unstable_dt(&mesh, 0.01).expect("unstable at dt = h");
/// assert!((limit.at_least - 0.01 / 1.5).abs() < 1e-12 && limit.below <= 0.01, "{limit:?}");
/// # Ok::<(), parloop::Error>(())
/// ```
pub fn unstable_dt(mesh: &Mesh, dt: f64) -> Option<StableDt> {
    let n = mesh.vertices();
    let mut lumped = vec![0.0; n];
    // The triangles' largest lambda_max(K_e, M_e): K_e (3 x 3, null
    // vector (1, 1, 1)) has the eigenvalues 0 and the roots of mu^2 - tr mu
    // + (sum of its 2 x 2 principal minors); M_e = |T| / 3 I.
    let mut upper = 0.0f64;
    for c in mesh.cells.chunks(3) {
        let k = element_stiffness(&mesh.coords, c);
        let tr = k[0][0] + k[1][1] + k[2][2];
        let minors = (0..3).map(|i| {
            let j = (i + 1) % 3;
            k[i][i] * k[j][j] - k[i][j] * k[i][j]
        });
        let mu = 0.5 * (tr + (tr * tr - 4.0 * minors.sum::<f64>()).max(0.0).sqrt());
        let third = twice_area(&mesh.coords, c) / 6.0;
        upper = upper.max(mu / third);
        for &v in c {
            lumped[v as usize] += third;
        }
    }
    if dt * dt * upper < 4.0 {
        return None;
    }
    // Power iterations on the symmetric M^-1/2 K M^-1/2 from a fixed
    // pseudo-random start: their Rayleigh quotients rise towards
    // lambda_max, each a lower bound of it.
    let scale: Vec<f64> = lumped.iter().map(|m| 1.0 / m.sqrt()).collect();
    let mut y: Vec<f64> = (0..n as u64)
        .map(|v| if v.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) & 1 == 0 { 1.0 } else { -1.0 })
        .collect();
    for _ in 0..100 {
        let x: Vec<f64> = y.iter().zip(&scale).map(|(y, s)| y * s).collect();
        let mut ky = vec![0.0; n];
        for c in mesh.cells.chunks(3) {
            let k = element_stiffness(&mesh.coords, c);
            for i in 0..3 {
                ky[c[i] as usize] += (0..3).map(|j| k[i][j] * x[c[j] as usize]).sum::<f64>();
            }
        }
        let ay: Vec<f64> = ky.iter().zip(&scale).map(|(k, s)| k * s).collect();
        let (yy, yay) = y.iter().zip(&ay).fold((0.0, 0.0), |(a, b), (y, ay)| (a + y * y, b + y * ay));
        let rayleigh = yay / yy;
        if dt * dt * rayleigh >= 4.0 {
            return Some(StableDt { at_least: 2.0 / upper.sqrt(), below: 2.0 / rayleigh.sqrt() });
        }
        let norm = ay.iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm == 0.0 || !norm.is_finite() {
            break;
        }
        y = ay.iter().map(|v| v / norm).collect();
    }
    None
}

/// The P1 stiffness matrix of triangle `c`: `K_ij = g_i . g_j / (2 a2)`,
/// `g_i` the edge opposite vertex `i` turned by 90 degrees (`a2 grad v_i`).
fn element_stiffness(coords: &[f64], c: &[u32]) -> [[f64; 3]; 3] {
    let a2 = twice_area(coords, c);
    let x = |k: usize, d: usize| coords[2 * c[k] as usize + d];
    let g: [[f64; 2]; 3] = std::array::from_fn(|i| {
        let (j, k) = ((i + 1) % 3, (i + 2) % 3);
        [x(j, 1) - x(k, 1), x(k, 0) - x(j, 0)]
    });
    std::array::from_fn(|i| std::array::from_fn(|j| (g[i][0] * g[j][0] + g[i][1] * g[j][1]) / (2.0 * a2)))
}

/// The mesh on the host, for the energy.
struct HostMesh {
    coords: Vec<f64>,
    cells: Vec<u32>,
    lumped: Vec<f64>,
}

impl HostMesh {
    fn new(mesh: &Mesh) -> HostMesh {
        let mut lumped = vec![0.0; mesh.vertices()];
        for c in mesh.cells.chunks(3) {
            let a = twice_area(&mesh.coords, c) / 6.0;
            for &v in c {
                lumped[v as usize] += a;
            }
        }
        HostMesh { coords: mesh.coords.clone(), cells: mesh.cells.clone(), lumped }
    }

    /// `K phi`, triangle by triangle.
    fn stiffness_action(&self, phi: &[f64]) -> Vec<f64> {
        let mut k_phi = vec![0.0; phi.len()];
        for c in self.cells.chunks(3) {
            let a2 = twice_area(&self.coords, c);
            let x = |k: usize, d: usize| self.coords[2 * c[k] as usize + d];
            let g: [[f64; 2]; 3] = std::array::from_fn(|i| {
                let (j, k) = ((i + 1) % 3, (i + 2) % 3);
                [x(j, 1) - x(k, 1), x(k, 0) - x(j, 0)]
            });
            let gp = (0..3).fold([0.0, 0.0], |s, j| {
                let f = phi[c[j] as usize];
                [s[0] + f * g[j][0], s[1] + f * g[j][1]]
            });
            for i in 0..3 {
                k_phi[c[i] as usize] += (g[i][0] * gp[0] + g[i][1] * gp[1]) / (2.0 * a2);
            }
        }
        k_phi
    }

    fn energy(&self, p: &[f64], phi: &[f64], dt: f64) -> Energy {
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        let kinetic: f64 = p.iter().zip(&self.lumped).map(|(p, m)| p * p * m).sum();
        let potential = dot(phi, &self.stiffness_action(phi));
        let plain = 0.5 * (kinetic + potential);
        Energy { plain, modified: plain - dt * dt / 8.0 * dot(p, &self.stiffness_action(p)) }
    }
}

fn twice_area(coords: &[f64], c: &[u32]) -> f64 {
    let x = |k: usize, d: usize| coords[2 * c[k] as usize + d];
    (x(1, 0) - x(0, 0)) * (x(2, 1) - x(0, 1)) - (x(2, 0) - x(0, 0)) * (x(1, 1) - x(0, 1))
}
