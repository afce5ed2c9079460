//! The sparsity pattern of a matrix: CSR with sorted unique columns per
//! row, built once on the host from (row map, column map) pairs and shared
//! by every matrix on it.
//!
//! Two levels are kept: the *block* pattern (row entity -> column
//! entities), which the assembly searches, and the *scalar* pattern (block
//! rows and columns expanded by the row and column dims: row entity `r`,
//! component `a` is row `r * row_dim + a`), which is what the values follow
//! and what the linear algebra reads. With both dims 1 they are one array.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use rayon::prelude::*;

use crate::decl::{Map, Set};
use crate::error::{Error, Result};

/// Rows per parallel work item when building (large enough to amortise a
/// task, small enough to balance).
const ROWS_PER_TASK: usize = 4096;

/// The shared pattern (what the cache holds weakly).
pub(crate) struct Pattern {
    pub(crate) row_set: Set,
    pub(crate) col_set: Set,
    pub(crate) row_dim: usize,
    pub(crate) col_dim: usize,
    /// (row map id, col map id) of each pair, and their names for messages.
    pub(crate) pairs: Vec<(u64, u64)>,
    pub(crate) pair_names: Vec<(String, String)>,
    /// Owned row entities (the rows of this rank, seed 004).
    pub(crate) row_entities: usize,
    /// Block CSR, when a dim is above 1 (else the scalar one serves).
    block: Option<(Vec<usize>, Vec<u32>)>,
    /// Scalar CSR.
    row_ptr: Vec<usize>,
    col_indices: Vec<u32>,
    /// Position tables of the scalar P1 scatter, per (row map, col map)
    /// pair, made by its second host loop
    /// (`assembly::MatScatter::attach_offsets`).
    pub(crate) offsets: std::sync::Mutex<Vec<(PairIds, super::assembly::OffsetsSlot)>>,
    /// The largest scalar column index (`None`: no entries), found by the
    /// first host product that may gather (`linalg::gather`).
    max_col: std::sync::OnceLock<Option<u32>>,
    /// Whether the row pointers never decrease, checked once (every host
    /// product relies on it; they never change).
    ascending: std::sync::OnceLock<bool>,
}

/// A (row map, column map) pair by map identities.
pub(crate) type PairIds = (u64, u64);

impl Pattern {
    /// The block CSR: row entity -> sorted column entities.
    pub(crate) fn block(&self) -> (&[usize], &[u32]) {
        match &self.block {
            Some((p, c)) => (p, c),
            None => (&self.row_ptr, &self.col_indices),
        }
    }

    /// The scalar row pointers (`rows + 1` of them).
    pub(crate) fn row_ptr(&self) -> &[usize] {
        &self.row_ptr
    }

    /// The scalar column indices, sorted and unique within each row.
    pub(crate) fn col_indices(&self) -> &[u32] {
        &self.col_indices
    }

    /// Whether the row pointers never decrease (checked once).
    pub(crate) fn rows_ascend(&self) -> bool {
        *self.ascending.get_or_init(|| crate::linalg::spmv::first_decrease(&self.row_ptr).is_none())
    }

    /// The largest scalar column index, found once (over every entry, not
    /// each row's last: the SIMD product's memory safety rests on it).
    pub(crate) fn max_col(&self) -> Option<u32> {
        *self.max_col.get_or_init(|| {
            use rayon::prelude::*;
            self.col_indices.par_iter().copied().max()
        })
    }

    /// Position in the values of scalar entry (`row_entity`, component `a`)
    /// x (`col_entity`, component `b`), or `None` when the pattern lacks it
    /// (or the row is not owned).
    #[allow(dead_code)] // see `assembly::element_positions`
    #[inline(always)]
    pub(crate) fn position(&self, row_entity: usize, a: usize, col_entity: usize, b: usize) -> Option<usize> {
        if row_entity >= self.row_entities {
            return None;
        }
        let (bptr, bcols) = self.block();
        let row = &bcols[bptr[row_entity]..bptr[row_entity + 1]];
        let k = find(row, col_entity as u32)?;
        Some(self.row_ptr[row_entity * self.row_dim + a] + k * self.col_dim + b)
    }
}

