//! What `pg_locks` shows: every hold and every wait of the lock table and the fast path,
//! read under all partition locks at once, as PostgreSQL's `GetLockStatusData` reads them.

use super::mode::WEAK_MODE_COUNT;
use super::{LockManager, LockMode, LockOwner, LockTag};

/// One row of `pg_locks`: an owner's mode on a tag, held or awaited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockStatus {
    pub tag: LockTag,
    pub owner: LockOwner,
    pub mode: LockMode,
    /// Held (true) or waited for (false).
    pub granted: bool,
    /// Held on the fast path, outside the table.
    pub fast_path: bool,
}

impl LockManager {
    /// Every held mode (once per owner, tag and mode) and every waiting request. Each
    /// fast-path group is read in turn, then the whole table under all partition locks (a
    /// weak lock moving from a group into the table meanwhile may show in both).
    pub fn status(&self) -> Vec<LockStatus> {
        let mut out = Vec::new();
        for group in &self.fast {
            let group = group.0.lock();
            for hold in &group.holds {
                out.extend(
                    LockMode::ALL[..WEAK_MODE_COUNT]
                        .iter()
                        .filter(|m| hold.counts[m.index()] > 0)
                        .map(|&mode| LockStatus {
                            tag: hold.tag,
                            owner: hold.owner,
                            mode,
                            granted: true,
                            fast_path: true,
                        }),
                );
            }
        }
        let guards = self.lock_all();
        for part in &guards {
            for (&tag, entry) in &part.locks {
                for (&owner, hold) in &entry.holders {
                    out.extend(
                        LockMode::ALL
                            .iter()
                            .filter(|m| hold.counts[m.index()] > 0)
                            .map(|&mode| LockStatus {
                                tag,
                                owner,
                                mode,
                                granted: true,
                                fast_path: false,
                            }),
                    );
                }
                out.extend(entry.queue.iter().map(|w| LockStatus {
                    tag,
                    owner: w.owner,
                    mode: w.mode,
                    granted: false,
                    fast_path: false,
                }));
            }
        }
        out
    }
}
