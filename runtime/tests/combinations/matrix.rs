//! matrices with block dims (3,1), (1,3), (2,2), rectangular
//! (rows and columns on different sets through different maps), maps with
//! repeated entries in one row, assembled on every backend (seq, threads,
//! the device with its strategies, eager and lazy) against plain triplets;
//! `zero_rows` on block matrices after device assembly, `mult`, `to_csr`,
//! Matrix Market output, empty sets, f32 matrices.

use std::collections::BTreeMap;

use parloop::{Access, Backend, Csr, Runtime, Strategy};

fn configs() -> Vec<(String, Runtime)> {
    crate::configs(&[None, Some(Strategy::Atomic)], 3, None)
}

use crate::Rng;

type Triplets = BTreeMap<(usize, usize), f64>;

fn dense_of(csr: &Csr<f64>) -> Triplets {
    let mut t = Triplets::new();
    for r in 0..csr.row_ptr.len() - 1 {
        for k in csr.row_ptr[r]..csr.row_ptr[r + 1] {
            assert!(t.insert((r, csr.cols[k]), csr.vals[k]).is_none(), "entry ({r}, {}) stored twice", csr.cols[k]);
        }
    }
    t
}

fn assert_matches(csr: &Csr<f64>, want: &Triplets, what: &str) {
    let got = dense_of(csr);
    for (&(r, c), &w) in want {
        let g = got.get(&(r, c)).copied().unwrap_or_else(|| panic!("{what}: entry ({r}, {c}) missing"));
        assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{what}: ({r}, {c}) = {g}, want {w}");
    }
    for (&(r, c), &g) in &got {
        if !want.contains_key(&(r, c)) {
            assert_eq!(g, 0.0, "{what}: ({r}, {c}) = {g} outside the reference");
        }
    }
}

/// Rows: 2 nodes x dim 3; columns: 2 dofs x dim 1.
#[parloop::kernel]
fn rect31(w: &f64, a: &mut [[f64; 2]; 6]) {
    for i in 0..6 {
        for j in 0..2 {
            a[i][j] += *w * ((i * 2 + j) as f64 + 1.0) + (i as f64) * 0.125;
        }
    }
}

/// Rows: 1 dof x dim 1... (1, 3): rows 2 dofs x 1, columns 2 nodes x 3.
#[parloop::kernel]
fn rect13(w: &f64, a: &mut [[f64; 6]; 2]) {
    for i in 0..2 {
        for j in 0..6 {
            a[i][j] += *w * ((i * 6 + j) as f64 - 2.5);
        }
    }
}

/// Square (2, 2) through one map of arity 2: 4 x 4.
#[parloop::kernel]
fn sq22(x: &[[f64; 2]; 2], a: &mut [[f64; 4]; 4]) {
    for i in 0..4 {
        for j in 0..4 {
            a[i][j] += x[i / 2][i % 2] * 3.0 - x[j / 2][j % 2] + (i * 4 + j) as f64 * 0.5 + 1.0;
        }
    }
}

fn add_block(
    t: &mut Triplets,
    rows: &[usize],
    rdim: usize,
    cols: &[usize],
    cdim: usize,
    f: impl Fn(usize, usize) -> f64,
) {
    for (ri, &r) in rows.iter().enumerate() {
        for a in 0..rdim {
            for (ci, &c) in cols.iter().enumerate() {
                for b in 0..cdim {
                    *t.entry((r * rdim + a, c * cdim + b)).or_default() += f(ri * rdim + a, ci * cdim + b);
                }
            }
        }
    }
}

fn product(t: &Triplets, x: &[f64], rows: usize) -> Vec<f64> {
    let mut y = vec![0.0; rows];
    for (&(r, c), &v) in t {
        y[r] += v * x[c];
    }
    y
}

fn close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for k in 0..want.len() {
        assert!(
            (got[k] - want[k]).abs() <= 1e-11 * want[k].abs().max(1.0),
            "{what}: [{k}] = {}, want {}",
            got[k],
            want[k]
        );
    }
}

