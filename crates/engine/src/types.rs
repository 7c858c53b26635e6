//! # types — the small types and limits every layer shares
//!
//! The bottom of the layer order: this module names no other module of the engine, and every
//! module may use it. What lives here is what several layers must agree on and no single
//! layer owns: where a page lives ([`RelFileLocator`], [`Fork`], [`BlockNumber`],
//! [`BufferTag`]), positions in the WAL ([`Lsn`]), the page size, and the limits that depend
//! on each other (tied together by `const` assertions below, so that changing one without the
//! others fails to compile).
//!
//! ## Rules
//! - Only plain data and constants: no I/O, no locks, no allocation.
//! - A limit that another limit or a setting's lower bound is derived from is defined here,
//!   once; the layer that enforces it re-exports it (`wal::MAX_RECORD_SIZE`).

use std::fmt;

/// The size of a data page (and of a WAL page) in bytes, PostgreSQL's `BLCKSZ`.
pub const PAGE_SIZE: usize = 8192;

/// A block number within a fork.
pub type BlockNumber = u32;

/// The largest number of blocks a fork may have (block numbers are u32; `u32::MAX` is kept
/// free as PostgreSQL's `InvalidBlockNumber`).
pub const MAX_BLOCKS: BlockNumber = u32::MAX - 1;

/// A position in the WAL stream: a byte offset from the start of the WAL.
pub type Lsn = u64;

/// The largest WAL record in bytes: every block with an image, plus main data.
pub const MAX_RECORD_SIZE: usize = 256 * 1024;

/// The WAL buffers hold at least this many of the largest records, so that an inserter never
/// waits for a ring slot that its own record occupies (`wal_buffers` is refused below it).
pub const MIN_WAL_BUFFERS_IN_RECORDS: usize = 4;

/// The smallest `wal_buffers` setting in bytes.
pub const MIN_WAL_BUFFERS_BYTES: usize = MIN_WAL_BUFFERS_IN_RECORDS * MAX_RECORD_SIZE;

/// Room a prepare record keeps for its header and the gid; the rest is the prepared
/// transaction's state (`txn::twophase::MAX_STATE_BYTES`).
pub const PREPARE_RECORD_OVERHEAD_BYTES: usize = 1024;

// The limits above depend on each other: check them where they are defined.
const _: () = assert!(MAX_RECORD_SIZE.is_multiple_of(PAGE_SIZE));
const _: () = assert!(MIN_WAL_BUFFERS_BYTES.is_multiple_of(PAGE_SIZE));
const _: () = assert!(PREPARE_RECORD_OVERHEAD_BYTES < MAX_RECORD_SIZE / 2);
// A record with a full image of every block it may name still fits.
const _: () = assert!(MAX_RECORD_SIZE >= 16 * (PAGE_SIZE + 64));

/// A relation's physical identity: database and relation file number (never reused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelFileLocator {
    pub db_oid: u32,
    pub rel_number: u64,
}

impl RelFileLocator {
    pub fn new(db_oid: u32, rel_number: u64) -> Self {
        RelFileLocator { db_oid, rel_number }
    }
}

impl fmt::Display for RelFileLocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "base/{}/{}", self.db_oid, self.rel_number)
    }
}

/// A fork of a relation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fork {
    Main = 0,
    Fsm = 1,
    Vm = 2,
}

impl Fork {
    pub const ALL: [Fork; 3] = [Fork::Main, Fork::Fsm, Fork::Vm];

    pub fn name(self) -> &'static str {
        match self {
            Fork::Main => "main",
            Fork::Fsm => "fsm",
            Fork::Vm => "vm",
        }
    }

    /// The suffix of the fork's file names (PostgreSQL's `_fsm`, `_vm`).
    pub fn file_suffix(self) -> &'static str {
        match self {
            Fork::Main => "",
            Fork::Fsm => "_fsm",
            Fork::Vm => "_vm",
        }
    }

    /// The fork a stored fork number names, if any.
    pub fn from_number(n: u8) -> Option<Fork> {
        Fork::ALL.get(usize::from(n)).copied()
    }
}

impl fmt::Display for Fork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which page a buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferTag {
    pub rel: RelFileLocator,
    pub fork: Fork,
    pub block: BlockNumber,
}

impl BufferTag {
    pub fn new(rel: RelFileLocator, fork: Fork, block: BlockNumber) -> Self {
        BufferTag { rel, fork, block }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fork_numbers_round_trip() {
        for fork in Fork::ALL {
            assert_eq!(Fork::from_number(fork as u8), Some(fork));
        }
        assert_eq!(Fork::from_number(3), None);
    }
}
