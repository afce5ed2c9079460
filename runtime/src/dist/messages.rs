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

/// Where one received message lands: byte blocks, in message order.
pub(crate) struct Landing {
    pub rank: usize,
    pub blocks: Vec<(*mut u8, usize)>,
}

impl Layout<'_> {
    /// Receives into the buffer at `base`: each message in its slot.
    pub fn landing_in_buffer(&self, base: *mut u8) -> Vec<Landing> {
        // `wrapping_add`: the address may be a device's, never dereferenced here.
        self.slots
            .iter()
            .map(|s| Landing { rank: s.rank, blocks: vec![(base.wrapping_add(s.start), s.bytes)] })
            .collect()
    }

    /// Receives straight into the dats' halo tails, `data[k]` being dat
    /// `k`'s values: each run of consecutive imports is one block (a
    /// neighbour's imports are two runs per dat, exec and non-exec halo).
    pub fn landing_in_halos(&self, dats: &[HaloDat], data: &[*mut u8]) -> Vec<Landing> {
        let mut landings: Vec<Landing> = Vec::with_capacity(self.slots.len());
        for p in self.pieces.iter().filter(|p| !p.list.is_empty()) {
            let rank = self.slots.iter().rev().find(|s| s.start <= p.at).expect("a piece lies in a slot").rank;
            if landings.last().is_none_or(|l| l.rank != rank) {
                landings.push(Landing { rank, blocks: Vec::new() });
            }
            let blocks = &mut landings.last_mut().expect("pushed").blocks;
            let bpe = dats[p.dat].bytes_per_entity;
            let mut k = 0;
            while k < p.list.len() {
                let mut end = k + 1;
                while end < p.list.len() && p.list[end] == p.list[end - 1] + 1 {
                    end += 1;
                }
                let at = data[p.dat].wrapping_add(p.list[k] as usize * bpe);
                blocks.push((at, (end - k) * bpe));
                k = end;
            }
        }
        landings
    }
}

