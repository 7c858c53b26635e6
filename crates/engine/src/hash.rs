//! A fast, non-cryptographic hasher for the engine's shared-memory tables (buffer mapping,
//! relation sizes). Keys are small fixed-size integers chosen by the engine, not by clients,
//! so the denial-of-service resistance of SipHash buys nothing here and costs a lot on the
//! buffer-lookup hot path. This is the FxHash mixing step (rustc's hasher).

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
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
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
