//! Sparse matrices: the sparsity against the pairs the maps produce,
//! assembly against plain triplet accumulation on every host backend,
//! `zero_rows`, Matrix Market round trips, subsets, the element-index
//! argument, and bad input.

use std::collections::{BTreeMap, BTreeSet};

#[path = "support/device.rs"]
mod device;

use parloop::{Access, Arg, ArgProblem, Backend, Error, Runtime};
use proptest::prelude::*;

/// The backends assembly runs on; adding one (emu, cuda, once device
/// assembly exists) is one entry here.
const BACKENDS: &[Backend] = &[Backend::Seq, Backend::Threads];

/// A P1-like element matrix of a triangle-ish element: depends on the
/// element's node values, not symmetric, so that a transposed scatter fails.
#[parloop::kernel]
fn elem3(x: &[[f64; 1]; 3], a: &mut [[f64; 3]; 3]) {
    for i in 0..3 {
        for j in 0..3 {
            a[i][j] += x[i][0] * (x[j][0] + 1.0) + (i as f64) - 0.5 * (j as f64);
        }
    }
}

fn elem3_ref(x: [f64; 3]) -> [[f64; 3]; 3] {
    let mut a = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            a[i][j] += x[i] * (x[j] + 1.0) + (i as f64) - 0.5 * (j as f64);
        }
    }
    a
}

/// The same for tetrahedra-like elements (arity 4: the scatter's own
/// path for scalar P1 tetrahedra).
#[parloop::kernel]
fn elem4(x: &[[f64; 1]; 4], a: &mut [[f64; 4]; 4]) {
    for i in 0..4 {
        for j in 0..4 {
            a[i][j] += x[i][0] * (x[j][0] - 1.0) + (i as f64) - 0.25 * (j as f64);
        }
    }
}

/// A block (dim 2 x 2) element matrix over an edge: 4 x 4.
#[parloop::kernel]
fn elem_block(x: &[[f64; 2]; 2], a: &mut [[f64; 4]; 4]) {
    for i in 0..4 {
        for j in 0..4 {
            a[i][j] += x[i / 2][i % 2] * 2.0 - x[j / 2][j % 2] + (i * 4 + j) as f64;
        }
    }
}

fn elem_block_ref(x: [[f64; 2]; 2]) -> [[f64; 4]; 4] {
    let mut a = [[0.0; 4]; 4];
    for i in 0..4 {
        for j in 0..4 {
            a[i][j] += x[i / 2][i % 2] * 2.0 - x[j / 2][j % 2] + (i * 4 + j) as f64;
        }
    }
    a
}

/// Rectangular: rows through a 3-node map, columns through a 1-cell map.
#[parloop::kernel]
fn elem_rect(a: &mut [[f64; 1]; 3]) {
    a[0][0] += 1.0;
    a[1][0] += 2.0;
    a[2][0] += 3.0;
}

/// Writes instead of adding.
#[parloop::kernel]
fn elem_write(x: &[[f64; 1]; 3], a: &mut [[f64; 3]; 3]) {
    for i in 0..3 {
        for j in 0..3 {
            a[i][j] = x[i][0] + 10.0 * x[j][0];
        }
    }
}

/// The reference: entries of an element matrix accumulated as triplets.
type Triplets = BTreeMap<(usize, usize), f64>;

fn check_against(csr: &parloop::Csr<f64>, reference: &Triplets, what: &str) {
    let rows = csr.row_ptr.len() - 1;
    let mut stored = BTreeSet::new();
    for r in 0..rows {
        for k in csr.row_ptr[r]..csr.row_ptr[r + 1] {
            let c = csr.cols[k];
            stored.insert((r, c));
            let want = reference.get(&(r, c)).copied().unwrap_or(0.0);
            let got = csr.vals[k];
            let tol = 1e-14 * want.abs().max(1.0);
            assert!((got - want).abs() <= tol, "{what}: entry ({r}, {c}) is {got}, the triplets say {want}");
        }
    }
    for key in reference.keys() {
        assert!(stored.contains(key), "{what}: entry {key:?} is missing from the pattern");
    }
}

/// Columns sorted and unique in every row.
fn check_sorted(csr: &parloop::Csr<f64>) {
    for r in 0..csr.row_ptr.len() - 1 {
        let row = &csr.cols[csr.row_ptr[r]..csr.row_ptr[r + 1]];
        assert!(row.windows(2).all(|w| w[0] < w[1]), "row {r} is not sorted and unique: {row:?}");
    }
}

/// A random mesh: `elements` x `arity` nodes among `nodes`, some rows with
/// repeats (degenerate elements), and node values.
fn mesh(nodes: usize, elements: usize, arity: usize) -> impl Strategy<Value = (Vec<i32>, Vec<f64>)> {
    (proptest::collection::vec(0..nodes as i32, elements * arity), proptest::collection::vec(-2.0f64..2.0, nodes))
}

