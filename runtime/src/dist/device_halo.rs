//! Halo exchange on a device: the export entries are gathered into a
//! device send buffer by a pack kernel and the received ones scattered
//! into the dats' halo tails by an unpack kernel, so that values never go
//! through the host dats. Messages carry device pointers when MPI is
//! CUDA-aware (`PARLOOP_CUDA_AWARE`, else `MPIX_Query_cuda_support`) and
//! otherwise go through pinned host staging buffers, the received data
//! uploaded on a stream of its own. The core launches are queued
//! between posting and waiting, so the device computes while messages fly.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::execute::label;
use super::messages::{exchange, HaloDat, Layout, Piece};
use super::{HaloTraffic, Mpi};
use crate::arg::Arg;
use crate::decl::Set;
use crate::device::{Device, DeviceBuffer, HostBuffer, LaunchParams, Module};
use crate::error::{Error, Result};
use crate::profile::Range;

/// Pack and unpack in 4-byte words (every element type is a whole number
/// of them): `ptr[0]` source, `ptr[1]` i32 entity list, `ptr[2]`
/// destination; `val[0]` entities, `val[1]` words per entity.
const HALO_SOURCE: &str = r#"
#define PL_HALO_COPY(name, to, from) \
PL_ENTRY(name) { \
    const unsigned int* src = (const unsigned int*)prm.ptr[0]; \
    const int* list = (const int*)prm.ptr[1]; \
    unsigned int* dst = (unsigned int*)prm.ptr[2]; \
    const long long w = prm.val[1], words = prm.val[0] * w; \
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < words; \
         k += (long long)gridDim.x * blockDim.x) { \
        const long long e = k / w, at = (long long)list[e] * w + (k - e * w); \
        dst[to] = src[from]; \
    } \
}
PL_HALO_COPY(pl_halo_pack, k, at)
PL_HALO_COPY(pl_halo_unpack, at, k)
"#;

/// Threads per block of the pack and unpack kernels.
const BLOCK: u32 = 256;
/// Most blocks of one pack or unpack launch (a grid-stride loop covers the rest).
const MAX_GRID: u64 = 1024;

/// What device exchanges keep between loops.
#[derive(Default)]
pub(crate) struct DeviceHalos {
    /// The pack/unpack module.
    module: OnceLock<Arc<dyn Module>>,
    /// Whether MPI may be given device pointers.
    cuda_aware: OnceLock<bool>,
    /// Entity lists on the device, by (list address, length): a halo's
    /// lists live as long as the runtime.
    lists: Mutex<HashMap<(usize, usize), Arc<DeviceBuffer>>>,
    /// Send and receive buffers, grown as needed.
    buffers: Mutex<[Option<Arc<DeviceBuffer>>; 2]>,
    /// Their host staging copies (pinned), when MPI is not CUDA-aware.
    staging: Mutex<[Option<HostBuffer>; 2]>,
}

/// Whether MPI reads and writes device memory itself: `PARLOOP_CUDA_AWARE`
/// when set, else the library's own answer (Open MPI and MPICH export
/// `MPIX_Query_cuda_support`). The emulated device's memory is host memory,
/// so there the answer is yes unless the variable says otherwise.
fn cuda_aware(device: &dyn Device) -> Result<bool> {
    if let Some(v) = std::env::var("PARLOOP_CUDA_AWARE").ok().filter(|v| !v.trim().is_empty()) {
        return match v.trim() {
            "1" => Ok(true),
            "0" => Ok(false),
            _ => Err(Error::Env { var: "PARLOOP_CUDA_AWARE", value: v, reason: "expected 0 or 1".into() }),
        };
    }
    if device.properties().compute_capability.is_none() {
        return Ok(true);
    }
    Ok(query_cuda_support())
}

/// `MPIX_Query_cuda_support()`, looked up in the running process so that
/// MPI libraries without it still link.
fn query_cuda_support() -> bool {
    type Query = unsafe extern "C" fn() -> std::os::raw::c_int;
    let this = libloading::os::unix::Library::this();
    // SAFETY: when present, the symbol is MPI's `int MPIX_Query_cuda_support(void)`,
    // callable any time after MPI_Init.
    unsafe { this.get::<Query>(b"MPIX_Query_cuda_support").map(|query| query() == 1).unwrap_or(false) }
}

impl DeviceHalos {
    fn module(&self, device: &dyn Device) -> Result<Arc<dyn Module>> {
        if let Some(m) = self.module.get() {
            return Ok(m.clone());
        }
        let source = format!("{}{HALO_SOURCE}", parloop_kernels::loops::LOOP_PRELUDE);
        let m = device.compile("parloop_halo", &source)?;
        Ok(self.module.get_or_init(|| m).clone())
    }

