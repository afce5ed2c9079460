//! FEM assembly (issue 13's assembly target, at bench size): the P1
//! Laplacian on the unit cube cut into n x n x n cubes of six Kuhn
//! tetrahedra each, n = 24 (`PARLOOP_BENCH_N` to change it): the sparsity
//! pattern's build, and the warm assembly of the values (the matrix zeroed,
//! then one loop of element matrices added into it), on `seq` and
//! `threads`. The full-size figures (n = 125) come from
//! `cargo run --release -p parloop --example assembly_timing -- 125`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use parloop::{Access, Backend, Runtime};

#[path = "../../runtime/examples/support/p1_cube.rs"]
mod p1_cube;
use p1_cube::{laplace, unit_cube};

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
