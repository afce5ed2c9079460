//! OP2's `aero` finite-element kernels, written as a new user would write
//! them in Rust: the element kernel `res_calc` (2x2 Gauss quadrature on
//! bilinear quadrilaterals, the shape-function derivative table and the
//! gas constants as module-level `#[parloop::device] const`s, the element
//! matrix `K` as a nested `&mut [[f64; 4]; 4]` parameter on a direct dat of
//! dim 16), `dirichlet`, `init_cg`, `spmv` (the element matrices applied
//! through the cell map) and `update`.
//!
//! They run on a small generated quadrilateral mesh on seq, threads and
//! the device (emu here, cuda where `PARLOOP_TEST_DEVICE=cuda`); seq is
//! compared with a plain-Rust reference written independently below (no
//! parloop: Jacobians inverted explicitly, shape-function derivatives from
//! their formulas), the other backends with seq.

#[path = "support/device.rs"]
mod device;

use parloop::{Access, Backend, Runtime};

// ---- The port: constants and kernels as a user writes them. ----

#[parloop::device]
const GAM: f64 = 1.4;
#[parloop::device]
const GM1: f64 = GAM - 1.0;
#[parloop::device]
const GM1I: f64 = 1.0 / GM1;
/// Free-stream Mach number squared.
#[parloop::device]
const M2: f64 = 0.16;
/// Gauss points of the 2-point rule on [0, 1].
#[parloop::device]
const G0: f64 = 0.211_324_865_405_187_13;
#[parloop::device]
const G1: f64 = 0.788_675_134_594_812_9;
#[parloop::device]
const WTG2: [f64; 4] = [0.25; 4];
/// The 2x2 Gauss points (xi, eta): `XI2[i]`, `ETA2[i]`.
#[parloop::device]
const XI2: [f64; 4] = [G0, G1, G0, G1];
#[parloop::device]
const ETA2: [f64; 4] = [G0, G0, G1, G1];
/// `NG2_XI[d][i][m]`: derivative along xi (`d = 0`) or eta (`d = 1`) of
/// node `m`'s bilinear shape function at Gauss point `i`; nodes (0,0),
/// (1,0), (0,1), (1,1).
#[parloop::device]
const NG2_XI: [[[f64; 4]; 4]; 2] = [
    [
        [-(1.0 - G0), 1.0 - G0, -G0, G0],
        [-(1.0 - G0), 1.0 - G0, -G0, G0],
        [-(1.0 - G1), 1.0 - G1, -G1, G1],
        [-(1.0 - G1), 1.0 - G1, -G1, G1],
    ],
    [
        [-(1.0 - G0), -G0, 1.0 - G0, G0],
        [-(1.0 - G1), -G1, 1.0 - G1, G1],
        [-(1.0 - G0), -G0, 1.0 - G0, G0],
        [-(1.0 - G1), -G1, 1.0 - G1, G1],
    ],
];

/// The bilinear shape functions at (xi, eta), filling `n`.
#[parloop::device]
fn shape(xi: f64, eta: f64, n: &mut [f64; 4]) {
    n[0] = (1.0 - xi) * (1.0 - eta);
    n[1] = xi * (1.0 - eta);
    n[2] = (1.0 - xi) * eta;
    n[3] = xi * eta;
}

/// The element residual and stiffness of the full-potential equation.
#[parloop::kernel]
fn res_calc(x: &[[f64; 2]; 4], phim: &[[f64; 1]; 4], k: &mut [[f64; 4]; 4], res: &mut [[f64; 1]; 4]) {
    *k = [[0.0; 4]; 4];
    for i in 0..4 {
        // Physical gradients of the shape functions: n_x[0] along x,
        // n_x[1] along y.
        let mut n_x = [[0.0f64; 4]; 2];
        let mut det_x_xi = 0.0;
        for m in 0..4 {
            det_x_xi += NG2_XI[1][i][m] * x[m][1];
        }
        for m in 0..4 {
            n_x[0][m] = det_x_xi * NG2_XI[0][i][m];
        }
        let mut a = 0.0;
        for m in 0..4 {
            a += NG2_XI[0][i][m] * x[m][0];
        }
        for m in 0..4 {
            n_x[1][m] = a * NG2_XI[1][i][m];
        }
        det_x_xi *= a;
        a = 0.0;
        for m in 0..4 {
            a += NG2_XI[0][i][m] * x[m][1];
        }
        for m in 0..4 {
            n_x[0][m] -= a * NG2_XI[1][i][m];
        }
        let mut b = 0.0;
        for m in 0..4 {
            b += NG2_XI[1][i][m] * x[m][0];
        }
        for m in 0..4 {
            n_x[1][m] -= b * NG2_XI[0][i][m];
        }
        det_x_xi -= a * b;
        for d in 0..2 {
            for m in 0..4 {
                n_x[d][m] /= det_x_xi;
            }
        }
        let wt1 = WTG2[i] * det_x_xi;
        let mut u = [0.0, 0.0];
        for j in 0..4 {
            u[0] += n_x[0][j] * phim[j][0];
            u[1] += n_x[1][j] * phim[j][0];
        }
        let dk = 1.0 + 0.5 * GM1 * (M2 - (u[0] * u[0] + u[1] * u[1]));
        let rho = dk.powf(GM1I);
        let rc2 = rho / dk;
        for j in 0..4 {
            res[j][0] += wt1 * rho * (u[0] * n_x[0][j] + u[1] * n_x[1][j]);
        }
        for j in 0..4 {
            for m in 0..4 {
                k[j][m] += wt1 * rho * (n_x[0][j] * n_x[0][m] + n_x[1][j] * n_x[1][m])
                    - wt1 * rc2 * (u[0] * n_x[0][j] + u[1] * n_x[1][j]) * (u[0] * n_x[0][m] + u[1] * n_x[1][m]);
            }
        }
    }
}

