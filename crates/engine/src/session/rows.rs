//! Row operations of a transaction: INSERT, sequential scans, fetch by TID, UPDATE, DELETE
//! and row locks, with the isolation rules of the module header applied in one loop
//! ([`Transaction::change_loop`]).

use super::{Changed, IsolationLevel, Sees, Transaction, MAX_CHANGE_ROUNDS};
use crate::catalog::{RowShape, TableDef, TableId};
use crate::error::{Error, Result};
use crate::heap::{Heap, HeapTuple, Looker, UpdateCheck};
use crate::toast::OldVersion;
use crate::page::Tid;

use crate::txn::lock::{LockMode, LockWait};
use crate::txn::{OwnXids, Snapshot};
use crate::types::{BlockNumber, RelFileLocator, Xid};
use crate::value::{Row, Value};

impl Transaction {
    /// Inserts a row; returns its address.
    pub fn insert(&self, table: TableId, row: &[Value]) -> Result<Tid> {
        self.call(|| {
            let (_, cid) = self.command();
            self.lock_table_mode(table, LockMode::RowExclusive, LockWait::Block)?;
            let (_, def) = self.def(table)?;
            def.check_row(row)?;
            let xid = self.ensure_xid()?;
            let indexes = self.indexes(table)?;
            let mut hint = self.st.borrow().targets.get(&def.rel).copied().flatten();
            let own = self.own();
            let heap = self.heap(def.rel);
            let tid = match self.store_row(&def, row, None, &self.writer(xid, cid, &own))? {
                Some(stored) => heap.insert(xid, cid, stored.fields.as_slice(), &mut hint)?,
                None => heap.insert(xid, cid, row, &mut hint)?,
            };
            {
                let mut st = self.st.borrow_mut();
                st.targets.insert(def.rel, hint);
                st.cid_used = true;
                st.changes.entry(table).or_default().inserted += 1;
            }
            self.add_index_entries(&def, &indexes, row, tid, xid)?;
            Ok(tid)
        })
    }

