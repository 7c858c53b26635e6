//! What the catalogs show of views ([`crate::catalog::view`]): `pg_class` rows of kind
//! `v`, their columns in `pg_attribute`, `pg_views`, the `_RETURN` rule PostgreSQL keeps
//! for each view in `pg_rewrite` and that rule's dependencies in `pg_depend` (pg_dump
//! orders a view after what it reads through them), and `pg_get_viewdef`.
//!
//! A view's rule has the view's oid: oids are unique per catalog, and pg_dump keys objects
//! by `(tableoid, oid)`.

use std::ops::ControlFlow;
use std::sync::Arc;

use sqlparser::ast::{self, VisitMut as _, VisitorMut};

use quire_engine::{Column, RelFileLocator, Row, TableDef, Transaction, Value};

use super::{class_row, int, oid_of, text, PG_CLASS_OID, SUPERUSER};
use crate::catalog::view::{self, ViewInfo};
use crate::catalog::{ColumnInfo, TableInfo};
use crate::error::Result;

/// `pg_rewrite`'s oid (the `classid` of a rule's dependencies).
pub(super) const REWRITE_RELID: u32 = 2618;
/// `relhasrules`' place in a pg_class row.
const RELHASRULES: usize = 18;
/// `relfilenode`'s place in a pg_class row.
const RELFILENODE: usize = 7;

/// The views SQL sees (not quire's own).
fn user_views(tx: &Transaction) -> Result<Vec<ViewInfo>> {
    let mut all = view::all(tx)?;
    all.retain(|v| !v.name.starts_with(crate::catalog::RESERVED_PREFIX));
    Ok(all)
}

/// Each view as a table with its columns and nothing else: what `pg_attribute` and the
/// information schema's column lists show alike for both.
pub(super) fn as_tables(tx: &Transaction) -> Result<Vec<TableInfo>> {
    Ok(user_views(tx)?.iter().map(as_table).collect())
}

fn as_table(v: &ViewInfo) -> TableInfo {
    let columns: Vec<ColumnInfo> = v
        .body
        .columns
        .iter()
        .map(|(name, ty)| ColumnInfo {
            name: name.clone(),
            ty: *ty,
            not_null: false,
            default: None,
            dropped: false,
            owned_seq: None,
            identity: None,
        })
        .collect();
    TableInfo {
        def: TableDef {
            oid: v.oid,
            name: v.name.as_str().into(),
            // The user database (1), relation number 0: no file.
            rel: RelFileLocator::new(1, 0),
            columns: Arc::new(
                columns
                    .iter()
                    .map(|c| Column::new(&c.name, c.ty.engine_type()))
                    .collect(),
            ),
        },
        columns,
        pkey: None,
        indexes: Vec::new(),
        temp: false,
        checks: Vec::new(),
        foreign_keys: Vec::new(),
        referenced_by: Vec::new(),
    }
}

/// `pg_class` rows of kind `v`: no file, no access method, a rule.
pub(super) fn class_rows(tx: &Transaction) -> Result<Vec<Row>> {
    Ok(user_views(tx)?
        .iter()
        .map(|v| {
            let mut row = class_row(oid_of(v.oid), &v.name, "v", 0, v.body.columns.len(), false);
            row[RELFILENODE] = int(0);
            row[RELHASRULES] = Value::Bool(true);
            row
        })
        .collect())
}

/// `pg_views`: schema, name, owner, definition (`qualify`: see [`definition`]).
pub(super) fn pg_views_rows(tx: &Transaction, qualify: bool) -> Result<Vec<Row>> {
    user_views(tx)?
        .iter()
        .map(|v| {
            Ok(vec![
                text("public"),
                text(&v.name),
                text(SUPERUSER),
                text(&definition(tx, v, qualify)?),
            ])
        })
        .collect()
}

/// Each view's name and definition (as `pg_get_viewdef` gives it unqualified).
pub(super) fn definitions(tx: &Transaction) -> Result<Vec<(String, String)>> {
    user_views(tx)?
        .iter()
        .map(|v| Ok((v.name.clone(), definition(tx, v, false)?)))
        .collect()
}

