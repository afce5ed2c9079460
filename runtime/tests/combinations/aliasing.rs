//! one dat used twice in one loop (directly and through a map to
//! the loop's own set), where at least one use writes. Each case must be
//! either refused on every backend or give the plain-Rust result on every
//! backend, never a backend-dependent value.

use parloop::{Access, Runtime, Strategy};

fn configs() -> Vec<(String, Runtime)> {
    crate::configs(&[None, Some(Strategy::Staged), Some(Strategy::Atomic), Some(Strategy::GlobalColour)], 4, None)
}

#[parloop::kernel]
fn read_and_inc(x: &f64, nx: &mut f64) {
    *nx += *x;
}

#[parloop::kernel]
fn inc_both(x: &mut f64, nx: &mut f64) {
    *x += 1.0;
    *nx += 10.0;
}

#[parloop::kernel]
fn rw_and_read(x: &mut f64, nx: &f64) {
    *x += *nx;
}

#[parloop::kernel]
fn write_and_read(y: &mut f64, ny: &f64) {
    *y = *ny * 2.0;
}

/// Outcome per configuration: the values, or that it was refused.
fn outcomes(
    n: usize,
    nbr: &[i32],
    run: impl Fn(&Runtime, &parloop::Set, &parloop::Map, &parloop::Dat<f64>) -> Result<(), parloop::Error>,
) -> Vec<(String, Option<Vec<f64>>)> {
    let x0: Vec<f64> = (0..n).map(|k| (k * k % 17) as f64).collect();
    configs()
        .into_iter()
        .map(|(label, rt)| {
            let s = rt.set("s", n).unwrap();
            let m = rt.map("nbr", &s, &s, 1, nbr.to_vec()).unwrap();
            let x = rt.dat("x", &s, 1, x0.clone()).unwrap();
            let r = run(&rt, &s, &m, &x);
            let vals = x.values().unwrap();
            match r {
                Ok(()) => (label, Some(vals)),
                Err(_) => {
                    assert_eq!(vals, x0, "{label}: a refused loop changed x");
                    (label, None)
                }
            }
        })
        .collect()
}

fn check(what: &str, got: Vec<(String, Option<Vec<f64>>)>, reference: Vec<f64>) {
    let refused: Vec<_> = got.iter().filter(|g| g.1.is_none()).map(|g| g.0.clone()).collect();
    if !refused.is_empty() {
        assert_eq!(refused.len(), got.len(), "{what}: refused on {refused:?} only");
        return;
    }
    for (label, v) in got {
        assert_eq!(v.unwrap(), reference, "{what}: {label}");
    }
}

/// Neighbours: k -> (k + 1) % n, a cycle, so every entity is read by one
/// element and written by another.
#[test]
fn direct_and_indirect_uses_of_one_dat() {
    let n = 300usize;
    let nbr: Vec<i32> = (0..n).map(|k| ((k + 1) % n) as i32).collect();
    let x0: Vec<f64> = (0..n).map(|k| (k * k % 17) as f64).collect();

    // x READ directly, INC through the map: every add uses the value before the loop.
    let mut want = x0.clone();
    for k in 0..n {
        want[(k + 1) % n] += x0[k];
    }
    check(
        "READ direct + INC via map",
        outcomes(n, &nbr, |rt, s, m, x| {
            rt.par_loop(read_and_inc::KERNEL, s, &[x.arg(Access::READ), x.arg_via(m, 0, Access::INC)])
        }),
        want,
    );

    // INC directly and through the map: sums commute.
    let want: Vec<f64> = x0.iter().map(|v| v + 11.0).collect();
    check(
        "INC direct + INC via map",
        outcomes(n, &nbr, |rt, s, m, x| {
            rt.par_loop(inc_both::KERNEL, s, &[x.arg(Access::INC), x.arg_via(m, 0, Access::INC)])
        }),
        want,
    );

    // RW directly and READ through the map: order-dependent, must be refused.
    let got = outcomes(n, &nbr, |rt, s, m, x| {
        rt.par_loop(rw_and_read::KERNEL, s, &[x.arg(Access::RW), x.arg_via(m, 0, Access::READ)])
    });
    for (label, v) in &got {
        assert!(v.is_none(), "{label}: RW direct + READ via map of one dat accepted: {:?}", &v.as_ref().unwrap()[..4]);
    }

    // WRITE directly and READ through the map: order-dependent, must be refused.
    let got = outcomes(n, &nbr, |rt, s, m, x| {
        rt.par_loop(write_and_read::KERNEL, s, &[x.arg(Access::WRITE), x.arg_via(m, 0, Access::READ)])
    });
    for (label, v) in &got {
        assert!(v.is_none(), "{label}: WRITE direct + READ via map of one dat accepted");
    }
}
