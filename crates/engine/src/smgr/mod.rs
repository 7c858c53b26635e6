//! # smgr — the storage manager
//!
//! Relations as files. A relation is named by a [`RelFileLocator`] (database oid and a 64-bit
//! relation file number that is **never reused**, so a dropped relation's name can never come
//! back and alias stale buffers or sync requests). Each [`Fork`] of a relation is a sequence
//! of segment files of `segment_size_blocks` blocks each:
//!
//! ```text
//! <data>/base/<db_oid>/<rel_number>         main fork, segment 0
//! <data>/base/<db_oid>/<rel_number>.1       main fork, segment 1
//! <data>/base/<db_oid>/<rel_number>_fsm     free-space map fork
//! <data>/base/<db_oid>/<rel_number>_vm      visibility map fork
//! ```
//!
//! ## Rules
//! - **Size cache (seed 002).** With `relsize_cache = on`, the size of every fork that has
//!   been touched is kept in shared memory and changed only by [`Smgr::create`],
//!   [`Smgr::extend`], [`Smgr::zero_extend`], [`Smgr::truncate`] and [`Smgr::unlink`];
//!   [`Smgr::nblocks`] makes no system call once a fork is cached. With `relsize_cache = off`, every `nblocks` probes the
//!   file size (`lseek(SEEK_END)`), as PostgreSQL 13 does; with `relsize_cache =
//!   recovery_only`, the cache answers during startup redo only ([`Smgr::set_in_recovery`]),
//!   as PostgreSQL 14-17's `smgr_cached_nblocks`.
//! - **Extension** is serialised per relation by an extension lock inside `extend` (and
//!   `zero_extend`, redo's way to make a block exist: the file grows, no page is written), so
//!   block numbers are handed out once each.
//! - **Truncate and unlink** require that the caller holds the relation exclusively, and that
//!   the relation's buffers were dropped first (buffer layer), so no buffer can write a page
//!   back into a file that is being cut.
//! - Every page read is checksum-verified here, the one place all reads from disk pass
//!   through; a bad page is an [`Error::CorruptPage`] naming relation, fork and block.
//! - **Sync requests (seed 001).** Every write, extension and truncation files a request in
//!   the [`SyncQueue`] for its segment; the checkpointer fsyncs each file once
//!   ([`Smgr::sync_pending`]). Truncate and unlink cancel the requests of removed files. With
//!   `sync = immediate` each request is an fsync at once. [`Smgr::sync`] fsyncs a fork now,
//!   for the few paths that cannot wait for a checkpoint.
//! - **Descriptors** (PostgreSQL's `fd.c`, see [`vfs::fd`](crate::vfs::fd)). Open files are
//!   cached, at most `max_files_per_process` of them (LRU; [`Database`](crate::Database)
//!   lowers the bound to the engine's share of the descriptor limit). The storage manager
//!   opens through an [`FdPool`] over the file system it is given, with its cache as the
//!   pool's releaser, and hands that pool to the rest of the engine ([`Smgr::vfs`]): any open
//!   in the engine that meets EMFILE or ENFILE closes the least recently used cached file
//!   nobody holds, and tries again.
//! - **Failure is final** ([`health`](crate::health)): every fsync failure here (a pending
//!   request, the writer's own fsync when the queue is full or `sync = immediate`, a
//!   directory) puts the engine in its failed state, which this layer holds
//!   ([`Smgr::health`]); once failed, it refuses every write, extension, truncation,
//!   creation and removal, so no data page reaches a file after the failure.
//! - **A failed open is not a failed fsync.** An open that fails (a segment reopened to be
//!   fsynced, a directory opened to be fsynced: EMFILE, ENFILE) ran no fsync, so nothing was
//!   lost: it is an ordinary error, the engine goes on, and the request stays pending for
//!   the next checkpoint ([`Smgr::sync_pending`]).
//! - Directories are created with [`create_dir_durable`] (their parent fsynced), so that a
//!   crash cannot lose `base/` or `base/<db>` with the files the checkpoint made durable.

