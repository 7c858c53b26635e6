//! Executing a bound plan in a transaction: queries, DML (with RETURNING, ON CONFLICT,
//! READ COMMITTED rechecks), DDL, SET/SHOW and EXPLAIN output.

use std::ops::Bound::Included;
use std::sync::Arc;
use std::time::Instant;

use quire_engine::{Changed, Database, Row, RowWait, Sees, SqlState, Transaction, Value};

use super::constraints::{self, check_row};
use super::foreign_keys;
use super::referential::Ri;
use super::{command, now_us, outcome, Outcome, OutcomeKind, Output, Settings};
use crate::backends::Backend;
use crate::catalog::{self, ColumnInfo, TableInfo};
use crate::context::Cx;
use crate::error::{Notice, Result, SqlError};
use crate::nodes::value_tid;
use crate::nodes::{BoundCheck, Expr, Node};
use crate::nodes::{OnConflict, OutColumn, OutColumns, Plan};
use crate::sequence::{self, SessionSequences};
use crate::types::SqlType;

/// ALTER TABLE ... ADD COLUMN: a serial column's sequence, the column, its DEFAULT, and
/// the rows that exist filled with it (evaluated per row, as PostgreSQL does for a volatile
/// default; PostgreSQL 11+ avoids the rewrite for a constant one, quire updates every row
/// then too, leaving the old versions to vacuum). A NOT NULL column left NULL: 23502.
fn add_column(
    cx: &Cx,
    table: &TableInfo,
    column: &ColumnInfo,
    options: Option<&quire_engine::SeqOptions>,
) -> Result<()> {
    let tx = cx.tx;
    let oid = table.def.oid;
    let mut col = column.clone();
    let mut owned = None;
    if let Some(options) = options {
        let seq_name = sequence::serial_name(tx, &table.def.name, &col.name)?;
        owned = Some(tx.create_sequence(&seq_name, options)?);
        col.default = Some(sequence::nextval_default(&seq_name));
    }
    let attnum = catalog::add_column(tx, table, &col)?;
    if col.default.is_some() {
        catalog::set_default(tx, oid, attnum, col.default.as_deref(), owned)?;
    }
    if col.identity.is_some() {
        catalog::set_identity(tx, oid, attnum, col.identity)?;
    }
    let contains_nulls = || {
        SqlError::new(
            SqlState::NOT_NULL_VIOLATION,
            format!(
                "column \"{}\" of relation \"{}\" contains null values",
                col.name, table.def.name
            ),
        )
    };
    if col.default.is_none() {
        if col.not_null && tx.scan(oid)?.next().transpose()?.is_some() {
            return Err(contains_nulls());
        }
        return Ok(());
    }
    let fill = crate::analyze::default_expr(tx, &col)?;
    // The scan keeps the command it started with: rows updated here are not met again.
    for r in tx.scan(oid)? {
        let (tid, mut row) = r?;
        cx.interrupt.check()?;
        row[attnum] = fill.eval(cx, &row)?;
        if col.not_null && row[attnum].is_null() {
            return Err(contains_nulls());
        }
        tx.update(oid, tid, &row)?;
    }
    Ok(())
}

/// DROP SEQUENCE of one name: refused while a column's DEFAULT uses it (a `serial`
/// column's, which DROP TABLE drops), as PostgreSQL's dependency does.
fn drop_sequence(tx: &Transaction, name: &str, if_exists: bool) -> Result<()> {
    match tx.relation_named(name)? {
        Some(quire_engine::Entry::Sequence(seq)) => {
            if let Some(table) = catalog::owner_of(tx, seq.oid)? {
                let table = tx
                    .relation(table)?
                    .map_or_else(|| table.to_string(), |e| e.name().to_string());
                return Err(SqlError::new(
                    SqlState::DEPENDENT_OBJECTS_STILL_EXIST,
                    format!("cannot drop sequence {name} because other objects depend on it"),
                )
                .with_detail(format!(
                    "default value for a column of table {table} depends on sequence {name}"
                )));
            }
            let named = [(seq.oid, format!("sequence {name}"))];
            super::views::dependents(tx, &named, false)?;
            tx.drop_sequence(seq.oid)?;
            catalog::description::drop_all(tx, seq.oid)
        }
        Some(_) => Err(SqlError::new(
            SqlState::WRONG_OBJECT_TYPE,
            format!("\"{name}\" is not a sequence"),
        )),
        None if if_exists => Ok(()),
        None => Err(SqlError::new(
            SqlState::UNDEFINED_TABLE,
            format!("sequence \"{name}\" does not exist"),
        )),
    }
}