/// Assembles `kernel` (x READ through the map, the element matrix INC)
/// over `cells` elements of `arity` nodes on `backend`; checks the pattern
/// is sorted and holds exactly the pairs the maps produce (nothing
/// missing, nothing extra), and the values equal `reference`.
fn check_scalar_assembly(
    backend: Backend,
    kernel: &'static parloop::Kernel,
    (nodes, cells, arity): (usize, usize, usize),
    map: &[i32],
    x: &[f64],
    reference: &Triplets,
) -> Result<(), TestCaseError> {
    let rt = Runtime::with_backend(backend).unwrap();
    let node_set = rt.set("nodes", nodes).unwrap();
    let cell_set = rt.set("cells", cells).unwrap();
    let c2n = rt.map("c2n", &cell_set, &node_set, arity, map.to_vec()).unwrap();
    let xd = rt.dat("x", &node_set, 1, x.to_vec()).unwrap();
    let s = rt.sparsity("s", &[(&c2n, &c2n)], (1, 1)).unwrap();
    let a = rt.mat::<f64>("A", &s).unwrap();
    rt.par_loop(kernel, &cell_set, &[xd.arg_vec(&c2n, Access::READ), a.arg(&c2n, &c2n, Access::INC)]).unwrap();
    let csr = a.to_csr().unwrap();
    // Again from zero, twice: the second loop records the positions it
    // searches (`Offsets`, arity 3 and 4), the third adds at them, to the
    // same bits.
    for round in ["second", "third"] {
        a.zero().unwrap();
        rt.par_loop(kernel, &cell_set, &[xd.arg_vec(&c2n, Access::READ), a.arg(&c2n, &c2n, Access::INC)]).unwrap();
        prop_assert_eq!(&a.to_csr().unwrap(), &csr, "{}: {} assembly", backend, round);
    }
    check_sorted(&csr);
    // Nothing extra: every stored entry is a pair the maps produce.
    let stored: BTreeSet<(usize, usize)> = (0..nodes)
        .flat_map(|r| (csr.row_ptr[r]..csr.row_ptr[r + 1]).map(move |k| (r, k)))
        .map(|(r, k)| (r, csr.cols[k]))
        .collect();
    let produced: BTreeSet<(usize, usize)> = reference.keys().copied().collect();
    prop_assert_eq!(&stored, &produced, "{}", backend);
    check_against(&csr, reference, backend.name());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// The pattern holds exactly the pairs the maps produce, and the
    /// assembled values equal triplet accumulation, on every backend.
    #[test]
    fn scalar_assembly_equals_triplets((map, x) in mesh(40, 150, 3)) {
        let mut reference = Triplets::new();
        for e in 0..150 {
            let rows: Vec<usize> = map[e * 3..e * 3 + 3].iter().map(|&v| v as usize).collect();
            let a = elem3_ref([x[rows[0]], x[rows[1]], x[rows[2]]]);
            for i in 0..3 {
                for j in 0..3 {
                    *reference.entry((rows[i], rows[j])).or_default() += a[i][j];
                }
            }
        }
        for &backend in BACKENDS {
            check_scalar_assembly(backend, elem3::KERNEL, (40, 150, 3), &map, &x, &reference)?;
        }
    }

    /// Arity 4 (tetrahedra), dims 1: exactly the produced pairs, values
    /// equal to triplet accumulation (degenerate elements included).
    #[test]
    fn tetrahedra_assembly_equals_triplets((map, x) in mesh(50, 120, 4)) {
        let mut reference = Triplets::new();
        for e in 0..120 {
            let rows: Vec<usize> = map[e * 4..e * 4 + 4].iter().map(|&v| v as usize).collect();
            for i in 0..4 {
                for j in 0..4 {
                    let v = x[rows[i]] * (x[rows[j]] - 1.0) + (i as f64) - 0.25 * (j as f64);
                    *reference.entry((rows[i], rows[j])).or_default() += v;
                }
            }
        }
        for &backend in BACKENDS {
            check_scalar_assembly(backend, elem4::KERNEL, (50, 120, 4), &map, &x, &reference)?;
        }
    }

    /// Blocks (dims 2 x 2): row entity r, component a is row 2r + a.
    #[test]
    fn block_assembly_equals_triplets((map, x) in mesh(30, 80, 2)) {
        let xs: Vec<f64> = x.iter().flat_map(|&v| [v, 0.5 - v]).collect();
        let mut reference = Triplets::new();
        for e in 0..80 {
            let n = [map[2 * e] as usize, map[2 * e + 1] as usize];
            let a = elem_block_ref([[xs[2 * n[0]], xs[2 * n[0] + 1]], [xs[2 * n[1]], xs[2 * n[1] + 1]]]);
            for i in 0..4 {
                for j in 0..4 {
                    *reference.entry((n[i / 2] * 2 + i % 2, n[j / 2] * 2 + j % 2)).or_default() += a[i][j];
                }
            }
        }
        for &backend in BACKENDS {
            let rt = Runtime::with_backend(backend).unwrap();
            let nodes = rt.set("nodes", 30).unwrap();
            let edges = rt.set("edges", 80).unwrap();
            let e2n = rt.map("e2n", &edges, &nodes, 2, map.clone()).unwrap();
            let xd = rt.dat("x", &nodes, 2, xs.clone()).unwrap();
            let s = rt.sparsity("s", &[(&e2n, &e2n)], (2, 2)).unwrap();
            prop_assert_eq!((s.rows(), s.cols()), (60, 60));
            let a = rt.mat::<f64>("A", &s).unwrap();
            rt.par_loop(elem_block::KERNEL, &edges, &[xd.arg_vec(&e2n, Access::READ), a.arg(&e2n, &e2n, Access::INC)]).unwrap();
            let csr = a.to_csr().unwrap();
            check_sorted(&csr);
            // The pattern is the block pattern expanded: every block present is
            // complete, even where the triplets hold no entry.
            let blocks: BTreeSet<(usize, usize)> = reference.keys().map(|&(r, c)| (r / 2, c / 2)).collect();
            let expected: BTreeSet<(usize, usize)> =
                blocks.iter().flat_map(|&(r, c)| (0..4).map(move |k| (2 * r + k / 2, 2 * c + k % 2))).collect();
            let stored: BTreeSet<(usize, usize)> = (0..60)
                .flat_map(|r| (csr.row_ptr[r]..csr.row_ptr[r + 1]).map(move |k| (r, k)))
                .map(|(r, k)| (r, csr.cols[k]))
                .collect();
            prop_assert_eq!(stored, expected);
            check_against(&csr, &reference, backend.name());
        }
    }
}

