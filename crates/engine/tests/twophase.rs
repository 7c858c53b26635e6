//! Two-phase commit as a PostgreSQL user knows it (`PREPARE TRANSACTION`, `COMMIT PREPARED`,
//! `ROLLBACK PREPARED`, `pg_prepared_xacts`), through the embedded API:
//!
//! - the errors and their SQLSTATEs: disabled (55000), limit reached (53200), duplicate gid
//!   (42710), gid too long (22023), unknown gid (42704), failed transaction (25P02) — and a
//!   PREPARE that fails rolls its transaction back;
//! - a prepared transaction's changes are invisible until COMMIT PREPARED, discarded by
//!   ROLLBACK PREPARED; it is listed by gid, with its id and time;
//! - it keeps its row locks, table locks and the names of tables it creates until it is
//!   finished, from another session, also across a clean restart and a crash; a concurrent
//!   COMMIT PREPARED and ROLLBACK PREPARED of one gid finish it exactly once;
//! - seed 003's figure: COMMIT PREPARED opens no file and reads no WAL with
//!   `twophase_state = memory`, one open and one WAL read with `reread_wal`, and reads the
//!   state file once a checkpoint wrote one;
//! - recovery from the WAL, from a state file whose prepare record is before the redo point
//!   (its WAL segment recycled), and removal of a stale state file;
//! - TRUNCATE and DROP TABLE in a prepared transaction keep the old file until COMMIT
//!   PREPARED; ROLLBACK PREPARED removes the new file and brings the old rows back.
//!
//! Blocked statements run on their own thread; the test waits until the lock manager reports
//! the session waiting (bounded poll), never on a sleep.

mod common;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::{blocks_until, crash, create_accounts, exists, file_of, open_db as open, rel_of};
use quire_engine::config::TwophaseStateMode;
use quire_engine::types::Xid;
use quire_engine::vfs::{OpKind, SimVfs, Vfs};
use quire_engine::{
    Changed, Column, Config, Database, Error, IsolationLevel, IsolationLevel::*, LockMode, Result,
    TableId, Tid, Transaction, Type, Value,
};

fn config(max_prepared: usize) -> Config {
    Config {
        shared_buffers_bytes: 2 << 20,
        checkpoint_timeout_s: 3600,
        max_prepared_transactions: max_prepared,
        ..Config::default()
    }
}

/// Creates `accounts (id, balance)` holding (1, 100), (2, 200), (3, 300); returns the table
/// and the rows' addresses by id.
fn setup(db: &Database) -> (TableId, Vec<Tid>) {
    let tx = db.begin(ReadCommitted).unwrap();
    let (t, tids) = create_accounts(&tx, 3);
    tx.commit().unwrap();
    (t, tids)
}

fn pair(row: &[Value]) -> (i64, i64) {
    (row[0].as_int().unwrap(), row[1].as_int().unwrap())
}

/// What `tx` sees of the table, sorted by id.
fn rows_in(tx: &Transaction, t: TableId) -> Vec<(i64, i64)> {
    let mut rows: Vec<(i64, i64)> = tx.scan(t).unwrap().map(|r| pair(&r.unwrap().1)).collect();
    rows.sort_unstable();
    rows
}

/// What a new READ COMMITTED transaction sees of the table.
fn committed(db: &Database, t: TableId) -> Vec<(i64, i64)> {
    let tx = db.begin(ReadCommitted).unwrap();
    let rows = rows_in(&tx, t);
    tx.commit().unwrap();
    rows
}

fn state_file(xid: Xid) -> PathBuf {
    PathBuf::from(format!("/data/pg_twophase/{:016X}", xid.0))
}

fn gids(db: &Database) -> Vec<String> {
    db.prepared_transactions()
        .into_iter()
        .map(|p| p.gid)
        .collect()
}

/// Does a conflicting ACCESS EXCLUSIVE NOWAIT on `t` fail with 55P03 (someone holds a lock)?
fn table_is_locked(db: &Database, t: TableId) -> bool {
    let tx = db.begin(ReadCommitted).unwrap();
    match tx.lock_table(t, LockMode::AccessExclusive, true) {
        Ok(()) => {
            tx.rollback().unwrap();
            false
        }
        Err(e) => {
            assert_eq!(e.sqlstate(), "55P03", "{e}");
            tx.rollback().unwrap();
            true
        }
    }
}

fn add(tx: &Transaction, t: TableId, tid: Tid, delta: i64) -> Result<Changed> {
    tx.update_with(t, tid, |row| {
        let (id, v) = pair(row);
        Some(vec![Value::Int(id), Value::Int(v + delta)])
    })
}

fn opens(vfs: &SimVfs) -> u64 {
    vfs.counters().snapshot().get(OpKind::Open)
}

/// WAL records read back (from the WAL buffers, from segment files).
fn wal_reads(db: &Database) -> (u64, u64) {
    let s = db.wal().stats();
    (
        s.reads_from_buffers.load(Ordering::Relaxed),
        s.reads_from_files.load(Ordering::Relaxed),
    )
}

/// The two-phase counters: (state reads from WAL, state reads from files, files written).
fn twophase_reads(db: &Database) -> (u64, u64, u64) {
    let s = db.twophase_stats();
    (
        s.state_reads_from_wal.load(Ordering::Relaxed),
        s.state_reads_from_files.load(Ordering::Relaxed),
        s.state_files_written.load(Ordering::Relaxed),
    )
}

// ---------------------------------------------------------------------------- errors

#[test]
fn prepare_is_disabled_by_default_and_rolls_the_transaction_back() {
    let vfs = Arc::new(SimVfs::new(1));
    let db = open(&vfs, Config::default());
    assert_eq!(db.config().max_prepared_transactions, 0);
    let (t, _) = setup(&db);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(4), Value::Int(400)]).unwrap();
    let xid = tx.xid().unwrap();
    let err = tx.prepare("g1").unwrap_err();
    assert_eq!(err.sqlstate(), "55000", "{err}");
    assert!(
        err.to_string().contains("max_prepared_transactions"),
        "the error should say which setting enables PREPARE: {err}"
    );
    assert!(db.prepared_transactions().is_empty());
    assert!(!db.transactions().is_running(xid));
    assert!(!db.transactions().did_commit(xid).unwrap());
    assert_eq!(committed(&db, t), vec![(1, 100), (2, 200), (3, 300)]);
    assert!(
        !table_is_locked(&db, t),
        "the rolled-back transaction's lock"
    );
    db.close().unwrap();
}

