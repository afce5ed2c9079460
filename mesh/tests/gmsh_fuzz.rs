//! Fuzzing the Gmsh reader: committed meshes truncated at every byte, and
//! mutated by proptest (bytes flipped, lines removed or duplicated, numbers
//! made huge or negative, binary words overwritten). Every case must end
//! (each runs on its own thread under a generous deadline, so a hang fails
//! instead of stalling CI), must not panic, and must give either a
//! well-formed mesh or an error whose position lies inside the file. A
//! counting allocator fails the run if any single allocation is huge (a
//! lying header must not be believed).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use parloop::Error;
use parloop_mesh::gmsh::read_bytes;
use parloop_mesh::{EntityKind, Mesh};
use proptest::prelude::*;

/// Allocations above this size are counted as failures: the inputs are at
/// most 100 KB, so nothing legitimate comes near it.
const HUGE: usize = 64 << 20;
static HUGE_ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The largest single allocation on this thread since it was reset
    /// (a const initializer: reading it allocates nothing).
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    if size > HUGE {
        HUGE_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

struct Counting;

// SAFETY: forwards every call to the system allocator unchanged; it only
// counts oversized requests on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: `ptr` came from `System` with `layout`; contract passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn data(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Seeds: one geometry in every layout, plus a 3-D binary file and two
/// partitioned 4.1 files (ASCII; binary with ghosts).
fn seeds() -> Vec<Vec<u8>> {
    [
        "disk-22-ascii.msh",
        "disk-22-bin.msh",
        "disk-41-ascii.msh",
        "disk-41-bin.msh",
        "cube_hole-22-bin.msh",
        "two_materials-41-part3-ascii.msh",
        "cube_hole-41-part3-ghosts-bin.msh",
    ]
    .iter()
    .map(|n| data(n))
    .collect()
}

/// A mesh the reader returns is well formed whatever the input was.
fn check_mesh(m: &Mesh) -> Result<(), String> {
    let nv = m.dim + 1;
    let ok = (m.dim == 2 || m.dim == 3)
        && m.coords.len() % m.dim == 0
        && m.cells.len() % nv == 0
        && m.cells.iter().all(|&v| (v as usize) < m.vertices())
        && m.facets.len() == m.facet_cells.len() * m.dim
        && m.facets.iter().all(|&v| (v as usize) < m.vertices())
        && m.facet_cells.iter().all(|&c| (c as usize) < m.num_cells())
        && m.coords.iter().all(|x| x.is_finite())
        && m.groups.iter().all(|g| {
            let n = match g.kind {
                EntityKind::Vertex => m.vertices(),
                EntityKind::Cell => m.num_cells(),
                EntityKind::Facet => m.num_facets(),
                EntityKind::InteriorFacet => m.interior_facets().map_or(0, |f| f.len()),
            };
            g.entities.windows(2).all(|w| w[0] < w[1]) && g.entities.iter().all(|&e| (e as usize) < n)
        });
    if !ok {
        return Err("an Ok mesh is malformed".into());
    }
    // What the mesh promises (orientation, outward facets) holds for what
    // the reader returns: a mesh it reads, `declare` takes.
    m.check().map_err(|e| format!("an Ok mesh fails its check: {e}"))
}

/// The error's position lies inside the input.
fn check_error(e: &Error, input: &[u8]) -> Result<(), String> {
    match e {
        Error::Input { line, .. } => {
            let lines = 1 + input.iter().filter(|&&b| b == b'\n').count();
            if *line >= 1 && *line <= lines {
                Ok(())
            } else {
                Err(format!("line {line} outside 1..={lines}: {e}"))
            }
        }
        Error::InputAtByte { offset, .. } if *offset <= input.len() => Ok(()),
        other => Err(format!("unexpected error: {other}")),
    }
}

/// Reads `input` on its own thread: a panic or a case running past the
/// deadline (far above the milliseconds a case takes) is a failure.
fn read_bounded(input: Vec<u8>) -> Result<bool, String> {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let result = match read_bytes("fuzz.msh", &input) {
            Ok(m) => check_mesh(&m).map(|()| true),
            Err(e) => check_error(&e, &input).map(|()| false),
        };
        let _ = tx.send(result);
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(r) => {
            let _ = worker.join();
            r
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("the reader panicked".into()),
        Err(mpsc::RecvTimeoutError::Timeout) => Err("the reader did not finish within 20 s".into()),
    }
}

fn no_huge_allocation() {
    assert_eq!(HUGE_ALLOCATIONS.load(Ordering::Relaxed), 0, "an allocation above {HUGE} bytes");
}

/// Every prefix of a file is read without panic; every prefix that stops
/// before the final `$EndElements` is complete is an error.
fn truncate_everywhere(name: &str) {
    let full = data(name);
    let end = full.windows(12).rposition(|w| w == b"$EndElements").expect("ends with $Elements") + 12;
    for cut in 0..full.len() {
        let ok = read_bounded(full[..cut].to_vec()).unwrap_or_else(|e| panic!("{name} cut at {cut}: {e}"));
        assert!(!ok || cut >= end, "{name} cut at {cut} (of {}) read as a mesh", full.len());
    }
    no_huge_allocation();
}

#[test]
fn every_truncation_of_an_ascii_file() {
    truncate_everywhere("disk-41-ascii.msh");
}

#[test]
fn every_truncation_of_a_partitioned_file() {
    truncate_everywhere("two_materials-41-part3-ascii.msh");
}

#[test]
fn every_truncation_of_a_binary_file() {
    truncate_everywhere("disk-41-bin.msh");
}

#[test]
fn reservations_from_counts_stay_near_the_file_size() {
    // 4.1 text claiming 10^12 tetrahedra in one block, over 100 000 lines
    // of tetrahedra (1.5 MB). A reservation from the header's total, at the
    // 4 bytes of the shortest element line (a point's), is 16 times the
    // file's size; the block's tetrahedra take at least 10 bytes each.
    let mut f = String::from("$MeshFormat\n4.1 0 8\n$EndMeshFormat\n$Nodes\n1 4 1 4\n3 1 0 4\n1\n2\n3\n4\n");
    f += "0 0 0\n1 0 0\n0 1 0\n0 0 1\n$EndNodes\n$Elements\n1 1000000000000 1 1000000000000\n3 1 4 1000000000000\n";
    for i in 0..100_000 {
        f += &format!("{} 1 2 3 4\n", i + 1);
    }
    LARGEST.with(|l| l.set(0));
    let e = read_bytes("big.msh", f.as_bytes()).unwrap_err();
    let largest = LARGEST.with(Cell::get);
    check_error(&e, f.as_bytes()).unwrap();
    assert!(largest <= 8 * f.len(), "an allocation of {largest} bytes for a file of {} bytes", f.len());
}

/// Numbers a lying or broken file might hold.
const BAD_NUMBERS: [&str; 12] = [
    "-1",
    "0",
    "2147483648",
    "4294967296",
    "18446744073709551615",
    "99999999999999999999999",
    "-9223372036854775808",
    "1e308",
    "-1e400",
    "nan",
    "inf",
    "1.5",
];

/// Binary words a lying or broken file might hold.
const BAD_WORDS: [u64; 8] = [0, 1, u64::MAX, 0x7fff_ffff, 0x8000_0000, 1 << 32, 1 << 60, 0xffff_ffff];

fn split_lines(b: &[u8]) -> Vec<&[u8]> {
    b.split_inclusive(|&c| c == b'\n').collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn flipped_bytes(seed in 0usize..7, flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let mut input = seeds().swap_remove(seed);
        for (at, byte) in flips {
            let i = at.index(input.len());
            input[i] = byte;
        }
        read_bounded(input).map_err(TestCaseError::fail)?;
        no_huge_allocation();
    }

    #[test]
    fn lines_removed_or_duplicated(seed in 0usize..7, edits in prop::collection::vec((any::<prop::sample::Index>(), any::<bool>()), 1..4)) {
        let input = seeds().swap_remove(seed);
        let mut lines: Vec<Vec<u8>> = split_lines(&input).into_iter().map(<[u8]>::to_vec).collect();
        for (at, duplicate) in edits {
            let i = at.index(lines.len());
            if duplicate {
                let l = lines[i].clone();
                lines.insert(i, l);
            } else if lines.len() > 1 {
                lines.remove(i);
            }
        }
        read_bounded(lines.concat()).map_err(TestCaseError::fail)?;
        no_huge_allocation();
    }

    #[test]
    fn numbers_made_huge_or_negative(seed in 0usize..7, edits in prop::collection::vec((any::<prop::sample::Index>(), 0usize..BAD_NUMBERS.len()), 1..4)) {
        // Replace whole whitespace-separated words that are numbers.
        let input = seeds().swap_remove(seed);
        let mut words: Vec<Vec<u8>> = Vec::new();
        let mut start = 0;
        for (i, &b) in input.iter().enumerate() {
            if b.is_ascii_whitespace() {
                words.push(input[start..i].to_vec());
                words.push(vec![b]);
                start = i + 1;
            }
        }
        words.push(input[start..].to_vec());
        let numeric: Vec<usize> = (0..words.len())
            .filter(|&i| !words[i].is_empty() && std::str::from_utf8(&words[i]).is_ok_and(|w| w.parse::<f64>().is_ok()))
            .collect();
        prop_assume!(!numeric.is_empty());
        for (at, bad) in edits {
            words[numeric[at.index(numeric.len())]] = BAD_NUMBERS[bad].as_bytes().to_vec();
        }
        read_bounded(words.concat()).map_err(TestCaseError::fail)?;
        no_huge_allocation();
    }

    #[test]
    fn binary_words_overwritten(seed in prop::sample::select(vec![1usize, 3, 4, 6]), edits in prop::collection::vec((any::<prop::sample::Index>(), 0usize..BAD_WORDS.len(), any::<bool>()), 1..4)) {
        let mut input = seeds().swap_remove(seed);
        for (at, w, wide) in edits {
            let bytes = BAD_WORDS[w].to_le_bytes();
            let n = if wide { 8 } else { 4 };
            let i = at.index(input.len() - n);
            input[i..i + n].copy_from_slice(&bytes[..n]);
        }
        read_bounded(input).map_err(TestCaseError::fail)?;
        no_huge_allocation();
    }
}
