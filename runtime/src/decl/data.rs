//! Dats and globals: values behind a lock with a device mirror, the host
//! access to them (never deadlocking, see `host_access`), and the
//! type-erased storage a loop locks.

use std::fmt;
use std::sync::{Arc, RwLock};

use super::temporary::Temp;
use super::{checked_len, next_id, Set};
use crate::coherence::MirrorSlot;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::host_access;
use crate::trace::Link;
use crate::types::{ElemType, Scalar};

/// Values behind a lock, their device mirror and their identity: what dats
/// and globals share. `M` is what else each knows (a dat's set and dim).
pub(crate) struct Stored<T: Scalar, M> {
    pub(crate) id: u64,
    pub(crate) name: String,
    pub(crate) values: RwLock<Vec<T>>,
    pub(crate) mirror: MirrorSlot,
    pub(crate) meta: M,
    /// The lazy trace that recorded loops with these values (host
    /// accesses force it first).
    pub(crate) link: Link,
    /// What makes a dat a temporary (`decl::temporary`): values allocated
    /// when first written, returned to a pool when dropped.
    pub(crate) temp: Option<Box<Temp>>,
}

/// What a dat knows beyond its values.
pub(crate) struct DatMeta {
    pub(crate) set: Set,
    pub(crate) dim: usize,
}

pub(crate) type DatInner<T> = Stored<T, DatMeta>;
/// A global's meta: its number of values (fixed at declaration).
pub(crate) type GlobalInner<T> = Stored<T, usize>;

impl<T: Scalar, M> Stored<T, M> {
    fn new(name: &str, values: Vec<T>, meta: M) -> Stored<T, M> {
        Stored {
            id: next_id(),
            name: name.into(),
            values: RwLock::new(values),
            mirror: MirrorSlot::default(),
            meta,
            link: Link::default(),
            temp: None,
        }
    }

    /// The values for reading on the host, downloaded first when a device
    /// loop wrote them last. Reads nest; a read inside this thread's
    /// `with_values_mut` is an [`Error::HostBusy`] (see `host_access`).
    #[track_caller]
    fn read(&self) -> Result<host_access::ReadGuard<'_, Vec<T>>> {
        self.read_with(true)
    }

    /// [`Stored::read`]; `poison`: refuse a datum the lazy trace left
    /// stale (`trace::poison`; everything but moving values between ranks).
    #[track_caller]
    fn read_with(&self, poison: bool) -> Result<host_access::ReadGuard<'_, Vec<T>>> {
        if let Some(t) = &self.temp {
            t.check_read(&self.name, "a host read reads it")?;
        }
        self.link.force(self.id, false, false)?;
        if poison {
            self.link.check_poison(self.id, &self.name)?;
        }
        loop {
            if self.mirror.host_stale() {
                drop(self.write("read")?);
            }
            let guard = host_access::read(&self.values, self.id, &self.name, "read")?;
            // A device loop on another thread may have written in between.
            if !self.mirror.host_stale() {
                return Ok(guard);
            }
        }
    }

    /// The values for writing on the host (current first); callers that do
    /// write mark the device copy stale. `wanted` says what for, in errors.
    #[track_caller]
    fn write(&self, wanted: &'static str) -> Result<host_access::WriteGuard<'_, Vec<T>>> {
        self.write_with(wanted, true)
    }

    /// [`Stored::write`]; `poison` as for [`Stored::read_with`] (a write
    /// of every value, which cures the datum, does not check).
    #[track_caller]
    fn write_with(&self, wanted: &'static str, poison: bool) -> Result<host_access::WriteGuard<'_, Vec<T>>> {
        self.link.force(self.id, true, false)?;
        if poison {
            self.link.check_poison(self.id, &self.name)?;
        }
        let mut values = host_access::write(&self.values, self.id, &self.name, wanted)?;
        if let Some(t) = &self.temp {
            t.allocate(&self.name, &mut values.guard, &self.mirror)?;
        }
        self.mirror.refresh_host(bytemuck::cast_slice_mut(&mut values.guard))?;
        Ok(values)
    }

    /// The values as they are, for the partition to move between ranks: a
    /// temporary is not given memory for its set, whose size the partition
    /// is changing (rank 0's values arrive on ranks that declared it empty).
    fn redistributed(&self) -> host_access::WriteGuard<'_, Vec<T>> {
        let held = |r: Result<()>| r.expect("partitioning runs outside any host access, before any loop");
        held(self.link.force(self.id, true, false));
        let mut values = host_access::write(&self.values, self.id, &self.name, "redistributed")
            .expect("partitioning runs outside any host access");
        held(self.mirror.refresh_host(bytemuck::cast_slice_mut(&mut values.guard)));
        values
    }

    /// A temporary not written yet: it has no values to move between ranks.
    fn unwritten_temporary(&self) -> bool {
        self.temp.as_ref().is_some_and(|t| !t.written())
    }

    /// Exclusive access for a loop; `None` while this thread's host code
    /// holds the values (a loop inside `with_values`), `Some(None)` while
    /// another thread does.
    fn try_exclusive(&self) -> Option<Option<host_access::WriteGuard<'_, Vec<T>>>> {
        host_access::try_write(&self.values, self.id, &self.name, "written by a loop").ok()
    }

    /// As [`Stored::try_exclusive`], holders on other threads waited for
    /// (a device loop's, which holds one datum at a time).
    fn exclusive(&self) -> Option<host_access::WriteGuard<'_, Vec<T>>> {
        host_access::write(&self.values, self.id, &self.name, "written by a loop").ok()
    }
}

