//! Every validation error of declarations and `par_loop`, each with the names
//! and values it must report, and the guarantee that a rejected loop changes
//! nothing.

use parloop::{Access, ArgProblem, Backend, Error, Runtime};

#[parloop::kernel]
fn scale(a: &[f64; 2], b: &mut [f64; 2]) {
    b[0] = 2.0 * a[0];
    b[1] = 2.0 * a[1];
}

#[parloop::kernel]
fn edge_inc(r1: &mut f64, r2: &mut f64) {
    *r1 += 1.0;
    *r2 += 1.0;
}

#[parloop::kernel]
fn gather(x: &[[f64; 2]; 3], out: &mut f64) {
    *out = x[0][0] + x[1][1] + x[2][0];
}

#[parloop::kernel]
fn reduce(v: &f64, m: &mut f64) {
    if *v < *m {
        *m = *v;
    }
}

fn rt() -> Runtime {
    Runtime::with_backend(Backend::Seq).unwrap()
}

fn problem(e: Error) -> (usize, ArgProblem, String) {
    let msg = e.to_string();
    match e {
        Error::Argument { arg, problem, .. } => (arg, *problem, msg),
        other => panic!("expected an argument error, got {other:?}"),
    }
}

#[test]
fn map_value_out_of_range_names_map_entity_and_value() {
    let rt = rt();
    let edges = rt.set("edges", 3).unwrap();
    let nodes = rt.set("nodes", 4).unwrap();
    let e = rt.map("pedge", &edges, &nodes, 2, vec![0, 1, 1, 2, 2, 4]).unwrap_err();
    assert!(matches!(e, Error::MapValueOutOfRange { entity: 2, column: 1, value: 4, to_size: 4, .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("pedge") && msg.contains("entity 2") && msg.contains("value 4") && msg.contains("nodes"),
        "{msg}"
    );
    let e = rt.map("pedge", &edges, &nodes, 2, vec![0, -1, 1, 2, 2, 3]).unwrap_err();
    assert!(matches!(e, Error::MapValueOutOfRange { entity: 0, column: 1, value: -1, .. }), "{e:?}");
}

#[test]
fn wrong_lengths_and_zero_dims_are_declaration_errors() {
    let rt = rt();
    let s = rt.set("s", 3).unwrap();
    assert!(matches!(rt.map("m", &s, &s, 2, vec![0; 5]).unwrap_err(), Error::WrongLength { expected: 6, got: 5, .. }));
    assert!(matches!(rt.map("m", &s, &s, 0, vec![]).unwrap_err(), Error::InvalidDeclaration { .. }));
    assert!(matches!(rt.dat("d", &s, 2, vec![0.0f64; 7]).unwrap_err(), Error::WrongLength { expected: 6, got: 7, .. }));
    assert!(matches!(rt.dat::<f64>("d", &s, 0, vec![]).unwrap_err(), Error::InvalidDeclaration { .. }));
    assert!(matches!(rt.global::<f64>("g", &[]).unwrap_err(), Error::InvalidDeclaration { .. }));
    let d = rt.dat("d", &s, 1, vec![0.0f64; 3]).unwrap();
    assert!(matches!(d.set_values(&[1.0]).unwrap_err(), Error::WrongLength { expected: 3, got: 1, .. }));
    let g = rt.global("g", &[0.0f64]).unwrap();
    assert!(matches!(g.set_values(&[1.0, 2.0]).unwrap_err(), Error::WrongLength { .. }));
}

#[test]
fn argument_count_mismatch() {
    let rt = rt();
    let s = rt.set("s", 2).unwrap();
    let a = rt.dat("a", &s, 2, vec![0.0f64; 4]).unwrap();
    let e = rt.par_loop(scale::KERNEL, &s, &[a.arg(Access::READ)]).unwrap_err();
    assert!(matches!(e, Error::ArgumentCount { expected: 2, got: 1, .. }), "{e:?}");
    assert!(e.to_string().contains("scale"));
}

#[test]
fn element_type_mismatch() {
    let rt = rt();
    let s = rt.set("s", 2).unwrap();
    let a = rt.dat("a", &s, 2, vec![0.0f32; 4]).unwrap();
    let b = rt.dat("b", &s, 2, vec![0.0f64; 4]).unwrap();
    let (arg, p, msg) =
        problem(rt.par_loop(scale::KERNEL, &s, &[a.arg(Access::READ), b.arg(Access::WRITE)]).unwrap_err());
    assert_eq!(arg, 0);
    assert_eq!(p, ArgProblem::ElementType { expected: "f64", got: "f32" });
    assert!(msg.contains("scale") && msg.contains("`s`") && msg.contains("(a)"), "{msg}");
}

#[test]
fn dim_mismatch_direct_and_vector() {
    let rt = rt();
    let s = rt.set("s", 2).unwrap();
    let a = rt.dat("a", &s, 3, vec![0.0f64; 6]).unwrap();
    let b = rt.dat("b", &s, 2, vec![0.0f64; 4]).unwrap();
    let (arg, p, _) =
        problem(rt.par_loop(scale::KERNEL, &s, &[a.arg(Access::READ), b.arg(Access::WRITE)]).unwrap_err());
    assert_eq!(arg, 0);
    assert!(matches!(p, ArgProblem::Dim { .. }));
    // A vector argument through an arity-2 map where the kernel wants 3 rows.
    let nodes = rt.set("nodes", 3).unwrap();
    let m = rt.map("m", &s, &nodes, 2, vec![0, 1, 1, 2]).unwrap();
    let x = rt.dat("x", &nodes, 2, vec![0.0f64; 6]).unwrap();
    let out = rt.dat("out", &s, 1, vec![0.0f64; 2]).unwrap();
    let (arg, p, msg) =
        problem(rt.par_loop(gather::KERNEL, &s, &[x.arg_vec(&m, Access::READ), out.arg(Access::WRITE)]).unwrap_err());
    assert_eq!(arg, 0);
    assert!(matches!(p, ArgProblem::Dim { .. }));
    assert!(msg.contains("arity of `m`"), "{msg}");
    // The message names the parameter the argument needs (it gave the
    // shapes only).
    assert!(msg.contains("`&[[f64; 2]; 2]`"), "{msg}");
}

#[test]
fn writes_need_mut_parameters_and_reads_need_shared_ones() {
    let rt = rt();
    let s = rt.set("s", 2).unwrap();
    let a = rt.dat("a", &s, 2, vec![0.0f64; 4]).unwrap();
    let b = rt.dat("b", &s, 2, vec![0.0f64; 4]).unwrap();
    let (arg, p, _) = problem(rt.par_loop(scale::KERNEL, &s, &[a.arg(Access::RW), b.arg(Access::WRITE)]).unwrap_err());
    assert_eq!((arg, p), (0, ArgProblem::Mutability { access: "RW", param_mutable: false }));
    let (arg, p, _) = problem(rt.par_loop(scale::KERNEL, &s, &[a.arg(Access::READ), b.arg(Access::READ)]).unwrap_err());
    assert_eq!((arg, p), (1, ArgProblem::Mutability { access: "READ", param_mutable: true }));
    let (arg, p, _) = problem(rt.par_loop(scale::KERNEL, &s, &[a.arg(Access::INC), b.arg(Access::WRITE)]).unwrap_err());
    assert_eq!((arg, p), (0, ArgProblem::Mutability { access: "INC", param_mutable: false }));
}

#[test]
fn min_max_only_on_globals_and_globals_are_never_written() {
    let rt = rt();
    let s = rt.set("s", 2).unwrap();
    let v = rt.dat("v", &s, 1, vec![3.0f64, 1.0]).unwrap();
    let d = rt.dat("d", &s, 1, vec![0.0f64; 2]).unwrap();
    let (arg, p, _) = problem(rt.par_loop(reduce::KERNEL, &s, &[v.arg(Access::READ), d.arg(Access::MIN)]).unwrap_err());
    assert_eq!((arg, p), (1, ArgProblem::ReductionOnDat { access: "MIN" }));
    let g = rt.global("g", &[10.0f64]).unwrap();
    let (arg, p, _) =
        problem(rt.par_loop(reduce::KERNEL, &s, &[v.arg(Access::READ), g.arg(Access::WRITE)]).unwrap_err());
    assert_eq!((arg, p), (1, ArgProblem::WriteToGlobal { access: "WRITE" }));
    rt.par_loop(reduce::KERNEL, &s, &[v.arg(Access::READ), g.arg(Access::MIN)]).unwrap();
    assert_eq!(g.value().unwrap(), 1.0);
}

#[test]
fn sets_and_maps_must_match() {
    let rt = rt();
    let s = rt.set("s", 2).unwrap();
    let other = rt.set("other", 2).unwrap();
    let a = rt.dat("a", &other, 2, vec![0.0f64; 4]).unwrap();
    let b = rt.dat("b", &s, 2, vec![0.0f64; 4]).unwrap();
    let (arg, p, _) =
        problem(rt.par_loop(scale::KERNEL, &s, &[a.arg(Access::READ), b.arg(Access::WRITE)]).unwrap_err());
    assert_eq!((arg, p), (0, ArgProblem::DirectSet { dat_set: "other".into() }));

    let nodes = rt.set("nodes", 3).unwrap();
    let m_from_other = rt.map("m_other", &other, &nodes, 1, vec![0, 1]).unwrap();
    let x = rt.dat("x", &nodes, 2, vec![0.0f64; 6]).unwrap();
    let (arg, p, _) = problem(
        rt.par_loop(scale::KERNEL, &s, &[x.arg_via(&m_from_other, 0, Access::READ), b.arg(Access::WRITE)]).unwrap_err(),
    );
    assert_eq!((arg, p), (0, ArgProblem::MapFrom { map: "m_other".into(), from: "other".into() }));

    let m = rt.map("m", &s, &nodes, 2, vec![0, 1, 1, 2]).unwrap();
    let y = rt.dat("y", &other, 2, vec![0.0f64; 4]).unwrap();
    let (arg, p, _) =
        problem(rt.par_loop(scale::KERNEL, &s, &[y.arg_via(&m, 0, Access::READ), b.arg(Access::WRITE)]).unwrap_err());
    assert_eq!((arg, p), (0, ArgProblem::MapTo { map: "m".into(), to: "nodes".into(), dat_set: "other".into() }));

    let (arg, p, _) =
        problem(rt.par_loop(scale::KERNEL, &s, &[x.arg_via(&m, 2, Access::READ), b.arg(Access::WRITE)]).unwrap_err());
    assert_eq!((arg, p), (0, ArgProblem::Column { map: "m".into(), column: 2, arity: 2 }));
}

/// A set of another runtime that has the iteration set's name is told
/// apart (names are unique within a runtime, not across): the message
/// used to read "a direct argument must live on the iteration set, this
/// dat lives on `s`" for a loop over `s`.
#[test]
fn sets_of_the_same_name_are_told_apart() {
    let rt = rt();
    let s = rt.set("s", 2).unwrap();
    let b = rt.dat("b", &s, 2, vec![0.0f64; 4]).unwrap();
    let other_rt = self::rt();
    let foreign = other_rt.set("s", 2).unwrap();
    let a = other_rt.dat("a", &foreign, 2, vec![0.0f64; 4]).unwrap();
    let (arg, p, msg) =
        problem(rt.par_loop(scale::KERNEL, &s, &[a.arg(Access::READ), b.arg(Access::WRITE)]).unwrap_err());
    assert_eq!((arg, &p), (0, &ArgProblem::SameNameOtherSet { what: "the dat".into(), set: "s".into() }));
    assert!(msg.contains("set `s` of another runtime"), "{msg}");

    let s2 = other_rt.set("t", 2).unwrap();
    let m_foreign = other_rt.map("m_foreign", &foreign, &s2, 1, vec![0, 1]).unwrap();
    let y = other_rt.dat("y", &s2, 2, vec![0.0f64; 4]).unwrap();
    let (arg, p, _) = problem(
        rt.par_loop(scale::KERNEL, &s, &[y.arg_via(&m_foreign, 0, Access::READ), b.arg(Access::WRITE)]).unwrap_err(),
    );
    assert_eq!(
        (arg, p),
        (0, ArgProblem::SameNameOtherSet { what: "map `m_foreign`'s source".into(), set: "s".into() })
    );
}

#[test]
fn racing_or_aliasing_uses_of_one_dat_are_rejected() {
    let rt = rt();
    let edges = rt.set("edges", 2).unwrap();
    let nodes = rt.set("nodes", 3).unwrap();
    let m = rt.map("m", &edges, &nodes, 2, vec![0, 1, 1, 2]).unwrap();
    let r = rt.dat("r", &nodes, 1, vec![0.0f64; 3]).unwrap();
    // Allowed: INC through both columns (the planner colours it).
    rt.par_loop(edge_inc::KERNEL, &edges, &[r.arg_via(&m, 0, Access::INC), r.arg_via(&m, 1, Access::INC)]).unwrap();
    assert_eq!(r.values().unwrap(), vec![1.0, 2.0, 1.0]);
    // Different modes, one writing, one indirect.
    let (arg, p, _) = problem(
        rt.par_loop(edge_inc::KERNEL, &edges, &[r.arg_via(&m, 0, Access::INC), r.arg_via(&m, 1, Access::RW)])
            .unwrap_err(),
    );
    assert_eq!(arg, 1);
    assert!(matches!(p, ArgProblem::Conflict { other: 0, .. }));
    // A direct write aliasing a direct read of the same entity.
    let s = rt.set("s", 2).unwrap();
    let a = rt.dat("a", &s, 2, vec![1.0f64; 4]).unwrap();
    let (arg, p, msg) =
        problem(rt.par_loop(scale::KERNEL, &s, &[a.arg(Access::READ), a.arg(Access::WRITE)]).unwrap_err());
    assert_eq!(arg, 1);
    assert!(matches!(p, ArgProblem::Conflict { other: 0, .. }), "{msg}");
    // Two direct RW of the same dat would alias two `&mut`.
    let d = rt.dat("d", &edges, 1, vec![0.0f64; 2]).unwrap();
    let (_, p, _) =
        problem(rt.par_loop(edge_inc::KERNEL, &edges, &[d.arg(Access::INC), d.arg(Access::INC)]).unwrap_err());
    assert!(matches!(p, ArgProblem::Conflict { .. }));
    // A global reduced twice: named a global (it said "the same dat").
    let g = rt.global("g", &[0.0f64]).unwrap();
    let (_, p, msg) =
        problem(rt.par_loop(edge_inc::KERNEL, &edges, &[g.arg(Access::INC), g.arg(Access::INC)]).unwrap_err());
    assert!(matches!(p, ArgProblem::Conflict { what: "global", other: 0, .. }), "{msg}");
    assert!(msg.contains("the same global is argument 0"), "{msg}");
}

#[test]
fn a_rejected_loop_changes_nothing() {
    let rt = rt();
    let s = rt.set("s", 2).unwrap();
    let a = rt.dat("a", &s, 2, vec![1.0f64, 2.0, 3.0, 4.0]).unwrap();
    let b = rt.dat("b", &s, 2, vec![9.0f64; 4]).unwrap();
    let bad = rt.dat("bad", &s, 3, vec![0.0f64; 6]).unwrap();
    assert!(rt.par_loop(scale::KERNEL, &s, &[a.arg(Access::READ), bad.arg(Access::WRITE)]).is_err());
    assert!(rt.par_loop(scale::KERNEL, &s, &[a.arg(Access::READ), b.arg(Access::READ)]).is_err());
    assert_eq!(b.values().unwrap(), vec![9.0; 4]);
    rt.par_loop(scale::KERNEL, &s, &[a.arg(Access::READ), b.arg(Access::WRITE)]).unwrap();
    assert_eq!(b.values().unwrap(), vec![2.0, 4.0, 6.0, 8.0]);
}

#[test]
fn zero_sized_sets_are_valid_and_do_nothing() {
    for backend in [Backend::Seq, Backend::Threads] {
        let rt = Runtime::with_backend(backend).unwrap();
        let empty = rt.set("empty", 0).unwrap();
        let nodes = rt.set("nodes", 2).unwrap();
        let m = rt.map("m", &empty, &nodes, 2, vec![]).unwrap();
        let r = rt.dat("r", &nodes, 1, vec![5.0f64; 2]).unwrap();
        rt.par_loop(edge_inc::KERNEL, &empty, &[r.arg_via(&m, 0, Access::INC), r.arg_via(&m, 1, Access::INC)]).unwrap();
        assert_eq!(r.values().unwrap(), vec![5.0; 2]);
    }
}

#[test]
fn a_dat_borrowed_by_the_host_is_reported_busy() {
    let rt = rt();
    let s = rt.set("s", 2).unwrap();
    let a = rt.dat("a", &s, 2, vec![1.0f64; 4]).unwrap();
    let b = rt.dat("b", &s, 2, vec![0.0f64; 4]).unwrap();
    let e = b
        .with_values(|_| rt.par_loop(scale::KERNEL, &s, &[a.arg(Access::READ), b.arg(Access::WRITE)]).unwrap_err())
        .unwrap();
    assert!(matches!(&e, Error::Busy { dat, .. } if dat == "b"), "{e:?}");
}

#[test]
fn asking_for_cuda_without_a_gpu_is_an_error_not_a_panic() {
    match Runtime::with_backend(Backend::Cuda) {
        // A machine with a GPU: the runtime works.
        Ok(rt) => assert!(rt.device_name().is_some()),
        Err(e) => {
            assert!(matches!(e, Error::Backend { .. } | Error::DeviceLibrary { .. }), "{e:?}");
            assert!(e.to_string().contains("cuda"), "{e}");
        }
    }
}

#[test]
fn unknown_or_unavailable_backends_are_errors() {
    assert!(matches!("gpu".parse::<Backend>().unwrap_err(), Error::Backend { .. }));
    assert_eq!("cuda".parse::<Backend>().unwrap(), Backend::Cuda);
    assert_eq!("emu".parse::<Backend>().unwrap(), Backend::Emu);
    assert_eq!("SEQ".parse::<Backend>().unwrap(), Backend::Seq);
    assert_eq!("threads".parse::<Backend>().unwrap(), Backend::Threads);
    assert_eq!("auto".parse::<Backend>().unwrap(), Backend::auto());
}

/// A loop over a subset names the subset (and its parent) in its argument
/// errors: they named the parent set alone, as if the loop ran over it.
#[test]
fn argument_errors_of_a_loop_over_a_subset_name_the_subset() {
    let rt = rt();
    let edges = rt.set("edges", 4).unwrap();
    let wall = rt.subset("wall", &edges, vec![1, 3]).unwrap();
    let x = rt.dat("x", &edges, 1, vec![0.0; 4]).unwrap();
    let y = rt.dat("y", &edges, 2, vec![0.0; 8]).unwrap();
    // x has dim 1, scale's parameters take 2.
    let e = rt.par_loop(scale::KERNEL, &wall, &[x.arg(Access::READ), y.arg(Access::WRITE)]).unwrap_err();
    assert!(matches!(&e, Error::Argument { arg: 0, .. }), "{e}");
    assert!(e.to_string().contains("over `wall (a subset of edges)`"), "{e}");
}