/// A bound statement to run: its plan, its output columns and its parameter values.
pub(super) struct Statement<'a> {
    pub plan: &'a Plan,
    pub columns: &'a OutColumns,
    pub params: &'a [Value],
}

/// Executes a plan other than transaction control in `tx`, its rows to `out` as they come.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    db: &Database,
    tx: &Transaction,
    settings: &mut Settings,
    backend: &Backend,
    sequences: &SessionSequences,
    prepared: &crate::context::PreparedStatements,
    cursors: &crate::context::CursorList,
    deferred: &crate::context::Deferred,
    statement: &Statement,
    out: &mut dyn Output,
) -> Result<Outcome> {
    let Statement {
        plan,
        columns,
        params,
    } = *statement;
    match plan {
        Plan::Set { name, value, local } => {
            let outside_block = settings.block_xact().is_none();
            settings.set_scoped(name, value.clone(), *local)?;
            let mut done = command(if value.is_none() { "RESET" } else { "SET" });
            if *local && outside_block {
                done.notices.push(Notice::warning(
                    SqlState::NO_ACTIVE_SQL_TRANSACTION,
                    "SET LOCAL can only be used in transaction blocks",
                ));
            }
            return Ok(done);
        }
        Plan::Show(name) => {
            let v = if name == "all" {
                let text = |s: &str| Value::Text(s.to_string());
                let rows = settings
                    .all()
                    .into_iter()
                    .map(|(n, v, source)| vec![text(&n), text(&v), text(source)])
                    .collect::<Vec<_>>();
                let columns = ["name", "setting", "source"]
                    .iter()
                    .map(|n| OutColumn {
                        name: (*n).to_string(),
                        ty: SqlType::Text,
                    })
                    .collect::<OutColumns>();
                return send_rows("SHOW", &columns, &rows, out);
            } else {
                settings.show(name).ok_or_else(|| {
                    SqlError::new(
                        SqlState::UNDEFINED_OBJECT,
                        format!("unrecognized configuration parameter \"{name}\""),
                    )
                })?
            };
            let columns: OutColumns = [OutColumn {
                name: crate::settings::display_name(name),
                ty: SqlType::Text,
            }]
            .into();
            return send_rows("SHOW", &columns, &[vec![Value::Text(v)]], out);
        }
        _ => {}
    }
    if settings.read_only() {
        super::commands::check_writable(plan)?;
    }
    let interrupt = backend.interrupt();
    let lock_timeout = settings
        .lock_timeout()
        .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
    tx.set_lock_timeout(lock_timeout);
    let deadline = settings.statement_timeout().map(|t| Instant::now() + t);
    interrupt.begin(tx.session_id(), deadline);
    let ctes = crate::context::CteStore::default();
    let cx = Cx {
        db,
        tx,
        params,
        settings,
        interrupt,
        backend,
        sequences,
        prepared,
        cursors,
        now_us: now_us(),
        outer: None,
        ctes: &ctes,
        deferred,
    };
    // One snapshot for a whole query or DML statement under READ COMMITTED, as PostgreSQL's
    // (its tables were locked while it was bound). DDL keeps a new snapshot per read: the
    // rows it verifies are read after it got its lock, with what the lock holder committed
    // (PostgreSQL's DDL reads with the latest snapshot too).
    let pinned = matches!(
        plan,
        Plan::Query { .. }
            | Plan::Insert { .. }
            | Plan::Update { .. }
            | Plan::Delete { .. }
            | Plan::SelectForUpdate { .. }
            | Plan::CreateTableAs { .. }
            | Plan::Explain(_)
    );
    if pinned {
        tx.begin_statement();
    }
    let r = run_plan(&cx, plan, columns, out);
    tx.end_statement();
    let r = r.map_err(|e| {
        if e.sqlstate() == SqlState::QUERY_CANCELED {
            interrupt.reported(e)
        } else {
            e
        }
    });
    interrupt.end();
    settings.apply_pending(r.is_ok());
    r
}

/// A result of a few rows made whole (SHOW, EXPLAIN), to `out`.
fn send_rows(
    tag: &str,
    columns: &OutColumns,
    rows: &[Row],
    out: &mut dyn Output,
) -> Result<Outcome> {
    out.rows(columns)?;
    for row in rows {
        out.row(row)?;
    }
    Ok(rows_outcome(tag.to_string(), columns))
}

