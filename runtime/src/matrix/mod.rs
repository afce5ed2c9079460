//! Sparse matrices: the [`Sparsity`] pattern (`sparsity`), the [`Mat`]
//! values on it (`mat`), and their assembly on the host (`assembly`).
//!
//! For the linear algebra (crate-visible): [`Sparsity::row_ptr`] (`usize`)
//! and [`Sparsity::col_indices`] (`u32`) are the scalar CSR,
//! [`Mat::values_dat`] the values in that order (a `Dat<T>` of dim 1 over
//! the internal set `pl_nnz_<name>`). Where an element's entries go:
//! `assembly::element_positions`.

pub(crate) mod assembly;
mod device;
mod mat;
pub(crate) mod sparsity;

pub use mat::{Csr, Mat};
pub use sparsity::Sparsity;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use crate::decl::Map;
use crate::error::Result;
use crate::names::Namespace;
use crate::runtime::Runtime;
use crate::sync::lock;
use crate::types::Scalar;

/// Per-runtime cache of sparsity patterns, by map identities and dims.
/// Weak references: an entry never keeps a pattern alive (map ids are
/// never reused, so a dead entry is merely unreachable until pruned).
#[derive(Default)]
pub(crate) struct Caches {
    patterns: Mutex<HashMap<sparsity::PatternKey, Weak<sparsity::Pattern>>>,
    /// Device tables and the matrix library module (`device`).
    pub(crate) device: device::DeviceCaches,
}

impl Caches {
    /// The maps of a sparsity pattern still in use, if any (a partition
    /// renumbers the maps a pattern was built from, so none may exist).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn live_pattern(&self) -> Option<String> {
        let pattern = lock(&self.patterns).values().find_map(Weak::upgrade)?;
        Some(pattern.pair_names.iter().map(|(r, c)| format!("({r}, {c})")).collect::<Vec<_>>().join(", "))
    }
}

impl Runtime {
    /// The sparsity of matrices assembled through the given (row map,
    /// column map) pairs, with `dims` = (row dim, column dim) values per
    /// row and column entity. Each pair's maps come from one iteration set,
    /// every row map goes to one set (the rows), every column map to one
    /// set (the columns). Built once (in parallel): a second request with
    /// the same maps and dims returns the same pattern, whatever the name.
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// let nodes = rt.set("nodes", 3)?;
    /// let edges = rt.set("edges", 2)?;
    /// let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1, 1, 2])?;
    /// let s = rt.sparsity("s", &[(&e2n, &e2n)], (2, 2))?;
    /// assert_eq!((s.rows(), s.nnz()), (6, 28));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn sparsity(&self, name: &str, pairs: &[(&Map, &Map)], dims: (usize, usize)) -> Result<Sparsity> {
        let key = sparsity::key(pairs, dims);
        if let Some(pattern) = lock(&self.matrices.patterns).get(&key).and_then(Weak::upgrade) {
            return Ok(Sparsity { name: name.into(), pattern });
        }
        // Built outside the lock: two threads may build one pattern twice,
        // never block each other for a second.
        let pattern = Arc::new(sparsity::build(name, pairs, dims)?);
        let mut patterns = lock(&self.matrices.patterns);
        patterns.retain(|_, w| w.strong_count() > 0);
        patterns.insert(key, Arc::downgrade(&pattern));
        Ok(Sparsity { name: name.into(), pattern })
    }

    /// A zero matrix on `sparsity`. Its name is unique among the runtime's
    /// dats and globals (it appears in loop errors as the argument's data).
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let n = rt.set("n", 2)?;
    /// # let id = rt.map("id", &n, &n, 1, vec![0, 1])?;
    /// let s = rt.sparsity("diag", &[(&id, &id)], (1, 1))?;
    /// let a = rt.mat::<f64>("A", &s)?;
    /// assert_eq!(a.sparsity().nnz(), 2);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn mat<T: Scalar>(&self, name: &str, sparsity: &Sparsity) -> Result<Mat<T>> {
        self.names.declare(Namespace::Data, "matrix", name, || Mat::new(name, sparsity), |m| m.inner())
    }
}