/// Data on a set: `dim` values of `T` per entity, stored entity-major.
///
/// ```
/// use parloop::{Backend, Runtime};
/// let rt = Runtime::with_backend(Backend::Seq).unwrap();
/// let nodes = rt.set("nodes", 3).unwrap();
/// let x = rt.dat::<f64>("x", &nodes, 2, vec![0.0, 0.0, 1.0, 0.0, 0.0, 1.0]).unwrap();
/// assert_eq!(x.values().unwrap()[2], 1.0);
/// ```
pub struct Dat<T: Scalar>(pub(crate) Arc<DatInner<T>>);

/// `gather` in a build without the `mpi` feature: one process is rank 0
/// of one, so a program written for MPI (`if let Some(all) =
/// q.gather(0)?`) builds and runs serially unchanged.
#[cfg(not(feature = "mpi"))]
impl<T: Scalar> Dat<T> {
    /// The values of every entity (in a serial build, [`Dat::values`]) on
    /// rank `root`, which must be 0 here.
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// let q = rt.dat("q", &rt.set("cells", 2)?, 1, vec![1.0, 2.0])?;
    /// assert_eq!(q.gather(0)?, Some(vec![1.0, 2.0]));
    /// assert!(q.gather(1).is_err());
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn gather(&self, root: usize) -> Result<Option<Vec<T>>> {
        if root != 0 {
            return Err(Error::Distributed {
                rank: 0,
                reason: format!(
                    "gather of `{}`: root {root} is not a rank (a serial build has rank 0 only)",
                    self.name()
                ),
            });
        }
        Ok(Some(self.values()?))
    }
}

impl<T: Scalar> Dat<T> {
    pub(crate) fn new(name: &str, set: &Set, dim: usize, values: Vec<T>) -> Result<Dat<T>> {
        if dim == 0 {
            return Err(Error::InvalidDeclaration {
                what: "dat",
                name: name.into(),
                reason: "dim must be at least 1".into(),
            });
        }
        let expected = checked_len("dat", name, set.total(), dim, "dim", std::mem::size_of::<T>())?;
        if values.len() != expected {
            return Err(Error::WrongLength {
                what: "dat",
                name: name.into(),
                expected,
                got: values.len(),
                detail: format!("{} entities of `{}` x dim {dim}{}", set.total(), set.name(), set.local_note()),
            });
        }
        let values = crate::pages::on_huge_pages(values);
        let dat = Dat::handle(Arc::new(Stored::new(name, values, DatMeta { set: set.clone(), dim })));
        // On a set already distributed, the values given for the halo are
        // this rank's guess of what the owners hold (zeros, say): the first
        // loop that reads the halo exchanges it, as after a host write.
        // Every rank declares its dats, so every rank marks it alike.
        dat.host_wrote();
        Ok(dat)
    }

