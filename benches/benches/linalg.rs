//! Linear algebra on the reference problem of issue 13: the P1 Laplacian on
//! the unit cube cut into n x n x n cubes of six Kuhn tetrahedra each,
//! n = 125 (`PARLOOP_BENCH_N` to change it), on its (n - 1)^3 interior
//! nodes, Jacobi-preconditioned CG for f = 3 pi^2 sin sin sin.
//!
//! The matrix is built here from the pattern that split gives (15 entries
//! per row: the node, its 6 axis neighbours and the 8 neighbours along
//! (1,1,0), (1,0,1), (0,1,1), (1,1,1) and their opposites); its values are
//! those of P1 on this mesh: h (6, -1 x 6) on the 7-point stencil and
//! explicit zeros on the diagonals, as an assembled FEM matrix keeps them.
//! Rows next to the boundary lose the columns of boundary nodes.
//!
//! Measured in the same run: a STREAM-like copy (rayon over chunks,
//! counting bytes read and written), SpMV (GB/s against the bytes a CSR
//! product must move: values, u32 column indices, row pointers, x, y), the
//! vector operations, and CG per iteration next to its bandwidth floor (one
//! SpMV, two dots, three axpys at the copy's bandwidth), and BiCGStab per
//! iteration on the same system (two products and its unfused vector
//! operations). A summary with GB/s is printed to stderr.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use parloop::solve::{bicgstab, cg, CgOptions, CgReport, Preconditioner};
use parloop::{Access, Backend, Dat, Error, Mat, Runtime};
use rayon::prelude::*;

/// Adds a row of 15 values: the stencil of one node.
#[parloop::kernel]
fn stencil_row(w: &[f64; 15], a: &mut [f64; 15]) {
    for j in 0..15 {
        a[j] += w[j];
    }
}

/// The 15 neighbours of a node in the Kuhn split of the cube around its
/// main diagonal: itself, the axis neighbours, and those along the face and
/// body diagonals that the tetrahedra's edges follow.
const OFFSETS: [[i64; 3]; 15] = [
    [0, 0, 0],
    [-1, 0, 0],
    [1, 0, 0],
    [0, -1, 0],
    [0, 1, 0],
    [0, 0, -1],
    [0, 0, 1],
    [1, 1, 0],
    [-1, -1, 0],
    [1, 0, 1],
    [-1, 0, -1],
    [0, 1, 1],
    [0, -1, -1],
    [1, 1, 1],
    [-1, -1, -1],
];

/// The reference problem, declared in `rt`.
struct Problem {
    n: usize,
    a: Mat<f64>,
    b: Dat<f64>,
    x: Dat<f64>,
    y: Dat<f64>,
}

fn problem(rt: &Runtime, n: usize) -> Result<Problem, Error> {
    let m = n - 1; // interior nodes per axis
    let rows = m * m * m;
    let h = 1.0 / n as f64;
    let nodes = rt.set("nodes", rows)?;
    let id = rt.map("id", &nodes, &nodes, 1, (0..rows as i32).collect())?;
    // Neighbours outside the interior point at the node itself with a zero
    // weight (the sparsity keeps each column once).
    let mut nbr = vec![0i32; rows * 15];
    let mut w = vec![0.0f64; rows * 15];
    nbr.par_chunks_mut(15).zip(w.par_chunks_mut(15)).enumerate().for_each(|(r, (nb, wr))| {
        let (i, j, k) = ((r / (m * m)) as i64, ((r / m) % m) as i64, (r % m) as i64);
        for (o, d) in OFFSETS.iter().enumerate() {
            let (a, b, c) = (i + d[0], j + d[1], k + d[2]);
            let inside = [a, b, c].iter().all(|&v| (0..m as i64).contains(&v));
            nb[o] = if inside { ((a * m as i64 + b) * m as i64 + c) as i32 } else { r as i32 };
            wr[o] = match o {
                0 => 6.0 * h,
                1..=6 if inside => -h,
                _ => 0.0,
            };
        }
    });
    let nbr = rt.map("nbr", &nodes, &nodes, 15, nbr)?;
    let s = rt.sparsity("kuhn", &[(&id, &nbr)], (1, 1))?;
    let a = rt.mat::<f64>("A", &s)?;
    {
        let wd = rt.dat("stencil", &nodes, 15, w)?;
        rt.par_loop(stencil_row::KERNEL, &nodes, &[wd.arg(Access::READ), a.arg(&id, &nbr, Access::INC)])?;
    }
    let bv = consistent_load(n);
    let b = rt.dat("b", &nodes, 1, bv)?;
    let x = rt.dat("x", &nodes, 1, vec![0.0; rows])?;
    let y = rt.dat("y", &nodes, 1, vec![0.0; rows])?;
    Ok(Problem { n, a, b, x, y })
}

