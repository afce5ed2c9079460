//! Assembly on the host: where an element matrix's entries go in the CSR
//! values, and the scatter the CPU binders call after the kernel.
//!
//! Positions are searched (a binary search in the row entity's block row,
//! tens of entries) rather than precomputed per element: a precomputed
//! table for the n = 125 unit cube would hold 11.7 million tets x 16
//! entries (750 MB of `u32`), three times the matrix itself, while the
//! search touches the block row the scatter writes anyway.
//! [`element_positions`] is the one definition of an element's positions;
//! device strategies (a contributions CSR, staged adds) build on it.

use std::sync::Arc;

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
        }
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
    let p = &*s.pattern;
    let (rd, cd) = (p.row_dim, p.col_dim);
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
            let Ok(k) = block_row.binary_search(&(c as u32)) else { continue };
            for a in 0..rd {
                let base = row_ptr[r * rd + a] + k * cd;
                let src = (i * rd + a) * s.cols + j * cd;
                for b in 0..cd {
                    // SAFETY: `base + b` lies in the row's entries, `src + b`
                    // in the element matrix (forwarded contract).
                    unsafe {
                        let v = *local.add(src + b);
                        let d = data.add(base + b);
                        *d = if write { v } else { (*d).inc(v) };
                    }
                }
            }
        }
    }
}
