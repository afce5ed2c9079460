//! Random programs for the lazy trace's tests (`lazy.rs`, `lazy_speed.rs`;
//! `fusion.rs` uses the kernels): a random mesh (nodes, edges, an
//! edge-to-node map) with three node dats, three edge dats and three
//! globals, and operations on them (loops of every access mode, host reads
//! and writes) applied in one place, so that eager, lazy and replayed runs
//! of one program are compared on exactly the same calls.
#![allow(dead_code)]

use parloop::{Access, Dat, Global, Map, Runtime, Set};

#[parloop::kernel]
pub fn axpy(x: &f64, y: &mut f64) {
    *y = 0.5 * *y + *x + 1.0;
}

#[parloop::kernel]
pub fn square(x: &f64, y: &mut f64) {
    *y = *x * *x - 1.0;
}

#[parloop::kernel]
pub fn add(x: &f64, y: &mut f64) {
    *y += 0.375 * *x;
}

#[parloop::kernel]
pub fn spread(w: &f64, a: &mut f64, b: &mut f64) {
    *a += 0.25 * *w;
    *b += 0.75 * *w;
}

#[parloop::kernel]
pub fn difference(a: &f64, b: &f64, e: &mut f64) {
    *e = *a - 0.5 * *b;
}

#[parloop::kernel]
pub fn total(x: &f64, s: &mut f64) {
    *s += *x;
}

#[parloop::kernel]
pub fn largest(x: &f64, m: &mut f64) {
    if *x > *m {
        *m = *x;
    }
}

#[parloop::kernel]
pub fn scale(c: &f64, x: &mut f64) {
    *x = *x * *c + 0.125;
}

/// Values as bits, for bitwise comparisons.
pub fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// A random mesh: nodes, edges, an edge-to-node map.
#[derive(Clone, Debug)]
pub struct Mesh {
    pub nodes: usize,
    pub edges: usize,
    pub map: Vec<i32>,
}

/// One operation of a random program.
#[derive(Clone, Debug)]
pub enum Op {
    /// `axpy` (RW) or `square` (WRITE) from node dat `x` into node dat `y`.
    Nodes {
        square: bool,
        x: usize,
        y: usize,
    },
    /// The same on edge dats.
    Edges {
        square: bool,
        x: usize,
        y: usize,
    },
    /// Edge dat `w` INC into node dat `n` through both map columns.
    Spread {
        w: usize,
        n: usize,
    },
    /// Node dats READ through the map into edge dat `e` (WRITE).
    Difference {
        a: usize,
        b: usize,
        e: usize,
    },
    /// Global INC (`largest`: MAX) reduction of node dat `x`.
    Reduce {
        max: bool,
        x: usize,
    },
    /// Node dat `x` scaled by the READ global `c`.
    Scale {
        x: usize,
    },
    /// Host read of a node (edge) dat.
    ReadNodes(usize),
    ReadEdges(usize),
    /// Host read of the reduced globals.
    ReadGlobals,
    /// Host write of a node dat (`set_values`, or `with_values_mut`).
    WriteNodes {
        x: usize,
        value: f64,
        closure: bool,
    },
    /// Host write of the READ global.
    WriteConstant(f64),
    /// Host write of both reduced globals (the airfoil's reset of `rms`
    /// before the loop that sums into it).
    ResetReductions(f64),
}

impl Op {
    /// Whether the operation records a loop (a dat cannot be both READ and
    /// written: `x == y` is skipped).
    pub fn is_loop(&self) -> bool {
        match self {
            Op::Nodes { x, y, .. } | Op::Edges { x, y, .. } => x != y,
            Op::Spread { .. } | Op::Difference { .. } | Op::Reduce { .. } | Op::Scale { .. } => true,
            _ => false,
        }
    }
}

/// A program's data on one runtime.
pub struct Program {
    pub nodes: Set,
    pub edges: Set,
    pub e2n: Map,
    pub nd: Vec<Dat<f64>>,
    pub ed: Vec<Dat<f64>>,
    pub sum: Global<f64>,
    pub max: Global<f64>,
    pub c: Global<f64>,
    /// The number of nodes (the length of a node dat).
    pub node_count: usize,
}

