//! The wave demo (seed 000) against an independent reference written here
//! with plain loops over the triangles, its energy over the seed's whole
//! run, and every backend against `seq`.

use parloop::{Backend, Runtime};
use parloop_examples::wave::{initial_p, Wave, DT};
use parloop_mesh::{unit_square, Mesh};

/// The P1 operators of a triangle mesh, assembled the textbook way: each
/// element's stiffness matrix from the inverse of its Jacobian, `K_e =
/// |T| G G^T` with `G = grad lambda` of the reference element mapped by
/// `J^-T`, and the lumped mass `|T| / 3` per vertex.
struct Operators {
    /// Per triangle: its vertices and its 3 x 3 stiffness matrix.
    elements: Vec<([usize; 3], [[f64; 3]; 3])>,
    lumped: Vec<f64>,
}

impl Operators {
    fn new(mesh: &Mesh) -> Operators {
        let mut lumped = vec![0.0; mesh.vertices()];
        let mut elements = Vec::new();
        for c in mesh.cells.chunks(3) {
            let v = [c[0] as usize, c[1] as usize, c[2] as usize];
            let x = |k: usize| [mesh.coords[2 * v[k]], mesh.coords[2 * v[k] + 1]];
            // J = [x1 - x0, x2 - x0] as columns.
            let (j00, j10) = (x(1)[0] - x(0)[0], x(1)[1] - x(0)[1]);
            let (j01, j11) = (x(2)[0] - x(0)[0], x(2)[1] - x(0)[1]);
            let det = j00 * j11 - j01 * j10;
            assert!(det > 0.0, "triangle {v:?} is not counter-clockwise");
            // J^-T applied to the reference gradients (-1,-1), (1,0), (0,1).
            let inv_t = [[j11 / det, -j10 / det], [-j01 / det, j00 / det]];
            let reference = [[-1.0, -1.0], [1.0, 0.0], [0.0, 1.0]];
            let g: Vec<[f64; 2]> = reference
                .iter()
                .map(|r| [inv_t[0][0] * r[0] + inv_t[0][1] * r[1], inv_t[1][0] * r[0] + inv_t[1][1] * r[1]])
                .collect();
            let area = det / 2.0;
            let mut k = [[0.0; 3]; 3];
            for i in 0..3 {
                for j in 0..3 {
                    k[i][j] = area * (g[i][0] * g[j][0] + g[i][1] * g[j][1]);
                }
                lumped[v[i]] += area / 3.0;
            }
            elements.push((v, k));
        }
        Operators { elements, lumped }
    }

    fn stiffness(&self, u: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; u.len()];
        for (v, k) in &self.elements {
            for i in 0..3 {
                out[v[i]] += (0..3).map(|j| k[i][j] * u[v[j]]).sum::<f64>();
            }
        }
        out
    }

    /// `1/2 p.M p + 1/2 phi.K phi` and the modified energy of the leapfrog
    /// step, `... - dt^2/8 p.K p`.
    fn energies(&self, p: &[f64], phi: &[f64], dt: f64) -> (f64, f64) {
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        let mp: Vec<f64> = p.iter().zip(&self.lumped).map(|(p, m)| p * m).collect();
        let e = 0.5 * dot(p, &mp) + 0.5 * dot(phi, &self.stiffness(phi));
        (e, e - dt * dt / 8.0 * dot(p, &self.stiffness(p)))
    }

    /// Gershgorin's bound on the largest eigenvalue of `M^-1 K`.
    fn lambda_bound(&self) -> f64 {
        let mut rows = vec![0.0; self.lumped.len()];
        for (v, k) in &self.elements {
            for i in 0..3 {
                rows[v[i]] += k[i].iter().map(|x| x.abs()).sum::<f64>();
            }
        }
        rows.iter().zip(&self.lumped).map(|(r, m)| r / m).fold(0.0, f64::max)
    }
}

/// The seed's step, on plain vectors.
fn reference(mesh: &Mesh, steps: usize) -> (Vec<f64>, Vec<f64>) {
    let ops = Operators::new(mesh);
    let mut p: Vec<f64> = mesh.coords.chunks(2).map(|x| initial_p(x[0], x[1])).collect();
    let mut phi = vec![0.0; p.len()];
    for _ in 0..steps {
        for (f, q) in phi.iter_mut().zip(&p) {
            *f -= DT / 2.0 * q;
        }
        let k_phi = ops.stiffness(&phi);
        for i in 0..p.len() {
            p[i] += DT * k_phi[i] / ops.lumped[i];
        }
        for (f, q) in phi.iter_mut().zip(&p) {
            *f -= DT / 2.0 * q;
        }
    }
    (p, phi)
}

