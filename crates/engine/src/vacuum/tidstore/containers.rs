//! # Containers — one block's dead offsets, in the smallest of three encodings
//!
//! A container holds the sorted dead offsets of one heap block. [`encode_container`] writes
//! it, [`container_contains`] probes it, [`decode_container`] reads it back, and
//! [`container_kind_and_size`] measures it; nothing else interprets its bytes. The store
//! (`store.rs`) keeps containers in a leaf's arena, shared by the blocks of a chunk with the
//! same offsets.
//!
//! ```text
//! container: u16 header = kind << 14 | count, then
//!   kind 0 array:  count × u16 offsets, sorted                      (2 + 2n bytes)
//!   kind 1 runs:   count × (first u16, last u16), sorted, disjoint  (2 + 4r bytes)
//!   kind 2 bitmap: u16 first byte b, then count bytes; bit j of byte i is offset 8(b+i)+j
//!                                                                   (4 + bytes)
//! ```
//!
//! All integers are little-endian. Each block gets the smallest of the three encodings (ties
//! go to the bitmap, then runs, whose probes are cheaper).
//!
//! ## Rules
//!
//! - The offsets given to [`encode_container`] follow the input rules of the module header
//!   (non-empty, sorted, strictly increasing): `DeadTids::try_add_block` checks them first.
//! - A container is read at the position the store recorded for it; the readers trust the
//!   header found there (the store's own invariant) and only bounds-check the slice.

use crate::page::OffsetNumber;

/// Container kinds (top two bits of the container header) and the count mask.
const KIND_ARRAY: u16 = 0;
pub(super) const KIND_RUNS: u16 = 1;
pub(super) const KIND_BITMAP: u16 = 2;
const COUNT_MASK: u16 = 0x3fff;
/// Enough halvings for any container: at most 8192 entries.
const SEARCH_TURNS: usize = 15;

// Little-endian readers of a leaf's arena: for containers here, and chunk metadata in the
// store.

// The store's own arena, written by this module: every field read lies inside it.
#[inline]
pub(super) fn read_u16(bytes: &[u8], at: usize) -> u16 {
    crate::bytes::u16_at(bytes, at).expect("a field inside the arena")
}

#[inline]
pub(super) fn read_u32(bytes: &[u8], at: usize) -> u32 {
    crate::bytes::u32_at(bytes, at).expect("a field inside the arena")
}

#[inline]
pub(super) fn read_u64(bytes: &[u8], at: usize) -> u64 {
    crate::bytes::u64_at(bytes, at).expect("a field inside the arena")
}

/// Encodes sorted, strictly increasing, non-empty `offsets` as the smallest container.
pub(super) fn encode_container(offsets: &[OffsetNumber], out: &mut Vec<u8>) {
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
#[inline]
pub(super) fn container_contains(c: &[u8], offset: OffsetNumber) -> bool {
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
pub(super) fn decode_container(c: &[u8], out: &mut Vec<OffsetNumber>) {
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
pub(super) fn container_kind_and_size(c: &[u8]) -> (u16, usize) {
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
