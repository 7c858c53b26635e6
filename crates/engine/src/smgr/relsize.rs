//! The relation-size cache (seed 002): the size of every open fork, in blocks, kept in shared
//! memory so that `nblocks()` makes no system call.
//!
//! A fork found missing is cached too ([`MISSING`]), so asking again about a fork that does not
//! exist (a table without a visibility map, say) makes no system call either.
//!
//! Exactness rule: an entry is only ever *changed* by the paths that change the file (extend,
//! truncate, unlink, create), each while it holds the relation's extension lock (extend) or
//! while the caller holds the relation exclusively (truncate, unlink). A size learned by
//! probing the files is only *inserted if absent*, so a probe that raced with an extension
//! can never overwrite the newer, exact size.

use parking_lot::RwLock;

use super::{BlockNumber, Fork, RelFileLocator};
use crate::hash::{hash_one, FxHashMap};

const PARTITIONS: usize = 64;

/// The cached "size" of a fork that does not exist (no real fork reaches it: block numbers
/// stop below `u32::MAX`).
pub(super) const MISSING: BlockNumber = BlockNumber::MAX;

type Key = (RelFileLocator, Fork);

/// Partitioned map from (relation, fork) to its size in blocks.
pub(super) struct RelsizeCache {
    partitions: Vec<RwLock<FxHashMap<Key, BlockNumber>>>,
}

impl RelsizeCache {
    pub(super) fn new() -> Self {
        RelsizeCache {
            partitions: (0..PARTITIONS)
                .map(|_| RwLock::new(FxHashMap::default()))
                .collect(),
        }
    }

    fn partition(&self, key: &Key) -> &RwLock<FxHashMap<Key, BlockNumber>> {
        &self.partitions[(hash_one(key) as usize) % PARTITIONS]
    }

    pub(super) fn get(&self, rel: RelFileLocator, fork: Fork) -> Option<BlockNumber> {
        let key = (rel, fork);
        self.partition(&key).read().get(&key).copied()
    }

    /// Records a size learned by probing, unless a size-changing path got there first.
    pub(super) fn insert_probed(&self, rel: RelFileLocator, fork: Fork, nblocks: BlockNumber) {
        let key = (rel, fork);
        self.partition(&key).write().entry(key).or_insert(nblocks);
    }

    /// Records the exact size after a path that changed it.
    pub(super) fn set(&self, rel: RelFileLocator, fork: Fork, nblocks: BlockNumber) {
        let key = (rel, fork);
        self.partition(&key).write().insert(key, nblocks);
    }

    /// Drops a cached "missing" (the fork was found to exist after all: a probe raced with
    /// its creation), keeping any real size.
    pub(super) fn forget_missing(&self, rel: RelFileLocator, fork: Fork) {
        let key = (rel, fork);
        let mut g = self.partition(&key).write();
        if g.get(&key) == Some(&MISSING) {
            g.remove(&key);
        }
    }

    pub(super) fn remove(&self, rel: RelFileLocator, fork: Fork) {
        let key = (rel, fork);
        self.partition(&key).write().remove(&key);
    }
}
