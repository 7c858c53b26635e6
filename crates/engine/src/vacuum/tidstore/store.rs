//! # The store — quire's dead-TID structure (`dead_tids = store`, the default)
//!
//! Chunks of 64 blocks (`chunk.rs`), each in the smallest of three forms: per-block
//! containers (`containers.rs`) chosen by size and deduplicated; or, for chunks with at most
//! 4 dead tuples per block, a presence word and packed 9-bit offsets ("rank"), or a list of at
//! most 4 packed (block, offset) keys; under a directory over block numbers that costs about
//! 2 bytes per chunk with dead TIDs and nothing for empty ranges. It keeps the rules of the
//! module header (`mod.rs`); this file adds how the bytes are laid out.
//!
//! ## Layout
//!
//! ```text
//! top: Vec<u32>, indexed by block >> 16: 1 + index into `leaves`, 0 = no dead TIDs there
//!   │               (4 bytes per 65,536 blocks = per 512 MiB of heap, up to the last block)
//!   ▼
//! Leaf (65,536 blocks): key (block >> 16), and a body, either
//!   Tids: Box<[u32]>, sorted (block & 0xffff) << 16 | offset: a sealed leaf whose chunks
//!         cost more than 6 bytes per TID (PostgreSQL's array), bisected on lookup; or
//!   Chunks: Box<ChunkedLeaf> (16 groups of 64 chunks of 64 blocks):
//!   groups: [Group; 16], indexed by (block >> 12) & 15, 16 bytes each
//!     ┌─────────────────────────┬───────────────────────────┬──────────────────────────────┐
//!     │ present: u64            │ base: u32                 │ slots_at: u32                │
//!     │ bit c = chunk c of the  │ arena position where the  │ bit 31: wide; bits 0-30: the │
//!     │ group has dead TIDs     │ group's first chunk starts│ group's first slot in `slots`│
//!     └─────────────────────────┴───────────────────────────┴──────────────────────────────┘
//!   │ rank = popcount(present below c)
//!   ▼
//!   slots: Vec<u8>, the groups' slots in block order, one per chunk with dead TIDs:
//!     u16 (u32 in a wide group) at slots_at + rank × width = chunk's slot − base
//!   │
//!   ▼
//!   arena: Vec<u8>, the chunks in block order, each in one of the three forms drawn in
//!     `chunk.rs` (containers then metadata, the slot pointing at the metadata; rank; list)
//! ```
//!
//! All integers are little-endian. A group is wide when its chunks span more than 64 KiB of
//! arena (dense chunks with many distinct containers); every other chunk costs 2 bytes of
//! slot, and a leaf 256 bytes of groups, so that a leaf holding a few hundred TIDs is not
//! dominated by its directory (a slot array of 1,024 × 4 bytes before issue 14). A leaf with
//! fewer still (one dead tuple on one page in 200 or fewer) would cost more than the array's
//! 6 bytes per TID in chunks: when the fill moves on to the next leaf, such a leaf becomes a
//! sorted list of its TIDs, 4 bytes each. Its lookups are a bisection (a few more
//! nanoseconds; the array's is one over every TID), and only the sparsest leaves pay it.
//!
//! ## Filling
//!
//! Blocks arrive in order, so only the last chunk ("open") changes, and it is always the
//! last thing in the last leaf's arena, its slot the last of `slots`: the structure is
//! complete after every `add_block`. While the open chunk could still take a compact form (at
//! most 4 offsets per block, all below 512) it is kept as its keys on the side and rewritten
//! whole after each block, in whichever form is smallest (at most a few hundred bytes). Past
//! that it stays in containers form, and a block only appends its container (unless an
//! identical one is there already) and rewrites the metadata (at most ~200 bytes). A leaf's
//! arena and slots are shrunk to their length when the fill moves on to the next leaf, so
//! only the last leaf carries growth slack (at most an eighth of its size).
//!
//! ## Cost
//!
//! Bytes per TID depend on the pattern: a dense run of dead offsets costs 6 bytes per
//! distinct pattern plus 14 per chunk (metadata and slot: 0.3 bytes per block when a chunk's
//! 64 pages share one pattern); scattered offsets cost about 2 bytes each (array container)
//! or one bit per offset in the span (bitmap), plus a few bytes of table and reference per
//! block; one to four dead tuples per block cost 9 bits each plus 11 bytes per chunk (rank),
//! and chunks of very few TIDs 15 bits each plus 3 bytes (list). `quire-bench tidstore`
//! measured, at 1,000,000 blocks of 100 tuples: one dead tuple on one page in ten 2.9 bytes
//! per TID, one on every page 1.3, two or three on one page in ten 2.0, one on one page in a
//! hundred 5.0, in a thousand 5.1, its leaves lists (PostgreSQL's array: 6; this store before
//! issue 14: 8.6, 5.7, 4.7, 20 and 79).
//! Lookup is O(1) to the chunk, then popcounts and one container probe or at most 4
//! comparisons.

