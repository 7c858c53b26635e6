//! The deadlock check (PostgreSQL's `deadlock.c`): a depth-first walk of the wait-for graph
//! from a waiter whose `deadlock_timeout` passed, under every partition lock. See the
//! "Deadlock detection" rules in the module header.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::MutexGuard;

use super::{
    tag_partition, FxHashSet, LockManager, LockMode, LockOwner, LockTag, Partition, WaitSlot,
};

/// One step of a cycle found by the deadlock check.
struct CycleEdge {
    owner: LockOwner,
    tag: LockTag,
    mode: LockMode,
    blocked_by: LockOwner,
}

/// A frame of the deadlock check's depth-first walk.
struct Frame {
    owner: LockOwner,
    tag: LockTag,
    mode: LockMode,
    blockers: Vec<LockOwner>,
    next: usize,
}

impl LockManager {
    /// The deadlock check for `owner`, waiting on `tag` with `slot`. Returns the detail if
    /// `owner` is the victim, having taken it out of the queue already (under the same locks,
    /// so nobody sees the cycle after it was broken).
    pub(super) fn check_deadlock(
        &self,
        owner: LockOwner,
        tag: LockTag,
        slot: &Arc<WaitSlot>,
    ) -> Option<String> {
        let mut guards = self.lock_all();
        self.stats.deadlock_checks.fetch_add(1, Ordering::Relaxed);
        if slot.granted.load(Ordering::Relaxed) {
            return None;
        }
        let cycle = self.find_cycle(&guards, owner)?;
        let detail = cycle
            .iter()
            .map(|e| {
                format!(
                    "Process {} waits for {} on {}; blocked by process {}.",
                    e.owner,
                    e.mode.name(),
                    e.tag,
                    e.blocked_by
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        self.withdraw(&mut guards[tag_partition(&tag)], owner, tag, slot);
        Some(detail)
    }

    /// A cycle of the wait-for graph through `start`, depth first. Every owner is expanded
    /// once and every edge followed once, so the walk ends; the step limit, which that bound
    /// never reaches, is there so that a bug cannot loop forever (it then reports no cycle,
    /// and the next check looks again).
    fn find_cycle(
        &self,
        parts: &[MutexGuard<'_, Partition>],
        start: LockOwner,
    ) -> Option<Vec<CycleEdge>> {
        let frame_of = |owner: LockOwner| -> Option<Frame> {
            let (tag, mode) = self.waiting_for(owner)?;
            let blockers = parts
                .get(tag_partition(&tag))?
                .locks
                .get(&tag)
                .map(|e| e.blockers(owner, mode))
                .unwrap_or_default();
            Some(Frame {
                owner,
                tag,
                mode,
                blockers,
                next: 0,
            })
        };
        let mut stack = vec![frame_of(start)?];
        let mut visited: FxHashSet<LockOwner> = FxHashSet::default();
        visited.insert(start);
        // Owners ≤ capacity, edges per owner ≤ capacity: steps ≤ capacity² + 2·capacity.
        let step_limit = self
            .capacity
            .saturating_mul(self.capacity)
            .saturating_add(self.capacity.saturating_mul(2))
            .saturating_add(16);
        for _ in 0..step_limit {
            let top = stack.last_mut()?;
            let Some(&next) = top.blockers.get(top.next) else {
                stack.pop();
                continue;
            };
            top.next += 1;
            if next == start {
                return Some(
                    stack
                        .iter()
                        .map(|f| CycleEdge {
                            owner: f.owner,
                            tag: f.tag,
                            mode: f.mode,
                            blocked_by: f
                                .next
                                .checked_sub(1)
                                .and_then(|at| f.blockers.get(at).copied())
                                .expect("every frame on the stack was left through a blocker"),
                        })
                        .collect(),
                );
            }
            if !visited.insert(next) {
                continue;
            }
            if let Some(frame) = frame_of(next) {
                stack.push(frame);
            }
        }
        None
    }
}
