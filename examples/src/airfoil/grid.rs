//! The airfoil C-grid: generated in memory as OP2's NACA0012 generator does,
//! or read from (and written to) the OP2 grid file format:
//!
//! ```text
//! nnode ncell nedge nbedge
//! x y                 nnode lines, "%f"
//! n0 n1 n2 n3         ncell lines   cell -> 4 nodes, anticlockwise
//! n0 n1 c0 c1         nedge lines   edge -> 2 nodes, 2 cells
//! n0 n1 c0 bound      nbedge lines  boundary edge -> 2 nodes, 1 cell, 1 wall / 2 far field
//! ```
//! Every line starts with a space and ends with a space before the newline.
//!
//! [`Grid::read`] is the model for mesh readers: it reads line by line with
//! a bound on the line length, reserves memory fallibly and no more than
//! the input can hold, names the line of every error (a truncated file: the
//! last line read), refuses content after the declared records and
//! degenerate elements, and finally checks that the mesh fits together
//! ([`Grid::check`]).

use std::fmt::Write as _;
use std::io::{BufRead as _, Read as _, Write as _};
use std::path::Path;

use parloop::Error;

/// An airfoil grid in OP2's layout (0-based indices).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Grid {
    /// Node coordinates, 2 per node.
    pub x: Vec<f64>,
    /// Cell -> 4 nodes.
    pub cell: Vec<i32>,
    /// Edge -> 2 nodes.
    pub edge: Vec<i32>,
    /// Edge -> 2 cells.
    pub ecell: Vec<i32>,
    /// Boundary edge -> 2 nodes.
    pub bedge: Vec<i32>,
    /// Boundary edge -> 1 cell.
    pub becell: Vec<i32>,
    /// Boundary kind per boundary edge: 1 wall, 2 far field.
    pub bound: Vec<i32>,
}

/// `n` evenly spaced values from `d1` to `d2`: value `k` is
/// `d1 + k * (d2 - d1) / (n - 1)`, with both ends set exactly.
fn linspace(d1: f64, d2: f64, n: usize, k: usize) -> f64 {
    if k == 0 {
        d1
    } else if k + 1 == n {
        d2
    } else {
        d1 + k as f64 * (d2 - d1) / (n - 1) as f64
    }
}

/// Principal square root of `a + ib`.
fn complex_sqrt(a: f64, b: f64) -> (f64, f64) {
    let r = a.hypot(b);
    let re = ((r + a) / 2.0).sqrt();
    let im = ((r - a) / 2.0).sqrt();
    (re, if b < 0.0 { -im } else { im })
}

/// A not-a-knot cubic spline through points with increasing `xs`.
struct Spline {
    xs: Vec<f64>,
    ys: Vec<f64>,
    /// Second derivatives at the knots.
    m: Vec<f64>,
}

impl Spline {
    fn new(xs: Vec<f64>, ys: Vec<f64>) -> Spline {
        let n = xs.len();
        let h: Vec<f64> = xs.windows(2).map(|w| w[1] - w[0]).collect();
        // Dense system for the second derivatives (n is ~200).
        let mut a = vec![vec![0.0; n]; n];
        let mut rhs = vec![0.0; n];
        // Not-a-knot: the third derivative is continuous at x1 and x(n-2).
        a[0][0] = h[1];
        a[0][1] = -(h[0] + h[1]);
        a[0][2] = h[0];
        for i in 1..n - 1 {
            a[i][i - 1] = h[i - 1];
            a[i][i] = 2.0 * (h[i - 1] + h[i]);
            a[i][i + 1] = h[i];
            rhs[i] = 6.0 * ((ys[i + 1] - ys[i]) / h[i] - (ys[i] - ys[i - 1]) / h[i - 1]);
        }
        a[n - 1][n - 3] = h[n - 2];
        a[n - 1][n - 2] = -(h[n - 3] + h[n - 2]);
        a[n - 1][n - 1] = h[n - 3];
        let m = solve(a, rhs);
        Spline { xs, ys, m }
    }

    fn eval(&self, x: f64) -> f64 {
        let n = self.xs.len();
        let k = match self.xs.partition_point(|&v| v <= x) {
            0 => 0,
            p if p >= n => n - 2,
            p => p - 1,
        };
        let (x0, x1) = (self.xs[k], self.xs[k + 1]);
        let h = x1 - x0;
        let (a, b) = (x1 - x, x - x0);
        self.m[k] * a * a * a / (6.0 * h)
            + self.m[k + 1] * b * b * b / (6.0 * h)
            + (self.ys[k] / h - self.m[k] * h / 6.0) * a
            + (self.ys[k + 1] / h - self.m[k + 1] * h / 6.0) * b
    }
}

/// Gaussian elimination with partial pivoting.
#[allow(clippy::needless_range_loop)] // row and column indices read best here
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for col in 0..n {
        let p = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs())).unwrap_or(col);
        a.swap(col, p);
        b.swap(col, p);
        for row in col + 1..n {
            let f = a[row][col] / a[col][col];
            if f != 0.0 {
                for k in col..n {
                    a[row][k] -= f * a[col][k];
                }
                b[row] -= f * b[col];
            }
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let s: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    x
}

