//! Fiber stacks for the emulated device's launches, kept per OS thread.
//!
//! Each thread of an emulated block runs as a fiber on a stack of its own
//! with a guard page below it (an overflow faults instead of overwriting
//! the next fiber's stack). Mapped for each launch, they cost an `mmap`,
//! an `mprotect` per thread, page faults on fresh pages and an `munmap`
//! every launch: half of an emulated run's time was the kernel's. One
//! mapping per OS thread, grown when a launch needs more or larger stacks,
//! now serves every module's launches on that thread (one per module and
//! thread would exhaust the process's mappings, `vm.max_map_count`: each
//! guard page splits a mapping).

use std::cell::RefCell;

/// The least stack a fiber gets: kernels call helpers, and the C++
/// compiler's frames are not known in advance.
const MIN_STACK: usize = 256 * 1024;

/// A mapping of `count` stacks of `usable` bytes, each above a guard page.
struct FiberStacks {
    base: *mut libc::c_void,
    mapped: usize,
    usable: usize,
    /// The lowest address of each stack (just above its guard page).
    bottoms: Vec<*mut u8>,
}

impl FiberStacks {
    /// Maps the stacks (reserved, committed as touched); `None` when the
    /// address space or the mappings run out.
    fn map(count: usize, usable: usize, page: usize) -> Option<FiberStacks> {
        let stride = usable.checked_add(page)?;
        let mapped = stride.checked_mul(count)?;
        let mut bottoms = Vec::new();
        bottoms.try_reserve_exact(count).ok()?;
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // touched. MAP_NORESERVE: only the pages a fiber touches cost memory.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        let mut stacks = FiberStacks { base, mapped, usable, bottoms };
        for t in 0..count {
            let guard = stacks.base.cast::<u8>().wrapping_add(t * stride);
            // SAFETY: `guard` is page-aligned (the base is, and the stride is
            // a multiple of the page) and lies inside the mapping; on failure
            // `stacks` is dropped, which unmaps it.
            if unsafe { libc::mprotect(guard.cast(), page, libc::PROT_NONE) } != 0 {
                return None;
            }
            stacks.bottoms.push(guard.wrapping_add(page));
        }
        Some(stacks)
    }
}

impl Drop for FiberStacks {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; no launch uses it
        // (a launch borrows the stacks for its duration).
        unsafe { libc::munmap(self.base, self.mapped) };
    }
}

thread_local! {
    static STACKS: RefCell<Option<FiberStacks>> = const { RefCell::new(None) };
}

/// Runs `launch` with `block` stacks of at least `stack_bytes` usable bytes
/// (rounded up to whole pages, [`MIN_STACK`] at least), passing their lowest
/// addresses and their usable size; `None` when they cannot be mapped.
pub(crate) fn with_stacks<R>(
    block: usize,
    stack_bytes: usize,
    launch: impl FnOnce(&[*mut u8], usize) -> R,
) -> Option<R> {
    // SAFETY: sysconf reads a constant of the system.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok().filter(|&p| p > 0)?;
    let usable = stack_bytes.max(MIN_STACK).checked_next_multiple_of(page)?;
    let mut launch = Some(launch);
    let kept = STACKS.try_with(|cell| {
        // A launch inside a launch on this thread (never made today) would
        // find the stacks borrowed: it maps its own below.
        let mut slot = cell.try_borrow_mut().ok()?;
        if !slot.as_ref().is_some_and(|s| s.bottoms.len() >= block && s.usable >= usable) {
            let (count, usable) = grown(slot.as_ref(), block, usable);
            // The old stacks go first: their address space may be needed.
            *slot = None;
            *slot = Some(FiberStacks::map(count, usable, page)?);
        }
        let stacks = slot.as_ref()?;
        Some((launch.take()?)(&stacks.bottoms[..block], stacks.usable))
    });
    if let Ok(Some(done)) = kept {
        return Some(done);
    }
    // The thread is exiting, or the stacks are in use, or the kept ones
    // could not grow: stacks for this launch alone.
    let launch = launch.take()?;
    let stacks = FiberStacks::map(block, usable, page)?;
    Some(launch(&stacks.bottoms, stacks.usable))
}

/// The shape of the stacks to map for `block` stacks of `usable` bytes when
/// `kept` does not fit: the larger of both in each dimension (launches of
/// several shapes then share one mapping), unless that reserves more than
/// four times what the launch needs (a launch of many small stacks after
/// one of few huge ones).
fn grown(kept: Option<&FiberStacks>, block: usize, usable: usize) -> (usize, usize) {
    let Some(kept) = kept else { return (block, usable) };
    let (count, most) = (block.max(kept.bottoms.len()), usable.max(kept.usable));
    let needed = block.saturating_mul(usable);
    match count.checked_mul(most) {
        Some(both) if both <= needed.saturating_mul(4) => (count, most),
        _ => (block, usable),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_are_kept_across_launches_and_grow_when_needed() {
        let first = with_stacks(4, 1000, |s, usable| (s.to_vec(), usable)).expect("stacks");
        assert_eq!(first.0.len(), 4);
        assert!(first.1 >= MIN_STACK);
        // Every stack is writable from its bottom to its top.
        with_stacks(4, 1000, |s, usable| {
            for &b in s {
                // SAFETY: inside the stack's usable bytes.
                unsafe {
                    b.write(1);
                    b.add(usable - 1).write(2);
                }
            }
        });
        let again = with_stacks(3, 1000, |s, _| s.to_vec()).expect("stacks");
        assert_eq!(again[..], first.0[..3], "the same stacks serve a smaller launch");
        let larger = with_stacks(8, 2 * MIN_STACK, |s, usable| (s.len(), usable)).expect("stacks");
        assert_eq!(larger.0, 8);
        assert!(larger.1 >= 2 * MIN_STACK);
    }

    #[test]
    fn a_launch_inside_a_launch_gets_stacks_of_its_own() {
        let (outer, inner) = with_stacks(2, 0, |outer, _| {
            (outer.to_vec(), with_stacks(2, 0, |inner, _| inner.to_vec()).expect("inner"))
        })
        .expect("outer");
        assert!(inner.iter().all(|b| !outer.contains(b)));
    }

    #[test]
    fn stacks_beyond_the_address_space_are_none() {
        assert!(with_stacks(1024, usize::MAX / 512, |_, _| ()).is_none());
        assert!(with_stacks(usize::MAX, MIN_STACK, |_, _| ()).is_none());
    }
}
