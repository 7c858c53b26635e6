//! # fsm — the free-space map
//!
//! The `_fsm` fork of a heap relation: one byte per heap block saying roughly how much free
//! space the block has, so that an insert finds a block with room without reading heap pages
//! (PostgreSQL's `freespace.c`). Free functions over the buffer pool; the module keeps no
//! state of its own.
//!
//! ## What the FSM promises, and what it never promises
//! - It is a **hint**. It is not WAL-logged: its pages carry LSN 0 and reach disk whenever the
//!   buffer pool writes them (eviction, checkpoint), each page on its own schedule. A crash can
//!   leave any mix of old and new pages, and a torn or corrupt page is read with
//!   [`ReadMode::ZeroOnError`](crate::buffer::ReadMode::ZeroOnError), i.e. as "no free space", never as an error.
//! - So **callers must re-check**: a block proposed by [`search`] may have less room than
//!   asked (the map is stale, or another backend filled it meanwhile). The heap reads the
//!   page, and when its real free space differs from what the map said it calls [`record`]
//!   with the truth, then searches again. Equally, the map may *miss* free space (a page lost
//!   in a crash reads as zeros; a root page older than its leaves); [`vacuum`] recomputes the
//!   root from the leaves, and the heap's vacuum should re-record every page it cleans.
//! - [`search`] returns only blocks whose *recorded* category guarantees the request: the
//!   wanted category is rounded **up**, recorded free space rounded **down**. Without a crash
//!   in between, it returns the first such block at or after `start`, wrapping around, and
//!   `None` only when no recorded block qualifies.
//! - Heap blocks from [`MAX_HEAP_BLOCKS`] on (66,716,224 blocks, about 509 GiB of heap) are
//!   not covered: [`record`] ignores them, [`free_bytes`] says 0, [`search`] never returns
//!   them. Never an error, never a panic.
//! - Never a panic on page contents: every byte value is a valid category, and a page that
//!   fails verification is zeroed by the buffer pool before anyone looks at it.
//!
//! ## Categories
//! `category = min(free_bytes / 32, 255)` (PostgreSQL's `FSM_CAT_STEP`); [`free_bytes`]
//! answers `category * 32`. A search for `n` bytes wants `max(ceil(n / 32), 1)`: 0 bytes is
//! taken as "any room at all", and more than `255 * 32 = 8160` bytes is never guaranteed, so
//! such a search returns `None`.
//!
//! ## Layout (two levels; byte diagram in `docs/design.md`)
//! Every FSM page is an ordinary page: the 24-byte header (initialised with `pd_lower = 24`,
//! `pd_upper = pd_special = 8192`, LSN 0), then 8168 one-byte entries in what the header calls
//! free space (as PostgreSQL's FSM pages keep their tree in `PageGetContents`), covered by the
//! checksum like any byte.
//! - FSM block 0, the **root**: entry `i` is an upper bound of the categories in leaf `i`.
//! - FSM block `1 + i`, **leaf** `i`: entry `j` is the category of heap block `8168 * i + j`.
//!
//! A flat page rather than PostgreSQL's in-page binary tree: a search scans the root (at most
//! 8168 bytes) and one leaf, 8 bytes at a time as `u64` words (SWAR), which costs about as
//! much as walking a tree and makes [`record`] one byte store in the common case.
//!
//! ## The root invariant: exact or higher, never lower
//! While the database runs, `root[i] >= max(leaf i)` holds whenever nobody holds leaf `i`'s
//! content lock exclusively (a search's repair keeps it even under the shared lock). Every
//! change of `root[i]` is made while holding leaf `i`'s content lock, so no two threads can
//! interleave on one entry:
//! - raising a leaf entry above `root[i]` raises `root[i]` (no root write otherwise);
//! - lowering the entry that *was* the leaf's maximum recomputes the maximum and stores it;
//! - a search that finds less in a leaf than the root promised stores the leaf's true maximum
//!   (under the leaf's shared lock, so concurrent repairers write the same value) and moves
//!   on: at most one such repair per leaf per search.
//!
//! FSM blocks are born initialised (header, entries zero): extension writes them so before the
//! fork's new size is published, and every leaf comes after the root, so a root is exact when
//! it appears. A root page that reads as *new* was therefore lost (zeroed because it failed
//! verification, or a torn extension): it knows nothing, so it is taken as 255 for every leaf
//! ("look") and initialised that way by its first writer; searches then tighten it one leaf
//! at a time. A crash can also leave a root page *lower* than a leaf written after it: that
//! free space is missed until [`vacuum`] or a new [`record`] of the block.
//!
//! ## Locking
//! Pages change only under their buffer's exclusive content lock, followed by `mark_dirty`;
//! they are read under the shared lock. **Lock order: a leaf, then the root.** A thread may
//! take the root's content lock while holding one leaf's; it never takes a leaf's lock while
//! holding the root's, and never holds two leaves' locks. A search copies the root under its
//! shared lock and releases it before touching any leaf.
//!
//! ## Size and truncation
//! The fork is created by the first [`record`] that stores a non-zero category (a concurrent
//! creator is fine) and extended with empty pages up to the leaf it needs; concurrent
//! extenders may add a few empty leaves too many, which say "no free space". Reads of a
//! missing fork or of blocks past its end mean 0 free: the fork's size is checked before every
//! read, so a block that does not exist is never read or dirtied. [`truncate`] requires, like
//! the storage manager's truncate, that the caller holds the relation exclusively.

