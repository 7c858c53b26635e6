//! # clog — the commit log (transaction status)
//!
//! Two bits per transaction id (in progress, committed, aborted), on ordinary 8 KiB pages of a
//! special relation that lives in the main buffer pool. Unlike PostgreSQL's SLRU pages,
//! these pages carry an LSN and a checksum, are written back by the buffer pool, and become
//! durable through the sync-request queue at the next checkpoint (seed 001): setting a status
//! never fsyncs, in the foreground or in redo.
//!
//! ## Rules
//! - A status is set only after the commit or abort record is in the WAL; the page LSN is
//!   raised to that record's end, so the WAL rule keeps the page on disk from getting ahead of
//!   the WAL (this is what makes asynchronous commit safe).
//! - The first change to a page after a checkpoint's redo point logs an image of the page
//!   (after the change), because a torn write of a page with a checksum would make it
//!   unreadable. Redo holds back status changes aimed at a page it cannot read until the
//!   page's image restores it; a change still held back at the end of redo is corruption.
//! - Relation numbers below 16384 are reserved for the engine; the commit log is number 1.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::buffer::{BufferPool, BufferTag, PinnedBuffer, ReadMode};
use crate::error::{Error, Result};
use crate::page::{Page, PageMut, HEADER_SIZE, PAGE_SIZE};
use crate::recovery::{redo_buffer, rmid, RedoBuffer, RedoContext};
use crate::smgr::{BlockNumber, Fork, RelFileLocator, Smgr};
use crate::wal::{BlockRef, DecodedRecord, Lsn, Wal, WalRecord};

/// The commit log's relation.
pub const CLOG_REL: RelFileLocator = RelFileLocator {
    db_oid: 0,
    rel_number: 1,
};
/// Transactions per commit-log page: 2 bits each in the page body.
pub const XIDS_PER_PAGE: u64 = ((PAGE_SIZE - HEADER_SIZE) * 4) as u64;

/// Record type of the commit log's resource manager: a page image.
pub const CLOG_IMAGE: u8 = 1;

/// A transaction's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnStatus {
    InProgress = 0,
    Committed = 1,
    Aborted = 2,
}

impl TxnStatus {
    fn from_bits(bits: u8) -> Self {
        match bits {
            1 => TxnStatus::Committed,
            2 => TxnStatus::Aborted,
            _ => TxnStatus::InProgress,
        }
    }
}

fn locate(xid: u64) -> (BlockNumber, usize, u32) {
    let block = u32::try_from(xid / XIDS_PER_PAGE)
        .expect("2^32 commit-log pages hold every 64-bit xid in use");
    let index = (xid % XIDS_PER_PAGE) as usize;
    (block, HEADER_SIZE + index / 4, (index % 4) as u32 * 2)
}

fn tag(block: BlockNumber) -> BufferTag {
    BufferTag::new(CLOG_REL, Fork::Main, block)
}

fn set_bits(page: &mut [u8; PAGE_SIZE], xid: u64, status: TxnStatus) {
    if Page::new(page).is_new() {
        PageMut::new(page).init(0);
    }
    let (_, byte, shift) = locate(xid);
    page[byte] = (page[byte] & !(0b11 << shift)) | ((status as u8) << shift);
}

/// The commit log.
pub struct Clog;

impl Clog {
    /// Creates the commit log's file if it does not exist.
    pub fn ensure_created(smgr: &Smgr) -> Result<()> {
        if !smgr.exists(CLOG_REL, Fork::Main)? {
            smgr.create(CLOG_REL, Fork::Main)?;
        }
        Ok(())
    }