/// Rectangular block matrices (3,1) and (1,3) between two sets, through
/// two maps (with repeats in rows), assembled twice, then multiplied.
#[test]
fn rectangular_block_matrices_on_every_backend() {
    let (nn, nd, ne) = (9usize, 13usize, 40usize);
    let mut rng = Rng(0xdead_beef);
    let e2n: Vec<i32> = (0..2 * ne).map(|_| rng.below(nn) as i32).collect();
    let e2d: Vec<i32> = (0..2 * ne).map(|_| rng.below(nd) as i32).collect();
    let w: Vec<f64> = (0..ne).map(|e| 0.5 + (e % 5) as f64).collect();
    let xd: Vec<f64> = (0..nd).map(|k| (k as f64 * 0.37).cos()).collect();
    let xn: Vec<f64> = (0..3 * nn).map(|k| (k as f64 * 0.21).sin()).collect();
    let mut t31 = Triplets::new();
    let mut t13 = Triplets::new();
    for _ in 0..2 {
        for e in 0..ne {
            let rows = [e2n[2 * e] as usize, e2n[2 * e + 1] as usize];
            let cols = [e2d[2 * e] as usize, e2d[2 * e + 1] as usize];
            add_block(&mut t31, &rows, 3, &cols, 1, |i, j| w[e] * ((i * 2 + j) as f64 + 1.0) + (i as f64) * 0.125);
            add_block(&mut t13, &cols, 1, &rows, 3, |i, j| w[e] * ((i * 6 + j) as f64 - 2.5));
        }
    }
    for (label, rt) in configs() {
        let nodes = rt.set("nodes", nn).unwrap();
        let dofs = rt.set("dofs", nd).unwrap();
        let edges = rt.set("edges", ne).unwrap();
        let mn = rt.map("e2n", &edges, &nodes, 2, e2n.clone()).unwrap();
        let md = rt.map("e2d", &edges, &dofs, 2, e2d.clone()).unwrap();
        let wd = rt.dat("w", &edges, 1, w.clone()).unwrap();
        let s31 = rt.sparsity("s31", &[(&mn, &md)], (3, 1)).unwrap();
        let s13 = rt.sparsity("s13", &[(&md, &mn)], (1, 3)).unwrap();
        let a31 = rt.mat::<f64>("A31", &s31).unwrap();
        let a13 = rt.mat::<f64>("A13", &s13).unwrap();
        for _ in 0..2 {
            rt.par_loop(rect31::KERNEL, &edges, &[wd.arg(Access::READ), a31.arg(&mn, &md, Access::INC)]).unwrap();
            rt.par_loop(rect13::KERNEL, &edges, &[wd.arg(Access::READ), a13.arg(&md, &mn, Access::INC)]).unwrap();
        }
        assert_matches(&a31.to_csr().unwrap(), &t31, &format!("{label}: A31"));
        assert_matches(&a13.to_csr().unwrap(), &t13, &format!("{label}: A13"));
        // Products: A31 (3nn x nd) x (nd) and A13 (nd x 3nn) x (3nn).
        let x_d = rt.dat("x_d", &dofs, 1, xd.clone()).unwrap();
        let y_n = rt.dat("y_n", &nodes, 3, vec![f64::NAN; 3 * nn]).unwrap();
        rt.mult(&a31, &x_d, &y_n).unwrap();
        close(&y_n.values().unwrap(), &product(&t31, &xd, 3 * nn), &format!("{label}: A31 x"));
        let x_n = rt.dat("x_n", &nodes, 3, xn.clone()).unwrap();
        let y_d = rt.dat("y_d", &dofs, 1, vec![f64::NAN; nd]).unwrap();
        rt.mult(&a13, &x_n, &y_d).unwrap();
        close(&y_d.values().unwrap(), &product(&t13, &xn, nd), &format!("{label}: A13 x"));
        // Wrong operands are errors.
        assert!(rt.mult(&a31, &x_n, &y_n).is_err(), "{label}");
        assert!(rt.mult(&a31, &x_d, &y_d).is_err(), "{label}");
        // zero_rows on a rectangular matrix is refused, changes nothing.
        let b = rt.subset("b", &nodes, vec![0, 1]).unwrap();
        assert!(a31.zero_rows(&b, 1.0).is_err(), "{label}");
        assert_matches(&a31.to_csr().unwrap(), &t31, &format!("{label}: A31 after refused zero_rows"));
    }
}