    /// The dat's name.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// let nodes = rt.set("nodes", 2)?;
    /// let u = rt.dat("u", &nodes, 3, vec![0.0f64; 6])?;
    /// assert_eq!((u.name(), u.set().name(), u.dim()), ("u", "nodes", 3));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.0.name
    }
    /// Process-unique identity.
    pub fn id(&self) -> u64 {
        self.0.id
    }
    /// The set the dat lives on.
    pub fn set(&self) -> &Set {
        &self.0.meta.set
    }
    /// Values per entity.
    pub fn dim(&self) -> usize {
        self.0.meta.dim
    }

    /// A copy of all values (entity-major), downloaded first when a device
    /// loop wrote them last.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let s = rt.set("s", 2)?;
    /// let d = rt.dat("d", &s, 1, vec![1.0, 2.0])?;
    /// assert_eq!(d.values()?, vec![1.0, 2.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    #[track_caller]
    pub fn values(&self) -> Result<Vec<T>> {
        crate::fallible::copy_of(&self.0.read()?.guard, || format!("a copy of dat `{}`'s values", self.0.name))
    }

    /// Calls `f` with the values, without copying. Reads nest (`values()`
    /// inside `f` works); loops that need this dat return [`Error::Busy`]
    /// while `f` runs, and writing it inside `f` is an [`Error::HostBusy`].
    ///
    /// With the lazy trace on, this runs every recorded loop first (the
    /// closure may read anything); [`Dat::values`] runs only what this
    /// dat depends on.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let s = rt.set("s", 3)?;
    /// let d = rt.dat("d", &s, 1, vec![1.0, 2.0, 4.0])?;
    /// let largest = d.with_values(|v| v.iter().cloned().fold(f64::MIN, f64::max))?;
    /// assert_eq!(largest, 4.0);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    #[track_caller]
    pub fn with_values<R>(&self, f: impl FnOnce(&[T]) -> R) -> Result<R> {
        self.0.link.force(self.0.id, false, true)?;
        self.with_own_values(f)
    }

    /// Calls `f` with mutable access to the values. Any other access to
    /// this dat inside `f` is an [`Error::HostBusy`] (or [`Error::Busy`]
    /// for a loop), never a hang.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let s = rt.set("s", 2)?;
    /// let d = rt.dat("d", &s, 1, vec![1.0, 2.0])?;
    /// d.with_values_mut(|v| v[0] = 5.0)?;
    /// assert!(d.with_values_mut(|_| d.values()).unwrap().is_err());
    /// # Ok::<(), parloop::Error>(())
    /// ```
    #[track_caller]
    pub fn with_values_mut<R>(&self, f: impl FnOnce(&mut [T]) -> R) -> Result<R> {
        self.0.link.force(self.0.id, true, true)?;
        self.with_own_values_mut(f)
    }

    /// [`Dat::with_values`] for the library's own operations, whose
    /// closures touch no other datum the trace may still write: the lazy
    /// trace runs only what this dat depends on (as [`Dat::values`]), so a
    /// solver is not handed the failure of a pending loop it never needed.
    #[track_caller]
    pub(crate) fn with_own_values<R>(&self, f: impl FnOnce(&[T]) -> R) -> Result<R> {
        Ok(f(&self.0.read()?.guard))
    }

    /// [`Dat::with_values_mut`] as [`Dat::with_own_values`] is to
    /// [`Dat::with_values`].
    #[track_caller]
    pub(crate) fn with_own_values_mut<R>(&self, f: impl FnOnce(&mut [T]) -> R) -> Result<R> {
        if let Some(t) = &self.0.temp {
            t.check_read(&self.0.name, "`with_values_mut` reads it")?;
        }
        let mut guard = self.0.write("written")?;
        let r = f(&mut guard.guard);
        self.0.mirror.host_written();
        drop(guard);
        self.host_wrote();
        Ok(r)
    }

    /// Calls `f` to overwrite every value (what `f` leaves is the new
    /// content, whatever was there): not refused when the lazy trace left
    /// the dat stale, and the dat's values are the program's again after.
    pub(crate) fn overwrite<R>(&self, f: impl FnOnce(&mut [T]) -> R) -> Result<R> {
        self.0.link.force(self.0.id, true, true)?;
        let mut guard = self.0.write_with("written", false)?;
        let r = f(&mut guard.guard);
        self.0.mirror.host_written();
        drop(guard);
        self.host_wrote();
        self.0.link.written_whole(self.0.id);
        Ok(r)
    }

    /// An [`Error::Discarded`] when the lazy trace left this dat stale
    /// (for library operations that lock it as a loop does).
    pub(crate) fn check_poison(&self) -> Result<()> {
        self.0.link.check_poison(self.0.id, &self.0.name)
    }

    /// An [`Error::UnwrittenTemporary`] when this is a temporary not
    /// written yet and operation `by` (a library operation, not a loop,
    /// which `temporary::check_loop` checks) reads it.
    pub(crate) fn check_written(&self, by: &str) -> Result<()> {
        match &self.0.temp {
            Some(t) => t.check_read(&self.0.name, by),
            None => Ok(()),
        }
    }

    /// This dat was written whole by a library operation (a temporary's
    /// first write among them: a product into a fresh temporary left it
    /// "used before it was written" for every later read).
    pub(crate) fn written_whole(&self) {
        if let Some(t) = &self.0.temp {
            t.mark_written();
        }
        self.0.link.written_whole(self.0.id);
    }

    /// After a host write (or the declaration): under MPI the halo copies
    /// of this dat on the other ranks (and this rank's of theirs) no longer
    /// match what their owners hold, so the next loop that reads the halo
    /// exchanges it (a host write may have changed owned values, or written
    /// halo values computed from a stale halo).
    fn host_wrote(&self) {
        #[cfg(feature = "mpi")]
        if let Some(part) = self.set().0.local.get() {
            part.comm.mark_stale(self.0.id);
        }
    }

    /// Replaces all values; the length must be `set.total() * dim`.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// # let s = rt.set("s", 2)?;
    /// let d = rt.dat("d", &s, 1, vec![0.0, 0.0])?;
    /// d.set_values(&[3.0, 4.0])?;
    /// assert_eq!(d.values()?, vec![3.0, 4.0]);
    /// assert!(matches!(d.set_values(&[1.0]), Err(parloop::Error::WrongLength { .. })));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    #[track_caller]
    pub fn set_values(&self, values: &[T]) -> Result<()> {
        // Checked before the write: a temporary allocates its memory there.
        let expected = self.set().total() * self.dim();
        if expected != values.len() {
            return Err(Error::WrongLength {
                what: "dat",
                name: self.name().into(),
                expected,
                got: values.len(),
                detail: format!("{} entities x dim {}{}", self.set().total(), self.dim(), self.set().local_note()),
            });
        }
        // Every value is written: a datum the trace left stale is not
        // refused, and is the program's again once written.
        let mut v = self.0.write_with("written", false)?;
        let v = &mut v.guard;
        v.copy_from_slice(values);
        self.0.mirror.host_written();
        self.host_wrote();
        if let Some(t) = &self.0.temp {
            t.mark_written();
        }
        self.0.link.written_whole(self.0.id);
        Ok(())
    }
}

