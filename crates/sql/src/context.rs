//! What a statement's expressions and plans are evaluated against: the database, the
//! transaction, the parameters, the session's settings, interrupt and prepared statements,
//! and the rows of the enclosing query levels ([`Frame`]). Built by the session for each execution.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use quire_engine::{Database, Row, Transaction, Value};

use crate::settings::Settings;

/// The rows of the enclosing query levels, innermost first (a linked list on the stack:
/// a subquery pushes its outer row for the time it runs).
#[derive(Clone, Copy)]
pub(crate) struct Frame<'a> {
    pub row: &'a [Value],
    pub up: Option<&'a Frame<'a>>,
}

/// The rows of a statement's materialized common table expressions and of its recursive
/// CTEs' working tables, by id: a CTE is computed once and read by each of its scans.
#[derive(Default)]
pub(crate) struct CteStore(RefCell<HashMap<usize, Rc<Vec<Row>>>>);

impl CteStore {
    /// Sets the rows of `id` (replacing what it had: a CTE of a subquery run again).
    pub(crate) fn set(&self, id: usize, rows: Rc<Vec<Row>>) {
        self.0.borrow_mut().insert(id, rows);
    }

    /// The rows of `id`, if they were set.
    pub(crate) fn get(&self, id: usize) -> Option<Rc<Vec<Row>>> {
        self.0.borrow().get(&id).cloned()
    }
}

/// A named prepared statement of the session, as `pg_prepared_statements` shows it: SQL's
/// PREPARE (`from_sql`) or the protocol's Parse.
#[derive(Clone, Debug)]
pub(crate) struct PreparedInfo {
    pub statement: String,
    pub prepare_time_us: i64,
    pub parameter_types: Vec<crate::types::SqlType>,
    pub result_types: Vec<crate::types::SqlType>,
    pub from_sql: bool,
    /// Executions (quire's plans are generic: the parameters' values reach them at run time).
    pub generic_plans: i64,
}

/// The session's named prepared statements, by name.
pub(crate) type PreparedStatements = std::collections::BTreeMap<String, PreparedInfo>;

/// An open cursor of the session, as `pg_cursors` shows it.
#[derive(Clone, Debug)]
pub(crate) struct CursorInfo {
    pub statement: String,
    pub holdable: bool,
    pub scrollable: bool,
    pub creation_time_us: i64,
}

/// The session's open cursors, by name.
pub(crate) type CursorList = std::collections::BTreeMap<String, CursorInfo>;

/// Referential-integrity events waiting for their check, by foreign key (its oid): each
/// foreign key's in a spool of its own (in memory up to `work_mem`, then a temp file), as
/// `session::referential` encodes them.
#[derive(Default)]
pub(crate) struct RiQueue {
    pub by_key: std::collections::BTreeMap<u32, crate::spool::Spool>,
}

impl RiQueue {
    pub(crate) fn is_empty(&self) -> bool {
        self.by_key.values().all(crate::spool::Spool::is_empty)
    }
}

/// What a transaction keeps for its deferred foreign keys: the checks left for its end,
/// and the modes SET CONSTRAINTS gave (for ALL, and by constraint oid).
#[derive(Default)]
pub(crate) struct Deferred {
    pub queue: RefCell<RiQueue>,
    pub all: std::cell::Cell<Option<bool>>,
    pub named: RefCell<HashMap<u32, bool>>,
}

impl Deferred {
    /// Forgets everything (the transaction ended).
    pub(crate) fn clear(&self) {
        *self.queue.borrow_mut() = RiQueue::default();
        self.all.set(None);
        self.named.borrow_mut().clear();
    }
}

/// What a statement's expressions are evaluated against.
pub(crate) struct Cx<'a> {
    pub db: &'a Database,
    pub tx: &'a Transaction,
    pub params: &'a [Value],
    pub settings: &'a Settings,
    pub interrupt: &'a crate::interrupt::Interrupt,
    /// The session as the registry of sessions knows it (`pg_backend_pid`, signals).
    pub backend: &'a crate::backends::Backend,
    /// The session's `currval` values.
    pub sequences: &'a crate::sequence::SessionSequences,
    /// The session's named prepared statements (`pg_prepared_statements`).
    pub prepared: &'a PreparedStatements,
    /// The session's open cursors (`pg_cursors`).
    pub cursors: &'a CursorList,
    /// The statement's start (`now()`, `CURRENT_TIMESTAMP`), microseconds since 1970.
    pub now_us: i64,
    pub outer: Option<&'a Frame<'a>>,
    /// The statement's CTE rows and working tables.
    pub ctes: &'a CteStore,
    /// The transaction's deferred foreign-key checks and SET CONSTRAINTS modes.
    pub deferred: &'a Deferred,
}

impl<'a> Cx<'a> {
    /// The same context with `row` as the innermost outer row (for a subquery or the right
    /// side of a LATERAL join).
    pub(crate) fn nested<'b>(&'b self, frame: &'b Frame<'b>) -> Cx<'b>
    where
        'a: 'b,
    {
        Cx {
            db: self.db,
            tx: self.tx,
            params: self.params,
            settings: self.settings,
            interrupt: self.interrupt,
            backend: self.backend,
            sequences: self.sequences,
            prepared: self.prepared,
            cursors: self.cursors,
            now_us: self.now_us,
            outer: Some(frame),
            ctes: self.ctes,
            deferred: self.deferred,
        }
    }
}
