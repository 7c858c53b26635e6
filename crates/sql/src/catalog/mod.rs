//! What SQL knows of a table beyond the engine's catalog: each column's declared SQL type
//! (the engine stores every integer as `Int`) and NOT NULL. It lives in an ordinary engine
//! table, `quire_sql_columns` (one row per column), written in the same transaction as the
//! engine's catalog entry, so that CREATE and DROP TABLE roll back as one. The primary key is
//! the unique engine index named `<table>_pkey`, as PostgreSQL names it.
//!
//! Column defaults live likewise in `quire_sql_attrdef` (PostgreSQL's `pg_attrdef`): one row
//! per column with a DEFAULT (its expression as SQL text, bound again where it is used) or
//! an owned sequence (a `serial` column's, dropped with the table, as PostgreSQL's
//! `pg_depend` auto dependency). The table is created at startup when missing, so a data
//! directory made before it existed gains it.
//!
//! CHECK constraints live in `quire_sql_constraint` ([`constraint`]). Views are engine
//! catalog entries whose body is this layer's ([`view`]).
//!
//! Temporary tables (CREATE TEMP TABLE) are engine tables named with the session's prefix,
//! `quire_temp_<pid>_<name>` ([`TempTables`]): in quire's reserved namespace, so no other
//! session can name them, and found before a permanent table of the same name (PostgreSQL
//! searches `pg_temp` first). Statements see the name without the prefix. The session drops
//! them when it ends; [`bootstrap`] drops any a crash left. They are WAL-logged like any
//! table (the engine has no unlogged relations yet).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Bound::Included;

use quire_engine::{
    Column, Database, Error, IndexDef, IndexId, IsolationLevel, LockMode, SqlState, TableDef,
    TableId, Transaction, Type, Value,
};

use crate::error::{Result, SqlError};
use crate::types::SqlType;

mod constraint;
pub(crate) mod description;
mod foreign_key;
mod owner;
mod storage;
pub(crate) mod view;

pub(crate) use owner::{alter_owner, AlterOwnerStmt};
pub(crate) use storage::{set_storage, SetStorageStmt};

pub(crate) use constraint::{add_check, change_check, CheckChange, CheckInfo, CHECK_OID_BASE};
pub(crate) use foreign_key::{Deferral, FkAction, FkChange, ForeignKey};
pub(crate) mod foreign_keys {
    //! The stored foreign keys ([`super::foreign_key`]).
    pub(crate) use super::foreign_key::{add, all, change};
}

/// The SQL layer's column table; names with this prefix are reserved.
pub(crate) const COLUMNS_TABLE: &str = "quire_sql_columns";
const COLUMNS_INDEX: &str = "quire_sql_columns_table";
const ATTRDEF_TABLE: &str = "quire_sql_attrdef";
const ATTRDEF_INDEX: &str = "quire_sql_attrdef_table";
/// The attrdef table's columns: table, column, DEFAULT text, owned sequence, identity.
const ATTRDEF_COLUMNS: usize = 5;
pub(crate) const RESERVED_PREFIX: &str = "quire_";
/// The prefix of every session's temporary tables ([`TempTables`]).
const TEMP_PREFIX: &str = "quire_temp_";

/// What a temporary table does at each commit (CREATE TEMP TABLE ... ON COMMIT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnCommit {
    PreserveRows,
    DeleteRows,
    Drop,
}

/// A session's temporary tables: the prefix of their engine names, whether the session
/// made any (until then no lookup looks for one), and what each does at commit.
#[derive(Debug, Default)]
pub(crate) struct TempTables {
    prefix: String,
    used: bool,
    on_commit: Vec<(String, OnCommit)>,
}

impl TempTables {
    /// The temporary namespace of the session with process id `pid`.
    pub fn new(pid: i32) -> TempTables {
        TempTables {
            prefix: format!("{TEMP_PREFIX}{pid}_"),
            used: false,
            on_commit: Vec::new(),
        }
    }

