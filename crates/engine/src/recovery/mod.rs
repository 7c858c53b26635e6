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
//! - Change pages through [`redo_block`], the one block-application helper: it applies the
//!   change only to a page that lacks it (a page whose LSN is at or past the record's end
//!   already has it), then sets the page LSN and marks the page dirty.
//! - A record carrying a full-page image restores the page from it instead of reading the
//!   page from disk, which may be torn.
//! - A block that a record restores from its full-page image, or rebuilds from scratch, is
//!   created on demand (its file, and the fork extended to it): a crash may have lost an
//!   extension or a creation the WAL describes.
//! - **Invalid pages** (PostgreSQL's `log_invalid_page`): a record that *changes* a block of
//!   a fork that does not exist, or past the fork's end, is skipped and the block remembered
//!   in [`InvalidPages`]. A later drop of the relation, or a truncation below the block,
//!   forgets it (the file was gone because of that); one still remembered when redo ends
//!   means data was lost (a file or an extension the last checkpoint made durable is gone)
//!   and startup refuses, naming the block.
//! - Redo never fsyncs: dirtied pages are written and synced by the end-of-recovery
//!   checkpoint.
//! - A record's format is decoded only by its resource manager: the id counters a record
//!   moves (next transaction id, next oid, oldest kept status) reach [`redo_all`] through
//!   [`ResourceManager::ids`].

mod cursor;
pub(crate) use cursor::RecordCursor;
pub mod storage;
#[cfg(any(test, feature = "testing"))]
pub mod testrm;
pub mod xlog;
pub use xlog::XlogRecord;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::buffer::{BufferPool, PinnedBuffer, ReadMode};
use crate::error::{Error, Result};
use crate::page::PageMut;
use crate::smgr::Smgr;
pub use crate::types::Rmid;
use crate::types::{BlockNumber, BufferTag, Fork, Lsn, Oid, RelFileLocator, Xid, PAGE_SIZE};
use crate::wal::{DecodedRecord, WalReader};

/// Resource manager ids. Each manager's record types are an enum tied to its id
/// ([`crate::wal::RecordType`]).
pub mod rmid {
    use super::Rmid;

    /// Checkpoints.
    pub const XLOG: Rmid = Rmid(0);
    /// Relation files: create, truncate, drop.
    pub const STORAGE: Rmid = Rmid(1);
    /// Commit-log page images.
    pub const CLOG: Rmid = Rmid(2);
    /// Transaction commit, abort, prepare and the ends of prepared transactions.
    pub const TXN: Rmid = Rmid(3);
    /// Heap tuples: insert, update, delete, row lock.
    pub const HEAP: Rmid = Rmid(4);
    /// B+tree indexes.
    pub const BTREE: Rmid = Rmid(5);
    /// Sequences: their state, set in place.
    pub const SEQUENCE: Rmid = Rmid(6);
    /// Page-level byte changes, for crash tests and the torture tool.
    pub const TEST: Rmid = Rmid(255);
}

/// What redo works with.
pub struct RedoContext<'a> {
    pub smgr: &'a Smgr,
    pub pool: &'a BufferPool,
    pub invalid_pages: &'a InvalidPages,
}

/// Blocks that records changed but that did not exist (see the module header), each with
/// the first record that touched it.
#[derive(Default)]
pub struct InvalidPages {
    pages: parking_lot::Mutex<std::collections::BTreeMap<BufferTag, Lsn>>,
}

impl InvalidPages {
    fn remember(&self, tag: BufferTag, lsn: Lsn) {
        self.pages.lock().entry(tag).or_insert(lsn);
    }

    /// A relation was dropped: its missing blocks are explained.
    pub fn forget_relation(&self, rel: RelFileLocator) {
        self.pages.lock().retain(|tag, _| tag.rel != rel);
    }

    /// A fork was cut to `nblocks`: its missing blocks from there on are explained.
    pub fn forget_from(&self, rel: RelFileLocator, fork: Fork, nblocks: BlockNumber) {
        self.pages
            .lock()
            .retain(|tag, _| !(tag.rel == rel && tag.fork == fork && tag.block >= nblocks));
    }

