//! The [`Runtime`]: the context object a solver holds. It declares sets,
//! maps, dats and globals, and runs loops on its backend.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use parloop_planner::{min_bytes, ByteArg, ByteArgKind, Columns, IndirectArg, PlanRequest};

use crate::arg::{Arg, ArgKind};
use crate::backend::{device_loop, Backend};
use crate::decl::{Dat, Global, Map, Sections, Set};
use crate::device::cuda::Cuda;
use crate::device::emu::Emu;
use crate::device::{Device, DeviceProperties};
use crate::distribution::{self, Distribution};
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::names::{Names, Namespace};
use crate::par_loop::ParLoop;
use crate::plan_cache::{DeviceCandidate, LoopKey, LoopPlan, PlanCache};
use crate::profile::{self, LoopReport, Profile, Range};
use crate::run;
use crate::strategy;
use crate::sync::lock;
use crate::types::Access;
use crate::types::Scalar;
use crate::validate::overwrites_through_map;
use parloop_kernels::loops::Strategy;

/// Shared-memory budget of the CPU backends' plan requests (the GPU's
/// classic 48 KiB). It sizes nothing there: their blocks are
/// [`CPU_PART_SIZE`] elements (or `PARLOOP_PART_SIZE`) and nothing is
/// staged; the planner's request carries it all the same.
const CPU_BLOCK_BUDGET: usize = 48 * 1024;

/// Elements per block of the `threads` backend's plans unless
/// `PARLOOP_PART_SIZE` says otherwise: large enough to amortise a block's
/// task and adapter entry, small enough for a block's data to stay in L2.
/// On the standard airfoil grid it runs 1.3-1.7 ms per iteration faster
/// than blocks sized from the 48 KiB budget (docs/PERFORMANCE.md).
const CPU_PART_SIZE: usize = 2048;

/// Plans kept at most; a solver has a few dozen loop shapes.
const PLAN_CACHE_CAPACITY: usize = 256;

/// Where the profile goes when the runtime is dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
enum ProfileOutput {
    None,
    Table,
    Json(String),
}

/// The context a solver holds: backend, plan cache and profile.
///
/// ```
/// use parloop::{Access, Backend, Runtime};
///
/// #[parloop::kernel]
/// fn spread(w: &f64, n1: &mut f64, n2: &mut f64) {
///     *n1 += 0.5 * *w;
///     *n2 += 0.5 * *w;
/// }
///
/// let rt = Runtime::with_backend(Backend::Threads).unwrap();
/// let nodes = rt.set("nodes", 3).unwrap();
/// let edges = rt.set("edges", 2).unwrap();
/// let pedge = rt.map("pedge", &edges, &nodes, 2, vec![0, 1, 1, 2]).unwrap();
/// let w = rt.dat("w", &edges, 1, vec![2.0, 4.0]).unwrap();
/// let n = rt.dat("n", &nodes, 1, vec![0.0; 3]).unwrap();
/// rt.par_loop(spread::KERNEL, &edges, &[
///     w.arg(Access::READ),
///     n.arg_via(&pedge, 0, Access::INC),
///     n.arg_via(&pedge, 1, Access::INC),
/// ]).unwrap();
/// assert_eq!(n.values().unwrap(), vec![1.0, 3.0, 2.0]);
/// ```
pub struct Runtime {
    core: Arc<Core>,
    /// The handle `Runtime::new` returned (not one the trace makes to run
    /// forced loops): its drop flushes the trace and writes the profile.
    owner: bool,
}

/// What a [`Runtime`] holds, shared with its lazy trace (which runs
/// forced loops through a second, non-owning `Runtime` handle on it: the
/// user's `Runtime` may move, the `Core` does not). Nothing public.
#[doc(hidden)]
pub struct Core {
    backend: Backend,
    /// The device of device backends.
    device: Option<Arc<dyn Device>>,
    /// `PARLOOP_STRATEGY`: the increment strategy device loops should use.
    strategy: Mutex<Option<Strategy>>,
    /// `PARLOOP_DETERMINISTIC=1`: automatic choices only among
    /// deterministic strategies.
    deterministic: bool,
    /// `PARLOOP_SIMD`: CPU backends run kernels' lane-wise twins.
    simd: AtomicBool,
    /// Elements per block of new plans; 0: the backend's default.
    part_size: AtomicUsize,
    plans: Mutex<PlanCache>,
    pub(crate) profile: Mutex<Profile>,
    /// Serial, or the communicator and the distributed mesh under MPI.
    pub(crate) dist: Arc<dyn Distribution>,
    profile_output: ProfileOutput,
    /// The names of live declarations, unique per namespace.
    pub(crate) names: Names,
    /// Sparsity patterns built so far (`matrix`).
    pub(crate) matrices: crate::matrix::Caches,
    /// Held while a loop executes: loops run one at a time.
    pub(crate) executing: Mutex<()>,
    /// The lazy trace (`PARLOOP_LAZY=1`; `None`: loops run when submitted).
    pub(crate) trace: Option<crate::trace::Trace>,
    /// Whether the trace fuses direct loops (`trace::fuse`, `PARLOOP_FUSION`).
    pub(crate) fusion: AtomicBool,
    /// Device backends: fused launches prepared so far, by the group's
    /// shape (`trace::fuse`).
    pub(crate) fused_loops: Mutex<crate::trace::fuse::FusedLoops>,
    /// Released temporaries' buffers (`decl::temporary`).
    pub(crate) temporaries: Arc<crate::decl::temporary::Pool>,
    /// Under MPI, the loop shapes whose write races the ranks have agreed
    /// on (`Runtime::agree_write_races`).
    races_agreed: Mutex<crate::word_hash::WordHashSet<Vec<u64>>>,
}

thread_local! {
    /// The loop locks (`Core::executing`, by address) this thread holds.
    static EXECUTING: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// [`Core::one_at_a_time`]'s hold: the lock where this took it, nothing
/// where this thread held it already.
pub(crate) struct OneAtATime<'a> {
    /// Held for the loop lock's sake only (released when this drops).
    guard: Option<std::sync::MutexGuard<'a, ()>>,
    key: usize,
}

impl Drop for OneAtATime<'_> {
    fn drop(&mut self) {
        // (The guard itself drops after this, with the field.)
        if self.guard.is_some() {
            EXECUTING.with(|h| {
                let mut h = h.borrow_mut();
                if let Some(k) = h.iter().rposition(|&x| x == self.key) {
                    h.remove(k);
                }
            });
        }
    }
}

impl std::ops::Deref for Runtime {
    type Target = Core;
    fn deref(&self) -> &Core {
        &self.core
    }
}

use crate::config::{self, var as env};

impl Runtime {
    /// A runtime configured from the environment: `PARLOOP_BACKEND`
    /// (`auto`, `seq`, `threads`, `emu`, `cuda`), `PARLOOP_PART_SIZE`,
    /// `PARLOOP_PROFILE`, `PARLOOP_LAZY` and the rest of the README's table.
    ///
    /// ```
    /// // PARLOOP_BACKEND unset: the GPU when one is present, else all cores.
    /// let rt = parloop::Runtime::new()?;
    /// println!("loops run on {}", rt.backend());
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn new() -> Result<Runtime> {
        let backend = match env("PARLOOP_BACKEND") {
            Some(b) => b.parse()?,
            None => Backend::auto(),
        };
        Runtime::with_backend(backend)
    }

