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
//! - READ COMMITTED takes a new snapshot per call, or one per statement between
//!   `begin_statement` and `end_statement` (the SQL layer's); REPEATABLE READ one per
//!   transaction. A read that asks for [`Sees::Latest`] takes a new one whatever the level.
//! - Locks taken automatically, as PostgreSQL's statements take them: reads ACCESS SHARE,
//!   writes ROW EXCLUSIVE, TRUNCATE and DROP ACCESS EXCLUSIVE; all held to the end.
//! - Any error aborts the transaction (as in PostgreSQL): later calls fail with SQLSTATE
//!   25P02 until rollback, or until ROLLBACK TO SAVEPOINT undoes the savepoint's work
//!   ([`savepoint`]). Dropping an unfinished transaction rolls it back.
//!
//! ## Files
//! `mod.rs` holds the transaction's state and the plumbing every operation uses (command
//! snapshots, the transaction id, locks, waits); `ddl.rs` tables and LOCK TABLE; `index.rs`
//! indexes and index scans; `rows.rs` row operations and sequential scans; `sequence.rs`
//! sequences (CREATE/DROP, and `nextval`, which is not transactional); `end.rs` COMMIT,
//! ROLLBACK and PREPARE TRANSACTION; `savepoint.rs` SAVEPOINT, ROLLBACK TO and RELEASE.

mod advisory;
pub use advisory::{AdvisoryKey, AdvisoryRequest};
mod ddl;
mod end;
mod index;
mod rows;
mod savepoint;
mod sequence;
mod view;

use std::cell::RefCell;
use std::sync::Arc;

use crate::catalog::{Catalog, Entry, IndexDef, TableDef, TableId, USER_DB};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::heap::{Heap, HeapTuple, Writer};
use crate::page::Tid;

use crate::stats::TableChanges;
use crate::txn::lock::{LockMode, LockOwner, LockTag, LockWait};
use crate::txn::{OwnXids, ProcId, Snapshot};
use crate::types::{BlockNumber, RelFileLocator, Xid};
use crate::toast::{OldVersion, Storage, StoredRow, Toast};
use crate::value::{Row, Value};
pub use index::IndexRows;
pub use rows::{RowWait, Scan};

/// Which snapshot a read takes: the transaction's (a new one per command under READ
/// COMMITTED, the first one under REPEATABLE READ), or a new one whatever the level.
/// Referential integrity reads with `Latest` (PostgreSQL's crosscheck snapshot): a row a
/// transaction committed after a REPEATABLE READ snapshot must still be found, to fail the
/// statement (40001) rather than orphan it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sees {
    Transaction,
    Latest,
}

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

// Independent facts about one transaction, not a state machine in disguise.
#[allow(clippy::struct_excessive_bools)]
#[derive(Default)]
struct State {
    /// The top-level transaction id (invalid until the first write).
    xid: Xid,
    /// The ids whose changes are this transaction's own: `xid`, then the live
    /// subtransactions' ids.
    own: OwnXids,
    /// Open savepoints, innermost last ([`savepoint`]).
    subs: Vec<savepoint::Level>,
    /// While a savepoint is open: every lock taken through [`Transaction::lock`], in order,
    /// so that ROLLBACK TO releases those taken since its savepoint.
    taken: Vec<(LockTag, LockMode)>,
    cid: u32,
    cid_used: bool,
    /// REPEATABLE READ: the transaction's snapshot.
    snapshot: Option<Snapshot>,
    /// READ COMMITTED, between [`Transaction::begin_statement`] and `end_statement`.
    in_statement: bool,
    /// The statement's snapshot, taken at its first read (a statement that reads nothing,
    /// an INSERT of values, takes none).
    statement: Option<Snapshot>,
    failed: bool,
    finished: bool,
    /// Table locks held, by table: a bit per mode.
    locks: FxHashMap<TableId, u16>,
    defs: FxHashMap<TableId, (Tid, TableDef)>,
    targets: FxHashMap<RelFileLocator, Option<BlockNumber>>,
    drop_at_commit: Vec<RelFileLocator>,
    drop_at_abort: Vec<RelFileLocator>,
    /// Row changes by table, published to the statistics when the transaction ends.
    changes: FxHashMap<TableId, TableChanges>,
    /// The indexes of each table used, by table.
    index_defs: FxHashMap<TableId, Vec<IndexDef>>,
    /// A definition changed: the catalog's generation moves again when the transaction ends.
    definitions_changed: bool,
    /// `lock_timeout` for the waits of the running statement ([`Transaction::set_lock_timeout`]).
    lock_timeout_ms: Option<u64>,
}

/// One transaction. Not shared between threads (it is `Send`, not `Sync`); many may run at
/// once on one [`Database`](crate::Database).
pub struct Transaction {
    engine: Arc<Engine>,
    proc: ProcId,
    /// Who holds the transaction's locks: its client session's owner
    /// ([`LockOwner::backend`]), or, for a transaction begun without one, its slot's.
    owner: LockOwner,
    isolation: IsolationLevel,
    st: RefCell<State>,
}

