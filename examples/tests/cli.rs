//! The `airfoil` and `airfoil-grid` command lines in subprocesses (with a
//! timeout): conflicting options, grids too large for memory, write errors
//! and a diverging flow end with a message and a non-zero exit, never a
//! panic, an abort or a silent success.

#[path = "support/fails.rs"]
mod fails;
use fails::fails_with;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use parloop_examples::airfoil::grid::Grid;

const AIRFOIL: &str = env!("CARGO_BIN_EXE_airfoil");
const AIRFOIL_GRID: &str = env!("CARGO_BIN_EXE_airfoil-grid");

/// Runs `bin args` with stdout sent to `stdout` (None: captured), killing
/// it after 120 s.
fn run(bin: &str, args: &[&str], stdout: Option<&Path>) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args).env("PARLOOP_BACKEND", "seq").stdin(Stdio::null()).stderr(Stdio::piped());
    match stdout {
        Some(path) => cmd.stdout(std::fs::OpenOptions::new().write(true).open(path).unwrap()),
        None => cmd.stdout(Stdio::piped()),
    };
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("{bin} {args:?} did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn temp(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("parloop-cli-{tag}-{}.dat", std::process::id()))
}

#[test]
fn grid_and_grid_size_together_are_an_error() {
    let path = temp("both");
    Grid::generate(2, 3).unwrap().write_file(&path).unwrap();
    let p = path.to_str().unwrap();
    let both = run(AIRFOIL, &["--grid", p, "--grid-size", "2,3", "--iterations", "1"], None);
    let alone = run(AIRFOIL, &["--grid", p, "--iterations", "1"], None);
    std::fs::remove_file(&path).unwrap();
    // clap's usage errors exit with 2.
    fails_with(&both, 2, &["--grid", "--grid-size", "cannot be used with"]);
    assert!(alone.status.success(), "{}", String::from_utf8_lossy(&alone.stderr));
}

#[test]
fn grid_sizes_that_cannot_fit_in_memory_are_refused_before_allocating() {
    for bin in [AIRFOIL, AIRFOIL_GRID] {
        let start = Instant::now();
        let out = run(
            bin,
            &["--grid-size", "100000,100000", "--iterations", "1"][..if bin == AIRFOIL { 4 } else { 2 }],
            None,
        );
        fails_with(&out, 1, &["out of memory", "--grid-size 100000,100000", "GB of memory available"]);
        assert!(start.elapsed() < Duration::from_secs(30), "{bin} took {:?}", start.elapsed());
        assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    }
}

#[test]
fn write_errors_are_reported() {
    let full = Path::new("/dev/full");
    if !full.exists() {
        eprintln!("no /dev/full here: skipped");
        return;
    }
    // Small enough to sit in a buffer until the end, and larger.
    for size in ["1,2", "10,10"] {
        let out = run(AIRFOIL_GRID, &["--grid-size", size], Some(full));
        fails_with(&out, 1, &["airfoil-grid: error: <stdout>", "No space left on device"]);
        let out = run(AIRFOIL_GRID, &["--grid-size", size, "-o", "/dev/full"], None);
        fails_with(&out, 1, &["airfoil-grid: error: /dev/full", "No space left on device"]);
    }
    let out = run(AIRFOIL, &["--grid-size", "1,2", "--iterations", "1"], Some(full));
    fails_with(&out, 1, &["airfoil: error: <stdout>", "No space left on device"]);
}

#[test]
fn a_collapsed_or_tangled_cell_is_refused_when_read() {
    // Collapse a cell away from the wake cut onto one point: the grid
    // still fits together, but the cell's time step is zero, so the first
    // update divided by zero ("diverged at iteration 1 (rms is NaN)").
    let mut grid = Grid::generate(2, 3).unwrap().rounded();
    let c = 8; // cell (2, 1): 3I = 6 cells a row
    let (x0, y0) = (grid.x[2 * grid.cell[4 * c] as usize], grid.x[2 * grid.cell[4 * c] as usize + 1]);
    for k in 1..4 {
        let n = grid.cell[4 * c + k] as usize;
        grid.x[2 * n] = x0;
        grid.x[2 * n + 1] = y0;
    }
    // Move an interior node of another cell far across its neighbours: the
    // cells around it turn inside out, and the flow diverged at iteration 5.
    let mut tangled = Grid::generate(2, 3).unwrap().rounded();
    let n = tangled.cell[4 * 8 + 2] as usize;
    tangled.x[2 * n] += 100.0;
    for (tag, grid, cell) in [("collapsed", grid, "cell 8 ("), ("tangled", tangled, "cell ")] {
        let path = temp(tag);
        grid.write_file(&path).unwrap();
        let p = path.to_str().unwrap();
        let out = run(AIRFOIL, &["--grid", p, "--iterations", "10"], None);
        std::fs::remove_file(&path).unwrap();
        fails_with(&out, 1, &[&format!("airfoil: error: {p}:"), cell, "has area", "anticlockwise"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains("wall time"), "{stdout}");
    }
}

#[test]
fn option_values_are_checked_and_named() {
    // "--grid-size:0: 0,5: ...": no line 0 of an option.
    let out = run(AIRFOIL, &["--grid-size", "0,5"], None);
    fails_with(&out, 1, &["airfoil: error: option `--grid-size`: 0,5: the airfoil grid needs"]);
    // "`4,4` is not a positive integer".
    fails_with(&run(AIRFOIL, &["--grid-size", "4,4,4"], None), 2, &["expected exactly two numbers"]);
    // "invalid digit found in string".
    fails_with(&run(AIRFOIL, &["--iterations", "-1"], None), 2, &["`-1` is not a non-negative integer"]);
    // An empty --backend was taken as auto.
    fails_with(&run(AIRFOIL, &["--backend", "", "--grid-size", "1,2"], None), 1, &["--backend", "empty"]);
    // No iterations: "0.002 ms per iteration, 0.00 GB/s" was made up.
    let out = run(AIRFOIL, &["--grid-size", " 1 , 2 ", "--iterations", "0"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("no iterations ran") && !stdout.contains("per iteration"), "{stdout}");
}