/// The potential interpolated at the element's Gauss points (exercises a
/// helper filling an array and a local table).
#[parloop::kernel]
fn gauss_values(phim: &[[f64; 1]; 4], g: &mut [f64; 4]) {
    for i in 0..4 {
        let mut n = [0.0; 4];
        shape(XI2[i], ETA2[i], &mut n);
        let mut v = 0.0;
        for m in 0..4 {
            v += n[m] * phim[m][0];
        }
        g[i] = v;
    }
}

#[parloop::kernel]
fn dirichlet(res: &mut f64) {
    *res = 0.0;
}

#[parloop::kernel]
fn init_cg(r: &f64, c: &mut f64, u: &mut f64, v: &mut f64, p: &mut f64) {
    *c += *r * *r;
    *p = *r;
    *u = 0.0;
    *v = 0.0;
}

/// `v += K p` through the cell map, one element matrix at a time.
#[parloop::kernel]
fn spmv(v: &mut [[f64; 1]; 4], k: &[[f64; 4]; 4], p: &[[f64; 1]; 4]) {
    for j in 0..4 {
        for m in 0..4 {
            v[j][0] += k[j][m] * p[m][0];
        }
    }
}

#[parloop::kernel]
fn update(phim: &mut f64, res: &mut f64, u: &f64, rms: &mut f64) {
    *phim -= *u;
    *res = 0.0;
    *rms += *u * *u;
}

// ---- The mesh. ----

/// An `n` x `n` grid of quadrilaterals on the unit square, nodes moved a
/// little so that no element is a parallelogram; cells list their nodes
/// (0,0), (1,0), (0,1), (1,1).
struct Mesh {
    nodes: usize,
    cells: usize,
    x: Vec<f64>,
    cell: Vec<i32>,
    bnode: Vec<i32>,
    phim: Vec<f64>,
    u: Vec<f64>,
}

fn mesh(n: usize) -> Mesh {
    let id = |i: usize, j: usize| (j * (n + 1) + i) as i32;
    let mut x = Vec::new();
    let mut phim = Vec::new();
    let mut u = Vec::new();
    for j in 0..=n {
        for i in 0..=n {
            let (s, t) = (i as f64 / n as f64, j as f64 / n as f64);
            let wobble = if i % n == 0 || j % n == 0 { 0.0 } else { 0.3 / n as f64 };
            x.push(s + wobble * (7.0 * t).sin());
            x.push(t + wobble * (5.0 * s).cos());
            phim.push(0.3 * s + 0.1 * (3.0 * t).sin());
            u.push(0.01 * ((i * 31 + j * 17) % 13) as f64);
        }
    }
    let mut cell = Vec::new();
    for j in 0..n {
        for i in 0..n {
            cell.extend([id(i, j), id(i + 1, j), id(i, j + 1), id(i + 1, j + 1)]);
        }
    }
    let bnode = (0..=n)
        .flat_map(|j| (0..=n).map(move |i| (i, j)))
        .filter(|&(i, j)| i == 0 || j == 0 || i == n || j == n)
        .map(|(i, j)| id(i, j))
        .collect();
    Mesh { nodes: (n + 1) * (n + 1), cells: n * n, x, cell, bnode, phim, u }
}

/// What a run produces.
#[derive(Debug)]
struct Outcome {
    k: Vec<f64>,
    res: Vec<f64>,
    g: Vec<f64>,
    c: f64,
    v: Vec<f64>,
    phim: Vec<f64>,
    rms: f64,
}

