//! The DDL of FOREIGN KEY constraints and what other DDL owes them, as PostgreSQL has it:
//! CREATE TABLE's and ALTER TABLE ... ADD's foreign keys (the rows that exist verified
//! unless NOT VALID), VALIDATE CONSTRAINT, SET CONSTRAINTS, and the dependencies: DROP
//! TABLE of a referenced table (2BP01, or CASCADE drops the foreign keys), TRUNCATE of one
//! (0A000, or CASCADE truncates the referencing tables), DROP COLUMN and DROP CONSTRAINT of
//! a referenced key (2BP01). A referenced table is locked SHARE ROW EXCLUSIVE while a key
//! is added to it, as PostgreSQL locks it, so that no row changes under the verification.

use std::collections::BTreeSet;

use quire_engine::{IndexDef, LockMode, SqlState, TableId, Transaction};

use super::constraints::lock_for_alter;
use super::{command, referential, Outcome};
use crate::catalog::{self, FkChange, ForeignKey, TableInfo};
use crate::context::{Cx, Deferred};
use crate::error::{Notice, Result, SqlError};
use crate::nodes::NewForeignKey;

/// CREATE TABLE's foreign keys, on the new table `table`.
pub(super) fn create(tx: &Transaction, table: TableId, keys: &[NewForeignKey]) -> Result<()> {
    for k in keys {
        let mut fk = k.fk.clone();
        fk.table = table;
        if k.references_itself {
            fk.ref_table = table;
        } else {
            tx.lock_table(fk.ref_table, LockMode::ShareRowExclusive, false)?;
        }
        catalog::foreign_keys::add(tx, &fk)?;
    }
    Ok(())
}

/// ALTER TABLE ... ADD [CONSTRAINT] FOREIGN KEY [NOT VALID].
pub(super) fn add(
    cx: &Cx,
    table: &TableInfo,
    key: &NewForeignKey,
    validate: bool,
) -> Result<Outcome> {
    let tx = cx.tx;
    lock_for_alter(tx, table)?;
    let mut fk = key.fk.clone();
    fk.validated = validate;
    if fk.ref_table != table.def.oid {
        tx.lock_table(fk.ref_table, LockMode::ShareRowExclusive, false)?;
    }
    if validate {
        verify(cx, table, &fk)?;
    }
    catalog::foreign_keys::add(tx, &fk)?;
    Ok(command("ALTER TABLE"))
}

/// ALTER TABLE ... VALIDATE CONSTRAINT of a foreign key.
pub(super) fn validate(cx: &Cx, table: &TableInfo, fk: &ForeignKey) -> Result<Outcome> {
    let tx = cx.tx;
    tx.lock_table(table.def.oid, LockMode::ShareUpdateExclusive, false)?;
    if !fk.validated {
        tx.lock_table(fk.ref_table, LockMode::RowShare, false)?;
        verify(cx, table, fk)?;
        catalog::foreign_keys::change(tx, table.def.oid, &fk.name, FkChange::Validated)?;
    }
    Ok(command("ALTER TABLE"))
}

/// 23503 if a row of `table` has a key the referenced table lacks.
fn verify(cx: &Cx, table: &TableInfo, fk: &ForeignKey) -> Result<()> {
    let parent = if fk.ref_table == table.def.oid {
        table.clone()
    } else {
        catalog::lookup_oid(cx.tx, fk.ref_table)?
    };
    referential::verify_existing(cx, fk, table, &parent)
}

/// SET CONSTRAINTS {ALL | names} {DEFERRED | IMMEDIATE} in `tx`, a block's transaction
/// if `in_block` (else a warning, after the names are looked up, and nothing done).
/// IMMEDIATE runs the checks the named constraints deferred so far.
pub(super) fn set_constraints(
    tx: &Transaction,
    in_block: bool,
    deferred: &Deferred,
    names: Option<&[String]>,
    defer: bool,
) -> Result<Outcome> {
    let mut out = command("SET CONSTRAINTS");
    if !in_block {
        out.notices.push(Notice::warning(
            SqlState::NO_ACTIVE_SQL_TRANSACTION,
            "SET CONSTRAINTS can only be used in transaction blocks",
        ));
    }
    let Some(names) = names else {
        if !in_block {
            return Ok(out);
        }
        deferred.all.set(Some(defer));
        deferred.named.borrow_mut().clear();
        if !defer {
            referential::check_deferred(tx, deferred)?;
        }
        return Ok(out);
    };
    let all = catalog::foreign_keys::all(tx)?;
    let mut chosen = BTreeSet::new();
    for name in names {
        let found: Vec<&ForeignKey> = all.iter().filter(|f| f.name == *name).collect();
        if found.is_empty() {
            return Err(SqlError::new(
                SqlState::UNDEFINED_OBJECT,
                format!("constraint \"{name}\" does not exist"),
            ));
        }
        if let Some(f) = found.iter().find(|f| !f.deferral.deferrable()) {
            return Err(SqlError::new(
                SqlState::WRONG_OBJECT_TYPE,
                format!("constraint \"{}\" is not deferrable", f.name),
            ));
        }
        chosen.extend(found.iter().map(|f| f.oid));
    }
    if !in_block {
        return Ok(out);
    }
    deferred
        .named
        .borrow_mut()
        .extend(chosen.iter().map(|&oid| (oid, defer)));
    if !defer {
        let only = |f: &ForeignKey| chosen.contains(&f.oid);
        referential::check_deferred_of(tx, deferred, Some(&only))?;
    }
    Ok(out)
}