#[test]
fn prepare_beyond_max_prepared_transactions_fails_53200_naming_the_setting() {
    let vfs = Arc::new(SimVfs::new(2));
    let db = open(&vfs, config(2));
    let (t, _) = setup(&db);
    for (gid, id) in [("g1", 10), ("g2", 11)] {
        let tx = db.begin(ReadCommitted).unwrap();
        tx.insert(t, &[Value::Int(id), Value::Int(0)]).unwrap();
        tx.prepare(gid).unwrap();
    }
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(12), Value::Int(0)]).unwrap();
    let err = tx.prepare("g3").unwrap_err();
    assert_eq!(err.sqlstate(), "53200", "{err}");
    match &err {
        Error::OutOfSharedMemory { what, hint } => {
            assert!(what.contains("prepared transactions"), "{what}");
            assert!(hint.contains("max_prepared_transactions"), "{hint}");
            assert!(
                hint.contains('2'),
                "the hint gives the current value: {hint}"
            );
        }
        other => panic!("expected OutOfSharedMemory, got {other:?}"),
    }
    assert_eq!(gids(&db), ["g1", "g2"]);
    // A finished one frees its slot.
    db.commit_prepared("g1").unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(13), Value::Int(0)]).unwrap();
    tx.prepare("g3").unwrap();
    assert_eq!(gids(&db), ["g2", "g3"]);
    db.rollback_prepared("g2").unwrap();
    db.commit_prepared("g3").unwrap();
    // 12 was rolled back by the failed PREPARE, 11 by ROLLBACK PREPARED.
    assert_eq!(
        committed(&db, t),
        vec![(1, 100), (2, 200), (3, 300), (10, 0), (13, 0)]
    );
    db.close().unwrap();
}

#[test]
fn a_duplicate_gid_fails_42710_and_the_first_transaction_stays_prepared() {
    let vfs = Arc::new(SimVfs::new(3));
    let db = open(&vfs, config(4));
    let (t, tids) = setup(&db);
    let t1 = db.begin(ReadCommitted).unwrap();
    add(&t1, t, tids[0], 1).unwrap();
    let xid1 = t1.xid().unwrap();
    t1.prepare("dup").unwrap();
    let t2 = db.begin(ReadCommitted).unwrap();
    add(&t2, t, tids[1], 2).unwrap();
    let xid2 = t2.xid().unwrap();
    let err = t2.prepare("dup").unwrap_err();
    assert_eq!(err.sqlstate(), "42710", "{err}");
    assert!(err.to_string().contains("\"dup\""), "{err}");
    // The second one is rolled back: not running, its row lock gone (no wait here).
    assert!(!db.transactions().is_running(xid2));
    let t3 = db.begin(ReadCommitted).unwrap();
    assert!(matches!(
        add(&t3, t, tids[1], 20).unwrap(),
        Changed::Done(..)
    ));
    t3.commit().unwrap();
    // The first one is still prepared, untouched.
    let listed = db.prepared_transactions();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].gid.as_str(), listed[0].xid), ("dup", xid1));
    assert!(db.transactions().is_running(xid1));
    db.commit_prepared("dup").unwrap();
    assert_eq!(committed(&db, t), vec![(1, 101), (2, 220), (3, 300)]);
    db.close().unwrap();
}

#[test]
fn a_gid_longer_than_200_bytes_fails_22023() {
    let vfs = Arc::new(SimVfs::new(4));
    let db = open(&vfs, config(4));
    let (t, _) = setup(&db);
    let long = "x".repeat(201);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(4), Value::Int(400)]).unwrap();
    let err = tx.prepare(&long).unwrap_err();
    assert_eq!(err.sqlstate(), "22023", "{err}");
    assert!(db.prepared_transactions().is_empty());
    assert_eq!(committed(&db, t), vec![(1, 100), (2, 200), (3, 300)]);
    // 200 bytes is the limit itself (PostgreSQL's GIDSIZE), counted in bytes, not chars.
    let at_limit = "y".repeat(200);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(5), Value::Int(500)]).unwrap();
    tx.prepare(&at_limit).unwrap();
    let multibyte = "é".repeat(101); // 202 bytes, 101 chars
    let tx = db.begin(ReadCommitted).unwrap();
    let err = tx.prepare(&multibyte).unwrap_err();
    assert_eq!(err.sqlstate(), "22023", "{err}");
    assert_eq!(gids(&db), std::slice::from_ref(&at_limit));
    db.commit_prepared(&at_limit).unwrap();
    assert_eq!(
        committed(&db, t),
        vec![(1, 100), (2, 200), (3, 300), (5, 500)]
    );
    db.close().unwrap();
}

#[test]
fn finishing_an_unknown_gid_fails_42704() {
    let vfs = Arc::new(SimVfs::new(5));
    let db = open(&vfs, config(4));
    let (t, _) = setup(&db);
    for err in [
        db.commit_prepared("nope").unwrap_err(),
        db.rollback_prepared("nope").unwrap_err(),
    ] {
        assert_eq!(err.sqlstate(), "42704", "{err}");
        assert!(err.to_string().contains("\"nope\""), "{err}");
    }
    // Finished once: the gid is unknown afterwards.
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(4), Value::Int(400)]).unwrap();
    tx.prepare("once").unwrap();
    db.commit_prepared("once").unwrap();
    assert_eq!(db.commit_prepared("once").unwrap_err().sqlstate(), "42704");
    assert_eq!(
        db.rollback_prepared("once").unwrap_err().sqlstate(),
        "42704"
    );
    assert_eq!(
        committed(&db, t),
        vec![(1, 100), (2, 200), (3, 300), (4, 400)]
    );
    db.close().unwrap();
}

