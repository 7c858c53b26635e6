//! SQL cursors: DECLARE, FETCH, MOVE and CLOSE, as psycopg's named cursors and
//! SQLAlchemy's `stream_results` use them.
//!
//! ## Rules
//! - DECLARE runs its query at once and keeps the rows in a spool (memory up to
//!   `work_mem`, then a temp file): the cursor sees the data as of DECLARE, as PostgreSQL's
//!   insensitive cursors do, and FETCH reads the spool forward.
//! - Cursors only go forward (and `FETCH 0` gives the current row again): PRIOR, FIRST,
//!   LAST, ABSOLUTE, RELATIVE, BACKWARD and negative counts fail, with PostgreSQL's 55000 for
//!   a NO SCROLL cursor and 0A000 otherwise (PostgreSQL scrolls back where it can).
//! - A cursor without HOLD needs a transaction block (25P01) and closes when its
//!   transaction ends; a WITH HOLD cursor outlives its transaction's commit, and goes with
//!   its rollback. DISCARD ALL and CLOSE ALL close every cursor.
//! - At most [`MAX_CURSORS`] cursors are open in a session (54000 beyond).

use std::collections::BTreeMap;
use std::sync::Arc;

use quire_engine::{Database, SqlState, Value};
use sqlparser::ast;

use super::{command, outcome, OutcomeKind, Output, Protocol, Session, State};
use crate::context::{CursorInfo, CursorList};
use crate::error::{Result, SqlError};
use crate::nodes::OutColumns;
use crate::parse::{FetchCount, FetchStmt};
use crate::spool::Spool;
use crate::types::SqlType;

/// Most cursors one session keeps open.
pub(crate) const MAX_CURSORS: usize = 10_000;

/// An open cursor.
pub(crate) struct Cursor {
    columns: OutColumns,
    rows: Spool,
    hold: bool,
    /// Declared NO SCROLL.
    no_scroll: bool,
    /// The row the cursor is on (the last one fetched), none before the first or past
    /// the last.
    current: Option<Vec<Value>>,
    /// Declared in the running transaction (a rollback removes it, even WITH HOLD).
    in_this_xact: bool,
}

/// The open cursors of a session, by name, and what `pg_cursors` shows of each (both
/// maps hold the same names: only these methods change them).
#[derive(Default)]
pub(crate) struct Cursors {
    open: BTreeMap<String, Cursor>,
    info: CursorList,
}

impl Cursors {
    /// The transaction ended: cursors without HOLD close, and those of a rolled-back one.
    pub(crate) fn end_xact(&mut self, committed: bool) {
        self.open
            .retain(|_, c| c.hold && (committed || !c.in_this_xact));
        for c in self.open.values_mut() {
            c.in_this_xact = false;
        }
        let open = &self.open;
        self.info.retain(|name, _| open.contains_key(name));
    }

    pub(crate) fn close_all(&mut self) {
        self.open.clear();
        self.info.clear();
    }

    fn insert(&mut self, name: String, cursor: Cursor, info: CursorInfo) {
        self.info.insert(name.clone(), info);
        self.open.insert(name, cursor);
    }

    fn remove(&mut self, name: &str) -> bool {
        self.info.remove(name);
        self.open.remove(name).is_some()
    }

    /// What `pg_cursors` lists.
    pub(crate) fn list(&self) -> &CursorList {
        &self.info
    }

    /// The columns a FETCH from `name` returns (a Describe's answer).
    pub(crate) fn columns(&self, name: &str) -> Option<OutColumns> {
        self.open.get(name).map(|c| Arc::clone(&c.columns))
    }
}

fn no_cursor(name: &str) -> SqlError {
    SqlError::new(
        SqlState::INVALID_CURSOR_NAME,
        format!("cursor \"{name}\" does not exist"),
    )
}

/// The rows of DECLARE's query, gathered into a spool.
struct Gather<'a> {
    db: &'a Database,
    columns: Option<OutColumns>,
    rows: Option<Spool>,
    budget_bytes: u64,
}

impl Output for Gather<'_> {
    fn rows(&mut self, columns: &OutColumns) -> Result<()> {
        self.columns = Some(Arc::clone(columns));
        self.rows = Some(Spool::new(columns.len(), self.budget_bytes));
        Ok(())
    }

    fn row(&mut self, row: &[Value]) -> Result<()> {
        match &mut self.rows {
            Some(s) => Ok(s.push(self.db, row)?),
            None => Err(SqlError::internal("a row before its columns")),
        }
    }

    fn copy_out(&mut self, _columns: usize, _binary: bool) -> Result<()> {
        Err(SqlError::syntax("cannot open COPY query as cursor"))
    }

    fn copy_data(&mut self, _data: &[u8]) -> Result<()> {
        Ok(())
    }

    fn done(&mut self, _result: Result<super::Outcome>) -> Result<()> {
        Ok(())
    }
}

/// `FETCH 0` (or MOVE 0): the current row again, if the cursor is on one.
fn refetch(c: &Cursor, f: &FetchStmt, out: &mut dyn Output) -> Result<super::Outcome> {
    let n = u64::from(c.current.is_some());
    if f.is_move {
        return Ok(command(format!("MOVE {n}")));
    }
    out.rows(&c.columns)?;
    if let Some(row) = &c.current {
        out.row(row)?;
    }
    Ok(outcome(
        format!("FETCH {n}"),
        OutcomeKind::Rows {
            columns: Arc::clone(&c.columns),
            rows: Vec::new(),
        },
    ))
}

