//! # vfs — the file layer
//!
//! The only code in quire that touches files. Everything above (smgr, and later the WAL,
//! the checkpointer and the commit logs) goes through the [`Vfs`] trait, so that tests can
//! swap the operating system for [`SimVfs`], an in-memory file system that crashes on demand.
//!
//! ## Rules
//! - Reads and writes are positional (`pread`/`pwrite`); there is no file cursor.
//! - A file opened with [`Vfs::open_direct`] (`O_DIRECT`; today only WAL segments, by
//!   whoever holds the WAL's writer mutex) takes only writes aligned to [`DIRECT_IO_ALIGN`]
//!   in address, offset and length; [`SimVfs`] refuses the others with `EINVAL`, as Linux
//!   does. Its reads go through another, buffered, handle. Direct I/O changes nothing about
//!   durability: the device may still hold the write in its cache until `sync_data`.
//! - A write is *not* durable until [`VfsFile::sync_data`] (or `sync_all`) returned `Ok` on
//!   that file. A created, renamed or removed name is not durable until
//!   [`Vfs::sync_dir`] returned `Ok` on its parent directory. [`SimVfs::crash`] enforces
//!   exactly this and nothing more.
//! - A failed fsync is final for the data it covered: the kernel may have dropped the dirty
//!   pages, so a later fsync that succeeds proves nothing about them. Callers must treat
//!   `sync_*` errors as fatal (the engine stops and recovers from WAL); the simulator models
//!   this by discarding the unsynced writes when it fails an fsync.
//! - A directory is a name in its parent like any other: it is durable only once its parent
//!   was fsynced. [`create_dir_durable`] is the one way the engine creates a directory.
//! - [`SimVfs`] injects the faults of [`Fault`] (ENOSPC and EIO on write and extend, short
//!   writes, EIO on read, open and fsync, EMFILE, bit flips, lost directory changes), each
//!   drawn from its seed and counted.
//! - Every operation is counted by kind in [`OpCounters`], so tests and benchmarks can assert
//!   syscall budgets (for example: zero size probes per buffer read once the relation is open).
//! - This layer never panics on what it reads; errors are `std::io::Error` and the caller adds
//!   context (relation, fork, block).
//!
//! ## Descriptors ([`fd`])
//! - The engine opens every file through an [`FdPool`] over the file system it was given: an
//!   open, directory fsync, listing or lock that fails with EMFILE or ENFILE closes a cached
//!   relation file nobody is using and tries again, a bounded number of times, then fails
//!   with an ordinary error. Running out of descriptors never puts the engine in its failed
//!   state: no write or fsync fails so ([`is_out_of_descriptors`]).
//! - When a database opens, its [`FdBudget`] is computed from the process's limit (raised to
//!   the hard limit): what the engine holds at most, and what is left for client sockets.
//!
//! ## Permissions
//! - [`OsVfs`] creates every directory `0700` and every file `0600` (explicit modes, not the
//!   process's umask), as PostgreSQL does by default (`pg_dir_create_mode`,
//!   `pg_file_create_mode`).
//! - [`Vfs::ownership`] reports a directory's permission bits and whether the process's
//!   user owns it, for the data directory's check at open (PostgreSQL's `checkDataDir`);
//!   [`Vfs::restrict_dir_to_owner`] sets a new data directory to `0700` (initdb's fix).
//!   [`SimVfs`] models durability, not access control: it has no owners and no modes and
//!   reports none, so the check has nothing to refuse there.
//! - The OS calls the standard library lacks (`getrlimit`, `setrlimit`, `geteuid`) are in
//!   `sys`, with the WAL ring the only code of the engine allowed `unsafe`.

mod counters;
mod fault;
pub mod fd;
mod os;
mod sim;
mod sys;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use counters::{OpCounters, OpCounts, OpKind};
pub use fault::{Fault, FaultCounts};
pub use fd::{is_out_of_descriptors, FdBudget, FdPool, FdShortage, ReleaseFiles};
pub use os::OsVfs;
pub use sim::{CrashOptions, SimVfs};
pub use sys::DescriptorLimit;

/// The alignment, in bytes, of the memory address, the file offset and the length of every
/// write to a file opened with [`Vfs::open_direct`]: the largest logical block size in
/// common use (PostgreSQL's `PG_IO_ALIGN_SIZE`).
pub const DIRECT_IO_ALIGN: usize = 4096;