fn run(backend: Backend, m: &Mesh) -> Outcome {
    let rt = Runtime::with_backend(backend).unwrap();
    let nodes = rt.set("nodes", m.nodes).unwrap();
    let cells = rt.set("cells", m.cells).unwrap();
    let bnodes = rt.set("bnodes", m.bnode.len()).unwrap();
    let pcell = rt.map("pcell", &cells, &nodes, 4, m.cell.clone()).unwrap();
    let pbnode = rt.map("pbnode", &bnodes, &nodes, 1, m.bnode.clone()).unwrap();
    let x = rt.dat("x", &nodes, 2, m.x.clone()).unwrap();
    let phim = rt.dat("phim", &nodes, 1, m.phim.clone()).unwrap();
    let k = rt.dat("K", &cells, 16, vec![f64::NAN; 16 * m.cells]).unwrap();
    let res = rt.dat("res", &nodes, 1, vec![0.0; m.nodes]).unwrap();
    let g = rt.dat("g", &cells, 4, vec![0.0; 4 * m.cells]).unwrap();
    let u = rt.dat("u", &nodes, 1, m.u.clone()).unwrap();
    let v = rt.dat("v", &nodes, 1, vec![1.0; m.nodes]).unwrap();
    let p = rt.dat("p", &nodes, 1, vec![0.0; m.nodes]).unwrap();
    let c = rt.global("c", &[0.0f64]).unwrap();
    let rms = rt.global("rms", &[0.0f64]).unwrap();
    rt.par_loop(
        res_calc::KERNEL,
        &cells,
        &[
            x.arg_vec(&pcell, Access::READ),
            phim.arg_vec(&pcell, Access::READ),
            k.arg(Access::WRITE),
            res.arg_vec(&pcell, Access::INC),
        ],
    )
    .unwrap();
    rt.par_loop(gauss_values::KERNEL, &cells, &[phim.arg_vec(&pcell, Access::READ), g.arg(Access::WRITE)]).unwrap();
    rt.par_loop(dirichlet::KERNEL, &bnodes, &[res.arg_via(&pbnode, 0, Access::WRITE)]).unwrap();
    let r = res.values().unwrap();
    // init_cg reads r = res (a copy, so that res stays for the comparison).
    let r_dat = rt.dat("r", &nodes, 1, r).unwrap();
    rt.par_loop(
        init_cg::KERNEL,
        &nodes,
        &[
            r_dat.arg(Access::READ),
            c.arg(Access::INC),
            u.arg(Access::WRITE),
            v.arg(Access::WRITE),
            p.arg(Access::WRITE),
        ],
    )
    .unwrap();
    rt.par_loop(
        spmv::KERNEL,
        &cells,
        &[v.arg_vec(&pcell, Access::INC), k.arg(Access::READ), p.arg_vec(&pcell, Access::READ)],
    )
    .unwrap();
    rt.par_loop(
        update::KERNEL,
        &nodes,
        &[phim.arg(Access::RW), res.arg(Access::RW), v.arg(Access::READ), rms.arg(Access::INC)],
    )
    .unwrap();
    Outcome {
        k: k.values().unwrap(),
        res: r_dat.values().unwrap(),
        g: g.values().unwrap(),
        c: c.values().unwrap()[0],
        v: v.values().unwrap(),
        phim: phim.values().unwrap(),
        rms: rms.values().unwrap()[0],
    }
}

// ---- The reference: plain Rust, written independently. ----