    fn list(&self, device: &dyn Device, list: &[u32]) -> Result<Arc<DeviceBuffer>> {
        let key = (list.as_ptr() as usize, list.len());
        let mut lists = crate::sync::lock(&self.lists);
        if let Some(b) = lists.get(&key) {
            return Ok(b.clone());
        }
        let bytes: &[u8] = bytemuck::cast_slice(list);
        let buf = device.alloc(bytes.len().max(4))?;
        device.upload(&buf, bytes)?;
        let buf = Arc::new(buf);
        lists.insert(key, buf.clone());
        Ok(buf)
    }

    /// A buffer of at least `bytes` (0: send, 1: receive).
    fn buffer(&self, device: &dyn Device, which: usize, bytes: usize) -> Result<Arc<DeviceBuffer>> {
        let mut buffers = crate::sync::lock(&self.buffers);
        let slot = &mut buffers[which];
        match slot {
            Some(b) if b.bytes >= bytes => Ok(b.clone()),
            _ => Ok(slot.insert(Arc::new(device.alloc(bytes.next_power_of_two().max(256))?)).clone()),
        }
    }
}

/// The staging buffer `slot` (0 send, 1 receive) of at least `bytes`.
fn staging<'a>(slot: &'a mut Option<HostBuffer>, device: &dyn Device, bytes: usize) -> Result<&'a mut [u8]> {
    if slot.as_ref().is_none_or(|b| b.len() < bytes) {
        *slot = None;
        *slot = Some(device.host_buffer(bytes.next_power_of_two().max(256))?);
    }
    Ok(&mut slot.as_mut().expect("allocated")[..bytes])
}

/// Launches the pack or unpack kernel for each piece; `dats[k]` is the
/// device address of dat `k`'s values, `buffer` the message buffer's.
fn launch_pieces(
    halos: &DeviceHalos,
    device: &dyn Device,
    module: &dyn Module,
    (args, dats, addrs): (&[Arg], &[HaloDat], &[u64]),
    pieces: &[Piece],
    buffer: u64,
    pack: bool,
) -> Result<()> {
    for p in pieces.iter().filter(|p| !p.list.is_empty()) {
        let d = &dats[p.dat];
        let step = if pack { "pack" } else { "unpack" };
        let _range = Range::lazy(|| format!("halo/{}/{step}", args[d.arg].data_name()));
        let list = halos.list(device, p.list)?;
        let at = buffer + p.at as u64;
        let (src, dst) = if pack { (addrs[p.dat], at) } else { (at, addrs[p.dat]) };
        launch_copy(module, pack, [src, list.addr, dst], p.list.len(), d.bytes_per_entity / 4)?;
    }
    Ok(())
}

/// One pack (`ptrs`: dat, list, buffer) or unpack (buffer, list, dat) of
/// `n` entities of `words` 4-byte words.
fn launch_copy(module: &dyn Module, pack: bool, ptrs: [u64; 3], n: usize, words: usize) -> Result<()> {
    let mut params = LaunchParams::default();
    params.ptr[..3].copy_from_slice(&ptrs);
    params.val[0] = n as i64;
    params.val[1] = words as i64;
    let grid = (n as u64 * words as u64).div_ceil(u64::from(BLOCK)).clamp(1, MAX_GRID) as u32;
    module.launch(if pack { "pl_halo_pack" } else { "pl_halo_unpack" }, grid, BLOCK, 0, &params)
}

