//! The simulated file system: in memory, deterministic from a seed, able to lose power.
//!
//! ## The model (what is durable when)
//! - Each file (inode) has the contents reads see (the page cache) and its *durable*
//!   contents, plus an ordered log of the writes and truncations made since its last fsync.
//!   `sync_data`/`sync_all` apply the log to the durable contents.
//! - Names are separate from contents, as in a real file system: creating, renaming or
//!   removing a file changes only the *current* namespace; `sync_dir(dir)` makes the entries
//!   directly inside `dir` durable. Directories themselves are durable at once (a
//!   simplification: quire creates its directories once, at initialisation).
//! - [`SimVfs::crash`] is power loss: the namespace reverts to its durable form and every file
//!   to its durable contents, except that each logged operation survives with probability
//!   `keep_unsynced_probability` (the kernel happened to write it back), possibly torn at
//!   512-byte sectors. Handles opened before the crash fail from then on.
//! - A failed fsync ([`SimVfs::fail_next_fsync`]) drops the file's logged writes, as Linux
//!   does: reads still see them until the crash, but no later fsync makes them durable.
//! - Every operation is counted exactly as [`super::OsVfs`] counts it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::{DirLock, OpCounters, OpKind, OpenMode, Vfs, VfsFile};

/// The sector size at which a surviving unsynced write may be torn.
pub const SECTOR_SIZE: usize = 512;

/// What survives a crash beyond the durable state.
#[derive(Clone, Debug, Default)]
pub struct CrashOptions {
    /// Probability (0.0..=1.0) that each unsynced write or truncation survives anyway.
    pub keep_unsynced_probability: f64,
    /// A surviving write keeps only a random subset of its 512-byte sectors.
    pub tear_writes: bool,
}

enum Pending {
    Write { offset: u64, bytes: Vec<u8> },
    SetLen(u64),
}

#[derive(Default)]
struct Inode {
    data: Vec<u8>,
    durable: Vec<u8>,
    log: Vec<Pending>,
}

fn apply(target: &mut Vec<u8>, op: &Pending) {
    match op {
        Pending::Write { offset, bytes } => write_into(target, *offset as usize, bytes),
        Pending::SetLen(len) => target.resize(*len as usize, 0),
    }
}

fn write_into(target: &mut Vec<u8>, offset: usize, bytes: &[u8]) {
    let end = offset + bytes.len();
    if target.len() < end {
        target.resize(end, 0);
    }
    target[offset..end].copy_from_slice(bytes);
}

/// SplitMix64: small, fast, and deterministic.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64; // in [0, 1)
        unit < p
    }
}

/// Which fsync is to fail next.
enum FsyncFault {
    Disarmed,
    AnyFile,
    PathContains(String),
}

struct State {
    inodes: HashMap<u64, Inode>,
    next_inode: u64,
    current: BTreeMap<PathBuf, u64>,
    durable: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
    /// Bumped by each crash; handles from an older generation are dead.
    generation: u64,
    rng: Rng,
    /// An armed fsync failure.
    fail_fsync: FsyncFault,
    latency: HashMap<OpKind, Duration>,
    locked_dirs: BTreeSet<PathBuf>,
}

impl State {
    fn dir_exists(&self, dir: &Path) -> bool {
        dir.as_os_str().is_empty() || dir.parent().is_none() || self.dirs.contains(dir)
    }

    fn parent_exists(&self, path: &Path) -> bool {
        path.parent().is_none_or(|p| self.dir_exists(p))
    }
}

/// The simulated file system. Cheap to share as `Arc<SimVfs>`.
pub struct SimVfs {
    state: Arc<Mutex<State>>,
    counters: Arc<OpCounters>,
}

