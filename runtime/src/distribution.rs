//! The seam between a loop's execution and distribution (seed 004).
//!
//! A loop calls the same steps whether or not it runs on many ranks: begin
//! (reductions set aside), exchange the stale halos it reads while the core
//! section runs, end (reductions combined across ranks, written halos marked
//! stale). [`Serial`] implements every step as nothing at all, as OP2's
//! `op_dummy_singlenode` does; `dist::Mpi` (feature `mpi`) implements them
//! with MPI. [`select`] picks one, once, when a runtime is built: it is the
//! only place that knows whether the `mpi` feature is on, so the execution
//! path (`run`) has no `cfg`.

use std::any::Any;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::arg::Arg;
use crate::decl::{Map, Redistribute, Set};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::exec::Reduction;
use crate::kernel::Kernel;
use crate::views::ArgView;

/// Halo traffic of one loop execution, for the profile.
#[derive(Clone, Debug, Default)]
pub(crate) struct HaloTraffic {
    /// Bytes sent per dat name.
    pub bytes: Vec<(String, u64)>,
    /// Messages sent.
    pub messages: u64,
    /// Time spent waiting for messages.
    pub wait: Duration,
}

/// What the all-reduces of globals across MPI ranks did
/// ([`Runtime::reduction_stats`](crate::Runtime::reduction_stats)): a
/// loop that reduces a global starts its all-reduce when it ends
/// (`MPI_Iallreduce`) and the global's next use (a loop, a host read or
/// write) completes it, so the network time overlaps whatever runs in
/// between. All zero in a serial run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReductionStats {
    /// All-reduces started: one per loop and kind (element type and
    /// operation) of the globals it reduces, which share it.
    pub started: u64,
    /// Of those completed, the ones already complete when the global was
    /// next needed: their network time was hidden entirely.
    pub ready_when_needed: u64,
    /// Time spent waiting for all-reduces to complete, in seconds.
    pub wait_seconds: f64,
}

/// What [`Distribution::begin`] set aside for [`Distribution::end`] (the
/// initial values of INC globals, which the ranks reduce from zero); only
/// the implementation that made it reads it.
pub(crate) type Begun = Box<dyn Any + Send>;

/// How loops take part in a distributed run. Every method has the serial
/// meaning as its default: nothing to exchange, nothing to reduce.
pub(crate) trait Distribution: Any + Send + Sync {
    /// What the globals' all-reduces did (zero when serial).
    fn reduction_stats(&self) -> ReductionStats {
        ReductionStats::default()
    }

    /// This process's rank (0 when serial).
    fn rank(&self) -> usize {
        0
    }

    /// Ranks in the run (1 when serial).
    fn ranks(&self) -> usize {
        1
    }

    /// Whether every rank must take part in every loop, also with no
    /// elements of its own (exchanges and reductions are collective).
    fn collective(&self) -> bool {
        false
    }

    /// With more than one rank, ends the whole job with `err`; otherwise
    /// returns it.
    fn fail(&self, err: Error) -> Error {
        err
    }

    /// Records a declaration, for partitioning.
    fn declared_set(&self, _set: &Set) {}
    /// Records a declaration, for partitioning.
    fn declared_map(&self, _map: &Map) {}
    /// Records a declaration, for partitioning.
    fn declared_dat(&self, _dat: Weak<dyn Redistribute>) {}
    /// Records a subset declared before the partition, which localises it.
    fn declared_subset(&self, _subset: Weak<crate::decl::SubsetInner>) {}

    /// Before a host loop (the loop's data locked, `views` its views).
    fn begin(
        &self,
        _kernel: &Kernel,
        _set: &Set,
        _args: &[Arg],
        _views: &[ArgView],
        _reductions: &[Reduction],
    ) -> Result<Option<Begun>> {
        Ok(None)
    }

    /// Runs `core` while the stale halos a host loop reads are exchanged.
    fn exchange(
        &self,
        _set: &Set,
        _args: &[Arg],
        _views: &[ArgView],
        _exec_halo: bool,
        core: &mut dyn FnMut(),
    ) -> Result<HaloTraffic> {
        core();
        Ok(HaloTraffic::default())
    }

    /// After a host loop: reductions across ranks, written halos stale.
    /// `outcome`: the loop's here. Returns the loop's outcome on every
    /// rank: where the kernel may panic (`Kernel::may_panic`) the ranks
    /// agree on it first, so that a panic on one rank's elements is an
    /// error on every rank (none runs on to a collective the failed rank
    /// left: a hang). A failed loop's reductions are discarded, its
    /// globals keep their values.
    fn end(
        &self,
        _begun: Option<Begun>,
        _kernel: &Kernel,
        _args: &[Arg],
        _views: &[ArgView],
        _reductions: &[Reduction],
        outcome: Result<()>,
    ) -> Result<()> {
        outcome
    }

