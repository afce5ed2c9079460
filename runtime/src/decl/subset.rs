//! Subsets: a sorted list of a set's entities (boundary nodes), which loops
//! iterate over and [`Mat::zero_rows`](crate::Mat::zero_rows) takes.
//!
//! A loop over a subset runs over an internal iteration set of the
//! subset's size; its arguments are rewritten once per loop
//! (`ParLoop::new`): a direct argument of the parent set goes through the
//! subset's own map (element `i` -> entity `indices[i]`), an indirect one
//! through its map composed with the subset. Composed maps are cached in
//! the subset, so plans are cached as for any loop.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use super::{Dat, Map, Sections, Set};
use crate::error::{Error, Result};
use crate::names::Namespace;
use crate::runtime::Runtime;
use crate::sync::lock;

pub(crate) struct SubsetInner {
    parent: Set,
    /// The entities, sorted, unique, in range.
    indices: Vec<i32>,
    /// What loops over the subset iterate (named as the subset).
    iter_set: Set,
    /// Parent map id -> that map composed with the subset (0: the
    /// subset's own map to its parent).
    composed: Mutex<HashMap<u64, Map>>,
    /// Each element's number in the parent's global numbering (for
    /// [`Arg::index`](crate::Arg::index) in loops over the subset).
    numbers: OnceLock<Dat<i64>>,
}

/// A sorted list of distinct entities of a set: loops can iterate over it
/// (pass it to [`Runtime::par_loop`] instead of the set), and it selects
/// rows for [`Mat::zero_rows`](crate::Mat::zero_rows).
///
/// ```
/// use parloop::{Access, Backend, Runtime};
/// #[parloop::kernel]
/// fn fix(u: &mut f64) { *u = 1.0; }
///
/// let rt = Runtime::with_backend(Backend::Seq)?;
/// let nodes = rt.set("nodes", 4)?;
/// let boundary = rt.subset("boundary", &nodes, vec![0, 3])?;
/// let u = rt.dat("u", &nodes, 1, vec![0.0; 4])?;
/// rt.par_loop(fix::KERNEL, &boundary, &[u.arg(Access::WRITE)])?;
/// assert_eq!(u.values()?, vec![1.0, 0.0, 0.0, 1.0]);
/// # Ok::<(), parloop::Error>(())
/// ```
#[derive(Clone)]
pub struct Subset(pub(crate) Arc<SubsetInner>);

impl Subset {
    /// The subset's name.
    pub fn name(&self) -> &str {
        self.0.iter_set.name()
    }
    /// Process-unique identity.
    pub fn id(&self) -> u64 {
        self.0.iter_set.id()
    }
    /// The set it selects from.
    pub fn parent(&self) -> &Set {
        &self.0.parent
    }
    /// Its entities, sorted.
    pub fn indices(&self) -> &[i32] {
        &self.0.indices
    }
    /// Number of entities.
    pub fn size(&self) -> usize {
        self.0.indices.len()
    }

    /// The set loops over the subset iterate.
    pub(crate) fn iter_set(&self) -> &Set {
        &self.0.iter_set
    }

    /// `map` (from the parent) composed with the subset: row `i` is `map`'s
    /// row of entity `indices[i]`; `None`: the subset's own map (row `i` is
    /// `indices[i]`). Cached.
    pub(crate) fn composed(&self, map: Option<&Map>) -> Result<Map> {
        let key = map.map_or(0, Map::id);
        let mut cache = lock(&self.0.composed);
        if let Some(m) = cache.get(&key) {
            return Ok(m.clone());
        }
        let s = &self.0;
        let composed = match map {
            None => Map::new(&format!("pl_subset_{}", self.name()), &s.iter_set, &s.parent, 1, s.indices.clone())?,
            Some(m) => {
                let a = m.arity();
                let values: Vec<i32> = s
                    .indices
                    .iter()
                    .flat_map(|&i| m.values()[i as usize * a..(i as usize + 1) * a].iter().copied())
                    .collect();
                Map::new(&format!("{}@{}", m.name(), self.name()), &s.iter_set, m.to(), a, values)?
            }
        };
        cache.insert(key, composed.clone());
        Ok(composed)
    }

    /// Each element's number in the parent set's global numbering, as an
    /// `i64` dat on the iteration set.
    pub(crate) fn numbers(&self) -> Result<Dat<i64>> {
        if let Some(d) = self.0.numbers.get() {
            return Ok(d.clone());
        }
        let global = self.0.parent.0.local.get().map(|l| &l.global);
        let values: Vec<i64> =
            self.0.indices.iter().map(|&i| global.map_or(i as i64, |g| g[i as usize] as i64)).collect();
        let d = Dat::new(&format!("pl_index_{}", self.name()), &self.0.iter_set, 1, values)?;
        Ok(self.0.numbers.get_or_init(|| d).clone())
    }
}

impl fmt::Debug for Subset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Subset({} of {}, {} entities)", self.name(), self.0.parent.name(), self.size())
    }
}

fn invalid(name: &str, reason: String) -> Error {
    Error::InvalidDeclaration { what: "subset", name: name.into(), reason }
}

impl Runtime {
    /// A subset of `set`: `indices` sorted, without repeats, each below
    /// `set.total()`; an error names the first offending position and
    /// value. Names are unique among the runtime's sets and subsets.
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// let nodes = rt.set("nodes", 4)?;
    /// assert_eq!(rt.subset("b", &nodes, vec![0, 3])?.size(), 2);
    /// assert!(rt.subset("c", &nodes, vec![3, 0]).is_err());
    /// assert!(rt.subset("d", &nodes, vec![4]).is_err());
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn subset(&self, name: &str, set: &Set, indices: Vec<usize>) -> Result<Subset> {
        let total = set.total();
        for (k, &i) in indices.iter().enumerate() {
            if i >= total || i > i32::MAX as usize {
                return Err(invalid(name, format!("index {k} is {i}, outside set `{}` (0..{total})", set.name())));
            }
            if k > 0 && indices[k - 1] >= i {
                let what = if indices[k - 1] == i { "repeats" } else { "is below" };
                return Err(invalid(
                    name,
                    format!(
                        "index {k} is {i}, which {what} index {} ({}): indices must be sorted and unique",
                        k - 1,
                        indices[k - 1]
                    ),
                ));
            }
        }
        // Sorted indices fall into the parent's sections in order.
        let s = set.sections();
        let below = |n: usize| indices.partition_point(|&i| i < n);
        let (c, o, x) = (below(s.core), below(s.core + s.owned), below(s.core + s.owned + s.exec));
        let sections = Sections { core: c, owned: o - c, exec: x - o, non_exec: indices.len() - x };
        let indices: Vec<i32> = indices.into_iter().map(|i| i as i32).collect();
        self.names.declare(
            Namespace::Set,
            "subset",
            name,
            || {
                Ok(Subset(Arc::new(SubsetInner {
                    parent: set.clone(),
                    indices,
                    iter_set: Set::new(name, sections)?,
                    composed: Mutex::new(HashMap::new()),
                    numbers: OnceLock::new(),
                })))
            },
            |s| &s.0,
        )
    }
}
