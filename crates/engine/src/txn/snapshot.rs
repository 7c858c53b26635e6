//! MVCC snapshots and the process array: which transactions are running, so that a snapshot
//! can say which transaction ids it must treat as "in progress".

use std::collections::BTreeMap;

use parking_lot::Mutex;

use crate::hash::FxHashMap;
use crate::types::Xid;

/// A transaction's view of which transactions had finished when it was taken (PostgreSQL's
/// `SnapshotData`, with 64-bit ids). Every id below `xmin` had finished; every id at or above
/// `xmax` had not started; in between, exactly the ids in `xip` were running.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub xmin: Xid,
    pub xmax: Xid,
    /// Running ids in `[xmin, xmax)`, sorted (prepared transactions included).
    pub xip: Vec<Xid>,
    /// Did any transaction running at the snapshot have subtransaction ids? If none did,
    /// an id in `[xmin, xmax)` outside `xip` cannot be a running transaction's
    /// subtransaction, and [`Snapshot::is_running_via`] skips the subtransaction map.
    pub subxacts: bool,
}

impl Snapshot {
    /// Was `xid` running (or not yet started) when the snapshot was taken? Such a
    /// transaction's effects are invisible to the snapshot, whatever it did later.
    pub fn is_running(&self, xid: Xid) -> bool {
        xid >= self.xmax || (xid >= self.xmin && self.xip.binary_search(&xid).is_ok())
    }

    /// [`Snapshot::is_running`] for an id that may be a subtransaction's: `xip` holds only
    /// top-level ids, so an id in `[xmin, xmax)` not in it is mapped to its top-level id by
    /// `top_of` (the subtransaction map), which then decides. A subtransaction id below
    /// `xmin` has a top-level id below it too (ids grow), so it finished: no look-up; nor
    /// is there one when no transaction running at the snapshot had subtransactions. This
    /// is PostgreSQL's "overflowed" snapshot path, taken whenever subtransactions run, so a
    /// snapshot's cost never depends on how many subtransactions run.
    pub fn is_running_via(
        &self,
        xid: Xid,
        top_of: impl FnOnce(Xid) -> crate::error::Result<Xid>,
    ) -> crate::error::Result<bool> {
        if xid >= self.xmax || xid < self.xmin {
            return Ok(xid >= self.xmax);
        }
        if self.xip.binary_search(&xid).is_ok() {
            return Ok(true);
        }
        if !self.subxacts {
            return Ok(false);
        }
        let top = top_of(xid)?;
        Ok(top != xid && self.is_running(top))
    }
}

/// The ids a transaction counts as its own: its top-level id, then the ids of its live
/// subtransactions (not the aborted ones), ascending — a stack, as ROLLBACK TO SAVEPOINT
/// removes the newest. Shared cheaply with the scans that look through it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnXids(std::sync::Arc<Vec<Xid>>);

impl OwnXids {
    /// A transaction with the one id `xid` (invalid: none).
    pub fn single(xid: Xid) -> Self {
        OwnXids(std::sync::Arc::new(if xid.is_valid() { vec![xid] } else { Vec::new() }))
    }

    /// Is `xid` one of these?
    pub fn contains(&self, xid: Xid) -> bool {
        xid.is_valid() && self.0.binary_search(&xid).is_ok()
    }

    /// The top-level id (invalid if none was assigned).
    pub fn top(&self) -> Xid {
        self.0.first().copied().unwrap_or(Xid::INVALID)
    }