/// `b = M f` with the consistent P1 mass matrix of the Kuhn mesh and f =
/// 3 pi^2 sin(pi x) sin(pi y) sin(pi z) interpolated, on the interior nodes:
/// element by element (a tetrahedron's mass matrix is vol/20 (1 + delta)).
/// Unlike a lumped load, this is no eigenvector of the stencil, so CG
/// needs its full count of iterations.
fn consistent_load(n: usize) -> Vec<f64> {
    let m = n - 1;
    let h = 1.0 / n as f64;
    let pi = std::f64::consts::PI;
    let f = |p: [usize; 3]| {
        3.0 * pi * pi * (pi * p[0] as f64 * h).sin() * (pi * p[1] as f64 * h).sin() * (pi * p[2] as f64 * h).sin()
    };
    // Interior node (grid point 1..n-1 on each axis) -> row.
    let row =
        |p: [usize; 3]| (p.iter().all(|&v| v >= 1 && v < n)).then(|| ((p[0] - 1) * m + (p[1] - 1)) * m + (p[2] - 1));
    let perms = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
    let vol = h * h * h / 6.0;
    let mut b = vec![0.0; m * m * m];
    for i in 0..n {
        for j in 0..n {
            for k in 0..n {
                for perm in &perms {
                    // The path from the cube's corner to the opposite one
                    // along the axes in `perm`'s order: a Kuhn tetrahedron.
                    let mut v = [[i, j, k]; 4];
                    for s in 0..3 {
                        v[s + 1] = v[s];
                        v[s + 1][perm[s]] += 1;
                    }
                    let fv = v.map(f);
                    let sum: f64 = fv.iter().sum();
                    for a in 0..4 {
                        if let Some(r) = row(v[a]) {
                            b[r] += vol / 20.0 * (fv[a] + sum);
                        }
                    }
                }
            }
        }
    }
    b
}

/// CPU time this process's threads have run so far (Linux schedstat; 0
/// where it cannot be read). On a machine shared with other work, CPU time
/// over the thread count estimates what the wall time would be on idle
/// cores (rayon's spinning while waiting counts too).
fn cpu_time() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Duration::ZERO };
    let ns: u64 = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()))
        .sum();
    Duration::from_nanos(ns)
}

/// Timings of one operation: wall-clock median and minimum, and the median
/// CPU time over the thread count, in seconds.
#[derive(Clone, Copy)]
struct Timing {
    median: f64,
    min: f64,
    cpu: f64,
}

/// [`Timing`] of samples (wall, CPU) in seconds.
fn timing(mut samples: Vec<(f64, f64)>) -> Timing {
    let threads = rayon::current_num_threads() as f64;
    samples.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (median, min) = (samples[samples.len() / 2].0, samples[0].0);
    samples.sort_by(|a, b| a.1.total_cmp(&b.1));
    Timing { median, min, cpu: samples[samples.len() / 2].1 / threads }
}

/// One sample (wall, CPU) of `f`, in seconds.
fn sample(f: impl FnOnce()) -> (f64, f64) {
    let (c, s) = (cpu_time(), Instant::now());
    f();
    (s.elapsed().as_secs_f64(), cpu_time().saturating_sub(c).as_secs_f64())
}

/// [`Timing`] of `reps` calls of `f` after one warm-up call.
fn measure(reps: usize, mut f: impl FnMut()) -> Timing {
    f();
    timing((0..reps).map(|_| sample(&mut f)).collect())
}

/// `ms (min ms, CPU ms)` of a timing.
fn ms(t: Timing) -> String {
    format!("{:8.2} ms (min {:7.2}, cpu/thread {:7.2})", t.median * 1e3, t.min * 1e3, t.cpu * 1e3)
}