mod files;
mod relsize;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::config::{Config, RelsizeCacheMode};
use crate::error::{Error, Result};
use crate::hash::hash_one;
use crate::health::Health;
use crate::page::{self};
use crate::sync::{SyncQueue, SyncTarget};
use crate::vfs::{
    create_dir_durable, is_out_of_descriptors, FdPool, OpenMode, ReleaseFiles, Vfs, VfsFile,
};
use files::FileCache;
use relsize::RelsizeCache;

use crate::types::{BlockNumber, Fork, MAX_BLOCKS, PAGE_SIZE, RelFileLocator};

/// Stripes of the extension lock: relations hash onto them.
const EXTENSION_LOCK_STRIPES: usize = 64;

/// The storage manager: relation files, the open-file cache and the relation-size cache.
pub struct Smgr {
    vfs: Arc<dyn Vfs>,
    base_dir: PathBuf,
    segment_size_blocks: u32,
    relsize_mode: RelsizeCacheMode,
    /// Startup redo is running (`relsize_cache = recovery_only` caches sizes only then, and
    /// `buffer_drop = pg14` looks blocks up only then), as PostgreSQL's `InRecovery`.
    in_recovery: std::sync::atomic::AtomicBool,
    sizes: RelsizeCache,
    files: Arc<FileCache>,
    extension_locks: Vec<Mutex<()>>,
    sync_queue: SyncQueue,
    /// Directories whose entries changed (a segment created or removed) since their last
    /// fsync: the checkpointer syncs them with the files, or a crash could lose a file whose
    /// data it had made durable.
    dirty_dirs: Mutex<std::collections::BTreeSet<PathBuf>>,
    health: Arc<Health>,
}

impl Smgr {
    /// A storage manager over `<data_dir>/base`, which is created if missing. Its files, and
    /// every file the engine opens through [`Smgr::vfs`], are opened through a descriptor
    /// pool over `vfs` that closes cached files when an open runs out of descriptors.
    pub fn new(vfs: Arc<dyn Vfs>, data_dir: &Path, config: &Config) -> Result<Self> {
        config.validate()?;
        let files = Arc::new(FileCache::new(config.max_files_per_process));
        let pool = FdPool::new(vfs);
        pool.add_releaser(Arc::downgrade(&files) as std::sync::Weak<dyn ReleaseFiles>);
        let vfs: Arc<dyn Vfs> = Arc::new(pool);
        let base_dir = data_dir.join("base");
        create_dir_durable(&*vfs, &base_dir)
            .map_err(|e| Error::file("create directory", &base_dir, e))?;
        Ok(Smgr {
            vfs,
            base_dir,
            segment_size_blocks: config.segment_size_blocks,
            relsize_mode: config.relsize_cache,
            in_recovery: std::sync::atomic::AtomicBool::new(false),
            sizes: RelsizeCache::new(),
            files,
            extension_locks: (0..EXTENSION_LOCK_STRIPES)
                .map(|_| Mutex::new(()))
                .collect(),
            // PostgreSQL sizes the checkpointer's request queue by NBuffers too.
            sync_queue: SyncQueue::new(config.sync, config.nbuffers()),
            dirty_dirs: Mutex::new(std::collections::BTreeSet::new()),
            health: Arc::new(Health::new()),
        })
    }

    /// Marks the start and the end of startup redo.
    pub fn set_in_recovery(&self, on: bool) {
        self.in_recovery
            .store(on, std::sync::atomic::Ordering::Release);
    }