    /// The rows this transaction sees, streamed a page at a time.
    pub fn scan(&self, table: TableId) -> Result<Scan<'_>> {
        self.scan_as(table, Sees::Transaction)
    }

    /// [`Transaction::scan`] through the snapshot `sees` chooses.
    pub fn scan_as(&self, table: TableId, sees: Sees) -> Result<Scan<'_>> {
        self.call(|| {
            // The lock first, then the snapshot (PostgreSQL locks while parsing and takes
            // the execution snapshot after): a READ COMMITTED scan that waited for a TRUNCATE
            // or another lock holder sees what it committed.
            self.lock_table_mode(table, LockMode::AccessShare, LockWait::Block)?;
            let (snapshot, cid) = self.command_as(sees);
            let (_, def) = self.def(table)?;
            let nblocks = self.heap(def.rel).nblocks()?;
            Ok(Scan {
                tx: self,
                rel: def.rel,
                shape: def.shape(),
                snapshot,
                own: self.st.borrow().own.clone(),
                cid,
                next_block: 0,
                nblocks,
                ready: Vec::new(),
            })
        })
    }

    /// The row at `tid`, if this transaction sees that version.
    pub fn fetch(&self, table: TableId, tid: Tid) -> Result<Option<Row>> {
        self.call(|| {
            // The lock first, then the snapshot: see `scan`.
            self.lock_table_mode(table, LockMode::AccessShare, LockWait::Block)?;
            let (snapshot, cid) = self.command();
            let (_, def) = self.def(table)?;
            let own = self.st.borrow().own.clone();
            let looker = Looker {
                snapshot: &snapshot,
                own: &own,
                cid,
            };
            match self.heap(def.rel).fetch(tid)? {
                Some(t) if looker.sees(&t.header, &self.engine.txns)? => {
                    Ok(Some(def.widen(self.read_row(def.rel, &t)?)))
                }
                _ => Ok(None),
            }
        })
    }

    /// Replaces the row at `tid` with `row`.
    pub fn update(&self, table: TableId, tid: Tid, row: &[Value]) -> Result<Changed> {
        self.update_with(table, tid, |_| Some(row.to_vec()))
    }

    /// Replaces the row at `tid` with `new_row(current)`, computed from the row's newest
    /// version (under READ COMMITTED, after following concurrent updates); `None` skips it.
    pub fn update_with(
        &self,
        table: TableId,
        tid: Tid,
        mut new_row: impl FnMut(&Row) -> Option<Row>,
    ) -> Result<Changed> {
        self.call(|| {
            let (cid, def, xid) = self.begin_row_change(table, LockMode::RowExclusive)?;
            let indexes = self.indexes(table)?;
            let heap = self.heap(def.rel);
            let mut hint = self.st.borrow().targets.get(&def.rel).copied().flatten();
            let toast = self.toast(def.rel);
            let own = self.own();
            let w = self.writer(xid, cid, &own);
            let r = self.change_loop(&heap, tid, RowWait::Block, |t| {
                let (current, toasted) = toast.row_noting(t)?;
                let current = def.widen(current);
                let Some(row) = new_row(&current) else {
                    return Ok(Step::Declined);
                };
                def.check_row(&row)?;
                // HOT only if no indexed column changes: then no index needs an entry.
                let hot_ok = indexes
                    .iter()
                    .all(|i| super::index::same_key(&i.key_of(&current), &i.key_of(&row)));
                let old = OldVersion {
                    tuple: t,
                    row: &current,
                    toasted,
                };
                let stored = self.store_row(&def, &row, Some(&old), &w)?;
                let out = match &stored {
                    Some(s) => heap.update(t.tid, s.fields.as_slice(), &w, hot_ok, &mut hint)?,
                    None => heap.update(t.tid, &row, &w, hot_ok, &mut hint)?,
                };
                match (out.check, &stored) {
                    (UpdateCheck::Ok, _) => toast.delete_values(&old, stored.as_ref(), &w)?,
                    (_, Some(s)) => toast.discard(s, &w)?,
                    (_, None) => {}
                }
                drop(stored);
                if let (UpdateCheck::Ok, Some(new_tid), false) = (out.check, out.new_tid, out.hot) {
                    self.add_index_entries(&def, &indexes, &row, new_tid, xid)?;
                }
                Ok(Step::Tried(out.check, out.new_tid.map(|n| (n, row))))
            });
            let mut st = self.st.borrow_mut();
            st.targets.insert(def.rel, hint);
            st.cid_used = true;
            if let Ok(Changed::Done(..)) = r {
                st.changes.entry(table).or_default().updated += 1;
            }
            r
        })
    }

    /// Deletes the row at `tid`.
    pub fn delete(&self, table: TableId, tid: Tid) -> Result<Changed> {
        self.delete_if(table, tid, |_| true)
    }

    /// Deletes the row at `tid` if `keep_going(current)` says so, judged on the row's newest
    /// version (under READ COMMITTED, after following concurrent updates).
    pub fn delete_if(
        &self,
        table: TableId,
        tid: Tid,
        mut keep_going: impl FnMut(&Row) -> bool,
    ) -> Result<Changed> {
        self.call(|| {
            let (cid, def, xid) = self.begin_row_change(table, LockMode::RowExclusive)?;
            let heap = self.heap(def.rel);
            let toast = self.toast(def.rel);
            let own = self.own();
            let w = self.writer(xid, cid, &own);
            let r = self.change_loop(&heap, tid, RowWait::Block, |t| {
                let (current, toasted) = toast.row_noting(t)?;
                let current = def.widen(current);
                if !keep_going(&current) {
                    return Ok(Step::Declined);
                }
                let check = heap.delete(t.tid, &w)?;
                if check == UpdateCheck::Ok {
                    let old = OldVersion {
                        tuple: t,
                        row: &current,
                        toasted,
                    };
                    toast.delete_values(&old, None, &w)?;
                }
                Ok(Step::Tried(check, Some((t.tid, current))))
            });
            let mut st = self.st.borrow_mut();
            st.cid_used = true;
            if let Ok(Changed::Done(..)) = r {
                st.changes.entry(table).or_default().deleted += 1;
            }
            r
        })
    }

    /// SELECT ... FOR UPDATE of the row at `tid`: locks its newest version (under READ
    /// COMMITTED, after following concurrent updates) until the end of the transaction.
    pub fn lock_row(&self, table: TableId, tid: Tid) -> Result<Changed> {
        self.lock_row_waiting(table, tid, RowWait::Block)
    }

    /// [`Transaction::lock_row`], doing as `wait` says when another transaction holds the
    /// row (locked or being changed): wait for it, fail with `Error::LockNotAvailable`
    /// (55P03, NOWAIT), or skip it (`Changed::Skipped`, SKIP LOCKED).
    pub fn lock_row_waiting(&self, table: TableId, tid: Tid, wait: RowWait) -> Result<Changed> {
        self.call(|| {
            let (cid, def, xid) = self.begin_row_change(table, LockMode::RowShare)?;
            let heap = self.heap(def.rel);
            let r = self.change_loop(&heap, tid, wait, |t| {
                let current = def.widen(self.read_row(def.rel, t)?);
                let check = heap.lock_row(t.tid, &self.writer(xid, cid, &self.own()))?;
                Ok(Step::Tried(check, Some((t.tid, current))))
            });
            self.st.borrow_mut().cid_used = true;
            r
        })
    }

    /// What UPDATE, DELETE and row locks start with: the command id, the table lock in
    /// `mode`, the table's definition and the transaction id.
    fn begin_row_change(&self, table: TableId, mode: LockMode) -> Result<(u32, TableDef, Xid)> {
        let (_, cid) = self.command();
        self.lock_table_mode(table, mode, LockWait::Block)?;
        let (_, def) = self.def(table)?;
        let xid = self.ensure_xid()?;
        Ok((cid, def, xid))
    }

    /// The loop every row change runs: try; if the row is being changed, wait for the
    /// changer and try again; if it was changed by a committed transaction, follow it (READ
    /// COMMITTED) or fail (REPEATABLE READ). See the module header.
    fn change_loop(
        &self,
        heap: &Heap<'_>,
        mut tid: Tid,
        wait: RowWait,
        mut attempt: impl FnMut(&HeapTuple) -> Result<Step>,
    ) -> Result<Changed> {
        for _ in 0..MAX_CHANGE_ROUNDS {
            let Some(t) = heap.fetch(tid)? else {
                return Ok(Changed::Skipped);
            };
            let (check, done) = match attempt(&t)? {
                Step::Declined => return Ok(Changed::Skipped),
                Step::Tried(check, done) => (check, done),
            };
            match check {
                UpdateCheck::Ok => {
                    let (tid, row) = done.expect("a change that went through says where");
                    return Ok(Changed::Done(tid, row));
                }
                // Changed by this very command, or not a version this transaction sees (it
                // deleted it itself earlier, say): nothing to do, as PostgreSQL's
                // `DELETE ... WHERE ctid = ...` reports DELETE 0.
                UpdateCheck::SelfModified | UpdateCheck::Invisible => return Ok(Changed::Skipped),
                UpdateCheck::BeingModified { xmax } => match wait {
                    RowWait::Block => self.wait_for(xmax)?,
                    RowWait::Skip => return Ok(Changed::Skipped),
                    RowWait::NoWait => {
                        return Err(Error::LockNotAvailable {
                            what: format!("lock on row {tid}"),
                        })
                    }
                },
                UpdateCheck::Updated { next, .. } => {
                    if self.isolation == IsolationLevel::RepeatableRead {
                        return Err(Error::SerializationFailure {
                            reason: "concurrent update".into(),
                        });
                    }
                    tid = next;
                }
                UpdateCheck::Deleted { .. } => {
                    if self.isolation == IsolationLevel::RepeatableRead {
                        return Err(Error::SerializationFailure {
                            reason: "concurrent delete".into(),
                        });
                    }
                    return Ok(Changed::Skipped);
                }
            }
        }
        Err(Error::ProgramLimitExceeded {
            what: format!("row {tid} kept changing under this transaction"),
        })
    }
}

