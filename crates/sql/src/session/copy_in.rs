//! COPY of a session: FROM STDIN (data inserted line by line as it arrives, in the
//! session's block or a transaction of its own, all or nothing) and TO STDOUT.

use quire_engine::{IsolationLevel, SqlState, Transaction, Value};

use super::command;
use super::constraints::check_row;
use super::{Outcome, Output};
use std::time::Instant;

use super::{outcome, CopyIn, OutcomeKind, Session, State, MAX_COPY_LINE_BYTES};
use crate::catalog::{self, TableInfo};
use crate::context::{CteStore, Cx};
use crate::copy;
use crate::error::{Result, SqlError};
use crate::interrupt::Interrupt;
use crate::parse::{CopyFormat, CopyStmt};
use crate::types::SqlType;

impl Session {
    pub(super) fn copy_start(&mut self, c: &CopyStmt, out: &mut dyn Output) -> Result<Outcome> {
        if let Some(query) = &c.query {
            return self.copy_query_out(c, query, out);
        }
        let own_tx = match &self.state {
            State::Block(_) => None,
            _ => Some(Box::new(self.begin_tx(IsolationLevel::ReadCommitted)?)),
        };
        let tx: &Transaction = match (&own_tx, &self.state) {
            (Some(t), _) | (None, State::Block(t)) => t,
            (None, _) => {
                return Err(SqlError::new(
                    SqlState::INTERNAL_ERROR,
                    "COPY without a transaction",
                ))
            }
        };
        let r = (|| {
            let table = catalog::lookup(tx, &c.table)?;
            let targets = copy_targets(&table, &c.columns)?;
            if c.from {
                if self.settings.read_only() && !table.temp {
                    return Err(super::commands::read_only_error("COPY FROM"));
                }
                refuse_omitted_defaults(&table, &targets)?;
            }
            let checks = crate::analyze::table_checks(tx, &table)?;
            Ok((table, targets, checks))
        })();
        let (table, targets, checks) = match r {
            Ok(x) => x,
            Err(e) => {
                if let Some(t) = own_tx {
                    let _ = t.rollback();
                }
                return Err(e);
            }
        };
        if !c.from {
            let deadline = self
                .settings
                .statement_timeout()
                .map(|t| Instant::now() + t);
            self.interrupt.begin(tx.session_id(), deadline);
            let r = copy_out(tx, &table, &targets, c, &self.interrupt, out);
            let r = r.map_err(|e| self.interrupt.reported(e));
            self.interrupt.end();
            match own_tx {
                Some(t) if r.is_ok() => t.commit()?,
                Some(t) => {
                    let _ = t.rollback();
                }
                None => {}
            }
            return Ok(outcome(
                format!("COPY {}", r?),
                OutcomeKind::CopyOut {
                    columns: targets.len(),
                    lines: Vec::new(),
                },
            ));
        }
        let columns = targets.len();
        self.copy = Some(CopyIn {
            stmt: c.clone(),
            table,
            targets,
            checks,
            pending: Vec::new(),
            rows: 0,
            header_pending: c.header || c.format == CopyFormat::Binary,
            ended: false,
            own_tx,
            ri: super::referential::Ri::default(),
        });
        let binary = c.format == CopyFormat::Binary;
        Ok(outcome("COPY", OutcomeKind::CopyIn { columns, binary }))
    }

