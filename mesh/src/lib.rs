//! Meshes for parloop: generators (`unit_square`, `unit_cube`), the Gmsh
//! reader and VTK output for ParaView.
//!
//! A [`Mesh`] is plain data (coordinates and connectivity, 0-based); the
//! solver declares it in a runtime with [`Mesh::declare`], which gives
//! parloop sets, maps and the coordinate dat.
#![warn(missing_docs)]

mod declare;
mod faces;
pub mod generate;
pub mod vtk;

pub use declare::DeclaredMesh;
pub use faces::{DeclaredInteriorFacets, InteriorFacets};
pub use generate::{unit_cube, unit_square};

pub mod gmsh;

/// What kind of entity a [`Group`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntityKind {
    /// Vertices (rows of [`Mesh::coords`]).
    Vertex,
    /// Cells (rows of [`Mesh::cells`]).
    Cell,
    /// Boundary facets (rows of [`Mesh::facets`]).
    Facet,
    /// Facets between two cells (rows of [`Mesh::interior_facets`], in its
    /// order): a Gmsh physical curve (2-D) or surface (3-D) inside the
    /// domain, such as the interface between two materials. Declared with
    /// the interior facets ([`InteriorFacets::declare`]), not with the mesh.
    InteriorFacet,
}

/// A named group of entities: a Gmsh physical group, or a generator's
/// boundary part (`"left"`, `"boundary"`, ...). Entities are sorted and
/// unique.
///
/// ```
/// use parloop_mesh::EntityKind;
/// let mesh = parloop_mesh::unit_square(2, 2)?;
/// let left = mesh.group_of("left.vertices", EntityKind::Vertex).unwrap();
/// assert_eq!(left.entities, vec![0, 3, 6]);
/// assert!(mesh.groups.iter().any(|g| g.kind == EntityKind::Facet && g.name == "left"));
/// # Ok::<(), parloop::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// The group's name.
    pub name: String,
    /// What its entities are.
    pub kind: EntityKind,
    /// Sorted, unique, 0-based entity numbers.
    pub entities: Vec<u32>,
}

/// A simplicial mesh as plain data: triangles in 2-D, tetrahedra in 3-D.
///
/// Every number is 0-based. Cells are positively oriented (counter-clockwise
/// triangles, tetrahedra of positive volume).
///
/// ```
/// let mesh = parloop_mesh::unit_square(1, 1)?; // two triangles
/// assert_eq!((mesh.dim, mesh.vertices(), mesh.num_cells(), mesh.num_facets()), (2, 4, 2, 4));
/// // Vertex k's coordinates are coords[2 k..2 k + 2]; cell c's vertices cells[3 c..3 c + 3].
/// assert_eq!(&mesh.coords[2..4], &[1.0, 0.0]);
/// assert_eq!(mesh.cells.len(), 3 * mesh.num_cells());
/// # Ok::<(), parloop::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Mesh {
    /// Spatial dimension: 2 or 3.
    pub dim: usize,
    /// Vertex coordinates, `dim` per vertex.
    pub coords: Vec<f64>,
    /// Cell -> vertices, `dim + 1` per cell.
    pub cells: Vec<u32>,
    /// Boundary facet -> vertices, `dim` per facet (segments in 2-D,
    /// triangles in 3-D), ordered so that the facet's normal points out of
    /// the domain (see [`InteriorFacets`]). Faces between two cells are
    /// [`Mesh::interior_facets`].
    pub facets: Vec<u32>,
    /// Boundary facet -> the cell it bounds, one per facet.
    pub facet_cells: Vec<u32>,
    /// Named groups of vertices, cells or facets.
    pub groups: Vec<Group>,
}

impl Mesh {
    /// Number of vertices.
    ///
    /// ```
    /// let mesh = parloop_mesh::unit_cube(1, 1, 1)?; // six tetrahedra
    /// assert_eq!((mesh.vertices(), mesh.num_cells(), mesh.num_facets()), (8, 6, 12));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn vertices(&self) -> usize {
        self.coords.len() / self.dim.max(1)
    }

    /// Number of cells.
    pub fn num_cells(&self) -> usize {
        // (Saturating: a hand-built mesh may carry any dim; `check` refuses it.)
        self.cells.len() / self.dim.saturating_add(1)
    }

    /// Number of boundary facets.
    pub fn num_facets(&self) -> usize {
        self.facets.len() / self.dim.max(1)
    }

    /// The group called `name`, if any.
    ///
    /// ```
    /// let mesh = parloop_mesh::unit_square(2, 2)?;
    /// assert!(mesh.group("boundary").is_some());
    /// assert!(mesh.group("no such group").is_none());
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn group(&self, name: &str) -> Option<&Group> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// The group of `kind` called `name`, if any.
    ///
    /// ```
    /// use parloop_mesh::{unit_square, EntityKind};
    /// let mesh = unit_square(4, 4)?;
    /// assert_eq!(mesh.group_of("top", EntityKind::Facet).unwrap().entities.len(), 4);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn group_of(&self, name: &str, kind: EntityKind) -> Option<&Group> {
        self.groups.iter().find(|g| g.name == name && g.kind == kind)
    }

    /// The vertex group called `name`, else the one called
    /// `name.vertices` (the vertices of the facet group `name`, as the
    /// generators and the Gmsh reader call them): Dirichlet boundaries.
    ///
    /// ```
    /// let mesh = parloop_mesh::unit_square(4, 4)?;
    /// assert_eq!(mesh.vertex_group("boundary").unwrap().entities.len(), 16);
    /// assert_eq!(mesh.vertex_group("left").unwrap().name, "left.vertices");
    /// assert_eq!(mesh.vertex_group("left").unwrap().entities, vec![0, 5, 10, 15, 20]);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn vertex_group(&self, name: &str) -> Option<&Group> {
        self.group_of(name, EntityKind::Vertex)
            .or_else(|| self.group_of(&format!("{name}.vertices"), EntityKind::Vertex))
    }

    /// The facet group called `name`, if any.
    ///
    /// ```
    /// let mesh = parloop_mesh::unit_cube(2, 3, 4)?;
    /// assert_eq!(mesh.facet_group("left").unwrap().entities.len(), 2 * 3 * 4);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn facet_group(&self, name: &str) -> Option<&Group> {
        self.group_of(name, EntityKind::Facet)
    }
}

/// Twice the signed area (2-D) or six times the signed volume (3-D).
pub(crate) fn signed_measure(dim: usize, p: &[[f64; 3]]) -> f64 {
    let d = |i: usize, k: usize| p[i][k] - p[0][k];
    if dim == 2 {
        d(1, 0) * d(2, 1) - d(1, 1) * d(2, 0)
    } else {
        d(1, 0) * (d(2, 1) * d(3, 2) - d(2, 2) * d(3, 1)) - d(1, 1) * (d(2, 0) * d(3, 2) - d(2, 2) * d(3, 0))
            + d(1, 2) * (d(2, 0) * d(3, 1) - d(2, 1) * d(3, 0))
    }
}
