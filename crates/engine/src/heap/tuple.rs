//! The heap tuple: a fixed header, then the row's values ([`crate::value`] encoding).
//!
//! ```text
//! 0      8      16     20     24           28            30         32      34
//! | xmin | xmax | cmin | cmax | ctid.block | ctid.offset | infomask | natts | values ...
//! | u64  | u64  | u32  | u32  | u32        | u16         | u16      | u16   |
//! ```
//! PostgreSQL's `HeapTupleHeaderData` with 64-bit transaction ids (so no freezing), and
//! `cmin` and `cmax` stored apart (so no combo command ids). `ctid` points at the tuple itself
//! until an update points it at the next version.

use crate::bytes::{u16_at, u32_at, u64_at};
use crate::page::Tid;
use crate::types::Xid;
use crate::value::{decode_row, DecodeError, Row};

pub const HEADER_BYTES: usize = 34;

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

const XMIN_AT: usize = 0;
const XMAX_AT: usize = 8;
const CMIN_AT: usize = 16;
const CMAX_AT: usize = 20;
const CTID_BLOCK_AT: usize = 24;
const CTID_OFFSET_AT: usize = 28;
const INFOMASK_AT: usize = 30;
const NATTS_AT: usize = 32;

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

    /// Decodes the header of an item; `None` if the item is too short to be a tuple.
    pub fn read(item: &[u8]) -> Option<TupleHeader> {
        let h = item.get(..HEADER_BYTES)?;
        Some(TupleHeader {
            xmin: Xid(u64_at(h, XMIN_AT)?),
            xmax: Xid(u64_at(h, XMAX_AT)?),
            cmin: u32_at(h, CMIN_AT)?,
            cmax: u32_at(h, CMAX_AT)?,
            ctid: Tid::new(u32_at(h, CTID_BLOCK_AT)?, u16_at(h, CTID_OFFSET_AT)?),
            infomask: u16_at(h, INFOMASK_AT)?,
            natts: u16_at(h, NATTS_AT)?,
        })
    }

    /// Writes the header into the first [`HEADER_BYTES`] of `item`.
    pub fn write(&self, item: &mut [u8]) {
        item[XMIN_AT..XMIN_AT + 8].copy_from_slice(&self.xmin.0.to_le_bytes());
        item[XMAX_AT..XMAX_AT + 8].copy_from_slice(&self.xmax.0.to_le_bytes());
        item[CMIN_AT..CMIN_AT + 4].copy_from_slice(&self.cmin.to_le_bytes());
        item[CMAX_AT..CMAX_AT + 4].copy_from_slice(&self.cmax.to_le_bytes());
        item[CTID_BLOCK_AT..CTID_BLOCK_AT + 4].copy_from_slice(&self.ctid.block.to_le_bytes());
        item[CTID_OFFSET_AT..CTID_OFFSET_AT + 2].copy_from_slice(&self.ctid.offset.to_le_bytes());
        item[INFOMASK_AT..INFOMASK_AT + 2].copy_from_slice(&self.infomask.to_le_bytes());
        item[NATTS_AT..NATTS_AT + 2].copy_from_slice(&self.natts.to_le_bytes());
    }

    /// Whether `new` may replace this header through an xmax change (DELETE, the old version
    /// of an UPDATE, a row lock): the inserter's fields stay as they are, an xmax is set, and
    /// no pair of hint bits contradicts itself. Checked where the primary makes the change
    /// and where redo replays it.
    pub fn is_xmax_change_to(&self, new: &TupleHeader) -> bool {
        new.xmin == self.xmin
            && new.cmin == self.cmin
            && new.natts == self.natts
            && new.xmax.is_valid()
            && new.hints_are_consistent()
    }

    /// No hint pair says both "committed" and "invalid" of one transaction.
    pub fn hints_are_consistent(&self) -> bool {
        let both_xmin = XMIN_COMMITTED | XMIN_INVALID;
        let both_xmax = XMAX_COMMITTED | XMAX_INVALID;
        self.infomask & both_xmin != both_xmin && self.infomask & both_xmax != both_xmax
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
}
