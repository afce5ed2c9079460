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

// ------------------------------------------------------------ MIN / MAX

/// The accepted forms of a running minimum and maximum.
#[parloop::kernel]
fn extremes(v: &f64, lo: &mut f64, hi: &mut [f64; 2]) {
    *lo = lo.min(*v);
    hi[0] = hi[0].max(*v);
    if 2.0 * *v > hi[1] {
        hi[1] = 2.0 * *v;
    }
}

#[parloop::kernel]
fn min_by_comparison(v: &i32, lo: &mut i32) {
    if *lo > *v {
        *lo = *v;
    }
}

/// Misuses a new user wrote: each gave a different answer on seq,
/// threads and emu (the running value, a block's, the initial value).
#[parloop::kernel]
fn adds_to_a_min(v: &f64, g: &mut f64) {
    *g += *v;
}

#[parloop::kernel]
fn assigns_a_max(v: &f64, g: &mut f64) {
    *g = *v;
}

#[parloop::kernel]
fn reads_a_min(v: &f64, g: &mut f64, seen: &mut f64) {
    *seen = *g;
    *g = g.min(*v);
}

#[parloop::kernel]
fn max_used_as_min(v: &f64, g: &mut f64) {
    *g = g.max(*v);
}

#[test]
fn min_and_max_globals_take_only_running_minima_and_maxima() {
    for rt in backends() {
        let backend = format!("{:?}", rt.backend());
        let n = 5000;
        let s = rt.set("s", n).unwrap();
        let values: Vec<f64> = (0..n).map(|i| ((i * 7919) % 4999) as f64 - 2500.0).collect();
        let v = rt.dat("v", &s, 1, values.clone()).unwrap();
        let lo = rt.global("lo", &[0.0f64]).unwrap();
        let hi = rt.global("hi", &[0.0f64, 0.0]).unwrap();
        rt.par_loop(extremes::KERNEL, &s, &[v.arg(Access::READ), lo.arg(Access::MIN), hi.arg(Access::MAX)]).unwrap();
        let (min, max) = values.iter().fold((0.0f64, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
        assert_eq!(lo.value().unwrap(), min, "{backend}");
        assert_eq!(hi.values().unwrap(), vec![max, (2.0 * max).max(0.0)], "{backend}");
        let iv = rt.dat("iv", &s, 1, (0..n as i32).map(|i| (i * 31) % 977 - 400).collect()).unwrap();
        let ilo = rt.global("ilo", &[0i32]).unwrap();
        rt.par_loop(min_by_comparison::KERNEL, &s, &[iv.arg(Access::READ), ilo.arg(Access::MIN)]).unwrap();
        assert_eq!(ilo.value().unwrap(), -400, "{backend}");

        let g = rt.global("g", &[0.0f64]).unwrap();
        let seen = rt.dat("seen", &s, 1, vec![0.0; n]).unwrap();
        for (kernel, access, param) in [
            (adds_to_a_min::KERNEL, Access::MIN, "g"),
            (assigns_a_max::KERNEL, Access::MAX, "g"),
            (max_used_as_min::KERNEL, Access::MIN, "g"),
        ] {
            let err = rt.par_loop(kernel, &s, &[v.arg(Access::READ), g.arg(access)]).unwrap_err().to_string();
            assert!(err.contains(&format!("parameter `{param}`")) && err.contains("running"), "{backend}: {err}");
        }
        let err = rt
            .par_loop(reads_a_min::KERNEL, &s, &[v.arg(Access::READ), g.arg(Access::MIN), seen.arg(Access::WRITE)])
            .unwrap_err();
        assert!(err.to_string().contains("MIN on parameter `g`"), "{backend}: {err}");
        // The same kernel with RW-like uses stays fine where a MAX is
        // what it computes.
        rt.par_loop(max_used_as_min::KERNEL, &s, &[v.arg(Access::READ), g.arg(Access::MAX)]).unwrap();
        assert_eq!(g.value().unwrap(), max, "{backend}");
    }
}

/// `let _ = p;` silences an unused parameter without using it: an INC or
/// MIN argument may take it (it was refused as a read).
#[parloop::kernel]
fn ignores_its_outputs(v: &f64, count: &mut f64, lo: &mut f64) {
    let _ = count;
    let _ = lo;
    let _ = v;
}

#[test]
fn a_discarded_name_is_no_use_of_the_parameter() {
    for rt in backends() {
        let s = rt.set("s", 10).unwrap();
        let v = rt.dat("v", &s, 1, vec![1.0; 10]).unwrap();
        let (count, lo) = (rt.global("count", &[3.0f64]).unwrap(), rt.global("lo", &[-1.0f64]).unwrap());
        rt.par_loop(
            ignores_its_outputs::KERNEL,
            &s,
            &[v.arg(Access::READ), count.arg(Access::INC), lo.arg(Access::MIN)],
        )
        .unwrap();
        assert_eq!((count.value().unwrap(), lo.value().unwrap()), (3.0, -1.0));
    }
}

/// A time step a new user declared INC: the running minimum of a
/// global. The refusal said "use RW or WRITE", which a global refuses in
/// turn; it names MIN (or MAX) for a global, and keeps RW or WRITE for a
/// dat.
#[parloop::kernel]
fn min_as_inc(v: &f64, dt: &mut f64) {
    *dt = dt.min(0.5 * *v);
}

#[parloop::kernel]
fn max_as_inc(v: &f64, top: &mut f64) {
    if *v > *top {
        *top = *v;
    }
}

#[test]
fn inc_on_a_min_or_max_points_a_global_to_min_or_max_and_a_dat_to_rw() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let s = rt.set("s", 4).unwrap();
    let v = rt.dat("v", &s, 1, vec![1.0, 0.5, 2.0, 0.25]).unwrap();
    let g = rt.global("dt", &[f64::INFINITY]).unwrap();
    let d = rt.dat("d", &s, 1, vec![f64::INFINITY; 4]).unwrap();
    let inc = |kernel, arg| rt.par_loop(kernel, &s, &[v.arg(Access::READ), arg]).unwrap_err().to_string();

    // Globals: the exact reduction where the body is one, never RW/WRITE.
    let err = inc(min_as_inc::KERNEL, g.arg(Access::INC));
    assert!(err.contains("INC on parameter `dt`") && err.contains("use `Access::MIN`"), "{err}");
    // The use that is no increment, as written.
    assert!(err.contains("which the kernel uses it in `*dt = dt.min(0.5 * *v)`"), "{err}");
    assert!(!err.contains("Access::MAX") && !err.contains("use RW or WRITE"), "{err}");
    let err = inc(max_as_inc::KERNEL, g.arg(Access::INC));
    assert!(err.contains("INC on parameter `top`") && err.contains("use `Access::MAX`"), "{err}");
    assert!(err.contains("which the kernel uses it in `*v > *top`"), "{err}");
    assert!(!err.contains("Access::MIN") && !err.contains("use RW or WRITE"), "{err}");
    // Neither a minimum nor a maximum: both named, and adding.
    let err = inc(assigns_a_max::KERNEL, g.arg(Access::INC));
    assert!(err.contains("`Access::MIN` or `Access::MAX`") && err.contains("only add to it"), "{err}");
    assert!(!err.contains("use RW or WRITE"), "{err}");
    // And the advice followed works.
    rt.par_loop(min_as_inc::KERNEL, &s, &[v.arg(Access::READ), g.arg(Access::MIN)]).unwrap();
    assert_eq!(g.value().unwrap(), 0.125);

    // Dats: RW or WRITE, as before (a dat takes no MIN or MAX).
    for kernel in [min_as_inc::KERNEL, max_as_inc::KERNEL, assigns_a_max::KERNEL] {
        let err = inc(kernel, d.arg(Access::INC));
        assert!(err.contains("use RW or WRITE, or only add to it"), "{err}");
        assert!(!err.contains("Access::MIN") && !err.contains("Access::MAX"), "{err}");
    }
}
