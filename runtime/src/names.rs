//! Unique names: two live sets, maps or data (dats, globals, matrices and
//! temporaries share one namespace) of one runtime never share a name, so that every message
//! naming an object is unambiguous (seed 003). A name is free again once
//! every handle of the object that held it is dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// The next number for the runtime's own objects (`cg#3:r`, `dot#7:sum`).
    numbers: AtomicU64,
    /// What runs before a name a live object holds is refused: the lazy
    /// trace's pending loops and kept records may be all that keeps a set
    /// or map the program dropped alive (`Runtime::release_for_names`).
    release: std::sync::OnceLock<Release>,
}

/// See [`Names::set_release`].
type Release = Box<dyn Fn() + Send + Sync>;

/// The names, and when to forget those of dropped objects next.
#[derive(Default)]
struct Taken {
    /// Whether each name's holder lives, and what kind of object it is
    /// ("dat", "matrix", ...: the message of a clash names both kinds).
    names: HashMap<(Namespace, String), (Alive, &'static str)>,
    /// The table's length that triggers the next sweep: twice the live
    /// names after the last one (at least [`Taken::FIRST_SWEEP`]), so a
    /// program declaring fresh names forever (a solver's work vectors,
    /// `cg#17:r`) keeps a table of its live names, not of every name it
    /// ever used, at O(1) amortised per declaration.
    sweep_at: usize,
}

impl Taken {
    const FIRST_SWEEP: usize = 256;

    /// The kind of the live object that holds `name` in `space`, if any.
    fn holder(&self, space: Namespace, name: &str) -> Option<&'static str> {
        // The key is built to look up; a declaration allocates it anyway.
        self.names.get(&(space, name.to_owned())).filter(|(alive, _)| alive()).map(|&(_, what)| what)
    }

    /// Runs `create` and records its object under `name`.
    fn record<T: Send + Sync + 'static, R>(
        &mut self,
        space: Namespace,
        what: &'static str,
        name: String,
        create: impl FnOnce() -> Result<R>,
        inner: impl FnOnce(&R) -> &Arc<T>,
    ) -> Result<R> {
        let object = create()?;
        let weak: Weak<T> = Arc::downgrade(inner(&object));
        self.names.insert((space, name), (Box::new(move || weak.strong_count() > 0), what));
        self.sweep();
        Ok(object)
    }

    /// Forgets the names of dropped objects when the table has doubled.
    fn sweep(&mut self) {
        if self.names.len() >= self.sweep_at.max(Self::FIRST_SWEEP) {
            self.names.retain(|_, (alive, _)| alive());
            self.sweep_at = 2 * self.names.len();
        }
    }
}

/// That `name` can name an object in messages.
fn check(what: &'static str, name: &str) -> Result<()> {
    // Every message names the object: an empty name would name none.
    if name.trim().is_empty() {
        return Err(Error::InvalidDeclaration {
            what,
            name: name.into(),
            reason: "an empty name (errors and profiles name objects by it)".into(),
        });
    }
    // A NUL or a newline in a name garbles the messages, profiles and
    // NVTX ranges (C strings) that show it.
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(Error::InvalidDeclaration {
            what,
            name: name.escape_debug().to_string(),
            reason: format!(
                "a control character (U+{:04X}) in the name (errors, profiles and NVTX ranges show it)",
                c as u32
            ),
        });
    }
    Ok(())
}

impl Names {
    /// A number for the names of the runtime's own objects: per runtime,
    /// so a program's messages name the same objects run to run.
    pub(crate) fn number(&self) -> u64 {
        self.numbers.fetch_add(1, Ordering::Relaxed)
    }

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
        check(what, name)?;
        let mut taken = lock(&self.taken);
        if taken.holder(space, name).is_some() {
            // Perhaps held by the lazy trace alone: let it go, and look again.
            if let Some(release) = self.release.get() {
                drop(taken);
                release();
                taken = lock(&self.taken);
            }
            if let Some(holder) = taken.holder(space, name) {
                return Err(Error::DuplicateName { what, name: name.into(), holder });
            }
        }
        taken.record(space, what, name.to_owned(), create, inner)
    }

    /// Declares a temporary (`Runtime::temporary`) under `name`, or under
    /// `name~2`, `name~3`, ... while a live object holds it: every time
    /// step may call its temporary `t1` (the last step's may still be
    /// alive, in the lazy trace), and messages still name one object each.
    pub(crate) fn declare_temporary<T: Send + Sync + 'static, R>(
        &self,
        name: &str,
        create: impl FnOnce(&str) -> Result<R>,
        inner: impl FnOnce(&R) -> &Arc<T>,
    ) -> Result<R> {
        check("temporary", name)?;
        self.declare_internal(Namespace::Data, "temporary", name, create, inner)
    }

    /// Sets what runs before a held name is refused (once, by a runtime
    /// with the lazy trace).
    pub(crate) fn set_release(&self, release: Release) {
        let _ = self.release.set(release);
    }

    /// Declares one of the runtime's own objects (a solver's work vector,
    /// a reduction's global) under `base`, or under `base~2`, `base~3`, ...
    /// when a live object holds it: a user's dat named like a work vector
    /// (`cg#3:r`) neither fails the solver nor is shadowed by it, and
    /// messages still name one object each. `create` gets the name chosen.
    pub(crate) fn declare_internal<T: Send + Sync + 'static, R>(
        &self,
        space: Namespace,
        what: &'static str,
        base: &str,
        create: impl FnOnce(&str) -> Result<R>,
        inner: impl FnOnce(&R) -> &Arc<T>,
    ) -> Result<R> {
        let mut taken = lock(&self.taken);
        let mut name = base.to_owned();
        let mut k = 1u64;
        while taken.holder(space, &name).is_some() {
            k += 1;
            name = format!("{base}~{k}");
        }
        let chosen = name.clone();
        taken.record(space, what, name, || create(&chosen), inner)
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

    #[test]
    fn internal_objects_take_a_free_variant_of_a_name_a_user_holds() {
        let names = Names::default();
        let user = names.declare(Namespace::Data, "dat", "cg#3:r", || Ok(Arc::new(0usize)), |a| a).unwrap();
        let internal = |base: &str| {
            names.declare_internal(
                Namespace::Data,
                "dat",
                base,
                |name| Ok((name.to_owned(), Arc::new(1usize))),
                |o| &o.1,
            )
        };
        let first = internal("cg#3:r").unwrap();
        assert_eq!(first.0, "cg#3:r~2");
        let second = internal("cg#3:r").unwrap();
        assert_eq!(second.0, "cg#3:r~3");
        drop(first);
        assert_eq!(internal("cg#3:r").unwrap().0, "cg#3:r~2", "a dropped object's name is free again");
        // The user's object keeps its name, and the internal one cannot take a user's later name.
        assert!(matches!(
            names.declare(Namespace::Data, "dat", "cg#3:r~3", || Ok(Arc::new(0usize)), |a| a),
            Err(Error::DuplicateName { .. })
        ));
        drop(user);
        assert_eq!(internal("cg#3:r").unwrap().0, "cg#3:r");
    }
}