#[test]
fn preparing_a_failed_transaction_fails_25p02_and_rolls_it_back() {
    let vfs = Arc::new(SimVfs::new(6));
    let db = open(&vfs, config(4));
    let (t, _) = setup(&db);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(4), Value::Int(400)]).unwrap();
    let err = tx.insert(t, &[Value::Int(5)]).unwrap_err();
    assert_eq!(err.sqlstate(), "42804", "{err}");
    let err = tx.prepare("failed").unwrap_err();
    assert_eq!(err.sqlstate(), "25P02", "{err}");
    assert!(db.prepared_transactions().is_empty());
    assert_eq!(committed(&db, t), vec![(1, 100), (2, 200), (3, 300)]);
    // The gid was not used up.
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(6), Value::Int(600)]).unwrap();
    tx.prepare("failed").unwrap();
    db.commit_prepared("failed").unwrap();
    assert_eq!(
        committed(&db, t),
        vec![(1, 100), (2, 200), (3, 300), (6, 600)]
    );
    db.close().unwrap();
}

// ---------------------------------------------------------------------------- visibility

#[test]
fn prepared_changes_are_invisible_until_commit_prepared() {
    let vfs = Arc::new(SimVfs::new(7));
    let db = open(&vfs, config(4));
    let (t, tids) = setup(&db);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(4), Value::Int(400)]).unwrap();
    add(&tx, t, tids[0], 5).unwrap();
    assert!(matches!(tx.delete(t, tids[1]).unwrap(), Changed::Done(..)));
    let xid = tx.xid().unwrap();
    tx.prepare("visible-later").unwrap();

    let before = vec![(1, 100), (2, 200), (3, 300)];
    let after = vec![(1, 105), (3, 300), (4, 400)];
    assert!(
        db.transactions().is_running(xid),
        "prepared = still running"
    );
    assert_eq!(committed(&db, t), before);
    // A snapshot taken while it is prepared keeps not seeing it after COMMIT PREPARED.
    let rr = db.begin(RepeatableRead).unwrap();
    assert_eq!(rows_in(&rr, t), before);
    let rc = db.begin(ReadCommitted).unwrap();
    assert_eq!(rows_in(&rc, t), before);

    db.commit_prepared("visible-later").unwrap();
    assert!(!db.transactions().is_running(xid));
    assert!(db.transactions().did_commit(xid).unwrap());
    assert_eq!(
        rows_in(&rc, t),
        after,
        "READ COMMITTED: a new snapshot per call"
    );
    assert_eq!(rows_in(&rr, t), before, "REPEATABLE READ: the old snapshot");
    rr.commit().unwrap();
    rc.commit().unwrap();
    assert_eq!(committed(&db, t), after);
    assert!(db.prepared_transactions().is_empty());
    db.close().unwrap();
}

#[test]
fn rollback_prepared_discards_the_changes_and_releases_the_locks() {
    let vfs = Arc::new(SimVfs::new(8));
    let db = open(&vfs, config(4));
    let (t, tids) = setup(&db);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(4), Value::Int(400)]).unwrap();
    add(&tx, t, tids[0], 5).unwrap();
    assert!(matches!(tx.delete(t, tids[1]).unwrap(), Changed::Done(..)));
    let xid = tx.xid().unwrap();
    tx.prepare("discard").unwrap();
    db.rollback_prepared("discard").unwrap();
    assert!(!db.transactions().is_running(xid));
    assert!(!db.transactions().did_commit(xid).unwrap());
    assert!(db.prepared_transactions().is_empty());
    assert_eq!(committed(&db, t), vec![(1, 100), (2, 200), (3, 300)]);
    // Its row locks are gone: the rows it changed can be changed at once.
    let tx = db.begin(RepeatableRead).unwrap();
    assert!(matches!(
        add(&tx, t, tids[0], 1).unwrap(),
        Changed::Done(..)
    ));
    assert!(matches!(tx.delete(t, tids[1]).unwrap(), Changed::Done(..)));
    tx.commit().unwrap();
    assert!(!table_is_locked(&db, t));
    assert_eq!(committed(&db, t), vec![(1, 101), (3, 300)]);
    db.close().unwrap();
}

#[test]
fn prepared_transactions_are_listed_by_gid_with_xid_and_time_until_finished() {
    let vfs = Arc::new(SimVfs::new(9));
    let db = open(&vfs, config(8));
    let (t, _) = setup(&db);
    let started = now_micros();
    let mut xids = Vec::new();
    for (id, gid) in (10..).zip(["b", "a", "c"]) {
        let tx = db.begin(ReadCommitted).unwrap();
        tx.insert(t, &[Value::Int(id), Value::Int(0)]).unwrap();
        xids.push((gid.to_string(), tx.xid().unwrap()));
        tx.prepare(gid).unwrap();
    }
    // A read-only transaction can be prepared too (it gets an id for it).
    let ro = db.begin(ReadCommitted).unwrap();
    assert_eq!(rows_in(&ro, t).len(), 3);
    assert_eq!(ro.xid(), None);
    ro.prepare("d-read-only").unwrap();
    let ended = now_micros();
    xids.sort();
    let listed = db.prepared_transactions();
    assert_eq!(
        listed.iter().map(|p| p.gid.as_str()).collect::<Vec<_>>(),
        ["a", "b", "c", "d-read-only"]
    );
    for (p, (gid, xid)) in listed.iter().zip(&xids) {
        assert_eq!((&p.gid, p.xid), (gid, *xid));
    }
    let mut seen_xids: Vec<Xid> = listed.iter().map(|p| p.xid).collect();
    seen_xids.sort_unstable();
    seen_xids.dedup();
    assert_eq!(seen_xids.len(), 4, "distinct ids: {listed:?}");
    for p in &listed {
        assert!(
            (started..=ended).contains(&p.prepared_at_micros),
            "{p:?} not prepared between {started} and {ended}"
        );
    }
    db.commit_prepared("b").unwrap();
    db.rollback_prepared("a").unwrap();
    db.commit_prepared("d-read-only").unwrap();
    assert_eq!(gids(&db), ["c"]);
    db.commit_prepared("c").unwrap();
    assert!(db.prepared_transactions().is_empty());
    assert_eq!(
        committed(&db, t),
        vec![(1, 100), (2, 200), (3, 300), (10, 0), (12, 0)]
    );
    db.close().unwrap();
}

fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

// ---------------------------------------------------------------------------- locks

