//! Role statements run in a transaction, with PostgreSQL 15's privilege checks in its order
//! (`commands/user.c`'s CreateRole, AlterRole, RenameRole, DropRole, GrantRole, AddRoleMems,
//! DelRoleMems; `commands/variable.c`'s check_role and check_session_authorization). The
//! rules are [`super`]'s.

use quire_engine::{Changed, SqlState, TableId, Tid, Transaction, Value};

use super::grammar::{PasswordOption, RoleOptions, RoleSpec, RoleStmt};
use super::members::{self, Membership};
use super::{
    all, by_oid, denied, find, privileges, role_row, Acting, Identity, Privileges, Role,
    ScramVerifier, BOOTSTRAP_SUPERUSER_OID, FIRST_NORMAL_OID, ROLES_TABLE,
};
use crate::error::{Result, SqlError};
use crate::types::{parse_text, SqlType};

/// What a role statement did: its command tag and the notices PostgreSQL sends with it.
#[derive(Debug)]
pub(crate) struct Done {
    pub tag: &'static str,
    pub notices: Vec<String>,
}

fn done(tag: &'static str, notices: Vec<String>) -> Done {
    Done { tag, notices }
}

/// Runs a role statement in `tx` as `who`, whom SET ROLE and SET SESSION AUTHORIZATION
/// change (only when they succeed).
pub(crate) fn execute(tx: &Transaction, stmt: &RoleStmt, who: &mut Identity) -> Result<Done> {
    let mut notices = Vec::new();
    let tag = match stmt {
        RoleStmt::Create {
            name,
            user,
            options,
        } => create(tx, name, *user, options, who, &mut notices).map(|()| "CREATE ROLE"),
        RoleStmt::Alter { role, options } => {
            alter(tx, role, options, who, &mut notices).map(|()| "ALTER ROLE")
        }
        RoleStmt::Rename { name, to } => rename(tx, name, to, who).map(|()| "ALTER ROLE"),
        RoleStmt::Drop { roles, if_exists } => {
            drop(tx, roles, *if_exists, who, &mut notices).map(|()| "DROP ROLE")
        }
        RoleStmt::Grant {
            roles,
            grantees,
            admin,
            granted_by,
        } => grant(
            tx,
            roles,
            grantees,
            *admin,
            granted_by.as_ref(),
            who,
            &mut notices,
        )
        .map(|()| "GRANT ROLE"),
        RoleStmt::Revoke {
            roles,
            grantees,
            admin_only,
            granted_by,
        } => revoke(
            tx,
            roles,
            grantees,
            *admin_only,
            granted_by.as_ref(),
            who,
            &mut notices,
        )
        .map(|()| "REVOKE ROLE"),
        RoleStmt::SetRole { role, reset } => {
            set_role(tx, role.as_deref(), who).map(|()| set_tag(*reset))
        }
        RoleStmt::SetSessionAuthorization { user, reset } => {
            set_session_authorization(tx, user.as_deref(), who).map(|()| set_tag(*reset))
        }
    }?;
    Ok(done(tag, notices))
}

fn set_tag(reset: bool) -> &'static str {
    if reset {
        "RESET"
    } else {
        "SET"
    }
}

fn duplicate(name: &str) -> SqlError {
    SqlError::new(
        SqlState::DUPLICATE_OBJECT,
        format!("role \"{name}\" already exists"),
    )
}

pub(crate) fn missing(name: &str) -> SqlError {
    SqlError::new(
        SqlState::UNDEFINED_OBJECT,
        format!("role \"{name}\" does not exist"),
    )
}

fn require(allowed: bool, message: &str) -> Result<()> {
    if allowed {
        Ok(())
    } else {
        Err(denied(message))
    }
}

/// Names starting with `pg_` are PostgreSQL's own roles'.
fn check_not_reserved(name: &str) -> Result<()> {
    if name.starts_with("pg_") {
        return Err(SqlError::new(
            SqlState::RESERVED_NAME,
            format!("role name \"{name}\" is reserved"),
        )
        .with_detail("Role names starting with \"pg_\" are reserved."));
    }
    Ok(())
}

fn check_connection_limit(limit: Option<i32>) -> Result<()> {
    match limit {
        Some(n) if n < -1 => Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("invalid connection limit: {n}"),
        )),
        _ => Ok(()),
    }
}

