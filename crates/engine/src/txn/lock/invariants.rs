//! The lock table's invariants, checked under every partition lock: what tests (and debug
//! builds) call to catch a lost wake-up, a conflicting grant or a leaked entry.

use std::sync::atomic::Ordering;

use super::{masks_conflict, tag_partition, FxHashSet, LockEntry, LockManager, LockOwner, LockTag};

impl LockManager {
    /// Checks the table under every partition lock: no two owners hold conflicting modes on a
    /// tag; per-mode holder counts match the holds; no empty entry is kept; no queued request
    /// could be granted (a lost wake-up); both maps agree; the capacity count matches; and the
    /// fast path's rules (`fastpath.rs`, [`LockManager::check_fast`]). For tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        // Lock order: every fast-path group in ascending order, then every partition.
        let groups: Vec<_> = self.fast.iter().map(|g| g.0.lock()).collect();
        let guards = self.lock_all();
        self.check_fast(&groups, &guards)?;
        let mut table_entries = 0usize;
        for (p, guard) in guards.iter().enumerate() {
            for (tag, entry) in &guard.locks {
                self.check_entry(p, *tag, entry)?;
                let waiters_not_holding = entry
                    .queue
                    .iter()
                    .filter(|w| !entry.holders.contains_key(&w.owner))
                    .count();
                table_entries += entry.holders.len() + waiters_not_holding;
            }
        }
        let mut filed = 0usize;
        for part in &self.owners {
            let part = part.0.lock();
            for (&owner, oe) in &part.owners {
                if oe.is_empty() {
                    return Err(format!("owner {owner}: an empty owner entry is kept"));
                }
                filed += oe.tags.len();
                for tag in &oe.tags {
                    let entry = guards[tag_partition(tag)].locks.get(tag);
                    let holds = entry.is_some_and(|e| e.holders.contains_key(&owner));
                    let waits = oe.waiting.is_some_and(|(t, _)| t == *tag);
                    if !holds && !waits {
                        return Err(format!(
                            "owner {owner} files {tag} but neither holds nor waits there"
                        ));
                    }
                }
                if let Some((tag, mode)) = oe.waiting {
                    let queued = guards[tag_partition(&tag)]
                        .locks
                        .get(&tag)
                        .is_some_and(|e| {
                            e.queue.iter().any(|w| w.owner == owner && w.mode == mode)
                        });
                    if !queued || !oe.tags.contains(&tag) {
                        return Err(format!(
                            "owner {owner} is filed as waiting for {mode} on {tag} but is not queued there"
                        ));
                    }
                }
            }
        }
        let used = self.entries_used.load(Ordering::Relaxed);
        if table_entries != filed || filed != used {
            return Err(format!(
                "entry counts disagree: table {table_entries}, owner index {filed}, counter {used}"
            ));
        }
        if used > self.capacity {
            return Err(format!(
                "{used} entries exceed the capacity {}",
                self.capacity
            ));
        }
        Ok(())
    }

    /// The per-entry part of [`LockManager::check_invariants`]; the caller holds every
    /// partition, so it may lock owner partitions.
    fn check_entry(&self, partition: usize, tag: LockTag, entry: &LockEntry) -> Result<(), String> {
        if tag_partition(&tag) != partition {
            return Err(format!("{tag} is in partition {partition}, not its own"));
        }
        if entry.is_empty() {
            return Err(format!("{tag}: an empty entry is kept"));
        }
        let mut per_mode = [0usize; 8];
        for (&owner, hold) in &entry.holders {
            let mask = hold.mask();
            if mask == 0 {
                return Err(format!("{tag}: owner {owner} is a holder of nothing"));
            }
            if (0..8).any(|m| hold.session[m] > hold.counts[m]) {
                return Err(format!(
                    "{tag}: owner {owner} has more session holds {:?} than holds {:?}",
                    hold.session, hold.counts
                ));
            }
            if tag.is_relation() && hold.has_session() {
                return Err(format!("{tag}: owner {owner} holds a relation at session level"));
            }
            for (m, n) in per_mode.iter_mut().enumerate() {
                *n += usize::from(mask & (1 << m) != 0);
            }
            for (&other, other_hold) in &entry.holders {
                if other != owner && masks_conflict(mask, other_hold.mask()) {
                    return Err(format!(
                        "{tag}: owners {owner} and {other} hold conflicting modes ({mask:#010b}, {:#010b})",
                        other_hold.mask()
                    ));
                }
            }
            let filed = self
                .owner_part(owner)
                .owners
                .get(&owner)
                .is_some_and(|e| e.tags.contains(&tag));
            if !filed {
                return Err(format!("{tag}: holder {owner} does not file it"));
            }
        }
        if per_mode != entry.holders_of_mode {
            return Err(format!(
                "{tag}: holders per mode {:?}, counted {per_mode:?}",
                entry.holders_of_mode
            ));
        }
        let mut ahead = 0u8;
        let mut seen: FxHashSet<LockOwner> = FxHashSet::default();
        for w in &entry.queue {
            if !seen.insert(w.owner) {
                return Err(format!("{tag}: owner {} is queued twice", w.owner));
            }
            if w.slot.granted.load(Ordering::Relaxed) {
                return Err(format!(
                    "{tag}: a granted request of {} is still queued",
                    w.owner
                ));
            }
            if !entry.blocked(w.owner, w.mode, ahead) {
                return Err(format!(
                    "{tag}: {} of owner {} could be granted but waits (lost wake-up)",
                    w.mode.name(),
                    w.owner
                ));
            }
            ahead |= w.mode.bit();
            if self.waiting_for(w.owner) != Some((tag, w.mode)) {
                return Err(format!(
                    "{tag}: owner {} is queued for {} but not filed as waiting",
                    w.owner,
                    w.mode.name()
                ));
            }
        }
        Ok(())
    }
}
