//! Checks of a loop's arguments against its kernel and iteration set,
//! before anything runs (so a bad call never touches data).

use crate::arg::{Arg, ArgKind};
use crate::decl::Set;
use crate::error::{ArgProblem, Error, Result};
use crate::kernel::Kernel;
use crate::matrix::assembly::MatScatter;
use crate::types::Access;

/// Bytes a kernel's parameters may hold per element. The host adapters
/// keep [`BATCH`](crate::bind::BATCH) private copies of every parameter
/// on the stack (and the lane-wise twins eight lanes of each), so this
/// bounds their frame at 1 MiB, inside the 2 MiB stack of any thread a
/// loop may run on (rayon's workers, a spawned thread). 32 KiB is a
/// 64 x 64 element matrix of f64.
pub(crate) const PARAM_BYTES_LIMIT: usize = 32 * 1024;

/// Validates `args` for a loop of `kernel` over `set`.
/// The problem when `found` is not the set `wanted`: `problem`, unless
/// both carry one name (so `found` is another runtime's: names are unique
/// within one), where a message naming them would read "lives on `s`" for
/// a loop over `s`.
fn set_mismatch(found: &Set, wanted: &Set, what: &str, problem: ArgProblem) -> ArgProblem {
    if found.name() == wanted.name() {
        ArgProblem::SameNameOtherSet { what: what.into(), set: found.name().into() }
    } else {
        problem
    }
}

