//! The sequential backend: every element in order, on the calling thread.

use std::ops::Range;

use super::HostJob;
use crate::error::Result;
use crate::kernel_panic::catch;

/// Runs elements `range` in order. Reductions go straight into the globals
/// when `reduce`, into scratch copies otherwise (the exec halo, whose
/// elements other ranks own and count). A kernel panic stops the range
/// and is returned.
pub(crate) fn run(job: &HostJob, range: Range<usize>, reduce: bool) -> Result<()> {
    let HostJob { views, reductions, kernel, .. } = *job;
    if range.is_empty() {
        return Ok(());
    }
    if reduce || reductions.is_empty() {
        // SAFETY: `views` come from `exec::lock_args` over validated arguments,
        // whose data stays locked while this runs; a single thread touches it.
        return catch(range.start, || unsafe { job.call(views, range.start, range.end) })
            .map_err(|p| p.into_error(kernel));
    }
    let mut scratch: Vec<Vec<u64>> = Vec::new();
    let mut local = views.to_vec();
    for r in reductions {
        let mut words = vec![0u64; r.words()];
        // SAFETY: the global's view holds `dim` values of `elem`.
        unsafe { r.copy_current(views, &mut words) };
        local[r.arg].data = words.as_mut_ptr().cast();
        scratch.push(words);
    }
    // SAFETY: as above; reduction views point into `scratch`, alive here.
    catch(range.start, || unsafe { job.call(&local, range.start, range.end) }).map_err(|p| p.into_error(kernel))
}