use std::fmt;
use std::mem::size_of;

use super::chunk::{
    container_meta_size, list_key, list_size, rank_size, write_container_meta, write_list,
    rank_below, write_rank, Chunk, COMPACT_OFFSET_LIMIT, LIST_MAX_KEYS, RANK_MAX_PER_BLOCK,
};
use super::containers::{append_container, encode_container, read_u16, read_u32};
use super::{check_input, BlockCursor, DeadTids, TidStoreError};
use crate::page::{OffsetNumber, Tid};
use crate::types::BlockNumber;

/// Blocks per leaf: 2^16 (512 MiB of heap).
const LEAF_SHIFT: u32 = 16;
/// Blocks per chunk: 64, one bit each in a chunk's presence word.
const CHUNK_SHIFT: u32 = 6;
const BLOCKS_PER_CHUNK: usize = 1 << CHUNK_SHIFT;
/// Blocks per group: 64 chunks, one bit each in the group's presence word.
const GROUP_SHIFT: u32 = 12;
const GROUPS_PER_LEAF: usize = 1 << (LEAF_SHIFT - GROUP_SHIFT);
/// Chunks per group: 64.
const GROUP_CHUNK_SHIFT: u32 = GROUP_SHIFT - CHUNK_SHIFT;
const CHUNKS_PER_GROUP: usize = 1 << GROUP_CHUNK_SHIFT;
const CHUNKS_PER_LEAF: usize = 1 << (LEAF_SHIFT - CHUNK_SHIFT);
const BLOCKS_PER_LEAF: u32 = 1 << LEAF_SHIFT;
/// The most keys a compact chunk can have: 4 per block.
const COMPACT_MAX_KEYS: usize = RANK_MAX_PER_BLOCK * BLOCKS_PER_CHUNK;
/// `slots_at` bit 31: the group's slots are u32.
const SLOTS_WIDE: u32 = 1 << 31;
/// The bytes of a leaf's group array.
const LEAF_GROUPS_BYTES: usize = size_of::<[Group; GROUPS_PER_LEAF]>();

/// 64 chunks of a leaf: which have dead TIDs, and where their slots are (layout above).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Group {
    present: u64,
    base: u32,
    slots_at: u32,
}

impl Group {
    fn wide(self) -> bool {
        self.slots_at & SLOTS_WIDE != 0
    }

    fn slots_at(self) -> usize {
        (self.slots_at & !SLOTS_WIDE) as usize
    }

    fn slot_width(self) -> usize {
        if self.wide() {
            4
        } else {
            2
        }
    }
}

/// 65,536 consecutive blocks with dead TIDs.
pub(super) struct Leaf {
    /// `block >> 16` of every block in the leaf.
    key: u32,
    pub(super) body: LeafBody,
}

/// A leaf's TIDs: chunks under their directory, or, for a sealed leaf whose chunks would
/// cost more than PostgreSQL's array for its TIDs, a sorted list of them.
pub(super) enum LeafBody {
    Chunks(Box<ChunkedLeaf>),
    /// `(block & 0xffff) << 16 | offset`, strictly increasing.
    Tids(Box<[u32]>),
}

// A leaf costs its entry in `leaves` even as a list: with 4 bytes of `top`, 36 bytes per
// 65,536 blocks, what keeps very sparse tables (a few TIDs per leaf) near 4 bytes per TID.
const _: () = assert!(size_of::<Leaf>() <= 32);

