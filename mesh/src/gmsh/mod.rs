//! Reading Gmsh `.msh` files (format 2.2 and 4.1, ASCII and binary).
//!
//! What becomes of a file:
//! - **Cells**: tetrahedra if the file has any (`dim` 3), otherwise
//!   triangles, which must lie in the z = 0 plane (`dim` 2). Each cell is
//!   oriented positively (two vertices swapped where Gmsh's order gives a
//!   negative area or volume); a cell of zero measure is an error. A cell
//!   written twice (2.2 files repeat an element for each physical group it
//!   belongs to) is kept once.
//! - **Vertices**: the nodes used by cells, numbered 0.. in increasing
//!   Gmsh node tag. Nodes no cell uses (geometry points of nothing, say)
//!   are dropped.
//! - **Facets**: every face that bounds exactly one cell (whether or not
//!   the file lists it), ordered by cell and then local face, oriented
//!   outward; `facet_cells` gives that cell. A face bounding more than two
//!   cells is an error.
//! - **Groups** from physical groups, named by `$PhysicalNames` or else
//!   `gmsh:DIM:TAG` (groups of one name and kind, which Gmsh allows in
//!   different dimensions or under two tags, are merged):
//!   physical surfaces (2-D) or volumes (3-D) give [`EntityKind::Cell`]
//!   groups; physical curves (2-D) or surfaces (3-D) give
//!   [`EntityKind::Facet`] groups plus a [`EntityKind::Vertex`] group of
//!   their vertices named with the suffix [`VERTICES_SUFFIX`]
//!   (`"inlet"` and `"inlet.vertices"`); lower-dimensional groups (physical
//!   points, and curves in 3-D) give vertex groups under their own name.
//!   A physical curve (2-D) or surface (3-D) inside the domain (the
//!   interface between two materials, say) gives an
//!   [`EntityKind::InteriorFacet`] group of its facets between two cells,
//!   numbered as [`Mesh::interior_facets`] numbers them (one with facets
//!   on the boundary and inside gives both kinds under its name), and its
//!   vertices' group as above.
//!   A lower-dimensional element in a physical group must lie on the mesh:
//!   one on a node no cell uses, or a facet element that is no cell's
//!   face, is an error. Lower-dimensional
//!   elements in no physical group (Gmsh saves them all when a model has
//!   no physical groups) are passed over.
//! - **Files that read as another mesh** are refused saying why: physical
//!   groups named but no element in any (a 2.2 file saved with
//!   `Mesh.SaveAll = 1`: Gmsh gives every element physical tag 0); a 2.2
//!   partitioned file whose named groups Gmsh emptied into
//!   `_part{..}_physical{..}_dim{..}` groups (`Mesh.PartitionOldStyleMsh2
//!   = 0`); triangles only from a 4.1 file whose `$Entities` list volumes
//!   (a `Physical Surface` of a solid and no `Physical Volume`: Gmsh saved
//!   no tetrahedra). One named group without elements among others is
//!   read, empty (Gmsh names a group of no entity too).
//!
//! Errors are [`parloop::Error::Input`] with the 1-based line for ASCII
//! files and [`parloop::Error::InputAtByte`] with the byte offset for
//! binary ones; both name the file. Only first-order simplices and points
//! are read: another element type is an error (naming it, and the option
//! that made it), and so are a `$Periodic` section (nodes are not
//! identified: skipping it would read another domain; Gmsh 4.8 writes it
//! in 4.1 files only) and `$ParametricNodes`. A partitioned file is read as the
//! whole mesh, the elements Gmsh adds on partition boundaries in no
//! group. A UTF-8 byte-order mark at the start is passed over.
//!
//! ```
//! let msh = b"$MeshFormat\n2.2 0 8\n$EndMeshFormat\n\
//! $PhysicalNames\n2\n1 1 \"bottom\"\n2 2 \"square\"\n$EndPhysicalNames\n\
//! $Nodes\n4\n1 0 0 0\n2 1 0 0\n3 1 1 0\n4 0 1 0\n$EndNodes\n\
//! $Elements\n3\n1 1 2 1 1 1 2\n2 2 2 2 1 1 2 3\n3 2 2 2 1 1 3 4\n$EndElements\n";
//! let mesh = parloop_mesh::gmsh::read_bytes("square.msh", msh)?;
//! assert_eq!((mesh.dim, mesh.vertices(), mesh.num_cells(), mesh.num_facets()), (2, 4, 2, 4));
//! assert_eq!(mesh.group("square").unwrap().entities, vec![0, 1]);
//! assert_eq!(mesh.group("bottom").unwrap().entities.len(), 1);
//! assert_eq!(mesh.group("bottom.vertices").unwrap().entities, vec![0, 1]);
//! # Ok::<(), parloop::Error>(())
//! ```

