//! Binding: a parsed statement checked against the catalog and turned into a [`Plan`], with
//! every name resolved to a position and every expression typed, and every parameter's type
//! inferred from its context (a column it is compared with or assigned to, a cast), as
//! PostgreSQL infers them for a Parse message without types. What quire does not do is
//! refused here with 0A000 naming it.
//!
//! - [`query`]: SELECT (FROM with joins, WHERE, GROUP BY, HAVING, ORDER BY, LIMIT, FETCH,
//!   DISTINCT ON) and the choice of access path (an index for equality and range predicates).
//! - [`expr`]: expressions, operators, functions, casts and subqueries.
//! - [`scope`]: the names a FROM clause makes visible: tables, aliases, joins' merged
//!   USING and NATURAL columns, what LATERAL may see.
//! - [`setop`]: UNION, INTERSECT and EXCEPT: column counts and types unified.
//! - [`with`]: WITH: common table expressions, their names' scopes, recursion.
//! - [`view`]: CREATE VIEW, and a view named in FROM bound in place of its name.
//! - this file: statements (DDL, DML with UPDATE ... FROM and DELETE ... USING,
//!   transaction control, utility commands).
//!
//! ## Rules
//! - The syntax tree is as deep as the client made it (up to `parse::MAX_SYNTAX_DEPTH`
//!   levels): every recursive walk of it checks the stack first (`crate::stack`, 54001),
//!   and no part of it is cloned (a clone recurses unchecked); parts are borrowed. AND and
//!   OR chains, which `sqlparser` nests one level per operator, are walked in a loop and
//!   bound flat, so any length binds.
//! - Aggregates: a SELECT's list and ORDER BY are bound first as if ungrouped, noting any
//!   aggregate call (it stands as a NULL of its type meanwhile), then bound again over an
//!   Aggregate node if one was met. Anywhere else an aggregate is 42803 naming the clause,
//!   as are nested ones; a call no aggregate takes is 42883 (42809 for `count()`), with
//!   PostgreSQL's hint and the position of the function's name.
//! - Lists of constants `crate::parse` kept as text (`crate::literals`) are bound straight
//!   from their text, each constant as its literal would be.

mod array;
mod constraint;
mod datetime;
mod expr;
mod foreign_key;
mod json;
mod query;
mod scope;
mod setop;
mod srf;
mod view;
mod window;
mod with;

use std::cell::RefCell;
use std::sync::Arc;

use quire_engine::{IsolationLevel, SqlState, Transaction, Value};
use sqlparser::ast::{
    self, AlterTableOperation, AssignmentTarget, ColumnOption, Expr as AstExpr, FromTable, Ident,
    ObjectName, ObjectNamePart, ObjectType, SetExpr, Statement, TableConstraint, TableFactor,
    TableObject, TransactionIsolationLevel, TransactionMode,
};

use crate::catalog::{self, ColumnInfo, TableCache, TableInfo};
use crate::error::{Result, SqlError};
pub(crate) use crate::nodes::Bound;
use crate::nodes::{Expr, Node, OnConflict, OutColumn, OutColumns, Plan};
use crate::types::SqlType;

pub(crate) use scope::Scope;
pub(crate) use view::{check_view, recursion as view_recursion};

/// Most parameters a statement may have (PostgreSQL's limit, the protocol's 16-bit count).
pub(crate) const MAX_PARAMS: usize = 65_535;

/// PostgreSQL's `MaxTupleAttributeNumber`: the most columns a result may have (54011).
const MAX_RESULT_COLUMNS: usize = 1664;

/// Binds `stmt`; `hints` are the parameter types the client gave (`Unknown` where it gave
/// none). `tables`: the session's table cache and the catalog generation read before binding.
pub(crate) fn bind(
    stmt: &Statement,
    hints: &[SqlType],
    tx: &Transaction,
    tables: (&RefCell<TableCache>, u64),
) -> Result<Bound> {
    let mut b = Binder::new(tx, hints);
    b.tables = Some(tables);
    let plan = b.statement(stmt)?;
    let out: OutColumns = match &plan {
        Plan::Query { out, .. } | Plan::SelectForUpdate { out, .. } => Arc::clone(out),
        Plan::Show(name) if name == "all" => ["name", "setting", "source"]
            .iter()
            .map(|n| OutColumn {
                name: (*n).to_string(),
                ty: SqlType::Text,
            })
            .collect(),
        Plan::Show(name) => [OutColumn {
            name: crate::settings::display_name(name),
            ty: SqlType::Text,
        }]
        .into(),
        Plan::Explain(_) => [OutColumn {
            name: "QUERY PLAN".into(),
            ty: SqlType::Text,
        }]
        .into(),
        Plan::Insert {
            returning: Some(_), ..
        }
        | Plan::Update {
            returning: Some(_), ..
        }
        | Plan::Delete {
            returning: Some(_), ..
        } => b.returning_out.take().unwrap_or_default().into(),
        _ => Arc::new([]),
    };
    if out.len() > MAX_RESULT_COLUMNS {
        return Err(SqlError::new(
            SqlState::TOO_MANY_COLUMNS,
            format!("target lists can have at most {MAX_RESULT_COLUMNS} entries"),
        ));
    }
    // A parameter no context typed is text, as an untyped literal would be.
    let params = b
        .params
        .into_iter()
        .map(|t| {
            if t == SqlType::Unknown {
                SqlType::Text
            } else {
                t
            }
        })
        .collect();
    Ok(Bound { plan, params, out })
}

/// The DEFAULT of `col` (or NULL) as an expression to evaluate, for the rows that exist
/// when ADD COLUMN adds a column with one.
pub(crate) fn default_expr(tx: &Transaction, col: &ColumnInfo) -> Result<Expr> {
    Binder::new(tx, &[]).default_of(col)
}

/// The CHECK constraints of `table` bound over its row (COPY FROM verifies them).
pub(crate) fn table_checks(
    tx: &Transaction,
    table: &TableInfo,
) -> Result<Vec<crate::nodes::BoundCheck>> {
    Binder::new(tx, &[]).bound_checks(table)
}

/// One action of a multi-action ALTER TABLE, bound as it runs ([`Plan::AlterSteps`]).
pub(crate) fn bind_alter_step(tx: &Transaction, sql: &str) -> Result<Plan> {
    let stmts = crate::parse::parse(sql)?;
    let [crate::parse::Statement::Sql(stmt)] = stmts.as_slice() else {
        return Err(SqlError::new(
            SqlState::INTERNAL_ERROR,
            "an ALTER TABLE action did not read back as one",
        ));
    };
    let Statement::AlterTable(at) = &**stmt else {
        return Err(SqlError::new(
            SqlState::INTERNAL_ERROR,
            "an ALTER TABLE action did not read back as one",
        ));
    };
    Binder::new(tx, &[]).alter_table(at)
}

/// BEGIN, COMMIT and ROLLBACK, which bind without a transaction.
pub(crate) fn bind_transaction_control(stmt: &Statement) -> Result<Plan> {
    match stmt {
        Statement::StartTransaction {
            modes,
            statements,
            exception,
            ..
        } => {
            if !statements.is_empty() || exception.is_some() {
                return Err(SqlError::unsupported("BEGIN ... END blocks"));
            }
            Ok(Plan::Begin(isolation(modes)?))
        }
        Statement::Commit { chain: false, .. } => Ok(Plan::Commit),
        Statement::Rollback {
            chain: false,
            savepoint: None,
        } => Ok(Plan::Rollback),
        other => Err(SqlError::unsupported(statement_kind(other))),
    }
}

/// Whether binding `stmt` needs no transaction (transaction control, savepoints included).
pub(crate) fn is_transaction_control(stmt: &Statement) -> bool {
    matches!(
        stmt,
        Statement::StartTransaction { .. }
            | Statement::Commit { .. }
            | Statement::Rollback { .. }
            | Statement::Savepoint { .. }
            | Statement::ReleaseSavepoint { .. }
    )
}

/// A savepoint command, its name folded as an identifier is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SavepointCommand {
    Define(String),
    Release(String),
    RollbackTo(String),
}

impl SavepointCommand {
    /// The statement's name in errors, and (`tag`) its command tag.
    pub(crate) fn what(&self) -> &'static str {
        match self {
            SavepointCommand::Define(_) => "SAVEPOINT",
            SavepointCommand::Release(_) => "RELEASE SAVEPOINT",
            SavepointCommand::RollbackTo(_) => "ROLLBACK TO SAVEPOINT",
        }
    }

    pub(crate) fn tag(&self) -> &'static str {
        match self {
            SavepointCommand::Define(_) => "SAVEPOINT",
            SavepointCommand::Release(_) => "RELEASE",
            SavepointCommand::RollbackTo(_) => "ROLLBACK",
        }
    }
}