/// A fan of 300 triangles around node 0: its row holds 302 entries, more
/// than the recorded positions (a byte each) reach, so that row is
/// searched on every assembly; the values stay the triplets' on every
/// backend, assembly after assembly.
#[test]
fn rows_longer_than_256_entries_assemble_right_every_time() {
    let (nodes, cells) = (302, 300);
    let map: Vec<i32> = (0..cells as i32).flat_map(|i| [0, i + 1, i + 2]).collect();
    let x: Vec<f64> = (0..nodes).map(|i| (i as f64 * 0.37).sin()).collect();
    let mut reference = Triplets::new();
    for e in 0..cells {
        let rows: Vec<usize> = map[e * 3..e * 3 + 3].iter().map(|&v| v as usize).collect();
        let a = elem3_ref([x[rows[0]], x[rows[1]], x[rows[2]]]);
        for i in 0..3 {
            for j in 0..3 {
                *reference.entry((rows[i], rows[j])).or_default() += a[i][j];
            }
        }
    }
    for &backend in BACKENDS {
        let rt = Runtime::with_backend(backend).unwrap();
        let node_set = rt.set("nodes", nodes).unwrap();
        let cell_set = rt.set("cells", cells).unwrap();
        let c2n = rt.map("c2n", &cell_set, &node_set, 3, map.clone()).unwrap();
        let xd = rt.dat("x", &node_set, 1, x.clone()).unwrap();
        let s = rt.sparsity("s", &[(&c2n, &c2n)], (1, 1)).unwrap();
        let a = rt.mat::<f64>("A", &s).unwrap();
        for round in 0..3 {
            a.zero().unwrap();
            rt.par_loop(elem3::KERNEL, &cell_set, &[xd.arg_vec(&c2n, Access::READ), a.arg(&c2n, &c2n, Access::INC)])
                .unwrap();
            let csr = a.to_csr().unwrap();
            assert_eq!(csr.row_ptr[1], 302, "{backend}: node 0's row");
            check_against(&csr, &reference, &format!("{backend}, assembly {round}"));
        }
    }
}

/// Two pairs, rectangular (nodes x cells), and assembling twice adds twice.
#[test]
fn rectangular_and_several_pairs() {
    for &backend in BACKENDS {
        let rt = Runtime::with_backend(backend).unwrap();
        let nodes = rt.set("nodes", 4).unwrap();
        let cells = rt.set("cells", 2).unwrap();
        let c2n = rt.map("c2n", &cells, &nodes, 3, vec![0, 1, 2, 1, 2, 3]).unwrap();
        let c2c = rt.map("c2c", &cells, &cells, 1, vec![0, 1]).unwrap();
        let c2c_swap = rt.map("c2c_swap", &cells, &cells, 1, vec![1, 0]).unwrap();
        let s = rt.sparsity("s", &[(&c2n, &c2c), (&c2n, &c2c_swap)], (1, 1)).unwrap();
        assert_eq!((s.rows(), s.cols(), s.nnz()), (4, 2, 8));
        let a = rt.mat::<f64>("A", &s).unwrap();
        rt.par_loop(elem_rect::KERNEL, &cells, &[a.arg(&c2n, &c2c, Access::INC)]).unwrap();
        rt.par_loop(elem_rect::KERNEL, &cells, &[a.arg(&c2n, &c2c, Access::INC)]).unwrap();
        let csr = a.to_csr().unwrap();
        // Each node's cells through both column maps: both cells everywhere.
        assert_eq!(csr.row_ptr, vec![0, 2, 4, 6, 8]);
        assert_eq!(csr.cols, vec![0, 1, 0, 1, 0, 1, 0, 1]);
        // Node 1 is local row 1 of cell 0 (2.0) and local row 0 of cell 1
        // (1.0), assembled twice; entries only the swapped pair reaches stay 0.
        assert_eq!(csr.vals, vec![2.0, 0.0, 4.0, 2.0, 6.0, 4.0, 0.0, 6.0], "{backend}");
    }
}

/// A sparsity is cached by maps and dims, not by name or data.
#[test]
fn sparsities_are_cached_by_metadata() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let nodes = rt.set("nodes", 3).unwrap();
    let edges = rt.set("edges", 2).unwrap();
    let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1, 1, 2]).unwrap();
    let a = rt.sparsity("a", &[(&e2n, &e2n)], (1, 1)).unwrap();
    let b = rt.sparsity("b", &[(&e2n, &e2n)], (1, 1)).unwrap();
    let c = rt.sparsity("c", &[(&e2n, &e2n)], (2, 1)).unwrap();
    assert_eq!(b.name(), "b");
    assert_eq!(format!("{a:?}").replace("a:", "b:"), format!("{b:?}"));
    assert_eq!((c.rows(), c.cols(), c.nnz()), (6, 3, 14));
}

