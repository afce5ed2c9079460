//! Interior facets (`Mesh::interior_facets`): exactly the faces two cells
//! share (against a count of every cell's faces in a hash map), each
//! oriented out of its first cell; boundary facets oriented out of the
//! domain; and, through parloop loops over the declared facets on every
//! backend, the discrete divergence theorem: each cell's outward normals
//! (scaled by their facets' measure) sum to zero.

#[path = "../../runtime/tests/support/device.rs"]
mod device;

use std::collections::HashMap;
use std::path::PathBuf;

use parloop::{Access, Backend, Runtime};
use parloop_mesh::{gmsh, unit_cube, unit_square, Mesh};

fn meshes() -> Vec<(String, Mesh)> {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data");
    let mut v = vec![
        ("unit_square(1, 1)".to_string(), unit_square(1, 1).unwrap()),
        ("unit_square(5, 3)".to_string(), unit_square(5, 3).unwrap()),
        ("unit_cube(1, 1, 1)".to_string(), unit_cube(1, 1, 1).unwrap()),
        ("unit_cube(3, 2, 4)".to_string(), unit_cube(3, 2, 4).unwrap()),
    ];
    for f in ["disk-41-ascii.msh", "lshape-22-bin.msh", "cube_hole-41-bin.msh"] {
        v.push((f.to_string(), gmsh::read(data.join(f)).unwrap()));
    }
    v
}

fn point(m: &Mesh, v: u32) -> [f64; 3] {
    let mut p = [0.0; 3];
    p[..m.dim].copy_from_slice(&m.coords[v as usize * m.dim..][..m.dim]);
    p
}

fn centroid(m: &Mesh, vs: &[u32]) -> [f64; 3] {
    let mut c = [0.0; 3];
    for &v in vs {
        let p = point(m, v);
        for k in 0..3 {
            c[k] += p[k] / vs.len() as f64;
        }
    }
    c
}

/// The facet's normal from its vertex order, its length the facet's
/// measure (times 2 in 3-D).
fn normal(m: &Mesh, vs: &[u32]) -> [f64; 3] {
    let (a, b) = (point(m, vs[0]), point(m, vs[1]));
    if m.dim == 2 {
        return [b[1] - a[1], a[0] - b[0], 0.0];
    }
    let c = point(m, vs[2]);
    let (u, w) = ([b[0] - a[0], b[1] - a[1], b[2] - a[2]], [c[0] - a[0], c[1] - a[1], c[2] - a[2]]);
    [u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]]
}

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn cell(m: &Mesh, c: u32) -> &[u32] {
    &m.cells[c as usize * (m.dim + 1)..][..m.dim + 1]
}

#[test]
fn interior_facets_are_the_faces_two_cells_share_oriented_out_of_the_first() {
    for (name, m) in meshes() {
        let d = m.dim;
        // The reference: every cell's faces counted by their vertex sets.
        let mut seen: HashMap<Vec<u32>, Vec<u32>> = HashMap::new();
        for c in 0..m.num_cells() as u32 {
            let vs = cell(&m, c);
            for skip in 0..=d {
                let mut f: Vec<u32> = vs.iter().enumerate().filter(|&(k, _)| k != skip).map(|(_, &v)| v).collect();
                f.sort_unstable();
                seen.entry(f).or_default().push(c);
            }
        }
        let mut expected: Vec<(Vec<u32>, Vec<u32>)> = seen.into_iter().filter(|(_, c)| c.len() == 2).collect();
        expected.sort();
        let inner = m.interior_facets().unwrap();
        assert_eq!(inner.dim, d, "{name}");
        assert_eq!(inner.vertices.len(), inner.len() * d, "{name}");
        let mut got: Vec<(Vec<u32>, Vec<u32>)> = (0..inner.len())
            .map(|f| {
                let mut vs = inner.vertices[f * d..][..d].to_vec();
                vs.sort_unstable();
                (vs, inner.cells[2 * f..][..2].to_vec())
            })
            .collect();
        got.sort();
        assert_eq!(got, expected, "{name}");
        // Every face is a boundary facet or an interior one.
        assert_eq!((d + 1) * m.num_cells(), m.num_facets() + 2 * inner.len(), "{name}");
        for f in 0..inner.len() {
            let vs = &inner.vertices[f * d..][..d];
            let (c0, c1) = (inner.cells[2 * f], inner.cells[2 * f + 1]);
            assert!(c0 < c1, "{name}: facet {f}");
            let (x0, x1) = (centroid(&m, cell(&m, c0)), centroid(&m, cell(&m, c1)));
            let into = [x1[0] - x0[0], x1[1] - x0[1], x1[2] - x0[2]];
            assert!(dot(normal(&m, vs), into) > 0.0, "{name}: facet {f} points into its first cell");
        }
        for f in 0..m.num_facets() {
            let vs = &m.facets[f * d..][..d];
            let out = centroid(&m, vs);
            let inside = centroid(&m, cell(&m, m.facet_cells[f]));
            let away = [out[0] - inside[0], out[1] - inside[1], out[2] - inside[2]];
            assert!(dot(normal(&m, vs), away) > 0.0, "{name}: boundary facet {f} points into the domain");
        }
    }
}

