//! Unique names: two live sets, maps or data (dats and globals share one
//! namespace) of one runtime never share a name, so that every message
//! naming an object is unambiguous (seed 003). A name is free again once
//! every handle of the object that held it is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use crate::error::{Error, Result};
use crate::sync::lock;

/// The namespaces: sets, maps, and dats with globals (both appear as the
/// data of a loop argument in messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Namespace {
    Set,
    Map,
    Data,
}

/// Whether the object that holds a name is still alive.
type Alive = Box<dyn Fn() -> bool + Send + Sync>;

/// The names a runtime has handed out.
#[derive(Default)]
pub(crate) struct Names {
    taken: Mutex<Taken>,
}

/// The names, and when to forget those of dropped objects next.
#[derive(Default)]
struct Taken {
    names: HashMap<(Namespace, String), Alive>,
    /// The table's length that triggers the next sweep: twice the live
    /// names after the last one (at least [`Taken::FIRST_SWEEP`]), so a
    /// program declaring fresh names forever (a solver's work vectors,
    /// `cg#17:r`) keeps a table of its live names, not of every name it
    /// ever used, at O(1) amortised per declaration.
    sweep_at: usize,
}

impl Taken {
    const FIRST_SWEEP: usize = 256;

    /// Forgets the names of dropped objects when the table has doubled.
    fn sweep(&mut self) {
        if self.names.len() >= self.sweep_at.max(Self::FIRST_SWEEP) {
            self.names.retain(|_, alive| alive());
            self.sweep_at = 2 * self.names.len();
        }
    }
}

impl Names {
    /// Declares `name` in `space`: runs `create` and records its object,
    /// or fails with [`Error::DuplicateName`] (without running `create`)
    /// while another live object holds the name. `what` names the kind of
    /// object for the message ("set", "dat", ...).
    pub(crate) fn declare<T: Send + Sync + 'static, R>(
        &self,
        space: Namespace,
        what: &'static str,
        name: &str,
        create: impl FnOnce() -> Result<R>,
        inner: impl FnOnce(&R) -> &Arc<T>,
    ) -> Result<R> {
        let mut taken = lock(&self.taken);
        let key = (space, name.to_owned());
        if taken.names.get(&key).is_some_and(|alive| alive()) {
            return Err(Error::DuplicateName { what, name: name.into() });
        }
        let object = create()?;
        let weak: Weak<T> = Arc::downgrade(inner(&object));
        taken.names.insert(key, Box::new(move || weak.strong_count() > 0));
        taken.sweep();
        Ok(object)
    }

    /// Names recorded (live, or dropped and not yet swept).
    #[cfg(test)]
    fn recorded(&self) -> usize {
        lock(&self.taken).names.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_dropped_objects_are_forgotten_so_the_table_stays_bounded() {
        let names = Names::default();
        let mut live = Vec::new();
        for k in 0..100_000 {
            let object = names
                .declare(Namespace::Data, "dat", &format!("work#{k}"), || Ok(Arc::new(k)), |a: &Arc<usize>| a)
                .unwrap();
            // Every tenth object stays alive; the rest are dropped at once.
            if k % 10 == 0 {
                live.push(object);
            }
        }
        assert!(names.recorded() <= 3 * live.len() + Taken::FIRST_SWEEP, "{} names recorded", names.recorded());
        // Live names stay taken, dropped ones are free.
        let again = |name: &str| names.declare(Namespace::Data, "dat", name, || Ok(Arc::new(0usize)), |a| a);
        assert!(matches!(again("work#99990"), Err(Error::DuplicateName { .. })));
        assert!(again("work#99991").is_ok());
    }
}
