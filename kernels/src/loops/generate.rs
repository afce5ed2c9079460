//! Writing a loop's entries from its [`LoopSpec`]: the flat (direct and
//! atomic), coalesced and staged bodies, and the block reductions.

use std::fmt::Write as _;

use super::*;
use crate::types::Scalar;

fn ctype(s: Scalar) -> &'static str {
    s.cpp()
}

/// The parameter type the translated kernel expects, for a cast.
fn param_type(a: &ArgSpec, mutable: bool) -> String {
    let c = if mutable { "" } else { "const " };
    if a.nested {
        format!("{c}{} (*)[{}]", ctype(a.elem), a.cols)
    } else {
        format!("{c}{}*", ctype(a.elem))
    }
}

struct Writer {
    out: String,
    indent: usize,
}

impl Writer {
    fn line(&mut self, s: impl AsRef<str>) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(s.as_ref());
        self.out.push('\n');
    }
    fn open(&mut self, s: impl AsRef<str>) {
        self.line(s);
        self.indent += 1;
    }
    fn close(&mut self) {
        self.indent -= 1;
        self.line("}");
    }
}

/// Combines a reduction's value `v` into `acc`. Float MIN and MAX are
/// `fmin`/`fmax` (IEEE minNum/maxNum, as Rust's `f64::min`/`max`): a NaN
/// operand is ignored, two NaNs give NaN.
fn combine(mode: Mode, elem: Scalar, acc: &str, v: &str) -> String {
    let f32 = elem == Scalar::F32;
    match mode {
        Mode::Min if elem.is_float() => format!("{acc} = {}({acc}, {v});", if f32 { "fminf" } else { "fmin" }),
        Mode::Max if elem.is_float() => format!("{acc} = {}({acc}, {v});", if f32 { "fmaxf" } else { "fmax" }),
        Mode::Min => format!("if ({v} < {acc}) {acc} = {v};"),
        Mode::Max => format!("if ({v} > {acc}) {acc} = {v};"),
        _ => format!("{acc} += {v};"),
    }
}

/// The kernel calls for element `e` (one, or a fused launch's in order),
/// each followed (when its kernel can panic) by recording `e` in the panic
/// record. `call` holds the call arguments of every argument of `spec`.
fn call_line(spec: &LoopSpec, call: &[String], element: &str) -> String {
    let mut line = String::new();
    for c in spec.calls() {
        if !line.is_empty() {
            line.push(' ');
        }
        let _ = write!(line, "{}({});", c.kernel, call[c.args].join(", "));
        if c.panics {
            let _ = write!(line, " __pl_panicked_at({element});");
        }
    }
    line
}

/// The argument whose copy argument `a` uses: an earlier one of a fused
/// launch with the same datum, else `a` itself.
fn head(spec: &LoopSpec, a: usize) -> usize {
    spec.args[a].same_as.filter(|&h| h < a).unwrap_or(a)
}

/// Bytes of the locals an entry of `spec` keeps per thread (reduction
/// accumulators, private copies of written and vector arguments), for
/// sizing the emulated device's fiber stacks.
pub fn entry_frame_bytes(spec: &LoopSpec) -> usize {
    spec.args
        .iter()
        .map(|a| {
            let bytes = a.elem.bits() as usize / 8;
            match a.reach {
                Reach::Global if matches!(a.mode, Mode::Inc | Mode::Min | Mode::Max) => a.dim.saturating_mul(bytes),
                Reach::Indirect { .. } | Reach::Vector { .. } => a.rows.saturating_mul(a.cols).saturating_mul(bytes),
                _ => 0,
            }
        })
        .fold(0usize, usize::saturating_add)
}

