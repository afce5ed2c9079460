//! The CUDA device, through cudarc (driver and NVRTC, both loaded at run
//! time, so parloop builds and runs on machines without CUDA).
//!
//! Generated modules are compiled by NVRTC for the device's own
//! architecture (`sm_XY` from its compute capability) with `-lineinfo` and
//! without fused multiply-adds (device arithmetic rounds as Rust's does, see
//! `NVRTC_OPTIONS`), cached in memory and on disk (`PARLOOP_CACHE_DIR/cuda`)
//! by a hash of the source, the architecture, the options and the NVRTC
//! version: a second run of a program
//! compiles nothing. Memory is plain device allocations; every launch and
//! copy goes through one stream, so they are ordered, except the halo
//! copies of distributed runs, which have a stream of their own joined to
//! the compute stream by events.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{
    result, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;

use super::{
    cache_dir, check_from_env, fnv1a, read_cache_entry, write_cache_entry, Device, DeviceBuffer, DeviceProperties,
    Event, HostBuffer, LaunchParams, Module, PanicRecord,
};
use crate::error::{Error, Result};

// SAFETY: `LaunchParams` is `#[repr(C)]` plain data (integers), laid out as
// the generated `pl_params`, and is passed to kernels by value.
unsafe impl cudarc::driver::DeviceRepr for LaunchParams {}

/// Why the CUDA backend cannot do what was asked, found by parloop itself.
fn refuse(reason: impl Into<String>) -> Error {
    Error::Backend { name: "cuda".into(), reason: reason.into() }
}

/// An error of the driver or NVRTC while `doing`, kept as the source.
fn library(doing: impl Into<String>, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::DeviceLibrary { name: "cuda".into(), doing: doing.into(), source: Box::new(e) }
}

/// [`library`] for `map_err`, with a fixed description of what was being done.
fn fail<E: std::error::Error + Send + Sync + 'static>(doing: &'static str) -> impl FnOnce(E) -> Error {
    move |e| library(doing, e)
}

/// Whether a CUDA device can be used: the driver library loads and reports
/// at least one device.
pub(crate) fn present() -> bool {
    // SAFETY: only probes for the library with dlopen.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return false;
    }
    result::init().is_ok() && CudaContext::device_count().is_ok_and(|n| n > 0)
}

/// A GPU.
pub(crate) struct Cuda {
    ctx: Arc<CudaContext>,
    /// The compute stream: every launch and copy, in order.
    stream: Arc<CudaStream>,
    /// Halo uploads, overlapping the compute stream's work.
    copies: Arc<CudaStream>,
    properties: DeviceProperties,
    arch: String,
    name: String,
    shared_optin: usize,
    nvrtc_version: String,
    modules: Mutex<HashMap<u64, Arc<dyn Module>>>,
    check: bool,
    occupant: super::Occupant,
}

/// The most local memory (stack) a CUDA thread may use.
const CUDA_MAX_STACK: usize = 512 * 1024;

