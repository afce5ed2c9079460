//! Devices: where generated loops run. One implementation of launching,
//! staging and coherence (`backend::device_loop`) is generic over [`Device`]:
//!
//! - [`emu::Emu`]: the generated CUDA source compiled by the host C++
//!   compiler against `parloop_kernels::EMU_HEADER`; device memory is host
//!   memory. It lets CI, which has no GPU, run every line of the device path.
//! - [`cuda::Cuda`]: a GPU through cudarc, NVRTC for the device's own
//!   architecture.

pub(crate) mod cuda;
pub(crate) mod emu;
mod fiber_stacks;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};

/// Parameters of one launch: `pl_params` of the generated code.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct LaunchParams {
    pub ptr: [u64; parloop_kernels::loops::MAX_PTRS],
    pub val: [i64; parloop_kernels::loops::MAX_VALS],
}

impl Default for LaunchParams {
    fn default() -> Self {
        LaunchParams { ptr: [0; parloop_kernels::loops::MAX_PTRS], val: [0; parloop_kernels::loops::MAX_VALS] }
    }
}

/// Device memory: an address the generated code can use, and its owner.
pub(crate) struct DeviceBuffer {
    /// Address in the device's address space.
    pub addr: u64,
    /// Size in bytes.
    pub bytes: usize,
    /// Keeps the allocation alive.
    _owner: Box<dyn std::any::Any + Send + Sync>,
}

impl DeviceBuffer {
    pub(crate) fn new(addr: u64, bytes: usize, owner: Box<dyn std::any::Any + Send + Sync>) -> DeviceBuffer {
        DeviceBuffer { addr, bytes, _owner: owner }
    }
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({:#x}, {} bytes)", self.addr, self.bytes)
    }
}

/// Host memory for transfers to and from a device: page-locked where the
/// device supports it (copies then run asynchronously, by DMA).
pub(crate) struct HostBuffer {
    /// Unpins the memory; dropped before `bytes` frees it.
    _pin: Option<Box<dyn std::any::Any + Send + Sync>>,
    bytes: Vec<u8>,
}

impl HostBuffer {
    /// `bytes`, pinned by `pin` (its drop unpins).
    pub(crate) fn new(bytes: Vec<u8>, pin: Option<Box<dyn std::any::Any + Send + Sync>>) -> HostBuffer {
        HostBuffer { _pin: pin, bytes }
    }
}

impl std::ops::Deref for HostBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl std::ops::DerefMut for HostBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

/// What a device is and offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProperties {
    /// The device's name.
    pub name: String,
    /// CUDA compute capability (major, minor); `None` for the emulated device.
    pub compute_capability: Option<(i32, i32)>,
    /// Streaming multiprocessors (host threads for the emulated device).
    pub multiprocessors: usize,
    /// Shared memory a block may use by default, in bytes.
    pub shared_memory_per_block: usize,
    /// Shared memory a block may use after opting in, in bytes.
    pub shared_memory_per_block_optin: usize,
    /// Global memory, in bytes (0 when unknown).
    pub global_memory: usize,
}

/// A point on a device's compute stream, for timing work on the device.
pub(crate) struct Event(Box<dyn std::any::Any + Send + Sync>);

impl Event {
    pub(crate) fn new(inner: impl std::any::Any + Send + Sync) -> Event {
        Event(Box::new(inner))
    }

    pub(crate) fn get<T: 'static>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

/// Which thread runs work on a device now. Each runtime has a device of
/// its own, so a dat used by two device runtimes has its newest copy on
/// one of them; moving it (and freeing the old copy) while another
/// thread's kernel on that device uses it was a use after free.
/// `coherence` refuses the move (an error) while the device holding the
/// copy is occupied by another thread.
#[derive(Default)]
pub(crate) struct Occupant(std::sync::Mutex<(usize, u64)>);

/// Two threads occupy the device (neither is its sole occupant).
const SHARED: u64 = u64::MAX;

fn this_thread() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! { static ID: u64 = NEXT.fetch_add(1, Ordering::Relaxed); }
    ID.with(|id| *id)
}

impl Occupant {
    /// This thread works on the device until the guard drops (nests).
    pub(crate) fn enter(&self) -> Occupied<'_> {
        let me = this_thread();
        let mut o = crate::sync::lock(&self.0);
        o.1 = if o.0 == 0 || o.1 == me { me } else { SHARED };
        o.0 += 1;
        Occupied(self)
    }

    /// Whether another thread works on the device now.
    pub(crate) fn elsewhere(&self) -> bool {
        let o = crate::sync::lock(&self.0);
        o.0 > 0 && o.1 != this_thread()
    }
}

