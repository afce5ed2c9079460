//! Property tests of the planner on random maps: every invariant of
//! `Plan::check` holds for random arities, sizes, sections and target
//! distributions (uniform, clustered, repeated).

use parloop_planner::{bandwidth, build_plan, rcm_order, Columns, IndirectArg, PlanError, PlanRequest};
use proptest::prelude::*;

/// A random map: `size` elements, `arity` columns into `to_size` targets.
/// `cluster` > 0 draws targets near `e * to_size / size` (mesh-like), else
/// uniformly; `repeat` makes some elements hit the same target twice.
fn random_map(size: usize, arity: usize, to_size: usize, cluster: usize, repeat: bool, seed: u64) -> Vec<i32> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut map = Vec::with_capacity(size * arity);
    for e in 0..size {
        let centre = e * to_size / size.max(1);
        for c in 0..arity {
            let t = if repeat && c > 0 && next() % 4 == 0 {
                map[e * arity] as usize
            } else if cluster > 0 {
                let d = (next() as usize) % (2 * cluster + 1);
                (centre + d).saturating_sub(cluster).min(to_size - 1)
            } else {
                (next() as usize) % to_size
            };
            map.push(t as i32);
        }
    }
    map
}

#[derive(Debug, Clone)]
struct Case {
    sections: Vec<usize>,
    arity: usize,
    to_size: usize,
    cluster: usize,
    repeat: bool,
    seed: u64,
    part_size: Option<usize>,
    budget: usize,
    second_map_arity: usize,
}

fn case() -> impl Strategy<Value = Case> {
    let size = prop_oneof![Just(0usize), Just(1usize), 2usize..200, 200usize..5000, Just(100_000usize)];
    (
        size,
        1usize..=4,
        1usize..3000,
        prop_oneof![Just(0usize), 1usize..20],
        any::<bool>(),
        any::<u64>(),
        prop_oneof![Just(None), (1usize..300).prop_map(Some)],
        prop_oneof![Just(48 * 1024usize), 256usize..4096],
        1usize..=4,
        0usize..3,
    )
        .prop_map(|(size, arity, to_size, cluster, repeat, seed, part_size, budget, second, nsec)| {
            let sections = match nsec {
                0 => vec![size],
                1 => vec![size / 2, size - size / 2],
                _ => vec![size / 3, size / 3, size - 2 * (size / 3)],
            };
            Case { sections, arity, to_size, cluster, repeat, seed, part_size, budget, second_map_arity: second }
        })
}