/// Generates the entries of `spec`.
pub fn generate(spec: &LoopSpec) -> Result<Generated, String> {
    if let Some(why) = unsupported(spec) {
        return Err(format!("strategy {} cannot run loop `{}`: {why}", spec.strategy.name(), spec.kernel));
    }
    let nargs = spec.args.len();
    let mut layout = Layout { args: 0, maps: nargs, ..Layout::default() };
    let mut next = nargs + spec.maps.len();
    let mut slot = || {
        next += 1;
        next - 1
    };
    let reduced: Vec<usize> = (0..nargs)
        .filter(|&a| {
            spec.args[a].reach == Reach::Global && matches!(spec.args[a].mode, Mode::Inc | Mode::Min | Mode::Max)
        })
        .collect();
    for &a in &reduced {
        layout.partials.push((a, slot()));
    }
    let staged = spec.strategy.staged();
    if spec.strategy == Strategy::GlobalColour {
        layout.perm = Some(slot());
    }
    if staged {
        layout.blocks = Some([slot(), slot(), slot(), slot(), slot()]);
        for st in &spec.stages {
            layout.l2g.push([slot(), slot()]);
            layout.g2l.push(st.columns.iter().map(|_| slot()).collect());
        }
    }
    if next > MAX_PTRS {
        return Err(format!("loop `{}` needs {next} pointer slots, more than {MAX_PTRS}", spec.kernel));
    }

    let entry = format!("pl_entry_{}_{}", spec.name, spec.strategy.name().replace('-', "_"));
    let mut w = Writer { out: String::new(), indent: 0 };
    w.open(format!("PL_ENTRY({entry}) {{"));
    // Typed pointers, for what this strategy reads them for: INC globals
    // start from zero; staged pairs go through their first argument and
    // through the staging maps instead of the maps.
    for (a, arg) in spec.args.iter().enumerate() {
        let used = match arg.reach {
            Reach::Global => arg.mode != Mode::Inc,
            Reach::Index => false,
            // A fused launch's later argument of a staged datum uses the
            // earlier argument's copy.
            Reach::Direct => head(spec, a) == a || !coalesced_args(spec).contains(&head(spec, a)),
            Reach::Indirect { .. } | Reach::Vector { .. } => !staged || spec.pairs.iter().any(|p| p.arg == a),
        };
        if used {
            let t = ctype(arg.elem);
            w.line(format!("{t}* const d{a} = ({t}*)prm.ptr[{a}];"));
        }
    }
    if !staged {
        for (m, _) in spec.maps.iter().enumerate() {
            w.line(format!("const int* const m{m} = (const int*)prm.ptr[{}];", nargs + m));
        }
    }
    for &(a, s) in &layout.partials {
        let t = ctype(spec.args[a].elem);
        w.line(format!("{t}* const part{a} = ({t}*)prm.ptr[{s}];"));
    }
    // Reduction accumulators: INC from zero, MIN/MAX from the current value.
    for &a in &reduced {
        let arg = &spec.args[a];
        let t = ctype(arg.elem);
        w.line(format!("{t} acc{a}[{}];", arg.dim));
        let init = if arg.mode == Mode::Inc { format!("({t})0") } else { format!("d{a}[k]") };
        w.line(format!("for (int k = 0; k < {}; ++k) acc{a}[k] = {init};", arg.dim));
    }
    if staged {
        staged_body(spec, &layout, &mut w);
    } else {
        flat_body(spec, &layout, &mut w);
    }
    block_reduction(spec, &reduced, &mut w, staged);
    w.close();

    let finish = if reduced.is_empty() {
        None
    } else {
        let name = format!("{entry}_finish");
        // One block: thread t folds partials t, t + m, t + 2m, ... in order
        // (m = min(partials, threads)), then the block folds the m rows by
        // `tree_reduce` and thread 0 adds the result to the global's value.
        w.open(format!("PL_ENTRY({name}) {{"));
        w.line("PL_DYNAMIC_SHARED(pl_sh);");
        w.line(format!("const long long n = prm.val[{}];", val::PARTIALS));
        w.line("if (n <= 0) return;");
        w.line("const long long m = n < (long long)blockDim.x ? n : (long long)blockDim.x;");
        for &(a, s) in &layout.partials {
            let arg = &spec.args[a];
            let t = ctype(arg.elem);
            let dim = arg.dim;
            w.open("{");
            w.line(format!("{t}* const g{a} = ({t}*)prm.ptr[{a}];"));
            w.line(format!("const {t}* const p{a} = (const {t}*)prm.ptr[{s}];"));
            w.line(format!("{t}* const red = ({t}*)pl_sh;"));
            w.open("if ((long long)threadIdx.x < m) {");
            w.open(format!("for (int k = 0; k < {dim}; ++k) {{"));
            w.line(format!("{t} v = p{a}[threadIdx.x * {dim} + k];"));
            w.line(format!(
                "for (long long p = threadIdx.x + m; p < n; p += m) {{ const {t} x = p{a}[p * {dim} + k]; {} }}",
                combine(arg.mode, arg.elem, "v", "x")
            ));
            w.line(format!("red[threadIdx.x * {dim} + k] = v;"));
            w.close();
            w.close();
            tree_reduce(arg, "m", &mut w);
            w.open("if (threadIdx.x == 0) {");
            w.open(format!("for (int k = 0; k < {dim}; ++k) {{"));
            w.line(format!("{t} v = g{a}[k];"));
            w.line(format!("const {t} x = red[k];"));
            w.line(combine(arg.mode, arg.elem, "v", "x"));
            w.line(format!("g{a}[k] = v;"));
            w.close();
            w.close();
            w.line("__syncthreads();");
            w.close();
        }
        w.close();
        Some(name)
    };
    let mut source = LOOP_PRELUDE.to_string();
    source.push_str(&w.out);
    Ok(Generated { source, entry, finish, layout })
}

