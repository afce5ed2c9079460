//! Reading the sections of a `.msh` file (2.2 and 4.1, ASCII and binary)
//! into plain records; `super::build` turns them into a [`crate::Mesh`].
//!
//! Every count read from the file is a claim, not a fact: loops over it
//! consume input on each turn (so they end at the end of the file), and
//! vectors reserve at most what the rest of the file could hold, fallibly.
//!
//! Text records are lines: a node, an element, a block header, an entity
//! must be on one line, so that a value too few or too many is reported
//! on its own line rather than shifting the records after it.

use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use parloop::Error;

/// A node as read: its Gmsh tag, coordinates and where it was read.
pub(crate) struct Node {
    pub tag: u64,
    pub xyz: [f64; 3],
    pub pos: usize,
}

/// An element of a supported type, as read.
pub(crate) struct Element {
    /// Gmsh element type: 1 (line), 2 (triangle), 4 (tetrahedron), 15 (point).
    pub ty: i32,
    /// Node tags; the first `nodes_per(ty)` are meaningful.
    pub nodes: [u64; 4],
    /// Physical tags (of dimension `dim_of(ty)`); shared by the elements of
    /// one 4.1 entity, so that a long list is not copied per element.
    pub physical: Rc<[i32]>,
    /// Where the element starts (for errors).
    pub pos: usize,
}

/// Everything the mesh is built from.
pub(crate) struct Raw {
    pub nodes: Vec<Node>,
    pub elements: Vec<Element>,
    /// `$PhysicalNames`: (dimension, tag, name, where).
    pub names: Vec<(i32, i32, String, usize)>,
    /// A 2.x file (elements carry their physical tag themselves).
    pub v2: bool,
    /// 4.1: the number of volume entities `$Entities` lists, and where
    /// its counts are (`None` in a 2.x file or one without `$Entities`).
    pub volumes: Option<(u64, usize)>,
}

/// Nodes of a supported element type (the only ones parloop meshes use:
/// first-order simplices and points).
pub(crate) fn nodes_per(ty: i32) -> Option<usize> {
    match ty {
        1 => Some(2),
        2 => Some(3),
        4 => Some(4),
        15 => Some(1),
        _ => None,
    }
}

/// Dimension of a supported element type.
pub(crate) fn dim_of(ty: i32) -> usize {
    match ty {
        1 => 1,
        2 => 2,
        4 => 3,
        _ => 0,
    }
}

/// Where an error is: a 1-based line for text files, a byte offset for
/// binary ones (whose text parts also count in bytes, so that one file
/// has one kind of position).
pub(crate) struct Locator<'a> {
    pub name: &'a str,
    pub data: &'a [u8],
    pub binary: bool,
}

impl Locator<'_> {
    pub(crate) fn error(&self, pos: usize, reason: impl Into<String>) -> Error {
        let pos = pos.min(self.data.len());
        if self.binary {
            Error::InputAtByte { source_name: self.name.to_string(), offset: pos, reason: reason.into() }
        } else {
            Error::Input { source_name: self.name.to_string(), line: self.line(pos), reason: reason.into() }
        }
    }

    fn line(&self, pos: usize) -> usize {
        1 + self.data[..pos.min(self.data.len())].iter().filter(|&&b| b == b'\n').count()
    }

    /// `name:line` or `name: byte offset`, as errors name a position.
    fn place(&self, pos: usize) -> String {
        if self.binary {
            format!("{}: byte {}", self.name, pos.min(self.data.len()))
        } else {
            format!("{}:{}", self.name, self.line(pos))
        }
    }
}

/// The longest section name read (Gmsh's are at most 22 bytes); a longer
/// one is an error rather than something to search the file for.
const MAX_SECTION_NAME: usize = 64;

#[derive(Clone, Copy, PartialEq)]
enum Version {
    V2,
    V41,
}

struct Cursor<'a> {
    loc: Locator<'a>,
    pos: usize,
    big_endian: bool,
    /// Bytes of a binary `size_t` (4.1 files).
    size_t: usize,
    /// Where the text record being read starts: its tokens must be on its
    /// line (`None` between records, and in binary data).
    record: Option<usize>,
}

