//! Referential integrity: FOREIGN KEY constraints enforced as PostgreSQL's `ri_triggers.c`
//! enforces them, without triggers.
//!
//! Each row a statement writes leaves events ([`Ri::inserted`], [`Ri::updated`],
//! [`Ri::deleted`]); they run when the statement's rows are all written ([`Ri::finish`]),
//! so a statement sees its own rows (a row referencing another of the same INSERT), or at
//! COMMIT for a deferred constraint ([`check_deferred`]).
//!
//! - **A referencing row** (inserted, or its key changed) must find its key in the
//!   referenced table, through the unique index over the referenced columns, and locks that
//!   row until the transaction ends, so that no one deletes it meanwhile. quire's engine has
//!   one row-lock mode yet, FOR UPDATE (PostgreSQL takes FOR KEY SHARE): two transactions
//!   referencing the same row wait for each other, as PostgreSQL before 8.1 did. MATCH
//!   SIMPLE skips a key with a NULL; MATCH FULL skips an all-NULL key and refuses a mixed one.
//! - **A referenced key** that goes (DELETE, or UPDATE of the key): NO ACTION fails if a
//!   referencing row remains and no row has the key again; RESTRICT without that second
//!   look; CASCADE, SET NULL and SET DEFAULT change the referencing rows (never deferred),
//!   and those changes leave events of their own, run in the next round.
//! - **Snapshots**: READ COMMITTED reads each check with a new snapshot; REPEATABLE READ
//!   looks for referencing rows with a new one too, and a row its own snapshot does not see
//!   fails the statement with 40001 (PostgreSQL's crosscheck snapshot): no orphan commits,
//!   whatever the interleaving.
//! - **Memory**: events wait in spools (`work_mem` each, then a temp file); a statement's
//!   rounds of cascades are bounded by [`MAX_ROUNDS`].
//!
//! An event is a spool row of its foreign key's: `[kind, tid, old key..., new key...]`,
//! the keys in the order of the constraint's columns, typed as the referenced columns.

use std::collections::HashMap;
use std::ops::Bound::Included;
use std::sync::Arc;

use quire_engine::{
    Changed, IsolationLevel, Row, Sees, SqlState, TableId, Tid, Transaction, Value,
};

use crate::catalog::{self, FkAction, ForeignKey, TableInfo};
use crate::context::{Cx, Deferred, RiQueue};
use crate::error::{Result, SqlError};
use crate::spool::Spool;

/// A referencing row to verify (at `tid`).
const CHECK: i64 = 0;
/// A referenced key deleted.
const DELETED: i64 = 1;
/// A referenced key changed to another.
const UPDATED: i64 = 2;

/// The most rounds of cascaded changes one statement runs.
const MAX_ROUNDS: usize = 1 << 20;

fn tid_value(t: Tid) -> Value {
    Value::Int((i64::from(t.block) << 16) | i64::from(t.offset))
}

fn value_tid(v: &Value) -> Option<Tid> {
    let n = v.as_int()?;
    Some(Tid {
        block: u32::try_from(n >> 16).ok()?,
        offset: u16::try_from(n & 0xffff).ok()?,
    })
}

/// The values of `cols` of `row`.
fn key_of(row: &[Value], cols: &[usize]) -> Row {
    cols.iter().map(|&c| row[c].clone()).collect()
}

fn same_key(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| !x.is_null() && !y.is_null() && crate::types::compare(x, y).is_eq())
}

/// Whether a key is checked: MATCH SIMPLE skips one with a NULL, MATCH FULL an all-NULL one.
fn is_checked(fk: &ForeignKey, key: &[Value]) -> bool {
    let nulls = key.iter().filter(|v| v.is_null()).count();
    nulls == 0 || (fk.match_full && nulls < key.len())
}