/// The role a `RoleSpec` names (42704 for one that does not exist, and for PUBLIC).
fn resolve(tx: &Transaction, spec: &RoleSpec, who: &Identity) -> Result<Role> {
    let (oid, name) = match spec {
        RoleSpec::Name(n) => return find(tx, n)?.map(|(_, _, r)| r).ok_or_else(|| missing(n)),
        RoleSpec::Public => return Err(missing("public")),
        RoleSpec::CurrentUser | RoleSpec::CurrentRole => (who.current().oid, who.current_user()),
        RoleSpec::SessionUser => (who.session.oid, who.session_user()),
    };
    by_oid(tx, oid)?.ok_or_else(|| missing(name))
}

fn resolve_all(tx: &Transaction, specs: &[RoleSpec], who: &Identity) -> Result<Vec<Role>> {
    specs.iter().map(|s| resolve(tx, s, who)).collect()
}

/// The verifier to store for a PASSWORD option: one given in SCRAM form as is, otherwise
/// the password's. An empty password is no password, with PostgreSQL's notice.
fn verifier(password: &PasswordOption, notices: &mut Vec<String>) -> Result<Option<String>> {
    let PasswordOption::Given(pw) = password else {
        return Ok(None);
    };
    if pw.is_empty() {
        notices.push("empty string is not a valid password, clearing password".into());
        return Ok(None);
    }
    if pw.starts_with("SCRAM-SHA-256$") {
        return match ScramVerifier::parse(pw) {
            Some(v) => Ok(Some(v.to_string())),
            None => Err(SqlError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                "the password looks like a SCRAM-SHA-256 verifier but does not parse as one",
            )),
        };
    }
    Ok(Some(ScramVerifier::new_random(pw)?.to_string()))
}

/// VALID UNTIL's value: `None` for `infinity` (no limit).
fn valid_until(text: &str) -> Result<Option<i64>> {
    match text.trim().to_ascii_lowercase().as_str() {
        "infinity" | "+infinity" => return Ok(None),
        "-infinity" => return Err(SqlError::unsupported("VALID UNTIL '-infinity'")),
        _ => {}
    }
    match parse_text(SqlType::Timestamptz, text)? {
        Value::Timestamp(us) => Ok(Some(us)),
        _ => Err(SqlError::new(
            SqlState::INTERNAL_ERROR,
            "a timestamptz did not parse to a timestamp",
        )),
    }
}

/// The attributes of `o` that are set, over `role`'s.
fn apply(role: &mut Role, o: &RoleOptions, notices: &mut Vec<String>) -> Result<()> {
    let flags = [
        (o.superuser, &mut role.superuser),
        (o.inherit, &mut role.inherit),
        (o.createrole, &mut role.createrole),
        (o.createdb, &mut role.createdb),
        (o.login, &mut role.login),
        (o.replication, &mut role.replication),
        (o.bypassrls, &mut role.bypassrls),
    ];
    for (given, attribute) in flags {
        if let Some(v) = given {
            *attribute = v;
        }
    }
    if let Some(n) = o.connection_limit {
        role.connection_limit = n;
    }
    if let Some(t) = &o.valid_until {
        role.valid_until = valid_until(t)?;
    }
    if let Some(p) = &o.password {
        role.password = verifier(p, notices)?;
    }
    Ok(())
}

/// One above the highest oid in use, from FirstNormalObjectId.
fn next_oid(tx: &Transaction) -> Result<u32> {
    all(tx)?
        .iter()
        .map(|r| r.oid)
        .max()
        .unwrap_or(0)
        .max(FIRST_NORMAL_OID - 1)
        .checked_add(1)
        .ok_or_else(|| SqlError::new(SqlState::PROGRAM_LIMIT_EXCEEDED, "out of role oids"))
}

