//! The background WAL writer (PostgreSQL's walwriter). Every `wal_writer_delay`, and at
//! once when an inserter pokes it, it
//! - writes out the complete WAL (no fsync) once half the ring is unwritten, so that an
//!   inserter that has filled half the ring goes on inserting while this thread writes (see
//!   "Writing behind" in [`super`]);
//! - flushes the WAL, if commits are asynchronous (`synchronous_commit = off`): such a
//!   commit never waits for an fsync and is durable within about three delays (one delay,
//!   plus the flush under way when it committed, plus its own);
//! - prepares the next WAL segment, zero-filled (`wal_init_zero`,
//!   [`Wal::prepare_next_segment`]), so that no committer writes into a sparse file.
//!
//! Rules: it flushes through [`Wal::flush`] like everyone else (so it joins group commit
//! and honours the failed state: once the WAL has failed its flushes are refused and it
//! only sleeps); dropping the handle stops and joins the thread.

use std::sync::Arc;
use std::time::Duration;

use super::Wal;
use crate::error::{Error, Result};
use crate::periodic::Periodic;

/// The running WAL writer; dropping it stops the thread.
pub struct WalWriter {
    wal: Arc<Wal>,
    _worker: Periodic,
}

/// What the WAL writer does each round.
#[derive(Clone, Copy, Debug)]
pub struct WalWriterJobs {
    /// Flush the WAL (commits are asynchronous).
    pub flush: bool,
    /// Prepare the next segment (`wal_init_zero`).
    pub prepare_segments: bool,
}

impl WalWriter {
    /// Starts a thread that does `jobs` on `wal` every `delay`.
    pub fn start(wal: Arc<Wal>, delay: Duration, jobs: WalWriterJobs) -> Result<WalWriter> {
        let ours = Arc::clone(&wal);
        let round = move |_: &crate::periodic::Stop| {
            write_behind(&wal);
            if jobs.flush {
                flush(&wal);
            }
            if jobs.prepare_segments {
                prepare_segment(&wal);
            }
        };
        let worker = Periodic::start("quire-walwriter", delay, round).map_err(|e| {
            Error::WalFailed {
                reason: format!("could not start the WAL writer thread: {e}"),
            }
        })?;
        ours.write_behind.set(Some(worker.poke_handle()));
        Ok(WalWriter {
            wal: ours,
            _worker: worker,
        })
    }
}

impl Drop for WalWriter {
    fn drop(&mut self) {
        // Inserters write out the ring themselves again.
        self.wal.write_behind.set(None);
    }
}

fn write_behind(wal: &Wal) {
    // A failure has put the WAL in its failed state (the write logged it).
    if let Err(e) = wal.write_behind() {
        tracing::debug!(error = %e, "the WAL writer's write failed");
    }
}

fn prepare_segment(wal: &Wal) {
    // Logged here, where it is handled: the writer creates the segment itself instead.
    if let Err(e) = wal.prepare_next_segment() {
        tracing::warn!(error = %e, "could not prepare the next WAL segment");
    }
}

fn flush(wal: &Wal) {
    let inserted = wal.insert_lsn();
    if wal.flushed_lsn() < inserted {
        // A failure has put the WAL in its failed state (the flush logged it): the
        // engine must restart; until then every flush is refused at once.
        if let Err(e) = wal.flush(inserted) {
            tracing::debug!(error = %e, "the WAL writer's flush failed");
        }
    }
}
