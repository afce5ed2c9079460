//! Shared set-up for parloop's criterion benchmarks.

use parloop_examples::airfoil::grid::Grid;
use parloop_planner::{Columns, IndirectArg};

/// The indirect arguments of airfoil's res_calc over `grid`'s edges: x
/// through both columns of pedge, q and adt through both columns of pecell
/// (READ), res through both columns of pecell (INC).
pub fn res_calc_args(grid: &Grid) -> Vec<IndirectArg<'_>> {
    let (nnode, ncell) = (grid.nnode(), grid.ncell());
    let arg = |map: &'static str, dat: u64, col: usize, bytes: usize, conflicts: bool| {
        let (values, to_size, map_id) = if map == "pedge" { (&grid.edge, nnode, 1) } else { (&grid.ecell, ncell, 2) };
        IndirectArg {
            map: values,
            arity: 2,
            to_size,
            columns: Columns::One(col),
            map_id,
            dat_id: dat,
            bytes_per_entity: bytes,
            conflicts,
        }
    };
    vec![
        arg("pedge", 10, 0, 16, false),
        arg("pedge", 10, 1, 16, false),
        arg("pecell", 11, 0, 32, false),
        arg("pecell", 11, 1, 32, false),
        arg("pecell", 12, 0, 8, false),
        arg("pecell", 12, 1, 8, false),
        arg("pecell", 13, 0, 32, true),
        arg("pecell", 13, 1, 32, true),
    ]
}