    /// The engine name of this session's temporary table `name`.
    pub fn engine_name(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// Notes a temporary table made (its engine name) and what it does at commit.
    pub fn created(&mut self, engine_name: &str, on_commit: OnCommit) {
        self.used = true;
        self.on_commit.retain(|(n, _)| n != engine_name);
        if on_commit != OnCommit::PreserveRows {
            self.on_commit.push((engine_name.to_string(), on_commit));
        }
    }

    /// The engine name of the table a statement's unqualified `name` means: this session's
    /// temporary table of that name if there is one, else `name`.
    pub fn resolve(&self, tx: &Transaction, name: &str) -> Result<String> {
        if self.used {
            let temp = self.engine_name(name);
            if find(tx, &temp)?.is_some() {
                return Ok(temp);
            }
        }
        Ok(name.to_string())
    }

    /// ON COMMIT DELETE ROWS and ON COMMIT DROP, done in `tx` just before it commits.
    pub fn before_commit(&mut self, tx: &Transaction) -> Result<()> {
        let mut kept = Vec::with_capacity(self.on_commit.len());
        for (name, action) in std::mem::take(&mut self.on_commit) {
            let Some(oid) = find(tx, &name)? else {
                continue;
            };
            match action {
                OnCommit::DeleteRows => {
                    tx.truncate(oid)?;
                    kept.push((name, action));
                }
                OnCommit::Drop => drop(tx, oid)?,
                OnCommit::PreserveRows => kept.push((name, action)),
            }
        }
        self.on_commit = kept;
        Ok(())
    }

    /// Drops every temporary table of the session in `tx` (DISCARD TEMP in a block).
    pub fn drop_in(&mut self, tx: &Transaction) -> Result<()> {
        if !self.used {
            return Ok(());
        }
        for def in tx.tables()? {
            if def.name.starts_with(&self.prefix) {
                drop(tx, def.oid)?;
            }
        }
        self.on_commit.clear();
        Ok(())
    }

    /// Drops every temporary table of the session (at its end), in a transaction of its own.
    pub fn drop_all(&mut self, db: &Database) -> Result<()> {
        if !std::mem::take(&mut self.used) {
            return Ok(());
        }
        drop_prefixed(db, &self.prefix)
    }
}

/// Drops every table whose name starts with `prefix`, in a transaction of its own.
fn drop_prefixed(db: &Database, prefix: &str) -> Result<()> {
    let tx = db.begin(IsolationLevel::ReadCommitted)?;
    for def in tx.tables()? {
        if def.name.starts_with(prefix) {
            drop(&tx, def.oid)?;
        }
    }
    tx.commit()?;
    Ok(())
}

/// The name a statement sees for engine table `name`: a temporary table's without its
/// session's prefix.
pub(crate) fn display_name(name: &str) -> &str {
    name.strip_prefix(TEMP_PREFIX)
        .and_then(|rest| rest.split_once('_'))
        .filter(|(pid, _)| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit() || b == b'-'))
        .map_or(name, |(_, n)| n)
}

/// A column as SQL sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ColumnInfo {
    pub name: String,
    pub ty: SqlType,
    pub not_null: bool,
    /// The DEFAULT expression, as SQL text.
    pub default: Option<String>,
    /// Dropped (ALTER TABLE ... DROP COLUMN): it keeps its place in stored rows, under a
    /// name no statement can write, and `*` and column lists leave it out.
    pub dropped: bool,
    /// The sequence this column owns (a `serial` or identity column's), dropped with it.
    pub owned_seq: Option<quire_engine::Oid>,
    /// GENERATED ... AS IDENTITY: the column's values come from `owned_seq` (its `default`
    /// is that sequence's nextval, as for `serial`, but shown as identity, not DEFAULT).
    pub identity: Option<Identity>,
}

