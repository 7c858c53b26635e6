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
//! - [`TidStore`] (`dead_tids = store`, the default): per-block containers chosen by size
//!   (sorted offsets, offset runs, or a bitmap), deduplicated and packed per chunk of 64
//!   blocks, under a two-level directory over block numbers. Lookup is O(1) to the block and a
//!   probe of one small container; memory follows the number of distinct offset patterns, not
//!   the number of TIDs, and empty block ranges cost nothing. See the layout below.
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
//! ## Store layout
//!
//! ```text
//! top: Vec<u32>, indexed by block >> 16: 1 + index into `leaves`, 0 = no dead TIDs there
//!   │               (4 bytes per 65,536 blocks = per 512 MiB of heap, up to the last block)
//!   ▼
//! Leaf (65,536 blocks): slots [u32; 1024], indexed by (block >> 6) & 1023: the byte position
//!   │   of a chunk's metadata in the leaf's arena, or u32::MAX for a chunk without dead TIDs
//!   ▼
//! arena: Vec<u8>, per chunk of 64 blocks, in block order:
//!   ┌─────────────┬─────────────┬───┬──────────────────┬──────────────────────────────────┐
//!   │ container 0 │ container 1 │ … │ container d-1    │ metadata (slot points here)      │
//!   └─────────────┴─────────────┴───┴──────────────────┴──────────────────────────────────┘
//!   metadata:  0       8      9      10                 10 + d·w
//!             ┌───────┬──────┬──────┬─────────────────┬────────────────────────────────┐
//!             │present│ info │  d   │ table: d × w B  │ refs: p × r bits, packed       │
//!             │  u64  │  u8  │  u8  │ distance back   │ i-th present block → distinct  │
//!             │bit i =│r code│      │ from metadata to│ container index (r ∈ 0,1,2,4,8:│
//!             │block i│+ wide│      │ container k     │ 0 bits when d = 1)             │
//!             └───────┴──────┴──────┴─────────────────┴────────────────────────────────┘
//!   (w = 2, or 4 when the chunk's containers span more than 64 KiB: the `wide` bit 7 of info;
//!    p = popcount(present); the i-th present block is found by popcount below its bit)
//!
//! container: u16 header = kind << 14 | count, then
//!   kind 0 array:  count × u16 offsets, sorted                      (2 + 2n bytes)
//!   kind 1 runs:   count × (first u16, last u16), sorted, disjoint  (2 + 4r bytes)
//!   kind 2 bitmap: u16 first byte b, then count bytes; bit j of byte i is offset 8(b+i)+j
//!                                                                   (4 + bytes)
//! ```
//!
//! All integers are little-endian. Each block gets the smallest of the three encodings (ties
//! go to the bitmap, then runs, whose probes are cheaper). Identical containers within a chunk
//! are stored once: pages emptied by a bulk delete, or every page of a table with the same
//! dead pattern, cost a few bits each. A chunk's metadata comes *after* its containers so that
//! adding a block to the open chunk only appends a container and rewrites the metadata (at
//! most ~200 bytes); the structure is complete after every `add_block`. A leaf's arena is
//! shrunk to its length when the fill moves on to the next leaf, so only the last leaf carries
//! growth slack (at most an eighth of its size).
//!
//! Bytes per TID therefore depend on the pattern: a dense run of dead offsets costs 6 bytes per
//! distinct pattern plus 18 per chunk (under 0.3 bytes per block when a chunk's 64 pages share
//! one pattern); scattered offsets cost about 2 bytes each (array) or one bit per offset in
//! the span (bitmap), plus a byte of table and up to a byte of reference per block.

use std::fmt;
use std::mem::size_of;
use std::ops::ControlFlow;

use crate::config::DeadTidsMode;
use crate::page::{OffsetNumber, Tid, FIRST_OFFSET_NUMBER, MAX_ITEM_COUNT};
use crate::smgr::BlockNumber;

#[cfg(test)]
mod tests;

