//! # recovery — resource managers and redo
//!
//! Every WAL record names the resource manager (`rmid`) that knows how to redo it. Startup
//! reads the WAL from the redo point of the last checkpoint and hands each record to its
//! resource manager, which changes pages through the buffer pool and files through the
//! storage manager: the same fast paths as normal running (a truncation's redo drops buffers
//! through the relation index and keeps the size cache exact; no size probe and no file open
//! per record once files are open).
//!
//! ## Rules for a redo function
//! - Idempotent: a page whose LSN is at or past the record's end already has the change
//!   ([`redo_buffer`] returns [`RedoBuffer::AlreadyApplied`]).
//! - A record carrying a full-page image restores the page from it instead of reading the
//!   page from disk, which may be torn.
//! - Files that a crash lost are created, and forks too short are extended, on demand.
//! - Redo never fsyncs: dirtied pages are written and synced by the end-of-recovery
//!   checkpoint.

mod cursor;
pub(crate) use cursor::RecordCursor;
pub mod storage;
pub mod testrm;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::buffer::{BufferPool, BufferTag, PinnedBuffer, ReadMode};
use crate::error::{Error, Result};
use crate::page::PageMut;
use crate::smgr::Smgr;
use crate::wal::{DecodedRecord, WalReader};

/// Resource manager ids.
pub mod rmid {
    /// Checkpoints.
    pub const XLOG: u8 = 0;
    /// Relation files: create, truncate, drop.
    pub const STORAGE: u8 = 1;
    /// Commit-log page images.
    pub const CLOG: u8 = 2;
    /// Transaction commit, abort, prepare and the ends of prepared transactions.
    pub const TXN: u8 = 3;
    /// Heap tuples: insert, update, delete, row lock.
    pub const HEAP: u8 = 4;
    /// B+tree indexes.
    pub const BTREE: u8 = 5;
    /// Page-level byte changes, for crash tests and the torture tool.
    pub const TEST: u8 = 255;
}

/// XLOG record types.
pub mod xlog_info {
    pub const CHECKPOINT_ONLINE: u8 = 1;
    pub const CHECKPOINT_SHUTDOWN: u8 = 2;
}

/// What redo works with.
pub struct RedoContext<'a> {
    pub smgr: &'a Smgr,
    pub pool: &'a BufferPool,
}

/// Redoes the records of one resource manager.
pub trait ResourceManager: Send + Sync {
    fn name(&self) -> &'static str;
    fn redo(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()>;
    /// Called once after the last record: anything left undone is an error.
    fn finish(&self, _ctx: &RedoContext<'_>) -> Result<()> {
        Ok(())
    }
}

/// Checkpoint records need nothing redone: they only mark where redo may start.
struct Xlog;

impl ResourceManager for Xlog {
    fn name(&self) -> &'static str {
        "xlog"
    }
    fn redo(&self, _ctx: &RedoContext<'_>, _rec: &DecodedRecord) -> Result<()> {
        Ok(())
    }
}

/// The map from `rmid` to resource manager.
pub struct Registry {
    managers: Vec<Option<Arc<dyn ResourceManager>>>,
}

impl Registry {
    /// A registry with the framework's own resource managers (checkpoints, relation
    /// files). The engine registers the access methods' and the transaction manager's where
    /// it is assembled (`db::resource_managers`, PostgreSQL's `rmgrlist.h`); tests register
    /// theirs ([`testrm`]).
    pub fn new() -> Self {
        let mut r = Registry {
            managers: (0..256).map(|_| None).collect(),
        };
        r.register(rmid::XLOG, Arc::new(Xlog));
        r.register(rmid::STORAGE, Arc::new(storage::Storage));
        r
    }

    /// Registers `rm` for records of `id`. One manager per id: registering an id twice is a
    /// bug in the assembly.
    pub fn register(&mut self, id: u8, rm: Arc<dyn ResourceManager>) {
        let slot = &mut self.managers[usize::from(id)];
        assert!(slot.is_none(), "resource manager {id} registered twice");
        *slot = Some(rm);
    }

    pub fn redo(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
        let rm =
            self.managers[usize::from(rec.rmid)]
                .as_ref()
                .ok_or(Error::UnknownResourceManager {
                    rmid: rec.rmid,
                    lsn: rec.lsn,
                })?;
        rm.redo(ctx, rec)
    }

    /// Ends redo: each resource manager checks that nothing is left undone.
    pub fn finish(&self, ctx: &RedoContext<'_>) -> Result<()> {
        let mut seen: Vec<*const ()> = Vec::new();
        for rm in self.managers.iter().flatten() {
            // One manager may serve several ids; finish it once.
            let id = Arc::as_ptr(rm).cast::<()>();
            if !seen.contains(&id) {
                seen.push(id);
                rm.finish(ctx)?;
            }
        }
        Ok(())
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

/// What redo found for a block of a record.
pub enum RedoBuffer<'a> {
    /// The page was restored from the record's full-page image; nothing more to do.
    Restored,
    /// The page already has this change.
    AlreadyApplied,
    /// Apply the change, then set the page LSN to the record's end and mark it dirty.
    Apply(PinnedBuffer<'a>),
}

/// Gets block `index` of a record ready for redo (PostgreSQL's `XLogReadBufferForRedo`).
pub fn redo_buffer<'a>(
    ctx: &RedoContext<'a>,
    rec: &DecodedRecord,
    index: usize,
) -> Result<RedoBuffer<'a>> {
    let block = rec.blocks.get(index).ok_or_else(|| Error::WalCorrupt {
        lsn: rec.lsn,
        reason: format!("record has no block {index}"),
    })?;
    let tag = block.tag;
    ensure_block_exists(ctx, tag)?;
    if let Some(image) = &block.image {
        let buf = ctx.pool.read_buffer_mode(tag, ReadMode::Zero)?;
        let mut page = buf.write();
        page.copy_from_slice(&image[..]);
        PageMut::new(&mut page).set_lsn(rec.end_lsn);
        page.mark_dirty();
        return Ok(RedoBuffer::Restored);
    }
    let buf = ctx.pool.read_buffer(tag)?;
    let lsn = crate::page::Page::new(&buf.read()).lsn();
    if lsn >= rec.end_lsn {
        return Ok(RedoBuffer::AlreadyApplied);
    }
    Ok(RedoBuffer::Apply(buf))
}