fn create(
    tx: &Transaction,
    name: &str,
    user: bool,
    o: &RoleOptions,
    who: &Identity,
    notices: &mut Vec<String>,
) -> Result<()> {
    if o.sysid {
        notices.push("SYSID can no longer be specified".into());
    }
    check_connection_limit(o.connection_limit)?;
    let me = privileges(tx, who)?;
    if o.superuser == Some(true) {
        require(me.superuser, "must be superuser to create superusers")?;
    } else if o.replication == Some(true) {
        require(
            me.superuser,
            "must be superuser to create replication users",
        )?;
    } else if o.bypassrls == Some(true) {
        require(me.superuser, "must be superuser to create bypassrls users")?;
    } else {
        require(me.createrole, "permission denied to create role")?;
    }
    check_not_reserved(name)?;
    if find(tx, name)?.is_some() {
        return Err(duplicate(name));
    }
    let mut role = Role {
        login: user,
        ..Role::new(next_oid(tx)?, name)
    };
    apply(&mut role, o, notices)?;
    let table = tx.table(ROLES_TABLE)?;
    tx.insert(table, &role_row(&role)).map_err(|e| match e {
        quire_engine::Error::UniqueViolation { .. } => duplicate(name),
        e => e.into(),
    })?;
    let none = Vec::new();
    for group in resolve_all(tx, o.in_roles.as_ref().unwrap_or(&none), who)? {
        add_members(tx, &group, &[role.clone()], me.oid, false, who, notices)?;
    }
    let admins = resolve_all(tx, o.admins.as_ref().unwrap_or(&none), who)?;
    add_members(tx, &role, &admins, me.oid, true, who, notices)?;
    let members = resolve_all(tx, o.members.as_ref().unwrap_or(&none), who)?;
    add_members(tx, &role, &members, me.oid, false, who, notices)
}

/// Whether `me` may make the changes `o` asks of `role` (AlterRole's checks).
fn check_alter(me: &Privileges, role: &Role, o: &RoleOptions) -> Result<()> {
    if role.superuser || o.superuser.is_some() {
        require(
            me.superuser,
            "must be superuser to alter superuser roles or change superuser attribute",
        )?;
    } else if role.replication || o.replication.is_some() {
        require(
            me.superuser,
            "must be superuser to alter replication roles or change replication attribute",
        )?;
    } else if o.bypassrls.is_some() {
        require(
            me.superuser,
            "must be superuser to change bypassrls attribute",
        )?;
    } else if !me.createrole {
        // Without CREATEROLE, a role may change its own password and nothing else.
        let own_password_only = role.oid == me.oid
            && o.password.is_some()
            && RoleOptions {
                password: None,
                ..o.clone()
            } == RoleOptions::default();
        require(own_password_only, "permission denied")?;
    }
    if o.superuser == Some(false) && role.oid == BOOTSTRAP_SUPERUSER_OID {
        return Err(denied("permission denied to alter role")
            .with_detail("The bootstrap user must have the SUPERUSER attribute."));
    }
    Ok(())
}

fn alter(
    tx: &Transaction,
    spec: &RoleSpec,
    o: &RoleOptions,
    who: &Identity,
    notices: &mut Vec<String>,
) -> Result<()> {
    check_connection_limit(o.connection_limit)?;
    let name = resolve(tx, spec, who)?.name;
    let (table, tid, mut role) = find(tx, &name)?.ok_or_else(|| missing(&name))?;
    check_alter(&privileges(tx, who)?, &role, o)?;
    apply(&mut role, o, notices)?;
    update_role(tx, table, tid, &role)
}

fn update_role(tx: &Transaction, table: TableId, tid: Tid, role: &Role) -> Result<()> {
    match tx.update(table, tid, &role_row(role))? {
        Changed::Done(..) => Ok(()),
        // The row changed under us after the lookup (READ COMMITTED): say so rather than
        // report an ALTER that did nothing.
        Changed::Skipped => Err(SqlError::new(
            SqlState::T_R_SERIALIZATION_FAILURE,
            format!(
                "could not alter role \"{}\" due to a concurrent change",
                role.name
            ),
        )),
    }
}

fn rename(tx: &Transaction, name: &str, to: &str, who: &Identity) -> Result<()> {
    let (table, tid, mut role) = find(tx, name)?.ok_or_else(|| missing(name))?;
    if role.oid == who.session.oid {
        return Err(SqlError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            "session user cannot be renamed",
        ));
    }
    if role.oid == who.current().oid {
        return Err(SqlError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            "current user cannot be renamed",
        ));
    }
    check_not_reserved(name)?;
    check_not_reserved(to)?;
    if find(tx, to)?.is_some() {
        return Err(duplicate(to));
    }
    let me = privileges(tx, who)?;
    if role.superuser {
        require(me.superuser, "must be superuser to rename superusers")?;
    } else {
        require(me.createrole, "permission denied to rename role")?;
    }
    role.name = to.to_string();
    update_role(tx, table, tid, &role)
}

