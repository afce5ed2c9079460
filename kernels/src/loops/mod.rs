//! CUDA C++ for a whole loop: the `__global__` entry that runs a translated
//! kernel over a range of elements with one of the increment strategies
//! (DESIGN.md section 5, seed 002), and the entry that finishes global
//! reductions.
//!
//! Every entry takes one `pl_params` by value: `ptr[]` holds device
//! pointers, `val[]` integers, at slots described by [`Layout`]. The same
//! source compiles with NVRTC and, under [`crate::EMU_HEADER`], with the
//! host C++ compiler.
//!
//! This module holds the loop's description (`LoopSpec` and its parts, the
//! strategies, the parameter block and the prelude); `generate` writes the
//! entries from it.

mod generate;

pub use generate::{entry_frame_bytes, flat_shared_bytes, generate, numbered, reduction_shared_bytes};

use crate::types::Scalar;

/// Pointer slots in `pl_params`.
pub const MAX_PTRS: usize = 96;
/// Integer slots in `pl_params`.
pub const MAX_VALS: usize = 8;

/// `val[]` slots.
pub mod val {
    /// First element (or first index into the permutation).
    pub const START: usize = 0;
    /// One past the last.
    pub const END: usize = 1;
    /// Staged: first index into `blocks_by_colour` of this launch.
    pub const BLOCK_LIST_OFFSET: usize = 2;
    /// First partial-result slot of this launch (reductions).
    pub const PARTIAL_BASE: usize = 3;
    /// Finish entry: number of partial results.
    pub const PARTIALS: usize = 4;
}

/// How a loop's indirect increments are made race-free on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// No indirect writes: a grid-stride loop.
    Direct,
    /// Stage through shared memory, apply increments thread colour by
    /// thread colour, one launch per block colour. Deterministic.
    Staged,
    /// Stage through shared memory, shared-memory atomics.
    StagedAtomic,
    /// No staging, global atomics.
    Atomic,
    /// Elements coloured globally, one launch per colour through a
    /// permutation, no staging. Deterministic.
    GlobalColour,
}

impl Strategy {
    /// The name used by `PARLOOP_STRATEGY` and in profiles.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Direct => "direct",
            Strategy::Staged => "staged",
            Strategy::StagedAtomic => "staged-atomic",
            Strategy::Atomic => "atomic",
            Strategy::GlobalColour => "global-colour",
        }
    }

    /// Whether results are bitwise identical from run to run.
    pub fn deterministic(self) -> bool {
        matches!(self, Strategy::Direct | Strategy::Staged | Strategy::GlobalColour)
    }

    /// Whether the strategy uses the planner's staging maps.
    pub fn staged(self) -> bool {
        matches!(self, Strategy::Staged | Strategy::StagedAtomic)
    }
}

/// Access mode of a loop argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// READ
    Read,
    /// WRITE
    Write,
    /// RW
    ReadWrite,
    /// INC
    Inc,
    /// MIN (globals)
    Min,
    /// MAX (globals)
    Max,
}

/// How an argument reaches its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Entity `e` of a dat on the iteration set.
    Direct,
    /// Entity `map[e][column]`.
    Indirect {
        /// Index into [`LoopSpec::maps`].
        map: usize,
        /// Map column.
        column: usize,
    },
    /// Entities of every column of `map[e]`.
    Vector {
        /// Index into [`LoopSpec::maps`].
        map: usize,
    },
    /// A global.
    Global,
    /// The element's number (`const long long*` to a local holding `e`):
    /// the element-index argument. No data.
    Index,
}

