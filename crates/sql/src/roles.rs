//! Roles (PostgreSQL's `pg_authid` and `pg_auth_members`): who may log in, what each role may
//! do, who belongs to whom, and each role's SCRAM-SHA-256 verifier; and who a session acts as.
//! PostgreSQL 15 is the model (`commands/user.c`, `utils/adt/acl.c`, `commands/variable.c`),
//! its SQLSTATEs and messages word for word; PostgreSQL 16 changed CREATEROLE, quire does not.
//!
//! Storage:
//! - Roles live in an ordinary engine table, `quire_roles` (one row per role: PostgreSQL's
//!   `rolsuper`, `rolinherit`, `rolcreaterole`, `rolcreatedb`, `rolcanlogin`,
//!   `rolreplication`, `rolbypassrls`, `rolconnlimit`, `rolpassword`, `rolvaliduntil`),
//!   memberships in `quire_auth_members` ([`members`]), so every role statement is
//!   transactional and rolls back with its block, as the column table does
//!   ([`crate::catalog`]).
//! - [`bootstrap`] creates both tables when missing, so a data directory made before them
//!   gains them on its next start. The bootstrap superuser `postgres` (oid 10, with every
//!   attribute, no password) is the first row. A roles table from before the attributes
//!   existed (five columns) gets the missing columns added and each row filled in with
//!   PostgreSQL's defaults (INHERIT, -1 connections; `postgres` gets every attribute).
//! - A password is never stored: only its SCRAM-SHA-256 verifier ([`ScramVerifier`]). A
//!   password given already in that form (psql's `\password` sends one) is stored as given,
//!   once it parses; an empty one clears the password, with PostgreSQL's notice.
//! - Oids: `postgres` has PostgreSQL's 10; other roles get one above the highest in the table,
//!   starting at PostgreSQL's first normal oid (16384). A unique index on the name backs the
//!   42710 check against a concurrent CREATE (which then fails with 42710 all the same).
//! - SQL never reads or writes the two tables, nor drops their indexes, directly: their
//!   names are in quire's reserved namespace ([`crate::catalog::check_not_reserved`]).
//! - VALID UNTIL takes a timestamptz or `infinity` (stored as no limit: quire's timestamps
//!   have no infinity, so `pg_roles` shows NULL for it); `-infinity` is refused (0A000).
//!
//! Who acts ([`Identity`], PostgreSQL's `miscinit.c`): the role the client authenticated as
//! (fixed for the session, and whether it was a superuser then), the session user (`SET
//! SESSION AUTHORIZATION`, which only an authenticated superuser may change to another role),
//! and the current role (`SET ROLE`, to a role the session user is a member of, directly or
//! through others; a session user that is a superuser may take any role). `is_superuser`
//! reports the current role's attribute as it was when the session took that role; privilege
//! checks read the current role's attributes as they are now, in the statement's
//! transaction, as PostgreSQL's `superuser()` does. A role that another session dropped has
//! no privileges.
//!
//! Privileges (all 42501 unless said otherwise), checked against the current role:
//! - CREATE ROLE: SUPERUSER, REPLICATION or BYPASSRLS need a superuser ("must be superuser to
//!   create superusers" / "... replication users" / "... bypassrls users"); anything else
//!   needs CREATEROLE ("permission denied to create role"). Names starting with `pg_` are
//!   reserved (42939), as are `public` and `none`.
//! - ALTER ROLE: a superuser role, or the SUPERUSER option, needs a superuser ("must be
//!   superuser to alter superuser roles or change superuser attribute"); likewise a
//!   replication role or REPLICATION, and BYPASSRLS. Otherwise CREATEROLE may change anything;
//!   without it a role may change only its own password, nothing else ("permission denied").
//!   The bootstrap superuser keeps SUPERUSER (PostgreSQL 16's rule: "permission denied to
//!   alter role"; PostgreSQL 15 lets it go and leaves the cluster without its superuser).
//! - RENAME: the session user and the current role cannot be renamed (0A000); a superuser
//!   needs a superuser, any other role CREATEROLE ("permission denied to rename role").
//! - DROP ROLE: CREATEROLE ("permission denied to drop role"); a superuser needs a superuser
//!   ("must be superuser to drop superusers"); not the current or session user (55006), not
//!   `postgres` (2BP01). Its memberships, both ways, go with it.
//! - GRANT/REVOKE role: on a superuser role, a superuser ("must be superuser to alter
//!   superusers"); otherwise CREATEROLE or the admin option on the role, held directly or
//!   through membership ("must have admin option on role ..."); a role never administers
//!   itself. GRANTED BY another role needs a superuser. A grant that would make a role a
//!   member of itself, directly or through others, is refused (0LP01).
//! - SET ROLE: 22023 for a role that does not exist, 42501 "permission denied to set role
//!   ..." for one the session user is not a member of. SET SESSION AUTHORIZATION: 42501
//!   "permission denied to set session authorization ..." unless the authenticated role was a
//!   superuser at login (or the target is the authenticated role itself).
//! - `pg_authid` (verifiers) only for a superuser ("permission denied for table pg_authid");
//!   `pg_roles` and `pg_user` show `********` for every role.
//!
//! Not done here: `ALTER ROLE ... SET` (per-role settings), SET LOCAL ROLE, and SET ROLE
//! that a rolled-back block undoes (quire's settings are not transactional); the connection
//! limit and VALID UNTIL are stored and shown, and enforcing them at login is the server's.

