//! # checkpoint — the checkpointer
//!
//! A checkpoint bounds recovery: it fixes a redo point (the WAL insert position), writes every
//! dirty buffer (each after its WAL, by the buffer pool's WAL rule), fsyncs every file that the
//! sync-request queue names — once per file, however many writes it absorbed (seed 001) — and
//! the directories whose entries changed, then writes a checkpoint record, points the control
//! file at it crash-safely, and removes WAL segments older than the redo point.
//!
//! A background thread runs one every `checkpoint_timeout`, or sooner when more than
//! `max_wal_size` of WAL was written since the last redo point, spreading its buffer writes
//! over `checkpoint_completion_target` of the interval (and of `max_wal_size`) so that it does
//! not flood the disk; [`Checkpointer::checkpoint`] (on request) and shutdown write at once.
//! A request that comes while a paced checkpoint runs ends its pacing: that one finishes at
//! full speed, then the requested one runs (PostgreSQL's `CHECKPOINT_IMMEDIATE`); before,
//! the request waited for the paced one, for up to 0.9 x `checkpoint_timeout`.
//!
//! ## Rules
//! - One checkpoint at a time.
//! - **An fsync failure is final.** The data it covered may be lost while a retried fsync
//!   would report success (PostgreSQL's lesson of 2018), so the checkpoint never completes,
//!   the engine enters its failed state ([`health`](crate::health), held by the storage
//!   manager; its hook stops the WAL), and only a restart, which recovers from the WAL of the
//!   last *completed* checkpoint, continues. A failed engine runs no checkpoint at all: the
//!   redo point never moves past data that an fsync failure may have lost.
//! - **A failed open is not a failed fsync.** The checkpointer reopens the files the storage
//!   manager's cache has closed, and opens directories, the control file and two-phase state
//!   files; each open goes through the descriptor pool ([`vfs::fd`](crate::vfs::fd)), which
//!   closes cached files and retries on EMFILE. An open that still fails for want of a
//!   descriptor (EMFILE, ENFILE) fails only this checkpoint, with an ordinary error (53000):
//!   nothing was fsynced, so nothing was lost, and the sync requests it did not get to stay
//!   pending ([`Smgr::sync_pending`]). The background thread logs it and tries again after
//!   [`RETRY_AFTER_ERROR`] at the earliest.
//! - The control file changes only after everything before the redo point is durable.

pub mod control;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

pub use control::{ControlData, DbState};

use crate::buffer::BufferPool;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::recovery::{xlog::CheckpointRecord, XlogRecord};
use crate::smgr::Smgr;
use crate::types::{Lsn, Oid, Xid};
use crate::vfs::Vfs;
use crate::wal::{Wal, WalRecord};

/// What the checkpointer needs from the layers above it.
pub trait CheckpointHook: Send + Sync {
    /// Work to do at every checkpoint, after the buffers are written and the sync requests
    /// done, before the checkpoint record (as PostgreSQL's `CheckPointGuts` calls
    /// `CheckPointTwoPhase`): writing prepared transactions' state files. An error fails the
    /// checkpoint, and stops the engine (it may be a failed fsync).
    fn at_checkpoint(&self, redo: Lsn) -> Result<()>;
    /// The ids the checkpoint record carries.
    fn ids(&self) -> CheckpointIds;
}

/// What a checkpoint record carries besides its redo point: the next transaction id and the
/// next oid, so that recovery never hands out one used before the crash, and the oldest
/// transaction id whose commit status is kept (PostgreSQL's `oldestXid`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointIds {
    pub next_xid: Xid,
    pub next_oid: Oid,
    pub oldest_xid: Xid,
}

/// A duration in whole microseconds (saturating: 584,000 years fit).
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// How often the background thread checks the WAL volume.
const POLL: Duration = Duration::from_millis(100);
/// How long the background thread waits after a failed checkpoint before it starts another
/// (PostgreSQL's checkpointer sleeps a second after any error).
pub const RETRY_AFTER_ERROR: Duration = Duration::from_secs(1);

/// Counters of the checkpointer's work.
#[derive(Debug, Default)]
pub struct CheckpointStats {
    /// Checkpoints completed (the shutdown checkpoint included).
    pub checkpoints: AtomicU64,
    /// Checkpoints begun because `checkpoint_timeout` passed (`checkpoints_timed`).
    pub timed: AtomicU64,
    /// Checkpoints begun on request: `CHECKPOINT`, or `max_wal_size` of WAL since the last
    /// redo point (`checkpoints_req`).
    pub requested: AtomicU64,
    /// Buffers the checkpoints wrote (`buffers_checkpoint`).
    pub buffers_written: AtomicU64,
    /// Time the checkpoints spent writing buffers, paced or not (`checkpoint_write_time`).
    pub write_us: AtomicU64,
    /// Time the checkpoints spent fsyncing files and directories (`checkpoint_sync_time`).
    pub sync_us: AtomicU64,
    pub file_fsyncs: AtomicU64,
    pub wal_segments_removed: AtomicU64,
    /// How long the last checkpoint spent writing buffers (paced or not).
    pub last_write_ms: AtomicU64,
}

