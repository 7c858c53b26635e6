//! # page — the 8 KiB page layout
//!
//! PostgreSQL's slotted page (`bufpage.h`, `itemid.h`) with a 32-bit CRC32C checksum instead
//! of PostgreSQL's 16-bit FNV one. Every relation block, in every fork, is one such page.
//!
//! ```text
//! 0        8             12         14         16         18           20           22         24
//! +--------+-------------+----------+----------+----------+------------+------------+----------+
//! | pd_lsn | pd_checksum | pd_flags | pd_lower | pd_upper | pd_special | pd_version | reserved |
//! | u64    | u32, CRC32C | u16      | u16      | u16      | u16        | u16 = 1    | u16 = 0  |
//! +--------+-------------+----------+----------+----------+------------+------------+----------+
//! | line pointer 1 | line pointer 2 | ... | line pointer n  ->                                 |
//! | (4 bytes each, from byte 24, growing up)                                                   |
//! +---------------------------------------------------------------------------------- pd_lower +
//! |                                                                                            |
//! |                              free space [pd_lower, pd_upper)                               |
//! |                                                                                            |
//! +---------------------------------------------------------------------------------- pd_upper +
//! |                                                         <-  item n | ... | item 2 | item 1 |
//! |                                             (8-byte aligned, growing down from pd_special) |
//! +-------------------------------------------------------------------------------- pd_special +
//! |                special space [pd_special, 8192), empty if pd_special = 8192                |
//! +-------------------------------------------------------------------------------------- 8192 +
//! ```
//!
//! All header fields are little-endian:
//!
//! | byte | size | field         | meaning                                                  |
//! |------|------|---------------|----------------------------------------------------------|
//! | 0    | 8    | `pd_lsn`      | end LSN of the last WAL record that changed the page     |
//! | 8    | 4    | `pd_checksum` | CRC32C, see below                                        |
//! | 12   | 2    | `pd_flags`    | [`HAS_FREE_LINES`], [`PAGE_FULL`], [`ALL_VISIBLE`]       |
//! | 14   | 2    | `pd_lower`    | end of the line-pointer array                            |
//! | 16   | 2    | `pd_upper`    | start of item storage                                    |
//! | 18   | 2    | `pd_special`  | start of the special space (8192 if there is none)       |
//! | 20   | 2    | `pd_version`  | page layout version, [`LAYOUT_VERSION`]                  |
//! | 22   | 2    | reserved      | zero                                                     |
//!
//! A line pointer ([`ItemId`], PostgreSQL's `ItemIdData`) is one little-endian `u32`: bits 0-14
//! the item's byte offset in the page, bits 15-16 its state (0 unused, 1 normal, 2 redirect,
//! 3 dead), bits 17-31 its length in bytes. Items are numbered from 1 ([`OffsetNumber`]), and
//! an item keeps its number for life: other structures (indexes, WAL records) refer to items
//! by `(block, offset number)`, which is why [`PageMut::repair_fragmentation`] moves item bytes
//! but never renumbers line pointers.
//!
//! ## Checksum
//!
//! `pd_checksum` is CRC32C over the block number (4 bytes, little-endian) followed by the
//! whole page with the checksum field read as zero. Mixing in the block number catches a page
//! written to the wrong place, which a checksum over the page alone would accept.
//!
//! ## Rules
//!
//! - **Who writes a page.** Only the holder of the buffer's *exclusive* content lock changes
//!   a page ([`PageMut`]); holders of a shared lock read it ([`Page`]).
//! - **Checksums.** [`set_checksum`] is applied only to the private copy being written to
//!   disk (the storage manager's write path), never to a shared buffer: a reader under a shared
//!   lock may be looking at it, and the checksum is stale as soon as the page changes again
//!   anyway. [`verify`] runs on every page read from disk, before anything else looks at it.
//! - **LSN.** A change is WAL-logged first, then `pd_lsn` is set to the record's end LSN
//!   ([`PageMut::set_lsn`]); the buffer pool flushes the WAL up to it before writing the page.
//! - **New pages.** An all-zero page is valid (as PostgreSQL's `PageIsVerified`): relation
//!   extension writes zeros before the page is initialised in the buffer pool, and a crash can
//!   leave such a page behind. It carries no checksum, and [`set_checksum`] leaves it all-zero.
//! - **Never panic on disk garbage.** Every [`Page`] accessor is total: on a page that has not
//!   been verified, header-derived positions are clamped and items are bounds-checked, and
//!   anything inconsistent yields `None` or a [`PageError`]. Even after [`verify`], which
//!   checks the header but not the line pointers (a buggy writer can checksum a bad page),
//!   item accessors check each line pointer they follow.
//!   [`PageMut`] mutators refuse (`None`, `false`, `Err`) rather than write out of bounds.
//!   Only [`PageMut::init`] panics, on a caller bug (a special space that cannot fit).

