//! # Chunks — the dead TIDs of 64 consecutive blocks, in one of three forms
//!
//! The store (`store.rs`) keeps, per chunk of 64 blocks with dead TIDs, a run of bytes in a
//! leaf's arena, and a slot that points into it. This file owns those bytes: [`Chunk::read`]
//! is the one decoder of all three forms (what `contains`, the block walk and the statistics
//! use), and [`write_container_meta`], [`write_list`] and [`write_rank`] the only encoders.
//! The containers that the first form points to are `containers.rs`'s.
//!
//! ```text
//! info, the byte at the slot: bits 6-7 = form.
//!
//! containers form (bit 6 = 0): the chunk's distinct containers, then its metadata; the slot
//! points at the metadata.
//!   ┌─────────────┬───┬──────────────┬────────────────────────────────────────────────────┐
//!   │ container 0 │ … │ container d-1│ metadata                                           │
//!   └─────────────┴───┴──────────────┴────────────────────────────────────────────────────┘
//!   metadata: 0      1     2         10                  10 + d·w
//!            ┌──────┬─────┬─────────┬──────────────────┬────────────────────────────────┐
//!            │ info │  d  │ present │ table: d × w B   │ refs: p × r bits, packed       │
//!            │  u8  │ u8  │   u64   │ distance back    │ i-th present block → distinct  │
//!            │      │     │ bit i = │ from metadata to │ container index (r ∈ 0,1,2,4,8:│
//!            │      │     │ block i │ container k      │ 0 bits when d = 1)             │
//!            └──────┴─────┴─────────┴──────────────────┴────────────────────────────────┘
//!   info: bit 7 = wide (w = 4, else w = 2), bits 0-2 = r's code
//!   (p = popcount(present); the i-th present block is found by popcount below its bit)
//!
//! rank form (bits 6-7 = 11): every present block has 1 to 4 offsets, all below 512.
//!            0      1         9                     9 + 2q
//!            ┌──────┬─────────┬──────────┬──────────┬───────────────────────────────────┐
//!            │ info │ present │ lo: q B  │ hi: q B  │ n offsets × 9 bits, in block order│
//!            │  u8  │   u64   │ (only if bit 0 of info)│ then offset order, packed      │
//!            └──────┴─────────┴──────────┴──────────┴───────────────────────────────────┘
//!   info bit 0: the count planes are there (q = ⌈p / 8⌉ bytes each; without them every
//!   present block has one offset). Bit i of lo and hi, for the i-th present block: its
//!   count - 1 = lo + 2·hi. Its first offset is number i + Σ(count - 1) below i, that is
//!   i + popcount(lo below i) + 2·popcount(hi below i): O(1).
//!   size: 9 + 2q (with planes) + ⌈9n / 8⌉ bytes
//!
//! list form (bits 6-7 = 01): at most 4 TIDs.
//!            0      1
//!            ┌──────┬─────────────────────────────────────────────────┐
//!            │ info │ n keys × 15 bits, packed                        │
//!            └──────┴─────────────────────────────────────────────────┘
//!   info bits 0-1 = n - 1; key = block's bit in the chunk (6 bits) << 9 | offset (9 bits),
//!   strictly increasing. size: 1 + ⌈15n / 8⌉ bytes (at most 9)
//! ```
//!
//! All integers are little-endian; packed fields fill each byte from its low bit.
//!
//! The containers form is O(1) to the block (a popcount) and then one container probe, and
//! shares identical containers: it is the form for dense and repetitive chunks. The two
//! others are for chunks with few dead tuples per block, as OLTP updates leave them, where
//! the containers form pays 10 bytes of metadata, a table entry and a reference per block,
//! and 4 bytes per one-offset container (about 7 bytes per TID). The rank form is O(1) too
//! (popcounts, then at most 4 offsets compared) and costs 9 bits per TID plus 9 bytes per
//! chunk; the list costs 15 bits per TID and 1 byte per chunk, for chunks of so few TIDs that
//! the presence word does not pay, and is probed by comparing its at most 4 keys. The store
//! writes the smallest form after every block added (on a tie containers, then rank), except
//! that it takes a list only when that is at most half the size of the other forms: where
//! lists and rank chunks mix, the branch on the form is mispredicted. (With lists whenever
//! smaller, a quarter of the chunks of one dead tuple on one page in ten were lists, and
//! lookups there took about 1.5 times as long, for a saving of 0.15 bytes per TID.)
//!
//! ## Rules
//!
//! - The readers never panic and never read outside the slice, whatever its bytes are: a read
//!   past the end gives zero, and a position that does not fit gives an empty chunk. On the
//!   store's own arena this never happens (its invariants); on arbitrary bytes the answers
//!   are meaningless but bounded (a decoded block has at most 65,536 offsets).
//! - They never allocate, except that `decode` grows the caller's buffer.
//! - The writers append; the caller reserves room first (the store grows its arena by an
//!   eighth, not by doubling).

