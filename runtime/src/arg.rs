//! Loop arguments: how a kernel parameter reaches a dat or global.

use std::sync::Arc;

use crate::decl::{Dat, Global, Map, Set, Storage};
use crate::matrix::assembly::MatScatter;
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
    /// A matrix through a (row map, column map) pair: the element matrix,
    /// scattered into the CSR values after the kernel (`matrix::assembly`).
    Mat(Arc<MatScatter>),
    /// The element's number in the global numbering (`&i64`); no data
    /// (its storage is a private placeholder).
    Index,
}

/// One argument of a [`par_loop`](crate::Runtime::par_loop): a dat (directly,
/// through one map column, or through all columns) or a global, with an
/// access mode. Built by [`Dat::arg`], [`Dat::arg_via`], [`Dat::arg_vec`] and
/// [`Global::arg`].
pub struct Arg {
    pub(crate) storage: Arc<dyn Storage>,
    /// `storage.id()`, kept: every loop asks for it several times (plan
    /// keys, trace tokens, replay words), and through `dyn` it is a call.
    pub(crate) id: u64,
    pub(crate) kind: ArgKind,
    pub(crate) access: Access,
    /// Values per entity.
    pub(crate) dim: usize,
    /// The dat's set (`None` for globals).
    pub(crate) set: Option<Set>,
}

impl Drop for Arg {
    /// An argument can be the last handle on its data: as for
    /// [`Dat`]'s drop, recorded loops with it run first.
    fn drop(&mut self) {
        self.release_storage();
    }
}

impl Clone for Arg {
    fn clone(&self) -> Self {
        Arg::with_id(self.storage.clone(), self.id, self.kind.clone(), self.access, self.dim, self.set.clone())
    }
}

/// Whether any of a loop's arguments writes through a map: then the loop
/// needs an increment strategy on a device, and its exec halo runs too
/// (seed 004), redundantly.
pub(crate) fn writes_indirectly(args: &[Arg]) -> bool {
    args.iter().any(|a| a.is_indirect() && a.access.writes())
}

impl Arg {
    /// An argument of `storage`.
    pub(crate) fn new(storage: Arc<dyn Storage>, kind: ArgKind, access: Access, dim: usize, set: Option<Set>) -> Arg {
        let id = storage.id();
        Arg::with_id(storage, id, kind, access, dim, set)
    }

    /// [`Arg::new`] where `id` (`storage.id()`) is known: every
    /// construction counts a handle on the data (`trace::Link::handle_gone`).
    pub(crate) fn with_id(
        storage: Arc<dyn Storage>,
        id: u64,
        kind: ArgKind,
        access: Access,
        dim: usize,
        set: Option<Set>,
    ) -> Arg {
        storage.link().handle_made();
        Arg { storage, id, kind, access, dim, set }
    }

    /// Points the argument at other data (`id` follows).
    pub(crate) fn set_storage(&mut self, storage: Arc<dyn Storage>) {
        storage.link().handle_made();
        self.release_storage();
        self.id = storage.id();
        self.storage = storage;
    }

    /// This argument's handle on its data goes (the last one runs what is
    /// pending with the data, as a dat's drop).
    fn release_storage(&self) {
        self.storage.link().handle_gone(self.id, || self.storage.clone());
    }

