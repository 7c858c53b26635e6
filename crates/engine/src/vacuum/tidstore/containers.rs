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
//! - A container is read at the position the store recorded for it. The readers never panic
//!   and never read outside the slice, whatever its bytes are: a field past the end reads as
//!   zero, and [`decode_container`] stops where the offsets stop increasing, so that
//!   arbitrary bytes give at most 65,536 offsets. On the store's own arena neither happens.

use crate::page::OffsetNumber;

/// Container kinds (top two bits of the container header) and the count mask.
const KIND_ARRAY: u16 = 0;
pub(super) const KIND_RUNS: u16 = 1;
pub(super) const KIND_BITMAP: u16 = 2;
const COUNT_MASK: u16 = 0x3fff;
/// Enough halvings for any container: at most 8192 entries.
const SEARCH_TURNS: usize = 15;

// Little-endian readers of a leaf's arena: for containers here, and chunks in `chunk.rs`.
// On the store's own arena every field read lies inside it; a field past the end (only in
// arbitrary bytes) reads as zero, so that no reader can panic.

#[inline]
pub(super) fn read_u16(bytes: &[u8], at: usize) -> u16 {
    crate::bytes::u16_at(bytes, at).unwrap_or(0)
}

#[inline]
pub(super) fn read_u32(bytes: &[u8], at: usize) -> u32 {
    crate::bytes::u32_at(bytes, at).unwrap_or(0)
}

#[inline]
pub(super) fn read_u64(bytes: &[u8], at: usize) -> u64 {
    crate::bytes::u64_at(bytes, at).unwrap_or(0)
}

/// Encodes sorted, strictly increasing, non-empty `offsets` as the smallest container.
pub(super) fn encode_container(offsets: &[OffsetNumber], out: &mut Vec<u8>) {
    out.clear();
    append_container(offsets, out);
}

/// [`encode_container`], appending to `out` rather than replacing it.
pub(super) fn append_container(offsets: &[OffsetNumber], out: &mut Vec<u8>) {
    let at = out.len();
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
        out.resize(at + bitmap_size, 0);
        for &o in offsets {
            out[at + 4 + usize::from((o >> 3) - first_byte)] |= 1 << (o & 7);
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
            byte >= first
                && byte - first < count
                && c.get(4 + byte - first).copied().unwrap_or(0) & (1 << (offset & 7)) != 0
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

/// Appends the offsets of the container starting at `c[0]` to `out`. The checks that keep
/// arbitrary bytes from panicking or flooding `out` (offsets must increase, and fit a u16)
/// never fail on the store's own containers.
pub(super) fn decode_container(c: &[u8], out: &mut Vec<OffsetNumber>) {
    let header = read_u16(c, 0);
    let count = usize::from(header & COUNT_MASK);
    match header >> 14 {
        KIND_BITMAP => {
            let first = u32::from(read_u16(c, 2));
            for (i, &byte) in c.iter().skip(4).take(count).enumerate() {
                for bit in 0..8u32 {
                    if byte & (1 << bit) != 0 {
                        let Ok(offset) = OffsetNumber::try_from((first + i as u32) * 8 + bit)
                        else {
                            return;
                        };
                        out.push(offset);
                    }
                }
            }
        }
        KIND_RUNS => {
            let mut next = 0u32;
            for i in 0..count {
                let (first, last) = (read_u16(c, 2 + 4 * i), read_u16(c, 4 + 4 * i));
                if u32::from(first) < next || first > last {
                    return;
                }
                out.extend(first..=last);
                next = u32::from(last) + 1;
            }
        }
        _ => {
            let mut next = 0u32;
            for i in 0..count {
                let offset = read_u16(c, 2 + 2 * i);
                if u32::from(offset) < next {
                    return;
                }
                out.push(offset);
                next = u32::from(offset) + 1;
            }
        }
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
