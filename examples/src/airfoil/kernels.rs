//! The five airfoil kernels, as in OP2's airfoil (double precision). Each is
//! an ordinary Rust function: `#[parloop::kernel]` keeps it for the CPU
//! backends, translates it to CUDA C++, and adds the descriptor `par_loop`
//! runs. The physical constants are `#[parloop::device]` helpers, so the
//! host and the device share one definition.

/// Ratio of specific heats (OP2 declares it as the float `1.4f`).
#[parloop::device]
pub fn gam() -> f64 {
    1.4f32 as f64
}

/// `gam - 1`.
#[parloop::device]
pub fn gm1() -> f64 {
    gam() - 1.0
}

/// CFL number.
#[parloop::device]
pub fn cfl() -> f64 {
    0.9f32 as f64
}

/// Artificial dissipation coefficient.
#[parloop::device]
pub fn eps() -> f64 {
    0.05f32 as f64
}

/// Free-stream Mach number (host only: it sets the free stream).
pub const MACH: f64 = 0.4f32 as f64;

/// `qold = q` (cells, direct).
#[parloop::kernel]
pub fn save_soln(q: &[f64; 4], qold: &mut [f64; 4]) {
    for n in 0..4 {
        qold[n] = q[n];
    }
}

/// Local time step of a cell from its four nodes (a vector argument) and
/// its flow state.
#[parloop::kernel]
pub fn adt_calc(x: &[[f64; 2]; 4], q: &[f64; 4], adt: &mut f64) {
    let ri = 1.0 / q[0];
    let u = ri * q[1];
    let v = ri * q[2];
    let c = (gam() * gm1() * (ri * q[3] - 0.5 * (u * u + v * v))).sqrt();
    *adt = 0.0;
    for k in 0..4 {
        let next = (k + 1) % 4;
        let dx = x[next][0] - x[k][0];
        let dy = x[next][1] - x[k][1];
        *adt += (u * dy - v * dx).abs() + c * (dx * dx + dy * dy).sqrt();
    }
    *adt /= cfl();
}

/// Flux across an interior edge, added to one cell and taken from the other.
#[parloop::kernel]
pub fn res_calc(
    x1: &[f64; 2],
    x2: &[f64; 2],
    q1: &[f64; 4],
    q2: &[f64; 4],
    adt1: &f64,
    adt2: &f64,
    res1: &mut [f64; 4],
    res2: &mut [f64; 4],
) {
    let dx = x1[0] - x2[0];
    let dy = x1[1] - x2[1];
    let ri = 1.0 / q1[0];
    let p1 = gm1() * (q1[3] - 0.5 * ri * (q1[1] * q1[1] + q1[2] * q1[2]));
    let vol1 = ri * (q1[1] * dy - q1[2] * dx);
    let ri = 1.0 / q2[0];
    let p2 = gm1() * (q2[3] - 0.5 * ri * (q2[1] * q2[1] + q2[2] * q2[2]));
    let vol2 = ri * (q2[1] * dy - q2[2] * dx);
    let mu = 0.5 * (*adt1 + *adt2) * eps();
    let f = 0.5 * (vol1 * q1[0] + vol2 * q2[0]) + mu * (q1[0] - q2[0]);
    res1[0] += f;
    res2[0] -= f;
    let f = 0.5 * (vol1 * q1[1] + p1 * dy + vol2 * q2[1] + p2 * dy) + mu * (q1[1] - q2[1]);
    res1[1] += f;
    res2[1] -= f;
    let f = 0.5 * (vol1 * q1[2] - p1 * dx + vol2 * q2[2] - p2 * dx) + mu * (q1[2] - q2[2]);
    res1[2] += f;
    res2[2] -= f;
    let f = 0.5 * (vol1 * (q1[3] + p1) + vol2 * (q2[3] + p2)) + mu * (q1[3] - q2[3]);
    res1[3] += f;
    res2[3] -= f;
}

/// Flux across a boundary edge: pressure on the wall (bound 1), or the
/// interior flux against the free stream `qinf` (far field).
#[parloop::kernel]
pub fn bres_calc(
    x1: &[f64; 2],
    x2: &[f64; 2],
    q1: &[f64; 4],
    adt1: &f64,
    res1: &mut [f64; 4],
    bound: &i32,
    qinf: &[f64; 4],
) {
    let dx = x1[0] - x2[0];
    let dy = x1[1] - x2[1];
    let ri = 1.0 / q1[0];
    let p1 = gm1() * (q1[3] - 0.5 * ri * (q1[1] * q1[1] + q1[2] * q1[2]));
    if *bound == 1 {
        res1[1] += p1 * dy;
        res1[2] += -p1 * dx;
    } else {
        let vol1 = ri * (q1[1] * dy - q1[2] * dx);
        let ri = 1.0 / qinf[0];
        let p2 = gm1() * (qinf[3] - 0.5 * ri * (qinf[1] * qinf[1] + qinf[2] * qinf[2]));
        let vol2 = ri * (qinf[1] * dy - qinf[2] * dx);
        let mu = *adt1 * eps();
        let f = 0.5 * (vol1 * q1[0] + vol2 * qinf[0]) + mu * (q1[0] - qinf[0]);
        res1[0] += f;
        let f = 0.5 * (vol1 * q1[1] + p1 * dy + vol2 * qinf[1] + p2 * dy) + mu * (q1[1] - qinf[1]);
        res1[1] += f;
        let f = 0.5 * (vol1 * q1[2] - p1 * dx + vol2 * qinf[2] - p2 * dx) + mu * (q1[2] - qinf[2]);
        res1[2] += f;
        let f = 0.5 * (vol1 * (q1[3] + p1) + vol2 * (qinf[3] + p2)) + mu * (q1[3] - qinf[3]);
        res1[3] += f;
    }
}

/// Explicit update of a cell; accumulates the squared change into `rms`.
#[parloop::kernel]
pub fn update(qold: &[f64; 4], q: &mut [f64; 4], res: &mut [f64; 4], adt: &f64, rms: &mut f64) {
    let adti = 1.0 / *adt;
    let mut rmsl = 0.0;
    for n in 0..4 {
        let del = adti * res[n];
        q[n] = qold[n] - del;
        res[n] = 0.0;
        rmsl += del * del;
    }
    *rms += rmsl;
}