/// PostgreSQL's `MaxAllocSize` (1 GB - 1): the largest array PostgreSQL's vacuum allocates
/// for dead TIDs, whatever `maintenance_work_mem` says.
pub const MAX_ALLOC_SIZE: u64 = 0x3fff_ffff;

/// The size of one item pointer in [`TidArray`], as PostgreSQL's `ItemPointerData`.
const ITEM_POINTER_BYTES: usize = 6;

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

/// The structure vacuum uses in `mode`, with a budget of `budget_bytes`.
pub fn new_dead_tids(mode: DeadTidsMode, budget_bytes: u64) -> Box<dyn DeadTids> {
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

// =============================================================================================
// The store.

/// Blocks per leaf: 2^16 (512 MiB of heap).
const LEAF_SHIFT: u32 = 16;
/// Blocks per chunk: 64, one bit each in the chunk's presence word.
const CHUNK_SHIFT: u32 = 6;
const BLOCKS_PER_CHUNK: usize = 1 << CHUNK_SHIFT;
const CHUNKS_PER_LEAF: usize = 1 << (LEAF_SHIFT - CHUNK_SHIFT);
const BLOCKS_PER_LEAF: u32 = 1 << LEAF_SHIFT;
/// A leaf slot of a chunk without dead TIDs.
const EMPTY_SLOT: u32 = u32::MAX;

/// Metadata field positions, from the slot's byte position.
const META_PRESENT: usize = 0;
const META_INFO: usize = 8;
const META_DISTINCT: usize = 9;
const META_TABLE: usize = 10;
/// `info` bit 7: table entries are u32 rather than u16.
const INFO_WIDE: u8 = 0x80;
/// `info` bits 0-2: the reference width code, an index into this table.
const REF_BITS: [u32; 5] = [0, 1, 2, 4, 8];

/// Container kinds (top two bits of the container header) and the count mask.
const KIND_ARRAY: u16 = 0;
const KIND_RUNS: u16 = 1;
const KIND_BITMAP: u16 = 2;
const COUNT_MASK: u16 = 0x3fff;
/// Enough halvings for any container: at most 8192 entries.
const SEARCH_TURNS: usize = 15;

// The store's own arena, written by this module: every field read lies inside it.
fn read_u16(bytes: &[u8], at: usize) -> u16 {
    crate::bytes::u16_at(bytes, at).expect("a field inside the arena")
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    crate::bytes::u32_at(bytes, at).expect("a field inside the arena")
}

fn read_u64(bytes: &[u8], at: usize) -> u64 {
    crate::bytes::u64_at(bytes, at).expect("a field inside the arena")
}

/// Encodes sorted, strictly increasing, non-empty `offsets` as the smallest container.
fn encode_container(offsets: &[OffsetNumber], out: &mut Vec<u8>) {
    out.clear();
    let n = offsets.len();
    let runs = 1 + offsets.windows(2).filter(|w| w[1] != w[0] + 1).count();
    let first_byte = offsets[0] >> 3;
    let bitmap_bytes = usize::from((offsets[n - 1] >> 3) - first_byte) + 1;
    let array_size = 2 + 2 * n;
    let runs_size = 2 + 4 * runs;
    let bitmap_size = 4 + bitmap_bytes;
    // Counts fit in 14 bits: a bitmap is at most 8192 bytes, and the array or runs are only
    // chosen when no larger than it (n <= 4097, runs <= 2048).
    if bitmap_size <= runs_size && bitmap_size <= array_size {
        out.extend_from_slice(&((KIND_BITMAP << 14) | bitmap_bytes as u16).to_le_bytes());
        out.extend_from_slice(&first_byte.to_le_bytes());
        out.resize(bitmap_size, 0);
        for &o in offsets {
            out[4 + usize::from((o >> 3) - first_byte)] |= 1 << (o & 7);
        }
    } else if runs_size <= array_size {
        out.extend_from_slice(&((KIND_RUNS << 14) | runs as u16).to_le_bytes());
        let mut start = offsets[0];
        for w in offsets.windows(2) {
            if w[1] != w[0] + 1 {
                out.extend_from_slice(&start.to_le_bytes());
                out.extend_from_slice(&w[0].to_le_bytes());
                start = w[1];
            }
        }
        out.extend_from_slice(&start.to_le_bytes());
        out.extend_from_slice(&offsets[n - 1].to_le_bytes());
    } else {
        out.extend_from_slice(&((KIND_ARRAY << 14) | n as u16).to_le_bytes());
        for &o in offsets {
            out.extend_from_slice(&o.to_le_bytes());
        }
    }
}

/// Whether the container starting at `c[0]` holds `offset`.
fn container_contains(c: &[u8], offset: OffsetNumber) -> bool {
    let header = read_u16(c, 0);
    let count = usize::from(header & COUNT_MASK);
    match header >> 14 {
        KIND_BITMAP => {
            let byte = usize::from(offset >> 3);
            let first = usize::from(read_u16(c, 2));
            byte >= first && byte - first < count && c[4 + byte - first] & (1 << (offset & 7)) != 0
        }
        KIND_RUNS => {
            // The number of runs that start at or before `offset`.
            let (mut lo, mut hi) = (0, count);
            for _ in 0..SEARCH_TURNS {
                if lo >= hi {
                    break;
                }
                let mid = usize::midpoint(lo, hi);
                if read_u16(c, 2 + 4 * mid) <= offset {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo > 0 && read_u16(c, 2 + 4 * (lo - 1) + 2) >= offset
        }
        _ => {
            let (mut lo, mut hi) = (0, count);
            for _ in 0..SEARCH_TURNS {
                if lo >= hi {
                    break;
                }
                let mid = usize::midpoint(lo, hi);
                match read_u16(c, 2 + 2 * mid).cmp(&offset) {
                    std::cmp::Ordering::Less => lo = mid + 1,
                    std::cmp::Ordering::Greater => hi = mid,
                    std::cmp::Ordering::Equal => return true,
                }
            }
            false
        }
    }
}

/// Appends the offsets of the container starting at `c[0]` to `out`.
fn decode_container(c: &[u8], out: &mut Vec<OffsetNumber>) {
    let header = read_u16(c, 0);
    let count = usize::from(header & COUNT_MASK);
    match header >> 14 {
        KIND_BITMAP => {
            let first = read_u16(c, 2);
            for i in 0..count {
                let byte = c[4 + i];
                for bit in 0..8u16 {
                    if byte & (1 << bit) != 0 {
                        out.push((first + i as u16) * 8 + bit);
                    }
                }
            }
        }
        KIND_RUNS => {
            for i in 0..count {
                let (first, last) = (read_u16(c, 2 + 4 * i), read_u16(c, 4 + 4 * i));
                out.extend(first..=last);
            }
        }
        _ => out.extend((0..count).map(|i| read_u16(c, 2 + 2 * i))),
    }
}

/// The container kind of the container starting at `c[0]`, and its size in bytes.
fn container_kind_and_size(c: &[u8]) -> (u16, usize) {
    let header = read_u16(c, 0);
    let count = usize::from(header & COUNT_MASK);
    let kind = header >> 14;
    let size = match kind {
        KIND_BITMAP => 4 + count,
        KIND_RUNS => 2 + 4 * count,
        _ => 2 + 2 * count,
    };
    (kind, size)
}

/// A chunk's metadata, read from the arena at the slot's position.
struct ChunkMeta<'a> {
    arena: &'a [u8],
    at: usize,
    present: u64,
    info: u8,
    distinct: usize,
}

impl<'a> ChunkMeta<'a> {
    fn read(arena: &'a [u8], at: usize) -> Self {
        ChunkMeta {
            arena,
            at,
            present: read_u64(arena, at + META_PRESENT),
            info: arena[at + META_INFO],
            distinct: usize::from(arena[at + META_DISTINCT]),
        }
    }

    fn table_width(&self) -> usize {
        if self.info & INFO_WIDE != 0 {
            4
        } else {
            2
        }
    }

    /// The arena position of the container of the chunk's block `bit` (which is present).
    fn container_at(&self, bit: u32) -> usize {
        let ref_bits = REF_BITS[usize::from(self.info & 7)];
        let width = self.table_width();
        let k = if ref_bits == 0 {
            0
        } else {
            let rank = (self.present & ((1u64 << bit) - 1)).count_ones();
            let pos = rank * ref_bits;
            let refs_at = self.at + META_TABLE + self.distinct * width;
            let byte = self.arena[refs_at + (pos / 8) as usize];
            usize::from((byte >> (pos % 8)) & ((1u16 << ref_bits) - 1) as u8)
        };
        let table_at = self.at + META_TABLE + k * width;
        let distance = if width == 4 {
            read_u32(self.arena, table_at) as usize
        } else {
            usize::from(read_u16(self.arena, table_at))
        };
        self.at - distance
    }
}

/// 65,536 consecutive blocks: a slot per chunk of 64, and the arena holding the chunks.
struct Leaf {
    /// `block >> 16` of every block in the leaf.
    key: u32,
    slots: Box<[u32; CHUNKS_PER_LEAF]>,
    arena: Vec<u8>,
}

impl Leaf {
    fn new(key: u32) -> Self {
        Leaf {
            key,
            slots: Box::new([EMPTY_SLOT; CHUNKS_PER_LEAF]),
            arena: Vec::new(),
        }
    }

    fn memory_bytes(&self) -> usize {
        size_of::<[u32; CHUNKS_PER_LEAF]>() + self.arena.capacity()
    }

    /// The first present block at or after `rel` (a block number within the leaf), with the
    /// position of its chunk's metadata.
    fn next_present(&self, rel: u32) -> Option<(u32, usize)> {
        let first_chunk = (rel >> CHUNK_SHIFT) as usize;
        for chunk in first_chunk..CHUNKS_PER_LEAF {
            let slot = self.slots[chunk];
            if slot == EMPTY_SLOT {
                continue;
            }
            let mut present = read_u64(&self.arena, slot as usize + META_PRESENT);
            if chunk == first_chunk {
                present &= u64::MAX << (rel & (BLOCKS_PER_CHUNK as u32 - 1));
            }
            if present != 0 {
                let rel_block = ((chunk as u32) << CHUNK_SHIFT) | present.trailing_zeros();
                return Some((rel_block, slot as usize));
            }
        }
        None
    }
}

/// The chunk being filled (always in the last leaf). Its metadata sits at the end of the
/// arena and is rewritten on every block added to it.
struct OpenChunk {
    /// `block >> 6` of its blocks.
    chunk: u32,
    /// Where its metadata starts (= where its containers end).
    meta_at: usize,
    present: u64,
    blocks: usize,
    distinct: usize,
    /// Arena position and size of each distinct container.
    starts: [u32; BLOCKS_PER_CHUNK],
    sizes: [u32; BLOCKS_PER_CHUNK],
    /// For each present block in order, its distinct container's index.
    refs: [u8; BLOCKS_PER_CHUNK],
}

/// Counts describing a [`TidStore`]'s shape (computed by a walk; for benchmarks and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TidStoreStats {
    pub leaves: u64,
    pub chunks: u64,
    pub blocks: u64,
    /// Distinct containers stored, by kind.
    pub array_containers: u64,
    pub run_containers: u64,
    pub bitmap_containers: u64,
    /// Bytes of containers, and of chunk metadata.
    pub container_bytes: u64,
    pub metadata_bytes: u64,
}

/// quire's dead-TID store (`dead_tids = store`): see the module documentation for the layout.
pub struct TidStore {
    budget_bytes: u64,
    /// Indexed by `block >> 16`: 1 + the leaf's index in `leaves`, or 0.
    top: Vec<u32>,
    /// In block order.
    leaves: Vec<Leaf>,
    /// `memory_bytes` of every leaf but the last (which alone still changes), so that
    /// `memory_bytes` and `is_full`, called after every block, cost O(1).
    sealed_leaves_bytes: usize,
    open: Option<OpenChunk>,
    last_block: Option<BlockNumber>,
    num_tids: u64,
    num_blocks: u64,
    /// The container being encoded (reused so that adding allocates nothing in steady state).
    scratch: Vec<u8>,
}

impl fmt::Debug for TidStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TidStore")
            .field("num_tids", &self.num_tids)
            .field("num_blocks", &self.num_blocks)
            .field("memory_bytes", &self.memory_bytes())
            .field("budget_bytes", &self.budget_bytes)
            .finish_non_exhaustive()
    }
}

