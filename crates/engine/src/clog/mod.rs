//! # clog — per-transaction logs: commit status and commit timestamps
//!
//! Two logs indexed by transaction id, each on ordinary 8 KiB pages of a special relation
//! that lives in the main buffer pool: the commit status (2 bits per transaction: in
//! progress, committed, aborted) and, with `track_commit_timestamp`, the commit time (8 bytes
//! per transaction, microseconds since 1970). Unlike PostgreSQL's SLRU pages, these pages
//! carry an LSN and a checksum, are written back by the buffer pool, and become durable
//! through the sync-request queue at the next checkpoint (seed 001): setting a value never
//! fsyncs, in the foreground or in redo (unless `sync = immediate`, the old behaviour).
//!
//! ## Rules
//! - A value is set only after the commit or abort record is in the WAL; the page LSN is
//!   raised to that record's end, so the WAL rule keeps the page on disk from getting ahead of
//!   the WAL (this is what makes asynchronous commit safe).
//! - The first change to a page after a checkpoint's redo point logs an image of the page
//!   (after the change), because a torn write of a page with a checksum would make it
//!   unreadable. Redo holds back changes aimed at a page it cannot read until the page's
//!   image restores it; a change still held back at the end of redo is corruption.
//! - Relation numbers below 16384 are reserved for the engine: the status log is number 1,
//!   the commit-timestamp log number 2.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::buffer::{BufferPool, BufferTag, PinnedBuffer, ReadMode};
use crate::error::{Error, Result};
use crate::page::{Page, PageMut, HEADER_SIZE, PAGE_SIZE};
use crate::recovery::{rmid, RedoContext};
use crate::smgr::{BlockNumber, Fork, RelFileLocator, Smgr};
use crate::wal::{BlockRef, DecodedRecord, Lsn, Wal, WalRecord};

/// Record type of the logs' resource manager: a page image.
pub const XACT_LOG_IMAGE: u8 = 1;

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
    pub rel: RelFileLocator,
    /// 2 (a status) or 64 (a timestamp).
    pub bits_per_xid: u32,
}

/// The commit status log.
pub const STATUS_LOG: XactLog = XactLog {
    rel: RelFileLocator {
        db_oid: 0,
        rel_number: 1,
    },
    bits_per_xid: 2,
};

/// The commit timestamp log.
pub const COMMIT_TS_LOG: XactLog = XactLog {
    rel: RelFileLocator {
        db_oid: 0,
        rel_number: 2,
    },
    bits_per_xid: 64,
};

/// Transactions per status page.
pub const XIDS_PER_PAGE: u64 = STATUS_LOG.per_page();

impl XactLog {
    pub const fn per_page(&self) -> u64 {
        ((PAGE_SIZE - HEADER_SIZE) * 8) as u64 / self.bits_per_xid as u64
    }

    /// (block, bit position in the page) of a transaction's value.
    fn locate(&self, xid: u64) -> (BlockNumber, usize) {
        let block =
            u32::try_from(xid / self.per_page()).expect("2^32 pages hold every 64-bit xid in use");
        let bit = HEADER_SIZE * 8 + (xid % self.per_page()) as usize * self.bits_per_xid as usize;
        (block, bit)
    }

    fn tag(&self, block: BlockNumber) -> BufferTag {
        BufferTag::new(self.rel, Fork::Main, block)
    }

    fn write_value(&self, page: &mut [u8; PAGE_SIZE], xid: u64, value: u64) {
        if Page::new(page).is_new() {
            PageMut::new(page).init(0);
        }
        let (_, bit) = self.locate(xid);
        if self.bits_per_xid == 64 {
            page[bit / 8..bit / 8 + 8].copy_from_slice(&value.to_le_bytes());
        } else {
            let (byte, shift) = (bit / 8, (bit % 8) as u32);
            let mask = ((1u16 << self.bits_per_xid) - 1) as u8;
            page[byte] = (page[byte] & !(mask << shift)) | (((value as u8) & mask) << shift);
        }
    }

    fn read_value(&self, page: &[u8; PAGE_SIZE], xid: u64) -> u64 {
        let (_, bit) = self.locate(xid);
        if self.bits_per_xid == 64 {
            u64::from_le_bytes(page[bit / 8..bit / 8 + 8].try_into().expect("8 bytes"))
        } else {
            let mask = ((1u16 << self.bits_per_xid) - 1) as u8;
            u64::from((page[bit / 8] >> (bit % 8)) & mask)
        }
    }