/// `stmt` as a savepoint command, if it is one (the session runs them, nothing binds them).
pub(crate) fn savepoint_command(stmt: &Statement) -> Option<SavepointCommand> {
    match stmt {
        Statement::Savepoint { name } => Some(SavepointCommand::Define(ident_name(name))),
        Statement::ReleaseSavepoint { name } => Some(SavepointCommand::Release(ident_name(name))),
        Statement::Rollback {
            savepoint: Some(name),
            ..
        } => Some(SavepointCommand::RollbackTo(ident_name(name))),
        _ => None,
    }
}

pub(crate) struct Binder<'t> {
    tx: &'t Transaction,
    /// The type of each parameter seen so far (`Unknown` until a context types it).
    params: Vec<SqlType>,
    /// The scopes of the enclosing query levels, innermost last (for correlated subqueries
    /// and LATERAL).
    outer: Vec<Scope>,
    /// RETURNING's output columns, set by DML binding.
    returning_out: Option<Vec<OutColumn>>,
    /// Set while binding the select list, HAVING and ORDER BY of a grouped query.
    agg: Option<query::AggCtx>,
    /// While a SELECT's list and ORDER BY are bound as if ungrouped: whether an aggregate
    /// call was met (the SELECT is then bound again as grouped). `None` elsewhere, where
    /// an aggregate is refused.
    agg_probe: Option<bool>,
    /// While an aggregate's arguments are bound (another aggregate there is refused).
    in_aggregate: bool,
    /// Set while a SELECT's list and ORDER BY are bound: their window calls and named
    /// windows. `None` elsewhere, where a window call is refused.
    win: Option<window::WinCtx>,
    /// While a window call's arguments and window are bound (another one there is refused).
    in_window: bool,
    /// Set while a SELECT's list and ORDER BY are bound: their set-returning calls. `None`
    /// elsewhere, where one is refused (`srf`).
    srf: Option<srf::SrfCtx>,
    /// The clause being bound, for the error of an aggregate where none is allowed
    /// ("aggregate functions are not allowed in WHERE").
    clause: Option<&'static str>,
    /// The session's table cache, with the catalog generation its entries must have.
    tables: Option<(&'t RefCell<TableCache>, u64)>,
    /// The common table expressions in scope, innermost last.
    ctes: Vec<with::CteBinding>,
    /// The id the next CTE gets (unique in the statement).
    next_cte: usize,
    /// The lowest index into `outer` a name resolved to since it was last reset: whether a
    /// subquery being bound refers to an enclosing query's row.
    lowest_outer_ref: usize,
    /// How many expression subqueries and outer joins' nullable sides enclose the place
    /// being bound (where a recursive reference may not be).
    sublinks: usize,
    outer_joins: usize,
    /// While a view is being created: the relations its query names (not those its views
    /// read), what it depends on. `None` otherwise, so other statements note nothing.
    relations_read: Option<Vec<quire_engine::Oid>>,
    /// The views whose queries are being bound, innermost last (a view that reaches
    /// itself is refused).
    views_open: Vec<quire_engine::Oid>,
    /// The address of the select list whose `*` a view being created spells out, and
    /// the list spelled out once it is bound ([`view`]).
    star_target: Option<usize>,
    star_items: Option<Vec<ast::SelectItem>>,
}

pub(crate) fn ident_name(i: &Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_lowercase()
    }
}

/// The identifiers of a name (`a.b.c`).
pub(crate) fn name_parts(name: &ObjectName) -> Result<Vec<String>> {
    name.0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => Ok(ident_name(i)),
            ObjectNamePart::Function(_) => Err(SqlError::unsupported("a function as a name")),
        })
        .collect()
}

/// A user table's name: `t` or `public.t`.
pub(crate) fn table_name(name: &ObjectName) -> Result<String> {
    match name_parts(name)?.as_slice() {
        [t] => Ok(t.clone()),
        [s, t] if s == "public" => Ok(t.clone()),
        _ => Err(SqlError::new(
            SqlState::INVALID_SCHEMA_NAME,
            format!("schema of \"{name}\" does not exist (quire has only \"public\")"),
        )),
    }
}

