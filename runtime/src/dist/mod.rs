//! Distributed runs under MPI (feature `mpi`): partitioning, migration to
//! the local numbering `core | owned | exec | non-exec` (seed 004), halo
//! exchange, reductions across ranks and gathering results.
//!
//! Every rank declares the same global mesh (or rank 0 alone does);
//! [`crate::Runtime::partition`] then keeps each rank's part of every set,
//! map and dat declared so far. The numbering itself is computed by
//! [`layout`] from the global mesh; this module adds what needs
//! communication: `messages` (the one-message-per-neighbour layout and its
//! posting), `execute` (a loop's exchange on the host, reductions, stale
//! halos) `device_halo` (the exchange on a device) and `wait` (every wait polls and yields
//! the core, for ranks that share cores).

pub(crate) mod layout;
mod reduce;
mod wait;

use wait::blocking;

pub(crate) use crate::distribution::HaloTraffic;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;

use crate::decl::{Dat, Sections};
use crate::error::{Error, Result};

pub use mpi::environment::Universe;

/// Initialises MPI (once per process) and returns its universe; MPI is
/// finalised when the universe is dropped, so keep it for the whole run.
///
/// It asks for `MPI_THREAD_MULTIPLE`, so that distributed runtimes may be
/// driven from several threads at once (one thread per runtime: each
/// runtime's collectives run on a communicator of its own, and its calls
/// hold it one thread at a time). A library that offers less is used at
/// the level it offers ([`threading`] says which); then drive the
/// distributed runtimes from one thread.
///
/// ```no_run
/// let universe = parloop::mpi::initialize()?;
/// let rt = parloop::Runtime::with_communicator(parloop::Backend::Seq, &universe.world())?;
/// # Ok::<(), parloop::Error>(())
/// ```
pub fn initialize() -> Result<Universe> {
    mpi::initialize_with_threading(mpi::Threading::Multiple)
        .map(|(universe, _)| universe)
        .ok_or_else(|| Error::Distributed { rank: 0, reason: "MPI was already initialised in this process".into() })
}

/// The thread level MPI was initialised at (`MPI_Query_thread`): at
/// [`Threading::Multiple`](mpi::Threading::Multiple) several threads may each drive a distributed
/// runtime at once.
///
/// ```no_run
/// let universe = parloop::mpi::initialize()?;
/// let several_threads = parloop::mpi::threading() == parloop::mpi::Threading::Multiple;
/// # Ok::<(), parloop::Error>(())
/// ```
pub fn threading() -> mpi::Threading {
    mpi::environment::threading_support()
}

/// The communicator of a runtime: a duplicate of the solver's, so that
/// parloop's messages never match the solver's own.
pub struct Comm {
    inner: Mutex<SimpleCommunicator>,
    rank: usize,
    size: usize,
    /// Runs the runtime's lazy trace (set when the runtime has one): see
    /// [`Comm::before_collective`].
    flush: std::sync::OnceLock<Flush>,
    /// What the globals' all-reduces on this communicator did.
    reductions: reduce::Counters,
    /// Dats (by id) whose halo is out of date: loops that write them and
    /// host writes (`Dat::set_values`, `with_values_mut`) mark them, the
    /// next loop that reads their halo exchanges it. Here, where a dat's
    /// set reaches it (`LocalPart::comm`), so that host writes can.
    pub(crate) stale: Stale,
}

/// The dats (by id) whose halo is out of date, shared by a distributed
/// run ([`Mpi`]) and its communicator.
pub(crate) type Stale = Arc<Mutex<std::collections::HashSet<u64>>>;

/// What [`Comm::before_collective`] calls: the runtime's `flush`.
pub(crate) type Flush = Box<dyn Fn() -> Result<()> + Send + Sync>;

// SAFETY: parloop makes MPI calls on a communicator only while holding its
// `inner` lock, one thread at a time; calls on two runtimes' communicators
// from two threads at once need `MPI_THREAD_MULTIPLE`, which `initialize`
// asks for (at a lower level the program drives them from one thread, as
// `initialize` documents).
unsafe impl Send for Comm {}
// SAFETY: as above; the rank and size are plain values.
unsafe impl Sync for Comm {}

