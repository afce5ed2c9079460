//! The tests' reproducible random numbers (`#[path]`-included by
//! `support/mod.rs` and `support/solvers.rs`).
#![allow(dead_code)]

/// A reproducible pseudo-random sequence (xorshift); the seed must not be 0.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [-1, 1).
    pub fn signed(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
    /// `n` values uniform in [-1, 1).
    pub fn signed_vec(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.signed()).collect()
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// One of `xs`, uniformly.
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
}
