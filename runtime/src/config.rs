//! The `PARLOOP_*` environment variables, checked in one place when a
//! runtime is created: a value that is not understood is an
//! [`Error::Env`] naming the variable and what it accepts, and a
//! `PARLOOP_*` name that is none of them an [`Error::UnknownEnv`] (with the
//! closest name), never silently ignored. An unset or empty variable takes
//! its default.
//!
//! | variable | values | default |
//! | --- | --- | --- |
//! | `PARLOOP_BACKEND` | `auto`, `seq`, `threads`, `emu`, `cuda` | `auto` |
//! | `PARLOOP_PART_SIZE` | elements per block, a positive integer | per backend |
//! | `PARLOOP_PROFILE` | `0`, `1` (table on drop), `json:FILE` (`FILE.<n>` for the process's n-th profiled runtime, `.rank<r>` after under MPI) | `0` |
//! | `PARLOOP_STRATEGY` | `auto`, `staged`, `staged-atomic`, `atomic`, `global-colour` | `auto` |
//! | `PARLOOP_DETERMINISTIC` | `0`, `1` | `0` |
//! | `PARLOOP_SIMD` | `0`, `1`, `avx2` | `1` |
//! | `PARLOOP_HUGE_PAGES` | `0`, `1` | `1` |
//! | `PARLOOP_BLOCK_SIZE` | device threads per block: a multiple of 32 in 32..=1024 | per device |
//! | `PARLOOP_DEVICE` | GPU ordinal, a non-negative integer | rank on the node |
//! | `PARLOOP_CHECK_RANKS` | `0`, `1` | `0` |
//! | `PARLOOP_OVERLAP` | `0`, `1` | `1` |
//! | `PARLOOP_MPI_TIMEOUT` | seconds an MPI wait may last before the job ends (`0`: never; a report on stderr after 60 s and at each doubling) | `1800` |
//! | `PARLOOP_CUDA_AWARE` | `0`, `1` | asked of the MPI library |
//! | `PARLOOP_CHECK` | `0`, `1` (bounds checks in device code) | `1` |
//! | `PARLOOP_LAZY` | `0`, `1` (record loops in the lazy trace; under MPI too) | `0` |
//! | `PARLOOP_REPLAY` | `0`, `1` (with the lazy trace: replay recurring loop sequences without building the DAG) | `1` |
//! | `PARLOOP_FUSION` | `0`, `1` (with the lazy trace: consecutive direct loops over one set as one host launch) | `1` |
//! | `PARLOOP_TRACE_DOT` | a path (with the lazy trace: the first forced DAG as Graphviz; `path.rank<r>` under MPI; its directory must exist when a runtime is created) | unset |

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

/// `PARLOOP_BLOCK_SIZE` (checked when the runtime was created), else
/// the device's `default`.
pub(crate) fn block_size(default: u32) -> u32 {
    number("PARLOOP_BLOCK_SIZE", block_size_ok, BLOCK_SIZES)
        .ok()
        .flatten()
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(default)
}

// (`is_multiple_of` is newer than the workspace's rust-version, 1.86.)
#[allow(clippy::manual_is_multiple_of)]
fn block_size_ok(n: usize) -> bool {
    (32..=1024).contains(&n) && n % 32 == 0
}

const BLOCK_SIZES: &str = "a multiple of 32 in 32..=1024";

/// Checks the variables that parts of the runtime outside [`Runtime`]'s
/// construction read themselves (devices, huge pages, distributed runs),
/// so that a bad value fails when the runtime is created.
///
/// [`Runtime`]: crate::Runtime
pub(crate) fn check_others() -> Result<()> {
    check_names(std::env::vars_os().map(|(name, _)| name))?;
    check_unicode(std::env::vars_os())?;
    switch("PARLOOP_HUGE_PAGES", true)?;
    switch("PARLOOP_CHECK_RANKS", false)?;
    switch("PARLOOP_OVERLAP", true)?;
    number("PARLOOP_MPI_TIMEOUT", |_| true, "seconds (a non-negative integer; 0 for no limit)")?;
    switch("PARLOOP_CUDA_AWARE", false)?;
    number("PARLOOP_BLOCK_SIZE", block_size_ok, BLOCK_SIZES)?;
    number("PARLOOP_DEVICE", |_| true, "a GPU ordinal (a non-negative integer)")?;
    crate::device::check_from_env()?;
    check_dot_directory(std::env::var_os("PARLOOP_TRACE_DOT"))?;
    check_cache_directory(std::env::var_os("PARLOOP_CACHE_DIR"))?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    check_thread_count(var("RAYON_NUM_THREADS"), cores)?;
    Ok(())
}