/// A dat whose values follow its set when the set is distributed.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) trait Redistribute: Send + Sync {
    /// The dat's name (for the partition's messages).
    fn name(&self) -> &str;
    fn set(&self) -> &Set;
    /// Keeps the values of entities `global`, in that order.
    fn keep(&self, global: &[usize]);
    /// The values' bytes (to send them to other ranks); `None` for a
    /// temporary never written.
    fn to_bytes(&self) -> Option<Vec<u8>>;
    /// Replaces the values with `bytes` (received from another rank);
    /// `None`: the sender's temporary was never written.
    fn replace(&self, bytes: Option<&[u8]>);
    /// A hash of the values (0 for a temporary never written): the
    /// partition compares it between ranks that each declared the mesh.
    fn values_hash(&self) -> u64;
}

impl<T: Scalar> Redistribute for DatInner<T> {
    fn name(&self) -> &str {
        &self.name
    }
    fn set(&self) -> &Set {
        &self.meta.set
    }
    fn keep(&self, global: &[usize]) {
        if self.unwritten_temporary() {
            // Nothing to keep: it allocates for the partitioned set when
            // first written.
            return;
        }
        let dim = self.meta.dim;
        let mut values = self.redistributed();
        let values = &mut *values.guard;
        let local: Vec<T> = global.iter().flat_map(|&g| values[g * dim..(g + 1) * dim].iter().copied()).collect();
        *values = crate::pages::on_huge_pages(local);
        self.mirror.forget();
    }
    fn values_hash(&self) -> u64 {
        if self.unwritten_temporary() {
            return 0;
        }
        crate::device::fnv1a(&[bytemuck::cast_slice(&self.redistributed().guard)])
    }
    fn to_bytes(&self) -> Option<Vec<u8>> {
        // (A read of an unwritten temporary is refused: it has no values.)
        if self.unwritten_temporary() {
            return None;
        }
        Some(bytemuck::cast_slice(&self.redistributed().guard).to_vec())
    }
    fn replace(&self, bytes: Option<&[u8]>) {
        let Some(bytes) = bytes else {
            // A temporary rank 0 never wrote is unwritten here too, even
            // where this rank wrote it (on its empty set): its values would
            // not fit the partitioned set.
            if let Some(t) = &self.temp {
                self.redistributed().guard.clear();
                t.mark_unwritten();
            }
            return;
        };
        let size = std::mem::size_of::<T>();
        *self.redistributed().guard = bytes.chunks_exact(size).map(bytemuck::pod_read_unaligned).collect();
        self.mirror.forget();
        // A temporary rank 0 wrote arrives written, even with no values
        // (a set empty everywhere).
        if let Some(t) = &self.temp {
            t.mark_written();
        }
    }
}

