//! The sequential backend: every element in order, on the calling thread.

use crate::kernel::{ArgView, HostFn};

/// Runs elements `0..len` in order. Reductions go straight into the globals.
pub(crate) fn run(host: HostFn, views: &[ArgView], len: usize) {
    // SAFETY: `views` come from `exec::lock_args` over validated arguments,
    // whose data stays locked while this runs; a single thread touches it.
    unsafe { host(views, 0, len) }
}
