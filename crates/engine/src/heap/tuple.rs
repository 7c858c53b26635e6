//! The heap tuple: a fixed header, then the row's values ([`crate::value`] encoding).
//!
//! ```text
//! 0      8      16     20     24           28                      30                32
//! | xmin | xmax | cmin | cmax | ctid.block | ctid.offset + hints   | natts + HOT     | values ...
//! | u64  | u64  | u32  | u32  | u32        | u16: bits 0-10 offset | u16: bits 0-10  |
//! |      |      |      |      |            |   bits 11-15 infomask |   natts, 11-12  |
//! |      |      |      |      |            |   0x01..0x10          |   infomask 0x20 |
//! |      |      |      |      |            |                       |   and 0x40      |
//! ```
//! PostgreSQL's `HeapTupleHeaderData` with 64-bit transaction ids (so no freezing), and
//! `cmin` and `cmax` stored apart (so no combo command ids). `ctid` points at the tuple itself
//! until an update points it at the next version.
//!
//! ## Why 32 bytes, packed
//! Items are 8-byte aligned, so a header of 34 bytes made a two-integer row take 48 bytes
//! where 32 + 8 = 40 do: a sixth more pages for narrow tables, and a sixth more of every pass
//! over them (VACUUM reads, logs and writes each page). As PostgreSQL packs `natts` with the
//! HOT bits in `t_infomask2`, quire packs the 11 bits a line pointer offset needs (at most
//! [`crate::page::MAX_ITEM_COUNT`], 2042) with the five hint bits, and the 11 bits `natts`
//! needs (at most 1600 columns) with the two HOT bits. [`TupleHeader`] keeps them apart;
//! only [`TupleHeader::read`] and [`TupleHeader::write`] know the packing.
//!
//! ## Rules
//! - [`TupleHeader::write`] takes only a header that [`TupleHeader::fits`]; values from the
//!   WAL are checked against `fits` before they are written (a corrupt record is an error,
//!   never a panic).

use crate::bytes::{u16_at, u32_at, u64_at};
use crate::page::Tid;
use crate::types::Xid;
use crate::value::{decode_row, DecodeError, Row};

pub const HEADER_BYTES: usize = 32;

/// infomask: the inserting transaction is known committed (a hint; set by vacuum).
pub const XMIN_COMMITTED: u16 = 0x0001;
/// infomask: the inserting transaction is known aborted (a hint).
pub const XMIN_INVALID: u16 = 0x0002;
/// infomask: `xmax` is known committed (a hint).
pub const XMAX_COMMITTED: u16 = 0x0004;
/// infomask: `xmax` is not a deleter (never set, or its transaction aborted).
pub const XMAX_INVALID: u16 = 0x0008;
/// infomask: `xmax` only locks the row (SELECT ... FOR UPDATE), it did not delete it.
pub const XMAX_LOCK_ONLY: u16 = 0x0010;
/// infomask: this version was updated in place on its page (HOT); the next version is a
/// heap-only tuple that indexes do not point at.
pub const HOT_UPDATED: u16 = 0x0020;
/// infomask: a heap-only tuple (reached from its predecessor, not from indexes).
pub const HEAP_ONLY: u16 = 0x0040;

/// Every infomask bit there is.
pub const INFOMASK_BITS: u16 = 0x007F;
/// The infomask bits stored with the ctid offset (the hints).
const HINT_BITS: u16 = 0x001F;
/// How far the HOT bits (0x20, 0x40) shift down before they move above `natts`.
const HOT_SHIFT: u32 = 5;
/// The largest ctid offset and `natts` the packed words hold (11 bits each).
pub const FIELD_MAX: u16 = 0x07FF;
/// Where the packed words keep their upper part.
const FIELD_BITS: u32 = 11;

const XMIN_AT: usize = 0;
const XMAX_AT: usize = 8;
const CMIN_AT: usize = 16;
const CMAX_AT: usize = 20;
const CTID_BLOCK_AT: usize = 24;
/// ctid.offset (bits 0-10) and the hint bits of the infomask (bits 11-15).
const OFFSET_HINTS_AT: usize = 28;
/// natts (bits 0-10) and the HOT bits of the infomask (bits 11-12).
const NATTS_HOT_AT: usize = 30;

/// A decoded tuple header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TupleHeader {
    pub xmin: Xid,
    pub xmax: Xid,
    pub cmin: u32,
    pub cmax: u32,
    pub ctid: Tid,
    pub infomask: u16,
    pub natts: u16,
}

impl TupleHeader {
    /// The header of a new tuple inserted by `xid` in command `cid`.
    pub fn new(xid: Xid, cid: u32, natts: u16) -> Self {
        TupleHeader {
            xmin: xid,
            xmax: Xid::INVALID,
            cmin: cid,
            cmax: 0,
            ctid: Tid::new(0, 0),
            infomask: XMAX_INVALID,
            natts,
        }
    }