impl Transaction {
    pub(crate) fn begin(
        engine: Arc<Engine>,
        isolation: IsolationLevel,
        owner: Option<LockOwner>,
    ) -> Result<Self> {
        engine.check_health()?;
        let proc = engine.txns.register()?;
        Ok(Transaction {
            engine,
            proc,
            owner: owner.unwrap_or(LockOwner::session(proc)),
            isolation,
            st: RefCell::new(State::default()),
        })
    }

    pub fn isolation(&self) -> IsolationLevel {
        self.isolation
    }

    /// The transaction id, if one was assigned (at the first write).
    pub fn xid(&self) -> Option<Xid> {
        let x = self.st.borrow().xid;
        x.is_valid().then_some(x)
    }

    /// The lock owner of this transaction.
    fn owner(&self) -> LockOwner {
        self.owner
    }

    /// This transaction's session number: its lock owner, the "process" that deadlock
    /// reports name, and what [`LockManager::is_waiting`](crate::txn::lock::LockManager::is_waiting)
    /// takes.
    pub fn session_id(&self) -> LockOwner {
        self.owner()
    }

    // ------------------------------------------------------------------ plumbing

    /// Runs one call: refuses if the transaction or the engine failed, marks the transaction
    /// failed on error.
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
        let r = self.engine.check_health().and_then(|()| f());
        if let Err(e) = &r {
            self.engine.note_failure(e);
            self.st.borrow_mut().failed = true;
        }
        r
    }

    /// Marks that this transaction changed a definition (a catalog row, or a table the SQL
    /// layer keeps definitions in): plan caches see a new catalog generation now and again
    /// when the transaction ends, before its locks go.
    pub fn note_definition_change(&self) {
        self.st.borrow_mut().definitions_changed = true;
        self.engine.catalog.invalidate();
    }

    /// A statement begins (PostgreSQL's statement snapshot): under READ COMMITTED, every
    /// read until [`Transaction::end_statement`] sees the database as of its first read, as one
    /// statement's scans must (a join reads its tables in the same state), and its own
    /// changes by command id as ever. Reads with [`Sees::Latest`] still look at the newest
    /// state. REPEATABLE READ keeps its transaction snapshot; this changes nothing there.
    pub fn begin_statement(&self) {
        let mut st = self.st.borrow_mut();
        st.in_statement = self.isolation == IsolationLevel::ReadCommitted;
        st.statement = None;
    }

    /// The statement [`Transaction::begin_statement`] began has ended: under READ COMMITTED
    /// each call takes a new snapshot again.
    pub fn end_statement(&self) {
        let mut st = self.st.borrow_mut();
        st.in_statement = false;
        st.statement = None;
    }

    /// Starts a command: a new command id if the last one changed anything, and a snapshot.
    fn command(&self) -> (Snapshot, u32) {
        self.command_as(Sees::Transaction)
    }

    /// [`Transaction::command`] with the snapshot `sees` asks for.
    fn command_as(&self, sees: Sees) -> (Snapshot, u32) {
        let mut st = self.st.borrow_mut();
        if st.cid_used {
            st.cid += 1;
            st.cid_used = false;
        }
        let snap = if let (IsolationLevel::RepeatableRead, Some(s), Sees::Transaction) =
            (self.isolation, &st.snapshot, sees)
        {
            s.clone()
        } else if sees == Sees::Latest {
            self.engine.txns.snapshot(self.proc)
        } else if self.isolation == IsolationLevel::ReadCommitted && st.in_statement {
            st.statement
                .get_or_insert_with(|| self.engine.txns.snapshot(self.proc))
                .clone()
        } else {
            let s = self.engine.txns.snapshot(self.proc);
            if self.isolation == IsolationLevel::RepeatableRead {
                st.snapshot = Some(s.clone());
            }
            s
        };
        (snap, st.cid)
    }

    /// The id a write is stamped with: the innermost savepoint's subtransaction id, or the
    /// top-level id; assigned at the first write (parents first, as PostgreSQL does).
    fn ensure_xid(&self) -> Result<Xid> {
        let top = self.ensure_top_xid()?;
        self.ensure_subxids(top)
    }

    /// The top-level transaction id, assigned if not yet.
    fn ensure_top_xid(&self) -> Result<Xid> {
        let x = self.st.borrow().xid;
        if x.is_valid() {
            return Ok(x);
        }
        let xid = self.engine.txns.assign_xid(self.proc);
        {
            let mut st = self.st.borrow_mut();
            st.xid = xid;
            st.own = OwnXids::single(xid);
        }
        self.lock_own_xid(xid)?;
        Ok(xid)
    }

    /// Every waiter for `xid` (PostgreSQL's `XactLockTableWait`) queues on this lock until
    /// the id's work ends: at the top-level end, or at ROLLBACK TO SAVEPOINT for a
    /// subtransaction's.
    fn lock_own_xid(&self, xid: Xid) -> Result<()> {
        self.engine.locks.acquire(
            self.owner(),
            LockTag::Transaction { xid },
            LockMode::Exclusive,
            LockWait::NoWait,
        )
    }

    /// The transaction's own ids as they are now.
    fn own(&self) -> OwnXids {
        self.st.borrow().own.clone()
    }

    /// Takes a lock held to the transaction's end (or to a ROLLBACK TO SAVEPOINT past it).
    fn lock(&self, tag: LockTag, mode: LockMode, wait: LockWait) -> Result<()> {
        self.lock_unlogged(tag, mode, wait)?;
        let mut st = self.st.borrow_mut();
        if !st.subs.is_empty() {
            st.taken.push((tag, mode));
        }
        Ok(())
    }

    /// Takes a lock the caller releases itself.
    fn lock_unlogged(&self, tag: LockTag, mode: LockMode, wait: LockWait) -> Result<()> {
        let wait = self.effective_wait(wait);
        self.engine.locks.acquire(self.owner(), tag, mode, wait)
    }

    /// `wait` under the transaction's `lock_timeout`.
    fn effective_wait(&self, wait: LockWait) -> LockWait {
        match (wait, self.st.borrow().lock_timeout_ms) {
            (LockWait::Block, Some(ms)) => LockWait::TimeoutMs(ms),
            (wait, _) => wait,
        }
    }

    /// `lock_timeout`: every later wait for a lock (a table's, a row's, another
    /// transaction's end) gives up after `ms` with `Error::LockTimeout`; `None` waits as
    /// long as it takes (until a deadlock is found or the wait is cancelled).
    pub fn set_lock_timeout(&self, ms: Option<u64>) {
        self.st.borrow_mut().lock_timeout_ms = ms.filter(|&ms| ms > 0);
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
        let Some((tid, Entry::Table(def))) = self.lookup_oid(oid)? else {
            return Err(Error::UndefinedTable {
                name: format!("with oid {oid}"),
            });
        };
        let found = (tid, def);
        self.st.borrow_mut().defs.insert(oid, found.clone());
        Ok(found)
    }

    fn writer<'a>(&'a self, xid: Xid, cid: u32, own: &'a OwnXids) -> Writer<'a> {
        Writer {
            xid,
            cid,
            oracle: &self.engine.txns,
            own,
        }
    }

    fn catalog_heap(&self) -> Heap<'_> {
        Catalog::heap(&self.engine.pool, &self.engine.wal)
    }

    fn heap(&self, rel: RelFileLocator) -> Heap<'_> {
        Heap::new(&self.engine.pool, &self.engine.wal, rel)
    }

    /// TOAST of the table whose relation is `rel`.
    fn toast(&self, rel: RelFileLocator) -> Toast<'_> {
        Toast::new(&self.engine.pool, &self.engine.wal, rel)
    }

    /// The row of a table's tuple, its toasted values read back.
    fn read_row(&self, rel: RelFileLocator, t: &HeapTuple) -> Result<Row> {
        self.toast(rel).row(t)
    }

    /// `row` as table `def` stores it (TOAST's work), or `None` when it is stored as it
    /// is. `old`: the version an update replaces.
    fn store_row<'r>(
        &self,
        def: &TableDef,
        row: &'r [Value],
        old: Option<&OldVersion<'_>>,
        w: &Writer<'_>,
    ) -> Result<Option<StoredRow<'r>>> {
        let rel = def.rel;
        let storage = |i: usize| def.columns.get(i).map_or(Storage::Plain, |c| c.storage);
        self.toast(rel).store(row, &storage, old, w, &mut || self.engine.new_oid().0, &|| {
            self.create_toast(rel)
        })
    }

    /// Creates the TOAST relation of `rel` if it does not exist yet. When `rel` itself goes
    /// at this transaction's abort (created by it), its TOAST relation goes with it.
    fn create_toast(&self, rel: RelFileLocator) -> Result<()> {
        let toast = self.toast(rel);
        if toast.exists()? {
            return Ok(());
        }
        let _creating = self.engine.toast_create.lock();
        if toast.exists()? {
            return Ok(());
        }
        toast.heap().create()?;
        let mut st = self.st.borrow_mut();
        if st.drop_at_abort.contains(&rel) {
            st.drop_at_abort.push(rel.toast());
        }
        Ok(())
    }

    /// The relations a table's drop removes: its own and, if it has one, its TOAST
    /// relation's.
    fn table_files(&self, rel: RelFileLocator) -> Result<Vec<RelFileLocator>> {
        let mut files = vec![rel];
        if self.toast(rel).exists()? {
            files.push(rel.toast());
        }
        Ok(files)
    }

    /// Waits until transaction `xid` has ended (PostgreSQL's `XactLockTableWait`).
    fn wait_for(&self, xid: Xid) -> Result<()> {
        let tag = LockTag::Transaction { xid };
        for _ in 0..MAX_CHANGE_ROUNDS {
            if !self.engine.txns.is_running(xid) {
                return Ok(());
            }
            self.lock_unlogged(tag, LockMode::Share, LockWait::Block)?;
            self.engine
                .locks
                .release(self.owner(), tag, LockMode::Share);
        }
        Err(Error::LockNotAvailable {
            what: format!("the end of transaction {xid} (it kept running)"),
        })
    }
}

#[cfg(any(test, feature = "testing"))]
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
