//! The device loop runner: one implementation of planning, code generation,
//! staging and launching, generic over [`Device`].
//!
//! A loop shape is prepared once ([`prepare`], cached with the plan): the
//! strategy is chosen, the plan built and uploaded, the loop's CUDA source
//! generated (`parloop_kernels::loops`) after the kernel's translation, and
//! compiled. [`run`] then fills the launch parameters with the current
//! device addresses of the arguments and launches section by section (and,
//! for coloured strategies, colour by colour), then finishes reductions on
//! the device. Nothing is copied back: host reads download when they need to.

use std::borrow::Borrow;

use std::sync::Arc;

use parloop_kernels::loops::{self, ArgSpec, Call, Generated, LoopSpec, PairSpec, Reach, StageSpec, Strategy};
use parloop_planner::{build_plan, Columns, IndirectArg, Plan, PlanRequest};

use crate::arg::{Arg, ArgKind};
use crate::device::{Device, DeviceBuffer, LaunchParams, Module};
use crate::error::{Error, Result};
use crate::kernel::{DeviceFn, Kernel};
use crate::profile::Range;

/// The section number of the exec halo.
const EXEC_SECTION: usize = 2;

/// Most blocks of a grid-stride launch (the loop covers the rest).
const MAX_FLAT_GRID: usize = 4096;

/// One launch of the loop entry.
#[derive(Clone, Debug)]
struct Launch {
    grid: u32,
    val: [i64; loops::MAX_VALS],
    /// The section of the iteration set (0 core, 1 owned, 2 exec; staged
    /// launches of non-core colours report 1 for their owned blocks).
    section: usize,
}

/// A loop shape prepared for a device.
pub(crate) struct DeviceLoop {
    strategy: Strategy,
    generated: Generated,
    module: Arc<dyn Module>,
    /// Uploaded plan arrays: (pointer slot, buffer).
    arrays: Vec<(usize, DeviceBuffer)>,
    /// Partial results of reductions: (pointer slot, buffer).
    partials: Vec<(usize, DeviceBuffer)>,
    launches: Vec<Launch>,
    /// Blocks whose partial results the finishing entry combines.
    counted: i64,
    block: u32,
    shared: usize,
    /// Shared memory of the finishing entry (one block folds the partials).
    finish_shared: usize,
    /// Map of each `LoopSpec` map slot, as an index into the arguments.
    map_args: Vec<usize>,
    /// Whether the kernel can report a panic: the panic record is read
    /// after each run (on a GPU, that waits for the loop).
    panics: bool,
    /// The translations the loop calls (a fused loop's several): their
    /// panic sites' messages.
    fns: Vec<&'static DeviceFn>,
}

impl DeviceLoop {
    /// The strategy the loop runs with.
    pub(crate) fn strategy(&self) -> Strategy {
        self.strategy
    }
}

/// `what` names the array in an [`Error::OutOfMemory`] when the host copy
/// cannot be allocated.
fn upload_i32(
    device: &dyn Device,
    values: impl ExactSizeIterator<Item = i64>,
    what: impl FnOnce() -> String,
) -> Result<DeviceBuffer> {
    let mut v: Vec<i32> = crate::fallible::reserved(values.len(), what)?;
    v.extend(values.map(|x| x as i32));
    let bytes: &[u8] = bytemuck::cast_slice(&v);
    let buf = device.alloc(bytes.len().max(4))?;
    device.upload(&buf, bytes)?;
    Ok(buf)
}

/// A loop's plan and generated code, before any device is involved.
pub(crate) struct Built {
    spec: LoopSpec,
    generated: Generated,
    plan: Option<Plan>,
    /// The CUDA module: the kernel's translation, then the loop entries.
    pub source: String,
    /// Argument index of each map slot.
    map_args: Vec<usize>,
    /// The translations the loop calls.
    fns: Vec<&'static DeviceFn>,
}

/// What code is generated for: a device's shared memory per block and
/// threads per block, and whether dynamic indices are bounds-checked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    pub shared: usize,
    pub block: usize,
    pub check: bool,
}