impl Cuda {
    /// The device `PARLOOP_DEVICE`, else `local_rank % device_count` (the
    /// rank among the MPI ranks on this node; 0 when serial).
    pub(crate) fn new(local_rank: usize) -> Result<Cuda> {
        let check = check_from_env()?;
        // SAFETY: only probes for the libraries with dlopen.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(refuse("libcuda (the NVIDIA driver) cannot be loaded: no GPU here? Use threads or emu"));
        }
        // SAFETY: as above.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(refuse("libnvrtc cannot be loaded: install the CUDA toolkit or set LD_LIBRARY_PATH"));
        }
        result::init().map_err(fail("initialising the driver"))?;
        let count = CudaContext::device_count().map_err(fail("counting devices"))?;
        // (Checked, trimmed, when the runtime was created.)
        let ordinal: usize = crate::config::number("PARLOOP_DEVICE", |_| true, "a GPU ordinal")?
            .unwrap_or(local_rank % count.max(1) as usize);
        if count <= 0 || ordinal >= count as usize {
            return Err(refuse(format!("device {ordinal} requested, {count} present")));
        }
        let ctx = CudaContext::new(ordinal).map_err(fail("creating a context"))?;
        let (major, minor) = ctx.compute_capability().map_err(fail("reading the compute capability"))?;
        let shared_optin = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(fail("reading the opt-in shared memory size"))? as usize;
        let name = ctx.name().map_err(fail("reading the device name"))?;
        let attribute = |a| ctx.attribute(a).map_err(fail("reading a device attribute")).map(|v| v.max(0) as usize);
        let properties = DeviceProperties {
            name: name.clone(),
            compute_capability: Some((major, minor)),
            multiprocessors: attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            shared_memory_per_block: attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
            shared_memory_per_block_optin: shared_optin,
            global_memory: ctx.total_mem().map_err(fail("reading the memory size"))?,
        };
        let (mut vmaj, mut vmin) = (0, 0);
        // SAFETY: writes two integers.
        unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut vmaj, &mut vmin) };
        Ok(Cuda {
            stream: ctx.new_stream().map_err(fail("creating a stream"))?,
            copies: ctx.new_stream().map_err(fail("creating a stream"))?,
            properties,
            ctx,
            arch: format!("sm_{major}{minor}"),
            name,
            shared_optin,
            nvrtc_version: format!("{vmaj}.{vmin}"),
            modules: Mutex::new(HashMap::new()),
            check,
            occupant: super::Occupant::default(),
        })
    }

    fn compile_ptx(&self, name: &str, source: &str) -> Result<String> {
        use cudarc::nvrtc::result as nvrtc;
        let src = CString::new(source).map_err(fail("passing the source to NVRTC"))?;
        let prog = nvrtc::create_program(&src, None).map_err(fail("creating an NVRTC program"))?;
        let opts = [format!("--gpu-architecture={}", self.arch), "-std=c++17".into(), "-lineinfo".into()]
            .into_iter()
            .chain(NVRTC_OPTIONS.iter().map(|o| o.to_string()))
            .collect::<Vec<_>>();
        // SAFETY: `prog` is live until destroyed below.
        let compiled = unsafe { nvrtc::compile_program(prog, &opts) };
        // SAFETY: as above.
        let log = unsafe { nvrtc::get_program_log(prog) }.map_err(fail("reading the NVRTC log"))?;
        let log: String = log.iter().map(|&c| c as u8 as char).collect::<String>().trim_end_matches('\0').to_string();
        let ptx = match compiled {
            // SAFETY: as above; the program compiled.
            Ok(()) => unsafe { nvrtc::get_ptx(prog) }
                .map_err(fail("reading the PTX"))
                .map(|p| p.iter().map(|&c| c as u8 as char).collect::<String>().trim_end_matches('\0').to_string()),
            Err(_) => Err(Error::Compile {
                module: name.into(),
                log: log.clone(),
                source_text: parloop_kernels::loops::numbered(source),
            }),
        };
        // SAFETY: not used afterwards.
        unsafe { nvrtc::destroy_program(prog) }.map_err(fail("destroying the NVRTC program"))?;
        ptx
    }
}

/// Floating-point options: device arithmetic follows Rust's, as the
/// emulator's `-ffp-contract=off` does on the host. NVRTC contracts `a * b +
/// c` into one fused multiply-add by default, which rounds once instead of
/// twice: results then differ from seq in the last bits (found on an H100,
/// where a direct WRITE of such a sum differed from seq). Division and square
/// roots are IEEE-rounded (NVRTC's default, stated here so that it stays so).
const NVRTC_OPTIONS: [&str; 3] = ["--fmad=false", "--prec-div=true", "--prec-sqrt=true"];

/// A device allocation, freed on drop.
struct Allocation {
    ptr: u64,
    ctx: Arc<CudaContext>,
}

