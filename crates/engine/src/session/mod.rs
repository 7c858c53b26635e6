//! # session — the embedded API: one transaction's work
//!
//! [`Transaction`] is what a client (the SQL layer, or an embedding program) holds between
//! BEGIN and COMMIT: it takes table locks, assigns the transaction id at the first write,
//! chooses snapshots by isolation level, runs heap operations, waits for row-lock holders,
//! and applies the isolation rules when a row changed under it:
//!
//! | a row to change was, meanwhile, ... | READ COMMITTED                    | REPEATABLE READ |
//! |-------------------------------------|-----------------------------------|-----------------|
//! | being changed by a running txn      | wait for it, then look again      | wait, then look again |
//! | updated by a committed txn          | follow to the newest version and re-evaluate (PostgreSQL's EvalPlanQual) | SQLSTATE 40001 |
//! | deleted by a committed txn          | skip the row                      | SQLSTATE 40001  |
//!
//! So lost updates never happen at either level when the new value is computed from the
//! current one ([`Transaction::update_with`]).
//!
//! ## Rules
//! - Each call is one command (PostgreSQL's statement): it sees the effects of earlier calls
//!   of the transaction, not its own; a scan iterator keeps the command id it started with,
//!   so rows changed while iterating are not seen again (no Halloween problem).
//! - READ COMMITTED takes a new snapshot per call; REPEATABLE READ one per transaction.
//! - Locks taken automatically, as PostgreSQL's statements take them: reads ACCESS SHARE,
//!   writes ROW EXCLUSIVE, TRUNCATE and DROP ACCESS EXCLUSIVE; all held to the end.
//! - Any error aborts the transaction (as in PostgreSQL): later calls fail with SQLSTATE
//!   25P02 until rollback. Dropping an unfinished transaction rolls it back.

mod index;

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::catalog::{name_lock, Catalog, Column, Entry, IndexDef, TableDef, TableId, USER_DB};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::heap::{Heap, HeapTuple, Looker, UpdateCheck, Writer};
use crate::page::Tid;
use crate::recovery::rmid;
use crate::smgr::{BlockNumber, RelFileLocator};
use crate::stats::TableChanges;
use crate::txn::lock::{LockMode, LockTag, LockWait};
use crate::txn::twophase::{owner_of, PreparedState, MAX_STATE_BYTES};
use crate::txn::{now_micros, ProcId, Snapshot, PREPARE};
use crate::value::{Row, Value};
use crate::wal::WalRecord;
pub use index::IndexRows;

/// Transaction isolation levels (READ UNCOMMITTED behaves as READ COMMITTED, and
/// SERIALIZABLE is not provided, as its predicate locks are not built).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IsolationLevel {
    ReadCommitted,
    RepeatableRead,
}

/// Bounds the rounds of "wait for the holder, look again" and "follow the update chain" of
/// one call: far more than any real chain or wait sequence.
const MAX_CHANGE_ROUNDS: usize = 10_000;

/// What happened to a row a change was aimed at.
#[derive(Clone, Debug, PartialEq)]
pub enum Changed {
    /// Changed; for an update or a lock, where the row's (new) version is, with its row.
    Done(Tid, Row),
    /// The row was deleted meanwhile (READ COMMITTED), or the new value function declined
    /// it, or this command changed it already: nothing done.
    Skipped,
}

#[derive(Default)]
struct State {
    xid: u64,
    cid: u32,
    cid_used: bool,
    /// REPEATABLE READ: the transaction's snapshot.
    snapshot: Option<Snapshot>,
    failed: bool,
    finished: bool,
    /// Table locks held, by table: a bit per mode.
    locks: HashMap<TableId, u16>,
    defs: HashMap<TableId, (Tid, TableDef)>,
    targets: HashMap<RelFileLocator, Option<BlockNumber>>,
    drop_at_commit: Vec<RelFileLocator>,
    drop_at_abort: Vec<RelFileLocator>,
    /// Row changes by table, published to the statistics when the transaction ends.
    changes: HashMap<TableId, TableChanges>,
    /// The indexes of each table used, by table.
    index_defs: HashMap<TableId, Vec<IndexDef>>,
}

/// One transaction. Not shared between threads (it is `Send`, not `Sync`); many may run at
/// once on one [`Database`](crate::Database).
pub struct Transaction {
    engine: Arc<Engine>,
    proc: ProcId,
    isolation: IsolationLevel,
    st: RefCell<State>,
}