/// WRITE sets the entries an element covers (no race here: the elements'
/// rows are disjoint).
#[test]
fn write_sets_entries() {
    for &backend in BACKENDS {
        let rt = Runtime::with_backend(backend).unwrap();
        let nodes = rt.set("nodes", 6).unwrap();
        let cells = rt.set("cells", 2).unwrap();
        let c2n = rt.map("c2n", &cells, &nodes, 3, vec![0, 1, 2, 3, 4, 5]).unwrap();
        let x = rt.dat("x", &nodes, 1, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let s = rt.sparsity("s", &[(&c2n, &c2n)], (1, 1)).unwrap();
        let a = rt.mat::<f64>("A", &s).unwrap();
        // Something to overwrite first.
        rt.par_loop(elem3::KERNEL, &cells, &[x.arg_vec(&c2n, Access::READ), a.arg(&c2n, &c2n, Access::INC)]).unwrap();
        assert!(a.values().unwrap().iter().all(|&v| v != 0.0));
        rt.par_loop(elem_write::KERNEL, &cells, &[x.arg_vec(&c2n, Access::READ), a.arg(&c2n, &c2n, Access::WRITE)])
            .unwrap();
        let csr = a.to_csr().unwrap();
        for r in 0..6 {
            for k in csr.row_ptr[r]..csr.row_ptr[r + 1] {
                let c = csr.cols[k];
                assert_eq!(csr.vals[k], (r + 1) as f64 + 10.0 * (c + 1) as f64, "{backend}");
            }
        }
    }
}

/// WRITE where two elements cover one entry (P1 triangles sharing a
/// vertex) kept a different element's value on `threads` (colour by
/// colour) than on `seq` and the devices (element order): refused on
/// every backend, naming the elements and the entry; so is one element
/// whose map row repeats an entity. Disjoint elements are still fine
/// (`write_sets_entries`).
#[test]
fn write_where_elements_share_an_entry_is_refused() {
    for backend in [Backend::Seq, Backend::Threads, device::device_backend()] {
        for (conn, first, second, entry) in [
            (vec![0, 1, 2, 1, 2, 3], 0, 1, "row entity 1 and column entity 1"),
            (vec![0, 1, 2, 3, 3, 4], 1, 1, "row entity 3 and column entity 3"),
        ] {
            let rt = Runtime::with_backend(backend).unwrap();
            let nodes = rt.set("nodes", 5).unwrap();
            let cells = rt.set("cells", 2).unwrap();
            let c2n = rt.map("c2n", &cells, &nodes, 3, conn).unwrap();
            let x = rt.dat("x", &nodes, 1, vec![1.0; 5]).unwrap();
            let s = rt.sparsity("s", &[(&c2n, &c2n)], (1, 1)).unwrap();
            let a = rt.mat::<f64>("A", &s).unwrap();
            let err = rt
                .par_loop(
                    elem_write::KERNEL,
                    &cells,
                    &[x.arg_vec(&c2n, Access::READ), a.arg(&c2n, &c2n, Access::WRITE)],
                )
                .and_then(|_| a.values().map(|_| ()))
                .unwrap_err();
            // (Lazy on a device, the loop's assembly is checked when it runs.)
            let err = match err {
                Error::Deferred { source, .. } => *source,
                err => err,
            };
            assert!(
                matches!(&err, Error::Argument { problem, .. }
                    if matches!(**problem, ArgProblem::MatWriteRace { first: f, second: g, .. } if (f, g) == (first, second))),
                "{backend}: {err:?}"
            );
            let msg = err.to_string();
            assert!(msg.contains("(A)") && msg.contains(entry) && msg.contains("`c2n`"), "{backend}: {msg}");
            // INC of the same loop shape assembles (after `zero`: lazy, the
            // refused loop left the matrix unknown).
            a.zero().unwrap();
            rt.par_loop(elem3::KERNEL, &cells, &[x.arg_vec(&c2n, Access::READ), a.arg(&c2n, &c2n, Access::INC)])
                .unwrap();
        }
    }
}

#[test]
fn zero_rows_puts_the_diagonal() {
    for &backend in BACKENDS {
        let rt = Runtime::with_backend(backend).unwrap();
        let nodes = rt.set("nodes", 4).unwrap();
        let cells = rt.set("cells", 2).unwrap();
        let c2n = rt.map("c2n", &cells, &nodes, 3, vec![0, 1, 2, 1, 2, 3]).unwrap();
        let x = rt.dat("x", &nodes, 1, vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let s = rt.sparsity("s", &[(&c2n, &c2n)], (1, 1)).unwrap();
        let a = rt.mat::<f64>("A", &s).unwrap();
        rt.par_loop(elem3::KERNEL, &cells, &[x.arg_vec(&c2n, Access::READ), a.arg(&c2n, &c2n, Access::INC)]).unwrap();
        let before = a.to_csr().unwrap();
        let boundary = rt.subset("boundary", &nodes, vec![0, 3]).unwrap();
        a.zero_rows(&boundary, 1.0).unwrap();
        let after = a.to_csr().unwrap();
        for r in 0..4 {
            for k in after.row_ptr[r]..after.row_ptr[r + 1] {
                let c = after.cols[k];
                let want = match r {
                    0 | 3 if c == r => 1.0,
                    0 | 3 => 0.0,
                    _ => before.vals[k],
                };
                assert_eq!(after.vals[k], want, "{backend}: ({r}, {c})");
            }
        }
    }
}

/// A 2-component element matrix (three vertices of dim 2: 6 x 6) whose
/// every entry differs, so that a row zeroed in the wrong place shows.
#[parloop::kernel]
fn elem_block6(a: &mut [[f64; 6]; 6]) {
    for i in 0..6 {
        for j in 0..6 {
            a[i][j] += (1 + i + 6 * j) as f64;
        }
    }
}

#[test]
fn zero_rows_components_zeroes_those_components_rows_only() {
    for &backend in BACKENDS {
        let rt = Runtime::with_backend(backend).unwrap();
        let nodes = rt.set("nodes", 4).unwrap();
        let cells = rt.set("cells", 2).unwrap();
        let c2n = rt.map("c2n", &cells, &nodes, 3, vec![0, 1, 2, 1, 2, 3]).unwrap();
        let s = rt.sparsity("s", &[(&c2n, &c2n)], (2, 2)).unwrap();
        let a = rt.mat::<f64>("A", &s).unwrap();
        rt.par_loop(elem_block6::KERNEL, &cells, &[a.arg(&c2n, &c2n, Access::INC)]).unwrap();
        let before = a.to_csr().unwrap();
        let rollers = rt.subset("rollers", &nodes, vec![1, 3]).unwrap();
        // Nothing to zero: nothing changes.
        a.zero_rows_components(&rollers, &[], 7.0).unwrap();
        assert_eq!(a.to_csr().unwrap().vals, before.vals, "{backend}");
        a.zero_rows_components(&rollers, &[1], 7.0).unwrap();
        let after = a.to_csr().unwrap();
        for row in 0..8 {
            let fixed = row % 2 == 1 && (row / 2 == 1 || row / 2 == 3);
            for k in after.row_ptr[row]..after.row_ptr[row + 1] {
                let c = after.cols[k];
                let want = match fixed {
                    true if c == row => 7.0,
                    true => 0.0,
                    false => before.vals[k],
                };
                assert_eq!(after.vals[k], want, "{backend}: ({row}, {c})");
            }
        }
        // Both components are zero_rows.
        let b = rt.mat::<f64>("B", &s).unwrap();
        rt.par_loop(elem_block6::KERNEL, &cells, &[b.arg(&c2n, &c2n, Access::INC)]).unwrap();
        let c = rt.mat::<f64>("C", &s).unwrap();
        rt.par_loop(elem_block6::KERNEL, &cells, &[c.arg(&c2n, &c2n, Access::INC)]).unwrap();
        b.zero_rows_components(&rollers, &[1, 0], 3.0).unwrap();
        c.zero_rows(&rollers, 3.0).unwrap();
        assert_eq!(b.values().unwrap(), c.values().unwrap(), "{backend}");
        // A component past the dim: an error naming it, nothing changed.
        let err = a.zero_rows_components(&rollers, &[0, 2], 1.0).unwrap_err().to_string();
        assert!(err.contains("component 2") && err.contains("2 component(s)") && err.contains("`A`"), "{err}");
        assert_eq!(a.to_csr().unwrap().vals, after.vals, "{backend}");
    }
}

#[test]
fn zero_rows_without_a_diagonal_entry_is_an_error_and_changes_nothing() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let nodes = rt.set("nodes", 3).unwrap();
    let edges = rt.set("edges", 1).unwrap();
    let rows = rt.map("rows", &edges, &nodes, 1, vec![0]).unwrap();
    let cols = rt.map("cols", &edges, &nodes, 1, vec![2]).unwrap();
    let s = rt.sparsity("offdiag", &[(&rows, &cols)], (1, 1)).unwrap();
    let a = rt.mat::<f64>("A", &s).unwrap();
    rt.par_loop(elem_one::KERNEL, &edges, &[a.arg(&rows, &cols, Access::INC)]).unwrap();
    let b = rt.subset("b", &nodes, vec![0]).unwrap();
    let err = a.zero_rows(&b, 1.0).unwrap_err().to_string();
    assert!(err.contains("diagonal entry (0, 0)") && err.contains("offdiag"), "{err}");
    assert_eq!(a.values().unwrap(), vec![1.0]);
}

#[parloop::kernel]
fn elem_one(a: &mut [f64; 1]) {
    // A 1 x 1 element matrix: `[[f64; 1]; 1]` and `[f64; 1]` are one shape.
    a[0] += 1.0;
}

/// Parses a Matrix Market coordinate file (what `write_matrix_market` writes).
fn read_matrix_market(text: &str) -> (usize, usize, Vec<(usize, usize, f64)>) {
    let mut lines = text.lines().filter(|l| !l.starts_with('%'));
    let header: Vec<usize> = lines.next().unwrap().split_whitespace().map(|v| v.parse().unwrap()).collect();
    let entries: Vec<(usize, usize, f64)> = lines
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].parse::<usize>().unwrap() - 1, f[1].parse::<usize>().unwrap() - 1, f[2].parse().unwrap())
        })
        .collect();
    assert_eq!(entries.len(), header[2]);
    (header[0], header[1], entries)
}

