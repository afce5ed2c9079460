//! One airfoil time step (save_soln and two sweeps of adt_calc, res_calc,
//! bres_calc, update) on seq and threads, for the 100x150 and the standard
//! 400x600 grid. Plans are built before measuring.

use criterion::{criterion_group, criterion_main, Criterion};
use parloop::{Backend, Runtime};
use parloop_examples::airfoil::{grid::Grid, Airfoil};

fn step(c: &mut Criterion) {
    for (i, j) in [(100, 150), (400, 600)] {
        let grid = Grid::generate(i, j).expect("a valid grid").rounded();
        let mut group = c.benchmark_group(format!("airfoil-step/{i}x{j}"));
        group.sample_size(10);
        for backend in [Backend::Seq, Backend::Threads] {
            let rt = Runtime::with_backend(backend).expect("a CPU backend");
            let mut airfoil = Airfoil::new(&rt, &grid).expect("a valid airfoil");
            airfoil.step().expect("a step");
            group.bench_function(backend.name(), |b| b.iter(|| airfoil.step().expect("a step")));
        }
        group.finish();
    }
}

criterion_group!(benches, step);
criterion_main!(benches);