/// 2BP01 if a foreign key references `index`'s columns of `table` and no other unique
/// index has them (DROP CONSTRAINT or DROP INDEX of a referenced key); `what` names the
/// object dropped.
pub(super) fn check_key_unused(
    tx: &Transaction,
    table: &TableInfo,
    index: &IndexDef,
    what: &str,
) -> Result<()> {
    let key_of = |i: &IndexDef| {
        sorted(
            &i.columns
                .iter()
                .map(|&c| usize::from(c))
                .collect::<Vec<_>>(),
        )
    };
    let cols = key_of(index);
    for fk in &table.referenced_by {
        let refs = sorted(&fk.ref_columns);
        let elsewhere = table
            .indexes
            .iter()
            .any(|i| i.unique && i.oid != index.oid && key_of(i) == refs);
        if refs == cols && !elsewhere {
            let child = catalog::lookup_oid(tx, fk.table)?;
            return Err(depends(
                what,
                &format!("constraint {} on table {}", fk.name, child.def.name),
            ));
        }
    }
    Ok(())
}

fn sorted(cols: &[usize]) -> Vec<usize> {
    let mut c = cols.to_vec();
    c.sort_unstable();
    c
}

/// PostgreSQL's 2BP01 for an object others depend on.
fn depends(what: &str, dependent: &str) -> SqlError {
    SqlError::new(
        SqlState::DEPENDENT_OBJECTS_STILL_EXIST,
        format!("cannot drop {what} because other objects depend on it"),
    )
    .with_detail(format!("{dependent} depends on {what}"))
    .with_hint("Use DROP ... CASCADE to drop the dependent objects too.")
}

/// DROP TABLE names [CASCADE]: a table referenced by a foreign key of a table not dropped
/// with it fails (2BP01), or with CASCADE loses those foreign keys (a NOTICE each).
pub(super) fn drop_tables(
    cx: &Cx,
    names: &[String],
    if_exists: bool,
    cascade: bool,
) -> Result<Outcome> {
    let tx = cx.tx;
    let mut out = command("DROP TABLE");
    let mut tables = Vec::new();
    for name in names {
        match catalog::find(tx, name)? {
            Some(t) => tables.push(catalog::lookup_oid(tx, t)?),
            None if catalog::view::named(tx, name)?.is_some() => {
                return Err(SqlError::new(
                    SqlState::WRONG_OBJECT_TYPE,
                    format!("\"{name}\" is not a table"),
                )
                .with_hint("Use DROP VIEW to remove a view."))
            }
            None if if_exists => out.notices.push(Notice::new(format!(
                "table \"{}\" does not exist, skipping",
                catalog::display_name(name)
            ))),
            None => {
                return Err(SqlError::new(
                    SqlState::UNDEFINED_TABLE,
                    format!("table \"{}\" does not exist", catalog::display_name(name)),
                ))
            }
        }
    }
    let dropped: BTreeSet<TableId> = tables.iter().map(|t| t.def.oid).collect();
    let mut cascaded = Vec::new();
    for t in &tables {
        let mut dependents = Vec::new();
        for fk in t
            .referenced_by
            .iter()
            .filter(|f| !dropped.contains(&f.table))
        {
            let child = catalog::lookup_oid(tx, fk.table)?;
            let what = format!("constraint {} on table {}", fk.name, child.def.name);
            dependents.push(what.clone());
            cascaded.push((fk.table, fk.name.clone(), what));
        }
        if !cascade && !dependents.is_empty() {
            let table = format!("table {}", t.def.name);
            let lines: Vec<String> = dependents
                .iter()
                .map(|d| format!("{d} depends on {table}"))
                .collect();
            return Err(depends(&table, &dependents[0]).with_detail(lines.join("\n")));
        }
    }
    let named: Vec<(TableId, String)> = tables
        .iter()
        .map(|t| (t.def.oid, format!("table {}", t.def.name)))
        .collect();
    let views = super::views::dependents(tx, &named, cascade)?;
    super::views::drop_dependents(tx, &views)?;
    for (table, name, _) in &cascaded {
        catalog::foreign_keys::change(tx, *table, name, FkChange::Drop)?;
    }
    let mut whats: Vec<String> = cascaded.into_iter().map(|(_, _, w)| w).collect();
    whats.extend(views.iter().map(|v| format!("view {}", v.name)));
    out.notices.extend(cascade_notice(&whats));
    for t in &tables {
        catalog::drop(tx, t.def.oid)?;
    }
    Ok(out)
}

