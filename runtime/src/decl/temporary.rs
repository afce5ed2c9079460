//! Temporaries (seed 000's `LazyMalloc`/`LazyFree`, issue 15): dats whose
//! memory exists only between their first write and their last use.
//!
//! A temporary is a [`Dat`] made by [`Runtime::temporary`]. It holds no
//! memory until it is first written (by a loop or `set_values`); the
//! allocation happens when that write *runs* (in `Storage::lock` /
//! `Storage::on_device`, or the host write), so with the lazy trace on a
//! recorded loop allocates nothing until it is forced. Its memory goes
//! back when the dat itself goes: when the user's last handle is dropped
//! and no pending loop uses it (the trace holds temporaries strongly, so
//! "the last read has run" is exactly "the last `Arc` is gone"). The
//! buffer, with its device mirror, returns to the runtime's [`Pool`], keyed
//! by (element type, length, device), and the next temporary of that
//! shape takes it instead of allocating ([`TraceStats::temporaries_reused`]);
//! the runtime's own unpooled temporaries (`Runtime::unpooled_temporary`)
//! free it instead.
//!
//! Whether a temporary has been written is known in program order (when
//! `par_loop` records or runs the loop, or `set_values` runs), so reading
//! one that was never written is refused at once, in both modes, with
//! [`Error::UnwrittenTemporary`]: a pooled buffer holds another
//! temporary's values, and a fresh one zeros, neither of which a program
//! may see. The first write must therefore cover every entity: a direct
//! `WRITE` argument of a loop over the temporary's set, or `set_values`.
//!
//! [`TraceStats::temporaries_reused`]: crate::TraceStats::temporaries_reused

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::data::{DatMeta, Stored};
use super::{checked_len, Dat, Set};
use crate::arg::ArgKind;
use crate::coherence::{Mirror, MirrorSlot};
use crate::error::{Error, Result};
use crate::par_loop::ParLoop;
use crate::runtime::Runtime;
use crate::sync::lock;
use crate::trace::Link;
use crate::types::{Access, Scalar};

/// What the pool keys buffers by: element type, number of values, and
/// the device the mirror lives on (0: none, a host backend).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct Key {
    ty: TypeId,
    len: usize,
    device: usize,
}

/// A released temporary's memory: its host values and device mirror.
struct Buffer<T> {
    values: Vec<T>,
    mirror: Option<Mirror>,
}

/// Takes a pooled buffer's memory: its device mirror, and its host values
/// when they have the length wanted (a device-only buffer has none).
fn adopt<T>(buffer: Buffer<T>, len: usize, values: &mut Vec<T>, mirror: &MirrorSlot) {
    if let Some(m) = buffer.mirror {
        mirror.put(m);
    }
    if buffer.values.len() == len {
        *values = buffer.values;
    }
}

/// Buffer sizes (element type, length, device) a pool keeps at most: a
/// time step's temporaries come in a few sizes, while a program whose sets
/// change size (an adaptive remesh) releases buffers of a new size each
/// time, none of which would be taken again; the pool kept them all for
/// the runtime's life (100 KB a step in a probe). Past this, the sizes
/// used least recently go (a step cycling through more sizes than this
/// would reuse none: far more than a time step's temporaries take).
const POOL_SIZES: usize = 64;

/// A runtime's free temporary buffers.
#[derive(Default)]
pub(crate) struct Pool {
    free: Mutex<Free>,
    reused: AtomicU64,
}

/// Free buffers by size, each size with when it was last released or
/// taken (a count of those events).
#[derive(Default)]
struct Free {
    by_key: HashMap<Key, (u64, Vec<Box<dyn Any + Send>>)>,
    clock: u64,
}

impl Free {
    /// A buffer of size `key`, if one is free.
    fn take(&mut self, key: &Key) -> Option<Box<dyn Any + Send>> {
        self.clock += 1;
        let (used, buffers) = self.by_key.get_mut(key)?;
        *used = self.clock;
        buffers.pop()
    }