    /// Before a device loop: its reduced globals set aside (on the host).
    fn begin_device(&self, _kernel: &Kernel, _set: &Set, _args: &[Arg]) -> Result<Option<Begun>> {
        Ok(None)
    }

    /// Runs `core` (which queues the core launches) while the stale halos a
    /// device loop reads are exchanged on `device`.
    fn exchange_device(
        &self,
        _device: &Arc<dyn Device>,
        _set: &Set,
        _args: &[Arg],
        _exec_halo: bool,
        core: &mut dyn FnMut() -> Result<()>,
    ) -> Result<HaloTraffic> {
        core()?;
        Ok(HaloTraffic::default())
    }

    /// After a device loop's launches: reductions across ranks, the
    /// outcome agreed as in [`Distribution::end`].
    fn end_device(&self, _begun: Option<Begun>, _kernel: &Kernel, _args: &[Arg], outcome: Result<()>) -> Result<()> {
        outcome
    }

    /// Runs `core` while the stale halos of the dats `args` read are
    /// exchanged, whole (owned entities and every halo entity): for library
    /// operations that are not loops, such as the matrix product, whose
    /// `core` must read only owned entities. Collective.
    fn refresh(&self, _op: &str, _args: &[Arg], _views: &[ArgView], core: &mut dyn FnMut()) -> Result<HaloTraffic> {
        core();
        Ok(HaloTraffic::default())
    }

    /// [`Distribution::refresh`] on `device`, before anything reads them
    /// there. Collective.
    fn refresh_device(&self, _device: &Arc<dyn Device>, _op: &str, _args: &[Arg]) -> Result<HaloTraffic> {
        Ok(HaloTraffic::default())
    }

    /// After a library operation that wrote the dats of `args` on owned
    /// entities only: their halos are stale.
    fn written(&self, _args: &[Arg]) {}

    /// Sums `values`, this rank's parts of sums over the owned entities of
    /// `set`, across the ranks (every rank gets the totals; a library
    /// operation's reduction, such as the fused product and dot). Nothing
    /// in a serial run or for a set that is not distributed. Collective.
    fn sum_over_ranks(&self, _set: &Set, _values: &mut [f64]) -> Result<()> {
        Ok(())
    }

    /// Whether the halo of dat `id` on `set` is out of date (`None`: the
    /// set has no halo here, nothing to exchange). The lazy trace asks when
    /// it records a loop (halo skipping), before what it has pending.
    fn halo_stale(&self, _set: &Set, _id: u64) -> Option<bool> {
        None
    }

    /// What to run before communicating outside the lazy trace's loops
    /// (the runtime's flush; see `dist::Comm::before_collective`).
    #[cfg(feature = "mpi")]
    fn set_flush(&self, _flush: crate::dist::Flush) {}

    /// This rank's index among the ranks on its node (GPUs are shared
    /// round-robin by it). Collective: every rank calls it.
    fn local_rank(&self) -> usize {
        0
    }
}

/// One process, no communicator: every step is nothing. (With the `mpi`
/// feature a runtime outside MPI is a `dist::Mpi` without a communicator,
/// which also records declarations for `Runtime::partition_preview`.)
#[cfg(not(feature = "mpi"))]
pub(crate) struct Serial;

#[cfg(not(feature = "mpi"))]
impl Distribution for Serial {}

/// The distribution of a runtime built with the solver's communicator
/// `comm` (a duplicate of it: parloop's messages never match the
/// solver's).
#[cfg(feature = "mpi")]
pub(crate) fn over(comm: &mpi::topology::SimpleCommunicator) -> Result<Arc<dyn Distribution>> {
    Ok(Arc::new(crate::dist::Mpi::new(Some(comm))?))
}

/// The distribution of a runtime built without a communicator: the world,
/// when MPI is initialised in this process (feature `mpi`), else no
/// communicator at all ([`Serial`] without the feature). With [`over`], the one place that knows whether the `mpi`
/// feature is on.
pub(crate) fn by_default() -> Result<Arc<dyn Distribution>> {
    #[cfg(feature = "mpi")]
    return match mpi::environment::is_initialized() {
        true => over(&mpi::topology::SimpleCommunicator::world()),
        // No communicator, but declarations recorded for
        // `Runtime::partition_preview`.
        false => Ok(Arc::new(crate::dist::Mpi::new(None)?)),
    };
    #[cfg(not(feature = "mpi"))]
    Ok(Arc::new(Serial))
}
