//! increments under maximum contention (every element reaches one
//! entity), map rows with repeated entries ([k, k]: the element adds
//! twice), wide dims (17, 33), integer and f32 dats, multi-component
//! globals with INC / MIN / MAX of every element type, sets of size 1,
//! maps of arity 1; every backend and device strategy, eager and lazy,
//! against plain Rust (integers exactly).

use parloop::{Access, Runtime};

fn configs() -> Vec<(String, Runtime)> {
    crate::configs(crate::ALL_STRATEGIES, 5, Some(16))
}

#[parloop::kernel]
fn inc_pair_i64(w: &i64, n: &mut [[i64; 2]; 2]) {
    n[0][0] += *w;
    n[0][1] += 1;
    n[1][0] += 3 * *w;
    n[1][1] -= 2;
}

/// Map rows with repeats and every element hitting one node: integer INC
/// must be exact on every backend.
#[test]
fn repeated_entries_and_maximum_contention_integers() {
    let (nn, ne) = (6usize, 3000usize);
    // Rows: [k, k] for every third element, [0, 0] for every fifth, else (e % nn, (e * 7) % nn).
    let map: Vec<i32> = (0..ne)
        .flat_map(|e| {
            if e % 5 == 0 {
                [0, 0]
            } else if e % 3 == 0 {
                [(e % nn) as i32; 2]
            } else {
                [(e % nn) as i32, ((e * 7 + 1) % nn) as i32]
            }
        })
        .collect();
    let same: Vec<i32> = vec![2; 2 * ne];
    let w: Vec<i64> = (0..ne as i64).map(|e| e * 1_000_003 % 977 - 400).collect();
    for (label, rt) in configs() {
        let nodes = rt.set("nodes", nn).unwrap();
        let edges = rt.set("edges", ne).unwrap();
        let m = rt.map("m", &edges, &nodes, 2, map.clone()).unwrap();
        let all_two = rt.map("all_two", &edges, &nodes, 2, same.clone()).unwrap();
        let wd = rt.dat("w", &edges, 1, w.clone()).unwrap();
        for (mname, mv, mm) in [("m", &map, &m), ("all_two", &same, &all_two)] {
            let n0: Vec<i64> = (0..2 * nn as i64).map(|k| k * 11).collect();
            let n = rt.dat(&format!("n_{mname}"), &nodes, 2, n0.clone()).unwrap();
            rt.par_loop(inc_pair_i64::KERNEL, &edges, &[wd.arg(Access::READ), n.arg_vec(mm, Access::INC)]).unwrap();
            let mut want = n0.clone();
            for e in 0..ne {
                let (p, q) = (mv[2 * e] as usize, mv[2 * e + 1] as usize);
                want[2 * p] += w[e];
                want[2 * p + 1] += 1;
                want[2 * q] += 3 * w[e];
                want[2 * q + 1] -= 2;
            }
            assert_eq!(n.values().unwrap(), want, "{label}: map {mname}");
        }
    }
}

#[parloop::kernel]
fn inc_two_cols_i32(w: &i32, a: &mut [i32; 3], b: &mut [i32; 3]) {
    a[0] += *w;
    a[2] += 1;
    b[1] += 2 * *w;
    b[2] -= 7;
}

/// The same dat INC through both columns of a map as two arguments, rows
/// with repeats (the element adds twice to one entity).
#[test]
fn inc_through_two_columns_of_one_map_with_repeats() {
    let (nn, ne) = (4usize, 1000usize);
    let map: Vec<i32> = (0..ne).flat_map(|e| if e % 2 == 0 { [3, 3] } else { [(e % 4) as i32, 3] }).collect();
    let w: Vec<i32> = (0..ne as i32).map(|e| e % 13 - 6).collect();
    for (label, rt) in configs() {
        let nodes = rt.set("nodes", nn).unwrap();
        let edges = rt.set("edges", ne).unwrap();
        let m = rt.map("m", &edges, &nodes, 2, map.clone()).unwrap();
        let wd = rt.dat("w", &edges, 1, w.clone()).unwrap();
        let n = rt.dat("n", &nodes, 3, vec![5i32; 3 * nn]).unwrap();
        rt.par_loop(
            inc_two_cols_i32::KERNEL,
            &edges,
            &[wd.arg(Access::READ), n.arg_via(&m, 0, Access::INC), n.arg_via(&m, 1, Access::INC)],
        )
        .unwrap();
        let mut want = vec![5i32; 3 * nn];
        for e in 0..ne {
            let (p, q) = (map[2 * e] as usize, map[2 * e + 1] as usize);
            want[3 * p] += w[e];
            want[3 * p + 2] += 1;
            want[3 * q + 1] += 2 * w[e];
            want[3 * q + 2] -= 7;
        }
        assert_eq!(n.values().unwrap(), want, "{label}");
    }
}