/// `pg_temp` or `pg_temp_N`: the session's temporary schema.
fn is_temp_schema(schema: &str) -> bool {
    schema == "pg_temp"
        || schema
            .strip_prefix("pg_temp_")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn multiple_pkeys(table: &str) -> SqlError {
    SqlError::new(
        SqlState::INVALID_TABLE_DEFINITION,
        format!("multiple primary keys for table \"{table}\" are not allowed"),
    )
}

/// A statement's kind for the 0A000 message ("CREATE VIEW", "MERGE", ...).
fn statement_kind(stmt: &Statement) -> String {
    let text = stmt.to_string();
    let words: Vec<&str> = text.split_whitespace().take(2).collect();
    let kind = match words.as_slice() {
        [a, b] if ["CREATE", "DROP", "ALTER"].contains(&a.to_uppercase().as_str()) => {
            format!("{a} {b}")
        }
        [a, ..] => (*a).to_string(),
        [] => "this statement".into(),
    };
    kind.to_uppercase()
}

fn key_columns(columns: &[ColumnInfo], cols: &[ast::IndexColumn]) -> Result<Vec<usize>> {
    cols.iter()
        .map(|ic| {
            let AstExpr::Identifier(id) = &ic.column.expr else {
                return Err(SqlError::unsupported("an expression in a key"));
            };
            let n = ident_name(id);
            columns
                .iter()
                .position(|c| c.name == n && !c.dropped)
                .ok_or_else(|| {
                    SqlError::new(
                        SqlState::UNDEFINED_COLUMN,
                        format!("column \"{n}\" named in key does not exist"),
                    )
                })
        })
        .collect()
}

impl<'t> Binder<'t> {
    fn new(tx: &'t Transaction, hints: &[SqlType]) -> Self {
        Binder {
            tx,
            params: hints.to_vec(),
            outer: Vec::new(),
            returning_out: None,
            agg: None,
            agg_probe: None,
            in_aggregate: false,
            win: None,
            in_window: false,
            srf: None,
            clause: None,
            tables: None,
            ctes: Vec::new(),
            next_cte: 0,
            lowest_outer_ref: usize::MAX,
            sublinks: 0,
            outer_joins: 0,
            relations_read: None,
            views_open: Vec::new(),
            star_target: None,
            star_items: None,
        }
    }

    /// Sets the clause being bound (see `clause`), returning the one it replaces.
    fn set_clause(&mut self, clause: Option<&'static str>) -> Option<&'static str> {
        std::mem::replace(&mut self.clause, clause)
    }

    /// The engine name of the table a statement's `name` means: `public.t`, `pg_temp.t` (the
    /// session's temporary table), or `t` (the session's temporary table of that name if
    /// there is one, as PostgreSQL searches `pg_temp` first; else the permanent one).
    fn rel_name(&self, name: &ObjectName) -> Result<String> {
        let parts = name_parts(name)?;
        let (temp_only, t) = match parts.as_slice() {
            [t] => (false, t),
            [s, t] if s == "public" => {
                catalog::check_not_reserved(t)?;
                return Ok(t.clone());
            }
            [s, t] if is_temp_schema(s) => (true, t),
            _ => return table_name(name),
        };
        catalog::check_not_reserved(t)?;
        let Some((cache, _)) = self.tables else {
            return Ok(t.clone());
        };
        let cache = cache.borrow();
        if temp_only {
            Ok(cache.temp.engine_name(t))
        } else {
            cache.temp.resolve(self.tx, t)
        }
    }

    /// The table `name` means ([`Binder::rel_name`], [`Binder::table`]).
    fn table_of(&self, name: &ObjectName) -> Result<TableInfo> {
        self.table(&self.rel_name(name)?)
    }

    /// The table named `name` (see [`catalog::lookup`]), through the session's cache when
    /// there is one.
    fn table(&self, name: &str) -> Result<TableInfo> {
        match self.tables {
            Some((cache, generation)) => catalog::lookup_cached(self.tx, cache, generation, name),
            None => catalog::lookup(self.tx, name),
        }
    }
}

impl Binder<'_> {
    /// LOCK [TABLE] names [IN mode MODE] [NOWAIT]; ACCESS EXCLUSIVE when no mode is named,
    /// as in PostgreSQL.
    fn lock(&self, lock: &ast::Lock) -> Result<Plan> {
        use ast::LockTableMode as M;
        use quire_engine::LockMode as L;
        let mode = match lock.lock_mode {
            None | Some(M::AccessExclusive) => L::AccessExclusive,
            Some(M::AccessShare) => L::AccessShare,
            Some(M::RowShare) => L::RowShare,
            Some(M::RowExclusive) => L::RowExclusive,
            Some(M::ShareUpdateExclusive) => L::ShareUpdateExclusive,
            Some(M::Share) => L::Share,
            Some(M::ShareRowExclusive) => L::ShareRowExclusive,
            Some(M::Exclusive) => L::Exclusive,
        };
        let mut tables = Vec::with_capacity(lock.tables.len());
        for t in &lock.tables {
            // As written, for the messages; the engine's name may be a temp table's.
            let written = name_parts(&t.name)?.pop().unwrap_or_default();
            let oid = catalog::find(self.tx, &self.rel_name(&t.name)?)?.ok_or_else(|| {
                SqlError::new(
                    SqlState::UNDEFINED_TABLE,
                    format!("relation \"{written}\" does not exist"),
                )
            })?;
            tables.push((written, oid));
        }
        Ok(Plan::Lock {
            tables,
            mode,
            nowait: lock.nowait,
        })
    }

    fn statement(&mut self, stmt: &Statement) -> Result<Plan> {
        crate::stack::check_stack_depth()?;
        match stmt {
            s if is_transaction_control(s) => bind_transaction_control(s),
            Statement::CreateTable(ct) => self.create_table(ct),
            Statement::CreateSequence {
                temporary,
                if_not_exists,
                name,
                sequence_options,
            } => {
                if *temporary {
                    return Err(SqlError::unsupported("CREATE TEMPORARY SEQUENCE"));
                }
                let name = table_name(name)?;
                catalog::check_not_reserved(&name)?;
                Ok(Plan::CreateSequence {
                    options: crate::sequence::options(sequence_options)?,
                    name,
                    if_not_exists: *if_not_exists,
                })
            }
            Statement::Drop {
                object_type: ObjectType::Sequence,
                if_exists,
                names,
                cascade: false,
                ..
            } => Ok(Plan::DropSequence {
                names: names.iter().map(table_name).collect::<Result<_>>()?,
                if_exists: *if_exists,
            }),
            Statement::Drop {
                object_type: ObjectType::Table,
                if_exists,
                names,
                cascade,
                ..
            } => {
                let names = names
                    .iter()
                    .map(|n| self.rel_name(n))
                    .collect::<Result<_>>()?;
                Ok(Plan::DropTable {
                    names,
                    if_exists: *if_exists,
                    cascade: *cascade,
                })
            }
            Statement::CreateView(cv) => self.create_view(cv),
            Statement::Drop {
                object_type: ObjectType::View,
                if_exists,
                names,
                cascade,
                ..
            } => view::drop_view(names, *if_exists, *cascade),
            Statement::Drop {
                object_type: ObjectType::Index,
                if_exists,
                names,
                cascade: false,
                ..
            } => {
                let names: Vec<String> = names.iter().map(table_name).collect::<Result<_>>()?;
                for n in &names {
                    // quire's catalog indexes (`quire_roles_name` finds every login's role).
                    catalog::check_not_reserved(n)?;
                }
                Ok(Plan::DropIndex {
                    names,
                    if_exists: *if_exists,
                })
            }
            Statement::CreateIndex(ci) => self.create_index(ci),
            Statement::Comment {
                object_type,
                object_name,
                comment,
                if_exists: false,
            } => self.comment(*object_type, object_name, comment.clone()),
            Statement::AlterTable(at) => self.alter_table(at),
            Statement::Truncate(t) => {
                if t.partitions.is_some() {
                    return Err(SqlError::unsupported("TRUNCATE ... PARTITION"));
                }
                let tables = t
                    .table_names
                    .iter()
                    .map(|n| self.table_of(&n.name))
                    .collect::<Result<_>>()?;
                let restart_identity =
                    matches!(t.identity, Some(ast::TruncateIdentityOption::Restart));
                Ok(Plan::Truncate {
                    tables,
                    restart_identity,
                    cascade: matches!(t.cascade, Some(ast::CascadeOption::Cascade)),
                })
            }
            Statement::Lock(lock) => self.lock(lock),
            Statement::Insert(ins) => self.insert(ins),
            Statement::Query(q)
                if matches!(
                    &*q.body,
                    SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_)
                ) =>
            {
                self.dml_with(q)
            }
            Statement::Query(q) => {
                if let Some(plan) = self.select_into(q)? {
                    return Ok(plan);
                }
                if !q.locks.is_empty() {
                    return self.select_for_update(q);
                }
                let (node, out) = self.query(q)?;
                Ok(Plan::Query {
                    node,
                    out: out.into(),
                })
            }
            Statement::Update(u) => self.update(u),
            Statement::Delete(d) => self.delete(d),
            Statement::Explain {
                statement,
                analyze: false,
                ..
            } => {
                let plan = self.statement(statement)?;
                if !matches!(
                    plan,
                    Plan::Query { .. }
                        | Plan::Update { .. }
                        | Plan::Delete { .. }
                        | Plan::Insert { .. }
                ) {
                    return Err(SqlError::unsupported("EXPLAIN of this statement"));
                }
                Ok(Plan::Explain(Box::new(plan)))
            }
            Statement::Explain { analyze: true, .. } => {
                Err(SqlError::unsupported("EXPLAIN ANALYZE"))
            }
            Statement::Set(set) => set_statement(set),
            Statement::ShowVariable { variable } => {
                let name = variable
                    .iter()
                    .map(ident_name)
                    .collect::<Vec<_>>()
                    .join(" ");
                Ok(Plan::Show(name))
            }
            Statement::Reset(r) => Ok(Plan::Set {
                name: match &r.reset {
                    ast::Reset::ALL => "all".into(),
                    ast::Reset::ConfigurationParameter(n) => name_parts(n)?.join("."),
                    ast::Reset::SessionAuthorization => "session_authorization".into(),
                },
                value: None,
                local: false,
            }),
            other => Err(SqlError::unsupported(statement_kind(other))),
        }
    }

    fn select_for_update(&mut self, q: &ast::Query) -> Result<Plan> {
        let unsupported = || {
            SqlError::unsupported(
                "SELECT ... FOR UPDATE other than of one table (no joins, grouping, WITH or \
                 WITH TIES)",
            )
        };
        let SetExpr::Select(sel) = &*q.body else {
            return Err(unsupported());
        };
        let simple = q.with.is_none()
            && sel.distinct.is_none()
            && sel.having.is_none()
            && matches!(&sel.group_by, ast::GroupByExpr::Expressions(g, m) if g.is_empty() && m.is_empty());
        let [twj] = sel.from.as_slice() else {
            return Err(unsupported());
        };
        let TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } = &twj.relation
        else {
            return Err(unsupported());
        };
        if !simple || !twj.joins.is_empty() {
            return Err(unsupported());
        }
        let table = self.table_of(name)?;
        let alias = alias.as_ref().map(|a| ident_name(&a.name));
        let (rows, scope) = self.target_rows(&table, alias.as_deref(), &[])?;
        let (scan, recheck) = self.target_scan(rows, &scope, sel.selection.as_ref())?;
        let (exprs, out) = self.select_list(&sel.projection, &scope)?;
        let order = match &q.order_by {
            Some(ob) => self.lock_order(ob, &scope, &exprs, &out)?,
            None => Vec::new(),
        };
        let limit = self.limit_spec(q)?;
        if limit.as_ref().is_some_and(|l| l.with_ties) {
            return Err(unsupported());
        }
        let (offset, count) = limit.map_or((None, None), |l| (l.offset, l.count));
        Ok(Plan::SelectForUpdate {
            table,
            scan,
            recheck,
            exprs,
            out: out.into(),
            order,
            offset,
            count,
            wait: row_wait(&q.locks),
        })
    }

    /// SELECT ... FOR UPDATE's ORDER BY, as keys over the scanned rows: an output column's
    /// expression, or an expression over the table.
    fn lock_order(
        &mut self,
        ob: &ast::OrderBy,
        scope: &Scope,
        exprs: &[Expr],
        out: &[OutColumn],
    ) -> Result<Vec<crate::nodes::SortKey>> {
        let mut keys = Vec::new();
        for (target, descending, nulls_first) in query::order_items(ob, out)? {
            let (expr, ty) = match target {
                query::OrderTarget::Output(i) => match (exprs.get(i), out.get(i)) {
                    (Some(e), Some(o)) => (e.clone(), o.ty),
                    _ => return Err(SqlError::internal("an ORDER BY position past the list")),
                },
                query::OrderTarget::Expr(a) => self.expr(a, scope)?,
            };
            keys.push(crate::nodes::SortKey {
                expr,
                descending,
                nulls_first,
                order: crate::nodes::KeyOrder::of(ty),
            });
        }
        Ok(keys)
    }

    fn create_table(&mut self, ct: &ast::CreateTable) -> Result<Plan> {
        if ct.like.is_some() || ct.external {
            return Err(SqlError::unsupported("CREATE TABLE ... LIKE or EXTERNAL"));
        }
        let name = self.new_table_name(&ct.name, ct.temporary, ct.on_commit.as_ref())?;
        if let Some(q) = &ct.query {
            let names: Vec<String> = ct.columns.iter().map(|c| ident_name(&c.name)).collect();
            let with_data = ct.with_data.is_none_or(|w| w.data);
            return self.create_table_as(name, ct.if_not_exists, &names, q, with_data);
        }
        let mut columns: Vec<ColumnInfo> = Vec::new();
        let mut pkey: Option<Vec<usize>> = None;
        let mut uniques = Vec::new();
        let mut serials = Vec::new();
        let mut checks = Vec::new();
        let mut foreign_keys = Vec::new();
        for (i, c) in ct.columns.iter().enumerate() {
            let cname = ident_name(&c.name);
            if columns.iter().any(|x| x.name == cname) {
                return Err(SqlError::new(
                    SqlState::DUPLICATE_COLUMN,
                    format!("column \"{cname}\" specified more than once"),
                ));
            }
            let mut def = self.column_def(&name, c)?;
            if let Some(options) = def.sequence.take() {
                serials.push((i, options));
            }
            if def.primary {
                if pkey.is_some() {
                    return Err(multiple_pkeys(&name));
                }
                pkey = Some(vec![i]);
            }
            if def.unique {
                uniques.push(vec![i]);
            }
            checks.extend(def.checks);
            foreign_keys.extend(def.foreign_keys);
            columns.push(def.column);
        }
        for c in &ct.constraints {
            match c {
                TableConstraint::PrimaryKey(pk) => {
                    if pkey.is_some() {
                        return Err(multiple_pkeys(&name));
                    }
                    let key = key_columns(&columns, &pk.columns)?;
                    for &k in &key {
                        columns[k].not_null = true;
                    }
                    pkey = Some(key);
                }
                TableConstraint::Unique(u) => uniques.push(key_columns(&columns, &u.columns)?),
                TableConstraint::Check(c) => {
                    checks.push((c.name.as_ref().map(ident_name), &*c.expr));
                }
                TableConstraint::ForeignKey(fk) => foreign_keys.push(fk.clone()),
                other => return Err(SqlError::unsupported(format!("table constraint {other}"))),
            }
        }
        let checks = self.new_table_checks(&name, &columns, checks)?;
        let on = foreign_key::Referencing::New {
            name: &name,
            columns: &columns,
            keys: pkey.iter().chain(&uniques).cloned().collect(),
        };
        let mut taken: Vec<String> = checks.iter().map(|c| c.name.clone()).collect();
        let foreign_keys = foreign_keys
            .iter()
            .map(|fk| self.new_foreign_key(&on, fk, &mut taken))
            .collect::<Result<Vec<_>>>()?;
        Ok(Plan::CreateTable {
            name,
            if_not_exists: ct.if_not_exists,
            columns,
            pkey,
            uniques,
            serials,
            checks,
            foreign_keys,
        })
    }

    /// The engine name of the table CREATE TABLE makes: a temporary table's (TEMP, or named
    /// in `pg_temp`) in the session's temporary namespace, noted there with its ON COMMIT.
    fn new_table_name(
        &self,
        name: &ObjectName,
        temporary: bool,
        on_commit: Option<&ast::OnCommit>,
    ) -> Result<String> {
        let parts = name_parts(name)?;
        let in_temp_schema = matches!(parts.as_slice(), [s, _] if is_temp_schema(s));
        if !(temporary || in_temp_schema) {
            if on_commit.is_some() {
                return Err(SqlError::new(
                    SqlState::INVALID_TABLE_DEFINITION,
                    "ON COMMIT can only be used on temporary tables",
                ));
            }
            let name = table_name(name)?;
            catalog::check_not_reserved(&name)?;
            return Ok(name);
        }
        let t = match parts.as_slice() {
            [t] => t,
            [s, t] if is_temp_schema(s) => t,
            [_, _] => {
                return Err(SqlError::new(
                    SqlState::INVALID_TABLE_DEFINITION,
                    "cannot create temporary relation in non-temporary schema",
                ))
            }
            _ => return table_name(name),
        };
        catalog::check_not_reserved(t)?;
        let Some((cache, _)) = self.tables else {
            return Err(SqlError::unsupported("a temporary table outside a session"));
        };
        let on_commit = match on_commit {
            None | Some(ast::OnCommit::PreserveRows) => catalog::OnCommit::PreserveRows,
            Some(ast::OnCommit::DeleteRows) => catalog::OnCommit::DeleteRows,
            Some(ast::OnCommit::Drop) => catalog::OnCommit::Drop,
        };
        let mut cache = cache.borrow_mut();
        let name = cache.temp.engine_name(t);
        if catalog::find(self.tx, &name)?.is_none() {
            cache.temp.created(&name, on_commit);
        }
        Ok(name)
    }

    /// CREATE TABLE `name` [(`names`)] AS `q` and SELECT ... INTO: the table's columns are the
    /// query's (named by `names` first), an untyped literal's as `text`, as PostgreSQL's.
    fn create_table_as(
        &mut self,
        name: String,
        if_not_exists: bool,
        names: &[String],
        q: &ast::Query,
        with_data: bool,
    ) -> Result<Plan> {
        let (query, out) = self.query(q)?;
        if names.len() > out.len() {
            return Err(SqlError::new(
                SqlState::SYNTAX_ERROR,
                "too many column names were specified",
            ));
        }
        let mut columns: Vec<ColumnInfo> = Vec::with_capacity(out.len());
        for (i, o) in out.iter().enumerate() {
            let cname = names.get(i).unwrap_or(&o.name).clone();
            if columns.iter().any(|c| c.name == cname) {
                return Err(SqlError::new(
                    SqlState::DUPLICATE_COLUMN,
                    format!("column \"{cname}\" specified more than once"),
                ));
            }
            columns.push(ColumnInfo {
                name: cname,
                ty: if o.ty == SqlType::Unknown {
                    SqlType::Text
                } else {
                    o.ty
                },
                not_null: false,
                default: None,
                dropped: false,
                owned_seq: None,
                identity: None,
            });
        }
        Ok(Plan::CreateTableAs {
            name,
            if_not_exists,
            columns,
            query,
            with_data,
        })
    }

    /// SELECT ... INTO [TEMP] [TABLE] name ...: CREATE TABLE name AS the query without INTO.
    fn select_into(&mut self, q: &ast::Query) -> Result<Option<Plan>> {
        let SetExpr::Select(sel) = &*q.body else {
            return Ok(None);
        };
        let Some(into) = &sel.into else {
            return Ok(None);
        };
        let target = match into.targets.as_slice() {
            [AstExpr::Identifier(i)] => ObjectName::from(vec![i.clone()]),
            [AstExpr::CompoundIdentifier(parts)] => ObjectName::from(parts.clone()),
            _ => return Err(SqlError::unsupported("SELECT INTO other than one table")),
        };
        let name = self.new_table_name(&target, into.temporary, None)?;
        let mut q = q.clone();
        if let SetExpr::Select(sel) = &mut *q.body {
            sel.into = None;
        }
        self.create_table_as(name, false, &[], &q, true).map(Some)
    }

    /// A column definition of CREATE TABLE or ADD COLUMN: its type (`serial` and kin
    /// included), NOT NULL, DEFAULT, and whether it is declared PRIMARY KEY or UNIQUE.
    fn column_def<'a>(&mut self, table: &str, c: &'a ast::ColumnDef) -> Result<ColumnDef<'a>> {
        let serial = serial_type(&c.data_type);
        let mut def = ColumnDef {
            column: ColumnInfo {
                name: ident_name(&c.name),
                ty: match serial {
                    Some(ty) => ty,
                    None => SqlType::from_ast(&c.data_type)?,
                },
                not_null: serial.is_some(),
                default: None,
                dropped: false,
                owned_seq: None,
                identity: None,
            },
            sequence: serial.map(crate::sequence::serial_options),
            primary: false,
            unique: false,
            checks: Vec::new(),
            foreign_keys: Vec::new(),
        };
        for opt in &c.options {
            let col = &mut def.column;
            match &opt.option {
                ColumnOption::Default(e) => {
                    if col.identity.is_some() {
                        return Err(both_default_and_identity(&col.name, table));
                    }
                    if col.default.is_some() || serial.is_some() {
                        return Err(SqlError::new(
                            SqlState::SYNTAX_ERROR,
                            format!(
                                "multiple default values specified for column \"{}\" of table \"{table}\"",
                                col.name
                            ),
                        ));
                    }
                    let checked = col.clone();
                    self.check_default(e, &checked)?;
                    def.column.default = Some(e.to_string());
                }
                ColumnOption::NotNull => col.not_null = true,
                ColumnOption::Null => col.not_null = false,
                ColumnOption::PrimaryKey(_) => {
                    col.not_null = true;
                    def.primary = true;
                }
                ColumnOption::Unique(_) => def.unique = true,
                ColumnOption::Check(c) => {
                    let name = c.name.as_ref().or(opt.name.as_ref()).map(ident_name);
                    def.checks.push((name, &*c.expr));
                }
                ColumnOption::ForeignKey(fk) => {
                    let mut fk = fk.clone();
                    fk.name = fk.name.or_else(|| opt.name.clone());
                    fk.columns = vec![c.name.clone()];
                    def.foreign_keys.push(fk);
                }
                ColumnOption::Generated {
                    generated_as,
                    sequence_options,
                    generation_expr: None,
                    ..
                } => {
                    let kind = match generated_as {
                        ast::GeneratedAs::Always => catalog::Identity::Always,
                        ast::GeneratedAs::ByDefault => catalog::Identity::ByDefault,
                        ast::GeneratedAs::ExpStored => {
                            return Err(SqlError::unsupported("generated columns"))
                        }
                    };
                    if col.default.is_some() || serial.is_some() {
                        return Err(both_default_and_identity(&col.name, table));
                    }
                    let given = sequence_options.as_deref().unwrap_or(&[]);
                    def.sequence = Some(crate::sequence::identity_options(col, given)?);
                    col.identity = Some(kind);
                    col.not_null = true;
                }
                other => return Err(SqlError::unsupported(format!("column option {other}"))),
            }
        }
        Ok(def)
    }

    /// A DEFAULT expression must bind without columns and fit its column's type.
    fn check_default(&mut self, e: &AstExpr, col: &ColumnInfo) -> Result<()> {
        self.assigned(e, col, &Scope::empty()).map_err(|err| {
            if err.sqlstate() == SqlState::UNDEFINED_COLUMN {
                SqlError::new(
                    SqlState::FEATURE_NOT_SUPPORTED,
                    "cannot use column reference in DEFAULT expression",
                )
            } else {
                err
            }
        })?;
        Ok(())
    }

    /// The value a column gets when a statement gives none: its DEFAULT, bound again from
    /// its text, or NULL.
    fn default_of(&mut self, col: &ColumnInfo) -> Result<Expr> {
        match &col.default {
            None => Ok(Expr::Const(Value::Null)),
            Some(text) => {
                let e = crate::parse::expression(text)?;
                self.assigned(&e, col, &Scope::empty())
            }
        }
    }

    /// A row of defaults for `table`.
    fn default_row(&mut self, table: &TableInfo) -> Result<Vec<Expr>> {
        table.columns.iter().map(|c| self.default_of(c)).collect()
    }

    fn create_index(&mut self, ci: &ast::CreateIndex) -> Result<Plan> {
        if ci.predicate.is_some() || !ci.include.is_empty() || ci.concurrently {
            return Err(SqlError::unsupported(
                "CREATE INDEX with WHERE, INCLUDE or CONCURRENTLY",
            ));
        }
        if let Some(method) = ci.using.as_ref().filter(|m| **m != ast::IndexType::BTree) {
            // Built as a B-tree it would not answer what the method is chosen for (a GIN
            // index's `@>`): refused, not silently replaced.
            return Err(SqlError::unsupported(format!(
                "access method \"{}\"",
                method.to_string().to_lowercase()
            )));
        }
        let table = self.table_of(&ci.table_name)?;
        let columns = key_columns(&table.columns, &ci.columns)?;
        let name = ci.name.as_ref().map(table_name).transpose()?;
        if let Some(n) = &name {
            catalog::check_not_reserved(n)?;
        }
        Ok(Plan::CreateIndex {
            name,
            table,
            columns,
            unique: ci.unique,
            if_not_exists: ci.if_not_exists,
        })
    }

    /// COMMENT ON {TABLE | COLUMN | INDEX | SEQUENCE | VIEW | SCHEMA} name IS text.
    fn comment(
        &mut self,
        kind: ast::CommentObject,
        name: &ObjectName,
        text: Option<String>,
    ) -> Result<Plan> {
        use crate::pg_catalog::{CLASS_RELID as PG_CLASS, NAMESPACE_RELID as PG_NAMESPACE};
        let object = match kind {
            ast::CommentObject::Table => {
                let t = self.table_of(name)?;
                (u32::try_from(t.def.oid.0).unwrap_or(0), PG_CLASS, 0)
            }
            ast::CommentObject::Column => {
                let (Some((column, table)), true) = (name.0.split_last(), name.0.len() > 1) else {
                    return Err(SqlError::syntax(format!(
                        "column name must be qualified: {name}"
                    )));
                };
                let column = name_parts(&ObjectName(vec![column.clone()]))?.concat();
                let t = self.table_of(&ObjectName(table.to_vec()))?;
                let attnum = t.column(&column)? + 1;
                let attnum = i32::try_from(attnum).unwrap_or(i32::MAX);
                (u32::try_from(t.def.oid.0).unwrap_or(0), PG_CLASS, attnum)
            }
            ast::CommentObject::Index | ast::CommentObject::Sequence | ast::CommentObject::View => {
                let rel = self.rel_name(name)?;
                let oid = match (kind, self.tx.relation_named(&rel)?) {
                    (ast::CommentObject::Index, Some(quire_engine::Entry::Index(i))) => i.oid,
                    (ast::CommentObject::Sequence, Some(quire_engine::Entry::Sequence(s))) => s.oid,
                    (ast::CommentObject::View, Some(quire_engine::Entry::View(v))) => v.oid,
                    _ => {
                        return Err(SqlError::new(
                            SqlState::UNDEFINED_TABLE,
                            format!(
                                "relation \"{}\" does not exist",
                                catalog::display_name(&rel)
                            ),
                        ))
                    }
                };
                (u32::try_from(oid.0).unwrap_or(0), PG_CLASS, 0)
            }
            ast::CommentObject::Schema => {
                let schema =
                    ident_name(name.0.last().and_then(|p| p.as_ident()).ok_or_else(|| {
                        SqlError::syntax(format!("syntax error at or near \"{name}\""))
                    })?);
                let oid = crate::pg_catalog::namespace_oid(&schema).ok_or_else(|| {
                    SqlError::new(
                        SqlState::UNDEFINED_SCHEMA,
                        format!("schema \"{schema}\" does not exist"),
                    )
                })?;
                (u32::try_from(oid).unwrap_or(0), PG_NAMESPACE, 0)
            }
            other => return Err(SqlError::unsupported(format!("COMMENT ON {other}"))),
        };
        Ok(Plan::Comment { object, text })
    }

    fn alter_table(&mut self, at: &ast::AlterTable) -> Result<Plan> {
        let name = self.rel_name(&at.name)?;
        if at.if_exists && catalog::find(self.tx, &name)?.is_none() {
            return Ok(Plan::Skip {
                tag: "ALTER TABLE",
                notice: format!(
                    "relation \"{}\" does not exist, skipping",
                    catalog::display_name(&name)
                ),
            });
        }
        let table = self.table(&name)?;
        let [op] = at.operations.as_slice() else {
            // Each action is bound when it runs, after the ones before it, so that it sees
            // what they did (ADD COLUMN c, ADD CHECK (c > 0)), as PostgreSQL's passes do.
            let steps = at
                .operations
                .iter()
                .map(|op| format!("ALTER TABLE {} {op}", at.name))
                .collect();
            return Ok(Plan::AlterSteps(steps));
        };
        match op {
            AlterTableOperation::AddColumn {
                if_not_exists,
                column_def,
                column_position: None,
                ..
            } => {
                let def = self.column_def(&table.def.name, column_def)?;
                if def.primary || def.unique {
                    return Err(SqlError::unsupported(
                        "ADD COLUMN ... PRIMARY KEY or UNIQUE (add the column, then the constraint)",
                    ));
                }
                let exists = table.column(&def.column.name).is_ok();
                if exists && !*if_not_exists {
                    return Err(SqlError::new(
                        SqlState::DUPLICATE_COLUMN,
                        format!(
                            "column \"{}\" of relation \"{}\" already exists",
                            def.column.name, table.def.name
                        ),
                    ));
                }
                let mut cols: Vec<(&str, SqlType)> = table
                    .columns
                    .iter()
                    .map(|c| (c.name.as_str(), c.ty))
                    .collect();
                cols.push((def.column.name.as_str(), def.column.ty));
                let scope = Scope::of_named(&cols, Some(&table.def.name));
                let mut taken = table.checks.iter().map(|c| c.name.clone()).collect();
                let checks = def
                    .checks
                    .iter()
                    .map(|(n, e)| {
                        self.new_check(&table.def.name, n.clone(), e, &scope, &mut taken, false)
                    })
                    .collect::<Result<Vec<_>>>()?;
                let mut widened = table.clone();
                widened.columns.push(def.column.clone());
                taken.extend(table.indexes.iter().map(|i| i.name.to_string()));
                taken.extend(table.foreign_keys.iter().map(|f| f.name.clone()));
                let on = foreign_key::Referencing::Existing(&widened);
                let foreign_keys = def
                    .foreign_keys
                    .iter()
                    .map(|fk| self.new_foreign_key(&on, fk, &mut taken))
                    .collect::<Result<Vec<_>>>()?;
                return Ok(Plan::AddColumn {
                    column: def.column,
                    sequence: def.sequence,
                    skip: exists,
                    checks,
                    foreign_keys,
                    table,
                });
            }
            AlterTableOperation::DropColumn {
                column_names,
                if_exists,
                drop_behavior,
                ..
            } => {
                let mut columns = Vec::new();
                for n in column_names {
                    match table.column(&ident_name(n)) {
                        Ok(c) => columns.push(c),
                        Err(_) if *if_exists => {}
                        Err(e) => return Err(e),
                    }
                }
                // PostgreSQL drops the constraints over a dropped column with it.
                let checks = self
                    .bound_checks(&table)?
                    .into_iter()
                    .filter(|c| c.expr.columns().iter().any(|i| columns.contains(i)))
                    .map(|c| c.name)
                    .collect();
                return Ok(Plan::DropColumns {
                    table,
                    columns,
                    checks,
                    cascade: matches!(drop_behavior, Some(ast::DropBehavior::Cascade)),
                });
            }
            _ => {}
        }
        if let AlterTableOperation::AlterColumn { column_name, op } = op {
            let column = table.column(&ident_name(column_name))?;
            let expr = match op {
                ast::AlterColumnOperation::SetDefault { value } => {
                    self.check_default(value, &table.columns[column])?;
                    Some(value.to_string())
                }
                ast::AlterColumnOperation::DropDefault => None,
                ast::AlterColumnOperation::SetNotNull | ast::AlterColumnOperation::DropNotNull => {
                    let not_null = matches!(op, ast::AlterColumnOperation::SetNotNull);
                    return alter_not_null(table, column, not_null);
                }
                ast::AlterColumnOperation::SetDataType {
                    data_type,
                    using: None,
                    ..
                } => {
                    let ty = SqlType::from_ast(data_type)?;
                    if ty.engine_type() != table.columns[column].ty.engine_type() {
                        return Err(SqlError::unsupported(format!(
                            "ALTER COLUMN ... TYPE from {} to {} (a change of the stored type)",
                            table.columns[column].ty.name(),
                            ty.name()
                        )));
                    }
                    return Ok(Plan::SetColumnType { table, column, ty });
                }
                ast::AlterColumnOperation::AddGenerated {
                    generated_as,
                    sequence_options,
                } => {
                    let given = sequence_options.as_deref().unwrap_or(&[]);
                    return add_identity(table, column, *generated_as, given);
                }
                other => return Err(SqlError::unsupported(format!("ALTER COLUMN ... {other}"))),
            };
            return Ok(Plan::SetDefault {
                table,
                column,
                expr,
            });
        }
        self.alter_constraint(table, op)
    }

    /// ALTER TABLE's constraint actions: ADD, DROP and VALIDATE CONSTRAINT.
    fn alter_constraint(&mut self, table: TableInfo, op: &AlterTableOperation) -> Result<Plan> {
        let (constraint, not_valid) = match op {
            AlterTableOperation::AddConstraint {
                constraint,
                not_valid,
            } => (constraint, *not_valid),
            AlterTableOperation::DropConstraint {
                if_exists, name, ..
            } => {
                return Ok(Plan::DropConstraint {
                    table,
                    name: ident_name(name),
                    if_exists: *if_exists,
                })
            }
            AlterTableOperation::RenameConstraint { old_name, new_name } => {
                return Ok(Plan::RenameConstraint {
                    table,
                    from: ident_name(old_name),
                    to: ident_name(new_name),
                })
            }
            AlterTableOperation::ValidateConstraint { name } => {
                let name = ident_name(name);
                if let Some(fk) = table.foreign_keys.iter().find(|f| f.name == name) {
                    let fk = fk.clone();
                    return Ok(Plan::ValidateForeignKey { table, fk });
                }
                let check = self.check_named(&table, &name)?;
                return Ok(Plan::ValidateCheck { table, check });
            }
            _ => return Err(SqlError::unsupported(format!("ALTER TABLE {op}"))),
        };
        match constraint {
            TableConstraint::Check(c) => {
                let scope = Scope::of_table(&table, Some(&table.def.name));
                let mut taken: Vec<String> = table.checks.iter().map(|c| c.name.clone()).collect();
                taken.extend(table.indexes.iter().map(|i| i.name.to_string()));
                taken.extend(table.foreign_keys.iter().map(|f| f.name.clone()));
                let name = c.name.as_ref().map(ident_name);
                let check =
                    self.new_check(&table.def.name, name, &c.expr, &scope, &mut taken, false)?;
                Ok(Plan::AddCheck {
                    table,
                    check,
                    validate: !not_valid,
                })
            }
            TableConstraint::PrimaryKey(pk) => Ok(Plan::AddKey {
                columns: key_columns(&table.columns, &pk.columns)?,
                name: pk.name.as_ref().map(ident_name),
                table,
                primary: true,
            }),
            TableConstraint::Unique(u) => Ok(Plan::AddKey {
                columns: key_columns(&table.columns, &u.columns)?,
                name: u.name.as_ref().map(ident_name),
                table,
                primary: false,
            }),
            TableConstraint::ForeignKey(fk) => {
                let mut taken: Vec<String> = table.checks.iter().map(|c| c.name.clone()).collect();
                taken.extend(table.indexes.iter().map(|i| i.name.to_string()));
                taken.extend(table.foreign_keys.iter().map(|f| f.name.clone()));
                let on = foreign_key::Referencing::Existing(&table);
                let fk = self.new_foreign_key(&on, fk, &mut taken)?;
                Ok(Plan::AddForeignKey {
                    table,
                    fk,
                    validate: !not_valid,
                })
            }
            other => Err(SqlError::unsupported(format!("constraint {other}"))),
        }
    }

    fn insert(&mut self, ins: &ast::Insert) -> Result<Plan> {
        let TableObject::TableName(name) = &ins.table else {
            return Err(SqlError::unsupported("INSERT INTO a table function"));
        };
        if !ins.assignments.is_empty() {
            return Err(SqlError::unsupported("INSERT ... SET"));
        }
        let table = self.table_of(name)?;
        let targets: Vec<usize> = if ins.columns.is_empty() {
            table.visible_columns()
        } else {
            ins.columns
                .iter()
                .map(|c| match c.0.as_slice() {
                    [ObjectNamePart::Identifier(i)] => table.column(&ident_name(i)),
                    _ => Err(SqlError::unsupported("a qualified column name in INSERT")),
                })
                .collect::<Result<_>>()?
        };
        let source = match &ins.source {
            Some(q) => {
                // Without a column list, fewer values fill the first columns and the rest
                // take their defaults, as in PostgreSQL.
                let targets = match (ins.columns.is_empty(), source_width(q)) {
                    (true, Some(w)) if w < targets.len() => &targets[..w],
                    _ => &targets[..],
                };
                let overriding = ins.overriding.as_ref();
                self.insert_source(q, &table, targets, ins.columns.is_empty(), overriding)?
            }
            // DEFAULT VALUES
            None => Node::Values(vec![self.default_row(&table)?]),
        };
        let on_conflict = self.on_conflict(ins.on.as_ref(), &table)?;
        let alias = ins.table_alias.as_ref().map(|a| ident_name(&a.alias));
        let scope = Scope::of_target(&table, alias.as_deref());
        let returning = self.returning(ins.returning.as_deref(), &scope)?;
        let checks = self.bound_checks(&table)?;
        Ok(Plan::Insert {
            table,
            source,
            on_conflict,
            returning,
            checks,
        })
    }

    fn on_conflict(&mut self, on: Option<&ast::OnInsert>, table: &TableInfo) -> Result<OnConflict> {
        let Some(on) = on else {
            return Ok(OnConflict::Error);
        };
        let ast::OnInsert::OnConflict(oc) = on else {
            return Err(SqlError::unsupported("ON DUPLICATE KEY"));
        };
        check_conflict_target(oc, table)?;
        match &oc.action {
            ast::OnConflictAction::DoNothing => Ok(OnConflict::Nothing),
            ast::OnConflictAction::DoUpdate(du) => {
                // The row being updated, then EXCLUDED: the proposed row.
                let mut scope = Scope::of_table(table, Some(&table.def.name));
                scope.append(Scope::of_table(table, Some("excluded")));
                let sets = self.assignments(&du.assignments, table, &scope)?;
                let filter = du
                    .selection
                    .as_ref()
                    .map(|e| self.predicate(e, &scope))
                    .transpose()?;
                Ok(OnConflict::Update { sets, filter })
            }
        }
    }

    /// RETURNING's list, bound over the statement's row (`scope`).
    fn returning(
        &mut self,
        items: Option<&[ast::SelectItem]>,
        scope: &Scope,
    ) -> Result<Option<Vec<Expr>>> {
        let Some(items) = items else {
            return Ok(None);
        };
        let saved = self.set_clause(Some("RETURNING"));
        let list = self.select_list(items, scope);
        self.clause = saved;
        let (exprs, out) = list?;
        self.returning_out = Some(out);
        Ok(Some(exprs))
    }

    /// The rows INSERT inserts: VALUES lists (with DEFAULT), or a query, each row widened to
    /// the table's columns and cast to their types.
    fn insert_source(
        &mut self,
        q: &ast::Query,
        table: &TableInfo,
        targets: &[usize],
        implicit_columns: bool,
        overriding: Option<&ast::InsertOverriding>,
    ) -> Result<Node> {
        let defaults = self.default_row(table)?;
        if let SetExpr::Values(values) = &*q.body {
            let mut rows = Vec::with_capacity(values.rows.len());
            for value_row in &values.rows {
                let value_row = &value_row.content;
                if let Some(run) = value_row.first().and_then(expr::constant_list) {
                    for constants in expr::constant_rows(run) {
                        let constants = constants?;
                        check_insert_width(constants.len(), targets.len())?;
                        let mut row = defaults.clone();
                        for (&pos, (x, ty)) in targets.iter().zip(constants) {
                            if takes_given_value(&table.columns[pos], overriding)? {
                                row[pos] = expr::assign_expr(x, ty, &table.columns[pos])?;
                            }
                        }
                        rows.push(row);
                    }
                    continue;
                }
                check_insert_width(value_row.len(), targets.len())?;
                let mut row = defaults.clone();
                for (&pos, e) in targets.iter().zip(value_row) {
                    let col = &table.columns[pos];
                    if is_default(e) || !takes_given_value(col, overriding)? {
                        continue;
                    }
                    row[pos] = self.assigned(e, col, &Scope::empty())?;
                }
                rows.push(row);
            }
            return Ok(Node::Values(rows));
        }
        let (node, out) = self.query_keeping_unknowns(q)?;
        // Without a column list, fewer columns fill the first ones (see `insert`).
        let targets = if implicit_columns && out.len() < targets.len() {
            &targets[..out.len()]
        } else {
            targets
        };
        check_insert_width(out.len(), targets.len())?;
        let mut exprs = defaults;
        for ((&pos, oc), i) in targets.iter().zip(&out).zip(0..) {
            let col = &table.columns[pos];
            if takes_given_value(col, overriding)? {
                exprs[pos] = expr::assign_expr(Expr::Column(i), oc.ty, col)?;
            }
        }
        Ok(Node::Project {
            input: Box::new(node),
            exprs,
        })
    }

    fn assignments(
        &mut self,
        assignments: &[ast::Assignment],
        table: &TableInfo,
        scope: &Scope,
    ) -> Result<Vec<(usize, Expr)>> {
        let mut sets: Vec<(usize, Expr)> = Vec::new();
        for a in assignments {
            let AssignmentTarget::ColumnName(col) = &a.target else {
                return Err(SqlError::unsupported("assigning a tuple of columns"));
            };
            let n = match col.0.as_slice() {
                [ObjectNamePart::Identifier(i)] => ident_name(i),
                _ => return Err(SqlError::unsupported("a qualified column name in SET")),
            };
            let pos = table.column(&n)?;
            if sets.iter().any(|(p, _)| *p == pos) {
                return Err(SqlError::new(
                    SqlState::SYNTAX_ERROR,
                    format!("multiple assignments to same column \"{n}\""),
                ));
            }
            let col = &table.columns[pos];
            let e = if is_default(&a.value) {
                self.default_of(col)?
            } else if col.identity == Some(catalog::Identity::Always) {
                return Err(SqlError::new(
                    SqlState::GENERATED_ALWAYS,
                    format!("column \"{n}\" can only be updated to DEFAULT"),
                )
                .with_detail(generated_always_detail(&n)));
            } else {
                self.assigned(&a.value, col, scope)?
            };
            sets.push((pos, e));
        }
        Ok(sets)
    }

    fn update(&mut self, u: &ast::Update) -> Result<Plan> {
        if !u.table.joins.is_empty() || u.limit.is_some() {
            return Err(SqlError::unsupported("UPDATE with joins or LIMIT"));
        }
        let TableFactor::Table { name, alias, .. } = &u.table.relation else {
            return Err(SqlError::unsupported("this UPDATE target"));
        };
        let table = self.table_of(name)?;
        let from = match &u.from {
            None => &[][..],
            Some(
                ast::UpdateTableFromKind::AfterSet(f) | ast::UpdateTableFromKind::BeforeSet(f),
            ) => &f[..],
        };
        let alias = alias.as_ref().map(|a| ident_name(&a.name));
        let (rows, scope) = self.target_rows(&table, alias.as_deref(), from)?;
        let saved = self.set_clause(Some("UPDATE"));
        let sets = self.assignments(&u.assignments, &table, &scope);
        self.clause = saved;
        let sets = sets?;
        let (scan, recheck) = self.target_scan(rows, &scope, u.selection.as_ref())?;
        let returning = self.returning(u.returning.as_deref(), &scope)?;
        let checks = self.bound_checks(&table)?;
        Ok(Plan::Update {
            table,
            scan,
            recheck,
            sets,
            returning,
            checks,
        })
    }

    fn delete(&mut self, d: &ast::Delete) -> Result<Plan> {
        if !d.tables.is_empty() || d.limit.is_some() {
            return Err(SqlError::unsupported(
                "DELETE with LIMIT or several targets",
            ));
        }
        let (FromTable::WithFromKeyword(from) | FromTable::WithoutKeyword(from)) = &d.from;
        let [twj] = from.as_slice() else {
            return Err(SqlError::unsupported("DELETE from several tables"));
        };
        let TableFactor::Table { name, alias, .. } = &twj.relation else {
            return Err(SqlError::unsupported("this DELETE target"));
        };
        if !twj.joins.is_empty() {
            return Err(SqlError::unsupported("joins in DELETE"));
        }
        let table = self.table_of(name)?;
        let alias = alias.as_ref().map(|a| ident_name(&a.name));
        let using = d.using.as_deref().unwrap_or_default();
        let (rows, scope) = self.target_rows(&table, alias.as_deref(), using)?;
        let (scan, recheck) = self.target_scan(rows, &scope, d.selection.as_ref())?;
        let returning = self.returning(d.returning.as_deref(), &scope)?;
        Ok(Plan::Delete {
            table,
            scan,
            recheck,
            returning,
        })
    }

    /// The rows UPDATE ... FROM or DELETE ... USING reads: the target's (with their TIDs
    /// after its columns) joined with the other tables', and their scope.
    fn target_rows(
        &mut self,
        table: &TableInfo,
        alias: Option<&str>,
        others: &[ast::TableWithJoins],
    ) -> Result<(Node, Scope)> {
        let mut scope = Scope::of_target(table, alias);
        scope.widen_hidden(1);
        let rows = Node::Relation {
            table: Box::new(table.clone()),
            with_tid: true,
        };
        if others.is_empty() {
            return Ok((rows, scope));
        }
        let (node, other_scope) = self.from(others)?;
        let (left_width, right_width) = (scope.width(), other_scope.width());
        scope.append(other_scope);
        let join = Node::Join {
            kind: crate::nodes::JoinKind::Inner,
            left: Box::new(rows),
            right: Box::new(node),
            on: None,
            left_width,
            right_width,
            lateral: false,
        };
        Ok((join, scope))
    }

    /// The scan of UPDATE's or DELETE's target rows (`rows`), filtered by the WHERE
    /// clause, which is also the recheck of a row a concurrent transaction changed.
    fn target_scan(
        &mut self,
        rows: Node,
        scope: &Scope,
        selection: Option<&AstExpr>,
    ) -> Result<(Node, Option<Expr>)> {
        let saved = self.set_clause(Some("WHERE"));
        let pred = selection.map(|e| self.predicate(e, scope)).transpose();
        self.clause = saved;
        let pred = pred?;
        let scan = match &pred {
            Some(p) => Node::Filter {
                input: Box::new(rows),
                pred: p.clone(),
            },
            None => rows,
        };
        Ok((scan, pred))
    }
}

