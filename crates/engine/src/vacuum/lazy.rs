//! Lazy vacuum of one table (PostgreSQL's `vacuumlazy.c`).
//!
//! 1. **Heap pass**, block by block in order, skipping blocks the visibility map says are
//!    all-visible: prune ([`crate::heap::prune`]), freeze ([`crate::heap::freeze`]), collect
//!    the dead line pointers into the dead-TID store, mark the block all-visible when it is.
//!    When the store is full, run steps 2 and 3 for what it holds, clear it, and go on — as
//!    many times as needed (the store's memory is the only bound; no 1 GB cap).
//! 2. **Index pass**: every index of the table removes the entries whose TID is in the
//!    store ([`IndexCleaner::bulk_delete`]).
//! 3. **Second heap pass**: the collected line pointers become unused (their index entries
//!    are gone, so a TID can be reused without an index pointing at a stranger), and each
//!    page's free space is recorded in the free-space map.
//! 4. **Truncation** (by the caller, who holds the locks, with [`truncate_empty_tail`]):
//!    empty pages at the end are cut off under a brief ACCESS EXCLUSIVE lock, their buffers
//!    dropped through the buffer pool's fast path, WAL-logged so redo does the same.
//!
//! ## Rules
//! - The caller holds SHARE UPDATE EXCLUSIVE on the table (one vacuum at a time; reads and
//!   writes go on) and passes the horizon: versions deleted below it are dead to all.
//! - Steps 2 and 3 always run in that order for the same set of TIDs: a line pointer is
//!   unused only after no index entry points at it.
//! - An all-visible page is frozen (see [`crate::heap::freeze`]): skipping it leaves the
//!   table's frozen bound ([`VacuumStats::frozen_xid`]) where the scanned pages put it.

use std::time::{Duration, Instant};

use crate::buffer::BufferPool;
use crate::config::DeadTidsMode;
use crate::error::{Error, Result};
use crate::fsm;
use crate::heap::{Heap, Remembering, XidOracle};
use crate::page::OffsetNumber;
use crate::recovery::storage;

use crate::types::{BlockNumber, Fork, Xid};
use crate::vm;
use crate::wal::Wal;

use super::{new_dead_tids, DeadTids};

/// An index of the table being vacuumed, as vacuum's index pass sees it.
pub trait IndexCleaner {
    fn name(&self) -> &str;
    /// Removes every entry whose TID is in `dead`; returns how many it removed.
    fn bulk_delete(&self, dead: &dyn DeadTids) -> Result<u64>;
}

/// What a vacuum did (PostgreSQL's `VACUUM VERBOSE` figures).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VacuumStats {
    /// Heap blocks when the vacuum began.
    pub pages: BlockNumber,
    pub pages_scanned: BlockNumber,
    /// Blocks skipped because the visibility map said all-visible.
    pub pages_skipped_all_visible: BlockNumber,
    pub pages_set_all_visible: BlockNumber,
    /// Line pointers pruning changed (versions removed from HOT chains, roots made dead).
    pub pruned: u64,
    /// Dead line pointers freed by the second heap pass (their index entries removed).
    pub dead_tuples_removed: u64,
    pub index_entries_removed: u64,
    pub live_tuples: u64,
    pub recently_dead_tuples: u64,
    pub index_passes: u32,
    /// Blocks cut off the end of the table.
    pub pages_truncated: BlockNumber,
    /// Versions whose headers freezing changed (hints set, old lockers cleared).
    pub tuples_frozen: u64,
    /// Every version of the table names only ids at or above this one, or carries a hint
    /// for each id below it (PostgreSQL's `relfrozenxid`): the commit log is not asked about
    /// ids below it for this table. 0 before any vacuum.
    pub frozen_xid: Xid,
    pub duration: Duration,
    /// The vacuum of the table's TOAST relation, if it has one (its `frozen_xid` is
    /// already in the table's).
    pub toast: Option<Box<VacuumStats>>,
}

