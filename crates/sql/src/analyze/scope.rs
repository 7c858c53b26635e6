//! Scopes: the columns a FROM clause makes visible, and how names reach them
//! (PostgreSQL's namespace items, parse_relation.c and transformFromClauseItem).
//!
//! ## Rules
//! - A scope describes one row of `width` values. Each column is read by an expression over
//!   that row (`source`): a column of it, or for the merged column of a USING or NATURAL
//!   join an expression of both sides (the left one for INNER and LEFT, the right one for
//!   RIGHT, `COALESCE(left, right)` for FULL, each cast to their common type), as
//!   PostgreSQL's planner expands a join's alias variables.
//! - An unqualified name reaches the columns marked `unqualified` (two such of one name are
//!   ambiguous, 42702); a qualified one the columns of that qualifier. A join makes its
//!   sides' USING columns reachable only qualified; an aliased join hides its sides' names
//!   and gives its own to its columns.
//! - `*` expands the unqualified columns in order: a USING join puts its merged columns
//!   first, then the left side's others, then the right side's; `t.*` expands `t`'s
//!   columns in its own order.

use quire_engine::SqlState;
use sqlparser::ast;

use super::{ident_name, name_parts, Binder, OutColumn};
use crate::catalog::TableInfo;
use crate::error::{Result, SqlError};
use crate::func::Func;
use crate::nodes::{and_of, CmpOp, Expr, JoinKind};
use crate::types::SqlType;

/// A column a name can refer to.
#[derive(Clone, Debug)]
pub(crate) struct ScopeCol {
    pub qualifier: Option<String>,
    pub name: String,
    pub ty: SqlType,
    /// A dropped column: it holds its place in the row, but `*` leaves it out.
    pub hidden: bool,
    /// Whether an unqualified name and `*` reach it.
    pub unqualified: bool,
    /// A system column (`tableoid`): a name reaches it, `*`, NATURAL, USING and column
    /// aliases do not.
    pub system: bool,
    /// Its value over the scope's row.
    pub source: Expr,
}

/// The columns of the current row, with the table names or aliases that qualify them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scope {
    pub cols: Vec<ScopeCol>,
    /// The width of the row the columns are read from.
    width: usize,
    /// The left side of a RIGHT or FULL join as its right side sees it: a LATERAL
    /// reference to it is refused (42P10).
    pub lateral_refused: bool,
    /// The names that reach no column: the tables an aliased join hides, and the tables
    /// known by an alias (with it). A reference to one is 42P01 saying so.
    pub hidden_tables: Vec<(String, Option<String>)>,
}

impl Scope {
    pub(crate) fn empty() -> Scope {
        Scope::default()
    }

    /// The columns of `names_types`, the row's columns in order.
    fn of_columns<'a>(
        names_types: impl Iterator<Item = (&'a str, SqlType, bool)>,
        qualifier: Option<&str>,
    ) -> Scope {
        let cols: Vec<ScopeCol> = names_types
            .enumerate()
            .map(|(i, (name, ty, hidden))| ScopeCol {
                qualifier: qualifier.map(str::to_string),
                name: name.to_string(),
                ty,
                hidden,
                unqualified: true,
                system: false,
                source: Expr::Column(i),
            })
            .collect();
        Scope {
            width: cols.len(),
            cols,
            ..Scope::default()
        }
    }

    pub(crate) fn of_table(t: &TableInfo, qualifier: Option<&str>) -> Scope {
        let cols = t.columns.iter().map(|c| (c.name.as_str(), c.ty, c.dropped));
        Scope::of_columns(cols, qualifier)
    }

    /// The scope of a statement's target table (INSERT, UPDATE, DELETE), known by `alias`
    /// if it has one (its own name then reaches nothing).
    pub(crate) fn of_target(t: &TableInfo, alias: Option<&str>) -> Scope {
        let mut scope = Scope::of_table(t, Some(alias.unwrap_or(&t.def.name)));
        if let Some(a) = alias {
            scope
                .hidden_tables
                .push((t.def.name.to_string(), Some(a.to_string())));
        }
        scope
    }

    pub(crate) fn of_out(out: &[OutColumn], qualifier: Option<&str>) -> Scope {
        Scope::of_columns(
            out.iter().map(|c| (c.name.as_str(), c.ty, false)),
            qualifier,
        )
    }

    /// The columns of a `(name, type)` list (a catalog table's).
    pub(crate) fn of_named(cols: &[(&str, SqlType)], qualifier: Option<&str>) -> Scope {
        Scope::of_columns(cols.iter().map(|(n, t)| (*n, *t, false)), qualifier)
    }