impl TidStore {
    pub fn new(budget_bytes: u64) -> Self {
        TidStore {
            budget_bytes,
            top: Vec::new(),
            leaves: Vec::new(),
            sealed_leaves_bytes: 0,
            open: None,
            last_block: None,
            num_tids: 0,
            num_blocks: 0,
            scratch: Vec::new(),
        }
    }

    /// The leaf that holds `block`, created (after shrinking the previous one) if needed.
    fn leaf_for(&mut self, block: BlockNumber) -> usize {
        let key = block >> LEAF_SHIFT;
        if let Some(last) = self.leaves.last() {
            if last.key == key {
                return self.leaves.len() - 1;
            }
        }
        // The previous leaf is complete: give back its growth slack.
        if let Some(last) = self.leaves.last_mut() {
            last.arena.shrink_to_fit();
            self.sealed_leaves_bytes += last.memory_bytes();
        }
        self.leaves.push(Leaf::new(key));
        let index = self.leaves.len() - 1;
        let needed = key as usize + 1;
        if self.top.len() < needed {
            self.top.reserve_exact(needed - self.top.len());
            self.top.resize(needed, 0);
        }
        self.top[key as usize] = u32::try_from(index + 1).expect("at most 65,536 leaves");
        index
    }

    /// Computes the shape counts by walking every chunk.
    pub fn stats(&self) -> TidStoreStats {
        let mut s = TidStoreStats {
            leaves: self.leaves.len() as u64,
            blocks: self.num_blocks,
            ..TidStoreStats::default()
        };
        for leaf in &self.leaves {
            for &slot in leaf.slots.iter() {
                if slot == EMPTY_SLOT {
                    continue;
                }
                s.chunks += 1;
                let meta = ChunkMeta::read(&leaf.arena, slot as usize);
                let width = meta.table_width();
                let ref_bits = REF_BITS[usize::from(meta.info & 7)] as usize;
                let refs_bytes = (meta.present.count_ones() as usize * ref_bits).div_ceil(8);
                s.metadata_bytes += (META_TABLE + meta.distinct * width + refs_bytes) as u64;
                for k in 0..meta.distinct {
                    let at = meta.at + META_TABLE + k * width;
                    let distance = if width == 4 {
                        read_u32(&leaf.arena, at) as usize
                    } else {
                        usize::from(read_u16(&leaf.arena, at))
                    };
                    let (kind, size) = container_kind_and_size(&leaf.arena[meta.at - distance..]);
                    s.container_bytes += size as u64;
                    match kind {
                        KIND_BITMAP => s.bitmap_containers += 1,
                        KIND_RUNS => s.run_containers += 1,
                        _ => s.array_containers += 1,
                    }
                }
            }
        }
        s
    }
}