/// Whether `fk`'s checks wait for COMMIT now: DEFERRABLE, and deferred by SET CONSTRAINTS
/// or INITIALLY DEFERRED.
fn is_deferred(fk: &ForeignKey, deferred: &Deferred) -> bool {
    fk.deferral.deferrable()
        && deferred
            .named
            .borrow()
            .get(&fk.oid)
            .copied()
            .or(deferred.all.get())
            .unwrap_or(fk.deferral.initially_deferred())
}

/// The tables the checks read, looked up once per statement (or COMMIT).
#[derive(Default)]
struct Tables(HashMap<TableId, Arc<TableInfo>>);

impl Tables {
    fn get(&mut self, tx: &Transaction, oid: TableId) -> Result<Arc<TableInfo>> {
        if let Some(t) = self.0.get(&oid) {
            return Ok(Arc::clone(t));
        }
        let t = Arc::new(catalog::lookup_oid(tx, oid)?);
        self.0.insert(oid, Arc::clone(&t));
        Ok(t)
    }
}

/// A statement's referential work: the events its writes left, and the foreign keys and
/// tables they name.
#[derive(Default)]
pub(super) struct Ri {
    queue: RiQueue,
    keys: HashMap<u32, ForeignKey>,
    tables: Tables,
}

impl Ri {
    /// A row inserted into `table` at `tid`.
    pub(super) fn inserted(
        &mut self,
        cx: &Cx,
        table: &TableInfo,
        tid: Tid,
        row: &[Value],
    ) -> Result<()> {
        for fk in &table.foreign_keys {
            if is_checked(fk, &key_of(row, &fk.columns)) {
                self.push_check(cx, fk, tid)?;
            }
        }
        Ok(())
    }

    /// A row of `table` updated from `old` to `new` (at `tid`).
    pub(super) fn updated(
        &mut self,
        cx: &Cx,
        table: &TableInfo,
        old: &[Value],
        tid: Tid,
        new: &[Value],
    ) -> Result<()> {
        for fk in &table.foreign_keys {
            let key = key_of(new, &fk.columns);
            // An unchanged key was verified when it was written, and its row stays locked;
            // unless the constraint is deferred: then the version that was to be verified is
            // this one now.
            let changed = !same_key(&key_of(old, &fk.columns), &key);
            if is_checked(fk, &key) && (changed || is_deferred(fk, cx.deferred)) {
                self.push_check(cx, fk, tid)?;
            }
        }
        for fk in &table.referenced_by {
            let before = key_of(old, &fk.ref_columns);
            let after = key_of(new, &fk.ref_columns);
            if !before.iter().any(Value::is_null) && !same_key(&before, &after) {
                self.push_gone(cx, fk, UPDATED, before, Some(after))?;
            }
        }
        Ok(())
    }

    /// A row of `table` deleted (`old` was its values).
    pub(super) fn deleted(&mut self, cx: &Cx, table: &TableInfo, old: &[Value]) -> Result<()> {
        for fk in &table.referenced_by {
            let before = key_of(old, &fk.ref_columns);
            if !before.iter().any(Value::is_null) {
                self.push_gone(cx, fk, DELETED, before, None)?;
            }
        }
        Ok(())
    }

    fn push_check(&mut self, cx: &Cx, fk: &ForeignKey, tid: Tid) -> Result<()> {
        let n = fk.columns.len();
        let mut row = vec![Value::Int(CHECK), tid_value(tid)];
        row.resize(2 + 2 * n, Value::Null);
        self.push(cx, fk, &row, true)
    }

    fn push_gone(
        &mut self,
        cx: &Cx,
        fk: &ForeignKey,
        kind: i64,
        old: Row,
        new: Option<Row>,
    ) -> Result<()> {
        let n = fk.columns.len();
        let mut row = vec![Value::Int(kind), Value::Null];
        row.extend(old);
        row.extend(new.unwrap_or_else(|| vec![Value::Null; n]));
        // Only NO ACTION waits for COMMIT: RESTRICT and the actions happen now.
        let deferrable = fk.on_delete == FkAction::NoAction && kind == DELETED
            || fk.on_update == FkAction::NoAction && kind == UPDATED;
        self.push(cx, fk, &row, deferrable)
    }

