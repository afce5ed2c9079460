//! Times the P1 Laplacian's sparsity and assembly on the unit cube cut into
//! n x n x n cubes of six tetrahedra each (Kuhn), on the seq and threads
//! backends: `cargo run --release -p parloop --example assembly_timing -- 125`
//! (a second argument, `seq` or `threads`, times that backend alone).
//! Not a test: it prints times, and checks the row sums (zero for a
//! Laplacian) so that a fast wrong answer does not pass unnoticed.

use std::time::Instant;

use parloop::{Access, Backend, Runtime};

/// The P1 stiffness matrix of a tetrahedron: vol * grad(phi_i) . grad(phi_j).
#[parloop::kernel]
fn laplace(x: &[[f64; 3]; 4], a: &mut [[f64; 4]; 4]) {
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
fn unit_cube(n: usize) -> (Vec<f64>, Vec<i32>) {
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

fn main() -> Result<(), parloop::Error> {
    let n: usize = std::env::args().nth(1).map_or(125, |a| a.parse().expect("n: a positive integer"));
    let (coords, tets) = unit_cube(n);
    let nodes_n = (n + 1).pow(3);
    let cells_n = 6 * n * n * n;
    println!("unit cube n = {n}: {nodes_n} vertices, {cells_n} tetrahedra, {} threads", rayon::current_num_threads());
    let backends = match std::env::args().nth(2).as_deref() {
        None => vec![Backend::Threads, Backend::Seq],
        Some("seq") => vec![Backend::Seq],
        Some("threads") => vec![Backend::Threads],
        Some(other) => panic!("backend: `seq` or `threads`, not `{other}`"),
    };
    for backend in backends {
        let rt = Runtime::with_backend(backend)?;
        let nodes = rt.set("nodes", nodes_n)?;
        let cells = rt.set("cells", cells_n)?;
        let c2n = rt.map("c2n", &cells, &nodes, 4, tets.clone())?;
        let x = rt.dat("x", &nodes, 3, coords.clone())?;
        let t = Instant::now();
        let s = rt.sparsity("s", &[(&c2n, &c2n)], (1, 1))?;
        let sparsity_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let a = rt.mat::<f64>("A", &s)?;
        let mat_s = t.elapsed().as_secs_f64();
        let mut times = Vec::new();
        for _ in 0..3 {
            a.zero()?;
            let t = Instant::now();
            rt.par_loop(laplace::KERNEL, &cells, &[x.arg_vec(&c2n, Access::READ), a.arg(&c2n, &c2n, Access::INC)])?;
            times.push(t.elapsed().as_secs_f64());
        }
        let csr = a.to_csr()?;
        let worst = (0..s.rows())
            .map(|r| csr.vals[csr.row_ptr[r]..csr.row_ptr[r + 1]].iter().sum::<f64>().abs())
            .fold(0.0, f64::max);
        println!(
            "{backend:>7}: sparsity {:.3} s ({} rows, {} entries, {:.2} per row), zero matrix {:.3} s, \
             assembly {:.3} s first, {:.3} s second (records positions), {:.3} s warm ({:.1} M element matrices/s); \
             max |row sum| {worst:.1e}",
            sparsity_s,
            s.rows(),
            s.nnz(),
            s.nnz() as f64 / s.rows() as f64,
            mat_s,
            times[0],
            times[1],
            times[2],
            cells_n as f64 / times[2] / 1e6
        );
    }
    Ok(())
}
