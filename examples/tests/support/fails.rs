//! What the demos' CLI tests expect of a failure, shared by them.

use std::process::Output;

/// Expects a clean failure: exit status `code` (not a signal, not a
/// panic's 101) and `needles` in the message on stderr.
#[track_caller]
pub fn fails_with(out: &Output, code: i32, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "status {:?}, stderr:\n{stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "stderr does not say `{needle}`:\n{stderr}");
    }
}
