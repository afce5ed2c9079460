//! Large arrays on transparent huge pages.
//!
//! Dats and maps of a mesh are tens of megabytes read through indirection:
//! with 4 KiB pages nearly every indirect access of a large loop misses the
//! TLB. Linux backs memory with 2 MiB pages only where asked
//! (`/sys/kernel/mm/transparent_hugepage/enabled` is `madvise` on most
//! distributions), and only when the pages are first touched, so large
//! arrays are copied once, on declaration, into memory advised before its
//! first touch. Elsewhere, or where the advice is refused, the copy is
//! skipped and the caller's vector kept as it is. On the standard airfoil
//! grid this is 2 ms of a 53 ms step on one core, 2.7 of 31 on two
//! (docs/PERFORMANCE.md).

/// Arrays below this size keep their allocation (a huge page would be
/// mostly empty, and small arrays stay in cache anyway).
const MIN_BYTES: usize = 4 << 20;

/// The 2 MiB page size of x86-64 and aarch64 Linux.
#[cfg(target_os = "linux")]
const HUGE_PAGE: usize = 2 << 20;

/// `values`, moved to memory whose 2 MiB-aligned interior is advised for
/// huge pages when it is large enough for that to matter.
pub(crate) fn on_huge_pages<T: bytemuck::Pod>(values: Vec<T>) -> Vec<T> {
    let bytes = std::mem::size_of_val(values.as_slice());
    if bytes < MIN_BYTES || !cfg!(target_os = "linux") || !wanted() {
        return values;
    }
    // The copy holds the array twice for a moment: where that does not fit
    // (a memory cap), the values stay where they are, on small pages.
    let mut moved: Vec<T> = Vec::new();
    if moved.try_reserve_exact(values.len()).is_err() || !advise_huge(moved.as_mut_ptr().cast(), bytes) {
        return values;
    }
    moved.extend_from_slice(&values);
    moved
}

/// Whether to move arrays at all: not where the kernel never backs memory
/// with huge pages (the copy would buy nothing), nor under
/// `PARLOOP_HUGE_PAGES=0`, which keeps every array where the caller put it
/// (to measure what huge pages bring, or where memory is tight: a huge
/// page is 2 MiB of resident memory however little of it is used).
fn wanted() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let available = *AVAILABLE.get_or_init(|| {
        // "always [madvise] never": the bracketed word is the mode in force.
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|mode| !mode.contains("[never]"))
    });
    // A value other than 0 or 1 was refused when the runtime was created.
    available && crate::config::switch("PARLOOP_HUGE_PAGES", true).unwrap_or(true)
}

/// Asks for huge pages over the whole 2 MiB pages inside `len` bytes at
/// `ptr`, fresh from the allocator and not yet written by us. Returns
/// whether the kernel agreed. For arrays this large the allocator usually
/// maps new memory, which the advice covers from its first touch; pages
/// it reuses that were touched before stay small until the kernel's
/// `khugepaged` collapses them.
#[cfg(target_os = "linux")]
fn advise_huge(ptr: *mut u8, len: usize) -> bool {
    let address = ptr as usize;
    let start = address.next_multiple_of(HUGE_PAGE);
    let end = (address + len) / HUGE_PAGE * HUGE_PAGE;
    if end <= start {
        return false;
    }
    // SAFETY: `start..end` lies inside one live allocation of ours; the
    // advice changes how pages are backed, never their contents.
    unsafe { libc::madvise(ptr.add(start - address).cast(), end - start, libc::MADV_HUGEPAGE) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_ptr: *mut u8, _len: usize) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moved_values_are_the_same_values() {
        let small: Vec<u32> = (0..100).collect();
        let ptr = small.as_ptr();
        let kept = on_huge_pages(small);
        assert_eq!(kept.as_ptr(), ptr, "small arrays keep their allocation");
        let large: Vec<u64> = (0..(3 << 20) as u64).map(|i| i * 7 + 1).collect();
        let moved = on_huge_pages(large.clone());
        assert_eq!(moved, large);
    }
}