    pub fn in_recovery(&self) -> bool {
        self.in_recovery.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Whether `nblocks()` and `exists()` answer from the size cache now.
    fn cache_in_use(&self) -> bool {
        match self.relsize_mode {
            RelsizeCacheMode::On => true,
            RelsizeCacheMode::Off => false,
            RelsizeCacheMode::RecoveryOnly => self.in_recovery(),
        }
    }

    /// A fork's size if the cache holds it and is in use (PostgreSQL's
    /// `smgrnblocks_cached`): no system call, `None` when unknown.
    pub fn cached_nblocks(&self, rel: RelFileLocator, fork: Fork) -> Option<BlockNumber> {
        if !self.cache_in_use() {
            return None;
        }
        self.sizes.get(rel, fork).filter(|&n| n != relsize::MISSING)
    }

    /// The engine's failed state (see the module header).
    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// Fails the engine with an fsync's error (any fsync failure is final) and returns it;
    /// but a directory fsync that could not open its directory (EMFILE, ENFILE) ran no
    /// fsync, lost nothing, and is an ordinary error.
    fn fsync_failed(&self, op: &'static str, path: impl Into<PathBuf>, e: io::Error) -> Error {
        if is_out_of_descriptors(&e) {
            return Error::file(op, path, e);
        }
        self.health.fail(Error::file(op, path, e))
    }

    /// The file layer every part of the engine opens files through: the one given to
    /// [`Smgr::new`], in the descriptor pool whose cached files this storage manager closes
    /// when an open runs out of descriptors. Its counters are the given file system's.
    pub fn vfs(&self) -> &Arc<dyn Vfs> {
        &self.vfs
    }

    /// Closes the least recently used cached file that nobody holds; `false` if there is
    /// none. What an open that runs out of descriptors does (through the pool); tests use it
    /// to make the next use of a file open it again.
    pub fn release_one_file(&self) -> bool {
        self.files.release_one_file()
    }

    fn rel_dir(&self, rel: RelFileLocator) -> PathBuf {
        self.base_dir.join(rel.db_oid.to_string())
    }

    /// The path of one segment file.
    pub fn segment_path(&self, rel: RelFileLocator, fork: Fork, segno: u32) -> PathBuf {
        let mut name = format!("{}{}", rel.rel_number, fork.file_suffix());
        if segno > 0 {
            name.push('.');
            name.push_str(&segno.to_string());
        }
        self.rel_dir(rel).join(name)
    }

    /// Opens (through the cache) one segment. `None` if the file does not exist.
    fn segment(
        &self,
        rel: RelFileLocator,
        fork: Fork,
        segno: u32,
        mode: OpenMode,
    ) -> Result<Option<Arc<dyn VfsFile>>> {
        let key = (rel, fork, segno);
        if let Some(file) = self.files.get(&key) {
            return Ok(Some(file));
        }
        let path = self.segment_path(rel, fork, segno);
        match self.vfs.open(&path, mode) {
            Ok(file) => Ok(Some(self.files.insert(key, file))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::file("open", path, e)),
        }
    }

    /// Creates a fork (its segment 0, empty). Fails if it exists.
    pub fn create(&self, rel: RelFileLocator, fork: Fork) -> Result<()> {
        self.health.check()?;
        let dir = self.rel_dir(rel);
        create_dir_durable(&*self.vfs, &dir).map_err(|e| {
            // Its parent's fsync may be what failed: final, like any fsync failure.
            self.health.fail(Error::file("create directory", &dir, e))
        })?;
        let path = self.segment_path(rel, fork, 0);
        let file = match self.vfs.open(&path, OpenMode::CreateNew) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // A concurrent creator may not have recorded its size yet, and a probe that
                // ran before its file existed may have cached "missing": forget that.
                self.sizes.forget_missing(rel, fork);
                return Err(Error::RelationExists { rel, fork });
            }
            Err(e) => return Err(Error::file("create", path, e)),
        };
        self.files.insert((rel, fork, 0), file);
        self.sizes.set(rel, fork, 0);
        self.dirty_dirs.lock().insert(dir);
        Ok(())
    }

    /// Does the fork exist? No system call if its size is cached.
    pub fn exists(&self, rel: RelFileLocator, fork: Fork) -> Result<bool> {
        if self.cache_in_use() {
            // Through the cache, which remembers missing forks too.
            return match self.nblocks(rel, fork) {
                Ok(_) => Ok(true),
                Err(Error::NoSuchRelation { .. }) => Ok(false),
                Err(e) => Err(e),
            };
        }
        Ok(self.segment(rel, fork, 0, OpenMode::Existing)?.is_some())
    }

    /// The size of a fork in blocks.
    pub fn nblocks(&self, rel: RelFileLocator, fork: Fork) -> Result<BlockNumber> {
        if self.cache_in_use() {
            let n = if let Some(n) = self.sizes.get(rel, fork) {
                n
            } else {
                let probed = match self.probe_nblocks(rel, fork) {
                    Err(Error::NoSuchRelation { .. }) => relsize::MISSING,
                    other => other?,
                };
                self.sizes.insert_probed(rel, fork, probed);
                self.sizes.get(rel, fork).unwrap_or(probed)
            };
            if n == relsize::MISSING {
                return Err(Error::NoSuchRelation { rel, fork });
            }
            return Ok(n);
        }
        self.probe_nblocks(rel, fork)
    }

    /// Computes a fork's size from its files, as PostgreSQL's `mdnblocks`: every segment but
    /// the last is full.
    fn probe_nblocks(&self, rel: RelFileLocator, fork: Fork) -> Result<BlockNumber> {
        let seg_blocks = self.segment_size_blocks;
        // Bounded: a fork has at most MAX_BLOCKS / seg_blocks + 1 segments.
        let max_segments = MAX_BLOCKS / seg_blocks + 1;
        for segno in 0..=max_segments {
            let Some(file) = self.segment(rel, fork, segno, OpenMode::Existing)? else {
                if segno == 0 {
                    return Err(Error::NoSuchRelation { rel, fork });
                }
                // A missing next segment after a full one: the fork ends at the boundary.
                return Ok(segno * seg_blocks);
            };
            let path = || self.segment_path(rel, fork, segno);
            let size_bytes = file
                .size()
                .map_err(|e| Error::file("seek to end of", path(), e))?;
            let blocks = size_bytes / PAGE_SIZE as u64;
            if blocks < u64::from(seg_blocks) {
                return Ok(segno * seg_blocks + blocks as u32);
            }
            if blocks > u64::from(seg_blocks) {
                // PostgreSQL reports this too: a segment longer than a segment is corrupt.
                return Err(Error::file(
                    "size",
                    path(),
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "segment has {blocks} blocks, more than the segment size {seg_blocks}"
                        ),
                    ),
                ));
            }
        }
        Ok(MAX_BLOCKS)
    }

    fn locate(&self, block: BlockNumber) -> (u32, u64) {
        let segno = block / self.segment_size_blocks;
        let offset_bytes = u64::from(block % self.segment_size_blocks) * PAGE_SIZE as u64;
        (segno, offset_bytes)
    }

    /// The open file holding `block`, or an error naming the missing segment.
    fn file_for_block(
        &self,
        rel: RelFileLocator,
        fork: Fork,
        block: BlockNumber,
        mode: OpenMode,
    ) -> Result<(Arc<dyn VfsFile>, u64)> {
        let (segno, offset_bytes) = self.locate(block);
        match self.segment(rel, fork, segno, mode)? {
            Some(file) => Ok((file, offset_bytes)),
            None if segno == 0 => Err(Error::NoSuchRelation { rel, fork }),
            None => Err(Error::MissingSegment {
                rel,
                fork,
                block,
                segment: segno,
                path: self.segment_path(rel, fork, segno),
            }),
        }
    }

    /// Reads one block and verifies it. A short read (the block is beyond the end of the
    /// file) and a bad checksum are errors naming relation, fork and block.
    pub fn read(
        &self,
        rel: RelFileLocator,
        fork: Fork,
        block: BlockNumber,
        buf: &mut [u8; PAGE_SIZE],
    ) -> Result<()> {
        let (file, offset_bytes) = self.file_for_block(rel, fork, block, OpenMode::Existing)?;
        let read_bytes = file
            .read_at(buf, offset_bytes)
            .map_err(|source| Error::BlockIo {
                op: "read",
                rel,
                fork,
                block,
                source,
            })?;
        if read_bytes != PAGE_SIZE {
            return Err(Error::ShortRead {
                rel,
                fork,
                block,
                read_bytes,
                wanted_bytes: PAGE_SIZE,
            });
        }
        page::verify(buf, block).map_err(|reason| Error::CorruptPage {
            rel,
            fork,
            block,
            reason,
        })
    }

    /// Writes one existing block. The checksum is set on a private copy, so the caller's page
    /// (a shared buffer under a *shared* content lock) is never modified here.
    pub fn write(
        &self,
        rel: RelFileLocator,
        fork: Fork,
        block: BlockNumber,
        page_bytes: &[u8; PAGE_SIZE],
    ) -> Result<()> {
        self.health.check()?;
        let (file, offset_bytes) = self.file_for_block(rel, fork, block, OpenMode::Existing)?;
        write_page(&file, rel, fork, block, offset_bytes, page_bytes)?;
        self.register_sync(rel, fork, block / self.segment_size_blocks, &file)
    }

    /// The sync-request queue (the checkpointer fsyncs its requests).
    pub fn sync_queue(&self) -> &SyncQueue {
        &self.sync_queue
    }

    /// Files a request for the segment just written to be fsynced by the next checkpoint.
    fn register_sync(
        &self,
        rel: RelFileLocator,
        fork: Fork,
        segno: u32,
        file: &Arc<dyn VfsFile>,
    ) -> Result<()> {
        let target = SyncTarget::Segment { rel, fork, segno };
        self.sync_queue.register(target, || {
            file.sync_data()
                .map_err(|e| self.fsync_failed("fsync", self.segment_path(rel, fork, segno), e))
        })
    }

    /// Fsyncs every directory whose entries changed since its last fsync (the checkpointer
    /// calls this after the pending file requests). On an error the directories are still
    /// owed: an fsync failure has stopped the engine, a directory that could not be opened
    /// is tried again by the next checkpoint.
    pub fn sync_dirs(&self) -> Result<()> {
        let dirs = std::mem::take(&mut *self.dirty_dirs.lock());
        for dir in &dirs {
            if let Err(e) = self.vfs.sync_dir(dir) {
                if e.kind() == io::ErrorKind::NotFound {
                    continue;
                }
                // Put them back: they still need it (unless the engine has stopped).
                self.dirty_dirs.lock().extend(dirs.iter().cloned());
                return Err(self.fsync_failed("fsync directory", dir, e));
            }
        }
        Ok(())
    }

    /// Fsyncs every pending sync request once (a checkpoint's cycle,
    /// [`SyncQueue::begin_cycle`]); returns how many. On an error the requests not done stay
    /// pending: a failed fsync has stopped the engine, a file that could not be opened is
    /// fsynced by the next checkpoint.
    pub fn sync_pending(&self) -> Result<u64> {
        let cycle = self.sync_queue.begin_cycle();
        for &target in &cycle.targets {
            self.sync_target(target)?;
            self.sync_queue.synced(&cycle, target);
        }
        Ok(cycle.targets.len() as u64)
    }

    /// Fsyncs one pending sync request. A file removed since the request was filed is
    /// skipped (its relation was dropped; PostgreSQL tolerates ENOENT the same way). A file
    /// no longer cached is opened again; if that open fails the error is an ordinary one
    /// (nothing was fsynced, nothing lost) and the caller must keep the request. A failed
    /// fsync stops the engine.
    pub fn sync_target(&self, target: SyncTarget) -> Result<()> {
        let SyncTarget::Segment { rel, fork, segno } = target;
        let Some(file) = self.segment(rel, fork, segno, OpenMode::Existing)? else {
            return Ok(());
        };
        file.sync_data()
            .map_err(|e| self.fsync_failed("fsync", self.segment_path(rel, fork, segno), e))
    }
}

