//! Two-level greedy colouring with 32-bit masks (seed 002).
//!
//! Every target entity of a conflicting (INC or RW) argument carries a mask of
//! the colours that already reference it. An item (a thread, or a whole
//! block) takes the lowest colour not in the union of its targets' masks, then
//! sets that colour in each of them. Items left over when all 32 bits are
//! taken are coloured in another pass, with fresh masks and colours offset by
//! 32, and so on.

use crate::plan::{Block, IndirectArg, PlanError};

/// The conflicting targets of a loop: for each conflicting argument column,
/// which mask array (one per dat) and which map column reaches it.
pub(crate) struct ConflictTargets<'a> {
    /// (mask group, map values, arity, column)
    columns: Vec<(usize, &'a [i32], usize, usize)>,
    /// Size of each mask group (the target set size of its dat).
    group_sizes: Vec<usize>,
}

impl<'a> ConflictTargets<'a> {
    pub(crate) fn new(args: &[IndirectArg<'a>]) -> Self {
        let mut dats: Vec<u64> = Vec::new();
        let mut group_sizes = Vec::new();
        let mut columns = Vec::new();
        for arg in args.iter().filter(|a| a.conflicts) {
            let group = match dats.iter().position(|&d| d == arg.dat_id) {
                Some(g) => g,
                None => {
                    dats.push(arg.dat_id);
                    group_sizes.push(arg.to_size);
                    dats.len() - 1
                }
            };
            group_sizes[group] = group_sizes[group].max(arg.to_size);
            for c in arg.columns.iter(arg.arity) {
                if !columns.iter().any(|&(g, m, _, col): &(usize, &[i32], usize, usize)| {
                    g == group && std::ptr::eq(m, arg.map) && col == c
                }) {
                    columns.push((group, arg.map, arg.arity, c));
                }
            }
        }
        ConflictTargets { columns, group_sizes }
    }

    fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// One zeroed mask per target of each group; [`PlanError::TooLarge`]
    /// when they cannot be allocated.
    fn masks(&self, what: &'static str) -> Result<Vec<Vec<u32>>, PlanError> {
        self.group_sizes.iter().map(|&n| crate::build::filled(what, n, 0u32)).collect()
    }

    /// Calls `f(group, target)` for every conflicting target of element `e`.
    #[inline]
    pub(crate) fn for_each(&self, e: usize, mut f: impl FnMut(usize, usize)) {
        for &(group, map, arity, c) in &self.columns {
            f(group, map[e * arity + c] as usize);
        }
    }
}

/// Colours the threads of every block; sets `Block::thread_colours`.
pub(crate) fn colour_threads(
    targets: &ConflictTargets,
    blocks: &mut [Block],
    colour: &mut [u32],
) -> Result<(), PlanError> {
    if targets.is_empty() {
        for b in blocks.iter_mut() {
            b.thread_colours = u32::from(b.len > 0);
        }
        return Ok(());
    }
    let mut masks = targets.masks("thread colours: masks of the conflicting targets")?;
    for block in blocks.iter_mut() {
        let range = block.start..block.start + block.len;
        for c in &mut colour[range.clone()] {
            *c = u32::MAX;
        }
        let mut remaining = block.len;
        let mut offset = 0u32;
        let mut used = 0u32;
        while remaining > 0 {
            for e in range.clone() {
                targets.for_each(e, |g, t| masks[g][t] = 0);
            }
            for e in range.clone() {
                if colour[e] != u32::MAX {
                    continue;
                }
                let mut mask = 0u32;
                targets.for_each(e, |g, t| mask |= masks[g][t]);
                if mask == u32::MAX {
                    continue;
                }
                let c = (!mask).trailing_zeros();
                colour[e] = offset + c;
                used = used.max(offset + c + 1);
                remaining -= 1;
                targets.for_each(e, |g, t| masks[g][t] |= 1 << c);
            }
            offset += 32;
        }
        block.thread_colours = used;
    }
    Ok(())
}

/// Colours blocks so that blocks of one colour share no conflicting target.
/// Blocks of section 0 (core) are coloured first; the others start at the
/// first colour after the core's. Returns (colours, core colours).
pub(crate) fn colour_blocks(targets: &ConflictTargets, blocks: &mut [Block]) -> Result<(u32, u32), PlanError> {
    let core: Vec<usize> = (0..blocks.len()).filter(|&b| blocks[b].section == 0).collect();
    let rest: Vec<usize> = (0..blocks.len()).filter(|&b| blocks[b].section != 0).collect();
    let mut masks = if targets.is_empty() {
        Vec::new()
    } else {
        targets.masks("block colours: masks of the conflicting targets")?
    };
    let core_colours = colour_group(targets, blocks, &core, 0, &mut masks, true);
    let colours = colour_group(targets, blocks, &rest, core_colours, &mut masks, false);
    Ok((colours.max(core_colours), core_colours))
}

/// Colours the blocks `group` with colours from `base`; returns one past the
/// highest colour used (or `base` for an empty group). `fresh`: the masks
/// are all zero, so the first pass need not clear its targets' masks (a
/// pass over every element's targets saved).
fn colour_group(
    targets: &ConflictTargets,
    blocks: &mut [Block],
    group: &[usize],
    base: u32,
    masks: &mut [Vec<u32>],
    fresh: bool,
) -> u32 {
    if targets.is_empty() {
        for &b in group {
            blocks[b].colour = base;
        }
        return if group.is_empty() { base } else { base + 1 };
    }
    let mut coloured = vec![false; group.len()];
    let mut remaining = group.len();
    let mut offset = base;
    let mut end = base;
    while remaining > 0 {
        if !(fresh && offset == base) {
            for &b in group {
                for e in blocks[b].start..blocks[b].start + blocks[b].len {
                    targets.for_each(e, |g, t| masks[g][t] = 0);
                }
            }
        }
        for (i, &b) in group.iter().enumerate() {
            if coloured[i] {
                continue;
            }
            let range = blocks[b].start..blocks[b].start + blocks[b].len;
            let mut mask = 0u32;
            for e in range.clone() {
                targets.for_each(e, |g, t| mask |= masks[g][t]);
            }
            if mask == u32::MAX {
                continue;
            }
            let c = (!mask).trailing_zeros();
            blocks[b].colour = offset + c;
            end = end.max(offset + c + 1);
            coloured[i] = true;
            remaining -= 1;
            for e in range {
                targets.for_each(e, |g, t| masks[g][t] |= 1 << c);
            }
        }
        offset += 32;
    }
    end
}
