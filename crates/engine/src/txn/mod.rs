//! # txn — transaction ids, snapshots, commit and abort, locks, two-phase commit
//!
//! Transaction ids are 64-bit and never wrap, so no id is ever replaced by a frozen one. A
//! transaction gets an id lazily, at its first write ([`TransactionManager::assign_xid`],
//! PostgreSQL's `GetCurrentTransactionId`): read-only transactions consume none. The
//! [`ProcArray`] knows which ids are running; a [`Snapshot`] taken from it says which ids a
//! transaction must treat as running (MVCC). [`TransactionManager::commit`] writes a commit record, waits for it to be
//! durable when `synchronous_commit` is on (returns at once when off: a crash may then lose the
//! last commits, never corrupt), marks the transaction committed in the commit log, and only
//! then removes it from the process array — so nobody sees a commit that a crash could take
//! back, and no snapshot ever finds an id neither running nor finished in the commit log.
//!
//! ## Rules
//! - Every WAL record carries its transaction's id, and checkpoints record the next id, so
//!   recovery never hands out an id that a record before the crash used.
//! - A transaction with no commit or abort record at a crash is aborted: it stays "in
//!   progress" in the commit log, and nothing running has it. So: an id below the snapshot's
//!   `xmax`, not running in it, and not committed in the commit log, is aborted.
//! - Commit-log lookups go through a cache of final statuses ([`StatusCache`]): a status
//!   never changes once final, so the cache needs no invalidation, and visibility checks
//!   rarely touch the commit log (PostgreSQL uses hint bits on the tuples for this).
//! - The commit logs keep the statuses from [`TransactionManager::oldest_xid`] on. Only a
//!   VACUUM of the whole database raises it ([`TransactionManager::truncate_logs`]), after
//!   every table has hints for every older id it names ([`crate::heap::freeze`]); never past
//!   a running or prepared transaction. The truncation record is flushed before any segment
//!   goes, and checkpoints record `oldest_xid`, so a crash never brings a status back nor
//!   loses one that is still needed; recovery never hands out an id below it again.
//! - Commit and abort records list the relation files to drop (TRUNCATE gave the table a
//!   new file, DROP TABLE, or an aborted CREATE): after the record, the files' buffers are
//!   dropped through the buffer pool's fast path and the files unlinked; redo does the same.
//! - The commit record and its commit-log bits are one section under
//!   [`Wal::delay_checkpoint`]: a checkpoint never fixes its redo point between them.
//! - Subtransactions (savepoints) get ids of their own, recorded in the subtransaction map
//!   ([`crate::clog::SUBTRANS_LOG`]) but never in the process array: snapshots stay as
//!   cheap as without them, and a visibility check maps an id in a snapshot's
//!   `[xmin, xmax)` to its top-level id ([`Snapshot::is_running_via`]). A commit record
//!   lists the live subtransaction ids and sets their status with the top-level one; a
//!   ROLLBACK TO SAVEPOINT writes an abort record for the ids it aborts
//!   ([`TransactionManager::abort_subxacts`]).
//! - Table and transaction locks are in [`lock`]; prepared transactions in [`twophase`].

pub mod lock;
mod snapshot;
pub mod twophase;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::buffer::BufferPool;
use crate::padded::StripedCounter;
use crate::bytes::Reader;
use crate::clog::{TxnStatus, XactLogRedo, COMMIT_TS_LOG, STATUS_LOG, SUBTRANS_LOG};
use crate::error::{Error, Result};
use crate::recovery::{rmid, IdCounters, RedoContext, ResourceManager};

use crate::types::{Lsn, RelFileLocator, Xid};
use crate::wal::record::{put_rel, read_rel, record_types, REL_BYTES};
use crate::wal::{DecodedRecord, Wal, WalRecord};
pub use snapshot::{OwnXids, ProcArray, ProcId, Snapshot};

/// The first id handed out (PostgreSQL keeps 0-2 for invalid, bootstrap and frozen).
pub const FIRST_XID: Xid = Xid(3);

record_types! {
    /// Record types of the transaction resource manager.
    pub enum TxnRecord for rmid::TXN {
        Commit = 1,
        Abort = 2,
        Prepare = 3,
        CommitPrepared = 4,
        AbortPrepared = 5,
    }
}

