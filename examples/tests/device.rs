//! The `parloop-device` command line in subprocesses, on the emulated
//! device (no GPU needed): a closed stdout, nonsense counts and a backend
//! without a device end with a message and exit status 1 or 2, never a
//! panic or a silently changed value.

#[path = "support/fails.rs"]
mod fails;
use fails::fails_with;
use std::process::{Command, Output, Stdio};

const DEVICE: &str = env!("CARGO_BIN_EXE_parloop-device");

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(DEVICE).args(args).envs(env.iter().copied()).env_remove("PARLOOP_PROFILE").output().unwrap()
}

#[test]
fn a_closed_stdout_is_an_error_not_a_panic() {
    // println! panicked: "failed printing to stdout: Broken pipe".
    let mut child = Command::new(DEVICE)
        .args(["--backend", "emu", "--bytes", "1024", "--repeats", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    fails_with(&out, 1, &["parloop-device: error: <stdout>", "Broken pipe"]);
}

#[test]
fn counts_and_backends_are_checked() {
    // --repeats 0 ran one copy; now it is refused, as is --bytes 0.
    fails_with(&run(&["--backend", "emu", "--repeats", "0"], &[]), 1, &["--repeats", "0: at least 1"]);
    fails_with(&run(&["--backend", "emu", "--bytes", "0"], &[]), 1, &["--bytes", "0: a copy of at least 1 byte"]);
    fails_with(&run(&["--repeats", "-2"], &[]), 2, &["`-2` is not a non-negative integer"]);
    // seq and threads have no device: --help lists auto, emu, cuda only.
    fails_with(&run(&["--backend", "seq"], &[]), 2, &["possible values: auto, emu, cuda"]);
    // PARLOOP_BACKEND was ignored (the option's default `auto` won).
    fails_with(
        &run(&["--bytes", "8"], &[("PARLOOP_BACKEND", "threads")]),
        1,
        &["PARLOOP_BACKEND=threads", "emu or cuda"],
    );
    let out = run(&["--bytes", "1024", "--repeats", "2"], &[("PARLOOP_BACKEND", "emu")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("backend emu"), "{stdout}");
    // 1024 bytes were "(0 MiB per copy)".
    assert!(stdout.contains("(1.0 KiB per copy"), "{stdout}");
}
