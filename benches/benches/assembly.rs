//! FEM assembly (issue 13's assembly target, at bench size): the P1
//! Laplacian on the unit cube cut into n x n x n cubes of six Kuhn
//! tetrahedra each, n = 24 (`PARLOOP_BENCH_N` to change it): the sparsity
//! pattern's build, and the warm assembly of the values (the matrix zeroed,
//! then one loop of element matrices added into it), on `seq` and
//! `threads`. The full-size figures (n = 125) come from
//! `cargo run --release -p parloop --example assembly_timing -- 125`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use parloop::{Access, Backend, Runtime};

/// The P1 stiffness matrix of a tetrahedron: vol * grad(phi_i) . grad(phi_j)
/// (as `runtime/examples/assembly_timing.rs`).
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

fn assembly(c: &mut Criterion) {
    let n: usize = std::env::var("PARLOOP_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(24);
    let (coords, tets) = unit_cube(n);
    let (nodes_n, cells_n) = ((n + 1).pow(3), 6 * n * n * n);
    let mut group = c.benchmark_group(format!("assembly/p1-laplace/n{n}"));
    group.sample_size(20);
    for backend in [Backend::Seq, Backend::Threads] {
        let rt = Runtime::with_backend(backend).expect("a host backend");
        let nodes = rt.set("nodes", nodes_n).expect("nodes");
        let cells = rt.set("cells", cells_n).expect("cells");
        let x = rt.dat("x", &nodes, 3, coords.clone()).expect("coordinates");
        // Patterns are cached by map: each build gets a map of its own.
        group.bench_function(format!("sparsity/{}", backend.name()), |b| {
            b.iter_batched(
                || rt.map("c2n", &cells, &nodes, 4, tets.clone()).expect("the cell map"),
                |c2n| rt.sparsity("s", &[(&c2n, &c2n)], (1, 1)).expect("the pattern"),
                BatchSize::LargeInput,
            )
        });
        let c2n = rt.map("c2n", &cells, &nodes, 4, tets.clone()).expect("the cell map");
        let s = rt.sparsity("s", &[(&c2n, &c2n)], (1, 1)).expect("the pattern");
        let a = rt.mat::<f64>("A", &s).expect("the matrix");
        let assemble = || {
            a.zero().expect("zeroed");
            rt.par_loop(laplace::KERNEL, &cells, &[x.arg_vec(&c2n, Access::READ), a.arg(&c2n, &c2n, Access::INC)])
                .expect("assembled");
        };
        assemble(); // the plan, and the positions the later loops reuse
        group.bench_function(format!("values-warm/{}", backend.name()), |b| b.iter(assemble));
    }
    group.finish();
}

criterion_group!(benches, assembly);
criterion_main!(benches);