/// How an identity column takes a value a statement gives (PostgreSQL's `attidentity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Identity {
    /// GENERATED ALWAYS: only with OVERRIDING SYSTEM VALUE.
    Always,
    /// GENERATED BY DEFAULT: like a DEFAULT.
    ByDefault,
}

impl Identity {
    /// `attidentity`'s letter.
    pub fn letter(self) -> &'static str {
        match self {
            Identity::Always => "a",
            Identity::ByDefault => "d",
        }
    }

    fn from_letter(l: &str) -> Option<Identity> {
        match l {
            "a" => Some(Identity::Always),
            "d" => Some(Identity::ByDefault),
            _ => None,
        }
    }
}

/// A table as SQL sees it.
#[derive(Clone, Debug)]
pub(crate) struct TableInfo {
    pub def: TableDef,
    pub columns: Vec<ColumnInfo>,
    /// The primary key's index and its columns' positions.
    pub pkey: Option<(IndexId, Vec<usize>)>,
    /// Every index of the table (the primary key's too), for the planner.
    pub indexes: Vec<IndexDef>,
    /// A session's temporary table (its `def.name` is the name statements see).
    pub temp: bool,
    /// The CHECK constraints, by name.
    pub checks: Vec<CheckInfo>,
    /// The FOREIGN KEY constraints of this table, by name.
    pub foreign_keys: Vec<ForeignKey>,
    /// The FOREIGN KEY constraints that reference this table (a self-reference is in both).
    pub referenced_by: Vec<ForeignKey>,
}

impl TableInfo {
    /// The positions of the columns a statement sees (all but the dropped ones), in order:
    /// an INSERT's or a COPY's columns when it names none.
    pub fn visible_columns(&self) -> Vec<usize> {
        (0..self.columns.len())
            .filter(|&i| !self.columns[i].dropped)
            .collect()
    }

    pub fn column(&self, name: &str) -> Result<usize> {
        self.columns
            .iter()
            .position(|c| c.name == name && !c.dropped)
            .ok_or_else(|| {
                SqlError::new(
                    SqlState::UNDEFINED_COLUMN,
                    format!(
                        "column \"{name}\" of relation \"{}\" does not exist",
                        self.def.name
                    ),
                )
            })
    }
}

/// Creates the SQL layer's tables that are missing: all of them on a data directory's first
/// start as a server.
pub fn bootstrap(db: &Database) -> Result<()> {
    let tx = db.begin(IsolationLevel::ReadCommitted)?;
    if find(&tx, COLUMNS_TABLE)?.is_none() {
        let table = tx.create_table(
            COLUMNS_TABLE,
            &[
                Column::new("table_oid", Type::Int),
                Column::new("attnum", Type::Int),
                Column::new("type_name", Type::Text),
                Column::new("not_null", Type::Bool),
            ],
        )?;
        tx.create_index(COLUMNS_INDEX, table, &["table_oid"], false)?;
    }
    if find(&tx, ATTRDEF_TABLE)?.is_none() {
        let table = tx.create_table(
            ATTRDEF_TABLE,
            &[
                Column::new("table_oid", Type::Int),
                Column::new("attnum", Type::Int),
                Column::new("expr", Type::Text),
                Column::new("owned_seq", Type::Int),
            ],
        )?;
        tx.create_index(ATTRDEF_INDEX, table, &["table_oid"], false)?;
    }
    // Data directories made before identity columns lack the attrdef column for them.
    let attrdef = tx.table(ATTRDEF_TABLE)?;
    if tx.table_def(attrdef)?.columns.len() < ATTRDEF_COLUMNS {
        tx.add_column(attrdef, Column::new("identity", Type::Text))?;
    }
    constraint::bootstrap(&tx)?;
    foreign_key::bootstrap(&tx)?;
    description::bootstrap(&tx)?;
    tx.commit()?;
    // Temporary tables a crash left behind: their sessions are gone.
    drop_prefixed(db, TEMP_PREFIX)
}

