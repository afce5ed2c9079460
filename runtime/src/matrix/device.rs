//! Matrices on a device (emu, cuda): assembly and the sparse product.
//!
//! Assembly runs in two phases. The user's loop runs as any device loop,
//! its matrix argument replaced by a direct argument of an internal dat
//! holding one element matrix per element (zeroed first), so every
//! strategy of the other arguments applies unchanged. A library kernel then
//! adds the element matrices into the CSR values:
//! - `deterministic` (the default, and `PARLOOP_DETERMINISTIC=1`): one
//!   thread per nonzero adds its contributions, listed in element order
//!   (a CSR of contributions, the transpose of the element -> position
//!   table, as PETSc's COO assembly does). No atomics; the sums follow the
//!   order of `seq`, so device and seq assemble bitwise the same matrix.
//! - `atomic` (`PARLOOP_STRATEGY=atomic`, INC only): one thread per
//!   element-matrix entry, `atomicAdd` into its position: less set-up and
//!   memory, not reproducible bit for bit.
//!
//! The element -> position table is built on the host once per matrix
//! argument shape (pattern, maps, iteration set) and kept on the device.
//! The element matrices are one dat per matrix argument of that shape in
//! a loop: two matrices on one sparsity in one loop (`M` and `M + dt K`)
//! share the tables but not the element matrices.
//!
//! The product `y = A x` is a CSR kernel with `g` threads per row (`g` a
//! power of two near the average row length, 1 to 32); the threads of a
//! row sum strided entries, then the first adds the others' partial sums
//! in lane order: deterministic.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Weak;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use super::assembly::MatScatter;
use super::Mat;
use crate::arg::{Arg, ArgKind};
use crate::decl::{Dat, Set, Storage};
use crate::device::{Device, DeviceBuffer, LaunchParams, Module};
use crate::error::{Error, Result};
use crate::exec::DeviceLocked;
use crate::par_loop::ParLoop;
use crate::runtime::Runtime;
use crate::strategy::Strategy;
use crate::sync::lock;
use crate::types::{Access, ElemType, Scalar};

/// Threads per block of the library kernels.
const BLOCK: u32 = 256;
/// Most blocks of a grid-stride library launch.
const MAX_GRID: usize = 4096;
/// Marks an element-matrix entry whose row another rank owns.
const NOT_OWNED: u32 = u32::MAX;

/// Device state of matrices, per runtime: the library module, each matrix
/// argument shape's position tables and element-matrix dats, each
/// pattern's CSR arrays.
#[derive(Default)]
pub(crate) struct DeviceCaches {
    library: Mutex<Option<Arc<dyn Module>>>,
    scatters: Mutex<HashMap<ScatterKey, Arc<ScatterTables>>>,
    patterns: Mutex<HashMap<usize, Arc<CsrOnDevice>>>,
}

impl DeviceCaches {
    /// Lets go of the tables of patterns no matrix uses any more (done at
    /// each insertion too). Their element-matrix dats hold the loop's
    /// iteration set: a program that dropped its mesh and matrices and
    /// declared them again under the same names was refused the names.
    pub(crate) fn prune(&self) {
        // Dropped after the locks are let go: a dat's drop may run loops.
        let dead_scatters = take_dead(&mut lock(&self.scatters), |t| t.pattern.strong_count() == 0);
        let dead_patterns = take_dead(&mut lock(&self.patterns), |c| c.pattern.strong_count() == 0);
        drop((dead_scatters, dead_patterns));
    }
}

/// Takes the entries of `map` that are `dead` out of it.
fn take_dead<K: Copy + Eq + std::hash::Hash, V>(map: &mut HashMap<K, V>, dead: impl Fn(&V) -> bool) -> Vec<V> {
    let keys: Vec<K> = map.iter().filter(|(_, v)| dead(v)).map(|(k, _)| *k).collect();
    keys.iter().filter_map(|k| map.remove(k)).collect()
}

/// A matrix argument's shape: the pattern (by address, reserved by the
/// tables' weak reference), the maps, and the iteration set.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct ScatterKey {
    pattern: usize,
    row_map: u64,
    col_map: u64,
    set: u64,
    elem: ElemType,
}

