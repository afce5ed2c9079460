//! Declarations: sets (here), maps (`map`), dats and globals (`data`).
//!
//! Each is a cheap handle (an `Arc`) to immutable metadata plus, for dats and
//! globals, the values behind a lock. Identities are process-unique ids, used
//! by the plan cache instead of the objects themselves.

mod data;
pub(crate) mod map;
mod subset;
pub(crate) mod temporary;

pub(crate) use data::DatInner;
pub use data::{Dat, Global};
pub(crate) use data::{LoopGuard, Redistribute, Storage};
pub use map::Map;
pub use subset::Subset;
pub(crate) use subset::SubsetInner;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// Sizes of the four sections of a set's local numbering (seed 004):
/// `core | owned | exec halo | non-exec halo`. A serial run has only core.
///
/// ```
/// use parloop::Sections;
/// let s = Sections { core: 10, owned: 2, exec: 3, non_exec: 1 };
/// assert_eq!(s.total(), 16);
/// // A serial set: everything is core.
/// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
/// assert_eq!(rt.set("cells", 5)?.sections(), Sections { core: 5, ..Sections::default() });
/// # Ok::<(), parloop::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Sections {
    /// Owned entities that touch no halo data.
    pub core: usize,
    /// Owned entities that touch halo data.
    pub owned: usize,
    /// Other ranks' entities executed redundantly.
    pub exec: usize,
    /// Other ranks' entities only read.
    pub non_exec: usize,
}

impl Sections {
    /// All sections together. Sections of a declared set always sum within
    /// `usize` (checked on declaration); see [`Sections::checked_total`].
    pub fn total(&self) -> usize {
        self.core + self.owned + self.exec + self.non_exec
    }

    /// All sections together, or `None` when the sum overflows `usize`.
    ///
    /// ```
    /// use parloop::Sections;
    /// assert_eq!(Sections { core: 3, owned: 2, ..Sections::default() }.checked_total(), Some(5));
    /// assert_eq!(Sections { core: usize::MAX, owned: 1, ..Sections::default() }.checked_total(), None);
    /// ```
    pub fn checked_total(&self) -> Option<usize> {
        self.core.checked_add(self.owned)?.checked_add(self.exec)?.checked_add(self.non_exec)
    }
}

/// `entities x per_entity` values of `elem_bytes` bytes each, checked: the
/// number of values, or an error naming the declaration and the sizes when
/// the values (or their bytes) overflow what one allocation can hold.
pub(crate) fn checked_len(
    what: &'static str,
    name: &str,
    entities: usize,
    per_entity: usize,
    per_entity_word: &str,
    elem_bytes: usize,
) -> Result<usize> {
    let len = entities.checked_mul(per_entity);
    let bytes = len.and_then(|l| l.checked_mul(elem_bytes));
    match (len, bytes) {
        (Some(len), Some(b)) if b <= isize::MAX as usize => Ok(len),
        _ => Err(Error::SizeOverflow {
            what,
            name: name.into(),
            detail: format!(
                "{entities} entities x {per_entity_word} {per_entity} x {elem_bytes} bytes exceeds the largest possible allocation ({} bytes)",
                isize::MAX
            ),
        }),
    }
}

pub(crate) struct SetInner {
    id: u64,
    name: String,
    sections: Sections,
    /// This rank's part once the set is distributed.
    pub(crate) local: OnceLock<Arc<LocalPart>>,
    /// What the subset whose loops iterate this set selects, if it is one's
    /// iteration set: what a kernel panic's element is an entity of.
    selects: Option<Arc<subset::Selection>>,
}

/// A distributed set's part on this rank.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) struct LocalPart {
    pub sections: Sections,
    /// The global index of every local entity.
    pub global: Vec<usize>,
    /// Entities of the whole set.
    pub global_size: usize,
    /// Where the other parts are.
    #[cfg(feature = "mpi")]
    pub comm: Arc<crate::dist::Comm>,
    /// `global` as `i64`s, the element index argument's values
    /// (`Arg::index`), made on first use. Held as a global's storage, which
    /// names no set (a dat's would hold the set that holds this part).
    pub index_numbers: OnceLock<Arc<data::GlobalInner<i64>>>,
}

