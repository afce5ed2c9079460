//! Partitioning and local numbering, as pure functions of the global mesh
//! (no communication): owners of the primary set, ownership of the other
//! sets through the maps, and each rank's numbering
//! `core | owned | exec halo | non-exec halo` (seed 004).

use rayon::prelude::*;
use std::collections::HashMap;

use crate::decl::Sections;

/// A set of the global mesh.
#[derive(Clone, Debug)]
pub(crate) struct GlobalSet {
    pub size: usize,
}

/// A map of the global mesh, between sets by index.
#[derive(Clone, Debug)]
pub(crate) struct GlobalMap {
    pub from: usize,
    pub to: usize,
    pub arity: usize,
    pub values: Vec<i32>,
}

/// Primary-set adjacency in CSR form (METIS's input). When the map goes
/// into the primary set, two primary entities are neighbours when one row
/// of the map holds both. When it leaves the primary set (cells to
/// vertices), they are neighbours when they share a facet ([`facet_size`]
/// targets): the dual graph METIS's own `PartMeshDual` builds with the
/// `ncommon` its manual recommends (2 for triangles and quadrilaterals, 3
/// for tetrahedra and prisms, 4 for hexahedra; the smallest facet of a
/// mixed mesh), through vertices for maps of two.
/// Sharing any vertex would make each tetrahedron of a structured mesh a
/// neighbour of about seventy others (a vertex's 24 cells pairwise), and
/// sharing an edge of about twenty: METIS took 17.5 of the 29 s a 2-rank
/// partition of 11.7 million tetrahedra spent with the edge graph.
pub(crate) fn adjacency(primary: usize, sets: &[GlobalSet], map: &GlobalMap) -> (Vec<i32>, Vec<i32>) {
    let n = sets[primary].size;
    let arity = map.arity.max(1);
    if map.to == primary {
        let mut xadj = Vec::with_capacity(n + 1);
        let mut adjncy = Vec::new();
        xadj.push(0);
        let mut neighbours: Vec<Vec<i32>> = vec![Vec::new(); n];
        for row in map.values.chunks(arity) {
            for &a in row {
                for &b in row {
                    if a != b {
                        neighbours[a as usize].push(b);
                    }
                }
            }
        }
        for list in &mut neighbours {
            list.sort_unstable();
            list.dedup();
            adjncy.extend_from_slice(list);
            xadj.push(adjncy.len() as i32);
        }
        return (xadj, adjncy);
    }
    // Each row's targets sorted, a repeated one replaced by -1 (counted
    // once), then the primary entities of each target (CSR, by counting).
    let mut rows = map.values.clone();
    for row in rows.chunks_mut(arity) {
        row.sort_unstable();
        for k in (1..row.len()).rev() {
            if row[k] == row[k - 1] {
                row[k] = -1;
            }
        }
    }
    let targets = sets[map.to].size;
    let mut start = vec![0usize; targets + 1];
    for &t in rows.iter().filter(|&&t| t >= 0) {
        start[t as usize + 1] += 1;
    }
    for t in 0..targets {
        start[t + 1] += start[t];
    }
    let mut fill = start.clone();
    let mut users = vec![0i32; start[targets]];
    for (e, row) in rows.chunks(arity).enumerate() {
        for &t in row.iter().filter(|&&t| t >= 0) {
            users[fill[t as usize]] = e as i32;
            fill[t as usize] += 1;
        }
    }
    let need = facet_size(&rows, arity, &start, &users);
    let graph = sharing(&rows, arity, &start, &users, need);
    if graph.1.is_empty() && need > 1 {
        // No two entities share a facet (a map whose rows are not cells):
        // sharing a target is all there is.
        return sharing(&rows, arity, &start, &users, 1);
    }
    graph
}