mod commands;
mod grammar;
mod members;
mod scram;

pub(crate) use commands::missing;

use quire_engine::{
    Column, Database, IsolationLevel, Row, SqlState, TableId, Tid, Transaction, Type, Value,
};

use crate::error::{Result, SqlError};

pub(crate) use commands::execute;
pub(crate) use grammar::parse;
pub use grammar::RoleStmt;
pub(crate) use members::all as memberships;
pub use scram::ScramVerifier;

/// The roles table; its name is in quire's reserved namespace ([`crate::catalog`]).
const ROLES_TABLE: &str = "quire_roles";
const ROLES_NAME_INDEX: &str = "quire_roles_name";
/// The bootstrap superuser, created on first start.
pub const BOOTSTRAP_SUPERUSER: &str = "postgres";
/// PostgreSQL's oid for the bootstrap superuser.
pub(crate) const BOOTSTRAP_SUPERUSER_OID: u32 = 10;
/// PostgreSQL's predefined role `pg_database_owner`: the owner of the `public` schema, whose
/// one implicit member is the database's owner. It cannot log in, be dropped, or be given
/// members.
pub(crate) const DATABASE_OWNER_OID: u32 = 6171;
pub(crate) const DATABASE_OWNER: &str = "pg_database_owner";
/// PostgreSQL's FirstNormalObjectId: user-created roles get oids from here.
const FIRST_NORMAL_OID: u32 = 16_384;

/// `quire_roles`'s columns in their order: the first [`FIRST_COLUMNS`] since roles existed,
/// the others added by [`bootstrap`] to an older table.
const COLUMNS: [(&str, Type); 12] = [
    ("oid", Type::Int),
    ("rolname", Type::Text),
    ("rolsuper", Type::Bool),
    ("rolcanlogin", Type::Bool),
    ("rolpassword", Type::Text),
    ("rolinherit", Type::Bool),
    ("rolcreaterole", Type::Bool),
    ("rolcreatedb", Type::Bool),
    ("rolreplication", Type::Bool),
    ("rolbypassrls", Type::Bool),
    ("rolconnlimit", Type::Int),
    ("rolvaliduntil", Type::Timestamp),
];
const FIRST_COLUMNS: usize = 5;

/// One role, as `pg_authid` shows it.
#[allow(clippy::struct_excessive_bools)] // pg_authid's attributes, each a bool there too
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Role {
    pub oid: u32,
    pub name: String,
    pub superuser: bool,
    /// INHERIT: the role uses the privileges of the roles it belongs to.
    pub inherit: bool,
    pub createrole: bool,
    pub createdb: bool,
    pub login: bool,
    pub replication: bool,
    pub bypassrls: bool,
    /// CONNECTION LIMIT; -1 for none.
    pub connection_limit: i32,
    /// The SCRAM verifier's text form (never a password); `None` without a password.
    pub password: Option<String>,
    /// VALID UNTIL, microseconds since 1970-01-01 UTC: after it the password no longer
    /// logs in. `None` for no limit.
    pub valid_until: Option<i64>,
}

