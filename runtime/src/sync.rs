//! Lock helpers.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, also when a thread panicked while holding it: every
/// structure the runtime keeps behind a mutex (caches, profiles, registries)
/// stays consistent between statements, and a kernel panic is caught and
/// reported as [`Error::KernelPanicked`](crate::Error::KernelPanicked)
/// rather than left to poison the runtime.
pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
