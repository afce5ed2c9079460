//! Building a [`Plan`]: blocks, staging maps and colours for one indirect loop.
//!
//! The algorithm only; the types it reads and returns are in `plan.rs`.

use crate::colour::{colour_blocks, colour_threads, ConflictTargets};
use crate::plan::{Block, ColouringKey, Columns, IndirectArg, PairInfo, Plan, PlanError, PlanRequest, Stage};
use crate::MAX_STAGED_PER_PAIR;

/// Upper bound of the bytes one element stages: every column of every pair.
fn staged_bytes_per_element(pairs: &[PairInfo], pair_columns: &[Vec<usize>]) -> usize {
    pairs.iter().zip(pair_columns).map(|(p, cols)| p.bytes_per_entity * cols.len()).sum()
}

/// Default elements per block for a budget: as many as fit, a multiple of 32
/// (a warp) when at least 32 fit, at most 1024 (a CUDA thread block).
fn default_part_size(budget: usize, per_element: usize) -> usize {
    if per_element == 0 {
        return 1024;
    }
    let fit = (budget / per_element).clamp(1, 1024);
    if fit >= 32 {
        fit / 32 * 32
    } else {
        fit
    }
}

/// A vector of `n` copies of `value`, or [`PlanError::TooLarge`] naming
/// `what` when it cannot be allocated.
pub(crate) fn filled<T: Clone>(what: &'static str, n: usize, value: T) -> Result<Vec<T>, PlanError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| PlanError::TooLarge { what, detail: format!("{n} entries cannot be allocated") })?;
    v.resize(n, value);
    Ok(v)
}

fn validate(request: &PlanRequest) -> Result<usize, PlanError> {
    let total = request.sections.iter().try_fold(0usize, |t, &s| t.checked_add(s)).ok_or_else(|| {
        PlanError::TooLarge { what: "iteration set", detail: format!("sections {:?} overflow usize", request.sections) }
    })?;
    for (a, arg) in request.args.iter().enumerate() {
        let needed = total.checked_mul(arg.arity).ok_or_else(|| PlanError::TooLarge {
            what: "map",
            detail: format!("argument {a}: {total} elements x arity {} overflow usize", arg.arity),
        })?;
        if arg.map.len() < needed {
            return Err(PlanError::MapLength { arg: a, len: arg.map.len(), needed });
        }
        if let Columns::One(c) = arg.columns {
            if c >= arg.arity {
                return Err(PlanError::Column { arg: a, column: c, arity: arg.arity });
            }
        }
        // Arguments on the same map (by slice and target size) are checked once.
        let seen = request.args[..a].iter().any(|b| {
            std::ptr::eq(b.map.as_ptr(), arg.map.as_ptr()) && b.map.len() == arg.map.len() && b.to_size == arg.to_size
        });
        if seen {
            continue;
        }
        if let Some(pos) = arg.map[..needed].iter().position(|&v| v < 0 || v as usize >= arg.to_size) {
            return Err(PlanError::MapValue {
                arg: a,
                element: pos / arg.arity.max(1),
                value: arg.map[pos],
                to_size: arg.to_size,
            });
        }
    }
    Ok(total)
}

/// Distinct (dat, map) pairs, the columns each stages, and each argument's pair.
fn collect_pairs(args: &[IndirectArg]) -> (Vec<PairInfo>, Vec<Vec<usize>>, Vec<usize>) {
    let mut pairs: Vec<PairInfo> = Vec::new();
    let mut columns: Vec<Vec<usize>> = Vec::new();
    let mut arg_pair = Vec::with_capacity(args.len());
    for arg in args {
        let p = match pairs.iter().position(|p| p.dat_id == arg.dat_id && p.map_id == arg.map_id) {
            Some(p) => p,
            None => {
                pairs.push(PairInfo {
                    dat_id: arg.dat_id,
                    map_id: arg.map_id,
                    stage: 0,
                    bytes_per_entity: arg.bytes_per_entity,
                });
                columns.push(Vec::new());
                pairs.len() - 1
            }
        };
        for c in arg.columns.iter(arg.arity) {
            if !columns[p].contains(&c) {
                columns[p].push(c);
            }
        }
        arg_pair.push(p);
    }
    for cols in &mut columns {
        cols.sort_unstable();
    }
    (pairs, columns, arg_pair)
}