use super::containers::{
    container_contains, container_kind_and_size, decode_container, read_u16, read_u32,
    read_u64, KIND_BITMAP, KIND_RUNS,
};
use crate::page::OffsetNumber;

/// Metadata field positions of the containers form, from the slot's byte position.
const META_INFO: usize = 0;
const META_DISTINCT: usize = 1;
const META_PRESENT: usize = 2;
const META_TABLE: usize = 10;
/// `info` bits 6-7: the form.
const FORM_MASK: u8 = 0xc0;
const FORM_LIST: u8 = 0x40;
const FORM_RANK: u8 = 0xc0;
/// `info` bit 7 (containers form): table entries are u32 rather than u16.
const INFO_WIDE: u8 = 0x80;
/// `info` bit 0 (rank form): the count planes are there.
const INFO_PLANES: u8 = 0x01;
/// `info` bits 0-1 (list form): the number of keys, minus one.
const LIST_COUNT_MASK: u8 = 0x03;
/// `info` bits 0-2 (containers form): the reference width code, an index into this table.
const REF_BITS: [u32; 5] = [0, 1, 2, 4, 8];

/// The most keys a list may hold: its count is 2 bits, and 4 keys of 15 bits fill one u64.
pub(super) const LIST_MAX_KEYS: usize = 4;
/// The most offsets a block of a rank-form chunk may have: its count is 2 bits.
pub(super) const RANK_MAX_PER_BLOCK: usize = 4;
/// Offsets the rank and list forms can hold are below this: 9 bits each.
pub(super) const COMPACT_OFFSET_LIMIT: OffsetNumber = 1 << OFFSET_BITS;
const OFFSET_BITS: u32 = 9;
const OFFSET_MASK: u32 = (1 << OFFSET_BITS) - 1;
const KEY_BITS: usize = 15;
const KEY_MASK: u64 = (1 << KEY_BITS) - 1;
/// Rank form: info and present, then the planes.
const RANK_PLANES: usize = 9;

/// The number of bits of `word` below bit `bit` (< 64). A full word is answered without a
/// popcount: the default x86-64 target has no POPCNT instruction, so `count_ones` is a dozen
/// dependent instructions, and full words (a group of chunks, or a chunk of blocks, all with
/// dead TIDs) are the common case of the scattered distributions.
#[inline]
pub(super) fn rank_below(word: u64, bit: u32) -> u32 {
    debug_assert!(bit < 64);
    if word == u64::MAX {
        bit
    } else {
        (word & ((1u64 << bit) - 1)).count_ones()
    }
}

/// A list key: the block's bit in its chunk, and the offset.
#[inline]
pub(super) fn list_key(bit: u32, offset: OffsetNumber) -> u16 {
    debug_assert!(bit < 64 && offset < COMPACT_OFFSET_LIMIT);
    ((bit << OFFSET_BITS) | u32::from(offset)) as u16
}