/// ON CONFLICT's target, PostgreSQL's inference rules: a column list must be the columns of
/// a unique index (in any order; 42P10 otherwise), a constraint must be one of the table's
/// (42704), and DO UPDATE needs one of the two (42601).
fn check_conflict_target(oc: &ast::OnConflict, table: &TableInfo) -> Result<()> {
    match &oc.conflict_target {
        None if matches!(oc.action, ast::OnConflictAction::DoUpdate(_)) => Err(SqlError::syntax(
            "ON CONFLICT DO UPDATE requires inference specification or constraint name",
        )
        .with_hint("For example, ON CONFLICT (column_name).")),
        None => Ok(()),
        Some(ast::ConflictTarget::Columns {
            predicate: Some(_), ..
        }) => Err(SqlError::unsupported("ON CONFLICT with an index predicate")),
        Some(ast::ConflictTarget::Columns { columns, .. }) => {
            let mut wanted = Vec::with_capacity(columns.len());
            for c in columns {
                wanted.push(table.column(&ident_name(c))?);
            }
            wanted.sort_unstable();
            wanted.dedup();
            let matches = |i: &quire_engine::IndexDef| {
                let mut cols: Vec<usize> = i.columns.iter().map(|&c| usize::from(c)).collect();
                cols.sort_unstable();
                i.unique && cols == wanted
            };
            if table.indexes.iter().any(matches) {
                Ok(())
            } else {
                Err(SqlError::new(
                    SqlState::INVALID_COLUMN_REFERENCE,
                    "there is no unique or exclusion constraint matching the ON CONFLICT specification",
                ))
            }
        }
        Some(ast::ConflictTarget::OnConstraint(name)) => {
            let name = table_name(name)?;
            if table.indexes.iter().any(|i| i.unique && *i.name == *name) {
                Ok(())
            } else {
                Err(SqlError::new(
                    SqlState::UNDEFINED_OBJECT,
                    format!(
                        "constraint \"{name}\" for table \"{}\" does not exist",
                        table.def.name
                    ),
                ))
            }
        }
    }
}

