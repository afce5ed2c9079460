//! Coloured blocks shared between the calling thread and the pool.
//!
//! [`run_coloured`] runs a plan's blocks colour after colour. The calling
//! thread works too: it and up to `threads - 1` helper jobs on the rayon
//! pool claim blocks, in colour order, from one counter; a block of colour
//! `c` starts once every block of the colours before it is done. So a loop
//! costs one hand-over to the pool, not one per colour, and the caller
//! never sleeps waiting for a worker to wake up: on a busy machine, or
//! while the workers are still asleep, it runs the blocks itself, and a
//! helper that starts late finds nothing left to claim. Which thread runs
//! a block changes nothing in the results: blocks of one colour touch
//! disjoint targets, and the caller combines partial results in block
//! order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The claim counter and the work, shared with the helper jobs.
struct Claims {
    /// The next position in `order` to claim (may pass `order_len`).
    next: AtomicUsize,
    /// Blocks finished (or unwound), counted in any order.
    done: AtomicUsize,
    order: *const u32,
    order_len: usize,
    /// `colour_end[c]`: the position in `order` where colour `c` ends.
    colour_end: *const usize,
    colours: usize,
    /// The caller's `run`, its lifetime erased (see the safety note on
    /// `Send`).
    run: *const (dyn Fn(usize) + Sync),
}

// SAFETY: the pointers are dereferenced only by a thread that claimed a
// position below `order_len` (`Claims::work`). A claim succeeds only before
// `run_coloured`'s guard closes the counter, and the guard then waits until
// every claimed block is done, so the caller's `order`, `colour_end` and
// `run` outlive every dereference; `run` is `Sync`. Helper jobs that start
// after that touch only the atomics, which the `Arc` keeps alive.
unsafe impl Send for Claims {}
// SAFETY: as above; the rest is atomics.
unsafe impl Sync for Claims {}

impl Claims {
    /// Claims and runs blocks until none is left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.order_len {
                return;
            }
            // Counts the block as done even if `run` unwinds, so that the
            // caller's wait ends.
            struct Done<'a>(&'a AtomicUsize);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0.fetch_add(1, Ordering::Release);
                }
            }
            // SAFETY: `i < order_len` was claimed, so the caller still waits
            // (see `Send` above); `colour_end` has `colours` entries, the
            // last being `order_len`.
            unsafe {
                let colour_end = std::slice::from_raw_parts(self.colour_end, self.colours);
                // The colour of position `i` starts where the one before
                // it ends: wait until all blocks before that are done.
                let c = colour_end.partition_point(|&e| e <= i);
                let start = if c == 0 { 0 } else { colour_end[c - 1] };
                wait_until(&self.done, start);
                let _done = Done(&self.done);
                (*self.run)(*self.order.add(i) as usize);
            }
        }
    }
}

/// Spins, then yields, until `count` reaches `target` (acquiring what the
/// threads that counted wrote).
fn wait_until(count: &AtomicUsize, target: usize) {
    let mut spins = 0u32;
    while count.load(Ordering::Acquire) < target {
        if spins < 256 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            // Two cores shared with other work: give the core to the thread
            // being waited for.
            std::thread::yield_now();
        }
    }
}

/// Closes the counter and waits for the blocks claimed so far, also when
/// the caller unwinds.
struct Close<'a>(&'a Claims);

impl Drop for Close<'_> {
    fn drop(&mut self) {
        let claimed = self.0.next.swap(usize::MAX / 2, Ordering::Relaxed).min(self.0.order_len);
        wait_until(&self.0.done, claimed);
    }
}

/// Runs `run(block)` for every block of `order`, colour by colour
/// (`colour_end[c]` is where colour `c` ends in `order`), on the calling
/// thread and up to `rayon::current_num_threads() - 1` helpers of the
/// current pool.
pub(crate) fn run_coloured<F: Fn(usize) + Sync>(order: &[u32], colour_end: &[usize], run: &F) {
    let widest = colour_end.iter().scan(0, |start, &end| Some(end - std::mem::replace(start, end))).max().unwrap_or(0);
    let helpers = rayon::current_num_threads().saturating_sub(1).min(widest.saturating_sub(1));
    if helpers == 0 {
        order.iter().for_each(|&b| run(b as usize));
        return;
    }
    let run: &(dyn Fn(usize) + Sync) = run;
    // SAFETY: only the lifetime changes (same fat pointer); see the safety
    // note on `Claims`'s `Send`.
    let run: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(run) };
    let claims = Arc::new(Claims {
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        order: order.as_ptr(),
        order_len: order.len(),
        colour_end: colour_end.as_ptr(),
        colours: colour_end.len(),
        run,
    });
    for _ in 0..helpers {
        let claims = Arc::clone(&claims);
        rayon::spawn(move || claims.work());
    }
    let close = Close(&claims);
    claims.work();
    drop(close);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Every block runs once, and no block starts before the blocks of
    /// earlier colours are done, on pools of 1 to 4 threads.
    #[test]
    fn blocks_run_once_colour_after_colour() {
        // Colours of 3, 1, 5 and 2 blocks.
        let order: Vec<u32> = vec![4, 0, 7, 1, 9, 2, 5, 10, 3, 6, 8];
        let colour_end = [3, 4, 9, 11];
        let colour_of =
            |b: usize| colour_end.partition_point(|&e| e <= order.iter().position(|&o| o as usize == b).unwrap());
        for threads in 1..=4 {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let log = Mutex::new(Vec::new());
            let finished = [(); 4].map(|_| AtomicUsize::new(0));
            pool.install(|| {
                run_coloured(&order, &colour_end, &|b| {
                    let c = colour_of(b);
                    let ready = (0..c).all(|k| {
                        let size = colour_end[k] - if k == 0 { 0 } else { colour_end[k - 1] };
                        finished[k].load(Ordering::SeqCst) == size
                    });
                    std::thread::sleep(std::time::Duration::from_micros(200));
                    log.lock().unwrap().push((b, ready));
                    finished[c].fetch_add(1, Ordering::SeqCst);
                })
            });
            let mut log = log.into_inner().unwrap();
            assert!(log.iter().all(|&(_, ready)| ready), "{threads} threads: a block started early: {log:?}");
            log.sort();
            assert_eq!(
                log.iter().map(|&(b, _)| b).collect::<Vec<_>>(),
                (0..11).collect::<Vec<_>>(),
                "{threads} threads"
            );
        }
    }
}
