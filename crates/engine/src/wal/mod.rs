//! # wal — the write-ahead log
//!
//! An append-only stream of records addressed by LSN (a 64-bit byte position in the stream).
//! The stream is cut into 8 KiB WAL pages, each opening with a 24-byte header, and stored in
//! segment files of `wal_segment_size` bytes under `<data>/wal/`, named by segment number in
//! 16 hex digits. Byte layouts are in `docs/design.md` and [`record`].
//!
//! ## How insertion works (PostgreSQL's design)
//! 1. Reserve: under one short mutex, the record's place is fixed (a range of *usable* bytes,
//!    page headers excluded) and its `prev` link read. Nothing else happens in that section.
//! 2. Copy: each inserter holds one of 8 insertion slots and copies its bytes into the ring of
//!    WAL buffers (`wal_buffers`) in parallel with the others; its slot publishes how far it
//!    has got (`inserting_at`), so writers know which bytes are complete.
//! 3. Write and flush: [`Wal::flush`] waits for the insertions before its target, then one
//!    thread at a time (the writer mutex) writes the complete bytes and fdatasyncs. A flusher
//!    writes and syncs *everything* complete, so the committers that queued behind it find
//!    their LSN already durable: one fdatasync serves the whole group.
//!
//! ## Rules
//! - **The WAL rule**: a data page may be written only once WAL up to its LSN is durable; the
//!   buffer pool's write-back hook calls [`Wal::flush`] to ensure it.
//! - A record is at most [`MAX_RECORD_SIZE`] bytes and `wal_buffers` is at least four times
//!   that, so an inserter waiting for ring space only ever waits for *earlier* insertions:
//!   there is no cycle, hence no deadlock.
//! - Lock order: insertion slot → reservation mutex; insertion slot → ring-init mutex;
//!   insertion slot → writer mutex. Nobody waits for an insertion while holding the writer.
//! - A failed fsync is final: the WAL enters a failed state, every later insert and flush is
//!   refused, and only a restart (recovery from what is durable) clears it.
//! - **Logging a page change** ([`Wal::log_page_change`], the one way to do it): under the
//!   page's exclusive content lock, change the page, then log. The page is marked dirty
//!   *before* its record is reserved, so a checkpoint whose redo point follows the record
//!   finds it dirty; the full-page-image decision is re-checked under the reservation mutex,
//!   where [`Wal::begin_checkpoint`] moves the redo point, so no record after a redo point
//!   lacks the image its page needs. An error after the page changed stops the WAL (the
//!   page may hold a change no record describes), as PostgreSQL PANICs in a critical section.
//! - **Delaying checkpoints** ([`Wal::delay_checkpoint`]): changes that are not page changes
//!   under a content lock — a commit record and its commit-log bits, a prepare record and the
//!   in-memory prepared transaction — hold the guard across both halves; the checkpointer
//!   fixes its redo point only between such sections (PostgreSQL's `DELAY_CHKPT_START`), so a
//!   half before the redo point never has its other half missed by the checkpoint.
//! - Readers read only flushed WAL: first from the ring when the page is still there, else
//!   from segment files kept open in a bounded cache (seed 003: COMMIT PREPARED reads its
//!   prepare record without opening a file).
//! - Every record is CRC32C-checked, carries a link to the previous record, and every page
//!   header names its own LSN, so stale bytes from before a crash are never taken for records.

pub mod reader;
pub mod record;
#[cfg(test)]
mod tests;

use std::cell::UnsafeCell;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use crate::buffer::PageWriteGuard;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::page::{Page, PageMut};
use crate::vfs::{OpenMode, Vfs, VfsFile};
pub use reader::WalReader;
pub use record::{
    BlockRef, DecodedBlock, DecodedRecord, WalRecord, MAX_BLOCK_REFS, MAX_RECORD_SIZE,
};

pub use crate::types::Lsn;