/// Refuses a fork of more than [`MAX_BLOCKS`] blocks (the last block number is kept free,
/// as PostgreSQL keeps `InvalidBlockNumber`).
fn check_extension_limit(rel: RelFileLocator, fork: Fork, nblocks: BlockNumber) -> Result<()> {
    if nblocks <= MAX_BLOCKS {
        return Ok(());
    }
    Err(Error::BlockIo {
        op: "extend",
        rel,
        fork,
        block: nblocks - 1,
        source: io::Error::other("cannot extend a fork beyond 2^32-2 blocks"),
    })
}

std::thread_local! {
    /// The private copy a page's checksum is set on before it is written (PostgreSQL's
    /// `pageCopy` in `PageSetChecksumCopy`): the buffer itself is only share-locked while it
    /// is written, so its bytes must not change. One per thread, allocated once, because an
    /// 8 KiB allocation and free per write showed in VACUUM's profile (seed 004 writes every
    /// page it evicts).
    static WRITE_COPY: std::cell::RefCell<Box<[u8; PAGE_SIZE]>> =
        std::cell::RefCell::new(Box::new([0; PAGE_SIZE]));
}

/// Writes one page at its place in a segment, with its checksum set on a private copy.
fn write_page(
    file: &Arc<dyn VfsFile>,
    rel: RelFileLocator,
    fork: Fork,
    block: BlockNumber,
    offset_bytes: u64,
    page_bytes: &[u8; PAGE_SIZE],
) -> Result<()> {
    let result = if is_all_zero(page_bytes) {
        // A new page stays all-zero on disk (no checksum), as PostgreSQL writes them.
        file.write_at(page_bytes, offset_bytes)
    } else {
        WRITE_COPY.with_borrow_mut(|copy| {
            copy.copy_from_slice(page_bytes);
            page::set_checksum(copy, block);
            file.write_at(&copy[..], offset_bytes)
        })
    };
    result.map_err(|source| Error::BlockIo {
        op: "write",
        rel,
        fork,
        block,
        source,
    })
}

