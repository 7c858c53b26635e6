//! Writing and flushing: one thread at a time (the writer mutex) writes the complete bytes
//! of the ring to segment files and fdatasyncs them. Flushes are grouped (see "Group commit"
//! in the module header): one leader at a time flushes everything inserted so far, the other
//! committers sleep until it is done and most find their record durable.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::MutexGuard;

use super::ring::IoBuffer;
use super::{Lsn, Wal, MAX_WRITE_BYTES, PAGE};
use crate::error::{Error, Result};
use crate::vfs::{OpenMode, VfsFile, DIRECT_IO_ALIGN};

/// The name a segment is zero-filled under before it is renamed into place (not a segment
/// number, so every reader of the directory passes it by).
pub(super) const PREPARING_SEGMENT: &str = "next-segment.tmp";
/// The zeros written per system call when preparing a segment.
const ZERO_FILL_CHUNK_BYTES: usize = 1024 * 1024;

pub(super) struct Writer {
    /// Segment files written since the last fsync (and the current one), by number.
    open: BTreeMap<u64, Arc<dyn VfsFile>>,
    unsynced: Vec<u64>,
    dir_dirty: bool,
    /// Open segments for direct I/O (`wal_direct_io`).
    direct_io: bool,
    /// Where a write to a segment opened for direct I/O is staged, aligned (allocated at
    /// the first such write): the bytes before its start in its first block are rewritten,
    /// and the rest of its last block is zeros, since the ring's bytes there may still be
    /// being copied in.
    staging: Option<IoBuffer>,
}

impl Writer {
    /// Whether each open segment file was opened for direct I/O.
    #[cfg(test)]
    pub(super) fn segments_direct(&self) -> Vec<bool> {
        self.open.values().map(|f| f.is_direct()).collect()
    }

    pub(super) fn new(direct_io: bool) -> Self {
        Writer {
            open: BTreeMap::new(),
            unsynced: Vec::new(),
            dir_dirty: false,
            direct_io,
            staging: None,
        }
    }
}

/// The flush leader's role, given up (and the sleepers woken) when dropped, on error or
/// panic too.
struct Leader<'a> {
    wal: &'a Wal,
    /// How long its write and fsync took, once they succeeded.
    took: Option<Duration>,
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        let sleepers = {
            let mut g = self.wal.group.lock();
            if let Some(took) = self.took {
                g.last_flush = took;
            }
            // The committers this flush served: they are likely to commit again soon.
            g.last_served = 1 + g.sleeping.len();
            g.leading = false;
            g.awake_waiters = 0;
            self.wal.flush_round.fetch_add(1, Ordering::Release);
            std::mem::take(&mut g.sleeping)
        };
        // Each sleeper is woken on its own, all at once, and most return without the group
        // mutex (their record is durable). A condition variable would wake them one after
        // another: each would take the mutex on waking and wake the next as it let go, a
        // chain of context switches that made the last sleeper of a group wait for all the
        // others to be scheduled.
        for thread in sleepers {
            thread.unpark();
        }
    }
}

/// Group commit's shared state (under `Wal::group`).
#[derive(Default)]
pub(super) struct Group {
    /// A flush leader is at work.
    leading: bool,
    /// The leader is gathering (see `gather`) and waits on `group_arrived`.
    gathering: bool,
    /// The committers that went to sleep since the last leader was done, to wake (each
    /// leader wakes them all when done and empties this). At most one entry per thread that
    /// flushes (sessions and background workers, bounded by `max_connections`).
    sleeping: Vec<std::thread::Thread>,
    /// How many committers the last flush served (its leader and the sleepers then).
    last_served: usize,
    /// How many committers wait awake for the leader at work (see `wait_for_leader`): at
    /// most `Wal::max_awake_waiters`.
    awake_waiters: usize,
    /// How long the last flush took (write and fsync).
    last_flush: Duration,
}

/// The longest a leader waits for the last group to come back (see `gather`).
const MAX_GATHER: Duration = Duration::from_millis(2);
/// The longest part of that wait a leader yields its CPU rather than sleeps.
const MAX_GATHER_YIELDING: Duration = Duration::from_micros(50);
/// The longest a committer waits awake for a leader (see `wait_for_leader`). Flushes
/// slower than half of it are waited for asleep: a wake-up's tens of microseconds are a
/// small part of them, and yielding through them would take CPU for little.
const MAX_AWAKE_WAIT: Duration = Duration::from_millis(1);