/// The outcome of a statement whose rows went to the output.
fn rows_outcome(tag: String, columns: &OutColumns) -> Outcome {
    outcome(
        tag,
        OutcomeKind::Rows {
            columns: Arc::clone(columns),
            rows: Vec::new(),
        },
    )
}

fn run_plan(cx: &Cx, plan: &Plan, columns: &OutColumns, out: &mut dyn Output) -> Result<Outcome> {
    let tx = cx.tx;
    match plan {
        Plan::CreateTable {
            name,
            if_not_exists,
            columns,
            pkey,
            uniques,
            serials,
            checks,
            foreign_keys,
        } => {
            if let Some(done) = existing_table(tx, name, *if_not_exists, "CREATE TABLE")? {
                return Ok(done);
            }
            // Each serial column's sequence first: the column's DEFAULT names it.
            let mut columns = columns.clone();
            let mut owned = Vec::with_capacity(serials.len());
            for (i, options) in serials {
                let i = *i;
                // A temporary table's sequence is named as its table is seen (`t_a_seq`).
                let seq_name =
                    sequence::serial_name(tx, catalog::display_name(name), &columns[i].name)?;
                let seq = tx.create_sequence(&seq_name, options)?;
                columns[i].default = Some(sequence::nextval_default(&seq_name));
                owned.push((i, seq));
            }
            let table = catalog::create(tx, name, &columns, pkey.as_deref())?;
            for (i, seq) in owned {
                catalog::set_default(tx, table, i, columns[i].default.as_deref(), Some(seq))?;
                if columns[i].identity.is_some() {
                    catalog::set_identity(tx, table, i, columns[i].identity)?;
                }
            }
            for u in uniques {
                let cols: Vec<&str> = u.iter().map(|&c| columns[c].name.as_str()).collect();
                tx.create_index(&unique_name(name, &cols), table, &cols, true)?;
            }
            for c in checks {
                catalog::add_check(tx, table, &c.name, &c.expr, true)?;
            }
            foreign_keys::create(tx, table, foreign_keys)?;
            Ok(command("CREATE TABLE"))
        }
        Plan::CreateTableAs {
            name,
            if_not_exists,
            columns,
            query,
            with_data,
        } => {
            let query = with_data.then_some(query);
            create_table_as(cx, name, *if_not_exists, columns, query, out)
        }
        Plan::DropTable {
            names,
            if_exists,
            cascade,
        } => foreign_keys::drop_tables(cx, names, *if_exists, *cascade),
        Plan::CreateView {
            name,
            or_replace,
            body,
        } => super::views::create(tx, name, *or_replace, body),
        Plan::DropView {
            names,
            if_exists,
            cascade,
        } => super::views::drop(tx, names, *if_exists, *cascade),
        Plan::Lock {
            tables,
            mode,
            nowait,
        } => {
            for (name, oid) in tables {
                tx.lock_table(*oid, *mode, *nowait).map_err(|e| {
                    let e = SqlError::from(e);
                    if *nowait && e.sqlstate() == SqlState::LOCK_NOT_AVAILABLE {
                        SqlError::new(
                            SqlState::LOCK_NOT_AVAILABLE,
                            format!("could not obtain lock on relation \"{name}\""),
                        )
                    } else {
                        e
                    }
                })?;
            }
            Ok(command("LOCK TABLE"))
        }
        Plan::Truncate {
            tables,
            restart_identity,
            cascade,
        } => {
            let (tables, notices) = foreign_keys::truncate_set(cx, tables, *cascade)?;
            for t in &tables {
                tx.truncate(t.def.oid)?;
                if *restart_identity {
                    for seq in t.columns.iter().filter_map(|c| c.owned_seq) {
                        let start = tx.sequence_def(seq)?.options.start;
                        tx.setval(seq, start, false)?;
                    }
                }
            }
            let mut out = command("TRUNCATE TABLE");
            out.notices = notices;
            Ok(out)
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
        Plan::CreateSequence {
            name,
            if_not_exists,
            options,
        } => {
            if !(*if_not_exists && tx.relation_named(name)?.is_some()) {
                tx.create_sequence(name, options)?;
            }
            Ok(command("CREATE SEQUENCE"))
        }
        Plan::DropSequence { names, if_exists } => {
            for n in names {
                drop_sequence(tx, n, *if_exists)?;
            }
            Ok(command("DROP SEQUENCE"))
        }
        Plan::DropIndex { names, if_exists } => {
            let mut out = command("DROP INDEX");
            for n in names {
                match tx.find_index(n)? {
                    Some(i) => {
                        tx.drop_index(i)?;
                        catalog::description::drop_all(tx, i)?;
                    }
                    None if *if_exists => out
                        .notices
                        .push(format!("index \"{n}\" does not exist, skipping").into()),
                    None => {
                        return Err(SqlError::new(
                            SqlState::UNDEFINED_OBJECT,
                            format!("index \"{n}\" does not exist"),
                        ))
                    }
                }
            }
            Ok(out)
        }
        Plan::AddColumn {
            table,
            column,
            sequence,
            skip,
            checks,
            foreign_keys,
        } => {
            if *skip {
                let mut out = command("ALTER TABLE");
                out.notices.push(Notice::new(format!(
                    "column \"{}\" of relation \"{}\" already exists, skipping",
                    column.name, table.def.name
                )));
                return Ok(out);
            }
            add_column(cx, table, column, sequence.as_ref())?;
            constraints::add_checks(cx, table, checks, true)?;
            if !foreign_keys.is_empty() {
                let widened = catalog::lookup_oid(tx, table.def.oid)?;
                for fk in foreign_keys {
                    foreign_keys::add(cx, &widened, fk, true)?;
                }
            }
            Ok(command("ALTER TABLE"))
        }
        Plan::Comment { object, text } => {
            catalog::description::set(tx, *object, text.as_deref())?;
            Ok(command("COMMENT"))
        }
        Plan::Skip { tag, notice } => {
            let mut done = command(*tag);
            done.notices.push(Notice::new(notice.clone()));
            Ok(done)
        }
        Plan::AlterSteps(steps) => {
            let mut done = command("ALTER TABLE");
            for sql in steps {
                let plan = crate::analyze::bind_alter_step(tx, sql)?;
                let step = run_plan(cx, &plan, columns, out)?;
                done.notices.extend(step.notices);
            }
            Ok(done)
        }
        Plan::SetNotNull {
            table,
            column,
            not_null,
        } => constraints::set_not_null(cx, table, *column, *not_null),
        Plan::AddIdentity {
            table,
            column,
            kind,
            options,
        } => {
            constraints::lock_for_alter(tx, table)?;
            let oid = table.def.oid;
            let col = &table.columns[*column];
            let seq_name = sequence::serial_name(tx, &table.def.name, &col.name)?;
            let seq = tx.create_sequence(&seq_name, options)?;
            let default = sequence::nextval_default(&seq_name);
            catalog::set_default(tx, oid, *column, Some(&default), Some(seq))?;
            catalog::set_identity(tx, oid, *column, Some(*kind))?;
            Ok(command("ALTER TABLE"))
        }
        Plan::AddCheck {
            table,
            check,
            validate,
        } => {
            constraints::lock_for_alter(tx, table)?;
            constraints::add_checks(cx, table, std::slice::from_ref(check), *validate)?;
            Ok(command("ALTER TABLE"))
        }
        Plan::ValidateCheck { table, check } => constraints::validate_check(cx, table, check),
        Plan::SetColumnType { table, column, ty } => {
            let done = constraints::set_column_type(cx, table, *column, *ty)?;
            let altered = super::views::Altered::Retyped(&table.columns[*column].name);
            super::views::after_alter(tx, table, &altered)?;
            Ok(done)
        }
        Plan::AddForeignKey {
            table,
            fk,
            validate,
        } => foreign_keys::add(cx, table, fk, *validate),
        Plan::ValidateForeignKey { table, fk } => foreign_keys::validate(cx, table, fk),
        Plan::DropConstraint {
            table,
            name,
            if_exists,
        } => constraints::drop_constraint(cx, table, name, *if_exists),
        Plan::RenameConstraint { table, from, to } => {
            constraints::rename_constraint(cx, table, from, to)
        }
        Plan::DropColumns {
            table,
            columns,
            checks,
            cascade,
        } => {
            let notices = foreign_keys::drop_columns(tx, table, columns, *cascade)?;
            for &c in columns {
                catalog::drop_column(tx, table, c)?;
            }
            for name in checks {
                catalog::change_check(tx, table.def.oid, name, catalog::CheckChange::Drop)?;
            }
            let names: Vec<String> = columns
                .iter()
                .map(|&c| table.columns[c].name.clone())
                .collect();
            let altered = super::views::Altered::DroppedColumns(&names, *cascade);
            let view_notices = super::views::after_alter(tx, table, &altered)?;
            let mut out = command("ALTER TABLE");
            out.notices.extend(notices);
            out.notices.extend(view_notices);
            Ok(out)
        }
        Plan::SetDefault {
            table,
            column,
            expr,
        } => {
            constraints::lock_for_alter(tx, table)?;
            let oid = table.def.oid;
            catalog::set_default(tx, oid, *column, expr.as_deref(), None)?;
            Ok(command("ALTER TABLE"))
        }
        Plan::AddKey {
            table,
            name,
            columns,
            primary,
        } => add_key(tx, table, name.as_deref(), columns, *primary),
        Plan::Query { node, out: cols } => {
            out.rows(cols)?;
            let mut n = 0u64;
            // Output functions that read the catalog (regclassout and kin) run here.
            let reg: Vec<usize> = (0..cols.len())
                .filter(|&i| cols[i].ty.is_oid() && cols[i].ty != SqlType::Oid)
                .collect();
            for row in crate::exec::open(node, cx)? {
                let mut row = row?;
                for &i in &reg {
                    let v = std::mem::replace(&mut row[i], Value::Null);
                    row[i] = crate::exec::reg_output(v, cols[i].ty, cx)?;
                }
                out.row(&row)?;
                n += 1;
            }
            Ok(rows_outcome(format!("SELECT {n}"), cols))
        }
        Plan::SelectForUpdate { .. } => select_for_update(cx, plan, out),
        Plan::Insert {
            table,
            source,
            on_conflict,
            returning,
            checks,
        } => {
            let returning = Returning::new(returning.as_deref(), columns, out)?;
            insert(cx, table, checks, source, on_conflict, returning)
        }
        Plan::Update {
            table,
            scan,
            recheck,
            sets,
            returning,
            checks,
        } => {
            let returning = Returning::new(returning.as_deref(), columns, out)?;
            update(cx, table, checks, scan, recheck.as_ref(), sets, returning)
        }
        Plan::Delete {
            table,
            scan,
            recheck,
            returning,
        } => {
            let returning = Returning::new(returning.as_deref(), columns, out)?;
            delete(cx, table, scan, recheck.as_ref(), returning)
        }
        Plan::Explain(inner) => {
            let lines = crate::exec::explain_statement(inner, cx.tx)?;
            let columns: OutColumns = [OutColumn {
                name: "QUERY PLAN".into(),
                ty: SqlType::Text,
            }]
            .into();
            let rows = lines
                .iter()
                .map(|l| vec![Value::Text(l.clone())])
                .collect::<Vec<_>>();
            send_rows("EXPLAIN", &columns, &rows, out)
        }
        Plan::Begin(_) | Plan::Commit | Plan::Rollback | Plan::Set { .. } | Plan::Show(_) => {
            Err(SqlError::new(
                SqlState::INTERNAL_ERROR,
                "a statement reached the wrong executor",
            ))
        }
    }
}

/// CREATE TABLE of a name taken: with IF NOT EXISTS, the outcome (`tag`, with PostgreSQL's
/// notice); else 42P07, naming the table as the statement did (a temporary one's too).
fn existing_table(
    tx: &Transaction,
    name: &str,
    if_not_exists: bool,
    tag: &str,
) -> Result<Option<Outcome>> {
    if catalog::find(tx, name)?.is_none() {
        return Ok(None);
    }
    let shown = catalog::display_name(name);
    if !if_not_exists {
        return Err(SqlError::new(
            SqlState::DUPLICATE_TABLE,
            format!("relation \"{shown}\" already exists"),
        ));
    }
    let mut done = command(tag);
    done.notices.push(Notice::new(format!(
        "relation \"{shown}\" already exists, skipping"
    )));
    Ok(Some(done))
}

/// CREATE TABLE ... AS: the table, then the query's rows inserted as INSERT inserts them;
/// the tag is `SELECT n`, as PostgreSQL's. WITH NO DATA (`query` None) runs no query; its
/// tag is `CREATE TABLE AS`. With IF NOT EXISTS and the table there, a notice.
fn create_table_as(
    cx: &Cx,
    name: &str,
    if_not_exists: bool,
    columns: &[ColumnInfo],
    query: Option<&Node>,
    out: &mut dyn Output,
) -> Result<Outcome> {
    if let Some(done) = existing_table(cx.tx, name, if_not_exists, "CREATE TABLE AS")? {
        return Ok(done);
    }
    catalog::create(cx.tx, name, columns, None)?;
    let Some(query) = query else {
        return Ok(command("CREATE TABLE AS"));
    };
    let table = catalog::lookup(cx.tx, name)?;
    let no_columns: OutColumns = Arc::from(Vec::new());
    let returning = Returning::new(None, &no_columns, out)?;
    let done = insert(cx, &table, &[], query, &OnConflict::Error, returning)?;
    let n = done.tag.rsplit(' ').next().unwrap_or("0");
    Ok(command(format!("SELECT {n}")))
}

fn unique_name(table: &str, cols: &[&str]) -> String {
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
                SqlState::INVALID_TABLE_DEFINITION,
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
                    SqlState::NOT_NULL_VIOLATION,
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
        (None, false) => unique_name(&table.def.name, &cols),
    };
    tx.create_index(&name, table.def.oid, &cols, true)?;
    Ok(command("ALTER TABLE"))
}