/// The airfoil surface in the transformed plane, as a spline y(x).
fn surface_spline() -> Spline {
    const POINTS: usize = 100;
    let mut upper = Vec::with_capacity(POINTS);
    for k in 0..POINTS {
        let t = linspace(0.0, std::f64::consts::FRAC_PI_2, POINTS, k);
        let x = t.sin().powi(2);
        let y = if k + 1 == POINTS {
            0.0
        } else {
            0.594689181
                * (0.298222773 * x.sqrt() - 0.127125232 * x - 0.357907906 * x.powi(2) + 0.291984971 * x.powi(3)
                    - 0.105174696 * x.powi(4))
        };
        upper.push(complex_sqrt(x - 0.0077, y));
    }
    // The lower surface mirrors the upper as -conj(z), in reverse order; its
    // last point duplicates the upper surface's first and is dropped.
    let points: Vec<(f64, f64)> =
        upper.iter().skip(1).rev().map(|&(re, im)| (-re, im)).chain(upper.iter().copied()).collect();
    Spline::new(points.iter().map(|p| p.0).collect(), points.iter().map(|p| p.1).collect())
}

/// Entity counts of a grid: the header of a grid file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Nodes.
    pub nnode: usize,
    /// Cells.
    pub ncell: usize,
    /// Interior edges.
    pub nedge: usize,
    /// Boundary edges.
    pub nbedge: usize,
}

/// Node and cell indices are `i32` in the maps: at most this many nodes or cells.
const MAX_INDEXED: usize = i32::MAX as usize + 1;

impl Counts {
    /// The counts of [`Grid::generate`]`(i, j)`, without generating anything:
    /// `(3i+1)(j+1)` nodes, `3ij` cells, `i + 3i(j-1) + (3i-1)j` interior
    /// edges and `4i + 2j` boundary edges. Errors: sizes outside
    /// `1 <= I`, `2 <= J`, both at most 100000 (`Error::InvalidDeclaration`
    /// naming `--grid-size`).
    pub fn generated(i: usize, j: usize) -> Result<Counts, Error> {
        if i < 1 || j < 2 || i > 100_000 || j > 100_000 {
            return Err(Error::InvalidDeclaration {
                what: "option",
                name: "--grid-size".into(),
                reason: format!("{i},{j}: the airfoil grid needs 1 <= I and 2 <= J, both at most 100000"),
            });
        }
        // With both at most 100000 nothing below comes near usize::MAX on a
        // 64-bit target; still checked, for 32-bit ones.
        let overflow = || Error::SizeOverflow {
            what: "grid",
            name: format!("generated {i}x{j}"),
            detail: format!("(3 x {i} + 1) x ({j} + 1) nodes"),
        };
        let cols = i.checked_mul(3).ok_or_else(overflow)?;
        let mul = |a: usize, b: usize| a.checked_mul(b).ok_or_else(overflow);
        Ok(Counts {
            nnode: mul(cols + 1, j + 1)?,
            ncell: mul(cols, j)?,
            nedge: i + mul(cols, j - 1)? + mul(cols - 1, j)?,
            nbedge: 4 * i + 2 * j,
        })
    }

    /// Bytes a [`Grid`] of these counts holds: 16 per node (two `f64`), per
    /// cell (four `i32`), per edge (four `i32`) and per boundary edge; `None`
    /// when that overflows `usize`.
    pub fn grid_bytes(&self) -> Option<usize> {
        [self.nnode, self.ncell, self.nedge, self.nbedge]
            .iter()
            .try_fold(0usize, |sum, &n| n.checked_mul(16).and_then(|b| sum.checked_add(b)))
    }

    /// Refuses counts whose node or cell indices do not fit the `i32` maps
    /// (the reason).
    fn check_indexable(&self) -> Result<(), String> {
        for (what, n) in [("nodes", self.nnode), ("cells", self.ncell)] {
            if n > MAX_INDEXED {
                return Err(format!(
                    "{n} {what}: indices are i32 in the maps, so a grid holds at most {MAX_INDEXED} {what}"
                ));
            }
        }
        Ok(())
    }
}

/// An empty vector with room for exactly `n` values, or
/// [`Error::OutOfMemory`] naming `what` (never an abort).
fn try_vec<T>(n: usize, what: impl FnOnce() -> String) -> Result<Vec<T>, Error> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| Error::OutOfMemory { what: what(), bytes: n.saturating_mul(std::mem::size_of::<T>()) })?;
    Ok(v)
}

/// Longest line the reader accepts: a record is four numbers, so anything
/// longer is not a grid file (and a file with no newlines is not read whole).
pub const MAX_LINE_BYTES: usize = 4096;

/// A record of a grid file: its section and its index there.
#[derive(Clone, Copy, Debug)]
enum Record {
    Cell(usize),
    Edge(usize),
    BoundaryEdge(usize),
}

