//! Non-blocking all-reduces of globals (issue 15: "reductions begin after
//! the owned section and end when the global is read").
//!
//! A loop that reduces globals on a distributed set ends by starting an
//! `MPI_Iallreduce` of the rank's partial values ([`start`]; one for its
//! globals of each element type and operation) and leaves each global's
//! part *arriving* in its host copy (`coherence::MirrorSlot::arriving`).
//! The next access to the global (a loop that uses it, a host read or
//! write, an upload to a device, the global's drop) completes it first, so
//! nothing ever sees a partial value, and the network time overlaps
//! whatever runs in between: the loops after it (the airfoil's next sweep)
//! or the host's own work. `PARLOOP_OVERLAP=0` completes every all-reduce
//! at once (the blocking behaviour, for comparison).
//!
//! All ranks start their all-reduces in loop order, the same on every
//! rank, so the collectives match (MPI orders blocking and non-blocking
//! collectives on a communicator by when they start); a rank completing
//! one later than another is allowed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::traits::Equivalence;

use super::Comm;
use crate::coherence::Incoming;
use crate::exec::{combine, Reduction};
use crate::types::{Access, ElemType};

/// What a communicator's all-reduces did, for [`crate::ReductionStats`].
#[derive(Default)]
pub(crate) struct Counters {
    started: AtomicU64,
    ready: AtomicU64,
    waited_ns: AtomicU64,
}

impl Counters {
    pub(crate) fn stats(&self) -> crate::distribution::ReductionStats {
        crate::distribution::ReductionStats {
            started: self.started.load(Ordering::Relaxed),
            ready_when_needed: self.ready.load(Ordering::Relaxed),
            wait_seconds: self.waited_ns.load(Ordering::Relaxed) as f64 * 1e-9,
        }
    }
}

/// One all-reduce in flight: the values of a loop's globals of one
/// element type and operation, one message for all of them (as blocking
/// all-reduces were grouped), shared by the globals' [`Share`]s.
struct Group {
    comm: Arc<Comm>,
    request: ffi::MPI_Request,
    /// The ranks' partial values, one global after another: MPI reads
    /// them until the request completes (heap memory: it does not move).
    send: Vec<u64>,
    /// Where the reduced values land.
    recv: Vec<u64>,
    /// Whether `request` has completed.
    done: bool,
}

// SAFETY: the request is a handle MPI only touches inside the calls made
// with the communicator's lock held (`Comm`'s rule: one thread in MPI at a
// time); the buffers are owned heap memory.
unsafe impl Send for Group {}