/// A DML statement's RETURNING list and where its rows go.
struct Returning<'a> {
    exprs: Option<&'a [Expr]>,
    columns: &'a OutColumns,
    out: &'a mut dyn Output,
}

impl<'a> Returning<'a> {
    /// Announces the rows to come (RowDescription) when there is a RETURNING list.
    fn new(
        exprs: Option<&'a [Expr]>,
        columns: &'a OutColumns,
        out: &'a mut dyn Output,
    ) -> Result<Self> {
        if exprs.is_some() {
            out.rows(columns)?;
        }
        Ok(Returning {
            exprs,
            columns,
            out,
        })
    }

    /// The RETURNING row of a changed `row`, sent.
    fn row(&mut self, cx: &Cx, row: &[Value]) -> Result<()> {
        if let Some(exprs) = self.exprs {
            let values: Row = exprs
                .iter()
                .map(|e| e.eval(cx, row))
                .collect::<Result<_>>()?;
            self.out.row(&values)?;
        }
        Ok(())
    }

    fn outcome(&self, tag: String) -> Outcome {
        match self.exprs {
            Some(_) => rows_outcome(tag, self.columns),
            None => command(tag),
        }
    }
}

/// An engine error of a write to `table`; a unique violation gets PostgreSQL's DETAIL,
/// which names the key's columns: `Key (id)=(1) already exists.`, and the index's name as
/// SQL shows it (a temporary table's key index without the session's prefix).
fn key_error(table: &TableInfo, e: quire_engine::Error) -> SqlError {
    let quire_engine::Error::UniqueViolation { index, key } = e else {
        return SqlError::from(e);
    };
    let detail = key_detail(table, &index, &key);
    let shown = catalog::display_name(&index).to_string();
    let e = SqlError::from(quire_engine::Error::UniqueViolation { index: shown, key });
    match detail {
        Some(d) => e.with_detail(d),
        None => e,
    }
}

