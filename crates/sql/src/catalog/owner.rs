//! ALTER ... OWNER TO. quire keeps no owner per object: every relation and `pg_catalog`
//! belong to the bootstrap superuser, and `public` to `pg_database_owner`, as
//! [`crate::pg_catalog`] shows them. So giving an object to the role that owns it is
//! done (PostgreSQL does nothing then either: what pg_dump's scripts do), and giving it
//! to another role is refused (0A000), never silently ignored.

use quire_engine::{SqlState, Transaction};

use crate::catalog;
use crate::error::{Result, SqlError};
use crate::roles::{self, Identity, BOOTSTRAP_SUPERUSER_OID, DATABASE_OWNER_OID};

/// ALTER kind [IF EXISTS] [ONLY] name OWNER TO role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterOwnerStmt {
    /// The object's kind as the statement names it: TABLE, SEQUENCE, VIEW, INDEX, SCHEMA.
    pub kind: &'static str,
    pub if_exists: bool,
    /// The object's name, without a `public.` schema.
    pub name: String,
    /// The new owner: a role's name, or CURRENT_USER, CURRENT_ROLE or SESSION_USER as
    /// written (upper case).
    pub owner: String,
}

/// Checks `stmt` in `tx` for `who`; the notices (IF EXISTS of a missing object).
pub(crate) fn alter_owner(
    tx: &Transaction,
    stmt: &AlterOwnerStmt,
    who: &Identity,
) -> Result<Vec<String>> {
    let owner_name = match stmt.owner.as_str() {
        "CURRENT_USER" | "CURRENT_ROLE" => who.current_user(),
        "SESSION_USER" => who.session_user(),
        name => name,
    };
    let Some(role) = roles::named(tx, owner_name)? else {
        return Err(roles::missing(owner_name));
    };
    let Some(current) = current_owner(tx, stmt)? else {
        if stmt.if_exists {
            let what = if stmt.kind == "SCHEMA" {
                "schema"
            } else {
                "relation"
            };
            return Ok(vec![format!(
                "{what} \"{}\" does not exist, skipping",
                stmt.name
            )]);
        }
        return Err(not_found(stmt));
    };
    if role.oid == current {
        return Ok(Vec::new());
    }
    Err(SqlError::unsupported(format!(
        "ALTER {} ... OWNER TO a role other than its owner (quire keeps no owner per object)",
        stmt.kind
    )))
}

/// The oid of the object's owner; `None` if there is no such object.
fn current_owner(tx: &Transaction, stmt: &AlterOwnerStmt) -> Result<Option<u32>> {
    if stmt.kind == "SCHEMA" {
        return Ok(match stmt.name.as_str() {
            "public" => Some(DATABASE_OWNER_OID),
            "pg_catalog" => Some(BOOTSTRAP_SUPERUSER_OID),
            _ => None,
        });
    }
    if stmt.name.starts_with(catalog::RESERVED_PREFIX) {
        return Ok(None);
    }
    Ok(tx
        .relation_named(&stmt.name)?
        .map(|_| BOOTSTRAP_SUPERUSER_OID))
}

fn not_found(stmt: &AlterOwnerStmt) -> SqlError {
    if stmt.kind == "SCHEMA" {
        return SqlError::new(
            SqlState::UNDEFINED_SCHEMA,
            format!("schema \"{}\" does not exist", stmt.name),
        );
    }
    SqlError::new(
        SqlState::UNDEFINED_TABLE,
        format!("relation \"{}\" does not exist", stmt.name),
    )
}
