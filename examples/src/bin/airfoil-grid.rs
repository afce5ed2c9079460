//! Writes the airfoil C-grid in OP2's file format.
//!
//! `cargo run --release --bin airfoil-grid -- --grid-size 100,150 -o grid_100x150.dat`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use parloop_examples::airfoil::grid::Grid;

#[derive(Parser, Debug)]
#[command(about = "Writes OP2's NACA0012 airfoil C-grid (3I x J cells) in the OP2 grid file format")]
struct Args {
    /// Grid size I,J.
    #[arg(long, value_name = "I,J", default_value = "400,600")]
    grid_size: String,
    /// Output file (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let size = args
        .grid_size
        .split_once(',')
        .and_then(|(i, j)| Some((i.trim().parse::<usize>().ok()?, j.trim().parse::<usize>().ok()?)));
    let Some((i, j)) = size else {
        eprintln!("airfoil-grid: error: --grid-size `{}`: expected I,J such as 400,600", args.grid_size);
        return ExitCode::FAILURE;
    };
    let result = Grid::generate(i, j).and_then(|grid| match &args.output {
        Some(path) => grid.write_file(path),
        None => grid
            .write(std::io::BufWriter::new(std::io::stdout().lock()))
            .map_err(|source| parloop::Error::Io { path: "<stdout>".into(), source }),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("airfoil-grid: error: {e}");
            ExitCode::FAILURE
        }
    }
}