/// The line of every record, stored as anchors where the numbering jumps
/// (blank lines), so that the consistency check, which runs after reading,
/// can name lines without a line number per record.
#[derive(Debug, Default)]
struct LineIndex {
    /// `(record ordinal, its line)`, increasing; records between anchors are
    /// on consecutive lines.
    anchors: Vec<(usize, usize)>,
    /// Records seen.
    records: usize,
}

impl LineIndex {
    /// The layout of a file written by [`Grid::write`]: the header on line
    /// 1, every record on the next line.
    fn plain() -> LineIndex {
        LineIndex { anchors: vec![(0, 2)], records: 0 }
    }

    fn push(&mut self, line: usize) {
        let expected = self.anchors.last().map(|&(r, l)| l + (self.records - r));
        if expected != Some(line) {
            self.anchors.push((self.records, line));
        }
        self.records += 1;
    }

    /// Line of the record with this ordinal (records of all sections, in file order).
    fn line(&self, ordinal: usize) -> usize {
        let k = self.anchors.partition_point(|&(r, _)| r <= ordinal);
        match k.checked_sub(1).map(|k| self.anchors[k]) {
            Some((r, l)) => l + (ordinal - r),
            None => 0,
        }
    }

    fn line_of(&self, counts: &Counts, record: Record) -> usize {
        let ordinal = counts.nnode
            + match record {
                Record::Cell(k) => k,
                Record::Edge(k) => counts.ncell + k,
                Record::BoundaryEdge(k) => counts.ncell + counts.nedge + k,
            };
        self.line(ordinal)
    }
}

/// Reads a grid file line by line: blank lines skipped, the line number kept
/// for errors.
struct LineReader<R> {
    reader: R,
    buf: Vec<u8>,
    /// Lines read so far: the number of the last line read.
    line: usize,
    source_name: String,
}

impl<R: std::io::BufRead> LineReader<R> {
    fn err(&self, line: usize, reason: String) -> Error {
        Error::Input { source_name: self.source_name.clone(), line, reason }
    }

    /// Reads the next line that holds more than whitespace (UTF-8, in
    /// `buf`) and returns its number; `None` at the end of the input.
    fn next_nonblank(&mut self) -> Result<Option<usize>, Error> {
        loop {
            self.buf.clear();
            let n = (&mut self.reader)
                .take(MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut self.buf)
                .map_err(|source| Error::Io { path: self.source_name.clone(), source })?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            if self.buf.last() != Some(&b'\n') && self.buf.len() > MAX_LINE_BYTES {
                return Err(self.err(self.line, format!("line longer than {MAX_LINE_BYTES} bytes: not a grid file")));
            }
            if !self.buf.iter().all(u8::is_ascii_whitespace) {
                break;
            }
        }
        match std::str::from_utf8(&self.buf) {
            Ok(_) => Ok(Some(self.line)),
            Err(_) => Err(self.err(self.line, "not UTF-8 text: not a grid file".into())),
        }
    }

    /// The next record's `N` fields, or an error naming the line: the file
    /// ends (the last line read), too few or too many fields.
    fn record<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<(usize, [&str; N]), Error> {
        let Some(line) = self.next_nonblank()? else {
            let last = self.line;
            // An empty input: the header belongs on line 1.
            let (line, reason) = if last == 0 {
                (1, format!("truncated: the input is empty where {} was expected", what()))
            } else {
                (last, format!("truncated: the file ends after line {last} where {} was expected", what()))
            };
            return Err(self.err(line, reason));
        };
        let err = |line: usize, reason: String| Error::Input { source_name: self.source_name.clone(), line, reason };
        // Checked to be UTF-8 by `next_nonblank`.
        let text = std::str::from_utf8(&self.buf).unwrap_or_default();
        let mut tokens = text.split_whitespace();
        let mut out = [""; N];
        for (k, slot) in out.iter_mut().enumerate() {
            match tokens.next() {
                Some(tok) => *slot = tok,
                None => return Err(err(line, format!("{}: expected {N} numbers, found {k}", what()))),
            }
        }
        if let Some(extra) = tokens.next() {
            return Err(err(line, format!("{}: unexpected extra field `{extra}` (expected {N} numbers)", what())));
        }
        Ok((line, out))
    }
}

impl Grid {
    /// Number of nodes.
    pub fn nnode(&self) -> usize {
        self.x.len() / 2
    }
    /// Number of cells.
    pub fn ncell(&self) -> usize {
        self.cell.len() / 4
    }
    /// Number of edges.
    pub fn nedge(&self) -> usize {
        self.edge.len() / 2
    }
    /// Number of boundary edges.
    pub fn nbedge(&self) -> usize {
        self.bound.len()
    }
    /// All four counts.
    pub fn counts(&self) -> Counts {
        Counts { nnode: self.nnode(), ncell: self.ncell(), nedge: self.nedge(), nbedge: self.nbedge() }
    }