/// The adjacency of entities with target rows `rows` (`arity` each, -1
/// for none) that share at least `need` targets, given each target's
/// entities (`users[start[t]..start[t + 1]]`). Chunks of entities in
/// parallel (each with its own count per entity), concatenated in order:
/// the graph is the same for any thread count.
fn sharing(rows: &[i32], arity: usize, start: &[usize], users: &[i32], need: u32) -> (Vec<i32>, Vec<i32>) {
    const CHUNK: usize = 1 << 14;
    let n = rows.len() / arity;
    let chunks = n.div_ceil(CHUNK);
    // A count array per piece rayon splits the range into (4 bytes per
    // entity): about four pieces per worker.
    let min_len = chunks.div_ceil(4 * rayon::current_num_threads()).max(1);
    let parts: Vec<(Vec<u32>, Vec<i32>)> = (0..chunks)
        .into_par_iter()
        .with_min_len(min_len)
        .map_init(
            || vec![0u32; n],
            |shared, c| {
                let entities = c * CHUNK..((c + 1) * CHUNK).min(n);
                let mut degrees = Vec::with_capacity(entities.len());
                let mut adjncy = Vec::new();
                // Per entity, count the targets each other entity shares
                // with it; those sharing `need` are its neighbours, sorted.
                let (mut met, mut near): (Vec<i32>, Vec<i32>) = (Vec::new(), Vec::new());
                for e in entities {
                    for &t in rows[e * arity..(e + 1) * arity].iter().filter(|&&t| t >= 0) {
                        for &other in &users[start[t as usize]..start[t as usize + 1]] {
                            if other as usize != e {
                                if shared[other as usize] == 0 {
                                    met.push(other);
                                }
                                shared[other as usize] += 1;
                            }
                        }
                    }
                    for &other in &met {
                        if shared[other as usize] >= need {
                            near.push(other);
                        }
                        shared[other as usize] = 0;
                    }
                    met.clear();
                    near.sort_unstable();
                    degrees.push(near.len() as u32);
                    adjncy.append(&mut near);
                }
                (degrees, adjncy)
            },
        )
        .collect();
    let mut xadj = Vec::with_capacity(n + 1);
    let mut adjncy = Vec::with_capacity(parts.iter().map(|p| p.1.len()).sum());
    xadj.push(0);
    for (degrees, part) in parts {
        for d in degrees {
            xadj.push(xadj.last().copied().unwrap_or(0) + d as i32);
        }
        adjncy.extend_from_slice(&part);
    }
    (xadj, adjncy)
}

/// Targets two primary entities share to be neighbours: the smallest
/// facet of the mesh. For each sampled entity, the most it shares with
/// another (duplicates, sharing every target, left out, and entities
/// that share one target at most); the least of those over the sample, so that a mixed mesh (tetrahedra beside
/// prisms) keeps its smaller facets. Rows of six are capped at three:
/// prisms share three (a triangle) above and below and four at the sides,
/// quadratic triangles three (an edge). This is METIS's recommended
/// `ncommon`: 2 for triangles and quadrilaterals, 3 for tetrahedra,
/// prisms and quadratic triangles, 4 for hexahedra, 1 for edges; 1 when
/// no sampled pair shares anything.
fn facet_size(rows: &[i32], arity: usize, start: &[usize], users: &[i32]) -> u32 {
    const SAMPLE: usize = 4096;
    let n = rows.len() / arity;
    let mut shared: Vec<(i32, u32)> = Vec::new();
    let mut least: Option<u32> = None;
    for e in (0..n).step_by((n / SAMPLE).max(1)) {
        let row = &rows[e * arity..(e + 1) * arity];
        let own = row.iter().filter(|&&t| t >= 0).count() as u32;
        shared.clear();
        for &t in row.iter().filter(|&&t| t >= 0) {
            for &other in &users[start[t as usize]..start[t as usize + 1]] {
                if other as usize != e {
                    match shared.iter_mut().find(|(o, _)| *o == other) {
                        Some((_, c)) => *c += 1,
                        None => shared.push((other, 1)),
                    }
                }
            }
        }
        // (An entity touching others at one vertex only says nothing of
        // the mesh's facets.)
        if let Some(most) = shared.iter().map(|&(_, c)| c).filter(|&c| c < own).max().filter(|&m| m > 1) {
            least = Some(least.map_or(most, |l| l.min(most)));
        }
    }
    let facet = least.unwrap_or(1);
    if arity == 6 {
        facet.min(3)
    } else {
        facet
    }
}

/// Contiguous blocks of nearly equal size.
pub(crate) fn block_owners(n: usize, parts: usize) -> Vec<i32> {
    (0..n).map(|e| (e * parts / n.max(1)) as i32).collect()
}

