//! A [`Mesh`] declared in a parloop runtime.

use std::collections::HashMap;

use parloop::{Dat, Error, Map, Runtime, Set, Subset};

use crate::generate::{collect_in, reserve};
use crate::{EntityKind, Group, Mesh};

/// A mesh's sets, maps and coordinates on a [`Runtime`], from
/// [`Mesh::declare`]. Names are the prefix, an underscore and the part
/// (`"wave_vertices"`), or the part alone for an empty prefix.
#[derive(Clone)]
pub struct DeclaredMesh {
    /// Vertices.
    pub vertices: Set,
    /// Cells (triangles or tetrahedra).
    pub cells: Set,
    /// Boundary facets.
    pub facets: Set,
    /// Cell -> its `dim + 1` vertices (`"cell_vertices"`).
    pub cell_vertices: Map,
    /// Facet -> its `dim` vertices (`"facet_vertices"`).
    pub facet_vertices: Map,
    /// Facet -> the cell it bounds (`"facet_cells"`).
    pub facet_cells: Map,
    /// Vertex coordinates, `dim` per vertex (`"coords"`).
    pub coords: Dat<f64>,
    /// The mesh's groups (sorted entity numbers), as in [`Mesh::groups`],
    /// but for groups of interior facets ([`EntityKind::InteriorFacet`]:
    /// [`crate::DeclaredInteriorFacets`] has them).
    pub groups: Vec<Group>,
    /// One parloop [`Subset`] per group, in the same order, of the
    /// vertices, cells or facets: loops iterate over them and
    /// `Mat::zero_rows` takes them. Named after the prefix and the group
    /// with a slash (`"wave/left.vertices"`, `"/left.vertices"` for an
    /// empty prefix), so that no group name can collide with the mesh's own
    /// sets or a solver's `{prefix}_...` names; where two groups of
    /// different kinds share a name, the kind is appended
    /// (`"p/wall(facet)"`), and a second group of one kind and name gets
    /// `#2` (`"p/wall(facet)#2"`).
    pub subsets: Vec<Subset>,
}

impl std::fmt::Debug for DeclaredMesh {
    // Sets, maps and dats print their names (parloop's types are not Debug).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeclaredMesh")
            .field("vertices", &self.vertices.name())
            .field("cells", &self.cells.name())
            .field("facets", &self.facets.name())
            .field("coords", &self.coords.name())
            .field("groups", &self.groups.iter().map(|g| g.name.as_str()).collect::<Vec<_>>())
            .finish()
    }
}

impl DeclaredMesh {
    /// The group of `kind` called `name`, if any.
    pub fn group_of(&self, name: &str, kind: EntityKind) -> Option<&Group> {
        self.groups.iter().find(|g| g.name == name && g.kind == kind)
    }

    /// The subset of the group of `kind` called `name`, if any.
    ///
    /// ```
    /// use parloop::{Backend, Runtime};
    /// use parloop_mesh::EntityKind;
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// let m = parloop_mesh::unit_square(2, 2)?.declare(&rt, "sq")?;
    /// let left = m.subset_of("left.vertices", EntityKind::Vertex).unwrap();
    /// assert_eq!((left.name(), left.indices()), ("sq/left.vertices", &[0, 3, 6][..]));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn subset_of(&self, name: &str, kind: EntityKind) -> Option<&Subset> {
        let at = self.groups.iter().position(|g| g.name == name && g.kind == kind)?;
        self.subsets.get(at)
    }
}

