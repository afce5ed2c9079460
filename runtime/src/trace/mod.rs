//! The lazy execution trace (seeds 000, 001, 003; issue 15).
//!
//! With `PARLOOP_LAZY=1`, [`Runtime::execute`](crate::Runtime::execute)
//! (and so `par_loop`) validates a loop and *records* it here instead of
//! running it. A recorded loop becomes the seed's computations
//! (`Compute(loop, core|owned|exec)`, `HaloSend(d)`, `HaloRecv(d)`,
//! `ReduceBegin(g)`, `ReduceEnd(g)`), each with read and write sets over
//! tokens `CORE(d)`, `OWNED(d)`, `HALOEXEC(d)`, `HALOIMPORT(d)`, `NET(d)`,
//! one token per global and one per matrix ([`tokens`]). The dependency
//! rule is the seed's: `c` precedes `a` when `R_a ∩ W_c ∪ W_a ∩ R_c ∪ W_a ∩
//! W_c` is not empty; insertion keeps, per token, the last writer and the
//! readers since, so it costs O(arguments), never a walk of the trace.
//!
//! Host observations force what they depend on (seed 001's backward
//! propagation, here a walk of the ancestors of the tokens' last writers
//! and readers); the loops found run oldest first through the ordinary
//! execution path (`Runtime::execute_now`: `run::on_host`,
//! `run::on_device`, the distribution's exchange), so the trace decides
//! *when* loops run, never *how*. A loop runs whole: when any of its
//! computations is needed, all of them run, in the order `run.rs` runs
//! them.
//!
//! The trace holds no strong reference to user data (seed 003's lesson):
//! recorded arguments keep a `Weak` to their dat, global or matrix. When
//! the last handle to a datum with pending computations is dropped, the
//! computations that read or write it run first (see `Link::dropped`), so
//! a pending loop never finds its data gone.

pub(crate) mod dot;
pub(crate) mod fuse;
mod host_write;
mod poison;
mod replay;
mod tokens;

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use petgraph::stable_graph::{NodeIndex, StableGraph};
use petgraph::Direction;

use crate::arg::{Arg, ArgKind};
use crate::decl::{Set, Storage};
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::par_loop::ParLoop;
use crate::plan_cache::LoopPlan;
use crate::runtime::{Core, Runtime};
use crate::sync::lock;
use crate::types::Access;
use crate::word_hash::{WordHashMap, WordHashSet};

pub(crate) use tokens::Token;
use tokens::{data_tokens, Section};

/// Pending loops at most: past this, recording flushes the trace, so a
/// time loop that never reads on the host does not grow it without bound.
const TRACE_LIMIT: usize = 1024;

/// Records of loops that ran kept for the next ones (`State::record_for`):
/// a few time steps' loops, few enough that a program of many distinct
/// loops neither scans long nor keeps many sets and maps alive.
const RECORD_POOL: usize = 64;

thread_local! {
    /// Whether this thread is running forced loops: host accesses and
    /// drops inside them (the library's own) do not force again.
    static FORCING: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is running forced loops now.
pub(crate) fn forcing_here() -> bool {
    FORCING.with(Cell::get)
}

/// Marks this thread as running forced loops until dropped (also when
/// unwinding: a panic must not leave later host reads unforced); the mark
/// it found comes back then (nested, it leaves the outer one's).
struct Forcing(bool);

impl Forcing {
    fn start() -> Forcing {
        Forcing(FORCING.with(|f| f.replace(true)))
    }
}

impl Drop for Forcing {
    fn drop(&mut self) {
        FORCING.with(|f| f.set(self.0));
    }
}

/// Runs `run`, a loop run now although the trace is on, after
/// `Trace::eager` ran what it depends on, as the trace runs its own: the
/// forces its data would make on the way (taking the trace's `running`
/// lock while this thread holds the runtime's `executing` one) are
/// skipped. A force on another thread holds `running` while its loops
/// wait for `executing`: the two threads waited for each other for ever.
pub(crate) fn run_as_forced<R>(run: impl FnOnce() -> R) -> R {
    let _forcing = Forcing::start();
    run()
}

/// What the trace has done, for tests and the profile: proof that
/// recording and forcing happened (or did not).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceStats {
    /// Loops recorded instead of run.
    pub loops_recorded: u64,
    /// Host writes to globals (`Global::set_values`) recorded instead of
    /// forcing the loops that use the global.
    pub host_writes_recorded: u64,
    /// Computations recorded (compute sections, halo sends and receives,
    /// reduction begins and ends).
    pub computations_recorded: u64,
    /// Dependency edges recorded.
    pub edges_recorded: u64,
    /// Recorded loops that have run.
    pub loops_run: u64,
    /// Forcing points that ran at least one loop.
    pub forces: u64,
    /// Forcing points that found nothing to run.
    pub forces_empty: u64,
    /// Loops run eagerly although the trace is on (inside a host access
    /// closure, while forcing, or data of another runtime's trace).
    pub eager_fallbacks: u64,
    /// Flushes because the trace reached its limit of pending loops.
    pub limit_flushes: u64,
    /// Forces because the last handle to pending data was dropped.
    pub drop_forces: u64,
    /// Recorded loops discarded because an earlier one failed.
    pub discarded: u64,
    /// Halo exchanges (send and receive pairs) not recorded because the
    /// halo was up to date when the loop was recorded (seed 000's early
    /// halo skips, its red nodes).
    pub exchanges_skipped: u64,
    /// Halo exchanges not recorded because a pending exchange of the same
    /// dat, with no write since, brings the halo up to date first (seed
    /// 000's successive exchanges: a send that would depend only on the
    /// previous receive).
    pub exchanges_removed: u64,
    /// Forces that ran a replayed window (loops taped against a kept
    /// segment: no DAG, no plan lookups; see `trace::replay`).
    pub replays: u64,
    /// Loops those replays ran.
    pub loops_replayed: u64,
    /// Tapes that went into the DAG after all (a loop or force that
    /// differed from every kept segment).
    pub replay_fallbacks: u64,
    /// Loops that ran inside a fused launch with at least one other
    /// (`Runtime::set_fusion`): a launch of three loops counts three.
    pub loops_fused: u64,
    /// Recorded loops that reused the record of an earlier run of the
    /// same loop (same kernel, set and arguments) instead of building one.
    pub records_reused: u64,
    /// Temporaries ([`Runtime::temporary`]) that took a released
    /// temporary's buffer instead of allocating (counted with or without
    /// the trace).
    pub temporaries_reused: u64,
}

/// One forcing point: where in the user's code the trace was forced, how
/// often, and how many loops those forces ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForcingPoint {
    /// `file:line:column` of the call that forced (or what forced it:
    /// `Runtime::flush`, a drop, the trace limit).
    pub location: String,
    /// Forces from there.
    pub count: u64,
    /// Loops those forces ran.
    pub loops: u64,
}

/// How a recorded argument holds its data.
enum Held {
    /// User data: a dat, global or matrix (seed 003: never kept alive).
    Weak(Weak<dyn Storage>),
    /// The element-index placeholder, private to the argument, and
    /// temporaries (kept until their last pending use runs).
    Strong(Kept),
}

/// A strong hold on data that counts as a handle (`Link::handle_made`),
/// so that a user's handle going first is not the last; its own going
/// runs nothing: every loop pending with the data holds one, so when the
/// last goes none is left.
struct Kept(Arc<dyn Storage>);

impl Kept {
    fn new(storage: &Arc<dyn Storage>) -> Kept {
        storage.link().handle_made();
        Kept(storage.clone())
    }
}

impl std::ops::Deref for Kept {
    type Target = Arc<dyn Storage>;
    fn deref(&self) -> &Arc<dyn Storage> {
        &self.0
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        // Nothing pending needs the data once no record holds it.
        self.0.link().release_quietly();
    }
}

/// An argument as the trace keeps it.
struct RecordedArg {
    held: Held,
    id: u64,
    kind: ArgKind,
    access: Access,
    dim: usize,
    set: Option<Set>,
}

