//! A loop on a distributed set (seed 004): exchange the stale halos it
//! reads while the core section runs, reduce globals across ranks, and
//! mark the halos it writes stale.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use mpi::traits::*;

use super::{all_reduce, HaloTraffic};
use crate::arg::Arg;
use crate::backend::threads::combine;
use crate::decl::Set;
use crate::error::Result;
use crate::exec::Reduction;
use crate::kernel::{ArgView, Kernel};
use crate::runtime::Runtime;
use crate::types::Access;

/// Message tag of halo exchanges on parloop's own communicator.
const HALO_TAG: i32 = 17;

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

    /// Runs `core` (the core section) while the stale halos the loop reads
    /// are exchanged, then unpacks them: one message per neighbour rank
    /// carrying every such dat. With `PARLOOP_OVERLAP=0` the exchange
    /// completes first.
    pub(crate) fn halo_exchange(
        &self,
        set: &Set,
        args: &[Arg],
        views: &[ArgView],
        exec_halo: bool,
        core: impl FnOnce(),
    ) -> Result<HaloTraffic> {
        let mut traffic = HaloTraffic::default();
        let Some(comm) = &self.dist.comm else {
            core();
            return Ok(traffic);
        };
        if !set.is_distributed() {
            core();
            return Ok(traffic);
        }
        // The dats to refresh: read through a map, or read directly where
        // the exec halo runs, with a stale halo; each once.
        let mut dats: Vec<(usize, std::sync::Arc<super::Halo>, usize)> = Vec::new();
        {
            let stale = self.dist.stale.lock().unwrap_or_else(|e| e.into_inner());
            let halos = self.dist.halos.lock().unwrap_or_else(|e| e.into_inner());
            for (i, a) in args.iter().enumerate() {
                let reads = matches!(a.access, Access::Read | Access::ReadWrite);
                let Some(on) = &a.set else { continue };
                if !reads || !(a.is_indirect() || exec_halo) || !stale.contains(&a.data_id()) {
                    continue;
                }
                if dats.iter().any(|&(j, _, _)| args[j].data_id() == a.data_id()) {
                    continue;
                }
                if let Some(h) = halos.get(&on.id()) {
                    dats.push((i, h.clone(), a.bytes_per_entity()));
                }
            }
        }
        if dats.is_empty() {
            core();
            return Ok(traffic);
        }
        let mut sends: BTreeMap<usize, Vec<u8>> = BTreeMap::new();
        let mut recvs: BTreeMap<usize, Vec<u8>> = BTreeMap::new();
        for &(i, ref halo, bpe) in &dats {
            let mut sent = 0u64;
            for (q, list) in &halo.exports {
                let buf = sends.entry(*q).or_default();
                for &l in list {
                    // SAFETY: export indices are owned entities of the
                    // dat's set, inside the locked values.
                    let src = unsafe { std::slice::from_raw_parts(views[i].data.add(l as usize * bpe), bpe) };
                    buf.extend_from_slice(src);
                }
                sent += (list.len() * bpe) as u64;
            }
            for (q, list) in &halo.imports {
                let buf = recvs.entry(*q).or_default();
                buf.resize(buf.len() + list.len() * bpe, 0);
            }
            traffic.bytes.push((args[i].data_name().to_owned(), sent));
        }
        traffic.messages = sends.values().filter(|b| !b.is_empty()).count() as u64;
        {
            let c = comm.lock();
            let mut core = Some(core);
            mpi::request::scope(|scope| {
                let mut requests = Vec::new();
                for (q, buf) in recvs.iter_mut().filter(|(_, b)| !b.is_empty()) {
                    requests.push(c.process_at_rank(*q as i32).immediate_receive_into_with_tag(
                        scope,
                        &mut buf[..],
                        HALO_TAG,
                    ));
                }
                let mut sent = Vec::new();
                for (q, buf) in sends.iter().filter(|(_, b)| !b.is_empty()) {
                    sent.push(c.process_at_rank(*q as i32).immediate_send_with_tag(scope, &buf[..], HALO_TAG));
                }
                if !self.dist.no_overlap {
                    (core.take().expect("once"))();
                }
                let wait = Instant::now();
                for r in requests {
                    r.wait();
                }
                for r in sent {
                    r.wait();
                }
                traffic.wait = wait.elapsed();
            });
            if let Some(core) = core {
                core();
            }
        }
        let mut offsets: BTreeMap<usize, usize> = BTreeMap::new();
        for &(i, ref halo, bpe) in &dats {
            for (q, list) in &halo.imports {
                let buf = &recvs[q];
                let off = offsets.entry(*q).or_default();
                for &l in list {
                    // SAFETY: import indices are halo entities of the dat's
                    // set, inside the locked values; the message holds them.
                    unsafe {
                        std::ptr::copy_nonoverlapping(buf[*off..].as_ptr(), views[i].data.add(l as usize * bpe), bpe);
                    }
                    *off += bpe;
                }
            }
        }
        let mut stale = self.dist.stale.lock().unwrap_or_else(|e| e.into_inner());
        for &(i, _, _) in &dats {
            stale.remove(&args[i].data_id());
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
        for r in reductions {
            // SAFETY: the global's view holds `dim` values of `elem`.
            unsafe { all_reduce(comm, r.elem, r.access, views[r.arg].data, r.dim) };
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
