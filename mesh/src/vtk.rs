//! VTK output for ParaView: `.vtu` files (XML UnstructuredGrid) with point
//! and cell data, and `.pvd` collections for time series.
//!
//! Data is written binary, *appended raw*: after the XML header, one
//! `<AppendedData encoding="raw">` block holds every array as a 64-bit
//! byte count followed by the little-endian values. That is the smallest
//! and fastest of VTK's XML encodings (base64 inline costs a third more
//! bytes and an encoding pass) and every VTK reader since 5.x, so every
//! ParaView, reads it. (The file is not well-formed XML after the `_`
//! marker; VTK's reader expects that.)
//!
//! A small writer rather than the `vtkio` crate: its last stable release
//! (0.6.3) is years old, 0.7 is still a release candidate, and its XML
//! support pulls in serde, quick-xml, nom and, by default, three
//! compression libraries (one of them C); writing this one format is
//! about 150 lines.
//!
//! ```
//! use parloop_mesh::{unit_square, vtk::{Field, TimeSeries}};
//! let mesh = unit_square(4, 4)?;
//! let dir = std::env::temp_dir().join(format!("vtk-doc-{}", std::process::id()));
//! let mut series = TimeSeries::new(&dir, "u")?;
//! let u: Vec<f64> = mesh.coords.chunks(2).map(|x| x[0] * x[1]).collect();
//! series.write(0.0, &mesh, &[Field::scalar("u", &u)], &[])?;
//! assert!(dir.join("u.pvd").exists() && dir.join("u_000000.vtu").exists());
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), parloop::Error>(())
//! ```

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use parloop::Error;

use crate::Mesh;

/// One array of point or cell data: `components` values per point (cell).
/// Vectors of 2-D meshes may have 2 components; they are written with a
/// zero third component, as ParaView's glyphs and filters expect.
#[derive(Clone, Copy, Debug)]
pub struct Field<'a> {
    /// The array's name in ParaView.
    pub name: &'a str,
    /// Values per entity: 1 (scalar), 2 or 3 (vector), or any other count.
    pub components: usize,
    /// `components` values per entity, entity after entity.
    pub values: &'a [f64],
}

impl<'a> Field<'a> {
    /// A scalar field.
    ///
    /// ```
    /// let f = parloop_mesh::vtk::Field::scalar("p", &[1.0, 2.0]);
    /// assert_eq!(f.components, 1);
    /// ```
    pub fn scalar(name: &'a str, values: &'a [f64]) -> Field<'a> {
        Field { name, components: 1, values }
    }

    /// A vector field of `dim` components per entity (2 or 3).
    ///
    /// ```
    /// let f = parloop_mesh::vtk::Field::vector("u", 2, &[1.0, 0.0, 0.0, 1.0]);
    /// assert_eq!(f.components, 2);
    /// ```
    pub fn vector(name: &'a str, dim: usize, values: &'a [f64]) -> Field<'a> {
        Field { name, components: dim, values }
    }
}

