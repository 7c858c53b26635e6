//! One authenticated client on its own OS thread: the protocol after the startup, as
//! PostgreSQL's `PostgresMain` runs it. Simple queries, the extended protocol (named and
//! unnamed statements and portals, Execute with a row limit, Describe, Close, Flush, Sync),
//! COPY in both directions, and the session's end. The thread owns the [`Session`] and its
//! socket ([`Transport`]); statements run in place and may block it (a row lock), never a
//! thread another client needs.
//!
//! ## Rules
//! - Results stream: each row is encoded into the output buffer as the executor makes it,
//!   and the buffer is written whenever it passes its bound, so a result of any size costs
//!   the same memory. An error after some rows went out is an ErrorResponse after them, as
//!   in PostgreSQL.
//! - An Execute with a row limit sends that many rows and keeps the rest of the result in
//!   the portal's [`Spool`] (memory up to `work_mem`, then a temp file); the next Execute
//!   continues from it, and the final one reports how many rows it sent, as PostgreSQL's
//!   `SELECT n` does.
//! - After an error in an extended-protocol message, messages are skipped until Sync
//!   (PostgreSQL's `ignore_till_sync`); a simple query's error ends that query only.
//! - A message whose frame is bad (unknown type, length out of bounds) ends the connection
//!   with FATAL 08P01; one whose body is bad is an ERROR, and the connection goes on.
//! - Between commands the thread waits for its client, its idle timer
//!   (`idle_in_transaction_session_timeout`, `idle_session_timeout`: FATAL 25P03, 57P05)
//!   and its latch (the server's farewell, `pg_terminate_backend`: FATAL 57P01 or 57P02).
//!   Ending drops the session, which rolls back its open transaction.
//! - Portals live until their transaction ends (all of them at a commit or rollback, the
//!   unnamed one also at the next Bind or simple query), statements until Close, SQL's
//!   DEALLOCATE or DISCARD ALL (which drop the protocol's statements too, as PostgreSQL's:
//!   the session names them after each message), or the end of the session. Named
//!   statements share one namespace with SQL's PREPARE, and `pg_prepared_statements` shows
//!   both.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use quire_engine::{Database, SqlState, Value};
use quire_sql::{
    Description, IdleLimit, OutColumns, Outcome, OutcomeKind, Output, Session, Spool, SqlError,
    SqlType, Statement, TxStatus,
};

use crate::protocol::backend::{self, Notice};
use crate::protocol::frontend::{self, Format, Message, Target};
use crate::protocol::ProtocolError;
use crate::transport::{Farewell, Fill, Transport, TERMINATED};
use crate::wire;

/// The ParameterStatus values a client hears at startup that no session changes, beside
/// those the session reports ([`Session::reported_parameters`]).
const FIXED_PARAMETERS: &[(&str, &str)] = &[
    ("default_transaction_read_only", "off"),
    ("in_hot_standby", "off"),
    ("integer_datetimes", "on"),
    ("server_encoding", "UTF8"),
];

/// A statement of the extended protocol (Parse).
struct Prepared {
    /// The source: the session keeps the statement's plan under it.
    text: Arc<str>,
    /// `None` for an empty query string.
    stmt: Option<Arc<Statement>>,
    /// The parameter types the client declared (`Unknown` where it left them open).
    hints: Vec<SqlType>,
    /// The statement described at its last use, and the catalog generation then: a Bind
    /// while no definition changed needs no new description.
    described: Mutex<Option<(u64, Arc<Description>)>>,
}

/// What a portal has done so far.
enum Progress {
    Ready,
    /// Run with a row limit: the rows not sent yet, and the command tag to report once they
    /// are all sent.
    Suspended {
        rest: Spool,
        tag: String,
    },
    Done,
}

/// A portal (Bind).
struct Portal {
    statement: Arc<Prepared>,
    params: Vec<Option<Vec<u8>>>,
    param_formats: Vec<Format>,
    /// Bind's result format codes: none, one for all, or one per column (checked).
    formats: Vec<Format>,
    description: Arc<Description>,
    progress: Progress,
}

/// An error to report: ERROR goes on, FATAL ends the connection.
struct Failure {
    fatal: bool,
    error: SqlError,
}

impl From<SqlError> for Failure {
    fn from(error: SqlError) -> Self {
        // A terminated session's statement ends the connection.
        let fatal = error.sqlstate() == TERMINATED.sqlstate;
        Failure { fatal, error }
    }
}