/// Recursive coordinate bisection: splits along the longest extent, sizes
/// proportional to the parts on each side; ties broken by index.
pub(crate) fn rcb_owners(coords: &[f64], dim: usize, parts: usize) -> Vec<i32> {
    let n = coords.len() / dim.max(1);
    let mut owners = vec![0i32; n];
    let mut stack = vec![((0..n).collect::<Vec<usize>>(), 0usize, parts)];
    while let Some((mut items, first, k)) = stack.pop() {
        if k <= 1 || items.is_empty() {
            for &e in &items {
                owners[e] = first as i32;
            }
            continue;
        }
        let extent = |d: usize| {
            let (lo, hi) = items.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &e| {
                let v = coords[e * dim + d];
                (lo.min(v), hi.max(v))
            });
            hi - lo
        };
        let axis = (0..dim).max_by(|&a, &b| extent(a).total_cmp(&extent(b)).then(b.cmp(&a))).unwrap_or(0);
        items.sort_by(|&a, &b| coords[a * dim + axis].total_cmp(&coords[b * dim + axis]).then(a.cmp(&b)));
        let left_parts = k / 2;
        let cut = items.len() * left_parts / k;
        let right = items.split_off(cut);
        stack.push((items, first, left_parts));
        stack.push((right, first + left_parts, k - left_parts));
    }
    owners
}

/// Owners of every set, from the primary set's: repeatedly, a set without
/// owners takes them through a map to or from a set with owners (an edge
/// goes with its first cell; a node with the lowest-numbered cell naming
/// it). Sets no map reaches are cut into blocks.
pub(crate) fn propagate(sets: &[GlobalSet], maps: &[GlobalMap], owners: &mut [Option<Vec<i32>>], parts: usize) {
    loop {
        let mut changed = false;
        for m in maps {
            match (owners[m.from].is_some(), owners[m.to].is_some()) {
                (false, true) => {
                    let to = owners[m.to].as_ref().expect("checked");
                    let own = (0..sets[m.from].size).map(|e| to[m.values[e * m.arity] as usize]).collect();
                    owners[m.from] = Some(own);
                    changed = true;
                }
                (true, false) => {
                    let from = owners[m.from].as_ref().expect("checked");
                    let mut own = vec![-1i32; sets[m.to].size];
                    for (e, row) in m.values.chunks(m.arity).enumerate() {
                        for &t in row {
                            if own[t as usize] < 0 {
                                own[t as usize] = from[e];
                            }
                        }
                    }
                    // Targets no row names go in blocks.
                    let blocks = block_owners(own.len(), parts);
                    for (t, o) in own.iter_mut().enumerate() {
                        if *o < 0 {
                            *o = blocks[t];
                        }
                    }
                    owners[m.to] = Some(own);
                    changed = true;
                }
                _ => {}
            }
        }
        if !changed {
            break;
        }
    }
    for (s, o) in owners.iter_mut().enumerate() {
        if o.is_none() {
            *o = Some(block_owners(sets[s].size, parts));
        }
    }
}

/// One set's local numbering on one rank.
#[derive(Clone, Debug, Default)]
pub(crate) struct LocalSet {
    pub sections: Sections,
    /// Global index of every local entity, in local order.
    pub global: Vec<usize>,
    /// Per neighbour rank, the local indices of the halo entities it owns,
    /// exec halo first, each part in global order.
    pub imports: Vec<(usize, Vec<u32>)>,
}

/// One rank's view of the distributed mesh.
#[derive(Clone, Debug)]
pub(crate) struct Local {
    pub sets: Vec<LocalSet>,
    /// Local values of every map (rows of the source set's local entities).
    pub maps: Vec<Vec<i32>>,
}

