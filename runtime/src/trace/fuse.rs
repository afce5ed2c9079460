//! Fusion of direct loops (issue 15; seed 000's "soft kernel loop
//! fusion"): loops that a force runs one after the other, over the same
//! set, every argument direct or a global, run as one pass over the
//! elements: per chunk of `threads::CHUNK` elements, the first loop's
//! body, then the next one's (`backend::HostJob::then`). Siblings and
//! directly dependent loops alike: the second may read what the first
//! writes, because a direct loop's element `i` touches only entity `i`,
//! which the first loop has finished when the second reaches it.
//!
//! What keeps the results bitwise those of running the loops apart:
//! - only direct arguments (no maps: an element never sees another
//!   element's entity), no element index, no exec halo;
//! - a global reduced by one loop appears in no other loop of the group
//!   (neither read before the reduction has ended nor reduced twice in a
//!   new order); each reduction still sees its elements in the same chunks
//!   and order, so its partial results combine as before;
//! - chunks are those `threads` cuts, on `seq` too.
//!
//! Where: serial runs, on every backend. On `seq` and `threads` one host
//! job; on a device one generated entry whose threads call every loop's
//! kernel per element in turn (`device_loop::prepare_fused`, cached by
//! the group's shape in [`FusedLoops`]), so that a group is one launch per
//! section instead of one per loop and section. A datum that several
//! loops of the group name goes through one copy in the entry's shared
//! memory, so a later kernel sees what an earlier one wrote; each reduced
//! global keeps its own accumulators and partial results, as apart
//! (the same elements in the same threads and blocks: the same sums).
//! Distributed runs run the group loop by loop (not fused, not counted).
//! Off with [`Runtime::set_fusion`] or `PARLOOP_FUSION=0`.
//!
//! A kernel panic in a fused launch stops it like any loop's; the loops
//! fused with the failing one may then have run on some chunks (the error
//! names the group, `a+b`, and where its first loop was recorded).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Pending, Record};
use crate::arg::{Arg, ArgKind};
use crate::backend::device_loop::{self, DeviceLoop, Launcher};
use crate::backend::{seq, threads, Backend, HostJob, HostRun, Stage};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::exec::{LockedArgs, Reduction};
use crate::par_loop::ParLoop;
use crate::profile::Range;
use crate::runtime::Runtime;
use crate::sync::lock;
use crate::types::Access;

/// Loops in one fused launch at most (bounds the views of one job).
pub(super) const MAX_GROUP: usize = 16;

/// Whether `p` can be in a fused launch at all: direct and global
/// arguments only, no exec halo, not a host write.
pub(super) fn candidate(p: &Pending) -> bool {
    !p.exec_halo
        && !super::host_write::is(p)
        && p.args.iter().all(|a| matches!(a.kind, ArgKind::Direct | ArgKind::Global))
}

/// What one device launch offers a fused group.
#[derive(Clone, Copy)]
pub(super) struct DeviceRoom {
    /// Pointer slots (each argument takes one, each reduced global one
    /// more for its partial results).
    pub slots: usize,
    /// Shared memory per thread of a block, in bytes: the staging of the
    /// group's distinct multi-component direct dats.
    pub shared_per_thread: usize,
}

impl DeviceRoom {
    pub(super) fn of(device: &dyn crate::device::Device) -> DeviceRoom {
        DeviceRoom {
            slots: parloop_kernels::loops::MAX_PTRS,
            shared_per_thread: device.shared_memory_per_block() / device.block_size().max(1) as usize,
        }
    }

    /// Whether `loops` fit one launch.
    fn fits<'a>(&self, loops: impl Iterator<Item = &'a Pending> + Clone) -> bool {
        let slots: usize = loops
            .clone()
            .flat_map(|p| &p.args)
            .map(|a| 1 + usize::from(matches!(a.kind, ArgKind::Global) && a.access != Access::Read))
            .sum();
        // Staged dats, once each, at 8 bytes a value (the widest type).
        let mut staged: smallvec::SmallVec<[u64; 2 * MAX_GROUP]> = smallvec::SmallVec::new();
        let mut bytes = 0usize;
        for a in loops.flat_map(|p| &p.args).filter(|a| matches!(a.kind, ArgKind::Direct) && a.dim > 1) {
            if !staged.contains(&a.id) {
                staged.push(a.id);
                bytes = bytes.saturating_add(8 * a.dim);
            }
        }
        slots <= self.slots && bytes <= self.shared_per_thread
    }
}

