//! Storage records: relation files created, truncated and dropped (PostgreSQL's
//! `RM_SMGR_ID`). Redo of a truncation or drop removes the buffers through the buffer pool's
//! fast drop path before cutting the files, exactly as the primary does. Main data
//! (little-endian), a relation and a fork encoded as the WAL's block references encode them
//! (`db_oid u32 | rel_number u64`, `fork u8`):
//!
//! ```text
//! CREATE    | relation | fork u8 |
//! TRUNCATE  | relation | fork u8 | nblocks u32 |
//! DROP      | n × relation |
//! ```

use super::{rmid, IdCounters, RedoContext, ResourceManager};
use crate::bytes::Reader;
use crate::error::{Error, Result};

use crate::types::{BlockNumber, Fork, Lsn, Oid, RelFileLocator, Xid};
use crate::wal::record::{put_rel, read_rel, record_types, REL_BYTES};
use crate::wal::{DecodedRecord, Wal, WalRecord};

record_types! {
    /// Storage record types.
    pub enum StorageRecord for rmid::STORAGE {
        Create = 1,
        Truncate = 2,
        Drop = 3,
    }
}

/// A storage record, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
enum StorageChange {
    Create(RelFileLocator, Fork),
    Truncate(RelFileLocator, Fork, BlockNumber),
    Drop(Vec<RelFileLocator>),
}

impl StorageChange {
    /// The record type and main data.
    fn encode(&self) -> (StorageRecord, Vec<u8>) {
        let mut main = Vec::new();
        let info = match self {
            StorageChange::Create(rel, fork) => {
                put_rel(&mut main, *rel);
                main.push(*fork as u8);
                StorageRecord::Create
            }
            StorageChange::Truncate(rel, fork, nblocks) => {
                put_rel(&mut main, *rel);
                main.push(*fork as u8);
                main.extend_from_slice(&nblocks.to_le_bytes());
                StorageRecord::Truncate
            }
            StorageChange::Drop(rels) => {
                for r in rels {
                    put_rel(&mut main, *r);
                }
                StorageRecord::Drop
            }
        };
        (info, main)
    }

    /// Decodes the main data of a record of type `record_type`; `None` on anything
    /// malformed.
    fn decode(record_type: StorageRecord, main: &[u8]) -> Option<Self> {
        let mut r = Reader::new(main);
        let rec = match record_type {
            StorageRecord::Create => StorageChange::Create(read_rel(&mut r)?, Fork::from_number(r.u8()?)?),
            StorageRecord::Truncate => {
                StorageChange::Truncate(read_rel(&mut r)?, Fork::from_number(r.u8()?)?, r.u32()?)
            }
            StorageRecord::Drop => {
                if !r.remaining().is_multiple_of(REL_BYTES) {
                    return None;
                }
                let n = r.remaining() / REL_BYTES;
                StorageChange::Drop((0..n).map(|_| read_rel(&mut r)).collect::<Option<_>>()?)
            }
        };
        r.done()?;
        Some(rec)
    }

    fn of(rec: &DecodedRecord) -> Result<Self> {
        Self::decode(rec.record_type()?, &rec.main).ok_or_else(|| Error::WalCorrupt {
            lsn: rec.lsn,
            reason: "malformed storage record".into(),
        })
    }
}

fn log(wal: &Wal, rec: &StorageChange) -> Result<Lsn> {
    let (record_type, main) = rec.encode();
    let (_, end) = wal.insert(&WalRecord::new(Xid::INVALID, record_type, &[], &main))?;
    Ok(end)
}

/// Logs the creation of a fork; returns the record's end LSN.
pub fn log_create(wal: &Wal, rel: RelFileLocator, fork: Fork) -> Result<Lsn> {
    log(wal, &StorageChange::Create(rel, fork))
}

/// Logs a truncation of a fork to `nblocks`.
pub fn log_truncate(
    wal: &Wal,
    rel: RelFileLocator,
    fork: Fork,
    nblocks: BlockNumber,
) -> Result<Lsn> {
    log(wal, &StorageChange::Truncate(rel, fork, nblocks))
}

/// Logs the drop of whole relations.
pub fn log_drop(wal: &Wal, rels: &[RelFileLocator]) -> Result<Lsn> {
    log(wal, &StorageChange::Drop(rels.to_vec()))
}

pub(super) struct Storage;

impl ResourceManager for Storage {
    fn name(&self) -> &'static str {
        "storage"
    }

    fn redo(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
        match StorageChange::of(rec)? {
            StorageChange::Create(rel, fork) => {
                if !ctx.smgr.exists(rel, fork)? {
                    ctx.smgr.create(rel, fork)?;
                }
            }
            StorageChange::Truncate(rel, fork, nblocks) => {
                ctx.invalid_pages.forget_from(rel, fork, nblocks);
                ctx.pool.drop_relation_buffers(rel, fork, nblocks);
                if ctx.smgr.exists(rel, fork)? {
                    ctx.smgr.truncate(rel, fork, nblocks)?;
                }
            }
            StorageChange::Drop(rels) => {
                ctx.pool.drop_relations(&rels);
                for r in rels {
                    ctx.invalid_pages.forget_relation(r);
                    ctx.smgr.unlink(r)?;
                }
            }
        }
        Ok(())
    }

    /// A created relation's number is an oid: none is handed out twice across a crash.
    fn ids(&self, rec: &DecodedRecord) -> Result<IdCounters> {
        Ok(match StorageChange::of(rec)? {
            StorageChange::Create(rel, _) => IdCounters {
                next_oid: Oid(rel.number_oid() + 1),
                ..IdCounters::default()
            },
            StorageChange::Truncate(..) | StorageChange::Drop(_) => IdCounters::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_records_match_the_documented_layout_and_refuse_garbage() {
        let rel = RelFileLocator::new(0x0102_0304, 0x1112_1314_1516_1718);
        #[rustfmt::skip]
        let rel_bytes = [
            0x04, 0x03, 0x02, 0x01, // db_oid
            0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, // rel_number
        ];
        let cases = [
            (
                StorageChange::Create(rel, Fork::Vm),
                StorageRecord::Create,
                [&rel_bytes[..], &[2]].concat(),
            ),
            (
                StorageChange::Truncate(rel, Fork::Fsm, 0x2122_2324),
                StorageRecord::Truncate,
                [&rel_bytes[..], &[1, 0x24, 0x23, 0x22, 0x21]].concat(),
            ),
            (
                StorageChange::Drop(vec![rel, rel]),
                StorageRecord::Drop,
                [rel_bytes, rel_bytes].concat(),
            ),
        ];
        for (rec, info, bytes) in cases {
            assert_eq!(rec.encode(), (info, bytes.clone()));
            assert_eq!(StorageChange::decode(info, &bytes), Some(rec.clone()));
            for cut in 0..bytes.len() {
                if info == StorageRecord::Drop && cut % REL_BYTES == 0 {
                    continue; // a shorter list
                }
                assert_eq!(
                    StorageChange::decode(info, &bytes[..cut]),
                    None,
                    "{rec:?} cut at {cut}"
                );
            }
            let long = [&bytes[..], &[0]].concat();
            assert_eq!(
                StorageChange::decode(info, &long),
                None,
                "{rec:?} with a trailing byte"
            );
        }
        assert_eq!(
            StorageChange::decode(StorageRecord::Create, &[&rel_bytes[..], &[9]].concat()),
            None
        );
        assert_eq!(
            StorageChange::decode(StorageRecord::Drop, &[]),
            Some(StorageChange::Drop(Vec::new()))
        );
    }
}