/// `Key (id)=(1) already exists.` for a duplicate `key` in index `index` of `table`.
fn key_detail(table: &TableInfo, index: &str, key: &str) -> Option<String> {
    let i = table.indexes.iter().find(|i| *i.name == *index)?;
    let columns: Vec<&str> = i
        .columns
        .iter()
        .filter_map(|&c| table.columns.get(usize::from(c)))
        .map(|c| c.name.as_str())
        .collect();
    Some(format!(
        "Key ({})=({key}) already exists.",
        columns.join(", ")
    ))
}

fn insert(
    cx: &Cx,
    table: &TableInfo,
    checks: &[BoundCheck],
    source: &Node,
    on_conflict: &OnConflict,
    mut returning: Returning,
) -> Result<Outcome> {
    // Materialized first: INSERT ... SELECT from the same table must not see its own rows.
    let rows = crate::exec::collect(crate::exec::open(source, cx)?)?;
    let mut n = 0u64;
    // The rows this command inserted or updated: DO UPDATE may not change one again.
    let mut touched: std::collections::HashSet<quire_engine::Tid> =
        std::collections::HashSet::new();
    let mut ri = Ri::default();
    for row in rows {
        check_row(cx, table, checks, &row)?;
        if !matches!(on_conflict, OnConflict::Error) {
            if let Some((tid, existing)) = conflicting_row(cx.tx, table, &row)? {
                if let OnConflict::Update { sets, filter } = on_conflict {
                    if touched.contains(&tid) {
                        return Err(affect_row_twice());
                    }
                    let mut both = existing.clone();
                    both.extend(row.iter().cloned());
                    if filter.as_ref().map_or(Ok(true), |f| f.holds(cx, &both))? {
                        let mut new = existing;
                        for (c, e) in sets {
                            new[*c] = e.eval(cx, &both)?;
                        }
                        check_row(cx, table, checks, &new)?;
                        let changed = cx
                            .tx
                            .update(table.def.oid, tid, &new)
                            .map_err(|e| key_error(table, e))?;
                        if let Changed::Done(new_tid, r) = changed {
                            touched.insert(new_tid);
                            n += 1;
                            ri.updated(cx, table, &both[..table.columns.len()], new_tid, &r)?;
                            returning.row(cx, &r)?;
                        }
                    }
                }
                continue;
            }
        }
        let tid = cx
            .tx
            .insert(table.def.oid, &row)
            .map_err(|e| key_error(table, e))?;
        if matches!(on_conflict, OnConflict::Update { .. }) {
            touched.insert(tid);
        }
        n += 1;
        ri.inserted(cx, table, tid, &row)?;
        returning.row(cx, &row)?;
    }
    ri.finish(cx)?;
    Ok(returning.outcome(format!("INSERT 0 {n}")))
}