/// A record as the trace's containers hold it: boxed, so that the moves
/// between them (the DAG's ordered map shifts its entries, the tape, the
/// pool) copy a pointer, not the whole record.
type Record = Box<Pending>;

/// A recorded loop, waiting.
struct Pending {
    kernel: &'static Kernel,
    set: Set,
    args: Vec<RecordedArg>,
    /// Where `par_loop`/`execute` recorded it.
    location: &'static Location<'static>,
    /// Whether its exec halo runs (as the loop said when recorded).
    exec_halo: bool,
    /// Its tags (profile and NVTX names only).
    tags: Option<Arc<str>>,
    /// Its plan and the time building it took, looked up when recorded.
    plan: Option<(Arc<LoopPlan>, Duration)>,
    nodes: Vec<NodeIndex>,
    /// Tokens its computations touch (to forget them once it runs).
    tokens: Vec<Token>,
    /// The values a host write puts in its global (`host_write`); empty
    /// for loops.
    payload: smallvec::SmallVec<[u8; 16]>,
    /// Its place in a replay segment when it was taped (`replay::Slot`):
    /// after it runs, the record waits there for the loop that will be
    /// taped in the same place.
    slot: Option<replay::Slot>,
    /// The user's loop it was recorded from (weak: seed 003): while some
    /// handle keeps that loop (a time loop built once and executed every
    /// step), it runs as it is, without rebuilding its arguments from the
    /// weak references above (an upgrade and a drop of every argument's
    /// datum, set and map: atomic operations that made a lazy airfoil
    /// loop cost 15 % more than an eager one).
    user: Weak<crate::par_loop::LoopInner>,
}

/// The data a recorded loop writes (host writes of globals included).
fn written(p: &Pending) -> impl Iterator<Item = u64> + '_ {
    p.args.iter().filter(|a| a.access.writes()).map(|a| a.id)
}

impl Pending {
    /// `lp` as the trace keeps it (not yet in the DAG); its arguments go
    /// into `args` (an empty vector, recycled from a loop that ran: no
    /// allocation per recorded loop).
    fn new(
        lp: &ParLoop,
        plan: replay::Plan,
        location: &'static Location<'static>,
        mut args: Vec<RecordedArg>,
    ) -> Pending {
        debug_assert!(args.is_empty());
        args.extend(lp.args().iter().map(|a| RecordedArg {
            held: match a.kind {
                ArgKind::Index => Held::Strong(Kept::new(&a.storage)),
                // A temporary lives until its last pending use has
                // run, then its memory goes back to the pool
                // (seed 000's `LazyFree`; the user cannot see it).
                _ if a.storage.temp().is_some() => Held::Strong(Kept::new(&a.storage)),
                _ => Held::Weak(Arc::downgrade(&a.storage)),
            },
            id: a.data_id(),
            kind: a.kind.clone(),
            access: a.access,
            dim: a.dim,
            set: a.set.clone(),
        }));
        Pending {
            kernel: lp.kernel(),
            set: lp.set().clone(),
            args,
            location,
            exec_halo: lp.sections().exec_halo,
            tags: lp.tags_shared(),
            plan,
            nodes: Vec::new(),
            tokens: Vec::new(),
            payload: smallvec::SmallVec::new(),
            slot: None,
            user: lp.downgrade(),
        }
    }

    /// Runs the loop (or host write) now, with its kept plan; `args` is
    /// an empty vector to build the loop's arguments in (the force's, for
    /// one loop after another: no allocation per loop), left empty.
    fn run(&self, rt: &Runtime, args: &mut Vec<Arg>) -> Result<()> {
        if host_write::is(self) {
            return host_write::run(self);
        }
        if let Some(lp) = ParLoop::upgrade(&self.user) {
            return rt.execute_planned(&lp, self.plan.clone());
        }
        if let Err(id) = self.upgrade_args_into(args) {
            args.clear();
            return Err(Error::DataDropped { kernel: self.kernel.name().into(), id });
        }
        let lp = ParLoop::from_parts(self.kernel, self.set.clone(), std::mem::take(args), self.exec_halo)
            .with_shared_tags(self.tags.clone());
        let result = rt.execute_planned(&lp, self.plan.clone());
        *args = lp.into_args();
        args.clear();
        result
    }

    /// Whether an argument of this record is datum `id`.
    fn uses(&self, id: u64) -> bool {
        self.args.iter().any(|a| a.id == id)
    }

    /// This record, of an earlier run of `lp` (same kernel, set and
    /// arguments), made `lp`'s: what its comparison leaves out replaced.
    fn renew(&mut self, lp: &ParLoop, plan: replay::Plan, location: &'static Location<'static>, payload: &[u8]) {
        self.plan = plan;
        self.location = location;
        self.user = lp.downgrade();
        self.tags = lp.tags_shared();
        self.exec_halo = lp.sections().exec_halo;
        self.set_payload(payload);
        self.nodes.clear();
        self.tokens.clear();
    }

    /// Sets the values a host write carries (empty for a loop).
    #[inline]
    fn set_payload(&mut self, payload: &[u8]) {
        if !(payload.is_empty() && self.payload.is_empty()) {
            self.payload.clear();
            self.payload.extend_from_slice(payload);
        }
    }

    /// Whether this record, of a loop that ran, holds `lp`'s kernel, set
    /// and arguments (data by weak reference, same ids, maps, columns,
    /// access and dims): then it serves `lp` again with only its plan,
    /// location and tags replaced. Ids are never reused, and `lp` holds
    /// its data, so the weak references reach exactly `lp`'s data.
    fn same_loop(&self, lp: &ParLoop) -> bool {
        std::ptr::eq(self.kernel, lp.kernel())
            && self.set == *lp.set()
            && self.args.len() == lp.args().len()
            && self.args.iter().zip(lp.args()).all(|(r, a)| {
                matches!(r.held, Held::Weak(_))
                    && r.id == a.data_id()
                    && r.access == a.access
                    && r.dim == a.dim
                    && r.set.as_ref().map(Set::id) == a.set.as_ref().map(Set::id)
                    && match (&r.kind, &a.kind) {
                        (ArgKind::Direct, ArgKind::Direct) | (ArgKind::Global, ArgKind::Global) => true,
                        (ArgKind::Indirect { map: m, column: c }, ArgKind::Indirect { map: n, column: d }) => {
                            m.id() == n.id() && c == d
                        }
                        (ArgKind::Vector { map: m }, ArgKind::Vector { map: n }) => m.id() == n.id(),
                        _ => false,
                    }
            })
    }

    /// The loop with its data (the user's, while kept), or the id of a
    /// datum that is gone.
    fn upgrade(&self) -> std::result::Result<ParLoop, u64> {
        if let Some(lp) = ParLoop::upgrade(&self.user) {
            return Ok(lp);
        }
        let mut args = Vec::with_capacity(self.args.len());
        self.upgrade_args_into(&mut args)?;
        Ok(ParLoop::from_parts(self.kernel, self.set.clone(), args, self.exec_halo).with_shared_tags(self.tags.clone()))
    }

    /// Appends the loop's arguments with their data to `out`, or returns
    /// the id of a datum that is gone.
    fn upgrade_args_into(&self, out: &mut Vec<Arg>) -> std::result::Result<(), u64> {
        for a in &self.args {
            let storage = match &a.held {
                Held::Weak(w) => w.upgrade().ok_or(a.id)?,
                Held::Strong(s) => Arc::clone(s),
            };
            out.push(Arg::with_id(storage, a.id, a.kind.clone(), a.access, a.dim, a.set.clone()));
        }
        Ok(())
    }
}

/// The loops among `records` (not host writes: the statistics count
/// those apart).
fn loops_in(records: &[(u64, Record)]) -> u64 {
    records.iter().filter(|(_, p)| !host_write::is(p)).count() as u64
}

