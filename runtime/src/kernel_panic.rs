//! Kernel panics on the host backends: caught at the backend boundary and
//! returned as [`Error::KernelPanicked`], naming the element.
//!
//! The element costs nothing while nothing panics: the host adapters hold
//! an [`ElementGuard`] per element (per group of lanes, whose elements
//! share every integer value and so panic together) and forget it after
//! the kernel returns; only during unwinding does its `Drop` run and leave
//! the element in a thread-local for [`catch`] to read.

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::Error;

thread_local! {
    /// The element whose kernel call unwound last on this thread.
    static PANICKED_AT: Cell<Option<usize>> = const { Cell::new(None) };
    /// Whether this thread runs kernels under [`catch`] now.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
}

/// Installs, once, a panic hook that stays quiet for panics [`catch`]
/// turns into errors (the error carries the message; the default hook
/// printed it to stderr as well, as if the program had crashed) and calls
/// the hook it replaces for every other panic. `RUST_BACKTRACE` set keeps
/// the default output for kernel panics too: it asks for their location.
fn quiet_kernel_panics() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        if std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0") || std::thread::panicking() {
            return;
        }
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CATCHING.with(Cell::get) {
                previous(info);
            }
        }));
    });
}

/// Records `element` if the kernel call it guards unwinds. The adapters
/// `mem::forget` it once the call returned, so the normal path runs no code.
#[doc(hidden)]
pub struct ElementGuard(pub usize);

impl Drop for ElementGuard {
    fn drop(&mut self) {
        // Only reached while unwinding (the adapters forget the guard
        // otherwise); the innermost guard, dropped first, wins.
        if PANICKED_AT.with(|c| c.get()).is_none() {
            PANICKED_AT.with(|c| c.set(Some(self.0)));
        }
    }
}

/// A caught kernel panic: where and why.
#[derive(Clone, Debug)]
pub(crate) struct Panicked {
    pub element: usize,
    pub message: String,
}

impl Panicked {
    pub(crate) fn into_error(self, kernel: &str) -> Error {
        Error::KernelPanicked {
            kernel: kernel.into(),
            element: self.element,
            place: format!("element {}", self.element),
            message: self.message,
        }
    }
}

/// `error` with a kernel panic's element described as an element of `set`
/// (the loop's iteration set: see [`Set::describe_element`]); any other
/// error as it is.
pub(crate) fn locate(error: Error, set: &crate::decl::Set) -> Error {
    match error {
        Error::KernelPanicked { kernel, element, message, .. } => {
            Error::KernelPanicked { kernel, element, place: set.describe_element(element), message }
        }
        other => other,
    }
}

/// Runs `f` (a host adapter over elements from `start`), catching a panic.
/// A panic outside any guard (a hand-written host function) is reported
/// at `start`.
pub(crate) fn catch(start: usize, f: impl FnOnce()) -> Result<(), Panicked> {
    quiet_kernel_panics();
    PANICKED_AT.with(|c| c.set(None));
    // Nested catches (a kernel run from a kernel's thread) restore the
    // outer state.
    let outer = CATCHING.with(|c| c.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(outer));
    result.map_err(|payload| Panicked {
        element: PANICKED_AT.with(|c| c.take()).unwrap_or(start),
        message: message(payload.as_ref()),
    })
}

/// The text of a panic payload (`panic!` with a literal or a format).
fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a payload that is not a string".into()
    }
}

/// The first of two caught panics by element, so that the error a loop
/// reports does not depend on thread scheduling.
pub(crate) fn first(a: Option<Panicked>, b: Panicked) -> Panicked {
    match a {
        Some(a) if a.element <= b.element => a,
        _ => b,
    }
}
