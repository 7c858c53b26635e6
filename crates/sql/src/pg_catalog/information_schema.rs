//! `information_schema`: the SQL standard's views of the catalog, with PostgreSQL's
//! columns in PostgreSQL's order (`src/backend/catalog/information_schema.sql`), computed
//! from the same catalog rows as the `pg_catalog` views.
//!
//! Rules:
//! - The views resolve only under the `information_schema` qualifier, as in PostgreSQL
//!   (whose default search_path does not hold that schema).
//! - PostgreSQL's domains are reported as their base types: `sql_identifier` as `name`,
//!   `cardinal_number` as `integer`, `character_data` as `character varying`, `yes_or_no`
//!   as `character varying(3)`.
//! - The relations listed are the user's tables (schema `public`); pg_catalog's and
//!   information_schema's own relations are not listed.
//! - Columns for features quire lacks (domains, collations other than the default, typed
//!   tables, generated columns, views, routines, triggers) hold PostgreSQL's "none" value.

use quire_engine::{Row, Transaction, Value};

use super::{int, internal_name, text, user_tables, DATABASE_NAME, SUPERUSER};
use crate::catalog::{self, Identity, TableInfo};
use crate::context::Cx;
use crate::error::Result;
use crate::types::SqlType;

use SqlType as T;

/// `sql_identifier`, `cardinal_number`, `character_data` and `yes_or_no`.
const ID: SqlType = T::Name;
const CARD: SqlType = T::Int4;
const DATA: SqlType = T::Varchar(None);
const YN: SqlType = T::Varchar(Some(3));

/// An information_schema view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InfoView {
    Schemata,
    Tables,
    Columns,
    TableConstraints,
    KeyColumnUsage,
    ReferentialConstraints,
    CheckConstraints,
    Sequences,
    /// Empty: quire has no views.
    Views,
}

impl InfoView {
    pub(crate) fn named(name: &str) -> Option<InfoView> {
        Some(match name {
            "schemata" => InfoView::Schemata,
            "tables" => InfoView::Tables,
            "columns" => InfoView::Columns,
            "table_constraints" => InfoView::TableConstraints,
            "key_column_usage" => InfoView::KeyColumnUsage,
            "referential_constraints" => InfoView::ReferentialConstraints,
            "check_constraints" => InfoView::CheckConstraints,
            "sequences" => InfoView::Sequences,
            "views" => InfoView::Views,
            _ => return None,
        })
    }

    pub(crate) fn columns(self) -> &'static [(&'static str, SqlType)] {
        match self {
            InfoView::Schemata => &[
                ("catalog_name", ID),
                ("schema_name", ID),
                ("schema_owner", ID),
                ("default_character_set_catalog", ID),
                ("default_character_set_schema", ID),
                ("default_character_set_name", ID),
                ("sql_path", DATA),
            ],
            InfoView::Tables => &[
                ("table_catalog", ID),
                ("table_schema", ID),
                ("table_name", ID),
                ("table_type", DATA),
                ("self_referencing_column_name", ID),
                ("reference_generation", DATA),
                ("user_defined_type_catalog", ID),
                ("user_defined_type_schema", ID),
                ("user_defined_type_name", ID),
                ("is_insertable_into", YN),
                ("is_typed", YN),
                ("commit_action", DATA),
            ],
            InfoView::Columns => COLUMNS,
            InfoView::TableConstraints => &[
                ("constraint_catalog", ID),
                ("constraint_schema", ID),
                ("constraint_name", ID),
                ("table_catalog", ID),
                ("table_schema", ID),
                ("table_name", ID),
                ("constraint_type", DATA),
                ("is_deferrable", YN),
                ("initially_deferred", YN),
                ("enforced", YN),
                ("nulls_distinct", YN),
            ],
            InfoView::KeyColumnUsage => &[
                ("constraint_catalog", ID),
                ("constraint_schema", ID),
                ("constraint_name", ID),
                ("table_catalog", ID),
                ("table_schema", ID),
                ("table_name", ID),
                ("column_name", ID),
                ("ordinal_position", CARD),
                ("position_in_unique_constraint", CARD),
            ],
            InfoView::ReferentialConstraints => &[
                ("constraint_catalog", ID),
                ("constraint_schema", ID),
                ("constraint_name", ID),
                ("unique_constraint_catalog", ID),
                ("unique_constraint_schema", ID),
                ("unique_constraint_name", ID),
                ("match_option", DATA),
                ("update_rule", DATA),
                ("delete_rule", DATA),
            ],
            InfoView::CheckConstraints => &[
                ("constraint_catalog", ID),
                ("constraint_schema", ID),
                ("constraint_name", ID),
                ("check_clause", DATA),
            ],
            InfoView::Sequences => &[
                ("sequence_catalog", ID),
                ("sequence_schema", ID),
                ("sequence_name", ID),
                ("data_type", DATA),
                ("numeric_precision", CARD),
                ("numeric_precision_radix", CARD),
                ("numeric_scale", CARD),
                ("start_value", DATA),
                ("minimum_value", DATA),
                ("maximum_value", DATA),
                ("increment", DATA),
                ("cycle_option", YN),
            ],
            InfoView::Views => &[
                ("table_catalog", ID),
                ("table_schema", ID),
                ("table_name", ID),
                ("view_definition", DATA),
                ("check_option", DATA),
                ("is_updatable", YN),
                ("is_insertable_into", YN),
                ("is_trigger_updatable", YN),
                ("is_trigger_deletable", YN),
                ("is_trigger_insertable_into", YN),
            ],
        }
    }

    pub(crate) fn rows(self, cx: &Cx) -> Result<Vec<Row>> {
        let tx = cx.tx;
        Ok(match self {
            InfoView::Schemata => schemata_rows(),
            InfoView::Tables => {
                let mut rows: Vec<Row> = user_tables(tx)?.iter().map(table_row).collect();
                rows.extend(super::views::as_tables(tx)?.iter().map(view_table_row));
                rows
            }
            InfoView::Columns => column_rows(tx)?,
            InfoView::TableConstraints => {
                constraints(tx)?.iter().map(table_constraint_row).collect()
            }
            InfoView::KeyColumnUsage => key_column_rows(tx)?,
            InfoView::ReferentialConstraints => referential_rows(tx)?,
            InfoView::CheckConstraints => check_rows(tx)?,
            InfoView::Sequences => sequence_rows(tx)?,
            InfoView::Views => view_rows(tx)?,
        })
    }
}

