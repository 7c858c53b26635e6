//! Constraints verified as rows are written (NOT NULL, CHECK; 23502 and 23514 with
//! PostgreSQL's messages and its `Failing row contains (...)` detail), and the DDL that adds,
//! validates and drops CHECK constraints, verifying the rows that exist.

use quire_engine::{SqlState, Value};

use super::{command, Outcome};
use crate::catalog::{self, CheckChange, FkChange, TableInfo};
use crate::context::Cx;
use crate::error::{Notice, Result, SqlError};
use crate::nodes::{BoundCheck, Expr, NewCheck};

/// PostgreSQL's limit on each value in a failing row's description (bytes), past which the
/// value is cut and `...` follows.
const MAX_FIELD_BYTES: usize = 64;

/// `Failing row contains (1, null, abc).`: the row's visible columns as text.
fn failing_row(table: &TableInfo, row: &[Value]) -> String {
    let mut parts = Vec::with_capacity(row.len());
    for (c, v) in table.columns.iter().zip(row) {
        if c.dropped {
            continue;
        }
        let Some(mut text) = crate::types::format_text(v, c.ty) else {
            parts.push("null".to_string());
            continue;
        };
        if text.len() > MAX_FIELD_BYTES {
            let mut cut = MAX_FIELD_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str("...");
        }
        parts.push(text);
    }
    format!("Failing row contains ({}).", parts.join(", "))
}

/// 23502 if a NOT NULL column of `row` is NULL.
pub(super) fn check_not_null(table: &TableInfo, row: &[Value]) -> Result<()> {
    for (c, v) in table.columns.iter().zip(row) {
        if c.not_null && v.is_null() {
            return Err(SqlError::new(
                SqlState::NOT_NULL_VIOLATION,
                format!(
                    "null value in column \"{}\" of relation \"{}\" violates not-null constraint",
                    c.name, table.def.name
                ),
            )
            .with_detail(failing_row(table, row)));
        }
    }
    Ok(())
}

/// Whether `check` fails on `row` (false, not NULL: a NULL result passes, as in SQL).
fn fails(cx: &Cx, check: &Expr, row: &[Value]) -> Result<bool> {
    Ok(matches!(check.eval(cx, row)?, Value::Bool(false)))
}

/// A row about to be written: NOT NULL, then each CHECK constraint (23514).
pub(super) fn check_row(
    cx: &Cx,
    table: &TableInfo,
    checks: &[BoundCheck],
    row: &[Value],
) -> Result<()> {
    check_not_null(table, row)?;
    for c in checks {
        if fails(cx, &c.expr, row)? {
            return Err(SqlError::new(
                SqlState::CHECK_VIOLATION,
                format!(
                    "new row for relation \"{}\" violates check constraint \"{}\"",
                    table.def.name, c.name
                ),
            )
            .with_detail(failing_row(table, row)));
        }
    }
    Ok(())
}

/// 23514 if some row of `table` fails `check` (ADD CONSTRAINT, ADD COLUMN, VALIDATE).
fn verify_rows(cx: &Cx, table: &TableInfo, name: &str, check: &Expr) -> Result<()> {
    for r in cx.tx.scan(table.def.oid)? {
        let (_, row) = r?;
        cx.interrupt.check()?;
        if fails(cx, check, &row)? {
            return Err(SqlError::new(
                SqlState::CHECK_VIOLATION,
                format!(
                    "check constraint \"{name}\" of relation \"{}\" is violated by some row",
                    table.def.name
                ),
            ));
        }
    }
    Ok(())
}

/// Records `checks` on `table`, verifying the rows it has first when `validate`.
pub(super) fn add_checks(
    cx: &Cx,
    table: &TableInfo,
    checks: &[NewCheck],
    validate: bool,
) -> Result<()> {
    for c in checks {
        if validate {
            verify_rows(cx, table, &c.name, &c.bound)?;
        }
        catalog::add_check(cx.tx, table.def.oid, &c.name, &c.expr, validate)?;
    }
    Ok(())
}

/// ALTER TABLE ... VALIDATE CONSTRAINT.
pub(super) fn validate_check(cx: &Cx, table: &TableInfo, check: &BoundCheck) -> Result<Outcome> {
    verify_rows(cx, table, &check.name, &check.expr)?;
    catalog::change_check(cx.tx, table.def.oid, &check.name, CheckChange::Validated)?;
    Ok(command("ALTER TABLE"))
}

/// ACCESS EXCLUSIVE on `table` for an ALTER TABLE action that changes its definition.
pub(super) fn lock_for_alter(tx: &quire_engine::Transaction, table: &TableInfo) -> Result<()> {
    tx.lock_table(
        table.def.oid,
        quire_engine::LockMode::AccessExclusive,
        false,
    )?;
    Ok(())
}

