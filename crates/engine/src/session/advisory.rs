//! Advisory locks (PostgreSQL's `pg_advisory_lock` family): locks on application-chosen
//! keys, in the same lock table as tables' and transactions', so a wait shows in `pg_locks`
//! and a cycle through them is a deadlock like any other.
//!
//! - A transaction-level lock is held to the transaction's end (or to a ROLLBACK TO past
//!   the savepoint before it), as a table lock is.
//! - A session-level lock outlives the transaction that took it; the session's owner
//!   ([`crate::LockOwner::backend`]) keeps it until `pg_advisory_unlock`,
//!   `pg_advisory_unlock_all` or the session's end. Without a session owner, the
//!   transaction's end releases it.
//! - `try` never waits: a lock that cannot be had at once is `false`, not an error.

use super::Transaction;
use crate::catalog::USER_DB;
use crate::error::{Error, Result};
use crate::txn::lock::{LockMode, LockTag, LockWait};

/// An advisory lock's key: one `bigint`, or two `int4`s (PostgreSQL keeps the two apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdvisoryKey {
    Bigint(i64),
    Pair(i32, i32),
}

/// How an advisory lock is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdvisoryRequest {
    pub key: AdvisoryKey,
    /// `_shared` (ShareLock) rather than exclusive (ExclusiveLock).
    pub shared: bool,
    /// Held past the transaction (`pg_advisory_lock`) rather than to its end
    /// (`pg_advisory_xact_lock`).
    pub session: bool,
    /// `pg_try_...`: fail at once instead of waiting.
    pub try_only: bool,
}

impl AdvisoryKey {
    fn tag(self, db_oid: u32) -> LockTag {
        match self {
            AdvisoryKey::Bigint(k) => LockTag::Advisory {
                db_oid,
                key: k as u64,
                pair: false,
            },
            AdvisoryKey::Pair(hi, lo) => LockTag::Advisory {
                db_oid,
                key: (u64::from(hi as u32) << 32) | u64::from(lo as u32),
                pair: true,
            },
        }
    }
}

fn mode(shared: bool) -> LockMode {
    if shared {
        LockMode::Share
    } else {
        LockMode::Exclusive
    }
}

impl Transaction {
    /// Takes an advisory lock; `Ok(false)` when `try_only` and it is not free. Errors: a
    /// deadlock (40P01), `lock_timeout` (55P03), a cancel (57014), a full lock table.
    pub fn advisory_lock(&self, req: AdvisoryRequest) -> Result<bool> {
        let tag = req.key.tag(USER_DB);
        let mode = mode(req.shared);
        let wait = if req.try_only {
            LockWait::NoWait
        } else {
            LockWait::Block
        };
        self.call(|| {
            let r = if req.session {
                let wait = self.effective_wait(wait);
                self.engine
                    .locks
                    .acquire_session(self.owner(), tag, mode, wait)
            } else {
                self.lock(tag, mode, wait)
            };
            match r {
                Err(Error::LockNotAvailable { .. }) if req.try_only => Ok(false),
                r => r.map(|()| true),
            }
        })
    }

    /// Drops one session-level hold of the key (`pg_advisory_unlock`); `false` when the
    /// session holds none (PostgreSQL then warns).
    pub fn advisory_unlock(&self, key: AdvisoryKey, shared: bool) -> bool {
        self.engine
            .locks
            .release_session(self.owner(), key.tag(USER_DB), mode(shared))
    }

    /// Drops every session-level advisory lock of the session (`pg_advisory_unlock_all`).
    pub fn advisory_unlock_all(&self) {
        self.engine.locks.release_session_all(self.owner());
    }
}