/// One argument of a loop.
#[derive(Clone, Debug)]
pub struct ArgSpec {
    /// How it reaches its data.
    pub reach: Reach,
    /// Access mode.
    pub mode: Mode,
    /// Element type.
    pub elem: Scalar,
    /// Values per entity (for globals: all values).
    pub dim: usize,
    /// The kernel parameter's rows (vectors: the map's arity).
    pub rows: usize,
    /// The kernel parameter's values per row.
    pub cols: usize,
    /// Whether the kernel parameter is an array of rows (`[[T; M]; N]`,
    /// even with `N` = 1): passed as `T (*)[M]`, not `T*`.
    pub nested: bool,
    /// Staged strategies: index of the (dat, map) pair in [`LoopSpec::pairs`].
    pub pair: Option<usize>,
    /// Fused launches: an earlier argument of the launch that names the
    /// same datum. A direct argument then goes through that argument's copy
    /// in shared memory (when the entry stages it), so that a later kernel
    /// of the launch sees what an earlier one wrote. `None` otherwise.
    pub same_as: Option<usize>,
}

/// One kernel a fused launch calls per element ([`LoopSpec::fused`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The kernel's C++ name.
    pub kernel: String,
    /// Its arguments: a run of [`LoopSpec::args`].
    pub args: std::ops::Range<usize>,
    /// Whether it can report a panic (as [`LoopSpec::panics`]).
    pub panics: bool,
}

/// A staged (dat, map) pair: which stage's indices it uses.
#[derive(Clone, Debug)]
pub struct PairSpec {
    /// The first argument of the pair (its data pointer and mode are the pair's).
    pub arg: usize,
    /// Index into [`LoopSpec::stages`].
    pub stage: usize,
    /// Which dat: pairs with the same value stage the same dat through
    /// different maps (or columns), and their stage-outs must not overlap.
    pub dat: usize,
}

/// Staging indices shared by the pairs on one map with the same columns.
#[derive(Clone, Debug)]
pub struct StageSpec {
    /// Index into [`LoopSpec::maps`].
    pub map: usize,
    /// Columns staged, in the order of the plan's g2l arrays.
    pub columns: Vec<usize>,
}

/// A loop to generate code for.
#[derive(Clone, Debug)]
pub struct LoopSpec {
    /// Entry name part: a C identifier (the runtime passes the kernel's C++
    /// name without its `pl_fn_` prefix); entries are `pl_entry_{name}_{strategy}`.
    pub name: String,
    /// The kernel's C++ name.
    pub kernel: String,
    /// Arguments in kernel-parameter order.
    pub args: Vec<ArgSpec>,
    /// Arity of each map used.
    pub maps: Vec<usize>,
    /// Staged strategies: the pairs.
    pub pairs: Vec<PairSpec>,
    /// Staged strategies: the stages.
    pub stages: Vec<StageSpec>,
    /// The strategy.
    pub strategy: Strategy,
    /// Whether the kernel can report a panic (checked division, or a
    /// `PARLOOP_CHECK` build): each call is followed by recording its
    /// element in the prelude's `pl_error` when this thread panicked.
    pub panics: bool,
    /// A fused launch (the lazy trace's fusion of direct loops; direct
    /// strategy only): the kernels each element calls, in order, each on
    /// its run of `args` (the runs in order, covering `args`). Empty for a
    /// loop of one kernel: `kernel` on all of `args`.
    pub fused: Vec<Call>,
}

impl LoopSpec {
    /// The kernels each element calls, in order.
    pub fn calls(&self) -> Vec<Call> {
        if self.fused.is_empty() {
            vec![Call { kernel: self.kernel.clone(), args: 0..self.args.len(), panics: self.panics }]
        } else {
            self.fused.clone()
        }
    }

    /// Whether some kernel the entry calls can report a panic.
    pub fn may_panic(&self) -> bool {
        self.panics || self.fused.iter().any(|c| c.panics)
    }
}

/// Where the runtime puts what, in `pl_params.ptr[]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// Data of argument `a` (dat or global buffer) at `ptr[a]`.
    pub args: usize,
    /// Map `m` at `ptr[maps + m]`.
    pub maps: usize,
    /// Partial results of reduced argument `a`: `(a, slot)`.
    pub partials: Vec<(usize, usize)>,
    /// GlobalColour: the permutation (i32).
    pub perm: Option<usize>,
    /// Staged: block starts, lengths, block list by colour, per-block thread
    /// colour counts, per-element thread colours (all i32).
    pub blocks: Option<[usize; 5]>,
    /// Staged: per stage, the slot of its l2g (i32) and l2g offsets (i32).
    pub l2g: Vec<[usize; 2]>,
    /// Staged: per stage, the slots of its g2l arrays (u16), one per column.
    pub g2l: Vec<Vec<usize>>,
}

