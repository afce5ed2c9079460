//! The airfoil benchmark against OP2's reference data
//! (`shared/data/airfoil/README.md`): the generated grid file is
//! byte-identical to the reference grid, and 1000 iterations reproduce OP2's
//! residuals within 1e-10 relative on every CPU backend; each increment
//! strategy of the emulated device reproduces the first 200 (the default
//! strategy's whole 1000 run on the emulated device under MPI, in
//! `parloop-mpi-check --reference`, which ci/test runs).

#[path = "../../runtime/tests/support/device.rs"]
mod device;
use device::device_backend;
use parloop::{Backend, Error, Runtime, Strategy};
use parloop_examples::airfoil::{grid::Grid, Airfoil, REFERENCE_100X150};
use sha2::{Digest, Sha256};

/// SHA-256 of the reference 100x150 grid file (shared/data/airfoil/README.md).
const GRID_100X150_SHA256: &str = "f82b00093ef15cbdcf9e1672edfdcf1917961c58539f14a77f4585c14e426178";

fn grid_file_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    Grid::generate(100, 150).unwrap().write(&mut out).unwrap();
    out
}

#[test]
fn generated_grid_file_is_byte_identical_to_the_reference() {
    let bytes = grid_file_bytes();
    let hash: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hash, GRID_100X150_SHA256);
    let text = std::str::from_utf8(&bytes).unwrap();
    assert!(text.starts_with(" 45451 45000 89650 700 \n 9.000000 -0.000000 \n"));
}

#[test]
fn generated_coordinates_equal_the_file_after_rounding() {
    let bytes = grid_file_bytes();
    let read = Grid::parse(std::str::from_utf8(&bytes).unwrap(), "memory").unwrap();
    let generated = Grid::generate(100, 150).unwrap();
    assert_ne!(read.x, generated.x, "rounding to 6 decimals must matter");
    assert_eq!(read, generated.rounded());
}

fn residuals(backend: Backend, grid: &Grid) -> Vec<(usize, f64)> {
    let rt = Runtime::with_backend(backend).unwrap();
    let mut airfoil = Airfoil::new(&rt, grid).unwrap();
    airfoil.run(1000, |_, _| {}).unwrap()
}

fn assert_reference(got: &[(usize, f64)]) {
    assert_eq!(got.len(), 10);
    assert_reference_prefix(got);
}

/// The residuals printed so far (every 100 iterations) against the
/// reference's first lines.
fn assert_reference_prefix(got: &[(usize, f64)]) {
    assert!(!got.is_empty() && got.len() <= REFERENCE_100X150.len(), "{} residual lines", got.len());
    for (k, (&(iter, rms), &want)) in got.iter().zip(&REFERENCE_100X150).enumerate() {
        assert_eq!(iter, 100 * (k + 1));
        let rel = ((rms - want) / want).abs();
        assert!(rel <= 1e-10, "iteration {iter}: rms {rms:.17e}, reference {want:.17e}, relative error {rel:.2e}");
    }
}

/// The device path on the emulated device, with one increment strategy:
/// 200 iterations (the emulator runs every GPU thread on the host: the
/// whole 1000 of each strategy would take a quarter of CI's budget).
fn emu_residuals(strategy: Strategy) -> Vec<(usize, f64)> {
    let mut rt = Runtime::with_backend(device_backend()).unwrap();
    rt.set_strategy(Some(strategy));
    let grid = Grid::generate(100, 150).unwrap().rounded();
    let mut airfoil = Airfoil::new(&rt, &grid).unwrap();
    let got = airfoil.run(200, |_, _| {}).unwrap();
    assert_eq!(got.len(), 2);
    got
}

#[test]
fn emu_staged_reproduces_the_reference_residuals() {
    assert_reference_prefix(&emu_residuals(Strategy::Staged));
}

#[test]
fn emu_staged_atomic_reproduces_the_reference_residuals() {
    assert_reference_prefix(&emu_residuals(Strategy::StagedAtomic));
}

#[test]
fn emu_atomic_reproduces_the_reference_residuals() {
    assert_reference_prefix(&emu_residuals(Strategy::Atomic));
}

#[test]
fn emu_global_colour_reproduces_the_reference_residuals() {
    assert_reference_prefix(&emu_residuals(Strategy::GlobalColour));
}

