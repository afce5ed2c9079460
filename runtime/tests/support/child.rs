//! Running a test case in a child process with a timeout, for cases that
//! crashed or hung before their fix: a regression then fails the test
//! rather than killing (or stalling) the whole harness.
//!
//! The test binary is re-executed with [`CASE_VAR`] naming the case and
//! `--exact TEST`; in the child, [`in_child`] runs the case's body.
#![allow(dead_code)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The variable that tells a child which case to run.
pub const CASE_VAR: &str = "PARLOOP_TEST_CASE";

/// Runs `body` here when this process is the child for `case`; otherwise
/// re-executes this test (`test`, its full name) in a child with `env`
/// and waits at most `timeout`, failing when the child fails, crashes or
/// runs too long.
pub fn in_child(test: &str, case: &str, env: &[(&str, &str)], timeout: Duration, body: impl FnOnce()) {
    match std::env::var(CASE_VAR) {
        Ok(c) if c == case => return body(),
        // A child runs its own case only.
        Ok(_) => return,
        Err(_) => {}
    }
    let (ok, text) = run_child(test, case, env, timeout);
    assert!(ok, "case `{case}` failed in its child process:\n{text}");
}

/// Runs the child of `case`: (whether it succeeded, its output).
pub fn run_child(test: &str, case: &str, env: &[(&str, &str)], timeout: Duration) -> (bool, String) {
    let exe = std::env::current_exe().expect("the test binary");
    let dir = std::env::temp_dir().join(format!("parloop-child-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join(format!("{case}.log"));
    let file = std::fs::File::create(&log).unwrap();
    let mut cmd = Command::new(exe);
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CASE_VAR, case)
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn the test binary");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    match status {
        Some(s) if s.success() => (true, text),
        Some(s) => (false, format!("exit status {s}\n{text}")),
        None => (false, format!("timed out after {timeout:?}\n{text}")),
    }
}
