//! # txn::lock — table-level (heavyweight) locks and deadlock detection
//!
//! The lock manager owns the lock table: for every locked [`LockTag`] (a table, a
//! transaction id, or an advisory key), which [`LockOwner`]s hold which [`LockMode`]s how
//! many times, and who waits
//! for it in what order. It implements PostgreSQL's eight table lock modes with PostgreSQL's
//! conflict table, counted re-entrant holds, FIFO queues with PostgreSQL's grant rule, waits on
//! condition variables, the deadlock check after `deadlock_timeout`, a bounded table
//! (`max_locks_per_transaction * (max_connections + max_prepared_transactions)`), and the hand-over
//! of all locks of a transaction to its prepared twin (2PC).
//!
//! ## Rules for callers
//! - Every transaction holds `LockTag::Transaction { xid }` in [`LockMode::Exclusive`] from its
//!   first write to its end, and releases it (with everything else) by
//!   [`LockManager::release_all`] at commit or abort.
//! - To wait for a row that transaction `xid` changed, take `Transaction { xid }` in
//!   [`LockMode::Share`] and release it at once: that wait is what makes row-lock waits
//!   visible to the deadlock check.
//! - A deadlock victim gets [`Error::Deadlock`] with its queue entry removed and its held locks
//!   untouched: the caller aborts the transaction, which calls `release_all`.
//! - `PREPARE TRANSACTION` calls [`LockManager::transfer_all`] from the session's owner to the
//!   prepared transaction's owner; `COMMIT/ROLLBACK PREPARED` calls `release_all` on the latter.
//! - Advisory keys may be held at session level ([`LockManager::acquire_session`],
//!   `session.rs`): such a hold survives `release_all` and `transfer_all` and ends only by
//!   `release_session` / `release_session_all`. Relations are never held at session level.
//! - An owner is driven by one thread at a time and waits for one lock at a time; a second
//!   concurrent wait by the same owner is refused (`InvalidTransactionState`).
//! - Never wait for a lock (`Block`, `TimeoutMs`) while holding a buffer pin's content lock, a
//!   WAL insertion slot or any other engine mutex: the deadlock check sees only this table, so
//!   such a wait could hang undetected (PostgreSQL's rule for LWLocks).
//!
//! ## Grant rule (PostgreSQL's `LockAcquire` + `LockCheckConflicts`)
//! A request is granted at once when its mode conflicts with no mode held by *other* owners
//! and no request already queued on the tag conflicts with it, except that an owner which
//! already holds some mode on the tag skips the queue check (so an upgrade never waits behind
//! a waiter that waits for the upgrader). Otherwise the request is queued at the tail. When
//! locks are released (or a waiter leaves), the queue is granted in order as far as it can go,
//! with the same rule: a waiter is blocked by conflicting holds of others, and, unless it holds
//! something on the tag itself, by any conflicting request still waiting ahead of it. After
//! every change no queued request is grantable; [`LockManager::check_invariants`] verifies that
//! (a lost wake-up would show there).
//!
//! ## Deadlock detection
//! A waiter sleeps on its own condition variable. After `deadlock_timeout` it runs the check,
//! and, if there is no deadlock, again after every further `deadlock_timeout` (PostgreSQL checks
//! once; re-checking is cheap and catches a cycle that closes later through an earlier
//! waiter's new wait). The check locks every partition in ascending order (as PostgreSQL does),
//! then walks the wait-for graph depth-first from the waiter W: an owner O waiting for mode M on
//! tag T has a *hard* edge to every other owner holding a mode on T that conflicts with M, and,
//! when O holds nothing on T, a *soft* edge to every owner queued ahead of it on T whose
//! request conflicts with M — exactly the things that keep O waiting. A path back to W makes W
//! the victim: W leaves the queue (waking whoever can now go) and gets `Error::Deadlock` whose
//! detail has one line per member of the cycle, in PostgreSQL's words
//! (`Process 7 waits for ShareLock on transaction 1234; blocked by process 9.`). Checks are
//! serialized by the partition locks, so of the members of one cycle exactly one is the victim:
//! the first to check; the cycle is gone for the others. Unlike PostgreSQL, soft edges are never
//! resolved by rearranging a queue: a cycle through a soft edge also makes its checker the victim.
//!
//! ## The fast path for weak table locks
//! AccessShare, RowShare and RowExclusive on a table (what SELECT, SELECT FOR UPDATE and DML
//! take, and which never conflict with one another) are granted outside the table, in the
//! owner's fast-path group, unless a strong mode (Share and up, ShareUpdateExclusive excepted)
//! is held or awaited on the table; a strong request first moves every fast hold on the table
//! into the table. PostgreSQL's fast-path locking; the rules and why they are enough are in
//! `fastpath.rs`. Callers see no difference: `holds`, `locks_of`, `release`, `release_all`
//! and `transfer_all` cover both places.
//!
//! ## Structure and lock order
//! The table is split into [`LOCK_PARTITIONS`] partitions by tag hash, each a mutex over a map
//! `tag → entry` (holders with per-mode hold counts, a count of holders per mode so the conflict
//! check costs eight additions, and the FIFO queue). A second map, split into
//! [`OWNER_PARTITIONS`] by owner, files per owner the tags it holds or waits on and what it
//! waits for, so `release_all`, `transfer_all`, `locks_of` and the deadlock check never scan
//! the table. Lock order: a fast-path group (one at a time; all of them, in ascending order,
//! only in `check_invariants`) → tag partitions (several only in ascending index) → at most
//! one owner partition at a time, which is a leaf (nothing is locked while holding it). An
//! owner's bookkeeping for tag T changes only while T's partition is held, so holding every
//! tag partition gives a consistent picture of both maps. In the table, an uncontended
//! acquire and its release cost two short mutex sections each, map look-ups with a fast hash,
//! and one shared atomic for the capacity count (taken only when a new (owner, tag) entry
//! appears); emptied entries are recycled, so the steady state allocates nothing.
//!
//! ## Files
//! `mode.rs`: the modes, the conflict table, the tags and their encoding; `mod.rs`: the table
//! and the grant rule; `fastpath.rs`: weak table locks outside the table; `deadlock.rs`: the
//! deadlock check; `invariants.rs`: the checks of the table's invariants.
//!
//! ## Capacity
//! At most `capacity` (owner, tag) entries exist at once in the table: an owner holding
//! several modes on a tag, or holding and waiting on it, is one entry; a waiter's queue entry
//! counts. Beyond, an acquire gets `OutOfSharedMemory` and the table is left as it was. Every
//! queue is bounded by the capacity too. Fast-path holds are outside the table and bounded per
//! owner instead (as in PostgreSQL). Moves into the table cannot fail and may overshoot:
//! `transfer_all` by the entries of a waiting `from` (an edge case; PREPARE never waits) and
//! by `from`'s fast holds, a strong request by the fast holds on its table (at most one per
//! owner).
//!
//! ## Never
//! Never calls into the buffer pool, the WAL or any other subsystem, at all, so none of their
//! locks can be taken while a partition mutex is held; never sleeps holding a partition mutex
//! (waiting releases it); never busy-waits; never panics on any input; never rearranges queues.

