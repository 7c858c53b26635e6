//! Lock modes, their conflict table, and what can be locked: PostgreSQL's eight table lock
//! modes (`lock.h`, `LockConflicts`), the lock tags (a relation, a transaction id, or an
//! advisory key) with their byte encoding (the prepared-transaction state file stores a
//! transaction's locks), and who holds locks.

use std::fmt;

use crate::txn::ProcId;
use crate::types::{Oid, Xid};

/// PostgreSQL's eight table lock modes, weakest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LockMode {
    AccessShare,
    RowShare,
    RowExclusive,
    ShareUpdateExclusive,
    Share,
    ShareRowExclusive,
    Exclusive,
    AccessExclusive,
}

/// Bit `m` set: the mode with index `m` conflicts (PostgreSQL's `LockConflicts`), indexed by
/// the requested mode. Bit order is [`LockMode::ALL`] order, bit 0 = AccessShare.
const CONFLICTS: [u8; 8] = [
    0b1000_0000, // AccessShare: AccessExclusive
    0b1100_0000, // RowShare: Exclusive, AccessExclusive
    0b1111_0000, // RowExclusive: Share, ShareRowExclusive, Exclusive, AccessExclusive
    0b1111_1000, // ShareUpdateExclusive: ShareUpdateExclusive and up
    0b1110_1100, // Share: RowExclusive, ShareUpdateExclusive, ShareRowExclusive and up
    0b1111_1100, // ShareRowExclusive: RowExclusive and up
    0b1111_1110, // Exclusive: RowShare and up
    0b1111_1111, // AccessExclusive: everything
];

/// The weak modes' bits: AccessShare, RowShare, RowExclusive.
pub(super) const WEAK_MODES: u8 = 0b0000_0111;
/// How many weak modes there are (the first three of [`LockMode::ALL`]).
pub(super) const WEAK_MODE_COUNT: usize = 3;

impl LockMode {
    /// All modes, weakest first.
    pub const ALL: [LockMode; 8] = [
        LockMode::AccessShare,
        LockMode::RowShare,
        LockMode::RowExclusive,
        LockMode::ShareUpdateExclusive,
        LockMode::Share,
        LockMode::ShareRowExclusive,
        LockMode::Exclusive,
        LockMode::AccessExclusive,
    ];

    /// 0..8, the position in [`LockMode::ALL`].
    #[inline]
    pub(super) fn index(self) -> usize {
        self as usize
    }

    #[inline]
    pub(super) fn bit(self) -> u8 {
        1 << (self as u8)
    }

    /// The modes this one conflicts with, as a bit set.
    #[inline]
    pub(super) fn conflict_mask(self) -> u8 {
        CONFLICTS[self.index()]
    }

    /// A weak mode (AccessShare, RowShare, RowExclusive): the three never conflict with one
    /// another, so on a relation they may take the fast path (see `fastpath.rs`).
    #[inline]
    pub(super) fn is_weak(self) -> bool {
        self.bit() & WEAK_MODES != 0
    }

    /// A strong mode (Share and up, ShareUpdateExclusive excepted): it conflicts with a weak
    /// mode, so on a relation it first moves every fast-path hold of the relation into the
    /// table, where its conflict check sees them.
    #[inline]
    pub(super) fn is_strong(self) -> bool {
        self.conflict_mask() & WEAK_MODES != 0
    }

    /// Whether a request for `self` conflicts with a hold of `other` by another owner
    /// (PostgreSQL's "Table 13.2 Conflicting Lock Modes"; symmetric).
    #[inline]
    pub fn conflicts_with(self, other: LockMode) -> bool {
        self.conflict_mask() & other.bit() != 0
    }

