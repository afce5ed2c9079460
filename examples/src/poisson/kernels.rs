//! The Poisson demo's kernels: P1 finite elements on triangles (`_2d`) and
//! tetrahedra (`_3d`). Each is plain Rust; `#[parloop::kernel]` also makes
//! the CUDA version.
//!
//! Notation: on a cell with vertices `x_0 .. x_d`, `lambda_i` are the
//! barycentric coordinates, which are the P1 basis functions `phi_i`; their
//! gradients are constant on the cell. With the Jacobian `J = [x_1 - x_0,
//! .., x_d - x_0]`, `grad lambda_i` (i >= 1) is row `i - 1` of `J^-1` and
//! `grad lambda_0 = -sum of the others`; `|cell| = det J / d!`.
//!
//! The right-hand side, the function projected and the exact solution are
//! one family, [`Function`](super::Function): `c[0] prod_k sin(pi x_k) +
//! c[1] + c[2] |x|^2`, passed as a global of three coefficients.

/// pi, as a device constant so that host and device kernels share it.
#[parloop::device]
const PI: f64 = std::f64::consts::PI;

/// A degree-2 rule on the triangle: the barycentric points `(2/3, 1/6,
/// 1/6)` and its permutations, weight `1/3` each (of the area). Exact for the load `f phi_i` when `f` is linear: enough for
/// second-order convergence in L2.
#[parloop::device]
pub const TRI3: [[f64; 3]; 3] =
    [[2.0 / 3.0, 1.0 / 6.0, 1.0 / 6.0], [1.0 / 6.0, 2.0 / 3.0, 1.0 / 6.0], [1.0 / 6.0, 1.0 / 6.0, 2.0 / 3.0]];

/// Radon's 7-point rule on the triangle, exact for degree 5: barycentric
/// coordinates and the weight (summing to 1; times the area). For the
/// errors: the squared L2 error is of order `h^4`, and a degree-5 rule's
/// own error is of order `h^6` (tests/poisson.rs checks the exactness).
#[parloop::device]
pub const TRI7: [[f64; 4]; 7] = [
    [0.3333333333333333, 0.3333333333333333, 0.3333333333333333, 0.225],
    [0.10128650732345633, 0.10128650732345633, 0.7974269853530873, 0.12593918054482717],
    [0.7974269853530873, 0.10128650732345633, 0.10128650732345633, 0.12593918054482717],
    [0.10128650732345633, 0.7974269853530873, 0.10128650732345633, 0.12593918054482717],
    [0.47014206410511505, 0.47014206410511505, 0.05971587178976989, 0.13239415278850616],
    [0.05971587178976989, 0.47014206410511505, 0.47014206410511505, 0.13239415278850616],
    [0.47014206410511505, 0.05971587178976989, 0.47014206410511505, 0.13239415278850616],
];

/// The 4-point degree-2 rule on the tetrahedron: `a = (5 + 3 sqrt 5) / 20`
/// at one vertex, `b = (5 - sqrt 5) / 20` at the others, weight `1/4` each.
#[parloop::device]
pub const TET4: [[f64; 4]; 4] = [
    [0.5854101966249685, 0.1381966011250105, 0.1381966011250105, 0.1381966011250105],
    [0.1381966011250105, 0.5854101966249685, 0.1381966011250105, 0.1381966011250105],
    [0.1381966011250105, 0.1381966011250105, 0.5854101966249685, 0.1381966011250105],
    [0.1381966011250105, 0.1381966011250105, 0.1381966011250105, 0.5854101966249685],
];

