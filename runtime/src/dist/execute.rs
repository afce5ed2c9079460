//! The MPI side of the [`Distribution`] seam (seed 004): a loop on a
//! distributed set exchanges the stale halos it reads while its core
//! section runs, reduces globals across ranks, and marks the halos it
//! writes stale.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::messages::{exchange, HaloDat, Layout};
use super::{reduce, HaloTraffic, Mpi};
use crate::arg::Arg;
use crate::decl::{Map, Redistribute, Set};
use crate::device::Device;
use crate::distribution::{Begun, Distribution};
use crate::error::{Error, Result};
use crate::exec::{LockedArgs, Reduction};
use crate::kernel::Kernel;
use crate::profile::Range;
use crate::sync::lock;
use crate::types::Access;
use crate::views::ArgView;

/// `PARLOOP_CHECK_RANKS`: the globals loop `n` reads, and the starting
/// values of those it reduces (INC, MIN, MAX), hold the same values on
/// every rank (one set by a host write on one rank only gives each rank
/// its own result, silently: a reduction's start is part of its result).
/// Each global that differs is named, with this rank's values.
fn globals_agree(comm: &super::Comm, n: u64, kernel: &Kernel, args: &[Arg], views: &[ArgView]) -> Result<()> {
    for (a, v) in args.iter().zip(views) {
        let reduced = matches!(a.access, Access::Inc | Access::Min | Access::Max);
        if !a.is_global() || !(a.access == Access::READ || reduced) || v.data.is_null() {
            continue;
        }
        // SAFETY: a global's view holds its `dim` values (`bytes_per_entity`
        // bytes), and the loop holds it locked while it begins (before INC
        // globals are zeroed for the ranks' partial sums).
        let bytes = unsafe { std::slice::from_raw_parts(v.data, a.bytes_per_entity()) };
        if !comm.agree(crate::device::fnv1a(&[bytes])) {
            let (kernel, global, values) = (kernel.name(), a.data_name(), show_values(a.storage.elem(), bytes));
            return Err(comm.error(if reduced {
                format!(
                    "PARLOOP_CHECK_RANKS: loop {n} (`{kernel}`) reduces global `{global}` ({}) from starting values \
                     that differ between ranks (a host write on some ranks only?); the starting value is part of \
                     the result, so the result would depend on the rank; this rank's: {values}",
                    a.access.name()
                )
            } else {
                format!(
                    "PARLOOP_CHECK_RANKS: loop {n} (`{kernel}`) reads global `{global}` with values that differ \
                     between ranks (a host write on some ranks only?); this rank's: {values}"
                )
            }));
        }
    }
    Ok(())
}

/// The first values of `bytes` (of type `elem`), for a message.
fn show_values(elem: crate::types::ElemType, bytes: &[u8]) -> String {
    use crate::types::ElemType as E;
    let word = |c: &[u8]| -> String {
        match elem {
            E::F64 => f64::from_ne_bytes(c.try_into().unwrap_or_default()).to_string(),
            E::I64 => i64::from_ne_bytes(c.try_into().unwrap_or_default()).to_string(),
            E::U64 => u64::from_ne_bytes(c.try_into().unwrap_or_default()).to_string(),
            E::F32 => f32::from_ne_bytes(c.try_into().unwrap_or_default()).to_string(),
            E::I32 => i32::from_ne_bytes(c.try_into().unwrap_or_default()).to_string(),
            E::U32 => u32::from_ne_bytes(c.try_into().unwrap_or_default()).to_string(),
        }
    };
    let chunks = bytes.chunks_exact(elem.size());
    let more = if chunks.len() > 8 { ", ..." } else { "" };
    format!("[{}{more}]", chunks.take(8).map(word).collect::<Vec<_>>().join(", "))
}

/// The dats of an exchange, for profiling ranges: `q+adt`.
pub(crate) fn label(args: &[Arg], dats: &[HaloDat]) -> String {
    dats.iter().map(|d| args[d.arg].data_name()).collect::<Vec<_>>().join("+")
}

/// What `begin` sets aside for `end`: the initial values of INC globals
/// (the ranks reduce from zero), by argument.
struct Initial(Vec<(usize, Vec<u64>)>);