mod parse;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use parloop::Error;

use crate::faces::{face_key, local_faces, FacesError};
use crate::{EntityKind, Group, Mesh};
use parse::{dim_of, nodes_per, Locator, Raw};

/// Suffix of the vertex group that goes with each facet group: the
/// vertices of the facets of physical group `"inlet"` are `"inlet.vertices"`.
pub const VERTICES_SUFFIX: &str = ".vertices";

/// Reads the Gmsh mesh file at `path` (2.2 or 4.1, ASCII or binary).
///
/// Only a regular file is read, and no more of it than its size when
/// opened: a directory, device or pipe (which could be endless) is an
/// [`Error::Io`] naming the path, and so is a file that grows while it
/// is read.
///
/// ```no_run
/// let mesh = parloop_mesh::gmsh::read("disk.msh")?;
/// println!("{} triangles", mesh.num_cells());
/// # Ok::<(), parloop::Error>(())
/// ```
pub fn read(path: impl AsRef<Path>) -> Result<Mesh, Error> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let data = read_file(path, &name)?;
    read_bytes(&name, &data)
}

/// The bytes of the regular file at `path`, no more than its size when
/// opened.
fn read_file(path: &Path, name: &str) -> Result<Vec<u8>, Error> {
    use std::io::Read;
    let io = |source| Error::Io { path: name.to_string(), source };
    // Checked before opening too: opening a device may act on it.
    regular(&std::fs::metadata(path).map_err(io)?).map_err(io)?;
    let (file, meta) = open_regular(path).map_err(io)?;
    let len = meta.len();
    let mut data = Vec::new();
    usize::try_from(len).ok().filter(|&n| data.try_reserve_exact(n).is_ok()).ok_or_else(|| Error::OutOfMemory {
        what: format!("reading `{name}`"),
        bytes: usize::try_from(len).unwrap_or(usize::MAX),
    })?;
    file.take(len.saturating_add(1)).read_to_end(&mut data).map_err(io)?;
    if data.len() as u64 > len {
        return Err(io(std::io::Error::other(format!(
            "the file holds more than the {len} bytes its size said when it was opened (it grew while read, or is \
             not stored data)"
        ))));
    }
    Ok(data)
}

/// Opens `path` and checks that what was opened is a regular file. The
/// open does not block: a FIFO put in the file's place after the check
/// before opening would otherwise wait for a writer forever.
fn open_regular(path: &Path) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Reads of a regular file ignore O_NONBLOCK.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    regular(&meta)?;
    Ok((file, meta))
}

/// Refuses what is not a regular file (after symbolic links).
fn regular(meta: &std::fs::Metadata) -> std::io::Result<()> {
    if meta.is_file() {
        return Ok(());
    }
    let t = meta.file_type();
    let kind = if t.is_dir() { "a directory" } else { special_kind(&t) };
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("not a regular file ({kind}): a mesh is read from a regular file only"),
    ))
}

#[cfg(unix)]
fn special_kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn special_kind(_: &std::fs::FileType) -> &'static str {
    "a special file"
}

/// Reads a Gmsh mesh from memory; `name` names it in errors.
///
/// ```
/// let err = parloop_mesh::gmsh::read_bytes("bad.msh", b"$MeshFormat\n3.0 0 8\n").unwrap_err();
/// assert!(err.to_string().starts_with("bad.msh:2:"));
/// ```
pub fn read_bytes(name: &str, data: &[u8]) -> Result<Mesh, Error> {
    let (raw, loc) = parse::parse(name, data)?;
    build(&raw, &loc)
}

