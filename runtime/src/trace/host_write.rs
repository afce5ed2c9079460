//! A host write to a global, recorded instead of forced (issue 15).
//!
//! `Global::set_values` with the trace on used to force every pending
//! computation that reads or writes the global (a write after read): the
//! airfoil's step, which zeroes `rms` before each `update`, forced twice
//! per step besides its read of `rms`. Recorded, the write is one more
//! computation of the window: a "loop" of the private kernel [`KERNEL`]
//! over a private empty set, with one argument, the global, WRITE, and the
//! new values carried in its record (`Pending::payload`). It gets its
//! dependencies from the ordinary rule (it writes the global's token:
//! after the pending readers and writers of the old values, before later
//! readers), it is replayed like any loop (its event words are the
//! global's; the values are not part of them, so a step that writes
//! other values each time still recurs), and a host read of the global
//! forces it like any writer. When forced it replaces the values on the
//! host, as the eager `set_values` does.

use std::sync::Arc;

use crate::arg::{Arg, ArgKind};
use crate::decl::{Sections, Set, Storage};
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::par_loop::ParLoop;
use crate::types::Access;
use crate::views::ArgView;

use super::{Held, Pending};

/// The host adapter of [`KERNEL`]: never called (the trace runs a host
/// write itself, see [`run`]); it touches no view.
///
/// # Safety
/// Accesses nothing: safe for any views.
unsafe fn nothing(_: &[ArgView], _: usize, _: usize) {}

/// The kernel of a recorded host write (its name is what the profile's
/// and the DAG's labels show).
// SAFETY: the host adapter accesses no view, whatever `params` says.
pub(super) static KERNEL: Kernel = unsafe { Kernel::from_parts("set_values", &[], nothing, None) };

/// The set a host write "iterates" over: empty and private to the trace,
/// so that no loop of the user's shares it (a fused group is one set).
pub(super) fn set() -> Set {
    Set::new("host writes", Sections::default()).expect("an empty set's sections never overflow")
}

/// The write of `dim` values to `global` as a loop over `set`, for the
/// trace to record.
pub(super) fn as_loop(set: &Set, global: Arc<dyn Storage>, dim: usize) -> ParLoop {
    let arg = Arg::new(global, ArgKind::Global, Access::Write, dim, None);
    ParLoop::from_parts(&KERNEL, set.clone(), vec![arg], false)
}

/// Whether record `p` is a host write.
pub(super) fn is(p: &Pending) -> bool {
    std::ptr::eq(p.kernel, &KERNEL)
}

/// Runs host write `p`: its values replace the global's.
pub(super) fn run(p: &Pending) -> Result<()> {
    let arg = p.args.first().expect("a host write has its global");
    let global = match &arg.held {
        Held::Weak(w) => w.upgrade(),
        Held::Strong(s) => Some(Arc::clone(s)),
    };
    let global = global.ok_or_else(|| Error::DataDropped { kernel: KERNEL.name().into(), id: arg.id })?;
    global.write_bytes(&p.payload)
}
