//! The pending DAG as Graphviz, with seed 000's labels (`kernel[core]`,
//! `HaloSend(dat)`, ...) between `top` and `bot`, edges transitively
//! reduced (as the seed draws them), through petgraph's `Dot`.

use petgraph::dot::{Config, Dot};
use petgraph::graph::Graph;
use petgraph::stable_graph::{NodeIndex, StableGraph};
use petgraph::Direction;

use super::{Node, RecordedArg, What};

/// The names of a recorded loop's arguments (`#id` for data dropped since).
pub(super) fn arg_names(args: &[RecordedArg]) -> Vec<String> {
    args.iter()
        .map(|a| match &a.held {
            super::Held::Weak(w) => w.upgrade().map(|s| s.name().to_string()).unwrap_or_else(|| format!("#{}", a.id)),
            super::Held::Strong(s) => s.name().to_string(),
        })
        .collect()
}

/// An empty trace.
pub(crate) fn empty() -> String {
    let mut g: Graph<String, &str> = Graph::new();
    let top = g.add_node("top".into());
    let bot = g.add_node("bot".into());
    g.add_edge(top, bot, "");
    format!("{}", Dot::with_config(&g, &[Config::EdgeNoLabel]))
}

fn label(what: What, kernel: &str, names: &[String]) -> String {
    match what {
        What::Compute { first, last } => {
            let secs: Vec<&str> = [super::Section::Core, super::Section::Owned, super::Section::Exec]
                .into_iter()
                .filter(|s| (first..=last).contains(s))
                .map(|s| s.name())
                .collect();
            format!("{kernel}[{}]", secs.join(","))
        }
        What::HaloSend { arg } => format!("HaloSend({})", names[arg]),
        What::HaloRecv { arg } => format!("HaloRecv({})", names[arg]),
        What::ReduceBegin { arg } => format!("ReduceBegin({})", names[arg]),
        What::ReduceEnd { arg } => format!("ReduceEnd({})", names[arg]),
    }
}

/// Renders `graph`; `info(seq)` gives a pending loop's kernel name and
/// argument names.
pub(super) fn render(
    graph: &StableGraph<Node, ()>,
    info: impl Fn(u64) -> Option<(&'static str, Vec<String>)>,
) -> String {
    // Nodes in recording order: a topological order (edges only go from
    // older computations to newer ones).
    let mut order: Vec<NodeIndex> = graph.node_indices().collect();
    order.sort_by_key(|&n| (graph[n].seq, n.index()));
    let pos = |n: NodeIndex| order.binary_search_by_key(&(graph[n].seq, n.index()), |&m| (graph[m].seq, m.index()));
    let k = order.len();
    let succ: Vec<Vec<usize>> = order
        .iter()
        .map(|&n| {
            let mut s: Vec<usize> =
                graph.neighbors_directed(n, Direction::Outgoing).filter_map(|m| pos(m).ok()).collect();
            s.sort_unstable();
            s.dedup();
            s
        })
        .collect();
    // Reachability, newest first.
    let words = k.div_ceil(64).max(1);
    let mut reach = vec![vec![0u64; words]; k];
    for i in (0..k).rev() {
        for &j in &succ[i] {
            reach[i][j / 64] |= 1 << (j % 64);
            let (lo, hi) = reach.split_at_mut(j);
            for (a, b) in lo[i].iter_mut().zip(&hi[0]) {
                *a |= *b;
            }
        }
    }
    let mut g: Graph<String, &str> = Graph::new();
    let top = g.add_node("top".into());
    let mut names_of = std::collections::HashMap::new();
    let ids: Vec<_> = order
        .iter()
        .map(|&n| {
            let node = graph[n];
            let (kernel, names) =
                names_of.entry(node.seq).or_insert_with(|| info(node.seq).unwrap_or(("?", Vec::new()))).clone();
            g.add_node(label(node.what, kernel, &names))
        })
        .collect();
    let bot = g.add_node("bot".into());
    let mut has_pred = vec![false; k];
    for i in 0..k {
        for &j in &succ[i] {
            // Kept unless another successor of i reaches j.
            let implied = succ[i].iter().any(|&m| m != j && reach[m][j / 64] >> (j % 64) & 1 == 1);
            if !implied {
                g.add_edge(ids[i], ids[j], "");
            }
            has_pred[j] = true;
        }
    }
    for i in 0..k {
        if !has_pred[i] {
            g.add_edge(top, ids[i], "");
        }
        if succ[i].is_empty() {
            g.add_edge(ids[i], bot, "");
        }
    }
    if k == 0 {
        g.add_edge(top, bot, "");
    }
    format!("{}", Dot::with_config(&g, &[Config::EdgeNoLabel]))
}
