//! # SimVfs — an in-memory file system that loses power on demand
//!
//! A deterministic simulation of a POSIX file system for crash tests. For every file it keeps
//! both what reads see (the page cache) and what is on the disk, and [`SimVfs::crash`] throws
//! the first away. It enforces the durability rules of the [`vfs`](super) module header and
//! nothing more, so code that is correct on it does not rely on luck.
//!
//! ## What is durable when
//! - **File data.** Each file (an *inode*) has `data` (what reads see), `durable` (what a power
//!   loss leaves) and an ordered log of the writes and `set_len`s since its last fsync.
//!   `sync_data` and `sync_all` apply the log to `durable` and clear it; nothing else makes
//!   data durable. The two are the same here: the size is treated as data, and no other
//!   metadata is modelled.
//! - **Names.** The namespace (path → inode) exists twice: `current` (what `open`, `exists`
//!   and `list_dir` see) and `durable`. Creating a file, `remove_file` and `rename` change only
//!   `current`. `sync_dir(dir)` makes the `durable` entries whose parent is `dir` equal to the
//!   `current` ones (adds, replaces, removes). An fsync of a file does not make its name
//!   durable, and a rename across directories needs both parents synced.
//! - **Directories** are names too: one `create_dir_all` makes is durable once its parent is
//!   synced, and lost at a crash until then, with everything under it. They are never
//!   removed (a simplification: quire creates its directories once and the API cannot remove
//!   them). So that a crash cannot resurrect a file where a directory now is,
//!   `create_dir_all` also refuses a path that is still a file in the durable namespace.
//! - **Crash.** The namespace becomes the durable one, plus an in-order prefix of the
//!   directory changes (creates, unlinks, renames, mkdirs) not yet synced: each survives with
//!   the probability of [`CrashOptions::keep_unsynced_probability`] while every earlier one
//!   did, as a journaling file system commits them in order; the others are lost (counted
//!   as [`Fault::LostNameChange`]). An entry whose directory is gone goes too; files
//!   reachable by no name are gone. Each remaining file restarts from `durable`, then each
//!   logged operation survives with that probability, and a surviving write may be torn
//!   into a random subset of its 512-byte sectors (sectors aligned to file offsets). Handles
//!   opened before the crash fail with "file system crashed" on every call; directory locks
//!   are kept (they belong to the test process, which lives on).
//! - **Failed fsync** ([`SimVfs::fail_next_fsync`], [`Fault::FsyncIo`]): returns EIO and
//!   discards the log, as Linux drops dirty pages after a writeback error: those writes stay
//!   readable until a crash but never become durable, even if a later fsync succeeds.
//! - **Other faults** ([`SimVfs::inject`] arms one, [`SimVfs::set_fault_rate`] sets a rate;
//!   [`SimVfs::faults_injected`] counts them): ENOSPC or EIO on a write inside the file or
//!   on an extension (a write past the end, a growing `set_len`), nothing written; a short
//!   write (a prefix written, then ENOSPC); EIO on read; EIO or EMFILE on open. Bit flips
//!   ([`SimVfs::flip_bit`], [`SimVfs::flip_random_bit`]) change the disk and the cache.
//! - **Power cut at the Nth operation** ([`SimVfs::cut_power_after`]): the next N counted
//!   operations run, every later one fails, until `crash` restores the power.
//! - **Unlink or rename-over while open**: the inode lives on through its open handles (unix
//!   semantics) and is freed once no handle and no current or durable name refers to it.
//!
//! ## Determinism
//! Randomness comes from the project's one generator ([`crate::rng`], SplitMix64) seeded by
//! [`SimVfs::new`]: one stream for `crash`, which visits files in creation order, and one
//! for injected faults (drawn only when a rate applies): the same seed and the same
//! sequence of operations give the same faults and the same crash result. (With several threads, the
//! sequence is whatever order the threads produced.)
//!
//! ## Counting
//! Exactly as [`OsVfs`](super::OsVfs): `open`, handle drop (close), `read_at`, `write_at`,
//! `size`, `set_len` (truncate), `sync_*` (fsync), `remove_file` (unlink), `rename` and
//! `sync_dir` (dir sync) are counted before they run, so failed calls count too; `exists`,
//! `create_dir_all`, `list_dir` and `lock_dir` are not counted. A latency set with
//! [`SimVfs::set_latency`] is slept inside the call, before the file system lock is taken,
//! so that slow fsyncs on different threads overlap as they would on a real device.
//!
//! ## Where it differs from the operating system
//! - Paths are normalised lexically (`.` dropped, `..` pops a component; there are no
//!   symlinks). Relative paths form their own tree rooted at the empty path: do not name one
//!   file both ways.
//! - `sync_dir` on a file fails with `NotADirectory`; directories cannot be renamed.
//! - No owners, no permission bits, no descriptors: `ownership` reports none (so the data
//!   directory's permission check has nothing to refuse, and `restrict_dir_to_owner` nothing
//!   to set), and a file held open costs
//!   nothing; EMFILE comes only from [`Fault::TooManyFiles`].
//! - A file cannot grow past [`MAX_FILE_SIZE_BYTES`] (`FileTooLarge`), so that a wild offset
//!   is an error rather than an aborting allocation.
//! - Like `OsVfs`, `lock_dir` creates an empty `quire.lock` in the directory (never synced).
//! - Memory: every unsynced write is kept in the log until the next fsync or crash.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::fault::{Fault, FaultCounts, Faults};
use super::{is_direct_aligned, DirLock, OpCounters, OpKind, OpenMode, Ownership, Vfs, VfsFile};
use crate::rng::SplitMix64;

/// The unit a torn write is torn into: a disk sector, the unit a disk writes atomically.
const SECTOR_SIZE_BYTES: usize = 512;

/// The largest file the simulator holds. Far above what tests write; it bounds memory so that
/// a wild offset fails instead of aborting on a huge allocation.
pub const MAX_FILE_SIZE_BYTES: u64 = 1 << 32;

/// The file `lock_dir` creates, named as `OsVfs` names it.
const LOCK_FILE_NAME: &str = "quire.lock";

/// How a crash treats the writes that were not yet fsynced.
#[derive(Clone, Debug, Default)]
pub struct CrashOptions {
    /// Probability (0.0..=1.0) that each unsynced write survives the crash anyway (the kernel
    /// happened to write it back). 0.0 = only durable state survives.
    pub keep_unsynced_probability: f64,
    /// When an unsynced write survives, tear it: only a random subset of its 512-byte sectors
    /// reach the disk.
    pub tear_writes: bool,
}

/// The simulated file system. `Send + Sync`; share it as `Arc<SimVfs>`.
pub struct SimVfs {
    shared: Arc<Shared>,
}

/// What the file system, its open files and its directory locks share.
struct Shared {
    state: Mutex<State>,
    counters: OpCounters,
    /// Per [`OpKind`] (indexed as in `OpKind::ALL`), nanoseconds to sleep; atomics so that the
    /// hot path reads them without a lock.
    latency_nanos: [AtomicU64; OpKind::ALL.len()],
    /// Directories locked by a live [`SimDirLock`].
    dir_locks: Mutex<BTreeSet<PathBuf>>,
    /// Counted operations left before the power cut ([`NO_CUT`]: none planned).
    ops_until_cut: AtomicU64,
}

type InodeId = u64;

struct State {
    rng: SplitMix64,
    /// Bumped by every crash; a handle from an older epoch is dead.
    epoch: u64,
    /// Never reused, so a dead handle can never reach a newer inode.
    next_inode: InodeId,
    /// Existing directories, except the roots (`/` and the empty path), which always exist.
    dirs: BTreeSet<PathBuf>,
    /// The directories a crash leaves: those whose parent was fsynced after their creation.
    durable_dirs: BTreeSet<PathBuf>,
    current: Names,
    durable: Names,
    /// The directory changes not yet made durable, in the order they were made; each entry
    /// is one operation (a rename is two changes that survive or go together).
    name_log: Vec<Vec<NameChange>>,
    /// Ordered by id, i.e. by creation, which makes crashes deterministic.
    inodes: BTreeMap<InodeId, Inode>,
    faults: Faults,
    /// Armed by [`SimVfs::fail_next_write`]: the next `write_at` on a matching path fails
    /// with EIO whether or not it extends the file (the WAL tests' exact failure).
    write_failures: Vec<Option<String>>,
}

/// One change to a directory's entries.
enum NameChange {
    /// `path` now names the inode (`Some`) or nothing (`None`).
    File(PathBuf, Option<InodeId>),
    /// A directory was created at the path.
    Dir(PathBuf),
}

impl NameChange {
    fn path(&self) -> &Path {
        match self {
            NameChange::File(path, _) | NameChange::Dir(path) => path,
        }
    }
}

/// A directory tree's names: path → inode, with each inode's link count kept alongside, so
/// that "does any name still lead to this inode?" costs O(1), not a scan of every name (which
/// made a workload of thousands of files quadratic).
#[derive(Clone, Default)]
struct Names {
    map: BTreeMap<PathBuf, InodeId>,
    links: HashMap<InodeId, usize>,
}

impl Names {
    fn insert(&mut self, path: PathBuf, id: InodeId) -> Option<InodeId> {
        *self.links.entry(id).or_default() += 1;
        let old = self.map.insert(path, id);
        if let Some(o) = old {
            self.unlink(o);
        }
        old
    }

    fn remove(&mut self, path: &Path) -> Option<InodeId> {
        let old = self.map.remove(path);
        if let Some(o) = old {
            self.unlink(o);
        }
        old
    }

    fn retain(&mut self, mut keep: impl FnMut(&PathBuf, &mut InodeId) -> bool) {
        let links = &mut self.links;
        self.map.retain(|name, id| {
            let kept = keep(name, id);
            if !kept {
                if let Some(n) = links.get_mut(id) {
                    *n -= 1;
                    if *n == 0 {
                        links.remove(id);
                    }
                }
            }
            kept
        });
    }