    /// The name PostgreSQL prints ("AccessShareLock", ...).
    pub fn name(self) -> &'static str {
        match self {
            LockMode::AccessShare => "AccessShareLock",
            LockMode::RowShare => "RowShareLock",
            LockMode::RowExclusive => "RowExclusiveLock",
            LockMode::ShareUpdateExclusive => "ShareUpdateExclusiveLock",
            LockMode::Share => "ShareLock",
            LockMode::ShareRowExclusive => "ShareRowExclusiveLock",
            LockMode::Exclusive => "ExclusiveLock",
            LockMode::AccessExclusive => "AccessExclusiveLock",
        }
    }

    /// PostgreSQL's lock mode number: 1 (AccessShareLock) ..= 8 (AccessExclusiveLock); 0 is
    /// PostgreSQL's `NoLock` and never a mode here.
    pub fn to_u8(self) -> u8 {
        self as u8 + 1
    }

    /// The inverse of [`LockMode::to_u8`]; `None` for anything outside 1..=8.
    pub fn from_u8(b: u8) -> Option<LockMode> {
        let index = usize::from(b.checked_sub(1)?);
        LockMode::ALL.get(index).copied()
    }
}

impl fmt::Display for LockMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

// ------------------------------------------------------------------------------ lock tags

/// What is locked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LockTag {
    /// A table.
    Relation { db_oid: u32, rel_oid: Oid },
    /// Held Exclusive by a transaction for its whole life; row-lock waiters take Share on it
    /// and release it at once.
    Transaction { xid: Xid },
    /// An advisory lock (`pg_advisory_lock`): a 64-bit key in a database, taken by one
    /// `bigint` key (`pair` false) or by two `int4` keys (`pair` true, the first in the high
    /// half), which PostgreSQL keeps apart (its `objsubid` 1 and 2).
    Advisory { db_oid: u32, key: u64, pair: bool },
}

impl LockTag {
    /// Whether this tag is a table (the only kind the fast path takes).
    #[inline]
    pub(super) fn is_relation(&self) -> bool {
        matches!(self, LockTag::Relation { .. })
    }
}

const TAG_KIND_RELATION: u8 = 1;
const TAG_KIND_TRANSACTION: u8 = 2;
const TAG_KIND_ADVISORY_BIGINT: u8 = 3;
const TAG_KIND_ADVISORY_PAIR: u8 = 4;

impl LockTag {
    /// Bytes of every encoded tag: a kind byte and twelve payload bytes (relation: `db_oid`
    /// u32 then `rel_oid` u64; transaction: `xid` u64 then four zero bytes; advisory: `db_oid`
    /// u32 then `key` u64), little-endian.
    pub const ENCODED_LEN: usize = 13;

    /// Appends the fixed-size encoding (for 2PC prepare records).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            LockTag::Relation { db_oid, rel_oid } => {
                out.push(TAG_KIND_RELATION);
                out.extend_from_slice(&db_oid.to_le_bytes());
                out.extend_from_slice(&rel_oid.0.to_le_bytes());
            }
            LockTag::Transaction { xid } => {
                out.push(TAG_KIND_TRANSACTION);
                out.extend_from_slice(&xid.0.to_le_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            LockTag::Advisory { db_oid, key, pair } => {
                out.push(if pair {
                    TAG_KIND_ADVISORY_PAIR
                } else {
                    TAG_KIND_ADVISORY_BIGINT
                });
                out.extend_from_slice(&db_oid.to_le_bytes());
                out.extend_from_slice(&key.to_le_bytes());
            }
        }
    }

    /// Decodes one tag from the front of `bytes`, returning it and the bytes consumed; `None`
    /// for anything that is not an encoding (short input, unknown kind, non-zero padding).
    pub fn decode(bytes: &[u8]) -> Option<(LockTag, usize)> {
        let mut r = crate::bytes::Reader::new(bytes.get(..Self::ENCODED_LEN)?);
        let tag = match r.u8()? {
            TAG_KIND_RELATION => LockTag::Relation {
                db_oid: r.u32()?,
                rel_oid: Oid(r.u64()?),
            },
            TAG_KIND_TRANSACTION => {
                let xid = Xid(r.u64()?);
                if r.u32()? != 0 {
                    return None;
                }
                LockTag::Transaction { xid }
            }
            kind @ (TAG_KIND_ADVISORY_BIGINT | TAG_KIND_ADVISORY_PAIR) => LockTag::Advisory {
                db_oid: r.u32()?,
                key: r.u64()?,
                pair: kind == TAG_KIND_ADVISORY_PAIR,
            },
            _ => return None,
        };
        Some((tag, Self::ENCODED_LEN))
    }
}

