//! The DDL of views and what other DDL owes them, as PostgreSQL has it: CREATE [OR
//! REPLACE] VIEW (a replacement may add columns at the end, never drop, rename or retype
//! one: 42P16), DROP VIEW, and the dependencies: dropping a relation a view reads fails
//! (2BP01) unless CASCADE, which drops the view too (a NOTICE names it).

use quire_engine::{Entry, Oid, SqlState, Transaction};

use super::{command, Outcome};
use crate::catalog::view::{self, ViewBody, ViewInfo};
use crate::catalog::TableInfo;
use crate::error::{Notice, Result, SqlError};

/// CREATE [OR REPLACE] VIEW.
pub(super) fn create(
    tx: &Transaction,
    name: &str,
    or_replace: bool,
    body: &ViewBody,
) -> Result<Outcome> {
    let existing = if or_replace {
        tx.relation_named(name)?
    } else {
        None
    };
    match existing {
        None => {
            view::create(tx, name, body)?;
        }
        Some(Entry::View(def)) => {
            let old = view::read(tx, def.oid)?;
            if body.depends.contains(&old.oid) {
                return Err(crate::analyze::view_recursion(name));
            }
            check_replacement(&old, body)?;
            view::replace(tx, old.oid, body)?;
        }
        Some(_) => {
            return Err(SqlError::new(
                SqlState::WRONG_OBJECT_TYPE,
                format!("\"{name}\" is not a view"),
            ))
        }
    }
    Ok(command("CREATE VIEW"))
}

/// CREATE OR REPLACE VIEW keeps every column the view had, in place, with its name and
/// type (PostgreSQL's checks and words).
fn check_replacement(old: &ViewInfo, new: &ViewBody) -> Result<()> {
    let invalid = |m: String| SqlError::new(SqlState::INVALID_TABLE_DEFINITION, m);
    if new.columns.len() < old.body.columns.len() {
        return Err(invalid("cannot drop columns from view".into()));
    }
    for ((old_name, old_ty), (new_name, new_ty)) in old.body.columns.iter().zip(&new.columns) {
        if old_name != new_name {
            return Err(invalid(format!(
                "cannot change name of view column \"{old_name}\" to \"{new_name}\""
            ))
            .with_hint(
                "Use ALTER VIEW ... RENAME COLUMN ... to change name of view column instead.",
            ));
        }
        if old_ty != new_ty {
            return Err(invalid(format!(
                "cannot change data type of view column \"{old_name}\" from {} to {}",
                old_ty.name(),
                new_ty.name()
            )));
        }
    }
    Ok(())
}

/// DROP VIEW [IF EXISTS] names [CASCADE].
pub(super) fn drop(
    tx: &Transaction,
    names: &[String],
    if_exists: bool,
    cascade: bool,
) -> Result<Outcome> {
    let mut out = command("DROP VIEW");
    let mut views: Vec<ViewInfo> = Vec::new();
    for name in names {
        match tx.relation_named(name)? {
            Some(Entry::View(def)) => views.push(view::read(tx, def.oid)?),
            Some(_) => {
                return Err(SqlError::new(
                    SqlState::WRONG_OBJECT_TYPE,
                    format!("\"{name}\" is not a view"),
                )
                .with_hint(format!("Use DROP {} to remove it.", kind_word(tx, name)?)))
            }
            None if if_exists => out.notices.push(Notice::new(format!(
                "view \"{name}\" does not exist, skipping"
            ))),
            None => {
                return Err(SqlError::new(
                    SqlState::UNDEFINED_TABLE,
                    format!("view \"{name}\" does not exist"),
                ))
            }
        }
    }
    let named: Vec<(Oid, String)> = views
        .iter()
        .map(|v| (v.oid, format!("view {}", v.name)))
        .collect();
    let cascaded = dependents(tx, &named, cascade)?;
    out.notices.extend(cascade_notice(&cascaded));
    drop_dependents(tx, &cascaded)?;
    for v in &views {
        view::drop(tx, v.oid)?;
    }
    Ok(out)
}

/// The word DROP takes for relation `name` that is not a view.
fn kind_word(tx: &Transaction, name: &str) -> Result<&'static str> {
    Ok(match tx.relation_named(name)? {
        Some(Entry::Index(_)) => "INDEX",
        Some(Entry::Sequence(_)) => "SEQUENCE",
        _ => "TABLE",
    })
}

