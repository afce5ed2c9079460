//! Host cost per loop where kernels cost nothing (issue 15): eager, the
//! lazy trace without replay (every loop through the DAG) and with replay
//! (a recurring window run with its kept schedule and plans), on seq and
//! threads: ten loops over a set of one element then a host read, and an
//! airfoil time step on the 4x4 grid (9 loops, 48 cells). Throughput is
//! in loops.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use parloop::{Access, Backend, Runtime};
use parloop_examples::airfoil::{grid::Grid, Airfoil};

#[parloop::kernel]
fn axpy(x: &f64, y: &mut f64) {
    *y = 0.5 * *y + *x;
}

/// The runtimes compared: eager, lazy without replay, lazy with replay.
fn modes(backend: Backend) -> [(&'static str, Runtime); 3] {
    let rt = |lazy: bool, replay: bool| {
        let rt = Runtime::with_lazy(backend, lazy).expect("a CPU backend");
        rt.set_replay(replay);
        rt
    };
    [("eager", rt(false, false)), ("lazy", rt(true, false)), ("replay", rt(true, true))]
}

fn one_element(c: &mut Criterion) {
    const LOOPS: u64 = 10;
    for backend in [Backend::Seq, Backend::Threads] {
        let mut group = c.benchmark_group(format!("lazy-host/one-element/{}", backend.name()));
        group.throughput(Throughput::Elements(LOOPS));
        for (name, rt) in modes(backend) {
            let s = rt.set("one", 1).expect("a set");
            let x = rt.dat("x", &s, 1, vec![1.0f64]).expect("a dat");
            let y = rt.dat("y", &s, 1, vec![0.0f64]).expect("a dat");
            let args = [x.arg(Access::READ), y.arg(Access::RW)];
            let lp = parloop::ParLoop::new(axpy::KERNEL, &s, &args).expect("a loop");
            let window = || {
                for _ in 0..LOOPS {
                    rt.execute(&lp).expect("a loop");
                }
                y.values().expect("y")
            };
            window();
            window();
            group.bench_function(name, |b| b.iter(window));
        }
        group.finish();
    }
}

fn airfoil_4x4(c: &mut Criterion) {
    let grid = Grid::generate(4, 4).expect("a valid grid").rounded();
    for backend in [Backend::Seq, Backend::Threads] {
        let mut group = c.benchmark_group(format!("lazy-host/airfoil-4x4/{}", backend.name()));
        group.throughput(Throughput::Elements(9));
        for (name, rt) in modes(backend) {
            let mut airfoil = Airfoil::new(&rt, &grid).expect("a valid airfoil");
            for _ in 0..3 {
                airfoil.step().expect("a step");
            }
            group.bench_function(name, |b| b.iter(|| airfoil.step().expect("a step")));
        }
        group.finish();
    }
}

criterion_group!(benches, one_element, airfoil_4x4);
criterion_main!(benches);
