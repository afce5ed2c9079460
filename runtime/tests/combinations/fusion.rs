//! chains of direct loops over one set (fused in the lazy trace,
//! one launch on the device), with writes read by later loops of the
//! chain, several element types and dims, a global reduced by one loop and
//! read by a later one, repeated so that replay takes the second window;
//! every backend, lazy and eager, against plain Rust (exact integers).

use crate::device::device_backend;
use parloop::{Access, Backend, Runtime};

#[parloop::kernel]
fn f_spread(x: &f64, a: &mut [f64; 3]) {
    a[0] = *x;
    a[1] = *x * 2.0;
    a[2] = *x * 3.0 - 1.0;
}

#[parloop::kernel]
fn f_count(a: &[f64; 3], b: &mut i64) {
    *b = (a[0] + a[1] + a[2]) as i64 % 7;
}

#[parloop::kernel]
fn f_bump(b: &i64, x: &mut f64) {
    *x += (*b as f64) * 0.5;
}

#[parloop::kernel]
fn f_reduce(x: &f64, a: &[f64; 3], g: &mut f64, h: &mut f64) {
    *g += *x;
    *h = (*h).max(a[2]);
}

#[parloop::kernel]
fn f_narrow(x: &f64, a: &[f64; 3], y: &mut [f32; 2]) {
    y[0] = *x as f32;
    y[1] = a[1] as f32;
}

#[parloop::kernel]
fn f_scale(x: &f64, g: &f64, h: &f64, z: &mut f64) {
    *z = *x * *g - *h;
}

#[parloop::kernel]
fn f_incx(x: &mut f64) {
    *x += 1.0;
}

struct Out {
    x: Vec<f64>,
    a: Vec<f64>,
    b: Vec<i64>,
    y: Vec<f32>,
    z: Vec<f64>,
    g: f64,
    h: f64,
}

fn reference(n: usize, x0: &[f64], steps: usize) -> Out {
    let mut x = x0.to_vec();
    let mut a = vec![0.0; 3 * n];
    let mut b = vec![0i64; n];
    let mut y = vec![0.0f32; 2 * n];
    let mut z = vec![0.0; n];
    let (mut g, mut h) = (0.0, 0.0);
    for _ in 0..steps {
        for k in 0..n {
            a[3 * k] = x[k];
            a[3 * k + 1] = x[k] * 2.0;
            a[3 * k + 2] = x[k] * 3.0 - 1.0;
        }
        for k in 0..n {
            b[k] = (a[3 * k] + a[3 * k + 1] + a[3 * k + 2]) as i64 % 7;
        }
        for k in 0..n {
            x[k] += b[k] as f64 * 0.5;
        }
        g = 0.0;
        h = f64::NEG_INFINITY;
        for k in 0..n {
            g += x[k];
            h = h.max(a[3 * k + 2]);
        }
        for k in 0..n {
            y[2 * k] = x[k] as f32;
            y[2 * k + 1] = a[3 * k + 1] as f32;
        }
        for k in 0..n {
            z[k] = x[k] * g - h;
        }
        for v in x.iter_mut() {
            *v += 1.0;
        }
    }
    Out { x, a, b, y, z, g, h }
}

fn run(rt: &Runtime, n: usize, x0: &[f64], steps: usize) -> Out {
    let s = rt.set("s", n).unwrap();
    let x = rt.dat("x", &s, 1, x0.to_vec()).unwrap();
    let a = rt.dat("a", &s, 3, vec![0.0; 3 * n]).unwrap();
    let b = rt.dat("b", &s, 1, vec![0i64; n]).unwrap();
    let y = rt.dat("y", &s, 2, vec![0.0f32; 2 * n]).unwrap();
    let z = rt.dat("z", &s, 1, vec![0.0; n]).unwrap();
    let g = rt.global("g", &[0.0f64]).unwrap();
    let h = rt.global("h", &[0.0f64]).unwrap();
    for _ in 0..steps {
        rt.par_loop(f_spread::KERNEL, &s, &[x.arg(Access::READ), a.arg(Access::WRITE)]).unwrap();
        rt.par_loop(f_count::KERNEL, &s, &[a.arg(Access::READ), b.arg(Access::WRITE)]).unwrap();
        rt.par_loop(f_bump::KERNEL, &s, &[b.arg(Access::READ), x.arg(Access::RW)]).unwrap();
        g.set_values(&[0.0]).unwrap();
        h.set_values(&[f64::NEG_INFINITY]).unwrap();
        rt.par_loop(
            f_reduce::KERNEL,
            &s,
            &[x.arg(Access::READ), a.arg(Access::READ), g.arg(Access::INC), h.arg(Access::MAX)],
        )
        .unwrap();
        rt.par_loop(f_narrow::KERNEL, &s, &[x.arg(Access::READ), a.arg(Access::READ), y.arg(Access::WRITE)]).unwrap();
        rt.par_loop(
            f_scale::KERNEL,
            &s,
            &[x.arg(Access::READ), g.arg(Access::READ), h.arg(Access::READ), z.arg(Access::WRITE)],
        )
        .unwrap();
        rt.par_loop(f_incx::KERNEL, &s, &[x.arg(Access::INC)]).unwrap();
    }
    Out {
        x: x.values().unwrap(),
        a: a.values().unwrap(),
        b: b.values().unwrap(),
        y: y.values().unwrap(),
        z: z.values().unwrap(),
        g: g.value().unwrap(),
        h: h.value().unwrap(),
    }
}

#[test]
fn fused_chains_of_direct_loops_match_plain_rust() {
    for n in [1usize, 7, 1000] {
        let x0: Vec<f64> = (0..n).map(|k| (k % 23) as f64 - 5.0).collect();
        let want = reference(n, &x0, 3);
        for b in [Backend::Seq, Backend::Threads, device_backend()] {
            for lazy in [false, true] {
                let rt = Runtime::with_lazy(b, lazy).unwrap();
                let got = run(&rt, n, &x0, 3);
                let label = format!("{b} lazy={lazy} n={n}");
                assert_eq!(got.a, want.a, "{label}: a");
                assert_eq!(got.b, want.b, "{label}: b");
                assert_eq!(got.x, want.x, "{label}: x");
                assert_eq!(got.y, want.y, "{label}: y");
                assert_eq!(got.g, want.g, "{label}: g");
                assert_eq!(got.h, want.h, "{label}: h");
                assert_eq!(got.z, want.z, "{label}: z");
                if lazy {
                    eprintln!("{label}: {:?}", rt.trace_stats());
                }
            }
        }
    }
}
