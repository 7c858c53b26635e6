//! The background WAL writer (PostgreSQL's walwriter): flushes the WAL at least every
//! `wal_writer_delay`, so an asynchronous commit (`synchronous_commit = off`), which never
//! waits for an fsync, is durable within about three times that (one delay, plus the flush
//! under way when it committed, plus its own).
//!
//! Rules: it flushes through [`Wal::flush`] like everyone else (so it joins group commit
//! and honours the failed state: once the WAL has failed its flushes are refused and it
//! only sleeps); dropping the handle stops and joins the thread.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::Wal;
use crate::error::{Error, Result};

/// The running WAL writer; dropping it stops the thread.
pub struct WalWriter {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl WalWriter {
    /// Starts a thread that flushes `wal` every `delay`.
    pub fn start(wal: Arc<Wal>, delay: Duration) -> Result<WalWriter> {
        assert!(!delay.is_zero(), "wal_writer_delay is at least 1 ms");
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("quire-walwriter".into())
            .spawn(move || run(&wal, delay, &flag))
            .map_err(|e| Error::WalFailed {
                reason: format!("could not start the WAL writer thread: {e}"),
            })?;
        Ok(WalWriter {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for WalWriter {
    fn drop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::error!("the WAL writer thread panicked");
            }
        }
    }
}

fn run(wal: &Wal, delay: Duration, stop: &(Mutex<bool>, Condvar)) {
    loop {
        {
            let mut stopped = stop.0.lock();
            if !*stopped {
                stop.1.wait_for(&mut stopped, delay);
            }
            if *stopped {
                return;
            }
        }
        let inserted = wal.insert_lsn();
        if wal.flushed_lsn() < inserted {
            // A failure has put the WAL in its failed state (the flush logged it): the
            // engine must restart; until then every flush is refused at once.
            if let Err(e) = wal.flush(inserted) {
                tracing::debug!(error = %e, "the WAL writer's flush failed");
            }
        }
    }
}
