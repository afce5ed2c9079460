//! The wave demo under the lazy trace (issue 15): its first three loops
//! give seed 000's DAG (a serial run: core sections only), and lazy steps
//! give bitwise the eager ones.

use parloop::{Backend, Runtime};
use parloop_examples::wave::{Wave, DT};
use parloop_mesh::unit_square;

/// The DAG as sorted (from, to) label pairs, from the Graphviz text.
fn edges_in_dot_file(dot: &str) -> Vec<(String, String)> {
    let mut labels = std::collections::HashMap::new();
    let mut edges = Vec::new();
    for line in dot.lines().map(str::trim) {
        if let Some((id, rest)) = line.split_once(" [ label = \"") {
            labels.insert(id.to_string(), rest.split('"').next().unwrap().to_string());
        } else if let Some((a, b)) = line.split_once(" -> ") {
            edges.push((a.to_string(), b.split_whitespace().next().unwrap().to_string()));
        }
    }
    let mut out: Vec<_> = edges.into_iter().map(|(a, b)| (labels[&a].clone(), labels[&b].clone())).collect();
    out.sort();
    out
}

#[test]
fn the_first_three_loops_give_the_seed_dag() {
    let rt = Runtime::with_lazy(Backend::Seq, true).unwrap();
    let mesh = unit_square(4, 4).unwrap();
    let wave = Wave::new(&rt, &mesh, DT).unwrap();
    for lp in &wave.loops()[..3] {
        rt.execute(lp).unwrap();
    }
    let mut want: Vec<(String, String)> = [
        ("top", "phi_expr[core]"),
        ("top", "zero[core]"),
        ("phi_expr[core]", "assemble1[core]"),
        ("zero[core]", "assemble1[core]"),
        ("assemble1[core]", "bot"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    want.sort();
    assert_eq!(rt.trace_edges(), want);
    let st = rt.trace_stats();
    assert_eq!((st.loops_recorded, st.computations_recorded, st.loops_run), (3, 3, 0));
}

#[test]
fn lazy_steps_are_bitwise_eager_steps() {
    let run = |backend: Backend, lazy: bool| {
        let rt = Runtime::with_lazy(backend, lazy).unwrap();
        let mesh = unit_square(6, 5).unwrap();
        let mut wave = Wave::new(&rt, &mesh, DT).unwrap();
        let mut seen = Vec::new();
        for step in 1..=20 {
            wave.step().unwrap();
            if step % 7 == 0 {
                // A host read mid-run forces the steps so far.
                seen.push(wave.phi.values().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<u64>>());
            }
        }
        seen.push(wave.p.values().unwrap().iter().map(|x| x.to_bits()).collect());
        seen.push(wave.phi.values().unwrap().iter().map(|x| x.to_bits()).collect());
        (seen, rt.trace_stats())
    };
    for backend in [Backend::Seq, Backend::Threads] {
        let (eager, _) = run(backend, false);
        let (lazy, stats) = run(backend, true);
        assert_eq!(eager, lazy, "{backend}");
        assert_eq!(stats.loops_recorded, 140, "{backend}");
        assert_eq!(stats.loops_run, 140, "{backend}");
    }
}

#[test]
fn parloop_trace_dot_writes_the_first_forced_step() {
    let path = std::env::temp_dir().join(format!("parloop-wave-trace-{}.dot", std::process::id()));
    let run = |dot: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_wave"))
            .args(["--mesh-size", "4", "--steps", "2", "--backend", "seq", "--quiet"])
            .env("PARLOOP_LAZY", "1")
            .env("PARLOOP_TRACE_DOT", dot)
            .output()
            .unwrap()
    };
    let out = run(&path);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dot = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let edges = edges_in_dot_file(&dot);
    // One whole step, serially: the seven loops in their dependency order.
    for (a, b) in [
        ("phi_expr[core]", "assemble1[core]"),
        ("assemble1[core]", "expr[core]"),
        ("assemble2[core]", "expr[core]"),
        ("expr[core]", "phi_expr[core]"),
    ] {
        assert!(edges.contains(&(a.to_string(), b.to_string())), "{a} -> {b} missing:\n{dot}");
    }
    // A path that cannot be written is an error naming the variable.
    let out = run(std::path::Path::new("/nonexistent-dir/trace.dot"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("PARLOOP_TRACE_DOT") && !err.contains("panicked"), "{err}");
}

#[test]
fn lazy_steps_fuse_the_vertex_loops_with_the_eager_results() {
    // Fusion (issue 15): forced in recording order, each step boundary's
    // expr, phi_expr | phi_expr, zero_t1 run as one launch, and a force's
    // first phi_expr, zero_t1 and last expr, phi_expr as one each.
    let run = |lazy: bool, fusion: bool| {
        let rt = Runtime::with_lazy(Backend::Threads, lazy).unwrap();
        rt.set_fusion(fusion);
        let mesh = unit_square(6, 5).unwrap();
        let mut wave = Wave::new(&rt, &mesh, DT).unwrap();
        for _ in 0..7 {
            wave.step().unwrap();
        }
        let phi: Vec<u64> = wave.phi.values().unwrap().iter().map(|x| x.to_bits()).collect();
        let p: Vec<u64> = wave.p.values().unwrap().iter().map(|x| x.to_bits()).collect();
        ((phi, p), rt.trace_stats())
    };
    let (eager, _) = run(false, true);
    let (fused, stats) = run(true, true);
    assert_eq!(fused, eager);
    // 2 + 6 step boundaries x 4 + 2.
    assert_eq!((stats.loops_run, stats.loops_fused), (49, 28), "{stats:?}");
    let (apart, off) = run(true, false);
    assert_eq!(apart, eager);
    assert_eq!(off.loops_fused, 0);
}
