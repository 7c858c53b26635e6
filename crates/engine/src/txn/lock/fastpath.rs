//! The fast path for weak table locks (PostgreSQL's `FastPathGrantRelationLock` and
//! `FastPathTransferRelationLocks`).
//!
//! Nearly every statement takes AccessShare, RowShare or RowExclusive on its tables, and the
//! three never conflict with one another. Granting them in the table costs a partition mutex
//! that every session using the table shares, the table's entry and the shared capacity
//! count, all cache lines that move between CPUs on every statement. Measured with pgbench
//! `-S -M prepared -c4 -j2` on 2 CPUs: skipping the AccessShare lock altogether (a throwaway
//! build) gave 6-14% more transactions per second and 1.5-2 µs less server CPU per
//! transaction. The fast path keeps the lock and most of that gain.
//!
//! ## How
//! - A weak mode on a relation is filed in the owner's *group* (one of [`FAST_GROUPS`]
//!   mutexes, chosen by owner; owners are numbered consecutively, so concurrent sessions
//!   seldom share one), at most [`FAST_PER_OWNER`] relations per owner, when no strong lock
//!   is held or awaited on the relation: `strong[slot(tag)]` is zero. Otherwise, or when the
//!   owner has no fast slot left, it goes to the table as before.
//! - A strong mode (Share and up, but not ShareUpdateExclusive) on a relation first
//!   increments `strong[slot(tag)]`, then visits every group and moves the fast holds on the
//!   relation into the table, then asks the table. The count stays up while the request
//!   waits and while the mode is held; release, `release_all` and a failed acquire take it
//!   down. Slots are shared by hash: a collision only sends weak locks to the table.
//!
//! ## Why it is correct
//! - A weak request reads the count while holding its group; the strong request increments
//!   before it takes each group. So either the weak hold was filed before the strong request
//!   visited that group (and was moved into the table), or the weak request saw the count
//!   and went to the table. Once a strong mode is granted or queued, every weak hold on the
//!   relation is in the table, where the grant rule and the deadlock check see it.
//! - Fast holds never conflict with each other, never wait, and never block a request that
//!   is not strong, so the deadlock check needs nothing from the groups.
//!
//! ## Rules
//! - Lock order: a group, then table partitions, then an owner partition. At most one group
//!   at a time, except in `check_invariants`, which takes them all in ascending order before
//!   the partitions.
//! - Fast holds do not count against the table's capacity (as in PostgreSQL).
//! - A prepared transaction's locks are all in the table: `transfer_all` moves the session's
//!   fast holds there.

use std::sync::atomic::Ordering;

use parking_lot::MutexGuard;

use super::mode::{WEAK_MODES, WEAK_MODE_COUNT};
use super::{LockManager, LockMode, LockOwner, LockTag, Partition};
use crate::hash::{hash_one, FxHashMap};

/// Fast-path groups: enough that concurrent sessions seldom share one.
pub(super) const FAST_GROUPS: usize = 64;
/// Relations one owner may lock on the fast path (PostgreSQL's `FP_LOCK_SLOTS_PER_BACKEND`).
pub(super) const FAST_PER_OWNER: usize = 16;
/// Strong-lock counters, by relation hash (PostgreSQL's
/// `FAST_PATH_STRONG_LOCK_HASH_PARTITIONS`).
pub(super) const STRONG_SLOTS: usize = 1024;

/// One owner's weak holds on one relation, filed outside the table.
#[derive(Clone, Copy, Debug)]
pub(super) struct FastHold {
    pub(super) owner: LockOwner,
    pub(super) tag: LockTag,
    /// Hold counts of AccessShare, RowShare, RowExclusive.
    pub(super) counts: [u32; WEAK_MODE_COUNT],
}

/// The fast holds of the owners of one group. Bounded: [`FAST_PER_OWNER`] per owner, and
/// an owner is a running transaction or a prepared one.
#[derive(Debug, Default)]
pub(super) struct FastGroup {
    pub(super) holds: Vec<FastHold>,
}

pub(super) fn fast_group_of(owner: LockOwner) -> usize {
    (owner.0 % FAST_GROUPS as u64) as usize
}

pub(super) fn strong_slot(tag: &LockTag) -> usize {
    (hash_one(tag) % STRONG_SLOTS as u64) as usize
}

