//! The wave demo's kernels: P1 finite elements on triangles. Each is plain
//! Rust; `#[parloop::kernel]` also makes the CUDA version.

/// `phi -= dt/2 p` at a vertex (direct; an increment, as in the seed).
#[parloop::kernel]
pub fn phi_expr(p: &f64, dt: &f64, phi: &mut f64) {
    *phi -= *dt / 2.0 * *p;
}

/// `t = 0` at a vertex (direct).
#[parloop::kernel]
pub fn zero(t: &mut f64) {
    *t = 0.0;
}

/// `t1 += dt K phi` on one triangle: with the P1 basis functions v_i,
/// `K_ij = integral of grad v_i . grad v_j`. On a triangle with vertices
/// x_0, x_1, x_2 and twice-area `a2 = (x_1 - x_0) x (x_2 - x_0)`, the
/// gradients are constant, `grad v_i = perp(x_{i+2} - x_{i+1}) / a2` with
/// `perp(x, y) = (-y, x)`; so, with `g = sum_j phi_j grad v_j` (the
/// gradient of phi), vertex i gets `dt (a2 / 2) grad v_i . g`.
#[parloop::kernel]
pub fn assemble1(x: &[[f64; 2]; 3], phi: &[[f64; 1]; 3], dt: &f64, t1: &mut [[f64; 1]; 3]) {
    let a2 = (x[1][0] - x[0][0]) * (x[2][1] - x[0][1]) - (x[2][0] - x[0][0]) * (x[1][1] - x[0][1]);
    // a2 * grad v_i, for each vertex i: the opposite edge turned by +90 degrees.
    let gx = [x[1][1] - x[2][1], x[2][1] - x[0][1], x[0][1] - x[1][1]];
    let gy = [x[2][0] - x[1][0], x[0][0] - x[2][0], x[1][0] - x[0][0]];
    // a2 * grad phi.
    let mut px = 0.0;
    let mut py = 0.0;
    for j in 0..3 {
        px += phi[j][0] * gx[j];
        py += phi[j][0] * gy[j];
    }
    // (a2 / 2) (gx_i px + gy_i py) / a2^2.
    let scale = *dt / (2.0 * a2);
    for i in 0..3 {
        t1[i][0] += scale * (gx[i] * px + gy[i] * py);
    }
}

/// `t2 += M_lumped` on one triangle: `integral of v_i = area / 3` per
/// vertex (the row sums of the P1 mass matrix).
#[parloop::kernel]
pub fn assemble2(x: &[[f64; 2]; 3], t2: &mut [[f64; 1]; 3]) {
    let a2 = (x[1][0] - x[0][0]) * (x[2][1] - x[0][1]) - (x[2][0] - x[0][0]) * (x[1][1] - x[0][1]);
    for i in 0..3 {
        t2[i][0] += a2 / 6.0;
    }
}

/// `p += t1 / t2` at a vertex (direct): the explicit update with the
/// lumped mass matrix's inverse.
#[parloop::kernel]
pub fn expr(t1: &f64, t2: &f64, p: &mut f64) {
    *p += *t1 / *t2;
}
