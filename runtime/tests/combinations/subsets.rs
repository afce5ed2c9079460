//! loops over subsets with indirect INC / RW / WRITE through maps,
//! on every backend (seq, threads with small blocks, the device with each
//! strategy), eager and lazy, against plain Rust. Subsets that are empty,
//! one element, the whole set, and random.

use parloop::{Access, Arg, Runtime};

fn configs() -> Vec<(String, Runtime)> {
    crate::configs(crate::ALL_STRATEGIES, 3, Some(8))
}

use crate::Rng;

#[parloop::kernel]
fn spread2(w: &f64, n: &mut [[f64; 2]; 2]) {
    n[0][0] += *w;
    n[0][1] -= 2.0 * *w;
    n[1][0] += 3.0 * *w;
    n[1][1] += 0.5;
}

#[parloop::kernel]
fn rw_one(w: &f64, x: &mut [f64; 3]) {
    x[0] = x[0] * 2.0 + *w;
    x[1] += x[0];
    x[2] = -x[2];
}

#[parloop::kernel]
fn put_one(w: &f64, i: &i64, x: &mut f64) {
    *x = *w + 1000.0 * (*i as f64);
}

#[parloop::kernel]
fn gather_sum(a: &[f64; 2], b: &[f64; 2], e: &mut f64, g: &mut f64) {
    *e = a[0] + 10.0 * a[1] - b[0] * b[1];
    *g += *e;
}

/// Indirect vector INC over subsets of every kind, on every backend.
#[test]
fn subset_indirect_inc_matches_reference() {
    let (nn, ne) = (37usize, 120usize);
    let mut rng = Rng(0x1234_5678);
    let map: Vec<i32> = (0..2 * ne).map(|_| rng.below(nn) as i32).collect();
    let w: Vec<f64> = (0..ne).map(|e| 1.0 + (e % 7) as f64 * 0.25).collect();
    let random: Vec<usize> = (0..ne).filter(|_| rng.below(3) == 0).collect();
    let subsets: Vec<(&str, Vec<usize>)> = vec![
        ("empty", vec![]),
        ("first", vec![0]),
        ("last", vec![ne - 1]),
        ("all", (0..ne).collect()),
        ("random", random),
        ("tail", (ne - 5..ne).collect()),
    ];
    for (label, rt) in configs() {
        let nodes = rt.set("nodes", nn).unwrap();
        let edges = rt.set("edges", ne).unwrap();
        let e2n = rt.map("e2n", &edges, &nodes, 2, map.clone()).unwrap();
        let wd = rt.dat("w", &edges, 1, w.clone()).unwrap();
        for (name, idx) in &subsets {
            let n0: Vec<f64> = (0..2 * nn).map(|k| k as f64).collect();
            let n = rt.dat(&format!("n_{name}"), &nodes, 2, n0.clone()).unwrap();
            let sub = rt.subset(&format!("s_{name}"), &edges, idx.clone()).unwrap();
            for _ in 0..2 {
                rt.par_loop(spread2::KERNEL, &sub, &[wd.arg(Access::READ), n.arg_vec(&e2n, Access::INC)]).unwrap();
            }
            let mut want = n0.clone();
            for _ in 0..2 {
                for &e in idx {
                    let (p, q) = (map[2 * e] as usize, map[2 * e + 1] as usize);
                    want[2 * p] += w[e];
                    want[2 * p + 1] -= 2.0 * w[e];
                    want[2 * q] += 3.0 * w[e];
                    want[2 * q + 1] += 0.5;
                }
            }
            let got = n.values().unwrap();
            for k in 0..want.len() {
                assert!(
                    (got[k] - want[k]).abs() <= 1e-12 * want[k].abs().max(1.0),
                    "{label} subset {name}: n[{k}] = {}, want {}",
                    got[k],
                    want[k]
                );
            }
        }
    }
}