/// Square (2,2) blocks with repeated entries in map rows ([k, k]):
/// assembled, zero_rows on a subset, then a product, on every backend
/// (zero_rows writes on the host after a device assembly: coherence).
#[test]
fn square_block_matrix_with_repeats_zero_rows_and_mult() {
    let (nn, ne) = (11usize, 30usize);
    let mut rng = Rng(0x5eed);
    let mut e2n: Vec<i32> = (0..2 * ne).map(|_| rng.below(nn) as i32).collect();
    for e in [0usize, 5, 17] {
        e2n[2 * e + 1] = e2n[2 * e]; // a degenerate element [k, k]
    }
    // Every node appears on a diagonal (so zero_rows finds the entries).
    for n in 0..nn {
        if !e2n.contains(&(n as i32)) {
            e2n[2 * (ne - 1 - n)] = n as i32;
        }
    }
    let x0: Vec<f64> = (0..2 * nn).map(|k| k as f64 * 0.1 - 0.7).collect();
    let v: Vec<f64> = (0..2 * nn).map(|k| 1.0 + (k % 3) as f64).collect();
    let mut t = Triplets::new();
    for e in 0..ne {
        let rows = [e2n[2 * e] as usize, e2n[2 * e + 1] as usize];
        let xe = |i: usize| x0[2 * rows[i / 2] + i % 2];
        add_block(&mut t, &rows, 2, &rows, 2, |i, j| xe(i) * 3.0 - xe(j) + (i * 4 + j) as f64 * 0.5 + 1.0);
    }
    let bidx = vec![0usize, 4, nn - 1];
    let mut tz = t.clone();
    for &r in &bidx {
        for a in 0..2 {
            let row = 2 * r + a;
            for ((rr, c), val) in tz.iter_mut() {
                if *rr == row {
                    *val = if *c == row { 2.5 } else { 0.0 };
                }
            }
        }
    }
    for (label, rt) in configs() {
        let nodes = rt.set("nodes", nn).unwrap();
        let edges = rt.set("edges", ne).unwrap();
        let m = rt.map("e2n", &edges, &nodes, 2, e2n.clone()).unwrap();
        let x = rt.dat("x", &nodes, 2, x0.clone()).unwrap();
        let s = rt.sparsity("s", &[(&m, &m)], (2, 2)).unwrap();
        let a = rt.mat::<f64>("A", &s).unwrap();
        rt.par_loop(sq22::KERNEL, &edges, &[x.arg_vec(&m, Access::READ), a.arg(&m, &m, Access::INC)]).unwrap();
        assert_matches(&a.to_csr().unwrap(), &t, &format!("{label}: assembled"));
        let vd = rt.dat("v", &nodes, 2, v.clone()).unwrap();
        let y = rt.dat("y", &nodes, 2, vec![0.0; 2 * nn]).unwrap();
        rt.mult(&a, &vd, &y).unwrap();
        close(&y.values().unwrap(), &product(&t, &v, 2 * nn), &format!("{label}: A v"));
        let b = rt.subset("b", &nodes, bidx.clone()).unwrap();
        a.zero_rows(&b, 2.5).unwrap();
        rt.mult(&a, &vd, &y).unwrap();
        close(&y.values().unwrap(), &product(&tz, &v, 2 * nn), &format!("{label}: A v after zero_rows"));
        assert_matches(&a.to_csr().unwrap(), &tz, &format!("{label}: after zero_rows"));
        // Assembling again adds on top of the zeroed rows.
        rt.par_loop(sq22::KERNEL, &edges, &[x.arg_vec(&m, Access::READ), a.arg(&m, &m, Access::INC)]).unwrap();
        let mut t2 = tz.clone();
        for (k, val) in &t {
            *t2.get_mut(k).unwrap() += val;
        }
        assert_matches(&a.to_csr().unwrap(), &t2, &format!("{label}: reassembled"));
        rt.mult(&a, &vd, &y).unwrap();
        close(&y.values().unwrap(), &product(&t2, &v, 2 * nn), &format!("{label}: A v reassembled"));
    }
}

/// Matrix Market round trip of a rectangular block matrix.
#[test]
fn matrix_market_of_a_rectangular_block_matrix() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let nodes = rt.set("nodes", 3).unwrap();
    let dofs = rt.set("dofs", 4).unwrap();
    let edges = rt.set("edges", 2).unwrap();
    let mn = rt.map("e2n", &edges, &nodes, 2, vec![0, 2, 2, 1]).unwrap();
    let md = rt.map("e2d", &edges, &dofs, 2, vec![3, 0, 1, 1]).unwrap();
    let w = rt.dat("w", &edges, 1, vec![1.0, -2.0]).unwrap();
    let s = rt.sparsity("s", &[(&mn, &md)], (3, 1)).unwrap();
    let a = rt.mat::<f64>("A", &s).unwrap();
    rt.par_loop(rect31::KERNEL, &edges, &[w.arg(Access::READ), a.arg(&mn, &md, Access::INC)]).unwrap();
    let dir = std::env::temp_dir().join(format!("parloop-probe-mm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("a.mtx");
    a.write_matrix_market(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines().filter(|l| !l.starts_with('%'));
    let header: Vec<usize> = lines.next().unwrap().split_whitespace().map(|t| t.parse().unwrap()).collect();
    assert_eq!(header, vec![9, 4, s.nnz()]);
    let csr = a.to_csr().unwrap();
    let want = dense_of(&csr);
    let mut got = Triplets::new();
    for l in lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (r, c, v): (usize, usize, f64) = (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].parse().unwrap());
        got.insert((r - 1, c - 1), v);
    }
    assert_eq!(got, want);
    std::fs::remove_dir_all(&dir).ok();
}