/// A row of `quire_sql_attrdef`: a column's DEFAULT, the sequence it owns, and whether it
/// is an identity column.
struct AttrDef {
    attnum: usize,
    expr: Option<String>,
    owned_seq: Option<quire_engine::Oid>,
    identity: Option<Identity>,
}

/// The attrdef rows of `table`, with their addresses.
fn attrdefs(tx: &Transaction, table: TableId) -> Result<Vec<(quire_engine::Tid, AttrDef)>> {
    let index = tx.index(ATTRDEF_INDEX)?;
    let key = [oid_value(table)];
    let mut out = Vec::new();
    for row in tx.index_scan(index, Included(&key[..]), Included(&key[..]))? {
        let (tid, row) = row?;
        let attnum = row[1].as_int().and_then(|a| usize::try_from(a).ok());
        let owned = match &row[3] {
            Value::Null => None,
            v => Some(v.as_int().and_then(|o| u64::try_from(o).ok())),
        };
        let expr = match &row[2] {
            Value::Null => None,
            Value::Text(t) => Some(t.clone()),
            _ => return Err(corrupt(&format!("with oid {table}"))),
        };
        let identity = match row.get(4) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_text().and_then(Identity::from_letter)),
        };
        let (Some(attnum), None | Some(Some(_)), None | Some(Some(_))) = (attnum, owned, identity)
        else {
            return Err(corrupt(&format!("with oid {table}")));
        };
        out.push((
            tid,
            AttrDef {
                attnum,
                expr,
                owned_seq: owned.flatten().map(quire_engine::Oid),
                identity: identity.flatten(),
            },
        ));
    }
    Ok(out)
}

/// The table and column that own sequence `seq` (a `serial` column's), if any: a scan of
/// every attrdef row, which only DROP SEQUENCE needs.
pub(crate) fn owner_of(tx: &Transaction, seq: quire_engine::Oid) -> Result<Option<TableId>> {
    let meta = tx.table(ATTRDEF_TABLE)?;
    for row in tx.scan(meta)? {
        let (_, row) = row?;
        if row[3].as_int() == Some(seq.0.cast_signed()) {
            let table = row[0].as_int().and_then(|t| u64::try_from(t).ok());
            return Ok(table.map(quire_engine::Oid));
        }
    }
    Ok(None)
}

/// Records column `attnum`'s DEFAULT and the sequence it owns (keeping one it owned), and
/// whether it is an identity column.
pub(crate) fn set_default(
    tx: &Transaction,
    table: TableId,
    attnum: usize,
    expr: Option<&str>,
    owned_seq: Option<quire_engine::Oid>,
) -> Result<()> {
    let identity = attrdefs(tx, table)?
        .into_iter()
        .find(|(_, d)| d.attnum == attnum)
        .and_then(|(_, d)| d.identity);
    write_attrdef(tx, table, attnum, expr, owned_seq, identity)
}

/// Makes column `attnum` an identity column of `kind` (or not, `None`), keeping its DEFAULT
/// text and sequence.
pub(crate) fn set_identity(
    tx: &Transaction,
    table: TableId,
    attnum: usize,
    kind: Option<Identity>,
) -> Result<()> {
    let d = attrdefs(tx, table)?
        .into_iter()
        .find(|(_, d)| d.attnum == attnum)
        .map(|(_, d)| d);
    let expr = d.as_ref().and_then(|d| d.expr.clone());
    write_attrdef(tx, table, attnum, expr.as_deref(), None, kind)
}