/// Entries of the status cache (a power of two).
const STATUS_CACHE_ENTRIES: usize = 1 << 16;

/// Counters of the transaction layer, for tests and benchmarks.
#[derive(Debug, Default)]
pub struct TxnStats {
    /// Status lookups answered by the cache.
    pub status_cache_hits: StripedCounter,
    /// Status lookups that read the commit log.
    pub clog_lookups: StripedCounter,
    pub commits: AtomicU64,
    pub aborts: AtomicU64,
}

/// Final statuses of recent transactions, direct-mapped by id: each entry holds
/// `xid << 2 | status` (0 when empty). Lock-free; a collision just evicts.
pub struct StatusCache {
    entries: Box<[AtomicU64]>,
}

impl StatusCache {
    fn new() -> Self {
        StatusCache {
            entries: (0..STATUS_CACHE_ENTRIES)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    fn slot(&self, xid: Xid) -> &AtomicU64 {
        &self.entries[(xid.0 as usize) & (STATUS_CACHE_ENTRIES - 1)]
    }

    fn get(&self, xid: Xid) -> Option<TxnStatus> {
        let e = self.slot(xid).load(Ordering::Relaxed);
        (e != 0 && e >> 2 == xid.0).then(|| TxnStatus::from_bits(e & 3))
    }

    fn put(&self, xid: Xid, status: TxnStatus) {
        debug_assert!(
            status != TxnStatus::InProgress,
            "only final statuses are cached"
        );
        // A final status never changes (paired with the commit log's check where the status
        // is written): a cached one that disagrees means a transaction ended twice.
        debug_assert!(
            self.get(xid).is_none_or(|cached| cached == status),
            "xid {xid} was {:?}, now {status:?}",
            self.get(xid)
        );
        self.slot(xid)
            .store(xid.0 << 2 | status as u64, Ordering::Relaxed);
    }
}

/// What a commit or abort record says besides its type.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndRecord {
    /// Microseconds since 1970.
    pub micros: u64,
    /// Whether the commit timestamp is tracked.
    pub track_ts: bool,
    /// Relation files to drop.
    pub drops: Vec<RelFileLocator>,
    /// For the prepared-transaction records: the global id.
    pub gid: Option<String>,
    /// Subtransaction ids that end with the record's transaction: a commit's committed
    /// subtransactions, or the subtransactions a ROLLBACK TO SAVEPOINT (or the top-level
    /// abort) aborts. Redo gives each the record's status.
    pub subxids: Vec<Xid>,
}

impl EndRecord {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.micros.to_le_bytes());
        out.push(u8::from(self.track_ts));
        put_rels(&self.drops, out);
        let gid = self.gid.as_deref().unwrap_or("");
        out.extend_from_slice(&(gid.len() as u16).to_le_bytes());
        out.extend_from_slice(gid.as_bytes());
        out.extend_from_slice(&(self.subxids.len() as u32).to_le_bytes());
        for x in &self.subxids {
            out.extend_from_slice(&x.0.to_le_bytes());
        }
    }

    pub fn decode(b: &[u8]) -> Option<EndRecord> {
        let mut r = Reader::new(b);
        let micros = r.u64()?;
        let track_ts = r.u8()? == 1;
        let drops = read_rels(&mut r)?;
        let gid = std::str::from_utf8(r.bytes_u16()?).ok()?;
        let n = r.u32()? as usize;
        // Bounded by the input: a count larger than the bytes left is garbage.
        if n > r.remaining() / 8 {
            return None;
        }
        let subxids = (0..n).map(|_| r.u64().map(Xid)).collect::<Option<Vec<_>>>()?;
        r.done()?;
        Some(EndRecord {
            micros,
            track_ts,
            drops,
            gid: (!gid.is_empty()).then(|| gid.to_string()),
            subxids,
        })
    }
}

/// Appends a list of relation files: count (u32), then each as the WAL's block references
/// encode it ([`put_rel`]: db oid u32, number u64).
pub(crate) fn put_rels(rels: &[RelFileLocator], out: &mut Vec<u8>) {
    out.extend_from_slice(&(rels.len() as u32).to_le_bytes());
    for r in rels {
        put_rel(out, *r);
    }
}

