//! [`Runtime::partition`]: from the global mesh (declared by every rank, or
//! by rank 0 alone) to each rank's part of it.

use std::sync::Arc;

use mpi::traits::*;
use rayon::prelude::*;

use super::layout::{self, GlobalMap, GlobalSet};
use super::wait::blocking;
use super::{exchange_lists, Comm, Mpi, PartitionReport, Partitioner, SetReport};
use crate::decl::{LocalPart, Map, Redistribute, Sections, Set, Subset};
use crate::error::{Error, Result};
use crate::runtime::Runtime;

impl Runtime {
    /// The runtime's MPI state: with the `mpi` feature, every runtime's
    /// distribution is `dist::Mpi` (see `distribution::by_default`).
    fn mpi(&self) -> &Mpi {
        let any: &dyn std::any::Any = self.dist.as_ref();
        any.downcast_ref::<Mpi>().expect("with the mpi feature every runtime's distribution is dist::Mpi")
    }

    /// Distributes everything declared so far over the ranks of the
    /// runtime's communicator: `partitioner` assigns the entities of
    /// `primary`, the other sets follow through the maps (an edge goes with
    /// its first cell, a node with the lowest-numbered cell naming it), and
    /// every set, map and dat keeps this rank's part, numbered
    /// `core | owned | exec halo | non-exec halo`. Every rank must have
    /// declared the same global mesh, or rank 0 alone declared it and the
    /// other ranks made the same declarations with empty sets, maps and
    /// dats (rank 0 then sends it to them). No loop may have run yet.
    ///
    /// ```no_run
    /// # let universe = parloop::mpi::initialize()?;
    /// let rt = parloop::Runtime::with_communicator(parloop::Backend::Seq, &universe.world())?;
    /// let cells = rt.set("cells", 4)?;
    /// let edges = rt.set("edges", 3)?;
    /// let pecell = rt.map("pecell", &edges, &cells, 2, vec![0, 1, 1, 2, 2, 3])?;
    /// let report = rt.partition(&cells, &pecell, parloop::mpi::Partitioner::Metis)?;
    /// println!("{report}");
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn partition(&self, primary: &Set, through: &Map, partitioner: Partitioner) -> Result<PartitionReport> {
        let mpi = self.mpi();
        let comm = mpi.comm.clone().ok_or_else(|| Error::Distributed {
            rank: 0,
            reason: "partition needs a communicator: create the runtime under MPI (parloop::mpi::initialize)".into(),
        })?;
        // Every check this rank makes alone is agreed before the ranks
        // communicate: a rank returning its error alone left the others
        // waiting in the next collective for ever.
        let checked = (|| {
            // Recorded loops run first (they were recorded over the sets
            // as declared): the check below then refuses them as it
            // refuses loops run eagerly.
            self.flush()?;
            if mpi.loops.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                return Err(comm.error("partition must come before the first loop"));
            }
            if let Some(maps) = self.matrices.live_pattern() {
                return Err(comm.error(format!(
                    "partition must come before sparsities (one of maps {maps} exists): it renumbers the maps \
                     they are built from; build them after"
                )));
            }
            declared_mesh(mpi, primary, through, &|reason| comm.error(reason))
        })();
        let Declared { sets, maps, dats, mut gmaps, primary: p, through: t } = agreed(&comm, checked)?;
        let index = |s: &Set| sets.iter().position(|x| x == s);
        // Every rank must declare the same sets, maps and dats.
        let mut shapes: Vec<u64> = vec![sets.len() as u64, maps.len() as u64, dats.len() as u64];
        shapes.extend(gmaps.iter().flat_map(|m| [m.from as u64, m.to as u64, m.arity as u64]));
        shapes.extend(dats.iter().map(|d| index(d.set()).map_or(u64::MAX, |s| s as u64)));
        // The partitioner's kind too: the steps below differ by kind.
        shapes.push(match partitioner {
            Partitioner::Metis => 0,
            Partitioner::Block => 1,
            Partitioner::Geometric(_) => 2,
            Partitioner::External(_) => 3,
        });
        if !comm.agree(crate::device::fnv1a(&[bytemuck::cast_slice(&shapes)])) {
            // Which: the counts and the partitioner are one vector per rank
            // whatever each declared (an error path: one more collective).
            let counts = [shapes[0], shapes[1], shapes[2], shapes[shapes.len() - 1]];
            let mut all = vec![0u64; 4 * comm.size()];
            comm.all_gather(&counts[..], &mut all[..]);
            let kinds = ["Metis", "Block", "Geometric", "External"];
            let per_rank: Vec<String> = all
                .chunks(4)
                .enumerate()
                .map(|(r, c)| {
                    let kind = kinds.get(c[3] as usize).unwrap_or(&"?");
                    format!("rank {r}: {} sets, {} maps, {} dats, {kind}", c[0], c[1], c[2])
                })
                .collect();
            let detail = if all.chunks(4).all(|c| c == &all[..4]) {
                "the same numbers of sets, maps and dats and the same partitioner, but a map's sets or arity, or a \
                 dat's set, differ (declared in another order?)"
                    .to_string()
            } else {
                per_rank.join("; ")
            };
            return Err(comm.error(format!(
                "the ranks declared different sets, maps or dats (number, order or shape), or pass different \
                 partitioners: {detail}"
            )));
        }
        // Either every rank declared the whole mesh, or rank 0 alone did and
        // the others declared the same sets, maps and dats empty.
        let empty_here = u8::from(sets.iter().all(|s| s.total() == 0));
        let mut empty = vec![0u8; comm.size()];
        comm.all_gather(&empty_here, &mut empty[..]);
        let root_only = comm.size() > 1 && empty[0] == 0 && empty[1..].iter().all(|&e| e == 1);
        let mut sizes: Vec<u64> = sets.iter().map(|s| s.total() as u64).collect();
        if root_only {
            broadcast_mesh(&comm, &mut sizes, &mut gmaps, &dats);
        } else {
            // The dats' values too: each rank keeps its own values of the
            // entities it gets, so values that differed made a mix.
            let dat_hashes: Vec<u64> = dats.iter().map(|d| d.values_hash()).collect();
            let mut parts: Vec<&[u8]> = vec![bytemuck::cast_slice(&sizes), bytemuck::cast_slice(&dat_hashes)];
            parts.extend(gmaps.iter().map(|m| -> &[u8] { bytemuck::cast_slice(&m.values) }));
            if !comm.agree(crate::device::fnv1a(&parts)) {
                let differs = first_difference(&comm, &sets, &maps, &sizes, &gmaps, &dats, &dat_hashes);
                return Err(comm.error(format!(
                    "the ranks declared different meshes ({differs}); declare the same mesh on every rank, or on \
                     rank 0 alone with empty sets elsewhere"
                )));
            }
        }
        let gsets: Vec<GlobalSet> = sizes.iter().map(|&n| GlobalSet { size: n as usize }).collect();
        let ranks = comm.size();
        let (xadj, adjncy) = layout::adjacency(p, &gsets, &gmaps[t]);
        let external = matches!(partitioner, Partitioner::External(_));
        let owners = if comm.rank() == 0 || (!root_only && external) {
            primary_owners(partitioner, &gsets, &gmaps, &sets, p, (&xadj, &adjncy), ranks, &|r| comm.error(r))
        } else {
            // Rank 0's owners are broadcast next.
            Ok(vec![0; gsets[p].size])
        };
        // Rank 0's failure (METIS, bad coordinates, bad owners) or any
        // rank's with external owners: on every rank.
        let mut primary_owners = agreed(&comm, owners)?;
        if external && !root_only && !comm.agree(crate::device::fnv1a(&[bytemuck::cast_slice(&primary_owners)])) {
            return Err(comm.error(
                "Partitioner::External: the ranks pass different owners; pass the same owners on every rank \
                 (or declare the mesh on rank 0 alone, whose owners are used)",
            ));
        }
        comm.broadcast_from_first(&mut primary_owners[..]);
        let edge_cut = layout::edge_cut(&xadj, &adjncy, &primary_owners);
        let mut owners = vec![None; gsets.len()];
        owners[p] = Some(primary_owners);
        layout::propagate(&gsets, &gmaps, &mut owners, ranks);
        let owners: Vec<Vec<i32>> = owners.into_iter().map(|o| o.expect("propagate fills every set")).collect();
        let local = layout::localise(comm.rank(), &gsets, &gmaps, &owners);
        let mut holds = Ok(());
        for (m, (g, values)) in maps.iter().zip(gmaps.iter().zip(&local.maps)) {
            if !values.is_empty() && local.sets[g.to].global.is_empty() {
                holds = Err(comm.error(format!(
                    "map `{}`: this rank holds entities of `{}` but none of `{}`",
                    m.name(),
                    m.from().name(),
                    m.to().name()
                )));
                break;
            }
        }
        agreed(&comm, holds)?;
        // Dats first: they are renumbered from the global numbering.
        for d in &dats {
            if let Some(s) = index(d.set()) {
                d.keep(&local.sets[s].global);
            }
        }
        let mut halos = crate::sync::lock(&mpi.halos);
        for ((s, ls), gs) in sets.iter().zip(&local.sets).zip(&gsets) {
            halos.insert(s.id(), Arc::new(exchange_lists(&comm, &ls.imports, &ls.global)?));
            let part = LocalPart {
                sections: ls.sections,
                global: ls.global.clone(),
                global_size: gs.size,
                comm: comm.clone(),
                index_numbers: std::sync::OnceLock::new(),
            };
            let _ = s.0.local.set(Arc::new(part));
        }
        for (m, values) in maps.iter().zip(local.maps) {
            m.localise(values);
        }
        drop(halos);
        localise_subsets(mpi, &comm, root_only)?;
        self.clear_plans();
        // The report: every rank's sections of every set.
        let mine: Vec<u64> = local
            .sets
            .iter()
            .flat_map(|l| [l.sections.core, l.sections.owned, l.sections.exec, l.sections.non_exec])
            .map(|v| v as u64)
            .collect();
        let mut all = vec![0u64; mine.len() * ranks];
        comm.all_gather(&mine[..], &mut all[..]);
        let sections: Vec<Vec<Sections>> = all
            .chunks_exact(mine.len().max(1))
            .map(|rank| {
                rank.chunks_exact(4)
                    .map(|v| Sections {
                        core: v[0] as usize,
                        owned: v[1] as usize,
                        exec: v[2] as usize,
                        non_exec: v[3] as usize,
                    })
                    .collect()
            })
            .collect();
        Ok(report(&sets, &sections, ranks, edge_cut))
    }

    /// The partition [`Runtime::partition`] would make over `parts` ranks,
    /// computed here for every part and distributing nothing: for sizing a
    /// run (the halos of 64 ranks, on one machine). Needs no communicator.
    /// [`Partitioner::External`] owners may name parts `0..parts`.
    ///
    /// ```no_run
    /// let rt = parloop::Runtime::with_backend(parloop::Backend::Seq)?;
    /// let cells = rt.set("cells", 4)?;
    /// let edges = rt.set("edges", 3)?;
    /// let pecell = rt.map("pecell", &edges, &cells, 2, vec![0, 1, 1, 2, 2, 3])?;
    /// let report = rt.partition_preview(&cells, &pecell, parloop::mpi::Partitioner::Metis, 2)?;
    /// assert_eq!(report.sets[0].sections.len(), 2);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn partition_preview(
        &self,
        primary: &Set,
        through: &Map,
        partitioner: Partitioner,
        parts: usize,
    ) -> Result<PartitionReport> {
        let fail = |reason: String| Error::Distributed { rank: self.rank(), reason };
        if parts == 0 {
            return Err(fail("partition preview over 0 parts".into()));
        }
        let Declared { sets, gmaps, primary: p, through: t, .. } = declared_mesh(self.mpi(), primary, through, &fail)?;
        let gsets: Vec<GlobalSet> = sets.iter().map(|s| GlobalSet { size: s.total() }).collect();
        let (xadj, adjncy) = layout::adjacency(p, &gsets, &gmaps[t]);
        let primary_owners = primary_owners(partitioner, &gsets, &gmaps, &sets, p, (&xadj, &adjncy), parts, &fail)?;
        let edge_cut = layout::edge_cut(&xadj, &adjncy, &primary_owners);
        let mut owners = vec![None; gsets.len()];
        owners[p] = Some(primary_owners);
        layout::propagate(&gsets, &gmaps, &mut owners, parts);
        let owners: Vec<Vec<i32>> = owners.into_iter().map(|o| o.expect("propagate fills every set")).collect();
        let sections: Vec<Vec<Sections>> = (0..parts)
            .into_par_iter()
            .map(|r| layout::localise(r, &gsets, &gmaps, &owners).sets.iter().map(|l| l.sections).collect())
            .collect();
        Ok(report(&sets, &sections, parts, edge_cut))
    }
}