/// Declares per-element locals and builds the kernel's call arguments for
/// element `e` (non-staged), plus the statements after the call.
fn flat_args(spec: &LoopSpec, coalesced: &[usize], w: &mut Writer) -> (Vec<String>, Vec<String>) {
    let atomic = spec.strategy == Strategy::Atomic;
    let mut call = Vec::new();
    let mut after = Vec::new();
    for (a, arg) in spec.args.iter().enumerate() {
        let t = ctype(arg.elem);
        let writes = arg.mode != Mode::Read;
        let len = arg.rows * arg.cols;
        match arg.reach {
            Reach::Direct if coalesced.contains(&head(spec, a)) => {
                let h = head(spec, a);
                call.push(format!("({})(c{h} + threadIdx.x * {})", param_type(arg, writes), arg.dim))
            }
            Reach::Direct => call.push(format!("({})(d{a} + e * {})", param_type(arg, writes), arg.dim)),
            Reach::Global if matches!(arg.mode, Mode::Inc | Mode::Min | Mode::Max) => {
                call.push(format!("({})(acc{a})", param_type(arg, true)))
            }
            Reach::Global => call.push(format!("({})(d{a})", param_type(arg, false))),
            Reach::Index => {
                w.line(format!("const long long x{a} = (long long)e;"));
                call.push(format!("({})(&x{a})", param_type(arg, false)));
            }
            Reach::Indirect { map, column } => {
                let arity = spec.maps[map];
                let tgt = format!("(long long)m{map}[e * {arity} + {column}] * {}", arg.dim);
                if !writes {
                    call.push(format!("({})(d{a} + {tgt})", param_type(arg, false)));
                    continue;
                }
                w.line(format!("const long long t{a} = {tgt};"));
                if arg.mode == Mode::Inc {
                    w.line(format!("{t} l{a}[{len}] = {{}};"));
                } else {
                    w.line(format!("{t} l{a}[{len}]; for (int k = 0; k < {len}; ++k) l{a}[k] = d{a}[t{a} + k];"));
                }
                call.push(format!("({})(l{a})", param_type(arg, true)));
                let op = match (arg.mode, atomic) {
                    (Mode::Inc, true) => format!("atomicAdd(&d{a}[t{a} + k], l{a}[k]);"),
                    (Mode::Inc, false) => format!("d{a}[t{a} + k] += l{a}[k];"),
                    _ => format!("d{a}[t{a} + k] = l{a}[k];"),
                };
                after.push(format!("for (int k = 0; k < {len}; ++k) {op}"));
            }
            Reach::Vector { map } => {
                let arity = spec.maps[map];
                let (rows, cols) = (arg.rows, arg.cols);
                if arg.mode == Mode::Inc {
                    w.line(format!("{t} l{a}[{rows}][{cols}] = {{}};"));
                } else {
                    w.line(format!("{t} l{a}[{rows}][{cols}];"));
                    w.line(format!(
                        "for (int r = 0; r < {rows}; ++r) for (int k = 0; k < {cols}; ++k) l{a}[r][k] = d{a}[(long long)m{map}[e * {arity} + r] * {cols} + k];"
                    ));
                }
                call.push(format!("({})(l{a})", param_type(arg, writes)));
                if writes {
                    let target = format!("d{a}[(long long)m{map}[e * {arity} + r] * {cols} + k]");
                    let op = match (arg.mode, atomic) {
                        (Mode::Inc, true) => format!("atomicAdd(&{target}, l{a}[r][k]);"),
                        (Mode::Inc, false) => format!("{target} += l{a}[r][k];"),
                        _ => format!("{target} = l{a}[r][k];"),
                    };
                    after.push(format!("for (int r = 0; r < {rows}; ++r) for (int k = 0; k < {cols}; ++k) {op}"));
                }
            }
        }
    }
    (call, after)
}

/// Direct, Atomic and GlobalColour: a grid-stride loop.
fn flat_body(spec: &LoopSpec, layout: &Layout, w: &mut Writer) {
    let (s, e) = (val::START, val::END);
    let coalesced = coalesced_args(spec);
    if !coalesced.is_empty() {
        return coalesced_body(spec, &coalesced, w);
    }
    if let Some(perm) = layout.perm {
        w.line(format!("const int* const perm = (const int*)prm.ptr[{perm}];"));
    }
    w.open(format!(
        "for (long long i = prm.val[{s}] + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < prm.val[{e}]; i += (long long)blockDim.x * gridDim.x) {{"
    ));
    w.line(if layout.perm.is_some() { "const long long e = perm[i];" } else { "const long long e = i;" });
    let (call, after) = flat_args(spec, &[], w);
    w.line(call_line(spec, &call, "e"));
    for s in after {
        w.line(s);
    }
    w.close();
}

