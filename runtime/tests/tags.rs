//! Loop tags (seed 003, issue 15): a tagged loop has a profile row of its
//! own, and tags never change what a loop computes, eager or lazy, on any
//! backend.

#[path = "support/device.rs"]
mod device;

use parloop::{Access, Backend, Error, ParLoop, Runtime};

#[parloop::kernel]
fn gather_add(w: &f64, ends: &[[f64; 1]; 2], out: &mut f64) {
    *out += *w * (ends[0][0] - ends[1][0]);
}

#[parloop::kernel]
fn spread(w: &f64, ends: &mut [[f64; 1]; 2]) {
    ends[0][0] += *w;
    ends[1][0] -= 0.5 * *w;
}

/// Two loops, each run twice, optionally tagged: the results as bits and
/// the profile's (name, tags, calls) rows.
fn program(backend: Backend, lazy: bool, tagged: bool) -> (Vec<u64>, Vec<(String, String, u64)>) {
    let rt = Runtime::with_lazy(backend, lazy).unwrap();
    let (nn, ne) = (50usize, 120usize);
    let nodes = rt.set("nodes", nn).unwrap();
    let edges = rt.set("edges", ne).unwrap();
    let e2n: Vec<i32> = (0..ne).flat_map(|e| [(e * 7 % nn) as i32, ((e * 13 + 5) % nn) as i32]).collect();
    let e2n = rt.map("e2n", &edges, &nodes, 2, e2n).unwrap();
    let w = rt.dat("w", &edges, 1, (0..ne).map(|e| 1.0 / (e as f64 + 1.5)).collect()).unwrap();
    let x = rt.dat("x", &nodes, 1, (0..nn).map(|n| (n as f64).sin()).collect()).unwrap();
    let y = rt.dat("y", &edges, 1, vec![0.0; ne]).unwrap();
    for step in 0..2 {
        let tag = |lp: ParLoop, t: &str| {
            if tagged {
                lp.with_tags(&[t, if step == 0 { "first" } else { "second" }]).unwrap()
            } else {
                lp
            }
        };
        let a = ParLoop::new(spread::KERNEL, &edges, &[w.arg(Access::READ), x.arg_vec(&e2n, Access::INC)]).unwrap();
        rt.execute(&tag(a, "spread")).unwrap();
        let b = ParLoop::new(
            gather_add::KERNEL,
            &edges,
            &[w.arg(Access::READ), x.arg_vec(&e2n, Access::READ), y.arg(Access::RW)],
        )
        .unwrap();
        rt.execute(&tag(b, "gather")).unwrap();
    }
    let bits = x.values().unwrap().into_iter().chain(y.values().unwrap()).map(f64::to_bits).collect();
    rt.flush().unwrap();
    let rows = rt.report().into_iter().map(|r| (r.name, r.tags, r.calls)).collect();
    (bits, rows)
}

#[test]
fn tags_never_change_results_and_give_profile_rows_of_their_own() {
    for backend in [Backend::Seq, Backend::Threads, device::device_backend()] {
        for lazy in [false, true] {
            let (plain, plain_rows) = program(backend, lazy, false);
            let (tagged, rows) = program(backend, lazy, true);
            assert_eq!(plain, tagged, "{backend:?} lazy {lazy}: tags changed the results");
            let row = |n: &str, t: &str| (n.to_string(), t.to_string(), 1u64);
            assert_eq!(
                plain_rows,
                [("spread".to_string(), String::new(), 2), ("gather_add".to_string(), String::new(), 2)]
            );
            assert_eq!(
                rows,
                [
                    row("spread", "spread,first"),
                    row("gather_add", "gather,first"),
                    row("spread", "spread,second"),
                    row("gather_add", "gather,second")
                ],
                "{backend:?} lazy {lazy}"
            );
        }
    }
}

#[test]
fn the_profile_shows_tags_in_the_table_and_the_json() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let s = rt.set("s", 4).unwrap();
    let a = rt.dat("a", &s, 1, vec![1.0; 4]).unwrap();
    let b = rt.dat("b", &s, 1, vec![0.0; 4]).unwrap();
    let m = rt.map("id", &s, &s, 2, vec![0, 1, 1, 2, 2, 3, 3, 0]).unwrap();
    let lp = ParLoop::new(spread::KERNEL, &s, &[a.arg(Access::READ), b.arg_vec(&m, Access::INC)]).unwrap();
    rt.execute(&lp.with_tags(&["rhs", "stage 2"]).unwrap()).unwrap();
    let table = rt.report_table();
    assert!(table.contains("spread [rhs,stage 2]"), "{table}");
    let json: serde_json::Value = serde_json::from_str(&rt.report_json()).unwrap();
    assert_eq!(json["loops"][0]["name"], "spread");
    assert_eq!(json["loops"][0]["tags"], "rhs,stage 2");
}

#[test]
fn malformed_tags_are_errors_naming_the_loop_and_the_tag() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let s = rt.set("s", 2).unwrap();
    let a = rt.dat("a", &s, 1, vec![1.0; 2]).unwrap();
    let m = rt.map("m", &s, &s, 2, vec![0, 1, 1, 0]).unwrap();
    let b = rt.dat("b", &s, 1, vec![0.0; 2]).unwrap();
    let lp = ParLoop::new(spread::KERNEL, &s, &[a.arg(Access::READ), b.arg_vec(&m, Access::INC)]).unwrap();
    for bad in ["", "a,b", "line\nbreak"] {
        match lp.clone().with_tags(&["ok", bad]).unwrap_err() {
            e @ Error::InvalidDeclaration { .. } => {
                let msg = e.to_string();
                assert!(msg.contains("spread") && msg.contains(&format!("{bad:?}")), "{msg}");
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert_eq!(lp.clone().with_tags(&[]).unwrap().tags(), "");
}

mod mass {
    #[parloop::kernel]
    pub fn assemble(x: &mut f64) {
        *x += 1.0;
    }
}

mod stiffness {
    #[parloop::kernel]
    pub fn assemble(x: &mut f64) {
        *x *= 2.0;
    }
}

/// Two kernels of one name from different modules shared a profile row
/// (their calls and times summed as one loop's); now each has its own,
/// and the table names them by path.
#[test]
fn kernels_of_one_name_in_two_modules_have_a_row_each() {
    for lazy in [false, true] {
        let rt = Runtime::with_lazy(Backend::Seq, lazy).unwrap();
        let s = rt.set("s", 4).unwrap();
        let x = rt.dat("x", &s, 1, vec![1.0; 4]).unwrap();
        for _ in 0..3 {
            rt.par_loop(mass::assemble::KERNEL, &s, &[x.arg(Access::RW)]).unwrap();
        }
        rt.par_loop(stiffness::assemble::KERNEL, &s, &[x.arg(Access::RW)]).unwrap();
        assert_eq!(x.values().unwrap(), vec![8.0; 4]);
        let rows: Vec<(String, String, u64)> = rt.report().into_iter().map(|r| (r.name, r.path, r.calls)).collect();
        assert_eq!(
            rows,
            vec![
                ("assemble".into(), "tags::mass::assemble".into(), 3),
                ("assemble".into(), "tags::stiffness::assemble".into(), 1)
            ],
            "lazy {lazy}"
        );
        let table = rt.report_table();
        assert!(table.contains("tags::mass::assemble") && table.contains("tags::stiffness::assemble"), "{table}");
    }
}