    fn unlink(&mut self, id: InodeId) {
        if let Some(n) = self.links.get_mut(&id) {
            *n -= 1;
            if *n == 0 {
                self.links.remove(&id);
            }
        }
    }

    fn links_to(&self, id: InodeId) -> bool {
        self.links.contains_key(&id)
    }
}

impl std::ops::Deref for Names {
    type Target = BTreeMap<PathBuf, InodeId>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

/// A file's bytes: stored up to `data.len()`, zeros from there to `len` — a sparse tail, as
/// a file system leaves when `set_len` grows a file without writing (a new 16 MB WAL segment
/// costs no memory until written, as on disk it costs no blocks). Invariant: `data.len() <= len`.
#[derive(Clone, Debug, Default)]
struct FileBytes {
    data: Vec<u8>,
    len: usize,
}

impl FileBytes {
    fn len(&self) -> usize {
        self.len
    }

    fn set_len(&mut self, len: usize) {
        self.data.truncate(len);
        self.len = len;
    }

    /// pwrite: copies `bytes` at `offset`; any gap past the end reads as zeros.
    fn write(&mut self, offset: usize, bytes: &[u8]) {
        let end = offset + bytes.len();
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        self.data[offset..end].copy_from_slice(bytes);
        self.len = self.len.max(end);
        debug_assert!(
            self.data.len() <= self.len,
            "stored bytes past the file's end"
        );
    }

    /// pread: fills `buf` from `offset`; returns how many bytes the file had there.
    fn read(&self, offset: usize, buf: &mut [u8]) -> usize {
        if offset >= self.len {
            return 0;
        }
        let n = buf.len().min(self.len - offset);
        // Bytes past `data.len()` (but within `len`) were never written: zeros.
        let stored = self.data.len().saturating_sub(offset).min(n);
        if stored > 0 {
            buf[..stored].copy_from_slice(&self.data[offset..offset + stored]);
        }
        buf[stored..n].fill(0);
        n
    }

    /// The byte at `offset`, made concrete; `None` past the end.
    fn byte_mut(&mut self, offset: usize) -> Option<&mut u8> {
        if offset >= self.len {
            return None;
        }
        if self.data.len() <= offset {
            self.data.resize(offset + 1, 0);
        }
        self.data.get_mut(offset)
    }

    fn to_vec(&self) -> Vec<u8> {
        let mut v = self.data.clone();
        v.resize(self.len, 0);
        v
    }
}

#[derive(Default)]
struct Inode {
    /// What reads see.
    data: FileBytes,
    /// What is on the disk.
    durable: FileBytes,
    /// Operations since the last fsync, in order. Outside failed fsyncs,
    /// `data == durable + unsynced`.
    unsynced: Vec<PendingOp>,
    /// Handles opened since the last crash and not dropped.
    open_handles: usize,
}

enum PendingOp {
    Write { offset: usize, bytes: Vec<u8> },
    SetLen(usize),
}

impl SimVfs {
    /// An empty file system whose crashes are drawn from `seed`.
    pub fn new(seed: u64) -> Self {
        SimVfs {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    rng: SplitMix64::new(seed),
                    epoch: 0,
                    next_inode: 1,
                    dirs: BTreeSet::new(),
                    durable_dirs: BTreeSet::new(),
                    current: Names::default(),
                    durable: Names::default(),
                    name_log: Vec::new(),
                    inodes: BTreeMap::new(),
                    faults: Faults::new(seed),
                    write_failures: Vec::new(),
                }),
                counters: OpCounters::default(),
                latency_nanos: std::array::from_fn(|_| AtomicU64::new(0)),
                dir_locks: Mutex::new(BTreeSet::new()),
                ops_until_cut: AtomicU64::new(NO_CUT),
            }),
        }
    }

    /// Power loss: every file and directory entry reverts to its durable state, then
    /// (per options) some unsynced writes survive. Handles opened before the crash return an
    /// io::Error (kind Other, message says "file system crashed") on every later call.
    pub fn crash(&self, options: &CrashOptions) {
        let keep_probability = if options.keep_unsynced_probability.is_nan() {
            0.0
        } else {
            options.keep_unsynced_probability.clamp(0.0, 1.0)
        };
        let mut guard = self.shared.state.lock();
        let state = &mut *guard;
        state.epoch += 1;
        self.shared.ops_until_cut.store(NO_CUT, Ordering::Release);
        state.replay_names_at_crash(keep_probability);
        let reachable: BTreeSet<InodeId> = state.durable.values().copied().collect();
        state.inodes.retain(|id, _| reachable.contains(id));
        for inode in state.inodes.values_mut() {
            let mut image = std::mem::take(&mut inode.durable);
            for op in inode.unsynced.drain(..) {
                if !state.rng.chance(keep_probability) {
                    continue;
                }
                match op {
                    PendingOp::SetLen(size_bytes) => image.set_len(size_bytes),
                    PendingOp::Write { offset, bytes } if options.tear_writes => {
                        apply_torn_write(&mut image, offset, &bytes, &mut state.rng);
                    }
                    PendingOp::Write { offset, bytes } => apply_write(&mut image, offset, &bytes),
                }
            }
            inode.data.clone_from(&image);
            inode.durable = image;
            inode.open_handles = 0;
        }
    }

    /// The next fsync (sync_data or sync_all) on a file whose path contains `path_contains`
    /// (any file if None) fails with EIO (io::Error::from_raw_os_error(5)) and, as Linux does,
    /// drops that file's dirty (unsynced) writes: they never become durable, though reads keep
    /// seeing them until a crash (the page cache still holds them). Later fsyncs succeed.
    /// A `sync_dir` of a matching directory takes it too (nothing of it becomes durable).
    ///
    /// The path matched is the one the handle was opened with. Each call arms one failure.
    pub fn fail_next_fsync(&self, path_contains: Option<&str>) {
        self.inject(Fault::FsyncIo, path_contains);
    }

    /// Arms one fault: the next operation of its kind on a path containing `path_contains`
    /// (any path if None) fails as [`Fault`] describes. Each call arms one failure.
    /// [`Fault::BitFlip`] and [`Fault::LostNameChange`] are not armed this way.
    pub fn inject(&self, fault: Fault, path_contains: Option<&str>) {
        assert!(
            !matches!(fault, Fault::BitFlip | Fault::LostNameChange),
            "{} is not an operation's failure",
            fault.name()
        );
        self.shared.state.lock().faults.arm(fault, path_contains);
    }

    /// From now on, each operation of `fault`'s kind on a path containing `path_contains`
    /// (any path if None) fails with `probability`, drawn from the seed; 0.0 stops it.
    pub fn set_fault_rate(&self, fault: Fault, probability: f64, path_contains: Option<&str>) {
        assert!(
            !matches!(fault, Fault::BitFlip | Fault::LostNameChange),
            "{} is not an operation's failure",
            fault.name()
        );
        self.shared
            .state
            .lock()
            .faults
            .set_rate(fault, probability, path_contains);
    }

    /// How many faults of each kind were injected so far.
    pub fn faults_injected(&self) -> FaultCounts {
        self.shared.state.lock().faults.counts()
    }

    /// Flips one bit, chosen from the seed, of a non-empty file (see [`SimVfs::flip_bit`]);
    /// returns the byte offset and the bit.
    pub fn flip_random_bit(&self, path: &Path) -> io::Result<(u64, u8)> {
        let (offset, bit) = {
            let mut state = self.shared.state.lock();
            let size = state
                .current
                .get(&normalize(path))
                .and_then(|id| state.inodes.get(id))
                .map_or(0, |inode| inode.data.len() as u64);
            if size == 0 {
                return Err(path_error(
                    io::ErrorKind::InvalidInput,
                    "no such file, or an empty one",
                    path,
                ));
            }
            let offset = state.faults.below(size);
            (offset, state.faults.below(8) as u8)
        };
        self.flip_bit(path, offset, bit)?;
        Ok((offset, bit))
    }

    /// The next `write_at` on a file whose path contains `path_contains` (any file if None)
    /// fails with EIO and writes nothing; later writes succeed. Each call arms one failure.
    pub fn fail_next_write(&self, path_contains: Option<&str>) {
        self.shared
            .state
            .lock()
            .write_failures
            .push(path_contains.map(str::to_owned));
    }

    /// Flips one bit in both the current and the durable contents of a file (simulated media
    /// corruption). The bit is also flipped in pending unsynced writes covering that byte, so
    /// that a later fsync does not silently repair the durable copy.
    pub fn flip_bit(&self, path: &Path, byte_offset: u64, bit: u8) -> io::Result<()> {
        if bit >= 8 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bit {bit} is not in 0..8"),
            ));
        }
        let path = normalize(path);
        let mut guard = self.shared.state.lock();
        let state = &mut *guard;
        let id = *state
            .current
            .get(&path)
            .ok_or_else(|| path_error(io::ErrorKind::NotFound, "no such file", &path))?;
        let inode = state
            .inodes
            .get_mut(&id)
            .expect("every current name refers to a live inode");
        let offset = usize::try_from(byte_offset)
            .ok()
            .filter(|&offset| offset < inode.data.len())
            .ok_or_else(|| {
                path_error(
                    io::ErrorKind::InvalidInput,
                    &format!("byte {byte_offset} is past the end of the file"),
                    &path,
                )
            })?;
        let mask = 1u8 << bit;
        state.faults.count(Fault::BitFlip, 1);
        if let Some(byte) = inode.data.byte_mut(offset) {
            *byte ^= mask;
        }
        if let Some(byte) = inode.durable.byte_mut(offset) {
            *byte ^= mask;
        }
        for op in &mut inode.unsynced {
            if let PendingOp::Write {
                offset: start,
                bytes,
            } = op
            {
                if let Some(byte) = offset
                    .checked_sub(*start)
                    .and_then(|index| bytes.get_mut(index))
                {
                    *byte ^= mask;
                }
            }
        }
        Ok(())
    }

    /// Cuts the power after `ops` more counted operations (every kind [`OpKind`] lists): they
    /// run, and every operation after them fails (an `io::Error` saying "power lost"), as a
    /// machine that stopped does nothing more; so does `create_dir_all`. The test then calls
    /// [`SimVfs::crash`], which restores the power. With a sweep over `ops`, a crash lands at
    /// every point of a workload: inside a checkpoint, a commit, a truncation (SQLite's crash
    /// tests stop at every sync the same way).
    pub fn cut_power_after(&self, ops: u64) {
        self.shared.ops_until_cut.store(ops, Ordering::Release);
    }

    /// Adds a sleep of `latency` to every operation of `kind` (e.g. OpKind::Fsync, 2.5 ms).
    /// `Duration::ZERO` removes it.
    pub fn set_latency(&self, kind: OpKind, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.shared.latency_nanos[kind_index(kind)].store(nanos, Ordering::Relaxed);
    }

    /// The current (page-cache view) contents of a file, for tests; None if there is no such
    /// file.
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.shared.state.lock();
        let id = state.current.get(&normalize(path))?;
        state.inodes.get(id).map(|inode| inode.data.to_vec())
    }

    /// The durable contents of a file (what a crash with default options would leave), for
    /// tests: looked up by its durable name; None if a crash would leave no such file.
    pub fn durable_contents(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.shared.state.lock();
        let id = state.durable.get(&normalize(path))?;
        state.inodes.get(id).map(|inode| inode.durable.to_vec())
    }
}

