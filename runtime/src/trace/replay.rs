//! Replay of recurring loop sequences (issue 15, as OPS does).
//!
//! A *window* is what the trace sees between two moments it is empty: the
//! loops recorded and the forcing points met, in order. While the trace
//! builds its DAG it also writes the window down as *events* (each loop's
//! descriptor: kernel, set, exec halo, and per argument the datum, map,
//! column, access and dim; each force's tokens and whether it writes,
//! followed by its outcome). A window whose forces each ran nothing or
//! everything pending is kept as a *segment*, with the plans of its loops.
//!
//! When the trace is empty, the next loops are first put on a *tape*
//! instead of the DAG, as long as their events equal a segment's, word
//! for word (no hash: a collision would replay the wrong schedule). The
//! DAG is a function of the events alone (serial sets: the tokens follow
//! from the descriptors), so a force that equals the segment's has the
//! segment's outcome: nothing, or the whole tape, run oldest first with
//! the kept plans: no DAG, no token table, no plan lookup. Any event that
//! differs (or a drop of taped data, an error, a distributed set, a matrix
//! argument, the trace limit) *materialises* the tape: its loops go into
//! the DAG in order, exactly as if they had been recorded there, and the
//! full path takes over until the trace is empty again. So a replay never
//! runs less than the full path would, nor in another order: no host read
//! can see a stale value.
//!
//! A device backend can capture a replayed segment once (a CUDA graph of
//! its launches, keyed by the segment) and launch the graph on later
//! replays; the tape run goes through `Runtime::execute_planned` loop by
//! loop today, which is where such a capture would hook in.

use std::sync::Arc;
use std::time::Duration;

use crate::arg::{Arg, ArgKind};
use crate::par_loop::ParLoop;
use crate::plan_cache::LoopPlan;
use crate::strategy::Strategy;

use super::{Record, Token};

/// A loop's plan as the trace keeps it.
pub(super) type Plan = Option<(Arc<LoopPlan>, Duration)>;

/// Kept segments at most (a program whose windows never recur keeps the
/// newest).
const SEGMENTS: usize = 64;

/// Loops a window may have and still be learnt. A window ends only when
/// the trace is empty, and a program whose every host read leaves a loop
/// pending (it reads a residual, not the last loop's output) never empties
/// it: its window's events grew by 200 bytes a loop for the whole run
/// (hundreds of megabytes over a long one), and the final flush kept a
/// copy. Past this many loops the window is given up (its events freed):
/// the trace limit's worth, as long a window as a replay is worth keeping.
const WINDOW_LOOPS: usize = super::TRACE_LIMIT;

/// Event headers: the kind in the top bits, the count of what follows
/// (arguments, tokens) below.
const LOOP: u64 = 1 << 60;
const FORCE: u64 = 2 << 60;

/// A force's outcome, the words after its event: `NOTHING`, `ALL`, or
/// `SOME | n` followed by the window numbers of the `n` loops it ran.
const NOTHING: u64 = 0;
const ALL: u64 = 1;
const SOME: u64 = 3 << 60;

/// A loop's first event words: header, kernel, set, exec halo; `None`
/// over a distributed set (its tokens depend on halo state).
fn loop_words(lp: &ParLoop) -> Option<[u64; 4]> {
    let s = lp.set().sections();
    if s.owned + s.exec + s.non_exec > 0 {
        return None;
    }
    Some([
        LOOP | lp.args().len() as u64,
        lp.kernel() as *const _ as *const u8 as usize as u64,
        lp.set().id(),
        lp.sections().exec_halo as u64,
    ])
}

/// An argument's event words: datum, map, column, kind with access and
/// dim; `None` for a matrix (never replayed).
fn arg_words(a: &Arg) -> Option<[u64; 4]> {
    let (kind, map, column) = match &a.kind {
        ArgKind::Direct => (0, 0, 0),
        ArgKind::Indirect { map, column } => (1, map.id(), *column as u64),
        ArgKind::Vector { map } => (2, map.id(), 0),
        ArgKind::Global => (3, 0, 0),
        ArgKind::Mat(_) => return None,
        ArgKind::Index => (5, 0, 0),
    };
    Some([a.data_id(), map, column, kind | (a.access as u64) << 8 | (a.dim as u64) << 16])
}

/// A taped loop's place: its segment (by `Segment::id`) and its number
/// in the window.
pub(super) type Slot = (u64, usize);

/// What the segment gives a taped loop: its plan, its slot, and the
/// record of the slot's loop from the last time it ran, if kept.
pub(super) struct Kept {
    pub plan: Plan,
    pub slot: Slot,
    pub record: Option<Record>,
}