/// Direct dats of several components that a direct loop moves through
/// shared memory, so that a warp's loads and stores are consecutive words.
fn coalesced_args(spec: &LoopSpec) -> Vec<usize> {
    if spec.strategy != Strategy::Direct {
        return Vec::new();
    }
    spec.args
        .iter()
        .enumerate()
        .filter(|&(i, a)| a.reach == Reach::Direct && a.dim > 1 && head(spec, i) == i)
        .map(|(i, _)| i)
        .collect()
}

/// Shared memory a loop's launch needs per block of `threads`: staging of
/// coalesced direct dats, and the reduction (which reuses the same space).
pub fn flat_shared_bytes(spec: &LoopSpec, threads: usize) -> usize {
    let staging: usize = coalesced_args(spec)
        .iter()
        .map(|&a| (threads * spec.args[a].dim * spec.args[a].elem.bits() as usize / 8).div_ceil(8) * 8)
        .sum();
    staging.max(reduction_shared_bytes(spec, threads))
}

/// A direct loop, blockDim elements at a time, with multi-component direct
/// dats copied through shared memory in consecutive words (OP2's scheme).
fn coalesced_body(spec: &LoopSpec, coalesced: &[usize], w: &mut Writer) {
    let (s, e) = (val::START, val::END);
    w.line("PL_DYNAMIC_SHARED(pl_sh);");
    w.line("long long sh_off = 0;");
    for &a in coalesced {
        let arg = &spec.args[a];
        let t = ctype(arg.elem);
        w.line(format!("{t}* const c{a} = ({t}*)(pl_sh + sh_off);"));
        w.line(format!("sh_off += pl_align8((long long)blockDim.x * {} * sizeof({t}));", arg.dim));
    }
    w.open(format!(
        "for (long long base = prm.val[{s}] + (long long)blockIdx.x * blockDim.x; base < prm.val[{e}]; base += (long long)blockDim.x * gridDim.x) {{"
    ));
    w.line(format!("const int n = (int)(prm.val[{e}] - base < (long long)blockDim.x ? prm.val[{e}] - base : (long long)blockDim.x);"));
    // A full block (every block but the last) loads every word of every
    // staged dat into registers before storing any into shared memory, so
    // that all of a thread's loads are in flight at once: a load-store loop
    // has one at a time, which left the H100's copy bandwidth half used.
    w.open("if (n == (int)blockDim.x) {");
    for &a in coalesced {
        let arg = &spec.args[a];
        w.line(format!("{} r{a}[{}];", ctype(arg.elem), arg.dim));
    }
    for &a in coalesced {
        let dim = spec.args[a].dim;
        w.line(format!(
            "PL_UNROLL for (int j = 0; j < {dim}; ++j) r{a}[j] = d{a}[base * {dim} + threadIdx.x + j * blockDim.x];"
        ));
    }
    for &a in coalesced {
        let dim = spec.args[a].dim;
        w.line(format!("PL_UNROLL for (int j = 0; j < {dim}; ++j) c{a}[threadIdx.x + j * blockDim.x] = r{a}[j];"));
    }
    w.close();
    w.open("else {");
    for &a in coalesced {
        let dim = spec.args[a].dim;
        w.line(format!("for (int k = threadIdx.x; k < n * {dim}; k += blockDim.x) c{a}[k] = d{a}[base * {dim} + k];"));
    }
    w.close();
    w.line("__syncthreads();");
    w.open("if ((int)threadIdx.x < n) {");
    // `e` for whatever is not staged here (scalar direct dats, maps).
    let needs_e = spec.args.iter().enumerate().any(|(a, arg)| match arg.reach {
        Reach::Direct => !coalesced.contains(&head(spec, a)),
        Reach::Indirect { .. } | Reach::Vector { .. } | Reach::Index => true,
        Reach::Global => false,
    });
    if needs_e || spec.may_panic() {
        w.line("const long long e = base + threadIdx.x;");
    }
    let (call, after) = flat_args(spec, coalesced, w);
    w.line(call_line(spec, &call, "e"));
    for s in after {
        w.line(s);
    }
    w.close();
    w.line("__syncthreads();");
    for &a in coalesced {
        let arg = &spec.args[a];
        // Written back when any argument using this copy writes.
        let written = spec.args.iter().enumerate().any(|(b, x)| head(spec, b) == a && x.mode != Mode::Read);
        if written {
            let dim = arg.dim;
            w.line(format!(
                "if (n == (int)blockDim.x) {{ PL_UNROLL for (int j = 0; j < {dim}; ++j) d{a}[base * {dim} + threadIdx.x + j * blockDim.x] = c{a}[threadIdx.x + j * blockDim.x]; }}"
            ));
            w.line(format!(
                "else {{ for (int k = threadIdx.x; k < n * {dim}; k += blockDim.x) d{a}[base * {dim} + k] = c{a}[k]; }}"
            ));
        }
    }
    w.line("__syncthreads();");
    w.close();
}

