//! Maps: a fixed number of targets in one set per entity of another,
//! checked on declaration, uploaded to a device once.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use super::{checked_len, next_id, Set};
use crate::device::{Device, DeviceBuffer};
use crate::error::{Error, Result};

pub(crate) struct MapInner {
    id: u64,
    name: String,
    from: Set,
    to: Set,
    arity: usize,
    values: Vec<i32>,
    /// This rank's rows, in local numbering, once distributed.
    pub(crate) local: OnceLock<Vec<i32>>,
    /// The values on a device (maps never change, so one upload suffices).
    device: Mutex<Option<(Arc<dyn Device>, DeviceBuffer)>>,
}

/// A fixed-arity map from the entities of one set to those of another
/// (edge -> 2 nodes, cell -> 4 nodes). Values are checked on creation.
///
/// ```
/// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
/// let nodes = rt.set("nodes", 4)?;
/// let cells = rt.set("cells", 2)?;
/// let cell_nodes = rt.map("cell_nodes", &cells, &nodes, 3, vec![0, 1, 2, 2, 1, 3])?;
/// assert_eq!((cell_nodes.from().name(), cell_nodes.to().name(), cell_nodes.arity()), ("cells", "nodes", 3));
/// assert_eq!(&cell_nodes.values()[3..], &[2, 1, 3]);
/// # Ok::<(), parloop::Error>(())
/// ```
#[derive(Clone)]
pub struct Map(pub(crate) Arc<MapInner>);

impl Map {
    pub(crate) fn new(name: &str, from: &Set, to: &Set, arity: usize, values: Vec<i32>) -> Result<Map> {
        if arity == 0 {
            return Err(Error::InvalidDeclaration {
                what: "map",
                name: name.into(),
                reason: "arity must be at least 1".into(),
            });
        }
        let expected = checked_len("map", name, from.total(), arity, "arity", std::mem::size_of::<i32>())?;
        if values.len() != expected {
            return Err(Error::WrongLength {
                what: "map",
                name: name.into(),
                expected,
                got: values.len(),
                detail: format!("{} entities of `{}` x arity {arity}", from.total(), from.name()),
            });
        }
        let to_size = to.total();
        if let Some(k) = values.iter().position(|&v| v < 0 || v as usize >= to_size) {
            return Err(Error::MapValueOutOfRange {
                map: name.into(),
                from: from.name().into(),
                to: to.name().into(),
                entity: k / arity,
                column: k % arity,
                value: values[k].into(),
                to_size,
            });
        }
        Ok(Map(Arc::new(MapInner {
            id: next_id(),
            name: name.into(),
            from: from.clone(),
            to: to.clone(),
            arity,
            values: crate::pages::on_huge_pages(values),
            local: OnceLock::new(),
            device: Mutex::new(None),
        })))
    }

    /// The map's name.
    pub fn name(&self) -> &str {
        &self.0.name
    }
    /// Process-unique identity.
    pub fn id(&self) -> u64 {
        self.0.id
    }
    /// Source set.
    pub fn from(&self) -> &Set {
        &self.0.from
    }
    /// Target set.
    pub fn to(&self) -> &Set {
        &self.0.to
    }
    /// Targets per source entity.
    pub fn arity(&self) -> usize {
        self.0.arity
    }
    /// The values, `arity` per source entity (this rank's rows in local
    /// numbering, once distributed).
    pub fn values(&self) -> &[i32] {
        self.0.local.get().unwrap_or(&self.0.values)
    }

    /// Replaces the values by this rank's rows in local numbering (once,
    /// when the map is distributed); a device copy of the old ones goes.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn localise(&self, values: Vec<i32>) {
        let _ = self.0.local.set(crate::pages::on_huge_pages(values));
        *crate::sync::lock(&self.0.device) = None;
    }

    /// The values as declared, before any distribution.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn global_values(&self) -> &[i32] {
        &self.0.values
    }

    /// The values' address on `device`, uploading them on first use.
    pub(crate) fn on_device(&self, device: &Arc<dyn Device>) -> Result<u64> {
        let mut slot = crate::sync::lock(&self.0.device);
        if let Some((d, buf)) = slot.as_ref() {
            if std::ptr::eq(Arc::as_ptr(d) as *const (), Arc::as_ptr(device) as *const ()) {
                return Ok(buf.addr);
            }
        }
        let bytes: &[u8] = bytemuck::cast_slice(self.values());
        let buf = device.alloc(bytes.len())?;
        device.upload(&buf, bytes)?;
        let addr = buf.addr;
        *slot = Some((device.clone(), buf));
        Ok(addr)
    }
}

impl fmt::Debug for Map {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Map({} #{}: {} -> {}, arity {})",
            self.0.name,
            self.0.id,
            self.0.from.name(),
            self.0.to.name(),
            self.0.arity
        )
    }
}