#[test]
fn matrix_market_round_trip() {
    let rt = Runtime::with_backend(Backend::Threads).unwrap();
    let nodes = rt.set("nodes", 5).unwrap();
    let cells = rt.set("cells", 3).unwrap();
    let c2n = rt.map("c2n", &cells, &nodes, 3, vec![0, 1, 2, 1, 2, 3, 2, 3, 4]).unwrap();
    let x = rt.dat("x", &nodes, 1, vec![0.1, 1.0 / 3.0, -2.5e-7, 1e300, std::f64::consts::PI]).unwrap();
    let s = rt.sparsity("s", &[(&c2n, &c2n)], (1, 1)).unwrap();
    let a = rt.mat::<f64>("A", &s).unwrap();
    rt.par_loop(elem3::KERNEL, &cells, &[x.arg_vec(&c2n, Access::READ), a.arg(&c2n, &c2n, Access::INC)]).unwrap();
    let dir = std::env::temp_dir().join(format!("parloop-mm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("a.mtx");
    a.write_matrix_market(&path).unwrap();
    let csr = a.to_csr().unwrap();
    let (rows, cols, entries) = read_matrix_market(&std::fs::read_to_string(&path).unwrap());
    assert_eq!((rows, cols), (5, 5));
    let mut k = 0;
    for r in 0..5 {
        for j in csr.row_ptr[r]..csr.row_ptr[r + 1] {
            assert_eq!(entries[k], (r, csr.cols[j], csr.vals[j]), "bitwise round trip");
            k += 1;
        }
    }
    // SciPy, where it is installed (required when PARLOOP_REQUIRE_SCIPY is set).
    let script = format!(
        "import sys, scipy.io, numpy as np\n\
         m = scipy.io.mmread(r'{}').tocsr()\n\
         m.sort_indices()\n\
         print(' '.join(map(str, m.indptr)))\n\
         print(' '.join(map(str, m.indices)))\n\
         print(' '.join(repr(float(v)) for v in m.data))\n",
        path.display()
    );
    let out = std::process::Command::new("python3").arg("-c").arg(&script).output();
    let scipy = matches!(&out, Ok(o) if o.status.success());
    if !scipy {
        if std::env::var_os("PARLOOP_REQUIRE_SCIPY").is_some() {
            panic!("PARLOOP_REQUIRE_SCIPY is set but SciPy could not read the file: {out:?}");
        }
        eprintln!("SciPy not available: the SciPy read-back is skipped");
    } else {
        let text = String::from_utf8(out.unwrap().stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let ptr: Vec<usize> = lines[0].split_whitespace().map(|v| v.parse().unwrap()).collect();
        let idx: Vec<usize> = lines[1].split_whitespace().map(|v| v.parse().unwrap()).collect();
        let val: Vec<f64> = lines[2].split_whitespace().map(|v| v.parse().unwrap()).collect();
        assert_eq!(ptr, csr.row_ptr);
        assert_eq!(idx, csr.cols);
        // SciPy drops nothing: explicit zeros stay (mmread keeps them).
        assert_eq!(val, csr.vals);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[parloop::kernel]
fn number(i: &i64, x: &mut f64) {
    *x = *i as f64 * 2.0;
}

#[parloop::kernel]
fn bump(x: &mut f64, y: &f64) {
    *x = *y + 1.0;
}

#[parloop::kernel]
fn spread(w: &f64, n: &mut [[f64; 1]; 2]) {
    n[0][0] += *w;
    n[1][0] += 2.0 * *w;
}

/// Loops over subsets: direct arguments reach the subset's entities,
/// indirect ones go through the parent's maps, the index is the parent's.
#[test]
fn loops_over_subsets() {
    for &backend in BACKENDS {
        let rt = Runtime::with_backend(backend).unwrap();
        let nodes = rt.set("nodes", 5).unwrap();
        let edges = rt.set("edges", 4).unwrap();
        let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1, 1, 2, 2, 3, 3, 4]).unwrap();
        let x = rt.dat("x", &nodes, 1, vec![-1.0; 5]).unwrap();
        let y = rt.dat("y", &nodes, 1, vec![10.0, 11.0, 12.0, 13.0, 14.0]).unwrap();
        let b = rt.subset("b", &nodes, vec![1, 4]).unwrap();
        rt.par_loop(number::KERNEL, &b, &[Arg::index(), x.arg(Access::WRITE)]).unwrap();
        assert_eq!(x.values().unwrap(), vec![-1.0, 2.0, -1.0, -1.0, 8.0], "{backend}");
        rt.par_loop(bump::KERNEL, &b, &[x.arg(Access::RW), y.arg(Access::READ)]).unwrap();
        assert_eq!(x.values().unwrap(), vec![-1.0, 12.0, -1.0, -1.0, 15.0], "{backend}");
        // Indirect INC through the parent's map, twice (the plan is cached).
        let w = rt.dat("w", &edges, 1, vec![1.0, 10.0, 100.0, 1000.0]).unwrap();
        let n = rt.dat("n", &nodes, 1, vec![0.0; 5]).unwrap();
        let some = rt.subset("some", &edges, vec![0, 2, 3]).unwrap();
        for _ in 0..2 {
            rt.par_loop(spread::KERNEL, &some, &[w.arg(Access::READ), n.arg_vec(&e2n, Access::INC)]).unwrap();
        }
        assert_eq!(n.values().unwrap(), vec![2.0, 4.0, 200.0, 2400.0, 4000.0], "{backend}");
        // A matrix assembled over a subset of the elements.
        let s = rt.sparsity("s", &[(&e2n, &e2n)], (1, 1)).unwrap();
        let a = rt.mat::<f64>("A", &s).unwrap();
        let xs = rt.dat("xs", &nodes, 1, vec![0.0, 1.0, 2.0, 3.0, 4.0]).unwrap();
        rt.par_loop(elem_edge::KERNEL, &some, &[xs.arg_vec(&e2n, Access::READ), a.arg(&e2n, &e2n, Access::INC)])
            .unwrap();
        let csr = a.to_csr().unwrap();
        let mut dense = [[0.0; 5]; 5];
        for (r, row) in dense.iter_mut().enumerate() {
            for k in csr.row_ptr[r]..csr.row_ptr[r + 1] {
                row[csr.cols[k]] = csr.vals[k];
            }
        }
        let mut want = [[0.0; 5]; 5];
        for e in [0usize, 2, 3] {
            let (p, q) = (e, e + 1);
            let (xp, xq) = (p as f64, q as f64);
            want[p][p] += xp;
            want[p][q] += xq;
            want[q][p] -= xp;
            want[q][q] += 1.0;
        }
        assert_eq!(dense, want, "{backend}");
    }
}

#[parloop::kernel]
fn elem_edge(x: &[[f64; 1]; 2], a: &mut [[f64; 2]; 2]) {
    a[0][0] += x[0][0];
    a[0][1] += x[1][0];
    a[1][0] -= x[0][0];
    a[1][1] += 1.0;
}

/// On every backend this machine runs (the device ones pass `e` to the
/// kernel from the generated loop).
#[test]
fn the_element_index_is_the_element_number() {
    let all = [Backend::Seq, Backend::Threads, Backend::Emu, Backend::Cuda];
    for rt in all.into_iter().filter_map(|b| Runtime::with_backend(b).ok()) {
        let backend = rt.backend();
        let n = 5000;
        let cells = rt.set("cells", n).unwrap();
        let x = rt.dat("x", &cells, 1, vec![0.0; n]).unwrap();
        rt.par_loop(number::KERNEL, &cells, &[Arg::index(), x.arg(Access::WRITE)]).unwrap();
        let want: Vec<f64> = (0..n).map(|i| 2.0 * i as f64).collect();
        assert_eq!(x.values().unwrap(), want, "{backend}");
        eprintln!("the element index checked on {backend}");
    }
}

fn problem(err: Error) -> ArgProblem {
    match err {
        Error::Argument { problem, .. } => *problem,
        other => panic!("expected an argument error, got {other}"),
    }
}

#[parloop::kernel]
fn elem_wrong(a: &mut [[f64; 2]; 3]) {
    a[0][0] += 1.0;
}

#[parloop::kernel]
fn two_mats(a: &mut [[f64; 3]; 3], b: &mut [[f64; 3]; 3]) {
    a[0][0] += 1.0;
    b[0][0] += 1.0;
}

#[parloop::kernel]
fn elem_assign(a: &mut [[f64; 3]; 3]) {
    a[0][0] = 1.0;
}

#[parloop::kernel]
fn wrong_index(i: &f64, x: &mut f64) {
    *x = *i;
}

#[parloop::kernel]
fn unit_entry(a: &mut [[f64; 1]; 1]) {
    a[0][0] += 1.0;
}

#[test]
fn bad_input_is_refused() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let nodes = rt.set("nodes", 4).unwrap();
    let cells = rt.set("cells", 2).unwrap();
    let edges = rt.set("edges", 3).unwrap();
    let c2n = rt.map("c2n", &cells, &nodes, 3, vec![0, 1, 2, 1, 2, 3]).unwrap();
    let c2n_b = rt.map("c2n_b", &cells, &nodes, 3, vec![0, 1, 2, 1, 2, 3]).unwrap();
    let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1, 1, 2, 2, 3]).unwrap();
    let e2c = rt.map("e2c", &edges, &cells, 1, vec![0, 1, 1]).unwrap();

    // Mismatched maps: a pair from two iteration sets, rows on two sets.
    let err = rt.sparsity("bad", &[(&c2n, &e2n)], (1, 1)).unwrap_err().to_string();
    assert!(err.contains("`c2n`") && err.contains("`e2n`") && err.contains("one iteration set"), "{err}");
    let err = rt.sparsity("bad", &[(&e2n, &e2n), (&e2c, &e2c)], (1, 1)).unwrap_err().to_string();
    assert!(err.contains("`e2c`") && err.contains("rows live on one set"), "{err}");
    assert!(rt.sparsity("bad", &[], (1, 1)).is_err());
    assert!(rt.sparsity("bad", &[(&c2n, &c2n)], (0, 1)).is_err());
    // Block sizes whose products overflow are refused, not wrapped (a
    // wrapped block size made an empty pattern, then indexed past it).
    for dims in [(1usize << 63, 2), (usize::MAX, 1), (1 << 32, 1 << 32), (1 << 31, 1)] {
        let err = rt.sparsity("huge", &[(&c2n, &c2n)], dims).unwrap_err();
        assert!(matches!(err, Error::SizeOverflow { .. }), "{dims:?}: {err}");
        assert!(err.to_string().contains("`nodes`"), "{err}");
    }

    let s = rt.sparsity("s", &[(&c2n, &c2n)], (1, 1)).unwrap();
    let a = rt.mat::<f64>("A", &s).unwrap();
    assert!(matches!(rt.mat::<f64>("A", &s), Err(Error::DuplicateName { what: "matrix", holder: "matrix", .. })));
    let _v = rt.dat("V", &nodes, 1, vec![0.0f64; nodes.total()]).unwrap();
    let err = rt.mat::<f64>("V", &s).unwrap_err();
    assert!(err.to_string().starts_with("matrix `V`: the name is taken by a live dat"), "{err}");

    // Element matrix of the wrong shape.
    let err = rt.par_loop(elem_wrong::KERNEL, &cells, &[a.arg(&c2n, &c2n, Access::INC)]).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(problem(err), ArgProblem::Dim { .. }), "{msg}");
    assert!(msg.contains("3 rows") && msg.contains("`c2n`"), "{msg}");

    // A pair the sparsity was not built from (same shape, other map).
    let err = rt.par_loop(elem_one3::KERNEL, &cells, &[a.arg(&c2n_b, &c2n, Access::INC)]).unwrap_err();
    assert!(matches!(problem(err), ArgProblem::MatPair { .. }));
    // The same name on another map (the sparsity's dropped by the user and
    // declared again): the message says the names alone are the same.
    {
        let n = rt.set("n_same", 2).unwrap();
        let s_same = {
            let id = rt.map("id_same", &n, &n, 1, vec![0, 1]).unwrap();
            rt.sparsity("s_same", &[(&id, &id)], (1, 1)).unwrap()
        };
        let id = rt.map("id_same", &n, &n, 1, vec![0, 1]).unwrap();
        let m = rt.mat::<f64>("M_same", &s_same).unwrap();
        let err = rt.par_loop(unit_entry::KERNEL, &n, &[m.arg(&id, &id, Access::INC)]).unwrap_err().to_string();
        assert!(err.contains("names are the same but the maps are not"), "{err}");
    }

    // WRITE/INC mixing, and one matrix twice.
    let err = rt
        .par_loop(two_mats::KERNEL, &cells, &[a.arg(&c2n, &c2n, Access::INC), a.arg(&c2n, &c2n, Access::WRITE)])
        .unwrap_err();
    assert!(matches!(problem(err), ArgProblem::Conflict { reason, .. } if reason.contains("WRITE and INC")));
    let err = rt
        .par_loop(two_mats::KERNEL, &cells, &[a.arg(&c2n, &c2n, Access::INC), a.arg(&c2n, &c2n, Access::INC)])
        .unwrap_err();
    assert!(matches!(problem(err), ArgProblem::Conflict { reason, .. } if reason.contains("once per loop")));

    // READ or RW on a matrix; INC on an element matrix the kernel assigns.
    let err = rt.par_loop(elem_one3::KERNEL, &cells, &[a.arg(&c2n, &c2n, Access::RW)]).unwrap_err();
    assert!(matches!(problem(err), ArgProblem::MatAccess { .. }));
    let err = rt.par_loop(elem_assign::KERNEL, &cells, &[a.arg(&c2n, &c2n, Access::INC)]).unwrap_err();
    assert!(matches!(problem(err), ArgProblem::IncNotIncrementOnly { .. }));

    // Maps not from the loop's set.
    let err = rt.par_loop(elem_one3::KERNEL, &edges, &[a.arg(&c2n, &c2n, Access::INC)]).unwrap_err();
    assert!(matches!(problem(err), ArgProblem::MapFrom { .. }));

    // The index into a parameter that is not `&i64`.
    let x = rt.dat("x", &cells, 1, vec![0.0; 2]).unwrap();
    let err = rt.par_loop(wrong_index::KERNEL, &cells, &[Arg::index(), x.arg(Access::WRITE)]).unwrap_err();
    assert!(matches!(problem(err), ArgProblem::ElementType { expected: "f64", got: "i64" }));

    // Nothing changed.
    assert_eq!(a.values().unwrap(), vec![0.0; s.nnz()]);

    // Subsets: out of range, unsorted, repeated.
    let err = rt.subset("b", &nodes, vec![0, 4]).unwrap_err().to_string();
    assert!(err.contains("`b`") && err.contains("index 1 is 4"), "{err}");
    let err = rt.subset("b", &nodes, vec![2, 1]).unwrap_err().to_string();
    assert!(err.contains("index 1 is 1") && err.contains("sorted"), "{err}");
    let err = rt.subset("b", &nodes, vec![1, 1]).unwrap_err().to_string();
    assert!(err.contains("repeats"), "{err}");
    // Past i32 in a set that large: not "outside the set" (it is inside).
    let huge = rt.set("huge", 5_000_000_000).unwrap();
    let err = rt.subset("h", &huge, vec![1, 3_000_000_000]).unwrap_err().to_string();
    assert!(err.contains("index 1 is 3000000000, past i32::MAX") && !err.contains("outside"), "{err}");
    let ok = rt.subset("b", &nodes, vec![]).unwrap();
    assert_eq!(ok.size(), 0);
    // zero_rows with a subset of another set.
    let other = rt.subset("c", &cells, vec![0]).unwrap();
    assert!(a.zero_rows(&other, 1.0).is_err());
}

