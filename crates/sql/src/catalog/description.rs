//! Comments (COMMENT ON) as stored: `quire_sql_description`, PostgreSQL's `pg_description`:
//! one row per commented object, keyed by the object's oid, the oid of the catalog it is
//! in (pg_class for relations, pg_namespace for schemas) and its column number (0 for the
//! object itself). Written in the statement's transaction, so a comment rolls back with
//! it; a relation's comments, and its columns', go when the relation is dropped.

use std::ops::Bound::Included;

use quire_engine::{Column, SqlState, Transaction, Type, Value};

use crate::error::{Result, SqlError};

const TABLE: &str = "quire_sql_description";
const INDEX: &str = "quire_sql_description_object";

/// One comment: what it is on, and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Description {
    pub objoid: u32,
    pub classoid: u32,
    pub objsubid: i32,
    pub text: String,
}

/// Creates the table and its index if missing.
pub(super) fn bootstrap(tx: &Transaction) -> Result<()> {
    if tx.find_table(TABLE)?.is_some() {
        return Ok(());
    }
    let table = tx.create_table(
        TABLE,
        &[
            Column::new("objoid", Type::Int),
            Column::new("classoid", Type::Int),
            Column::new("objsubid", Type::Int),
            Column::new("description", Type::Text),
        ],
    )?;
    tx.create_index(INDEX, table, &["objoid"], false)?;
    Ok(())
}

fn corrupt() -> SqlError {
    SqlError::new(SqlState::INTERNAL_ERROR, "the comment entries are damaged")
}

fn decode(row: &[Value]) -> Result<Description> {
    let int = |v: &Value| v.as_int().ok_or_else(corrupt);
    let [o, c, s, Value::Text(text)] = row else {
        return Err(corrupt());
    };
    Ok(Description {
        objoid: u32::try_from(int(o)?).map_err(|_| corrupt())?,
        classoid: u32::try_from(int(c)?).map_err(|_| corrupt())?,
        objsubid: i32::try_from(int(s)?).map_err(|_| corrupt())?,
        text: text.clone(),
    })
}

/// The comments on object `objoid` (and its columns), with their addresses.
fn of_object(tx: &Transaction, objoid: u32) -> Result<Vec<(quire_engine::Tid, Description)>> {
    let index = tx.index(INDEX)?;
    let k = [Value::Int(i64::from(objoid))];
    let mut out = Vec::new();
    for r in tx.index_scan(index, Included(&k[..]), Included(&k[..]))? {
        let (tid, row) = r?;
        out.push((tid, decode(&row)?));
    }
    Ok(out)
}

/// The comments on object `objoid` and its columns (by the index).
pub(crate) fn of(tx: &Transaction, objoid: u32) -> Result<Vec<Description>> {
    if tx.find_table(TABLE)?.is_none() {
        return Ok(Vec::new());
    }
    Ok(of_object(tx, objoid)?.into_iter().map(|(_, d)| d).collect())
}

/// Every stored comment.
pub(crate) fn all(tx: &Transaction) -> Result<Vec<Description>> {
    let Some(table) = tx.find_table(TABLE)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for r in tx.scan(table)? {
        out.push(decode(&r?.1)?);
    }
    Ok(out)
}

/// COMMENT ON: sets the comment, or removes it (`None`, or an empty text, as PostgreSQL).
pub(crate) fn set(tx: &Transaction, key: (u32, u32, i32), text: Option<&str>) -> Result<()> {
    let (objoid, classoid, objsubid) = key;
    let table = tx.table(TABLE)?;
    for (tid, d) in of_object(tx, objoid)? {
        if d.classoid == classoid && d.objsubid == objsubid {
            tx.delete(table, tid)?;
        }
    }
    if let Some(text) = text.filter(|t| !t.is_empty()) {
        tx.insert(
            table,
            &[
                Value::Int(i64::from(objoid)),
                Value::Int(i64::from(classoid)),
                Value::Int(i64::from(objsubid)),
                Value::Text(text.to_string()),
            ],
        )?;
    }
    Ok(())
}

/// Removes the comments on relation `rel` and its columns (it is being dropped).
pub(crate) fn drop_all(tx: &Transaction, rel: quire_engine::Oid) -> Result<()> {
    let Ok(objoid) = u32::try_from(rel.0) else {
        return Ok(());
    };
    if tx.find_table(TABLE)?.is_none() {
        return Ok(());
    }
    let table = tx.table(TABLE)?;
    for (tid, _) in of_object(tx, objoid)? {
        tx.delete(table, tid)?;
    }
    Ok(())
}