impl fmt::Debug for SimVfs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("SimVfs");
        // try_lock: Debug must not block (or deadlock) behind a running operation.
        if let Some(state) = self.shared.state.try_lock() {
            s.field("files", &state.current.len())
                .field("durable_files", &state.durable.len())
                .field("crashes", &state.epoch);
        }
        s.finish_non_exhaustive()
    }
}

impl Shared {
    /// Counts an operation and sleeps its configured latency; fails it once the power is
    /// cut ([`SimVfs::cut_power_after`]).
    fn begin(&self, kind: OpKind) -> io::Result<()> {
        self.counters.bump(kind);
        self.powered()?;
        let nanos = self.latency_nanos[kind_index(kind)].load(Ordering::Relaxed);
        if nanos > 0 {
            std::thread::sleep(Duration::from_nanos(nanos));
        }
        Ok(())
    }

    /// Takes one operation from the budget left before the power cut; fails once it is spent.
    fn powered(&self) -> io::Result<()> {
        let taken = self
            .ops_until_cut
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                (left != NO_CUT && left > 0).then(|| left - 1)
            });
        match taken {
            Err(0) => Err(power_lost_error()),
            _ => Ok(()),
        }
    }

    fn power_is_cut(&self) -> bool {
        self.ops_until_cut.load(Ordering::Acquire) == 0
    }
}

/// `ops_until_cut` when no power cut is planned.
const NO_CUT: u64 = u64::MAX;

fn power_lost_error() -> io::Error {
    io::Error::other("power lost (SimVfs::cut_power_after): the file system does nothing more")
}

impl State {
    fn is_dir(&self, path: &Path) -> bool {
        // Only the roots (`/` and the empty relative root) have no parent.
        path.parent().is_none() || self.dirs.contains(path)
    }

    /// Checks that a directory exists at `path`.
    fn check_dir(&self, path: &Path) -> io::Result<()> {
        if self.is_dir(path) {
            Ok(())
        } else if self.current.contains_key(path) {
            Err(path_error(
                io::ErrorKind::NotADirectory,
                "not a directory",
                path,
            ))
        } else {
            Err(path_error(
                io::ErrorKind::NotFound,
                "no such directory",
                path,
            ))
        }
    }

    /// Checks that a file could be created at `path`: its parent is an existing directory.
    fn check_parent(&self, path: &Path) -> io::Result<()> {
        match path.parent() {
            Some(parent) => self.check_dir(parent),
            None => Err(path_error(
                io::ErrorKind::IsADirectory,
                "is a directory",
                path,
            )),
        }
    }

    /// Creates an empty file under a new current name (not durable until its parent's sync).
    fn create_file(&mut self, path: PathBuf) -> InodeId {
        let id = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(id, Inode::default());
        self.name_log
            .push(vec![NameChange::File(path.clone(), Some(id))]);
        self.current.insert(path, id);
        id
    }

    /// At a crash: the namespace becomes the durable one plus an in-order prefix of the
    /// directory changes not yet synced, each surviving with `keep_probability` while the
    /// ones before it did (a file system journals them in order). A change naming an inode
    /// that no longer exists (created, removed and closed) is skipped. Then every entry whose
    /// directory did not survive goes too.
    fn replay_names_at_crash(&mut self, keep_probability: f64) {
        let mut names = self.durable.clone();
        let mut dirs = self.durable_dirs.clone();
        let log = std::mem::take(&mut self.name_log);
        let mut kept = 0;
        for op in &log {
            if keep_probability <= 0.0 || !self.rng.chance(keep_probability) {
                break;
            }
            kept += 1;
            for change in op {
                match change {
                    NameChange::File(path, Some(id)) if self.inodes.contains_key(id) => {
                        names.insert(path.clone(), *id);
                    }
                    NameChange::File(path, _) => {
                        names.remove(path);
                    }
                    NameChange::Dir(path) => {
                        dirs.insert(path.clone());
                    }
                }
            }
        }
        self.faults
            .count(Fault::LostNameChange, (log.len() - kept) as u64);
        // Sorted, so a parent comes before its children: one pass drops whole subtrees.
        let mut surviving_dirs = BTreeSet::new();
        for dir in dirs {
            let parent_kept = dir
                .parent()
                .is_none_or(|p| p.parent().is_none() || surviving_dirs.contains(p));
            if parent_kept {
                surviving_dirs.insert(dir);
            }
        }
        names.retain(|path, _| {
            path.parent()
                .is_some_and(|p| p.parent().is_none() || surviving_dirs.contains(p))
        });
        self.dirs.clone_from(&surviving_dirs);
        self.durable_dirs = surviving_dirs;
        self.current = names.clone();
        self.durable = names;
    }

    /// Does the fault strike this operation on `path`?
    fn fault(&mut self, fault: Fault, path: &Path) -> bool {
        self.faults.hit(fault, path)
    }

    /// Frees an inode once nothing can reach it any more: no handle and no name, current or
    /// durable (a durable name would bring it back at a crash).
    fn release_if_unused(&mut self, id: InodeId) {
        let open = self
            .inodes
            .get(&id)
            .is_some_and(|inode| inode.open_handles > 0);
        if !open && !self.current.links_to(id) && !self.durable.links_to(id) {
            self.inodes.remove(&id);
        }
    }
}

/// An open simulated file.
struct SimFile {
    shared: Arc<Shared>,
    inode: InodeId,
    /// The crash epoch it was opened in; it dies with that epoch.
    epoch: u64,
    /// As opened; what [`SimVfs::fail_next_fsync`] matches.
    path: PathBuf,
    /// Opened for direct I/O: a write not aligned to [`DIRECT_IO_ALIGN`] fails with
    /// `EINVAL`, as Linux fails it, so tests catch one the real file system would refuse.
    direct: bool,
}

impl SimFile {
    /// Runs `f` on this file's inode, under the file system lock.
    fn with_inode<R>(&self, f: impl FnOnce(&mut Inode) -> io::Result<R>) -> io::Result<R> {
        self.with_faults(|_, inode| f(inode))
    }

    /// Runs `f` on the fault state and this file's inode, under the file system lock.
    fn with_faults<R>(
        &self,
        f: impl FnOnce(&mut Faults, &mut Inode) -> io::Result<R>,
    ) -> io::Result<R> {
        let mut guard = self.shared.state.lock();
        if guard.epoch != self.epoch {
            return Err(crashed_error(&self.path));
        }
        let state = &mut *guard;
        let inode = state
            .inodes
            .get_mut(&self.inode)
            .expect("an open handle keeps its inode alive until a crash");
        f(&mut state.faults, inode)
    }

    fn sync(&self) -> io::Result<()> {
        self.shared.begin(OpKind::Fsync)?;
        let mut guard = self.shared.state.lock();
        if guard.epoch != self.epoch {
            return Err(crashed_error(&self.path));
        }
        let state = &mut *guard;
        let inode = state
            .inodes
            .get_mut(&self.inode)
            .expect("an open handle keeps its inode alive until a crash");
        if state.faults.hit(Fault::FsyncIo, &self.path) {
            // Writeback failed: the dirty pages are dropped from the log (never durable) but
            // stay in `data`, as Linux keeps serving them from the page cache.
            inode.unsynced.clear();
            return Err(Fault::FsyncIo.error());
        }
        for op in inode.unsynced.drain(..) {
            match op {
                PendingOp::Write { offset, bytes } => {
                    apply_write(&mut inode.durable, offset, &bytes);
                }
                PendingOp::SetLen(size_bytes) => inode.durable.set_len(size_bytes),
            }
        }
        Ok(())
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        // A close after the power cut still drops the handle.
        let _powered = self.shared.begin(OpKind::Close).is_ok();
        let mut state = self.shared.state.lock();
        // A handle from before a crash holds no count: the crash reset them.
        if state.epoch == self.epoch {
            if let Some(inode) = state.inodes.get_mut(&self.inode) {
                inode.open_handles = inode.open_handles.saturating_sub(1);
            }
            state.release_if_unused(self.inode);
        }
    }
}