/// The report from every rank's sections of every set (`sections[rank][set]`).
fn report(sets: &[Set], sections: &[Vec<Sections>], ranks: usize, edge_cut: usize) -> PartitionReport {
    let sets = sets
        .iter()
        .enumerate()
        .map(|(s, set)| SetReport { name: set.name().into(), sections: sections.iter().map(|r| r[s]).collect() })
        .collect();
    PartitionReport { ranks, edge_cut, sets }
}

/// After the ranks' meshes were found to differ: the first set, map or
/// dat that does, as a phrase (`set \`cells\`: rank 0 has 2048
/// entities, rank 1 2049`). Collective (the ranks declared as many of
/// each: checked before).
fn first_difference(
    comm: &Comm,
    sets: &[Set],
    maps: &[Map],
    sizes: &[u64],
    gmaps: &[GlobalMap],
    dats: &[Arc<dyn Redistribute>],
    dat_hashes: &[u64],
) -> String {
    let mut local: Vec<u64> = sizes.to_vec();
    local.extend(gmaps.iter().map(|m| crate::device::fnv1a(&[bytemuck::cast_slice(&m.values)])));
    local.extend_from_slice(dat_hashes);
    let n = local.len();
    let mut all = vec![0u64; n * comm.size()];
    comm.all_gather(&local[..], &mut all[..]);
    let rank_of = |i: usize| (1..comm.size()).find(|&r| all[r * n + i] != all[i]);
    let Some((i, r)) = (0..n).find_map(|i| rank_of(i).map(|r| (i, r))) else {
        return "set sizes, map values or dat values differ".into();
    };
    if i < sets.len() {
        let counts: Vec<String> = (0..comm.size()).map(|q| format!("rank {q} {}", all[q * n + i])).collect();
        format!("set `{}` has {} entities", sets[i].name(), counts.join(", "))
    } else if i < sets.len() + gmaps.len() {
        format!("map `{}`: rank {r}'s values differ from rank 0's", maps[i - sets.len()].name())
    } else {
        format!("dat `{}`: rank {r}'s values differ from rank 0's", dats[i - sets.len() - gmaps.len()].name())
    }
}

