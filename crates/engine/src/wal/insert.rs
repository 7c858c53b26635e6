//! Insertion: reserving a record's place, copying it into the ring (in parallel with other
//! inserters), logging page changes with their full-page images, and waiting for the
//! insertions before a point to finish. See "How insertion works" in the module header.

use std::sync::atomic::Ordering;

use super::record::{self, BlockRef, RecordType};
use super::{
    align8, my_slot, pos_to_end_lsn, pos_to_lsn, LoggedPage, Lsn, Wal, WalRecord, HDR, IDLE,
    MAX_BLOCK_REFS, PAGE,
};
use crate::error::{Error, Result};
use crate::page::{Page, PageMut};
use crate::types::{Xid, MAX_RECORD_SIZE};

thread_local! {
    /// Each thread's encoding buffer, kept between inserts: allocating one per record showed
    /// in the insertion profile.
    static ENCODED: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// An encoding buffer grown beyond this (by a record with page images) is not kept.
const KEEP_ENCODED_BYTES: usize = 64 * 1024;

/// A checkpoint began between the image decision and the reservation this many times in a
/// row: impossible unless checkpoints run back to back faster than one record is built.
const MAX_IMAGE_RETRIES: usize = 1000;

impl Wal {
    /// Appends a record; returns (start LSN, end LSN). The record is durable once
    /// [`flush`](Self::flush) up to its end LSN returned.
    pub fn insert(&self, rec: &WalRecord<'_>) -> Result<(Lsn, Lsn)> {
        Ok(self
            .insert_if_redo(rec, None)?
            .expect("an insert without a redo-point condition always happens"))
    }

    /// Logs a change already made to `pages`, each held under its exclusive content lock:
    /// marks them dirty, inserts the record (with a full-page image of every page that needs
    /// one), and sets their LSN to the record's end, which it returns. See the module header.
    pub fn log_page_change(
        &self,
        xid: Xid,
        record_type: impl RecordType,
        main: &[u8],
        pages: &mut [LoggedPage<'_, '_>],
    ) -> Result<Lsn> {
        let worst_size_bytes = record::RECORD_HEADER_SIZE
            + pages.len() * (record::BLOCK_REF_SIZE + crate::types::PAGE_SIZE)
            + main.len();
        if pages.len() > MAX_BLOCK_REFS || worst_size_bytes > MAX_RECORD_SIZE {
            // Refused before anything is dirtied: the pages' changes must then be undone by
            // the caller, which is why callers size their records beforehand.
            return Err(Error::WalRecordTooLarge {
                size_bytes: worst_size_bytes,
                blocks: pages.len(),
            });
        }
        for p in pages.iter_mut() {
            p.page.mark_dirty();
        }
        for _ in 0..MAX_IMAGE_RETRIES {
            let redo = self.redo_point();
            let blocks: Vec<BlockRef<'_>> = pages
                .iter()
                .map(|p| {
                    let page: &[u8; crate::types::PAGE_SIZE] = p.page;
                    BlockRef {
                        tag: p.page.tag(),
                        image: (!p.will_init && Page::new(page).lsn() <= redo).then_some(page),
                    }
                })
                .collect();
            let rec = WalRecord::new(xid, record_type, &blocks, main);
            match self.insert_if_redo(&rec, Some(redo)) {
                Ok(Some((_, end))) => {
                    let images = blocks.iter().filter(|b| b.image.is_some()).count();
                    self.stats
                        .full_page_images
                        .fetch_add(images as u64, Ordering::Relaxed);
                    drop(blocks);
                    for p in pages.iter_mut() {
                        // A page's LSN only increases: the record that changed it last ends
                        // before this one (paired with redo's "already applied" test).
                        debug_assert!(Page::new(p.page).lsn() < end, "page LSN would go back");
                        PageMut::new(p.page).set_lsn(end);
                    }
                    return Ok(end);
                }
                Ok(None) => {}
                Err(e) => {
                    self.fail(&format!(
                        "logging a page change failed after the change: {e}"
                    ));
                    return Err(e);
                }
            }
        }
        let reason = "a page change could not be logged: the redo point kept moving";
        self.fail(reason);
        Err(Error::WalFailed {
            reason: reason.into(),
        })
    }

    /// Inserts `rec`; with `expect_redo`, only if the redo point is still that (else `None`,
    /// nothing inserted): the caller decided its full-page images against it.
    pub(super) fn insert_if_redo(
        &self,
        rec: &WalRecord<'_>,
        expect_redo: Option<Lsn>,
    ) -> Result<Option<(Lsn, Lsn)>> {
        self.check_failed()?;
        if rec.blocks.len() > MAX_BLOCK_REFS || record::encoded_size(rec) > MAX_RECORD_SIZE {
            return Err(Error::WalRecordTooLarge {
                size_bytes: record::encoded_size(rec),
                blocks: rec.blocks.len(),
            });
        }
        let mut bytes = ENCODED.take();
        bytes.clear();
        record::encode(rec, &mut bytes);
        let result = self.insert_encoded(&mut bytes, expect_redo);
        if bytes.capacity() <= KEEP_ENCODED_BYTES {
            ENCODED.set(bytes);
        }
        result
    }

    /// Reserves room for the encoded record `bytes` and copies it into the ring (see
    /// [`Wal::insert_if_redo`]).
    fn insert_encoded(
        &self,
        bytes: &mut [u8],
        expect_redo: Option<Lsn>,
    ) -> Result<Option<(Lsn, Lsn)>> {
        let slot = &self.slots[my_slot()];
        let _slot_guard = slot.lock.lock();
        let (start, end, prev) = {
            let mut r = self.reserve.lock();
            if expect_redo.is_some_and(|redo| redo != self.redo_point()) {
                return Ok(None);
            }
            let start_pos = r.bytepos;
            r.bytepos = start_pos + align8(bytes.len() as u64);
            let start = pos_to_lsn(start_pos);
            let prev = std::mem::replace(&mut r.prev, start);
            // LSNs only increase: each record starts after the one reserved before it (the
            // reader checks the same through each record's `prev` link).
            debug_assert!(
                prev < start || (r.records == 0 && prev <= start),
                "WAL reservation went backwards: {start} after {prev}"
            );
            // Counted here, under the mutex already held, rather than on shared atomics.
            r.records += 1;
            r.bytes += bytes.len() as u64;
            // Published before the reservation is visible to anyone computing progress.
            slot.inserting_at.store(start, Ordering::Release);
            (start, pos_to_end_lsn(r.bytepos), prev)
        };
        #[cfg(test)]
        {
            let hook = self.after_reserve.lock().clone();
            if let Some(hook) = hook {
                hook(start);
            }
        }
        record::seal(bytes, prev);
        let result = self.copy_into_ring(slot, start, bytes);
        if result.is_err() {
            // Its reserved bytes stay a hole: stop before anything after it is written.
            self.fail("a WAL insertion failed after reserving its bytes");
        }
        slot.publish(IDLE);
        result?;
        Ok(Some((start, end)))
    }

    /// Everything before the returned LSN is complete in the ring.
    pub(super) fn finished_point(&self) -> Lsn {
        let mut f = pos_to_end_lsn(self.reserve.lock().bytepos);
        for s in &self.slots {
            f = f.min(s.inserting_at.load(Ordering::Acquire));
        }
        // Never stop right after a page header: the page may not be initialised yet.
        if f.offset_in(PAGE) <= HDR {
            f = f.align_down(PAGE);
        }
        f
    }

    /// Waits until no insertion before `upto` is in progress, sleeping on each slot that is
    /// behind until it publishes progress past `upto` or ends. Never called with the writer
    /// mutex held, and an inserter calling it has published progress beyond `upto`. Insertions
    /// reserved from now on start after `upto`, so one pass over the slots suffices.
    pub(super) fn wait_insertions(&self, upto: Lsn) {
        for s in &self.slots {
            if s.inserting_at.0.load(Ordering::SeqCst) >= upto.0 {
                continue;
            }
            let mut g = s.wait_lock.lock();
            s.waiters.fetch_add(1, Ordering::SeqCst);
            while s.inserting_at.0.load(Ordering::SeqCst) < upto.0 {
                s.progressed.wait(&mut g);
            }
            s.waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }
}