impl Comm {
    pub(crate) fn new(comm: &SimpleCommunicator, stale: Stale) -> Comm {
        let dup = comm.duplicate();
        let (rank, size) = (dup.rank() as usize, dup.size() as usize);
        Comm {
            inner: Mutex::new(dup),
            rank,
            size,
            flush: std::sync::OnceLock::new(),
            reductions: Default::default(),
            stale,
        }
    }

    /// Before any communication outside the lazy trace's loops (a gather,
    /// the partition, a matrix product's halo refresh): every rank runs
    /// its pending loops first. Loops exchange halos in the order they
    /// were recorded, the same on every rank; a host read on one rank may
    /// run them there early, and they then wait for the other ranks'
    /// matching exchanges, which those ranks reach here at the latest (a
    /// collective the first rank would otherwise wait in forever).
    /// Nothing inside forced loops (they are the trace's own).
    pub(crate) fn before_collective(&self) -> Result<()> {
        let flushed = self.flush_pending();
        if self.flush.get().is_none() || self.size <= 1 {
            return flushed;
        }
        // Agreed: a host read on one rank may have run (and failed) a
        // pending loop there only, and a rank returning alone here would
        // leave the others waiting in the collective that follows.
        if !self.all_ok(flushed.is_ok()) {
            return Err(self.failed_elsewhere(flushed, "the pending loops before a collective operation"));
        }
        Ok(())
    }

    /// Runs the pending loops of the runtime's trace (not agreed).
    fn flush_pending(&self) -> Result<()> {
        match self.flush.get() {
            Some(flush) if !crate::trace::forcing_here() => flush(),
            _ => Ok(()),
        }
    }

    /// The halo of dat `id` is out of date (a host write changed its
    /// values on this rank).
    pub(crate) fn mark_stale(&self, id: u64) {
        crate::sync::lock(&self.stale).insert(id);
    }