/// The local numbering of `rank` (see the module documentation).
pub(crate) fn localise(rank: usize, sets: &[GlobalSet], maps: &[GlobalMap], owners: &[Vec<i32>]) -> Local {
    let r = rank as i32;
    let ns = sets.len();
    let mine = |s: usize, e: usize| owners[s][e] == r;
    // Exec halo: others' entities that reach one of mine through a map.
    let mut exec: Vec<Vec<usize>> = vec![Vec::new(); ns];
    let mut is_exec: Vec<Vec<bool>> = sets.iter().map(|s| vec![false; s.size]).collect();
    for m in maps {
        for (e, row) in m.values.chunks(m.arity).enumerate() {
            if !mine(m.from, e) && !is_exec[m.from][e] && row.iter().any(|&t| mine(m.to, t as usize)) {
                is_exec[m.from][e] = true;
                exec[m.from].push(e);
            }
        }
    }
    // Boundary (owned section): mine, reaching a halo entity through a map.
    let mut boundary: Vec<Vec<bool>> = sets.iter().map(|s| vec![false; s.size]).collect();
    // Non-exec halo: others' entities, not exec, read by my or exec entities.
    let mut is_nonexec: Vec<Vec<bool>> = sets.iter().map(|s| vec![false; s.size]).collect();
    for m in maps {
        for (e, row) in m.values.chunks(m.arity).enumerate() {
            let local = mine(m.from, e);
            if !local && !is_exec[m.from][e] {
                continue;
            }
            for &t in row {
                let t = t as usize;
                if !mine(m.to, t) {
                    if local {
                        boundary[m.from][e] = true;
                    }
                    if !is_exec[m.to][t] {
                        is_nonexec[m.to][t] = true;
                    }
                }
            }
        }
    }
    let mut local_sets = Vec::with_capacity(ns);
    for s in 0..ns {
        let n = sets[s].size;
        let core: Vec<usize> = (0..n).filter(|&e| mine(s, e) && !boundary[s][e]).collect();
        let owned: Vec<usize> = (0..n).filter(|&e| mine(s, e) && boundary[s][e]).collect();
        let by_owner = |mut v: Vec<usize>| {
            v.sort_by_key(|&e| (owners[s][e], e));
            v
        };
        let ex = by_owner(exec[s].clone());
        let nonexec = by_owner((0..n).filter(|&e| is_nonexec[s][e]).collect());
        let sections = Sections { core: core.len(), owned: owned.len(), exec: ex.len(), non_exec: nonexec.len() };
        let global: Vec<usize> = core.into_iter().chain(owned).chain(ex).chain(nonexec).collect();
        let halo_start = sections.core + sections.owned;
        let mut imports: Vec<(usize, Vec<u32>)> = Vec::new();
        for (i, &g) in global.iter().enumerate().skip(halo_start) {
            let q = owners[s][g] as usize;
            match imports.iter_mut().find(|(o, _)| *o == q) {
                Some((_, list)) => list.push(i as u32),
                None => imports.push((q, vec![i as u32])),
            }
        }
        imports.sort_by_key(|(q, _)| *q);
        local_sets.push(LocalSet { sections, global, imports });
    }
    let mut local_maps = Vec::with_capacity(maps.len());
    for m in maps {
        let to_local: HashMap<usize, i32> =
            local_sets[m.to].global.iter().enumerate().map(|(i, &g)| (g, i as i32)).collect();
        let from = &local_sets[m.from];
        let mut values = Vec::with_capacity(from.global.len() * m.arity);
        for &g in &from.global {
            for &t in &m.values[g * m.arity..(g + 1) * m.arity] {
                // Rows of non-exec entities are never executed; a target
                // not held here points at entity 0.
                values.push(to_local.get(&(t as usize)).copied().unwrap_or(0));
            }
        }
        local_maps.push(values);
    }
    Local { sets: local_sets, maps: local_maps }
}