#[cfg(test)]
mod tests;

use crate::buffer::{BufferPool, PinnedBuffer};
use crate::error::Result;
use crate::hintfork;
use crate::page::{Page, PageMut, HEADER_SIZE};
use crate::types::{BlockNumber, Fork, PAGE_SIZE, RelFileLocator};

/// One-byte entries per FSM page: everything after the page header.
pub const ENTRIES_PER_PAGE: usize = PAGE_SIZE - HEADER_SIZE;
/// Heap blocks described by one leaf page.
pub const HEAP_BLOCKS_PER_LEAF: u32 = ENTRIES_PER_PAGE as u32;
/// Leaf pages the root can describe.
pub const MAX_LEAVES: usize = ENTRIES_PER_PAGE;
/// Heap blocks covered: 8168 * 8168 = 66,716,224 (about 509 GiB of 8 KiB pages). Blocks from
/// here on are never recorded.
pub const MAX_HEAP_BLOCKS: BlockNumber = HEAP_BLOCKS_PER_LEAF * MAX_LEAVES as u32;
/// Free bytes per category step (PostgreSQL's `FSM_CAT_STEP`).
pub const CATEGORY_STEP_BYTES: usize = 32;
/// The highest category: 8160 free bytes or more.
pub const MAX_CATEGORY: u8 = 255;

/// FSM block holding the root.
const ROOT_BLOCK: BlockNumber = 0;
/// What a root that knows nothing says about a leaf: look.
const UNKNOWN_ROOT_ENTRY: u8 = MAX_CATEGORY;

/// The category of `free_bytes`: rounded down, so it never promises more than there is.
pub fn category(free_bytes: usize) -> u8 {
    u8::try_from(free_bytes / CATEGORY_STEP_BYTES).unwrap_or(MAX_CATEGORY)
}

/// The least category that guarantees `min_free_bytes` (rounded up; at least 1), or `None`
/// if no category does (more than 8160 bytes).
pub fn wanted_category(min_free_bytes: usize) -> Option<u8> {
    u8::try_from(min_free_bytes.div_ceil(CATEGORY_STEP_BYTES).max(1)).ok()
}

/// (leaf, entry in the leaf) of a heap block; `None` beyond [`MAX_HEAP_BLOCKS`].
fn locate(heap_block: BlockNumber) -> Option<(usize, usize)> {
    (heap_block < MAX_HEAP_BLOCKS).then_some((
        (heap_block / HEAP_BLOCKS_PER_LEAF) as usize,
        (heap_block % HEAP_BLOCKS_PER_LEAF) as usize,
    ))
}