impl<'a> Cursor<'a> {
    fn data(&self) -> &'a [u8] {
        self.loc.data
    }

    fn remaining(&self) -> usize {
        self.data().len() - self.pos
    }

    fn err(&self, pos: usize, reason: impl Into<String>) -> Error {
        self.loc.error(pos, reason)
    }

    /// A capacity for `claimed` items of at least `min_bytes` each that the
    /// rest of the file could really hold.
    fn cap(&self, claimed: u64, min_bytes: usize) -> usize {
        let fits = self.remaining() / min_bytes.max(1);
        usize::try_from(claimed).unwrap_or(usize::MAX).min(fits)
    }

    /// Reserves room in `v` for `claimed` more items, each of which takes
    /// at least `min_bytes` bytes of the file (the smallest record that
    /// holds one), as many as the rest of the file could hold: reading
    /// them then allocates no more. An allocation that fails is an error.
    fn reserve<T>(&self, v: &mut Vec<T>, claimed: u64, min_bytes: usize, what: &str) -> Result<(), Error> {
        let n = self.cap(claimed, min_bytes);
        v.try_reserve(n).map_err(|_| Error::OutOfMemory {
            what: format!("{}: {n} {what}", self.loc.place(self.pos)),
            bytes: n.saturating_add(v.len()).saturating_mul(std::mem::size_of::<T>()),
        })
    }

    /// Skips whitespace; inside a text record, not past the end of its line.
    fn skip_ws(&mut self) {
        let data = self.data();
        if self.record.is_some() {
            while self.pos < data.len() && data[self.pos] != b'\n' && data[self.pos].is_ascii_whitespace() {
                self.pos += 1;
            }
        } else {
            while self.pos < data.len() && data[self.pos].is_ascii_whitespace() {
                self.pos += 1;
            }
        }
    }

    /// Starts a text record (a line) at the next token and returns where it
    /// starts; in binary data, only returns the position.
    fn begin_record(&mut self, text: bool) -> usize {
        if text {
            self.record = None;
            self.skip_ws();
            self.record = Some(self.pos);
        }
        self.pos
    }

    /// Ends the text record begun last: nothing but spaces may follow its
    /// last value on its line. `what` names the record in the error.
    fn end_record(&mut self, what: impl FnOnce() -> String) -> Result<(), Error> {
        if let Some(start) = self.record {
            self.skip_ws();
            if self.pos < self.data().len() && self.data()[self.pos] != b'\n' {
                let (_, t) = self.token("a value")?;
                return Err(self.err(start, format!("`{}` after the last value of {}", clip(t), what())));
            }
            self.record = None;
        }
        Ok(())
    }

    fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.pos >= self.data().len()
    }

    /// The next whitespace-separated word and where it starts.
    fn token(&mut self, what: &str) -> Result<(usize, &'a str), Error> {
        self.skip_ws();
        let start = self.pos;
        let data = self.data();
        while self.pos < data.len() && !data[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(match self.record {
                Some(line) if start < data.len() => self.err(line, format!("the line ends where {what} was expected")),
                _ => self.err(start, format!("file ends where {what} was expected")),
            });
        }
        std::str::from_utf8(&data[start..self.pos])
            .map(|t| (start, t))
            .map_err(|_| self.err(start, format!("{what}: not text")))
    }

    fn expect(&mut self, word: &str) -> Result<(), Error> {
        let (pos, t) = self.token(word)?;
        if t == word {
            Ok(())
        } else {
            Err(self.err(pos, format!("expected `{word}`, found `{}`", clip(t))))
        }
    }

    /// Consumes the rest of the current line (spaces and a `\r` allowed)
    /// and its `\n`: binary data starts right after it.
    fn end_line(&mut self) -> Result<(), Error> {
        let data = self.data();
        while self.pos < data.len() && (data[self.pos] == b' ' || data[self.pos] == b'\r') {
            self.pos += 1;
        }
        match data.get(self.pos) {
            Some(b'\n') => {
                self.pos += 1;
                Ok(())
            }
            Some(_) => Err(self.err(self.pos, "expected the end of the line")),
            None => Err(self.err(self.pos, "file ends where a line end was expected")),
        }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Error> {
        if self.remaining() < n {
            return Err(
                self.err(self.pos, format!("file ends inside {what} ({n} bytes needed, {} left)", self.remaining()))
            );
        }
        let s = &self.data()[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn ascii_int(&mut self, what: &str) -> Result<i64, Error> {
        let (pos, t) = self.token(what)?;
        t.parse::<i64>().map_err(|_| self.bad_token(pos, t, what, "an integer"))
    }

    fn ascii_f64(&mut self, what: &str) -> Result<f64, Error> {
        let (pos, t) = self.token(what)?;
        match t.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(x),
            _ => Err(self.bad_token(pos, t, what, "a finite number")),
        }
    }

    /// Token `t` at `pos` is not `expected`: a file cut short inside the
    /// token (it runs to the file's end, `5.55e` of `5.55e-17`) says so,
    /// rather than blaming the number.
    fn bad_token(&self, pos: usize, t: &str, what: &str, expected: &str) -> Error {
        if self.pos >= self.data().len() {
            self.err(pos, format!("file ends inside {what} (`{}`): the file is truncated", clip(t)))
        } else {
            self.err(pos, format!("{what}: `{}` is not {expected}", clip(t)))
        }
    }

    fn bin_i32(&mut self, what: &str) -> Result<i32, Error> {
        let b: [u8; 4] = self.take(4, what)?.try_into().expect("take returned 4 bytes");
        Ok(if self.big_endian { i32::from_be_bytes(b) } else { i32::from_le_bytes(b) })
    }

    fn bin_f64(&mut self, what: &str) -> Result<f64, Error> {
        let pos = self.pos;
        let b: [u8; 8] = self.take(8, what)?.try_into().expect("take returned 8 bytes");
        let x = if self.big_endian { f64::from_be_bytes(b) } else { f64::from_le_bytes(b) };
        if x.is_finite() {
            Ok(x)
        } else {
            Err(self.err(pos, format!("{what}: {x} is not a finite number")))
        }
    }

    fn bin_size(&mut self, what: &str) -> Result<u64, Error> {
        if self.size_t == 4 {
            let b: [u8; 4] = self.take(4, what)?.try_into().expect("take returned 4 bytes");
            Ok(u64::from(if self.big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) }))
        } else {
            let b: [u8; 8] = self.take(8, what)?.try_into().expect("take returned 8 bytes");
            Ok(if self.big_endian { u64::from_be_bytes(b) } else { u64::from_le_bytes(b) })
        }
    }

    /// A Gmsh `int` (tags, dimensions, types), text or binary.
    fn int(&mut self, bin: bool, what: &str) -> Result<i32, Error> {
        let pos = self.pos;
        if bin {
            return self.bin_i32(what);
        }
        let v = self.ascii_int(what)?;
        i32::try_from(v).map_err(|_| self.err(pos, format!("{what}: {v} does not fit a 32-bit int")))
    }

    /// A Gmsh `size_t` (counts, 4.1 node and element tags), text or binary.
    fn size(&mut self, bin: bool, what: &str) -> Result<u64, Error> {
        if bin {
            return self.bin_size(what);
        }
        let (pos, t) = self.token(what)?;
        t.parse::<u64>().map_err(|_| self.err(pos, format!("{what}: `{}` is not a non-negative integer", clip(t))))
    }

    fn real(&mut self, bin: bool, what: &str) -> Result<f64, Error> {
        if bin {
            self.bin_f64(what)
        } else {
            self.ascii_f64(what)
        }
    }

    /// Skips an unknown section up to its `$End...` line: a line that
    /// starts with `$End<name>` followed by whitespace or the end of the
    /// file. Each candidate starts at a line end and a match cannot span
    /// one, so the search is linear in the section's length.
    fn skip_section(&mut self, name: &str, start: usize) -> Result<(), Error> {
        if name.len() > MAX_SECTION_NAME {
            return Err(self.err(
                start,
                format!(
                    "section name `${}` is {} bytes long, more than the {MAX_SECTION_NAME} a section name may have",
                    clip(name),
                    name.len()
                ),
            ));
        }
        let end = format!("\n$End{name}");
        let end = end.as_bytes();
        let data = self.data();
        let mut at = self.pos;
        while let Some(i) = data[at..].iter().position(|&b| b == b'\n') {
            let line = at + i;
            let after = line + end.len();
            if data[line..].starts_with(end) && data.get(after).is_none_or(|b| b.is_ascii_whitespace()) {
                self.pos = after;
                return Ok(());
            }
            at = line + 1;
        }
        Err(self.err(start, format!("section `${}` has no `$End{}` line", clip(name), clip(name))))
    }
}