    /// `COPY (query) TO STDOUT`: the query runs as a statement would (in the block, or in a
    /// transaction of its own), its rows going out as COPY lines as they come.
    fn copy_query_out(
        &mut self,
        c: &CopyStmt,
        query: &sqlparser::ast::Statement,
        out: &mut dyn Output,
    ) -> Result<Outcome> {
        let own_tx = match &self.state {
            State::Block(_) => None,
            _ => Some(Box::new(
                self.begin_tx(self.settings.default_xact().isolation.engine()?)?,
            )),
        };
        let tx: &Transaction = match (&own_tx, &self.state) {
            (Some(t), _) | (None, State::Block(t)) => t,
            (None, _) => {
                return Err(SqlError::new(
                    SqlState::INTERNAL_ERROR,
                    "COPY without a transaction",
                ))
            }
        };
        let mut lines = CopyLines {
            out,
            stmt: c,
            types: Vec::new(),
            rows: 0,
        };
        let switches = self.settings.planner();
        let r = super::cached_bind(&mut self.plans, &self.db, switches, None, query, &[], tx)
            .and_then(|bound| {
                if !matches!(bound.plan, crate::nodes::Plan::Query { .. }) {
                    return Err(SqlError::unsupported(
                        "COPY of a statement other than a query",
                    ));
                }
                let statement = super::exec::Statement {
                    plan: &bound.plan,
                    columns: &bound.out,
                    params: &[],
                };
                super::exec::run(
                    &self.db,
                    tx,
                    &mut self.settings,
                    &self.backend,
                    &self.sequences,
                    &self.prepared,
                    self.cursors.list(),
                    &self.deferred,
                    &statement,
                    &mut lines,
                )
            });
        let r = match r {
            Ok(_) if c.format == CopyFormat::Binary => lines.out.copy_data(&copy::binary_trailer()),
            other => other.map(|_| ()),
        };
        let rows = lines.rows;
        let columns = lines.types.len();
        match own_tx {
            Some(t) if r.is_ok() => t.commit()?,
            Some(t) => {
                let _ = t.rollback();
            }
            None => {}
        }
        r?;
        Ok(outcome(
            format!("COPY {rows}"),
            OutcomeKind::CopyOut {
                columns,
                lines: Vec::new(),
            },
        ))
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
            .ok_or_else(|| SqlError::new(SqlState::PROTOCOL_VIOLATION, "no COPY in progress"))?;
        if let Some(tx) = c.own_tx {
            let r = super::referential::check_deferred(&tx, &self.deferred);
            self.deferred.clear();
            match r {
                Ok(()) => tx.commit()?,
                Err(e) => {
                    let _ = tx.rollback();
                    return Err(e);
                }
            }
        }
        Ok(command(format!("COPY {}", c.rows)))
    }