/// `pg_rewrite`: each view's `_RETURN` rule (an INSTEAD rule on SELECT, enabled).
pub(super) fn rewrite_rows(tx: &Transaction) -> Result<Vec<Row>> {
    Ok(user_views(tx)?
        .iter()
        .map(|v| {
            vec![
                oid_of(v.oid),
                text("_RETURN"),
                oid_of(v.oid),
                text("1"),
                text("O"),
                Value::Bool(true),
                text("<>"),
                text(&v.body.query),
            ]
        })
        .collect())
}

/// `pg_depend` rows of the views' rules: internal on their view, normal on each relation
/// the view reads.
pub(super) fn depend_rows(tx: &Transaction) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for v in user_views(tx)? {
        let dep = |on: Value, kind: &str| {
            vec![
                int(i64::from(REWRITE_RELID)),
                oid_of(v.oid),
                int(0),
                int(PG_CLASS_OID),
                on,
                int(0),
                text(kind),
            ]
        };
        rows.push(dep(oid_of(v.oid), "i"));
        for &d in &v.body.depends {
            rows.push(dep(oid_of(d), "n"));
        }
    }
    Ok(rows)
}

/// A view's definition as `pg_get_viewdef` gives it: the query, after a space and
/// before a semicolon, as PostgreSQL prints it. With `qualify` (schema `public` not on the
/// search path, as in pg_dump's session) the relations it reads are named `public.t`, as
/// PostgreSQL's deparser names what the search path does not reach.
fn definition(tx: &Transaction, v: &ViewInfo, qualify: bool) -> Result<String> {
    let query = if qualify {
        qualified(tx, &v.body.query)?
    } else {
        v.body.query.clone()
    };
    Ok(format!(" {query};"))
}

/// `query` with each relation name that reaches a user relation (not a CTE) qualified.
fn qualified(tx: &Transaction, query: &str) -> Result<String> {
    let mut stmts = crate::parse::parse(query)?;
    let Some(crate::parse::Statement::Sql(mut stmt)) = stmts.pop() else {
        return Ok(query.to_string());
    };
    let mut q = Qualify {
        tx,
        ctes: Vec::new(),
        error: None,
    };
    let _ = stmt.visit(&mut q);
    match q.error {
        Some(e) => Err(e),
        None => Ok(match *stmt {
            ast::Statement::Query(q) => q.to_string(),
            other => other.to_string(),
        }),
    }
}

/// The walk [`qualified`] makes: CTE names are met (pre-order) before the references to
/// them.
struct Qualify<'a> {
    tx: &'a Transaction,
    ctes: Vec<String>,
    error: Option<crate::error::SqlError>,
}

fn folded(i: &ast::Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_lowercase()
    }
}

impl VisitorMut for Qualify<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            self.ctes
                .extend(with.cte_tables.iter().map(|c| folded(&c.alias.name)));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, name: &mut ast::ObjectName) -> ControlFlow<()> {
        let [ast::ObjectNamePart::Identifier(id)] = name.0.as_slice() else {
            return ControlFlow::Continue(());
        };
        let n = folded(id);
        if self.ctes.contains(&n) || n.starts_with(crate::catalog::RESERVED_PREFIX) {
            return ControlFlow::Continue(());
        }
        match self.tx.relation_named(&n) {
            Ok(Some(_)) => name.0.insert(
                0,
                ast::ObjectNamePart::Identifier(ast::Ident::new("public")),
            ),
            Ok(None) => {}
            Err(e) => {
                self.error = Some(e.into());
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}

/// `pg_get_viewdef(oid)`: `None` when `oid` is no view.
pub(crate) fn view_def(tx: &Transaction, oid: u32, qualify: bool) -> Result<Option<String>> {
    let oid = quire_engine::Oid(u64::from(oid));
    Ok(match tx.relation(oid)? {
        Some(quire_engine::Entry::View(_)) => Some(definition(tx, &view::read(tx, oid)?, qualify)?),
        _ => None,
    })
}

/// `pg_get_viewdef(name)`: the view `name` names (`v` or `public.v`).
pub(crate) fn view_def_named(
    tx: &Transaction,
    name: &str,
    qualify: bool,
) -> Result<Option<String>> {
    let name = name.strip_prefix("public.").unwrap_or(name);
    match view::named(tx, name)? {
        Some(v) => Ok(Some(definition(tx, &v, qualify)?)),
        None => Ok(None),
    }
}
