//! The INC rule, on every backend: a kernel only adds to an INC parameter
//! (the attribute rejects any other use), the value the parameter starts
//! from is not part of the contract, and the target ends up as its value
//! before the loop plus everything the kernel added. Direct, indirect,
//! vector, global, subset and matrix INC arguments all start from nonzero
//! targets here, with integer-valued floats so that every sum is exact
//! whatever the order: a backend that zeroed a target, dropped the
//! starting value or added a private copy twice would fail.

use parloop::{Access, Backend, Runtime};

#[parloop::kernel]
fn add_direct(w: &f64, d: &mut [f64; 2]) {
    d[0] += *w;
    d[1] -= 2.0 * *w;
}

#[parloop::kernel]
fn add_indirect(w: &f64, a: &mut f64, b: &mut [[f64; 1]; 2], g: &mut f64) {
    *a += *w;
    b[0][0] += 3.0 * *w;
    b[1][0] += 5.0 * *w;
    *g += *w;
}

#[parloop::kernel]
fn add_mat(w: &f64, m: &mut [[f64; 2]; 2]) {
    m[0][0] += *w;
    m[0][1] += 2.0 * *w;
    m[1][0] += 3.0 * *w;
    m[1][1] += 4.0 * *w;
}

/// Every backend this machine runs: seq and threads always, emu where its
/// compiler is present, cuda where a GPU is.
fn backends() -> Vec<Runtime> {
    [Backend::Seq, Backend::Threads, Backend::Emu, Backend::Cuda]
        .into_iter()
        .filter_map(|b| Runtime::with_backend(b).ok())
        .collect()
}

#[test]
fn inc_adds_to_the_starting_value_on_every_backend() {
    let ran: Vec<Backend> = backends().iter().map(|rt| rt.backend()).collect();
    assert!(ran.contains(&Backend::Seq) && ran.contains(&Backend::Threads));
    for rt in backends() {
        let backend = rt.backend();
        let (n_nodes, n_edges) = (300usize, 1000usize);
        let nodes = rt.set("nodes", n_nodes).unwrap();
        let edges = rt.set("edges", n_edges).unwrap();
        let e2n_values: Vec<i32> =
            (0..n_edges).flat_map(|e| [(e * 7 % n_nodes) as i32, (e * 13 % n_nodes) as i32]).collect();
        let e2n = rt.map("e2n", &edges, &nodes, 2, e2n_values.clone()).unwrap();
        let w_values: Vec<f64> = (0..n_edges).map(|e| (e % 17) as f64 - 8.0).collect();
        let w = rt.dat("w", &edges, 1, w_values.clone()).unwrap();

        // Direct INC from nonzero values.
        let d0: Vec<f64> = (0..2 * n_edges).map(|k| (k % 11) as f64 * 4.0 + 1.0).collect();
        let d = rt.dat("d", &edges, 2, d0.clone()).unwrap();
        rt.par_loop(add_direct::KERNEL, &edges, &[w.arg(Access::READ), d.arg(Access::INC)]).unwrap();
        let want: Vec<f64> =
            (0..n_edges).flat_map(|e| [d0[2 * e] + w_values[e], d0[2 * e + 1] - 2.0 * w_values[e]]).collect();
        assert_eq!(d.values().unwrap(), want, "{backend}: direct INC");

        // Indirect, vector and global INC from nonzero values.
        let a0: Vec<f64> = (0..n_nodes).map(|k| (k % 5) as f64 + 100.0).collect();
        let a = rt.dat("a", &nodes, 1, a0.clone()).unwrap();
        let b = rt.dat("b", &nodes, 1, a0.clone()).unwrap();
        let g = rt.global("g", &[1000.0f64]).unwrap();
        rt.par_loop(
            add_indirect::KERNEL,
            &edges,
            &[w.arg(Access::READ), a.arg_via(&e2n, 1, Access::INC), b.arg_vec(&e2n, Access::INC), g.arg(Access::INC)],
        )
        .unwrap();
        let (mut wa, mut wb) = (a0.clone(), a0.clone());
        for e in 0..n_edges {
            let (p, q) = (e2n_values[2 * e] as usize, e2n_values[2 * e + 1] as usize);
            wa[q] += w_values[e];
            wb[p] += 3.0 * w_values[e];
            wb[q] += 5.0 * w_values[e];
        }
        assert_eq!(a.values().unwrap(), wa, "{backend}: indirect INC");
        assert_eq!(b.values().unwrap(), wb, "{backend}: vector INC");
        assert_eq!(g.value().unwrap(), 1000.0 + w_values.iter().sum::<f64>(), "{backend}: global INC");

        // A direct INC over a subset (which runs as an indirect one).
        let some = rt.subset("some", &edges, (0..n_edges).step_by(3).collect()).unwrap();
        rt.par_loop(add_direct::KERNEL, &some, &[w.arg(Access::READ), d.arg(Access::INC)]).unwrap();
        let mut want2 = want.clone();
        for e in (0..n_edges).step_by(3) {
            want2[2 * e] += w_values[e];
            want2[2 * e + 1] -= 2.0 * w_values[e];
        }
        assert_eq!(d.values().unwrap(), want2, "{backend}: direct INC over a subset");

        // A matrix INC adds to what is there.
        let s = rt.sparsity("s", &[(&e2n, &e2n)], (1, 1)).unwrap();
        let m = rt.mat::<f64>("M", &s).unwrap();
        for _ in 0..2 {
            rt.par_loop(add_mat::KERNEL, &edges, &[w.arg(Access::READ), m.arg(&e2n, &e2n, Access::INC)]).unwrap();
        }
        let csr = m.to_csr().unwrap();
        let mut dense = std::collections::BTreeMap::<(usize, usize), f64>::new();
        for e in 0..n_edges {
            let r = [e2n_values[2 * e] as usize, e2n_values[2 * e + 1] as usize];
            for i in 0..2 {
                for j in 0..2 {
                    *dense.entry((r[i], r[j])).or_default() += 2.0 * (1 + 2 * i + j) as f64 * w_values[e];
                }
            }
        }
        for row in 0..n_nodes {
            for k in csr.row_ptr[row]..csr.row_ptr[row + 1] {
                assert_eq!(csr.vals[k], dense[&(row, csr.cols[k])], "{backend}: matrix INC ({row}, {})", csr.cols[k]);
            }
        }
    }
}
