//! Reading the sections of a `.msh` file (2.2 and 4.1, ASCII and binary)
//! into plain records; `super::build` turns them into a [`crate::Mesh`].
//!
//! Every count read from the file is a claim, not a fact: loops over it
//! consume input on each turn (so they end at the end of the file), and
//! vectors reserve at most what the rest of the file could hold.

use std::collections::HashMap;
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
            let line = 1 + self.data[..pos].iter().filter(|&&b| b == b'\n').count();
            Error::Input { source_name: self.name.to_string(), line, reason: reason.into() }
        }
    }
}

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

    fn skip_ws(&mut self) {
        while self.pos < self.data().len() && self.data()[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
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
            return Err(self.err(start, format!("file ends where {what} was expected")));
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
        t.parse::<i64>().map_err(|_| self.err(pos, format!("{what}: `{}` is not an integer", clip(t))))
    }

    fn ascii_f64(&mut self, what: &str) -> Result<f64, Error> {
        let (pos, t) = self.token(what)?;
        match t.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(x),
            _ => Err(self.err(pos, format!("{what}: `{}` is not a finite number", clip(t)))),
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

    /// Skips an unknown section up to its `$End...` line.
    fn skip_section(&mut self, name: &str, start: usize) -> Result<(), Error> {
        let end = format!("$End{name}");
        let rest = &self.data()[self.pos..];
        match rest.windows(end.len()).position(|w| w == end.as_bytes()) {
            Some(i) => {
                self.pos += i + end.len();
                Ok(())
            }
            None => Err(self.err(start, format!("section `${}` has no `{}`", clip(name), clip(&end)))),
        }
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
    let mut c = Cursor { loc: Locator { name, data, binary: false }, pos: 0, big_endian: false, size_t: 8 };
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

    let mut raw = Raw { nodes: Vec::new(), elements: Vec::new(), names: Vec::new() };
    let mut entities: HashMap<(i32, i32), Rc<[i32]>> = HashMap::new();
    let (mut seen_nodes, mut seen_elements) = (false, false);
    while !c.at_end() {
        let (spos, t) = c.token("a section")?;
        let Some(section) = t.strip_prefix('$') else {
            return Err(c.err(spos, format!("expected a `$Section`, found `{}`", clip(t))));
        };
        match section {
            "PhysicalNames" => physical_names(&mut c, &mut raw)?,
            "Entities" if version == Version::V41 => entities = entities41(&mut c, binary)?,
            "Nodes" => {
                seen_nodes = true;
                match version {
                    Version::V2 => nodes2(&mut c, binary, &mut raw)?,
                    Version::V41 => nodes41(&mut c, binary, &mut raw)?,
                }
            }
            "Elements" => {
                seen_elements = true;
                match version {
                    Version::V2 => elements2(&mut c, binary, &mut raw)?,
                    Version::V41 => elements41(&mut c, binary, &entities, &mut raw)?,
                }
            }
            other => {
                let other = other.to_string();
                c.skip_section(&other, spos)?;
                continue;
            }
        }
        c.expect(&format!("$End{section}"))?;
    }
    if !seen_nodes || !seen_elements {
        let which = if seen_nodes { "$Elements" } else { "$Nodes" };
        return Err(c.err(c.pos, format!("the file has no {which} section")));
    }
    Ok((raw, c.loc))
}

fn physical_names(c: &mut Cursor, raw: &mut Raw) -> Result<(), Error> {
    let n = c.size(false, "the number of physical names")?;
    for _ in 0..n {
        let pos = c.pos;
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
        raw.names.push((dim, tag, name.to_string(), pos));
    }
    Ok(())
}

/// The physical tags of each (dimension, entity tag) of a 4.1 file, shared
/// by the entity's elements.
type EntityTags = HashMap<(i32, i32), Rc<[i32]>>;

/// 4.1 `$Entities`: the physical tags of each (dimension, entity tag).
fn entities41(c: &mut Cursor, bin: bool) -> Result<EntityTags, Error> {
    if bin {
        c.end_line()?;
    }
    let mut counts = [0u64; 4];
    for (d, n) in counts.iter_mut().enumerate() {
        *n = c.size(bin, &format!("the number of {d}-D entities"))?;
    }
    let mut map = HashMap::new();
    for (dim, &n) in counts.iter().enumerate() {
        for _ in 0..n {
            let tag = c.int(bin, "an entity tag")?;
            // A point has its coordinates, other entities their bounding box.
            let reals = if dim == 0 { 3 } else { 6 };
            for _ in 0..reals {
                c.real(bin, "an entity coordinate")?;
            }
            let np = c.size(bin, "an entity's number of physical tags")?;
            let mut phys = Vec::with_capacity(c.cap(np, 2));
            for _ in 0..np {
                phys.push(c.int(bin, "a physical tag")?);
            }
            if dim > 0 {
                let nb = c.size(bin, "an entity's number of bounding entities")?;
                for _ in 0..nb {
                    c.int(bin, "a bounding entity tag")?;
                }
            }
            phys.sort_unstable();
            phys.dedup();
            map.insert((dim as i32, tag), phys.into());
        }
    }
    Ok(map)
}

fn node_tag(c: &Cursor, pos: usize, tag: i64) -> Result<u64, Error> {
    u64::try_from(tag).ok().filter(|&t| t >= 1).ok_or_else(|| c.err(pos, format!("node tag {tag} is not positive")))
}

fn nodes2(c: &mut Cursor, bin: bool, raw: &mut Raw) -> Result<(), Error> {
    let n = c.size(false, "the number of nodes")?;
    if bin {
        c.end_line()?;
    }
    raw.nodes.reserve(c.cap(n, if bin { 28 } else { 8 }));
    for _ in 0..n {
        c.skip_ws_if(!bin);
        let pos = c.pos;
        let tag = if bin { i64::from(c.bin_i32("a node tag")?) } else { c.ascii_int("a node tag")? };
        let tag = node_tag(c, pos, tag)?;
        let mut xyz = [0.0; 3];
        for x in &mut xyz {
            *x = c.real(bin, "a node coordinate")?;
        }
        raw.nodes.push(Node { tag, xyz, pos });
    }
    Ok(())
}

fn nodes41(c: &mut Cursor, bin: bool, raw: &mut Raw) -> Result<(), Error> {
    if bin {
        c.end_line()?;
    }
    let hpos = c.pos;
    let blocks = c.size(bin, "the number of node blocks")?;
    let total = c.size(bin, "the number of nodes")?;
    c.size(bin, "the smallest node tag")?;
    c.size(bin, "the largest node tag")?;
    raw.nodes.reserve(c.cap(total, if bin { 32 } else { 8 }));
    let mut read = 0u64;
    for _ in 0..blocks {
        let bpos = c.pos;
        let dim = c.int(bin, "a node block's entity dimension")?;
        c.int(bin, "a node block's entity tag")?;
        let parametric = c.int(bin, "a node block's parametric flag")?;
        if !(0..=3).contains(&dim) || !(0..=1).contains(&parametric) {
            return Err(c.err(bpos, format!("node block: dimension {dim} or parametric flag {parametric} is invalid")));
        }
        let n = c.size(bin, "a node block's number of nodes")?;
        let mut tags = Vec::with_capacity(c.cap(n, if bin { c.size_t } else { 2 }));
        for _ in 0..n {
            c.skip_ws_if(!bin);
            let pos = c.pos;
            let t = c.size(bin, "a node tag")?;
            if t == 0 {
                return Err(c.err(pos, "node tag 0 is not positive"));
            }
            tags.push((t, pos));
        }
        let extra = if parametric == 1 { dim as usize } else { 0 };
        for (tag, pos) in tags {
            let mut xyz = [0.0; 3];
            for x in &mut xyz {
                *x = c.real(bin, "a node coordinate")?;
            }
            for _ in 0..extra {
                c.real(bin, "a parametric coordinate")?;
            }
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
    c.err(
        pos,
        format!(
            "element type {ty} is not supported (only points, lines, triangles and tetrahedra: first-order simplices)"
        ),
    )
}

fn elements2(c: &mut Cursor, bin: bool, raw: &mut Raw) -> Result<(), Error> {
    let hpos = c.pos;
    let n = c.size(false, "the number of elements")?;
    if bin {
        c.end_line()?;
    }
    raw.elements.reserve(c.cap(n, if bin { 12 } else { 10 }));
    if !bin {
        for _ in 0..n {
            let pos = {
                c.skip_ws();
                c.pos
            };
            c.int(false, "an element tag")?;
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

fn elements41(
    c: &mut Cursor,
    bin: bool,
    entities: &HashMap<(i32, i32), Rc<[i32]>>,
    raw: &mut Raw,
) -> Result<(), Error> {
    if bin {
        c.end_line()?;
    }
    let hpos = c.pos;
    let blocks = c.size(bin, "the number of element blocks")?;
    let total = c.size(bin, "the number of elements")?;
    c.size(bin, "the smallest element tag")?;
    c.size(bin, "the largest element tag")?;
    raw.elements.reserve(c.cap(total, if bin { 2 * c.size_t } else { 4 }));
    let mut read = 0u64;
    for _ in 0..blocks {
        c.skip_ws_if(!bin);
        let bpos = c.pos;
        let dim = c.int(bin, "an element block's entity dimension")?;
        let tag = c.int(bin, "an element block's entity tag")?;
        let ty = c.int(bin, "an element block's element type")?;
        let k = nodes_per(ty).ok_or_else(|| unsupported(c, bpos, ty))?;
        if dim as usize != dim_of(ty) {
            return Err(c.err(bpos, format!("element block of dimension {dim} holds elements of type {ty}")));
        }
        let physical: Rc<[i32]> = entities.get(&(dim, tag)).cloned().unwrap_or_else(|| Rc::new([]));
        let n = c.size(bin, "an element block's number of elements")?;
        for _ in 0..n {
            c.skip_ws_if(!bin);
            let pos = c.pos;
            c.size(bin, "an element tag")?;
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