impl Group {
    /// Waits for the request (once).
    fn wait(&mut self) {
        if self.done {
            return;
        }
        let c = self.comm.lock();
        let started = Instant::now();
        let mut flag = 0;
        // SAFETY: `request` is an active request of this communicator;
        // MPI is entered with the communicator's lock held.
        unsafe { ffi::MPI_Test(&mut self.request, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
        let ready = flag != 0;
        if !ready {
            // SAFETY: as above; `send` and `recv` outlive the wait.
            unsafe {
                super::wait::complete_all(std::slice::from_mut(&mut self.request), super::wait::Waiting::Reduction)
            };
        }
        drop(c);
        self.done = true;
        let counters = &self.comm.reductions;
        counters.waited_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if ready {
            counters.ready.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Group {
    /// Globals dropped (or a run ending) with their all-reduce in flight:
    /// MPI still writes `recv`, so the request completes before the
    /// buffers go.
    fn drop(&mut self) {
        self.wait();
    }
}

/// One global's part of a [`Group`]: what its next access completes.
struct Share {
    group: Arc<std::sync::Mutex<Group>>,
    /// Where its values sit in the group's buffers, in bytes.
    at: usize,
    elem: ElemType,
    dim: usize,
    /// INC: the global's values before the loop (the ranks reduce from
    /// zero), added to the sum.
    initial: Option<Vec<u64>>,
}

impl Incoming for Share {
    fn complete(self: Box<Self>, host: &mut [u8]) {
        let bytes = self.dim * self.elem.size();
        {
            let mut group = crate::sync::lock(&self.group);
            group.wait();
            let reduced: &[u8] = bytemuck::cast_slice(&group.recv);
            host[..bytes].copy_from_slice(&reduced[self.at..self.at + bytes]);
        }
        if let Some(initial) = &self.initial {
            // SAFETY: `host` and `initial` hold `dim` values of `elem`.
            unsafe { combine(self.elem, Access::Inc, host.as_mut_ptr(), initial.as_ptr().cast(), self.dim) };
        }
    }
}

/// A loop's reductions by kind (element type and operation), in a fixed
/// order: one all-reduce each ([`start`]).
pub(crate) fn by_kind(reductions: &[Reduction]) -> Vec<(ElemType, Access, Vec<&Reduction>)> {
    let mut kinds: Vec<(ElemType, Access)> = reductions.iter().map(|r| (r.elem, r.access)).collect();
    kinds.sort_by_key(|&(e, a)| (e as u8, a as u8));
    kinds.dedup();
    kinds
        .into_iter()
        .map(|(elem, access)| {
            (elem, access, reductions.iter().filter(|r| (r.elem, r.access) == (elem, access)).collect())
        })
        .collect()
}

/// A global's part of an all-reduce: its rank's partial values (`dim` of
/// the group's element type) and, for INC, its values before the loop.
pub(crate) struct Part<'a> {
    pub partial: &'a [u8],
    pub dim: usize,
    pub initial: Option<Vec<u64>>,
}

/// Starts one all-reduce (`access`: INC sums, MIN, MAX) of the `parts`,
/// globals whose values are all of `elem` (their partials read now), and
/// returns what each global's next access completes, in order. With
/// `blocking`, it completes before returning (`PARLOOP_OVERLAP=0`).
/// The total count is at most `i32::MAX` values (`distributed_begin`
/// checks).
pub(crate) fn start(
    comm: &Arc<Comm>,
    elem: ElemType,
    access: Access,
    parts: Vec<Part<'_>>,
    blocking: bool,
) -> Vec<Box<dyn Incoming>> {
    fn datatype<T: Equivalence>() -> ffi::MPI_Datatype {
        T::equivalent_datatype().as_raw()
    }
    let values: usize = parts.iter().map(|p| p.dim).sum();
    let total = values * elem.size();
    let mut send = vec![0u64; total.div_ceil(8)];
    let mut at = 0;
    {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut send);
        for p in &parts {
            let n = p.dim * elem.size();
            bytes[at..at + n].copy_from_slice(&p.partial[..n]);
            at += n;
        }
    }
    let recv = vec![0u64; send.len()];
    let datatype = match elem {
        ElemType::F64 => datatype::<f64>(),
        ElemType::F32 => datatype::<f32>(),
        ElemType::I32 => datatype::<i32>(),
        ElemType::U32 => datatype::<u32>(),
        ElemType::I64 => datatype::<i64>(),
        ElemType::U64 => datatype::<u64>(),
    };
    let op = match access {
        Access::Min => SystemOperation::min(),
        Access::Max => SystemOperation::max(),
        _ => SystemOperation::sum(),
    };
    let mut group = Group {
        comm: comm.clone(),
        // SAFETY: a constant handle, overwritten by MPI_Iallreduce.
        request: unsafe { ffi::RSMPI_REQUEST_NULL },
        send,
        recv,
        done: false,
    };
    {
        let c = comm.lock();
        // SAFETY: `send` and `recv` hold `values` values of `elem` (the
        // datatype) and stay allocated, unmoved, until the request
        // completes (`Group` waits before dropping them); MPI is entered
        // with the communicator's lock held. `values` fits in an `i32`
        // (see above).
        unsafe {
            ffi::MPI_Iallreduce(
                group.send.as_ptr().cast(),
                group.recv.as_mut_ptr().cast(),
                values as i32,
                datatype,
                op.as_raw(),
                c.as_raw(),
                &mut group.request,
            )
        };
    }
    comm.reductions.started.fetch_add(1, Ordering::Relaxed);
    if blocking {
        group.wait();
    }
    let group = Arc::new(std::sync::Mutex::new(group));
    let mut shares = Vec::with_capacity(parts.len());
    let mut at = 0;
    for p in parts {
        shares.push(
            Box::new(Share { group: group.clone(), at, elem, dim: p.dim, initial: p.initial }) as Box<dyn Incoming>
        );
        at += p.dim * elem.size();
    }
    shares
}