/// T1 adds 5 to row 1 and prepares; T2 (at `level`) adds 1 to row 1 and must wait until
/// COMMIT PREPARED, issued on another thread than T2's.
fn row_lock_kept_by_prepared(
    level: IsolationLevel,
) -> (Database, TableId, Transaction, Result<Changed>) {
    let vfs = Arc::new(SimVfs::new(10));
    let db = open(&vfs, config(4));
    let (t, tids) = setup(&db);
    let t1 = db.begin(ReadCommitted).unwrap();
    add(&t1, t, tids[0], 5).unwrap();
    t1.prepare("holder").unwrap();
    let t2 = db.begin(level).unwrap();
    // T2's snapshot is taken before COMMIT PREPARED.
    assert_eq!(rows_in(&t2, t), vec![(1, 100), (2, 200), (3, 300)]);
    let (t2, r) = blocks_until(
        &db,
        t2,
        |t2| add(t2, t, tids[0], 1),
        || db.commit_prepared("holder").unwrap(),
    );
    (db, t, t2, r)
}

#[test]
fn a_prepared_transaction_keeps_its_row_locks_read_committed_then_updates_the_new_version() {
    let (db, t, t2, r) = row_lock_kept_by_prepared(ReadCommitted);
    match r.unwrap() {
        Changed::Done(_, row) => assert_eq!(pair(&row), (1, 106)),
        Changed::Skipped => panic!("the row was skipped"),
    }
    t2.commit().unwrap();
    assert_eq!(committed(&db, t), vec![(1, 106), (2, 200), (3, 300)]);
    db.close().unwrap();
}

#[test]
fn a_prepared_transaction_keeps_its_row_locks_repeatable_read_then_fails_40001() {
    let (db, t, t2, r) = row_lock_kept_by_prepared(RepeatableRead);
    let err = r.unwrap_err();
    assert_eq!(err.sqlstate(), "40001", "{err}");
    assert_eq!(t2.commit().unwrap_err().sqlstate(), "25P02");
    assert_eq!(committed(&db, t), vec![(1, 105), (2, 200), (3, 300)]);
    db.close().unwrap();
}

#[test]
fn a_prepared_transaction_keeps_its_table_locks() {
    let vfs = Arc::new(SimVfs::new(11));
    let db = open(&vfs, config(4));
    let (t, _) = setup(&db);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(4), Value::Int(400)]).unwrap();
    tx.prepare("table-lock").unwrap();
    // ROW EXCLUSIVE held: ACCESS EXCLUSIVE NOWAIT fails, SHARE NOWAIT too; readers pass.
    assert!(table_is_locked(&db, t));
    let other = db.begin(ReadCommitted).unwrap();
    let err = other.lock_table(t, LockMode::Share, true).unwrap_err();
    assert_eq!(err.sqlstate(), "55P03", "{err}");
    other.rollback().unwrap();
    assert_eq!(committed(&db, t), vec![(1, 100), (2, 200), (3, 300)]);
    // A waiting ACCESS EXCLUSIVE gets it at COMMIT PREPARED.
    let waiter = db.begin(ReadCommitted).unwrap();
    let (waiter, r) = blocks_until(
        &db,
        waiter,
        |w| w.lock_table(t, LockMode::AccessExclusive, false),
        || db.commit_prepared("table-lock").unwrap(),
    );
    r.unwrap();
    assert_eq!(rows_in(&waiter, t).len(), 4);
    waiter.commit().unwrap();
    assert!(!table_is_locked(&db, t));
    db.close().unwrap();
}

// ---------------------------------------------------------------------------- seed 003

/// Runs `n` rounds of "update row 1, PREPARE, COMMIT PREPARED" and returns what the COMMIT
/// PREPAREDs did: (files opened, WAL reads from buffers, from files, state reads from WAL,
/// from files).
fn commit_prepared_cost(
    db: &Database,
    vfs: &SimVfs,
    t: TableId,
    tid: &mut Tid,
    n: usize,
    checkpoint_between: bool,
) -> [u64; 5] {
    let mut cost = [0u64; 5];
    for i in 0..n {
        let tx = db.begin(ReadCommitted).unwrap();
        match add(&tx, t, *tid, 1).unwrap() {
            Changed::Done(new, _) => *tid = new,
            Changed::Skipped => panic!("row skipped"),
        }
        let xid = tx.xid().unwrap();
        let gid = format!("prep_{i}");
        tx.prepare(&gid).unwrap();
        if checkpoint_between {
            db.checkpointer().checkpoint().unwrap();
            assert!(
                exists(vfs, &state_file(xid)),
                "checkpoint wrote no state file"
            );
        }
        let o = opens(vfs);
        let (wb, wf) = wal_reads(db);
        let (sw, sf, _) = twophase_reads(db);
        db.commit_prepared(&gid).unwrap();
        let (wb2, wf2) = wal_reads(db);
        let (sw2, sf2, _) = twophase_reads(db);
        let d = [opens(vfs) - o, wb2 - wb, wf2 - wf, sw2 - sw, sf2 - sf];
        for (c, d) in cost.iter_mut().zip(d) {
            *c += d;
        }
        assert!(!exists(vfs, &state_file(xid)), "state file left behind");
    }
    cost
}

#[test]
fn seed_003_commit_prepared_opens_no_file_and_reads_no_wal_in_memory_mode() {
    let vfs = Arc::new(SimVfs::new(12));
    let db = open(&vfs, config(4));
    assert_eq!(db.config().twophase_state, TwophaseStateMode::Memory);
    let (t, tids) = setup(&db);
    let mut tid = tids[0];
    let n = 20;
    let cost = commit_prepared_cost(&db, &vfs, t, &mut tid, n, false);
    assert_eq!(
        cost, [0; 5],
        "memory: [opens, wal buffer reads, wal file reads, state reads from wal, from files]"
    );

    db.set_twophase_state(TwophaseStateMode::RereadWal);
    let cost = commit_prepared_cost(&db, &vfs, t, &mut tid, n, false);
    let n = n as u64;
    assert_eq!(
        cost,
        [n, 0, n, n, 0],
        "reread_wal: one open and one WAL read (from the file) per COMMIT PREPARED"
    );
    assert_eq!(committed(&db, t), vec![(1, 140), (2, 200), (3, 300)]);
    db.close().unwrap();
}