impl From<ProtocolError> for Failure {
    fn from(e: ProtocolError) -> Self {
        Failure {
            fatal: e.fatal,
            error: SqlError::new(e.sqlstate, e.message),
        }
    }
}

/// The client went away (or a write failed): nothing more can be sent.
fn connection_lost(e: &std::io::Error) -> SqlError {
    SqlError::new(
        SqlState::CONNECTION_FAILURE,
        format!("could not send data to client: {e}"),
    )
}

/// How the message loop ends.
enum End {
    /// The client closed or sent Terminate.
    Client,
    /// Tell the client this (FATAL), then close.
    Fatal(SqlError),
}

/// One session's connection.
pub(crate) struct Conn {
    io: Transport,
    session: Session,
    db: Arc<Database>,
    statements: HashMap<String, Arc<Prepared>>,
    portals: HashMap<String, Portal>,
    max_message_bytes: usize,
    skip_until_sync: bool,
    /// The ReadyForQuery was the last message sent: the client's next message is a
    /// command, and the idle timers apply.
    awaiting_command: bool,
}

impl Conn {
    pub(crate) fn new(
        io: Transport,
        session: Session,
        db: Arc<Database>,
        max_message_bytes: usize,
    ) -> Conn {
        Conn {
            io,
            session,
            db,
            statements: HashMap::new(),
            portals: HashMap::new(),
            max_message_bytes,
            skip_until_sync: false,
            awaiting_command: false,
        }
    }

    pub(crate) fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    /// The session's process id (BackendKeyData).
    pub(crate) fn pid(&self) -> i32 {
        self.session.backend().pid()
    }

    /// Ends the connection before its first ReadyForQuery: FATAL `e`.
    pub(crate) fn refuse(mut self, e: &SqlError) {
        backend::authentication_ok(&mut self.io.out);
        send_error(&mut self.io.out, "FATAL", e);
        self.io.close();
        if let Err(e) = self.session.close() {
            tracing::warn!(error = %e, "closing a refused session failed");
        }
    }

    /// The session's `client_min_messages`: which notices the client receives.
    fn min_messages(&self) -> String {
        self.session
            .settings()
            .show("client_min_messages")
            .unwrap_or_default()
    }

    /// The session's first messages: AuthenticationOk, the parameters, the cancel key,
    /// ReadyForQuery; then the message loop until the client leaves or a FATAL error.
    pub(crate) fn serve(mut self, notices: &[String]) {
        backend::authentication_ok(&mut self.io.out);
        for n in notices {
            send_notice(&mut self.io.out, "WARNING", SqlState::WARNING, n);
        }
        let version = format!(
            "{} (quire {})",
            quire_sql::SERVER_VERSION,
            env!("CARGO_PKG_VERSION")
        );
        backend::parameter_status(&mut self.io.out, "server_version", &version);
        for (name, value) in FIXED_PARAMETERS {
            backend::parameter_status(&mut self.io.out, name, value);
        }
        for (name, value) in self.session.reported_parameters() {
            backend::parameter_status(&mut self.io.out, name, &value);
        }
        let b = self.session.backend();
        backend::backend_key_data(&mut self.io.out, b.pid(), &b.key());
        self.ready_for_query();
        let end = self.message_loop();
        if let End::Fatal(e) = end {
            tracing::debug!(
                sqlstate = e.sqlstate().code(),
                message = e.message(),
                "connection ends"
            );
            send_error(&mut self.io.out, "FATAL", &e);
        }
        self.io.close();
        if let Err(e) = self.session.close() {
            tracing::warn!(error = %e, "rolling back at disconnect failed");
        }
    }

