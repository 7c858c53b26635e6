//! Savepoints: subtransactions (PostgreSQL's SAVEPOINT, ROLLBACK TO SAVEPOINT and RELEASE
//! SAVEPOINT), nested to any depth.
//!
//! A savepoint opens a level. The level gets a subtransaction id at its first write
//! ([`TransactionManager::assign_subxid`](crate::txn::TransactionManager::assign_subxid));
//! the writes made in it are stamped with that id, which stays one of the transaction's own
//! ([`OwnXids`](crate::txn::OwnXids)) while the level lives or was released into its parent.
//!
//! ## Rules
//! - RELEASE merges the level and those inside it into the parent: their ids, locks and
//!   files to drop are the parent's now. No WAL: the commit record names every live
//!   subtransaction id.
//! - ROLLBACK TO aborts the level's ids and those of the levels inside it with one abort
//!   record (redo marks them aborted), releases the locks taken since the savepoint (table
//!   and name locks, as PostgreSQL releases a subtransaction's) and the ids' own
//!   transaction locks (waiters for their rows go on: row locks and
//!   deletions stamped with an aborted id no longer count), forgets the files to drop at
//!   commit since then and drops those the level created; it clears the failed state and
//!   leaves the savepoint open again, as PostgreSQL does.
//! - The names may repeat: the innermost level of that name is meant.

use super::Transaction;
use crate::catalog::TableId;
use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::txn::lock::{LockMode, LockTag};
use crate::types::{RelFileLocator, Xid};

/// Open savepoints at most: far more than any application nests (each costs a copy of the
/// table-lock set).
const MAX_SAVEPOINTS: usize = 100_000;

/// One open savepoint.
pub(super) struct Level {
    name: String,
    /// The level's subtransaction id (invalid until its first write).
    xid: Xid,
    /// The length of the own-id list before `xid` joined it.
    own_at: usize,
    /// The table locks held when the level began.
    locks: FxHashMap<TableId, u16>,
    drop_at_commit_len: usize,
    drop_at_abort_len: usize,
    /// The length of the transaction's lock log when the level began.
    taken_len: usize,
}

/// What a ROLLBACK TO undoes outside the transaction's state.
struct Undo {
    aborted: Vec<Xid>,
    drops: Vec<RelFileLocator>,
    /// The locks taken since the savepoint, in order.
    locks: Vec<(LockTag, LockMode)>,
}

impl Transaction {
    /// SAVEPOINT `name`.
    pub fn savepoint(&self, name: &str) -> Result<()> {
        self.call(|| {
            let mut st = self.st.borrow_mut();
            if st.subs.len() >= MAX_SAVEPOINTS {
                return Err(Error::ProgramLimitExceeded {
                    what: format!("at most {MAX_SAVEPOINTS} savepoints can be open"),
                });
            }
            let level = Level {
                name: name.to_string(),
                xid: Xid::INVALID,
                own_at: 0,
                locks: st.locks.clone(),
                drop_at_commit_len: st.drop_at_commit.len(),
                drop_at_abort_len: st.drop_at_abort.len(),
                taken_len: st.taken.len(),
            };
            st.subs.push(level);
            Ok(())
        })
    }

    /// How many savepoints are open.
    pub fn savepoint_depth(&self) -> usize {
        self.st.borrow().subs.len()
    }

    /// RELEASE SAVEPOINT `name`: the level and those inside it merge into the parent.
    pub fn release_savepoint(&self, name: &str) -> Result<()> {
        self.call(|| {
            let i = self.find_savepoint(name)?;
            let mut st = self.st.borrow_mut();
            st.subs.truncate(i);
            if st.subs.is_empty() {
                st.taken.clear(); // held to the end now
            }
            Ok(())
        })
    }

    /// ROLLBACK TO SAVEPOINT `name`: undoes everything since the savepoint, which stays
    /// open; allowed in a failed transaction, which it makes usable again.
    pub fn rollback_to_savepoint(&self, name: &str) -> Result<()> {
        if self.st.borrow().finished {
            return Err(Error::InvalidTransactionState {
                what: "the transaction has ended".into(),
            });
        }
        self.engine.check_health()?;
        let i = self.find_savepoint(name)?;
        let undo = self.unwind_to(i);
        let r = self.engine.txns.abort_subxacts(&undo.aborted, &undo.drops);
        if let Err(e) = r {
            self.engine.note_failure(&e);
            self.st.borrow_mut().failed = true;
            return Err(e);
        }
        self.release_undone_locks(&undo);
        if self.st.borrow().definitions_changed {
            self.engine.catalog.invalidate();
        }
        Ok(())
    }

    /// The innermost open savepoint named `name`.
    fn find_savepoint(&self, name: &str) -> Result<usize> {
        self.st
            .borrow()
            .subs
            .iter()
            .rposition(|l| l.name == name)
            .ok_or_else(|| Error::NoSuchSavepoint { name: name.into() })
    }

    /// Pops the levels inside savepoint `i` and resets `i` to how it began; returns what is
    /// left to undo.
    fn unwind_to(&self, i: usize) -> Undo {
        let mut st = self.st.borrow_mut();
        st.subs.truncate(i + 1);
        let level = &mut st.subs[i];
        let (xid, own_at) = (level.xid, level.own_at);
        level.xid = Xid::INVALID;
        let saved = level.locks.clone();
        let (commit_len, abort_len) = (level.drop_at_commit_len, level.drop_at_abort_len);
        let taken_len = level.taken_len.min(st.taken.len());
        let aborted = if xid.is_valid() {
            st.own.truncate(own_at)
        } else {
            Vec::new()
        };
        let abort_len = abort_len.min(st.drop_at_abort.len());
        let drops = st.drop_at_abort.split_off(abort_len);
        st.drop_at_commit.truncate(commit_len);
        st.locks = saved;
        let locks = st.taken.split_off(taken_len);
        // Definitions the level changed may be cached: look them up again.
        st.defs.clear();
        st.index_defs.clear();
        st.targets.clear();
        st.failed = false;
        Undo {
            aborted,
            drops,
            locks,
        }
    }

    fn release_undone_locks(&self, undo: &Undo) {
        let locks = &self.engine.locks;
        for &xid in &undo.aborted {
            locks.release(self.owner(), LockTag::Transaction { xid }, LockMode::Exclusive);
        }
        for &(tag, mode) in undo.locks.iter().rev() {
            locks.release(self.owner(), tag, mode);
        }
    }

    /// Gives each open savepoint without a subtransaction id one (outermost first, so ids
    /// ascend with depth) and returns the innermost's, or `top` if none is open.
    pub(super) fn ensure_subxids(&self, top: Xid) -> Result<Xid> {
        if let Some(l) = self.st.borrow().subs.last() {
            if l.xid.is_valid() {
                return Ok(l.xid);
            }
        } else {
            return Ok(top);
        }
        let n = self.st.borrow().subs.len();
        for i in 0..n {
            if self.st.borrow().subs[i].xid.is_valid() {
                continue;
            }
            let sub = self.engine.txns.assign_subxid(self.proc, top)?;
            {
                let mut st = self.st.borrow_mut();
                let own_at = st.own.len();
                st.own.push(sub);
                let level = &mut st.subs[i];
                level.xid = sub;
                level.own_at = own_at;
            }
            self.lock_own_xid(sub)?;
        }
        Ok(self.st.borrow().subs[n - 1].xid)
    }
}
