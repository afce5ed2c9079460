//! What ParaView will see: every kind of file the VTK writer makes, read
//! back by VTK's own readers (Debian's python3-vtk9, through
//! tests/support/vtk_read.py), points, cells and values compared with what
//! was written. Without python3-vtk9 the reading tests say so and skip,
//! unless PARLOOP_REQUIRE_VTK=1 (as in ci/test), where they fail.

use std::io::Write as _;
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
    assert!(e.to_string().contains("`p`") && e.to_string().contains("gather"), "{e}");
    // A component count whose product with the points overflows: said so
    // (it was "expected 18446744073709551615 values").
    let e = write_vtu(&dir.join("a.vtu"), &mesh, &[Field::vector("w", usize::MAX, &short)], &[]).unwrap_err();
    assert!(matches!(e, Error::InvalidDeclaration { .. }) && e.to_string().contains("overflows"), "{e}");
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

/// The collection a series of `name` writes for `times`: checked byte for
/// byte, which also says it is well-formed XML of the shape VTK reads.
fn expected_pvd(name: &str, times: &[f64]) -> String {
    let mut s = String::from(
        "<?xml version=\"1.0\"?>\n<VTKFile type=\"Collection\" version=\"0.1\" byte_order=\"LittleEndian\">\n  <Collection>\n",
    );
    for (k, t) in times.iter().enumerate() {
        s.push_str(&format!("    <DataSet timestep=\"{t:?}\" group=\"\" part=\"0\" file=\"{name}_{k:06}.vtu\"/>\n"));
    }
    s + "  </Collection>\n</VTKFile>\n"
}

/// The file's identity: a collection written whole is a new file renamed
/// into place, a step added in place keeps it.
#[cfg(unix)]
fn inode(path: &Path) -> u64 {
    std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).unwrap())
}

