//! What the demos' command lines share: the backend from `--backend` or
//! `PARLOOP_BACKEND`, counts that say what they expect, the `--output`
//! folder checked before any work, and checked writes to standard output.

use std::io::ErrorKind;
use std::path::Path;

use parloop::{Backend, Error};

/// An option's value that makes no sense, as an error naming the option.
pub fn invalid(option: &str, reason: impl Into<String>) -> Error {
    Error::InvalidDeclaration { what: "option", name: option.into(), reason: reason.into() }
}

/// A write to standard output that failed (a full disk, a closed pipe).
pub fn stdout_error(source: std::io::Error) -> Error {
    Error::Io { path: "<stdout>".into(), source }
}

/// The backend of `--backend VALUE` (`option`), else of `PARLOOP_BACKEND`,
/// else [`Backend::auto`]. An explicitly empty `--backend ''` is an error
/// (a script's unset variable, most likely), as is a value that names no
/// backend; an empty `PARLOOP_BACKEND` is as good as unset.
///
/// ```
/// use parloop_examples::cli::backend;
/// assert_eq!(backend(Some("seq")).unwrap(), parloop::Backend::Seq);
/// assert!(backend(Some("")).unwrap_err().to_string().contains("--backend"));
/// ```
pub fn backend(option: Option<&str>) -> Result<Backend, Error> {
    match option {
        Some(b) if b.trim().is_empty() => Err(invalid(
            "--backend",
            "an empty value: expected auto, seq, threads, emu or cuda (leave the option out to use \
             PARLOOP_BACKEND, else auto)",
        )),
        Some(b) => b.parse(),
        None => match std::env::var("PARLOOP_BACKEND") {
            Ok(b) if !b.trim().is_empty() => b.parse().map_err(|e: Error| Error::Env {
                var: "PARLOOP_BACKEND",
                value: b.clone(),
                reason: match e {
                    Error::Backend { reason, .. } => reason,
                    other => other.to_string(),
                },
            }),
            _ => Ok(Backend::auto()),
        },
    }
}

/// A count (`--steps`, `--mesh-size`, ...) as clap's value parser: a
/// non-negative integer, blanks around it allowed; anything else is an
/// error that says so (clap's own says "invalid digit found in string").
///
/// ```
/// use parloop_examples::cli::count;
/// assert_eq!(count(" 12 "), Ok(12));
/// assert!(count("-3").unwrap_err().contains("non-negative integer"));
/// ```
pub fn count(s: &str) -> Result<usize, String> {
    let t = s.trim();
    t.parse::<usize>().map_err(|_| {
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            format!("`{s}` is too large")
        } else {
            format!("`{s}` is not a non-negative integer")
        }
    })
}

/// Makes sure the folder `dir` of `--output` exists and is a folder, before
/// any work, so that a bad path is an error at once rather than after the
/// run: a path (or one of its parents) that is a file is an error saying
/// so, as is one that cannot be created.
pub fn output_dir(dir: &Path) -> Result<(), Error> {
    let not_a_folder = |p: &Path| {
        invalid(
            "--output",
            if p == dir {
                format!("{}: exists and is not a directory", dir.display())
            } else {
                format!("{}: {} exists and is not a directory", dir.display(), p.display())
            },
        )
    };
    // The first ancestor (or the path itself) that exists must be a folder.
    if let Some(p) = dir.ancestors().find(|p| !p.as_os_str().is_empty() && p.symlink_metadata().is_ok()) {
        if !p.is_dir() {
            return Err(not_a_folder(p));
        }
    }
    std::fs::create_dir_all(dir).map_err(|source| match source.kind() {
        ErrorKind::NotADirectory | ErrorKind::AlreadyExists => not_a_folder(dir),
        _ => Error::Io { path: dir.display().to_string(), source },
    })
}
