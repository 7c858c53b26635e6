//! # tidstore — where lazy vacuum keeps the tuple ids it found dead
//!
//! Vacuum's first heap pass collects the TIDs of dead tuples; the index pass then asks, for
//! every TID each index holds, whether it is dead (`contains`), and the second heap pass walks
//! the dead TIDs block by block. The store is built with a memory budget
//! (`maintenance_work_mem`); when it is full, vacuum runs an index pass, clears it and goes on.
//! Seed 004 (`shared/seeds/004_*.txt`) measured PostgreSQL's flat array against several
//! candidate structures; this module holds quire's answer and PostgreSQL's array side by side,
//! behind one interface, [`DeadTids`]:
//!
//! - [`TidStore`] (`dead_tids = store`, the default): chunks of 64 blocks, each in the
//!   smallest of three forms: per-block containers chosen by size (sorted offsets, offset
//!   runs, or a bitmap) and deduplicated; or, where blocks have at most 4 dead tuples, a
//!   presence word with packed 9-bit offsets, or a list of at most 4 (block, offset) keys;
//!   under a directory over block numbers that costs about 2 bytes per chunk with dead TIDs.
//!   Lookup is O(1) to the block, then a probe of one small container or at most 4
//!   comparisons; memory follows the number of distinct offset patterns where pages repeat
//!   one, is 1.3 to 5 bytes per TID where dead tuples are scattered (PostgreSQL's array: 6;
//!   a sealed leaf of 65,536 blocks that would cost more than 6 becomes a sorted list of its
//!   TIDs, 4 bytes each), and empty block ranges cost nothing.
//! - [`TidArray`] (`dead_tids = array`): PostgreSQL's sorted array of 6-byte item pointers,
//!   searched by bisection, capped at 1 GB (`MaxAllocSize`) as PostgreSQL's is.
//!
//! ## Rules
//!
//! - **Input order.** Blocks arrive in strictly increasing order, each once, with its offsets
//!   sorted and strictly increasing, each at least 1 ([`FIRST_OFFSET_NUMBER`]); block
//!   `u32::MAX` is PostgreSQL's `InvalidBlockNumber` and is refused. [`DeadTids::add_block`]
//!   debug-asserts this; in release builds bad input is refused with a [`TidStoreError`] and
//!   the structure is left exactly as it was ([`DeadTids::try_add_block`] does the same without
//!   the assertion, for callers and tests that want the error). An empty offset list is a
//!   no-op.
//! - **Budget.** [`DeadTids::memory_bytes`] is the structure's own accounting of the capacity
//!   it has allocated (heap and inline). [`TidStore::is_full`] is `memory_bytes >= budget`:
//!   the budget is soft, the block that crosses it is kept whole. [`TidArray::is_full`] is
//!   PostgreSQL's rule: fewer free slots than one page can hold dead items, within
//!   `min(budget, 1 GB)`; the array never grows past that and refuses a block that would not
//!   fit ([`TidStoreError::ArrayFull`]).
//! - **Queries any time.** `contains` and iteration work at every point of the fill: the chunk
//!   being filled is always in its final, readable form. They never allocate, except that
//!   [`DeadTids::next_block`] grows the caller's offset buffer.
//! - **No unsafe, no panics on the lookup path** other than slice bounds checks on the
//!   structure's own invariants.
//!
//! ## Files
//!
//! - `mod.rs` (this file): the interface, [`DeadTids`], its input check and errors.
//! - `store.rs`: [`TidStore`]: the directory over block numbers and how chunks are filled,
//!   the store's layout drawn out.
//! - `chunk.rs`: one chunk of 64 blocks in its three forms (containers and metadata, rank,
//!   list): their byte format drawn out, their encoders and their one decoder.
//! - `containers.rs`: one block's dead offsets as an array, runs or a bitmap: the byte format
//!   of a container, its encoder, probe and decoder (the only code that encodes or parses one).
//! - `array.rs`: [`TidArray`], PostgreSQL's sorted array.

use std::ops::ControlFlow;

use crate::config::DeadTidsMode;
use crate::page::{OffsetNumber, Tid, FIRST_OFFSET_NUMBER};
use crate::types::BlockNumber;

