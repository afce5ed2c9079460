//! The committed Gmsh meshes (mesh/data/, made by generate.sh from the
//! .geo files): every variant of a geometry reads to the same mesh, and
//! the mesh measures what the exact geometry says.

use std::collections::HashMap;
use std::path::PathBuf;

use parloop_mesh::gmsh;
use parloop_mesh::{EntityKind, Mesh};

const VARIANTS: [&str; 4] = ["22-ascii", "22-bin", "41-ascii", "41-bin"];

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data").join(name)
}

fn read_all(geometry: &str) -> Vec<(String, Mesh)> {
    VARIANTS
        .iter()
        .map(|v| {
            let file = format!("{geometry}-{v}.msh");
            let mesh = gmsh::read(path(&file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            (file, mesh)
        })
        .collect()
}

fn point(m: &Mesh, v: u32) -> [f64; 3] {
    let mut p = [0.0; 3];
    p[..m.dim].copy_from_slice(&m.coords[v as usize * m.dim..][..m.dim]);
    p
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
}

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn norm(a: [f64; 3]) -> f64 {
    dot(a, a).sqrt()
}

/// Signed area (2-D) or volume (3-D) of each cell.
fn cell_measures(m: &Mesh) -> Vec<f64> {
    m.cells
        .chunks_exact(m.dim + 1)
        .map(|c| {
            let p: Vec<[f64; 3]> = c.iter().map(|&v| point(m, v)).collect();
            if m.dim == 2 {
                cross(sub(p[1], p[0]), sub(p[2], p[0]))[2] / 2.0
            } else {
                dot(cross(sub(p[1], p[0]), sub(p[2], p[0])), sub(p[3], p[0])) / 6.0
            }
        })
        .collect()
}

/// Length (2-D) or area (3-D) of facet `f`.
fn facet_measure(m: &Mesh, f: usize) -> f64 {
    let v = &m.facets[f * m.dim..][..m.dim];
    let p: Vec<[f64; 3]> = v.iter().map(|&v| point(m, v)).collect();
    if m.dim == 2 {
        norm(sub(p[1], p[0]))
    } else {
        norm(cross(sub(p[1], p[0]), sub(p[2], p[0]))) / 2.0
    }
}

fn group_measure(m: &Mesh, name: &str) -> f64 {
    let g = m.group(name).unwrap_or_else(|| panic!("no group {name}"));
    assert_eq!(g.kind, EntityKind::Facet);
    g.entities.iter().map(|&f| facet_measure(m, f as usize)).sum()
}

/// The faces that bound exactly one cell, counted by brute force over all
/// cells' faces (independent of the reader's own face table).
fn faces_with_one_cell(m: &Mesh) -> Vec<(Vec<u32>, u32)> {
    let nv = m.dim + 1;
    let mut count: HashMap<Vec<u32>, (usize, u32)> = HashMap::new();
    for (c, cell) in m.cells.chunks_exact(nv).enumerate() {
        for skip in 0..nv {
            let mut f: Vec<u32> = (0..nv).filter(|&k| k != skip).map(|k| cell[k]).collect();
            f.sort_unstable();
            count.entry(f).or_insert((0, c as u32)).0 += 1;
        }
    }
    let mut out: Vec<(Vec<u32>, u32)> =
        count.into_iter().filter(|(_, (n, _))| *n == 1).map(|(f, (_, c))| (f, c)).collect();
    out.sort();
    out
}

/// Checks that hold for any mesh the reader returns.
fn check_invariants(file: &str, m: &Mesh) {
    let nv = m.dim + 1;
    assert_eq!(m.cells.len() % nv, 0, "{file}");
    assert!(m.cells.iter().all(|&v| (v as usize) < m.vertices()), "{file}: cell vertex out of range");
    // Every vertex is used by a cell (unused nodes are dropped).
    let mut used = vec![false; m.vertices()];
    for &v in &m.cells {
        used[v as usize] = true;
    }
    assert!(used.iter().all(|&u| u), "{file}: a vertex no cell uses");
    // Positive orientation.
    assert!(cell_measures(m).iter().all(|&a| a > 0.0), "{file}: a cell is not positively oriented");
    // Facets are exactly the faces with one cell, each with its cell.
    let mut got: Vec<(Vec<u32>, u32)> = m
        .facets
        .chunks_exact(m.dim)
        .zip(&m.facet_cells)
        .map(|(f, &c)| {
            let mut f = f.to_vec();
            f.sort_unstable();
            (f, c)
        })
        .collect();
    got.sort();
    assert_eq!(got, faces_with_one_cell(m), "{file}: facets are not the faces with one cell");
    // Facets point outward: away from their cell's remaining vertex.
    for (f, &c) in m.facets.chunks_exact(m.dim).zip(&m.facet_cells) {
        let cell = &m.cells[c as usize * nv..][..nv];
        let other = *cell.iter().find(|v| !f.contains(v)).unwrap();
        let p: Vec<[f64; 3]> = f.iter().map(|&v| point(m, v)).collect();
        let normal = if m.dim == 2 {
            let t = sub(p[1], p[0]);
            [t[1], -t[0], 0.0]
        } else {
            cross(sub(p[1], p[0]), sub(p[2], p[0]))
        };
        assert!(dot(normal, sub(p[0], point(m, other))) > 0.0, "{file}: a facet points inward");
    }
    // Groups: sorted, unique, in range; each facet group has its vertex group.
    for g in &m.groups {
        assert!(g.entities.windows(2).all(|w| w[0] < w[1]), "{file}: group {} not sorted", g.name);
        let n = match g.kind {
            EntityKind::Vertex => m.vertices(),
            EntityKind::Cell => m.num_cells(),
            EntityKind::Facet => m.num_facets(),
            EntityKind::InteriorFacet => m.interior_facets().map_or(0, |f| f.len()),
        };
        assert!(g.entities.iter().all(|&e| (e as usize) < n), "{file}: group {} out of range", g.name);
        if g.kind == EntityKind::Facet {
            let vg = m.group(&format!("{}{}", g.name, gmsh::VERTICES_SUFFIX)).expect("vertex group");
            let mut want: Vec<u32> =
                g.entities.iter().flat_map(|&f| m.facets[f as usize * m.dim..][..m.dim].to_vec()).collect();
            want.sort_unstable();
            want.dedup();
            assert_eq!(vg.entities, want, "{file}: {} vertices", g.name);
        }
    }
}

/// The sorted coordinates, rounded to 1e-12 (ASCII files print 17
/// significant digits, so text and binary agree to the last bits at most).
fn sorted_points(m: &Mesh) -> Vec<Vec<i64>> {
    let mut p: Vec<Vec<i64>> =
        m.coords.chunks_exact(m.dim).map(|x| x.iter().map(|v| (v * 1e12).round() as i64).collect()).collect();
    p.sort();
    p
}

/// All variants agree: the same points, cells, facets and group sizes; the
/// same total measure and boundary measure.
fn check_variants_agree(meshes: &[(String, Mesh)]) {
    let (f0, m0) = &meshes[0];
    let area0: f64 = cell_measures(m0).iter().sum();
    for (file, m) in meshes {
        check_invariants(file, m);
        assert_eq!(m.dim, m0.dim, "{file} vs {f0}");
        assert_eq!(m.vertices(), m0.vertices(), "{file} vs {f0}");
        assert_eq!(m.num_cells(), m0.num_cells(), "{file} vs {f0}");
        assert_eq!(m.num_facets(), m0.num_facets(), "{file} vs {f0}");
        assert_eq!(sorted_points(m), sorted_points(m0), "{file} vs {f0}");
        let area: f64 = cell_measures(m).iter().sum();
        assert!((area - area0).abs() <= 1e-12 * area0, "{file}: {area} vs {area0}");
        let names: Vec<(&str, usize)> = m.groups.iter().map(|g| (g.name.as_str(), g.entities.len())).collect();
        let names0: Vec<(&str, usize)> = m0.groups.iter().map(|g| (g.name.as_str(), g.entities.len())).collect();
        assert_eq!(names, names0, "{file} vs {f0}");
    }
}

#[test]
fn disk_variants_agree_and_measure_the_disk() {
    let meshes = read_all("disk");
    check_variants_agree(&meshes);
    for (file, m) in &meshes {
        assert_eq!(m.dim, 2, "{file}");
        assert!((100..5000).contains(&m.num_cells()), "{file}: {} cells", m.num_cells());
        // Boundary vertices lie on the unit circle.
        let b = m.group("upper.vertices").unwrap().entities.iter().chain(&m.group("lower.vertices").unwrap().entities);
        for &v in b {
            assert!((norm(point(m, v)) - 1.0).abs() < 1e-12, "{file}: vertex {v} off the circle");
        }
        // The mesh is the inscribed polygon: its area is pi less the circular
        // segments cut off by each boundary chord, (theta - sin theta) / 2.
        let mut cut = 0.0;
        let mut turn = 0.0;
        for f in 0..m.num_facets() {
            let theta = 2.0 * (facet_measure(m, f) / 2.0).asin();
            cut += (theta - theta.sin()) / 2.0;
            turn += theta;
        }
        let area: f64 = cell_measures(m).iter().sum();
        assert!((area - (std::f64::consts::PI - cut)).abs() < 1e-12, "{file}: area {area}, cut {cut}");
        // The boundary goes around the circle once.
        assert!((turn - 2.0 * std::f64::consts::PI).abs() < 1e-10, "{file}: boundary angle {turn}");
        // The approximation error is O(h^2) for h = 0.2: small but not zero.
        assert!(cut > 0.0 && cut < 0.05, "{file}: area error {cut}");
        // Two halves of the boundary, one cell group holding every cell.
        let (u, l) = (group_measure(m, "upper"), group_measure(m, "lower"));
        assert!((u - l).abs() < 0.05 && (u + l - 2.0 * std::f64::consts::PI).abs() < 0.02, "{file}: {u} {l}");
        assert_eq!(m.group("disk").unwrap().entities.len(), m.num_cells(), "{file}");
        assert_eq!(m.group("disk").unwrap().kind, EntityKind::Cell);
    }
}

#[test]
fn lshape_variants_agree_and_measure_the_l() {
    let meshes = read_all("lshape");
    check_variants_agree(&meshes);
    for (file, m) in &meshes {
        assert_eq!(m.dim, 2, "{file}");
        assert!((100..5000).contains(&m.num_cells()), "{file}: {} cells", m.num_cells());
        let area: f64 = cell_measures(m).iter().sum();
        assert!((area - 3.0).abs() < 1e-12, "{file}: area {area}");
        let total: f64 = (0..m.num_facets()).map(|f| facet_measure(m, f)).sum();
        assert!((total - 8.0).abs() < 1e-12, "{file}: perimeter {total}");
        assert!((group_measure(m, "inlet") - 2.0).abs() < 1e-12, "{file}");
        assert!((group_measure(m, "walls") - 6.0).abs() < 1e-12, "{file}");
        // The inlet is x = 0 and nothing else.
        let inlet = &m.group("inlet.vertices").unwrap().entities;
        let on_x0 = (0..m.vertices() as u32).filter(|&v| point(m, v)[0] == 0.0).count();
        assert_eq!(inlet.len(), on_x0, "{file}");
        assert!(inlet.iter().all(|&v| point(m, v)[0] == 0.0), "{file}");
        // Facet groups partition the boundary.
        assert_eq!(
            m.group("inlet").unwrap().entities.len() + m.group("walls").unwrap().entities.len(),
            m.num_facets(),
            "{file}"
        );
        // No point inside the cut-out square (1, 2]^2.
        assert!((0..m.vertices() as u32).all(|v| {
            let p = point(m, v);
            !(p[0] > 1.0 + 1e-12 && p[1] > 1.0 + 1e-12)
        }));
    }
}

#[test]
fn cube_with_hole_variants_agree_and_measure_the_solid() {
    let meshes = read_all("cube_hole");
    check_variants_agree(&meshes);
    for (file, m) in &meshes {
        assert_eq!(m.dim, 3, "{file}");
        assert!((300..5000).contains(&m.num_cells()), "{file}: {} cells", m.num_cells());
        let volume: f64 = cell_measures(m).iter().sum();
        assert!((volume - 0.91).abs() < 1e-12, "{file}: volume {volume}");
        let total: f64 = (0..m.num_facets()).map(|f| facet_measure(m, f)).sum();
        assert!((total - 7.02).abs() < 1e-12, "{file}: boundary area {total}");
        assert!((group_measure(m, "hole") - 1.2).abs() < 1e-12, "{file}");
        assert!((group_measure(m, "outer") - 5.82).abs() < 1e-12, "{file}");
        assert_eq!(m.group("solid").unwrap().entities.len(), m.num_cells(), "{file}");
        // The hole's vertices lie on its four walls.
        for &v in &m.group("hole.vertices").unwrap().entities {
            let p = point(m, v);
            let on = |x: f64| (x - 0.35).abs() < 1e-12 || (x - 0.65).abs() < 1e-12;
            assert!(on(p[0]) || on(p[1]), "{file}: hole vertex {p:?}");
        }
    }
}

#[test]
fn variants_of_one_run_are_identical_up_to_rounding() {
    // Gmsh meshes each variant from the same .geo deterministically and
    // tags nodes alike, so the reader's numbering (by node tag) makes the
    // meshes equal, not just alike; coordinates agree to rounding.
    for geometry in ["disk", "lshape", "cube_hole", "two_materials"] {
        let meshes = read_all(geometry);
        let (_, m0) = &meshes[0];
        for (file, m) in &meshes[1..] {
            assert_eq!(m.cells, m0.cells, "{file}");
            assert_eq!(m.facets, m0.facets, "{file}");
            assert_eq!(m.facet_cells, m0.facet_cells, "{file}");
            assert_eq!(m.groups, m0.groups, "{file}");
            let dmax = m.coords.iter().zip(&m0.coords).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            assert!(dmax < 1e-14, "{file}: coordinates differ by {dmax}");
        }
    }
}

/// Partitioned 4.1 files (`gmsh -part 3`, one with ghost cells) were
/// refused; they are the whole mesh, as the unpartitioned files: the same
/// points, cells, facets and groups (the lines and points Gmsh adds on
/// partition boundaries carry the physical tags of the surface or volume
/// they cut, and are in no group).
#[test]
fn partitioned_files_read_as_the_whole_mesh() {
    for (geometry, file) in
        [("two_materials", "two_materials-41-part3-ascii.msh"), ("cube_hole", "cube_hole-41-part3-ghosts-bin.msh")]
    {
        let whole = gmsh::read(path(&format!("{geometry}-41-ascii.msh"))).unwrap();
        let parts = gmsh::read(path(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        check_variants_agree(&[(format!("{geometry}-41-ascii.msh"), whole.clone()), (file.to_string(), parts.clone())]);
        assert_eq!(whole.interior_facets().unwrap().groups.len(), parts.interior_facets().unwrap().groups.len());
    }
    // One file of a split partitioned mesh is a part, not the mesh.
    let err = gmsh::read(path("two_materials-41-part3-split_2.msh")).unwrap_err().to_string();
    assert!(err.contains("1 of the 3 partitions") && err.contains("PartitionSplitMeshFiles"), "{err}");
}

/// Length of an interior facet (a segment), added to a global.
#[parloop::kernel]
fn segment_length(x: &[[f64; 2]; 2], total: &mut f64) {
    let (dx, dy) = (x[1][0] - x[0][0], x[1][1] - x[0][1]);
    *total += (dx * dx + dy * dy).sqrt();
}

/// Two materials with their interface as a physical curve inside the
/// domain: the interface is an interior facet group along x = 0.5, each
/// of its facets between a cell of "left" and one of "right", of total
/// length 1, and a loop over its declared subset measures that length.
#[test]
fn two_materials_have_their_interface_as_interior_facets() {
    let meshes = read_all("two_materials");
    check_variants_agree(&meshes);
    for (file, m) in &meshes {
        assert_eq!(m.dim, 2, "{file}");
        let area = |name: &str| -> f64 {
            let g = m.group_of(name, EntityKind::Cell).unwrap_or_else(|| panic!("{file}: no {name}"));
            let measures = cell_measures(m);
            g.entities.iter().map(|&c| measures[c as usize]).sum()
        };
        assert!((area("left") - 0.5).abs() < 1e-12 && (area("right") - 0.5).abs() < 1e-12, "{file}");
        assert!((group_measure(m, "outer") - 4.0).abs() < 1e-12, "{file}");
        let interface = m.group_of("interface", EntityKind::InteriorFacet).expect("interface");
        assert!(m.group_of("interface", EntityKind::Facet).is_none(), "{file}");
        let inner = m.interior_facets().unwrap();
        let left = &m.group("left").unwrap().entities;
        let mut length = 0.0;
        for &f in &interface.entities {
            let v = &inner.vertices[f as usize * 2..][..2];
            let (a, b) = (point(m, v[0]), point(m, v[1]));
            assert!(a[0] == 0.5 && b[0] == 0.5, "{file}: interface facet {a:?}-{b:?} off x = 0.5");
            length += norm(sub(b, a));
            let cells = &inner.cells[f as usize * 2..][..2];
            let in_left = |c: u32| left.binary_search(&c).is_ok();
            assert!(in_left(cells[0]) != in_left(cells[1]), "{file}: facet {f} not between the materials");
        }
        assert!((length - 1.0).abs() < 1e-12, "{file}: interface length {length}");
        let on_line = (0..m.vertices() as u32).filter(|&v| point(m, v)[0] == 0.5).count();
        assert_eq!(m.vertex_group("interface").unwrap().entities.len(), on_line, "{file}");
        // Through parloop: a loop over the interface's subset.
        for backend in [parloop::Backend::Seq, parloop::Backend::Threads, parloop::Backend::Emu] {
            let rt = parloop::Runtime::with_backend(backend).unwrap();
            let dm = m.declare(&rt, "mat").unwrap();
            let df = inner.declare(&rt, "mat", &dm).unwrap();
            let total = rt.global("length", &[0.0f64]).unwrap();
            let sub = df.subset_of("interface").unwrap();
            let args = [dm.coords.arg_vec(&df.facet_vertices, parloop::Access::READ), total.arg(parloop::Access::INC)];
            rt.par_loop(segment_length::KERNEL, sub, &args).unwrap();
            let got = total.value().unwrap();
            assert!((got - 1.0).abs() < 1e-12, "{file} {backend:?}: {got}");
        }
    }
}

/// Why `file` is refused: (line, reason) for an ASCII file, (byte
/// offset, reason) for a binary one. A file read is a failure naming what
/// it was read as (its groups and their sizes).
fn refusal(file: &str) -> (usize, String) {
    match gmsh::read(path(file)) {
        Err(parloop::Error::Input { source_name, line, reason }) => {
            assert!(source_name.ends_with(file), "{source_name}");
            assert!(!file.contains("-bin"), "{file}: a binary file's error names a line");
            (line, reason)
        }
        Err(parloop::Error::InputAtByte { source_name, offset, reason }) => {
            assert!(source_name.ends_with(file), "{source_name}");
            assert!(file.contains("-bin"), "{file}: an ASCII file's error names a byte offset");
            (offset, reason)
        }
        Err(e) => panic!("{file}: {e}"),
        Ok(m) => panic!(
            "{file}: read as a {}-D mesh of {} cells, groups {:?}",
            m.dim,
            m.num_cells(),
            m.groups.iter().map(|g| (g.name.as_str(), g.kind, g.entities.len())).collect::<Vec<_>>()
        ),
    }
}

/// Where the first line of `file` that starts with `prefix` starts: its
/// 1-based line for an ASCII file, its byte offset for a binary one.
fn position_of(file: &str, prefix: &str) -> usize {
    let data = std::fs::read(path(file)).unwrap();
    let mut offset = 0;
    for (i, line) in data.split(|&b| b == b'\n').enumerate() {
        if line.starts_with(prefix.as_bytes()) {
            return if file.contains("-bin") { offset } else { i + 1 };
        }
        offset += line.len() + 1;
    }
    panic!("{file}: no line starts with {prefix}")
}

/// `Mesh.SaveAll = 1` in format 2.2: Gmsh lists `$PhysicalNames` but
/// gives every element physical tag 0. The groups were read empty, with
/// no error; now the file is refused at the first name's line, saying
/// why. The same model in 4.1 has its groups.
#[test]
fn saveall_2_2_files_are_refused_rather_than_read_with_empty_groups() {
    for b in ["ascii", "bin"] {
        let file = format!("square_saveall-22-{b}.msh");
        let (at, reason) = refusal(&file);
        assert_eq!(at, position_of(&file, "1 2 \"boundary_all\""), "{file}: {reason}");
        assert!(
            reason.contains("`boundary_all`")
                && reason.contains("Mesh.SaveAll = 1")
                && reason.contains("-format msh41"),
            "{file}: {reason}"
        );
    }
    for file in ["square_saveall-41-ascii.msh", "square_saveall-41-bin.msh"] {
        let m = gmsh::read(path(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(m.group("domain").unwrap().entities.len(), m.num_cells(), "{file}");
        assert!((group_measure(&m, "boundary_all") - 4.0).abs() < 1e-12, "{file}");
    }
}

/// A partitioned mesh saved in 2.2 with `Mesh.PartitionOldStyleMsh2 = 0`:
/// Gmsh moves the elements into `_part{..}_physical{..}_dim{..}` groups
/// and leaves the model's groups empty. They were read empty, with no
/// error; now the first of them is named.
#[test]
fn new_style_partitioned_2_2_files_are_refused_rather_than_read_with_empty_groups() {
    for b in ["ascii", "bin"] {
        let file = format!("square_part2_newstyle-22-{b}.msh");
        let (at, reason) = refusal(&file);
        assert_eq!(at, position_of(&file, "1 2 \"boundary_all\""), "{file}: {reason}");
        assert!(
            reason.contains("`boundary_all`") && reason.contains("PartitionOldStyleMsh2") && reason.contains("msh41"),
            "{file}: {reason}"
        );
    }
}

/// A box with a physical surface and no physical volume: Gmsh saves the
/// surface's triangles only. The bottom face (z = 0) was read as a 2-D
/// mesh, the top face refused for its z; now a 4.1 file, whose
/// `$Entities` list the volume, is refused for the missing tetrahedra,
/// and the z message of a 2.2 file says a 3-D model needs a `Physical
/// Volume`.
#[test]
fn a_volume_model_without_a_physical_volume_is_refused_saying_so() {
    for file in [
        "box_bottom_only-41-ascii.msh",
        "box_bottom_only-41-bin.msh",
        "box_surface_only-41-ascii.msh",
        "box_surface_only-41-bin.msh",
    ] {
        let (at, reason) = refusal(file);
        assert_eq!(at, position_of(file, "$Entities") + if file.contains("-bin") { 10 } else { 1 }, "{file}: {reason}");
        assert!(
            reason.contains("1 volume") && reason.contains("no tetrahedra") && reason.contains("Physical Volume"),
            "{file}: {reason}"
        );
    }
    for file in ["box_surface_only-22-ascii.msh", "box_surface_only-22-bin.msh"] {
        let (_, reason) = refusal(file);
        assert!(reason.contains("z = 0 plane") && reason.contains("Physical Volume"), "{file}: {reason}");
    }
}