/// The bytes of a TID in [`LeafBody::Tids`].
const LISTED_TID_BYTES: usize = size_of::<u32>();
/// PostgreSQL's array pays 6 bytes per TID: a sealed leaf whose chunks cost more than that
/// becomes a list (4 bytes per TID), so that no leaf is worse than the array.
const ARRAY_TID_BYTES: usize = 6;

impl Leaf {
    fn new(key: u32) -> Self {
        Leaf {
            key,
            body: LeafBody::Chunks(Box::new(ChunkedLeaf::new())),
        }
    }

    fn memory_bytes(&self) -> usize {
        match &self.body {
            LeafBody::Chunks(c) => c.memory_bytes(),
            LeafBody::Tids(t) => t.len() * LISTED_TID_BYTES,
        }
    }

    /// Called when the fill moves on to the next leaf, with the number of TIDs this one
    /// holds: gives back the growth slack, and turns the leaf into a list of TIDs if its
    /// chunks cost more per TID than PostgreSQL's array (a few scattered TIDs in 65,536
    /// blocks: one dead tuple on one page in 200 or fewer).
    fn seal(&mut self, tids: usize) {
        let LeafBody::Chunks(c) = &mut self.body else {
            return;
        };
        c.arena.shrink_to_fit();
        c.slots.shrink_to_fit();
        if c.memory_bytes() <= ARRAY_TID_BYTES * tids {
            return;
        }
        let mut list = Vec::with_capacity(tids);
        let mut offsets = Vec::new();
        for chunk in 0..CHUNKS_PER_LEAF {
            let Some(at) = c.slot(chunk) else {
                continue;
            };
            let chunk_bytes = Chunk::read(&c.arena, at);
            let mut present = chunk_bytes.present();
            // At most 64 turns: one per present block.
            while present != 0 {
                let bit = present.trailing_zeros();
                present &= present - 1;
                offsets.clear();
                chunk_bytes.decode(bit, &mut offsets);
                let block = ((chunk as u32) << CHUNK_SHIFT) | bit;
                list.extend(offsets.iter().map(|&o| block << 16 | u32::from(o)));
            }
        }
        assert_eq!(list.len(), tids, "a sealed leaf lists every TID it holds");
        debug_assert!(list.windows(2).all(|w| w[0] < w[1]));
        self.body = LeafBody::Tids(list.into_boxed_slice());
    }
}

/// A leaf's chunks: their directory, and the arena holding them (layout above).
pub(super) struct ChunkedLeaf {
    groups: [Group; GROUPS_PER_LEAF],
    pub(super) slots: Vec<u8>,
    pub(super) arena: Vec<u8>,
}

impl ChunkedLeaf {
    fn new() -> Self {
        ChunkedLeaf {
            groups: [Group::default(); GROUPS_PER_LEAF],
            slots: Vec::new(),
            arena: Vec::new(),
        }
    }

    pub(super) fn memory_bytes(&self) -> usize {
        size_of::<Self>() + self.slots.capacity() + self.arena.capacity()
    }

    /// The slot (arena position) of chunk `chunk` of the leaf, if it has dead TIDs.
    #[inline]
    fn slot(&self, chunk: usize) -> Option<usize> {
        let group = self.groups[(chunk >> GROUP_CHUNK_SHIFT) & (GROUPS_PER_LEAF - 1)];
        let bit = chunk & (CHUNKS_PER_GROUP - 1);
        if group.present & (1u64 << bit) == 0 {
            return None;
        }
        let rank = rank_below(group.present, bit as u32) as usize;
        let at = group.slots_at() + rank * group.slot_width();
        let distance = if group.wide() {
            read_u32(&self.slots, at) as usize
        } else {
            usize::from(read_u16(&self.slots, at))
        };
        Some(group.base as usize + distance)
    }