/// The width of an INSERT's VALUES (its first row), if that is its source.
fn source_width(q: &ast::Query) -> Option<usize> {
    let SetExpr::Values(v) = &*q.body else {
        return None;
    };
    let first = &v.rows.first()?.content;
    match first.first().and_then(expr::constant_list) {
        Some(run) => crate::literals::Rows::new(run)
            .next()
            .and_then(std::result::Result::ok)
            .map(|row| row.len()),
        None => Some(first.len()),
    }
}

fn check_insert_width(exprs: usize, targets: usize) -> Result<()> {
    if exprs > targets {
        return Err(SqlError::syntax(
            "INSERT has more expressions than target columns",
        ));
    }
    if exprs < targets {
        return Err(SqlError::syntax(
            "INSERT has more target columns than expressions",
        ));
    }
    Ok(())
}

/// A column definition as [`Binder::column_def`] reads it.
struct ColumnDef<'a> {
    column: ColumnInfo,
    /// A `serial` or identity column: the options of the sequence it gets.
    sequence: Option<quire_engine::SeqOptions>,
    primary: bool,
    unique: bool,
    /// Its CHECK constraints (name, expression), bound once the table's columns are known.
    checks: Vec<(Option<String>, &'a AstExpr)>,
    /// Its REFERENCES clauses, as table constraints over the column.
    foreign_keys: Vec<ast::ForeignKeyConstraint>,
}

