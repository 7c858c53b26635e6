//! The VACUUM command on one table (PostgreSQL's `commands/vacuum.c`): the locks, the catalog
//! lookup, lazy vacuum of the heap ([`crate::vacuum::lazy`]) and of each index, the
//! conditional truncation, and the table's statistics. Used by
//! [`Database::vacuum`](crate::Database::vacuum) and by the autovacuum worker
//! ([`crate::autovacuum`]).
//!
//! And VACUUM of the whole database (`vacuum_database`): every table, then the catalog,
//! then — if none was skipped — the commit logs lose the statuses below the oldest id any
//! table still names without a hint, keeping those of the last `vacuum_freeze_min_age`
//! transactions anyway (PostgreSQL's `vac_update_datfrozenxid` and `vac_truncate_clog`).

use std::sync::Arc;
use std::time::Instant;

use crate::btree::BTree;
use crate::catalog::{Catalog, TableId, CATALOG_REL, USER_DB};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::heap::Heap;
use crate::session::{IsolationLevel, Transaction};
use crate::toast::Toast;
use crate::txn::lock::{LockMode, LockTag, LockWait};
use crate::types::{Oid, Xid};
use crate::vacuum::lazy::{
    nonempty_length, truncate_empty_tail, vacuum_heap, IndexCleaner, VacuumStats,
};
use crate::vacuum::DeadTids;

/// Begins the transaction a vacuum runs in and takes SHARE UPDATE EXCLUSIVE on `tag` (one
/// vacuum per relation at a time; readers and writers go on). With `wait` false, `Ok(None)`
/// if the lock is not free at once.
fn begin_vacuum(engine: &Arc<Engine>, tag: LockTag, wait: bool) -> Result<Option<Transaction>> {
    let tx = Transaction::begin(Arc::clone(engine), IsolationLevel::ReadCommitted, None)?;
    let how = if wait {
        LockWait::Block
    } else {
        LockWait::NoWait
    };
    match engine
        .locks
        .acquire(tx.session_id(), tag, LockMode::ShareUpdateExclusive, how)
    {
        Ok(()) => Ok(Some(tx)),
        Err(e) if wait => Err(e),
        Err(_) => Ok(None),
    }
}

/// Vacuums `table`. With `wait` false (autovacuum), a table whose SHARE UPDATE EXCLUSIVE lock
/// is not free at once is skipped (`Ok(None)`), as PostgreSQL's autovacuum skips it.
pub(crate) fn vacuum_table(
    engine: &Arc<Engine>,
    table: TableId,
    wait: bool,
) -> Result<Option<VacuumStats>> {
    let tag = LockTag::Relation {
        db_oid: USER_DB,
        rel_oid: table,
    };
    let Some(tx) = begin_vacuum(engine, tag, wait)? else {
        return Ok(None);
    };
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
    let toast = Toast::new(&engine.pool, &engine.wal, def.rel);
    let mut toast_stats = if toast.exists()? {
        let s = vacuum_heap(
            toast.heap(),
            &engine.txns,
            horizon,
            engine.config.dead_tids,
            engine.config.maintenance_work_mem_bytes,
            &[],
        )?;
        stats.frozen_xid = stats.frozen_xid.min(s.frozen_xid);
        Some(Box::new(s))
    } else {
        None
    };
    let started = Instant::now();
    // Conditional, as PostgreSQL's: a busy table keeps its empty tail for now.
    let toast_tail = match &toast_stats {
        Some(_) => nonempty_length(toast.heap())? < toast.heap().nblocks()?,
        None => false,
    };
    if (nonempty_length(&heap)? < heap.nblocks()? || toast_tail)
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
        if let Some(s) = toast_stats.as_mut() {
            s.pages_truncated = truncate_empty_tail(toast.heap(), &engine.wal, &engine.pool)?;
        }
        engine
            .locks
            .release(tx.session_id(), tag, LockMode::AccessExclusive);
    }
    stats.toast = toast_stats;
    stats.duration += started.elapsed();
    if cfg!(debug_assertions) {
        debug_verify(engine, &tx, tag, table);
    }
    tx.commit()?;
    engine.table_stats.vacuumed(table, &stats, !wait);
    Ok(Some(stats))
}