/// A window that recurred-able: its events and its loops' plans.
struct Segment {
    /// Never reused (records name their segment by it).
    id: u64,
    words: Vec<u64>,
    plans: Vec<Plan>,
    /// Per loop of the window, the record of the loop that ran there last
    /// (taken by the next taped loop in that place: its events equal the
    /// segment's, so it is the same loop over the same data, and needs
    /// neither a new record nor the pool's comparison; see
    /// `State::record_for`).
    records: Vec<Option<Record>>,
    /// Plan settings it was learnt under (`set_part_size`,
    /// `set_strategy` change plans).
    settings: Settings,
}

/// What plans depend on besides the loop.
pub(super) type Settings = (Option<usize>, Option<Strategy>);

/// What a force in tape mode does.
pub(super) enum Decision {
    /// Not taping (or an empty tape): the full path.
    Full,
    /// The segment says this force runs nothing.
    Nothing,
    /// The segment says it runs the whole tape.
    All,
    /// The segment says it runs these taped loops (by their numbers in
    /// the window), oldest first.
    Some(Vec<u64>),
    /// Unknown: materialise the tape, then the full path.
    Materialise,
}

/// The replay state of a trace.
pub(super) struct Replay {
    /// Replay on (`Runtime::set_replay`, `PARLOOP_REPLAY`).
    pub enabled: bool,
    segments: Vec<Segment>,
    /// The window's events so far, while it can still become a segment.
    /// Empty in tape mode: there they are `segments[candidate]`'s first
    /// `pos` words and `taped` plans (no copy per taped loop; written out
    /// by `stop_taping`).
    words: Vec<u64>,
    plans: Vec<Plan>,
    /// Loops of the window so far, in tape mode.
    taped: usize,
    learning: bool,
    /// Tape mode: the loops of the window so far are on `tape`, matched
    /// against `segments[candidate]` up to word `pos`.
    taping: bool,
    candidate: usize,
    pos: usize,
    pub tape: Vec<(u64, Record)>,
    /// The sequence number of the window's first loop (loops of a window
    /// are numbered from it, in recording order).
    base: u64,
    scratch: Vec<u64>,
    settings: Settings,
    /// The next segment's id.
    next_id: u64,
}

impl Replay {
    pub(super) fn new(enabled: bool) -> Replay {
        Replay {
            enabled,
            segments: Vec::new(),
            words: Vec::new(),
            plans: Vec::new(),
            taped: 0,
            learning: enabled,
            taping: enabled,
            candidate: 0,
            pos: 0,
            tape: Vec::new(),
            base: 0,
            scratch: Vec::new(),
            settings: (None, None),
            next_id: 0,
        }
    }

    /// The trace is empty: a new window starts (taped, if replay is on).
    pub(super) fn window_start(&mut self, base: u64) {
        debug_assert!(self.tape.is_empty());
        self.base = base;
        self.words.clear();
        self.plans.clear();
        self.learning = self.enabled;
        self.taping = self.enabled;
        self.pos = 0;
        self.taped = 0;
    }

    /// Whether loops are going on the tape now (not the DAG).
    pub(super) fn taping(&self) -> bool {
        self.taping
    }

    /// Encodes `lp` into `scratch`; `false` if it can never be replayed
    /// (a distributed set, whose tokens depend on halo state; a matrix).
    fn encode_loop(&mut self, lp: &ParLoop) -> bool {
        let Some(head) = loop_words(lp) else { return false };
        let w = &mut self.scratch;
        w.clear();
        w.extend_from_slice(&head);
        for a in lp.args() {
            let Some(words) = arg_words(a) else { return false };
            w.extend_from_slice(&words);
        }
        true
    }

    /// Encodes a force (`None`: everything) into `scratch`.
    fn encode_force(&mut self, tokens: Option<(&[Token], bool)>) {
        let w = &mut self.scratch;
        w.clear();
        match tokens {
            None => w.extend([FORCE, 2]),
            Some((t, write)) => {
                w.push(FORCE | t.len() as u64);
                w.push(write as u64);
                w.extend_from_slice(t);
            }
        }
    }

    /// Whether `segments[i]` continues the window with `scratch` at `pos`
    /// (tape mode: the window so far is the candidate's first `pos` words).
    fn continues(&self, i: usize, pos: usize) -> bool {
        let seg = &self.segments[i];
        seg.settings == self.settings
            && seg.words.len() >= pos + self.scratch.len()
            && (pos == 0 || seg.words[..pos] == self.segments[self.candidate].words[..pos])
            && seg.words[pos..pos + self.scratch.len()] == self.scratch[..]
    }

