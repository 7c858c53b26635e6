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
//! 3. Write and flush: one thread at a time (the writer mutex) writes the complete bytes and
//!    fdatasyncs them. With `wal_direct_io` the segments are open with `O_DIRECT` and each
//!    write is staged in whole 4 KiB blocks: the bytes before its start in its first block
//!    rewritten as they are, the rest of its last block zeros (`docs/design.md`). So the
//!    page holding the end of the WAL at startup is read into the ring before anything else.
//!
//! ## Group commit (PostgreSQL's `XLogFlush`)
//! A committer whose record is not yet durable either becomes the flush leader or sleeps
//! (parked) until the leader is done; the leader then wakes every sleeper on its own, so
//! they run at once instead of one after another through the group mutex. The first
//! committers to wait, as many as there are CPUs, wait awake instead, yielding their CPU,
//! for at most twice the last flush's time and never for a flush slower than 0.5 ms: they
//! see the flush end without a wake-up, and the CPUs stay out of idle. The
//! leader flushes *everything inserted so far* (it waits for the insertions before the
//! insert position), not only up to its own record, so the committers that slept find
//! theirs durable: one fdatasync serves the whole group. A commit leader first waits
//! (briefly, bounded by a quarter of the last flush's time) until as many committers sleep
//! as the last flush served: committers that commit back to back come back in a burst after
//! each flush, and without this the first one back would flush alone. For the first 50 µs of
//! that wait it yields its CPU rather than sleeps, so that it is not late to wake. With
//! `commit_delay` set, a leader that sees at least `commit_siblings` other active
//! transactions ([`Wal::flush_commit`]) first sleeps that long so more commits join
//! (PostgreSQL's meaning; off by default). Asynchronous commits (`synchronous_commit = off`)
//! never flush: the background [`WalWriter`] flushes at least every `wal_writer_delay`.
//!
//! ## Rules
//! - **The WAL rule**: a data page may be written only once WAL up to its LSN is durable; the
//!   buffer pool's write-back hook calls [`Wal::flush`] to ensure it.
//! - A record is at most [`MAX_RECORD_SIZE`](crate::types::MAX_RECORD_SIZE) bytes and
//!   `wal_buffers` is at least four times that, so an inserter waiting for ring space only
//!   ever waits for *earlier* insertions: there is no cycle, hence no deadlock. Ring pages
//!   are set up strictly in LSN order (`ensure_page`), so a page a ring further on never
//!   takes the slot of a page an inserter has reserved bytes on but not yet reached.
//! - Waiting for insertions ([`Wal::wait_insertions`]) sleeps on each lagging slot's
//!   published progress, never on the slot's lock: an inserter holds its slot's lock while
//!   it waits for ring space, so a waiter that saw stale progress and slept on the lock
//!   could wait for a thread that waits for it.
//! - Lock order: insertion slot → reservation mutex; insertion slot → ring-init mutex;
//!   insertion slot → writer mutex; insertion slot → write-behind poke slot (a read lock,
//!   then the WAL writer's stop mutex to wake it; both leaves); group-commit mutex alone (never held across a wait for anything else). Nobody
//!   waits for an insertion while holding the writer.
//! - A failed write or fsync is final (PostgreSQL PANICs): the WAL enters a failed state,
//!   every later insert and flush is refused, and only a restart (recovery from what is
//!   durable) clears it. So a record whose flush failed (a commit reported as failed) never
//!   becomes durable later in the same run, and an insertion that fails after reserving its
//!   bytes (a failed write-out for ring space) stops the WAL too: nothing after its hole is
//!   ever written, so recovery never meets valid records beyond unreadable bytes.
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
//! - **Writing behind**: once half the ring is unwritten, an inserter pokes the [`WalWriter`],
//!   which writes out what is complete on its own thread (no fsync), so a bulk change (a
//!   VACUUM, a large INSERT) does not also spend its own time in `pwrite`. An inserter writes
//!   itself only when its ring slot is still unwritten (the ring is full), or when no WAL
//!   writer runs. Below half the WAL writer writes nothing, so no more WAL reaches the files
//!   before a crash, and no more is replayed after it, than without it.
//! - **A direct write never carries incomplete bytes**: it is staged from complete bytes and
//!   zeros, never straight from the ring, whose bytes past the complete point inserters may
//!   be copying in while the device reads them.
//! - **New segments** are created zero-filled ahead of need by the [`WalWriter`]
//!   (`wal_init_zero`, [`Wal::prepare_next_segment`]) and renamed into place under the writer
//!   mutex; the writer syncs the directory before its first flush into a segment it did not
//!   create in this run, so a record is never durable before its file's name.
//! - Readers read only flushed WAL: first from the ring when the page is still there, else
//!   from segment files kept open in a bounded cache (seed 003: COMMIT PREPARED reads its
//!   prepare record without opening a file).
//! - Every record is CRC32C-checked, carries a link to the previous record, and every page
//!   header names its own LSN, so stale bytes from before a crash are never taken for records.
//!
//! ## Files
//! `record.rs`: the record format; `ring.rs`: the WAL buffers and every access to their
//! bytes (the engine's only `unsafe` code); `insert.rs`: reservation, insertion, page-change
//! logging; `write.rs`: writing, flushing and group commit; `walwriter.rs`: the background
//! flusher for asynchronous commits and preparer of segments; `reader.rs`: reading records
//! back, sequentially for recovery and by LSN from the ring or the files.

