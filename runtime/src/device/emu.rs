//! The emulated device: generated CUDA C++ compiled by the host C++
//! compiler (`CXX`, default `g++`) against `parloop_kernels::EMU_HEADER`,
//! loaded with libloading. Modules are cached on disk by a hash of the
//! source and the compiler, so a second run compiles nothing. Cache files
//! are named by that hash alone, written atomically with a sidecar holding
//! their size and hash, and verified before loading: a damaged entry (a
//! truncated library would crash the process when loaded) is rebuilt.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};

use std::sync::atomic::{AtomicUsize, Ordering};

use super::{
    cache_dir, check_from_env, fnv1a, read_cache_entry, write_cache_entry, Device, DeviceBuffer, DeviceProperties,
    Event, HostBuffer, LaunchParams, Module, PanicRecord,
};
use crate::error::{Error, Result};

/// An error of the emulator's compiler or loader while `doing`, kept as the
/// source.
fn library(doing: String, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::DeviceLibrary { name: "emu".into(), doing, source: Box::new(e) }
}

/// The emulated device.
pub(crate) struct Emu {
    compiler: String,
    modules: Mutex<HashMap<u64, Arc<dyn Module>>>,
    check: bool,
    occupant: super::Occupant,
}

/// The most stack one emulated thread may have: fiber stacks are
/// reserved address space (committed as touched), one per thread of a block.
pub(crate) const EMU_MAX_STACK: usize = 64 << 20;

impl Emu {
    pub(crate) fn new() -> Result<Emu> {
        let compiler = std::env::var("CXX").ok().filter(|c| !c.is_empty()).unwrap_or_else(|| "g++".into());
        let probe = Command::new(&compiler).arg("--version").output();
        if !probe.is_ok_and(|o| o.status.success()) {
            return Err(Error::Backend {
                name: "emu".into(),
                reason: format!("the emulated device compiles generated code with `{compiler}`, which cannot be run"),
            });
        }
        // Its modules live in the cache directory: one that cannot be made
        // fails now, naming the variable, not at the first loop.
        let dir = cache_dir().join("emu");
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return Err(match std::env::var_os("PARLOOP_CACHE_DIR").filter(|d| !d.is_empty()) {
                Some(value) => Error::Env {
                    var: "PARLOOP_CACHE_DIR",
                    value: value.to_string_lossy().into_owned(),
                    reason: format!("the emulated device keeps its compiled modules in `{}`: {e}", dir.display()),
                },
                None => Error::Io { path: dir.display().to_string(), source: e },
            });
        }
        Ok(Emu {
            compiler,
            modules: Mutex::new(HashMap::new()),
            check: check_from_env()?,
            occupant: super::Occupant::default(),
        })
    }
}

/// A loaded module.
struct EmuModule {
    lib: libloading::Library,
    /// Serialises launches: the emulator's fiber state is per module.
    lock: Mutex<()>,
    name: String,
    /// Stack bytes each fiber gets (at least; see `EMU_HEADER`).
    stack: AtomicUsize,
}

/// `pl_emu_launch(body, args, grid, block, shared_bytes, stacks, stack_bytes)`.
type LaunchFn =
    unsafe extern "C" fn(unsafe extern "C" fn(*const u8), *const u8, u32, u32, usize, *const *mut u8, usize) -> i32;
type EntryFn = unsafe extern "C" fn(*const u8);
type ErrorFn = unsafe extern "C" fn() -> *mut PanicRecord;