/// Whether two different device functions (kernels or helpers) that
/// `loops` and `next` call share a C++ name: a fused module holds each
/// name once, so they cannot share a launch (the runtime's vector kernels
/// of another dim or type, a helper of another module).
fn names_clash<'a>(loops: impl Iterator<Item = &'a Pending>, next: &'a Pending) -> bool {
    fn walk(f: &'static crate::kernel::DeviceFn, seen: &mut Vec<(&'static str, usize)>) -> bool {
        let me = (f.cname(), f as *const crate::kernel::DeviceFn as usize);
        match seen.iter().find(|(name, _)| *name == me.0) {
            Some(&(_, addr)) => addr != me.1,
            None => {
                seen.push(me);
                f.deps().iter().any(|d| walk(d, seen))
            }
        }
    }
    let mut seen = Vec::new();
    loops.chain(std::iter::once(next)).any(|p| p.kernel.device_fn().is_some_and(|f| walk(f, &mut seen)))
}

/// Whether `next` may join `group` (candidates over one set, in run order).
/// `device`: what a device launch offers, on device backends.
pub(super) fn joins(group: &[(u64, Record)], next: &Pending, device: Option<DeviceRoom>) -> bool {
    if group.len() >= MAX_GROUP || !candidate(next) || group[0].1.set != next.set {
        return false;
    }
    if let Some(room) = device {
        let loops = group.iter().map(|(_, p)| &**p);
        if !room.fits(loops.clone().chain(std::iter::once(next))) || names_clash(loops, next) {
            return false;
        }
    }
    // A global reduced by one loop is in no other loop of the group.
    let reduced = |p: &Pending, id: u64| {
        p.args.iter().any(|a| a.id == id && matches!(a.kind, ArgKind::Global) && a.access != Access::Read)
    };
    next.args.iter().filter(|a| matches!(a.kind, ArgKind::Global)).all(|a| {
        group.iter().all(|(_, p)| {
            let mine = a.access != Access::Read;
            let uses = p.args.iter().any(|b| b.id == a.id);
            if mine {
                !uses
            } else {
                !reduced(p, a.id)
            }
        })
    })
}

/// Runs `group` (two or more loops `joins` accepted, oldest first) as one
/// launch. The loops' arguments are upgraded straight into one flat list
/// (no `ParLoop` per loop: a replayed window fuses every time step, and
/// rebuilding each loop then copying its arguments cost a third of its
/// host time).
/// Loops the user still holds lend their arguments as they are (see
/// `Pending::user`); otherwise `args`, an empty vector (the force's, left
/// empty), takes them upgraded from the records.
pub(super) fn run(rt: &Runtime, group: &[(u64, Record)], args: &mut Vec<Arg>) -> Result<()> {
    let users: Option<smallvec::SmallVec<[ParLoop; MAX_GROUP]>> =
        group.iter().map(|(_, p)| ParLoop::upgrade(&p.user)).collect();
    if let Some(users) = users {
        // Pushed into room reserved once (`collect` over `flat_map` checked
        // the capacity per argument).
        let mut lent: smallvec::SmallVec<[&Arg; 2 * MAX_GROUP]> = smallvec::SmallVec::new();
        lent.reserve(users.iter().map(|lp| lp.args().len()).sum());
        for a in users.iter().flat_map(|lp| lp.args()) {
            lent.push(a);
        }
        return rt.execute_fused(group, &lent);
    }
    let mut result = Ok(());
    for (_, p) in group {
        if let Err(id) = p.upgrade_args_into(args) {
            result = Err(Error::DataDropped { kernel: p.kernel.name().into(), id });
            break;
        }
    }
    let result = result.and_then(|()| rt.execute_fused(group, args));
    args.clear();
    result
}

