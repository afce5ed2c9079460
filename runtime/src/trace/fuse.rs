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
//! Where: host backends (`seq`, `threads`) in a serial run. Device
//! backends and distributed runs run the group loop by loop (not fused,
//! not counted): one generated device kernel calling both bodies is not
//! built yet. Off with [`Runtime::set_fusion`] or `PARLOOP_FUSION=0`.
//!
//! A kernel panic in a fused launch stops it like any loop's; the loops
//! fused with the failing one may then have run on some chunks (the error
//! names the group, `a+b`, and where its first loop was recorded).

use std::borrow::Borrow;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Pending, Record};
use crate::arg::{Arg, ArgKind};
use crate::backend::{seq, threads, Backend, HostJob, HostRun, Stage};
use crate::error::{Error, Result};
use crate::exec::{lock_args, Reduction};
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

/// Whether `next` may join `group` (candidates over one set, in run order).
pub(super) fn joins(group: &[(u64, Record)], next: &Pending) -> bool {
    if group.len() >= MAX_GROUP || !candidate(next) || group[0].1.set != next.set {
        return false;
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
        let lent: smallvec::SmallVec<[&Arg; 2 * MAX_GROUP]> = users.iter().flat_map(|lp| lp.args()).collect();
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
    /// [`TraceStats::loops_fused`](crate::TraceStats::loops_fused). Host
    /// backends in serial runs only; elsewhere loops run apart. Without
    /// the lazy trace this changes nothing.
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
        self.fusion() && self.device().is_none() && self.dist.ranks() == 1
    }

    /// Runs validated direct loops over one set as one pass (host
    /// backends, serial): their arguments (`args`, the loops' in order)
    /// locked together, one host job whose stages are the loops' bodies,
    /// each loop's profile row getting its share of the time.
    fn execute_fused<A: Borrow<Arg>>(&self, group: &[(u64, Record)], args: &[A]) -> Result<()> {
        let _one_at_a_time = lock(&self.executing);
        // `a+b`, in one allocation (no vector of names to join).
        let mut name = String::with_capacity(group.iter().map(|(_, p)| p.kernel.name().len() + 1).sum());
        for (k, (_, p)) in group.iter().enumerate() {
            if k > 0 {
                name.push('+');
            }
            name.push_str(p.kernel.name());
        }
        let _range = Range::new(&name);
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
        let locked = lock_args(&name, args)?;
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
        drop(locked);
        // Once per written datum (a window's loops often write the same one).
        let mut written: smallvec::SmallVec<[u64; MAX_GROUP]> = smallvec::SmallVec::new();
        for a in args.iter().map(Borrow::borrow).filter(|a| a.access.writes()) {
            let id = a.data_id();
            if !written.contains(&id) {
                written.push(id);
                a.storage.host_written();
            }
        }
        result?;
        let share = elapsed / group.len() as u32;
        let mut profile = lock(&self.profile);
        for (_, p) in group {
            let (plan_time, bytes) = p.plan.as_ref().map_or((Duration::ZERO, 0), |(p, t)| (*t, p.bytes));
            profile.record((p.kernel.name(), p.tags.as_deref().unwrap_or("")), share, plan_time, bytes);
        }
        Ok(())
    }
}
