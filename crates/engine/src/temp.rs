//! # temp — temporary files for data that outgrows memory
//!
//! What a query spills (a suspended portal's rows today; sorts, hashes and materialized
//! results later) goes to files `<data>/base/pgsql_tmp/quire_tmp_<n>`, PostgreSQL's
//! directory for them. A [`TempFile`] is written at its end and read at any offset.
//!
//! ## Rules
//! - A temp file belongs to the one owner that created it and is removed when it is
//!   dropped. Files left by a crash are removed when the data directory opens
//!   ([`remove_leftovers`]), as PostgreSQL's `RemovePgTempFiles` does.
//! - Temp files are never fsynced and never WAL-logged: their data does not outlive the
//!   statement that wrote it.
//! - Their I/O goes through the vfs, so the simulated file system sees it like any other.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::vfs::{OpenMode, Vfs, VfsFile};

/// The directory of temp files under a data directory.
pub fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join("base").join("pgsql_tmp")
}

/// The prefix of the names of the temp files made here (other spills, such as the B-tree
/// build's sort runs, have their own).
const PREFIX: &str = "quire_tmp_";

/// Makes temp files under one data directory.
pub struct TempFiles {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    next: AtomicU64,
}

impl TempFiles {
    pub fn new(vfs: Arc<dyn Vfs>, data_dir: &Path) -> Self {
        TempFiles {
            vfs,
            dir: dir(data_dir),
            next: AtomicU64::new(0),
        }
    }

    /// How many temp files were made since the database opened (PostgreSQL's
    /// `pg_stat_database.temp_files`).
    pub fn created(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    /// A new, empty temp file.
    pub fn create(&self) -> Result<TempFile> {
        self.vfs
            .create_dir_all(&self.dir)
            .map_err(|e| Error::file("create directory", &self.dir, e))?;
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("{PREFIX}{n}"));
        let file = self
            .vfs
            .open(&path, OpenMode::CreateNew)
            .map_err(|e| Error::file("create", &path, e))?;
        Ok(TempFile {
            vfs: Arc::clone(&self.vfs),
            path,
            file,
            len_bytes: 0,
        })
    }
}

/// Removes the temp files a previous run left (a crash does not drop them).
pub fn remove_leftovers(vfs: &dyn Vfs, data_dir: &Path) -> Result<()> {
    let dir = dir(data_dir);
    if !vfs.exists(&dir).map_err(|e| Error::file("stat", &dir, e))? {
        return Ok(());
    }
    let entries = vfs
        .list_dir(&dir)
        .map_err(|e| Error::file("list", &dir, e))?;
    // list_dir gives names within the directory.
    for name in entries {
        let ours = name.to_str().is_some_and(|n| n.starts_with(PREFIX));
        if ours {
            let path = dir.join(&name);
            vfs.remove_file(&path)
                .map_err(|e| Error::file("remove", &path, e))?;
        }
    }
    Ok(())
}

/// One temp file, removed when dropped.
pub struct TempFile {
    vfs: Arc<dyn Vfs>,
    path: PathBuf,
    file: Arc<dyn VfsFile>,
    len_bytes: u64,
}

impl TempFile {
    /// Appends `data`; returns the offset it starts at.
    pub fn append(&mut self, data: &[u8]) -> Result<u64> {
        let at = self.len_bytes;
        self.file
            .write_at(data, at)
            .map_err(|e| Error::file("write", &self.path, e))?;
        self.len_bytes += data.len() as u64;
        Ok(at)
    }

    /// Fills `buf` from `offset`; fails if the file ends first.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|e| e > self.len_bytes) {
            return Err(Error::file(
                "read",
                &self.path,
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            ));
        }
        let mut done = 0;
        // Bounded: each turn reads at least one byte or fails.
        while done < buf.len() {
            let n = self
                .file
                .read_at(&mut buf[done..], offset + done as u64)
                .map_err(|e| Error::file("read", &self.path, e))?;
            if n == 0 {
                return Err(Error::file(
                    "read",
                    &self.path,
                    std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
                ));
            }
            done += n;
        }
        Ok(())
    }

    /// Bytes written so far.
    pub fn len_bytes(&self) -> u64 {
        self.len_bytes
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Err(e) = self.vfs.remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot remove a temp file");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::SimVfs;

    #[test]
    fn a_temp_file_reads_back_what_was_appended_and_goes_when_dropped() {
        let vfs: Arc<dyn Vfs> = Arc::new(SimVfs::new(1));
        let data = Path::new("/data");
        let files = TempFiles::new(Arc::clone(&vfs), data);
        let mut f = files.create().unwrap();
        assert_eq!(f.append(b"hello ").unwrap(), 0);
        assert_eq!(f.append(b"world").unwrap(), 6);
        let mut buf = [0u8; 5];
        f.read_exact_at(&mut buf, 6).unwrap();
        assert_eq!(&buf, b"world");
        assert!(f.read_exact_at(&mut buf, 7).is_err(), "past the end");
        let path = f.path.clone();
        drop(f);
        assert!(!vfs.exists(&path).unwrap());
        // A leftover (as a crash leaves one) goes at the next open.
        let g = files.create().unwrap();
        let leftover = g.path.clone();
        std::mem::forget(g);
        assert!(vfs.exists(&leftover).unwrap());
        remove_leftovers(vfs.as_ref(), data).unwrap();
        assert!(!vfs.exists(&leftover).unwrap());
    }
}
