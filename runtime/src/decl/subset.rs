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
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::map::MapInner;
use super::{Dat, Map, Sections, Set};
use crate::error::{Error, Result};
use crate::names::Namespace;
use crate::runtime::Runtime;
use crate::sync::lock;

/// Which entities of which set a subset selects: held by the subset and,
/// for messages about a loop's element (`Set::describe_element`), by its
/// iteration set, which loops keep after the user dropped the subset.
pub(crate) struct Selection {
    parent: Set,
    /// The entities, sorted, unique, in range, as declared (in the
    /// parent's numbering at declaration: the global one when the subset
    /// was declared before [`Runtime::partition`]).
    declared: Vec<i32>,
    /// After a partition: this rank's entities of a subset declared before
    /// it, in the parent's local numbering (sorted, so that they fall into
    /// the parent's sections in order).
    localised: OnceLock<Vec<i32>>,
}

impl Selection {
    /// The set selected from.
    pub(crate) fn parent(&self) -> &Set {
        &self.parent
    }

    /// The entities, in the parent's (local) numbering.
    pub(crate) fn indices(&self) -> &[i32] {
        self.localised.get().unwrap_or(&self.declared)
    }
}

/// A composed map and the parent map it came from (`None`: the subset's
/// own map).
type Composed = (Option<Weak<MapInner>>, Map);

pub(crate) struct SubsetInner {
    selection: Arc<Selection>,
    /// What loops over the subset iterate (named as the subset); under MPI
    /// it is distributed like its parent, so that loops over the subset
    /// run the owned section (and the exec halo when they increment),
    /// reduce across ranks and mark what they write stale.
    iter_set: Set,
    /// Parent map id -> that map composed with the subset (0: the
    /// subset's own map to its parent), with the parent map (weak: the
    /// entry goes when the parent map does, at the next insertion; a
    /// program declaring a map from the parent each step, with one
    /// boundary subset, kept every composed map).
    composed: Mutex<HashMap<u64, Composed>>,
    /// Each element's number in the parent's global numbering (for
    /// [`Arg::index`](crate::Arg::index) in loops over the subset).
    numbers: Mutex<Option<Dat<i64>>>,
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
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// let nodes = rt.set("nodes", 10)?;
    /// let ends = rt.subset("ends", &nodes, vec![0, 9])?;
    /// assert_eq!((ends.name(), ends.parent().name(), ends.size()), ("ends", "nodes", 2));
    /// assert_eq!(ends.indices(), &[0, 9]);
    /// // Indices are sorted and unique, each in the set.
    /// assert!(rt.subset("unsorted", &nodes, vec![9, 0]).is_err());
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        self.0.iter_set.name()
    }
    /// Process-unique identity.
    pub fn id(&self) -> u64 {
        self.0.iter_set.id()
    }
    /// The set it selects from.
    pub fn parent(&self) -> &Set {
        &self.0.selection.parent
    }
    /// Its entities, sorted, in the parent's (local) numbering: under MPI
    /// those this rank holds (owned and halo).
    pub fn indices(&self) -> &[i32] {
        self.0.selection.indices()
    }
    /// Number of entities (on this rank, halo included, under MPI).
    pub fn size(&self) -> usize {
        self.indices().len()
    }

    /// The entities as declared (the global numbering, for a subset
    /// declared before the partition).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn declared(&self) -> &[i32] {
        &self.0.selection.declared
    }

    /// After a partition: keeps this rank's `local` entities (sorted, in
    /// the parent's local numbering) and distributes the iteration set
    /// like the parent (`parent`: its part). Composed maps and numbers made
    /// before are dropped.
    #[cfg(feature = "mpi")]
    pub(crate) fn localise(&self, local: Vec<i32>, parent: &super::LocalPart) {
        let _ = self.0.selection.localised.set(local);
        let part = self.part_of(parent);
        let _ = self.0.iter_set.0.local.set(Arc::new(part));
        lock(&self.0.composed).clear();
        *lock(&self.0.numbers) = None;
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
        if let Some((_, m)) = cache.get(&key) {
            return Ok(m.clone());
        }
        let s = &self.0;
        let composed = match map {
            None => Map::new(
                &format!("pl_subset_{}", self.name()),
                &s.iter_set,
                &s.selection.parent,
                1,
                crate::fallible::copy_of(self.indices(), || {
                    format!("subset `{}`'s map ({} entries)", self.name(), self.size())
                })?,
            )?,
            Some(m) => {
                let a = m.arity();
                let n = self.size().saturating_mul(a);
                let what = || format!("map `{}` composed with subset `{}` ({n} entries)", m.name(), self.name());
                let mut values: Vec<i32> = crate::fallible::reserved(n, what)?;
                for &i in self.indices() {
                    values.extend_from_slice(&m.values()[i as usize * a..(i as usize + 1) * a]);
                }
                Map::new(&format!("{}@{}", m.name(), self.name()), &s.iter_set, m.to(), a, values)?
            }
        };
        // Dropped after the lock is let go (a map's drop is plain, but
        // the rule is kept: nothing dropped under a cache's lock).
        let dead: Vec<u64> = cache
            .iter()
            .filter(|(_, (parent, _))| parent.as_ref().is_some_and(|p| p.strong_count() == 0))
            .map(|(k, _)| *k)
            .collect();
        let dead: Vec<_> = dead.iter().filter_map(|k| cache.remove(k)).collect();
        cache.insert(key, (map.map(|m| Arc::downgrade(&m.0)), composed.clone()));
        drop(cache);
        drop(dead);
        Ok(composed)
    }

    /// Each element's number in the parent set's global numbering, as an
    /// `i64` dat on the iteration set.
    pub(crate) fn numbers(&self) -> Result<Dat<i64>> {
        let mut numbers = lock(&self.0.numbers);
        if let Some(d) = numbers.as_ref() {
            return Ok(d.clone());
        }
        let global = self.0.selection.parent.0.local.get().map(|l| &l.global);
        let values: Vec<i64> = crate::fallible::mapped(
            self.indices(),
            |&i| global.map_or(i as i64, |g| g[i as usize] as i64),
            || format!("subset `{}`'s element numbers ({} values)", self.name(), self.size()),
        )?;
        let d = Dat::new(&format!("pl_index_{}", self.name()), &self.0.iter_set, 1, values)?;
        *numbers = Some(d.clone());
        Ok(d)
    }
}

