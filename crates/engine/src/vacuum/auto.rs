//! Autovacuum: per-table counts of live and dead tuples (PostgreSQL's
//! `pg_stat_user_tables.n_live_tup` / `n_dead_tup`), and a background worker that vacuums
//! every table whose dead tuples pass `autovacuum_vacuum_threshold +
//! autovacuum_vacuum_scale_factor × live tuples`, every `autovacuum_naptime`. When the oldest
//! commit status kept is more than `autovacuum_freeze_max_age` transactions old, the round
//! vacuums the whole database instead, catalog included, so that the commit logs can drop
//! their old segments (PostgreSQL's anti-wraparound vacuum, here for space only).
//!
//! ## Rules
//! - The counts are estimates, kept in memory (lost at restart, like PostgreSQL's after a
//!   crash): a transaction counts its own changes and publishes them once, when it ends — at
//!   commit, its deletes and updates made dead tuples; at abort, its inserts and new versions
//!   did. A vacuum then sets them to what it found.
//! - The worker never waits for a lock: a table that is busy (SHARE UPDATE EXCLUSIVE not
//!   free at once) waits for the next round, as with PostgreSQL's autovacuum.
//! - Errors are handled here (logged, the table retried next round); the worker stops with
//!   the database.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::lazy::VacuumStats;
use crate::catalog::TableId;
use crate::db::Engine;
use crate::error::{Error, Result};

/// What is known of a table's tuples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    pub live_tuples: u64,
    pub dead_tuples: u64,
    pub vacuum_count: u64,
    pub autovacuum_count: u64,
}

/// One transaction's changes to one table.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TableChanges {
    pub inserted: u64,
    pub updated: u64,
    pub deleted: u64,
}

/// The counts of every table.
#[derive(Default)]
pub(crate) struct StatsRegistry {
    tables: Mutex<HashMap<TableId, TableStats>>,
}

impl StatsRegistry {
    /// A transaction that changed tables ended.
    pub fn report(&self, changes: &HashMap<TableId, TableChanges>, committed: bool) {
        if changes.is_empty() {
            return;
        }
        let mut g = self.tables.lock();
        for (table, c) in changes {
            let s = g.entry(*table).or_default();
            if committed {
                s.live_tuples = (s.live_tuples + c.inserted).saturating_sub(c.deleted);
                s.dead_tuples += c.updated + c.deleted;
            } else {
                s.dead_tuples += c.inserted + c.updated;
            }
        }
    }

    /// A vacuum of `table` found `stats`.
    pub fn vacuumed(&self, table: TableId, stats: &VacuumStats, auto: bool) {
        let mut g = self.tables.lock();
        let s = g.entry(table).or_default();
        s.live_tuples = stats.live_tuples;
        s.dead_tuples = stats.recently_dead_tuples;
        if auto {
            s.autovacuum_count += 1;
        } else {
            s.vacuum_count += 1;
        }
    }

    pub fn get(&self, table: TableId) -> Option<TableStats> {
        self.tables.lock().get(&table).copied()
    }

    fn forget(&self, table: TableId) {
        self.tables.lock().remove(&table);
    }

    /// The tables past the thresholds, most dead tuples first.
    fn due(&self, threshold: u64, scale_factor: f64) -> Vec<TableId> {
        let g = self.tables.lock();
        let mut due: Vec<(u64, TableId)> = g
            .iter()
            .filter(|(_, s)| {
                s.dead_tuples as f64 > threshold as f64 + scale_factor * s.live_tuples as f64
            })
            .map(|(t, s)| (s.dead_tuples, *t))
            .collect();
        due.sort_unstable_by(|a, b| b.cmp(a));
        due.into_iter().map(|(_, t)| t).collect()
    }
}

/// The autovacuum worker thread; stopped (and joined) when dropped.
pub(crate) struct Autovacuum {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Autovacuum {
    pub fn start(engine: Arc<Engine>) -> Result<Self> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("quire-autovacuum".into())
            .spawn(move || run(&engine, &flag))
            .map_err(|e| Error::CheckpointFailed {
                reason: format!("could not start the autovacuum worker: {e}"),
            })?;
        Ok(Autovacuum {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Autovacuum {
    fn drop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::error!("the autovacuum worker panicked");
            }
        }
    }
}

fn run(engine: &Arc<Engine>, stop: &(Mutex<bool>, Condvar)) {
    let nap = Duration::from_millis(engine.config.autovacuum_naptime_ms);
    loop {
        {
            let mut stopped = stop.0.lock();
            if !*stopped {
                stop.1.wait_for(&mut stopped, nap);
            }
            if *stopped {
                return;
            }
        }
        let behind = engine.txns.next_xid() - engine.txns.oldest_xid();
        if behind > engine.config.autovacuum_freeze_max_age {
            match super::command::vacuum_database(engine, false) {
                Ok(v) => tracing::info!(
                    tables = v.tables.len(),
                    skipped = v.skipped,
                    oldest_xid = v.oldest_xid,
                    segments_removed = v.log_segments_removed,
                    "autovacuum of the whole database"
                ),
                // Handled here: logged, and retried at the next round.
                Err(e) => tracing::warn!(error = %e, "autovacuum of the whole database failed"),
            }
            continue;
        }
        let due = engine.table_stats.due(
            engine.config.autovacuum_vacuum_threshold,
            engine.config.autovacuum_vacuum_scale_factor,
        );
        for table in due {
            if *stop.0.lock() {
                return;
            }
            match super::command::vacuum_table(engine, table, false) {
                Ok(Some(s)) => {
                    tracing::debug!(table, removed = s.dead_tuples_removed, "autovacuum");
                }
                Ok(None) => {} // busy: next round
                Err(Error::UndefinedTable { .. }) => engine.table_stats.forget(table),
                // Handled here: logged, and retried at the next round.
                Err(e) => tracing::warn!(table, error = %e, "autovacuum failed"),
            }
        }
    }
}