/// Gets block `index` of a record that rebuilds its page from scratch (logged with
/// [`LoggedPage::will_init`](crate::wal::LoggedPage::will_init)): the page is not read from
/// disk, where a crash may have torn it, and the record is always applied — as PostgreSQL's
/// redo does for `WILL_INIT` blocks. Later records then bring the page up to date.
pub fn redo_buffer_init<'a>(
    ctx: &RedoContext<'a>,
    rec: &DecodedRecord,
    index: usize,
) -> Result<PinnedBuffer<'a>> {
    let block = rec.blocks.get(index).ok_or_else(|| Error::WalCorrupt {
        lsn: rec.lsn,
        reason: format!("record has no block {index}"),
    })?;
    ensure_block_exists(ctx, block.tag)?;
    ctx.pool.read_buffer_mode(block.tag, ReadMode::Zero)
}

/// Creates the fork and extends it with zero pages as needed so `tag.block` exists: a crash
/// may have lost a file creation or an extension that the WAL describes.
fn ensure_block_exists(ctx: &RedoContext<'_>, tag: BufferTag) -> Result<()> {
    if !ctx.smgr.exists(tag.rel, tag.fork)? {
        ctx.smgr.create(tag.rel, tag.fork)?;
    }
    while ctx.smgr.nblocks(tag.rel, tag.fork)? <= tag.block {
        ctx.smgr
            .extend(tag.rel, tag.fork, &[0u8; crate::page::PAGE_SIZE])?;
    }
    Ok(())
}

/// What a recovery did.
#[derive(Clone, Copy, Debug, Default)]
pub struct RecoveryStats {
    /// Records replayed (checkpoint records not counted).
    pub records: u64,
    pub bytes: u64,
    pub duration: Duration,
    /// File-layer calls made during redo (the end-of-recovery checkpoint not included).
    pub calls: crate::vfs::OpCounts,
    /// One past the largest transaction id the WAL mentions (records and checkpoints).
    pub next_xid: u64,
    /// One past the largest oid the WAL mentions (relation creations and checkpoints).
    pub next_oid: u64,
    /// The oldest transaction id whose commit status is kept, as the last checkpoint or
    /// commit-log truncation read says (0: none read).
    pub oldest_xid: u64,
}

/// Redoes every record the reader returns.
pub fn redo_all(
    reader: &mut WalReader,
    registry: &Registry,
    ctx: &RedoContext<'_>,
) -> Result<RecoveryStats> {
    let t0 = Instant::now();
    let calls_before = ctx.smgr.vfs().counters().snapshot();
    let mut stats = RecoveryStats::default();
    while let Some(rec) = reader.next_record()? {
        registry.redo(ctx, &rec)?;
        stats.next_xid = stats.next_xid.max(rec.xid + 1);
        if rec.rmid == rmid::XLOG && rec.main.len() >= 16 {
            let next = u64::from_le_bytes(rec.main[8..16].try_into().expect("8 bytes"));
            stats.next_xid = stats.next_xid.max(next);
        }
        if rec.rmid == rmid::XLOG && rec.main.len() >= 24 {
            let next = u64::from_le_bytes(rec.main[16..24].try_into().expect("8 bytes"));
            stats.next_oid = stats.next_oid.max(next);
        }
        if rec.rmid == rmid::XLOG && rec.main.len() >= 32 {
            let oldest = u64::from_le_bytes(rec.main[24..32].try_into().expect("8 bytes"));
            stats.oldest_xid = stats.oldest_xid.max(oldest);
        }
        if let Some(oldest) = crate::clog::truncation_of(&rec) {
            stats.oldest_xid = stats.oldest_xid.max(oldest);
        }
        if rec.rmid == rmid::STORAGE && rec.info == storage::CREATE && rec.main.len() >= 12 {
            let number = u64::from_le_bytes(rec.main[4..12].try_into().expect("8 bytes"));
            stats.next_oid = stats.next_oid.max(number + 1);
        }
        // Checkpoint records change nothing: a clean restart, which reads only the shutdown
        // checkpoint, replays nothing.
        if rec.rmid != rmid::XLOG {
            stats.records += 1;
            stats.bytes += rec.end_lsn - rec.lsn;
        }
    }
    registry.finish(ctx)?;
    stats.duration = t0.elapsed();
    stats.calls = ctx.smgr.vfs().counters().snapshot().since(&calls_before);
    Ok(stats)
}