impl Mpi {
    /// Before a loop: the rank check, and INC globals set to zero so that
    /// the ranks' partials can be summed. `None` for a loop every rank runs
    /// whole (its set is not distributed).
    fn distributed_begin(
        &self,
        kernel: &Kernel,
        set: &Set,
        args: &[Arg],
        views: &[ArgView],
        reductions: &[Reduction],
    ) -> Result<Option<Begun>> {
        let n = self.loops.fetch_add(1, Ordering::Relaxed);
        let Some(comm) = &self.comm else { return Ok(None) };
        // Only loops over distributed sets are compared: one over a set no
        // partition distributed may run on some ranks alone (serial work on
        // rank-local data), and a comparison there, a collective, would
        // wait for ranks that never come.
        if self.check_ranks && set.is_distributed() {
            let mut desc = format!("{}/{}", kernel.name(), set.name());
            for a in args {
                desc.push_str(&format!(
                    "/{}:{:?}:{}:{}",
                    a.data_name(),
                    a.access,
                    a.map().map_or("", |m| m.name()),
                    a.dim
                ));
            }
            if !comm.agree(crate::device::fnv1a(&[desc.as_bytes()])) {
                return Err(
                    comm.error(format!("PARLOOP_CHECK_RANKS: loop {n} differs between ranks; this rank runs `{desc}`"))
                );
            }
            globals_agree(comm, n, kernel, args, views)?;
        }
        if !set.is_distributed() {
            return Ok(None);
        }
        // One all-reduce carries a loop's globals of one kind (`reduce`),
        // at most `i32::MAX` values.
        for (_, _, group) in reduce::by_kind(reductions) {
            let values: usize = group.iter().map(|r| r.dim).sum();
            if i32::try_from(values).is_err() {
                return Err(comm.error(format!(
                    "loop `{}`: global `{}` is reduced with {values} values of its kind; an all-reduce carries at most {}",
                    kernel.name(),
                    args[group[0].arg].data_name(),
                    i32::MAX
                )));
            }
        }
        let mut initial = Vec::new();
        for r in reductions.iter().filter(|r| r.access == Access::Inc) {
            let mut words = vec![0u64; r.words()];
            // SAFETY: the global's view holds `dim` values of `elem`; zero
            // bits are zero in every element type.
            unsafe {
                r.copy_current(views, &mut words);
                std::ptr::write_bytes(views[r.arg].data, 0, r.dim * r.elem.size());
            }
            initial.push((r.arg, words));
        }
        Ok(Some(Box::new(Initial(initial))))
    }

    /// The dats a loop must refresh before its owned section: read through
    /// a map, or read directly where the exec halo runs, with a stale halo;
    /// each once, in argument order.
    pub(crate) fn stale_reads(&self, set: &Set, args: &[Arg], exec_halo: bool) -> Vec<HaloDat> {
        let mut dats: Vec<HaloDat> = Vec::new();
        if self.comm.is_none() || !set.is_distributed() {
            return dats;
        }
        let stale = lock(&self.stale);
        let halos = lock(&self.halos);
        for (i, a) in args.iter().enumerate() {
            let reads = matches!(a.access, Access::Read | Access::ReadWrite);
            let Some(on) = &a.set else { continue };
            if !reads || !(a.is_indirect() || exec_halo) || !stale.contains(&a.data_id()) {
                continue;
            }
            if dats.iter().any(|d| args[d.arg].data_id() == a.data_id()) {
                continue;
            }
            if let Some(halo) = halos.get(&on.id()) {
                dats.push(HaloDat { arg: i, halo: halo.clone(), bytes_per_entity: a.bytes_per_entity() });
            }
        }
        dats
    }

    /// Marks the refreshed dats' halos clean and totals the traffic.
    pub(crate) fn refreshed(&self, args: &[Arg], dats: &[HaloDat], messages: usize, wait: Duration) -> HaloTraffic {
        let mut stale = lock(&self.stale);
        let mut traffic = HaloTraffic { messages: messages as u64, wait, ..Default::default() };
        for d in dats {
            stale.remove(&args[d.arg].data_id());
            let sent = d.halo.exports.iter().map(|(_, l)| l.len() * d.bytes_per_entity).sum::<usize>();
            traffic.bytes.push((args[d.arg].data_name().to_owned(), sent as u64));
        }
        traffic
    }