impl Mesh {
    /// Declares the mesh on `rt`: three sets, three maps, the coordinate
    /// dat and a subset per group, named after `prefix` (see
    /// [`DeclaredMesh`]). The
    /// mesh is checked first ([`Mesh::check`]): a dimension other than 2
    /// or 3, array lengths that do not match, a vertex, cell or group
    /// entity out of range, a cell not positively oriented, or a boundary
    /// facet that is not an outward face of its cell are errors naming the
    /// array and the value.
    ///
    /// ```
    /// use parloop::{Backend, Runtime};
    /// let rt = Runtime::with_backend(Backend::Seq)?;
    /// let mesh = parloop_mesh::unit_square(2, 2)?;
    /// let m = mesh.declare(&rt, "sq")?;
    /// assert_eq!((m.vertices.size(), m.cells.size(), m.facets.size()), (9, 8, 8));
    /// assert_eq!(m.cell_vertices.name(), "sq_cell_vertices");
    /// assert_eq!(m.coords.values()?, mesh.coords);
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn declare(&self, rt: &Runtime, prefix: &str) -> Result<DeclaredMesh, Error> {
        self.check()?;
        let name = |part: &str| if prefix.is_empty() { part.to_string() } else { format!("{prefix}_{part}") };
        let d = self.dim;
        let vertices = rt.set(&name("vertices"), self.vertices())?;
        let cells = rt.set(&name("cells"), self.num_cells())?;
        let facets = rt.set(&name("facets"), self.num_facets())?;
        let cell_vertices = rt.map(&name("cell_vertices"), &cells, &vertices, d + 1, to_i32(&self.cells, "cells")?)?;
        let facet_vertices = rt.map(&name("facet_vertices"), &facets, &vertices, d, to_i32(&self.facets, "facets")?)?;
        let facet_cells =
            rt.map(&name("facet_cells"), &facets, &cells, 1, to_i32(&self.facet_cells, "facet_cells")?)?;
        let mut coords = reserve(prefix, "a copy of the coordinates", self.coords.len())?;
        coords.extend_from_slice(&self.coords);
        let coords = rt.dat(&name("coords"), &vertices, d, coords)?;
        // Groups of interior facets are declared with the interior facets
        // (`InteriorFacets::declare`): the mesh declares no set for them.
        let groups: Vec<Group> = self.groups.iter().filter(|g| g.kind != EntityKind::InteriorFacet).cloned().collect();
        let mut subsets = Vec::with_capacity(groups.len());
        // The kinds of the groups of each name, and the groups per name
        // and kind so far (counted once: a file can hold hundreds of
        // thousands of groups).
        let mut kinds: HashMap<&str, Vec<EntityKind>> = HashMap::new();
        for g in &groups {
            let k = kinds.entry(g.name.as_str()).or_default();
            if !k.contains(&g.kind) {
                k.push(g.kind);
            }
        }
        let mut seen: HashMap<(&str, EntityKind), usize> = HashMap::new();
        for g in &groups {
            let (set, kind) = match g.kind {
                EntityKind::Vertex => (&vertices, "vertex"),
                EntityKind::Cell => (&cells, "cell"),
                EntityKind::Facet | EntityKind::InteriorFacet => (&facets, "facet"),
            };
            let mut sub = format!("{prefix}/{}", g.name);
            if kinds[g.name.as_str()].len() > 1 {
                sub.push_str(&format!("({kind})"));
            }
            let earlier = seen.entry((g.name.as_str(), g.kind)).or_default();
            if *earlier > 0 {
                // Two groups of one kind and name (two physical tags).
                sub.push_str(&format!("#{}", *earlier + 1));
            }
            *earlier += 1;
            let entities =
                collect_in(prefix, &format!("the entities of subset `{sub}`"), g.entities.iter().map(|&e| e as usize))?;
            subsets.push(rt.subset(&sub, set, entities)?);
        }
        Ok(DeclaredMesh {
            vertices,
            cells,
            facets,
            cell_vertices,
            facet_vertices,
            facet_cells,
            coords,
            groups,
            subsets,
        })
    }

    /// Checks the arrays' shapes and every entity number (what parloop's
    /// declarations would check too, but naming the mesh's arrays), and
    /// what the mesh promises its users: cells positively oriented with
    /// distinct vertices, each boundary facet a face of its cell ordered
    /// outward, each listed once and bounding one cell only. (A face
    /// shared by three cells, such as a cell listed twice inside the
    /// domain, [`Mesh::interior_facets`] finds; `check` does not sort
    /// every face.)
    ///
    /// ```
    /// let mut mesh = parloop_mesh::unit_square(1, 1)?;
    /// mesh.cells[0] = 9;
    /// assert!(mesh.check().unwrap_err().to_string().contains("cells"));
    /// mesh.cells[0] = 0;
    /// mesh.cells.swap(1, 2); // clockwise
    /// assert!(mesh.check().unwrap_err().to_string().contains("negatively oriented"));
    /// mesh.cells.swap(1, 2);
    /// mesh.coords[3] = f64::NAN;
    /// assert!(mesh.check().unwrap_err().to_string().contains("coords[3]"));
    /// # Ok::<(), parloop::Error>(())
    /// ```
    pub fn check(&self) -> Result<(), Error> {
        self.check_structure()?;
        self.check_geometry()
    }