mod deadlock;
mod fastpath;
mod invariants;
mod mode;
mod session;
mod status;
#[cfg(test)]
mod tests;

use std::collections::hash_map::Entry;
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::hash::{hash_one, FxBuildHasher, FxHashMap};
use crate::padded::{CachePadded, StripedCounter};
use fastpath::{strong_holds, FastGroup, FAST_GROUPS, STRONG_SLOTS};
use mode::masks_conflict;
pub use mode::{LockMode, LockOwner, LockTag, LockWait};
pub use status::LockStatus;

type FxHashSet<T> = HashSet<T, FxBuildHasher>;

/// Partitions of the lock table (PostgreSQL's `NUM_LOCK_PARTITIONS`).
pub const LOCK_PARTITIONS: usize = 16;
/// Partitions of the per-owner index.
pub const OWNER_PARTITIONS: usize = 16;
/// Emptied entries kept per partition for reuse, so the hot path does not allocate.
const SPARE_ENTRIES: usize = 32;
/// A recycled entry whose maps grew beyond this is dropped instead, to give the memory back.
const SPARE_MAX_CAPACITY: usize = 64;
/// The shortest `deadlock_timeout` honoured: zero would re-run the check in a tight loop.
const MIN_DEADLOCK_TIMEOUT: Duration = Duration::from_millis(1);

/// Counters of the lock manager's work, for tests and monitoring.
#[derive(Debug, Default)]
pub struct LockStats {
    /// Successful acquisitions (at once or after a wait).
    pub acquired: StripedCounter,
    /// Of those, weak locks granted on the fast path, outside the table.
    pub fast_path: StripedCounter,
    /// Requests that had to queue.
    pub waits: AtomicU64,
    /// Deadlock checks run.
    pub deadlock_checks: AtomicU64,
    /// Deadlocks found (victims chosen).
    pub deadlocks: AtomicU64,
}

// ------------------------------------------------------------------------------ table entries

/// One owner's holds on one tag: how many times it holds each mode, and how many of those
/// are session-level (advisory locks a client session keeps past its transactions' ends).
#[derive(Clone, Copy, Debug, Default)]
struct Hold {
    counts: [u32; 8],
    /// `session[m] <= counts[m]`: the holds of mode `m` that only [`LockManager::release_session`]
    /// and [`LockManager::release_session_all`] release.
    session: [u32; 8],
}

impl Hold {
    /// The transaction-level holds: each mode's count less its session-level ones.
    fn xact_counts(&self) -> [u32; 8] {
        let mut out = [0; 8];
        for (m, slot) in out.iter_mut().enumerate() {
            *slot = self.counts[m].saturating_sub(self.session[m]);
        }
        out
    }