/// The size in bytes of a list of `keys` keys.
#[inline]
pub(super) fn list_size(keys: usize) -> usize {
    1 + (keys * KEY_BITS).div_ceil(8)
}

/// The size in bytes of a rank-form chunk of `blocks` present blocks and `offsets` offsets.
#[inline]
pub(super) fn rank_size(blocks: usize, offsets: usize) -> usize {
    let planes = if offsets > blocks {
        2 * blocks.div_ceil(8)
    } else {
        0
    };
    RANK_PLANES + planes + (offsets * OFFSET_BITS as usize).div_ceil(8)
}

/// The reference width code for `distinct` containers, and the width in bits.
fn ref_code(distinct: usize) -> (u8, usize) {
    let code: u8 = match distinct {
        0 | 1 => 0,
        2 => 1,
        3..=4 => 2,
        5..=16 => 3,
        _ => 4,
    };
    (code, REF_BITS[usize::from(code)] as usize)
}

/// The size in bytes of a containers-form metadata for `distinct` containers and `blocks`
/// present blocks, with `wide` table entries.
pub(super) fn container_meta_size(distinct: usize, blocks: usize, wide: bool) -> usize {
    let width = if wide { 4 } else { 2 };
    META_TABLE + distinct * width + (blocks * ref_code(distinct).1).div_ceil(8)
}

/// Up to 8 bytes from `at` as a little-endian u64, zero past `len` bytes or the slice's end.
#[inline]
fn read_partial_u64(bytes: &[u8], at: usize, len: usize) -> u64 {
    if let Some(word) = crate::bytes::u64_at(bytes, at) {
        if len >= 8 {
            return word;
        }
        return word & ((1u64 << (8 * len)) - 1);
    }
    let mut word = 0;
    for i in 0..len.min(8) {
        word |= u64::from(bytes.get(at + i).copied().unwrap_or(0)) << (8 * i);
    }
    word
}

/// Appends a little-endian packing of `values` of `bits` bits each (at most 16) to `out`.
fn pack(out: &mut Vec<u8>, bits: usize, values: impl Iterator<Item = u16>) {
    let mut acc: u32 = 0;
    let mut acc_bits = 0;
    for v in values {
        acc |= (u32::from(v) & ((1 << bits) - 1)) << acc_bits;
        acc_bits += bits;
        while acc_bits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            acc_bits -= 8;
        }
    }
    if acc_bits > 0 {
        out.push(acc as u8);
    }
}

/// Appends a containers-form metadata at the end of `arena`, which is where it starts: the
/// chunk's distinct containers start at `starts` (arena positions, all before the end);
/// `refs[i]` is the container of the i-th present block of `present`.
pub(super) fn write_container_meta(
    arena: &mut Vec<u8>,
    present: u64,
    starts: &[u32],
    refs: &[u8],
) {
    let meta_at = arena.len();
    let distinct = starts.len();
    assert!(
        (1..=64).contains(&distinct) && refs.len() == present.count_ones() as usize,
        "a chunk has 1 to 64 distinct containers and a reference per present block"
    );
    let chunk_start = starts.iter().copied().min().unwrap_or(0) as usize;
    let wide = meta_at - chunk_start > usize::from(u16::MAX);
    let (code, ref_bits) = ref_code(distinct);
    let size = container_meta_size(distinct, refs.len(), wide);
    arena.push(code | if wide { INFO_WIDE } else { 0 });
    arena.push(distinct as u8);
    arena.extend_from_slice(&present.to_le_bytes());
    for &start in starts {
        let distance = meta_at - start as usize;
        if wide {
            arena.extend_from_slice(&(distance as u32).to_le_bytes());
        } else {
            arena.extend_from_slice(&(distance as u16).to_le_bytes());
        }
    }
    let refs_at = arena.len();
    arena.resize(meta_at + size, 0);
    if ref_bits > 0 {
        for (i, &r) in refs.iter().enumerate() {
            let pos = i * ref_bits;
            arena[refs_at + pos / 8] |= r << (pos % 8);
        }
    }
    debug_assert!(matches!(
        Chunk::read(arena, meta_at),
        Chunk::Containers(m) if m.present == present && m.distinct == distinct
    ));
}

