//! # clog — per-transaction logs: commit status, commit timestamps, subtransaction parents
//!
//! Three logs indexed by transaction id, each on ordinary 8 KiB pages in the main buffer pool:
//! the commit status (2 bits per transaction: in progress, committed, aborted) and, with
//! `track_commit_timestamp`, the commit time (8 bytes per transaction, microseconds since
//! 1970), and the top-level transaction of each subtransaction ([`SUBTRANS_LOG`], 8 bytes per
//! transaction, unlogged: reset at startup, as PostgreSQL's `pg_subtrans`). Unlike PostgreSQL's SLRU pages, these pages carry an LSN and a checksum, are written
//! back by the buffer pool, and become durable through the sync-request queue at the next
//! checkpoint (seed 001): setting a value never fsyncs, in the foreground or in redo (unless
//! `sync = immediate`, the old behaviour).
//!
//! Each log is cut into *segments* of [`PAGES_PER_SEGMENT`] pages (256 KiB, as PostgreSQL's
//! `pg_xact` files), each segment a relation of its own in the log's reserved database:
//! `base/2/<segment>` for the status log, `base/3/<segment>` for commit timestamps,
//! `base/4/<segment>` for the subtransaction map. A segment
//! is created when a transaction of its range first ends, and removed whole (its buffers
//! dropped through the pool's fast path, its sync requests forgotten) once every id in it is
//! below the oldest id whose status is kept ([`remove_segments_below`]).
//!
//! ## Rules
//! - A value is set only after the commit or abort record is in the WAL; the page LSN is
//!   raised to that record's end, so the WAL rule keeps the page on disk from getting ahead of
//!   the WAL (this is what makes asynchronous commit safe).
//! - The first change to a page after a checkpoint's redo point logs an image of the page
//!   (after the change), because a torn write of a page with a checksum would make it
//!   unreadable. Redo holds back changes aimed at a page it cannot read until the page's
//!   image restores it; a change still held back at the end of redo is corruption.
//! - Segments are removed only below the oldest kept id, which only vacuum raises (see
//!   [`crate::txn`]): nobody asks for a status there, every tuple's hint answers instead.
//! - Database oids 2, 3 and 4 are the logs'; user tables live in database 1, the engine's own
//!   relations (the catalog) in database 0.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::buffer::{BufferPool, PinnedBuffer, ReadMode};
use crate::bytes::Reader;
use crate::error::{Error, Result};
use crate::page::{Page, PageMut, HEADER_SIZE};
use crate::recovery::{rmid, IdCounters, RedoContext};
use crate::smgr::Smgr;
use crate::types::{BufferTag, Fork, Lsn, PAGE_SIZE, RelFileLocator, Xid};
use crate::wal::record::record_types;
use crate::wal::{BlockRef, DecodedRecord, Wal, WalRecord};

record_types! {
    /// Record types of the logs' resource manager.
    pub enum XactLogRecord for rmid::CLOG {
        /// A page image.
        Image = 1,
        /// Statuses below an id are no longer kept (main data: that id, u64), so the
        /// segments wholly below it are removed.
        Truncate = 2,
    }
}

/// Pages per segment of either log.
pub const PAGES_PER_SEGMENT: u32 = 32;

/// A transaction's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnStatus {
    InProgress = 0,
    Committed = 1,
    Aborted = 2,
}

impl TxnStatus {
    pub fn from_bits(bits: u64) -> Self {
        match bits {
            1 => TxnStatus::Committed,
            2 => TxnStatus::Aborted,
            _ => TxnStatus::InProgress,
        }
    }
}

/// A log of one fixed-width value per transaction id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XactLog {
    /// The reserved database whose relations are the log's segments.
    pub db_oid: u32,
    /// 2 (a status) or 64 (a timestamp).
    pub bits_per_xid: u32,
}

