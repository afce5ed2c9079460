//! The hasher of the runtime's per-loop maps: the plan cache's keys
//! (every loop, eager or recorded, looks its plan up: SipHash of a
//! `LoopKey` cost ~1 900 instructions, about a third of an eager loop's
//! host cost on a one-element set; docs/PERFORMANCE.md, session 10) and
//! the lazy trace's tokens and forcing points. Keys are the program's own
//! metadata (ids, sizes, kernel names, source locations), so SipHash's
//! resistance to chosen keys buys nothing here.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;

/// A `HashMap` with [`WordHasher`].
pub(crate) type WordHashMap<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;

/// A `HashSet` with [`WordHasher`].
pub(crate) type WordHashSet<K> = HashSet<K, BuildHasherDefault<WordHasher>>;

/// A word-at-a-time multiplicative hasher (FxHash's mixing step).
#[derive(Default)]
pub(crate) struct WordHasher(u64);

impl WordHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::Hasher for WordHasher {
    #[inline]
    fn finish(&self) -> u64 {
        // The product's high bits are its best mixed; the table indexes by
        // the low ones (aligned addresses and `id << 3` tokens would
        // otherwise leave low bits constant).
        self.0.rotate_left(26)
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }
    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(n as u64);
    }
    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(n as u64);
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}