#[parloop::kernel]
fn wide17(x: &[f64; 17], n: &mut [f64; 17], g: &mut [f64; 17]) {
    for k in 0..17 {
        n[k] += x[k] * (k as f64 + 1.0);
        g[k] += x[k];
    }
}

#[parloop::kernel]
fn wide33_f32(x: &[f32; 33], n: &mut [f32; 33], y: &mut [f32; 33]) {
    for k in 0..33 {
        n[k] += x[k] * 0.5;
        y[k] = x[32 - k] + (k as f32);
    }
}

/// Dims 17 and 33, INC through a map of arity 1 onto a set of size 1 and
/// of size 3, direct WRITE, a 17-wide global INC.
#[test]
fn wide_dims_and_tiny_target_sets() {
    let ne = 257usize;
    // Small integers so that every sum is exact in any order.
    let x64: Vec<f64> = (0..17 * ne).map(|k| ((k * 31) % 9) as f64 - 4.0).collect();
    let x32: Vec<f32> = (0..33 * ne).map(|k| ((k * 17) % 7) as f32 - 3.0).collect();
    for (label, rt) in configs() {
        let one = rt.set("one", 1).unwrap();
        let three = rt.set("three", 3).unwrap();
        let cells = rt.set("cells", ne).unwrap();
        let to_one = rt.map("to_one", &cells, &one, 1, vec![0; ne]).unwrap();
        let to_three_v: Vec<i32> = (0..ne as i32).map(|c| c % 3).collect();
        let to_three = rt.map("to_three", &cells, &three, 1, to_three_v.clone()).unwrap();
        let x = rt.dat("x", &cells, 17, x64.clone()).unwrap();
        let n = rt.dat("n", &one, 17, vec![1.0; 17]).unwrap();
        let g = rt.global("g", &[0.25f64; 17]).unwrap();
        rt.par_loop(
            wide17::KERNEL,
            &cells,
            &[x.arg(Access::READ), n.arg_via(&to_one, 0, Access::INC), g.arg(Access::INC)],
        )
        .unwrap();
        let mut wn = vec![1.0; 17];
        let mut wg = vec![0.25; 17];
        for c in 0..ne {
            for k in 0..17 {
                wn[k] += x64[17 * c + k] * (k as f64 + 1.0);
                wg[k] += x64[17 * c + k];
            }
        }
        assert_eq!(n.values().unwrap(), wn, "{label}: n");
        assert_eq!(g.values().unwrap(), wg, "{label}: g");

        let xf = rt.dat("xf", &cells, 33, x32.clone()).unwrap();
        let nf = rt.dat("nf", &three, 33, vec![0.0f32; 99]).unwrap();
        let yf = rt.dat("yf", &cells, 33, vec![0.0f32; 33 * ne]).unwrap();
        rt.par_loop(
            wide33_f32::KERNEL,
            &cells,
            &[xf.arg(Access::READ), nf.arg_via(&to_three, 0, Access::INC), yf.arg(Access::WRITE)],
        )
        .unwrap();
        let mut wnf = vec![0.0f32; 99];
        let mut wyf = vec![0.0f32; 33 * ne];
        for c in 0..ne {
            let t = to_three_v[c] as usize;
            for k in 0..33 {
                wnf[33 * t + k] += x32[33 * c + k] * 0.5;
                wyf[33 * c + k] = x32[33 * c + 32 - k] + k as f32;
            }
        }
        assert_eq!(nf.values().unwrap(), wnf, "{label}: nf");
        assert_eq!(yf.values().unwrap(), wyf, "{label}: yf");
    }
}

#[parloop::kernel]
fn reduce_i32(x: &i32, s: &mut [i32; 2], lo: &mut [i32; 3], hi: &mut [i32; 3]) {
    s[0] += *x;
    s[1] -= 1;
    lo[0] = lo[0].min(*x);
    lo[1] = lo[1].min(-*x);
    lo[2] = lo[2].min(*x * 2);
    hi[0] = hi[0].max(*x);
    hi[1] = hi[1].max(-*x);
    hi[2] = hi[2].max(*x * 2);
}

#[parloop::kernel]
fn reduce_u64(x: &u64, s: &mut u64, lo: &mut [u64; 2], hi: &mut [u64; 2]) {
    *s += *x;
    lo[0] = lo[0].min(*x);
    lo[1] = lo[1].min(*x / 3);
    hi[0] = hi[0].max(*x);
    hi[1] = hi[1].max(*x / 3);
}

