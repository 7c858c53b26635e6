//! The background WAL writer (PostgreSQL's walwriter): flushes the WAL at least every
//! `wal_writer_delay`, so an asynchronous commit (`synchronous_commit = off`), which never
//! waits for an fsync, is durable within about three times that (one delay, plus the flush
//! under way when it committed, plus its own).
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
    _worker: Periodic,
}

impl WalWriter {
    /// Starts a thread that flushes `wal` every `delay`.
    pub fn start(wal: Arc<Wal>, delay: Duration) -> Result<WalWriter> {
        let worker = Periodic::start("quire-walwriter", delay, move |_| flush(&wal)).map_err(
            |e| Error::WalFailed {
                reason: format!("could not start the WAL writer thread: {e}"),
            },
        )?;
        Ok(WalWriter { _worker: worker })
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