impl<T: Scalar> fmt::Debug for Dat<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Dat<{}>({} #{} on {}, dim {})", T::TYPE, self.0.name, self.0.id, self.set().name(), self.dim())
    }
}

/// Values not tied to a set: READ constants, or INC/MIN/MAX reductions.
///
/// ```
/// use parloop::{Backend, Runtime};
/// let rt = Runtime::with_backend(Backend::Seq).unwrap();
/// let rms = rt.global("rms", &[0.0f64]).unwrap();
/// rms.set_values(&[2.5]).unwrap();
/// assert_eq!(rms.value().unwrap(), 2.5);
/// ```
pub struct Global<T: Scalar>(pub(crate) Arc<GlobalInner<T>>);

/// Values of no set and no user global: a global's storage of
/// `values.len()` values (a distributed set's element numbers, see
/// `Set::global_numbers`; a dat's storage would hold its set).
pub(crate) fn table(name: &str, values: Vec<i64>) -> Arc<GlobalInner<i64>> {
    let len = values.len();
    Arc::new(Stored::new(name, values, len))
}

impl<T: Scalar> Global<T> {
    pub(crate) fn new(name: &str, values: &[T]) -> Result<Global<T>> {
        if values.is_empty() {
            return Err(Error::InvalidDeclaration {
                what: "global",
                name: name.into(),
                reason: "needs at least one value".into(),
            });
        }
        let copy = crate::fallible::copy_of(values, || format!("global `{name}`'s values ({} values)", values.len()))?;
        Ok(Global::handle(Arc::new(Stored::new(name, copy, values.len()))))
    }