fn drop(
    tx: &Transaction,
    specs: &[RoleSpec],
    if_exists: bool,
    who: &Identity,
    notices: &mut Vec<String>,
) -> Result<()> {
    let me = privileges(tx, who)?;
    require(me.createrole, "permission denied to drop role")?;
    for spec in specs {
        let RoleSpec::Name(name) = spec else {
            return Err(SqlError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                "cannot use special role specifier in DROP ROLE",
            ));
        };
        let Some((table, tid, role)) = find(tx, name)? else {
            if !if_exists {
                return Err(missing(name));
            }
            notices.push(format!("role \"{name}\" does not exist, skipping"));
            continue;
        };
        if role.oid == who.current().oid {
            return Err(SqlError::new(
                SqlState::OBJECT_IN_USE,
                "current user cannot be dropped",
            ));
        }
        if role.oid == who.session.oid {
            return Err(SqlError::new(
                SqlState::OBJECT_IN_USE,
                "session user cannot be dropped",
            ));
        }
        if role.superuser {
            require(me.superuser, "must be superuser to drop superusers")?;
        }
        if role.oid < FIRST_NORMAL_OID {
            return Err(SqlError::new(
                SqlState::DEPENDENT_OBJECTS_STILL_EXIST,
                format!("cannot drop role {name} because it is required by the database system"),
            ));
        }
        if let Changed::Skipped = tx.delete(table, tid)? {
            return Err(SqlError::new(
                SqlState::T_R_SERIALIZATION_FAILURE,
                format!("could not drop role \"{name}\" due to a concurrent change"),
            ));
        }
        members::delete_all_of(tx, role.oid)?;
    }
    Ok(())
}

/// Whether `member` holds the admin option on `role`: as a superuser, or through a membership
/// (PostgreSQL 15's `is_admin_of_role`).
fn is_admin_of(tx: &Transaction, member: u32, role: u32) -> Result<bool> {
    if by_oid(tx, member)?.is_some_and(|r| r.superuser) {
        return Ok(true);
    }
    Ok(members::admin_of(&members::all(tx)?, member, role))
}

/// Whether `member` belongs to `role`, directly or through other roles, or is a superuser
/// (PostgreSQL's `is_member_of_role`).
fn is_member_of(tx: &Transaction, member: u32, role: u32) -> Result<bool> {
    if by_oid(tx, member)?.is_some_and(|r| r.superuser) {
        return Ok(true);
    }
    Ok(members::member_of(&members::all(tx)?, member).contains(&role))
}

/// Whether `me` may change who belongs to `role`, as `grantor` for a grant (`None` for a
/// revoke, which the current role makes).
fn check_membership_change(
    tx: &Transaction,
    me: &Privileges,
    role: &Role,
    grantor: Option<u32>,
) -> Result<()> {
    if role.superuser {
        require(me.superuser, "must be superuser to alter superusers")?;
    } else if !me.createrole && !is_admin_of(tx, grantor.unwrap_or(me.oid), role.oid)? {
        return Err(denied(format!(
            "must have admin option on role \"{}\"",
            role.name
        )));
    }
    if grantor.is_some_and(|g| g != me.oid) {
        require(me.superuser, "must be superuser to set grantor")?;
    }
    Ok(())
}

/// Makes `new` members of `role` (PostgreSQL 15's AddRoleMems).
fn add_members(
    tx: &Transaction,
    role: &Role,
    new: &[Role],
    grantor: u32,
    admin: bool,
    who: &Identity,
    notices: &mut Vec<String>,
) -> Result<()> {
    if new.is_empty() {
        return Ok(());
    }
    check_membership_change(tx, &privileges(tx, who)?, role, Some(grantor))?;
    if role.oid == super::DATABASE_OWNER_OID {
        return Err(SqlError::new(
            SqlState::INVALID_GRANT_OPERATION,
            format!("role \"{}\" cannot have explicit members", role.name),
        ));
    }
    for member in new {
        // A role that `role` belongs to (itself included) may not become its member.
        if members::member_of(&members::all(tx)?, role.oid).contains(&member.oid) {
            return Err(SqlError::new(
                SqlState::INVALID_GRANT_OPERATION,
                format!(
                    "role \"{}\" is a member of role \"{}\"",
                    role.name, member.name
                ),
            ));
        }
        let granted = Membership {
            roleid: role.oid,
            member: member.oid,
            grantor,
            admin_option: admin,
        };
        match members::find(tx, role.oid, member.oid)? {
            Some((_, old)) if !admin || old.admin_option => notices.push(format!(
                "role \"{}\" is already a member of role \"{}\"",
                member.name, role.name
            )),
            Some((tid, _)) => members::update(tx, tid, &granted)?,
            None => members::insert(tx, &granted)?,
        }
    }
    Ok(())
}