/// The size of a WAL page.
pub const WAL_PAGE_SIZE: usize = 8192;
/// The size of a WAL page header.
pub const WAL_PAGE_HEADER_SIZE: usize = 24;
const PAGE: u64 = WAL_PAGE_SIZE as u64;
const HDR: u64 = WAL_PAGE_HEADER_SIZE as u64;
const USABLE: u64 = PAGE - HDR;
const WAL_MAGIC: u16 = 0x5157; // "WQ"
/// Page flag: the page starts with the rest of a record from the previous page.
const CONTRECORD: u16 = 0x1;
const INSERT_SLOTS: usize = 8;
const IDLE: u64 = u64::MAX;
const EMPTY: u64 = u64::MAX;
/// The largest single write of WAL (bounds the writer's scratch buffer).
const MAX_WRITE_BYTES: u64 = 1024 * 1024;
/// Each thread keeps the insertion slot it was first given, so threads do not all bump one
/// shared counter per insert (and, with up to 8 threads, never share a slot).
fn my_slot() -> usize {
    use std::cell::Cell;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static SLOT: Cell<Option<usize>> = const { Cell::new(None) };
    }
    SLOT.with(|cell| {
        if let Some(slot) = cell.get() {
            return slot;
        }
        let slot = (NEXT.fetch_add(1, Ordering::Relaxed) % INSERT_SLOTS as u64) as usize;
        cell.set(Some(slot));
        slot
    })
}

/// Open segment files kept by readers.
const READ_FILES: usize = 8;

/// The LSN of the first record of a new WAL.
pub const FIRST_LSN: Lsn = HDR;

/// Records start 8-byte aligned.
fn align8(n: u64) -> u64 {
    (n + 7) & !7
}

/// A position in usable bytes → the LSN where a record there starts.
fn pos_to_lsn(pos: u64) -> Lsn {
    pos / USABLE * PAGE + HDR + pos % USABLE
}

/// A position in usable bytes → the LSN just past the bytes before it (a page boundary stays
/// a page boundary, not the first byte after the next header).
fn pos_to_end_lsn(pos: u64) -> Lsn {
    if pos > 0 && pos.is_multiple_of(USABLE) {
        pos / USABLE * PAGE
    } else {
        pos_to_lsn(pos)
    }
}

fn lsn_to_pos(lsn: Lsn) -> u64 {
    lsn / PAGE * USABLE + (lsn % PAGE).saturating_sub(HDR)
}

// Page header layout.
const PH_MAGIC: usize = 0;
const PH_INFO: usize = 2;
const PH_REM_LEN: usize = 4;
const PH_ADDR: usize = 8;
const PH_FLUSH_HINT: usize = 16;

/// Counters of the WAL's work.
#[derive(Debug, Default)]
pub struct WalStats {
    pub flush_calls: AtomicU64,
    pub fsyncs: AtomicU64,
    pub reads_from_buffers: AtomicU64,
    pub reads_from_files: AtomicU64,
}

struct Reservation {
    /// Next free usable byte.
    bytepos: u64,
    /// Start of the last reserved record.
    prev: Lsn,
    /// Records and bytes inserted since open.
    records: u64,
    bytes: u64,
}

struct InsertSlot {
    lock: Mutex<()>,
    /// While an insertion is under way: the LSN up to which its bytes are complete.
    inserting_at: AtomicU64,
}

/// The WAL buffers: `npages` pages of raw memory shared by inserters and the writer.
///
/// Safety protocol: the bytes of a reserved record belong to its inserter until its slot
/// publishes past them; a page's header belongs to whoever holds `init_lock` while the page
/// is (re)initialised, and its continuation fields to the one inserter whose record continues
/// onto it. The writer reads only complete bytes. A page is re-initialised only after it has
/// been written out, and readers copy only under `init_lock`. So no two threads ever touch the
/// same byte at once unless both only read.
struct Ring {
    bytes: Box<[UnsafeCell<u8>]>,
    npages: u64,
    /// The LSN of the page each slot holds (`EMPTY` if none yet).
    page_addr: Box<[AtomicU64]>,
}

// SAFETY: see the protocol above; all shared access goes through raw pointers to
// `UnsafeCell` bytes, under that protocol.
unsafe impl Sync for Ring {}

impl Ring {
    fn new(npages: u64) -> Self {
        Ring {
            bytes: (0..npages * PAGE).map(|_| UnsafeCell::new(0)).collect(),
            npages,
            page_addr: (0..npages).map(|_| AtomicU64::new(EMPTY)).collect(),
        }
    }

    fn slot(&self, page_lsn: Lsn) -> usize {
        ((page_lsn / PAGE) % self.npages) as usize
    }

    fn ptr(&self, lsn: Lsn) -> *mut u8 {
        let at = (lsn % (self.npages * PAGE)) as usize;
        // Pointer from the whole slice, so it may cover a whole page.
        UnsafeCell::raw_get(self.bytes.as_ptr().wrapping_add(at))
    }