    fn push(&mut self, cx: &Cx, fk: &ForeignKey, row: &[Value], deferrable: bool) -> Result<()> {
        let budget = cx.settings.work_mem_bytes();
        if deferrable && is_deferred(fk, cx.deferred) {
            let mut q = cx.deferred.queue.borrow_mut();
            let spool = q
                .by_key
                .entry(fk.oid)
                .or_insert_with(|| Spool::new(row.len(), budget));
            return spool.push(cx.db, row);
        }
        self.keys.entry(fk.oid).or_insert_with(|| fk.clone());
        let spool = self
            .queue
            .by_key
            .entry(fk.oid)
            .or_insert_with(|| Spool::new(row.len(), budget));
        spool.push(cx.db, row)
    }

    /// The end of the statement: its events run, then those their cascades left, round
    /// after round.
    pub(super) fn finish(mut self, cx: &Cx) -> Result<()> {
        for _ in 0..MAX_ROUNDS {
            if self.queue.is_empty() {
                return Ok(());
            }
            let queue = std::mem::take(&mut self.queue);
            for (oid, mut spool) in queue.by_key {
                let fk = self.keys[&oid].clone();
                while let Some(event) = spool.pop()? {
                    cx.interrupt.check()?;
                    self.run(cx, &fk, &event)?;
                }
            }
        }
        Err(SqlError::new(
            SqlState::PROGRAM_LIMIT_EXCEEDED,
            format!("foreign key actions cascaded more than {MAX_ROUNDS} times"),
        ))
    }

    fn run(&mut self, cx: &Cx, fk: &ForeignKey, event: &[Value]) -> Result<()> {
        let tx = cx.tx;
        let child = self.tables.get(tx, fk.table)?;
        let parent = self.tables.get(tx, fk.ref_table)?;
        let n = fk.columns.len();
        let (old, new) = (&event[2..2 + n], &event[2 + n..]);
        let (kind, action) = match event[0].as_int() {
            Some(CHECK) => return check_referencing(tx, fk, &child, &parent, &event[1]),
            Some(DELETED) => (DELETED, fk.on_delete),
            Some(UPDATED) => (UPDATED, fk.on_update),
            _ => {
                return Err(crate::types::internal(
                    "a foreign key event of no known kind",
                ))
            }
        };
        match action {
            FkAction::NoAction | FkAction::Restrict => {
                let restrict = action == FkAction::Restrict;
                check_unreferenced(tx, fk, &child, &parent, old, restrict)
            }
            FkAction::Cascade if kind == DELETED => {
                self.cascade_delete(cx, fk, &child, &parent, old)
            }
            FkAction::Cascade => {
                let to = new.to_vec();
                self.set_referencing(cx, fk, &child, &parent, old, |_| Ok(to.clone()))
            }
            FkAction::SetNull => {
                let nulls = vec![Value::Null; n];
                self.set_referencing(cx, fk, &child, &parent, old, |_| Ok(nulls.clone()))
            }
            FkAction::SetDefault => {
                let defaults = fk
                    .columns
                    .iter()
                    .map(|&c| crate::analyze::default_expr(tx, &child.columns[c]))
                    .collect::<Result<Vec<_>>>()?;
                self.set_referencing(cx, fk, &child, &parent, old, |row| {
                    defaults.iter().map(|d| d.eval(cx, row)).collect()
                })
            }
        }
    }