/// The commit status log.
pub const STATUS_LOG: XactLog = XactLog {
    db_oid: 2,
    bits_per_xid: 2,
};

/// The commit timestamp log.
pub const COMMIT_TS_LOG: XactLog = XactLog {
    db_oid: 3,
    bits_per_xid: 64,
};

/// The subtransaction parent map (PostgreSQL's `pg_subtrans`): for a subtransaction id, the
/// id of its top-level transaction (0 for a top-level id). Unlogged: it only matters while
/// the top-level transaction, or a snapshot that saw it running, lives, so startup removes
/// it whole ([`remove_all_segments`]) and sets the entries of recovered prepared
/// transactions again; a torn page never gets read.
pub const SUBTRANS_LOG: XactLog = XactLog {
    db_oid: 4,
    bits_per_xid: 64,
};

/// Transactions per status page.
pub const XIDS_PER_PAGE: u64 = STATUS_LOG.per_page();

impl XactLog {
    pub const fn per_page(self) -> u64 {
        ((PAGE_SIZE - HEADER_SIZE) * 8) as u64 / self.bits_per_xid as u64
    }

    /// Transactions per segment.
    pub const fn per_segment(self) -> u64 {
        self.per_page() * PAGES_PER_SEGMENT as u64
    }

    /// The segment holding `xid`'s value.
    pub const fn segment_of(self, xid: Xid) -> u64 {
        xid.0 / self.per_segment()
    }

    /// The relation of segment `segno`.
    pub const fn segment_rel(self, segno: u64) -> RelFileLocator {
        RelFileLocator {
            db_oid: self.db_oid,
            rel_number: segno,
        }
    }

    /// (page, bit position in the page) of a transaction's value.
    fn locate(self, xid: Xid) -> (BufferTag, usize) {
        let block = (xid.0 % self.per_segment()) / self.per_page();
        let bit = HEADER_SIZE * 8 + (xid.0 % self.per_page()) as usize * self.bits_per_xid as usize;
        let tag = BufferTag::new(
            self.segment_rel(self.segment_of(xid)),
            Fork::Main,
            u32::try_from(block).expect("a segment has PAGES_PER_SEGMENT pages"),
        );
        (tag, bit)
    }

    fn write_value(self, page: &mut [u8; PAGE_SIZE], xid: Xid, value: u64) {
        if Page::new(page).is_new() {
            PageMut::new(page).init(0);
        }
        // A value is set once: a status only goes from in progress (0) to a final state, a
        // commit time from unset to set; redo may set the same value again. (Paired with
        // the check of the stored bits in `TxnStatus::from_bits`.)
        debug_assert!(
            {
                let old = self.read_value(page, xid);
                old == 0 || old == value
            },
            "xid {xid}: value {} would become {value}",
            self.read_value(page, xid)
        );
        let (_, bit) = self.locate(xid);
        if self.bits_per_xid == 64 {
            page[bit / 8..bit / 8 + 8].copy_from_slice(&value.to_le_bytes());
        } else {
            let (byte, shift) = (bit / 8, (bit % 8) as u32);
            let mask = ((1u16 << self.bits_per_xid) - 1) as u8;
            page[byte] = (page[byte] & !(mask << shift)) | (((value as u8) & mask) << shift);
        }
    }

    fn read_value(self, page: &[u8; PAGE_SIZE], xid: Xid) -> u64 {
        let (_, bit) = self.locate(xid);
        if self.bits_per_xid == 64 {
            crate::bytes::u64_at(page, bit / 8).expect("locate keeps a value inside its page")
        } else {
            let mask = ((1u16 << self.bits_per_xid) - 1) as u8;
            u64::from((page[bit / 8] >> (bit % 8)) & mask)
        }
    }

