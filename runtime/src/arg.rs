//! Loop arguments: how a kernel parameter reaches a dat or global.

use std::sync::Arc;

use crate::decl::{Dat, Global, Map, Set, Storage};
use crate::types::{Access, Scalar};

/// How an argument reaches its data.
#[derive(Clone, Debug)]
pub(crate) enum ArgKind {
    /// The entity of the iteration element itself.
    Direct,
    /// The entity `map[element][column]`.
    Indirect { map: Map, column: usize },
    /// The entities of every column of `map[element]` (a vector argument).
    Vector { map: Map },
    /// A global.
    Global,
}

/// One argument of a [`par_loop`](crate::Runtime::par_loop): a dat (directly,
/// through one map column, or through all columns) or a global, with an
/// access mode. Built by [`Dat::arg`], [`Dat::arg_via`], [`Dat::arg_vec`] and
/// [`Global::arg`].
#[derive(Clone)]
pub struct Arg {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) kind: ArgKind,
    pub(crate) access: Access,
    /// Values per entity.
    pub(crate) dim: usize,
    /// The dat's set (`None` for globals).
    pub(crate) set: Option<Set>,
}

/// Whether any of a loop's arguments writes through a map: then the loop
/// needs an increment strategy on a device, and its exec halo runs too
/// (seed 004), redundantly.
pub(crate) fn writes_indirectly(args: &[Arg]) -> bool {
    args.iter().any(|a| a.is_indirect() && a.access.writes())
}

impl Arg {
    /// The access mode.
    pub fn access(&self) -> Access {
        self.access
    }

    /// The map this argument goes through, if indirect.
    pub(crate) fn map(&self) -> Option<&Map> {
        match &self.kind {
            ArgKind::Indirect { map, .. } | ArgKind::Vector { map } => Some(map),
            _ => None,
        }
    }

    pub(crate) fn is_indirect(&self) -> bool {
        self.map().is_some()
    }

    pub(crate) fn is_global(&self) -> bool {
        matches!(self.kind, ArgKind::Global)
    }

    pub(crate) fn data_id(&self) -> u64 {
        self.storage.id()
    }

    pub(crate) fn data_name(&self) -> &str {
        self.storage.name()
    }

    /// Bytes of one entity.
    pub(crate) fn bytes_per_entity(&self) -> usize {
        self.dim * self.storage.elem().size()
    }
}

impl std::fmt::Debug for Arg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Arg({} {:?} {})", self.storage.name(), self.kind, self.access)
    }
}

impl<T: Scalar> Dat<T> {
    fn make_arg(&self, kind: ArgKind, access: Access) -> Arg {
        Arg { storage: self.0.clone(), kind, access, dim: self.dim(), set: Some(self.set().clone()) }
    }

    /// A direct argument: element `e` of the loop sees entity `e` of this dat.
    ///
    /// ```
    /// # use parloop::{Access, Backend, Runtime};
    /// # let rt = Runtime::with_backend(Backend::Seq).unwrap();
    /// # let cells = rt.set("cells", 2).unwrap();
    /// let q = rt.dat("q", &cells, 4, vec![0.0f64; 8]).unwrap();
    /// let arg = q.arg(Access::READ);
    /// ```
    pub fn arg(&self, access: Access) -> Arg {
        self.make_arg(ArgKind::Direct, access)
    }

    /// An indirect argument: element `e` sees entity `map[e][column]`.
    pub fn arg_via(&self, map: &Map, column: usize, access: Access) -> Arg {
        self.make_arg(ArgKind::Indirect { map: map.clone(), column }, access)
    }

    /// A vector argument: element `e` sees the entities of every column of
    /// `map[e]`, as `&[[T; dim]; arity]`.
    pub fn arg_vec(&self, map: &Map, access: Access) -> Arg {
        self.make_arg(ArgKind::Vector { map: map.clone() }, access)
    }
}

impl<T: Scalar> Global<T> {
    /// A global argument: READ for a constant, INC, MIN or MAX for a reduction.
    pub fn arg(&self, access: Access) -> Arg {
        Arg { storage: self.0.clone(), kind: ArgKind::Global, access, dim: self.dim(), set: None }
    }
}