/// Where element-matrix entries go, on the device.
struct ScatterTables {
    /// The pattern: a weak reference keeps its address from being reused
    /// while it is a key, and tells when the entry is garbage (the tables
    /// and element matrices, often the largest device allocations, go with
    /// the last matrix on the pattern, at the next insertion).
    pattern: Weak<super::sparsity::Pattern>,
    /// Entries (elements x rows x cols).
    entries: usize,
    /// Position of each entry in the values (`NOT_OWNED` when none).
    positions: DeviceBuffer,
    /// Contributions of each nonzero: `offsets[k]..offsets[k + 1]` index
    /// `contributions`, which lists entries in element order.
    offsets: DeviceBuffer,
    contributions: DeviceBuffer,
    /// The element matrices (one per element of the iteration set) of the
    /// first, second, ... argument of this shape in a loop: grown to the
    /// most arguments of this shape one loop has had, kept for later loops.
    element_matrices: Mutex<Vec<Arc<dyn Storage>>>,
    element_dat_dim: usize,
    /// A WRITE through these tables was checked for entries two elements
    /// share (`validate::check_mat_write_race`), once: INC loops of the
    /// same shape do not need it.
    write_checked: AtomicBool,
}

impl ScatterTables {
    /// The element matrices of the `k`-th argument of this shape in a loop
    /// (from 0), made if no loop had that many.
    fn element_matrices(
        &self,
        rt: &Runtime,
        k: usize,
        scatter: &MatScatter,
        set: &Set,
        elem: ElemType,
    ) -> Result<Arc<dyn Storage>> {
        let mut dats = lock(&self.element_matrices);
        while dats.len() <= k {
            let dat = element_dat(rt, set, self.element_dat_dim, scatter, elem, dats.len())?;
            dats.push(dat);
        }
        Ok(dats[k].clone())
    }
}

/// A pattern's scalar CSR on the device.
struct CsrOnDevice {
    /// As [`ScatterTables::pattern`].
    pattern: Weak<super::sparsity::Pattern>,
    row_ptr: DeviceBuffer,
    col_indices: DeviceBuffer,
    /// Threads per row of the product.
    threads_per_row: u32,
}

fn c_type(elem: ElemType) -> Result<&'static str> {
    match elem {
        ElemType::F64 => Ok("double"),
        ElemType::F32 => Ok("float"),
        other => Err(Error::Backend {
            name: "device".into(),
            reason: format!("matrices of {other:?} values are not supported on a device (f64 and f32 are)"),
        }),
    }
}

