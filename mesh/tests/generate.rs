//! The generators against what a simplicial mesh of the unit square or
//! cube must be: counts, orientation, measure, conformity, boundary facets
//! equal to the faces with one cell, and the groups by coordinates.

use std::collections::HashMap;

use parloop::{Backend, Error, Runtime};
use parloop_mesh::{unit_cube, unit_square, EntityKind, Mesh};

/// Signed measure of cell `c`: the triangle's area, the tetrahedron's volume.
fn signed_measure(m: &Mesh, c: usize) -> f64 {
    let d = m.dim;
    let v = &m.cells[c * (d + 1)..(c + 1) * (d + 1)];
    let x = |k: usize| &m.coords[v[k] as usize * d..v[k] as usize * d + d];
    let e = |k: usize| -> Vec<f64> { (0..d).map(|a| x(k)[a] - x(0)[a]).collect() };
    if d == 2 {
        let (a, b) = (e(1), e(2));
        0.5 * (a[0] * b[1] - a[1] * b[0])
    } else {
        let (a, b, c) = (e(1), e(2), e(3));
        (a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0]) + a[2] * (b[0] * c[1] - b[1] * c[0]))
            / 6.0
    }
}

/// Every face of every cell (sorted vertices) with the cells that have it.
fn faces(m: &Mesh) -> HashMap<Vec<u32>, Vec<usize>> {
    let d = m.dim;
    let mut all: HashMap<Vec<u32>, Vec<usize>> = HashMap::new();
    for (c, cell) in m.cells.chunks(d + 1).enumerate() {
        for skip in 0..=d {
            let mut f: Vec<u32> = cell.iter().enumerate().filter(|&(k, _)| k != skip).map(|(_, &v)| v).collect();
            f.sort_unstable();
            all.entry(f).or_default().push(c);
        }
    }
    all
}