    fn has_session(&self) -> bool {
        self.session.iter().any(|&c| c > 0)
    }

    /// The modes held at least once.
    fn mask(&self) -> u8 {
        let mut mask = 0;
        for (m, &count) in self.counts.iter().enumerate() {
            if count > 0 {
                mask |= 1 << m;
            }
        }
        mask
    }
}

/// Where a waiting thread sleeps; `granted` is written under the tag's partition mutex by
/// whoever grants the request, and read by the waiter under the same mutex.
struct WaitSlot {
    granted: AtomicBool,
    /// Set by [`LockManager::cancel_wait`]: the waiter withdraws and fails with 57014.
    cancelled: AtomicBool,
    cv: Condvar,
}

struct Waiter {
    owner: LockOwner,
    mode: LockMode,
    slot: Arc<WaitSlot>,
}

/// One locked tag.
#[derive(Default)]
struct LockEntry {
    holders: FxHashMap<LockOwner, Hold>,
    /// `holders_of_mode[m]`: how many owners hold mode `m` at least once. With it, "does any
    /// other owner hold a conflicting mode" costs eight subtractions, however many hold.
    holders_of_mode: [usize; 8],
    /// Requests waiting, first come first; bounded by the table capacity.
    queue: VecDeque<Waiter>,
}

impl LockEntry {
    fn is_empty(&self) -> bool {
        self.holders.is_empty() && self.queue.is_empty()
    }

    /// The modes held by owners other than `owner`.
    fn others_mask(&self, owner: LockOwner) -> u8 {
        let own = self.holders.get(&owner).map_or(0, Hold::mask);
        let mut mask = 0;
        for (m, &n) in self.holders_of_mode.iter().enumerate() {
            let others = n.saturating_sub(usize::from(own & (1 << m) != 0));
            if others > 0 {
                mask |= 1 << m;
            }
        }
        mask
    }

    /// The modes requested by everyone queued.
    fn queued_mask(&self) -> u8 {
        self.queue.iter().fold(0, |mask, w| mask | w.mode.bit())
    }

    /// Whether `owner`'s request for `mode` must wait, given `ahead`, the modes requested by
    /// the waiters queued before it (ignored when `owner` already holds something here).
    fn blocked(&self, owner: LockOwner, mode: LockMode, ahead: u8) -> bool {
        let held_by_others = self.others_mask(owner);
        let is_holder = self.holders.contains_key(&owner);
        mode.conflict_mask() & held_by_others != 0
            || (!is_holder && mode.conflict_mask() & ahead != 0)
    }

    /// Adds one hold of `mode` for `owner`. Saturates instead of overflowing: callers refuse
    /// a request at `u32::MAX` holds before getting here.
    fn add_hold(&mut self, owner: LockOwner, mode: LockMode) {
        let hold = self.holders.entry(owner).or_default();
        let count = &mut hold.counts[mode.index()];
        if *count == 0 {
            self.holders_of_mode[mode.index()] += 1;
        }
        *count = count.saturating_add(1);
    }

    /// Removes `owner`'s transaction-level holds, keeping its session-level ones. Returns the
    /// counts removed (`None` if `owner` holds nothing here), whether a mode was freed (a
    /// waiter may go), and whether the owner holds nothing here any more.
    fn take_xact_holds(&mut self, owner: LockOwner) -> Option<([u32; 8], bool, bool)> {
        self.take_holds(owner, Hold::xact_counts, false)
    }

    /// Removes `owner`'s session-level holds (its transaction-level ones stay), as
    /// [`LockEntry::take_xact_holds`] reports.
    fn take_session_holds(&mut self, owner: LockOwner) -> Option<([u32; 8], bool, bool)> {
        self.take_holds(owner, |h| h.session, true)
    }

    /// Removes `pick(hold)[m]` holds of each mode `m` from `owner`'s (at most what it holds;
    /// taken from its session-level ones too when `session`), with one look-up of the owner:
    /// the counts taken, whether a mode was freed, whether the owner holds nothing any more.
    fn take_holds(
        &mut self,
        owner: LockOwner,
        pick: impl Fn(&Hold) -> [u32; 8],
        session: bool,
    ) -> Option<([u32; 8], bool, bool)> {
        let Entry::Occupied(mut slot) = self.holders.entry(owner) else {
            return None;
        };
        let hold = slot.get_mut();
        let taken = pick(hold);
        let mut freed = false;
        for (m, &n) in taken.iter().enumerate() {
            if n == 0 {
                continue;
            }
            debug_assert!(hold.counts[m] >= n && (!session || hold.session[m] >= n));
            hold.counts[m] = hold.counts[m].saturating_sub(n);
            if session {
                hold.session[m] = hold.session[m].saturating_sub(n);
            }
            if hold.counts[m] == 0 {
                self.holders_of_mode[m] = self.holders_of_mode[m].saturating_sub(1);
                freed = true;
            }
        }
        let gone = hold.mask() == 0;
        if gone {
            slot.remove();
        }
        Some((taken, freed, gone))
    }