/// Whether INSERT stores the value it gives column `col` (not DEFAULT): not under
/// OVERRIDING USER VALUE for an identity column; a GENERATED ALWAYS one refuses it (428C9)
/// without OVERRIDING SYSTEM VALUE.
fn takes_given_value(col: &ColumnInfo, overriding: Option<&ast::InsertOverriding>) -> Result<bool> {
    match (col.identity, overriding) {
        (Some(_), Some(ast::InsertOverriding::User)) => Ok(false),
        (Some(catalog::Identity::Always), None) => Err(SqlError::new(
            SqlState::GENERATED_ALWAYS,
            format!(
                "cannot insert a non-DEFAULT value into column \"{}\"",
                col.name
            ),
        )
        .with_detail(generated_always_detail(&col.name))
        .with_hint("Use OVERRIDING SYSTEM VALUE to override.")),
        _ => Ok(true),
    }
}

fn generated_always_detail(column: &str) -> String {
    format!("Column \"{column}\" is an identity column defined as GENERATED ALWAYS.")
}

/// ALTER COLUMN ... SET / DROP NOT NULL (a primary key's and an identity column's NOT
/// NULL stay, as PostgreSQL's errors say).
fn alter_not_null(table: TableInfo, column: usize, not_null: bool) -> Result<Plan> {
    let col = &table.columns[column];
    if !not_null {
        if col.identity.is_some() {
            return Err(SqlError::new(
                SqlState::SYNTAX_ERROR,
                format!(
                    "column \"{}\" of relation \"{}\" is an identity column",
                    col.name, table.def.name
                ),
            ));
        }
        let in_pkey = table
            .pkey
            .as_ref()
            .is_some_and(|(_, k)| k.contains(&column));
        if in_pkey {
            return Err(SqlError::new(
                SqlState::INVALID_TABLE_DEFINITION,
                format!("column \"{}\" is in a primary key", col.name),
            ));
        }
    }
    Ok(Plan::SetNotNull {
        table,
        column,
        not_null,
    })
}