    /// Points chunk `chunk`'s slot at `at`; the chunk starts at arena position `start`. The
    /// chunk is the leaf's last: either its slot is the last one, or it has none yet.
    fn set_slot(&mut self, chunk: usize, start: usize, at: usize) {
        let group = &mut self.groups[chunk >> GROUP_CHUNK_SHIFT];
        let bit = chunk & (CHUNKS_PER_GROUP - 1);
        assert!(
            group.present >> bit <= 1,
            "only the leaf's last chunk changes"
        );
        if group.present == 0 {
            group.base = u32::try_from(start).expect("a leaf's arena stays below 4 GiB");
            group.slots_at = u32::try_from(self.slots.len())
                .ok()
                .filter(|&n| n < SLOTS_WIDE)
                .expect("a leaf's slots stay below 2 GiB");
        }
        let distance = at - group.base as usize;
        if !group.wide() && distance > usize::from(u16::MAX) {
            // The group's chunks now span more than 64 KiB: its slots (the last ones) become
            // u32.
            let narrow: Vec<u16> = self.slots[group.slots_at()..]
                .chunks_exact(2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
                .collect();
            self.slots.truncate(group.slots_at());
            for d in narrow {
                self.slots.extend_from_slice(&u32::from(d).to_le_bytes());
            }
            group.slots_at |= SLOTS_WIDE;
        }
        let width = group.slot_width();
        if group.present & (1u64 << bit) == 0 {
            group.present |= 1u64 << bit;
            reserve_bytes(&mut self.slots, width);
            self.slots.resize(self.slots.len() + width, 0);
        }
        let last = self.slots.len() - width;
        if width == 4 {
            let d = u32::try_from(distance).expect("a leaf's arena stays below 4 GiB");
            self.slots[last..].copy_from_slice(&d.to_le_bytes());
        } else {
            self.slots[last..].copy_from_slice(&(distance as u16).to_le_bytes());
        }
        debug_assert_eq!(self.slot(chunk), Some(at));
    }

    /// The first block with dead TIDs at or after `rel` (a block number within the leaf),
    /// with its chunk's slot.
    fn next_present(&self, rel: u32) -> Option<(u32, usize)> {
        let first_chunk = (rel >> CHUNK_SHIFT) as usize;
        for chunk in first_chunk..CHUNKS_PER_LEAF {
            let Some(at) = self.slot(chunk) else {
                continue;
            };
            let mut present = Chunk::read(&self.arena, at).present();
            if chunk == first_chunk {
                present &= u64::MAX << (rel & (BLOCKS_PER_CHUNK as u32 - 1));
            }
            if present != 0 {
                let rel_block = ((chunk as u32) << CHUNK_SHIFT) | present.trailing_zeros();
                return Some((rel_block, at));
            }
        }
        None
    }
}

/// The chunk being filled (always in the last leaf, the last bytes of its arena).
struct OpenChunk {
    /// `block >> 6` of its blocks.
    chunk: u32,
    /// Where its bytes start in the arena.
    start: usize,
    /// Where its slot points: the metadata (containers form) or the list.
    at: usize,
    present: u64,
    blocks: usize,
    /// Containers form: the distinct containers' arena positions and sizes (valid while the
    /// chunk is in that form), and for each present block in order its container's index.
    distinct: usize,
    starts: [u32; BLOCKS_PER_CHUNK],
    sizes: [u32; BLOCKS_PER_CHUNK],
    refs: [u8; BLOCKS_PER_CHUNK],
    /// While the chunk can still take a compact form (rank or list: at most 4 offsets per
    /// block, all below 512): its keys (as the list form's), where each present block's keys
    /// begin, and a present block holding each distinct container (to compare new blocks
    /// with, and to encode the containers from).
    compact: bool,
    keys: [u16; COMPACT_MAX_KEYS],
    num_keys: usize,
    first_key: [u16; BLOCKS_PER_CHUNK],
    example: [u8; BLOCKS_PER_CHUNK],
}

impl OpenChunk {
    fn new(chunk: u32, start: usize) -> Self {
        OpenChunk {
            chunk,
            start,
            at: start,
            present: 0,
            blocks: 0,
            distinct: 0,
            starts: [0; BLOCKS_PER_CHUNK],
            sizes: [0; BLOCKS_PER_CHUNK],
            refs: [0; BLOCKS_PER_CHUNK],
            compact: true,
            keys: [0; COMPACT_MAX_KEYS],
            num_keys: 0,
            first_key: [0; BLOCKS_PER_CHUNK],
            example: [0; BLOCKS_PER_CHUNK],
        }
    }