/// Appends a list-form chunk of `keys` (strictly increasing, 1 to 4 of them) to `arena`.
pub(super) fn write_list(arena: &mut Vec<u8>, keys: &[u16]) {
    assert!(
        (1..=LIST_MAX_KEYS).contains(&keys.len()),
        "a list holds 1 to 4 keys"
    );
    debug_assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys strictly increase");
    let at = arena.len();
    arena.push(FORM_LIST | (keys.len() - 1) as u8);
    pack(arena, KEY_BITS, keys.iter().copied());
    debug_assert_eq!(arena.len() - at, list_size(keys.len()));
}

/// Appends a rank-form chunk of `keys` (list keys, strictly increasing; at most 4 per block,
/// every offset below 512) to `arena`.
pub(super) fn write_rank(arena: &mut Vec<u8>, keys: &[u16]) {
    assert!(!keys.is_empty(), "a chunk has dead TIDs");
    debug_assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys strictly increase");
    let at = arena.len();
    let bit_of = |key: u16| u32::from(key) >> OFFSET_BITS;
    // Each present block's count - 1, in the two planes.
    let (mut present, mut lo, mut hi, mut blocks) = (0u64, 0u64, 0u64, 0usize);
    let mut i = 0;
    while i < keys.len() {
        let bit = bit_of(keys[i]);
        let count = keys[i..].iter().take_while(|&&k| bit_of(k) == bit).count();
        assert!(
            count <= RANK_MAX_PER_BLOCK,
            "a rank-form block has 1 to 4 offsets"
        );
        present |= 1 << bit;
        lo |= ((count as u64 - 1) & 1) << blocks;
        hi |= ((count as u64 - 1) >> 1) << blocks;
        blocks += 1;
        i += count;
    }
    let planes = keys.len() > blocks;
    arena.push(FORM_RANK | if planes { INFO_PLANES } else { 0 });
    arena.extend_from_slice(&present.to_le_bytes());
    if planes {
        let q = blocks.div_ceil(8);
        arena.extend_from_slice(&lo.to_le_bytes()[..q]);
        arena.extend_from_slice(&hi.to_le_bytes()[..q]);
    }
    pack(
        arena,
        OFFSET_BITS as usize,
        keys.iter().map(|&k| k & OFFSET_MASK as u16),
    );
    debug_assert_eq!(arena.len() - at, rank_size(blocks, keys.len()));
}

/// One chunk as read from an arena: the one decoder of the three forms.
#[derive(Clone, Copy, Debug)]
pub(super) enum Chunk<'a> {
    Containers(ContainerMeta<'a>),
    Rank(Rank<'a>),
    List(List),
}

/// A containers-form chunk: its metadata, read at the slot's position.
#[derive(Clone, Copy, Debug)]
pub(super) struct ContainerMeta<'a> {
    arena: &'a [u8],
    at: usize,
    pub(super) present: u64,
    info: u8,
    pub(super) distinct: usize,
}

/// A rank-form chunk. The planes are read only for a present block (locating them takes a
/// popcount, which most lookups, for absent blocks, need not pay).
#[derive(Clone, Copy, Debug)]
pub(super) struct Rank<'a> {
    present: u64,
    planes: bool,
    /// The planes, if any, then the packed offsets (and whatever follows in the arena).
    rest: &'a [u8],
}

/// A list-form chunk: its keys, unpacked into one word (key i at bit 15i).
#[derive(Clone, Copy, Debug)]
pub(super) struct List {
    keys: u64,
    count: usize,
}