mod insert;
pub mod reader;
pub mod record;
mod ring;
#[cfg(test)]
mod tests;
mod walwriter;
mod write;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock, RwLockReadGuard};

use crate::buffer::PageWriteGuard;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::padded::CachePadded;
use crate::periodic::PokeSlot;
use crate::vfs::{Vfs, VfsFile};
pub use reader::WalReader;
pub use walwriter::{WalWriter, WalWriterJobs};
pub use record::{
    BlockRef, DecodedBlock, DecodedRecord, RecordType, WalRecord, MAX_BLOCK_REFS,
};
use ring::Ring;
use write::Writer;

use crate::types::Lsn;

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
/// An insertion slot's `inserting_at` while no insertion is under way.
const IDLE: Lsn = Lsn(u64::MAX);
/// A ring slot's `page_addr` before it first holds a page.
const EMPTY: Lsn = Lsn(u64::MAX);
/// The largest single write of WAL (bounds how long one system call holds the writer).
const MAX_WRITE_BYTES: u64 = 1024 * 1024;
thread_local! {
    /// This thread's insertion slot, once given.
    static MY_SLOT: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Each thread keeps the insertion slot it was first given, so threads do not all bump one
/// shared counter per insert (and, with up to 8 threads, never share a slot).
fn my_slot() -> usize {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    MY_SLOT.with(|cell| {
        if let Some(slot) = cell.get() {
            return slot;
        }
        let slot = (NEXT.fetch_add(1, Ordering::Relaxed) % INSERT_SLOTS as u64) as usize;
        cell.set(Some(slot));
        slot
    })
}

/// Gives this thread insertion slot `slot` (tests that stop one inserter need the others on
/// other slots).
#[cfg(test)]
fn pin_slot(slot: usize) {
    assert!(slot < INSERT_SLOTS);
    MY_SLOT.with(|cell| cell.set(Some(slot)));
}

/// Open segment files kept by readers.
const READ_FILES: usize = 8;

/// The most WAL segment files open at once, which the engine's descriptor budget counts
/// ([`crate::vfs::FdBudget`]): those the writer wrote since its last fsync (at most the WAL
/// buffers' span of segments, plus the one it goes on in), the [`READ_FILES`] kept for
/// reading, and the one the WAL writer prepares. A reader's own file (startup redo,
/// `twophase_state = reread_wal`) is short-lived: the engine's reserve covers it.
pub fn max_open_files(config: &Config) -> u64 {
    let writing = config
        .wal_buffers_bytes
        .div_ceil(config.wal_segment_size_bytes.max(1))
        + 1;
    writing + READ_FILES as u64 + 1
}

/// The LSN of the first record of a new WAL.
pub const FIRST_LSN: Lsn = Lsn(HDR);

/// Records start 8-byte aligned.
fn align8(n: u64) -> u64 {
    (n + 7) & !7
}

/// A position in usable bytes → the LSN where a record there starts.
fn pos_to_lsn(pos: u64) -> Lsn {
    Lsn(pos / USABLE * PAGE + HDR + pos % USABLE)
}

/// A position in usable bytes → the LSN just past the bytes before it (a page boundary stays
/// a page boundary, not the first byte after the next header).
fn pos_to_end_lsn(pos: u64) -> Lsn {
    if pos > 0 && pos.is_multiple_of(USABLE) {
        Lsn(pos / USABLE * PAGE)
    } else {
        pos_to_lsn(pos)
    }
}

fn lsn_to_pos(lsn: Lsn) -> u64 {
    lsn.0 / PAGE * USABLE + lsn.offset_in(PAGE).saturating_sub(HDR)
}

/// An LSN shared between threads (an `AtomicU64` holding its value).
struct AtomicLsn(AtomicU64);

impl AtomicLsn {
    fn new(lsn: Lsn) -> Self {
        AtomicLsn(AtomicU64::new(lsn.0))
    }

    fn load(&self, order: Ordering) -> Lsn {
        Lsn(self.0.load(order))
    }

    fn store(&self, lsn: Lsn, order: Ordering) {
        self.0.store(lsn.0, order);
    }

    fn fetch_max(&self, lsn: Lsn, order: Ordering) -> Lsn {
        Lsn(self.0.fetch_max(lsn.0, order))
    }
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
    /// Times a committer slept while a flush leader worked.
    pub group_waits: AtomicU64,
    /// Times a commit leader stopped waiting for the last group to come back.
    pub gather_timeouts: AtomicU64,
    /// Times a committer waited awake (yielding its CPU) for the flush leader at work.
    pub awake_waits: AtomicU64,
    pub fsyncs: AtomicU64,
    /// Write system calls of WAL bytes (PostgreSQL's `wal_write`).
    pub writes: AtomicU64,
    /// Times an inserter found the WAL buffers full and wrote them out itself (PostgreSQL's
    /// `wal_buffers_full`).
    pub buffers_full: AtomicU64,
    /// Full-page images logged (PostgreSQL's `wal_fpi`).
    pub full_page_images: AtomicU64,
    /// Time spent in those writes and fsyncs, in nanoseconds. Always measured (two clock
    /// readings per system call, small beside the call), where PostgreSQL measures only
    /// with `track_wal_io_timing` on.
    pub write_ns: AtomicU64,
    pub sync_ns: AtomicU64,
    pub reads_from_buffers: AtomicU64,
    pub reads_from_files: AtomicU64,
}

/// The WAL's three positions at one moment; each is an LSN whose records before it are in
/// that state, and `insert >= write >= flush`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalPositions {
    /// Where the next record goes (PostgreSQL's `pg_current_wal_insert_lsn()`).
    pub insert: Lsn,
    /// Written up to here (`pg_current_wal_lsn()`).
    pub write: Lsn,
    /// Durable up to here (`pg_current_wal_flush_lsn()`).
    pub flush: Lsn,
}

