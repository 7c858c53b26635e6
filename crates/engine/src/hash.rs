//! A fast, non-cryptographic hasher for the engine's shared-memory tables (buffer mapping,
//! relation sizes). Keys are small fixed-size integers chosen by the engine, not by clients,
//! so the denial-of-service resistance of SipHash buys nothing here and costs a lot on the
//! buffer-lookup hot path. This is the FxHash mixing step (rustc's hasher).
//!
//! The SQL layer keys its per-session plan cache with it too: those keys are statement
//! texts a client sends, but the cache is the session's own and holds at most 256 entries,
//! so colliding texts could only slow the session that sent them.

use std::hash::{BuildHasherDefault, Hasher};

/// FxHash over the written words.
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.add(u64::from_le_bytes(
                word.try_into().expect("chunks of eight bytes"),
            ));
        }
        // The tail byte by byte: copying a run-time length compiles to a `memcpy` call.
        let tail = words.remainder();
        if !tail.is_empty() {
            let word = tail
                .iter()
                .rev()
                .fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
            self.add(word);
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        // Fold the high bits down: partition selection uses the low bits.
        self.hash ^ (self.hash >> 29)
    }
}

/// The `BuildHasher` for engine tables.
pub type FxBuildHasher = BuildHasherDefault<FxHasher>;

/// A `HashMap` with [`FxHasher`].
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, FxBuildHasher>;

/// Hashes one value with [`FxHasher`] (for choosing a partition).
pub fn hash_one<T: std::hash::Hash>(value: &T) -> u64 {
    let mut h = FxHasher::default();
    value.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A byte string hashes as its little-endian words, the last one zero-padded, whatever
    /// its length (the tail is read byte by byte).
    #[test]
    fn bytes_hash_as_their_zero_padded_words() {
        let bytes: Vec<u8> = (1..=23).collect();
        for len in 0..=bytes.len() {
            let mut by_bytes = FxHasher::default();
            by_bytes.write(&bytes[..len]);
            let mut by_words = FxHasher::default();
            for chunk in bytes[..len].chunks(8) {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                by_words.write_u64(u64::from_le_bytes(word));
            }
            assert_eq!(by_bytes.finish(), by_words.finish(), "length {len}");
        }
    }
}