#[parloop::kernel]
fn reduce_i64(x: &i64, s: &mut i64, lo: &mut i64, hi: &mut i64) {
    *s += *x;
    *lo = (*lo).min(*x);
    *hi = (*hi).max(*x);
}

#[parloop::kernel]
fn reduce_u32(x: &u32, s: &mut u32, lo: &mut u32, hi: &mut u32) {
    *s += *x;
    *lo = (*lo).min(*x);
    *hi = (*hi).max(*x);
}

#[parloop::kernel]
fn reduce_f32(x: &f32, s: &mut [f32; 2], lo: &mut [f32; 2], hi: &mut [f32; 2]) {
    s[0] += *x;
    s[1] += 1.0;
    lo[0] = lo[0].min(*x);
    lo[1] = lo[1].min(-*x);
    hi[0] = hi[0].max(*x);
    hi[1] = hi[1].max(-*x);
}

/// Integer and f32 global reductions with dims > 1, from nonzero starting
/// values (MIN/MAX starting values that the data does and does not beat),
/// over sets of 0, 1 and many elements.
#[test]
fn integer_and_f32_global_reductions() {
    for size in [0usize, 1, 2, 131, 4099] {
        let xi: Vec<i32> = (0..size as i32).map(|k| (k * 7919) % 2001 - 1000).collect();
        let xu: Vec<u64> = (0..size as u64).map(|k| (k * 104_729) % 1_000_000_007 + (1 << 40)).collect();
        let xl: Vec<i64> = (0..size as i64).map(|k| (k * 7919) % 2001 - 1000 - (1 << 40)).collect();
        let xw: Vec<u32> = (0..size as u32).map(|k| (k * 7919) % 2001 + 5).collect();
        let xf: Vec<f32> = (0..size).map(|k| ((k * 37) % 101) as f32 - 50.0).collect();
        for (label, rt) in configs() {
            let label = format!("{label} size={size}");
            let cells = rt.set("cells", size).unwrap();
            let x = rt.dat("xi", &cells, 1, xi.clone()).unwrap();
            let s = rt.global("s", &[10i32, 0]).unwrap();
            let lo = rt.global("lo", &[-5i32, i32::MAX, 0]).unwrap();
            let hi = rt.global("hi", &[5i32, i32::MIN, 0]).unwrap();
            rt.par_loop(
                reduce_i32::KERNEL,
                &cells,
                &[x.arg(Access::READ), s.arg(Access::INC), lo.arg(Access::MIN), hi.arg(Access::MAX)],
            )
            .unwrap();
            let ws = [10 + xi.iter().sum::<i32>(), -(size as i32)];
            let wlo = [
                xi.iter().copied().fold(-5, i32::min),
                xi.iter().map(|v| -v).fold(i32::MAX, i32::min),
                xi.iter().map(|v| v * 2).fold(0, i32::min),
            ];
            let whi = [
                xi.iter().copied().fold(5, i32::max),
                xi.iter().map(|v| -v).fold(i32::MIN, i32::max),
                xi.iter().map(|v| v * 2).fold(0, i32::max),
            ];
            assert_eq!(s.values().unwrap(), ws, "{label}: i32 INC");
            assert_eq!(lo.values().unwrap(), wlo, "{label}: i32 MIN");
            assert_eq!(hi.values().unwrap(), whi, "{label}: i32 MAX");

            let xud = rt.dat("xu", &cells, 1, xu.clone()).unwrap();
            let su = rt.global("su", &[3u64]).unwrap();
            let lou = rt.global("lou", &[u64::MAX, 1u64 << 45]).unwrap();
            let hiu = rt.global("hiu", &[0u64, 7]).unwrap();
            rt.par_loop(
                reduce_u64::KERNEL,
                &cells,
                &[xud.arg(Access::READ), su.arg(Access::INC), lou.arg(Access::MIN), hiu.arg(Access::MAX)],
            )
            .unwrap();
            assert_eq!(su.value().unwrap(), 3 + xu.iter().sum::<u64>(), "{label}: u64 INC");
            assert_eq!(
                lou.values().unwrap(),
                vec![xu.iter().copied().fold(u64::MAX, u64::min), xu.iter().map(|v| v / 3).fold(1 << 45, u64::min)],
                "{label}: u64 MIN"
            );
            assert_eq!(
                hiu.values().unwrap(),
                vec![xu.iter().copied().fold(0, u64::max), xu.iter().map(|v| v / 3).fold(7, u64::max)],
                "{label}: u64 MAX"
            );

            let xld = rt.dat("xl", &cells, 1, xl.clone()).unwrap();
            let sl = rt.global("sl", &[-3i64]).unwrap();
            let lol = rt.global("lol", &[i64::MAX]).unwrap();
            let hil = rt.global("hil", &[i64::MIN]).unwrap();
            rt.par_loop(
                reduce_i64::KERNEL,
                &cells,
                &[xld.arg(Access::READ), sl.arg(Access::INC), lol.arg(Access::MIN), hil.arg(Access::MAX)],
            )
            .unwrap();
            assert_eq!(sl.value().unwrap(), -3 + xl.iter().sum::<i64>(), "{label}: i64 INC");
            assert_eq!(lol.value().unwrap(), xl.iter().copied().fold(i64::MAX, i64::min), "{label}: i64 MIN");
            assert_eq!(hil.value().unwrap(), xl.iter().copied().fold(i64::MIN, i64::max), "{label}: i64 MAX");

            let xwd = rt.dat("xw", &cells, 1, xw.clone()).unwrap();
            let sw = rt.global("sw", &[1u32]).unwrap();
            let low = rt.global("low", &[u32::MAX]).unwrap();
            let hiw = rt.global("hiw", &[0u32]).unwrap();
            rt.par_loop(
                reduce_u32::KERNEL,
                &cells,
                &[xwd.arg(Access::READ), sw.arg(Access::INC), low.arg(Access::MIN), hiw.arg(Access::MAX)],
            )
            .unwrap();
            assert_eq!(sw.value().unwrap(), 1 + xw.iter().sum::<u32>(), "{label}: u32 INC");
            assert_eq!(low.value().unwrap(), xw.iter().copied().fold(u32::MAX, u32::min), "{label}: u32 MIN");
            assert_eq!(hiw.value().unwrap(), xw.iter().copied().fold(0, u32::max), "{label}: u32 MAX");

            let xfd = rt.dat("xf", &cells, 1, xf.clone()).unwrap();
            let sf = rt.global("sf", &[0.5f32, 0.0]).unwrap();
            let lof = rt.global("lof", &[f32::INFINITY, 1e30]).unwrap();
            let hif = rt.global("hif", &[f32::NEG_INFINITY, -1e30]).unwrap();
            rt.par_loop(
                reduce_f32::KERNEL,
                &cells,
                &[xfd.arg(Access::READ), sf.arg(Access::INC), lof.arg(Access::MIN), hif.arg(Access::MAX)],
            )
            .unwrap();
            // Integers below 2^24 are exact in f32 in any order.
            assert_eq!(sf.values().unwrap(), vec![0.5 + xf.iter().sum::<f32>(), size as f32], "{label}: f32 INC");
            assert_eq!(
                lof.values().unwrap(),
                vec![xf.iter().copied().fold(f32::INFINITY, f32::min), xf.iter().map(|v| -v).fold(1e30, f32::min)],
                "{label}: f32 MIN"
            );
            assert_eq!(
                hif.values().unwrap(),
                vec![xf.iter().copied().fold(f32::NEG_INFINITY, f32::max), xf.iter().map(|v| -v).fold(-1e30, f32::max)],
                "{label}: f32 MAX"
            );
        }
    }
}

