//! The threaded backend: rayon over blocks.
//!
//! Loops without conflicting indirect writes run fixed-size chunks in
//! parallel. Loops with them follow their plan: block colours one after
//! another, the blocks of one colour in parallel, shared between the
//! calling thread and the pool (`share`). Each block or chunk reduces
//! into its own partial result (a sum into interleaved accumulators,
//! `exec::INC_SLOTS`); partials are combined in block order, so results do
//! not depend on the thread count or on scheduling.

use rayon::prelude::*;

use super::HostJob;
use crate::error::{Error, Result};
use crate::exec::Reduction;
use crate::kernel_panic::{catch, first, Panicked};
use crate::views::ArgView;
use parloop_planner::Plan;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Elements per chunk of a loop without conflicts: large enough to amortise
/// scheduling, small enough to balance two to a hundred cores.
pub(crate) const CHUNK: usize = 2048;

/// Loops over fewer elements run their chunks or blocks on the calling
/// thread, in the same order: a fork-join costs about 10 us, as much as a
/// light kernel over ten thousand elements (the wave demo's vertex loops).
/// Results are the same either way (partials combine in item order).
pub(crate) const INLINE_BELOW: usize = 8 * CHUNK;

/// What to run in parallel.
#[derive(Clone, Copy)]
pub(crate) enum Work<'p> {
    /// Independent elements `0..len`, cut into chunks that never straddle
    /// the given section boundaries.
    Chunks { sections: &'p [usize] },
    /// A coloured plan.
    Plan(&'p Plan),
}

/// Raw pointers shared by the workers.
struct Shared<'v> {
    views: &'v [ArgView],
    partials: *mut u64,
}

// SAFETY: the views point to data locked for the loop. Workers write only
// (a) entities of their own elements through direct views (elements are
// disjoint across items), (b) indirect targets of their own block, which no
// block of the same colour shares (the plan's colouring, checked by
// `Plan::check` in tests), and (c) their own slice of `partials`. Reads never
// race with writes: validation rejects a dat that is both read and written
// unless all its uses are the same indirect access, which the plan colours.
unsafe impl Sync for Shared<'_> {}

impl Shared<'_> {
    // Accessors, so that closures capture the whole `Sync` wrapper rather
    // than its raw-pointer fields (edition 2021 captures disjoint fields).
    fn views(&self) -> &[ArgView] {
        self.views
    }

    /// Item `i`'s partial results start at word `i * words + off`.
    fn partial(&self, i: usize, words: usize, off: usize) -> *mut u64 {
        // SAFETY: `partials` holds `items * words` words and i < items.
        unsafe { self.partials.add(i * words + off) }
    }
}

/// Runs the blocks or chunks of `work` that start in `range` with `host`
/// over `views`, reducing `reductions` into the globals when `reduce` (not
/// for the exec halo, whose elements other ranks own and count). A kernel
/// panic stops the loop (blocks already running finish, no new ones
/// start, reductions are not combined) and the panic of the lowest element
/// caught is returned.
pub(crate) fn run(job: &HostJob, range: std::ops::Range<usize>, reduce: bool) -> Result<()> {
    let HostJob { host, views, reductions, kernel, work, then } = *job;
    if range.is_empty() {
        return Ok(());
    }
    let all: Vec<(usize, usize)> = match &work {
        Work::Chunks { sections } => {
            let count: usize = sections.iter().map(|len| len.div_ceil(CHUNK)).sum();
            let mut items = Vec::new();
            reserve(&mut items, count, kernel, "its chunks")?;
            let mut start = 0;
            for &len in sections.iter() {
                let end = start + len;
                let mut s = start;
                while s < end {
                    items.push((s, (s + CHUNK).min(end)));
                    s += CHUNK;
                }
                start = end;
            }
            items
        }
        Work::Plan(plan) => plan.blocks.iter().map(|b| (b.start, b.start + b.len)).collect(),
    };
    // Items keep their indices (blocks are named by index in the plan);
    // those outside `range` do nothing.
    let items: Vec<(usize, usize)> =
        all.into_iter().map(|(s, e)| if range.contains(&s) { (s, e) } else { (s, s) }).collect();
    let offsets: Vec<usize> = reductions
        .iter()
        .scan(0, |acc, r| {
            let o = *acc;
            *acc += r.partial_words();
            Some(o)
        })
        .collect();
    let words: usize = reductions.iter().map(Reduction::partial_words).sum();
    let mut partials = Vec::new();
    reserve(&mut partials, items.len().saturating_mul(words), kernel, "its partial reductions")?;
    partials.resize(items.len() * words, 0u64);
    for (r, &off) in reductions.iter().zip(&offsets) {
        for i in 0..items.len() {
            // SAFETY: the global's view holds `dim` values of `elem`.
            unsafe { r.start_partial(views, &mut partials[i * words + off..][..r.partial_words()]) };
        }
    }
    let shared = Shared { views, partials: partials.as_mut_ptr() };
    let stop = AtomicBool::new(false);
    let panicked: Mutex<Option<Panicked>> = Mutex::new(None);
    let run_item = |i: usize| {
        let (start, end) = items[i];
        if start == end || stop.load(Ordering::Relaxed) {
            return;
        }
        let caught = |result: Result<(), Panicked>| {
            if let Err(p) = result {
                stop.store(true, Ordering::Relaxed);
                let mut slot = crate::sync::lock(&panicked);
                *slot = Some(first(slot.take(), p));
            }
        };
        if reductions.is_empty() {
            // SAFETY: see `Shared`.
            caught(catch(start, || unsafe { super::call(host, then, shared.views(), start, end) }));
            return;
        }
        let mut local: Vec<ArgView> = shared.views().to_vec();
        for (r, &off) in reductions.iter().zip(&offsets) {
            // Item `i` owns words `i * words .. (i + 1) * words`.
            r.bind_partial(&mut local, shared.partial(i, words, off));
        }
        // SAFETY: see `Shared`.
        caught(catch(start, || unsafe { super::call(host, then, &local, start, end) }));
    };
    let inline = range.len() < INLINE_BELOW;
    match work {
        Work::Chunks { .. } if inline => (0..items.len()).for_each(run_item),
        Work::Chunks { .. } => (0..items.len()).into_par_iter().for_each(run_item),
        Work::Plan(plan) if inline => plan.blocks_by_colour.iter().for_each(|&b| run_item(b as usize)),
        // The caller and the pool share the blocks, colour after colour
        // (see `share`): one hand-over per loop, and the caller never
        // sleeps waiting for a worker (the wave demo's assembly loops run
        // 10 000 times each, a few blocks per colour).
        Work::Plan(plan) => super::share::run_coloured(&plan.blocks_by_colour, &plan.colour_offsets[1..], &run_item),
    }
    if let Some(p) = panicked.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(p.into_error(kernel));
    }
    for (r, &off) in reductions.iter().zip(&offsets) {
        if !reduce {
            break;
        }
        for i in 0..items.len() {
            // SAFETY: the item's partial was started by `start_partial`; the
            // global is locked.
            unsafe { r.combine_partial(views, partials[i * words + off..].as_ptr()) };
        }
    }
    Ok(())
}

/// Reserves room for `n` more items in `v`, or says what did not fit.
pub(crate) fn reserve<T>(v: &mut Vec<T>, n: usize, kernel: &str, what: &str) -> Result<()> {
    v.try_reserve_exact(n).map_err(|_| Error::OutOfMemory {
        what: format!("loop `{kernel}`: {what} ({n} of them)"),
        bytes: n.saturating_mul(std::mem::size_of::<T>()),
    })
}