const COLUMNS: &[(&str, SqlType)] = &[
    ("table_catalog", ID),
    ("table_schema", ID),
    ("table_name", ID),
    ("column_name", ID),
    ("ordinal_position", CARD),
    ("column_default", DATA),
    ("is_nullable", YN),
    ("data_type", DATA),
    ("character_maximum_length", CARD),
    ("character_octet_length", CARD),
    ("numeric_precision", CARD),
    ("numeric_precision_radix", CARD),
    ("numeric_scale", CARD),
    ("datetime_precision", CARD),
    ("interval_type", DATA),
    ("interval_precision", CARD),
    ("character_set_catalog", ID),
    ("character_set_schema", ID),
    ("character_set_name", ID),
    ("collation_catalog", ID),
    ("collation_schema", ID),
    ("collation_name", ID),
    ("domain_catalog", ID),
    ("domain_schema", ID),
    ("domain_name", ID),
    ("udt_catalog", ID),
    ("udt_schema", ID),
    ("udt_name", ID),
    ("scope_catalog", ID),
    ("scope_schema", ID),
    ("scope_name", ID),
    ("maximum_cardinality", CARD),
    ("dtd_identifier", ID),
    ("is_self_referencing", YN),
    ("is_identity", YN),
    ("identity_generation", DATA),
    ("identity_start", DATA),
    ("identity_increment", DATA),
    ("identity_maximum", DATA),
    ("identity_minimum", DATA),
    ("identity_cycle", YN),
    ("is_generated", DATA),
    ("generation_expression", DATA),
    ("is_updatable", YN),
];

const NULL: Value = Value::Null;

fn yes_no(b: bool) -> Value {
    text(if b { "YES" } else { "NO" })
}