    /// Creates a segment's relation if it does not exist (two transactions ending at once
    /// may both try: the loser finds it made).
    fn ensure_segment(smgr: &Smgr, rel: RelFileLocator) -> Result<()> {
        if smgr.exists(rel, Fork::Main)? {
            return Ok(());
        }
        match smgr.create(rel, Fork::Main) {
            Ok(()) | Err(Error::RelationExists { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The page `tag`, its segment created and extended to it if needed.
    fn page(pool: &BufferPool, tag: BufferTag) -> Result<PinnedBuffer<'_>> {
        let smgr = pool.smgr();
        Self::ensure_segment(smgr, tag.rel)?;
        // Bounded: at most PAGES_PER_SEGMENT extensions (a concurrent extender may add one
        // page past the one needed; it stays zero, which reads as "in progress" = never set).
        while smgr.nblocks(tag.rel, Fork::Main)? <= tag.block {
            drop(pool.extend(tag.rel, Fork::Main)?);
        }
        pool.read_buffer(tag)
    }

    /// The value for `xid` (0 if never set).
    pub fn get(self, pool: &BufferPool, xid: Xid) -> Result<u64> {
        let (tag, _) = self.locate(xid);
        let nblocks = match pool.smgr().nblocks(tag.rel, Fork::Main) {
            Ok(n) => n,
            // No transaction of this segment's range has ended yet.
            Err(Error::NoSuchRelation { .. }) => return Ok(0),
            Err(e) => return Err(e),
        };
        if tag.block >= nblocks {
            return Ok(0);
        }
        let buf = pool.read_buffer(tag)?;
        let page = buf.read();
        Ok(self.read_value(&page, xid))
    }

    /// Sets the value for `xid`, whose commit or abort record ends at `record_end`.
    pub fn set(
        self,
        wal: &Wal,
        pool: &BufferPool,
        xid: Xid,
        value: u64,
        record_end: Lsn,
    ) -> Result<()> {
        let (tag, _) = self.locate(xid);
        let buf = Self::page(pool, tag)?;
        let mut page = buf.write();
        let needs_image = wal.needs_image(Page::new(&page).lsn());
        self.write_value(&mut page, xid, value);
        let mut lsn = record_end.max(Page::new(&page).lsn());
        if needs_image {
            let blocks = [BlockRef {
                tag,
                image: Some(&*page),
            }];
            let (_, end) = wal.insert(&WalRecord::new(
                Xid::INVALID,
                XactLogRecord::Image,
                &blocks,
                &[],
            ))?;
            lsn = lsn.max(end);
        }
        PageMut::new(&mut page).set_lsn(lsn);
        page.mark_dirty();
        Ok(())
    }

    /// Sets the value for `xid` without WAL (the subtransaction map, see [`SUBTRANS_LOG`]):
    /// the page is dirtied and written back as any other, its LSN untouched.
    pub fn set_unlogged(self, pool: &BufferPool, xid: Xid, value: u64) -> Result<()> {
        let (tag, _) = self.locate(xid);
        let buf = Self::page(pool, tag)?;
        let mut page = buf.write();
        self.write_value(&mut page, xid, value);
        page.mark_dirty();
        Ok(())
    }

    fn of(rel: RelFileLocator) -> Option<XactLog> {
        [STATUS_LOG, COMMIT_TS_LOG]
            .into_iter()
            .find(|l| l.db_oid == rel.db_oid)
    }
}

/// Removes the segments of both logs whose every id is below `oldest`, from segment
/// `from_segment` of the status log on (those before are gone already): their buffers are
/// dropped and their files unlinked, with their sync requests. Segments never created are
/// skipped. Returns how many segment files were removed.
pub fn remove_segments_below(pool: &BufferPool, from_xid: Xid, oldest: Xid) -> Result<usize> {
    let mut rels = Vec::new();
    for log in [STATUS_LOG, COMMIT_TS_LOG, SUBTRANS_LOG] {
        // Segment k is wholly below `oldest` when (k + 1) * per_segment <= oldest.
        let first = log.segment_of(from_xid);
        let end = log.segment_of(oldest);
        for segno in first..end {
            let rel = log.segment_rel(segno);
            if pool.smgr().exists(rel, Fork::Main)? {
                rels.push(rel);
            }
        }
    }
    pool.drop_relation_files(&rels)?;
    Ok(rels.len())
}

/// Removes every segment of `log` for the ids `[from, to)` (startup's reset of the
/// unlogged subtransaction map). Returns how many segment files were removed.
pub fn remove_all_segments(pool: &BufferPool, log: XactLog, from: Xid, to: Xid) -> Result<usize> {
    let mut rels = Vec::new();
    for segno in log.segment_of(from)..=log.segment_of(to) {
        let rel = log.segment_rel(segno);
        if pool.smgr().exists(rel, Fork::Main)? {
            rels.push(rel);
        }
    }
    pool.drop_relation_files(&rels)?;
    Ok(rels.len())
}

/// The oldest kept id a truncation record sets, if `rec` is one.
fn truncation_of(rec: &DecodedRecord) -> Option<Xid> {
    if rec.record_type::<XactLogRecord>().ok()? != XactLogRecord::Truncate {
        return None;
    }
    let mut r = Reader::new(&rec.main);
    let oldest = Xid(r.u64()?);
    r.done()?;
    Some(oldest)
}

/// [`truncation_of`] a record known to be a truncation record.
fn truncation(rec: &DecodedRecord) -> Result<Xid> {
    truncation_of(rec).ok_or_else(|| Error::WalCorrupt {
        lsn: rec.lsn,
        reason: "malformed commit-log truncation record".into(),
    })
}

/// Writes the truncation record for `oldest` and flushes it: the removal of the segments
/// below must never reach the disk before the record (and the tuple hints that vacuum logged
/// before it) do.
pub fn log_truncation(wal: &Wal, oldest: Xid) -> Result<()> {
    let (_, end) = wal.insert(&WalRecord::new(
        Xid::INVALID,
        XactLogRecord::Truncate,
        &[],
        &oldest.0.to_le_bytes(),
    ))?;
    wal.flush(end)
}

/// A change waiting for its page: (xid, value, end LSN of its record).
type HeldChange = (Xid, u64, Lsn);

/// Redo of the logs, with the hold-back rule.
#[derive(Default)]
pub struct XactLogRedo {
    /// Changes for pages that could not be read, by page.
    held: Mutex<HashMap<BufferTag, Vec<HeldChange>>>,
    /// The segments below this id are removed already (by an earlier truncation record).
    removed_below: Mutex<Xid>,
}

fn apply(log: XactLog, buf: &PinnedBuffer<'_>, xid: Xid, value: u64, end: Lsn) {
    let mut page = buf.write();
    log.write_value(&mut page, xid, value);
    let lsn = Page::new(&page).lsn().max(end);
    PageMut::new(&mut page).set_lsn(lsn);
    page.mark_dirty();
}

impl XactLogRedo {
    /// Redoes "`xid` has `value` in `log`" from the record ending at `end`.
    pub fn set(
        &self,
        ctx: &RedoContext<'_>,
        log: XactLog,
        xid: Xid,
        value: u64,
        end: Lsn,
    ) -> Result<()> {
        let (tag, _) = log.locate(xid);
        if let Some(held) = self.held.lock().get_mut(&tag) {
            held.push((xid, value, end));
            return Ok(());
        }
        match XactLog::page(ctx.pool, tag) {
            Ok(buf) => {
                apply(log, &buf, xid, value, end);
                Ok(())
            }
            Err(Error::CorruptPage { .. }) => {
                // Torn by the crash: its image record comes later in the WAL.
                self.held
                    .lock()
                    .entry(tag)
                    .or_default()
                    .push((xid, value, end));
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Redoes a record of the logs' resource manager: a page image or a truncation.
    pub fn redo(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
        if rec.record_type::<XactLogRecord>()? == XactLogRecord::Image {
            return self.redo_image(ctx, rec);
        }
        let oldest = truncation(rec)?;
        let mut removed_below = self.removed_below.lock();
        // Changes held back for removed segments are moot: their ids are all below `oldest`.
        self.held.lock().retain(|tag, _| {
            XactLog::of(tag.rel)
                .is_none_or(|log| (tag.rel.rel_number + 1) * log.per_segment() > oldest.0)
        });
        remove_segments_below(ctx.pool, *removed_below, oldest)?;
        *removed_below = (*removed_below).max(oldest);
        Ok(())
    }

    /// The id counters a record of the logs' resource manager moves: a truncation sets the
    /// oldest kept status (see [`crate::recovery::ResourceManager::ids`]).
    pub fn ids(rec: &DecodedRecord) -> Result<IdCounters> {
        if rec.record_type::<XactLogRecord>()? != XactLogRecord::Truncate {
            return Ok(IdCounters::default());
        }
        Ok(IdCounters {
            oldest_xid: truncation(rec)?,
            ..IdCounters::default()
        })
    }

    /// Redoes a page-image record.
    fn redo_image(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
        let malformed = |reason: &str| Error::WalCorrupt {
            lsn: rec.lsn,
            reason: format!("malformed transaction-log record: {reason}"),
        };
        if rec.record_type::<XactLogRecord>()? != XactLogRecord::Image || rec.blocks.len() != 1 {
            return Err(malformed("not one page image"));
        }
        let tag = rec.blocks[0].tag;
        let log = XactLog::of(tag.rel).ok_or_else(|| malformed("unknown log relation"))?;
        let image = rec.blocks[0]
            .image
            .as_ref()
            .ok_or_else(|| malformed("no page image"))?;
        XactLog::ensure_segment(ctx.smgr, tag.rel)?;
        let held = self.held.lock().remove(&tag);
        if held.is_none() {
            match XactLog::page(ctx.pool, tag) {
                // Readable: it already holds every value set before the redo point, and redo
                // sets every later one from its own record. The image must not be restored:
                // it was taken by the first transaction to change the page after a redo
                // point, and may lack the value of a transaction whose record precedes it
                // but which set its value after the image was taken (records are inserted
                // before the page is locked), so restoring it would lose that value.
                Ok(_) => return Ok(()),
                Err(Error::CorruptPage { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        // The page on disk is unreadable: restore it whole, then every change since the redo
        // point (held back) again, since the image may lack some (see above).
        let buf = ctx.pool.read_buffer_mode(tag, ReadMode::Zero)?;
        {
            let mut page = buf.write();
            page.copy_from_slice(&image[..]);
            PageMut::new(&mut page).set_lsn(rec.end_lsn);
            page.mark_dirty();
        }
        drop(buf);
        for (xid, value, end) in held.into_iter().flatten() {
            apply(log, &XactLog::page(ctx.pool, tag)?, xid, value, end);
        }
        Ok(())
    }

    /// At the end of redo: every held-back change must have found its page image.
    pub fn finish(&self) -> Result<()> {
        let held = self.held.lock();
        match held.iter().next() {
            Some((tag, changes)) => Err(Error::PageUnrepairable {
                rel: tag.rel,
                fork: tag.fork,
                block: tag.block,
                reason: format!(
                    "the page failed verification and the WAL holds no image of it ({} changes wait for it)",
                    changes.len()
                ),
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Rmid;

    #[test]
    fn ids_map_to_segments_pages_and_bits_without_overlap() {
        // 32 pages of 8168 bytes: 32,672 statuses or 1,021 timestamps a page.
        assert_eq!(STATUS_LOG.per_page(), 32_672);
        assert_eq!(STATUS_LOG.per_segment(), 32 * 32_672);
        assert_eq!(COMMIT_TS_LOG.per_page(), 1_021);
        for log in [STATUS_LOG, COMMIT_TS_LOG] {
            let per = log.per_segment();
            for xid in [
                0,
                1,
                log.per_page() - 1,
                log.per_page(),
                per - 1,
                per,
                7 * per + 5,
            ] {
                let (tag, bit) = log.locate(Xid(xid));
                assert_eq!(tag.rel, log.segment_rel(xid / per));
                assert_eq!(u64::from(tag.block), (xid % per) / log.per_page());
                assert!(tag.block < PAGES_PER_SEGMENT);
                let last_bit = bit + log.bits_per_xid as usize;
                assert!(bit >= HEADER_SIZE * 8 && last_bit <= PAGE_SIZE * 8, "{xid}");
                assert_eq!(XactLog::of(tag.rel), Some(log));
            }
        }
        assert_eq!(XactLog::of(RelFileLocator::new(1, 0)), None);
    }

    #[test]
    fn values_round_trip_on_a_page_and_neighbours_are_untouched() {
        let mut page = [0u8; PAGE_SIZE];
        for xid in [0, 1, 2, 3, 4, 32_671] {
            STATUS_LOG.write_value(&mut page, Xid(xid), xid % 3);
        }
        for xid in [0, 1, 2, 3, 4, 32_671] {
            assert_eq!(STATUS_LOG.read_value(&page, Xid(xid)), xid % 3, "{xid}");
        }
        assert_eq!(STATUS_LOG.read_value(&page, Xid(5)), 0);
        let mut page = [0u8; PAGE_SIZE];
        COMMIT_TS_LOG.write_value(&mut page, Xid(1_020), u64::MAX - 1);
        assert_eq!(COMMIT_TS_LOG.read_value(&page, Xid(1_020)), u64::MAX - 1);
        assert_eq!(COMMIT_TS_LOG.read_value(&page, Xid(1_019)), 0);
    }

    #[test]
    fn truncation_records_are_recognised_and_garbage_is_not() {
        let rec = |rmid: Rmid, record_type: XactLogRecord, main: Vec<u8>| DecodedRecord {
            lsn: Lsn(100),
            end_lsn: Lsn(140),
            prev: Lsn::INVALID,
            xid: Xid::INVALID,
            rmid,
            info: record_type as u8,
            blocks: Vec::new(),
            main,
        };
        let oldest = Xid(1_234_567);
        let oldest_bytes = oldest.0.to_le_bytes().to_vec();
        assert_eq!(
            truncation_of(&rec(
                rmid::CLOG,
                XactLogRecord::Truncate,
                oldest_bytes.clone()
            )),
            Some(oldest)
        );
        assert_eq!(
            truncation_of(&rec(rmid::CLOG, XactLogRecord::Truncate, vec![1, 2, 3])),
            None
        );
        let mut longer = oldest_bytes.clone();
        longer.push(0);
        assert_eq!(
            truncation_of(&rec(rmid::CLOG, XactLogRecord::Truncate, longer)),
            None
        );
        // The id counters redo collects: a truncation moves the oldest kept status.
        let ids = |info, main| XactLogRedo::ids(&rec(rmid::CLOG, info, main));
        assert_eq!(
            ids(XactLogRecord::Truncate, oldest_bytes.clone()).unwrap(),
            IdCounters {
                oldest_xid: oldest,
                ..IdCounters::default()
            }
        );
        assert_eq!(
            ids(XactLogRecord::Image, Vec::new()).unwrap(),
            IdCounters::default()
        );
        assert!(ids(XactLogRecord::Truncate, vec![1, 2, 3]).is_err());
        assert_eq!(
            truncation_of(&rec(rmid::CLOG, XactLogRecord::Image, oldest_bytes.clone())),
            None
        );
        assert_eq!(
            truncation_of(&rec(
                rmid::TXN,
                XactLogRecord::Truncate,
                oldest_bytes.clone()
            )),
            None
        );
    }
}