/// At most 40 characters of a word from the file, for messages.
fn clip(s: &str) -> String {
    if s.chars().count() > 40 {
        let head: String = s.chars().take(40).collect();
        format!("{head}...")
    } else {
        s.to_string()
    }
}

/// Reads the file's records; `name` names it in errors.
pub(crate) fn parse<'a>(name: &'a str, data: &'a [u8]) -> Result<(Raw, Locator<'a>), Error> {
    // A UTF-8 byte-order mark (some editors add one on saving) is not
    // content: without this, "expected `$MeshFormat`, found `$MeshFormat`".
    let bom = if data.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 };
    let mut c =
        Cursor { loc: Locator { name, data, binary: false }, pos: bom, big_endian: false, size_t: 8, record: None };
    c.expect("$MeshFormat")?;
    let (vpos, v) = c.token("the format version")?;
    let version = match v {
        "2" | "2.0" | "2.1" | "2.2" => Version::V2,
        "4.1" => Version::V41,
        _ => return Err(c.err(vpos, format!("MSH format version `{}` is not read (2.2 and 4.1 are)", clip(v)))),
    };
    let tpos = c.pos;
    let binary = match c.ascii_int("the file type")? {
        0 => false,
        1 => true,
        t => return Err(c.err(tpos, format!("file type {t}: expected 0 (ASCII) or 1 (binary)"))),
    };
    c.loc.binary = binary;
    let dpos = c.pos;
    let data_size = c.ascii_int("the data size")?;
    if binary {
        // 2.x: the size of a double; 4.1: the size of a size_t (Gmsh writes
        // doubles as 8 bytes in both).
        match (version, data_size) {
            (Version::V2, 8) => {}
            (Version::V41, 4 | 8) => c.size_t = data_size as usize,
            _ => return Err(c.err(dpos, format!("data size {data_size} is not supported for a binary file"))),
        }
        c.end_line()?;
        let opos = c.pos;
        let one = c.take(4, "the endianness marker")?;
        if one == 1i32.to_le_bytes() {
            c.big_endian = false;
        } else if one == 1i32.to_be_bytes() {
            c.big_endian = true;
        } else {
            return Err(c.err(opos, "the endianness marker is not a binary 1"));
        }
    }
    c.expect("$EndMeshFormat")?;

    let mut raw =
        Raw { nodes: Vec::new(), elements: Vec::new(), names: Vec::new(), v2: version == Version::V2, volumes: None };
    // 4.1: the physical tags of each entity, once `$Entities` is read.
    let mut entities: Option<EntityTags> = None;
    // The sections read, each at most once: a second would add to or
    // replace what the first said.
    let mut seen: Vec<&str> = vec!["MeshFormat"];
    while !c.at_end() {
        let (spos, t) = c.token("a section")?;
        let Some(section) = t.strip_prefix('$') else {
            return Err(c.err(spos, format!("expected a `$Section`, found `{}`", clip(t))));
        };
        // Sections that change what the nodes are: skipping them would read
        // another mesh than the file's, silently.
        if section == "Periodic" {
            return Err(c.err(
                spos,
                "the mesh is periodic (`$Periodic`): parloop does not identify nodes, and reading the file \
                 without the section would give a domain with boundaries where the file has none; remove the \
                 `Periodic` constraints from the model, or delete the `$Periodic` section to read it as \
                 not periodic",
            ));
        }
        if section == "ParametricNodes" {
            return Err(c.err(
                spos,
                "the nodes are in `$ParametricNodes` (Gmsh's `Mesh.SaveParametric = 1` in format 2.2), which \
                 is not read: save with `Mesh.SaveParametric = 0`, or in format 4.1",
            ));
        }
        let known = matches!(section, "MeshFormat" | "PhysicalNames" | "Nodes" | "Elements")
            || (matches!(section, "Entities" | "PartitionedEntities") && version == Version::V41);
        if !known {
            c.skip_section(section, spos)?;
            continue;
        }
        if seen.contains(&section) {
            return Err(c.err(spos, format!("section `${section}` appears twice")));
        }
        seen.push(section);
        match section {
            "PhysicalNames" => physical_names(&mut c, &mut raw)?,
            "Entities" | "PartitionedEntities" => {
                if seen.contains(&"Elements") {
                    return Err(c.err(
                        spos,
                        format!(
                            "section `${section}` comes after `$Elements`, whose element blocks take their \
                             physical groups from it (Gmsh writes `${section}` first)"
                        ),
                    ));
                }
                // A partitioned file's elements are in the partition
                // entities: their table replaces the model's.
                let partitioned = section == "PartitionedEntities";
                let (table, volumes) = entities41(&mut c, binary, partitioned)?;
                // The model's volumes (a partitioned file lists them in
                // both sections).
                if raw.volumes.is_none_or(|(n, _)| n < volumes.0) {
                    raw.volumes = Some(volumes);
                }
                if partitioned || !seen.contains(&"PartitionedEntities") {
                    entities = Some(table);
                }
            }
            "Nodes" => match version {
                Version::V2 => nodes2(&mut c, binary, &mut raw)?,
                Version::V41 => nodes41(&mut c, binary, &mut raw)?,
            },
            _ => match version {
                Version::V2 => elements2(&mut c, binary, &mut raw)?,
                Version::V41 => elements41(&mut c, binary, entities.as_ref(), &mut raw)?,
            },
        }
        c.expect(&format!("$End{section}"))?;
    }
    for which in ["Nodes", "Elements"] {
        if !seen.contains(&which) {
            return Err(c.err(c.pos, format!("the file has no ${which} section")));
        }
    }
    // A 4.1 file gives its elements physical groups through `$Entities`:
    // without it, named groups would all be empty.
    if let (Version::V41, None, Some(first)) = (version, &entities, raw.names.first()) {
        return Err(c.err(
            first.3,
            "the file names physical groups but has no `$Entities` section to say which elements are in them",
        ));
    }
    Ok((raw, c.loc))
}

