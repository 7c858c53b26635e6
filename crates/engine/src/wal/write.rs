//! Writing and flushing: one thread at a time (the writer mutex) writes the complete bytes
//! of the ring to segment files and fdatasyncs them; a flush writes and syncs everything
//! complete, so one fdatasync serves every committer queued behind it.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Lsn, Wal, MAX_WRITE_BYTES, PAGE, PH_FLUSH_HINT};
use crate::error::{Error, Result};
use crate::vfs::{OpenMode, VfsFile};

pub(super) struct Writer {
    /// Segment files written since the last fsync (and the current one), by number.
    open: BTreeMap<u64, Arc<dyn VfsFile>>,
    unsynced: Vec<u64>,
    dir_dirty: bool,
    scratch: Vec<u8>,
}

impl Writer {
    pub(super) fn new() -> Self {
        Writer {
            open: BTreeMap::new(),
            unsynced: Vec::new(),
            dir_dirty: false,
            scratch: Vec::new(),
        }
    }
}

impl Wal {
    /// Writes (without fsync) at least up to `need` so ring pages before it can be reused.
    pub(super) fn write_out(&self, need: Lsn, sync: bool) -> Result<()> {
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

    pub(super) fn segment_path(&self, segno: u64) -> PathBuf {
        self.dir.join(format!("{segno:016X}"))
    }

    pub(super) fn segment_for_write(&self, w: &mut Writer, segno: u64) -> Result<Arc<dyn VfsFile>> {
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
    pub(super) fn write_locked(&self, w: &mut Writer, target: Lsn) -> Result<()> {
        let mut from = self.written_upto.load(Ordering::Acquire);
        while from < target {
            let segno = from.segment_of(self.segment_size);
            let to = target
                .min(Lsn((segno + 1) * self.segment_size))
                .min(self.ring.wrap_after(from))
                .min(from + MAX_WRITE_BYTES);
            let len = (to - from) as usize;
            w.scratch.resize(len, 0);
            self.copy_complete_from_ring(from, &mut w.scratch[..len]);
            // Stamp each page first written here with what was durable then: a reader that
            // finds a bad record uses it to tell a torn tail from corruption.
            let hint = self.flushed_upto.load(Ordering::Acquire).0.to_le_bytes();
            let mut page_start = Lsn(from.0.next_multiple_of(PAGE));
            while page_start < to {
                let at = (page_start - from) as usize + PH_FLUSH_HINT;
                w.scratch[at..at + 8].copy_from_slice(&hint);
                page_start += PAGE;
            }
            let file = self
                .segment_for_write(w, segno)
                .map_err(|e| self.stop(e))?;
            file.write_at(&w.scratch[..len], from.offset_in(self.segment_size))
                .map_err(|source| {
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
            if let Err(source) = file.sync_data() {
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
