//! The faces of a simplicial mesh, found from its cells: a face with one
//! cell is a boundary facet, a face between two cells an interior facet
//! (what a finite-volume scheme loops over: the flux through each face
//! between its two cells). The Gmsh reader finds its boundary facets here
//! too; [`Mesh::interior_facets`] gives the interior ones.

use parloop::{Error, Map, Runtime, Set, Subset};

use crate::declare::to_i32;
use crate::generate::{collect_in, reserve};
use crate::{DeclaredMesh, EntityKind, Group, Mesh};

/// A triangle's edges, each counter-clockwise (the triangle on its left).
const EDGES: [[usize; 2]; 3] = [[0, 1], [1, 2], [2, 0]];
/// A positively oriented tetrahedron's faces, each ordered so that its
/// normal `(b - a) x (c - a)` points out of the tetrahedron.
const FACES: [[usize; 3]; 4] = [[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]];

/// The local faces of a cell of dimension `dim`, each oriented outward.
pub(crate) fn local_faces(dim: usize) -> &'static [&'static [usize]] {
    const E: [&[usize]; 3] = [&EDGES[0], &EDGES[1], &EDGES[2]];
    const F: [&[usize]; 4] = [&FACES[0], &FACES[1], &FACES[2], &FACES[3]];
    if dim == 2 {
        &E
    } else {
        &F
    }
}

/// A face's key: its vertices sorted, padded with `u32::MAX`.
pub(crate) fn face_key(v: &[u32]) -> [u32; 3] {
    let mut k = [u32::MAX; 3];
    k[..v.len()].copy_from_slice(v);
    k[..v.len()].sort_unstable();
    k
}

/// Every face of a mesh, by the cells around it.
pub(crate) struct Faces {
    /// (cell, local face) of each boundary facet, in cell order.
    pub boundary: Vec<(u32, u8)>,
    /// (cell, local face, other cell) of each interior facet, in the order
    /// of the first cell (the lower number) and its local face.
    pub interior: Vec<(u32, u8, u32)>,
}

/// Why the faces could not be found.
pub(crate) enum FacesError {
    /// A face has three or more cells; `cell` is the third.
    SharedByMore { cell: u32, key: [u32; 3] },
    /// Memory for the face table could not be had.
    OutOfMemory(Error),
}

/// The faces of `cells` (`dim + 1` vertices per cell, positively oriented),
/// the interior ones only when `interior` (else `Faces::interior` is
/// empty); `name` names the mesh in an out-of-memory error.
pub(crate) fn faces(name: &str, dim: usize, cells: &[u32], interior: bool) -> Result<Faces, FacesError> {
    let nv = dim + 1;
    let local = local_faces(dim);
    // Every (face, cell, local face), sorted so that a face's cells are
    // adjacent: a run of one is a boundary facet, a run of two an interior
    // one.
    let n = cells.len() / nv * local.len();
    let mut all: Vec<([u32; 3], u32, u8)> = reserve(name, "the face table", n).map_err(FacesError::OutOfMemory)?;
    for (c, cell) in cells.chunks_exact(nv).enumerate() {
        for (l, f) in local.iter().enumerate() {
            let mut fv = [0u32; 3];
            for (x, &k) in fv.iter_mut().zip(f.iter()) {
                *x = cell[k];
            }
            all.push((face_key(&fv[..f.len()]), c as u32, l as u8));
        }
    }
    all.sort_unstable();
    let mut boundary = Vec::new();
    let mut inner = Vec::new();
    for run in all.chunk_by(|a, b| a.0 == b.0) {
        match run {
            [(_, c, l)] => boundary.push((*c, *l)),
            // Sorted: the first cell has the lower number.
            [(_, c, l), (_, other, _)] => {
                if interior {
                    inner.push((*c, *l, *other));
                }
            }
            _ => return Err(FacesError::SharedByMore { cell: run[2].1, key: run[0].0 }),
        }
    }
    drop(all);
    boundary.sort_unstable();
    inner.sort_unstable();
    Ok(Faces { boundary, interior: inner })
}