fn physical_names(c: &mut Cursor, raw: &mut Raw) -> Result<(), Error> {
    c.begin_record(true);
    let n = c.size(false, "the number of physical names")?;
    c.end_record(|| "the number of physical names".into())?;
    for _ in 0..n {
        let pos = c.begin_record(true);
        let dim = c.int(false, "a physical group's dimension")?;
        if !(0..=3).contains(&dim) {
            return Err(c.err(pos, format!("physical group dimension {dim} is not 0 to 3")));
        }
        let tag = c.int(false, "a physical tag")?;
        c.skip_ws();
        let data = c.data();
        let npos = c.pos;
        if data.get(npos) != Some(&b'"') {
            return Err(c.err(npos, "a physical name must be in double quotes"));
        }
        let len = data[npos + 1..]
            .iter()
            .position(|&b| b == b'"' || b == b'\n')
            .filter(|&i| data[npos + 1 + i] == b'"')
            .ok_or_else(|| c.err(npos, "a physical name has no closing quote on its line"))?;
        let name = std::str::from_utf8(&data[npos + 1..npos + 1 + len])
            .map_err(|_| c.err(npos, "a physical name is not UTF-8"))?;
        c.pos = npos + len + 2;
        c.end_record(|| "a physical name's line".into())?;
        raw.names.push((dim, tag, name.to_string(), pos));
    }
    Ok(())
}

