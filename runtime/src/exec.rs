//! Locking a loop's data and describing it to the host adapter as raw views.
//!
//! This module and `backend::threads` are where raw pointers are made and
//! shared; everything else handles typed, safe objects.

use std::borrow::Borrow;

use crate::arg::{Arg, ArgKind};
use crate::decl::{LoopGuard, Storage};
use crate::error::{Error, Result};
use crate::types::{Access, ElemType, Scalar};
use crate::views::{ArgView, ViewKind};
use smallvec::SmallVec;

/// Arguments a loop has without its views spilling to the heap: locking
/// runs once per loop, and a loop of a time step that costs little (the
/// trace's replays, small sets) should not pay an allocation per vector.
const INLINE_ARGS: usize = 8;

/// A loop's data, locked for the duration of the loop, and its views.
pub(crate) struct LockedArgs<'a> {
    /// Keeps the locks (one per distinct dat or global).
    guards: SmallVec<[LoopGuard<'a>; INLINE_ARGS]>,
    /// One view per argument.
    pub views: SmallVec<[ArgView; INLINE_ARGS]>,
}

impl<'a> LockedArgs<'a> {
    /// Nothing locked yet: [`LockedArgs::lock`] fills it in place (a
    /// loop's views and guards are a kilobyte inline; returning them in a
    /// `Result` copied them twice per loop, a tenth of a small loop's host
    /// cost).
    pub fn new() -> LockedArgs<'a> {
        LockedArgs { guards: SmallVec::new(), views: SmallVec::new() }
    }

    /// Lets go of every datum (the views' pointers dangle from here on),
    /// in place: dropping the whole moved it first.
    pub fn release(&mut self) {
        self.guards.clear();
    }

    /// Locks every distinct dat and global of `args` (arguments, or
    /// references to them: a fused launch's come from several loops) and
    /// builds their views.
    pub fn lock<A: Borrow<Arg>>(&mut self, kernel: &str, args: &'a [A]) -> Result<()> {
        self.lock_where(kernel, args, |_| true)
    }

    /// Locks the distinct dats and globals of the arguments `pick`
    /// selects; the others' views have no data (a null pointer).
    pub fn lock_where<A: Borrow<Arg>>(
        &mut self,
        kernel: &str,
        args: &'a [A],
        pick: impl Fn(&Arg) -> bool,
    ) -> Result<()> {
        self.guards.clear();
        self.views.clear();
        // A fused launch's arguments spill: one allocation, not a regrowth
        // (and copy) per doubling.
        self.views.reserve(args.len());
        for arg in args {
            self.views.push(view_without_data(arg.borrow()));
        }
        // The distinct data, locked in one order (by id) and all or none:
        // a datum another thread holds makes the loop let go of what it
        // took and wait for it, then start again, so that two loops (or a
        // loop and a product) on one datum pair, or a loop and a host
        // access that nests another, never each hold what the other waits
        // for.
        let mut order: SmallVec<[&'a Arg; INLINE_ARGS]> = SmallVec::new();
        for arg in args {
            let arg: &'a Arg = arg.borrow();
            if pick(arg) && !order.iter().any(|a| a.data_id() == arg.data_id()) {
                order.push(arg);
            }
        }
        order.sort_unstable_by_key(|a| a.data_id());
        'all: loop {
            self.guards.clear();
            // The recorded loops first, holding nothing (again after
            // backing off: other threads may have recorded more meanwhile).
            for arg in &order {
                arg.storage.force_for_loop()?;
            }
            for &arg in &order {
                let busy = || Error::Busy { kernel: kernel.into(), dat: arg.data_name().into() };
                let Some(mut guard) = arg.storage.lock().ok_or_else(busy)?? else {
                    self.guards.clear();
                    arg.storage.wait_free();
                    continue 'all;
                };
                let base = guard.base();
                for (view, a) in self.views.iter_mut().zip(args) {
                    let a: &Arg = a.borrow();
                    if a.data_id() == arg.data_id() && pick(a) {
                        view.data = base;
                    }
                }
                self.guards.push(guard);
            }
            return Ok(());
        }
    }
}