#[test]
fn seed_003_reread_wal_from_the_start_opens_one_file_per_commit_prepared() {
    let vfs = Arc::new(SimVfs::new(13));
    let db = open(
        &vfs,
        Config {
            twophase_state: TwophaseStateMode::RereadWal,
            ..config(4)
        },
    );
    let (t, tids) = setup(&db);
    let mut tid = tids[0];
    let cost = commit_prepared_cost(&db, &vfs, t, &mut tid, 10, false);
    assert_eq!(cost, [10, 0, 10, 10, 0]);
    // Switched back: nothing read again.
    db.set_twophase_state(TwophaseStateMode::Memory);
    let cost = commit_prepared_cost(&db, &vfs, t, &mut tid, 10, false);
    assert_eq!(cost, [0; 5]);
    db.close().unwrap();
}

#[test]
fn seed_003_after_a_checkpoint_the_state_file_replaces_the_wal() {
    let vfs = Arc::new(SimVfs::new(14));
    let db = open(&vfs, config(4));
    let (t, tids) = setup(&db);
    let mut tid = tids[0];
    let (_, _, written) = twophase_reads(&db);
    // memory: the state file is written (the WAL may be recycled) but never read.
    let cost = commit_prepared_cost(&db, &vfs, t, &mut tid, 5, true);
    assert_eq!(cost, [0; 5], "memory mode after a checkpoint");
    assert_eq!(
        twophase_reads(&db).2 - written,
        5,
        "one state file per checkpoint"
    );
    // reread_wal: the state file is read (one open), not the WAL.
    db.set_twophase_state(TwophaseStateMode::RereadWal);
    let cost = commit_prepared_cost(&db, &vfs, t, &mut tid, 5, true);
    assert_eq!(cost, [5, 0, 0, 0, 5], "reread_wal mode after a checkpoint");
    assert_eq!(twophase_reads(&db).2 - written, 10);
    assert_eq!(committed(&db, t), vec![(1, 110), (2, 200), (3, 300)]);
    db.close().unwrap();
}

// ---------------------------------------------------------------------------- restarts

#[test]
fn a_prepared_transaction_survives_a_clean_restart_with_its_locks() {
    let vfs = Arc::new(SimVfs::new(15));
    let db = open(&vfs, config(4));
    let (t, tids) = setup(&db);
    let tx = db.begin(ReadCommitted).unwrap();
    add(&tx, t, tids[0], 5).unwrap();
    tx.insert(t, &[Value::Int(4), Value::Int(400)]).unwrap();
    tx.prepare("across-restart").unwrap();
    let listed = db.prepared_transactions();
    // Prepared transactions do not keep a clean shutdown from happening.
    db.close().unwrap();

    let db = open(&vfs, config(4));
    assert_eq!(
        db.recovery_stats().records,
        0,
        "a clean stop replays nothing"
    );
    assert_eq!(db.prepared_transactions(), listed, "same gid, xid and time");
    let xid = listed[0].xid;
    assert!(db.transactions().is_running(xid));
    assert!(
        exists(&vfs, &state_file(xid)),
        "the shutdown checkpoint wrote it"
    );
    assert_eq!(committed(&db, t), vec![(1, 100), (2, 200), (3, 300)]);
    assert!(table_is_locked(&db, t), "its table lock came back");
    // Its row lock came back: an update of row 1 waits for COMMIT PREPARED.
    let t2 = db.begin(ReadCommitted).unwrap();
    let (t2, r) = blocks_until(
        &db,
        t2,
        |t2| add(t2, t, tids[0], 1),
        || db.commit_prepared("across-restart").unwrap(),
    );
    assert!(matches!(r.unwrap(), Changed::Done(..)));
    t2.commit().unwrap();
    assert!(!exists(&vfs, &state_file(xid)));
    assert_eq!(
        committed(&db, t),
        vec![(1, 106), (2, 200), (3, 300), (4, 400)]
    );
    db.close().unwrap();
    let db = open(&vfs, config(4));
    assert!(db.prepared_transactions().is_empty());
    assert_eq!(
        committed(&db, t),
        vec![(1, 106), (2, 200), (3, 300), (4, 400)]
    );
    db.close().unwrap();
}

#[test]
fn a_prepared_transaction_survives_a_crash_and_can_be_rolled_back() {
    let vfs = Arc::new(SimVfs::new(16));
    let db = open(&vfs, config(4));
    let (t, tids) = setup(&db);
    let tx = db.begin(ReadCommitted).unwrap();
    add(&tx, t, tids[0], 5).unwrap();
    assert!(matches!(tx.delete(t, tids[2]).unwrap(), Changed::Done(..)));
    tx.insert(t, &[Value::Int(4), Value::Int(400)]).unwrap();
    let xid = tx.xid().unwrap();
    tx.prepare("crash").unwrap();
    // Its pages reach the disk (their tuples carry its id) before the crash.
    db.buffer_pool().flush_all().unwrap();
    crash(db, &vfs);

    let db = open(&vfs, config(4));
    assert!(db.recovery_stats().records > 0);
    let listed = db.prepared_transactions();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].gid.as_str(), listed[0].xid), ("crash", xid));
    assert!(db.transactions().is_running(xid));
    assert!(table_is_locked(&db, t));
    assert_eq!(committed(&db, t), vec![(1, 100), (2, 200), (3, 300)]);
    let next = db.begin(ReadCommitted).unwrap();
    next.insert(t, &[Value::Int(9), Value::Int(900)]).unwrap();
    assert!(next.xid().unwrap() > xid, "an id handed out twice");
    next.commit().unwrap();

    // Its row lock came back: an update of row 1 waits for ROLLBACK PREPARED.
    let waiter = db.begin(ReadCommitted).unwrap();
    let (waiter, r) = blocks_until(
        &db,
        waiter,
        |w| add(w, t, tids[0], 0),
        || db.rollback_prepared("crash").unwrap(),
    );
    assert!(matches!(r.unwrap(), Changed::Done(..)));
    waiter.rollback().unwrap();
    assert!(db.prepared_transactions().is_empty());
    assert!(!table_is_locked(&db, t));
    let expected = vec![(1, 100), (2, 200), (3, 300), (9, 900)];
    assert_eq!(committed(&db, t), expected);
    // The rows it had changed can be changed without waiting.
    let tx = db.begin(RepeatableRead).unwrap();
    assert!(matches!(
        add(&tx, t, tids[0], 0).unwrap(),
        Changed::Done(..)
    ));
    tx.rollback().unwrap();
    // ROLLBACK PREPARED is durable at once.
    crash(db, &vfs);
    let db = open(&vfs, config(4));
    assert!(db.prepared_transactions().is_empty());
    assert!(!db.transactions().did_commit(xid).unwrap());
    assert_eq!(committed(&db, t), expected);
    db.close().unwrap();
}