/// Graph edges whose ends have different owners.
pub(crate) fn edge_cut(xadj: &[i32], adjncy: &[i32], owners: &[i32]) -> usize {
    let mut cut = 0;
    for v in 0..owners.len() {
        for &u in &adjncy[xadj[v] as usize..xadj[v + 1] as usize] {
            if owners[u as usize] != owners[v] {
                cut += 1;
            }
        }
    }
    cut / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A strip of `n` cells in a row, edges between neighbours.
    fn strip(n: usize) -> (Vec<GlobalSet>, Vec<GlobalMap>) {
        let sets = vec![GlobalSet { size: n }, GlobalSet { size: n - 1 }];
        let values = (0..n - 1).flat_map(|e| [e as i32, e as i32 + 1]).collect();
        (sets, vec![GlobalMap { from: 1, to: 0, arity: 2, values }])
    }

    #[test]
    fn numbering_has_four_sections_and_covers_every_entity_once() {
        let (sets, maps) = strip(10);
        let mut owners = vec![Some(block_owners(10, 2)), None];
        propagate(&sets, &maps, &mut owners, 2);
        let owners: Vec<Vec<i32>> = owners.into_iter().map(Option::unwrap).collect();
        // Edge 4 joins cells 4 (rank 0) and 5 (rank 1) and goes with cell 4.
        assert_eq!(owners[1][4], 0);
        let mut seen = [vec![0; 10], vec![0; 9]];
        for rank in 0..2 {
            let local = localise(rank, &sets, &maps, &owners);
            for (s, ls) in local.sets.iter().enumerate() {
                assert_eq!(ls.sections.total(), ls.global.len());
                let owned = ls.sections.core + ls.sections.owned;
                for &g in &ls.global[..owned] {
                    seen[s][g] += 1;
                    assert_eq!(owners[s][g], rank as i32);
                }
            }
            // Local map rows name the same entities as the global ones.
            let (cells, edges) = (&local.sets[0], &local.sets[1]);
            let executed = edges.sections.core + edges.sections.owned + edges.sections.exec;
            for (i, &g) in edges.global[..executed].iter().enumerate() {
                for c in 0..2 {
                    let l = local.maps[0][i * 2 + c] as usize;
                    assert_eq!(cells.global[l] as i32, maps[0].values[g * 2 + c]);
                }
            }
        }
        assert!(seen.iter().flatten().all(|&k| k == 1));
        let r1 = localise(1, &sets, &maps, &owners);
        // Rank 1 runs edge 4 redundantly (it touches its cell 5) and reads
        // cell 4. No map leaves the cells, so all of rank 1's are core.
        assert_eq!(r1.sets[1].sections, Sections { core: 4, owned: 0, exec: 1, non_exec: 0 });
        assert_eq!(r1.sets[0].sections, Sections { core: 5, owned: 0, exec: 0, non_exec: 1 });
        assert_eq!(r1.sets[0].imports, vec![(0, vec![5])]);
    }

    #[test]
    fn rcb_balances_and_block_covers_every_part() {
        let coords: Vec<f64> = (0..100).flat_map(|i| [(i % 10) as f64, (i / 10) as f64 * 0.5]).collect();
        let owners = rcb_owners(&coords, 2, 4);
        for p in 0..4 {
            assert_eq!(owners.iter().filter(|&&o| o == p).count(), 25);
        }
        // More parts than entities: each entity alone, some parts empty.
        assert_eq!(block_owners(5, 8), vec![0, 1, 3, 4, 6]);
        assert_eq!(block_owners(10, 3), vec![0, 0, 0, 0, 1, 1, 1, 2, 2, 2]);
    }

    /// Two triangles of a unit square and a third beside them sharing one
    /// vertex: neighbours through the shared edge only.
    #[test]
    fn adjacency_out_of_the_primary_set_is_through_shared_edges() {
        // Vertices 0..5; triangles (0 1 2), (1 3 2), (3 4 5).
        let sets = vec![GlobalSet { size: 3 }, GlobalSet { size: 6 }];
        let map = GlobalMap { from: 0, to: 1, arity: 3, values: vec![0, 1, 2, 1, 3, 2, 3, 4, 5] };
        let (xadj, adjncy) = adjacency(0, &sets, &map);
        assert_eq!(xadj, vec![0, 1, 2, 2]);
        assert_eq!(adjncy, vec![1, 0]);
        // Edges to nodes: neighbours through a shared node; a repeated
        // target in a row counts once.
        let sets = vec![GlobalSet { size: 3 }, GlobalSet { size: 4 }];
        let map = GlobalMap { from: 0, to: 1, arity: 2, values: vec![0, 1, 1, 2, 3, 3] };
        let (xadj, adjncy) = adjacency(0, &sets, &map);
        assert_eq!(xadj, vec![0, 1, 2, 2]);
        assert_eq!(adjncy, vec![1, 0]);
    }

    /// Tetrahedra sharing faces are neighbours, those sharing an edge only
    /// when an edge is the smallest facet seen (METIS's `ncommon` 3 for
    /// tetrahedra);
    /// quadrilaterals, four targets a row as well, neighbour through edges.
    #[test]
    fn tetrahedra_are_neighbours_through_faces_and_quadrilaterals_through_edges() {
        let sets = vec![GlobalSet { size: 4 }, GlobalSet { size: 10 }];
        let values =
            vec![0, 1, 2, 3, /* face */ 1, 2, 3, 4, /* edge */ 0, 1, 5, 6, /* vertex */ 3, 7, 8, 9];
        let (xadj, adjncy) = adjacency(0, &sets, &GlobalMap { from: 0, to: 1, arity: 4, values });
        // The second tetrahedron shares an edge at most: the smallest facet
        // seen is an edge, and the first's neighbours are both.
        assert_eq!(&adjncy[xadj[0] as usize..xadj[1] as usize], &[1, 2]);
        assert_eq!(&adjncy[xadj[3] as usize..xadj[4] as usize], &[] as &[i32]);
        // Without it, tetrahedra neighbour through faces only.
        let values = vec![0, 1, 2, 3, 1, 2, 3, 4, 0, 2, 3, 5, 3, 7, 8, 9];
        let (xadj, adjncy) = adjacency(0, &sets, &GlobalMap { from: 0, to: 1, arity: 4, values });
        assert_eq!(&adjncy[xadj[0] as usize..xadj[1] as usize], &[1, 2]);
        assert_eq!(&adjncy[xadj[1] as usize..xadj[2] as usize], &[0]);
        // Symmetric, as METIS requires.
        for e in 0..4 {
            for &o in &adjncy[xadj[e] as usize..xadj[e + 1] as usize] {
                let back = &adjncy[xadj[o as usize] as usize..xadj[o as usize + 1] as usize];
                assert!(back.contains(&(e as i32)), "{e} -> {o} without {o} -> {e}");
            }
        }
        // A 2 x 2 grid of quadrilaterals (vertices 0..9, row-major), and a
        // duplicate of the first, which does not make facets of four.
        let quads = vec![0, 1, 4, 3, 1, 2, 5, 4, 3, 4, 7, 6, 4, 5, 8, 7, 0, 1, 4, 3];
        let sets = vec![GlobalSet { size: 5 }, GlobalSet { size: 9 }];
        let (xadj, adjncy) = adjacency(0, &sets, &GlobalMap { from: 0, to: 1, arity: 4, values: quads });
        assert_eq!(&adjncy[xadj[0] as usize..xadj[1] as usize], &[1, 2, 4]);
        assert_eq!(&adjncy[xadj[3] as usize..xadj[4] as usize], &[1, 2]);
        // Two layers of two prisms (triangles 0 1 2 / 1 3 2 at z = 0, 1, 2:
        // vertices 4 z + v): beside through a quadrilateral, above through
        // a triangle; both are neighbours.
        let prism = |a: i32, b: i32, c: i32, z: i32| {
            [a + 4 * z, b + 4 * z, c + 4 * z, a + 4 * z + 4, b + 4 * z + 4, c + 4 * z + 4]
        };
        let values: Vec<i32> = [prism(0, 1, 2, 0), prism(1, 3, 2, 0), prism(0, 1, 2, 1), prism(1, 3, 2, 1)].concat();
        let sets = vec![GlobalSet { size: 4 }, GlobalSet { size: 12 }];
        let (xadj, adjncy) = adjacency(0, &sets, &GlobalMap { from: 0, to: 1, arity: 6, values });
        assert_eq!(&adjncy[xadj[0] as usize..xadj[1] as usize], &[1, 2]);
    }

    /// Enough triangles for several parallel chunks: the graph is the one
    /// their shared edges give, in order.
    #[test]
    fn the_parallel_dual_graph_is_the_shared_edge_graph() {
        let m = 130; // 33 800 triangles, over two chunks of 16 384
        let v = |i: usize, j: usize| (i + j * (m + 1)) as i32;
        let mut values = Vec::new();
        for j in 0..m {
            for i in 0..m {
                values.extend([v(i, j), v(i + 1, j), v(i + 1, j + 1)]);
                values.extend([v(i, j), v(i + 1, j + 1), v(i, j + 1)]);
            }
        }
        let n = 2 * m * m;
        let sets = vec![GlobalSet { size: n }, GlobalSet { size: (m + 1) * (m + 1) }];
        let (xadj, adjncy) = adjacency(0, &sets, &GlobalMap { from: 0, to: 1, arity: 3, values: values.clone() });
        let mut by_edge: HashMap<(i32, i32), Vec<i32>> = HashMap::new();
        for (e, t) in values.chunks(3).enumerate() {
            for (a, b) in [(t[0], t[1]), (t[1], t[2]), (t[2], t[0])] {
                by_edge.entry((a.min(b), a.max(b))).or_default().push(e as i32);
            }
        }
        let mut want = vec![Vec::new(); n];
        for cells in by_edge.values() {
            for &a in cells {
                want[a as usize].extend(cells.iter().copied().filter(|&b| b != a));
            }
        }
        for (e, w) in want.iter_mut().enumerate() {
            w.sort_unstable();
            assert_eq!(&adjncy[xadj[e] as usize..xadj[e + 1] as usize], &w[..], "triangle {e}");
        }
        assert_eq!(xadj.len(), n + 1);
    }

    #[test]
    fn adjacency_through_a_map_into_the_primary_set() {
        let (sets, maps) = strip(4);
        let (xadj, adjncy) = adjacency(0, &sets, &maps[0]);
        assert_eq!(xadj, vec![0, 1, 3, 5, 6]);
        assert_eq!(adjncy, vec![1, 0, 2, 1, 3, 2]);
        assert_eq!(edge_cut(&xadj, &adjncy, &[0, 0, 1, 1]), 1);
    }
}