mod array;
mod chunk;
mod containers;
mod store;
#[cfg(test)]
mod tests;

pub use array::TidArray;
pub use store::{TidStore, TidStoreStats};

/// PostgreSQL's `InvalidBlockNumber`: never a real block.
const INVALID_BLOCK: BlockNumber = u32::MAX;

/// Errors of the dead-TID structures: all of them mean the caller broke the input rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TidStoreError {
    #[error("dead TIDs of block {block} added after block {last}: blocks must arrive in strictly increasing order")]
    BlockOutOfOrder {
        block: BlockNumber,
        last: BlockNumber,
    },

    #[error("block number {block} is invalid")]
    InvalidBlock { block: BlockNumber },

    #[error("dead offsets of block {block} are not strictly increasing at position {index}")]
    OffsetsNotSorted { block: BlockNumber, index: usize },

    #[error("offset number 0 in block {block} is invalid (item numbers start at 1)")]
    InvalidOffset { block: BlockNumber },

    #[error("the dead-TID array is full: {stored} TIDs stored, {adding} more do not fit in its limit of {limit_tids}")]
    ArrayFull {
        stored: u64,
        adding: usize,
        limit_tids: u64,
    },
}

/// Where [`DeadTids::next_block`] continues. Start with `BlockCursor::default()`; its contents
/// mean something only to the structure that advanced it (another structure, or the same one
/// after `clear`, just ends the walk early or late, never panics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockCursor {
    pos: u64,
}

/// The interface lazy vacuum uses for both `dead_tids` modes.
pub trait DeadTids: Send + Sync {
    /// Records the dead `offsets` (sorted, strictly increasing, all >= 1) of `block`, which
    /// must be greater than every block added since construction or the last `clear`. Bad
    /// input leaves the structure unchanged and returns the error.
    fn try_add_block(
        &mut self,
        block: BlockNumber,
        offsets: &[OffsetNumber],
    ) -> Result<(), TidStoreError>;

    /// [`try_add_block`](Self::try_add_block) that also fails a debug assertion on bad input:
    /// out-of-order blocks are a bug in the heap pass, and debug builds should stop there.
    fn add_block(
        &mut self,
        block: BlockNumber,
        offsets: &[OffsetNumber],
    ) -> Result<(), TidStoreError> {
        let result = self.try_add_block(block, offsets);
        debug_assert!(
            result.is_ok(),
            "dead-TID input rejected: {}",
            result
                .as_ref()
                .err()
                .map(ToString::to_string)
                .unwrap_or_default()
        );
        result
    }

    /// Whether `tid` was added. Any order; the hot path of the index pass.
    fn contains(&self, tid: Tid) -> bool;

    /// The dead offsets of `block` (sorted), written to `out` (cleared first); none if the
    /// block has none. For [`DeadTidProbe`], which asks once per block.
    fn offsets_of(&self, block: BlockNumber, out: &mut Vec<OffsetNumber>);

    /// The number of TIDs held.
    fn num_tids(&self) -> u64;

    /// The number of blocks with at least one TID.
    fn num_blocks(&self) -> u64;

    /// The structure's own accounting of the memory it has allocated, in bytes (capacity,
    /// not length: what the allocator handed out).
    fn memory_bytes(&self) -> usize;

    /// The budget given at construction (`maintenance_work_mem`).
    fn budget_bytes(&self) -> u64;

    /// Whether vacuum must stop adding, run an index pass and `clear`.
    fn is_full(&self) -> bool;

    /// Forgets every TID and releases the memory; the next block may be any block.
    fn clear(&mut self);

    /// The next block with dead TIDs after `cursor`, in block order, with its offsets (sorted)
    /// written to `offsets` (cleared first); `None` at the end. Allocation-free once `offsets`
    /// has grown to the largest block's count.
    fn next_block(
        &self,
        cursor: &mut BlockCursor,
        offsets: &mut Vec<OffsetNumber>,
    ) -> Option<BlockNumber>;

