//! Kernel parameters of shape `&[[T; M]; 1]`: what `arg_vec` through a map
//! of arity 1 passes, and an element matrix or vector with one row. The
//! translation took them for `[T; M]`: `n.len()` was M on the device (1 in
//! Rust), and `n[0][k]` did not translate.

mod support;

#[path = "support/device.rs"]
mod device;

use device::device_backend;
use parloop::{Access, Backend, Runtime};

/// `n.len()` of a `&[[f64; 4]; 1]` is 1 in Rust.
#[parloop::kernel]
fn outer_len(n: &[[f64; 4]; 1], o: &mut f64) {
    *o = n.len() as f64;
}

/// `n.len()` of a `&[[f64; 4]; 2]` is 2.
#[parloop::kernel]
fn outer_len2(n: &[[f64; 4]; 2], o: &mut f64) {
    *o = n.len() as f64;
}

/// One row indexed as rows, read and incremented: `s[0][k] += 2 n[0][k] + k`.
#[parloop::kernel]
fn one_row(n: &[[f64; 4]; 1], s: &mut [[f64; 4]; 1]) {
    for k in 0..n[0].len() {
        s[0][k] += 2.0 * n[0][k] + k as f64;
    }
}

/// A helper taking one row.
#[parloop::device]
fn row_sum(r: &[[f64; 4]; 1]) -> f64 {
    r[0][0] + r[0][1] + r[0][2] + r[0][3]
}

#[parloop::kernel]
fn sum_one_row(n: &[[f64; 4]; 1], o: &mut f64) {
    *o = row_sum(n) * n.len() as f64;
}

#[test]
fn len_of_a_one_row_nested_array_parameter_is_one_on_every_backend() {
    for b in [Backend::Seq, Backend::Threads, device_backend()] {
        let rt = Runtime::with_backend(b).unwrap();
        let nodes = rt.set("nodes", 3).unwrap();
        let cells = rt.set("cells", 4).unwrap();
        let m1 = rt.map("m1", &cells, &nodes, 1, vec![0, 1, 2, 0]).unwrap();
        let m2 = rt.map("m2", &cells, &nodes, 2, vec![0, 1, 2, 0, 1, 1, 2, 2]).unwrap();
        let x = rt.dat("x", &nodes, 4, vec![1.0; 12]).unwrap();
        let o = rt.dat("o", &cells, 1, vec![0.0; 4]).unwrap();
        rt.par_loop(outer_len2::KERNEL, &cells, &[x.arg_vec(&m2, Access::READ), o.arg(Access::WRITE)]).unwrap();
        assert_eq!(o.values().unwrap(), vec![2.0; 4], "{b}: arity 2");
        rt.par_loop(outer_len::KERNEL, &cells, &[x.arg_vec(&m1, Access::READ), o.arg(Access::WRITE)]).unwrap();
        assert_eq!(o.values().unwrap(), vec![1.0; 4], "{b}: arity 1");
    }
}

#[test]
fn one_row_parameters_index_as_rows_on_every_backend() {
    for b in [Backend::Seq, Backend::Threads, device_backend()] {
        let rt = Runtime::with_backend(b).unwrap();
        let nodes = rt.set("nodes", 3).unwrap();
        let cells = rt.set("cells", 5).unwrap();
        let m1 = rt.map("m1", &cells, &nodes, 1, vec![0, 1, 2, 0, 2]).unwrap();
        let x = rt.dat("x", &nodes, 4, (0..12).map(f64::from).collect()).unwrap();
        let s = rt.dat("s", &nodes, 4, vec![0.5; 12]).unwrap();
        rt.par_loop(one_row::KERNEL, &cells, &[x.arg_vec(&m1, Access::READ), s.arg_vec(&m1, Access::INC)]).unwrap();
        // Node 0 is reached by cells 0 and 3, node 2 by cells 2 and 4.
        let want: Vec<f64> = (0..12)
            .map(|i| {
                let (node, k) = (i / 4, i % 4);
                let times = [2.0, 1.0, 2.0][node];
                0.5 + times * (2.0 * i as f64 + k as f64)
            })
            .collect();
        assert_eq!(s.values().unwrap(), want, "{b}: increments through one row");
        let o = rt.dat("o", &cells, 1, vec![0.0; 5]).unwrap();
        rt.par_loop(sum_one_row::KERNEL, &cells, &[x.arg_vec(&m1, Access::READ), o.arg(Access::WRITE)]).unwrap();
        assert_eq!(o.values().unwrap(), vec![6.0, 22.0, 38.0, 6.0, 38.0], "{b}: a helper's row");
    }
}

#[test]
fn one_row_kernels_compile_with_nvrtc_without_warnings() {
    if !support::nvrtc_available() {
        return;
    }
    for k in [outer_len::KERNEL, outer_len2::KERNEL, one_row::KERNEL, sum_one_row::KERNEL] {
        support::nvrtc_check(k).unwrap_or_else(|e| panic!("{}: {e}", k.name()));
    }
}