/// The library's CUDA C++: for each of `double` and `float`, zeroing,
/// the two scatters and the product.
fn library_source() -> String {
    let mut s = parloop_kernels::loops::LOOP_PRELUDE.to_string();
    for (t, suffix) in [("double", "f64"), ("float", "f32")] {
        s.push_str(&format!(
            r#"
PL_ENTRY(pl_lib_zero_{suffix}) {{
    {t}* const p = ({t}*)prm.ptr[0];
    const long long n = prm.val[0];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x)
        p[i] = ({t})0;
}}

/* One thread per nonzero: its contributions in element order, onto the
   value (INC) or the last one (WRITE). */
PL_ENTRY(pl_lib_scatter_det_{suffix}) {{
    {t}* const vals = ({t}*)prm.ptr[0];
    const unsigned int* const offsets = (const unsigned int*)prm.ptr[1];
    const unsigned int* const contrib = (const unsigned int*)prm.ptr[2];
    const {t}* const em = (const {t}*)prm.ptr[3];
    const long long nnz = prm.val[0];
    const long long write = prm.val[1];
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < nnz; k += (long long)blockDim.x * gridDim.x) {{
        const unsigned int first = offsets[k], last = offsets[k + 1];
        if (first == last) continue;
        if (write) {{ vals[k] = em[contrib[last - 1]]; continue; }}
        {t} v = vals[k];
        for (unsigned int q = first; q < last; ++q) v += em[contrib[q]];
        vals[k] = v;
    }}
}}

/* One thread per element-matrix entry, added atomically. */
PL_ENTRY(pl_lib_scatter_atomic_{suffix}) {{
    {t}* const vals = ({t}*)prm.ptr[0];
    const unsigned int* const pos = (const unsigned int*)prm.ptr[1];
    const {t}* const em = (const {t}*)prm.ptr[2];
    const long long n = prm.val[0];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {{
        const unsigned int p = pos[i];
        if (p != 0xffffffffu) atomicAdd(&vals[p], em[i]);
    }}
}}

/* d = diag(A), one thread per row: the row's entry in column r (columns
   sorted: a binary search), 0 where the pattern has none. */
PL_ENTRY(pl_lib_diagonal_{suffix}) {{
    const long long* const row_ptr = (const long long*)prm.ptr[0];
    const unsigned int* const cols = (const unsigned int*)prm.ptr[1];
    const {t}* const vals = (const {t}*)prm.ptr[2];
    {t}* const d = ({t}*)prm.ptr[3];
    const long long rows = prm.val[0];
    for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += (long long)blockDim.x * gridDim.x) {{
        long long lo = row_ptr[r], hi = row_ptr[r + 1];
        {t} v = ({t})0;
        while (lo < hi) {{
            const long long mid = lo + (hi - lo) / 2;
            const unsigned int c = cols[mid];
            if (c == (unsigned int)r) {{ v = vals[mid]; break; }}
            if (c < (unsigned int)r) lo = mid + 1; else hi = mid;
        }}
        d[r] = v;
    }}
}}

/* y = A x, g threads per row (g divides blockDim.x): strided partial sums,
   then lane 0 adds the lanes' sums in order. */
PL_ENTRY(pl_lib_spmv_{suffix}) {{
    PL_DYNAMIC_SHARED(pl_sh);
    {t}* const part = ({t}*)pl_sh;
    const long long* const row_ptr = (const long long*)prm.ptr[0];
    const unsigned int* const cols = (const unsigned int*)prm.ptr[1];
    const {t}* const vals = (const {t}*)prm.ptr[2];
    const {t}* const x = (const {t}*)prm.ptr[3];
    {t}* const y = ({t}*)prm.ptr[4];
    const long long rows = prm.val[0];
    const int g = (int)prm.val[1];
    const int lane = threadIdx.x % g;
    const long long per_block = blockDim.x / g;
    for (long long base = (long long)blockIdx.x * per_block; base < rows; base += (long long)gridDim.x * per_block) {{
        const long long r = base + threadIdx.x / g;
        {t} s = ({t})0;
        if (r < rows)
            for (long long q = row_ptr[r] + lane; q < row_ptr[r + 1]; q += g) s += vals[q] * x[cols[q]];
        part[threadIdx.x] = s;
        __syncthreads();
        if (lane == 0 && r < rows) {{
            {t} t = part[threadIdx.x];
            for (int l = 1; l < g; ++l) t += part[threadIdx.x + l];
            y[r] = t;
        }}
        __syncthreads();
    }}
}}
"#
        ));
    }
    s
}

fn suffix(elem: ElemType) -> &'static str {
    if elem == ElemType::F32 {
        "f32"
    } else {
        "f64"
    }
}

fn grid_for(n: usize) -> u32 {
    n.div_ceil(BLOCK as usize).clamp(1, MAX_GRID) as u32
}

fn upload<P: bytemuck::Pod>(device: &dyn Device, values: &[P]) -> Result<DeviceBuffer> {
    let bytes: &[u8] = bytemuck::cast_slice(values);
    let buf = device.alloc(bytes.len().max(8))?;
    if !bytes.is_empty() {
        device.upload(&buf, bytes)?;
    }
    Ok(buf)
}

fn busy(what: &str, name: &str) -> Error {
    Error::Busy { kernel: what.into(), dat: name.into() }
}

/// The current device address of a dat's or matrix's values.
fn address(storage: &dyn Storage, device: &Arc<dyn Device>, what: &str) -> Result<u64> {
    storage.on_device(device).ok_or_else(|| busy(what, storage.name()))?
}

impl DeviceCaches {
    fn library(&self, device: &Arc<dyn Device>) -> Result<Arc<dyn Module>> {
        let mut slot = lock(&self.library);
        if let Some(m) = slot.as_ref() {
            return Ok(m.clone());
        }
        let module = device.compile("parloop matrix library", &library_source())?;
        *slot = Some(module.clone());
        Ok(module)
    }