    /// The global's name.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// let bounds = rt.global("bounds", &[0.0f64, 1.0])?;
    /// assert_eq!((bounds.name(), bounds.dim()), ("bounds", 2));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.0.name
    }
    /// Number of values.
    pub fn dim(&self) -> usize {
        self.0.meta
    }
    /// All values (downloaded when a device loop reduced last).
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// let bounds = rt.global("bounds", &[0.0f64, 1.0])?;
    /// assert_eq!(bounds.values()?, vec![0.0, 1.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    #[track_caller]
    pub fn values(&self) -> Result<Vec<T>> {
        crate::fallible::copy_of(&self.0.read()?.guard, || format!("a copy of global `{}`'s values", self.0.name))
    }
    /// The first value (the value of a scalar global).
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// let g = rt.global("g", &[1.5f64, 2.0])?;
    /// assert_eq!(g.value()?, 1.5);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    #[track_caller]
    pub fn value(&self) -> Result<T> {
        Ok(self.0.read()?.guard[0])
    }
    /// Replaces the values; the count must not change.
    ///
    /// With the lazy trace on, the write is recorded like a loop (after the
    /// pending loops that use the old values, before those recorded later)
    /// instead of forcing them; any host read of the global sees it.
    ///
    /// ```
    /// # let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// let dt = rt.global("dt", &[0.1f64])?;
    /// dt.set_values(&[0.05])?;
    /// assert_eq!(dt.value()?, 0.05);
    /// assert!(matches!(dt.set_values(&[0.1, 0.2]), Err(parloop::Error::WrongLength { .. })));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    #[track_caller]
    pub fn set_values(&self, values: &[T]) -> Result<()> {
        if values.len() != self.dim() {
            return Err(Error::WrongLength {
                what: "global",
                name: self.name().into(),
                expected: self.dim(),
                got: values.len(),
                detail: "its dim".into(),
            });
        }
        let bytes = bytemuck::cast_slice(values);
        if !self.0.link.record_host_write(|| self.0.clone(), self.dim(), bytes)? {
            // Every value is written: not refused when the trace left it stale.
            let mut v = self.0.write_with("written", false)?;
            // (`dim` values: checked above.)
            v.guard.copy_from_slice(values);
            self.0.mirror.host_written();
        }
        self.0.link.written_whole(self.0.id);
        Ok(())
    }
}

impl<T: Scalar> fmt::Debug for Global<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.values() {
            Ok(v) => write!(f, "Global<{}>({} = {:?})", T::TYPE, self.0.name, v),
            Err(_) => write!(f, "Global<{}>({}, values held elsewhere)", T::TYPE, self.0.name),
        }
    }
}

