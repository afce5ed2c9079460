//! Seed 000's explicit wave equation on parloop: P1 on the unit square,
//! seven loops per step.
//!
//! `cargo run --release --bin wave` runs the seed's 10 000 steps on a
//! 100 x 100 mesh on the best backend present; see `--help`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use parloop::{Backend, Error, Runtime};
use parloop_examples::cli::{count, invalid, output_dir, stdout_error};
use parloop_examples::distributed;
use parloop_examples::memory::check_memory;
use parloop_examples::wave::{unstable_dt, Wave, DT, T_END};
use parloop_mesh::unit_square;
use parloop_mesh::vtk::{Field, TimeSeries};

#[derive(Parser, Debug)]
#[command(
    allow_negative_numbers = true,
    about = "Seed 000's explicit wave equation (P1, leapfrog) on the unit square, on parloop"
)]
struct Args {
    /// Time steps (default: the seed's T = 10 at dt = 0.001, 10 000 steps).
    #[arg(long, value_name = "N", value_parser = count)]
    steps: Option<usize>,
    /// Squares per side of the unit square mesh (two triangles each); dt = 0.001 is stable below
    /// about 700 (the leapfrog's limit is about 0.7 h): a mesh where it is not is refused.
    #[arg(long, value_name = "N", default_value = "100", value_parser = count)]
    mesh_size: usize,
    /// Backend: auto, seq, threads, emu or cuda (default: PARLOOP_BACKEND, else auto).
    #[arg(long)]
    backend: Option<String>,
    /// Write p and phi as VTK (DIR/wave.pvd and one wave_NNNNNN.vtu per output) for ParaView;
    /// an earlier run's wave.pvd and wave_NNNNNN.vtu in DIR are removed first (other files stay).
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// With --output: write every N steps (and the first and last).
    #[arg(long, value_name = "N", default_value = "100", value_parser = count)]
    output_every: usize,
    /// Never show the progress bar.
    #[arg(long)]
    quiet: bool,
    /// Run distributed under MPI (`mpiexec -n N wave --partition metis`):
    /// partition the triangles with metis or block (needs the `mpi` feature).
    #[arg(long, value_name = "METHOD")]
    partition: Option<String>,
}

