//! Loop plans cached by metadata: set, sections, maps and argument
//! descriptors, never by data. Entries hold only plan arrays and numbers, so
//! the cache never keeps a set, map or dat alive; ids are never reused, so a
//! dropped map's entries are merely unreachable until evicted.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::arg::{Arg, ArgKind};
use crate::decl::{Sections, Set};
use crate::kernel::Kernel;
use crate::types::Access;
use parloop_kernels::loops::Strategy;
use parloop_planner::Plan;

use crate::backend::device_loop::DeviceLoop;

/// One argument, as the cache sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ArgKey {
    /// 0 direct, 1 indirect, 2 vector, 3 global.
    kind: u8,
    map: u64,
    column: usize,
    access: Access,
    /// Index of the first argument on the same data: the pattern of sharing
    /// matters (colouring is per dat), the data's identity does not.
    slot: usize,
    bytes: usize,
}

/// Everything a loop's plan depends on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LoopKey {
    /// The kernel's identity: prepared device loops hold its compiled code,
    /// so two kernels of the same shape must never share an entry.
    kernel: KernelIdentity,
    set: u64,
    sections: Sections,
    executed: usize,
    part_size: Option<usize>,
    needs_plan: bool,
    /// Device strategy (`None` on host backends).
    strategy: Option<Strategy>,
    args: Vec<ArgKey>,
}

impl LoopKey {
    pub fn new(
        kernel: &Kernel,
        set: &Set,
        executed: usize,
        part_size: Option<usize>,
        needs_plan: bool,
        strategy: Option<Strategy>,
        args: &[Arg],
    ) -> LoopKey {
        let args = args
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let (kind, map, column) = match &a.kind {
                    ArgKind::Direct => (0, 0, 0),
                    ArgKind::Indirect { map, column } => (1, map.id(), *column),
                    ArgKind::Vector { map } => (2, map.id(), 0),
                    ArgKind::Global => (3, 0, 0),
                    ArgKind::Mat(m) => (4, m.row_map.id(), m.col_map.id() as usize),
                    ArgKind::Index => (5, 0, 0),
                };
                let slot = args[..i].iter().position(|b| b.data_id() == a.data_id()).unwrap_or(i);
                ArgKey { kind, map, column, access: a.access, slot, bytes: a.bytes_per_entity() }
            })
            .collect();
        LoopKey {
            kernel: KernelIdentity::of(kernel),
            set: set.id(),
            sections: set.sections(),
            executed,
            part_size,
            needs_plan,
            strategy,
            args,
        }
    }
}

/// A kernel as the cache tells kernels apart: its name and a hash of its
/// translated source (the device function and every helper it calls). A
/// content hash rather than the kernel's address: equal code may share,
/// different code never does, whatever the names.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct KernelIdentity {
    name: &'static str,
    code: u64,
}

impl KernelIdentity {
    fn of(kernel: &Kernel) -> KernelIdentity {
        let code = match kernel.device_fn() {
            // Hashed at compile time (`DeviceFn::hash`); the translated
            // signature is part of the source.
            Some(f) => f.hash(),
            // Host-only kernels: plans hold nothing of the code; the host
            // function's address tells two of them apart all the same.
            None => kernel.host(false) as usize as u64,
        };
        KernelIdentity { name: kernel.name(), code }
    }
}

/// What the runtime keeps per loop shape.
#[derive(Debug)]
pub(crate) struct LoopPlan {
    /// The plan, for backends and loops that need one.
    pub plan: Option<Plan>,
    /// Minimum bytes one execution moves.
    pub bytes: u64,
    /// The loop prepared for the runtime's device, once per candidate
    /// strategy (one unless the strategy is automatic).
    pub device: Vec<DeviceLoop>,
    /// Automatic strategy: time of each candidate's trial, and the choice.
    pub auto: std::sync::Mutex<crate::strategy::AutoChoice>,
}

impl std::fmt::Debug for DeviceLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceLoop({})", self.strategy().name())
    }
}

/// A bounded cache, evicting the oldest entry first.
pub(crate) struct PlanCache {
    entries: HashMap<LoopKey, Arc<LoopPlan>>,
    order: VecDeque<LoopKey>,
    capacity: usize,
}

impl PlanCache {
    pub fn new(capacity: usize) -> PlanCache {
        PlanCache { entries: HashMap::new(), order: VecDeque::new(), capacity: capacity.max(1) }
    }

    pub fn get(&self, key: &LoopKey) -> Option<Arc<LoopPlan>> {
        self.entries.get(key).cloned()
    }

    pub fn insert(&mut self, key: LoopKey, plan: Arc<LoopPlan>) {
        if self.entries.len() >= self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.entries.remove(&old);
            }
        }
        self.order.push_back(key.clone());
        self.entries.insert(key, plan);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Access, Backend, Runtime};

    #[parloop::kernel]
    fn inc2(a: &mut f64, b: &mut f64) {
        *a += 1.0;
        *b += 1.0;
    }

    #[test]
    fn the_cache_is_bounded_and_evicts_the_oldest() {
        let mut cache = PlanCache::new(2);
        let rt = Runtime::with_backend(Backend::Seq).unwrap();
        let keys: Vec<LoopKey> =
            (0..3).map(|n| LoopKey::new(inc2::KERNEL, &rt.set("s", n).unwrap(), n, None, false, None, &[])).collect();
        for k in &keys {
            cache.insert(
                k.clone(),
                Arc::new(LoopPlan { plan: None, bytes: 0, device: Vec::new(), auto: Default::default() }),
            );
        }
        assert_eq!(cache.len(), 2);
        assert!(cache.get(&keys[0]).is_none());
        assert!(cache.get(&keys[2]).is_some());
    }

    #[test]
    fn cached_plans_keep_no_user_data_alive_and_are_reused() {
        let rt = Runtime::with_backend(Backend::Threads).unwrap();
        let edges = rt.set("edges", 1000).unwrap();
        let nodes = rt.set("nodes", 101).unwrap();
        let values: Vec<i32> = (0..2000).map(|k| (k / 2 + k % 2) % 101).collect();
        let m = rt.map("m", &edges, &nodes, 2, values).unwrap();
        let r = rt.dat("r", &nodes, 1, vec![0.0f64; 101]).unwrap();
        let weak_map = std::sync::Arc::downgrade(&m.0);
        let weak_dat = std::sync::Arc::downgrade(&r.0);
        for _ in 0..3 {
            rt.par_loop(inc2::KERNEL, &edges, &[r.arg_via(&m, 0, Access::INC), r.arg_via(&m, 1, Access::INC)]).unwrap();
        }
        assert_eq!(rt.cached_plans(), 1, "one loop shape, one plan");
        let report = rt.report();
        assert_eq!(report[0].calls, 3);
        assert!(report[0].plan_seconds > 0.0);
        drop((m, r));
        assert!(weak_map.upgrade().is_none(), "the cache keeps the map alive");
        assert!(weak_dat.upgrade().is_none(), "the cache keeps the dat alive");
        assert_eq!(rt.cached_plans(), 1);
    }
}