/// ALTER SEQUENCE ... OWNED BY: sequence `seq` is owned by `owner`'s column (the table
/// named first, then the column), or by nothing (NONE).
pub(crate) fn set_owner(
    tx: &Transaction,
    seq: quire_engine::Oid,
    owner: Option<(String, String)>,
) -> Result<()> {
    if let Some(table) = owner_of(tx, seq)? {
        let meta = tx.table(ATTRDEF_TABLE)?;
        for (tid, d) in attrdefs(tx, table)? {
            if d.owned_seq == Some(seq) {
                tx.delete(meta, tid)?;
                write_attrdef(tx, table, d.attnum, d.expr.as_deref(), None, d.identity)?;
            }
        }
    }
    let Some((table, column)) = owner else {
        tx.note_definition_change();
        return Ok(());
    };
    let t = lookup(tx, &table)?;
    let attnum = t.column(&column)?;
    let c = &t.columns[attnum];
    write_attrdef(
        tx,
        t.def.oid,
        attnum,
        c.default.as_deref(),
        Some(seq),
        c.identity,
    )
}

fn write_attrdef(
    tx: &Transaction,
    table: TableId,
    attnum: usize,
    expr: Option<&str>,
    owned_seq: Option<quire_engine::Oid>,
    identity: Option<Identity>,
) -> Result<()> {
    let meta = tx.table(ATTRDEF_TABLE)?;
    let existing = attrdefs(tx, table)?;
    let mut owned = owned_seq;
    for (tid, d) in existing {
        if d.attnum == attnum {
            owned = owned.or(d.owned_seq);
            tx.delete(meta, tid)?;
        }
    }
    if expr.is_some() || owned.is_some() || identity.is_some() {
        tx.insert(
            meta,
            &[
                oid_value(table),
                Value::Int(i64::try_from(attnum).expect("a column index fits in i64")),
                expr.map_or(Value::Null, |e| Value::Text(e.to_string())),
                owned.map_or(Value::Null, oid_value),
                identity.map_or(Value::Null, |k| Value::Text(k.letter().into())),
            ],
        )?;
    }
    tx.note_definition_change();
    Ok(())
}

/// The table named `name`, if there is one; a missing table is no error here (IF EXISTS,
/// IF NOT EXISTS), and the transaction goes on.
pub(crate) fn find(tx: &Transaction, name: &str) -> Result<Option<TableId>> {
    Ok(tx.find_table(name)?)
}

/// Most tables one session's [`TableCache`] keeps.
pub(crate) const MAX_CACHED_TABLES: usize = 256;

/// A session's tables as SQL sees them ([`TableInfo`]), by name, each kept with the catalog
/// generation and the oid it was read at. The simple protocol binds every statement anew,
/// and reading a definition (the SQL column rows, the DEFAULTs, the indexes) was an eighth
/// of a simple SELECT's time. An entry serves only while the generation is unchanged (no
/// definition changed for anyone; see the plan cache's rules) and the name still names the
/// same oid. At most [`MAX_CACHED_TABLES`] entries: a full cache starts over.
#[derive(Default)]
pub(crate) struct TableCache {
    entries: HashMap<String, (u64, TableId, TableInfo)>,
    /// The session's temporary tables, which decide what a name means.
    pub temp: TempTables,
}

impl TableCache {
    fn get(&self, name: &str, generation: u64, oid: TableId) -> Option<TableInfo> {
        let (g, o, info) = self.entries.get(name)?;
        (*g == generation && *o == oid).then(|| info.clone())
    }

    fn put(&mut self, name: &str, generation: u64, oid: TableId, info: TableInfo) {
        if self.entries.len() >= MAX_CACHED_TABLES && !self.entries.contains_key(name) {
            self.entries.clear();
        }
        self.entries
            .insert(name.to_string(), (generation, oid, info));
        assert!(
            self.entries.len() <= MAX_CACHED_TABLES,
            "table cache over its bound"
        );
    }
}

/// Oids are handed out from a counter far below 2^63, so the cast cannot wrap.
fn oid_value(oid: TableId) -> Value {
    Value::Int(oid.0.cast_signed())
}