fn normalize(path: &Path) -> PathBuf {
    path.components().collect()
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

impl SimVfs {
    pub fn new(seed: u64) -> Self {
        SimVfs {
            state: Arc::new(Mutex::new(State {
                inodes: HashMap::new(),
                next_inode: 1,
                current: BTreeMap::new(),
                durable: BTreeMap::new(),
                dirs: BTreeSet::new(),
                generation: 0,
                rng: Rng(seed),
                fail_fsync: FsyncFault::Disarmed,
                latency: HashMap::new(),
                locked_dirs: BTreeSet::new(),
            })),
            counters: Arc::new(OpCounters::default()),
        }
    }

    /// Power loss; see the module header.
    pub fn crash(&self, options: &CrashOptions) {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        st.generation += 1;
        st.current = st.durable.clone();
        let reachable: BTreeSet<u64> = st.current.values().copied().collect();
        st.inodes.retain(|id, _| reachable.contains(id));
        let mut ids: Vec<u64> = st.inodes.keys().copied().collect();
        ids.sort_unstable(); // HashMap order is random; the seed must decide everything.
        for id in ids {
            let inode = st.inodes.get_mut(&id).expect("id taken from the map");
            let mut result = std::mem::take(&mut inode.durable);
            for op in inode.log.drain(..) {
                if !st.rng.chance(options.keep_unsynced_probability) {
                    continue;
                }
                match op {
                    Pending::Write { offset, bytes } if options.tear_writes => {
                        tear_into(&mut result, offset as usize, &bytes, &mut st.rng);
                    }
                    other => apply(&mut result, &other),
                }
            }
            inode.data.clone_from(&result);
            inode.durable = result;
        }
    }

    /// The next fsync of a matching file fails with EIO and drops its unsynced writes.
    pub fn fail_next_fsync(&self, path_contains: Option<&str>) {
        self.state.lock().fail_fsync = match path_contains {
            Some(filter) => FsyncFault::PathContains(filter.to_string()),
            None => FsyncFault::AnyFile,
        };
    }

    /// Flips one bit in a file's current and durable contents (media corruption).
    pub fn flip_bit(&self, path: &Path, byte_offset: u64, bit: u8) -> io::Result<()> {
        let path = normalize(path);
        let mut st = self.state.lock();
        let id = *st.current.get(&path).ok_or_else(|| not_found(&path))?;
        let inode = st.inodes.get_mut(&id).expect("names point at live inodes");
        let at = byte_offset as usize;
        if at >= inode.data.len() || bit > 7 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no bit {bit} at byte {byte_offset} of {}", path.display()),
            ));
        }
        inode.data[at] ^= 1 << bit;
        if at < inode.durable.len() {
            inode.durable[at] ^= 1 << bit;
        }
        Ok(())
    }

    /// Every operation of `kind` sleeps `latency` (e.g. 2.5 ms per fsync).
    pub fn set_latency(&self, kind: OpKind, latency: Duration) {
        self.state.lock().latency.insert(kind, latency);
    }

    /// What reads of the file see now.
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.state.lock();
        let id = st.current.get(&normalize(path))?;
        st.inodes.get(id).map(|i| i.data.clone())
    }

    /// What a crash that keeps nothing unsynced would leave of the file.
    pub fn durable_contents(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.state.lock();
        let id = st.durable.get(&normalize(path))?;
        st.inodes.get(id).map(|i| i.durable.clone())
    }

    fn count(&self, kind: OpKind) {
        self.counters.bump(kind);
        let latency = self.state.lock().latency.get(&kind).copied();
        if let Some(d) = latency {
            std::thread::sleep(d);
        }
    }
}

/// Applies the sectors of a write that happen to reach the disk.
fn tear_into(target: &mut Vec<u8>, offset: usize, bytes: &[u8], rng: &mut Rng) {
    let mut start = 0;
    while start < bytes.len() {
        // Sectors are aligned to the file, not to the write.
        let sector_end = ((offset + start) / SECTOR_SIZE + 1) * SECTOR_SIZE - offset;
        let end = sector_end.min(bytes.len());
        if rng.chance(0.5) {
            write_into(target, offset + start, &bytes[start..end]);
        } else if target.len() < offset + end {
            // The file grew to cover the write, but this sector's data never arrived.
            target.resize(offset + end, 0);
        }
        start = end;
    }
}

struct SimFile {
    state: Arc<Mutex<State>>,
    counters: Arc<OpCounters>,
    inode: u64,
    generation: u64,
    path: PathBuf,
}

impl SimFile {
    fn with_inode<T>(
        &self,
        kind: OpKind,
        f: impl FnOnce(&mut State, u64) -> io::Result<T>,
    ) -> io::Result<T> {
        self.counters.bump(kind);
        let (result, latency) = {
            let mut st = self.state.lock();
            if st.generation != self.generation {
                return Err(io::Error::other(format!(
                    "{}: file system crashed since this file was opened",
                    self.path.display()
                )));
            }
            let latency = st.latency.get(&kind).copied();
            (f(&mut st, self.inode), latency)
        };
        if let Some(d) = latency {
            std::thread::sleep(d);
        }
        result
    }

    fn inode(st: &mut State, id: u64) -> &mut Inode {
        st.inodes
            .get_mut(&id)
            .expect("an open handle keeps its inode alive")
    }