    /// The keys of present block `i` (compact chunks only).
    fn block_keys(&self, i: usize) -> &[u16] {
        let from = usize::from(self.first_key[i]);
        let to = if i + 1 < self.blocks {
            usize::from(self.first_key[i + 1])
        } else {
            self.num_keys
        };
        &self.keys[from..to]
    }

    /// The size of the chunk in containers form (narrow: a compact chunk is small).
    fn containers_size(&self) -> usize {
        self.sizes[..self.distinct]
            .iter()
            .map(|&s| s as usize)
            .sum::<usize>()
            + container_meta_size(self.distinct, self.blocks, false)
    }

    /// Writes the chunk whole at the end of `arena` (which ends at `start`) from its keys, in
    /// containers form; returns the slot.
    fn write_containers_from_keys(&mut self, arena: &mut Vec<u8>) -> usize {
        debug_assert_eq!(arena.len(), self.start);
        debug_assert!(arena.capacity() - arena.len() >= self.containers_size());
        let mut offsets = [0 as OffsetNumber; RANK_MAX_PER_BLOCK];
        for k in 0..self.distinct {
            let keys = self.block_keys(usize::from(self.example[k]));
            for (o, &key) in offsets.iter_mut().zip(keys) {
                *o = key & (COMPACT_OFFSET_LIMIT - 1);
            }
            let start = arena.len();
            append_container(&offsets[..keys.len()], arena);
            self.starts[k] = u32::try_from(start).expect("a leaf's arena stays below 4 GiB");
            self.sizes[k] = (arena.len() - start) as u32;
        }
        let at = arena.len();
        write_container_meta(
            arena,
            self.present,
            &self.starts[..self.distinct],
            &self.refs[..self.blocks],
        );
        at
    }
}

/// Counts describing a [`TidStore`]'s shape (computed by a walk; for benchmarks and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TidStoreStats {
    pub leaves: u64,
    pub chunks: u64,
    pub blocks: u64,
    /// Distinct containers stored, by kind (containers-form chunks).
    pub array_containers: u64,
    pub run_containers: u64,
    pub bitmap_containers: u64,
    /// Bytes of containers, and of their chunks' metadata.
    pub container_bytes: u64,
    pub metadata_bytes: u64,
    /// Chunks in rank form and in list form, and their bytes.
    pub rank_chunks: u64,
    pub list_chunks: u64,
    pub compact_bytes: u64,
    /// Bytes of the directory: leaves' groups and slots (length, not capacity), and `top`.
    pub directory_bytes: u64,
    /// Leaves turned into lists of TIDs when sealed, and the bytes of those lists.
    pub tid_list_leaves: u64,
    pub tid_list_bytes: u64,
}

/// quire's dead-TID store (`dead_tids = store`): see the file's header for the layout.
/// (`top`, `leaves`, `scratch` and a leaf's `slots` and `arena` are `pub(super)` for the
/// tests only: they recount its allocations to check `memory_bytes`.)
pub struct TidStore {
    budget_bytes: u64,
    /// Indexed by `block >> 16`: 1 + the leaf's index in `leaves`, or 0.
    pub(super) top: Vec<u32>,
    /// In block order.
    pub(super) leaves: Vec<Leaf>,
    /// `memory_bytes` of every leaf but the last (which alone still changes), so that
    /// `memory_bytes` and `is_full`, called after every block, cost O(1).
    sealed_leaves_bytes: usize,
    /// The TIDs in the last leaf (for its `seal`).
    last_leaf_tids: usize,
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
            last_leaf_tids: 0,
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
        // The previous leaf is complete.
        if let Some(last) = self.leaves.last_mut() {
            last.seal(self.last_leaf_tids);
            self.sealed_leaves_bytes += last.memory_bytes();
        }
        self.last_leaf_tids = 0;
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
            directory_bytes: (self.top.len() * size_of::<u32>()) as u64,
            ..TidStoreStats::default()
        };
        for leaf in &self.leaves {
            let leaf = match &leaf.body {
                LeafBody::Chunks(c) => c,
                LeafBody::Tids(t) => {
                    s.tid_list_leaves += 1;
                    s.tid_list_bytes += (t.len() * LISTED_TID_BYTES) as u64;
                    continue;
                }
            };
            s.directory_bytes += (LEAF_GROUPS_BYTES + leaf.slots.len()) as u64;
            for chunk in 0..CHUNKS_PER_LEAF {
                if let Some(at) = leaf.slot(chunk) {
                    s.chunks += 1;
                    Chunk::read(&leaf.arena, at).add_stats(&mut s);
                }
            }
        }
        s
    }
}