    /// Runs `core` (the core section) while the stale halos the loop reads
    /// are exchanged: one message per neighbour rank carrying every such
    /// dat, packed from the export lists and received straight into the
    /// dats' halo tails. With `PARLOOP_OVERLAP=0` the exchange completes
    /// first.
    fn halo_exchange(
        &self,
        set: &Set,
        args: &[Arg],
        views: &[ArgView],
        exec_halo: bool,
        core: &mut dyn FnMut(),
    ) -> Result<HaloTraffic> {
        let dats = self.stale_reads(set, args, exec_halo);
        let Some(comm) = self.comm.as_ref().filter(|_| !dats.is_empty()) else {
            core();
            return Ok(HaloTraffic::default());
        };
        let label = label(args, &dats);
        let (send, recv) = (Layout::new(&dats, true), Layout::new(&dats, false));
        let mut send_buf = vec![0u8; send.total];
        for p in &send.pieces {
            let d = &dats[p.dat];
            let _range = Range::lazy(|| format!("halo/{}/pack", args[d.arg].data_name()));
            let bpe = d.bytes_per_entity;
            for (k, &l) in p.list.iter().enumerate() {
                // SAFETY: export indices are owned entities of the dat's
                // set, inside the locked values; the buffer holds the piece.
                unsafe {
                    let src = views[d.arg].data.add(l as usize * bpe);
                    std::ptr::copy_nonoverlapping(src, send_buf.as_mut_ptr().add(p.at + k * bpe), bpe);
                }
            }
        }
        // SAFETY: both buffers hold their layouts and live past the call.
        let wait = unsafe {
            exchange(
                comm,
                (send_buf.as_ptr(), &send.slots),
                &recv.landing_in_halos(&dats, &dats.iter().map(|d| views[d.arg].data).collect::<Vec<_>>()),
                !self.no_overlap,
                &label,
                || {
                    core();
                    Ok(())
                },
            )?
        };
        Ok(self.refreshed(args, &dats, send.slots.len(), wait))
    }

    /// After a loop: globals' all-reduces across ranks started (INC
    /// partials summed and added to the initial values when they
    /// complete, at the global's next use: `reduce`) and the written dats'
    /// halos marked stale. `outcome`: the loop's on this rank, agreed
    /// between the ranks first where the kernel may panic. A loop that
    /// failed (here, or anywhere when agreed) still runs its all-reduces
    /// (the other ranks take part in them), completes them now and drops
    /// them; its INC globals get their values from before the loop back.
    /// Returns the loop's outcome, an error on every rank when agreed.
    fn distributed_end(
        &self,
        begun: Option<Begun>,
        kernel: &Kernel,
        args: &[Arg],
        views: &[ArgView],
        reductions: &[Reduction],
        outcome: Result<()>,
    ) -> Result<()> {
        let (Some(comm), Some(initial)) = (&self.comm, begun.and_then(|b| b.downcast::<Initial>().ok())) else {
            return outcome;
        };
        // A kernel panic depends on the rank's elements: the ranks agree
        // (one all-reduce) before reducing, so that all discard or all
        // keep the loop's reductions, and all return an error.
        let failed =
            if kernel.may_panic() && comm.size() > 1 { !comm.all_ok(outcome.is_ok()) } else { outcome.is_err() };
        let mut initial = initial.0;
        let kept = if failed { initial.clone() } else { Vec::new() };
        // One all-reduce per element type and operation, for all the
        // loop's globals of that kind together.
        for (elem, access, group) in reduce::by_kind(reductions) {
            let parts = group
                .iter()
                .map(|r| reduce::Part {
                    // SAFETY: the global's view holds `dim` values of
                    // `elem`, and the loop holds them exclusively.
                    partial: unsafe { std::slice::from_raw_parts(views[r.arg].data, r.dim * elem.size()) },
                    dim: r.dim,
                    initial: initial.iter().position(|(a, _)| *a == r.arg).map(|i| initial.swap_remove(i).1),
                })
                .collect();
            let incoming = reduce::start(comm, elem, access, parts, self.no_overlap || failed);
            if failed {
                continue;
            }
            for (r, incoming) in group.iter().zip(incoming) {
                if self.no_overlap {
                    // SAFETY: as above, now written.
                    incoming
                        .complete(unsafe { std::slice::from_raw_parts_mut(views[r.arg].data, r.dim * elem.size()) });
                } else {
                    args[r.arg].storage.arriving(incoming);
                }
            }
        }
        self.mark_written(args);
        if !failed {
            return outcome;
        }
        // INC globals were zeroed for the ranks' partials: their values
        // from before the loop.
        for (arg, words) in &kept {
            if let Some(r) = reductions.iter().find(|r| r.arg == *arg) {
                // SAFETY: the global's view holds `dim` values of `elem`,
                // and the loop holds them exclusively.
                unsafe { r.restore(views, words) };
            }
        }
        match outcome {
            Ok(()) => Err(comm.failed_elsewhere(Ok(()), &format!("loop `{}`", kernel.name()))),
            err => err,
        }
    }