/// 42501 for a name in quire's reserved namespace: SQL may not read or change the SQL
/// layer's own catalog table (a dropped or edited row would break every later lookup).
pub(crate) fn check_not_reserved(name: &str) -> Result<()> {
    if name.starts_with(RESERVED_PREFIX) {
        return Err(SqlError::new(
            SqlState::INSUFFICIENT_PRIVILEGE,
            format!(
                "table names starting with \"{RESERVED_PREFIX}\" are reserved for quire's catalog"
            ),
        ));
    }
    Ok(())
}

/// The table named `name`, with its SQL column types (42P01 if there is none).
pub(crate) fn lookup(tx: &Transaction, name: &str) -> Result<TableInfo> {
    let oid = oid_of(tx, name)?;
    describe(tx, name, oid)
}

/// The table whose oid is `oid` (a foreign key's other table).
pub(crate) fn lookup_oid(tx: &Transaction, oid: TableId) -> Result<TableInfo> {
    let name = tx.table_def(oid)?.name.to_string();
    describe(tx, &name, oid)
}

/// [`lookup`] through the session's `cache`, valid at catalog generation `generation` (read
/// before binding began, as the plan cache reads it). The table's lock is taken every time,
/// as PostgreSQL's parser locks every table it names; only the reads of the definition are
/// saved.
pub(crate) fn lookup_cached(
    tx: &Transaction,
    cache: &RefCell<TableCache>,
    generation: u64,
    name: &str,
) -> Result<TableInfo> {
    let oid = oid_of(tx, name)?;
    let cached = cache.borrow().get(name, generation, oid);
    if let Some(info) = cached {
        // The lock `describe` would take (and the look again after it).
        tx.lock_table(oid, LockMode::AccessShare, false)?;
        return Ok(info);
    }
    let info = describe(tx, name, oid)?;
    cache.borrow_mut().put(name, generation, oid, info.clone());
    Ok(info)
}

/// The oid of the table named `name` (42P01 if there is none).
fn oid_of(tx: &Transaction, name: &str) -> Result<TableId> {
    if !name.starts_with(TEMP_PREFIX) {
        check_not_reserved(name)?;
    }
    if let Some(oid) = tx.find_table(name)? {
        return Ok(oid);
    }
    if view::named(tx, name)?.is_some() {
        return Err(
            SqlError::new(SqlState::WRONG_OBJECT_TYPE, format!("\"{name}\" is a view"))
                .with_detail("quire reads views but does not write to them or alter them yet."),
        );
    }
    // Missing: through the engine's lookup, whose failure fails the transaction.
    tx.table(name).map_err(|e| match e {
        Error::UndefinedTable { .. } => SqlError::new(
            SqlState::UNDEFINED_TABLE,
            format!("relation \"{}\" does not exist", display_name(name)),
        ),
        e => e.into(),
    })
}

/// Table `oid` (named `name`) as SQL sees it, locked ACCESS SHARE: the engine's definition,
/// the SQL column rows, the DEFAULTs and the indexes.
fn describe(tx: &Transaction, name: &str, oid: TableId) -> Result<TableInfo> {
    let mut def = tx.table_def(oid)?;
    let mut columns: Vec<ColumnInfo> = def
        .columns
        .iter()
        .map(|c| ColumnInfo {
            name: c.name.clone(),
            ty: SqlType::of_engine_type(c.ty),
            not_null: false,
            default: None,
            dropped: c.dropped,
            owned_seq: None,
            identity: None,
        })
        .collect();
    let meta_index = tx.index(COLUMNS_INDEX)?;
    let key = [oid_value(oid)];
    for row in tx.index_scan(meta_index, Included(&key[..]), Included(&key[..]))? {
        let (_, row) = row?;
        let (Some(attnum), Some(type_name), Value::Bool(not_null)) =
            (row[1].as_int(), row[2].as_text(), &row[3])
        else {
            return Err(corrupt(name));
        };
        let col = usize::try_from(attnum)
            .ok()
            .and_then(|i| columns.get_mut(i));
        let (Some(col), Some(ty)) = (col, SqlType::from_name(type_name)) else {
            return Err(corrupt(name));
        };
        if ty.engine_type() != col.ty.engine_type() {
            return Err(corrupt(name));
        }
        col.ty = ty;
        col.not_null = *not_null;
    }
    for (_, d) in attrdefs(tx, oid)? {
        let col = columns.get_mut(d.attnum).ok_or_else(|| corrupt(name))?;
        col.default = d.expr;
        col.owned_seq = d.owned_seq;
        col.identity = d.identity;
    }
    let indexes = tx.table_indexes(oid)?;
    let pkey = indexes
        .iter()
        .find(|i| i.unique && *i.name == *format!("{name}_pkey"))
        .map(|i| (i.oid, i.columns.iter().map(|&c| usize::from(c)).collect()));
    let temp = display_name(&def.name).len() != def.name.len();
    if temp {
        def.name = display_name(&def.name).into();
    }
    let checks = constraint::checks(tx, oid)?;
    Ok(TableInfo {
        def,
        columns,
        pkey,
        indexes,
        temp,
        checks,
        foreign_keys: foreign_key::of_table(tx, oid)?,
        referenced_by: foreign_key::referencing(tx, oid)?,
    })
}

