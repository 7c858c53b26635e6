//! # txn — transaction ids, commit and abort
//!
//! Transaction ids are 64-bit and never wrap, so nothing is ever frozen. An id is handed out
//! by [`TransactionManager::begin`]; [`TransactionManager::commit`] writes a commit record,
//! waits for it to be durable when `synchronous_commit` is on (returns at once when off: a
//! crash may then lose the last commits, never corrupt), and only then marks the transaction
//! committed in the commit log, so nobody sees a commit that a crash could take back.
//!
//! ## Rules
//! - Every WAL record carries its transaction's id, and checkpoints record the next id, so
//!   recovery never hands out an id that a record before the crash used.
//! - A transaction with no commit or abort record at a crash is aborted: it stays "in
//!   progress" in the commit log, and nothing running has it.

pub mod lock;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::buffer::BufferPool;
use crate::clog::{TxnStatus, XactLogRedo, COMMIT_TS_LOG, STATUS_LOG};
use crate::error::{Error, Result};
use crate::recovery::{rmid, RedoContext, ResourceManager};
use crate::wal::{DecodedRecord, Lsn, Wal, WalRecord};

/// The first id handed out (PostgreSQL keeps 0-2 for invalid, bootstrap and frozen).
pub const FIRST_XID: u64 = 3;

/// Record types of the transaction resource manager.
pub const COMMIT: u8 = 1;
pub const ABORT: u8 = 2;

/// Hands out transaction ids and ends transactions.
pub struct TransactionManager {
    wal: Arc<Wal>,
    pool: Arc<BufferPool>,
    next_xid: Arc<AtomicU64>,
    synchronous_commit: bool,
    track_commit_timestamp: bool,
}

impl TransactionManager {
    pub fn new(
        wal: Arc<Wal>,
        pool: Arc<BufferPool>,
        next_xid: Arc<AtomicU64>,
        synchronous_commit: bool,
        track_commit_timestamp: bool,
    ) -> Self {
        TransactionManager {
            wal,
            pool,
            next_xid,
            synchronous_commit,
            track_commit_timestamp,
        }
    }

    /// A new transaction id.
    pub fn begin(&self) -> u64 {
        self.next_xid.fetch_add(1, Ordering::AcqRel)
    }

    /// The id the next transaction will get.
    pub fn next_xid(&self) -> u64 {
        self.next_xid.load(Ordering::Acquire)
    }

    /// Commits `xid`, durably when `synchronous_commit` is on. Returns the record's end LSN.
    pub fn commit(&self, xid: u64) -> Result<Lsn> {
        self.end(xid, COMMIT, self.synchronous_commit)
    }

    /// Aborts `xid` (no flush: a lost abort record means the same as an abort).
    pub fn abort(&self, xid: u64) -> Result<Lsn> {
        self.end(xid, ABORT, false)
    }

    fn end(&self, xid: u64, info: u8, flush: bool) -> Result<Lsn> {
        let micros = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let track_ts = info == COMMIT && self.track_commit_timestamp;
        // Main data: the time in microseconds, then whether it is tracked.
        let mut main = [0u8; 9];
        main[..8].copy_from_slice(&micros.to_le_bytes());
        main[8] = u8::from(track_ts);
        let (_, end) = self.wal.insert(&WalRecord {
            xid,
            rmid: rmid::TXN,
            info,
            blocks: &[],
            main: &main,
        })?;
        if flush {
            self.wal.flush(end)?;
        }
        let status = if info == COMMIT {
            TxnStatus::Committed
        } else {
            TxnStatus::Aborted
        };
        STATUS_LOG.set(&self.wal, &self.pool, xid, status as u64, end)?;
        if track_ts {
            COMMIT_TS_LOG.set(&self.wal, &self.pool, xid, micros, end)?;
        }
        Ok(end)
    }

    /// The status of a transaction.
    pub fn status(&self, xid: u64) -> Result<TxnStatus> {
        Ok(TxnStatus::from_bits(STATUS_LOG.get(&self.pool, xid)?))
    }

    /// When `xid` committed (microseconds since 1970), if commit timestamps were tracked.
    pub fn commit_timestamp(&self, xid: u64) -> Result<Option<u64>> {
        let micros = COMMIT_TS_LOG.get(&self.pool, xid)?;
        Ok((micros != 0).then_some(micros))
    }
}

/// Redo of transaction records and commit-log images.
#[derive(Default)]
pub struct TxnRedo {
    logs: XactLogRedo,
}

impl ResourceManager for TxnRedo {
    fn name(&self) -> &'static str {
        "txn"
    }

    fn redo(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
        let status = match (rec.rmid, rec.info) {
            (rmid::CLOG, _) => return self.logs.redo_image(ctx, rec),
            (rmid::TXN, COMMIT) => TxnStatus::Committed,
            (rmid::TXN, ABORT) => TxnStatus::Aborted,
            _ => {
                return Err(Error::WalCorrupt {
                    lsn: rec.lsn,
                    reason: format!("unknown transaction record type {}", rec.info),
                })
            }
        };
        let end = rec.end_lsn;
        self.logs
            .set(ctx, STATUS_LOG, rec.xid, status as u64, end)?;
        if rec.main.len() == 9 && rec.main[8] == 1 {
            let micros = u64::from_le_bytes(rec.main[..8].try_into().expect("8 bytes"));
            self.logs.set(ctx, COMMIT_TS_LOG, rec.xid, micros, end)?;
        }
        Ok(())
    }

    fn finish(&self, _ctx: &RedoContext<'_>) -> Result<()> {
        self.logs.finish()
    }
}
