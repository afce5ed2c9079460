//! Reverse Cuthill-McKee renumbering of a set through a map, for locality.

use std::collections::VecDeque;

/// Adjacency of the `from` entities of a map: two entities are neighbours
/// when they share a target. Returned as CSR (offsets, neighbours).
fn adjacency(from_size: usize, arity: usize, values: &[i32], to_size: usize) -> (Vec<usize>, Vec<u32>) {
    // Inverse map: target -> from entities.
    let mut inv_off = vec![0usize; to_size + 1];
    for &t in &values[..from_size * arity] {
        inv_off[t as usize + 1] += 1;
    }
    for i in 0..to_size {
        inv_off[i + 1] += inv_off[i];
    }
    let mut fill = inv_off.clone();
    let mut inv = vec![0u32; from_size * arity];
    for (k, &t) in values[..from_size * arity].iter().enumerate() {
        inv[fill[t as usize]] = (k / arity) as u32;
        fill[t as usize] += 1;
    }
    let mut off = vec![0usize; from_size + 1];
    let mut adj = Vec::new();
    let mut mark = vec![u32::MAX; from_size];
    for a in 0..from_size {
        mark[a] = a as u32;
        for &t in &values[a * arity..(a + 1) * arity] {
            for &b in &inv[inv_off[t as usize]..inv_off[t as usize + 1]] {
                if mark[b as usize] != a as u32 {
                    mark[b as usize] = a as u32;
                    adj.push(b);
                }
            }
        }
        off[a + 1] = adj.len();
    }
    (off, adj)
}

/// Breadth-first Cuthill-McKee from `start`, appending to `order`; returns the
/// last level's first vertex (a far vertex, used to find peripheral starts).
fn bfs(start: usize, off: &[usize], adj: &[u32], visited: &mut [bool], order: &mut Vec<u32>) -> usize {
    let degree = |v: u32| off[v as usize + 1] - off[v as usize];
    let mut queue = VecDeque::from([start as u32]);
    visited[start] = true;
    let mut last = start;
    let mut next: Vec<u32> = Vec::new();
    while let Some(v) = queue.pop_front() {
        order.push(v);
        last = v as usize;
        next.clear();
        next.extend(adj[off[v as usize]..off[v as usize + 1]].iter().copied().filter(|&w| !visited[w as usize]));
        next.sort_unstable_by_key(|&w| (degree(w), w));
        for &w in &next {
            visited[w as usize] = true;
            queue.push_back(w);
        }
    }
    last
}

/// Reverse Cuthill-McKee order of the `from` set of a map (`arity` values
/// per entity, each `< to_size`): entities sharing a target are neighbours.
/// Returns `order` with `order[new] = old`, a permutation of `0..from_size`.
/// Each connected component starts from a pseudo-peripheral entity.
///
/// ```
/// use parloop_planner::{bandwidth, rcm_order};
/// // Cells of a 1-D mesh, shuffled: cell k touches nodes k and k+1.
/// let cells = [3usize, 0, 4, 1, 2];
/// let map: Vec<i32> = cells.iter().flat_map(|&k| [k as i32, k as i32 + 1]).collect();
/// let order = rcm_order(5, 2, &map, 6);
/// assert!(bandwidth(&order, 2, &map, 6) <= 1);
/// ```
pub fn rcm_order(from_size: usize, arity: usize, values: &[i32], to_size: usize) -> Vec<u32> {
    let (off, adj) = adjacency(from_size, arity, values, to_size);
    let mut visited = vec![false; from_size];
    let mut order = Vec::with_capacity(from_size);
    let mut scratch_visited = vec![false; from_size];
    let mut scratch = Vec::new();
    let degree = |v: usize| off[v + 1] - off[v];
    let mut by_degree: Vec<u32> = (0..from_size as u32).collect();
    by_degree.sort_by_key(|&v| (degree(v as usize), v));
    for &seed in &by_degree {
        if visited[seed as usize] {
            continue;
        }
        // One sweep from the seed finds a far (pseudo-peripheral) vertex.
        scratch.clear();
        let far = bfs(seed as usize, &off, &adj, &mut scratch_visited, &mut scratch);
        bfs(far, &off, &adj, &mut visited, &mut order);
    }
    order.reverse();
    order
}

/// Bandwidth of the adjacency (entities sharing a target) under `order`
/// (`order[new] = old`): the largest `|new(a) - new(b)|` over neighbours.
pub fn bandwidth(order: &[u32], arity: usize, values: &[i32], to_size: usize) -> usize {
    let n = order.len();
    let mut new_of = vec![0usize; n];
    for (new, &old) in order.iter().enumerate() {
        new_of[old as usize] = new;
    }
    let (off, adj) = adjacency(n, arity, values, to_size);
    (0..n)
        .flat_map(|a| adj[off[a]..off[a + 1]].iter().map(move |&b| (a, b as usize)))
        .map(|(a, b)| new_of[a].abs_diff(new_of[b]))
        .max()
        .unwrap_or(0)
}
