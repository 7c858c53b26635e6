//! A SQL session: the transaction state of one client connection (idle, inside a BEGIN
//! block, or in a block an error aborted), its settings (SET/SHOW), an ongoing COPY FROM
//! STDIN, and the execution of bound plans through the engine's [`Transaction`]. A session
//! is synchronous and not shared: the server gives each connection a thread of its own that
//! owns its `Session`.

use std::collections::BTreeMap;
use std::ops::Bound::Included;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quire_engine::{Changed, Config, Database, IsolationLevel, Row, Transaction, Value};

use crate::bind::{self, OnConflict, OutColumn, Plan};
use crate::catalog::{self, TableInfo};
use crate::copy;
use crate::error::{Result, SqlError};
use crate::expr::{Cx, Expr};
use crate::interrupt::Interrupt;
use crate::parse::{CopyStmt, Statement, VacuumStmt};
use crate::plan::{self, value_tid};
use crate::types::SqlType;

/// The PostgreSQL version quire reports (`server_version`): clients such as pgbench and
/// psql choose their queries by it.
pub const SERVER_VERSION: &str = "16.0";

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
    pub notices: Vec<String>,
}

#[derive(Debug)]
pub enum OutcomeKind {
    Command,
    /// BEGIN: a transaction block started (or was already open).
    BlockStart,
    /// COMMIT or ROLLBACK: the block ended.
    BlockEnd,
    Rows {
        columns: Vec<OutColumn>,
        rows: Vec<Row>,
    },
    /// COPY FROM STDIN started: the client now sends CopyData; the server passes it to
    /// [`Session::copy_data`] and ends with [`Session::copy_done`] or [`Session::copy_fail`].
    CopyIn {
        columns: usize,
    },
    /// COPY TO STDOUT: the lines to send as CopyData (the tag is `COPY n`).
    CopyOut {
        columns: usize,
        lines: Vec<Vec<u8>>,
    },
}

/// A statement's parameter types and output columns (Describe).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Description {
    pub params: Vec<SqlType>,
    pub columns: Vec<OutColumn>,
}

enum State {
    Idle,
    /// Boxed: a transaction is large, and most sessions are idle most of the time.
    Block(Box<Transaction>),
    /// An error aborted the block; the engine transaction is rolled back already.
    Failed,
}

/// An ongoing COPY FROM STDIN.
struct CopyIn {
    stmt: CopyStmt,
    table: TableInfo,
    targets: Vec<usize>,
    /// Bytes of an incomplete last line.
    pending: Vec<u8>,
    rows: u64,
    header_pending: bool,
    /// The COPY's own transaction when it did not run inside a block.
    own_tx: Option<Box<Transaction>>,
}

/// Most bytes one line of COPY data may have (PostgreSQL's limit on a field is 1 GB; a
/// line beyond this is refused rather than buffered without end).
const MAX_COPY_LINE_BYTES: usize = 64 << 20;

/// One client's settings: the session-level parameters it may SET, and the server's.
pub struct Settings {
    pub user: String,
    session: BTreeMap<String, String>,
    config: Config,
}

/// Session parameters, their defaults, and whether SET may change them.
const SESSION_PARAMETERS: &[(&str, &str, bool)] = &[
    ("application_name", "", true),
    ("client_encoding", "UTF8", true),
    ("client_min_messages", "notice", true),
    ("datestyle", "ISO, MDY", true),
    ("default_transaction_isolation", "read committed", true),
    ("extra_float_digits", "1", true),
    ("idle_in_transaction_session_timeout", "0", true),
    ("integer_datetimes", "on", false),
    ("intervalstyle", "postgres", true),
    ("lc_collate", "C", false),
    ("lc_ctype", "C", false),
    ("search_path", "\"$user\", public", true),
    ("server_encoding", "UTF8", false),
    ("server_version", SERVER_VERSION, false),
    ("server_version_num", "160000", false),
    ("standard_conforming_strings", "on", true),
    ("statement_timeout", "0", true),
    ("timezone", "UTC", true),
    ("transaction_isolation", "read committed", false),
];

fn format_bytes(b: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "kB")];
    for (size, unit) in UNITS {
        if b >= size && b.is_multiple_of(size) {
            return format!("{}{unit}", b / size);
        }
    }
    format!("{b}B")
}

fn on_off(b: bool) -> String {
    if b { "on" } else { "off" }.into()
}

impl Settings {
    fn new(config: Config) -> Settings {
        Settings {
            user: crate::pg_catalog::SUPERUSER.into(),
            session: BTreeMap::new(),
            config,
        }
    }