    fn csr(&self, device: &Arc<dyn Device>, mat: &super::sparsity::Sparsity) -> Result<Arc<CsrOnDevice>> {
        let key = Arc::as_ptr(&mat.pattern) as usize;
        if let Some(c) = lock(&self.patterns).get(&key) {
            return Ok(c.clone());
        }
        let p = &mat.pattern;
        let row_ptr: Vec<i64> = p.row_ptr().iter().map(|&r| r as i64).collect();
        let rows = p.row_ptr().len().saturating_sub(1);
        let average = if rows == 0 { 1.0 } else { p.col_indices().len() as f64 / rows as f64 };
        // Enough lanes to cover a typical row in one or two strides.
        let threads_per_row = (average / 2.0).ceil().clamp(1.0, 32.0) as u32;
        let csr = Arc::new(CsrOnDevice {
            pattern: Arc::downgrade(p),
            row_ptr: upload(device.as_ref(), &row_ptr)?,
            col_indices: upload(device.as_ref(), p.col_indices())?,
            threads_per_row: threads_per_row.next_power_of_two(),
        });
        self.prune();
        lock(&self.patterns).insert(key, csr.clone());
        Ok(csr)
    }
}

/// Builds the position and contribution tables of `scatter` over the
/// first `elements` elements (`context`, "loop `k`, matrix `A`", for
/// errors).
fn scatter_tables(
    rt: &Runtime,
    device: &Arc<dyn Device>,
    scatter: &MatScatter,
    elements: usize,
    set: &Set,
    elem: ElemType,
    context: &str,
) -> Result<ScatterTables> {
    let per_element = scatter.rows * scatter.cols;
    let entries =
        elements.checked_mul(per_element).filter(|&n| n < NOT_OWNED as usize).ok_or_else(|| Error::Backend {
            name: device.name(),
            reason: format!(
                "{context}: {elements} element matrices of {per_element} entries exceed what device assembly \
                 indexes ({} entries); assemble in parts or on the host",
                NOT_OWNED
            ),
        })?;
    let nnz = scatter.pattern.row_ptr().last().copied().unwrap_or(0);
    let mut positions = Vec::new();
    positions.try_reserve_exact(entries).map_err(|_| Error::OutOfMemory {
        what: format!("{context}: the device assembly's position table"),
        bytes: entries.saturating_mul(4),
    })?;
    positions.resize(entries, NOT_OWNED);
    // Elements in parallel (binary searches in their block rows): the
    // n = 125 unit cube has 187 million entries.
    if per_element > 0 {
        positions.par_chunks_mut(per_element).enumerate().for_each_init(
            || vec![None; per_element],
            |local, (e, out)| {
                super::assembly::element_positions(scatter, e, local);
                for (o, p) in out.iter_mut().zip(local.iter()) {
                    *o = p.map_or(NOT_OWNED, |k| k as u32);
                }
            },
        );
    }
    let (counts, contributions) = contribution_table(&positions, nnz, context)?;
    // The first argument's element matrices now: they are what most loops need.
    let element_matrices = vec![element_dat(rt, set, per_element, scatter, elem, 0)?];
    Ok(ScatterTables {
        pattern: Arc::downgrade(&scatter.pattern),
        entries,
        positions: upload(device.as_ref(), &positions)?,
        offsets: upload(device.as_ref(), &counts)?,
        contributions: upload(device.as_ref(), &contributions)?,
        element_matrices: Mutex::new(element_matrices),
        element_dat_dim: per_element,
        write_checked: AtomicBool::new(false),
    })
}