impl Smgr {
    /// Appends one block (normally an all-zero page) and returns its number. Serialised per
    /// relation by the extension lock, so concurrent extenders get distinct blocks.
    pub fn extend(
        &self,
        rel: RelFileLocator,
        fork: Fork,
        page_bytes: &[u8; PAGE_SIZE],
    ) -> Result<BlockNumber> {
        self.health.check()?;
        let stripe = (hash_one(&rel) as usize) % EXTENSION_LOCK_STRIPES;
        let _extension_lock = self.extension_locks[stripe].lock();
        let block = self.nblocks(rel, fork)?;
        check_extension_limit(rel, fork, block + 1)?;
        if block > 0 && block.is_multiple_of(self.segment_size_blocks) {
            // A new segment file: its name must be made durable with its data.
            self.dirty_dirs.lock().insert(self.rel_dir(rel));
        }
        let (file, offset_bytes) =
            self.file_for_block(rel, fork, block, OpenMode::CreateIfMissing)?;
        write_page(&file, rel, fork, block, offset_bytes, page_bytes)?;
        self.sizes.set(rel, fork, block + 1);
        self.register_sync(rel, fork, block / self.segment_size_blocks, &file)?;
        Ok(block)
    }

    /// Extends a fork with all-zero blocks to `nblocks` blocks (PostgreSQL's
    /// `smgrzeroextend`), for redo, which then overwrites the blocks it needs. Within the
    /// last segment the file just grows (`set_len`): no page is written, and the new blocks
    /// read as zeros. Across a segment boundary it extends page by page, so that each new
    /// segment is created as [`Smgr::extend`] creates it.
    pub fn zero_extend(
        &self,
        rel: RelFileLocator,
        fork: Fork,
        nblocks: BlockNumber,
    ) -> Result<()> {
        self.health.check()?;
        check_extension_limit(rel, fork, nblocks)?;
        loop {
            let old = self.nblocks(rel, fork)?;
            if old >= nblocks {
                return Ok(());
            }
            let (segno, _) = self.locate(old);
            let in_last_segment = (old == 0 || !old.is_multiple_of(self.segment_size_blocks))
                && (nblocks - 1) / self.segment_size_blocks == segno;
            if !in_last_segment {
                self.extend(rel, fork, &[0u8; PAGE_SIZE])?;
                continue;
            }
            let stripe = (hash_one(&rel) as usize) % EXTENSION_LOCK_STRIPES;
            let _extension_lock = self.extension_locks[stripe].lock();
            if self.nblocks(rel, fork)? != old {
                continue; // another extender came first: look again
            }
            let (file, _) = self.file_for_block(rel, fork, old, OpenMode::CreateIfMissing)?;
            let end_bytes = u64::from(nblocks - segno * self.segment_size_blocks) * PAGE_SIZE as u64;
            file.set_len(end_bytes).map_err(|source| Error::BlockIo {
                op: "extend",
                rel,
                fork,
                block: old,
                source,
            })?;
            self.sizes.set(rel, fork, nblocks);
            self.register_sync(rel, fork, segno, &file)?;
            return Ok(());
        }
    }

