//! Where each index's root is, kept between descents (PostgreSQL keeps the metapage's root in
//! the relcache, `rd_amcache`): a descent then starts at the root instead of pinning and
//! locking the metapage, the one page every descent of an index touches.
//!
//! ## Rules
//! - A hint, never the truth: a descent that starts from a cached root checks, under the
//!   root's content lock, that the page still says it is the root (`ROOT` flag) at the cached
//!   level; otherwise it reads the metapage and caches what it says. A root split clears the
//!   old root's flag in the same locked change that makes the new root, so a stale entry is
//!   always caught. Pages are never deleted or reused, so a cached block is always a page of
//!   the index.
//! - [`RootCache::forget`] on creation: an index made again in the same file (TRUNCATE in the
//!   creating transaction) must not start from a block of the old tree.
//! - Reads are loads only (a sequence lock per slot): the root of a hot index is read by every
//!   thread, and a lock's shared counter would bounce its cache line between them. Writes
//!   take the writers' mutex and happen only when a root moves or an index is first used.
//! - A fixed number of slots ([`SLOTS`]), by hash: an index whose slot another took reads its
//!   metapage, as without the cache. Memory is bounded whatever the number of indexes.

use std::sync::atomic::{fence, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::types::{BlockNumber, RelFileLocator};

/// Slots of the cache: more than the indexes a workload keeps hot.
pub const SLOTS: usize = 1024;

/// A root as the metapage gave it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Root {
    pub block: BlockNumber,
    pub level: u16,
}

/// One slot: the index, its root, and the sequence number that makes the pair consistent
/// (odd while a writer is changing it).
#[derive(Default)]
struct Slot {
    seq: AtomicU64,
    /// [`key`] of the index, 0 when empty.
    rel: AtomicU64,
    /// The root block in the low 32 bits, the level above them.
    root: AtomicU64,
}

/// Per engine: the roots of the indexes last descended.
pub struct RootCache {
    slots: Box<[Slot]>,
    writers: Mutex<()>,
}

impl Default for RootCache {
    fn default() -> Self {
        RootCache {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
            writers: Mutex::new(()),
        }
    }
}

/// The slot key of `rel`: never 0 (0 marks an empty slot). Distinct for relation numbers
/// below 2^40 (they are oids, handed out one by one); past that a false match is still caught
/// by the descent's check of the root page.
fn key(rel: RelFileLocator) -> u64 {
    (rel.rel_number ^ (u64::from(rel.db_oid) << 40)) | (1 << 63)
}

impl RootCache {
    fn slot(&self, rel: RelFileLocator) -> &Slot {
        let k = key(rel);
        // Fibonacci hashing spreads consecutive relation numbers over the slots.
        let h = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        &self.slots[h as usize % SLOTS]
    }

    /// The cached root of `rel`, if its slot holds it.
    pub fn get(&self, rel: RelFileLocator) -> Option<Root> {
        let slot = self.slot(rel);
        let before = slot.seq.load(Ordering::Acquire);
        if before & 1 == 1 {
            return None;
        }
        let (k, root) = (
            slot.rel.load(Ordering::Relaxed),
            slot.root.load(Ordering::Relaxed),
        );
        // The reads above must not move past the check below (a sequence lock's reader side).
        fence(Ordering::Acquire);
        if slot.seq.load(Ordering::Relaxed) != before || k != key(rel) {
            return None;
        }
        Some(Root {
            block: root as u32,
            level: (root >> 32) as u16,
        })
    }

    /// Caches `root` as `rel`'s, replacing whatever the slot held.
    pub fn set(&self, rel: RelFileLocator, root: Root) {
        let packed = u64::from(root.block) | (u64::from(root.level) << 32);
        self.write(self.slot(rel), key(rel), packed);
    }

    /// Drops what is cached for `rel`.
    pub fn forget(&self, rel: RelFileLocator) {
        let slot = self.slot(rel);
        if slot.rel.load(Ordering::Relaxed) == key(rel) {
            self.write(slot, 0, 0);
        }
    }

    fn write(&self, slot: &Slot, rel: u64, root: u64) {
        let _writer = self.writers.lock();
        let seq = slot.seq.load(Ordering::Relaxed);
        assert!(seq & 1 == 0, "a slot is left mid-write only under the writers' mutex");
        slot.seq.store(seq + 1, Ordering::Relaxed);
        // Readers that see the new contents must see the odd sequence number first.
        fence(Ordering::Release);
        slot.rel.store(rel, Ordering::Relaxed);
        slot.root.store(root, Ordering::Relaxed);
        slot.seq.store(seq + 2, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(n: u64) -> RelFileLocator {
        RelFileLocator {
            db_oid: 1,
            rel_number: n,
        }
    }

    #[test]
    fn a_root_is_kept_replaced_forgotten_and_never_given_to_another_index() {
        let cache = RootCache::default();
        assert_eq!(cache.get(rel(10)), None);
        let r = Root {
            block: 7,
            level: 2,
        };
        cache.set(rel(10), r);
        assert_eq!(cache.get(rel(10)), Some(r));
        // Every other index misses, also those that share the slot.
        let sharing = (11..100_000)
            .filter(|&n| std::ptr::eq(cache.slot(rel(n)), cache.slot(rel(10))))
            .collect::<Vec<_>>();
        assert!(!sharing.is_empty(), "some relation numbers share a slot");
        for n in sharing.iter().copied().chain([11, 12]) {
            assert_eq!(cache.get(rel(n)), None, "{n}");
        }
        // One that shares the slot takes it over.
        cache.set(rel(sharing[0]), Root { block: 3, level: 0 });
        assert_eq!(cache.get(rel(10)), None);
        cache.set(rel(10), Root { block: 9, level: 3 });
        assert_eq!(
            cache.get(rel(10)),
            Some(Root { block: 9, level: 3 })
        );
        cache.forget(rel(sharing[0]));
        assert!(cache.get(rel(10)).is_some(), "forgetting another index keeps this one");
        cache.forget(rel(10));
        assert_eq!(cache.get(rel(10)), None);
    }

    #[test]
    fn readers_never_see_a_torn_pair() {
        // Two indexes in one slot, each always cached with its own root: a reader that got a
        // root of one for the other would see a torn write.
        let cache = RootCache::default();
        let a = rel(10);
        let b = (11..100_000)
            .map(rel)
            .find(|&r| std::ptr::eq(cache.slot(r), cache.slot(a)))
            .expect("some relation shares the slot");
        let root_of = |r: RelFileLocator| Root {
            block: r.rel_number as u32,
            level: (r.rel_number % 7) as u16,
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..20_000 {
                    let r = if i % 2 == 0 { a } else { b };
                    cache.set(r, root_of(r));
                }
            });
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..20_000 {
                        for r in [a, b] {
                            if let Some(got) = cache.get(r) {
                                assert_eq!(got, root_of(r));
                            }
                        }
                    }
                });
            }
        });
    }
}