fn check_case(c: &Case, staging: bool) -> Result<(), TestCaseError> {
    let size: usize = c.sections.iter().sum();
    let m1 = random_map(size, c.arity, c.to_size, c.cluster, c.repeat, c.seed);
    let to2 = c.to_size / 2 + 1;
    let m2 = random_map(size, c.second_map_arity, to2, 0, c.repeat, c.seed.wrapping_mul(31));
    // res INC through every column of m1; q READ through column 0 of m1;
    // w RW through the last column of m2; y READ through every column of m2.
    let args = [
        IndirectArg {
            map: &m1,
            arity: c.arity,
            to_size: c.to_size,
            columns: Columns::All,
            map_id: 1,
            dat_id: 10,
            bytes_per_entity: 32,
            conflicts: true,
        },
        IndirectArg {
            map: &m1,
            arity: c.arity,
            to_size: c.to_size,
            columns: Columns::One(0),
            map_id: 1,
            dat_id: 11,
            bytes_per_entity: 32,
            conflicts: false,
        },
        IndirectArg {
            map: &m2,
            arity: c.second_map_arity,
            to_size: to2,
            columns: Columns::One(c.second_map_arity - 1),
            map_id: 2,
            dat_id: 12,
            bytes_per_entity: 8,
            conflicts: true,
        },
        IndirectArg {
            map: &m2,
            arity: c.second_map_arity,
            to_size: to2,
            columns: Columns::All,
            map_id: 2,
            dat_id: 13,
            bytes_per_entity: 16,
            conflicts: false,
        },
    ];
    let request = PlanRequest {
        sections: &c.sections,
        args: &args,
        shared_memory_bytes: c.budget,
        part_size: c.part_size,
        staging,
        // The host's plans (no staging) skip thread colours, as the runtime's do.
        thread_colours: staging,
    };
    match build_plan(&request) {
        Ok(plan) => {
            prop_assert_eq!(plan.len(), size);
            if let Err(e) = plan.check(&request) {
                return Err(TestCaseError::fail(e));
            }
        }
        // Legitimate only when one element alone is over the budget.
        Err(PlanError::ElementTooLarge { bytes, budget, .. }) => prop_assert!(bytes > budget),
        Err(e) => return Err(TestCaseError::fail(e.to_string())),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn staged_plans_satisfy_every_invariant(c in case()) {
        check_case(&c, true)?;
    }

    #[test]
    fn colour_only_plans_satisfy_every_invariant(c in case()) {
        check_case(&c, false)?;
    }
}

#[test]
fn a_block_staging_more_than_65535_entities_per_pair_is_split() {
    // 40000 elements, arity 4, every target distinct: 160000 targets per block of 40000.
    let size = 40_000;
    let map: Vec<i32> = (0..size as i32 * 4).collect();
    let args = [IndirectArg {
        map: &map,
        arity: 4,
        to_size: size * 4,
        columns: Columns::All,
        map_id: 1,
        dat_id: 1,
        bytes_per_entity: 1,
        conflicts: true,
    }];
    let request = PlanRequest {
        sections: &[size],
        args: &args,
        shared_memory_bytes: usize::MAX,
        part_size: Some(size),
        staging: true,
        thread_colours: true,
    };
    let plan = build_plan(&request).unwrap();
    plan.check(&request).unwrap();
    assert!(plan.blocks.len() >= 3, "{} blocks", plan.blocks.len());
    assert!(plan.stages[0].l2g_offsets.windows(2).all(|w| w[1] - w[0] <= 65535));
}

#[test]
fn a_block_over_the_shared_memory_budget_is_split_and_an_oversized_element_is_an_error() {
    let map: Vec<i32> = (0..64).collect();
    let args = [IndirectArg {
        map: &map,
        arity: 1,
        to_size: 64,
        columns: Columns::All,
        map_id: 1,
        dat_id: 1,
        bytes_per_entity: 100,
        conflicts: false,
    }];
    let request = PlanRequest {
        sections: &[64],
        args: &args,
        shared_memory_bytes: 1000,
        part_size: Some(64),
        staging: true,
        thread_colours: true,
    };
    let plan = build_plan(&request).unwrap();
    plan.check(&request).unwrap();
    assert!(plan.blocks.iter().all(|b| b.staged_bytes <= 1000 && b.len <= 10));
    let tiny = PlanRequest { shared_memory_bytes: 99, ..request };
    assert_eq!(build_plan(&tiny).unwrap_err(), PlanError::ElementTooLarge { element: 0, bytes: 100, budget: 99 });
}

#[test]
fn more_than_32_conflicting_threads_take_several_passes() {
    // 100 edges all incrementing node 0: every thread needs its own colour.
    let map = vec![0i32; 100];
    let args = [IndirectArg {
        map: &map,
        arity: 1,
        to_size: 1,
        columns: Columns::All,
        map_id: 1,
        dat_id: 1,
        bytes_per_entity: 8,
        conflicts: true,
    }];
    let request = PlanRequest {
        sections: &[100],
        args: &args,
        shared_memory_bytes: 1 << 16,
        part_size: Some(100),
        staging: true,
        thread_colours: true,
    };
    let plan = build_plan(&request).unwrap();
    plan.check(&request).unwrap();
    assert_eq!(plan.blocks[0].thread_colours, 100);
    let mut colours = plan.thread_colour.clone();
    colours.sort_unstable();
    assert_eq!(colours, (0..100).collect::<Vec<u32>>());
}

#[test]
fn non_core_blocks_never_reuse_core_colours() {
    // Disjoint targets: without the rule, every block could take colour 0.
    let map: Vec<i32> = (0..1000).collect();
    let args = [IndirectArg {
        map: &map,
        arity: 1,
        to_size: 1000,
        columns: Columns::All,
        map_id: 1,
        dat_id: 1,
        bytes_per_entity: 8,
        conflicts: true,
    }];
    let request = PlanRequest {
        sections: &[600, 300, 100],
        args: &args,
        shared_memory_bytes: 1 << 16,
        part_size: Some(128),
        staging: false,
        thread_colours: false,
    };
    let plan = build_plan(&request).unwrap();
    plan.check(&request).unwrap();
    assert_eq!(plan.core_colours, 1);
    assert_eq!(plan.colours, 2);
    assert!(plan.blocks.iter().filter(|b| b.section > 0).all(|b| b.colour == 1));
}

#[test]
fn invalid_requests_are_errors() {
    let map = vec![0, 5];
    let args = [IndirectArg {
        map: &map,
        arity: 1,
        to_size: 5,
        columns: Columns::All,
        map_id: 1,
        dat_id: 1,
        bytes_per_entity: 8,
        conflicts: true,
    }];
    let request = PlanRequest {
        sections: &[2],
        args: &args,
        shared_memory_bytes: 1 << 16,
        part_size: None,
        staging: true,
        thread_colours: true,
    };
    assert_eq!(build_plan(&request).unwrap_err(), PlanError::MapValue { arg: 0, element: 1, value: 5, to_size: 5 });
    let short = PlanRequest { sections: &[3], ..request };
    assert!(matches!(build_plan(&short).unwrap_err(), PlanError::MapLength { .. }));
    // Sizes past usize: errors, not overflow panics or aborts.
    let wraps = PlanRequest { sections: &[usize::MAX, 1], ..request };
    assert!(matches!(build_plan(&wraps).unwrap_err(), PlanError::TooLarge { what: "iteration set", .. }));
    let wide = [IndirectArg { arity: 4, ..args[0] }];
    let huge = PlanRequest { sections: &[usize::MAX / 2], args: &wide, ..request };
    assert!(matches!(build_plan(&huge).unwrap_err(), PlanError::TooLarge { what: "map", .. }));
    for sections in [&[usize::MAX / 2][..], &[usize::MAX], &[usize::MAX - 1, 1]] {
        let no_args = PlanRequest { sections, args: &[], part_size: Some(1), ..request };
        assert!(
            matches!(build_plan(&no_args).unwrap_err(), PlanError::TooLarge { what: "blocks", .. }),
            "{sections:?}"
        );
    }
}

/// Cells of an `n x n` structured grid with their 4 nodes, in shuffled order.
fn shuffled_grid(n: usize, seed: u64) -> Vec<i32> {
    let mut cells: Vec<usize> = (0..n * n).collect();
    let mut state = seed | 1;
    for i in (1..cells.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        cells.swap(i, state as usize % (i + 1));
    }
    let nodes = |i: usize, j: usize| (i + j * (n + 1)) as i32;
    cells
        .iter()
        .flat_map(|&c| {
            let (i, j) = (c % n, c / n);
            [nodes(i, j), nodes(i + 1, j), nodes(i + 1, j + 1), nodes(i, j + 1)]
        })
        .collect()
}

#[test]
fn rcm_is_a_permutation_and_shrinks_the_bandwidth_of_a_shuffled_grid() {
    let n = 60;
    let map = shuffled_grid(n, 7);
    let identity: Vec<u32> = (0..(n * n) as u32).collect();
    let before = bandwidth(&identity, 4, &map, (n + 1) * (n + 1));
    let order = rcm_order(n * n, 4, &map, (n + 1) * (n + 1));
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, identity, "not a permutation");
    let after = bandwidth(&order, 4, &map, (n + 1) * (n + 1));
    assert!(before > 1000, "shuffle too weak: {before}");
    assert!(after <= 3 * n, "bandwidth {after} after RCM (was {before})");
}