    /// ON DELETE CASCADE: the rows referencing `old` go, leaving events of their own.
    fn cascade_delete(
        &mut self,
        cx: &Cx,
        fk: &ForeignKey,
        child: &TableInfo,
        parent: &TableInfo,
        old: &[Value],
    ) -> Result<()> {
        let want = referencing_key(fk, child, parent, old);
        for (tid, _) in referencing_rows(cx.tx, fk, child, parent, old, usize::MAX)? {
            let changed = cx.tx.delete_if(child.def.oid, tid, |cur| {
                want.as_ref()
                    .is_some_and(|w| same_key(&key_of(cur, &fk.columns), w))
            })?;
            if let Changed::Done(_, row) = changed {
                self.deleted(cx, child, &row)?;
            }
        }
        Ok(())
    }

    /// ON DELETE / UPDATE CASCADE, SET NULL, SET DEFAULT: the rows referencing `old` get
    /// `values(row)` in the key's columns, verified (NOT NULL, CHECK) as any update is, and
    /// leave events of their own.
    fn set_referencing(
        &mut self,
        cx: &Cx,
        fk: &ForeignKey,
        child: &TableInfo,
        parent: &TableInfo,
        old: &[Value],
        values: impl Fn(&[Value]) -> Result<Row>,
    ) -> Result<()> {
        let want = referencing_key(fk, child, parent, old);
        let checks = crate::analyze::table_checks(cx.tx, child)?;
        for (tid, _) in referencing_rows(cx.tx, fk, child, parent, old, usize::MAX)? {
            let mut failure = None;
            let mut before = None;
            let changed = cx.tx.update_with(child.def.oid, tid, |cur| {
                if !want
                    .as_ref()
                    .is_some_and(|w| same_key(&key_of(cur, &fk.columns), w))
                {
                    return None;
                }
                let r = (|| -> Result<Row> {
                    let mut row = cur.clone();
                    let given = values(cur)?;
                    for (&c, v) in fk.columns.iter().zip(given) {
                        row[c] = child_value(parent, fk, child, c, v)?;
                    }
                    super::constraints::check_row(cx, child, &checks, &row)?;
                    Ok(row)
                })();
                match r {
                    Ok(row) => {
                        before = Some(cur.clone());
                        Some(row)
                    }
                    Err(e) => {
                        failure = Some(e);
                        None
                    }
                }
            })?;
            if let Some(e) = failure {
                return Err(e);
            }
            if let (Changed::Done(new_tid, row), Some(before)) = (changed, before) {
                self.updated(cx, child, &before, new_tid, &row)?;
            }
        }
        Ok(())
    }
}

/// A value given to referencing column `c` (from the referenced side, or a default), cast
/// to that column's type.
fn child_value(
    parent: &TableInfo,
    fk: &ForeignKey,
    child: &TableInfo,
    c: usize,
    v: Value,
) -> Result<Value> {
    let Some(j) = fk.columns.iter().position(|&x| x == c) else {
        return Ok(v);
    };
    let from = parent.columns[fk.ref_columns[j]].ty;
    crate::types::cast(v, from, child.columns[c].ty)
}

/// `key` (typed as the referenced columns) typed as the referencing ones; None when a value
/// has no equal there (a fraction for an integer column).
fn referencing_key(
    fk: &ForeignKey,
    child: &TableInfo,
    parent: &TableInfo,
    key: &[Value],
) -> Option<Row> {
    fk.columns
        .iter()
        .zip(&fk.ref_columns)
        .zip(key)
        .map(|((&c, &r), v)| {
            let cast =
                crate::types::cast(v.clone(), parent.columns[r].ty, child.columns[c].ty).ok()?;
            let back =
                crate::types::cast(cast.clone(), child.columns[c].ty, parent.columns[r].ty).ok()?;
            crate::types::compare(&back, v).is_eq().then_some(cast)
        })
        .collect()
}

