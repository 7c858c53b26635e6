//! The WAL buffers (`wal_buffers`): a ring of WAL pages in raw memory that inserters copy
//! records into in parallel and the writer and readers copy out of, and the writer's aligned
//! staging buffer for direct I/O ([`IoBuffer`]). The only module of the engine allowed
//! `unsafe`: every access to the ring's bytes is here, each under the protocol stated on
//! [`Ring`], with its `SAFETY:` argument next to it.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::sync::atomic::Ordering;

use super::{
    AtomicLsn, InsertSlot, Lsn, Wal, CONTRECORD, EMPTY, HDR, PAGE, PH_ADDR, PH_INFO, PH_MAGIC,
    PH_FLUSH_HINT, PH_REM_LEN, WAL_MAGIC, WAL_PAGE_HEADER_SIZE, WAL_PAGE_SIZE,
};
use super::write::Writer;
use crate::error::Result;
use crate::vfs::DIRECT_IO_ALIGN;

/// The WAL buffers: `npages` pages of raw memory shared by inserters and the writer.
///
/// Safety protocol: the bytes of a reserved record belong to its inserter until its slot
/// publishes past them; a page's header belongs to whoever holds `init_lock` while the page
/// is (re)initialised, its continuation fields to the one inserter whose record continues
/// onto it, and its flush hint to the writer, which stamps it before the page's first
/// write-out. The writer reads only complete bytes, and writes them to the segment file
/// straight from the ring. Pages are set up in LSN order, each only after the page its slot
/// held has been written out, and readers copy only under `init_lock`. So no two threads
/// ever touch the same byte at once unless both only read.
pub(super) struct Ring {
    bytes: Box<[UnsafeCell<u8>]>,
    npages: u64,
    /// The LSN of the page each slot holds (`EMPTY` if none yet).
    pub(super) page_addr: Box<[AtomicLsn]>,
}

// SAFETY: see the protocol above; all shared access goes through raw pointers to
// `UnsafeCell` bytes, under that protocol.
unsafe impl Sync for Ring {}

impl Ring {
    pub(super) fn new(npages: u64) -> Self {
        Ring {
            bytes: (0..npages * PAGE).map(|_| UnsafeCell::new(0)).collect(),
            npages,
            page_addr: (0..npages).map(|_| AtomicLsn::new(EMPTY)).collect(),
        }
    }

    pub(super) fn slot(&self, page_lsn: Lsn) -> usize {
        ((page_lsn.0 / PAGE) % self.npages) as usize
    }

    fn ptr(&self, lsn: Lsn) -> *mut u8 {
        let at = lsn.offset_in(self.npages * PAGE) as usize;
        // Pointer from the whole slice, so it may cover a whole page.
        UnsafeCell::raw_get(self.bytes.as_ptr().wrapping_add(at))
    }

    /// # Safety
    /// The caller owns bytes `lsn..lsn+src.len()`, which lie within one page.
    unsafe fn write(&self, lsn: Lsn, src: &[u8]) {
        debug_assert!(lsn.offset_in(PAGE) + src.len() as u64 <= PAGE);
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr(lsn), src.len()) };
    }

    /// Zeroes the whole page at `page_lsn` in place.
    ///
    /// # Safety
    /// The caller owns the page: it holds `init_lock` and the page its slot held is written
    /// out, so no inserter, writer or reader touches these bytes meanwhile.
    unsafe fn zero_page(&self, page_lsn: Lsn) {
        debug_assert_eq!(page_lsn.offset_in(PAGE), 0);
        unsafe { std::ptr::write_bytes(self.ptr(page_lsn), 0, WAL_PAGE_SIZE) };
    }

    /// # Safety
    /// Nobody writes bytes `lsn..lsn+dst.len()` meanwhile; they do not wrap around the ring.
    unsafe fn read(&self, lsn: Lsn, dst: &mut [u8]) {
        debug_assert!(lsn.offset_in(self.npages * PAGE) + dst.len() as u64 <= self.npages * PAGE);
        unsafe { std::ptr::copy_nonoverlapping(self.ptr(lsn), dst.as_mut_ptr(), dst.len()) };
    }

    /// Where the ring's memory wraps next after `lsn`.
    pub(super) fn wrap_after(&self, lsn: Lsn) -> Lsn {
        let size = self.npages * PAGE;
        lsn.align_down(size) + size
    }
}