    /// The server's settings (the engine's configuration), by PostgreSQL's names.
    fn server(&self) -> Vec<(&'static str, String)> {
        let c = &self.config;
        vec![
            ("shared_buffers", format_bytes(c.shared_buffers_bytes)),
            ("wal_buffers", format_bytes(c.wal_buffers_bytes)),
            ("wal_segment_size", format_bytes(c.wal_segment_size_bytes)),
            ("max_wal_size", format_bytes(c.max_wal_size_bytes)),
            ("checkpoint_timeout", format!("{}s", c.checkpoint_timeout_s)),
            (
                "checkpoint_completion_target",
                c.checkpoint_completion_target.to_string(),
            ),
            ("synchronous_commit", on_off(c.synchronous_commit)),
            ("track_commit_timestamp", on_off(c.track_commit_timestamp)),
            ("max_connections", c.max_connections.to_string()),
            (
                "max_prepared_transactions",
                c.max_prepared_transactions.to_string(),
            ),
            (
                "max_locks_per_transaction",
                c.max_locks_per_transaction.to_string(),
            ),
            ("deadlock_timeout", format!("{}ms", c.deadlock_timeout_ms)),
            (
                "maintenance_work_mem",
                format_bytes(c.maintenance_work_mem_bytes),
            ),
            ("max_files_per_process", c.max_files_per_process.to_string()),
            ("autovacuum", on_off(c.autovacuum)),
            ("fsync", "on".into()),
            ("full_page_writes", "on".into()),
            ("buffer_drop", c.buffer_drop.name().into()),
            ("relsize_cache", c.relsize_cache.name().into()),
            ("twophase_state", c.twophase_state.name().into()),
            ("dead_tids", c.dead_tids.name().into()),
            ("sync", c.sync.name().into()),
        ]
    }

    /// SHOW `name`: `None` for an unknown parameter.
    pub fn show(&self, name: &str) -> Option<String> {
        let name = name.to_lowercase();
        if let Some(v) = self.session.get(&name) {
            return Some(v.clone());
        }
        if let Some((_, d, _)) = SESSION_PARAMETERS.iter().find(|(n, _, _)| *n == name) {
            return Some((*d).to_string());
        }
        if name == "is_superuser" {
            return Some("on".into());
        }
        if name == "session_authorization" {
            return Some(self.user.clone());
        }
        self.server()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    }

    /// `statement_timeout`, if set (zero is none).
    pub fn statement_timeout(&self) -> Option<Duration> {
        let ms = self
            .session
            .get("statement_timeout")
            .and_then(|v| quire_engine::config::parse_millis(v).ok())
            .unwrap_or(0);
        (ms > 0).then(|| Duration::from_millis(ms))
    }

    /// Every parameter: name, value, and where its value comes from.
    pub(crate) fn all(&self) -> Vec<(String, String, &'static str)> {
        let mut v: Vec<(String, String, &'static str)> = SESSION_PARAMETERS
            .iter()
            .map(|(n, d, _)| match self.session.get(*n) {
                Some(s) => ((*n).to_string(), s.clone(), "session"),
                None => ((*n).to_string(), (*d).to_string(), "default"),
            })
            .collect();
        v.extend(
            self.server()
                .into_iter()
                .map(|(n, s)| (n.to_string(), s, "configuration file")),
        );
        v.sort();
        v
    }

    fn set(&mut self, name: &str, value: Option<String>) -> Result<()> {
        let name = name.to_lowercase();
        if name == "all" && value.is_none() {
            self.session.clear();
            return Ok(());
        }
        if name == "transaction_isolation" || name == "session characteristics" {
            return Err(SqlError::unsupported(
                "SET transaction_isolation (use BEGIN ISOLATION LEVEL)",
            ));
        }
        let Some((_, _, settable)) = SESSION_PARAMETERS.iter().find(|(n, _, _)| *n == name) else {
            if self.server().iter().any(|(n, _)| *n == name) {
                return Err(SqlError::new(
                    "55P02",
                    format!(
                        "parameter \"{name}\" cannot be changed now (a server setting: start quire serve with -c {name}=... or QUIRE_{})",
                        name.to_uppercase()
                    ),
                ));
            }
            return Err(SqlError::new(
                "42704",
                format!("unrecognized configuration parameter \"{name}\""),
            ));
        };
        if !settable {
            return Err(SqlError::new(
                "55P02",
                format!("parameter \"{name}\" cannot be changed"),
            ));
        }
        let Some(value) = value else {
            self.session.remove(&name);
            return Ok(());
        };
        check_session_value(&name, &value)?;
        self.session.insert(name, value);
        Ok(())
    }
}

/// Values quire can honour for the parameters whose other values it does not implement.
fn check_session_value(name: &str, value: &str) -> Result<()> {
    let v = value.to_lowercase();
    let ok = match name {
        "client_encoding" => ["utf8", "utf-8", "unicode"].contains(&v.as_str()),
        "timezone" => ["utc", "gmt", "etc/utc", "z", "0", "+00", "zulu"].contains(&v.as_str()),
        "datestyle" => v.starts_with("iso"),
        "statement_timeout" => quire_engine::config::parse_millis(value).is_ok(),
        "idle_in_transaction_session_timeout" => v == "0" || v == "0ms" || v == "0s",
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(SqlError::new(
            "22023",
            format!("invalid value for parameter \"{name}\": \"{value}\" (quire supports only the default here)"),
        ))
    }
}

/// One client's session.
pub struct Session {
    db: Arc<Database>,
    state: State,
    /// The block is the implicit transaction of a multi-statement simple query
    /// ([`Session::execute_simple`]): committed at the message's end, rolled back to idle
    /// (not to the aborted state) on an error, made explicit by a BEGIN inside it.
    implicit: bool,
    settings: Settings,
    copy: Option<CopyIn>,
    /// The error that ended a COPY FROM STDIN, reported at CopyDone.
    copy_error: Option<SqlError>,
    /// How other threads stop the running statement (cancel requests, statement_timeout).
    interrupt: Arc<Interrupt>,
    /// The statement [`Session::describe`] bound last, kept for the Execute that follows
    /// (a client's Bind, Describe, Execute of one portal); any other call drops it.
    described: Option<Described>,
}

struct Described {
    ast: Box<sqlparser::ast::Statement>,
    hints: Vec<SqlType>,
    bound: bind::Bound,
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
        "25001",
        format!("{what} cannot run inside a transaction block"),
    )
}

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