/// ALTER TABLE ... DROP CONSTRAINT [IF EXISTS]: a CHECK constraint or a unique index that is
/// a constraint (the primary key, a UNIQUE constraint).
pub(super) fn drop_constraint(
    cx: &Cx,
    table: &TableInfo,
    name: &str,
    if_exists: bool,
) -> Result<Outcome> {
    let tx = cx.tx;
    lock_for_alter(tx, table)?;
    if catalog::change_check(tx, table.def.oid, name, CheckChange::Drop)? {
        return Ok(command("ALTER TABLE"));
    }
    if catalog::foreign_keys::change(tx, table.def.oid, name, FkChange::Drop)? {
        return Ok(command("ALTER TABLE"));
    }
    if let Some(i) = table.indexes.iter().find(|i| i.unique && *i.name == *name) {
        let what = format!("constraint {name} on table {}", table.def.name);
        super::foreign_keys::check_key_unused(tx, table, i, &what)?;
        tx.drop_index(i.oid)?;
        return Ok(command("ALTER TABLE"));
    }
    let missing = format!(
        "constraint \"{name}\" of relation \"{}\" does not exist",
        table.def.name
    );
    if !if_exists {
        return Err(SqlError::new(SqlState::UNDEFINED_OBJECT, missing));
    }
    let mut out = command("ALTER TABLE");
    out.notices
        .push(Notice::new(format!("{missing}, skipping")));
    Ok(out)
}

/// ALTER TABLE ... RENAME CONSTRAINT of a CHECK constraint (42710 if the new name is
/// taken, 42704 if there is none of the old name).
pub(super) fn rename_constraint(
    cx: &Cx,
    table: &TableInfo,
    from: &str,
    to: &str,
) -> Result<Outcome> {
    let tx = cx.tx;
    lock_for_alter(tx, table)?;
    let taken = table.checks.iter().map(|c| c.name.as_str());
    if taken
        .chain(table.indexes.iter().map(|i| &*i.name))
        .chain(table.foreign_keys.iter().map(|f| f.name.as_str()))
        .any(|n| n == to)
    {
        return Err(SqlError::new(
            SqlState::DUPLICATE_OBJECT,
            format!(
                "constraint \"{to}\" for relation \"{}\" already exists",
                table.def.name
            ),
        ));
    }
    if !catalog::change_check(tx, table.def.oid, from, CheckChange::Rename(to))?
        && !catalog::foreign_keys::change(tx, table.def.oid, from, FkChange::Rename(to))?
    {
        return Err(SqlError::new(
            SqlState::UNDEFINED_OBJECT,
            format!(
                "constraint \"{from}\" for table \"{}\" does not exist",
                table.def.name
            ),
        ));
    }
    Ok(command("ALTER TABLE"))
}

/// ALTER COLUMN ... SET NOT NULL (verified over the rows there are: 23502) or DROP NOT NULL.
pub(super) fn set_not_null(
    cx: &Cx,
    table: &TableInfo,
    column: usize,
    not_null: bool,
) -> Result<Outcome> {
    let tx = cx.tx;
    lock_for_alter(tx, table)?;
    if not_null && !table.columns[column].not_null {
        for r in tx.scan(table.def.oid)? {
            let (_, row) = r?;
            cx.interrupt.check()?;
            if row[column].is_null() {
                return Err(SqlError::new(
                    SqlState::NOT_NULL_VIOLATION,
                    format!(
                        "column \"{}\" of relation \"{}\" contains null values",
                        table.columns[column].name, table.def.name
                    ),
                ));
            }
        }
    }
    catalog::set_not_null_flag(tx, table, &[column], not_null)?;
    Ok(command("ALTER TABLE"))
}

/// ALTER COLUMN ... TYPE `ty`, stored as the column's type is: every value must take the
/// new type unchanged (22001 for a string too long, 22003 for a number out of range, as
/// PostgreSQL's assignment cast fails); a value the new type would change (numeric's scale,
/// char(n)'s padding) needs a rewrite quire does not do yet (0A000).
pub(super) fn set_column_type(
    cx: &Cx,
    table: &TableInfo,
    column: usize,
    ty: crate::types::SqlType,
) -> Result<Outcome> {
    let tx = cx.tx;
    lock_for_alter(tx, table)?;
    let col = &table.columns[column];
    for r in tx.scan(table.def.oid)? {
        let (_, row) = r?;
        cx.interrupt.check()?;
        let v = &row[column];
        let cast = crate::types::assign(v.clone(), col.ty, ty, &col.name)?;
        if cast != *v {
            return Err(SqlError::unsupported(format!(
                "ALTER COLUMN ... TYPE {} over values it would change",
                ty.name()
            )));
        }
    }
    catalog::set_column_type(tx, table, column, ty)?;
    Ok(command("ALTER TABLE"))
}