impl Wal {
    /// Writes (without fsync) at least up to `need` so ring pages before it can be reused.
    pub(super) fn write_out(&self, need: Lsn) -> Result<()> {
        self.wait_insertions(need);
        let mut w = self.writer.lock();
        self.check_failed()?;
        let target = self.finished_point();
        self.write_locked(&mut w, target)
    }

    /// The WAL writer's write-behind: once half the ring is unwritten (an inserter has poked
    /// it, see `write_ahead`), writes out (no fsync) every byte whose insertion is complete.
    /// Below that it writes nothing, so no more WAL reaches the files early than an inserter
    /// would have written itself: a crash leaves recovery no more to replay. (Writing at
    /// every round made seed 000's restart after kill -9 replay half as much WAL again.)
    pub fn write_behind(&self) -> Result<()> {
        if !self.half_unwritten() {
            return Ok(());
        }
        let mut w = self.writer.lock();
        self.check_failed()?;
        let target = self.finished_point();
        self.write_locked(&mut w, target)
    }

    /// Makes WAL up to `upto` durable (group commit: see the module header).
    pub fn flush(&self, upto: Lsn) -> Result<()> {
        self.flush_as(upto, None)
    }

    /// [`Wal::flush`] for a commit: if it leads the flush, it first waits `commit_delay` when
    /// at least `commit_siblings` other transactions are active (`other_active` counts them,
    /// asked only then), as PostgreSQL's `XLogFlush` does.
    pub fn flush_commit(&self, upto: Lsn, other_active: &dyn Fn() -> usize) -> Result<()> {
        self.flush_as(upto, Some(other_active))
    }

    /// Becomes the flush leader or sleeps until a leader's flush covers `upto`; the leader
    /// flushes everything inserted so far, so the committers that sleep meanwhile find their
    /// records durable when it wakes them.
    fn flush_as(&self, upto: Lsn, other_active: Option<&dyn Fn() -> usize>) -> Result<()> {
        self.stats.flush_calls.fetch_add(1, Ordering::Relaxed);
        if self.flushed_upto.load(Ordering::Acquire) >= upto {
            return Ok(());
        }
        self.check_failed()?;
        let upto = upto.min(self.insert_lsn());
        // Bounded: every round ends with a leader that flushes everything inserted so far,
        // `upto` included, or with the WAL failed; a committer sleeps through at most one
        // leader that started before its record was inserted, then finds it durable or leads.
        loop {
            let mut g = self.group.lock();
            if self.flushed_upto.load(Ordering::Acquire) >= upto {
                return Ok(()); // a leader flushed for us
            }
            self.check_failed()?;
            if !g.leading {
                g.leading = true;
                if other_active.is_some() {
                    self.gather(&mut g);
                }
                break;
            }
            self.wait_for_leader(g);
            if self.flushed_upto.load(Ordering::Acquire) >= upto {
                return Ok(());
            }
        }
        let mut leader = Leader {
            wal: self,
            took: None,
        };
        if self.commit_delay_us > 0
            && other_active.is_some_and(|count| count() >= self.commit_siblings)
        {
            std::thread::sleep(Duration::from_micros(self.commit_delay_us));
        }
        let inserted = self.insert_lsn();
        self.wait_insertions(inserted);
        let mut w = self.writer.lock();
        self.check_failed()?;
        let target = self.finished_point();
        assert!(
            target >= upto,
            "insertions before {inserted} are complete, yet only {target} is"
        );
        let started = Instant::now();
        self.write_locked(&mut w, target)?;
        self.sync_locked(&mut w, target)?;
        drop(w);
        leader.took = Some(started.elapsed());
        drop(leader);
        Ok(())
    }

