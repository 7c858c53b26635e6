//! The VACUUM command on one table: the locks, the catalog lookup, lazy vacuum
//! ([`super::lazy`]), the conditional truncation, and the table's statistics. Used by
//! [`Database::vacuum`](crate::Database::vacuum) and by the autovacuum worker ([`super::auto`]).

use std::sync::Arc;
use std::time::Instant;

use super::lazy::{nonempty_length, truncate_empty_tail, vacuum_heap, IndexCleaner, VacuumStats};
use super::DeadTids;
use crate::btree::BTree;
use crate::catalog::{TableId, USER_DB};
use crate::db::Engine;
use crate::error::Result;
use crate::heap::Heap;
use crate::session::{IsolationLevel, Transaction};
use crate::txn::lock::{LockMode, LockTag, LockWait};

/// Vacuums `table`. With `wait` false (autovacuum), a table whose SHARE UPDATE EXCLUSIVE lock
/// is not free at once is skipped (`Ok(None)`), as PostgreSQL's autovacuum skips it.
pub(crate) fn vacuum_table(
    engine: &Arc<Engine>,
    table: TableId,
    wait: bool,
) -> Result<Option<VacuumStats>> {
    let tx = Transaction::begin(Arc::clone(engine), IsolationLevel::ReadCommitted)?;
    let tag = LockTag::Relation {
        db_oid: USER_DB,
        rel_oid: table,
    };
    let how = if wait {
        LockWait::Block
    } else {
        LockWait::NoWait
    };
    if let Err(e) = engine
        .locks
        .acquire(tx.session_id(), tag, LockMode::ShareUpdateExclusive, how)
    {
        if wait {
            return Err(e);
        }
        return Ok(None);
    }
    let def = tx.table_def(table)?;
    let trees = tx.index_btrees(table)?;
    let cleaners: Vec<&dyn IndexCleaner> = trees.iter().map(|t| t as &dyn IndexCleaner).collect();
    let heap = Heap::new(&engine.pool, &engine.wal, def.rel);
    let horizon = engine.txns.global_xmin();
    let mut stats = vacuum_heap(
        &heap,
        &engine.txns,
        horizon,
        engine.config.dead_tids,
        engine.config.maintenance_work_mem_bytes,
        &cleaners,
    )?;
    let started = Instant::now();
    // Conditional, as PostgreSQL's: a busy table keeps its empty tail for now.
    if nonempty_length(&heap)? < heap.nblocks()?
        && engine
            .locks
            .acquire(
                tx.session_id(),
                tag,
                LockMode::AccessExclusive,
                LockWait::NoWait,
            )
            .is_ok()
    {
        stats.pages_truncated = truncate_empty_tail(&heap, &engine.wal, &engine.pool)?;
        engine
            .locks
            .release(tx.session_id(), tag, LockMode::AccessExclusive);
    }
    stats.duration += started.elapsed();
    tx.commit()?;
    engine.table_stats.vacuumed(table, &stats, !wait);
    Ok(Some(stats))
}

/// A B+tree as vacuum's index pass sees it.
impl IndexCleaner for BTree<'_> {
    fn name(&self) -> &str {
        &self.desc.name
    }

    fn bulk_delete(&self, dead: &dyn DeadTids) -> Result<u64> {
        Ok(BTree::bulk_delete(self, dead)?.entries_removed)
    }
}