/// Debug builds check, after each vacuum, the table's indexes against its heap and each
/// index's structure (amcheck, [`Transaction::verify_indexes`]), so that every test that
/// vacuums also checks what vacuum left. Only when no writer is active (SHARE free at once):
/// the check must not see half-done changes, and a vacuum never waits for it.
fn debug_verify(engine: &Engine, tx: &Transaction, tag: LockTag, table: TableId) {
    let quiet = engine
        .locks
        .acquire(tx.session_id(), tag, LockMode::Share, LockWait::NoWait)
        .is_ok();
    if quiet {
        if let Err(e) = tx.verify_indexes(table) {
            panic!("table {table} after vacuum: {e}");
        }
    }
}

/// What a VACUUM of the whole database did.
#[derive(Clone, Debug, Default)]
pub struct DatabaseVacuum {
    /// Each table vacuumed, by name.
    pub tables: Vec<(String, VacuumStats)>,
    /// The catalog's vacuum (`None`: skipped, its lock was busy).
    pub catalog: Option<VacuumStats>,
    /// Tables skipped because their lock was busy (autovacuum only): the commit logs keep
    /// everything then.
    pub skipped: usize,
    /// The oldest id whose commit status is kept, after.
    pub oldest_xid: Xid,
    /// Commit-log segment files removed.
    pub log_segments_removed: usize,
    /// Addresses of catalog versions the catalog's index forgot (vacuum freed them), and
    /// those it keeps.
    pub catalog_addresses_forgotten: usize,
    pub catalog_addresses: usize,
}

/// VACUUM of every table and of the catalog, then the commit-log truncation (see the module
/// header). With `wait` false (autovacuum), a busy table is skipped, and with it the
/// truncation.
pub(crate) fn vacuum_database(engine: &Arc<Engine>, wait: bool) -> Result<DatabaseVacuum> {
    // Ids below this one had ended when the vacuum began: a table created or filled from
    // now on names none of them, so the tables listed now are all that can.
    let start_horizon = engine.txns.global_xmin();
    let tables = {
        let tx = Transaction::begin(Arc::clone(engine), IsolationLevel::ReadCommitted, None)?;
        let t = tx.tables()?;
        tx.commit()?;
        t
    };
    let mut out = DatabaseVacuum::default();
    let mut frozen_xid = start_horizon;
    for t in tables {
        match vacuum_table(engine, t.oid, wait) {
            Ok(Some(s)) => {
                frozen_xid = frozen_xid.min(s.frozen_xid);
                out.tables.push((t.name.to_string(), s));
            }
            Ok(None) => out.skipped += 1,
            // Dropped meanwhile: nothing to vacuum.
            Err(Error::UndefinedTable { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    match vacuum_catalog(engine, wait)? {
        Some((s, (forgotten, kept))) => {
            frozen_xid = frozen_xid.min(s.frozen_xid);
            out.catalog = Some(s);
            out.catalog_addresses_forgotten = forgotten;
            out.catalog_addresses = kept;
        }
        None => out.skipped += 1,
    }
    if out.skipped == 0 {
        let keep_recent = engine
            .txns
            .next_xid()
            .saturating_sub(engine.config.effective_freeze_min_age());
        out.log_segments_removed = engine.txns.truncate_logs(frozen_xid.min(keep_recent))?;
    }
    out.oldest_xid = engine.txns.oldest_xid();
    Ok(out)
}

/// VACUUM of the catalog's heap (no truncation: DDL takes no lock on the catalog), then the
/// catalog's index forgets the addresses it freed (how many it forgot and keeps is returned
/// too). `None` if `wait` is false and another vacuum of the catalog runs.
fn vacuum_catalog(
    engine: &Arc<Engine>,
    wait: bool,
) -> Result<Option<(VacuumStats, (usize, usize))>> {
    let tag = LockTag::Relation {
        db_oid: CATALOG_REL.db_oid,
        rel_oid: Oid(CATALOG_REL.rel_number),
    };
    let Some(tx) = begin_vacuum(engine, tag, wait)? else {
        return Ok(None);
    };
    let heap = Catalog::heap(&engine.pool, &engine.wal);
    let stats = vacuum_heap(
        &heap,
        &engine.txns,
        engine.txns.global_xmin(),
        engine.config.dead_tids,
        engine.config.maintenance_work_mem_bytes,
        &[],
    )?;
    let forgotten = engine.catalog.forget_vacuumed(&heap)?;
    tx.commit()?;
    Ok(Some((stats, forgotten)))
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