/// Generated code of a loop.
#[derive(Clone, Debug)]
pub struct Generated {
    /// CUDA C++: loop prelude, then the entries (the kernel module, with the
    /// translated kernel and its helpers, goes before).
    pub source: String,
    /// The loop entry.
    pub entry: String,
    /// The entry finishing reductions, when the loop reduces globals.
    pub finish: Option<String>,
    /// Parameter slots.
    pub layout: Layout,
}

/// Why a strategy cannot run a loop.
pub fn unsupported(spec: &LoopSpec) -> Option<String> {
    let mapped_write = spec
        .args
        .iter()
        .any(|a| !matches!(a.reach, Reach::Direct | Reach::Global) && matches!(a.mode, Mode::Write | Mode::ReadWrite));
    let indirect = spec
        .args
        .iter()
        .any(|a| matches!(a.reach, Reach::Indirect { .. } | Reach::Vector { .. }) && a.mode != Mode::Read);
    if !spec.fused.is_empty() {
        if spec.strategy != Strategy::Direct {
            return Some("a fused launch runs direct loops only".into());
        }
        let mut next = 0;
        for call in &spec.fused {
            if call.args.start != next || call.args.end < next || call.args.end > spec.args.len() {
                return Some(format!(
                    "the fused calls' arguments {:?} are not consecutive runs of the {} arguments",
                    call.args,
                    spec.args.len()
                ));
            }
            next = call.args.end;
        }
        if next != spec.args.len() {
            return Some(format!("the fused calls take {next} of the {} arguments", spec.args.len()));
        }
    }
    match spec.strategy {
        Strategy::Direct if indirect => Some("the loop writes through a map".into()),
        Strategy::Atomic | Strategy::StagedAtomic if mapped_write => {
            Some("atomics cannot make indirect WRITE or RW race-free".into())
        }
        _ => None,
    }
}

/// The loop-level prelude: `pl_params`, sized by [`MAX_PTRS`] and
/// [`MAX_VALS`], and the entry macro. Written with `{}` or `to_string()`.
pub const LOOP_PRELUDE: LoopPrelude = LoopPrelude;

/// The type of [`LOOP_PRELUDE`]: its text is made when written, so that the
/// C++ parameter block takes its sizes from the Rust constants.
#[derive(Clone, Copy, Debug)]
pub struct LoopPrelude;

impl std::fmt::Display for LoopPrelude {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const GUARD: &str = r#"// parloop loop prelude
#ifndef PARLOOP_LOOPS
#define PARLOOP_LOOPS
"#;
        const MACROS: &str = r#"#ifdef PARLOOP_EMU
#define PL_ENTRY(name) static void name##_body(const pl_params& prm); \
    extern "C" void name(const void* a) { name##_body(*(const pl_params*)a); } \
    static void name##_body(const pl_params& prm)
#define PL_DYNAMIC_SHARED(name) char* name = pl_emu_shared
#define PL_UNROLL
#else
#define PL_UNROLL _Pragma("unroll")
#define PL_ENTRY(name) extern "C" __global__ void name(const pl_params prm)
#define PL_DYNAMIC_SHARED(name) extern __shared__ __align__(16) char name[]
#endif
__device__ inline long long pl_align8(long long n) { return (n + 7) & ~7ll; }
/* CUDA has no atomicAdd for signed 64-bit integers (i64 INC under the
   atomic strategies): two's complement addition is the unsigned one. */
__device__ inline long long atomicAdd(long long* p, long long v) {
    return (long long)atomicAdd((unsigned long long*)p, (unsigned long long)v);
}
#endif
"#;
        writeln!(f, "{GUARD}struct pl_params {{ void* ptr[{MAX_PTRS}]; long long val[{MAX_VALS}]; }};")?;
        f.write_str(MACROS)
    }
}