/// 21000: ON CONFLICT DO UPDATE met a row this same command inserted or updated.
fn affect_row_twice() -> SqlError {
    SqlError::new(
        SqlState::CARDINALITY_VIOLATION,
        "ON CONFLICT DO UPDATE command cannot affect row a second time",
    )
    .with_hint(
        "Ensure that no rows proposed for insertion within the same command have duplicate constrained values.",
    )
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
        // The newest rows (PostgreSQL's dirty snapshot would see uncommitted ones too): a
        // row committed since the statement began still conflicts.
        if let Some(r) = tx
            .index_scan_as(
                idx.oid,
                Included(&key[..]),
                Included(&key[..]),
                Sees::Latest,
            )?
            .next()
        {
            return Ok(Some(r?));
        }
    }
    Ok(None)
}

/// The rows UPDATE, DELETE or SELECT FOR UPDATE changes: for each target row (its TID
/// follows its columns in the scan's row), the scan's values after its columns (the TID,
/// then the columns of UPDATE ... FROM's or DELETE ... USING's other tables). A target
/// row joined to several rows counts once, with the first of them, as in PostgreSQL. In the
/// order of `keys` (SELECT FOR UPDATE's ORDER BY), evaluated on the rows as the scan read
/// them; in the scan's order when there are none.
fn targets(
    cx: &Cx,
    table: &TableInfo,
    scan: &Node,
    keys: &[crate::nodes::SortKey],
) -> Result<Vec<(quire_engine::Tid, Row)>> {
    let width = table.columns.len();
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    let mut sort_keys = Vec::new();
    for mut row in crate::exec::collect(crate::exec::open(scan, cx)?)? {
        let tid = value_tid(row.get(width).unwrap_or(&Value::Null))?;
        if !seen.insert(tid) {
            continue;
        }
        if !keys.is_empty() {
            let key: Vec<Value> = keys
                .iter()
                .map(|k| k.expr.eval(cx, &row))
                .collect::<Result<_>>()?;
            sort_keys.push(key);
        }
        let rest = row.split_off(width.min(row.len()));
        out.push((tid, rest));
    }
    if keys.is_empty() {
        return Ok(out);
    }
    let mut keyed: Vec<_> = sort_keys.into_iter().zip(out).collect();
    keyed.sort_by(|a, b| crate::exec::compare_keys(keys, &a.0, &b.0));
    Ok(keyed.into_iter().map(|(_, target)| target).collect())
}

