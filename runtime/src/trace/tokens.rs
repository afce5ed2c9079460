//! Seed 000's read and write sets: the computations one loop becomes and
//! the tokens each reads and writes.

use std::collections::HashMap;

use smallvec::SmallVec;

use crate::arg::{Arg, ArgKind};
use crate::par_loop::ParLoop;
use crate::runtime::Runtime;
use crate::types::Access;

use super::{TraceStats, What};

/// A token: a datum's id and which part of it (`id << 3 | kind`).
pub(crate) type Token = u64;

const CORE: u64 = 0;
const OWNED: u64 = 1;
const HALOEXEC: u64 = 2;
const HALOIMPORT: u64 = 3;
const NET: u64 = 4;
const GLOBAL: u64 = 5;
const MAT: u64 = 6;

fn token(id: u64, kind: u64) -> Token {
    id << 3 | kind
}

/// The datum of token `t`, and whether `t` is its `NET` token.
pub(crate) fn datum(t: Token) -> (u64, bool) {
    (t >> 3, t & 7 == NET)
}

/// Every token of datum `id` a host access touches (all but `NET`).
pub(crate) fn data_tokens(id: u64) -> [Token; 6] {
    [CORE, OWNED, HALOEXEC, HALOIMPORT, GLOBAL, MAT].map(|k| token(id, k))
}

/// A section of the iteration set (seed 004's numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Section {
    Core,
    Owned,
    Exec,
}

impl Section {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Section::Core => "core",
            Section::Owned => "owned",
            Section::Exec => "exec",
        }
    }
}

/// Tokens of one computation without allocating (a loop of up to eight
/// arguments, one section): every recorded loop builds these.
pub(crate) type Tokens = SmallVec<[Token; 8]>;

/// One computation with its read and write sets.
pub(crate) struct Computation {
    pub what: What,
    pub reads: Tokens,
    pub writes: Tokens,
}

impl Computation {
    fn new(what: What) -> Computation {
        Computation { what, reads: Tokens::new(), writes: Tokens::new() }
    }

    /// Adds argument `a`'s tokens over `section`.
    fn arg(&mut self, a: &Arg, section: Section) {
        let id = a.data_id();
        let kinds: &[u64] = match (&a.kind, section) {
            (ArgKind::Index, _) => &[],
            (ArgKind::Global, _) => {
                let t = token(id, GLOBAL);
                if a.access == Access::Read {
                    self.reads.push(t);
                } else if section != Section::Exec {
                    // The exec halo is not counted in reductions.
                    self.reads.push(t);
                    self.writes.push(t);
                }
                return;
            }
            (ArgKind::Mat(_), _) => &[MAT],
            (ArgKind::Direct, Section::Core) => &[CORE],
            (ArgKind::Direct, Section::Owned) => &[OWNED],
            (ArgKind::Direct, Section::Exec) => &[HALOEXEC],
            (_, Section::Core) => &[CORE, OWNED],
            (_, Section::Owned) => &[CORE, OWNED, HALOEXEC],
            (_, Section::Exec) => &[CORE, OWNED, HALOEXEC, HALOIMPORT],
        };
        for &k in kinds {
            if a.access.reads() {
                self.reads.push(token(id, k));
            }
            if a.access.writes() {
                self.writes.push(token(id, k));
            }
        }
    }

    fn dedup(&mut self) {
        self.reads.sort_unstable();
        self.reads.dedup();
        self.writes.sort_unstable();
        self.writes.dedup();
    }
}

/// Whether argument `a` reads its dat's halo, so that the halo must be
/// exchanged first when stale: as `dist::Mpi::stale_reads` decides when
/// the loop runs (READ or RW, through a map, or directly where the exec
/// halo runs).
fn reads_halo(a: &Arg, exec_halo: bool) -> bool {
    let data = matches!(a.kind, ArgKind::Direct) || a.is_indirect();
    data && a.set.is_some() && matches!(a.access, Access::Read | Access::ReadWrite) && (a.is_indirect() || exec_halo)
}

/// A halo as the pending loops leave it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Halo {
    /// A pending loop writes the dat: stale after it.
    Written,
    /// A pending exchange refreshes it, no write since.
    Received,
}

/// Halo skipping (seed 000's future work, done at recording): which halos
/// the pending loops leave stale or refresh, in recording order, over what
/// the distribution knows of the loops already run. Every rank records the
/// same loops over the same staleness, so every rank skips the same
/// exchanges; the distribution, which decides when a loop runs, exchanges
/// exactly the halos recorded here (the same rule over the same order).
#[derive(Default)]
pub(crate) struct Halos {
    pending: HashMap<u64, Halo>,
    /// Halo skipping off: every halo a loop reads is exchanged in the DAG
    /// (`Runtime::set_halo_skipping(false)`, for the seed's figures).
    pub record_all: bool,
}

impl Halos {
    /// The trace ran or dropped every pending loop: the distribution's
    /// record is current again.
    pub(crate) fn clear(&mut self) {
        self.pending.clear();
    }