    /// A runtime on `backend` whose distributed loops use (a duplicate of)
    /// `comm` instead of the world communicator.
    #[cfg(feature = "mpi")]
    pub fn with_communicator(backend: Backend, comm: &mpi::topology::SimpleCommunicator) -> Result<Runtime> {
        Runtime::build(backend, || distribution::over(comm))
    }

    /// [`Runtime::with_communicator`] with the lazy trace on or off
    /// (`lazy`), whatever `PARLOOP_LAZY` says. Under MPI a forcing point
    /// runs every recorded loop, and communication outside loops (gather,
    /// partition, the matrix product) runs them first; call
    /// [`Runtime::flush`] before your own MPI calls (see `ARCHITECTURE.md`).
    ///
    /// ```no_run
    /// # let universe = parloop::mpi::initialize()?;
    /// let rt = parloop::Runtime::with_communicator_lazy(parloop::Backend::Seq, &universe.world(), true)?;
    /// assert!(rt.lazy());
    /// # Ok::<(), parloop::Error>(())
    /// ```
    #[cfg(feature = "mpi")]
    pub fn with_communicator_lazy(
        backend: Backend,
        comm: &mpi::topology::SimpleCommunicator,
        lazy: bool,
    ) -> Result<Runtime> {
        Runtime::build_with(backend, || distribution::over(comm), Some(lazy))
    }