fn card(n: usize) -> Value {
    int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// PostgreSQL's four schemas, with their owners (`public` belongs to pg_database_owner).
fn schemata_rows() -> Vec<Row> {
    [
        ("pg_catalog", SUPERUSER),
        ("public", "pg_database_owner"),
        ("information_schema", SUPERUSER),
        ("pg_toast", SUPERUSER),
    ]
    .into_iter()
    .map(|(schema, owner)| {
        vec![
            text(DATABASE_NAME),
            text(schema),
            text(owner),
            NULL,
            NULL,
            NULL,
            NULL,
        ]
    })
    .collect()
}

fn table_row(t: &TableInfo) -> Row {
    let (kind, commit) = if t.temp {
        ("LOCAL TEMPORARY", text("PRESERVE ROWS"))
    } else {
        ("BASE TABLE", NULL)
    };
    vec![
        text(DATABASE_NAME),
        text("public"),
        text(&t.def.name),
        text(kind),
        NULL,
        NULL,
        NULL,
        NULL,
        NULL,
        yes_no(true),
        yes_no(false),
        commit,
    ]
}

/// `data_type`: `format_type` without the modifier, `ARRAY` for arrays.
fn data_type(t: SqlType) -> String {
    match t {
        T::Array(_) => "ARRAY".into(),
        T::Varchar(_) => "character varying".into(),
        T::Bpchar(_) => "character".into(),
        T::Numeric(_) => "numeric".into(),
        t => t.name(),
    }
}

/// `character_maximum_length` and `character_octet_length` (UTF8: four bytes a character).
fn char_lengths(t: SqlType) -> (Value, Value) {
    const MAX_OCTETS: i64 = 1 << 30;
    let limit = match t {
        T::Varchar(n) | T::Bpchar(n) => n,
        T::Text => None,
        _ => return (NULL, NULL),
    };
    match limit {
        Some(n) => (int(i64::from(n)), int(i64::from(n) * 4)),
        None => (NULL, int(MAX_OCTETS)),
    }
}

/// `numeric_precision`, `numeric_precision_radix` and `numeric_scale`.
fn numeric_facts(t: SqlType) -> [Value; 3] {
    let binary = |p: i64, scale: Value| [int(p), int(2), scale];
    match t {
        T::Int2 => binary(16, int(0)),
        T::Int4 => binary(32, int(0)),
        T::Int8 => binary(64, int(0)),
        T::Float4 => binary(24, NULL),
        T::Float8 => binary(53, NULL),
        T::Numeric(Some((p, s))) => [int(i64::from(p)), int(10), int(i64::from(s))],
        T::Numeric(None) => [NULL, int(10), NULL],
        _ => [NULL, NULL, NULL],
    }
}

/// `datetime_precision`: 0 for date, the default 6 for the time types quire has.
fn datetime_precision(t: SqlType) -> Value {
    match t {
        T::Date => int(0),
        T::Timestamp | T::Timestamptz | T::Interval => int(6),
        _ => NULL,
    }
}

fn column_rows(tx: &Transaction) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for t in user_tables(tx)? {
        for (i, c) in t.columns.iter().enumerate().filter(|(_, c)| !c.dropped) {
            rows.push(column_row(tx, &t, i, c)?);
        }
    }
    for v in super::views::as_tables(tx)? {
        for (i, c) in v.columns.iter().enumerate() {
            let mut row = column_row(tx, &v, i, c)?;
            // quire updates no view: its columns are not updatable.
            if let Some(last) = row.last_mut() {
                *last = yes_no(false);
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

/// A view in `tables`: kind VIEW, not insertable into.
fn view_table_row(v: &TableInfo) -> Row {
    let mut row = table_row(v);
    row[3] = text("VIEW");
    row[9] = yes_no(false);
    row
}

/// `views`: each view's definition; none is updatable in quire.
fn view_rows(tx: &Transaction) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (name, definition) in super::views::definitions(tx)? {
        rows.push(vec![
            text(DATABASE_NAME),
            text("public"),
            text(&name),
            text(&definition),
            text("NONE"),
            yes_no(false),
            yes_no(false),
            yes_no(false),
            yes_no(false),
            yes_no(false),
        ]);
    }
    Ok(rows)
}

fn column_row(tx: &Transaction, t: &TableInfo, i: usize, c: &catalog::ColumnInfo) -> Result<Row> {
    let default = match (&c.default, c.identity) {
        (Some(expr), None) => text(&super::default_display(expr, c.ty)),
        _ => NULL,
    };
    let (max_len, octets) = char_lengths(c.ty);
    let [precision, radix, scale] = numeric_facts(c.ty);
    let interval = |v: Value| if c.ty == T::Interval { v } else { NULL };
    let mut row = vec![
        text(DATABASE_NAME),
        text("public"),
        text(&t.def.name),
        text(&c.name),
        card(i + 1),
        default,
        yes_no(!c.not_null),
        text(&data_type(c.ty)),
        max_len,
        octets,
        precision,
        radix,
        scale,
        datetime_precision(c.ty),
        NULL,
        interval(int(6)),
    ];
    row.extend([NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL]);
    row.extend([
        text(DATABASE_NAME),
        text("pg_catalog"),
        text(&udt_name(c.ty)),
    ]);
    row.extend([
        NULL,
        NULL,
        NULL,
        NULL,
        text(&(i + 1).to_string()),
        yes_no(false),
    ]);
    row.extend(identity_columns(tx, c)?);
    row.extend([text("NEVER"), NULL, yes_no(true)]);
    Ok(row)
}

/// `is_identity` through `identity_cycle`.
fn identity_columns(tx: &Transaction, c: &catalog::ColumnInfo) -> Result<[Value; 7]> {
    let (Some(identity), Some(seq)) = (c.identity, c.owned_seq) else {
        return Ok([yes_no(false), NULL, NULL, NULL, NULL, NULL, yes_no(false)]);
    };
    let o = tx.sequence_def(seq)?.options;
    let generation = match identity {
        Identity::Always => "ALWAYS",
        Identity::ByDefault => "BY DEFAULT",
    };
    Ok([
        yes_no(true),
        text(generation),
        text(&o.start.to_string()),
        text(&o.increment.to_string()),
        text(&o.max_value.to_string()),
        text(&o.min_value.to_string()),
        yes_no(o.cycle),
    ])
}

/// A table constraint as the views show it.
struct Constraint {
    name: String,
    table: String,
    /// `PRIMARY KEY`, `UNIQUE`, `FOREIGN KEY` or `CHECK`.
    kind: &'static str,
    deferrable: bool,
    deferred: bool,
    /// The constrained columns' names, in key order (none for CHECK).
    columns: Vec<String>,
    /// A CHECK's clause (`a IS NOT NULL` for a not-null constraint).
    clause: Option<String>,
}

/// Every constraint of the user's tables: keys, checks, foreign keys, then not-null
/// constraints (named `table_column_not_null`, as PostgreSQL 18 names them).
fn constraints(tx: &Transaction) -> Result<Vec<Constraint>> {
    let mut out = Vec::new();
    for t in user_tables(tx)? {
        let names = |cols: &mut dyn Iterator<Item = usize>| -> Vec<String> {
            cols.map(|c| t.columns[c].name.clone()).collect()
        };
        let plain = |name: &str, kind, columns, clause| Constraint {
            name: name.to_string(),
            table: t.def.name.to_string(),
            kind,
            deferrable: false,
            deferred: false,
            columns,
            clause,
        };
        for i in t.indexes.iter().filter(|i| i.unique) {
            let kind = if super::is_primary(&t, i) {
                "PRIMARY KEY"
            } else {
                "UNIQUE"
            };
            let cols = names(&mut i.columns.iter().map(|&c| usize::from(c)));
            out.push(plain(&i.name, kind, cols, None));
        }
        for f in &t.foreign_keys {
            let mut c = plain(
                &f.name,
                "FOREIGN KEY",
                names(&mut f.columns.iter().copied()),
                None,
            );
            c.deferrable = f.deferral.deferrable();
            c.deferred = f.deferral.initially_deferred();
            out.push(c);
        }
        for c in &t.checks {
            let clause = super::constraint_def(tx, c.oid, false)?.map(|d| check_clause(&d));
            out.push(plain(&c.name, "CHECK", Vec::new(), clause));
        }
        for c in t.columns.iter().filter(|c| c.not_null && !c.dropped) {
            let name = format!("{}_{}_not_null", t.def.name, c.name);
            let clause = format!("{} IS NOT NULL", crate::parse::quote_ident(&c.name));
            out.push(plain(&name, "CHECK", Vec::new(), Some(clause)));
        }
    }
    Ok(out)
}

/// A CHECK constraint's `check_clause`: its definition without `CHECK ` and NOT VALID.
fn check_clause(def: &str) -> String {
    let def = def.strip_suffix(" NOT VALID").unwrap_or(def);
    def.strip_prefix("CHECK ").unwrap_or(def).to_string()
}

fn table_constraint_row(c: &Constraint) -> Row {
    let keyed = c.kind == "UNIQUE";
    vec![
        text(DATABASE_NAME),
        text("public"),
        text(&c.name),
        text(DATABASE_NAME),
        text("public"),
        text(&c.table),
        text(c.kind),
        yes_no(c.deferrable),
        yes_no(c.deferred),
        yes_no(true),
        if keyed { yes_no(true) } else { NULL },
    ]
}

/// The columns of the user's primary keys, unique constraints and foreign keys; a foreign
/// key's column also has its referenced column's place in the referenced key.
fn key_column_rows(tx: &Transaction) -> Result<Vec<Row>> {
    let tables = user_tables(tx)?;
    let mut rows = Vec::new();
    for c in constraints(tx)?.iter().filter(|c| c.kind != "CHECK") {
        let positions = match c.kind {
            "FOREIGN KEY" => referenced_positions(&tables, &c.table, &c.name),
            _ => vec![None; c.columns.len()],
        };
        for (i, (col, pos)) in c.columns.iter().zip(positions).enumerate() {
            rows.push(vec![
                text(DATABASE_NAME),
                text("public"),
                text(&c.name),
                text(DATABASE_NAME),
                text("public"),
                text(&c.table),
                text(col),
                card(i + 1),
                pos.map_or(NULL, card),
            ]);
        }
    }
    Ok(rows)
}

/// The foreign key `name` of `table` and the table it references.
fn foreign_key<'a>(
    tables: &'a [TableInfo],
    table: &str,
    name: &str,
) -> Option<(&'a catalog::ForeignKey, &'a TableInfo)> {
    let t = tables.iter().find(|t| &*t.def.name == table)?;
    let f = t.foreign_keys.iter().find(|f| f.name == name)?;
    let parent = tables.iter().find(|p| p.def.oid == f.ref_table)?;
    Some((f, parent))
}

/// For each referenced column of a foreign key, its place (from 1) in the referenced key.
fn referenced_positions(tables: &[TableInfo], table: &str, name: &str) -> Vec<Option<usize>> {
    let Some((f, parent)) = foreign_key(tables, table, name) else {
        return Vec::new();
    };
    let index = super::referenced_index(parent, f);
    f.ref_columns
        .iter()
        .map(|&r| {
            index.and_then(|i| {
                i.columns
                    .iter()
                    .position(|&c| usize::from(c) == r)
                    .map(|p| p + 1)
            })
        })
        .collect()
}

/// A referential action as the standard names it.
fn rule(letter: &str) -> &'static str {
    match letter {
        "c" => "CASCADE",
        "n" => "SET NULL",
        "d" => "SET DEFAULT",
        "r" => "RESTRICT",
        _ => "NO ACTION",
    }
}

fn referential_rows(tx: &Transaction) -> Result<Vec<Row>> {
    let tables = user_tables(tx)?;
    let mut rows = Vec::new();
    for t in &tables {
        for f in &t.foreign_keys {
            let unique = foreign_key(&tables, &t.def.name, &f.name)
                .and_then(|(f, parent)| super::referenced_index(parent, f))
                .map(|i| i.name.clone());
            let (catalog, schema) = match unique {
                Some(_) => (text(DATABASE_NAME), text("public")),
                None => (NULL, NULL),
            };
            rows.push(vec![
                text(DATABASE_NAME),
                text("public"),
                text(&f.name),
                catalog,
                schema,
                unique.map_or(NULL, |n| text(&n)),
                text(if f.match_full { "FULL" } else { "NONE" }),
                text(rule(f.on_update.letter())),
                text(rule(f.on_delete.letter())),
            ]);
        }
    }
    Ok(rows)
}

fn check_rows(tx: &Transaction) -> Result<Vec<Row>> {
    Ok(constraints(tx)?
        .into_iter()
        .filter_map(|c| {
            let clause = c.clause?;
            Some(vec![
                text(DATABASE_NAME),
                text("public"),
                text(&c.name),
                text(&clause),
            ])
        })
        .collect())
}

/// The user's sequences but identity columns' (which PostgreSQL leaves out).
fn sequence_rows(tx: &Transaction) -> Result<Vec<Row>> {
    let identity: Vec<_> = user_tables(tx)?
        .iter()
        .flat_map(|t| t.columns.iter())
        .filter(|c| c.identity.is_some())
        .filter_map(|c| c.owned_seq)
        .collect();
    Ok(super::user_sequences(tx)?
        .into_iter()
        .filter(|s| !identity.contains(&s.oid))
        .map(|s| {
            let o = s.options;
            let (ty, bits) = match o.value_bytes {
                2 => ("smallint", 16),
                4 => ("integer", 32),
                _ => ("bigint", 64),
            };
            vec![
                text(DATABASE_NAME),
                text("public"),
                text(&s.name),
                text(ty),
                int(bits),
                int(2),
                int(0),
                text(&o.start.to_string()),
                text(&o.min_value.to_string()),
                text(&o.max_value.to_string()),
                text(&o.increment.to_string()),
                yes_no(o.cycle),
            ]
        })
        .collect())
}

/// `udt_name`: the type's pg_type name, without a modifier.
fn udt_name(t: SqlType) -> String {
    match t {
        T::Numeric(_) => internal_name(T::Numeric(None)),
        t => internal_name(t),
    }
}
