//! CHECK constraints as stored: `quire_sql_constraint` (PostgreSQL's `pg_constraint` for the
//! kinds quire keeps outside the engine), one row per constraint with its table, oid, name,
//! kind (`c`), expression as SQL text (bound again where it is used, as DEFAULTs are) and
//! whether it was validated (NOT VALID leaves rows that existed unchecked). Written in the
//! statement's transaction, so it rolls back with the DDL that made it. Oids come from the
//! reserved sequence `quire_sql_constraint_oid` above [`CHECK_OID_BASE`], apart from the
//! oids of the constraints that are unique indexes (`pg_catalog`'s base plus the index's).

use std::ops::Bound::Included;

use quire_engine::{Column, SeqOptions, SqlState, TableId, Tid, Transaction, Type, Value};

use crate::error::{Result, SqlError};

const TABLE: &str = "quire_sql_constraint";
const INDEX: &str = "quire_sql_constraint_table";
const OIDS: &str = "quire_sql_constraint_oid";
/// The first oid of a CHECK constraint.
pub(crate) const CHECK_OID_BASE: u32 = 3 << 29;

/// A CHECK constraint of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CheckInfo {
    pub oid: u32,
    pub name: String,
    /// The expression, as SQL text.
    pub expr: String,
    /// False for NOT VALID until VALIDATE CONSTRAINT: rows from before may violate it.
    pub validated: bool,
}

/// Creates the table, its index and its oid sequence if missing.
pub(super) fn bootstrap(tx: &Transaction) -> Result<()> {
    if tx.find_table(TABLE)?.is_some() {
        return Ok(());
    }
    let table = tx.create_table(
        TABLE,
        &[
            Column::new("table_oid", Type::Int),
            Column::new("oid", Type::Int),
            Column::new("name", Type::Text),
            Column::new("kind", Type::Text),
            Column::new("expr", Type::Text),
            Column::new("validated", Type::Bool),
        ],
    )?;
    tx.create_index(INDEX, table, &["table_oid"], false)?;
    tx.create_sequence(OIDS, &SeqOptions::default())?;
    Ok(())
}

fn key(table: TableId) -> Value {
    Value::Int(table.0.cast_signed())
}

fn corrupt(table: TableId) -> SqlError {
    SqlError::new(
        SqlState::INTERNAL_ERROR,
        format!("the constraint entries of table with oid {table} are damaged"),
    )
}

/// The constraint rows of `table`, with their addresses.
fn rows(tx: &Transaction, table: TableId) -> Result<Vec<(Tid, CheckInfo)>> {
    let index = tx.index(INDEX)?;
    let k = [key(table)];
    let mut out = Vec::new();
    for r in tx.index_scan(index, Included(&k[..]), Included(&k[..]))? {
        let (tid, row) = r?;
        let oid = row[1].as_int().and_then(|o| u32::try_from(o).ok());
        let (Some(oid), Some(name), Some("c"), Some(expr), Value::Bool(validated)) = (
            oid,
            row[2].as_text(),
            row[3].as_text(),
            row[4].as_text(),
            &row[5],
        ) else {
            return Err(corrupt(table));
        };
        out.push((
            tid,
            CheckInfo {
                oid,
                name: name.to_string(),
                expr: expr.to_string(),
                validated: *validated,
            },
        ));
    }
    out.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    Ok(out)
}

/// The CHECK constraints of `table`, by name (the order PostgreSQL checks them in).
pub(crate) fn checks(tx: &Transaction, table: TableId) -> Result<Vec<CheckInfo>> {
    Ok(rows(tx, table)?.into_iter().map(|(_, c)| c).collect())
}

/// A new constraint oid (CHECK and FOREIGN KEY constraints share the sequence).
pub(super) fn next_oid(tx: &Transaction) -> Result<u32> {
    let Some(quire_engine::Entry::Sequence(seq)) = tx.relation_named(OIDS)? else {
        return Err(SqlError::new(
            SqlState::INTERNAL_ERROR,
            format!("the sequence {OIDS} is missing"),
        ));
    };
    let n = tx.nextval(seq.oid)?;
    u32::try_from(n)
        .ok()
        .and_then(|n| n.checked_add(CHECK_OID_BASE))
        .ok_or_else(|| SqlError::new(SqlState::PROGRAM_LIMIT_EXCEEDED, "out of constraint oids"))
}

/// Records a CHECK constraint of `table`.
pub(crate) fn add_check(
    tx: &Transaction,
    table: TableId,
    name: &str,
    expr: &str,
    validated: bool,
) -> Result<()> {
    let oid = next_oid(tx)?;
    let meta = tx.table(TABLE)?;
    tx.insert(
        meta,
        &[
            key(table),
            Value::Int(i64::from(oid)),
            Value::Text(name.to_string()),
            Value::Text("c".into()),
            Value::Text(expr.to_string()),
            Value::Bool(validated),
        ],
    )?;
    tx.note_definition_change();
    Ok(())
}

/// What [`change_check`] does to a constraint.
#[derive(Clone, Copy)]
pub(crate) enum CheckChange<'a> {
    Drop,
    Rename(&'a str),
    Validated,
}

/// Drops, renames or marks validated the CHECK constraint `name` of `table`; false if it
/// has none of that name.
pub(crate) fn change_check(
    tx: &Transaction,
    table: TableId,
    name: &str,
    change: CheckChange,
) -> Result<bool> {
    let meta = tx.table(TABLE)?;
    let Some((tid, c)) = rows(tx, table)?.into_iter().find(|(_, c)| c.name == name) else {
        return Ok(false);
    };
    let row = |name: &str, validated: bool| {
        [
            key(table),
            Value::Int(i64::from(c.oid)),
            Value::Text(name.to_string()),
            Value::Text("c".into()),
            Value::Text(c.expr.clone()),
            Value::Bool(validated),
        ]
    };
    match change {
        CheckChange::Drop => tx.delete(meta, tid).map(|_| ())?,
        CheckChange::Rename(to) => tx.update(meta, tid, &row(to, c.validated)).map(|_| ())?,
        CheckChange::Validated => tx.update(meta, tid, &row(&c.name, true)).map(|_| ())?,
    }
    tx.note_definition_change();
    Ok(true)
}

/// Drops every constraint row of `table` (DROP TABLE).
pub(super) fn drop_all(tx: &Transaction, table: TableId) -> Result<()> {
    let meta = tx.table(TABLE)?;
    for (tid, _) in rows(tx, table)? {
        tx.delete(meta, tid)?;
    }
    Ok(())
}
