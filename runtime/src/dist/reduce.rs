//! Non-blocking all-reduces of globals (issue 15: "reductions begin after
//! the owned section and end when the global is read").
//!
//! A loop that reduces a global on a distributed set ends by starting an
//! `MPI_Iallreduce` of the rank's partial values ([`start`]) and leaves it
//! *arriving* in the global's host copy (`coherence::MirrorSlot::arriving`).
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
use crate::exec::combine;
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

/// One global's all-reduce in flight.
struct Reducing {
    comm: Arc<Comm>,
    request: ffi::MPI_Request,
    /// The rank's partial values: MPI reads them until the request
    /// completes (heap memory: it does not move with `Reducing`).
    send: Vec<u64>,
    /// Where the reduced values land.
    recv: Vec<u64>,
    /// Bytes of values (`dim` values of `elem`).
    bytes: usize,
    elem: ElemType,
    dim: usize,
    /// INC: the global's values before the loop (the ranks reduce from
    /// zero), added to the sum.
    initial: Option<Vec<u64>>,
    /// Whether `request` has completed.
    done: bool,
}

// SAFETY: the request is a handle MPI only touches inside the calls made
// with the communicator's lock held (`Comm`'s rule: one thread in MPI at a
// time); the buffers are owned heap memory.
unsafe impl Send for Reducing {}

impl Reducing {
    /// Waits for the request (once). Returns whether it had completed
    /// before being needed.
    fn wait(&mut self) -> bool {
        if self.done {
            return true;
        }
        let c = self.comm.lock();
        let started = Instant::now();
        let mut flag = 0;
        // SAFETY: `request` is an active request of this communicator;
        // MPI is entered with the communicator's lock held.
        unsafe { ffi::MPI_Test(&mut self.request, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
        let ready = flag != 0;
        if !ready {
            // SAFETY: as above.
            unsafe { ffi::MPI_Wait(&mut self.request, ffi::RSMPI_STATUS_IGNORE) };
        }
        drop(c);
        self.done = true;
        let counters = &self.comm.reductions;
        counters.waited_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if ready {
            counters.ready.fetch_add(1, Ordering::Relaxed);
        }
        ready
    }
}

impl Incoming for Reducing {
    fn complete(mut self: Box<Self>, host: &mut [u8]) {
        self.wait();
        let reduced: &[u8] = bytemuck::cast_slice(&self.recv);
        host[..self.bytes].copy_from_slice(&reduced[..self.bytes]);
        if let Some(initial) = &self.initial {
            // SAFETY: `host` and `initial` hold `dim` values of `elem`.
            unsafe { combine(self.elem, Access::Inc, host.as_mut_ptr(), initial.as_ptr().cast(), self.dim) };
        }
    }
}

impl Drop for Reducing {
    /// A global dropped (or a run ending) with its all-reduce in flight:
    /// MPI still writes `recv`, so the request completes before the
    /// buffers go.
    fn drop(&mut self) {
        self.wait();
    }
}

/// Starts the all-reduce (`access`: INC sums, MIN, MAX) of `dim` values of
/// `elem` in `partial` (the rank's values, read now); `initial`: for INC,
/// the values the global held before the loop, added when it completes.
/// With `blocking`, it completes before returning (`PARLOOP_OVERLAP=0`).
pub(crate) fn start(
    comm: &Arc<Comm>,
    elem: ElemType,
    access: Access,
    partial: &[u8],
    dim: usize,
    initial: Option<Vec<u64>>,
    blocking: bool,
) -> Box<dyn Incoming> {
    fn datatype<T: Equivalence>() -> ffi::MPI_Datatype {
        T::equivalent_datatype().as_raw()
    }
    let bytes = dim * elem.size();
    let mut send = vec![0u64; bytes.div_ceil(8)];
    bytemuck::cast_slice_mut::<u64, u8>(&mut send)[..bytes].copy_from_slice(&partial[..bytes]);
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
    let mut reducing = Box::new(Reducing {
        comm: comm.clone(),
        // SAFETY: a constant handle, overwritten by MPI_Iallreduce.
        request: unsafe { ffi::RSMPI_REQUEST_NULL },
        send,
        recv,
        bytes,
        elem,
        dim,
        initial,
        done: false,
    });
    {
        let c = comm.lock();
        let r = &mut *reducing;
        // SAFETY: `send` and `recv` hold `dim` values of `elem` (the
        // datatype) and stay allocated, unmoved, until the request
        // completes (`Reducing` waits before dropping them); MPI is
        // entered with the communicator's lock held.
        unsafe {
            ffi::MPI_Iallreduce(
                r.send.as_ptr().cast(),
                r.recv.as_mut_ptr().cast(),
                // At most `i32::MAX` (`distributed_begin` checks).
                dim as i32,
                datatype,
                op.as_raw(),
                c.as_raw(),
                &mut r.request,
            )
        };
    }
    comm.reductions.started.fetch_add(1, Ordering::Relaxed);
    if blocking {
        reducing.wait();
    }
    reducing
}
