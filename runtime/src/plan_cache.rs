//! Loop plans cached by metadata: set, sections, maps and argument
//! descriptors, never by data. Entries hold only plan arrays and numbers, so
//! the cache never keeps a set, map or dat alive; ids are never reused, so a
//! dropped map's entries are merely unreachable until evicted.
//!
//! The host's colourings (the `threads` backend's blocks and colours) are
//! cached a second time, by what they depend on alone
//! ([`parloop_planner::colouring_key`]: sections, block size, the written
//! map columns), so that loops of different shapes over one set and map
//! share one: an element-matrix loop and a load-vector loop over the same
//! 11.7 million tetrahedra colour them once, not twice.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::arg::{Arg, ArgKind};
use crate::decl::{Sections, Set};
use crate::kernel::Kernel;
use crate::types::Access;
use parloop_kernels::loops::Strategy;
use parloop_planner::{build_plan, colouring_key, ColouringKey, Plan, PlanError, PlanRequest};

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
    /// Inline for small loops: a key is built per lookup (every eager
    /// loop and every recorded one), an allocation each otherwise.
    args: smallvec::SmallVec<[ArgKey; 4]>,
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
    /// The plan, for backends and loops that need one (shared with other
    /// loop shapes of the same colouring key).
    pub plan: Option<Arc<Plan>>,
    /// Minimum bytes one execution moves.
    pub bytes: u64,
    /// The loop prepared for the runtime's device, once per candidate
    /// strategy (one unless the strategy is automatic; see
    /// [`DeviceCandidate`]).
    pub device: Vec<DeviceCandidate>,
    /// Automatic strategy: time of each candidate's trial, and the choice.
    pub auto: std::sync::Mutex<crate::strategy::AutoChoice>,
}

/// One candidate strategy of a device loop, prepared (plan, generated
/// code, module) when it first runs: the first candidate with the plan,
/// so that a loop no strategy can run fails there, the others at their
/// trials. A loop that runs once (an assembly, a setup pass over 12
/// million cells) builds one plan, not four.
#[derive(Debug)]
pub(crate) struct DeviceCandidate {
    pub strategy: crate::strategy::Strategy,
    prepared: std::sync::OnceLock<DeviceLoop>,
}

impl DeviceCandidate {
    /// A candidate not prepared yet.
    pub fn new(strategy: crate::strategy::Strategy) -> DeviceCandidate {
        DeviceCandidate { strategy, prepared: std::sync::OnceLock::new() }
    }

    /// A candidate prepared already.
    pub fn prepared(loop_: DeviceLoop) -> DeviceCandidate {
        DeviceCandidate { strategy: loop_.strategy(), prepared: std::sync::OnceLock::from(loop_) }
    }

    /// The prepared loop, preparing it with `prepare` on first use; the
    /// time preparing took (zero when it was ready).
    pub fn get_or_prepare(
        &self,
        prepare: impl FnOnce(crate::strategy::Strategy) -> crate::error::Result<DeviceLoop>,
    ) -> crate::error::Result<(&DeviceLoop, std::time::Duration)> {
        if let Some(d) = self.prepared.get() {
            return Ok((d, std::time::Duration::ZERO));
        }
        let start = std::time::Instant::now();
        let d = prepare(self.strategy)?;
        // Two threads may prepare at once: either result serves.
        let _ = self.prepared.set(d);
        Ok((self.prepared.get().expect("set above"), start.elapsed()))
    }
}

impl std::fmt::Debug for DeviceLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceLoop({})", self.strategy().name())
    }
}

/// A map bounded to `capacity` entries, evicting the oldest first.
struct Bounded<K, V> {
    entries: crate::word_hash::WordHashMap<K, V>,
    order: VecDeque<K>,
    capacity: usize,
}

impl<K: Clone + Eq + std::hash::Hash, V: Clone> Bounded<K, V> {
    fn new(capacity: usize) -> Self {
        Bounded { entries: HashMap::default(), order: VecDeque::new(), capacity: capacity.max(1) }
    }