mod checksum;
mod edit;
mod item;
mod view;

#[cfg(test)]
mod tests;

pub use checksum::{checksum, set_checksum, verify};
pub use edit::PageMut;
pub use item::{ItemId, ItemState};
pub use view::Page;

use crate::types::PAGE_SIZE;
/// The size of the page header in bytes; line pointers start here.
pub const HEADER_SIZE: usize = 24;
/// The size of a line pointer in bytes.
pub const LINE_POINTER_SIZE: usize = 4;
/// The page layout version written by this code and the only one [`verify`] accepts.
pub const LAYOUT_VERSION: u16 = 1;
/// Item and special-space alignment in bytes (PostgreSQL's `MAXALIGN` on 64-bit machines), so
/// a structure stored in an item can be read in place with natural alignment.
pub const MAXALIGN: usize = 8;
/// The most line pointers a page can hold (they fill every byte after the header).
pub const MAX_ITEM_COUNT: usize = (PAGE_SIZE - HEADER_SIZE) / LINE_POINTER_SIZE;

/// The most items with storage a page holds without two overlapping: each takes at least one
/// aligned word of item space and its line pointer.
const MAX_STORED_ITEMS: usize = (PAGE_SIZE - HEADER_SIZE) / (MAXALIGN + LINE_POINTER_SIZE);
/// The largest item that fits on an empty page without special space, in bytes.
pub const MAX_ITEM_SIZE: usize =
    (PAGE_SIZE - HEADER_SIZE - LINE_POINTER_SIZE) / MAXALIGN * MAXALIGN;

/// A 1-based item number within a page (PostgreSQL's `OffsetNumber`); 0 is invalid.
pub type OffsetNumber = u16;
/// The number of the first item on a page.
pub const FIRST_OFFSET_NUMBER: OffsetNumber = 1;

/// A tuple's address: block number and item number (PostgreSQL's `ItemPointerData`, shown
/// as `(block,offset)` like PostgreSQL's `ctid`). Ordered by block, then offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tid {
    pub block: u32,
    pub offset: OffsetNumber,
}

impl Tid {
    pub const fn new(block: u32, offset: OffsetNumber) -> Self {
        Tid { block, offset }
    }
}

impl std::fmt::Display for Tid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({},{})", self.block, self.offset)
    }
}

/// Flag: there may be unused line pointers to reuse before adding new ones (a hint: it is
/// set whenever one becomes unused and cleared once none is left).
pub const HAS_FREE_LINES: u16 = 0x1;
/// Flag: an earlier update found no room on this page (a hint for pruning).
pub const PAGE_FULL: u16 = 0x2;
/// Flag: every tuple on the page is visible to every transaction.
pub const ALL_VISIBLE: u16 = 0x4;
/// Every defined flag bit; [`verify`] rejects a page with any other bit set.
pub const VALID_FLAG_BITS: u16 = HAS_FREE_LINES | PAGE_FULL | ALL_VISIBLE;