    /// Adds the system column `tableoid` of a relation with oid `oid`, unless the row has a
    /// column of that name (PostgreSQL forbids one; quire's older tables may have it).
    pub(crate) fn with_tableoid(mut self, oid: u32, qualifier: &str) -> Scope {
        if self.cols.iter().any(|c| c.name == "tableoid") {
            return self;
        }
        self.cols.push(ScopeCol {
            qualifier: Some(qualifier.to_string()),
            name: "tableoid".into(),
            ty: SqlType::Oid,
            hidden: false,
            unqualified: true,
            system: true,
            source: Expr::Const(quire_engine::Value::Int(i64::from(oid))),
        });
        self
    }

    /// The row widened by `n` values no name reaches (the TID UPDATE and DELETE read).
    pub(crate) fn widen_hidden(&mut self, n: usize) {
        self.width += n;
    }

    /// `other`'s columns after these, over the row `self ++ other`.
    pub(crate) fn append(&mut self, other: Scope) {
        let offset = self.width;
        self.cols.extend(other.cols.into_iter().map(|mut c| {
            c.source = c.source.shifted(offset);
            c
        }));
        self.width += other.width;
        self.hidden_tables.extend(other.hidden_tables);
    }

    pub(crate) fn width(&self) -> usize {
        self.width
    }

    /// The column `qualifier.name` (or `name`) reaches: `None` if none, 42702 if several.
    pub(crate) fn resolve(&self, qualifier: Option<&str>, name: &str) -> Result<Option<&ScopeCol>> {
        let mut found = None;
        for c in &self.cols {
            let reached = match qualifier {
                None => c.unqualified,
                Some(q) => c.qualifier.as_deref() == Some(q),
            };
            if reached && c.name == name && !c.hidden {
                if found.is_some() {
                    return Err(SqlError::new(
                        SqlState::AMBIGUOUS_COLUMN,
                        format!("column reference \"{name}\" is ambiguous"),
                    ));
                }
                found = Some(c);
            }
        }
        Ok(found)
    }

    pub(crate) fn has_qualifier(&self, q: &str) -> bool {
        self.cols.iter().any(|c| c.qualifier.as_deref() == Some(q))
    }
}

/// The positions of the unqualified columns named `name` among `cols`.
fn unqualified_named<'a>(cols: &'a [ScopeCol], name: &'a str) -> impl Iterator<Item = usize> + 'a {
    cols.iter()
        .enumerate()
        .filter(move |(_, c)| c.unqualified && !c.hidden && !c.system && c.name == name)
        .map(|(i, _)| i)
}

/// The names NATURAL joins on: the left side's unqualified column names the right side has
/// too, in the left side's order.
fn common_names(left: &[ScopeCol], right: &[ScopeCol]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for c in left
        .iter()
        .filter(|c| c.unqualified && !c.hidden && !c.system)
    {
        if unqualified_named(right, &c.name).next().is_some() && !names.contains(&c.name) {
            names.push(c.name.clone());
        }
    }
    names
}

/// Column aliases (`AS o(n)`) rename the scope's unqualified columns in order and set their
/// qualifier; the columns only a qualifier reached (a join's sides') become unreachable.
pub(crate) fn rename(scope: Scope, alias: Option<&ast::TableAlias>) -> Result<Scope> {
    rename_as(scope, alias, "table")
}

/// [`rename`] of a FROM item of kind `what` (`table`, or `join expression` for
/// parenthesized joins): more column names than it has columns is 42P10, as in
/// PostgreSQL.
pub(crate) fn rename_as(
    mut scope: Scope,
    alias: Option<&ast::TableAlias>,
    what: &str,
) -> Result<Scope> {
    let Some(a) = alias else { return Ok(scope) };
    let q = ident_name(&a.name);
    let available = scope
        .cols
        .iter()
        .filter(|c| c.unqualified && !c.system)
        .count();
    if a.columns.len() > available {
        return Err(SqlError::new(
            SqlState::INVALID_COLUMN_REFERENCE,
            format!(
                "{what} \"{q}\" has {available} columns available but {} columns specified",
                a.columns.len()
            ),
        ));
    }
    let mut names = a.columns.iter();
    for c in &mut scope.cols {
        if c.unqualified {
            c.qualifier = Some(q.clone());
            if c.system {
                continue;
            }
            if let Some(new) = names.next() {
                c.name = ident_name(&new.name);
            }
        } else if let Some(hidden) = c.qualifier.take() {
            if !scope.hidden_tables.iter().any(|(t, _)| *t == hidden) {
                scope.hidden_tables.push((hidden, None));
            }
        }
    }
    Ok(scope)
}

/// The error of `table.column` where `table` is hidden (see [`Scope::hidden_tables`]).
pub(crate) fn hidden_table_error(table: &str, alias: Option<&str>) -> SqlError {
    let e = SqlError::new(
        SqlState::UNDEFINED_TABLE,
        format!("invalid reference to FROM-clause entry for table \"{table}\""),
    );
    match alias {
        Some(a) => e.with_hint(format!("Perhaps you meant to reference the table alias \"{a}\".")),
        None => e.with_detail(format!(
            "There is an entry for table \"{table}\", but it cannot be referenced from this part of the query."
        )),
    }
}