/// A target row's version `current` with the values the scan read after it: the row the
/// statement's expressions (SET, WHERE's recheck, RETURNING) are evaluated on.
fn with_rest(current: &[Value], rest: &[Value]) -> Row {
    let mut row = Vec::with_capacity(current.len() + rest.len());
    row.extend_from_slice(current);
    row.extend_from_slice(rest);
    row
}

fn update(
    cx: &Cx,
    table: &TableInfo,
    checks: &[BoundCheck],
    scan: &Node,
    recheck: Option<&Expr>,
    sets: &[(usize, Expr)],
    mut returning: Returning,
) -> Result<Outcome> {
    let mut n = 0u64;
    let mut ri = Ri::default();
    let keyed = !table.foreign_keys.is_empty() || !table.referenced_by.is_empty();
    for (tid, rest) in targets(cx, table, scan, &[])? {
        let mut failure = None;
        let mut before = None;
        let changed = cx.tx.update_with(table.def.oid, tid, |current| {
            if keyed {
                before = Some(current.clone());
            }
            // READ COMMITTED: the row may have changed since the scan; the predicate is
            // checked again on its newest version.
            let r = (|| -> Result<Option<Row>> {
                let joined = with_rest(current, &rest);
                if let Some(p) = recheck {
                    if !p.holds(cx, &joined)? {
                        return Ok(None);
                    }
                }
                let mut row = current.clone();
                for (c, e) in sets {
                    row[*c] = e.eval(cx, &joined)?;
                }
                check_row(cx, table, checks, &row)?;
                Ok(Some(row))
            })();
            r.unwrap_or_else(|e| {
                failure = Some(e);
                None
            })
        });
        let changed = changed.map_err(|e| key_error(table, e))?;
        if let Some(e) = failure {
            return Err(e);
        }
        if let Changed::Done(new_tid, row) = changed {
            n += 1;
            if let Some(before) = &before {
                ri.updated(cx, table, before, new_tid, &row)?;
            }
            returning.row(cx, &with_rest(&row, &rest))?;
        }
    }
    ri.finish(cx)?;
    Ok(returning.outcome(format!("UPDATE {n}")))
}

