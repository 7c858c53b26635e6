//! Statements as the analyzer gives them: [`Plan`], with their parameters' types and
//! output columns ([`Bound`]).

use std::sync::Arc;

use quire_engine::{IsolationLevel, RowWait};

use super::expr::Expr;
use super::plan::{Node, SortKey};
use crate::catalog::{ColumnInfo, ForeignKey, TableInfo};
use crate::error::Result;
use crate::types::SqlType;

/// An output column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutColumn {
    pub name: String,
    pub ty: SqlType,
}

/// A statement's output columns, shared: a kept plan hands them to every execution and
/// Describe without copying their names.
pub type OutColumns = Arc<[OutColumn]>;

/// What INSERT does with a row whose key already exists.
#[derive(Clone, Debug)]
pub(crate) enum OnConflict {
    Error,
    Nothing,
    /// DO UPDATE SET ...: the assignments see the existing row as columns `0..n` and the
    /// proposed row (`EXCLUDED`) as columns `n..2n`.
    Update {
        sets: Vec<(usize, Expr)>,
        filter: Option<Expr>,
    },
}

/// A CHECK constraint bound over its table's row, verified on each row written.
#[derive(Clone, Debug)]
pub(crate) struct BoundCheck {
    pub name: String,
    pub expr: Expr,
}

/// A CHECK constraint to record: its name, its expression as SQL text, and bound over the
/// table's row as it will be (for the rows that exist to be verified).
#[derive(Clone, Debug)]
pub(crate) struct NewCheck {
    pub name: String,
    pub expr: String,
    pub bound: Expr,
}

/// A FOREIGN KEY constraint to record. Its oid is given when it is recorded; in CREATE
/// TABLE its `table` is the new table's, and so is its `ref_table` when `references_itself`.
#[derive(Clone, Debug)]
pub(crate) struct NewForeignKey {
    pub fk: ForeignKey,
    pub references_itself: bool,
}