/// Steps 1-3 over `heap` (see the module header).
pub fn vacuum_heap(
    heap: &Heap<'_>,
    oracle: &dyn XidOracle,
    horizon: Xid,
    mode: DeadTidsMode,
    budget_bytes: u64,
    indexes: &[&dyn IndexCleaner],
) -> Result<VacuumStats> {
    let started = Instant::now();
    let oracle = &Remembering::new(oracle);
    let mut stats = VacuumStats {
        pages: heap.nblocks()?,
        // Pages added later hold only ids of transactions running now or later: above it.
        frozen_xid: horizon,
        ..VacuumStats::default()
    };
    let mut dead = new_dead_tids(mode, budget_bytes);
    let mut offsets: Vec<OffsetNumber> = Vec::new();
    for block in 0..stats.pages {
        if vm::is_set(heap.pool, heap.rel, block)? {
            stats.pages_skipped_all_visible += 1;
            continue;
        }
        offsets.clear();
        let census = heap.vacuum_scan_page(block, horizon, oracle, &mut offsets)?;
        stats.pages_scanned += 1;
        stats.pruned += census.pruned_versions as u64;
        stats.live_tuples += census.live as u64;
        stats.recently_dead_tuples += census.recently_dead as u64;
        stats.pages_set_all_visible += BlockNumber::from(census.set_all_visible);
        stats.tuples_frozen += census.frozen as u64;
        if let Some(xid) = census.oldest_unfrozen {
            stats.frozen_xid = stats.frozen_xid.min(xid);
        }
        if offsets.is_empty() {
            fsm::record(heap.pool, heap.rel, block, census.free_bytes)?;
            continue;
        }
        if dead.try_add_block(block, &offsets).is_err() {
            // No room (the array's cap): clean what is held, then this block fits.
            clean(heap, dead.as_ref(), indexes, &mut stats)?;
            dead.clear();
            dead.try_add_block(block, &offsets)
                .map_err(|e| Error::ProgramLimitExceeded {
                    what: format!(
                        "maintenance_work_mem cannot hold the dead tuples of one page: {e}"
                    ),
                })?;
        }
        if dead.is_full() {
            // The budget is used up: clean what is held and go on with an empty store.
            clean(heap, dead.as_ref(), indexes, &mut stats)?;
            dead.clear();
        }
    }
    if dead.num_tids() > 0 {
        clean(heap, dead.as_ref(), indexes, &mut stats)?;
    }
    stats.duration = started.elapsed();
    Ok(stats)
}

/// Steps 2 and 3 for the TIDs in `dead`.
fn clean(
    heap: &Heap<'_>,
    dead: &dyn DeadTids,
    indexes: &[&dyn IndexCleaner],
    stats: &mut VacuumStats,
) -> Result<()> {
    stats.index_passes += 1;
    for index in indexes {
        stats.index_entries_removed += index.bulk_delete(dead)?;
    }
    let mut result = Ok(());
    let _ = dead.for_each_block(
        &mut |block, offsets| match heap.vacuum_free_page(block, offsets) {
            Ok(free) => {
                stats.dead_tuples_removed += offsets.len() as u64;
                if let Err(e) = fsm::record(heap.pool, heap.rel, block, free) {
                    result = Err(e);
                    return std::ops::ControlFlow::Break(());
                }
                std::ops::ControlFlow::Continue(())
            }
            Err(e) => {
                result = Err(e);
                std::ops::ControlFlow::Break(())
            }
        },
    );
    result
}

/// The number of blocks the table keeps once its empty tail pages are cut.
pub fn nonempty_length(heap: &Heap<'_>) -> Result<BlockNumber> {
    let mut n = heap.nblocks()?;
    // Bounded by the table's length.
    while n > 0 && heap.page_is_empty(n - 1)? {
        n -= 1;
    }
    Ok(n)
}

/// Step 4: cuts the empty pages at the end of the table. The caller holds ACCESS EXCLUSIVE on
/// it (nobody else touches it). The truncation is WAL-logged; buffers of the cut blocks are
/// dropped through the pool's fast path (seed 000). Returns the number of blocks cut.
///
/// Unlike PostgreSQL, the record is not flushed before the file is cut: PostgreSQL flushes so
/// that a crash cannot leave a cut heap with a map (FSM, VM) describing the lost pages, which
/// quire's maps tolerate (see [`crate::vm`], [`crate::fsm`]); and if the file is cut but the
/// record lost, redo re-extends the file for the earlier records of those pages, each page's
/// first one after the redo point carrying its full image, and they end empty again.
pub fn truncate_empty_tail(heap: &Heap<'_>, wal: &Wal, pool: &BufferPool) -> Result<BlockNumber> {
    let old = heap.nblocks()?;
    let keep = nonempty_length(heap)?;
    if keep >= old {
        return Ok(0);
    }
    storage::log_truncate(wal, heap.rel, Fork::Main, keep)?;
    pool.drop_relation_buffers(heap.rel, Fork::Main, keep);
    pool.smgr().truncate(heap.rel, Fork::Main, keep)?;
    fsm::truncate(pool, heap.rel, keep)?;
    vm::truncate(pool, heap.rel, keep)?;
    Ok(old - keep)
}