fn linalg(c: &mut Criterion) {
    let n: usize = std::env::var("PARLOOP_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(125);
    let rt = Runtime::with_backend(Backend::Threads).expect("threads backend");
    let start = Instant::now();
    let p = problem(&rt, n).expect("the reference problem");
    let setup = start.elapsed();
    let s = p.a.sparsity();
    let (rows, nnz) = (s.rows(), s.nnz());
    let gb = 1e9;
    let spmv_bytes = (nnz * (8 + 4) + (rows + 1) * 8 + rows * 8 * 2) as f64;
    let vec_bytes = (rows * 8) as f64;

    // STREAM-like copy over arrays as large as the matrix's values.
    let len = nnz.max(1 << 22);
    let src = vec![1.0f64; len];
    let mut dst = vec![0.0f64; len];
    let copy = |dst: &mut [f64]| {
        dst.par_chunks_mut(1 << 16).zip(src.par_chunks(1 << 16)).for_each(|(d, s)| d.copy_from_slice(s));
    };

    let mut group = c.benchmark_group(format!("linalg/kuhn{n}"));
    group.sample_size(10);
    group.bench_function("stream-copy", |b| b.iter(|| copy(&mut dst)));
    group.bench_function("spmv", |b| b.iter(|| rt.mult(&p.a, &p.x, &p.y).expect("spmv")));
    group.bench_function("dot", |b| b.iter(|| rt.dot(&p.x, &p.y).expect("dot")));
    group.bench_function("axpy", |b| b.iter(|| rt.axpy(1e-3, &p.x, &p.y).expect("axpy")));
    group.bench_function("copy_from", |b| b.iter(|| rt.copy_from(&p.y, &p.x).expect("copy")));
    // CG per iteration: solves of k + 20 and k iterations from the same
    // start, the difference over 20 (set-up and the residual checks cancel).
    let stopped_at = |k: usize, solver: &str| {
        rt.fill(&p.x, 0.0).expect("fill");
        let opts = CgOptions {
            rtol: 1e-30,
            max_iterations: k,
            preconditioner: Preconditioner::Jacobi,
            ..CgOptions::default()
        };
        let s = Instant::now();
        type Solver = fn(&Runtime, &Mat<f64>, &Dat<f64>, &Dat<f64>, &CgOptions) -> parloop::Result<CgReport>;
        let run: Solver = if solver == "cg" { cg } else { bicgstab };
        match run(&rt, &p.a, &p.b, &p.x, &opts) {
            Err(Error::NotConverged { .. }) => {}
            other => panic!("expected {solver} to stop at {k} iterations: {other:?}"),
        }
        s.elapsed()
    };
    let iterations = |k: usize| stopped_at(k, "cg");
    group.bench_function("cg-jacobi-20-iterations", |b| {
        b.iter_custom(|reps| (0..reps).map(|_| iterations(25).saturating_sub(iterations(5))).sum::<Duration>())
    });
    group.bench_function("bicgstab-jacobi-20-iterations", |b| {
        b.iter_custom(|reps| {
            (0..reps).map(|_| stopped_at(25, "bicgstab").saturating_sub(stopped_at(5, "bicgstab"))).sum::<Duration>()
        })
    });
    group.finish();

    // The summary, with medians of the same operations.
    let reps: usize = std::env::var("PARLOOP_BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
    let t_copy = measure(reps, || copy(&mut dst));
    let copy_gbs = 2.0 * (len * 8) as f64 / t_copy.median / gb;
    let t_spmv = measure(reps, || rt.mult(&p.a, &p.x, &p.y).expect("spmv"));
    let t_dot = measure(reps, || {
        rt.dot(&p.x, &p.y).expect("dot");
    });
    let t_axpy = measure(reps, || rt.axpy(1e-3, &p.x, &p.y).expect("axpy"));
    let t_cg = timing(
        (0..reps.div_ceil(2))
            .map(|_| {
                let (long, short) = (
                    sample(|| {
                        iterations(25);
                    }),
                    sample(|| {
                        iterations(5);
                    }),
                );
                ((long.0 - short.0) / 20.0, (long.1 - short.1) / 20.0)
            })
            .collect(),
    );
    let floor_bytes = spmv_bytes + 2.0 * 2.0 * vec_bytes + 3.0 * 3.0 * vec_bytes;
    // A full solve to rtol 1e-10, as the reference numbers.
    rt.fill(&p.x, 0.0).expect("fill");
    let mut full = None;
    let t_full = sample(|| {
        full = Some(
            cg(&rt, &p.a, &p.b, &p.x, &CgOptions { rtol: 1e-10, max_iterations: 10_000, ..CgOptions::default() })
                .expect("the reference solve converges"),
        )
    });
    let full = full.expect("solved");
    // BiCGStab on the same system (SPD: CG's; the nonsymmetric solver's
    // cost where both apply), per iteration and to rtol 1e-10.
    let t_bicg = timing(
        (0..reps.div_ceil(2))
            .map(|_| {
                let (long, short) = (
                    sample(|| {
                        stopped_at(25, "bicgstab");
                    }),
                    sample(|| {
                        stopped_at(5, "bicgstab");
                    }),
                );
                ((long.0 - short.0) / 20.0, (long.1 - short.1) / 20.0)
            })
            .collect(),
    );
    // Its floor as built: two products and 37 vector streams (reads and
    // writes of its unfused operations).
    let bicg_floor = 2.0 * spmv_bytes + 37.0 * vec_bytes;
    rt.fill(&p.x, 0.0).expect("fill");
    let mut bicg_full = None;
    let t_bicg_full = sample(|| {
        bicg_full = Some(
            bicgstab(&rt, &p.a, &p.b, &p.x, &CgOptions { rtol: 1e-10, max_iterations: 10_000, ..CgOptions::default() })
                .expect("the reference solve converges"),
        )
    });
    let bicg_full = bicg_full.expect("solved");
    let threads = rayon::current_num_threads();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!(
        "\nlinalg summary, n = {} ({rows} rows, {nnz} entries, {:.2} per row), {threads} threads, set-up {:.2} s, \
         load average {}\n\
         (medians of {reps}; GB/s from the median; cpu/thread: CPU time over the thread count, what the wall \
         time would be on idle cores)\n\
         stream-like copy      {}  {:6.2} GB/s\n\
         spmv                  {}  {:6.2} GB/s  ({:.0} % of the copy; {:.0} MB moved; by cpu/thread {:.0} %)\n\
         dot                   {}  {:6.2} GB/s\n\
         axpy                  {}  {:6.2} GB/s\n\
         cg-jacobi/iteration   {}  (floor {:.2} ms at the copy's bandwidth: {:.0} MB; by cpu/thread {:.2} ms)\n\
         cg-jacobi rtol 1e-10  {} iterations, {:.2} s in all ({:.2} ms/iteration with set-up; cpu/thread {:.2} s), \
         relative residual {:.2e}\n\
         bicgstab-jacobi/iter  {}  (floor {:.2} ms at the copy's bandwidth: {:.0} MB)\n\
         bicgstab rtol 1e-10   {} iterations, {:.2} s in all, relative residual {:.2e}",
        p.n,
        nnz as f64 / rows as f64,
        setup.as_secs_f64(),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        ms(t_copy),
        copy_gbs,
        ms(t_spmv),
        spmv_bytes / t_spmv.median / gb,
        100.0 * spmv_bytes / t_spmv.median / gb / copy_gbs,
        spmv_bytes / 1e6,
        100.0 * t_copy.cpu / t_spmv.cpu * spmv_bytes / (2.0 * (len * 8) as f64),
        ms(t_dot),
        2.0 * vec_bytes / t_dot.median / gb,
        ms(t_axpy),
        3.0 * vec_bytes / t_axpy.median / gb,
        ms(t_cg),
        floor_bytes / (copy_gbs * gb) * 1e3,
        floor_bytes / 1e6,
        floor_bytes / (2.0 * (len * 8) as f64) * t_copy.cpu * 1e3,
        full.iterations,
        t_full.0,
        t_full.0 / full.iterations as f64 * 1e3,
        t_full.1 / threads as f64,
        full.relative_residual,
        ms(t_bicg),
        bicg_floor / (copy_gbs * gb) * 1e3,
        bicg_floor / 1e6,
        bicg_full.iterations,
        t_bicg_full.0,
        bicg_full.relative_residual,
    );
}

criterion_group!(benches, linalg);
criterion_main!(benches);
