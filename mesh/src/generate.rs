//! Structured simplicial meshes of the unit square and the unit cube.
//!
//! Both generators number vertices with x fastest, then y, then z:
//! vertex `(i, j)` of [`unit_square`] is `j (nx + 1) + i` at
//! `(i / nx, j / ny)`, vertex `(i, j, k)` of [`unit_cube`] is
//! `(k (ny + 1) + j) (nx + 1) + i`. Cells of one square (cube) are
//! consecutive, squares (cubes) in the same x-fastest order.
//!
//! Boundary facets come side by side, in the order of Firedrake's boundary
//! ids (1: x = 0, 2: x = 1, 3: y = 0, 4: y = 1, 5: z = 0, 6: z = 1), and
//! are oriented so that their normal by the right-hand rule points out of
//! the domain (2-D: the boundary is walked counter-clockwise).
//!
//! Groups (see [`Mesh::groups`]), in this order:
//!
//! | name | kind | entities |
//! | --- | --- | --- |
//! | `"left"`, `"left.vertices"`; `"right"`, `"right.vertices"` | facets; vertices | x = 0; x = 1 |
//! | `"bottom"`, `"bottom.vertices"`; `"top"`, `"top.vertices"` | facets; vertices | y = 0; y = 1 |
//! | `"front"`, `"front.vertices"`; `"back"`, `"back.vertices"` (3-D only) | facets; vertices | z = 0; z = 1 |
//! | `"boundary"` | vertices | every boundary vertex |
//!
//! The `.vertices` suffix is the Gmsh reader's convention for the vertices
//! of a facet group; [`Mesh::vertex_group`]`("left")` finds
//! `"left.vertices"`. A corner vertex belongs to every side it touches.

use parloop::Error;
use rayon::prelude::*;

use crate::{EntityKind, Group, Mesh};

/// The unit square cut into `nx` x `ny` squares, each split into two
/// counter-clockwise triangles along the diagonal from its top-left to its
/// bottom-right corner (Firedrake's `UnitSquareMesh`, `diagonal="left"`,
/// its default): `(nx + 1)(ny + 1)` vertices, `2 nx ny` triangles,
/// `2 (nx + ny)` boundary segments. Square `(i, j)` gives triangles
/// `2 (j nx + i)`: `[v(i,j), v(i+1,j), v(i,j+1)]` and `2 (j nx + i) + 1`:
/// `[v(i+1,j), v(i+1,j+1), v(i,j+1)]`. See the [module](self) for
/// numbering and groups.
///
/// `nx` or `ny` of zero, or counts that do not fit `u32` vertex numbers
/// (and `i32` for parloop maps), are an [`Error::InvalidDeclaration`] or
/// [`Error::SizeOverflow`]; memory that cannot be had is
/// [`Error::OutOfMemory`].
///
/// ```
/// let mesh = parloop_mesh::unit_square(2, 1)?;
/// assert_eq!((mesh.vertices(), mesh.num_cells(), mesh.num_facets()), (6, 4, 6));
/// assert_eq!(&mesh.cells[..6], &[0, 1, 3, 1, 4, 3]);
/// assert_eq!(mesh.vertex_group("left").unwrap().entities, vec![0, 3]);
/// # Ok::<(), parloop::Error>(())
/// ```
pub fn unit_square(nx: usize, ny: usize) -> Result<Mesh, Error> {
    let name = format!("unit_square({nx}, {ny})");
    check_divisions(&name, &[nx, ny])?;
    // Saturating: an overflow is caught by the counts just below.
    let (px, py) = (nx.saturating_add(1), ny.saturating_add(1));
    let nverts = checked_count(&name, "vertices", &[px, py])?;
    let ncells = checked_count(&name, "cells", &[nx, ny, 2])?;
    checked_count(&name, "cell vertex numbers", &[ncells, 3])?;

    let mut coords = alloc(&name, "coordinates", nverts * 2)?;
    coords.par_chunks_mut(2 * px).enumerate().for_each(|(j, row)| {
        let y = j as f64 / ny as f64;
        for (i, xy) in row.chunks_exact_mut(2).enumerate() {
            xy[0] = i as f64 / nx as f64;
            xy[1] = y;
        }
    });
    let mut cells = alloc(&name, "cells", ncells * 3)?;
    // One row of squares per chunk: 2 nx triangles of 3 vertices.
    cells.par_chunks_mut(6 * nx).enumerate().for_each(|(j, row)| {
        for (i, sq) in row.chunks_exact_mut(6).enumerate() {
            let a = (j * px + i) as u32; // (i, j)
            let d = a + 1; // (i + 1, j)
            let b = a + px as u32; // (i, j + 1)
            let c = b + 1; // (i + 1, j + 1)
            sq.copy_from_slice(&[a, d, b, d, c, b]);
        }
    });

    let v = |i: usize, j: usize| (j * px + i) as u32;
    let cell = |i: usize, j: usize, upper: usize| (2 * (j * nx + i) + upper) as u32;
    // Everything below is sized by the boundary, allocated fallibly too
    // (a long thin square has as many boundary segments as triangles).
    let nsegments = 2 * (nx + ny);
    let mut facets = reserve(&name, "facets", 2 * nsegments)?;
    let mut facet_cells = reserve(&name, "facet cells", nsegments)?;
    let mut groups = Vec::new();
    // Walked counter-clockwise: the domain is on each segment's left.
    // (first vertex, second vertex, cell) per segment.
    type Segments = Vec<(u32, u32, u32)>;
    let segments = "boundary segments";
    let sides: [(&str, Segments); 4] = [
        ("left", collect_in(&name, segments, (0..ny).rev().map(|j| (v(0, j + 1), v(0, j), cell(0, j, 0))))?),
        ("right", collect_in(&name, segments, (0..ny).map(|j| (v(nx, j), v(nx, j + 1), cell(nx - 1, j, 1))))?),
        ("bottom", collect_in(&name, segments, (0..nx).map(|i| (v(i, 0), v(i + 1, 0), cell(i, 0, 0))))?),
        ("top", collect_in(&name, segments, (0..nx).rev().map(|i| (v(i + 1, ny), v(i, ny), cell(i, ny - 1, 1))))?),
    ];
    for (side, segments) in sides {
        let first = facet_cells.len() as u32;
        for (a, b, c) in segments {
            facets.extend([a, b]);
            facet_cells.push(c);
        }
        groups.push(Group {
            name: side.into(),
            kind: EntityKind::Facet,
            entities: collect_in(&name, "facet groups", first..facet_cells.len() as u32)?,
        });
        let vertices = "vertex groups";
        let verts: Vec<u32> = match side {
            "left" => collect_in(&name, vertices, (0..py).map(|j| v(0, j)))?,
            "right" => collect_in(&name, vertices, (0..py).map(|j| v(nx, j)))?,
            "bottom" => collect_in(&name, vertices, (0..px).map(|i| v(i, 0)))?,
            _ => collect_in(&name, vertices, (0..px).map(|i| v(i, ny)))?,
        };
        groups.push(Group { name: format!("{side}.vertices"), kind: EntityKind::Vertex, entities: verts });
    }
    groups.push(boundary_vertices(&name, &groups)?);
    Ok(Mesh { dim: 2, coords, cells, facets, facet_cells, groups })
}