/// [`Occupant::enter`]'s guard.
pub(crate) struct Occupied<'a>(&'a Occupant);

impl Drop for Occupied<'_> {
    fn drop(&mut self) {
        let mut o = crate::sync::lock(&(self.0).0);
        o.0 -= 1;
        if o.0 == 0 {
            o.1 = 0;
        }
    }
}

/// A panic reported by device code through the prelude's `pl_error`
/// record (see `parloop_kernels::PRELUDE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct PanicRecord {
    /// The thread that claimed the record (0: no panic).
    pub owner: u64,
    /// What happened (1 to 10, see `message`).
    pub code: i64,
    /// The element (-1 when not known).
    pub element: i64,
    /// First operand (the index, for code 5).
    pub a: i64,
    /// Second operand (the length, for code 5).
    pub b: i64,
    /// The types of `values` (code 11 sites whose message formats values:
    /// 4 bits a slot, `parloop_kernels::panic_format::type_code`).
    pub types: i64,
    /// The values, as bits.
    pub values: [i64; parloop_kernels::panic_format::MAX_VALUES],
}

impl PanicRecord {
    /// Rust's panic message for the record; an `assert!`/`panic!` site's
    /// (code 11: `a` the site, `b` the function's id) from the table of
    /// the loop's kernels (`fns`, several when fused) or the helpers they
    /// call.
    pub(crate) fn message(&self, fns: &[&crate::DeviceFn]) -> String {
        match self.code {
            11 => fns.iter().find_map(|k| k.panic_message(self.b, self.a)).map_or_else(
                || format!("a panic at site {} of the kernel's code", self.a),
                |template| parloop_kernels::panic_format::render(template, self.types as u64, &self.values),
            ),
            1 => "attempt to divide by zero".into(),
            2 => "attempt to calculate the remainder with a divisor of zero".into(),
            3 => "attempt to divide with overflow".into(),
            4 => "attempt to calculate the remainder with overflow".into(),
            5 => format!("index out of bounds: the len is {} but the index is {}", self.b as u64, self.a as u64),
            6 => "assertion failed: step != 0".into(),
            7 => format!(
                "min > max, or either was NaN. min = {:?}, max = {:?}",
                f64::from_bits(self.a as u64),
                f64::from_bits(self.b as u64)
            ),
            8 => format!(
                "min > max, or either was NaN. min = {:?}, max = {:?}",
                f32::from_bits(self.a as u32),
                f32::from_bits(self.b as u32)
            ),
            9 => format!("min > max. min = {}, max = {}", self.a, self.b),
            10 => format!("min > max. min = {}, max = {}", self.a as u64, self.b as u64),
            c => format!("device code reported panic code {c}"),
        }
    }
}

/// A compiled module.
pub(crate) trait Module: Send + Sync {
    /// Launches `entry` with `grid` blocks of `block` threads.
    fn launch(&self, entry: &str, grid: u32, block: u32, shared_bytes: usize, params: &LaunchParams) -> Result<()>;
    /// Raises the stack each thread of later launches gets to at least
    /// `bytes` (the emulated device's fibers; GPUs size their own).
    fn reserve_stack(&self, _bytes: usize) {}
    /// The panic reported since the last call, if any, clearing the record
    /// (waits for the work issued so far).
    fn take_panic(&self) -> Result<Option<PanicRecord>> {
        Ok(None)
    }
}