    /// Waits, the group mutex held on entry, until the leader at work is done (its end moves
    /// the round on, under the mutex, and then unparks every sleeper).
    ///
    /// The first committers to wait, as many as the machine has CPUs, wait *awake*: they
    /// yield their CPU in a loop (staying runnable) until the round moves on, for at most
    /// twice the last flush's time, and then sleep like the others. So they see the flush
    /// end without being woken and scheduled: they return to their clients at once, and the
    /// one whose record the flush missed leads the next flush at once. And a CPU they yield
    /// never goes idle, so the other threads' wake-ups are quicker too (on a virtual machine
    /// an idle CPU is slow to wake). More awake waiters than CPUs could not all run; they
    /// would only take turns. MySQL's redo log has committers spin for the same reason.
    /// Measured with pgbench at 4 clients on 2 cores (see the README): the two-phase script
    /// went from about 5,300 to 6,500 transactions per second and TPC-B from 6,400 to
    /// 7,400, for 40-80 µs more CPU per transaction. A flush slower than half
    /// [`MAX_AWAKE_WAIT`] is waited for asleep.
    fn wait_for_leader(&self, mut g: MutexGuard<'_, Group>) {
        self.stats.group_waits.fetch_add(1, Ordering::Relaxed);
        g.sleeping.push(std::thread::current());
        if g.gathering && g.sleeping.len() + 1 >= g.last_served {
            self.group_arrived.notify_one();
        }
        let round = self.flush_round.load(Ordering::Acquire);
        let awake_for = g.last_flush * 2;
        let awake = g.awake_waiters < self.max_awake_waiters
            && !awake_for.is_zero()
            && awake_for <= MAX_AWAKE_WAIT;
        g.awake_waiters += usize::from(awake);
        assert!(g.awake_waiters <= self.max_awake_waiters);
        drop(g);
        if awake {
            self.stats.awake_waits.fetch_add(1, Ordering::Relaxed);
            let deadline = Instant::now() + awake_for;
            // Bounded by the deadline.
            while self.flush_round.load(Ordering::Acquire) == round && Instant::now() < deadline
            {
                std::thread::yield_now();
            }
        }
        // `park` may return spuriously (or for a stale unpark, such as the one a committer
        // that waited awake was sent): the round tells.
        while self.flush_round.load(Ordering::Acquire) == round {
            std::thread::park();
        }
    }

    /// A new commit leader first lets the committers of the last group come back (each
    /// inserts its next commit record and goes to sleep here) before it fixes what it
    /// flushes: otherwise the first committer back leads a flush of its record alone and the
    /// rest queue behind it, two fsyncs per round instead of one. It waits at most a quarter
    /// of the last flush's duration, and not at all while fewer committers are active than
    /// sleep already (one committer never waits).
    ///
    /// For the first [`MAX_GATHER_YIELDING`] of it the leader yields its CPU instead of
    /// sleeping: it stays runnable, so it goes on as soon as the group is complete and it
    /// gets a turn. A sleeping leader had to be woken and scheduled first, which on a busy
    /// machine took longer than the gathering itself (a 25 µs wait took 90 µs on average
    /// with pgbench's two-phase script at 4 clients on 2 cores); the yielding is bounded, so
    /// on an idle machine with a slow disk it does not spin for long.
    fn gather(&self, g: &mut MutexGuard<'_, Group>) {
        let started = Instant::now();
        let limit = (g.last_flush / 4).min(MAX_GATHER);
        let deadline = started + limit;
        let yielding_until = started + limit.min(MAX_GATHER_YIELDING);
        g.gathering = true;
        // Bounded by the deadline.
        while g.sleeping.len() + 1 < g.last_served {
            let now = Instant::now();
            if now >= deadline {
                self.stats.gather_timeouts.fetch_add(1, Ordering::Relaxed);
                break;
            }
            if now < yielding_until {
                MutexGuard::unlocked(g, std::thread::yield_now);
                continue;
            }
            // Each arrival that completes the group wakes this thread (only that one:
            // waking the leader at every arrival cost a context switch each).
            if self.group_arrived.wait_until(g, deadline).timed_out() {
                self.stats.gather_timeouts.fetch_add(1, Ordering::Relaxed);
                break;
            }
        }
        g.gathering = false;
    }

    pub(super) fn segment_path(&self, segno: u64) -> PathBuf {
        self.dir.join(format!("{segno:016X}"))
    }