/// Small WAL segments, so that a few thousand rows fill several and checkpoints recycle them.
fn small_wal_config() -> Config {
    Config {
        wal_segment_size_bytes: 64 * 1024,
        ..config(4)
    }
}

#[test]
fn a_prepare_record_before_the_redo_point_is_recovered_from_its_state_file() {
    let vfs = Arc::new(SimVfs::new(17));
    let db = open(&vfs, small_wal_config());
    let (t, _) = setup(&db);
    let old_rel = rel_of(&db, t);
    // The prepared transaction truncates the table: COMMIT PREPARED after the crash must
    // still drop the old file, which only the state file can say.
    let tx = db.begin(ReadCommitted).unwrap();
    tx.truncate(t).unwrap();
    tx.insert(t, &[Value::Int(7), Value::Int(700)]).unwrap();
    let new_rel = tx.table_def(t).unwrap().rel;
    let xid = tx.xid().unwrap();
    tx.prepare("old-prepare").unwrap();
    db.checkpointer().checkpoint().unwrap();
    assert!(exists(&vfs, &state_file(xid)));
    // Much more WAL, and checkpoints that recycle the segment holding the prepare record.
    let other = {
        let tx = db.begin(ReadCommitted).unwrap();
        let o = tx
            .create_table("other", &[Column::new("pad", Type::Text)])
            .unwrap();
        tx.commit().unwrap();
        o
    };
    for round in 0..4 {
        let tx = db.begin(ReadCommitted).unwrap();
        for i in 0..200 {
            tx.insert(
                other,
                &[Value::Text(format!("{round}-{i}-{}", "p".repeat(200)))],
            )
            .unwrap();
        }
        tx.commit().unwrap();
        db.checkpointer().checkpoint().unwrap();
    }
    assert!(
        db.checkpointer()
            .stats()
            .wal_segments_removed
            .load(Ordering::Relaxed)
            > 0,
        "no WAL segment was recycled: the test does not test what it says"
    );
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(other, &[Value::Text("after the last checkpoint".into())])
        .unwrap();
    tx.commit().unwrap();
    crash(db, &vfs);

    let db = open(&vfs, small_wal_config());
    let listed = db.prepared_transactions();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].gid.as_str(), listed[0].xid),
        ("old-prepare", xid)
    );
    assert!(
        table_is_locked(&db, t),
        "ACCESS EXCLUSIVE of the TRUNCATE is back"
    );
    assert!(exists(&vfs, &file_of(&db, old_rel)));
    assert!(exists(&vfs, &file_of(&db, new_rel)));
    db.commit_prepared("old-prepare").unwrap();
    assert!(!exists(&vfs, &state_file(xid)), "state file removed");
    assert!(!exists(&vfs, &file_of(&db, old_rel)), "old file dropped");
    assert_eq!(rel_of(&db, t), new_rel);
    assert_eq!(committed(&db, t), vec![(7, 700)]);
    // And the outcome survives another crash.
    crash(db, &vfs);
    let db = open(&vfs, small_wal_config());
    assert!(db.prepared_transactions().is_empty());
    assert!(!exists(&vfs, &state_file(xid)));
    assert!(!exists(&vfs, &file_of(&db, old_rel)));
    assert_eq!(committed(&db, t), vec![(7, 700)]);
    db.close().unwrap();
}

#[test]
fn a_stale_state_file_is_removed_at_startup() {
    let vfs = Arc::new(SimVfs::new(18));
    let db = open(&vfs, config(4));
    let (t, _) = setup(&db);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(4), Value::Int(400)]).unwrap();
    let xid = tx.xid().unwrap();
    tx.prepare("stale").unwrap();
    db.checkpointer().checkpoint().unwrap();
    assert!(vfs.durable_contents(&state_file(xid)).is_some());
    db.commit_prepared("stale").unwrap();
    // The file's removal is not durable (PostgreSQL does not fsync the directory either):
    // after a crash it comes back. With the commit record before the redo point, only the
    // commit log can tell that it is stale.
    assert!(!exists(&vfs, &state_file(xid)));
    db.checkpointer().checkpoint().unwrap();
    assert!(
        vfs.durable_contents(&state_file(xid)).is_some(),
        "the removal became durable: the test does not test what it says"
    );
    crash(db, &vfs);
    assert!(exists(&vfs, &state_file(xid)), "the stale file is back");

    let db = open(&vfs, config(4));
    assert!(db.prepared_transactions().is_empty());
    assert!(!exists(&vfs, &state_file(xid)), "stale state file removed");
    assert!(db.transactions().did_commit(xid).unwrap());
    assert!(!table_is_locked(&db, t));
    assert_eq!(
        committed(&db, t),
        vec![(1, 100), (2, 200), (3, 300), (4, 400)]
    );
    db.close().unwrap();
}

// ---------------------------------------------------------------------------- DDL

