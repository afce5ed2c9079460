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

/// The pending DAG as the seed draws it: labels (`top` first, `bot`
/// last) and the edges between them, transitively reduced.
pub(crate) struct Reduced {
    labels: Vec<String>,
    edges: Vec<(usize, usize)>,
}

impl Reduced {
    /// An empty trace: `top -> bot`.
    fn empty() -> Reduced {
        Reduced { labels: vec!["top".into(), "bot".into()], edges: vec![(0, 1)] }
    }

    /// The edges as label pairs, sorted.
    pub(crate) fn edges(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> =
            self.edges.iter().map(|&(a, b)| (self.labels[a].clone(), self.labels[b].clone())).collect();
        out.sort();
        out
    }

    /// Graphviz text, through petgraph's `Dot`.
    pub(crate) fn render(&self) -> String {
        let mut g: Graph<String, &str> = Graph::new();
        let ids: Vec<_> = self.labels.iter().map(|l| g.add_node(l.clone())).collect();
        for &(a, b) in &self.edges {
            g.add_edge(ids[a], ids[b], "");
        }
        format!("{}", Dot::with_config(&g, &[Config::EdgeNoLabel]))
    }
}

/// An empty trace's Graphviz text.
pub(crate) fn empty() -> String {
    Reduced::empty().render()
}

/// An empty trace's edges.
pub(crate) fn empty_edges() -> Vec<(String, String)> {
    Reduced::empty().edges()
}

/// Reduces `graph`; `info(seq)` gives a pending loop's kernel name and
/// argument names.
pub(super) fn reduce(
    graph: &StableGraph<Node, ()>,
    info: impl Fn(u64) -> Option<(&'static str, Vec<String>)>,
) -> Reduced {
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
    // Labels: `top` is 0, the computations 1..=k in order, `bot` k + 1.
    let mut labels = Vec::with_capacity(k + 2);
    labels.push("top".to_string());
    let mut names_of = std::collections::HashMap::new();
    for &n in &order {
        let node = graph[n];
        let (kernel, names) =
            names_of.entry(node.seq).or_insert_with(|| info(node.seq).unwrap_or(("?", Vec::new()))).clone();
        labels.push(label(node.what, kernel, &names));
    }
    labels.push("bot".to_string());
    let (top, bot) = (0, k + 1);
    let mut edges = Vec::new();
    let mut has_pred = vec![false; k];
    for (i, out) in succ.iter().enumerate() {
        for &j in out {
            // Kept unless another successor of i reaches j.
            let implied = out.iter().any(|&m| m != j && reach[m][j / 64] >> (j % 64) & 1 == 1);
            if !implied {
                edges.push((i + 1, j + 1));
            }
            has_pred[j] = true;
        }
    }
    for (i, out) in succ.iter().enumerate() {
        if !has_pred[i] {
            edges.push((top, i + 1));
        }
        if out.is_empty() {
            edges.push((i + 1, bot));
        }
    }
    if k == 0 {
        edges.push((top, bot));
    }
    Reduced { labels, edges }
}
