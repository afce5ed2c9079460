//! The sequential backend: every element in order, on the calling thread.

use std::ops::Range;

use super::HostJob;
use crate::error::Result;
use crate::kernel_panic::catch;

/// Runs elements `range` in order. Reductions go into partial results
/// (a sum into interleaved accumulators, `exec::INC_SLOTS`, as `threads`'
/// chunks do) combined into the globals when `reduce` and dropped
/// otherwise (the exec halo, whose elements other ranks own and count). A
/// kernel panic stops the range and is returned, the globals untouched.
pub(crate) fn run(job: &HostJob, range: Range<usize>, reduce: bool) -> Result<()> {
    let HostJob { views, reductions, kernel, .. } = *job;
    if range.is_empty() {
        return Ok(());
    }
    if reductions.is_empty() {
        // SAFETY: `views` come from `exec::lock_args` over validated arguments,
        // whose data stays locked while this runs; a single thread touches it.
        return catch(range.start, || unsafe { job.call(views, range.start, range.end) })
            .map_err(|p| p.into_error(kernel));
    }
    let mut partials: Vec<Vec<u64>> = Vec::with_capacity(reductions.len());
    let mut local = views.to_vec();
    for r in reductions {
        let mut partial = vec![0u64; r.partial_words()];
        // SAFETY: the global's view holds `dim` values of `elem`.
        unsafe { r.start_partial(views, &mut partial) };
        r.bind_partial(&mut local, partial.as_mut_ptr());
        partials.push(partial);
    }
    // SAFETY: as above; reduction views point into `partials`, alive here.
    catch(range.start, || unsafe { job.call(&local, range.start, range.end) }).map_err(|p| p.into_error(kernel))?;
    if reduce {
        for (r, partial) in reductions.iter().zip(&partials) {
            // SAFETY: started by `start_partial`; the global is locked.
            unsafe { r.combine_partial(views, partial.as_ptr()) };
        }
    }
    Ok(())
}