thread_local! {
    /// The data this thread's device work holds ([`DeviceLocked`]).
    static ON_DEVICE: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether this thread's device work ([`DeviceLocked`]) holds datum `id`.
pub(crate) fn held_on_device(id: u64) -> bool {
    ON_DEVICE.with(|h| h.borrow().contains(&id))
}

/// Data locked for work on a device (a device loop, a matrix scatter, a
/// product) from their upload until its writes are recorded
/// (`Storage::device_written`): the exclusion [`LockedArgs`] gives a host
/// loop. Holding them only while uploading let a host write land while
/// the kernel ran; the loop then marked the device copy newer and the
/// host write was lost. Now a host access comes wholly before (and is
/// uploaded) or wholly after (and downloads the loop's result).
pub(crate) struct DeviceLocked<'a> {
    /// Hold the values until the work's writes are recorded.
    _guards: SmallVec<[LoopGuard<'a>; INLINE_ARGS]>,
    /// (datum id, device address) of each locked datum.
    addrs: SmallVec<[(u64, u64); INLINE_ARGS]>,
}

impl<'a> DeviceLocked<'a> {
    /// Locks the distinct `data` (for `what`, named in errors) and makes
    /// them current on `device`: in one order (by id), all or none, as
    /// [`LockedArgs::lock_where`] does and for the same reason.
    pub fn lock(
        what: &str,
        device: &std::sync::Arc<dyn crate::device::Device>,
        data: impl IntoIterator<Item = &'a dyn Storage>,
    ) -> Result<DeviceLocked<'a>> {
        let mut order: SmallVec<[&'a dyn Storage; INLINE_ARGS]> = SmallVec::new();
        for d in data {
            if !order.iter().any(|o| o.id() == d.id()) {
                order.push(d);
            }
        }
        order.sort_unstable_by_key(|d| d.id());
        let (mut guards, mut addrs) = (SmallVec::new(), SmallVec::new());
        'all: loop {
            guards.clear();
            addrs.clear();
            for d in &order {
                d.force_for_loop()?;
            }
            for &d in &order {
                let busy = || Error::Busy { kernel: what.into(), dat: d.name().into() };
                let Some((guard, addr)) = d.lock_on_device(device).ok_or_else(busy)?? else {
                    guards.clear();
                    d.wait_free();
                    continue 'all;
                };
                guards.push(guard);
                addrs.push((d.id(), addr));
            }
            ON_DEVICE.with(|h| h.borrow_mut().extend(order.iter().map(|d| d.id())));
            return Ok(DeviceLocked { _guards: guards, addrs });
        }
    }

    /// The device address of locked datum `id`.
    pub fn addr(&self, id: u64) -> u64 {
        self.addrs.iter().find(|&&(d, _)| d == id).expect("a datum locked here").1
    }
}

impl Drop for DeviceLocked<'_> {
    fn drop(&mut self) {
        ON_DEVICE.with(|h| {
            let mut h = h.borrow_mut();
            for &(id, _) in &self.addrs {
                if let Some(k) = h.iter().rposition(|&i| i == id) {
                    h.remove(k);
                }
            }
        });
    }
}

/// `arg`'s view with no data yet (a null pointer): `LockedArgs::lock_where` fills
/// in the locked values' address.
fn view_without_data(arg: &Arg) -> ArgView {
    let mut ext: *const () = std::ptr::null();
    let (kind, map, arity, column) = match &arg.kind {
        ArgKind::Direct => (ViewKind::Direct, std::ptr::null(), 0, 0),
        ArgKind::Mat(m) => {
            ext = std::sync::Arc::as_ptr(m).cast();
            (ViewKind::Matrix, m.row_map.values().as_ptr(), m.row_map.arity(), 0)
        }
        ArgKind::Index => {
            // Distributed sets keep each local entity's global number.
            if let Some(local) = arg.set.as_ref().and_then(|s| s.0.local.get()) {
                ext = local.global.as_ptr().cast();
            }
            (ViewKind::Index, std::ptr::null(), 0, 0)
        }
        ArgKind::Indirect { map, column } => (ViewKind::Indirect, map.values().as_ptr(), map.arity(), *column),
        ArgKind::Vector { map } => (ViewKind::Vector, map.values().as_ptr(), map.arity(), 0),
        ArgKind::Global => (ViewKind::Global, std::ptr::null(), 0, 0),
    };
    let data = std::ptr::null_mut();
    ArgView { data, dim: arg.dim, map, arity, column, kind, access: arg.access, ext, slot_mask: 0 }
}

/// Accumulators of a host partial sum (of one chunk, block or range): the
/// host adapters add element `e`'s increments of a global into accumulator
/// `e % INC_SLOTS`, and the accumulators are added into the global in
/// order. One accumulator would chain every element's add on the one
/// before (a store-to-load round trip each, about ten cycles: a dot of two
/// million entries took twice as long as an axpy); eight independent
/// chains run at the memory's pace. The order depends on the element
/// numbers and the backend's items only, so results are the same run to
/// run and for any thread count.
pub(crate) const INC_SLOTS: usize = 8;

/// The most values a global summed into [`INC_SLOTS`] accumulators has
/// (64 bytes of `f64`): a larger one (a histogram, say) keeps one
/// accumulator, so that its partials, one per chunk or block, do not grow
/// eightfold; its elements mostly add to different values, which do not
/// chain anyway.
pub(crate) const INC_SLOTS_MAX_DIM: usize = 8;

/// A global reduced by a loop: which argument, its type, size and operation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reduction {
    pub arg: usize,
    pub elem: ElemType,
    pub dim: usize,
    pub access: Access,
}