/// The elements per block a staged plan of `args` gets by default, at most
/// `max`: as many as `shared_memory_bytes` stages (a multiple of 32, a warp,
/// when at least 32 fit). Devices pass their threads per block as `max`, so
/// that each thread has one element: larger blocks make the threads walk
/// several elements colour by colour, and on an H100 the airfoil's staged
/// iteration took 1.04 ms with the budget's blocks against 0.65 ms with
/// 256-element ones (2026-11-24, docs/PERFORMANCE.md).
///
/// ```
/// use parloop_planner::{staged_part_size, Columns, IndirectArg};
/// let map = [0, 1, 1, 2];
/// let arg = IndirectArg { map: &map, arity: 2, to_size: 3, columns: Columns::All,
///                         map_id: 1, dat_id: 2, bytes_per_entity: 32, conflicts: true };
/// // 64 bytes staged per element: 768 fit in 48 KiB, capped at 256.
/// assert_eq!(staged_part_size(&[arg], 48 * 1024, 256), 256);
/// assert_eq!(staged_part_size(&[arg], 4 * 1024, 256), 64);
/// ```
pub fn staged_part_size(args: &[IndirectArg], shared_memory_bytes: usize, max: usize) -> usize {
    let (pairs, columns, _) = collect_pairs(args);
    let fit = default_part_size(shared_memory_bytes, staged_bytes_per_element(&pairs, &columns));
    let capped = fit.min(max.max(1));
    if capped >= 32 {
        capped / 32 * 32
    } else {
        capped
    }
}

/// Elements per block: the request's, or as many as the budget stages.
fn part_size(request: &PlanRequest, pairs: &[PairInfo], pair_columns: &[Vec<usize>]) -> usize {
    let per_element = staged_bytes_per_element(pairs, pair_columns);
    request.part_size.unwrap_or_else(|| default_part_size(request.shared_memory_bytes, per_element)).max(1)
}

/// The key of `request`'s blocks and colours, for requests without staging
/// (`None` with staging: there blocks split by what each one stages).
/// Requests with equal keys get plans with identical blocks, block colours
/// and thread colours from [`build_plan`]; their pairs and stages (which
/// name the dats) may differ.
///
/// ```
/// use parloop_planner::{colouring_key, Columns, IndirectArg, PlanRequest};
/// let cell_to_node = [0, 1, 2, 1, 2, 3];
/// let arg = |dat_id, columns, conflicts| IndirectArg {
///     map: &cell_to_node, arity: 3, to_size: 4, columns, map_id: 1, dat_id,
///     bytes_per_entity: 8, conflicts,
/// };
/// let request = |args| PlanRequest { sections: &[2], args, part_size: Some(1),
///     shared_memory_bytes: 48 * 1024, staging: false, thread_colours: false };
/// // Coordinates read, a vector incremented...
/// let one = [arg(7, Columns::All, false), arg(8, Columns::All, true)];
/// // ... and another vector incremented column by column: the same colouring.
/// let other = [arg(9, Columns::One(0), true), arg(9, Columns::One(1), true), arg(9, Columns::One(2), true)];
/// assert_eq!(colouring_key(&request(&one)), colouring_key(&request(&other)));
/// # assert!(colouring_key(&request(&one)).is_some());
/// ```
pub fn colouring_key(request: &PlanRequest) -> Option<ColouringKey> {
    if request.staging {
        return None;
    }
    let (pairs, pair_columns, _) = collect_pairs(request.args);
    let mut dats: Vec<u64> = Vec::new();
    let mut groups: Vec<Vec<(u64, usize, usize, usize)>> = Vec::new();
    for arg in request.args.iter().filter(|a| a.conflicts) {
        let g = match dats.iter().position(|&d| d == arg.dat_id) {
            Some(g) => g,
            None => {
                dats.push(arg.dat_id);
                groups.push(Vec::new());
                dats.len() - 1
            }
        };
        groups[g].extend(arg.columns.iter(arg.arity).map(|c| (arg.map_id, arg.arity, c, arg.to_size)));
    }
    for g in &mut groups {
        g.sort_unstable();
        g.dedup();
    }
    groups.sort_unstable();
    groups.dedup();
    Some(ColouringKey {
        sections: request.sections.to_vec(),
        part_size: part_size(request, &pairs, &pair_columns),
        thread_colours: request.thread_colours,
        groups,
    })
}