    /// # Safety
    /// The caller owns bytes `lsn..lsn+src.len()`, which lie within one page.
    unsafe fn write(&self, lsn: Lsn, src: &[u8]) {
        debug_assert!(lsn % PAGE + src.len() as u64 <= PAGE);
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr(lsn), src.len()) };
    }

    /// # Safety
    /// Nobody writes bytes `lsn..lsn+dst.len()` meanwhile; they do not wrap around the ring.
    unsafe fn read(&self, lsn: Lsn, dst: &mut [u8]) {
        debug_assert!(lsn % (self.npages * PAGE) + dst.len() as u64 <= self.npages * PAGE);
        unsafe { std::ptr::copy_nonoverlapping(self.ptr(lsn), dst.as_mut_ptr(), dst.len()) };
    }

    /// Where the ring's memory wraps next after `lsn`.
    fn wrap_after(&self, lsn: Lsn) -> Lsn {
        let size = self.npages * PAGE;
        lsn - lsn % size + size
    }
}

struct Writer {
    /// Segment files written since the last fsync (and the current one), by number.
    open: BTreeMap<u64, Arc<dyn VfsFile>>,
    unsynced: Vec<u64>,
    dir_dirty: bool,
    scratch: Vec<u8>,
}

/// The write-ahead log.
pub struct Wal {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    segment_size: u64,
    reserve: Mutex<Reservation>,
    slots: Vec<InsertSlot>,
    ring: Ring,
    init_lock: Mutex<()>,
    written_upto: AtomicU64,
    flushed_upto: AtomicU64,
    writer: Mutex<Writer>,
    failed: AtomicBool,
    /// Where this WAL was opened: ring pages before it hold no bytes of earlier records
    /// (those are only in the files).
    opened_at: Lsn,
    /// The redo point of the last checkpoint: the first change to a page whose LSN is not
    /// past it must log a full-page image.
    redo_point: AtomicU64,
    read_files: Mutex<Vec<(u64, Arc<dyn VfsFile>)>>,
    /// Read-held by sections that must not straddle a redo point; write-held while the
    /// checkpointer fixes one.
    checkpoint_barrier: RwLock<()>,
    stats: WalStats,
}

/// A changed page to log with [`Wal::log_page_change`].
pub struct LoggedPage<'a, 'g> {
    page: &'a mut PageWriteGuard<'g>,
    /// Redo rebuilds the page from the record alone (a freshly initialised page), so it
    /// never needs a full-page image (PostgreSQL's `REGBUF_WILL_INIT`).
    will_init: bool,
}

impl<'a, 'g> LoggedPage<'a, 'g> {
    /// A page the record changes.
    pub fn changed(page: &'a mut PageWriteGuard<'g>) -> Self {
        LoggedPage {
            page,
            will_init: false,
        }
    }

    /// A page the record initialises from scratch.
    pub fn will_init(page: &'a mut PageWriteGuard<'g>) -> Self {
        LoggedPage {
            page,
            will_init: true,
        }
    }
}

/// A checkpoint began between the image decision and the reservation this many times in a
/// row: impossible unless checkpoints run back to back faster than one record is built.
const MAX_IMAGE_RETRIES: usize = 1000;

impl Wal {
    /// The WAL directory of a data directory.
    pub fn dir_of(data_dir: &Path) -> PathBuf {
        data_dir.join("wal")
    }

    /// Opens the WAL for appending after `end`, the end of the last valid record (found by
    /// reading it with a [`WalReader`]; [`FIRST_LSN`] for a new WAL), whose start is `prev`.
    pub fn open_at(
        vfs: Arc<dyn Vfs>,
        data_dir: &Path,
        config: &Config,
        end: Lsn,
        prev: Lsn,
    ) -> Result<Wal> {
        config.validate()?;
        let dir = Self::dir_of(data_dir);
        vfs.create_dir_all(&dir)
            .map_err(|e| Error::file("create directory", &dir, e))?;
        Ok(Wal::new(vfs, dir, config, end, prev))
    }

    fn new(vfs: Arc<dyn Vfs>, dir: PathBuf, config: &Config, end: Lsn, prev: Lsn) -> Wal {
        let npages = config.wal_buffers_bytes / PAGE;
        let written = if end % PAGE == HDR { end - HDR } else { end };
        Wal {
            vfs,
            dir,
            segment_size: config.wal_segment_size_bytes,
            reserve: Mutex::new(Reservation {
                bytepos: lsn_to_pos(end),
                prev,
                records: 0,
                bytes: 0,
            }),
            slots: (0..INSERT_SLOTS)
                .map(|_| InsertSlot {
                    lock: Mutex::new(()),
                    inserting_at: AtomicU64::new(IDLE),
                })
                .collect(),
            ring: Ring::new(npages),
            init_lock: Mutex::new(()),
            written_upto: AtomicU64::new(written),
            flushed_upto: AtomicU64::new(written),
            writer: Mutex::new(Writer {
                open: BTreeMap::new(),
                unsynced: Vec::new(),
                dir_dirty: false,
                scratch: Vec::new(),
            }),
            failed: AtomicBool::new(false),
            redo_point: AtomicU64::new(end),
            opened_at: end,
            read_files: Mutex::new(Vec::new()),
            checkpoint_barrier: RwLock::new(()),
            stats: WalStats::default(),
        }
    }