/// Makes room for `extra` more bytes, growing by an eighth rather than doubling: the open
/// leaf's slack is memory the budget pays for. Growth stays amortised O(1) per byte, and
/// large reallocations are page remaps rather than copies on Linux.
fn reserve_arena(arena: &mut Vec<u8>, extra: usize) {
    if arena.capacity() - arena.len() < extra {
        arena.reserve_exact(extra.max(arena.len() / 8).max(256));
    }
}

/// Writes the open chunk's metadata at the end of `arena` (which ends at `open.meta_at`).
fn write_meta(arena: &mut Vec<u8>, open: &OpenChunk) {
    let chunk_start = open.starts[0] as usize;
    let wide = open.meta_at - chunk_start > usize::from(u16::MAX);
    let width = if wide { 4 } else { 2 };
    let code: u8 = match open.distinct {
        1 => 0,
        2 => 1,
        3..=4 => 2,
        5..=16 => 3,
        _ => 4,
    };
    let ref_bits = REF_BITS[usize::from(code)] as usize;
    let refs_bytes = (open.blocks * ref_bits).div_ceil(8);
    reserve_arena(arena, META_TABLE + open.distinct * width + refs_bytes);
    arena.extend_from_slice(&open.present.to_le_bytes());
    arena.push(code | if wide { INFO_WIDE } else { 0 });
    arena.push(open.distinct as u8);
    for &start in &open.starts[..open.distinct] {
        let distance = open.meta_at - start as usize;
        if wide {
            arena.extend_from_slice(&(distance as u32).to_le_bytes());
        } else {
            arena.extend_from_slice(&(distance as u16).to_le_bytes());
        }
    }
    if ref_bits > 0 {
        let refs_at = arena.len();
        arena.resize(refs_at + refs_bytes, 0);
        for (i, &r) in open.refs[..open.blocks].iter().enumerate() {
            let pos = i * ref_bits;
            arena[refs_at + pos / 8] |= r << (pos % 8);
        }
    }
}