impl Role {
    /// A role with PostgreSQL's defaults for CREATE ROLE (NOLOGIN, INHERIT, no limit).
    fn new(oid: u32, name: &str) -> Role {
        Role {
            oid,
            name: name.to_string(),
            superuser: false,
            inherit: true,
            createrole: false,
            createdb: false,
            login: false,
            replication: false,
            bypassrls: false,
            connection_limit: -1,
            password: None,
            valid_until: None,
        }
    }

    /// The bootstrap superuser as initdb makes it: every attribute, no password.
    fn bootstrap_superuser() -> Role {
        Role {
            superuser: true,
            createrole: true,
            createdb: true,
            login: true,
            replication: true,
            bypassrls: true,
            ..Role::new(BOOTSTRAP_SUPERUSER_OID, BOOTSTRAP_SUPERUSER)
        }
    }
}

fn role_row(role: &Role) -> Row {
    let row = vec![
        Value::Int(i64::from(role.oid)),
        Value::Text(role.name.clone()),
        Value::Bool(role.superuser),
        Value::Bool(role.login),
        role.password.clone().map_or(Value::Null, Value::Text),
        Value::Bool(role.inherit),
        Value::Bool(role.createrole),
        Value::Bool(role.createdb),
        Value::Bool(role.replication),
        Value::Bool(role.bypassrls),
        Value::Int(i64::from(role.connection_limit)),
        role.valid_until.map_or(Value::Null, Value::Timestamp),
    ];
    assert_eq!(row.len(), COLUMNS.len());
    row
}

fn corrupt() -> SqlError {
    SqlError::new(
        SqlState::INTERNAL_ERROR,
        format!("a row of {ROLES_TABLE} is malformed"),
    )
}

fn bool_at(row: &[Value], i: usize) -> Result<bool> {
    match row.get(i) {
        Some(Value::Bool(b)) => Ok(*b),
        _ => Err(corrupt()),
    }
}

fn int_at(row: &[Value], i: usize) -> Result<i64> {
    row.get(i).and_then(Value::as_int).ok_or_else(corrupt)
}

/// The role of a row of the first five columns (a row from before the attributes existed
/// has only those), with PostgreSQL's defaults for the rest.
fn row_role_legacy(row: &[Value]) -> Result<Role> {
    let oid = u32::try_from(int_at(row, 0)?).map_err(|_| corrupt())?;
    let name = row.get(1).and_then(Value::as_text).ok_or_else(corrupt)?;
    let password = match row.get(4).ok_or_else(corrupt)? {
        Value::Null => None,
        Value::Text(t) => Some(t.clone()),
        _ => return Err(corrupt()),
    };
    let base = if oid == BOOTSTRAP_SUPERUSER_OID {
        Role::bootstrap_superuser()
    } else {
        Role::new(oid, name)
    };
    Ok(Role {
        name: name.to_string(),
        superuser: bool_at(row, 2)?,
        login: bool_at(row, 3)?,
        password,
        ..base
    })
}

fn row_role(row: &[Value]) -> Result<Role> {
    let legacy = row_role_legacy(row)?;
    let valid_until = match row.get(11).ok_or_else(corrupt)? {
        Value::Null => None,
        Value::Timestamp(us) => Some(*us),
        _ => return Err(corrupt()),
    };
    Ok(Role {
        inherit: bool_at(row, 5)?,
        createrole: bool_at(row, 6)?,
        createdb: bool_at(row, 7)?,
        replication: bool_at(row, 8)?,
        bypassrls: bool_at(row, 9)?,
        connection_limit: i32::try_from(int_at(row, 10)?).map_err(|_| corrupt())?,
        valid_until,
        ..legacy
    })
}