struct Shared {
    vfs: Arc<dyn Vfs>,
    data_dir: PathBuf,
    wal: Arc<Wal>,
    smgr: Arc<Smgr>,
    pool: Arc<BufferPool>,
    hook: Arc<dyn CheckpointHook>,
    timeout: Duration,
    max_wal_size_bytes: u64,
    completion_target: f64,
    run_lock: Mutex<()>,
    /// Requested checkpoints waiting or running: while any is, none is paced.
    hurried_by: AtomicUsize,
    /// The redo point of the last checkpoint (an [`Lsn`]'s value).
    last_redo: AtomicU64,
    stop: Mutex<bool>,
    wake: Condvar,
    stats: CheckpointStats,
}

/// The checkpointer and its background thread.
pub struct Checkpointer {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Checkpointer {
    pub fn new(
        vfs: Arc<dyn Vfs>,
        data_dir: &Path,
        config: &Config,
        wal: Arc<Wal>,
        smgr: Arc<Smgr>,
        pool: Arc<BufferPool>,
        hook: Arc<dyn CheckpointHook>,
    ) -> Self {
        let last_redo = wal.redo_point();
        Checkpointer {
            shared: Arc::new(Shared {
                vfs,
                data_dir: data_dir.to_path_buf(),
                wal,
                smgr,
                pool,
                hook,
                timeout: Duration::from_secs(config.checkpoint_timeout_s),
                max_wal_size_bytes: config.max_wal_size_bytes,
                completion_target: config.checkpoint_completion_target,
                run_lock: Mutex::new(()),
                hurried_by: AtomicUsize::new(0),
                last_redo: AtomicU64::new(last_redo.0),
                stop: Mutex::new(false),
                wake: Condvar::new(),
                stats: CheckpointStats::default(),
            }),
            thread: Mutex::new(None),
        }
    }

    pub fn stats(&self) -> &CheckpointStats {
        &self.shared.stats
    }

    /// Starts the background thread (time and WAL-volume triggers).
    pub fn start(&self) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let handle = std::thread::Builder::new()
            .name("quire-checkpointer".into())
            .spawn(move || shared.run_background())
            .map_err(|e| Error::CheckpointFailed {
                reason: format!("could not start the checkpointer thread: {e}"),
            })?;
        *self.thread.lock() = Some(handle);
        Ok(())
    }

    /// Runs a checkpoint now and waits for it; returns the checkpoint record's LSN. A paced
    /// checkpoint in progress finishes at full speed first.
    pub fn checkpoint(&self) -> Result<Lsn> {
        self.shared.hurried_by.fetch_add(1, Ordering::AcqRel);
        self.shared.stats.requested.fetch_add(1, Ordering::Relaxed);
        let lsn = self.shared.run(false, false);
        self.shared.hurried_by.fetch_sub(1, Ordering::AcqRel);
        lsn
    }

    /// Stops the background thread and writes the shutdown checkpoint.
    pub fn shutdown(&self) -> Result<Lsn> {
        self.stop_thread();
        self.shared.run(true, false)
    }