fn check_mesh(m: &Mesh, cells_per_box: usize, divisions: &[usize]) {
    let d = m.dim;
    let boxes: usize = divisions.iter().product();
    let vertices: usize = divisions.iter().map(|n| n + 1).product();
    let facets: usize = if d == 2 {
        2 * (divisions[0] + divisions[1])
    } else {
        let [x, y, z] = [divisions[0], divisions[1], divisions[2]];
        4 * (x * y + y * z + z * x)
    };
    assert_eq!(m.vertices(), vertices);
    assert_eq!(m.num_cells(), cells_per_box * boxes);
    assert_eq!(m.num_facets(), facets);
    assert_eq!(m.facet_cells.len(), facets);
    m.check().unwrap();

    // Orientation and total measure: every cell positive, the same size.
    let expected = 1.0 / (cells_per_box * boxes) as f64;
    let mut total = 0.0;
    for c in 0..m.num_cells() {
        let s = signed_measure(m, c);
        assert!((s - expected).abs() < 1e-12 * expected, "cell {c}: measure {s}, expected {expected}");
        total += s;
    }
    assert!((total - 1.0).abs() < 1e-12, "total measure {total}");

    // Conformity: each face in one or two cells; the faces in one cell are
    // exactly the boundary facets, each once, each with its cell.
    let all = faces(m);
    assert!(all.values().all(|cells| cells.len() <= 2), "a face shared by more than two cells");
    let mut boundary: Vec<Vec<u32>> = all.iter().filter(|(_, c)| c.len() == 1).map(|(f, _)| f.clone()).collect();
    boundary.sort();
    let mut given: Vec<Vec<u32>> = m
        .facets
        .chunks(d)
        .map(|f| {
            let mut f = f.to_vec();
            f.sort_unstable();
            f
        })
        .collect();
    given.sort();
    let before = given.len();
    given.dedup();
    assert_eq!(given.len(), before, "a boundary facet listed twice");
    assert_eq!(given, boundary, "boundary facets differ from the faces with one cell");
    // Interior faces: Euler-style count of each face once per side.
    let interior = all.values().filter(|c| c.len() == 2).count();
    assert_eq!(2 * interior + facets, (d + 1) * m.num_cells());
    for (k, f) in m.facets.chunks(d).enumerate() {
        let mut key = f.to_vec();
        key.sort_unstable();
        assert_eq!(all[&key], vec![m.facet_cells[k] as usize], "facet {k}: its cell");
        // Outward orientation: the cell's other vertex is on the inner side.
        let cell = &m.cells[m.facet_cells[k] as usize * (d + 1)..][..d + 1];
        let other = *cell.iter().find(|v| !f.contains(v)).unwrap() as usize;
        let x = |v: u32| &m.coords[v as usize * d..v as usize * d + d];
        let o = &m.coords[other * d..other * d + d];
        let side = if d == 2 {
            let (a, b) = (x(f[0]), x(f[1]));
            (b[0] - a[0]) * (o[1] - a[1]) - (b[1] - a[1]) * (o[0] - a[0])
        } else {
            let (a, b, c) = (x(f[0]), x(f[1]), x(f[2]));
            let u: Vec<f64> = (0..3).map(|i| b[i] - a[i]).collect();
            let v: Vec<f64> = (0..3).map(|i| c[i] - a[i]).collect();
            let n = [u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]];
            -(0..3).map(|i| n[i] * (o[i] - a[i])).sum::<f64>()
        };
        // 2-D: the cell lies left of the segment; 3-D: behind the normal.
        assert!(side > 0.0, "facet {k} is not oriented outwards");
    }

    // Groups by coordinates: each side's facets and vertices lie on it,
    // and all of them are there.
    let sides: &[(&str, usize, f64)] = &[
        ("left", 0, 0.0),
        ("right", 0, 1.0),
        ("bottom", 1, 0.0),
        ("top", 1, 1.0),
        ("front", 2, 0.0),
        ("back", 2, 1.0),
    ];
    let on = |v: usize, axis: usize, at: f64| m.coords[v * d + axis] == at;
    let mut union = Vec::new();
    for &(name, axis, at) in &sides[..2 * d] {
        let verts: Vec<u32> = (0..m.vertices()).filter(|&v| on(v, axis, at)).map(|v| v as u32).collect();
        assert_eq!(m.vertex_group(name).unwrap().entities, verts, "vertex group {name}");
        union.extend(verts);
        let fs: Vec<u32> = (0..facets)
            .filter(|&f| m.facets[f * d..f * d + d].iter().all(|&v| on(v as usize, axis, at)))
            .map(|f| f as u32)
            .collect();
        assert_eq!(m.facet_group(name).unwrap().entities, fs, "facet group {name}");
        assert!(!fs.is_empty());
    }
    union.sort_unstable();
    union.dedup();
    assert_eq!(m.vertex_group("boundary").unwrap().entities, union);
    assert_eq!(m.groups.iter().filter(|g| g.kind == EntityKind::Facet).count(), 2 * d);
    let facet_total: usize = m.groups.iter().filter(|g| g.kind == EntityKind::Facet).map(|g| g.entities.len()).sum();
    assert_eq!(facet_total, facets, "every facet in exactly one side");
}

#[test]
fn unit_square_is_a_conforming_positive_triangulation() {
    for (nx, ny) in [(1, 1), (3, 2), (2, 5), (7, 7)] {
        check_mesh(&unit_square(nx, ny).unwrap(), 2, &[nx, ny]);
    }
}

#[test]
fn unit_square_uses_firedrakes_diagonal() {
    // Firedrake's UnitSquareMesh (diagonal="left"): the diagonal of each
    // square goes from its top-left to its bottom-right corner.
    let m = unit_square(3, 2).unwrap();
    let faces = faces(&m);
    for j in 0..2u32 {
        for i in 0..3u32 {
            let v = |i: u32, j: u32| j * 4 + i;
            let mut left = vec![v(i, j + 1), v(i + 1, j)];
            left.sort_unstable();
            let mut right = vec![v(i, j), v(i + 1, j + 1)];
            right.sort_unstable();
            let edge_in = |e: &Vec<u32>| m.cells.chunks(3).any(|c| c.contains(&e[0]) && c.contains(&e[1]));
            assert!(edge_in(&left) && !edge_in(&right), "square ({i}, {j})");
        }
    }
    assert!(!faces.is_empty());
}

#[test]
fn unit_cube_is_a_conforming_positive_tetrahedralisation() {
    for (nx, ny, nz) in [(1, 1, 1), (2, 3, 4), (4, 1, 2), (3, 3, 3)] {
        check_mesh(&unit_cube(nx, ny, nz).unwrap(), 6, &[nx, ny, nz]);
    }
}

