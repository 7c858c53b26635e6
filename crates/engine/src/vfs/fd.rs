//! The engine's file descriptors, kept apart from everything else the process opens
//! (PostgreSQL's `fd.c`).
//!
//! quire runs its engine and its client sockets in one process, so they draw on one limit
//! (`RLIMIT_NOFILE`). Two things keep a flood of sockets from starving the engine:
//!
//! - **A budget** ([`FdBudget`], computed when a database opens, as PostgreSQL's
//!   `set_max_safe_fds`): the soft limit is raised to the hard limit, the descriptors
//!   already open are counted, [`NUM_RESERVED_FDS`] are kept for the engine's short-lived
//!   opens and its fixed files (WAL segments), and the storage manager's cache of relation
//!   files may hold `max_files_per_process` of the rest, but never more than half of it: the
//!   other half, and whatever the cache does not take, is left for the server's sockets
//!   ([`FdBudget::for_clients`]), which the server bounds by it.
//! - **Release and retry** ([`FdPool`], PostgreSQL's `BasicOpenFilePerm`): an open (or a
//!   directory fsync, which opens the directory) that fails with EMFILE or ENFILE closes
//!   one cached file that nobody is using ([`ReleaseFiles`]: the storage manager's cache
//!   registers itself) and tries again, at most [`MAX_RELEASES_PER_OPEN`] times; then it
//!   fails with the EMFILE, an ordinary error (SQLSTATE 53000). A shortage of descriptors
//!   is never a reason for the engine's failed state: EMFILE and ENFILE come only from a
//!   call that makes a descriptor, never from a write or an fsync, so nothing was lost
//!   ([`is_out_of_descriptors`]).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::sys::{self, DescriptorLimit};
use super::{DirLock, OpCounters, OpenMode, Ownership, Vfs, VfsFile};

/// Descriptors kept free for the engine's short-lived opens: the control file, a two-phase
/// state file, a directory being fsynced, a sort run of an index build, the WAL reader of
/// startup (PostgreSQL's `NUM_RESERVED_FDS`, 10, which it keeps for `system()` and the
/// dynamic loader).
pub const NUM_RESERVED_FDS: u64 = 10;

/// The fewest relation files the cache must be able to hold for a database to open
/// (PostgreSQL's `FD_MINFREE`, 48 in PostgreSQL 15).
pub const FD_MINFREE: u64 = 48;

/// How many cached files one open may close before it gives up: the first normally
/// suffices; the others cover a descriptor that another thread (a socket's `accept`) took
/// between the close and the retry. Past that, the shortage is not the engine's to fix.
pub const MAX_RELEASES_PER_OPEN: usize = 64;

/// Whether an error says that no descriptor could be had: EMFILE (this process is at its
/// limit) or ENFILE (the whole system is). Only a call that makes a descriptor (`open`,
/// `opendir`, `socket`, `accept`) fails so; a write or an fsync never does.
pub fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Something that keeps files open and can close one on demand: the storage manager's
/// cache of relation segment files.
pub trait ReleaseFiles: Send + Sync {
    /// Closes the least recently used file that nobody but the holder is using; `false` if
    /// there is none.
    fn release_one_file(&self) -> bool;
}

/// The descriptors of the process and the engine's share of them (see the module header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdBudget {
    /// The soft limit on open descriptors, once raised to the hard limit.
    pub soft_limit: u64,
    /// Descriptors open when the database was opened (standard streams, the server's
    /// listening socket, its runtime's, sockets already accepted; none of them the engine's).
    pub already_open: u64,
    /// Relation segment files the storage manager keeps open at most:
    /// `max_files_per_process`, but at most half of what the limit leaves.
    pub cached_files: u64,
    /// The engine's other files that stay open: WAL segments being written and read.
    pub fixed_files: u64,
    /// Kept for the engine's short-lived opens ([`NUM_RESERVED_FDS`]).
    pub reserved: u64,
}

/// The limit leaves too few descriptors for a database to open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdShortage {
    /// What the system allows the engine (PostgreSQL's "System allows %d").
    pub allows: u64,
    /// What it needs at least.
    pub needs: u64,
}

impl FdBudget {
    /// Reads (and raises) the process's limit, counts what is open, and computes the
    /// budget for a cache of at most `max_files_per_process` files beside `fixed_files`.
    pub fn of_this_process(
        max_files_per_process: u64,
        fixed_files: u64,
    ) -> io::Result<Result<FdBudget, FdShortage>> {
        let limit = sys::raise_descriptor_limit()?;
        // Without /proc, the three standard streams at least.
        let already_open = sys::open_descriptors().unwrap_or(3);
        Ok(Self::compute(
            limit,
            already_open,
            max_files_per_process,
            fixed_files,
        ))
    }