    /// At the end of redo: an error naming the first block still unexplained, if any.
    pub fn check(&self) -> Result<()> {
        let pages = self.pages.lock();
        match pages.iter().next() {
            None => Ok(()),
            Some((tag, lsn)) => Err(Error::StartupRefused {
                reason: format!(
                    "the WAL record at {lsn} changes block {} of relation {} fork {}, which \
                     does not exist, and no later record drops or truncates it: a file or \
                     an extension that a checkpoint made durable is lost ({} such blocks)",
                    tag.block,
                    tag.rel,
                    tag.fork,
                    pages.len()
                ),
            }),
        }
    }
}

/// The id counters a WAL record moves. Recovery raises its own to every record's, so that
/// no transaction id or oid a record before the crash used is handed out again, and the
/// commit statuses that a checkpoint or a truncation said are gone stay gone. A counter at 0
/// says nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdCounters {
    /// One past the largest transaction id the record names.
    pub next_xid: Xid,
    /// One past the largest oid the record names.
    pub next_oid: Oid,
    /// The oldest transaction id whose commit status is kept.
    pub oldest_xid: Xid,
}

impl IdCounters {
    /// Raises each counter to `other`'s, where that is higher.
    pub fn raise(&mut self, other: IdCounters) {
        self.next_xid = self.next_xid.max(other.next_xid);
        self.next_oid = self.next_oid.max(other.next_oid);
        self.oldest_xid = self.oldest_xid.max(other.oldest_xid);
    }
}