/// How a join matches its sides' rows, as the analyzer reads it.
pub(crate) enum Matching<'a> {
    On(&'a ast::Expr),
    /// USING's columns, and the alias that qualifies the merged ones (`USING (x) AS j`).
    Using(Vec<String>, Option<String>),
    Natural,
    None,
}

/// `JOIN ... USING (x)` when `x` is not on one side (42703), or is there twice (42702).
fn using_column_error(name: &str, side: &str, count: usize) -> SqlError {
    if count == 0 {
        SqlError::new(
            SqlState::UNDEFINED_COLUMN,
            format!("column \"{name}\" specified in USING clause does not exist in {side} table"),
        )
    } else {
        SqlError::new(
            SqlState::AMBIGUOUS_COLUMN,
            format!("common column name \"{name}\" appears more than once in {side} table"),
        )
    }
}

/// The one unqualified column `name` of `cols` (a USING column's side).
fn using_side(cols: &[ScopeCol], name: &str, side: &str) -> Result<usize> {
    let found: Vec<usize> = unqualified_named(cols, name).collect();
    match found.as_slice() {
        [i] => Ok(*i),
        _ => Err(using_column_error(name, side, found.len())),
    }
}

/// The names of a USING list (42701 for one named twice).
pub(crate) fn using_names(cols: &[ast::ObjectName]) -> Result<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    for c in cols {
        let n = name_parts(c)?.join(".");
        if names.contains(&n) {
            return Err(SqlError::new(
                SqlState::DUPLICATE_COLUMN,
                format!("column name \"{n}\" appears more than once in USING clause"),
            ));
        }
        names.push(n);
    }
    Ok(names)
}

impl Binder<'_> {
    /// The scope of `left kind JOIN right` (the sides' scopes as the ON condition sees
    /// them: `combined`) and the join's condition. USING and NATURAL merge the named
    /// columns: one column each, first, the sides' ones reachable only qualified.
    pub(crate) fn join_scope(
        &mut self,
        kind: JoinKind,
        left: &Scope,
        combined: Scope,
        matching: Matching,
    ) -> Result<(Scope, Option<Expr>)> {
        let (names, alias) = match matching {
            Matching::On(e) => {
                let saved = self.set_clause(Some("JOIN conditions"));
                let on = self.predicate(e, &combined);
                self.clause = saved;
                return Ok((combined, Some(on?)));
            }
            Matching::None => return Ok((combined, None)),
            Matching::Using(names, alias) => (names, alias),
            Matching::Natural => {
                let (l, r) = combined.cols.split_at(left.cols.len());
                (common_names(l, r), None)
            }
        };
        self.merge_using(kind, left.cols.len(), combined, &names, alias.as_deref())
    }

    /// The USING columns `names` merged (see [`Binder::join_scope`]); `left_cols` is how
    /// many of `combined`'s columns are the left side's.
    fn merge_using(
        &mut self,
        kind: JoinKind,
        left_cols: usize,
        mut combined: Scope,
        names: &[String],
        alias: Option<&str>,
    ) -> Result<(Scope, Option<Expr>)> {
        let mut merged = Vec::with_capacity(names.len());
        let mut conds = Vec::with_capacity(names.len());
        for name in names {
            let (lc, rc) = combined.cols.split_at(left_cols);
            let l = using_side(lc, name, "left")?;
            let r = using_side(rc, name, "right")?;
            let (lcol, rcol) = (&lc[l], &rc[r]);
            let ty = crate::func::unify(lcol.ty, rcol.ty).ok_or_else(|| {
                SqlError::type_mismatch(format!(
                    "JOIN/USING types {} and {} cannot be matched",
                    lcol.ty.name(),
                    rcol.ty.name()
                ))
            })?;
            let ty = if ty == SqlType::Unknown {
                SqlType::Text
            } else {
                ty
            };
            let le = self.coerce(lcol.source.clone(), lcol.ty, ty)?;
            let re = self.coerce(rcol.source.clone(), rcol.ty, ty)?;
            conds.push(Expr::Cmp(
                CmpOp::Eq,
                ty,
                Box::new(le.clone()),
                Box::new(re.clone()),
            ));
            let source = match kind {
                JoinKind::Inner | JoinKind::Left => le,
                JoinKind::Right => re,
                JoinKind::Full => Expr::Func(Func::Coalesce, vec![le, re]),
            };
            merged.push(ScopeCol {
                qualifier: alias.map(str::to_string),
                name: name.clone(),
                ty,
                hidden: false,
                unqualified: true,
                system: false,
                source,
            });
            combined.cols[l].unqualified = false;
            combined.cols[left_cols + r].unqualified = false;
        }
        merged.extend(combined.cols);
        combined.cols = merged;
        Ok((combined, and_of(conds)))
    }
}