    /// The C-grid of OP2's NACA0012 generator with `3i x j` cells (the
    /// standard grid is `generate(400, 600)`), coordinates at full precision.
    /// Use [`Grid::rounded`] to get exactly what the file holds.
    ///
    /// Errors: sizes outside `1 <= I`, `2 <= J`, both at most 100000, or
    /// more nodes than `i32` indices reach (`Error::InvalidDeclaration`
    /// naming `--grid-size`); memory that
    /// cannot be allocated (`Error::OutOfMemory`, never an abort).
    /// [`Counts::generated`] and [`Counts::grid_bytes`] tell the size first.
    pub fn generate(i: usize, j: usize) -> Result<Grid, Error> {
        let counts = Counts::generated(i, j)?;
        counts.check_indexable().map_err(|reason| Error::InvalidDeclaration {
            what: "option",
            name: "--grid-size".into(),
            reason: format!("{i},{j}: {reason}"),
        })?;
        let name = format!("the generated {i}x{j} airfoil grid");
        let cols = 3 * i + 1;
        let node = |a: usize, b: usize| (a + b * cols) as i32;
        let cell = |a: usize, b: usize| (a + b * 3 * i) as i32;
        let mut x = try_vec(2 * counts.nnode, || format!("{name}: node coordinates"))?;
        let mut cells = try_vec(4 * counts.ncell, || format!("{name}: cells"))?;
        let mut edge = try_vec(2 * counts.nedge, || format!("{name}: edges"))?;
        let mut ecell = try_vec(2 * counts.nedge, || format!("{name}: edge cells"))?;
        let mut bedge = try_vec(2 * counts.nbedge, || format!("{name}: boundary edges"))?;
        let mut becell = try_vec(counts.nbedge, || format!("{name}: boundary edge cells"))?;
        let mut bound = try_vec(counts.nbedge, || format!("{name}: boundary kinds"))?;
        let spline = surface_spline();
        for b in 0..=j {
            for a in 0..cols {
                let xb = linspace(-3.0, 3.0, cols, a);
                let yb = if a > i && a < 2 * i { spline.eval(xb) } else { 0.0 };
                let y = linspace(yb, 3.0, j + 1, b);
                x.push(xb * xb - y * y);
                x.push(2.0 * xb * y);
            }
        }
        for b in 0..j {
            for a in 0..3 * i {
                cells.extend([node(a, b), node(a + 1, b), node(a + 1, b + 1), node(a, b + 1)]);
            }
        }
        for b in 0..j {
            for a in 0..3 * i {
                if b == 0 && a < i {
                    // The wake cut joins cell a with its mirror image; the
                    // nodes on the cut are duplicated (same coordinates).
                    edge.extend([node(a, 0), node(a + 1, 0)]);
                    ecell.extend([cell(3 * i - 1 - a, 0), cell(a, 0)]);
                }
                if b + 1 < j {
                    edge.extend([node(a, b + 1), node(a + 1, b + 1)]);
                    ecell.extend([cell(a, b), cell(a, b + 1)]);
                }
                if a + 1 < 3 * i {
                    edge.extend([node(a + 1, b), node(a + 1, b + 1)]);
                    ecell.extend([cell(a + 1, b), cell(a, b)]);
                }
            }
        }
        for a in i..2 * i {
            bedge.extend([node(a + 1, 0), node(a, 0)]);
            becell.push(cell(a, 0));
            bound.push(1);
        }
        for b in 0..j {
            bedge.extend([node(3 * i, b + 1), node(3 * i, b)]);
            becell.push(cell(3 * i - 1, b));
            bound.push(2);
        }
        for a in (0..3 * i).rev() {
            bedge.extend([node(a, j), node(a + 1, j)]);
            becell.push(cell(a, j - 1));
            bound.push(2);
        }
        for b in (0..j).rev() {
            bedge.extend([node(0, b), node(0, b + 1)]);
            becell.push(cell(0, b));
            bound.push(2);
        }
        debug_assert_eq!(edge.len(), 2 * counts.nedge);
        debug_assert_eq!(bound.len(), counts.nbedge);
        Ok(Grid { x, cell: cells, edge, ecell, bedge, becell, bound })
    }

    /// The grid with coordinates rounded to 6 decimals exactly as the file
    /// holds them, so that a generated grid and a read one compute alike.
    pub fn rounded(mut self) -> Grid {
        let mut buf = String::new();
        for v in &mut self.x {
            buf.clear();
            let _ = write!(buf, "{v:.6}");
            *v = buf.parse().expect("a formatted float parses");
        }
        self
    }