/// Staged and StagedAtomic: one block per mini-partition.
fn staged_body(spec: &LoopSpec, layout: &Layout, w: &mut Writer) {
    let atomic = spec.strategy == Strategy::StagedAtomic;
    let [bstart, blen, blist, nthr, thrcol] = layout.blocks.expect("staged layout");
    w.line(format!("const int* const blk_start = (const int*)prm.ptr[{bstart}];"));
    w.line(format!("const int* const blk_len = (const int*)prm.ptr[{blen}];"));
    w.line(format!("const int* const blk_list = (const int*)prm.ptr[{blist}];"));
    if !atomic {
        // Thread colours: StagedAtomic needs none.
        w.line(format!("const int* const blk_colours = (const int*)prm.ptr[{nthr}];"));
        w.line(format!("const int* const thr_colour = (const int*)prm.ptr[{thrcol}];"));
    }
    for (s, st) in spec.stages.iter().enumerate() {
        w.line(format!("const int* const l2g{s} = (const int*)prm.ptr[{}];", layout.l2g[s][0]));
        w.line(format!("const int* const l2g_off{s} = (const int*)prm.ptr[{}];", layout.l2g[s][1]));
        for (k, _) in st.columns.iter().enumerate() {
            w.line(format!(
                "const unsigned short* const g2l{s}_{k} = (const unsigned short*)prm.ptr[{}];",
                layout.g2l[s][k]
            ));
        }
    }
    w.line(format!("const int b = blk_list[prm.val[{}] + blockIdx.x];", val::BLOCK_LIST_OFFSET));
    w.line("const long long bstart = blk_start[b];");
    w.line("const int bn = blk_len[b];");
    w.line("PL_DYNAMIC_SHARED(pl_sh);");
    w.line("long long sh_off = 0;");
    // Shared arrays, one per pair, laid out in pair order.
    for (p, pair) in spec.pairs.iter().enumerate() {
        let arg = &spec.args[pair.arg];
        let t = ctype(arg.elem);
        let s = pair.stage;
        w.line(format!("const int n{p} = l2g_off{s}[b + 1] - l2g_off{s}[b];"));
        w.line(format!("const int* const l2g_b{p} = l2g{s} + l2g_off{s}[b];"));
        w.line(format!("{t}* const sh{p} = ({t}*)(pl_sh + sh_off);"));
        w.line(format!("sh_off += pl_align8((long long)n{p} * {} * sizeof({t}));", arg.dim));
    }
    // Stage in.
    for (p, pair) in spec.pairs.iter().enumerate() {
        let arg = &spec.args[pair.arg];
        let (a, dim) = (pair.arg, arg.dim);
        let load = if arg.mode == Mode::Inc {
            format!("({})0", ctype(arg.elem))
        } else {
            format!("d{a}[(long long)l2g_b{p}[i / {dim}] * {dim} + i % {dim}]")
        };
        w.line(format!("for (int i = threadIdx.x; i < n{p} * {dim}; i += blockDim.x) sh{p}[i] = {load};"));
    }
    w.line("__syncthreads();");
    // Elements, blockDim at a time. Statements per element: `prep`
    // (locals, gathers), the call, `after` (apply private copies).
    let mut prep: Vec<String> = Vec::new();
    let mut after = Vec::new();
    let mut call = Vec::new();
    for (a, arg) in spec.args.iter().enumerate() {
        let t = ctype(arg.elem);
        let writes = arg.mode != Mode::Read;
        let len = arg.rows * arg.cols;
        let g2l = |col: usize| -> String {
            let p = arg.pair.expect("staged indirect argument has a pair");
            let st = &spec.stages[spec.pairs[p].stage];
            let k = st.columns.iter().position(|&c| c == col).expect("column is staged");
            format!("g2l{}_{k}[e]", spec.pairs[p].stage)
        };
        match arg.reach {
            Reach::Direct => call.push(format!("({})(d{a} + e * {})", param_type(arg, writes), arg.dim)),
            Reach::Global if matches!(arg.mode, Mode::Inc | Mode::Min | Mode::Max) => {
                call.push(format!("({})(acc{a})", param_type(arg, true)))
            }
            Reach::Global => call.push(format!("({})(d{a})", param_type(arg, false))),
            Reach::Index => {
                prep.push(format!("const long long x{a} = (long long)e;"));
                call.push(format!("({})(&x{a})", param_type(arg, false)));
            }
            Reach::Indirect { column, .. } => {
                let p = arg.pair.expect("pair");
                let local = format!("(long long){} * {}", g2l(column), arg.dim);
                if !writes {
                    call.push(format!("({})(sh{p} + {local})", param_type(arg, false)));
                    continue;
                }
                if arg.mode == Mode::Inc {
                    prep.push(format!("{t} l{a}[{len}] = {{}};"));
                } else {
                    prep.push(format!(
                        "{t} l{a}[{len}]; for (int k = 0; k < {len}; ++k) l{a}[k] = sh{p}[{local} + k];"
                    ));
                }
                call.push(format!("({})(l{a})", param_type(arg, true)));
                let op = match (arg.mode, atomic) {
                    (Mode::Inc, true) => format!("atomicAdd(&sh{p}[{local} + k], l{a}[k]);"),
                    (Mode::Inc, false) => format!("sh{p}[{local} + k] += l{a}[k];"),
                    _ => format!("sh{p}[{local} + k] = l{a}[k];"),
                };
                after.push(format!("for (int k = 0; k < {len}; ++k) {op}"));
            }
            Reach::Vector { .. } => {
                let p = arg.pair.expect("pair");
                let (rows, cols) = (arg.rows, arg.cols);
                let rows_g2l: Vec<String> = (0..rows).map(|r| format!("(long long){} * {cols}", g2l(r))).collect();
                prep.push(format!("{t} l{a}[{rows}][{cols}]{};", if arg.mode == Mode::Inc { " = {}" } else { "" }));
                if arg.mode != Mode::Inc {
                    for (r, loc) in rows_g2l.iter().enumerate() {
                        prep.push(format!("for (int k = 0; k < {cols}; ++k) l{a}[{r}][k] = sh{p}[{loc} + k];"));
                    }
                }
                call.push(format!("({})(l{a})", param_type(arg, writes)));
                if writes {
                    for (r, loc) in rows_g2l.iter().enumerate() {
                        let op = match (arg.mode, atomic) {
                            (Mode::Inc, true) => {
                                format!("atomicAdd(&sh{p}[{loc} + k], l{a}[{r}][k]);")
                            }
                            (Mode::Inc, false) => format!("sh{p}[{loc} + k] += l{a}[{r}][k];"),
                            _ => format!("sh{p}[{loc} + k] = l{a}[{r}][k];"),
                        };
                        after.push(format!("for (int k = 0; k < {cols}; ++k) {op}"));
                    }
                }
            }
        }
    }
    let call = call_line(spec, &call, "e");
    // A mapped RW or WRITE argument must see earlier colours' writes: then
    // the whole element runs in its colour's turn. INC-only loops compute in
    // parallel and only apply increments colour by colour.
    let overwrite = spec
        .args
        .iter()
        .any(|a| !matches!(a.reach, Reach::Direct | Reach::Global) && matches!(a.mode, Mode::Write | Mode::ReadWrite));
    w.open("for (int i0 = 0; i0 < bn; i0 += blockDim.x) {");
    w.line("const int i = i0 + threadIdx.x;");
    w.line("const long long e = bstart + (i < bn ? i : 0);");
    if !(atomic || after.is_empty()) {
        w.line("const int col = i < bn ? thr_colour[e] : -1;");
    }
    if atomic || after.is_empty() {
        w.open("if (i < bn) {");
        for s in prep.iter().chain(std::iter::once(&call)).chain(&after) {
            w.line(s);
        }
        w.close();
        if atomic {
            w.line("__syncthreads();");
        }
    } else if overwrite {
        w.open("for (int c = 0; c < blk_colours[b]; ++c) {");
        w.open("if (col == c) {");
        for s in prep.iter().chain(std::iter::once(&call)).chain(&after) {
            w.line(s);
        }
        w.close();
        w.line("__syncthreads();");
        w.close();
    } else {
        for s in &prep {
            w.line(s);
        }
        w.open("if (i < bn) {");
        w.line(&call);
        w.close();
        w.open("for (int c = 0; c < blk_colours[b]; ++c) {");
        w.open("if (col == c) {");
        for s in &after {
            w.line(s);
        }
        w.close();
        w.line("__syncthreads();");
        w.close();
    }
    w.close();
    w.line("__syncthreads();");
    // Stage out: RW and WRITE write back, INC adds. Entities are unique
    // within one pair, but two pairs of one dat (two maps reaching it) may
    // share entities: their stage-outs are separated by a barrier, or two
    // threads of the block would add to one value at once (found on an H100;
    // the emulator runs a block's threads one after another).
    let mut written_dats: Vec<usize> = Vec::new();
    for (p, pair) in spec.pairs.iter().enumerate() {
        let arg = &spec.args[pair.arg];
        let (a, dim) = (pair.arg, arg.dim);
        let target = format!("d{a}[(long long)l2g_b{p}[i / {dim}] * {dim} + i % {dim}]");
        let op = match arg.mode {
            Mode::Read => continue,
            Mode::Inc => format!("{target} += sh{p}[i];"),
            _ => format!("{target} = sh{p}[i];"),
        };
        if written_dats.contains(&pair.dat) {
            w.line("__syncthreads();");
            written_dats.clear();
        }
        written_dats.push(pair.dat);
        w.line(format!("for (int i = threadIdx.x; i < n{p} * {dim}; i += blockDim.x) {op}"));
    }
}