    /// Keeps `buffer` of size `key`; returns the buffers of the size used
    /// least recently when there are too many sizes (for the caller to
    /// drop after letting go of the lock: a device buffer's drop frees
    /// device memory).
    fn put(&mut self, key: Key, buffer: Box<dyn Any + Send>) -> Vec<Box<dyn Any + Send>> {
        self.clock += 1;
        let entry = self.by_key.entry(key).or_default();
        entry.0 = self.clock;
        entry.1.push(buffer);
        if self.by_key.len() <= POOL_SIZES {
            return Vec::new();
        }
        let oldest = self.by_key.iter().min_by_key(|(_, (used, _))| *used).map(|(k, _)| *k);
        oldest.and_then(|k| self.by_key.remove(&k)).map_or_else(Vec::new, |(_, b)| b)
    }
}

impl Pool {
    /// Temporaries that took a released buffer instead of allocating.
    pub(crate) fn reused(&self) -> u64 {
        self.reused.load(Ordering::Relaxed)
    }

    /// Released buffers it holds.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        lock(&self.free).by_key.values().map(|(_, b)| b.len()).sum()
    }
}

/// What makes a dat a temporary.
pub(crate) struct Temp {
    pool: Arc<Pool>,
    /// The runtime's device (its address; 0 on a host backend).
    device: usize,
    /// Values per entity (the length is the set's, when allocated: under
    /// MPI the partition changes it).
    dim: usize,
    set: Set,
    /// Written, in program order (a loop writing it was recorded or run,
    /// or `set_values` ran).
    written: AtomicBool,
    /// Whether its memory goes back to the pool when it is dropped (the
    /// runtime's own large temporaries, the device assembly's element
    /// matrices, free theirs instead: a pool keeps what it holds for the
    /// runtime's life).
    pooled: bool,
}

impl Temp {
    fn key<T: 'static>(&self, len: usize) -> Key {
        Key { ty: TypeId::of::<T>(), len, device: self.device }
    }

    /// Gives `values` (empty while unallocated) its memory, a pooled
    /// buffer of the same shape when there is one (with its device mirror,
    /// put into `mirror`).
    /// An allocation that fails is [`Error::OutOfMemory`] naming the
    /// temporary (`name`), never an abort.
    pub(crate) fn allocate<T: Scalar>(&self, name: &str, values: &mut Vec<T>, mirror: &MirrorSlot) -> Result<()> {
        // (The product fits: `Runtime::temporary` checked the bytes.)
        let len = self.set.total() * self.dim;
        if values.len() == len {
            return Ok(());
        }
        // A temporary with device memory only (`allocate_on_device`) keeps
        // it: its values may be there.
        if !mirror.holds_buffer() {
            if let Some(b) = self.pooled::<T>(len) {
                adopt(*b, len, values, mirror);
            }
        }
        if values.len() != len {
            let mut fresh = Vec::new();
            fresh.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
                what: format!(
                    "temporary `{name}` ({} entities of set `{}` x dim {})",
                    self.set.total(),
                    self.set.name(),
                    self.dim
                ),
                bytes: len.saturating_mul(std::mem::size_of::<T>()),
            })?;
            fresh.resize(len, T::default());
            *values = crate::pages::on_huge_pages(fresh);
        }
        Ok(())
    }

    /// A released buffer of `len` values, if the pool has one.
    fn pooled<T: Scalar>(&self, len: usize) -> Option<Box<Buffer<T>>> {
        let pooled = lock(&self.pool.free).take(&self.key::<T>(len))?;
        let b = pooled.downcast::<Buffer<T>>().ok()?;
        self.pool.reused.fetch_add(1, Ordering::Relaxed);
        Some(b)
    }

    /// Gives an unallocated temporary memory on `device` for a device
    /// loop or product: a pooled buffer, else device memory alone. The
    /// host copy is allocated only when the host needs the values (a host
    /// read or write, or a host loop: `allocate`), then downloaded: a
    /// device-only temporary (the device assembly's element matrices)
    /// never costs host memory, a host fill or an upload.
    pub(crate) fn allocate_on_device<T: Scalar>(
        &self,
        name: &str,
        values: &mut Vec<T>,
        mirror: &MirrorSlot,
        device: &Arc<dyn crate::device::Device>,
    ) -> Result<()> {
        let len = self.set.total() * self.dim;
        if values.len() == len || mirror.holds_buffer() {
            return Ok(());
        }
        // Another device than the runtime's (never in practice): the host path.
        if Arc::as_ptr(device) as *const () as usize != self.device {
            return self.allocate(name, values, mirror);
        }
        if let Some(b) = self.pooled::<T>(len) {
            adopt(*b, len, values, mirror);
            if values.len() == len || mirror.holds_buffer() {
                return Ok(());
            }
        }
        mirror
            .allocate_on_device(device, len * std::mem::size_of::<T>())
            .map_err(|e| e.out_of_memory_for(|| format!("temporary `{name}` on set `{}`", self.set.name())))
    }

    /// Returns a dropped temporary's memory to the pool: its host values,
    /// its device copy, or both.
    pub(crate) fn release<T: Scalar>(&self, values: Vec<T>, mirror: Option<Mirror>) {
        if !self.pooled {
            return;
        }
        let len = match (&mirror, values.len()) {
            (_, n) if n > 0 => n,
            (Some(m), _) => m.buf.bytes / std::mem::size_of::<T>(),
            (None, _) => return,
        };
        let key = self.key::<T>(len);
        let buffer: Box<dyn Any + Send> = Box::new(Buffer { values, mirror });
        let evicted = lock(&self.pool.free).put(key, buffer);
        drop(evicted);
    }

    /// Whether it has been written (in program order).
    pub(crate) fn written(&self) -> bool {
        self.written.load(Ordering::Relaxed)
    }

    /// Records a write (after `set_values`, or a loop writing it recorded or run).
    pub(crate) fn mark_written(&self) {
        self.written.store(true, Ordering::Relaxed);
    }

    /// Forgets a write whose values a partition did not keep.
    pub(crate) fn mark_unwritten(&self) {
        self.written.store(false, Ordering::Relaxed);
    }

    /// Refuses a host read of an unwritten temporary.
    pub(crate) fn check_read(&self, name: &str, by: &str) -> Result<()> {
        if self.written() {
            return Ok(());
        }
        Err(Error::UnwrittenTemporary { name: name.into(), by: by.into() })
    }
}