impl<'a> Chunk<'a> {
    /// The chunk whose slot is `at`.
    #[inline]
    pub(super) fn read(arena: &'a [u8], at: usize) -> Self {
        let info = arena.get(at + META_INFO).copied().unwrap_or(0);
        match info & FORM_MASK {
            FORM_LIST => {
                let count = usize::from(info & LIST_COUNT_MASK) + 1;
                Chunk::List(List {
                    keys: read_partial_u64(arena, at + 1, list_size(count) - 1),
                    count,
                })
            }
            FORM_RANK => Chunk::Rank(Rank {
                present: read_u64(arena, at + 1),
                planes: info & INFO_PLANES != 0,
                rest: arena.get(at + RANK_PLANES..).unwrap_or(&[]),
            }),
            _ => Chunk::Containers(ContainerMeta {
                arena,
                at,
                present: read_u64(arena, at + META_PRESENT),
                info,
                distinct: usize::from(arena.get(at + META_DISTINCT).copied().unwrap_or(0)),
            }),
        }
    }

    /// Bit i set when block i of the chunk has dead TIDs.
    pub(super) fn present(&self) -> u64 {
        match self {
            Chunk::Containers(m) => m.present,
            Chunk::Rank(r) => r.present,
            Chunk::List(l) => (0..l.count).fold(0, |acc, i| acc | 1u64 << (l.key(i) >> 9)),
        }
    }

    /// Whether block `bit` of the chunk has `offset` dead.
    #[inline]
    pub(super) fn contains(&self, bit: u32, offset: OffsetNumber) -> bool {
        debug_assert!(bit < 64);
        match self {
            Chunk::Containers(m) => {
                m.present & (1u64 << bit) != 0 && container_contains(m.container(bit), offset)
            }
            Chunk::Rank(r) => {
                if r.present & (1u64 << bit) == 0 || offset >= COMPACT_OFFSET_LIMIT {
                    return false;
                }
                let (first, count, offsets_at) = r.block(bit);
                // At most 4 comparisons, without early exit: no branch to mispredict.
                (first..first + count)
                    .fold(false, |hit, i| hit | (r.offset(offsets_at, i) == offset))
            }
            Chunk::List(l) => offset < COMPACT_OFFSET_LIMIT && l.contains(list_key(bit, offset)),
        }
    }

    /// Appends the dead offsets of block `bit` of the chunk to `out` (nothing if it has none).
    pub(super) fn decode(&self, bit: u32, out: &mut Vec<OffsetNumber>) {
        debug_assert!(bit < 64);
        match self {
            Chunk::Containers(m) => {
                if m.present & (1u64 << bit) != 0 {
                    decode_container(m.container(bit), out);
                }
            }
            Chunk::Rank(r) => {
                if r.present & (1u64 << bit) != 0 {
                    let (first, count, offsets_at) = r.block(bit);
                    out.extend((first..first + count).map(|i| r.offset(offsets_at, i)));
                }
            }
            Chunk::List(l) => out.extend(
                (0..l.count)
                    .map(|i| l.key(i))
                    .filter(|&key| u32::from(key) >> OFFSET_BITS == bit)
                    .map(|key| key & OFFSET_MASK as u16),
            ),
        }
    }

    /// Adds the chunk's shape to `s` (containers by kind, bytes of containers and metadata,
    /// or of the compact form).
    pub(super) fn add_stats(&self, s: &mut super::TidStoreStats) {
        match self {
            Chunk::Containers(m) => {
                s.metadata_bytes +=
                    container_meta_size(m.distinct, m.present.count_ones() as usize, m.wide())
                        as u64;
                for k in 0..m.distinct {
                    let (kind, size) = container_kind_and_size(m.container_k(k));
                    s.container_bytes += size as u64;
                    match kind {
                        KIND_BITMAP => s.bitmap_containers += 1,
                        KIND_RUNS => s.run_containers += 1,
                        _ => s.array_containers += 1,
                    }
                }
            }
            Chunk::Rank(r) => {
                let blocks = r.present.count_ones() as usize;
                let (lo, hi, _) = r.planes();
                let offsets = blocks + lo.count_ones() as usize + 2 * hi.count_ones() as usize;
                s.rank_chunks += 1;
                s.compact_bytes += rank_size(blocks, offsets) as u64;
            }
            Chunk::List(l) => {
                s.list_chunks += 1;
                s.compact_bytes += list_size(l.count) as u64;
            }
        }
    }
}

