//! One loop's execution, step by step as seed 004 describes it: begin
//! (reductions set aside), exchange the stale halos the loop reads while
//! the core section runs, the owned section, the exec halo (redundantly,
//! never counted in reductions), end (reductions across ranks, written
//! halos stale). The distribution steps go through the
//! [`Distribution`] seam and cost nothing in a serial run; the elements go
//! to a host backend (`backend::seq`, `backend::threads`) or to the device
//! loop runner (`backend::device_loop`). `Runtime::execute` plans, calls one of
//! the two functions here and records the profile.

use std::cell::Cell;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::arg::ArgKind;
use crate::backend::device_loop::{DeviceLoop, Launcher};
use crate::backend::{seq, threads, Backend, HostJob, HostRun};
use crate::device::Device;
use crate::distribution::{Distribution, HaloTraffic};
use crate::error::{Error, Result};
use crate::exec::{LockedArgs, Reduction};
use crate::par_loop::{LoopSections, ParLoop};
use crate::plan_cache::LoopPlan;
use crate::sync::lock;
use crate::types::Access;

/// What one execution took: its time and its halo traffic.
pub(crate) struct Ran {
    pub elapsed: Duration,
    pub halo: HaloTraffic,
    /// Time preparing a device candidate at its first run (planning).
    pub prepared: Duration,
}

/// Runs `lp` on a host backend (`Seq` or `Threads`) with its cached plan.
/// A kernel panic stops the loop (later sections are skipped, the
/// distribution's collective steps still run), the reduced globals get
/// their values from before the loop back, and the panic is returned.
pub(crate) fn on_host(
    backend: Backend,
    simd: bool,
    dist: &dyn Distribution,
    plan: &LoopPlan,
    lp: &ParLoop,
    sections: &LoopSections,
) -> Result<Ran> {
    let (kernel, set, args) = (lp.kernel(), lp.set(), lp.args());
    // Position tables of scalar P1 assembly (`matrix::assembly::Offsets`):
    // a loop that runs every element records them, later ones read them.
    let tables: Vec<_> = args
        .iter()
        .filter_map(|a| match &a.kind {
            ArgKind::Mat(m) if a.access == Access::INC => {
                let elements = m.row_map.values().len() / m.row_map.arity().max(1);
                m.attach_offsets().filter(|o| !o.ready()).map(|o| (o, elements))
            }
            _ => None,
        })
        .collect();
    let mut locked = LockedArgs::new();
    locked.lock(kernel.name(), args)?;
    let start = Instant::now();
    let views = &locked.views;
    let reductions = Reduction::of(args);
    let host = kernel.host(simd);
    let saved = save(&reductions, views);
    // The first failure; once there is one, later sections are skipped.
    let failed: Cell<Option<Error>> = Cell::new(None);
    let sizes = sections.sizes();
    let job = HostJob {
        host,
        views,
        reductions: &reductions,
        kernel: kernel.name(),
        work: match &plan.plan {
            Some(plan) => threads::Work::Plan(plan),
            None => threads::Work::Chunks { sections: &sizes },
        },
        then: &[],
    };
    let run: HostRun = match backend {
        Backend::Threads => threads::run,
        _ => seq::run,
    };
    let section = |range: Range<usize>, reduce: bool| {
        if let Some(e) = failed.take() {
            failed.set(Some(e));
            return;
        }
        if let Err(e) = run(&job, range, reduce) {
            failed.set(Some(e));
        }
    };
    let begun = dist.begin(kernel, set, args, views, &reductions)?;
    let halo = dist.exchange(set, args, views, sections.exec_halo, &mut || section(sections.core(), true))?;
    section(sections.owned(), true);
    if sections.exec_halo {
        // Other ranks own these elements and count them in reductions.
        section(sections.exec(), false);
    }
    let outcome = failed.take().map_or(Ok(()), Err);
    let outcome = dist.end(begun, kernel, args, views, &reductions, outcome);
    let elapsed = start.elapsed();
    if outcome.is_err() {
        restore(&reductions, views, &saved);
    }
    locked.release();
    for a in args.iter().filter(|a| a.access.writes()) {
        a.storage.host_written();
    }
    match outcome {
        Err(e) => Err(e),
        Ok(()) => {
            for (table, elements) in tables {
                if sections.exec().end >= elements {
                    table.complete();
                }
            }
            Ok(Ran { elapsed, halo, prepared: Duration::ZERO })
        }
    }
}