/// Where `col` is in the sorted `row`. Short rows (FEM rows hold 7 to 30
/// entries) count the entries below `col` without branches, which the
/// compiler vectorises: about four times faster than a binary search
/// there, whose branches mispredict on every step.
#[inline(always)]
pub(crate) fn find(row: &[u32], col: u32) -> Option<usize> {
    if row.len() <= 64 {
        let k = row.iter().map(|&c| (c < col) as usize).sum::<usize>();
        (row.get(k) == Some(&col)).then_some(k)
    } else {
        row.binary_search(&col).ok()
    }
}

/// The sparsity pattern of a matrix over (row set, column set) with block
/// sizes (row dim, column dim): CSR with sorted unique columns per row,
/// blocks expanded to scalar rows and columns (row entity `r`, component
/// `a` is row `r * row_dim + a`). Built by [`Runtime::sparsity`](crate::Runtime::sparsity)
/// from (row map, column map) pairs; cheap to clone.
///
/// ```
/// use parloop::{Backend, Runtime};
/// let rt = Runtime::with_backend(Backend::Seq)?;
/// let nodes = rt.set("nodes", 3)?;
/// let edges = rt.set("edges", 2)?;
/// let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1, 1, 2])?;
/// let s = rt.sparsity("s", &[(&e2n, &e2n)], (1, 1))?;
/// assert_eq!((s.rows(), s.cols(), s.nnz()), (3, 3, 7));
/// # Ok::<(), parloop::Error>(())
/// ```
#[derive(Clone)]
pub struct Sparsity {
    pub(crate) name: Arc<str>,
    pub(crate) pattern: Arc<Pattern>,
}

impl Sparsity {
    /// The name it was declared with.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// let nodes = rt.set("nodes", 3)?;
    /// let edges = rt.set("edges", 2)?;
    /// let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1, 1, 2])?;
    /// let s = rt.sparsity("elasticity", &[(&e2n, &e2n)], (2, 2))?;
    /// assert_eq!(s.name(), "elasticity");
    /// assert_eq!((s.row_set().name(), s.col_set().name()), ("nodes", "nodes"));
    /// assert_eq!((s.row_dim(), s.col_dim(), s.rows(), s.cols()), (2, 2, 6, 6));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Scalar rows: owned row entities x row dim.
    pub fn rows(&self) -> usize {
        self.pattern.row_ptr.len() - 1
    }
    /// Scalar columns: column entities (halo included) x column dim.
    pub fn cols(&self) -> usize {
        self.pattern.col_set.total() * self.pattern.col_dim
    }
    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.pattern.col_indices.len()
    }
    /// The set the rows are on.
    pub fn row_set(&self) -> &Set {
        &self.pattern.row_set
    }
    /// The set the columns are on.
    pub fn col_set(&self) -> &Set {
        &self.pattern.col_set
    }
    /// Values per row entity.
    pub fn row_dim(&self) -> usize {
        self.pattern.row_dim
    }
    /// Values per column entity.
    pub fn col_dim(&self) -> usize {
        self.pattern.col_dim
    }
    /// The scalar CSR row pointers: row `i`'s entries are
    /// `row_ptr[i]..row_ptr[i + 1]` of [`Sparsity::col_indices`] and of a
    /// matrix's values.
    pub(crate) fn row_ptr(&self) -> &[usize] {
        self.pattern.row_ptr()
    }
    /// The scalar CSR column indices (`u32`), sorted and unique per row.
    pub(crate) fn col_indices(&self) -> &[u32] {
        self.pattern.col_indices()
    }
    /// Whether the row pointers never decrease (checked once).
    pub(crate) fn rows_ascend(&self) -> bool {
        self.pattern.rows_ascend()
    }
    /// [`CsrRef::gather`](crate::linalg::spmv::CsrRef::gather) for host
    /// products: the largest column index when `simd` (the runtime's
    /// `PARLOOP_SIMD`), else `None` (scalar rows).
    pub(crate) fn gather_bound(&self, simd: bool) -> Option<u32> {
        if simd {
            self.pattern.max_col()
        } else {
            None
        }
    }
    /// Whether (`row_map`, `col_map`) is one of the pairs it was built from.
    pub(crate) fn has_pair(&self, row_map: &Map, col_map: &Map) -> bool {
        self.pattern.pairs.contains(&(row_map.id(), col_map.id()))
    }
    /// The pairs' names, `(row map, col map)`, for messages.
    pub(crate) fn pair_names(&self) -> String {
        let names: Vec<String> = self.pattern.pair_names.iter().map(|(r, c)| format!("(`{r}`, `{c}`)")).collect();
        names.join(", ")
    }
}