    /// The arrays' shapes, every entity number in range, finite
    /// coordinates and cells of distinct vertices: what indexing the mesh
    /// needs (VTK output of a tangled mesh, which one wants to look at,
    /// needs no more).
    pub(crate) fn check_structure(&self) -> Result<(), Error> {
        let invalid = |reason: String| Error::InvalidDeclaration { what: "mesh", name: "mesh".into(), reason };
        if self.dim != 2 && self.dim != 3 {
            return Err(invalid(format!("dimension {}: 2 or 3 expected", self.dim)));
        }
        let d = self.dim;
        for (array, len, per) in
            [("coords", self.coords.len(), d), ("cells", self.cells.len(), d + 1), ("facets", self.facets.len(), d)]
        {
            if len % per != 0 {
                return Err(Error::WrongLength {
                    what: "mesh array",
                    name: array.into(),
                    expected: len / per * per + per,
                    got: len,
                    detail: format!("a multiple of {per} in {d}-D"),
                });
            }
        }
        if self.facet_cells.len() != self.num_facets() {
            return Err(Error::WrongLength {
                what: "mesh array",
                name: "facet_cells".into(),
                expected: self.num_facets(),
                got: self.facet_cells.len(),
                detail: "one cell per facet".into(),
            });
        }
        let in_range = |array: &str, values: &[u32], bound: usize, of: &str| -> Result<(), Error> {
            match values.iter().position(|&v| v as usize >= bound) {
                Some(at) => Err(invalid(format!("{array}[{at}] = {} is not a {of} (there are {bound})", values[at]))),
                None => Ok(()),
            }
        };
        if let Some(at) = self.coords.iter().position(|x| !x.is_finite()) {
            return Err(invalid(format!(
                "coords[{at}] = {} (vertex {}) is not a finite number",
                self.coords[at],
                at / d
            )));
        }
        let nv = self.vertices();
        in_range("cells", &self.cells, nv, "vertex")?;
        in_range("facets", &self.facets, nv, "vertex")?;
        in_range("facet_cells", &self.facet_cells, self.num_cells(), "cell")?;
        // A cell with a repeated vertex has no measure, and a face of it
        // would be a facet from the cell to itself (a flux added and taken
        // back).
        for (c, cell) in self.cells.chunks_exact(d + 1).enumerate() {
            if let Some(k) = (1..cell.len()).find(|&k| cell[..k].contains(&cell[k])) {
                return Err(invalid(format!("cell {c} repeats vertex {} ({:?})", cell[k], cell)));
            }
        }
        // Interior facets are not counted here (that sorts every face, and
        // `check` runs at every declaration): a bound, each face shared by
        // two cells at most. Declaring them (`InteriorFacets::declare`)
        // checks the groups exactly.
        let interior = (self.num_cells() * (d + 1)) / 2;
        for g in &self.groups {
            let bound = match g.kind {
                EntityKind::Vertex => nv,
                EntityKind::Cell => self.num_cells(),
                EntityKind::Facet => self.num_facets(),
                EntityKind::InteriorFacet => interior,
            };
            let of = match g.kind {
                EntityKind::InteriorFacet => "interior facet (a bound: there are at most as many as faces / 2)".into(),
                kind => format!("{kind:?}").to_lowercase(),
            };
            in_range(&format!("group `{}`", g.name), &g.entities, bound, &of)?;
        }
        Ok(())
    }

    /// What the mesh promises beyond its structure (checked first): cells
    /// positively oriented, boundary facets outward faces of their cells.
    fn check_geometry(&self) -> Result<(), Error> {
        let invalid = |reason: String| Error::InvalidDeclaration { what: "mesh", name: "mesh".into(), reason };
        let d = self.dim;
        // The orientation the mesh promises (counter-clockwise triangles,
        // tetrahedra of positive volume): interior facets are oriented from
        // it, and a cell given the other way round turned its facets'
        // normals into the cell, silently.
        let mut corners = [[0.0f64; 3]; 4];
        for (c, cell) in self.cells.chunks_exact(d + 1).enumerate() {
            for (corner, &v) in corners.iter_mut().zip(cell) {
                corner[..d].copy_from_slice(&self.coords[v as usize * d..(v as usize + 1) * d]);
            }
            let measure = crate::signed_measure(d, &corners);
            if !(measure > 0.0 && measure.is_finite()) {
                let (what, fix) = match d {
                    2 => ("area", "list its vertices counter-clockwise"),
                    _ => ("volume", "swap two of its vertices"),
                };
                return Err(invalid(if measure == 0.0 {
                    format!("cell {c} ({cell:?}) has zero {what}")
                } else if !measure.is_finite() {
                    format!("cell {c} ({cell:?}) has no finite {what} (coordinates too large)")
                } else {
                    format!("cell {c} ({cell:?}) is negatively oriented (signed {what} {measure:e}): {fix}")
                }));
            }
        }
        // Each boundary facet is a face of its cell, in the cell's outward
        // order (a rotation of one of its local faces): a flux through it
        // goes to that cell, with the normal its order gives.
        // (A segment's one order; a triangle's three rotations, its even
        // permutations.)
        let rotations = if d == 2 { 1 } else { 3 };
        for (f, (facet, &c)) in self.facets.chunks_exact(d).zip(&self.facet_cells).enumerate() {
            let cell = &self.cells[c as usize * (d + 1)..(c as usize + 1) * (d + 1)];
            let outward = crate::faces::local_faces(d)
                .iter()
                .any(|face| (0..rotations).any(|shift| (0..d).all(|k| facet[k] == cell[face[(k + shift) % d]])));
            if !outward {
                let face = crate::faces::local_faces(d).iter().any(|face| {
                    crate::faces::face_key(facet)
                        == crate::faces::face_key(&face.iter().map(|&k| cell[k]).collect::<Vec<_>>())
                });
                return Err(invalid(if face {
                    format!(
                        "facet {f} ({facet:?}) is a face of its cell {c} ({cell:?}) ordered inward: \
                         its normal must point out of the cell (reverse {})",
                        if d == 2 { "it" } else { "two of its vertices" }
                    )
                } else {
                    format!("facet {f} ({facet:?}) is not a face of its cell {c} ({cell:?}) (facet_cells[{f}])")
                }));
            }
        }
        self.check_facets_once()
    }

