//! Plan construction for airfoil's res_calc on the standard 400x600 grid
//! (1.44 M edges): with staging maps (what the GPU strategies need) and
//! colours only (what the threads backend builds).

use criterion::{criterion_group, criterion_main, Criterion};
use parloop_benches::res_calc_args;
use parloop_examples::airfoil::grid::Grid;
use parloop_planner::{build_plan, PlanRequest};

fn plan(c: &mut Criterion) {
    let grid = Grid::generate(400, 600).expect("the standard grid");
    let args = res_calc_args(&grid);
    let sections = [grid.nedge()];
    let mut group = c.benchmark_group("plan/res_calc/400x600");
    group.sample_size(10);
    for (name, staging) in [("staged", true), ("colour-only", false)] {
        let request = PlanRequest {
            sections: &sections,
            args: &args,
            shared_memory_bytes: 48 * 1024,
            part_size: None,
            staging,
            thread_colours: staging,
        };
        group.bench_function(name, |b| b.iter(|| build_plan(&request).expect("a valid plan")));
    }
    group.finish();
}

criterion_group!(benches, plan);
criterion_main!(benches);