    fn message_loop(&mut self) -> End {
        // Bounded by the client: each turn takes one message or ends.
        loop {
            let (tag, len) = match self.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => return End::Client,
                Err(end) => return end,
            };
            let decoded = frontend::decode(tag, &self.io.buffered()[5..5 + len]);
            self.io.consume(5 + len);
            if self.skip_until_sync && !matches!(decoded, Ok(Message::Sync)) {
                continue;
            }
            let handled = match decoded {
                Ok(Message::Terminate) => return End::Client,
                Ok(m) => self.handle(m),
                Err(e) => Err(e.into()),
            };
            if let Err(f) = handled {
                if let Some(end) = self.report(f, tag) {
                    return end;
                }
            }
            if let Some(f) = self.io.wakeup().farewell() {
                return End::Fatal(SqlError::new(f.sqlstate, f.message));
            }
        }
    }

    /// Sends an error; after an extended-protocol message, skips to the next Sync.
    fn report(&mut self, f: Failure, tag: u8) -> Option<End> {
        if f.fatal {
            return Some(End::Fatal(f.error));
        }
        send_error(&mut self.io.out, "ERROR", &f.error);
        if matches!(tag, b'P' | b'B' | b'D' | b'E' | b'C' | b'H') {
            self.skip_until_sync = true;
        } else if tag != b'S' {
            // A simple query (or another message outside the extended protocol) ends
            // with ReadyForQuery after its error, as in PostgreSQL.
            self.ready_for_query();
        }
        None
    }

    /// Waits for the next whole message; returns its type and body length (the body is in
    /// the input buffer after the 5-byte header), or `None` when the client left.
    fn next_frame(&mut self) -> Result<Option<(u8, usize)>, End> {
        let idle = self
            .awaiting_command
            .then(|| self.session.idle_limit())
            .flatten()
            .map(|l| (Instant::now() + l.after, l));
        // Bounded: each turn reads more of the message or ends.
        loop {
            let buf = self.io.buffered();
            let want = if buf.len() >= 5 {
                let len = i32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]);
                let body = frontend::header(buf[0], len, self.max_message_bytes)
                    .map_err(|e| End::Fatal(SqlError::new(e.sqlstate, e.message)))?;
                if buf.len() >= 5 + body {
                    self.awaiting_command = false;
                    return Ok(Some((buf[0], body)));
                }
                5 + body - buf.len()
            } else {
                5 - buf.len()
            };
            match self.io.fill(want, idle.map(|(at, _)| at)) {
                Ok(Fill::Data) => {}
                Ok(Fill::Closed) => return Ok(None),
                Err(e) => {
                    tracing::debug!(error = %e, "connection failed");
                    return Ok(None);
                }
                Ok(Fill::Woken) => {
                    if let Some(f) = self.io.wakeup().farewell() {
                        return Err(farewell(f));
                    }
                }
                Ok(Fill::TimedOut) => {
                    if let Some((_, limit)) = idle {
                        return Err(idle_end(limit));
                    }
                }
            }
        }
    }

    fn handle(&mut self, m: Message) -> Result<(), Failure> {
        let r = self.handle_message(m);
        // DEALLOCATE and DISCARD ALL drop the protocol's named statements too.
        for name in self.session.take_deallocated() {
            self.statements.remove(&name);
        }
        r
    }

    fn handle_message(&mut self, m: Message) -> Result<(), Failure> {
        match m {
            Message::Query(sql) => self.simple_query(&sql),
            Message::Parse {
                name,
                query,
                param_types,
            } => self.parse(name, query, &param_types),
            Message::Bind(b) => self.bind(b),
            Message::Describe { target, name } => self.describe(target, &name),
            Message::Execute { portal, max_rows } => self.execute(&portal, max_rows),
            Message::Close { target, name } => {
                match target {
                    Target::Statement => {
                        self.session.protocol_statement(&name, None);
                        self.statements.remove(&name).map(drop)
                    }
                    Target::Portal => self.portals.remove(&name).map(drop),
                };
                backend::close_complete(&mut self.io.out);
                Ok(())
            }
            Message::Flush => self.io.flush().map_err(|e| connection_lost(&e).into()),
            Message::Sync => {
                self.sync();
                Ok(())
            }
            // Outside COPY: the tail of a COPY that failed; PostgreSQL ignores these too.
            // Terminate: the loop that read it ends the session.
            Message::CopyData(_)
            | Message::CopyDone
            | Message::CopyFail(_)
            | Message::Terminate => Ok(()),
            Message::FunctionCall => Err(SqlError::new(
                SqlState::FEATURE_NOT_SUPPORTED,
                "fast-path function calls are not supported",
            )
            .into()),
            Message::Password(_) => {
                Err(ProtocolError::fatal("invalid frontend message type 112").into())
            }
        }
    }

    /// Query: every statement of the string, each one's results streamed.
    fn simple_query(&mut self, sql: &str) -> Result<(), Failure> {
        self.portals.remove("");
        self.statements.remove("");
        let min_messages = self.min_messages();
        let mut out = SimpleOutput {
            min_messages,
            io: &mut self.io,
            columns: Arc::new([]),
            statements: 0,
            copy_in: None,
            fatal: None,
        };
        self.session.execute_query_to(sql, &mut out);
        let (statements, copy_in, fatal) = (out.statements, out.copy_in, out.fatal);
        if let Some(e) = fatal {
            return Err(Failure {
                fatal: true,
                error: e,
            });
        }
        if statements == 0 {
            backend::empty_query_response(&mut self.io.out);
        }
        if copy_in.is_some() {
            return self.copy_in(false);
        }
        self.end_of_command();
        self.ready_for_query();
        Ok(())
    }

    /// Parse: a statement for later Binds (42P05 for a name in use).
    fn parse(&mut self, name: String, query: String, types: &[u32]) -> Result<(), Failure> {
        if !name.is_empty()
            && (self.statements.contains_key(&name) || self.session.has_prepared(&name))
        {
            return Err(SqlError::new(
                SqlState::DUPLICATE_PSTATEMENT,
                format!("prepared statement \"{name}\" already exists"),
            )
            .into());
        }
        let hints = types
            .iter()
            .map(|&oid| match oid {
                0 => Ok(SqlType::Unknown),
                oid => SqlType::from_oid(oid).ok_or_else(|| {
                    SqlError::new(
                        SqlState::UNDEFINED_OBJECT,
                        format!("type with OID {oid} does not exist"),
                    )
                }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut parsed = quire_sql::parse(&query)?;
        if parsed.len() > 1 {
            return Err(SqlError::syntax(
                "cannot insert multiple commands into a prepared statement",
            )
            .into());
        }
        let stmt = parsed.pop().map(Arc::new);
        if self.session.status() == TxStatus::Failed
            && !stmt.as_ref().is_some_and(|s| s.allowed_in_failed_block())
        {
            return Err(SqlError::in_failed_transaction().into());
        }
        self.session
            .protocol_statement(&name, Some((&query, hints.as_slice())));
        let prepared = Prepared {
            text: Arc::from(query),
            stmt,
            hints,
            described: Mutex::new(None),
        };
        self.statements.insert(name, Arc::new(prepared));
        backend::parse_complete(&mut self.io.out);
        Ok(())
    }

    /// The description of `p`, kept while no definition changes.
    fn description(&mut self, p: &Prepared) -> Result<Arc<Description>, SqlError> {
        let Some(stmt) = &p.stmt else {
            return Ok(Arc::new(Description {
                params: Vec::new(),
                columns: Arc::new([]),
            }));
        };
        let generation = self.db.catalog_generation();
        let mut kept = p.described.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((g, d)) = kept.as_ref() {
            if *g == generation {
                return Ok(Arc::clone(d));
            }
        }
        let d = Arc::new(self.session.describe(&p.text, stmt, &p.hints)?);
        *kept = Some((generation, Arc::clone(&d)));
        Ok(d)
    }

    /// Bind: a portal of a statement with its parameters and result formats.
    fn bind(&mut self, b: frontend::Bind) -> Result<(), Failure> {
        let Some(statement) = self.statements.get(&b.statement).cloned() else {
            return Err(SqlError::new(
                SqlState::INVALID_SQL_STATEMENT_NAME,
                format!("prepared statement \"{}\" does not exist", b.statement),
            )
            .into());
        };
        if !b.portal.is_empty() && self.portals.contains_key(&b.portal) {
            return Err(SqlError::new(
                SqlState::DUPLICATE_CURSOR,
                format!("portal \"{}\" already exists", b.portal),
            )
            .into());
        }
        if self.session.status() == TxStatus::Failed
            && !statement
                .stmt
                .as_ref()
                .is_some_and(|s| s.allowed_in_failed_block())
        {
            return Err(SqlError::in_failed_transaction().into());
        }
        let description = self.description(&statement)?;
        if b.params.len() != description.params.len() {
            return Err(SqlError::new(
                SqlState::PROTOCOL_VIOLATION,
                format!(
                    "bind message supplies {} parameters, but prepared statement \"{}\" requires {}",
                    b.params.len(),
                    b.statement,
                    description.params.len()
                ),
            )
            .into());
        }
        check_result_formats(&b.result_formats, description.columns.len())?;
        let portal = Portal {
            statement,
            params: b.params,
            param_formats: b.param_formats,
            formats: b.result_formats,
            description,
            progress: Progress::Ready,
        };
        self.portals.insert(b.portal, portal);
        backend::bind_complete(&mut self.io.out);
        Ok(())
    }

    /// Describe: a statement's parameter types and columns, or a portal's columns.
    fn describe(&mut self, target: Target, name: &str) -> Result<(), Failure> {
        match target {
            Target::Statement => {
                let Some(p) = self.statements.get(name).cloned() else {
                    return Err(SqlError::new(
                        SqlState::INVALID_SQL_STATEMENT_NAME,
                        format!("prepared statement \"{name}\" does not exist"),
                    )
                    .into());
                };
                let d = self.description(&p)?;
                let oids: Vec<u32> = d.params.iter().map(|t| t.oid()).collect();
                backend::parameter_description(&mut self.io.out, &oids);
                row_description(&mut self.io.out, &d.columns, &[]);
            }
            Target::Portal => {
                if let Some(p) = self.portals.get(name) {
                    row_description(&mut self.io.out, &p.description.columns, &p.formats);
                } else if let Some(columns) = self.session.cursor_columns(name) {
                    // A SQL cursor is a portal too (psycopg describes its named cursors).
                    row_description(&mut self.io.out, &columns, &[]);
                } else {
                    return Err(no_portal(name).into());
                }
            }
        }
        Ok(())
    }

    /// Execute: a portal's rows, all or at most `max_rows` of them.
    fn execute(&mut self, name: &str, max_rows: u32) -> Result<(), Failure> {
        let Some(portal) = self.portals.get_mut(name) else {
            return Err(no_portal(name).into());
        };
        match std::mem::replace(&mut portal.progress, Progress::Done) {
            Progress::Done => {
                backend::command_complete(&mut self.io.out, "SELECT 0");
                Ok(())
            }
            Progress::Suspended { rest, tag } => self.resume(name, rest, tag, max_rows),
            Progress::Ready => self.run_portal(name, max_rows),
        }
    }

    /// A portal's first Execute.
    fn run_portal(&mut self, name: &str, max_rows: u32) -> Result<(), Failure> {
        let Some(portal) = self.portals.get_mut(name) else {
            return Err(no_portal(name).into());
        };
        let Some(stmt) = portal.statement.stmt.clone() else {
            backend::empty_query_response(&mut self.io.out);
            return Ok(());
        };
        // A portal runs once: its parameters are not needed after this.
        let params = std::mem::take(&mut portal.params);
        let formats = std::mem::take(&mut portal.param_formats);
        let statement = Arc::clone(&portal.statement);
        let mut out = PortalOutput {
            io: &mut self.io,
            db: &self.db,
            columns: &portal.description.columns,
            formats: &portal.formats,
            limit: u64::from(max_rows),
            sent: 0,
            rest: None,
            work_mem: self.session.settings().work_mem_bytes(),
        };
        let decode = |types: &[SqlType]| decode_params(&params, &formats, types);
        let r =
            self.session
                .execute_with(&statement.text, &stmt, &statement.hints, &decode, &mut out);
        let (sent, rest) = (out.sent, out.rest.take());
        let outcome = r?;
        self.finish_execute(name, outcome, u64::from(max_rows), sent, rest)
    }

    /// After a portal's statement ran: its command tag, or PortalSuspended with the rows
    /// still to send; COPY's responses. `limit`: the Execute's row limit (0 for none); with
    /// one, `SELECT n` counts the rows it sent.
    fn finish_execute(
        &mut self,
        name: &str,
        outcome: Outcome,
        limit: u64,
        sent: u64,
        rest: Option<Spool>,
    ) -> Result<(), Failure> {
        let min_messages = self.min_messages();
        send_notices(&mut self.io.out, &outcome.notices, &min_messages);
        let limited = limit > 0;
        let tag = if limited {
            select_tag(&outcome.tag, sent)
        } else {
            outcome.tag
        };
        match outcome.kind {
            OutcomeKind::CopyIn { columns, binary } => {
                backend::copy_response(&mut self.io.out, true, columns, binary);
                return self.copy_in(true);
            }
            OutcomeKind::CopyOut { .. } => backend::copy_done(&mut self.io.out),
            OutcomeKind::Rows { .. } if limited && (rest.is_some() || sent == limit) => {
                // As PostgreSQL: a fetch that filled its limit does not know it reached the
                // end, so it suspends; the next one finds the end (`SELECT 0`).
                let rest = rest.unwrap_or_else(|| Spool::new(0, 0));
                if let Some(p) = self.portals.get_mut(name) {
                    p.progress = Progress::Suspended { rest, tag };
                }
                backend::portal_suspended(&mut self.io.out);
                return Ok(());
            }
            // COMMIT or ROLLBACK through Execute: the other portals end with the block.
            OutcomeKind::BlockEnd => self.portals.retain(|n, _| n == name),
            _ => {}
        }
        backend::command_complete(&mut self.io.out, &tag);
        Ok(())
    }

    /// A suspended portal's next Execute: rows from its spool.
    fn resume(
        &mut self,
        name: &str,
        mut rest: Spool,
        tag: String,
        max_rows: u32,
    ) -> Result<(), Failure> {
        let Some(portal) = self.portals.get(name) else {
            return Err(no_portal(name).into());
        };
        let (columns, formats) = (&portal.description.columns, &portal.formats);
        let mut sent = 0u64;
        // Bounded by the spool's rows and the limit.
        while max_rows == 0 || sent < u64::from(max_rows) {
            let Some(row) = rest.pop()? else {
                break;
            };
            wire::encode_row(&mut self.io.out, &row, columns, |i| is_binary(formats, i))?;
            self.io.flush_if_full().map_err(|e| connection_lost(&e))?;
            sent += 1;
        }
        if rest.is_empty() && (max_rows == 0 || sent < u64::from(max_rows)) {
            backend::command_complete(&mut self.io.out, &select_tag(&tag, sent));
        } else {
            if let Some(p) = self.portals.get_mut(name) {
                p.progress = Progress::Suspended { rest, tag };
            }
            backend::portal_suspended(&mut self.io.out);
        }
        Ok(())
    }

    /// Sync: commits the implicit transaction of the extended protocol's writes (an error
    /// is reported here), then ReadyForQuery.
    fn sync(&mut self) {
        self.skip_until_sync = false;
        if self.session.awaits_sync() {
            if let Err(e) = self.session.sync() {
                send_error(&mut self.io.out, "ERROR", &e);
            }
        }
        self.portals.remove("");
        self.end_of_command();
        self.ready_for_query();
    }

    /// COPY FROM STDIN: CopyData to the session until CopyDone or CopyFail. `extended`: it
    /// began with Execute (after an error, skip to Sync), else with a simple query
    /// (ReadyForQuery follows).
    fn copy_in(&mut self, extended: bool) -> Result<(), Failure> {
        // Bounded by the client: each turn takes one message.
        let result = loop {
            let (tag, len) = match self.next_frame() {
                Ok(Some(frame)) => frame,
                Err(End::Fatal(e)) => {
                    return Err(Failure {
                        fatal: true,
                        error: e,
                    })
                }
                Ok(None) | Err(End::Client) => {
                    return Err(SqlError::new(
                        SqlState::CONNECTION_FAILURE,
                        "the client left during COPY",
                    )
                    .into())
                }
            };
            let decoded = frontend::decode(tag, &self.io.buffered()[5..5 + len]);
            self.io.consume(5 + len);
            match decoded {
                Ok(Message::CopyData(data)) => self.session.copy_data(&data),
                Ok(Message::CopyDone) => break self.session.copy_done(),
                Ok(Message::CopyFail(message)) => break Err(self.session.copy_fail(&message)),
                Ok(Message::Flush | Message::Sync) => {}
                Ok(other) => {
                    let e = SqlError::new(
                        SqlState::PROTOCOL_VIOLATION,
                        format!("unexpected message type 0x{tag:02X} during COPY from stdin"),
                    );
                    drop(other);
                    break Err(self.session.copy_fail(e.message()));
                }
                Err(e) => break Err(self.session.copy_fail(&e.message)),
            }
        };
        match result {
            Ok(o) => backend::command_complete(&mut self.io.out, &o.tag),
            Err(e) if extended => return Err(e.into()),
            Err(e) => send_error(&mut self.io.out, "ERROR", &e),
        }
        self.end_of_command();
        if !extended {
            self.ready_for_query();
        }
        Ok(())
    }

    /// After a simple query, a Sync or a COPY: portals go with the transaction that ended.
    fn end_of_command(&mut self) {
        if self.session.status() == TxStatus::Idle && !self.session.awaits_sync() {
            self.portals.clear();
        }
    }

    fn ready_for_query(&mut self) {
        self.report_parameters();
        let status = match self.session.status() {
            TxStatus::Idle => backend::TxStatus::Idle,
            TxStatus::InBlock => backend::TxStatus::InBlock,
            TxStatus::Failed => backend::TxStatus::Failed,
        };
        backend::ready_for_query(&mut self.io.out, status);
        self.awaiting_command = true;
    }

    /// ParameterStatus for each reported parameter whose value changed since the client
    /// was last told.
    fn report_parameters(&mut self) {
        for (name, value) in self.session.reported_parameters_changed() {
            backend::parameter_status(&mut self.io.out, name, &value);
        }
    }
}

fn no_portal(name: &str) -> SqlError {
    SqlError::new(
        SqlState::INVALID_CURSOR_NAME,
        format!("portal \"{name}\" does not exist"),
    )
}

fn farewell(f: Farewell) -> End {
    End::Fatal(SqlError::new(f.sqlstate, f.message))
}

fn idle_end(limit: IdleLimit) -> End {
    tracing::info!(sqlstate = limit.sqlstate.code(), "{}", limit.message);
    End::Fatal(SqlError::new(limit.sqlstate, limit.message))
}

/// `SELECT n` reports the rows this Execute sent; other tags stand as the statement gave
/// them.
fn select_tag(tag: &str, sent: u64) -> String {
    if tag.starts_with("SELECT ") {
        format!("SELECT {sent}")
    } else {
        tag.to_string()
    }
}

/// Bind's result format codes must be none (all text), one for all, or one per column
/// (else PostgreSQL's 08P01).
fn check_result_formats(formats: &[Format], columns: usize) -> Result<(), SqlError> {
    if formats.len() > 1 && formats.len() != columns {
        return Err(SqlError::new(
            SqlState::PROTOCOL_VIOLATION,
            format!(
                "bind message has {} result formats but query has {columns} columns",
                formats.len()
            ),
        ));
    }
    Ok(())
}

/// Whether result column `i` goes out in binary under `formats` (checked at Bind).
fn is_binary(formats: &[Format], i: usize) -> bool {
    frontend::formats_for(formats, i) == Format::Binary
}

/// A portal's parameter values from their bytes, once binding has given their types.
fn decode_params(
    raw: &[Option<Vec<u8>>],
    formats: &[Format],
    types: &[SqlType],
) -> Result<Vec<Value>, SqlError> {
    if types.len() != raw.len() {
        return Err(SqlError::new(
            SqlState::PROTOCOL_VIOLATION,
            format!(
                "bind message supplies {} parameters, but prepared statement requires {}",
                raw.len(),
                types.len()
            ),
        ));
    }
    raw.iter()
        .zip(types)
        .enumerate()
        .map(|(i, (b, t))| {
            let binary = frontend::formats_for(formats, i) == Format::Binary;
            wire::decode_param(b.as_deref(), binary, *t, i + 1)
        })
        .collect()
}

/// RowDescription of `columns` in `formats` (none: all text), or NoData for none.
fn row_description(out: &mut Vec<u8>, columns: &OutColumns, formats: &[Format]) {
    if columns.is_empty() {
        backend::no_data(out);
        return;
    }
    let fields: Vec<backend::Field<'_>> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| backend::Field {
            name: &c.name,
            table_oid: 0,
            column: 0,
            type_oid: c.ty.oid(),
            type_size: wire::type_size(c.ty),
            type_modifier: wire::type_modifier(c.ty),
            binary: is_binary(formats, i),
        })
        .collect();
    backend::row_description(out, &fields);
}