/// Takes `gone` out of `role`, or only their admin option (PostgreSQL 15's DelRoleMems).
fn del_members(
    tx: &Transaction,
    role: &Role,
    gone: &[Role],
    admin_only: bool,
    who: &Identity,
    notices: &mut Vec<String>,
) -> Result<()> {
    if gone.is_empty() {
        return Ok(());
    }
    check_membership_change(tx, &privileges(tx, who)?, role, None)?;
    for member in gone {
        match members::find(tx, role.oid, member.oid)? {
            // PostgreSQL's is a WARNING.
            None => notices.push(format!(
                "role \"{}\" is not a member of role \"{}\"",
                member.name, role.name
            )),
            Some((tid, _)) if !admin_only => members::delete(tx, tid)?,
            Some((tid, old)) => members::update(
                tx,
                tid,
                &Membership {
                    admin_option: false,
                    ..old
                },
            )?,
        }
    }
    Ok(())
}

fn grant(
    tx: &Transaction,
    roles: &[String],
    grantees: &[RoleSpec],
    admin: bool,
    granted_by: Option<&RoleSpec>,
    who: &Identity,
    notices: &mut Vec<String>,
) -> Result<()> {
    let grantor = match granted_by {
        Some(spec) => resolve(tx, spec, who)?.oid,
        None => who.current().oid,
    };
    let members = resolve_all(tx, grantees, who)?;
    for name in roles {
        let (_, _, role) = find(tx, name)?.ok_or_else(|| missing(name))?;
        add_members(tx, &role, &members, grantor, admin, who, notices)?;
    }
    Ok(())
}

fn revoke(
    tx: &Transaction,
    roles: &[String],
    grantees: &[RoleSpec],
    admin_only: bool,
    granted_by: Option<&RoleSpec>,
    who: &Identity,
    notices: &mut Vec<String>,
) -> Result<()> {
    if let Some(spec) = granted_by {
        resolve(tx, spec, who)?;
    }
    let members = resolve_all(tx, grantees, who)?;
    for name in roles {
        let (_, _, role) = find(tx, name)?.ok_or_else(|| missing(name))?;
        del_members(tx, &role, &members, admin_only, who, notices)?;
    }
    Ok(())
}

/// A role SET ROLE or SET SESSION AUTHORIZATION names (22023 when there is none, as a
/// setting's check hook reports it).
fn settable(tx: &Transaction, name: &str) -> Result<Role> {
    find(tx, name)?.map(|(_, _, r)| r).ok_or_else(|| {
        SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("role \"{name}\" does not exist"),
        )
    })
}

fn set_role(tx: &Transaction, name: Option<&str>, who: &mut Identity) -> Result<()> {
    let Some(name) = name else {
        who.role = None;
        return Ok(());
    };
    let role = settable(tx, name)?;
    if !is_member_of(tx, who.session.oid, role.oid)? {
        return Err(denied(format!("permission denied to set role \"{name}\"")));
    }
    who.role = Some(Acting::of(&role));
    Ok(())
}

fn set_session_authorization(
    tx: &Transaction,
    name: Option<&str>,
    who: &mut Identity,
) -> Result<()> {
    let name = name.unwrap_or(&who.authenticated.name).to_string();
    let role = settable(tx, &name)?;
    if role.oid != who.authenticated.oid && !who.authenticated.superuser {
        return Err(denied(format!(
            "permission denied to set session authorization \"{name}\""
        )));
    }
    who.session = Acting::of(&role);
    who.role = None;
    Ok(())
}
