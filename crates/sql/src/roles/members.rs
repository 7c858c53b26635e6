//! Role membership (PostgreSQL's `pg_auth_members`): one row per (role, member) pair, with
//! who granted it and whether the member may grant it on (the admin option). It lives in an
//! ordinary engine table, `quire_auth_members`, written in the statement's transaction like
//! the roles table, so GRANT, REVOKE and DROP ROLE roll back with their block. A unique index
//! on (roleid, member) keeps one row per pair against a concurrent GRANT (which then fails
//! with 40001).
//!
//! The graph has no cycles: a GRANT that would close one is refused (0LP01) before it is
//! stored ([`super`]'s rules), so a walk from any role ends; walks are bounded by the number
//! of rows all the same.

use std::collections::BTreeSet;
use std::ops::Bound::Included;

use quire_engine::{Column, Error, SqlState, Tid, Transaction, Type, Value};

use crate::error::{Result, SqlError};

/// The membership table; its name is in quire's reserved namespace ([`crate::catalog`]).
const MEMBERS_TABLE: &str = "quire_auth_members";
const MEMBERS_INDEX: &str = "quire_auth_members_role_member";

/// One membership: `member` belongs to `roleid`, as `grantor` granted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Membership {
    pub roleid: u32,
    pub member: u32,
    pub grantor: u32,
    pub admin_option: bool,
}

/// Creates the membership table when it is missing (a new data directory, or one made before
/// memberships existed); whether it did.
pub(super) fn bootstrap(tx: &Transaction) -> Result<bool> {
    if tx.find_table(MEMBERS_TABLE)?.is_some() {
        return Ok(false);
    }
    let table = tx.create_table(
        MEMBERS_TABLE,
        &[
            Column::new("roleid", Type::Int),
            Column::new("member", Type::Int),
            Column::new("grantor", Type::Int),
            Column::new("admin_option", Type::Bool),
        ],
    )?;
    tx.create_index(MEMBERS_INDEX, table, &["roleid", "member"], true)?;
    Ok(true)
}

fn to_row(m: &Membership) -> Vec<Value> {
    vec![
        Value::Int(i64::from(m.roleid)),
        Value::Int(i64::from(m.member)),
        Value::Int(i64::from(m.grantor)),
        Value::Bool(m.admin_option),
    ]
}

fn corrupt() -> SqlError {
    SqlError::new(
        SqlState::INTERNAL_ERROR,
        format!("a row of {MEMBERS_TABLE} is malformed"),
    )
}

fn oid(v: Option<&Value>) -> Result<u32> {
    v.and_then(Value::as_int)
        .and_then(|i| u32::try_from(i).ok())
        .ok_or_else(corrupt)
}

fn from_row(row: &[Value]) -> Result<Membership> {
    let Some(Value::Bool(admin_option)) = row.get(3) else {
        return Err(corrupt());
    };
    Ok(Membership {
        roleid: oid(row.first())?,
        member: oid(row.get(1))?,
        grantor: oid(row.get(2))?,
        admin_option: *admin_option,
    })
}

/// Every membership `tx` sees, by (roleid, member).
pub(crate) fn all(tx: &Transaction) -> Result<Vec<Membership>> {
    let Some(table) = tx.find_table(MEMBERS_TABLE)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for row in tx.scan(table)? {
        out.push(from_row(&row?.1)?);
    }
    out.sort_by_key(|m| (m.roleid, m.member));
    Ok(out)
}

/// The membership of `member` in `roleid` and where its row is.
pub(super) fn find(
    tx: &Transaction,
    roleid: u32,
    member: u32,
) -> Result<Option<(Tid, Membership)>> {
    let index = tx.index(MEMBERS_INDEX)?;
    let key = [Value::Int(i64::from(roleid)), Value::Int(i64::from(member))];
    match tx
        .index_scan(index, Included(&key[..]), Included(&key[..]))?
        .next()
    {
        Some(hit) => {
            let (tid, row) = hit?;
            Ok(Some((tid, from_row(&row)?)))
        }
        None => Ok(None),
    }
}

fn concurrent(what: &str) -> SqlError {
    SqlError::new(
        SqlState::T_R_SERIALIZATION_FAILURE,
        format!("could not {what} a role membership due to a concurrent change"),
    )
}

pub(super) fn insert(tx: &Transaction, m: &Membership) -> Result<()> {
    assert_ne!(m.roleid, m.member, "a role is never a member of itself");
    let table = tx.table(MEMBERS_TABLE)?;
    tx.insert(table, &to_row(m)).map_err(|e| match e {
        Error::UniqueViolation { .. } => concurrent("grant"),
        e => e.into(),
    })?;
    Ok(())
}

/// Replaces the row at `tid` with `m` (the same pair).
pub(super) fn update(tx: &Transaction, tid: Tid, m: &Membership) -> Result<()> {
    let table = tx.table(MEMBERS_TABLE)?;
    match tx.update(table, tid, &to_row(m))? {
        quire_engine::Changed::Done(..) => Ok(()),
        quire_engine::Changed::Skipped => Err(concurrent("change")),
    }
}

pub(super) fn delete(tx: &Transaction, tid: Tid) -> Result<()> {
    let table = tx.table(MEMBERS_TABLE)?;
    match tx.delete(table, tid)? {
        quire_engine::Changed::Done(..) => Ok(()),
        quire_engine::Changed::Skipped => Err(concurrent("revoke")),
    }
}

/// Deletes every membership of `role` and in `role` (DROP ROLE).
pub(super) fn delete_all_of(tx: &Transaction, role: u32) -> Result<()> {
    let Some(table) = tx.find_table(MEMBERS_TABLE)? else {
        return Ok(());
    };
    let mut doomed = Vec::new();
    for row in tx.scan(table)? {
        let (tid, row) = row?;
        let m = from_row(&row)?;
        if m.roleid == role || m.member == role {
            doomed.push(tid);
        }
    }
    for tid in doomed {
        delete(tx, tid)?;
    }
    Ok(())
}

/// The roles `member` belongs to, directly or through other roles, itself included
/// (PostgreSQL's `roles_is_member_of` with ROLERECURSE_MEMBERS: INHERIT plays no part).
pub(crate) fn member_of(all: &[Membership], member: u32) -> BTreeSet<u32> {
    let mut seen = BTreeSet::from([member]);
    let mut frontier = vec![member];
    // Each round takes one role off the frontier, and a role goes on it once: at most
    // all.len() + 1 roles, then one round that finds the frontier empty.
    for _ in 0..all.len() + 2 {
        let Some(next) = frontier.pop() else {
            return seen;
        };
        for m in all.iter().filter(|m| m.member == next) {
            if seen.insert(m.roleid) {
                frontier.push(m.roleid);
            }
        }
    }
    panic!(
        "a membership walk outran its bound of {} rounds",
        all.len() + 2
    );
}

/// Whether `member`, or a role it belongs to, holds the admin option on `role` (PostgreSQL
/// 15's `is_admin_of_role` for a role other than a superuser: a role never administers
/// itself).
pub(super) fn admin_of(all: &[Membership], member: u32, role: u32) -> bool {
    if member == role {
        return false;
    }
    let mine = member_of(all, member);
    all.iter()
        .any(|m| m.roleid == role && m.admin_option && mine.contains(&m.member))
}
