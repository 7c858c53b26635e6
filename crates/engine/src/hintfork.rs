//! Forks that are hints: the free-space map ([`crate::fsm`]) and the visibility map
//! ([`crate::vm`]). Their pages are not WAL-logged for their own sake, are created on demand,
//! and a page that fails verification (torn by a crash) reads as zeros — "nothing known" —
//! instead of an error: each map is built so that zeros are always a safe answer.

use crate::buffer::{BufferPool, PinnedBuffer, ReadMode};
use crate::error::{Error, Result};
use crate::page::PageMut;
use crate::types::{BlockNumber, BufferTag, Fork, RelFileLocator, PAGE_SIZE};

/// The fork's size in blocks; 0 if it does not exist.
pub(crate) fn nblocks(pool: &BufferPool, rel: RelFileLocator, fork: Fork) -> Result<BlockNumber> {
    match pool.smgr().nblocks(rel, fork) {
        Ok(n) => Ok(n),
        Err(Error::NoSuchRelation { .. }) => Ok(0),
        Err(e) => Err(e),
    }
}

/// Pins a page that exists (the caller checked the fork's size): an unreadable page comes
/// back zeroed, i.e. new.
pub(crate) fn pin(
    pool: &BufferPool,
    rel: RelFileLocator,
    fork: Fork,
    block: BlockNumber,
) -> Result<PinnedBuffer<'_>> {
    pool.read_buffer_mode(BufferTag::new(rel, fork, block), ReadMode::ZeroOnError)
}

/// Makes the fork exist with at least `block + 1` blocks; returns whether it has them.
/// New blocks are written initialised (an empty page: header, zero content) *before* the
/// fork's new size is visible, so nobody ever sees one half-born. A concurrent creator or
/// extender is fine: it only adds empty pages.
pub(crate) fn extend_to(
    pool: &BufferPool,
    rel: RelFileLocator,
    fork: Fork,
    block: BlockNumber,
) -> Result<bool> {
    let smgr = pool.smgr();
    if !smgr.exists(rel, fork)? {
        match smgr.create(rel, fork) {
            Ok(()) | Err(Error::RelationExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let mut empty = [0u8; PAGE_SIZE];
    PageMut::new(&mut empty).init(0);
    // Bounded: every extension adds a block (ours or a concurrent extender's), so at most
    // `block + 1` passes reach it.
    for _ in 0..=block {
        if smgr.nblocks(rel, fork)? > block {
            return Ok(true);
        }
        // No buffer holds a block past the end (nobody reads one), so the next read of it
        // comes from the file.
        smgr.extend(rel, fork, &empty)?;
    }
    Ok(smgr.nblocks(rel, fork)? > block)
}

/// A map loses its pages past `keep_blocks`; up to this many are zeroed in place rather than
/// cut off, which saves a file truncation (a costly system call on some file systems: 130 µs
/// on the development machine's ext4) when a small table is emptied. Zeros mean "nothing
/// known" to every map.
const ZERO_RATHER_THAN_CUT_PAGES: BlockNumber = 8;

/// Forgets the fork's pages from `keep_blocks` on: zeroes their contents when they are few,
/// else cuts them off (buffers first). The caller holds the relation exclusively, as for any
/// truncation.
pub(crate) fn truncate(
    pool: &BufferPool,
    rel: RelFileLocator,
    fork: Fork,
    keep_blocks: BlockNumber,
) -> Result<()> {
    let n = nblocks(pool, rel, fork)?;
    if keep_blocks >= n {
        return Ok(());
    }
    if n - keep_blocks > ZERO_RATHER_THAN_CUT_PAGES {
        pool.drop_relation_buffers(rel, fork, keep_blocks);
        return pool.smgr().truncate(rel, fork, keep_blocks);
    }
    for block in keep_blocks..n {
        let buf = pin(pool, rel, fork, block)?;
        let mut page = buf.write();
        if crate::page::Page::new(&page).is_new() {
            continue; // already knows nothing
        }
        if page[crate::page::HEADER_SIZE..].iter().any(|&b| b != 0) {
            page[crate::page::HEADER_SIZE..].fill(0);
            page.mark_dirty();
        }
    }
    Ok(())
}