impl Runtime {
    /// Turns fusion of direct loops in the lazy trace on (the default;
    /// `PARLOOP_FUSION=0` starts with it off) or off. With it, loops that
    /// a force runs one after the other over the same set, with direct
    /// and global arguments only, run as one pass over the elements (both
    /// bodies per chunk of elements), with the results of running them
    /// apart, bitwise; counted in
    /// [`TraceStats::loops_fused`](crate::TraceStats::loops_fused). On
    /// `seq` and `threads` a group is one host job, on `emu` and `cuda` one
    /// generated kernel per section (see [`Runtime::cuda_fused_source`]).
    /// Serial runs only; under MPI loops run apart. Without the lazy trace
    /// this changes nothing.
    ///
    /// ```
    /// use parloop::{Access, Backend, Runtime};
    /// #[parloop::kernel] fn zero(t: &mut f64) { *t = 0.0; }
    /// #[parloop::kernel] fn add_one(t: &f64, u: &mut f64) { *u = *t + 1.0; }
    /// let rt = Runtime::with_lazy(Backend::Seq, true)?;
    /// let s = rt.set("s", 3)?;
    /// let (t, u) = (rt.dat("t", &s, 1, vec![5.0; 3])?, rt.dat("u", &s, 1, vec![0.0; 3])?);
    /// rt.par_loop(zero::KERNEL, &s, &[t.arg(Access::WRITE)])?;
    /// rt.par_loop(add_one::KERNEL, &s, &[t.arg(Access::READ), u.arg(Access::WRITE)])?;
    /// assert_eq!(u.values()?, vec![1.0; 3]);
    /// assert_eq!(rt.trace_stats().loops_fused, 2);
    /// rt.set_fusion(false);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn set_fusion(&self, on: bool) {
        self.fusion.store(on, Ordering::Relaxed);
    }

    /// Whether the lazy trace fuses direct loops (see [`Runtime::set_fusion`]).
    pub fn fusion(&self) -> bool {
        self.fusion.load(Ordering::Relaxed)
    }

    /// Whether a force of this runtime's trace may fuse loops now.
    pub(crate) fn fuses(&self) -> bool {
        self.fusion() && self.dist.ranks() == 1
    }

    /// Runs validated direct loops over one set as one pass (host
    /// backends, serial): their arguments (`args`, the loops' in order)
    /// locked together, one host job whose stages are the loops' bodies,
    /// each loop's profile row getting its share of the time.
    fn execute_fused<A: Borrow<Arg>>(&self, group: &[(u64, Record)], args: &[A]) -> Result<()> {
        let _one_at_a_time = self.one_at_a_time();
        // `a+b`, in one allocation (no vector of names to join).
        let mut name = String::with_capacity(group.iter().map(|(_, p)| p.kernel.name().len() + 1).sum());
        for (k, (_, p)) in group.iter().enumerate() {
            if k > 0 {
                name.push('+');
            }
            name.push_str(p.kernel.name());
        }
        let _range = Range::new(&name);
        if let Some(device) = self.device() {
            let start = Instant::now();
            self.launch_fused(device, &name, group, args)
                .map_err(|e| crate::kernel_panic::locate(e, &group[0].1.set))?;
            self.record_fused(group, start.elapsed());
            return Ok(());
        }
        let first = &group[0].1;
        // Direct loops without exec halo: core and owned, as recorded.
        let set = first.set.sections();
        let sizes = [set.core, set.owned];
        let simd = self.simd();
        // At most `MAX_GROUP - 1` stages: inline, no allocation per launch.
        let mut stages: smallvec::SmallVec<[Stage; MAX_GROUP]> = smallvec::SmallVec::new();
        let mut off = first.args.len();
        for (_, p) in &group[1..] {
            let n = p.args.len();
            stages.push(Stage { host: p.kernel.host(simd), views: off..off + n });
            off += n;
        }
        let mut locked = LockedArgs::new();
        locked.lock(&name, args)?;
        let start = Instant::now();
        let views = &locked.views;
        let reductions = Reduction::of(args);
        let saved = crate::run::save(&reductions, views);
        let job = HostJob {
            host: first.kernel.host(simd),
            views,
            reductions: &reductions,
            kernel: &name,
            work: threads::Work::Chunks { sections: &sizes },
            then: &stages,
        };
        let run: HostRun = match self.backend() {
            Backend::Threads => threads::run,
            _ => seq::run,
        };
        let result = run(&job, 0..set.core, true).and_then(|()| run(&job, set.core..set.core + set.owned, true));
        let elapsed = start.elapsed();
        if result.is_err() {
            crate::run::restore(&reductions, views, &saved);
        }
        locked.release();
        // Once per written datum (a window's loops often write the same one).
        let mut written: smallvec::SmallVec<[u64; MAX_GROUP]> = smallvec::SmallVec::new();
        for a in args.iter().map(Borrow::borrow).filter(|a| a.access.writes()) {
            let id = a.data_id();
            if !written.contains(&id) {
                written.push(id);
                a.storage.host_written();
            }
        }
        result.map_err(|e| crate::kernel_panic::locate(e, &first.set))?;
        self.record_fused(group, elapsed);
        Ok(())
    }

    /// The CUDA C++ module a device runs for `loops` fused into one launch,
    /// as the lazy trace fuses them (each element calls every loop's kernel
    /// in turn), with the shared memory of an H100/H200-class GPU's default
    /// 48 KiB. For inspection and for checking with NVRTC; no device is
    /// needed. An error when the loops cannot fuse: not over one set, or an
    /// argument that is not direct or a global, or an exec halo.
    ///
    /// ```
    /// use parloop::{Access, Backend, ParLoop, Runtime};
    /// #[parloop::kernel] fn zero(t: &mut f64) { *t = 0.0; }
    /// #[parloop::kernel] fn add_one(t: &f64, u: &mut f64) { *u = *t + 1.0; }
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// let s = rt.set("s", 3)?;
    /// let (t, u) = (rt.dat("t", &s, 1, vec![5.0; 3])?, rt.dat("u", &s, 1, vec![0.0; 3])?);
    /// let first = ParLoop::new(zero::KERNEL, &s, &[t.arg(Access::WRITE)])?;
    /// let second = ParLoop::new(add_one::KERNEL, &s, &[t.arg(Access::READ), u.arg(Access::WRITE)])?;
    /// let source = rt.cuda_fused_source(&[&first, &second])?;
    /// assert!(source.contains("pl_entry_zero_and_add_one_direct"));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn cuda_fused_source(&self, loops: &[&ParLoop]) -> Result<String> {
        let names: Vec<&str> = loops.iter().map(|lp| lp.kernel().name()).collect();
        let name = names.join("+");
        let refuse = |reason: String| Error::Incompatible { op: format!("fusing loops `{name}`"), reason };
        let first = loops.first().ok_or_else(|| refuse("no loops given".into()))?;
        for lp in loops {
            if lp.set() != first.set() {
                return Err(refuse(format!(
                    "loop `{}` runs over set `{}`, loop `{}` over set `{}`",
                    first.kernel().name(),
                    first.set().name(),
                    lp.kernel().name(),
                    lp.set().name()
                )));
            }
            if let Some(a) = lp.args().iter().find(|a| !matches!(a.kind, ArgKind::Direct | ArgKind::Global)) {
                return Err(refuse(format!(
                    "loop `{}` has argument `{}` that is not direct or a global",
                    lp.kernel().name(),
                    a.data_name()
                )));
            }
            if lp.sections().exec_halo {
                return Err(refuse(format!("loop `{}` runs its exec halo", lp.kernel().name())));
            }
        }
        let mut loops_args: Vec<(&'static crate::kernel::Kernel, std::ops::Range<usize>)> = Vec::new();
        let mut args: Vec<&Arg> = Vec::new();
        for lp in loops {
            loops_args.push((lp.kernel(), args.len()..args.len() + lp.args().len()));
            args.extend(lp.args());
        }
        let set = first.set().sections();
        // The source of a 48 KiB, 256-thread device without bounds checks
        // (what NVRTC compiles for a GPU without `PARLOOP_CHECK`).
        let target = device_loop::Target::GPU;
        let (built, _) = device_loop::build_fused(&name, &loops_args, &args, &[set.core, set.owned], target)?;
        Ok(built.source)
    }

    /// Each loop of a fused group gets its share of the launch's time in
    /// the profile.
    fn record_fused(&self, group: &[(u64, Record)], elapsed: Duration) {
        let share = elapsed / group.len() as u32;
        let mut profile = lock(&self.profile);
        for (_, p) in group {
            let (plan_time, bytes) = p.plan.as_ref().map_or((Duration::ZERO, 0), |(p, t)| (*t, p.bytes));
            profile.record((p.kernel.path(), p.tags.as_deref().unwrap_or("")), share, plan_time, bytes);
        }
    }

    /// Runs a fused group on `device`: its entry (prepared on first use),
    /// section by section, then the reductions' finishing entry.
    fn launch_fused<A: Borrow<Arg>>(
        &self,
        device: &Arc<dyn Device>,
        name: &str,
        group: &[(u64, Record)],
        args: &[A],
    ) -> Result<()> {
        let set = group[0].1.set.sections();
        let sections = [set.core, set.owned];
        let key = FusedLoops::key(group, args, &sections);
        let cached = lock(&self.fused_loops).get(&key);
        let prepared = match cached {
            Some(dl) => dl,
            None => {
                let mut loops: smallvec::SmallVec<
                    [(&'static crate::kernel::Kernel, std::ops::Range<usize>); MAX_GROUP],
                > = smallvec::SmallVec::new();
                let mut off = 0;
                for (_, p) in group {
                    loops.push((p.kernel, off..off + p.args.len()));
                    off += p.args.len();
                }
                let dl = Arc::new(device_loop::prepare_fused(device, name, &loops, args, &sections)?);
                lock(&self.fused_loops).insert(key, dl.clone());
                dl
            }
        };
        let mut launcher = Launcher::new(device, &prepared, name, args)?;
        launcher.core()?;
        launcher.rest()
    }
}

/// Fused device launches prepared so far, by the group's shape: per loop
/// its kernel and per argument its kind, access, dim, type and which
/// earlier argument names the same datum; and the sections' sizes. The
/// data's addresses are not part of it (they go into each launch's
/// parameters). At most [`FusedLoops::CAPACITY`] shapes; a full cache
/// starts again empty (a program has a few groups that recur).
#[derive(Default)]
pub(crate) struct FusedLoops {
    prepared: HashMap<Vec<u64>, Arc<DeviceLoop>>,
}

impl FusedLoops {
    const CAPACITY: usize = 256;

    fn key<A: Borrow<Arg>>(group: &[(u64, Record)], args: &[A], sections: &[usize; 2]) -> Vec<u64> {
        let mut key: Vec<u64> = Vec::with_capacity(3 + 2 * group.len() + 5 * args.len());
        key.extend(sections.iter().map(|&n| n as u64));
        for (_, p) in group {
            key.push(p.kernel as *const crate::kernel::Kernel as usize as u64);
            key.push(p.args.len() as u64);
        }
        let args: smallvec::SmallVec<[&Arg; 2 * MAX_GROUP]> = args.iter().map(Borrow::borrow).collect();
        for (i, a) in args.iter().enumerate() {
            let same = args[..i].iter().position(|b| b.data_id() == a.data_id()).map_or(0, |b| b as u64 + 1);
            key.push(u64::from(matches!(a.kind, ArgKind::Global)));
            key.push(a.access as u64);
            key.push(a.dim as u64);
            key.push(a.storage.elem() as u64);
            key.push(same);
        }
        key
    }

    fn get(&self, key: &[u64]) -> Option<Arc<DeviceLoop>> {
        self.prepared.get(key).cloned()
    }

    fn insert(&mut self, key: Vec<u64>, dl: Arc<DeviceLoop>) {
        if self.prepared.len() >= Self::CAPACITY {
            self.prepared.clear();
        }
        self.prepared.insert(key, dl);
    }
}
