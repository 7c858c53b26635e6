//! Storage records: relation files created, truncated and dropped (PostgreSQL's
//! `RM_SMGR_ID`). Redo of a truncation or drop removes the buffers through the buffer pool's
//! fast drop path before cutting the files, exactly as the primary does.

use super::{rmid, RedoContext, ResourceManager};
use crate::error::{Error, Result};
use crate::smgr::{BlockNumber, Fork, RelFileLocator};
use crate::wal::{DecodedRecord, Lsn, Wal, WalRecord};

pub const CREATE: u8 = 1;
pub const TRUNCATE: u8 = 2;
pub const DROP: u8 = 3;

fn put_rel(out: &mut Vec<u8>, rel: RelFileLocator) {
    out.extend_from_slice(&rel.db_oid.to_le_bytes());
    out.extend_from_slice(&rel.rel_number.to_le_bytes());
}

fn get_rel(b: &[u8], at: usize) -> Option<RelFileLocator> {
    let db = u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?);
    let n = u64::from_le_bytes(b.get(at + 4..at + 12)?.try_into().ok()?);
    Some(RelFileLocator::new(db, n))
}

fn fork_of(b: u8) -> Option<Fork> {
    Fork::ALL.into_iter().find(|f| *f as u8 == b)
}

fn log(wal: &Wal, info: u8, main: &[u8]) -> Result<Lsn> {
    let (_, end) = wal.insert(&WalRecord {
        xid: 0,
        rmid: rmid::STORAGE,
        info,
        blocks: &[],
        main,
    })?;
    Ok(end)
}

/// Logs the creation of a fork; returns the record's end LSN.
pub fn log_create(wal: &Wal, rel: RelFileLocator, fork: Fork) -> Result<Lsn> {
    let mut main = Vec::new();
    put_rel(&mut main, rel);
    main.push(fork as u8);
    log(wal, CREATE, &main)
}

/// Logs a truncation of a fork to `nblocks`.
pub fn log_truncate(
    wal: &Wal,
    rel: RelFileLocator,
    fork: Fork,
    nblocks: BlockNumber,
) -> Result<Lsn> {
    let mut main = Vec::new();
    put_rel(&mut main, rel);
    main.push(fork as u8);
    main.extend_from_slice(&nblocks.to_le_bytes());
    log(wal, TRUNCATE, &main)
}

/// Logs the drop of whole relations.
pub fn log_drop(wal: &Wal, rels: &[RelFileLocator]) -> Result<Lsn> {
    let mut main = Vec::new();
    for r in rels {
        put_rel(&mut main, *r);
    }
    log(wal, DROP, &main)
}

pub(super) struct Storage;

impl ResourceManager for Storage {
    fn name(&self) -> &'static str {
        "storage"
    }

    fn redo(&self, ctx: &RedoContext<'_>, rec: &DecodedRecord) -> Result<()> {
        let bad = || Error::WalCorrupt {
            lsn: rec.lsn,
            reason: "malformed storage record".into(),
        };
        let m = &rec.main;
        match rec.info {
            CREATE => {
                let rel = get_rel(m, 0).ok_or_else(bad)?;
                let fork = m.get(12).copied().and_then(fork_of).ok_or_else(bad)?;
                if !ctx.smgr.exists(rel, fork)? {
                    ctx.smgr.create(rel, fork)?;
                }
                Ok(())
            }
            TRUNCATE => {
                let rel = get_rel(m, 0).ok_or_else(bad)?;
                let fork = m.get(12).copied().and_then(fork_of).ok_or_else(bad)?;
                let nblocks = u32::from_le_bytes(
                    m.get(13..17)
                        .ok_or_else(bad)?
                        .try_into()
                        .map_err(|_| bad())?,
                );
                ctx.pool.drop_relation_buffers(rel, fork, nblocks);
                if ctx.smgr.exists(rel, fork)? {
                    ctx.smgr.truncate(rel, fork, nblocks)?;
                }
                Ok(())
            }
            DROP => {
                if !m.len().is_multiple_of(12) {
                    return Err(bad());
                }
                let rels: Vec<_> = (0..m.len() / 12)
                    .filter_map(|i| get_rel(m, i * 12))
                    .collect();
                ctx.pool.drop_relations(&rels);
                for r in rels {
                    ctx.smgr.unlink(r)?;
                }
                Ok(())
            }
            _ => Err(bad()),
        }
    }
}