/// Indirect RW and WRITE over a subset whose elements reach distinct
/// entities, through a map that is not injective on the whole set.
#[test]
fn subset_indirect_rw_and_write_through_a_non_injective_map() {
    // cells -> nodes, arity 1: cell c -> node c / 2 (pairs of cells share a node).
    let (nn, nc) = (20usize, 40usize);
    let map: Vec<i32> = (0..nc as i32).map(|c| c / 2).collect();
    let evens: Vec<usize> = (0..nc).step_by(2).collect();
    let w: Vec<f64> = (0..nc).map(|c| c as f64 * 0.5).collect();
    for (label, rt) in configs() {
        let nodes = rt.set("nodes", nn).unwrap();
        let cells = rt.set("cells", nc).unwrap();
        let c2n = rt.map("c2n", &cells, &nodes, 1, map.clone()).unwrap();
        let wd = rt.dat("w", &cells, 1, w.clone()).unwrap();
        let x0: Vec<f64> = (0..3 * nn).map(|k| k as f64 + 1.0).collect();
        let x = rt.dat("x", &nodes, 3, x0.clone()).unwrap();
        let y = rt.dat("y", &nodes, 1, vec![-1.0; nn]).unwrap();
        let ev = rt.subset("evens", &cells, evens.clone()).unwrap();
        // On the whole set, both are races and must be refused.
        assert!(
            rt.par_loop(rw_one::KERNEL, &cells, &[wd.arg(Access::READ), x.arg_via(&c2n, 0, Access::RW)]).is_err(),
            "{label}"
        );
        assert!(
            rt.par_loop(
                put_one::KERNEL,
                &cells,
                &[wd.arg(Access::READ), Arg::index(), y.arg_via(&c2n, 0, Access::WRITE)]
            )
            .is_err(),
            "{label}"
        );
        // Over the evens each node is reached once.
        let r1 = rt.par_loop(rw_one::KERNEL, &ev, &[wd.arg(Access::READ), x.arg_via(&c2n, 0, Access::RW)]);
        let r2 =
            rt.par_loop(put_one::KERNEL, &ev, &[wd.arg(Access::READ), Arg::index(), y.arg_via(&c2n, 0, Access::WRITE)]);
        r1.unwrap_or_else(|e| panic!("{label}: RW over the evens refused: {e}"));
        r2.unwrap_or_else(|e| panic!("{label}: WRITE over the evens refused: {e}"));
        let mut wx = x0.clone();
        let mut wy = vec![-1.0; nn];
        for &c in &evens {
            let p = map[c] as usize;
            wx[3 * p] = wx[3 * p] * 2.0 + w[c];
            wx[3 * p + 1] += wx[3 * p];
            wx[3 * p + 2] = -wx[3 * p + 2];
            wy[p] = w[c] + 1000.0 * c as f64;
        }
        assert_eq!(x.values().unwrap(), wx, "{label}: RW");
        assert_eq!(y.values().unwrap(), wy, "{label}: WRITE");
    }
}

/// Direct WRITE and global INC over a subset, reading one dat both
/// directly (over nodes) and through a map in one loop.
#[test]
fn subset_reads_one_dat_directly_and_indirectly() {
    let nn = 50usize;
    // nodes -> nodes: each node's neighbour (n * 7 + 3) % nn.
    let nbr: Vec<i32> = (0..nn).map(|n| ((n * 7 + 3) % nn) as i32).collect();
    let a0: Vec<f64> = (0..2 * nn).map(|k| (k as f64).sin()).collect();
    let idx: Vec<usize> = (0..nn).filter(|n| n % 3 != 1).collect();
    for (label, rt) in configs() {
        let nodes = rt.set("nodes", nn).unwrap();
        let m = rt.map("nbr", &nodes, &nodes, 1, nbr.clone()).unwrap();
        let a = rt.dat("a", &nodes, 2, a0.clone()).unwrap();
        let e = rt.dat("e", &nodes, 1, vec![7.0; nn]).unwrap();
        let g = rt.global("g", &[0.5f64]).unwrap();
        let sub = rt.subset("sub", &nodes, idx.clone()).unwrap();
        rt.par_loop(
            gather_sum::KERNEL,
            &sub,
            &[a.arg(Access::READ), a.arg_via(&m, 0, Access::READ), e.arg(Access::WRITE), g.arg(Access::INC)],
        )
        .unwrap();
        let mut we = vec![7.0; nn];
        let mut wg = 0.5;
        for &n in &idx {
            let q = nbr[n] as usize;
            we[n] = a0[2 * n] + 10.0 * a0[2 * n + 1] - a0[2 * q] * a0[2 * q + 1];
            wg += we[n];
        }
        assert_eq!(e.values().unwrap(), we, "{label}");
        let got = g.value().unwrap();
        assert!((got - wg).abs() < 1e-12 * wg.abs().max(1.0), "{label}: g = {got}, want {wg}");
    }
}