thread_local! {
    static CHECKS_AGREED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// While alive, operations on this thread skip agreeing on their argument
/// checks ([`Set::agreed`]): the operation that holds it (CG) agreed on its
/// own, and what it calls it calls alike on every rank, so one all-reduce
/// per solve rather than per vector operation.
pub(crate) struct ChecksAgreed(bool);

impl ChecksAgreed {
    pub(crate) fn enter() -> Self {
        ChecksAgreed(CHECKS_AGREED.with(|c| c.replace(true)))
    }

    fn inside() -> bool {
        CHECKS_AGREED.with(|c| c.get())
    }
}

impl Drop for ChecksAgreed {
    fn drop(&mut self) {
        CHECKS_AGREED.with(|c| c.set(self.0));
    }
}

/// A named collection of entities (nodes, edges, cells).
///
/// ```
/// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq).unwrap();
/// let cells = rt.set("cells", 720_000).unwrap();
/// assert_eq!(cells.size(), 720_000);
/// assert_eq!(cells.name(), "cells");
/// ```
#[derive(Clone)]
pub struct Set(pub(crate) Arc<SetInner>);

impl Set {
    /// The global number of every local entity, as the storage of a direct
    /// `i64` argument, when the set is distributed (made once).
    pub(crate) fn global_numbers(&self) -> Result<Option<Arc<dyn Storage>>> {
        let Some(part) = self.0.local.get() else { return Ok(None) };
        if let Some(n) = part.index_numbers.get() {
            return Ok(Some(n.clone()));
        }
        let values = crate::fallible::mapped(
            &part.global,
            |&g| g as i64,
            || format!("the global numbers of the {} entities of set `{}` here", part.global.len(), self.name()),
        )?;
        let numbers = data::table(&format!("pl_index_{}", self.name()), values);
        Ok(Some(part.index_numbers.get_or_init(|| numbers).clone()))
    }

    /// Element `element` of a loop over this set as the user numbers it:
    /// a subset's element by its entity of the parent set, and (as
    /// [`Set::declared_entity`]) in the declared numbering under MPI; with
    /// the set the number is of.
    pub(crate) fn user_element(&self, element: usize) -> (usize, &Set) {
        match self.0.selects.as_deref() {
            Some(sel) => match sel.indices().get(element) {
                Some(&entity) => (sel.parent().declared_entity(entity as usize), sel.parent()),
                None => (element, self),
            },
            None => (self.declared_entity(element), self),
        }
    }

    /// The number the user declared local entity `local` under: itself on
    /// a set that is not distributed, its global number where it is. For
    /// messages and output that must not depend on the rank count.
    pub(crate) fn declared_entity(&self, local: usize) -> usize {
        self.0.local.get().map_or(local, |p| p.global.get(local).copied().unwrap_or(local))
    }

    pub(crate) fn new(name: &str, sections: Sections) -> Result<Set> {
        Set::selecting(name, sections, None)
    }

    /// A set; `selects`: what the subset whose iteration set it is selects.
    pub(crate) fn selecting(name: &str, sections: Sections, selects: Option<Arc<subset::Selection>>) -> Result<Set> {
        let Some(total) = sections.checked_total() else {
            return Err(Error::SizeOverflow {
                what: "set",
                name: name.into(),
                detail: format!(
                    "sections core {} + owned {} + exec {} + non-exec {} exceed usize::MAX",
                    sections.core, sections.owned, sections.exec, sections.non_exec
                ),
            });
        };
        // Past isize::MAX no array holds even a byte per entity, and loops
        // number entities as i64 (`Arg::index()`, the device's element
        // counters): a loop over such a set could only run a kernel of
        // globals alone, for centuries on the host (a size from a negative
        // number cast to usize, say), or number entities wrongly.
        if total > isize::MAX as usize {
            return Err(Error::SizeOverflow {
                what: "set",
                name: name.into(),
                detail: format!(
                    "{total} entities, more than isize::MAX ({}): no array can hold a value per entity, and loops \
                     number entities as i64",
                    isize::MAX
                ),
            });
        }
        Ok(Set(Arc::new(SetInner { id: next_id(), name: name.to_owned(), sections, local: OnceLock::new(), selects })))
    }

    /// For size messages: where the set is distributed, that its entities
    /// are this rank's part (owned and halo), not the declared whole.
    pub(crate) fn local_note(&self) -> String {
        match self.0.local.get() {
            Some(part) => format!(
                " on this rank: the set is distributed, and data on it holds this rank's owned and halo entities \
                 in the local numbering, not the {} declared",
                part.global_size
            ),
            None => String::new(),
        }
    }

    /// Whether this is a subset's iteration set (a loop over the subset).
    pub(crate) fn is_subset_iteration(&self) -> bool {
        self.0.selects.is_some()
    }

    /// Where element `element` of a loop over this set is, for a kernel
    /// panic's message: the set (or the subset and its parent's entity)
    /// and, under MPI, the entity's global number, as a user numbers it.
    pub(crate) fn describe_element(&self, element: usize) -> String {
        let global = |set: &Set, local: usize| set.0.local.get().and_then(|p| p.global.get(local).copied());
        match self.0.selects.as_deref() {
            Some(subset) => match subset.indices().get(element) {
                Some(&entity) => format!(
                    "element {element} of subset `{}` (entity {entity} of set `{}`{})",
                    self.name(),
                    subset.parent().name(),
                    global(subset.parent(), entity as usize).map_or(String::new(), |g| format!(", global number {g}"))
                ),
                None => format!("element {element} of subset `{}`", self.name()),
            },
            None => match global(self, element) {
                Some(g) => format!("element {element} of set `{}` (global number {g})", self.name()),
                None => format!("element {element} of set `{}`", self.name()),
            },
        }
    }

    /// The set's name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// Process-unique identity.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// Owned entities (core and owned sections).
    pub fn size(&self) -> usize {
        let s = self.sections();
        s.core + s.owned
    }

    /// All local entities, halos included: the length of data on this set.
    pub fn total(&self) -> usize {
        self.sections().total()
    }

    /// Entities of the whole set on all ranks: the declared size, also
    /// after [`Runtime::partition`](crate::Runtime) kept this rank's part
    /// (and on every rank when rank 0 alone declared the mesh).
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq).unwrap();
    /// assert_eq!(rt.set("cells", 12).unwrap().global_size(), 12);
    /// ```
    pub fn global_size(&self) -> usize {
        self.0.local.get().map_or(self.0.sections.total(), |l| l.global_size)
    }

    /// `local`, the outcome of operation `what`'s argument checks on this
    /// rank, agreed with the other ranks before the operation communicates
    /// when the set is distributed, with `args` (the arguments that must be
    /// equal everywhere, such as options; "" for none): an error on one
    /// rank is then an error on every rank (the others' says another rank
    /// failed) rather than the others waiting for it in a collective
    /// forever. Inside an operation that agreed already
    /// ([`ChecksAgreed`]), `local` as it is: that operation calls the
    /// others alike on every rank. Collective on a distributed set.
    pub(crate) fn agreed<R>(&self, what: &str, local: Result<R>, args: &str) -> Result<R> {
        if ChecksAgreed::inside() {
            return local;
        }
        self.agreed_data(what, local, args)
    }

    /// [`Set::agreed`] over the first distributed set of `sets` (the
    /// operands' sets), so that a rank passing an operand on a set of its
    /// own where the others pass distributed ones still takes part; `local`
    /// as it is where none is distributed.
    pub(crate) fn agreed_among<'s, R>(
        sets: impl IntoIterator<Item = &'s Set>,
        what: &str,
        local: Result<R>,
        args: &str,
    ) -> Result<R> {
        match sets.into_iter().find(|s| s.is_distributed()) {
            Some(set) => set.agreed(what, local, args),
            None => local,
        }
    }

    /// [`Set::agreed`] also inside an operation that agreed already: for
    /// outcomes that depend on each rank's data (a missing diagonal entry
    /// in this rank's rows), which may differ between ranks however alike
    /// their calls.
    pub(crate) fn agreed_data<R>(&self, what: &str, local: Result<R>, args: &str) -> Result<R> {
        #[cfg(feature = "mpi")]
        if let Some(part) = self.0.local.get() {
            part.comm.agree_checks(what, local.is_ok(), args)?;
        }
        #[cfg(not(feature = "mpi"))]
        let _ = (what, args);
        local
    }

    /// Whether a partition (`Runtime::partition`, feature `mpi`)
    /// distributed the set: its entities are then this rank's part, in a
    /// local numbering.
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// assert!(!rt.set("cells", 4)?.is_distributed());
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn is_distributed(&self) -> bool {
        self.0.local.get().is_some()
    }

    /// The section sizes (this rank's, once distributed).
    pub fn sections(&self) -> Sections {
        self.0.local.get().map_or(self.0.sections, |l| l.sections)
    }
}

impl PartialEq for Set {
    fn eq(&self, other: &Set) -> bool {
        self.0.id == other.0.id
    }
}
impl Eq for Set {}

impl fmt::Debug for Set {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Set({} #{}, {:?})", self.0.name, self.0.id, self.0.sections)
    }
}
