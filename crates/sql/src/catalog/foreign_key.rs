//! FOREIGN KEY constraints as stored: `quire_sql_foreign_key` (PostgreSQL's `pg_constraint`
//! rows of `contype = 'f'`), one row per constraint: the referencing table, the constraint's
//! oid and name, its columns, the referenced table and columns, MATCH, the ON UPDATE and ON
//! DELETE actions, DEFERRABLE and INITIALLY DEFERRED, and whether it was validated. Columns
//! are stored as their positions in the row (a dropped column keeps its place, so positions
//! never move), space-separated. Indexed on both tables, so that a referenced table finds
//! the keys that point at it. Written in the statement's transaction, as every catalog row
//! of the SQL layer; oids come from the constraints' sequence ([`super::constraint`]).

use std::ops::Bound::Included;

use quire_engine::{Column, SqlState, TableId, Tid, Transaction, Type, Value};

use crate::error::{Result, SqlError};

const TABLE: &str = "quire_sql_foreign_key";
const BY_TABLE: &str = "quire_sql_foreign_key_table";
const BY_REFERENCED: &str = "quire_sql_foreign_key_referenced";
const COLUMNS: usize = 12;

/// What a change of a referenced key does to the rows that reference it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FkAction {
    NoAction,
    Restrict,
    Cascade,
    SetNull,
    SetDefault,
}

impl FkAction {
    /// `confupdtype` / `confdeltype`'s letter.
    pub fn letter(self) -> &'static str {
        match self {
            FkAction::NoAction => "a",
            FkAction::Restrict => "r",
            FkAction::Cascade => "c",
            FkAction::SetNull => "n",
            FkAction::SetDefault => "d",
        }
    }

    fn from_letter(l: &str) -> Option<FkAction> {
        Some(match l {
            "a" => FkAction::NoAction,
            "r" => FkAction::Restrict,
            "c" => FkAction::Cascade,
            "n" => FkAction::SetNull,
            "d" => FkAction::SetDefault,
            _ => return None,
        })
    }

    /// As `pg_get_constraintdef` writes it.
    pub fn sql(self) -> &'static str {
        match self {
            FkAction::NoAction => "NO ACTION",
            FkAction::Restrict => "RESTRICT",
            FkAction::Cascade => "CASCADE",
            FkAction::SetNull => "SET NULL",
            FkAction::SetDefault => "SET DEFAULT",
        }
    }
}

/// A FOREIGN KEY constraint of `table` referencing `ref_table`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ForeignKey {
    pub oid: u32,
    pub name: String,
    pub table: TableId,
    pub columns: Vec<usize>,
    pub ref_table: TableId,
    /// The referenced columns, pairwise with `columns`.
    pub ref_columns: Vec<usize>,
    /// MATCH FULL (else MATCH SIMPLE: a key with a NULL is not checked).
    pub match_full: bool,
    pub on_update: FkAction,
    pub on_delete: FkAction,
    pub deferral: Deferral,
    /// False for NOT VALID until VALIDATE CONSTRAINT.
    pub validated: bool,
}

/// When a foreign key's checks run: NOT DEFERRABLE, or DEFERRABLE and INITIALLY IMMEDIATE
/// or INITIALLY DEFERRED.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Deferral {
    NotDeferrable,
    InitiallyImmediate,
    InitiallyDeferred,
}

impl Deferral {
    pub fn deferrable(self) -> bool {
        self != Deferral::NotDeferrable
    }

    pub fn initially_deferred(self) -> bool {
        self == Deferral::InitiallyDeferred
    }

    fn of(deferrable: bool, deferred: bool) -> Option<Deferral> {
        match (deferrable, deferred) {
            (false, false) => Some(Deferral::NotDeferrable),
            (true, false) => Some(Deferral::InitiallyImmediate),
            (true, true) => Some(Deferral::InitiallyDeferred),
            (false, true) => None,
        }
    }
}

/// Creates the table and its indexes if missing.
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
            Column::new("columns", Type::Text),
            Column::new("ref_table_oid", Type::Int),
            Column::new("ref_columns", Type::Text),
            Column::new("match_full", Type::Bool),
            Column::new("on_update", Type::Text),
            Column::new("on_delete", Type::Text),
            Column::new("deferrable", Type::Bool),
            Column::new("deferred", Type::Bool),
            Column::new("validated", Type::Bool),
        ],
    )?;
    tx.create_index(BY_TABLE, table, &["table_oid"], false)?;
    tx.create_index(BY_REFERENCED, table, &["ref_table_oid"], false)?;
    Ok(())
}

fn oid_value(t: TableId) -> Value {
    Value::Int(t.0.cast_signed())
}

fn corrupt() -> SqlError {
    SqlError::new(
        SqlState::INTERNAL_ERROR,
        "the foreign key entries of the catalog are damaged",
    )
}

