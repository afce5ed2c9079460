//! The Gmsh reader on small files written here: binary layouts (both
//! endiannesses, 4- and 8-byte size_t in 4.1) against the same mesh in
//! ASCII, orientation, numbering, groups, and the errors with their line or
//! byte offset.

use parloop::Error;
use parloop_mesh::gmsh::read_bytes;
use parloop_mesh::{EntityKind, Mesh};

/// A small 2-D mesh as Gmsh would store it: a unit square split into four
/// triangles around a centre node, node tags sparse (10, 20, ...), one
/// unused node (tag 99), one triangle clockwise, physical curve 5 "bottom"
/// (y = 0), an unnamed physical curve 6 (x = 1), physical surface 7 "sq"
/// and physical point 8 "corner".
struct Spec {
    nodes: Vec<(u64, [f64; 3])>,
    /// (type, physical tag, entity tag, node tags)
    elements: Vec<(i32, i32, i32, Vec<u64>)>,
    names: Vec<(i32, i32, &'static str)>,
}

fn square() -> Spec {
    Spec {
        nodes: vec![
            (10, [0.0, 0.0, 0.0]),
            (20, [1.0, 0.0, 0.0]),
            (30, [1.0, 1.0, 0.0]),
            (40, [0.0, 1.0, 0.0]),
            (50, [0.5, 0.5, 0.0]),
            (99, [7.0, 7.0, 0.0]),
        ],
        elements: vec![
            (15, 8, 1, vec![10]),
            (1, 5, 1, vec![10, 20]),
            (1, 6, 2, vec![20, 30]),
            (2, 7, 1, vec![10, 20, 50]),
            (2, 7, 1, vec![20, 30, 50]),
            (2, 7, 1, vec![30, 40, 50]),
            // clockwise: the reader swaps two vertices
            (2, 7, 1, vec![40, 10, 50].into_iter().rev().collect()),
        ],
        names: vec![(1, 5, "bottom"), (2, 7, "sq"), (0, 8, "corner")],
    }
}

fn dim_of(ty: i32) -> i32 {
    match ty {
        15 => 0,
        1 => 1,
        2 => 2,
        _ => 3,
    }
}

fn names_section(s: &Spec) -> String {
    let mut o = format!("$PhysicalNames\n{}\n", s.names.len());
    for (d, t, n) in &s.names {
        o += &format!("{d} {t} \"{n}\"\n");
    }
    o + "$EndPhysicalNames\n"
}

fn ascii22(s: &Spec) -> String {
    let mut o = String::from("$MeshFormat\n2.2 0 8\n$EndMeshFormat\n") + &names_section(s);
    o += &format!("$Nodes\n{}\n", s.nodes.len());
    for (t, x) in &s.nodes {
        o += &format!("{t} {} {} {}\n", x[0], x[1], x[2]);
    }
    o += &format!("$EndNodes\n$Elements\n{}\n", s.elements.len());
    for (i, (ty, p, e, n)) in s.elements.iter().enumerate() {
        let n: Vec<String> = n.iter().map(|t| t.to_string()).collect();
        o += &format!("{} {ty} 2 {p} {e} {}\n", i + 1, n.join(" "));
    }
    o + "$EndElements\n"
}

/// Binary writer for either endianness; 2.2 elements one block per element.
struct Bin {
    out: Vec<u8>,
    big: bool,
    size_t: usize,
}

impl Bin {
    fn text(&mut self, s: &str) {
        self.out.extend_from_slice(s.as_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.out.extend_from_slice(&if self.big { v.to_be_bytes() } else { v.to_le_bytes() });
    }
    fn f64(&mut self, v: f64) {
        self.out.extend_from_slice(&if self.big { v.to_be_bytes() } else { v.to_le_bytes() });
    }
    fn size(&mut self, v: u64) {
        if self.size_t == 4 {
            let v = v as u32;
            self.out.extend_from_slice(&if self.big { v.to_be_bytes() } else { v.to_le_bytes() });
        } else {
            self.out.extend_from_slice(&if self.big { v.to_be_bytes() } else { v.to_le_bytes() });
        }
    }
}

fn binary22(s: &Spec, big: bool) -> Vec<u8> {
    let mut b = Bin { out: Vec::new(), big, size_t: 8 };
    b.text("$MeshFormat\n2.2 1 8\n");
    b.i32(1);
    b.text("\n$EndMeshFormat\n");
    b.text(&names_section(s));
    b.text(&format!("$Nodes\n{}\n", s.nodes.len()));
    for (t, x) in &s.nodes {
        b.i32(*t as i32);
        for &c in x {
            b.f64(c);
        }
    }
    b.text(&format!("\n$EndNodes\n$Elements\n{}\n", s.elements.len()));
    for (i, (ty, p, e, n)) in s.elements.iter().enumerate() {
        b.i32(*ty);
        b.i32(1);
        b.i32(2);
        b.i32(i as i32 + 1);
        b.i32(*p);
        b.i32(*e);
        for &t in n {
            b.i32(t as i32);
        }
    }
    b.text("\n$EndElements\n");
    b.out
}

/// 4.1, text or binary: one entity per (dimension, entity tag) used, each
/// with its element's physical tag; all nodes in one block of entity (2, 1).
fn write41(s: &Spec, binary: Option<(bool, usize)>) -> Vec<u8> {
    let (big, size_t) = binary.unwrap_or((false, 8));
    let bin = binary.is_some();
    let mut b = Bin { out: Vec::new(), big, size_t };
    b.text(&format!("$MeshFormat\n4.1 {} {}\n", bin as i32, size_t));
    if bin {
        b.i32(1);
        b.text("\n");
    }
    b.text("$EndMeshFormat\n");
    b.text(&names_section(s));
    // entities: (dim, tag) -> physical
    let mut ents: Vec<(i32, i32, i32)> = s.elements.iter().map(|(ty, p, e, _)| (dim_of(*ty), *e, *p)).collect();
    ents.sort();
    ents.dedup();
    let count = |d: i32| ents.iter().filter(|e| e.0 == d).count() as u64;
    let (int, size, real) = (
        |b: &mut Bin, v: i32| if bin { b.i32(v) } else { b.text(&format!("{v} ")) },
        |b: &mut Bin, v: u64| if bin { b.size(v) } else { b.text(&format!("{v} ")) },
        |b: &mut Bin, v: f64| if bin { b.f64(v) } else { b.text(&format!("{v} ")) },
    );
    // Binary data has no line ends; text has one per record.
    let nl = |b: &mut Bin| {
        if !bin {
            b.text("\n")
        }
    };
    b.text("$Entities\n");
    for d in 0..4 {
        size(&mut b, count(d));
    }
    nl(&mut b);
    for &(d, t, p) in &ents {
        int(&mut b, t);
        for _ in 0..if d == 0 { 3 } else { 6 } {
            real(&mut b, 0.0);
        }
        size(&mut b, 1);
        int(&mut b, p);
        if d > 0 {
            size(&mut b, 0);
        }
        nl(&mut b);
    }
    b.text("$EndEntities\n$Nodes\n");
    let n = s.nodes.len() as u64;
    for v in [1, n, 1, 99] {
        size(&mut b, v);
    }
    nl(&mut b);
    int(&mut b, 2);
    int(&mut b, 1);
    int(&mut b, 0);
    size(&mut b, n);
    nl(&mut b);
    for (t, _) in &s.nodes {
        size(&mut b, *t);
        nl(&mut b);
    }
    for (_, x) in &s.nodes {
        for &c in x {
            real(&mut b, c);
        }
        nl(&mut b);
    }
    b.text("$EndNodes\n$Elements\n");
    let ne = s.elements.len() as u64;
    for v in [ne, ne, 1, ne] {
        size(&mut b, v);
    }
    nl(&mut b);
    for (i, (ty, _, e, nodes)) in s.elements.iter().enumerate() {
        int(&mut b, dim_of(*ty));
        int(&mut b, *e);
        int(&mut b, *ty);
        size(&mut b, 1);
        nl(&mut b);
        size(&mut b, i as u64 + 1);
        for &t in nodes {
            size(&mut b, t);
        }
        nl(&mut b);
    }
    b.text("$EndElements\n");
    b.out
}

fn check_square(m: &Mesh) {
    assert_eq!(m.dim, 2);
    // Node 99 is dropped; the rest numbered by tag: 10 -> 0, ..., 50 -> 4.
    assert_eq!(m.coords, vec![0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.5, 0.5]);
    assert_eq!(m.num_cells(), 4);
    // All counter-clockwise, the last one flipped from the file's order.
    for c in m.cells.chunks_exact(3) {
        let p = |k: usize| &m.coords[c[k] as usize * 2..][..2];
        let area = (p(1)[0] - p(0)[0]) * (p(2)[1] - p(0)[1]) - (p(1)[1] - p(0)[1]) * (p(2)[0] - p(0)[0]);
        assert!((area - 0.5).abs() < 1e-15, "cell {c:?}: twice the area {area}");
    }
    assert_eq!(&m.cells[9..], &[4, 3, 0]);
    // Four boundary edges, outward (counter-clockwise) with their cells.
    let mut f: Vec<(u32, u32, u32)> =
        m.facets.chunks_exact(2).zip(&m.facet_cells).map(|(f, &c)| (f[0], f[1], c)).collect();
    f.sort();
    assert_eq!(f, vec![(0, 1, 0), (1, 2, 1), (2, 3, 2), (3, 0, 3)]);
    let g = |n: &str| m.group(n).unwrap_or_else(|| panic!("group {n}"));
    let bottom = m.facet_cells.iter().position(|&c| c == 0).unwrap() as u32;
    assert_eq!((g("bottom").kind, g("bottom").entities.clone()), (EntityKind::Facet, vec![bottom]));
    assert_eq!(g("bottom.vertices").entities, vec![0, 1]);
    assert_eq!(g("gmsh:1:6.vertices").entities, vec![1, 2]);
    assert_eq!((g("sq").kind, g("sq").entities.clone()), (EntityKind::Cell, vec![0, 1, 2, 3]));
    assert_eq!((g("corner").kind, g("corner").entities.clone()), (EntityKind::Vertex, vec![0]));
    assert_eq!(m.groups.len(), 6);
}

#[test]
fn every_layout_reads_the_same_square() {
    let s = square();
    let ascii = read_bytes("a22.msh", ascii22(&s).as_bytes()).unwrap();
    check_square(&ascii);
    for big in [false, true] {
        assert_eq!(read_bytes("b22.msh", &binary22(&s, big)).unwrap(), ascii, "2.2 big endian {big}");
        for size_t in [4, 8] {
            let m = read_bytes("b41.msh", &write41(&s, Some((big, size_t)))).unwrap();
            assert_eq!(m, ascii, "4.1 big endian {big}, size_t {size_t}");
        }
    }
    assert_eq!(read_bytes("a41.msh", &write41(&s, None)).unwrap(), ascii);
}

/// Gmsh saves every element of a model without physical groups: points
/// (a circle's centre, which no cell uses) and interior curves, in no
/// group. They carry nothing and are passed over; in a group, a point no
/// cell uses and a segment that is no triangle's edge are errors naming
/// the group.
#[test]
fn lower_dimensional_elements_in_no_group_are_passed_over() {
    let mut s = square();
    s.elements.push((15, 0, 9, vec![99])); // a construction point
    s.elements.push((1, 0, 3, vec![20, 50])); // an interior curve
    let ascii = read_bytes("free.msh", ascii22(&s).as_bytes()).unwrap();
    check_square(&ascii);
    for big in [false, true] {
        assert_eq!(read_bytes("free.msh", &binary22(&s, big)).unwrap(), ascii, "2.2 big endian {big}");
    }
    let mut point = square();
    point.elements.push((15, 11, 9, vec![99]));
    let (_, reason) = line_of(read_bytes("bad.msh", ascii22(&point).as_bytes()).unwrap_err());
    assert!(reason.contains("group 11") && reason.contains("node 99"), "{reason}");
    let mut nowhere = square();
    nowhere.elements.push((1, 12, 3, vec![20, 40])); // the square's other diagonal: no edge
    let (_, reason) = line_of(read_bytes("bad.msh", ascii22(&nowhere).as_bytes()).unwrap_err());
    assert!(reason.contains("group 12") && reason.contains("20, 40") && reason.contains("no cell's edge"), "{reason}");
}

/// A physical curve inside the domain (an interface between materials):
/// its segments are interior facets, numbered as `Mesh::interior_facets`
/// numbers them, with its vertices' group; a curve with segments on the
/// boundary and inside gives both kinds under one name. Declared, the
/// interior group is a subset of the interior facet set that loops run
/// over. (These files were an error before: "not a boundary face".)
#[test]
fn physical_curves_inside_the_domain_are_interior_facet_groups() {
    let mut s = square();
    s.elements.push((1, 12, 3, vec![20, 50])); // interior: between cells 0 and 1
    s.elements.push((1, 12, 3, vec![50, 40])); // interior: between cells 2 and 3
    s.elements.push((1, 13, 4, vec![50, 10])); // interior
    s.elements.push((1, 13, 4, vec![30, 40])); // on the boundary (top)
    s.names.push((1, 12, "interface"));
    let ascii = read_bytes("iface.msh", ascii22(&s).as_bytes()).unwrap();
    for big in [false, true] {
        assert_eq!(read_bytes("iface.msh", &binary22(&s, big)).unwrap(), ascii, "2.2 big endian {big}");
    }
    assert_eq!(read_bytes("iface.msh", &write41(&s, None)).unwrap(), ascii, "4.1");
    let m = ascii;
    let inner = m.interior_facets().unwrap();
    // The interior facet numbered k has vertices `inner.vertices[2k..]`
    // (vertex numbers: tag 10 -> 0, 20 -> 1, 30 -> 2, 40 -> 3, 50 -> 4).
    let facet_with = |a: u32, b: u32| -> u32 {
        let k = inner.vertices.chunks_exact(2).position(|f| (f[0] == a && f[1] == b) || (f[0] == b && f[1] == a));
        k.unwrap_or_else(|| panic!("no interior facet {a}-{b}")) as u32
    };
    let mut want = vec![facet_with(1, 4), facet_with(4, 3)];
    want.sort();
    let interface = m.group_of("interface", EntityKind::InteriorFacet).unwrap();
    assert_eq!(interface.entities, want);
    assert!(m.group_of("interface", EntityKind::Facet).is_none(), "wholly inside: no boundary facet group");
    assert_eq!(m.vertex_group("interface").unwrap().entities, vec![1, 3, 4]);
    // Group 13: one boundary facet (top: 2-3) and one interior (4-0).
    let top = m.facets.chunks_exact(2).position(|f| f == [2, 3]).unwrap() as u32;
    assert_eq!(m.group_of("gmsh:1:13", EntityKind::Facet).unwrap().entities, vec![top]);
    assert_eq!(m.group_of("gmsh:1:13", EntityKind::InteriorFacet).unwrap().entities, vec![facet_with(4, 0)]);
    assert_eq!(m.vertex_group("gmsh:1:13").unwrap().entities, vec![0, 2, 3, 4]);
    assert_eq!(inner.groups.len(), 2);
    m.check().unwrap();

    // Declared: the mesh leaves interior groups to the interior facets.
    let rt = parloop::Runtime::with_backend(parloop::Backend::Seq).unwrap();
    let dm = m.declare(&rt, "two").unwrap();
    assert!(dm.groups.iter().all(|g| g.kind != EntityKind::InteriorFacet));
    assert_eq!(dm.groups.len(), dm.subsets.len());
    let df = inner.declare(&rt, "two", &dm).unwrap();
    let sub = df.subset_of("interface").unwrap();
    assert_eq!((sub.name(), sub.indices()), ("two/interface", &want.iter().map(|&f| f as i32).collect::<Vec<_>>()[..]));
    let both = df.subset_of("gmsh:1:13").unwrap();
    assert_eq!(both.name(), "two/gmsh:1:13(interior facet)");
    // The boundary part keeps the name it has without an interior part.
    assert_eq!(dm.subset_of("gmsh:1:13", EntityKind::Facet).unwrap().name(), "two/gmsh:1:13");

    // A group of interior facets past what the mesh can hold: `check`
    // names it; within that bound but past the mesh's 4, the declaration.
    let mut bad = m.clone();
    bad.groups.iter_mut().find(|g| g.kind == EntityKind::InteriorFacet).unwrap().entities.push(99);
    let err = bad.check().unwrap_err().to_string();
    assert!(err.contains("interior facet") && err.contains("99"), "{err}");
    let mut bad = m.clone();
    bad.groups.iter_mut().find(|g| g.kind == EntityKind::InteriorFacet).unwrap().entities.push(5);
    let inner = bad.interior_facets().unwrap();
    let rt = parloop::Runtime::with_backend(parloop::Backend::Seq).unwrap();
    let dm = bad.declare(&rt, "bad").unwrap();
    let err = inner.declare(&rt, "bad", &dm).unwrap_err().to_string();
    assert!(err.contains("(interior facet)") && err.contains("is 5"), "{err}");
}

#[test]
fn a_cell_repeated_for_two_physical_groups_is_kept_once_in_both() {
    let mut s = square();
    s.elements.push((2, 9, 1, vec![10, 20, 50]));
    let m = read_bytes("dup.msh", ascii22(&s).as_bytes()).unwrap();
    assert_eq!(m.num_cells(), 4);
    assert_eq!(m.group("gmsh:2:9").unwrap().entities, vec![0]);
    assert_eq!(m.group("sq").unwrap().entities, vec![0, 1, 2, 3]);
}

/// What Gmsh writes for common model options, found by a corpus of real
/// files: a byte-order mark (refused as "expected `$MeshFormat`, found
/// `$MeshFormat`"), physical groups sharing a name (refused as "two
/// groups are named", at line 1), a periodic mesh (its `$Periodic`
/// skipped: a non-periodic domain, silently), `$ParametricNodes` (skipped,
/// then "no $Nodes section" at the end), a model whose physical groups
/// hold no surface (no cause given), a stray physical point (named by its
/// tag alone).
#[test]
fn what_gmsh_writes_for_common_options_is_read_or_refused_saying_why() {
    let good = ascii22(&square());
    let plain = read_bytes("bad.msh", good.as_bytes()).unwrap();
    let bom = [&b"\xEF\xBB\xBF"[..], good.as_bytes()].concat();
    assert_eq!(read_bytes("bad.msh", &bom).unwrap(), plain);

    // A physical point and a physical curve named alike (vertices and
    // facets stay apart), and two physical curves of one name (merged).
    let mut s = square();
    s.names = vec![(1, 5, "wall"), (1, 6, "wall"), (2, 7, "sq"), (0, 8, "wall")];
    let m = read_bytes("bad.msh", ascii22(&s).as_bytes()).unwrap();
    let point = plain.group("corner").unwrap().entities.clone();
    assert_eq!(m.group_of("wall", EntityKind::Vertex).unwrap().entities, point);
    let facets = |m: &Mesh, names: &[&str]| {
        let mut f: Vec<u32> =
            names.iter().flat_map(|n| m.group_of(n, EntityKind::Facet).unwrap().entities.clone()).collect();
        f.sort_unstable();
        f
    };
    assert_eq!(facets(&m, &["wall"]), facets(&plain, &["bottom", "gmsh:1:6"]));
    assert_eq!(m.groups.iter().filter(|g| g.name == "wall").count(), 2);
    let rt = parloop::Runtime::with_backend(parloop::Backend::Seq).unwrap();
    let declared = m.declare(&rt, "p").unwrap();
    let names: Vec<&str> = declared.subsets.iter().map(|s| s.name()).collect();
    assert!(names.contains(&"p/wall(vertex)") && names.contains(&"p/wall(facet)"), "{names:?}");

    let periodic = good.clone() + "$Periodic\n0\n$EndPeriodic\n";
    let (line, reason) = line_of(read_bytes("bad.msh", periodic.as_bytes()).unwrap_err());
    assert_eq!(line, line_starting(&periodic, "$Periodic"));
    assert!(reason.contains("periodic"), "{reason}");

    let parametric = good.replace("$Nodes", "$ParametricNodes").replace("$EndNodes", "$EndParametricNodes");
    let (line, reason) = line_of(read_bytes("bad.msh", parametric.as_bytes()).unwrap_err());
    assert_eq!(line, line_starting(&parametric, "$ParametricNodes"));
    assert!(reason.contains("SaveParametric"), "{reason}");

    let mut lines_only = square();
    lines_only.elements.retain(|e| e.0 != 2);
    let (_, reason) = line_of(read_bytes("bad.msh", ascii22(&lines_only).as_bytes()).unwrap_err());
    assert!(reason.contains("Physical Surface") && reason.contains("SaveAll"), "{reason}");

    let mut stray = square();
    stray.elements.push((15, 11, 9, vec![99]));
    stray.names.push((0, 11, "probe"));
    let (_, reason) = line_of(read_bytes("bad.msh", ascii22(&stray).as_bytes()).unwrap_err());
    assert!(reason.contains("0-D group 11 (`probe`)") && reason.contains("node 99"), "{reason}");
}

fn line_of(e: Error) -> (usize, String) {
    match e {
        Error::Input { source_name, line, reason } => {
            assert_eq!(source_name, "bad.msh");
            (line, reason)
        }
        other => panic!("expected Error::Input, got {other:?}"),
    }
}

fn offset_of(e: Error) -> (usize, String) {
    match e {
        Error::InputAtByte { source_name, offset, reason } => {
            assert_eq!(source_name, "bad.msh");
            (offset, reason)
        }
        other => panic!("expected Error::InputAtByte, got {other:?}"),
    }
}

/// The 1-based line of the first line starting with `prefix`.
fn line_starting(text: &str, prefix: &str) -> usize {
    1 + text.lines().position(|l| l.starts_with(prefix)).unwrap()
}

#[test]
fn ascii_errors_name_the_line() {
    let good = ascii22(&square());
    // A missing node: the element refers to tag 77.
    let bad = good.replace("4 2 2 7 1 10 20 50", "4 2 2 7 1 10 77 50");
    let (line, reason) = line_of(read_bytes("bad.msh", bad.as_bytes()).unwrap_err());
    assert_eq!(line, line_starting(&bad, "4 2 2 7 1 10 77 50"));
    assert!(reason.contains("77"), "{reason}");
    // A malformed coordinate.
    let bad = good.replace("30 1 1 0", "30 1 x 0");
    let (line, reason) = line_of(read_bytes("bad.msh", bad.as_bytes()).unwrap_err());
    assert_eq!(line, line_starting(&bad, "30 1 x 0"));
    assert!(reason.contains("`x`"), "{reason}");
    // A huge count is reported, not allocated.
    let bad = good.replace("$Nodes\n6\n", "$Nodes\n18446744073709551615\n");
    let (line, _) = line_of(read_bytes("bad.msh", bad.as_bytes()).unwrap_err());
    assert!(line > line_starting(&bad, "$Nodes"));
    // A negative node tag.
    let bad = good.replace("40 0 1 0", "-40 0 1 0");
    let (line, reason) = line_of(read_bytes("bad.msh", bad.as_bytes()).unwrap_err());
    assert_eq!((line, reason.contains("-40")), (line_starting(&bad, "-40"), true));
    // Truncation inside the elements: the error is at the end.
    let cut = &good[..good.find("$EndElements").unwrap() - 3];
    let (line, reason) = line_of(read_bytes("bad.msh", cut.as_bytes()).unwrap_err());
    assert_eq!(line, cut.lines().count(), "{reason}");
    // Truncation inside a number (an exponent cut to `5e`): the file is
    // said to be truncated, the number is not blamed.
    let cut = good.replace("50 0.5 0.5 0\n", "50 0.5 0.5 5e");
    let cut = &cut[..cut.find("5e").unwrap() + 2];
    let (_, reason) = line_of(read_bytes("bad.msh", cut.as_bytes()).unwrap_err());
    assert!(reason.contains("truncated") && reason.contains("`5e`"), "{reason}");
    // An unsupported element type (a quadrangle).
    let bad = good.replace("4 2 2 7 1 10 20 50", "4 3 2 7 1 10 20 50 30");
    let (line, reason) = line_of(read_bytes("bad.msh", bad.as_bytes()).unwrap_err());
    assert_eq!(line, line_starting(&bad, "4 3 2"));
    assert!(reason.contains("type 3"), "{reason}");
    // A duplicate node tag.
    let bad = good.replace("50 0.5 0.5 0", "40 0.5 0.5 0");
    let (_, reason) = line_of(read_bytes("bad.msh", bad.as_bytes()).unwrap_err());
    assert!(reason.contains("twice"), "{reason}");
    // Not the z = 0 plane.
    let bad = good.replace("50 0.5 0.5 0", "50 0.5 0.5 0.25");
    let (line, _) = line_of(read_bytes("bad.msh", bad.as_bytes()).unwrap_err());
    assert_eq!(line, line_starting(&bad, "50 0.5"));
    // A segment in a physical curve that is no triangle's edge.
    let bad = good.replace("3 1 2 6 2 20 30", "3 1 2 6 2 20 40");
    let (line, reason) = line_of(read_bytes("bad.msh", bad.as_bytes()).unwrap_err());
    assert_eq!(line, line_starting(&bad, "3 1 2 6 2 20 40"));
    assert!(reason.contains("no cell's edge"), "{reason}");
    // Other versions.
    let bad = good.replace("2.2 0 8", "3.0 0 8");
    assert_eq!(line_of(read_bytes("bad.msh", bad.as_bytes()).unwrap_err()).0, 2);
}

#[test]
fn binary_errors_name_the_byte_offset() {
    let s = square();
    let good = binary22(&s, false);
    let nodes_at = good.windows(9).position(|w| w == b"$Nodes\n6\n").unwrap() + 9;
    // A missing node in the first triangle (element 4): its second node.
    let mut bad = good.clone();
    let elems_at = bad.windows(12).position(|w| w == b"$Elements\n7\n").unwrap() + 12;
    // elements: point (4*3 + 4*4), two lines (4*3 + 4*5 each), then triangle
    let tri = elems_at + 28 + 2 * 32;
    let node2 = tri + 12 + 4 * 4;
    assert_eq!(&bad[node2..node2 + 4], &20i32.to_le_bytes());
    bad[node2..node2 + 4].copy_from_slice(&77i32.to_le_bytes());
    let (offset, reason) = offset_of(read_bytes("bad.msh", &bad).unwrap_err());
    assert_eq!(offset, tri + 12, "{reason}");
    assert!(reason.contains("77"), "{reason}");
    // A NaN coordinate: the offset of the double.
    let mut bad = good.clone();
    bad[nodes_at + 4..nodes_at + 12].copy_from_slice(&f64::NAN.to_le_bytes());
    assert_eq!(offset_of(read_bytes("bad.msh", &bad).unwrap_err()).0, nodes_at + 4);
    // Truncated inside the node data: the offset where data ran out.
    let cut = &good[..nodes_at + 30];
    let (offset, reason) = offset_of(read_bytes("bad.msh", cut).unwrap_err());
    assert_eq!(offset, nodes_at + 28, "{reason}");
    // A bad endianness marker.
    let mut bad = good.clone();
    let one = bad.windows(4).position(|w| w == 1i32.to_le_bytes()).unwrap();
    bad[one] = 2;
    assert_eq!(offset_of(read_bytes("bad.msh", &bad).unwrap_err()).0, one);
    // 4.1: a block claiming 2^60 nodes fails at the end of the file.
    let good41 = write41(&s, Some((false, 8)));
    let head = good41.windows(7).position(|w| w == b"$Nodes\n").unwrap() + 7;
    let mut bad = good41.clone();
    let count = head + 32 + 12;
    assert_eq!(&bad[count..count + 8], &6u64.to_le_bytes());
    bad[count..count + 8].copy_from_slice(&(1u64 << 60).to_le_bytes());
    assert!(offset_of(read_bytes("bad.msh", &bad).unwrap_err()).0 > count);
}

#[test]
fn read_reports_the_path_of_a_missing_file() {
    let e = parloop_mesh::gmsh::read("/nonexistent/x.msh").unwrap_err();
    assert!(matches!(&e, Error::Io { path, .. } if path == "/nonexistent/x.msh"), "{e:?}");
}

#[test]
fn long_physical_lists_shared_by_many_elements_are_refused() {
    // One 4.1 point entity in 5000 physical groups, holding 3000 point
    // elements: 15 million memberships from a 60 KB file. The reader
    // refuses it instead of building 5000 groups of 3000 vertices.
    let tags: Vec<String> = (1..=5000).map(|t| t.to_string()).collect();
    let mut f = String::from("$MeshFormat\n4.1 0 8\n$EndMeshFormat\n$Entities\n1 0 1 0\n");
    f += &format!("1 0 0 0 5000 {}\n1 0 0 0 0 0 0 1 7 0\n$EndEntities\n", tags.join(" "));
    f += "$Nodes\n1 3 1 3\n2 1 0 3\n1\n2\n3\n0 0 0\n1 0 0\n0 1 0\n$EndNodes\n";
    f += "$Elements\n2 3001 1 3001\n2 1 2 1\n1 1 2 3\n0 1 15 3000\n";
    for i in 0..3000 {
        f += &format!("{} {}\n", i + 2, i % 3 + 1);
    }
    f += "$EndElements\n";
    let (_, reason) = line_of(read_bytes("bad.msh", f.as_bytes()).unwrap_err());
    assert!(reason.contains("physical groups"), "{reason}");
    // The same file with the point entity in one group reads.
    let one = f.replace(&format!("5000 {}", tags.join(" ")), "1 1");
    let m = read_bytes("ok.msh", one.as_bytes()).unwrap();
    assert_eq!((m.num_cells(), m.group("gmsh:0:1").unwrap().entities.clone()), (1, vec![0, 1, 2]));
    assert_eq!(m.group("gmsh:2:7").unwrap().entities, vec![0]);
}

/// Runs `f` on its own thread: a hang fails the test after `secs` seconds
/// instead of stalling it.
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs)).expect("finishes within the deadline")
}