impl Session {
    /// Creates the SQL layer's catalog table on a data directory's first start.
    pub fn bootstrap(db: &Database) -> Result<()> {
        catalog::bootstrap(db)
    }

    pub fn new(db: Arc<Database>) -> Session {
        let settings = Settings::new(db.config().clone());
        Session {
            db,
            state: State::Idle,
            implicit: false,
            settings,
            copy: None,
            copy_error: None,
            described: None,
            interrupt: Arc::default(),
        }
    }

    /// The handle a cancel request and the statement-timeout watchdog use.
    pub fn interrupt(&self) -> Arc<Interrupt> {
        Arc::clone(&self.interrupt)
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
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
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Block(tx) => Ok(tx.rollback()?),
            State::Idle | State::Failed => Ok(()),
        }
    }

    /// Parameter types and output columns of `stmt`, given the types the client declared
    /// (`Unknown` for none).
    pub fn describe(&mut self, stmt: &Statement, hints: &[SqlType]) -> Result<Description> {
        let Statement::Sql(ast) = stmt else {
            return Ok(Description {
                params: Vec::new(),
                columns: Vec::new(),
            });
        };
        if bind::is_transaction_control(ast) {
            return Ok(Description {
                params: Vec::new(),
                columns: Vec::new(),
            });
        }
        let bound = self.with_tx(|tx| bind::bind(ast, hints, tx))?;
        let d = Description {
            params: bound.params.clone(),
            columns: bound.out.clone(),
        };
        self.described = Some(Described {
            ast: ast.clone(),
            hints: hints.to_vec(),
            bound,
        });
        Ok(d)
    }

    /// Runs `stmt` with parameter values (already of the types [`Session::describe`] gave).
    pub fn execute(
        &mut self,
        stmt: &Statement,
        hints: &[SqlType],
        params: &[Value],
    ) -> Result<Outcome> {
        self.execute_with(stmt, hints, &|types| {
            check_param_count(params.len(), types.len())?;
            Ok(params.to_vec())
        })
    }

    /// Runs `stmt`, its parameter values made by `decode` from the parameter types binding
    /// inferred (the extended protocol's Bind bytes decode only once the types are known;
    /// binding once serves both).
    pub fn execute_with(
        &mut self,
        stmt: &Statement,
        hints: &[SqlType],
        decode: &dyn Fn(&[SqlType]) -> Result<Vec<Value>>,
    ) -> Result<Outcome> {
        let described = self.described.take();
        if self.copy.is_some() {
            return Err(SqlError::new("08P01", "a COPY is in progress"));
        }
        if matches!(self.state, State::Failed) {
            if stmt.ends_block() || matches!(stmt, Statement::PrepareTransaction(_)) {
                self.state = State::Idle;
                return Ok(outcome("ROLLBACK", OutcomeKind::BlockEnd));
            }
            return Err(SqlError::in_failed_transaction());
        }
        let r = match stmt {
            Statement::Sql(ast) => {
                // The plan Describe just made for this statement, if it did.
                let bound = described
                    .filter(|d| d.ast == *ast && d.hints == hints)
                    .map(|d| d.bound);
                self.execute_sql(ast, hints, bound, decode)
            }
            other => {
                decode(&[])?;
                self.execute_utility(other)
            }
        };
        r.map_err(|e| self.fail(e))
    }

    fn execute_utility(&mut self, stmt: &Statement) -> Result<Outcome> {
        match stmt {
            Statement::Sql(_) => Err(SqlError::new("XX000", "SQL reached the utility executor")),
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
            Statement::Copy(c) => self.copy_start(c),
        }
    }

    fn execute_sql(
        &mut self,
        ast: &sqlparser::ast::Statement,
        hints: &[SqlType],
        described: Option<bind::Bound>,
        decode: &dyn Fn(&[SqlType]) -> Result<Vec<Value>>,
    ) -> Result<Outcome> {
        if bind::is_transaction_control(ast) {
            decode(&[])?;
            let bound = bind::bind_transaction_control(ast)?;
            return match bound {
                Plan::Begin(isolation) => self.begin(isolation),
                Plan::Commit => self.end(true),
                _ => self.end(false),
            };
        }
        if let State::Block(tx) = &self.state {
            let bound = match described {
                Some(b) => b,
                None => bind::bind(ast, hints, tx)?,
            };
            let params = decode(&bound.params)?;
            let out = run(
                &self.db,
                tx,
                &mut self.settings,
                &self.interrupt,
                &bound.plan,
                &params,
            )?;
            return Ok(with_columns(out, bound.out));
        }
        // Outside a block, the statement is its own transaction.
        let tx = self.db.begin(IsolationLevel::ReadCommitted)?;
        let bound = match described {
            Some(b) => Ok(b),
            None => bind::bind(ast, hints, &tx),
        };
        let r = bound.and_then(|bound| {
            let params = decode(&bound.params)?;
            let out = run(
                &self.db,
                &tx,
                &mut self.settings,
                &self.interrupt,
                &bound.plan,
                &params,
            )?;
            Ok(with_columns(out, bound.out))
        });
        match r {
            Ok(out) => {
                tx.commit()?;
                Ok(out)
            }
            Err(e) => {
                let _ = tx.rollback();
                Err(e)
            }
        }
    }

    fn prepare_transaction(&mut self, gid: &str) -> Result<Outcome> {
        self.implicit = false;
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Block(tx) => {
                tx.prepare(gid)?;
                Ok(outcome("PREPARE TRANSACTION", OutcomeKind::BlockEnd))
            }
            State::Idle | State::Failed => Err(SqlError::new(
                "25P01",
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
        let tables: Vec<(String, quire_engine::TableId)> = self.with_tx(|tx| {
            if v.tables.is_empty() {
                Ok(tx
                    .tables()?
                    .into_iter()
                    .filter(|t| !t.name.starts_with(catalog::RESERVED_PREFIX))
                    .map(|t| (t.name, t.oid))
                    .collect())
            } else {
                v.tables
                    .iter()
                    .map(|n| catalog::lookup(tx, n).map(|t| (t.def.name.clone(), t.def.oid)))
                    .collect()
            }
        })?;
        let mut notices = Vec::new();
        for (name, oid) in tables {
            let s = self.db.vacuum(oid)?;
            if v.verbose {
                notices.push(format!(
                    "vacuuming \"{}.public.{name}\": index scans: {}, pages: {} removed, {} remain, {} scanned; tuples: {} removed, {} remain, {} are dead but not yet removable; {} frozen",
                    crate::pg_catalog::DATABASE_NAME,
                    s.index_passes,
                    s.pages_truncated,
                    s.pages.saturating_sub(s.pages_truncated),
                    s.pages_scanned,
                    s.dead_tuples_removed,
                    s.live_tuples,
                    s.recently_dead_tuples,
                    s.tuples_frozen,
                ));
            }
        }
        let mut out = command("VACUUM");
        out.notices = notices;
        Ok(out)
    }

    /// The statements of one simple-query message, as PostgreSQL runs them: outside a block,
    /// several statements form one implicit transaction (all or nothing), unless they
    /// contain their own BEGIN/COMMIT. The first error ends the message.
    pub fn execute_simple(&mut self, statements: &[Statement]) -> Vec<Result<Outcome>> {
        let mut out = Vec::with_capacity(statements.len());
        for (i, stmt) in statements.iter().enumerate() {
            let more_follow = i + 1 < statements.len();
            if more_follow && matches!(self.state, State::Idle) {
                match self.db.begin(IsolationLevel::ReadCommitted) {
                    Ok(tx) => {
                        self.state = State::Block(Box::new(tx));
                        self.implicit = true;
                    }
                    Err(e) => {
                        out.push(Err(e.into()));
                        return out;
                    }
                }
            }
            let r = self.execute(stmt, &[], &[]);
            let stop =
                r.is_err() || matches!(&r, Ok(o) if matches!(o.kind, OutcomeKind::CopyIn { .. }));
            out.push(r);
            if stop {
                return out;
            }
        }
        if self.implicit {
            self.implicit = false;
            if let State::Block(tx) = std::mem::replace(&mut self.state, State::Idle) {
                if let Err(e) = tx.commit() {
                    out.push(Err(e.into()));
                }
            }
        }
        out
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
            let _ = tx.rollback();
            if std::mem::take(&mut self.implicit) {
                self.state = State::Idle;
            }
        } else {
            self.state = State::Idle;
        }
        e
    }

    fn begin(&mut self, isolation: IsolationLevel) -> Result<Outcome> {
        // A BEGIN inside a simple query's implicit transaction makes it an ordinary block
        // (PostgreSQL does the same; the statements before it are part of the block).
        self.implicit = false;
        if matches!(self.state, State::Idle) {
            self.state = State::Block(Box::new(self.db.begin(isolation)?));
        }
        // In a block already: PostgreSQL warns and carries on.
        Ok(outcome("BEGIN", OutcomeKind::BlockStart))
    }

    fn end(&mut self, commit: bool) -> Result<Outcome> {
        self.implicit = false;
        let tag = if commit { "COMMIT" } else { "ROLLBACK" };
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Block(tx) if commit => tx.commit()?,
            State::Block(tx) => tx.rollback()?,
            // No block: PostgreSQL warns "there is no transaction in progress".
            State::Idle | State::Failed => {}
        }
        Ok(outcome(tag, OutcomeKind::BlockEnd))
    }

    /// Runs `f` with the block's transaction, or a short one of its own for catalog lookups.
    fn with_tx<T>(&self, f: impl FnOnce(&Transaction) -> Result<T>) -> Result<T> {
        match &self.state {
            State::Block(tx) => f(tx),
            State::Failed => Err(SqlError::in_failed_transaction()),
            State::Idle => {
                let tx = self.db.begin(IsolationLevel::ReadCommitted)?;
                let r = f(&tx);
                let _ = tx.rollback();
                r
            }
        }
    }

    fn copy_start(&mut self, c: &CopyStmt) -> Result<Outcome> {
        let own_tx = match &self.state {
            State::Block(_) => None,
            _ => Some(Box::new(self.db.begin(IsolationLevel::ReadCommitted)?)),
        };
        let tx: &Transaction = match (&own_tx, &self.state) {
            (Some(t), _) | (None, State::Block(t)) => t,
            (None, _) => return Err(SqlError::new("XX000", "COPY without a transaction")),
        };
        let r = (|| {
            let table = catalog::lookup(tx, &c.table)?;
            let targets = copy_targets(&table, &c.columns)?;
            Ok((table, targets))
        })();
        let (table, targets) = match r {
            Ok(x) => x,
            Err(e) => {
                if let Some(t) = own_tx {
                    let _ = t.rollback();
                }
                return Err(e);
            }
        };
        if !c.from {
            let r = copy_out(tx, &table, &targets, c);
            if let Some(t) = own_tx {
                t.commit()?;
            }
            let lines = r?;
            return Ok(outcome(
                format!("COPY {}", lines.len() - usize::from(c.header)),
                OutcomeKind::CopyOut {
                    columns: targets.len(),
                    lines,
                },
            ));
        }
        let columns = targets.len();
        self.copy = Some(CopyIn {
            stmt: c.clone(),
            table,
            targets,
            pending: Vec::new(),
            rows: 0,
            header_pending: c.header,
            own_tx,
        });
        Ok(outcome("COPY", OutcomeKind::CopyIn { columns }))
    }

    /// COPY FROM STDIN data, in any chunking: complete lines are inserted at once. An error
    /// ends the COPY (its rows roll back); the rest of the data is ignored and
    /// [`Session::copy_done`] reports the error, as the client reads it after CopyDone.
    pub fn copy_data(&mut self, data: &[u8]) {
        if self.copy.is_none() {
            return;
        }
        if let Err(e) = self.copy_lines(data, false) {
            let e = self.copy_abort(e);
            self.copy_error = Some(e);
        }
    }

    /// The end of COPY FROM STDIN data: the last line, then `COPY n`.
    pub fn copy_done(&mut self) -> Result<Outcome> {
        if let Some(e) = self.copy_error.take() {
            return Err(e);
        }
        if let Err(e) = self.copy_lines(&[], true) {
            return Err(self.copy_abort(e));
        }
        let c = self
            .copy
            .take()
            .ok_or_else(|| SqlError::new("08P01", "no COPY in progress"))?;
        if let Some(tx) = c.own_tx {
            tx.commit()?;
        }
        Ok(command(format!("COPY {}", c.rows)))
    }

    /// The client gave up the COPY (CopyFail): nothing of it stays.
    pub fn copy_fail(&mut self, message: &str) -> SqlError {
        self.copy_error = None;
        self.copy_abort(SqlError::new(
            "57014",
            format!("COPY from stdin failed: {message}"),
        ))
    }

    fn copy_abort(&mut self, e: SqlError) -> SqlError {
        if let Some(c) = self.copy.take() {
            if let Some(tx) = c.own_tx {
                let _ = tx.rollback();
                return e;
            }
        }
        self.fail(e)
    }

    fn copy_lines(&mut self, data: &[u8], last: bool) -> Result<()> {
        let Some(c) = self.copy.as_mut() else {
            return Err(SqlError::new("08P01", "no COPY in progress"));
        };
        c.pending.extend_from_slice(data);
        let own = c.own_tx.take();
        let r = copy_chunk(own.as_deref(), &self.state, c, last);
        c.own_tx = own;
        r
    }
}

