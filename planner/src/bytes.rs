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

/// Distinct entities of one dat touched by its arguments: a bit per target
/// (an eighth of a `bool` per target, so that the marks of two million
/// vertices stay in L2), set by one worker per core over large sets.
fn touched_entities(set_size: usize, args: &[&ByteArg]) -> usize {
    let direct = args.iter().any(|a| matches!(a.kind, ByteArgKind::Direct));
    let mut words = 0;
    for a in args {
        if let ByteArgKind::Indirect { to_size, .. } = a.kind {
            words = words.max(to_size.div_ceil(64));
        }
    }
    let mark = |range: std::ops::Range<usize>| {
        let mut seen = vec![0u64; words];
        for a in args {
            if let ByteArgKind::Indirect { map, arity, columns, .. } = a.kind {
                for e in range.clone() {
                    for c in columns.iter(arity) {
                        let t = map[e * arity + c] as usize;
                        seen[t / 64] |= 1 << (t % 64);
                    }
                }
            }
        }
        seen
    };
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let seen = if words == 0 || workers < 2 || set_size < PARALLEL_FROM {
        mark(0..set_size)
    } else {
        let per = set_size.div_ceil(workers);
        let range = |w: usize| w * per..((w + 1) * per).min(set_size);
        let parts: Vec<Vec<u64>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|w| {
                    let mark = &mark;
                    std::thread::Builder::new().name("parloop-bytes".into()).spawn_scoped(scope, move || mark(range(w)))
                })
                .collect();
            // A worker that could not be started (EAGAIN under a thread or
            // memory limit) has its range marked here: the same count.
            handles
                .into_iter()
                .enumerate()
                .map(|(w, h)| match h {
                    Ok(h) => h.join().expect("a byte-count worker panicked"),
                    Err(_) => mark(range(w)),
                })
                .collect()
        });
        let mut parts = parts.into_iter();
        let mut seen = parts.next().unwrap_or_default();
        for part in parts {
            for (s, p) in seen.iter_mut().zip(part) {
                *s |= p;
            }
        }
        seen
    };
    let count = seen.iter().map(|w| w.count_ones() as usize).sum::<usize>();
    if direct {
        count.max(set_size)
    } else {
        count
    }
}

/// Elements from which [`touched_entities`] splits the work between cores.
const PARALLEL_FROM: usize = 1 << 16;

#[cfg(test)]
mod tests {
    use super::*;

    /// The parallel count equals a plain one (a set large enough to split).
    #[test]
    fn touched_entities_counts_each_target_once() {
        let n = 3 * PARALLEL_FROM + 7;
        // Targets 0..n/2 and a few out at the end, each reached several times.
        let map: Vec<i32> = (0..2 * n).map(|k| ((k * 7919) % (n / 2)) as i32 + (k % 3 == 0) as i32 * 3).collect();
        let to_size = n / 2 + 3;
        let arg = ByteArg {
            dat_id: 1,
            kind: ByteArgKind::Indirect { map: &map, arity: 2, to_size, columns: Columns::All, map_id: 1 },
            bytes_per_entity: 8,
            reads: true,
            writes: false,
        };
        let mut plain = vec![false; to_size];
        map.iter().for_each(|&t| plain[t as usize] = true);
        let want = plain.iter().filter(|&&b| b).count();
        assert_eq!(touched_entities(n, &[&arg]), want);
        let one = ByteArg {
            kind: ByteArgKind::Indirect { map: &map, arity: 2, to_size, columns: Columns::One(1), map_id: 1 },
            ..arg
        };
        let mut plain = vec![false; to_size];
        map.iter().skip(1).step_by(2).for_each(|&t| plain[t as usize] = true);
        assert_eq!(touched_entities(n, &[&one]), plain.iter().filter(|&&b| b).count());
    }
}
