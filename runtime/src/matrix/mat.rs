//! `Mat<T>`: the values of a sparsity pattern, kept in a dat of dim 1 over
//! an internal set of one entity per stored entry, so that host access,
//! device mirrors and coherence are a dat's.

use std::io::Write as _;

use rayon::prelude::*;
use std::sync::Arc;

use super::assembly::MatScatter;
use super::sparsity::Sparsity;
use crate::arg::{Arg, ArgKind};
use crate::decl::{Dat, Map, Sections, Set, Subset};
use crate::error::{Error, Result};
use crate::types::{Access, Scalar};

/// A sparse matrix on a [`Sparsity`]: its values in CSR order, assembled
/// by loops with [`Mat::arg`].
///
/// ```
/// use parloop::{Access, Backend, Runtime};
///
/// /// The element matrix of a 1D Laplacian on an edge of length 1.
/// #[parloop::kernel]
/// fn laplace(a: &mut [[f64; 2]; 2]) {
///     a[0][0] += 1.0;
///     a[0][1] -= 1.0;
///     a[1][0] -= 1.0;
///     a[1][1] += 1.0;
/// }
///
/// let rt = Runtime::with_backend(Backend::Seq)?;
/// let nodes = rt.set("nodes", 3)?;
/// let edges = rt.set("edges", 2)?;
/// let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1, 1, 2])?;
/// let s = rt.sparsity("s", &[(&e2n, &e2n)], (1, 1))?;
/// let a = rt.mat::<f64>("A", &s)?;
/// rt.par_loop(laplace::KERNEL, &edges, &[a.arg(&e2n, &e2n, Access::INC)])?;
/// let csr = a.to_csr()?;
/// assert_eq!(csr.row_ptr, vec![0, 2, 5, 7]);
/// assert_eq!(csr.cols, vec![0, 1, 0, 1, 2, 1, 2]);
/// assert_eq!(csr.vals, vec![1.0, -1.0, -1.0, 2.0, -1.0, -1.0, 1.0]);
/// # Ok::<(), parloop::Error>(())
/// ```
#[derive(Clone)]
pub struct Mat<T: Scalar> {
    sparsity: Sparsity,
    values: Dat<T>,
    /// The first scalar row with a column in the column set's halo (rows
    /// before it need no halo values of `x` in a product), found once.
    halo_rows_from: Arc<std::sync::OnceLock<usize>>,
}

/// A matrix copied out in CSR form: row `i`'s entries are
/// `row_ptr[i]..row_ptr[i + 1]` of `cols` and `vals`, columns sorted.
#[derive(Clone, Debug, PartialEq)]
pub struct Csr<T> {
    /// Rows + 1 offsets.
    pub row_ptr: Vec<usize>,
    /// Column of each entry.
    pub cols: Vec<usize>,
    /// Value of each entry.
    pub vals: Vec<T>,
}

impl<T: Scalar> Mat<T> {
    /// A zero matrix named `name` on `sparsity` (the values' dat is named
    /// `name`; its internal set `pl_nnz_<name>`).
    pub(crate) fn new(name: &str, sparsity: &Sparsity) -> Result<Mat<T>> {
        let nnz = sparsity.nnz();
        let set = Set::new(&format!("pl_nnz_{name}"), Sections { core: nnz, ..Sections::default() })?;
        let mut zeros = Vec::new();
        zeros.try_reserve_exact(nnz).map_err(|_| Error::OutOfMemory {
            what: format!("matrix `{name}`: its values ({nnz} entries)"),
            bytes: nnz.saturating_mul(std::mem::size_of::<T>()),
        })?;
        // Zeroed on every worker: the first touch of fresh pages (0.1-3 s
        // per GiB here) is shared by the cores, as the assembly's writes are.
        zeros.spare_capacity_mut()[..nnz].par_chunks_mut(1 << 16).for_each(|c| {
            c.fill(std::mem::MaybeUninit::new(T::default()));
        });
        // SAFETY: the first `nnz` values were initialised just above.
        unsafe { zeros.set_len(nnz) };
        let values = Dat::new(name, &set, 1, zeros)?;
        Ok(Mat { sparsity: sparsity.clone(), values, halo_rows_from: Arc::default() })
    }