fn copy_chunk(own: Option<&Transaction>, state: &State, c: &mut CopyIn, last: bool) -> Result<()> {
    {
        let tx: &Transaction = match (own, state) {
            (Some(t), _) => t,
            (None, State::Block(t)) => t,
            (None, _) => return Err(SqlError::new("XX000", "COPY without a transaction")),
        };
        let mut start = 0;
        let buf = std::mem::take(&mut c.pending);
        let mut lines = copy::Lines::new(&buf, c.stmt.format);
        while let Some(end) = lines.next_end() {
            let line = &buf[start..end];
            start = end + 1;
            copy_row(tx, c, line)?;
        }
        let rest = &buf[start..];
        if last {
            let rest = rest.strip_suffix(b"\r").unwrap_or(rest);
            if !rest.is_empty() && rest != b"\\." {
                copy_row(tx, c, rest)?;
            }
        } else {
            if rest.len() > MAX_COPY_LINE_BYTES {
                return Err(SqlError::new(
                    "54000",
                    format!("a COPY line may have at most {MAX_COPY_LINE_BYTES} bytes"),
                ));
            }
            c.pending = rest.to_vec();
        }
        Ok(())
    }
}

/// RETURNING's rows get the statement's output columns (the executor leaves them empty).
fn with_columns(mut out: Outcome, bound: Vec<OutColumn>) -> Outcome {
    if let OutcomeKind::Rows { columns, .. } = &mut out.kind {
        if columns.is_empty() {
            *columns = bound;
        }
    }
    out
}