/// `drop cascades to ...`, as PostgreSQL reports one object or several.
pub(super) fn cascade_notice(whats: &[String]) -> Option<Notice> {
    match whats {
        [] => None,
        [what] => Some(Notice::new(format!("drop cascades to {what}"))),
        many => {
            let lines: Vec<String> = many
                .iter()
                .map(|w| format!("drop cascades to {w}"))
                .collect();
            Some(
                Notice::new(format!("drop cascades to {} other objects", many.len()))
                    .with_detail(lines.join("\n")),
            )
        }
    }
}

/// TRUNCATE tables [CASCADE]: a table referenced by a foreign key of a table not truncated
/// with it fails (0A000), or with CASCADE that table is truncated too (a NOTICE each).
pub(super) fn truncate_set(
    cx: &Cx,
    tables: &[TableInfo],
    cascade: bool,
) -> Result<(Vec<TableInfo>, Vec<Notice>)> {
    let tx = cx.tx;
    let mut all: Vec<TableInfo> = tables.to_vec();
    let mut notices = Vec::new();
    let mut i = 0;
    // Bounded: each table joins the set once.
    while i < all.len() {
        let referenced_by = all[i].referenced_by.clone();
        for fk in referenced_by {
            if all.iter().any(|t| t.def.oid == fk.table) {
                continue;
            }
            let child = catalog::lookup_oid(tx, fk.table)?;
            if !cascade {
                return Err(SqlError::new(
                    SqlState::FEATURE_NOT_SUPPORTED,
                    "cannot truncate a table referenced in a foreign key constraint",
                )
                .with_detail(format!(
                    "Table \"{}\" references \"{}\".",
                    child.def.name, all[i].def.name
                ))
                .with_hint(format!(
                    "Truncate table \"{}\" at the same time, or use TRUNCATE ... CASCADE.",
                    child.def.name
                )));
            }
            notices.push(Notice::new(format!(
                "truncate cascades to table \"{}\"",
                child.def.name
            )));
            all.push(child);
        }
        i += 1;
    }
    Ok((all, notices))
}

/// DROP COLUMN [CASCADE]: the table's foreign keys over a dropped column go with it; a
/// column a foreign key of another table references cannot go (2BP01), unless CASCADE
/// drops that foreign key too (its NOTICE returned).
pub(super) fn drop_columns(
    tx: &Transaction,
    table: &TableInfo,
    columns: &[usize],
    cascade: bool,
) -> Result<Option<Notice>> {
    let mut cascaded = Vec::new();
    for fk in &table.referenced_by {
        if let Some(&c) = fk.ref_columns.iter().find(|c| columns.contains(c)) {
            let child = catalog::lookup_oid(tx, fk.table)?;
            let what = format!("constraint {} on table {}", fk.name, child.def.name);
            if !cascade {
                let column = format!(
                    "column {} of table {}",
                    table.columns[c].name, table.def.name
                );
                return Err(depends(&column, &what));
            }
            cascaded.push((fk.table, fk.name.clone(), what));
        }
    }
    for (t, name, _) in &cascaded {
        catalog::foreign_keys::change(tx, *t, name, FkChange::Drop)?;
    }
    for fk in &table.foreign_keys {
        let own = cascaded
            .iter()
            .any(|(t, n, _)| *t == table.def.oid && *n == fk.name);
        if !own && fk.columns.iter().any(|c| columns.contains(c)) {
            catalog::foreign_keys::change(tx, table.def.oid, &fk.name, FkChange::Drop)?;
        }
    }
    let whats: Vec<String> = cascaded.into_iter().map(|(_, _, w)| w).collect();
    Ok(cascade_notice(&whats))
}
