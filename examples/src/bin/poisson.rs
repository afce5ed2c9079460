//! P1 Poisson (and the L2 projection) on parloop, with an assembled matrix
//! and CG.
//!
//! `cargo run --release --bin poisson -- --dim 3 --mesh-size 32` solves
//! `-laplace(u) = f` on the unit cube and prints the errors against the
//! exact solution; see `--help`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use parloop::{Backend, Error, Runtime};
use parloop_examples::cli::{count, invalid, output_dir, stdout_error};
use parloop_examples::distributed;
use parloop_examples::memory::check_memory;
use parloop_examples::poisson::{covers_boundary, order, Errors, Function, Mode, Problem};
use parloop_mesh::vtk::{write_vtu, Field};
use parloop_mesh::{unit_cube, unit_square, Mesh};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Which {
    /// -laplace(u) = f, u given on the Dirichlet group.
    Poisson,
    /// The L2 projection of g = sin(pi x) sin(pi y) (sin(pi z)) + |x|^2: M u = b.
    Projection,
}

#[derive(Parser, Debug)]
#[command(
    allow_negative_numbers = true,
    about = "P1 finite elements on parloop: -laplace(u) = f with Dirichlet values (assembled stiffness \
             matrix, Jacobi-preconditioned CG), or the L2 projection",
    long_about = "P1 finite elements on parloop: -laplace(u) = f with Dirichlet values (assembled stiffness \
                  matrix, Jacobi-preconditioned CG), or the L2 projection (mass matrix).\n\n\
                  With --rhs manufactured (the default), f = d pi^2 prod sin(pi x_k) and the Dirichlet values are \
                  those of u = prod sin(pi x_k) (zero on unit_square / unit_cube), its exact solution on any mesh \
                  whose whole boundary is Dirichlet; the L2 and H1-seminorm errors are printed, and with \
                  --refinements their orders of convergence (2 and 1 for P1). A --dirichlet group that leaves \
                  part of the boundary free (zero-flux Neumann there, which that u does not satisfy) needs \
                  --rhs C: a constant f with u = 0 on the group, whose solution is not known, so the minimum \
                  and maximum of u are printed instead."
)]
struct Args {
    /// What to solve.
    #[arg(long, value_enum, default_value_t = Which::Poisson)]
    mode: Which,
    /// Dimension of the generated mesh: 2 (unit_square, triangles) or 3 (unit_cube, tetrahedra)
    /// [default: 2]; with --mesh, the file's (an error if it differs).
    #[arg(long, value_parser = clap::value_parser!(u8).range(2..=3))]
    dim: Option<u8>,
    /// Squares (cubes) per side of the generated mesh (default 64 in 2-D, 16 in 3-D).
    #[arg(long, value_name = "N", value_parser = count)]
    mesh_size: Option<usize>,
    /// Solve also on meshes 2, 3, ... K times finer (N, 2N, ..., K N per side) and print the orders.
    #[arg(long, value_name = "K", default_value = "1", value_parser = count)]
    refinements: usize,
    /// Read a Gmsh mesh (.msh 2.2 or 4.1) instead of generating one.
    #[arg(long, value_name = "FILE.msh", conflicts_with_all = ["mesh_size", "refinements"])]
    mesh: Option<PathBuf>,
    /// Right-hand side f: `manufactured` (d pi^2 prod sin(pi x_k)) or a constant such as 4.
    #[arg(long, default_value = "manufactured")]
    rhs: String,
    /// Vertex group where u is given (the exact solution's values with `manufactured`, else 0):
    /// `boundary` (every boundary vertex, the default) or a named group, e.g. a Gmsh physical
    /// curve (2-D) or surface (3-D) NAME (its vertices, NAME.vertices); one that leaves part of
    /// the boundary free needs --rhs C.
    #[arg(long, value_name = "GROUP", default_value = "boundary")]
    dirichlet: String,
    /// Relative tolerance of CG on ||b - A u|| / ||b||.
    #[arg(long, value_name = "RTOL", default_value = "1e-10")]
    rtol: f64,
    /// Backend: auto, seq, threads, emu or cuda (default: PARLOOP_BACKEND, else auto).
    #[arg(long)]
    backend: Option<String>,
    /// Write u, the exact solution and the error (u - exact) as point data to DIR/poisson.vtu
    /// (projection.vtu) for ParaView (the finest mesh with --refinements).
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Never show the progress spinner.
    #[arg(long)]
    quiet: bool,
    /// Run distributed under MPI (`mpiexec -n N poisson --partition metis`):
    /// partition the cells with metis or block (needs the `mpi` feature).
    /// Counts of unknowns and nonzeros are then rank 0's.
    #[arg(long, value_name = "METHOD")]
    partition: Option<String>,
}

/// One solve: its mesh, errors (where an exact solution is known) and report line.
struct Run {
    h: f64,
    errors: Option<Errors>,
}

