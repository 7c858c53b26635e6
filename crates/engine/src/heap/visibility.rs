//! Tuple visibility: PostgreSQL's `HeapTupleSatisfiesMVCC` (may a snapshot see this
//! version?) and `HeapTupleSatisfiesUpdate` (may this transaction change it now?).
//!
//! A transaction sees its own changes made by *earlier* commands only (`cmin < cid`): a scan
//! started before an update in the same transaction does not see the update's new version,
//! which is what keeps `UPDATE t SET x = x + 1` from updating its own output.

use std::cell::Cell;

use super::freeze::xmin_committed;
use super::tuple::{TupleHeader, XMAX_LOCK_ONLY};
use crate::error::Result;
use crate::page::Tid;
use crate::txn::{OwnXids, Snapshot, TransactionManager};
use crate::types::Xid;

/// Answers "did this transaction commit?" and "is it running now?".
pub trait XidOracle {
    /// For an id not running: did it commit (else it aborted or crashed)?
    fn did_commit(&self, xid: Xid) -> Result<bool>;
    /// Is the transaction running now (a session's or a prepared one)?
    fn is_running(&self, xid: Xid) -> bool;
    /// The oldest transaction id any running transaction or snapshot may still treat as
    /// running: versions deleted by committed transactions below it are dead to all.
    fn horizon(&self) -> Xid;
    /// The top-level transaction of `xid` (itself for a top-level id; see
    /// [`TransactionManager::top_of`]).
    fn top_of(&self, xid: Xid) -> Result<Xid> {
        Ok(xid)
    }
}

impl XidOracle for TransactionManager {
    fn did_commit(&self, xid: Xid) -> Result<bool> {
        TransactionManager::did_commit(self, xid)
    }
    fn is_running(&self, xid: Xid) -> bool {
        TransactionManager::is_running(self, xid)
    }
    fn horizon(&self) -> Xid {
        self.global_xmin()
    }
    fn top_of(&self, xid: Xid) -> Result<Xid> {
        TransactionManager::top_of(self, xid)
    }
}

/// An oracle that remembers the outcome of the last finished transaction it was asked about.
/// A table mostly names the same few ids run after run (a bulk load, a bulk delete), and a
/// finished transaction's outcome never changes, so a pass over a table asks the commit log
/// once per run of equal ids, as PostgreSQL's `TransactionLogFetch` keeps `cachedFetchXid`.
/// Whether a transaction runs is asked anew each time: that changes.
pub struct Remembering<'a> {
    inner: &'a dyn XidOracle,
    last: Cell<Option<(Xid, bool)>>,
}

impl<'a> Remembering<'a> {
    pub fn new(inner: &'a dyn XidOracle) -> Self {
        Remembering {
            inner,
            last: Cell::new(None),
        }
    }
}

impl XidOracle for Remembering<'_> {
    fn did_commit(&self, xid: Xid) -> Result<bool> {
        if let Some((last, committed)) = self.last.get() {
            if last == xid {
                return Ok(committed);
            }
        }
        // Asked first: an id that was not running then has its final outcome now. (A caller
        // may ask about a running id, and hear "not committed"; that answer is not kept.)
        let finished = !self.inner.is_running(xid);
        let committed = self.inner.did_commit(xid)?;
        if finished {
            self.last.set(Some((xid, committed)));
        }
        Ok(committed)
    }
    fn is_running(&self, xid: Xid) -> bool {
        self.inner.is_running(xid)
    }
    fn horizon(&self) -> Xid {
        self.inner.horizon()
    }
    fn top_of(&self, xid: Xid) -> Result<Xid> {
        self.inner.top_of(xid)
    }
}

/// Who is looking: a snapshot, the looker's own transaction ids (its top-level id and live
/// subtransaction ids; none if it has none) and its current command id.
#[derive(Clone, Copy, Debug)]
pub struct Looker<'a> {
    pub snapshot: &'a Snapshot,
    pub own: &'a OwnXids,
    pub cid: u32,
}

impl Looker<'_> {
    fn is_me(&self, xid: Xid) -> bool {
        self.own.contains(xid)
    }

    /// Was `xid` running for the snapshot (a subtransaction's id through its top-level one)?
    fn running(&self, xid: Xid, oracle: &dyn XidOracle) -> Result<bool> {
        self.snapshot.is_running_via(xid, |x| oracle.top_of(x))
    }

    /// Is the version `h` visible?
    pub fn sees(&self, h: &TupleHeader, oracle: &dyn XidOracle) -> Result<bool> {
        if self.is_me(h.xmin) {
            if h.cmin >= self.cid {
                return Ok(false); // inserted by a later command
            }
        } else if self.running(h.xmin, oracle)? || !xmin_committed(h, oracle)? {
            return Ok(false);
        }
        if !h.xmax_is_deleter() {
            return Ok(true);
        }
        if self.is_me(h.xmax) {
            return Ok(h.cmax >= self.cid); // deleted by a later command: still visible
        }
        if self.running(h.xmax, oracle)? {
            return Ok(true);
        }
        Ok(!oracle.did_commit(h.xmax)?)
    }
}