/// What a computation does (seed 000's `LazyComputation` kinds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum What {
    /// The loop over sections `core ..= last` (a loop without halo
    /// receives runs core and owned as one computation, as in the seed).
    Compute { first: Section, last: Section },
    /// Sends the halo of the dat of argument `arg`.
    HaloSend { arg: usize },
    /// Receives it.
    HaloRecv { arg: usize },
    /// Starts the reduction of the global of argument `arg` across ranks.
    ReduceBegin { arg: usize },
    /// Ends it.
    ReduceEnd { arg: usize },
}

/// A computation: its loop (by sequence number) and what it does.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Node {
    pub seq: u64,
    pub what: What,
}

/// Per token: the last writer and the readers since (seed 000's rule in
/// O(1) per token).
#[derive(Default)]
struct TokenState {
    writer: Option<NodeIndex>,
    /// Inline for a few readers (no allocation per token entry).
    readers: smallvec::SmallVec<[NodeIndex; 4]>,
}

/// Tokens are small integers (`id << 3 | kind`): a multiplicative hash is
/// enough and much cheaper than SipHash on this path.
type TokenMap<V> = WordHashMap<Token, V>;

/// Where a force was asked for: the caller's location, and for the
/// runtime's own forcing points (a dropped datum's loops, the trace's size
/// limit, a runtime's drop) what they are. The profile lists those by the
/// label, not by a line of parloop's source (`Trace::force_labelled`).
#[derive(Clone, Copy)]
struct ForcingSite {
    at: &'static Location<'static>,
    label: Option<&'static str>,
}

/// The trace's state, behind one lock.
struct State {
    /// Replay of recurring windows (`replay`).
    replay: replay::Replay,
    graph: StableGraph<Node, ()>,
    pending: BTreeMap<u64, Record>,
    tokens: TokenMap<TokenState>,
    next_seq: u64,
    stats: TraceStats,
    /// Forcing points by the address of their location (one static per
    /// call site: cheaper to hash than the file name): forces, loops run.
    points: TokenMap<(ForcingSite, u64, u64)>,
    /// An error from a force nobody could return it to (a drop): it
    /// surfaces at the next forcing point.
    deferred: Option<Error>,
    /// Which halos the pending loops leave stale or refresh (halo skipping).
    halos: tokens::Halos,
    /// Argument vectors of loops that ran, emptied, for the next records
    /// (a time step records the same loops again: reused, not reallocated).
    spare_args: Vec<Vec<RecordedArg>>,
    /// The vector of the last force's loops, emptied: the next replayed
    /// window's tape.
    spare_tape: Vec<(u64, Record)>,
    /// Predecessors of one computation (`link`'s scratch).
    preds: Vec<NodeIndex>,
    /// The computations of the loop being linked (`link`'s scratch).
    comps: Vec<tokens::Computation>,
    /// Records of loops that ran, newest last (each force's in reverse
    /// run order), at most `RECORD_POOL` after a force starts: a
    /// recurring loop finds its record of an earlier window and reuses it
    /// as it is (see `Pending::same_loop`). Windows need not recur one for
    /// one: the airfoil alternates a window of five loops and one of four,
    /// of the same loops. Only weak references to data: no datum is kept
    /// alive by them (their sets and maps are, until evicted).
    spare_records: Vec<Record>,
    /// Data that loops discarded after a failure would have written
    /// (`poison`).
    poisoned: poison::Poisoned,
}

/// A runtime's trace.
pub(crate) struct Trace {
    state: Mutex<State>,
    /// Held while forced loops run: one force at a time, so that a read on
    /// another thread waits for loops already taken out of the trace.
    running: Mutex<()>,
    /// The runtime's core, to run loops with (weak: the core owns the
    /// trace).
    core: Weak<Core>,
    /// `PARLOOP_TRACE_DOT`: where to write the DAG pending at the first
    /// forcing point that finds loops to run (the first time step's DAG
    /// when a program forces once per step); taken when written.
    dot_path: Mutex<Option<std::path::PathBuf>>,
    /// Whether `dot_path` still waits to be written (checked on every
    /// force without taking the lock).
    dot_pending: AtomicBool,
    /// Every force runs the whole trace (more than one rank: see
    /// `Trace::force`).
    whole: bool,
    /// Data whose last handle went while a thread ran forced loops, with
    /// loops still pending with it (`Link::dropped`).
    kept_alive: Mutex<Vec<Arc<dyn Storage>>>,
    /// The set recorded host writes "iterate" over (`host_write`).
    host_writes: Set,
}

/// Whether `lp`'s argument `a` writes its datum whole: a direct WRITE over
/// the dat's set, or a global's WRITE (a host write, `set_values`, is
/// recorded as one), which cures a datum a failed loop left poisoned.
fn writes_whole(lp: &ParLoop, a: &Arg) -> bool {
    a.access == Access::Write
        && match a.kind {
            ArgKind::Direct => a.set.as_ref() == Some(lp.set()),
            ArgKind::Global => true,
            _ => false,
        }
}

/// Runs `run`, a loop outside the trace that recorded its data (an eager
/// loop inside a host access, or another runtime's loop), under the rule
/// recording applies, against each datum's own trace: a datum a failed
/// loop left poisoned is refused (`Error::Discarded`) unless the loop
/// writes it whole, which cures it once the loop has run without error
/// (a loop that fails cures nothing).
pub(crate) fn run_unrecorded_loop(
    lp: &ParLoop,
    at: &'static Location<'static>,
    run: impl FnOnce() -> Result<()>,
) -> Result<()> {
    for a in lp.args().iter().filter(|a| !writes_whole(lp, a)) {
        let Some(trace) = a.storage.link().trace() else { continue };
        let st = lock(&trace.state);
        if !st.poisoned.is_empty() {
            st.poisoned
                .check(a.data_id(), a.data_name(), || format!("loop `{}` submitted at {at}", lp.kernel().name()))?;
        }
    }
    run()?;
    for a in lp.args().iter().filter(|a| writes_whole(lp, a)) {
        a.storage.link().written_whole(a.data_id());
    }
    Ok(())
}

/// A dat's or global's link to the runtime whose trace recorded a loop
/// with it (set then, once).
#[derive(Default)]
pub(crate) struct Link(OnceLock<Weak<Core>>, Handles);

/// How many handles (`Dat`, `Global`, `Arg`) hold a datum: the one whose
/// drop takes it to zero is the last, exactly one however many go at once
/// on however many threads. `Arc::strong_count(..) == 1` in a drop,
/// before the count goes down, let two handles dropped together each see
/// the other, and neither run what was pending on the datum.
#[derive(Default)]
struct Handles(AtomicUsize);

/// The runtime's core behind a link, while the runtime lives and has a trace.
struct Linked(Arc<Core>);

impl std::ops::Deref for Linked {
    type Target = Trace;
    fn deref(&self) -> &Trace {
        self.0.trace.as_ref().expect("linked cores have a trace")
    }
}

impl Link {
    /// A handle on the datum was made.
    pub(crate) fn handle_made(&self) {
        self.1 .0.fetch_add(1, Ordering::Relaxed);
    }

