//! A loop on a distributed set (seed 004): exchange the stale halos it
//! reads while the core section runs, reduce globals across ranks, and
//! mark the halos it writes stale.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::messages::{exchange, HaloDat, Layout};
use super::{all_reduce, HaloTraffic};
use crate::arg::Arg;
use crate::backend::device::{DeviceLoop, Launcher};
use crate::backend::threads::combine;
use crate::decl::Set;
use crate::device::Device;
use crate::error::Result;
use crate::exec::{lock_args_where, Reduction};
use crate::kernel::{ArgView, Kernel};
use crate::profile::Range;
use crate::runtime::Runtime;
use crate::types::Access;

/// The dats of an exchange, for profiling ranges: `q+adt`.
pub(crate) fn label(args: &[Arg], dats: &[HaloDat]) -> String {
    dats.iter().map(|d| args[d.arg].data_name()).collect::<Vec<_>>().join("+")
}

/// What `distributed_begin` set aside for `distributed_end`.
pub(crate) struct Begun {
    /// Initial values of INC globals (the loop reduces from zero).
    initial: Vec<(usize, Vec<u64>)>,
}

impl Runtime {
    /// Before a loop: the rank check, and INC globals set to zero so that
    /// the ranks' partials can be summed. `None` for a loop every rank runs
    /// whole (its set is not distributed).
    pub(crate) fn distributed_begin(
        &self,
        kernel: &Kernel,
        set: &Set,
        args: &[Arg],
        views: &[ArgView],
        reductions: &[Reduction],
    ) -> Result<Option<Begun>> {
        let n = self.dist.loops.fetch_add(1, Ordering::Relaxed);
        let Some(comm) = &self.dist.comm else { return Ok(None) };
        if self.dist.check_ranks {
            let mut desc = format!("{}/{}", kernel.name(), set.name());
            for a in args {
                desc.push_str(&format!("/{}:{:?}:{}", a.data_name(), a.access, a.map().map_or("", |m| m.name())));
            }
            if !comm.agree(crate::device::fnv1a(&[desc.as_bytes()])) {
                return Err(
                    comm.error(format!("PARLOOP_CHECK_RANKS: loop {n} differs between ranks; this rank runs `{desc}`"))
                );
            }
        }
        if !set.is_distributed() {
            return Ok(None);
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
        Ok(Some(Begun { initial }))
    }

    /// The dats a loop must refresh before its owned section: read through
    /// a map, or read directly where the exec halo runs, with a stale halo;
    /// each once, in argument order.
    pub(crate) fn stale_reads(&self, set: &Set, args: &[Arg], exec_halo: bool) -> Vec<HaloDat> {
        let mut dats: Vec<HaloDat> = Vec::new();
        if self.dist.comm.is_none() || !set.is_distributed() {
            return dats;
        }
        let stale = self.dist.stale.lock().unwrap_or_else(|e| e.into_inner());
        let halos = self.dist.halos.lock().unwrap_or_else(|e| e.into_inner());
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
        let mut stale = self.dist.stale.lock().unwrap_or_else(|e| e.into_inner());
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
    pub(crate) fn halo_exchange(
        &self,
        set: &Set,
        args: &[Arg],
        views: &[ArgView],
        exec_halo: bool,
        core: impl FnOnce(),
    ) -> Result<HaloTraffic> {
        let dats = self.stale_reads(set, args, exec_halo);
        let Some(comm) = self.dist.comm.as_ref().filter(|_| !dats.is_empty()) else {
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
                !self.dist.no_overlap,
                &label,
                || {
                    core();
                    Ok(())
                },
            )?
        };
        Ok(self.refreshed(args, &dats, send.slots.len(), wait))
    }

    /// A loop on a device under MPI: reduced globals go through the host
    /// around the launches (INC ones from zero, then all-reduced), and the
    /// stale halos are exchanged on the device while the core section runs.
    pub(crate) fn device_loop(
        &self,
        device: &Arc<dyn Device>,
        prepared: &DeviceLoop,
        kernel: &Kernel,
        set: &Set,
        args: &[Arg],
        exec_halo: bool,
    ) -> Result<HaloTraffic> {
        let reductions = Reduction::of(args);
        let begun = {
            let globals = lock_args_where(kernel.name(), args, Arg::is_global)?;
            self.distributed_begin(kernel, set, args, &globals.views, &reductions)?
        };
        if begun.is_some() {
            for r in reductions.iter().filter(|r| r.access == Access::Inc) {
                args[r.arg].storage.host_written();
            }
        }
        let mut launcher = Launcher::new(device, prepared, kernel.name(), args)?;
        let traffic = self.device_halo_exchange(device, set, args, exec_halo, || launcher.core())?;
        launcher.rest()?;
        if begun.is_some() {
            let globals = lock_args_where(kernel.name(), args, Arg::is_global)?;
            self.distributed_end(begun, args, &globals.views, &reductions);
            drop(globals);
            for r in &reductions {
                args[r.arg].storage.host_written();
            }
        }
        Ok(traffic)
    }

    /// After a loop: globals reduced across ranks (INC partials added to
    /// the initial values) and the written dats' halos marked stale.
    pub(crate) fn distributed_end(
        &self,
        begun: Option<Begun>,
        args: &[Arg],
        views: &[ArgView],
        reductions: &[Reduction],
    ) {
        let (Some(comm), Some(begun)) = (&self.dist.comm, begun) else { return };
        // One all-reduce per element type and operation, for all the
        // loop's globals of that kind together.
        let mut kinds: Vec<(crate::types::ElemType, Access)> = reductions.iter().map(|r| (r.elem, r.access)).collect();
        kinds.sort_by_key(|&(e, a)| (e as u8, a as u8));
        kinds.dedup();
        for (elem, access) in kinds {
            let group: Vec<&Reduction> = reductions.iter().filter(|r| (r.elem, r.access) == (elem, access)).collect();
            let values: usize = group.iter().map(|r| r.dim).sum();
            let mut words = vec![0u64; (values * elem.size()).div_ceil(8)];
            let buf = words.as_mut_ptr().cast::<u8>();
            let mut at = 0;
            for r in &group {
                let bytes = r.dim * elem.size();
                // SAFETY: the global's view holds `dim` values of `elem`;
                // `words` holds all of the group's.
                unsafe { std::ptr::copy_nonoverlapping(views[r.arg].data, buf.add(at), bytes) };
                at += bytes;
            }
            // SAFETY: `words` holds `values` aligned values of `elem`.
            unsafe { all_reduce(comm, elem, access, buf, values) };
            let mut at = 0;
            for r in &group {
                let bytes = r.dim * elem.size();
                // SAFETY: as above.
                unsafe { std::ptr::copy_nonoverlapping(buf.add(at), views[r.arg].data, bytes) };
                at += bytes;
            }
        }
        for r in reductions {
            if let Some((_, initial)) = begun.initial.iter().find(|(a, _)| *a == r.arg) {
                // SAFETY: both hold `dim` values of `elem`.
                unsafe { combine(r.elem, Access::Inc, views[r.arg].data, initial.as_ptr().cast(), r.dim) };
            }
        }
        let mut stale = self.dist.stale.lock().unwrap_or_else(|e| e.into_inner());
        for a in args.iter().filter(|a| a.access.writes() && !a.is_global()) {
            if a.set.as_ref().is_some_and(|s| s.is_distributed()) {
                stale.insert(a.data_id());
            }
        }
    }
}