impl Transaction {
    pub(crate) fn begin(engine: Arc<Engine>, isolation: IsolationLevel) -> Result<Self> {
        let proc = engine.txns.register()?;
        Ok(Transaction {
            engine,
            proc,
            isolation,
            st: RefCell::new(State::default()),
        })
    }

    pub fn isolation(&self) -> IsolationLevel {
        self.isolation
    }

    /// The transaction id, if one was assigned (at the first write).
    pub fn xid(&self) -> Option<u64> {
        let x = self.st.borrow().xid;
        (x != 0).then_some(x)
    }

    /// The lock owner of this transaction (its process-array slot).
    fn owner(&self) -> u64 {
        self.proc
    }

    /// This transaction's session number: its lock owner, the "process" that deadlock
    /// reports name, and what [`LockManager::is_waiting`](crate::txn::lock::LockManager::is_waiting)
    /// takes.
    pub fn session_id(&self) -> u64 {
        self.proc
    }

    // ------------------------------------------------------------------ plumbing

    /// Runs one call: refuses if the transaction failed, marks it failed on error.
    fn call<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        {
            let st = self.st.borrow();
            if st.finished {
                return Err(Error::InvalidTransactionState {
                    what: "the transaction has ended".into(),
                });
            }
            if st.failed {
                return Err(Error::InFailedTransaction);
            }
        }
        let r = f();
        if r.is_err() {
            self.st.borrow_mut().failed = true;
        }
        r
    }

    /// Starts a command: a new command id if the last one changed anything, and a snapshot.
    fn command(&self) -> (Snapshot, u32) {
        let mut st = self.st.borrow_mut();
        if st.cid_used {
            st.cid += 1;
            st.cid_used = false;
        }
        let snap = if let (IsolationLevel::RepeatableRead, Some(s)) = (self.isolation, &st.snapshot)
        {
            s.clone()
        } else {
            let s = self.engine.txns.snapshot(self.proc);
            if self.isolation == IsolationLevel::RepeatableRead {
                st.snapshot = Some(s.clone());
            }
            s
        };
        (snap, st.cid)
    }

    fn ensure_xid(&self) -> Result<u64> {
        let x = self.st.borrow().xid;
        if x != 0 {
            return Ok(x);
        }
        let xid = self.engine.txns.assign_xid(self.proc);
        self.st.borrow_mut().xid = xid;
        self.engine.locks.acquire(
            self.owner(),
            LockTag::Transaction { xid },
            LockMode::Exclusive,
            LockWait::NoWait,
        )?;
        Ok(xid)
    }

    fn lock(&self, tag: LockTag, mode: LockMode, wait: LockWait) -> Result<()> {
        self.engine.locks.acquire(self.owner(), tag, mode, wait)
    }

    /// Takes `mode` on table `oid` unless held already.
    fn lock_table_mode(&self, oid: TableId, mode: LockMode, wait: LockWait) -> Result<()> {
        let bit = 1u16 << mode.to_u8();
        if self
            .st
            .borrow()
            .locks
            .get(&oid)
            .is_some_and(|m| m & bit != 0)
        {
            return Ok(());
        }
        self.lock(
            LockTag::Relation {
                db_oid: USER_DB,
                rel_oid: oid,
            },
            mode,
            wait,
        )?;
        *self.st.borrow_mut().locks.entry(oid).or_default() |= bit;
        Ok(())
    }

    /// The definition of table `oid` (the caller holds a lock on it).
    fn def(&self, oid: TableId) -> Result<(Tid, TableDef)> {
        if let Some(d) = self.st.borrow().defs.get(&oid) {
            return Ok(d.clone());
        }
        let found = self.catalog_lookup(|looker| {
            self.engine
                .catalog
                .by_oid(&self.catalog_heap(), oid, looker, &self.engine.txns)
        })?;
        let found = found.ok_or_else(|| Error::UndefinedTable {
            name: format!("with oid {oid}"),
        })?;
        self.st.borrow_mut().defs.insert(oid, found.clone());
        Ok(found)
    }

    fn writer(&self, xid: u64, cid: u32) -> Writer<'_> {
        Writer {
            xid,
            cid,
            oracle: &self.engine.txns,
        }
    }

    fn catalog_heap(&self) -> Heap<'_> {
        Catalog::heap(&self.engine.pool, &self.engine.wal)
    }

    fn heap(&self, rel: RelFileLocator) -> Heap<'_> {
        Heap::new(&self.engine.pool, &self.engine.wal, rel)
    }

    /// Waits until transaction `xid` has ended (PostgreSQL's `XactLockTableWait`).
    fn wait_for(&self, xid: u64) -> Result<()> {
        let tag = LockTag::Transaction { xid };
        for _ in 0..MAX_CHANGE_ROUNDS {
            if !self.engine.txns.is_running(xid) {
                return Ok(());
            }
            self.lock(tag, LockMode::Share, LockWait::Block)?;
            self.engine
                .locks
                .release(self.owner(), tag, LockMode::Share);
        }
        Err(Error::LockNotAvailable {
            what: format!("the end of transaction {xid} (it kept running)"),
        })
    }

    // ------------------------------------------------------------------ DDL

    /// A looker for catalog lookups: a fresh snapshot (the latest committed state, whatever
    /// the isolation level, as PostgreSQL's catalog scans use), and this transaction's own
    /// changes up to its current command.
    fn catalog_lookup<T>(&self, f: impl FnOnce(&Looker<'_>) -> Result<T>) -> Result<T> {
        let snap = self.engine.txns.snapshot(self.proc);
        let (xid, cid) = {
            let st = self.st.borrow();
            (st.xid, st.cid)
        };
        f(&Looker {
            snapshot: &snap,
            xid,
            cid: cid + 1,
        })
    }

    /// The relation (table or index) named `name`.
    fn lookup_name(&self, name: &str) -> Result<Option<Entry>> {
        self.catalog_lookup(|looker| {
            let e = self.engine.catalog.entry_by_name(
                &self.catalog_heap(),
                name,
                looker,
                &self.engine.txns,
            )?;
            Ok(e.map(|(_, e)| e))
        })
    }

    /// The relation (table or index) `oid`, with its catalog address.
    fn lookup_oid(&self, oid: u64) -> Result<Option<(Tid, Entry)>> {
        self.catalog_lookup(|looker| {
            self.engine
                .catalog
                .entry(&self.catalog_heap(), oid, looker, &self.engine.txns)
        })
    }

    /// The table named `name`, as this transaction sees the catalog now.
    pub fn table(&self, name: &str) -> Result<TableId> {
        self.call(|| {
            let found = self.catalog_lookup(|looker| {
                self.engine
                    .catalog
                    .by_name(&self.catalog_heap(), name, looker, &self.engine.txns)
            })?;
            found
                .map(|(_, d)| d.oid)
                .ok_or_else(|| Error::UndefinedTable {
                    name: name.to_string(),
                })
        })
    }

    /// The definition of a table.
    pub fn table_def(&self, table: TableId) -> Result<TableDef> {
        self.call(|| {
            self.lock_table_mode(table, LockMode::AccessShare, LockWait::Block)?;
            Ok(self.def(table)?.1)
        })
    }

    /// Every table this transaction can see, by name.
    pub fn tables(&self) -> Result<Vec<TableDef>> {
        self.call(|| {
            self.catalog_lookup(|looker| {
                self.engine
                    .catalog
                    .list(&self.catalog_heap(), looker, &self.engine.txns)
            })
        })
    }

    /// CREATE TABLE.
    pub fn create_table(&self, name: &str, columns: &[Column]) -> Result<TableId> {
        self.call(|| {
            self.command();
            let xid = self.ensure_xid()?;
            self.lock(name_lock(name), LockMode::Exclusive, LockWait::Block)?;
            if self.visible_name(name)? {
                return Err(Error::DuplicateTable { name: name.into() });
            }
            let oid = self.engine.new_oid();
            self.lock_table_mode(oid, LockMode::AccessExclusive, LockWait::NoWait)?;
            let def = TableDef {
                oid,
                name: name.to_string(),
                rel: RelFileLocator::new(USER_DB, oid),
                columns: columns.to_vec(),
            };
            self.heap(def.rel).create()?;
            self.st.borrow_mut().drop_at_abort.push(def.rel);
            let cid = self.st.borrow().cid;
            let mut hint = None;
            let tid = self
                .catalog_heap()
                .insert(xid, cid, &def.to_row(), &mut hint)?;
            self.engine.catalog.note(tid, &def);
            let mut st = self.st.borrow_mut();
            st.cid_used = true;
            st.defs.insert(oid, (tid, def));
            Ok(oid)
        })
    }

    fn visible_name(&self, name: &str) -> Result<bool> {
        Ok(self.lookup_name(name)?.is_some())
    }

    /// Replaces the catalog row at `tid` by `new`'s (or deletes it), under ACCESS EXCLUSIVE.
    fn rewrite_entry(&self, tid: Tid, new: Option<&Entry>) -> Result<()> {
        let xid = self.ensure_xid()?;
        let cid = self.st.borrow().cid;
        let heap = self.catalog_heap();
        let check = match new {
            Some(entry) => {
                let mut hint = None;
                let out = heap.update(
                    tid,
                    &entry.to_row(),
                    &self.writer(xid, cid),
                    true,
                    &mut hint,
                )?;
                if let Some(new_tid) = out.new_tid {
                    self.engine.catalog.note_entry(new_tid, entry);
                    if let Entry::Table(def) = entry {
                        self.st
                            .borrow_mut()
                            .defs
                            .insert(def.oid, (new_tid, def.clone()));
                    }
                }
                out.check
            }
            None => heap.delete(tid, &self.writer(xid, cid))?,
        };
        self.st.borrow_mut().cid_used = true;
        match check {
            UpdateCheck::Ok => Ok(()),
            other => Err(Error::SerializationFailure {
                reason: format!("a concurrent change of a relation's definition ({other:?})"),
            }),
        }
    }

    /// TRUNCATE: the table gets a new, empty relation file; the old one is dropped at commit
    /// (the new one at abort).
    pub fn truncate(&self, table: TableId) -> Result<()> {
        self.call(|| {
            self.command();
            self.lock_table_mode(table, LockMode::AccessExclusive, LockWait::Block)?;
            let (tid, def) = self.def(table)?;
            self.ensure_xid()?;
            let new_rel = RelFileLocator::new(USER_DB, self.engine.new_oid());
            self.heap(new_rel).create()?;
            self.st.borrow_mut().drop_at_abort.push(new_rel);
            let new_def = TableDef {
                rel: new_rel,
                ..def.clone()
            };
            self.rewrite_entry(tid, Some(&Entry::Table(new_def.clone())))?;
            self.truncate_indexes(&new_def)?;
            let mut st = self.st.borrow_mut();
            st.drop_at_commit.push(def.rel);
            st.targets.remove(&def.rel);
            Ok(())
        })
    }

    /// DROP TABLE: the definition is deleted; the file is dropped at commit.
    pub fn drop_table(&self, table: TableId) -> Result<()> {
        self.call(|| {
            self.command();
            self.lock_table_mode(table, LockMode::AccessExclusive, LockWait::Block)?;
            let (tid, def) = self.def(table)?;
            self.lock(name_lock(&def.name), LockMode::Exclusive, LockWait::Block)?;
            self.drop_indexes(table)?;
            self.rewrite_entry(tid, None)?;
            let mut st = self.st.borrow_mut();
            st.drop_at_commit.push(def.rel);
            st.defs.remove(&table);
            Ok(())
        })
    }

    /// LOCK TABLE: takes `mode` on the table until the end of the transaction; with
    /// `nowait`, fails at once (SQLSTATE 55P03) instead of waiting.
    pub fn lock_table(&self, table: TableId, mode: LockMode, nowait: bool) -> Result<()> {
        self.call(|| {
            let wait = if nowait {
                LockWait::NoWait
            } else {
                LockWait::Block
            };
            self.lock_table_mode(table, mode, wait)?;
            self.def(table).map(|_| ())
        })
    }

    // ------------------------------------------------------------------ rows

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
            let tid = self.heap(def.rel).insert(xid, cid, row, &mut hint)?;
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
        self.call(|| {
            // The lock first, then the snapshot (PostgreSQL locks while parsing and takes
            // the execution snapshot after): a READ COMMITTED scan that waited for a TRUNCATE
            // or another lock holder sees what it committed.
            self.lock_table_mode(table, LockMode::AccessShare, LockWait::Block)?;
            let (snapshot, cid) = self.command();
            let (_, def) = self.def(table)?;
            let nblocks = self.heap(def.rel).nblocks()?;
            Ok(Scan {
                tx: self,
                rel: def.rel,
                snapshot,
                xid: self.st.borrow().xid,
                cid,
                next_block: 0,
                nblocks,
                ready: VecDeque::new(),
                page: Vec::new(),
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
            let looker = Looker {
                snapshot: &snapshot,
                xid: self.st.borrow().xid,
                cid,
            };
            match self.heap(def.rel).fetch(tid)? {
                Some(t) if looker.sees(&t.header, &self.engine.txns)? => Ok(Some(t.row(def.rel)?)),
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
            let (_, cid) = self.command();
            self.lock_table_mode(table, LockMode::RowExclusive, LockWait::Block)?;
            let (_, def) = self.def(table)?;
            let xid = self.ensure_xid()?;
            let indexes = self.indexes(table)?;
            let heap = self.heap(def.rel);
            let mut hint = self.st.borrow().targets.get(&def.rel).copied().flatten();
            let r = self.change_loop(&heap, tid, |t| {
                let current = t.row(def.rel)?;
                let Some(row) = new_row(&current) else {
                    return Ok(Step::Declined);
                };
                def.check_row(&row)?;
                // HOT only if no indexed column changes: then no index needs an entry.
                let hot_ok = indexes
                    .iter()
                    .all(|i| index::same_key(&i.key_of(&current), &i.key_of(&row)));
                let out = heap.update(t.tid, &row, &self.writer(xid, cid), hot_ok, &mut hint)?;
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
            let (_, cid) = self.command();
            self.lock_table_mode(table, LockMode::RowExclusive, LockWait::Block)?;
            let (_, def) = self.def(table)?;
            let xid = self.ensure_xid()?;
            let heap = self.heap(def.rel);
            let r = self.change_loop(&heap, tid, |t| {
                let current = t.row(def.rel)?;
                if !keep_going(&current) {
                    return Ok(Step::Declined);
                }
                let check = heap.delete(t.tid, &self.writer(xid, cid))?;
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
        self.call(|| {
            let (_, cid) = self.command();
            self.lock_table_mode(table, LockMode::RowShare, LockWait::Block)?;
            let (_, def) = self.def(table)?;
            let xid = self.ensure_xid()?;
            let heap = self.heap(def.rel);
            let r = self.change_loop(&heap, tid, |t| {
                let current = t.row(def.rel)?;
                let check = heap.lock_row(t.tid, &self.writer(xid, cid))?;
                Ok(Step::Tried(check, Some((t.tid, current))))
            });
            self.st.borrow_mut().cid_used = true;
            r
        })
    }

    /// The loop every row change runs: try; if the row is being changed, wait for the
    /// changer and try again; if it was changed by a committed transaction, follow it (READ
    /// COMMITTED) or fail (REPEATABLE READ). See the module header.
    fn change_loop(
        &self,
        heap: &Heap<'_>,
        mut tid: Tid,
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
                UpdateCheck::BeingModified { xmax } => self.wait_for(xmax)?,
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

    // ------------------------------------------------------------------ ending

    /// COMMIT. A failed transaction is rolled back instead, and the error says so.
    pub fn commit(self) -> Result<()> {
        if self.st.borrow().failed {
            self.finish(false)?;
            return Err(Error::InFailedTransaction);
        }
        self.finish(true)
    }

    /// ROLLBACK.
    pub fn rollback(self) -> Result<()> {
        self.finish(false)
    }

    fn finish(&self, commit: bool) -> Result<()> {
        let (xid, drops, changes) = {
            let mut st = self.st.borrow_mut();
            if st.finished {
                return Ok(());
            }
            st.finished = true;
            let drops = if commit {
                std::mem::take(&mut st.drop_at_commit)
            } else {
                std::mem::take(&mut st.drop_at_abort)
            };
            (st.xid, drops, std::mem::take(&mut st.changes))
        };
        let result = if xid == 0 {
            Ok(())
        } else if commit {
            self.engine.txns.commit(self.proc, xid, &drops).map(|_| ())
        } else {
            self.engine.txns.abort(self.proc, xid, &drops).map(|_| ())
        };
        self.engine.locks.release_all(self.owner());
        self.engine.txns.procs().unregister(self.proc);
        self.engine
            .table_stats
            .report(&changes, commit && result.is_ok());
        result
    }

    /// PREPARE TRANSACTION `gid`: the transaction's fate is decided later, by
    /// [`Database::commit_prepared`](crate::Database::commit_prepared) or
    /// [`Database::rollback_prepared`](crate::Database::rollback_prepared), from any session,
    /// after any crash; until then it keeps its locks.
    pub fn prepare(self, gid: &str) -> Result<()> {
        if self.st.borrow().failed {
            self.finish(false)?;
            return Err(Error::InFailedTransaction);
        }
        let e = &self.engine;
        if let Err(err) = e.twophase.reserve(gid) {
            self.finish(false)?;
            return Err(err);
        }
        let result = self.write_prepare(gid);
        if result.is_err() {
            e.twophase.unreserve(gid);
            self.finish(false)?;
            return result;
        }
        self.st.borrow_mut().finished = true;
        Ok(())
    }

    fn write_prepare(&self, gid: &str) -> Result<()> {
        let e = &self.engine;
        let xid = self.ensure_xid()?;
        let state = {
            let st = self.st.borrow();
            PreparedState {
                xid,
                gid: gid.to_string(),
                prepared_at_micros: now_micros(),
                locks: e.locks.locks_of(self.owner()),
                commit_drops: st.drop_at_commit.clone(),
                abort_drops: st.drop_at_abort.clone(),
            }
        };
        let main = state.encode();
        if main.len() > MAX_STATE_BYTES {
            return Err(Error::ProgramLimitExceeded {
                what: format!(
                    "the transaction holds too many locks and files to prepare ({} bytes of state, at most {MAX_STATE_BYTES})",
                    main.len()
                ),
            });
        }
        {
            let _delay = e.wal.delay_checkpoint();
            let (start, end) = e.wal.insert(&WalRecord {
                xid,
                rmid: rmid::TXN,
                info: PREPARE,
                blocks: &[],
                main: &main,
            })?;
            e.wal.flush(end)?;
            e.twophase.prepared(state, start, end);
        }
        e.txns.procs().prepare(self.proc, xid);
        e.locks.transfer_all(self.owner(), owner_of(xid));
        e.txns.procs().unregister(self.proc);
        e.twophase.ready(gid);
        // Counted as committed: most prepared transactions are (an estimate either way).
        let changes = std::mem::take(&mut self.st.borrow_mut().changes);
        e.table_stats.report(&changes, true);
        Ok(())
    }
}

impl Transaction {
    /// The transaction vanishes without ending, as if its process died: nothing is written,
    /// nothing is released. For crash tests, which then crash the simulated file system and
    /// reopen (recovery aborts it); a real program rolls back instead.
    pub fn vanish(self) {
        self.st.borrow_mut().finished = true;
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if let Err(e) = self.finish(false) {
            // Handled here: nobody is left to return it to.
            tracing::error!(error = %e, "rolling back a dropped transaction failed");
        }
    }
}

/// One attempt of a row change: declined by the caller's function, or tried with this
/// result (and, when it went through, the address and row to report).
enum Step {
    Declined,
    Tried(UpdateCheck, Option<(Tid, Row)>),
}

/// A sequential scan: the rows a transaction sees, a page at a time (memory: one page's
/// worth of rows).
pub struct Scan<'t> {
    tx: &'t Transaction,
    rel: RelFileLocator,
    snapshot: Snapshot,
    xid: u64,
    cid: u32,
    next_block: BlockNumber,
    nblocks: BlockNumber,
    ready: VecDeque<(Tid, Row)>,
    page: Vec<HeapTuple>,
}

impl Scan<'_> {
    fn fill(&mut self) -> Result<()> {
        let heap = self.tx.heap(self.rel);
        let looker = Looker {
            snapshot: &self.snapshot,
            xid: self.xid,
            cid: self.cid,
        };
        // Bounded by the table's size at the start of the scan.
        while self.ready.is_empty() && self.next_block < self.nblocks {
            self.page.clear();
            heap.visible_in_block(
                self.next_block,
                &looker,
                &self.tx.engine.txns,
                &mut self.page,
            )?;
            self.next_block += 1;
            for t in self.page.drain(..) {
                let row = t.row(self.rel)?;
                self.ready.push_back((t.tid, row));
            }
        }
        Ok(())
    }
}

impl Iterator for Scan<'_> {
    type Item = Result<(Tid, Row)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.ready.is_empty() {
            if let Err(e) = self.fill() {
                self.tx.st.borrow_mut().failed = true;
                self.next_block = self.nblocks;
                return Some(Err(e));
            }
        }
        self.ready.pop_front().map(Ok)
    }
}