/// The FSM block of leaf `leaf` (< [`MAX_LEAVES`], so no overflow).
fn leaf_block(leaf: usize) -> BlockNumber {
    1 + leaf as BlockNumber
}

/// The heap block of entry `entry` of leaf `leaf`.
fn heap_block(leaf: usize, entry: usize) -> BlockNumber {
    leaf as BlockNumber * HEAP_BLOCKS_PER_LEAF + entry as BlockNumber
}

/// The FSM fork's size in blocks; 0 if it does not exist.
fn fsm_nblocks(pool: &BufferPool, rel: RelFileLocator) -> Result<BlockNumber> {
    hintfork::nblocks(pool, rel, Fork::Fsm)
}

/// How many leaves a fork of `fsm_nblocks` blocks holds (extra blocks past the last leaf the
/// root can describe are ignored).
fn leaves_in(fsm_nblocks: BlockNumber) -> usize {
    (fsm_nblocks.saturating_sub(1) as usize).min(MAX_LEAVES)
}

/// Pins an FSM page that exists (the caller checked the fork's size): an unreadable page
/// comes back zeroed, i.e. new.
fn pin(pool: &BufferPool, rel: RelFileLocator, block: BlockNumber) -> Result<PinnedBuffer<'_>> {
    hintfork::pin(pool, rel, Fork::Fsm, block)
}

/// The entries of an FSM page.
fn entries(page: &[u8; PAGE_SIZE]) -> &[u8] {
    &page[HEADER_SIZE..]
}

/// Initialises a new page (header, every entry `fill`) before its first change; returns
/// whether it did (the page then needs `mark_dirty` even if the change turns out void).
fn init_if_new(page: &mut [u8; PAGE_SIZE], fill: u8) -> bool {
    if !Page::new(page).is_new() {
        return false;
    }
    PageMut::new(page).init(0);
    page[HEADER_SIZE..].fill(fill);
    true
}

/// Root entry `leaf`: what the page says, or "unknown" (look) if the page is new.
fn root_entry(page: &[u8; PAGE_SIZE], leaf: usize) -> u8 {
    if Page::new(page).is_new() {
        UNKNOWN_ROOT_ENTRY
    } else {
        entries(page)[leaf]
    }
}

// ------------------------------------------------------------------------------------ scanning

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
const LOW_BITS: u64 = 0x7F7F_7F7F_7F7F_7F7F;

/// The high bit of each byte of `word` that is `>= want`, others zero (SWAR: no byte borrows
/// from its neighbour, so the mask is exact per byte).
///
/// With `lo` the low 7 bits of a byte, `(lo | 0x80) - k` keeps its high bit exactly when
/// `lo >= k`, and never borrows for `k <= 128`. A byte is `>= want` when: for `want <= 128`,
/// its high bit is set or `lo >= want`; for `want > 128`, its high bit is set and
/// `lo >= want - 128`.
#[inline]
fn ge_mask(word: u64, want: u8) -> u64 {
    let high = word & HIGH_BITS;
    let lifted = (word & LOW_BITS) | HIGH_BITS;
    if want <= 128 {
        ((lifted - ONES * u64::from(want)) & HIGH_BITS) | high
    } else {
        ((lifted - ONES * u64::from(want - 128)) & HIGH_BITS) & high
    }
}