    fn sync(&self) -> io::Result<()> {
        let path = self.path.to_string_lossy().into_owned();
        self.with_inode(OpKind::Fsync, |st, id| {
            let fail = match &st.fail_fsync {
                FsyncFault::AnyFile => true,
                FsyncFault::PathContains(filter) => path.contains(filter.as_str()),
                FsyncFault::Disarmed => false,
            };
            let inode = Self::inode(st, id);
            if fail {
                // Linux marks the dirty pages clean after a failed writeback: they are lost.
                inode.log.clear();
                st.fail_fsync = FsyncFault::Disarmed;
                return Err(io::Error::from_raw_os_error(5));
            }
            let mut durable = std::mem::take(&mut inode.durable);
            for op in inode.log.drain(..) {
                apply(&mut durable, &op);
            }
            inode.durable = durable;
            Ok(())
        })
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        self.counters.bump(OpKind::Close);
    }
}

impl VfsFile for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.with_inode(OpKind::Read, |st, id| {
            let data = &Self::inode(st, id).data;
            let start = (offset as usize).min(data.len());
            let n = buf.len().min(data.len() - start);
            buf[..n].copy_from_slice(&data[start..start + n]);
            Ok(n)
        })
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.with_inode(OpKind::Write, |st, id| {
            let inode = Self::inode(st, id);
            write_into(&mut inode.data, offset as usize, buf);
            inode.log.push(Pending::Write {
                offset,
                bytes: buf.to_vec(),
            });
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
        self.with_inode(OpKind::SizeProbe, |st, id| {
            Ok(Self::inode(st, id).data.len() as u64)
        })
    }

    fn set_len(&self, size_bytes: u64) -> io::Result<()> {
        self.with_inode(OpKind::Truncate, |st, id| {
            let inode = Self::inode(st, id);
            inode.data.resize(size_bytes as usize, 0);
            inode.log.push(Pending::SetLen(size_bytes));
            Ok(())
        })
    }
}

struct SimDirLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl DirLock for SimDirLock {}

impl Drop for SimDirLock {
    fn drop(&mut self) {
        self.state.lock().locked_dirs.remove(&self.path);
    }
}

