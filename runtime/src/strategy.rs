//! Increment strategies of device loops, in one place: what each does and
//! cannot do, `PARLOOP_STRATEGY`, the candidates worth trying for a loop
//! and the automatic choice among them. The code each strategy generates
//! lives with the loop generator (`parloop_kernels::loops`), which also
//! defines the enum (it is the generator's vocabulary).
//!
//! | strategy | increments | deterministic | cannot |
//! | --- | --- | --- | --- |
//! | `Direct` | none (no indirect writes) | yes | run a loop with indirect writes |
//! | `Staged` | shared-memory staging, thread colours | yes | |
//! | `StagedAtomic` | staging, shared-memory atomics | no | indirect WRITE or RW (overwrites are not additions) |
//! | `Atomic` | global atomics | no | indirect WRITE or RW |
//! | `GlobalColour` | elements coloured globally, a launch per colour | yes | |

use crate::arg::Arg;
use crate::config;
use crate::error::{Error, Result};
use crate::types::Access;

pub use parloop_kernels::loops::Strategy;

/// `PARLOOP_STRATEGY`: `None` for `auto` or unset.
pub(crate) fn from_env() -> Result<Option<Strategy>> {
    let Some(v) = config::var("PARLOOP_STRATEGY") else { return Ok(None) };
    match v.trim() {
        "auto" => Ok(None),
        "staged" => Ok(Some(Strategy::Staged)),
        "staged-atomic" => Ok(Some(Strategy::StagedAtomic)),
        "atomic" => Ok(Some(Strategy::Atomic)),
        "global-colour" | "global-color" => Ok(Some(Strategy::GlobalColour)),
        _ => Err(Error::Env {
            var: "PARLOOP_STRATEGY",
            value: v,
            reason: "expected auto, staged, staged-atomic, atomic or global-colour".into(),
        }),
    }
}

/// Whether a loop writes through a map (then it needs an increment
/// strategy) and whether any such write overwrites (WRITE or RW: atomics
/// cannot do it).
fn indirect_writes(args: &[Arg]) -> (bool, bool) {
    let writes = crate::arg::writes_indirectly(args);
    let overwrites = args.iter().any(|a| a.is_indirect() && matches!(a.access, Access::Write | Access::ReadWrite));
    (writes, overwrites)
}

/// The strategies worth trying for a loop: `Direct` without indirect
/// writes; the requested one when given (or `Staged` when it would be
/// incorrect); otherwise every correct one, deterministic ones first, only
/// those when `deterministic`. `GlobalColour` leads: its plan (a colouring)
/// is the cheapest deterministic one to build, and a loop that runs once
/// builds only its first candidate's (`plan_cache::DeviceCandidate`).
pub(crate) fn candidates(args: &[Arg], requested: Option<Strategy>, deterministic: bool) -> Vec<Strategy> {
    let (writes, mapped_overwrite) = indirect_writes(args);
    if requested.is_some() || !writes {
        return vec![choose(args, requested)];
    }
    let mut all = vec![Strategy::GlobalColour, Strategy::Staged];
    if !deterministic && !mapped_overwrite {
        all.extend([Strategy::StagedAtomic, Strategy::Atomic]);
    }
    all
}

/// The strategy for a loop: `Direct` without indirect writes; otherwise the
/// requested one when it is correct for the loop, else `Staged`.
pub(crate) fn choose(args: &[Arg], requested: Option<Strategy>) -> Strategy {
    let (writes, mapped_overwrite) = indirect_writes(args);
    if !writes {
        return Strategy::Direct;
    }
    match requested {
        Some(Strategy::Atomic | Strategy::StagedAtomic) if mapped_overwrite => Strategy::Staged,
        Some(Strategy::Direct) | None => Strategy::Staged,
        Some(s) => s,
    }
}

/// The state of an automatic strategy choice: each candidate runs twice,
/// a warm-up and a timed trial, then the fastest trial's candidate runs
/// from then on. The warm-up takes what a first run costs and later runs
/// do not: the uploads of data the host wrote (the first candidate's first
/// run moves the whole mesh), a module's lazy loading at its first launch;
/// timed, these made the first candidate look slow.
#[derive(Debug, Default)]
pub(crate) struct AutoChoice {
    /// Seconds of each candidate's trial run, in candidate order.
    pub trials: Vec<f64>,
    /// The next candidate (`trials.len()`) has had its warm-up run.
    warmed_up: bool,
    /// The fastest candidate, once every one has run.
    pub chosen: Option<usize>,
}

impl AutoChoice {
    /// The candidate to run next out of `n`: each twice, then the fastest.
    pub fn next(&self, n: usize) -> usize {
        match self.chosen {
            Some(c) => c,
            None if n <= 1 => 0,
            None => self.trials.len(),
        }
    }

    /// Records a run of candidate `k` that took `seconds`: its warm-up, or
    /// its trial; chooses once all `n` have had a trial.
    pub fn record(&mut self, k: usize, seconds: f64, n: usize) {
        if self.chosen.is_some() || k != self.trials.len() {
            return;
        }
        if !self.warmed_up {
            self.warmed_up = true;
            return;
        }
        self.push(seconds, n);
    }

    /// Candidate `k` could not be prepared (its plan or code failed where
    /// another candidate's did not): it is never chosen.
    pub fn failed(&mut self, k: usize, n: usize) {
        if self.chosen.is_none() && k == self.trials.len() {
            self.push(f64::INFINITY, n);
        }
    }

    fn push(&mut self, seconds: f64, n: usize) {
        self.warmed_up = false;
        self.trials.push(seconds);
        if self.trials.len() == n {
            let best = (0..n).min_by(|&a, &b| self.trials[a].total_cmp(&self.trials[b])).expect("n > 0");
            self.chosen = Some(best);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_automatic_choice_runs_each_candidate_twice_then_keeps_the_fastest() {
        let mut auto = AutoChoice::default();
        // Each candidate's first run is a warm-up, however slow (the
        // first one's uploads made the first candidate lose).
        let runs = [(100.0, 3.0), (50.0, 1.0), (60.0, 2.0)];
        for (k, &(warm_up, trial)) in runs.iter().enumerate() {
            assert_eq!(auto.next(3), k);
            auto.record(k, warm_up, 3);
            assert_eq!(auto.next(3), k, "candidate {k} runs again after its warm-up");
            auto.record(k, trial, 3);
        }
        assert_eq!(auto.trials, [3.0, 1.0, 2.0]);
        assert_eq!(auto.chosen, Some(1));
        assert_eq!(auto.next(3), 1);
        auto.record(1, 10.0, 3);
        assert_eq!(auto.chosen, Some(1), "a choice is final");
        assert_eq!(AutoChoice::default().next(1), 0);
    }

    #[test]
    fn a_candidate_that_cannot_be_prepared_is_never_chosen() {
        let mut auto = AutoChoice::default();
        auto.record(0, 9.0, 2);
        auto.record(0, 9.0, 2);
        assert_eq!(auto.next(2), 1);
        auto.failed(1, 2);
        assert_eq!(auto.chosen, Some(0));
    }
}
