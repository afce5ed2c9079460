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

use std::fmt::Write as _;
use std::io::Write as _;
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

    /// The C-grid of OP2's NACA0012 generator with `3i x j` cells (the
    /// standard grid is `generate(400, 600)`), coordinates at full precision.
    /// Use [`Grid::rounded`] to get exactly what the file holds.
    pub fn generate(i: usize, j: usize) -> Result<Grid, Error> {
        if i < 1 || j < 2 || i > 100_000 || j > 100_000 {
            return Err(Error::Input {
                source_name: "--grid-size".into(),
                line: 0,
                reason: format!("{i},{j}: the airfoil grid needs 1 <= I and 2 <= J, both at most 100000"),
            });
        }
        let cols = 3 * i + 1;
        let node = |a: usize, b: usize| (a + b * cols) as i32;
        let cell = |a: usize, b: usize| (a + b * 3 * i) as i32;
        let spline = surface_spline();
        let mut x = Vec::with_capacity(2 * cols * (j + 1));
        for b in 0..=j {
            for a in 0..cols {
                let xb = linspace(-3.0, 3.0, cols, a);
                let yb = if a > i && a < 2 * i { spline.eval(xb) } else { 0.0 };
                let y = linspace(yb, 3.0, j + 1, b);
                x.push(xb * xb - y * y);
                x.push(2.0 * xb * y);
            }
        }
        let mut cells = Vec::with_capacity(4 * 3 * i * j);
        for b in 0..j {
            for a in 0..3 * i {
                cells.extend([node(a, b), node(a + 1, b), node(a + 1, b + 1), node(a, b + 1)]);
            }
        }
        let (mut edge, mut ecell) = (Vec::new(), Vec::new());
        for b in 0..j {
            for a in 0..3 * i {
                if b == 0 && a < i {
                    // The wake cut joins cell a with its mirror image.
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
        let (mut bedge, mut becell, mut bound) = (Vec::new(), Vec::new(), Vec::new());
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

    /// Writes the grid in the OP2 file format.
    pub fn write(&self, mut out: impl std::io::Write) -> std::io::Result<()> {
        let mut s = String::with_capacity(64 * (self.nnode() + self.ncell() + self.nedge()));
        let _ = writeln!(s, " {} {} {} {} ", self.nnode(), self.ncell(), self.nedge(), self.nbedge());
        for p in self.x.chunks_exact(2) {
            let _ = writeln!(s, " {:.6} {:.6} ", p[0], p[1]);
        }
        for c in self.cell.chunks_exact(4) {
            let _ = writeln!(s, " {} {} {} {} ", c[0], c[1], c[2], c[3]);
        }
        for (n, c) in self.edge.chunks_exact(2).zip(self.ecell.chunks_exact(2)) {
            let _ = writeln!(s, " {} {} {} {} ", n[0], n[1], c[0], c[1]);
        }
        for ((n, c), b) in self.bedge.chunks_exact(2).zip(&self.becell).zip(&self.bound) {
            let _ = writeln!(s, " {} {} {} {} ", n[0], n[1], c, b);
        }
        out.write_all(s.as_bytes())
    }

    /// Writes the grid to a file.
    pub fn write_file(&self, path: &Path) -> Result<(), Error> {
        let io = |source| Error::Io { path: path.display().to_string(), source };
        let file = std::fs::File::create(path).map_err(io)?;
        let mut w = std::io::BufWriter::new(file);
        self.write(&mut w).map_err(io)?;
        w.flush().map_err(io)
    }

    /// Reads a grid file.
    pub fn read_file(path: &Path) -> Result<Grid, Error> {
        let text =
            std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.display().to_string(), source })?;
        Grid::parse(&text, &path.display().to_string())
    }

    /// Parses the grid file format. Errors name the line and what is wrong:
    /// a missing or malformed number, a truncated file, an index out of range.
    pub fn parse(text: &str, source_name: &str) -> Result<Grid, Error> {
        let mut lines = text.lines().enumerate();
        let err = |line: usize, reason: String| Error::Input { source_name: source_name.into(), line, reason };
        let mut next_line = |what: &str| -> Result<(usize, &str), Error> {
            lines
                .next()
                .map(|(n, l)| (n + 1, l))
                .ok_or_else(|| err(0, format!("truncated: the file ends where {what} was expected")))
        };
        fn fields<T: std::str::FromStr, const N: usize>(
            line: usize,
            text: &str,
            what: &str,
            err: &dyn Fn(usize, String) -> Error,
        ) -> Result<[T; N], Error> {
            let mut out = Vec::with_capacity(N);
            let mut tokens = text.split_whitespace();
            for k in 0..N {
                let tok = tokens.next().ok_or_else(|| err(line, format!("{what}: expected {N} numbers, found {k}")))?;
                out.push(tok.parse::<T>().map_err(|_| err(line, format!("{what}: `{tok}` is not a valid number")))?);
            }
            if let Some(extra) = tokens.next() {
                return Err(err(line, format!("{what}: unexpected extra field `{extra}`")));
            }
            out.try_into().map_err(|_| err(line, format!("{what}: wrong field count")))
        }
        let (n, l) = next_line("the header")?;
        let [nnode, ncell, nedge, nbedge] = fields::<usize, 4>(n, l, "header (nnode ncell nedge nbedge)", &err)?;
        let index = |line: usize, v: i64, size: usize, what: &str| -> Result<i32, Error> {
            if v < 0 || v as usize >= size {
                Err(err(line, format!("{what} {v} is out of range (0..{size})")))
            } else {
                Ok(v as i32)
            }
        };
        let mut g = Grid {
            x: Vec::with_capacity(2 * nnode.min(1 << 26)),
            cell: Vec::with_capacity(4 * ncell.min(1 << 26)),
            edge: Vec::with_capacity(2 * nedge.min(1 << 26)),
            ecell: Vec::with_capacity(2 * nedge.min(1 << 26)),
            bedge: Vec::new(),
            becell: Vec::new(),
            bound: Vec::new(),
        };
        for k in 0..nnode {
            let (n, l) = next_line(&format!("node {k}"))?;
            let [x, y] = fields::<f64, 2>(n, l, "node (x y)", &err)?;
            if !x.is_finite() || !y.is_finite() {
                return Err(err(n, "node coordinates must be finite".into()));
            }
            g.x.extend([x, y]);
        }
        for k in 0..ncell {
            let (n, l) = next_line(&format!("cell {k}"))?;
            for v in fields::<i64, 4>(n, l, "cell (4 nodes)", &err)? {
                g.cell.push(index(n, v, nnode, "node")?);
            }
        }
        for k in 0..nedge {
            let (n, l) = next_line(&format!("edge {k}"))?;
            let [n0, n1, c0, c1] = fields::<i64, 4>(n, l, "edge (2 nodes, 2 cells)", &err)?;
            g.edge.extend([index(n, n0, nnode, "node")?, index(n, n1, nnode, "node")?]);
            g.ecell.extend([index(n, c0, ncell, "cell")?, index(n, c1, ncell, "cell")?]);
        }
        for k in 0..nbedge {
            let (n, l) = next_line(&format!("boundary edge {k}"))?;
            let [n0, n1, c0, b] = fields::<i64, 4>(n, l, "boundary edge (2 nodes, cell, bound)", &err)?;
            g.bedge.extend([index(n, n0, nnode, "node")?, index(n, n1, nnode, "node")?]);
            g.becell.push(index(n, c0, ncell, "cell")?);
            if b != 1 && b != 2 {
                return Err(err(n, format!("bound {b} is neither 1 (wall) nor 2 (far field)")));
            }
            g.bound.push(b as i32);
        }
        Ok(g)
    }
}