    fn get(&self, key: &K) -> Option<V> {
        self.entries.get(key).cloned()
    }

    fn insert(&mut self, key: K, value: V) {
        if let Some(old) = self.entries.get_mut(&key) {
            *old = value;
            return;
        }
        if self.entries.len() >= self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.entries.remove(&old);
            }
        }
        self.order.push_back(key.clone());
        self.entries.insert(key, value);
    }
}

/// A bounded cache of loop plans and of host colourings, evicting the
/// oldest entry first.
pub(crate) struct PlanCache {
    loops: Bounded<LoopKey, Arc<LoopPlan>>,
    colourings: Bounded<ColouringKey, Arc<Plan>>,
}

impl PlanCache {
    pub fn new(capacity: usize) -> PlanCache {
        PlanCache { loops: Bounded::new(capacity), colourings: Bounded::new(capacity) }
    }

    pub fn get(&self, key: &LoopKey) -> Option<Arc<LoopPlan>> {
        self.loops.get(key)
    }

    pub fn insert(&mut self, key: LoopKey, plan: Arc<LoopPlan>) {
        self.loops.insert(key, plan);
    }

    /// Loop shapes cached.
    pub fn len(&self) -> usize {
        self.loops.entries.len()
    }

    /// Host colourings cached (each shared by every loop shape of its key).
    pub fn colourings(&self) -> usize {
        self.colourings.entries.len()
    }
}

