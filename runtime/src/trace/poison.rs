//! Data left stale by a failed force. Issue 15's rule for faults is that
//! nothing recorded after a failing loop runs: those loops are discarded
//! (`Trace::discard_after`), so the data they would have written hold
//! values the program never meant anyone to see (an eager run would have
//! written them). Such data are *poisoned*: a host read of them, and a
//! later loop that reads them, is an [`Error::Discarded`] naming the failed
//! loop, until the program writes them whole again (`set_values`, or a
//! loop with a direct WRITE argument over their set), which cures them.
//! Without this, reading an unrelated dat after handling the failure gave
//! its old values as `Ok`.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{Error, Result};

/// The failure that poisoned a datum.
struct Cause {
    /// The failed loop's kernel (a fused group's `a+b`).
    kernel: String,
    /// Where its `par_loop` recorded it.
    location: String,
}

/// Poisoned data by id.
#[derive(Default)]
pub(super) struct Poisoned(HashMap<u64, Arc<Cause>>);

impl Poisoned {
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// Poisons `ids`, because loop `kernel` recorded at `location` failed.
    pub(super) fn add(&mut self, ids: impl IntoIterator<Item = u64>, kernel: &str, location: &str) {
        let cause = Arc::new(Cause { kernel: kernel.into(), location: location.into() });
        for id in ids {
            self.0.entry(id).or_insert_with(|| cause.clone());
        }
    }

    /// An [`Error::Discarded`] when datum `id` (called `name`) is
    /// poisoned; `by` says what wanted it ("a host read", a loop).
    pub(super) fn check(&self, id: u64, name: &str, by: impl FnOnce() -> String) -> Result<()> {
        match self.0.get(&id) {
            None => Ok(()),
            Some(c) => Err(Error::Discarded {
                name: name.into(),
                kernel: c.kernel.clone(),
                location: c.location.clone(),
                by: by(),
            }),
        }
    }

    /// Datum `id` was written whole: its values are the program's again.
    pub(super) fn cure(&mut self, id: u64) {
        self.0.remove(&id);
    }
}