fn check_param_count(given: usize, needed: usize) -> Result<()> {
    if given != needed {
        return Err(SqlError::new(
            "08P01",
            format!("bind message supplies {given} parameters, but prepared statement requires {needed}"),
        ));
    }
    Ok(())
}

fn copy_targets(table: &TableInfo, columns: &[String]) -> Result<Vec<usize>> {
    if columns.is_empty() {
        return Ok((0..table.columns.len()).collect());
    }
    columns.iter().map(|n| table.column(n)).collect()
}

/// One line of COPY FROM data inserted.
fn copy_row(tx: &Transaction, c: &mut CopyIn, line: &[u8]) -> Result<()> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line == b"\\." {
        return Ok(());
    }
    if std::mem::take(&mut c.header_pending) {
        return Ok(());
    }
    let fields = copy::parse_line(line, &c.stmt)?;
    if fields.len() != c.targets.len() {
        return Err(SqlError::new(
            "22P04",
            format!(
                "{} data for column{} (expected {} fields, got {}), COPY {}, line {}",
                if fields.len() > c.targets.len() {
                    "extra"
                } else {
                    "missing"
                },
                "s",
                c.targets.len(),
                fields.len(),
                c.table.def.name,
                c.rows + 1
            ),
        ));
    }
    let mut row = vec![Value::Null; c.table.columns.len()];
    for (f, &pos) in fields.into_iter().zip(&c.targets) {
        if let Some(text) = f {
            let col = &c.table.columns[pos];
            row[pos] = crate::types::parse_text(col.ty, &text).map_err(|e| {
                SqlError::new(
                    e.sqlstate(),
                    format!(
                        "{}, COPY {}, line {}, column {}",
                        e.message(),
                        c.table.def.name,
                        c.rows + 1,
                        col.name
                    ),
                )
            })?;
        }
    }
    check_not_null(&c.table, &row)?;
    tx.insert(c.table.def.oid, &row)?;
    c.rows += 1;
    Ok(())
}