/// The host plan of `request` (blocks and colours, no staging): the cached
/// colouring of its [`colouring_key`] when another loop shape built one,
/// else a new one, cached. The cache is not locked while planning (tens of
/// milliseconds to a second on millions of elements).
pub(crate) fn host_plan(cache: &Mutex<PlanCache>, request: &PlanRequest) -> Result<Arc<Plan>, PlanError> {
    let key = colouring_key(request);
    if let Some(key) = &key {
        if let Some(plan) = crate::sync::lock(cache).colourings.get(key) {
            return Ok(plan);
        }
    }
    let plan = Arc::new(build_plan(request)?);
    if let Some(key) = key {
        crate::sync::lock(cache).colourings.insert(key, plan.clone());
    }
    Ok(plan)
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

    /// An element matrix: `a_ij = x_i * x_j + w`, `w` distinct per element
    /// so that a misplaced or lost add shows.
    #[parloop::kernel]
    fn element_matrix(x: &[[f64; 1]; 3], w: &f64, a: &mut [[f64; 3]; 3]) {
        for i in 0..3 {
            for j in 0..3 {
                a[i][j] += x[i][0] * x[j][0] + *w;
            }
        }
    }

    /// A load vector through the same map (a vector INC, not a matrix).
    #[parloop::kernel]
    fn element_load(x: &[[f64; 1]; 3], w: &f64, b: &mut [[f64; 1]; 3]) {
        for i in 0..3 {
            b[i][0] += x[i][0] * *w;
        }
    }

    /// Triangles of an n x n grid (two per square): neighbouring triangles
    /// share vertices, so blocks conflict and need several colours.
    fn triangles(n: usize) -> Vec<i32> {
        let v = |i: usize, j: usize| (j * (n + 1) + i) as i32;
        let mut t = Vec::new();
        for j in 0..n {
            for i in 0..n {
                t.extend([v(i, j), v(i + 1, j), v(i + 1, j + 1), v(i, j), v(i + 1, j + 1), v(i, j + 1)]);
            }
        }
        t
    }

    /// (matrix values, load vector, plans, colourings) of the two loops.
    fn assemble_both(backend: Backend) -> (Vec<f64>, Vec<f64>, usize, usize) {
        let n = 24;
        let mut rt = Runtime::with_backend(backend).unwrap();
        rt.set_part_size(Some(32)).unwrap();
        let nodes = rt.set("nodes", (n + 1) * (n + 1)).unwrap();
        let cells = rt.set("cells", 2 * n * n).unwrap();
        let c2n = rt.map("c2n", &cells, &nodes, 3, triangles(n)).unwrap();
        let x = rt.dat("x", &nodes, 1, (0..(n + 1) * (n + 1)).map(|k| (k % 7) as f64 * 0.25 + 1.0).collect()).unwrap();
        let w = rt.dat("w", &cells, 1, (0..2 * n * n).map(|e| 1.0 + e as f64 / 64.0).collect()).unwrap();
        let b = rt.dat("b", &nodes, 1, vec![0.0f64; (n + 1) * (n + 1)]).unwrap();
        let s = rt.sparsity("s", &[(&c2n, &c2n)], (1, 1)).unwrap();
        let a = rt.mat::<f64>("A", &s).unwrap();
        for _ in 0..2 {
            rt.par_loop(
                element_matrix::KERNEL,
                &cells,
                &[x.arg_vec(&c2n, Access::READ), w.arg(Access::READ), a.arg(&c2n, &c2n, Access::INC)],
            )
            .unwrap();
            rt.par_loop(
                element_load::KERNEL,
                &cells,
                &[x.arg_vec(&c2n, Access::READ), w.arg(Access::READ), b.arg_vec(&c2n, Access::INC)],
            )
            .unwrap();
        }
        (a.values().unwrap(), b.values().unwrap(), rt.cached_plans(), rt.cached_colourings())
    }

    #[test]
    fn loops_of_different_shapes_over_one_map_share_one_colouring_and_match_seq() {
        let (a_seq, b_seq, _, seq_colourings) = assemble_both(Backend::Seq);
        assert_eq!(seq_colourings, 0, "seq plans nothing");
        let (a, b, plans, colourings) = assemble_both(Backend::Threads);
        assert_eq!(plans, 2, "two loop shapes");
        assert_eq!(
            colourings, 1,
            "one colouring for both: the matrix's rows and the vector's entries are the same map columns"
        );
        // Sums of the same terms in another order: equal to rounding.
        for (name, got, want) in [("matrix", &a, &a_seq), ("load", &b, &b_seq)] {
            assert_eq!(got.len(), want.len());
            for (k, (g, w)) in got.iter().zip(want.iter()).enumerate() {
                assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{name}[{k}]: threads {g}, seq {w}");
            }
        }
        assert!(b_seq.iter().all(|&v| v > 0.0) && a_seq.iter().any(|&v| v > 0.0), "the loops ran");
    }

    #[test]
    fn a_different_map_or_block_size_gets_its_own_colouring() {
        let mut rt = Runtime::with_backend(Backend::Threads).unwrap();
        let n = 8;
        let nodes = rt.set("nodes", (n + 1) * (n + 1)).unwrap();
        let cells = rt.set("cells", 2 * n * n).unwrap();
        let m1 = rt.map("m1", &cells, &nodes, 3, triangles(n)).unwrap();
        let m2 = rt.map("m2", &cells, &nodes, 3, triangles(n)).unwrap();
        let x = rt.dat("x", &nodes, 1, vec![1.0f64; (n + 1) * (n + 1)]).unwrap();
        let w = rt.dat("w", &cells, 1, vec![1.0f64; 2 * n * n]).unwrap();
        let b = rt.dat("b", &nodes, 1, vec![0.0f64; (n + 1) * (n + 1)]).unwrap();
        let load = |rt: &Runtime, m: &crate::Map| {
            rt.par_loop(
                element_load::KERNEL,
                &cells,
                &[x.arg_vec(m, Access::READ), w.arg(Access::READ), b.arg_vec(m, Access::INC)],
            )
            .unwrap()
        };
        load(&rt, &m1);
        load(&rt, &m2);
        assert_eq!(rt.cached_colourings(), 2, "equal values, but another map");
        rt.set_part_size(Some(16)).unwrap();
        load(&rt, &m1);
        assert_eq!(rt.cached_colourings(), 3, "another block size");
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
        // Also lazy, with replay: the trace once kept records of loops
        // that ran, with their maps, after their data was dropped.
        for lazy in [false, true] {
            no_user_data_kept_alive(Runtime::with_lazy(Backend::Threads, lazy).unwrap());
        }
    }

    fn no_user_data_kept_alive(rt: Runtime) {
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
