//! FOREIGN KEY constraints as CREATE TABLE and ALTER TABLE ... ADD declare them: the
//! referencing and referenced columns resolved (the referenced table's primary key when none
//! are named), a unique index over exactly the referenced columns required (42830), types
//! that compare (42804), MATCH, the actions and deferrability checked, and the constraint
//! named as PostgreSQL names it (`<table>_<columns>_fkey`).

use quire_engine::SqlState;
use sqlparser::ast::{
    self, ConstraintReferenceMatchKind, DeferrableInitial, ForeignKeyConstraint, ReferentialAction,
};

use super::constraint::choose_name;
use super::{ident_name, Binder};
use crate::catalog::{ColumnInfo, Deferral, FkAction, ForeignKey, TableInfo};
use crate::error::{Result, SqlError};
use crate::nodes::NewForeignKey;
use crate::types::SqlType;

/// The table a new foreign key belongs to: one CREATE TABLE is making (its name, columns
/// and declared keys, for a key that references the table itself), or one that exists.
pub(super) enum Referencing<'a> {
    New {
        name: &'a str,
        columns: &'a [ColumnInfo],
        keys: Vec<Vec<usize>>,
    },
    Existing(&'a TableInfo),
}

impl Referencing<'_> {
    fn name(&self) -> &str {
        match self {
            Referencing::New { name, .. } => crate::catalog::display_name(name),
            Referencing::Existing(t) => &t.def.name,
        }
    }

    fn columns(&self) -> &[ColumnInfo] {
        match self {
            Referencing::New { columns, .. } => columns,
            Referencing::Existing(t) => &t.columns,
        }
    }

    fn temp(&self) -> bool {
        match self {
            Referencing::New { name, .. } => crate::catalog::display_name(name).len() != name.len(),
            Referencing::Existing(t) => t.temp,
        }
    }
}

/// The referenced side as the binder resolved it: its columns, its unique keys (the primary
/// key first) and whether it is temporary.
struct Referenced {
    columns: Vec<ColumnInfo>,
    keys: Vec<Vec<usize>>,
    pkey: Option<Vec<usize>>,
    temp: bool,
    name: String,
    table: Option<quire_engine::TableId>,
}

impl Binder<'_> {
    /// A FOREIGN KEY of `on` as written (`fk`), named apart from `taken` (to which its name
    /// is added).
    pub(super) fn new_foreign_key(
        &mut self,
        on: &Referencing,
        fk: &ForeignKeyConstraint,
        taken: &mut Vec<String>,
    ) -> Result<NewForeignKey> {
        let columns = fk
            .columns
            .iter()
            .map(|c| fk_column(on.columns(), &ident_name(c)))
            .collect::<Result<Vec<_>>>()?;
        let referenced = self.referenced(on, &fk.foreign_table)?;
        if referenced.temp != on.temp() {
            let message = if on.temp() {
                "constraints on temporary tables may reference only temporary tables"
            } else {
                "constraints on permanent tables may reference only permanent tables"
            };
            return Err(SqlError::new(SqlState::INVALID_TABLE_DEFINITION, message));
        }
        let ref_columns = if fk.referred_columns.is_empty() {
            referenced.pkey.clone().ok_or_else(|| {
                SqlError::new(
                    SqlState::INVALID_FOREIGN_KEY,
                    format!(
                        "there is no primary key for referenced table \"{}\"",
                        referenced.name
                    ),
                )
            })?
        } else {
            fk.referred_columns
                .iter()
                .map(|c| fk_column(&referenced.columns, &ident_name(c)))
                .collect::<Result<Vec<_>>>()?
        };
        if ref_columns.len() != columns.len() {
            return Err(SqlError::new(
                SqlState::INVALID_FOREIGN_KEY,
                "number of referencing and referenced columns for foreign key disagree",
            ));
        }
        let mut sorted = ref_columns.clone();
        sorted.sort_unstable();
        let unique = referenced.keys.iter().any(|k| {
            let mut k = k.clone();
            k.sort_unstable();
            k == sorted
        });
        if !unique {
            return Err(SqlError::new(
                SqlState::INVALID_FOREIGN_KEY,
                format!(
                    "there is no unique constraint matching given keys for referenced table \"{}\"",
                    referenced.name
                ),
            ));
        }
        let column_names: Vec<&str> = columns
            .iter()
            .map(|&c| on.columns()[c].name.as_str())
            .collect();
        let name = match fk.name.as_ref().map(ident_name) {
            Some(n) if taken.contains(&n) => {
                return Err(SqlError::new(
                    SqlState::DUPLICATE_OBJECT,
                    format!(
                        "constraint \"{n}\" for relation \"{}\" already exists",
                        on.name()
                    ),
                ))
            }
            Some(n) => n,
            None => choose_name(on.name(), Some(&column_names.join("_")), "fkey", taken),
        };
        for (&c, &r) in columns.iter().zip(&ref_columns) {
            let (ours, theirs) = (&on.columns()[c], &referenced.columns[r]);
            if !comparable(ours.ty, theirs.ty) {
                return Err(SqlError::new(
                    SqlState::DATATYPE_MISMATCH,
                    format!("foreign key constraint \"{name}\" cannot be implemented"),
                )
                .with_detail(format!(
                    "Key columns \"{}\" of the referencing table and \"{}\" of the referenced table are of incompatible types: {} and {}.",
                    ours.name,
                    theirs.name,
                    ours.ty.name(),
                    theirs.ty.name()
                )));
            }
        }
        let deferral = deferrability(fk.characteristics.as_ref())?;
        taken.push(name.clone());
        Ok(NewForeignKey {
            references_itself: referenced.table.is_none(),
            fk: ForeignKey {
                oid: 0,
                name,
                table: match on {
                    Referencing::Existing(t) => t.def.oid,
                    Referencing::New { .. } => quire_engine::Oid(0),
                },
                columns,
                ref_table: referenced.table.unwrap_or(quire_engine::Oid(0)),
                ref_columns,
                match_full: match_full(fk.match_kind)?,
                on_update: action(fk.on_update),
                on_delete: action(fk.on_delete),
                deferral,
                validated: true,
            },
        })
    }

    /// The table `name` names, as a foreign key sees it; the table being created when the
    /// name is its own.
    fn referenced(&self, on: &Referencing, name: &ast::ObjectName) -> Result<Referenced> {
        if let Referencing::New {
            name: own,
            columns,
            keys,
        } = on
        {
            // A temporary table being made is first on the search path (pg_temp), so an
            // unqualified name like its own is itself, though it is not in the catalog yet.
            // (`rel_name` gives `pg_temp.t` the temporary name, and an unqualified `t` as
            // written while no temporary table of that name exists yet.)
            let shown = crate::catalog::display_name(own);
            let itself = self
                .rel_name(name)
                .is_ok_and(|n| n == *own || shown != *own && name.0.len() == 1 && n == shown);
            if itself {
                return Ok(Referenced {
                    columns: columns.to_vec(),
                    keys: keys.clone(),
                    pkey: keys.first().cloned(),
                    temp: on.temp(),
                    name: on.name().to_string(),
                    table: None,
                });
            }
        }
        let t = self.table_of(name)?;
        let pkey = t.pkey.as_ref().map(|(_, cols)| cols.clone());
        let keys = t
            .indexes
            .iter()
            .filter(|i| i.unique)
            .map(|i| i.columns.iter().map(|&c| usize::from(c)).collect())
            .collect();
        Ok(Referenced {
            columns: t.columns,
            keys,
            pkey,
            temp: t.temp,
            name: t.def.name.to_string(),
            table: Some(t.def.oid),
        })
    }
}

