//! Which device backend the device-path tests compare with `seq`: the
//! emulated device here and in CI, a GPU where `PARLOOP_TEST_DEVICE=cuda`
//! (the GPU bundle's `run.sh` sets it), so that the same tests check the
//! real CUDA path on a lent GPU.
#![allow(dead_code)]

use parloop::Backend;

/// `emu` unless `PARLOOP_TEST_DEVICE` says `cuda`; any other value is a
/// mistake in the test set-up and fails loudly.
pub fn device_backend() -> Backend {
    match std::env::var("PARLOOP_TEST_DEVICE").as_deref() {
        Err(_) | Ok("") | Ok("emu") => Backend::Emu,
        Ok("cuda") => Backend::Cuda,
        Ok(other) => panic!("PARLOOP_TEST_DEVICE={other}: expected emu or cuda"),
    }
}