impl std::fmt::Debug for Sparsity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Sparsity({}: {} x {}, {} entries, pairs {})",
            self.name,
            self.rows(),
            self.cols(),
            self.nnz(),
            self.pair_names()
        )
    }
}

/// What the cache keys a pattern by: map identities and dims, never data.
pub(crate) type PatternKey = (Vec<(u64, u64)>, usize, usize);

/// The cache key of a request.
pub(crate) fn key(pairs: &[(&Map, &Map)], dims: (usize, usize)) -> PatternKey {
    (pairs.iter().map(|(r, c)| (r.id(), c.id())).collect(), dims.0, dims.1)
}

fn bad(name: &str, reason: String) -> Error {
    Error::InvalidDeclaration { what: "sparsity", name: name.into(), reason }
}

fn oom(name: &str, what: &str, n: usize, size: usize) -> Error {
    Error::OutOfMemory { what: format!("sparsity `{name}`: {what} ({n} entries)"), bytes: n.saturating_mul(size) }
}

/// A vector of `n` copies of `v`, allocated fallibly and filled on every
/// worker: the first touch of fresh pages (the kernel clears each, about
/// 1 s per GB on dev-2c) is the larger part of writing them, and one
/// thread clearing the 190 MB of the n = 125 cube's incidence and 120 MB of
/// its columns kept the build from scaling.
fn filled<T: Copy + Send + Sync>(name: &str, what: &str, n: usize, v: T) -> Result<Vec<T>> {
    let mut out = Vec::new();
    out.try_reserve_exact(n).map_err(|_| oom(name, what, n, std::mem::size_of::<T>()))?;
    out.spare_capacity_mut()[..n].par_chunks_mut(1 << 16).for_each(|c| c.fill(std::mem::MaybeUninit::new(v)));
    // SAFETY: the first `n` values were initialised just above.
    unsafe { out.set_len(n) };
    Ok(out)
}