/// Refuses a loop that reads a temporary never written, or whose first
/// write might not cover every entity (anything but a direct `WRITE`).
#[inline]
pub(crate) fn check_loop(lp: &ParLoop) -> Result<()> {
    if !lp.has_temporaries() {
        return Ok(());
    }
    for (i, a) in lp.args().iter().enumerate() {
        let Some(t) = a.storage.temp() else { continue };
        if t.written() || (a.access == Access::Write && matches!(a.kind, ArgKind::Direct)) {
            continue;
        }
        let (kernel, set) = (lp.kernel().name(), lp.set().name());
        let by = if a.access != Access::Write {
            format!("loop `{kernel}` over `{set}`, argument {i} ({:?}), reads it", a.access)
        } else if lp.set().is_subset_iteration() {
            format!("loop `{kernel}` over subset `{set}`, argument {i} (Write), writes only the subset's entities")
        } else {
            format!("loop `{kernel}` over `{set}`, argument {i} (Write through a map), may not write every entity")
        };
        return Err(Error::UnwrittenTemporary { name: a.storage.name().into(), by });
    }
    Ok(())
}

/// After `lp` was recorded or ran: the temporaries it writes are written.
#[inline]
pub(crate) fn mark_loop(lp: &ParLoop) {
    if !lp.has_temporaries() {
        return;
    }
    for a in lp.args() {
        if let Some(t) = a.storage.temp() {
            if a.access.writes() {
                t.mark_written();
            }
        }
    }
}