/// A 14-point rule on the tetrahedron exact for degree 5 (Walkington;
/// Keast's table): two orbits of 4 points `(a, a, a, 1 - 3a)`, one of 6
/// points `(a, a, 1/2 - a, 1/2 - a)`; barycentric coordinates and the
/// weight (summing to 1; times the volume).
#[parloop::device]
pub const TET14: [[f64; 5]; 14] = [
    [0.3108859192633006, 0.3108859192633006, 0.3108859192633006, 0.06734224221009821, 0.11268792571801585],
    [0.3108859192633006, 0.3108859192633006, 0.06734224221009821, 0.3108859192633006, 0.11268792571801585],
    [0.3108859192633006, 0.06734224221009821, 0.3108859192633006, 0.3108859192633006, 0.11268792571801585],
    [0.06734224221009821, 0.3108859192633006, 0.3108859192633006, 0.3108859192633006, 0.11268792571801585],
    [0.09273525031089122, 0.09273525031089122, 0.09273525031089122, 0.7217942490673264, 0.07349304311636196],
    [0.09273525031089122, 0.09273525031089122, 0.7217942490673264, 0.09273525031089122, 0.07349304311636196],
    [0.09273525031089122, 0.7217942490673264, 0.09273525031089122, 0.09273525031089122, 0.07349304311636196],
    [0.7217942490673264, 0.09273525031089122, 0.09273525031089122, 0.09273525031089122, 0.07349304311636196],
    [0.04550370412564965, 0.04550370412564965, 0.45449629587435036, 0.45449629587435036, 0.042546020777081466],
    [0.04550370412564965, 0.45449629587435036, 0.04550370412564965, 0.45449629587435036, 0.042546020777081466],
    [0.04550370412564965, 0.45449629587435036, 0.45449629587435036, 0.04550370412564965, 0.042546020777081466],
    [0.45449629587435036, 0.04550370412564965, 0.04550370412564965, 0.45449629587435036, 0.042546020777081466],
    [0.45449629587435036, 0.04550370412564965, 0.45449629587435036, 0.04550370412564965, 0.042546020777081466],
    [0.45449629587435036, 0.45449629587435036, 0.04550370412564965, 0.04550370412564965, 0.042546020777081466],
];

/// `c[0] sin(pi x) sin(pi y) + c[1] + c[2] (x^2 + y^2)`.
#[parloop::device]
fn value_2d(c: &[f64; 3], x: f64, y: f64) -> f64 {
    c[0] * (PI * x).sin() * (PI * y).sin() + c[1] + c[2] * (x * x + y * y)
}

/// `c[0] sin(pi x) sin(pi y) sin(pi z) + c[1] + c[2] |x|^2`.
#[parloop::device]
fn value_3d(c: &[f64; 3], x: f64, y: f64, z: f64) -> f64 {
    c[0] * (PI * x).sin() * (PI * y).sin() * (PI * z).sin() + c[1] + c[2] * (x * x + y * y + z * z)
}

/// `grad lambda_i` of a triangle into `g`; returns `det J` (twice the
/// area, positive for the counter-clockwise cells meshes hold).
#[parloop::device]
fn gradients_2d(x: &[[f64; 2]; 3], g: &mut [[f64; 2]; 3]) -> f64 {
    let j00 = x[1][0] - x[0][0];
    let j10 = x[1][1] - x[0][1];
    let j01 = x[2][0] - x[0][0];
    let j11 = x[2][1] - x[0][1];
    let det = j00 * j11 - j01 * j10;
    // Rows of J^-1 = [[j11, -j01], [-j10, j00]] / det.
    g[1] = [j11 / det, -j01 / det];
    g[2] = [-j10 / det, j00 / det];
    g[0] = [-g[1][0] - g[2][0], -g[1][1] - g[2][1]];
    det
}

/// `grad lambda_i` of a tetrahedron into `g`; returns `det J` (six times
/// the volume). The rows of `J^-1` are the cross products of the other
/// two edges over `det J`.
#[parloop::device]
fn gradients_3d(x: &[[f64; 3]; 4], g: &mut [[f64; 3]; 4]) -> f64 {
    let mut e = [[0.0; 3]; 3];
    for k in 0..3 {
        for c in 0..3 {
            e[k][c] = x[k + 1][c] - x[0][c];
        }
    }
    let mut det = 0.0;
    for k in 0..3 {
        // (e_{k+1} x e_{k+2}) . e_m = det when m = k, 0 otherwise.
        let a = (k + 1) % 3;
        let b = (k + 2) % 3;
        let n = [
            e[a][1] * e[b][2] - e[a][2] * e[b][1],
            e[a][2] * e[b][0] - e[a][0] * e[b][2],
            e[a][0] * e[b][1] - e[a][1] * e[b][0],
        ];
        if k == 0 {
            det = n[0] * e[0][0] + n[1] * e[0][1] + n[2] * e[0][2];
        }
        g[k + 1] = n;
    }
    for c in 0..3 {
        for k in 1..4 {
            g[k][c] /= det;
        }
        g[0][c] = -g[1][c] - g[2][c] - g[3][c];
    }
    det
}

