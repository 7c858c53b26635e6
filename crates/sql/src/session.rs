//! A SQL session: the transaction state of one client connection (idle, inside a BEGIN
//! block, or in a block an error aborted) and the execution of bound plans through the
//! engine's [`Transaction`]. A session is synchronous and not shared: the server gives each
//! connection a thread of its own that owns its `Session`.

use std::ops::Bound::Included;
use std::sync::Arc;

use quire_engine::{Changed, Database, IsolationLevel, Row, Tid, Transaction, Value};

use crate::bind::{self, Access, ArithOp, CmpOp, Expr, Filter, Item, OutColumn, Plan, Pred};
use crate::catalog::{self, TableInfo};
use crate::error::{Result, SqlError};
use crate::types::{self, SqlType};

/// A parsed statement (one of those [`parse`] returns).
#[derive(Clone, Debug)]
pub struct Statement(sqlparser::ast::Statement);

impl Statement {
    /// The parsed statement (the binder's input).
    pub(crate) fn ast(&self) -> &sqlparser::ast::Statement {
        &self.0
    }

    /// Whether it is a statement a failed transaction block accepts (COMMIT, ROLLBACK).
    fn ends_block(&self) -> bool {
        matches!(
            self.0,
            sqlparser::ast::Statement::Commit { .. } | sqlparser::ast::Statement::Rollback { .. }
        )
    }
}

