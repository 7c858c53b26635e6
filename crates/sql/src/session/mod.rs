//! A SQL session: the transaction state of one client connection (idle, inside a BEGIN
//! block, or in a block an error aborted), its settings (SET/SHOW), an ongoing COPY FROM
//! STDIN, and the execution of bound plans through the engine's [`Transaction`]. A session
//! is synchronous and not shared: the server gives each connection a thread of its own that
//! owns its `Session`.
//!
//! - this file: the session's states and transaction control (BEGIN/COMMIT/ROLLBACK, an
//!   error aborting a block, the implicit transaction of a multi-statement query, PREPARE
//!   TRANSACTION, COMMIT/ROLLBACK PREPARED), VACUUM and CHECKPOINT;
//! - `exec`: a bound plan executed in a transaction;
//! - `copy_in`: COPY FROM STDIN and TO STDOUT;
//! - `settings`: SET, SHOW and RESET; who the session acts as (login, role statements);
//! - `commands`: BEGIN's and SET TRANSACTION's modes, PREPARE / EXECUTE / DEALLOCATE,
//!   DISCARD, and the read-only transaction's refusals (25006).
//!
//! Every end of a transaction the session runs (COMMIT, ROLLBACK, an error, a statement's
//! own transaction, an implicit block, Sync) tells the settings whether it committed
//! ([`crate::settings`]: SET LOCAL goes, a rolled-back SET is undone).

use std::sync::Arc;

use quire_engine::{Database, IsolationLevel, LockOwner, Row, SqlState, Transaction, Value};

use crate::analyze;
use crate::analyze::SavepointCommand;
use crate::backends::{Backend, Backends};
use crate::catalog::{self, TableInfo};
use crate::error::{Notice, Result, SqlError};
use crate::interrupt::Interrupt;
use crate::nodes::{self, OutColumns, Plan};
use crate::parse::{CopyStmt, Statement, VacuumStmt};
use crate::settings::PlannerSwitches;
use crate::shape::{self, Shape};
use crate::types::SqlType;

/// Which protocol a statement came by: a write of the extended protocol outside a block
/// lasts to the next Sync; the simple protocol's commits at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    Simple,
    Extended,
}

/// The transaction status a client sees (ReadyForQuery's I, T, E).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxStatus {
    Idle,
    InBlock,
    Failed,
}

/// What a statement did.
#[derive(Debug)]
pub struct Outcome {
    /// PostgreSQL's command tag: `INSERT 0 2`, `SELECT 1`, `CREATE TABLE`, ...
    pub tag: String,
    pub kind: OutcomeKind,
    /// Messages for the client (NoticeResponse), such as VACUUM VERBOSE's report.
    pub notices: Vec<Notice>,
}

#[derive(Debug)]
pub enum OutcomeKind {
    Command,
    /// BEGIN: a transaction block started (or was already open).
    BlockStart,
    /// COMMIT or ROLLBACK: the block ended.
    BlockEnd,
    Rows {
        columns: OutColumns,
        rows: Vec<Row>,
    },
    /// COPY FROM STDIN started: the client now sends CopyData; the server passes it to
    /// [`Session::copy_data`] and ends with [`Session::copy_done`] or [`Session::copy_fail`].
    CopyIn {
        columns: usize,
        binary: bool,
    },
    /// COPY TO STDOUT: the lines to send as CopyData (the tag is `COPY n`).
    CopyOut {
        columns: usize,
        lines: Vec<Vec<u8>>,
    },
}

/// How long a client may leave its session waiting for the next command before the server
/// ends the connection, and with which FATAL error (PostgreSQL's
/// `idle_in_transaction_session_timeout` and `idle_session_timeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleLimit {
    pub after: std::time::Duration,
    pub sqlstate: SqlState,
    pub message: &'static str,
}

/// A statement's parameter types and output columns (Describe).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Description {
    pub params: Vec<SqlType>,
    pub columns: OutColumns,
}

/// Where a statement's results go as the executor produces them: the server writes each row
/// to its client as it comes (bounded memory whatever the result's size), an in-process
/// caller collects them ([`Session::execute_query`] and its kin).
///
/// A failed call (the client went away, a protocol limit) ends the statement with that
/// error, as any error of the statement would.
pub trait Output {
    /// Rows follow, of these columns: once per statement that returns rows, before its first
    /// row (also when it returns none).
    fn rows(&mut self, columns: &OutColumns) -> Result<()>;
    /// One row of the statement's result.
    fn row(&mut self, row: &[Value]) -> Result<()>;
    /// COPY TO STDOUT's data follows: `columns` per line, in binary format if `binary`.
    fn copy_out(&mut self, columns: usize, binary: bool) -> Result<()>;
    /// One line (or chunk) of COPY TO STDOUT's data.
    fn copy_data(&mut self, data: &[u8]) -> Result<()>;
    /// A statement of a query string ended, as it did ([`Session::execute_query_to`]); after
    /// an error no statement follows.
    fn done(&mut self, result: Result<Outcome>) -> Result<()>;
}

/// The in-process [`Output`]: rows and COPY data gathered into each statement's
/// [`Outcome`], as the collecting calls return them (bounded by
/// [`crate::MAX_MATERIALIZED_ROWS`]).
#[derive(Default)]
pub struct Collect {
    rows: Vec<Row>,
    lines: Vec<Vec<u8>>,
    results: Vec<Result<Outcome>>,
}

impl Collect {
    /// `r` with the rows or lines gathered since the last statement.
    pub fn fill(&mut self, r: Result<Outcome>) -> Result<Outcome> {
        let rows = std::mem::take(&mut self.rows);
        let data = std::mem::take(&mut self.lines);
        let mut o = r?;
        match &mut o.kind {
            OutcomeKind::Rows { rows: r, .. } => *r = rows,
            OutcomeKind::CopyOut { lines, .. } => *lines = data,
            _ => {}
        }
        Ok(o)
    }
}

impl Output for Collect {
    fn rows(&mut self, _columns: &OutColumns) -> Result<()> {
        Ok(())
    }

    fn row(&mut self, row: &[Value]) -> Result<()> {
        if self.rows.len() >= crate::nodes::MAX_MATERIALIZED_ROWS {
            return Err(crate::exec::too_many_rows());
        }
        self.rows.push(row.to_vec());
        Ok(())
    }

    fn copy_out(&mut self, _columns: usize, _binary: bool) -> Result<()> {
        Ok(())
    }