/// The physical tags of each (dimension, entity tag) of a 4.1 file, shared
/// by the entity's elements.
type EntityTags = HashMap<(i32, i32), Rc<[i32]>>;

/// 4.1 `$Entities`, or `$PartitionedEntities` when `partitioned`: the
/// physical tags of each (dimension, entity tag), and the number of volume
/// entities with where the counts are.
///
/// A partitioned file's elements belong to partition entities, each a
/// part of a model entity (its parent) with the parent's physical tags.
/// An entity on a partition boundary has a parent of a higher dimension
/// (the lines between two partitions of a surface): its tags are the
/// parent's groups, of the parent's dimension, so its elements are in
/// none of this dimension's groups.
fn entities41(c: &mut Cursor, bin: bool, partitioned: bool) -> Result<(EntityTags, (u64, usize)), Error> {
    if bin {
        c.end_line()?;
    }
    let start = c.pos;
    // The partitions the file says it has, and those its highest-dimension
    // entities are in: a file of a split mesh (`Mesh.PartitionSplitMeshFiles`)
    // holds one partition's entities, a part read as if it were the whole.
    let mut partitions = 0u64;
    let mut present: (i32, BTreeSet<i32>) = (-1, BTreeSet::new());
    if partitioned {
        c.begin_record(!bin);
        partitions = c.size(bin, "the number of partitions")?;
        c.end_record(|| "the number of partitions".into())?;
        c.begin_record(!bin);
        let ghosts = c.size(bin, "the number of ghost entities")?;
        c.end_record(|| "the number of ghost entities".into())?;
        for _ in 0..ghosts {
            c.begin_record(!bin);
            c.int(bin, "a ghost entity tag")?;
            c.int(bin, "a ghost entity's partition")?;
            c.end_record(|| "a ghost entity".into())?;
        }
    }
    let cpos = c.begin_record(!bin);
    let mut counts = [0u64; 4];
    for (d, n) in counts.iter_mut().enumerate() {
        *n = c.size(bin, &format!("the number of {d}-D entities"))?;
    }
    c.end_record(|| "the numbers of entities".into())?;
    let mut map = HashMap::new();
    for (dim, &n) in counts.iter().enumerate() {
        for _ in 0..n {
            let pos = c.begin_record(!bin);
            let tag = c.int(bin, "an entity tag")?;
            let parent_dim = if partitioned {
                let parent_dim = c.int(bin, "a partition entity's parent dimension")?;
                c.int(bin, "a partition entity's parent tag")?;
                let parts = c.size(bin, "a partition entity's number of partitions")?;
                if present.0 < dim as i32 {
                    present = (dim as i32, BTreeSet::new());
                }
                for _ in 0..parts {
                    let part = c.int(bin, "a partition tag")?;
                    present.1.insert(part);
                }
                parent_dim
            } else {
                dim as i32
            };
            // A point has its coordinates, other entities their bounding box.
            let reals = if dim == 0 { 3 } else { 6 };
            for _ in 0..reals {
                c.real(bin, "an entity coordinate")?;
            }
            let np = c.size(bin, "an entity's number of physical tags")?;
            let mut phys = Vec::new();
            c.reserve(&mut phys, np, if bin { 4 } else { 2 }, "physical tags")?;
            for _ in 0..np {
                phys.push(c.int(bin, "a physical tag")?);
            }
            if dim > 0 {
                let nb = c.size(bin, "an entity's number of bounding entities")?;
                for _ in 0..nb {
                    c.int(bin, "a bounding entity tag")?;
                }
            }
            c.end_record(|| format!("entity {dim}-D {tag}"))?;
            if parent_dim != dim as i32 {
                phys.clear(); // the parent's groups (see above)
            }
            phys.sort_unstable();
            phys.dedup();
            if map.insert((dim as i32, tag), phys.into()).is_some() {
                return Err(c.err(pos, format!("entity {dim}-D {tag} is listed twice")));
            }
        }
    }
    if partitioned && present.1.len() as u64 != partitions {
        return Err(c.err(
            start,
            format!(
                "the file is {} of the {partitions} partitions of a mesh (its {}-D entities are in partitions \
                 {:?}): it is one file of a split mesh (`Mesh.PartitionSplitMeshFiles`); read the mesh saved \
                 whole, partitioned or not",
                present.1.len(),
                present.0.max(0),
                present.1.iter().take(8).collect::<Vec<_>>()
            ),
        ));
    }
    Ok((map, (counts[3], cpos)))
}

