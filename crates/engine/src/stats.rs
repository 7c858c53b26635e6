//! # stats — what is known of each table's tuples
//!
//! PostgreSQL's cumulative statistics (`pgstat`, `pg_stat_user_tables.n_live_tup` /
//! `n_dead_tup`): per-table counts of live and dead tuples that sessions report and that
//! autovacuum ([`crate::autovacuum`]) reads to choose what to vacuum.
//!
//! ## Rules
//! - The counts are estimates, kept in memory (lost at restart, like PostgreSQL's after a
//!   crash): a transaction counts its own changes and publishes them once, when it ends — at
//!   commit, its deletes and updates made dead tuples; at abort, its inserts and new versions
//!   did. A vacuum then sets them to what it found.
//! - One mutex, held only to update or copy counts: never while waiting for anything else.

use parking_lot::Mutex;

use crate::catalog::TableId;
use crate::hash::FxHashMap;
use crate::vacuum::VacuumStats;

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
    tables: Mutex<FxHashMap<TableId, TableStats>>,
}

impl StatsRegistry {
    /// A transaction that changed tables ended.
    pub fn report(&self, changes: &FxHashMap<TableId, TableChanges>, committed: bool) {
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

    pub fn forget(&self, table: TableId) {
        self.tables.lock().remove(&table);
    }

    /// The tables past the thresholds, most dead tuples first.
    pub fn due(&self, threshold: u64, scale_factor: f64) -> Vec<TableId> {
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