impl Mpi {
    /// The device counterpart of `halo_exchange`: packs the stale halos the
    /// loop reads on `device`, posts the messages, runs `core` (which
    /// queues the core launches), waits and unpacks on the device.
    pub(crate) fn device_halo_exchange(
        &self,
        device: &Arc<dyn Device>,
        set: &Set,
        args: &[Arg],
        exec_halo: bool,
        core: &mut dyn FnMut() -> Result<()>,
    ) -> Result<HaloTraffic> {
        let dats = self.stale_reads(set, args, exec_halo);
        let Some(comm) = self.comm.as_ref().filter(|_| !dats.is_empty()) else {
            core()?;
            return Ok(HaloTraffic::default());
        };
        let halos = &self.device;
        let dev = device.as_ref();
        let module = halos.module(dev)?;
        let aware = match halos.cuda_aware.get() {
            Some(&a) => a,
            None => {
                let a = cuda_aware(dev)?;
                *halos.cuda_aware.get_or_init(|| a)
            }
        };
        let mut addrs = Vec::with_capacity(dats.len());
        for d in &dats {
            let a = &args[d.arg];
            let busy = || Error::Busy { kernel: "halo exchange".into(), dat: a.data_name().into() };
            addrs.push(a.storage.on_device(device).ok_or_else(busy)??);
        }
        let (send, recv) = (Layout::new(&dats, true), Layout::new(&dats, false));
        let send_buf = halos.buffer(dev, 0, send.total)?;
        let recv_buf = halos.buffer(dev, 1, recv.total)?;
        let (send_dev, recv_dev) = (send_buf.addr, recv_buf.addr);
        launch_pieces(halos, dev, module.as_ref(), (args, &dats, &addrs), &send.pieces, send_dev, true)?;
        let label = label(args, &dats);
        let overlap = !self.no_overlap;
        let wait = if aware {
            // MPI reads the send buffer: the packs must have finished.
            dev.synchronize()?;
            // SAFETY: both device buffers hold their layouts (allocated
            // above, kept in `halos`) and nothing else uses them until the
            // exchange returns; MPI is CUDA-aware (or the device's memory
            // is host memory).
            unsafe {
                exchange(
                    comm,
                    (send_dev as *const u8, &send.slots),
                    &recv.landing_in_buffer(recv_dev as *mut u8),
                    overlap,
                    &label,
                    core,
                )?
            }
        } else {
            let mut hosts = crate::sync::lock(&halos.staging);
            let [send_slot, recv_slot] = &mut *hosts;
            let send_host = staging(send_slot, dev, send.total)?;
            let recv_host = staging(recv_slot, dev, recv.total)?;
            {
                let _range = Range::lazy(|| format!("halo/{label}/download"));
                dev.download_ordered(&send_buf, send_host)?;
            }
            // SAFETY: both host buffers hold their layouts and live past the call.
            let wait = unsafe {
                exchange(
                    comm,
                    (send_host.as_ptr(), &send.slots),
                    &recv.landing_in_buffer(recv_host.as_mut_ptr()),
                    overlap,
                    &label,
                    core,
                )?
            };
            let _range = Range::lazy(|| format!("halo/{label}/upload"));
            // On the copy stream, while the core launches still run; the
            // unpack waits for it. The buffer stays untouched until the
            // copy is done: the next exchange's packs queue behind the
            // unpack on the compute stream, and its download waits for them.
            dev.upload_ordered(&recv_buf, recv_host)?;
            wait
        };
        // Recorded before the unpack is tried (`Launcher::new`'s reason).
        for d in &dats {
            args[d.arg].storage.device_written();
        }
        launch_pieces(halos, dev, module.as_ref(), (args, &dats, &addrs), &recv.pieces, recv_dev, false)?;
        Ok(self.refreshed(args, &dats, send.slots.len(), wait))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::emu::Emu;

    fn upload(device: &dyn Device, bytes: &[u8]) -> DeviceBuffer {
        let buf = device.alloc(bytes.len()).unwrap();
        device.upload(&buf, bytes).unwrap();
        buf
    }

    #[test]
    fn pack_and_unpack_move_the_listed_entities_on_the_emulated_device() {
        let device = Emu::new().unwrap();
        let module = DeviceHalos::default().module(&device).unwrap();
        // Six entities of three f64 (six words each).
        let values: Vec<f64> = (0..18).map(f64::from).collect();
        let dat = upload(&device, bytemuck::cast_slice(&values));
        let list = upload(&device, bytemuck::cast_slice(&[4i32, 1]));
        let message = device.alloc(2 * 24).unwrap();
        launch_copy(module.as_ref(), true, [dat.addr, list.addr, message.addr], 2, 6).unwrap();
        let mut packed = vec![0.0f64; 6];
        device.download(&message, bytemuck::cast_slice_mut(&mut packed)).unwrap();
        assert_eq!(packed, [12.0, 13.0, 14.0, 3.0, 4.0, 5.0]);
        let halo = device.alloc(18 * 8).unwrap();
        let tail = upload(&device, bytemuck::cast_slice(&[0i32, 5]));
        launch_copy(module.as_ref(), false, [message.addr, tail.addr, halo.addr], 2, 6).unwrap();
        let mut unpacked = vec![0.0f64; 18];
        device.download(&halo, bytemuck::cast_slice_mut(&mut unpacked)).unwrap();
        let mut want = vec![0.0f64; 18];
        want[..3].copy_from_slice(&[12.0, 13.0, 14.0]);
        want[15..].copy_from_slice(&[3.0, 4.0, 5.0]);
        assert_eq!(unpacked, want);
    }

    #[test]
    fn the_halo_kernels_compile_with_nvrtc_without_warnings() {
        // SAFETY: only probes for the library with dlopen.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            assert!(
                std::env::var("PARLOOP_REQUIRE_NVRTC").as_deref() != Ok("1"),
                "PARLOOP_REQUIRE_NVRTC=1 but libnvrtc cannot be loaded"
            );
            return;
        }
        use cudarc::nvrtc::result;
        let source = format!("{}{HALO_SOURCE}", parloop_kernels::loops::LOOP_PRELUDE);
        let src = std::ffi::CString::new(source).unwrap();
        let prog = result::create_program(&src, None).unwrap();
        // SAFETY: `prog` was just created and is destroyed below.
        let compiled = unsafe { result::compile_program(prog, &["--gpu-architecture=sm_90", "-std=c++17"]) };
        // SAFETY: as above.
        let log = unsafe { result::get_program_log(prog) }.unwrap();
        let log: String = log.iter().map(|&c| c as u8 as char).collect::<String>().trim_end_matches('\0').trim().into();
        // SAFETY: as above; not used afterwards.
        unsafe { result::destroy_program(prog) }.unwrap();
        assert!(compiled.is_ok() && log.is_empty(), "{compiled:?}\n{log}");
    }
}