#[test]
fn seq_reproduces_the_reference_residuals_on_the_generated_grid() {
    assert_reference(&residuals(Backend::Seq, &Grid::generate(100, 150).unwrap().rounded()));
}

#[test]
fn threads_reproduces_the_reference_residuals_on_the_generated_grid() {
    assert_reference(&residuals(Backend::Threads, &Grid::generate(100, 150).unwrap().rounded()));
}

/// The grid written to a file and read back, as a user would: the grid the
/// reference runs above use (the generated one, rounded as the file
/// rounds), so its residuals are theirs.
#[test]
fn the_grid_read_from_a_file_is_the_grid_of_the_reference_runs() {
    let path = std::env::temp_dir().join(format!("parloop-airfoil-grid-{}.dat", std::process::id()));
    Grid::generate(100, 150).unwrap().write_file(&path).unwrap();
    let grid = Grid::read_file(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(grid, Grid::generate(100, 150).unwrap().rounded());
    // And it runs: the first 100 iterations on seq give the first line.
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let mut airfoil = Airfoil::new(&rt, &grid).unwrap();
    assert_reference_prefix(&airfoil.run(100, |_, _| {}).unwrap());
}

fn parse_error(text: &str) -> (usize, String) {
    match Grid::parse(text, "g.dat").unwrap_err() {
        e @ Error::Input { .. } => {
            let msg = e.to_string();
            let Error::Input { line, .. } = e else { unreachable!() };
            (line, msg)
        }
        other => panic!("expected an input error, got {other:?}"),
    }
}

#[test]
fn malformed_grid_files_are_errors_naming_the_line() {
    let good = " 4 1 0 4 \n 0.0 0.0 \n 1.0 0.0 \n 1.0 1.0 \n 0.0 1.0 \n 0 1 2 3 \n 1 0 0 1 \n 2 1 0 2 \n 3 2 0 2 \n 0 3 0 2 \n";
    assert_eq!(Grid::parse(good, "g.dat").unwrap().ncell(), 1);
    let (line, msg) = parse_error(" 4 1 0 1 \n 0.0 0.0 \n 1.0 zero \n");
    assert_eq!(line, 3);
    assert!(msg.contains("g.dat:3") && msg.contains("`zero`"), "{msg}");
    let (_, msg) = parse_error(" 4 1 0 1 \n 0.0 0.0 \n");
    assert!(msg.contains("truncated") && msg.contains("node 1"), "{msg}");
    let (line, msg) = parse_error(" 4 1 0 1 \n 0 0 \n 1 0 \n 1 1 \n 0 1 \n 0 1 2 7 \n 0 1 0 1 \n");
    assert_eq!(line, 6);
    assert!(msg.contains("node 7 is out of range"), "{msg}");
    let (line, msg) = parse_error(" 4 1 0 1 \n 0 0 \n 1 0 \n 1 1 \n 0 1 \n 0 1 2 3 \n 0 1 0 3 \n");
    assert_eq!(line, 7);
    assert!(msg.contains("bound `3`"), "{msg}");
    let (line, _) = parse_error(" 4 1 0 \n");
    assert_eq!(line, 1);
    let (line, msg) = parse_error(" 4 1 0 1 \n 0 0 5 \n");
    assert_eq!(line, 2);
    assert!(msg.contains("extra field"), "{msg}");
    let (_, msg) = parse_error("");
    assert!(msg.contains("truncated"), "{msg}");
}

#[test]
fn invalid_grid_sizes_are_errors() {
    // They were Error::Input on "line 0": "--grid-size:0: 0,10: ...".
    for (i, j) in [(0, 10), (10, 1)] {
        let e = Grid::generate(i, j).unwrap_err();
        assert!(matches!(e, Error::InvalidDeclaration { .. }), "{e:?}");
        assert!(e.to_string().starts_with(&format!("option `--grid-size`: {i},{j}: ")), "{e}");
    }
}

#[test]
fn the_airfoil_binary_prints_the_reference_residual_format() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_airfoil"))
        .args(["--grid-size", "100,150", "--iterations", "100", "--backend", "threads"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.lines().any(|l| l == "  100  5.09640e-04"), "{stdout}");
    assert!(stdout.contains("GB/s"), "{stdout}");
}

#[test]
fn the_airfoil_binary_reports_bad_input_without_panicking() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_airfoil")).args(args).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (ok, err) = run(&["--grid", "/nonexistent/grid.dat"]);
    assert!(!ok && err.contains("/nonexistent/grid.dat") && !err.contains("panicked"), "{err}");
    let (ok, err) = run(&["--backend", "cuda", "--iterations", "1", "--grid-size", "2,3"]);
    assert!(!ok && err.contains("cuda") && !err.contains("panicked"), "{err}");
    let (ok, err) = run(&["--grid-size", "0,3"]);
    assert!(!ok && err.contains("0,3") && !err.contains("panicked"), "{err}");
}