/// Type-erased access to a dat or global's storage, for the loop executor.
pub(crate) trait Storage: Send + Sync {
    fn id(&self) -> u64;
    fn name(&self) -> &str;
    fn elem(&self) -> ElemType;
    /// Runs the recorded loops a loop writing the values depends on (its
    /// lazy trace's), before the loop locks anything: forcing waits for
    /// the trace, which must not wait for what the loop holds.
    fn force_for_loop(&self) -> Result<()>;
    /// Locks the values for a loop (current on the host; forced first,
    /// [`Storage::force_for_loop`]) if no other thread holds them
    /// (`Some(Ok(None))` while one does: the caller backs off,
    /// [`Storage::wait_free`]); `None` when this thread's host code holds
    /// them.
    fn lock(&self) -> Option<Result<Option<LoopGuard<'_>>>>;
    /// Waits until no other thread holds the values.
    fn wait_free(&self);
    /// The address of current values on `device` (uploading stale ones);
    /// `None` when the host holds them. The values are locked only while
    /// uploading: work that writes the device copy locks them with
    /// [`Storage::lock_on_device`] instead. Inside a device loop that
    /// holds them on this thread (a halo exchange between its launches),
    /// the loop's device copy.
    fn on_device(&self, device: &Arc<dyn Device>) -> Option<Result<u64>>;
    /// [`Storage::lock`] for a device loop: the values locked as for a
    /// host loop (held until the guard drops, so that no host access
    /// comes between the upload and the loop's `device_written`, which
    /// would then discard it), but made current on `device` (uploaded
    /// when stale), not on the host; with their device address. Not
    /// forced: [`Storage::force_for_loop`] first.
    fn lock_on_device(&self, device: &Arc<dyn Device>) -> Option<Result<Option<(LoopGuard<'_>, u64)>>>;
    /// Records that a device loop wrote the values.
    fn device_written(&self);
    /// Records that a host loop wrote the values.
    fn host_written(&self);
    /// Replaces every value with `bytes` on the host, as `set_values`
    /// does (a host write the trace recorded, run when forced); `bytes`
    /// must be exactly the values' size.
    fn write_bytes(&self, bytes: &[u8]) -> Result<()>;
    /// Values will arrive over the host copy (a global's all-reduce in
    /// flight, `dist::reduce`): every later access completes it first.
    /// Called by the loop holding the values.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    fn arriving(&self, incoming: Box<dyn crate::coherence::Incoming>);
    /// The lazy trace's link.
    fn link(&self) -> &Link;
    /// What makes it a temporary, if it is one.
    fn temp(&self) -> Option<&Temp>;
}

/// The values of one dat or global, locked for the duration of a loop,
/// by element type: an enum and not a `Box<dyn ...>`, because a loop locks
/// each of its data (a box was an allocation per argument per loop, most
/// of what locking cost).
pub(crate) enum LoopGuard<'a> {
    F64(host_access::WriteGuard<'a, Vec<f64>>),
    F32(host_access::WriteGuard<'a, Vec<f32>>),
    I32(host_access::WriteGuard<'a, Vec<i32>>),
    U32(host_access::WriteGuard<'a, Vec<u32>>),
    I64(host_access::WriteGuard<'a, Vec<i64>>),
    U64(host_access::WriteGuard<'a, Vec<u64>>),
}

impl LoopGuard<'_> {
    /// Base pointer of the values.
    pub(crate) fn base(&mut self) -> *mut u8 {
        match self {
            LoopGuard::F64(g) => g.guard.as_mut_ptr().cast(),
            LoopGuard::F32(g) => g.guard.as_mut_ptr().cast(),
            LoopGuard::I32(g) => g.guard.as_mut_ptr().cast(),
            LoopGuard::U32(g) => g.guard.as_mut_ptr().cast(),
            LoopGuard::I64(g) => g.guard.as_mut_ptr().cast(),
            LoopGuard::U64(g) => g.guard.as_mut_ptr().cast(),
        }
    }
}

impl<T: Scalar, M: Send + Sync> Storage for Stored<T, M> {
    fn id(&self) -> u64 {
        self.id
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn elem(&self) -> ElemType {
        T::TYPE
    }
    fn force_for_loop(&self) -> Result<()> {
        // Loops the trace runs skip this; other users of the raw values
        // (eager loops, device products) need the recorded loops first.
        self.link.force(self.id, true, false)
    }
    fn lock(&self) -> Option<Result<Option<LoopGuard<'_>>>> {
        let Some(mut guard) = self.try_exclusive()? else { return Some(Ok(None)) };
        if let Some(t) = &self.temp {
            if let Err(e) = t.allocate(&self.name, &mut guard.guard, &self.mirror) {
                return Some(Err(e));
            }
        }
        if let Err(e) = self.mirror.refresh_host(bytemuck::cast_slice_mut(&mut guard.guard)) {
            return Some(Err(e));
        }
        Some(Ok(Some(T::loop_guard(guard))))
    }
    fn wait_free(&self) {
        host_access::wait_free(&self.values)
    }
    fn on_device(&self, device: &Arc<dyn Device>) -> Option<Result<u64>> {
        if crate::exec::held_on_device(self.id) {
            // This thread's device loop holds the values, current on its
            // device (`exec::DeviceLocked`): locking them again here would
            // be refused as a nested access.
            return Some(self.mirror.held_address(device));
        }
        if let Err(e) = self.link.force(self.id, true, false) {
            return Some(Err(e));
        }
        let mut values = self.exclusive()?;
        if let Some(t) = &self.temp {
            if let Err(e) = t.allocate_on_device(&self.name, &mut values.guard, &self.mirror, device) {
                return Some(Err(e));
            }
        }
        Some(
            self.mirror
                .on_device(device, bytemuck::cast_slice_mut(&mut values.guard))
                .map_err(|e| e.out_of_memory_for(|| format!("the values of `{}`", self.name))),
        )
    }
    fn lock_on_device(&self, device: &Arc<dyn Device>) -> Option<Result<Option<(LoopGuard<'_>, u64)>>> {
        let Some(mut values) = self.try_exclusive()? else { return Some(Ok(None)) };
        if let Some(t) = &self.temp {
            if let Err(e) = t.allocate_on_device(&self.name, &mut values.guard, &self.mirror, device) {
                return Some(Err(e));
            }
        }
        Some(
            self.mirror
                .on_device(device, bytemuck::cast_slice_mut(&mut values.guard))
                .map_err(|e| e.out_of_memory_for(|| format!("the values of `{}`", self.name)))
                .map(|addr| Some((T::loop_guard(values), addr))),
        )
    }
    fn device_written(&self) {
        self.mirror.device_written();
    }
    fn host_written(&self) {
        self.mirror.host_written();
    }
    fn write_bytes(&self, bytes: &[u8]) -> Result<()> {
        let mut values = self.write("written")?;
        let target: &mut [u8] = bytemuck::cast_slice_mut(&mut values.guard);
        if target.len() != bytes.len() {
            return Err(Error::WrongLength {
                what: "values",
                name: self.name.clone(),
                expected: target.len() / std::mem::size_of::<T>(),
                got: bytes.len() / std::mem::size_of::<T>(),
                detail: "its size".into(),
            });
        }
        target.copy_from_slice(bytes);
        self.mirror.host_written();
        Ok(())
    }
    fn arriving(&self, incoming: Box<dyn crate::coherence::Incoming>) {
        self.mirror.arriving(incoming);
    }
    fn link(&self) -> &Link {
        &self.link
    }
    fn temp(&self) -> Option<&Temp> {
        self.temp.as_deref()
    }
}

impl<T: Scalar, M> Drop for Stored<T, M> {
    /// A temporary's memory goes back to its runtime's pool, or is freed
    /// for an unpooled one (the trace holds temporaries strongly, so no
    /// pending loop uses it now).
    fn drop(&mut self) {
        if let Some(t) = self.temp.take() {
            let values = std::mem::take(self.values.get_mut().unwrap_or_else(|e| e.into_inner()));
            t.release(values, self.mirror.take());
        }
    }
}

impl<T: Scalar> Dat<T> {
    /// A handle on `inner` (counted: see `trace::Link::handle_gone`).
    pub(crate) fn handle(inner: Arc<DatInner<T>>) -> Dat<T> {
        inner.link.handle_made();
        Dat(inner)
    }
}

impl<T: Scalar> Global<T> {
    /// A handle on `inner` (counted, as [`Dat::handle`]).
    pub(crate) fn handle(inner: Arc<GlobalInner<T>>) -> Global<T> {
        inner.link.handle_made();
        Global(inner)
    }
}

impl<T: Scalar> Clone for Dat<T> {
    fn clone(&self) -> Self {
        Dat::handle(self.0.clone())
    }
}

impl<T: Scalar> Clone for Global<T> {
    fn clone(&self) -> Self {
        Global::handle(self.0.clone())
    }
}

impl<T: Scalar> Drop for Dat<T> {
    /// The last handle going: loops recorded with this dat run now
    /// (seed 003: the trace keeps no dat alive; see `trace::Link::dropped`).
    fn drop(&mut self) {
        self.0.link.handle_gone(self.0.id, || self.0.clone());
    }
}

impl<T: Scalar> Drop for Global<T> {
    /// As for dats.
    fn drop(&mut self) {
        self.0.link.handle_gone(self.0.id, || self.0.clone());
    }
}