    /// Finds the segment continuing the window with `scratch`: the
    /// candidate, else any other (a window may share a prefix with several).
    fn matching(&mut self) -> bool {
        let pos = self.pos;
        let seg = &self.segments.get(self.candidate);
        let fast = seg.is_some_and(|s| {
            s.words.len() >= pos + self.scratch.len() && s.words[pos..pos + self.scratch.len()] == self.scratch[..]
        });
        if fast && (pos > 0 || self.segments[self.candidate].settings == self.settings) {
            return true;
        }
        match (0..self.segments.len()).find(|&i| self.continues(i, pos)) {
            Some(i) => {
                self.candidate = i;
                true
            }
            None => false,
        }
    }

    /// A loop is recorded. In tape mode: `Some(kept)` if it matches the
    /// segment (put it on the tape with that plan, no lookup), `None` if
    /// the tape must be materialised first. Out of tape mode, `None` too
    /// (the caller records it in the DAG and calls [`Replay::learnt_loop`]).
    pub(super) fn on_loop(&mut self, lp: &ParLoop, settings: impl FnOnce() -> Settings) -> Option<Kept> {
        if !self.taping && !self.learning {
            // Nothing to match or learn (replay off, or a window that
            // cannot be kept): no encoding.
            return None;
        }
        if let Some(plan) = self.continue_candidate(lp) {
            return Some(plan);
        }
        if self.taping {
            return self.on_loop_slow(lp, settings);
        }
        // Learning only: write the loop's events down (`learnt_loop`).
        if !self.encode_loop(lp) {
            self.learning = false;
        }
        None
    }

    /// Tape mode past the window's first event: `lp` continues the
    /// candidate segment (the common case of a recurring window), compared
    /// word by word in place, without writing its events down first.
    pub(super) fn continue_candidate(&mut self, lp: &ParLoop) -> Option<Kept> {
        if !self.taping || self.pos == 0 {
            return None;
        }
        let seg = self.segments.get(self.candidate)?;
        let mut at = self.pos;
        let mut next = |words: [u64; 4]| {
            // Compared as arrays (inline; a slice comparison calls memcmp).
            let same = seg.words.get(at..at + 4).and_then(|w| <&[u64; 4]>::try_from(w).ok()) == Some(&words);
            at += 4;
            same
        };
        if !next(loop_words(lp)?) {
            return None;
        }
        for a in lp.args() {
            if !next(arg_words(a)?) {
                return None;
            }
        }
        self.pos = at;
        Some(self.take_slot())
    }

    /// The candidate segment's plan, slot and kept record for the loop
    /// just matched (the window's next); counts it taped.
    fn take_slot(&mut self) -> Kept {
        let k = self.taped;
        self.taped += 1;
        let seg = &mut self.segments[self.candidate];
        Kept { plan: seg.plans[k].clone(), slot: (seg.id, k), record: seg.records[k].take() }
    }

    /// Gives record `r` of a loop that ran back to its slot, if it has one
    /// whose segment is still kept and empty; otherwise returns it.
    pub(super) fn give_back(&mut self, r: Record) -> Option<Record> {
        let Some((id, k)) = r.slot else { return Some(r) };
        let seg = match self.segments.get_mut(self.candidate) {
            Some(s) if s.id == id => Some(s),
            _ => self.segments.iter_mut().find(|s| s.id == id),
        };
        match seg.and_then(|s| s.records.get_mut(k)) {
            Some(place @ None) => {
                *place = Some(r);
                None
            }
            _ => Some(r),
        }
    }

    /// As `on_loop` in tape mode, the slow way (the first loop of a
    /// window, or another segment than the candidate).
    fn on_loop_slow(&mut self, lp: &ParLoop, settings: impl FnOnce() -> Settings) -> Option<Kept> {
        let replayable = self.encode_loop(lp);
        if !replayable {
            self.learning = false;
            return None;
        }
        if self.pos == 0 {
            self.settings = settings();
        }
        if !self.matching() {
            return None;
        }
        // The loop's number in the window (not the tape's length: partial
        // forces take loops off the tape).
        self.pos += self.scratch.len();
        Some(self.take_slot())
    }

    /// Out of tape mode: the loop encoded by the last `on_loop` went into
    /// the DAG with `plan`.
    pub(super) fn learnt_loop(&mut self, plan: &Plan) {
        if self.learning && self.plans.len() >= WINDOW_LOOPS {
            self.spoil();
        }
        if self.learning {
            self.words.extend_from_slice(&self.scratch);
            // Kept without its lookup time: a replay looks nothing up, and
            // the profile would add the learning loop's planning time once
            // per replay (1000 replays of a 0.1 ms plan: 0.1 s of
            // "planning" in a 0.02 s run).
            self.plans.push(plan.as_ref().map(|(p, _)| (p.clone(), Duration::ZERO)));
        }
    }

