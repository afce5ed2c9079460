//! The plan's data types: what the planner is asked ([`PlanRequest`],
//! [`IndirectArg`], [`Columns`]), what it returns ([`Plan`], [`Block`],
//! [`Stage`], [`PairInfo`]) and why it fails ([`PlanError`]), with their
//! accessors.
//!
//! They live apart from the algorithm that builds them (`build.rs`) so that
//! the colouring, the checker and the byte model can use them without
//! depending on the builder: `build` imports `colour`, and `colour` imports
//! only these types.

/// Which columns of a map an argument reads through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Columns {
    /// One column (`map[idx]`).
    One(usize),
    /// Every column (a vector argument).
    All,
}

impl Columns {
    /// The column indices this selects for a map of the given arity.
    pub fn iter(self, arity: usize) -> std::ops::Range<usize> {
        match self {
            Columns::One(c) => c..c + 1,
            Columns::All => 0..arity,
        }
    }
}

/// One indirect argument of a loop, as the planner sees it.
#[derive(Clone, Copy, Debug)]
pub struct IndirectArg<'a> {
    /// Map values, `arity` per element of the iteration set, each `< to_size`.
    pub map: &'a [i32],
    /// Number of columns of the map.
    pub arity: usize,
    /// Size of the map's target set.
    pub to_size: usize,
    /// The columns this argument reads through.
    pub columns: Columns,
    /// Identity of the map: arguments on the same map share staging indices.
    pub map_id: u64,
    /// Identity of the dat: conflicts are per dat, staging per (dat, map).
    pub dat_id: u64,
    /// Bytes of one staged entity (`dim * size_of::<T>()`).
    pub bytes_per_entity: usize,
    /// Whether the argument writes its targets (INC or RW): only those conflict.
    pub conflicts: bool,
}

/// What to plan.
#[derive(Clone, Copy, Debug)]
pub struct PlanRequest<'a> {
    /// Sizes of the consecutive sections of the iteration set to execute
    /// (core, owned, exec); blocks never straddle a boundary. The first section
    /// is the core: blocks of later sections never reuse its colours.
    pub sections: &'a [usize],
    /// The loop's indirect arguments.
    pub args: &'a [IndirectArg<'a>],
    /// Shared-memory budget of one block in bytes.
    pub shared_memory_bytes: usize,
    /// Elements per block; `None` derives it from the budget.
    pub part_size: Option<usize>,
    /// Whether to build local-to-global and global-to-local staging maps (GPU
    /// strategies need them; CPU backends only need blocks and colours).
    pub staging: bool,
    /// Whether to colour the elements inside each block
    /// ([`Plan::thread_colour`], [`Block::thread_colours`]): GPU strategies
    /// need them; CPU backends run a block's elements in order on one thread
    /// and skip them (a third of a host plan's time).
    pub thread_colours: bool,
}

/// Why a plan cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A single element stages more bytes than the shared-memory budget.
    #[error("element {element} stages {bytes} bytes, more than the shared-memory budget of {budget} bytes")]
    ElementTooLarge {
        /// The element.
        element: usize,
        /// Bytes it stages.
        bytes: usize,
        /// The budget.
        budget: usize,
    },
    /// A map value lies outside its target set (the runtime checks maps on
    /// creation, so this indicates a caller bug).
    #[error("argument {arg}: map value {value} at element {element} is outside 0..{to_size}")]
    MapValue {
        /// Index of the argument in the request.
        arg: usize,
        /// The element.
        element: usize,
        /// The value.
        value: i32,
        /// Target set size.
        to_size: usize,
    },
    /// The map is shorter than the iteration set needs.
    #[error("argument {arg}: map has {len} values, the iteration set needs {needed}")]
    MapLength {
        /// Index of the argument.
        arg: usize,
        /// Values present.
        len: usize,
        /// Values needed.
        needed: usize,
    },
    /// A column index is not below the map's arity.
    #[error("argument {arg}: column {column} is not below the arity {arity}")]
    Column {
        /// Index of the argument.
        arg: usize,
        /// The column.
        column: usize,
        /// The arity.
        arity: usize,
    },
    /// The request is too large to plan: its sizes overflow, or the
    /// plan's arrays cannot be allocated.
    #[error("{what}: {detail}")]
    TooLarge {
        /// What could not be sized or allocated.
        what: &'static str,
        /// The sizes involved.
        detail: String,
    },
}