/// max |a - b| / max |b|.
fn relative(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max((x - y).abs())) / scale
}

fn run(backend: Backend, mesh: &Mesh, steps: usize) -> (Vec<f64>, Vec<f64>) {
    let rt = Runtime::with_backend(backend).unwrap();
    let mut wave = Wave::new(&rt, mesh, DT).unwrap();
    wave.run(steps, |_| {}).unwrap();
    (wave.p.values().unwrap(), wave.phi.values().unwrap())
}

#[test]
fn agrees_with_the_reference_after_1000_steps() {
    let mesh = unit_square(100, 100).unwrap();
    let (p_ref, phi_ref) = reference(&mesh, 1000);
    // The wave has moved: the reference is not the initial state.
    let p0: Vec<f64> = mesh.coords.chunks(2).map(|x| initial_p(x[0], x[1])).collect();
    assert!(relative(&p_ref, &p0) > 0.1);
    for backend in [Backend::Seq, Backend::Threads] {
        let (p, phi) = run(backend, &mesh, 1000);
        let (ep, ephi) = (relative(&p, &p_ref), relative(&phi, &phi_ref));
        eprintln!("{backend}: p {ep:.2e}, phi {ephi:.2e} relative to the reference");
        assert!(ep < 1e-12 && ephi < 1e-12, "{backend}: p differs by {ep:e}, phi by {ephi:e}");
    }
}

#[test]
fn energy_does_not_drift_over_the_seed_run() {
    // The seed's whole run: 10 000 steps of dt = 0.001 on unit_square(100, 100).
    let mesh = unit_square(100, 100).unwrap();
    let ops = Operators::new(&mesh);
    let rt = Runtime::with_backend(Backend::Threads).unwrap();
    let mut wave = Wave::new(&rt, &mesh, DT).unwrap();
    let energies = |wave: &Wave| {
        let (p, phi) = (wave.p.values().unwrap(), wave.phi.values().unwrap());
        let (e, modified) = ops.energies(&p, &phi, DT);
        // The solver's own energy (host loops of its own, summed in
        // another order) agrees.
        let own = wave.energy().unwrap().expect("a serial run computes the energy");
        assert!(
            (own.plain - e).abs() < 1e-10 * e && (own.modified - modified).abs() < 1e-10 * e,
            "solver energy {own:?}, test energy {e}, modified {modified}"
        );
        (e, modified)
    };
    let (e0, m0) = energies(&wave);
    // plain - modified = dt^2/8 p.K p lies in [0, dt^2 lambda / 4 plain].
    let band = DT * DT * ops.lambda_bound() / 4.0;
    assert!(band < 0.1, "dt is beyond the stability limit: dt^2 lambda / 4 = {band}");
    let (mut worst_modified, mut e_min, mut e_max) = (0.0f64, e0, e0);
    for _ in 0..100 {
        wave.run(100, |_| {}).unwrap();
        let (e, m) = energies(&wave);
        worst_modified = worst_modified.max(((m - m0) / m0).abs());
        (e_min, e_max) = (e_min.min(e), e_max.max(e));
        assert!(m <= e && e <= m / (1.0 - band), "energy {e} outside [{m}, {}]", m / (1.0 - band));
    }
    eprintln!(
        "10 000 steps: modified energy within {worst_modified:.2e} relative; energy in [{e_min:.12e}, {e_max:.12e}] \
         ({:.2e} relative spread; bound dt^2 lambda / 4 = {band:.2e})",
        (e_max - e_min) / e0
    );
    // Rounding only: the scheme's own (about 1e-16 a step) and, larger,
    // evaluating phi.K phi, whose sums cancel (1e-12 relative seen between
    // two summation orders); observed 4e-12 over the run.
    assert!(worst_modified < 1e-10, "the modified energy drifted by {worst_modified:e}");
    assert!((e_max - e_min) / e0 < band);
}

#[test]
fn every_backend_agrees_with_seq() {
    let mesh = unit_square(30, 30).unwrap();
    let steps = 300;
    let (p_seq, phi_seq) = run(Backend::Seq, &mesh, steps);
    let mut backends = vec![Backend::Threads, Backend::Emu];
    if Backend::auto() == Backend::Cuda {
        backends.push(Backend::Cuda);
    } else {
        eprintln!("cuda: skipped: no CUDA device");
    }
    for backend in backends {
        let (p, phi) = run(backend, &mesh, steps);
        let (ep, ephi) = (relative(&p, &p_seq), relative(&phi, &phi_seq));
        eprintln!("{backend}: p {ep:.2e}, phi {ephi:.2e} relative to seq");
        assert!(ep < 1e-12 && ephi < 1e-12, "{backend}: p differs by {ep:e}, phi by {ephi:e}");
    }
}

