//! Completing MPI requests without holding the core.
//!
//! MPICH and Open MPI complete `MPI_Wait` and blocking collectives by
//! spinning. Where ranks outnumber cores (a laptop, a CI runner, the
//! threads backend's workers next to each rank) a spinning rank keeps the
//! core that the rank it waits for needs, and every message then costs a
//! scheduler time slice: `parloop-mpi-check` took 20 s on 3 ranks of 2
//! cores, 0.6 s on 2. Every wait of the runtime polls its request instead,
//! and after a short spin yields the core between polls: with a core per
//! rank nothing else is runnable and the yield returns at once; where
//! ranks share cores, the rank with work runs.

use mpi::ffi;
use mpi::request::{LocalScope, Request, Scope};

/// Polls before the first yield: a message that is about to arrive (the
/// common case with a core per rank) is taken without a system call.
const SPINS_BEFORE_YIELD: u32 = 100;

/// Between polls: spin a while, then yield the core.
struct Backoff(u32);

impl Backoff {
    fn pause(&mut self) {
        if self.0 < SPINS_BEFORE_YIELD {
            self.0 += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Runs the immediate operation that `start` posts (in a request scope)
/// and completes it: a blocking collective that yields the core while it
/// waits.
pub(crate) fn blocking<'a, D: ?Sized + 'a>(
    start: impl for<'s> FnOnce(&'s LocalScope<'a>) -> Request<'a, D, &'s LocalScope<'a>>,
) {
    mpi::request::scope(|scope| complete(start(scope)));
}

/// Completes `request` (an immediate operation of rsmpi).
fn complete<'a, D: ?Sized, S: Scope<'a>>(mut request: Request<'a, D, S>) {
    let mut backoff = Backoff(0);
    loop {
        match request.test() {
            Ok(_) => return,
            Err(pending) => request = pending,
        }
        backoff.pause();
    }
}

/// Completes every request of `requests` (raw handles, null ones allowed).
///
/// # Safety
/// Each request is an active (or null) request of a communicator whose
/// lock the caller holds, and the buffers it reads or writes stay valid
/// until this returns.
pub(crate) unsafe fn complete_all(requests: &mut [ffi::MPI_Request]) {
    let mut backoff = Backoff(0);
    loop {
        let mut done = 0;
        // SAFETY: the caller's contract; MPI_Testall sets completed
        // requests to null and tests null ones as complete.
        unsafe {
            ffi::MPI_Testall(requests.len() as i32, requests.as_mut_ptr(), &mut done, ffi::RSMPI_STATUSES_IGNORE)
        };
        if done != 0 {
            return;
        }
        backoff.pause();
    }
}