/// The six Kuhn (Freudenthal) tetrahedra of the unit cube: one per order
/// in which the path from corner 000 to corner 111 steps along x, y and z.
/// Corners are numbered `x + 2y + 4z`. Odd orders have their last two
/// vertices swapped so that every volume is positive.
const KUHN: [[usize; 4]; 6] = kuhn();

const fn kuhn() -> [[usize; 4]; 6] {
    // Axis steps as corner offsets: x = 1, y = 2, z = 4.
    const ORDERS: [([usize; 3], bool); 6] = [
        ([1, 2, 4], false),
        ([1, 4, 2], true),
        ([2, 1, 4], true),
        ([2, 4, 1], false),
        ([4, 1, 2], false),
        ([4, 2, 1], true),
    ];
    let mut tets = [[0; 4]; 6];
    let mut t = 0;
    while t < 6 {
        let (s, odd) = ORDERS[t];
        let (v1, v2) = (s[0], s[0] + s[1]);
        tets[t] = if odd { [0, v1, 7, v2] } else { [0, v1, v2, 7] };
        t += 1;
    }
    tets
}

/// The unit cube cut into `nx` x `ny` x `nz` cubes, each into the six
/// tetrahedra around its main diagonal (Kuhn/Freudenthal: conforming
/// across cubes, all of volume `1 / (6 nx ny nz)`, positively oriented):
/// `(nx + 1)(ny + 1)(nz + 1)` vertices, `6 nx ny nz` tetrahedra,
/// `4 (nx ny + ny nz + nz nx)` boundary triangles. See the
/// [module](self) for numbering and groups. Built in parallel (rayon):
/// `unit_cube(125, 125, 125)`, 11.7 million tetrahedra, takes a fraction
/// of a second on two cores.
///
/// Errors as for [`unit_square`].
///
/// ```
/// let mesh = parloop_mesh::unit_cube(1, 1, 1)?;
/// assert_eq!((mesh.vertices(), mesh.num_cells(), mesh.num_facets()), (8, 6, 12));
/// assert_eq!(mesh.facet_group("front").unwrap().entities.len(), 2);
/// # Ok::<(), parloop::Error>(())
/// ```
pub fn unit_cube(nx: usize, ny: usize, nz: usize) -> Result<Mesh, Error> {
    let name = format!("unit_cube({nx}, {ny}, {nz})");
    check_divisions(&name, &[nx, ny, nz])?;
    let (px, py, pz) = (nx.saturating_add(1), ny.saturating_add(1), nz.saturating_add(1));
    let nverts = checked_count(&name, "vertices", &[px, py, pz])?;
    let ncells = checked_count(&name, "cells", &[nx, ny, nz, 6])?;
    checked_count(&name, "cell vertex numbers", &[ncells, 4])?;

    let mut coords = alloc(&name, "coordinates", nverts * 3)?;
    coords.par_chunks_mut(3 * px).enumerate().for_each(|(row, xs)| {
        let (j, k) = (row % py, row / py);
        let (y, z) = (j as f64 / ny as f64, k as f64 / nz as f64);
        for (i, xyz) in xs.chunks_exact_mut(3).enumerate() {
            xyz.copy_from_slice(&[i as f64 / nx as f64, y, z]);
        }
    });
    // Corner c = x + 2y + 4z of a cube as an offset from its vertex 000.
    let corner = |c: usize| ((c & 1) + ((c >> 1) & 1) * px + (c >> 2) * px * py) as u32;
    let offsets: [u32; 8] = std::array::from_fn(corner);
    let mut cells = alloc(&name, "cells", ncells * 4)?;
    // One row of cubes (along x) per chunk: 6 nx tetrahedra of 4 vertices.
    cells.par_chunks_mut(24 * nx).enumerate().for_each(|(row, cubes)| {
        let (j, k) = (row % ny, row / ny);
        for (i, cube) in cubes.chunks_exact_mut(24).enumerate() {
            let base = ((k * py + j) * px + i) as u32;
            for (tet, out) in KUHN.iter().zip(cube.chunks_exact_mut(4)) {
                for (o, &c) in out.iter_mut().zip(tet) {
                    *o = base + offsets[c];
                }
            }
        }
    });

    // Per side: the tetrahedra of a cube with a face on it, and that face
    // oriented outwards, worked out once on the reference cube.
    let patterns = face_patterns();
    let nfacets = 4 * (nx * ny + ny * nz + nz * nx);
    let mut facets = Vec::new();
    facets
        .try_reserve_exact(3 * nfacets)
        .map_err(|_| Error::OutOfMemory { what: format!("mesh `{name}`: facets"), bytes: 12 * nfacets })?;
    let mut facet_cells = reserve(&name, "facet cells", nfacets)?;
    let mut groups = Vec::new();
    let vid = |i: usize, j: usize, k: usize| ((k * py + j) * px + i) as u32;
    for (side, (axis, high)) in SIDES.iter().enumerate() {
        let first = facet_cells.len() as u32;
        // The two axes that span the side, cube by cube (the first fastest).
        let (ua, va) = match axis {
            0 => (1, 2),
            1 => (0, 2),
            _ => (0, 1),
        };
        let n = [nx, ny, nz];
        for vv in 0..n[va] {
            for uu in 0..n[ua] {
                let mut c = [0usize; 3];
                c[*axis] = if *high { n[*axis] - 1 } else { 0 };
                c[ua] = uu;
                c[va] = vv;
                let base = vid(c[0], c[1], c[2]);
                let cube = (c[2] * ny + c[1]) * nx + c[0];
                for &(tet, face) in &patterns[side] {
                    facets.extend(face.iter().map(|&f| base + offsets[f]));
                    facet_cells.push((6 * cube + tet) as u32);
                }
            }
        }
        groups.push(Group {
            name: SIDE_NAMES[side].into(),
            kind: EntityKind::Facet,
            entities: collect_in(&name, "facet groups", first..facet_cells.len() as u32)?,
        });
        let fixed = if *high { n[*axis] } else { 0 };
        let range = |a: usize| if a == *axis { fixed..fixed + 1 } else { 0..n[a] + 1 };
        let mut verts = reserve(&name, "vertex groups", range(0).len() * range(1).len() * range(2).len())?;
        for k in range(2) {
            for j in range(1) {
                for i in range(0) {
                    verts.push(vid(i, j, k));
                }
            }
        }
        groups.push(Group {
            name: format!("{}.vertices", SIDE_NAMES[side]),
            kind: EntityKind::Vertex,
            entities: verts,
        });
    }
    groups.push(boundary_vertices(&name, &groups)?);
    Ok(Mesh { dim: 3, coords, cells, facets, facet_cells, groups })
}

