//! Assembly on the host: where an element matrix's entries go in the CSR
//! values, and the scatter the CPU binders call after the kernel.
//!
//! Positions are searched (`sparsity::find` in the row entity's block
//! row, tens of entries) rather than precomputed per element: a precomputed
//! table for the n = 125 unit cube would hold 11.7 million tets x 16
//! entries (750 MB of `u32`), three times the matrix itself, while the
//! search touches the block row the scatter writes anyway.
//! [`element_positions`] is the one definition of an element's positions;
//! device strategies (a contributions CSR, staged adds) build on it.
//!
//! The one exception: P1 triangles and tetrahedra (dims 1, equal row and
//! column arities 3 or 4) assembled with `INC` by a loop over the pair's
//! own iteration set keep, per element, the position of each entry within
//! its row, one byte each ([`Offsets`], 16 bytes per tetrahedron, what the
//! map itself takes). The second such loop searches and records them (a
//! matrix assembled once pays neither the memory nor the recording); the
//! loops after it read them instead of searching (the search is most of
//! the assembly's time), in the same order, so the sums are the same bits.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use super::sparsity::Pattern;
use crate::decl::Map;
use crate::types::Scalar;

/// What the scatter of one matrix argument needs: the pattern, the maps
/// the argument goes through, and the element matrix's shape.
pub(crate) struct MatScatter {
    pub(crate) pattern: Arc<Pattern>,
    pub(crate) sparsity_name: Arc<str>,
    /// The maps the loop uses (composed with a subset when it iterates one).
    pub(crate) row_map: Map,
    pub(crate) col_map: Map,
    /// The pair as declared by the user (what the sparsity was built from).
    pub(crate) pair: (Map, Map),
    /// Element matrix rows (row arity x row dim) and columns.
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    /// The pattern's position table for this pair, when the loop runs on
    /// the host and the shape has one (see [`MatScatter::attach_offsets`]).
    pub(crate) offsets: OnceLock<Arc<Offsets>>,
}

/// Per element, the position of each of its `N x N` entries within its
/// row's entries (row-major, as the element matrix), one byte each: what
/// the search of the scalar P1 scatter finds, recorded by the first loop
/// and read by those after it. Kept by the pattern, one per (row map,
/// column map) pair it was built from.
pub(crate) struct Offsets {
    /// `N * N` per element of the maps' iteration set.
    table: Box<[AtomicU8]>,
    /// Every element's positions were recorded by one complete loop.
    ready: AtomicBool,
    /// A search came back empty (a map changed under the pattern): never
    /// ready, the search stays.
    broken: AtomicBool,
    /// The addresses of the row and column maps' values it was recorded
    /// from: a map localised since (distributed) has other values, and
    /// the table is not used for them.
    maps: (usize, usize),
}

/// A pattern's record for one (row map, column map) pair.
pub(crate) enum OffsetsSlot {
    /// One host loop ran: the next makes the table.
    SeenOnce,
    /// The table (`None`: the pair's shape or rows have none).
    Made(Option<Arc<Offsets>>),
}

impl Offsets {
    /// A zeroed table of `n` bytes, or `None` when it does not fit: the
    /// pages are the allocator's zeroed ones, touched only when recorded.
    fn zeroed(n: usize, maps: (usize, usize)) -> Option<Offsets> {
        let layout = std::alloc::Layout::array::<AtomicU8>(n).ok()?;
        let table: Box<[AtomicU8]> = if n == 0 {
            Box::new([])
        } else {
            // SAFETY: `layout` has a non-zero size.
            let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<AtomicU8>();
            if ptr.is_null() {
                return None;
            }
            // SAFETY: `ptr` holds `n` zeroed bytes allocated with the global
            // allocator for this layout, and a zero byte is a valid `AtomicU8`.
            unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, n)) }
        };
        Some(Offsets { table, ready: AtomicBool::new(false), broken: AtomicBool::new(false), maps })
    }

    /// Whether the table holds every element's positions.
    pub(crate) fn ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Called after a loop that ran every element through the scatter
    /// without error: the recorded table is complete.
    pub(crate) fn complete(&self) {
        if !self.broken.load(Ordering::Relaxed) {
            self.ready.store(true, Ordering::Release);
        }
    }
}