    /// Owners a waiter `owner` (waiting for `mode` here) waits for: the wait-for graph's edges.
    fn blockers(&self, owner: LockOwner, mode: LockMode) -> Vec<LockOwner> {
        let mut out: Vec<LockOwner> = self
            .holders
            .iter()
            .filter(|&(&h, hold)| h != owner && mode.conflict_mask() & hold.mask() != 0)
            .map(|(&h, _)| h)
            .collect();
        if !self.holders.contains_key(&owner) {
            out.extend(
                self.queue
                    .iter()
                    .take_while(|w| w.owner != owner)
                    .filter(|w| mode.conflicts_with(w.mode))
                    .map(|w| w.owner),
            );
        }
        // Deterministic order, so the same graph gives the same detail.
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// One partition of the lock table.
#[derive(Default)]
struct Partition {
    locks: FxHashMap<LockTag, LockEntry>,
    /// Emptied entries, reused to keep allocation off the hot path.
    spare: Vec<LockEntry>,
}

impl Partition {
    /// The entry of `tag`, created (from a spare if any) when absent.
    fn entry_mut(&mut self, tag: LockTag) -> &mut LockEntry {
        let spare = &mut self.spare;
        self.locks
            .entry(tag)
            .or_insert_with(|| spare.pop().unwrap_or_default())
    }

    /// Drops the entry of `tag` if nobody holds or waits for it any more.
    fn discard_if_empty(&mut self, tag: LockTag) {
        if !self.locks.get(&tag).is_some_and(LockEntry::is_empty) {
            return;
        }
        let Some(mut entry) = self.locks.remove(&tag) else {
            return;
        };
        if self.spare.len() < SPARE_ENTRIES
            && entry.holders.capacity() <= SPARE_MAX_CAPACITY
            && entry.queue.capacity() <= SPARE_MAX_CAPACITY
        {
            entry.holders_of_mode = [0; 8];
            self.spare.push(entry);
        }
    }
}

/// An owner's bookkeeping.
#[derive(Default)]
struct OwnerEntry {
    /// Every tag this owner holds some mode on or waits on: its (owner, tag) entries.
    tags: FxHashSet<LockTag>,
    /// The one request this owner waits for, if any.
    waiting: Option<(LockTag, LockMode)>,
}

impl OwnerEntry {
    fn is_empty(&self) -> bool {
        self.tags.is_empty() && self.waiting.is_none()
    }
}

#[derive(Default)]
struct OwnerPartition {
    owners: FxHashMap<LockOwner, OwnerEntry>,
    spare: Vec<OwnerEntry>,
}

impl OwnerPartition {
    fn entry_mut(&mut self, owner: LockOwner) -> &mut OwnerEntry {
        let spare = &mut self.spare;
        self.owners
            .entry(owner)
            .or_insert_with(|| spare.pop().unwrap_or_default())
    }

    /// Drops `owner`'s entry if it files nothing any more.
    fn discard_if_empty(&mut self, owner: LockOwner) {
        if !self.owners.get(&owner).is_some_and(OwnerEntry::is_empty) {
            return;
        }
        let Some(entry) = self.owners.remove(&owner) else {
            return;
        };
        if self.spare.len() < SPARE_ENTRIES && entry.tags.capacity() <= SPARE_MAX_CAPACITY {
            self.spare.push(entry);
        }
    }
}

fn tag_partition(tag: &LockTag) -> usize {
    (hash_one(tag) % LOCK_PARTITIONS as u64) as usize
}

fn owner_partition(owner: LockOwner) -> usize {
    (hash_one(&owner) % OWNER_PARTITIONS as u64) as usize
}

// ------------------------------------------------------------------------------ the manager

/// The lock table. See the module header for the rules.
pub struct LockManager {
    partitions: Box<[CachePadded<Mutex<Partition>>]>,
    owners: Box<[CachePadded<Mutex<OwnerPartition>>]>,
    /// Weak relation locks held outside the table, by owner group (`fastpath.rs`).
    fast: Box<[CachePadded<Mutex<FastGroup>>]>,
    /// Strong relation locks held or requested, by relation hash (`fastpath.rs`).
    strong: Box<[AtomicU32]>,
    capacity: usize,
    /// (owner, tag) entries in use; changed only under the tag's partition mutex, so it equals
    /// the table's count whenever every partition is held.
    entries_used: AtomicUsize,
    deadlock_timeout: Duration,
    stats: LockStats,
}

impl LockManager {
    /// A lock table of at most `capacity` (owner, tag) entries, running the deadlock check
    /// after a waiter has waited `deadlock_timeout` (at least 1 ms is honoured).
    pub fn new(capacity: usize, deadlock_timeout: Duration) -> Self {
        LockManager {
            partitions: (0..LOCK_PARTITIONS).map(|_| CachePadded::default()).collect(),
            owners: (0..OWNER_PARTITIONS).map(|_| CachePadded::default()).collect(),
            fast: (0..FAST_GROUPS).map(|_| CachePadded::default()).collect(),
            strong: (0..STRONG_SLOTS).map(|_| AtomicU32::new(0)).collect(),
            capacity,
            entries_used: AtomicUsize::new(0),
            deadlock_timeout: deadlock_timeout.max(MIN_DEADLOCK_TIMEOUT),
            stats: LockStats::default(),
        }
    }

    /// A lock table sized and timed by `config` (`lock_table_capacity()`,
    /// `deadlock_timeout_ms`).
    pub fn from_config(config: &Config) -> Self {
        Self::new(
            config.lock_table_capacity(),
            Duration::from_millis(config.deadlock_timeout_ms),
        )
    }

    fn partition(&self, tag: &LockTag) -> MutexGuard<'_, Partition> {
        self.partitions[tag_partition(tag)].0.lock()
    }

    fn owner_part(&self, owner: LockOwner) -> MutexGuard<'_, OwnerPartition> {
        self.owners[owner_partition(owner)].0.lock()
    }