/// The facet's scaled normal, added to its first cell and taken from the
/// second.
#[parloop::kernel]
fn interior_flux(n: &[f64; 3], c0: &mut [f64; 3], c1: &mut [f64; 3]) {
    for k in 0..3 {
        c0[k] += n[k];
        c1[k] -= n[k];
    }
}

#[parloop::kernel]
fn boundary_flux(n: &[f64; 3], c: &mut [f64; 3]) {
    for k in 0..3 {
        c[k] += n[k];
    }
}

#[test]
fn the_normals_around_every_cell_sum_to_zero_through_loops_over_the_declared_facets() {
    for backend in [Backend::Seq, Backend::Threads, device::device_backend()] {
        for (name, m) in meshes() {
            let d = m.dim;
            let rt = Runtime::with_backend(backend).unwrap();
            let dm = m.declare(&rt, "fv").unwrap();
            let inner = m.interior_facets().unwrap();
            let df = inner.declare(&rt, "fv", &dm).unwrap();
            assert_eq!(df.facets.name(), "fv_interior_facets");
            let normals = |vertices: &[u32], n: usize| -> Vec<f64> {
                (0..n).flat_map(|f| normal(&m, &vertices[f * d..][..d])).collect()
            };
            let n_in = rt.dat("n_in", &df.facets, 3, normals(&inner.vertices, inner.len())).unwrap();
            let n_bd = rt.dat("n_bd", &dm.facets, 3, normals(&m.facets, m.num_facets())).unwrap();
            let sum = rt.dat("sum", &dm.cells, 3, vec![0.0; 3 * m.num_cells()]).unwrap();
            rt.par_loop(
                interior_flux::KERNEL,
                &df.facets,
                &[
                    n_in.arg(Access::READ),
                    sum.arg_via(&df.facet_cells, 0, Access::INC),
                    sum.arg_via(&df.facet_cells, 1, Access::INC),
                ],
            )
            .unwrap();
            rt.par_loop(
                boundary_flux::KERNEL,
                &dm.facets,
                &[n_bd.arg(Access::READ), sum.arg_via(&dm.facet_cells, 0, Access::INC)],
            )
            .unwrap();
            let scale = n_in.values().unwrap().iter().fold(0.0f64, |a, v| a.max(v.abs()));
            for (c, s) in sum.values().unwrap().chunks(3).enumerate() {
                assert!(s.iter().all(|v: &f64| v.abs() <= 1e-12 * scale), "{backend:?} {name}: cell {c} sums to {s:?}");
            }
        }
    }
}