impl Reduction {
    /// The reductions of a loop's arguments.
    pub fn of<A: Borrow<Arg>>(args: &[A]) -> Vec<Reduction> {
        args.iter()
            .map(Borrow::borrow)
            .enumerate()
            .filter(|(_, a)| a.is_global() && a.access.is_reduction())
            .map(|(i, a)| Reduction { arg: i, elem: a.storage.elem(), dim: a.dim, access: a.access })
            .collect()
    }

    /// 8-byte words the global's values take.
    pub fn words(&self) -> usize {
        (self.dim * self.elem.size()).div_ceil(8)
    }

    /// Accumulators of one host partial result: [`INC_SLOTS`] for a sum of
    /// at most [`INC_SLOTS_MAX_DIM`] values, one for a larger sum and for a
    /// minimum or maximum (exact in any order).
    pub fn slots(&self) -> usize {
        if self.access == Access::Inc && self.dim <= INC_SLOTS_MAX_DIM {
            INC_SLOTS
        } else {
            1
        }
    }

    /// 8-byte words one host partial result takes: its accumulators of
    /// `dim` values each, packed.
    pub fn partial_words(&self) -> usize {
        (self.slots() * self.dim * self.elem.size()).div_ceil(8)
    }

    /// Starts a host partial result (`partial_words` long): zero
    /// accumulators for a sum, the global's current values for a minimum
    /// or maximum.
    ///
    /// # Safety
    /// As [`Reduction::copy_current`].
    pub unsafe fn start_partial(&self, views: &[ArgView], partial: &mut [u64]) {
        if self.access == Access::Inc {
            partial.fill(0);
        } else {
            // SAFETY: forwarded contract.
            unsafe { self.copy_current(views, partial) };
        }
    }

    /// Points the loop's view of the global at a host partial result
    /// started by [`Reduction::start_partial`].
    pub fn bind_partial(&self, views: &mut [ArgView], partial: *mut u64) {
        views[self.arg].data = partial.cast();
        views[self.arg].slot_mask = self.slots() - 1;
    }

    /// Adds (or takes the minimum or maximum of) a host partial result into
    /// the global through its view, accumulator after accumulator.
    ///
    /// # Safety
    /// `views[self.arg]` points to the global's values, locked for writing;
    /// `partial` holds `partial_words` words.
    pub unsafe fn combine_partial(&self, views: &[ArgView], partial: *const u64) {
        let stride = self.dim * self.elem.size();
        for k in 0..self.slots() {
            // SAFETY: forwarded contract; accumulator `k` lies in the partial.
            unsafe {
                combine(self.elem, self.access, views[self.arg].data, partial.cast::<u8>().add(k * stride), self.dim)
            };
        }
    }

    /// Copies the global's current values (through its view) into `dst`.
    ///
    /// # Safety
    /// `views[self.arg]` points to the global's `dim` values of `elem`.
    pub unsafe fn copy_current(&self, views: &[ArgView], dst: &mut [u64]) {
        let bytes = self.dim * self.elem.size();
        assert!(dst.len() * 8 >= bytes, "a partial holds the global");
        // SAFETY: forwarded contract; `dst` holds at least `bytes`.
        unsafe { std::ptr::copy_nonoverlapping(views[self.arg].data, dst.as_mut_ptr().cast(), bytes) };
    }

    /// Puts values saved by [`Reduction::copy_current`] back into the global.
    ///
    /// # Safety
    /// As [`Reduction::copy_current`]; the global is locked for writing.
    pub unsafe fn restore(&self, views: &[ArgView], src: &[u64]) {
        let bytes = self.dim * self.elem.size();
        assert!(src.len() * 8 >= bytes, "a partial holds the global");
        // SAFETY: forwarded contract; `src` holds at least `bytes`.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().cast(), views[self.arg].data, bytes) };
    }
}

/// Combines one partial result into another, as reductions do:
/// `dst[k] = dst[k] (+ | min | max) src[k]` for `dim` values of `elem`.
///
/// # Safety
/// Both pointers hold `dim` aligned values of `elem`.
pub(crate) unsafe fn combine(elem: ElemType, access: Access, dst: *mut u8, src: *const u8, dim: usize) {
    unsafe fn typed<T: Scalar>(access: Access, dst: *mut u8, src: *const u8, dim: usize) {
        for k in 0..dim {
            // SAFETY: forwarded contract.
            unsafe {
                let d = dst.cast::<T>().add(k);
                let s = *src.cast::<T>().add(k);
                *d = match access {
                    Access::Min => (*d).min_of(s),
                    Access::Max => (*d).max_of(s),
                    _ => (*d).inc(s),
                };
            }
        }
    }
    // SAFETY: forwarded contract.
    unsafe {
        match elem {
            ElemType::F64 => typed::<f64>(access, dst, src, dim),
            ElemType::F32 => typed::<f32>(access, dst, src, dim),
            ElemType::I32 => typed::<i32>(access, dst, src, dim),
            ElemType::U32 => typed::<u32>(access, dst, src, dim),
            ElemType::I64 => typed::<i64>(access, dst, src, dim),
            ElemType::U64 => typed::<u64>(access, dst, src, dim),
        }
    }
}
