//! # types — the small types and limits every layer shares
//!
//! The bottom of the layer order: this module names no other module of the engine, and every
//! module may use it. What lives here is what several layers must agree on and no single
//! layer owns: where a page lives ([`RelFileLocator`], [`Fork`], [`BlockNumber`],
//! [`BufferTag`]), positions in the WAL ([`Lsn`]), the ids that must not be mixed up
//! ([`Xid`], [`Oid`], [`Rmid`]), the page size, and the limits that depend
//! on each other (tied together by `const` assertions below, so that changing one without the
//! others fails to compile).
//!
//! ## Rules
//! - Only plain data and constants: no I/O, no locks, no allocation.
//! - A limit that another limit or a setting's lower bound is derived from is defined here,
//!   once, with `const` assertions tying it to the others.
//! - One path to each: every module imports these from `types`; no layer re-exports them
//!   (the crate root re-exports the few that belong to the embedded API).

use std::fmt;

/// The size of a data page (and of a WAL page) in bytes, PostgreSQL's `BLCKSZ`.
pub const PAGE_SIZE: usize = 8192;

/// A block number within a fork.
pub type BlockNumber = u32;

/// The largest number of blocks a fork may have (block numbers are u32; `u32::MAX` is kept
/// free as PostgreSQL's `InvalidBlockNumber`).
pub const MAX_BLOCKS: BlockNumber = u32::MAX - 1;

/// A position in the WAL stream: a byte offset from the start of the WAL (PostgreSQL's
/// `XLogRecPtr`). Printed as PostgreSQL prints one, the high and low 32 bits in hex:
/// `0/16B3748`. Stored as a little-endian u64 (`.0.to_le_bytes()`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub u64);

impl Lsn {
    /// No position (PostgreSQL's `InvalidXLogRecPtr`): the LSN of a page never WAL-logged,
    /// the back link of the first record.
    pub const INVALID: Lsn = Lsn(0);

    /// The number of the `unit_bytes`-sized piece of the WAL (a segment file) holding this
    /// position.
    pub fn segment_of(self, unit_bytes: u64) -> u64 {
        self.0 / unit_bytes
    }

    /// This position's offset within its `unit_bytes`-sized piece of the WAL (a WAL page, a
    /// segment file).
    pub fn offset_in(self, unit_bytes: u64) -> u64 {
        self.0 % unit_bytes
    }

    /// The start of the `unit_bytes`-sized piece of the WAL holding this position.
    #[must_use]
    pub fn align_down(self, unit_bytes: u64) -> Lsn {
        Lsn(self.0 - self.0 % unit_bytes)
    }

    /// The bytes from `earlier` to this position; 0 if `earlier` is not earlier.
    pub fn bytes_since(self, earlier: Lsn) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

/// `lsn + bytes`: the position that many bytes further on.
impl std::ops::Add<u64> for Lsn {
    type Output = Lsn;
    fn add(self, bytes: u64) -> Lsn {
        Lsn(self.0 + bytes)
    }
}

impl std::ops::AddAssign<u64> for Lsn {
    fn add_assign(&mut self, bytes: u64) {
        self.0 += bytes;
    }
}

/// `end - start`: the bytes between two positions (`start` must not be past `end`).
impl std::ops::Sub for Lsn {
    type Output = u64;
    fn sub(self, start: Lsn) -> u64 {
        self.0 - start.0
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 as u32)
    }
}

/// A transaction id: 64 bits, handed out in increasing order and never wrapping, so no id is
/// ever frozen or reused. Printed as a plain number, as PostgreSQL prints one. Stored as a
/// little-endian u64.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Xid(pub u64);

impl Xid {
    /// No transaction (PostgreSQL's `InvalidTransactionId`): an xmax nobody set, a record
    /// that no transaction wrote.
    pub const INVALID: Xid = Xid(0);

    pub fn is_valid(self) -> bool {
        self != Xid::INVALID
    }

    /// The id handed out after this one.
    #[must_use]
    pub fn next(self) -> Xid {
        Xid(self.0 + 1)
    }