fn positions_text(cols: &[usize]) -> String {
    cols.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

fn positions(text: &str) -> Option<Vec<usize>> {
    text.split(' ').map(|p| p.parse().ok()).collect()
}

fn to_row(fk: &ForeignKey) -> Vec<Value> {
    vec![
        oid_value(fk.table),
        Value::Int(i64::from(fk.oid)),
        Value::Text(fk.name.clone()),
        Value::Text(positions_text(&fk.columns)),
        oid_value(fk.ref_table),
        Value::Text(positions_text(&fk.ref_columns)),
        Value::Bool(fk.match_full),
        Value::Text(fk.on_update.letter().into()),
        Value::Text(fk.on_delete.letter().into()),
        Value::Bool(fk.deferral.deferrable()),
        Value::Bool(fk.deferral.initially_deferred()),
        Value::Bool(fk.validated),
    ]
}

fn from_row(row: &[Value]) -> Option<ForeignKey> {
    let table_id = |v: &Value| {
        v.as_int()
            .and_then(|o| u64::try_from(o).ok())
            .map(quire_engine::Oid)
    };
    let flag = |v: &Value| match v {
        Value::Bool(b) => Some(*b),
        _ => None,
    };
    if row.len() != COLUMNS {
        return None;
    }
    let fk = ForeignKey {
        table: table_id(&row[0])?,
        oid: row[1].as_int().and_then(|o| u32::try_from(o).ok())?,
        name: row[2].as_text()?.to_string(),
        columns: positions(row[3].as_text()?)?,
        ref_table: table_id(&row[4])?,
        ref_columns: positions(row[5].as_text()?)?,
        match_full: flag(&row[6])?,
        on_update: FkAction::from_letter(row[7].as_text()?)?,
        on_delete: FkAction::from_letter(row[8].as_text()?)?,
        deferral: Deferral::of(flag(&row[9])?, flag(&row[10])?)?,
        validated: flag(&row[11])?,
    };
    (fk.columns.len() == fk.ref_columns.len()).then_some(fk)
}

/// The rows found through `index` for `table`, with their addresses, by name.
fn rows(tx: &Transaction, index: &str, table: TableId) -> Result<Vec<(Tid, ForeignKey)>> {
    let index = tx.index(index)?;
    let k = [oid_value(table)];
    let mut out = Vec::new();
    for r in tx.index_scan(index, Included(&k[..]), Included(&k[..]))? {
        let (tid, row) = r?;
        out.push((tid, from_row(&row).ok_or_else(corrupt)?));
    }
    out.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    Ok(out)
}

/// The foreign keys of `table` (it references others through them), by name.
pub(crate) fn of_table(tx: &Transaction, table: TableId) -> Result<Vec<ForeignKey>> {
    Ok(rows(tx, BY_TABLE, table)?
        .into_iter()
        .map(|(_, f)| f)
        .collect())
}

/// The foreign keys that reference `table`, oldest first.
pub(crate) fn referencing(tx: &Transaction, table: TableId) -> Result<Vec<ForeignKey>> {
    let mut keys: Vec<ForeignKey> = rows(tx, BY_REFERENCED, table)?
        .into_iter()
        .map(|(_, f)| f)
        .collect();
    // In the order they were made, as PostgreSQL's dependency walks list them.
    keys.sort_by_key(|f| f.oid);
    Ok(keys)
}

/// Every foreign key of the database (`pg_constraint`).
pub(crate) fn all(tx: &Transaction) -> Result<Vec<ForeignKey>> {
    let mut out = Vec::new();
    for r in tx.scan(tx.table(TABLE)?)? {
        let (_, row) = r?;
        out.push(from_row(&row).ok_or_else(corrupt)?);
    }
    out.sort_by_key(|f| f.oid);
    Ok(out)
}

/// Records `fk` (its `oid` is given here) and returns its oid.
pub(crate) fn add(tx: &Transaction, fk: &ForeignKey) -> Result<u32> {
    let mut fk = fk.clone();
    fk.oid = super::constraint::next_oid(tx)?;
    tx.insert(tx.table(TABLE)?, &to_row(&fk))?;
    tx.note_definition_change();
    Ok(fk.oid)
}

/// What [`change`] does to a foreign key.
#[derive(Clone, Copy)]
pub(crate) enum FkChange<'a> {
    Drop,
    Rename(&'a str),
    Validated,
}

/// Drops, renames or marks validated the foreign key `name` of `table`; false if it has
/// none of that name.
pub(crate) fn change(tx: &Transaction, table: TableId, name: &str, what: FkChange) -> Result<bool> {
    let meta = tx.table(TABLE)?;
    let Some((tid, mut fk)) = rows(tx, BY_TABLE, table)?
        .into_iter()
        .find(|(_, f)| f.name == name)
    else {
        return Ok(false);
    };
    match what {
        FkChange::Drop => {
            tx.delete(meta, tid)?;
        }
        FkChange::Rename(to) => {
            fk.name = to.to_string();
            tx.update(meta, tid, &to_row(&fk))?;
        }
        FkChange::Validated => {
            fk.validated = true;
            tx.update(meta, tid, &to_row(&fk))?;
        }
    }
    tx.note_definition_change();
    Ok(true)
}

/// Drops the foreign keys of `table` (DROP TABLE). Those that reference it must be gone
/// first (DROP ... CASCADE drops them, else DROP fails).
pub(super) fn drop_all(tx: &Transaction, table: TableId) -> Result<()> {
    let meta = tx.table(TABLE)?;
    for (tid, _) in rows(tx, BY_TABLE, table)? {
        tx.delete(meta, tid)?;
    }
    Ok(())
}
