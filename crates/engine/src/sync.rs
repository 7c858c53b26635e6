//! # sync — the sync-request queue (seed 001)
//!
//! Every write that must be durable by the next checkpoint (relation segments now, the commit
//! logs later) *registers a request* for its file here instead of fsyncing. The checkpointer
//! fsyncs each requested file once, however many writes it absorbed; foreground
//! paths and redo never fsync a data file.
//!
//! ## Rules
//! - Requests are a set: a second request for the same file is absorbed (counted).
//! - The queue is bounded (`capacity` distinct files). When it is full the writer fsyncs its
//!   file itself, as a PostgreSQL backend does when the checkpointer's queue overflows; that
//!   is counted, so a benchmark shows it.
//! - [`SyncQueue::forget_relation`] (drop) and [`SyncQueue::forget_segments`] (truncate)
//!   cancel requests, so a deleted file is never fsynced. A surviving file's request is never
//!   dropped except by [`SyncQueue::synced`], after its fsync.
//! - **Cycles** (PostgreSQL's `sync_cycle_ctr`). A checkpoint takes the requests filed so far
//!   ([`SyncQueue::begin_cycle`]) and fsyncs them one by one, marking each done as it goes;
//!   they stay in the queue meanwhile. A request filed again after its cycle began (a write
//!   during the checkpoint) stays for the next one, and so does every request the
//!   checkpoint did not get to: a checkpoint that fails part-way (a file it could not open)
//!   loses none, and the queue never holds more than its capacity.
//! - With `sync = immediate` every request is an fsync at once (PostgreSQL's old SLRU path),
//!   for side-by-side benchmarks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::config::SyncMode;
use crate::error::Result;
use crate::types::{Fork, RelFileLocator};

/// A file that needs an fsync before the next checkpoint completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SyncTarget {
    Segment {
        rel: RelFileLocator,
        fork: Fork,
        segno: u32,
    },
}

/// Counters of the queue's work.
#[derive(Debug, Default)]
pub struct SyncStats {
    pub requests: AtomicU64,
    pub absorbed: AtomicU64,
    /// fsyncs done by the writing thread (immediate mode, or a full queue).
    pub writer_fsyncs: AtomicU64,
}

/// The requests one checkpoint fsyncs: those filed before it began.
#[derive(Debug)]
pub struct SyncCycle {
    id: u64,
    /// In a stable order.
    pub targets: Vec<SyncTarget>,
}

struct Pending {
    /// Each request with the cycle it was last filed in.
    requests: HashMap<SyncTarget, u64>,
    /// The cycle requests filed now belong to.
    cycle: u64,
}

/// The bounded set of pending sync requests.
pub struct SyncQueue {
    mode: SyncMode,
    capacity: usize,
    pending: Mutex<Pending>,
    stats: SyncStats,
}

impl SyncQueue {
    pub fn new(mode: SyncMode, capacity: usize) -> Self {
        assert!(capacity > 0, "a sync queue holds at least one request");
        SyncQueue {
            mode,
            capacity,
            pending: Mutex::new(Pending {
                requests: HashMap::new(),
                cycle: 0,
            }),
            stats: SyncStats::default(),
        }
    }

    pub fn mode(&self) -> SyncMode {
        self.mode
    }

    pub fn stats(&self) -> &SyncStats {
        &self.stats
    }