/// Reads what [`put_rels`] wrote; `None` on garbage.
pub(crate) fn read_rels(r: &mut Reader<'_>) -> Option<Vec<RelFileLocator>> {
    let n = r.u32()? as usize;
    // Bounded by the input: a count larger than the bytes left is garbage.
    if n > r.remaining() / REL_BYTES {
        return None;
    }
    (0..n).map(|_| read_rel(r)).collect()
}

pub(crate) fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Hands out transaction ids, takes snapshots, ends transactions, answers status questions.
pub struct TransactionManager {
    wal: Arc<Wal>,
    pool: Arc<BufferPool>,
    /// The next id handed out (an [`Xid`]'s value).
    next_xid: AtomicU64,
    /// The oldest id whose commit status is kept: statuses below it were removed (see
    /// [`TransactionManager::truncate_logs`]). An [`Xid`]'s value.
    oldest_xid: AtomicU64,
    /// One truncation at a time.
    truncating: Mutex<()>,
    procs: ProcArray,
    cache: StatusCache,
    /// The lowest subtransaction id handed out since startup (`u64::MAX`: none): a lower id
    /// is a top-level one without a look at the subtransaction map.
    first_subxid: AtomicU64,
    synchronous_commit: bool,
    track_commit_timestamp: bool,
    stats: TxnStats,
}

impl TransactionManager {
    pub fn new(
        wal: Arc<Wal>,
        pool: Arc<BufferPool>,
        next_xid: Xid,
        oldest_xid: Xid,
        config: &crate::Config,
    ) -> Self {
        assert!(
            oldest_xid <= next_xid,
            "statuses kept from {oldest_xid}, next id {next_xid}"
        );
        TransactionManager {
            wal,
            pool,
            next_xid: AtomicU64::new(next_xid.0),
            oldest_xid: AtomicU64::new(oldest_xid.0),
            truncating: Mutex::new(()),
            procs: ProcArray::new(config.max_connections),
            cache: StatusCache::new(),
            first_subxid: AtomicU64::new(u64::MAX),
            synchronous_commit: config.synchronous_commit,
            track_commit_timestamp: config.track_commit_timestamp,
            stats: TxnStats::default(),
        }
    }

    pub fn stats(&self) -> &TxnStats {
        &self.stats
    }

    pub fn procs(&self) -> &ProcArray {
        &self.procs
    }

    /// A slot for a new transaction; refused beyond `max_connections`.
    pub fn register(&self) -> Result<ProcId> {
        self.procs.register().ok_or(Error::TooManyConnections)
    }

    /// The id the next transaction will get.
    pub fn next_xid(&self) -> Xid {
        Xid(self.next_xid.load(Ordering::Acquire))
    }

    /// Assigns `proc` a transaction id (at its first write).
    pub fn assign_xid(&self, proc: ProcId) -> Xid {
        self.procs
            .assign_xid(proc, || Xid(self.next_xid.fetch_add(1, Ordering::AcqRel)))
    }

    /// Assigns a subtransaction id under `proc`'s top-level transaction `top` (PostgreSQL's
    /// `AssignTransactionId` for a subtransaction): the map records `top` before the id is
    /// used anywhere. Subtransaction ids never enter the process array, so snapshots cost
    /// the same however many a transaction has; a snapshot maps an id to its top-level one
    /// ([`TransactionManager::top_of`]) when it must.
    pub fn assign_subxid(&self, proc: ProcId, top: Xid) -> Result<Xid> {
        assert!(top.is_valid(), "a subtransaction id needs its top-level id first");
        let xid = self
            .procs
            .assign_subxid(proc, || Xid(self.next_xid.fetch_add(1, Ordering::AcqRel)));
        self.note_subxid(xid, top)?;
        Ok(xid)
    }

    /// Records that `xid` is a subtransaction of `top` (assignment, or a prepared
    /// transaction recovered at startup).
    pub(crate) fn note_subxid(&self, xid: Xid, top: Xid) -> Result<()> {
        debug_assert!(top < xid, "a subtransaction id {xid} follows its top-level id {top}");
        self.first_subxid.fetch_min(xid.0, Ordering::AcqRel);
        SUBTRANS_LOG.set_unlogged(&self.pool, xid, top.0)
    }