#[test]
fn unit_cube_tetrahedra_share_the_main_diagonal() {
    // Kuhn: the six tetrahedra of every cube contain its 000-111 diagonal.
    let m = unit_cube(2, 2, 2).unwrap();
    for (cube, tets) in m.cells.chunks(24).enumerate() {
        let base = tets[0];
        let far = base + 1 + 3 + 9;
        for t in tets.chunks(4) {
            assert!(t.contains(&base) && t.contains(&far), "cube {cube}: {t:?}");
        }
    }
}

#[test]
fn bad_sizes_are_errors() {
    for e in [unit_square(0, 3).unwrap_err(), unit_cube(2, 0, 2).unwrap_err()] {
        assert!(matches!(e, Error::InvalidDeclaration { .. }), "{e}");
        assert!(e.to_string().contains("0 divisions"), "{e}");
    }
    for e in [
        unit_square(usize::MAX, 2).unwrap_err(),
        unit_square(1 << 20, 1 << 20).unwrap_err(),
        unit_cube(2000, 2000, 2000).unwrap_err(),
        unit_cube(usize::MAX / 2, 3, 3).unwrap_err(),
    ] {
        assert!(matches!(e, Error::SizeOverflow { .. }), "{e}");
    }
}

#[test]
fn declared_mesh_matches_the_plain_data() {
    let rt = Runtime::with_backend(Backend::Seq).unwrap();
    let mesh = unit_cube(2, 1, 3).unwrap();
    let d = mesh.declare(&rt, "box").unwrap();
    assert_eq!(d.vertices.size(), mesh.vertices());
    assert_eq!(d.cells.size(), mesh.num_cells());
    assert_eq!(d.facets.size(), mesh.num_facets());
    assert_eq!(d.cell_vertices.arity(), 4);
    assert_eq!(d.facet_vertices.arity(), 3);
    let as_i32 = |v: &[u32]| v.iter().map(|&x| x as i32).collect::<Vec<_>>();
    assert_eq!(d.cell_vertices.values(), as_i32(&mesh.cells));
    assert_eq!(d.facet_vertices.values(), as_i32(&mesh.facets));
    assert_eq!(d.facet_cells.values(), as_i32(&mesh.facet_cells));
    assert_eq!(d.coords.values().unwrap(), mesh.coords);
    assert_eq!(d.coords.name(), "box_coords");
    assert_eq!(d.group_of("top.vertices", EntityKind::Vertex), mesh.vertex_group("top"));
    assert_eq!(mesh.group("top").unwrap().kind, EntityKind::Facet);
    // One subset per group, of the group's set and entities.
    assert_eq!(d.subsets.len(), mesh.groups.len());
    for (g, s) in mesh.groups.iter().zip(&d.subsets) {
        let parent = match g.kind {
            EntityKind::Vertex => &d.vertices,
            EntityKind::Cell => &d.cells,
            EntityKind::Facet => &d.facets,
            EntityKind::InteriorFacet => panic!("a generator made an interior facet group"),
        };
        assert_eq!(s.parent().name(), parent.name(), "subset {}", g.name);
        assert_eq!(s.name(), format!("box/{}", g.name));
        assert_eq!(s.indices(), as_i32(&g.entities));
    }
    assert_eq!(d.subset_of("back", EntityKind::Facet).unwrap().size(), 2 * 2); // 2 x 2 cube faces, one layer
                                                                               // Two groups of one name (a Gmsh physical curve and surface, say) get
                                                                               // their kinds in their subsets' names.
    let mut shared = mesh.clone();
    shared.groups.push(parloop_mesh::Group { name: "left".into(), kind: EntityKind::Cell, entities: vec![0, 5] });
    let s = shared.declare(&rt, "twice").unwrap();
    assert_eq!(s.subset_of("left", EntityKind::Facet).unwrap().name(), "twice/left(facet)");
    assert_eq!(s.subset_of("left", EntityKind::Cell).unwrap().name(), "twice/left(cell)");
    assert_eq!(s.subset_of("left", EntityKind::Cell).unwrap().indices(), &[0, 5]);
    // Group names that are also the mesh's own parts, or a solver's names
    // beside them, and two groups of one kind and name (two physical tags
    // of one name) declare too.
    let mut clash = mesh.clone();
    for (name, kind) in
        [("vertices", EntityKind::Vertex), ("cells", EntityKind::Cell), ("dirichlet", EntityKind::Vertex)]
    {
        clash.groups.push(parloop_mesh::Group { name: name.into(), kind, entities: vec![1] });
    }
    clash.groups.push(parloop_mesh::Group { name: "dirichlet".into(), kind: EntityKind::Vertex, entities: vec![2] });
    let c = clash.declare(&rt, "clash").unwrap();
    let _solver_own = rt.subset("clash_dirichlet", &c.vertices, vec![0]).unwrap();
    let named: Vec<&str> = c.subsets.iter().rev().take(4).map(|s| s.name()).collect();
    assert_eq!(named, ["clash/dirichlet#2", "clash/dirichlet", "clash/cells", "clash/vertices"]);
    assert_eq!(c.subsets.last().unwrap().indices(), &[2]);
    // Many groups declare in time linear in their number (a file may hold
    // one physical group per point element).
    let mut many = parloop_mesh::unit_square(1, 1).unwrap();
    many.groups = (0..20_000)
        .map(|k| parloop_mesh::Group { name: format!("g{k}"), kind: EntityKind::Vertex, entities: vec![k % 4] })
        .collect();
    let m = many.declare(&rt, "many").unwrap();
    assert_eq!(m.subsets.len(), 20_000);
    // The same names twice in one runtime are refused.
    assert!(matches!(mesh.declare(&rt, "box"), Err(Error::DuplicateName { .. })));
    // A damaged mesh is refused before anything is declared.
    let mut bad = mesh.clone();
    bad.facet_cells[3] = 1000;
    let e = bad.declare(&rt, "bad").unwrap_err();
    assert!(e.to_string().contains("facet_cells[3] = 1000"), "{e}");
    bad = mesh.clone();
    bad.coords.pop();
    assert!(matches!(bad.declare(&rt, "bad").unwrap_err(), Error::WrongLength { .. }));
}

