//! The cache of open segment files, bounded by `max_files_per_process` (or the share of the
//! descriptor limit the engine's budget gives it): the least recently used file is closed
//! when a new one would exceed the bound, and when an open anywhere in the engine runs out of
//! descriptors ([`ReleaseFiles`], PostgreSQL's `ReleaseLruFile`). A closed file is opened
//! again on its next use: PostgreSQL's virtual file descriptors.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{Fork, RelFileLocator};
use crate::hash::FxHashMap;
use crate::vfs::{ReleaseFiles, VfsFile};

/// A segment of a fork: the unit that is one file.
pub(super) type SegKey = (RelFileLocator, Fork, u32);

struct Entry {
    file: Arc<dyn VfsFile>,
    last_use_tick: u64,
}

struct Inner {
    by_key: FxHashMap<SegKey, Entry>,
    /// Recency order: tick -> key; the smallest tick is the least recently used.
    by_tick: BTreeMap<u64, SegKey>,
    next_tick: u64,
}

pub(super) struct FileCache {
    max_open_files: usize,
    inner: Mutex<Inner>,
}

impl FileCache {
    pub(super) fn new(max_open_files: usize) -> Self {
        assert!(
            max_open_files > 0,
            "the file cache must hold at least one file"
        );
        FileCache {
            max_open_files,
            inner: Mutex::new(Inner {
                by_key: FxHashMap::default(),
                by_tick: BTreeMap::new(),
                next_tick: 0,
            }),
        }
    }

    /// The open file for `key`, if cached (marked as just used).
    pub(super) fn get(&self, key: &SegKey) -> Option<Arc<dyn VfsFile>> {
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let tick = inner.next_tick;
        let entry = inner.by_key.get_mut(key)?;
        inner.by_tick.remove(&entry.last_use_tick);
        entry.last_use_tick = tick;
        inner.by_tick.insert(tick, *key);
        inner.next_tick += 1;
        Some(Arc::clone(&entry.file))
    }

    /// Caches a freshly opened file, closing the least recently used ones beyond the bound.
    /// If another thread cached the same segment meanwhile, its handle wins and is returned.
    pub(super) fn insert(&self, key: SegKey, file: Arc<dyn VfsFile>) -> Arc<dyn VfsFile> {
        let mut evicted = Vec::new();
        let result = {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            if let Some(existing) = inner.by_key.get(&key) {
                return Arc::clone(&existing.file);
            }
            while inner.by_key.len() >= self.max_open_files {
                let (_, victim) = inner
                    .by_tick
                    .pop_first()
                    .expect("by_tick has one entry per cached file");
                let entry = inner
                    .by_key
                    .remove(&victim)
                    .expect("by_tick and by_key name the same files");
                evicted.push(entry.file);
            }
            let tick = inner.next_tick;
            inner.next_tick += 1;
            inner.by_tick.insert(tick, key);
            inner.by_key.insert(
                key,
                Entry {
                    file: Arc::clone(&file),
                    last_use_tick: tick,
                },
            );
            file
        };
        // Closing happens outside the lock: a close is a system call.
        drop(evicted);
        result
    }

    /// Forgets (and so closes, once no one else holds it) one segment's file.
    pub(super) fn remove(&self, key: &SegKey) {
        let removed = {
            let mut inner = self.inner.lock();
            let entry = inner.by_key.remove(key);
            if let Some(e) = &entry {
                inner.by_tick.remove(&e.last_use_tick);
            }
            entry
        };
        drop(removed);
    }

    pub(super) fn open_count(&self) -> usize {
        self.inner.lock().by_key.len()
    }
}

impl ReleaseFiles for FileCache {
    /// Closes the least recently used file that only the cache holds: one that a reader or
    /// writer holds now would stay open through its handle, freeing nothing.
    fn release_one_file(&self) -> bool {
        let released = {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            // Bounded by the number of cached files.
            let victim = inner
                .by_tick
                .iter()
                .find(|(_, key)| Arc::strong_count(&inner.by_key[*key].file) == 1)
                .map(|(&tick, &key)| (tick, key));
            victim.map(|(tick, key)| {
                inner.by_tick.remove(&tick);
                let entry = inner
                    .by_key
                    .remove(&key)
                    .expect("by_tick and by_key name the same files");
                debug_assert_eq!(entry.last_use_tick, tick);
                entry.file
            })
        };
        // Closed outside the lock: a close is a system call. Nobody else holds it (counted
        // under the lock, and only the cache hands out clones), so this drop closes it.
        let closed = released.is_some();
        drop(released);
        closed
    }
}