    /// Cuts a fork to `nblocks` blocks. The caller holds the relation exclusively and has
    /// dropped the buffers at and beyond `nblocks`. Segments are cut from the last to the
    /// first, so a crash part-way leaves a shorter prefix, never a hole.
    pub fn truncate(&self, rel: RelFileLocator, fork: Fork, nblocks: BlockNumber) -> Result<()> {
        self.health.check()?;
        let old = self.nblocks(rel, fork)?;
        if nblocks >= old {
            return Ok(());
        }
        let seg_blocks = self.segment_size_blocks;
        let last_old_seg = (old - 1) / seg_blocks;
        for segno in (0..=last_old_seg).rev() {
            let seg_start = segno * seg_blocks;
            if seg_start >= nblocks && segno > 0 {
                self.sync_queue.forget_segments(rel, fork, segno);
                self.remove_segment(rel, fork, segno)?;
                continue;
            }
            let keep_blocks = nblocks - seg_start;
            if keep_blocks < seg_blocks {
                let Some(file) = self.segment(rel, fork, segno, OpenMode::Existing)? else {
                    continue;
                };
                let size_bytes = u64::from(keep_blocks) * PAGE_SIZE as u64;
                file.set_len(size_bytes).map_err(|source| Error::BlockIo {
                    op: "truncate to",
                    rel,
                    fork,
                    block: nblocks,
                    source,
                })?;
                self.register_sync(rel, fork, segno, &file)?;
            }
            break;
        }
        self.sizes.set(rel, fork, nblocks);
        Ok(())
    }

