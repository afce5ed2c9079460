//! The airfoil time loop on a parloop runtime.

use parloop::{Access, Dat, Error, Global, Map, ParLoop, Runtime, Set};

use super::grid::{Counts, Grid};
use super::kernels::{adt_calc, bres_calc, gam, gm1, res_calc, save_soln, update, MACH};

/// The free stream: `qinf = [r, r u, 0, r e]` with `p = r = 1`,
/// `u = sqrt(gam p / r) mach`, `e = p / (r gm1) + u^2 / 2`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowConstants {
    /// Conserved variables of the free stream.
    pub qinf: [f64; 4],
}

impl Default for FlowConstants {
    fn default() -> Self {
        let (p, r) = (1.0f64, 1.0f64);
        let u = (gam() * p / r).sqrt() * MACH;
        let e = p / (r * gm1()) + 0.5 * u * u;
        FlowConstants { qinf: [r, r * u, 0.0, r * e] }
    }
}

/// The solver's declarations (sets, maps, dats and globals on a runtime)
/// and its five loops, validated once.
pub struct Airfoil<'rt> {
    rt: &'rt Runtime,
    /// Cells.
    pub cells: Set,
    /// Edge to its two cells (the graph partitioners cut).
    pub pecell: Map,
    /// Node coordinates.
    pub x: Dat<f64>,
    /// Conserved variables per cell.
    pub q: Dat<f64>,
    /// Local time step per cell.
    pub adt: Dat<f64>,
    /// Residual per cell.
    pub res: Dat<f64>,
    rms: Global<f64>,
    save_soln: ParLoop,
    adt_calc: ParLoop,
    res_calc: ParLoop,
    bres_calc: ParLoop,
    update: ParLoop,
}

