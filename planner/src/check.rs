//! [`Plan::check`]: every invariant of a plan, verified from scratch.

use std::collections::HashMap;

use crate::plan::{Plan, PlanRequest};

impl Plan {
    /// Verifies every invariant of this plan against the request it was built
    /// from, and returns the first violation as a message.
    ///
    /// - blocks are non-empty, cover every element exactly once in order, and
    ///   never straddle a section boundary;
    /// - no two threads of one colour in one block, and no two blocks of one
    ///   colour, share an INC/RW target; blocks outside the core section do
    ///   not use core colours; `blocks_by_colour` lists every block once;
    /// - with staging: every local-to-global list is sorted, unique and at most
    ///   65535 long, `l2g[g2l]` reproduces the map, and each block's staged
    ///   bytes match its lists and fit the budget.
    pub fn check(&self, request: &PlanRequest) -> Result<(), String> {
        self.check_blocks(request)?;
        self.check_colours(request)?;
        if request.staging {
            self.check_staging(request)?;
        }
        Ok(())
    }

    fn check_blocks(&self, request: &PlanRequest) -> Result<(), String> {
        let total: usize = request.sections.iter().sum();
        let expected = if request.thread_colours { total } else { 0 };
        if self.thread_colour.len() != expected {
            return Err(format!("{} thread colours for {total} elements", self.thread_colour.len()));
        }
        let mut bounds = vec![0usize];
        for s in request.sections {
            bounds.push(bounds.last().unwrap() + s);
        }
        let mut next = 0;
        for (i, b) in self.blocks.iter().enumerate() {
            if b.len == 0 {
                return Err(format!("block {i} is empty"));
            }
            if b.start != next {
                return Err(format!("block {i} starts at {} instead of {next}", b.start));
            }
            let (lo, hi) = (bounds[b.section], bounds[b.section + 1]);
            if b.start < lo || b.start + b.len > hi {
                return Err(format!(
                    "block {i} ({}..{}) leaves its section {} ({lo}..{hi})",
                    b.start,
                    b.start + b.len,
                    b.section
                ));
            }
            next += b.len;
        }
        if next != total {
            return Err(format!("blocks cover {next} of {total} elements"));
        }
        Ok(())
    }

    fn check_colours(&self, request: &PlanRequest) -> Result<(), String> {
        let conflicting: Vec<_> = request.args.iter().filter(|a| a.conflicts).collect();
        let targets = |e: usize, f: &mut dyn FnMut(u64, i32)| {
            for a in &conflicting {
                for c in a.columns.iter(a.arity) {
                    f(a.dat_id, a.map[e * a.arity + c]);
                }
            }
        };
        // Threads inside each block (when coloured).
        for (i, b) in self.blocks.iter().enumerate().filter(|_| request.thread_colours) {
            let mut owner: HashMap<(u64, i32, u32), usize> = HashMap::new();
            for e in b.start..b.start + b.len {
                let c = self.thread_colour[e];
                if c >= b.thread_colours {
                    return Err(format!("element {e}: thread colour {c} >= block {i}'s {}", b.thread_colours));
                }
                let mut clash = None;
                targets(e, &mut |d, t| {
                    if let Some(&other) = owner.get(&(d, t, c)) {
                        if other != e {
                            clash = Some((other, d, t));
                        }
                    }
                    owner.insert((d, t, c), e);
                });
                if let Some((other, d, t)) = clash {
                    return Err(format!(
                        "block {i}: elements {other} and {e} share thread colour {c} and target {t} of dat {d}"
                    ));
                }
            }
        }
        // Blocks.
        let mut owner: HashMap<(u64, i32, u32), usize> = HashMap::new();
        for (i, b) in self.blocks.iter().enumerate() {
            if b.colour >= self.colours {
                return Err(format!("block {i}: colour {} >= {}", b.colour, self.colours));
            }
            if b.section != 0 && b.colour < self.core_colours {
                return Err(format!("non-core block {i} reuses core colour {}", b.colour));
            }
            if b.section == 0 && b.colour >= self.core_colours {
                return Err(format!("core block {i} has colour {} >= core colours", b.colour));
            }
            let mut clash = None;
            for e in b.start..b.start + b.len {
                targets(e, &mut |d, t| {
                    if let Some(&other) = owner.get(&(d, t, b.colour)) {
                        if other != i {
                            clash = Some((other, d, t));
                        }
                    }
                    owner.insert((d, t, b.colour), i);
                });
            }
            if let Some((other, d, t)) = clash {
                return Err(format!("blocks {other} and {i} share colour {} and target {t} of dat {d}", b.colour));
            }
        }
        let mut seen = vec![false; self.blocks.len()];
        for c in 0..self.colours {
            for &b in self.colour_blocks(c) {
                let b = b as usize;
                if b >= self.blocks.len() || seen[b] || self.blocks[b].colour != c {
                    return Err(format!("blocks_by_colour lists block {b} wrongly under colour {c}"));
                }
                seen[b] = true;
            }
        }
        if seen.iter().any(|s| !s) {
            return Err("blocks_by_colour misses a block".into());
        }
        Ok(())
    }

    fn check_staging(&self, request: &PlanRequest) -> Result<(), String> {
        for (a, arg) in request.args.iter().enumerate() {
            let pair = &self.pairs[self.arg_pair[a]];
            let stage = &self.stages[pair.stage];
            for c in arg.columns.iter(arg.arity) {
                let k = stage
                    .columns
                    .iter()
                    .position(|&sc| sc == c)
                    .ok_or_else(|| format!("argument {a}: column {c} is not staged"))?;
                for (i, b) in self.blocks.iter().enumerate() {
                    let l2g = stage.block_l2g(i);
                    for e in b.start..b.start + b.len {
                        let local = stage.g2l[k][e] as usize;
                        let want = arg.map[e * arg.arity + c];
                        if l2g.get(local).map(|&g| g as i32) != Some(want) {
                            return Err(format!(
                                "argument {a}, element {e}: l2g[g2l] = {:?}, map = {want}",
                                l2g.get(local)
                            ));
                        }
                    }
                }
            }
        }
        for (s, stage) in self.stages.iter().enumerate() {
            if stage.l2g_offsets.len() != self.blocks.len() + 1 {
                return Err(format!("stage {s}: {} offsets for {} blocks", stage.l2g_offsets.len(), self.blocks.len()));
            }
            for b in 0..self.blocks.len() {
                let l2g = stage.block_l2g(b);
                if l2g.len() > crate::MAX_STAGED_PER_PAIR {
                    return Err(format!("stage {s}, block {b}: {} staged entities", l2g.len()));
                }
                if l2g.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(format!("stage {s}, block {b}: l2g not sorted and unique"));
                }
            }
        }
        for (i, b) in self.blocks.iter().enumerate() {
            let staged: usize =
                self.pairs.iter().map(|p| self.stages[p.stage].block_l2g(i).len() * p.bytes_per_entity).sum();
            if staged != b.staged_bytes {
                return Err(format!("block {i}: staged_bytes {} but lists need {staged}", b.staged_bytes));
            }
            if staged > request.shared_memory_bytes {
                return Err(format!(
                    "block {i}: {staged} staged bytes exceed the budget {}",
                    request.shared_memory_bytes
                ));
            }
        }
        Ok(())
    }
}