impl std::fmt::Debug for MatScatter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mat({} via {} x {})", self.sparsity_name, self.row_map.name(), self.col_map.name())
    }
}

impl MatScatter {
    /// The sparsity, as a handle (for its checks and messages).
    pub(crate) fn sparsity(&self) -> super::Sparsity {
        super::Sparsity { name: self.sparsity_name.clone(), pattern: self.pattern.clone() }
    }

    /// The same scatter through other maps (a subset's composed maps).
    pub(crate) fn through(&self, row_map: Map, col_map: Map) -> MatScatter {
        MatScatter {
            pattern: self.pattern.clone(),
            sparsity_name: self.sparsity_name.clone(),
            row_map,
            col_map,
            pair: self.pair.clone(),
            rows: self.rows,
            cols: self.cols,
            offsets: OnceLock::new(),
        }
    }

    /// Before a host loop with `INC`: finds (or, from the pair's second
    /// loop on, makes empty) the pattern's position table for this
    /// argument's maps, and returns it, when the shape has one: dims 1, row
    /// and column maps of equal arity 3 or 4 that are a pair the pattern
    /// was built from (not a subset's composed maps, whose elements are
    /// another set's), and rows of at most 256 entries (positions fit a
    /// byte).
    pub(crate) fn attach_offsets(&self) -> Option<Arc<Offsets>> {
        let maps = (self.row_map.values().as_ptr() as usize, self.col_map.values().as_ptr() as usize);
        if let Some(o) = self.offsets.get() {
            return (o.maps == maps).then(|| o.clone());
        }
        let p = &*self.pattern;
        let n = self.col_map.arity();
        if p.row_dim != 1 || p.col_dim != 1 || self.row_map.arity() != n || !(n == 3 || n == 4) {
            return None;
        }
        let key = (self.row_map.id(), self.col_map.id());
        if !p.pairs.contains(&key) {
            return None;
        }
        let mut cache = crate::sync::lock(&p.offsets);
        let found = match cache.iter_mut().find(|(k, _)| *k == key) {
            Some((_, OffsetsSlot::Made(o))) => o.clone(),
            Some((_, slot)) => {
                let (ptr, _) = p.block();
                let short = ptr.windows(2).all(|w| w[1] - w[0] <= 256);
                let elements = self.row_map.values().len() / n;
                let made = if short { Offsets::zeroed(elements * n * n, maps).map(Arc::new) } else { None };
                *slot = OffsetsSlot::Made(made.clone());
                made
            }
            None => {
                cache.push((key, OffsetsSlot::SeenOnce));
                None
            }
        }?;
        if found.maps != maps {
            return None;
        }
        Some(self.offsets.get_or_init(|| found).clone())
    }
}

/// The positions in the CSR values of element `e`'s element matrix,
/// row-major (`out[i * cols + j]` for local row `i`, local column `j`):
/// `None` for entries of rows this rank does not own (they are assembled
/// by their owner, seed 004). Every owned entry is in the pattern, which
/// was built from the same maps.
///
/// `out` holds `rows * cols` entries.
// The host scatter searches inline (`scatter`); this is the entry point of
// the device strategies (contributions CSR, staged adds) and of the tests.
#[allow(dead_code)]
pub(crate) fn element_positions(scatter: &MatScatter, e: usize, out: &mut [Option<usize>]) {
    let p = &scatter.pattern;
    let (rd, cd) = (p.row_dim, p.col_dim);
    let (ra, ca) = (scatter.row_map.arity(), scatter.col_map.arity());
    let rrow = &scatter.row_map.values()[e * ra..(e + 1) * ra];
    let crow = &scatter.col_map.values()[e * ca..(e + 1) * ca];
    for (i, &r) in rrow.iter().enumerate() {
        for a in 0..rd {
            let local_row = i * rd + a;
            for (j, &c) in crow.iter().enumerate() {
                for b in 0..cd {
                    out[local_row * scatter.cols + j * cd + b] = p.position(r as usize, a, c as usize, b);
                }
            }
        }
    }
}