    /// Decodes the header of an item; `None` if the item is too short to be a tuple. Every
    /// bit pattern decodes to a header that [`TupleHeader::fits`] (bits 13-15 of the `natts`
    /// word are ignored: [`TupleHeader::write`] leaves them zero).
    pub fn read(item: &[u8]) -> Option<TupleHeader> {
        let h = item.get(..HEADER_BYTES)?;
        let offset_hints = u16_at(h, OFFSET_HINTS_AT)?;
        let natts_hot = u16_at(h, NATTS_HOT_AT)?;
        Some(TupleHeader {
            xmin: Xid(u64_at(h, XMIN_AT)?),
            xmax: Xid(u64_at(h, XMAX_AT)?),
            cmin: u32_at(h, CMIN_AT)?,
            cmax: u32_at(h, CMAX_AT)?,
            ctid: Tid::new(u32_at(h, CTID_BLOCK_AT)?, offset_hints & FIELD_MAX),
            infomask: (offset_hints >> FIELD_BITS)
                | (((natts_hot >> FIELD_BITS) << HOT_SHIFT) & (INFOMASK_BITS & !HINT_BITS)),
            natts: natts_hot & FIELD_MAX,
        })
    }

    /// Whether the packed words hold this header: known infomask bits only, a ctid offset
    /// and `natts` of at most [`FIELD_MAX`].
    pub fn fits(&self) -> bool {
        self.infomask & !INFOMASK_BITS == 0 && self.ctid.offset <= FIELD_MAX && self.natts <= FIELD_MAX
    }

    /// Writes the header into the first [`HEADER_BYTES`] of `item`.
    pub fn write(&self, item: &mut [u8]) {
        assert!(self.fits(), "a tuple header the packed layout cannot hold: {self:?}");
        let offset_hints = self.ctid.offset | ((self.infomask & HINT_BITS) << FIELD_BITS);
        let natts_hot = self.natts | (((self.infomask & !HINT_BITS) >> HOT_SHIFT) << FIELD_BITS);
        item[XMIN_AT..XMIN_AT + 8].copy_from_slice(&self.xmin.0.to_le_bytes());
        item[XMAX_AT..XMAX_AT + 8].copy_from_slice(&self.xmax.0.to_le_bytes());
        item[CMIN_AT..CMIN_AT + 4].copy_from_slice(&self.cmin.to_le_bytes());
        item[CMAX_AT..CMAX_AT + 4].copy_from_slice(&self.cmax.to_le_bytes());
        item[CTID_BLOCK_AT..CTID_BLOCK_AT + 4].copy_from_slice(&self.ctid.block.to_le_bytes());
        item[OFFSET_HINTS_AT..OFFSET_HINTS_AT + 2].copy_from_slice(&offset_hints.to_le_bytes());
        item[NATTS_HOT_AT..NATTS_HOT_AT + 2].copy_from_slice(&natts_hot.to_le_bytes());
    }

    /// Whether `new` may replace this header through an xmax change (DELETE, the old version
    /// of an UPDATE, a row lock): the inserter's fields stay as they are, an xmax is set, and
    /// no pair of hint bits contradicts itself. Checked where the primary makes the change
    /// and where redo replays it.
    pub fn is_xmax_change_to(&self, new: &TupleHeader) -> bool {
        new.fits()
            && new.xmin == self.xmin
            && new.cmin == self.cmin
            && new.natts == self.natts
            && new.xmax.is_valid()
            && new.hints_are_consistent()
    }

    /// No hint pair says both "committed" and "invalid" of one transaction.
    pub fn hints_are_consistent(&self) -> bool {
        hints_are_consistent(self.infomask)
    }

    /// Does `xmax` delete (or update) the tuple, rather than only lock it or mean nothing?
    pub fn xmax_is_deleter(&self) -> bool {
        self.xmax.is_valid() && self.infomask & (XMAX_INVALID | XMAX_LOCK_ONLY) == 0
    }

    /// Was the tuple updated (its `ctid` leads to a newer version), not just deleted?
    pub fn is_updated(&self, own: Tid) -> bool {
        self.ctid != own
    }
}

/// No hint pair of `infomask` says both "committed" and "invalid" of one transaction.
fn hints_are_consistent(infomask: u16) -> bool {
    let both_xmin = XMIN_COMMITTED | XMIN_INVALID;
    let both_xmax = XMAX_COMMITTED | XMAX_INVALID;
    infomask & both_xmin != both_xmin && infomask & both_xmax != both_xmax
}