impl VfsFile for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.shared.begin(OpKind::Read)?;
        self.with_faults(|faults, inode| {
            if faults.hit(Fault::ReadIo, &self.path) {
                return Err(Fault::ReadIo.error());
            }
            let Ok(start) = usize::try_from(offset) else {
                return Ok(0);
            };
            Ok(inode.data.read(start, buf))
        })
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.shared.begin(OpKind::Write)?;
        let start = checked_range(offset, buf.len(), &self.path)?;
        if self.direct && !is_direct_aligned(buf, offset) {
            return Err(path_error(
                io::ErrorKind::InvalidInput,
                "direct write not aligned to DIRECT_IO_ALIGN",
                &self.path,
            ));
        }
        {
            let mut state = self.shared.state.lock();
            let path = self.path.to_string_lossy();
            let failure = state
                .write_failures
                .iter()
                .position(|filter| filter.as_deref().is_none_or(|part| path.contains(part)));
            if let Some(index) = failure {
                state.write_failures.remove(index);
                return Err(io::Error::from_raw_os_error(super::fault::EIO));
            }
        }
        self.with_faults(|faults, inode| {
            // pwrite of nothing does not extend the file.
            if buf.is_empty() {
                return Ok(());
            }
            let (no_space, io) = if start + buf.len() > inode.data.len() {
                (Fault::ExtendNoSpace, Fault::ExtendIo)
            } else {
                (Fault::WriteNoSpace, Fault::WriteIo)
            };
            for fault in [no_space, io] {
                if faults.hit(fault, &self.path) {
                    return Err(fault.error());
                }
            }
            let mut len = buf.len();
            let short = len > 1 && faults.hit(Fault::ShortWrite, &self.path);
            if short {
                len = 1 + faults.below(len as u64 - 1) as usize;
            }
            apply_write(&mut inode.data, start, &buf[..len]);
            inode.unsynced.push(PendingOp::Write {
                offset: start,
                bytes: buf[..len].to_vec(),
            });
            if short {
                return Err(Fault::ShortWrite.error());
            }
            Ok(())
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sync()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.sync()
    }

    fn size(&self) -> io::Result<u64> {
        self.shared.begin(OpKind::SizeProbe)?;
        self.with_inode(|inode| Ok(inode.data.len() as u64))
    }

    fn set_len(&self, size_bytes: u64) -> io::Result<()> {
        self.shared.begin(OpKind::Truncate)?;
        let size_bytes = checked_range(size_bytes, 0, &self.path)?;
        self.with_faults(|faults, inode| {
            if size_bytes > inode.data.len() {
                for fault in [Fault::ExtendNoSpace, Fault::ExtendIo] {
                    if faults.hit(fault, &self.path) {
                        return Err(fault.error());
                    }
                }
            }
            inode.data.set_len(size_bytes);
            inode.unsynced.push(PendingOp::SetLen(size_bytes));
            Ok(())
        })
    }

    fn is_direct(&self) -> bool {
        self.direct
    }
}

/// A held directory lock; dropping it releases the directory.
struct SimDirLock {
    shared: Arc<Shared>,
    dir: PathBuf,
}

impl DirLock for SimDirLock {}

impl Drop for SimDirLock {
    fn drop(&mut self) {
        self.shared.dir_locks.lock().remove(&self.dir);
    }
}

impl SimVfs {
    fn open_file(&self, path: &Path, mode: OpenMode, direct: bool) -> io::Result<Arc<dyn VfsFile>> {
        self.shared.begin(OpKind::Open)?;
        let path = normalize(path);
        let mut state = self.shared.state.lock();
        for fault in [Fault::OpenIo, Fault::TooManyFiles] {
            if state.fault(fault, &path) {
                return Err(fault.error());
            }
        }
        if state.is_dir(&path) {
            return Err(path_error(
                io::ErrorKind::IsADirectory,
                "is a directory",
                &path,
            ));
        }
        let id = match (state.current.get(&path).copied(), mode) {
            (Some(_), OpenMode::CreateNew) => {
                return Err(path_error(
                    io::ErrorKind::AlreadyExists,
                    "file exists",
                    &path,
                ));
            }
            (Some(id), _) => id,
            (None, OpenMode::Existing) => {
                return Err(path_error(io::ErrorKind::NotFound, "no such file", &path));
            }
            (None, OpenMode::CreateIfMissing | OpenMode::CreateNew) => {
                state.check_parent(&path)?;
                state.create_file(path.clone())
            }
        };
        state
            .inodes
            .get_mut(&id)
            .expect("every current name refers to a live inode")
            .open_handles += 1;
        let epoch = state.epoch;
        drop(state);
        Ok(Arc::new(SimFile {
            shared: Arc::clone(&self.shared),
            inode: id,
            epoch,
            path,
            direct,
        }))
    }
}

impl Vfs for SimVfs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>> {
        self.open_file(path, mode, false)
    }

    fn open_direct(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>> {
        self.open_file(path, mode, true)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        let path = normalize(path);
        let state = self.shared.state.lock();
        Ok(state.is_dir(&path) || state.current.contains_key(&path))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.shared.begin(OpKind::Unlink)?;
        let path = normalize(path);
        let mut state = self.shared.state.lock();
        match state.current.remove(&path) {
            Some(id) => {
                state.name_log.push(vec![NameChange::File(path, None)]);
                state.release_if_unused(id);
                Ok(())
            }
            None if state.is_dir(&path) => Err(path_error(
                io::ErrorKind::IsADirectory,
                "is a directory",
                &path,
            )),
            None => Err(path_error(io::ErrorKind::NotFound, "no such file", &path)),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.shared.begin(OpKind::Rename)?;
        let from = normalize(from);
        let to = normalize(to);
        let mut state = self.shared.state.lock();
        let Some(&id) = state.current.get(&from) else {
            return Err(if state.is_dir(&from) {
                path_error(
                    io::ErrorKind::Unsupported,
                    "SimVfs cannot rename directories",
                    &from,
                )
            } else {
                path_error(io::ErrorKind::NotFound, "no such file", &from)
            });
        };
        if state.is_dir(&to) {
            return Err(path_error(
                io::ErrorKind::IsADirectory,
                "is a directory",
                &to,
            ));
        }
        state.check_parent(&to)?;
        if from == to {
            // POSIX: renaming a file onto itself does nothing.
            return Ok(());
        }
        state.current.remove(&from);
        state.name_log.push(vec![
            NameChange::File(from, None),
            NameChange::File(to.clone(), Some(id)),
        ]);
        if let Some(replaced) = state.current.insert(to, id) {
            state.release_if_unused(replaced);
        }
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        if self.shared.power_is_cut() {
            return Err(power_lost_error());
        }
        let path = normalize(path);
        let mut state = self.shared.state.lock();
        for ancestor in path.ancestors() {
            if state.current.contains_key(ancestor) || state.durable.contains_key(ancestor) {
                let (kind, what) = if ancestor == path {
                    (
                        io::ErrorKind::AlreadyExists,
                        "a file (current or not yet durably removed) has this name",
                    )
                } else {
                    (io::ErrorKind::NotADirectory, "a parent is a file")
                };
                return Err(path_error(kind, what, &path));
            }
        }
        // Top down, so the log holds a parent's creation before its children's.
        let mut ancestors: Vec<&Path> = path.ancestors().collect();
        ancestors.reverse();
        for ancestor in ancestors {
            if ancestor.parent().is_some() && state.dirs.insert(ancestor.to_path_buf()) {
                state
                    .name_log
                    .push(vec![NameChange::Dir(ancestor.to_path_buf())]);
            }
        }
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.shared.begin(OpKind::DirSync)?;
        let dir = normalize(path);
        let mut guard = self.shared.state.lock();
        guard.check_dir(&dir)?;
        if guard.fault(Fault::FsyncIo, &dir) {
            // Nothing of the directory became durable.
            return Err(Fault::FsyncIo.error());
        }
        let state = &mut *guard;
        let in_dir = |entry: &Path| entry.parent() == Some(dir.as_path());
        let mut dropped = Vec::new();
        state.durable.retain(|name, id| {
            let keep = !in_dir(name);
            if !keep {
                dropped.push(*id);
            }
            keep
        });
        for (name, &id) in state.current.iter() {
            if in_dir(name) {
                state.durable.insert(name.clone(), id);
            }
        }
        for sub in state.dirs.iter().filter(|d| in_dir(d)) {
            state.durable_dirs.insert(sub.clone());
        }
        // What the log held for this directory is durable now; the rest still waits.
        for op in &mut state.name_log {
            op.retain(|change| !in_dir(change.path()));
        }
        state.name_log.retain(|op| !op.is_empty());
        for id in dropped {
            state.release_if_unused(id);
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        let dir = normalize(path);
        let state = self.shared.state.lock();
        state.check_dir(&dir)?;
        let names: BTreeSet<PathBuf> = state
            .current
            .keys()
            .chain(state.dirs.iter())
            .filter(|entry| entry.parent() == Some(dir.as_path()))
            .filter_map(|entry| entry.file_name().map(PathBuf::from))
            .collect();
        Ok(names.into_iter().collect())
    }

    fn lock_dir(&self, path: &Path) -> io::Result<Box<dyn DirLock>> {
        let dir = normalize(path);
        {
            let mut state = self.shared.state.lock();
            state.check_dir(&dir)?;
            let lock_file = dir.join(LOCK_FILE_NAME);
            if state.is_dir(&lock_file) {
                return Err(path_error(
                    io::ErrorKind::IsADirectory,
                    "is a directory",
                    &lock_file,
                ));
            }
            if !state.current.contains_key(&lock_file) {
                state.create_file(lock_file);
            }
        }
        if !self.shared.dir_locks.lock().insert(dir.clone()) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "data directory {} is in use by another process",
                    dir.display()
                ),
            ));
        }
        Ok(Box::new(SimDirLock {
            shared: Arc::clone(&self.shared),
            dir,
        }))
    }

    /// None: the simulator models durability, not access control (see the module header
    /// of [`vfs`](super)).
    fn ownership(&self, path: &Path) -> io::Result<Option<Ownership>> {
        if self.exists(path)? {
            Ok(None)
        } else {
            Err(path_error(
                io::ErrorKind::NotFound,
                "no such file",
                &normalize(path),
            ))
        }
    }

    /// Nothing to set: no modes.
    fn restrict_dir_to_owner(&self, path: &Path) -> io::Result<()> {
        self.ownership(path).map(|_| ())
    }

    fn counters(&self) -> &OpCounters {
        &self.shared.counters
    }
}

