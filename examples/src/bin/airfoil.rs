//! The OP2 airfoil benchmark on parloop.
//!
//! `cargo run --release --bin airfoil` runs the standard 400x600 grid for
//! 1000 iterations on the best backend present; see `--help`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use parloop::{Backend, Error, Runtime};
use parloop_examples::airfoil::grid::{parse_grid_size, Counts, Grid};
use parloop_examples::airfoil::{check_memory, Airfoil, RunError};
use parloop_examples::cli::{count, stdout_error};

#[derive(Parser, Debug)]
#[command(allow_negative_numbers = true, about = "OP2's airfoil benchmark (2-D Euler, NACA0012 C-grid) on parloop")]
struct Args {
    /// Read the grid from this file (OP2 format) instead of generating it.
    #[arg(long, value_name = "FILE", conflicts_with = "grid_size")]
    grid: Option<PathBuf>,
    /// Generate a grid of 3I x J cells in memory.
    #[arg(long, value_name = "I,J", default_value = "400,600", value_parser = parse_grid_size)]
    grid_size: (usize, usize),
    /// Time steps.
    #[arg(long, value_name = "N", default_value = "1000", value_parser = count)]
    iterations: usize,
    /// Backend: auto, seq, threads, emu or cuda (default: PARLOOP_BACKEND, else auto).
    #[arg(long)]
    backend: Option<String>,
    /// Never show the progress bar.
    #[arg(long)]
    quiet: bool,
    /// Print the rms with 17 significant digits (to compare with the
    /// reference table) instead of OP2's `%10.5e`.
    #[arg(long)]
    precise: bool,
    /// Run distributed under MPI (`mpiexec -n N airfoil --partition metis`):
    /// partition the cells with metis, block or geometric (needs the `mpi`
    /// feature).
    #[arg(long, value_name = "METHOD")]
    partition: Option<String>,
    /// Only report the partitions over these numbers of parts (halo sizes),
    /// computed on this process, and exit (needs the `mpi` feature).
    #[arg(long, value_name = "N,N,...", value_delimiter = ',')]
    preview_parts: Vec<usize>,
}

/// C's `%10.5e`: five decimals, signed exponent of at least two digits;
/// `nan`, `inf` and `-inf` as C prints them (a diverged run's last rms is
/// reported before the run stops).
fn c_exp(v: f64) -> String {
    let s = format!("{v:.5e}");
    let text = match s.split_once('e').map(|(m, e)| (m, e.parse::<i32>())) {
        Some((mantissa, Ok(exp))) => format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs()),
        _ if v.is_nan() => "nan".into(),
        _ => s.to_lowercase(),
    };
    format!("{text:>10}")
}