#[test]
fn rcm_handles_disconnected_and_empty_sets() {
    assert!(rcm_order(0, 2, &[], 0).is_empty());
    // Two separate 1-D meshes.
    let map = [0, 1, 1, 2, 10, 11, 11, 12];
    let mut order = rcm_order(4, 2, &map, 13);
    order.sort_unstable();
    assert_eq!(order, vec![0, 1, 2, 3]);
}

#[test]
fn parallel_staging_falls_back_to_splitting_when_a_later_block_overflows() {
    // The first half of the elements all stage entity 0; the second half
    // stage distinct entities, so its blocks exceed the budget and split.
    let size = 200_000;
    let map: Vec<i32> = (0..size as i32).map(|e| if e < size as i32 / 2 { 0 } else { e }).collect();
    let args = [IndirectArg {
        map: &map,
        arity: 1,
        to_size: size,
        columns: Columns::All,
        map_id: 1,
        dat_id: 1,
        bytes_per_entity: 8,
        conflicts: true,
    }];
    let request = PlanRequest {
        sections: &[size],
        args: &args,
        shared_memory_bytes: 4000,
        part_size: Some(1000),
        staging: true,
        thread_colours: true,
    };
    let plan = build_plan(&request).unwrap();
    plan.check(&request).unwrap();
    assert!(plan.blocks.iter().any(|b| b.len < 1000), "the second half must have been split");
    assert!(plan.blocks.iter().all(|b| b.staged_bytes <= 4000));
}