/// Creates the roles and membership tables when they are missing, and adds the attribute
/// columns to a roles table from before they existed.
pub fn bootstrap(db: &Database) -> Result<()> {
    let tx = db.begin(IsolationLevel::ReadCommitted)?;
    let changed = match tx.find_table(ROLES_TABLE)? {
        None => create_roles_table(&tx).map(|()| true),
        Some(table) => migrate(&tx, table),
    };
    let changed = changed? | members::bootstrap(&tx)? | predefined(&tx)?;
    if changed {
        tx.commit()?;
    } else {
        tx.rollback()?;
    }
    Ok(())
}

/// Adds the predefined roles a roles table lacks (one made before they existed); whether
/// it added any.
fn predefined(tx: &Transaction) -> Result<bool> {
    if find(tx, DATABASE_OWNER)?.is_some() {
        return Ok(false);
    }
    let table = tx.table(ROLES_TABLE)?;
    tx.insert(
        table,
        &role_row(&Role::new(DATABASE_OWNER_OID, DATABASE_OWNER)),
    )?;
    Ok(true)
}

fn create_roles_table(tx: &Transaction) -> Result<()> {
    let columns: Vec<Column> = COLUMNS.iter().map(|(n, t)| Column::new(n, *t)).collect();
    let table = tx.create_table(ROLES_TABLE, &columns)?;
    tx.create_index(ROLES_NAME_INDEX, table, &["rolname"], true)?;
    tx.insert(table, &role_row(&Role::bootstrap_superuser()))?;
    Ok(())
}

/// Adds the columns a roles table lacks and fills them in each row; whether it did.
fn migrate(tx: &Transaction, table: TableId) -> Result<bool> {
    let def = tx.table_def(table)?;
    let have: Vec<&str> = def.columns.iter().map(|c| c.name.as_str()).collect();
    let expected: Vec<&str> = COLUMNS.iter().map(|(n, _)| *n).collect();
    if have.len() < FIRST_COLUMNS
        || have.len() > COLUMNS.len()
        || have[..] != expected[..have.len()]
    {
        return Err(SqlError::new(
            SqlState::INTERNAL_ERROR,
            format!("{ROLES_TABLE} has columns {have:?}, not a prefix of {expected:?}"),
        ));
    }
    if have.len() == COLUMNS.len() {
        return Ok(false);
    }
    for (name, ty) in &COLUMNS[have.len()..] {
        tx.add_column(table, Column::new(name, *ty))?;
    }
    let rows: Vec<(Tid, Row)> = tx.scan(table)?.collect::<std::result::Result<_, _>>()?;
    for (tid, row) in rows {
        let role = row_role_legacy(&row)?;
        if let quire_engine::Changed::Skipped = tx.update(table, tid, &role_row(&role))? {
            return Err(corrupt());
        }
    }
    Ok(true)
}

/// Every role `tx` sees, by oid.
pub(crate) fn all(tx: &Transaction) -> Result<Vec<Role>> {
    let Some(table) = tx.find_table(ROLES_TABLE)? else {
        return Ok(Vec::new());
    };
    let mut roles = Vec::new();
    for row in tx.scan(table)? {
        let (_, row) = row?;
        roles.push(row_role(&row)?);
    }
    roles.sort_by_key(|r| r.oid);
    Ok(roles)
}

/// The role with oid `oid`, if `tx` sees one.
pub(crate) fn by_oid(tx: &Transaction, oid: u32) -> Result<Option<Role>> {
    Ok(all(tx)?.into_iter().find(|r| r.oid == oid))
}

/// The role named `name` (by the roles table's index).
pub(crate) fn named(tx: &Transaction, name: &str) -> Result<Option<Role>> {
    Ok(find(tx, name)?.map(|(_, _, role)| role))
}

/// The role named `name` and where its row is.
fn find(tx: &Transaction, name: &str) -> Result<Option<(TableId, Tid, Role)>> {
    let table = tx.table(ROLES_TABLE)?;
    let index = tx.index(ROLES_NAME_INDEX)?;
    let key = [Value::Text(name.to_string())];
    let bound = std::ops::Bound::Included(&key[..]);
    if let Some(hit) = tx.index_scan(index, bound, bound)?.next() {
        let (tid, row) = hit?;
        return Ok(Some((table, tid, row_role(&row)?)));
    }
    Ok(None)
}

