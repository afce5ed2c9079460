//! Host-side plan algorithms for `parloop` (DESIGN.md section 4, seed 002).
//!
//! This crate knows nothing about the runtime, devices or MPI: it takes plain
//! slices (map values) and descriptors, and returns plain data.
//!
//! - [`build_plan`]: mini-partitions (blocks) that never straddle section
//!   boundaries, per-block staging maps (local-to-global, global-to-local),
//!   and the two-level colouring with 32-bit masks; [`colouring_key`]: what
//!   a plan's blocks and colours depend on, so that callers can share them
//!   between loops.
//! - [`Plan::check`]: validates every invariant of a plan against its request.
//! - [`min_bytes`]: the minimum-bytes model used for GB/s figures.
//! - [`rcm_order`]: reverse Cuthill-McKee renumbering of a set through a map.
//!
//! ```
//! use parloop_planner::{build_plan, Columns, IndirectArg, PlanRequest};
//! // Four edges on a path of five nodes; each edge increments both its nodes.
//! let edge_to_node = [0, 1, 1, 2, 2, 3, 3, 4];
//! let res = IndirectArg {
//!     map: &edge_to_node, arity: 2, to_size: 5, columns: Columns::All,
//!     map_id: 1, dat_id: 7, bytes_per_entity: 8, conflicts: true,
//! };
//! let request = PlanRequest { sections: &[4], args: &[res], part_size: Some(2),
//!                             shared_memory_bytes: 48 * 1024, staging: true,
//!                             thread_colours: true };
//! let plan = build_plan(&request).unwrap();
//! plan.check(&request).unwrap();
//! assert_eq!(plan.blocks.len(), 2);
//! // The two blocks share node 2, so they get different colours.
//! assert_ne!(plan.blocks[0].colour, plan.blocks[1].colour);
//! ```

mod build;
mod bytes;
mod check;
mod colour;
mod plan;
mod rcm;

pub use build::{build_plan, colouring_key, staged_part_size};
pub use bytes::{min_bytes, ByteArg, ByteArgKind};
pub use plan::{Block, ColouringKey, Columns, IndirectArg, Plan, PlanError, PlanRequest, Stage};
pub use rcm::{bandwidth, rcm_order};

/// Largest number of entities one block may stage per (dat, map) pair: the
/// global-to-local indices are `u16`.
pub const MAX_STAGED_PER_PAIR: usize = u16::MAX as usize;
