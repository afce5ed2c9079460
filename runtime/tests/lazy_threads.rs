//! One lazy `Runtime` shared between threads: a force on one thread and
//! a loop or a drop on another must neither wait for each other for ever
//! nor lose a recorded loop. Races: each test repeats its pattern many
//! times (the failures they guard against showed within a few hundred
//! repetitions), and a watchdog turns a hang into a failure.

use std::sync::mpsc;
use std::sync::Barrier;
use std::time::Duration;

use parloop::{Access, Backend, Runtime};

#[parloop::kernel]
fn bump(a: &mut f64) {
    *a += 1.0;
}

#[parloop::kernel]
fn add_into(x: &f64, y: &mut f64) {
    *y += *x;
}

/// Runs `body` on its own thread; a failure if it has not finished after
/// `limit` (a deadlock: the stuck threads are left behind).
fn within(limit: Duration, what: &str, body: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        body();
        let _ = done.send(());
    });
    match finished.recv_timeout(limit) {
        Ok(()) => worker.join().expect("the body passed"),
        // The body panicked: its message, not a timeout's.
        Err(mpsc::RecvTimeoutError::Disconnected) => std::panic::resume_unwind(worker.join().unwrap_err()),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no progress after {limit:?} (a deadlock)"),
    }
}

/// A loop submitted inside a host access on one thread runs eagerly after
/// forcing what it depends on; another thread's read of unrelated data
/// forces its own loops meanwhile. The eager loop forced again once it
/// held the runtime's `executing` lock, waiting for the trace's `running`
/// lock, which the other thread held while its loop waited for
/// `executing`: both waited for ever (within a few hundred repetitions).
#[test]
fn a_loop_inside_a_host_access_and_a_read_on_another_thread_do_not_deadlock() {
    for backend in [Backend::Seq, Backend::Emu] {
        within(Duration::from_secs(120), &format!("{backend:?}"), move || {
            let rt = Runtime::with_lazy(backend, true).unwrap();
            let n = 2000;
            let s = rt.set("s", n).unwrap();
            let held = rt.dat("held", &s, 1, vec![1.0; n]).unwrap();
            let y = rt.dat("y", &s, 1, vec![0.0; n]).unwrap();
            let z = rt.dat("z", &s, 1, vec![0.0; n]).unwrap();
            // y is the trace's from here on.
            rt.par_loop(bump::KERNEL, &s, &[y.arg(Access::RW)]).unwrap();
            let rounds = 300;
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    for _ in 0..rounds {
                        held.with_values(|_| rt.par_loop(bump::KERNEL, &s, &[y.arg(Access::RW)]).unwrap()).unwrap();
                    }
                });
                scope.spawn(|| {
                    for _ in 0..rounds {
                        rt.par_loop(bump::KERNEL, &s, &[z.arg(Access::RW)]).unwrap();
                        z.values().unwrap();
                    }
                });
            });
            assert_eq!(y.values().unwrap(), vec![1.0 + rounds as f64; n], "{backend:?}");
            assert_eq!(z.values().unwrap(), vec![rounds as f64; n], "{backend:?}");
        });
    }
}

/// Two loops read `d`; a read on one thread forces the first while the
/// program's last handle on `d` goes on another. The force's own copy of
/// the arguments was then the last handle, and its drop (inside the force,
/// where nothing can run) let the second loop go without running it: `f`
/// was refused for data dropped before it ran.
#[test]
fn data_dropped_while_another_thread_forces_its_loops_still_runs_them() {
    for backend in [Backend::Seq, Backend::Emu] {
        within(Duration::from_secs(120), &format!("{backend:?}"), move || {
            let rt = Runtime::with_lazy(backend, true).unwrap();
            let n = 3000;
            let s = rt.set("s", n).unwrap();
            for round in 0..200 {
                let d = rt.dat(&format!("d{round}"), &s, 1, vec![2.0; n]).unwrap();
                let e = rt.dat(&format!("e{round}"), &s, 1, vec![0.0; n]).unwrap();
                let f = rt.dat(&format!("f{round}"), &s, 1, vec![0.0; n]).unwrap();
                rt.par_loop(add_into::KERNEL, &s, &[d.arg(Access::READ), e.arg(Access::RW)]).unwrap();
                rt.par_loop(add_into::KERNEL, &s, &[d.arg(Access::READ), f.arg(Access::RW)]).unwrap();
                let start = Barrier::new(2);
                std::thread::scope(|scope| {
                    scope.spawn(|| {
                        start.wait();
                        assert_eq!(e.values().unwrap(), vec![2.0; n]);
                    });
                    scope.spawn(|| {
                        start.wait();
                        std::thread::sleep(Duration::from_micros((round % 50) as u64 * 5));
                        drop(d);
                    });
                });
                let got = f.values().unwrap_or_else(|err| panic!("{backend:?}, round {round}: {err}"));
                assert_eq!(got, vec![2.0; n], "{backend:?}, round {round}");
            }
        });
    }
}