/// `RAYON_NUM_THREADS`, the threads backend's thread count, is read by
/// rayon when its pool starts, which ignores a value it does not
/// understand (`abc`, `-1`) and starts as many threads as asked (a demo
/// with a billion never got to its first loop): checked here, as a
/// non-negative integer (`0` is rayon's "one per core") of at most 16 per
/// core (256 on small machines: oversubscribing to measure is fine).
fn check_thread_count(value: Option<String>, cores: usize) -> Result<()> {
    let Some(v) = value else { return Ok(()) };
    let most = cores.saturating_mul(16).max(256);
    // Untrimmed: rayon parses the value as it is, and ignores ` 16 `.
    match v.parse::<usize>() {
        Ok(n) if n <= most => Ok(()),
        Ok(_) => Err(Error::Env {
            var: "RAYON_NUM_THREADS",
            value: v,
            reason: format!("expected at most {most} threads (16 per core on this machine's {cores}, at least 256)"),
        }),
        Err(_) => Err(Error::Env {
            var: "RAYON_NUM_THREADS",
            value: v,
            reason: "expected a number of threads (a non-negative integer, without blanks; 0 for one per core)".into(),
        }),
    }
}

/// `PARLOOP_CACHE_DIR` is made when a device compiles its first loop: a
/// path that cannot be a directory (a file, `/dev/null`) fails now, naming
/// the variable, instead of at that loop with an I/O error.
fn check_cache_directory(value: Option<std::ffi::OsString>) -> Result<()> {
    let Some(value) = value.filter(|v| !v.is_empty()) else { return Ok(()) };
    let path = std::path::Path::new(&value);
    // The nearest part of the path that exists must be a directory.
    let existing = path.ancestors().find(|a| !a.as_os_str().is_empty() && a.exists());
    match existing {
        Some(a) if !a.is_dir() => Err(Error::Env {
            var: "PARLOOP_CACHE_DIR",
            value: value.to_string_lossy().into_owned(),
            reason: format!("expected a directory (made if missing); `{}` exists and is not a directory", a.display()),
        }),
        _ => Ok(()),
    }
}

/// `PARLOOP_TRACE_DOT`'s file is written at the first forcing point, maybe
/// far into a run: a directory that does not exist fails now instead.
/// (The file itself is not created here: under MPI each rank writes
/// `path.rank<r>`.)
fn check_dot_directory(value: Option<std::ffi::OsString>) -> Result<()> {
    let Some(value) = value.filter(|v| !v.is_empty()) else { return Ok(()) };
    let path = std::path::Path::new(&value);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let reason = if path.file_name().is_none() {
        "expected a file path; this one names no file".to_string()
    } else if path.is_dir() {
        "expected a file path; this one names a directory".to_string()
    } else if !dir.is_dir() {
        format!("expected a file path in an existing directory; `{}` is not a directory", dir.display())
    } else {
        return Ok(());
    };
    Err(Error::Env { var: "PARLOOP_TRACE_DOT", value: value.to_string_lossy().into_owned(), reason })
}

/// Variables whose value is a path, taken as the OS gives it.
const PATH_VARIABLES: [&str; 2] = ["PARLOOP_CACHE_DIR", "PARLOOP_TRACE_DOT"];