impl Target {
    /// An H100/H200-class GPU's defaults (48 KiB of shared memory per
    /// block, 256 threads), without bounds checks: what NVRTC compiles for
    /// a GPU without `PARLOOP_CHECK`, for source shown without a device.
    pub const GPU: Target = Target { shared: 48 * 1024, block: 256, check: false };

    pub fn of(device: &dyn Device) -> Target {
        Target {
            shared: device.shared_memory_per_block(),
            block: device.block_size() as usize,
            check: device.checked(),
        }
    }
}

/// Plans `kernel` over `sections` and generates its loop code for a device
/// with `target.shared` bytes of shared memory per block, with bounds checks on
/// every dynamic index when `target.check`
/// (`PARLOOP_CHECK=1`): the source then starts with `#define
/// PARLOOP_CHECK 1`, so the checked module is a different module (and
/// cache entry) than the unchecked one.
pub(crate) fn build<A: Borrow<Arg>>(
    kernel: &'static Kernel,
    args: &[A],
    sections: &[usize],
    strategy: Strategy,
    part_size: Option<usize>,
    target: Target,
) -> Result<Built> {
    let Target { shared, block, check } = target;
    let device_fn = kernel.device_fn().ok_or_else(|| Error::Backend {
        name: "device".into(),
        reason: format!("kernel `{}` has no CUDA translation (declare it with #[parloop::kernel])", kernel.name()),
    })?;
    let params = kernel.params();

    // Maps, in order of first use.
    let mut map_ids: Vec<u64> = Vec::new();
    let mut map_args: Vec<usize> = Vec::new();
    let mut maps: Vec<usize> = Vec::new();
    let args: Vec<&Arg> = args.iter().map(Borrow::borrow).collect();
    for (i, a) in args.iter().enumerate() {
        if let Some(m) = a.map() {
            if !map_ids.contains(&m.id()) {
                map_ids.push(m.id());
                map_args.push(i);
                maps.push(m.arity());
            }
        }
    }
    let map_slot = |a: &Arg| map_ids.iter().position(|&id| Some(id) == a.map().map(|m| m.id())).expect("collected");

    // The plan, for the strategies that use one.
    let indirect: Vec<(usize, IndirectArg)> = args
        .iter()
        .enumerate()
        .filter_map(|(i, a)| {
            let map = a.map()?;
            let columns = match &a.kind {
                ArgKind::Indirect { column, .. } => Columns::One(*column),
                _ => Columns::All,
            };
            Some((
                i,
                IndirectArg {
                    map: map.values(),
                    arity: map.arity(),
                    to_size: map.to().total(),
                    columns,
                    map_id: map.id(),
                    dat_id: a.data_id(),
                    bytes_per_entity: a.bytes_per_entity(),
                    conflicts: a.access.writes(),
                },
            ))
        })
        .collect();
    let indirect_args: Vec<IndirectArg> = indirect.iter().map(|(_, a)| *a).collect();
    let plan_error = |source| Error::Plan { kernel: kernel.name().into(), source };
    let cname = device_fn.cname();
    let mut spec = LoopSpec {
        // A C identifier whatever the kernel's name (see `fn_cname`).
        name: cname.strip_prefix("pl_fn_").unwrap_or(cname).into(),
        kernel: cname.into(),
        args: Vec::new(),
        maps,
        pairs: Vec::new(),
        stages: Vec::new(),
        strategy,
        // The record is read after the loop (on a GPU a wait): only where
        // the code can write it (a bounds check needs a dynamic index).
        panics: device_fn.may_panic() || (check && device_fn.indexes_dynamically()),
        fused: Vec::new(),
    };
    let mut plan: Option<Plan> = None;
    if strategy.staged() {
        let budget = shared.saturating_sub(8 * indirect.len());
        // By default no larger than a thread block (`staged_part_size`).
        let part_size = part_size.unwrap_or_else(|| parloop_planner::staged_part_size(&indirect_args, budget, block));
        let request = PlanRequest {
            sections,
            args: &indirect_args,
            shared_memory_bytes: budget,
            part_size: Some(part_size),
            staging: true,
            thread_colours: true,
        };
        let p = build_plan(&request).map_err(plan_error)?;
        spec.stages = p
            .stages
            .iter()
            .map(|s| StageSpec {
                map: map_ids.iter().position(|&id| id == s.map_id).expect("stage map is an argument's"),
                columns: s.columns.clone(),
            })
            .collect();
        spec.pairs = p
            .pairs
            .iter()
            .enumerate()
            .map(|(k, pair)| PairSpec {
                arg: indirect[p.arg_pair.iter().position(|&q| q == k).expect("every pair has an argument")].0,
                stage: pair.stage,
                dat: p.pairs.iter().position(|q| q.dat_id == pair.dat_id).expect("the pair itself matches"),
            })
            .collect();
        plan = Some(p);
    } else if strategy == Strategy::GlobalColour {
        // One block per section: thread colours are element colours.
        let whole = sections.iter().copied().max().unwrap_or(1).max(1);
        let request = PlanRequest {
            sections,
            args: &indirect_args,
            shared_memory_bytes: usize::MAX,
            part_size: Some(whole),
            staging: false,
            thread_colours: true,
        };
        plan = Some(build_plan(&request).map_err(plan_error)?);
    }
    for (i, a) in args.iter().enumerate() {
        let sig = &params[i];
        let reach = match &a.kind {
            ArgKind::Direct => Reach::Direct,
            ArgKind::Indirect { column, .. } => Reach::Indirect { map: map_slot(a), column: *column },
            ArgKind::Vector { .. } => Reach::Vector { map: map_slot(a) },
            ArgKind::Global => Reach::Global,
            ArgKind::Mat(_) => {
                return Err(Error::Backend {
                    name: "device".into(),
                    reason: format!(
                        "loop `{}`: a matrix argument reached a device loop (internal error: \
                         `Runtime::execute` assembles matrices through `matrix::device`)",
                        kernel.name()
                    ),
                })
            }
            // The element number in the loop; a distributed set's global
            // numbers are not on the device yet.
            ArgKind::Index if a.set.as_ref().is_some_and(|s| s.0.local.get().is_some()) => {
                return Err(Error::Backend {
                    name: "device".into(),
                    reason: format!(
                        "loop `{}`: the element-index argument of a distributed set runs on seq and threads for now",
                        kernel.name()
                    ),
                })
            }
            ArgKind::Index => Reach::Index,
        };
        let pair = match (&plan, strategy.staged()) {
            (Some(p), true) => indirect.iter().position(|(j, _)| *j == i).map(|k| p.arg_pair[k]),
            _ => None,
        };
        spec.args.push(ArgSpec {
            reach,
            mode: a.access.into(),
            elem: a.storage.elem().into(),
            dim: a.dim,
            rows: sig.rows,
            nested: sig.nested,
            cols: sig.cols,
            pair,
            same_as: None,
        });
    }
    let generated = loops::generate(&spec).map_err(|reason| Error::Backend { name: "device".into(), reason })?;
    let check_define = if check { "#define PARLOOP_CHECK 1\n" } else { "" };
    let source = format!("{check_define}{}\n{}", device_fn.module_source(), generated.source);
    Ok(Built { spec, generated, plan, source, map_args, fns: vec![device_fn] })
}

