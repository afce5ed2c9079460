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

//!
//! A wait that lasts is reported: ranks out of step (a loop, a host write
//! of a distributed dat or a collective call made on some ranks only, a
//! rank that returned an error the others never saw) wait for each other
//! for ever, which looks like a slow run. After a minute the waiting rank
//! says on stderr what it waits in and what usually causes it (again at
//! each doubling), and after `PARLOOP_MPI_TIMEOUT` seconds (default 1800,
//! `0` never) it ends the job with that message.

use std::time::{Duration, Instant};

use mpi::ffi;
use mpi::request::{LocalScope, Request, Scope};

/// Polls before the first yield: a message that is about to arrive (the
/// common case with a core per rank) is taken without a system call.
const SPINS_BEFORE_YIELD: u32 = 100;

/// The first report of a wait that lasts.
const FIRST_REPORT: Duration = Duration::from_secs(60);

/// `PARLOOP_MPI_TIMEOUT`'s default, in seconds: long enough for a rank to
/// wait while another reads a mesh alone; a job out of step still ends.
const DEFAULT_TIMEOUT_S: usize = 1800;

/// What a rank waits in, for the report.
#[derive(Clone, Copy)]
pub(crate) enum Waiting {
    /// A loop's halo exchange.
    Exchange,
    /// A global's all-reduce.
    Reduction,
    /// A collective call (a gather, the partition, an agreement on errors).
    Collective,
}

impl Waiting {
    fn what(self) -> &'static str {
        match self {
            Waiting::Exchange => "a halo exchange (a loop reading a stale halo through a map)",
            Waiting::Reduction => "the all-reduce of a global",
            Waiting::Collective => "a collective call (a gather, the partition, or the ranks' agreement on errors)",
        }
    }
}

/// Between polls: spin a while, then yield the core; report a wait that
/// lasts, and end the job after the timeout.
struct Backoff {
    spins: u32,
    waiting: Waiting,
    /// Since when it yields, and when it reports next (a wait that ends
    /// while spinning never reads the clock).
    lasting: Option<(Instant, Duration)>,
}

impl Backoff {
    fn new(waiting: Waiting) -> Backoff {
        Backoff { spins: 0, waiting, lasting: None }
    }

    fn pause(&mut self) {
        if self.spins < SPINS_BEFORE_YIELD {
            self.spins += 1;
            std::hint::spin_loop();
            return;
        }
        std::thread::yield_now();
        // The first report: at a minute, or at the timeout where it is
        // shorter (which then ends the job).
        let (since, next_report) = self
            .lasting
            .get_or_insert_with(|| (Instant::now(), timeout().map_or(FIRST_REPORT, |t| t.min(FIRST_REPORT))));
        let waited = since.elapsed();
        if waited >= *next_report {
            *next_report *= 2;
            report(self.waiting, waited);
        }
    }
}

/// `PARLOOP_MPI_TIMEOUT` (checked when the runtime was created), `None`
/// for never; read once (waits that yield ask for it each time).
fn timeout() -> Option<Duration> {
    static TIMEOUT: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
    *TIMEOUT.get_or_init(|| {
        let seconds = crate::config::number("PARLOOP_MPI_TIMEOUT", |_| true, "seconds").ok().flatten();
        match seconds.unwrap_or(DEFAULT_TIMEOUT_S) {
            0 => None,
            s => Some(Duration::from_secs(s as u64)),
        }
    })
}

/// Says on stderr that this rank has waited `waited` in `waiting`, and
/// ends the job when that is past the timeout.
fn report(waiting: Waiting, waited: Duration) {
    let (mut rank, mut size) = (0, 1);
    // SAFETY: MPI is initialised (this rank is in a wait) and the world
    // communicator is valid for the whole job; the out-parameters are
    // plain integers.
    unsafe {
        ffi::MPI_Comm_rank(ffi::RSMPI_COMM_WORLD, &mut rank);
        ffi::MPI_Comm_size(ffi::RSMPI_COMM_WORLD, &mut size);
    }
    let timeout = timeout();
    let message = format!(
        "rank {rank} of {size} has waited {:.0} s in {} for other ranks that have not joined it: one is still busy, \
         or the ranks are out of step (a rank returned an error the others never saw: end the job with \
         `rt.fail(e)`; a loop, a host write to a distributed dat, or a collective call made on some ranks only; \
         `PARLOOP_CHECK_RANKS=1` names a loop sequence that differs)",
        waited.as_secs_f64(),
        waiting.what()
    );
    // One write per line: stderr is unbuffered, so `eprintln!` writes a
    // formatted line piece by piece, and the other ranks' abort could cut
    // it after `parloop: ` (CI saw it).
    let say = |line: String| {
        use std::io::Write;
        let _ = std::io::stderr().write_all(line.as_bytes());
    };
    match timeout {
        Some(limit) if waited >= limit => {
            say(format!("parloop: {message}; ending the job (PARLOOP_MPI_TIMEOUT={})\n", limit.as_secs()));
            // The launcher forwards stderr on its own time and drops what
            // it has not forwarded when a rank aborts (the line was lost
            // once in twelve runs): give it a moment.
            std::thread::sleep(Duration::from_millis(300));
            // SAFETY: as above; MPI_Abort does not return.
            unsafe { ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, 1) };
            std::process::abort();
        }
        Some(limit) => {
            say(format!("parloop: {message}; the job ends after PARLOOP_MPI_TIMEOUT={} s\n", limit.as_secs()))
        }
        None => say(format!("parloop: {message}\n")),
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
    let mut backoff = Backoff::new(Waiting::Collective);
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
pub(crate) unsafe fn complete_all(requests: &mut [ffi::MPI_Request], waiting: Waiting) {
    let mut backoff = Backoff::new(waiting);
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