    /// The id `n` before this one, or [`Xid::INVALID`] if there is none.
    #[must_use]
    pub fn saturating_sub(self, n: u64) -> Xid {
        Xid(self.0.saturating_sub(n))
    }
}

/// `xid + n`: the id `n` later.
impl std::ops::Add<u64> for Xid {
    type Output = Xid;
    fn add(self, n: u64) -> Xid {
        Xid(self.0 + n)
    }
}

/// `newer - older`: how many ids lie between (the age of `older` when `newer` is the next
/// id); `older` must not be newer.
impl std::ops::Sub for Xid {
    type Output = u64;
    fn sub(self, older: Xid) -> u64 {
        self.0 - older.0
    }
}

impl fmt::Display for Xid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An object id: the identity of a table or an index in the catalog, handed out by one
/// counter that never goes back (also across crashes). Relation file numbers are drawn from
/// the same counter but are a separate concept (a table keeps its oid through TRUNCATE, not
/// its file), so [`RelFileLocator::rel_number`] stays a plain number, as PostgreSQL's
/// `RelFileNumber` is. Printed as a plain number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Oid(pub u64);

impl Oid {
    /// No object (PostgreSQL's `InvalidOid`).
    pub const INVALID: Oid = Oid(0);

    /// The oid handed out after this one.
    #[must_use]
    pub fn next(self) -> Oid {
        Oid(self.0 + 1)
    }
}

impl fmt::Display for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The id of a resource manager: the byte in every WAL record's header naming the module
/// that redoes it (PostgreSQL's `RmgrId`). The ids are named in `recovery::rmid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rmid(pub u8);

impl fmt::Display for Rmid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

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
    /// The bit of a relation number that makes it a table's TOAST relation (`crate::toast`;
    /// other relation numbers are oids, below 2^32).
    pub const TOAST_BIT: u64 = 1 << 40;

    pub fn new(db_oid: u32, rel_number: u64) -> Self {
        RelFileLocator { db_oid, rel_number }
    }

    /// The TOAST relation of the table whose relation this is.
    #[must_use]
    pub fn toast(self) -> Self {
        debug_assert!(!self.is_toast(), "a TOAST relation has none");
        RelFileLocator::new(self.db_oid, self.rel_number | Self::TOAST_BIT)
    }

    pub fn is_toast(self) -> bool {
        self.rel_number & Self::TOAST_BIT != 0
    }

    /// The oid the relation number was made from (a TOAST relation's: its table's).
    pub fn number_oid(self) -> u64 {
        self.rel_number & !Self::TOAST_BIT
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
    fn lsns_print_as_postgresql_prints_them() {
        assert_eq!(Lsn(0x16B_3748).to_string(), "0/16B3748");
        assert_eq!(Lsn(0x1_0000_0000).to_string(), "1/0");
        assert_eq!(Lsn(0xDEAD_BEEF_0000_00FF).to_string(), "DEADBEEF/FF");
        assert_eq!(Lsn::INVALID.to_string(), "0/0");
        assert_eq!(Xid(42).to_string(), "42");
        assert_eq!(Oid(16_384).to_string(), "16384");
    }

    #[test]
    fn lsn_arithmetic_is_byte_arithmetic() {
        let lsn = Lsn(3 * 8192 + 100);
        assert_eq!(lsn.segment_of(8192), 3);
        assert_eq!(lsn.offset_in(8192), 100);
        assert_eq!(lsn.align_down(8192), Lsn(3 * 8192));
        assert_eq!(lsn + 28, Lsn(3 * 8192 + 128));
        assert_eq!((lsn + 28) - lsn, 28);
        assert_eq!(lsn.bytes_since(lsn + 1), 0);
        assert_eq!((lsn + 1).bytes_since(lsn), 1);
    }

    #[test]
    fn fork_numbers_round_trip() {
        for fork in Fork::ALL {
            assert_eq!(Fork::from_number(fork as u8), Some(fork));
        }
        assert_eq!(Fork::from_number(3), None);
    }
}