/// What this runtime declared, as global sets and maps.
struct Declared {
    sets: Vec<Set>,
    maps: Vec<Map>,
    dats: Vec<Arc<dyn Redistribute>>,
    /// The maps in indices of `sets`.
    gmaps: Vec<GlobalMap>,
    /// Index of the primary set.
    primary: usize,
    /// Index of the map the partitioner follows.
    through: usize,
}

/// Every subset declared before the partition keeps this rank's entities
/// (owned and halo) in its parent's local numbering, and its iteration set
/// is distributed like the parent. With `root_only`, rank 0's entities
/// are broadcast first (the other ranks declared the subsets empty).
fn localise_subsets(mpi: &Mpi, comm: &Comm, root_only: bool) -> Result<()> {
    let subsets: Vec<Subset> =
        crate::sync::lock(&mpi.declared).subsets.iter().filter_map(|w| w.upgrade()).map(Subset).collect();
    let mut shape: Vec<u64> = vec![subsets.len() as u64];
    if !root_only {
        shape.extend(subsets.iter().map(|s| s.declared().len() as u64));
    }
    if !comm.agree(crate::device::fnv1a(&[bytemuck::cast_slice(&shape)])) {
        return Err(comm.error(
            "the ranks declared different subsets (number or sizes); declare the same subsets on every rank, \
             or on rank 0 alone with empty ones elsewhere",
        ));
    }
    for subset in subsets {
        // Only subsets of the partitioned mesh's sets.
        let Some(parent) = subset.parent().0.local.get() else { continue };
        let mut declared = subset.declared().to_vec();
        if root_only {
            let mut len = declared.len() as u64;
            let c = comm.lock();
            let root = c.process_at_rank(0);
            blocking(|scope| root.immediate_broadcast_into(scope, &mut len));
            declared.resize(len as usize, 0);
            blocking(|scope| root.immediate_broadcast_into(scope, &mut declared[..]));
        }
        let mut member = vec![false; parent.global_size];
        for (k, &g) in declared.iter().enumerate() {
            match member.get_mut(g as usize) {
                Some(m) => *m = true,
                None => {
                    return Err(comm.error(format!(
                        "subset `{}`: entity {k} is {g}, outside set `{}` ({} entities)",
                        subset.name(),
                        subset.parent().name(),
                        parent.global_size
                    )))
                }
            }
        }
        // Local numbers in increasing order: sorted, as a subset's are.
        let local: Vec<i32> =
            parent.global.iter().enumerate().filter(|&(_, &g)| member[g]).map(|(i, _)| i as i32).collect();
        subset.localise(local, parent);
    }
    Ok(())
}