fn run(args: Args) -> Result<(), Error> {
    let steps = args.steps.unwrap_or((T_END / DT).round() as usize);
    if args.output_every == 0 {
        return Err(invalid("--output-every", "0: at least 1 step between outputs"));
    }
    let backend: Backend = parloop_examples::cli::backend(args.backend.as_deref())?;
    // A bad output folder is an error now, not after the run.
    if let Some(dir) = &args.output {
        output_dir(dir)?;
    }
    let _mpi = distributed::launch(args.partition.as_deref(), "wave")?;
    let rt = Runtime::with_backend(backend)?;
    // Under MPI, rank 0 alone prints and writes.
    let lead = rt.rank() == 0;
    let t0 = Instant::now();
    // Refuse a mesh that cannot fit before generating it.
    let n = args.mesh_size;
    check_memory(&format!("--mesh-size {n}: the mesh and the solver's data"), Wave::estimated_bytes(n))?;
    let mesh = unit_square(args.mesh_size, args.mesh_size)?;
    // Above the stability limit the run would blow up: refuse it before
    // stepping (and writing output).
    if let Some(limit) = unstable_dt(&mesh, DT) {
        return Err(Error::Incompatible {
            op: format!("wave on unit_square({n}, {n})"),
            reason: format!(
                "dt = {DT} is above the leapfrog's stability limit on this mesh (2 / sqrt(lambda_max) of the \
                 lumped-mass operator, about 0.7 h), which lies between {:.3e} and {:.3e}, so the solution would \
                 blow up; dt is fixed, so use a coarser mesh: --mesh-size {} or less is stable",
                limit.at_least,
                limit.below,
                (n as f64 * limit.at_least / DT).floor()
            ),
        });
    }
    let mut wave = Wave::new_distributed(&rt, &mesh, DT, &distributed::partition(&rt, args.partition.as_deref()))?;
    let mut out: Box<dyn Write> = if lead { Box::new(std::io::stdout()) } else { Box::new(std::io::sink()) };
    writeln!(
        out,
        "wave: unit_square({0}, {0}), {1} vertices, {2} triangles ({3:.2} s); {4} step{5} of dt = {DT}; backend {6}",
        args.mesh_size,
        mesh.vertices(),
        mesh.num_cells(),
        t0.elapsed().as_secs_f64(),
        steps,
        if steps == 1 { "" } else { "s" },
        match (rt.device_name(), rt.ranks()) {
            (Some(device), 1) => format!("{} ({device})", rt.backend()),
            (None, 1) => rt.backend().to_string(),
            (_, ranks) => format!("{} on {ranks} MPI ranks", rt.backend()),
        },
    )
    .map_err(stdout_error)?;
    let e0 = wave.energy()?;

    let mut series = match (&args.output, lead) {
        (Some(dir), true) => {
            // An earlier run's wave.pvd and wave_NNNNNN.vtu go first.
            Some((TimeSeries::replace(dir, "wave")?, dir))
        }
        _ => None,
    };
    let writing = args.output.is_some();
    let write = |series: &mut Option<(TimeSeries, &PathBuf)>, wave: &Wave, step: usize| -> Result<(), Error> {
        if !writing {
            return Ok(());
        }
        // Every rank takes part in the gather; rank 0 writes.
        let (p, phi) = (distributed::whole(&wave.p)?, distributed::whole(&wave.phi)?);
        if let (Some((s, _)), Some(p), Some(phi)) = (series, p, phi) {
            s.write(step as f64 * DT, &mesh, &[Field::scalar("p", &p), Field::scalar("phi", &phi)], &[])?;
        }
        Ok(())
    };
    write(&mut series, &wave, 0)?;

    let bar = if std::io::stderr().is_terminal() && !args.quiet && lead {
        let bar = ProgressBar::new(steps as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} steps, {elapsed} elapsed, eta {eta}")
                .expect("a valid template"),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let start = Instant::now();
    // Between outputs the steps run back to back: the host reads p and phi
    // only when it writes them.
    let chunk = if writing { args.output_every } else { steps.max(1) };
    let mut done = 0;
    // Seconds spent writing VTK, apart from the steps'.
    let mut output = 0.0;
    while done < steps {
        let k = chunk.min(steps - done);
        wave.run(k, |_| bar.inc(1))?;
        done += k;
        if writing {
            // The steps' time ends when their work is done.
            rt.synchronize()?;
            let t = Instant::now();
            write(&mut series, &wave, done)?;
            output += t.elapsed().as_secs_f64();
        }
    }
    bar.finish_and_clear();
    // Device loops return once launched: the time is the work's when it is done.
    rt.synchronize()?;
    let wall = start.elapsed().as_secs_f64();
    let e1 = wave.energy()?;
    let report = rt.report();
    let (Some(e0), Some(e1)) = (e0, e1) else { return Ok(()) };
    // Below the stability limit leapfrog keeps its (modified) energy to
    // rounding; a run that grew all the same is an error, not a summary.
    if !(e1.plain.is_finite() && e1.plain <= 1e3 * e0.plain.max(f64::MIN_POSITIVE)) {
        return Err(Error::Incompatible {
            op: format!("wave on unit_square({n}, {n})"),
            reason: format!("the solution blew up: energy {:.6e} -> {:.6e} after {steps} steps", e0.plain, e1.plain),
        });
    }
    let planning: f64 = report.iter().fold(0.0, |sum, r| sum + r.plan_seconds);
    let loops: u64 = report.iter().map(|r| r.calls).sum();
    let in_loops: f64 = report.iter().fold(0.0, |sum, r| sum + r.seconds);
    // Planning (and compiling device code, on a first run) is once per
    // loop shape; writing VTK is no part of a step.
    let stepping = (wall - planning - output).max(0.0);
    let apart = if writing { format!(", {output:.3} s writing VTK") } else { String::new() };
    // Per-step and per-loop figures of a run with no loops would be made up.
    let rates = if loops == 0 {
        "no loops ran".to_owned()
    } else {
        format!(
            "without it {:.1} us per step, {:.2} us per loop ({loops} loops, {:.2} us each inside the loop)",
            stepping * 1e6 / steps.max(1) as f64,
            stepping * 1e6 / loops as f64,
            in_loops * 1e6 / loops as f64,
        )
    };
    writeln!(
        out,
        "wall time {wall:.3} s ({planning:.3} s planning{apart}), {rates}; energy {:.12e} -> {:.12e} (modified {:.3e} \
         relative change)",
        e0.plain,
        e1.plain,
        (e1.modified - e0.modified) / e0.modified,
    )
    .map_err(stdout_error)?;
    if let Some((s, dir)) = &series {
        writeln!(out, "VTK: {} (open it in ParaView; {})", s.pvd_path().display(), dir.display())
            .map_err(stdout_error)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wave: error: {e}");
            ExitCode::FAILURE
        }
    }
}