fn send_error(out: &mut Vec<u8>, severity: &str, e: &SqlError) {
    backend::error_response(
        out,
        &Notice {
            severity,
            sqlstate: e.sqlstate(),
            message: e.message(),
            detail: e.detail(),
            hint: e.hint(),
            position: e.position(),
            context: e.context(),
        },
    );
}

fn send_notice(out: &mut Vec<u8>, severity: &str, sqlstate: SqlState, message: &str) {
    backend::notice_response(out, &Notice::new(severity, sqlstate, message));
}

fn send_sql_notice(out: &mut Vec<u8>, n: &quire_sql::Notice) {
    backend::notice_response(
        out,
        &Notice {
            detail: n.detail.as_deref(),
            ..Notice::new(n.severity.name(), n.code, &n.message)
        },
    );
}

/// A statement's messages (VACUUM VERBOSE's report, "... skipping"): NoticeResponse at
/// their severity, those below the session's `client_min_messages` left out.
fn send_notices(out: &mut Vec<u8>, notices: &[quire_sql::Notice], min_messages: &str) {
    for n in notices.iter().filter(|n| n.severity.reaches(min_messages)) {
        send_sql_notice(out, n);
    }
}

/// A simple query's results: RowDescription, DataRows in text, CommandComplete (or the
/// error) per statement.
struct SimpleOutput<'a> {
    io: &'a mut Transport,
    columns: OutColumns,
    statements: usize,
    /// A COPY FROM STDIN started (its columns): the client sends its data next.
    copy_in: Option<usize>,
    /// An error that ends the connection (the session was terminated).
    fatal: Option<SqlError>,
    /// `client_min_messages` when the message arrived.
    min_messages: String,
}