    /// A handle on datum `id` goes; the last runs what is pending with it
    /// ([`Link::dropped`]; `handle` makes another handle on it).
    pub(crate) fn handle_gone(&self, id: u64, handle: impl FnOnce() -> Arc<dyn Storage>) {
        // AcqRel: what other handles did before they went happens before
        // what the last one then does (as `Arc`'s own count).
        if self.1 .0.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.holding(|| self.dropped(id, handle));
        }
    }

    /// Runs `f` holding a handle: the loops it forces make and drop
    /// handles of their own (their arguments), and one of those going
    /// must not be the last again, which would run this drop inside the
    /// force (with the trace's state locked: a deadlock).
    pub(crate) fn holding(&self, f: impl FnOnce()) {
        self.handle_made();
        f();
        self.release_quietly();
    }

    /// A hold that is no user's handle goes ([`Link::holding`], the
    /// trace's holds on temporaries): nothing runs, since nothing the
    /// user can reach needs what is pending.
    pub(crate) fn release_quietly(&self) {
        self.1 .0.fetch_sub(1, Ordering::Release);
    }

    /// Whether a handle holds the datum.
    pub(crate) fn has_handles(&self) -> bool {
        self.1 .0.load(Ordering::Acquire) > 0
    }

    /// The trace, if any, still alive.
    fn trace(&self) -> Option<Linked> {
        self.0.get()?.upgrade().filter(|c| c.trace.is_some()).map(Linked)
    }

    /// Forces what a host access to datum `id` depends on: its writers
    /// (to read), also its readers (to write); `all`: the whole trace
    /// (closure accessors, which may touch anything inside).
    #[track_caller]
    pub(crate) fn force(&self, id: u64, write: bool, all: bool) -> Result<()> {
        if self.0.get().is_none() || forcing_here() {
            return Ok(());
        }
        let Some(trace) = self.trace() else { return Ok(()) };
        let at = Location::caller();
        if all && !crate::host_access::holds_any() {
            trace.force(at, None)
        } else {
            trace.force(at, Some((&data_tokens(id), write)))
        }
    }

    /// An [`Error::Discarded`] when loops that would have written datum
    /// `id` (called `name`) were discarded after a failure (see `poison`).
    pub(crate) fn check_poison(&self, id: u64, name: &str) -> Result<()> {
        let Some(trace) = self.trace() else { return Ok(()) };
        let st = lock(&trace.state);
        if st.poisoned.is_empty() {
            return Ok(());
        }
        st.poisoned.check(id, name, || "a host access".into())
    }

    /// Datum `id` is being written whole by the host (`set_values`).
    pub(crate) fn written_whole(&self, id: u64) {
        if let Some(trace) = self.trace() {
            lock(&trace.state).poisoned.cure(id);
        }
    }

    /// Records a host write of `bytes` (`dim` values) to `global` in the
    /// trace, instead of forcing what uses the global (see `host_write`);
    /// `false` when it must be written now: no trace recorded a loop with
    /// the global yet (nothing pending can use it), or the write comes
    /// from inside a host access or a force.
    #[track_caller]
    pub(crate) fn record_host_write(
        &self,
        global: impl FnOnce() -> Arc<dyn Storage>,
        dim: usize,
        bytes: &[u8],
    ) -> Result<bool> {
        if self.0.get().is_none() || forcing_here() || crate::host_access::holds_any() {
            return Ok(false);
        }
        let Some(trace) = self.trace() else { return Ok(false) };
        let rt = Runtime::handle(trace.0.clone());
        let lp = host_write::as_loop(&trace.host_writes, global(), dim);
        trace.record(&rt, &lp, || Ok(None), Location::caller(), bytes)
    }

    /// The last handle to datum `id` is being dropped: what reads or
    /// writes it runs now (errors surface at the next forcing point).
    /// `handle` makes another handle on it: while this thread runs forced
    /// loops (whose copies of the arguments can be the last handles, the
    /// program's own having gone on another thread meanwhile), nothing can
    /// run here; the datum is kept alive until the force ends, which runs
    /// what is pending with it then (`Trace::release_kept_alive`).
    fn dropped(&self, id: u64, handle: impl FnOnce() -> Arc<dyn Storage>) {
        let Some(trace) = self.trace() else { return };
        if forcing_here() && trace.touches(id) {
            lock(&trace.kept_alive).push(handle());
            return;
        }
        trace.last_handle_going(id);
    }
}

/// Where `PARLOOP_TRACE_DOT=value` writes the DAG: the path itself on one
/// rank, `value.rank<r>` on rank `r` of several (each rank has its own
/// DAG: its sections and exchanges).
fn dot_path_for(value: Option<std::ffi::OsString>, ranks: usize, rank: usize) -> Option<std::path::PathBuf> {
    let value = value.filter(|v| !v.is_empty())?;
    let mut path = std::path::PathBuf::from(value);
    if ranks > 1 {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".rank{rank}"));
        path.set_file_name(name);
    }
    Some(path)
}

impl Trace {
    /// `ranks`/`rank`: the communicator's size and this rank (under MPI
    /// `PARLOOP_TRACE_DOT=path` writes `path.rank<r>` on each rank, not one
    /// file that every rank overwrites).
    pub(crate) fn new(core: Weak<Core>, (ranks, rank): (usize, usize), replay: bool) -> Trace {
        let whole = ranks > 1;
        let dot_path = dot_path_for(std::env::var_os("PARLOOP_TRACE_DOT"), ranks, rank);
        let dot_pending = AtomicBool::new(dot_path.is_some());
        let state = State {
            replay: replay::Replay::new(replay),
            graph: StableGraph::default(),
            pending: BTreeMap::new(),
            tokens: TokenMap::default(),
            next_seq: 0,
            stats: TraceStats::default(),
            points: TokenMap::default(),
            deferred: None,
            halos: tokens::Halos::default(),
            spare_args: Vec::new(),
            spare_tape: Vec::new(),
            preds: Vec::new(),
            comps: Vec::new(),
            spare_records: Vec::new(),
            poisoned: poison::Poisoned::default(),
        };
        Trace {
            state: Mutex::new(state),
            running: Mutex::new(()),
            core,
            dot_path: Mutex::new(dot_path),
            dot_pending,
            whole,
            kept_alive: Mutex::new(Vec::new()),
            host_writes: host_write::set(),
        }
    }

    /// Records every halo exchange the loops read (`false`), or only those
    /// of stale halos (`true`, the default).
    pub(crate) fn set_halo_skipping(&self, on: bool) {
        lock(&self.state).halos.record_all = !on;
    }

    /// Turns replay on or off (off: every loop goes into the DAG).
    pub(crate) fn set_replay(&self, on: bool) {
        lock(&self.state).replay.enabled = on;
    }

    /// Segments kept for replay.
    pub(crate) fn replay_segments(&self) -> usize {
        lock(&self.state).replay.segments()
    }

    /// Keeps `e` for the next forcing point (from where no error can be
    /// returned).
    pub(crate) fn defer(&self, e: Error) {
        lock(&self.state).deferred.get_or_insert(e);
    }

    /// Before running `lp` eagerly although the trace is on: runs what
    /// it depends on (its reads' writers, its writes' readers and writers),
    /// here and in the traces of its data that are another runtime's. The
    /// loop then runs as forced (`run_as_forced`), where a datum's own
    /// force before a loop is skipped: another runtime's pending write ran
    /// after it (a `fill` lost, a solve of the old right-hand side).
    pub(crate) fn eager(&self, _rt: &Runtime, lp: &ParLoop, at: &'static Location<'static>) -> Result<()> {
        lock(&self.state).stats.eager_fallbacks += 1;
        let mut all = Vec::new();
        for a in lp.args() {
            all.extend(data_tokens(a.data_id()));
        }
        self.force(at, Some((&all, true)))?;
        for a in lp.args() {
            let link = a.storage.link();
            if link.0.get().is_some_and(|core| !Weak::ptr_eq(core, &self.core)) {
                link.force(a.data_id(), true, false)?;
            }
        }
        Ok(())
    }

    /// Drops every kept record (pool and replay places): they hold their
    /// loops' sets and maps, which a name may be wanted back from.
    pub(crate) fn release_kept_records(&self) {
        let kept = {
            let mut st = lock(&self.state);
            let mut kept = std::mem::take(&mut st.spare_records);
            st.replay.take_records(&mut kept);
            kept
        };
        // Dropped outside the lock: a record's last handle on a set or map
        // may be all that frees it.
        drop(kept);
    }

    /// Drops the kept records (pool and replay places) of loops with datum
    /// `id`, whose last handle is going.
    fn forget_records_of(&self, id: u64) {
        let mut st = lock(&self.state);
        st.spare_records.retain(|p| !p.uses(id));
        st.replay.forget_records(|p| p.uses(id));
    }