/// What the device path needs from a device.
pub(crate) trait Device: Send + Sync {
    /// A readable name (for the profile and errors).
    fn name(&self) -> String;
    /// The thread working on the device now (see [`Occupant`]).
    fn occupant(&self) -> &Occupant;
    /// Allocates `bytes` (zeroed).
    fn alloc(&self, bytes: usize) -> Result<DeviceBuffer>;
    /// Copies `data` to the start of `buf`.
    fn upload(&self, buf: &DeviceBuffer, data: &[u8]) -> Result<()>;
    /// Copies the start of `buf` into `data`.
    fn download(&self, buf: &DeviceBuffer, data: &mut [u8]) -> Result<()>;
    /// `bytes` of host memory for transfers (pinned where possible).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    fn host_buffer(&self, bytes: usize) -> Result<HostBuffer>;
    /// Copies `data` to the start of `buf` on a stream of its own: launches
    /// issued later wait for it, launches issued earlier run on. Nothing
    /// queued may use `buf`, and `data` must stay unchanged until the next
    /// `synchronize` or `download` returns.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    fn upload_ordered(&self, buf: &DeviceBuffer, data: &[u8]) -> Result<()>;
    /// Copies the start of `buf` into `data` on the copy stream, after the
    /// launches issued so far; waits for that copy only (launches issued
    /// later may still be running when this returns).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    fn download_ordered(&self, buf: &DeviceBuffer, data: &mut [u8]) -> Result<()>;
    /// Compiles a module from CUDA C++ (cached by source hash; `name`
    /// appears in messages only, never in file names).
    fn compile(&self, name: &str, source: &str) -> Result<Arc<dyn Module>>;
    /// Whether loops compile with bounds checks (`PARLOOP_CHECK`, on unless `0`).
    fn checked(&self) -> bool;
    /// The most stack a thread of a generated loop may need, in bytes.
    fn max_stack_bytes(&self) -> usize;
    /// Shared memory one block may use, in bytes.
    fn shared_memory_per_block(&self) -> usize;
    /// Threads per block of generated loops.
    fn block_size(&self) -> u32;
    /// Waits until every launch and copy issued so far has finished.
    fn synchronize(&self) -> Result<()>;
    /// Copies `bytes` from `src` to `dst`, both on the device.
    fn copy(&self, dst: &DeviceBuffer, src: &DeviceBuffer, bytes: usize) -> Result<()>;
    /// What the device is and offers.
    fn properties(&self) -> DeviceProperties;
    /// Records an event on the compute stream (after the work issued so far).
    fn record_event(&self) -> Result<Event>;
    /// Seconds of device work between two events; waits for `end`.
    fn elapsed(&self, start: &Event, end: &Event) -> Result<f64>;
}

/// A stable 64-bit FNV-1a hash (for cache keys across runs).
pub(crate) fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The compiled-module cache directory: `PARLOOP_CACHE_DIR`, else
/// `~/.cache/parloop`, else the system temporary directory.
pub(crate) fn cache_dir() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("PARLOOP_CACHE_DIR").filter(|d| !d.is_empty()) {
        return dir.into();
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => std::path::PathBuf::from(home).join(".cache").join("parloop"),
        None => std::env::temp_dir().join("parloop-cache"),
    }
}

/// `PARLOOP_CHECK`: `1`, empty or unset compiles device loops with bounds
/// checks on every dynamic index (as Rust checks them on the host: an
/// index out of range is Rust's panic, not a read of other memory or a
/// write over it); `0` without, for speed once a program is trusted. Read
/// once, when a device is made.
pub(crate) fn check_from_env() -> Result<bool> {
    match std::env::var("PARLOOP_CHECK") {
        Err(std::env::VarError::NotPresent) => Ok(true),
        Ok(v) if v.trim().is_empty() || v.trim() == "1" => Ok(true),
        Ok(v) if v.trim() == "0" => Ok(false),
        Ok(v) => Err(Error::Env { var: "PARLOOP_CHECK", value: v, reason: "expected 0 or 1".into() }),
        Err(std::env::VarError::NotUnicode(v)) => Err(Error::Env {
            var: "PARLOOP_CHECK",
            value: v.to_string_lossy().into_owned(),
            reason: "expected 0 or 1".into(),
        }),
    }
}

/// The sidecar of a cache entry: its size and hash.
fn sidecar(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".sum");
    path.with_file_name(name)
}

fn summary(bytes: &[u8]) -> String {
    format!("parloop-cache-entry size {} fnv1a {:016x}\n", bytes.len(), fnv1a(&[bytes]))
}

/// The contents of the cache entry `path` when its size and hash match its
/// sidecar (written by [`write_cache_entry`]); `None` when it is missing,
/// truncated or otherwise damaged (the caller then rebuilds it).
pub(crate) fn read_cache_entry(path: &Path) -> Option<Vec<u8>> {
    let expected = std::fs::read_to_string(sidecar(path)).ok()?;
    let bytes = std::fs::read(path).ok()?;
    (summary(&bytes) == expected).then_some(bytes)
}

/// Writes a cache entry atomically: the contents and the sidecar each go
/// to a private temporary file in `path`'s directory and are renamed into
/// place, the contents first, so a reader sees either a complete matching
/// pair or a mismatch (and rebuilds); never a half-written file.
pub(crate) fn write_cache_entry(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = |p: &Path| {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let mut name = p.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".{}-{}.tmp", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        p.with_file_name(name)
    };
    let (data_tmp, sum_tmp) = (tmp(path), tmp(&sidecar(path)));
    let result = (|| {
        std::fs::write(&data_tmp, bytes)?;
        std::fs::write(&sum_tmp, summary(bytes))?;
        std::fs::rename(&data_tmp, path)?;
        std::fs::rename(&sum_tmp, sidecar(path))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&data_tmp);
        let _ = std::fs::remove_file(&sum_tmp);
    }
    result
}