impl DeadTids for TidStore {
    fn try_add_block(
        &mut self,
        block: BlockNumber,
        offsets: &[OffsetNumber],
    ) -> Result<(), TidStoreError> {
        if !check_input(block, offsets, self.last_block)? {
            return Ok(());
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        encode_container(offsets, &mut scratch);
        let leaf_index = self.leaf_for(block);
        let chunk = block >> CHUNK_SHIFT;
        let bit = block & (BLOCKS_PER_CHUNK as u32 - 1);
        let leaf = &mut self.leaves[leaf_index];
        let open = match &mut self.open {
            Some(open) if open.chunk == chunk => {
                // Drop the old metadata; it is written again below.
                leaf.arena.truncate(open.meta_at);
                open
            }
            _ => self.open.insert(OpenChunk {
                chunk,
                meta_at: leaf.arena.len(),
                present: 0,
                blocks: 0,
                distinct: 0,
                starts: [0; BLOCKS_PER_CHUNK],
                sizes: [0; BLOCKS_PER_CHUNK],
                refs: [0; BLOCKS_PER_CHUNK],
            }),
        };
        let existing = (0..open.distinct).find(|&k| {
            let start = open.starts[k] as usize;
            open.sizes[k] as usize == scratch.len()
                && leaf.arena[start..start + scratch.len()] == scratch[..]
        });
        let k = if let Some(k) = existing {
            k
        } else {
            reserve_arena(&mut leaf.arena, scratch.len());
            let start = leaf.arena.len();
            leaf.arena.extend_from_slice(&scratch);
            let k = open.distinct;
            open.starts[k] = u32::try_from(start).expect("a leaf's arena stays below 4 GiB");
            open.sizes[k] = scratch.len() as u32;
            open.distinct += 1;
            k
        };
        open.refs[open.blocks] = k as u8;
        open.blocks += 1;
        open.present |= 1u64 << bit;
        open.meta_at = leaf.arena.len();
        write_meta(&mut leaf.arena, open);
        leaf.slots[(chunk as usize) & (CHUNKS_PER_LEAF - 1)] =
            u32::try_from(open.meta_at).expect("a leaf's arena stays below 4 GiB");
        self.scratch = scratch;
        self.last_block = Some(block);
        self.num_tids += offsets.len() as u64;
        self.num_blocks += 1;
        Ok(())
    }

    #[inline]
    fn contains(&self, tid: Tid) -> bool {
        let block = tid.block;
        let Some(&leaf_plus_one) = self.top.get((block >> LEAF_SHIFT) as usize) else {
            return false;
        };
        if leaf_plus_one == 0 {
            return false;
        }
        let leaf = &self.leaves[leaf_plus_one as usize - 1];
        let slot = leaf.slots[((block >> CHUNK_SHIFT) as usize) & (CHUNKS_PER_LEAF - 1)];
        if slot == EMPTY_SLOT {
            return false;
        }
        let bit = block & (BLOCKS_PER_CHUNK as u32 - 1);
        let present = read_u64(&leaf.arena, slot as usize + META_PRESENT);
        if present & (1u64 << bit) == 0 {
            return false;
        }
        let meta = ChunkMeta::read(&leaf.arena, slot as usize);
        container_contains(&leaf.arena[meta.container_at(bit)..], tid.offset)
    }

    fn num_tids(&self) -> u64 {
        self.num_tids
    }

    fn num_blocks(&self) -> u64 {
        self.num_blocks
    }

    fn memory_bytes(&self) -> usize {
        size_of::<Self>()
            + self.top.capacity() * size_of::<u32>()
            + self.leaves.capacity() * size_of::<Leaf>()
            + self.scratch.capacity()
            + self.sealed_leaves_bytes
            + self.leaves.last().map_or(0, Leaf::memory_bytes)
    }

    fn budget_bytes(&self) -> u64 {
        self.budget_bytes
    }

    fn is_full(&self) -> bool {
        self.memory_bytes() as u64 >= self.budget_bytes
    }

    fn clear(&mut self) {
        *self = TidStore::new(self.budget_bytes);
    }

    fn next_block(
        &self,
        cursor: &mut BlockCursor,
        offsets: &mut Vec<OffsetNumber>,
    ) -> Option<BlockNumber> {
        offsets.clear();
        let first_leaf = (cursor.pos >> LEAF_SHIFT) as usize;
        let mut rel = (cursor.pos & u64::from(BLOCKS_PER_LEAF - 1)) as u32;
        for leaf_index in first_leaf..self.leaves.len() {
            let leaf = &self.leaves[leaf_index];
            if let Some((rel_block, slot)) = leaf.next_present(rel) {
                let meta = ChunkMeta::read(&leaf.arena, slot);
                let bit = rel_block & (BLOCKS_PER_CHUNK as u32 - 1);
                decode_container(&leaf.arena[meta.container_at(bit)..], offsets);
                cursor.pos = ((leaf_index as u64) << LEAF_SHIFT) + u64::from(rel_block) + 1;
                return Some((leaf.key << LEAF_SHIFT) | rel_block);
            }
            rel = 0;
        }
        cursor.pos = (self.leaves.len() as u64) << LEAF_SHIFT;
        None
    }
}

// =============================================================================================
// PostgreSQL's array.

/// One TID as PostgreSQL stores it (`ItemPointerData`): the block number as two 16-bit
/// halves, then the offset; 6 bytes, 2-byte aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
struct ItemPointer {
    block_hi: u16,
    block_lo: u16,
    offset: u16,
}

const _: () = assert!(size_of::<ItemPointer>() == ITEM_POINTER_BYTES);

impl ItemPointer {
    fn new(block: BlockNumber, offset: OffsetNumber) -> Self {
        ItemPointer {
            block_hi: (block >> 16) as u16,
            block_lo: block as u16,
            offset,
        }
    }