/// Redoes the records of one resource manager.
pub trait ResourceManager: Send + Sync {
    fn name(&self) -> &'static str;
    fn redo(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()>;
    /// The id counters `rec` moves besides its header's transaction id, decoded with this
    /// manager's own decoder (called after [`redo`](Self::redo)). Most records move none.
    fn ids(&self, _rec: &DecodedRecord) -> Result<IdCounters> {
        Ok(IdCounters::default())
    }
    /// Called once after the last record: anything left undone is an error.
    fn finish(&self, _ctx: &RedoContext<'_>) -> Result<()> {
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
        r.register(rmid::XLOG, Arc::new(xlog::Xlog));
        r.register(rmid::STORAGE, Arc::new(storage::Storage));
        r
    }

    /// Registers `rm` for records of `id`. One manager per id: registering an id twice is a
    /// bug in the assembly.
    pub fn register(&mut self, id: Rmid, rm: Arc<dyn ResourceManager>) {
        let slot = &mut self.managers[usize::from(id.0)];
        assert!(slot.is_none(), "resource manager {id} registered twice");
        *slot = Some(rm);
    }

    fn manager(&self, rec: &DecodedRecord) -> Result<&dyn ResourceManager> {
        self.managers[usize::from(rec.rmid.0)]
            .as_deref()
            .ok_or(Error::UnknownResourceManager {
                rmid: rec.rmid,
                lsn: rec.lsn,
            })
    }

    pub fn redo(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
        self.manager(rec)?.redo(ctx, rec)
    }

    /// The id counters `rec` moves: its transaction id, and what its resource manager
    /// decodes from it ([`ResourceManager::ids`]).
    pub fn ids(&self, rec: &DecodedRecord) -> Result<IdCounters> {
        let mut ids = self.manager(rec)?.ids(rec)?;
        ids.raise(IdCounters {
            next_xid: rec.xid.next(),
            ..IdCounters::default()
        });
        Ok(ids)
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
enum RedoBuffer<'a> {
    /// The page was restored from the record's full-page image; nothing more to do.
    Restored,
    /// The page already has this change.
    AlreadyApplied,
    /// The block does not exist: remembered as an invalid page, the change skipped.
    Missing,
    /// Apply the change, then set the page LSN to the record's end and mark it dirty.
    Apply(PinnedBuffer<'a>),
}

/// Gets block `index` of a record ready for redo (PostgreSQL's `XLogReadBufferForRedo`).
fn redo_buffer<'a>(
    ctx: &RedoContext<'a>,
    rec: &DecodedRecord,
    index: usize,
) -> Result<RedoBuffer<'a>> {
    let block = rec.blocks.get(index).ok_or_else(|| Error::WalCorrupt {
        lsn: rec.lsn,
        reason: format!("record has no block {index}"),
    })?;
    let tag = block.tag;
    if let Some(image) = &block.image {
        ensure_block_exists(ctx, tag)?;
        let buf = ctx.pool.read_buffer_mode(tag, ReadMode::Zero)?;
        let mut page = buf.write();
        page.copy_from_slice(&image[..]);
        PageMut::new(&mut page).set_lsn(rec.end_lsn);
        page.mark_dirty();
        return Ok(RedoBuffer::Restored);
    }
    // One size lookup per block reference (`exists` then `nblocks` looked twice).
    let exists = match ctx.smgr.nblocks(tag.rel, tag.fork) {
        Ok(nblocks) => nblocks > tag.block,
        Err(Error::NoSuchRelation { .. }) => false,
        Err(e) => return Err(e),
    };
    if !exists {
        ctx.invalid_pages.remember(tag, rec.lsn);
        return Ok(RedoBuffer::Missing);
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
fn redo_buffer_init<'a>(
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

/// Applies a record's change to its block `index`, the one way redo changes a page: gets the
/// block ready (`redo_buffer`; `redo_buffer_init` for a block the record rebuilds from
/// scratch, `init`) and, unless the page was restored from the record's image or already has
/// the change, calls `apply` with the page and its tag, then sets the page LSN to the
/// record's end and marks the page dirty. An error from `apply` leaves the page unmarked.
pub fn redo_block(
    ctx: &RedoContext<'_>,
    rec: &DecodedRecord,
    index: usize,
    init: bool,
    apply: impl FnOnce(&mut [u8; PAGE_SIZE], BufferTag) -> Result<()>,
) -> Result<()> {
    let buf = if init {
        redo_buffer_init(ctx, rec, index)?
    } else {
        match redo_buffer(ctx, rec, index)? {
            RedoBuffer::Apply(buf) => buf,
            RedoBuffer::Restored | RedoBuffer::AlreadyApplied | RedoBuffer::Missing => {
                return Ok(());
            }
        }
    };
    let tag = buf.tag();
    let mut page = buf.write();
    apply(&mut page, tag)?;
    PageMut::new(&mut page).set_lsn(rec.end_lsn);
    page.mark_dirty();
    Ok(())
}

/// Creates the fork and extends it with zero pages as needed so `tag.block` exists: a crash
/// may have lost a file creation or an extension that the WAL describes.
fn ensure_block_exists(ctx: &RedoContext<'_>, tag: BufferTag) -> Result<()> {
    if !ctx.smgr.exists(tag.rel, tag.fork)? {
        ctx.smgr.create(tag.rel, tag.fork)?;
    }
    ctx.smgr.zero_extend(tag.rel, tag.fork, tag.block.saturating_add(1))
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
    pub next_xid: Xid,
    /// One past the largest oid the WAL mentions (relation creations and checkpoints).
    pub next_oid: Oid,
    /// The oldest transaction id whose commit status is kept, as the last checkpoint or
    /// commit-log truncation read says (invalid: none read).
    pub oldest_xid: Xid,
}

/// How often a long redo logs its progress (PostgreSQL's `log_startup_progress_interval`
/// is 10 s; a failover waits on this, so its operator hears sooner).
const PROGRESS_INTERVAL: Duration = Duration::from_secs(5);
/// Records between two looks at the clock.
const PROGRESS_CHECK_RECORDS: u64 = 4096;

/// Redo's progress report in the log: records replayed, the LSN reached and the rate.
struct Progress {
    start: Instant,
    last: Instant,
}

impl Progress {
    fn new(start: Instant) -> Self {
        Progress { start, last: start }
    }

    fn tick(&mut self, stats: &RecoveryStats, lsn: Lsn) {
        if !stats.records.is_multiple_of(PROGRESS_CHECK_RECORDS) {
            return;
        }
        let now = Instant::now();
        if now.duration_since(self.last) < PROGRESS_INTERVAL {
            return;
        }
        self.last = now;
        let secs = now.duration_since(self.start).as_secs_f64();
        tracing::info!(
            records = stats.records,
            %lsn,
            records_per_s = (stats.records as f64 / secs) as u64,
            mb_per_s = stats.bytes as f64 / 1e6 / secs,
            "redo in progress"
        );
    }
}

/// Redoes every record the reader returns, logging its start and its progress every
/// [`PROGRESS_INTERVAL`] (the end is logged by startup, with the checkpoint after it).
pub fn redo_all(
    reader: &mut WalReader,
    registry: &Registry,
    ctx: &RedoContext<'_>,
) -> Result<RecoveryStats> {
    let t0 = Instant::now();
    let calls_before = ctx.smgr.vfs().counters().snapshot();
    let mut stats = RecoveryStats::default();
    let mut ids = IdCounters::default();
    let mut progress = Progress::new(t0);
    while let Some(rec) = reader.next_record()? {
        registry.redo(ctx, &rec)?;
        ids.raise(registry.ids(&rec)?);
        // Checkpoint records change nothing: a clean restart, which reads only the shutdown
        // checkpoint, replays nothing.
        if rec.rmid != rmid::XLOG {
            if stats.records == 0 {
                tracing::info!(lsn = %rec.lsn, "redo starts");
            }
            stats.records += 1;
            stats.bytes += rec.end_lsn - rec.lsn;
            progress.tick(&stats, rec.end_lsn);
        }
    }
    registry.finish(ctx)?;
    ctx.invalid_pages.check()?;
    stats.next_xid = ids.next_xid;
    stats.next_oid = ids.next_oid;
    stats.oldest_xid = ids.oldest_xid;
    stats.duration = t0.elapsed();
    stats.calls = ctx.smgr.vfs().counters().snapshot().since(&calls_before);
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Fork, Lsn, RelFileLocator};

    fn record(rmid: Rmid, info: u8, xid: u64, main: Vec<u8>) -> DecodedRecord {
        DecodedRecord {
            lsn: Lsn(4242),
            end_lsn: Lsn(4300),
            prev: Lsn::INVALID,
            xid: Xid(xid),
            rmid,
            info,
            blocks: Vec::new(),
            main,
        }
    }

    #[test]
    fn each_record_reports_the_id_counters_its_manager_decodes() {
        let mut registry = Registry {
            managers: (0..256).map(|_| None).collect(),
        };
        registry.register(rmid::XLOG, Arc::new(xlog::Xlog));
        registry.register(rmid::STORAGE, Arc::new(storage::Storage));
        let checkpoint = xlog::CheckpointRecord {
            redo: Lsn(1),
            next_xid: Xid(500),
            next_oid: Oid(20_000),
            oldest_xid: Xid(300),
        };
        let ids = |rmid, info, xid, main| registry.ids(&record(rmid, info, xid, main));
        assert_eq!(
            ids(rmid::XLOG, 1, 0, checkpoint.encode().to_vec()).unwrap(),
            IdCounters {
                next_xid: Xid(500),
                next_oid: Oid(20_000),
                oldest_xid: Xid(300)
            }
        );
        // A record's own transaction id counts too, whatever its manager says.
        assert_eq!(
            ids(rmid::XLOG, 1, 900, checkpoint.encode().to_vec())
                .unwrap()
                .next_xid,
            Xid(901)
        );
        let rel = |number| {
            let mut main = Vec::new();
            crate::wal::record::put_rel(&mut main, RelFileLocator::new(1, number));
            main
        };
        let create = [rel(16_390), vec![Fork::Main as u8]].concat();
        assert_eq!(
            ids(
                rmid::STORAGE,
                storage::StorageRecord::Create as u8,
                7,
                create
            )
            .unwrap(),
            IdCounters {
                next_xid: Xid(8),
                next_oid: Oid(16_391),
                oldest_xid: Xid::INVALID
            }
        );
        assert_eq!(
            ids(
                rmid::STORAGE,
                storage::StorageRecord::Drop as u8,
                0,
                rel(99_999)
            )
            .unwrap(),
            IdCounters {
                next_xid: Xid(1),
                ..IdCounters::default()
            }
        );
        let err = ids(rmid::XLOG, 1, 0, vec![0; 31]).unwrap_err().to_string();
        assert!(err.contains("checkpoint record of 31 bytes"), "{err}");
        assert!(matches!(
            ids(rmid::HEAP, 1, 0, Vec::new()),
            Err(Error::UnknownResourceManager {
                rmid: rmid::HEAP,
                ..
            })
        ));
    }
}