/// Adds (or, when `write`, stores) element `e`'s element matrix `local`
/// into the values `data`.
///
/// # Safety
/// `scatter` points to a live [`MatScatter`] whose maps cover `e`,
/// `local` holds `rows * cols` values and `data` is the locked values of
/// the matrix on that pattern, of element type `T`, no other thread
/// writing the rows of `e` (the plan colours elements by row).
#[inline]
pub(crate) unsafe fn scatter<T: Scalar>(scatter: *const (), e: usize, local: *const T, data: *mut T, write: bool) {
    // SAFETY: forwarded contract.
    let s = unsafe { &*scatter.cast::<MatScatter>() };
    // Scalar (dims 1) adds with equal row and column arities, P1 triangles
    // and tetrahedra: no block loops, no write test per entry.
    if !write && s.pattern.row_dim == 1 && s.pattern.col_dim == 1 && s.row_map.arity() == s.col_map.arity() {
        match s.col_map.arity() {
            // SAFETY: forwarded contract; both arities are 3, the dims 1.
            3 => return unsafe { add_scalar::<T, 3>(s, e, local, data) },
            // SAFETY: forwarded contract; both arities are 4, the dims 1.
            4 => return unsafe { add_scalar::<T, 4>(s, e, local, data) },
            _ => {}
        }
    }
    // The column arities of P1 triangles and tetrahedra (and P2
    // triangles) search their columns all at once (`ranks`).
    match s.col_map.arity() {
        // SAFETY: forwarded contract; the column map's arity is 3.
        3 => return unsafe { scatter_n::<T, 3>(s, e, local, data, write) },
        // SAFETY: forwarded contract; the column map's arity is 4.
        4 => return unsafe { scatter_n::<T, 4>(s, e, local, data, write) },
        // SAFETY: forwarded contract; the column map's arity is 6.
        6 => return unsafe { scatter_n::<T, 6>(s, e, local, data, write) },
        _ => {}
    }
    let p = &*s.pattern;
    let (ra, ca) = (s.row_map.arity(), s.col_map.arity());
    let rrow = &s.row_map.values()[e * ra..(e + 1) * ra];
    let crow = &s.col_map.values()[e * ca..(e + 1) * ca];
    let (bptr, bcols) = p.block();
    let row_ptr = p.row_ptr();
    for (i, &r) in rrow.iter().enumerate() {
        let r = r as usize;
        if r >= p.row_entities {
            continue; // another rank's row
        }
        let block_row = &bcols[bptr[r]..bptr[r + 1]];
        for (j, &c) in crow.iter().enumerate() {
            // The pattern was built from these maps' rows: the entry is there.
            let Some(k) = super::sparsity::find(block_row, c as u32) else { continue };
            // SAFETY: `k` is block row `r`'s entry for column `c`; `i`, `j`
            // index the element matrix (forwarded contract).
            unsafe { add_block(s, row_ptr, (r, k), (i, j), local, data, write) };
        }
    }
}

/// Where each of `cols` is in the sorted `row` (`None`: not there): the
/// count of the row's entries below each column, for all columns in one
/// pass over the row (the comparisons of one entry with the `N` columns
/// are one vector operation), instead of one pass per column. For the
/// n = 125 cube's rows of 15 entries and 4 columns, a quarter of the
/// comparisons and no per-column loop overhead.
#[inline(always)]
fn ranks<const N: usize>(row: &[u32], cols: &[u32; N]) -> [Option<usize>; N] {
    if row.len() > 64 {
        return cols.map(|c| super::sparsity::find(row, c));
    }
    let mut below = [0u32; N];
    for &x in row {
        for j in 0..N {
            below[j] += u32::from(x < cols[j]);
        }
    }
    let mut out = [None; N];
    for j in 0..N {
        let k = below[j] as usize;
        out[j] = (row.get(k) == Some(&cols[j])).then_some(k);
    }
    out
}

