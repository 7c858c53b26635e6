//! # vm — the visibility map
//!
//! The `_vm` fork of a heap relation: one bit per heap block, set when every tuple on the
//! block is visible to every transaction (PostgreSQL's "all-visible" bit; there is no
//! "all-frozen" bit because quire never freezes). Lazy vacuum sets it and then skips the block
//! while it stays set; any change to the block clears it.
//!
//! ## Rules
//! - A set bit is a promise that may only be kept or broken towards "not set": reading it
//!   wrongly as clear costs a vacuum some work, reading it wrongly as set would hide dead
//!   tuples from vacuum. So pages are read zero-on-error (`hintfork`: a torn page
//!   means "nothing is all-visible"), and:
//! - setting a bit raises the map page's LSN to the WAL record that made the heap page
//!   all-visible (so the map page cannot reach disk before that record), and redo of that
//!   record sets it again;
//! - every heap change to a block whose page was all-visible (or that initialises the page)
//!   clears the bit on the primary, and redo of every heap change clears it too, whatever the
//!   page — so no crash can leave a bit set over a changed page.
//! - Bits of blocks past the heap's end are cleared by [`truncate`] when the heap is cut, and
//!   anyway by the first change of such a block if the heap grows back.
//!
//! ## Layout
//! Ordinary pages (header, LSN, checksum); bit `j` of byte `24 + i` of map block `b` stands
//! for heap block `b * 65344 + i * 8 + j`.

use crate::buffer::BufferPool;
use crate::error::Result;
use crate::hintfork;
use crate::page::{Page, PageMut, HEADER_SIZE};
use crate::types::{BlockNumber, Fork, Lsn, PAGE_SIZE, RelFileLocator};

/// Heap blocks one map page covers.
pub const BLOCKS_PER_PAGE: u32 = ((PAGE_SIZE - HEADER_SIZE) * 8) as u32;

fn locate(block: BlockNumber) -> (BlockNumber, usize, u8) {
    let bit = (block % BLOCKS_PER_PAGE) as usize;
    (
        block / BLOCKS_PER_PAGE,
        HEADER_SIZE + bit / 8,
        1u8 << (bit % 8),
    )
}

/// Is heap block `block` known all-visible?
pub fn is_set(pool: &BufferPool, rel: RelFileLocator, block: BlockNumber) -> Result<bool> {
    let (page_no, byte, mask) = locate(block);
    if page_no >= hintfork::nblocks(pool, rel, Fork::Vm)? {
        return Ok(false);
    }
    let buf = hintfork::pin(pool, rel, Fork::Vm, page_no)?;
    let page = buf.read();
    Ok(!Page::new(&page).is_new() && page[byte] & mask != 0)
}

/// Marks heap block `block` all-visible, as the record ending at `lsn` says.
pub fn set(pool: &BufferPool, rel: RelFileLocator, block: BlockNumber, lsn: Lsn) -> Result<()> {
    let (page_no, byte, mask) = locate(block);
    if !hintfork::extend_to(pool, rel, Fork::Vm, page_no)? {
        return Ok(()); // could not grow the map: a clear bit is always safe
    }
    let buf = hintfork::pin(pool, rel, Fork::Vm, page_no)?;
    let mut page = buf.write();
    if Page::new(&page).is_new() {
        PageMut::new(&mut page).init(0);
    }
    page[byte] |= mask;
    let new_lsn = Page::new(&page).lsn().max(lsn);
    PageMut::new(&mut page).set_lsn(new_lsn);
    page.mark_dirty();
    Ok(())
}

/// Clears heap block `block`'s bit (no-op if clear or beyond the map).
pub fn clear(pool: &BufferPool, rel: RelFileLocator, block: BlockNumber) -> Result<()> {
    let (page_no, byte, mask) = locate(block);
    if page_no >= hintfork::nblocks(pool, rel, Fork::Vm)? {
        return Ok(());
    }
    let buf = hintfork::pin(pool, rel, Fork::Vm, page_no)?;
    if buf.read()[byte] & mask == 0 {
        return Ok(());
    }
    let mut page = buf.write();
    if !Page::new(&page).is_new() && page[byte] & mask != 0 {
        page[byte] &= !mask;
        page.mark_dirty();
    }
    Ok(())
}