    /// Whether a pending computation touches datum `id`.
    fn touches(&self, id: u64) -> bool {
        let st = lock(&self.state);
        st.replay.tape_touches(id)
            || data_tokens(id)
                .iter()
                .any(|t| st.tokens.get(t).is_some_and(|s| s.writer.is_some() || !s.readers.is_empty()))
    }

    /// Records `lp` (validated). Returns `false` when it must run eagerly
    /// instead: one of its data belongs to another runtime's trace.
    /// `plan` looks its plan up (and validates what planning checks); a
    /// replayed loop takes the kept one instead. `payload`: a host
    /// write's values (empty for loops).
    pub(crate) fn record(
        &self,
        rt: &Runtime,
        lp: &ParLoop,
        plan: impl FnOnce() -> Result<replay::Plan>,
        location: &'static Location<'static>,
        payload: &[u8],
    ) -> Result<bool> {
        let full = {
            let mut st = lock(&self.state);
            // The common case of a replayed time step first: the loop
            // continues the window being taped (the same loop over the
            // same data as the kept window's: its data are this trace's
            // already, and nothing is poisoned).
            let continued = if st.poisoned.is_empty() { st.replay.continue_candidate(lp) } else { None };
            if let Some(kept) = continued {
                st.tape(lp, kept, location, payload);
                st.is_full()
            } else {
                for a in lp.args() {
                    let linked = a.storage.link().0.get_or_init(|| self.core.clone());
                    if !Weak::ptr_eq(linked, &self.core) {
                        return Ok(false);
                    }
                }
                self.record_slow(rt, lp, plan, location, payload, st)?
            }
        };
        if full {
            let mut st = lock(&self.state);
            st.stats.limit_flushes += 1;
            st.replay.spoil();
            drop(st);
            self.force_labelled("the trace's limit of pending loops", None)?;
        }
        Ok(true)
    }