    /// Sets what [`Comm::before_collective`] runs (once, when the runtime
    /// is built with a trace).
    pub(crate) fn set_flush(&self, flush: Flush) {
        let _ = self.flush.set(flush);
    }

    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    pub(crate) fn size(&self) -> usize {
        self.size
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, SimpleCommunicator> {
        crate::sync::lock(&self.inner)
    }

    /// Ends the whole job with `err`, printed with this rank's number.
    pub(crate) fn abort(&self, err: &Error) -> ! {
        eprintln!("parloop: rank {} of {}: {err}", self.rank, self.size);
        self.lock().abort(1)
    }

    pub(crate) fn error(&self, reason: impl Into<String>) -> Error {
        Error::Distributed { rank: self.rank, reason: reason.into() }
    }

    /// Sums `values` across the ranks, in place (a blocking all-reduce).
    pub(crate) fn sum(&self, values: &mut [f64]) {
        let local = values.to_vec();
        self.all_reduce(&local[..], values, SystemOperation::sum());
    }

    /// `MPI_Allreduce` of `local` into `all`, completed by polling
    /// ([`blocking`]: the core is yielded while other ranks work).
    fn all_reduce<S, R>(&self, local: &S, all: &mut R, op: SystemOperation)
    where
        S: mpi::datatype::Buffer + ?Sized,
        R: mpi::datatype::BufferMut + ?Sized,
    {
        let c = self.lock();
        blocking(|scope| c.immediate_all_reduce_into(scope, local, all, op));
    }

    /// `MPI_Allgather` of every rank's `local` into `all`, in rank order
    /// (completed as [`Comm::all_reduce`] is).
    pub(crate) fn all_gather<S, R>(&self, local: &S, all: &mut R)
    where
        S: mpi::datatype::Buffer + ?Sized,
        R: mpi::datatype::BufferMut + ?Sized,
    {
        let c = self.lock();
        blocking(|scope| c.immediate_all_gather_into(scope, local, all));
    }

    /// `MPI_Bcast` of rank 0's `values` into every rank's (completed as
    /// [`Comm::all_reduce`] is).
    pub(crate) fn broadcast_from_first<B: mpi::datatype::BufferMut + ?Sized>(&self, values: &mut B) {
        let c = self.lock();
        blocking(|scope| c.process_at_rank(0).immediate_broadcast_into(scope, values));
    }

    /// Whether every rank passed `true`: a step that can fail on one rank
    /// before a collective is agreed on first, so that no rank waits in
    /// the collective for one that gave up.
    pub(crate) fn all_ok(&self, ok: bool) -> bool {
        let (local, mut all) = (u8::from(ok), 0u8);
        self.all_reduce(&local, &mut all, SystemOperation::min());
        all == 1
    }

    /// Whether every rank passed `ok`, and whether every rank passed the
    /// same `value`: one all-reduce (the minimum of `ok`, `value` and
    /// `!value`, whose last is the complement of the maximum).
    fn all_ok_alike(&self, ok: bool, value: u64) -> (bool, bool) {
        let local = [u64::from(ok), value, !value];
        let mut all = [0u64; 3];
        self.all_reduce(&local[..], &mut all[..], SystemOperation::min());
        (all[0] == 1, all[1] == !all[2])
    }

    /// Agrees, before operation `what` communicates, on whether its
    /// argument checks passed (`ok`, this rank's) and on `args`, the
    /// arguments that must be the same on every rank (options): an error
    /// on every rank where another rank's checks failed (`Ok` on a rank
    /// whose own failed: its error is its caller's) or the arguments
    /// differ. Collective; nothing with one rank.
    pub(crate) fn agree_checks(&self, what: &str, ok: bool, args: &str) -> Result<()> {
        if self.size <= 1 {
            return Ok(());
        }
        // The pending loops first (their collectives come before this one
        // on every rank); their failure here is agreed too, not returned
        // before the all-reduce the other ranks wait in.
        let flushed = self.flush_pending();
        let (all_ok, alike) = self.all_ok_alike(ok && flushed.is_ok(), crate::device::fnv1a(&[args.as_bytes()]));
        flushed?;
        if !all_ok {
            return if ok { Err(self.failed_elsewhere(Ok(()), what)) } else { Ok(()) };
        }
        if !alike {
            // Or the ranks are out of step: another rank's all-reduce
            // here is a different call's (a loop's rank check, another
            // collective), whose values differ as arguments would.
            return Err(self.error(format!(
                "{what}: the ranks pass different arguments, or are not all in this call (out of step: another \
                 rank is in a loop or another collective call); this rank passes {args}"
            )));
        }
        Ok(())
    }

    /// Agrees on the `root` of gather `what` before any rank gathers (and
    /// runs the pending loops, their failure agreed): a root out of range
    /// on one rank, or roots that differ, are an error on every rank (a
    /// rank refusing its root alone left the others in the gather).
    pub(crate) fn agree_root(&self, what: &str, root: usize) -> Result<()> {
        let checked = match root < self.size {
            true => Ok(()),
            false => Err(self.error(format!("{what}: root {root} is not a rank"))),
        };
        self.agree_checks(what, checked.is_ok(), &format!("root {root}"))?;
        checked
    }

    /// This rank's `local` error, or, where another rank failed, an error
    /// saying so (`all_ok` said some rank did).
    pub(crate) fn failed_elsewhere<T>(&self, local: Result<T>, what: &str) -> Error {
        match local {
            Err(e) => e,
            Ok(_) => self.error(format!("{what}: another rank failed (its error is reported there)")),
        }
    }

    /// Whether every rank passed the same `value`.
    pub(crate) fn agree(&self, value: u64) -> bool {
        // One all-reduce: the minimum of the value and of its complement.
        let (local, mut all) = ([value, !value], [0u64; 2]);
        self.all_reduce(&local[..], &mut all[..], SystemOperation::min());
        all[0] == !all[1]
    }

    /// Every rank's `local` on `root`, concatenated in rank order (`None`
    /// on the other ranks). Collective. An MPI gather counts in `i32`: a
    /// part or a whole past `i32::MAX` values is an error on every rank
    /// (agreed first, so no rank waits for another that gave up).
    pub(crate) fn gather_all<E: Equivalence + Copy + Default>(
        &self,
        root: usize,
        local: &[E],
        what: &str,
    ) -> Result<Option<Vec<E>>> {
        let c = self.lock();
        let len = local.len() as u64;
        let (mut most, mut total) = (0u64, 0u64);
        blocking(|scope| c.immediate_all_reduce_into(scope, &len, &mut most, SystemOperation::max()));
        blocking(|scope| c.immediate_all_reduce_into(scope, &len, &mut total, SystemOperation::sum()));
        if total > i32::MAX as u64 {
            return Err(self.error(format!(
                "{what}: {total} values to gather on rank {root} (at most {}; the largest part holds {most})",
                i32::MAX
            )));
        }
        let at_root = c.process_at_rank(root as i32);
        let count = local.len() as i32;
        if self.rank != root {
            blocking(|scope| at_root.immediate_gather_into(scope, &count));
            blocking(|scope| at_root.immediate_gather_varcount_into(scope, local));
            return Ok(None);
        }
        let mut counts = vec![0i32; self.size];
        blocking(|scope| at_root.immediate_gather_into_root(scope, &count, &mut counts[..]));
        let mut all = Vec::new();
        if all.try_reserve_exact(total as usize).is_err() {
            // The others are already sending: receive nothing would hang
            // them, so this rank ends the job.
            drop(c);
            self.abort(&Error::OutOfMemory {
                what: format!("{what} on rank {root}"),
                bytes: (total as usize).saturating_mul(std::mem::size_of::<E>()),
            });
        }
        all.resize(total as usize, E::default());
        let displs = offsets(&counts);
        let mut parts = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
        blocking(|scope| at_root.immediate_gather_varcount_into_root(scope, local, &mut parts));
        Ok(Some(all))
    }

    /// `counts[q]` values to rank `q`; returns what each rank sent here.
    pub(crate) fn all_to_all(&self, outgoing: &[Vec<u64>]) -> Vec<Vec<u64>> {
        let c = self.lock();
        let counts: Vec<i32> = outgoing.iter().map(|v| v.len() as i32).collect();
        let mut incoming_counts = vec![0i32; self.size];
        blocking(|scope| c.immediate_all_to_all_into(scope, &counts[..], &mut incoming_counts[..]));
        let send: Vec<u64> = outgoing.concat();
        let displs = offsets(&counts);
        let rdispls = offsets(&incoming_counts);
        let mut recv = vec![0u64; incoming_counts.iter().sum::<i32>() as usize];
        {
            let sp = Partition::new(&send[..], &counts[..], &displs[..]);
            let mut rp = PartitionMut::new(&mut recv[..], &incoming_counts[..], &rdispls[..]);
            blocking(|scope| c.immediate_all_to_all_varcount_into(scope, &sp, &mut rp));
        }
        (0..self.size).map(|q| recv[rdispls[q] as usize..(rdispls[q] + incoming_counts[q]) as usize].to_vec()).collect()
    }
}

fn offsets(counts: &[i32]) -> Vec<i32> {
    counts
        .iter()
        .scan(0, |acc, &c| {
            let o = *acc;
            *acc += c;
            Some(o)
        })
        .collect()
}

/// How [`crate::Runtime::partition`] assigns the primary set's entities.
pub enum Partitioner<'a> {
    /// METIS k-way on the graph of the primary set through the map:
    /// entities one row of the map joins (a map into the primary set, as
    /// the airfoil's edges to cells), or entities sharing two of the map's
    /// targets, one for maps of two, where it leaves the primary set (cells
    /// to vertices: cells sharing an edge, as METIS's `PartMeshDual` with
    /// `ncommon` 2).
    Metis,
    /// Contiguous blocks in declaration order.
    Block,
    /// Recursive coordinate bisection of coordinates on the primary set, or
    /// on a set a map from it reaches (then each entity's centroid).
    Geometric(&'a Dat<f64>),
    /// The owner rank of every entity of the primary set.
    External(Vec<i32>),
}

/// Partition quality: entities and halo sizes per set and rank.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionReport {
    /// Ranks.
    pub ranks: usize,
    /// Edges of the primary set's graph cut by the partition.
    pub edge_cut: usize,
    /// One entry per distributed set.
    pub sets: Vec<SetReport>,
}

