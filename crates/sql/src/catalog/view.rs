//! Views as stored: an engine catalog entry ([`quire_engine::ViewDef`]) whose body is this
//! module's [`ViewBody`]: the query as SQL text, the view's columns (names and types, fixed
//! when it is created, as PostgreSQL fixes a view's `pg_attribute` rows) and the relations
//! its query reads (PostgreSQL's `pg_depend` entries of the view's `_RETURN` rule). A query
//! that names the view binds the text again (`analyze`); the stored columns must still
//! match what it gives.
//!
//! ## Rules
//! - A relation a view reads cannot be dropped while the view exists (2BP01), unless the
//!   DROP says CASCADE, which drops the view too ([`dependents`] follows views of views).
//! - The body's encoding is versioned by its first byte; an undecodable body is an error
//!   naming the view, never a panic.

use quire_engine::{encode_row, Entry, Oid, SqlState, Transaction, Value, ViewDef};

use crate::error::{Result, SqlError};
use crate::types::SqlType;

/// The first byte of an encoded [`ViewBody`].
const BODY_VERSION: u8 = 1;
/// Most views one dependency walk visits ([`dependents`]).
const MAX_DEPENDENT_VIEWS: usize = 100_000;

/// What a view is, beyond its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ViewBody {
    /// The defining query, as SQL text.
    pub query: String,
    /// The view's columns, in order.
    pub columns: Vec<(String, SqlType)>,
    /// The oids of the relations (tables, views) the query reads.
    pub depends: Vec<Oid>,
}

/// A view: its oid, name and body.
#[derive(Clone, Debug)]
pub(crate) struct ViewInfo {
    pub oid: Oid,
    pub name: String,
    pub body: ViewBody,
}

impl ViewBody {
    /// `[version, ncols: u32, ndeps: u32]` then the values: the query, each column's name
    /// and type name, each dependency's oid.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![BODY_VERSION];
        out.extend_from_slice(&count(self.columns.len()).to_le_bytes());
        out.extend_from_slice(&count(self.depends.len()).to_le_bytes());
        let mut row = vec![Value::Text(self.query.clone())];
        for (name, ty) in &self.columns {
            row.push(Value::Text(name.clone()));
            row.push(Value::Text(ty.name()));
        }
        row.extend(self.depends.iter().map(|o| Value::Int(o.0.cast_signed())));
        encode_row(&row, &mut out);
        out
    }

    /// Decodes [`ViewBody::encode`]'s bytes; `None` if they are not such.
    pub fn decode(bytes: &[u8]) -> Option<ViewBody> {
        let (&version, rest) = bytes.split_first()?;
        if version != BODY_VERSION || rest.len() < 8 {
            return None;
        }
        let ncols = usize::try_from(u32::from_le_bytes(rest[..4].try_into().ok()?)).ok()?;
        let ndeps = usize::try_from(u32::from_le_bytes(rest[4..8].try_into().ok()?)).ok()?;
        let values = &rest[8..];
        // Every value takes at least a byte: counts beyond the bytes are garbage.
        if ncols.saturating_mul(2).saturating_add(ndeps) >= values.len() {
            return None;
        }
        let row = quire_engine::decode_row(values, 1 + 2 * ncols + ndeps).ok()?;
        let Value::Text(query) = &row[0] else {
            return None;
        };
        let mut columns = Vec::with_capacity(ncols);
        for pair in row[1..=2 * ncols].chunks(2) {
            let (Value::Text(name), Value::Text(ty)) = (&pair[0], &pair[1]) else {
                return None;
            };
            columns.push((name.clone(), SqlType::from_name(ty)?));
        }
        let depends = row[1 + 2 * ncols..]
            .iter()
            .map(|v| Some(Oid(u64::try_from(v.as_int()?).ok()?)))
            .collect::<Option<_>>()?;
        Some(ViewBody {
            query: query.clone(),
            columns,
            depends,
        })
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).expect("a view's column and dependency counts fit in u32")
}

fn info(def: ViewDef) -> Result<ViewInfo> {
    let body = ViewBody::decode(&def.body).ok_or_else(|| {
        SqlError::new(
            SqlState::DATA_CORRUPTED,
            format!("the definition of view \"{}\" is damaged", def.name),
        )
    })?;
    Ok(ViewInfo {
        oid: def.oid,
        name: def.name,
        body,
    })
}

/// The view named `name`, if that name is a view's; no lock is taken.
pub(crate) fn named(tx: &Transaction, name: &str) -> Result<Option<ViewInfo>> {
    match tx.relation_named(name)? {
        Some(Entry::View(def)) => Ok(Some(info(def)?)),
        _ => Ok(None),
    }
}

/// View `oid`, locked ACCESS SHARE (what a query reading it holds to its end).
pub(crate) fn read(tx: &Transaction, oid: Oid) -> Result<ViewInfo> {
    info(tx.view_def(oid)?)
}

/// Every view the transaction sees, by name.
pub(crate) fn all(tx: &Transaction) -> Result<Vec<ViewInfo>> {
    tx.views()?.into_iter().map(info).collect()
}

/// CREATE VIEW.
pub(crate) fn create(tx: &Transaction, name: &str, body: &ViewBody) -> Result<Oid> {
    Ok(tx.create_view(name, &body.encode())?)
}

/// CREATE OR REPLACE VIEW of view `oid`.
pub(crate) fn replace(tx: &Transaction, oid: Oid, body: &ViewBody) -> Result<()> {
    Ok(tx.replace_view(oid, &body.encode())?)
}

/// DROP VIEW: the view and the comments on it.
pub(crate) fn drop(tx: &Transaction, oid: Oid) -> Result<()> {
    tx.drop_view(oid)?;
    super::description::drop_all(tx, oid)
}

/// The views that read any of `oids`, directly or through other views, each once, those
/// that read others listed after them (the order to drop them in is reversed): PostgreSQL's
/// dependency walk for DROP ... CASCADE.
pub(crate) fn dependents(tx: &Transaction, oids: &[Oid]) -> Result<Vec<ViewInfo>> {
    let views = all(tx)?;
    let mut found: Vec<ViewInfo> = Vec::new();
    let mut frontier: Vec<Oid> = oids.to_vec();
    while let Some(target) = frontier.pop() {
        for v in &views {
            if v.body.depends.contains(&target) && !found.iter().any(|f| f.oid == v.oid) {
                if found.len() >= MAX_DEPENDENT_VIEWS {
                    return Err(SqlError::new(
                        SqlState::PROGRAM_LIMIT_EXCEEDED,
                        "too many dependent views",
                    ));
                }
                found.push(v.clone());
                frontier.push(v.oid);
            }
        }
    }
    found.retain(|v| !oids.contains(&v.oid));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_round_trip_and_garbage_is_refused() {
        let body = ViewBody {
            query: "SELECT a, b FROM t".into(),
            columns: vec![("a".into(), SqlType::Int4), ("b".into(), SqlType::Text)],
            depends: vec![Oid(16384), Oid(16390)],
        };
        let bytes = body.encode();
        assert_eq!(ViewBody::decode(&bytes), Some(body));
        for cut in 0..bytes.len() {
            assert_eq!(ViewBody::decode(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut huge = bytes.clone();
        huge[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(ViewBody::decode(&huge), None);
    }
}