    /// `record` past its fast path: poison, then the replay's slower
    /// matching or the DAG. Whether the trace is full.
    fn record_slow<'t>(
        &'t self,
        rt: &Runtime,
        lp: &ParLoop,
        plan: impl FnOnce() -> Result<replay::Plan>,
        location: &'static Location<'static>,
        payload: &[u8],
        mut st: MutexGuard<'t, State>,
    ) -> Result<bool> {
        if !st.poisoned.is_empty() {
            // A loop reading poisoned data would compute from stale
            // values; one writing a datum whole cures it.
            let whole = |a: &Arg| writes_whole(lp, a);
            // Every argument checked before any is cured: a refused
            // loop cures nothing.
            for a in lp.args().iter().filter(|a| !whole(a)) {
                let by = || format!("loop `{}` recorded at {location}", lp.kernel().name());
                st.poisoned.check(a.data_id(), a.data_name(), by)?;
            }
            for a in lp.args().iter().filter(|a| whole(a)) {
                st.poisoned.cure(a.data_id());
            }
        }
        match st.replay.on_loop(lp, || (rt.part_size(), rt.strategy())) {
            Some(kept) => st.tape(lp, kept, location, payload),
            None => {
                if st.replay.taping() && !st.materialise(&self.core) {
                    drop(st);
                    self.force(location, None)?;
                    st = lock(&self.state);
                }
                st.replay.stop_taping();
                let plan = plan()?;
                st.replay.learnt_loop(&plan);
                st.insert(rt, lp, plan, location, payload);
            }
        }
        Ok(st.is_full())
    }

    /// Forces the computations that `tokens` (read, or also written)
    /// depend on, or everything (`None`). Runs them oldest first; the
    /// first error stops the run, discards the loops recorded after the
    /// failing one and is returned, naming the loop and where it was
    /// recorded.
    pub(crate) fn force(&self, at: &'static Location<'static>, tokens: Option<(&[Token], bool)>) -> Result<()> {
        self.force_at(ForcingSite { at, label: None }, tokens)
    }

    fn force_at(&self, site: ForcingSite, tokens: Option<(&[Token], bool)>) -> Result<()> {
        if forcing_here() {
            return Ok(());
        }
        let result = self.force_once(site, tokens);
        self.release_kept_alive();
        result
    }

    /// [`Trace::force`] for a force the runtime makes on its own, listed
    /// among the forcing points as `label` (where a user's call cannot be
    /// known: a drop, the size limit) instead of this call's line.
    #[track_caller]
    pub(crate) fn force_labelled(&self, label: &'static str, tokens: Option<(&[Token], bool)>) -> Result<()> {
        self.force_at(ForcingSite { at: Location::caller(), label: Some(label) }, tokens)
    }

    /// Data whose last handle went during a force (`Link::dropped`): now
    /// that no loop runs here, what is pending with each runs, then it
    /// goes (another handle made meanwhile takes the duty with it).
    pub(crate) fn release_kept_alive(&self) {
        if forcing_here() {
            return;
        }
        loop {
            let kept = std::mem::take(&mut *lock(&self.kept_alive));
            if kept.is_empty() {
                return;
            }
            for storage in kept {
                if !storage.link().has_handles() {
                    storage.link().holding(|| self.last_handle_going(storage.id()));
                }
            }
        }
    }

    /// What `Link::dropped` does for datum `id` outside a force.
    fn last_handle_going(&self, id: u64) {
        // Records of loops that ran with it serve no loop again (ids are
        // never reused): they go, with the sets and maps they hold.
        self.forget_records_of(id);
        if self.touches(id) {
            lock(&self.state).stats.drop_forces += 1;
            if let Err(e) = self
                .force_labelled("the last handle on data with pending loops dropped", Some((&data_tokens(id), true)))
            {
                self.defer(e);
            }
        }
        // Nothing can read it again: it is poisoned no more (a failed loop
        // writing a fresh dat each step kept an entry per failure, and made
        // every later loop check its arguments for poison).
        lock(&self.state).poisoned.cure(id);
    }

    /// `force`, once: forced loops drop data they held last (see
    /// `release_kept_alive`).
    fn force_once(&self, site: ForcingSite, tokens: Option<(&[Token], bool)>) -> Result<()> {
        // Under MPI a force runs everything, in recording order: every
        // rank records the same loops, so their exchanges and reductions
        // match as in an eager run, only later; a force of part of the
        // trace on one rank (a host read there alone) could run a later
        // loop's exchange before an earlier one's on another rank.
        let tokens = if self.whole { None } else { tokens };
        let _one = lock(&self.running);
        self.write_dot_once()?;
        let taken = {
            let mut st = lock(&self.state);
            if let Some(e) = st.deferred.take() {
                return Err(e);
            }
            let mut decision = st.replay.on_force(tokens);
            if let replay::Decision::Materialise = decision {
                if !st.materialise(&self.core) {
                    // A taped loop's data is gone: run everything (more
                    // than needed is never stale).
                    decision = replay::Decision::All;
                }
            }
            let taken: Vec<(u64, Record)> = match decision {
                replay::Decision::Nothing => Vec::new(),
                replay::Decision::All => {
                    // The next window's tape is the vector the last force
                    // ran (emptied, as long: no regrowing it loop by loop).
                    let next = std::mem::take(&mut st.spare_tape);
                    let tape = std::mem::replace(&mut st.replay.tape, next);
                    st.stats.replays += 1;
                    st.stats.loops_replayed += loops_in(&tape);
                    tape
                }
                replay::Decision::Some(seqs) => {
                    let taken = st.replay.take(&seqs);
                    st.stats.replays += 1;
                    st.stats.loops_replayed += loops_in(&taken);
                    taken
                }
                replay::Decision::Full | replay::Decision::Materialise => {
                    let seqs = match tokens {
                        None => st.pending.keys().copied().collect(),
                        Some((tokens, write)) => st.needed(tokens, write),
                    };
                    let pending = st.pending.len();
                    st.replay.learnt_force(tokens, &seqs, pending);
                    seqs.iter().map(|&s| (s, st.take(s))).collect()
                }
            };
            st.settle();
            let point = st.points.entry(site.at as *const Location as u64).or_insert((site, 0, 0));
            point.1 += 1;
            point.2 += loops_in(&taken);
            if taken.is_empty() {
                st.stats.forces_empty += 1;
            } else {
                st.stats.forces += 1;
            }
            if taken.is_empty() {
                return Ok(());
            }
            // The emptied argument vectors of the loops about to run join
            // these (given back below).
            let spare = std::mem::take(&mut st.spare_args);
            // Dropped by this force outside the lock (no allocation when
            // the pool is not over its size).
            let excess = st.spare_records.len().saturating_sub(RECORD_POOL);
            let evicted: Vec<Record> = st.spare_records.drain(..excess).collect();
            (taken, spare, evicted)
        };
        let (mut taken, mut spare, evicted) = taken;
        let Some(core) = self.core.upgrade() else { return Ok(()) };
        let rt = Runtime::handle(core);
        let forcing = Forcing::start();
        let mut failed = None;
        let mut ran = 0u64;
        let mut fused = 0u64;
        let fuses = rt.fuses();
        // What a device launch offers a group.
        let room = rt.device().map(|d| fuse::DeviceRoom::of(d.as_ref()));
        let mut left = taken.len();
        let mut args = Vec::new();
        // Groups are runs of `taken`, in place (no moves of the records).
        let mut i = 0;
        while i < taken.len() {
            let mut j = i + 1;
            if fuses && fuse::candidate(&taken[i].1) {
                while j < taken.len() && fuse::joins(&taken[i..j], &taken[j].1, room) {
                    j += 1;
                }
            }
            let group = &taken[i..j];
            left -= group.len();
            let result = match group {
                [(_, p)] => p.run(&rt, &mut args),
                _ => fuse::run(&rt, group, &mut args),
            };
            // What a failure leaves stale, read before the arguments go:
            // what the loops not run would have written, and what the
            // failed group wrote in part (its dats and matrices hold a mix
            // of old and new values, a temporary's first write over a
            // pooled buffer another temporary's; its reduced globals got
            // their old values back, which for a lone loop are what an
            // eager run leaves, but not for a fused group: its other
            // loops' reductions, which an eager run makes, were lost too,
            // so there its globals are stale as well). Unlike an eager
            // loop's, the error may surface at a host access of unrelated
            // data, so the program may never have seen it for these.
            let result = result.map_err(|e| {
                let fused = group.len() > 1;
                let stale: Vec<u64> = taken[j..]
                    .iter()
                    .flat_map(|(_, p)| written(p))
                    .chain(
                        group
                            .iter()
                            .flat_map(|(_, p)| {
                                p.args
                                    .iter()
                                    .filter(move |a| a.access.writes() && (fused || !matches!(a.kind, ArgKind::Global)))
                            })
                            .map(|a| a.id),
                    )
                    .collect();
                (e, stale)
            });
            // A loop's strong references go as soon as it has run, so a
            // temporary whose last use it was returns to the pool before
            // the next loop allocates one; the emptied vectors serve the
            // next records. Records with weak references only are kept
            // whole, for the next window's loops.
            for (_, p) in &mut taken[i..j] {
                // Matrix records too: their scatter holds the matrix's
                // pattern and maps, and they are never reused anyway
                // (`same_loop`, replay).
                if p.args.iter().any(|a| matches!(a.held, Held::Strong(_)) || matches!(a.kind, ArgKind::Mat(_))) {
                    let mut args = std::mem::take(&mut p.args);
                    args.clear();
                    spare.push(args);
                    // Without its arguments it serves no loop again.
                    p.slot = None;
                }
            }
            let group = &taken[i..j];
            if let Err((e, stale)) = result {
                let last = group.last().expect("a group has a loop").0;
                let kernel = group.iter().map(|(_, p)| p.kernel.name()).collect::<Vec<_>>().join("+");
                let location = group[0].1.location.to_string();
                failed = Some((last, left as u64, stale, Error::Deferred { kernel, location, source: Box::new(e) }));
                break;
            }
            ran += loops_in(group);
            if group.len() > 1 {
                fused += group.len() as u64;
            }
            i = j;
        }
        // Loops not run (after a failure) drop their data here, still
        // while forcing, as do evicted records; after a success, the
        // records join the pool below for the next windows' loops.
        drop(evicted);
        if failed.is_some() {
            taken.clear();
        }
        drop(forcing);
        // At most a full trace's worth (what one force frees).
        spare.truncate(TRACE_LIMIT);
        {
            let mut st = lock(&self.state);
            st.stats.loops_run += ran;
            st.stats.loops_fused += fused;
            // Only weak references left in them (strong ones went with
            // their argument vectors above): nothing drops here. Taped
            // records go back to their segments' places, the others to
            // the pool.
            let st = &mut *st;
            for (_, p) in taken.drain(..).rev() {
                if let Some(p) = st.replay.give_back(p) {
                    st.spare_records.push(p);
                }
            }
            // The emptied vectors serve the next records: `taken` the
            // next replayed window's tape, `spare` their arguments.
            if taken.capacity() > st.spare_tape.capacity() {
                st.spare_tape = taken;
            }
            if spare.len() > st.spare_args.len() {
                std::mem::swap(&mut st.spare_args, &mut spare);
            }
        }
        match failed {
            None => Ok(()),
            Some((seq, skipped, stale, e)) => {
                let Error::Deferred { kernel, location, .. } = &e else { unreachable!("built as Deferred above") };
                self.discard_after(seq, skipped, stale, kernel, location);
                Err(e)
            }
        }
    }

    /// Writes the pending DAG to `PARLOOP_TRACE_DOT`'s path, once, when
    /// loops are pending.
    fn write_dot_once(&self) -> Result<()> {
        if !self.dot_pending.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut path = lock(&self.dot_path);
        if path.is_none() || lock(&self.state).is_empty() {
            return Ok(());
        }
        let path = path.take().expect("checked above");
        self.dot_pending.store(false, Ordering::Relaxed);
        std::fs::write(&path, self.dot())
            .map_err(|source| Error::Io { path: format!("PARLOOP_TRACE_DOT={}", path.display()), source })
    }

    /// Drops the pending loops recorded after `seq` (nothing after a
    /// failed loop runs); `already` were taken out and not run. What they
    /// would have written, and `stale` (what the force left unwritten or
    /// half written), is poisoned by loop `kernel` recorded at `location`.
    fn discard_after(&self, seq: u64, already: u64, mut stale: Vec<u64>, kernel: &str, location: &str) {
        let mut st = lock(&self.state);
        let later: Vec<u64> = st.pending.range(seq + 1..).map(|(&s, _)| s).collect();
        let mut lost: Vec<Token> = Vec::new();
        for s in &later {
            let p = st.take(*s);
            stale.extend(written(&p));
            lost.extend_from_slice(&p.tokens);
        }
        st.rebuild_tokens(lost);
        let taped = st.replay.tape.len();
        stale.extend(st.replay.tape.iter().filter(|(s, _)| *s > seq).flat_map(|(_, p)| written(p)));
        st.poisoned.add(stale, kernel, location);
        st.replay.tape.retain(|(s, _)| *s <= seq);
        let taped = (taped - st.replay.tape.len()) as u64;
        st.stats.discarded += already + later.len() as u64 + taped;
        st.replay.spoil();
        st.settle();
    }

    pub(crate) fn stats(&self) -> TraceStats {
        lock(&self.state).stats.clone()
    }

    pub(crate) fn forcing_points(&self) -> Vec<ForcingPoint> {
        let st = lock(&self.state);
        // Merged by text: a generic caller may have one location per instance.
        let mut merged: HashMap<String, (u64, u64)> = HashMap::new();
        for &(site, count, loops) in st.points.values() {
            let text = site.label.map_or_else(|| site.at.to_string(), str::to_string);
            let e = merged.entry(text).or_default();
            e.0 += count;
            e.1 += loops;
        }
        let mut v: Vec<ForcingPoint> =
            merged.into_iter().map(|(location, (count, loops))| ForcingPoint { location, count, loops }).collect();
        v.sort_by(|a, b| b.count.cmp(&a.count).then(a.location.cmp(&b.location)));
        v
    }

    /// The pending DAG, transitively reduced, with the seed's labels.
    pub(crate) fn reduced(&self) -> dot::Reduced {
        let mut st = lock(&self.state);
        if st.replay.taping() && !st.replay.tape.is_empty() {
            // The tape is not in the DAG: put it there to draw it.
            st.materialise(&self.core);
        }
        dot::reduce(&st.graph, |seq| st.pending.get(&seq).map(|p| (p.kernel.name(), dot::arg_names(&p.args))))
    }

    /// The pending DAG as Graphviz text.
    pub(crate) fn dot(&self) -> String {
        self.reduced().render()
    }
}