    fn copy_data(&mut self, data: &[u8]) -> Result<()> {
        if self.lines.len() >= crate::nodes::MAX_MATERIALIZED_ROWS {
            return Err(crate::exec::too_many_rows());
        }
        self.lines.push(data.to_vec());
        Ok(())
    }

    fn done(&mut self, result: Result<Outcome>) -> Result<()> {
        let filled = self.fill(result);
        self.results.push(filled);
        Ok(())
    }
}

/// An [`Output`] passed through, noting whether every statement succeeded.
struct Succeeded<'a> {
    out: &'a mut dyn Output,
    ok: bool,
}

impl Output for Succeeded<'_> {
    fn rows(&mut self, columns: &OutColumns) -> Result<()> {
        self.out.rows(columns)
    }

    fn row(&mut self, row: &[Value]) -> Result<()> {
        self.out.row(row)
    }

    fn copy_out(&mut self, columns: usize, binary: bool) -> Result<()> {
        self.out.copy_out(columns, binary)
    }

    fn copy_data(&mut self, data: &[u8]) -> Result<()> {
        self.out.copy_data(data)
    }

    fn done(&mut self, result: Result<Outcome>) -> Result<()> {
        self.ok &= result.is_ok();
        self.out.done(result)
    }
}

enum State {
    Idle,
    /// Boxed: a transaction is large, and most sessions are idle most of the time.
    Block(Box<Transaction>),
    /// An error aborted the block; the engine transaction is rolled back already, unless
    /// it has savepoints (then it waits in [`Session::failed_tx`] for ROLLBACK TO).
    Failed,
}

mod commands;
mod constraints;
mod copy_in;
mod cursors;
mod exec;
mod foreign_keys;
mod plans;
mod referential;
mod reindex;
mod settings;
mod views;

use crate::sequence::SessionSequences;
use exec::run;
use plans::{KnownShape, PlanCache};

pub use crate::settings::Settings;

/// An ongoing COPY FROM STDIN.
struct CopyIn {
    stmt: CopyStmt,
    table: TableInfo,
    targets: Vec<usize>,
    /// The table's CHECK constraints, bound over its row.
    checks: Vec<crate::nodes::BoundCheck>,
    /// Bytes of an incomplete last line.
    pending: Vec<u8>,
    rows: u64,
    /// A header line (text, CSV) or the binary format's header is still to come.
    header_pending: bool,
    /// The binary format's trailer came: no data may follow.
    ended: bool,
    /// The COPY's own transaction when it did not run inside a block.
    own_tx: Option<Box<Transaction>>,
    /// The foreign-key checks its rows leave, run when the data ends.
    ri: referential::Ri,
}

/// Most bytes one line of COPY data may have (PostgreSQL's limit on a field is 1 GB; a
/// line beyond this is refused rather than buffered without end).
const MAX_COPY_LINE_BYTES: usize = 64 << 20;

/// One client's session.
pub struct Session {
    db: Arc<Database>,
    state: State,
    /// The block is an implicit transaction: of a multi-statement simple query
    /// ([`Session::execute_simple`]), committed at the message's end; or of the extended
    /// protocol's writes up to the next Sync ([`Session::sync`]). Rolled back to idle (not
    /// to the aborted state) on an error, made explicit by a BEGIN inside it.
    implicit: bool,
    settings: Settings,
    copy: Option<CopyIn>,
    /// The error that ended a COPY FROM STDIN, reported at CopyDone.
    copy_error: Option<SqlError>,
    /// How other threads stop the running statement (cancel requests, statement_timeout).
    interrupt: Arc<Interrupt>,
    /// The session as the server's registry of sessions knows it ([`crate::backends`]).
    backend: Arc<Backend>,
    /// The plans of statements sent through the extended protocol ([`plans`]'s rules).
    plans: PlanCache,
    /// What this session's `nextval`s returned, for `currval` and `lastval`.
    sequences: SessionSequences,
    /// The named prepared statements, SQL's and the protocol's ([`commands`]).
    prepared: crate::context::PreparedStatements,
    /// The running transaction's deferred foreign-key checks ([`referential`]).
    deferred: crate::context::Deferred,
    /// SQL's prepared statements: what EXECUTE runs.
    sql_prepared: std::collections::HashMap<String, commands::SqlPrepared>,
    /// The protocol's statements DEALLOCATE dropped, for the server to forget.
    deallocated: Vec<String>,
    /// In the failed state: the block's transaction, kept because it has savepoints, for a
    /// ROLLBACK TO SAVEPOINT to make usable again (dropping it rolls it back).
    failed_tx: Option<Box<Transaction>>,
    /// The open cursors ([`cursors`]).
    cursors: cursors::Cursors,
}

fn outcome(tag: impl Into<String>, kind: OutcomeKind) -> Outcome {
    Outcome {
        tag: tag.into(),
        kind,
        notices: Vec::new(),
    }
}

fn command(tag: impl Into<String>) -> Outcome {
    outcome(tag, OutcomeKind::Command)
}

fn in_block_error(what: &str) -> SqlError {
    SqlError::new(
        SqlState::ACTIVE_SQL_TRANSACTION,
        format!("{what} cannot run inside a transaction block"),
    )
}

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// A session's end drops its temporary tables, after its open transaction rolled back
/// (whose locks would otherwise block the drop).
impl Drop for Session {
    fn drop(&mut self) {
        if let State::Block(tx) = std::mem::replace(&mut self.state, State::Idle) {
            let _ = tx.rollback();
        }
        // PostgreSQL's backend exit: the session's advisory locks go.
        self.db.release_session_locks(self.lock_owner());
        // Nobody is left to tell of a failure: the next start drops what is left.
        let _ = self.plans.tables.get_mut().temp.drop_all(&self.db);
    }
}

impl Session {
    /// Creates the SQL layer's catalog tables (columns, roles) on a data directory's first
    /// start, and those missing from an older one.
    pub fn bootstrap(db: &Database) -> Result<()> {
        catalog::bootstrap(db)?;
        crate::roles::bootstrap(db)
    }