/// The contributions of `positions` (each entry's nonzero, or `NOT_OWNED`)
/// per nonzero: `offsets` (`nnz + 1` prefix sums) and the entries of each
/// nonzero in entry order (element order, so that the device's sums follow
/// seq's). In parallel: counts and placements by atomics, then each
/// nonzero's few entries sorted, which gives exactly the serial table (the
/// n = 125 unit cube has 187 M entries on 29.6 M nonzeros).
fn contribution_table(positions: &[u32], nnz: usize, context: &str) -> Result<(Vec<u32>, Vec<u32>)> {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    let table = |what: &str, n: usize| -> Result<Vec<AtomicU32>> {
        let mut v = Vec::new();
        v.try_reserve_exact(n).map_err(|_| Error::OutOfMemory {
            what: format!("{context}: the device assembly's {what}"),
            bytes: n.saturating_mul(4),
        })?;
        v.extend((0..n).map(|_| AtomicU32::new(0)));
        Ok(v)
    };
    let counts = table("contribution counts", nnz + 1)?;
    positions.par_iter().filter(|&&p| p != NOT_OWNED).for_each(|&p| {
        counts[p as usize + 1].fetch_add(1, Relaxed);
    });
    let mut offsets: Vec<u32> = counts.into_iter().map(AtomicU32::into_inner).collect();
    for k in 0..nnz {
        offsets[k + 1] += offsets[k];
    }
    let total = offsets[nnz] as usize;
    let cursor = table("contribution cursors", nnz)?;
    let placed = table("contribution table", total)?;
    positions.par_iter().enumerate().filter(|(_, &p)| p != NOT_OWNED).for_each(|(i, &p)| {
        let slot = offsets[p as usize] + cursor[p as usize].fetch_add(1, Relaxed);
        placed[slot as usize].store(i as u32, Relaxed);
    });
    drop(cursor);
    let mut contributions: Vec<u32> = placed.into_iter().map(AtomicU32::into_inner).collect();
    // Entry order within each nonzero: chunks of whole nonzeros in parallel.
    let chunk = nnz.div_ceil(4 * rayon::current_num_threads()).max(1);
    let mut pieces = Vec::with_capacity(nnz / chunk + 1);
    let mut rest: &mut [u32] = &mut contributions;
    for first in (0..nnz).step_by(chunk) {
        let last = (first + chunk).min(nnz);
        let len = (offsets[last] - offsets[first]) as usize;
        let (piece, tail) = std::mem::take(&mut rest).split_at_mut(len);
        pieces.push((first, last, piece));
        rest = tail;
    }
    pieces.into_par_iter().for_each(|(first, last, piece)| {
        let base = offsets[first];
        for k in first..last {
            piece[(offsets[k] - base) as usize..(offsets[k + 1] - base) as usize].sort_unstable();
        }
    });
    Ok((offsets, contributions))
}

/// The element matrices of a scatter: a temporary, so that on the device
/// they take device memory alone (no host copy, host fill or upload: 1.5 GB
/// each for the n = 125 unit cube), and an unpooled one, so that this
/// memory goes with the tables (with the last matrix on the pattern). The
/// `k`-th argument of the shape in a loop has the `k`-th.
fn element_dat(
    rt: &Runtime,
    set: &Set,
    per_element: usize,
    scatter: &MatScatter,
    elem: ElemType,
    k: usize,
) -> Result<Arc<dyn Storage>> {
    let mut name = format!("pl_elemat_{}_{}", scatter.sparsity_name, set.name());
    if k > 0 {
        name.push_str(&format!("_{k}"));
    }
    match elem {
        ElemType::F64 => Ok(rt.unpooled_temporary::<f64>(&name, set, per_element)?.0.clone()),
        ElemType::F32 => Ok(rt.unpooled_temporary::<f32>(&name, set, per_element)?.0.clone()),
        other => Err(c_type(other).unwrap_err()),
    }
}

/// What a CSR kernel's launch starts from (`Runtime::csr_launch`).
struct CsrLaunch {
    library: Arc<dyn Module>,
    csr: Arc<CsrOnDevice>,
    params: LaunchParams,
    rows: usize,
}

/// `e`, about the loop with element matrices in place of `lp`'s matrix
/// arguments, in terms of `lp`: an argument error names the user's matrix,
/// not the internal dat (the arguments keep their positions).
fn in_user_terms(e: Error, lp: &ParLoop) -> Error {
    match e {
        Error::Argument { kernel, set, arg, dat, problem } => {
            let dat = match lp.args().get(arg) {
                Some(a) if a.mat().is_some() => a.data_name().to_string(),
                _ => dat,
            };
            Error::Argument { kernel, set, arg, dat, problem }
        }
        other => other,
    }
}

/// Whether matrix scatters on this runtime add atomically (the user asked
/// for the atomic strategy and not for determinism).
fn atomic_scatter(rt: &Runtime) -> bool {
    rt.strategy() == Some(Strategy::Atomic) && !rt.deterministic()
}