impl fmt::Debug for Subset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Subset({} of {}, {} entities)", self.name(), self.0.selection.parent.name(), self.size())
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
        let hint = if set.is_distributed() {
            " on this rank: the set is distributed, and a subset made after the partition lists this rank's \
             entities in the local numbering (make it before `partition`, or with `subset_global`, to list \
             declared numbers)"
        } else {
            ""
        };
        check_indices(name, set, &indices, set.total(), hint)?;
        // Sorted indices fall into the parent's sections in order.
        let s = set.sections();
        let below = |n: usize| indices.partition_point(|&i| i < n);
        let (c, o, x) = (below(s.core), below(s.core + s.owned), below(s.core + s.owned + s.exec));
        let sections = Sections { core: c, owned: o - c, exec: x - o, non_exec: indices.len() - x };
        let indices: Vec<i32> = crate::fallible::mapped(
            &indices,
            |&i| i as i32,
            || format!("subset `{name}`'s indices ({} values)", indices.len()),
        )?;
        let subset = self.names.declare(
            Namespace::Set,
            "subset",
            name,
            || {
                let selection =
                    Arc::new(Selection { parent: set.clone(), declared: indices, localised: OnceLock::new() });
                Ok(Subset(Arc::new(SubsetInner {
                    iter_set: Set::selecting(name, sections, Some(selection.clone()))?,
                    selection,
                    composed: Mutex::new(HashMap::new()),
                    numbers: Mutex::new(None),
                })))
            },
            |s| &s.0,
        )?;
        match set.0.local.get() {
            // Declared in the parent's local numbering, after the
            // partition: distributed now.
            #[cfg(feature = "mpi")]
            Some(parent) => {
                let part = subset.part_of(parent);
                let _ = subset.0.iter_set.0.local.set(Arc::new(part));
            }
            // Before a partition: localised by it.
            _ => self.dist.declared_subset(Arc::downgrade(&subset.0)),
        }
        Ok(subset)
    }

    /// A subset listed in `set`'s declared numbering, before or after
    /// `Runtime::partition` (feature `mpi`): the numbers a program computed from the mesh
    /// it declared (boundary vertices) select the same entities whether or
    /// not the set has been partitioned since. On a distributed set, every
    /// rank passes the same list (this is collective, and differing lists
    /// are an error on every rank) and keeps the listed entities it holds,
    /// owned and halo, in its local numbering, as a subset made before the
    /// partition does. Elsewhere it is [`Runtime::subset`].
    ///
    /// [`Runtime::subset`] after the partition takes this rank's local
    /// numbers instead: declared numbers that happen to be in range there
    /// select other entities.
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// let nodes = rt.set("nodes", 4)?;
    /// let ends = rt.subset_global("ends", &nodes, vec![0, 3])?;
    /// assert_eq!(ends.size(), 2);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn subset_global(&self, name: &str, set: &Set, indices: Vec<usize>) -> Result<Subset> {
        #[cfg(feature = "mpi")]
        if let Some(part) = set.0.local.get() {
            let checked = check_indices(name, set, &indices, part.global_size, " (declared numbering)");
            let listed = crate::device::fnv1a(&[bytemuck::cast_slice(&indices)]);
            part.comm.agree_checks(
                &format!("subset `{name}` of `{}`", set.name()),
                checked.is_ok(),
                &format!("{} declared numbers (hash {listed:016x})", indices.len()),
            )?;
            checked?;
            // Local numbers in increasing order: sorted, as a subset's are.
            let local: Vec<usize> = part
                .global
                .iter()
                .enumerate()
                .filter(|&(_, g)| indices.binary_search(g).is_ok())
                .map(|(i, _)| i)
                .collect();
            return self.subset(name, set, local);
        }
        self.subset(name, set, indices)
    }
}