// Byte offsets of the header fields (see the table above).
const LSN_AT: usize = 0;
const CHECKSUM_AT: usize = 8;
const FLAGS_AT: usize = 12;
const LOWER_AT: usize = 14;
const UPPER_AT: usize = 16;
const SPECIAL_AT: usize = 18;
const VERSION_AT: usize = 20;
const RESERVED_AT: usize = 22;

/// Why a page is not acceptable. The page layer does not know which relation a page belongs
/// to: the storage manager wraps this in [`Error::CorruptPage`](crate::Error::CorruptPage).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    #[error(
        "checksum mismatch: stored {stored:#010x}, calculated {calculated:#010x} \
         (a torn or misplaced write, or media corruption)"
    )]
    ChecksumMismatch { stored: u32, calculated: u32 },

    #[error("pd_version is {version}, expected {LAYOUT_VERSION}")]
    BadVersion { version: u16 },

    #[error("the reserved header field (byte 22) is {reserved:#06x}, expected 0")]
    BadReserved { reserved: u16 },

    #[error("pd_flags is {flags:#06x}, which sets bits outside {VALID_FLAG_BITS:#06x}")]
    BadFlags { flags: u16 },

    #[error(
        "pd_lower is {lower}, expected at least {HEADER_SIZE} and a whole number of \
         {LINE_POINTER_SIZE}-byte line pointers past it"
    )]
    BadLower { lower: u16 },

    #[error(
        "pd_special is {special}, expected a multiple of {MAXALIGN} in [{HEADER_SIZE}, {PAGE_SIZE}]"
    )]
    BadSpecial { special: u16 },

    #[error("pd_upper is {upper}, expected a multiple of {MAXALIGN} at most pd_special {special}")]
    BadUpper { upper: u16, special: u16 },

    #[error("pd_lower {lower} is above pd_upper {upper}")]
    LowerAboveUpper { lower: u16, upper: u16 },

    #[error(
        "line pointer {offset_number} is corrupt: an item of {len_bytes} bytes at byte \
         {item_offset} is empty, misaligned or outside the item space [{upper}, {special})"
    )]
    BadLinePointer {
        offset_number: OffsetNumber,
        item_offset: u16,
        len_bytes: u16,
        upper: u16,
        special: u16,
    },

    #[error("line pointers {offset_number} and {other} are corrupt: their items overlap")]
    ItemsOverlap {
        offset_number: OffsetNumber,
        other: OffsetNumber,
    },

    #[error("item {offset_number} does not exist (the page has {item_count} line pointers)")]
    NoSuchItem {
        offset_number: OffsetNumber,
        item_count: OffsetNumber,
    },
}

/// Rounds `len` up to a multiple of [`MAXALIGN`]. `len` is at most a page, so no overflow.
const fn max_align(len: usize) -> usize {
    (len + MAXALIGN - 1) & !(MAXALIGN - 1)
}

/// A header field or line pointer: callers pass offsets inside the page.
fn read_u16(bytes: &[u8; PAGE_SIZE], at: usize) -> u16 {
    crate::bytes::u16_at(bytes, at).expect("a page field lies inside the page")
}

/// See [`read_u16`].
fn read_u32(bytes: &[u8; PAGE_SIZE], at: usize) -> u32 {
    crate::bytes::u32_at(bytes, at).expect("a page field lies inside the page")
}

fn write_u16(bytes: &mut [u8; PAGE_SIZE], at: usize, value: u16) {
    bytes[at..at + 2].copy_from_slice(&value.to_le_bytes());
}

fn write_u32(bytes: &mut [u8; PAGE_SIZE], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

/// The byte position of line pointer `off` (1-based); the caller has range-checked `off`.
fn line_pointer_at(off: OffsetNumber) -> usize {
    debug_assert!(off >= FIRST_OFFSET_NUMBER && usize::from(off) <= MAX_ITEM_COUNT);
    HEADER_SIZE + (usize::from(off) - 1) * LINE_POINTER_SIZE
}