#[parloop::kernel]
fn elem_one3(a: &mut [[f64; 3]; 3]) {
    a[0][0] += 1.0;
}

// Device assembly: tests/matrix_device.rs.

#[parloop::kernel]
fn elem_big(a: &mut [[i64; 2]; 2]) {
    a[0][0] += 9_007_199_254_740_993; // 2^53 + 1: no f64 holds it
    a[0][1] -= 1;
    a[1][1] += 1;
}

/// An integer matrix's file says `integer`: under the `real` header it
/// had, a reader parsed its values as doubles (2^53 + 1 read as 2^53).
#[test]
fn matrix_market_of_an_integer_matrix_says_integer_and_keeps_every_digit() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let nodes = rt.set("nodes", 3).unwrap();
    let edges = rt.set("edges", 2).unwrap();
    let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1, 1, 2]).unwrap();
    let s = rt.sparsity("s", &[(&e2n, &e2n)], (1, 1)).unwrap();
    let a = rt.mat::<i64>("big", &s).unwrap();
    rt.par_loop(elem_big::KERNEL, &edges, &[a.arg(&e2n, &e2n, Access::INC)]).unwrap();
    let path = std::env::temp_dir().join(format!("parloop-mm-int-{}.mtx", std::process::id()));
    a.write_matrix_market(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert!(text.starts_with("%%MatrixMarket matrix coordinate integer general\n"), "{text}");
    let csr = a.to_csr().unwrap();
    let entries: Vec<(usize, usize, i64)> = text
        .lines()
        .filter(|l| !l.starts_with('%'))
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].parse::<usize>().unwrap() - 1, f[1].parse::<usize>().unwrap() - 1, f[2].parse().unwrap())
        })
        .collect();
    let want: Vec<(usize, usize, i64)> = (0..3)
        .flat_map(|r| (csr.row_ptr[r]..csr.row_ptr[r + 1]).map(move |k| (r, k)))
        .map(|(r, k)| (r, csr.cols[k], csr.vals[k]))
        .collect();
    assert_eq!(entries, want);
    assert!(entries.contains(&(1, 1, 9_007_199_254_740_994)), "{entries:?}");
}

