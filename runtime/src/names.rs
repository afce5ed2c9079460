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
    taken: Mutex<HashMap<(Namespace, String), Alive>>,
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
        if taken.get(&key).is_some_and(|alive| alive()) {
            return Err(Error::DuplicateName { what, name: name.into() });
        }
        let object = create()?;
        let weak: Weak<T> = Arc::downgrade(inner(&object));
        taken.insert(key, Box::new(move || weak.strong_count() > 0));
        Ok(object)
    }
}