/// Prepares `kernel` over the `sections` of its iteration set on `device`.
pub(crate) fn prepare(
    device: &Arc<dyn Device>,
    kernel: &'static Kernel,
    args: &[Arg],
    sections: &[usize],
    strategy: Strategy,
    part_size: Option<usize>,
) -> Result<DeviceLoop> {
    let built = build(kernel, args, sections, strategy, part_size, Target::of(device.as_ref()))?;
    let kernel_frames = kernel.device_fn().map_or(0, |d| d.frame_bytes());
    load(device, kernel.name(), built, kernel_frames, args, sections)
}

/// Prepares direct loops over the same `sections` as one launch (the lazy
/// trace's fusion, `trace::fuse`): each element calls every kernel in
/// turn, on its run of `args` (`loops`: each kernel and the range of
/// `args` that is its arguments). An argument naming a datum an earlier one
/// names shares that one's staging (`ArgSpec::same_as`), so a later kernel
/// sees an earlier one's writes. `name` (the group's, `a+b`) appears in
/// messages and the profile.
pub(crate) fn prepare_fused<A: Borrow<Arg>>(
    device: &Arc<dyn Device>,
    name: &str,
    loops: &[(&'static Kernel, std::ops::Range<usize>)],
    args: &[A],
    sections: &[usize],
) -> Result<DeviceLoop> {
    let (built, kernel_frames) = build_fused(name, loops, args, sections, Target::of(device.as_ref()))?;
    load(device, name, built, kernel_frames, args, sections)
}

/// [`build`] for a fused launch (see [`prepare_fused`]); also returns the
/// bytes of the locals of the kernels it calls.
pub(crate) fn build_fused<A: Borrow<Arg>>(
    name: &str,
    loops: &[(&'static Kernel, std::ops::Range<usize>)],
    args: &[A],
    sections: &[usize],
    target: Target,
) -> Result<(Built, usize)> {
    let mut spec: Option<LoopSpec> = None;
    let mut fns: Vec<&'static DeviceFn> = Vec::with_capacity(loops.len());
    let mut kernel_frames = 0usize;
    for (kernel, range) in loops {
        let one = build(kernel, &args[range.clone()], sections, Strategy::Direct, None, target)?.spec;
        let device_fn = kernel.device_fn().expect("`build` checked the translation");
        fns.push(device_fn);
        // The calls run one after another: the largest frame, not the sum.
        kernel_frames = kernel_frames.max(device_fn.frame_bytes());
        let call = Call { kernel: one.kernel.clone(), args: range.clone(), panics: one.panics };
        match &mut spec {
            None => spec = Some(LoopSpec { fused: vec![call], ..one }),
            Some(spec) => {
                spec.name = format!("{}_and_{}", spec.name, one.name);
                spec.args.extend(one.args);
                spec.panics |= one.panics;
                spec.fused.push(call);
            }
        }
    }
    let mut spec = spec.ok_or_else(|| Error::Backend {
        name: "device".into(),
        reason: format!("fused launch `{name}` has no loops (internal error)"),
    })?;
    spec.kernel = format!("pl_fused_{}", spec.name);
    let args: Vec<&Arg> = args.iter().map(Borrow::borrow).collect();
    for a in 0..args.len() {
        let id = args[a].data_id();
        spec.args[a].same_as = (spec.args[a].reach == Reach::Direct)
            .then(|| (0..a).find(|&b| spec.args[b].reach == Reach::Direct && args[b].data_id() == id))
            .flatten();
    }
    let generated = loops::generate(&spec).map_err(|reason| Error::Backend { name: "device".into(), reason })?;
    let check_define = if target.check { "#define PARLOOP_CHECK 1\n" } else { "" };
    let source = format!("{check_define}{}\n{}", DeviceFn::modules_source(&fns), generated.source);
    Ok((Built { spec, generated, plan: None, source, map_args: Vec::new(), fns }, kernel_frames))
}

/// Compiles a built loop (`name` for messages), sizes its threads' stacks
/// and shared memory, uploads its plan and lays out its launches and
/// reduction partials. `kernel_frames`: the locals of the kernels it calls.
fn load<A: Borrow<Arg>>(
    device: &Arc<dyn Device>,
    name: &str,
    built: Built,
    kernel_frames: usize,
    args: &[A],
    sections: &[usize],
) -> Result<DeviceLoop> {
    // Device code numbers elements with signed 64-bit integers: a larger
    // loop would wrap to a negative end and run nothing.
    let elements = sections.iter().try_fold(0usize, |a, &n| a.checked_add(n));
    if elements.is_none_or(|n| i64::try_from(n).is_err()) {
        return Err(Error::Backend {
            name: device.name(),
            reason: format!(
                "loop `{name}` runs {} elements, more than the {} a device loop can number",
                elements.map_or_else(|| "more than usize::MAX".to_string(), |n| n.to_string()),
                i64::MAX
            ),
        });
    }
    let block = device.block_size();
    let Built { spec, generated, plan, source, map_args, fns } = built;
    let strategy = spec.strategy;
    // Per-thread stack: the entry's private copies and accumulators, the
    // kernel's and its helpers' locals, and room for the compiler's own.
    let frames = loops::entry_frame_bytes(&spec).saturating_add(kernel_frames);
    let stack = frames.saturating_mul(2).saturating_add(256 * 1024);
    if frames > device.max_stack_bytes() {
        return Err(Error::Backend {
            name: device.name(),
            reason: format!(
                "loop `{name}` needs about {frames} bytes of locals per thread (private copies of its arguments, \
                 reduction accumulators and the kernel's local arrays), more than the {} bytes a thread of this \
                 device may have; use smaller dims or local arrays, or the seq or threads backend",
                device.max_stack_bytes()
            ),
        });
    }
    let module = device.compile(&format!("{name}/{}", strategy.name()), &source)?;
    module.reserve_stack(stack.min(device.max_stack_bytes().saturating_add(256 * 1024)));
    let reduction_bytes = |spec: &LoopSpec| loops::flat_shared_bytes(spec, block as usize);
    let elements = elements.unwrap_or(0);
    let plan_array = |what: &str| format!("loop `{name}`'s {what} for the device ({elements} elements)");

    // Launches and plan arrays.
    let mut arrays = Vec::new();
    let mut launches = Vec::new();
    let mut shared = reduction_bytes(&spec);
    let flat = |start: usize, end: usize, section: usize, launches: &mut Vec<Launch>| {
        if end > start {
            let grid = (end - start).div_ceil(block as usize).clamp(1, MAX_FLAT_GRID);
            let mut val = [0i64; loops::MAX_VALS];
            val[loops::val::START] = start as i64;
            val[loops::val::END] = end as i64;
            launches.push(Launch { grid: grid as u32, val, section });
        }
    };
    match (strategy, &plan) {
        (Strategy::Staged | Strategy::StagedAtomic, Some(p)) => {
            let layout = &generated.layout;
            let [s, l, list, ncol, tcol] = layout.blocks.expect("staged layout");
            let d = device.as_ref();
            arrays.push((s, upload_i32(d, p.blocks.iter().map(|b| b.start as i64), || plan_array("block starts"))?));
            arrays.push((l, upload_i32(d, p.blocks.iter().map(|b| b.len as i64), || plan_array("block lengths"))?));
            // Within a colour, exec-halo blocks go last so that they launch
            // on their own and their partial results can be left out.
            let mut by_colour: Vec<u32> =
                crate::fallible::reserved(p.blocks_by_colour.len(), || plan_array("blocks by colour"))?;
            let mut exec_counts = Vec::with_capacity(p.colours as usize);
            for c in 0..p.colours {
                let blocks = p.colour_blocks(c);
                let (exec, other): (Vec<u32>, Vec<u32>) =
                    blocks.iter().partition(|&&b| p.blocks[b as usize].section >= EXEC_SECTION);
                exec_counts.push(exec.len());
                by_colour.extend(other.into_iter().chain(exec));
            }
            arrays.push((list, upload_i32(d, by_colour.iter().map(|&b| i64::from(b)), || plan_array("block list"))?));
            arrays.push((
                ncol,
                upload_i32(d, p.blocks.iter().map(|b| i64::from(b.thread_colours)), || {
                    plan_array("blocks' thread colour counts")
                })?,
            ));
            arrays.push((
                tcol,
                upload_i32(d, p.thread_colour.iter().map(|&c| i64::from(c)), || plan_array("thread colours"))?,
            ));
            for (k, stage) in p.stages.iter().enumerate() {
                arrays.push((
                    layout.l2g[k][0],
                    upload_i32(d, stage.l2g.iter().map(|&t| i64::from(t)), || plan_array("staging lists"))?,
                ));
                arrays.push((
                    layout.l2g[k][1],
                    upload_i32(d, stage.l2g_offsets.iter().map(|&o| o as i64), || plan_array("staging offsets"))?,
                ));
                for (c, g2l) in stage.g2l.iter().enumerate() {
                    let bytes: &[u8] = bytemuck::cast_slice(g2l);
                    let buf = d.alloc(bytes.len().max(2))?;
                    d.upload(&buf, bytes)?;
                    arrays.push((layout.g2l[k][c], buf));
                }
            }
            for c in 0..p.colours {
                let n = p.colour_blocks(c).len();
                let exec = exec_counts[c as usize];
                let offset = p.colour_offsets[c as usize];
                let section = usize::from(c >= p.core_colours);
                for (first, count, section) in [(offset, n - exec, section), (offset + n - exec, exec, EXEC_SECTION)] {
                    if count > 0 {
                        let mut val = [0i64; loops::MAX_VALS];
                        val[loops::val::BLOCK_LIST_OFFSET] = first as i64;
                        launches.push(Launch { grid: count as u32, val, section });
                    }
                }
            }
            shared = shared.max(p.max_staged_bytes() + 8 * spec.pairs.len());
        }
        (Strategy::GlobalColour, Some(p)) => {
            let mut perm: Vec<i64> = crate::fallible::reserved(p.len(), || plan_array("element permutation"))?;
            for b in &p.blocks {
                let mut elems: Vec<usize> = crate::fallible::reserved(b.len, || plan_array("a block's elements"))?;
                elems.extend(b.start..b.start + b.len);
                elems.sort_by_key(|&e| p.thread_colour[e]);
                let mut i = 0;
                while i < elems.len() {
                    let colour = p.thread_colour[elems[i]];
                    let first = perm.len();
                    while i < elems.len() && p.thread_colour[elems[i]] == colour {
                        perm.push(elems[i] as i64);
                        i += 1;
                    }
                    flat(first, perm.len(), b.section, &mut launches);
                }
            }
            let slot = generated.layout.perm.expect("global-colour layout");
            arrays.push((slot, upload_i32(device.as_ref(), perm.into_iter(), || plan_array("element permutation"))?));
        }
        _ => {
            let mut start = 0;
            for (section, &n) in sections.iter().enumerate() {
                flat(start, start + n, section, &mut launches);
                start += n;
            }
        }
    }
    // One partial result per launched block, per reduced global; the
    // exec halo's come after all others, and the finishing entry reads only
    // those before (an exec-halo element belongs to another rank, which
    // counts it).
    let mut base = 0i64;
    for exec in [false, true] {
        for launch in launches.iter_mut().filter(|l| (l.section >= EXEC_SECTION) == exec) {
            launch.val[loops::val::PARTIAL_BASE] = base;
            base += i64::from(launch.grid);
        }
    }
    let counted = launches.iter().filter(|l| l.section < EXEC_SECTION).map(|l| i64::from(l.grid)).sum();
    let mut partials = Vec::new();
    for &(a, slot) in &generated.layout.partials {
        let bytes = (base.max(1) as usize) * args[a].borrow().bytes_per_entity();
        partials.push((slot, device.alloc(bytes)?));
    }
    let panics = spec.may_panic();
    let finish_shared = loops::reduction_shared_bytes(&spec, block as usize);
    Ok(DeviceLoop {
        strategy,
        generated,
        module,
        arrays,
        partials,
        launches,
        counted,
        block,
        shared,
        finish_shared,
        map_args,
        panics,
        fns,
    })
}

/// A prepared loop bound to its current arguments, launched section by
/// section so that a halo exchange can run between the core and the rest.
pub(crate) struct Launcher<'a> {
    dl: &'a DeviceLoop,
    kernel: &'a str,
    params: LaunchParams,
    /// The arguments' data, locked from their upload until `rest` has
    /// finished the loop: a host access in between would see the values
    /// half-way (and a host write would be lost under the device copy).
    locked: crate::exec::DeviceLocked<'a>,
    /// The device is this thread's while the launches use the addresses
    /// (see `device::Occupant`).
    _occupied: crate::device::Occupied<'a>,
}

impl<'a> Launcher<'a> {
    /// Fills the launch parameters with the arguments' current device
    /// addresses (uploading stale values).
    pub(crate) fn new<A: Borrow<Arg>>(
        device: &'a Arc<dyn Device>,
        dl: &'a DeviceLoop,
        kernel: &'a str,
        args: &'a [A],
    ) -> Result<Launcher<'a>> {
        let occupied = device.occupant().enter();
        let locked = crate::exec::DeviceLocked::lock(kernel, device, args.iter().map(|a| a.borrow().storage.as_ref()))?;
        let mut params = LaunchParams::default();
        for (i, a) in args.iter().map(Borrow::borrow).enumerate() {
            params.ptr[dl.generated.layout.args + i] = locked.addr(a.data_id());
        }
        for (m, &a) in dl.map_args.iter().enumerate() {
            let map = args[a].borrow().map().expect("a map argument");
            params.ptr[dl.generated.layout.maps + m] = map.on_device(device)?;
        }
        for (slot, buf) in dl.arrays.iter().chain(&dl.partials) {
            params.ptr[*slot] = buf.addr;
        }
        // Recorded before the first launch, not after the last: a launch
        // that fails after others (or its own first blocks) wrote leaves
        // the device copy the current one, which the next host read
        // downloads and the next device loop starts from.
        for a in args.iter().map(Borrow::borrow).filter(|a| a.access.writes()) {
            a.storage.device_written();
        }
        Ok(Launcher { dl, kernel, params, locked, _occupied: occupied })
    }

    /// Launches the core section (which needs no halo data).
    pub(crate) fn core(&mut self) -> Result<()> {
        self.launch(|section| section == 0)
    }

    /// Launches the other sections, finishes reductions and records the
    /// writes.
    pub(crate) fn rest(mut self) -> Result<()> {
        self.launch(|section| section != 0)?;
        // A panic stops the loop before reductions finish: globals being
        // reduced keep their values, as on the host backends.
        let panic = if self.dl.panics { self.dl.module.take_panic()? } else { None };
        if let (Some(finish), None) = (&self.dl.generated.finish, &panic) {
            self.params.val = [0; loops::MAX_VALS];
            self.params.val[loops::val::PARTIALS] = self.dl.counted;
            self.dl.module.launch(finish, 1, self.dl.block, self.dl.finish_shared, &self.params)?;
        }
        // Only now may host accesses and other loops have the data.
        drop(self.locked);
        match panic {
            Some(p) => {
                let element = usize::try_from(p.element).unwrap_or(usize::MAX);
                Err(Error::KernelPanicked {
                    kernel: self.kernel.into(),
                    element,
                    place: format!("element {element}"),
                    message: p.message(&self.dl.fns),
                })
            }
            None => Ok(()),
        }
    }

    fn launch(&mut self, sections: impl Fn(usize) -> bool) -> Result<()> {
        let dl = self.dl;
        for launch in dl.launches.iter().filter(|l| sections(l.section)) {
            let _range = Range::lazy(|| {
                let section = ["core", "owned", "exec"].get(launch.section).unwrap_or(&"halo");
                format!("{}/{section}/{}", self.kernel, dl.strategy.name())
            });
            self.params.val = launch.val;
            dl.module.launch(&dl.generated.entry, launch.grid, dl.block, dl.shared, &self.params)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A whole loop: core and rest.
    fn run(device: &Arc<dyn Device>, dl: &DeviceLoop, kernel: &str, args: &[Arg]) -> Result<()> {
        let mut launcher = Launcher::new(device, dl, kernel, args)?;
        launcher.core()?;
        launcher.rest()
    }
    use crate::device::emu::Emu;
    use crate::{Access, Backend, Dat, Runtime};

    #[crate::kernel]
    fn spread_pair(w: &f64, a: &mut [f64; 2], b: &mut [f64; 2]) {
        a[0] += *w;
        a[1] += 2.0 * *w;
        b[0] -= *w;
        b[1] -= 0.5 * *w;
    }

    /// `spread_pair` over 5000 edges into 700 nodes: the pair map's
    /// values, the target dat and the loop's arguments.
    fn spread_loop(rt: &Runtime) -> (Vec<i32>, Dat<f64>, [Arg; 3]) {
        let (nedges, nnodes) = (5000, 700);
        let edges = rt.set("edges", nedges).unwrap();
        let nodes = rt.set("nodes", nnodes).unwrap();
        let ends: Vec<i32> = (0..2 * nedges).map(|k| ((k * 7919 + k / 2) % nnodes) as i32).collect();
        let pair = rt.map("pair", &edges, &nodes, 2, ends.clone()).unwrap();
        let w = rt.dat("w", &edges, 1, vec![1.0f64; nedges]).unwrap();
        let r = rt.dat("r", &nodes, 2, vec![0.0f64; 2 * nnodes]).unwrap();
        let args = [w.arg(Access::READ), r.arg_via(&pair, 0, Access::INC), r.arg_via(&pair, 1, Access::INC)];
        (ends, r, args)
    }

    #[test]
    fn launches_use_the_shared_memory_the_plan_reports_and_an_overflow_fails() {
        let rt = Runtime::with_backend(Backend::Seq).unwrap();
        let (_, _, args) = spread_loop(&rt);
        let nedges = 5000;
        let device: Arc<dyn Device> = Arc::new(Emu::new().unwrap());
        let mut dl = prepare(&device, spread_pair::KERNEL, &args, &[nedges], Strategy::Staged, None).unwrap();
        let built =
            build(spread_pair::KERNEL, &args, &[nedges], Strategy::Staged, None, Target::of(device.as_ref())).unwrap();
        let plan = built.plan.expect("a staged plan");
        assert!(dl.shared >= plan.max_staged_bytes(), "launch {} < plan {}", dl.shared, plan.max_staged_bytes());
        run(&device, &dl, "spread_pair", &args).unwrap();
        dl.shared = plan.max_staged_bytes() - 64;
        let err = run(&device, &dl, "spread_pair", &args).unwrap_err();
        assert!(err.to_string().contains("shared memory"), "{err}");
    }

    /// A launch that fails after some of its blocks wrote (here: blocks
    /// that overran their shared memory, caught after the launch) leaves
    /// one current copy of the values: what a host read sees is what the
    /// next device loop starts from. The writes were recorded only after
    /// the launches succeeded, so the host read gave the values from
    /// before the loop while the next loop added to the half-written
    /// device copy.
    #[test]
    fn a_failed_launch_leaves_the_host_and_the_device_agreeing() {
        let rt = Runtime::with_backend(Backend::Seq).unwrap();
        let (ends, r, args) = spread_loop(&rt);
        let device: Arc<dyn Device> = Arc::new(Emu::new().unwrap());
        let mut dl = prepare(&device, spread_pair::KERNEL, &args, &[ends.len() / 2], Strategy::Staged, None).unwrap();
        let enough = dl.shared;
        // Short by less than the canary after it: caught, not corrupting.
        dl.shared = enough - 64;
        run(&device, &dl, "spread_pair", &args).unwrap_err();
        let seen = r.values().unwrap();
        dl.shared = enough;
        run(&device, &dl, "spread_pair", &args).unwrap();
        // One loop's increments (whole numbers and halves: exact in any order).
        let mut expected = seen.clone();
        for e in ends.chunks(2) {
            let (a, b) = (e[0] as usize, e[1] as usize);
            expected[2 * a] += 1.0;
            expected[2 * a + 1] += 2.0;
            expected[2 * b] -= 1.0;
            expected[2 * b + 1] -= 0.5;
        }
        assert_eq!(
            r.values().unwrap(),
            expected,
            "the loop after the failed one started from other values than the host saw"
        );
    }
}