/// What a transaction may do with a version it wants to change (PostgreSQL's `TM_Result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateCheck {
    /// Free to change.
    Ok,
    /// Not a version this transaction may change (inserted by an aborted or running
    /// transaction, by a later command of its own, or deleted by an earlier command of its
    /// own).
    Invisible,
    /// Already changed by a later command of this transaction.
    SelfModified,
    /// Being changed or locked by a running transaction: wait for it, then look again.
    BeingModified { xmax: Xid },
    /// Updated by a committed transaction; the next version is at `next`.
    Updated { xmax: Xid, next: Tid },
    /// Deleted by a committed transaction.
    Deleted { xmax: Xid },
}

/// May the transaction whose own ids are `me` (with command id `cid`) change the version at
/// `tid` with header `h` now?
pub fn check_update(
    h: &TupleHeader,
    tid: Tid,
    me: &OwnXids,
    cid: u32,
    oracle: &dyn XidOracle,
) -> Result<UpdateCheck> {
    if me.contains(h.xmin) {
        if h.cmin >= cid {
            return Ok(UpdateCheck::Invisible);
        }
    } else if oracle.is_running(h.xmin) || !xmin_committed(h, oracle)? {
        return Ok(UpdateCheck::Invisible);
    }
    if !h.xmax.is_valid() || h.infomask & super::tuple::XMAX_INVALID != 0 {
        return Ok(UpdateCheck::Ok);
    }
    if h.infomask & XMAX_LOCK_ONLY != 0 {
        if !me.contains(h.xmax) && oracle.is_running(h.xmax) {
            return Ok(UpdateCheck::BeingModified { xmax: h.xmax });
        }
        return Ok(UpdateCheck::Ok); // our own lock, or a finished locker's
    }
    if me.contains(h.xmax) {
        return Ok(if h.cmax >= cid {
            UpdateCheck::SelfModified
        } else {
            UpdateCheck::Invisible
        });
    }
    if oracle.is_running(h.xmax) {
        return Ok(UpdateCheck::BeingModified { xmax: h.xmax });
    }
    if !oracle.did_commit(h.xmax)? {
        return Ok(UpdateCheck::Ok); // the deleter aborted
    }
    Ok(if h.is_updated(tid) {
        UpdateCheck::Updated {
            xmax: h.xmax,
            next: h.ctid,
        }
    } else {
        UpdateCheck::Deleted { xmax: h.xmax }
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::tuple::{XMAX_INVALID, XMAX_LOCK_ONLY};
    use super::*;
    use std::collections::HashMap;

    /// Committed: true/false; running: absent from the map and in `running`.
    struct Oracle {
        done: HashMap<Xid, bool>,
        running: Vec<Xid>,
    }

    impl XidOracle for Oracle {
        fn did_commit(&self, xid: Xid) -> Result<bool> {
            Ok(self.done.get(&xid).copied().unwrap_or(false))
        }
        fn is_running(&self, xid: Xid) -> bool {
            self.running.contains(&xid)
        }
        fn horizon(&self) -> Xid {
            self.running.iter().copied().min().unwrap_or(Xid(u64::MAX))
        }
    }

    /// Counts the questions it is asked.
    struct Counting<'a> {
        inner: &'a Oracle,
        asked: Cell<(u32, u32)>,
    }

    impl XidOracle for Counting<'_> {
        fn did_commit(&self, xid: Xid) -> Result<bool> {
            let (c, r) = self.asked.get();
            self.asked.set((c + 1, r));
            self.inner.did_commit(xid)
        }
        fn is_running(&self, xid: Xid) -> bool {
            let (c, r) = self.asked.get();
            self.asked.set((c, r + 1));
            self.inner.is_running(xid)
        }
        fn horizon(&self) -> Xid {
            self.inner.horizon()
        }
    }

    #[test]
    fn remembering_asks_once_per_run_of_one_finished_id_and_always_whether_one_runs() {
        let oracle = Oracle {
            done: HashMap::from([(Xid(10), true), (Xid(11), false)]),
            running: vec![Xid(12)],
        };
        let counting = Counting {
            inner: &oracle,
            asked: Cell::new((0, 0)),
        };
        let r = Remembering::new(&counting);
        let asked: Vec<bool> = [10, 10, 10, 11, 11, 10]
            .into_iter()
            .map(|x| r.did_commit(Xid(x)).unwrap())
            .collect();
        assert_eq!(asked, [true, true, true, false, false, true]);
        assert_eq!(counting.asked.get().0, 3, "one lookup per run of equal ids");
        assert!(r.is_running(Xid(12)) && r.is_running(Xid(12)) && !r.is_running(Xid(10)));
        // A running id's "not committed" is not kept: asked again, it is looked up again.
        let before = counting.asked.get().0;
        assert!(!r.did_commit(Xid(12)).unwrap() && !r.did_commit(Xid(12)).unwrap());
        assert_eq!(counting.asked.get().0, before + 2, "a running id is not remembered");
    }

    /// A header for tests: no command ids, `ctid` (0,1), no attributes.
    pub(crate) fn header(xmin: u64, xmax: u64, infomask: u16) -> TupleHeader {
        TupleHeader {
            xmin: Xid(xmin),
            xmax: Xid(xmax),
            cmin: 0,
            cmax: 0,
            ctid: Tid::new(0, 1),
            infomask,
            natts: 0,
        }
    }

    #[test]
    fn mvcc_rules() {
        // 10 committed before the snapshot, 11 aborted, 12 running, 13 committed after it.
        let oracle = Oracle {
            done: HashMap::from([(Xid(10), true), (Xid(11), false), (Xid(13), true)]),
            running: vec![Xid(12)],
        };
        let snap = Snapshot {
            xmin: Xid(12),
            xmax: Xid(14),
            xip: vec![Xid(12), Xid(13)],
            subxacts: false,
        };
        let own = OwnXids::single(Xid(20));
        let me = Looker {
            snapshot: &snap,
            own: &own,
            cid: 5,
        };
        let sees = |h: TupleHeader| me.sees(&h, &oracle).unwrap();
        assert!(sees(header(10, 0, XMAX_INVALID)));
        assert!(!sees(header(11, 0, XMAX_INVALID)));
        assert!(!sees(header(12, 0, XMAX_INVALID)));
        assert!(
            !sees(header(13, 0, XMAX_INVALID)),
            "committed after the snapshot"
        );
        assert!(!sees(header(10, 10, 0)), "deleted before the snapshot");
        assert!(sees(header(10, 11, 0)), "deleter aborted");
        assert!(sees(header(10, 13, 0)), "deleted after the snapshot");
        assert!(sees(header(10, 12, XMAX_LOCK_ONLY)), "only locked");
        // Own changes: visible from later commands only.
        let mut own = header(20, 0, XMAX_INVALID);
        own.cmin = 4;
        assert!(sees(own));
        own.cmin = 5;
        assert!(!sees(own));
        let mut deleted_by_me = header(10, 20, 0);
        deleted_by_me.cmax = 5;
        assert!(sees(deleted_by_me), "deleted by the current command");
        deleted_by_me.cmax = 4;
        assert!(!sees(deleted_by_me));
    }

    #[test]
    fn update_rules() {
        let oracle = Oracle {
            done: HashMap::from([(Xid(10), true), (Xid(11), false), (Xid(13), true)]),
            running: vec![Xid(12)],
        };
        let tid = Tid::new(0, 1);
        let own = OwnXids::single(Xid(20));
        let check = |h: TupleHeader| check_update(&h, tid, &own, 5, &oracle).unwrap();
        assert_eq!(check(header(10, 0, XMAX_INVALID)), UpdateCheck::Ok);
        assert_eq!(check(header(10, 11, 0)), UpdateCheck::Ok);
        assert_eq!(
            check(header(10, 12, 0)),
            UpdateCheck::BeingModified { xmax: Xid(12) }
        );
        assert_eq!(
            check(header(10, 12, XMAX_LOCK_ONLY)),
            UpdateCheck::BeingModified { xmax: Xid(12) }
        );
        assert_eq!(check(header(10, 13, XMAX_LOCK_ONLY)), UpdateCheck::Ok);
        assert_eq!(
            check(header(10, 13, 0)),
            UpdateCheck::Deleted { xmax: Xid(13) }
        );
        let mut updated = header(10, 13, 0);
        updated.ctid = Tid::new(4, 2);
        assert_eq!(
            check(updated),
            UpdateCheck::Updated {
                xmax: Xid(13),
                next: Tid::new(4, 2)
            }
        );
        assert_eq!(check(header(12, 0, XMAX_INVALID)), UpdateCheck::Invisible);
        let mut mine = header(10, 20, 0);
        mine.cmax = 5;
        assert_eq!(check(mine), UpdateCheck::SelfModified);
        mine.cmax = 4;
        assert_eq!(check(mine), UpdateCheck::Invisible);
    }
}