fn node_tag(c: &Cursor, pos: usize, tag: i64) -> Result<u64, Error> {
    u64::try_from(tag).ok().filter(|&t| t >= 1).ok_or_else(|| c.err(pos, format!("node tag {tag} is not positive")))
}

fn nodes2(c: &mut Cursor, bin: bool, raw: &mut Raw) -> Result<(), Error> {
    c.begin_record(true);
    let n = c.size(false, "the number of nodes")?;
    c.end_record(|| "the number of nodes".into())?;
    if bin {
        c.end_line()?;
    }
    // A node is at least `t x y z` and a line end, or 4 + 3 x 8 bytes.
    c.reserve(&mut raw.nodes, n, if bin { 28 } else { 8 }, "nodes")?;
    for _ in 0..n {
        let pos = c.begin_record(!bin);
        let tag = if bin { i64::from(c.bin_i32("a node tag")?) } else { c.ascii_int("a node tag")? };
        let tag = node_tag(c, pos, tag)?;
        let mut xyz = [0.0; 3];
        for x in &mut xyz {
            *x = c.real(bin, "a node coordinate")?;
        }
        c.end_record(|| format!("node {tag}"))?;
        raw.nodes.push(Node { tag, xyz, pos });
    }
    Ok(())
}

fn nodes41(c: &mut Cursor, bin: bool, raw: &mut Raw) -> Result<(), Error> {
    if bin {
        c.end_line()?;
    }
    let hpos = c.begin_record(!bin);
    let blocks = c.size(bin, "the number of node blocks")?;
    let total = c.size(bin, "the number of nodes")?;
    c.size(bin, "the smallest node tag")?;
    c.size(bin, "the largest node tag")?;
    c.end_record(|| "the node section's header".into())?;
    // A node is at least a tag and `x y z`, each a character and a space,
    // or a size_t and 3 x 8 bytes.
    let per_node = if bin { c.size_t + 24 } else { 8 };
    c.reserve(&mut raw.nodes, total, per_node, "nodes")?;
    let mut read = 0u64;
    for _ in 0..blocks {
        let bpos = c.begin_record(!bin);
        let dim = c.int(bin, "a node block's entity dimension")?;
        c.int(bin, "a node block's entity tag")?;
        let parametric = c.int(bin, "a node block's parametric flag")?;
        if !(0..=3).contains(&dim) || !(0..=1).contains(&parametric) {
            return Err(c.err(bpos, format!("node block: dimension {dim} or parametric flag {parametric} is invalid")));
        }
        let n = c.size(bin, "a node block's number of nodes")?;
        c.end_record(|| "a node block's header".into())?;
        let mut tags = Vec::new();
        c.reserve(&mut tags, n, per_node, "node tags")?;
        // The reservation from the header's total may fall short of what
        // the blocks hold (a lying total): the nodes can take no more than
        // the block's tags left room for.
        c.reserve(&mut raw.nodes, n, per_node, "nodes")?;
        for _ in 0..n {
            let pos = c.begin_record(!bin);
            let t = c.size(bin, "a node tag")?;
            if t == 0 {
                return Err(c.err(pos, "node tag 0 is not positive"));
            }
            c.end_record(|| format!("node tag {t}'s line"))?;
            tags.push((t, pos));
        }
        let extra = if parametric == 1 { dim as usize } else { 0 };
        for (tag, pos) in tags {
            c.begin_record(!bin);
            let mut xyz = [0.0; 3];
            for x in &mut xyz {
                *x = c.real(bin, "a node coordinate")?;
            }
            for _ in 0..extra {
                c.real(bin, "a parametric coordinate")?;
            }
            c.end_record(|| format!("node {tag}'s coordinates"))?;
            raw.nodes.push(Node { tag, xyz, pos });
        }
        read = read.saturating_add(n);
    }
    if read != total {
        return Err(c.err(hpos, format!("the header announces {total} nodes, the blocks hold {read}")));
    }
    Ok(())
}