/// Whether a write of `buf` at `offset` meets direct I/O's alignment.
pub fn is_direct_aligned(buf: &[u8], offset: u64) -> bool {
    let align = DIRECT_IO_ALIGN as u64;
    (buf.as_ptr() as u64).is_multiple_of(align)
        && offset.is_multiple_of(align)
        && (buf.len() as u64).is_multiple_of(align)
}

/// How to open a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// The file must exist.
    Existing,
    /// Create the file if missing.
    CreateIfMissing,
    /// Create the file; fail with `AlreadyExists` if it exists.
    CreateNew,
}

/// An open file. Dropping it closes it (counted as [`OpKind::Close`]).
pub trait VfsFile: Send + Sync {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (0 at end of file).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes all of `buf` at `offset`, extending the file if needed.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes the file's data durable (fdatasync).
    fn sync_data(&self) -> io::Result<()>;
    /// Makes the file's data and metadata durable (fsync).
    fn sync_all(&self) -> io::Result<()>;
    /// The file's size in bytes: a size probe (`lseek(SEEK_END)`), counted as such.
    fn size(&self) -> io::Result<u64>;
    /// Truncates or extends the file to `size_bytes`.
    fn set_len(&self, size_bytes: u64) -> io::Result<()>;
    /// Whether the file was opened for direct I/O ([`Vfs::open_direct`], where the file system
    /// allowed it): its writes must then be aligned ([`is_direct_aligned`]).
    fn is_direct(&self) -> bool;
}

/// An exclusive lock on a data directory, held until dropped.
pub trait DirLock: Send + Sync {}

/// A directory's permission bits and owner, as the operating system reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ownership {
    /// The permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// Whether the process's effective user owns it.
    pub owned_by_process_user: bool,
}

/// The file system interface. Implementations: [`OsVfs`] and [`SimVfs`], and [`FdPool`] over
/// either.
pub trait Vfs: Send + Sync {
    /// Opens (or creates, mode `0600` where there are modes) a file.
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>>;
    /// Opens (or creates) a file for direct I/O (`O_DIRECT`): its writes go to the device
    /// without a copy in the operating system's cache, so the fsync after them has only the
    /// device's cache to flush. Every write must then start at an address and a file offset
    /// that are multiples of [`DIRECT_IO_ALIGN`] and be a multiple of it long. Where the file
    /// system has no direct I/O (tmpfs), the file is opened as by [`Vfs::open`]:
    /// [`VfsFile::is_direct`] tells which.
    fn open_direct(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>>;
    /// Does a file or directory exist at `path`?
    fn exists(&self, path: &Path) -> io::Result<bool>;
    /// Removes a file (unlink).
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Renames a file, replacing `to` if it exists.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Creates a directory and its missing parents (mode `0700` where there are modes).
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Makes the entries of a directory (creates, renames, removes) durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// The names of the entries of a directory, sorted.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>>;
    /// Takes an exclusive lock on a directory, so that two processes (or two engines in one
    /// process) cannot open the same data directory. Fails with `WouldBlock` if held.
    fn lock_dir(&self, path: &Path) -> io::Result<Box<dyn DirLock>>;
    /// The permission bits and owner of `path`; `None` on a file system that has neither
    /// ([`SimVfs`]).
    fn ownership(&self, path: &Path) -> io::Result<Option<Ownership>>;
    /// Sets a directory's permission bits to `0700` (initdb's "fixing permissions on
    /// existing directory"); does nothing on a file system without modes.
    fn restrict_dir_to_owner(&self, path: &Path) -> io::Result<()>;
    /// The operation counters of this file system.
    fn counters(&self) -> &OpCounters;
}

/// Creates a directory and its missing parents so that a crash keeps them: after each
/// directory it creates, its parent is fsynced (PostgreSQL fsyncs the parent of every
/// directory it makes, `fsync_parent_path`). A directory that already exists is taken as
/// durable: every directory of a data directory is created here.
pub fn create_dir_durable(vfs: &dyn Vfs, path: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    for dir in path.ancestors() {
        if dir.as_os_str().is_empty() || vfs.exists(dir)? {
            break;
        }
        missing.push(dir);
    }
    for dir in missing.into_iter().rev() {
        vfs.create_dir_all(dir)?;
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        vfs.sync_dir(parent)?;
    }
    Ok(())
}