impl fmt::Display for LockTag {
    /// PostgreSQL's wording in lock messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockTag::Relation { db_oid, rel_oid } => {
                write!(f, "relation {rel_oid} of database {db_oid}")
            }
            LockTag::Transaction { xid } => write!(f, "transaction {xid}"),
            // PostgreSQL's DescribeLockTag: database, the key's halves, 1 or 2.
            LockTag::Advisory { db_oid, key, pair } => write!(
                f,
                "advisory lock [{db_oid},{},{},{}]",
                key >> 32,
                key & 0xffff_ffff,
                if *pair { 2 } else { 1 }
            ),
        }
    }
}

/// Who holds locks: a transaction by its process-array slot ([`LockOwner::session`]), a
/// client's session by its process id ([`LockOwner::backend`]: every transaction of the
/// session, and its session-level advisory locks between them), or a prepared transaction
/// ([`LockOwner::prepared`]). Printed as its number (a backend's as its process id), the
/// "process" of lock and deadlock reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockOwner(pub u64);

/// The bit that marks prepared transactions' owners: session slots never reach it, so the
/// two never collide.
const PREPARED_OWNER_BIT: u64 = 1 << 63;
/// The bit that marks client sessions' owners (below it, their process id).
const BACKEND_OWNER_BIT: u64 = 1 << 62;

impl LockOwner {
    /// The owner of the locks of the transaction in process-array slot `proc`.
    pub fn session(proc: ProcId) -> LockOwner {
        debug_assert!(proc.0 & PREPARED_OWNER_BIT == 0, "slot {proc} out of range");
        LockOwner(proc.0)
    }

    /// The owner of the locks of prepared transaction `xid` (a session hands its locks to it
    /// at PREPARE).
    pub fn prepared(xid: Xid) -> LockOwner {
        LockOwner(PREPARED_OWNER_BIT | xid.0)
    }

    /// The owner of the locks of the client session whose process id is `pid` (PostgreSQL's
    /// PGPROC: one per backend, across its transactions).
    pub fn backend(pid: u32) -> LockOwner {
        LockOwner(BACKEND_OWNER_BIT | u64::from(pid))
    }

    /// The process id of a [`LockOwner::backend`] owner.
    pub fn backend_pid(self) -> Option<u32> {
        (self.0 & (PREPARED_OWNER_BIT | BACKEND_OWNER_BIT) == BACKEND_OWNER_BIT)
            .then(|| (self.0 & u64::from(u32::MAX)) as u32)
    }

    /// The transaction id of a [`LockOwner::prepared`] owner.
    pub fn prepared_xid(self) -> Option<Xid> {
        (self.0 & PREPARED_OWNER_BIT != 0).then_some(Xid(self.0 & !PREPARED_OWNER_BIT))
    }
}

impl fmt::Display for LockOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.backend_pid() {
            Some(pid) => write!(f, "{pid}"),
            None => write!(f, "{}", self.0),
        }
    }
}

/// What to do when a lock cannot be granted at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockWait {
    /// Wait until granted (or chosen as a deadlock victim).
    Block,
    /// Fail at once with `LockNotAvailable` (`NOWAIT`).
    NoWait,
    /// Wait at most this many milliseconds, then fail with `LockTimeout` (`lock_timeout`).
    TimeoutMs(u64),
}

/// Whether some mode in `requested` conflicts with some mode in `held`.
pub(super) fn masks_conflict(requested: u8, held: u8) -> bool {
    LockMode::ALL
        .iter()
        .any(|m| requested & m.bit() != 0 && m.conflict_mask() & held != 0)
}
