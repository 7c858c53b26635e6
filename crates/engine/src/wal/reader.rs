//! Reading WAL: one record by LSN (through any page source), and [`WalReader`], which reads
//! segment files sequentially for recovery and tells the end of the WAL from corruption.
//!
//! ## End of WAL or corruption?
//! After a crash the last pages written since the last fsync may hold anything: torn or
//! missing sectors, or bytes from before an earlier crash. A bad record is therefore normally
//! the end of the WAL. It is *corruption* when the WAL proves the record was durable: every
//! page carries, in its header, the LSN that was durable when the page was first written
//! (`flush_hint`); a valid page further on whose hint is past the bad record's end shows that
//! the record had been flushed, so its bytes must be intact. Startup then refuses, naming the
//! LSN, rather than silently dropping acknowledged commits.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::record::{self, DecodedRecord, RECORD_HEADER_SIZE};
use super::{
    align8, lsn_to_pos, pos_to_end_lsn, pos_to_lsn, Lsn, CONTRECORD, HDR, PAGE, PH_ADDR,
    PH_FLUSH_HINT, PH_INFO, PH_MAGIC, PH_REM_LEN, READ_FILES, USABLE, WAL_MAGIC, WAL_PAGE_SIZE,
};
use crate::bytes::{u16_at, u32_at, u64_at};
use crate::error::{Error, Result};
use crate::vfs::{OpenMode, Vfs, VfsFile};

type WalPage = Box<[u8; WAL_PAGE_SIZE]>;

/// Does this page's header say it is the WAL page at `page_lsn`?
fn header_is_valid(page: &[u8; WAL_PAGE_SIZE], page_lsn: Lsn) -> bool {
    u16_at(page, PH_MAGIC) == Some(WAL_MAGIC) && u64_at(page, PH_ADDR) == Some(page_lsn.0)
}

/// Reads one WAL page from a segment file; `None` if the file is too short to hold it.
pub(crate) fn read_page(
    file: &dyn VfsFile,
    page_lsn: Lsn,
    segment_size: u64,
) -> Result<Option<WalPage>> {
    let mut page = Box::new([0u8; WAL_PAGE_SIZE]);
    let n = file
        .read_at(&mut page[..], page_lsn.offset_in(segment_size))
        .map_err(|source| Error::WalIo {
            op: "read",
            lsn: page_lsn,
            source,
        })?;
    Ok((n == WAL_PAGE_SIZE).then_some(page))
}

/// Reads the record at `lsn`, fetching pages through `fetch`. The outer error is an I/O
/// failure; the inner one says why the bytes there are not a valid record. With
/// `expected_prev`, the record's back link must match (stale bytes from before a crash fail).
pub(crate) fn read_one(
    lsn: Lsn,
    expected_prev: Option<Lsn>,
    fetch: &mut dyn FnMut(Lsn) -> Result<Option<WalPage>>,
) -> Result<std::result::Result<DecodedRecord, String>> {
    if lsn.offset_in(PAGE) < HDR {
        return Ok(Err(format!("LSN {lsn} points into a page header")));
    }
    let mut page_lsn = lsn.align_down(PAGE);
    let Some(mut page) = fetch(page_lsn)? else {
        return Ok(Err(format!("no WAL page at {page_lsn}")));
    };
    if !header_is_valid(&page, page_lsn) {
        return Ok(Err(format!("invalid WAL page header at {page_lsn}")));
    }
    let off = lsn.offset_in(PAGE) as usize;
    let total =
        match record::total_length(&page[off..off + RECORD_HEADER_SIZE.min(WAL_PAGE_SIZE - off)]) {
            Ok(t) => t,
            Err(e) => return Ok(Err(e.to_string())),
        };
    let mut bytes = Vec::with_capacity(total);
    let mut at = off;
    loop {
        let n = (total - bytes.len()).min(WAL_PAGE_SIZE - at);
        bytes.extend_from_slice(&page[at..at + n]);
        if bytes.len() == total {
            break;
        }
        page_lsn += PAGE;
        page = match fetch(page_lsn)? {
            Some(p) => p,
            None => {
                return Ok(Err(format!(
                    "record at {lsn} continues into a missing page {page_lsn}"
                )))
            }
        };
        let remaining = (total - bytes.len()) as u32;
        if !header_is_valid(&page, page_lsn)
            || u16_at(&page[..], PH_INFO).is_none_or(|info| info & CONTRECORD == 0)
            || u32_at(&page[..], PH_REM_LEN) != Some(remaining)
        {
            return Ok(Err(format!(
                "record at {lsn} has a bad continuation page {page_lsn}"
            )));
        }
        at = HDR as usize;
    }
    let end_lsn = pos_to_end_lsn(lsn_to_pos(lsn) + align8(total as u64));
    let rec = match record::decode(&bytes, lsn, end_lsn) {
        Ok(r) => r,
        Err(e) => return Ok(Err(format!("record at {lsn}: {e}"))),
    };
    if let Some(prev) = expected_prev {
        if rec.prev != prev {
            return Ok(Err(format!(
                "record at {lsn} links back to {}, not to the previous record {prev}",
                rec.prev
            )));
        }
    }
    Ok(Ok(rec))
}