    /// The budget for a process with `limit` and `already_open` descriptors open.
    pub fn compute(
        limit: DescriptorLimit,
        already_open: u64,
        max_files_per_process: u64,
        fixed_files: u64,
    ) -> Result<FdBudget, FdShortage> {
        let left = limit
            .soft
            .saturating_sub(already_open)
            .saturating_sub(fixed_files + NUM_RESERVED_FDS);
        // Half for the cache at most: the engine and the sockets share one limit.
        let cache_may = left / 2;
        if cache_may < FD_MINFREE {
            return Err(FdShortage {
                allows: cache_may + NUM_RESERVED_FDS,
                needs: FD_MINFREE + NUM_RESERVED_FDS,
            });
        }
        let budget = FdBudget {
            soft_limit: limit.soft,
            already_open,
            cached_files: max_files_per_process.min(cache_may),
            fixed_files,
            reserved: NUM_RESERVED_FDS,
        };
        debug_assert!(budget.engine_max() + budget.already_open <= budget.soft_limit);
        Ok(budget)
    }

    /// The most descriptors the engine holds at once: its cache, its fixed files and the
    /// reserve.
    pub fn engine_max(&self) -> u64 {
        self.cached_files + self.fixed_files + self.reserved
    }

    /// What is left for the server's client sockets (and anything else the process opens):
    /// the limit less what was open at the start and the engine's most. A server that keeps
    /// its sockets, listening one included, under this never takes a descriptor the engine
    /// needs.
    pub fn for_clients(&self) -> u64 {
        self.soft_limit
            .saturating_sub(self.already_open)
            .saturating_sub(self.engine_max())
    }
}

/// The file layer the engine opens every file through: another [`Vfs`] (the operating
/// system's or the simulator), with PostgreSQL's release-and-retry on EMFILE and ENFILE
/// (see the module header). Every other call passes straight through.
pub struct FdPool {
    inner: Arc<dyn Vfs>,
    releasers: Mutex<Vec<Weak<dyn ReleaseFiles>>>,
    /// Files closed to make room for an open.
    released: AtomicU64,
    /// Opens that failed for want of a descriptor after closing what they could.
    exhausted: AtomicU64,
}

impl FdPool {
    pub fn new(inner: Arc<dyn Vfs>) -> Self {
        FdPool {
            inner,
            releasers: Mutex::new(Vec::new()),
            released: AtomicU64::new(0),
            exhausted: AtomicU64::new(0),
        }
    }

    /// Adds a holder of files to close when an open runs out of descriptors. Held weakly:
    /// the holder usually owns this pool.
    pub fn add_releaser(&self, releaser: Weak<dyn ReleaseFiles>) {
        self.releasers.lock().push(releaser);
    }

    /// How many cached files were closed to make room for an open.
    pub fn released_files(&self) -> u64 {
        self.released.load(Ordering::Relaxed)
    }

    /// How many opens failed for want of a descriptor, after closing what they could.
    pub fn exhausted_opens(&self) -> u64 {
        self.exhausted.load(Ordering::Relaxed)
    }

    /// Closes one file of some releaser; `false` if none had one to close.
    fn release_one(&self) -> bool {
        // The list is copied out: a releaser takes its own lock, and closing is a syscall.
        let releasers: Vec<_> = {
            let mut list = self.releasers.lock();
            list.retain(|r| r.strong_count() > 0);
            list.clone()
        };
        releasers
            .iter()
            .filter_map(Weak::upgrade)
            .any(|r| r.release_one_file())
    }