#[test]
fn the_profile_counts_every_loop_and_its_bytes() {
    let rt = Runtime::with_backend(Backend::Threads).unwrap();
    let grid = Grid::generate(10, 15).unwrap().rounded();
    let mut airfoil = Airfoil::new(&rt, &grid).unwrap();
    airfoil.run(3, |_, _| {}).unwrap();
    let report = rt.report();
    let names: Vec<&str> = report.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["save_soln", "adt_calc", "res_calc", "bres_calc", "update"]);
    let calls: Vec<u64> = report.iter().map(|r| r.calls).collect();
    assert_eq!(calls, [3, 6, 6, 6, 6]);
    // save_soln moves q (read) and qold (written): 2 x 32 bytes per cell per call.
    assert_eq!(report[0].bytes, 3 * 2 * 32 * grid.ncell() as u64);
    let json: serde_json::Value = serde_json::from_str(&rt.report_json()).unwrap();
    assert_eq!(json["loops"][2]["name"], "res_calc");
    assert_eq!(json["loops"][2]["calls"], 6);
    assert!(rt.report_table().contains("res_calc"));
}

#[test]
fn parloop_profile_json_writes_the_profile_at_exit() {
    let path = std::env::temp_dir().join(format!("parloop-profile-{}.json", std::process::id()));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_airfoil"))
        .args(["--grid-size", "10,15", "--iterations", "2", "--backend", "seq"])
        .env("PARLOOP_PROFILE", format!("json:{}", path.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    let loops = json["loops"].as_array().unwrap();
    assert_eq!(loops.len(), 5);
    assert_eq!(loops[4]["name"], "update");
    assert_eq!(loops[4]["calls"], 4);
    assert!(loops[4]["bytes"].as_u64().unwrap() > 0);
}

/// 20 steps of the 100x150 grid with the kernels' lane-wise twins on or
/// off: the rms of every step and the final q, res and adt, as bits.
fn airfoil_bits(backend: Backend, simd: bool) -> Vec<u64> {
    let grid = Grid::generate(100, 150).unwrap();
    let mut rt = Runtime::with_backend(backend).unwrap();
    rt.set_simd(simd);
    let mut airfoil = Airfoil::new(&rt, &grid).unwrap();
    let mut bits: Vec<u64> = (0..20).map(|_| airfoil.step().unwrap().to_bits()).collect();
    for dat in [&airfoil.q, &airfoil.res, &airfoil.adt] {
        bits.extend(dat.values().unwrap().iter().map(|v| v.to_bits()));
    }
    bits
}

#[test]
fn lane_wise_kernels_compute_the_scalar_results_bit_for_bit() {
    if !parloop::__private::avx2() {
        eprintln!("no AVX2 here: kernels run scalar only, nothing to compare");
        return;
    }
    for backend in [Backend::Seq, Backend::Threads] {
        let (scalar, lanes) = (airfoil_bits(backend, false), airfoil_bits(backend, true));
        assert_eq!(scalar.len(), lanes.len());
        let differ = scalar.iter().zip(&lanes).filter(|(a, b)| a != b).count();
        assert_eq!(differ, 0, "{backend:?}: {differ} of {} values differ between lanes and scalar", scalar.len());
    }
}

#[test]
fn a_grid_without_cells_is_an_error_not_a_divergence() {
    // Its residual, a mean over cells, was 0 / 0: "diverged (rms is NaN)".
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let mut airfoil = Airfoil::new(&rt, &Grid::parse(" 0 0 0 0 \n", "empty.dat").unwrap()).unwrap();
    let err = airfoil.step().unwrap_err();
    assert!(matches!(&err, Error::Incompatible { reason, .. } if reason.contains("no cells")), "{err}");
}
