//! What ParaView will see: every kind of file the VTK writer makes, read
//! back by VTK's own readers (Debian's python3-vtk9, through
//! tests/support/vtk_read.py), points, cells and values compared with what
//! was written. Without python3-vtk9 the reading tests say so and skip,
//! unless PARLOOP_REQUIRE_VTK=1 (as in ci/test), where they fail.

use std::path::{Path, PathBuf};
use std::process::Command;

use parloop::Error;
use parloop_mesh::vtk::{write_vtu, Field, TimeSeries};
use parloop_mesh::{unit_cube, unit_square, Mesh};
use serde_json::Value;

/// A Python that imports VTK's XML readers, or `None` (after saying why,
/// or failing when VTK is required).
fn vtk_python() -> Option<String> {
    let mut candidates = vec!["/usr/bin/python3".to_string(), "python3".to_string()];
    if let Ok(p) = std::env::var("PARLOOP_PYTHON") {
        candidates.insert(0, p);
    }
    for py in &candidates {
        let ok = Command::new(py)
            .args(["-c", "import vtkmodules.vtkIOXML, vtkmodules.vtkIOXMLParser"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(py.clone());
        }
    }
    let required = std::env::var("PARLOOP_REQUIRE_VTK").is_ok_and(|v| !v.is_empty() && v != "0");
    assert!(
        !required,
        "PARLOOP_REQUIRE_VTK is set but none of {candidates:?} imports vtk (apt-get install python3-vtk9)"
    );
    eprintln!("skipped: VTK's Python module (Debian python3-vtk9) is not installed; set PARLOOP_REQUIRE_VTK=1 to fail instead");
    None
}

fn read_back(py: &str, path: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/vtk_read.py");
    let out = Command::new(py).arg(script).arg(path).output().expect("python runs");
    assert!(out.status.success(), "VTK could not read {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the reader prints JSON")
}

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("parloop-vtk-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        // JSON's decimal round trip: within an ulp or two.
        assert!((g - w).abs() <= 1e-15 * w.abs().max(1e-300), "{what}[{k}]: {g} read back, {w} written");
    }
}

/// The grid VTK read against the mesh and fields written.
fn check_grid(grid: &Value, mesh: &Mesh, point_data: &[Field], cell_data: &[Field]) {
    let d = mesh.dim;
    let points: Vec<f64> = grid["points"].as_array().unwrap().iter().flat_map(floats).collect();
    let want: Vec<f64> = mesh.coords.chunks(d).flat_map(|x| [x[0], x[1], if d == 3 { x[2] } else { 0.0 }]).collect();
    assert_close(&points, &want, "points");
    let cells: Vec<u32> =
        grid["cells"].as_array().unwrap().iter().flat_map(|c| floats(c).into_iter().map(|v| v as u32)).collect();
    assert_eq!(cells, mesh.cells, "connectivity");
    assert_eq!(grid["cells"].as_array().unwrap().len(), mesh.num_cells());
    let vtk_type = if d == 2 { 5.0 } else { 10.0 };
    assert!(floats(&grid["types"]).iter().all(|&t| t == vtk_type), "cell types");
    for (fields, key) in [(point_data, "point_data"), (cell_data, "cell_data")] {
        assert_eq!(grid[key].as_object().unwrap().len(), fields.len(), "{key}: number of arrays");
        for f in fields {
            let a = &grid[key][f.name];
            let padded: Vec<f64> = if f.components == 2 {
                f.values.chunks(2).flat_map(|v| [v[0], v[1], 0.0]).collect()
            } else {
                f.values.to_vec()
            };
            let comps = if f.components == 2 { 3 } else { f.components };
            assert_eq!(a["components"].as_u64(), Some(comps as u64), "{key} {}: components", f.name);
            assert_close(&floats(&a["values"]), &padded, &format!("{key} {}", f.name));
        }
    }
}