/// Parses SQL text into statements (42601 on a syntax error). Never panics on any input:
/// sqlparser bounds its recursion depth.
pub fn parse(sql: &str) -> Result<Vec<Statement>> {
    let dialect = sqlparser::dialect::PostgreSqlDialect {};
    sqlparser::parser::Parser::parse_sql(&dialect, sql)
        .map(|v| v.into_iter().map(Statement).collect())
        .map_err(|e| {
            let msg = e.to_string();
            SqlError::syntax(
                msg.strip_prefix("sql parser error: ")
                    .unwrap_or(&msg)
                    .to_string(),
            )
        })
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

/// One client's session.
pub struct Session {
    db: Arc<Database>,
    state: State,
    /// The block is the implicit transaction of a multi-statement simple query
    /// ([`Session::execute_simple`]): committed at the message's end, rolled back to idle
    /// (not to the aborted state) on an error, made explicit by a BEGIN inside it.
    implicit: bool,
}

/// Most rows one statement materializes (a SELECT's result, an UPDATE's targets): results
/// are built in memory until the executor streams them.
pub const MAX_ROWS_PER_STATEMENT: usize = 10_000_000;

impl Session {
    /// Creates the SQL layer's catalog table on a data directory's first start.
    pub fn bootstrap(db: &Database) -> Result<()> {
        catalog::bootstrap(db)
    }

    pub fn new(db: Arc<Database>) -> Session {
        Session {
            db,
            state: State::Idle,
            implicit: false,
        }
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
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Block(tx) => Ok(tx.rollback()?),
            State::Idle | State::Failed => Ok(()),
        }
    }

    /// Parameter types and output columns of `stmt`, given the types the client declared
    /// (`Unknown` for none).
    pub fn describe(&mut self, stmt: &Statement, hints: &[SqlType]) -> Result<Description> {
        let bound = self.with_tx(stmt, |tx| bind::bind(stmt.ast(), hints, tx))?;
        Ok(Description {
            params: bound.params,
            columns: bound.out,
        })
    }

    /// Runs `stmt` with parameter values (already of the types [`Session::describe`] gave).
    pub fn execute(
        &mut self,
        stmt: &Statement,
        hints: &[SqlType],
        params: &[Value],
    ) -> Result<Outcome> {
        if matches!(self.state, State::Failed) {
            if stmt.ends_block() {
                self.state = State::Idle;
                return Ok(Outcome {
                    tag: "ROLLBACK".into(),
                    kind: OutcomeKind::BlockEnd,
                });
            }
            return Err(SqlError::in_failed_transaction());
        }
        let bound = match self.with_tx(stmt, |tx| bind::bind(stmt.ast(), hints, tx)) {
            Ok(b) => b,
            Err(e) => return Err(self.fail(e)),
        };
        if params.len() != bound.params.len() {
            let e = SqlError::new(
                "08P01",
                format!(
                    "bind message supplies {} parameters, but prepared statement requires {}",
                    params.len(),
                    bound.params.len()
                ),
            );
            return Err(self.fail(e));
        }
        match bound.plan {
            Plan::Begin(isolation) => self.begin(isolation),
            Plan::Commit => self.end(true),
            Plan::Rollback => self.end(false),
            plan => {
                if let State::Block(tx) = &self.state {
                    let r = run(tx, &plan, &bound.params, params);
                    return r.map_err(|e| self.fail(e));
                }
                // Outside a block, the statement is its own transaction.
                let tx = self.db.begin(IsolationLevel::ReadCommitted)?;
                match run(&tx, &plan, &bound.params, params) {
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
        }
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
            let failed = r.is_err();
            out.push(r);
            if failed {
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
        Ok(Outcome {
            tag: "BEGIN".into(),
            kind: OutcomeKind::BlockStart,
        })
    }

    fn end(&mut self, commit: bool) -> Result<Outcome> {
        self.implicit = false;
        let tag = if commit { "COMMIT" } else { "ROLLBACK" };
        let done = Outcome {
            tag: tag.into(),
            kind: OutcomeKind::BlockEnd,
        };
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Block(tx) if commit => tx.commit()?,
            State::Block(tx) => tx.rollback()?,
            // No block: PostgreSQL warns "there is no transaction in progress".
            State::Idle | State::Failed => {}
        }
        Ok(done)
    }

    /// Runs `f` with the block's transaction, or a short one of its own for catalog lookups.
    fn with_tx<T>(
        &self,
        stmt: &Statement,
        f: impl FnOnce(Option<&Transaction>) -> Result<T>,
    ) -> Result<T> {
        if !bind::needs_catalog(stmt.ast()) {
            return f(None);
        }
        match &self.state {
            State::Block(tx) => f(Some(tx)),
            State::Failed => Err(SqlError::in_failed_transaction()),
            State::Idle => {
                let tx = self.db.begin(IsolationLevel::ReadCommitted)?;
                let r = f(Some(&tx));
                let _ = tx.rollback();
                r
            }
        }
    }
}

fn command(tag: impl Into<String>) -> Outcome {
    Outcome {
        tag: tag.into(),
        kind: OutcomeKind::Command,
    }
}

/// Executes a plan other than BEGIN/COMMIT/ROLLBACK in `tx`.
fn run(
    tx: &Transaction,
    plan: &Plan,
    param_types: &[SqlType],
    params: &[Value],
) -> Result<Outcome> {
    let env = Env {
        params,
        param_types,
    };
    match plan {
        Plan::CreateTable {
            name,
            if_not_exists,
            columns,
            pkey,
        } => {
            if *if_not_exists && catalog::find(tx, name)?.is_some() {
                return Ok(command("CREATE TABLE"));
            }
            catalog::create(tx, name, columns, pkey.as_deref())?;
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
        Plan::Insert { table, rows } => {
            for row in rows {
                let values = row
                    .iter()
                    .map(|e| env.eval(e, &[]))
                    .collect::<Result<Vec<_>>>()?;
                check_not_null(table, &values)?;
                tx.insert(table.def.oid, &values)?;
            }
            Ok(command(format!("INSERT 0 {}", rows.len())))
        }
        Plan::Select {
            table,
            items,
            out,
            filter,
            order_by,
            limit,
        } => {
            let limit = match limit {
                None => None,
                Some(e) => match env.eval(e, &[])? {
                    Value::Null => None,
                    Value::Int(n) if n >= 0 => Some(n as usize),
                    Value::Int(_) => {
                        return Err(SqlError::new("2201W", "LIMIT must not be negative"))
                    }
                    _ => {
                        return Err(SqlError::type_mismatch(
                            "argument of LIMIT must be of type bigint",
                        ))
                    }
                },
            };
            let counting = items.iter().any(|i| matches!(i, Item::CountStar));
            // Without ORDER BY and count(*), the scan can stop at the limit.
            let stop_at = if order_by.is_none() && !counting {
                limit
            } else {
                None
            };
            let mut source = match table {
                Some(t) => matching_rows(tx, t, filter, &env, stop_at)?
                    .into_iter()
                    .map(|(_, r)| r)
                    .collect(),
                None if filter
                    .preds
                    .iter()
                    .all(|p| env.holds(p, &[]).unwrap_or(false)) =>
                {
                    vec![Vec::new()]
                }
                None => {
                    // Evaluate again for the error, if any.
                    for p in &filter.preds {
                        env.holds(p, &[])?;
                    }
                    Vec::new()
                }
            };
            if let Some((col, desc)) = order_by {
                source.sort_by(|a, b| {
                    let o = compare(&a[*col], &b[*col]);
                    if *desc {
                        o.reverse()
                    } else {
                        o
                    }
                });
            }
            let rows: Vec<Row> = if counting {
                let n = i64::try_from(source.len()).unwrap_or(i64::MAX);
                vec![items
                    .iter()
                    .map(|i| match i {
                        Item::CountStar => Ok(Value::Int(n)),
                        Item::Expr(e) => env.eval(e, &[]),
                    })
                    .collect::<Result<_>>()?]
            } else {
                source
                    .iter()
                    .take(limit.unwrap_or(usize::MAX))
                    .map(|r| {
                        items
                            .iter()
                            .map(|i| match i {
                                Item::Expr(e) => env.eval(e, r),
                                Item::CountStar => {
                                    Err(SqlError::new("XX000", "count(*) outside an aggregate row"))
                                }
                            })
                            .collect::<Result<Row>>()
                    })
                    .collect::<Result<_>>()?
            };
            let rows = if counting {
                rows.into_iter()
                    .take(limit.unwrap_or(usize::MAX))
                    .collect::<Vec<_>>()
            } else {
                rows
            };
            Ok(Outcome {
                tag: format!("SELECT {}", rows.len()),
                kind: OutcomeKind::Rows {
                    columns: out.clone(),
                    rows,
                },
            })
        }
        Plan::Update {
            table,
            sets,
            filter,
        } => {
            let targets = matching_rows(tx, table, filter, &env, None)?;
            let mut updated = 0u64;
            for (tid, _) in targets {
                let mut failure = None;
                let changed = tx.update_with(table.def.oid, tid, |current| {
                    // READ COMMITTED: the row may have changed since the scan; the
                    // predicates are checked again on its newest version.
                    match new_row(table, sets, filter, &env, current) {
                        Ok(r) => r,
                        Err(e) => {
                            failure = Some(e);
                            None
                        }
                    }
                })?;
                if let Some(e) = failure {
                    return Err(e);
                }
                if matches!(changed, Changed::Done(..)) {
                    updated += 1;
                }
            }
            Ok(command(format!("UPDATE {updated}")))
        }
        Plan::Delete { table, filter } => {
            let targets = matching_rows(tx, table, filter, &env, None)?;
            let mut deleted = 0u64;
            for (tid, _) in targets {
                let mut failure = None;
                let changed = tx.delete_if(table.def.oid, tid, |current| {
                    env.all_hold(&filter.preds, current).unwrap_or_else(|e| {
                        failure = Some(e);
                        false
                    })
                })?;
                if let Some(e) = failure {
                    return Err(e);
                }
                if matches!(changed, Changed::Done(..)) {
                    deleted += 1;
                }
            }
            Ok(command(format!("DELETE {deleted}")))
        }
        Plan::Begin(_) | Plan::Commit | Plan::Rollback => Err(SqlError::new(
            "XX000",
            "transaction control reached the executor",
        )),
    }
}

/// The new version of `current` under UPDATE's SET list, or `None` if it no longer matches.
fn new_row(
    table: &TableInfo,
    sets: &[(usize, Expr)],
    filter: &Filter,
    env: &Env,
    current: &Row,
) -> Result<Option<Row>> {
    if !env.all_hold(&filter.preds, current)? {
        return Ok(None);
    }
    let mut row = current.clone();
    for (col, e) in sets {
        row[*col] = env.eval(e, current)?;
    }
    check_not_null(table, &row)?;
    Ok(Some(row))
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

/// The rows of `table` that satisfy `filter`, through the primary key where it applies.
fn matching_rows(
    tx: &Transaction,
    table: &TableInfo,
    filter: &Filter,
    env: &Env,
    stop_at: Option<usize>,
) -> Result<Vec<(Tid, Row)>> {
    let mut out = Vec::new();
    let limit = stop_at.unwrap_or(MAX_ROWS_PER_STATEMENT);
    if limit == 0 {
        return Ok(out);
    }
    let mut keep = |tid: Tid, row: Row| -> Result<bool> {
        if env.all_hold(&filter.preds, &row)? {
            if out.len() >= MAX_ROWS_PER_STATEMENT {
                return Err(SqlError::new(
                    "54000",
                    format!("a statement may touch at most {MAX_ROWS_PER_STATEMENT} rows for now"),
                ));
            }
            out.push((tid, row));
        }
        Ok(out.len() < limit)
    };
    match (&filter.access, &table.pkey) {
        (Access::PrimaryKey(values), Some((index, key_cols))) => {
            let mut key = Vec::with_capacity(values.len());
            for (e, &col) in values.iter().zip(key_cols) {
                let v = env.eval(e, &[])?;
                // A key value of another type (1.5 = an integer key) cannot match in the
                // index's order; such a query falls back to checking rows.
                match types::assign(
                    v,
                    SqlType::Unknown.max_of(e, env),
                    table.columns[col].ty,
                    "key",
                ) {
                    Ok(Value::Null) => return Ok(Vec::new()),
                    Ok(v) => key.push(v),
                    Err(_) => return seq(tx, table, &mut keep).map(|()| out),
                }
            }
            for r in tx.index_scan(*index, Included(&key[..]), Included(&key[..]))? {
                let (tid, row) = r?;
                if !keep(tid, row)? {
                    break;
                }
            }
        }
        _ => seq(tx, table, &mut keep)?,
    }
    Ok(out)
}

fn seq(
    tx: &Transaction,
    table: &TableInfo,
    keep: &mut impl FnMut(Tid, Row) -> Result<bool>,
) -> Result<()> {
    for r in tx.scan(table.def.oid)? {
        let (tid, row) = r?;
        if !keep(tid, row)? {
            break;
        }
    }
    Ok(())
}

impl SqlType {
    /// The type of a key expression's value, for the key's assignment cast.
    fn max_of(self, e: &Expr, env: &Env) -> SqlType {
        match e {
            Expr::Param(n) => env.param_types.get(*n).copied().unwrap_or(self),
            Expr::Cast(_, _, to) => *to,
            Expr::Const(Value::Int(_)) => SqlType::Int8,
            Expr::Const(Value::Float(_)) => SqlType::Float8,
            Expr::Const(Value::Text(_)) => SqlType::Text,
            _ => self,
        }
    }
}

/// Values compared the way SQL compares them: integers and floats numerically.
fn compare(a: &Value, b: &Value) -> std::cmp::Ordering {
    match (a, b) {
        (Value::Int(x), Value::Float(y)) => (*x as f64).total_cmp(y),
        (Value::Float(x), Value::Int(y)) => x.total_cmp(&(*y as f64)),
        _ => a.compare(b),
    }
}

/// What expressions are evaluated against: the parameters.
struct Env<'a> {
    params: &'a [Value],
    param_types: &'a [SqlType],
}

impl Env<'_> {
    fn eval(&self, e: &Expr, row: &[Value]) -> Result<Value> {
        Ok(match e {
            Expr::Const(v) => v.clone(),
            Expr::Param(n) => self.params.get(*n).cloned().ok_or_else(|| {
                SqlError::new("08P01", format!("no value for parameter ${}", n + 1))
            })?,
            Expr::Column(c) => row
                .get(*c)
                .cloned()
                .ok_or_else(|| SqlError::new("XX000", "column out of the row"))?,
            Expr::Neg(inner) => match self.eval(inner, row)? {
                Value::Int(i) => Value::Int(i.checked_neg().ok_or_else(out_of_range)?),
                Value::Float(f) => Value::Float(-f),
                v => v,
            },
            Expr::Cast(inner, from, to) => types::cast(self.eval(inner, row)?, *from, *to)?,
            Expr::Arith(op, l, r) => arith(*op, self.eval(l, row)?, self.eval(r, row)?)?,
        })
    }

    fn holds(&self, p: &Pred, row: &[Value]) -> Result<bool> {
        Ok(match p {
            Pred::IsNull(e, negated) => self.eval(e, row)?.is_null() != *negated,
            Pred::Cmp(op, l, r) => {
                let (l, r) = (self.eval(l, row)?, self.eval(r, row)?);
                if l.is_null() || r.is_null() {
                    return Ok(false);
                }
                let (l, r) = coerce_pair(l, r)?;
                let o = compare(&l, &r);
                match op {
                    CmpOp::Eq => o.is_eq(),
                    CmpOp::Ne => o.is_ne(),
                    CmpOp::Lt => o.is_lt(),
                    CmpOp::Le => o.is_le(),
                    CmpOp::Gt => o.is_gt(),
                    CmpOp::Ge => o.is_ge(),
                }
            }
        })
    }

    fn all_hold(&self, preds: &[Pred], row: &[Value]) -> Result<bool> {
        for p in preds {
            if !self.holds(p, row)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// An untyped string compared with a typed value takes its type (`ts < '2020-01-01'`).
fn coerce_pair(l: Value, r: Value) -> Result<(Value, Value)> {
    let as_type = |v: &Value| v.type_of().map(SqlType::of_engine_type);
    match (&l, &r) {
        (Value::Text(s), other) if !matches!(other, Value::Text(_)) => {
            let t = as_type(other).unwrap_or(SqlType::Text);
            Ok((types::parse_text(t, s)?, r))
        }
        (other, Value::Text(s)) if !matches!(other, Value::Text(_)) => {
            let t = as_type(other).unwrap_or(SqlType::Text);
            Ok((l.clone(), types::parse_text(t, s)?))
        }
        _ => Ok((l, r)),
    }
}

fn out_of_range() -> SqlError {
    SqlError::new("22003", "integer out of range")
}

fn arith(op: ArithOp, left: Value, right: Value) -> Result<Value> {
    Ok(match (left, right) {
        (Value::Null, _) | (_, Value::Null) => Value::Null,
        (Value::Int(a), Value::Int(b)) => {
            if b == 0 && matches!(op, ArithOp::Div | ArithOp::Mod) {
                return Err(division_by_zero());
            }
            Value::Int(
                match op {
                    ArithOp::Add => a.checked_add(b),
                    ArithOp::Sub => a.checked_sub(b),
                    ArithOp::Mul => a.checked_mul(b),
                    ArithOp::Div => a.checked_div(b),
                    ArithOp::Mod => a.checked_rem(b),
                }
                .ok_or_else(out_of_range)?,
            )
        }
        (lv, rv) => {
            let (Some(x), Some(y)) = (as_f64(&lv), as_f64(&rv)) else {
                return Err(SqlError::new(
                    "42883",
                    "operator does not exist for these types",
                ));
            };
            Value::Float(match op {
                ArithOp::Add => x + y,
                ArithOp::Sub => x - y,
                ArithOp::Mul => x * y,
                ArithOp::Div if y == 0.0 => return Err(division_by_zero()),
                ArithOp::Div => x / y,
                ArithOp::Mod => {
                    return Err(SqlError::new(
                        "42883",
                        "operator does not exist: double precision % double precision",
                    ))
                }
            })
        }
    })
}

fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    }
}

fn division_by_zero() -> SqlError {
    SqlError::new("22012", "division by zero")
}