fn copy_out(
    tx: &Transaction,
    table: &TableInfo,
    targets: &[usize],
    c: &CopyStmt,
) -> Result<Vec<Vec<u8>>> {
    let mut lines = Vec::new();
    if c.header {
        let names: Vec<Option<String>> = targets
            .iter()
            .map(|&i| Some(table.columns[i].name.clone()))
            .collect();
        lines.push(copy::format_line(&names, c));
    }
    for r in tx.scan(table.def.oid)? {
        let (_, row) = r?;
        if lines.len() >= plan::MAX_MATERIALIZED_ROWS {
            return Err(SqlError::new(
                "54000",
                "COPY TO may send at most 10 million rows at once for now",
            ));
        }
        let fields: Vec<Option<String>> = targets
            .iter()
            .map(|&i| crate::types::format_text(&row[i], table.columns[i].ty))
            .collect();
        lines.push(copy::format_line(&fields, c));
    }
    Ok(lines)
}

fn check_not_null(table: &TableInfo, row: &[Value]) -> Result<()> {
    for (c, v) in table.columns.iter().zip(row) {
        if c.not_null && v.is_null() {
            return Err(SqlError::new(
                "23502",
                format!(
                    "null value in column \"{}\" of relation \"{}\" violates not-null constraint",
                    c.name, table.def.name
                ),
            ));
        }
    }
    Ok(())
}

/// Executes a plan other than transaction control in `tx`.
fn run(
    db: &Database,
    tx: &Transaction,
    settings: &mut Settings,
    interrupt: &Interrupt,
    plan: &Plan,
    params: &[Value],
) -> Result<Outcome> {
    match plan {
        Plan::Set { name, value } => {
            settings.set(name, value.clone())?;
            return Ok(command(if value.is_none() { "RESET" } else { "SET" }));
        }
        Plan::Show(name) => {
            let v = if name == "all" {
                return Err(SqlError::unsupported("SHOW ALL (query pg_settings)"));
            } else {
                settings.show(name).ok_or_else(|| {
                    SqlError::new(
                        "42704",
                        format!("unrecognized configuration parameter \"{name}\""),
                    )
                })?
            };
            return Ok(outcome(
                "SHOW",
                OutcomeKind::Rows {
                    columns: vec![OutColumn {
                        name: name.clone(),
                        ty: SqlType::Text,
                    }],
                    rows: vec![vec![Value::Text(v)]],
                },
            ));
        }
        _ => {}
    }
    let deadline = settings.statement_timeout().map(|t| Instant::now() + t);
    interrupt.begin(tx.session_id(), deadline);
    let cx = Cx {
        db,
        tx,
        params,
        settings,
        interrupt,
        now_us: now_us(),
        outer: None,
    };
    let r = run_plan(&cx, plan).map_err(|e| {
        if e.sqlstate() == "57014" {
            interrupt.reported(e)
        } else {
            e
        }
    });
    interrupt.end();
    r
}