/// Posts the receives into `recv` and the sends from `send` (one message
/// per slot), runs `core` unless `overlap` is off, waits, and returns the
/// time spent waiting. With `overlap` off, `core` runs after the wait.
/// `label` names the dats in the profiling ranges (`halo/<label>/send`,
/// `halo/<label>/wait`). The messages are waited for even when `core`
/// fails, so that no transfer outlives its buffers.
///
/// A message landing in several blocks is received with an MPI datatype
/// made of them.
///
/// # Safety
/// `send` holds its slots, every landing block is valid for its bytes, and
/// both stay valid and untouched by anything but MPI until this returns;
/// they are host memory, or device memory when MPI is CUDA-aware.
pub(crate) unsafe fn exchange(
    comm: &Comm,
    send: (*const u8, &[Slot]),
    recv: &[Landing],
    overlap: bool,
    label: &str,
    core: impl FnOnce() -> Result<()>,
) -> Result<Duration> {
    let sizes = send.1.iter().map(|s| (s.rank, s.bytes)).chain(recv.iter().map(|l| (l.rank, l.bytes())));
    if let Some((rank, bytes)) = sizes.clone().find(|&(_, b)| i32::try_from(b).is_err()) {
        return Err(
            comm.error(format!("a halo message of {bytes} bytes to or from rank {rank} exceeds MPI's int count"))
        );
    }
    let mut requests: Vec<mpi::ffi::MPI_Request> = Vec::with_capacity(send.1.len() + recv.len());
    {
        let c = comm.lock();
        let raw = c.as_raw();
        let byte = u8::equivalent_datatype().as_raw();
        let _range = Range::lazy(|| format!("halo/{label}/send"));
        for landing in recv.iter().filter(|l| l.bytes() > 0) {
            // SAFETY: the blocks are valid by the caller's contract; the
            // count fits (checked above); a request is a plain handle.
            unsafe { requests.push(landing.post(raw, byte)) };
        }
        for s in send.1 {
            // SAFETY: as above (`wrapping_add`: a device address is no Rust
            // allocation; MPI dereferences it, Rust never does).
            unsafe {
                let mut r = std::mem::zeroed();
                mpi::ffi::MPI_Isend(
                    send.0.wrapping_add(s.start).cast(),
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
        // SAFETY: every request was posted above, with the communicator's
        // lock held as now; the blocks stay valid by the caller's contract.
        unsafe { super::wait::complete_all(&mut requests, super::wait::Waiting::Exchange) };
    }
    let waited = wait.elapsed();
    overlapped?;
    if let Some(core) = core {
        core()?;
    }
    Ok(waited)
}

impl Landing {
    fn bytes(&self) -> usize {
        self.blocks.iter().map(|&(_, n)| n).sum()
    }

    /// Posts the receive: straight into the one block, or through an
    /// indexed datatype relative to the first.
    ///
    /// # Safety
    /// As [`exchange`].
    unsafe fn post(&self, comm: mpi::ffi::MPI_Comm, byte: mpi::ffi::MPI_Datatype) -> mpi::ffi::MPI_Request {
        // SAFETY: a request and a datatype are plain handles (zero is a
        // valid bit pattern before MPI sets them); the blocks are valid.
        unsafe {
            let mut request = std::mem::zeroed();
            let rank = self.rank as i32;
            match self.blocks.as_slice() {
                [] => unreachable!("empty landings are not posted"),
                [(at, n)] => {
                    mpi::ffi::MPI_Irecv(at.cast(), *n as i32, byte, rank, HALO_TAG, comm, &mut request);
                }
                [(first, _), ..] => {
                    let lengths: Vec<i32> = self.blocks.iter().map(|&(_, n)| n as i32).collect();
                    let offsets: Vec<mpi::ffi::MPI_Aint> = self
                        .blocks
                        .iter()
                        .map(|&(at, _)| (at as isize - *first as isize) as mpi::ffi::MPI_Aint)
                        .collect();
                    let mut dtype = std::mem::zeroed();
                    mpi::ffi::MPI_Type_create_hindexed(
                        lengths.len() as i32,
                        lengths.as_ptr(),
                        offsets.as_ptr(),
                        byte,
                        &mut dtype,
                    );
                    mpi::ffi::MPI_Type_commit(&mut dtype);
                    mpi::ffi::MPI_Irecv(first.cast(), 1, dtype, rank, HALO_TAG, comm, &mut request);
                    // Freed now, released by MPI once the receive completes.
                    mpi::ffi::MPI_Type_free(&mut dtype);
                }
            }
            request
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dat(arg: usize, bytes_per_entity: usize, halo: &Arc<Halo>) -> HaloDat {
        HaloDat { arg, halo: halo.clone(), bytes_per_entity }
    }

    #[test]
    fn messages_group_dats_by_rank_and_land_in_runs_of_the_halo_tail() {
        // Imports from rank 1: exec 10, 11, non-exec 14; from rank 3: 12, 13.
        let halo = Arc::new(Halo {
            imports: vec![(1, vec![10, 11, 14]), (3, vec![12, 13])],
            exports: vec![(1, vec![0, 5]), (3, vec![7])],
        });
        let dats = [dat(0, 32, &halo), dat(2, 8, &halo)];
        let send = Layout::new(&dats, true);
        assert_eq!(send.slots, vec![Slot { rank: 1, start: 0, bytes: 2 * 40 }, Slot { rank: 3, start: 80, bytes: 40 }]);
        assert_eq!(send.pieces.iter().map(|p| (p.dat, p.at)).collect::<Vec<_>>(), [(0, 0), (1, 64), (0, 80), (1, 112)]);
        let recv = Layout::new(&dats, false);
        assert_eq!(recv.total, 5 * 40);
        let mut q = vec![0u8; 15 * 32];
        let mut adt = vec![0u8; 15 * 8];
        let (qp, ap) = (q.as_mut_ptr(), adt.as_mut_ptr());
        let landings = recv.landing_in_halos(&dats, &[qp, ap]);
        let blocks = |l: &Landing| l.blocks.iter().map(|&(p, n)| (p as usize, n)).collect::<Vec<_>>();
        assert_eq!(landings.iter().map(|l| l.rank).collect::<Vec<_>>(), [1, 3]);
        let (q0, a0) = (qp as usize, ap as usize);
        assert_eq!(blocks(&landings[0]), [(q0 + 320, 64), (q0 + 14 * 32, 32), (a0 + 80, 16), (a0 + 14 * 8, 8)]);
        assert_eq!(blocks(&landings[1]), [(q0 + 12 * 32, 64), (a0 + 12 * 8, 16)]);
        // The blocks of a message add up to its slot.
        for (l, s) in landings.iter().zip(&recv.slots) {
            assert_eq!(l.bytes(), s.bytes);
        }
    }
}