/// A mini-partition: a contiguous range of the iteration set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// First element.
    pub start: usize,
    /// Number of elements.
    pub len: usize,
    /// Index of the section (in [`PlanRequest::sections`]) the block lies in.
    pub section: usize,
    /// Block colour: blocks of one colour never share an INC/RW target.
    pub colour: u32,
    /// Number of thread colours inside the block (0 when the request asked
    /// for none).
    pub thread_colours: u32,
    /// Shared memory the block's staged data needs, in bytes.
    pub staged_bytes: usize,
}

/// Staging indices shared by every (dat, map) pair on one map with the same
/// columns.
#[derive(Clone, Debug, Default)]
pub struct Stage {
    /// The map.
    pub map_id: u64,
    /// Columns staged (sorted).
    pub columns: Vec<usize>,
    /// Local-to-global indices of all blocks, concatenated: block `b` owns
    /// `l2g[l2g_offsets[b]..l2g_offsets[b + 1]]`, sorted and unique.
    pub l2g: Vec<u32>,
    /// Offsets into `l2g`, one per block plus one.
    pub l2g_offsets: Vec<usize>,
    /// Global-to-local indices: `g2l[k][e]` is the position of
    /// `map[e][columns[k]]` in its block's local-to-global list.
    pub g2l: Vec<Vec<u16>>,
}

impl Stage {
    /// The local-to-global list of block `b`.
    pub fn block_l2g(&self, b: usize) -> &[u32] {
        &self.l2g[self.l2g_offsets[b]..self.l2g_offsets[b + 1]]
    }
}

/// An execution plan for one indirect loop over some sections of a set.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Elements per block before any split.
    pub part_size: usize,
    /// Blocks in iteration order.
    pub blocks: Vec<Block>,
    /// Number of block colours.
    pub colours: u32,
    /// Number of colours used by blocks of the first (core) section; later
    /// sections' blocks use colours `>= core_colours`.
    pub core_colours: u32,
    /// Blocks grouped by colour: colour `c` runs
    /// `blocks_by_colour[colour_offsets[c]..colour_offsets[c + 1]]`.
    pub blocks_by_colour: Vec<u32>,
    /// Offsets into `blocks_by_colour`, one per colour plus one.
    pub colour_offsets: Vec<usize>,
    /// Thread colour of every element (relative to its block); empty when
    /// the request asked for none ([`PlanRequest::thread_colours`]).
    pub thread_colour: Vec<u32>,
    /// Distinct staging index sets (empty unless staging was requested).
    pub stages: Vec<Stage>,
    /// For every distinct (dat, map) pair, `(dat_id, map_id, stage index, bytes_per_entity)`.
    pub pairs: Vec<PairInfo>,
    /// For every argument of the request, its pair index.
    pub arg_pair: Vec<usize>,
}

/// A distinct (dat, map) pair of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairInfo {
    /// The dat.
    pub dat_id: u64,
    /// The map.
    pub map_id: u64,
    /// Index into [`Plan::stages`] (meaningful when staging was built).
    pub stage: usize,
    /// Bytes per staged entity.
    pub bytes_per_entity: usize,
}

impl Plan {
    /// Block indices of colour `c`.
    pub fn colour_blocks(&self, c: u32) -> &[u32] {
        let c = c as usize;
        &self.blocks_by_colour[self.colour_offsets[c]..self.colour_offsets[c + 1]]
    }

    /// Total number of elements planned.
    pub fn len(&self) -> usize {
        self.blocks.last().map_or(0, |b| b.start + b.len)
    }

    /// Whether the plan covers no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Largest staged shared memory of any block, in bytes.
    pub fn max_staged_bytes(&self) -> usize {
        self.blocks.iter().map(|b| b.staged_bytes).max().unwrap_or(0)
    }
}

/// What the blocks and colours of a plan without staging depend on, and
/// nothing else ([`colouring_key`](crate::colouring_key)): the sections,
/// the block size, whether threads are coloured, and the conflicting
/// targets as (map, arity, column, target set size) per written dat, not
/// the dats themselves, the kernel or the arguments that only read. Two
/// requests with equal keys get identical blocks and colours, so loops of
/// different shapes over one set and map (an element-matrix loop and a
/// load-vector loop) can share one colouring.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ColouringKey {
    pub(crate) sections: Vec<usize>,
    pub(crate) part_size: usize,
    pub(crate) thread_colours: bool,
    /// Per conflicting dat: its targets' (map id, arity, column, target
    /// size), sorted and unique; the groups sorted and unique (two dats
    /// reached through the same columns constrain the colouring alike).
    pub(crate) groups: Vec<Vec<(u64, usize, usize, usize)>>,
}