fn unsupported(c: &Cursor, pos: usize, ty: i32) -> Error {
    let name = match ty {
        1 => " (line)",
        2 => " (triangle)",
        3 => " (quadrangle)",
        4 => " (tetrahedron)",
        5 => " (hexahedron)",
        6 => " (prism)",
        7 => " (pyramid)",
        8 => " (3-node line)",
        9 => " (6-node triangle)",
        10 => " (9-node quadrangle)",
        11 => " (10-node tetrahedron)",
        15 => " (point)",
        _ => "",
    };
    let hint = match ty {
        3 | 5..=7 => {
            ": Gmsh makes these from `Recombine` (on surfaces or volumes, in an `Extrude`'s `Layers`, or \
             `Mesh.RecombineAll`): remove it to mesh with triangles and tetrahedra"
        }
        8..=11 => ": second-order elements are not read; set `Mesh.ElementOrder = 1` (or mesh with `-order 1`)",
        _ => "",
    };
    c.err(
        pos,
        format!(
            "element type {ty}{name} is not supported (only points, lines, triangles and tetrahedra: first-order \
             simplices){hint}"
        ),
    )
}

fn elements2(c: &mut Cursor, bin: bool, raw: &mut Raw) -> Result<(), Error> {
    let hpos = c.begin_record(true);
    let n = c.size(false, "the number of elements")?;
    c.end_record(|| "the number of elements".into())?;
    if bin {
        c.end_line()?;
    }
    if !bin {
        // The shortest element line is a point's, `1 15 0 1` and a line end.
        c.reserve(&mut raw.elements, n, 9, "elements")?;
        for _ in 0..n {
            let pos = c.begin_record(true);
            let number = c.int(false, "an element tag")?;
            let tpos = {
                c.skip_ws();
                c.pos
            };
            let ty = c.int(false, "an element type")?;
            let k = nodes_per(ty).ok_or_else(|| unsupported(c, tpos, ty))?;
            let ntags = c.size(false, "an element's number of tags")?;
            let mut physical = Vec::new();
            for i in 0..ntags {
                let t = c.int(false, "an element tag")?;
                // The first tag is the physical group (0: none).
                if i == 0 && t != 0 {
                    physical.push(t);
                }
            }
            let mut nodes = [0u64; 4];
            for v in nodes.iter_mut().take(k) {
                let p = {
                    c.skip_ws();
                    c.pos
                };
                let t = c.ascii_int("an element's node")?;
                *v = node_tag(c, p, t)?;
            }
            c.end_record(|| format!("element {number} (type {ty}: {ntags} tags, {k} nodes)"))?;
            raw.elements.push(Element { ty, nodes, physical: physical.into(), pos });
        }
        return Ok(());
    }
    // Binary: blocks of `count` elements of one type with `ntags` tags each.
    let mut left = n;
    while left > 0 {
        let bpos = c.pos;
        let ty = c.bin_i32("an element block's type")?;
        let count = c.bin_i32("an element block's count")?;
        let ntags = c.bin_i32("an element block's number of tags")?;
        let k = nodes_per(ty).ok_or_else(|| unsupported(c, bpos, ty))?;
        if count <= 0 || count as u64 > left || ntags < 0 {
            return Err(c.err(
                bpos,
                format!("element block: count {count} (of {left} left) or {ntags} tags is invalid (element count {n} at byte {hpos})"),
            ));
        }
        // Each element: its number, its tags and its nodes, 4 bytes each.
        let per = 4 * (1 + ntags as usize + k);
        c.reserve(&mut raw.elements, count as u64, per, "elements")?;
        for _ in 0..count {
            let pos = c.pos;
            c.bin_i32("an element number")?;
            let mut physical = Vec::new();
            for i in 0..ntags {
                let t = c.bin_i32("an element tag")?;
                if i == 0 && t != 0 {
                    physical.push(t);
                }
            }
            let mut nodes = [0u64; 4];
            for v in nodes.iter_mut().take(k) {
                let p = c.pos;
                let t = c.bin_i32("an element's node")?;
                *v = node_tag(c, p, i64::from(t))?;
            }
            raw.elements.push(Element { ty, nodes, physical: physical.into(), pos });
        }
        left -= count as u64;
    }
    Ok(())
}