/// A column of a foreign key (42703 as PostgreSQL words it for one).
fn fk_column(columns: &[ColumnInfo], name: &str) -> Result<usize> {
    columns
        .iter()
        .position(|c| c.name == name && !c.dropped)
        .ok_or_else(|| {
            SqlError::new(
                SqlState::UNDEFINED_COLUMN,
                format!("column \"{name}\" referenced in foreign key constraint does not exist"),
            )
        })
}

/// Whether a key of type `fk` can reference one of type `pk`, as PostgreSQL decides it: the
/// two in one B-tree operator family (the integers; the floats; text and varchar), or `fk`
/// implicitly cast to `pk` (an integer to numeric or a float, numeric to a float, a string
/// to text, a date to a timestamp).
pub(crate) fn comparable(fk: SqlType, pk: SqlType) -> bool {
    use SqlType as T;
    let text_family = |t: SqlType| matches!(t, T::Text | T::Varchar(_) | T::Name);
    let time = |t: SqlType| matches!(t, T::Date | T::Timestamp | T::Timestamptz);
    fk.engine_type() == pk.engine_type() && fk.name() == pk.name()
        || fk.is_int() && pk.is_int()
        || fk.is_float() && pk.is_float()
        || matches!(
            (fk, pk),
            (T::Numeric(_), T::Numeric(_)) | (T::Bpchar(_), T::Bpchar(_))
        )
        || text_family(fk) && text_family(pk)
        || fk.is_int() && (pk.is_numeric() || pk.is_float())
        || fk.is_numeric() && pk.is_float()
        || fk.is_text() && pk == T::Text
        || time(fk) && time(pk) && fk != T::Timestamptz && !(fk == T::Timestamp && pk == T::Date)
}

fn action(a: Option<ReferentialAction>) -> FkAction {
    match a {
        None | Some(ReferentialAction::NoAction) => FkAction::NoAction,
        Some(ReferentialAction::Restrict) => FkAction::Restrict,
        Some(ReferentialAction::Cascade) => FkAction::Cascade,
        Some(ReferentialAction::SetNull) => FkAction::SetNull,
        Some(ReferentialAction::SetDefault) => FkAction::SetDefault,
    }
}

fn match_full(m: Option<ConstraintReferenceMatchKind>) -> Result<bool> {
    match m {
        None | Some(ConstraintReferenceMatchKind::Simple) => Ok(false),
        Some(ConstraintReferenceMatchKind::Full) => Ok(true),
        Some(ConstraintReferenceMatchKind::Partial) => Err(SqlError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            "MATCH PARTIAL not yet implemented",
        )),
    }
}

/// DEFERRABLE and INITIALLY DEFERRED (which implies DEFERRABLE).
fn deferrability(c: Option<&ast::ConstraintCharacteristics>) -> Result<Deferral> {
    let Some(c) = c else {
        return Ok(Deferral::NotDeferrable);
    };
    if c.enforced == Some(false) {
        return Err(SqlError::unsupported("NOT ENFORCED foreign keys"));
    }
    let deferred = c.initially == Some(DeferrableInitial::Deferred);
    match c.deferrable {
        Some(false) if deferred => Err(SqlError::new(
            SqlState::SYNTAX_ERROR,
            "constraint declared INITIALLY DEFERRED must be DEFERRABLE",
        )),
        Some(true) | None if deferred => Ok(Deferral::InitiallyDeferred),
        Some(true) => Ok(Deferral::InitiallyImmediate),
        Some(false) | None => Ok(Deferral::NotDeferrable),
    }
}