    /// The halos of the dats `args` write are stale.
    fn mark_written(&self, args: &[Arg]) {
        let mut stale = lock(&self.stale);
        for a in args.iter().filter(|a| a.access.writes() && !a.is_global()) {
            if a.set.as_ref().is_some_and(|s| s.is_distributed()) {
                stale.insert(a.data_id());
            }
        }
    }

    /// The start of a library operation `op` (not a loop) over `set`: the
    /// rank check of `PARLOOP_CHECK_RANKS`, and counted as a loop (a
    /// partition must come first).
    fn library_op(&self, op: &str, set: &Set) -> Result<()> {
        if let Some(comm) = self.comm.as_ref().filter(|_| set.is_distributed()) {
            // Pending loops first: this communicates outside the trace
            // (an operation on undistributed data does not, and may run on
            // one rank alone).
            comm.before_collective()?;
        }
        let n = self.loops.fetch_add(1, Ordering::Relaxed);
        // As for loops: operations on undistributed data may run on some
        // ranks alone, and are not compared.
        if let Some(comm) = self.comm.as_ref().filter(|_| self.check_ranks && set.is_distributed()) {
            let desc = format!("{op}/{}", set.name());
            if !comm.agree(crate::device::fnv1a(&[desc.as_bytes()])) {
                return Err(comm.error(format!(
                    "PARLOOP_CHECK_RANKS: operation {n} differs between ranks; this rank runs `{desc}`"
                )));
            }
        }
        Ok(())
    }
}

impl Distribution for Mpi {
    fn rank(&self) -> usize {
        self.comm.as_ref().map_or(0, |c| c.rank())
    }

    fn ranks(&self) -> usize {
        self.comm.as_ref().map_or(1, |c| c.size())
    }

    fn collective(&self) -> bool {
        self.comm.is_some()
    }

    fn fail(&self, err: Error) -> Error {
        if let Some(c) = self.comm.as_ref().filter(|c| c.size() > 1) {
            c.abort(&err);
        }
        err
    }

    fn declared_set(&self, set: &Set) {
        lock(&self.declared).sets.push(std::sync::Arc::downgrade(&set.0));
    }

    fn declared_map(&self, map: &Map) {
        lock(&self.declared).maps.push(std::sync::Arc::downgrade(&map.0));
    }

    fn declared_dat(&self, dat: std::sync::Weak<dyn Redistribute>) {
        lock(&self.declared).dats.push(dat);
    }

    fn declared_subset(&self, subset: std::sync::Weak<crate::decl::SubsetInner>) {
        lock(&self.declared).subsets.push(subset);
    }

    fn begin(
        &self,
        kernel: &Kernel,
        set: &Set,
        args: &[Arg],
        views: &[ArgView],
        reductions: &[Reduction],
    ) -> Result<Option<Begun>> {
        self.distributed_begin(kernel, set, args, views, reductions)
    }