fn reference(m: &Mesh) -> Outcome {
    let g = [G0, G1];
    let gauss = [(g[0], g[0]), (g[1], g[0]), (g[0], g[1]), (g[1], g[1])];
    let gm1 = 1.4 - 1.0;
    let (mut kk, mut res, mut gv) = (vec![0.0; 16 * m.cells], vec![0.0; m.nodes], vec![0.0; 4 * m.cells]);
    for e in 0..m.cells {
        let nodes: Vec<usize> = m.cell[4 * e..4 * e + 4].iter().map(|&n| n as usize).collect();
        for (q, &(xi, eta)) in gauss.iter().enumerate() {
            // dN/dxi, dN/deta from the formulas; nodes (0,0),(1,0),(0,1),(1,1).
            let dxi = [-(1.0 - eta), 1.0 - eta, -eta, eta];
            let deta = [-(1.0 - xi), -xi, 1.0 - xi, xi];
            let sh = [(1.0 - xi) * (1.0 - eta), xi * (1.0 - eta), (1.0 - xi) * eta, xi * eta];
            gv[4 * e + q] = (0..4).map(|a| sh[a] * m.phim[nodes[a]]).sum();
            // Jacobian J = d(x, y)/d(xi, eta), its inverse transposed.
            let (mut j11, mut j12, mut j21, mut j22) = (0.0, 0.0, 0.0, 0.0);
            for a in 0..4 {
                let (px, py) = (m.x[2 * nodes[a]], m.x[2 * nodes[a] + 1]);
                j11 += dxi[a] * px;
                j12 += deta[a] * px;
                j21 += dxi[a] * py;
                j22 += deta[a] * py;
            }
            let det = j11 * j22 - j12 * j21;
            let grad: Vec<(f64, f64)> =
                (0..4).map(|a| ((j22 * dxi[a] - j21 * deta[a]) / det, (j11 * deta[a] - j12 * dxi[a]) / det)).collect();
            let w = 0.25 * det;
            let (ux, uy) = (0..4)
                .fold((0.0, 0.0), |(ux, uy), a| (ux + grad[a].0 * m.phim[nodes[a]], uy + grad[a].1 * m.phim[nodes[a]]));
            let dk = 1.0 + 0.5 * gm1 * (0.16 - (ux * ux + uy * uy));
            let rho = dk.powf(1.0 / gm1);
            for a in 0..4 {
                let fa = ux * grad[a].0 + uy * grad[a].1;
                res[nodes[a]] += w * rho * fa;
                for b in 0..4 {
                    let fb = ux * grad[b].0 + uy * grad[b].1;
                    kk[16 * e + 4 * a + b] +=
                        w * rho * (grad[a].0 * grad[b].0 + grad[a].1 * grad[b].1) - w * rho / dk * fa * fb;
                }
            }
        }
    }
    for &b in &m.bnode {
        res[b as usize] = 0.0;
    }
    let c = res.iter().map(|r| r * r).sum();
    let mut v = vec![0.0; m.nodes];
    for e in 0..m.cells {
        for a in 0..4 {
            for b in 0..4 {
                v[m.cell[4 * e + a] as usize] += kk[16 * e + 4 * a + b] * res[m.cell[4 * e + b] as usize];
            }
        }
    }
    let phim: Vec<f64> = m.phim.iter().zip(&v).map(|(p, v)| p - v).collect();
    let rms = v.iter().map(|v| v * v).sum();
    Outcome { k: kk, res, g: gv, c, v, phim, rms }
}

fn close(what: &str, got: &[f64], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(0.0f64, |s, w| s.max(w.abs())).max(1e-300);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= rel * scale, "{what}[{i}]: {g} vs {w} (scale {scale})");
    }
}

fn compare(what: &str, got: &Outcome, want: &Outcome, rel: f64) {
    close(&format!("{what} K"), &got.k, &want.k, rel);
    close(&format!("{what} res"), &got.res, &want.res, rel);
    close(&format!("{what} g"), &got.g, &want.g, rel);
    close(&format!("{what} c"), &[got.c], &[want.c], rel);
    close(&format!("{what} v"), &got.v, &want.v, rel);
    close(&format!("{what} phim"), &got.phim, &want.phim, rel);
    close(&format!("{what} rms"), &[got.rms], &[want.rms], rel);
}

#[test]
fn aero_kernels_match_a_plain_rust_reference_on_every_backend() {
    let m = mesh(12);
    let want = reference(&m);
    // The residual is not trivially zero, the boundary is cleared, and the
    // element matrices are symmetric, as the full-potential Jacobian's are.
    assert!(want.res.iter().any(|r| r.abs() > 1e-6));
    let seq = run(Backend::Seq, &m);
    compare("seq vs reference", &seq, &want, 1e-12);
    for e in 0..m.cells {
        for a in 0..4 {
            for b in 0..4 {
                let (kab, kba) = (seq.k[16 * e + 4 * a + b], seq.k[16 * e + 4 * b + a]);
                assert!((kab - kba).abs() <= 1e-12 * kab.abs().max(1.0), "K of cell {e} not symmetric");
            }
        }
    }
    for backend in [Backend::Threads, device::device_backend()] {
        let got = run(backend, &m);
        // Element-wise results are the same arithmetic (bitwise on the
        // host, `pow` within an ulp or two on a GPU); increments and
        // reductions may be summed in another order.
        compare(&format!("{backend:?} vs seq"), &got, &seq, 1e-13);
    }
}

#[test]
fn the_element_kernel_runs_lane_wise_on_the_cpu() {
    // Float values never steer its control flow, so the CPU backends run
    // four or eight elements per call (bitwise the scalar results, checked
    // above on seq and threads with SIMD on where the CPU has AVX2).
    assert!(res_calc::KERNEL.has_lanes());
    assert!(spmv::KERNEL.has_lanes());
}