    /// The client gave up the COPY (CopyFail): nothing of it stays.
    pub fn copy_fail(&mut self, message: &str) -> SqlError {
        self.copy_error = None;
        self.copy_abort(SqlError::new(
            SqlState::QUERY_CANCELED,
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
            return Err(SqlError::new(
                SqlState::PROTOCOL_VIOLATION,
                "no COPY in progress",
            ));
        };
        c.pending.extend_from_slice(data);
        let own = c.own_tx.take();
        let tx: &Transaction = match (own.as_deref(), &self.state) {
            (Some(t), _) => t,
            (None, State::Block(t)) => t,
            (None, _) => {
                c.own_tx = own;
                return Err(SqlError::new(
                    SqlState::INTERNAL_ERROR,
                    "COPY without a transaction",
                ));
            }
        };
        let ctes = CteStore::default();
        let cx = Cx {
            db: &self.db,
            tx,
            params: &[],
            settings: &self.settings,
            interrupt: &self.interrupt,
            backend: &self.backend,
            sequences: &self.sequences,
            prepared: &self.prepared,
            cursors: self.cursors.list(),
            now_us: super::now_us(),
            outer: None,
            ctes: &ctes,
            deferred: &self.deferred,
        };
        let r = copy_chunk(&cx, c, last);
        c.own_tx = own;
        r
    }
}

fn copy_chunk(cx: &Cx, c: &mut CopyIn, last: bool) -> Result<()> {
    if c.stmt.format == CopyFormat::Binary {
        return copy_chunk_binary(cx, c, last);
    }
    let mut start = 0;
    let buf = std::mem::take(&mut c.pending);
    let mut lines = copy::Lines::new(&buf, c.stmt.format);
    while let Some(end) = lines.next_end() {
        let line = &buf[start..end];
        start = end + 1;
        copy_row(cx, c, line)?;
    }
    let rest = &buf[start..];
    if last {
        let rest = rest.strip_suffix(b"\r").unwrap_or(rest);
        if !rest.is_empty() {
            copy_row(cx, c, rest)?;
        }
        return std::mem::take(&mut c.ri).finish(cx);
    }
    keep_pending(c, rest)
}

/// The bytes of an incomplete line or row, kept for the next chunk (54000 past
/// [`MAX_COPY_LINE_BYTES`]).
fn keep_pending(c: &mut CopyIn, rest: &[u8]) -> Result<()> {
    if rest.len() > MAX_COPY_LINE_BYTES {
        return Err(SqlError::new(
            SqlState::PROGRAM_LIMIT_EXCEEDED,
            format!("a COPY line may have at most {MAX_COPY_LINE_BYTES} bytes"),
        ));
    }
    c.pending = rest.to_vec();
    Ok(())
}

/// Binary COPY data: its header, then whole rows as they complete, then the trailer.
fn copy_chunk_binary(cx: &Cx, c: &mut CopyIn, last: bool) -> Result<()> {
    let buf = std::mem::take(&mut c.pending);
    let mut pos = 0;
    while pos < buf.len() {
        if c.ended {
            return Err(copy_format_error("received copy data after EOF marker"));
        }
        let rest = &buf[pos..];
        match copy::binary_next(rest, c.header_pending, c.targets.len())? {
            copy::BinaryItem::Header(n) => {
                c.header_pending = false;
                pos += n;
            }
            copy::BinaryItem::Trailer(n) => {
                c.ended = true;
                pos += n;
            }
            copy::BinaryItem::Row(fields, n) => {
                let row = binary_fields(c, rest, &fields)?;
                insert_copied(cx, c, &row)?;
                pos += n;
            }
            copy::BinaryItem::Incomplete => break,
        }
    }
    if !last {
        return keep_pending(c, &buf[pos..]);
    }
    if pos < buf.len() || !c.ended {
        return Err(copy_format_error("unexpected EOF in COPY data"));
    }
    std::mem::take(&mut c.ri).finish(cx)
}

fn copy_format_error(message: &str) -> SqlError {
    SqlError::new(SqlState::BAD_COPY_FILE_FORMAT, message)
}

/// A binary row's fields read as the target columns' values.
fn binary_fields(
    c: &CopyIn,
    buf: &[u8],
    fields: &[Option<std::ops::Range<usize>>],
) -> Result<Vec<Value>> {
    let mut row = vec![Value::Null; c.table.columns.len()];
    for (f, &pos) in fields.iter().zip(&c.targets) {
        if let Some(range) = f {
            let col = &c.table.columns[pos];
            row[pos] = crate::types::binary::recv(&buf[range.clone()], col.ty)
                .map_err(|e| copy_context(&e, c, &col.name))?;
        }
    }
    Ok(row)
}

/// An error of a column's value, with PostgreSQL's COPY context.
fn copy_context(e: &SqlError, c: &CopyIn, column: &str) -> SqlError {
    SqlError::new(
        e.sqlstate(),
        format!(
            "{}, COPY {}, line {}, column {column}",
            e.message(),
            c.table.def.name,
            c.rows + 1
        ),
    )
}

/// COPY FROM does not evaluate DEFAULT expressions yet: a column left out that has one is
/// refused rather than filled with NULL.
fn refuse_omitted_defaults(table: &TableInfo, targets: &[usize]) -> Result<()> {
    match table
        .columns
        .iter()
        .enumerate()
        .find(|(i, c)| c.default.is_some() && !targets.contains(i))
    {
        Some((_, c)) => Err(SqlError::unsupported(format!(
            "COPY FROM leaving out column \"{}\", which has a DEFAULT (list it, or use INSERT)",
            c.name
        ))),
        None => Ok(()),
    }
}

fn copy_targets(table: &TableInfo, columns: &[String]) -> Result<Vec<usize>> {
    if columns.is_empty() {
        return Ok(table.visible_columns());
    }
    columns.iter().map(|n| table.column(n)).collect()
}

/// One line of COPY FROM data inserted. The end-of-data line `\.` ends the data: what
/// follows it up to CopyDone is read and dropped, as PostgreSQL does (pg_restore sends a
/// blank line after it).
fn copy_row(cx: &Cx, c: &mut CopyIn, line: &[u8]) -> Result<()> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if c.ended {
        return Ok(());
    }
    if line == b"\\." {
        c.ended = true;
        return Ok(());
    }
    if std::mem::take(&mut c.header_pending) {
        return Ok(());
    }
    let fields = copy::parse_line(line, &c.stmt)?;
    if fields.len() != c.targets.len() {
        return Err(SqlError::new(
            SqlState::BAD_COPY_FILE_FORMAT,
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
            row[pos] = crate::types::parse_text(col.ty, &text)
                .map_err(|e| copy_context(&e, c, &col.name))?;
        }
    }
    insert_copied(cx, c, &row)
}

/// A row of COPY FROM, checked and inserted.
fn insert_copied(cx: &Cx, c: &mut CopyIn, row: &[Value]) -> Result<()> {
    check_row(cx, &c.table, &c.checks, row)?;
    let tid = cx.tx.insert(c.table.def.oid, row)?;
    c.ri.inserted(cx, &c.table, tid, row)?;
    c.rows += 1;
    Ok(())
}

/// COPY TO STDOUT: the table's rows, a line each, to `out` as they are read. Returns how
/// many rows went.
fn copy_out(
    tx: &Transaction,
    table: &TableInfo,
    targets: &[usize],
    c: &CopyStmt,
    interrupt: &Interrupt,
    out: &mut dyn Output,
) -> Result<u64> {
    let binary = c.format == CopyFormat::Binary;
    out.copy_out(targets.len(), binary)?;
    if binary {
        out.copy_data(&copy::binary_header())?;
    }
    let types: Vec<SqlType> = targets.iter().map(|&i| table.columns[i].ty).collect();
    if c.header {
        let names: Vec<Option<String>> = targets
            .iter()
            .map(|&i| Some(table.columns[i].name.clone()))
            .collect();
        out.copy_data(&copy::format_line(&names, c)?)?;
    }
    let mut n = 0u64;
    for r in tx.scan(table.def.oid)? {
        let (_, row) = r?;
        interrupt.check()?;
        if binary {
            let values: Vec<Value> = targets.iter().map(|&i| row[i].clone()).collect();
            out.copy_data(&copy::binary_row(&values, &types)?)?;
        } else {
            let fields: Vec<Option<String>> = targets
                .iter()
                .map(|&i| crate::types::format_output(&row[i], table.columns[i].ty))
                .collect();
            out.copy_data(&copy::format_line(&fields, c)?)?;
        }
        n += 1;
    }
    if binary {
        out.copy_data(&copy::binary_trailer())?;
    }
    Ok(n)
}

/// The rows of `COPY (query) TO STDOUT` as COPY lines: an [`Output`] between the query's
/// execution and the client's.
struct CopyLines<'a> {
    out: &'a mut dyn Output,
    stmt: &'a CopyStmt,
    /// The query's column types, known at [`Output::rows`].
    types: Vec<crate::types::SqlType>,
    rows: u64,
}