/// One set's sections on every rank.
#[derive(Clone, Debug, PartialEq)]
pub struct SetReport {
    /// The set's name.
    pub name: String,
    /// Sections per rank.
    pub sections: Vec<Sections>,
}

impl PartitionReport {
    /// One line per set: owned entities per rank (least and most), and the
    /// exec and non-exec halos (largest on a rank, and summed over ranks).
    pub fn summary(&self) -> String {
        let mut out = format!("{} parts, edge cut {}\n", self.ranks, self.edge_cut);
        for s in &self.sets {
            let owned = s.sections.iter().map(|x| x.core + x.owned);
            let (exec, non_exec) = (s.sections.iter().map(|x| x.exec), s.sections.iter().map(|x| x.non_exec));
            out.push_str(&format!(
                "{:<12} owned {}..{} per rank; exec halo max {} total {}; non-exec halo max {} total {}\n",
                s.name,
                owned.clone().min().unwrap_or(0),
                owned.max().unwrap_or(0),
                exec.clone().max().unwrap_or(0),
                exec.sum::<usize>(),
                non_exec.clone().max().unwrap_or(0),
                non_exec.sum::<usize>(),
            ));
        }
        out
    }
}

impl fmt::Display for PartitionReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "partition over {} ranks, edge cut {}", self.ranks, self.edge_cut)?;
        writeln!(f, "{:<12} {:>5} {:>10} {:>10} {:>10} {:>10}", "set", "rank", "core", "owned", "exec", "non-exec")?;
        for s in &self.sets {
            for (r, sec) in s.sections.iter().enumerate() {
                writeln!(
                    f,
                    "{:<12} {:>5} {:>10} {:>10} {:>10} {:>10}",
                    s.name, r, sec.core, sec.owned, sec.exec, sec.non_exec
                )?;
            }
        }
        Ok(())
    }
}