/// What a row lock does when another transaction holds the row (SELECT ... FOR UPDATE's
/// wait policy, PostgreSQL's `LockWaitPolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowWait {
    /// Wait for the holder's end.
    Block,
    /// `NOWAIT`: fail with 55P03.
    NoWait,
    /// `SKIP LOCKED`: leave the row out.
    Skip,
}

/// One attempt of a row change: declined by the caller's function, or tried with this
/// result (and, when it went through, the address and row to report).
enum Step {
    Declined,
    Tried(UpdateCheck, Option<(Tid, Row)>),
}

/// A sequential scan: the rows a transaction sees, a page at a time (memory: one page's
/// tuples, and the row being returned: a toasted value is read back only when its row is
/// next).
pub struct Scan<'t> {
    tx: &'t Transaction,
    rel: RelFileLocator,
    /// How stored rows read ([`crate::catalog::RowShape`]).
    shape: RowShape,
    snapshot: Snapshot,
    own: OwnXids,
    cid: u32,
    next_block: BlockNumber,
    nblocks: BlockNumber,
    /// The visible tuples of the last page read, last first.
    ready: Vec<HeapTuple>,
}

impl Scan<'_> {
    fn fill(&mut self) -> Result<()> {
        let heap = self.tx.heap(self.rel);
        let looker = Looker {
            snapshot: &self.snapshot,
            own: &self.own,
            cid: self.cid,
        };
        // Bounded by the table's size at the start of the scan.
        while self.ready.is_empty() && self.next_block < self.nblocks {
            heap.visible_in_block(
                self.next_block,
                &looker,
                &self.tx.engine.txns,
                &mut self.ready,
            )?;
            self.next_block += 1;
            self.ready.reverse();
        }
        Ok(())
    }

    fn next_row(&mut self) -> Result<Option<(Tid, Row)>> {
        if self.ready.is_empty() {
            self.fill()?;
        }
        let Some(t) = self.ready.pop() else {
            return Ok(None);
        };
        let row = self.shape.apply(self.tx.read_row(self.rel, &t)?);
        Ok(Some((t.tid, row)))
    }
}

impl Iterator for Scan<'_> {
    type Item = Result<(Tid, Row)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_row() {
            Ok(row) => row.map(Ok),
            Err(e) => {
                self.tx.st.borrow_mut().failed = true;
                self.next_block = self.nblocks;
                self.ready.clear();
                Some(Err(e))
            }
        }
    }
}