/// The element stiffness matrix on a triangle: `K_ij = |T| grad lambda_i .
/// grad lambda_j` (the integral of `grad phi_i . grad phi_j`, constant
/// integrand).
#[parloop::kernel]
pub fn stiffness_2d(x: &[[f64; 2]; 3], a: &mut [[f64; 3]; 3]) {
    let mut g = [[0.0; 2]; 3];
    let area = 0.5 * gradients_2d(x, &mut g);
    for i in 0..3 {
        for j in 0..3 {
            a[i][j] += area * (g[i][0] * g[j][0] + g[i][1] * g[j][1]);
        }
    }
}

/// The element stiffness matrix on a tetrahedron: `K_ij = |T| grad
/// lambda_i . grad lambda_j`.
#[parloop::kernel]
pub fn stiffness_3d(x: &[[f64; 3]; 4], a: &mut [[f64; 4]; 4]) {
    let mut g = [[0.0; 3]; 4];
    let volume = gradients_3d(x, &mut g) / 6.0;
    for i in 0..4 {
        for j in 0..4 {
            a[i][j] += volume * (g[i][0] * g[j][0] + g[i][1] * g[j][1] + g[i][2] * g[j][2]);
        }
    }
}

/// The element mass matrix on a triangle, exactly: `M_ij = integral of
/// lambda_i lambda_j = |T| (1 + delta_ij) / 12`.
#[parloop::kernel]
pub fn mass_2d(x: &[[f64; 2]; 3], a: &mut [[f64; 3]; 3]) {
    let mut g = [[0.0; 2]; 3];
    let area = 0.5 * gradients_2d(x, &mut g);
    for i in 0..3 {
        for j in 0..3 {
            a[i][j] += if i == j { area / 6.0 } else { area / 12.0 };
        }
    }
}

/// The element mass matrix on a tetrahedron, exactly: `M_ij = |T| (1 +
/// delta_ij) / 20`.
#[parloop::kernel]
pub fn mass_3d(x: &[[f64; 3]; 4], a: &mut [[f64; 4]; 4]) {
    let mut g = [[0.0; 3]; 4];
    let volume = gradients_3d(x, &mut g) / 6.0;
    for i in 0..4 {
        for j in 0..4 {
            a[i][j] += if i == j { volume / 10.0 } else { volume / 20.0 };
        }
    }
}

/// The element load vector on a triangle: `b_i += integral of f lambda_i`
/// by [`TRI3`] (degree 2), `f` given by the coefficients `c`.
#[parloop::kernel]
pub fn load_2d(x: &[[f64; 2]; 3], c: &[f64; 3], b: &mut [[f64; 1]; 3]) {
    let mut g = [[0.0; 2]; 3];
    let area = 0.5 * gradients_2d(x, &mut g);
    for q in 0..3 {
        let px = TRI3[q][0] * x[0][0] + TRI3[q][1] * x[1][0] + TRI3[q][2] * x[2][0];
        let py = TRI3[q][0] * x[0][1] + TRI3[q][1] * x[1][1] + TRI3[q][2] * x[2][1];
        let f = value_2d(c, px, py) * area / 3.0;
        for i in 0..3 {
            b[i][0] += f * TRI3[q][i];
        }
    }
}

/// The element load vector on a tetrahedron: `b_i += integral of f
/// lambda_i` by [`TET4`] (degree 2).
#[parloop::kernel]
pub fn load_3d(x: &[[f64; 3]; 4], c: &[f64; 3], b: &mut [[f64; 1]; 4]) {
    let mut g = [[0.0; 3]; 4];
    let volume = gradients_3d(x, &mut g) / 6.0;
    for q in 0..4 {
        let mut p = [0.0; 3];
        for k in 0..4 {
            for d in 0..3 {
                p[d] += TET4[q][k] * x[k][d];
            }
        }
        let f = value_3d(c, p[0], p[1], p[2]) * volume / 4.0;
        for i in 0..4 {
            b[i][0] += f * TET4[q][i];
        }
    }
}