impl Module for EmuModule {
    fn launch(&self, entry: &str, grid: u32, block: u32, shared_bytes: usize, params: &LaunchParams) -> Result<()> {
        let fail = |reason: String| Error::Backend { name: "emu".into(), reason };
        let _guard = crate::sync::lock(&self.lock);
        // SAFETY: both symbols are defined by the generated module with these
        // signatures (`PL_ENTRY` under PARLOOP_EMU, and EMU_HEADER's launcher).
        let code = unsafe {
            let launch: libloading::Symbol<LaunchFn> =
                self.lib.get(b"pl_emu_launch").map_err(|e| library(format!("module `{}`", self.name), e))?;
            let body: libloading::Symbol<EntryFn> = self
                .lib
                .get(entry.as_bytes())
                .map_err(|e| library(format!("module `{}` has no entry `{entry}`", self.name), e))?;
            let stack = self.stack.load(Ordering::Relaxed);
            match block {
                1..=1024 => super::fiber_stacks::with_stacks(block as usize, stack, |stacks, usable| {
                    launch(
                        *body,
                        (params as *const LaunchParams).cast(),
                        grid,
                        block,
                        shared_bytes,
                        stacks.as_ptr(),
                        usable,
                    )
                })
                .unwrap_or(2),
                _ => 1,
            }
        };
        match code {
            0 => Ok(()),
            3 => Err(fail(format!(
                "launch of `{entry}` wrote past its {shared_bytes} bytes of shared memory (module `{}`)",
                self.name
            ))),
            2 => Err(Error::OutOfMemory {
                what: format!(
                    "launch of `{entry}` (module `{}`): {block} fiber stacks of {} bytes and {shared_bytes} bytes of shared memory",
                    self.name,
                    self.stack.load(Ordering::Relaxed)
                ),
                bytes: (block as usize).saturating_mul(self.stack.load(Ordering::Relaxed)).saturating_add(shared_bytes),
            }),
            _ => Err(fail(format!("launch of `{entry}` failed (code {code}, {block} threads per block)"))),
        }
    }

    fn reserve_stack(&self, bytes: usize) {
        self.stack.fetch_max(bytes, Ordering::Relaxed);
    }

    fn take_panic(&self) -> Result<Option<PanicRecord>> {
        // SAFETY: `pl_emu_error` is defined by the prelude with this
        // signature; it returns this OS thread's record (launches ran on
        // this thread), which nothing else accesses meanwhile.
        unsafe {
            let Ok(get) = self.lib.get::<ErrorFn>(b"pl_emu_error") else {
                return Ok(None); // a module without the prelude (halo packing) never panics
            };
            let record = get();
            if record.is_null() || (*record).owner == 0 {
                return Ok(None);
            }
            let found = *record;
            record.write(PanicRecord { owner: 0, code: 0, element: 0, a: 0, b: 0, types: 0, values: [0; 4] });
            Ok(Some(found))
        }
    }
}

impl Device for Emu {
    fn occupant(&self) -> &super::Occupant {
        &self.occupant
    }
    fn name(&self) -> String {
        format!("emulated device ({})", self.compiler)
    }

    fn alloc(&self, bytes: usize) -> Result<DeviceBuffer> {
        // 8-byte words keep every element type aligned.
        let n = bytes.div_ceil(8).max(1);
        let mut words: Vec<u64> = Vec::new();
        words
            .try_reserve_exact(n)
            .map_err(|_| Error::OutOfMemory { what: "an emulated device buffer".into(), bytes })?;
        words.resize(n, 0);
        let addr = words.as_mut_ptr() as u64;
        Ok(DeviceBuffer::new(addr, bytes, Box::new(Mutex::new(words))))
    }

    fn upload(&self, buf: &DeviceBuffer, data: &[u8]) -> Result<()> {
        if data.len() > buf.bytes {
            return Err(Error::Backend {
                name: "emu".into(),
                reason: format!("upload of {} bytes into {}", data.len(), buf.bytes),
            });
        }
        // SAFETY: `buf.addr` is the start of a live allocation of at least
        // `buf.bytes` bytes, owned by `buf`; nothing else writes it now.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf.addr as *mut u8, data.len()) };
        Ok(())
    }

    fn download(&self, buf: &DeviceBuffer, data: &mut [u8]) -> Result<()> {
        if data.len() > buf.bytes {
            return Err(Error::Backend {
                name: "emu".into(),
                reason: format!("download of {} bytes from {}", data.len(), buf.bytes),
            });
        }
        // SAFETY: as in `upload`.
        unsafe { std::ptr::copy_nonoverlapping(buf.addr as *const u8, data.as_mut_ptr(), data.len()) };
        Ok(())
    }

    fn host_buffer(&self, bytes: usize) -> Result<HostBuffer> {
        // Device memory is host memory: nothing to pin.
        Ok(HostBuffer::new(vec![0; bytes], None))
    }

    fn upload_ordered(&self, buf: &DeviceBuffer, data: &[u8]) -> Result<()> {
        // Launches are synchronous: a plain copy is ordered.
        self.upload(buf, data)
    }

    fn download_ordered(&self, buf: &DeviceBuffer, data: &mut [u8]) -> Result<()> {
        self.download(buf, data)
    }