/// Checks a request and builds its pattern (in parallel).
pub(crate) fn build(name: &str, pairs: &[(&Map, &Map)], dims: (usize, usize)) -> Result<Pattern> {
    let (row_dim, col_dim) = dims;
    if row_dim == 0 || col_dim == 0 {
        return Err(bad(name, format!("dims must be at least 1, got ({row_dim}, {col_dim})")));
    }
    let Some(&(r0, c0)) = pairs.first() else {
        return Err(bad(name, "needs at least one (row map, column map) pair".into()));
    };
    let (row_set, col_set) = (r0.to().clone(), c0.to().clone());
    for (r, c) in pairs {
        if r.from() != c.from() {
            return Err(bad(
                name,
                format!(
                    "row map `{}` goes from `{}` but column map `{}` goes from `{}`: a pair's maps must come from one iteration set",
                    r.name(),
                    r.from().name(),
                    c.name(),
                    c.from().name()
                ),
            ));
        }
        if r.to() != &row_set {
            return Err(bad(
                name,
                format!(
                    "row map `{}` goes to `{}`, row map `{}` to `{}`: rows live on one set",
                    r.name(),
                    r.to().name(),
                    r0.name(),
                    row_set.name()
                ),
            ));
        }
        if c.to() != &col_set {
            return Err(bad(
                name,
                format!(
                    "column map `{}` goes to `{}`, column map `{}` to `{}`: columns live on one set",
                    c.name(),
                    c.to().name(),
                    c0.name(),
                    col_set.name()
                ),
            ));
        }
    }
    let col_total = col_set.total();
    if col_total.checked_mul(col_dim).is_none_or(|n| n > u32::MAX as usize) {
        return Err(Error::SizeOverflow {
            what: "sparsity",
            name: name.into(),
            detail: format!(
                "{col_total} column entities of `{}` x dim {col_dim} exceed the u32 column indices",
                col_set.name()
            ),
        });
    }
    for (r, _) in pairs {
        if r.from().total() > u32::MAX as usize {
            return Err(Error::SizeOverflow {
                what: "sparsity",
                name: name.into(),
                detail: format!("map `{}` has {} elements, more than u32 indices hold", r.name(), r.from().total()),
            });
        }
    }
    let rows = row_set.size();
    if rows >= u32::MAX as usize {
        return Err(Error::SizeOverflow {
            what: "sparsity",
            name: name.into(),
            detail: format!("{rows} row entities of `{}`: more than u32 indices hold", row_set.name()),
        });
    }
    // Scalar rows and a block's entries are counted in `usize` below (and
    // rows indexed like the column side): bound them first.
    if row_set.total().checked_mul(row_dim).is_none_or(|n| n > u32::MAX as usize)
        || row_dim.checked_mul(col_dim).is_none()
    {
        return Err(Error::SizeOverflow {
            what: "sparsity",
            name: name.into(),
            detail: format!(
                "{} row entities of `{}` x dim {row_dim} (blocks of {row_dim} x {col_dim}) exceed the u32 row indices",
                row_set.total(),
                row_set.name()
            ),
        });
    }
    // Row entity -> the elements (of each pair) that reach it.
    let adjacency: Vec<(Vec<usize>, Vec<u32>)> =
        pairs.iter().map(|(r, _)| incidence(name, r, rows)).collect::<Result<_>>()?;
    // Each task: its rows' lengths and sorted unique columns.
    // Duplicates are dropped with a stamp per column entity (the last row
    // that saw it), one array per worker, so that only the unique columns
    // (15 of the ~100 a P1 tetrahedral row gathers) are sorted.
    // `map_init` makes a stamp array (4 bytes per column entity, 8 MB for
    // the n = 125 cube) for every piece rayon splits the range into: at
    // least `min_len` tasks a piece keeps that to about four per worker.
    // A column set far larger than the column maps reach (declared sets
    // cost nothing; a stamp array for four billion columns would be 16 GB
    // per worker) has its duplicates dropped by sorting instead.
    let reachable: usize = pairs.iter().map(|(_, c)| c.values().len()).sum();
    let stamped = col_total <= reachable.saturating_mul(4).max(1 << 16);
    let task_count = rows.div_ceil(ROWS_PER_TASK);
    let min_len = task_count.div_ceil(4 * rayon::current_num_threads()).max(1);
    // Every allocation below is fallible: a dense row (a map of arity
    // 60 000 from one element) asks for gigabytes here, and `Vec`'s own
    // growth aborts the process when the allocator refuses.
    let tasks: Vec<(Vec<u32>, Vec<u32>)> = (0..task_count)
        .into_par_iter()
        .with_min_len(min_len)
        .map_init(
            || {
                let mut stamp = Vec::new();
                let made = !stamped || stamp.try_reserve_exact(col_total).is_ok();
                stamp.resize(if made && stamped { col_total } else { 0 }, u32::MAX);
                (made, stamp)
            },
            |(made, stamp), t| -> Result<(Vec<u32>, Vec<u32>)> {
                if !*made {
                    return Err(oom(name, "a worker's column stamps", col_total, 4));
                }
                let range = t * ROWS_PER_TASK..((t + 1) * ROWS_PER_TASK).min(rows);
                let mut lens = Vec::new();
                lens.try_reserve_exact(range.len()).map_err(|_| oom(name, "row lengths", range.len(), 4))?;
                let mut cols: Vec<u32> = Vec::new();
                let mut buf: Vec<u32> = Vec::new();
                for r in range {
                    buf.clear();
                    // At most every element's columns: room for them first.
                    let gathered: usize = pairs
                        .iter()
                        .zip(&adjacency)
                        .map(|((_, c), (ptr, _))| (ptr[r + 1] - ptr[r]).saturating_mul(c.arity()))
                        .fold(0, usize::saturating_add);
                    buf.try_reserve(gathered).map_err(|_| oom(name, "one row's gathered columns", gathered, 4))?;
                    for ((_, c), (ptr, elems)) in pairs.iter().zip(&adjacency) {
                        let (cv, ca) = (c.values(), c.arity());
                        for &e in &elems[ptr[r]..ptr[r + 1]] {
                            let e = e as usize;
                            for &v in &cv[e * ca..(e + 1) * ca] {
                                if !stamped {
                                    buf.push(v as u32);
                                    continue;
                                }
                                let seen = &mut stamp[v as usize];
                                if *seen != r as u32 {
                                    *seen = r as u32;
                                    buf.push(v as u32);
                                }
                            }
                        }
                    }
                    buf.sort_unstable();
                    if !stamped {
                        buf.dedup();
                    }
                    lens.push(buf.len() as u32);
                    cols.try_reserve(buf.len())
                        .map_err(|_| oom(name, "block column indices", cols.len() + buf.len(), 4))?;
                    cols.extend_from_slice(&buf);
                }
                Ok((lens, cols))
            },
        )
        .collect::<Result<_>>()?;
    drop(adjacency);
    let mut bptr = filled(name, "block row pointers", rows + 1, 0usize)?;
    let mut task_offsets = Vec::with_capacity(tasks.len() + 1);
    let mut at = 0usize;
    for (t, (lens, cols)) in tasks.iter().enumerate() {
        task_offsets.push(at);
        for (i, &l) in lens.iter().enumerate() {
            bptr[t * ROWS_PER_TASK + i] = at;
            at += l as usize;
        }
        // Checked in release too: `set_len` below relies on the columns
        // filling exactly `at` entries.
        assert_eq!(at - task_offsets[t], cols.len(), "a task's row lengths sum to its column count");
    }
    bptr[rows] = at;
    let mut bcols: Vec<u32> = Vec::new();
    bcols.try_reserve_exact(at).map_err(|_| oom(name, "block column indices", at, 4))?;
    // Each page is touched once, by the worker that copies into it.
    split_fill(&mut bcols.spare_capacity_mut()[..at], tasks.iter().map(|(_, c)| c.as_slice()));
    // SAFETY: the tasks' columns, `at` of them in all, filled every entry.
    unsafe { bcols.set_len(at) };
    drop(tasks);
    if row_dim == 1 && col_dim == 1 {
        return Ok(Pattern {
            row_set,
            col_set,
            row_dim,
            col_dim,
            pairs: pairs.iter().map(|(r, c)| (r.id(), c.id())).collect(),
            pair_names: pairs.iter().map(|(r, c)| (r.name().to_owned(), c.name().to_owned())).collect(),
            row_entities: rows,
            block: None,
            row_ptr: bptr,
            col_indices: bcols,
            offsets: Default::default(),
            max_col: Default::default(),
            ascending: Default::default(),
        });
    }
    // Expand blocks: row r*rd + a holds, for each block column c, the
    // columns c*cd .. c*cd + cd.
    let block_nnz = bptr[rows];
    let nnz = block_nnz.checked_mul(row_dim * col_dim).ok_or_else(|| Error::SizeOverflow {
        what: "sparsity",
        name: name.into(),
        detail: format!("{block_nnz} blocks of {row_dim} x {col_dim}"),
    })?;
    let mut row_ptr = filled(name, "row pointers", rows * row_dim + 1, 0usize)?;
    row_ptr.par_chunks_mut(row_dim).enumerate().for_each(|(r, chunk)| {
        if r < rows {
            let len = (bptr[r + 1] - bptr[r]) * col_dim;
            for (a, p) in chunk.iter_mut().enumerate() {
                *p = bptr[r] * row_dim * col_dim + a * len;
            }
        }
    });
    row_ptr[rows * row_dim] = nnz;
    let mut col_indices = filled(name, "column indices", nnz, 0u32)?;
    // Each block row's scalar rows are contiguous: split the output per block row.
    let slices = split_by(&mut col_indices, (0..rows).map(|r| (bptr[r + 1] - bptr[r]) * row_dim * col_dim));
    slices.into_par_iter().enumerate().for_each(|(r, out)| {
        let block = &bcols[bptr[r]..bptr[r + 1]];
        let mut k = 0;
        for _ in 0..row_dim {
            for &c in block {
                for b in 0..col_dim {
                    out[k] = c * col_dim as u32 + b as u32;
                    k += 1;
                }
            }
        }
    });
    Ok(Pattern {
        row_set,
        col_set,
        row_dim,
        col_dim,
        pairs: pairs.iter().map(|(r, c)| (r.id(), c.id())).collect(),
        pair_names: pairs.iter().map(|(r, c)| (r.name().to_owned(), c.name().to_owned())).collect(),
        row_entities: rows,
        block: Some((bptr, bcols)),
        row_ptr,
        col_indices,
        offsets: Default::default(),
        max_col: Default::default(),
        ascending: Default::default(),
    })
}