/// [`scatter`] for a column map of arity `N`.
///
/// # Safety
/// As [`scatter`], with `s.col_map.arity() == N`.
#[inline(always)]
unsafe fn scatter_n<T: Scalar, const N: usize>(s: &MatScatter, e: usize, local: *const T, data: *mut T, write: bool) {
    let p = &*s.pattern;
    let ra = s.row_map.arity();
    let rrow = &s.row_map.values()[e * ra..(e + 1) * ra];
    let crow: &[i32; N] = s.col_map.values()[e * N..(e + 1) * N].try_into().expect("the map's arity is N");
    // Map values were validated: non-negative and below the column set's size.
    let cols: [u32; N] = crow.map(|c| c as u32);
    let (bptr, bcols) = p.block();
    let row_ptr = p.row_ptr();
    for (i, &r) in rrow.iter().enumerate() {
        let r = r as usize;
        if r >= p.row_entities {
            continue; // another rank's row
        }
        let found = ranks(&bcols[bptr[r]..bptr[r + 1]], &cols);
        for (j, k) in found.into_iter().enumerate() {
            // The pattern was built from these maps' rows: the entry is there.
            let Some(k) = k else { continue };
            // SAFETY: as in `scatter`.
            unsafe { add_block(s, row_ptr, (r, k), (i, j), local, data, write) };
        }
    }
}

/// [`scatter`]'s add for dims 1 and row and column maps of arity `N`:
/// the element's `N x N` values go straight into the rows' entries, at
/// the positions of the [`Offsets`] table when it is complete, else
/// searched (and recorded, when there is a table to fill).
///
/// # Safety
/// As [`scatter`], with both arities `N` and both dims 1.
#[inline(always)]
unsafe fn add_scalar<T: Scalar, const N: usize>(s: &MatScatter, e: usize, local: *const T, data: *mut T) {
    let p = &*s.pattern;
    let rows: &[i32; N] = s.row_map.values()[e * N..(e + 1) * N].try_into().expect("the map's arity is N");
    // A table recorded from these maps' values (a map localised since
    // has others: searched then).
    let maps = (s.row_map.values().as_ptr() as usize, s.col_map.values().as_ptr() as usize);
    let table = s.offsets.get().filter(|o| o.maps == maps);
    if let Some(o) = table.filter(|o| o.ready()) {
        let at = &o.table[e * N * N..(e + 1) * N * N];
        let ptr = p.row_ptr();
        for (i, &r) in rows.iter().enumerate() {
            let r = r as usize;
            if r >= p.row_entities {
                continue; // another rank's row
            }
            let start = ptr[r];
            for j in 0..N {
                let k = at[i * N + j].load(Ordering::Relaxed) as usize;
                debug_assert!(start + k < ptr[r + 1], "a recorded position lies in its row");
                // SAFETY: the table was recorded from this pattern and these
                // maps (`attach_offsets`): `start + k` is an entry of row
                // `r`, `i * N + j` one of the element matrix (the contract).
                unsafe {
                    let d = data.add(start + k);
                    *d = (*d).inc(*local.add(i * N + j));
                }
            }
        }
        return;
    }
    let crow: &[i32; N] = s.col_map.values()[e * N..(e + 1) * N].try_into().expect("the map's arity is N");
    // Map values were validated: non-negative and below the sets' sizes.
    let cols: [u32; N] = crow.map(|c| c as u32);
    // Dims 1: the block CSR is the scalar one.
    let (ptr, bcols) = p.block();
    for (i, &r) in rows.iter().enumerate() {
        let r = r as usize;
        if r >= p.row_entities {
            continue; // another rank's row
        }
        let start = ptr[r];
        let found = ranks(&bcols[start..ptr[r + 1]], &cols);
        for (j, k) in found.into_iter().enumerate() {
            if let Some(o) = table {
                // Rows hold at most 256 entries where there is a table.
                match k {
                    Some(k) => o.table[e * N * N + i * N + j].store(k as u8, Ordering::Relaxed),
                    None => o.broken.store(true, Ordering::Relaxed),
                }
            }
            // The pattern was built from these maps' rows: the entry is there.
            let Some(k) = k else { continue };
            // SAFETY: `start + k` is an entry of row `r` in the values,
            // `i * N + j` an entry of the element matrix (the contract).
            unsafe {
                let d = data.add(start + k);
                *d = (*d).inc(*local.add(i * N + j));
            }
        }
    }
}