/// Reads WAL segment files sequentially from a start LSN to the end of the WAL.
pub struct WalReader {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    segment_size: u64,
    next: Lsn,
    prev: Option<Lsn>,
    end: Lsn,
    done: bool,
    file: Option<(u64, Arc<dyn VfsFile>)>,
    /// The last page read: consecutive records mostly share a page, and a copy is far
    /// cheaper than a read system call.
    last_page: Option<(Lsn, WalPage)>,
}

impl WalReader {
    pub fn new(vfs: Arc<dyn Vfs>, dir: &Path, segment_size: u64, start: Lsn) -> Self {
        WalReader {
            vfs,
            dir: dir.to_path_buf(),
            segment_size,
            // A position at a page boundary means the first record of that page, which
            // starts after its header.
            next: if start.offset_in(PAGE) == 0 {
                start + HDR
            } else {
                start
            },
            prev: None,
            end: start,
            done: false,
            file: None,
            last_page: None,
        }
    }

    /// The end of the last valid record read (the start, if none).
    pub fn end_lsn(&self) -> Lsn {
        self.end
    }

    /// The start of the last valid record read ([`Lsn::INVALID`] if none).
    pub fn prev_lsn(&self) -> Lsn {
        self.prev.unwrap_or(Lsn::INVALID)
    }

    fn fetch(&mut self, page_lsn: Lsn) -> Result<Option<WalPage>> {
        if let Some((lsn, page)) = &self.last_page {
            if *lsn == page_lsn {
                return Ok(Some(page.clone()));
            }
        }
        let page = self.fetch_from_file(page_lsn)?;
        if let Some(p) = &page {
            self.last_page = Some((page_lsn, p.clone()));
        }
        Ok(page)
    }

    fn fetch_from_file(&mut self, page_lsn: Lsn) -> Result<Option<WalPage>> {
        let segno = page_lsn.segment_of(self.segment_size);
        if self.file.as_ref().is_none_or(|(s, _)| *s != segno) {
            let path = self.dir.join(format!("{segno:016X}"));
            self.file = match self.vfs.open(&path, OpenMode::Existing) {
                Ok(f) => Some((segno, f)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(Error::file("open WAL segment", path, e)),
            };
        }
        let (_, file) = self.file.as_ref().expect("opened above");
        read_page(file.as_ref(), page_lsn, self.segment_size)
    }

    /// The next record, `None` at the end of the WAL, or an error for corruption.
    pub fn next_record(&mut self) -> Result<Option<DecodedRecord>> {
        if self.done {
            return Ok(None);
        }
        let lsn = self.next;
        let prev = self.prev;
        let outcome = read_one(lsn, prev, &mut |p| self.fetch(p))?;
        match outcome {
            Ok(rec) => {
                self.prev = Some(rec.lsn);
                self.end = rec.end_lsn;
                self.next = pos_to_lsn(lsn_to_pos(rec.end_lsn));
                Ok(Some(rec))
            }
            Err(reason) => {
                self.done = true;
                self.check_tail(lsn, &reason)?;
                tracing::debug!(lsn = %lsn, reason, "end of WAL");
                Ok(None)
            }
        }
    }

    /// A bad record at `bad`: is it the torn tail, or was it durable (corruption)?
    fn check_tail(&mut self, bad: Lsn, reason: &str) -> Result<()> {
        let page_lsn = bad.align_down(PAGE);
        let bad_end = match self.fetch(page_lsn)? {
            Some(page) if header_is_valid(&page, page_lsn) && bad.offset_in(PAGE) >= HDR => {
                let off = bad.offset_in(PAGE) as usize;
                match record::total_length(&page[off..off + 4]) {
                    // Upper bound of the record's end, page headers included.
                    Ok(total) => bad + total as u64 + (total as u64 / USABLE + 1) * HDR,
                    Err(_) => bad + RECORD_HEADER_SIZE as u64,
                }
            }
            _ => bad + RECORD_HEADER_SIZE as u64,
        };
        let Some(last_segment) = self.last_segment()? else {
            return Ok(()); // no WAL directory yet: a new WAL
        };
        let mut p = page_lsn + PAGE;
        while p.segment_of(self.segment_size) <= last_segment {
            if let Some(page) = self.fetch(p)? {
                let durable = u64_at(&page[..], PH_FLUSH_HINT)
                    .map(Lsn)
                    .filter(|&hint| header_is_valid(&page, p) && hint >= bad_end);
                if let Some(hint) = durable {
                    return Err(Error::WalCorrupt {
                        lsn: bad,
                        reason: format!(
                            "{reason}; yet the WAL page at {p} was written when WAL up to {hint} was durable"
                        ),
                    });
                }
            }
            p += PAGE;
        }
        Ok(())
    }

    fn last_segment(&self) -> Result<Option<u64>> {
        let names = match self.vfs.list_dir(&self.dir) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::file("list", &self.dir, e)),
        };
        Ok(names
            .iter()
            .filter_map(|n| n.to_str().and_then(|s| u64::from_str_radix(s, 16).ok()))
            .max())
    }
}