/// A snapshot of the WAL's counters since it opened: what `pg_stat_wal` shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalCounters {
    pub records: u64,
    pub full_page_images: u64,
    pub bytes: u64,
    pub buffers_full: u64,
    pub writes: u64,
    pub fsyncs: u64,
    pub write_ns: u64,
    pub sync_ns: u64,
}

impl WalCounters {
    /// What was counted after `base` was taken.
    pub(crate) fn since(self, base: WalCounters) -> WalCounters {
        WalCounters {
            records: self.records.saturating_sub(base.records),
            full_page_images: self.full_page_images.saturating_sub(base.full_page_images),
            bytes: self.bytes.saturating_sub(base.bytes),
            buffers_full: self.buffers_full.saturating_sub(base.buffers_full),
            writes: self.writes.saturating_sub(base.writes),
            fsyncs: self.fsyncs.saturating_sub(base.fsyncs),
            write_ns: self.write_ns.saturating_sub(base.write_ns),
            sync_ns: self.sync_ns.saturating_sub(base.sync_ns),
        }
    }
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

/// Each slot on cache lines of its own: an inserter locks its slot and publishes progress
/// twice per record, and slots sharing a line made two threads' inserts contend as if they
/// shared one slot (PostgreSQL pads its WAL insertion locks for the same reason).
#[repr(align(128))]
struct InsertSlot {
    /// Held by the one insertion under way in this slot (threads sharing a slot take turns).
    lock: Mutex<()>,
    /// While an insertion is under way: the LSN up to which its bytes are complete.
    inserting_at: AtomicLsn,
    /// Threads in [`Wal::wait_insertions`] waiting for this slot's progress (PostgreSQL's
    /// `LWLockWaitForVar`): they sleep on `progressed` under `wait_lock` until
    /// `inserting_at` passes what they need. Waiting for the slot's `lock` instead deadlocked:
    /// a waiter that saw stale progress slept on the lock while its owner, a ring further on
    /// by then, waited for the waiter.
    waiters: std::sync::atomic::AtomicUsize,
    wait_lock: Mutex<()>,
    progressed: Condvar,
}

impl InsertSlot {
    /// Publishes progress (or `IDLE` at the end of an insertion) and wakes the waiters.
    fn publish(&self, at: Lsn) {
        // SeqCst on both sides (here and in `wait_insertions`): either the waiter's count is
        // seen here or this store is seen by the waiter's check.
        self.inserting_at.0.store(at.0, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            drop(self.wait_lock.lock());
            self.progressed.notify_all();
        }
    }
}

/// The write-ahead log.
pub struct Wal {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    segment_size: u64,
    /// On cache lines of its own, for the same reason as the slots: every insert takes it.
    reserve: CachePadded<Mutex<Reservation>>,
    slots: Vec<InsertSlot>,
    ring: Ring,
    /// The next ring page to set up (pages are set up strictly in order, see
    /// `ensure_page`); readers of the ring hold it too.
    init_lock: Mutex<Lsn>,
    written_upto: AtomicLsn,
    flushed_upto: AtomicLsn,
    writer: Mutex<Writer>,
    /// Whether a flush leader is at work (group commit), and the committers that sleep
    /// until it is done.
    group: Mutex<write::Group>,
    /// Counts the flush leaders that are done (changed under `group`): a sleeper parks until
    /// it moves on.
    flush_round: AtomicU64,
    /// Signalled by each committer that goes to sleep (a gathering leader waits for it).
    group_arrived: Condvar,
    /// How many committers may wait awake for a flush leader: the machine's CPUs (see
    /// `wait_for_leader`).
    max_awake_waiters: usize,
    /// `commit_delay` and `commit_siblings` (see [`Config`]).
    commit_delay_us: u64,
    commit_siblings: usize,
    failed: AtomicBool,
    /// The redo point of the last checkpoint: the first change to a page whose LSN is not
    /// past it must log a full-page image.
    redo_point: AtomicLsn,
    read_files: Mutex<Vec<(u64, Arc<dyn VfsFile>)>>,
    /// Read-held by sections that must not straddle a redo point; write-held while the
    /// checkpointer fixes one.
    checkpoint_barrier: RwLock<()>,
    /// The running [`WalWriter`]'s poke: an inserter that finds half the ring unwritten
    /// hands the write-out to it (`write_ahead`). `None`: no WAL writer, the inserter writes.
    write_behind: PokeSlot,
    stats: WalStats,
    /// Called by each inserter right after its reservation, with the record's start: lets a
    /// test stop an inserter between reserving and copying.
    #[cfg(test)]
    after_reserve: Mutex<Option<TestHook>>,
}

#[cfg(test)]
type TestHook = Arc<dyn Fn(Lsn) + Send + Sync>;

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
        crate::vfs::create_dir_durable(&*vfs, &dir)
            .map_err(|e| Error::file("create directory", &dir, e))?;
        let wal = Wal::new(vfs, dir, config, end, prev);
        wal.load_tail_page(end)?;
        Ok(wal)
    }

    fn new(vfs: Arc<dyn Vfs>, dir: PathBuf, config: &Config, end: Lsn, prev: Lsn) -> Wal {
        let npages = config.wal_buffers_bytes / PAGE;
        let written = if end.offset_in(PAGE) == HDR {
            end.align_down(PAGE)
        } else {
            end
        };
        Wal {
            vfs,
            dir,
            segment_size: config.wal_segment_size_bytes,
            reserve: CachePadded(Mutex::new(Reservation {
                bytepos: lsn_to_pos(end),
                prev,
                records: 0,
                bytes: 0,
            })),
            slots: (0..INSERT_SLOTS)
                .map(|_| InsertSlot {
                    lock: Mutex::new(()),
                    inserting_at: AtomicLsn::new(IDLE),
                    waiters: std::sync::atomic::AtomicUsize::new(0),
                    wait_lock: Mutex::new(()),
                    progressed: Condvar::new(),
                })
                .collect(),
            ring: Ring::new(npages),
            init_lock: Mutex::new(end.align_down(PAGE)),
            written_upto: AtomicLsn::new(written),
            flushed_upto: AtomicLsn::new(written),
            writer: Mutex::new(Writer::new(config.wal_direct_io)),
            group: Mutex::new(write::Group::default()),
            flush_round: AtomicU64::new(0),
            group_arrived: Condvar::new(),
            max_awake_waiters: std::thread::available_parallelism()
                .map_or(1, std::num::NonZero::get),
            commit_delay_us: config.commit_delay_us,
            commit_siblings: config.commit_siblings,
            failed: AtomicBool::new(false),
            redo_point: AtomicLsn::new(end),
            read_files: Mutex::new(Vec::new()),
            checkpoint_barrier: RwLock::new(()),
            write_behind: PokeSlot::default(),
            stats: WalStats::default(),
            #[cfg(test)]
            after_reserve: Mutex::new(None),
        }
    }

    /// Reads the page holding `end`, where this WAL is opened, into the ring when records
    /// before `end` lie on it, as PostgreSQL's startup does: a direct write rewrites the
    /// bytes before its start in its first block from the ring, and readers find the page
    /// there.
    fn load_tail_page(&self, end: Lsn) -> Result<()> {
        if end.offset_in(PAGE) <= HDR {
            // No record on it (at `HDR`, its header may not even be on disk): the writer
            // writes it whole, from its start.
            return Ok(());
        }
        let page_lsn = end.align_down(PAGE);
        let Some(page) = self.page_from_file(page_lsn)? else {
            return Err(Error::WalCorrupt {
                lsn: page_lsn,
                reason: "the segment file holding the end of WAL is missing".into(),
            });
        };
        self.install_tail_page(page_lsn, &page[..end.bytes_since(page_lsn) as usize]);
        Ok(())
    }

    pub fn counters(&self) -> WalCounters {
        let (records, bytes) = self.inserted();
        let s = &self.stats;
        WalCounters {
            records,
            full_page_images: s.full_page_images.load(Ordering::Relaxed),
            bytes,
            buffers_full: s.buffers_full.load(Ordering::Relaxed),
            writes: s.writes.load(Ordering::Relaxed),
            fsyncs: s.fsyncs.load(Ordering::Relaxed),
            write_ns: s.write_ns.load(Ordering::Relaxed),
            sync_ns: s.sync_ns.load(Ordering::Relaxed),
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

    /// The insert, write and flush positions, read flush first so that the three are
    /// ordered even while the writer moves them on.
    pub fn positions(&self) -> WalPositions {
        let flush = self.flushed_lsn();
        let write = self.written_lsn().max(flush);
        let insert = self.insert_lsn().max(write);
        WalPositions {
            insert,
            write,
            flush,
        }
    }

    /// Everything before this LSN has been handed to the kernel (written, perhaps not yet
    /// durable).
    pub fn written_lsn(&self) -> Lsn {
        self.written_upto.load(Ordering::Acquire)
    }

    /// Everything before this LSN is durable.
    pub fn flushed_lsn(&self) -> Lsn {
        self.flushed_upto.load(Ordering::Acquire)
    }

    /// The end of the reserved WAL (where the next record goes).
    pub fn insert_lsn(&self) -> Lsn {
        pos_to_end_lsn(self.reserve.lock().bytepos)
    }

    /// Puts the WAL in the failed state: a write or fsync of its own failed, or another
    /// layer's durability failed (a data-file fsync at checkpoint), so nothing more may be
    /// written until a restart recovers.
    pub fn fail(&self, reason: &str) {
        if !self.failed.swap(true, Ordering::AcqRel) {
            tracing::error!(reason, "WAL stopped: the engine must restart and recover");
        }
    }

    /// [`Wal::fail`] for an error of the WAL's own I/O, which it hands back to the caller.
    fn stop(&self, e: Error) -> Error {
        self.fail(&e.to_string());
        e
    }

    /// Has the WAL stopped (see [`Wal::fail`])?
    pub fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
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
        let keep_from = lsn.segment_of(self.segment_size);
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
                reason: "an earlier WAL write or fsync failed; restart to recover from durable WAL"
                    .into(),
            });
        }
        Ok(())
    }
}

/// The WAL rule for the buffer pool: before a dirty page is written, WAL up to its LSN is
/// made durable.
impl crate::buffer::WriteBackHook for Wal {
    fn before_write(&self, _tag: crate::types::BufferTag, page_lsn: Lsn) -> Result<()> {
        self.flush(page_lsn)
    }
}