/// The index of the first byte of `bytes[from..]` that is `>= want`. Four words per step, so
/// a page of full blocks costs about 255 steps.
fn find_ge(bytes: &[u8], want: u8, from: usize) -> Option<usize> {
    let rest = bytes.get(from..)?;
    let mut blocks = rest.chunks_exact(32);
    for (n, block) in blocks.by_ref().enumerate() {
        let word = |at: usize| crate::bytes::u64_at(block, at).expect("blocks of 32 bytes");
        let masks = [
            ge_mask(word(0), want),
            ge_mask(word(8), want),
            ge_mask(word(16), want),
            ge_mask(word(24), want),
        ];
        if masks[0] | masks[1] | masks[2] | masks[3] == 0 {
            continue;
        }
        for (i, m) in masks.into_iter().enumerate() {
            if m != 0 {
                // Little-endian: byte k of the word is bits 8k..8k+8.
                return Some(from + n * 32 + i * 8 + (m.trailing_zeros() / 8) as usize);
            }
        }
    }
    let tail = blocks.remainder();
    let tail_start = from + rest.len() - tail.len();
    tail.iter().position(|&b| b >= want).map(|p| tail_start + p)
}

/// The largest byte (0 for none); a branch-free fold the compiler vectorises.
fn max_entry(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0, |m, &b| m.max(b))
}

// ------------------------------------------------------------------------------------ the root

/// How to change root entry `leaf`.
#[derive(Clone, Copy, Debug)]
enum RootUpdate {
    /// Make it at least this (a leaf entry was raised).
    AtLeast(u8),
    /// Make it exactly this: the leaf's maximum, computed under the leaf's lock.
    Exactly(u8),
}

/// Applies `update` to root entry `leaf`. The caller holds leaf `leaf`'s content lock (the
/// lock order: leaf, then root) and the root block exists. Writes the root only if the entry
/// changes: the check is made under the shared lock first, because most raises change nothing.
fn update_root(
    pool: &BufferPool,
    rel: RelFileLocator,
    leaf: usize,
    update: RootUpdate,
) -> Result<()> {
    let changes = |current: u8| match update {
        RootUpdate::AtLeast(v) => current < v,
        RootUpdate::Exactly(v) => current != v,
    };
    let buf = pin(pool, rel, ROOT_BLOCK)?;
    if !changes(root_entry(&buf.read(), leaf)) {
        return Ok(());
    }
    // Re-checked under the exclusive lock: nobody else changes entry `leaf` while we hold the
    // leaf's lock, but the page may have been initialised meanwhile.
    let mut page = buf.write();
    let mut dirty = init_if_new(&mut page, UNKNOWN_ROOT_ENTRY);
    let current = page[HEADER_SIZE + leaf];
    if changes(current) {
        page[HEADER_SIZE + leaf] = match update {
            RootUpdate::AtLeast(v) => current.max(v),
            RootUpdate::Exactly(v) => v,
        };
        dirty = true;
    }
    if dirty {
        page.mark_dirty();
    }
    Ok(())
}

// ------------------------------------------------------------------------------------ the API

/// Records that heap block `block` of `rel` has `free_bytes` free (stored as its category,
/// rounded down). Creates and extends the FSM fork as needed. Blocks from
/// [`MAX_HEAP_BLOCKS`] on are ignored (documented no-op, not an error).
pub fn record(
    pool: &BufferPool,
    rel: RelFileLocator,
    block: BlockNumber,
    free_bytes: usize,
) -> Result<()> {
    let Some((leaf, entry)) = locate(block) else {
        return Ok(());
    };
    let cat = category(free_bytes);
    let fsm_block = leaf_block(leaf);
    if fsm_nblocks(pool, rel)? <= fsm_block {
        if cat == 0 {
            // A leaf that does not exist already says 0: no file for nothing.
            return Ok(());
        }
        if !extend_to(pool, rel, fsm_block)? {
            return Ok(());
        }
    }
    let buf = pin(pool, rel, fsm_block)?;
    let mut page = buf.write();
    let old = page[HEADER_SIZE + entry];
    if old == cat {
        // The common case on a page being filled: nothing to write.
        return Ok(());
    }
    init_if_new(&mut page, 0);
    page[HEADER_SIZE + entry] = cat;
    page.mark_dirty();
    if cat > old {
        update_root(pool, rel, leaf, RootUpdate::AtLeast(cat))?;
    } else {
        let max = max_entry(entries(&page));
        if max < old {
            // The entry we lowered was the leaf's only maximum: tighten the root.
            update_root(pool, rel, leaf, RootUpdate::Exactly(max))?;
        }
    }
    drop(page);
    Ok(())
}