#[test]
fn large_cube_is_built() {
    // Counts and a few spot checks at a size where the parallel chunks
    // matter; the time is measured in docs/PERFORMANCE.md, not here.
    let n = 40;
    let m = unit_cube(n, n, n).unwrap();
    assert_eq!(m.num_cells(), 6 * n * n * n);
    let total: f64 = (0..m.num_cells()).step_by(997).map(|c| signed_measure(&m, c)).sum();
    let count = (0..m.num_cells()).step_by(997).count();
    assert!((total - count as f64 / (6 * n * n * n) as f64).abs() < 1e-12);
}

#[path = "../../runtime/tests/support/child.rs"]
mod child;

#[test]
fn a_long_thin_square_under_a_memory_cap_is_an_error_not_an_abort() {
    // 24 million squares in one row under a 2 GiB address-space cap: the
    // coordinates and cells (1.3 GB) fit, the boundary (48 million
    // segments, as many as triangles) does not. Its vectors were allocated
    // infallibly: the process aborted.
    let name = "a_long_thin_square_under_a_memory_cap_is_an_error_not_an_abort";
    child::in_child(name, "thin", &[], std::time::Duration::from_secs(120), || {
        let cap = libc::rlimit { rlim_cur: 2 << 30, rlim_max: 2 << 30 };
        // SAFETY: plain system call on a valid struct.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &cap) }, 0);
        let err = parloop_mesh::unit_square(24_000_000, 1).unwrap_err();
        assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
        assert!(err.to_string().contains("unit_square(24000000, 1)"), "{err}");
    });
}

#[test]
fn counts_of_a_hand_built_mesh_with_a_bad_dim_never_panic() {
    let mut mesh = unit_square(2, 2).unwrap();
    for dim in [0, usize::MAX] {
        mesh.dim = dim;
        let _ = (mesh.vertices(), mesh.num_cells(), mesh.num_facets());
        assert!(mesh.check().is_err(), "dim {dim}");
        let rt = Runtime::with_backend(Backend::Seq).unwrap();
        assert!(mesh.declare(&rt, "bad").is_err(), "dim {dim}");
    }
}