    fn stop_thread(&self) {
        *self.shared.stop.lock() = true;
        self.shared.wake.notify_all();
        if let Some(h) = self.thread.lock().take() {
            if h.join().is_err() {
                tracing::error!("the checkpointer thread panicked");
            }
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

impl Shared {
    fn run_background(&self) {
        let mut last = Instant::now();
        let mut not_before = Instant::now();
        loop {
            {
                let mut stop = self.stop.lock();
                if *stop {
                    return;
                }
                self.wake.wait_for(&mut stop, POLL);
                if *stop {
                    return;
                }
            }
            let wal_since = self
                .wal
                .insert_lsn()
                .bytes_since(Lsn(self.last_redo.load(Ordering::Acquire)));
            let timed = last.elapsed() >= self.timeout;
            if Instant::now() < not_before {
                continue;
            }
            if timed || wal_since >= self.max_wal_size_bytes {
                let why = if timed {
                    &self.stats.timed
                } else {
                    &self.stats.requested
                };
                why.fetch_add(1, Ordering::Relaxed);
                match self.run(false, true) {
                    Ok(lsn) => tracing::debug!(lsn = %lsn, "checkpoint complete"),
                    // Handled here: logged, and the engine is already in its failed state if
                    // it was an fsync; a write error or a shortage of descriptors is retried
                    // at the next trigger, a second from now at the earliest.
                    Err(e) => {
                        tracing::error!(error = %e, "checkpoint failed");
                        not_before = Instant::now() + RETRY_AFTER_ERROR;
                    }
                }
                last = Instant::now();
            }
        }
    }

    /// The end of a checkpoint that met `e`: the engine's failed state, since `e` may be a
    /// failed fsync (a failed write of the control file or of a two-phase state file is
    /// taken as one too); but not for want of a descriptor (EMFILE, ENFILE), which comes only
    /// from an open, before any fsync: that checkpoint fails, its requests stay pending, and
    /// a later one runs them.
    fn fail(&self, e: Error) -> Error {
        if e.is_out_of_descriptors() {
            return e;
        }
        self.smgr.health().fail_because(&e.to_string());
        // Also here, for a checkpointer whose engine wired no hook (tests of this layer).
        self.wal.fail(&e.to_string());
        Error::CheckpointFailed {
            reason: e.to_string(),
        }
    }

    /// Sleeps while the checkpoint is ahead of schedule (PostgreSQL's
    /// `IsCheckpointOnSchedule`): `done / total` of the writes must not run ahead of the
    /// elapsed share of the time budget, nor of the WAL budget. Naps are short, so a shutdown
    /// or a requested checkpoint is noticed quickly; either ends the pacing.
    fn pace(&self, started: Instant, redo: Lsn, done: usize, total: usize) {
        let progress = done as f64 / total.max(1) as f64;
        let budget = self.timeout.mul_f64(self.completion_target);
        // Bounded: at most one nap per 10 ms of the budget.
        for _ in 0..=budget.as_millis() / 10 {
            if *self.stop.lock() || self.hurried_by.load(Ordering::Acquire) > 0 {
                return;
            }
            let time_share = started.elapsed().as_secs_f64() / budget.as_secs_f64();
            let wal_share = self.wal.insert_lsn().bytes_since(redo) as f64
                / (self.max_wal_size_bytes as f64 * self.completion_target);
            if progress <= time_share.max(wal_share) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn run(&self, shutdown: bool, spread: bool) -> Result<Lsn> {
        let _one_at_a_time = self.run_lock.lock();
        self.smgr.health().check()?;
        let redo = self.wal.begin_checkpoint();
        let started = Instant::now();
        let written = self.pool.flush_all_paced(|done, total| {
            if spread {
                self.pace(started, redo, done, total);
            }
        })?;
        let write_time = started.elapsed();
        self.stats
            .buffers_written
            .fetch_add(written, Ordering::Relaxed);
        self.stats
            .write_us
            .fetch_add(micros(write_time), Ordering::Relaxed);
        self.stats
            .last_write_ms
            .store(write_time.as_millis() as u64, Ordering::Relaxed);
        let sync_started = Instant::now();
        let fsynced = self.smgr.sync_pending().map_err(|e| self.fail(e))?;
        self.stats.file_fsyncs.fetch_add(fsynced, Ordering::Relaxed);
        self.smgr.sync_dirs().map_err(|e| self.fail(e))?;
        self.stats
            .sync_us
            .fetch_add(micros(sync_started.elapsed()), Ordering::Relaxed);
        self.hook.at_checkpoint(redo).map_err(|e| self.fail(e))?;
        let record_type = if shutdown {
            XlogRecord::CheckpointShutdown
        } else {
            XlogRecord::CheckpointOnline
        };
        let ids = self.hook.ids();
        let main = CheckpointRecord {
            redo,
            next_xid: ids.next_xid,
            next_oid: ids.next_oid,
            oldest_xid: ids.oldest_xid,
        }
        .encode();
        let (start, end) =
            self.wal
                .insert(&WalRecord::new(Xid::INVALID, record_type, &[], &main))?;
        self.wal.flush(end)?;
        let control = ControlData {
            state: if shutdown {
                DbState::ShutDown
            } else {
                DbState::InProduction
            },
            checkpoint_lsn: start,
            redo_lsn: redo,
        };
        control.write(&self.vfs, &self.data_dir).map_err(|e| self.fail(e))?;
        self.last_redo.store(redo.0, Ordering::Release);
        let removed = self.wal.remove_segments_before(redo)?;
        self.stats
            .wal_segments_removed
            .fetch_add(removed as u64, Ordering::Relaxed);
        self.stats.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(start)
    }
}