impl Output for SimpleOutput<'_> {
    fn rows(&mut self, columns: &OutColumns) -> quire_sql::Result<()> {
        self.columns = Arc::clone(columns);
        row_description(&mut self.io.out, columns, &[]);
        Ok(())
    }

    fn row(&mut self, row: &[Value]) -> quire_sql::Result<()> {
        wire::encode_row(&mut self.io.out, row, &self.columns, |_| false)?;
        self.io.flush_if_full().map_err(|e| connection_lost(&e))
    }

    fn copy_out(&mut self, columns: usize, binary: bool) -> quire_sql::Result<()> {
        backend::copy_response(&mut self.io.out, false, columns, binary);
        Ok(())
    }

    fn copy_data(&mut self, data: &[u8]) -> quire_sql::Result<()> {
        backend::copy_data(&mut self.io.out, data);
        self.io.flush_if_full().map_err(|e| connection_lost(&e))
    }

    fn done(&mut self, result: quire_sql::Result<Outcome>) -> quire_sql::Result<()> {
        self.statements += 1;
        let out = &mut self.io.out;
        match result {
            Ok(o) => {
                send_notices(out, &o.notices, &self.min_messages);
                match o.kind {
                    OutcomeKind::CopyIn { columns, binary } => {
                        backend::copy_response(out, true, columns, binary);
                        self.copy_in = Some(columns);
                    }
                    OutcomeKind::CopyOut { .. } => {
                        backend::copy_done(out);
                        backend::command_complete(out, &o.tag);
                    }
                    _ => backend::command_complete(out, &o.tag),
                }
            }
            Err(e) if e.sqlstate() == TERMINATED.sqlstate => self.fatal = Some(e),
            Err(e) => send_error(out, "ERROR", &e),
        }
        Ok(())
    }
}