fn run_plan(cx: &Cx, plan: &Plan) -> Result<Outcome> {
    let tx = cx.tx;
    match plan {
        Plan::CreateTable {
            name,
            if_not_exists,
            columns,
            pkey,
            uniques,
        } => {
            if *if_not_exists && catalog::find(tx, name)?.is_some() {
                return Ok(command("CREATE TABLE"));
            }
            catalog::create(tx, name, columns, pkey.as_deref())?;
            for (i, u) in uniques.iter().enumerate() {
                let cols: Vec<&str> = u.iter().map(|&c| columns[c].name.as_str()).collect();
                let iname = unique_name(name, &cols, i);
                let table = tx.table(name)?;
                tx.create_index(&iname, table, &cols, true)?;
            }
            Ok(command("CREATE TABLE"))
        }
        Plan::DropTable { names, if_exists } => {
            for name in names {
                match catalog::find(tx, name)? {
                    Some(t) => catalog::drop(tx, t)?,
                    None if *if_exists => {}
                    None => {
                        return Err(SqlError::new(
                            "42P01",
                            format!("table \"{name}\" does not exist"),
                        ))
                    }
                }
            }
            Ok(command("DROP TABLE"))
        }
        Plan::Truncate(tables) => {
            for t in tables {
                tx.truncate(t.def.oid)?;
            }
            Ok(command("TRUNCATE TABLE"))
        }
        Plan::CreateIndex {
            name,
            table,
            columns,
            unique,
            if_not_exists,
        } => {
            let cols: Vec<&str> = columns
                .iter()
                .map(|&c| table.columns[c].name.as_str())
                .collect();
            let name = name
                .clone()
                .unwrap_or_else(|| format!("{}_{}_idx", table.def.name, cols.join("_")));
            if *if_not_exists && tx.index(&name).is_ok() {
                return Ok(command("CREATE INDEX"));
            }
            tx.create_index(&name, table.def.oid, &cols, *unique)?;
            Ok(command("CREATE INDEX"))
        }
        Plan::DropIndex { names, if_exists } => {
            for n in names {
                match tx.index(n) {
                    Ok(i) => tx.drop_index(i)?,
                    Err(_) if *if_exists => {}
                    Err(_) => {
                        return Err(SqlError::new(
                            "42704",
                            format!("index \"{n}\" does not exist"),
                        ))
                    }
                }
            }
            Ok(command("DROP INDEX"))
        }
        Plan::AddKey {
            table,
            name,
            columns,
            primary,
        } => add_key(tx, table, name.as_deref(), columns, *primary),
        Plan::Query { node, out } => {
            let rows = plan::collect(plan::open(node, cx)?)?;
            Ok(outcome(
                format!("SELECT {}", rows.len()),
                OutcomeKind::Rows {
                    columns: out.clone(),
                    rows,
                },
            ))
        }
        Plan::SelectForUpdate {
            table,
            scan,
            recheck,
            exprs,
            out,
        } => select_for_update(cx, table, scan, recheck.as_ref(), exprs, out),
        Plan::Insert {
            table,
            source,
            on_conflict,
            returning,
        } => insert(cx, table, source, on_conflict, returning.as_deref()),
        Plan::Update {
            table,
            scan,
            recheck,
            sets,
            returning,
        } => update(
            cx,
            table,
            scan,
            recheck.as_ref(),
            sets,
            returning.as_deref(),
        ),
        Plan::Delete {
            table,
            scan,
            recheck,
            returning,
        } => delete(cx, table, scan, recheck.as_ref(), returning.as_deref()),
        Plan::Explain(lines) => Ok(outcome(
            "EXPLAIN",
            OutcomeKind::Rows {
                columns: vec![OutColumn {
                    name: "QUERY PLAN".into(),
                    ty: SqlType::Text,
                }],
                rows: lines.iter().map(|l| vec![Value::Text(l.clone())]).collect(),
            },
        )),
        Plan::Begin(_) | Plan::Commit | Plan::Rollback | Plan::Set { .. } | Plan::Show(_) => Err(
            SqlError::new("XX000", "a statement reached the wrong executor"),
        ),
    }
}

fn unique_name(table: &str, cols: &[&str], _i: usize) -> String {
    format!("{table}_{}_key", cols.join("_"))
}

/// ALTER TABLE ... ADD PRIMARY KEY / UNIQUE: the unique index, built over the rows there
/// are (23505 if two share a key), and for a primary key the columns become NOT NULL.
fn add_key(
    tx: &Transaction,
    table: &TableInfo,
    name: Option<&str>,
    columns: &[usize],
    primary: bool,
) -> Result<Outcome> {
    let cols: Vec<&str> = columns
        .iter()
        .map(|&c| table.columns[c].name.as_str())
        .collect();
    if primary {
        if table.pkey.is_some() {
            return Err(SqlError::new(
                "42P16",
                format!(
                    "multiple primary keys for table \"{}\" are not allowed",
                    table.def.name
                ),
            ));
        }
        for r in tx.scan(table.def.oid)? {
            let (_, row) = r?;
            if let Some(&c) = columns.iter().find(|&&c| row[c].is_null()) {
                return Err(SqlError::new(
                    "23502",
                    format!(
                        "column \"{}\" of relation \"{}\" contains null values",
                        table.columns[c].name, table.def.name
                    ),
                ));
            }
        }
        catalog::set_not_null(tx, table, columns)?;
    }
    let name = match (name, primary) {
        // The primary key's index must be named `<table>_pkey`: that is how quire finds it.
        (_, true) => format!("{}_pkey", table.def.name),
        (Some(n), false) => n.to_string(),
        (None, false) => unique_name(&table.def.name, &cols, 0),
    };
    tx.create_index(&name, table.def.oid, &cols, true)?;
    Ok(command("ALTER TABLE"))
}

fn returning_rows(
    cx: &Cx,
    exprs: Option<&[Expr]>,
    row: &[Value],
    out: &mut Vec<Row>,
) -> Result<()> {
    if let Some(exprs) = exprs {
        out.push(
            exprs
                .iter()
                .map(|e| e.eval(cx, row))
                .collect::<Result<_>>()?,
        );
    }
    Ok(())
}

fn dml_outcome(tag: String, returning: Option<&[Expr]>, rows: Vec<Row>) -> Outcome {
    match returning {
        Some(_) => outcome(
            tag,
            OutcomeKind::Rows {
                columns: Vec::new(),
                rows,
            },
        ),
        None => command(tag),
    }
}