    fn block(self) -> BlockNumber {
        (u32::from(self.block_hi) << 16) | u32::from(self.block_lo)
    }

    /// Orders as (block, offset).
    fn key(self) -> u64 {
        (u64::from(self.block()) << 16) | u64::from(self.offset)
    }
}

/// PostgreSQL's dead-TID array (`dead_tids = array`, before PostgreSQL 17): 6 bytes per TID,
/// sorted because the heap is scanned in order, searched by bisection, and never larger than
/// `min(budget, 1 GB)`.
pub struct TidArray {
    budget_bytes: u64,
    /// The most TIDs it may hold: `min(budget, MaxAllocSize) / 6`.
    limit_tids: usize,
    items: Vec<ItemPointer>,
    last_block: Option<BlockNumber>,
    num_blocks: u64,
}

impl fmt::Debug for TidArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TidArray")
            .field("num_tids", &self.items.len())
            .field("limit_tids", &self.limit_tids)
            .field("memory_bytes", &self.memory_bytes())
            .finish_non_exhaustive()
    }
}

impl TidArray {
    pub fn new(budget_bytes: u64) -> Self {
        TidArray {
            budget_bytes,
            limit_tids: (budget_bytes.min(MAX_ALLOC_SIZE) / ITEM_POINTER_BYTES as u64) as usize,
            items: Vec::new(),
            last_block: None,
            num_blocks: 0,
        }
    }

