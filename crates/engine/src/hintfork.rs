//! Forks that are hints: the free-space map ([`crate::fsm`]) and the visibility map
//! ([`crate::vm`]). Their pages are not WAL-logged for their own sake, are created on demand,
//! and a page that fails verification (torn by a crash) reads as zeros — "nothing known" —
//! instead of an error: each map is built so that zeros are always a safe answer.

use crate::buffer::{BufferPool, BufferTag, PinnedBuffer, ReadMode};
use crate::error::{Error, Result};
use crate::page::{PageMut, PAGE_SIZE};
use crate::smgr::{BlockNumber, Fork, RelFileLocator};

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

/// Cuts the fork to `keep_blocks` blocks (its buffers first), if it is longer. The caller
/// holds the relation exclusively, as for any truncation.
pub(crate) fn truncate(
    pool: &BufferPool,
    rel: RelFileLocator,
    fork: Fork,
    keep_blocks: BlockNumber,
) -> Result<()> {
    if keep_blocks < nblocks(pool, rel, fork)? {
        pool.drop_relation_buffers(rel, fork, keep_blocks);
        pool.smgr().truncate(rel, fork, keep_blocks)?;
    }
    Ok(())
}