/// Writes `mesh` with its point and cell data to the `.vtu` file `path`.
/// A field whose length is not `components x entities` is an
/// [`Error::WrongLength`] naming it, a field whose name holds a control
/// character (which XML cannot carry) an [`Error::InvalidDeclaration`];
/// I/O errors are [`Error::Io`] naming the file. The mesh needs a sound
/// structure (shapes and entity numbers in range, as [`Mesh::check`]
/// checks), not positive orientation: a tangled mesh can be written to be
/// looked at.
///
/// ```
/// use parloop_mesh::{unit_cube, vtk::{write_vtu, Field}};
/// let mesh = unit_cube(2, 2, 2)?;
/// let volume = vec![1.0 / 48.0; mesh.num_cells()];
/// let path = std::env::temp_dir().join(format!("cube-doc-{}.vtu", std::process::id()));
/// write_vtu(&path, &mesh, &[Field::vector("x", 3, &mesh.coords)], &[Field::scalar("volume", &volume)])?;
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), parloop::Error>(())
/// ```
pub fn write_vtu(path: &Path, mesh: &Mesh, point_data: &[Field], cell_data: &[Field]) -> Result<(), Error> {
    mesh.check_structure()?;
    let (npoints, ncells) = (mesh.vertices(), mesh.num_cells());
    for (fields, n, kind) in [(point_data, npoints, "points"), (cell_data, ncells, "cells")] {
        for (k, f) in fields.iter().enumerate() {
            // VTK's reader refuses a whole file with an unnamed array, and
            // keeps the first of two arrays of one name (ParaView showed
            // neither problem: the file did not open, or a field was gone).
            if f.name.is_empty() {
                return Err(Error::InvalidDeclaration {
                    what: "VTK field",
                    name: String::new(),
                    reason: format!("{kind} field {k} has an empty name, which VTK's reader refuses (the whole file)"),
                });
            }
            if fields[..k].iter().any(|g| g.name == f.name) {
                return Err(Error::InvalidDeclaration {
                    what: "VTK field",
                    name: f.name.escape_debug().to_string(),
                    reason: format!(
                        "two {kind} fields have this name: VTK's reader keeps the first and drops the other"
                    ),
                });
            }
            if let Some(c) = f.name.chars().find(|&c| !xml_char(c)) {
                return Err(Error::InvalidDeclaration {
                    what: "VTK field",
                    name: f.name.escape_debug().to_string(),
                    reason: format!(
                        "its name holds {:?}, which an XML attribute cannot carry (control characters are refused)",
                        c
                    ),
                });
            }
            if f.components == 0 {
                return Err(Error::InvalidDeclaration {
                    what: "VTK field",
                    name: f.name.into(),
                    reason: "0 components: a field has at least 1 value per point or cell".into(),
                });
            }
            let expected = f.components.checked_mul(n);
            if expected != Some(f.values.len()) {
                return Err(Error::WrongLength {
                    what: "VTK field",
                    name: f.name.into(),
                    expected: expected.unwrap_or(usize::MAX),
                    got: f.values.len(),
                    detail: format!("{} components x {n} {kind}", f.components),
                });
            }
        }
    }
    let io = |source| Error::Io { path: path.display().to_string(), source };
    let file = std::fs::File::create(path).map_err(io)?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    write_vtu_to(&mut w, mesh, point_data, cell_data).map_err(io)?;
    w.flush().map_err(io)
}

/// An array of the appended block: its XML element and its bytes.
struct Appended<'a> {
    xml_type: &'static str,
    name: Option<&'a str>,
    components: usize,
    bytes: u64,
    write: WriteFn<'a>,
}

type WriteFn<'a> = Box<dyn Fn(&mut dyn Write) -> std::io::Result<()> + 'a>;

/// `entities x components` values as Float64; `values` makes the iterator.
fn f64_array<'a>(name: Option<&'a str>, entities: usize, components: usize, values: ValuesFn<'a>) -> Appended<'a> {
    Appended {
        xml_type: "Float64",
        name,
        components,
        bytes: 8 * (entities * components) as u64,
        write: Box::new(move |w| values().try_for_each(|v| w.write_all(&v.to_le_bytes()))),
    }
}

type ValuesFn<'a> = Box<dyn Fn() -> Box<dyn Iterator<Item = f64> + 'a> + 'a>;

/// Vectors of 2 components padded with a zero third.
fn padded<'a>(f: &Field<'a>) -> (usize, ValuesFn<'a>) {
    let values = f.values;
    if f.components == 2 {
        (3, Box::new(move || Box::new(values.chunks_exact(2).flat_map(|v| [v[0], v[1], 0.0]))))
    } else {
        (f.components, Box::new(move || Box::new(values.iter().copied())))
    }
}

