//! # autovacuum — the background worker that runs VACUUM
//!
//! PostgreSQL's `postmaster/autovacuum.c`: a worker thread that vacuums, through the VACUUM
//! command ([`crate::commands::vacuum`]), every table whose dead tuples (counted by
//! [`crate::stats`]) pass `autovacuum_vacuum_threshold +
//! autovacuum_vacuum_scale_factor × live tuples`, every `autovacuum_naptime`. When the oldest
//! commit status kept is more than `autovacuum_freeze_max_age` transactions old, the round
//! vacuums the whole database instead, catalog included, so that the commit logs can drop
//! their old segments (PostgreSQL's anti-wraparound vacuum, here for space only).
//!
//! ## Rules
//! - The worker never waits for a lock: a table that is busy (SHARE UPDATE EXCLUSIVE not
//!   free at once) waits for the next round, as with PostgreSQL's autovacuum.
//! - Errors are handled here (logged, the table retried next round); the worker stops with
//!   the database.

use std::sync::Arc;
use std::time::Duration;

use crate::commands::vacuum::{vacuum_database, vacuum_table};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::periodic::{Periodic, Stop};

/// The autovacuum worker thread; stopped (and joined) when dropped.
pub(crate) struct Autovacuum {
    _worker: Periodic,
}

impl Autovacuum {
    pub fn start(engine: Arc<Engine>) -> Result<Self> {
        let nap = Duration::from_millis(engine.config.autovacuum_naptime_ms);
        let worker = Periodic::start("quire-autovacuum", nap, move |stop| round(&engine, stop))
            .map_err(|e| Error::StartupRefused {
                reason: format!("could not start the autovacuum worker: {e}"),
            })?;
        Ok(Autovacuum { _worker: worker })
    }
}

/// One round: the whole database if the commit logs are too far behind, else every table
/// due.
fn round(engine: &Arc<Engine>, stop: &Stop) {
        let behind = engine.txns.next_xid() - engine.txns.oldest_xid();
        if behind > engine.config.autovacuum_freeze_max_age {
            match vacuum_database(engine, false) {
                Ok(v) => tracing::info!(
                    tables = v.tables.len(),
                    skipped = v.skipped,
                    oldest_xid = %v.oldest_xid,
                    segments_removed = v.log_segments_removed,
                    "autovacuum of the whole database"
                ),
                // Handled here: logged, and retried at the next round.
                Err(e) => tracing::warn!(error = %e, "autovacuum of the whole database failed"),
            }
            return;
        }
        let due = engine.table_stats.due(
            engine.config.autovacuum_vacuum_threshold,
            engine.config.autovacuum_vacuum_scale_factor,
        );
        for table in due {
            if stop.requested() {
                return;
            }
            match vacuum_table(engine, table, false) {
                Ok(Some(s)) => {
                    tracing::debug!(table = %table, removed = s.dead_tuples_removed, "autovacuum");
                }
                Ok(None) => {} // busy: next round
                Err(Error::UndefinedTable { .. }) => engine.table_stats.forget(table),
                // Handled here: logged, and retried at the next round.
                Err(e) => tracing::warn!(table = %table, error = %e, "autovacuum failed"),
            }
        }
}