    /// Creates the log's file if it does not exist.
    pub fn ensure_created(&self, smgr: &Smgr) -> Result<()> {
        if !smgr.exists(self.rel, Fork::Main)? {
            smgr.create(self.rel, Fork::Main)?;
        }
        Ok(())
    }

    fn page<'a>(&self, pool: &'a BufferPool, block: BlockNumber) -> Result<PinnedBuffer<'a>> {
        let smgr = pool.smgr();
        // Bounded: one extension per missing page.
        while smgr.nblocks(self.rel, Fork::Main)? <= block {
            drop(pool.extend(self.rel, Fork::Main)?);
        }
        pool.read_buffer(self.tag(block))
    }

    /// The value for `xid` (0 if never set).
    pub fn get(&self, pool: &BufferPool, xid: u64) -> Result<u64> {
        let (block, _) = self.locate(xid);
        if block >= pool.smgr().nblocks(self.rel, Fork::Main)? {
            return Ok(0);
        }
        let buf = pool.read_buffer(self.tag(block))?;
        let page = buf.read();
        Ok(self.read_value(&page, xid))
    }

    /// Sets the value for `xid`, whose commit or abort record ends at `record_end`.
    pub fn set(
        &self,
        wal: &Wal,
        pool: &BufferPool,
        xid: u64,
        value: u64,
        record_end: Lsn,
    ) -> Result<()> {
        let (block, _) = self.locate(xid);
        let buf = self.page(pool, block)?;
        let mut page = buf.write();
        let needs_image = wal.needs_image(Page::new(&page).lsn());
        self.write_value(&mut page, xid, value);
        let mut lsn = record_end.max(Page::new(&page).lsn());
        if needs_image {
            let blocks = [BlockRef {
                tag: self.tag(block),
                image: Some(&*page),
            }];
            let (_, end) = wal.insert(&WalRecord {
                xid: 0,
                rmid: rmid::CLOG,
                info: XACT_LOG_IMAGE,
                blocks: &blocks,
                main: &[],
            })?;
            lsn = lsn.max(end);
        }
        PageMut::new(&mut page).set_lsn(lsn);
        page.mark_dirty();
        Ok(())
    }

    fn of(rel: RelFileLocator) -> Option<XactLog> {
        [STATUS_LOG, COMMIT_TS_LOG]
            .into_iter()
            .find(|l| l.rel == rel)
    }
}

/// A change waiting for its page: (xid, value, end LSN of its record).
type HeldChange = (u64, u64, Lsn);

/// Redo of the logs, with the hold-back rule.
#[derive(Default)]
pub struct XactLogRedo {
    /// Changes for pages that could not be read, by page.
    held: Mutex<HashMap<BufferTag, Vec<HeldChange>>>,
}

fn apply(log: XactLog, buf: &PinnedBuffer<'_>, xid: u64, value: u64, end: Lsn) {
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
        xid: u64,
        value: u64,
        end: Lsn,
    ) -> Result<()> {
        let (block, _) = log.locate(xid);
        if let Some(held) = self.held.lock().get_mut(&log.tag(block)) {
            held.push((xid, value, end));
            return Ok(());
        }
        log.ensure_created(ctx.smgr)?;
        match log.page(ctx.pool, block) {
            Ok(buf) => {
                apply(log, &buf, xid, value, end);
                Ok(())
            }
            Err(Error::CorruptPage { .. }) => {
                // Torn by the crash: its image record comes later in the WAL.
                self.held
                    .lock()
                    .entry(log.tag(block))
                    .or_default()
                    .push((xid, value, end));
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Redoes a page-image record.
    pub fn redo_image(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
        let malformed = |reason: &str| Error::WalCorrupt {
            lsn: rec.lsn,
            reason: format!("malformed transaction-log record: {reason}"),
        };
        if rec.info != XACT_LOG_IMAGE || rec.blocks.len() != 1 {
            return Err(malformed("not one page image"));
        }
        let tag = rec.blocks[0].tag;
        let log = XactLog::of(tag.rel).ok_or_else(|| malformed("unknown log relation"))?;
        let image = rec.blocks[0]
            .image
            .as_ref()
            .ok_or_else(|| malformed("no page image"))?;
        log.ensure_created(ctx.smgr)?;
        let held = self.held.lock().remove(&tag);
        if held.is_none() {
            match log.page(ctx.pool, tag.block) {
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
            apply(log, &log.page(ctx.pool, tag.block)?, xid, value, end);
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