    /// The settings of the server this session runs in, which SHOW and `pg_settings` show
    /// beside the engine's (`port`, `listen_addresses`, `ssl`, ...); SET refuses them (55P02).
    pub fn set_server_settings(&mut self, settings: Arc<[(&'static str, String)]>) {
        self.settings.set_server_level(settings);
    }

    /// A parameter the client set in its startup packet or its `options` (`-c name=value`),
    /// as SET would set it, and refused as SET would refuse it.
    pub fn set_parameter(&mut self, name: &str, value: &str) -> Result<()> {
        self.settings.set_startup(name, value)
    }

    /// A session of its own, in no registry of sessions (in-process use).
    pub fn new(db: Arc<Database>) -> Session {
        let interrupt = Arc::<Interrupt>::default();
        let backend = Backends::local(Arc::clone(&interrupt));
        Self::with_backend(db, interrupt, backend)
    }

    /// A session of the server's, registered in `registry` under a new random process id
    /// and secret key ([`crate::backends`]); it leaves the registry when dropped.
    pub fn attached(db: Arc<Database>, registry: &Arc<Backends>) -> Result<Session> {
        let interrupt = Arc::<Interrupt>::default();
        let backend = registry.register(Arc::clone(&interrupt))?;
        Ok(Self::with_backend(db, interrupt, backend))
    }

    fn with_backend(
        db: Arc<Database>,
        interrupt: Arc<Interrupt>,
        backend: Arc<Backend>,
    ) -> Session {
        let settings = Settings::new(db.config().clone());
        let plans = PlanCache::default();
        plans.tables.borrow_mut().temp = catalog::TempTables::new(backend.pid());
        Session {
            db,
            state: State::Idle,
            implicit: false,
            failed_tx: None,
            cursors: cursors::Cursors::default(),
            settings,
            copy: None,
            copy_error: None,
            plans,
            sequences: SessionSequences::default(),
            prepared: std::collections::BTreeMap::default(),
            deferred: crate::context::Deferred::default(),
            sql_prepared: std::collections::HashMap::default(),
            deallocated: Vec::new(),
            interrupt,
            backend,
        }
    }

    /// The handle a cancel request and the statement-timeout watchdog use.
    pub fn interrupt(&self) -> Arc<Interrupt> {
        Arc::clone(&self.interrupt)
    }

    /// The session's entry in the registry of sessions: its process id and secret key.
    pub fn backend(&self) -> &Arc<Backend> {
        &self.backend
    }

    /// The owner of this session's locks: its transactions' and its session-level advisory
    /// locks' (PostgreSQL's PGPROC).
    pub(crate) fn lock_owner(&self) -> LockOwner {
        LockOwner::backend(self.backend.pid().unsigned_abs())
    }

    /// Begins a transaction of this session at `isolation`; at most one is open at a time.
    pub(super) fn begin_tx(&self, isolation: IsolationLevel) -> Result<Transaction> {
        Ok(self.db.begin_as(isolation, self.lock_owner())?)
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The idle limit that applies now, between two commands: `idle_in_transaction_session_timeout`
    /// inside a block (open or aborted), `idle_session_timeout` outside one; none during a
    /// COPY FROM STDIN, which waits for data, not for a command.
    pub fn idle_limit(&self) -> Option<IdleLimit> {
        if self.copy.is_some() {
            return None;
        }
        if matches!(self.state, State::Idle) {
            let after = self.settings.duration("idle_session_timeout")?;
            return Some(IdleLimit {
                after,
                sqlstate: SqlState::IDLE_SESSION_TIMEOUT,
                message: "terminating connection due to idle-session timeout",
            });
        }
        let after = self
            .settings
            .duration("idle_in_transaction_session_timeout")?;
        Some(IdleLimit {
            after,
            sqlstate: SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
            message: "terminating connection due to idle-in-transaction timeout",
        })
    }

    pub fn status(&self) -> TxStatus {
        match self.state {
            State::Idle => TxStatus::Idle,
            State::Block(_) => TxStatus::InBlock,
            State::Failed => TxStatus::Failed,
        }
    }

    /// Rolls back an open transaction (the connection is closing or the server stopping).
    pub fn close(&mut self) -> Result<()> {
        if let Some(c) = self.copy.take() {
            if let Some(tx) = c.own_tx {
                tx.rollback()?;
            }
        }
        self.end_xact(false);
        if let Some(tx) = self.failed_tx.take() {
            tx.rollback()?;
        }
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Block(tx) => Ok(tx.rollback()?),
            State::Idle | State::Failed => Ok(()),
        }
    }

    /// Parameter types and output columns of `stmt`, given the types the client declared
    /// (`Unknown` for none). `text` is the statement's source: the plan made here is kept
    /// under it for the executions that follow ([`plans`]).
    pub fn describe(
        &mut self,
        text: &str,
        stmt: &Statement,
        hints: &[SqlType],
    ) -> Result<Description> {
        let _stack = crate::stack::enter(self.settings.max_stack_depth_bytes());
        self.settings.install_datetime_style();
        if let Statement::Fetch(f) = stmt {
            let columns = match self.cursors.columns(&f.cursor) {
                Some(c) if !f.is_move => c,
                _ => Arc::new([]),
            };
            return Ok(Description {
                params: Vec::new(),
                columns,
            });
        }
        let Statement::Sql(ast) = stmt else {
            return Ok(Description {
                params: Vec::new(),
                columns: Arc::new([]),
            });
        };
        if analyze::is_transaction_control(ast) {
            return Ok(Description {
                params: Vec::new(),
                columns: Arc::new([]),
            });
        }
        if let Some(cmd) = commands::command_of(ast)? {
            return self.describe_command(&cmd, hints);
        }
        // A kept plan answers without a transaction: a Describe before each Execute (libpq's
        // PQexecPrepared) then costs no snapshot, and Execute still checks the plan itself.
        let kept = if matches!(self.state, State::Failed) {
            None
        } else {
            self.plans.use_switches(self.settings.planner());
            self.plans.get(text, hints, self.db.catalog_generation())
        };
        let bound = if let Some(bound) = kept {
            bound
        } else {
            let plans = &mut self.plans;
            let switches = self.settings.planner();
            with_tx(&self.db, &self.state, |tx| {
                cached_bind(plans, &self.db, switches, Some(text), ast, hints, tx)
            })?
        };
        Ok(Description {
            params: bound.params.clone(),
            columns: Arc::clone(&bound.out),
        })
    }

    /// Runs `stmt` with parameter values (already of the types [`Session::describe`] gave),
    /// its rows collected.
    pub fn execute(
        &mut self,
        stmt: &Statement,
        hints: &[SqlType],
        params: &[Value],
    ) -> Result<Outcome> {
        let mut out = Collect::default();
        let r = self.execute_to(stmt, hints, params, &mut out);
        out.fill(r)
    }

    /// [`Session::execute`], its results to `out` as they come.
    pub fn execute_to(
        &mut self,
        stmt: &Statement,
        hints: &[SqlType],
        params: &[Value],
        out: &mut dyn Output,
    ) -> Result<Outcome> {
        let decode = |types: &[SqlType]| {
            check_param_count(params.len(), types.len())?;
            Ok(params.to_vec())
        };
        self.execute_keyed(None, Protocol::Simple, stmt, hints, &decode, out)
    }

    /// Runs `stmt` of the extended protocol, its parameter values made by `decode` from the
    /// parameter types binding inferred (Bind's bytes decode only once the types are known),
    /// its results to `out` as they come. `text` is the statement's source: its plan is
    /// kept under it and used again while the catalog does not change ([`plans`]).
    pub fn execute_with(
        &mut self,
        text: &str,
        stmt: &Statement,
        hints: &[SqlType],
        decode: &dyn Fn(&[SqlType]) -> Result<Vec<Value>>,
        out: &mut dyn Output,
    ) -> Result<Outcome> {
        self.execute_keyed(Some(text), Protocol::Extended, stmt, hints, decode, out)
    }

    /// A simple-protocol query string, each statement's rows collected
    /// ([`Session::execute_query_to`]).
    pub fn execute_query(&mut self, sql: &str) -> Vec<Result<Outcome>> {
        let mut out = Collect::default();
        self.execute_query_to(sql, &mut out);
        out.results
    }

    /// A simple-protocol query string: its statements run as [`Session::execute_simple`]
    /// runs them, except that one statement with a shape ([`crate::shape`]) runs as a
    /// prepared statement of its shape with its constants as parameters, its plan kept.
    /// A string that does not parse gives its syntax error (42601). Each statement's
    /// results go to `out` as they come, then its end ([`Output::done`]).
    pub fn execute_query_to(&mut self, sql: &str, out: &mut dyn Output) {
        let _stack = crate::stack::enter(self.settings.max_stack_depth_bytes());
        self.settings.install_datetime_style();
        let usable = self.copy.is_none() && !matches!(self.state, State::Failed);
        let Some(shape) = usable.then(|| shape::shape_of(sql)).flatten() else {
            return self.execute_as_written(sql, out);
        };
        let generation = self.db.catalog_generation();
        let known = match self.plans.shape(&shape.text, generation) {
            Some(known) => known,
            None if matches!(self.state, State::Idle) => self.learn_shape(&shape, generation),
            None => {
                // In a block, a shape is learned only once its statement ran as written:
                // binding it in the block's transaction must not fail that transaction with
                // an error the statement itself does not have.
                let mut ok = Succeeded { out, ok: true };
                self.execute_as_written(sql, &mut ok);
                if ok.ok && matches!(self.state, State::Block(_)) {
                    self.learn_shape(&shape, generation);
                }
                return;
            }
        };
        let KnownShape::Parsed(stmt) = known else {
            return self.execute_as_written(sql, out);
        };
        let constants = &shape.constants;
        let hints = shape.hints();
        let decode = |types: &[SqlType]| {
            check_param_count(constants.len(), types.len())?;
            types
                .iter()
                .zip(constants)
                .map(|(ty, c)| {
                    crate::types::parse_text(*ty, &c.text).map_err(|e| match c.position {
                        Some(p) if e.position().is_none() && !crate::types::is_typmod_error(&e) => {
                            e.with_position(p)
                        }
                        _ => e,
                    })
                })
                .collect()
        };
        let r = self.execute_keyed(
            Some(&shape.text),
            Protocol::Simple,
            &stmt,
            &hints,
            &decode,
            out,
        );
        // The output failing here has nothing after it to stop.
        let _ = out.done(r);
    }

    fn execute_as_written(&mut self, sql: &str, out: &mut dyn Output) {
        match crate::parse::parse(sql) {
            Ok(statements) => self.execute_simple_to(&statements, out),
            Err(e) => {
                let _ = out.done(Err(e));
            }
        }
    }

    /// Learns whether `shape` binds as a prepared statement with every parameter typed
    /// ([`crate::shape`]'s rules; binding keeps its plan), and keeps what was learned.
    fn learn_shape(&mut self, shape: &Shape, generation: u64) -> KnownShape {
        let known = match self.bind_shape(shape) {
            Some(stmt) => KnownShape::Parsed(Arc::new(stmt)),
            None => KnownShape::Refused,
        };
        self.plans.put_shape(&shape.text, generation, known.clone());
        known
    }

    fn bind_shape(&mut self, shape: &Shape) -> Option<Statement> {
        let mut parsed = crate::parse::parse(&shape.text).ok()?;
        let [Statement::Sql(ast)] = parsed.as_slice() else {
            return None;
        };
        if !shape::check_parameters(ast) {
            return None;
        }
        let stmt = parsed.remove(0);
        let described = self.describe(&shape.text, &stmt, &shape.hints()).ok()?;
        let typed = described.params.len() == shape.constants.len()
            && described
                .params
                .iter()
                .all(|t| shape::is_parameter_type(*t));
        typed.then_some(stmt)
    }

    fn execute_keyed(
        &mut self,
        key: Option<&str>,
        protocol: Protocol,
        stmt: &Statement,
        hints: &[SqlType],
        decode: &dyn Fn(&[SqlType]) -> Result<Vec<Value>>,
        out: &mut dyn Output,
    ) -> Result<Outcome> {
        let _stack = crate::stack::enter(self.settings.max_stack_depth_bytes());
        self.settings.install_datetime_style();
        if self.copy.is_some() {
            return Err(SqlError::new(
                SqlState::PROTOCOL_VIOLATION,
                "a COPY is in progress",
            ));
        }
        if matches!(self.state, State::Failed) {
            if let Statement::Sql(ast) = stmt {
                if let Some(SavepointCommand::RollbackTo(name)) = analyze::savepoint_command(ast) {
                    decode(&[])?;
                    return self.rollback_to_in_failed(&name);
                }
            }
            if stmt.ends_block() || matches!(stmt, Statement::PrepareTransaction(_)) {
                self.state = State::Idle;
                self.end_xact(false);
                if let Some(tx) = self.failed_tx.take() {
                    tx.rollback()?;
                }
                return Ok(outcome("ROLLBACK", OutcomeKind::BlockEnd));
            }
            return Err(SqlError::in_failed_transaction());
        }
        let r = match stmt {
            Statement::Sql(ast) => self.execute_sql(key, protocol, ast, hints, decode, out),
            other => {
                decode(&[])?;
                self.execute_utility(other, out)
            }
        };
        r.map_err(|e| self.fail(e))
    }

    fn execute_utility(&mut self, stmt: &Statement, out: &mut dyn Output) -> Result<Outcome> {
        match stmt {
            Statement::Sql(_) => Err(SqlError::new(
                SqlState::INTERNAL_ERROR,
                "SQL reached the utility executor",
            )),
            Statement::PrepareTransaction(gid) => self.prepare_transaction(gid),
            Statement::CommitPrepared(gid) | Statement::RollbackPrepared(gid) => {
                let commit = matches!(stmt, Statement::CommitPrepared(_));
                self.finish_prepared(gid, commit)
            }
            Statement::Checkpoint => {
                self.db.checkpoint()?;
                Ok(command("CHECKPOINT"))
            }
            Statement::Vacuum(v) => self.vacuum(v),
            Statement::Copy(c) => self.copy_start(c, out),
            Statement::Role(r) => self.role(r),
            Statement::AlterSequence(a) => self.alter_sequence(a),
            Statement::SetConstraints(names, deferred) => {
                // Outside a block PostgreSQL warns, and still looks the names up.
                let in_block = matches!(self.state, State::Block(_)) && !self.implicit;
                let (names, defer, store) = (names.as_deref(), *deferred, &self.deferred);
                with_tx(&self.db, &self.state, |tx| {
                    foreign_keys::set_constraints(tx, in_block, store, names, defer)
                })
            }
            Statement::Deferrable(ast, deferrable) => self.with_deferrable(ast, *deferrable, out),
            Statement::Fetch(f) => self.fetch(f, out),
            Statement::SetStorage(st) => self.set_storage(st),
            Statement::Reindex(r) => self.reindex(r),
            Statement::AlterOwner(a) => {
                let who = self.settings.identity();
                let notices =
                    with_tx(&self.db, &self.state, |tx| catalog::alter_owner(tx, a, who))?;
                let mut done = command(match a.kind {
                    "TABLE" => "ALTER TABLE",
                    "SEQUENCE" => "ALTER SEQUENCE",
                    "VIEW" => "ALTER VIEW",
                    "INDEX" => "ALTER INDEX",
                    _ => "ALTER SCHEMA",
                });
                done.notices = notices.into_iter().map(Notice::new).collect();
                Ok(done)
            }
        }
    }

    fn execute_sql(
        &mut self,
        key: Option<&str>,
        protocol: Protocol,
        ast: &sqlparser::ast::Statement,
        hints: &[SqlType],
        decode: &dyn Fn(&[SqlType]) -> Result<Vec<Value>>,
        out: &mut dyn Output,
    ) -> Result<Outcome> {
        if let Some(command) = analyze::savepoint_command(ast) {
            decode(&[])?;
            return self.savepoint(&command);
        }
        if let Some(cmd) = commands::command_of(ast)? {
            return self.session_command(cmd, hints, decode, out);
        }
        if analyze::is_transaction_control(ast) {
            decode(&[])?;
            let bound = analyze::bind_transaction_control(ast)?;
            return match bound {
                Plan::Begin(level) => self.begin_with(crate::settings::TxModes {
                    isolation: Some(match level {
                        IsolationLevel::ReadCommitted => crate::settings::Isolation::ReadCommitted,
                        IsolationLevel::RepeatableRead => {
                            crate::settings::Isolation::RepeatableRead
                        }
                    }),
                    ..Default::default()
                }),
                Plan::Commit => self.end(true),
                _ => self.end(false),
            };
        }
        if let State::Block(_) = &self.state {
            if takes_snapshot(ast) {
                self.settings.note_query();
            }
        }
        if let State::Block(tx) = &self.state {
            let switches = self.settings.planner();
            let bound = cached_bind(&mut self.plans, &self.db, switches, key, ast, hints, tx)?;
            let params = decode(&bound.params)?;
            let statement = exec::Statement {
                plan: &bound.plan,
                columns: &bound.out,
                params: &params,
            };
            let done = run(
                &self.db,
                tx,
                &mut self.settings,
                &self.backend,
                &self.sequences,
                &self.prepared,
                self.cursors.list(),
                &self.deferred,
                &statement,
                out,
            )?;
            // SET transaction_isolation may have chosen another level.
            self.match_isolation()?;
            return Ok(done);
        }
        // Outside a block, the statement is its own transaction; in the extended protocol a
        // write's transaction lasts to the next Sync, as PostgreSQL's implicit block does
        // (a later error up to the Sync rolls it back). A read commits at once: under READ
        // COMMITTED nothing tells the two apart, and it saves the Sync a trip.
        let tx = self.begin_tx(self.settings.default_xact().isolation.engine()?)?;
        let switches = self.settings.planner();
        let bound = cached_bind(&mut self.plans, &self.db, switches, key, ast, hints, &tx);
        let mut until_sync = false;
        let r = bound.and_then(|bound| {
            if matches!(bound.plan, nodes::Plan::Lock { .. }) {
                // Its lock would end with the statement's own transaction.
                return Err(SqlError::new(
                    SqlState::NO_ACTIVE_SQL_TRANSACTION,
                    "LOCK TABLE can only be used in transaction blocks",
                ));
            }
            let params = decode(&bound.params)?;
            let statement = exec::Statement {
                plan: &bound.plan,
                columns: &bound.out,
                params: &params,
            };
            let done = run(
                &self.db,
                &tx,
                &mut self.settings,
                &self.backend,
                &self.sequences,
                &self.prepared,
                self.cursors.list(),
                &self.deferred,
                &statement,
                out,
            )?;
            until_sync = protocol == Protocol::Extended && !bound.plan.is_read_only();
            Ok(done)
        });
        match r {
            Ok(out) if until_sync => {
                self.state = State::Block(Box::new(tx));
                self.implicit = true;
                let mut xact = self.settings.default_xact();
                xact.queried = true;
                self.settings.begin_xact(xact);
                Ok(out)
            }
            Ok(out) => {
                let r = self.before_commit(&tx).and_then(|()| Ok(tx.commit()?));
                self.end_xact(r.is_ok());
                r.map(|()| out)
            }
            Err(e) => {
                let _ = tx.rollback();
                self.end_xact(false);
                Err(e)
            }
        }
    }

    /// A statement of [`commands`].
    fn session_command(
        &mut self,
        cmd: commands::Command,
        hints: &[SqlType],
        decode: &dyn Fn(&[SqlType]) -> Result<Vec<Value>>,
        out: &mut dyn Output,
    ) -> Result<Outcome> {
        if let commands::Command::Declare(d) = cmd {
            // The cursor's query takes the parameters (psycopg binds them to DECLARE).
            return self.declare(d, hints, decode);
        }
        decode(&[])?;
        let r = match cmd {
            commands::Command::Begin(modes) => self.begin_with(modes),
            commands::Command::SetTransaction { modes, session } => {
                self.set_transaction(modes, session)
            }
            commands::Command::Prepare(name, types, stmt) => self.prepare(name, types, stmt),
            commands::Command::Execute(name, args) => self.execute_prepared(&name, args, out),
            commands::Command::Deallocate(name) => self.deallocate(name),
            commands::Command::Discard(what) => self.discard(what),
            commands::Command::Declare(d) => self.declare(d, hints, decode),
            commands::Command::Close(c) => self.close_cursor(c),
        };
        // Outside a block the command was its own transaction: what it set stands.
        if matches!(self.state, State::Idle) {
            self.end_xact(r.is_ok());
        }
        r
    }

    /// Whether an implicit transaction of the extended protocol is open: the next Sync
    /// must call [`Session::sync`].
    pub fn awaits_sync(&self) -> bool {
        self.implicit && matches!(self.state, State::Block(_))
    }

    /// The extended protocol's Sync: commits the implicit transaction of the writes since
    /// the last one. An explicit block stays open.
    pub fn sync(&mut self) -> Result<()> {
        if !self.awaits_sync() {
            return Ok(());
        }
        self.implicit = false;
        let r = match std::mem::replace(&mut self.state, State::Idle) {
            State::Block(tx) => self.before_commit(&tx).and_then(|()| Ok(tx.commit()?)),
            State::Idle | State::Failed => Ok(()),
        };
        self.end_xact(r.is_ok());
        r
    }

    fn prepare_transaction(&mut self, gid: &str) -> Result<Outcome> {
        self.implicit = false;
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Block(tx) => {
                let r = referential::check_deferred(&tx, &self.deferred)
                    .and_then(|()| Ok(tx.prepare(gid)?));
                self.end_xact(r.is_ok());
                r?;
                Ok(outcome("PREPARE TRANSACTION", OutcomeKind::BlockEnd))
            }
            State::Idle | State::Failed => Err(SqlError::new(
                SqlState::NO_ACTIVE_SQL_TRANSACTION,
                "there is no transaction in progress",
            )),
        }
    }

    fn finish_prepared(&mut self, gid: &str, commit: bool) -> Result<Outcome> {
        let what = if commit {
            "COMMIT PREPARED"
        } else {
            "ROLLBACK PREPARED"
        };
        if !matches!(self.state, State::Idle) {
            return Err(in_block_error(what));
        }
        if commit {
            self.db.commit_prepared(gid)?;
        } else {
            self.db.rollback_prepared(gid)?;
        }
        Ok(command(what))
    }

    fn vacuum(&mut self, v: &VacuumStmt) -> Result<Outcome> {
        if !matches!(self.state, State::Idle) {
            return Err(in_block_error("VACUUM"));
        }
        let tables: Vec<(String, quire_engine::TableId)> = with_tx(&self.db, &self.state, |tx| {
            if v.tables.is_empty() {
                Ok(tx
                    .tables()?
                    .into_iter()
                    .filter(|t| !t.name.starts_with(catalog::RESERVED_PREFIX))
                    .map(|t| (t.name.to_string(), t.oid))
                    .collect())
            } else {
                v.tables
                    .iter()
                    .map(|n| catalog::lookup(tx, n).map(|t| (t.def.name.to_string(), t.def.oid)))
                    .collect()
            }
        })?;
        let mut notices = Vec::new();
        for (name, oid) in tables {
            let s = self.db.vacuum(oid)?;
            if v.verbose {
                notices.push(vacuum_notice(&format!("public.{name}"), &s));
                if let Some(t) = &s.toast {
                    notices.push(vacuum_notice(&format!("pg_toast.pg_toast_{oid}"), t));
                }
            }
        }
        let mut out = command("VACUUM");
        out.notices = notices;
        Ok(out)
    }

    /// The statements of one simple-query message, each statement's rows collected
    /// ([`Session::execute_simple_to`]).
    pub fn execute_simple(&mut self, statements: &[Statement]) -> Vec<Result<Outcome>> {
        let mut out = Collect::default();
        self.execute_simple_to(statements, &mut out);
        out.results
    }

    /// The statements of one simple-query message, as PostgreSQL runs them: outside a block,
    /// several statements form one implicit transaction (all or nothing), unless they
    /// contain their own BEGIN/COMMIT. The first error ends the message. Each statement's
    /// results go to `out`, then its end.
    pub fn execute_simple_to(&mut self, statements: &[Statement], out: &mut dyn Output) {
        for (i, stmt) in statements.iter().enumerate() {
            let more_follow = i + 1 < statements.len();
            if more_follow && matches!(self.state, State::Idle) {
                let xact = self.settings.default_xact();
                match xact.isolation.engine().and_then(|i| self.begin_tx(i)) {
                    Ok(tx) => {
                        self.state = State::Block(Box::new(tx));
                        self.implicit = true;
                        self.settings.begin_xact(xact);
                    }
                    Err(e) => {
                        let _ = out.done(Err(e));
                        return;
                    }
                }
            }
            let r = self.execute_to(stmt, &[], &[], out);
            let stop =
                r.is_err() || matches!(&r, Ok(o) if matches!(o.kind, OutcomeKind::CopyIn { .. }));
            // An output that failed (the client left) ends the message as an error would.
            let stop = out.done(r).is_err() || stop;
            if stop {
                if self.implicit && self.copy.is_none() {
                    let e =
                        SqlError::new(SqlState::CONNECTION_FAILURE, "the client connection failed");
                    self.fail(e);
                }
                return;
            }
        }
        if self.implicit {
            self.implicit = false;
            if let State::Block(tx) = std::mem::replace(&mut self.state, State::Idle) {
                let r = self.before_commit(&tx).and_then(|()| Ok(tx.commit()?));
                self.end_xact(r.is_ok());
                if let Err(e) = r {
                    let _ = out.done(Err(e));
                }
            }
        }
    }

    /// Reports an error found outside [`Session::execute`] (a parameter that does not
    /// decode): inside a block it aborts the block, as any statement's error does.
    pub fn abort(&mut self, e: SqlError) -> SqlError {
        self.fail(e)
    }

    /// An error inside a block aborts it: the engine transaction rolls back (releasing its
    /// locks) and the block refuses everything until COMMIT or ROLLBACK.
    fn fail(&mut self, e: SqlError) -> SqlError {
        if let State::Block(tx) = std::mem::replace(&mut self.state, State::Failed) {
            if tx.savepoint_depth() > 0 && !self.implicit {
                // ROLLBACK TO may make the block usable again: its settings stay until
                // the block really ends.
                self.failed_tx = Some(tx);
                return e;
            }
            self.end_xact(false);
            let _ = tx.rollback();
            if std::mem::take(&mut self.implicit) {
                self.state = State::Idle;
            }
        } else {
            self.end_xact(false);
            self.state = State::Idle;
        }
        e
    }

    /// What runs at commit, in the transaction about to commit: the deferred foreign-key
    /// checks, then what the session's temporary tables do (ON COMMIT DELETE ROWS, DROP).
    fn before_commit(&self, tx: &Transaction) -> Result<()> {
        referential::check_deferred(tx, &self.deferred)?;
        self.plans.tables.borrow_mut().temp.before_commit(tx)
    }

    /// A transaction ended (`committed` or not): its settings' scope ends, and what it
    /// deferred goes.
    fn end_xact(&mut self, committed: bool) {
        self.settings.end_xact(committed);
        self.deferred.clear();
        self.cursors.end_xact(committed);
    }

    /// SAVEPOINT, RELEASE SAVEPOINT and ROLLBACK TO SAVEPOINT in a usable block; outside
    /// an explicit one (idle, or an implicit block) 25P01, as PostgreSQL refuses them.
    fn savepoint(&mut self, cmd: &SavepointCommand) -> Result<Outcome> {
        let tx = match &self.state {
            State::Block(tx) if !self.implicit => tx,
            _ => {
                return Err(SqlError::new(
                    SqlState::NO_ACTIVE_SQL_TRANSACTION,
                    format!("{} can only be used in transaction blocks", cmd.what()),
                ))
            }
        };
        match cmd {
            SavepointCommand::Define(name) => tx.savepoint(name)?,
            SavepointCommand::Release(name) => tx.release_savepoint(name)?,
            SavepointCommand::RollbackTo(name) => tx.rollback_to_savepoint(name)?,
        }
        Ok(command(cmd.tag()))
    }

    /// ROLLBACK TO SAVEPOINT in a failed block: the block is usable again if the savepoint
    /// exists; else it stays failed (3B001).
    fn rollback_to_in_failed(&mut self, name: &str) -> Result<Outcome> {
        let Some(tx) = self.failed_tx.take() else {
            return Err(quire_engine::Error::NoSuchSavepoint { name: name.into() }.into());
        };
        match tx.rollback_to_savepoint(name) {
            Ok(()) => {
                self.state = State::Block(tx);
                Ok(command("ROLLBACK"))
            }
            Err(e) => {
                self.failed_tx = Some(tx);
                Err(e.into())
            }
        }
    }

    fn end(&mut self, commit: bool) -> Result<Outcome> {
        self.implicit = false;
        let tag = if commit { "COMMIT" } else { "ROLLBACK" };
        let idle = matches!(self.state, State::Idle);
        let r = match std::mem::replace(&mut self.state, State::Idle) {
            State::Block(tx) if commit => self.before_commit(&tx).and_then(|()| Ok(tx.commit()?)),
            State::Block(tx) => tx.rollback().map_err(SqlError::from),
            State::Idle | State::Failed => Ok(()),
        };
        self.end_xact(commit && r.is_ok());
        r?;
        let mut out = outcome(tag, OutcomeKind::BlockEnd);
        if idle {
            out.notices.push(Notice::warning(
                SqlState::NO_ACTIVE_SQL_TRANSACTION,
                "there is no transaction in progress",
            ));
        }
        Ok(out)
    }
}

/// Runs `f` with the block's transaction, or a short one of its own for catalog lookups.
/// A function of the two fields, not a method, so that `f` may borrow the session's others.
fn with_tx<T>(
    db: &Database,
    state: &State,
    f: impl FnOnce(&Transaction) -> Result<T>,
) -> Result<T> {
    match state {
        State::Block(tx) => f(tx),
        State::Failed => Err(SqlError::in_failed_transaction()),
        State::Idle => {
            let tx = db.begin(IsolationLevel::ReadCommitted)?;
            let r = f(&tx);
            let _ = tx.rollback();
            r
        }
    }
}

/// `ast` bound in `tx`: the plan kept under `key` if it is still valid, else a new one (kept
/// under `key` when there is one). The generation is read before binding, so a definition
/// that changes while binding makes the next use bind again.
#[allow(clippy::too_many_arguments)]
fn cached_bind(
    plans: &mut PlanCache,
    db: &Database,
    switches: PlannerSwitches,
    key: Option<&str>,
    ast: &sqlparser::ast::Statement,
    hints: &[SqlType],
    tx: &Transaction,
) -> Result<Arc<nodes::Bound>> {
    let generation = db.catalog_generation();
    plans.use_switches(switches);
    if let Some(b) = key.and_then(|text| plans.get(text, hints, generation)) {
        return Ok(b);
    }
    let b = Arc::new(compile(
        ast,
        hints,
        tx,
        (&plans.tables, generation),
        switches,
    )?);
    if let Some(text) = key {
        plans.put(text, hints, generation, Arc::clone(&b));
    }
    Ok(b)
}

/// A statement through the pipeline: analyzed (names, types: logical nodes), rewritten by
/// the optimizer's rules, then planned (physical nodes).
fn compile(
    ast: &sqlparser::ast::Statement,
    hints: &[SqlType],
    tx: &Transaction,
    tables: (&std::cell::RefCell<catalog::TableCache>, u64),
    switches: PlannerSwitches,
) -> Result<nodes::Bound> {
    let bound = analyze::bind(ast, hints, tx, tables)?;
    let bound = crate::optimize::optimize(bound)?;
    crate::planner::plan(bound, switches)
}

/// Whether `stmt` counts as a query for SET TRANSACTION's "before any query" (PostgreSQL's
/// first snapshot): all but SET, SHOW, RESET and the session commands.
fn takes_snapshot(stmt: &sqlparser::ast::Statement) -> bool {
    use sqlparser::ast::Statement as S;
    !matches!(
        stmt,
        S::Set(_) | S::ShowVariable { .. } | S::Reset(_) | S::Prepare { .. } | S::Deallocate { .. }
    )
}

fn check_param_count(given: usize, needed: usize) -> Result<()> {
    if given != needed {
        return Err(SqlError::new(
            SqlState::PROTOCOL_VIOLATION,
            format!("bind message supplies {given} parameters, but prepared statement requires {needed}"),
        ));
    }
    Ok(())
}

/// VACUUM VERBOSE's report of one relation (`schema.name`).
fn vacuum_notice(relation: &str, s: &quire_engine::VacuumStats) -> Notice {
    Notice::info(format!(
        "vacuuming \"{}.{relation}\": index scans: {}, pages: {} removed, {} remain, {} scanned; tuples: {} removed, {} remain, {} are dead but not yet removable; {} frozen",
        crate::pg_catalog::DATABASE_NAME,
        s.index_passes,
        s.pages_truncated,
        s.pages.saturating_sub(s.pages_truncated),
        s.pages_scanned,
        s.dead_tuples_removed,
        s.live_tuples,
        s.recently_dead_tuples,
        s.tuples_frozen,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quire_engine::vfs::{OsVfs, Vfs};

    fn session(dir: &std::path::Path) -> Session {
        let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
        let config = quire_engine::Config {
            shared_buffers_bytes: 4 * 1024 * 1024,
            autovacuum: false,
            ..quire_engine::Config::default()
        };
        let db = Database::open(&vfs, dir, config).expect("a new database opens");
        Session::bootstrap(&db).expect("bootstrap");
        Session::new(Arc::new(db))
    }

    fn known(s: &Session, shape_text: &str) -> Option<&'static str> {
        match s.plans.shape(shape_text, s.db.catalog_generation())? {
            KnownShape::Parsed(_) => Some("parsed"),
            KnownShape::Refused => Some("refused"),
        }
    }

    fn ok(s: &mut Session, sql: &str) -> Outcome {
        let mut out = s.execute_query(sql);
        assert_eq!(out.len(), 1, "{sql}");
        out.remove(0).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    fn err(s: &mut Session, sql: &str) -> SqlError {
        let mut out = s.execute_query(sql);
        assert_eq!(out.len(), 1, "{sql}");
        out.remove(0).expect_err(sql)
    }

    /// SERIALIZABLE, which the engine does not have, is refused wherever it is chosen, and
    /// never run as a weaker level; the session goes on at the levels it has.
    #[test]
    fn serializable_is_refused_wherever_it_is_chosen() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut s = session(dir.path());
        for sql in [
            "BEGIN ISOLATION LEVEL SERIALIZABLE",
            "START TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ ONLY, DEFERRABLE",
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            "SET default_transaction_isolation = 'serializable'",
            "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
        ] {
            let e = err(&mut s, sql);
            assert_eq!(e.sqlstate(), SqlState::FEATURE_NOT_SUPPORTED, "{sql}");
            assert_eq!(e.message(), "SERIALIZABLE isolation is not supported yet");
            assert_eq!(s.status(), TxStatus::Idle, "{sql}");
        }
        ok(&mut s, "BEGIN");
        for sql in [
            "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            "SET transaction_isolation = 'serializable'",
        ] {
            let e = err(&mut s, sql);
            assert_eq!(e.sqlstate(), SqlState::FEATURE_NOT_SUPPORTED, "{sql}");
            assert_eq!(s.status(), TxStatus::Failed);
            ok(&mut s, "ROLLBACK");
            ok(&mut s, "BEGIN");
        }
        ok(&mut s, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
        let State::Block(tx) = &s.state else {
            panic!("no block");
        };
        assert_eq!(tx.isolation(), IsolationLevel::RepeatableRead);
        ok(&mut s, "COMMIT");
        let OutcomeKind::Rows { rows, .. } = ok(&mut s, "SHOW default_transaction_isolation").kind
        else {
            panic!("no rows");
        };
        assert_eq!(rows, vec![vec![Value::Text("read committed".into())]]);
    }

    /// What the session learns of each shape, and when it learns again: the statements'
    /// outcomes cannot tell a shape used from a statement run as written, this can.
    #[test]
    fn shapes_are_learned_refused_and_learned_again_when_a_definition_changes() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut s = session(dir.path());
        let missing = s.execute_query("SELECT a FROM later WHERE a = 1").remove(0);
        assert!(missing.is_err());
        assert_eq!(
            known(&s, "SELECT a FROM later WHERE a = $1"),
            Some("refused")
        );
        ok(&mut s, "CREATE TABLE later (a integer)");
        assert_eq!(
            known(&s, "SELECT a FROM later WHERE a = $1"),
            None,
            "a refusal lasts only while no definition changes"
        );
        ok(&mut s, "INSERT INTO later VALUES (7)");
        assert_eq!(known(&s, "INSERT INTO later VALUES ($1)"), Some("parsed"));
        ok(&mut s, "SELECT a FROM later WHERE a = 1");
        assert_eq!(
            known(&s, "SELECT a FROM later WHERE a = $1"),
            Some("parsed")
        );
        ok(&mut s, "SELECT a FROM later ORDER BY 1");
        assert_eq!(
            known(&s, "SELECT a FROM later ORDER BY $1"),
            Some("refused")
        );
        // In a block, a new shape is learned after its statement ran as written.
        ok(&mut s, "BEGIN");
        let OutcomeKind::Rows { rows, .. } = ok(&mut s, "SELECT a FROM later WHERE a > 2").kind
        else {
            panic!("no rows");
        };
        assert_eq!(rows, vec![vec![Value::Int(7)]]);
        assert_eq!(
            known(&s, "SELECT a FROM later WHERE a > $1"),
            Some("parsed")
        );
        ok(&mut s, "COMMIT");
    }
}