#[test]
fn truncate_in_a_prepared_transaction_drops_the_old_file_at_commit_prepared() {
    let vfs = Arc::new(SimVfs::new(19));
    let db = open(&vfs, config(4));
    let (t, _) = setup(&db);
    let old_rel = rel_of(&db, t);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.truncate(t).unwrap();
    tx.insert(t, &[Value::Int(7), Value::Int(700)]).unwrap();
    let new_rel = tx.table_def(t).unwrap().rel;
    assert_ne!(new_rel, old_rel);
    tx.prepare("truncate").unwrap();
    assert!(
        exists(&vfs, &file_of(&db, old_rel)),
        "old file kept while prepared"
    );
    assert!(exists(&vfs, &file_of(&db, new_rel)));
    assert!(db.buffer_pool().cached_buffers_of(old_rel) > 0);
    // ACCESS EXCLUSIVE is kept: a reader waits for COMMIT PREPARED, then sees the new file.
    let reader = db.begin(ReadCommitted).unwrap();
    let (reader, rows) = blocks_until(
        &db,
        reader,
        |r| {
            r.scan(t)
                .map(|s| s.map(|x| pair(&x.unwrap().1)).collect::<Vec<_>>())
        },
        || db.commit_prepared("truncate").unwrap(),
    );
    assert_eq!(rows.unwrap(), vec![(7, 700)]);
    reader.commit().unwrap();
    assert!(!exists(&vfs, &file_of(&db, old_rel)), "old file dropped");
    assert_eq!(db.buffer_pool().cached_buffers_of(old_rel), 0);
    assert!(exists(&vfs, &file_of(&db, new_rel)));
    assert_eq!(rel_of(&db, t), new_rel);
    db.close().unwrap();
}

#[test]
fn truncate_in_a_prepared_transaction_rolled_back_brings_the_old_rows_back() {
    let vfs = Arc::new(SimVfs::new(20));
    let db = open(&vfs, config(4));
    let (t, _) = setup(&db);
    let old_rel = rel_of(&db, t);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.truncate(t).unwrap();
    tx.insert(t, &[Value::Int(7), Value::Int(700)]).unwrap();
    let new_rel = tx.table_def(t).unwrap().rel;
    tx.prepare("truncate").unwrap();
    db.rollback_prepared("truncate").unwrap();
    assert!(!exists(&vfs, &file_of(&db, new_rel)), "new file dropped");
    assert_eq!(db.buffer_pool().cached_buffers_of(new_rel), 0);
    assert!(exists(&vfs, &file_of(&db, old_rel)));
    assert_eq!(rel_of(&db, t), old_rel);
    assert_eq!(committed(&db, t), vec![(1, 100), (2, 200), (3, 300)]);
    db.close().unwrap();
}

#[test]
fn drop_table_in_a_prepared_transaction_keeps_the_file_until_commit_prepared() {
    let vfs = Arc::new(SimVfs::new(21));
    let db = open(&vfs, config(4));
    let (t, _) = setup(&db);
    let rel = rel_of(&db, t);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.drop_table(t).unwrap();
    tx.prepare("drop").unwrap();
    assert!(exists(&vfs, &file_of(&db, rel)));
    // The table is still there for others (the drop is not committed), but locked.
    let probe = db.begin(ReadCommitted).unwrap();
    assert_eq!(probe.table("accounts").unwrap(), t);
    probe.rollback().unwrap();
    assert!(table_is_locked(&db, t));
    // A reader waiting for its lock finds it gone after COMMIT PREPARED.
    let reader = db.begin(ReadCommitted).unwrap();
    let (reader, r) = blocks_until(
        &db,
        reader,
        |r| r.scan(t).map(|_| ()),
        || db.commit_prepared("drop").unwrap(),
    );
    assert_eq!(r.unwrap_err().sqlstate(), "42P01");
    reader.rollback().unwrap();
    assert!(!exists(&vfs, &file_of(&db, rel)), "file dropped");
    assert_eq!(db.buffer_pool().cached_buffers_of(rel), 0);
    let probe = db.begin(ReadCommitted).unwrap();
    assert_eq!(probe.table("accounts").unwrap_err().sqlstate(), "42P01");
    probe.rollback().unwrap();
    db.close().unwrap();
}

#[test]
fn drop_table_in_a_prepared_transaction_rolled_back_keeps_the_table() {
    let vfs = Arc::new(SimVfs::new(22));
    let db = open(&vfs, config(4));
    let (t, _) = setup(&db);
    let rel = rel_of(&db, t);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.drop_table(t).unwrap();
    tx.prepare("drop").unwrap();
    db.rollback_prepared("drop").unwrap();
    assert!(exists(&vfs, &file_of(&db, rel)));
    assert_eq!(committed(&db, t), vec![(1, 100), (2, 200), (3, 300)]);
    // The name is free of locks: CREATE of the same name fails as a duplicate, at once.
    let tx = db.begin(ReadCommitted).unwrap();
    let err = tx
        .create_table("accounts", &[Column::new("id", Type::Int)])
        .unwrap_err();
    assert_eq!(err.sqlstate(), "42P07", "{err}");
    tx.rollback().unwrap();
    db.close().unwrap();
}

#[test]
fn create_table_in_a_prepared_transaction_keeps_the_name_locked() {
    let vfs = Arc::new(SimVfs::new(23));
    let db = open(&vfs, config(4));
    let tx = db.begin(ReadCommitted).unwrap();
    let t = tx
        .create_table("pending", &[Column::new("id", Type::Int)])
        .unwrap();
    tx.insert(t, &[Value::Int(1)]).unwrap();
    let rel = tx.table_def(t).unwrap().rel;
    tx.prepare("create").unwrap();
    // Across a restart too: the name's lock is one of the locks a prepared one keeps.
    db.close().unwrap();
    let db = open(&vfs, config(4));
    let probe = db.begin(ReadCommitted).unwrap();
    assert_eq!(probe.table("pending").unwrap_err().sqlstate(), "42P01");
    probe.rollback().unwrap();
    // A CREATE of the same name waits; after ROLLBACK PREPARED it succeeds.
    let other = db.begin(ReadCommitted).unwrap();
    let (other, r) = blocks_until(
        &db,
        other,
        |o| o.create_table("pending", &[Column::new("id", Type::Int)]),
        || db.rollback_prepared("create").unwrap(),
    );
    let t2 = r.unwrap();
    assert_ne!(t2, t);
    other.commit().unwrap();
    assert!(
        !exists(&vfs, &file_of(&db, rel)),
        "file of the rolled-back CREATE"
    );
    let probe = db.begin(ReadCommitted).unwrap();
    assert_eq!(probe.table("pending").unwrap(), t2);
    assert!(rows_in_one(&probe, t2).is_empty());
    probe.commit().unwrap();
    db.close().unwrap();
}

