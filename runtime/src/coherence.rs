//! Host/device coherence of a dat's or global's values: a device mirror
//! and which side is newer. Loops on a device upload only stale values and
//! mark what they write as newer on the device; host reads download only
//! then, and host writes mark the device copy stale.
//!
//! The host copy can also be *arriving*: a global whose all-reduce across
//! MPI ranks is in flight (started when the loop that reduced it ended,
//! `dist::reduce`). Whatever makes the host copy current for a reader, a
//! writer or an upload completes it first, so no access sees the rank's
//! partial value.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::device::{Device, DeviceBuffer};
use crate::error::{Error, Result};

/// Which copy holds the current values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Both copies are equal.
    InSync,
    /// A loop wrote the device copy.
    DeviceNewer,
    /// The host wrote its copy.
    HostNewer,
}

/// A device copy of host values.
pub(crate) struct Mirror {
    pub device: Arc<dyn Device>,
    pub buf: DeviceBuffer,
    pub state: State,
}

/// Values on their way to the host copy (an all-reduce in flight).
pub(crate) trait Incoming: Send {
    /// Waits for the values and writes them over `host` (the whole host
    /// copy, held exclusively by the caller).
    fn complete(self: Box<Self>, host: &mut [u8]);
}

/// Where a dat or global keeps its mirror, and values arriving.
#[derive(Default)]
pub(crate) struct MirrorSlot {
    mirror: Mutex<Option<Mirror>>,
    incoming: Mutex<Option<Box<dyn Incoming>>>,
    /// Whether `incoming` holds something: checked on every access
    /// without taking the lock.
    arriving: AtomicBool,
}

fn same_device(a: &Arc<dyn Device>, b: &Arc<dyn Device>) -> bool {
    std::ptr::eq(Arc::as_ptr(a) as *const (), Arc::as_ptr(b) as *const ())
}

/// An error when another thread's work on `m`'s device may be using the
/// copy (see `device::Occupant`): moving it to another device (freeing
/// it) then was a use after free. (A host read is not refused: one runtime
/// shared by threads reads a dat while its loop on another dat runs.)
fn busy_elsewhere(m: &Mirror) -> Result<()> {
    if m.device.occupant().elsewhere() {
        return Err(Error::Backend {
            name: m.device.name(),
            reason: "a dat's newest values are on this device, where another thread's loop is using them (a \
                     dat shared by two device runtimes is used by one at a time)"
                .into(),
        });
    }
    Ok(())
}

impl MirrorSlot {
    /// Makes `host` current: downloads when the device copy is newer. A
    /// failed copy (a lost GPU) is returned and leaves the state as it was.
    pub fn refresh_host(&self, host: &mut [u8]) -> Result<()> {
        self.receive(host);
        let mut slot = crate::sync::lock(&self.mirror);
        if let Some(m) = slot.as_mut() {
            if m.state == State::DeviceNewer {
                m.device.download(&m.buf, host)?;
                m.state = State::InSync;
            }
        }
        Ok(())
    }

    /// Whether the host copy is not current: a device loop wrote the
    /// values since the host last saw them, or values are arriving.
    pub fn host_stale(&self) -> bool {
        self.arriving.load(Ordering::Acquire)
            || crate::sync::lock(&self.mirror).as_ref().is_some_and(|m| m.state == State::DeviceNewer)
    }

    /// Values will arrive over the host copy: every access waits for
    /// them first. The caller holds the values exclusively, and nothing
    /// else is arriving (the access that locked them received it).
    pub fn arriving(&self, incoming: Box<dyn Incoming>) {
        let mut slot = crate::sync::lock(&self.incoming);
        debug_assert!(slot.is_none(), "one arrival at a time");
        *slot = Some(incoming);
        self.arriving.store(true, Ordering::Release);
    }

    /// Completes values arriving into `host` (the caller holds the values
    /// exclusively); the device copy, if any, is then older.
    fn receive(&self, host: &mut [u8]) {
        if !self.arriving.load(Ordering::Acquire) {
            return;
        }
        let incoming = {
            let mut slot = crate::sync::lock(&self.incoming);
            self.arriving.store(false, Ordering::Release);
            slot.take()
        };
        if let Some(incoming) = incoming {
            // Outside the lock: completing waits for the other ranks.
            incoming.complete(host);
            self.host_written();
        }
    }

    /// Drops the device copy (the host values changed shape).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub fn forget(&self) {
        *crate::sync::lock(&self.mirror) = None;
    }

    /// Takes the device copy out (a temporary's buffer going back to
    /// the pool, `decl::temporary`).
    pub fn take(&self) -> Option<Mirror> {
        crate::sync::lock(&self.mirror).take()
    }

    /// Puts a device copy from the pool back; its contents are not the
    /// values (a temporary is written before it is read), so neither
    /// side counts as newer.
    pub fn put(&self, mut mirror: Mirror) {
        mirror.state = State::InSync;
        *crate::sync::lock(&self.mirror) = Some(mirror);
    }

    /// Whether a device copy exists (a temporary may have one and no host
    /// values yet: `decl::temporary`).
    pub fn holds_buffer(&self) -> bool {
        crate::sync::lock(&self.mirror).is_some()
    }

    /// Gives the values a device copy of `bytes` and no host copy (a
    /// temporary written on the device first: its contents are not values
    /// until a loop writes them, so nothing is uploaded).
    pub fn allocate_on_device(&self, device: &Arc<dyn Device>, bytes: usize) -> Result<()> {
        let buf = device.alloc(bytes)?;
        *crate::sync::lock(&self.mirror) = Some(Mirror { device: device.clone(), buf, state: State::InSync });
        Ok(())
    }

    /// Records a host write.
    pub fn host_written(&self) {
        if let Some(m) = crate::sync::lock(&self.mirror).as_mut() {
            m.state = State::HostNewer;
        }
    }

    /// Records a device write.
    pub fn device_written(&self) {
        if let Some(m) = crate::sync::lock(&self.mirror).as_mut() {
            m.state = State::DeviceNewer;
        }
    }

    /// The address of the device copy on `device` of values a device loop
    /// on this thread holds (`exec::DeviceLocked`, which made it current
    /// there when it locked them).
    pub fn held_address(&self, device: &Arc<dyn Device>) -> Result<u64> {
        match crate::sync::lock(&self.mirror).as_ref() {
            Some(m) if same_device(&m.device, device) && m.state != State::HostNewer => Ok(m.buf.addr),
            _ => Err(Error::Backend {
                name: device.name(),
                reason: "values held by a device loop are not current on its device (internal error)".into(),
            }),
        }
    }

    /// The device address of current values on `device`, allocating and
    /// uploading as needed. `host` is the host copy.
    pub fn on_device(&self, device: &Arc<dyn Device>, host: &mut [u8]) -> Result<u64> {
        self.receive(host);
        let mut slot = crate::sync::lock(&self.mirror);
        if let Some(m) = slot.as_mut() {
            if same_device(&m.device, device) {
                if m.state == State::HostNewer {
                    device.upload(&m.buf, host)?;
                    m.state = State::InSync;
                }
                return Ok(m.buf.addr);
            }
            // Another device holds the newest values: bring them home first
            // (its copy is freed below), unless its work is under way.
            busy_elsewhere(m)?;
            if m.state == State::DeviceNewer {
                m.device.download(&m.buf, host)?;
            }
        }
        let buf = device.alloc(host.len())?;
        device.upload(&buf, host)?;
        let addr = buf.addr;
        *slot = Some(Mirror { device: device.clone(), buf, state: State::InSync });
        Ok(addr)
    }
}