/// Adds the hint bits `hints` (of the five stored with the ctid offset) to the header of
/// `item` in place, touching only the word that holds them: pruning hints every live version
/// of a page, and decoding and re-encoding whole headers for it showed in VACUUM's profile.
/// `false`, with `item` unchanged, if `item` is too short to be a tuple or a hint pair would
/// contradict itself.
pub fn add_hints(item: &mut [u8], hints: u16) -> bool {
    debug_assert_eq!(hints & !HINT_BITS, 0, "not a hint bit: {hints:#x}");
    let Some(word) = item.get(..HEADER_BYTES).and_then(|h| u16_at(h, OFFSET_HINTS_AT)) else {
        return false;
    };
    let word = word | ((hints & HINT_BITS) << FIELD_BITS);
    if !hints_are_consistent(word >> FIELD_BITS) {
        return false;
    }
    item[OFFSET_HINTS_AT..OFFSET_HINTS_AT + 2].copy_from_slice(&word.to_le_bytes());
    true
}

/// Builds a tuple: header then encoded values.
pub fn build(header: &TupleHeader, values: &[u8]) -> Vec<u8> {
    let mut t = vec![0u8; HEADER_BYTES + values.len()];
    header.write(&mut t);
    t[HEADER_BYTES..].copy_from_slice(values);
    t
}

/// The row of a tuple.
pub fn row_of(item: &[u8]) -> Result<Row, DecodeError> {
    let natts = TupleHeader::read(item).map_or(0, |h| usize::from(h.natts));
    decode_row(item.get(HEADER_BYTES..).unwrap_or(&[]), natts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_hints_sets_only_the_hint_and_refuses_a_contradiction() {
        let h = TupleHeader {
            xmin: Xid(40),
            xmax: Xid(41),
            cmin: 1,
            cmax: 2,
            ctid: Tid::new(3, FIELD_MAX),
            infomask: XMAX_COMMITTED | HOT_UPDATED,
            natts: FIELD_MAX,
        };
        let mut t = build(&h, &[9, 9]);
        assert!(add_hints(&mut t, XMIN_COMMITTED));
        let hinted = TupleHeader {
            infomask: h.infomask | XMIN_COMMITTED,
            ..h
        };
        assert_eq!(TupleHeader::read(&t), Some(hinted));
        assert_eq!(&t[HEADER_BYTES..], &[9, 9]);
        let before = t.clone();
        assert!(!add_hints(&mut t, XMAX_INVALID), "committed and invalid xmax at once");
        assert!(!add_hints(&mut t, XMIN_INVALID), "committed and invalid xmin at once");
        assert_eq!(t, before);
        assert!(!add_hints(&mut t[..HEADER_BYTES - 1], XMIN_COMMITTED), "too short");
    }

    #[test]
    fn headers_round_trip() {
        let h = TupleHeader {
            xmin: Xid(u64::MAX - 1),
            xmax: Xid(12),
            cmin: 3,
            cmax: 4,
            ctid: Tid::new(7, 9),
            infomask: HOT_UPDATED | XMAX_LOCK_ONLY,
            natts: 5,
        };
        let t = build(&h, &[1, 2, 3]);
        assert_eq!(TupleHeader::read(&t), Some(h));
        assert!(!h.xmax_is_deleter());
        assert_eq!(TupleHeader::read(&t[..HEADER_BYTES - 1]), None);
    }

    /// Every infomask bit, the largest offset and `natts`, each next to its neighbours'
    /// extremes: the packed words keep them apart.
    #[test]
    fn packed_fields_keep_apart_at_their_extremes() {
        for infomask in 0..=INFOMASK_BITS {
            for (offset, natts) in [(0, 0), (FIELD_MAX, 0), (0, FIELD_MAX), (FIELD_MAX, FIELD_MAX), (1, 1600)] {
                let h = TupleHeader {
                    xmin: Xid(1),
                    xmax: Xid(u64::MAX),
                    cmin: u32::MAX,
                    cmax: 0,
                    ctid: Tid::new(u32::MAX, offset),
                    infomask,
                    natts,
                };
                assert_eq!(TupleHeader::read(&build(&h, &[])), Some(h), "{h:?}");
            }
        }
    }

    /// A header the layout cannot hold is refused as an xmax change (the redo check), and
    /// whatever bytes a page holds decode to a header that fits.
    #[test]
    fn headers_that_do_not_fit_are_refused_and_any_bytes_decode_to_one_that_does() {
        let old = TupleHeader::new(Xid(5), 0, 2);
        let mut new = old;
        new.xmax = Xid(6);
        new.infomask = 0;
        assert!(old.is_xmax_change_to(&new));
        new.infomask = 0x80;
        assert!(!old.is_xmax_change_to(&new), "an unknown infomask bit");
        new.infomask = 0;
        new.ctid = Tid::new(0, FIELD_MAX + 1);
        assert!(!old.is_xmax_change_to(&new), "an offset past 11 bits");
        let h = TupleHeader::read(&[0xFF; HEADER_BYTES]).expect("long enough");
        assert!(h.fits());
        assert_eq!((h.infomask, h.ctid.offset, h.natts), (INFOMASK_BITS, FIELD_MAX, FIELD_MAX));
    }
}