#[test]
fn read_refuses_what_is_not_a_regular_file() {
    let dir = std::env::temp_dir().join(format!("parloop-gmsh-special-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // A directory first: a device or pipe would hang or exhaust memory
    // where it is not refused.
    let mut paths = vec![dir.clone()];
    #[cfg(unix)]
    {
        // A FIFO with no writer: opening it would wait forever.
        let fifo = dir.join("pipe.msh");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        paths.push(fifo);
    }
    #[cfg(target_os = "linux")]
    paths.extend(["/dev/zero".into(), "/dev/urandom".into()]);
    for p in paths {
        let shown = p.display().to_string();
        let e = within(20, move || parloop_mesh::gmsh::read(&p).unwrap_err().to_string());
        assert!(e.starts_with(&format!("{shown}: not a regular file")), "{e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(target_os = "linux")]
#[test]
fn read_refuses_a_file_longer_than_its_size() {
    // procfs files say they are empty and then hold text: the reader reads
    // no more than the size the file had when opened.
    let e = within(20, || parloop_mesh::gmsh::read("/proc/self/status").unwrap_err().to_string());
    assert!(e.starts_with("/proc/self/status: ") && e.contains("more than the 0 bytes"), "{e}");
}

#[test]
fn long_section_names_are_refused_at_once() {
    // A 100 KB name that overlaps itself, over 16 MB of near matches: a naive
    // search for `$End<name>` takes seconds.
    let name = "$End".repeat(25_000) + "Z";
    let f = format!("$MeshFormat\n2.2 0 8\n$EndMeshFormat\n${name}\n{}\n", "$End".repeat(4_000_000));
    let start = std::time::Instant::now();
    let (line, reason) = line_of(within(60, move || read_bytes("bad.msh", f.as_bytes()).unwrap_err()));
    assert!(start.elapsed() < std::time::Duration::from_secs(1), "took {:?}", start.elapsed());
    assert_eq!(line, 4, "{reason}");
    assert!(reason.contains("section name") && reason.contains("100001 bytes"), "{reason}");
    // Unknown sections of sensible names are still skipped, binary
    // contents and all, up to their `$End` line.
    let good = ascii22(&square());
    let skipped =
        good.replace("$Nodes\n", "$NodeData\n1\n\"$EndNode\"\n$EndNodeDataX\n\x01\x02\n$EndNodeData\n$Nodes\n");
    assert_eq!(read_bytes("ok.msh", skipped.as_bytes()).unwrap(), read_bytes("ok.msh", good.as_bytes()).unwrap());
    let unended = good.replace("$Nodes\n", "$Comments\n$EndComment\n$Nodes\n");
    let (line, reason) = line_of(read_bytes("bad.msh", unended.as_bytes()).unwrap_err());
    assert_eq!(line, line_starting(&unended, "$Comments"));
    assert!(reason.contains("`$EndComments`"), "{reason}");
}

/// `text` with `from` (which must occur once) replaced by `to`.
fn replace_once(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "`{from}` in\n{text}");
    text.replace(from, to)
}

#[test]
fn physical_groups_of_4_1_files_are_not_lost() {
    let good = String::from_utf8(write41(&square(), None)).unwrap();
    let ok = read_bytes("ok.msh", good.as_bytes()).unwrap();
    check_square(&ok);
    // An element block of an entity that `$Entities` does not list (the
    // block of the line element in curve 2, moved to curve 9).
    let bad = replace_once(&good, "\n1 2 1 1 \n", "\n1 9 1 1 \n");
    let (line, reason) = line_of(read_bytes("bad.msh", bad.as_bytes()).unwrap_err());
    assert_eq!(line, line_starting(&bad, "1 9 1 1"), "{reason}");
    assert!(reason.contains("1-D 9") && reason.contains("$Entities"), "{reason}");
    // `$Entities` after `$Elements`.
    let (a, b) = (good.find("$Entities").unwrap(), good.find("$Nodes").unwrap());
    let moved = format!("{}{}{}", &good[..a], &good[b..], &good[a..b]);
    let (line, reason) = line_of(read_bytes("bad.msh", moved.as_bytes()).unwrap_err());
    assert_eq!(line, line_starting(&moved, "$Entities"), "{reason}");
    assert!(reason.contains("after `$Elements`"), "{reason}");
    // A second `$Entities` section (giving curve 2 no physical group).
    let second = good[a..b].replace("1 6 0 \n", "0 0 \n");
    assert_ne!(second, good[a..b]);
    let twice = format!("{}{}{}", &good[..b], second, &good[b..]);
    let (line, reason) = line_of(read_bytes("bad.msh", twice.as_bytes()).unwrap_err());
    assert_eq!(line, 1 + twice[..b].lines().count(), "{reason}");
    assert!(reason.contains("`$Entities`") && reason.contains("twice"), "{reason}");
    // An entity listed twice in one `$Entities`.
    let entity = "2 0 0 0 0 0 0 1 6 0 \n";
    let bad = replace_once(&good, entity, &format!("{entity}2 0 0 0 0 0 0 0 0 \n")).replacen(
        "$Entities\n1 2 1 0 \n",
        "$Entities\n1 3 1 0 \n",
        1,
    );
    let (line, reason) = line_of(read_bytes("bad.msh", bad.as_bytes()).unwrap_err());
    assert_eq!(line, 1 + line_starting(&bad, entity.trim_end()), "{reason}");
    assert!(reason.contains("1-D 2") && reason.contains("twice"), "{reason}");
    // A partitioned mesh's `$PartitionedEntities` cut short (partitioned
    // files are read: `gmsh_meshes.rs`).
    let parted = good.replace("$Nodes\n", "$PartitionedEntities\n2\n0\n$EndPartitionedEntities\n$Nodes\n");
    let (line, reason) = line_of(read_bytes("bad.msh", parted.as_bytes()).unwrap_err());
    assert_eq!(line, 1 + line_starting(&parted, "$PartitionedEntities") + 2, "{reason}");
    assert!(reason.contains("entities"), "{reason}");
    // Without `$Entities`, a 4.1 file has no physical groups: it reads
    // unless it names some.
    let none = format!("{}{}", &good[..a], &good[b..]);
    let (line, reason) = line_of(read_bytes("bad.msh", none.as_bytes()).unwrap_err());
    assert_eq!(line, line_starting(&none, "1 5 \"bottom\""), "{reason}");
    assert!(reason.contains("$Entities"), "{reason}");
    let (p, q) = (none.find("$PhysicalNames").unwrap(), none.find("$Nodes").unwrap());
    let plain = format!("{}{}", &none[..p], &none[q..]);
    let m = read_bytes("ok.msh", plain.as_bytes()).unwrap();
    assert_eq!((m.coords.clone(), m.cells.clone(), m.groups.len()), (ok.coords, ok.cells, 0));
}

#[test]
fn repeated_sections_are_errors() {
    let good = ascii22(&square());
    let (a, b) = (good.find("$Elements").unwrap(), good.len());
    for (what, from, to) in [("$Elements", a, b), ("$MeshFormat", 0, good.find("$PhysicalNames").unwrap())] {
        let twice = format!("{good}{}", &good[from..to]);
        let (line, reason) = line_of(read_bytes("bad.msh", twice.as_bytes()).unwrap_err());
        assert_eq!(line, 1 + good.lines().count(), "{reason}");
        assert!(reason.contains(&format!("`{what}`")) && reason.contains("twice"), "{reason}");
    }
}

/// The 1-based line of byte `at` of `text`.
fn line_at(text: &str, at: usize) -> usize {
    1 + text[..at].matches('\n').count()
}

#[test]
fn ascii_records_are_checked_line_by_line() {
    // 2.2: an element line one node short, one node long; a node line one
    // coordinate short. 4.1: an element line (element 4) one node short or
    // long, and a block header one value short. Each error names its own
    // line (the one after the `\n` that `to` starts with).
    let v22 = ascii22(&square());
    let v41 = String::from_utf8(write41(&square(), None)).unwrap();
    for (good, from, to, says) in [
        (&v22, "\n4 2 2 7 1 10 20 50\n", "\n4 2 2 7 1 10 20\n", "the line ends where an element's node"),
        (&v22, "\n4 2 2 7 1 10 20 50\n", "\n4 2 2 7 1 10 20 50 30\n", "`30`"),
        (&v22, "\n30 1 1 0\n", "\n30 1 1\n", "the line ends where a node coordinate"),
        (&v41, "\n4 10 20 50 \n", "\n4 10 20 \n", "the line ends where an element's node"),
        (&v41, "\n4 10 20 50 \n", "\n4 10 20 50 60 \n", "`60`"),
        (&v41, "\n1 2 1 1 \n", "\n1 2 1\n1 \n", "the line ends where an element block's number"),
    ] {
        let bad = replace_once(good, from, to);
        let (line, reason) = line_of(read_bytes("bad.msh", bad.as_bytes()).unwrap_err());
        assert_eq!(line, line_at(&bad, bad.find(to).unwrap() + 1), "{to:?}: {reason}");
        assert!(reason.contains(says), "{to:?}: {reason}");
    }
    // Blank lines between records, CRLF line ends and trailing spaces are fine.
    let loose = v22.replace('\n', " \r\n").replace("$Elements \r\n7 \r\n", "$Elements\r\n7\r\n\r\n\r\n");
    assert_eq!(read_bytes("ok.msh", loose.as_bytes()).unwrap(), read_bytes("ok.msh", v22.as_bytes()).unwrap());
}

/// A nearly flat tetrahedron listed with negative orientation: the reader
/// swapped two vertices and kept it on the sign of the first measure,
/// which in 3-D can round differently from the swapped order's, so that
/// `Mesh::check` (and so `declare`) refused what the reader returned.
/// Whatever the reader keeps, `check` accepts.
#[test]
fn every_cell_the_reader_keeps_passes_the_meshs_own_check() {
    // Flat tetrahedra perturbed by a few ulps, listed in both orders.
    let mut state = 0x2545f4914f6cdd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let (mut kept, mut refused) = (0, 0);
    for _ in 0..400 {
        let mut p = [[0.0f64; 3]; 4];
        for q in p.iter_mut().take(3) {
            *q = [next(), next(), next()];
        }
        // The fourth corner in the plane of the first three, nudged.
        let (a, b) = (next(), next());
        let [p0, p1, p2, _] = p;
        p[3] = std::array::from_fn(|k| p0[k] + a * (p1[k] - p0[k]) + b * (p2[k] - p0[k]) + (next() - 0.5) * 1e-15);
        let nodes: String =
            p.iter().enumerate().map(|(i, q)| format!("{} {} {} {}\n", i + 1, q[0], q[1], q[2])).collect();
        let file = format!(
            "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n4\n{nodes}$EndNodes\n$Elements\n1\n1 4 2 1 1 1 2 3 4\n$EndElements\n"
        );
        match read_bytes("flat.msh", file.as_bytes()) {
            Ok(m) => {
                kept += 1;
                m.check().unwrap_or_else(|e| panic!("read, then refused by check: {e}\n{file}"));
            }
            Err(_) => refused += 1,
        }
    }
    assert!(kept > 0, "kept {kept}, refused {refused}");
}

/// What `Mesh.SaveAll = 1` makes of a 2.2 file: the names listed, every
/// element in physical group 0. Every named group was read empty, with no
/// error; now the file is refused at the first name's line (or byte),
/// saying why. One named group without elements among others that have
/// some is read as before, empty: Gmsh writes the name of a group of no
/// entity (`Physical Curve("c") = {}`) too.
#[test]
fn names_with_no_element_in_any_group_are_refused_naming_saveall() {
    let mut s = square();
    for e in &mut s.elements {
        e.1 = 0;
    }
    let text = ascii22(&s);
    let (line, reason) = line_of(read_bytes("bad.msh", text.as_bytes()).unwrap_err());
    assert_eq!(line, line_starting(&text, "1 5 \"bottom\""), "{reason}");
    assert!(
        reason.contains("1-D group 5 (`bottom`)") && reason.contains("Mesh.SaveAll = 1") && reason.contains("msh41"),
        "{reason}"
    );
    for big in [false, true] {
        let bin = binary22(&s, big);
        let (offset, why) = offset_of(read_bytes("bad.msh", &bin).unwrap_err());
        assert_eq!(offset, bin.windows(12).position(|w| w == b"1 5 \"bottom\"").unwrap(), "{why}");
        assert_eq!(why, reason);
    }
    // A named group of no entity among groups with elements: read, empty.
    let mut s = square();
    s.names.push((1, 42, "nothing"));
    for data in [ascii22(&s).into_bytes(), binary22(&s, false), write41(&s, None), write41(&s, Some((true, 4)))] {
        let m = read_bytes("ok.msh", &data).unwrap();
        assert_eq!(m.group_of("nothing", EntityKind::Facet).unwrap().entities, Vec::<u32>::new());
        assert_eq!(m.group("sq").unwrap().entities, vec![0, 1, 2, 3]);
    }
}

/// An unsupported element type is named, with what makes Gmsh write it.
#[test]
fn unsupported_element_types_are_named_with_a_hint() {
    let good = ascii22(&square());
    for (ty, nodes, says) in [
        (3, "10 20 50 30", ["(quadrangle)", "Recombine"]),
        (9, "10 20 50 30 40 99", ["(6-node triangle)", "Mesh.ElementOrder = 1"]),
        (5, "10 20 30 40 50 99 10 20", ["(hexahedron)", "Recombine"]),
    ] {
        let bad = good.replace("4 2 2 7 1 10 20 50", &format!("4 {ty} 2 7 1 {nodes}"));
        let (line, reason) = line_of(read_bytes("bad.msh", bad.as_bytes()).unwrap_err());
        assert_eq!(line, line_starting(&bad, &format!("4 {ty} 2")));
        assert!(reason.contains(&format!("element type {ty} ")) && says.iter().all(|w| reason.contains(w)), "{reason}");
    }
}