fn kind_index(kind: OpKind) -> usize {
    OpKind::ALL
        .iter()
        .position(|&k| k == kind)
        .expect("OpKind::ALL lists every kind")
}

/// Lexical normalisation: `.` dropped, `..` pops a normal component (and is dropped at `/`).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Validates `offset..offset + len` against the simulated size limit; returns `offset`.
fn checked_range(offset: u64, len: usize, path: &Path) -> io::Result<usize> {
    offset
        .checked_add(len as u64)
        .filter(|&end| end <= MAX_FILE_SIZE_BYTES)
        .and_then(|_| usize::try_from(offset).ok())
        .ok_or_else(|| {
            path_error(
                io::ErrorKind::FileTooLarge,
                &format!(
                    "{len} bytes at offset {offset} exceed the simulated limit of \
                     {MAX_FILE_SIZE_BYTES} bytes"
                ),
                path,
            )
        })
}

/// pwrite: copies `bytes` at `offset`, zero-filling any gap past the end.
fn apply_write(image: &mut FileBytes, offset: usize, bytes: &[u8]) {
    image.write(offset, bytes);
}

/// Applies a random subset of the 512-byte sectors (aligned to file offsets) of a write.
fn apply_torn_write(image: &mut FileBytes, offset: usize, bytes: &[u8], rng: &mut SplitMix64) {
    let end = offset + bytes.len();
    let mut start = offset;
    while start < end {
        let sector_end = ((start / SECTOR_SIZE_BYTES + 1) * SECTOR_SIZE_BYTES).min(end);
        if rng.coin() {
            apply_write(image, start, &bytes[start - offset..sector_end - offset]);
        }
        start = sector_end;
    }
}

fn path_error(kind: io::ErrorKind, what: &str, path: &Path) -> io::Error {
    io::Error::new(kind, format!("{}: {what}", path.display()))
}

