//! # The store — quire's dead-TID structure (`dead_tids = store`, the default)
//!
//! Per-block containers (`containers.rs`) chosen by size, deduplicated and packed per chunk of
//! 64 blocks, under a two-level directory over block numbers. It keeps the rules of the module
//! header (`mod.rs`); this file adds how the bytes are laid out.
//!
//! ## Layout
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
//! ```
//!
//! The containers' own format is drawn in `containers.rs`. All integers are little-endian.
//! Identical containers within a chunk are stored once: pages emptied by a bulk delete, or
//! every page of a table with the same dead pattern, cost a few bits each. A chunk's metadata
//! comes *after* its containers so that adding a block to the open chunk only appends a
//! container and rewrites the metadata (at most ~200 bytes); the structure is complete after
//! every `add_block`. A leaf's arena is shrunk to its length when the fill moves on to the
//! next leaf, so only the last leaf carries growth slack (at most an eighth of its size).
//!
//! Bytes per TID therefore depend on the pattern: a dense run of dead offsets costs 6 bytes per
//! distinct pattern plus 18 per chunk (under 0.3 bytes per block when a chunk's 64 pages share
//! one pattern); scattered offsets cost about 2 bytes each (array) or one bit per offset in
//! the span (bitmap), plus a byte of table and up to a byte of reference per block.

use std::fmt;
use std::mem::size_of;

use super::containers::{
    container_contains, container_kind_and_size, decode_container, encode_container, read_u16,
    read_u32, read_u64, KIND_BITMAP, KIND_RUNS,
};
use super::{check_input, BlockCursor, DeadTids, TidStoreError};
use crate::page::{OffsetNumber, Tid};
use crate::types::BlockNumber;

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
pub(super) struct Leaf {
    /// `block >> 16` of every block in the leaf.
    key: u32,
    slots: Box<[u32; CHUNKS_PER_LEAF]>,
    pub(super) arena: Vec<u8>,
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

/// quire's dead-TID store (`dead_tids = store`): see the file's header for the layout.
/// (`top`, `leaves`, `scratch` and a leaf's `arena` are `pub(super)` for the tests only: they
/// recount its allocations to check `memory_bytes`.)
pub struct TidStore {
    budget_bytes: u64,
    /// Indexed by `block >> 16`: 1 + the leaf's index in `leaves`, or 0.
    pub(super) top: Vec<u32>,
    /// In block order.
    pub(super) leaves: Vec<Leaf>,
    /// `memory_bytes` of every leaf but the last (which alone still changes), so that
    /// `memory_bytes` and `is_full`, called after every block, cost O(1).
    sealed_leaves_bytes: usize,
    open: Option<OpenChunk>,
    last_block: Option<BlockNumber>,
    num_tids: u64,
    num_blocks: u64,
    /// The container being encoded (reused so that adding allocates nothing in steady state).
    pub(super) scratch: Vec<u8>,
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