impl Drop for Allocation {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from `malloc_sync` and is freed once.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// Host memory registered with the driver (page-locked), unregistered on drop.
struct Pinned {
    ptr: usize,
    ctx: Arc<CudaContext>,
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` was registered once, by `host_buffer`.
            let _ = unsafe { cudarc::driver::sys::cuMemHostUnregister(self.ptr as *mut std::ffi::c_void) };
        }
    }
}

/// A loaded module and the functions looked up so far.
struct CudaLoaded {
    module: Arc<CudaModule>,
    stream: Arc<CudaStream>,
    functions: Mutex<HashMap<String, (CudaFunction, usize)>>,
    /// Device address of the prelude's `pl_error` record, when the module has one.
    error: Option<u64>,
}

impl Module for CudaLoaded {
    fn launch(&self, entry: &str, grid: u32, block: u32, shared_bytes: usize, params: &LaunchParams) -> Result<()> {
        let mut functions = crate::sync::lock(&self.functions);
        if !functions.contains_key(entry) {
            let f = self.module.load_function(entry).map_err(|e| library(format!("entry `{entry}`"), e))?;
            functions.insert(entry.into(), (f, 48 * 1024));
        }
        let (function, opted) = functions.get_mut(entry).expect("inserted above");
        if shared_bytes > *opted {
            // Beyond 48 KiB a function must opt in to more dynamic shared memory.
            function
                .set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared_bytes as i32,
                )
                .map_err(fail("opting in to dynamic shared memory"))?;
            *opted = shared_bytes;
        }
        let config =
            LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: shared_bytes as u32 };
        let mut launch = self.stream.launch_builder(function);
        launch.arg(params);
        // SAFETY: the entry's only parameter is `pl_params`, which
        // `LaunchParams` mirrors; every pointer in it is a live allocation
        // of this context holding the data the generated code expects.
        unsafe { launch.launch(config) }.map_err(|e| library(format!("launch of `{entry}`"), e))?;
        Ok(())
    }

    fn take_panic(&self) -> Result<Option<PanicRecord>> {
        let Some(addr) = self.error else { return Ok(None) };
        let mut bytes = [0u8; std::mem::size_of::<PanicRecord>()];
        // SAFETY: `addr` is the module's `pl_error` (as large as the
        // record), read after the launches on the same stream; waited for.
        unsafe { result::memcpy_dtoh_async(&mut bytes[..], addr, self.stream.cu_stream()) }
            .map_err(fail("reading the panic record"))?;
        self.stream.synchronize().map_err(fail("synchronising"))?;
        let word = |k: usize| i64::from_ne_bytes(bytes[8 * k..8 * k + 8].try_into().expect("8 bytes"));
        let record = PanicRecord {
            owner: word(0) as u64,
            code: word(1),
            element: word(2),
            a: word(3),
            b: word(4),
            types: word(5),
            values: [word(6), word(7), word(8), word(9)],
        };
        if record.owner == 0 {
            return Ok(None);
        }
        // SAFETY: as above; cleared for the next loop.
        unsafe { result::memset_d8_async(addr, 0, bytes.len(), self.stream.cu_stream()) }
            .map_err(fail("clearing the panic record"))?;
        Ok(Some(record))
    }
}

impl Device for Cuda {
    fn occupant(&self) -> &super::Occupant {
        &self.occupant
    }
    fn name(&self) -> String {
        format!("{} ({}, NVRTC {})", self.name, self.arch, self.nvrtc_version)
    }

    fn alloc(&self, bytes: usize) -> Result<DeviceBuffer> {
        self.ctx.bind_to_thread().map_err(fail("binding the context"))?;
        let n = bytes.max(8);
        // SAFETY: a plain allocation, zeroed before use, freed by `Allocation`.
        let ptr = unsafe { result::malloc_sync(n) }.map_err(fail("allocating device memory"))?;
        let owner = Allocation { ptr, ctx: self.ctx.clone() };
        // SAFETY: `ptr` holds `n` bytes. On the compute stream, so that later
        // launches see zeros.
        unsafe { result::memset_d8_async(ptr, 0, n, self.stream.cu_stream()) }
            .map_err(fail("zeroing device memory"))?;
        Ok(DeviceBuffer::new(ptr, bytes, Box::new(owner)))
    }

    fn upload(&self, buf: &DeviceBuffer, data: &[u8]) -> Result<()> {
        if data.len() > buf.bytes {
            return Err(refuse(format!("upload of {} bytes into {}", data.len(), buf.bytes)));
        }
        self.ctx.bind_to_thread().map_err(fail("binding the context"))?;
        // On the compute stream (ordered with launches), then waited for, so
        // that `data` may be released when this returns.
        // SAFETY: `buf` holds at least `data.len()` bytes.
        unsafe { result::memcpy_htod_async(buf.addr, data, self.stream.cu_stream()) }
            .map_err(fail("copying to the device"))?;
        self.stream.synchronize().map_err(fail("synchronising"))
    }

    fn download(&self, buf: &DeviceBuffer, data: &mut [u8]) -> Result<()> {
        if data.len() > buf.bytes {
            return Err(refuse(format!("download of {} bytes from {}", data.len(), buf.bytes)));
        }
        self.ctx.bind_to_thread().map_err(fail("binding the context"))?;
        // After the loops issued before it on the stream, then waited for.
        // SAFETY: `buf` holds at least `data.len()` bytes.
        unsafe { result::memcpy_dtoh_async(data, buf.addr, self.stream.cu_stream()) }
            .map_err(fail("copying to the host"))?;
        self.stream.synchronize().map_err(fail("synchronising"))
    }

    fn host_buffer(&self, bytes: usize) -> Result<HostBuffer> {
        let mut v = vec![0u8; bytes];
        if bytes == 0 {
            return Ok(HostBuffer::new(v, None));
        }
        self.ctx.bind_to_thread().map_err(fail("binding the context"))?;
        let ptr = v.as_mut_ptr();
        // SAFETY: `v` owns `bytes` bytes at `ptr`, which stay put (moving a
        // Vec moves no heap memory) until `Pinned` unregisters them, before
        // the Vec is freed (`HostBuffer` drops the pin first).
        unsafe { cudarc::driver::sys::cuMemHostRegister_v2(ptr.cast(), bytes, 0) }
            .result()
            .map_err(fail("pinning host memory"))?;
        Ok(HostBuffer::new(v, Some(Box::new(Pinned { ptr: ptr as usize, ctx: self.ctx.clone() }))))
    }

    fn upload_ordered(&self, buf: &DeviceBuffer, data: &[u8]) -> Result<()> {
        if data.len() > buf.bytes {
            return Err(refuse(format!("upload of {} bytes into {}", data.len(), buf.bytes)));
        }
        self.ctx.bind_to_thread().map_err(fail("binding the context"))?;
        // SAFETY: `buf` holds at least `data.len()` bytes; the caller keeps
        // `data` unchanged until the copy is waited for.
        unsafe { result::memcpy_htod_async(buf.addr, data, self.copies.cu_stream()) }
            .map_err(fail("copying to the device"))?;
        // Later launches on the compute stream wait for the copy.
        self.stream.join(&self.copies).map_err(fail("ordering the streams"))
    }

    fn download_ordered(&self, buf: &DeviceBuffer, data: &mut [u8]) -> Result<()> {
        if data.len() > buf.bytes {
            return Err(refuse(format!("download of {} bytes from {}", data.len(), buf.bytes)));
        }
        self.ctx.bind_to_thread().map_err(fail("binding the context"))?;
        // After the launches queued so far (the packs), on the copy stream.
        self.copies.join(&self.stream).map_err(fail("ordering the streams"))?;
        // SAFETY: `buf` holds at least `data.len()` bytes; waited for below.
        unsafe { result::memcpy_dtoh_async(data, buf.addr, self.copies.cu_stream()) }
            .map_err(fail("copying to the host"))?;
        self.copies.synchronize().map_err(fail("synchronising"))
    }

    fn compile(&self, name: &str, source: &str) -> Result<Arc<dyn Module>> {
        let options = NVRTC_OPTIONS.concat();
        let hash = fnv1a(&[source.as_bytes(), self.arch.as_bytes(), self.nvrtc_version.as_bytes(), options.as_bytes()]);
        if let Some(m) = crate::sync::lock(&self.modules).get(&hash) {
            return Ok(m.clone());
        }
        let dir = cache_dir().join("cuda");
        // Named by the hash alone (kernel names may be anything), verified
        // against its sidecar before use, rebuilt when damaged.
        let path = dir.join(format!("m-{}-{hash:016x}.ptx", self.arch));
        let cached = read_cache_entry(&path).and_then(|b| String::from_utf8(b).ok());
        let ptx = match cached {
            Some(ptx) => ptx,
            None => {
                let ptx = self.compile_ptx(name, source)?;
                // The cache is an optimisation: failing to write it is not an error.
                if std::fs::create_dir_all(&dir).is_ok() {
                    let _ = write_cache_entry(&path, ptx.as_bytes());
                }
                ptx
            }
        };
        let module = self.ctx.load_module(Ptx::from_src(ptx)).map_err(fail("loading the module"))?;
        // The panic record's address, which stays valid while the module is loaded.
        let error = match module.get_global("pl_error", &self.stream) {
            Ok(view) if view.len() >= std::mem::size_of::<PanicRecord>() => {
                use cudarc::driver::DevicePtr;
                let (ptr, _sync) = view.device_ptr(&self.stream);
                Some(ptr)
            }
            _ => None,
        };
        let loaded: Arc<dyn Module> =
            Arc::new(CudaLoaded { module, stream: self.stream.clone(), functions: Mutex::new(HashMap::new()), error });
        crate::sync::lock(&self.modules).insert(hash, loaded.clone());
        Ok(loaded)
    }

    fn checked(&self) -> bool {
        self.check
    }

    fn max_stack_bytes(&self) -> usize {
        CUDA_MAX_STACK
    }

    fn shared_memory_per_block(&self) -> usize {
        self.shared_optin.max(48 * 1024)
    }

    fn block_size(&self) -> u32 {
        crate::config::block_size(256)
    }

    fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(fail("synchronising"))
    }

    fn copy(&self, dst: &DeviceBuffer, src: &DeviceBuffer, bytes: usize) -> Result<()> {
        if bytes > dst.bytes || bytes > src.bytes {
            return Err(refuse(format!("copy of {bytes} bytes between buffers of {} and {}", src.bytes, dst.bytes)));
        }
        self.ctx.bind_to_thread().map_err(fail("binding the context"))?;
        // SAFETY: both hold at least `bytes` bytes of this context.
        unsafe { result::memcpy_dtod_async(dst.addr, src.addr, bytes, self.stream.cu_stream()) }
            .map_err(fail("copying between device buffers"))
    }

    fn properties(&self) -> DeviceProperties {
        self.properties.clone()
    }

    fn record_event(&self) -> Result<Event> {
        let event = self.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(fail("creating an event"))?;
        event.record(&self.stream).map_err(fail("recording an event"))?;
        Ok(Event::new(event))
    }

    fn elapsed(&self, start: &Event, end: &Event) -> Result<f64> {
        match (start.get::<CudaEvent>(), end.get::<CudaEvent>()) {
            (Some(a), Some(b)) => {
                b.synchronize().map_err(fail("waiting for an event"))?;
                Ok(f64::from(a.elapsed_ms(b).map_err(fail("reading an event's time"))?) / 1e3)
            }
            _ => Err(refuse("events of another device")),
        }
    }
}