    /// The top-level transaction of `xid` (`xid` itself for a top-level id).
    pub fn top_of(&self, xid: Xid) -> Result<Xid> {
        if xid.0 < self.first_subxid.load(Ordering::Acquire) || xid < self.oldest_xid() {
            return Ok(xid);
        }
        let top = SUBTRANS_LOG.get(&self.pool, xid)?;
        Ok(if top == 0 { xid } else { Xid(top) })
    }

    /// Startup: the subtransaction map is unlogged, so it is removed whole (a torn page
    /// would not read); recovered prepared transactions set their entries again.
    pub(crate) fn reset_subtrans(&self) -> Result<usize> {
        crate::clog::remove_all_segments(&self.pool, SUBTRANS_LOG, self.oldest_xid(), self.next_xid())
    }

    /// A snapshot for `proc`.
    pub fn snapshot(&self, proc: ProcId) -> Snapshot {
        self.procs.snapshot(proc, || self.next_xid())
    }

    /// Is `xid` running now (not per any snapshot)? A subtransaction runs while its
    /// top-level transaction does, unless it aborted (ROLLBACK TO SAVEPOINT).
    pub fn is_running(&self, xid: Xid) -> bool {
        if self.procs.is_running(xid) {
            return true;
        }
        let top = match self.top_of(xid) {
            Ok(top) => top,
            Err(e) => {
                tracing::warn!(error = %e, %xid, "reading the subtransaction map");
                xid
            }
        };
        top != xid
            && self.procs.is_running(top)
            && self.status(xid).is_ok_and(|s| s != TxnStatus::Aborted)
    }

    /// See [`ProcArray::global_xmin`].
    pub fn global_xmin(&self) -> Xid {
        self.procs.global_xmin(self.next_xid())
    }

    /// Commits `proc`'s transaction `xid` with its live subtransactions `subxids`, durably
    /// when `synchronous_commit` is on, then drops `drops`. Returns the record's end LSN.
    pub fn commit(
        &self,
        proc: ProcId,
        xid: Xid,
        subxids: &[Xid],
        drops: &[RelFileLocator],
    ) -> Result<Lsn> {
        let end = self.end(xid, TxnRecord::Commit, None, subxids, drops)?;
        self.procs.end_xid(proc);
        self.stats.commits.fetch_add(1, Ordering::Relaxed);
        self.pool.drop_relation_files(drops)?;
        Ok(end)
    }

    /// Aborts `proc`'s transaction `xid` and its subtransactions `subxids` (no flush: a lost
    /// abort record means the same as an abort), then drops `drops`.
    pub fn abort(
        &self,
        proc: ProcId,
        xid: Xid,
        subxids: &[Xid],
        drops: &[RelFileLocator],
    ) -> Result<Lsn> {
        let end = self.end(xid, TxnRecord::Abort, None, subxids, drops)?;
        self.procs.end_xid(proc);
        self.stats.aborts.fetch_add(1, Ordering::Relaxed);
        self.pool.drop_relation_files(drops)?;
        Ok(end)
    }

    /// Aborts subtransactions `subxids` (ROLLBACK TO SAVEPOINT; the first is the record's
    /// id), their top-level transaction going on, as PostgreSQL's `RecordTransactionAbort`
    /// for a subtransaction: one abort record, so redo marks them aborted too. Then drops
    /// `drops` (files the subtransactions created).
    pub fn abort_subxacts(&self, subxids: &[Xid], drops: &[RelFileLocator]) -> Result<()> {
        let Some((&first, rest)) = subxids.split_first() else {
            // Nothing was written under a subtransaction id: no record needed.
            return self.pool.drop_relation_files(drops);
        };
        self.end(first, TxnRecord::Abort, None, rest, drops)?;
        self.pool.drop_relation_files(drops)
    }

