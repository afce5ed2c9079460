//! Writes the airfoil C-grid in OP2's file format.
//!
//! `cargo run --release --bin airfoil-grid -- --grid-size 100,150 -o grid_100x150.dat`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use parloop::Error;
use parloop_examples::airfoil::check_memory;
use parloop_examples::airfoil::grid::{parse_grid_size, Counts, Grid};

#[derive(Parser, Debug)]
#[command(about = "Writes OP2's NACA0012 airfoil C-grid (3I x J cells) in the OP2 grid file format")]
struct Args {
    /// Grid size I,J.
    #[arg(long, value_name = "I,J", default_value = "400,600", value_parser = parse_grid_size)]
    grid_size: (usize, usize),
    /// Output file (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

fn run(args: &Args) -> Result<(), Error> {
    let (i, j) = args.grid_size;
    // Refuse a grid that cannot fit before allocating any of it.
    check_memory(&format!("--grid-size {i},{j}: the grid"), Counts::generated(i, j)?.grid_bytes())?;
    let grid = Grid::generate(i, j)?;
    match &args.output {
        Some(path) => grid.write_file(path),
        // `write` flushes: a full disk or a closed pipe is reported.
        None => grid.write(std::io::stdout().lock()).map_err(|source| Error::Io { path: "<stdout>".into(), source }),
    }
}

fn main() -> ExitCode {
    match run(&Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("airfoil-grid: error: {e}");
            ExitCode::FAILURE
        }
    }
}