pub(crate) fn validate(kernel: &Kernel, set: &Set, args: &[Arg]) -> Result<()> {
    let params = kernel.params();
    if params.len() != args.len() {
        return Err(Error::ArgumentCount { kernel: kernel.name().into(), expected: params.len(), got: args.len() });
    }
    let bytes: usize = params.iter().map(|p| p.len() * p.elem.size()).sum();
    if bytes > PARAM_BYTES_LIMIT {
        return Err(Error::KernelTooLarge { kernel: kernel.name().into(), bytes, limit: PARAM_BYTES_LIMIT });
    }
    let fail = |i: usize, problem: ArgProblem| Error::Argument {
        kernel: kernel.name().into(),
        set: set.name().into(),
        arg: i,
        dat: args[i].data_name().into(),
        problem: Box::new(problem),
    };
    for (i, (arg, param)) in args.iter().zip(params).enumerate() {
        let elem = arg.storage.elem();
        if elem != param.elem {
            return Err(fail(i, ArgProblem::ElementType { expected: param.elem.name(), got: elem.name() }));
        }
        let access = arg.access;
        if matches!(access, Access::Min | Access::Max) && !arg.is_global() {
            return Err(fail(i, ArgProblem::ReductionOnDat { access: access.name() }));
        }
        if matches!(access, Access::Write | Access::ReadWrite) && arg.is_global() {
            return Err(fail(i, ArgProblem::WriteToGlobal { access: access.name() }));
        }
        if param.mutable != access.writes() {
            return Err(fail(i, ArgProblem::Mutability { access: access.name(), param_mutable: param.mutable }));
        }
        if access == Access::Inc && !param.increment_only {
            let name = if param.name.is_empty() { format!("{i}") } else { param.name.to_string() };
            let global = arg.is_global();
            // What the body computes where it is a running minimum or
            // maximum and not both (`min_only` and `max_only` are both
            // true where the body does neither).
            let reduction = match (param.min_only, param.max_only) {
                (true, false) => Some(Access::Min.name()),
                (false, true) => Some(Access::Max.name()),
                _ => None,
            };
            return Err(fail(
                i,
                ArgProblem::IncNotIncrementOnly { param: name, what: param.increment_use, global, reduction },
            ));
        }
        if (access == Access::Min && !param.min_only) || (access == Access::Max && !param.max_only) {
            let name = if param.name.is_empty() { format!("{i}") } else { param.name.to_string() };
            return Err(fail(i, ArgProblem::ReductionNotOnly { param: name, access: access.name() }));
        }
        match &arg.kind {
            ArgKind::Mat(m) => {
                if !matches!(access, Access::Inc | Access::Write) {
                    return Err(fail(i, ArgProblem::MatAccess { access: access.name() }));
                }
                let (row_map, col_map) = &m.pair;
                if !m.sparsity().has_pair(row_map, col_map) {
                    return Err(fail(
                        i,
                        ArgProblem::MatPair {
                            row_map: row_map.name().into(),
                            col_map: col_map.name().into(),
                            sparsity: m.sparsity_name.to_string(),
                            pairs: m.sparsity().pair_names(),
                        },
                    ));
                }
                if param.rows != m.rows || param.cols != m.cols {
                    return Err(fail(
                        i,
                        ArgProblem::Dim {
                            expected: param.describe(),
                            got: format!(
                                "an element matrix of {} rows (arity {} of `{}` x row dim {}) of {} columns (arity {} of `{}` x column dim {})",
                                m.rows,
                                row_map.arity(),
                                row_map.name(),
                                m.pattern.row_dim,
                                m.cols,
                                col_map.arity(),
                                col_map.name(),
                                m.pattern.col_dim
                            ),
                        },
                    ));
                }
            }
            ArgKind::Vector { map } => {
                if param.rows != map.arity() || param.cols != arg.dim {
                    return Err(fail(
                        i,
                        ArgProblem::Dim {
                            expected: param.describe(),
                            // With the parameter it needs: OP2's `OP_ALL`
                            // of a dim-1 dat is written `&[f64; 2]`, and the
                            // shapes alone left the fix to guess.
                            got: format!(
                                "{} rows (arity of `{}`) of dim {}: a vector argument's parameter is `&{}[[{}; {}]; {}]`",
                                map.arity(),
                                map.name(),
                                arg.dim,
                                if param.mutable { "mut " } else { "" },
                                arg.storage.elem().name(),
                                arg.dim,
                                map.arity()
                            ),
                        },
                    ));
                }
            }
            _ => {
                if param.len() != arg.dim {
                    return Err(fail(
                        i,
                        ArgProblem::Dim {
                            expected: format!("{} ({} values)", param.describe(), param.len()),
                            got: format!("dim {}", arg.dim),
                        },
                    ));
                }
            }
        }
        let dat_set = arg.set.as_ref();
        match &arg.kind {
            ArgKind::Direct => {
                let s = dat_set.expect("dats have sets");
                if s != set {
                    return Err(fail(
                        i,
                        set_mismatch(s, set, "the dat", ArgProblem::DirectSet { dat_set: s.name().into() }),
                    ));
                }
            }
            ArgKind::Indirect { map, .. } | ArgKind::Vector { map } => {
                if map.from() != set {
                    let problem = ArgProblem::MapFrom { map: map.name().into(), from: map.from().name().into() };
                    return Err(fail(
                        i,
                        set_mismatch(map.from(), set, &format!("map `{}`'s source", map.name()), problem),
                    ));
                }
                let s = dat_set.expect("dats have sets");
                if map.to() != s {
                    let problem = ArgProblem::MapTo {
                        map: map.name().into(),
                        to: map.to().name().into(),
                        dat_set: s.name().into(),
                    };
                    return Err(fail(i, set_mismatch(s, map.to(), "the dat", problem)));
                }
                if let ArgKind::Indirect { column, .. } = &arg.kind {
                    if *column >= map.arity() {
                        return Err(fail(
                            i,
                            ArgProblem::Column { map: map.name().into(), column: *column, arity: map.arity() },
                        ));
                    }
                }
            }
            ArgKind::Mat(m) => {
                for map in [&m.pair.0, &m.pair.1] {
                    if map.from() != set {
                        let problem = ArgProblem::MapFrom { map: map.name().into(), from: map.from().name().into() };
                        let what = format!("map `{}`'s source", map.name());
                        return Err(fail(i, set_mismatch(map.from(), set, &what, problem)));
                    }
                }
            }
            ArgKind::Global | ArgKind::Index => {}
        }
    }
    check_conflicts(args).map_err(|(i, problem)| fail(i, problem))
}