/// The faces between two cells of a [`Mesh`], from
/// [`Mesh::interior_facets`]: what a finite-volume scheme loops over.
///
/// Each facet's vertices are ordered as a face of its first cell, outward:
/// in 2-D the segment `a -> b` has its first cell on the left, so the
/// normal `(b.y - a.y, a.x - b.x)` points from the first cell into the
/// second; in 3-D the normal `(b - a) x (c - a)` does. Boundary facets
/// ([`Mesh::facets`]) are oriented the same way, out of the domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InteriorFacets {
    /// Spatial dimension of the mesh (2 or 3).
    pub dim: usize,
    /// Facet -> vertices, `dim` per facet.
    pub vertices: Vec<u32>,
    /// Facet -> its two cells, the lower-numbered first.
    pub cells: Vec<u32>,
    /// The mesh's groups of interior facets ([`EntityKind::InteriorFacet`]:
    /// a Gmsh interface curve or surface), numbered as these facets.
    pub groups: Vec<Group>,
}

/// An [`InteriorFacets`] declared on a runtime, from
/// [`InteriorFacets::declare`].
#[derive(Clone)]
pub struct DeclaredInteriorFacets {
    /// The interior facets (`"interior_facets"`).
    pub facets: Set,
    /// Facet -> its `dim` vertices (`"interior_facet_vertices"`).
    pub facet_vertices: Map,
    /// Facet -> its two cells (`"interior_facet_cells"`), arity 2.
    pub facet_cells: Map,
    /// The groups of [`InteriorFacets::groups`], in the same order.
    pub groups: Vec<Group>,
    /// One [`Subset`] of [`DeclaredInteriorFacets::facets`] per group, in
    /// the same order, named after the prefix and the group with a slash
    /// (`"fv/interface"`), as [`DeclaredMesh::subsets`] are (a group of
    /// that name may be a boundary facet group too: the slash names never
    /// meet, the interior one is `"fv/interface(interior facet)"`).
    pub subsets: Vec<Subset>,
}

impl DeclaredInteriorFacets {
    /// The subset of the interior facet group called `name`, if any.
    pub fn subset_of(&self, name: &str) -> Option<&Subset> {
        let at = self.groups.iter().position(|g| g.name == name)?;
        self.subsets.get(at)
    }
}

impl std::fmt::Debug for DeclaredInteriorFacets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeclaredInteriorFacets")
            .field("facets", &self.facets.name())
            .field("size", &self.facets.size())
            .finish()
    }
}

/// The subset name of interior facet group `group`: `"{prefix}/{group}"`,
/// with `"(interior facet)"` appended where the mesh's declared groups
/// use that name too (a physical curve with boundary and interior
/// facets), as [`Mesh::declare`] names groups of two kinds.
fn interior_subset_name(prefix: &str, group: &str, mesh: &DeclaredMesh) -> String {
    let mut sub = format!("{prefix}/{group}");
    if mesh.groups.iter().any(|g| g.name == group) {
        sub.push_str("(interior facet)");
    }
    sub
}

impl InteriorFacets {
    /// Number of interior facets.
    pub fn len(&self) -> usize {
        self.cells.len() / 2
    }

