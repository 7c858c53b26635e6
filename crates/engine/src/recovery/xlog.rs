//! The XLOG resource manager (`rmid` 0) and the one record it owns, the checkpoint record
//! (PostgreSQL's `xlog.c` and its `CheckPoint` struct). The checkpointer writes the record
//! through [`CheckpointRecord::encode`]; recovery reads it through [`CheckpointRecord::decode`]
//! and nowhere else. Main data, little-endian:
//!
//! ```text
//! 0                8                16               24                32
//! | redo_lsn u64   | next_xid u64   | next_oid u64   | oldest_xid u64  |
//! ```
//! `redo_lsn` is where redo starts (the WAL insert position when the checkpoint began);
//! `next_xid` and `next_oid` the next transaction id and oid to hand out; `oldest_xid` the
//! oldest transaction id whose commit status is kept (PostgreSQL's `oldestXid`).

use super::{rmid, IdCounters, RedoContext, ResourceManager};
use crate::bytes::Reader;
use crate::error::{Error, Result};
use crate::types::{Lsn, Oid, Xid};
use crate::wal::record::record_types;
use crate::wal::DecodedRecord;

record_types! {
    /// XLOG record types.
    pub enum XlogRecord for rmid::XLOG {
        CheckpointOnline = 1,
        CheckpointShutdown = 2,
    }
}

/// The main data of a checkpoint record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointRecord {
    pub redo: Lsn,
    pub next_xid: Xid,
    pub next_oid: Oid,
    pub oldest_xid: Xid,
}

impl CheckpointRecord {
    /// The encoded size.
    pub const SIZE: usize = 32;

    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..8].copy_from_slice(&self.redo.0.to_le_bytes());
        b[8..16].copy_from_slice(&self.next_xid.0.to_le_bytes());
        b[16..24].copy_from_slice(&self.next_oid.0.to_le_bytes());
        b[24..32].copy_from_slice(&self.oldest_xid.0.to_le_bytes());
        b
    }

    /// Decodes [`encode`](Self::encode); `None` unless `main` is exactly one record.
    pub fn decode(main: &[u8]) -> Option<Self> {
        let mut r = Reader::new(main);
        let rec = CheckpointRecord {
            redo: Lsn(r.u64()?),
            next_xid: Xid(r.u64()?),
            next_oid: Oid(r.u64()?),
            oldest_xid: Xid(r.u64()?),
        };
        r.done()?;
        Some(rec)
    }
}

/// The XLOG resource manager. Checkpoint records need nothing redone: they only mark where
/// redo may start, and carry the id counters.
pub(super) struct Xlog;

impl ResourceManager for Xlog {
    fn name(&self) -> &'static str {
        "xlog"
    }

    fn redo(&self, _ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
        // Only checkpoint records are XLOG's; anything else here is corruption.
        rec.record_type::<XlogRecord>().map(|_| ())
    }

    fn ids(&self, rec: &DecodedRecord) -> Result<IdCounters> {
        let c = CheckpointRecord::decode(&rec.main).ok_or_else(|| Error::WalCorrupt {
            lsn: rec.lsn,
            reason: format!(
                "checkpoint record of {} bytes, expected {}",
                rec.main.len(),
                CheckpointRecord::SIZE
            ),
        })?;
        Ok(IdCounters {
            next_xid: c.next_xid,
            next_oid: c.next_oid,
            oldest_xid: c.oldest_xid,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_record_bytes_match_the_documented_layout() {
        let rec = CheckpointRecord {
            redo: Lsn(0x0102_0304_0506_0708),
            next_xid: Xid(0x1112_1314_1516_1718),
            next_oid: Oid(0x2122_2324_2526_2728),
            oldest_xid: Xid(0x3132_3334_3536_3738),
        };
        #[rustfmt::skip]
        let expected: [u8; 32] = [
            // 0: redo_lsn
            0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
            // 8: next_xid
            0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,
            // 16: next_oid
            0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21,
            // 24: oldest_xid
            0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31,
        ];
        assert_eq!(rec.encode(), expected);
        assert_eq!(CheckpointRecord::decode(&expected), Some(rec));
    }

    #[test]
    fn a_checkpoint_record_of_another_length_is_refused() {
        let b = CheckpointRecord::default().encode();
        for cut in 0..b.len() {
            assert_eq!(CheckpointRecord::decode(&b[..cut]), None, "cut at {cut}");
        }
        let mut long = b.to_vec();
        long.push(0);
        assert_eq!(CheckpointRecord::decode(&long), None);
    }
}