#[test]
fn a_face_of_three_cells_is_an_error_naming_its_vertices() {
    let mut m = unit_square(1, 1).unwrap();
    let diagonal = m.interior_facets().unwrap().vertices;
    assert_eq!(diagonal, [1, 2]);
    // A third triangle on the diagonal, beyond the square.
    m.coords.extend([2.0, 2.0]);
    m.cells.extend([1, 4, 2]);
    let err = m.interior_facets().unwrap_err().to_string();
    assert!(err.contains("[1, 2]") && err.contains("cell 2"), "{err}");
}

/// A cell with a repeated vertex (built by hand; the Gmsh reader refuses
/// one) gave an interior facet from the cell to itself, over which a flux
/// is added and taken back from one cell: refused by `check`, so by
/// `interior_facets` and `declare` too.
#[test]
fn a_cell_with_a_repeated_vertex_is_refused() {
    let mut m = unit_square(1, 1).unwrap();
    m.cells[1] = m.cells[0];
    for err in [m.check().unwrap_err(), m.interior_facets().unwrap_err()] {
        let err = err.to_string();
        assert!(err.contains("cell 0 repeats vertex"), "{err}");
    }
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    assert!(m.declare(&rt, "").is_err());
}

/// A clockwise triangle (the mesh promises counter-clockwise ones) was
/// accepted, and the interior facets taken from it had their normals
/// pointing into their first cell: refused, naming the cell.
#[test]
fn a_negatively_oriented_cell_is_refused() {
    let mut m = unit_square(2, 2).unwrap();
    m.cells.swap(9, 10); // cell 3's first two vertices
    for err in [m.check().unwrap_err(), m.interior_facets().unwrap_err()] {
        let err = err.to_string();
        assert!(err.contains("cell 3") && err.contains("negatively oriented"), "{err}");
    }
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    assert!(m.declare(&rt, "").is_err());
    // A tangled mesh can still be written, to be looked at.
    let path = std::env::temp_dir().join(format!("tangled-{}.vtu", std::process::id()));
    parloop_mesh::vtk::write_vtu(&path, &m, &[], &[]).unwrap();
    std::fs::remove_file(&path).unwrap();
    // A cell of zero area, likewise.
    let mut m = parloop_mesh::unit_cube(1, 1, 1).unwrap();
    let v = m.cells[0] as usize * 3;
    let w = m.cells[1] as usize * 3;
    let at = m.coords[v..v + 3].to_vec();
    m.coords[w..w + 3].copy_from_slice(&at);
    let err = m.check().unwrap_err().to_string();
    assert!(err.contains("zero volume"), "{err}");
}

/// Boundary facets a hand-built mesh got wrong were accepted: one that is
/// not a face of its `facet_cells` cell (its flux went to that cell), one
/// ordered inward (its normal pointed into the domain), one repeating a
/// vertex.
#[test]
fn a_boundary_facet_off_its_cell_or_inward_is_refused() {
    let good = unit_square(2, 2).unwrap();
    good.check().unwrap();
    let mut m = good.clone();
    let f = 0;
    let other = (m.facet_cells[f] + 1) % m.num_cells() as u32;
    m.facet_cells[f] = other;
    let err = m.check().unwrap_err().to_string();
    assert!(err.contains("facet 0") && err.contains("is not a face of its cell"), "{err}");
    let mut m = good.clone();
    m.facets.swap(0, 1);
    let err = m.check().unwrap_err().to_string();
    assert!(err.contains("facet 0") && err.contains("ordered inward"), "{err}");
    let mut m = good.clone();
    m.facets[1] = m.facets[0];
    assert!(m.check().unwrap_err().to_string().contains("is not a face of its cell"));
    // 3-D: an odd permutation of a face is inward, a rotation is not.
    let cube = parloop_mesh::unit_cube(1, 1, 1).unwrap();
    let mut m = cube.clone();
    m.facets[..3].rotate_left(1);
    m.check().unwrap();
    m.facets.swap(0, 1);
    assert!(m.check().unwrap_err().to_string().contains("ordered inward"));
}