impl Runtime {
    /// Runs a loop with matrix arguments on the device: the loop with
    /// element-matrix dats in their place, then the scatters.
    pub(crate) fn assemble_on_device(&self, device: &Arc<dyn Device>, lp: &ParLoop) -> Result<()> {
        let kernel = lp.kernel();
        let set = lp.set();
        let elements = lp.sections().executed();
        let library = self.matrices.device.library(device)?;
        let mut args: Vec<Arg> = lp.args().to_vec();
        let mut scatters = Vec::new();
        // Matrix arguments of each shape so far: each has its own element
        // matrices (two on one sparsity would otherwise alias).
        let mut of_shape: HashMap<ScatterKey, usize> = HashMap::new();
        for (i, arg) in lp.args().iter().enumerate() {
            let ArgKind::Mat(m) = &arg.kind else { continue };
            let elem = arg.storage.elem();
            c_type(elem)?;
            let key = ScatterKey {
                pattern: Arc::as_ptr(&m.pattern) as usize,
                row_map: m.row_map.id(),
                col_map: m.col_map.id(),
                set: set.id(),
                elem,
            };
            let cached = lock(&self.matrices.device.scatters).get(&key).cloned();
            let tables = match cached {
                Some(t) if t.entries == elements * m.rows * m.cols => t,
                _ => {
                    let context = format!("loop `{}`, matrix `{}`", kernel.name(), arg.data_name());
                    let t = Arc::new(scatter_tables(self, device, m, elements, set, elem, &context)?);
                    self.matrices.device.prune();
                    lock(&self.matrices.device.scatters).insert(key, t.clone());
                    t
                }
            };
            if arg.access == Access::Write && !tables.write_checked.load(Ordering::Relaxed) {
                crate::validate::check_mat_write_race(kernel, set, i, arg, m, elements)?;
                tables.write_checked.store(true, Ordering::Relaxed);
            }
            let k = of_shape.entry(key).or_insert(0);
            let element_matrices = tables.element_matrices(self, *k, m, set, elem)?;
            *k += 1;
            // Zeroed element matrices: the kernel adds into them.
            let em = address(element_matrices.as_ref(), device, kernel.name())?;
            let mut params = LaunchParams::default();
            params.ptr[0] = em;
            params.val[0] = (set.total() * tables.element_dat_dim) as i64;
            // Written before the launch is tried (as every device write
            // here: `Launcher::new`'s reason).
            element_matrices.device_written();
            library.launch(
                &format!("pl_lib_zero_{}", suffix(elem)),
                grid_for(params.val[0] as usize),
                BLOCK,
                0,
                &params,
            )?;
            // WRITE, not INC: the kernel may assign entries of a WRITE
            // matrix argument, and the values start at zero anyway.
            args[i] = Arg::new(
                element_matrices.clone(),
                ArgKind::Direct,
                Access::Write,
                tables.element_dat_dim,
                Some(set.clone()),
            );
            scatters.push((arg.clone(), tables, element_matrices));
        }
        // The exec halo too: other ranks' elements add into this rank's rows.
        let inner = ParLoop::new(kernel, set, &args).map_err(|e| in_user_terms(e, lp))?.with_exec_halo();
        self.execute(&inner).map_err(|e| in_user_terms(e, lp))?;
        for (arg, tables, element_matrices) in scatters {
            let elem = arg.storage.elem();
            // Held until the scatter's write is recorded, as a loop holds
            // its data (`exec::DeviceLocked`): a host write to the matrix
            // (`zero`, `zero_rows`) in between would be lost.
            let held = DeviceLocked::lock(kernel.name(), device, [arg.storage.as_ref(), element_matrices.as_ref()])?;
            let vals = held.addr(arg.storage.id());
            let em = held.addr(element_matrices.id());
            let mut params = LaunchParams::default();
            let write = arg.access == Access::Write;
            arg.storage.device_written();
            if atomic_scatter(self) && !write {
                params.ptr[0] = vals;
                params.ptr[1] = tables.positions.addr;
                params.ptr[2] = em;
                params.val[0] = tables.entries as i64;
                library.launch(
                    &format!("pl_lib_scatter_atomic_{}", suffix(elem)),
                    grid_for(tables.entries),
                    BLOCK,
                    0,
                    &params,
                )?;
            } else {
                let nnz = tables.offsets.bytes / 4 - 1;
                params.ptr[0] = vals;
                params.ptr[1] = tables.offsets.addr;
                params.ptr[2] = tables.contributions.addr;
                params.ptr[3] = em;
                params.val[0] = nnz as i64;
                params.val[1] = i64::from(write);
                library.launch(&format!("pl_lib_scatter_det_{}", suffix(elem)), grid_for(nnz), BLOCK, 0, &params)?;
            }
            drop(held);
        }
        Ok(())
    }