#[test]
fn a_long_series_lists_every_step_in_order_at_every_step() {
    let py = vtk_python();
    let dir = temp_dir("long");
    let mesh = unit_square(1, 1).unwrap();
    let mut series = TimeSeries::new(&dir, "s").unwrap();
    let times: Vec<f64> = (0..300).map(|k| k as f64 * 0.01 - 1.0).collect();
    let mut size = 0;
    for k in 0..times.len() {
        let p: Vec<f64> = (0..mesh.vertices()).map(|v| (v + k) as f64).collect();
        let vtu = series.write(times[k], &mesh, &[Field::scalar("p", &p)], &[]).unwrap();
        assert_eq!(vtu, dir.join(format!("s_{k:06}.vtu")));
        let pvd = std::fs::read_to_string(series.pvd_path()).unwrap();
        assert_eq!(pvd, expected_pvd("s", &times[..=k]), "after step {k}");
        // The collection grows by the step's line: linear in the steps.
        let line = pvd.lines().nth(3 + k).unwrap();
        if k > 0 {
            assert_eq!(pvd.len() - size, line.len() + 1, "step {k}: {line}");
        }
        assert!(line.len() < 100, "{line}");
        size = pvd.len();
        if let (Some(py), 0 | 1 | 2 | 17 | 299) = (&py, k) {
            let read = read_back(py, &series.pvd_path());
            let read = read.as_array().unwrap();
            assert_eq!(read.len(), k + 1);
            for (j, entry) in read.iter().enumerate() {
                assert_close(&[entry["timestep"].as_f64().unwrap()], &[times[j]], &format!("step {j} of {k}: time"));
                assert_eq!(entry["file"].as_str(), Some(format!("s_{j:06}.vtu").as_str()));
            }
            let p: Vec<f64> = (0..mesh.vertices()).map(|v| (v + k) as f64).collect();
            check_grid(&read[k]["grid"], &mesh, &[Field::scalar("p", &p)], &[]);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Each step writes its own line and the closing tags, not the collection:
/// a mark put in the first step's line survives later steps, and the file
/// stays the same file (it was written whole and renamed at every step,
/// O(N^2) bytes for N steps).
#[test]
fn a_step_adds_its_line_without_rewriting_the_collection() {
    let dir = temp_dir("append");
    let mesh = unit_square(1, 1).unwrap();
    let mut series = TimeSeries::new(&dir, "s").unwrap();
    let times: Vec<f64> = (0..20).map(|k| k as f64 / 8.0).collect();
    for &t in &times[..3] {
        series.write(t, &mesh, &[], &[]).unwrap();
    }
    let pvd = series.pvd_path();
    #[cfg(unix)]
    let file = inode(&pvd);
    // Marked in place, the length kept.
    let marked = std::fs::read_to_string(&pvd).unwrap().replacen("file=\"s_000000.vtu\"", "file=\"MARKED_0.vtu\"", 1);
    assert!(marked.contains("MARKED_0"));
    std::fs::OpenOptions::new().write(true).open(&pvd).unwrap().write_all(marked.as_bytes()).unwrap();
    for &t in &times[3..] {
        series.write(t, &mesh, &[], &[]).unwrap();
    }
    let got = std::fs::read_to_string(&pvd).unwrap();
    let want = expected_pvd("s", &times).replacen("file=\"s_000000.vtu\"", "file=\"MARKED_0.vtu\"", 1);
    assert_eq!(got, want);
    #[cfg(unix)]
    assert_eq!(inode(&pvd), file, "the collection was replaced");
    assert!(!dir.join(".s.pvd.tmp").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A collection changed behind the series' back (truncated, appended to,
/// its closing tags altered, removed) is written whole at the next step,
/// never patched into a broken file.
#[test]
fn a_collection_changed_meanwhile_is_written_whole() {
    let dir = temp_dir("changed");
    let mesh = unit_square(1, 1).unwrap();
    let mut series = TimeSeries::new(&dir, "s").unwrap();
    let pvd = series.pvd_path();
    let mut times = vec![0.0, 1.0];
    for &t in &times {
        series.write(t, &mesh, &[], &[]).unwrap();
    }
    type Change = fn(&Path);
    let changes: [(&str, Change); 7] = [
        ("truncated", |p| {
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.set_len(f.metadata().unwrap().len() - 11).unwrap();
        }),
        ("truncated to nothing", |p| std::fs::File::create(p).map(drop).unwrap()),
        // More than the next step writes over.
        ("appended to", |p| {
            let comment = format!("<!-- {} -->\n", "x".repeat(300));
            std::fs::OpenOptions::new().append(true).open(p).unwrap().write_all(comment.as_bytes()).unwrap()
        }),
        // One step less and a comment, of the same length: the closing
        // tags earlier.
        ("replaced by a file of the same length", |p| {
            let s = std::fs::read_to_string(p).unwrap();
            let last = s.rfind("    <DataSet").unwrap();
            let end = last + s[last..].find('\n').unwrap() + 1;
            let comment = format!("<!--{}-->\n", " ".repeat(end - last - 8));
            let shorter = format!("{}{}{comment}", &s[..last], &s[end..]);
            assert_eq!(shorter.len(), s.len());
            std::fs::write(p, shorter).unwrap();
        }),
        ("closing tags altered", |p| {
            let s = std::fs::read_to_string(p).unwrap().replace("</VTKFile>", "</VTKFILE>");
            std::fs::write(p, s).unwrap();
        }),
        ("removed", |p| std::fs::remove_file(p).unwrap()),
        // Replaced by another whole file: its closing tags elsewhere.
        ("replaced", |p| std::fs::write(p, expected_pvd("other", &[0.0, 1.0, 2.0, 3.0, 4.0])).unwrap()),
    ];
    for (what, change) in changes {
        change(&pvd);
        let t = times.len() as f64;
        series.write(t, &mesh, &[], &[]).unwrap();
        times.push(t);
        assert_eq!(std::fs::read_to_string(&pvd).unwrap(), expected_pvd("s", &times), "{what}");
        // And in place again after that.
        #[cfg(unix)]
        let file = inode(&pvd);
        series.write(t + 0.5, &mesh, &[], &[]).unwrap();
        times.push(t + 0.5);
        assert_eq!(std::fs::read_to_string(&pvd).unwrap(), expected_pvd("s", &times), "{what}, next step");
        #[cfg(unix)]
        assert_eq!(inode(&pvd), file, "{what}: the collection was replaced");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(target_os = "linux")]
#[path = "../../runtime/tests/support/child.rs"]
mod child;

/// A step whose line could only be written in part (the file size limit
/// reached midway, as a full disk would) is an error naming the collection,
/// which is put back as it was: complete, without the step. The next step
/// writes it whole. (In a child process: the limit is the whole process's.)
#[cfg(target_os = "linux")]
#[test]
fn a_failed_step_leaves_the_collection_as_it_was() {
    let name = "a_failed_step_leaves_the_collection_as_it_was";
    child::in_child(name, "fsize", &[], std::time::Duration::from_secs(60), || {
        let dir = temp_dir("fsize");
        let mesh = unit_square(1, 1).unwrap();
        let mut series = TimeSeries::new(&dir, "s").unwrap();
        let pvd = series.pvd_path();
        let mut times: Vec<f64> = (0..60).map(|k| k as f64).collect();
        for &t in &times {
            series.write(t, &mesh, &[], &[]).unwrap();
        }
        let before = std::fs::read_to_string(&pvd).unwrap();
        let vtu = std::fs::metadata(dir.join("s_000000.vtu")).unwrap().len();
        // Room for the step's .vtu and 30 more bytes of collection, less
        // than its line and closing tags.
        let limit = before.len() as u64 + 30;
        assert!(vtu < limit, "{vtu} bytes of .vtu, {limit} of limit");
        let old = {
            let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            // SAFETY: plain system calls on valid structs.
            assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut r) }, 0);
            r
        };
        let cap = libc::rlimit { rlim_cur: limit, rlim_max: old.rlim_max };
        // SAFETY: as above; SIGXFSZ ignored, the write fails with EFBIG.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &cap), 0);
        }
        let e = series.write(60.0, &mesh, &[], &[]).unwrap_err();
        assert!(matches!(e, Error::Io { .. }) && e.to_string().contains(&pvd.display().to_string()), "{e}");
        assert_eq!(std::fs::read_to_string(&pvd).unwrap(), before);
        // SAFETY: as above.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &old) }, 0);
        // The step again, counted now; then a later one, in place.
        series.write(60.0, &mesh, &[], &[]).unwrap();
        times.push(60.0);
        assert_eq!(std::fs::read_to_string(&pvd).unwrap(), expected_pvd("s", &times));
        let file = inode(&pvd);
        series.write(61.0, &mesh, &[], &[]).unwrap();
        times.push(61.0);
        assert_eq!(std::fs::read_to_string(&pvd).unwrap(), expected_pvd("s", &times));
        assert_eq!(inode(&pvd), file);
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

#[test]
fn replace_removes_an_earlier_series_and_nothing_else() {
    let dir = temp_dir("replace");
    let mesh = unit_square(1, 1).unwrap();
    let mut old = TimeSeries::new(&dir, "s").unwrap();
    for t in 0..5 {
        old.write(t as f64, &mesh, &[], &[]).unwrap();
    }
    drop(old);
    // Files this naming makes: step 1 000 000 has seven digits, and a
    // collection written whole may have left its temporary file.
    let ours = ["s_1000000.vtu", ".s.pvd.tmp"];
    // Files it does not make, and a folder.
    let others = [
        "s_.vtu",
        "s_12.vtu",
        "s_0000001.vtu",
        "s_00000a.vtu",
        "s_000001.vtu.bak",
        "sx_000000.vtu",
        "t_000000.vtu",
        "s.vtu",
        "other.pvd",
        "S.pvd",
    ];
    for f in ours.iter().chain(&others) {
        std::fs::write(dir.join(f), "x").unwrap();
    }
    std::fs::create_dir(dir.join("s_000009.vtu")).unwrap();
    // An invalid name removes nothing.
    assert!(TimeSeries::replace(&dir, "s/..").is_err());
    assert!(dir.join("s_000004.vtu").exists() && dir.join("s.pvd").exists());
    let mut new = TimeSeries::replace(&dir, "s").unwrap();
    let mut files: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    let mut want: Vec<String> = others.iter().map(|f| f.to_string()).collect();
    want.push("s_000009.vtu".into());
    want.sort();
    assert_eq!(files, want);
    for t in [0.5, 1.5] {
        new.write(t, &mesh, &[], &[]).unwrap();
    }
    assert_eq!(std::fs::read_to_string(new.pvd_path()).unwrap(), expected_pvd("s", &[0.5, 1.5]));
    assert!(dir.join("s_000001.vtu").exists() && !dir.join("s_000002.vtu").exists());
    // A folder that does not exist yet is made.
    let fresh = dir.join("fresh");
    TimeSeries::replace(&fresh, "s").unwrap();
    assert!(fresh.is_dir());
    std::fs::remove_dir_all(&dir).unwrap();
}