    fn page(pool: &BufferPool, block: BlockNumber) -> Result<PinnedBuffer<'_>> {
        let smgr = pool.smgr();
        // Bounded: one extension per missing page.
        while smgr.nblocks(CLOG_REL, Fork::Main)? <= block {
            drop(pool.extend(CLOG_REL, Fork::Main)?);
        }
        pool.read_buffer(tag(block))
    }

    /// The status of `xid`.
    pub fn status(pool: &BufferPool, xid: u64) -> Result<TxnStatus> {
        let (block, byte, shift) = locate(xid);
        if block >= pool.smgr().nblocks(CLOG_REL, Fork::Main)? {
            return Ok(TxnStatus::InProgress);
        }
        let buf = pool.read_buffer(tag(block))?;
        let page = buf.read();
        Ok(TxnStatus::from_bits((page[byte] >> shift) & 0b11))
    }

    /// Records `status` for `xid`, whose commit or abort record ends at `record_end`.
    pub fn set(
        wal: &Wal,
        pool: &BufferPool,
        xid: u64,
        status: TxnStatus,
        record_end: Lsn,
    ) -> Result<()> {
        let (block, _, _) = locate(xid);
        let buf = Self::page(pool, block)?;
        let mut page = buf.write();
        let needs_image = wal.needs_image(Page::new(&page).lsn());
        set_bits(&mut page, xid, status);
        let mut lsn = record_end.max(Page::new(&page).lsn());
        if needs_image {
            let blocks = [BlockRef {
                tag: tag(block),
                image: Some(&*page),
            }];
            let (_, end) = wal.insert(&WalRecord {
                xid: 0,
                rmid: rmid::CLOG,
                info: CLOG_IMAGE,
                blocks: &blocks,
                main: &[],
            })?;
            lsn = lsn.max(end);
        }
        PageMut::new(&mut page).set_lsn(lsn);
        page.mark_dirty();
        Ok(())
    }
}

/// A status change waiting for its page: (xid, status, end LSN of its record).
type HeldChange = (u64, TxnStatus, Lsn);

/// Redo of status changes, for the transaction resource manager, with the hold-back rule.
#[derive(Default)]
pub struct ClogRedo {
    /// Status changes for pages that could not be read, by block.
    held: Mutex<HashMap<BlockNumber, Vec<HeldChange>>>,
}

impl ClogRedo {
    /// Redoes "`xid` has `status`" from the record ending at `end`.
    pub fn set(&self, ctx: &RedoContext<'_>, xid: u64, status: TxnStatus, end: Lsn) -> Result<()> {
        let (block, _, _) = locate(xid);
        if let Some(held) = self.held.lock().get_mut(&block) {
            held.push((xid, status, end));
            return Ok(());
        }
        Clog::ensure_created(ctx.smgr)?;
        let buf = match Clog::page(ctx.pool, block) {
            Ok(buf) => buf,
            Err(Error::CorruptPage { .. }) => {
                // Torn by the crash: its image record comes later in the WAL.
                self.held
                    .lock()
                    .entry(block)
                    .or_default()
                    .push((xid, status, end));
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        apply(&buf, xid, status, end);
        Ok(())
    }
}

fn apply(buf: &PinnedBuffer<'_>, xid: u64, status: TxnStatus, end: Lsn) {
    let mut page = buf.write();
    set_bits(&mut page, xid, status);
    let lsn = Page::new(&page).lsn().max(end);
    PageMut::new(&mut page).set_lsn(lsn);
    page.mark_dirty();
}

impl ClogRedo {
    /// Redoes a commit-log image record.
    pub fn redo_image(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
        if rec.info != CLOG_IMAGE || rec.blocks.len() != 1 {
            return Err(Error::WalCorrupt {
                lsn: rec.lsn,
                reason: "malformed commit-log record".into(),
            });
        }
        Clog::ensure_created(ctx.smgr)?;
        let block = rec.blocks[0].tag.block;
        let held = self.held.lock().remove(&block);
        if held.is_some() {
            // The page on disk is unreadable: restore it whole, whatever its LSN says.
            let buf = ctx.pool.read_buffer_mode(tag(block), ReadMode::Zero)?;
            let mut page = buf.write();
            let image = rec.blocks[0]
                .image
                .as_ref()
                .ok_or_else(|| Error::WalCorrupt {
                    lsn: rec.lsn,
                    reason: "commit-log record without its page image".into(),
                })?;
            page.copy_from_slice(&image[..]);
            PageMut::new(&mut page).set_lsn(rec.end_lsn);
            page.mark_dirty();
        } else if let RedoBuffer::Apply(_) = redo_buffer(ctx, rec, 0)? {
            unreachable!("a record with an image is restored, never applied");
        }
        for (xid, status, end) in held.into_iter().flatten() {
            apply(&Clog::page(ctx.pool, block)?, xid, status, end);
        }
        Ok(())
    }

    /// At the end of redo: every held-back change must have found its page image.
    pub fn finish(&self) -> Result<()> {
        let held = self.held.lock();
        match held.iter().next() {
            Some((block, changes)) => Err(Error::PageUnrepairable {
                rel: CLOG_REL,
                fork: Fork::Main,
                block: *block,
                reason: format!(
                    "the page failed verification and the WAL holds no image of it ({} status changes wait for it)",
                    changes.len()
                ),
            }),
            None => Ok(()),
        }
    }
}