    fn compile(&self, name: &str, source: &str) -> Result<Arc<dyn Module>> {
        let full = format!("#define PARLOOP_EMU 1\n{}\n{}", parloop_kernels::EMU_HEADER, source);
        let hash = fnv1a(&[full.as_bytes(), self.compiler.as_bytes(), env!("CARGO_PKG_VERSION").as_bytes()]);
        if let Some(m) = crate::sync::lock(&self.modules).get(&hash) {
            return Ok(m.clone());
        }
        let dir = cache_dir().join("emu");
        let io = |path: &PathBuf| {
            let path = path.display().to_string();
            move |source| Error::Io { path, source }
        };
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        // File names come from the hash only: kernel names may be anything.
        let so = dir.join(format!("m-{hash:016x}.so"));
        if read_cache_entry(&so).is_none() {
            // Private file names, then renames: concurrent compiles (threads
            // or processes) never see a half-written source or library.
            static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let unique = format!("{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
            let cpp = dir.join(format!("m-{hash:016x}.{unique}.tmp.cpp"));
            let tmp = dir.join(format!("m-{hash:016x}.{unique}.tmp.so"));
            std::fs::write(&cpp, &full).map_err(io(&cpp))?;
            let out = Command::new(&self.compiler)
                .args(["-std=c++17", "-O2", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math", "-w", "-o"])
                .arg(&tmp)
                .arg(&cpp)
                .output()
                .map_err(|e| library(format!("cannot run `{}`", self.compiler), e))?;
            if !out.status.success() {
                let _ = std::fs::remove_file(&cpp);
                let _ = std::fs::remove_file(&tmp);
                return Err(Error::Compile {
                    module: name.into(),
                    log: String::from_utf8_lossy(&out.stderr).into_owned(),
                    source_text: parloop_kernels::loops::numbered(&full),
                });
            }
            let keep = dir.join(format!("m-{hash:016x}.cpp"));
            std::fs::rename(&cpp, &keep).map_err(io(&keep))?;
            let bytes = std::fs::read(&tmp).map_err(io(&tmp))?;
            let _ = std::fs::remove_file(&tmp);
            write_cache_entry(&so, &bytes).map_err(io(&so))?;
        }
        // SAFETY: the library is code we generated and compiled, verified
        // against its recorded size and hash just now, with no static
        // initialisers beyond the emulator's zeroed globals.
        let lib = unsafe { libloading::Library::new(&so) }
            .map_err(|e| library(format!("cannot load {}", so.display()), e))?;
        let module: Arc<dyn Module> =
            Arc::new(EmuModule { lib, lock: Mutex::new(()), name: name.into(), stack: AtomicUsize::new(0) });
        crate::sync::lock(&self.modules).insert(hash, module.clone());
        Ok(module)
    }

    fn checked(&self) -> bool {
        self.check
    }

    fn max_stack_bytes(&self) -> usize {
        EMU_MAX_STACK
    }

    fn shared_memory_per_block(&self) -> usize {
        48 * 1024
    }

    fn block_size(&self) -> u32 {
        crate::config::block_size(128)
    }

    fn synchronize(&self) -> Result<()> {
        // Launches and copies are synchronous on the host.
        Ok(())
    }

    fn copy(&self, dst: &DeviceBuffer, src: &DeviceBuffer, bytes: usize) -> Result<()> {
        if bytes > dst.bytes || bytes > src.bytes {
            return Err(Error::Backend {
                name: "emu".into(),
                reason: format!("copy of {bytes} bytes between buffers of {} and {}", src.bytes, dst.bytes),
            });
        }
        // SAFETY: both are live allocations of at least `bytes` bytes; distinct buffers never overlap.
        unsafe { std::ptr::copy(src.addr as *const u8, dst.addr as *mut u8, bytes) };
        Ok(())
    }

    fn properties(&self) -> DeviceProperties {
        DeviceProperties {
            name: self.name(),
            compute_capability: None,
            multiprocessors: 1,
            shared_memory_per_block: self.shared_memory_per_block(),
            shared_memory_per_block_optin: self.shared_memory_per_block(),
            global_memory: 0,
        }
    }

    fn record_event(&self) -> Result<Event> {
        // Work is synchronous: an event is the time it is recorded.
        Ok(Event::new(std::time::Instant::now()))
    }

    fn elapsed(&self, start: &Event, end: &Event) -> Result<f64> {
        match (start.get::<std::time::Instant>(), end.get::<std::time::Instant>()) {
            (Some(a), Some(b)) => Ok(b.saturating_duration_since(*a).as_secs_f64()),
            _ => Err(Error::Backend { name: "emu".into(), reason: "events of another device".into() }),
        }
    }
}