/// A portal's results: DataRows in the portal's formats, at most `limit` of them to the
/// client (0: no limit) and the rest into a spool.
struct PortalOutput<'a> {
    io: &'a mut Transport,
    db: &'a Database,
    /// The columns the portal was described with; a statement's own (RETURNING of a
    /// statement described before a definition changed) replace them at [`Output::rows`].
    columns: &'a OutColumns,
    formats: &'a [Format],
    limit: u64,
    sent: u64,
    rest: Option<Spool>,
    work_mem: u64,
}

impl Output for PortalOutput<'_> {
    fn rows(&mut self, columns: &OutColumns) -> quire_sql::Result<()> {
        if columns.len() != self.columns.len() {
            return Err(SqlError::new(
                SqlState::FEATURE_NOT_SUPPORTED,
                "cached plan must not change result type",
            ));
        }
        Ok(())
    }

    fn row(&mut self, row: &[Value]) -> quire_sql::Result<()> {
        if self.limit > 0 && self.sent >= self.limit {
            let columns = self.columns.len();
            let work_mem = self.work_mem;
            let rest = self
                .rest
                .get_or_insert_with(|| Spool::new(columns, work_mem));
            return rest.push(self.db, row);
        }
        let formats = self.formats;
        wire::encode_row(&mut self.io.out, row, self.columns, |i| {
            is_binary(formats, i)
        })?;
        self.sent += 1;
        self.io.flush_if_full().map_err(|e| connection_lost(&e))
    }

    fn copy_out(&mut self, columns: usize, binary: bool) -> quire_sql::Result<()> {
        backend::copy_response(&mut self.io.out, false, columns, binary);
        Ok(())
    }

    fn copy_data(&mut self, data: &[u8]) -> quire_sql::Result<()> {
        backend::copy_data(&mut self.io.out, data);
        self.io.flush_if_full().map_err(|e| connection_lost(&e))
    }

    fn done(&mut self, _result: quire_sql::Result<Outcome>) -> quire_sql::Result<()> {
        // A portal's one statement ends through `Conn::finish_execute`.
        Ok(())
    }
}