#[test]
fn large_staged_plans_satisfy_every_invariant() {
    // Big enough for the parallel staging path.
    let c = Case {
        sections: vec![150_000, 30_000, 20_000],
        arity: 2,
        to_size: 120_000,
        cluster: 30,
        repeat: true,
        seed: 11,
        part_size: None,
        budget: 48 * 1024,
        second_map_arity: 3,
    };
    check_case(&c, true).unwrap();
}

/// Times a host plan (block colours only) and the byte count of the P1
/// Laplacian's loop on the Kuhn unit cube: `PARLOOP_CUBE=125 cargo test
/// --release -p parloop-planner --test plan_properties host_plan_timing --
/// --ignored --nocapture`. Prints times; asserts only that the plan is valid.
#[test]
#[ignore]
fn host_plan_timing() {
    let n: usize = std::env::var("PARLOOP_CUBE").ok().and_then(|v| v.parse().ok()).unwrap_or(40);
    let v = |i: usize, j: usize, k: usize| ((k * (n + 1) + j) * (n + 1) + i) as i32;
    let perms = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
    let mut tets = Vec::with_capacity(24 * n * n * n);
    for k in 0..n {
        for j in 0..n {
            for i in 0..n {
                for p in perms {
                    let mut c = [i, j, k];
                    tets.push(v(c[0], c[1], c[2]));
                    for axis in p {
                        c[axis] += 1;
                        tets.push(v(c[0], c[1], c[2]));
                    }
                }
            }
        }
    }
    let (cells, nodes) = (6 * n * n * n, (n + 1).pow(3));
    let arg = |dat_id, conflicts| IndirectArg {
        map: &tets,
        arity: 4,
        to_size: nodes,
        columns: Columns::All,
        map_id: 1,
        dat_id,
        bytes_per_entity: 8,
        conflicts,
    };
    let args = [arg(1, false), arg(2, true)];
    let sections = [cells];
    for thread_colours in [false, true] {
        let request = PlanRequest {
            sections: &sections,
            args: &args,
            shared_memory_bytes: 48 * 1024,
            part_size: Some(2048),
            staging: false,
            thread_colours,
        };
        let t = std::time::Instant::now();
        let plan = build_plan(&request).unwrap();
        let took = t.elapsed().as_secs_f64();
        println!(
            "n = {n}: {cells} cells, {} blocks, {} colours, thread colours {thread_colours}: {took:.3} s",
            plan.blocks.len(),
            plan.colours
        );
        if n <= 40 {
            plan.check(&request).unwrap();
        }
    }
    let bytes: Vec<parloop_planner::ByteArg> = args
        .iter()
        .map(|a| parloop_planner::ByteArg {
            dat_id: a.dat_id,
            kind: parloop_planner::ByteArgKind::Indirect {
                map: a.map,
                arity: 4,
                to_size: nodes,
                columns: Columns::All,
                map_id: 1,
            },
            bytes_per_entity: 8,
            reads: true,
            writes: a.conflicts,
        })
        .collect();
    let t = std::time::Instant::now();
    let b = parloop_planner::min_bytes(cells, &bytes);
    println!("min_bytes {b}: {:.3} s", t.elapsed().as_secs_f64());
}