    fn exchange(
        &self,
        set: &Set,
        args: &[Arg],
        views: &[ArgView],
        exec_halo: bool,
        core: &mut dyn FnMut(),
    ) -> Result<HaloTraffic> {
        self.halo_exchange(set, args, views, exec_halo, core)
    }

    fn reduction_stats(&self) -> crate::distribution::ReductionStats {
        self.comm.as_ref().map(|c| c.reductions.stats()).unwrap_or_default()
    }

    fn end(
        &self,
        begun: Option<Begun>,
        kernel: &Kernel,
        args: &[Arg],
        views: &[ArgView],
        reductions: &[Reduction],
        outcome: Result<()>,
    ) -> Result<()> {
        self.distributed_end(begun, kernel, args, views, reductions, outcome)
    }

    /// Reduced globals go through the host around a device loop's
    /// launches: INC ones start from zero here, and `end_device`
    /// all-reduces them and adds the initial values back.
    fn begin_device(&self, kernel: &Kernel, set: &Set, args: &[Arg]) -> Result<Option<Begun>> {
        let reductions = Reduction::of(args);
        let begun = {
            let mut globals = LockedArgs::new();
            globals.lock_where(kernel.name(), args, Arg::is_global)?;
            self.distributed_begin(kernel, set, args, &globals.views, &reductions)?
        };
        if begun.is_some() {
            for r in reductions.iter().filter(|r| r.access == Access::Inc) {
                args[r.arg].storage.host_written();
            }
        }
        Ok(begun)
    }

    fn exchange_device(
        &self,
        device: &Arc<dyn Device>,
        set: &Set,
        args: &[Arg],
        exec_halo: bool,
        core: &mut dyn FnMut() -> Result<()>,
    ) -> Result<HaloTraffic> {
        self.device_halo_exchange(device, set, args, exec_halo, core)
    }

    fn end_device(&self, begun: Option<Begun>, kernel: &Kernel, args: &[Arg], outcome: Result<()>) -> Result<()> {
        if begun.is_none() {
            return outcome;
        }
        let reductions = Reduction::of(args);
        let mut globals = LockedArgs::new();
        globals.lock_where(kernel.name(), args, Arg::is_global)?;
        let outcome = self.distributed_end(begun, kernel, args, &globals.views, &reductions, outcome);
        globals.release();
        for r in &reductions {
            args[r.arg].storage.host_written();
        }
        outcome
    }

    fn refresh(&self, op: &str, args: &[Arg], views: &[ArgView], core: &mut dyn FnMut()) -> Result<HaloTraffic> {
        let Some(set) = args.iter().find_map(|a| a.set.clone()) else {
            core();
            return Ok(HaloTraffic::default());
        };
        self.library_op(op, &set)?;
        // As a loop running its exec halo: direct reads refresh too.
        self.halo_exchange(&set, args, views, true, core)
    }

    fn refresh_device(&self, device: &Arc<dyn Device>, op: &str, args: &[Arg]) -> Result<HaloTraffic> {
        let Some(set) = args.iter().find_map(|a| a.set.clone()) else { return Ok(HaloTraffic::default()) };
        self.library_op(op, &set)?;
        self.device_halo_exchange(device, &set, args, true, &mut || Ok(()))
    }

    fn written(&self, args: &[Arg]) {
        self.mark_written(args);
    }

    fn sum_over_ranks(&self, set: &Set, values: &mut [f64]) -> Result<()> {
        match &self.comm {
            Some(comm) if set.is_distributed() => {
                comm.before_collective()?;
                comm.sum(values);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn halo_stale(&self, set: &Set, id: u64) -> Option<bool> {
        if self.comm.is_none() || !set.is_distributed() || !lock(&self.halos).contains_key(&set.id()) {
            return None;
        }
        Some(lock(&self.stale).contains(&id))
    }

    fn set_flush(&self, flush: crate::dist::Flush) {
        if let Some(comm) = &self.comm {
            comm.set_flush(flush);
        }
    }

    fn local_rank(&self) -> usize {
        use mpi::topology::Communicator;
        self.comm.as_ref().map_or(0, |comm| {
            let c = comm.lock();
            c.split_shared(c.rank()).rank() as usize
        })
    }
}