fn corrupt(table: &str) -> SqlError {
    SqlError::new(
        SqlState::INTERNAL_ERROR,
        format!("the SQL column entries of table \"{table}\" do not match the table"),
    )
}

/// CREATE TABLE: the engine's table, its SQL column rows, and its primary key index.
pub(crate) fn create(
    tx: &Transaction,
    name: &str,
    columns: &[ColumnInfo],
    pkey: Option<&[usize]>,
) -> Result<TableId> {
    let engine_columns: Vec<Column> = columns
        .iter()
        .map(|c| Column::new(&c.name, c.ty.engine_type()))
        .collect();
    let table = tx.create_table(name, &engine_columns)?;
    let meta = tx.table(COLUMNS_TABLE)?;
    for (i, c) in columns.iter().enumerate() {
        tx.insert(
            meta,
            &[
                oid_value(table),
                Value::Int(i64::try_from(i).expect("a column index fits in i64")),
                Value::Text(c.ty.name()),
                Value::Bool(c.not_null),
            ],
        )?;
    }
    for (i, c) in columns.iter().enumerate() {
        if let Some(expr) = &c.default {
            set_default(tx, table, i, Some(expr), None)?;
        }
    }
    if let Some(key) = pkey {
        let key_names: Vec<&str> = key.iter().map(|&i| columns[i].name.as_str()).collect();
        tx.create_index(&format!("{name}_pkey"), table, &key_names, true)?;
    }
    Ok(table)
}

/// DROP TABLE: the engine's table (with its indexes), its SQL column rows, and the comments
/// on it, its columns, its indexes and the sequences it owns.
pub(crate) fn drop(tx: &Transaction, table: TableId) -> Result<()> {
    let indexes = tx.table_indexes(table)?;
    tx.drop_table(table)?;
    description::drop_all(tx, table)?;
    for i in indexes {
        description::drop_all(tx, i.oid)?;
    }
    constraint::drop_all(tx, table)?;
    foreign_key::drop_all(tx, table)?;
    let meta = tx.table(COLUMNS_TABLE)?;
    let meta_index = tx.index(COLUMNS_INDEX)?;
    let key = [oid_value(table)];
    let tids: Vec<_> = tx
        .index_scan(meta_index, Included(&key[..]), Included(&key[..]))?
        .map(|r| r.map(|(tid, _)| tid))
        .collect::<std::result::Result<_, _>>()?;
    for tid in tids {
        tx.delete(meta, tid)?;
    }
    let attrdef = tx.table(ATTRDEF_TABLE)?;
    for (tid, d) in attrdefs(tx, table)? {
        tx.delete(attrdef, tid)?;
        if let Some(seq) = d.owned_seq {
            // Gone already if dropped by hand (PostgreSQL's dependency would refuse that).
            if matches!(tx.relation(seq)?, Some(quire_engine::Entry::Sequence(_))) {
                tx.drop_sequence(seq)?;
                description::drop_all(tx, seq)?;
            }
        }
    }
    Ok(())
}