impl<'a> ContainerMeta<'a> {
    fn wide(&self) -> bool {
        self.info & INFO_WIDE != 0
    }

    /// The bytes from container `k` of the chunk on (empty if the table is inconsistent).
    #[inline]
    fn container_k(&self, k: usize) -> &'a [u8] {
        let table_at = self.at + META_TABLE;
        let distance = if self.wide() {
            read_u32(self.arena, table_at + 4 * k) as usize
        } else {
            usize::from(read_u16(self.arena, table_at + 2 * k))
        };
        self.at
            .checked_sub(distance)
            .and_then(|start| self.arena.get(start..))
            .unwrap_or(&[])
    }

    /// The bytes from the container of the chunk's block `bit` (which is present) on.
    #[inline]
    fn container(&self, bit: u32) -> &'a [u8] {
        let ref_bits = REF_BITS.get(usize::from(self.info & 7)).copied().unwrap_or(0);
        let k = if ref_bits == 0 {
            0
        } else {
            let pos = rank_below(self.present, bit) * ref_bits;
            let width = if self.wide() { 4 } else { 2 };
            let refs_at = self.at + META_TABLE + self.distinct * width;
            let byte = self
                .arena
                .get(refs_at + (pos / 8) as usize)
                .copied()
                .unwrap_or(0);
            usize::from((byte >> (pos % 8)) & ((1u16 << ref_bits) - 1) as u8)
        };
        self.container_k(k)
    }
}

impl Rank<'_> {
    /// The planes (zero without them), and where the offsets start in `rest`.
    #[inline]
    fn planes(&self) -> (u64, u64, usize) {
        if !self.planes {
            return (0, 0, 0);
        }
        let q = (self.present.count_ones() as usize).div_ceil(8);
        (
            read_partial_u64(self.rest, 0, q),
            read_partial_u64(self.rest, q, q),
            2 * q,
        )
    }

    /// The index of the first offset of present block `bit`, how many it has, and where the
    /// offsets start in `rest`.
    #[inline]
    fn block(&self, bit: u32) -> (usize, usize, usize) {
        let i = rank_below(self.present, bit);
        if !self.planes {
            // One offset per block.
            return (i as usize, 1, 0);
        }
        let (lo, hi, offsets_at) = self.planes();
        let below = (1u64 << i) - 1;
        let extra = (lo & below).count_ones() + 2 * (hi & below).count_ones();
        let count = 1 + (lo >> i & 1) + 2 * (hi >> i & 1);
        ((i + extra) as usize, count as usize, offsets_at)
    }

    /// Offset `i` of the packed offsets starting at `rest[offsets_at]` (zero past the end).
    #[inline]
    fn offset(&self, offsets_at: usize, i: usize) -> OffsetNumber {
        let bit = offsets_at * 8 + i * OFFSET_BITS as usize;
        // A 9-bit field spans at most two bytes; the second may be past the end of the slice
        // when the field ends on a byte boundary.
        let get = |j: usize| u32::from(self.rest.get(bit / 8 + j).copied().unwrap_or(0));
        let raw = get(0) | get(1) << 8;
        ((raw >> (bit % 8)) & OFFSET_MASK) as OffsetNumber
    }
}

impl List {
    /// Key `i`.
    #[inline]
    fn key(&self, i: usize) -> u16 {
        ((self.keys >> (KEY_BITS * i)) & KEY_MASK) as u16
    }

    /// Whether `key` is one of the keys: all of them compared, no branch to mispredict.
    #[inline]
    fn contains(&self, key: u16) -> bool {
        (0..LIST_MAX_KEYS).fold(false, |hit, i| hit | ((i < self.count) & (self.key(i) == key)))
    }
}