    /// The arguments of `lp` whose halos must be exchanged (one per dat, in
    /// argument order); counts the exchanges skipped and removed; records
    /// what the loop does to halos.
    fn exchanges(&mut self, rt: &Runtime, lp: &ParLoop, stats: &mut TraceStats) -> Vec<usize> {
        let args = lp.args();
        // Without a communicator (sets declared with sections: one rank's
        // view of a partitioned mesh) nothing knows the halos: every halo
        // counts as stale until a pending exchange refreshes it.
        let collective = rt.dist.collective();
        if collective && !lp.set().is_distributed() {
            // Every rank runs the loop whole: no exchange, no stale halos
            // (as `dist::Mpi`'s begin and end).
            return Vec::new();
        }
        let exec_halo = lp.sections().exec_halo;
        let mut out: Vec<usize> = Vec::new();
        let mut seen: Vec<u64> = Vec::new();
        for (i, a) in args.iter().enumerate() {
            let id = a.data_id();
            if !reads_halo(a, exec_halo) || seen.contains(&id) {
                continue;
            }
            seen.push(id);
            let stale = match &a.set {
                Some(s) if collective => rt.dist.halo_stale(s, id),
                Some(s) => Some(s.sections().exec + s.sections().non_exec > 0).filter(|&h| h),
                None => None,
            };
            let Some(stale) = stale else { continue };
            match (self.pending.get(&id), self.record_all) {
                (Some(Halo::Written), _) | (_, true) => out.push(i),
                (Some(Halo::Received), false) => stats.exchanges_removed += 1,
                (None, false) if stale => out.push(i),
                (None, false) => stats.exchanges_skipped += 1,
            }
        }
        for &i in &out {
            self.pending.insert(args[i].data_id(), Halo::Received);
        }
        for a in args.iter().filter(|a| a.access.writes() && !a.is_global()) {
            if a.set.as_ref().is_some_and(|s| s.is_distributed() || !collective) {
                self.pending.insert(a.data_id(), Halo::Written);
            }
        }
        out
    }
}

/// The computations of `lp` into `out` (emptied first; a vector the trace
/// keeps, so that the computations, each two inline token vectors, are
/// built in place and never moved), in the order `run.rs` runs them: halo
/// sends, the core section, halo receives, the owned section, the exec
/// halo, reductions. A loop without halo receives has one computation for
/// its core and owned sections (seed 000's `phi_expr[core,owned]`); a
/// serial run has only core sections and no halo or reduction
/// computations.
pub(crate) fn computations(
    rt: &Runtime,
    lp: &ParLoop,
    halo_state: &mut Halos,
    stats: &mut TraceStats,
    out: &mut Vec<Computation>,
) {
    let args = lp.args();
    let sections = lp.sections();
    let set = lp.set().sections();
    let distributed = set.owned + set.exec + set.non_exec > 0;
    out.clear();
    let mut halos = halo_state.exchanges(rt, lp, stats);
    if !distributed {
        halos.clear();
    }
    for &i in &halos {
        let id = args[i].data_id();
        let mut c = Computation::new(What::HaloSend { arg: i });
        c.reads.extend([token(id, CORE), token(id, OWNED)]);
        c.writes.push(token(id, NET));
        out.push(c);
    }
    let compute = |out: &mut Vec<Computation>, first: Section, last: Section| {
        // Room for every token without regrowing (up to four per argument
        // and section; a serial loop's one section: one per argument).
        let room = args.len() * if distributed { 4 } else { 1 };
        out.push(Computation {
            what: What::Compute { first, last },
            reads: Tokens::with_capacity(room),
            writes: Tokens::with_capacity(room),
        });
        let c = out.last_mut().expect("just pushed");
        for s in [Section::Core, Section::Owned, Section::Exec].into_iter().filter(|s| (first..=last).contains(s)) {
            for a in args {
                c.arg(a, s);
            }
        }
        c.dedup();
    };
    if !distributed {
        // A serial set is all core.
        compute(out, Section::Core, Section::Core);
    } else if halos.is_empty() {
        compute(out, Section::Core, Section::Owned);
    } else {
        compute(out, Section::Core, Section::Core);
        for &i in &halos {
            let id = args[i].data_id();
            let mut c = Computation::new(What::HaloRecv { arg: i });
            c.reads.push(token(id, NET));
            c.writes.extend([token(id, HALOEXEC), token(id, HALOIMPORT)]);
            out.push(c);
        }
        compute(out, Section::Owned, Section::Owned);
    }
    if sections.exec_halo && set.exec > 0 {
        compute(out, Section::Exec, Section::Exec);
    }
    if distributed {
        for (i, a) in args.iter().enumerate() {
            if a.is_global() && a.access.is_reduction() {
                let id = a.data_id();
                let mut begin = Computation::new(What::ReduceBegin { arg: i });
                begin.reads.push(token(id, GLOBAL));
                begin.writes.push(token(id, NET));
                out.push(begin);
                let mut end = Computation::new(What::ReduceEnd { arg: i });
                end.reads.push(token(id, NET));
                end.writes.push(token(id, GLOBAL));
                out.push(end);
            }
        }
    }
}