/// Row entity -> elements whose row of `map` reaches it (owned rows only;
/// an element appears once per column that reaches the row), as CSR, the
/// elements of each row in ascending order.
///
/// Each worker takes a contiguous run of elements and counts, then places,
/// them in arrays of its own: worker `w`'s elements of row `r` go after
/// those of the workers before it. No atomic read-modify-write per map
/// value (47 million of them for the n = 125 cube, each a locked add when
/// the counters were shared).
fn incidence(name: &str, map: &Map, rows: usize) -> Result<(Vec<usize>, Vec<u32>)> {
    let (values, arity) = (map.values(), map.arity().max(1));
    if values.len() > u32::MAX as usize {
        return Err(Error::SizeOverflow {
            what: "sparsity",
            name: name.into(),
            detail: format!("map `{}` has {} values, more than u32 positions hold", map.name(), values.len()),
        });
    }
    // The elements a loop runs (core, owned, exec halo). Under MPI the
    // non-exec halo's elements never run, and their maps may name vertices
    // this rank does not hold: counted, they stored spurious zero entries
    // in owned rows (a row of `unit_square`'s vertex 8 with columns of
    // vertices it shares no cell with).
    let s = map.from().sections();
    let elements = (values.len() / arity).min(s.core + s.owned + s.exec);
    // At most 8 workers: each holds a counter per row.
    let workers = rayon::current_num_threads().clamp(1, 8).min(elements.div_ceil(16 * 1024).max(1));
    let per = elements.div_ceil(workers).max(1);
    let run = |w: usize| (w * per).min(elements)..((w + 1) * per).min(elements);
    let mut cursors: Vec<Vec<u32>> =
        (0..workers).map(|_| filled(name, "row counts", rows, 0u32)).collect::<Result<_>>()?;
    cursors.par_iter_mut().enumerate().for_each(|(w, count)| {
        let elems = run(w);
        for &r in &values[elems.start * arity..elems.end * arity] {
            if (r as usize) < rows {
                count[r as usize] += 1;
            }
        }
    });
    // Counts become each worker's first position in each row.
    let mut ptr = filled(name, "incidence pointers", rows + 1, 0usize)?;
    let mut at = 0u32;
    for r in 0..rows {
        ptr[r] = at as usize;
        for cursor in cursors.iter_mut() {
            let n = cursor[r];
            cursor[r] = at;
            at += n;
        }
    }
    let total = at as usize;
    ptr[rows] = total;
    let mut elems = filled(name, "incidence", total, 0u32)?;
    // SAFETY: `AtomicU32` has the size, alignment and bit validity of
    // `u32`, and `elems` is borrowed mutably (no other access) while the
    // atomic view lives.
    let atomics: &[AtomicU32] = unsafe { &*(elems.as_mut_slice() as *mut [u32] as *const [AtomicU32]) };
    // Positions are disjoint between workers; relaxed stores are plain
    // stores (the atomics only make the sharing safe).
    cursors.par_iter_mut().enumerate().for_each(|(w, cursor)| {
        for e in run(w) {
            for &r in &values[e * arity..(e + 1) * arity] {
                if (r as usize) < rows {
                    let at = &mut cursor[r as usize];
                    atomics[*at as usize].store(e as u32, Ordering::Relaxed);
                    *at += 1;
                }
            }
        }
    });
    Ok((ptr, elems))
}

/// Copies the `parts` one after another into `out`, in parallel; `out`
/// holds exactly their total (checked in release builds too: callers
/// mark `out` initialised afterwards, so a shortfall would be unsound).
fn split_fill<'a>(out: &mut [std::mem::MaybeUninit<u32>], parts: impl Iterator<Item = &'a [u32]>) {
    let parts: Vec<&[u32]> = parts.collect();
    assert_eq!(out.len(), parts.iter().map(|p| p.len()).sum::<usize>(), "split_fill fills `out` exactly");
    let slices = split_by(out, parts.iter().map(|p| p.len()));
    slices.into_par_iter().zip(parts).for_each(|(o, p)| {
        for (o, &v) in o.iter_mut().zip(p) {
            o.write(v);
        }
    });
}

/// `out` cut into consecutive slices of the given lengths.
fn split_by<T>(mut out: &mut [T], lens: impl Iterator<Item = usize>) -> Vec<&mut [T]> {
    let mut slices = Vec::new();
    for len in lens {
        let (head, tail) = std::mem::take(&mut out).split_at_mut(len);
        slices.push(head);
        out = tail;
    }
    slices
}