fn run(args: Args) -> Result<(), Error> {
    let backend: Backend = parloop_examples::cli::backend(args.backend.as_deref())?;
    if args.refinements == 0 {
        return Err(invalid("--refinements", "0: at least one mesh"));
    }
    if !(args.rtol > 0.0 && args.rtol < 1.0) {
        return Err(invalid("--rtol", format!("{}: a tolerance in (0, 1)", args.rtol)));
    }
    let rhs = match args.rhs.as_str() {
        "manufactured" => None,
        c => Some(
            c.trim()
                .parse::<f64>()
                .ok()
                .filter(|c| c.is_finite())
                .ok_or_else(|| invalid("--rhs", format!("`{c}`: `manufactured` or a finite number expected")))?,
        ),
    };
    if args.mode == Which::Projection && (rhs.is_some() || args.dirichlet != "boundary") {
        return Err(invalid(
            "--mode",
            "projection has no right-hand side or Dirichlet group to set (--rhs, --dirichlet)",
        ));
    }
    let dim = usize::from(args.dim.unwrap_or(2));
    let n0 = args.mesh_size.unwrap_or(if dim == 2 { 64 } else { 16 });
    // A bad output folder is an error now, not after the solve.
    if let Some(dir) = &args.output {
        output_dir(dir)?;
    }
    let _mpi = distributed::launch(args.partition.as_deref(), "poisson")?;
    // Under MPI, rank 0 alone prints and writes.
    let lead = Runtime::with_backend(Backend::Seq)?.rank() == 0;
    let mut out: Box<dyn Write> = if lead { Box::new(std::io::stdout()) } else { Box::new(std::io::sink()) };
    let spinner = if std::io::stderr().is_terminal() && !args.quiet && lead {
        let s = ProgressBar::new_spinner();
        s.set_style(ProgressStyle::with_template("{spinner} {elapsed} {msg}").expect("a valid template"));
        s.enable_steady_tick(Duration::from_millis(120));
        s
    } else {
        ProgressBar::hidden()
    };

    if args.mesh.is_none() {
        // Refuse a finest mesh that cannot fit before generating any.
        let finest = n0.checked_mul(args.refinements);
        let what = format!("--mesh-size {n0} with --refinements {}: the finest mesh and its solve", args.refinements);
        check_memory(&what, finest.and_then(|n| Problem::estimated_bytes(dim, n)))?;
    }
    let mut runs: Vec<Run> = Vec::new();
    for level in 1..=args.refinements {
        // Each mesh on a runtime of its own: names are per runtime.
        let rt = Runtime::with_backend(backend)?;
        let t = Instant::now();
        let (mesh, what): (Mesh, String) = match &args.mesh {
            Some(path) => {
                // Reading takes up to about 20 times a binary file's size
                // (element records, the cell and face tables), the solve 7
                // more (140 bytes per tetrahedron of 20 file bytes).
                if let Ok(meta) = std::fs::metadata(path) {
                    let bytes = usize::try_from(meta.len()).ok().and_then(|b| b.checked_mul(30));
                    check_memory(&format!("--mesh {}: reading it and the solve", path.display()), bytes)?;
                }
                spinner.set_message(format!("reading {}", path.display()));
                let mesh = parloop_mesh::gmsh::read(path)?;
                if let Some(d) = args.dim.filter(|&d| usize::from(d) != mesh.dim) {
                    return Err(invalid(
                        "--dim",
                        format!(
                            "{d}, but --mesh {} is a {}-D mesh (leave --dim out with --mesh)",
                            path.display(),
                            mesh.dim
                        ),
                    ));
                }
                (mesh, path.display().to_string())
            }
            None => {
                let n = n0.checked_mul(level).ok_or_else(|| invalid("--mesh-size", format!("{n0} x {level}")))?;
                spinner.set_message(format!("generating the {n}-mesh"));
                if dim == 2 {
                    (unit_square(n, n)?, format!("unit_square({n}, {n})"))
                } else {
                    (unit_cube(n, n, n)?, format!("unit_cube({n}, {n}, {n})"))
                }
            }
        };
        let mesh_seconds = t.elapsed().as_secs_f64();
        let (mode, name) = match args.mode {
            Which::Poisson => (Mode::Poisson { dirichlet: args.dirichlet.clone() }, "poisson"),
            Which::Projection => (Mode::Projection, "projection"),
        };
        let d = mesh.dim;
        // The manufactured solution is the solution only where its own
        // values are imposed on the whole boundary: on a free part the
        // natural condition is zero flux, which it does not satisfy.
        if args.mode == Which::Poisson && rhs.is_none() && !covers_boundary(&mesh, &args.dirichlet)? {
            return Err(invalid(
                "--dirichlet",
                format!(
                    "{}: the group leaves part of the boundary of {what} free (zero flux there), where the \
                     manufactured solution is not a solution, so its errors would be meaningless: pass a \
                     constant right-hand side (--rhs C, e.g. --rhs 1), or --dirichlet boundary",
                    args.dirichlet
                ),
            ));
        }
        // The function assembled, the Dirichlet values, and the exact
        // solution where one is known.
        let zero = Function::constant(0.0);
        let (f, g, exact) = match (args.mode, rhs) {
            (Which::Poisson, None) => {
                let u = Function::manufactured_solution();
                (Function::manufactured_rhs(d), u, Some(u))
            }
            (Which::Poisson, Some(c)) => (Function::constant(c), zero, None),
            (Which::Projection, _) => {
                let g = Function { square: 1.0, ..Function::manufactured_solution() };
                (g, zero, Some(g))
            }
        };
        spinner.set_message("sparsity");
        let mut p =
            Problem::new_distributed(&rt, &mesh, mode, &distributed::partition(&rt, args.partition.as_deref()))?;
        // Planning (mini-partitions, colours) happens on a loop's first
        // call: the assembly loops plan here, CG's vector loops in the solve.
        let planning = |rt: &Runtime| rt.report().iter().map(|r| r.plan_seconds).sum::<f64>();
        spinner.set_message("assembly");
        p.assemble_with_boundary_values(&f, &g)?;
        let assembly_planning = planning(&rt);
        spinner.set_message(format!("CG on {} unknowns", p.unknowns()));
        let report = p.solve(args.rtol)?;
        let solve_planning = planning(&rt) - assembly_planning;
        spinner.set_message("errors");
        let errors = exact.map(|e| p.errors(&e)).transpose()?;
        let tm = p.timings();
        // Gathered on rank 0 under MPI (every rank takes part).
        let whole_u = distributed::whole(&p.u)?;
        spinner.suspend(|| -> Result<(), Error> {
            writeln!(
                out,
                "{name}: {what}, {d}-D, {} vertices, {} cells, {} unknowns, {} nonzeros; backend {}",
                mesh.vertices(),
                mesh.num_cells(),
                p.unknowns(),
                p.sparsity.nnz(),
                match (rt.device_name(), rt.ranks()) {
                    (Some(device), 1) => format!("{} ({device})", rt.backend()),
                    (None, 1) => rt.backend().to_string(),
                    (_, ranks) => format!("{} on {ranks} MPI ranks (counts: rank 0's)", rt.backend()),
                },
            )
            .map_err(stdout_error)?;
            writeln!(
                out,
                "  mesh {mesh_seconds:.3} s, declare {:.3} s, sparsity {:.3} s, assembly {:.3} s ({assembly_planning:.3} s \
                 planning), solve {:.3} s ({solve_planning:.3} s planning; {} CG iterations, {:.3} ms each, \
                 relative residual {:.2e}), errors {:.3} s",
                tm.declare,
                tm.sparsity,
                tm.assembly,
                tm.solve,
                report.iterations,
                report.iteration_seconds * 1e3 / report.iterations.max(1) as f64,
                report.relative_residual,
                tm.errors,
            )
            .map_err(stdout_error)?;
            match errors {
                Some(e) => writeln!(out, "  L2 error {:.6e}, H1 seminorm error {:.6e}", e.l2, e.h1),
                None => {
                    let (min, max) = whole_u.as_ref().map_or((f64::NAN, f64::NAN), |u| {
                        u.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)))
                    });
                    writeln!(out, "  min u {min:.6e}, max u {max:.6e} (no exact solution for a constant right-hand side)")
                }
            }
            .map_err(stdout_error)
        })?;
        if let (Some(dir), true, Some(u)) = (&args.output, level == args.refinements, whole_u) {
            spinner.set_message("VTK");
            let path = dir.join(format!("{name}.vtu"));
            let mut fields = vec![Field::scalar("u", &u)];
            let (ex, err): (Vec<f64>, Vec<f64>) = match exact {
                Some(e) => mesh.coords.chunks(d).zip(&u).map(|(x, u)| (e.eval(x), u - e.eval(x))).unzip(),
                None => (Vec::new(), Vec::new()),
            };
            if exact.is_some() {
                fields.push(Field::scalar("exact", &ex));
                fields.push(Field::scalar("error", &err));
            }
            write_vtu(&path, &mesh, &fields, &[])?;
            spinner.suspend(|| writeln!(out, "VTK: {} (open it in ParaView)", path.display()).map_err(stdout_error))?;
        }
        // The generated meshes' h is 1/n; a file is run once.
        runs.push(Run { h: 1.0 / (n0 * level) as f64, errors });
    }
    spinner.finish_and_clear();
    // Orders between consecutive meshes, where both have errors.
    let orders: Vec<String> = runs
        .windows(2)
        .filter_map(|w| {
            let (a, b) = (w[0].errors?, w[1].errors?);
            let r = w[0].h / w[1].h;
            Some(format!(
                "  h {:.5} -> {:.5}: L2 {:.3}, H1 {:.3}",
                w[0].h,
                w[1].h,
                order(a.l2, b.l2, r),
                order(a.h1, b.h1, r)
            ))
        })
        .collect();
    if !orders.is_empty() {
        writeln!(out, "orders of convergence (log of the error ratio over log of the h ratio):")
            .map_err(stdout_error)?;
        for line in orders {
            writeln!(out, "{line}").map_err(stdout_error)?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("poisson: error: {e}");
            ExitCode::FAILURE
        }
    }
}