    /// Writes a commit or abort record (for a prepared transaction too: `gid`), flushes it if
    /// it is a commit to be made durable, and sets the commit log — one section that delays
    /// checkpoints (see the module header).
    pub(crate) fn end(
        &self,
        xid: Xid,
        record_type: TxnRecord,
        gid: Option<&str>,
        subxids: &[Xid],
        drops: &[RelFileLocator],
    ) -> Result<Lsn> {
        debug_assert!(
            record_type != TxnRecord::Prepare,
            "PREPARE ends no transaction"
        );
        let commit = matches!(record_type, TxnRecord::Commit | TxnRecord::CommitPrepared);
        let rec = EndRecord {
            micros: now_micros(),
            track_ts: commit && self.track_commit_timestamp,
            drops: drops.to_vec(),
            gid: gid.map(str::to_string),
            subxids: subxids.to_vec(),
        };
        let mut main = Vec::with_capacity(32 + drops.len() * 12 + subxids.len() * 8);
        rec.encode(&mut main);
        let _delay = self.wal.delay_checkpoint();
        let (_, end) = self
            .wal
            .insert(&WalRecord::new(xid, record_type, &[], &main))?;
        // A prepared transaction's end, commit or rollback, is always durable at once, as
        // PostgreSQL's is: the transaction manager that asked must be able to trust it, and
        // its state file is removed next (a lost ROLLBACK PREPARED would bring it back).
        let prepared_end = matches!(
            record_type,
            TxnRecord::CommitPrepared | TxnRecord::AbortPrepared
        );
        if (commit && self.synchronous_commit) || prepared_end {
            // The others, for `commit_siblings` (this one still has its id).
            let other_active = || self.procs.with_xid().saturating_sub(1);
            self.wal.flush_commit(end, &other_active)?;
        }
        let status = if commit {
            TxnStatus::Committed
        } else {
            TxnStatus::Aborted
        };
        // The subtransactions first, as PostgreSQL's `TransactionIdSetTreeStatus`: a reader
        // that finds the top-level id committed finds its subtransactions so too. (One that
        // finds a subtransaction committed first still sees the top-level id running.)
        for &x in subxids.iter().chain([&xid]) {
            STATUS_LOG.set(&self.wal, &self.pool, x, status as u64, end)?;
            if rec.track_ts {
                COMMIT_TS_LOG.set(&self.wal, &self.pool, x, rec.micros, end)?;
            }
            self.cache.put(x, status);
        }
        Ok(end)
    }

    /// The status of a transaction as the commit log has it. An id below the oldest kept
    /// one fails: every tuple that names such an id carries a hint vacuum set, so a caller
    /// that gets here missed a hint (or the data is damaged).
    pub fn status(&self, xid: Xid) -> Result<TxnStatus> {
        if let Some(s) = self.cache.get(xid) {
            self.stats.status_cache_hits.add(1);
            return Ok(s);
        }
        let oldest = self.oldest_xid();
        if (FIRST_XID..oldest).contains(&xid) {
            return Err(Error::TransactionStatusRemoved { xid, oldest });
        }
        self.stats.clog_lookups.add(1);
        let s = TxnStatus::from_bits(STATUS_LOG.get(&self.pool, xid)?);
        if s != TxnStatus::InProgress {
            self.cache.put(xid, s);
        }
        Ok(s)
    }

    /// Did `xid` commit? For an id the caller knows is not running (see the module header).
    pub fn did_commit(&self, xid: Xid) -> Result<bool> {
        Ok(self.status(xid)? == TxnStatus::Committed)
    }

    /// When `xid` committed (microseconds since 1970), if commit timestamps were tracked and
    /// are still kept (PostgreSQL's `pg_xact_commit_timestamp` is NULL below its oldest too).
    pub fn commit_timestamp(&self, xid: Xid) -> Result<Option<u64>> {
        if xid < self.oldest_xid() {
            return Ok(None);
        }
        let micros = COMMIT_TS_LOG.get(&self.pool, xid)?;
        Ok((micros != 0).then_some(micros))
    }

    /// The oldest id whose status (and commit timestamp) is kept.
    pub fn oldest_xid(&self) -> Xid {
        Xid(self.oldest_xid.load(Ordering::Acquire))
    }

    /// Stops keeping the status of the ids below `oldest`, and removes the commit-log
    /// segments wholly below it, as PostgreSQL's `TruncateCLOG`. The caller (vacuum) has made
    /// every tuple that names such an id carry a hint (WAL-logged before this), so none is
    /// asked about again. Clamped to the ids nothing runs below. Returns how many segment
    /// files were removed.
    pub fn truncate_logs(&self, oldest: Xid) -> Result<usize> {
        let _one = self.truncating.lock();
        let oldest = oldest.min(self.global_xmin());
        let old = self.oldest_xid();
        if oldest <= old {
            return Ok(0);
        }
        // One section for the checkpointer: a checkpoint whose record says `oldest` has every
        // segment below it removed (else a crash after it would leave them behind for good).
        let _delay = self.wal.delay_checkpoint();
        crate::clog::log_truncation(&self.wal, oldest)?;
        self.oldest_xid.store(oldest.0, Ordering::Release);
        crate::clog::remove_segments_below(&self.pool, old, oldest)
    }