/// Per neighbour rank, the local indices to send (export) and receive
/// (import) for one set.
#[derive(Clone, Debug, Default)]
pub(crate) struct Halo {
    pub imports: Vec<(usize, Vec<u32>)>,
    pub exports: Vec<(usize, Vec<u32>)>,
}

/// Builds the export lists matching every rank's imports: each rank tells
/// each owner which of its entities it needs (global indices), and the owner
/// turns them into its local indices.
pub(crate) fn exchange_lists(comm: &Comm, imports: &[(usize, Vec<u32>)], global: &[usize]) -> Result<Halo> {
    let mut outgoing = vec![Vec::new(); comm.size()];
    for (q, list) in imports {
        outgoing[*q] = list.iter().map(|&i| global[i as usize] as u64).collect();
    }
    let incoming = comm.all_to_all(&outgoing);
    let to_local: HashMap<usize, u32> = global.iter().enumerate().map(|(i, &g)| (g, i as u32)).collect();
    let mut exports = Vec::new();
    for (q, wanted) in incoming.into_iter().enumerate() {
        if wanted.is_empty() {
            continue;
        }
        let list = wanted
            .iter()
            .map(|&g| {
                to_local
                    .get(&(g as usize))
                    .copied()
                    .ok_or_else(|| comm.error(format!("rank {q} asks for entity {g}, which this rank does not hold")))
            })
            .collect::<Result<Vec<u32>>>()?;
        exports.push((q, list));
    }
    Ok(Halo { imports: imports.to_vec(), exports })
}

/// A runtime's distributed run: the communicator, the distributed mesh's
/// halos and which dats' halos are stale. The MPI implementation of the
/// [`Distribution`](crate::distribution::Distribution) seam (`execute`).
pub(crate) struct Mpi {
    /// The communicator, a duplicate of the solver's (`None`: a runtime
    /// built with the `mpi` feature outside MPI, which still records its
    /// declarations for `Runtime::partition_preview`).
    pub comm: Option<Arc<Comm>>,
    /// Everything declared, for [`crate::Runtime::partition`].
    pub declared: Mutex<Declared>,
    /// Halo lists per distributed set id.
    pub halos: Mutex<HashMap<u64, Arc<Halo>>>,
    /// Dats (by id) whose halo is out of date (shared with `comm`).
    pub stale: Stale,
    /// Loops run so far (partitioning must come first).
    pub loops: std::sync::atomic::AtomicU64,
    /// `PARLOOP_CHECK_RANKS=1`: ranks compare a hash of every loop over a
    /// distributed set.
    pub check_ranks: bool,
    /// `PARLOOP_OVERLAP=0`: wait for halos before the core section.
    pub no_overlap: bool,
    /// Device-side halo buffers and kernels.
    pub device: device_halo::DeviceHalos,
}