/// Extends the FSM fork (creating it if missing) until it has block `fsm_block`; false if it
/// still does not (only if someone truncated it meanwhile, which the caller of [`truncate`]
/// excludes: the record is then skipped rather than written past the end of the file).
///
/// Every block is written *initialised* (header, entries zero) by the storage manager's
/// extension, before the new size is published, so nobody ever sees the root uninitialised
/// because it is young: a root that appears is exact (every leaf comes after it), and a new
/// root page can only be one that was lost. (Initialising it in the buffer after
/// `BufferPool::extend` would race: a concurrent extender could add a leaf and raise an entry
/// in between, and the late "all zeros" would hide it.)
fn extend_to(pool: &BufferPool, rel: RelFileLocator, fsm_block: BlockNumber) -> Result<bool> {
    hintfork::extend_to(pool, rel, Fork::Fsm, fsm_block)
}

/// The free space recorded for heap block `block`, rounded down to its category
/// (`category * 32` bytes); 0 if never recorded, beyond the FSM, or on an unreadable page.
pub fn free_bytes(pool: &BufferPool, rel: RelFileLocator, block: BlockNumber) -> Result<usize> {
    let Some((leaf, entry)) = locate(block) else {
        return Ok(0);
    };
    let fsm_block = leaf_block(leaf);
    if fsm_nblocks(pool, rel)? <= fsm_block {
        return Ok(0);
    }
    let buf = pin(pool, rel, fsm_block)?;
    let page = buf.read();
    Ok(usize::from(entries(&page)[entry]) * CATEGORY_STEP_BYTES)
}

/// A block whose recorded free space is at least `min_free_bytes`, searching from `start` and
/// wrapping around; None if none.
///
/// The block's category guarantees `min_free_bytes` (see the module header: the caller must
/// still check the page). One scan of the root, then one scan per leaf the root points to;
/// a leaf that has less than the root said has its root entry corrected on the way.
pub fn search(
    pool: &BufferPool,
    rel: RelFileLocator,
    min_free_bytes: usize,
    start: BlockNumber,
) -> Result<Option<BlockNumber>> {
    let Some(want) = wanted_category(min_free_bytes) else {
        return Ok(None);
    };
    let nleaves = leaves_in(fsm_nblocks(pool, rel)?);
    if nleaves == 0 {
        return Ok(None);
    }
    let (start_leaf, start_entry) = match locate(start) {
        Some((leaf, entry)) if leaf < nleaves => (leaf, entry),
        _ => (0, 0),
    };
    // A private copy of the root, so no leaf is locked while the root is (the lock order).
    let mut root = [0u8; MAX_LEAVES];
    let root = &mut root[..nleaves];
    {
        let buf = pin(pool, rel, ROOT_BLOCK)?;
        let page = buf.read();
        if Page::new(&page).is_new() {
            root.fill(UNKNOWN_ROOT_ENTRY);
        } else {
            root.copy_from_slice(&entries(&page)[..nleaves]);
        }
    }
    // The order: the start leaf from `start_entry`, the leaves after it, the leaves before
    // it, then the start leaf before `start_entry`. Each pass of each loop moves forward.
    if root[start_leaf] >= want {
        if let Some(b) = search_leaf(
            pool,
            rel,
            root,
            start_leaf,
            start_entry..ENTRIES_PER_PAGE,
            want,
        )? {
            return Ok(Some(b));
        }
    }
    for range in [start_leaf + 1..nleaves, 0..start_leaf] {
        let mut next = range.start;
        while let Some(leaf) = find_ge(&root[..range.end], want, next) {
            if let Some(b) = search_leaf(pool, rel, root, leaf, 0..ENTRIES_PER_PAGE, want)? {
                return Ok(Some(b));
            }
            next = leaf + 1;
        }
    }
    if start_entry > 0 && root[start_leaf] >= want {
        return search_leaf(pool, rel, root, start_leaf, 0..start_entry, want);
    }
    Ok(None)
}