/// `indices` sorted, unique, below `total` and within `i32`; an error
/// names the first offending position and value (`hint` follows a value
/// out of range).
fn check_indices(name: &str, set: &Set, indices: &[usize], total: usize, hint: &str) -> Result<()> {
    for (k, &i) in indices.iter().enumerate() {
        if i >= total {
            return Err(invalid(name, format!("index {k} is {i}, outside set `{}` (0..{total}){hint}", set.name())));
        }
        if i > i32::MAX as usize {
            // Maps hold `i32` entity numbers, and a subset is one.
            return Err(invalid(
                name,
                format!("index {k} is {i}, past i32::MAX ({}): subsets, as maps, number entities in i32", i32::MAX),
            ));
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
    Ok(())
}

#[cfg(feature = "mpi")]
impl Subset {
    /// The iteration set's part of a distributed run, from the parent's
    /// (`parent`) and this rank's entities: the sections are where the
    /// entities fall in the parent's sections, and an element's global
    /// number is its entity's (so the subset's global numbering is the
    /// parent's, with gaps).
    pub(crate) fn part_of(&self, parent: &super::LocalPart) -> super::LocalPart {
        let indices = self.indices();
        let s = parent.sections;
        let below = |n: usize| indices.partition_point(|&i| (i as usize) < n);
        let (c, o, x) = (below(s.core), below(s.core + s.owned), below(s.core + s.owned + s.exec));
        super::LocalPart {
            sections: Sections { core: c, owned: o - c, exec: x - o, non_exec: indices.len() - x },
            global: indices.iter().map(|&i| parent.global[i as usize]).collect(),
            global_size: parent.global_size,
            comm: parent.comm.clone(),
            index_numbers: std::sync::OnceLock::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::sync::lock;
    use crate::{Backend, Runtime};

    /// A boundary subset kept while a map from its parent is declared
    /// again each step (a remesh of what it connects to) kept every
    /// composed map, 40 KB a step on a 10 000-element set.
    #[test]
    fn composed_maps_go_with_their_parent_map() {
        let rt = Runtime::with_backend(Backend::Seq).unwrap();
        let edges = rt.set("edges", 6).unwrap();
        let wall = rt.subset("wall", &edges, vec![1, 4]).unwrap();
        for step in 0..5 {
            // (Names of their own: a composed map holds its target set
            // until the next insertion prunes it.)
            let nodes = rt.set(&format!("nodes{step}"), 7).unwrap();
            let e2n =
                rt.map(&format!("e2n{step}"), &edges, &nodes, 2, (0..6).flat_map(|e| [e, e + 1]).collect()).unwrap();
            let composed = wall.composed(Some(&e2n)).unwrap();
            assert_eq!(composed.values(), &[1, 2, 4, 5], "step {step}");
            wall.composed(None).unwrap();
            // This step's map and the subset's own: the earlier maps' went.
            assert!(lock(&wall.0.composed).len() <= 2, "step {step}: {}", lock(&wall.0.composed).len());
        }
    }
}