    /// Runs `op` (a call that makes a descriptor), closing a cached file and running it
    /// again each time it fails for want of one, at most [`MAX_RELEASES_PER_OPEN`] times.
    fn retrying<T>(&self, path: &Path, mut op: impl FnMut() -> io::Result<T>) -> io::Result<T> {
        let mut released = 0;
        loop {
            let e = match op() {
                Err(e) if is_out_of_descriptors(&e) => e,
                done => return done,
            };
            if released == MAX_RELEASES_PER_OPEN || !self.release_one() {
                self.exhausted.fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
            if released == 0 {
                // PostgreSQL logs this too ("out of file descriptors: %m; release and retry").
                tracing::warn!(path = %path.display(), error = %e, "out of file descriptors; release and retry");
            }
            released += 1;
            self.released.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Vfs for FdPool {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>> {
        self.retrying(path, || self.inner.open(path, mode))
    }

    fn open_direct(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>> {
        self.retrying(path, || self.inner.open_direct(path, mode))
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        self.inner.exists(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }

    /// Retried like an open: EMFILE here is the directory's open failing, so no fsync ran.
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.retrying(path, || self.inner.sync_dir(path))
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        self.retrying(path, || self.inner.list_dir(path))
    }

    fn lock_dir(&self, path: &Path) -> io::Result<Box<dyn DirLock>> {
        self.retrying(path, || self.inner.lock_dir(path))
    }

    fn ownership(&self, path: &Path) -> io::Result<Option<Ownership>> {
        self.inner.ownership(path)
    }

    fn restrict_dir_to_owner(&self, path: &Path) -> io::Result<()> {
        self.inner.restrict_dir_to_owner(path)
    }

    fn counters(&self) -> &OpCounters {
        self.inner.counters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::{Fault, SimVfs};

    fn limit(soft: u64) -> DescriptorLimit {
        DescriptorLimit { soft, hard: soft }
    }

    #[test]
    fn the_cache_gets_max_files_per_process_or_half_of_what_is_left() {
        // A generous limit: max_files_per_process decides, the rest is the clients'.
        let b = FdBudget::compute(limit(20_000), 30, 1000, 12).unwrap();
        assert_eq!(b.cached_files, 1000);
        assert_eq!(b.engine_max(), 1000 + 12 + NUM_RESERVED_FDS);
        assert_eq!(b.for_clients(), 20_000 - 30 - 1022);
        // The common default of 1024: the cache takes half of what is left, never all.
        let b = FdBudget::compute(limit(1024), 30, 1000, 12).unwrap();
        assert_eq!(b.cached_files, (1024 - 30 - 12 - NUM_RESERVED_FDS) / 2);
        assert!(b.for_clients() >= b.cached_files, "{b:?}");
        // Too few: PostgreSQL's "insufficient file descriptors available".
        let short = FdBudget::compute(limit(128), 20, 1000, 12).unwrap_err();
        assert_eq!(short.needs, FD_MINFREE + NUM_RESERVED_FDS);
        assert_eq!(
            short.allows,
            (128 - 20 - 12 - NUM_RESERVED_FDS) / 2 + NUM_RESERVED_FDS
        );
    }

    #[test]
    fn this_process_has_a_budget() {
        let b = FdBudget::of_this_process(1000, 12).unwrap().unwrap();
        assert!(
            b.cached_files >= FD_MINFREE && b.cached_files <= 1000,
            "{b:?}"
        );
        assert!(b.already_open >= 3, "{b:?}");
        assert!(b.engine_max() + b.already_open + b.for_clients() <= b.soft_limit);
    }

    /// Releases one counted file per call, while it has any.
    struct Holder(Mutex<Vec<Arc<dyn VfsFile>>>);

    impl ReleaseFiles for Holder {
        fn release_one_file(&self) -> bool {
            self.0.lock().pop().is_some()
        }
    }

    #[test]
    fn an_open_out_of_descriptors_closes_a_held_file_and_retries() {
        let sim = Arc::new(SimVfs::new(1));
        sim.create_dir_all(Path::new("/d")).unwrap();
        let pool = FdPool::new(sim.clone());
        let holder: Arc<Holder> = Arc::new(Holder(Mutex::new(Vec::new())));
        for i in 0..3 {
            let f = pool
                .open(Path::new(&format!("/d/{i}")), OpenMode::CreateNew)
                .unwrap();
            holder.0.lock().push(f);
        }
        pool.add_releaser(Arc::downgrade(&holder) as Weak<dyn ReleaseFiles>);
        // Once: one file closed, then the open succeeds.
        sim.inject(Fault::TooManyFiles, Some("/d/new"));
        pool.open(Path::new("/d/new"), OpenMode::CreateNew).unwrap();
        assert_eq!((pool.released_files(), holder.0.lock().len()), (1, 2));
        // Always: every held file closed, then the EMFILE, and nothing else to close.
        sim.set_fault_rate(Fault::TooManyFiles, 1.0, Some("/d/more"));
        let e = pool
            .open(Path::new("/d/more"), OpenMode::CreateNew)
            .err()
            .expect("EMFILE");
        assert!(is_out_of_descriptors(&e), "{e}");
        assert_eq!((pool.released_files(), holder.0.lock().len()), (3, 0));
        assert_eq!(pool.exhausted_opens(), 1);
        // Other errors are not retried.
        sim.inject(Fault::OpenIo, Some("/d/eio"));
        assert!(pool.open(Path::new("/d/eio"), OpenMode::CreateNew).is_err());
        assert_eq!(pool.exhausted_opens(), 1);
    }
}