    /// Registers that `target` was written; `fsync_now` is called when the request cannot be
    /// queued (immediate mode, or the queue is full).
    pub fn register(
        &self,
        target: SyncTarget,
        fsync_now: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        if self.mode == SyncMode::Checkpointer {
            let mut guard = self.pending.lock();
            let pending = &mut *guard;
            if let Some(cycle) = pending.requests.get_mut(&target) {
                // Filed again: a checkpoint running now must not count this write as synced.
                *cycle = pending.cycle;
                self.stats.absorbed.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            if pending.requests.len() < self.capacity {
                pending.requests.insert(target, pending.cycle);
                return Ok(());
            }
        }
        self.stats.writer_fsyncs.fetch_add(1, Ordering::Relaxed);
        fsync_now()
    }

    /// Cancels every request of a relation (it is being dropped).
    pub fn forget_relation(&self, rel: RelFileLocator) {
        self.pending.lock().requests.retain(|t, _| match t {
            SyncTarget::Segment { rel: r, .. } => *r != rel,
        });
    }

    /// Cancels the requests of a fork's segments from `first_segno` on (they are removed).
    pub fn forget_segments(&self, rel: RelFileLocator, fork: Fork, first_segno: u32) {
        self.pending.lock().requests.retain(|t, _| match t {
            SyncTarget::Segment {
                rel: r,
                fork: f,
                segno,
            } => !(*r == rel && *f == fork && *segno >= first_segno),
        });
    }

    /// Begins a checkpoint's cycle: the requests filed so far, in a stable order. They stay
    /// pending until [`SyncQueue::synced`] says each was fsynced.
    pub fn begin_cycle(&self) -> SyncCycle {
        let mut pending = self.pending.lock();
        let id = pending.cycle;
        pending.cycle += 1;
        let mut targets: Vec<_> = pending.requests.keys().copied().collect();
        targets.sort_unstable();
        SyncCycle { id, targets }
    }

    /// `target`, of `cycle`, was fsynced: its request is done, unless it was filed again
    /// after the cycle began.
    pub fn synced(&self, cycle: &SyncCycle, target: SyncTarget) {
        let mut pending = self.pending.lock();
        assert!(cycle.id < pending.cycle, "a cycle of the future");
        if pending.requests.get(&target).is_some_and(|&c| c <= cycle.id) {
            pending.requests.remove(&target);
        }
    }

    /// The pending requests, in a stable order.
    pub fn pending(&self) -> Vec<SyncTarget> {
        let mut targets: Vec<_> = self.pending.lock().requests.keys().copied().collect();
        targets.sort_unstable();
        targets
    }

    /// How many requests are pending.
    pub fn len(&self) -> usize {
        let pending = self.pending.lock();
        debug_assert!(pending.requests.len() <= self.capacity);
        pending.requests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn seg(rel: u64, segno: u32) -> SyncTarget {
        SyncTarget::Segment {
            rel: RelFileLocator::new(1, rel),
            fork: Fork::Main,
            segno,
        }
    }

    #[test]
    fn duplicates_are_absorbed_and_drained_once() {
        let q = SyncQueue::new(SyncMode::Checkpointer, 10);
        let fsyncs = Cell::new(0);
        for _ in 0..100 {
            q.register(seg(1, 0), || {
                fsyncs.set(fsyncs.get() + 1);
                Ok(())
            })
            .unwrap();
        }
        assert_eq!(fsyncs.get(), 0);
        assert_eq!(q.stats().absorbed.load(Ordering::Relaxed), 99);
        assert_eq!(sync_all(&q), vec![seg(1, 0)]);
        assert!(q.is_empty());
    }

    /// A checkpoint's cycle, every target fsynced (as the storage manager does it).
    fn sync_all(q: &SyncQueue) -> Vec<SyncTarget> {
        let cycle = q.begin_cycle();
        for &t in &cycle.targets {
            q.synced(&cycle, t);
        }
        cycle.targets
    }

    #[test]
    fn a_request_filed_again_during_its_cycle_and_those_not_reached_stay() {
        let q = SyncQueue::new(SyncMode::Checkpointer, 10);
        for rel in 1..=3 {
            q.register(seg(rel, 0), || Ok(())).unwrap();
        }
        let cycle = q.begin_cycle();
        assert_eq!(cycle.targets, vec![seg(1, 0), seg(2, 0), seg(3, 0)]);
        // A write to the first file while the checkpoint runs, before or after its fsync.
        q.register(seg(1, 0), || Ok(())).unwrap();
        q.register(seg(4, 0), || Ok(())).unwrap();
        q.synced(&cycle, seg(1, 0));
        q.synced(&cycle, seg(2, 0));
        // The checkpoint fails before the third: it, the first and the new one stay.
        assert_eq!(q.pending(), vec![seg(1, 0), seg(3, 0), seg(4, 0)]);
        assert_eq!(sync_all(&q), vec![seg(1, 0), seg(3, 0), seg(4, 0)]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_full_queue_makes_the_writer_fsync_and_counts_it() {
        let q = SyncQueue::new(SyncMode::Checkpointer, 2);
        let fsyncs = Cell::new(0);
        for rel in 0..5 {
            q.register(seg(rel, 0), || {
                fsyncs.set(fsyncs.get() + 1);
                Ok(())
            })
            .unwrap();
        }
        assert_eq!((q.len(), fsyncs.get()), (2, 3));
        assert_eq!(q.stats().writer_fsyncs.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn immediate_mode_fsyncs_every_request() {
        let q = SyncQueue::new(SyncMode::Immediate, 10);
        let fsyncs = Cell::new(0);
        for _ in 0..3 {
            q.register(seg(1, 0), || {
                fsyncs.set(fsyncs.get() + 1);
                Ok(())
            })
            .unwrap();
        }
        assert_eq!((q.len(), fsyncs.get()), (0, 3));
    }

    #[test]
    fn forget_cancels_only_what_it_names() {
        let q = SyncQueue::new(SyncMode::Checkpointer, 100);
        for (rel, segno) in [(1, 0), (1, 1), (1, 2), (2, 0)] {
            q.register(seg(rel, segno), || Ok(())).unwrap();
        }
        q.forget_segments(RelFileLocator::new(1, 1), Fork::Main, 1);
        assert_eq!(sync_all(&q), vec![seg(1, 0), seg(2, 0)]);
        q.register(seg(1, 0), || Ok(())).unwrap();
        q.register(seg(2, 0), || Ok(())).unwrap();
        q.forget_relation(RelFileLocator::new(1, 1));
        assert_eq!(sync_all(&q), vec![seg(2, 0)]);
    }
}