    /// Stops taping (the tape goes into the DAG): the window may still be
    /// learnt, from the events written so far.
    pub(super) fn stop_taping(&mut self) {
        if self.taping && self.pos > 0 {
            // Write out the events and plans the tape matched so far.
            let seg = &self.segments[self.candidate];
            self.words.clear();
            self.words.extend_from_slice(&seg.words[..self.pos]);
            self.plans.clear();
            self.plans.extend_from_slice(&seg.plans[..self.taped]);
        }
        self.taping = false;
    }

    /// A force in tape mode: what the segment says it does.
    pub(super) fn on_force(&mut self, tokens: Option<(&[Token], bool)>) -> Decision {
        if !self.taping || self.tape.is_empty() {
            return Decision::Full;
        }
        if tokens.is_none() {
            // Everything pending is the tape, in order: what the full path runs.
            return Decision::All;
        }
        self.encode_force(tokens);
        if !self.matching() {
            return Decision::Materialise;
        }
        let at = self.pos + self.scratch.len();
        let words = &self.segments[self.candidate].words;
        let outcome = words[at];
        let n = if outcome & SOME == SOME { (outcome & !SOME) as usize } else { 0 };
        self.pos = at + 1 + n;
        match outcome {
            NOTHING => Decision::Nothing,
            ALL => Decision::All,
            _ => Decision::Some(words[at + 1..at + 1 + n].iter().map(|&k| k + self.base).collect()),
        }
    }

    /// Out of tape mode: a force with `tokens` ran the loops `seqs` of
    /// the `pending` there were on the full path (call before the window
    /// restarts).
    pub(super) fn learnt_force(&mut self, tokens: Option<(&[Token], bool)>, seqs: &[u64], pending: usize) {
        if !self.learning || self.words.is_empty() {
            return;
        }
        self.encode_force(tokens);
        self.words.extend_from_slice(&self.scratch);
        if seqs.is_empty() {
            self.words.push(NOTHING);
        } else if seqs.len() == pending {
            self.words.push(ALL);
            self.keep();
        } else {
            self.words.push(SOME | seqs.len() as u64);
            let base = self.base;
            self.words.extend(seqs.iter().map(|&s| s - base));
        }
    }

    /// Takes the taped loops numbered `seqs` (sorted) off the tape.
    pub(super) fn take(&mut self, seqs: &[u64]) -> Vec<(u64, Record)> {
        let mut taken = Vec::with_capacity(seqs.len());
        let mut kept = Vec::with_capacity(self.tape.len() - seqs.len().min(self.tape.len()));
        for entry in self.tape.drain(..) {
            if seqs.binary_search(&entry.0).is_ok() {
                taken.push(entry);
            } else {
                kept.push(entry);
            }
        }
        self.tape = kept;
        taken
    }

    /// The window ended with the trace empty: keep it as a segment.
    fn keep(&mut self) {
        if !self.enabled || self.segments.iter().any(|s| s.words == self.words && s.settings == self.settings) {
            return;
        }
        if self.segments.len() == SEGMENTS {
            // Its kept records hold weak references to data only: dropping
            // them here drops no user data.
            self.segments.remove(0);
            self.candidate = 0;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.segments.push(Segment {
            id,
            words: self.words.clone(),
            plans: self.plans.clone(),
            settings: self.settings,
            records: std::iter::repeat_with(|| None).take(self.plans.len()).collect(),
        });
    }

    /// The learning window cannot be kept (an error, the trace limit, its
    /// length): what was written of it goes.
    pub(super) fn spoil(&mut self) {
        self.learning = false;
        self.words = Vec::new();
        self.plans = Vec::new();
    }

    /// Events and plans held for the window being learnt.
    #[cfg(test)]
    pub(super) fn learning_len(&self) -> (usize, usize) {
        (self.words.len(), self.plans.len())
    }

    /// Moves every record kept in segments' places into `out`.
    pub(super) fn take_records(&mut self, out: &mut Vec<Record>) {
        out.extend(self.segments.iter_mut().flat_map(|s| &mut s.records).filter_map(Option::take));
    }

    /// Drops the records kept in segments' places that `gone` selects.
    pub(super) fn forget_records(&mut self, gone: impl Fn(&Record) -> bool) {
        for place in self.segments.iter_mut().flat_map(|s| &mut s.records) {
            if place.as_ref().is_some_and(&gone) {
                *place = None;
            }
        }
    }

    /// Whether a taped loop uses datum `id`.
    pub(super) fn tape_touches(&self, id: u64) -> bool {
        self.tape.iter().any(|(_, p)| p.args.iter().any(|a| a.id == id))
    }

    /// Kept segments (tests, the profile).
    pub(super) fn segments(&self) -> usize {
        self.segments.len()
    }
}