/// The views that read the relations being dropped (`dropped`: each one's oid and how
/// PostgreSQL names it, "table t"), not counting those dropped themselves: 2BP01 naming
/// the first relation with one unless `cascade`, else the views to drop first.
pub(super) fn dependents(
    tx: &Transaction,
    dropped: &[(Oid, String)],
    cascade: bool,
) -> Result<Vec<ViewInfo>> {
    let oids: Vec<Oid> = dropped.iter().map(|(o, _)| *o).collect();
    let found = view::dependents(tx, &oids)?;
    if found.is_empty() || cascade {
        return Ok(found);
    }
    let name_of = |oid: Oid| -> Option<String> {
        dropped
            .iter()
            .find(|(o, _)| *o == oid)
            .map(|(_, w)| w.clone())
            .or_else(|| {
                found
                    .iter()
                    .find(|v| v.oid == oid)
                    .map(|v| format!("view {}", v.name))
            })
    };
    let lines: Vec<String> = found
        .iter()
        .filter_map(|v| {
            let on = v.body.depends.iter().find_map(|&d| name_of(d))?;
            Some(format!("view {} depends on {on}", v.name))
        })
        .collect();
    let first = found[0]
        .body
        .depends
        .iter()
        .find_map(|&d| dropped.iter().find(|(o, _)| *o == d))
        .map_or_else(|| dropped[0].1.clone(), |(_, w)| w.clone());
    Err(SqlError::new(
        SqlState::DEPENDENT_OBJECTS_STILL_EXIST,
        format!("cannot drop {first} because other objects depend on it"),
    )
    .with_detail(lines.join("\n"))
    .with_hint("Use DROP ... CASCADE to drop the dependent objects too."))
}

/// Drops the views [`dependents`] found, those that read others first.
pub(super) fn drop_dependents(tx: &Transaction, views: &[ViewInfo]) -> Result<()> {
    for v in views.iter().rev() {
        view::drop(tx, v.oid)?;
    }
    Ok(())
}

/// "drop cascades to view v" for each view [`dependents`] found, as one NOTICE.
fn cascade_notice(views: &[ViewInfo]) -> Option<Notice> {
    let whats: Vec<String> = views.iter().map(|v| format!("view {}", v.name)).collect();
    super::foreign_keys::cascade_notice(&whats)
}

/// What an ALTER TABLE did to a table that views may read.
pub(super) enum Altered<'a> {
    /// DROP COLUMN of these columns [CASCADE].
    DroppedColumns(&'a [String], bool),
    /// ALTER COLUMN ... TYPE of this column.
    Retyped(&'a str),
}

/// After an ALTER TABLE of `table` (in the same transaction): every view that reads it,
/// directly or not, must still bind. One that does not fails the statement with
/// PostgreSQL's error, or with DROP COLUMN ... CASCADE is dropped (with those that read it).
pub(super) fn after_alter(
    tx: &Transaction,
    table: &TableInfo,
    altered: &Altered<'_>,
) -> Result<Vec<Notice>> {
    let mut broken: Vec<ViewInfo> = Vec::new();
    for v in view::dependents(tx, &[table.def.oid])? {
        if broken.iter().any(|b| v.body.depends.contains(&b.oid)) {
            broken.push(v);
            continue;
        }
        if crate::analyze::check_view(tx, &v).is_err() {
            broken.push(v);
        }
    }
    let Some(first) = broken.first() else {
        return Ok(Vec::new());
    };
    let t = &table.def.name;
    match altered {
        Altered::DroppedColumns(_, true) => {
            let notice = cascade_notice(&broken);
            drop_dependents(tx, &broken)?;
            Ok(notice.into_iter().collect())
        }
        Altered::DroppedColumns(columns, false) => {
            let c = columns.first().map_or("", String::as_str);
            Err(SqlError::new(
                SqlState::DEPENDENT_OBJECTS_STILL_EXIST,
                format!("cannot drop column {c} of table {t} because other objects depend on it"),
            )
            .with_detail(format!(
                "view {} depends on column {c} of table {t}",
                first.name
            ))
            .with_hint("Use DROP ... CASCADE to drop the dependent objects too."))
        }
        Altered::Retyped(c) => Err(SqlError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            "cannot alter type of a column used by a view or rule",
        )
        .with_detail(format!(
            "rule _RETURN on view {} depends on column \"{c}\"",
            first.name
        ))),
    }
}
