//! Helpers of the linear algebra and solver tests (`#[path]`-included by
//! `cg.rs`, `bicgstab.rs`, `linalg.rs` and `matrix_device.rs`): random
//! inputs and the true residual of a solution.
#![allow(dead_code)]

use parloop::{Dat, Mat};

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
}

/// `||b - A x|| / ||b||` from the matrix's CSR copy, on the host.
pub fn true_relative_residual(a: &Mat<f64>, b: &Dat<f64>, x: &Dat<f64>) -> f64 {
    let csr = a.to_csr().unwrap();
    let (b, x) = (b.values().unwrap(), x.values().unwrap());
    let mut rr = 0.0;
    for (i, bi) in b.iter().enumerate() {
        let ax: f64 = (csr.row_ptr[i]..csr.row_ptr[i + 1]).map(|k| csr.vals[k] * x[csr.cols[k]]).sum();
        rr += (bi - ax) * (bi - ax);
    }
    rr.sqrt() / b.iter().map(|v| v * v).sum::<f64>().sqrt()
}