    pub(super) fn segment_for_write(&self, w: &mut Writer, segno: u64) -> Result<Arc<dyn VfsFile>> {
        if let Some(f) = w.open.get(&segno) {
            return Ok(Arc::clone(f));
        }
        let path = self.segment_path(segno);
        let open = |mode| {
            if w.direct_io {
                self.vfs.open_direct(&path, mode)
            } else {
                self.vfs.open(&path, mode)
            }
        };
        let file = match open(OpenMode::CreateNew) {
            Ok(f) => {
                f.set_len(self.segment_size)
                    .map_err(|e| Error::file("size new WAL segment", &path, e))?;
                w.dir_dirty = true;
                f
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let f = open(OpenMode::Existing)
                    .map_err(|e| Error::file("open WAL segment", &path, e))?;
                // Most often a segment the WAL writer prepared (`prepare_next_segment`). But a
                // crash between the creation and the sizing above leaves a short file, and
                // the reader reads whole pages only: records written into a partial last page
                // of it would be invisible to the next startup. Size it then.
                let size = f
                    .size()
                    .map_err(|e| Error::file("size WAL segment", &path, e))?;
                if size < self.segment_size {
                    f.set_len(self.segment_size)
                        .map_err(|e| Error::file("size WAL segment", &path, e))?;
                }
                // Its name may be this run's (prepared, or an attempt whose sizing failed) and
                // not yet durable: sync it before the first flush into the file.
                w.dir_dirty = true;
                f
            }
            Err(e) => return Err(Error::file("create WAL segment", &path, e)),
        };
        if w.direct_io && !file.is_direct() {
            // All segments live in one directory, so the answer holds for the whole run.
            tracing::info!(dir = %self.dir.display(), "the file system has no direct I/O; WAL is written through the page cache (wal_direct_io)");
            w.direct_io = false;
        }
        w.open.insert(segno, Arc::clone(&file));
        Ok(file)
    }

    /// Creates the segment after the one being inserted into, zero-filled and synced, under
    /// its final name; returns whether it made one. PostgreSQL zero-fills a new segment
    /// (`wal_init_zero`) in the backend that first needs it; quire does it ahead of need, in
    /// the WAL writer, so that committers write into blocks the file already has: an
    /// fdatasync after writing into a hole of a sparse file must also commit the block
    /// allocation, which made every commit's flush slower.
    ///
    /// The file is filled under a temporary name and renamed into place under the writer
    /// mutex, only if the writer has not made the segment itself meanwhile (it then keeps
    /// its own, sparse). The writer syncs the directory before its first flush into a
    /// segment it did not create this run (`segment_for_write`), so no record in the file
    /// counts as durable before the file's name does. A failure here loses
    /// nothing (no WAL is in the file yet): it is returned, and the writer creates the
    /// segment itself when it gets there.
    pub fn prepare_next_segment(&self) -> Result<bool> {
        let segno = self.insert_lsn().segment_of(self.segment_size) + 1;
        if self.file_exists(&self.segment_path(segno))? {
            return Ok(false);
        }
        let preparing = self.dir.join(PREPARING_SEGMENT);
        let installed = self
            .zero_fill(&preparing)
            .and_then(|()| self.install_prepared(&preparing, segno));
        if !matches!(installed, Ok(true)) && self.file_exists(&preparing)? {
            self.vfs
                .remove_file(&preparing)
                .map_err(|e| Error::file("remove", &preparing, e))?;
        }
        installed
    }

    /// Renames the prepared file `preparing` to segment `segno`, unless the writer has made
    /// that segment meanwhile (or the WAL went past it, and a checkpoint may have removed
    /// it); returns whether it did.
    pub(super) fn install_prepared(&self, preparing: &Path, segno: u64) -> Result<bool> {
        let path = self.segment_path(segno);
        let w = self.writer.lock();
        let taken = w.open.contains_key(&segno)
            || self.insert_lsn().segment_of(self.segment_size) > segno
            || self.file_exists(&path)?;
        if taken {
            return Ok(false);
        }
        self.vfs
            .rename(preparing, &path)
            .map_err(|e| Error::file("rename prepared WAL segment to", &path, e))?;
        Ok(true)
    }

    fn file_exists(&self, path: &Path) -> Result<bool> {
        self.vfs
            .exists(path)
            .map_err(|e| Error::file("look for", path, e))
    }