/// Reduces every thread's accumulators into one partial result per block
/// through shared memory, by a tree of fixed shape (`tree_reduce`):
/// deterministic for a given block size, and log2(blockDim) steps instead of
/// one thread walking the block.
fn block_reduction(spec: &LoopSpec, reduced: &[usize], w: &mut Writer, staged: bool) {
    if reduced.is_empty() {
        return;
    }
    if !staged && coalesced_args(spec).is_empty() {
        w.line("PL_DYNAMIC_SHARED(pl_sh);");
    }
    for &a in reduced {
        let arg = &spec.args[a];
        let t = ctype(arg.elem);
        let dim = arg.dim;
        w.line("__syncthreads();");
        w.open("{");
        w.line(format!("{t}* const red = ({t}*)pl_sh;"));
        w.line(format!("for (int k = 0; k < {dim}; ++k) red[threadIdx.x * {dim} + k] = acc{a}[k];"));
        tree_reduce(arg, "blockDim.x", w);
        w.line(format!(
            "if (threadIdx.x == 0) for (int k = 0; k < {dim}; ++k) part{a}[(prm.val[{}] + blockIdx.x) * {dim} + k] = red[k];",
            val::PARTIAL_BASE
        ));
        w.close();
    }
}

/// Folds `red[0..count)` (rows of `arg.dim` values in shared memory, every
/// thread of the block present) into `red[0]`: at each step thread `t` below
/// the stride folds row `t + stride` into row `t`, the stride halving from the
/// largest power of two below `count`. The shape depends on `count` alone,
/// so the result is the same run to run. Ends with a barrier.
fn tree_reduce(arg: &ArgSpec, count: &str, w: &mut Writer) {
    let t = ctype(arg.elem);
    let dim = arg.dim;
    w.line("__syncthreads();");
    w.line(format!("unsigned int stride = 1; while (2 * stride < (unsigned int)({count})) stride *= 2;"));
    w.open("for (; stride > 0; stride /= 2) {");
    w.open(format!("if (threadIdx.x < stride && threadIdx.x + stride < (unsigned int)({count})) {{"));
    w.open(format!("for (int k = 0; k < {dim}; ++k) {{"));
    w.line(format!("{t} v = red[threadIdx.x * {dim} + k];"));
    w.line(format!("const {t} x = red[(threadIdx.x + stride) * {dim} + k];"));
    w.line(combine(arg.mode, arg.elem, "v", "x"));
    w.line(format!("red[threadIdx.x * {dim} + k] = v;"));
    w.close();
    w.close();
    w.line("__syncthreads();");
    w.close();
}

