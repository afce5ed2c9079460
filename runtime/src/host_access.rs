//! Host access to a dat's or global's values that never deadlocks.
//!
//! Values sit behind an `RwLock` that a loop holds for its whole run and
//! the host holds inside `with_values`/`with_values_mut`. Blocking on that
//! lock from the thread that already holds it would hang forever (std's
//! `RwLock` does not support re-entry), so every host access first looks
//! at what this thread holds: nested reads share the lock, anything that
//! would need to wait for this thread itself is an [`Error::HostBusy`].
//! Holders on other threads (a loop, another reader or writer) are waited
//! for, as for any lock. Locks are only ever taken with `try_*`, so no
//! writer is queued inside the lock and nested reads cannot be blocked by one.

use std::cell::RefCell;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};
use std::time::Duration;

use crate::error::{Error, Result};

thread_local! {
    /// The values this thread holds: (object id, held for writing).
    static HELD: RefCell<Vec<(u64, bool)>> = const { RefCell::new(Vec::new()) };
}

/// Registers a hold on this thread until dropped.
pub(crate) struct Held {
    id: u64,
}

impl Held {
    fn new(id: u64, write: bool) -> Held {
        HELD.with(|h| h.borrow_mut().push((id, write)));
        Held { id }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            if let Some(k) = h.iter().rposition(|&(id, _)| id == self.id) {
                h.remove(k);
            }
        });
    }
}

/// What this thread holds of object `id`: `None`, `Some(false)` (reading),
/// `Some(true)` (writing).
fn held_here(id: u64) -> Option<bool> {
    HELD.with(|h| h.borrow().iter().rev().find(|&&(i, _)| i == id).map(|&(_, w)| w))
}

/// Whether this thread holds any values now (inside a `with_values`
/// closure, or running a loop).
pub(crate) fn holds_any() -> bool {
    HELD.with(|h| !h.borrow().is_empty())
}

/// Waits for a lock that other threads hold: spins briefly, then sleeps in
/// growing steps up to a millisecond.
fn wait<G>(mut attempt: impl FnMut() -> Option<G>) -> G {
    let mut pause = Duration::from_micros(1);
    for spins in 0.. {
        if let Some(g) = attempt() {
            return g;
        }
        if spins < 64 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }
    unreachable!("the loop above only ends by returning")
}

/// A read of values, registered on this thread.
pub(crate) struct ReadGuard<'a, T> {
    pub guard: RwLockReadGuard<'a, T>,
    _held: Held,
}

/// A write of values, registered on this thread.
pub(crate) struct WriteGuard<'a, T> {
    pub guard: RwLockWriteGuard<'a, T>,
    _held: Held,
}

/// Reads `lock` (of object `id`, named `name` in errors): shares a read
/// this thread already holds, fails while this thread writes it.
pub(crate) fn read<'a, T>(lock: &'a RwLock<T>, id: u64, name: &str, wanted: &'static str) -> Result<ReadGuard<'a, T>> {
    if held_here(id) == Some(true) {
        return Err(Error::HostBusy { name: name.into(), wanted, held: "written (inside `with_values_mut`)" });
    }
    let guard = wait(|| match lock.try_read() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    });
    Ok(ReadGuard { guard, _held: Held::new(id, false) })
}

/// Writes `lock` if no other thread holds it: `Ok(None)` while one does
/// (the caller backs off, see `exec::LockedArgs::lock_where`); fails while this
/// thread reads or writes it.
pub(crate) fn try_write<'a, T>(
    lock: &'a RwLock<T>,
    id: u64,
    name: &str,
    wanted: &'static str,
) -> Result<Option<WriteGuard<'a, T>>> {
    if let Some(writing) = held_here(id) {
        let held = if writing { "written (inside `with_values_mut`)" } else { "read (inside `with_values`)" };
        return Err(Error::HostBusy { name: name.into(), wanted, held });
    }
    Ok(match lock.try_write() {
        Ok(g) => Some(WriteGuard { guard: g, _held: Held::new(id, true) }),
        Err(TryLockError::Poisoned(e)) => Some(WriteGuard { guard: e.into_inner(), _held: Held::new(id, true) }),
        Err(TryLockError::WouldBlock) => None,
    })
}

/// Waits until no other thread holds `lock` (without taking it).
pub(crate) fn wait_free<T>(lock: &RwLock<T>) {
    wait(|| match lock.try_write() {
        Ok(_) | Err(TryLockError::Poisoned(_)) => Some(()),
        Err(TryLockError::WouldBlock) => None,
    })
}

/// Writes `lock`: fails while this thread reads or writes it.
pub(crate) fn write<'a, T>(
    lock: &'a RwLock<T>,
    id: u64,
    name: &str,
    wanted: &'static str,
) -> Result<WriteGuard<'a, T>> {
    if let Some(writing) = held_here(id) {
        let held = if writing { "written (inside `with_values_mut`)" } else { "read (inside `with_values`)" };
        return Err(Error::HostBusy { name: name.into(), wanted, held });
    }
    let guard = wait(|| match lock.try_write() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    });
    Ok(WriteGuard { guard, _held: Held::new(id, true) })
}