    /// The access mode.
    ///
    /// ```
    /// use parloop::Access;
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let s = rt.set("s", 2)?;
    /// let d = rt.dat("d", &s, 1, vec![0.0f64; 2])?;
    /// assert_eq!(d.arg(Access::RW).access(), Access::RW);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn access(&self) -> Access {
        self.access
    }

    /// The map this argument goes through, if indirect. A matrix
    /// argument's is its row map: the planner colours elements that add to
    /// one row apart, as for an indirect INC through every column.
    pub(crate) fn map(&self) -> Option<&Map> {
        match &self.kind {
            ArgKind::Indirect { map, .. } | ArgKind::Vector { map } => Some(map),
            ArgKind::Mat(m) => Some(&m.row_map),
            _ => None,
        }
    }

    /// The element-index argument: the kernel parameter `&i64` holds the
    /// element's number in the global numbering of the iteration set (the
    /// element number in a serial run; in a loop over a
    /// [`Subset`](crate::Subset), the number of the parent set's entity).
    ///
    /// ```
    /// use parloop::{Access, Arg, Backend, Runtime};
    /// #[parloop::kernel]
    /// fn number(i: &i64, x: &mut f64) { *x = *i as f64; }
    ///
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// let cells = rt.set("cells", 3)?;
    /// let x = rt.dat("x", &cells, 1, vec![0.0; 3])?;
    /// rt.par_loop(number::KERNEL, &cells, &[Arg::index(), x.arg(Access::WRITE)])?;
    /// assert_eq!(x.values()?, vec![0.0, 1.0, 2.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn index() -> Arg {
        // Named for messages: a mismatch says "argument 0 (Arg::index() ...)".
        let placeholder =
            Global::<i64>::new("Arg::index(), the element number, a `&i64` parameter", &[0]).expect("one value");
        Arg::new(placeholder.0.clone(), ArgKind::Index, Access::Read, 1, None)
    }

    /// The matrix scatter of a matrix argument.
    pub(crate) fn mat(&self) -> Option<&Arc<MatScatter>> {
        match &self.kind {
            ArgKind::Mat(m) => Some(m),
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
        self.id
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
        Arg::new(self.0.clone(), kind, access, self.dim(), Some(self.set().clone()))
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
    ///
    /// ```
    /// use parloop::{Access, Backend, Runtime};
    /// #[parloop::kernel]
    /// fn difference(a: &f64, b: &f64, d: &mut f64) {
    ///     *d = *b - *a;
    /// }
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// let nodes = rt.set("nodes", 3)?;
    /// let edges = rt.set("edges", 2)?;
    /// let pedge = rt.map("pedge", &edges, &nodes, 2, vec![0, 1, 1, 2])?;
    /// let x = rt.dat("x", &nodes, 1, vec![0.0, 1.0, 3.0])?;
    /// let dx = rt.dat("dx", &edges, 1, vec![0.0; 2])?;
    /// let args = [x.arg_via(&pedge, 0, Access::READ), x.arg_via(&pedge, 1, Access::READ), dx.arg(Access::WRITE)];
    /// rt.par_loop(difference::KERNEL, &edges, &args)?;
    /// assert_eq!(dx.values()?, vec![1.0, 2.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn arg_via(&self, map: &Map, column: usize, access: Access) -> Arg {
        self.make_arg(ArgKind::Indirect { map: map.clone(), column }, access)
    }

    /// A vector argument: element `e` sees the entities of every column of
    /// `map[e]`, as `&[[T; dim]; arity]`.
    ///
    /// ```
    /// use parloop::{Access, Backend, Runtime};
    /// /// The centroid of a triangle from its three vertices' coordinates.
    /// #[parloop::kernel]
    /// fn centroid(x: &[[f64; 2]; 3], c: &mut [f64; 2]) {
    ///     for k in 0..2 {
    ///         c[k] = (x[0][k] + x[1][k] + x[2][k]) / 3.0;
    ///     }
    /// }
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// let vertices = rt.set("vertices", 3)?;
    /// let cells = rt.set("cells", 1)?;
    /// let cv = rt.map("cell_vertices", &cells, &vertices, 3, vec![0, 1, 2])?;
    /// let x = rt.dat("x", &vertices, 2, vec![0.0, 0.0, 3.0, 0.0, 0.0, 3.0])?;
    /// let c = rt.dat("c", &cells, 2, vec![0.0; 2])?;
    /// rt.par_loop(centroid::KERNEL, &cells, &[x.arg_vec(&cv, Access::READ), c.arg(Access::WRITE)])?;
    /// assert_eq!(c.values()?, vec![1.0, 1.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn arg_vec(&self, map: &Map, access: Access) -> Arg {
        self.make_arg(ArgKind::Vector { map: map.clone() }, access)
    }
}

impl<T: Scalar> Global<T> {
    /// A global argument: READ for a constant, INC, MIN or MAX for a reduction.
    ///
    /// ```
    /// use parloop::{Access, Backend, Runtime};
    /// #[parloop::kernel]
    /// fn largest(x: &f64, m: &mut f64) {
    ///     *m = m.max(*x);
    /// }
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// let s = rt.set("s", 3)?;
    /// let x = rt.dat("x", &s, 1, vec![2.0, 7.0, -1.0])?;
    /// let m = rt.global("m", &[f64::MIN])?;
    /// rt.par_loop(largest::KERNEL, &s, &[x.arg(Access::READ), m.arg(Access::MAX)])?;
    /// assert_eq!(m.value()?, 7.0);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn arg(&self, access: Access) -> Arg {
        Arg::new(self.0.clone(), ArgKind::Global, access, self.dim(), None)
    }
}
