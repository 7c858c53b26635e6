//! Session-level holds: the advisory locks a client session takes with `pg_advisory_lock`,
//! which outlive the transaction that took them (PostgreSQL's `sessionLock`).
//!
//! A session-level hold is an ordinary hold of the owner, counted a second time in
//! `Hold::session`, so conflicts, queues and the deadlock check see it as any other.
//! [`LockManager::release_all`] (a transaction's end) and [`LockManager::transfer_all`]
//! (PREPARE) leave it; only [`LockManager::release_session`] and
//! [`LockManager::release_session_all`] end it. Relations are never locked at session level
//! (their weak modes live on the fast path, which counts no session holds).

use super::{Hold, LockManager, LockMode, LockOwner, LockTag, LockWait, Partition};
use crate::error::{Error, Result};

impl LockManager {
    /// Takes `mode` on `tag` for `owner` at session level, waiting as `wait` says (errors as
    /// [`LockManager::acquire`]'s).
    pub fn acquire_session(
        &self,
        owner: LockOwner,
        tag: LockTag,
        mode: LockMode,
        wait: LockWait,
    ) -> Result<()> {
        if tag.is_relation() {
            return Err(Error::InvalidTransactionState {
                what: format!("{tag} cannot be locked at session level"),
            });
        }
        self.acquire(owner, tag, mode, wait)?;
        let mut guard = self.partition(&tag);
        if let Some(hold) = guard
            .locks
            .get_mut(&tag)
            .and_then(|e| e.holders.get_mut(&owner))
        {
            let m = mode.index();
            // The acquire just added a hold, so there is one more than the session's.
            hold.session[m] = hold.session[m].saturating_add(1).min(hold.counts[m]);
        }
        Ok(())
    }

    /// Drops one session-level hold of `mode` on `tag`; `false` if `owner` has none
    /// (PostgreSQL's `pg_advisory_unlock` then warns and returns false).
    pub fn release_session(&self, owner: LockOwner, tag: LockTag, mode: LockMode) -> bool {
        let mut guard = self.partition(&tag);
        let part = &mut *guard;
        let Some(entry) = part.locks.get_mut(&tag) else {
            return false;
        };
        let one = |h: &Hold| {
            let mut taken = [0; 8];
            taken[mode.index()] = h.session[mode.index()].min(1);
            taken
        };
        let Some((taken, freed, gone)) = entry.take_holds(owner, one, true) else {
            return false;
        };
        self.after_take(part, owner, tag, freed, gone);
        taken[mode.index()] == 1
    }

    /// Drops every session-level hold of `owner` (`pg_advisory_unlock_all`, and a session's
    /// end); its transaction-level holds stay.
    pub fn release_session_all(&self, owner: LockOwner) {
        for tag in self.tags_of(owner) {
            let mut guard = self.partition(&tag);
            let part = &mut *guard;
            let Some(entry) = part.locks.get_mut(&tag) else {
                continue;
            };
            if let Some((_, freed, gone)) = entry.take_session_holds(owner) {
                self.after_take(part, owner, tag, freed, gone);
            }
        }
    }

    /// A tag `owner` holds both at session and at transaction level, if any: PREPARE
    /// refuses such a transaction, as PostgreSQL does (the prepared transaction would take
    /// the lock from the session).
    pub fn held_at_both_levels(&self, owner: LockOwner) -> Option<LockTag> {
        let mut tags = self.tags_of(owner);
        tags.sort_unstable();
        tags.into_iter().find(|tag| {
            self.partition(tag)
                .locks
                .get(tag)
                .and_then(|e| e.holders.get(&owner))
                .is_some_and(|h| h.has_session() && h.xact_counts().iter().any(|&n| n > 0))
        })
    }

    /// After holds were taken off `tag`'s entry in `part`: wakes whoever can now go when a
    /// mode was freed, unfiles the tag from `owner` when it holds nothing there any more,
    /// and drops the entry if it is empty.
    fn after_take(&self, part: &mut Partition, owner: LockOwner, tag: LockTag, freed: bool, gone: bool) {
        if let Some(entry) = part.locks.get_mut(&tag) {
            if freed && !entry.queue.is_empty() {
                self.wake_waiters(entry);
            }
        }
        if gone {
            self.forget(owner, tag);
        }
        part.discard_if_empty(tag);
    }
}