impl Mpi {
    /// The distributed run over (a duplicate of) `comm`.
    pub(crate) fn new(comm: Option<&SimpleCommunicator>) -> Result<Mpi> {
        let stale = Stale::default();
        let comm = comm.map(|c| Arc::new(Comm::new(c, stale.clone())));
        let check_ranks = crate::config::switch("PARLOOP_CHECK_RANKS", false);
        if let Some(comm) = comm.as_ref().filter(|c| c.size > 1) {
            // The check is collective (a hash compared per loop): set on
            // some ranks only, those waited for the others' hashes for
            // ever. Agreed here, where making the runtime is collective.
            let (ok, alike) =
                comm.all_ok_alike(check_ranks.is_ok(), u64::from(*check_ranks.as_ref().unwrap_or(&false)));
            if ok && !alike {
                return Err(comm.error(format!(
                    "PARLOOP_CHECK_RANKS differs between ranks (this rank's: {}); set it alike on every rank \
                     (`mpiexec -env PARLOOP_CHECK_RANKS 1` or export it before the launch)",
                    u8::from(*check_ranks.as_ref().unwrap_or(&false))
                )));
            }
            if !ok && check_ranks.is_ok() {
                return Err(comm.error("another rank's PARLOOP_CHECK_RANKS is not understood"));
            }
        }
        Ok(Mpi {
            comm,
            declared: Mutex::default(),
            halos: Mutex::default(),
            stale,
            loops: Default::default(),
            check_ranks: check_ranks?,
            no_overlap: !crate::config::switch("PARLOOP_OVERLAP", true)?,
            device: Default::default(),
        })
    }
}

/// Weak handles to every declared set, map and dat.
#[derive(Default)]
pub(crate) struct Declared {
    pub sets: Vec<std::sync::Weak<crate::decl::SetInner>>,
    pub maps: Vec<std::sync::Weak<crate::decl::map::MapInner>>,
    pub dats: Vec<std::sync::Weak<dyn crate::decl::Redistribute>>,
    pub subsets: Vec<std::sync::Weak<crate::decl::SubsetInner>>,
}

mod device_halo;
mod execute;
mod messages;
mod partition;

impl<T: crate::Scalar> Dat<T> {
    /// The values of every entity in the global numbering the mesh was
    /// declared in, on rank `root` (`None` on the others); a dat on a set
    /// that is not distributed returns its own values. Collective: every
    /// rank must call it.
    ///
    /// ```no_run
    /// # fn f(q: &parloop::Dat<f64>) -> parloop::Result<()> {
    /// if let Some(all) = q.gather(0)? {
    ///     println!("{} values", all.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn gather(&self, root: usize) -> Result<Option<Vec<T>>> {
        let Some(part) = self.set().0.local.get() else { return Ok(Some(self.values()?)) };
        let comm = &part.comm;
        let what = format!("gather of `{}`", self.name());
        comm.agree_root(&what, root)?;
        let dim = self.dim();
        let owned = part.sections.core + part.sections.owned;
        let ids: Vec<u64> = part.global[..owned].iter().map(|&g| g as u64).collect();
        let values = self.with_own_values(|v| v[..owned * dim].to_vec());
        if !comm.all_ok(values.is_ok()) {
            return Err(comm.failed_elsewhere(values, &what));
        }
        let values = values?;
        let bytes: Vec<u8> = bytemuck::cast_slice(&values).to_vec();
        let all_ids = comm.gather_all(root, &ids, &what)?;
        let all_bytes = comm.gather_all(root, &bytes, &what)?;
        let (Some(all_ids), Some(all_bytes)) = (all_ids, all_bytes) else { return Ok(None) };
        let size = std::mem::size_of::<T>() * dim;
        let mut out = vec![T::default(); part.global_size * dim];
        let mut seen = vec![false; part.global_size];
        for (k, &g) in all_ids.iter().enumerate() {
            let g = g as usize;
            seen[g] = true;
            let elem = std::mem::size_of::<T>();
            for d in 0..dim {
                let at = k * size + d * elem;
                out[g * dim + d] = bytemuck::pod_read_unaligned(&all_bytes[at..at + elem]);
            }
        }
        if let Some(g) = seen.iter().position(|s| !s) {
            return Err(comm.error(format!("gather of `{}`: no rank owns entity {g}", self.name())));
        }
        Ok(Some(out))
    }
}