    /// Consumes `n` transaction ids without using them (PostgreSQL's `pg_resetwal -x` moves
    /// the next id the same way): unused ids are aborted by the rules above. For tests and
    /// tools that must cross commit-log segments quickly.
    #[cfg(any(test, feature = "testing"))]
    pub fn skip_xids(&self, n: u64) {
        self.next_xid.fetch_add(n, Ordering::AcqRel);
    }
}

/// Redo of transaction records and commit-log images.
pub struct TxnRedo {
    logs: XactLogRedo,
    twophase: Arc<twophase::TwoPhaseRedo>,
}

impl TxnRedo {
    pub fn new(twophase: Arc<twophase::TwoPhaseRedo>) -> Self {
        TxnRedo {
            logs: XactLogRedo::default(),
            twophase,
        }
    }
}

impl ResourceManager for TxnRedo {
    fn name(&self) -> &'static str {
        "txn"
    }

    fn redo(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
        if rec.rmid == rmid::CLOG {
            return self.logs.redo(ctx, rec);
        }
        let record_type: TxnRecord = rec.record_type()?;
        let malformed = || Error::WalCorrupt {
            lsn: rec.lsn,
            reason: format!("malformed transaction record of type {record_type:?}"),
        };
        let status = match record_type {
            TxnRecord::Prepare => return self.twophase.redo_prepare(rec),
            TxnRecord::Commit | TxnRecord::CommitPrepared => TxnStatus::Committed,
            TxnRecord::Abort | TxnRecord::AbortPrepared => TxnStatus::Aborted,
        };
        let end_rec = EndRecord::decode(&rec.main).ok_or_else(malformed)?;
        let end = rec.end_lsn;
        for &x in end_rec.subxids.iter().chain([&rec.xid]) {
            self.logs.set(ctx, STATUS_LOG, x, status as u64, end)?;
            if end_rec.track_ts {
                self.logs.set(ctx, COMMIT_TS_LOG, x, end_rec.micros, end)?;
            }
        }
        if matches!(
            record_type,
            TxnRecord::CommitPrepared | TxnRecord::AbortPrepared
        ) {
            self.twophase.redo_finish(rec.xid)?;
        }
        ctx.pool.drop_relation_files(&end_rec.drops)
    }

    fn ids(&self, rec: &DecodedRecord) -> Result<IdCounters> {
        if rec.rmid == rmid::CLOG {
            return XactLogRedo::ids(rec);
        }
        Ok(IdCounters::default())
    }

    fn finish(&self, _ctx: &RedoContext<'_>) -> Result<()> {
        self.logs.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_records_round_trip_and_garbage_is_refused() {
        let rec = EndRecord {
            micros: 123,
            track_ts: true,
            drops: vec![RelFileLocator::new(1, 16384), RelFileLocator::new(1, 99)],
            gid: Some("xa-1".into()),
            subxids: vec![Xid(7), Xid(9)],
        };
        let mut b = Vec::new();
        rec.encode(&mut b);
        assert_eq!(EndRecord::decode(&b), Some(rec));
        for cut in 0..b.len() {
            assert!(EndRecord::decode(&b[..cut]).is_none(), "cut at {cut}");
        }
        let mut huge = b.clone();
        huge[9..13].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(EndRecord::decode(&huge).is_none());
    }

    #[test]
    fn the_status_cache_keeps_final_statuses_and_evicts_on_collision() {
        let c = StatusCache::new();
        assert_eq!(c.get(Xid(5)), None);
        c.put(Xid(5), TxnStatus::Committed);
        assert_eq!(c.get(Xid(5)), Some(TxnStatus::Committed));
        c.put(Xid(5) + STATUS_CACHE_ENTRIES as u64, TxnStatus::Aborted);
        assert_eq!(c.get(Xid(5)), None);
        assert_eq!(
            c.get(Xid(5) + STATUS_CACHE_ENTRIES as u64),
            Some(TxnStatus::Aborted)
        );
    }
}
