//! Helpers of the linear algebra and solver tests (`#[path]`-included by
//! `cg.rs`, `bicgstab.rs`, `linalg.rs` and `matrix_device.rs`): random
//! inputs ([`Rng`]) and the true residual of a solution.
#![allow(dead_code)]

use parloop::{Dat, Mat};

#[path = "rng.rs"]
mod rng;
pub use rng::Rng;

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