/// Everything `mpi` recorded as declared, checked: nothing distributed
/// yet, the primary set and the map declared here, the map touching the set.
fn declared_mesh(mpi: &Mpi, primary: &Set, through: &Map, fail: &dyn Fn(String) -> Error) -> Result<Declared> {
    let (sets, maps, dats) = {
        let d = crate::sync::lock(&mpi.declared);
        let sets: Vec<Set> = d.sets.iter().filter_map(|w| w.upgrade()).map(Set).collect();
        let maps: Vec<Map> = d.maps.iter().filter_map(|w| w.upgrade()).map(Map).collect();
        let dats: Vec<_> = d.dats.iter().filter_map(|w| w.upgrade()).collect();
        (sets, maps, dats)
    };
    if let Some(s) = sets.iter().find(|s| s.is_distributed()) {
        return Err(fail(format!("set `{}` is already distributed", s.name())));
    }
    let index = |s: &Set| sets.iter().position(|x| x == s);
    let p = index(primary).ok_or_else(|| fail(format!("set `{}` was not declared by this runtime", primary.name())))?;
    if through.from() != primary && through.to() != primary {
        return Err(fail(format!(
            "map `{}` ({} -> {}) does not touch the primary set `{}`",
            through.name(),
            through.from().name(),
            through.to().name(),
            primary.name()
        )));
    }
    let mut gmaps = Vec::new();
    for m in &maps {
        let (Some(from), Some(to)) = (index(m.from()), index(m.to())) else {
            return Err(fail(format!("map `{}` joins a set this runtime did not declare", m.name())));
        };
        gmaps.push(GlobalMap { from, to, arity: m.arity(), values: m.global_values().to_vec() });
    }
    let t = gmaps
        .iter()
        .zip(&maps)
        .position(|(_, m)| m.id() == through.id())
        .ok_or_else(|| fail(format!("map `{}` was not declared by this runtime", through.name())))?;
    Ok(Declared { sets, maps, dats, gmaps, primary: p, through: t })
}