#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct IoBlock([u8; DIRECT_IO_ALIGN]);

const _: () = assert!(std::mem::align_of::<IoBlock>() == DIRECT_IO_ALIGN);

/// A buffer aligned for direct I/O, in whole blocks of [`DIRECT_IO_ALIGN`] bytes.
pub(super) struct IoBuffer {
    blocks: Box<[IoBlock]>,
}

impl IoBuffer {
    pub(super) fn new(size_bytes: usize) -> Self {
        IoBuffer {
            blocks: vec![IoBlock([0; DIRECT_IO_ALIGN]); size_bytes.div_ceil(DIRECT_IO_ALIGN)]
                .into_boxed_slice(),
        }
    }

    /// The first `len` bytes, which must fit.
    fn bytes_mut(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.blocks.len() * DIRECT_IO_ALIGN, "staged write larger than its buffer");
        // SAFETY: `IoBlock` is `repr(C)` around a byte array, so the boxed slice is
        // `blocks.len() * DIRECT_IO_ALIGN` contiguous initialised bytes, borrowed mutably here.
        unsafe { std::slice::from_raw_parts_mut(self.blocks.as_mut_ptr().cast::<u8>(), len) }
    }
}

impl Wal {
    pub(super) fn copy_into_ring(&self, slot: &InsertSlot, start: Lsn, bytes: &[u8]) -> Result<()> {
        let mut pos = start;
        let mut done = 0usize;
        loop {
            let page_lsn = pos.align_down(PAGE);
            self.ensure_page(page_lsn, slot, pos)?;
            let n = (bytes.len() - done).min(((page_lsn + PAGE) - pos) as usize);
            // SAFETY: these bytes are reserved by this insertion.
            unsafe { self.ring.write(pos, &bytes[done..done + n]) };
            done += n;
            if done == bytes.len() {
                return Ok(());
            }
            let next = page_lsn + PAGE;
            self.ensure_page(next, slot, page_lsn + PAGE)?;
            let rem_len = (bytes.len() - done) as u32;
            let mut header = [0u8; 8];
            header[PH_INFO..PH_INFO + 2].copy_from_slice(&CONTRECORD.to_le_bytes());
            header[PH_REM_LEN..PH_REM_LEN + 4].copy_from_slice(&rem_len.to_le_bytes());
            // SAFETY: only the record continuing onto a page writes its continuation fields,
            // after the page was initialised (ensure_page) and before its progress passes them.
            unsafe { self.ring.write(next + PH_INFO as u64, &header[PH_INFO..8]) };
            pos = next + HDR;
        }
    }

    /// Makes the ring slot for `page_lsn` hold that page. Pages are set up strictly in
    /// order (PostgreSQL's `AdvanceXLInsertBuffer`): whoever needs a page not yet set up
    /// first sets up every page before it, each only after the page its slot held was written
    /// out. So a page `wal_buffers` further on can never take the slot of a page whose
    /// inserter has reserved bytes on it but not yet reached it: setting that later page up
    /// waits for the write-out of this one, which waits for that insertion. `progress` is
    /// how far this insertion has copied: published before waiting, so the writer can write
    /// what precedes it.
    pub(super) fn ensure_page(
        &self,
        page_lsn: Lsn,
        slot: &InsertSlot,
        progress: Lsn,
    ) -> Result<()> {
        let idx = self.ring.slot(page_lsn);
        // Bounded: each turn either returns or writes out the page a slot held before.
        for _ in 0..1_000_000 {
            if self.ring.page_addr[idx].load(Ordering::Acquire) == page_lsn {
                return Ok(());
            }
            let mut next = self.init_lock.lock();
            let old = loop {
                if *next > page_lsn {
                    break None;
                }
                let old = self.ring.page_addr[self.ring.slot(*next)].load(Ordering::Acquire);
                if old != EMPTY && self.written_upto.load(Ordering::Acquire) < old + PAGE {
                    break Some(old);
                }
                self.init_page(*next);
                *next += PAGE;
            };
            let Some(old) = old else {
                let held = self.ring.page_addr[idx].load(Ordering::Acquire);
                assert_eq!(held, page_lsn, "WAL ring slot taken by another page");
                drop(next);
                return self.write_ahead(page_lsn, slot, progress);
            };
            drop(next);
            slot.publish(progress);
            self.stats.buffers_full.fetch_add(1, Ordering::Relaxed);
            self.write_out(old + PAGE)?;
        }
        unreachable!("ensure_page did not converge")
    }

