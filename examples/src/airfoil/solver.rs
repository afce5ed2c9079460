//! The airfoil time loop on a parloop runtime.

use parloop::{Access, Dat, Error, Global, Map, Runtime, Set};

use super::grid::Grid;
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
        FlowConstants {
            qinf: [r, r * u, 0.0, r * e],
        }
    }
}

/// The solver's declarations: sets, maps, dats and globals on a runtime.
pub struct Airfoil<'rt> {
    rt: &'rt Runtime,
    /// Cells.
    pub cells: Set,
    /// Interior edges.
    pub edges: Set,
    /// Boundary edges.
    pub bedges: Set,
    pedge: Map,
    pecell: Map,
    pbedge: Map,
    pbecell: Map,
    pcell: Map,
    bound: Dat<i32>,
    x: Dat<f64>,
    /// Conserved variables per cell.
    pub q: Dat<f64>,
    qold: Dat<f64>,
    /// Local time step per cell.
    pub adt: Dat<f64>,
    /// Residual per cell.
    pub res: Dat<f64>,
    qinf: Global<f64>,
    rms: Global<f64>,
}

impl<'rt> Airfoil<'rt> {
    /// Declares the grid and the flow state (`q = qinf`, `res = 0`) on `rt`.
    pub fn new(rt: &'rt Runtime, grid: &Grid) -> Result<Airfoil<'rt>, Error> {
        let nodes = rt.set("nodes", grid.nnode());
        let edges = rt.set("edges", grid.nedge());
        let bedges = rt.set("bedges", grid.nbedge());
        let cells = rt.set("cells", grid.ncell());
        let pedge = rt.map("pedge", &edges, &nodes, 2, grid.edge.clone())?;
        let pecell = rt.map("pecell", &edges, &cells, 2, grid.ecell.clone())?;
        let pbedge = rt.map("pbedge", &bedges, &nodes, 2, grid.bedge.clone())?;
        let pbecell = rt.map("pbecell", &bedges, &cells, 1, grid.becell.clone())?;
        let pcell = rt.map("pcell", &cells, &nodes, 4, grid.cell.clone())?;
        let flow = FlowConstants::default();
        let ncell = grid.ncell();
        let q0: Vec<f64> = flow.qinf.iter().copied().cycle().take(4 * ncell).collect();
        Ok(Airfoil {
            rt,
            bound: rt.dat("p_bound", &bedges, 1, grid.bound.clone())?,
            x: rt.dat("p_x", &nodes, 2, grid.x.clone())?,
            q: rt.dat("p_q", &cells, 4, q0.clone())?,
            qold: rt.dat("p_qold", &cells, 4, q0)?,
            adt: rt.dat("p_adt", &cells, 1, vec![0.0; ncell])?,
            res: rt.dat("p_res", &cells, 4, vec![0.0; 4 * ncell])?,
            qinf: rt.global("qinf", &flow.qinf)?,
            rms: rt.global("rms", &[0.0])?,
            cells,
            edges,
            bedges,
            pedge,
            pecell,
            pbedge,
            pbecell,
            pcell,
        })
    }

    /// One time step (save_soln, then two predictor/corrector sweeps of
    /// adt_calc, res_calc, bres_calc, update); returns `sqrt(rms / ncell)`.
    pub fn step(&mut self) -> Result<f64, Error> {
        let rt = self.rt;
        rt.par_loop(
            save_soln::KERNEL,
            &self.cells,
            &[self.q.arg(Access::READ), self.qold.arg(Access::WRITE)],
        )?;
        for _ in 0..2 {
            rt.par_loop(
                adt_calc::KERNEL,
                &self.cells,
                &[
                    self.x.arg_vec(&self.pcell, Access::READ),
                    self.q.arg(Access::READ),
                    self.adt.arg(Access::WRITE),
                ],
            )?;
            rt.par_loop(
                res_calc::KERNEL,
                &self.edges,
                &[
                    self.x.arg_via(&self.pedge, 0, Access::READ),
                    self.x.arg_via(&self.pedge, 1, Access::READ),
                    self.q.arg_via(&self.pecell, 0, Access::READ),
                    self.q.arg_via(&self.pecell, 1, Access::READ),
                    self.adt.arg_via(&self.pecell, 0, Access::READ),
                    self.adt.arg_via(&self.pecell, 1, Access::READ),
                    self.res.arg_via(&self.pecell, 0, Access::INC),
                    self.res.arg_via(&self.pecell, 1, Access::INC),
                ],
            )?;
            rt.par_loop(
                bres_calc::KERNEL,
                &self.bedges,
                &[
                    self.x.arg_via(&self.pbedge, 0, Access::READ),
                    self.x.arg_via(&self.pbedge, 1, Access::READ),
                    self.q.arg_via(&self.pbecell, 0, Access::READ),
                    self.adt.arg_via(&self.pbecell, 0, Access::READ),
                    self.res.arg_via(&self.pbecell, 0, Access::INC),
                    self.bound.arg(Access::READ),
                    self.qinf.arg(Access::READ),
                ],
            )?;
            self.rms.set_values(&[0.0])?;
            rt.par_loop(
                update::KERNEL,
                &self.cells,
                &[
                    self.qold.arg(Access::READ),
                    self.q.arg(Access::WRITE),
                    self.res.arg(Access::RW),
                    self.adt.arg(Access::READ),
                    self.rms.arg(Access::INC),
                ],
            )?;
        }
        Ok((self.rms.value() / self.cells.size() as f64).sqrt())
    }

    /// Runs `iterations` steps, calling `report(iteration, rms)` after every
    /// step; returns the rms of every 100th iteration.
    pub fn run(
        &mut self,
        iterations: usize,
        mut report: impl FnMut(usize, f64),
    ) -> Result<Vec<(usize, f64)>, Error> {
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
}