impl Program {
    /// Declares the mesh and the data on `rt`.
    pub fn new(rt: &Runtime, m: &Mesh) -> Program {
        let nodes = rt.set("nodes", m.nodes).unwrap();
        let edges = rt.set("edges", m.edges).unwrap();
        let e2n = rt.map("e2n", &edges, &nodes, 2, m.map.clone()).unwrap();
        let nd = (0..3)
            .map(|k| {
                let values = (0..m.nodes).map(|i| (i * (k + 1)) as f64 * 0.1).collect();
                rt.dat(&format!("n{k}"), &nodes, 1, values).unwrap()
            })
            .collect();
        let ed = (0..3)
            .map(|k| {
                let values = (0..m.edges).map(|i| 1.0 - (i + k) as f64 * 0.01).collect();
                rt.dat(&format!("e{k}"), &edges, 1, values).unwrap()
            })
            .collect();
        let sum = rt.global("sum", &[0.0f64]).unwrap();
        let max = rt.global("max", &[f64::MIN]).unwrap();
        let c = rt.global("c", &[0.5f64]).unwrap();
        Program { nodes, edges, e2n, nd, ed, sum, max, c, node_count: m.nodes }
    }

    /// Applies `op`; a host read pushes what it saw (as bits) to `seen`.
    pub fn apply(&self, rt: &Runtime, op: &Op, seen: &mut Vec<Vec<u64>>) {
        let (r, w, rw, inc) = (Access::READ, Access::WRITE, Access::RW, Access::INC);
        let (nd, ed, e2n) = (&self.nd, &self.ed, &self.e2n);
        match *op {
            Op::Nodes { square: sq, x, y } | Op::Edges { square: sq, x, y } => {
                let (set, d) = if matches!(op, Op::Nodes { .. }) { (&self.nodes, nd) } else { (&self.edges, ed) };
                if x == y {
                    return;
                }
                let k = if sq { square::KERNEL } else { axpy::KERNEL };
                rt.par_loop(k, set, &[d[x].arg(r), d[y].arg(if sq { w } else { rw })]).unwrap();
            }
            Op::Spread { w: e, n } => rt
                .par_loop(
                    spread::KERNEL,
                    &self.edges,
                    &[ed[e].arg(r), nd[n].arg_via(e2n, 0, inc), nd[n].arg_via(e2n, 1, inc)],
                )
                .unwrap(),
            Op::Difference { a, b, e } => rt
                .par_loop(
                    difference::KERNEL,
                    &self.edges,
                    &[nd[a].arg_via(e2n, 0, r), nd[b].arg_via(e2n, 1, r), ed[e].arg(w)],
                )
                .unwrap(),
            Op::Reduce { max: true, x } => {
                rt.par_loop(largest::KERNEL, &self.nodes, &[nd[x].arg(r), self.max.arg(Access::MAX)]).unwrap()
            }
            Op::Reduce { max: false, x } => {
                rt.par_loop(total::KERNEL, &self.nodes, &[nd[x].arg(r), self.sum.arg(inc)]).unwrap()
            }
            Op::Scale { x } => rt.par_loop(scale::KERNEL, &self.nodes, &[self.c.arg(r), nd[x].arg(rw)]).unwrap(),
            Op::ReadNodes(x) => seen.push(bits(&nd[x].values().unwrap())),
            Op::ReadEdges(x) => seen.push(bits(&ed[x].values().unwrap())),
            Op::ReadGlobals => seen.push(bits(&[self.sum.value().unwrap(), self.max.value().unwrap()])),
            Op::WriteNodes { x, value, closure: false } => nd[x].set_values(&vec![value; self.node_count]).unwrap(),
            Op::WriteNodes { x, value, closure: true } => nd[x].with_values_mut(|v| v[0] = value).unwrap(),
            Op::WriteConstant(v) => self.c.set_values(&[v]).unwrap(),
            Op::ResetReductions(v) => {
                self.sum.set_values(&[v]).unwrap();
                self.max.set_values(&[v]).unwrap();
            }
        }
    }

    /// Reads every dat and the globals (as bits) into `seen`.
    pub fn read_all(&self, seen: &mut Vec<Vec<u64>>) {
        for d in self.nd.iter().chain(&self.ed) {
            seen.push(bits(&d.values().unwrap()));
        }
        seen.push(bits(&[self.sum.value().unwrap(), self.max.value().unwrap(), self.c.value().unwrap()]));
    }
}
