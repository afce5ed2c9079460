//! Times the P1 Laplacian's sparsity and assembly on the unit cube cut into
//! n x n x n cubes of six tetrahedra each (Kuhn), on the seq and threads
//! backends: `cargo run --release -p parloop --example assembly_timing -- 125`
//! (a second argument, `seq` or `threads`, times that backend alone).
//! Not a test: it prints times, and checks the row sums (zero for a
//! Laplacian) so that a fast wrong answer does not pass unnoticed.

use std::time::Instant;

use parloop::{Access, Backend, Runtime};

#[path = "support/p1_cube.rs"]
mod p1_cube;
use p1_cube::{laplace, unit_cube};

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