/// A `PARLOOP_*` variable whose value is not UTF-8 is an error (reading it
/// with `std::env::var` would see it as unset and take the default
/// silently), except the path variables.
fn check_unicode(vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>) -> Result<()> {
    for (name, value) in vars {
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with("PARLOOP_") || PATH_VARIABLES.contains(&name) || value.to_str().is_some() {
            continue;
        }
        // `Error::Env` names the variable with a `&'static str`.
        let var = KNOWN.iter().find(|k| **k == name).copied().unwrap_or("PARLOOP_*");
        return Err(Error::Env {
            var,
            value: value.to_string_lossy().into_owned(),
            reason: format!("the value of {name} is not valid UTF-8"),
        });
    }
    Ok(())
}

/// Prefixes of variables that parloop's own tests, benches and CI read
/// (`PARLOOP_TEST_DEVICE`, `PARLOOP_REQUIRE_NVRTC`, ...), not the runtime.
const TOOLING: [&str; 5] = ["PARLOOP_TEST_", "PARLOOP_REQUIRE_", "PARLOOP_BENCH_", "PARLOOP_CI_", "PARLOOP_CUDA_TEST_"];

/// A `PARLOOP_*` name that is neither a runtime variable nor the tooling's
/// is an [`Error::UnknownEnv`], with the closest known name when one is
/// near (`PARLOOP_BACKNED`): a misspelt variable would otherwise leave the
/// run on its defaults without a word.
fn check_names(names: impl Iterator<Item = std::ffi::OsString>) -> Result<()> {
    for name in names {
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with("PARLOOP_")
            || KNOWN.contains(&name)
            || OTHER_KNOWN.contains(&name)
            || TOOLING.iter().any(|p| name.starts_with(p))
        {
            continue;
        }
        let suggestion =
            KNOWN.iter().map(|k| (edit_distance(k, name), *k)).filter(|&(d, _)| d <= 3).min().map(|(_, k)| k);
        return Err(Error::UnknownEnv { var: name.to_string(), suggestion });
    }
    Ok(())
}

/// Variables read outside the runtime proper: the examples' cube size in
/// the assembly study (`PARLOOP_CUBE`) and the VTK test's Python.
const OTHER_KNOWN: [&str; 2] = ["PARLOOP_CUBE", "PARLOOP_PYTHON"];

/// Levenshtein distance, adjacent swaps counted once (two names of a few
/// dozen ASCII letters: quadratic is nothing).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    // Rows i - 2, i - 1 and i of the table.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut row = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        row[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (prev[j] + 1).min(row[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(before[j - 2] + 1);
            }
        }
        std::mem::swap(&mut before, &mut prev);
        std::mem::swap(&mut prev, &mut row);
    }
    prev[b.len()]
}