#[derive(Clone, Debug)]
pub(crate) enum Plan {
    Begin(IsolationLevel),
    Commit,
    Rollback,
    CreateTable {
        name: String,
        if_not_exists: bool,
        columns: Vec<ColumnInfo>,
        pkey: Option<Vec<usize>>,
        uniques: Vec<Vec<usize>>,
        /// `serial` and identity columns: each gets a sequence of its own, with these
        /// options.
        serials: Vec<(usize, quire_engine::SeqOptions)>,
        checks: Vec<NewCheck>,
        foreign_keys: Vec<NewForeignKey>,
    },
    /// CREATE TABLE ... AS and SELECT ... INTO: a table of `columns`, filled with the rows
    /// of `query` (logical until planned) unless WITH NO DATA (`with_data` false).
    CreateTableAs {
        name: String,
        if_not_exists: bool,
        columns: Vec<ColumnInfo>,
        query: Node,
        with_data: bool,
    },
    /// CREATE [OR REPLACE] VIEW.
    CreateView {
        name: String,
        or_replace: bool,
        body: crate::catalog::view::ViewBody,
    },
    /// DROP VIEW; CASCADE drops the views that read them too.
    DropView {
        names: Vec<String>,
        if_exists: bool,
        cascade: bool,
    },
    /// DROP TABLE; CASCADE drops the foreign keys of other tables that reference them.
    DropTable {
        names: Vec<String>,
        if_exists: bool,
        cascade: bool,
    },
    /// TRUNCATE; RESTART IDENTITY resets the sequences the tables' columns own; CASCADE
    /// truncates the tables whose foreign keys reference them too.
    Truncate {
        tables: Vec<TableInfo>,
        restart_identity: bool,
        cascade: bool,
    },
    CreateSequence {
        name: String,
        if_not_exists: bool,
        options: quire_engine::SeqOptions,
    },
    DropSequence {
        names: Vec<String>,
        if_exists: bool,
    },
    /// LOCK TABLE: `mode` on each table until the end of the transaction block.
    Lock {
        /// Each table's name and oid, found without taking a lock on it (LOCK takes its
        /// own, NOWAIT or waiting).
        tables: Vec<(String, quire_engine::TableId)>,
        mode: quire_engine::LockMode,
        nowait: bool,
    },
    CreateIndex {
        name: Option<String>,
        table: TableInfo,
        columns: Vec<usize>,
        unique: bool,
        if_not_exists: bool,
    },
    DropIndex {
        names: Vec<String>,
        if_exists: bool,
    },
    /// ALTER TABLE ... ADD COLUMN: rows that exist get the column's DEFAULT (evaluated per
    /// row) or NULL. With IF NOT EXISTS and the column there, `skip` says so.
    AddColumn {
        table: TableInfo,
        column: ColumnInfo,
        /// A `serial` or identity column's sequence options.
        sequence: Option<quire_engine::SeqOptions>,
        skip: bool,
        /// The column's CHECK constraints, verified over the rows that exist.
        checks: Vec<NewCheck>,
        /// The column's REFERENCES clauses, verified over the rows that exist.
        foreign_keys: Vec<NewForeignKey>,
    },
    /// ALTER TABLE ... ADD CONSTRAINT ... CHECK: verified over the rows that exist unless
    /// NOT VALID (`validate` false).
    AddCheck {
        table: TableInfo,
        check: NewCheck,
        validate: bool,
    },
    /// ALTER TABLE ... ADD [CONSTRAINT name] FOREIGN KEY: verified over the rows that exist
    /// unless NOT VALID (`validate` false).
    AddForeignKey {
        table: TableInfo,
        fk: NewForeignKey,
        validate: bool,
    },
    /// ALTER TABLE ... VALIDATE CONSTRAINT of a NOT VALID foreign key.
    ValidateForeignKey {
        table: TableInfo,
        fk: ForeignKey,
    },
    /// ALTER TABLE ... VALIDATE CONSTRAINT: a NOT VALID check verified and marked valid.
    ValidateCheck {
        table: TableInfo,
        check: BoundCheck,
    },
    /// ALTER TABLE ... RENAME CONSTRAINT (a CHECK constraint).
    RenameConstraint {
        table: TableInfo,
        from: String,
        to: String,
    },
    /// ALTER TABLE ... DROP CONSTRAINT: a CHECK constraint, or a unique index that is a
    /// constraint (primary key, UNIQUE).
    DropConstraint {
        table: TableInfo,
        name: String,
        if_exists: bool,
    },
    /// ALTER TABLE ... DROP COLUMN (positions).
    DropColumns {
        table: TableInfo,
        columns: Vec<usize>,
        /// The CHECK constraints over those columns, dropped with them.
        checks: Vec<String>,
        /// CASCADE: the foreign keys of other tables that reference those columns go too.
        cascade: bool,
    },
    /// ALTER TABLE ... ALTER COLUMN ... SET DEFAULT / DROP DEFAULT (`expr` None).
    SetDefault {
        table: TableInfo,
        column: usize,
        expr: Option<String>,
    },
    /// Nothing to do but tell the client so (ALTER TABLE IF EXISTS of a missing table).
    Skip {
        tag: &'static str,
        notice: String,
    },
    /// ALTER TABLE with several actions: each one's statement text (`ALTER TABLE t <action>`),
    /// bound and run in order when the statement runs, so that each sees the ones before.
    AlterSteps(Vec<String>),
    /// ALTER TABLE ... ALTER COLUMN ... [SET DATA] TYPE to a type stored as the column's is
    /// (varchar(n) to varchar(m) or text, integer to bigint): each value verified.
    SetColumnType {
        table: TableInfo,
        column: usize,
        ty: SqlType,
    },
    /// ALTER TABLE ... ALTER COLUMN ... SET / DROP NOT NULL.
    SetNotNull {
        table: TableInfo,
        column: usize,
        not_null: bool,
    },
    /// COMMENT ON: the object (its oid, its catalog's oid, its column or 0) and the text
    /// (`None` removes it).
    Comment {
        object: (u32, u32, i32),
        text: Option<String>,
    },
    /// ALTER TABLE ... ALTER COLUMN ... ADD GENERATED ... AS IDENTITY.
    AddIdentity {
        table: TableInfo,
        column: usize,
        kind: crate::catalog::Identity,
        options: quire_engine::SeqOptions,
    },
    /// ALTER TABLE ... ADD PRIMARY KEY / ADD CONSTRAINT ... UNIQUE.
    AddKey {
        table: TableInfo,
        name: Option<String>,
        columns: Vec<usize>,
        primary: bool,
    },
    Query {
        node: Node,
        out: OutColumns,
    },
    Insert {
        table: TableInfo,
        /// Full rows in the table's column order, already cast to the columns' types.
        source: Node,
        on_conflict: OnConflict,
        returning: Option<Vec<Expr>>,
        checks: Vec<BoundCheck>,
    },
    /// UPDATE and DELETE: `scan` yields the target rows with their TID as a last column;
    /// `recheck` is evaluated again on the newest version of a row a concurrent
    /// transaction changed (READ COMMITTED).
    Update {
        table: TableInfo,
        scan: Node,
        recheck: Option<Expr>,
        sets: Vec<(usize, Expr)>,
        returning: Option<Vec<Expr>>,
        checks: Vec<BoundCheck>,
    },
    Delete {
        table: TableInfo,
        scan: Node,
        recheck: Option<Expr>,
        returning: Option<Vec<Expr>>,
    },
    /// SELECT ... FOR UPDATE / FOR SHARE of one table: the matching rows in `order` (keys
    /// over the scan's rows), each locked in turn as `wait` says (its newest version,
    /// checked again against the WHERE clause), the first `offset` locked rows left out and
    /// at most `count` sent, then projected. As PostgreSQL's LockRows under Limit: a
    /// skipped row does not count.
    SelectForUpdate {
        table: TableInfo,
        scan: Node,
        recheck: Option<Expr>,
        exprs: Vec<Expr>,
        out: OutColumns,
        order: Vec<SortKey>,
        offset: Option<Expr>,
        count: Option<Expr>,
        wait: RowWait,
    },
    /// SET (RESET with no value); `local`: SET LOCAL, to the end of the transaction.
    Set {
        name: String,
        value: Option<String>,
        local: bool,
    },
    Show(String),
    /// EXPLAIN: the statement whose plan it prints, one line per row.
    Explain(Box<Plan>),
}