// ---------------------------------------------------------------------- reading by LSN

impl super::Wal {
    /// Reads the flushed record at `lsn`: from the WAL buffers when its pages are still
    /// there, else from segment files kept open.
    pub fn read_record(&self, lsn: Lsn) -> Result<DecodedRecord> {
        let flushed = self.flushed_lsn();
        if lsn >= flushed {
            return Err(Error::WalCorrupt {
                lsn,
                reason: format!("record is not flushed yet (flushed up to {flushed})"),
            });
        }
        let mut from_files = false;
        let result = read_one(lsn, None, &mut |page_lsn| {
            if let Some(page) = self.page_from_ring(page_lsn, flushed) {
                return Ok(Some(page));
            }
            from_files = true;
            self.page_from_file(page_lsn)
        })?;
        let counter = if from_files {
            &self.stats.reads_from_files
        } else {
            &self.stats.reads_from_buffers
        };
        counter.fetch_add(1, Ordering::Relaxed);
        result.map_err(|reason| Error::WalCorrupt {
            lsn,
            reason: reason.clone(),
        })
    }

    /// Reads the flushed record at `lsn` from its segment file, opened for this one read and
    /// closed after, never from the WAL buffers: PostgreSQL's `XlogReadTwoPhaseData`, kept as
    /// the old behaviour of seed 003 (`twophase_state = reread_wal`).
    pub fn read_record_from_file(&self, lsn: Lsn) -> Result<DecodedRecord> {
        let flushed = self.flushed_lsn();
        if lsn >= flushed {
            return Err(Error::WalCorrupt {
                lsn,
                reason: format!("record is not flushed yet (flushed up to {flushed})"),
            });
        }
        let mut open: Option<(u64, Arc<dyn VfsFile>)> = None;
        let result = read_one(lsn, None, &mut |page_lsn| {
            let segno = page_lsn.segment_of(self.segment_size);
            let file = match &open {
                Some((s, f)) if *s == segno => Arc::clone(f),
                _ => {
                    let path = self.segment_path(segno);
                    let f = match self.vfs.open(&path, OpenMode::Existing) {
                        Ok(f) => f,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                        Err(e) => return Err(Error::file("open WAL segment", path, e)),
                    };
                    open = Some((segno, Arc::clone(&f)));
                    f
                }
            };
            read_page(file.as_ref(), page_lsn, self.segment_size)
        })?;
        self.stats.reads_from_files.fetch_add(1, Ordering::Relaxed);
        result.map_err(|reason| Error::WalCorrupt { lsn, reason })
    }

    pub(super) fn page_from_file(&self, page_lsn: Lsn) -> Result<Option<Box<[u8; WAL_PAGE_SIZE]>>> {
        let segno = page_lsn.segment_of(self.segment_size);
        let file = {
            let mut files = self.read_files.lock();
            if let Some(i) = files.iter().position(|(s, _)| *s == segno) {
                let entry = files.remove(i);
                let f = Arc::clone(&entry.1);
                files.push(entry);
                f
            } else {
                let path = self.segment_path(segno);
                let f = match self.vfs.open(&path, OpenMode::Existing) {
                    Ok(f) => f,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(Error::file("open WAL segment", path, e)),
                };
                if files.len() >= READ_FILES {
                    files.remove(0);
                }
                files.push((segno, Arc::clone(&f)));
                f
            }
        };
        read_page(file.as_ref(), page_lsn, self.segment_size)
    }
}