/// The reduced globals' values, to put back if a kernel panics (`seq`
/// reduces into the globals directly).
pub(crate) fn save(reductions: &[Reduction], views: &[crate::views::ArgView]) -> Vec<Vec<u64>> {
    reductions
        .iter()
        .map(|r| {
            let mut words = vec![0u64; r.words()];
            // SAFETY: the global's view holds `dim` values of `elem`, locked.
            unsafe { r.copy_current(views, &mut words) };
            words
        })
        .collect()
}

pub(crate) fn restore(reductions: &[Reduction], views: &[crate::views::ArgView], saved: &[Vec<u64>]) {
    for (r, words) in reductions.iter().zip(saved) {
        // SAFETY: as `copy_current`, the other way; the global is locked.
        unsafe { r.restore(views, words) };
    }
}

/// Runs `lp` on `device` with one of its prepared candidates: the
/// automatic strategy choice's next trial, or its choice. Devices run
/// asynchronously: the loop is timed on the device (events on the compute
/// stream) only when `profiled` or when a trial is being timed; otherwise
/// the time is that of queuing the launches, and nothing waits.
pub(crate) fn on_device(
    device: &Arc<dyn Device>,
    dist: &dyn Distribution,
    plan: &LoopPlan,
    profiled: bool,
    lp: &ParLoop,
    sections: &LoopSections,
    part_size: Option<usize>,
) -> Result<Ran> {
    let n = plan.device.len();
    let (mut k, mut trial) = {
        let auto = lock(&plan.auto);
        (auto.next(n), n > 1 && auto.chosen.is_none())
    };
    // Before the timing starts: preparing is planning, not the trial's time.
    let prepare = |strategy| {
        crate::backend::device_loop::prepare(device, lp.kernel(), lp.args(), &sections.sizes(), strategy, part_size)
    };
    let (prepared, prepare_time) = match plan.device[k].get_or_prepare(prepare) {
        Ok(p) => p,
        // A later candidate that cannot be prepared (the first one was, at
        // the loop's first run) is out of the choice; the first runs.
        Err(_) if trial && k > 0 => {
            lock(&plan.auto).failed(k, n);
            (k, trial) = (0, false);
            plan.device[0].get_or_prepare(prepare)?
        }
        Err(e) => return Err(e),
    };
    let before = if trial || profiled { Some(device.record_event()?) } else { None };
    let start = Instant::now();
    let mut halo = HaloTraffic::default();
    // A rank with no elements still takes part in a distributed loop's
    // exchanges and reductions.
    if sections.executed() > 0 || dist.collective() {
        halo = launch(device, dist, prepared, lp, sections.exec_halo)?;
    }
    let elapsed = match before {
        Some(before) => Duration::from_secs_f64(device.elapsed(&before, &device.record_event()?)?),
        None => start.elapsed(),
    };
    if trial {
        lock(&plan.auto).record(k, elapsed.as_secs_f64(), n);
    }
    Ok(Ran { elapsed, halo, prepared: prepare_time })
}

/// The launches of one device loop, between the distribution's steps.
fn launch(
    device: &Arc<dyn Device>,
    dist: &dyn Distribution,
    prepared: &DeviceLoop,
    lp: &ParLoop,
    exec_halo: bool,
) -> Result<HaloTraffic> {
    let (kernel, set, args) = (lp.kernel(), lp.set(), lp.args());
    let begun = dist.begin_device(kernel, set, args)?;
    let mut launcher = Launcher::new(device, prepared, kernel.name(), args)?;
    let halo = dist.exchange_device(device, set, args, exec_halo, &mut || launcher.core())?;
    // The end takes part in the ranks' reductions (and agreement) even
    // when the launches failed here.
    let outcome = launcher.rest();
    dist.end_device(begun, kernel, args, outcome)?;
    Ok(halo)
}