/// The same dat or global in two arguments, one of them writing, is allowed
/// only when every such argument is indirect with the same access (say, INC
/// through both columns of an edge-to-cell map): the planner colours those.
/// Anything else would race on parallel backends or alias a `&mut`.
fn check_conflicts(args: &[Arg]) -> std::result::Result<(), (usize, ArgProblem)> {
    for (i, a) in args.iter().enumerate() {
        for (j, b) in args.iter().enumerate().take(i) {
            if a.data_id() != b.data_id() || (!a.access.writes() && !b.access.writes()) {
                continue;
            }
            let reason = if a.mat().is_some() && b.mat().is_some() && a.access != b.access {
                "WRITE and INC on one matrix in one loop: the result would depend on the order"
            } else if a.mat().is_some() || b.mat().is_some() {
                "a matrix may appear once per loop (assemble several pairs in separate loops)"
            } else if a.is_global() {
                "a global may appear once when it is reduced"
            } else if a.access != b.access {
                if a.is_indirect() || b.is_indirect() {
                    "different access modes, one writing, one indirect: this races on parallel backends"
                } else {
                    "different access modes on the same entity, one writing: the references would alias"
                }
            } else if !a.is_indirect() || !b.is_indirect() {
                "a direct write and another access of the same dat would alias"
            } else {
                continue;
            };
            let what = if a.mat().is_some() {
                "matrix"
            } else if a.is_global() {
                "global"
            } else {
                "dat"
            };
            return Err((i, ArgProblem::Conflict { what, other: j, reason }));
        }
    }
    Ok(())
}

/// Rejects a matrix WRITE that reaches one entry (block) twice among the
/// first `executed` elements: elements sharing a row and a column entity
/// (P1 elements sharing a vertex, say), or one element whose maps repeat
/// them. Host threads scatter colour by colour and devices per entry, so
/// which value stayed differed between backends.
pub(crate) fn check_mat_write_race(
    kernel: &Kernel,
    set: &Set,
    i: usize,
    arg: &Arg,
    m: &MatScatter,
    executed: usize,
) -> Result<()> {
    let p = &*m.pattern;
    let (bptr, bcols) = p.block();
    let (ra, ca) = (m.row_map.arity(), m.col_map.arity());
    // The element that first set each block entry, plus one (0: none yet).
    let mut first = first_reach_table(kernel, &format!("matrix `{}`", arg.data_name()), bcols.len())?;
    for element in 0..executed {
        let rrow = &m.row_map.values()[element * ra..(element + 1) * ra];
        let crow = &m.col_map.values()[element * ca..(element + 1) * ca];
        for &r in rrow {
            let r = r as usize;
            if r >= p.row_entities {
                continue; // another rank's row: not stored here
            }
            let row = &bcols[bptr[r]..bptr[r + 1]];
            for &c in crow {
                let Some(k) = crate::matrix::sparsity::find(row, c as u32) else { continue };
                let at = bptr[r] + k;
                if first[at] != 0 {
                    return Err(race(
                        kernel,
                        set,
                        i,
                        arg,
                        ArgProblem::MatWriteRace {
                            maps: (m.row_map.name().into(), m.col_map.name().into()),
                            first: first[at] - 1,
                            second: element,
                            entry: (r, c as usize),
                        },
                    ));
                }
                first[at] = element + 1;
            }
        }
    }
    Ok(())
}

/// Whether `arg` overwrites through a map (an indirect or matrix WRITE or
/// RW): the arguments whose races [`check_write_races`] looks for.
pub(crate) fn overwrites_through_map(arg: &Arg) -> bool {
    arg.map().is_some() && matches!(arg.access, Access::Write | Access::ReadWrite)
}

