//! ALTER TABLE ... ALTER [COLUMN] ... SET STORAGE: how TOAST stores a column's values from
//! now on (the engine's [`quire_engine::Storage`], PostgreSQL's `attstorage`). Rows already
//! stored stay as they are, as in PostgreSQL.

use quire_engine::{SqlState, Storage, Transaction};

use crate::catalog;
use crate::error::{Result, SqlError};

/// ALTER TABLE [IF EXISTS] [ONLY] table ALTER [COLUMN] column SET STORAGE kind (which
/// `sqlparser` lacks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetStorageStmt {
    pub if_exists: bool,
    /// The table's name, without a `public.` schema.
    pub table: String,
    pub column: String,
    /// The storage as written, lower case: plain, external, extended, main or default.
    pub storage: String,
}

/// Runs `stmt` in `tx` on the table whose engine name is `table` (a temporary table's
/// resolved); the notices (IF EXISTS of a missing table).
pub(crate) fn set_storage(
    tx: &Transaction,
    stmt: &SetStorageStmt,
    table: &str,
) -> Result<Vec<String>> {
    let wanted = match stmt.storage.as_str() {
        "plain" => Some(Storage::Plain),
        "external" => Some(Storage::External),
        "extended" => Some(Storage::Extended),
        "main" => Some(Storage::Main),
        "default" => None,
        other => {
            return Err(SqlError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                format!("invalid storage type \"{other}\""),
            ))
        }
    };
    if stmt.if_exists && tx.find_table(table)?.is_none() {
        return Ok(vec![format!(
            "relation \"{}\" does not exist, skipping",
            stmt.table
        )]);
    }
    let table = catalog::lookup(tx, table)?;
    let position = table.column(&stmt.column)?;
    let engine_type = table.def.columns[position].ty;
    let storage = wanted.unwrap_or_else(|| Storage::default_for(engine_type));
    let ty = table.columns[position].ty;
    if storage != Storage::Plain && ty.typstorage() == "p" {
        return Err(SqlError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            format!("column data type {} can only have storage PLAIN", ty.name()),
        ));
    }
    tx.set_storage(table.def.oid, position, storage)?;
    Ok(Vec::new())
}