/// The owner of every entity of the primary set `sets[p]` (`graph`: its
/// adjacency, CSR).
#[allow(clippy::too_many_arguments)]
fn primary_owners(
    partitioner: Partitioner,
    gsets: &[GlobalSet],
    gmaps: &[GlobalMap],
    sets: &[Set],
    p: usize,
    graph: (&[i32], &[i32]),
    ranks: usize,
    fail: &dyn Fn(String) -> Error,
) -> Result<Vec<i32>> {
    let primary = &sets[p];
    let index = |s: &Set| sets.iter().position(|x| x == s);
    Ok(match partitioner {
        Partitioner::External(owners) => {
            if owners.len() != gsets[p].size {
                return Err(fail(format!(
                    "external partition has {} owners for {} entities of `{}`",
                    owners.len(),
                    gsets[p].size,
                    primary.name()
                )));
            }
            if let Some(e) = owners.iter().position(|&o| o < 0 || o as usize >= ranks) {
                return Err(fail(format!(
                    "external partition: entity {e} of `{}` has owner {}, outside 0..{ranks}",
                    primary.name(),
                    owners[e]
                )));
            }
            owners
        }
        Partitioner::Block => layout::block_owners(gsets[p].size, ranks),
        Partitioner::Metis => metis_owners(graph.0, graph.1, ranks).map_err(fail)?,
        Partitioner::Geometric(coords) => {
            let dim = coords.dim();
            let values = coords.values()?;
            let on = coords.set();
            let values = &values;
            let centres = if on == primary {
                values.clone()
            } else if let Some(m) = gmaps.iter().find(|m| m.from == p && index(on) == Some(m.to)) {
                // The centroid of each primary entity's targets.
                let a = m.arity;
                let mv = &m.values;
                (0..gsets[p].size)
                    .flat_map(|e| {
                        (0..dim).map(move |d| {
                            mv[e * a..(e + 1) * a].iter().map(|&v| values[v as usize * dim + d]).sum::<f64>() / a as f64
                        })
                    })
                    .collect()
            } else {
                return Err(fail(format!(
                    "geometric partition: coordinates `{}` live on `{}`, neither the primary set `{}` nor a \
                     set a map from it reaches",
                    coords.name(),
                    on.name(),
                    primary.name()
                )));
            };
            layout::rcb_owners(&centres, dim, ranks)
        }
    })
}