    /// Once half the ring is unwritten, what is complete is written out, so that the
    /// write-out overlaps insertion instead of an inserter finding the ring full and waiting
    /// for all of it to be written. The WAL writer does it when one runs (PostgreSQL's
    /// walwriter writes in the background too): a bulk change's inserter then goes on
    /// copying while another core writes. Else an inserter that finds the writer free does.
    fn write_ahead(&self, page_lsn: Lsn, slot: &InsertSlot, progress: Lsn) -> Result<()> {
        if !self.unwritten_past_half(page_lsn) {
            return Ok(());
        }
        // Published first, so that whoever writes can write what precedes it.
        slot.publish(progress);
        if self.write_behind.poke() {
            return Ok(());
        }
        let Some(mut w) = self.writer.try_lock() else {
            return Ok(());
        };
        self.check_failed()?;
        let target = self.finished_point();
        self.write_locked(&mut w, target)
    }

    /// Whether half the ring or more, up to `upto`, is unwritten.
    fn unwritten_past_half(&self, upto: Lsn) -> bool {
        let ring_bytes = self.ring.npages * PAGE;
        upto.bytes_since(self.written_upto.load(Ordering::Acquire)) >= ring_bytes / 2
    }

    /// Whether half the ring or more of what is inserted is unwritten.
    pub(super) fn half_unwritten(&self) -> bool {
        self.unwritten_past_half(self.insert_lsn())
    }

    /// Sets up `page_lsn` in its ring slot: a fresh header. The caller holds `init_lock`, has
    /// set up every page before it, and the page the slot held is written out.
    fn init_page(&self, page_lsn: Lsn) {
        let idx = self.ring.slot(page_lsn);
        let old = self.ring.page_addr[idx].load(Ordering::Acquire);
        assert!(
            old == EMPTY || (old < page_lsn && self.written_upto.load(Ordering::Acquire) >= old + PAGE),
            "WAL ring slot of {page_lsn} set up over {old}, not yet written out"
        );
        // Zeroed in place, as PostgreSQL's `AdvanceXLInsertBuffer` does: a page written out
        // before it is full ends in zeros, not in an older page's bytes. (Building the page
        // in a fresh vector and copying it in cost an allocation, a zeroing and a copy per
        // WAL page, which showed in VACUUM's profile: seed 004 logs 300 MB.)
        let mut header = [0u8; WAL_PAGE_HEADER_SIZE];
        header[PH_MAGIC..PH_MAGIC + 2].copy_from_slice(&WAL_MAGIC.to_le_bytes());
        header[PH_ADDR..PH_ADDR + 8].copy_from_slice(&page_lsn.0.to_le_bytes());
        // SAFETY: the old page is written out and no inserter can reach this page before
        // page_addr says it is ready; we hold init_lock, which readers take too.
        unsafe {
            self.ring.zero_page(page_lsn);
            self.ring.write(page_lsn, &header);
        }
        self.ring.page_addr[idx].store(page_lsn, Ordering::Release);
    }

    /// Puts `bytes`, the start of the page at `page_lsn` as read from its segment file, into
    /// the ring: the page holding the end of the WAL when it is opened ([`Wal::open_at`]).
    pub(super) fn install_tail_page(&self, page_lsn: Lsn, bytes: &[u8]) {
        assert!(bytes.len() <= WAL_PAGE_SIZE, "a page at most");
        let mut next = self.init_lock.lock();
        assert_eq!(*next, page_lsn, "the tail page is set up before any other");
        self.init_page(page_lsn);
        // SAFETY: nothing else runs yet (the WAL is being opened), and we hold init_lock.
        unsafe { self.ring.write(page_lsn, bytes) };
        *next = page_lsn + PAGE;
    }