fn insert(
    cx: &Cx,
    table: &TableInfo,
    source: &plan::Node,
    on_conflict: &OnConflict,
    returning: Option<&[Expr]>,
) -> Result<Outcome> {
    // Materialized first: INSERT ... SELECT from the same table must not see its own rows.
    let rows = plan::collect(plan::open(source, cx)?)?;
    let mut n = 0u64;
    let mut out = Vec::new();
    for row in rows {
        check_not_null(table, &row)?;
        if !matches!(on_conflict, OnConflict::Error) {
            if let Some((tid, existing)) = conflicting_row(cx.tx, table, &row)? {
                if let OnConflict::Update { sets, filter } = on_conflict {
                    let mut both = existing.clone();
                    both.extend(row.iter().cloned());
                    if filter.as_ref().map_or(Ok(true), |f| f.holds(cx, &both))? {
                        let mut new = existing;
                        for (c, e) in sets {
                            new[*c] = e.eval(cx, &both)?;
                        }
                        check_not_null(table, &new)?;
                        if let Changed::Done(_, r) = cx.tx.update(table.def.oid, tid, &new)? {
                            n += 1;
                            returning_rows(cx, returning, &r, &mut out)?;
                        }
                    }
                }
                continue;
            }
        }
        cx.tx.insert(table.def.oid, &row)?;
        n += 1;
        returning_rows(cx, returning, &row, &mut out)?;
    }
    Ok(dml_outcome(format!("INSERT 0 {n}"), returning, out))
}

/// The row `row` would conflict with in a unique index, if any (ON CONFLICT's check).
fn conflicting_row(
    tx: &Transaction,
    table: &TableInfo,
    row: &[Value],
) -> Result<Option<(quire_engine::Tid, Row)>> {
    for idx in table.indexes.iter().filter(|i| i.unique) {
        let key: Vec<Value> = idx
            .columns
            .iter()
            .map(|&c| row[usize::from(c)].clone())
            .collect();
        if key.iter().any(Value::is_null) {
            continue;
        }
        if let Some(r) = tx
            .index_scan(idx.oid, Included(&key[..]), Included(&key[..]))?
            .next()
        {
            return Ok(Some(r?));
        }
    }
    Ok(None)
}

fn targets(cx: &Cx, scan: &plan::Node) -> Result<Vec<quire_engine::Tid>> {
    plan::collect(plan::open(scan, cx)?)?
        .iter()
        .map(|r| value_tid(r.last().unwrap_or(&Value::Null)))
        .collect()
}

fn update(
    cx: &Cx,
    table: &TableInfo,
    scan: &plan::Node,
    recheck: Option<&Expr>,
    sets: &[(usize, Expr)],
    returning: Option<&[Expr]>,
) -> Result<Outcome> {
    let mut n = 0u64;
    let mut out = Vec::new();
    for tid in targets(cx, scan)? {
        let mut failure = None;
        let changed = cx.tx.update_with(table.def.oid, tid, |current| {
            // READ COMMITTED: the row may have changed since the scan; the predicate is
            // checked again on its newest version.
            let r = (|| -> Result<Option<Row>> {
                if let Some(p) = recheck {
                    if !p.holds(cx, current)? {
                        return Ok(None);
                    }
                }
                let mut row = current.clone();
                for (c, e) in sets {
                    row[*c] = e.eval(cx, current)?;
                }
                check_not_null(table, &row)?;
                Ok(Some(row))
            })();
            r.unwrap_or_else(|e| {
                failure = Some(e);
                None
            })
        })?;
        if let Some(e) = failure {
            return Err(e);
        }
        if let Changed::Done(_, row) = changed {
            n += 1;
            returning_rows(cx, returning, &row, &mut out)?;
        }
    }
    Ok(dml_outcome(format!("UPDATE {n}"), returning, out))
}

fn select_for_update(
    cx: &Cx,
    table: &TableInfo,
    scan: &plan::Node,
    recheck: Option<&Expr>,
    exprs: &[Expr],
    out: &[OutColumn],
) -> Result<Outcome> {
    let mut rows = Vec::new();
    for tid in targets(cx, scan)? {
        // The lock is taken on the newest version (READ COMMITTED follows concurrent
        // updates), which must still match.
        if let Changed::Done(_, row) = cx.tx.lock_row(table.def.oid, tid)? {
            if recheck.map_or(Ok(true), |p| p.holds(cx, &row))? {
                rows.push(
                    exprs
                        .iter()
                        .map(|e| e.eval(cx, &row))
                        .collect::<Result<_>>()?,
                );
            }
        }
    }
    Ok(outcome(
        format!("SELECT {}", rows.len()),
        OutcomeKind::Rows {
            columns: out.to_vec(),
            rows,
        },
    ))
}

fn delete(
    cx: &Cx,
    table: &TableInfo,
    scan: &plan::Node,
    recheck: Option<&Expr>,
    returning: Option<&[Expr]>,
) -> Result<Outcome> {
    let mut n = 0u64;
    let mut out = Vec::new();
    for tid in targets(cx, scan)? {
        let mut failure = None;
        let changed = cx
            .tx
            .delete_if(table.def.oid, tid, |current| match recheck {
                None => true,
                Some(p) => p.holds(cx, current).unwrap_or_else(|e| {
                    failure = Some(e);
                    false
                }),
            })?;
        if let Some(e) = failure {
            return Err(e);
        }
        if let Changed::Done(_, row) = changed {
            n += 1;
            returning_rows(cx, returning, &row, &mut out)?;
        }
    }
    Ok(dml_outcome(format!("DELETE {n}"), returning, out))
}