/// Builds the plan for `request`.
///
/// Blocks are `part_size` elements (derived from the shared-memory budget
/// unless given) within each section; with staging, a block whose staged data
/// exceeds the budget or [`MAX_STAGED_PER_PAIR`] entities of one pair is split
/// in halves until it fits.
pub fn build_plan(request: &PlanRequest) -> Result<Plan, PlanError> {
    let total = validate(request)?;
    let (mut pairs, pair_columns, arg_pair) = collect_pairs(request.args);
    let part_size = part_size(request, &pairs, &pair_columns);

    // Stages: one per distinct (map, columns).
    let mut stages: Vec<Stage> = Vec::new();
    let mut stage_source: Vec<(usize, usize)> = Vec::new(); // (arity, arg index with that map)
    for (p, pair) in pairs.iter_mut().enumerate() {
        let cols = &pair_columns[p];
        let s = match stages.iter().position(|s| s.map_id == pair.map_id && &s.columns == cols) {
            Some(s) => s,
            None => {
                stages.push(Stage { map_id: pair.map_id, columns: cols.clone(), ..Stage::default() });
                let a = arg_pair.iter().position(|&ap| ap == p).expect("every pair has an argument");
                stage_source.push((request.args[a].arity, a));
                stages.len() - 1
            }
        };
        pair.stage = s;
    }

    // Blocks within sections.
    let mut blocks = Vec::new();
    let block_count = (total / part_size).saturating_add(request.sections.len());
    blocks.try_reserve_exact(block_count).map_err(|_| PlanError::TooLarge {
        what: "blocks",
        detail: format!("{block_count} blocks of {part_size} elements cannot be allocated"),
    })?;
    let mut start = 0;
    for (section, &size) in request.sections.iter().enumerate() {
        let end = start + size;
        let mut b = start;
        while b < end {
            let len = part_size.min(end - b);
            blocks.push(Block { start: b, len, section, colour: 0, thread_colours: 0, staged_bytes: 0 });
            b += len;
        }
        start = end;
    }

    if request.staging {
        blocks = match stage_blocks_parallel(request, &pairs, &mut stages, &stage_source, &blocks) {
            Some(staged) => staged,
            None => stage_blocks(request, &pairs, &mut stages, &stage_source, blocks)?,
        };
    }

    let targets = ConflictTargets::new(request.args);
    let mut thread_colour = Vec::new();
    if request.thread_colours {
        thread_colour = filled("thread colours", total, 0u32)?;
        colour_threads(&targets, &mut blocks, &mut thread_colour)?;
    }
    let (colours, core_colours) = colour_blocks(&targets, &mut blocks)?;

    let mut colour_offsets = vec![0usize; colours as usize + 1];
    for b in &blocks {
        colour_offsets[b.colour as usize + 1] += 1;
    }
    for c in 0..colours as usize {
        colour_offsets[c + 1] += colour_offsets[c];
    }
    let mut fill = colour_offsets.clone();
    let mut blocks_by_colour = filled("blocks by colour", blocks.len(), 0u32)?;
    for (i, b) in blocks.iter().enumerate() {
        blocks_by_colour[fill[b.colour as usize]] = i as u32;
        fill[b.colour as usize] += 1;
    }

    Ok(Plan {
        part_size,
        blocks,
        colours,
        core_colours,
        blocks_by_colour,
        colour_offsets,
        thread_colour,
        stages,
        pairs,
        arg_pair,
    })
}

/// Local-to-global list of one block for one stage, sorted and unique, using
/// `pos` (all `u32::MAX` on entry and exit) as a scratch membership array.
fn block_l2g(map: &[i32], arity: usize, columns: &[usize], block: &Block, pos: &mut [u32], out: &mut Vec<u32>) {
    out.clear();
    for e in block.start..block.start + block.len {
        for &c in columns {
            let t = map[e * arity + c] as usize;
            if pos[t] == u32::MAX {
                pos[t] = 0;
                out.push(t as u32);
            }
        }
    }
    out.sort_unstable();
    for &t in out.iter() {
        pos[t as usize] = u32::MAX;
    }
}