    /// Every tag partition, locked in ascending order (the only order taking several).
    fn lock_all(&self) -> Vec<MutexGuard<'_, Partition>> {
        self.partitions.iter().map(|p| p.0.lock()).collect()
    }

    /// Grants `mode` on `tag` to `owner`, or waits as `wait` says.
    ///
    /// Errors: `Deadlock` (this waiter is the victim: it has left the queue, its held locks
    /// are untouched — the caller aborts and calls `release_all`), `LockNotAvailable`
    /// (`NoWait`, or the timeout passed; nothing is left behind), `OutOfSharedMemory` (the
    /// table is full), `ProgramLimitExceeded` (`u32::MAX` holds of one mode), and
    /// `InvalidTransactionState` (the owner is already waiting in another thread).
    pub fn acquire(
        &self,
        owner: LockOwner,
        tag: LockTag,
        mode: LockMode,
        wait: LockWait,
    ) -> Result<()> {
        if tag.is_relation() {
            if mode.is_weak() && self.acquire_fast(owner, tag, mode) {
                self.stats.acquired.add(1);
                self.stats.fast_path.add(1);
                return Ok(());
            }
            if mode.is_strong() {
                self.announce_strong(tag);
                let r = self.acquire_in_table(owner, tag, mode, wait);
                if r.is_err() {
                    self.strong_done(&tag, 1);
                }
                return r;
            }
        }
        self.acquire_in_table(owner, tag, mode, wait)
    }

    /// [`LockManager::acquire`] in the table: the grant rule of the module header.
    fn acquire_in_table(
        &self,
        owner: LockOwner,
        tag: LockTag,
        mode: LockMode,
        wait: LockWait,
    ) -> Result<()> {
        let mut guard = self.partition(&tag);
        let part = &mut *guard;
        let entry = part.entry_mut(tag);
        let held_by_others = entry.others_mask(owner);
        let conflicts_held = mode.conflict_mask() & held_by_others != 0;

        if let Some(hold) = entry.holders.get(&owner) {
            // A holder skips the queue check: only others' holds can make it wait.
            if !conflicts_held {
                if hold.counts[mode.index()] == u32::MAX {
                    return Err(Error::ProgramLimitExceeded {
                        what: format!("too many holds of {} on {tag}", mode.name()),
                    });
                }
                entry.add_hold(owner, mode);
                self.stats.acquired.add(1);
                return Ok(());
            }
        } else if !conflicts_held && mode.conflict_mask() & entry.queued_mask() == 0 {
            if let Err(e) = self.reserve_entry() {
                part.discard_if_empty(tag);
                return Err(e);
            }
            entry.add_hold(owner, mode);
            self.owner_part(owner).entry_mut(owner).tags.insert(tag);
            self.stats.acquired.add(1);
            return Ok(());
        }

        // It must wait.
        let is_holder = entry.holders.contains_key(&owner);
        if wait == LockWait::NoWait {
            part.discard_if_empty(tag);
            return Err(not_available(tag, mode, None));
        }
        {
            let mut owners = self.owner_part(owner);
            if owners
                .owners
                .get(&owner)
                .is_some_and(|e| e.waiting.is_some())
            {
                drop(owners);
                part.discard_if_empty(tag);
                return Err(Error::InvalidTransactionState {
                    what: format!("lock owner {owner} is already waiting for a lock"),
                });
            }
            if !is_holder {
                // The queue entry is a new (owner, tag) entry: it counts against capacity.
                if let Err(e) = self.reserve_entry() {
                    drop(owners);
                    part.discard_if_empty(tag);
                    return Err(e);
                }
            }
            let oe = owners.entry_mut(owner);
            oe.tags.insert(tag);
            oe.waiting = Some((tag, mode));
        }
        let slot = Arc::new(WaitSlot {
            granted: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
            cv: Condvar::new(),
        });
        entry.queue.push_back(Waiter {
            owner,
            mode,
            slot: Arc::clone(&slot),
        });
        self.stats.waits.fetch_add(1, Ordering::Relaxed);
        self.wait_for_grant(guard, owner, tag, mode, wait, &slot)
    }

    /// Sleeps until the queued request is granted, times out, or is chosen as a deadlock
    /// victim. Not bounded in iterations for `Block`, by design: the wait lasts as long as the
    /// holder keeps its lock, as in PostgreSQL. Each pass sleeps on the condition variable
    /// until a wake-up or a deadline, so it never spins.
    fn wait_for_grant(
        &self,
        mut guard: MutexGuard<'_, Partition>,
        owner: LockOwner,
        tag: LockTag,
        mode: LockMode,
        wait: LockWait,
        slot: &Arc<WaitSlot>,
    ) -> Result<()> {
        let start = Instant::now();
        let (give_up_at, timeout_ms) = match wait {
            // A timeout too far to represent is no timeout.
            LockWait::TimeoutMs(ms) => (start.checked_add(Duration::from_millis(ms)), Some(ms)),
            LockWait::Block | LockWait::NoWait => (None, None),
        };
        let mut check_at = start.checked_add(self.deadlock_timeout);
        loop {
            if slot.granted.load(Ordering::Relaxed) {
                self.stats.acquired.add(1);
                return Ok(());
            }
            if slot.cancelled.load(Ordering::Relaxed) {
                self.withdraw(&mut guard, owner, tag, slot);
                return Err(Error::QueryCanceled {
                    what: format!("{} on {tag}", mode.name()),
                });
            }
            let now = Instant::now();
            if give_up_at.is_some_and(|t| now >= t) {
                self.withdraw(&mut guard, owner, tag, slot);
                return Err(not_available(tag, mode, timeout_ms));
            }
            if check_at.is_some_and(|t| now >= t) {
                // The check takes every partition in ascending order, ours included, so ours
                // must be let go first.
                let verdict =
                    MutexGuard::unlocked(&mut guard, || self.check_deadlock(owner, tag, slot));
                if let Some(detail) = verdict {
                    self.stats.deadlocks.fetch_add(1, Ordering::Relaxed);
                    return Err(Error::Deadlock { detail });
                }
                check_at = Instant::now().checked_add(self.deadlock_timeout);
                continue;
            }
            let wake_at = match (give_up_at, check_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            match wake_at {
                Some(t) => {
                    slot.cv.wait_until(&mut guard, t);
                }
                None => slot.cv.wait(&mut guard),
            }
        }
    }

    /// Ends `owner`'s lock wait, if it is waiting: the waiter wakes, leaves the queue and
    /// fails with [`Error::QueryCanceled`]. Returns whether a wait was cancelled.
    pub fn cancel_wait(&self, owner: LockOwner) -> bool {
        let Some((tag, _)) = self
            .owner_part(owner)
            .owners
            .get(&owner)
            .and_then(|e| e.waiting)
        else {
            return false;
        };
        let part = self.partition(&tag);
        let Some(entry) = part.locks.get(&tag) else {
            return false;
        };
        let Some(w) = entry.queue.iter().find(|w| w.owner == owner) else {
            return false;
        };
        w.slot.cancelled.store(true, Ordering::Relaxed);
        w.slot.cv.notify_one();
        true
    }

    /// Takes a queued request of `owner` (identified by its slot) out of `tag`'s queue: after
    /// a timeout or as a deadlock victim. Wakes whoever its leaving lets go.
    fn withdraw(&self, part: &mut Partition, owner: LockOwner, tag: LockTag, slot: &Arc<WaitSlot>) {
        let Some(entry) = part.locks.get_mut(&tag) else {
            return;
        };
        let Some(at) = entry.queue.iter().position(|w| Arc::ptr_eq(&w.slot, slot)) else {
            return;
        };
        entry.queue.remove(at);
        let still_holds = entry.holders.contains_key(&owner);
        {
            let mut owners = self.owner_part(owner);
            if let Some(oe) = owners.owners.get_mut(&owner) {
                oe.waiting = None;
                if !still_holds && oe.tags.remove(&tag) {
                    self.release_entry();
                }
            }
            owners.discard_if_empty(owner);
        }
        self.wake_waiters(entry);
        part.discard_if_empty(tag);
    }

    /// Grants queued requests in order as far as the grant rule allows. One pass suffices:
    /// granting only adds holds, which can never unblock an earlier waiter.
    fn wake_waiters(&self, entry: &mut LockEntry) {
        let mut ahead: u8 = 0;
        let mut at = 0;
        // Bounded: every pass removes a waiter or moves past one.
        while at < entry.queue.len() {
            let (owner, mode) = {
                let w = &entry.queue[at];
                (w.owner, w.mode)
            };
            if entry.blocked(owner, mode, ahead) {
                ahead |= mode.bit();
                at += 1;
                continue;
            }
            let Some(w) = entry.queue.remove(at) else {
                break;
            };
            // Cannot saturate: a waiter never holds the mode it waits for (holding it means no
            // other owner holds a conflicting mode, so the request would have been granted).
            entry.add_hold(owner, mode);
            {
                let mut owners = self.owner_part(owner);
                if let Some(oe) = owners.owners.get_mut(&owner) {
                    // The tag stays filed: the queue entry becomes the hold.
                    oe.waiting = None;
                }
            }
            w.slot.granted.store(true, Ordering::Relaxed);
            w.slot.cv.notify_one();
        }
    }

    /// Takes one (owner, tag) entry from the capacity.
    fn reserve_entry(&self) -> Result<()> {
        self.entries_used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.capacity).then_some(n + 1)
            })
            .map(drop)
            .map_err(|_| Error::OutOfSharedMemory {
                what: format!("the lock table is full ({} locks)", self.capacity),
                hint: "Increase max_locks_per_transaction.".to_string(),
            })
    }

    /// Gives one (owner, tag) entry back.
    fn release_entry(&self) {
        // Saturating: a bug must not wrap the count to "full forever".
        let _ = self
            .entries_used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_sub(1))
            });
    }

    /// Unfiles `tag` from `owner` once it neither holds nor waits there. The caller holds
    /// `tag`'s partition and has checked that `owner` holds nothing on it.
    fn forget(&self, owner: LockOwner, tag: LockTag) {
        let mut owners = self.owner_part(owner);
        let Some(oe) = owners.owners.get_mut(&owner) else {
            return;
        };
        if oe.waiting.is_some_and(|(t, _)| t == tag) {
            return;
        }
        if oe.tags.remove(&tag) {
            self.release_entry();
        }
        owners.discard_if_empty(owner);
    }

    /// Drops one hold of `mode` on `tag`; `false` if `owner` does not hold it.
    pub fn release(&self, owner: LockOwner, tag: LockTag, mode: LockMode) -> bool {
        if tag.is_relation() && mode.is_weak() && self.release_fast(owner, tag, mode) {
            return true;
        }
        let mut guard = self.partition(&tag);
        let part = &mut *guard;
        let Some(entry) = part.locks.get_mut(&tag) else {
            return false;
        };
        let Some(hold) = entry.holders.get_mut(&owner) else {
            return false;
        };
        if hold.counts[mode.index()] <= hold.session[mode.index()] {
            return false; // nothing held at transaction level
        }
        let count = &mut hold.counts[mode.index()];
        *count -= 1;
        let mode_freed = *count == 0;
        let holder_gone = hold.mask() == 0;
        if holder_gone {
            entry.holders.remove(&owner);
        }
        if mode_freed {
            let n = &mut entry.holders_of_mode[mode.index()];
            *n = n.saturating_sub(1);
            if !entry.queue.is_empty() {
                self.wake_waiters(entry);
            }
        }
        if holder_gone {
            self.forget(owner, tag);
        }
        part.discard_if_empty(tag);
        if mode.is_strong() {
            self.strong_done(&tag, 1);
        }
        true
    }

    /// Releases every transaction-level lock `owner` holds (end of transaction) and wakes the
    /// waiters that can now go; session-level holds stay ([`LockManager::release_session_all`]
    /// ends those). Releases what the owner holds when called; the owner must not acquire
    /// concurrently (it is its own thread that ends it).
    pub fn release_all(&self, owner: LockOwner) {
        self.release_all_fast(owner);
        let mut tags = self.tags_of(owner);
        // One visit per partition: the partition's mutex is taken once for all its tags.
        tags.sort_unstable_by_key(tag_partition);
        for group in tags.chunk_by(|a, b| tag_partition(a) == tag_partition(b)) {
            let Some(first) = group.first() else {
                continue;
            };
            let mut guard = self.partition(first);
            let part = &mut *guard;
            for &tag in group {
                let Some(entry) = part.locks.get_mut(&tag) else {
                    continue;
                };
                if let Some((taken, freed, gone)) = entry.take_xact_holds(owner) {
                    if freed && !entry.queue.is_empty() {
                        self.wake_waiters(entry);
                    }
                    if gone {
                        self.forget(owner, tag);
                    }
                    self.strong_done(&tag, strong_holds(&taken));
                }
                part.discard_if_empty(tag);
            }
        }
    }

    /// PREPARE: every transaction-level lock of `from` becomes `to`'s, atomically — every
    /// partition is held throughout, so nothing is released in between and nobody can take a
    /// lock in the gap. Holds merge with any `to` already has. Session-level holds and a
    /// request `from` is waiting for stay `from`'s.
    pub fn transfer_all(&self, from: LockOwner, to: LockOwner) {
        if from == to {
            return;
        }
        // Lock order: the group, then every partition (see `fastpath.rs`).
        let mut group = self.fast[fastpath::fast_group_of(from)].0.lock();
        let mut guards = self.lock_all();
        self.move_fast_holds(&mut group, &mut guards, from, to);
        let tags = self.tags_of(from);
        for tag in tags {
            let part = &mut *guards[tag_partition(&tag)];
            let Some(entry) = part.locks.get_mut(&tag) else {
                continue;
            };
            let Some((taken, _, gone)) = entry.take_xact_holds(from) else {
                continue; // `from` only waits here
            };
            if gone {
                self.forget(from, tag);
            }
            if taken.iter().all(|&n| n == 0) {
                continue; // only session-level holds here: they stay `from`'s
            }
            // Strong holds move between owners: the strong counts stay as they are.
            self.merge_holds(entry, to, tag, &taken);
            // `to` may have been waiting for what `from` held.
            if !entry.queue.is_empty() {
                self.wake_waiters(entry);
            }
        }
    }

    /// Adds per-mode hold `counts` to `owner`'s holds on `tag` (whose entry is `entry`),
    /// filing the tag under the owner if it is new there.
    fn merge_holds(
        &self,
        entry: &mut LockEntry,
        owner: LockOwner,
        tag: LockTag,
        counts: &[u32; 8],
    ) {
        let merged = entry.holders.entry(owner).or_default();
        for (m, &count) in counts.iter().enumerate() {
            if count == 0 {
                continue;
            }
            if merged.counts[m] == 0 {
                entry.holders_of_mode[m] += 1;
            }
            merged.counts[m] = merged.counts[m].saturating_add(count);
        }
        if self.owner_part(owner).entry_mut(owner).tags.insert(tag) {
            // Not reserve_entry: a merge cannot fail; see "Capacity" in the header.
            self.entries_used.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The tags `owner` holds or waits on, as filed.
    fn tags_of(&self, owner: LockOwner) -> Vec<LockTag> {
        self.owner_part(owner)
            .owners
            .get(&owner)
            .map(|e| e.tags.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Whether `owner` holds `mode` on `tag` (at least once).
    pub fn holds(&self, owner: LockOwner, tag: LockTag, mode: LockMode) -> bool {
        if tag.is_relation() && mode.is_weak() && self.holds_fast(owner, tag, mode) {
            return true;
        }
        self.partition(&tag)
            .locks
            .get(&tag)
            .and_then(|e| e.holders.get(&owner))
            .is_some_and(|h| h.counts[mode.index()] > 0)
    }

    /// Every (tag, mode) `owner` holds at transaction level, each held mode once, sorted (what
    /// PREPARE hands over). A snapshot taken one partition at a time: exact when the owner is
    /// not changing meanwhile.
    pub fn locks_of(&self, owner: LockOwner) -> Vec<(LockTag, LockMode)> {
        let mut out = self.locks_of_fast(owner);
        for tag in self.tags_of(owner) {
            let guard = self.partition(&tag);
            if let Some(hold) = guard.locks.get(&tag).and_then(|e| e.holders.get(&owner)) {
                let xact = hold.xact_counts();
                out.extend(
                    LockMode::ALL
                        .iter()
                        .filter(|m| xact[m.index()] > 0)
                        .map(|&m| (tag, m)),
                );
            }
        }
        out.sort_unstable();
        // A weak mode may be held both on the fast path and in the table.
        out.dedup();
        out
    }

    /// Whether `owner` is queued waiting for a lock.
    pub fn is_waiting(&self, owner: LockOwner) -> bool {
        self.waiting_for(owner).is_some()
    }

    /// What `owner` is queued waiting for, if anything.
    pub fn waiting_for(&self, owner: LockOwner) -> Option<(LockTag, LockMode)> {
        self.owner_part(owner)
            .owners
            .get(&owner)
            .and_then(|e| e.waiting)
    }

    /// (owner, tag) entries in use (the figure `capacity` bounds).
    pub fn entries_in_use(&self) -> usize {
        self.entries_used.load(Ordering::Relaxed)
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn stats(&self) -> &LockStats {
        &self.stats
    }
}

/// `LockNotAvailable` for `mode` on `tag`, or `LockTimeout` after `timeout_ms` of a timed
/// wait.
fn not_available(tag: LockTag, mode: LockMode, timeout_ms: Option<u64>) -> Error {
    match timeout_ms {
        Some(ms) => Error::LockTimeout {
            what: format!("{} on {tag} within {ms} ms", mode.name()),
        },
        None => Error::LockNotAvailable {
            what: format!("{} on {tag}", mode.name()),
        },
    }
}
