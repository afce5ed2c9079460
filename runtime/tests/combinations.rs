//! Feature combinations against plain Rust, on every backend (seq, threads
//! with small and default blocks, the device with its strategies), eager
//! and lazy: loops over subsets through maps, increments under maximum
//! contention and through map rows with repeated entries, wide dims,
//! integer and f32 data and reductions, one dat used directly and through a
//! map in one loop, chains of fused direct loops, and block and rectangular
//! matrices (assembly, products, `zero_rows`, Matrix Market). A result
//! that depends on the backend, the strategy, the block size or the trace
//! is a bug, whichever of them is right.

#[path = "support/device.rs"]
mod device;

mod combinations {
    pub mod aliasing;
    pub mod contention;
    pub mod fusion;
    pub mod matrix;
    pub mod subsets;
}

use device::device_backend;
use parloop::{Backend, Runtime, Strategy};

/// Every device strategy, and the automatic choice.
pub const ALL_STRATEGIES: &[Option<Strategy>] =
    &[None, Some(Strategy::Staged), Some(Strategy::StagedAtomic), Some(Strategy::Atomic), Some(Strategy::GlobalColour)];

/// The runtimes a test compares, each with a label: seq, threads with
/// blocks of `threads_part` elements and with its default, the device with
/// each of `strategies` (blocks of `device_part` elements when given);
/// eager, then lazy.
pub fn configs(
    strategies: &[Option<Strategy>],
    threads_part: usize,
    device_part: Option<usize>,
) -> Vec<(String, Runtime)> {
    let mut v = Vec::new();
    for lazy in [false, true] {
        v.push((format!("seq lazy={lazy}"), Runtime::with_lazy(Backend::Seq, lazy).unwrap()));
        let mut t = Runtime::with_lazy(Backend::Threads, lazy).unwrap();
        t.set_part_size(Some(threads_part)).unwrap();
        v.push((format!("threads part={threads_part} lazy={lazy}"), t));
        v.push((format!("threads lazy={lazy}"), Runtime::with_lazy(Backend::Threads, lazy).unwrap()));
        let dev = device_backend();
        for &s in strategies {
            let mut rt = Runtime::with_lazy(dev, lazy).unwrap();
            rt.set_strategy(s);
            rt.set_part_size(device_part).unwrap();
            v.push((format!("{dev} {s:?} part={device_part:?} lazy={lazy}"), rt));
        }
    }
    v
}

/// xorshift64: reproducible inputs without a dependency.
pub struct Rng(pub u64);

impl Rng {
    fn step(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.step() % n as u64) as usize
    }
}