/// Looks for an entry `>= want` in `entries` of leaf `leaf`. If the whole leaf has none, the
/// root promised too much: corrects root entry `leaf` (and the caller's copy `root`).
fn search_leaf(
    pool: &BufferPool,
    rel: RelFileLocator,
    root: &mut [u8],
    leaf: usize,
    range: std::ops::Range<usize>,
    want: u8,
) -> Result<Option<BlockNumber>> {
    let buf = pin(pool, rel, leaf_block(leaf))?;
    let page = buf.read();
    let all = entries(&page);
    if let Some(entry) = find_ge(&all[..range.end], want, range.start) {
        return Ok(Some(heap_block(leaf, entry)));
    }
    let max = max_entry(all);
    if max < want {
        // Stale root (a crash, or a page zeroed on read): store the truth, under the leaf's
        // shared lock so the leaf cannot change meanwhile (see the module header).
        update_root(pool, rel, leaf, RootUpdate::Exactly(max))?;
        root[leaf] = max;
    }
    drop(page);
    Ok(None)
}

/// The heap was truncated to `heap_nblocks`: forgets every block from there on and cuts the
/// FSM pages no longer needed. The caller holds the relation exclusively (nobody else uses
/// its FSM meanwhile), as for [`crate::smgr::Smgr::truncate`].
pub fn truncate(pool: &BufferPool, rel: RelFileLocator, heap_nblocks: BlockNumber) -> Result<()> {
    let Some((leaf, entry)) = locate(heap_nblocks) else {
        return Ok(()); // Nothing from there on was ever recorded.
    };
    let nblocks = fsm_nblocks(pool, rel)?;
    if nblocks == 0 {
        return Ok(());
    }
    let nleaves = leaves_in(nblocks);
    // The leaf cut in the middle keeps its head; the leaves after it go.
    let first_gone_leaf = if entry == 0 { leaf } else { leaf + 1 };
    if entry > 0 && leaf < nleaves {
        let buf = pin(pool, rel, leaf_block(leaf))?;
        let mut page = buf.write();
        if !Page::new(&page).is_new() && entries(&page)[entry..].iter().any(|&b| b != 0) {
            page[HEADER_SIZE + entry..].fill(0);
            page.mark_dirty();
            let max = max_entry(entries(&page));
            update_root(pool, rel, leaf, RootUpdate::Exactly(max))?;
        }
    }
    if first_gone_leaf < MAX_LEAVES {
        let buf = pin(pool, rel, ROOT_BLOCK)?;
        let mut page = buf.write();
        // A new root stays new: it says "look" for every leaf, which is true enough of
        // leaves that do not exist.
        if !Page::new(&page).is_new() && entries(&page)[first_gone_leaf..].iter().any(|&b| b != 0) {
            page[HEADER_SIZE + first_gone_leaf..].fill(0);
            page.mark_dirty();
        }
    }
    hintfork::truncate(pool, rel, Fork::Fsm, leaf_block(first_gone_leaf))
}

/// Recomputes every root entry from its leaf (PostgreSQL's `FreeSpaceMapVacuum`), for the
/// heap's vacuum: the one repair for a root that a crash left *lower* than its leaves (a
/// root too high is repaired by [`search`] anyway). Safe to run concurrently with the rest.
pub fn vacuum(pool: &BufferPool, rel: RelFileLocator) -> Result<()> {
    let nleaves = leaves_in(fsm_nblocks(pool, rel)?);
    for leaf in 0..nleaves {
        let buf = pin(pool, rel, leaf_block(leaf))?;
        let page = buf.read();
        update_root(
            pool,
            rel,
            leaf,
            RootUpdate::Exactly(max_entry(entries(&page))),
        )?;
    }
    Ok(())
}
