//! The P1 Laplacian on the unit cube, shared by the assembly timing
//! example (`runtime/examples/assembly_timing.rs`) and the assembly bench
//! (`benches/benches/assembly.rs`, which includes this file by path).

/// The P1 stiffness matrix of a tetrahedron: vol * grad(phi_i) . grad(phi_j).
#[parloop::kernel]
pub fn laplace(x: &[[f64; 3]; 4], a: &mut [[f64; 4]; 4]) {
    let ax = x[1][0] - x[0][0];
    let ay = x[1][1] - x[0][1];
    let az = x[1][2] - x[0][2];
    let bx = x[2][0] - x[0][0];
    let by = x[2][1] - x[0][1];
    let bz = x[2][2] - x[0][2];
    let cx = x[3][0] - x[0][0];
    let cy = x[3][1] - x[0][1];
    let cz = x[3][2] - x[0][2];
    // Rows of the inverse Jacobian (times det): b x c, c x a, a x b.
    let mut gx = [0.0; 4];
    let mut gy = [0.0; 4];
    let mut gz = [0.0; 4];
    gx[1] = by * cz - bz * cy;
    gy[1] = bz * cx - bx * cz;
    gz[1] = bx * cy - by * cx;
    gx[2] = cy * az - cz * ay;
    gy[2] = cz * ax - cx * az;
    gz[2] = cx * ay - cy * ax;
    gx[3] = ay * bz - az * by;
    gy[3] = az * bx - ax * bz;
    gz[3] = ax * by - ay * bx;
    gx[0] = -(gx[1] + gx[2] + gx[3]);
    gy[0] = -(gy[1] + gy[2] + gy[3]);
    gz[0] = -(gz[1] + gz[2] + gz[3]);
    let det = ax * gx[1] + ay * gy[1] + az * gz[1];
    // vol / det^2 = 1 / (6 |det|)
    let w = 1.0 / (6.0 * det.abs());
    for i in 0..4 {
        for j in 0..4 {
            a[i][j] += w * (gx[i] * gx[j] + gy[i] * gy[j] + gz[i] * gz[j]);
        }
    }
}

/// Vertices (x fastest) and the six Kuhn tetrahedra of each cube.
pub fn unit_cube(n: usize) -> (Vec<f64>, Vec<i32>) {
    let v = |i: usize, j: usize, k: usize| ((k * (n + 1) + j) * (n + 1) + i) as i32;
    let mut coords = Vec::with_capacity((n + 1).pow(3) * 3);
    for k in 0..=n {
        for j in 0..=n {
            for i in 0..=n {
                coords.extend([i as f64 / n as f64, j as f64 / n as f64, k as f64 / n as f64]);
            }
        }
    }
    const PERMS: [[usize; 3]; 6] = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
    let mut tets = Vec::with_capacity(n * n * n * 24);
    for k in 0..n {
        for j in 0..n {
            for i in 0..n {
                for p in PERMS {
                    let mut c = [i, j, k];
                    tets.push(v(c[0], c[1], c[2]));
                    for axis in p {
                        c[axis] += 1;
                        tets.push(v(c[0], c[1], c[2]));
                    }
                }
            }
        }
    }
    (coords, tets)
}