/// ALTER TABLE ... ADD COLUMN: the engine's column (at the end) and its SQL row.
pub(crate) fn add_column(tx: &Transaction, table: &TableInfo, col: &ColumnInfo) -> Result<usize> {
    let attnum = table.columns.len();
    tx.add_column(table.def.oid, Column::new(&col.name, col.ty.engine_type()))?;
    let meta = tx.table(COLUMNS_TABLE)?;
    tx.insert(
        meta,
        &[
            oid_value(table.def.oid),
            Value::Int(i64::try_from(attnum).expect("a column index fits in i64")),
            Value::Text(col.ty.name()),
            Value::Bool(col.not_null),
        ],
    )?;
    Ok(attnum)
}

/// ALTER TABLE ... DROP COLUMN: the engine marks it dropped (and drops the indexes over
/// it); here it loses NOT NULL, its DEFAULT and the sequence it owns. Returns the dropped
/// indexes' names.
pub(crate) fn drop_column(
    tx: &Transaction,
    table: &TableInfo,
    attnum: usize,
) -> Result<Vec<String>> {
    let dropped = tx.drop_column(table.def.oid, attnum)?;
    set_not_null_flag(tx, table, &[attnum], false)?;
    let attrdef = tx.table(ATTRDEF_TABLE)?;
    for (tid, d) in attrdefs(tx, table.def.oid)? {
        if d.attnum != attnum {
            continue;
        }
        tx.delete(attrdef, tid)?;
        if let Some(seq) = d.owned_seq {
            if matches!(tx.relation(seq)?, Some(quire_engine::Entry::Sequence(_))) {
                tx.drop_sequence(seq)?;
                description::drop_all(tx, seq)?;
            }
        }
    }
    Ok(dropped)
}

/// ALTER COLUMN ... TYPE: the SQL type of column `attnum` becomes `ty` (stored as before).
pub(crate) fn set_column_type(
    tx: &Transaction,
    table: &TableInfo,
    attnum: usize,
    ty: SqlType,
) -> Result<()> {
    change_column_rows(tx, table, &[attnum], |row| row[2] = Value::Text(ty.name()))
}

/// Marks `columns` of `table` NOT NULL (ALTER TABLE ... ADD PRIMARY KEY).
pub(crate) fn set_not_null(tx: &Transaction, table: &TableInfo, columns: &[usize]) -> Result<()> {
    set_not_null_flag(tx, table, columns, true)
}

pub(crate) fn set_not_null_flag(
    tx: &Transaction,
    table: &TableInfo,
    columns: &[usize],
    not_null: bool,
) -> Result<()> {
    change_column_rows(tx, table, columns, |row| row[3] = Value::Bool(not_null))
}

/// Rewrites the SQL column rows of `columns` of `table` with `change`; a definition only
/// this table knows changed, so cached plans must see it.
fn change_column_rows(
    tx: &Transaction,
    table: &TableInfo,
    columns: &[usize],
    change: impl Fn(&mut quire_engine::Row),
) -> Result<()> {
    let meta = tx.table(COLUMNS_TABLE)?;
    let meta_index = tx.index(COLUMNS_INDEX)?;
    let key = [oid_value(table.def.oid)];
    let rows: Vec<_> = tx
        .index_scan(meta_index, Included(&key[..]), Included(&key[..]))?
        .collect::<std::result::Result<_, _>>()?;
    for (tid, mut row) in rows {
        let attnum = row[1].as_int().and_then(|a| usize::try_from(a).ok());
        if attnum.is_some_and(|a| columns.contains(&a)) {
            change(&mut row);
            tx.update(meta, tid, &row)?;
        }
    }
    tx.note_definition_change();
    Ok(())
}