    /// Whether there are none (a mesh of one cell).
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Declares the facets on `rt` beside the mesh `mesh` declared there
    /// with the same `prefix`: a set and its maps to `mesh`'s vertices and
    /// cells (see [`DeclaredInteriorFacets`]). Under MPI, declare them
    /// before the partition, as the mesh's own sets.
    ///
    /// ```
    /// use parloop::{Backend, Runtime};
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// let mesh = parloop_mesh::unit_square(4, 4)?;
    /// let m = mesh.declare(&rt, "fv")?;
    /// let faces = mesh.interior_facets()?.declare(&rt, "fv", &m)?;
    /// // 32 triangles' 96 edges: 16 on the boundary, 40 between two triangles.
    /// assert_eq!(faces.facets.size(), 40);
    /// assert_eq!(faces.facet_cells.name(), "fv_interior_facet_cells");
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn declare(&self, rt: &Runtime, prefix: &str, mesh: &DeclaredMesh) -> Result<DeclaredInteriorFacets, Error> {
        let name = |part: &str| if prefix.is_empty() { part.to_string() } else { format!("{prefix}_{part}") };
        let n = self.len();
        if self.vertices.len() != n * self.dim {
            return Err(Error::InvalidDeclaration {
                what: "interior facets",
                name: name("interior_facets"),
                reason: format!(
                    "{} vertex numbers for {n} facets of dimension {} (expected {})",
                    self.vertices.len(),
                    self.dim,
                    n * self.dim
                ),
            });
        }
        // Facets of another mesh whose numbers happen to be in range (a
        // cube's triangles on a square's mesh) were declared as they came.
        if mesh.cell_vertices.arity() != self.dim + 1 || mesh.facet_vertices.arity() != self.dim {
            return Err(Error::InvalidDeclaration {
                what: "interior facets",
                name: name("interior_facets"),
                reason: format!(
                    "facets of a {}-D mesh (cells of {} vertices, facets of {}) on a declared mesh whose cells have \
                     {} vertices and facets {}: declare the facets of the mesh they came from",
                    self.dim,
                    self.dim + 1,
                    self.dim,
                    mesh.cell_vertices.arity(),
                    mesh.facet_vertices.arity()
                ),
            });
        }
        let facets = rt.set(&name("interior_facets"), n)?;
        let facet_vertices = rt.map(
            &name("interior_facet_vertices"),
            &facets,
            &mesh.vertices,
            self.dim,
            to_i32(&self.vertices, "interior facet vertices")?,
        )?;
        let facet_cells = rt.map(
            &name("interior_facet_cells"),
            &facets,
            &mesh.cells,
            2,
            to_i32(&self.cells, "interior facet cells")?,
        )?;
        let mut subsets = Vec::with_capacity(self.groups.len());
        // Two groups of one name (two physical tags): `#2`, as
        // `Mesh::declare` names them.
        let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for g in &self.groups {
            if g.kind != EntityKind::InteriorFacet {
                return Err(Error::InvalidDeclaration {
                    what: "interior facets",
                    name: name("interior_facets"),
                    reason: format!("group `{}` holds {:?} entities, not interior facets", g.name, g.kind),
                });
            }
            let mut sub = interior_subset_name(prefix, &g.name, mesh);
            let earlier = seen.entry(g.name.as_str()).or_default();
            if *earlier > 0 {
                sub.push_str(&format!("#{}", *earlier + 1));
            }
            *earlier += 1;
            let entities =
                collect_in(prefix, &format!("the entities of subset `{sub}`"), g.entities.iter().map(|&e| e as usize))?;
            subsets.push(rt.subset(&sub, &facets, entities)?);
        }
        Ok(DeclaredInteriorFacets { facets, facet_vertices, facet_cells, groups: self.groups.clone(), subsets })
    }
}

impl Mesh {
    /// The faces between two cells, found from the cells (see
    /// [`InteriorFacets`] for their order and orientation). The mesh is
    /// checked first ([`Mesh::check`]); a face of three or more cells is an
    /// error naming its vertices.
    ///
    /// ```
    /// let mesh = parloop_mesh::unit_square(1, 1)?;
    /// let inner = mesh.interior_facets()?;
    /// // The square's diagonal, between its two triangles.
    /// assert_eq!((inner.len(), &inner.cells[..]), (1, &[0, 1][..]));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn interior_facets(&self) -> Result<InteriorFacets, Error> {
        self.check()?;
        let d = self.dim;
        let found = faces("mesh", d, &self.cells, true).map_err(|e| match e {
            FacesError::OutOfMemory(e) => e,
            FacesError::SharedByMore { cell, key } => Error::InvalidDeclaration {
                what: "mesh",
                name: "mesh".into(),
                reason: format!(
                    "the face with vertices {:?} is shared by more than two cells (cell {cell} is the third)",
                    &key[..d]
                ),
            },
        })?;
        let n = found.interior.len();
        let mut vertices = reserve("mesh", "interior facet vertices", n * d)?;
        let mut cells = reserve("mesh", "interior facet cells", 2 * n)?;
        let local = local_faces(d);
        for &(c, l, other) in &found.interior {
            let cell = &self.cells[c as usize * (d + 1)..][..d + 1];
            vertices.extend(local[l as usize].iter().map(|&k| cell[k]));
            cells.extend([c, other]);
        }
        let groups = self.groups.iter().filter(|g| g.kind == EntityKind::InteriorFacet).cloned().collect();
        Ok(InteriorFacets { dim: d, vertices, cells, groups })
    }
}