    /// Calls `visit` for each block with dead TIDs, in block order, with its sorted offsets,
    /// until it returns `Break`. Returns `Break` if the visitor stopped the walk.
    fn for_each_block(
        &self,
        visit: &mut dyn FnMut(BlockNumber, &[OffsetNumber]) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let mut cursor = BlockCursor::default();
        let mut offsets = Vec::new();
        // Each turn returns a distinct block, so the walk ends after num_blocks turns.
        for _ in 0..self.num_blocks() {
            let Some(block) = self.next_block(&mut cursor, &mut offsets) else {
                break;
            };
            visit(block, &offsets)?;
        }
        ControlFlow::Continue(())
    }
}

/// `contains` for TIDs that come in runs of one block, as the index pass sends them when an
/// index's order follows the heap's (a serial key: the entries of a leaf page point into a
/// few heap blocks, each many times in a row). Once a run of one block is long enough, the
/// probe fetches the block's dead offsets ([`DeadTids::offsets_of`]) and searches those few
/// offsets for the rest of the run, instead of walking the structure from its top for every
/// TID (a third of seed 004's index pass: 164 instructions a TID). Other probes go to
/// [`DeadTids::contains`].
///
/// "Long enough" is [`PROBE_MIN_RUN`] probes, or an eighth of the offsets the last fetch
/// returned if that is more. A fetch costs about one step per offset, so where runs are short
/// against a block's dead offsets (an index that meets each heap block in a few short runs)
/// the probe stops fetching and costs what `contains` does.
pub struct DeadTidProbe<'a> {
    dead: &'a dyn DeadTids,
    /// The block of the last probe, and how many probes in a row have asked about it.
    block: Option<BlockNumber>,
    run: usize,
    /// Whether `offsets` holds that block's dead offsets.
    fetched: bool,
    offsets: Vec<OffsetNumber>,
    /// The run length at which the next fetch happens.
    fetch_at: usize,
}

/// The shortest run of probes of one block that fetches its offsets.
pub const PROBE_MIN_RUN: usize = 2;

impl<'a> DeadTidProbe<'a> {
    pub fn new(dead: &'a dyn DeadTids) -> Self {
        DeadTidProbe {
            dead,
            block: None,
            run: 0,
            fetched: false,
            offsets: Vec::new(),
            fetch_at: PROBE_MIN_RUN,
        }
    }

    /// Whether `tid` is dead: the same answer as `contains`.
    pub fn contains(&mut self, tid: Tid) -> bool {
        if self.block == Some(tid.block) {
            self.run += 1;
        } else {
            self.block = Some(tid.block);
            self.run = 1;
            self.fetched = false;
        }
        if !self.fetched && self.run >= self.fetch_at {
            self.dead.offsets_of(tid.block, &mut self.offsets);
            self.fetched = true;
            self.fetch_at = PROBE_MIN_RUN.max(self.offsets.len() / 8);
        }
        if self.fetched {
            self.offsets.binary_search(&tid.offset).is_ok()
        } else {
            self.dead.contains(tid)
        }
    }
}

/// The structure vacuum uses in `mode`, with a budget of `budget_bytes`.
pub(crate) fn new_dead_tids(mode: DeadTidsMode, budget_bytes: u64) -> Box<dyn DeadTids> {
    match mode {
        DeadTidsMode::Store => Box::new(TidStore::new(budget_bytes)),
        DeadTidsMode::Array => Box::new(TidArray::new(budget_bytes)),
    }
}

/// Checks one `add_block` call's input against the rules; `Ok(false)` for an empty list.
fn check_input(
    block: BlockNumber,
    offsets: &[OffsetNumber],
    last: Option<BlockNumber>,
) -> Result<bool, TidStoreError> {
    if offsets.is_empty() {
        return Ok(false);
    }
    if block == INVALID_BLOCK {
        return Err(TidStoreError::InvalidBlock { block });
    }
    if let Some(last) = last {
        if block <= last {
            return Err(TidStoreError::BlockOutOfOrder { block, last });
        }
    }
    if offsets[0] < FIRST_OFFSET_NUMBER {
        return Err(TidStoreError::InvalidOffset { block });
    }
    if let Some(index) = offsets.windows(2).position(|w| w[0] >= w[1]) {
        return Err(TidStoreError::OffsetsNotSorted {
            block,
            index: index + 1,
        });
    }
    Ok(true)
}