    /// Writes the grid in the OP2 file format (buffered; `out` is flushed
    /// at the end, so every write error, the last ones included, is
    /// returned).
    pub fn write(&self, out: impl std::io::Write) -> std::io::Result<()> {
        let mut w = std::io::BufWriter::with_capacity(1 << 16, out);
        writeln!(w, " {} {} {} {} ", self.nnode(), self.ncell(), self.nedge(), self.nbedge())?;
        for p in self.x.chunks_exact(2) {
            writeln!(w, " {:.6} {:.6} ", p[0], p[1])?;
        }
        for c in self.cell.chunks_exact(4) {
            writeln!(w, " {} {} {} {} ", c[0], c[1], c[2], c[3])?;
        }
        for (n, c) in self.edge.chunks_exact(2).zip(self.ecell.chunks_exact(2)) {
            writeln!(w, " {} {} {} {} ", n[0], n[1], c[0], c[1])?;
        }
        for ((n, c), b) in self.bedge.chunks_exact(2).zip(&self.becell).zip(&self.bound) {
            writeln!(w, " {} {} {} {} ", n[0], n[1], c, b)?;
        }
        w.flush()
    }

    /// Writes the grid to a file.
    pub fn write_file(&self, path: &Path) -> Result<(), Error> {
        let io = |source| Error::Io { path: path.display().to_string(), source };
        let file = std::fs::File::create(path).map_err(io)?;
        self.write(file).map_err(io)
    }

