//! The airfoil grid reader against a corpus of mutated grid files, made
//! here from the generator: every malformed, degenerate, inconsistent,
//! truncated or oversized input is an error of the expected kind naming the
//! expected line; valid files (with any whitespace) read back the grid.

use parloop::Error;
use parloop_examples::airfoil::grid::{Counts, Grid, MAX_LINE_BYTES};

/// A small generated grid (6 cells around, 3 out) and its file, as lines.
struct Corpus {
    grid: Grid,
    lines: Vec<String>,
}

impl Corpus {
    fn new() -> Corpus {
        Corpus::of(2, 3)
    }

    fn of(i: usize, j: usize) -> Corpus {
        let grid = Grid::generate(i, j).unwrap().rounded();
        let mut bytes = Vec::new();
        grid.write(&mut bytes).unwrap();
        let lines = String::from_utf8(bytes).unwrap().lines().map(str::to_owned).collect();
        Corpus { grid, lines }
    }

    fn text(&self) -> String {
        self.lines.iter().map(|l| format!("{l}\n")).collect()
    }

    /// 1-based line of node, cell, edge or boundary edge `k`.
    fn node_line(&self, k: usize) -> usize {
        2 + k
    }
    fn cell_line(&self, k: usize) -> usize {
        2 + self.grid.nnode() + k
    }
    fn edge_line(&self, k: usize) -> usize {
        2 + self.grid.nnode() + self.grid.ncell() + k
    }
    fn bedge_line(&self, k: usize) -> usize {
        2 + self.grid.nnode() + self.grid.ncell() + self.grid.nedge() + k
    }

    /// The file with 1-based line `line` replaced.
    fn with_line(&self, line: usize, text: &str) -> String {
        let mut c = Corpus { grid: self.grid.clone(), lines: self.lines.clone() };
        c.lines[line - 1] = text.to_owned();
        c.text()
    }

    /// The file cut after 1-based line `line`.
    fn truncated(&self, line: usize) -> String {
        self.lines[..line].iter().map(|l| format!("{l}\n")).collect()
    }

    fn edge(&self, k: usize) -> [i32; 4] {
        [self.grid.edge[2 * k], self.grid.edge[2 * k + 1], self.grid.ecell[2 * k], self.grid.ecell[2 * k + 1]]
    }
    fn bedge(&self, k: usize) -> [i32; 4] {
        [self.grid.bedge[2 * k], self.grid.bedge[2 * k + 1], self.grid.becell[k], self.grid.bound[k]]
    }
    fn cell(&self, k: usize) -> [i32; 4] {
        [self.grid.cell[4 * k], self.grid.cell[4 * k + 1], self.grid.cell[4 * k + 2], self.grid.cell[4 * k + 3]]
    }
}

fn record(v: [i32; 4]) -> String {
    format!(" {} {} {} {} ", v[0], v[1], v[2], v[3])
}

/// Parses `text` and expects an `Error::Input` at `line` whose message holds `needle`.
#[track_caller]
fn input_error(text: &str, line: usize, needle: &str) {
    match Grid::parse(text, "g.dat") {
        Err(e @ Error::Input { .. }) => {
            let msg = e.to_string();
            let Error::Input { line: got, ref source_name, .. } = e else { unreachable!() };
            assert_eq!(source_name, "g.dat");
            assert_eq!(got, line, "wrong line in `{msg}`");
            assert!(msg.starts_with(&format!("g.dat:{line}: ")), "{msg}");
            assert!(msg.contains(needle), "`{msg}` does not say `{needle}`");
        }
        Err(other) => panic!("expected an input error at line {line} ({needle}), got {other:?}"),
        Ok(_) => panic!("expected an input error at line {line} ({needle}), the grid was accepted"),
    }
}