/// Rejects an indirect WRITE or RW that reaches one entity twice among the
/// first `executed` elements (through all arguments on that dat: they share
/// one access mode, see `check_conflicts`). OP2 leaves this a race; here the
/// outcome would differ between backends, so it is an error. Maps never
/// change, so the runtime checks each loop shape once, when it plans it
/// (under MPI also, agreed between the ranks, at the shape's first
/// submission: `Runtime::agree_write_races`).
pub(crate) fn check_write_races(kernel: &Kernel, set: &Set, args: &[Arg], executed: usize) -> Result<()> {
    for (i, arg) in args.iter().enumerate() {
        let Some(map) = arg.map().filter(|_| overwrites_through_map(arg)) else { continue };
        if let ArgKind::Mat(m) = &arg.kind {
            check_mat_write_race(kernel, set, i, arg, m, executed)?;
            continue;
        }
        if args[..i].iter().any(|b| b.data_id() == arg.data_id()) {
            continue; // checked with the first argument on this dat
        }
        let to_size = map.to().total();
        // The element that first reached each target, plus one (0: none yet).
        let mut first = first_reach_table(kernel, &format!("map `{}`", map.name()), to_size)?;
        let same: Vec<&Arg> = args[i..].iter().filter(|b| b.data_id() == arg.data_id()).collect();
        for element in 0..executed {
            for b in &same {
                let Some(bmap) = b.map() else { continue };
                let brow = &bmap.values()[element * bmap.arity()..(element + 1) * bmap.arity()];
                let columns: &[i32] = match &b.kind {
                    ArgKind::Indirect { column, .. } => std::slice::from_ref(&brow[*column]),
                    _ => brow,
                };
                for &t in columns {
                    let t = t as usize;
                    if first[t] != 0 {
                        return Err(race(
                            kernel,
                            set,
                            i,
                            arg,
                            ArgProblem::WriteRace {
                                map: bmap.name().into(),
                                first: first[t] - 1,
                                second: element,
                                target: t,
                            },
                        ));
                    }
                    first[t] = element + 1;
                }
            }
        }
    }
    Ok(())
}

/// A zeroed table of `len` entries for a write-race check (`what` names the
/// matrix or map it covers), failing as an error rather than an abort when
/// the allocation does.
fn first_reach_table(kernel: &Kernel, what: &str, len: usize) -> Result<Vec<usize>> {
    let mut first: Vec<usize> = Vec::new();
    first.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
        what: format!("loop `{}`: the write-race check of {what}", kernel.name()),
        bytes: len.saturating_mul(std::mem::size_of::<usize>()),
    })?;
    first.resize(len, 0);
    Ok(first)
}

/// The error for a write race found at argument `i` of the loop, in the
/// user's terms: elements, targets and entries by their declared numbers
/// (not a rank's local ones), and a loop over a subset named as one, its
/// elements numbered as entities of the parent set and its maps by the
/// user's names (it runs over an iteration set of its own, with maps
/// composed with the subset: `e2n@wall`).
fn race(kernel: &Kernel, set: &Set, i: usize, arg: &Arg, mut problem: ArgProblem) -> Error {
    let (_, numbered_in) = set.user_element(0);
    let subset = (numbered_in.id() != set.id()).then(|| format!("@{}", set.name()));
    let user_map = |name: &mut String| {
        if let Some(stripped) = subset.as_deref().and_then(|suffix| name.strip_suffix(suffix)) {
            *name = stripped.to_string();
        }
    };
    match &mut problem {
        ArgProblem::WriteRace { map, first, second, target } => {
            user_map(map);
            (*first, *second) = (set.user_element(*first).0, set.user_element(*second).0);
            *target = arg.set.as_ref().map_or(*target, |s| s.declared_entity(*target));
        }
        ArgProblem::MatWriteRace { maps, first, second, entry } => {
            user_map(&mut maps.0);
            user_map(&mut maps.1);
            (*first, *second) = (set.user_element(*first).0, set.user_element(*second).0);
            if let ArgKind::Mat(m) = &arg.kind {
                *entry = (m.row_map.to().declared_entity(entry.0), m.col_map.to().declared_entity(entry.1));
            }
        }
        _ => {}
    }
    let set = match subset {
        Some(_) => format!(
            "{} (a subset of {}, elements numbered as in {})",
            set.name(),
            numbered_in.name(),
            numbered_in.name()
        ),
        None => set.name().into(),
    };
    Error::Argument {
        kernel: kernel.name().into(),
        set,
        arg: i,
        dat: arg.data_name().into(),
        problem: Box::new(problem),
    }
}