    /// The first scalar row of this rank with an entry in a halo column
    /// (the rows before it read owned entries of `x` only, so a product
    /// computes them while the halo is exchanged); the row count when no
    /// row has one (always in a serial run).
    pub(crate) fn halo_rows_from(&self) -> usize {
        *self.halo_rows_from.get_or_init(|| {
            let s = &self.sparsity;
            let owned_cols = (s.col_set().size() * s.col_dim()) as u64;
            let (ptr, cols) = (s.row_ptr(), s.col_indices());
            // Columns are sorted within a row: its last is its largest.
            (0..s.rows())
                .find(|&r| ptr[r + 1] > ptr[r] && cols[ptr[r + 1] - 1] as u64 >= owned_cols)
                .unwrap_or(s.rows())
        })
    }

    pub(crate) fn inner(&self) -> &Arc<crate::decl::DatInner<T>> {
        &self.values.0
    }

    /// The matrix's name.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let nodes = rt.set("nodes", 3)?;
    /// # let edges = rt.set("edges", 2)?;
    /// # let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1, 1, 2])?;
    /// let s = rt.sparsity("s", &[(&e2n, &e2n)], (1, 1))?;
    /// let a = rt.mat::<f64>("A", &s)?;
    /// assert_eq!((a.name(), a.sparsity().nnz()), ("A", 7));
    /// assert_eq!(a.values()?, vec![0.0; 7]); // a new matrix holds zeros
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        self.values.name()
    }

    /// The sparsity pattern.
    pub fn sparsity(&self) -> &Sparsity {
        &self.sparsity
    }

    /// The values' dat: dim 1, one entity per stored entry, CSR order
    /// (what the linear algebra, `linalg`, reads and loops over).
    #[allow(dead_code)]
    pub(crate) fn values_dat(&self) -> &Dat<T> {
        &self.values
    }

    /// A copy of the values, in CSR order (see [`Mat::to_csr`]).
    #[track_caller]
    pub fn values(&self) -> Result<Vec<T>> {
        self.values.values()
    }

    /// The matrix in CSR form (a copy).
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let n = rt.set("n", 2)?;
    /// # let id = rt.map("id", &n, &n, 1, vec![0, 1])?;
    /// let s = rt.sparsity("diag", &[(&id, &id)], (1, 1))?;
    /// let csr = rt.mat::<f64>("D", &s)?.to_csr()?;
    /// assert_eq!((csr.row_ptr, csr.cols, csr.vals), (vec![0, 1, 2], vec![0, 1], vec![0.0, 0.0]));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    #[track_caller]
    pub fn to_csr(&self) -> Result<Csr<T>> {
        let what = || format!("the CSR copy of matrix `{}`", self.name());
        Ok(Csr {
            row_ptr: crate::fallible::copy_of(self.sparsity.row_ptr(), what)?,
            cols: crate::fallible::mapped(self.sparsity.col_indices(), |&c| c as usize, what)?,
            vals: self.values()?,
        })
    }

    /// Sets every stored entry to zero.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let n = rt.set("n", 2)?;
    /// # let id = rt.map("id", &n, &n, 1, vec![0, 1])?;
    /// # let s = rt.sparsity("diag", &[(&id, &id)], (1, 1))?;
    /// let a = rt.mat::<f64>("A", &s)?;
    /// a.zero()?;
    /// assert_eq!(a.values()?, vec![0.0, 0.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn zero(&self) -> Result<()> {
        // Every entry: a matrix the lazy trace left stale is usable again.
        self.values.overwrite(|v| v.fill(T::default()))
    }

    /// Dirichlet rows: zeroes every stored entry of the rows of `rows`'
    /// entities (all components) and puts `diagonal` on their diagonal
    /// entries. `rows` must be a subset of the row set, and each diagonal
    /// entry must be stored (an error names the first that is not; nothing
    /// changes then). Under MPI, with the row set distributed, it is
    /// collective (every rank calls it, with its subset of the rows or an
    /// empty one): the ranks agree on its checks, so that a rank whose rows
    /// fail them does not leave the others waiting in the solver's first
    /// collective.
    ///
    /// The columns stay: the matrix is no longer symmetric. CG
    /// ([`crate::solve::cg`]) still solves it when `x` starts equal to
    /// `b / diagonal` on these rows (their residual is then zero and stays
    /// so; the `poisson` demo sets `b` and `x` to zero there); from another
    /// start nothing guarantees it: it may converge, or stop with
    /// [`crate::Error::NotConverged`] (never a wrong `x` reported as a
    /// solution). [`crate::solve::bicgstab`] needs no symmetry.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let n = rt.set("n", 2)?;
    /// # let id = rt.map("id", &n, &n, 1, vec![0, 1])?;
    /// # let s = rt.sparsity("diag", &[(&id, &id)], (1, 1))?;
    /// let a = rt.mat::<f64>("A", &s)?;
    /// let boundary = rt.subset("boundary", &n, vec![1])?;
    /// a.zero_rows(&boundary, 1.0)?;
    /// assert_eq!(a.values()?, vec![0.0, 1.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn zero_rows(&self, rows: &Subset, diagonal: T) -> Result<()> {
        let all: Vec<usize> = (0..self.sparsity.row_dim()).collect();
        self.zero_rows_of(rows, &all, diagonal, "zero_rows")
    }

    /// Dirichlet rows of some components only: [`Mat::zero_rows`] for
    /// components `components` (each below the row dim) of the rows of
    /// `rows`' entities, the other components' rows untouched. For a
    /// vector-valued unknown fixed in some directions only (a roller
    /// boundary of linear elasticity fixes the normal displacement and
    /// leaves the tangential one free).
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let n = rt.set("n", 1)?;
    /// # let id = rt.map("id", &n, &n, 1, vec![0])?;
    /// // One entity with two components: a 2x2 block.
    /// let s = rt.sparsity("block", &[(&id, &id)], (2, 2))?;
    /// let a = rt.mat::<f64>("A", &s)?;
    /// a.zero_rows(&rt.subset("all", &n, vec![0])?, 5.0)?; // [[5, 0], [0, 5]]
    /// a.zero_rows_components(&rt.subset("fixed", &n, vec![0])?, &[1], 1.0)?;
    /// assert_eq!(a.values()?, vec![5.0, 0.0, 0.0, 1.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn zero_rows_components(&self, rows: &Subset, components: &[usize], diagonal: T) -> Result<()> {
        self.zero_rows_of(rows, components, diagonal, "zero_rows_components")
    }

    /// [`Mat::zero_rows_components`], its errors named as `what`.
    fn zero_rows_of(&self, rows: &Subset, components: &[usize], diagonal: T, what: &str) -> Result<()> {
        // Agreed across the ranks of a distributed row set: a rank whose
        // rows lack a diagonal entry (or that passed a subset of another
        // set) fails there, and the others would otherwise go on to the
        // solver's first collective and wait for it forever.
        let diag = self.zero_row_positions(rows, components, what);
        let diag = self.sparsity.row_set().agreed_data(&format!("{what} of matrix `{}`", self.name()), diag, "")?;
        let ptr = self.sparsity.row_ptr();
        self.values.with_own_values_mut(|v| {
            for &(row, at) in &diag {
                v[ptr[row]..ptr[row + 1]].fill(T::default());
                v[at] = diagonal;
            }
        })
    }

    /// The rows of [`Mat::zero_rows`] on this rank, each with the position
    /// of its diagonal entry in the values, or the error naming the first
    /// problem.
    fn zero_row_positions(&self, rows: &Subset, components: &[usize], what: &str) -> Result<Vec<(usize, usize)>> {
        let s = &self.sparsity;
        if let Some(&c) = components.iter().find(|&&c| c >= s.row_dim()) {
            return Err(Error::InvalidDeclaration {
                what: "matrix",
                name: self.name().into(),
                reason: format!(
                    "{what}: component {c} of subset `{}`, but the rows have {} component(s) (row dim of sparsity `{}`)",
                    rows.name(),
                    s.row_dim(),
                    s.name()
                ),
            });
        }
        if rows.parent() != s.row_set() {
            // Two sets of one name are two runtimes' (names are unique
            // within one): said, or the message named one set twice.
            let other = if rows.parent().name() == s.row_set().name() { " of another runtime" } else { "" };
            return Err(Error::InvalidDeclaration {
                what: "matrix",
                name: self.name().into(),
                reason: format!(
                    "{what}: subset `{}` is of set `{}`{other}, the matrix's rows are on `{}`",
                    rows.name(),
                    rows.parent().name(),
                    s.row_set().name()
                ),
            });
        }
        if s.row_set() != s.col_set() || s.row_dim() != s.col_dim() {
            return Err(Error::InvalidDeclaration {
                what: "matrix",
                name: self.name().into(),
                reason: format!(
                    "{what} needs a square block structure (rows and columns on one set, equal dims) to have a diagonal"
                ),
            });
        }
        let (dim, ptr, cols) = (s.row_dim(), s.row_ptr(), s.col_indices());
        let owned = s.rows() / dim;
        // Positions first, so that a missing diagonal changes nothing.
        // (Capped by the rows: the product of two user sizes may overflow.)
        let mut diag = Vec::with_capacity(rows.size().saturating_mul(components.len()).min(s.rows()));
        for &r in rows.indices() {
            let r = r as usize;
            if r >= owned {
                continue; // not this rank's row
            }
            for &a in components {
                let row = r * dim + a;
                let k = cols[ptr[row]..ptr[row + 1]].binary_search(&(row as u32)).map_err(|_| Error::InvalidDeclaration {
                    what: "matrix",
                    name: self.name().into(),
                    reason: format!(
                        "{what}: the diagonal entry ({row}, {row}) of row entity {r} (subset `{}`) is not in sparsity `{}`",
                        rows.name(),
                        s.name()
                    ),
                })?;
                diag.push((row, ptr[row] + k));
            }
        }
        Ok(diag)
    }

    /// Writes the matrix to `path` in Matrix Market coordinate format
    /// (`real general`, or `integer general` for a matrix of integers;
    /// 1-based, every stored entry, zeros included), values with 17
    /// significant digits so that they read back exactly (integers as they
    /// are; readers that hold Matrix Market integers in 64-bit signed
    /// integers cannot read `u64` values above `i64::MAX`).
    /// Under MPI, with the row set distributed, it is collective: rank 0
    /// writes the whole matrix in the global numbering the mesh was
    /// declared in (the file a serial run writes, up to rounding in the
    /// values), and the other ranks write nothing. A matrix whose row set
    /// is not distributed is each rank's own: every rank writes its own
    /// file, so give each rank its own `path` (by [`Runtime::rank`](crate::Runtime::rank)).
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let n = rt.set("n", 2)?;
    /// # let id = rt.map("id", &n, &n, 1, vec![0, 1])?;
    /// # let s = rt.sparsity("diag", &[(&id, &id)], (1, 1))?;
    /// let a = rt.mat::<f64>("A", &s)?;
    /// let path = std::env::temp_dir().join(format!("parloop-doc-{}.mtx", std::process::id()));
    /// a.write_matrix_market(&path)?;
    /// assert!(std::fs::read_to_string(&path).unwrap().starts_with("%%MatrixMarket matrix coordinate real general"));
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), parloop::Error>(())
    /// ```
    #[track_caller]
    pub fn write_matrix_market(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let path = path.as_ref();
        #[cfg(feature = "mpi")]
        if self.sparsity.row_set().is_distributed() {
            // Each rank holds its own rows with local columns: written as
            // they are, the files were pieces no tool could put together.
            let written = self.gather_entries(0).and_then(|gathered| match gathered {
                Some(all) => {
                    let entries = all.entries.iter().map(|&(r, c, v)| (r as usize, c as usize, v));
                    self.write_entries(path, (all.rows, all.cols, all.entries.len()), entries)
                }
                None => Ok(()),
            });
            // Rank 0 writes: where it fails (a path the others need not
            // see), every rank returns an error, so that none goes on to
            // the next collective alone.
            if let Some(part) = self.sparsity.row_set().0.local.get() {
                if !part.comm.all_ok(written.is_ok()) {
                    let what = format!("writing matrix `{}` to {}", self.name(), path.display());
                    return Err(part.comm.failed_elsewhere(written, &what));
                }
            }
            return written;
        }
        let csr = self.to_csr()?;
        let s = &self.sparsity;
        let entries = (0..s.rows())
            .flat_map(|row| (csr.row_ptr[row]..csr.row_ptr[row + 1]).map(move |k| (row, k)))
            .map(|(row, k)| (row, csr.cols[k], csr.vals[k]));
        self.write_entries(path, (s.rows(), s.cols(), s.nnz()), entries)
    }

    /// Writes a Matrix Market file of `shape` (rows, columns, entries)
    /// holding `entries` (0-based row, column, value).
    fn write_entries(
        &self,
        path: &std::path::Path,
        shape: (usize, usize, usize),
        entries: impl Iterator<Item = (usize, usize, T)>,
    ) -> Result<()> {
        // The matrix named too (an empty path alone said only ": No such
        // file or directory").
        let io =
            |source| Error::Io { path: format!("{:?} (Matrix Market file of matrix `{}`)", path, self.name()), source };
        let file = std::fs::File::create(path).map_err(io)?;
        let mut w = std::io::BufWriter::new(file);
        // Integer values written under a `real` header were read as
        // doubles: 2^53 + 1 came back as 2^53.
        let field = match T::TYPE {
            crate::types::ElemType::F64 | crate::types::ElemType::F32 => "real",
            _ => "integer",
        };
        writeln!(w, "%%MatrixMarket matrix coordinate {field} general").map_err(io)?;
        writeln!(w, "% parloop matrix `{}` on sparsity `{}`", self.name(), self.sparsity.name()).map_err(io)?;
        writeln!(w, "{} {} {}", shape.0, shape.1, shape.2).map_err(io)?;
        for (row, col, value) in entries {
            writeln!(w, "{} {} {}", row + 1, col + 1, MmValue(value)).map_err(io)?;
        }
        w.flush().map_err(io)
    }

    /// The matrix argument of a loop: the kernel parameter is the element
    /// matrix `&mut [[T; C]; R]`, `R` = row map arity x row dim, `C` =
    /// column map arity x column dim (local row `i * row_dim + a` is
    /// component `a` of the entity in column `i` of `row_map`). `INC` adds
    /// the element matrix (the kernel sees it zeroed); `WRITE` sets the
    /// entries it covers (to the values the kernel leaves, zero where it
    /// writes nothing), each entry from one element only: two elements
    /// covering one entry are an error ([`ArgProblem::MatWriteRace`](crate::ArgProblem::MatWriteRace):
    /// which value stayed would depend on the backend), so use `INC` to
    /// accumulate. `INC` adds to what the matrix holds: call
    /// [`Mat::zero`] before assembling again. The pair must be one the
    /// sparsity was built from.
    ///
    /// ```
    /// use parloop::{Access, Backend, Runtime};
    /// /// A 2 x 2 block (two unknowns per node) on the diagonal of each node
    /// /// of an edge: the element matrix is (2 nodes x 2) x (2 nodes x 2).
    /// #[parloop::kernel]
    /// fn blocks(a: &mut [[f64; 4]; 4]) {
    ///     for i in 0..4 {
    ///         a[i][i] += 1.0;
    ///     }
    /// }
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// let nodes = rt.set("nodes", 3)?;
    /// let edges = rt.set("edges", 2)?;
    /// let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1, 1, 2])?;
    /// let s = rt.sparsity("s", &[(&e2n, &e2n)], (2, 2))?;
    /// let a = rt.mat::<f64>("A", &s)?;
    /// rt.par_loop(blocks::KERNEL, &edges, &[a.arg(&e2n, &e2n, Access::INC)])?;
    /// let csr = a.to_csr()?;
    /// // Row 2 is node 1's first component, on two edges.
    /// let row2 = csr.row_ptr[2]..csr.row_ptr[3];
    /// let diagonal = csr.cols[row2.clone()].iter().position(|&c| c == 2).unwrap();
    /// assert_eq!(csr.vals[row2][diagonal], 2.0);
    /// // An element matrix of the wrong shape is refused, naming the argument.
    /// #[parloop::kernel]
    /// fn too_small(a: &mut [[f64; 2]; 2]) {
    ///     a[0][0] += 1.0;
    /// }
    /// assert!(rt.par_loop(too_small::KERNEL, &edges, &[a.arg(&e2n, &e2n, Access::INC)]).is_err());
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn arg(&self, row_map: &Map, col_map: &Map, access: Access) -> Arg {
        let s = &self.sparsity;
        // Saturating: an impossible shape (arity x dim past `usize`) is
        // then refused by the loop's validation, naming the argument.
        let rows = row_map.arity().saturating_mul(s.row_dim());
        let cols = col_map.arity().saturating_mul(s.col_dim());
        Arg::new(
            self.values.0.clone(),
            ArgKind::Mat(Arc::new(MatScatter {
                pattern: s.pattern.clone(),
                sparsity_name: s.name.clone(),
                row_map: row_map.clone(),
                col_map: col_map.clone(),
                pair: (row_map.clone(), col_map.clone()),
                rows,
                cols,
                offsets: std::sync::OnceLock::new(),
            })),
            access,
            rows.saturating_mul(cols),
            None,
        )
    }
}

impl<T: Scalar> std::fmt::Debug for Mat<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mat<{}>({} on {:?})", T::TYPE, self.name(), self.sparsity)
    }
}

/// A value as Matrix Market text: floats with 17 significant digits
/// (exact round trip), integers as they are.
struct MmValue<T>(T);

impl<T: Scalar> std::fmt::Display for MmValue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::types::ElemType;
        let bytes = bytemuck::bytes_of(&self.0);
        match T::TYPE {
            ElemType::F64 => write!(f, "{:.16e}", bytemuck::pod_read_unaligned::<f64>(bytes)),
            ElemType::F32 => write!(f, "{:.8e}", bytemuck::pod_read_unaligned::<f32>(bytes)),
            _ => write!(f, "{:?}", self.0),
        }
    }
}