#[test]
fn the_valid_grid_reads_back_and_passes_the_check() {
    let c = Corpus::new();
    assert_eq!(Grid::parse(&c.text(), "g.dat").unwrap(), c.grid);
    for (i, j) in [(1, 2), (2, 3), (3, 7), (100, 150)] {
        let generated = Grid::generate(i, j).unwrap();
        generated.check("generated").unwrap();
        generated.clone().rounded().check("rounded").unwrap();
        assert_eq!(generated.counts(), Counts::generated(i, j).unwrap());
        assert_eq!(
            generated.counts().grid_bytes(),
            Some(
                16 * (generated.x.len() / 2
                    + generated.cell.len() / 4
                    + generated.edge.len() / 2
                    + generated.bound.len())
            )
        );
    }
    let empty = Grid::parse(" 0 0 0 0 \n", "g.dat").unwrap();
    assert_eq!(empty, Grid::default());
}

#[test]
fn the_grid_reads_from_a_stream_and_a_file() {
    let c = Corpus::new();
    assert_eq!(Grid::read(c.text().as_bytes(), "stream").unwrap(), c.grid);
    let path = std::env::temp_dir().join(format!("parloop-grid-corpus-{}.dat", std::process::id()));
    c.grid.write_file(&path).unwrap();
    let read = Grid::read_file(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(read.unwrap(), c.grid);
}

#[test]
fn extra_whitespace_is_valid() {
    let c = Corpus::new();
    let variants: Vec<String> = vec![
        // No leading or trailing spaces.
        c.lines.iter().map(|l| format!("{}\n", l.trim())).collect(),
        // Tabs and runs of spaces.
        c.lines.iter().map(|l| format!("\t{}  \t\n", l.split_whitespace().collect::<Vec<_>>().join(" \t  "))).collect(),
        // CRLF line ends.
        c.lines.iter().map(|l| format!("{l}\r\n")).collect(),
        // No final newline.
        c.text().trim_end_matches('\n').to_owned(),
        // Blank lines between sections, at the start and at the end.
        format!("\n{}\n\n   \n", c.lines.join("\n\n")),
    ];
    for (k, text) in variants.iter().enumerate() {
        match Grid::parse(text, "g.dat") {
            Ok(g) => assert_eq!(g, c.grid, "variant {k}"),
            Err(e) => panic!("variant {k}: {e}"),
        }
    }
}

#[test]
fn content_after_the_declared_counts_is_an_error() {
    let c = Corpus::new();
    let end = c.lines.len();
    input_error(&format!("{} 1 2 3 4 \n", c.text()), end + 1, "after the last record");
    input_error(&format!("{}\n\n0\n", c.text()), end + 3, "after the last record");
    input_error(&format!("{}garbage", c.text()), end + 1, "after the last record");
    // One edge fewer declared than the file holds.
    let mut fewer = c.lines.clone();
    fewer[0] = format!(" {} {} {} {} ", c.grid.nnode(), c.grid.ncell(), c.grid.nedge(), c.grid.nbedge() - 1);
    input_error(&fewer.iter().map(|l| format!("{l}\n")).collect::<String>(), end, "after the last record");
}

#[test]
fn degenerate_elements_are_errors_naming_the_line() {
    let c = Corpus::new();
    let [a, b, _, d] = c.cell(4);
    input_error(
        &c.with_line(c.cell_line(4), &record([a, b, a, d])),
        c.cell_line(4),
        &format!("cell 4 repeats node {a}"),
    );
    let [n0, _, c0, c1] = c.edge(5);
    input_error(
        &c.with_line(c.edge_line(5), &record([n0, n0, c0, c1])),
        c.edge_line(5),
        &format!("edge 5 goes from node {n0} to itself"),
    );
    let [n0, n1, c0, _] = c.edge(6);
    input_error(
        &c.with_line(c.edge_line(6), &record([n0, n1, c0, c0])),
        c.edge_line(6),
        &format!("edge 6 lies between cell {c0} and itself"),
    );
    let [n0, _, cell, bound] = c.bedge(3);
    input_error(
        &c.with_line(c.bedge_line(3), &record([n0, n0, cell, bound])),
        c.bedge_line(3),
        &format!("boundary edge 3 goes from node {n0} to itself"),
    );
}

#[test]
fn meshes_that_do_not_fit_together_are_errors_naming_the_line() {
    let c = Corpus::new();
    // An edge whose nodes are another edge's: in range, distinct, wrong.
    let k = 7;
    let [n0, n1, ..] = c.edge(0);
    let [.., c0, c1] = c.edge(k);
    assert!(!c.cell(c0 as usize).contains(&n0) || !c.cell(c0 as usize).contains(&n1));
    input_error(&c.with_line(c.edge_line(k), &record([n0, n1, c0, c1])), c.edge_line(k), "is not a node of its cell");
    // An edge running the wrong way (its cells swapped: flux of the wrong sign).
    let [n0, n1, c0, c1] = c.edge(k);
    input_error(&c.with_line(c.edge_line(k), &record([n0, n1, c1, c0])), c.edge_line(k), "has no side from node");
    input_error(&c.with_line(c.edge_line(k), &record([n1, n0, c0, c1])), c.edge_line(k), "has no side from node");
    // An edge between a cell and one it does not touch.
    let far = (0..c.grid.ncell() as i32).find(|&f| c.cell(f as usize).iter().all(|v| *v != n0 && *v != n1)).unwrap();
    input_error(
        &c.with_line(c.edge_line(k), &record([n0, n1, c0, far])),
        c.edge_line(k),
        &format!("is not a node of its cell {far}"),
    );
    // A boundary edge whose nodes are not its cell's.
    let [n0, n1, cell, bound] = c.bedge(2);
    let other = (0..c.grid.ncell() as i32).find(|&f| c.cell(f as usize).iter().all(|v| *v != n0 && *v != n1)).unwrap();
    input_error(
        &c.with_line(c.bedge_line(2), &record([n0, n1, other, bound])),
        c.bedge_line(2),
        "is not a node of its cell",
    );
    input_error(
        &c.with_line(c.bedge_line(2), &record([n1, n0, cell, bound])),
        c.bedge_line(2),
        "has no side from node",
    );
    // The same edge twice (instead of another one).
    input_error(
        &c.with_line(c.edge_line(k), &c.lines[c.edge_line(k - 1) - 1]),
        c.edge_line(k),
        "already on another edge",
    );
    // An edge left out: the mesh has a hole at the first cell that misses it.
    let mut holed = c.lines.clone();
    holed.remove(c.edge_line(k) - 1);
    holed[0] = format!(" {} {} {} {} ", c.grid.nnode(), c.grid.ncell(), c.grid.nedge() - 1, c.grid.nbedge());
    let cell = c0.min(c1) as usize;
    input_error(&holed.iter().map(|l| format!("{l}\n")).collect::<String>(), c.cell_line(cell), "the mesh has a hole");
    // The line numbers count blank lines.
    let [n0, n1, c0, c1] = c.edge(k);
    let mut blanks = c.lines.clone();
    blanks[c.edge_line(k) - 1] = record([n0, n1, c1, c0]);
    blanks.insert(c.cell_line(0) - 1, String::new());
    blanks.insert(c.edge_line(0), "   ".into());
    input_error(
        &blanks.iter().map(|l| format!("{l}\n")).collect::<String>(),
        c.edge_line(k) + 2,
        "has no side from node",
    );
    // Grid::check on a grid built in memory names the line the file would have.
    let mut g = c.grid.clone();
    g.ecell.swap(2 * k, 2 * k + 1);
    match g.check("memory") {
        Err(Error::Input { line, .. }) => assert_eq!(line, c.edge_line(k)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_wake_cut_joins_cells_through_duplicated_nodes_only() {
    // Wake edges join cells whose nodes are different but coincide; a
    // coordinate moved off the cut breaks the join.
    let c = Corpus::new();
    let [n0, n1, c0, _] = c.edge(0);
    assert!(!c.cell(c0 as usize).contains(&n0) && !c.cell(c0 as usize).contains(&n1), "edge 0 is on the wake cut");
    let moved = c.with_line(c.node_line(n0 as usize), " 123.000000 4.000000 ");
    input_error(&moved, c.edge_line(0), &format!("is not a node of its cell {c0}"));
}

#[test]
fn a_truncated_file_names_the_last_line_read() {
    let c = Corpus::new();
    let g = &c.grid;
    let cuts = [
        (1, "node 0"),
        (c.node_line(3), "node 4"),
        (c.node_line(g.nnode() - 1), "cell 0"),
        (c.cell_line(2), "cell 3"),
        (c.cell_line(g.ncell() - 1), "edge 0"),
        (c.edge_line(9), "edge 10"),
        (c.edge_line(g.nedge() - 1), "boundary edge 0"),
        (c.bedge_line(4), "boundary edge 5"),
        (c.bedge_line(g.nbedge() - 2), &format!("boundary edge {}", g.nbedge() - 1)),
    ];
    for (line, what) in cuts {
        input_error(&c.truncated(line), line, &format!("truncated: the file ends after line {line} where {what}"));
    }
    // Cut inside a line.
    let cut = c.text()[..c.text().len() - 5].to_owned();
    input_error(&cut, c.lines.len(), "expected 4 numbers, found 2");
    // Blank lines at the end count as read.
    input_error(&format!("{}\n\n", c.truncated(5)), 7, "truncated: the file ends after line 7");
}

#[test]
fn an_empty_file_is_an_error() {
    // Line 1, where the header belongs (it said "grid.dat:0:").
    input_error("", 1, "truncated: the input is empty where the header");
    input_error("\n  \n", 2, "truncated: the file ends after line 2 where the header");
}

#[test]
fn garbage_numbers_are_errors_naming_the_line() {
    let c = Corpus::new();
    input_error(&c.with_line(1, " 21 12 18 x "), 1, "nbedge `x` is not a valid count");
    input_error(&c.with_line(1, " 21.0 12 18 12 "), 1, "nnode `21.0` is not a valid count");
    input_error(&c.with_line(1, " 21 12 18 "), 1, "expected 4 numbers, found 3");
    input_error(&c.with_line(1, " 21 12 18 12 5 "), 1, "unexpected extra field `5`");
    input_error(&c.with_line(c.node_line(2), " 1.0 zero "), c.node_line(2), "node 2: `zero` is not a valid number");
    input_error(&c.with_line(c.node_line(2), " 1.0 nan "), c.node_line(2), "node 2: coordinate `nan` is not finite");
    input_error(&c.with_line(c.node_line(2), " inf 1.0 "), c.node_line(2), "not finite");
    input_error(&c.with_line(c.node_line(2), " 1e999 1.0 "), c.node_line(2), "not finite");
    input_error(&c.with_line(c.cell_line(1), " 0 1 2.5 3 "), c.cell_line(1), "cell 1: node `2.5` is not an integer");
    input_error(&c.with_line(c.edge_line(1), " 0x1 1 2 3 "), c.edge_line(1), "edge 1: node `0x1` is not an integer");
    input_error(
        &c.with_line(c.edge_line(1), " 1 2 3 "),
        c.edge_line(1),
        "edge 1 (2 nodes, 2 cells): expected 4 numbers, found 3",
    );
    input_error(
        &c.with_line(c.bedge_line(0), " 1 2 3 wall "),
        c.bedge_line(0),
        "bound `wall` is neither 1 (wall) nor 2",
    );
    input_error(&c.with_line(c.bedge_line(0), " 1 2 3 3 "), c.bedge_line(0), "bound `3` is neither 1 (wall) nor 2");
    input_error(
        &c.with_line(c.cell_line(0), &format!(" 0 1 2 {} ", "9".repeat(30))),
        c.cell_line(0),
        "is not an integer",
    );
    input_error(&c.with_line(c.node_line(0), &" 1".repeat(MAX_LINE_BYTES)), c.node_line(0), "line longer than");
    let mut bytes = c.text().into_bytes();
    let at = c.lines[..c.node_line(1)].iter().map(|l| l.len() + 1).sum::<usize>() + 1;
    bytes[at] = 0xff;
    match Grid::read(&bytes[..], "g.dat") {
        Err(e @ Error::Input { line, .. }) => {
            assert_eq!(line, c.node_line(2), "{e}");
            assert!(e.to_string().contains("not UTF-8"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn negative_and_out_of_range_indices_are_errors_naming_the_line() {
    let c = Corpus::new();
    let (nnode, ncell) = (c.grid.nnode(), c.grid.ncell());
    input_error(
        &c.with_line(c.cell_line(3), " 0 1 -1 3 "),
        c.cell_line(3),
        &format!("cell 3: node -1 is out of range (0..{nnode})"),
    );
    input_error(
        &c.with_line(c.cell_line(3), &format!(" 0 1 {nnode} 3 ")),
        c.cell_line(3),
        &format!("node {nnode} is out of range"),
    );
    input_error(
        &c.with_line(c.edge_line(2), " 0 1 -3 1 "),
        c.edge_line(2),
        &format!("edge 2: cell -3 is out of range (0..{ncell})"),
    );
    input_error(
        &c.with_line(c.edge_line(2), &format!(" 0 1 0 {ncell} ")),
        c.edge_line(2),
        &format!("cell {ncell} is out of range"),
    );
    input_error(
        &c.with_line(c.edge_line(2), " -2147483649 1 0 1 "),
        c.edge_line(2),
        "node -2147483649 is out of range",
    );
    input_error(&c.with_line(c.bedge_line(1), &format!(" {nnode} 1 0 2 ")), c.bedge_line(1), "boundary edge 1: node");
    input_error(
        &c.with_line(c.bedge_line(1), " 0 1 -1 2 "),
        c.bedge_line(1),
        "boundary edge 1: cell -1 is out of range",
    );
}

#[test]
fn huge_counts_are_refused_before_allocating() {
    // Indices that do not fit the i32 maps.
    input_error(" 3000000000 0 0 0 \n", 1, "3000000000 nodes: indices are i32");
    input_error(" 4 2147483649 0 0 \n", 1, "2147483649 cells: indices are i32");
    // Sizes that overflow.
    let overflow = format!(" 4 1 {} 0 \n", usize::MAX);
    match Grid::parse(&overflow, "g.dat") {
        Err(e @ Error::SizeOverflow { .. }) => assert!(e.to_string().contains("g.dat"), "{e}"),
        other => panic!("{other:?}"),
    }
    match Grid::read(overflow.as_bytes(), "g.dat") {
        Err(Error::SizeOverflow { .. }) => {}
        other => panic!("{other:?}"),
    }
    // A stream of unknown size reserves what its header declares: far more
    // than any address space here.
    let huge = " 4 1 1000000000000000 1 \n 0 0 \n";
    match Grid::read(huge.as_bytes(), "pipe") {
        Err(e @ Error::OutOfMemory { .. }) => {
            let Error::OutOfMemory { bytes, .. } = e else { unreachable!() };
            assert_eq!(bytes, 8_000_000_000_000_000);
        }
        other => panic!("{other:?}"),
    }
    // A file reserves no more than its size can hold, and ends truncated.
    let c = Corpus::new();
    let mut lines = c.lines.clone();
    lines[0] = format!(" {} {} {} 1000000000000000 ", c.grid.nnode(), c.grid.ncell(), c.grid.nedge());
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    input_error(&text, lines.len(), "truncated: the file ends after line");
    let path = std::env::temp_dir().join(format!("parloop-grid-huge-{}.dat", std::process::id()));
    std::fs::write(&path, &text).unwrap();
    let read = Grid::read_file(&path);
    std::fs::remove_file(&path).unwrap();
    match read {
        Err(Error::Input { line, .. }) => assert_eq!(line, lines.len()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn generated_sizes_that_cannot_be_indexed_are_errors() {
    // Errors naming the option (they were Error::Input on "line 0").
    assert!(matches!(Grid::generate(0, 10), Err(Error::InvalidDeclaration { .. })));
    assert!(matches!(Grid::generate(10, 1), Err(Error::InvalidDeclaration { .. })));
    assert!(matches!(Grid::generate(100_001, 10), Err(Error::InvalidDeclaration { .. })));
    // 3e10 nodes: refused before allocating, naming --grid-size.
    match Grid::generate(100_000, 100_000) {
        Err(e @ Error::InvalidDeclaration { .. }) => {
            assert!(e.to_string().starts_with("option `--grid-size`: 100000,100000: "), "{e}")
        }
        other => panic!("{other:?}"),
    }
    let counts = Counts::generated(100_000, 100_000).unwrap();
    assert_eq!(counts.ncell, 30_000_000_000);
    assert_eq!(counts.grid_bytes(), Some(16 * (counts.nnode + counts.ncell + counts.nedge + counts.nbedge)));
}