/// Empty iteration sets and empty row sets: assembly does nothing, the
/// product is zeros (or nothing), on every backend.
#[test]
fn empty_sets_and_matrices() {
    for (label, rt) in configs() {
        let nodes = rt.set("nodes", 5).unwrap();
        let none = rt.set("none", 0).unwrap();
        let edges = rt.set("edges", 0).unwrap();
        let m = rt.map("e2n", &edges, &nodes, 2, vec![]).unwrap();
        let s = rt.sparsity("s", &[(&m, &m)], (2, 2)).unwrap();
        assert_eq!(s.nnz(), 0, "{label}");
        let a = rt.mat::<f64>("A", &s).unwrap();
        let x = rt.dat("x", &nodes, 2, vec![1.0; 10]).unwrap();
        rt.par_loop(sq22::KERNEL, &edges, &[x.arg_vec(&m, Access::READ), a.arg(&m, &m, Access::INC)]).unwrap();
        let y = rt.dat("y", &nodes, 2, vec![f64::NAN; 10]).unwrap();
        rt.mult(&a, &x, &y).unwrap();
        assert_eq!(y.values().unwrap(), vec![0.0; 10], "{label}: product of an empty matrix");
        let csr = a.to_csr().unwrap();
        assert_eq!(csr.row_ptr, vec![0; 11], "{label}");
        // A set of size 0 for rows too.
        let m0 = rt.map("e2none", &edges, &none, 1, vec![]).unwrap();
        let s0 = rt.sparsity("s0", &[(&m0, &m0)], (1, 1)).unwrap();
        let a0 = rt.mat::<f64>("A0", &s0).unwrap();
        let x0 = rt.dat("x0", &none, 1, Vec::<f64>::new()).unwrap();
        let y0 = rt.dat("y0", &none, 1, Vec::<f64>::new()).unwrap();
        rt.mult(&a0, &x0, &y0).unwrap();
        assert!(y0.values().unwrap().is_empty(), "{label}");
    }
}

#[parloop::kernel]
fn sq22_f32(x: &[[f32; 2]; 2], a: &mut [[f32; 4]; 4]) {
    for i in 0..4 {
        for j in 0..4 {
            a[i][j] += x[i / 2][i % 2] * 3.0 - x[j / 2][j % 2] + (i * 4 + j) as f32 * 0.5;
        }
    }
}

/// An f32 block matrix assembled and multiplied on every backend: close to
/// the f64 reference.
#[test]
fn f32_block_matrix() {
    let (nn, ne) = (7usize, 20usize);
    let mut rng = Rng(77);
    let e2n: Vec<i32> = (0..2 * ne).map(|_| rng.below(nn) as i32).collect();
    let x0: Vec<f32> = (0..2 * nn).map(|k| k as f32 * 0.25 - 1.0).collect();
    let v: Vec<f32> = (0..2 * nn).map(|k| 1.0 + (k % 4) as f32).collect();
    let mut t = Triplets::new();
    for e in 0..ne {
        let rows = [e2n[2 * e] as usize, e2n[2 * e + 1] as usize];
        let xe = |i: usize| x0[2 * rows[i / 2] + i % 2] as f64;
        add_block(&mut t, &rows, 2, &rows, 2, |i, j| xe(i) * 3.0 - xe(j) + (i * 4 + j) as f64 * 0.5);
    }
    let want = product(&t, &v.iter().map(|&a| a as f64).collect::<Vec<_>>(), 2 * nn);
    for (label, rt) in configs() {
        let nodes = rt.set("nodes", nn).unwrap();
        let edges = rt.set("edges", ne).unwrap();
        let m = rt.map("e2n", &edges, &nodes, 2, e2n.clone()).unwrap();
        let x = rt.dat("x", &nodes, 2, x0.clone()).unwrap();
        let s = rt.sparsity("s", &[(&m, &m)], (2, 2)).unwrap();
        let a = rt.mat::<f32>("A", &s).unwrap();
        rt.par_loop(sq22_f32::KERNEL, &edges, &[x.arg_vec(&m, Access::READ), a.arg(&m, &m, Access::INC)]).unwrap();
        let vd = rt.dat("v", &nodes, 2, v.clone()).unwrap();
        let y = rt.dat("y", &nodes, 2, vec![0.0f32; 2 * nn]).unwrap();
        rt.mult(&a, &vd, &y).unwrap();
        let got = y.values().unwrap();
        for k in 0..want.len() {
            assert!(
                (got[k] as f64 - want[k]).abs() <= 1e-4 * want[k].abs().max(1.0),
                "{label}: y[{k}] = {}, want {}",
                got[k],
                want[k]
            );
        }
    }
}