    /// The most TIDs this array may hold.
    pub fn limit_tids(&self) -> u64 {
        self.limit_tids as u64
    }

    /// Allocates room for `tids` TIDs at once (clamped to the limit), as PostgreSQL sizes its
    /// array up front from the table's size; without it the array grows by doubling.
    pub fn reserve_exact_tids(&mut self, tids: u64) {
        let wanted = usize::try_from(tids)
            .unwrap_or(usize::MAX)
            .min(self.limit_tids);
        if wanted > self.items.len() {
            self.items.reserve_exact(wanted - self.items.len());
        }
    }
}

impl DeadTids for TidArray {
    fn try_add_block(
        &mut self,
        block: BlockNumber,
        offsets: &[OffsetNumber],
    ) -> Result<(), TidStoreError> {
        if !check_input(block, offsets, self.last_block)? {
            return Ok(());
        }
        let needed = self.items.len() + offsets.len();
        if needed > self.limit_tids {
            return Err(TidStoreError::ArrayFull {
                stored: self.items.len() as u64,
                adding: offsets.len(),
                limit_tids: self.limit_tids as u64,
            });
        }
        if needed > self.items.capacity() {
            let target = needed
                .max(self.items.capacity() * 2)
                .max(1024)
                .min(self.limit_tids);
            self.items.reserve_exact(target - self.items.len());
        }
        self.items
            .extend(offsets.iter().map(|&o| ItemPointer::new(block, o)));
        self.last_block = Some(block);
        self.num_blocks += 1;
        Ok(())
    }