fn write_vtu_to(w: &mut dyn Write, mesh: &Mesh, point_data: &[Field], cell_data: &[Field]) -> std::io::Result<()> {
    let (npoints, ncells, per) = (mesh.vertices(), mesh.num_cells(), mesh.dim + 1);
    let mut arrays: Vec<(&str, Appended)> = Vec::new();
    for f in point_data {
        let (c, it) = padded(f);
        arrays.push(("PointData", f64_array(Some(f.name), npoints, c, it)));
    }
    for f in cell_data {
        let (c, it) = padded(f);
        arrays.push(("CellData", f64_array(Some(f.name), ncells, c, it)));
    }
    let dim = mesh.dim;
    let coords = &mesh.coords;
    arrays.push((
        "Points",
        f64_array(
            None,
            npoints,
            3,
            Box::new(move || {
                Box::new(coords.chunks_exact(dim).flat_map(move |x| [x[0], x[1], if dim == 3 { x[2] } else { 0.0 }]))
            }),
        ),
    ));
    // Int64 connectivity and offsets: VTK's own id type, no size limit.
    let cells = &mesh.cells;
    arrays.push((
        "Cells",
        Appended {
            xml_type: "Int64",
            name: Some("connectivity"),
            components: 1,
            bytes: 8 * cells.len() as u64,
            write: Box::new(move |w| cells.iter().try_for_each(|&v| w.write_all(&i64::from(v).to_le_bytes()))),
        },
    ));
    arrays.push((
        "Cells",
        Appended {
            xml_type: "Int64",
            name: Some("offsets"),
            components: 1,
            bytes: 8 * ncells as u64,
            write: Box::new(move |w| (1..=ncells).try_for_each(|c| w.write_all(&((c * per) as i64).to_le_bytes()))),
        },
    ));
    // VTK_TRIANGLE = 5, VTK_TETRA = 10.
    let cell_type: u8 = if mesh.dim == 2 { 5 } else { 10 };
    arrays.push((
        "Cells",
        Appended {
            xml_type: "UInt8",
            name: Some("types"),
            components: 1,
            bytes: ncells as u64,
            write: Box::new(move |w| {
                let chunk = [cell_type; 4096];
                let mut left = ncells;
                while left > 0 {
                    let n = left.min(chunk.len());
                    w.write_all(&chunk[..n])?;
                    left -= n;
                }
                Ok(())
            }),
        },
    ));

    let mut xml = String::new();
    let _ = writeln!(xml, "<?xml version=\"1.0\"?>");
    let _ = writeln!(
        xml,
        "<VTKFile type=\"UnstructuredGrid\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">"
    );
    let _ = writeln!(xml, "  <UnstructuredGrid>\n    <Piece NumberOfPoints=\"{npoints}\" NumberOfCells=\"{ncells}\">");
    let mut offset = 0u64;
    let mut open: Option<&str> = None;
    for (section, a) in &arrays {
        if open != Some(section) {
            if let Some(prev) = open {
                let _ = writeln!(xml, "      </{prev}>");
            }
            let _ = writeln!(xml, "      <{section}>");
            open = Some(section);
        }
        let name = a.name.map(|n| format!(" Name=\"{}\"", escape(n))).unwrap_or_default();
        let _ = writeln!(
            xml,
            "        <DataArray type=\"{}\"{name} NumberOfComponents=\"{}\" format=\"appended\" offset=\"{offset}\"/>",
            a.xml_type, a.components
        );
        offset += 8 + a.bytes;
    }
    if let Some(prev) = open {
        let _ = writeln!(xml, "      </{prev}>");
    }
    let _ = write!(xml, "    </Piece>\n  </UnstructuredGrid>\n  <AppendedData encoding=\"raw\">\n   _");
    w.write_all(xml.as_bytes())?;
    for (_, a) in &arrays {
        w.write_all(&a.bytes.to_le_bytes())?;
        (a.write)(w)?;
    }
    w.write_all(b"\n  </AppendedData>\n</VTKFile>\n")?;
    Ok(())
}

/// Whether `c` may appear in an XML attribute as itself: XML 1.0's
/// characters less the control characters (tabs and line ends would read
/// back as spaces; the rest are not XML or are discouraged) and the
/// non-characters U+FFFE and U+FFFF.
fn xml_char(c: char) -> bool {
    !c.is_control() && c != '\u{fffe}' && c != '\u{ffff}'
}

/// `&`, `<`, `>` and `"` as XML entities.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A time series: one `.vtu` per step, `NAME_000000.vtu`, ..., and the
/// collection `NAME.pvd` listing them with their times, rewritten after
/// every step so that it is complete whenever the run stops. Open the
/// `.pvd` in ParaView to play the series.
pub struct TimeSeries {
    dir: PathBuf,
    name: String,
    steps: Vec<(f64, String)>,
}