/// Shared memory a reduction needs per block of `threads`.
pub fn reduction_shared_bytes(spec: &LoopSpec, threads: usize) -> usize {
    spec.args
        .iter()
        .filter(|a| a.reach == Reach::Global && matches!(a.mode, Mode::Inc | Mode::Min | Mode::Max))
        .map(|a| threads * a.dim * a.elem.bits() as usize / 8)
        .max()
        .unwrap_or(0)
}

/// Prints a source with line numbers (for error messages).
pub fn numbered(source: &str) -> String {
    let mut s = String::new();
    for (i, l) in source.lines().enumerate() {
        let _ = writeln!(s, "{:5} {l}", i + 1);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loops::{ArgSpec, Call, PairSpec, Reach, StageSpec};

    /// One dat incremented through two maps: two staged pairs of one dat.
    fn two_maps_one_dat(strategy: Strategy) -> LoopSpec {
        let inc = |map| ArgSpec {
            reach: Reach::Indirect { map, column: 0 },
            mode: Mode::Inc,
            elem: Scalar::F64,
            dim: 1,
            rows: 1,
            nested: false,
            cols: 1,
            pair: Some(map),
            same_as: None,
        };
        LoopSpec {
            name: "two".into(),
            kernel: "pl_fn_two".into(),
            args: vec![inc(0), inc(1)],
            maps: vec![0, 1],
            pairs: vec![PairSpec { arg: 0, stage: 0, dat: 0 }, PairSpec { arg: 1, stage: 1, dat: 0 }],
            stages: vec![StageSpec { map: 0, columns: vec![0] }, StageSpec { map: 1, columns: vec![0] }],
            strategy,
            panics: false,
            fused: Vec::new(),
        }
    }

    #[test]
    fn stage_outs_of_one_dat_through_two_maps_are_separated_by_a_barrier() {
        for strategy in [Strategy::Staged, Strategy::StagedAtomic] {
            let source = generate(&two_maps_one_dat(strategy)).unwrap().source;
            let first = source.find("+= sh0[i];").expect("stage-out of pair 0");
            let second = source.find("+= sh1[i];").expect("stage-out of pair 1");
            assert!(
                source[first..second].contains("__syncthreads();"),
                "{strategy:?}: no barrier between the stage-outs:\n{}",
                &source[first..second]
            );
        }
    }

    /// Two direct loops fused: `a(x WRITE dim 2)`, then `b(x READ, y RW)`.
    fn fused_pair() -> LoopSpec {
        let direct = |mode, dim, same_as| ArgSpec {
            reach: Reach::Direct,
            mode,
            elem: Scalar::F64,
            dim,
            rows: 1,
            nested: false,
            cols: dim,
            pair: None,
            same_as,
        };
        let call = |kernel: &str, args| Call { kernel: kernel.into(), args, panics: false };
        LoopSpec {
            name: "a_and_b".into(),
            kernel: "pl_fused_a_and_b".into(),
            args: vec![direct(Mode::Write, 2, None), direct(Mode::Read, 2, Some(0)), direct(Mode::ReadWrite, 1, None)],
            maps: vec![],
            pairs: vec![],
            stages: vec![],
            strategy: Strategy::Direct,
            panics: false,
            fused: vec![call("pl_fn_a", 0..1), call("pl_fn_b", 1..3)],
        }
    }

    #[test]
    fn a_fused_entry_calls_each_kernel_in_turn_on_one_staged_copy() {
        let source = generate(&fused_pair()).unwrap().source;
        let a = source.find("pl_fn_a((double*)(c0 + threadIdx.x * 2));").expect(&source);
        let b = source.find("pl_fn_b((const double*)(c0 + threadIdx.x * 2), (double*)(d2 + e * 1));").expect(&source);
        assert!(a < b, "{source}");
        assert!(!source.contains("c1"), "the second argument of x staged apart:\n{source}");
        // Written back once, after both calls.
        assert_eq!(source.matches("d0[base * 2 + k] = c0[k]").count(), 1, "{source}");
    }

    #[test]
    fn fused_calls_must_cover_the_arguments_in_order_and_run_direct() {
        let mut spec = fused_pair();
        spec.fused[1].args = 2..3;
        assert!(generate(&spec).unwrap_err().contains("consecutive"));
        let mut spec = fused_pair();
        spec.fused[1].args = 1..2;
        assert!(generate(&spec).unwrap_err().contains("take 2 of the 3"));
        let mut spec = fused_pair();
        spec.strategy = Strategy::Staged;
        assert!(generate(&spec).unwrap_err().contains("direct loops only"));
    }

    /// A full block's thread loads every word of a coalesced dat before it
    /// stores any into shared memory (all its loads in flight at once).
    #[test]
    fn a_full_block_loads_coalesced_words_into_registers_first() {
        let g = generate(&fused_pair()).unwrap();
        let load = g.source.find("r0[j] = d0[base * 2 + threadIdx.x + j * blockDim.x]").expect("register loads");
        let store = g.source.find("c0[threadIdx.x + j * blockDim.x] = r0[j]").expect("shared stores");
        assert!(load < store, "{}", g.source);
        assert!(g.source.contains("PL_UNROLL"));
    }

    #[test]
    fn stage_outs_of_different_dats_need_no_barrier() {
        let mut spec = two_maps_one_dat(Strategy::Staged);
        spec.pairs[1].dat = 1;
        let source = generate(&spec).unwrap().source;
        let first = source.find("+= sh0[i];").unwrap();
        let second = source.find("+= sh1[i];").unwrap();
        assert!(!source[first..second].contains("__syncthreads();"));
    }
}