    /// Reads a grid file (see [`Grid::read`] for what is checked). Memory is
    /// reserved for at most as many records as the file's size can hold.
    pub fn read_file(path: &Path) -> Result<Grid, Error> {
        let name = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|source| Error::Io { path: name.clone(), source })?;
        let size = file.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
        Grid::read_sized(std::io::BufReader::with_capacity(1 << 16, file), &name, size)
    }

    /// Parses the grid file format from a string (see [`Grid::read`]).
    pub fn parse(text: &str, source_name: &str) -> Result<Grid, Error> {
        Grid::read_sized(text.as_bytes(), source_name, Some(text.len() as u64))
    }

    /// Reads the grid file format from a stream. The layout is OP2's
    /// (module documentation); any whitespace separates numbers, blank
    /// lines are skipped, `\r\n` line ends are accepted. Every error is an
    /// [`Error::Input`] naming `source_name` and the line, except as said:
    ///
    /// - a missing, malformed or extra number; a line longer than
    ///   [`MAX_LINE_BYTES`]; text that is not UTF-8;
    /// - a truncated input (the error names the last line read);
    /// - anything but whitespace after the records the header declares;
    /// - header counts whose node or cell indices do not fit `i32`;
    ///   counts whose sizes overflow ([`Error::SizeOverflow`]) or cannot be
    ///   allocated ([`Error::OutOfMemory`]): this reader reserves the declared
    ///   counts up front, with fallible allocation ([`Grid::parse`] and
    ///   [`Grid::read_file`] reserve no more than their input can hold);
    /// - non-finite coordinates, indices out of range, a bound other than
    ///   1 or 2;
    /// - degenerate elements: a cell repeating a node, an edge from a node
    ///   to itself or between a cell and itself, a boundary edge from a node
    ///   to itself;
    /// - a mesh that does not fit together ([`Grid::check`]).
    pub fn read(reader: impl std::io::BufRead, source_name: &str) -> Result<Grid, Error> {
        Grid::read_sized(reader, source_name, None)
    }

    /// [`Grid::read`], with memory reserved for no more records than `size`
    /// bytes can hold when the input's size is known.
    fn read_sized(reader: impl std::io::BufRead, source_name: &str, size: Option<u64>) -> Result<Grid, Error> {
        let mut r = LineReader { reader, buf: Vec::new(), line: 0, source_name: source_name.into() };
        let err = |line: usize, reason: String| Error::Input { source_name: source_name.into(), line, reason };
        let (line, header) = r.record::<4>(&|| "the header (nnode ncell nedge nbedge)".into())?;
        let count = |tok: &str, what: &str| -> Result<usize, Error> {
            tok.parse::<usize>()
                .map_err(|_| err(line, format!("header: {what} `{tok}` is not a valid count (a non-negative integer)")))
        };
        let counts = Counts {
            nnode: count(header[0], "nnode")?,
            ncell: count(header[1], "ncell")?,
            nedge: count(header[2], "nedge")?,
            nbedge: count(header[3], "nbedge")?,
        };
        counts.check_indexable().map_err(|reason| err(line, reason))?;
        let bytes = counts.grid_bytes().ok_or_else(|| Error::SizeOverflow {
            what: "grid",
            name: source_name.into(),
            detail: format!(
                "16 bytes x ({} nodes + {} cells + {} edges + {} boundary edges)",
                counts.nnode, counts.ncell, counts.nedge, counts.nbedge
            ),
        })?;
        // Each node record holds at least 3 bytes ("0 0"), every other at
        // least 7, so an input of known size bounds the records it holds.
        let fits = |n: usize, least: u64| match size {
            Some(size) => n.min(usize::try_from(size / least + 1).unwrap_or(usize::MAX)),
            None => n,
        };
        let what = |part: &str| {
            let part = part.to_owned();
            move || format!("grid `{source_name}` ({bytes} bytes declared by its header): {part}")
        };
        let mut g = Grid {
            x: try_vec(2 * fits(counts.nnode, 3), what("node coordinates"))?,
            cell: try_vec(4 * fits(counts.ncell, 7), what("cells"))?,
            edge: try_vec(2 * fits(counts.nedge, 7), what("edges"))?,
            ecell: try_vec(2 * fits(counts.nedge, 7), what("edge cells"))?,
            bedge: try_vec(2 * fits(counts.nbedge, 7), what("boundary edges"))?,
            becell: try_vec(fits(counts.nbedge, 7), what("boundary edge cells"))?,
            bound: try_vec(fits(counts.nbedge, 7), what("boundary kinds"))?,
        };
        let mut lines = LineIndex::default();
        // `what` names the field in messages, formatted only for them.
        let index = |line: usize, tok: &str, size: usize, what: &dyn Fn() -> String| -> Result<i32, Error> {
            let v: i64 = tok.parse().map_err(|_| err(line, format!("{} `{tok}` is not an integer", what())))?;
            if v < 0 || v as u64 >= size as u64 {
                Err(err(line, format!("{} {v} is out of range (0..{size})", what())))
            } else {
                Ok(v as i32)
            }
        };
        for k in 0..counts.nnode {
            let (n, [x, y]) = r.record::<2>(&|| format!("node {k} (x y)"))?;
            let coord = |tok: &str| -> Result<f64, Error> {
                match tok.parse::<f64>() {
                    Ok(v) if v.is_finite() => Ok(v),
                    Ok(_) => Err(err(n, format!("node {k}: coordinate `{tok}` is not finite"))),
                    Err(_) => Err(err(n, format!("node {k}: `{tok}` is not a valid number"))),
                }
            };
            g.x.extend([coord(x)?, coord(y)?]);
            lines.push(n);
        }
        for k in 0..counts.ncell {
            let (n, f) = r.record::<4>(&|| format!("cell {k} (4 nodes)"))?;
            let mut c = [0i32; 4];
            for (slot, tok) in c.iter_mut().zip(&f) {
                *slot = index(n, tok, counts.nnode, &|| format!("cell {k}: node"))?;
            }
            for a in 0..4 {
                if c[a + 1..].contains(&c[a]) {
                    return Err(err(n, format!("cell {k} repeats node {} (a cell has 4 distinct nodes)", c[a])));
                }
            }
            g.cell.extend(c);
            lines.push(n);
        }
        for k in 0..counts.nedge {
            let (n, [n0, n1, c0, c1]) = r.record::<4>(&|| format!("edge {k} (2 nodes, 2 cells)"))?;
            let nodes = [
                index(n, n0, counts.nnode, &|| format!("edge {k}: node"))?,
                index(n, n1, counts.nnode, &|| format!("edge {k}: node"))?,
            ];
            let cells = [
                index(n, c0, counts.ncell, &|| format!("edge {k}: cell"))?,
                index(n, c1, counts.ncell, &|| format!("edge {k}: cell"))?,
            ];
            if nodes[0] == nodes[1] {
                return Err(err(n, format!("edge {k} goes from node {} to itself", nodes[0])));
            }
            if cells[0] == cells[1] {
                return Err(err(
                    n,
                    format!(
                        "edge {k} lies between cell {} and itself (an interior edge joins two cells; \
                         edges on the boundary belong in the boundary edge section)",
                        cells[0]
                    ),
                ));
            }
            g.edge.extend(nodes);
            g.ecell.extend(cells);
            lines.push(n);
        }
        for k in 0..counts.nbedge {
            let (n, [n0, n1, c0, b]) = r.record::<4>(&|| format!("boundary edge {k} (2 nodes, cell, bound)"))?;
            let nodes = [
                index(n, n0, counts.nnode, &|| format!("boundary edge {k}: node"))?,
                index(n, n1, counts.nnode, &|| format!("boundary edge {k}: node"))?,
            ];
            let cell = index(n, c0, counts.ncell, &|| format!("boundary edge {k}: cell"))?;
            let bound = match b.parse::<i64>() {
                Ok(b @ (1 | 2)) => b as i32,
                _ => {
                    return Err(err(n, format!("boundary edge {k}: bound `{b}` is neither 1 (wall) nor 2 (far field)")))
                }
            };
            if nodes[0] == nodes[1] {
                return Err(err(n, format!("boundary edge {k} goes from node {} to itself", nodes[0])));
            }
            g.bedge.extend(nodes);
            g.becell.extend([cell]);
            g.bound.extend([bound]);
            lines.push(n);
        }
        if let Some(n) = r.next_nonblank()? {
            return Err(err(
                n,
                format!(
                    "unexpected content after the last record (the header declares {} nodes, {} cells, \
                     {} edges and {} boundary edges)",
                    counts.nnode, counts.ncell, counts.nedge, counts.nbedge
                ),
            ));
        }
        g.check_with(source_name, &lines)?;
        Ok(g)
    }

    /// Checks that the grid fits together, as [`Grid::read`] does after
    /// reading; errors name the line each element has in the file
    /// [`Grid::write`] writes. Besides lengths and index ranges:
    ///
    /// - every cell has 4 distinct nodes, every edge and boundary edge 2
    ///   distinct nodes, every interior edge 2 distinct cells;
    /// - every interior edge `n0 n1 c0 c1` is a side of both of its cells,
    ///   oriented as the flux in `res_calc` assumes: cell `c0` (anticlockwise)
    ///   runs along it from `n1` to `n0`, cell `c1` from `n0` to `n1`. Where
    ///   the nodes are not the cell's own, the side may be a cut through
    ///   duplicated nodes (the wake of the C-grid): the cell's side then runs
    ///   between nodes at the same coordinates (to 1e-12 relative);
    /// - every boundary edge `n0 n1 c` is a side of its cell, which runs
    ///   along it from `n1` to `n0`;
    /// - no side of a cell is on two edges, and every side is on an edge or a
    ///   boundary edge (the mesh is closed).
    pub fn check(&self, source_name: &str) -> Result<(), Error> {
        self.check_with(source_name, &LineIndex::plain())
    }

    fn check_with(&self, source_name: &str, lines: &LineIndex) -> Result<(), Error> {
        let counts = self.counts();
        let err = |record: Record, reason: String| Error::Input {
            source_name: source_name.into(),
            line: lines.line_of(&counts, record),
            reason,
        };
        let shape = |what: &str, got: usize, want: usize| -> Result<(), Error> {
            if got == want {
                Ok(())
            } else {
                Err(Error::InvalidDeclaration {
                    what: "grid",
                    name: source_name.into(),
                    reason: format!("{what}: {got} values where {want} were expected"),
                })
            }
        };
        shape("node coordinates", self.x.len(), 2 * counts.nnode)?;
        shape("cells", self.cell.len(), 4 * counts.ncell)?;
        shape("edges", self.edge.len(), 2 * counts.nedge)?;
        shape("edge cells", self.ecell.len(), 2 * counts.nedge)?;
        shape("boundary edges", self.bedge.len(), 2 * counts.nbedge)?;
        shape("boundary edge cells", self.becell.len(), counts.nbedge)?;
        let in_range = |v: i32, size: usize| v >= 0 && (v as usize) < size;
        for (k, c) in self.cell.chunks_exact(4).enumerate() {
            if let Some(&v) = c.iter().find(|&&v| !in_range(v, counts.nnode)) {
                return Err(err(Record::Cell(k), format!("cell {k}: node {v} is out of range (0..{})", counts.nnode)));
            }
            if let Some(a) = (0..4).find(|&a| c[a + 1..].contains(&c[a])) {
                return Err(err(
                    Record::Cell(k),
                    format!("cell {k} repeats node {} (a cell has 4 distinct nodes)", c[a]),
                ));
            }
        }
        let coords = |n: i32| [self.x[2 * n as usize], self.x[2 * n as usize + 1]];
        // Each cell a quadrilateral of positive area, its nodes
        // anticlockwise: a tangled cell (a node moved across a side) has a
        // zero or negative one, and the flow diverges a few steps in.
        for (k, c) in self.cell.chunks_exact(4).enumerate() {
            let p: [[f64; 2]; 4] = std::array::from_fn(|a| coords(c[a]));
            let area = 0.5 * (0..4).map(|a| p[a][0] * p[(a + 1) % 4][1] - p[(a + 1) % 4][0] * p[a][1]).sum::<f64>();
            if area.is_nan() || area <= 0.0 {
                return Err(err(
                    Record::Cell(k),
                    format!(
                        "cell {k} (nodes {} {} {} {}) has area {area:.3e}: a cell's nodes run anticlockwise around \
                         a positive area (is it tangled, a node moved across one of its sides?)",
                        c[0], c[1], c[2], c[3]
                    ),
                ));
            }
        }
        let cell_nodes = |c: i32| -> [i32; 4] {
            let c = c as usize;
            [self.cell[4 * c], self.cell[4 * c + 1], self.cell[4 * c + 2], self.cell[4 * c + 3]]
        };
        // The same point, up to the last bits (a generator's mirrored
        // coordinates may differ by an ulp before they are rounded).
        let same = |p: [f64; 2], q: [f64; 2]| {
            p.iter().zip(&q).all(|(a, b)| (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0))
        };
        // The side of cell `c` that runs from node `from` to node `to`.
        let side = |c: i32, from: i32, to: i32, cut: bool| -> Option<usize> {
            let nodes = cell_nodes(c);
            (0..4).find(|&s| nodes[s] == from && nodes[(s + 1) % 4] == to).or_else(|| {
                let (f, t) = (coords(from), coords(to));
                cut.then(|| (0..4).find(|&s| same(coords(nodes[s]), f) && same(coords(nodes[(s + 1) % 4]), t)))
                    .flatten()
            })
        };
        let describe = |c: i32| {
            let n = cell_nodes(c);
            format!("cell {c} (nodes {} {} {} {})", n[0], n[1], n[2], n[3])
        };
        // Sides of each cell found so far, one bit per side.
        let mut sides: Vec<u8> = try_vec(counts.ncell, || format!("grid `{source_name}`: the consistency check"))?;
        sides.resize(counts.ncell, 0);
        let mut claim = |record: Record, what: &str, c: i32, from: i32, to: i32, cut: bool| -> Result<(), Error> {
            let Some(s) = side(c, from, to, cut) else {
                let own = cell_nodes(c);
                let reason = match [from, to].into_iter().find(|n| !own.contains(n)) {
                    Some(n) if !cut => format!("{what}: node {n} is not a node of its {}", describe(c)),
                    // On the wake cut an edge may name a node's duplicate.
                    Some(n) if side(c, to, from, true).is_none() => format!(
                        "{what}: node {n} is not a node of its {}, nor at the same point as one of them (an \
                         edge on the wake cut may name a duplicate node at the same coordinates, to 1e-12 \
                         relative)",
                        describe(c)
                    ),
                    _ => format!(
                        "{what}: its {} has no side from node {from} to node {to}; an edge `n0 n1 c0 c1` \
                         is a side of both cells, c0 running along it from n1 to n0 and c1 from n0 to n1 \
                         (cells anticlockwise), and a boundary edge `n0 n1 c` a side of c from n1 to n0",
                        describe(c)
                    ),
                };
                return Err(err(record, reason));
            };
            let slot = &mut sides[c as usize];
            if *slot & (1 << s) != 0 {
                return Err(err(
                    record,
                    format!(
                        "{what}: the side from node {from} to node {to} of {} is already on another edge",
                        describe(c)
                    ),
                ));
            }
            *slot |= 1 << s;
            Ok(())
        };
        for (k, (n, c)) in self.edge.chunks_exact(2).zip(self.ecell.chunks_exact(2)).enumerate() {
            let record = Record::Edge(k);
            if let Some(&v) = n.iter().find(|&&v| !in_range(v, counts.nnode)) {
                return Err(err(record, format!("edge {k}: node {v} is out of range (0..{})", counts.nnode)));
            }
            if let Some(&v) = c.iter().find(|&&v| !in_range(v, counts.ncell)) {
                return Err(err(record, format!("edge {k}: cell {v} is out of range (0..{})", counts.ncell)));
            }
            if n[0] == n[1] {
                return Err(err(record, format!("edge {k} goes from node {} to itself", n[0])));
            }
            if c[0] == c[1] {
                return Err(err(record, format!("edge {k} lies between cell {} and itself", c[0])));
            }
            let what = format!("edge {k} (nodes {} {}, cells {} {})", n[0], n[1], c[0], c[1]);
            claim(record, &what, c[0], n[1], n[0], true)?;
            claim(record, &what, c[1], n[0], n[1], true)?;
        }
        for (k, (n, &c)) in self.bedge.chunks_exact(2).zip(&self.becell).enumerate() {
            let record = Record::BoundaryEdge(k);
            if let Some(&v) = n.iter().find(|&&v| !in_range(v, counts.nnode)) {
                return Err(err(record, format!("boundary edge {k}: node {v} is out of range (0..{})", counts.nnode)));
            }
            if !in_range(c, counts.ncell) {
                return Err(err(record, format!("boundary edge {k}: cell {c} is out of range (0..{})", counts.ncell)));
            }
            if n[0] == n[1] {
                return Err(err(record, format!("boundary edge {k} goes from node {} to itself", n[0])));
            }
            if !matches!(self.bound[k], 1 | 2) {
                return Err(err(
                    record,
                    format!("boundary edge {k}: bound {} is neither 1 (wall) nor 2 (far field)", self.bound[k]),
                ));
            }
            let what = format!("boundary edge {k} (nodes {} {}, cell {c})", n[0], n[1]);
            claim(record, &what, c, n[1], n[0], false)?;
        }
        if let Some(c) = sides.iter().position(|&s| s != 0b1111) {
            let s = (0..4).find(|&s| sides[c] & (1 << s) == 0).unwrap_or(0);
            let n = cell_nodes(c as i32);
            return Err(err(
                Record::Cell(c),
                format!(
                    "{}: its side from node {} to node {} is on no edge and no boundary edge (the mesh has a hole)",
                    describe(c as i32),
                    n[s],
                    n[(s + 1) % 4]
                ),
            ));
        }
        Ok(())
    }
}

/// Parses a grid size `I,J` as the command lines take it (`400,600`;
/// blanks around the numbers allowed).
///
/// ```
/// use parloop_examples::airfoil::grid::parse_grid_size;
/// assert_eq!(parse_grid_size(" 3 , 4 "), Ok((3, 4)));
/// assert!(parse_grid_size("4,4,4").unwrap_err().contains("exactly two numbers"));
/// ```
pub fn parse_grid_size(s: &str) -> Result<(usize, usize), String> {
    let expected = || format!("`{s}`: expected exactly two numbers I,J such as 400,600");
    let (i, j) = s.split_once(',').ok_or_else(expected)?;
    if j.contains(',') {
        return Err(expected());
    }
    let n = |v: &str| crate::cli::count(v).map_err(|e| format!("`{s}`: {e}"));
    Ok((n(i)?, n(j)?))
}