    pub fn stats(&self) -> &WalStats {
        &self.stats
    }

    /// Records and bytes inserted since the WAL was opened.
    pub fn inserted(&self) -> (u64, u64) {
        let r = self.reserve.lock();
        (r.records, r.bytes)
    }

    /// Everything before this LSN is durable.
    pub fn flushed_lsn(&self) -> Lsn {
        self.flushed_upto.load(Ordering::Acquire)
    }

    /// The end of the reserved WAL (where the next record goes).
    pub fn insert_lsn(&self) -> Lsn {
        pos_to_end_lsn(self.reserve.lock().bytepos)
    }

    /// Puts the WAL in the failed state: another layer's durability failed (a data-file
    /// fsync at checkpoint), so nothing more may be written until a restart recovers.
    pub fn fail(&self, reason: &str) {
        tracing::error!(reason, "WAL stopped: the engine must restart and recover");
        self.failed.store(true, Ordering::Release);
    }

    /// Sets the redo point at startup, before anything is inserted.
    pub fn set_redo_point(&self, lsn: Lsn) {
        self.redo_point.store(lsn, Ordering::Release);
    }

    /// Starts a checkpoint: waits for the sections that delay checkpoints, then makes the
    /// current insert position the redo point, under the reservation mutex (see the rules in
    /// the module header). Returns the redo point.
    pub fn begin_checkpoint(&self) -> Lsn {
        let _no_delaying_sections = self.checkpoint_barrier.write();
        let r = self.reserve.lock();
        // Where the next record will start (after the page header when the insert position
        // is a page boundary): redo begins by reading a record there.
        let redo = pos_to_lsn(r.bytepos);
        self.redo_point.store(redo, Ordering::Release);
        redo
    }

