//! The operating-system file layer: positional I/O on real files, created with the modes
//! PostgreSQL gives a data directory's files (`0600`) and directories (`0700`).

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{sys, DirLock, OpCounters, OpKind, OpenMode, Ownership, Vfs, VfsFile};

/// The mode of every file the engine creates: the owner reads and writes, nobody else
/// (PostgreSQL's `PG_FILE_MODE_OWNER`).
pub const FILE_CREATE_MODE: u32 = 0o600;
/// The mode of every directory the engine creates (PostgreSQL's `PG_DIR_MODE_OWNER`).
pub const DIR_CREATE_MODE: u32 = 0o700;

/// The real file system. Counts every call it makes.
#[derive(Debug, Default)]
pub struct OsVfs {
    counters: Arc<OpCounters>,
}

impl OsVfs {
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens `path` read-write, with `flags` (`O_*`) added to those `mode` implies.
    fn open_with_flags(
        &self,
        path: &Path,
        mode: OpenMode,
        flags: i32,
    ) -> io::Result<Arc<dyn VfsFile>> {
        self.counters.bump(OpKind::Open);
        let mut opts = OpenOptions::new();
        opts.read(true)
            .write(true)
            .custom_flags(flags)
            .mode(FILE_CREATE_MODE);
        match mode {
            OpenMode::Existing => {}
            OpenMode::CreateIfMissing => {
                opts.create(true);
            }
            OpenMode::CreateNew => {
                opts.create_new(true);
            }
        }
        let file = opts.open(path)?;
        Ok(Arc::new(OsFile {
            file,
            counters: Arc::clone(&self.counters),
            direct: flags & libc::O_DIRECT != 0,
        }))
    }
}

struct OsFile {
    file: File,
    counters: Arc<OpCounters>,
    direct: bool,
}

impl Drop for OsFile {
    fn drop(&mut self) {
        self.counters.bump(OpKind::Close);
    }
}

impl VfsFile for OsFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.counters.bump(OpKind::Read);
        // One pread may return less than asked; loop until full or end of file, so callers
        // see a short count only at end of file.
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.counters.bump(OpKind::Write);
        self.file.write_all_at(buf, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.counters.bump(OpKind::Fsync);
        self.file.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.counters.bump(OpKind::Fsync);
        self.file.sync_all()
    }

    fn size(&self) -> io::Result<u64> {
        self.counters.bump(OpKind::SizeProbe);
        // lseek(SEEK_END), as PostgreSQL's FileSize() does; the offset is unused by pread.
        (&self.file).seek(SeekFrom::End(0))
    }

    fn set_len(&self, size_bytes: u64) -> io::Result<()> {
        self.counters.bump(OpKind::Truncate);
        self.file.set_len(size_bytes)
    }

    fn is_direct(&self) -> bool {
        self.direct
    }
}

struct OsDirLock {
    _file: File,
}

impl DirLock for OsDirLock {}