/// The number of strong holds in `counts` (per-mode hold counts of one owner on one tag).
pub(super) fn strong_holds(counts: &[u32; 8]) -> u32 {
    LockMode::ALL
        .iter()
        .filter(|m| m.is_strong())
        .fold(0u32, |n, m| n.saturating_add(counts[m.index()]))
}

impl LockManager {
    fn fast_group(&self, owner: LockOwner) -> MutexGuard<'_, FastGroup> {
        self.fast[fast_group_of(owner)].0.lock()
    }

    /// Grants a weak `mode` on relation `tag` on the fast path; `false` when the table must
    /// decide (a strong lock is held or awaited there, or the owner's fast slots are full).
    pub(super) fn acquire_fast(&self, owner: LockOwner, tag: LockTag, mode: LockMode) -> bool {
        debug_assert!(mode.is_weak() && tag.is_relation());
        let mut group = self.fast_group(owner);
        // Read under the group's mutex: see "Why it is correct" in the module header.
        if self.strong[strong_slot(&tag)].load(Ordering::SeqCst) != 0 {
            return false;
        }
        let mut filed = 0usize;
        for hold in group.holds.iter_mut().filter(|h| h.owner == owner) {
            if hold.tag == tag {
                let count = &mut hold.counts[mode.index()];
                // At the limit the table takes the request (and refuses it there).
                if *count == u32::MAX {
                    return false;
                }
                *count += 1;
                return true;
            }
            filed += 1;
        }
        if filed >= FAST_PER_OWNER {
            return false;
        }
        let mut counts = [0; WEAK_MODE_COUNT];
        counts[mode.index()] = 1;
        group.holds.push(FastHold { owner, tag, counts });
        true
    }

    /// Drops one fast hold of weak `mode` on `tag`; `false` if there is none.
    pub(super) fn release_fast(&self, owner: LockOwner, tag: LockTag, mode: LockMode) -> bool {
        let mut group = self.fast_group(owner);
        let Some(at) = group
            .holds
            .iter()
            .position(|h| h.owner == owner && h.tag == tag && h.counts[mode.index()] > 0)
        else {
            return false;
        };
        let hold = &mut group.holds[at];
        hold.counts[mode.index()] -= 1;
        if hold.counts == [0; WEAK_MODE_COUNT] {
            group.holds.swap_remove(at);
        }
        true
    }

    /// Drops every fast hold of `owner`.
    pub(super) fn release_all_fast(&self, owner: LockOwner) {
        self.fast_group(owner).holds.retain(|h| h.owner != owner);
    }

    /// Whether `owner` holds weak `mode` on `tag` on the fast path.
    pub(super) fn holds_fast(&self, owner: LockOwner, tag: LockTag, mode: LockMode) -> bool {
        self.fast_group(owner)
            .holds
            .iter()
            .any(|h| h.owner == owner && h.tag == tag && h.counts[mode.index()] > 0)
    }

    /// The (tag, mode) pairs `owner` holds on the fast path.
    pub(super) fn locks_of_fast(&self, owner: LockOwner) -> Vec<(LockTag, LockMode)> {
        let group = self.fast_group(owner);
        let mut out = Vec::new();
        for hold in group.holds.iter().filter(|h| h.owner == owner) {
            out.extend(
                LockMode::ALL[..WEAK_MODE_COUNT]
                    .iter()
                    .filter(|m| hold.counts[m.index()] > 0)
                    .map(|&m| (hold.tag, m)),
            );
        }
        out
    }

    /// A strong request on relation `tag` is coming: count it, then move every fast hold on
    /// `tag` into the table. The caller calls [`LockManager::strong_done`] if the request
    /// fails, and the release of the mode does when it succeeded.
    pub(super) fn announce_strong(&self, tag: LockTag) {
        self.strong[strong_slot(&tag)].fetch_add(1, Ordering::SeqCst);
        for group in &self.fast {
            let mut group = group.0.lock();
            if !group.holds.iter().any(|h| h.tag == tag) {
                continue;
            }
            let mut part = self.partition(&tag);
            group.holds.retain(|h| {
                if h.tag != tag {
                    return true;
                }
                self.merge_fast_hold(&mut part, h.owner, h);
                false
            });
        }
    }

    /// Takes `n` strong holds or requests on relation `tag` off the count.
    pub(super) fn strong_done(&self, tag: &LockTag, n: u32) {
        if n == 0 || !tag.is_relation() {
            return;
        }
        // Saturating: a bug must not wrap the count and send every weak lock to the table
        // for good (or, worse, none).
        let _ = self.strong[strong_slot(tag)].fetch_update(
            Ordering::SeqCst,
            Ordering::SeqCst,
            |c| Some(c.saturating_sub(n)),
        );
    }

    /// PREPARE: `from`'s fast holds become `to`'s holds in the table. The caller holds
    /// `from`'s group (taken before `guards`, every partition in order).
    pub(super) fn move_fast_holds(
        &self,
        group: &mut FastGroup,
        guards: &mut [MutexGuard<'_, Partition>],
        from: LockOwner,
        to: LockOwner,
    ) {
        group.holds.retain(|h| {
            if h.owner != from {
                return true;
            }
            let part = &mut *guards[super::tag_partition(&h.tag)];
            self.merge_fast_hold(part, to, h);
            false
        });
    }

    /// Files `hold`'s counts as `owner`'s holds on `hold.tag` in the table. Cannot fail: the
    /// entry may overshoot the capacity, as a transfer does (see "Capacity" in the header).
    fn merge_fast_hold(&self, part: &mut Partition, owner: LockOwner, hold: &FastHold) {
        let mut counts = [0u32; 8];
        counts[..WEAK_MODE_COUNT].copy_from_slice(&hold.counts);
        let entry = part.entry_mut(hold.tag);
        self.merge_holds(entry, owner, hold.tag, &counts);
    }

    /// The fast-path part of `check_invariants`, with every group and every partition held:
    /// fast holds are weak holds on relations, filed in their owner's group once per
    /// relation, within the per-owner limit; none conflicts with a hold of another owner in
    /// the table; and each strong counter covers at least the strong holds and requests in
    /// the table.
    pub(super) fn check_fast(
        &self,
        groups: &[MutexGuard<'_, FastGroup>],
        guards: &[MutexGuard<'_, Partition>],
    ) -> Result<(), String> {
        for (g, group) in groups.iter().enumerate() {
            let mut seen: FxHashMap<LockOwner, usize> = FxHashMap::default();
            for h in &group.holds {
                if fast_group_of(h.owner) != g || !h.tag.is_relation() {
                    return Err(format!("fast hold of {} on {} is misfiled", h.owner, h.tag));
                }
                if h.counts == [0; WEAK_MODE_COUNT] {
                    return Err(format!("fast hold of {} on {} holds nothing", h.owner, h.tag));
                }
                let filed = seen.entry(h.owner).or_default();
                *filed += 1;
                if *filed > FAST_PER_OWNER
                    || group
                        .holds
                        .iter()
                        .filter(|o| o.owner == h.owner && o.tag == h.tag)
                        .count()
                        > 1
                {
                    return Err(format!("owner {} files {} fast holds wrongly", h.owner, h.tag));
                }
                let entry = guards[super::tag_partition(&h.tag)].locks.get(&h.tag);
                let mine = (0..WEAK_MODE_COUNT)
                    .filter(|&m| h.counts[m] > 0)
                    .fold(0u8, |mask, m| mask | 1 << m);
                debug_assert_eq!(mine & !WEAK_MODES, 0);
                let conflicting = entry.is_some_and(|e| {
                    e.holders
                        .iter()
                        .any(|(&o, hold)| o != h.owner && super::masks_conflict(mine, hold.mask()))
                });
                if conflicting {
                    return Err(format!(
                        "fast hold of {} on {} conflicts with a hold in the table",
                        h.owner, h.tag
                    ));
                }
            }
        }
        let mut strong_in_table = vec![0u64; STRONG_SLOTS];
        for guard in guards {
            for (tag, entry) in guard.locks.iter().filter(|(t, _)| t.is_relation()) {
                let holds: u64 = entry
                    .holders
                    .values()
                    .map(|h| u64::from(strong_holds(&h.counts)))
                    .sum();
                let waits = entry.queue.iter().filter(|w| w.mode.is_strong()).count() as u64;
                strong_in_table[strong_slot(tag)] += holds + waits;
            }
        }
        for (slot, &n) in strong_in_table.iter().enumerate() {
            let counted = u64::from(self.strong[slot].load(Ordering::SeqCst));
            if counted < n {
                return Err(format!(
                    "strong-lock slot {slot} counts {counted}, the table has {n}"
                ));
            }
        }
        Ok(())
    }
}