    #[inline]
    fn contains(&self, tid: Tid) -> bool {
        let key = (u64::from(tid.block) << 16) | u64::from(tid.offset);
        // As PostgreSQL's lazy_tid_reaped: a bounds check first, which pays off when the
        // dead tuples are concentrated in part of the heap.
        let (Some(first), Some(last)) = (self.items.first(), self.items.last()) else {
            return false;
        };
        if key < first.key() || key > last.key() {
            return false;
        }
        // Bisection as glibc's bsearch() does it for PostgreSQL: branchy, stopping at the
        // first equal item. (std's branchless search is slower here: on an array that does
        // not fit in cache, the CPU's guess of the next probe prefetches it.)
        let (mut lo, mut hi) = (0, self.items.len());
        for _ in 0..usize::BITS {
            if lo >= hi {
                break;
            }
            let mid = lo + (hi - lo) / 2;
            match self.items[mid].key().cmp(&key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return true,
            }
        }
        false
    }

    fn num_tids(&self) -> u64 {
        self.items.len() as u64
    }

    fn num_blocks(&self) -> u64 {
        self.num_blocks
    }

    fn memory_bytes(&self) -> usize {
        size_of::<Self>() + self.items.capacity() * ITEM_POINTER_BYTES
    }

    fn budget_bytes(&self) -> u64 {
        self.budget_bytes
    }

    /// PostgreSQL's rule (`lazy_scan_heap`): stop when a page's worth of dead items might not
    /// fit any more.
    fn is_full(&self) -> bool {
        self.limit_tids - self.items.len() < MAX_ITEM_COUNT
    }

    fn clear(&mut self) {
        *self = TidArray::new(self.budget_bytes);
    }

    fn next_block(
        &self,
        cursor: &mut BlockCursor,
        offsets: &mut Vec<OffsetNumber>,
    ) -> Option<BlockNumber> {
        offsets.clear();
        let start = usize::try_from(cursor.pos).unwrap_or(usize::MAX);
        let first = self.items.get(start)?;
        let block = first.block();
        let rest = &self.items[start..];
        let count = rest.iter().take_while(|i| i.block() == block).count();
        offsets.extend(rest[..count].iter().map(|i| i.offset));
        cursor.pos = (start + count) as u64;
        Some(block)
    }
}