fn run(args: Args) -> Result<(), RunError> {
    if args.grid.is_none() {
        // Refuse a grid that cannot fit before allocating any of it.
        let (i, j) = args.grid_size;
        let counts = Counts::generated(i, j)?;
        let bytes = counts.grid_bytes().and_then(|g| g.checked_add(Airfoil::estimated_bytes(&counts)?));
        check_memory(&format!("--grid-size {i},{j}: the grid and the solver's data"), bytes)?;
    }
    let backend: Backend = parloop_examples::cli::backend(args.backend.as_deref())?;
    #[cfg(feature = "mpi")]
    let universe = match args.partition {
        Some(_) => Some(parloop::mpi::initialize()?),
        None => None,
    };
    #[cfg(not(feature = "mpi"))]
    if args.partition.is_some() || !args.preview_parts.is_empty() {
        return Err(Error::Distributed {
            rank: 0,
            reason: "--partition and --preview-parts need the mpi feature: \
                     cargo build --release --features mpi --bin airfoil"
                .into(),
        }
        .into());
    }
    let rt = Runtime::with_backend(backend)?;
    // Under MPI, rank 0 alone prints.
    let lead = rt.rank() == 0;
    let t0 = Instant::now();
    let grid = match &args.grid {
        Some(path) => Grid::read_file(path)?,
        None => Grid::generate(args.grid_size.0, args.grid_size.1)?.rounded(),
    };
    let source = match &args.grid {
        Some(p) => p.display().to_string(),
        None => format!("generated {}x{}", args.grid_size.0, args.grid_size.1),
    };
    // Checked writes: a full disk or a closed pipe is an error, not a panic.
    macro_rules! say {
        ($($t:tt)*) => {
            if lead {
                writeln!(std::io::stdout(), $($t)*).map_err(stdout_error)
            } else {
                Ok(())
            }
        };
    }
    say!(
        "airfoil: {source} grid, {} nodes, {} cells, {} edges, {} boundary edges ({:.2} s); backend {} ({})",
        grid.nnode(),
        grid.ncell(),
        grid.nedge(),
        grid.nbedge(),
        t0.elapsed().as_secs_f64(),
        rt.backend(),
        match (rt.backend(), rt.device_name()) {
            (_, Some(device)) => device,
            (Backend::Seq, None) => "1 thread".into(),
            (_, None) => format!("{} threads", rayon_threads()),
        },
    )?;
    let mut airfoil = Airfoil::new(&rt, &grid)?;
    #[cfg(feature = "mpi")]
    {
        let method = |name: &str| -> Result<parloop::mpi::Partitioner, Error> {
            Ok(match name {
                "metis" => parloop::mpi::Partitioner::Metis,
                "block" => parloop::mpi::Partitioner::Block,
                "geometric" => parloop::mpi::Partitioner::Geometric(&airfoil.x),
                other => {
                    return Err(Error::Distributed {
                        rank: rt.rank(),
                        reason: format!("--partition {other}: expected metis, block or geometric"),
                    })
                }
            })
        };
        if !args.preview_parts.is_empty() {
            for &parts in &args.preview_parts {
                let t = Instant::now();
                let name = args.partition.as_deref().unwrap_or("metis");
                let report = rt.partition_preview(&airfoil.cells, &airfoil.pecell, method(name)?, parts)?;
                say!("{name} over {parts} parts ({:.2} s):\n{}", t.elapsed().as_secs_f64(), report.summary())?;
            }
            return Ok(());
        }
        if let Some(name) = &args.partition {
            let t = Instant::now();
            let report = rt.partition(&airfoil.cells, &airfoil.pecell, method(name)?)?;
            say!(
                "{name} partition over {} ranks ({:.2} s):\n{}",
                rt.ranks(),
                t.elapsed().as_secs_f64(),
                report.summary()
            )?;
        }
    }
    let bar = if lead && std::io::stderr().is_terminal() && !args.quiet {
        let bar = ProgressBar::new(args.iterations as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} iterations, {elapsed} elapsed, eta {eta}")
                .expect("a valid template"),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let start = Instant::now();
    let mut printed = Ok(());
    let result = airfoil.run_checked(args.iterations, |iter, rms| {
        bar.inc(1);
        if iter % 100 == 0 && printed.is_ok() {
            let rms = if args.precise { format!("{rms:.16e}") } else { c_exp(rms) };
            printed = bar.suspend(|| say!(" {iter:>4}  {rms}"));
        }
    });
    bar.finish_and_clear();
    result?;
    printed?;
    let wall = start.elapsed().as_secs_f64();
    let report = rt.report();
    let bytes: u64 = report.iter().map(|r| r.bytes).sum();
    // Planning includes compiling device modules on first use.
    // A fold from +0.0: an empty `Sum` of f64 is -0.0, printed "-0.000".
    let planning: f64 = report.iter().fold(0.0, |sum, r| sum + r.plan_seconds);
    // Rates of no iterations would be made up.
    if args.iterations == 0 {
        say!("wall time {wall:.3} s: no iterations ran")?;
        return Ok(());
    }
    let steady = (wall - planning).max(f64::MIN_POSITIVE);
    let iters = args.iterations as f64;
    // A device loop's first calls also time its candidate strategies.
    let trials = if rt.device_name().is_some() { "; the first iterations include trying loop strategies" } else { "" };
    say!(
        "wall time {wall:.3} s ({planning:.3} s planning and compiling), {:.3} ms per iteration, \
         {:.2} GB/s at the minimum-bytes model ({:.1} MB per iteration){trials}",
        steady * 1e3 / iters,
        bytes as f64 / steady / 1e9,
        bytes as f64 / iters / 1e6,
    )?;
    #[cfg(feature = "mpi")]
    if lead && universe.is_some() {
        for r in report.iter().filter(|r| r.halo_messages > 0 || r.mpi_wait_seconds > 0.0) {
            let bytes: u64 = r.halo_bytes.iter().map(|(_, b)| b).sum();
            writeln!(
                std::io::stdout(),
                "rank 0 {:<10} halo {:>8.2} MB in {:>6} messages, MPI wait {:.3} s",
                r.name,
                bytes as f64 / 1e6,
                r.halo_messages,
                r.mpi_wait_seconds
            )
            .map_err(stdout_error)?;
        }
    }
    Ok(())
}

fn rayon_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("airfoil: error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::c_exp;

    #[test]
    fn c_exp_prints_as_c_does_and_never_panics() {
        assert_eq!(c_exp(1.06011e-4), "1.06011e-04");
        assert_eq!(c_exp(-2.5e12), "-2.50000e+12");
        assert_eq!(c_exp(0.0), "0.00000e+00");
        // A diverged run reports its non-finite rms before stopping.
        assert_eq!(c_exp(f64::NAN), "       nan");
        assert_eq!(c_exp(f64::INFINITY), "       inf");
        assert_eq!(c_exp(f64::NEG_INFINITY), "      -inf");
    }
}