/// `u = g(x)` at a vertex of a triangle mesh, `g` given by the coefficients
/// `c`: the Dirichlet values, in the load vector's Dirichlet rows and in
/// CG's start (loops over the boundary subset).
#[parloop::kernel]
pub fn boundary_value_2d(x: &[f64; 2], c: &[f64; 3], u: &mut f64) {
    *u = value_2d(c, x[0], x[1]);
}

/// `u = g(x)` at a vertex of a tetrahedron mesh (see [`boundary_value_2d()`]).
#[parloop::kernel]
pub fn boundary_value_3d(x: &[f64; 3], c: &[f64; 3], u: &mut f64) {
    *u = value_3d(c, x[0], x[1], x[2]);
}

/// Adds a triangle's squared errors of `u_h` (P1, the vertex values `u`)
/// against the function `c`: `err[0] += integral of (u_h - u)^2`, `err[1]
/// += integral of |grad u_h - grad u|^2`, by [`TRI7`] (degree 5).
#[parloop::kernel]
pub fn errors_2d(x: &[[f64; 2]; 3], u: &[[f64; 1]; 3], c: &[f64; 3], err: &mut [f64; 2]) {
    let mut g = [[0.0; 2]; 3];
    let area = 0.5 * gradients_2d(x, &mut g);
    // grad u_h: constant on the cell.
    let mut gh = [0.0; 2];
    for i in 0..3 {
        for d in 0..2 {
            gh[d] += u[i][0] * g[i][d];
        }
    }
    for q in 0..7 {
        let px = TRI7[q][0] * x[0][0] + TRI7[q][1] * x[1][0] + TRI7[q][2] * x[2][0];
        let py = TRI7[q][0] * x[0][1] + TRI7[q][1] * x[1][1] + TRI7[q][2] * x[2][1];
        let uh = TRI7[q][0] * u[0][0] + TRI7[q][1] * u[1][0] + TRI7[q][2] * u[2][0];
        let sx = (PI * px).sin();
        let cx = (PI * px).cos();
        let sy = (PI * py).sin();
        let cy = (PI * py).cos();
        let e = uh - value_2d(c, px, py);
        let ex = gh[0] - (c[0] * PI * cx * sy + 2.0 * c[2] * px);
        let ey = gh[1] - (c[0] * PI * sx * cy + 2.0 * c[2] * py);
        let w = TRI7[q][3] * area;
        err[0] += w * e * e;
        err[1] += w * (ex * ex + ey * ey);
    }
}

/// Adds a tetrahedron's squared errors (see [`errors_2d()`]) by [`TET14`]
/// (degree 5).
#[parloop::kernel]
pub fn errors_3d(x: &[[f64; 3]; 4], u: &[[f64; 1]; 4], c: &[f64; 3], err: &mut [f64; 2]) {
    let mut g = [[0.0; 3]; 4];
    let volume = gradients_3d(x, &mut g) / 6.0;
    let mut gh = [0.0; 3];
    for i in 0..4 {
        for d in 0..3 {
            gh[d] += u[i][0] * g[i][d];
        }
    }
    for q in 0..14 {
        let mut p = [0.0; 3];
        let mut uh = 0.0;
        for k in 0..4 {
            for d in 0..3 {
                p[d] += TET14[q][k] * x[k][d];
            }
            uh += TET14[q][k] * u[k][0];
        }
        let s = [(PI * p[0]).sin(), (PI * p[1]).sin(), (PI * p[2]).sin()];
        let co = [(PI * p[0]).cos(), (PI * p[1]).cos(), (PI * p[2]).cos()];
        let e = uh - value_3d(c, p[0], p[1], p[2]);
        // d/dx_d of prod sin(pi x_k): the cosine in place of the d-th sine.
        let grad = [
            c[0] * PI * co[0] * s[1] * s[2] + 2.0 * c[2] * p[0],
            c[0] * PI * s[0] * co[1] * s[2] + 2.0 * c[2] * p[1],
            c[0] * PI * s[0] * s[1] * co[2] + 2.0 * c[2] * p[2],
        ];
        let mut eg = 0.0;
        for d in 0..3 {
            eg += (gh[d] - grad[d]) * (gh[d] - grad[d]);
        }
        let w = TET14[q][4] * volume;
        err[0] += w * e * e;
        err[1] += w * eg;
    }
}