/// The referencing row at `tid` (an event's `tid`) must find its key in the referenced
/// table, whose row it locks. A version no longer seen (deleted, updated since, rolled
/// back to a savepoint) needs nothing.
fn check_referencing(
    tx: &Transaction,
    fk: &ForeignKey,
    child: &TableInfo,
    parent: &TableInfo,
    tid: &Value,
) -> Result<()> {
    let tid = value_tid(tid)
        .ok_or_else(|| crate::types::internal("a foreign key event's row address"))?;
    match tx.fetch(child.def.oid, tid)? {
        Some(row) => check_row_key(tx, fk, child, parent, &row, true),
        None => Ok(()),
    }
}

/// A referencing `row`'s key must be in the referenced table (locked there if `lock`):
/// MATCH SIMPLE passes a key with a NULL, MATCH FULL an all-NULL one and refuses a mix.
fn check_row_key(
    tx: &Transaction,
    fk: &ForeignKey,
    child: &TableInfo,
    parent: &TableInfo,
    row: &[Value],
    lock: bool,
) -> Result<()> {
    let key = key_of(row, &fk.columns);
    if !is_checked(fk, &key) {
        return Ok(());
    }
    if key.iter().any(Value::is_null) {
        return Err(referencing_violation(fk, child)
            .with_detail("MATCH FULL does not allow mixing of null and nonnull key values."));
    }
    if has_referenced(tx, fk, child, parent, &key, lock)? {
        return Ok(());
    }
    Err(not_present(fk, child, parent, &key))
}

/// Whether the referenced table has the referencing key `key` (typed as the referencing
/// columns; a value that does not fit the referenced ones has no match), locked if `lock`.
fn has_referenced(
    tx: &Transaction,
    fk: &ForeignKey,
    child: &TableInfo,
    parent: &TableInfo,
    key: &[Value],
    lock: bool,
) -> Result<bool> {
    let typed: Option<Row> = fk
        .columns
        .iter()
        .zip(&fk.ref_columns)
        .zip(key)
        .map(|((&c, &r), v)| {
            crate::types::cast(v.clone(), child.columns[c].ty, parent.columns[r].ty).ok()
        })
        .collect();
    match typed {
        Some(typed) => find_referenced(tx, fk, parent, &typed, lock),
        None => Ok(false),
    }
}

/// 23503: `Key (a)=(1) is not present in table "p".`
fn not_present(fk: &ForeignKey, child: &TableInfo, parent: &TableInfo, key: &[Value]) -> SqlError {
    referencing_violation(fk, child).with_detail(format!(
        "{} is not present in table \"{}\".",
        key_text(child, &fk.columns, key),
        parent.def.name
    ))
}

