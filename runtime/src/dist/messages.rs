//! Halo messages: where each dat's entries sit in the one message per
//! neighbour rank, and posting those messages around the core section.
//!
//! Host and device exchanges share both: a loop's halo data for every
//! neighbour lives in one buffer (host memory, or device memory on a
//! device), message `q` being the slice `slots[q]`, filled dat by dat in
//! argument order. Sender and receiver walk the dats in the same order, so
//! no header is needed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mpi::raw::AsRaw;
use mpi::traits::Equivalence;

use super::{Comm, Halo};
use crate::error::Result;
use crate::profile::Range;

/// Message tag of halo exchanges on parloop's own communicator.
const HALO_TAG: i32 = 17;

/// A dat whose halo a loop refreshes.
pub(crate) struct HaloDat {
    /// The loop argument that reads it.
    pub arg: usize,
    /// The halo lists of its set.
    pub halo: Arc<Halo>,
    /// Bytes per entity.
    pub bytes_per_entity: usize,
}

/// One message: to or from `rank`, `bytes` long at `start` of the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub rank: usize,
    pub start: usize,
    pub bytes: usize,
}

/// One dat's entries for one neighbour: `list` (local indices) packed at
/// `at` of the buffer.
pub(crate) struct Piece<'a> {
    /// Index into the loop's `HaloDat`s.
    pub dat: usize,
    pub list: &'a [u32],
    pub at: usize,
}

/// The layout of one direction (sends or receives) of an exchange.
pub(crate) struct Layout<'a> {
    pub slots: Vec<Slot>,
    pub pieces: Vec<Piece<'a>>,
    /// Bytes of the whole buffer.
    pub total: usize,
}

impl<'a> Layout<'a> {
    /// Sends (`exports`) or receives (imports) of `dats`, grouped by rank.
    pub fn new(dats: &'a [HaloDat], exports: bool) -> Layout<'a> {
        let lists = |d: &'a HaloDat| if exports { &d.halo.exports } else { &d.halo.imports };
        let mut ranks: Vec<usize> = dats.iter().flat_map(|d| lists(d).iter().map(|(q, _)| *q)).collect();
        ranks.sort_unstable();
        ranks.dedup();
        let (mut slots, mut pieces, mut at) = (Vec::new(), Vec::new(), 0);
        for rank in ranks {
            let start = at;
            for (dat, d) in dats.iter().enumerate() {
                if let Some((_, list)) = lists(d).iter().find(|(q, _)| *q == rank) {
                    pieces.push(Piece { dat, list, at });
                    at += list.len() * d.bytes_per_entity;
                }
            }
            if at > start {
                slots.push(Slot { rank, start, bytes: at - start });
            }
        }
        Layout { slots, pieces, total: at }
    }
}

/// Posts the receives into `recv` and the sends from `send` (one message
/// per slot), runs `core` unless `overlap` is off, waits, and returns the
/// time spent waiting. With `overlap` off, `core` runs after the wait.
/// `label` names the dats in the profiling ranges (`halo/<label>/send`,
/// `halo/<label>/wait`). The messages are waited for even when `core`
/// fails, so that no transfer outlives its buffers.
///
/// # Safety
/// `send` and `recv` hold their layouts' `total` bytes and stay valid and
/// untouched by anything but MPI until this returns; they are host memory,
/// or device memory when MPI is CUDA-aware.
pub(crate) unsafe fn exchange(
    comm: &Comm,
    send: (*const u8, &[Slot]),
    recv: (*mut u8, &[Slot]),
    overlap: bool,
    label: &str,
    core: impl FnOnce() -> Result<()>,
) -> Result<Duration> {
    if let Some(s) = recv.1.iter().chain(send.1).find(|s| i32::try_from(s.bytes).is_err()) {
        return Err(comm
            .error(format!("a halo message of {} bytes to or from rank {} exceeds MPI's int count", s.bytes, s.rank)));
    }
    let mut requests: Vec<mpi::ffi::MPI_Request> = Vec::with_capacity(send.1.len() + recv.1.len());
    {
        let c = comm.lock();
        let raw = c.as_raw();
        let byte = u8::equivalent_datatype().as_raw();
        let _range = Range::lazy(|| format!("halo/{label}/send"));
        for s in recv.1 {
            // SAFETY: a request is a plain handle (zero is a valid bit
            // pattern before MPI sets it); the buffer range is valid by the
            // caller's contract; the count fits (checked above).
            unsafe {
                let mut r = std::mem::zeroed();
                mpi::ffi::MPI_Irecv(
                    recv.0.add(s.start).cast(),
                    s.bytes as i32,
                    byte,
                    s.rank as i32,
                    HALO_TAG,
                    raw,
                    &mut r,
                );
                requests.push(r);
            }
        }
        for s in send.1 {
            // SAFETY: as above.
            unsafe {
                let mut r = std::mem::zeroed();
                mpi::ffi::MPI_Isend(
                    send.0.add(s.start).cast(),
                    s.bytes as i32,
                    byte,
                    s.rank as i32,
                    HALO_TAG,
                    raw,
                    &mut r,
                );
                requests.push(r);
            }
        }
    }
    let mut core = Some(core);
    let overlapped = if overlap { (core.take().expect("once"))() } else { Ok(()) };
    let wait = Instant::now();
    {
        let _range = Range::lazy(|| format!("halo/{label}/wait"));
        let _c = comm.lock();
        // SAFETY: every request was posted above and is waited for once.
        unsafe {
            mpi::ffi::MPI_Waitall(requests.len() as i32, requests.as_mut_ptr(), mpi::ffi::RSMPI_STATUSES_IGNORE);
        }
    }
    let waited = wait.elapsed();
    overlapped?;
    if let Some(core) = core {
        core()?;
    }
    Ok(waited)
}