/// Builds staging maps, splitting blocks that exceed the budget.
fn stage_blocks(
    request: &PlanRequest,
    pairs: &[PairInfo],
    stages: &mut [Stage],
    stage_source: &[(usize, usize)],
    initial: Vec<Block>,
) -> Result<Vec<Block>, PlanError> {
    let total: usize = request.sections.iter().sum();
    let max_to = request.args.iter().map(|a| a.to_size).max().unwrap_or(0);
    let mut pos = filled("staging: target positions", max_to, u32::MAX)?;
    let mut lists: Vec<Vec<u32>> = vec![Vec::new(); stages.len()];
    for stage in stages.iter_mut() {
        stage.l2g.clear();
        stage.l2g_offsets = vec![0];
        stage.g2l = Vec::new();
        for _ in &stage.columns {
            stage.g2l.push(filled("staging: global-to-local maps", total, 0u16)?);
        }
    }
    let mut blocks = Vec::with_capacity(initial.len());
    // Pending blocks in reverse order so that pop() yields them in order.
    let mut pending: Vec<Block> = initial.into_iter().rev().collect();
    while let Some(mut block) = pending.pop() {
        for (s, stage) in stages.iter().enumerate() {
            let (arity, a) = stage_source[s];
            block_l2g(request.args[a].map, arity, &stage.columns, &block, &mut pos, &mut lists[s]);
        }
        let staged: usize = pairs.iter().map(|p| lists[p.stage].len() * p.bytes_per_entity).sum();
        let too_many = lists.iter().any(|l| l.len() > crate::MAX_STAGED_PER_PAIR);
        if staged > request.shared_memory_bytes || too_many {
            if block.len == 1 {
                return Err(PlanError::ElementTooLarge {
                    element: block.start,
                    bytes: staged,
                    budget: request.shared_memory_bytes,
                });
            }
            let half = block.len / 2;
            let second = Block { start: block.start + half, len: block.len - half, ..block };
            block.len = half;
            pending.push(second);
            pending.push(block);
            continue;
        }
        block.staged_bytes = staged;
        for (s, stage) in stages.iter_mut().enumerate() {
            let (arity, a) = stage_source[s];
            let map = request.args[a].map;
            let list = &lists[s];
            for (i, &t) in list.iter().enumerate() {
                pos[t as usize] = i as u32;
            }
            for (k, &c) in stage.columns.iter().enumerate() {
                let g2l = &mut stage.g2l[k];
                for e in block.start..block.start + block.len {
                    g2l[e] = pos[map[e * arity + c] as usize] as u16;
                }
            }
            for &t in list {
                pos[t as usize] = u32::MAX;
            }
            stage.l2g.extend_from_slice(list);
            stage.l2g_offsets.push(stage.l2g.len());
        }
        blocks.push(block);
    }
    debug_assert!(lists.iter().all(|l| l.len() <= MAX_STAGED_PER_PAIR));
    Ok(blocks)
}

/// The staging one worker did for a contiguous run of blocks.
struct StagedRun {
    /// Per stage: the run's local-to-global lists, concatenated.
    l2g: Vec<Vec<u32>>,
    /// Per stage: the length of each block's list.
    lens: Vec<Vec<usize>>,
    /// Per block: staged shared memory.
    staged_bytes: Vec<usize>,
}