/// ALTER COLUMN ... ADD GENERATED ... AS IDENTITY: the column must be NOT NULL, without a
/// DEFAULT, and not an identity column already (55000, as PostgreSQL).
fn add_identity(
    table: TableInfo,
    column: usize,
    generated_as: Option<ast::GeneratedAs>,
    given: &[ast::SequenceOptions],
) -> Result<Plan> {
    let col = &table.columns[column];
    let refuse = |what: &str| {
        Err(SqlError::new(
            SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "column \"{}\" of relation \"{}\" {what}",
                col.name, table.def.name
            ),
        ))
    };
    if !col.not_null {
        return refuse("must be declared NOT NULL before identity can be added");
    }
    if col.identity.is_some() {
        return refuse("is already an identity column");
    }
    if col.default.is_some() {
        return refuse("already has a default value");
    }
    let kind = match generated_as {
        Some(ast::GeneratedAs::ByDefault) => catalog::Identity::ByDefault,
        _ => catalog::Identity::Always,
    };
    let options = crate::sequence::identity_options(col, given)?;
    Ok(Plan::AddIdentity {
        table,
        column,
        kind,
        options,
    })
}

/// 42601: a column with both DEFAULT and GENERATED ... AS IDENTITY (or `serial`).
fn both_default_and_identity(column: &str, table: &str) -> SqlError {
    SqlError::new(
        SqlState::SYNTAX_ERROR,
        format!(
            "both default and identity specified for column \"{column}\" of table \"{}\"",
            catalog::display_name(table)
        ),
    )
}