    /// The live subtransaction ids.
    pub fn subxids(&self) -> &[Xid] {
        self.0.get(1..).unwrap_or(&[])
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds a newly assigned id (larger than every one held).
    pub fn push(&mut self, xid: Xid) {
        assert!(
            self.0.last().is_none_or(|&l| l < xid),
            "own ids ascend: {xid} after {:?}",
            self.0.last()
        );
        std::sync::Arc::make_mut(&mut self.0).push(xid);
    }

    /// Removes the ids from position `len` on (they aborted) and returns them.
    pub fn truncate(&mut self, len: usize) -> Vec<Xid> {
        if len >= self.0.len() {
            return Vec::new();
        }
        std::sync::Arc::make_mut(&mut self.0).split_off(len)
    }
}

/// A session's (or an embedded transaction's) slot in the process array: the "process"
/// that lock and deadlock reports name. Never reused while the array lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcId(pub u64);

impl std::fmt::Display for ProcId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Proc {
    /// The transaction id, once assigned (invalid: none yet — read-only so far).
    xid: Xid,
    /// The xmin of the transaction's first snapshot (invalid: none taken); vacuum keeps every
    /// version this could still see.
    xmin: Xid,
    /// Has the transaction been assigned subtransaction ids?
    subxacts: bool,
}

#[derive(Default)]
struct Inner {
    procs: FxHashMap<ProcId, Proc>,
    /// Prepared transactions: running, but owned by no session; with whether each has
    /// subtransaction ids.
    prepared: BTreeMap<Xid, bool>,
    /// The number of the next slot registered.
    next_proc: u64,
}

/// The running transactions (PostgreSQL's `ProcArray`). One mutex: a transaction id is
/// assigned, a snapshot taken and a transaction ended each under it, so a snapshot never
/// misses a transaction that was assigned an id before it (the id would then be below the
/// snapshot's `xmax` yet absent from `xip`, and its later commit would wrongly show).
pub struct ProcArray {
    inner: Mutex<Inner>,
    max_procs: usize,
}

impl ProcArray {
    pub fn new(max_procs: usize) -> Self {
        ProcArray {
            inner: Mutex::new(Inner {
                next_proc: 1,
                ..Inner::default()
            }),
            max_procs,
        }
    }

    /// A new slot, or `None` when `max_procs` are in use.
    pub fn register(&self) -> Option<ProcId> {
        let mut g = self.inner.lock();
        if g.procs.len() >= self.max_procs {
            return None;
        }
        let id = ProcId(g.next_proc);
        g.next_proc += 1;
        g.procs.insert(id, Proc::default());
        Some(id)
    }

    /// Frees a slot (its transaction ended or was handed to a prepared transaction).
    pub fn unregister(&self, proc: ProcId) {
        self.inner.lock().procs.remove(&proc);
    }

    /// Assigns `proc` the id that `next_id` hands out, atomically with its appearance in
    /// the array.
    pub fn assign_xid(&self, proc: ProcId, next_id: impl FnOnce() -> Xid) -> Xid {
        let mut g = self.inner.lock();
        let xid = next_id();
        let p = g
            .procs
            .get_mut(&proc)
            .expect("a transaction assigns an id only while registered");
        debug_assert_eq!(p.xid, Xid::INVALID, "a transaction gets one id");
        p.xid = xid;
        xid
    }

    /// Assigns a subtransaction id of `proc`'s transaction from `next_id`: under the mutex,
    /// so a snapshot whose `xmax` is past the id also sees that `proc` has subtransactions.
    pub fn assign_subxid(&self, proc: ProcId, next_id: impl FnOnce() -> Xid) -> Xid {
        let mut g = self.inner.lock();
        let p = g
            .procs
            .get_mut(&proc)
            .expect("a transaction assigns an id only while registered");
        assert!(p.xid.is_valid(), "a subtransaction id follows the top-level id");
        p.subxacts = true;
        next_id()
    }

    /// Takes a snapshot for `proc`; `next_xid` is read under the array's mutex.
    pub fn snapshot(&self, proc: ProcId, next_xid: impl FnOnce() -> Xid) -> Snapshot {
        let mut g = self.inner.lock();
        let xmax = next_xid();
        // One pass over the array: the running ids and whether any has subtransactions.
        let mut subxacts = false;
        let mut xip: Vec<Xid> = Vec::with_capacity(g.procs.len() + g.prepared.len());
        for p in g.procs.values() {
            subxacts |= p.subxacts;
            if p.xid.is_valid() && p.xid < xmax {
                xip.push(p.xid);
            }
        }
        for (&x, &s) in &g.prepared {
            subxacts |= s;
            if x < xmax {
                xip.push(x);
            }
        }
        xip.sort_unstable();
        let xmin = xip.first().copied().unwrap_or(xmax);
        if let Some(p) = g.procs.get_mut(&proc) {
            if !p.xmin.is_valid() {
                p.xmin = xmin;
            }
        }
        Snapshot {
            xmin,
            xmax,
            xip,
            subxacts,
        }
    }

    /// `proc`'s transaction ended: it no longer counts as running.
    pub fn end_xid(&self, proc: ProcId) {
        if let Some(p) = self.inner.lock().procs.get_mut(&proc) {
            *p = Proc::default();
        }
    }

    /// PREPARE: `proc`'s transaction id stays running, owned by no session.
    pub fn prepare(&self, proc: ProcId, xid: Xid) {
        let mut g = self.inner.lock();
        let subxacts = g.procs.get(&proc).is_some_and(|p| p.subxacts);
        g.prepared.insert(xid, subxacts);
        if let Some(p) = g.procs.get_mut(&proc) {
            *p = Proc::default();
        }
    }