/// A subset of another runtime's set of the same name: the message said
/// "subset `b` is of set `nodes`, the matrix's rows are on `nodes`".
#[test]
fn zero_rows_with_another_runtimes_subset_says_so() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let other = Runtime::with_backend(Backend::Seq).unwrap();
    let nodes = rt.set("nodes", 2).unwrap();
    let id = rt.map("id", &nodes, &nodes, 1, vec![0, 1]).unwrap();
    let a = rt.mat::<f64>("A", &rt.sparsity("s", &[(&id, &id)], (1, 1)).unwrap()).unwrap();
    let elsewhere = other.set("nodes", 2).unwrap();
    let b = other.subset("b", &elsewhere, vec![0]).unwrap();
    let msg = a.zero_rows(&b, 1.0).unwrap_err().to_string();
    assert!(msg.contains("subset `b` is of set `nodes` of another runtime"), "{msg}");
}

/// A product whose operand the host holds is refused with the same name
/// on every backend: the host product called itself "mult of matrix `A`"
/// (so the message read "loop `mult of matrix `A``") and the device one
/// "mult".
#[test]
fn a_product_refused_while_the_host_holds_x_names_it_alike_on_every_backend() {
    for backend in [Backend::Seq, Backend::Threads, Backend::Emu] {
        let rt = Runtime::with_backend(backend).unwrap();
        let nodes = rt.set("nodes", 3).unwrap();
        let edges = rt.set("edges", 2).unwrap();
        let e2n = rt.map("e2n", &edges, &nodes, 2, vec![0, 1, 1, 2]).unwrap();
        let s = rt.sparsity("s", &[(&e2n, &e2n)], (1, 1)).unwrap();
        let a = rt.mat::<f64>("A", &s).unwrap();
        let x = rt.dat("x", &nodes, 1, vec![1.0; 3]).unwrap();
        let y = rt.dat("y", &nodes, 1, vec![0.0; 3]).unwrap();
        let err = x.with_values(|_| rt.mult(&a, &x, &y)).unwrap().unwrap_err();
        assert!(
            matches!(&err, Error::Busy { kernel, dat } if kernel == "mult [A]" && dat == "x"),
            "{backend:?}: {err}"
        );
    }
}