/// 4.1 `$Elements`; `entities` is `None` when the file has no `$Entities`
/// (and so no physical groups).
fn elements41(c: &mut Cursor, bin: bool, entities: Option<&EntityTags>, raw: &mut Raw) -> Result<(), Error> {
    if bin {
        c.end_line()?;
    }
    let hpos = c.begin_record(!bin);
    let blocks = c.size(bin, "the number of element blocks")?;
    let total = c.size(bin, "the number of elements")?;
    c.size(bin, "the smallest element tag")?;
    c.size(bin, "the largest element tag")?;
    c.end_record(|| "the element section's header".into())?;
    let mut read = 0u64;
    for _ in 0..blocks {
        let bpos = c.begin_record(!bin);
        let dim = c.int(bin, "an element block's entity dimension")?;
        let tag = c.int(bin, "an element block's entity tag")?;
        let ty = c.int(bin, "an element block's element type")?;
        let k = nodes_per(ty).ok_or_else(|| unsupported(c, bpos, ty))?;
        if dim as usize != dim_of(ty) {
            return Err(c.err(bpos, format!("element block of dimension {dim} holds elements of type {ty}")));
        }
        let physical: Rc<[i32]> = match entities {
            None => Rc::new([]),
            Some(map) => map.get(&(dim, tag)).cloned().ok_or_else(|| {
                c.err(
                    bpos,
                    format!(
                        "element block of entity {dim}-D {tag}, which the file's `$Entities` do not list: its physical \
                         groups are unknown"
                    ),
                )
            })?,
        };
        let n = c.size(bin, "an element block's number of elements")?;
        c.end_record(|| "an element block's header".into())?;
        // Each element: its tag and its nodes, a character and a space or
        // a size_t each. Reserved per block, where the type is known.
        c.reserve(&mut raw.elements, n, (1 + k) * if bin { c.size_t } else { 2 }, "elements")?;
        for _ in 0..n {
            let pos = c.begin_record(!bin);
            let number = c.size(bin, "an element tag")?;
            let mut nodes = [0u64; 4];
            for v in nodes.iter_mut().take(k) {
                c.skip_ws_if(!bin);
                let p = c.pos;
                let t = c.size(bin, "an element's node")?;
                if t == 0 {
                    return Err(c.err(p, "node tag 0 is not positive"));
                }
                *v = t;
            }
            c.end_record(|| format!("element {number} (type {ty}: {k} nodes)"))?;
            raw.elements.push(Element { ty, nodes, physical: Rc::clone(&physical), pos });
        }
        read = read.saturating_add(n);
    }
    if read != total {
        return Err(c.err(hpos, format!("the header announces {total} elements, the blocks hold {read}")));
    }
    Ok(())
}

impl Cursor<'_> {
    /// In text, positions name the token, not the whitespace before it.
    fn skip_ws_if(&mut self, text: bool) {
        if text {
            self.skip_ws();
        }
    }
}
