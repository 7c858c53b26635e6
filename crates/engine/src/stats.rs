//! # stats — what is known of each table's tuples, and the shared counters' resets
//!
//! PostgreSQL's cumulative statistics (`pgstat`, `pg_stat_user_tables.n_live_tup` /
//! `n_dead_tup`): per-table counts of live and dead tuples that sessions report and that
//! autovacuum ([`crate::autovacuum`]) reads to choose what to vacuum.
//!
//! And the shared counters PostgreSQL shows in `pg_stat_bgwriter` and `pg_stat_wal`, as seen
//! since their last reset (`pg_stat_reset_shared`). The layers count from zero at open and
//! never go back (other users, such as a connection's CPU placement, read them as deltas); a
//! reset keeps a baseline that is subtracted, and the time it happened (`stats_reset`).
//!
//! ## Rules
//! - The counts are estimates, kept in memory (lost at restart, like PostgreSQL's after a
//!   crash): a transaction counts its own changes and publishes them once, when it ends — at
//!   commit, its deletes and updates made dead tuples; at abort, its inserts and new versions
//!   did. A vacuum then sets them to what it found.
//! - One mutex, held only to update or copy counts: never while waiting for anything else.

use std::sync::atomic::Ordering;

use parking_lot::Mutex;

use crate::buffer::BufferStats;
use crate::catalog::TableId;
use crate::checkpoint::CheckpointStats;
use crate::hash::FxHashMap;
use crate::vacuum::VacuumStats;
use crate::wal::WalCounters;

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

/// What `pg_stat_bgwriter` shows: the checkpointer's and the background writer's work, and
/// the buffers that statements had to write or allocate themselves. Times in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BgwriterCounters {
    pub checkpoints_timed: u64,
    pub checkpoints_req: u64,
    pub checkpoint_write_us: u64,
    pub checkpoint_sync_us: u64,
    pub buffers_checkpoint: u64,
    pub buffers_clean: u64,
    pub maxwritten_clean: u64,
    pub buffers_backend: u64,
    pub buffers_alloc: u64,
}

impl BgwriterCounters {
    /// The counters now.
    pub(crate) fn read(checkpoints: &CheckpointStats, buffers: &BufferStats) -> Self {
        let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        BgwriterCounters {
            checkpoints_timed: load(&checkpoints.timed),
            checkpoints_req: load(&checkpoints.requested),
            checkpoint_write_us: load(&checkpoints.write_us),
            checkpoint_sync_us: load(&checkpoints.sync_us),
            buffers_checkpoint: load(&checkpoints.buffers_written),
            buffers_clean: buffers.cleaned.get(),
            maxwritten_clean: load(&buffers.cleaner_max_rounds),
            buffers_backend: buffers.victim_writes.get(),
            buffers_alloc: buffers.allocs.get(),
        }
    }

    /// What was counted after `base` was read.
    fn since(self, base: Self) -> Self {
        BgwriterCounters {
            checkpoints_timed: self.checkpoints_timed.saturating_sub(base.checkpoints_timed),
            checkpoints_req: self.checkpoints_req.saturating_sub(base.checkpoints_req),
            checkpoint_write_us: self
                .checkpoint_write_us
                .saturating_sub(base.checkpoint_write_us),
            checkpoint_sync_us: self
                .checkpoint_sync_us
                .saturating_sub(base.checkpoint_sync_us),
            buffers_checkpoint: self.buffers_checkpoint.saturating_sub(base.buffers_checkpoint),
            buffers_clean: self.buffers_clean.saturating_sub(base.buffers_clean),
            maxwritten_clean: self.maxwritten_clean.saturating_sub(base.maxwritten_clean),
            buffers_backend: self.buffers_backend.saturating_sub(base.buffers_backend),
            buffers_alloc: self.buffers_alloc.saturating_sub(base.buffers_alloc),
        }
    }
}

/// The shared counters `pg_stat_reset_shared` resets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharedStats {
    /// `pg_stat_bgwriter`.
    Bgwriter,
    /// `pg_stat_wal`.
    Wal,
}

/// Counters as of the last reset of each kind, and when that was (microseconds since the
/// Unix epoch).
#[derive(Debug)]
pub(crate) struct SharedBaselines {
    inner: Mutex<Baselines>,
}

#[derive(Debug)]
struct Baselines {
    bgwriter: (BgwriterCounters, u64),
    wal: (WalCounters, u64),
}

impl SharedBaselines {
    /// Zero baselines: the counters start at open, at `opened_at_micros`.
    pub fn new(opened_at_micros: u64) -> Self {
        SharedBaselines {
            inner: Mutex::new(Baselines {
                bgwriter: (BgwriterCounters::default(), opened_at_micros),
                wal: (WalCounters::default(), opened_at_micros),
            }),
        }
    }

    /// `now` less the baseline, and the baseline's time.
    pub fn bgwriter(&self, now: BgwriterCounters) -> (BgwriterCounters, u64) {
        let (base, at) = self.inner.lock().bgwriter;
        (now.since(base), at)
    }

    pub fn wal(&self, now: WalCounters) -> (WalCounters, u64) {
        let (base, at) = self.inner.lock().wal;
        (now.since(base), at)
    }

    pub fn reset_bgwriter(&self, now: BgwriterCounters, at_micros: u64) {
        self.inner.lock().bgwriter = (now, at_micros);
    }

    pub fn reset_wal(&self, now: WalCounters, at_micros: u64) {
        self.inner.lock().wal = (now, at_micros);
    }
}