    fn remove_segment(&self, rel: RelFileLocator, fork: Fork, segno: u32) -> Result<()> {
        self.files.remove(&(rel, fork, segno));
        self.dirty_dirs.lock().insert(self.rel_dir(rel));
        let path = self.segment_path(rel, fork, segno);
        match self.vfs.remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::file("remove", path, e)),
        }
    }

    /// Removes every fork of a relation. The caller holds it exclusively and has dropped its
    /// buffers. Missing forks are skipped.
    pub fn unlink(&self, rel: RelFileLocator) -> Result<()> {
        self.health.check()?;
        // Cancelled first: a deleted file is never fsynced.
        self.sync_queue.forget_relation(rel);
        for fork in Fork::ALL {
            let nblocks = match self.nblocks(rel, fork) {
                Ok(n) => n,
                Err(Error::NoSuchRelation { .. }) => {
                    self.sizes.remove(rel, fork);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let segments = nblocks / self.segment_size_blocks + 1;
            for segno in (0..segments).rev() {
                self.remove_segment(rel, fork, segno)?;
            }
            self.sizes.remove(rel, fork);
        }
        Ok(())
    }

    /// Makes a fork's data durable: fsyncs each of its segments, then its directory (so the
    /// segment names survive too).
    pub fn sync(&self, rel: RelFileLocator, fork: Fork) -> Result<()> {
        let nblocks = self.nblocks(rel, fork)?;
        let segments = nblocks.saturating_sub(1) / self.segment_size_blocks + 1;
        for segno in 0..segments {
            let path = || self.segment_path(rel, fork, segno);
            let Some(file) = self.segment(rel, fork, segno, OpenMode::Existing)? else {
                return Err(Error::MissingSegment {
                    rel,
                    fork,
                    block: segno * self.segment_size_blocks,
                    segment: segno,
                    path: path(),
                });
            };
            file.sync_data()
                .map_err(|e| self.fsync_failed("fsync", path(), e))?;
        }
        let dir = self.rel_dir(rel);
        self.vfs
            .sync_dir(&dir)
            .map_err(|e| self.fsync_failed("fsync directory", dir, e))
    }

    /// Checks, at startup, that no fork has a hole: a segment missing below one that exists.
    /// Truncation and unlink remove segments from the last one down and extension adds them
    /// in order, so a hole is never a crash's doing; it is a lost file, and the blocks past
    /// it would silently vanish from the fork's size (which ends at the first missing
    /// segment). Names that are not segment files are ignored.
    pub fn check_segments(&self) -> Result<()> {
        let list = |dir: &Path| {
            self.vfs
                .list_dir(dir)
                .map_err(|e| Error::file("list directory", dir, e))
        };
        for db in list(&self.base_dir)? {
            let Some(db_oid) = db.to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let db_dir = self.base_dir.join(&db);
            let mut segments: std::collections::BTreeMap<(u64, Fork), Vec<u32>> =
                std::collections::BTreeMap::new();
            for name in list(&db_dir)? {
                if let Some((rel_number, fork, segno)) = name.to_str().and_then(parse_segment_name)
                {
                    segments.entry((rel_number, fork)).or_default().push(segno);
                }
            }
            for ((rel_number, fork), mut segnos) in segments {
                segnos.sort_unstable();
                let hole = segnos.iter().zip(0u32..).find(|(segno, want)| **segno != *want);
                if let Some((_, missing)) = hole {
                    let rel = RelFileLocator::new(db_oid, rel_number);
                    return Err(Error::MissingSegment {
                        rel,
                        fork,
                        block: missing * self.segment_size_blocks,
                        segment: missing,
                        path: self.segment_path(rel, fork, missing),
                    });
                }
            }
        }
        Ok(())
    }

    /// How many segment files are open (bounded by `max_files_per_process`).
    pub fn open_files(&self) -> usize {
        self.files.open_count()
    }
}

/// `<rel_number>[_fsm|_vm][.<segno>]`, as [`Smgr::segment_path`] names a segment file.
fn parse_segment_name(name: &str) -> Option<(u64, Fork, u32)> {
    let (stem, segno) = match name.split_once('.') {
        Some((stem, seg)) => (stem, seg.parse::<u32>().ok().filter(|&s| s > 0)?),
        None => (name, 0),
    };
    let (number, fork) = Fork::ALL
        .iter()
        .rev()
        .find_map(|&fork| {
            let number = stem.strip_suffix(fork.file_suffix())?;
            Some((number, fork))
        })?;
    let number = number.parse::<u64>().ok()?;
    Some((number, fork, segno))
}

fn is_all_zero(bytes: &[u8]) -> bool {
    // The compiler vectorises this; it runs once per page write.
    bytes.iter().all(|b| *b == 0)
}

#[cfg(test)]
mod tests;