/// The heap was cut to `heap_nblocks`: clears the bits from there on and cuts map pages no
/// longer needed. The caller holds the relation exclusively.
pub fn truncate(pool: &BufferPool, rel: RelFileLocator, heap_nblocks: BlockNumber) -> Result<()> {
    let nblocks = hintfork::nblocks(pool, rel, Fork::Vm)?;
    let (page_no, _, _) = locate(heap_nblocks);
    if page_no < nblocks {
        let buf = hintfork::pin(pool, rel, Fork::Vm, page_no)?;
        let mut page = buf.write();
        if !Page::new(&page).is_new() {
            let first_bit = (heap_nblocks % BLOCKS_PER_PAGE) as usize;
            for bit in first_bit..BLOCKS_PER_PAGE as usize {
                page[HEADER_SIZE + bit / 8] &= !(1u8 << (bit % 8));
            }
            page.mark_dirty();
        }
    }
    let keep = if heap_nblocks.is_multiple_of(BLOCKS_PER_PAGE) {
        page_no
    } else {
        page_no + 1
    };
    hintfork::truncate(pool, rel, Fork::Vm, keep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::{SimVfs, Vfs};
    use crate::{Config, Database};
    use std::path::Path;
    use std::sync::Arc;

    #[test]
    fn bits_set_clear_truncate_and_survive_a_clean_restart() {
        let sim = Arc::new(SimVfs::new(5));
        let vfs: Arc<dyn Vfs> = sim.clone();
        let rel = RelFileLocator::new(1, 20_000);
        let db = Database::open(&vfs, Path::new("/data"), Config::default()).unwrap();
        db.smgr().create(rel, Fork::Main).unwrap();
        let pool = db.buffer_pool();
        assert!(
            !is_set(pool, rel, 7).unwrap(),
            "no map: nothing is all-visible"
        );
        for b in [
            0,
            7,
            8,
            BLOCKS_PER_PAGE - 1,
            BLOCKS_PER_PAGE,
            3 * BLOCKS_PER_PAGE + 5,
        ] {
            set(pool, rel, b, Lsn::INVALID).unwrap();
        }
        clear(pool, rel, 8).unwrap();
        clear(pool, rel, 9).unwrap();
        let set_now = |b| is_set(db.buffer_pool(), rel, b).unwrap();
        assert!(set_now(0) && set_now(7) && !set_now(8) && !set_now(9));
        assert!(set_now(BLOCKS_PER_PAGE - 1) && set_now(BLOCKS_PER_PAGE));
        truncate(pool, rel, BLOCKS_PER_PAGE + 1).unwrap();
        assert!(set_now(BLOCKS_PER_PAGE), "below the cut");
        assert!(!set_now(3 * BLOCKS_PER_PAGE + 5), "beyond the cut");
        assert_eq!(
            db.smgr().nblocks(rel, Fork::Vm).unwrap(),
            4,
            "two map pages gone: zeroed rather than cut"
        );
        truncate(pool, rel, 1).unwrap();
        assert!(set_now(0) && !set_now(7));
        db.close().unwrap();
        let db = Database::open(&vfs, Path::new("/data"), Config::default()).unwrap();
        assert!(is_set(db.buffer_pool(), rel, 0).unwrap());
        assert!(!is_set(db.buffer_pool(), rel, 7).unwrap());
        db.close().unwrap();
    }

    #[test]
    fn a_corrupt_map_page_means_nothing_is_all_visible() {
        let sim = Arc::new(SimVfs::new(6));
        let vfs: Arc<dyn Vfs> = sim.clone();
        let rel = RelFileLocator::new(1, 20_001);
        let db = Database::open(&vfs, Path::new("/data"), Config::default()).unwrap();
        db.smgr().create(rel, Fork::Main).unwrap();
        set(db.buffer_pool(), rel, 3, Lsn::INVALID).unwrap();
        db.close().unwrap();
        let path = Path::new("/data/base/1/20001_vm");
        sim.flip_bit(path, 100, 2).unwrap();
        let db = Database::open(&vfs, Path::new("/data"), Config::default()).unwrap();
        assert!(!is_set(db.buffer_pool(), rel, 3).unwrap());
        set(db.buffer_pool(), rel, 4, Lsn::INVALID).unwrap();
        assert!(is_set(db.buffer_pool(), rel, 4).unwrap());
        db.close().unwrap();
    }
}