    /// A prepared transaction recovered at startup runs again (`subxacts`: it has
    /// subtransaction ids).
    pub fn add_prepared(&self, xid: Xid, subxacts: bool) {
        self.inner.lock().prepared.insert(xid, subxacts);
    }

    /// COMMIT/ROLLBACK PREPARED: the prepared transaction no longer runs.
    pub fn end_prepared(&self, xid: Xid) {
        self.inner.lock().prepared.remove(&xid);
    }

    /// Is `xid` running now (a session's or a prepared transaction)?
    pub fn is_running(&self, xid: Xid) -> bool {
        let g = self.inner.lock();
        g.prepared.contains_key(&xid) || g.procs.values().any(|p| p.xid == xid)
    }

    /// The oldest id any running transaction or snapshot may still care about: versions
    /// deleted by transactions that committed below it are dead to everyone.
    pub fn global_xmin(&self, next_xid: Xid) -> Xid {
        let g = self.inner.lock();
        let procs = g
            .procs
            .values()
            .flat_map(|p| [p.xid, p.xmin])
            .filter(|&x| x.is_valid());
        procs
            .chain(g.prepared.keys().copied())
            .min()
            .unwrap_or(next_xid)
            .min(next_xid)
    }

    /// Sessions registered now.
    pub fn sessions(&self) -> usize {
        self.inner.lock().procs.len()
    }

    /// Transactions that have an id (that write), as PostgreSQL's `MinimumActiveBackends`
    /// counts them for `commit_siblings`.
    pub fn with_xid(&self) -> usize {
        self.inner
            .lock()
            .procs
            .values()
            .filter(|p| p.xid.is_valid())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_sees_running_and_prepared_ids_as_running() {
        let pa = ProcArray::new(10);
        let a = pa.register().unwrap();
        let b = pa.register().unwrap();
        let mut next = 10;
        let xa = pa.assign_xid(a, || {
            next += 1;
            Xid(next - 1)
        });
        let xb = pa.assign_xid(b, || {
            next += 1;
            Xid(next - 1)
        });
        pa.prepare(b, xb);
        let s = pa.snapshot(a, || Xid(next));
        assert_eq!(
            (s.xmin, s.xmax, s.xip.clone()),
            (Xid(10), Xid(12), vec![Xid(10), Xid(11)])
        );
        assert!(s.is_running(xa) && s.is_running(xb) && s.is_running(Xid(12)));
        assert!(!s.is_running(Xid(9)));
        // Vacuum's horizon: the oldest running id or snapshot xmin.
        assert_eq!(pa.global_xmin(Xid(next)), Xid(10));
        pa.end_xid(a);
        pa.end_prepared(xb);
        let s = pa.snapshot(a, || Xid(next));
        assert!(s.xip.is_empty() && !s.is_running(Xid(10)) && !s.is_running(Xid(11)));
        assert_eq!(
            pa.global_xmin(Xid(next)),
            Xid(12),
            "nothing older is running"
        );
    }

    #[test]
    fn the_subtransaction_map_is_read_only_while_subtransactions_run() {
        let pa = ProcArray::new(10);
        let (a, b) = (pa.register().unwrap(), pa.register().unwrap());
        let mut next = 10;
        let mut id = || {
            next += 1;
            Xid(next - 1)
        };
        let top = pa.assign_xid(a, &mut id);
        pa.assign_xid(b, &mut id);
        let s = pa.snapshot(b, || Xid(12));
        let no_map = |x: Xid| -> crate::error::Result<Xid> { panic!("map read for {x}") };
        assert!(!s.subxacts);
        assert!(!s.is_running_via(Xid(5), no_map).unwrap());
        let sub = pa.assign_subxid(a, &mut id);
        assert_eq!(sub, Xid(12));
        let s = pa.snapshot(b, || Xid(13));
        assert!(s.subxacts);
        assert!(s.is_running_via(sub, |_| Ok(top)).unwrap());
        // Prepared, the transaction's subtransactions still count.
        pa.prepare(a, top);
        assert!(pa.snapshot(b, || Xid(13)).subxacts);
        pa.end_prepared(top);
        assert!(!pa.snapshot(b, || Xid(13)).subxacts);
    }

    #[test]
    fn registration_is_bounded() {
        let pa = ProcArray::new(2);
        let a = pa.register().unwrap();
        pa.register().unwrap();
        assert!(pa.register().is_none());
        pa.unregister(a);
        assert!(pa.register().is_some());
    }
}
