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
