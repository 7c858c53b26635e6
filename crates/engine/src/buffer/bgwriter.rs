//! The background writer (PostgreSQL's bgwriter): every `bgwriter_delay` it writes the dirty
//! buffers the clock sweep will take next ([`BufferPool::clean_ahead`]), so a miss finds a
//! clean victim instead of writing one back on the way to its page: the write moves off the
//! path of a statement (and of a commit's latency) to a thread of its own. A miss that still
//! had to write its victim pokes it: the next round runs at once, not after the delay
//! (PostgreSQL's backends only wake a hibernating bgwriter). So under a stream of misses
//! (a VACUUM of a table larger than the pool) rounds run back to back and the writes move
//! to this thread, on another core; with no dirty victims it keeps PostgreSQL's pace.
//!
//! Rules: it writes through the pool's one write-back path, so the WAL rule holds as for any
//! write; it writes at most `bgwriter_lru_maxpages` per round (0: no background writer);
//! a failed write is logged and the round ends (a failed WAL or file write has put the
//! engine in its failed state; writes are refused until it restarts); dropping the handle
//! stops and joins the thread.

use std::sync::Arc;
use std::time::Duration;

use super::{BufferPool, Cleaner};
use crate::error::{Error, Result};
use crate::periodic::Periodic;

/// The pool is looked at whole at least this often, so dirty buffers of an idle pool are
/// written too (PostgreSQL's `scan_whole_pool_milliseconds`).
const SCAN_WHOLE_POOL: Duration = Duration::from_secs(120);

/// The background writer's settings.
#[derive(Clone, Copy, Debug)]
pub struct BgWriterSettings {
    /// `bgwriter_delay`.
    pub delay: Duration,
    /// `bgwriter_lru_maxpages`: writes per round at most.
    pub lru_maxpages: u64,
    /// `bgwriter_lru_multiplier`: buffers made reusable per round, as a multiple of the
    /// buffers taken in a recent round.
    pub lru_multiplier: f64,
}

/// The running background writer; dropping it stops the thread.
pub struct BgWriter {
    pool: Arc<BufferPool>,
    _worker: Periodic,
}

impl BgWriter {
    /// Starts a thread that cleans `pool` ahead of its clock sweep every `settings.delay`.
    pub fn start(pool: Arc<BufferPool>, settings: BgWriterSettings) -> Result<BgWriter> {
        let rounds_per_lap =
            (SCAN_WHOLE_POOL.as_millis() / settings.delay.as_millis().max(1)).max(1);
        let min_scan = (pool.nbuffers() as u64).div_ceil(rounds_per_lap as u64);
        let mut cleaner = Cleaner::default();
        let ours = Arc::clone(&pool);
        let worker = Periodic::start("quire-bgwriter", settings.delay, move |_| {
            if let Err(e) = pool.clean_ahead(
                &mut cleaner,
                settings.lru_maxpages,
                settings.lru_multiplier,
                min_scan,
            ) {
                tracing::warn!(error = %e, "the background writer's write failed");
            }
        })
        .map_err(|e| Error::StartupRefused {
            reason: format!("could not start the background writer thread: {e}"),
        })?;
        ours.cleaner.set(Some(worker.poke_handle()));
        Ok(BgWriter {
            pool: ours,
            _worker: worker,
        })
    }
}

impl Drop for BgWriter {
    fn drop(&mut self) {
        self.pool.cleaner.set(None);
    }
}