#[parloop::kernel]
fn inc_ten(x: &mut f64) {
    *x += 10.0;
}

/// Declaration errors: a dat of dim 0, `set_values` of the wrong length,
/// a global of no values; none panics.
#[test]
fn declaration_errors_are_errors() {
    for (label, rt) in configs() {
        let s = rt.set("s", 3).unwrap();
        assert!(rt.dat::<f64>("d0", &s, 0, vec![]).is_err(), "{label}: dim 0");
        assert!(rt.dat::<f64>("short", &s, 2, vec![0.0; 5]).is_err(), "{label}: short");
        assert!(rt.global::<f64>("g0", &[]).is_err(), "{label}: empty global");
        let d = rt.dat("d", &s, 2, vec![1.0; 6]).unwrap();
        assert!(d.set_values(&[0.0; 5]).is_err(), "{label}: set_values short");
        assert!(d.set_values(&[0.0; 7]).is_err(), "{label}: set_values long");
        assert_eq!(d.values().unwrap(), vec![1.0; 6], "{label}: unchanged");
        let g = rt.global("g", &[1.0f64, 2.0]).unwrap();
        assert!(g.set_values(&[1.0]).is_err(), "{label}: global set_values short");
        assert_eq!(g.values().unwrap(), vec![1.0, 2.0], "{label}");
        let e = rt.dat("e", &s, 1, vec![1.0; 3]).unwrap();
        rt.par_loop(inc_ten::KERNEL, &s, &[e.arg(Access::INC)]).unwrap();
        assert!(e.set_values(&[0.0; 2]).is_err(), "{label}");
        assert_eq!(e.values().unwrap(), vec![11.0; 3], "{label}: pending INC kept after a refused set_values");
    }
}