impl TimeSeries {
    /// A series in the folder `dir` (created if missing). `name` becomes
    /// part of file names in `dir`: a name that is empty, `.` or `..`,
    /// holds a path separator (`/` or `\`), a drive or a control character
    /// is an [`Error::InvalidDeclaration`].
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("series-doc-{}", std::process::id()));
    /// let series = parloop_mesh::vtk::TimeSeries::new(&dir, "p")?;
    /// assert_eq!(series.pvd_path(), dir.join("p.pvd"));
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn new(dir: &Path, name: &str) -> Result<TimeSeries, Error> {
        let invalid = |reason: &str| Error::InvalidDeclaration {
            what: "VTK time series",
            name: name.escape_debug().to_string(),
            reason: format!("{reason}: the name must be a plain file name, whose files stay in {}", dir.display()),
        };
        if let Some(c) = name.chars().find(|&c| !xml_char(c) || c == '/' || c == '\\') {
            return Err(invalid(&format!("the name holds {c:?}")));
        }
        // One normal component, itself: not empty, `.`, `..`, a root or a
        // prefix (`C:`).
        let mut parts = Path::new(name).components();
        if !matches!((parts.next(), parts.next()), (Some(std::path::Component::Normal(n)), None) if n == name) {
            return Err(invalid("the name is not a file name"));
        }
        std::fs::create_dir_all(dir).map_err(|source| Error::Io { path: dir.display().to_string(), source })?;
        Ok(TimeSeries { dir: dir.to_path_buf(), name: name.into(), steps: Vec::new() })
    }

    /// The collection file.
    pub fn pvd_path(&self) -> PathBuf {
        self.dir.join(format!("{}.pvd", self.name))
    }

    /// Writes the next step, at `time`, and rewrites the collection;
    /// returns the `.vtu` written. Errors as [`write_vtu`]; a time that is
    /// not finite, or not after the previous step's (ParaView orders steps
    /// by time, and merges steps of one time), is an
    /// [`Error::InvalidDeclaration`], and nothing is written. A step whose
    /// collection could not be written is not counted: writing it again
    /// (after the cause is mended) replaces it.
    pub fn write(
        &mut self,
        time: f64,
        mesh: &Mesh,
        point_data: &[Field],
        cell_data: &[Field],
    ) -> Result<PathBuf, Error> {
        if !time.is_finite() {
            return Err(Error::InvalidDeclaration {
                what: "VTK time series",
                name: self.name.clone(),
                reason: format!("step {}: time {time} is not a finite number", self.steps.len()),
            });
        }
        if let Some(&(last, _)) = self.steps.last() {
            if time <= last {
                return Err(Error::InvalidDeclaration {
                    what: "VTK time series",
                    name: self.name.clone(),
                    reason: format!(
                        "step {}: time {time:?} is not after the previous step's, {last:?} (ParaView orders steps \
                         by time and merges steps of one time)",
                        self.steps.len()
                    ),
                });
            }
        }
        let file = format!("{}_{:06}.vtu", self.name, self.steps.len());
        let path = self.dir.join(&file);
        write_vtu(&path, mesh, point_data, cell_data)?;
        self.steps.push((time, file));
        let mut xml = String::from(
            "<?xml version=\"1.0\"?>\n<VTKFile type=\"Collection\" version=\"0.1\" byte_order=\"LittleEndian\">\n  <Collection>\n",
        );
        for (t, f) in &self.steps {
            // `{:?}` keeps every digit of the time (shortest round trip).
            let _ = writeln!(xml, "    <DataSet timestep=\"{t:?}\" group=\"\" part=\"0\" file=\"{}\"/>", escape(f));
        }
        xml.push_str("  </Collection>\n</VTKFile>\n");
        let pvd = self.pvd_path();
        // Written beside and renamed, so a reader never sees half a file.
        let tmp = self.dir.join(format!(".{}.pvd.tmp", self.name));
        let written = std::fs::write(&tmp, xml)
            .map_err(|source| Error::Io { path: tmp.display().to_string(), source })
            .and_then(|()| {
                std::fs::rename(&tmp, &pvd).map_err(|source| Error::Io { path: pvd.display().to_string(), source })
            });
        if written.is_err() {
            self.steps.pop();
        }
        written.map(|()| path)
    }
}