impl Session {
    /// DECLARE name [BINARY] [[NO] SCROLL] CURSOR [WITH | WITHOUT HOLD] FOR query.
    pub(super) fn declare(
        &mut self,
        d: &ast::Declare,
        hints: &[SqlType],
        decode: &dyn Fn(&[SqlType]) -> Result<Vec<Value>>,
    ) -> Result<super::Outcome> {
        let [name] = d.names.as_slice() else {
            return Err(SqlError::syntax("DECLARE names one cursor"));
        };
        let Some(query) = &d.for_query else {
            return Err(SqlError::unsupported("DECLARE without a cursor query"));
        };
        if d.binary == Some(true) {
            return Err(SqlError::unsupported("DECLARE BINARY"));
        }
        let name = super::super::analyze::ident_name(name);
        let hold = d.hold == Some(true);
        let in_block = matches!(self.state, State::Block(_)) && !self.implicit;
        if !hold && !in_block {
            return Err(SqlError::new(
                SqlState::NO_ACTIVE_SQL_TRANSACTION,
                "DECLARE CURSOR can only be used in transaction blocks",
            ));
        }
        if self.cursors.open.contains_key(&name) {
            return Err(SqlError::new(
                SqlState::DUPLICATE_CURSOR,
                format!("cursor \"{name}\" already exists"),
            ));
        }
        if self.cursors.open.len() >= MAX_CURSORS {
            return Err(SqlError::new(
                SqlState::PROGRAM_LIMIT_EXCEEDED,
                format!("too many open cursors (at most {MAX_CURSORS})"),
            ));
        }
        let stmt = ast::Statement::Query(query.clone());
        let db = Arc::clone(&self.db);
        let mut gather = Gather {
            db: &db,
            columns: None,
            rows: None,
            budget_bytes: self.settings.work_mem_bytes(),
        };
        self.execute_sql(None, Protocol::Simple, &stmt, hints, decode, &mut gather)?;
        let (Some(columns), Some(rows)) = (gather.columns, gather.rows) else {
            return Err(SqlError::syntax("cursor query returns no rows"));
        };
        let cursor = Cursor {
            columns,
            rows,
            hold,
            no_scroll: d.scroll == Some(false),
            current: None,
            in_this_xact: in_block,
        };
        let info = CursorInfo {
            statement: format!("DECLARE {d}"),
            holdable: hold,
            // No cursor of quire's scrolls back (PostgreSQL's can where the plan allows).
            scrollable: false,
            creation_time_us: super::now_us(),
        };
        self.cursors.insert(name, cursor, info);
        Ok(command("DECLARE CURSOR"))
    }

    /// FETCH or MOVE: the next rows of the cursor (sent to `out` for FETCH).
    pub(super) fn fetch(&mut self, f: &FetchStmt, out: &mut dyn Output) -> Result<super::Outcome> {
        let Some(c) = self.cursors.open.get_mut(&f.cursor) else {
            return Err(no_cursor(&f.cursor));
        };
        let limit = match &f.count {
            FetchCount::Forward(n) => *n,
            FetchCount::All => u64::MAX,
            FetchCount::Current => return refetch(c, f, out),
            FetchCount::Other(what) if !c.no_scroll => {
                return Err(SqlError::unsupported(format!("FETCH {what}")))
            }
            FetchCount::Other(_) => {
                return Err(SqlError::new(
                    SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE,
                    "cursor can only scan forward",
                )
                .with_hint("Declare it with SCROLL option to enable backward scan."))
            }
        };
        if !f.is_move {
            out.rows(&c.columns)?;
        }
        let mut n = 0u64;
        while n < limit {
            let Some(row) = c.rows.pop()? else {
                c.current = None;
                break;
            };
            if !f.is_move {
                out.row(&row)?;
            }
            c.current = Some(row);
            n += 1;
        }
        let tag = format!("{} {n}", if f.is_move { "MOVE" } else { "FETCH" });
        Ok(if f.is_move {
            command(tag)
        } else {
            outcome(
                tag,
                OutcomeKind::Rows {
                    columns: Arc::clone(&c.columns),
                    rows: Vec::new(),
                },
            )
        })
    }

    /// CLOSE name | ALL.
    pub(super) fn close_cursor(&mut self, which: &ast::CloseCursor) -> Result<super::Outcome> {
        match which {
            ast::CloseCursor::All => {
                self.cursors.close_all();
                return Ok(command("CLOSE CURSOR ALL"));
            }
            ast::CloseCursor::Specific { name } => {
                let name = super::super::analyze::ident_name(name);
                if !self.cursors.remove(&name) {
                    return Err(no_cursor(&name));
                }
            }
        }
        Ok(command("CLOSE CURSOR"))
    }

    /// The columns of the open cursor `name`, for a Describe of it as a portal.
    pub fn cursor_columns(&self, name: &str) -> Option<OutColumns> {
        self.cursors.columns(name)
    }
}