/// A boundary facet listed twice, a face between two cells listed as a
/// boundary facet, and a boundary cell listed twice were accepted (the
/// facet's flux counted twice, or taken out through the domain's
/// interior): refused, naming the facets and cells.
#[test]
fn a_facet_listed_twice_or_between_two_cells_is_refused() {
    for good in [unit_square(3, 2).unwrap(), parloop_mesh::unit_cube(2, 1, 2).unwrap()] {
        good.check().unwrap();
        let d = good.dim;
        // The last facet again.
        let mut m = good.clone();
        let last = m.num_facets() - 1;
        let facet = m.facets[last * d..][..d].to_vec();
        m.facets.extend_from_slice(&facet);
        m.facet_cells.push(m.facet_cells[last]);
        let err = m.check().unwrap_err().to_string();
        assert!(
            err.contains(&format!("facet {} ", last + 1)) && err.contains(&format!("repeats facet {last}")),
            "{err}"
        );
        // An interior face listed as a boundary facet of one of its cells.
        let inner = good.interior_facets().unwrap();
        let mut m = good.clone();
        m.facets.extend_from_slice(&inner.vertices[..d]);
        m.facet_cells.push(inner.cells[0]);
        let err = m.check().unwrap_err().to_string();
        let other = inner.cells[1];
        assert!(err.contains("a boundary facet bounds one cell") && err.contains(&format!("cell {other}")), "{err}");
        // The cell of facet 0 listed twice.
        let mut m = good.clone();
        let c = m.facet_cells[0] as usize;
        let cell = m.cells[c * (d + 1)..][..d + 1].to_vec();
        m.cells.extend_from_slice(&cell);
        let copy = m.num_cells() - 1;
        let err = m.check().unwrap_err().to_string();
        assert!(err.contains(&format!("its cell {c} ")) && err.contains(&format!("of cell {copy} ")), "{err}");
        let rt = Runtime::with_backend(Backend::Seq).unwrap();
        assert!(m.declare(&rt, "").is_err());
    }
}

/// Two interior facet groups of one name (a hand-built mesh; two physical
/// tags) were refused as a duplicate subset, where `Mesh::declare` names
/// the second `#2`: named alike now.
#[test]
fn two_interior_facet_groups_of_one_name_are_declared_as_the_mesh_declares_them() {
    let m = unit_square(2, 2).unwrap();
    let mut inner = m.interior_facets().unwrap();
    for entities in [vec![0, 1], vec![2]] {
        inner.groups.push(parloop_mesh::Group {
            name: "iface".into(),
            kind: parloop_mesh::EntityKind::InteriorFacet,
            entities,
        });
    }
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let dm = m.declare(&rt, "p").unwrap();
    let df = inner.declare(&rt, "p", &dm).unwrap();
    let names: Vec<&str> = df.subsets.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["p/iface", "p/iface#2"]);
    assert_eq!(df.subsets[1].indices(), &[2]);
}

#[test]
fn mismatched_interior_facets_are_refused_when_declared() {
    let m = unit_square(2, 2).unwrap();
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let dm = m.declare(&rt, "").unwrap();
    let mut inner = m.interior_facets().unwrap();
    inner.vertices.pop();
    let err = inner.declare(&rt, "", &dm).unwrap_err().to_string();
    assert!(err.contains("interior_facets"), "{err}");
}

/// A cube's interior facets on a square's declared mesh were declared as
/// they came, their numbers being in range: refused, naming the shapes.
#[test]
fn interior_facets_of_another_dimension_are_refused() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let square = unit_square(2, 2).unwrap().declare(&rt, "sq").unwrap();
    let cube_facets = unit_cube(1, 1, 1).unwrap().interior_facets().unwrap();
    let Err(e) = cube_facets.declare(&rt, "cube", &square) else { panic!("a cube's facets on a square were declared") };
    assert!(e.to_string().contains("3-D") && e.to_string().contains("3 vertices"), "{e}");
}
