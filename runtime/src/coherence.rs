//! Host/device coherence of a dat's or global's values: a device mirror
//! and which side is newer. Loops on a device upload only stale values and
//! mark what they write as newer on the device; host reads download only
//! then, and host writes mark the device copy stale.

use std::sync::{Arc, Mutex};

use crate::device::{Device, DeviceBuffer};
use crate::error::Result;

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

/// Where a dat or global keeps its mirror.
#[derive(Default)]
pub(crate) struct MirrorSlot(Mutex<Option<Mirror>>);

fn same_device(a: &Arc<dyn Device>, b: &Arc<dyn Device>) -> bool {
    std::ptr::eq(Arc::as_ptr(a) as *const (), Arc::as_ptr(b) as *const ())
}

impl MirrorSlot {
    /// Makes `host` current: downloads when the device copy is newer. A
    /// failed copy (a lost GPU) is returned and leaves the state as it was.
    pub fn refresh_host(&self, host: &mut [u8]) -> Result<()> {
        let mut slot = crate::sync::lock(&self.0);
        if let Some(m) = slot.as_mut() {
            if m.state == State::DeviceNewer {
                m.device.download(&m.buf, host)?;
                m.state = State::InSync;
            }
        }
        Ok(())
    }

    /// Whether a device loop wrote the values since the host last saw them.
    pub fn device_newer(&self) -> bool {
        crate::sync::lock(&self.0).as_ref().is_some_and(|m| m.state == State::DeviceNewer)
    }

    /// Drops the device copy (the host values changed shape).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub fn forget(&self) {
        *crate::sync::lock(&self.0) = None;
    }

    /// Takes the device copy out (a temporary's buffer going back to
    /// the pool, `decl::temporary`).
    pub fn take(&self) -> Option<Mirror> {
        crate::sync::lock(&self.0).take()
    }

    /// Puts a device copy from the pool back; its contents are not the
    /// values (a temporary is written before it is read), so neither
    /// side counts as newer.
    pub fn put(&self, mut mirror: Mirror) {
        mirror.state = State::InSync;
        *crate::sync::lock(&self.0) = Some(mirror);
    }

    /// Records a host write.
    pub fn host_written(&self) {
        if let Some(m) = crate::sync::lock(&self.0).as_mut() {
            m.state = State::HostNewer;
        }
    }

    /// Records a device write.
    pub fn device_written(&self) {
        if let Some(m) = crate::sync::lock(&self.0).as_mut() {
            m.state = State::DeviceNewer;
        }
    }

    /// The device address of current values on `device`, allocating and
    /// uploading as needed. `host` is the host copy.
    pub fn on_device(&self, device: &Arc<dyn Device>, host: &mut [u8]) -> Result<u64> {
        let mut slot = crate::sync::lock(&self.0);
        if let Some(m) = slot.as_mut() {
            if same_device(&m.device, device) {
                if m.state == State::HostNewer {
                    device.upload(&m.buf, host)?;
                    m.state = State::InSync;
                }
                return Ok(m.buf.addr);
            }
            // Another device holds the newest values: bring them home first.
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