/// Makes room for `extra` more bytes, growing by an eighth rather than doubling: the open
/// leaf's slack is memory the budget pays for. Growth stays amortised O(1) per byte, and
/// large reallocations are page remaps rather than copies on Linux.
fn reserve_bytes(bytes: &mut Vec<u8>, extra: usize) {
    if bytes.capacity() - bytes.len() < extra {
        bytes.reserve_exact(extra.max(bytes.len() / 8).max(256));
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
        let LeafBody::Chunks(leaf) = &mut self.leaves[leaf_index].body else {
            unreachable!("only a sealed leaf is a list, and the fill never goes back to one");
        };
        let open = match &mut self.open {
            Some(open) if open.chunk == chunk => open,
            _ => self.open.insert(OpenChunk::new(chunk, leaf.arena.len())),
        };
        // Everything from the chunk's start (compact) or its metadata (containers) is
        // written again below.
        debug_assert!(open.at >= open.start && open.at <= leaf.arena.len());
        let fits_compact = offsets.len() <= RANK_MAX_PER_BLOCK
            && offsets[offsets.len() - 1] < COMPACT_OFFSET_LIMIT;
        if open.compact && !fits_compact {
            // The chunk can no longer be compact: from now on it grows in containers form.
            open.compact = false;
            if open.blocks > 0 {
                leaf.arena.truncate(open.start);
                reserve_bytes(&mut leaf.arena, open.containers_size());
                open.at = open.write_containers_from_keys(&mut leaf.arena);
            }
        }
        if open.compact {
            // Find the block's container among the distinct ones by comparing offsets.
            let existing = (0..open.distinct).find(|&k| {
                let keys = open.block_keys(usize::from(open.example[k]));
                keys.len() == offsets.len()
                    && keys
                        .iter()
                        .zip(offsets)
                        .all(|(&key, &o)| key & (COMPACT_OFFSET_LIMIT - 1) == o)
            });
            let k = existing.unwrap_or_else(|| {
                let k = open.distinct;
                open.example[k] = open.blocks as u8;
                open.sizes[k] = scratch.len() as u32;
                open.distinct += 1;
                k
            });
            open.refs[open.blocks] = k as u8;
            open.first_key[open.blocks] = open.num_keys as u16;
            for &o in offsets {
                open.keys[open.num_keys] = list_key(bit, o);
                open.num_keys += 1;
            }
            open.blocks += 1;
            open.present |= 1u64 << bit;
            // Rewrite the chunk whole, in the smallest form; on a tie containers, then
            // rank; a list only when at most half the size of both others (see `chunk.rs`:
            // lists mixed with rank chunks cost a mispredicted branch per lookup). All are
            // small: at most 256 TIDs of at most 4 per block.
            let containers_size = open.containers_size();
            let rank_size = rank_size(open.blocks, open.num_keys);
            let list_size = if open.num_keys <= LIST_MAX_KEYS {
                list_size(open.num_keys)
            } else {
                usize::MAX
            };
            leaf.arena.truncate(open.start);
            reserve_bytes(&mut leaf.arena, containers_size.min(rank_size));
            let keys = &open.keys[..open.num_keys];
            if list_size.saturating_mul(2) <= containers_size.min(rank_size) {
                write_list(&mut leaf.arena, keys);
                open.at = open.start;
            } else if rank_size < containers_size {
                write_rank(&mut leaf.arena, keys);
                open.at = open.start;
            } else {
                open.at = open.write_containers_from_keys(&mut leaf.arena);
            }
        } else {
            // Containers form: drop the old metadata, append the container unless an
            // identical one is there, write the metadata again.
            leaf.arena.truncate(open.at);
            let existing = (0..open.distinct).find(|&k| {
                let start = open.starts[k] as usize;
                open.sizes[k] as usize == scratch.len()
                    && leaf.arena[start..start + scratch.len()] == scratch[..]
            });
            let k = if let Some(k) = existing {
                k
            } else {
                reserve_bytes(&mut leaf.arena, scratch.len());
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
            open.at = leaf.arena.len();
            reserve_bytes(
                &mut leaf.arena,
                container_meta_size(open.distinct, open.blocks, true),
            );
            write_container_meta(
                &mut leaf.arena,
                open.present,
                &open.starts[..open.distinct],
                &open.refs[..open.blocks],
            );
        }
        let chunk_in_leaf = (chunk as usize) & (CHUNKS_PER_LEAF - 1);
        leaf.set_slot(chunk_in_leaf, open.start, open.at);
        self.scratch = scratch;
        self.last_block = Some(block);
        self.last_leaf_tids += offsets.len();
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
        let leaf = match &self.leaves[leaf_plus_one as usize - 1].body {
            LeafBody::Chunks(c) => c,
            LeafBody::Tids(t) => {
                let key = (block & (BLOCKS_PER_LEAF - 1)) << 16 | u32::from(tid.offset);
                return t.binary_search(&key).is_ok();
            }
        };
        let Some(at) = leaf.slot(((block >> CHUNK_SHIFT) as usize) & (CHUNKS_PER_LEAF - 1))
        else {
            return false;
        };
        Chunk::read(&leaf.arena, at).contains(block & (BLOCKS_PER_CHUNK as u32 - 1), tid.offset)
    }

    fn offsets_of(&self, block: BlockNumber, out: &mut Vec<OffsetNumber>) {
        out.clear();
        let Some(&leaf_plus_one) = self.top.get((block >> LEAF_SHIFT) as usize) else {
            return;
        };
        if leaf_plus_one == 0 {
            return;
        }
        let rel_block = block & (BLOCKS_PER_LEAF - 1);
        match &self.leaves[leaf_plus_one as usize - 1].body {
            LeafBody::Chunks(c) => {
                if let Some(at) = c.slot(((block >> CHUNK_SHIFT) as usize) & (CHUNKS_PER_LEAF - 1)) {
                    Chunk::read(&c.arena, at).decode(block & (BLOCKS_PER_CHUNK as u32 - 1), out);
                }
            }
            LeafBody::Tids(t) => {
                let from = t.partition_point(|&k| k >> 16 < rel_block);
                out.extend(
                    t[from..]
                        .iter()
                        .take_while(|&&k| k >> 16 == rel_block)
                        .map(|&k| k as OffsetNumber),
                );
            }
        }
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
            let found = match &leaf.body {
                LeafBody::Chunks(c) => c.next_present(rel).map(|(rel_block, at)| {
                    let bit = rel_block & (BLOCKS_PER_CHUNK as u32 - 1);
                    Chunk::read(&c.arena, at).decode(bit, offsets);
                    rel_block
                }),
                LeafBody::Tids(t) => {
                    let from = t.partition_point(|&k| k >> 16 < rel);
                    t.get(from).map(|&first| {
                        let rel_block = first >> 16;
                        offsets.extend(
                            t[from..]
                                .iter()
                                .take_while(|&&k| k >> 16 == rel_block)
                                .map(|&k| k as OffsetNumber),
                        );
                        rel_block
                    })
                }
            };
            if let Some(rel_block) = found {
                cursor.pos = ((leaf_index as u64) << LEAF_SHIFT) + u64::from(rel_block) + 1;
                return Some((leaf.key << LEAF_SHIFT) | rel_block);
            }
            rel = 0;
        }
        cursor.pos = (self.leaves.len() as u64) << LEAF_SHIFT;
        None
    }
}