    /// The matrix library, the launch parameters every CSR kernel starts
    /// with (row pointers, column indices, `a`'s values on the device) and
    /// the number of rows.
    fn csr_launch<T: Scalar>(&self, device: &Arc<dyn Device>, a: &Mat<T>, held: &DeviceLocked) -> Result<CsrLaunch> {
        c_type(T::TYPE)?;
        let library = self.matrices.device.library(device)?;
        let csr = self.matrices.device.csr(device, a.sparsity())?;
        let mut params = LaunchParams::default();
        params.ptr[0] = csr.row_ptr.addr;
        params.ptr[1] = csr.col_indices.addr;
        params.ptr[2] = held.addr(a.values_dat().id());
        // The values are read where no host read checks them: refuse them
        // if the lazy trace discarded an assembly into them.
        a.values_dat().check_poison()?;
        Ok(CsrLaunch { library, csr, params, rows: a.sparsity().rows() })
    }

    /// `y = A x` on the device.
    pub(crate) fn mult_on_device<T: Scalar>(
        &self,
        device: &Arc<dyn Device>,
        a: &Mat<T>,
        x: &Dat<T>,
        y: &Dat<T>,
    ) -> Result<()> {
        // The matrix, x and y held until y's write is recorded (as a loop
        // holds its data, `exec::DeviceLocked`).
        let held = DeviceLocked::lock(
            &format!("mult [{}]", a.name()),
            device,
            [a.values_dat().0.as_ref() as &dyn Storage, x.0.as_ref(), y.0.as_ref()],
        )?;
        let CsrLaunch { library, csr, mut params, rows } = self.csr_launch(device, a, &held)?;
        params.ptr[3] = held.addr(x.id());
        params.ptr[4] = held.addr(y.id());
        params.val[0] = rows as i64;
        params.val[1] = i64::from(csr.threads_per_row);
        let rows_per_block = (BLOCK / csr.threads_per_row) as usize;
        let grid = rows.div_ceil(rows_per_block).clamp(1, MAX_GRID) as u32;
        let shared = BLOCK as usize * std::mem::size_of::<T>();
        y.0.device_written();
        library.launch(&format!("pl_lib_spmv_{}", suffix(T::TYPE)), grid, BLOCK, shared, &params)?;
        Ok(())
    }

    /// `d = diag(A)` on the device, the owned rows (the matrix's values
    /// stay there: a host diagonal downloaded them, 237 MB for the n = 125
    /// unit cube, at every solve).
    pub(crate) fn diagonal_on_device<T: Scalar>(&self, device: &Arc<dyn Device>, a: &Mat<T>, d: &Dat<T>) -> Result<()> {
        // Held until d's write is recorded, as in `mult_on_device`.
        let held = DeviceLocked::lock(
            &format!("diagonal [{}]", a.name()),
            device,
            [a.values_dat().0.as_ref() as &dyn Storage, d.0.as_ref()],
        )?;
        let CsrLaunch { library, mut params, rows, .. } = self.csr_launch(device, a, &held)?;
        params.ptr[3] = held.addr(d.id());
        params.val[0] = rows as i64;
        d.0.device_written();
        library.launch(&format!("pl_lib_diagonal_{}", suffix(T::TYPE)), grid_for(rows), BLOCK, 0, &params)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Access, Backend, Runtime};