/// Block (2,2) assembly over subsets of the elements (empty, one, random,
/// all) on every backend, then zero_rows with an empty subset and with the
/// whole set.
#[test]
fn block_assembly_over_subsets_and_zero_rows_extremes() {
    let (nn, ne) = (8usize, 25usize);
    let mut rng = Rng(0xabc);
    let e2n: Vec<i32> = (0..2 * ne).map(|_| rng.below(nn) as i32).collect();
    let x0: Vec<f64> = (0..2 * nn).map(|k| k as f64 * 0.5 - 2.0).collect();
    let random: Vec<usize> = (0..ne).filter(|_| rng.below(2) == 0).collect();
    let subsets: Vec<(&str, Vec<usize>)> =
        vec![("empty", vec![]), ("one", vec![ne / 2]), ("random", random), ("all", (0..ne).collect())];
    for (label, rt) in configs() {
        let nodes = rt.set("nodes", nn).unwrap();
        let edges = rt.set("edges", ne).unwrap();
        let m = rt.map("e2n", &edges, &nodes, 2, e2n.clone()).unwrap();
        let x = rt.dat("x", &nodes, 2, x0.clone()).unwrap();
        let s = rt.sparsity("s", &[(&m, &m)], (2, 2)).unwrap();
        for (name, idx) in &subsets {
            let a = rt.mat::<f64>(&format!("A_{name}"), &s).unwrap();
            let sub = rt.subset(&format!("sub_{name}"), &edges, idx.clone()).unwrap();
            rt.par_loop(sq22::KERNEL, &sub, &[x.arg_vec(&m, Access::READ), a.arg(&m, &m, Access::INC)]).unwrap();
            let mut t = Triplets::new();
            for &e in idx {
                let rows = [e2n[2 * e] as usize, e2n[2 * e + 1] as usize];
                let xe = |i: usize| x0[2 * rows[i / 2] + i % 2];
                add_block(&mut t, &rows, 2, &rows, 2, |i, j| xe(i) * 3.0 - xe(j) + (i * 4 + j) as f64 * 0.5 + 1.0);
            }
            assert_matches(&a.to_csr().unwrap(), &t, &format!("{label}: subset {name}"));
            let none = rt.subset(&format!("none_{name}"), &nodes, vec![]).unwrap();
            a.zero_rows(&none, 9.0).unwrap();
            assert_matches(&a.to_csr().unwrap(), &t, &format!("{label}: subset {name}, zero_rows(empty)"));
        }
        // zero_rows over every node that has a diagonal entry: the identity times 4.
        let a = rt.mat::<f64>("A_id", &s).unwrap();
        rt.par_loop(sq22::KERNEL, &edges, &[x.arg_vec(&m, Access::READ), a.arg(&m, &m, Access::INC)]).unwrap();
        let touched: Vec<usize> = (0..nn).filter(|n| e2n.contains(&(*n as i32))).collect();
        let b = rt.subset("touched", &nodes, touched.clone()).unwrap();
        a.zero_rows(&b, 4.0).unwrap();
        let v: Vec<f64> = (0..2 * nn).map(|k| k as f64 + 1.0).collect();
        let vd = rt.dat("v", &nodes, 2, v.clone()).unwrap();
        let y = rt.dat("y", &nodes, 2, vec![f64::NAN; 2 * nn]).unwrap();
        rt.mult(&a, &vd, &y).unwrap();
        let want: Vec<f64> = (0..2 * nn).map(|k| if touched.contains(&(k / 2)) { 4.0 * v[k] } else { 0.0 }).collect();
        assert_eq!(y.values().unwrap(), want, "{label}: after zero_rows of every row");
    }
}