fn crashed_error(path: &Path) -> io::Error {
    io::Error::other(format!(
        "{}: file system crashed (handle opened before SimVfs::crash)",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::super::fault::EIO;
    use super::*;
    use std::time::Instant;

    const BLOCK: usize = 8192;

    fn p(s: &str) -> &Path {
        Path::new(s)
    }

    /// Creates a directory durably (its parents synced), as the engine does.
    fn mkdir(vfs: &SimVfs, path: &str) {
        super::super::create_dir_durable(vfs, p(path)).unwrap();
    }

    /// A file system with `/d` created, and `/d/f` created and durable (empty).
    fn with_durable_file(seed: u64) -> (SimVfs, Arc<dyn VfsFile>) {
        let vfs = SimVfs::new(seed);
        mkdir(&vfs, "/d");
        let f = vfs.open(p("/d/f"), OpenMode::CreateNew).unwrap();
        f.sync_all().unwrap();
        vfs.sync_dir(p("/d")).unwrap();
        (vfs, f)
    }

    #[test]
    fn unsynced_write_is_lost_on_crash() {
        let (vfs, f) = with_durable_file(1);
        f.write_at(b"hello", 0).unwrap();
        assert_eq!(vfs.contents(p("/d/f")).unwrap(), b"hello");
        vfs.crash(&CrashOptions::default());
        assert_eq!(vfs.contents(p("/d/f")).unwrap(), b"");
    }

    #[test]
    fn synced_write_survives_crash() {
        let (vfs, f) = with_durable_file(1);
        f.write_at(b"hello", 0).unwrap();
        f.sync_data().unwrap();
        f.write_at(b"J", 0).unwrap();
        assert_eq!(vfs.durable_contents(p("/d/f")).unwrap(), b"hello");
        vfs.crash(&CrashOptions::default());
        assert_eq!(vfs.contents(p("/d/f")).unwrap(), b"hello");
        let g = vfs.open(p("/d/f"), OpenMode::Existing).unwrap();
        let mut buf = [0u8; 5];
        assert_eq!(g.read_at(&mut buf, 0).unwrap(), 5);
        assert_eq!(&buf, b"hello");
    }

    #[test]
    fn unsynced_truncate_is_lost_and_synced_truncate_survives() {
        let (vfs, f) = with_durable_file(1);
        f.write_at(&[7u8; 100], 0).unwrap();
        f.sync_data().unwrap();
        f.set_len(10).unwrap();
        vfs.crash(&CrashOptions::default());
        assert_eq!(vfs.contents(p("/d/f")).unwrap().len(), 100);
        let f = vfs.open(p("/d/f"), OpenMode::Existing).unwrap();
        f.set_len(10).unwrap();
        f.sync_all().unwrap();
        vfs.crash(&CrashOptions::default());
        assert_eq!(vfs.contents(p("/d/f")).unwrap(), vec![7u8; 10]);
    }

    #[test]
    fn created_and_fsynced_file_without_dir_sync_disappears_on_crash() {
        let vfs = SimVfs::new(1);
        mkdir(&vfs, "/d");
        let f = vfs.open(p("/d/new"), OpenMode::CreateNew).unwrap();
        f.write_at(b"data", 0).unwrap();
        f.sync_all().unwrap();
        assert!(vfs.exists(p("/d/new")).unwrap());
        assert_eq!(vfs.durable_contents(p("/d/new")), None);
        vfs.crash(&CrashOptions::default());
        assert!(!vfs.exists(p("/d/new")).unwrap());
        assert_eq!(vfs.contents(p("/d/new")), None);
        // The directory itself is durable: its parent was synced after its creation.
        assert!(vfs.exists(p("/d")).unwrap());
        let err = vfs.open(p("/d/new"), OpenMode::Existing).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn removal_is_durable_only_after_dir_sync() {
        let (vfs, f) = with_durable_file(1);
        drop(f);
        vfs.remove_file(p("/d/f")).unwrap();
        assert!(!vfs.exists(p("/d/f")).unwrap());
        vfs.crash(&CrashOptions::default());
        assert!(vfs.exists(p("/d/f")).unwrap(), "unsynced unlink undone");
        vfs.remove_file(p("/d/f")).unwrap();
        vfs.sync_dir(p("/d")).unwrap();
        vfs.crash(&CrashOptions::default());
        assert!(!vfs.exists(p("/d/f")).unwrap());
    }

    #[test]
    fn rename_is_durable_only_after_dir_sync() {
        let (vfs, f) = with_durable_file(1);
        f.write_at(b"v1", 0).unwrap();
        f.sync_all().unwrap();
        drop(f);
        vfs.rename(p("/d/f"), p("/d/g")).unwrap();
        assert!(!vfs.exists(p("/d/f")).unwrap());
        assert!(vfs.exists(p("/d/g")).unwrap());
        vfs.crash(&CrashOptions::default());
        assert!(vfs.exists(p("/d/f")).unwrap(), "unsynced rename undone");
        assert!(!vfs.exists(p("/d/g")).unwrap());

        vfs.rename(p("/d/f"), p("/d/g")).unwrap();
        vfs.sync_dir(p("/d")).unwrap();
        vfs.crash(&CrashOptions::default());
        assert!(!vfs.exists(p("/d/f")).unwrap());
        assert_eq!(vfs.contents(p("/d/g")).unwrap(), b"v1");
    }

    #[test]
    fn rename_replaces_the_target() {
        let (vfs, f) = with_durable_file(1);
        f.write_at(b"new", 0).unwrap();
        f.sync_all().unwrap();
        let old = vfs.open(p("/d/old"), OpenMode::CreateNew).unwrap();
        old.write_at(b"old", 0).unwrap();
        old.sync_all().unwrap();
        vfs.sync_dir(p("/d")).unwrap();
        vfs.rename(p("/d/f"), p("/d/old")).unwrap();
        assert_eq!(vfs.contents(p("/d/old")).unwrap(), b"new");
        // The replaced file lives on through its handle.
        let mut buf = [0u8; 3];
        assert_eq!(old.read_at(&mut buf, 0).unwrap(), 3);
        assert_eq!(&buf, b"old");
        vfs.sync_dir(p("/d")).unwrap();
        vfs.crash(&CrashOptions::default());
        assert_eq!(vfs.list_dir(p("/d")).unwrap(), vec![PathBuf::from("old")]);
        assert_eq!(vfs.contents(p("/d/old")).unwrap(), b"new");
    }

    #[test]
    fn failed_fsync_returns_eio_and_its_writes_never_become_durable() {
        let (vfs, f) = with_durable_file(1);
        f.write_at(b"old", 0).unwrap();
        f.sync_data().unwrap();
        f.write_at(b"new", 0).unwrap();
        vfs.fail_next_fsync(Some("/d/f"));
        let err = f.sync_data().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(EIO));
        // The page cache still serves the new data...
        let mut buf = [0u8; 3];
        f.read_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"new");
        // ...and the next fsync succeeds, but proves nothing about it.
        f.sync_all().unwrap();
        assert_eq!(vfs.durable_contents(p("/d/f")).unwrap(), b"old");
        vfs.crash(&CrashOptions {
            keep_unsynced_probability: 1.0,
            tear_writes: false,
        });
        assert_eq!(vfs.contents(p("/d/f")).unwrap(), b"old");
    }

    #[test]
    fn fsync_failure_applies_only_to_matching_paths_and_only_once() {
        let vfs = SimVfs::new(1);
        mkdir(&vfs, "/d");
        let a = vfs.open(p("/d/a"), OpenMode::CreateNew).unwrap();
        let wal = vfs.open(p("/d/wal.1"), OpenMode::CreateNew).unwrap();
        vfs.fail_next_fsync(Some("wal"));
        a.sync_data().unwrap();
        assert_eq!(wal.sync_data().unwrap_err().raw_os_error(), Some(EIO));
        wal.sync_data().unwrap();
        vfs.fail_next_fsync(None);
        assert_eq!(a.sync_all().unwrap_err().raw_os_error(), Some(EIO));
        a.sync_all().unwrap();
    }

    /// Old bytes 0xAA synced, then 8 sectors of 0xBB unsynced; crash keeping (and tearing)
    /// every unsynced write. Returns the file after the crash.
    fn torn_crash(seed: u64) -> Vec<u8> {
        let (vfs, f) = with_durable_file(seed);
        f.write_at(&[0xAA; 8 * SECTOR_SIZE_BYTES], 0).unwrap();
        f.sync_data().unwrap();
        f.write_at(&[0xBB; 8 * SECTOR_SIZE_BYTES], 0).unwrap();
        vfs.crash(&CrashOptions {
            keep_unsynced_probability: 1.0,
            tear_writes: true,
        });
        vfs.contents(p("/d/f")).unwrap()
    }

    #[test]
    fn torn_write_leaves_a_mix_of_old_and_new_sectors() {
        let mut mixed_seed = None;
        for seed in 0..64 {
            let after = torn_crash(seed);
            assert_eq!(after.len(), 8 * SECTOR_SIZE_BYTES);
            let mut old = 0;
            let mut new = 0;
            for sector in after.chunks(SECTOR_SIZE_BYTES) {
                // A sector is atomic: all old or all new, never a blend.
                if sector.iter().all(|&b| b == 0xAA) {
                    old += 1;
                } else if sector.iter().all(|&b| b == 0xBB) {
                    new += 1;
                } else {
                    panic!("seed {seed}: a sector was torn inside");
                }
            }
            if old > 0 && new > 0 {
                mixed_seed = Some(seed);
                break;
            }
        }
        assert!(mixed_seed.is_some(), "no seed tore the write");
    }

    #[test]
    fn keeping_every_unsynced_write_untorn_keeps_what_reads_saw() {
        let (vfs, f) = with_durable_file(9);
        f.write_at(&[1; 3000], 100).unwrap();
        f.set_len(2000).unwrap();
        f.write_at(b"tail", 5000).unwrap();
        let before = vfs.contents(p("/d/f")).unwrap();
        vfs.crash(&CrashOptions {
            keep_unsynced_probability: 1.0,
            tear_writes: false,
        });
        assert_eq!(vfs.contents(p("/d/f")).unwrap(), before);
        assert_eq!(vfs.durable_contents(p("/d/f")).unwrap(), before);
    }

    /// A fixed workload then a random crash; returns every file after it.
    fn random_crash(seed: u64) -> Vec<Vec<u8>> {
        let vfs = SimVfs::new(seed);
        mkdir(&vfs, "/d");
        let mut files = Vec::new();
        for i in 0..4u8 {
            let name = format!("/d/{i}");
            let f = vfs.open(p(&name), OpenMode::CreateNew).unwrap();
            f.write_at(&[i; BLOCK], 0).unwrap();
            f.sync_data().unwrap();
            for j in 0..8u8 {
                f.write_at(&[i * 16 + j; 1000], u64::from(j) * 700).unwrap();
            }
            f.set_len(4000 + u64::from(i) * 100).unwrap();
            files.push(name);
        }
        vfs.sync_dir(p("/d")).unwrap();
        vfs.crash(&CrashOptions {
            keep_unsynced_probability: 0.5,
            tear_writes: true,
        });
        files
            .iter()
            .map(|name| vfs.contents(p(name)).unwrap())
            .collect()
    }

    #[test]
    fn crash_is_deterministic_for_a_seed() {
        assert_eq!(random_crash(42), random_crash(42));
        assert_eq!(random_crash(7), random_crash(7));
        // And the seed matters, so the equality above is not vacuous.
        let outcomes: BTreeSet<Vec<Vec<u8>>> = (0..8).map(random_crash).collect();
        assert!(outcomes.len() > 1);
    }

    #[test]
    fn flip_bit_changes_exactly_one_bit() {
        let (vfs, f) = with_durable_file(1);
        let original: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        f.write_at(&original, 0).unwrap();
        f.sync_data().unwrap();
        vfs.flip_bit(p("/d/f"), 123, 5).unwrap();
        let count_diff = |a: &[u8], b: &[u8]| -> u32 {
            a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
        };
        let current = vfs.contents(p("/d/f")).unwrap();
        let durable = vfs.durable_contents(p("/d/f")).unwrap();
        assert_eq!(count_diff(&current, &original), 1);
        assert_eq!(current[123] ^ original[123], 1 << 5);
        assert_eq!(durable, current);
        vfs.crash(&CrashOptions::default());
        assert_eq!(vfs.contents(p("/d/f")).unwrap(), current);
        assert_eq!(
            vfs.flip_bit(p("/d/f"), 1000, 0).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            vfs.flip_bit(p("/d/f"), 0, 8).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            vfs.flip_bit(p("/d/nope"), 0, 0).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn counters_count_each_op_like_os_vfs() {
        // The sequence of `OsVfs`'s own counter test, plus what it does not cover.
        let vfs = SimVfs::new(1);
        mkdir(&vfs, "/d");
        let path = p("/d/f");
        let before = vfs.counters().snapshot();
        {
            let f = vfs.open(path, OpenMode::CreateNew).unwrap();
            f.write_at(b"hello", 8192).unwrap();
            assert_eq!(f.size().unwrap(), 8197);
            let mut buf = [0u8; 5];
            assert_eq!(f.read_at(&mut buf, 8192).unwrap(), 5);
            assert_eq!(&buf, b"hello");
            assert_eq!(f.read_at(&mut buf, 9000).unwrap(), 0);
            f.sync_data().unwrap();
            f.set_len(0).unwrap();
        }
        vfs.sync_dir(p("/d")).unwrap();
        let c = vfs.counters().snapshot().since(&before);
        assert_eq!(c.get(OpKind::Open), 1);
        assert_eq!(c.get(OpKind::Close), 1);
        assert_eq!(c.get(OpKind::Write), 1);
        assert_eq!(c.get(OpKind::Read), 2);
        assert_eq!(c.get(OpKind::SizeProbe), 1);
        assert_eq!(c.get(OpKind::Fsync), 1);
        assert_eq!(c.get(OpKind::Truncate), 1);
        assert_eq!(c.get(OpKind::DirSync), 1);
        assert_eq!(c.get(OpKind::Unlink), 0);
        assert_eq!(c.get(OpKind::Rename), 0);

        let before = vfs.counters().snapshot();
        // A failed open counts, as OsVfs counts before the syscall.
        assert!(vfs.open(path, OpenMode::CreateNew).is_err());
        let f = vfs.open(path, OpenMode::Existing).unwrap();
        let f2 = Arc::clone(&f);
        f.sync_all().unwrap();
        drop(f);
        drop(f2); // the last clone closes
        vfs.rename(path, p("/d/g")).unwrap();
        vfs.remove_file(p("/d/g")).unwrap();
        assert!(vfs.remove_file(p("/d/g")).is_err());
        // Not counted, as in OsVfs.
        vfs.exists(path).unwrap();
        vfs.list_dir(p("/d")).unwrap();
        vfs.create_dir_all(p("/d/e")).unwrap();
        drop(vfs.lock_dir(p("/d")).unwrap());
        let c = vfs.counters().snapshot().since(&before);
        assert_eq!(c.get(OpKind::Open), 2);
        assert_eq!(c.get(OpKind::Close), 1);
        assert_eq!(c.get(OpKind::Fsync), 1);
        assert_eq!(c.get(OpKind::Rename), 1);
        assert_eq!(c.get(OpKind::Unlink), 2);
        assert_eq!(c.get(OpKind::DirSync), 0);
        assert_eq!(c.get(OpKind::Read), 0);
    }

    #[test]
    fn handles_opened_before_a_crash_fail() {
        let (vfs, f) = with_durable_file(1);
        vfs.crash(&CrashOptions::default());
        let mut buf = [0u8; 4];
        let errors = [
            f.read_at(&mut buf, 0).unwrap_err(),
            f.write_at(b"x", 0).unwrap_err(),
            f.sync_data().unwrap_err(),
            f.sync_all().unwrap_err(),
            f.size().unwrap_err(),
            f.set_len(0).unwrap_err(),
        ];
        for err in errors {
            assert_eq!(err.kind(), io::ErrorKind::Other);
            assert!(err.to_string().contains("file system crashed"), "{err}");
        }
        // The write did not happen, and a new handle works.
        assert_eq!(vfs.contents(p("/d/f")).unwrap(), b"");
        let g = vfs.open(p("/d/f"), OpenMode::Existing).unwrap();
        g.write_at(b"ok", 0).unwrap();
        drop(f);
        assert_eq!(vfs.contents(p("/d/f")).unwrap(), b"ok");
    }

    #[test]
    fn lock_dir_is_exclusive() {
        let vfs = SimVfs::new(1);
        mkdir(&vfs, "/data");
        mkdir(&vfs, "/other");
        let lock = vfs.lock_dir(p("/data")).unwrap();
        let err = vfs
            .lock_dir(p("/data/./"))
            .err()
            .expect("second lock must fail");
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        let other = vfs.lock_dir(p("/other")).unwrap();
        // A crash does not release it: the lock belongs to the process.
        vfs.crash(&CrashOptions::default());
        assert_eq!(
            vfs.lock_dir(p("/data")).err().unwrap().kind(),
            io::ErrorKind::WouldBlock
        );
        drop(lock);
        drop(other);
        vfs.lock_dir(p("/data")).unwrap();
        assert_eq!(
            vfs.lock_dir(p("/missing")).err().unwrap().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn unlinked_file_stays_usable_through_its_handle() {
        let (vfs, f) = with_durable_file(1);
        vfs.remove_file(p("/d/f")).unwrap();
        f.write_at(b"still here", 0).unwrap();
        f.sync_data().unwrap();
        let mut buf = [0u8; 10];
        assert_eq!(f.read_at(&mut buf, 0).unwrap(), 10);
        assert_eq!(&buf, b"still here");
        assert_eq!(vfs.contents(p("/d/f")), None);
        // The unlink was not made durable: the file (with its synced data) comes back.
        vfs.crash(&CrashOptions::default());
        assert_eq!(vfs.contents(p("/d/f")).unwrap(), b"still here");
    }

    #[test]
    fn a_direct_file_refuses_writes_direct_io_could_not_do() {
        use crate::vfs::DIRECT_IO_ALIGN;
        let vfs = SimVfs::new(1);
        vfs.create_dir_all(p("/d")).unwrap();
        let f = vfs.open_direct(p("/d/f"), OpenMode::CreateNew).unwrap();
        assert!(f.is_direct());
        let mem = vec![0u8; 3 * DIRECT_IO_ALIGN];
        let at = mem.as_ptr().align_offset(DIRECT_IO_ALIGN);
        let aligned = &mem[at..at + 2 * DIRECT_IO_ALIGN];
        let off = DIRECT_IO_ALIGN as u64;
        f.write_at(aligned, off).unwrap();
        for (buf, offset) in [
            (&mem[at + 1..at + 1 + DIRECT_IO_ALIGN], off),
            (&aligned[..DIRECT_IO_ALIGN], off + 512),
            (&aligned[..DIRECT_IO_ALIGN - 512], off),
        ] {
            let refused = f.write_at(buf, offset).unwrap_err();
            assert_eq!(refused.kind(), io::ErrorKind::InvalidInput);
        }
        let g = vfs.open(p("/d/f"), OpenMode::Existing).unwrap();
        assert!(!g.is_direct());
        g.write_at(b"x", 1).unwrap();
    }

    #[test]
    fn open_modes_and_missing_directories() {
        let vfs = SimVfs::new(1);
        let kind = |r: io::Result<Arc<dyn VfsFile>>| r.err().unwrap().kind();
        assert_eq!(
            kind(vfs.open(p("/nodir/f"), OpenMode::CreateIfMissing)),
            io::ErrorKind::NotFound
        );
        vfs.create_dir_all(p("/a/b")).unwrap();
        assert!(vfs.exists(p("/a")).unwrap());
        assert_eq!(
            kind(vfs.open(p("/a/b/f"), OpenMode::Existing)),
            io::ErrorKind::NotFound
        );
        let f = vfs.open(p("/a/b/f"), OpenMode::CreateIfMissing).unwrap();
        f.write_at(b"x", 0).unwrap();
        let g = vfs.open(p("/a/b/f"), OpenMode::CreateIfMissing).unwrap();
        assert_eq!(g.size().unwrap(), 1, "the same file, not a new one");
        assert_eq!(
            kind(vfs.open(p("/a/b/f"), OpenMode::CreateNew)),
            io::ErrorKind::AlreadyExists
        );
        assert_eq!(
            kind(vfs.open(p("/a/b"), OpenMode::CreateIfMissing)),
            io::ErrorKind::IsADirectory
        );
        assert_eq!(
            kind(vfs.open(p("/a/b/f/g"), OpenMode::CreateIfMissing)),
            io::ErrorKind::NotADirectory
        );
        assert_eq!(
            vfs.create_dir_all(p("/a/b/f")).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        // Paths are normalised.
        assert!(vfs.exists(p("/a/./b/../b/f")).unwrap());
        assert_eq!(
            vfs.sync_dir(p("/a/b/f")).unwrap_err().kind(),
            io::ErrorKind::NotADirectory
        );
        assert_eq!(
            vfs.sync_dir(p("/nodir")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn reads_past_the_end_are_short_and_writes_past_it_zero_fill() {
        let (vfs, f) = with_durable_file(1);
        f.write_at(b"abc", 10).unwrap();
        assert_eq!(f.size().unwrap(), 13);
        let mut buf = [0xFFu8; 8];
        assert_eq!(f.read_at(&mut buf, 8).unwrap(), 5);
        assert_eq!(&buf[..5], &[0, 0, b'a', b'b', b'c']);
        assert_eq!(f.read_at(&mut buf, 13).unwrap(), 0);
        assert_eq!(f.read_at(&mut buf, u64::MAX).unwrap(), 0);
        f.write_at(b"", 100).unwrap();
        assert_eq!(f.size().unwrap(), 13, "an empty write does not extend");
        let mut expected = vec![0u8; 10];
        expected.extend_from_slice(b"abc");
        assert_eq!(vfs.contents(p("/d/f")).unwrap(), expected);
        // A wild offset is an error, not an abort.
        assert_eq!(
            f.write_at(b"x", u64::MAX).unwrap_err().kind(),
            io::ErrorKind::FileTooLarge
        );
        assert_eq!(
            f.set_len(MAX_FILE_SIZE_BYTES + 1).unwrap_err().kind(),
            io::ErrorKind::FileTooLarge
        );
    }

    #[test]
    fn list_dir_returns_sorted_names_of_files_and_subdirectories() {
        let vfs = SimVfs::new(1);
        vfs.create_dir_all(p("/d/sub/deeper")).unwrap();
        for name in ["/d/b", "/d/a", "/d/sub/x"] {
            vfs.open(p(name), OpenMode::CreateNew).unwrap();
        }
        let names = vfs.list_dir(p("/d")).unwrap();
        let expected: Vec<PathBuf> = ["a", "b", "sub"].iter().map(PathBuf::from).collect();
        assert_eq!(names, expected);
        assert_eq!(
            vfs.list_dir(p("/d/sub")).unwrap(),
            vec![PathBuf::from("deeper"), PathBuf::from("x")]
        );
        // Like OsVfs, a lock leaves a lock file.
        let _lock = vfs.lock_dir(p("/d/sub/deeper")).unwrap();
        assert_eq!(
            vfs.list_dir(p("/d/sub/deeper")).unwrap(),
            vec![PathBuf::from(LOCK_FILE_NAME)]
        );
        assert_eq!(
            vfs.list_dir(p("/d/a")).unwrap_err().kind(),
            io::ErrorKind::NotADirectory
        );
    }

    #[test]
    fn latency_is_slept_inside_the_operation() {
        let (vfs, f) = with_durable_file(1);
        let latency = Duration::from_millis(20);
        vfs.set_latency(OpKind::Fsync, latency);
        let start = Instant::now();
        f.sync_data().unwrap();
        assert!(start.elapsed() >= latency);
        vfs.set_latency(OpKind::Fsync, Duration::ZERO);
        vfs.set_latency(OpKind::Write, latency);
        let start = Instant::now();
        f.write_at(b"x", 0).unwrap();
        assert!(start.elapsed() >= latency);
    }

    #[test]
    fn concurrent_writers_on_different_files() {
        const THREADS: u8 = 8;
        const BLOCKS: u64 = 32;
        let vfs = Arc::new(SimVfs::new(5));
        mkdir(&vfs, "/d");
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let vfs = Arc::clone(&vfs);
                std::thread::spawn(move || {
                    let name = format!("/d/{t}");
                    let f = vfs.open(p(&name), OpenMode::CreateNew).unwrap();
                    for b in 0..BLOCKS {
                        f.write_at(&[t.wrapping_add(b as u8); BLOCK], b * BLOCK as u64)
                            .unwrap();
                        if b % 8 == 7 {
                            f.sync_data().unwrap();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        vfs.sync_dir(p("/d")).unwrap();
        vfs.crash(&CrashOptions::default());
        for t in 0..THREADS {
            let data = vfs.contents(&PathBuf::from(format!("/d/{t}"))).unwrap();
            assert_eq!(data.len(), BLOCKS as usize * BLOCK);
            for (b, block) in data.chunks(BLOCK).enumerate() {
                assert!(block.iter().all(|&x| x == t.wrapping_add(b as u8)));
            }
        }
        let c = vfs.counters().snapshot();
        assert_eq!(c.get(OpKind::Write), u64::from(THREADS) * BLOCKS);
        assert_eq!(c.get(OpKind::Close), u64::from(THREADS));
    }

    #[test]
    fn relative_paths_work() {
        let vfs = SimVfs::new(1);
        let f = vfs.open(p("rel"), OpenMode::CreateNew).unwrap();
        f.sync_all().unwrap();
        vfs.sync_dir(p(".")).unwrap();
        vfs.crash(&CrashOptions::default());
        assert!(vfs.exists(p("./rel")).unwrap());
        assert_eq!(vfs.list_dir(p("")).unwrap(), vec![PathBuf::from("rel")]);
    }

    #[test]
    fn a_grown_file_reads_zeros_in_its_tail_and_a_crash_keeps_what_was_synced() {
        let vfs = SimVfs::new(3);
        mkdir(&vfs, "/d");
        let f = vfs.open(p("/d/f"), OpenMode::CreateNew).unwrap();
        f.write_at(b"abc", 0).unwrap();
        f.set_len(1 << 24).unwrap();
        assert_eq!(f.size().unwrap(), 1 << 24);
        let mut buf = [9u8; 6];
        assert_eq!(f.read_at(&mut buf, 1).unwrap(), 6);
        assert_eq!(&buf, b"bc\0\0\0\0");
        assert_eq!(f.read_at(&mut buf, (1 << 24) - 2).unwrap(), 2);
        assert_eq!(f.read_at(&mut buf, 1 << 24).unwrap(), 0);
        f.write_at(b"xy", 100).unwrap();
        f.sync_data().unwrap();
        f.set_len(50).unwrap();
        f.set_len(200).unwrap();
        assert_eq!(f.read_at(&mut buf[..2], 100).unwrap(), 2);
        assert_eq!(&buf[..2], b"\0\0", "cut, then grown: zeros");
        drop(f);
        vfs.sync_dir(p("/d")).unwrap();
        vfs.crash(&CrashOptions::default());
        let durable = vfs.contents(p("/d/f")).unwrap();
        assert_eq!(durable.len(), 1 << 24, "the synced length");
        assert_eq!(&durable[..3], b"abc");
        assert_eq!(&durable[100..102], b"xy");
    }

    #[test]
    fn a_directory_is_durable_only_once_its_parent_is_synced() {
        let vfs = SimVfs::new(1);
        vfs.create_dir_all(p("/a/b")).unwrap();
        let f = vfs.open(p("/a/b/f"), OpenMode::CreateNew).unwrap();
        f.write_at(b"x", 0).unwrap();
        f.sync_all().unwrap();
        vfs.sync_dir(p("/a/b")).unwrap();
        vfs.sync_dir(p("/a")).unwrap();
        // `/a` itself was never synced into `/`: it goes, with everything under it.
        vfs.crash(&CrashOptions::default());
        assert!(!vfs.exists(p("/a")).unwrap());
        assert_eq!(vfs.contents(p("/a/b/f")), None);
        let before = vfs.faults_injected();
        vfs.create_dir_all(p("/a/b")).unwrap();
        vfs.sync_dir(p("/")).unwrap();
        vfs.crash(&CrashOptions::default());
        assert!(vfs.exists(p("/a")).unwrap());
        assert!(
            !vfs.exists(p("/a/b")).unwrap(),
            "/a was not synced after /a/b was made"
        );
        assert_eq!(
            vfs.faults_injected()
                .since(&before)
                .get(Fault::LostNameChange),
            1
        );
        mkdir(&vfs, "/a/b/c");
        vfs.crash(&CrashOptions::default());
        assert!(
            vfs.exists(p("/a/b/c")).unwrap(),
            "create_dir_durable syncs each parent"
        );
    }

    /// Five creates and an unlink in one directory, never synced, then a crash that keeps
    /// each with even odds: what survives is always an in-order prefix of the changes.
    #[test]
    fn unsynced_directory_changes_survive_a_crash_as_an_in_order_prefix() {
        let mut outcomes = BTreeSet::new();
        for seed in 0..64 {
            let vfs = SimVfs::new(seed);
            mkdir(&vfs, "/d");
            // Held open, so that the removed file's inode lives on to the crash (a replayed
            // create of a file that no longer exists at all is skipped).
            let _handles: Vec<_> = (0..5)
                .map(|i| {
                    vfs.open(&PathBuf::from(format!("/d/{i}")), OpenMode::CreateNew)
                        .unwrap()
                })
                .collect();
            vfs.remove_file(p("/d/0")).unwrap();
            vfs.crash(&CrashOptions {
                keep_unsynced_probability: 0.5,
                tear_writes: false,
            });
            let names: Vec<String> = vfs
                .list_dir(p("/d"))
                .unwrap()
                .iter()
                .map(|n| n.to_string_lossy().into_owned())
                .collect();
            let lost = vfs.faults_injected().get(Fault::LostNameChange);
            let expected: Vec<String> = match 6 - lost {
                6 => (1..5).map(|i| i.to_string()).collect(),
                n => (0..n).map(|i| i.to_string()).collect(),
            };
            assert_eq!(names, expected, "seed {seed}");
            outcomes.insert(names);
        }
        assert!(outcomes.len() > 3, "the odds must matter: {outcomes:?}");
    }

    #[test]
    fn each_armed_fault_fails_its_operation_once_and_is_counted() {
        // (fault, operation, errno)
        type Op<'a> = Box<dyn Fn() -> io::Result<()> + 'a>;
        let (vfs, f) = with_durable_file(1);
        f.write_at(&[1u8; 100], 0).unwrap();
        let mut buf = [0u8; 10];
        let cases: Vec<(Fault, Op<'_>, i32)> = vec![
            (Fault::WriteNoSpace, Box::new(|| f.write_at(b"ab", 10)), 28),
            (Fault::WriteIo, Box::new(|| f.write_at(b"ab", 10)), EIO),
            (Fault::ExtendNoSpace, Box::new(|| f.write_at(b"ab", 99)), 28),
            (Fault::ExtendIo, Box::new(|| f.set_len(200)), EIO),
            (
                Fault::ReadIo,
                Box::new(|| f.read_at(&mut [0u8; 4], 0).map(drop)),
                EIO,
            ),
            (
                Fault::OpenIo,
                Box::new(|| vfs.open(p("/d/f"), OpenMode::Existing).map(drop)),
                EIO,
            ),
            (
                Fault::TooManyFiles,
                Box::new(|| vfs.open(p("/d/g"), OpenMode::CreateNew).map(drop)),
                24,
            ),
            (Fault::FsyncIo, Box::new(|| f.sync_data()), EIO),
        ];
        for (fault, op, errno) in &cases {
            vfs.inject(*fault, Some("/d/"));
            let err = op().unwrap_err();
            assert_eq!(err.raw_os_error(), Some(*errno), "{}", fault.name());
            assert_eq!(vfs.faults_injected().get(*fault), 1, "{}", fault.name());
        }
        // A failed write or extension changed nothing; the failed open created nothing.
        assert_eq!(vfs.contents(p("/d/f")).unwrap(), vec![1u8; 100]);
        assert!(!vfs.exists(p("/d/g")).unwrap());
        // Each fault was used once: the same operations succeed now.
        for (fault, op, _) in &cases {
            op().unwrap_or_else(|e| panic!("{} again: {e}", fault.name()));
        }
        // A write inside the file does not take an extension's fault, nor the reverse.
        vfs.inject(Fault::ExtendIo, None);
        f.write_at(b"in", 0).unwrap();
        assert!(f.write_at(b"out", 300).is_err());
        vfs.inject(Fault::WriteIo, None);
        f.write_at(b"out", 300).unwrap();
        assert!(f.write_at(b"in", 0).is_err());
        assert_eq!(f.read_at(&mut buf, 0).unwrap(), 10);
        assert_eq!(vfs.faults_injected().total(), cases.len() as u64 + 2);
    }

    #[test]
    fn a_short_write_writes_a_prefix_then_fails_with_enospc() {
        let (vfs, f) = with_durable_file(3);
        vfs.inject(Fault::ShortWrite, Some("/d/f"));
        let err = f.write_at(&[7u8; 1000], 0).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(28));
        let written = vfs.contents(p("/d/f")).unwrap();
        assert!(
            !written.is_empty() && written.len() < 1000,
            "{}",
            written.len()
        );
        assert!(written.iter().all(|&b| b == 7));
        f.sync_data().unwrap();
        vfs.crash(&CrashOptions::default());
        assert_eq!(
            vfs.contents(p("/d/f")).unwrap(),
            written,
            "the prefix was written"
        );
    }

    /// A rate fails operations at random, drawn from the seed: the same seed fails the same
    /// operations, a rate on another path draws nothing, and a crash keeps what it would
    /// have kept without the faults.
    #[test]
    fn fault_rates_are_drawn_from_the_seed() {
        let run = |seed: u64| {
            let (vfs, f) = with_durable_file(seed);
            vfs.set_fault_rate(Fault::WriteIo, 0.3, Some("/d/f"));
            vfs.set_fault_rate(Fault::ReadIo, 1.0, Some("/elsewhere"));
            let failed: Vec<bool> = (0..64u64)
                .map(|i| f.write_at(b"x", i % 8).is_err())
                .collect();
            let mut buf = [0u8; 1];
            f.read_at(&mut buf, 0).unwrap();
            (failed, vfs.faults_injected())
        };
        let (a, counts) = run(5);
        assert_eq!(run(5).0, a);
        let hits = a.iter().filter(|&&x| x).count() as u64;
        assert_eq!(counts.get(Fault::WriteIo), hits);
        assert_eq!(counts.get(Fault::ReadIo), 0);
        assert!((5..40).contains(&hits), "{hits} of 64 at 30%");
        assert_ne!(run(6).0, a);
        // Rates stop at 0.0.
        let (vfs, f) = with_durable_file(1);
        vfs.set_fault_rate(Fault::ExtendIo, 1.0, None);
        assert!(f.write_at(b"x", 0).is_err());
        vfs.set_fault_rate(Fault::ExtendIo, 0.0, None);
        f.write_at(b"x", 0).unwrap();
    }

    #[test]
    fn random_bit_flips_are_counted_and_seeded() {
        let flip = |seed| {
            let (vfs, f) = with_durable_file(seed);
            f.write_at(&[0u8; 4096], 0).unwrap();
            let at = vfs.flip_random_bit(p("/d/f")).unwrap();
            assert_eq!(vfs.faults_injected().get(Fault::BitFlip), 1);
            let data = vfs.contents(p("/d/f")).unwrap();
            assert_eq!(data.iter().map(|b| b.count_ones()).sum::<u32>(), 1);
            assert_eq!(data[at.0 as usize], 1 << at.1);
            at
        };
        assert_eq!(flip(9), flip(9));
        let (vfs, _f) = with_durable_file(1);
        assert!(
            vfs.flip_random_bit(p("/d/f")).is_err(),
            "an empty file has no bit"
        );
    }

    #[test]
    fn after_a_power_cut_nothing_happens_until_the_crash() {
        let (vfs, f) = with_durable_file(1);
        vfs.cut_power_after(2);
        f.write_at(b"ab", 0).unwrap();
        f.sync_data().unwrap();
        let err = f.write_at(b"cd", 0).unwrap_err();
        assert!(err.to_string().contains("power lost"), "{err}");
        assert!(f.sync_data().is_err());
        assert!(vfs.open(p("/d/g"), OpenMode::CreateNew).is_err());
        assert!(vfs.create_dir_all(p("/d/e")).is_err());
        assert_eq!(vfs.contents(p("/d/f")).unwrap(), b"ab");
        vfs.crash(&CrashOptions::default());
        assert_eq!(
            vfs.contents(p("/d/f")).unwrap(),
            b"ab",
            "what was synced before the cut"
        );
        let g = vfs.open(p("/d/f"), OpenMode::Existing).unwrap();
        g.write_at(b"ef", 0).unwrap();
    }
}