impl Plan {
    /// Whether the plan only reads (or only touches session state): no transaction needs
    /// to outlive it. Anything else counts as a write.
    pub(crate) fn is_read_only(&self) -> bool {
        matches!(
            self,
            Plan::Query { .. } | Plan::Explain(_) | Plan::Show(_) | Plan::Set { .. }
        )
    }

    /// Calls `f` on the plan of each subquery in the statement's own expressions (those of
    /// RETURNING, SET, a recheck, ON CONFLICT; not those inside its query nodes), until it
    /// fails.
    pub(crate) fn try_for_each_expr_subquery(
        &mut self,
        f: &mut impl FnMut(&mut Node) -> Result<()>,
    ) -> Result<()> {
        let mut exprs: Vec<&mut Expr> = Vec::new();
        match self {
            Plan::Insert {
                on_conflict,
                returning,
                ..
            } => {
                if let OnConflict::Update { sets, filter } = on_conflict {
                    exprs.extend(sets.iter_mut().map(|(_, e)| e));
                    exprs.extend(filter.iter_mut());
                }
                exprs.extend(returning.iter_mut().flatten());
            }
            Plan::Update {
                recheck,
                sets,
                returning,
                ..
            } => {
                exprs.extend(recheck.iter_mut());
                exprs.extend(sets.iter_mut().map(|(_, e)| e));
                exprs.extend(returning.iter_mut().flatten());
            }
            Plan::Delete {
                recheck, returning, ..
            } => {
                exprs.extend(recheck.iter_mut());
                exprs.extend(returning.iter_mut().flatten());
            }
            Plan::SelectForUpdate {
                recheck,
                exprs: e,
                order,
                offset,
                count,
                ..
            } => {
                exprs.extend(recheck.iter_mut());
                exprs.extend(e.iter_mut());
                exprs.extend(order.iter_mut().map(|k| &mut k.expr));
                exprs.extend(offset.iter_mut().chain(count.iter_mut()));
            }
            Plan::Explain(inner) => return inner.try_for_each_expr_subquery(f),
            _ => {}
        }
        exprs
            .into_iter()
            .try_for_each(|e| e.try_for_each_subquery(f))
    }
}

/// A bound statement: its plan, its parameters' types and its output columns.
#[derive(Clone, Debug)]
pub(crate) struct Bound {
    pub plan: Plan,
    pub params: Vec<SqlType>,
    pub out: OutColumns,
}