impl State {
    /// Whether the pending loops (in the DAG and on the tape) reached
    /// `TRACE_LIMIT`: the recording that made it so forces them all.
    fn is_full(&self) -> bool {
        self.pending.len() + self.replay.tape.len() >= TRACE_LIMIT
    }

    /// Adds the computations of `lp` (seed 000's table), their edges by
    /// the dependency rule, and updates the token table.
    fn insert(
        &mut self,
        rt: &Runtime,
        lp: &ParLoop,
        plan: Option<(Arc<LoopPlan>, Duration)>,
        location: &'static Location<'static>,
        payload: &[u8],
    ) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut p = self.record_for(lp, plan, location, payload);
        // Not taped: a record in no segment's place.
        p.slot = None;
        self.count_recorded(&p);
        self.link(rt, seq, lp, p);
    }

    /// Counts record `p` (a loop or a host write) as recorded.
    fn count_recorded(&mut self, p: &Pending) {
        if host_write::is(p) {
            self.stats.host_writes_recorded += 1;
        } else {
            self.stats.loops_recorded += 1;
        }
    }

    /// Puts `lp` on the replay tape with its kept plan (not in the DAG),
    /// in the record its segment kept for its place if there is one.
    fn tape(&mut self, lp: &ParLoop, kept: replay::Kept, location: &'static Location<'static>, payload: &[u8]) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut p = match kept.record {
            // The loop that ran in this place last: the same loop (the
            // replay compared every word of it), so only what the words
            // leave out is replaced.
            Some(mut p) => {
                self.stats.records_reused += 1;
                p.renew(lp, kept.plan, location, payload);
                p
            }
            None => self.record_for(lp, kept.plan, location, payload),
        };
        p.slot = Some(kept.slot);
        self.count_recorded(&p);
        self.replay.tape.push((seq, p));
    }

    /// `lp`'s record: a spare record that holds `lp` already (a recurring
    /// loop), newest first, else a new one (in the oldest record's vectors
    /// when the pool is full); it carries `payload` (a host write's values).
    fn record_for(
        &mut self,
        lp: &ParLoop,
        plan: replay::Plan,
        location: &'static Location<'static>,
        payload: &[u8],
    ) -> Record {
        let spare = &self.spare_records;
        let found = spare.iter().rev().position(|p| p.same_loop(lp)).map(|from_end| spare.len() - 1 - from_end);
        let record = match found {
            // The newest, when windows recur one for one: no shifting.
            Some(i) if i + 1 == spare.len() => self.spare_records.pop(),
            Some(i) => Some(self.spare_records.remove(i)),
            // A full pool gives its oldest record's room; a smaller one
            // keeps its records for loops still to come.
            None if spare.len() >= RECORD_POOL => Some(self.spare_records.swap_remove(0)),
            None => None,
        };
        let mut p = match record {
            Some(mut p) if found.is_some() => {
                self.stats.records_reused += 1;
                p.renew(lp, plan, location, payload);
                return p;
            }
            Some(mut old) => {
                // The old record's box and vectors, for the new loop.
                let mut args = std::mem::take(&mut old.args);
                args.clear();
                let mut nodes = std::mem::take(&mut old.nodes);
                nodes.clear();
                let mut tokens = std::mem::take(&mut old.tokens);
                tokens.clear();
                *old = Pending::new(lp, plan, location, args);
                old.nodes = nodes;
                old.tokens = tokens;
                old
            }
            None => Box::new(Pending::new(lp, plan, location, self.spare_args.pop().unwrap_or_default())),
        };
        p.set_payload(payload);
        p
    }

    /// Puts the replay tape into the DAG, in order, as if its loops had
    /// been recorded there; `false` (and nothing done) if a taped loop's
    /// data is gone (then the caller runs the whole tape instead).
    fn materialise(&mut self, core: &Weak<Core>) -> bool {
        let Some(core) = core.upgrade() else { return true };
        let loops: Option<Vec<ParLoop>> = self.replay.tape.iter().map(|(_, p)| p.upgrade().ok()).collect();
        let Some(loops) = loops else { return false };
        self.replay.stop_taping();
        if !loops.is_empty() {
            self.stats.replay_fallbacks += 1;
        }
        let rt = Runtime::handle(core);
        let tape = std::mem::take(&mut self.replay.tape);
        for ((seq, p), lp) in tape.into_iter().zip(&loops) {
            self.link(&rt, seq, lp, p);
        }
        true
    }

    /// Whether no loop is pending (in the DAG or on the replay tape).
    fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.replay.tape.is_empty()
    }

    /// A new replay window starts whenever the trace is empty.
    fn settle(&mut self) {
        if self.is_empty() {
            self.replay.window_start(self.next_seq);
        }
    }

    /// Adds the computations of pending loop `p` (of `lp`, numbered
    /// `seq`) to the DAG and the token table, and keeps it pending.
    fn link(&mut self, rt: &Runtime, seq: u64, lp: &ParLoop, mut p: Record) {
        let mut comps = std::mem::take(&mut self.comps);
        tokens::computations(rt, lp, &mut self.halos, &mut self.stats, &mut comps);
        // The record's own vectors (empty; recycled ones keep their room).
        let mut nodes = std::mem::take(&mut p.nodes);
        nodes.reserve(comps.len());
        let mut touched = std::mem::take(&mut p.tokens);
        touched.reserve(comps.iter().map(|c| c.reads.len() + c.writes.len()).sum());
        // A scratch vector kept in the state (one allocation, not one per loop).
        let mut preds = std::mem::take(&mut self.preds);
        let mut last_compute: Option<NodeIndex> = None;
        for c in &comps {
            let n = self.graph.add_node(Node { seq, what: c.what });
            preds.clear();
            // The sections of one loop run in order (core before owned
            // before exec, as `run.rs` runs them).
            if let What::Compute { .. } = c.what {
                preds.extend(last_compute);
                last_compute = Some(n);
            }
            for t in &c.reads {
                if let Some(w) = self.tokens.get(t).and_then(|s| s.writer) {
                    preds.push(w);
                }
            }
            for t in &c.writes {
                if let Some(s) = self.tokens.get(t) {
                    preds.extend(s.writer);
                    preds.extend(s.readers.iter().copied());
                }
            }
            preds.sort_unstable();
            preds.dedup();
            for &p in preds.iter().filter(|&&p| p != n) {
                self.graph.add_edge(p, n, ());
                self.stats.edges_recorded += 1;
            }
            for t in &c.reads {
                if !c.writes.contains(t) {
                    let s = self.tokens.entry(*t).or_default();
                    if s.readers.last() != Some(&n) {
                        s.readers.push(n);
                    }
                }
            }
            for t in &c.writes {
                let s = self.tokens.entry(*t).or_default();
                s.writer = Some(n);
                s.readers.clear();
            }
            touched.extend(c.reads.iter().chain(&c.writes));
            nodes.push(n);
            self.stats.computations_recorded += 1;
        }
        self.preds = preds;
        self.comps = comps;
        touched.sort_unstable();
        touched.dedup();
        p.nodes = nodes;
        p.tokens = touched;
        self.pending.insert(seq, p);
    }

    /// The loops a host access to `tokens` needs (seed 001's evaluate):
    /// the last writers of the tokens (and their readers since, to
    /// write), then every ancestor of any computation of those loops;
    /// sorted oldest first.
    fn needed(&self, tokens: &[Token], write: bool) -> Vec<u64> {
        let mut work: Vec<u64> = Vec::new();
        for t in tokens {
            if let Some(s) = self.tokens.get(t) {
                work.extend(s.writer.map(|n| self.graph[n].seq));
                if write {
                    work.extend(s.readers.iter().map(|&n| self.graph[n].seq));
                }
            }
        }
        work.sort_unstable();
        work.dedup();
        let mut seen: WordHashSet<u64> = work.iter().copied().collect();
        let mut out = Vec::new();
        while let Some(seq) = work.pop() {
            let Some(p) = self.pending.get(&seq) else { continue };
            out.push(seq);
            for &n in &p.nodes {
                for pred in self.graph.neighbors_directed(n, Direction::Incoming) {
                    let s = self.graph[pred].seq;
                    if seen.insert(s) {
                        work.push(s);
                    }
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// The token table's entries for `lost` rebuilt from the pending
    /// loops, oldest first. `take` forgets a taken loop's place as a
    /// token's last writer, which is right when loops go oldest first (a
    /// force: every older loop touching the token is an ancestor and went
    /// before it). A failure's discard takes later loops while older
    /// unrelated ones stay: without this, an older loop writing the same
    /// data was out of reach of that data's forces and host writes, and
    /// ran at some later unrelated force, over what was written since.
    /// A loop writes a token when one of its arguments writes the datum
    /// (`NET` tokens are written by the loop's own exchanges and
    /// reductions: counted as written, which only orders more); its last
    /// computation stands for it (forces take whole loops).
    fn rebuild_tokens(&mut self, mut lost: Vec<Token>) {
        lost.sort_unstable();
        lost.dedup();
        for t in lost {
            let (id, net) = tokens::datum(t);
            let mut entry = TokenState::default();
            for p in self.pending.values() {
                let Some(&last) = p.nodes.last() else { continue };
                if p.tokens.binary_search(&t).is_err() {
                    continue;
                }
                if net || p.args.iter().any(|a| a.id == id && a.access.writes()) {
                    entry.writer = Some(last);
                    entry.readers.clear();
                } else {
                    entry.readers.push(last);
                }
            }
            if entry.writer.is_some() || !entry.readers.is_empty() {
                self.tokens.insert(t, entry);
            } else {
                self.tokens.remove(&t);
            }
        }
    }

    /// Removes loop `seq` from the graph and the token table.
    fn take(&mut self, seq: u64) -> Record {
        let p = self.pending.remove(&seq).expect("a pending loop");
        for t in &p.tokens {
            if let Some(s) = self.tokens.get_mut(t) {
                if s.writer.is_some_and(|w| p.nodes.contains(&w)) {
                    s.writer = None;
                }
                s.readers.retain(|r| !p.nodes.contains(r));
                if s.writer.is_none() && s.readers.is_empty() {
                    self.tokens.remove(t);
                }
            }
        }
        for &n in &p.nodes {
            self.graph.remove_node(n);
        }
        if self.pending.is_empty() {
            // The distribution knows the halos again.
            self.halos.clear();
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::{dot_path_for, lock, TRACE_LIMIT};
    use crate::{Access, Backend, Runtime};
    use std::path::PathBuf;

    #[parloop::kernel]
    fn add_into(x: &f64, y: &mut f64) {
        *y += *x;
    }

    #[parloop::kernel]
    fn sum_into(y: &f64, r: &mut f64) {
        *r += *y;
    }

    #[parloop::kernel]
    fn halve(y: &mut f64) {
        *y *= 0.5;
    }

    #[parloop::kernel]
    fn copy_small(x: &f64, y: &mut f64) {
        assert!(*x < 0.5, "too big");
        *y = *x;
    }

    /// Data a failed loop's discarded successors would have written stay
    /// poisoned until written whole, or until dropped: a program making a
    /// fresh dat each step kept an entry per failure for the trace's life.
    #[test]
    fn dropped_data_are_poisoned_no_more() {
        let rt = Runtime::with_lazy(Backend::Seq, true).unwrap();
        let s = rt.set("s", 4).unwrap();
        let x = rt.dat("x", &s, 1, vec![0.0, 0.25, 1.0, 0.0]).unwrap();
        for step in 0..3 {
            let y = rt.dat(&format!("y{step}"), &s, 1, vec![0.0; 4]).unwrap();
            let z = rt.dat(&format!("z{step}"), &s, 1, vec![1.0; 4]).unwrap();
            rt.par_loop(copy_small::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::WRITE)]).unwrap();
            rt.par_loop(halve::KERNEL, &s, &[z.arg(Access::RW)]).unwrap();
            assert!(rt.flush().is_err(), "step {step}");
            let poisoned = || lock(&rt.trace.as_ref().unwrap().state).poisoned.len();
            assert!(poisoned() > 0, "step {step}: the failure poisoned nothing");
            assert!(z.values().is_err(), "step {step}: z read as Ok after its loop was discarded");
            drop((y, z));
            assert_eq!(poisoned(), 0, "step {step}");
        }
    }

    /// A time step that reads a residual each step while its last loop
    /// stays pending never empties the trace, so its replay window never
    /// ended: the window's events grew for the whole run (200 bytes a
    /// loop). They are bounded now, and the results are eager's.
    #[test]
    fn a_window_that_never_ends_is_given_up_not_grown() {
        let run = |lazy: bool| {
            let rt = Runtime::with_lazy(Backend::Seq, lazy).unwrap();
            let s = rt.set("s", 8).unwrap();
            let x = rt.dat("x", &s, 1, (0..8).map(f64::from).collect::<Vec<_>>()).unwrap();
            let y = rt.dat("y", &s, 1, vec![1.0; 8]).unwrap();
            let r = rt.global("r", &[0.0]).unwrap();
            let mut residuals = Vec::new();
            // Three loops a step: past the window's bound six times over.
            for _ in 0..2 * TRACE_LIMIT {
                r.set_values(&[0.0]).unwrap();
                rt.par_loop(add_into::KERNEL, &s, &[x.arg(Access::READ), y.arg(Access::RW)]).unwrap();
                rt.par_loop(sum_into::KERNEL, &s, &[y.arg(Access::READ), r.arg(Access::INC)]).unwrap();
                rt.par_loop(halve::KERNEL, &s, &[y.arg(Access::RW)]).unwrap();
                // Reads the residual: the halving stays pending.
                residuals.push(r.value().unwrap());
                if lazy {
                    let trace = rt.trace.as_ref().unwrap();
                    let (words, plans) = lock(&trace.state).replay.learning_len();
                    assert!(plans <= TRACE_LIMIT && words <= 64 * TRACE_LIMIT, "{words} words, {plans} plans");
                }
            }
            (residuals, y.values().unwrap())
        };
        assert_eq!(run(true), run(false));
    }

    #[test]
    fn trace_dot_paths_are_one_per_rank_under_mpi() {
        assert_eq!(dot_path_for(None, 1, 0), None);
        assert_eq!(dot_path_for(Some("".into()), 2, 0), None);
        assert_eq!(dot_path_for(Some("out/dag.dot".into()), 1, 0), Some(PathBuf::from("out/dag.dot")));
        // Two ranks writing one file would leave whichever came last.
        assert_eq!(dot_path_for(Some("out/dag.dot".into()), 2, 0), Some(PathBuf::from("out/dag.dot.rank0")));
        assert_eq!(dot_path_for(Some("out/dag.dot".into()), 2, 1), Some(PathBuf::from("out/dag.dot.rank1")));
    }
}