/// The sides of the cube in Firedrake's order: (axis, at 1 rather than 0).
const SIDES: [(usize, bool); 6] = [(0, false), (0, true), (1, false), (1, true), (2, false), (2, true)];
const SIDE_NAMES: [&str; 6] = ["left", "right", "bottom", "top", "front", "back"];

/// For each side, the (tetrahedron of the cube, its face on the side as
/// outward-oriented corners) pairs: two per side.
fn face_patterns() -> [Vec<(usize, [usize; 3])>; 6] {
    let pos = |c: usize| [(c & 1) as f64, ((c >> 1) & 1) as f64, (c >> 2) as f64];
    std::array::from_fn(|side| {
        let (axis, high) = SIDES[side];
        let on_side = |c: usize| (pos(c)[axis] == 1.0) == high;
        let mut faces = Vec::new();
        for (t, tet) in KUHN.iter().enumerate() {
            let face: Vec<usize> = tet.iter().copied().filter(|&c| on_side(c)).collect();
            if face.len() != 3 {
                continue;
            }
            let opposite =
                tet.iter().copied().find(|&c| !on_side(c)).expect("a tetrahedron has a vertex off each face");
            let [a, b, c] = [pos(face[0]), pos(face[1]), pos(face[2])];
            let sub = |p: [f64; 3], q: [f64; 3]| [p[0] - q[0], p[1] - q[1], p[2] - q[2]];
            let (u, v, w) = (sub(b, a), sub(c, a), sub(pos(opposite), a));
            let normal = [u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]];
            let inward = normal[0] * w[0] + normal[1] * w[1] + normal[2] * w[2] > 0.0;
            faces.push((t, if inward { [face[0], face[2], face[1]] } else { [face[0], face[1], face[2]] }));
        }
        faces
    })
}