impl<'rt> Airfoil<'rt> {
    /// Declares the grid and the flow state (`q = qinf`, `res = 0`) on `rt`.
    pub fn new(rt: &'rt Runtime, grid: &Grid) -> Result<Airfoil<'rt>, Error> {
        let nodes = rt.set("nodes", grid.nnode())?;
        let edges = rt.set("edges", grid.nedge())?;
        let bedges = rt.set("bedges", grid.nbedge())?;
        let cells = rt.set("cells", grid.ncell())?;
        let pedge = rt.map("pedge", &edges, &nodes, 2, grid.edge.clone())?;
        let pecell = rt.map("pecell", &edges, &cells, 2, grid.ecell.clone())?;
        let pbedge = rt.map("pbedge", &bedges, &nodes, 2, grid.bedge.clone())?;
        let pbecell = rt.map("pbecell", &bedges, &cells, 1, grid.becell.clone())?;
        let pcell = rt.map("pcell", &cells, &nodes, 4, grid.cell.clone())?;
        let flow = FlowConstants::default();
        let ncell = grid.ncell();
        let q0: Vec<f64> = flow.qinf.iter().copied().cycle().take(4 * ncell).collect();
        let bound = rt.dat("p_bound", &bedges, 1, grid.bound.clone())?;
        let x = rt.dat("p_x", &nodes, 2, grid.x.clone())?;
        let q = rt.dat("p_q", &cells, 4, q0.clone())?;
        let qold = rt.dat("p_qold", &cells, 4, q0)?;
        let adt = rt.dat("p_adt", &cells, 1, vec![0.0; ncell])?;
        let res = rt.dat("p_res", &cells, 4, vec![0.0; 4 * ncell])?;
        let qinf = rt.global("qinf", &flow.qinf)?;
        let rms = rt.global("rms", &[0.0])?;
        let (read, write, rw, inc) = (Access::READ, Access::WRITE, Access::RW, Access::INC);
        Ok(Airfoil {
            rt,
            save_soln: ParLoop::new(save_soln::KERNEL, &cells, &[q.arg(read), qold.arg(write)])?,
            adt_calc: ParLoop::new(adt_calc::KERNEL, &cells, &[x.arg_vec(&pcell, read), q.arg(read), adt.arg(write)])?,
            res_calc: ParLoop::new(
                res_calc::KERNEL,
                &edges,
                &[
                    x.arg_via(&pedge, 0, read),
                    x.arg_via(&pedge, 1, read),
                    q.arg_via(&pecell, 0, read),
                    q.arg_via(&pecell, 1, read),
                    adt.arg_via(&pecell, 0, read),
                    adt.arg_via(&pecell, 1, read),
                    res.arg_via(&pecell, 0, inc),
                    res.arg_via(&pecell, 1, inc),
                ],
            )?,
            bres_calc: ParLoop::new(
                bres_calc::KERNEL,
                &bedges,
                &[
                    x.arg_via(&pbedge, 0, read),
                    x.arg_via(&pbedge, 1, read),
                    q.arg_via(&pbecell, 0, read),
                    adt.arg_via(&pbecell, 0, read),
                    res.arg_via(&pbecell, 0, inc),
                    bound.arg(read),
                    qinf.arg(read),
                ],
            )?,
            update: ParLoop::new(
                update::KERNEL,
                &cells,
                &[qold.arg(read), q.arg(write), res.arg(rw), adt.arg(read), rms.arg(inc)],
            )?,
            cells,
            pecell,
            x,
            q,
            adt,
            res,
            rms,
        })
    }

    /// The five loops, in the order a step first runs them.
    pub fn loops(&self) -> [&ParLoop; 5] {
        [&self.save_soln, &self.adt_calc, &self.res_calc, &self.bres_calc, &self.update]
    }

    /// One time step (save_soln, then two predictor/corrector sweeps of
    /// adt_calc, res_calc, bres_calc, update); returns `sqrt(rms / ncell)`.
    pub fn step(&mut self) -> Result<f64, Error> {
        let rt = self.rt;
        rt.execute(&self.save_soln)?;
        for _ in 0..2 {
            rt.execute(&self.adt_calc)?;
            rt.execute(&self.res_calc)?;
            rt.execute(&self.bres_calc)?;
            self.rms.set_values(&[0.0])?;
            rt.execute(&self.update)?;
        }
        // Cells of the whole grid, on every rank of a distributed run.
        let cells = self.cells.global_size();
        if cells == 0 {
            // 0 / 0 would read as a divergence.
            return Err(Error::Incompatible {
                op: "airfoil step".into(),
                reason: "the grid has no cells, and the residual is a mean over cells".into(),
            });
        }
        Ok((self.rms.value()? / cells as f64).sqrt())
    }

    /// Runs `iterations` steps, calling `report(iteration, rms)` after every
    /// step; returns the rms of every 100th iteration. It does not look at
    /// the rms: [`Airfoil::run_checked`] stops when it is not finite.
    pub fn run(&mut self, iterations: usize, mut report: impl FnMut(usize, f64)) -> Result<Vec<(usize, f64)>, Error> {
        let mut every_100 = Vec::new();
        for iter in 1..=iterations {
            let rms = self.step()?;
            report(iter, rms);
            if iter % 100 == 0 {
                every_100.push((iter, rms));
            }
        }
        Ok(every_100)
    }

    /// [`Airfoil::run`], stopping with [`RunError::Diverged`] after the
    /// first step whose rms (computed every step) is NaN or infinite;
    /// `report` is called for every step, that one included.
    pub fn run_checked(
        &mut self,
        iterations: usize,
        mut report: impl FnMut(usize, f64),
    ) -> Result<Vec<(usize, f64)>, RunError> {
        let mut every_100 = Vec::new();
        for iteration in 1..=iterations {
            let rms = self.step()?;
            report(iteration, rms);
            if !rms.is_finite() {
                return Err(RunError::Diverged { iteration, rms });
            }
            if iteration % 100 == 0 {
                every_100.push((iteration, rms));
            }
        }
        Ok(every_100)
    }

    /// Bytes the solver's declarations take on the runtime for a grid of
    /// these counts (a copy of the grid's maps and coordinates, four dats
    /// per cell, plans), an estimate to refuse a grid before allocating;
    /// `None` when it overflows `usize`.
    pub fn estimated_bytes(counts: &Counts) -> Option<usize> {
        // q, qold, res: 4 f64 per cell; adt: 1.
        let dats = counts.ncell.checked_mul(13 * 8)?;
        // Plans and staging maps, generously: 32 bytes per edge.
        let plans = counts.nedge.checked_add(counts.nbedge)?.checked_mul(32)?;
        counts.grid_bytes()?.checked_add(dats)?.checked_add(plans)
    }
}

/// Why [`Airfoil::run_checked`] stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunError {
    /// A parloop call failed.
    Parloop(Error),
    /// The rms of a step is NaN or infinite: the flow diverged.
    Diverged {
        /// The step (1-based).
        iteration: usize,
        /// Its rms.
        rms: f64,
    },
}

impl From<Error> for RunError {
    fn from(e: Error) -> RunError {
        RunError::Parloop(e)
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Parloop(e) => e.fmt(f),
            RunError::Diverged { iteration, rms } => write!(f, "diverged at iteration {iteration} (rms is {rms})"),
        }
    }
}

impl std::error::Error for RunError {
    // Transparent: the message is the runtime error's own.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Parloop(e) => e.source(),
            RunError::Diverged { .. } => None,
        }
    }
}