    pub(super) fn page_from_ring(
        &self,
        page_lsn: Lsn,
        flushed: Lsn,
    ) -> Option<Box<[u8; WAL_PAGE_SIZE]>> {
        let _init = self.init_lock.lock();
        if self.ring.page_addr[self.ring.slot(page_lsn)].load(Ordering::Acquire) != page_lsn {
            return None;
        }
        let mut page = Box::new([0u8; WAL_PAGE_SIZE]);
        let len = flushed.bytes_since(page_lsn).min(PAGE) as usize;
        // SAFETY: bytes before `flushed` are complete and nobody writes them again; the page
        // cannot be re-initialised while we hold init_lock.
        unsafe { self.ring.read(page_lsn, &mut page[..len]) };
        Some(page)
    }

    /// The complete bytes `from..from + len` in the ring, for the writer to write straight
    /// from the WAL buffers, as PostgreSQL does. `_writer` (the writer mutex's contents) is the
    /// proof that the caller holds the mutex, and the slice borrows it: it cannot outlive
    /// the hold. The bytes lie within one turn of the ring (the writer cuts its writes at
    /// [`Ring::wrap_after`]).
    pub(super) fn complete_in_ring<'w>(
        &'w self,
        _writer: &'w Writer,
        from: Lsn,
        len: usize,
    ) -> &'w [u8] {
        debug_assert!(from + len as u64 <= self.finished_point());
        debug_assert!(from + len as u64 <= self.ring.wrap_after(from));
        // SAFETY: bytes before the finished point are complete, so no inserter writes them
        // again; their pages cannot be recycled before written_upto passes them, which only
        // the writer-locked code that calls this advances, after it is done with the slice;
        // the flush hint (the one header field written later) is stamped by that same code
        // before it takes the slice. The pointer comes from the whole ring, so it may cover
        // `len` bytes.
        unsafe { std::slice::from_raw_parts(self.ring.ptr(from), len) }
    }

    /// Copies the complete bytes `start..to` into `buf`, zero-padded up to the next multiple
    /// of [`DIRECT_IO_ALIGN`], and returns them: the form a write to a file opened for
    /// direct I/O must take (its address, offset and length aligned). `start` is aligned and
    /// at most one block before the first byte not yet written, so the bytes before that
    /// are rewritten as they are (on the page of it, which the ring still holds); `start..to`
    /// lies within one turn of the ring. The padding is zeros, not the ring's bytes after
    /// `to`, which inserters may be copying in meanwhile.
    pub(super) fn stage_aligned<'b>(&self, buf: &'b mut IoBuffer, start: Lsn, to: Lsn) -> &'b [u8] {
        debug_assert_eq!(start.offset_in(DIRECT_IO_ALIGN as u64), 0);
        debug_assert!(to <= self.finished_point());
        debug_assert!(to <= self.ring.wrap_after(start));
        let complete = to.bytes_since(start) as usize;
        let padded = complete.next_multiple_of(DIRECT_IO_ALIGN);
        let bytes = buf.bytes_mut(padded);
        // SAFETY: as in `complete_in_ring`: bytes before the finished point are complete and
        // their pages are not recycled before written_upto passes them, which only the
        // writer-locked caller advances, after the copy.
        unsafe { self.ring.read(start, &mut bytes[..complete]) };
        bytes[complete..].fill(0);
        bytes
    }

    /// Stamps the page at `page_lsn`, about to be written for the first time, with what is
    /// durable now (its `PH_FLUSH_HINT` field): a reader that finds a bad record uses it to
    /// tell a torn tail from corruption. `_writer` is the proof that the caller holds the
    /// writer mutex.
    pub(super) fn stamp_flush_hint(&self, _writer: &mut Writer, page_lsn: Lsn, durable: Lsn) {
        debug_assert_eq!(page_lsn.offset_in(PAGE), 0);
        debug_assert!(page_lsn >= self.written_upto.load(Ordering::Acquire));
        // SAFETY: the field belongs to the writer: set to zero at initialisation, written
        // only here, before any byte of the page is written out; readers copy only bytes
        // before the flushed point, which is behind this page.
        unsafe { self.ring.write(page_lsn + PH_FLUSH_HINT as u64, &durable.0.to_le_bytes()) };
    }
}