    /// Writes `path` full of zeros, one segment long, and syncs it.
    pub(super) fn zero_fill(&self, path: &Path) -> Result<()> {
        let err = |op: &'static str| move |e| Error::file(op, path, e);
        let file = self
            .vfs
            .open(path, OpenMode::CreateIfMissing)
            .map_err(err("create"))?;
        // A file left by a crash in the middle of this may be any length.
        file.set_len(self.segment_size).map_err(err("size"))?;
        let zeros = vec![0u8; ZERO_FILL_CHUNK_BYTES];
        // Bounded: one segment, a chunk at a time.
        let mut at = 0;
        while at < self.segment_size {
            let len = (self.segment_size - at).min(ZERO_FILL_CHUNK_BYTES as u64);
            file.write_at(&zeros[..len as usize], at)
                .map_err(err("zero-fill"))?;
            at += len;
        }
        file.sync_all().map_err(err("fsync"))
    }

    /// Writes complete bytes from `written_upto` to `target`, in as few system calls as the
    /// segment boundaries, the ring's wrap point and [`MAX_WRITE_BYTES`] allow.
    pub(super) fn write_locked(&self, w: &mut Writer, target: Lsn) -> Result<()> {
        let mut from = self.written_upto.load(Ordering::Acquire);
        while from < target {
            let segno = from.segment_of(self.segment_size);
            let to = target
                .min(Lsn((segno + 1) * self.segment_size))
                .min(self.ring.wrap_after(from))
                .min(from + MAX_WRITE_BYTES);
            let len = (to - from) as usize;
            // Stamp each page first written here with what was durable then.
            let durable = self.flushed_upto.load(Ordering::Acquire);
            let mut page_start = Lsn(from.0.next_multiple_of(PAGE));
            while page_start < to {
                self.stamp_flush_hint(w, page_start, durable);
                page_start += PAGE;
            }
            let file = self
                .segment_for_write(w, segno)
                .map_err(|e| self.stop(e))?;
            let started = Instant::now();
            let written = if file.is_direct() {
                let start = from.align_down(DIRECT_IO_ALIGN as u64);
                let staging = w.staging.get_or_insert_with(|| {
                    IoBuffer::new(MAX_WRITE_BYTES as usize + DIRECT_IO_ALIGN)
                });
                file.write_at(
                    self.stage_aligned(staging, start, to),
                    start.offset_in(self.segment_size),
                )
            } else {
                file.write_at(
                    self.complete_in_ring(w, from, len),
                    from.offset_in(self.segment_size),
                )
            };
            self.stats.writes.fetch_add(1, Ordering::Relaxed);
            add_elapsed(&self.stats.write_ns, started);
            written.map_err(|source| {
                    self.stop(Error::WalIo {
                        op: "write",
                        lsn: from,
                        source,
                    })
                })?;
            if !w.unsynced.contains(&segno) {
                w.unsynced.push(segno);
            }
            from = to;
            self.written_upto.store(from, Ordering::Release);
        }
        Ok(())
    }

    pub(super) fn sync_locked(&self, w: &mut Writer, target: Lsn) -> Result<()> {
        for segno in std::mem::take(&mut w.unsynced) {
            let file = Arc::clone(
                w.open
                    .get(&segno)
                    .expect("written segments stay open until synced"),
            );
            self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
            let started = Instant::now();
            let synced = file.sync_data();
            add_elapsed(&self.stats.sync_ns, started);
            if let Err(source) = synced {
                tracing::error!(lsn = %target, segment = segno, error = %source, "WAL fsync failed; refusing further writes");
                return Err(self.stop(Error::WalIo {
                    op: "fsync",
                    lsn: target,
                    source,
                }));
            }
        }
        if w.dir_dirty {
            self.vfs.sync_dir(&self.dir).map_err(|source| {
                self.stop(Error::WalIo {
                    op: "fsync directory of",
                    lsn: target,
                    source,
                })
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
}

/// Adds the time since `started` to a nanosecond counter.
fn add_elapsed(counter: &std::sync::atomic::AtomicU64, started: Instant) {
    let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    counter.fetch_add(ns, Ordering::Relaxed);
}
