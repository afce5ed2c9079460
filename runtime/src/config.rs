//! The `PARLOOP_*` environment variables, checked in one place when a
//! runtime is created: a value that is not understood is an
//! [`Error::Env`] naming the variable and what it accepts, never silently
//! ignored. An unset or empty variable takes its default.
//!
//! | variable | values | default |
//! | --- | --- | --- |
//! | `PARLOOP_BACKEND` | `auto`, `seq`, `threads`, `emu`, `cuda` | `auto` |
//! | `PARLOOP_PART_SIZE` | elements per block, a positive integer | per backend |
//! | `PARLOOP_PROFILE` | `0`, `1` (table on drop), `json:FILE` | `0` |
//! | `PARLOOP_STRATEGY` | `auto`, `staged`, `staged-atomic`, `atomic`, `global-colour` | `auto` |
//! | `PARLOOP_DETERMINISTIC` | `0`, `1` | `0` |
//! | `PARLOOP_SIMD` | `0`, `1`, `avx2` | `1` |
//! | `PARLOOP_HUGE_PAGES` | `0`, `1` | `1` |
//! | `PARLOOP_BLOCK_SIZE` | device threads per block: a multiple of 32 in 32..=1024 | per device |
//! | `PARLOOP_DEVICE` | GPU ordinal, a non-negative integer | rank on the node |
//! | `PARLOOP_CHECK_RANKS` | `0`, `1` | `0` |
//! | `PARLOOP_OVERLAP` | `0`, `1` | `1` |
//! | `PARLOOP_CUDA_AWARE` | `0`, `1` | asked of the MPI library |
//! | `PARLOOP_CHECK` | `0`, `1` (bounds checks in device code) | `0` |
//! | `PARLOOP_LAZY` | `0`, `1` (record loops in the lazy trace; under MPI too) | `0` |
//! | `PARLOOP_REPLAY` | `0`, `1` (with the lazy trace: replay recurring loop sequences without building the DAG) | `1` |
//! | `PARLOOP_FUSION` | `0`, `1` (with the lazy trace: consecutive direct loops over one set as one host launch) | `1` |
//! | `PARLOOP_TRACE_DOT` | a path (with the lazy trace: the first forced DAG as Graphviz; `path.rank<r>` under MPI) | unset |

use crate::error::{Error, Result};

/// The value of `var`, `None` when unset or blank.
pub(crate) fn var(var: &'static str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

/// A `0`/`1` switch.
pub(crate) fn switch(name: &'static str, default: bool) -> Result<bool> {
    match var(name) {
        None => Ok(default),
        Some(v) => match v.trim() {
            "1" => Ok(true),
            "0" => Ok(false),
            _ => Err(Error::Env { var: name, value: v, reason: "expected 0 or 1".into() }),
        },
    }
}

/// A positive integer, within `range` when given.
pub(crate) fn number(
    name: &'static str,
    accept: impl Fn(usize) -> bool,
    expected: &'static str,
) -> Result<Option<usize>> {
    match var(name) {
        None => Ok(None),
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if accept(n) => Ok(Some(n)),
            _ => Err(Error::Env { var: name, value: v, reason: format!("expected {expected}") }),
        },
    }
}

/// Checks the variables that parts of the runtime outside [`Runtime`]'s
/// construction read themselves (devices, huge pages, distributed runs),
/// so that a bad value fails when the runtime is created.
///
/// [`Runtime`]: crate::Runtime
pub(crate) fn check_others() -> Result<()> {
    switch("PARLOOP_HUGE_PAGES", true)?;
    switch("PARLOOP_CHECK_RANKS", false)?;
    switch("PARLOOP_OVERLAP", true)?;
    switch("PARLOOP_CUDA_AWARE", false)?;
    number("PARLOOP_BLOCK_SIZE", |n| (32..=1024).contains(&n) && n % 32 == 0, "a multiple of 32 in 32..=1024")?;
    number("PARLOOP_DEVICE", |_| true, "a GPU ordinal (a non-negative integer)")?;
    crate::device::check_from_env()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_and_numbers_reject_what_they_do_not_understand() {
        // Variables of this test only, so that tests running in parallel
        // never see them.
        std::env::set_var("PARLOOP_TEST_SWITCH", "yes");
        assert!(matches!(switch("PARLOOP_TEST_SWITCH", false), Err(Error::Env { .. })));
        std::env::set_var("PARLOOP_TEST_SWITCH", " 1 ");
        assert!(switch("PARLOOP_TEST_SWITCH", false).unwrap());
        std::env::set_var("PARLOOP_TEST_SWITCH", "");
        assert!(!switch("PARLOOP_TEST_SWITCH", false).unwrap());
        for bad in ["0", "7", "100000", "-1", "bogus"] {
            std::env::set_var("PARLOOP_TEST_NUMBER", bad);
            let err = number("PARLOOP_TEST_NUMBER", |n| (32..=1024).contains(&n) && n % 32 == 0, "x").unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
        std::env::set_var("PARLOOP_TEST_NUMBER", "256");
        assert_eq!(number("PARLOOP_TEST_NUMBER", |n| n % 32 == 0, "x").unwrap(), Some(256));
    }
}