impl Runtime {
    /// Declares a temporary: a dat of `dim` values per entity of `set`
    /// whose memory is allocated when it is first written and returned to
    /// the runtime's pool when it is dropped and no pending loop uses it
    /// (seed 000's `LazyMalloc`/`LazyFree`). The next temporary of the
    /// same type, length and device takes that buffer instead of
    /// allocating ([`TraceStats::temporaries_reused`](crate::TraceStats::temporaries_reused)),
    /// so a time step that makes its temporaries afresh allocates only in
    /// its first step.
    ///
    /// Its first write must cover every entity: `set_values`, or a loop
    /// with a direct `WRITE` argument on it. Anything that reads it before
    /// (a loop's READ, RW or INC argument, `values`, `with_values_mut`) is
    /// an [`Error::UnwrittenTemporary`] naming it, never zeros or stale
    /// values. It takes `name`, or a free variant (`t1~2`) while a live
    /// dat, global or temporary holds it, so every time step may call its
    /// temporary `t1` and every message still names one object.
    ///
    /// ```
    /// use parloop::{Access, Backend, Runtime};
    /// #[parloop::kernel] fn zero(t: &mut f64) { *t = 0.0; }
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// let s = rt.set("s", 4)?;
    /// for _ in 0..2 {
    ///     let t = rt.temporary::<f64>("t", &s, 1)?;
    ///     assert!(t.values().is_err()); // not written yet
    ///     rt.par_loop(zero::KERNEL, &s, &[t.arg(Access::WRITE)])?;
    ///     assert_eq!(t.values()?, vec![0.0; 4]);
    /// } // dropped: its buffer goes back to the pool
    /// assert_eq!(rt.trace_stats().temporaries_reused, 1);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn temporary<T: Scalar>(&self, name: &str, set: &Set, dim: usize) -> Result<Dat<T>> {
        self.new_temporary(name, set, dim, true)
    }

    /// A temporary whose memory is freed when it is dropped rather than
    /// pooled: for the runtime's own large, long-lived temporaries (the
    /// device assembly's element matrices, which live as long as their
    /// matrix's pattern), which a pool would otherwise hold for the
    /// runtime's life.
    pub(crate) fn unpooled_temporary<T: Scalar>(&self, name: &str, set: &Set, dim: usize) -> Result<Dat<T>> {
        self.new_temporary(name, set, dim, false)
    }

    fn new_temporary<T: Scalar>(&self, name: &str, set: &Set, dim: usize, pooled: bool) -> Result<Dat<T>> {
        if dim == 0 {
            return Err(Error::InvalidDeclaration {
                what: "temporary",
                name: name.into(),
                reason: "dim must be at least 1".into(),
            });
        }
        checked_len("temporary", name, set.total(), dim, "dim", std::mem::size_of::<T>())?;
        let device = self.device().map_or(0, |d| Arc::as_ptr(d) as *const () as usize);
        let temp = Temp {
            pool: self.temporaries.clone(),
            device,
            dim,
            set: set.clone(),
            written: AtomicBool::new(false),
            pooled,
        };
        let make = |chosen: &str| {
            Ok(Dat::handle(Arc::new(Stored {
                id: super::next_id(),
                name: chosen.into(),
                values: RwLock::new(Vec::new()),
                mirror: MirrorSlot::default(),
                meta: DatMeta { set: set.clone(), dim },
                link: Link::default(),
                temp: Some(Box::new(temp)),
            })))
        };
        let dat = self.names.declare_temporary(name, make, |d| &d.0)?;
        self.dist.declared_dat(Arc::downgrade(&dat.0) as _);
        Ok(dat)
    }
}

#[cfg(test)]
mod tests {
    use super::POOL_SIZES;
    use crate::{Backend, Runtime};

    /// A program whose set changes size each step (an adaptive remesh)
    /// releases a temporary of a new size each time: the pool kept them
    /// all. It keeps the sizes used last, and still reuses a recurring one.
    #[test]
    fn the_pool_keeps_a_bounded_number_of_sizes() {
        let rt = Runtime::with_backend(Backend::Seq).unwrap();
        let recurring = rt.set("recurring", 5).unwrap();
        for step in 0..4 * POOL_SIZES {
            let s = rt.set("s", 10 + step).unwrap();
            let t = rt.temporary::<f64>("t", &s, 2).unwrap();
            t.set_values(&vec![1.0; 2 * (10 + step)]).unwrap();
            let r = rt.temporary::<f64>("r", &recurring, 1).unwrap();
            r.set_values(&[2.0; 5]).unwrap();
            drop((t, r));
            assert!(rt.temporaries.held() <= POOL_SIZES, "step {step}: {}", rt.temporaries.held());
        }
        // Every step after the first took the recurring size's buffer.
        assert_eq!(rt.trace_stats().temporaries_reused, 4 * POOL_SIZES as u64 - 1);
    }
}