/// Whether the referenced table has a row with `key` (typed as its columns); locked when
/// `lock` says so (a row deleted or given another key meanwhile is no match).
fn find_referenced(
    tx: &Transaction,
    fk: &ForeignKey,
    parent: &TableInfo,
    key: &[Value],
    lock: bool,
) -> Result<bool> {
    let index = parent
        .indexes
        .iter()
        .filter(|i| i.unique && i.columns.len() == fk.ref_columns.len())
        .find(|i| {
            i.columns
                .iter()
                .all(|&c| fk.ref_columns.contains(&usize::from(c)))
        })
        .ok_or_else(|| {
            SqlError::new(
                SqlState::INVALID_FOREIGN_KEY,
                format!(
                    "there is no unique constraint matching given keys for referenced table \"{}\"",
                    parent.def.name
                ),
            )
        })?;
    let probe: Row = index
        .columns
        .iter()
        .map(|&c| {
            let j = fk.ref_columns.iter().position(|&r| r == usize::from(c));
            key[j.expect("the index's columns are the key's")].clone()
        })
        .collect();
    let found: Vec<(Tid, Row)> = tx
        .index_scan_as(
            index.oid,
            Included(&probe[..]),
            Included(&probe[..]),
            sees(tx),
        )?
        .collect::<std::result::Result<_, _>>()?;
    for (tid, _) in found {
        if !lock {
            return Ok(true);
        }
        if let Changed::Done(_, row) = tx.lock_row(parent.def.oid, tid)? {
            if same_key(&key_of(&row, &fk.ref_columns), key) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// NO ACTION and RESTRICT: no referencing row may remain for the referenced key `old`
/// (NO ACTION: unless a row has that key again).
fn check_unreferenced(
    tx: &Transaction,
    fk: &ForeignKey,
    child: &TableInfo,
    parent: &TableInfo,
    old: &[Value],
    restrict: bool,
) -> Result<()> {
    if !restrict && find_referenced(tx, fk, parent, old, false)? {
        return Ok(());
    }
    if referencing_rows(tx, fk, child, parent, old, 1)?.is_empty() {
        return Ok(());
    }
    // PostgreSQL 18 names RESTRICT's violation apart (23001).
    let (code, what) = if restrict {
        (
            SqlState::RESTRICT_VIOLATION,
            "RESTRICT setting of foreign key constraint",
        )
    } else {
        (SqlState::FOREIGN_KEY_VIOLATION, "foreign key constraint")
    };
    Err(SqlError::new(
        code,
        format!(
            "update or delete on table \"{}\" violates {what} \"{}\" on table \"{}\"",
            parent.def.name, fk.name, child.def.name
        ),
    )
    .with_detail(format!(
        "{} is still referenced from table \"{}\".",
        key_text(parent, &fk.ref_columns, old),
        child.def.name
    )))
}

/// Up to `limit` rows of the referencing table whose key is `key` (typed as the referenced
/// columns): through an index led by the key's columns when there is one, else a scan.
/// Under REPEATABLE READ a row committed after the transaction's snapshot is 40001.
fn referencing_rows(
    tx: &Transaction,
    fk: &ForeignKey,
    child: &TableInfo,
    parent: &TableInfo,
    key: &[Value],
    limit: usize,
) -> Result<Vec<(Tid, Row)>> {
    let Some(want) = referencing_key(fk, child, parent, key) else {
        return Ok(Vec::new());
    };
    if tx.isolation() == IsolationLevel::RepeatableRead {
        let latest = matching_rows(tx, fk, child, &want, limit, Sees::Latest)?;
        if latest.is_empty() {
            return Ok(latest);
        }
        let seen = matching_rows(tx, fk, child, &want, usize::MAX, Sees::Transaction)?;
        if latest
            .iter()
            .any(|(t, _)| !seen.iter().any(|(s, _)| s == t))
        {
            return Err(quire_engine::Error::SerializationFailure {
                reason: "concurrent update".into(),
            }
            .into());
        }
        return Ok(latest);
    }
    matching_rows(tx, fk, child, &want, limit, Sees::Latest)
}

/// The snapshot a check reads the referenced table with: under READ COMMITTED the newest
/// (not the statement's: a key committed since counts), under REPEATABLE READ the
/// transaction's, as PostgreSQL's checks read.
fn sees(tx: &Transaction) -> Sees {
    if tx.isolation() == IsolationLevel::RepeatableRead {
        Sees::Transaction
    } else {
        Sees::Latest
    }
}

fn matching_rows(
    tx: &Transaction,
    fk: &ForeignKey,
    child: &TableInfo,
    want: &[Value],
    limit: usize,
    sees: Sees,
) -> Result<Vec<(Tid, Row)>> {
    let n = fk.columns.len();
    // An index whose first columns are the key's, in any order.
    let index = child.indexes.iter().find(|i| {
        i.columns.len() >= n
            && i.columns[..n]
                .iter()
                .all(|&c| fk.columns.contains(&usize::from(c)))
    });
    let mut out = Vec::new();
    let mut keep = |tid: Tid, row: Row| {
        if same_key(&key_of(&row, &fk.columns), want) {
            out.push((tid, row));
        }
        out.len() < limit
    };
    match index {
        Some(i) => {
            let probe: Row = i.columns[..n]
                .iter()
                .map(|&c| {
                    let j = fk.columns.iter().position(|&x| x == usize::from(c));
                    want[j.expect("the index's first columns are the key's")].clone()
                })
                .collect();
            for r in tx.index_scan_as(i.oid, Included(&probe[..]), Included(&probe[..]), sees)? {
                let (tid, row) = r?;
                if !keep(tid, row) {
                    break;
                }
            }
        }
        None => {
            for r in tx.scan_as(child.def.oid, sees)? {
                let (tid, row) = r?;
                if !keep(tid, row) {
                    break;
                }
            }
        }
    }
    Ok(out)
}

/// 23503 for a referencing row.
fn referencing_violation(fk: &ForeignKey, child: &TableInfo) -> SqlError {
    SqlError::new(
        SqlState::FOREIGN_KEY_VIOLATION,
        format!(
            "insert or update on table \"{}\" violates foreign key constraint \"{}\"",
            child.def.name, fk.name
        ),
    )
}

/// `Key (a, b)=(1, x)`: the columns `cols` of `t` and their values `key`, as PostgreSQL's
/// details write a key.
fn key_text(t: &TableInfo, cols: &[usize], key: &[Value]) -> String {
    let names: Vec<&str> = cols.iter().map(|&c| t.columns[c].name.as_str()).collect();
    let values: Vec<String> = cols
        .iter()
        .zip(key)
        .map(|(&c, v)| {
            crate::types::format_text(v, t.columns[c].ty).unwrap_or_else(|| "null".into())
        })
        .collect();
    format!("Key ({})=({})", names.join(", "), values.join(", "))
}

/// The deferred checks, at COMMIT or PREPARE TRANSACTION (and SET CONSTRAINTS ...
/// IMMEDIATE, for the constraints it names: `only`). The others stay queued.
pub(super) fn check_deferred_of(
    tx: &Transaction,
    deferred: &Deferred,
    only: Option<&dyn Fn(&ForeignKey) -> bool>,
) -> Result<()> {
    if deferred.queue.borrow().is_empty() {
        return Ok(());
    }
    let queue = std::mem::take(&mut *deferred.queue.borrow_mut());
    let keys: HashMap<u32, ForeignKey> = catalog::foreign_keys::all(tx)?
        .into_iter()
        .map(|f| (f.oid, f))
        .collect();
    let mut tables = Tables::default();
    for (oid, mut spool) in queue.by_key {
        // A constraint dropped since needs nothing.
        let Some(fk) = keys.get(&oid) else { continue };
        if only.is_some_and(|f| !f(fk)) {
            deferred.queue.borrow_mut().by_key.insert(oid, spool);
            continue;
        }
        let child = tables.get(tx, fk.table)?;
        let parent = tables.get(tx, fk.ref_table)?;
        let n = fk.columns.len();
        while let Some(event) = spool.pop()? {
            match event[0].as_int() {
                Some(CHECK) => check_referencing(tx, fk, &child, &parent, &event[1])?,
                _ => check_unreferenced(tx, fk, &child, &parent, &event[2..2 + n], false)?,
            }
        }
    }
    Ok(())
}

/// Every deferred check, at COMMIT or PREPARE TRANSACTION.
pub(super) fn check_deferred(tx: &Transaction, deferred: &Deferred) -> Result<()> {
    check_deferred_of(tx, deferred, None)
}

/// ADD FOREIGN KEY and VALIDATE CONSTRAINT: 23503 if a row of `child` has a key `parent`
/// lacks (no row is locked: the referenced table is locked against writers meanwhile).
pub(super) fn verify_existing(
    cx: &Cx,
    fk: &ForeignKey,
    child: &TableInfo,
    parent: &TableInfo,
) -> Result<()> {
    let tx = cx.tx;
    for r in tx.scan(child.def.oid)? {
        let (_, row) = r?;
        cx.interrupt.check()?;
        check_row_key(tx, fk, child, parent, &row, false)?;
    }
    Ok(())
}
