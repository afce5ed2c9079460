//! The sequential backend: every element in order, on the calling thread.

use std::ops::Range;

use super::HostJob;
use crate::error::Result;
use crate::exec::Reduction;
use crate::kernel_panic::catch;

/// Runs elements `range` in order. A sum into a global of a few values
/// goes into a partial result of interleaved accumulators
/// (`exec::INC_SLOTS`, as `threads`' chunks do), added into the global
/// when `reduce` and dropped otherwise (the exec halo, whose elements
/// other ranks own and count); other reductions go straight into the
/// global when `reduce`, into a scratch copy otherwise. A kernel panic
/// stops the range and is returned (the caller restores the globals).
pub(crate) fn run(job: &HostJob, range: Range<usize>, reduce: bool) -> Result<()> {
    let HostJob { views, reductions, kernel, .. } = *job;
    if range.is_empty() {
        return Ok(());
    }
    let own_partial = |r: &Reduction| !reduce || r.slots() > 1;
    if !reductions.iter().any(own_partial) {
        // SAFETY: `views` come from `exec::LockedArgs::lock` over validated arguments,
        // whose data stays locked while this runs; a single thread touches it.
        return catch(range.start, || unsafe { job.call(views, range.start, range.end) })
            .map_err(|p| p.into_error(kernel));
    }
    let mut partials: Vec<(&Reduction, Vec<u64>)> = Vec::with_capacity(reductions.len());
    let mut local = views.to_vec();
    for r in reductions.iter().filter(|r| own_partial(r)) {
        let words = r.partial_words();
        let mut partial = Vec::new();
        super::threads::reserve(&mut partial, words, kernel, "the words of a partial reduction")?;
        partial.resize(words, 0u64);
        // SAFETY: the global's view holds `dim` values of `elem`.
        unsafe { r.start_partial(views, &mut partial) };
        r.bind_partial(&mut local, partial.as_mut_ptr());
        partials.push((r, partial));
    }
    // SAFETY: as above; reduction views point into `partials`, alive here.
    catch(range.start, || unsafe { job.call(&local, range.start, range.end) }).map_err(|p| p.into_error(kernel))?;
    if reduce {
        for (r, partial) in &partials {
            // SAFETY: started by `start_partial`; the global is locked.
            unsafe { r.combine_partial(views, partial.as_ptr()) };
        }
    }
    Ok(())
}