/// `serial`, `bigserial`, `smallserial` (and `serial2/4/8`): the column's type.
fn serial_type(ty: &ast::DataType) -> Option<SqlType> {
    let ast::DataType::Custom(name, mods) = ty else {
        return None;
    };
    if !mods.is_empty() {
        return None;
    }
    let last = name.0.last()?.to_string().to_lowercase();
    match last.as_str() {
        "serial" | "serial4" => Some(SqlType::Int4),
        "bigserial" | "serial8" => Some(SqlType::Int8),
        "smallserial" | "serial2" => Some(SqlType::Int2),
        _ => None,
    }
}

fn is_default(e: &AstExpr) -> bool {
    matches!(e, AstExpr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"))
}

fn isolation(modes: &[TransactionMode]) -> Result<IsolationLevel> {
    let mut isolation = IsolationLevel::ReadCommitted;
    for m in modes {
        match m {
            TransactionMode::IsolationLevel(
                TransactionIsolationLevel::ReadCommitted
                | TransactionIsolationLevel::ReadUncommitted,
            ) => isolation = IsolationLevel::ReadCommitted,
            TransactionMode::IsolationLevel(TransactionIsolationLevel::RepeatableRead) => {
                isolation = IsolationLevel::RepeatableRead;
            }
            TransactionMode::AccessMode(ast::TransactionAccessMode::ReadWrite) => {}
            other => return Err(SqlError::unsupported(format!("transaction mode {other}"))),
        }
    }
    Ok(isolation)
}

/// SET name = value / SET name TO DEFAULT / SET TIME ZONE ...
fn set_statement(set: &ast::Set) -> Result<Plan> {
    match set {
        ast::Set::SingleAssignment {
            variable,
            values,
            scope,
            ..
        } => {
            let name = name_parts(variable)?.join(".");
            let value = match values.as_slice() {
                [AstExpr::Identifier(i)] if i.value.eq_ignore_ascii_case("default") => None,
                vals => Some(vals.iter().map(setting_text).collect::<Vec<_>>().join(", ")),
            };
            let local = matches!(scope, Some(ast::ContextModifier::Local));
            Ok(Plan::Set { name, value, local })
        }
        ast::Set::SetTimeZone { value, local } => Ok(Plan::Set {
            name: "timezone".into(),
            value: Some(setting_text(value)),
            local: *local,
        }),
        other => Err(SqlError::unsupported(format!("{other}"))),
    }
}

/// A SET value as text: a quoted string's contents, a word or number as written.
fn setting_text(e: &AstExpr) -> String {
    match e {
        AstExpr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
            other => other.to_string(),
        },
        AstExpr::Identifier(i) => i.value.clone(),
        other => other.to_string(),
    }
}

/// The wait policy of FOR UPDATE / FOR SHARE clauses: NOWAIT if any says it, else SKIP
/// LOCKED if any says it (PostgreSQL's strongest-wins rule), else wait.
fn row_wait(locks: &[ast::LockClause]) -> quire_engine::RowWait {
    use quire_engine::RowWait;
    let says = |n: ast::NonBlock| locks.iter().any(|l| l.nonblock == Some(n));
    if says(ast::NonBlock::Nowait) {
        RowWait::NoWait
    } else if says(ast::NonBlock::SkipLocked) {
        RowWait::Skip
    } else {
        RowWait::Block
    }
}