/// A matrix's stored entries in the global numbering, gathered on one rank.
pub(crate) struct GatheredMatrix<T> {
    /// Scalar rows and columns of the whole matrix.
    pub rows: usize,
    pub cols: usize,
    /// (row, column, value), sorted by row then column.
    pub entries: Vec<(u64, u64, T)>,
}

impl<T: crate::Scalar> crate::matrix::Mat<T> {
    /// The stored entries of every rank's rows, in the global numbering the
    /// mesh was declared in, on `root` (`None` on the others). Collective;
    /// for a matrix whose row set is distributed. A rank's rows are its
    /// owned row entities, so each entry comes from one rank.
    pub(crate) fn gather_entries(&self, root: usize) -> Result<Option<GatheredMatrix<T>>> {
        let s = self.sparsity();
        let (row_set, col_set) = (s.row_set(), s.col_set());
        let Some(rows_part) = row_set.0.local.get() else {
            return Err(Error::Incompatible {
                op: format!("gathering matrix `{}`", self.name()),
                reason: format!("its row set `{}` is not distributed", row_set.name()),
            });
        };
        let comm = &rows_part.comm;
        let what = format!("gather of matrix `{}`", self.name());
        comm.agree_root(&what, root)?;
        let csr = self.to_csr();
        if !comm.all_ok(csr.is_ok()) {
            return Err(comm.failed_elsewhere(csr, &what));
        }
        let csr = csr?;
        let (rdim, cdim) = (s.row_dim(), s.col_dim());
        let col_global = |c: usize| -> u64 {
            let (entity, component) = (c / cdim, c % cdim);
            let g = col_set.declared_entity(entity);
            (g * cdim + component) as u64
        };
        let nnz = csr.vals.len();
        let (mut rows, mut cols) = (Vec::with_capacity(nnz), Vec::with_capacity(nnz));
        for r in 0..csr.row_ptr.len() - 1 {
            let g = (rows_part.global[r / rdim] * rdim + r % rdim) as u64;
            for k in csr.row_ptr[r]..csr.row_ptr[r + 1] {
                rows.push(g);
                cols.push(col_global(csr.cols[k]));
            }
        }
        let bytes: Vec<u8> = bytemuck::cast_slice(&csr.vals).to_vec();
        let all_rows = comm.gather_all(root, &rows, &what)?;
        let all_cols = comm.gather_all(root, &cols, &what)?;
        let all_bytes = comm.gather_all(root, &bytes, &what)?;
        let (Some(all_rows), Some(all_cols), Some(all_bytes)) = (all_rows, all_cols, all_bytes) else {
            return Ok(None);
        };
        let elem = std::mem::size_of::<T>();
        let mut entries: Vec<(u64, u64, T)> = all_rows
            .iter()
            .zip(&all_cols)
            .enumerate()
            .map(|(k, (&r, &c))| (r, c, bytemuck::pod_read_unaligned(&all_bytes[k * elem..(k + 1) * elem])))
            .collect();
        entries.sort_unstable_by_key(|&(r, c, _)| (r, c));
        let cols_total = col_set.0.local.get().map_or(col_set.total(), |p| p.global_size);
        Ok(Some(GatheredMatrix { rows: rows_part.global_size * rdim, cols: cols_total * cdim, entries }))
    }
}