/// SELECT ... FOR UPDATE (`Plan::SelectForUpdate`): the rows sorted, then locked one by
/// one until LIMIT rows past OFFSET are locked.
fn select_for_update(cx: &Cx, plan: &Plan, out: &mut dyn Output) -> Result<Outcome> {
    let Plan::SelectForUpdate {
        table,
        scan,
        recheck,
        exprs,
        out: columns,
        order,
        offset,
        count,
        wait,
    } = plan
    else {
        return Err(SqlError::internal("not a SELECT ... FOR UPDATE"));
    };
    let mut skip = crate::exec::limit_value(offset.as_ref(), "OFFSET", cx)?.unwrap_or(0);
    let count = crate::exec::limit_value(count.as_ref(), "LIMIT", cx)?;
    out.rows(columns)?;
    let mut n = 0u64;
    for (tid, rest) in targets(cx, table, scan, order)? {
        if count.is_some_and(|c| n >= c as u64) {
            break;
        }
        // The lock is taken on the newest version (READ COMMITTED follows concurrent
        // updates), which must still match.
        let locked = cx
            .tx
            .lock_row_waiting(table.def.oid, tid, *wait)
            .map_err(|e| {
                let e = SqlError::from(e);
                if *wait == RowWait::NoWait && e.sqlstate() == SqlState::LOCK_NOT_AVAILABLE {
                    let name = catalog::display_name(&table.def.name);
                    SqlError::new(
                        SqlState::LOCK_NOT_AVAILABLE,
                        format!("could not obtain lock on row in relation \"{name}\""),
                    )
                } else {
                    e
                }
            })?;
        let Changed::Done(_, row) = locked else {
            continue;
        };
        let row = with_rest(&row, &rest);
        if !recheck.as_ref().map_or(Ok(true), |p| p.holds(cx, &row))? {
            continue;
        }
        if skip > 0 {
            skip -= 1; // locked, as PostgreSQL's LockRows under Limit locks it
            continue;
        }
        let values: Row = exprs
            .iter()
            .map(|e| e.eval(cx, &row))
            .collect::<Result<_>>()?;
        out.row(&values)?;
        n += 1;
    }
    Ok(rows_outcome(format!("SELECT {n}"), columns))
}

fn delete(
    cx: &Cx,
    table: &TableInfo,
    scan: &Node,
    recheck: Option<&Expr>,
    mut returning: Returning,
) -> Result<Outcome> {
    let mut n = 0u64;
    let mut ri = Ri::default();
    for (tid, rest) in targets(cx, table, scan, &[])? {
        let mut failure = None;
        let changed = cx
            .tx
            .delete_if(table.def.oid, tid, |current| match recheck {
                None => true,
                Some(p) => p.holds(cx, &with_rest(current, &rest)).unwrap_or_else(|e| {
                    failure = Some(e);
                    false
                }),
            })?;
        if let Some(e) = failure {
            return Err(e);
        }
        if let Changed::Done(_, row) = changed {
            n += 1;
            ri.deleted(cx, table, &row)?;
            returning.row(cx, &with_rest(&row, &rest))?;
        }
    }
    ri.finish(cx)?;
    Ok(returning.outcome(format!("DELETE {n}")))
}