impl Vfs for OsVfs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>> {
        self.open_with_flags(path, mode, 0)
    }

    fn open_direct(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>> {
        match self.open_with_flags(path, mode, libc::O_DIRECT) {
            // The file system has no direct I/O (older tmpfs, some FUSE file systems): its
            // cache is then the only way to the file. Linux refuses `O_DIRECT` only after it
            // created the file, so a `CreateNew` that got this far made it, and may open it.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                let mode = match mode {
                    OpenMode::CreateNew => OpenMode::CreateIfMissing,
                    other => other,
                };
                self.open(path, mode)
            }
            opened => opened,
        }
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        path.try_exists()
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.counters.bump(OpKind::Unlink);
        fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.counters.bump(OpKind::Rename);
        fs::rename(from, to)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        DirBuilder::new()
            .recursive(true)
            .mode(DIR_CREATE_MODE)
            .create(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.counters.bump(OpKind::DirSync);
        File::open(path)?.sync_all()
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(path)? {
            names.push(PathBuf::from(entry?.file_name()));
        }
        names.sort();
        Ok(names)
    }

    fn lock_dir(&self, path: &Path) -> io::Result<Box<dyn DirLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(FILE_CREATE_MODE)
            .open(path.join("quire.lock"))?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(OsDirLock { _file: file })),
            Err(fs::TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "data directory {} is in use by another process",
                    path.display()
                ),
            )),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }

    fn restrict_dir_to_owner(&self, path: &Path) -> io::Result<()> {
        fs::set_permissions(path, fs::Permissions::from_mode(DIR_CREATE_MODE))
    }

    fn ownership(&self, path: &Path) -> io::Result<Option<Ownership>> {
        let meta = fs::metadata(path)?;
        Ok(Some(Ownership {
            mode: meta.mode() & 0o7777,
            owned_by_process_user: meta.uid() == sys::effective_uid(),
        }))
    }

    fn counters(&self) -> &OpCounters {
        &self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positional_io_and_counters() {
        let dir = tempfile::tempdir().unwrap();
        let vfs = OsVfs::new();
        let path = dir.path().join("f");
        let before = vfs.counters().snapshot();
        {
            let f = vfs.open(&path, OpenMode::CreateNew).unwrap();
            f.write_at(b"hello", 8192).unwrap();
            assert_eq!(f.size().unwrap(), 8197);
            let mut buf = [0u8; 5];
            assert_eq!(f.read_at(&mut buf, 8192).unwrap(), 5);
            assert_eq!(&buf, b"hello");
            assert_eq!(f.read_at(&mut buf, 9000).unwrap(), 0);
            f.sync_data().unwrap();
            f.set_len(0).unwrap();
        }
        vfs.sync_dir(dir.path()).unwrap();
        let c = vfs.counters().snapshot().since(&before);
        assert_eq!(c.get(OpKind::Open), 1);
        assert_eq!(c.get(OpKind::Close), 1);
        assert_eq!(c.get(OpKind::Write), 1);
        assert_eq!(c.get(OpKind::Read), 2);
        assert_eq!(c.get(OpKind::SizeProbe), 1);
        assert_eq!(c.get(OpKind::Fsync), 1);
        assert_eq!(c.get(OpKind::Truncate), 1);
        assert_eq!(c.get(OpKind::DirSync), 1);
        assert!(vfs.open(&path, OpenMode::CreateNew).is_err());
    }

    #[test]
    fn a_direct_file_takes_aligned_writes_and_the_kernel_refuses_others() {
        use crate::vfs::DIRECT_IO_ALIGN;
        let dir = tempfile::tempdir().unwrap();
        let vfs = OsVfs::new();
        let path = dir.path().join("f");
        let f = vfs.open_direct(&path, OpenMode::CreateNew).unwrap();
        let mut mem = vec![0u8; 3 * DIRECT_IO_ALIGN];
        let at = mem.as_ptr().align_offset(DIRECT_IO_ALIGN);
        let block = &mut mem[at..at + DIRECT_IO_ALIGN];
        block.fill(7);
        f.write_at(block, DIRECT_IO_ALIGN as u64).unwrap();
        f.sync_data().unwrap();
        if f.is_direct() {
            // O_DIRECT is really set: the kernel refuses what direct I/O cannot do.
            let refused = f.write_at(block, 100).unwrap_err();
            assert_eq!(refused.raw_os_error(), Some(libc::EINVAL));
        } else {
            eprintln!(
                "the file system of {} has no direct I/O",
                dir.path().display()
            );
        }
        let buffered = vfs.open(&path, OpenMode::Existing).unwrap();
        assert!(!buffered.is_direct());
        let mut back = vec![0u8; 2 * DIRECT_IO_ALIGN];
        assert_eq!(buffered.read_at(&mut back, 0).unwrap(), back.len());
        assert!(back[..DIRECT_IO_ALIGN].iter().all(|&b| b == 0));
        assert!(back[DIRECT_IO_ALIGN..].iter().all(|&b| b == 7));
    }

    #[test]
    fn data_directory_lock_is_exclusive() {
        let dir = tempfile::tempdir().unwrap();
        let vfs = OsVfs::new();
        let lock = vfs.lock_dir(dir.path()).unwrap();
        let err = vfs
            .lock_dir(dir.path())
            .err()
            .expect("second lock must fail");
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        drop(lock);
        vfs.lock_dir(dir.path()).unwrap();
    }
}