impl Vfs for SimVfs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>> {
        self.count(OpKind::Open);
        let path = normalize(path);
        let mut st = self.state.lock();
        if !st.parent_exists(&path) {
            return Err(not_found(&path));
        }
        let existing = st.current.get(&path).copied();
        let inode = match (existing, mode) {
            (Some(_), OpenMode::CreateNew) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{}: file exists", path.display()),
                ))
            }
            (Some(id), _) => id,
            (None, OpenMode::Existing) => return Err(not_found(&path)),
            (None, _) => {
                let id = st.next_inode;
                st.next_inode += 1;
                st.inodes.insert(id, Inode::default());
                st.current.insert(path.clone(), id);
                id
            }
        };
        Ok(Arc::new(SimFile {
            state: Arc::clone(&self.state),
            counters: Arc::clone(&self.counters),
            inode,
            generation: st.generation,
            path,
        }))
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        let path = normalize(path);
        let st = self.state.lock();
        Ok(st.current.contains_key(&path) || st.dirs.contains(&path))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.count(OpKind::Unlink);
        let path = normalize(path);
        let mut st = self.state.lock();
        st.current
            .remove(&path)
            .map(|_| ())
            .ok_or_else(|| not_found(&path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.count(OpKind::Rename);
        let (from, to) = (normalize(from), normalize(to));
        let mut st = self.state.lock();
        if !st.parent_exists(&to) {
            return Err(not_found(&to));
        }
        let id = st.current.remove(&from).ok_or_else(|| not_found(&from))?;
        st.current.insert(to, id);
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let path = normalize(path);
        let mut st = self.state.lock();
        for dir in path.ancestors() {
            if dir.parent().is_some() && !dir.as_os_str().is_empty() {
                st.dirs.insert(dir.to_path_buf());
            }
        }
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.count(OpKind::DirSync);
        let dir = normalize(path);
        let mut guard = self.state.lock();
        let st = &mut *guard;
        if !st.dir_exists(&dir) {
            return Err(not_found(&dir));
        }
        let in_dir = |p: &Path| p.parent() == Some(dir.as_path());
        st.durable.retain(|p, _| !in_dir(p));
        for (p, id) in &st.current {
            if in_dir(p) {
                st.durable.insert(p.clone(), *id);
            }
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        let dir = normalize(path);
        let st = self.state.lock();
        if !st.dir_exists(&dir) {
            return Err(not_found(&dir));
        }
        let mut names: Vec<PathBuf> = st
            .current
            .keys()
            .chain(st.dirs.iter())
            .filter(|p| p.parent() == Some(dir.as_path()))
            .filter_map(|p| p.file_name().map(PathBuf::from))
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn lock_dir(&self, path: &Path) -> io::Result<Box<dyn DirLock>> {
        let path = normalize(path);
        let mut st = self.state.lock();
        if !st.locked_dirs.insert(path.clone()) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("data directory {} is in use", path.display()),
            ));
        }
        Ok(Box::new(SimDirLock {
            state: Arc::clone(&self.state),
            path,
        }))
    }

    fn counters(&self) -> &OpCounters {
        &self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    /// A file at /d/name that is created, synced, and whose name is synced.
    fn durable_file(vfs: &SimVfs, name: &str, bytes: &[u8]) -> Arc<dyn VfsFile> {
        vfs.create_dir_all(&p("/d")).unwrap();
        let f = vfs
            .open(&p(&format!("/d/{name}")), OpenMode::CreateNew)
            .unwrap();
        f.write_at(bytes, 0).unwrap();
        f.sync_data().unwrap();
        vfs.sync_dir(&p("/d")).unwrap();
        f
    }

    #[test]
    fn unsynced_writes_are_lost_and_synced_ones_survive() {
        let vfs = SimVfs::new(1);
        let f = durable_file(&vfs, "a", b"old!");
        f.write_at(b"new!", 0).unwrap();
        f.write_at(b"more", 4).unwrap();
        assert_eq!(vfs.contents(&p("/d/a")).unwrap(), b"new!more");
        vfs.crash(&CrashOptions::default());
        assert_eq!(vfs.contents(&p("/d/a")).unwrap(), b"old!");
        let f = vfs.open(&p("/d/a"), OpenMode::Existing).unwrap();
        f.write_at(b"NEW!", 0).unwrap();
        f.sync_all().unwrap();
        vfs.crash(&CrashOptions::default());
        assert_eq!(vfs.contents(&p("/d/a")).unwrap(), b"NEW!");
    }

    #[test]
    fn a_file_whose_directory_was_not_synced_disappears() {
        let vfs = SimVfs::new(2);
        vfs.create_dir_all(&p("/d")).unwrap();
        let f = vfs.open(&p("/d/x"), OpenMode::CreateNew).unwrap();
        f.write_at(b"data", 0).unwrap();
        f.sync_data().unwrap();
        vfs.crash(&CrashOptions {
            keep_unsynced_probability: 1.0,
            tear_writes: false,
        });
        assert!(!vfs.exists(&p("/d/x")).unwrap());
    }

    #[test]
    fn rename_and_remove_are_durable_only_after_sync_dir() {
        let vfs = SimVfs::new(3);
        durable_file(&vfs, "a", b"1");
        vfs.rename(&p("/d/a"), &p("/d/b")).unwrap();
        vfs.crash(&CrashOptions::default());
        assert!(vfs.exists(&p("/d/a")).unwrap() && !vfs.exists(&p("/d/b")).unwrap());
        vfs.rename(&p("/d/a"), &p("/d/b")).unwrap();
        vfs.sync_dir(&p("/d")).unwrap();
        vfs.crash(&CrashOptions::default());
        assert!(!vfs.exists(&p("/d/a")).unwrap() && vfs.exists(&p("/d/b")).unwrap());
        vfs.remove_file(&p("/d/b")).unwrap();
        vfs.crash(&CrashOptions::default());
        assert_eq!(vfs.contents(&p("/d/b")).unwrap(), b"1");
        assert_eq!(vfs.list_dir(&p("/d")).unwrap(), vec![p("b")]);
    }

    #[test]
    fn a_failed_fsync_loses_the_data_for_good() {
        let vfs = SimVfs::new(4);
        let f = durable_file(&vfs, "wal", b"AAAA");
        let g = durable_file(&vfs, "other", b"o");
        f.write_at(b"BBBB", 0).unwrap();
        vfs.fail_next_fsync(Some("wal"));
        g.sync_data().unwrap(); // does not match the filter
        let err = f.sync_data().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(5));
        // The page cache still shows the write, and the next fsync "succeeds"...
        assert_eq!(vfs.contents(&p("/d/wal")).unwrap(), b"BBBB");
        f.sync_data().unwrap();
        // ...but the data never reached the disk.
        vfs.crash(&CrashOptions::default());
        assert_eq!(vfs.contents(&p("/d/wal")).unwrap(), b"AAAA");
    }

    fn torn_outcome(seed: u64) -> Vec<u8> {
        let vfs = SimVfs::new(seed);
        let f = durable_file(&vfs, "t", &[b'o'; 4 * SECTOR_SIZE]);
        f.write_at(&[b'n'; 4 * SECTOR_SIZE], 0).unwrap();
        vfs.crash(&CrashOptions {
            keep_unsynced_probability: 1.0,
            tear_writes: true,
        });
        vfs.contents(&p("/d/t")).unwrap()
    }

    #[test]
    fn torn_writes_mix_old_and_new_sectors_deterministically() {
        let mut saw_mix = false;
        for seed in 0..64 {
            let bytes = torn_outcome(seed);
            assert_eq!(
                bytes,
                torn_outcome(seed),
                "seed {seed} is not deterministic"
            );
            assert_eq!(bytes.len(), 4 * SECTOR_SIZE);
            for sector in bytes.chunks(SECTOR_SIZE) {
                assert!(sector.iter().all(|b| *b == sector[0]), "a sector was split");
            }
            let new = bytes.chunks(SECTOR_SIZE).filter(|s| s[0] == b'n').count();
            saw_mix |= new > 0 && new < 4;
        }
        assert!(saw_mix, "no seed tore a write");
    }

    #[test]
    fn flip_bit_changes_exactly_one_bit() {
        let vfs = SimVfs::new(5);
        durable_file(&vfs, "f", &[0u8; 100]);
        vfs.flip_bit(&p("/d/f"), 42, 3).unwrap();
        let bytes = vfs.durable_contents(&p("/d/f")).unwrap();
        let ones: u32 = bytes.iter().map(|b| b.count_ones()).sum();
        assert_eq!((ones, bytes[42]), (1, 8));
        assert!(vfs.flip_bit(&p("/d/f"), 100, 0).is_err());
    }

    #[test]
    fn every_operation_is_counted_like_the_os_layer() {
        let vfs = SimVfs::new(6);
        vfs.create_dir_all(&p("/d")).unwrap();
        {
            let f = vfs.open(&p("/d/f"), OpenMode::CreateNew).unwrap();
            f.write_at(b"x", 0).unwrap();
            let mut b = [0u8; 1];
            f.read_at(&mut b, 0).unwrap();
            f.size().unwrap();
            f.set_len(0).unwrap();
            f.sync_data().unwrap();
        }
        vfs.sync_dir(&p("/d")).unwrap();
        vfs.rename(&p("/d/f"), &p("/d/g")).unwrap();
        vfs.remove_file(&p("/d/g")).unwrap();
        let c = vfs.counters().snapshot();
        for kind in OpKind::ALL {
            assert_eq!(c.get(kind), 1, "{kind:?}");
        }
    }

    #[test]
    fn handles_from_before_a_crash_fail() {
        let vfs = SimVfs::new(7);
        let f = durable_file(&vfs, "a", b"1");
        vfs.crash(&CrashOptions::default());
        let err = f.write_at(b"2", 0).unwrap_err();
        assert!(err.to_string().contains("crashed"), "{err}");
        assert_eq!(vfs.contents(&p("/d/a")).unwrap(), b"1");
    }

    #[test]
    fn the_directory_lock_is_exclusive() {
        let vfs = SimVfs::new(8);
        let lock = vfs.lock_dir(&p("/d")).unwrap();
        assert_eq!(
            vfs.lock_dir(&p("/d")).err().map(|e| e.kind()),
            Some(io::ErrorKind::WouldBlock)
        );
        drop(lock);
        vfs.lock_dir(&p("/d")).unwrap();
    }

    #[test]
    fn opening_in_a_missing_directory_fails() {
        let vfs = SimVfs::new(9);
        let err = vfs
            .open(&p("/nope/f"), OpenMode::CreateIfMissing)
            .err()
            .unwrap();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn concurrent_writers_on_different_files() {
        let vfs = Arc::new(SimVfs::new(10));
        vfs.create_dir_all(&p("/d")).unwrap();
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let vfs = Arc::clone(&vfs);
                std::thread::spawn(move || {
                    let f = vfs
                        .open(&p(&format!("/d/{t}")), OpenMode::CreateNew)
                        .unwrap();
                    for i in 0..200u64 {
                        f.write_at(&[t; 8], i * 8).unwrap();
                    }
                    f.sync_data().unwrap();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        vfs.sync_dir(&p("/d")).unwrap();
        vfs.crash(&CrashOptions::default());
        for t in 0..4u8 {
            let bytes = vfs.contents(&p(&format!("/d/{t}"))).unwrap();
            assert_eq!(bytes, vec![t; 1600]);
        }
    }
}