#[test]
fn vtu_2d_reads_back_in_vtk() {
    let Some(py) = vtk_python() else { return };
    let dir = temp_dir("2d");
    let mesh = unit_square(3, 2).unwrap();
    let p: Vec<f64> =
        mesh.coords.chunks(2).map(|x| (-40.0 * ((x[0] - 0.5).powi(2) + (x[1] - 0.5).powi(2))).exp()).collect();
    let grad: Vec<f64> = mesh.coords.chunks(2).flat_map(|x| [x[1], -x[0] / 3.0]).collect();
    let id: Vec<f64> = (0..mesh.num_cells()).map(|c| c as f64 * 0.1 - 1.0).collect();
    let v3: Vec<f64> = (0..3 * mesh.num_cells()).map(|k| (k as f64).sin()).collect();
    let (pd, cd) = (
        [Field::scalar("p", &p), Field::vector("grad p", 2, &grad)],
        [Field::scalar("cell <id> & \"name\"", &id), Field::vector("v", 3, &v3)],
    );
    let path = dir.join("square.vtu");
    write_vtu(&path, &mesh, &pd, &cd).unwrap();
    check_grid(&read_back(&py, &path), &mesh, &pd, &cd);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn vtu_3d_reads_back_in_vtk() {
    let Some(py) = vtk_python() else { return };
    let dir = temp_dir("3d");
    let mesh = unit_cube(2, 1, 3).unwrap();
    let u: Vec<f64> = mesh.coords.chunks(3).map(|x| x[0] + 2.0 * x[1] - x[2] / 7.0).collect();
    let vol = vec![1.0 / 36.0; mesh.num_cells()];
    let (pd, cd) = ([Field::scalar("u", &u), Field::vector("x", 3, &mesh.coords)], [Field::scalar("volume", &vol)]);
    let path = dir.join("cube.vtu");
    write_vtu(&path, &mesh, &pd, &cd).unwrap();
    check_grid(&read_back(&py, &path), &mesh, &pd, &cd);
    // No data at all is a valid grid too.
    write_vtu(&path, &mesh, &[], &[]).unwrap();
    check_grid(&read_back(&py, &path), &mesh, &[], &[]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pvd_time_series_reads_back_in_vtk() {
    let Some(py) = vtk_python() else { return };
    let dir = temp_dir("pvd");
    let mesh = unit_square(4, 3).unwrap();
    let mut series = TimeSeries::new(&dir, "wave").unwrap();
    let times = [0.0, 0.001, 0.5, 10.0 / 3.0];
    let steps: Vec<Vec<f64>> =
        times.iter().map(|t| mesh.coords.chunks(2).map(|x| (x[0] - t).cos() * x[1]).collect()).collect();
    for (t, values) in times.iter().zip(&steps) {
        series.write(*t, &mesh, &[Field::scalar("p", values)], &[]).unwrap();
    }
    let read = read_back(&py, &series.pvd_path());
    let read = read.as_array().unwrap();
    assert_eq!(read.len(), times.len());
    for (k, entry) in read.iter().enumerate() {
        assert_eq!(entry["timestep"].as_f64(), Some(times[k]), "step {k}: time");
        assert_eq!(entry["file"].as_str(), Some(format!("wave_{k:06}.vtu").as_str()));
        check_grid(&entry["grid"], &mesh, &[Field::scalar("p", &steps[k])], &[]);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_fields_and_paths_are_errors() {
    let dir = temp_dir("bad");
    let mesh = unit_square(2, 2).unwrap();
    let short = vec![0.0; 8];
    let e = write_vtu(&dir.join("a.vtu"), &mesh, &[Field::scalar("p", &short)], &[]).unwrap_err();
    assert!(matches!(e, Error::WrongLength { expected: 9, got: 8, .. }), "{e}");
    assert!(e.to_string().contains("`p`"), "{e}");
    // 0 components: said so (it was "expected 0 values, got 0").
    let e = write_vtu(&dir.join("a.vtu"), &mesh, &[], &[Field::vector("v", 0, &[])]).unwrap_err();
    assert!(matches!(e, Error::InvalidDeclaration { .. }) && e.to_string().contains("0 components"), "{e}");
    let e = write_vtu(&dir.join("missing/a.vtu"), &mesh, &[], &[]).unwrap_err();
    assert!(matches!(e, Error::Io { .. }) && e.to_string().contains("missing/a.vtu"), "{e}");
    let mut broken = mesh.clone();
    broken.cells[0] = 99;
    assert!(write_vtu(&dir.join("b.vtu"), &broken, &[], &[]).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_times_and_names_are_errors() {
    let dir = temp_dir("names");
    let mesh = unit_square(2, 2).unwrap();
    let p = vec![0.0; mesh.vertices()];
    // Series names that would leave the folder, or are no file name.
    for name in ["../x", "a/b", "a\\b", "..", ".", "", "/x", "x\ny", "x\u{7f}"] {
        let e = TimeSeries::new(&dir.join("sub"), name).err().unwrap_or_else(|| panic!("{name:?} accepted"));
        assert!(matches!(e, Error::InvalidDeclaration { what: "VTK time series", .. }), "{name:?}: {e}");
    }
    assert!(!dir.join("sub").exists() && !dir.join("x.pvd").exists());
    // Times that are not numbers: nothing is written.
    let mut series = TimeSeries::new(&dir, "s").unwrap();
    for t in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let e = series.write(t, &mesh, &[Field::scalar("p", &p)], &[]).unwrap_err();
        assert!(matches!(e, Error::InvalidDeclaration { .. }) && e.to_string().contains(&format!("{t}")), "{e}");
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    series.write(0.5, &mesh, &[Field::scalar("p", &p)], &[]).unwrap();
    // Field names XML cannot carry (attribute values lose tabs and line
    // ends, and control characters are not XML).
    for name in ["a\u{1}", "a\nb", "a\tb", "a\u{85}", "a\u{fffe}"] {
        let e = write_vtu(&dir.join("c.vtu"), &mesh, &[], &[Field::scalar(name, &vec![0.0; mesh.num_cells()])])
            .unwrap_err();
        assert!(matches!(e, Error::InvalidDeclaration { what: "VTK field", .. }), "{name:?}: {e}");
        let e = series.write(1.0, &mesh, &[Field::scalar(name, &p)], &[]).unwrap_err();
        assert!(matches!(e, Error::InvalidDeclaration { what: "VTK field", .. }), "{name:?}: {e}");
    }
    assert!(!dir.join("c.vtu").exists() && !dir.join("s_000001.vtu").exists());
    let pvd = std::fs::read_to_string(series.pvd_path()).unwrap();
    assert_eq!(pvd.matches("<DataSet").count(), 1, "{pvd}");
    // A time not after the last (ParaView sorts steps by time and merges
    // equal ones: they were listed in write order): refused, nothing written.
    for t in [0.5, 0.25, -0.0] {
        let e = series.write(t, &mesh, &[Field::scalar("p", &p)], &[]).unwrap_err();
        assert!(matches!(e, Error::InvalidDeclaration { .. }) && e.to_string().contains("not after"), "{t}: {e}");
    }
    assert!(!dir.join("s_000001.vtu").exists());
    // A collection that cannot be written (its place is a folder) leaves
    // the step uncounted: the same time goes through once it can.
    std::fs::rename(series.pvd_path(), dir.join("saved.pvd")).unwrap();
    std::fs::create_dir(series.pvd_path()).unwrap();
    assert!(series.write(1.0, &mesh, &[Field::scalar("p", &p)], &[]).is_err());
    std::fs::remove_dir(series.pvd_path()).unwrap();
    series.write(1.0, &mesh, &[Field::scalar("p", &p)], &[]).unwrap();
    let pvd = std::fs::read_to_string(series.pvd_path()).unwrap();
    assert_eq!(pvd.matches("<DataSet").count(), 2, "{pvd}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// VTK's reader refused a whole file with an unnamed field, and dropped
/// the second of two fields of one name: both are errors when written.
#[test]
fn unnamed_and_repeated_field_names_are_errors() {
    let dir = temp_dir("repeated");
    let mesh = unit_square(2, 2).unwrap();
    let p = vec![0.0; mesh.vertices()];
    let c = vec![0.0; mesh.num_cells()];
    let e = write_vtu(&dir.join("a.vtu"), &mesh, &[Field::scalar("", &p)], &[]).unwrap_err();
    assert!(matches!(e, Error::InvalidDeclaration { what: "VTK field", .. }) && e.to_string().contains("empty"), "{e}");
    let e = write_vtu(&dir.join("a.vtu"), &mesh, &[Field::scalar("d", &p), Field::scalar("d", &p)], &[]).unwrap_err();
    assert!(matches!(e, Error::InvalidDeclaration { what: "VTK field", .. }) && e.to_string().contains("`d`"), "{e}");
    // One name for a point field and a cell field: two arrays VTK keeps apart.
    write_vtu(&dir.join("a.vtu"), &mesh, &[Field::scalar("d", &p)], &[Field::scalar("d", &c)]).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