/// The sorted union of the vertex groups so far.
fn boundary_vertices(name: &str, groups: &[Group]) -> Result<Group, Error> {
    let vertex_groups = || groups.iter().filter(|g| g.kind == EntityKind::Vertex);
    let mut all = reserve(name, "boundary vertices", vertex_groups().map(|g| g.entities.len()).sum())?;
    all.extend(vertex_groups().flat_map(|g| g.entities.iter().copied()));
    all.sort_unstable();
    all.dedup();
    Ok(Group { name: "boundary".into(), kind: EntityKind::Vertex, entities: all })
}

fn check_divisions(name: &str, n: &[usize]) -> Result<(), Error> {
    if let Some(axis) = n.iter().position(|&k| k == 0) {
        return Err(Error::InvalidDeclaration {
            what: "mesh",
            name: name.into(),
            reason: format!("{} divisions along {}: at least one is needed", n[axis], ["x", "y", "z"][axis]),
        });
    }
    Ok(())
}

/// The product of `factors`, refused when it overflows or when entity
/// numbers would not fit the `i32` of parloop maps.
fn checked_count(name: &str, what: &str, factors: &[usize]) -> Result<usize, Error> {
    let product = factors.iter().try_fold(1usize, |acc, &f| acc.checked_mul(f));
    match product {
        Some(p) if p <= i32::MAX as usize => Ok(p),
        _ => Err(Error::SizeOverflow {
            what: "mesh",
            name: name.into(),
            detail: format!(
                "{what}: {} is more than {} (entity numbers are i32 in parloop maps)",
                factors.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(" x "),
                i32::MAX
            ),
        }),
    }
}

/// An empty vector with room for `len` values, or [`Error::OutOfMemory`].
pub(crate) fn reserve<T>(name: &str, what: &str, len: usize) -> Result<Vec<T>, Error> {
    let mut v = Vec::new();
    let bytes = len.saturating_mul(std::mem::size_of::<T>());
    v.try_reserve_exact(len).map_err(|_| Error::OutOfMemory { what: format!("mesh `{name}`: {what}"), bytes })?;
    Ok(v)
}

/// The values of `values`, in a vector allocated fallibly.
pub(crate) fn collect_in<T>(name: &str, what: &str, values: impl ExactSizeIterator<Item = T>) -> Result<Vec<T>, Error> {
    let mut v = reserve(name, what, values.len())?;
    v.extend(values);
    Ok(v)
}

/// A zero-filled vector of `len` values, or [`Error::OutOfMemory`].
fn alloc<T: Clone + Default>(name: &str, what: &str, len: usize) -> Result<Vec<T>, Error> {
    let mut v = Vec::new();
    let bytes = len.saturating_mul(std::mem::size_of::<T>());
    v.try_reserve_exact(len).map_err(|_| Error::OutOfMemory { what: format!("mesh `{name}`: {what}"), bytes })?;
    v.resize(len, T::default());
    Ok(v)
}