/// Whether role `member` has the privileges of role `role` (PostgreSQL's
/// `has_privs_of_role`): it is `role`, a superuser, or belongs to it through memberships.
/// A name that is no role's has no privileges (false).
pub(crate) fn has_privs_of(tx: &Transaction, member: &str, role: &str) -> Result<bool> {
    let (Some((_, _, m)), Some((_, _, r))) = (find(tx, member)?, find(tx, role)?) else {
        return Ok(false);
    };
    if m.oid == r.oid || m.superuser {
        return Ok(true);
    }
    Ok(members::member_of(&members::all(tx)?, m.oid).contains(&r.oid))
}

/// The role named `name` as committed now (for authentication, outside any session).
pub fn lookup_role(db: &Database, name: &str) -> Result<Option<Role>> {
    let tx = db.begin(IsolationLevel::ReadCommitted)?;
    let r = find(&tx, name);
    let _ = tx.rollback();
    Ok(r?.map(|(_, _, role)| role))
}

/// A role a session acts as, with its superuser attribute as it was when the session took it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Acting {
    oid: u32,
    name: String,
    superuser: bool,
}

impl Acting {
    fn of(role: &Role) -> Acting {
        Acting {
            oid: role.oid,
            name: role.name.clone(),
            superuser: role.superuser,
        }
    }
}

/// Who a session acts as (the module's rules).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The role the client logged in as (PostgreSQL's AuthenticatedUserId), and whether it
    /// was a superuser then (AuthenticatedUserIsSuperuser).
    authenticated: Acting,
    /// `session_user`.
    session: Acting,
    /// The role SET ROLE chose; `None` for NONE (the session user acts).
    role: Option<Acting>,
}

impl Identity {
    /// The bootstrap superuser's session (an in-process session nobody logged in to).
    pub(crate) fn bootstrap() -> Identity {
        Identity::logged_in(&Role::bootstrap_superuser())
    }

    /// The session of a client that logged in as `role`.
    pub(crate) fn logged_in(role: &Role) -> Identity {
        let acting = Acting::of(role);
        Identity {
            authenticated: acting.clone(),
            session: acting,
            role: None,
        }
    }

    /// The session of a client whose role is not in the roles table (dropped meanwhile):
    /// no oid matches it, so it has no privileges.
    pub(crate) fn unknown(name: &str) -> Identity {
        Identity::logged_in(&Role::new(0, name))
    }

    fn current(&self) -> &Acting {
        self.role.as_ref().unwrap_or(&self.session)
    }

    /// `current_user`: the role whose privileges apply.
    pub fn current_user(&self) -> &str {
        &self.current().name
    }

    /// `session_user`.
    pub fn session_user(&self) -> &str {
        &self.session.name
    }

    /// `is_superuser`: whether the current role was a superuser when the session took it.
    pub fn is_superuser(&self) -> bool {
        self.current().superuser
    }

    /// SHOW role: the role SET ROLE chose, or `none`.
    pub fn role(&self) -> &str {
        self.role.as_ref().map_or("none", |r| r.name.as_str())
    }
}

/// The current role's privileges as the statement's transaction sees them now.
struct Privileges {
    oid: u32,
    superuser: bool,
    /// CREATEROLE, or a superuser.
    createrole: bool,
}

fn privileges(tx: &Transaction, who: &Identity) -> Result<Privileges> {
    let oid = who.current().oid;
    let role = by_oid(tx, oid)?;
    let superuser = role.as_ref().is_some_and(|r| r.superuser);
    Ok(Privileges {
        oid,
        superuser,
        createrole: superuser || role.is_some_and(|r| r.createrole),
    })
}

fn denied(message: impl Into<String>) -> SqlError {
    SqlError::new(SqlState::INSUFFICIENT_PRIVILEGE, message)
}

/// `pg_authid` holds the verifiers: only a superuser reads it.
pub(crate) fn check_authid_readable(tx: &Transaction, who: &Identity) -> Result<()> {
    if privileges(tx, who)?.superuser {
        Ok(())
    } else {
        Err(denied("permission denied for table pg_authid"))
    }
}
