//! The minimum-bytes model: what a loop must move if every datum it touches
//! is read and written exactly once. GB/s figures divide this by time.

use crate::plan::Columns;

/// How an argument reaches its data.
#[derive(Clone, Copy, Debug)]
pub enum ByteArgKind<'a> {
    /// One entity per element of the iteration set.
    Direct,
    /// Through columns of a map.
    Indirect {
        /// Map values, `arity` per element.
        map: &'a [i32],
        /// Columns of the map.
        arity: usize,
        /// Size of the target set.
        to_size: usize,
        /// Columns used.
        columns: Columns,
        /// Identity of the map (each map's values count once).
        map_id: u64,
    },
    /// A global: not counted (it is a handful of bytes).
    Global,
}

/// One argument for [`min_bytes`].
#[derive(Clone, Copy, Debug)]
pub struct ByteArg<'a> {
    /// Identity of the dat; arguments of the same dat are counted together.
    pub dat_id: u64,
    /// How the data is reached.
    pub kind: ByteArgKind<'a>,
    /// Bytes of one entity (`dim * size_of::<T>()`).
    pub bytes_per_entity: usize,
    /// Whether the loop reads the data (READ, RW, INC).
    pub reads: bool,
    /// Whether the loop writes the data (WRITE, RW, INC).
    pub writes: bool,
}

/// Minimum bytes moved by a loop over `set_size` elements: each distinct
/// entity of each dat once per direction (read, write), plus every map used
/// once (`arity * 4` bytes per element).
///
/// ```
/// use parloop_planner::{min_bytes, ByteArg, ByteArgKind};
/// // qold = q over 10 cells of 4 doubles: 320 bytes read + 320 written.
/// let q = ByteArg { dat_id: 1, kind: ByteArgKind::Direct, bytes_per_entity: 32, reads: true, writes: false };
/// let qold = ByteArg { dat_id: 2, kind: ByteArgKind::Direct, bytes_per_entity: 32, reads: false, writes: true };
/// assert_eq!(min_bytes(10, &[q, qold]), 640);
/// ```
pub fn min_bytes(set_size: usize, args: &[ByteArg]) -> u64 {
    let mut total = 0u64;
    let mut dats_done: Vec<u64> = Vec::new();
    let mut maps_done: Vec<u64> = Vec::new();
    for (i, arg) in args.iter().enumerate() {
        if let ByteArgKind::Indirect { arity, map_id, .. } = arg.kind {
            if !maps_done.contains(&map_id) {
                maps_done.push(map_id);
                total += (set_size * arity * 4) as u64;
            }
        }
        if matches!(arg.kind, ByteArgKind::Global) || dats_done.contains(&arg.dat_id) {
            continue;
        }
        dats_done.push(arg.dat_id);
        let same: Vec<&ByteArg> = args[i..].iter().filter(|a| a.dat_id == arg.dat_id).collect();
        let reads = same.iter().any(|a| a.reads);
        let writes = same.iter().any(|a| a.writes);
        let directions = u64::from(reads) + u64::from(writes);
        total += directions * touched_entities(set_size, &same) as u64 * arg.bytes_per_entity as u64;
    }
    total
}

/// Distinct entities of one dat touched by its arguments.
fn touched_entities(set_size: usize, args: &[&ByteArg]) -> usize {
    let direct = args.iter().any(|a| matches!(a.kind, ByteArgKind::Direct));
    let mut seen: Vec<bool> = Vec::new();
    let mut count = 0;
    for a in args {
        if let ByteArgKind::Indirect { map, arity, to_size, columns, .. } = a.kind {
            seen.resize(seen.len().max(to_size), false);
            for e in 0..set_size {
                for c in columns.iter(arity) {
                    let t = map[e * arity + c] as usize;
                    if !seen[t] {
                        seen[t] = true;
                        count += 1;
                    }
                }
            }
        }
    }
    if direct {
        count.max(set_size)
    } else {
        count
    }
}