/// Builds the staging maps with one worker per core, optimistically: when
/// some block exceeds the budget or the per-pair limit it returns `None`,
/// and the sequential path, which splits blocks, starts over. Without splits
/// both paths build identical plans.
fn stage_blocks_parallel(
    request: &PlanRequest,
    pairs: &[PairInfo],
    stages: &mut [Stage],
    stage_source: &[(usize, usize)],
    blocks: &[Block],
) -> Option<Vec<Block>> {
    let total: usize = request.sections.iter().sum();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    if workers < 2 || total < 100_000 || blocks.is_empty() {
        return None;
    }
    let max_to = request.args.iter().map(|a| a.to_size).max().unwrap_or(0);
    let stage_cols: Vec<(usize, Vec<usize>)> =
        stages.iter().enumerate().map(|(s, st)| (stage_source[s].0, st.columns.clone())).collect();
    let bytes_per_stage: Vec<usize> =
        (0..stages.len()).map(|s| pairs.iter().filter(|p| p.stage == s).map(|p| p.bytes_per_entity).sum()).collect();
    let runs: Vec<&[Block]> = blocks.chunks(blocks.len().div_ceil(workers)).collect();
    // Allocations that fail leave the work, and the error, to the
    // sequential path.
    for stage in stages.iter_mut() {
        stage.g2l = Vec::new();
        for _ in &stage.columns {
            stage.g2l.push(filled("staging: global-to-local maps", total, 0u16).ok()?);
        }
    }
    // g2l_runs[run][stage][column]: the run's element range of each g2l array.
    let mut g2l_runs: Vec<Vec<Vec<&mut [u16]>>> =
        (0..runs.len()).map(|_| (0..stages.len()).map(|_| Vec::new()).collect()).collect();
    for (s, stage) in stages.iter_mut().enumerate() {
        for col in stage.g2l.iter_mut() {
            let mut rest: &mut [u16] = col.as_mut_slice();
            let mut at = 0;
            for (r, run) in runs.iter().enumerate() {
                let end = run.last().map_or(at, |b| b.start + b.len);
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(end - at);
                g2l_runs[r][s].push(head);
                rest = tail;
                at = end;
            }
        }
    }
    let staged_runs: Vec<Option<StagedRun>> = std::thread::scope(|scope| {
        let handles: Vec<_> = runs
            .iter()
            .zip(g2l_runs)
            .map(|(run, mut g2l)| {
                let (stage_cols, bytes_per_stage) = (&stage_cols, &bytes_per_stage);
                // A worker that cannot be started (EAGAIN under a thread
                // or memory limit) is a `None`: the sequential path does
                // the work instead, to the same plan.
                std::thread::Builder::new().name("parloop-staging".into()).spawn_scoped(scope, move || {
                    let ns = stage_cols.len();
                    let mut pos = filled("staging: target positions", max_to, u32::MAX).ok()?;
                    let mut list = Vec::new();
                    let mut out = StagedRun {
                        l2g: vec![Vec::new(); ns],
                        lens: vec![Vec::new(); ns],
                        staged_bytes: Vec::with_capacity(run.len()),
                    };
                    let base = run[0].start;
                    for block in run.iter() {
                        let mut staged = 0;
                        for (s, (arity, columns)) in stage_cols.iter().enumerate() {
                            let map = request.args[stage_source[s].1].map;
                            block_l2g(map, *arity, columns, block, &mut pos, &mut list);
                            if list.len() > MAX_STAGED_PER_PAIR {
                                return None;
                            }
                            staged += bytes_per_stage[s] * list.len();
                            for (i, &t) in list.iter().enumerate() {
                                pos[t as usize] = i as u32;
                            }
                            for (k, &c) in columns.iter().enumerate() {
                                let g2l = &mut g2l[s][k];
                                for e in block.start..block.start + block.len {
                                    g2l[e - base] = pos[map[e * arity + c] as usize] as u16;
                                }
                            }
                            for &t in &list {
                                pos[t as usize] = u32::MAX;
                            }
                            out.l2g[s].extend_from_slice(&list);
                            out.lens[s].push(list.len());
                        }
                        if staged > request.shared_memory_bytes {
                            return None;
                        }
                        out.staged_bytes.push(staged);
                    }
                    Some(out)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.ok().and_then(|h| h.join().expect("a staging worker panicked"))).collect()
    });
    // Nothing is written unless every run fitted.
    let staged_runs: Vec<StagedRun> = staged_runs.into_iter().collect::<Option<_>>()?;
    let mut staged_blocks = blocks.to_vec();
    for stage in stages.iter_mut() {
        stage.l2g.clear();
        stage.l2g_offsets = vec![0];
    }
    let mut b = 0;
    for run in staged_runs {
        for (s, stage) in stages.iter_mut().enumerate() {
            stage.l2g.extend_from_slice(&run.l2g[s]);
            for &len in &run.lens[s] {
                let last = *stage.l2g_offsets.last().expect("starts with 0");
                stage.l2g_offsets.push(last + len);
            }
        }
        for bytes in run.staged_bytes {
            staged_blocks[b].staged_bytes = bytes;
            b += 1;
        }
    }
    Some(staged_blocks)
}