fn build(raw: &Raw, loc: &Locator) -> Result<Mesh, Error> {
    // Node tag -> index in raw.nodes: a table when the tags are dense (as
    // Gmsh writes them), a hash map when a file's tags are sparse.
    let max_tag = raw.nodes.iter().map(|n| n.tag).max().unwrap_or(0);
    let dense = max_tag <= 4 * raw.nodes.len() as u64 + 16;
    let mut table = vec![usize::MAX; if dense { max_tag as usize + 1 } else { 0 }];
    let mut sparse: HashMap<u64, usize> = HashMap::new();
    for (i, n) in raw.nodes.iter().enumerate() {
        let old = if dense {
            std::mem::replace(&mut table[n.tag as usize], i) != usize::MAX
        } else {
            sparse.insert(n.tag, i).is_some()
        };
        if old {
            return Err(loc.error(n.pos, format!("node tag {} appears twice", n.tag)));
        }
    }
    let by_tag = |t: u64| -> Option<usize> {
        if dense {
            table.get(t as usize).copied().filter(|&i| i != usize::MAX)
        } else {
            sparse.get(&t).copied()
        }
    };
    let dim = if raw.elements.iter().any(|e| e.ty == 4) {
        3
    } else if raw.elements.iter().any(|e| e.ty == 2) {
        // A 4.1 file lists the model's entities: triangles alone of a model
        // with volumes are surfaces of a solid, not a planar domain.
        if let Some((n, pos)) = raw.volumes.filter(|v| v.0 > 0) {
            let (n, s, them) = if n == 1 { (n, "", "it") } else { (n, "s", "them") };
            return Err(loc.error(
                pos,
                format!(
                    "the model has {n} volume{s} (`$Entities` lists {them}) but the file has no tetrahedra, only \
                     triangles: when a model has physical groups, Gmsh saves only their elements, and no `Physical \
                     Volume` holds the volume{s}; add a `Physical Volume` holding the domain (or set \
                     `Mesh.SaveAll = 1`), and mesh in 3-D (`-3`)"
                ),
            ));
        }
        2
    } else {
        return Err(loc.error(
            0,
            "the file has no triangles or tetrahedra (when a model has physical groups, Gmsh saves only their \
             elements: add a `Physical Surface` (2-D) or `Physical Volume` (3-D) holding the domain, or set \
             `Mesh.SaveAll = 1`)",
        ));
    };
    // Physical groups named but no element in any: every named group
    // would be read empty. (One named group empty is no error: Gmsh writes
    // the name of a group of no entity, `Physical Curve("c") = {}`.)
    if raw.elements.iter().all(|e| e.physical.is_empty()) {
        if let Some((d, t, name, pos)) = raw.names.iter().find(|n| n.0 as usize <= dim) {
            let why = if raw.v2 {
                "; this is what Gmsh writes for `Mesh.SaveAll = 1` in format 2.2 (every element in physical group 0): \
                 save the mesh in format 4.1 (`-format msh41`), or remove `Mesh.SaveAll`"
            } else {
                " (the file's `$Entities` give no entity a physical tag)"
            };
            return Err(loc.error(
                *pos,
                format!(
                    "physical {d}-D group {t} (`{name}`) has no elements in the file, and neither has any other: \
                     no element carries a physical tag{why}"
                ),
            ));
        }
    }
    let cell_ty = if dim == 3 { 4 } else { 2 };
    // An element's nodes as indices into raw.nodes (the first
    // `nodes_per(ty)` entries; the rest usize::MAX).
    let lookup = |e: &parse::Element| -> Result<[usize; 4], Error> {
        let mut v = [usize::MAX; 4];
        for (slot, t) in v.iter_mut().zip(&e.nodes[..nodes_per(e.ty).unwrap_or(0)]) {
            *slot = by_tag(*t).ok_or_else(|| {
                loc.error(e.pos, format!("element refers to node {t}, which the file does not define"))
            })?;
        }
        Ok(v)
    };

    // Group memberships cost memory beyond the file's size only if the file
    // repeats long physical-tag lists (4.1 entities are shared by their
    // elements): bound them by what a sensible file of this size holds.
    let memberships: usize = raw.elements.iter().map(|e| e.physical.len()).sum();
    let limit = 4 * loc.data.len() + 4096;
    if memberships > limit {
        return Err(loc.error(
            0,
            format!("elements belong to {memberships} physical groups in all, more than {limit} for a file this size"),
        ));
    }

    // Cells, once each, with the physical tags of all their copies.
    let nv = dim + 1;
    // Copies are found by sorting (vertex set, element): the first copy
    // of each set is the cell, in file order.
    let elems: Vec<&parse::Element> = raw.elements.iter().filter(|e| e.ty == cell_ty).collect();
    let mut looked = Vec::with_capacity(elems.len());
    let mut keys = Vec::with_capacity(elems.len());
    for (i, e) in elems.iter().enumerate() {
        let v = lookup(e)?;
        let mut key = v;
        key.sort_unstable();
        if key[..nv].windows(2).any(|w| w[0] == w[1]) {
            return Err(loc.error(e.pos, "a cell repeats a node"));
        }
        looked.push(v);
        keys.push((key, i));
    }
    keys.sort_unstable();
    let mut first = vec![0usize; elems.len()];
    for run in keys.chunk_by(|a, b| a.0 == b.0) {
        for &(_, i) in run {
            first[i] = run[0].1;
        }
    }
    let mut cells_raw: Vec<([usize; 4], usize)> = Vec::new();
    let mut cell_phys: Vec<Vec<i32>> = Vec::new();
    let mut cell_of = vec![0usize; elems.len()];
    for (i, e) in elems.iter().enumerate() {
        if first[i] == i {
            cell_of[i] = cells_raw.len();
            cells_raw.push((looked[i], e.pos));
            cell_phys.push(Vec::new());
        } else {
            cell_of[i] = cell_of[first[i]];
        }
        cell_phys[cell_of[i]].extend(e.physical.iter());
    }

    // Vertices: the nodes cells use, by increasing tag.
    let mut used: Vec<usize> = cells_raw.iter().flat_map(|(v, _)| v[..nv].iter().copied()).collect();
    used.sort_unstable_by_key(|&i| raw.nodes[i].tag);
    used.dedup();
    if used.len() > u32::MAX as usize || cells_raw.len() > u32::MAX as usize {
        return Err(loc.error(0, "more than 2^32 - 1 vertices or cells"));
    }
    // raw.nodes index -> vertex number (u32::MAX: no cell uses the node).
    let mut number = vec![u32::MAX; raw.nodes.len()];
    for (k, &i) in used.iter().enumerate() {
        number[i] = k as u32;
    }
    if dim == 2 {
        // Planar triangles in z = 0, up to rounding relative to the extent.
        let extent = used.iter().flat_map(|&i| raw.nodes[i].xyz[..2].iter().map(|x| x.abs())).fold(1.0f64, f64::max);
        if let Some(&i) = used.iter().find(|&&i| raw.nodes[i].xyz[2].abs() > 1e-12 * extent) {
            let n = &raw.nodes[i];
            return Err(loc.error(
                n.pos,
                format!(
                    "node {} has z = {}: a triangle mesh must lie in the z = 0 plane (for a 3-D model, the file \
                     has no tetrahedra: when a model has physical groups, Gmsh saves only their elements; add a \
                     `Physical Volume` holding the domain)",
                    n.tag, n.xyz[2]
                ),
            ));
        }
    }
    let mut coords = Vec::with_capacity(used.len() * dim);
    for &i in &used {
        coords.extend_from_slice(&raw.nodes[i].xyz[..dim]);
    }

    // Cells, oriented positively.
    let mut cells = Vec::with_capacity(cells_raw.len() * nv);
    for (v, pos) in &cells_raw {
        let mut c = [0u32; 4];
        let mut p = [[0.0; 3]; 4];
        for k in 0..nv {
            c[k] = number[v[k]];
            p[k] = raw.nodes[v[k]].xyz;
        }
        let mut m = crate::signed_measure(dim, &p);
        if m < 0.0 {
            c.swap(1, 2);
            p.swap(1, 2);
            // Measured again as `Mesh::check` will: in 3-D the swapped
            // order's rounding can differ, and a nearly flat cell's sign
            // with it.
            m = crate::signed_measure(dim, &p);
        }
        if !(m > 0.0 && m.is_finite()) {
            return Err(
                loc.error(*pos, format!("cell has zero or invalid {}", if dim == 2 { "area" } else { "volume" }))
            );
        }
        cells.extend_from_slice(&c[..nv]);
    }

    // Faces with one cell are the boundary facets.
    let faces = local_faces(dim);
    let boundary = match crate::faces::faces(loc.name, dim, &cells, false) {
        Ok(f) => f.boundary,
        Err(FacesError::OutOfMemory(e)) => return Err(e),
        Err(FacesError::SharedByMore { cell, .. }) => {
            return Err(loc.error(cells_raw[cell as usize].1, "a face is shared by more than two cells"))
        }
    };
    let mut facets = Vec::with_capacity(boundary.len() * dim);
    let mut facet_cells = Vec::with_capacity(boundary.len());
    let mut facet_of: HashMap<[u32; 3], u32> = HashMap::with_capacity(boundary.len());
    for (k, &(c, l)) in boundary.iter().enumerate() {
        let cell = &cells[c as usize * nv..][..nv];
        let fv: Vec<u32> = faces[l as usize].iter().map(|&i| cell[i]).collect();
        facet_of.insert(face_key(&fv), k as u32);
        facets.extend_from_slice(&fv);
        facet_cells.push(c);
    }

    // Physical groups: (dimension, tag) -> entities.
    let mut phys: BTreeMap<(usize, i32), Vec<u32>> = BTreeMap::new();
    // Facet elements in groups that are no boundary face: interior faces
    // (an interface inside the domain), found after this loop, or errors.
    let mut inside: Vec<(&parse::Element, [u32; 3])> = Vec::new();
    for (c, tags) in cell_phys.iter().enumerate() {
        for &t in tags {
            phys.entry((dim, t)).or_default().push(c as u32);
        }
    }
    // Lower-dimensional elements matter only through their groups: those
    // in none (Gmsh saves every element of a model without physical
    // groups: the centre point of a circle's arcs, interior curves) are
    // passed over.
    for e in raw.elements.iter().filter(|e| e.ty != cell_ty && !e.physical.is_empty()) {
        let edim = dim_of(e.ty);
        if edim > dim {
            continue; // unreachable: the cell type is the highest present
        }
        let v = lookup(e)?;
        let k = nodes_per(e.ty).unwrap_or(0);
        let mut vs = Vec::with_capacity(k);
        for &i in &v[..k] {
            if number[i] == u32::MAX {
                return Err(loc.error(
                    e.pos,
                    format!(
                        "an element of physical {} refers to node {}, which no cell uses (a construction \
                         point, or an entity not embedded in the meshed domain: leave it out of the physical \
                         groups, or embed it with `Point{{..}} In Surface{{..}}` / `Curve{{..}} In Surface{{..}}`)",
                        group_list(edim, &e.physical, &raw.names),
                        raw.nodes[i].tag
                    ),
                ));
            }
            vs.push(number[i]);
        }
        if edim == dim - 1 {
            let key = face_key(&vs);
            match facet_of.get(&key) {
                Some(&f) => {
                    for &t in e.physical.iter() {
                        phys.entry((edim, t)).or_default().push(f);
                    }
                }
                None => inside.push((e, key)),
            }
        } else {
            for &t in e.physical.iter() {
                phys.entry((edim, t)).or_default().extend(&vs);
            }
        }
    }
    // The interior faces, numbered as `Mesh::interior_facets` numbers them
    // (the same face table over the same cells), only for a file with
    // facet elements inside: finding them sorts every face again.
    let mut phys_interior: BTreeMap<(usize, i32), Vec<u32>> = BTreeMap::new();
    let interior = match inside.is_empty() {
        true => Vec::new(),
        false => match crate::faces::faces(loc.name, dim, &cells, true) {
            Ok(f) => f.interior,
            Err(FacesError::OutOfMemory(e)) => return Err(e),
            // (The first search returned this already; kept as an error.)
            Err(FacesError::SharedByMore { cell, .. }) => {
                return Err(loc.error(cells_raw[cell as usize].1, "a face is shared by more than two cells"))
            }
        },
    };
    if !inside.is_empty() {
        let wanted: HashSet<[u32; 3]> = inside.iter().map(|&(_, key)| key).collect();
        let mut interior_of: HashMap<[u32; 3], u32> = HashMap::with_capacity(wanted.len());
        for (k, &(c, l, _)) in interior.iter().enumerate() {
            let cell = &cells[c as usize * nv..][..nv];
            let mut fv = [0u32; 3];
            for (x, &i) in fv.iter_mut().zip(faces[l as usize].iter()) {
                *x = cell[i];
            }
            let key = face_key(&fv[..dim]);
            if wanted.contains(&key) {
                interior_of.insert(key, k as u32);
            }
        }
        for (e, key) in inside {
            let Some(&f) = interior_of.get(&key) else {
                let k = nodes_per(e.ty).unwrap_or(0);
                let v = lookup(e)?;
                return Err(loc.error(
                    e.pos,
                    format!(
                        "a facet element of physical {} is not a face of any cell (its nodes {} are no \
                         cell's {})",
                        group_list(dim - 1, &e.physical, &raw.names),
                        v[..k].iter().map(|&i| raw.nodes[i].tag.to_string()).collect::<Vec<_>>().join(", "),
                        if dim == 2 { "edge" } else { "face" }
                    ),
                ));
            };
            for &t in e.physical.iter() {
                phys_interior.entry((dim - 1, t)).or_default().push(f);
            }
        }
    }
    // A 2.2 partitioned mesh saved with `Mesh.PartitionOldStyleMsh2 = 0`:
    // Gmsh moves the elements into new groups `_part{..}_physical{..}_dim{..}`
    // and leaves the model's named groups empty.
    if raw.v2 && raw.names.iter().any(|n| n.2.starts_with("_part{") && n.2.contains("}_physical{")) {
        let empty = raw.names.iter().find(|(d, t, name, _)| {
            let key = (*d as usize, *t);
            *d as usize <= dim
                && !name.starts_with("_part{")
                && phys.get(&key).is_none_or(|e| e.is_empty())
                && !phys_interior.contains_key(&key)
        });
        if let Some((d, t, name, pos)) = empty {
            return Err(loc.error(
                *pos,
                format!(
                    "physical {d}-D group {t} (`{name}`) has no elements in the file: Gmsh saved this partitioned \
                     mesh in format 2.2 with `Mesh.PartitionOldStyleMsh2 = 0`, which moves every element into new \
                     groups `_part{{..}}_physical{{..}}_dim{{..}}`; save it in format 4.1 (`-format msh41`), or \
                     with `Mesh.PartitionOldStyleMsh2 = 1` (Gmsh's default)"
                ),
            ));
        }
    }
    let mut names: HashMap<(usize, i32), String> = HashMap::new();
    for (d, t, name, pos) in &raw.names {
        let d = *d as usize;
        if names.insert((d, *t), name.clone()).is_some() {
            return Err(loc.error(*pos, format!("physical group {d}-D {t} is named twice")));
        }
        if d <= dim {
            phys.entry((d, *t)).or_default();
        }
    }
    for &key in phys_interior.keys() {
        phys.entry(key).or_default();
    }
    let mut groups = Vec::new();
    for ((d, t), mut ents) in phys {
        ents.sort_unstable();
        ents.dedup();
        let name = names.get(&(d, t)).cloned().unwrap_or_else(|| format!("gmsh:{d}:{t}"));
        if d == dim {
            groups.push(Group { name, kind: EntityKind::Cell, entities: ents });
        } else if d + 1 == dim {
            // The group's boundary facets, its interior ones (an interface,
            // or a curve that crosses the domain), and the vertices of both.
            let mut inner = phys_interior.remove(&(d, t)).unwrap_or_default();
            inner.sort_unstable();
            inner.dedup();
            let cells = &cells;
            let inner_vertices = inner.iter().flat_map(|&f| {
                let (c, l, _) = interior[f as usize];
                faces[l as usize].iter().map(move |&i| cells[c as usize * nv + i])
            });
            let mut verts: Vec<u32> = ents
                .iter()
                .flat_map(|&f| facets[f as usize * dim..][..dim].iter().copied())
                .chain(inner_vertices)
                .collect();
            verts.sort_unstable();
            verts.dedup();
            groups.push(Group { name: format!("{name}{VERTICES_SUFFIX}"), kind: EntityKind::Vertex, entities: verts });
            // A group wholly inside the domain has no boundary facet group.
            if !ents.is_empty() || inner.is_empty() {
                groups.push(Group { name: name.clone(), kind: EntityKind::Facet, entities: ents });
            }
            if !inner.is_empty() {
                groups.push(Group { name, kind: EntityKind::InteriorFacet, entities: inner });
            }
        } else {
            groups.push(Group { name, kind: EntityKind::Vertex, entities: ents });
        }
    }
    Ok(Mesh { dim, coords, cells, facets, facet_cells, groups: merge_groups_of_one_name(groups) })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn opening_refuses_a_fifo_without_waiting_for_a_writer() {
        // `read_file` checks the path before opening it, but a FIFO put in
        // the file's place between that check and the open made the open
        // wait forever: the open itself must not block.
        let dir = std::env::temp_dir().join(format!("parloop-gmsh-open-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("swapped.msh");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        let (send, recv) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || send.send(open_regular(&path).map(|_| ()).unwrap_err().to_string()));
        let e = recv.recv_timeout(std::time::Duration::from_secs(20)).expect("the open of a FIFO returned");
        assert!(e.starts_with("not a regular file (a FIFO"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// The groups sorted by name, those of one name and kind merged. Gmsh
/// lets physical groups share a name (one in each dimension, or two tags
/// of one dimension): a physical point and a physical curve in 3-D both
/// called `wall` give vertices, one group of them, so that
/// [`Mesh::group_of`] sees all; of different kinds (a physical point and
/// a physical curve `wall` in 2-D: vertices and facets) they stay apart,
/// as a physical curve's boundary and interior facets do.
fn merge_groups_of_one_name(mut groups: Vec<Group>) -> Vec<Group> {
    groups.sort_by(|a, b| (a.name.as_str(), a.kind as u8).cmp(&(b.name.as_str(), b.kind as u8)));
    let mut merged: Vec<Group> = Vec::with_capacity(groups.len());
    let mut extended = false; // the last group took another's entities
    for g in groups {
        match merged.last_mut() {
            Some(last) if last.name == g.name && last.kind == g.kind => {
                last.entities.extend(g.entities);
                extended = true;
            }
            _ => {
                sort_merged(merged.last_mut(), &mut extended);
                merged.push(g);
            }
        }
    }
    sort_merged(merged.last_mut(), &mut extended);
    merged
}

/// Sorts a merged group's entities once, after its whole run (sorting
/// at each merge was quadratic in a file of many groups of one name).
fn sort_merged(group: Option<&mut Group>, extended: &mut bool) {
    if let (Some(g), true) = (group, *extended) {
        g.entities.sort_unstable();
        g.entities.dedup();
    }
    *extended = false;
}

/// An element's physical groups for a message, by name where
/// `$PhysicalNames` gives one (tags are per dimension, so a bare tag is
/// ambiguous): ``1-D group 7 (`inlet`)`` or ``1-D groups 7, 9``.
fn group_list(dim: usize, tags: &[i32], names: &[(i32, i32, String, usize)]) -> String {
    let one = |t: &i32| match names.iter().find(|n| n.0 as usize == dim && n.1 == *t) {
        Some(n) => format!("{t} (`{}`)", n.2),
        None => t.to_string(),
    };
    let plural = if tags.len() == 1 { "" } else { "s" };
    format!("{dim}-D group{plural} {}", tags.iter().map(one).collect::<Vec<_>>().join(", "))
}