fn rows_in_one(tx: &Transaction, t: TableId) -> Vec<i64> {
    tx.scan(t)
        .unwrap()
        .map(|r| r.unwrap().1[0].as_int().unwrap())
        .collect()
}

#[test]
fn drop_table_prepared_before_a_crash_is_committed_after_it() {
    let vfs = Arc::new(SimVfs::new(24));
    let db = open(&vfs, config(4));
    let (t, _) = setup(&db);
    let rel = rel_of(&db, t);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.drop_table(t).unwrap();
    tx.prepare("drop").unwrap();
    crash(db, &vfs);
    let db = open(&vfs, config(4));
    assert_eq!(gids(&db), ["drop"]);
    assert!(exists(&vfs, &file_of(&db, rel)));
    assert!(table_is_locked(&db, t));
    db.commit_prepared("drop").unwrap();
    assert!(!exists(&vfs, &file_of(&db, rel)));
    let probe = db.begin(ReadCommitted).unwrap();
    assert_eq!(probe.table("accounts").unwrap_err().sqlstate(), "42P01");
    probe.rollback().unwrap();
    crash(db, &vfs);
    let db = open(&vfs, config(4));
    assert!(!exists(&vfs, &file_of(&db, rel)));
    assert!(db.prepared_transactions().is_empty());
    db.close().unwrap();
}

#[test]
fn reread_wal_recovers_a_prepared_truncate_after_a_crash() {
    let reread = || Config {
        twophase_state: TwophaseStateMode::RereadWal,
        ..config(4)
    };
    let vfs = Arc::new(SimVfs::new(25));
    let db = open(&vfs, reread());
    let (t, _) = setup(&db);
    let old_rel = rel_of(&db, t);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.truncate(t).unwrap();
    tx.insert(t, &[Value::Int(8), Value::Int(800)]).unwrap();
    let new_rel = tx.table_def(t).unwrap().rel;
    let xid = tx.xid().unwrap();
    tx.prepare("rr").unwrap();
    crash(db, &vfs);
    let db = open(&vfs, reread());
    // The end-of-recovery checkpoint wrote its state file (read from the WAL for it).
    assert!(exists(&vfs, &state_file(xid)));
    let (from_wal, from_files, _) = twophase_reads(&db);
    let wal = wal_reads(&db);
    db.commit_prepared("rr").unwrap();
    let (from_wal2, from_files2, _) = twophase_reads(&db);
    assert_eq!(
        (from_wal2 - from_wal, from_files2 - from_files),
        (0, 1),
        "read from its state file"
    );
    assert_eq!(wal_reads(&db), wal, "no WAL read");
    assert!(!exists(&vfs, &state_file(xid)));
    assert!(!exists(&vfs, &file_of(&db, old_rel)));
    assert_eq!(rel_of(&db, t), new_rel);
    assert_eq!(committed(&db, t), vec![(8, 800)]);
    db.close().unwrap();
}

#[test]
fn concurrent_commit_and_rollback_prepared_of_one_gid_finish_it_once() {
    let vfs = Arc::new(SimVfs::new(26));
    let db = open(&vfs, config(4));
    let (t, tids) = setup(&db);
    let mut tid = tids[0];
    let mut balance = 100;
    for round in 0..30 {
        let tx = db.begin(ReadCommitted).unwrap();
        match add(&tx, t, tid, 1).unwrap() {
            Changed::Done(new, _) => tid = new,
            Changed::Skipped => panic!("row skipped"),
        }
        let xid = tx.xid().unwrap();
        let gid = format!("race-{round}");
        tx.prepare(&gid).unwrap();
        let barrier = std::sync::Barrier::new(2);
        let (a, b) = std::thread::scope(|s| {
            let commit = s.spawn(|| {
                barrier.wait();
                db.commit_prepared(&gid)
            });
            let rollback = s.spawn(|| {
                barrier.wait();
                db.rollback_prepared(&gid)
            });
            (commit.join().unwrap(), rollback.join().unwrap())
        });
        let loser = match (&a, &b) {
            (Ok(()), Err(e)) | (Err(e), Ok(())) => e.sqlstate(),
            _ => panic!("round {round}: exactly one must finish it: {a:?} {b:?}"),
        };
        assert!(
            loser == "55000" || loser == "42704",
            "round {round}: the loser got {loser}"
        );
        assert!(db.prepared_transactions().is_empty());
        assert!(!db.transactions().is_running(xid));
        if a.is_ok() {
            assert!(db.transactions().did_commit(xid).unwrap());
            balance += 1;
        } else {
            assert!(!db.transactions().did_commit(xid).unwrap());
            // The update was rolled back: the row is at its old address.
            let tx = db.begin(ReadCommitted).unwrap();
            tid = tx
                .scan(t)
                .unwrap()
                .map(Result::unwrap)
                .find(|(_, row)| pair(row).0 == 1)
                .unwrap()
                .0;
            tx.commit().unwrap();
        }
        assert_eq!(committed(&db, t)[0], (1, balance), "round {round}");
    }
    db.close().unwrap();
}

#[test]
fn a_row_lock_waiter_proceeds_on_the_old_version_after_rollback_prepared() {
    let vfs = Arc::new(SimVfs::new(27));
    let db = open(&vfs, config(4));
    let (t, tids) = setup(&db);
    let t1 = db.begin(ReadCommitted).unwrap();
    add(&t1, t, tids[0], 5).unwrap();
    t1.prepare("undone").unwrap();
    // Even REPEATABLE READ goes on: the row did not change after all.
    let t2 = db.begin(RepeatableRead).unwrap();
    assert_eq!(rows_in(&t2, t)[0], (1, 100));
    let (t2, r) = blocks_until(
        &db,
        t2,
        |t2| add(t2, t, tids[0], 1),
        || db.rollback_prepared("undone").unwrap(),
    );
    match r.unwrap() {
        Changed::Done(_, row) => assert_eq!(pair(&row), (1, 101)),
        Changed::Skipped => panic!("skipped"),
    }
    t2.commit().unwrap();
    assert_eq!(committed(&db, t), vec![(1, 101), (2, 200), (3, 300)]);
    db.close().unwrap();
}