    /// Each boundary facet listed once and a face of its cell only: a
    /// facet listed twice adds its flux twice, and a face between two
    /// cells listed as a boundary facet (or a cell listed twice, which
    /// puts its boundary faces on two cells) takes a flux out of the
    /// domain through its interior. Only cells with `dim` vertices on
    /// the boundary are looked at, so the cost is one pass over the cells
    /// and a sort of the (few) facets.
    fn check_facets_once(&self) -> Result<(), Error> {
        let invalid = |reason: String| Error::InvalidDeclaration { what: "mesh", name: "mesh".into(), reason };
        let d = self.dim;
        let mut keys: Vec<([u32; 3], u32)> = reserve("mesh", "the boundary facets' keys", self.num_facets())?;
        keys.extend(
            self.facets.chunks_exact(d).enumerate().map(|(f, facet)| (crate::faces::face_key(facet), f as u32)),
        );
        keys.sort_unstable();
        if let Some(pair) = keys.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            let (first, again) = (pair[0].1 as usize, pair[1].1 as usize);
            let (c1, c2) = (self.facet_cells[first], self.facet_cells[again]);
            return Err(invalid(format!(
                "facet {again} ({:?}) repeats facet {first} ({:?}): {}",
                &self.facets[again * d..][..d],
                &self.facets[first * d..][..d],
                if c1 == c2 {
                    "list each boundary facet once".to_string()
                } else {
                    format!("the face lies between cells {c1} and {c2}, an interior facet, not a boundary one")
                }
            )));
        }
        let mut on_boundary: Vec<bool> = reserve("mesh", "the boundary vertices", self.vertices())?;
        on_boundary.resize(self.vertices(), false);
        for &v in &self.facets {
            on_boundary[v as usize] = true;
        }
        let mut face = [0u32; 3];
        for (c, cell) in self.cells.chunks_exact(d + 1).enumerate() {
            if cell.iter().filter(|&&v| on_boundary[v as usize]).count() < d {
                continue;
            }
            for local in crate::faces::local_faces(d) {
                for (x, &k) in face.iter_mut().zip(local.iter()) {
                    *x = cell[k];
                }
                if !face[..d].iter().all(|&v| on_boundary[v as usize]) {
                    continue;
                }
                let key = crate::faces::face_key(&face[..d]);
                if let Ok(at) = keys.binary_search_by(|probe| probe.0.cmp(&key)) {
                    let f = keys[at].1 as usize;
                    let own = self.facet_cells[f] as usize;
                    if own != c {
                        let cell_of = |k: usize| &self.cells[k * (d + 1)..][..d + 1];
                        return Err(invalid(format!(
                            "facet {f} ({:?}) is a face of its cell {own} ({:?}) and of cell {c} ({:?}): \
                             a boundary facet bounds one cell (a face between two cells is an interior \
                             facet; a cell listed twice puts its faces on two cells)",
                            &self.facets[f * d..][..d],
                            cell_of(own),
                            cell_of(c)
                        )));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Entity numbers as parloop map values (`i32`).
pub(crate) fn to_i32(values: &[u32], array: &str) -> Result<Vec<i32>, Error> {
    let mut out = reserve("declared", &format!("array `{array}` as i32 map values"), values.len())?;
    for &v in values {
        out.push(i32::try_from(v).map_err(|_| Error::SizeOverflow {
            what: "map",
            name: array.into(),
            detail: format!("entity number {v} above {}", i32::MAX),
        })?);
    }
    Ok(out)
}