    /// The parallel table is the serial one: per nonzero, its entries in
    /// entry order, entries not owned left out.
    #[test]
    fn the_contribution_table_lists_each_nonzeros_entries_in_order() {
        let nnz = 1000;
        let mut s = 12345u64;
        let positions: Vec<u32> = (0..50_000)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                if s % 11 == 5 {
                    super::NOT_OWNED
                } else {
                    (s % nnz as u64) as u32
                }
            })
            .collect();
        let (offsets, contributions) = super::contribution_table(&positions, nnz, "test").unwrap();
        let mut want: Vec<Vec<u32>> = vec![Vec::new(); nnz];
        for (i, &p) in positions.iter().enumerate() {
            if p != super::NOT_OWNED {
                want[p as usize].push(i as u32);
            }
        }
        assert_eq!(offsets.len(), nnz + 1);
        for (k, w) in want.iter().enumerate() {
            assert_eq!(&contributions[offsets[k] as usize..offsets[k + 1] as usize], &w[..], "nonzero {k}");
        }
        assert_eq!(offsets[nnz] as usize, contributions.len());
    }

    #[crate::kernel]
    fn edge(a: &mut [[f64; 2]; 2]) {
        a[0][0] += 1.0;
        a[0][1] -= 1.0;
        a[1][0] -= 1.0;
        a[1][1] += 1.0;
    }

    /// The device tables of a dropped matrix's pattern go at the next
    /// insertion (they held the pattern alive, and its element matrices,
    /// for the runtime's life).
    #[test]
    fn device_tables_go_with_the_last_matrix_on_their_pattern() {
        // Also lazy: the trace once kept the records of matrix loops that
        // ran, and with them the pattern.
        for lazy in [false, true] {
            device_tables_go_with_their_matrix(Runtime::with_lazy(Backend::Emu, lazy).unwrap());
        }
    }

    /// A program that drops its mesh and matrix and declares them again
    /// under the same names (an adaptive solver's remesh) was refused the
    /// names on a device: the dropped matrix's tables held the loop's
    /// iteration set until the next matrix loop.
    #[test]
    fn a_mesh_declared_again_after_a_device_assembly_gets_its_names() {
        for lazy in [false, true] {
            let rt = Runtime::with_lazy(Backend::Emu, lazy).unwrap();
            for step in 0..3 {
                let nodes = rt.set("nodes", 4).unwrap();
                let edges = rt.set("edges", 3).unwrap();
                let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1, 1, 2, 2, 3]).unwrap();
                let a = rt.mat::<f64>("A", &rt.sparsity("s", &[(&e2n, &e2n)], (1, 1)).unwrap()).unwrap();
                rt.par_loop(edge::KERNEL, &edges, &[a.arg(&e2n, &e2n, Access::INC)]).unwrap();
                assert_eq!(
                    a.to_csr().unwrap().vals,
                    vec![1.0, -1.0, -1.0, 2.0, -1.0, -1.0, 2.0, -1.0, -1.0, 1.0],
                    "step {step}"
                );
            }
        }
    }

    fn device_tables_go_with_their_matrix(rt: Runtime) {
        let nodes = rt.set("nodes", 4).unwrap();
        let edges = rt.set("edges", 3).unwrap();
        let first = rt.map("first", &edges, &nodes, 2, vec![0, 1, 1, 2, 2, 3]).unwrap();
        let second = rt.map("second", &edges, &nodes, 2, vec![0, 2, 1, 3, 0, 3]).unwrap();
        let entries = |rt: &Runtime| {
            let d = &rt.matrices.device;
            (crate::sync::lock(&d.scatters).len(), crate::sync::lock(&d.patterns).len())
        };
        let x = rt.dat("x", &nodes, 1, vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let y = rt.dat("y", &nodes, 1, vec![0.0; 4]).unwrap();
        for (k, map) in [&first, &second].into_iter().enumerate() {
            let a = rt
                .mat::<f64>(&format!("A{k}"), &rt.sparsity(&format!("s{k}"), &[(map, map)], (1, 1)).unwrap())
                .unwrap();
            rt.par_loop(edge::KERNEL, &edges, &[a.arg(map, map, Access::INC)]).unwrap();
            rt.mult(&a, &x, &y).unwrap();
            // The matrix (and its pattern) is dropped at the end of the
            // iteration: the second one's insertions prune the first's.
            assert_eq!(entries(&rt), (1, 1), "matrix {k}");
            // The pruned tables' element matrices were freed, not pooled
            // (a pool keeps its buffers for the runtime's life).
            assert_eq!(rt.temporaries.held(), 0, "matrix {k}");
        }
        // The second matrix's element matrices were fresh: the first's
        // were never in the pool to take.
        assert_eq!(rt.trace_stats().temporaries_reused, 0);
        // Results stay right: the second matrix's product (edges 0-2, 1-3
        // and 0-3, each adding [[1, -1], [-1, 1]]).
        assert_eq!(y.values().unwrap(), vec![-5.0, -2.0, 2.0, 5.0]);
    }
}