/// Every variable of the table above.
const KNOWN: [&str; 19] = [
    "PARLOOP_BACKEND",
    "PARLOOP_PART_SIZE",
    "PARLOOP_PROFILE",
    "PARLOOP_STRATEGY",
    "PARLOOP_DETERMINISTIC",
    "PARLOOP_SIMD",
    "PARLOOP_HUGE_PAGES",
    "PARLOOP_BLOCK_SIZE",
    "PARLOOP_DEVICE",
    "PARLOOP_CHECK_RANKS",
    "PARLOOP_OVERLAP",
    "PARLOOP_MPI_TIMEOUT",
    "PARLOOP_CUDA_AWARE",
    "PARLOOP_CHECK",
    "PARLOOP_LAZY",
    "PARLOOP_REPLAY",
    "PARLOOP_FUSION",
    "PARLOOP_TRACE_DOT",
    "PARLOOP_CACHE_DIR",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_directory_that_cannot_be_one_is_an_error_naming_the_variable() {
        let check = |p: &str| check_cache_directory(Some(p.into()));
        assert!(check("/tmp/parloop-missing/below/here").is_ok());
        assert!(check(&std::env::temp_dir().display().to_string()).is_ok());
        for bad in ["/dev/null", "/dev/null/emu", "/proc/self/status"] {
            let err = check(bad).unwrap_err();
            assert!(matches!(&err, Error::Env { var: "PARLOOP_CACHE_DIR", .. }), "{bad}: {err}");
        }
    }

    #[test]
    fn thread_counts_rayon_would_ignore_or_drown_in_are_errors() {
        for ok in [None, Some("0"), Some("1"), Some("16"), Some("256")] {
            assert!(check_thread_count(ok.map(String::from), 2).is_ok(), "{ok:?}");
        }
        assert!(check_thread_count(Some("1024".into()), 64).is_ok());
        // (Blanks too: rayon would ignore ` 16 ` and start one thread per core.)
        for bad in ["abc", "-1", "1.5", " 16 ", "257", "1000000000", "99999999999999999999999"] {
            let err = check_thread_count(Some(bad.into()), 2).unwrap_err();
            assert!(matches!(&err, Error::Env { var: "RAYON_NUM_THREADS", value, .. } if value == bad), "{bad}: {err}");
        }
    }

    #[test]
    fn unknown_parloop_variables_are_errors_naming_the_closest_known_one() {
        let check = |names: &[&str]| check_names(names.iter().map(std::ffi::OsString::from));
        assert!(check(&[
            "HOME",
            "PARLOOP_BACKEND",
            "PARLOOP_TEST_DEVICE",
            "PARLOOP_REQUIRE_NVRTC",
            "RAYON_NUM_THREADS"
        ])
        .is_ok());
        for (name, hint) in [
            ("PARLOOP_BACKNED", Some("PARLOOP_BACKEND")),
            ("PARLOOP_LAZZY", Some("PARLOOP_LAZY")),
            ("PARLOOP_PARTSIZE", Some("PARLOOP_PART_SIZE")),
            ("PARLOOP_NUM_THREADS", None),
        ] {
            let err = check(&["PATH", name]).unwrap_err();
            assert!(
                matches!(&err, Error::UnknownEnv { var, suggestion } if var == name && *suggestion == hint),
                "{name}: {err}"
            );
            assert!(err.to_string().contains(name), "{err}");
        }
        assert_eq!(edit_distance("PARLOOP_LAZY", "PARLOOP_LAYZ"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn values_that_are_not_utf8_are_errors_except_paths() {
        use std::os::unix::ffi::OsStringExt;
        let bad = || std::ffi::OsString::from_vec(vec![b'1', 0xff]);
        let vars = |name: &str| vec![("HOME".into(), bad()), (name.into(), bad())].into_iter();
        let err = check_unicode(vars("PARLOOP_LAZY")).unwrap_err();
        assert!(matches!(err, Error::Env { var: "PARLOOP_LAZY", .. }), "{err}");
        let err = check_unicode(vars("PARLOOP_PROFILE")).unwrap_err().to_string();
        assert!(err.contains("PARLOOP_PROFILE") && err.contains("UTF-8"), "{err}");
        assert!(check_unicode(vars("PARLOOP_CACHE_DIR")).is_ok());
        assert!(check_unicode(vars("OTHER")).is_ok());
    }

    #[test]
    fn a_trace_dot_path_in_a_missing_directory_is_refused_at_once() {
        let os = |s: &str| Some(std::ffi::OsString::from(s));
        assert!(check_dot_directory(None).is_ok());
        assert!(check_dot_directory(os("")).is_ok());
        assert!(check_dot_directory(os("trace.dot")).is_ok());
        assert!(check_dot_directory(os("/tmp/trace.dot")).is_ok());
        let err = check_dot_directory(os("/no/such/dir/trace.dot")).unwrap_err();
        assert!(matches!(err, Error::Env { var: "PARLOOP_TRACE_DOT", .. }), "{err}");
        assert!(err.to_string().contains("/no/such/dir"), "{err}");
        assert!(check_dot_directory(os("/tmp/..")).is_err(), "no file name");
        // A directory passed, and the first forced read failed with
        // "Is a directory" instead.
        for dir in ["/tmp", "/tmp/"] {
            let err = check_dot_directory(os(dir)).unwrap_err();
            assert!(err.to_string().contains("names a directory"), "{dir}: {err}");
        }
    }

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
