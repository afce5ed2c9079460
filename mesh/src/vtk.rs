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
///
/// ```
/// use parloop_mesh::vtk::Field;
/// let velocity = vec![1.0, 0.0, 0.5, 0.5]; // two points, 2-D vectors
/// let f = Field::vector("velocity", 2, &velocity);
/// assert_eq!((f.name, f.components, f.values.len()), ("velocity", 2, 4));
/// ```
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
            let Some(expected) = f.components.checked_mul(n) else {
                // (Said as such: "expected 18446744073709551615 values" was
                // the saturated product, not a count.)
                return Err(Error::InvalidDeclaration {
                    what: "VTK field",
                    name: f.name.into(),
                    reason: format!("{} components x {n} {kind} overflows a count of values", f.components),
                });
            };
            if expected != f.values.len() {
                // Fewer values than entities: a distributed dat's own part
                // (the mesh is the whole one), most likely.
                let hint = if f.values.len() < expected && f.components > 0 && f.values.len() % f.components == 0 {
                    "; a distributed dat holds its rank's part only: `Dat::gather` it to one rank and write there"
                } else {
                    ""
                };
                return Err(Error::WrongLength {
                    what: "VTK field",
                    name: f.name.into(),
                    expected,
                    got: f.values.len(),
                    detail: format!("{} components x {n} {kind}{hint}", f.components),
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

/// The collection's closing tags, after its last `<DataSet/>` line.
const PVD_CLOSING: &str = "  </Collection>\n</VTKFile>\n";

/// A time series: one `.vtu` per step, `NAME_000000.vtu`, ..., and the
/// collection `NAME.pvd` listing them with their times. Open the `.pvd` in
/// ParaView to play the series.
///
/// The collection is complete after every step, so a reader mid-run, or a
/// run that stops, sees every step written so far. Each step costs the
/// same whatever the length of the run: the series remembers where the
/// collection's closing tags begin, and writes the new step's
/// `<DataSet .../>` line over them followed by the closing tags again,
/// in one write of about a hundred bytes (a run of N steps writes O(N)
/// bytes of collection, not O(N^2)). Before that write it checks that the
/// file is the one it left: the same length and the closing tags where it
/// put them. A collection that is missing, was truncated, appended to or
/// otherwise changed there, or whose last write failed, is written whole
/// again instead (beside it, then renamed, so that a reader never sees
/// half of it), from the times the series keeps (8 bytes a step).
///
/// ```
/// use parloop_mesh::{unit_square, vtk::{Field, TimeSeries}};
/// let mesh = unit_square(4, 4)?;
/// let dir = std::env::temp_dir().join(format!("series-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let mut series = TimeSeries::replace(&dir, "u")?;
/// for step in 0..3 {
///     let u: Vec<f64> = mesh.coords.chunks(2).map(|x| x[0] * step as f64).collect();
///     series.write(0.1 * step as f64, &mesh, &[Field::scalar("u", &u)], &[])?;
/// }
/// // Open this in ParaView for the three steps.
/// assert!(series.pvd_path().exists());
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), parloop::Error>(())
/// ```
pub struct TimeSeries {
    dir: PathBuf,
    name: String,
    times: Vec<f64>,
    /// Where the closing tags of the collection begin as this series last
    /// wrote it; `None` when the next step writes the whole collection
    /// (the first step, and after a failed write).
    closing_at: Option<u64>,
}

/// Why a step could not be added to the collection in place.
enum AppendError {
    /// The file is not as the series left it (nothing was written): the
    /// collection is to be written whole.
    Stale,
    /// The write failed.
    Failed(Error),
}

impl TimeSeries {
    /// A series in the folder `dir` (created if missing). `name` becomes
    /// part of file names in `dir`: a name that is empty, `.` or `..`,
    /// holds a path separator (`/` or `\`), a drive or a control character
    /// is an [`Error::InvalidDeclaration`]. Files of an earlier series of
    /// this name are overwritten step by step (see
    /// [`TimeSeries::replace`] to remove them first).
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
        Ok(TimeSeries { dir: dir.to_path_buf(), name: name.into(), times: Vec::new(), closing_at: None })
    }

    /// A new series as [`TimeSeries::new`], after removing from `dir` what
    /// an earlier series of this name left there, so that the folder holds
    /// this series alone: `NAME.pvd`, every `NAME_NNNNNN.vtu` this naming
    /// makes (whether or not the earlier collection lists it: a longer
    /// earlier run leaves steps that a shorter new one would not
    /// overwrite) and a leftover `.NAME.pvd.tmp`. Other files stay, those
    /// of series with other names too. The name is checked first: an
    /// invalid one removes nothing. A file that vanishes meanwhile (another
    /// process removing it too) is no error; any other failure is an
    /// [`Error::Io`] naming the file or folder.
    ///
    /// ```
    /// use parloop_mesh::{unit_square, vtk::TimeSeries};
    /// let mesh = unit_square(2, 2)?;
    /// let dir = std::env::temp_dir().join(format!("replace-doc-{}", std::process::id()));
    /// let mut old = TimeSeries::new(&dir, "u")?;
    /// for t in [0.0, 0.1, 0.2] {
    ///     old.write(t, &mesh, &[], &[])?;
    /// }
    /// std::fs::write(dir.join("notes.txt"), "kept")?;
    /// // A shorter run replacing it: u_000001.vtu and u_000002.vtu are gone.
    /// let mut new = TimeSeries::replace(&dir, "u")?;
    /// new.write(0.0, &mesh, &[], &[])?;
    /// let mut files: Vec<_> = std::fs::read_dir(&dir)?.map(|e| e.unwrap().file_name()).collect();
    /// files.sort();
    /// assert_eq!(files, ["notes.txt", "u.pvd", "u_000000.vtu"]);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn replace(dir: &Path, name: &str) -> Result<TimeSeries, Error> {
        let series = TimeSeries::new(dir, name)?;
        let io = |path: &Path, source| Error::Io { path: path.display().to_string(), source };
        let (pvd, tmp) = (format!("{name}.pvd"), series.tmp_name());
        let ours = |file: &str| {
            file == pvd
                || file == tmp
                || file
                    .strip_prefix(name)
                    .and_then(|f| f.strip_prefix('_'))
                    .and_then(|f| f.strip_suffix(".vtu"))
                    // The digits `step_file` writes for their number:
                    // six or more, no leading zero beyond six.
                    .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|n| n.parse().ok())
                    .is_some_and(|k| file == step_file(name, k))
        };
        for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
            let entry = entry.map_err(|e| io(dir, e))?;
            let path = entry.path();
            if entry.file_name().to_str().is_some_and(ours) && entry.file_type().map_err(|e| io(&path, e))?.is_file() {
                match std::fs::remove_file(&path) {
                    // Another process (an MPI rank) removed it first.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    r => r.map_err(|e| io(&path, e))?,
                }
            }
        }
        Ok(series)
    }

    /// The collection file.
    pub fn pvd_path(&self) -> PathBuf {
        self.dir.join(format!("{}.pvd", self.name))
    }

    /// The file a whole collection is written to before it is renamed.
    fn tmp_name(&self) -> String {
        format!(".{}.pvd.tmp", self.name)
    }

    /// Writes the next step, at `time`, and adds it to the collection;
    /// returns the `.vtu` written. Errors as [`write_vtu`]; a time that is
    /// not finite, or not after the previous step's (ParaView orders steps
    /// by time, and merges steps of one time), is an
    /// [`Error::InvalidDeclaration`], and nothing is written. A step whose
    /// collection could not be written is not counted, an [`Error::Io`]
    /// naming the collection (the series puts back the collection as it
    /// was, as far as it can, and writes it whole at the next step):
    /// writing the step again (after the cause is mended) replaces it.
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
                reason: format!("step {}: time {time} is not a finite number", self.times.len()),
            });
        }
        if let Some(&last) = self.times.last() {
            if time <= last {
                return Err(Error::InvalidDeclaration {
                    what: "VTK time series",
                    name: self.name.clone(),
                    reason: format!(
                        "step {}: time {time:?} is not after the previous step's, {last:?} (ParaView orders steps \
                         by time and merges steps of one time)",
                        self.times.len()
                    ),
                });
            }
        }
        let file = step_file(&self.name, self.times.len());
        let path = self.dir.join(&file);
        write_vtu(&path, mesh, point_data, cell_data)?;
        self.times.push(time);
        let appended = match self.closing_at.take() {
            Some(at) => self.append(at, &dataset_line(time, &file)),
            None => Err(AppendError::Stale),
        };
        let written = match appended {
            Ok(at) => Ok(at),
            Err(AppendError::Stale) => self.rewrite(),
            Err(AppendError::Failed(e)) => Err(e),
        };
        match written {
            Ok(at) => {
                self.closing_at = Some(at);
                Ok(path)
            }
            Err(e) => {
                self.times.pop();
                Err(e)
            }
        }
    }

    /// Writes `line` (the last step's) over the closing tags at `at` and
    /// the closing tags after it, when the collection is as this series
    /// left it; returns where the closing tags now begin.
    fn append(&self, at: u64, line: &str) -> Result<u64, AppendError> {
        use std::io::{Read, Seek, SeekFrom};
        let pvd = self.pvd_path();
        let closing = PVD_CLOSING.as_bytes();
        let end = at + closing.len() as u64;
        // Anything unexpected before the write: nothing was written, and
        // the whole collection is written instead (which reports its own
        // errors, a folder in the file's place, say).
        let stale = |_| AppendError::Stale;
        let mut f = std::fs::OpenOptions::new().read(true).write(true).open(&pvd).map_err(stale)?;
        let meta = f.metadata().map_err(stale)?;
        if !meta.is_file() || meta.len() != end {
            return Err(AppendError::Stale);
        }
        let mut tail = vec![0; closing.len()];
        f.seek(SeekFrom::Start(at)).and_then(|_| f.read_exact(&mut tail)).map_err(stale)?;
        if tail != closing {
            return Err(AppendError::Stale);
        }
        f.seek(SeekFrom::Start(at)).map_err(stale)?;
        // One write: a reader sees the file before or after it.
        let mut bytes = Vec::with_capacity(line.len() + closing.len());
        bytes.extend_from_slice(line.as_bytes());
        bytes.extend_from_slice(closing);
        match f.write_all(&bytes) {
            Ok(()) => Ok(at + line.len() as u64),
            Err(source) => {
                // Put back the collection as it was if possible (shrinking
                // the file and rewriting its closing tags needs no more
                // room); the next step writes it whole in any case.
                let _ = f.set_len(end).and_then(|()| f.seek(SeekFrom::Start(at))).and_then(|_| f.write_all(closing));
                Err(AppendError::Failed(Error::Io { path: pvd.display().to_string(), source }))
            }
        }
    }

    /// Writes the whole collection beside it and renames it into place;
    /// returns where its closing tags begin.
    fn rewrite(&self) -> Result<u64, Error> {
        let mut xml = String::from(
            "<?xml version=\"1.0\"?>\n<VTKFile type=\"Collection\" version=\"0.1\" byte_order=\"LittleEndian\">\n  <Collection>\n",
        );
        for (k, &t) in self.times.iter().enumerate() {
            xml.push_str(&dataset_line(t, &step_file(&self.name, k)));
        }
        let at = xml.len() as u64;
        xml.push_str(PVD_CLOSING);
        let pvd = self.pvd_path();
        // Written beside and renamed, so a reader never sees half a file.
        let tmp = self.dir.join(self.tmp_name());
        std::fs::write(&tmp, xml).map_err(|source| Error::Io { path: tmp.display().to_string(), source })?;
        std::fs::rename(&tmp, &pvd).map_err(|source| {
            let _ = std::fs::remove_file(&tmp);
            Error::Io { path: pvd.display().to_string(), source }
        })?;
        Ok(at)
    }
}

/// The `.vtu` of step `k` of the series `name`.
fn step_file(name: &str, k: usize) -> String {
    format!("{name}_{k:06}.vtu")
}

/// The collection's line for the step at `time` in `file`.
fn dataset_line(time: f64, file: &str) -> String {
    // `{:?}` keeps every digit of the time (shortest round trip).
    format!("    <DataSet timestep=\"{time:?}\" group=\"\" part=\"0\" file=\"{}\"/>\n", escape(file))
}
