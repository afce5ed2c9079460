//! One `Runtime` shared by several std threads on a device backend (emu
//! here and in CI, the GPU where `PARLOOP_TEST_DEVICE=cuda`): loops of one
//! runtime run one at a time, and a host access to a dat happens wholly
//! before or wholly after a loop that uses it. Each test checks exact
//! final values, which hold whatever the interleaving; the races they
//! guard against are made likely by repetition, never by timing.

#[path = "support/device.rs"]
mod device;

use parloop::{Access, Runtime};

/// Repetitions of each scenario: before the fixes, the first failure came
/// within a few rounds (the race is lost most of the time, not always).
const ROUNDS: usize = 50;

#[parloop::kernel]
fn bump2(a: &mut f64, b: &mut f64) {
    *a += 1.0;
    *b += 1.0;
}

#[parloop::kernel]
fn edge_mat(w: &f64, a: &mut [[f64; 2]; 2]) {
    a[0][0] += *w;
    a[0][1] -= *w;
    a[1][0] -= *w;
    a[1][1] += *w;
}

#[parloop::kernel]
fn shift_mat(s: &f64, a: &mut f64) {
    *a += *s;
}

/// Fails at the first entry of `got` that differs from `want` (the whole
/// vectors would be thousands of numbers).
fn same(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!("{what}: entry {i} is {}, want {}", got[i], want[i]);
    }
}

/// A device loop held its dats only while uploading them: a host write
/// made while its kernel ran was marked newer, then the loop marked the
/// device copy newer and the host write was lost (`d` ended at 20, not
/// 5020). Every host write must survive, and every loop's increment too.
#[test]
fn host_writes_during_device_loops_on_another_thread_are_kept() {
    const LOOPS: usize = 20;
    const WRITES: usize = 5;
    for lazy in [false, true] {
        let rt = Runtime::with_lazy(device::device_backend(), lazy).unwrap();
        let n = 750;
        let s = rt.set("s", n).unwrap();
        for round in 0..ROUNDS {
            let d = rt.dat(&format!("d{round}"), &s, 1, vec![0.0; n]).unwrap();
            let e = rt.dat(&format!("e{round}"), &s, 1, vec![0.0; n]).unwrap();
            std::thread::scope(|sc| {
                sc.spawn(|| {
                    for _ in 0..LOOPS {
                        rt.par_loop(bump2::KERNEL, &s, &[d.arg(Access::RW), e.arg(Access::RW)]).unwrap();
                    }
                });
                sc.spawn(|| {
                    for _ in 0..WRITES {
                        d.with_values_mut(|v| v.iter_mut().for_each(|x| *x += 1000.0)).unwrap();
                        e.with_values_mut(|v| v.iter_mut().for_each(|x| *x += 1000.0)).unwrap();
                    }
                });
            });
            let want = vec![(LOOPS + 1000 * WRITES) as f64; n];
            same(&d.values().unwrap(), &want, &format!("d, lazy {lazy}, round {round}"));
            same(&e.values().unwrap(), &want, &format!("e, lazy {lazy}, round {round}"));
        }
    }
}

/// Matrix loops on a device were sent to the device assembly before the
/// runtime's loop lock was taken: two threads assembling into one matrix
/// at once shared its element matrices and scatters, losing and doubling
/// increments. Two threads' assemblies must give twice one assembly.
#[test]
fn two_threads_assembling_one_matrix_on_a_device_add_both_assemblies() {
    for lazy in [false, true] {
        let rt = Runtime::with_lazy(device::device_backend(), lazy).unwrap();
        let n = 750;
        let e = 2 * n;
        let nodes = rt.set("nodes", n).unwrap();
        let edges = rt.set("edges", e).unwrap();
        let mut pairs = Vec::with_capacity(2 * e);
        for k in 0..e {
            let a = k % n;
            let b = match (k * 7 + 3) % n {
                b if b == a => (a + 1) % n,
                b => b,
            };
            pairs.extend([a as i32, b as i32]);
        }
        let e2n = rt.map("e2n", &edges, &nodes, 2, pairs).unwrap();
        let id = rt.map("id", &nodes, &nodes, 1, (0..n as i32).collect()).unwrap();
        let sp = rt.sparsity("sp", &[(&e2n, &e2n), (&id, &id)], (1, 1)).unwrap();
        let a = rt.mat::<f64>("A", &sp).unwrap();
        let w = rt.dat("w", &edges, 1, (0..e).map(|k| 1.0 + (k % 3) as f64).collect()).unwrap();
        let sh = rt.dat("sh", &nodes, 1, vec![1.0; n]).unwrap();
        let assemble = || {
            rt.par_loop(edge_mat::KERNEL, &edges, &[w.arg(Access::READ), a.arg(&e2n, &e2n, Access::INC)]).unwrap();
            rt.par_loop(shift_mat::KERNEL, &nodes, &[sh.arg(Access::READ), a.arg(&id, &id, Access::INC)]).unwrap();
        };
        assemble();
        let twice: Vec<f64> = a.values().unwrap().iter().map(|v| 2.0 * v).collect();
        for round in 0..ROUNDS {
            a.zero().unwrap();
            std::thread::scope(|sc| {
                sc.spawn(assemble);
                sc.spawn(assemble);
            });
            // Small integers: the sums are exact in any order.
            same(&a.values().unwrap(), &twice, &format!("A, lazy {lazy}, round {round}"));
        }
    }
}