impl Output for CopyLines<'_> {
    fn rows(&mut self, columns: &crate::nodes::OutColumns) -> Result<()> {
        self.types = columns.iter().map(|c| c.ty).collect();
        let binary = self.stmt.format == CopyFormat::Binary;
        self.out.copy_out(columns.len(), binary)?;
        if binary {
            self.out.copy_data(&copy::binary_header())?;
        }
        if self.stmt.header {
            let names: Vec<Option<String>> = columns.iter().map(|c| Some(c.name.clone())).collect();
            self.out.copy_data(&copy::format_line(&names, self.stmt)?)?;
        }
        Ok(())
    }

    fn row(&mut self, row: &[Value]) -> Result<()> {
        if self.stmt.format == CopyFormat::Binary {
            self.out.copy_data(&copy::binary_row(row, &self.types)?)?;
            self.rows += 1;
            return Ok(());
        }
        let fields: Vec<Option<String>> = row
            .iter()
            .zip(&self.types)
            .map(|(v, &ty)| crate::types::format_output(v, ty))
            .collect();
        self.out
            .copy_data(&copy::format_line(&fields, self.stmt)?)?;
        self.rows += 1;
        Ok(())
    }

    fn copy_out(&mut self, columns: usize, binary: bool) -> Result<()> {
        self.out.copy_out(columns, binary)
    }

    fn copy_data(&mut self, data: &[u8]) -> Result<()> {
        self.out.copy_data(data)
    }

    fn done(&mut self, result: Result<Outcome>) -> Result<()> {
        self.out.done(result)
    }
}