#[test]
fn a_3d_mesh_is_refused() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let cube = parloop_mesh::unit_cube(1, 1, 1).unwrap();
    let e = Wave::new(&rt, &cube, DT).err().expect("a 3-D mesh is an error");
    assert!(e.to_string().contains("3-D"), "{e}");
}

#[test]
fn cli_with_no_steps_reports_no_rates() {
    // It printed "1.40 us per loop (0 loops, ...)": rates of nothing.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wave"))
        .args(["--steps", "0", "--mesh-size", "4", "--backend", "seq", "--quiet"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("no loops ran") && !stdout.contains("per loop"), "{stdout}");
}

#[test]
fn cli_writes_a_time_series() {
    let dir = std::env::temp_dir().join(format!("parloop-wave-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wave"))
        .args(["--steps", "25", "--mesh-size", "8", "--backend", "seq", "--quiet", "--output-every", "10", "--output"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("81 vertices, 128 triangles") && stdout.contains("wall time"), "{stdout}");
    // Steps 0, 10, 20 and the last, 25.
    let pvd = std::fs::read_to_string(dir.join("wave.pvd")).unwrap();
    for (k, t) in ["0.0", "0.01", "0.02", "0.025"].iter().enumerate() {
        assert!(pvd.contains(&format!("timestep=\"{t}\" group=\"\" part=\"0\" file=\"wave_{k:06}.vtu\"")), "{pvd}");
        assert!(dir.join(format!("wave_{k:06}.vtu")).exists());
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_wave")).args(["--mesh-size", "0"]).output().unwrap();
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("0 divisions"));
    // A mesh far beyond memory is refused before it is generated.
    let huge =
        std::process::Command::new(env!("CARGO_BIN_EXE_wave")).args(["--mesh-size", "2000000"]).output().unwrap();
    let err = String::from_utf8_lossy(&huge.stderr);
    assert!(!huge.status.success() && err.contains("--mesh-size 2000000") && err.contains("memory"), "{err}");
}

#[test]
fn cli_refuses_a_run_above_the_stability_limit_before_stepping() {
    // h = 1/1000 and dt = 0.001: dt is above leapfrog's limit (about 0.7 h);
    // rounding errors in the shortest modes grow about 8-fold in energy per
    // step. The run was only checked after it finished: 3 steps (512-fold)
    // passed the check with exit status 0, and every output was written.
    let dir = std::env::temp_dir().join(format!("parloop-wave-unstable-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wave"))
        .args(["--steps", "3", "--mesh-size", "1000", "--backend", "seq", "--quiet", "--output-every", "1", "--output"])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}{stderr}", String::from_utf8_lossy(&out.stdout));
    for needle in ["dt = 0.001", "stability limit", "between 6.667e-4 and", "--mesh-size 666 or less"] {
        assert!(stderr.contains(needle), "no `{needle}` in {stderr}");
    }
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(!dir.join("wave_000000.vtu").exists(), "output written before the refusal");
    let _ = std::fs::remove_dir_all(&dir);
    // Below the limit the same command succeeds.
    let ok = std::process::Command::new(env!("CARGO_BIN_EXE_wave"))
        .args(["--steps", "3", "--mesh-size", "600", "--backend", "seq", "--quiet"])
        .output()
        .unwrap();
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
}

#[test]
fn cli_output_replaces_an_earlier_series_and_is_checked_first() {
    let dir = std::env::temp_dir().join(format!("parloop-wave-rerun-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let wave = |steps: &str, output: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_wave"))
            .args(["--steps", steps, "--mesh-size", "4", "--backend", "seq", "--quiet", "--output-every", "1"])
            .arg("--output")
            .arg(output)
            .output()
            .unwrap()
    };
    let out = wave("3", &dir);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    // A second run with fewer steps left wave_000002.vtu and
    // wave_000003.vtu behind, in no .pvd.
    let out = wave("1", &dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // "1 steps of dt"; the VTK writes were counted in the time per step.
    assert!(stdout.contains("; 1 step of dt = 0.001;") && stdout.contains("s writing VTK)"), "{stdout}");
    let mut files: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    assert_eq!(files, ["notes.txt", "wave.pvd", "wave_000000.vtu", "wave_000001.vtu"]);
    // A regular file as the folder said "File exists (os error 17)".
    let file = dir.join("notes.txt");
    let out = wave("1", &file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("notes.txt: exists and is not a directory") && out.stdout.is_empty(), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
    // An empty --backend was taken as auto.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wave"))
        .args(["--backend", "", "--steps", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(1) && stderr.contains("--backend") && stderr.contains("empty"), "{stderr}");
}