/// Adds (or writes) the `row_dim x col_dim` block of the element matrix
/// at block (`i`, `j`) into block entry `k` of block row `r` of the CSR
/// values: the innermost step both scatter paths share.
///
/// # Safety
/// `k` is an entry of block row `r` of `s.pattern`, (`i`, `j`) a block of
/// the element matrix at `local`, and `data` the pattern's values (the
/// contract of [`scatter`]).
#[inline(always)]
unsafe fn add_block<T: Scalar>(
    s: &MatScatter,
    row_ptr: &[usize],
    (r, k): (usize, usize),
    (i, j): (usize, usize),
    local: *const T,
    data: *mut T,
    write: bool,
) {
    let (rd, cd) = (s.pattern.row_dim, s.pattern.col_dim);
    for a in 0..rd {
        let base = row_ptr[r * rd + a] + k * cd;
        let src = (i * rd + a) * s.cols + j * cd;
        for b in 0..cd {
            // SAFETY: `base + b` lies in the row's entries, `src + b` in the
            // element matrix (the contract above).
            unsafe {
                let v = *local.add(src + b);
                let d = data.add(base + b);
                *d = if write { v } else { (*d).inc(v) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, Runtime};

    /// Kuhn tetrahedra of the unit cube cut into n^3 cubes.
    fn cube(n: usize) -> Vec<i32> {
        let v = |i: usize, j: usize, k: usize| ((k * (n + 1) + j) * (n + 1) + i) as i32;
        let perms = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
        let mut tets = Vec::new();
        for k in 0..n {
            for j in 0..n {
                for i in 0..n {
                    for p in perms {
                        let mut c = [i, j, k];
                        tets.push(v(c[0], c[1], c[2]));
                        for axis in p {
                            c[axis] += 1;
                            tets.push(v(c[0], c[1], c[2]));
                        }
                    }
                }
            }
        }
        tets
    }

    /// `ranks` finds what `find` finds, column by column: present and
    /// absent columns, repeated ones, the ends of the row, long rows.
    #[test]
    fn ranks_agree_with_find() {
        let mut seed = 12345u64;
        let mut next = |m: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) % m) as u32
        };
        for len in [0usize, 1, 2, 15, 64, 65, 200] {
            for _ in 0..200 {
                let mut row: Vec<u32> = (0..len).map(|_| next(400)).collect();
                row.sort_unstable();
                row.dedup();
                let pick = |next: &mut dyn FnMut(u64) -> u32| {
                    if !row.is_empty() && next(2) == 0 {
                        row[next(row.len() as u64) as usize]
                    } else {
                        next(402)
                    }
                };
                let cols: [u32; 4] = std::array::from_fn(|_| pick(&mut next));
                let want = cols.map(|c| crate::matrix::sparsity::find(&row, c));
                assert_eq!(ranks(&row, &cols), want, "row {row:?}, columns {cols:?}");
                let three = [cols[0], cols[0], cols[3]];
                assert_eq!(ranks(&row, &three), three.map(|c| crate::matrix::sparsity::find(&row, c)));
            }
        }
    }

    /// Element positions agree with a search of the scalar CSR, for blocks too.
    #[test]
    fn element_positions_agree_with_the_scalar_csr() {
        let rt = Runtime::with_backend(Backend::Seq).unwrap();
        let nodes = rt.set("nodes", 27).unwrap();
        let cells = rt.set("cells", 48).unwrap();
        let c2n = rt.map("c2n", &cells, &nodes, 4, cube(2)).unwrap();
        let s = rt.sparsity("s", &[(&c2n, &c2n)], (2, 3)).unwrap();
        let a = rt.mat::<f64>("A", &s).unwrap();
        let arg = a.arg(&c2n, &c2n, crate::Access::INC);
        let m = arg.mat().unwrap();
        let mut out = vec![None; m.rows * m.cols];
        for e in 0..48 {
            element_positions(m, e, &mut out);
            let row = &c2n.values()[e * 4..e * 4 + 4];
            for i in 0..m.rows {
                for j in 0..m.cols {
                    let (r, c) = (row[i / 2] as usize * 2 + i % 2, row[j / 3] as usize * 3 + j % 3);
                    let cols = &s.col_indices()[s.row_ptr()[r]..s.row_ptr()[r + 1]];
                    let k = cols.iter().position(|&x| x as usize == c).unwrap();
                    assert_eq!(out[i * m.cols + j], Some(s.row_ptr()[r] + k));
                }
            }
        }
    }

    /// Searched against precomputed positions (a u32 table per element):
    /// `PARLOOP_CUBE=125 cargo test --release -p parloop --lib search_or_precomputed -- --ignored --nocapture`.
    /// Prints times; asserts only that both scatter the same values.
    #[test]
    #[ignore]
    fn search_or_precomputed() {
        let n: usize = std::env::var("PARLOOP_CUBE").ok().and_then(|v| v.parse().ok()).unwrap_or(40);
        let tets = cube(n);
        let (nn, nc) = ((n + 1).pow(3), 6 * n * n * n);
        let rt = Runtime::with_backend(Backend::Seq).unwrap();
        let nodes = rt.set("nodes", nn).unwrap();
        let cells = rt.set("cells", nc).unwrap();
        let c2n = rt.map("c2n", &cells, &nodes, 4, tets).unwrap();
        let t = std::time::Instant::now();
        let s = rt.sparsity("s", &[(&c2n, &c2n)], (1, 1)).unwrap();
        println!("n = {n}: sparsity {:.3} s, {} rows, {} entries", t.elapsed().as_secs_f64(), s.rows(), s.nnz());
        let a = rt.mat::<f64>("A", &s).unwrap();
        let arg = a.arg(&c2n, &c2n, crate::Access::INC);
        let m = arg.mat().unwrap().clone();
        let local: Vec<f64> = (0..16).map(|k| k as f64 + 0.5).collect();
        let mut searched = vec![0.0f64; s.nnz()];
        let t = std::time::Instant::now();
        for e in 0..nc {
            // SAFETY: the scatter, the element matrix and the values are alive and sized.
            unsafe { scatter(Arc::as_ptr(&m).cast(), e, local.as_ptr(), searched.as_mut_ptr(), false) };
        }
        let search_s = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let mut table = vec![0u32; nc * 16];
        let mut out = vec![None; 16];
        for e in 0..nc {
            element_positions(&m, e, &mut out);
            for (k, p) in out.iter().enumerate() {
                table[e * 16 + k] = p.unwrap() as u32;
            }
        }
        let table_s = t.elapsed().as_secs_f64();
        let mut precomputed = vec![0.0f64; s.nnz()];
        let t = std::time::Instant::now();
        for e in 0..nc {
            for k in 0..16 {
                precomputed[table[e * 16 + k] as usize] += local[k];
            }
        }
        let pre_s = t.elapsed().as_secs_f64();
        assert_eq!(searched, precomputed);
        println!(
            "scatter of {nc} element matrices: searched {search_s:.3} s; precomputed {pre_s:.3} s plus {table_s:.3} s \
             and {} MB to build the table",
            (table.len() * 4) >> 20
        );
    }
}