    /// Holds off the start of a checkpoint while the guard lives (see the module header).
    /// Hold it briefly: a checkpoint, and behind it every new holder, waits for it.
    pub fn delay_checkpoint(&self) -> RwLockReadGuard<'_, ()> {
        self.checkpoint_barrier.read()
    }

    pub fn redo_point(&self) -> Lsn {
        self.redo_point.load(Ordering::Acquire)
    }

    /// Must a change to a page with this LSN log a full-page image? Yes for the first change
    /// after the redo point, so that redo can restore a page torn by a crash.
    pub fn needs_image(&self, page_lsn: Lsn) -> bool {
        page_lsn <= self.redo_point()
    }

    /// Removes the segment files that hold only WAL before `lsn` (the redo point of a
    /// completed checkpoint: recovery never reads them again).
    pub fn remove_segments_before(&self, lsn: Lsn) -> Result<usize> {
        let keep_from = lsn / self.segment_size;
        let names = self
            .vfs
            .list_dir(&self.dir)
            .map_err(|e| Error::file("list", &self.dir, e))?;
        let mut removed = 0;
        for name in names {
            let Some(segno) = name.to_str().and_then(|s| u64::from_str_radix(s, 16).ok()) else {
                continue;
            };
            if segno < keep_from {
                self.read_files.lock().retain(|(s, _)| *s != segno);
                let path = self.dir.join(&name);
                self.vfs
                    .remove_file(&path)
                    .map_err(|e| Error::file("remove WAL segment", &path, e))?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    fn check_failed(&self) -> Result<()> {
        if self.failed.load(Ordering::Acquire) {
            return Err(Error::WalFailed {
                reason: "an earlier WAL fsync failed; restart to recover from durable WAL".into(),
            });
        }
        Ok(())
    }

    // ------------------------------------------------------------------ insertion

    /// Appends a record; returns (start LSN, end LSN). The record is durable once
    /// [`flush`](Self::flush) up to its end LSN returned.
    pub fn insert(&self, rec: &WalRecord<'_>) -> Result<(Lsn, Lsn)> {
        Ok(self
            .insert_if_redo(rec, None)?
            .expect("an insert without a redo-point condition always happens"))
    }

    /// Logs a change already made to `pages`, each held under its exclusive content lock:
    /// marks them dirty, inserts the record (with a full-page image of every page that needs
    /// one), and sets their LSN to the record's end, which it returns. See the module header.
    pub fn log_page_change(
        &self,
        xid: u64,
        rmid: u8,
        info: u8,
        main: &[u8],
        pages: &mut [LoggedPage<'_, '_>],
    ) -> Result<Lsn> {
        let worst_size_bytes = record::RECORD_HEADER_SIZE
            + pages.len() * (record::BLOCK_REF_SIZE + crate::page::PAGE_SIZE)
            + main.len();
        if pages.len() > MAX_BLOCK_REFS || worst_size_bytes > MAX_RECORD_SIZE {
            // Refused before anything is dirtied: the pages' changes must then be undone by
            // the caller, which is why callers size their records beforehand.
            return Err(Error::WalRecordTooLarge {
                size_bytes: worst_size_bytes,
                blocks: pages.len(),
            });
        }
        for p in pages.iter_mut() {
            p.page.mark_dirty();
        }
        for _ in 0..MAX_IMAGE_RETRIES {
            let redo = self.redo_point();
            let blocks: Vec<BlockRef<'_>> = pages
                .iter()
                .map(|p| {
                    let page: &[u8; crate::page::PAGE_SIZE] = p.page;
                    BlockRef {
                        tag: p.page.tag(),
                        image: (!p.will_init && Page::new(page).lsn() <= redo).then_some(page),
                    }
                })
                .collect();
            let rec = WalRecord {
                xid,
                rmid,
                info,
                blocks: &blocks,
                main,
            };
            match self.insert_if_redo(&rec, Some(redo)) {
                Ok(Some((_, end))) => {
                    drop(blocks);
                    for p in pages.iter_mut() {
                        PageMut::new(p.page).set_lsn(end);
                    }
                    return Ok(end);
                }
                Ok(None) => {}
                Err(e) => {
                    self.fail(&format!(
                        "logging a page change failed after the change: {e}"
                    ));
                    return Err(e);
                }
            }
        }
        let reason = "a page change could not be logged: the redo point kept moving";
        self.fail(reason);
        Err(Error::WalFailed {
            reason: reason.into(),
        })
    }

    /// Inserts `rec`; with `expect_redo`, only if the redo point is still that (else `None`,
    /// nothing inserted): the caller decided its full-page images against it.
    fn insert_if_redo(
        &self,
        rec: &WalRecord<'_>,
        expect_redo: Option<Lsn>,
    ) -> Result<Option<(Lsn, Lsn)>> {
        self.check_failed()?;
        if rec.blocks.len() > MAX_BLOCK_REFS || record::encoded_size(rec) > MAX_RECORD_SIZE {
            return Err(Error::WalRecordTooLarge {
                size_bytes: record::encoded_size(rec),
                blocks: rec.blocks.len(),
            });
        }
        let mut bytes = Vec::new();
        record::encode(rec, &mut bytes);
        let slot = &self.slots[my_slot()];
        let _slot_guard = slot.lock.lock();
        let (start, end, prev) = {
            let mut r = self.reserve.lock();
            if expect_redo.is_some_and(|redo| redo != self.redo_point()) {
                return Ok(None);
            }
            let start_pos = r.bytepos;
            r.bytepos = start_pos + align8(bytes.len() as u64);
            let start = pos_to_lsn(start_pos);
            let prev = std::mem::replace(&mut r.prev, start);
            // Counted here, under the mutex already held, rather than on shared atomics.
            r.records += 1;
            r.bytes += bytes.len() as u64;
            // Published before the reservation is visible to anyone computing progress.
            slot.inserting_at.store(start, Ordering::Release);
            (start, pos_to_end_lsn(r.bytepos), prev)
        };
        record::seal(&mut bytes, prev);
        let result = self.copy_into_ring(slot, start, &bytes);
        slot.inserting_at.store(IDLE, Ordering::Release);
        result?;
        Ok(Some((start, end)))
    }

    fn copy_into_ring(&self, slot: &InsertSlot, start: Lsn, bytes: &[u8]) -> Result<()> {
        let mut pos = start;
        let mut done = 0usize;
        loop {
            let page_lsn = pos - pos % PAGE;
            self.ensure_page(page_lsn, slot, pos)?;
            let n = (bytes.len() - done).min((page_lsn + PAGE - pos) as usize);
            // SAFETY: these bytes are reserved by this insertion.
            unsafe { self.ring.write(pos, &bytes[done..done + n]) };
            done += n;
            if done == bytes.len() {
                return Ok(());
            }
            let next = page_lsn + PAGE;
            self.ensure_page(next, slot, page_lsn + PAGE)?;
            let rem_len = (bytes.len() - done) as u32;
            let mut header = [0u8; 8];
            header[PH_INFO..PH_INFO + 2].copy_from_slice(&CONTRECORD.to_le_bytes());
            header[PH_REM_LEN..PH_REM_LEN + 4].copy_from_slice(&rem_len.to_le_bytes());
            // SAFETY: only the record continuing onto a page writes its continuation fields,
            // after the page was initialised (ensure_page) and before its progress passes them.
            unsafe { self.ring.write(next + PH_INFO as u64, &header[PH_INFO..8]) };
            pos = next + HDR;
        }
    }

    /// Makes the ring slot for `page_lsn` hold that page, writing out the page it held
    /// before if needed. `progress` is how far this insertion has copied: published first,
    /// so the writer can write what precedes it while we wait.
    fn ensure_page(&self, page_lsn: Lsn, slot: &InsertSlot, progress: Lsn) -> Result<()> {
        let idx = self.ring.slot(page_lsn);
        // Bounded: each turn either returns or writes out the slot's old page.
        for _ in 0..1_000_000 {
            let cur = self.ring.page_addr[idx].load(Ordering::Acquire);
            if cur == page_lsn {
                return Ok(());
            }
            assert!(
                cur == EMPTY || cur < page_lsn,
                "WAL ring slot holds a newer page"
            );
            if cur != EMPTY && self.written_upto.load(Ordering::Acquire) < cur + PAGE {
                slot.inserting_at.store(progress, Ordering::Release);
                self.write_out(cur + PAGE, false)?;
                continue;
            }
            let _init = self.init_lock.lock();
            if self.ring.page_addr[idx].load(Ordering::Acquire) != cur {
                continue;
            }
            let mut page = vec![0u8; WAL_PAGE_SIZE];
            page[PH_MAGIC..PH_MAGIC + 2].copy_from_slice(&WAL_MAGIC.to_le_bytes());
            page[PH_ADDR..PH_ADDR + 8].copy_from_slice(&page_lsn.to_le_bytes());
            // SAFETY: the old page is written out and no inserter can reach this page before
            // page_addr says it is ready; we hold init_lock, which readers take too.
            unsafe { self.ring.write(page_lsn, &page) };
            self.ring.page_addr[idx].store(page_lsn, Ordering::Release);
            return Ok(());
        }
        unreachable!("ensure_page did not converge")
    }

    /// Everything before the returned LSN is complete in the ring.
    fn finished_point(&self) -> Lsn {
        let mut f = pos_to_end_lsn(self.reserve.lock().bytepos);
        for s in &self.slots {
            f = f.min(s.inserting_at.load(Ordering::Acquire));
        }
        // Never stop right after a page header: the page may not be initialised yet.
        if f % PAGE <= HDR {
            f -= f % PAGE;
        }
        f
    }

    /// Waits until no insertion before `upto` is in progress. Never called with the writer
    /// mutex held, and an inserter calling it has published progress beyond `upto`.
    fn wait_insertions(&self, upto: Lsn) {
        loop {
            let blocking = self
                .slots
                .iter()
                .find(|s| s.inserting_at.load(Ordering::Acquire) < upto);
            match blocking {
                None => return,
                Some(s) => drop(s.lock.lock()),
            }
        }
    }

    // ------------------------------------------------------------------ writing

    /// Writes (without fsync) at least up to `need` so ring pages before it can be reused.
    fn write_out(&self, need: Lsn, sync: bool) -> Result<()> {
        self.wait_insertions(need);
        let mut w = self.writer.lock();
        self.check_failed()?;
        let target = self.finished_point();
        self.write_locked(&mut w, target)?;
        if sync {
            self.sync_locked(&mut w, target)?;
        }
        Ok(())
    }

    /// Makes WAL up to `upto` durable (group commit: one fdatasync serves every committer
    /// that asked meanwhile).
    pub fn flush(&self, upto: Lsn) -> Result<()> {
        self.stats.flush_calls.fetch_add(1, Ordering::Relaxed);
        if self.flushed_upto.load(Ordering::Acquire) >= upto {
            return Ok(());
        }
        self.check_failed()?;
        let upto = upto.min(self.insert_lsn());
        self.wait_insertions(upto);
        let mut w = self.writer.lock();
        self.check_failed()?;
        if self.flushed_upto.load(Ordering::Acquire) >= upto {
            return Ok(()); // a leader flushed for us
        }
        let target = self.finished_point();
        assert!(
            target >= upto,
            "insertions before {upto} are complete, yet only {target} is"
        );
        self.write_locked(&mut w, target)?;
        self.sync_locked(&mut w, target)
    }

    fn segment_path(&self, segno: u64) -> PathBuf {
        self.dir.join(format!("{segno:016X}"))
    }

    fn segment_for_write(&self, w: &mut Writer, segno: u64) -> Result<Arc<dyn VfsFile>> {
        if let Some(f) = w.open.get(&segno) {
            return Ok(Arc::clone(f));
        }
        let path = self.segment_path(segno);
        let file = match self.vfs.open(&path, OpenMode::CreateNew) {
            Ok(f) => {
                f.set_len(self.segment_size)
                    .map_err(|e| Error::file("size new WAL segment", &path, e))?;
                w.dir_dirty = true;
                f
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let f = self
                    .vfs
                    .open(&path, OpenMode::Existing)
                    .map_err(|e| Error::file("open WAL segment", &path, e))?;
                // A crash between the creation and the sizing above leaves a short file, and
                // the reader reads whole pages only: records written into a partial last page
                // of it would be invisible to the next startup. Size it now.
                let size = f
                    .size()
                    .map_err(|e| Error::file("size WAL segment", &path, e))?;
                if size < self.segment_size {
                    f.set_len(self.segment_size)
                        .map_err(|e| Error::file("size WAL segment", &path, e))?;
                }
                f
            }
            Err(e) => return Err(Error::file("create WAL segment", &path, e)),
        };
        w.open.insert(segno, Arc::clone(&file));
        Ok(file)
    }

    /// Writes complete bytes from `written_upto` to `target`, in as few system calls as the
    /// segment boundaries, the ring's wrap point and [`MAX_WRITE_BYTES`] allow.
    fn write_locked(&self, w: &mut Writer, target: Lsn) -> Result<()> {
        let mut from = self.written_upto.load(Ordering::Acquire);
        while from < target {
            let segno = from / self.segment_size;
            let to = target
                .min((segno + 1) * self.segment_size)
                .min(self.ring.wrap_after(from))
                .min(from + MAX_WRITE_BYTES);
            let len = (to - from) as usize;
            w.scratch.resize(len, 0);
            // SAFETY: bytes before `target` are complete and their pages cannot be recycled
            // before written_upto passes them, which only this (writer-locked) code advances.
            unsafe { self.ring.read(from, &mut w.scratch[..len]) };
            // Stamp each page first written here with what was durable then: a reader that
            // finds a bad record uses it to tell a torn tail from corruption.
            let hint = self.flushed_upto.load(Ordering::Acquire).to_le_bytes();
            let mut page_start = from.next_multiple_of(PAGE);
            while page_start < to {
                let at = (page_start - from) as usize + PH_FLUSH_HINT;
                w.scratch[at..at + 8].copy_from_slice(&hint);
                page_start += PAGE;
            }
            let file = self.segment_for_write(w, segno)?;
            file.write_at(&w.scratch[..len], from % self.segment_size)
                .map_err(|source| Error::WalIo {
                    op: "write",
                    lsn: from,
                    source,
                })?;
            if !w.unsynced.contains(&segno) {
                w.unsynced.push(segno);
            }
            from = to;
            self.written_upto.store(from, Ordering::Release);
        }
        Ok(())
    }

    fn sync_locked(&self, w: &mut Writer, target: Lsn) -> Result<()> {
        for segno in std::mem::take(&mut w.unsynced) {
            let file = Arc::clone(
                w.open
                    .get(&segno)
                    .expect("written segments stay open until synced"),
            );
            self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
            if let Err(source) = file.sync_data() {
                self.failed.store(true, Ordering::Release);
                tracing::error!(lsn = target, segment = segno, error = %source, "WAL fsync failed; refusing further writes");
                return Err(Error::WalIo {
                    op: "fsync",
                    lsn: target,
                    source,
                });
            }
        }
        if w.dir_dirty {
            self.vfs.sync_dir(&self.dir).map_err(|source| {
                self.failed.store(true, Ordering::Release);
                Error::WalIo {
                    op: "fsync directory of",
                    lsn: target,
                    source,
                }
            })?;
            w.dir_dirty = false;
        }
        // Keep only the newest segment open for writing.
        while w.open.len() > 1 {
            w.open.pop_first();
        }
        self.flushed_upto.fetch_max(target, Ordering::AcqRel);
        Ok(())
    }

    // ------------------------------------------------------------------ reading

    /// Reads the flushed record at `lsn`: from the WAL buffers when its pages are still
    /// there, else from segment files kept open.
    pub fn read_record(&self, lsn: Lsn) -> Result<DecodedRecord> {
        let flushed = self.flushed_lsn();
        if lsn >= flushed {
            return Err(Error::WalCorrupt {
                lsn,
                reason: format!("record is not flushed yet (flushed up to {flushed})"),
            });
        }
        let mut from_files = false;
        let result = reader::read_one(lsn, None, &mut |page_lsn| {
            if let Some(page) = self.page_from_ring(page_lsn, flushed) {
                return Ok(Some(page));
            }
            from_files = true;
            self.page_from_file(page_lsn)
        })?;
        let counter = if from_files {
            &self.stats.reads_from_files
        } else {
            &self.stats.reads_from_buffers
        };
        counter.fetch_add(1, Ordering::Relaxed);
        result.map_err(|reason| Error::WalCorrupt {
            lsn,
            reason: reason.clone(),
        })
    }

    /// Reads the flushed record at `lsn` from its segment file, opened for this one read and
    /// closed after, never from the WAL buffers: PostgreSQL's `XlogReadTwoPhaseData`, kept as
    /// the old behaviour of seed 003 (`twophase_state = reread_wal`).
    pub fn read_record_from_file(&self, lsn: Lsn) -> Result<DecodedRecord> {
        let flushed = self.flushed_lsn();
        if lsn >= flushed {
            return Err(Error::WalCorrupt {
                lsn,
                reason: format!("record is not flushed yet (flushed up to {flushed})"),
            });
        }
        let mut open: Option<(u64, Arc<dyn VfsFile>)> = None;
        let result = reader::read_one(lsn, None, &mut |page_lsn| {
            let segno = page_lsn / self.segment_size;
            let file = match &open {
                Some((s, f)) if *s == segno => Arc::clone(f),
                _ => {
                    let path = self.segment_path(segno);
                    let f = match self.vfs.open(&path, OpenMode::Existing) {
                        Ok(f) => f,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                        Err(e) => return Err(Error::file("open WAL segment", path, e)),
                    };
                    open = Some((segno, Arc::clone(&f)));
                    f
                }
            };
            reader::read_page(file.as_ref(), page_lsn, self.segment_size)
        })?;
        self.stats.reads_from_files.fetch_add(1, Ordering::Relaxed);
        result.map_err(|reason| Error::WalCorrupt { lsn, reason })
    }

    fn page_from_ring(&self, page_lsn: Lsn, flushed: Lsn) -> Option<Box<[u8; WAL_PAGE_SIZE]>> {
        if page_lsn < self.opened_at && self.opened_at - page_lsn > HDR {
            // The page holds records from before this WAL was opened: those bytes are only
            // on disk (the ring copy of this page starts empty).
            return None;
        }
        let _init = self.init_lock.lock();
        if self.ring.page_addr[self.ring.slot(page_lsn)].load(Ordering::Acquire) != page_lsn {
            return None;
        }
        let mut page = Box::new([0u8; WAL_PAGE_SIZE]);
        let len = (flushed.saturating_sub(page_lsn)).min(PAGE) as usize;
        // SAFETY: bytes before `flushed` are complete and nobody writes them again; the page
        // cannot be re-initialised while we hold init_lock.
        unsafe { self.ring.read(page_lsn, &mut page[..len]) };
        Some(page)
    }

    fn page_from_file(&self, page_lsn: Lsn) -> Result<Option<Box<[u8; WAL_PAGE_SIZE]>>> {
        let segno = page_lsn / self.segment_size;
        let file = {
            let mut files = self.read_files.lock();
            if let Some(i) = files.iter().position(|(s, _)| *s == segno) {
                let entry = files.remove(i);
                let f = Arc::clone(&entry.1);
                files.push(entry);
                f
            } else {
                let path = self.segment_path(segno);
                let f = match self.vfs.open(&path, OpenMode::Existing) {
                    Ok(f) => f,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(Error::file("open WAL segment", path, e)),
                };
                if files.len() >= READ_FILES {
                    files.remove(0);
                }
                files.push((segno, Arc::clone(&f)));
                f
            }
        };
        reader::read_page(file.as_ref(), page_lsn, self.segment_size)
    }
}

/// The WAL rule for the buffer pool: before a dirty page is written, WAL up to its LSN is
/// made durable.
impl crate::buffer::WriteBackHook for Wal {
    fn before_write(&self, _tag: crate::buffer::BufferTag, page_lsn: u64) -> Result<()> {
        self.flush(page_lsn)
    }
}
