//! Refusing a problem that cannot fit before allocating it: the demos
//! estimate what a mesh or grid needs and compare with what the system
//! says is available ([`check_memory`]), so that a too-large size is an
//! [`Error::OutOfMemory`] with the numbers, not a process the kernel's
//! out-of-memory killer ends (allocations succeed under overcommit and
//! fail only when the pages are touched).

use parloop::Error;

/// Bytes of memory this process can still get, as far as the system says:
/// Linux's `MemAvailable` plus free swap, capped by the cgroup's
/// `memory.max` less its `memory.current` where one is set; `None` where
/// none of that can be read.
pub fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = meminfo.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()?;
        kib.checked_mul(1024)
    };
    let mut bytes = field("MemAvailable:")?.saturating_add(field("SwapFree:").unwrap_or(0));
    let cgroup = |file: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{file}")).ok()?.trim().parse().ok()
    };
    if let Some(max) = cgroup("memory.max") {
        bytes = bytes.min(max.saturating_sub(cgroup("memory.current").unwrap_or(0)));
    }
    Some(bytes)
}

/// Refuses, with [`Error::OutOfMemory`], to go on with something that
/// needs `bytes` (`None`: a size that overflows) when that is more than
/// [`available_memory`]; `what` names it in the message.
pub fn check_memory(what: &str, bytes: Option<usize>) -> Result<(), Error> {
    let gb = |b: f64| b / 1e9;
    match (bytes, available_memory()) {
        (None, _) => Err(Error::OutOfMemory { what: format!("{what} (a size beyond usize)"), bytes: usize::MAX }),
        (Some(b), Some(avail)) if b as u64 > avail => Err(Error::OutOfMemory {
            what: format!("{what} (about {:.1} GB; {:.1} GB of memory available)", gb(b as f64), gb(avail as f64)),
            bytes: b,
        }),
        _ => Ok(()),
    }
}