    /// A runtime on `backend`; other settings come from the environment.
    /// Under MPI (with the `mpi` feature) its communicator is the world.
    ///
    /// ```
    /// use parloop::{Backend, Runtime};
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// assert_eq!(rt.backend(), Backend::Seq);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn with_backend(backend: Backend) -> Result<Runtime> {
        Runtime::build(backend, distribution::by_default)
    }

    /// A runtime on `backend` whose loops are recorded in a lazy trace
    /// (`lazy`) or run when submitted, whatever `PARLOOP_LAZY` says; other
    /// settings come from the environment (see [`Runtime::execute`]; under
    /// MPI, `Runtime::with_communicator_lazy` (feature `mpi`)).
    ///
    /// ```
    /// # use parloop::{Backend, Runtime};
    /// let rt = Runtime::with_lazy(Backend::Seq, true)?;
    /// assert!(rt.lazy());
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn with_lazy(backend: Backend, lazy: bool) -> Result<Runtime> {
        Runtime::build_with(backend, distribution::by_default, Some(lazy))
    }

    /// A runtime on `backend`, distributed as `dist` says (after the
    /// environment is checked).
    fn build(backend: Backend, dist: impl FnOnce() -> Result<Arc<dyn Distribution>>) -> Result<Runtime> {
        Runtime::build_with(backend, dist, None)
    }

    fn build_with(
        backend: Backend,
        dist: impl FnOnce() -> Result<Arc<dyn Distribution>>,
        lazy: Option<bool>,
    ) -> Result<Runtime> {
        config::check_others()?;
        let dist = dist()?;
        let part_size = config::number("PARLOOP_PART_SIZE", |n| n > 0, "a positive integer")?;
        // Trimmed as the switches are (`" 1"` is 1); a path keeps its spaces.
        let profile_output = match env("PARLOOP_PROFILE") {
            None => ProfileOutput::None,
            Some(v) if v.trim() == "0" || v.trim().is_empty() => ProfileOutput::None,
            Some(v) if v.trim() == "1" => ProfileOutput::Table,
            Some(v) => match v.trim_start().strip_prefix("json:") {
                Some(path) if !path.is_empty() => {
                    // Found out now, not when the runtime is dropped at the
                    // end of a long run: the file must be writable. Not
                    // emptied: a runtime that runs no loop (a helper a
                    // program makes before its real one) leaves the file
                    // to the runtime that does.
                    std::fs::OpenOptions::new()
                        .append(true)
                        .create(true)
                        .open(profile_path_for(path, 1, dist.ranks(), dist.rank()))
                        .map_err(|source| Error::Io { path: format!("PARLOOP_PROFILE={v}"), source })?;
                    ProfileOutput::Json(path.into())
                }
                _ => {
                    return Err(Error::Env {
                        var: "PARLOOP_PROFILE",
                        value: v,
                        reason: "expected 0, 1 or json:FILE".into(),
                    })
                }
            },
        };
        let device: Option<Arc<dyn Device>> = match backend {
            Backend::Emu => Some(Arc::new(Emu::new()?)),
            Backend::Cuda => {
                // Ranks on one node share its GPUs round-robin by their rank
                // on the node (collective: every rank builds the same backend).
                Some(Arc::new(Cuda::new(dist.local_rank())?))
            }
            Backend::Seq | Backend::Threads => None,
        };
        let strategy = strategy::from_env()?;
        let deterministic = config::switch("PARLOOP_DETERMINISTIC", false)?;
        if deterministic && matches!(strategy, Some(Strategy::Atomic | Strategy::StagedAtomic)) {
            return Err(Error::Env {
                var: "PARLOOP_STRATEGY",
                value: config::var("PARLOOP_STRATEGY").unwrap_or_default(),
                reason: "an atomic strategy, whose additions land in an order that changes from run to run, while \
                         PARLOOP_DETERMINISTIC=1 asks for results bitwise the same each run: expected staged, \
                         global-colour or auto"
                    .into(),
            });
        }
        let simd = match env("PARLOOP_SIMD").as_deref().map(str::trim) {
            // `avx2` caps the instruction set (see `lanes::vector_isa`).
            None | Some("1") | Some("avx2") => true,
            Some("0") => false,
            Some(v) => {
                return Err(Error::Env { var: "PARLOOP_SIMD", value: v.into(), reason: "expected 0, 1 or avx2".into() })
            }
        };
        // Under MPI every forcing point runs the whole trace, in recording
        // order (`Trace::force`), and communication outside loops flushes
        // first (`dist::Comm::before_collective`): a rank-local host read
        // runs loops early on one rank, whose exchanges then wait for the
        // other ranks to reach them, as in an eager run.
        let lazy = match lazy {
            Some(l) => l,
            None => config::switch("PARLOOP_LAZY", false)?,
        };
        let ranks = (dist.ranks(), dist.rank());
        // Replay of recurring windows (`trace::replay`), on with the trace
        // (serial sets only: replay never tapes a distributed loop).
        // Checked with the trace off too: every PARLOOP_* value is.
        let replay = config::switch("PARLOOP_REPLAY", true)? && lazy;
        let fusion = config::switch("PARLOOP_FUSION", true)?;
        let core = Arc::new_cyclic(|me| Core {
            backend,
            device,
            strategy: Mutex::new(strategy),
            deterministic,
            simd: AtomicBool::new(simd),
            part_size: AtomicUsize::new(part_size.unwrap_or(0)),
            plans: Mutex::new(PlanCache::new(PLAN_CACHE_CAPACITY)),
            dist,
            profile: Mutex::new(Profile::default()),
            profile_output,
            names: Names::default(),
            matrices: Default::default(),
            executing: Mutex::new(()),
            trace: lazy.then(|| crate::trace::Trace::new(me.clone(), ranks, replay)),
            fusion: AtomicBool::new(fusion),
            fused_loops: Mutex::default(),
            temporaries: Default::default(),
            races_agreed: Mutex::default(),
        });
        let weak = Arc::downgrade(&core);
        core.names.set_release(Box::new(move || {
            if let Some(core) = weak.upgrade() {
                Runtime::handle(core).release_for_names();
            }
        }));
        #[cfg(feature = "mpi")]
        if core.trace.is_some() {
            let weak = Arc::downgrade(&core);
            core.dist.set_flush(Box::new(move || match weak.upgrade() {
                Some(core) => Runtime::handle(core).flush(),
                None => Ok(()),
            }));
        }
        Ok(Runtime { core, owner: true })
    }

    /// A handle on `core` that does not own it (the trace runs forced
    /// loops with it; its drop does nothing).
    pub(crate) fn handle(core: Arc<Core>) -> Runtime {
        Runtime { core, owner: false }
    }

    /// The backend loops run on.
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Threads)?;
    /// assert_eq!(rt.backend().name(), "threads");
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Chooses the increment strategy of device loops (`None`: automatic,
    /// as `PARLOOP_STRATEGY=auto`). A strategy that cannot run a loop
    /// correctly (atomics on an indirect RW argument) is replaced by
    /// [`Strategy::Staged`] for that loop. An explicit choice here wins
    /// over `PARLOOP_DETERMINISTIC=1` (which refuses an atomic
    /// `PARLOOP_STRATEGY` when a runtime is made).
    pub fn set_strategy(&mut self, strategy: Option<Strategy>) {
        // Recorded loops run with the settings they were recorded under.
        self.flush_quietly();
        *lock(&self.strategy) = strategy;
    }

    /// The strategy device loops are asked to use (`None`: automatic).
    pub fn strategy(&self) -> Option<Strategy> {
        *lock(&self.core.strategy)
    }

    /// Whether automatic choices keep to deterministic strategies
    /// (`PARLOOP_DETERMINISTIC=1`).
    pub(crate) fn deterministic(&self) -> bool {
        self.deterministic
    }

    /// The device of device backends.
    pub(crate) fn device(&self) -> Option<&Arc<dyn Device>> {
        self.device.as_ref()
    }

    /// Sets whether the CPU backends run kernels four (AVX2) or eight
    /// (AVX-512) elements at a time with SIMD, where a kernel has lane-wise
    /// twins and the CPU has AVX2 (on by default; `PARLOOP_SIMD=0` turns it
    /// off). Results are bitwise the same either way; this switch exists to
    /// measure and to diagnose.
    ///
    /// ```
    /// let mut rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// rt.set_simd(false);
    /// assert!(!rt.simd());
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn set_simd(&mut self, simd: bool) {
        self.flush_quietly();
        self.core.simd.store(simd, Ordering::Relaxed);
    }

    /// Whether kernels' lane-wise twins run (see [`Runtime::set_simd`]).
    pub fn simd(&self) -> bool {
        self.core.simd.load(Ordering::Relaxed)
    }

    /// Overrides the elements per block of new plans (`None`: 2048 for the
    /// `threads` backend, from the shared-memory budget on devices).
    /// `Some(0)` is an error (`PARLOOP_PART_SIZE=0` is too); nothing
    /// changes then.
    ///
    /// ```
    /// let mut rt = parloop::Runtime::with_backend(parloop::Backend::Threads)?;
    /// rt.set_part_size(Some(256))?;
    /// assert!(rt.set_part_size(Some(0)).is_err());
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn set_part_size(&mut self, part_size: Option<usize>) -> Result<()> {
        if part_size == Some(0) {
            return Err(Error::Backend {
                name: self.backend.name().into(),
                reason: "set_part_size: a part of 0 elements holds nothing; give a positive size, or None for \
                         the backend's default"
                    .into(),
            });
        }
        self.flush_quietly();
        self.core.part_size.store(part_size.unwrap_or(0), Ordering::Relaxed);
        Ok(())
    }

    /// Elements per block of new plans (`None`: the backend's default).
    pub(crate) fn part_size(&self) -> Option<usize> {
        Some(self.core.part_size.load(Ordering::Relaxed)).filter(|&n| n > 0)
    }

    /// Declares a set of `size` entities (a serial set: all core). Names
    /// are unique among the runtime's live sets.
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// let cells = rt.set("cells", 10)?;
    /// assert!(matches!(rt.set("cells", 5), Err(parloop::Error::DuplicateName { .. })));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn set(&self, name: &str, size: usize) -> Result<Set> {
        self.set_with_sections(name, Sections { core: size, ..Sections::default() })
    }

    /// Declares a set with explicit section sizes; sections whose sum
    /// overflows `usize` are an [`Error::SizeOverflow`].
    ///
    /// ```
    /// use parloop::Sections;
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// // 6 entities whose loops need no halo, 2 that do, 1 halo copy executed.
    /// let nodes = rt.set_with_sections("nodes", Sections { core: 6, owned: 2, exec: 1, non_exec: 0 })?;
    /// assert_eq!((nodes.size(), nodes.total()), (8, 9));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn set_with_sections(&self, name: &str, sections: Sections) -> Result<Set> {
        let set = self.names.declare(Namespace::Set, "set", name, || Set::new(name, sections), |s| &s.0)?;
        self.dist.declared_set(&set);
        Ok(set)
    }

    /// Declares a map of `arity` targets per entity of `from`, each a valid
    /// index of `to`; an out-of-range value is an error naming the entity.
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// let nodes = rt.set("nodes", 3)?;
    /// let edges = rt.set("edges", 2)?;
    /// // Edge 0 joins nodes 0 and 1, edge 1 nodes 1 and 2.
    /// let pedge = rt.map("pedge", &edges, &nodes, 2, vec![0, 1, 1, 2])?;
    /// assert_eq!(pedge.arity(), 2);
    /// // Node 3 does not exist: the error names the map, the edge and the value.
    /// let err = rt.map("bad", &edges, &nodes, 2, vec![0, 1, 1, 3]).unwrap_err();
    /// assert!(matches!(err, parloop::Error::MapValueOutOfRange { entity: 1, value: 3, .. }), "{err}");
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn map(&self, name: &str, from: &Set, to: &Set, arity: usize, values: Vec<i32>) -> Result<Map> {
        let map =
            self.names.declare(Namespace::Map, "map", name, || Map::new(name, from, to, arity, values), |m| &m.0)?;
        self.dist.declared_map(&map);
        Ok(map)
    }

    /// Declares a dat of `dim` values per entity of `set`.
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// let nodes = rt.set("nodes", 3)?;
    /// // Two values (x, y) per node, node after node.
    /// let coords = rt.dat("coords", &nodes, 2, vec![0.0f64, 0.0, 1.0, 0.0, 0.0, 1.0])?;
    /// assert_eq!(coords.dim(), 2);
    /// // The length must be set size times dim.
    /// assert!(matches!(rt.dat("short", &nodes, 2, vec![0.0f64; 5]), Err(parloop::Error::WrongLength { .. })));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn dat<T: Scalar>(&self, name: &str, set: &Set, dim: usize, values: Vec<T>) -> Result<Dat<T>> {
        let dat = self.names.declare(Namespace::Data, "dat", name, || Dat::new(name, set, dim, values), |d| &d.0)?;
        self.dist.declared_dat(Arc::downgrade(&dat.0) as _);
        Ok(dat)
    }

    /// Forgets every cached plan (the maps changed under them).
    #[cfg(feature = "mpi")]
    pub(crate) fn clear_plans(&self) {
        *lock(&self.plans) = PlanCache::new(PLAN_CACHE_CAPACITY);
    }

    /// This process's rank in the runtime's communicator (0 when serial).
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// if rt.rank() == 0 {
    ///     println!("{} rank(s)", rt.ranks());
    /// }
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn rank(&self) -> usize {
        self.dist.rank()
    }

    /// Ranks in the runtime's communicator (1 when serial).
    pub fn ranks(&self) -> usize {
        self.dist.ranks()
    }

    /// What the all-reduces of globals across ranks did: started, how
    /// many were complete before the global was next needed, the time
    /// spent waiting (all zero when serial).
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// assert_eq!(rt.reduction_stats().started, 0);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn reduction_stats(&self) -> crate::distribution::ReductionStats {
        self.dist.reduction_stats()
    }

    /// Under MPI with more than one rank, ends the whole job with `err`
    /// and this rank's number, so that the other ranks do not hang waiting
    /// for this one; otherwise returns `err`. Solvers call it on errors
    /// they cannot handle.
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// let err = parloop::Error::Input { source_name: "grid".into(), line: 3, reason: "bad number".into() };
    /// assert!(matches!(rt.fail(err), parloop::Error::Input { .. }));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn fail(&self, err: Error) -> Error {
        self.dist.fail(err)
    }

    /// Declares a global with the given initial values.
    ///
    /// ```
    /// use parloop::{Access, Backend, Runtime};
    ///
    /// #[parloop::kernel]
    /// fn total(x: &f64, sum: &mut f64) {
    ///     *sum += *x;
    /// }
    ///
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// let cells = rt.set("cells", 3)?;
    /// let x = rt.dat("x", &cells, 1, vec![1.0, 2.0, 4.0])?;
    /// let sum = rt.global("sum", &[0.0f64])?;
    /// rt.par_loop(total::KERNEL, &cells, &[x.arg(Access::READ), sum.arg(Access::INC)])?;
    /// assert_eq!(sum.value()?, 7.0);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn global<T: Scalar>(&self, name: &str, values: &[T]) -> Result<Global<T>> {
        self.names.declare(Namespace::Data, "global", name, || Global::new(name, values), |g| &g.0)
    }

    /// A dat of the runtime's own (a solver's work vector) named `base`,
    /// or a free variant of it (`Names::declare_internal`).
    pub(crate) fn internal_dat<T: Scalar>(&self, base: &str, set: &Set, dim: usize, values: Vec<T>) -> Result<Dat<T>> {
        let dat = self.names.declare_internal(
            Namespace::Data,
            "dat",
            base,
            |name| Dat::new(name, set, dim, values),
            |d| &d.0,
        )?;
        self.dist.declared_dat(Arc::downgrade(&dat.0) as _);
        Ok(dat)
    }

    /// A global of the runtime's own (a reduction's result, an operation's
    /// scalar) named `base`, or a free variant of it.
    pub(crate) fn internal_global<T: Scalar>(&self, base: &str, values: &[T]) -> Result<Global<T>> {
        self.names.declare_internal(Namespace::Data, "global", base, |name| Global::new(name, values), |g| &g.0)
    }

    /// Runs `kernel` over every element of `set` with `args`, one argument per
    /// kernel parameter. Arguments are validated first: on error nothing runs
    /// and no data changes. A loop over an empty set does nothing.
    /// `set` is a [`Set`] or a [`Subset`](crate::Subset) (see [`LoopSet`](crate::LoopSet)).
    /// With `PARLOOP_LAZY=1` the loop is recorded and runs when something
    /// needs its results (see [`Runtime::execute`]).
    ///
    /// ```
    /// use parloop::{Access, Backend, Runtime};
    ///
    /// /// Each edge adds its weight to its two nodes.
    /// #[parloop::kernel]
    /// fn spread(w: &f64, a: &mut f64, b: &mut f64) {
    ///     *a += *w;
    ///     *b += *w;
    /// }
    ///
    /// let rt = Runtime::with_backend(Backend::Threads)?;
    /// let nodes = rt.set("nodes", 3)?;
    /// let edges = rt.set("edges", 2)?;
    /// let pedge = rt.map("pedge", &edges, &nodes, 2, vec![0, 1, 1, 2])?;
    /// let w = rt.dat("w", &edges, 1, vec![1.0, 10.0])?;
    /// let r = rt.dat("r", &nodes, 1, vec![0.0; 3])?;
    /// let args = [w.arg(Access::READ), r.arg_via(&pedge, 0, Access::INC), r.arg_via(&pedge, 1, Access::INC)];
    /// rt.par_loop(spread::KERNEL, &edges, &args)?;
    /// assert_eq!(r.values()?, vec![1.0, 11.0, 10.0]);
    /// // An argument that does not fit the kernel is refused, naming it; nothing ran.
    /// let err = rt.par_loop(spread::KERNEL, &edges, &args[..2]).unwrap_err();
    /// assert!(err.to_string().contains("spread"), "{err}");
    /// assert_eq!(r.values()?, vec![1.0, 11.0, 10.0]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    #[track_caller]
    pub fn par_loop<'s>(
        &self,
        kernel: &'static Kernel,
        set: impl Into<crate::par_loop::LoopSet<'s>>,
        args: &[Arg],
    ) -> Result<()> {
        self.execute(&ParLoop::new(kernel, set, args)?)
    }

    /// Executes a validated loop. Loops of one runtime run one at a
    /// time: a loop submitted from another thread meanwhile waits for this
    /// one (it is never refused for that), so a `Runtime` may be shared
    /// between threads.
    ///
    /// With `PARLOOP_LAZY=1` (serial runs) the loop is recorded in the
    /// runtime's trace instead and runs when a host access needs what it
    /// writes (a dat's or global's values, a matrix, file output), at
    /// [`Runtime::flush`] or when the runtime is dropped; an error it
    /// raises then is an [`Error::Deferred`] naming the loop and this
    /// call's location, and the loops recorded after it are discarded.
    /// Arguments are validated here either way. Inside a `with_values`
    /// closure, loops run at once, as without the trace.
    ///
    /// ```
    /// use parloop::{Access, Backend, ParLoop, Runtime};
    /// #[parloop::kernel] fn double(a: &mut f64) { *a *= 2.0; }
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// let s = rt.set("s", 2)?;
    /// let a = rt.dat("a", &s, 1, vec![1.0, 2.0])?;
    /// let lp = ParLoop::new(double::KERNEL, &s, &[a.arg(Access::RW)])?;
    /// rt.execute(&lp)?;
    /// rt.execute(&lp)?;
    /// assert_eq!(a.values()?, vec![4.0, 8.0]); // forces both, if lazy
    /// # Ok::<(), parloop::Error>(())
    /// ```
    #[track_caller]
    pub fn execute(&self, lp: &ParLoop) -> Result<()> {
        crate::decl::temporary::check_loop(lp)?;
        self.execute_checked(lp)?;
        crate::decl::temporary::mark_loop(lp);
        Ok(())
    }

    #[track_caller]
    fn execute_checked(&self, lp: &ParLoop) -> Result<()> {
        let at = std::panic::Location::caller();
        self.agree_write_races(lp)?;
        if let Some(trace) = &self.trace {
            if !crate::host_access::holds_any() && !crate::trace::forcing_here() {
                // What planning checks (write races, sizes) is validation:
                // returned here, not when the loop runs.
                if trace.record(self, lp, || self.plan_for(lp), at, &[])? {
                    return Ok(());
                }
            }
            // Run now, after what it depends on.
            trace.eager(self, lp, at)?;
            let ran =
                crate::trace::run_as_forced(|| crate::trace::run_unrecorded_loop(lp, at, || self.execute_now(lp)));
            trace.release_kept_alive();
            return ran;
        }
        crate::trace::run_unrecorded_loop(lp, at, || self.execute_now(lp))
    }

    /// Under MPI, the write-race check (`validate::check_write_races`) of a
    /// loop shape's first submission, agreed between the ranks: a race
    /// lies in one rank's elements, and that rank alone returned its error
    /// while the others ran the loop and waited for it in the loop's
    /// exchanges. Keyed by what a race depends on (the set, the maps and
    /// columns written through, which arguments share a dat), not by this
    /// rank's section sizes as plans are, so that every rank agrees at the
    /// same loop; once per shape (an all-reduce, after the pending loops).
    fn agree_write_races(&self, lp: &ParLoop) -> Result<()> {
        let (set, args) = (lp.set(), lp.args());
        // Loops run inside a forcing are the trace's own (agreed when
        // recorded) or a library operation's inner loops (a device
        // assembly's), which a force on one rank alone may run early:
        // agreeing there would leave the ranks at different all-reduces.
        if self.dist.ranks() <= 1
            || !set.is_distributed()
            || crate::trace::forcing_here()
            || !args.iter().any(overwrites_through_map)
        {
            return Ok(());
        }
        let mut shape = vec![set.id()];
        for (i, a) in args.iter().enumerate().filter(|(_, a)| overwrites_through_map(a)) {
            let shares_with = args.iter().position(|b| b.data_id() == a.data_id()).unwrap_or(i);
            shape.extend([i as u64, shares_with as u64, u64::from(a.access == Access::Write)]);
            match &a.kind {
                ArgKind::Indirect { map, column } => shape.extend([map.id(), *column as u64]),
                ArgKind::Vector { map } => shape.extend([map.id(), u64::MAX]),
                ArgKind::Mat(m) => shape.extend([m.row_map.id(), m.col_map.id()]),
                _ => {}
            }
        }
        if lock(&self.races_agreed).contains(&shape) {
            return Ok(());
        }
        let executed: usize = lp.sections().sizes().iter().sum();
        let local = crate::validate::check_write_races(lp.kernel(), set, args, executed);
        set.agreed_data(&format!("loop `{}` over `{}`", lp.kernel().name(), set.name()), local, "")?;
        // Only a shape that passed everywhere: a failed one is checked (and
        // agreed) again when it is submitted again. Bounded: a program
        // making sets or maps every step would grow it without end; every
        // rank inserts the same shapes in the same order, so all clear it
        // at the same loop.
        let mut agreed = lock(&self.races_agreed);
        if agreed.len() >= 4096 {
            agreed.clear();
        }
        agreed.insert(shape);
        Ok(())
    }

    /// The plan `execute_now` will use for `lp` (built and cached on first
    /// use); nothing for matrix loops on a device, which plan their parts.
    fn plan_for(&self, lp: &ParLoop) -> Result<Option<(Arc<LoopPlan>, Duration)>> {
        if self.device.is_some() && lp.args().iter().any(|a| matches!(a.kind, ArgKind::Mat(_))) {
            return Ok(None);
        }
        let sections = lp.sections();
        let needs_plan = self.backend == Backend::Threads && sections.exec_halo;
        self.loop_plan(lp.kernel(), lp.set(), &sections.sizes(), needs_plan, self.strategy(), lp.args()).map(Some)
    }

    /// Runs every recorded loop (a no-op without `PARLOOP_LAZY=1`); the
    /// first error stops the run and is returned (see
    /// [`Runtime::execute`]).
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// rt.flush()?;
    /// assert_eq!(rt.trace_stats().loops_recorded, 0);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    #[track_caller]
    pub fn flush(&self) -> Result<()> {
        match &self.trace {
            Some(trace) => trace.force(std::panic::Location::caller(), None),
            None => Ok(()),
        }
    }

    /// Runs every recorded loop, then waits until the device's compute
    /// stream has finished the loops and products queued on it (not copies
    /// on the halo stream): device loops return once launched, so a
    /// timing of device work reads its clock after this. On host backends
    /// loops finish before they return, and this is [`Runtime::flush`].
    ///
    /// ```
    /// # use parloop::{Access, Backend, Runtime};
    /// #[parloop::kernel] fn one(x: &mut f64) { *x = 1.0; }
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// let s = rt.set("s", 8)?;
    /// let x = rt.dat("x", &s, 1, vec![0.0; 8])?;
    /// let start = std::time::Instant::now();
    /// rt.par_loop(one::KERNEL, &s, &[x.arg(Access::WRITE)])?;
    /// rt.synchronize()?; // the loop has run wherever it runs
    /// let seconds = start.elapsed().as_secs_f64();
    /// assert!(seconds >= 0.0);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    #[track_caller]
    pub fn synchronize(&self) -> Result<()> {
        self.flush()?;
        match &self.device {
            Some(device) => device.synchronize(),
            None => Ok(()),
        }
    }

    /// Flushes where no error can be returned: it surfaces at the next
    /// forcing point instead.
    #[track_caller]
    /// Before a name is refused as held: lets go of the device tables of
    /// dropped matrices (they hold their loops' sets), runs the pending
    /// loops (their
    /// error, if any, surfaces at the next forcing point) and drops the
    /// records the trace keeps for reuse, which hold their loops' sets and
    /// maps: a set or map the program dropped is then gone, and its name
    /// free, as in an eager run. Not from inside a host access or a force
    /// (nothing may run there): the name stays held then.
    fn release_for_names(&self) {
        self.matrices.device.prune();
        let Some(trace) = &self.trace else { return };
        if crate::host_access::holds_any() || crate::trace::forcing_here() {
            return;
        }
        self.flush_quietly();
        trace.release_kept_records();
    }

    fn flush_quietly(&self) {
        if let Some(trace) = &self.trace {
            if let Err(e) = trace.force_labelled(
                "the runtime's own flush (a setting changed, the profile read, a name declared again)",
                None,
            ) {
                trace.defer(e);
            }
        }
    }

    /// Whether loops are recorded (`PARLOOP_LAZY=1`) rather than run when
    /// submitted.
    ///
    /// ```
    /// let rt = parloop::Runtime::with_lazy(parloop::Backend::Seq, true)?;
    /// assert!(rt.lazy());
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn lazy(&self) -> bool {
        self.trace.is_some()
    }

    /// Turns replay of recurring loop sequences on or off (on by default
    /// with the lazy trace; `PARLOOP_REPLAY=0` turns it off). A sequence
    /// of loops and forcing points that recurs from an empty trace (a
    /// time step) is run with the schedule and plans kept from its first
    /// run, without building the DAG; anything that differs takes the full
    /// path. Results are the same either way; a no-op without the trace.
    ///
    /// ```
    /// use parloop::{Access, Backend, Runtime};
    /// #[parloop::kernel] fn inc(a: &mut f64) { *a += 1.0; }
    /// let rt = Runtime::with_lazy(Backend::Seq, true)?;
    /// rt.set_replay(true);
    /// let s = rt.set("s", 2)?;
    /// let a = rt.dat("a", &s, 1, vec![0.0; 2])?;
    /// for _ in 0..3 {
    ///     rt.par_loop(inc::KERNEL, &s, &[a.arg(Access::RW)])?;
    ///     a.values()?; // the forcing point ending each step
    /// }
    /// assert_eq!(a.values()?, vec![3.0, 3.0]);
    /// assert_eq!(rt.trace_stats().loops_replayed, 2); // steps 2 and 3
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn set_replay(&self, on: bool) {
        if let Some(t) = &self.trace {
            t.set_replay(on);
        }
    }

    /// Loop sequences kept for replay (see [`Runtime::set_replay`]).
    pub fn replay_segments(&self) -> usize {
        self.trace.as_ref().map(|t| t.replay_segments()).unwrap_or(0)
    }

    /// What the lazy trace has recorded, run, skipped and discarded so far
    /// (all zero when loops run eagerly).
    ///
    /// ```
    /// use parloop::{Access, Backend, Runtime};
    /// #[parloop::kernel]
    /// fn double(x: &mut f64) {
    ///     *x *= 2.0;
    /// }
    /// let rt = Runtime::with_lazy(Backend::Seq, true)?;
    /// let s = rt.set("s", 4)?;
    /// let x = rt.dat("x", &s, 1, vec![1.0; 4])?;
    /// rt.par_loop(double::KERNEL, &s, &[x.arg(Access::RW)])?;
    /// assert_eq!(x.values()?, vec![2.0; 4]);
    /// assert_eq!(rt.trace_stats().loops_recorded, 1);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn trace_stats(&self) -> crate::trace::TraceStats {
        let mut stats = self.trace.as_ref().map(|t| t.stats()).unwrap_or_default();
        stats.temporaries_reused = self.temporaries.reused();
        stats
    }

    /// Turns halo skipping on (the default) or off: with it, a loop's
    /// halo exchange is recorded only when the halo is stale (written since
    /// it was last exchanged, by a loop run or recorded); without it every
    /// halo a loop reads is recorded (seed 000's DAGs before its
    /// simplifications). Runs make the same exchanges either way: the
    /// distribution exchanges stale halos only. Counters:
    /// [`TraceStats::exchanges_skipped`](crate::trace::TraceStats::exchanges_skipped),
    /// `exchanges_removed`.
    ///
    /// ```
    /// let rt = parloop::Runtime::with_lazy(parloop::Backend::Seq, true)?;
    /// rt.set_halo_skipping(false);
    /// assert_eq!(rt.trace_stats().exchanges_skipped, 0);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn set_halo_skipping(&self, on: bool) {
        if let Some(t) = &self.trace {
            t.set_halo_skipping(on);
        }
    }

    /// Where the lazy trace was forced (source locations of the host
    /// accesses, `par_loop` calls and flushes that ran recorded loops),
    /// most frequent first: where a time step synchronises.
    ///
    /// ```
    /// use parloop::{Access, Backend, Runtime};
    /// #[parloop::kernel]
    /// fn double(x: &mut f64) {
    ///     *x *= 2.0;
    /// }
    /// let rt = Runtime::with_lazy(Backend::Seq, true)?;
    /// let s = rt.set("s", 4)?;
    /// let x = rt.dat("x", &s, 1, vec![1.0; 4])?;
    /// rt.par_loop(double::KERNEL, &s, &[x.arg(Access::RW)])?;
    /// x.values()?; // a forcing point: this line
    /// for point in rt.forcing_points() {
    ///     println!("{point:?}");
    /// }
    /// assert!(!rt.forcing_points().is_empty());
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn forcing_points(&self) -> Vec<crate::trace::ForcingPoint> {
        self.trace.as_ref().map(|t| t.forcing_points()).unwrap_or_default()
    }

    /// Writes the pending computations of the lazy trace as a Graphviz
    /// digraph (seed 000's labels: `kernel[core,owned]`, `HaloSend(dat)`,
    /// ..., between `top` and `bot`; edges transitively reduced). Without
    /// the trace, the graph is empty.
    pub fn trace_dot(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.trace_dot_string())
            .map_err(|source| Error::Io { path: path.display().to_string(), source })
    }

    /// The Graphviz text [`Runtime::trace_dot`] writes.
    ///
    /// ```
    /// use parloop::{Access, Backend, Runtime};
    /// #[parloop::kernel]
    /// fn double(x: &mut f64) {
    ///     *x *= 2.0;
    /// }
    /// let rt = Runtime::with_lazy(Backend::Seq, true)?;
    /// let s = rt.set("s", 4)?;
    /// let x = rt.dat("x", &s, 1, vec![1.0; 4])?;
    /// rt.par_loop(double::KERNEL, &s, &[x.arg(Access::RW)])?;
    /// assert!(rt.trace_dot_string().contains("double"));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn trace_dot_string(&self) -> String {
        match &self.trace {
            Some(t) => t.dot(),
            None => crate::trace::dot::empty(),
        }
    }

    /// The pending computations of the lazy trace as the edges of the DAG
    /// [`Runtime::trace_dot`] draws: (from, to) label pairs, sorted, with
    /// `top` and `bot`, transitively reduced. Without the trace (or with
    /// nothing pending) it is `[("top", "bot")]`.
    ///
    /// ```
    /// use parloop::{Access, Backend, Runtime};
    /// #[parloop::kernel]
    /// fn halve(x: &mut f64) {
    ///     *x *= 0.5;
    /// }
    /// let rt = Runtime::with_lazy(Backend::Seq, true)?;
    /// let cells = rt.set("cells", 4)?;
    /// let x = rt.dat("x", &cells, 1, vec![1.0; 4])?;
    /// rt.par_loop(halve::KERNEL, &cells, &[x.arg(Access::RW)])?;
    /// rt.par_loop(halve::KERNEL, &cells, &[x.arg(Access::RW)])?;
    /// let edge = |a: &str, b: &str| (a.to_string(), b.to_string());
    /// assert_eq!(
    ///     rt.trace_edges(),
    ///     [edge("halve[core]", "bot"), edge("halve[core]", "halve[core]"), edge("top", "halve[core]")]
    /// );
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn trace_edges(&self) -> Vec<(String, String)> {
        match &self.trace {
            Some(t) => t.reduced().edges(),
            None => crate::trace::dot::empty_edges(),
        }
    }

    /// Runs a validated loop now (what the trace calls for forced loops).
    pub(crate) fn execute_now(&self, lp: &ParLoop) -> Result<()> {
        self.execute_planned(lp, None)
    }

    /// As `execute_now`, with the plan looked up when the loop was
    /// recorded (the trace's loops: one plan-cache lookup per loop, not two).
    pub(crate) fn execute_planned(&self, lp: &ParLoop, planned: Option<(Arc<LoopPlan>, Duration)>) -> Result<()> {
        // Taken before a device assembly too: it was taken by the assembly's
        // inner loop only, so two threads' assemblies zeroed, filled and
        // scattered the same element matrices (and scattered into one
        // matrix) at once, losing and doubling increments.
        let _one_at_a_time = self.one_at_a_time();
        if let Some(device) = &self.device {
            if lp.args().iter().any(|a| matches!(a.kind, ArgKind::Mat(_))) {
                // Element matrices first (a loop of its own, run under this
                // hold), then their scatter (`matrix::device`), whose
                // launches use the copies' addresses outside a `Launcher`
                // (which occupies the device for other loops, see
                // `device::Occupant`).
                let _occupied = device.occupant().enter();
                return self.assemble_on_device(device, lp);
            }
        }
        let kernel = lp.kernel();
        let _range = match lp.tags() {
            "" => Range::new(kernel.name()),
            tags => Range::lazy(|| crate::profile::label(kernel.name(), tags)),
        };
        let sections = lp.sections();
        let (plan, plan_time) = match planned {
            Some(p) => p,
            None => {
                let needs_plan = self.backend == Backend::Threads && sections.exec_halo;
                self.loop_plan(kernel, lp.set(), &sections.sizes(), needs_plan, self.strategy(), lp.args())?
            }
        };
        let ran = match &self.device {
            Some(device) => {
                let profiled = self.profile_output != ProfileOutput::None;
                run::on_device(device, self.dist.as_ref(), &plan, profiled, lp, &sections, self.part_size())
            }
            None => run::on_host(self.backend, self.simd(), self.dist.as_ref(), &plan, lp, &sections),
        }
        .map_err(|e| crate::kernel_panic::locate(e, lp.set()))?;
        let mut profile = lock(&self.profile);
        profile.record((kernel.path(), lp.tags()), ran.elapsed, plan_time + ran.prepared, plan.bytes);
        profile.record_halo((kernel.path(), lp.tags()), ran.halo);
        Ok(())
    }

    /// Holds the runtime's loop lock (`executing`: loops run one at a
    /// time) until dropped; re-entrant on this thread, so that work that
    /// holds it for a whole operation (a device assembly) runs its own
    /// loops, and the trace's loops they depend on, under the same hold.
    pub(crate) fn one_at_a_time(&self) -> OneAtATime<'_> {
        let key = &self.executing as *const Mutex<()> as usize;
        if EXECUTING.with(|h| h.borrow().contains(&key)) {
            return OneAtATime { guard: None, key };
        }
        let guard = lock(&self.executing);
        EXECUTING.with(|h| h.borrow_mut().push(key));
        OneAtATime { guard: Some(guard), key }
    }

    /// Runs library operation `op` (a matrix product, a diagonal: work
    /// that is not a loop) under an NVTX range and adds it to the profile
    /// as row `name` tagged `tag` (the matrix), `bytes` moved at least.
    /// Timed as loops are: on a device, with events when profiling (the
    /// time on the device), else the time of queuing it.
    pub(crate) fn library_op<R>(
        &self,
        (name, tag): (&'static str, &str),
        bytes: u64,
        op: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let _range = Range::lazy(|| crate::profile::label(name, tag));
        let _occupied = self.device.as_ref().map(|d| d.occupant().enter());
        let events = match &self.device {
            Some(d) if self.profile_output != ProfileOutput::None => Some((d, d.record_event()?)),
            _ => None,
        };
        let start = Instant::now();
        let r = op()?;
        let elapsed = match events {
            Some((d, before)) => Duration::from_secs_f64(d.elapsed(&before, &d.record_event()?)?),
            None => start.elapsed(),
        };
        lock(&self.profile).record((name, tag), elapsed, Duration::ZERO, bytes);
        Ok(r)
    }

    /// The cached plan and byte count of a loop shape, built on first use.
    fn loop_plan(
        &self,
        kernel: &'static Kernel,
        set: &Set,
        sections: &[usize],
        needs_plan: bool,
        strategy: Option<Strategy>,
        args: &[Arg],
    ) -> Result<(Arc<LoopPlan>, Duration)> {
        let executed: usize = sections.iter().sum();
        let key = LoopKey::new(kernel, set, executed, self.part_size(), needs_plan, strategy, args);
        if let Some(p) = lock(&self.plans).get(&key) {
            return Ok((p, Duration::ZERO));
        }
        let start = Instant::now();
        crate::validate::check_write_races(kernel, set, args, executed)?;
        let columns = |a: &Arg| match &a.kind {
            ArgKind::Indirect { column, .. } => Columns::One(*column),
            _ => Columns::All,
        };
        let plan = if needs_plan {
            let indirect: Vec<IndirectArg> = args
                .iter()
                .filter_map(|a| {
                    let map = a.map()?;
                    Some(IndirectArg {
                        map: map.values(),
                        arity: map.arity(),
                        to_size: map.to().total(),
                        columns: columns(a),
                        map_id: map.id(),
                        dat_id: a.data_id(),
                        bytes_per_entity: a.bytes_per_entity(),
                        // Any indirect write conflicts: WRITE races as much as INC and RW.
                        conflicts: a.access.writes(),
                    })
                })
                .collect();
            let request = PlanRequest {
                sections,
                args: &indirect,
                shared_memory_bytes: CPU_BLOCK_BUDGET,
                part_size: Some(self.part_size().unwrap_or(CPU_PART_SIZE)),
                staging: false,
                // The host runs a block's elements in order on one thread.
                thread_colours: false,
            };
            let _range = Range::new(&format!("plan/{}", kernel.name()));
            // Shared with other loop shapes of the same colouring.
            Some(
                crate::plan_cache::host_plan(&self.plans, &request)
                    .map_err(|source| Error::Plan { kernel: kernel.name().into(), source })?,
            )
        } else {
            None
        };
        let byte_args: Vec<ByteArg> = args
            .iter()
            .map(|a| ByteArg {
                dat_id: a.data_id(),
                kind: match a.map() {
                    Some(map) => ByteArgKind::Indirect {
                        map: map.values(),
                        arity: map.arity(),
                        to_size: map.to().total(),
                        columns: columns(a),
                        map_id: map.id(),
                    },
                    None if a.is_global() => ByteArgKind::Global,
                    None => ByteArgKind::Direct,
                },
                bytes_per_entity: a.bytes_per_entity(),
                reads: a.access.reads(),
                writes: a.access.writes(),
            })
            .collect();
        let bytes = min_bytes(executed, &byte_args);
        let device = match &self.device {
            Some(dev) => {
                let mut candidates = strategy::candidates(args, strategy, self.deterministic).into_iter();
                let first = candidates.next().expect("at least one candidate");
                let first = device_loop::prepare(dev, kernel, args, sections, first, self.part_size())?;
                std::iter::once(DeviceCandidate::prepared(first)).chain(candidates.map(DeviceCandidate::new)).collect()
            }
            None => Vec::new(),
        };
        let entry = Arc::new(LoopPlan { plan, bytes, device, auto: Default::default() });
        let elapsed = start.elapsed();
        lock(&self.plans).insert(key, entry.clone());
        Ok((entry, elapsed))
    }

    /// Measures the device's copy bandwidth: copies `bytes` from one device
    /// buffer to another `repeats` times (after one warm-up copy) and
    /// returns GB/s counting bytes read and written (1e9 bytes per GB).
    /// Device backends only.
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Emu)?;
    /// let gb_per_s = rt.copy_bandwidth(1 << 20, 3)?;
    /// assert!(gb_per_s > 0.0);
    /// // Host backends have no device to measure.
    /// assert!(parloop::Runtime::with_backend(parloop::Backend::Seq)?.copy_bandwidth(1 << 20, 3).is_err());
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn copy_bandwidth(&self, bytes: usize, repeats: usize) -> Result<f64> {
        let device = self.device.as_ref().ok_or_else(|| Error::Backend {
            name: self.backend.name().into(),
            reason: "copy bandwidth is measured on device backends (emu, cuda)".into(),
        })?;
        if bytes == 0 {
            return Err(Error::Backend {
                name: self.backend.name().into(),
                reason: "copy bandwidth: 0 bytes to copy (a rate needs at least one byte)".into(),
            });
        }
        let (src, dst) = (device.alloc(bytes)?, device.alloc(bytes)?);
        device.copy(&dst, &src, bytes)?;
        device.synchronize()?;
        let start = Instant::now();
        for _ in 0..repeats.max(1) {
            device.copy(&dst, &src, bytes)?;
        }
        device.synchronize()?;
        Ok(2.0 * bytes as f64 * repeats.max(1) as f64 / start.elapsed().as_secs_f64() / 1e9)
    }

    /// The device of a device backend, described.
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// assert_eq!(rt.device_name(), None);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn device_name(&self) -> Option<String> {
        self.device.as_ref().map(|d| d.name())
    }

    /// What the device of a device backend is and offers.
    pub fn device_properties(&self) -> Option<DeviceProperties> {
        self.device.as_ref().map(|d| d.properties())
    }

    /// The CUDA C++ module a device runs for `lp` with `strategy` (the
    /// kernel's translation, then the generated loop entries), with the
    /// shared-memory budget of an H100/H200-class GPU's default 48 KiB and
    /// 256 threads per block. For inspection and for checking with NVRTC;
    /// no device is needed.
    pub fn cuda_loop_source(&self, lp: &ParLoop, strategy: Strategy) -> Result<String> {
        let sections = lp.sections().sizes();
        let strategy = strategy::choose(lp.args(), Some(strategy));
        let target = device_loop::Target::GPU;
        Ok(device_loop::build(lp.kernel(), lp.args(), &sections, strategy, self.part_size(), target)?.source)
    }

    /// Number of loop shapes in the plan cache.
    ///
    /// ```
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// assert_eq!(rt.cached_plans(), 0);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn cached_plans(&self) -> usize {
        self.flush_quietly();
        lock(&self.plans).len()
    }

    /// Number of host colourings in the plan cache: the `threads`
    /// backend's blocks and colours, shared by every loop shape that writes
    /// through the same map columns of the same set (an element-matrix loop
    /// and a load-vector loop over one mesh's cells share one).
    ///
    /// ```
    /// use parloop::{Access, Backend, Runtime};
    /// #[parloop::kernel]
    /// fn spread(w: &f64, n: &mut [[f64; 1]; 2]) { n[0][0] += *w; n[1][0] += *w; }
    /// #[parloop::kernel]
    /// fn count(n: &mut [[f64; 1]; 2]) { n[0][0] += 1.0; n[1][0] += 1.0; }
    ///
    /// let rt = Runtime::with_backend(Backend::Threads)?;
    /// let (edges, nodes) = (rt.set("edges", 4)?, rt.set("nodes", 5)?);
    /// let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1, 1, 2, 2, 3, 3, 4])?;
    /// let w = rt.dat("w", &edges, 1, vec![1.0; 4])?;
    /// let (a, b) = (rt.dat("a", &nodes, 1, vec![0.0; 5])?, rt.dat("b", &nodes, 1, vec![0.0; 5])?);
    /// rt.par_loop(spread::KERNEL, &edges, &[w.arg(Access::READ), a.arg_vec(&e2n, Access::INC)])?;
    /// rt.par_loop(count::KERNEL, &edges, &[b.arg_vec(&e2n, Access::INC)])?;
    /// assert_eq!((rt.cached_plans(), rt.cached_colourings()), (2, 1));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn cached_colourings(&self) -> usize {
        lock(&self.plans).colourings()
    }

    /// Per-loop statistics so far, in order of first execution.
    /// Recorded loops run first (with the lazy trace on).
    #[track_caller]
    pub fn report(&self) -> Vec<LoopReport> {
        self.flush_quietly();
        lock(&self.profile).reports()
    }

    /// The profile as a text table (what `PARLOOP_PROFILE=1` prints).
    ///
    /// ```
    /// use parloop::{Access, Backend, Runtime};
    /// #[parloop::kernel]
    /// fn double(x: &mut f64) {
    ///     *x *= 2.0;
    /// }
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// let s = rt.set("s", 4)?;
    /// let x = rt.dat("x", &s, 1, vec![1.0; 4])?;
    /// rt.par_loop(double::KERNEL, &s, &[x.arg(Access::RW)])?;
    /// print!("{}", rt.report_table());
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn report_table(&self) -> String {
        let mut table = profile::table(&self.report());
        let reductions = self.reduction_stats();
        if reductions.started > 0 {
            table.push_str(&format!(
                "all-reduces: {} started, {} complete before the global was next used, {:.6} s waited\n",
                reductions.started, reductions.ready_when_needed, reductions.wait_seconds
            ));
        }
        if let Some(t) = &self.trace {
            table.push_str(&profile::trace_table(&self.trace_stats(), &t.forcing_points()));
        }
        table
    }

    /// The profile as JSON (what `PARLOOP_PROFILE=json:FILE` writes).
    pub fn report_json(&self) -> String {
        profile::json(&self.report())
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if !self.owner {
            return;
        }
        if let Some(trace) = &self.trace {
            if let Err(e) = trace.force_labelled("the runtime's drop", None) {
                eprintln!("parloop: a recorded loop failed when the runtime was dropped: {e}");
            }
        }
        // A runtime that ran no loop (a helper asked for its rank, say)
        // prints nothing, and leaves a profile file to the runtime that did.
        let ran_loops = || !lock(&self.profile).reports().is_empty();
        match &self.profile_output {
            ProfileOutput::None => {}
            _ if !ran_loops() => {}
            ProfileOutput::Table => {
                let nth = match PROFILES_WRITTEN.fetch_add(1, Ordering::Relaxed) + 1 {
                    1 => String::new(),
                    n => format!(", the process's runtime {n} to profile"),
                };
                eprint!("parloop profile ({} backend{nth})\n{}", self.backend, self.report_table())
            }
            ProfileOutput::Json(path) => {
                let nth = PROFILES_WRITTEN.fetch_add(1, Ordering::Relaxed) + 1;
                let (ranks, rank) = (self.dist.ranks(), self.dist.rank());
                let file = profile_path_for(path, nth, ranks, rank);
                match std::fs::write(&file, self.report_json()) {
                    Err(e) => eprintln!("parloop: cannot write the profile to {}: {e}", file.display()),
                    Ok(()) if nth > 1 && rank == 0 => {
                        eprintln!(
                            "parloop: profile of the process's runtime {nth} to profile written to {} ({} holds the first's)",
                            file.display(),
                            profile_path_for(path, 1, ranks, rank).display()
                        )
                    }
                    Ok(()) => {}
                }
            }
        }
    }
}

/// Runtimes of this process that wrote their profile (`PARLOOP_PROFILE`),
/// so that each writes a file of its own (a demo making one runtime per
/// refinement level kept only the last level's profile).
static PROFILES_WRITTEN: AtomicUsize = AtomicUsize::new(0);

/// Where `PARLOOP_PROFILE=json:path` writes the `nth` profile of the
/// process on `rank` of `ranks`: `path` for the first, `path.<nth>` for
/// later ones, and `.rank<r>` after either under MPI (each rank profiles
/// its own loops), as `PARLOOP_TRACE_DOT` names its files.
fn profile_path_for(path: &str, nth: usize, ranks: usize, rank: usize) -> std::path::PathBuf {
    let mut file = std::ffi::OsString::from(path);
    if nth > 1 {
        file.push(format!(".{nth}"));
    }
    if ranks > 1 {
        file.push(format!(".rank{rank}"));
    }
    file.into()
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("backend", &self.backend).field("part_size", &self.part_size()).finish()
    }
}