/// Sends rank 0's whole mesh to the other ranks, which declared it empty:
/// set sizes, map values and dat values (each rank then keeps its part).
fn broadcast_mesh(comm: &Comm, sizes: &mut [u64], gmaps: &mut [GlobalMap], dats: &[Arc<dyn Redistribute>]) {
    let c = comm.lock();
    let root = c.process_at_rank(0);
    blocking(|scope| root.immediate_broadcast_into(scope, sizes));
    for m in gmaps.iter_mut() {
        m.values.resize(sizes[m.from] as usize * m.arity, 0);
        blocking(|scope| root.immediate_broadcast_into(scope, &mut m.values[..]));
    }
    for d in dats {
        let sent = if comm.rank() == 0 { d.to_bytes() } else { None };
        // The length, and whether there are values at all (an unwritten
        // temporary has none; a written one on an empty set has zero bytes).
        let mut header = [sent.as_ref().map_or(0, |b| b.len() as u64), u64::from(sent.is_some())];
        blocking(|scope| root.immediate_broadcast_into(scope, &mut header[..]));
        let mut bytes = sent.unwrap_or_default();
        bytes.resize(header[0] as usize, 0);
        blocking(|scope| root.immediate_broadcast_into(scope, &mut bytes[..]));
        if comm.rank() != 0 {
            d.replace((header[1] == 1).then_some(&bytes[..]));
        }
    }
}

/// METIS k-way owners (recursive bisection would do too; k-way is what OP2
/// uses). One part needs no METIS.
fn metis_owners(xadj: &[i32], adjncy: &[i32], parts: usize) -> std::result::Result<Vec<i32>, String> {
    let n = xadj.len() - 1;
    if parts == 1 || n == 0 {
        return Ok(vec![0; n]);
    }
    if parts > n {
        // METIS rejects more parts than vertices: one entity per rank, the
        // rest empty (a correct, if wasteful, run).
        return Ok((0..n as i32).collect());
    }
    let mut part = vec![0 as metis::Idx; n];
    let graph = metis::Graph::new(1, parts as metis::Idx, xadj, adjncy)
        .map_err(|e| format!("METIS rejected the graph: {e}"))?;
    graph.part_kway(&mut part).map_err(|e| format!("METIS failed: {e}"))?;
    Ok(part)
}

/// `local` (this rank's outcome of a step of the partition) where every
/// rank succeeded; else an error on every rank: this rank's own, or one
/// saying another rank failed. Collective.
fn agreed<T>(comm: &Comm, local: Result<T>) -> Result<T> {
    if comm.all_ok(local.is_ok()) {
        local
    } else {
        Err(comm.failed_elsewhere(local, "partition"))
    }
}
