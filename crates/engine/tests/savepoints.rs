//! Subtransactions (SAVEPOINT, ROLLBACK TO SAVEPOINT, RELEASE SAVEPOINT) through the
//! embedded API, as a PostgreSQL user knows them:
//!
//! - what a level wrote is undone by ROLLBACK TO, kept by RELEASE, nested to any depth, the
//!   innermost of repeated names meant, an unknown name 3B001;
//! - an error fails the transaction (25P02) until ROLLBACK TO makes it usable again;
//! - other sessions see nothing of a running transaction's subtransactions, everything of
//!   a committed one's released ones and nothing of its rolled-back ones;
//! - row locks and deletions of a rolled-back level no longer block, and a session waiting
//!   for them goes on at the ROLLBACK TO; table locks taken in a level are released by
//!   ROLLBACK TO and kept by RELEASE;
//! - a unique index sees the transaction's own live subtransactions' keys, not the
//!   rolled-back ones;
//! - across a crash: committed subtransactions stay, rolled-back ones and those of an
//!   unfinished transaction are gone; a prepared transaction with subtransactions commits
//!   or rolls back all of them after a crash.

mod common;

use common::{blocks_until, committed, committing, crash, create_pairs, new_db, open_db, rows_in};
use quire_engine::{Changed, IsolationLevel::*, LockMode, Value};

fn config() -> quire_engine::Config {
    quire_engine::Config {
        max_prepared_transactions: 4,
        ..common::config()
    }
}

fn put(tx: &quire_engine::Transaction, t: quire_engine::TableId, id: i64) {
    tx.insert(t, &[Value::Int(id), Value::Int(id * 10)])
        .unwrap();
}

fn ids(rows: Vec<(i64, i64)>) -> Vec<i64> {
    rows.into_iter().map(|(id, _)| id).collect()
}

#[test]
fn rollback_to_undoes_the_level_and_release_keeps_it() {
    let (_vfs, db) = new_db(1, config());
    let (t, _) = committing(&db, |tx| create_pairs(tx, "t", "v", []));
    let tx = db.begin(ReadCommitted).unwrap();
    put(&tx, t, 1);
    tx.savepoint("a").unwrap();
    put(&tx, t, 2);
    tx.savepoint("b").unwrap();
    put(&tx, t, 3);
    tx.release_savepoint("b").unwrap();
    tx.savepoint("c").unwrap();
    put(&tx, t, 4);
    assert_eq!(ids(rows_in(&tx, t)), [1, 2, 3, 4]);
    tx.rollback_to_savepoint("c").unwrap();
    assert_eq!(
        ids(rows_in(&tx, t)),
        [1, 2, 3],
        "c undone, b released into a"
    );
    put(&tx, t, 5);
    assert_eq!(
        committed(&db, t),
        [],
        "nothing shows while the transaction runs"
    );
    tx.rollback_to_savepoint("a").unwrap();
    assert_eq!(
        ids(rows_in(&tx, t)),
        [1],
        "a undone with the b released into it"
    );
    assert_eq!(
        tx.savepoint_depth(),
        1,
        "ROLLBACK TO keeps the savepoint open"
    );
    put(&tx, t, 6);
    let e = tx.release_savepoint("nope").unwrap_err();
    assert_eq!(e.sqlstate(), "3B001");
    assert_eq!(e.to_string(), "savepoint \"nope\" does not exist");
    // ... which failed the transaction, as any error does; ROLLBACK TO recovers it.
    assert_eq!(tx.scan(t).err().unwrap().sqlstate(), "25P02");
    tx.rollback_to_savepoint("a").unwrap();
    put(&tx, t, 7);
    tx.commit().unwrap();
    assert_eq!(ids(committed(&db, t)), [1, 7]);
}

#[test]
fn repeated_names_mean_the_innermost_and_depth_is_unbounded_by_a_small_limit() {
    let (_vfs, db) = new_db(2, config());
    let (t, _) = committing(&db, |tx| create_pairs(tx, "t", "v", []));
    let tx = db.begin(ReadCommitted).unwrap();
    for id in 0..300 {
        tx.savepoint("s").unwrap();
        put(&tx, t, id);
    }
    tx.rollback_to_savepoint("s").unwrap();
    assert_eq!(tx.savepoint_depth(), 300);
    assert_eq!(
        rows_in(&tx, t).len(),
        299,
        "only the innermost level undone"
    );
    for _ in 0..100 {
        tx.release_savepoint("s").unwrap();
    }
    tx.rollback_to_savepoint("s").unwrap();
    assert_eq!(rows_in(&tx, t).len(), 199);
    tx.commit().unwrap();
    assert_eq!(committed(&db, t).len(), 199);
}

#[test]
fn an_error_in_a_level_is_undone_by_rollback_to() {
    let (_vfs, db) = new_db(3, config());
    let (t, _) = committing(&db, |tx| create_pairs(tx, "t", "v", []));
    let tx = db.begin(RepeatableRead).unwrap();
    put(&tx, t, 1);
    tx.savepoint("a").unwrap();
    put(&tx, t, 2);
    let e = tx.insert(t, &[Value::Int(3)]).unwrap_err();
    assert_eq!(e.sqlstate(), "42804");
    assert_eq!(
        tx.insert(t, &[Value::Int(4), Value::Int(4)])
            .unwrap_err()
            .sqlstate(),
        "25P02"
    );
    assert_eq!(tx.savepoint("b").unwrap_err().sqlstate(), "25P02");
    tx.rollback_to_savepoint("a").unwrap();
    put(&tx, t, 5);
    tx.commit().unwrap();
    assert_eq!(ids(committed(&db, t)), [1, 5]);
}

#[test]
fn other_sessions_see_subtransactions_only_when_the_top_commits() {
    let (_vfs, db) = new_db(4, config());
    let (t, tids) = committing(&db, |tx| create_pairs(tx, "t", "v", [(1, 1), (2, 2)]));
    let reader = db.begin(RepeatableRead).unwrap();
    assert_eq!(rows_in(&reader, t).len(), 2);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.savepoint("a").unwrap();
    put(&tx, t, 3);
    tx.delete(t, tids[0]).unwrap();
    tx.release_savepoint("a").unwrap();
    tx.savepoint("b").unwrap();
    put(&tx, t, 4);
    tx.delete(t, tids[1]).unwrap();
    tx.rollback_to_savepoint("b").unwrap();
    assert_eq!(committed(&db, t), [(1, 1), (2, 2)], "the top still runs");
    tx.commit().unwrap();
    assert_eq!(committed(&db, t), [(2, 2), (3, 30)]);
    assert_eq!(
        rows_in(&reader, t),
        [(1, 1), (2, 2)],
        "a snapshot that saw the top running still sees its subtransactions as running"
    );
    reader.commit().unwrap();
}

#[test]
fn a_rolled_back_level_stops_blocking_rows_and_wakes_its_waiters() {
    let (_vfs, db) = new_db(5, config());
    let (t, tids) = committing(&db, |tx| create_pairs(tx, "t", "v", [(1, 1), (2, 2)]));
    let a = db.begin(ReadCommitted).unwrap();
    a.savepoint("s").unwrap();
    assert!(matches!(a.lock_row(t, tids[0]).unwrap(), Changed::Done(..)));
    a.update(t, tids[1], &[Value::Int(2), Value::Int(99)])
        .unwrap();
    let b = db.begin(ReadCommitted).unwrap();
    // B waits for A's level, and goes on when A rolls the level back (A keeps running).
    let (b, r) = blocks_until(
        &db,
        b,
        |b| b.update(t, tids[1], &[Value::Int(2), Value::Int(7)]),
        || a.rollback_to_savepoint("s").unwrap(),
    );
    assert!(matches!(r.unwrap(), Changed::Done(..)));
    b.set_lock_timeout(Some(2_000));
    assert!(
        matches!(
            b.update(t, tids[0], &[Value::Int(1), Value::Int(5)])
                .unwrap(),
            Changed::Done(..)
        ),
        "the rolled-back row lock no longer blocks"
    );
    b.commit().unwrap();
    a.commit().unwrap();
    assert_eq!(committed(&db, t), [(1, 5), (2, 7)]);
}

#[test]
fn table_locks_go_at_rollback_to_and_stay_at_release() {
    let (_vfs, db) = new_db(6, config());
    let (t, _) = committing(&db, |tx| create_pairs(tx, "t", "v", []));
    let tx = db.begin(ReadCommitted).unwrap();
    tx.savepoint("a").unwrap();
    tx.lock_table(t, LockMode::AccessExclusive, false).unwrap();
    assert!(common::table_is_locked(&db, t));
    tx.rollback_to_savepoint("a").unwrap();
    assert!(!common::table_is_locked(&db, t), "released at ROLLBACK TO");
    tx.lock_table(t, LockMode::AccessExclusive, false).unwrap();
    tx.release_savepoint("a").unwrap();
    assert!(common::table_is_locked(&db, t), "kept at RELEASE");
    tx.rollback().unwrap();
    assert!(!common::table_is_locked(&db, t));
}

#[test]
fn unique_checks_see_own_live_subtransactions_only() {
    let (_vfs, db) = new_db(7, config());
    let (t, _) = committing(&db, |tx| {
        let (t, tids) = create_pairs(tx, "t", "v", []);
        tx.create_index("t_id", t, &["id"], true).unwrap();
        (t, tids)
    });
    let tx = db.begin(ReadCommitted).unwrap();
    tx.savepoint("a").unwrap();
    put(&tx, t, 1);
    tx.rollback_to_savepoint("a").unwrap();
    put(&tx, t, 1);
    tx.savepoint("b").unwrap();
    put(&tx, t, 2);
    tx.release_savepoint("b").unwrap();
    tx.savepoint("c").unwrap();
    let e = tx.insert(t, &[Value::Int(2), Value::Int(0)]).unwrap_err();
    assert_eq!(e.sqlstate(), "23505", "{e}");
    tx.rollback_to_savepoint("c").unwrap();
    tx.commit().unwrap();
    assert_eq!(committed(&db, t), [(1, 10), (2, 20)]);
}

#[test]
fn subtransactions_across_a_crash() {
    let (vfs, db) = new_db(8, config());
    let (t, tids) = committing(&db, |tx| create_pairs(tx, "t", "v", [(0, 0)]));
    let tx = db.begin(ReadCommitted).unwrap();
    put(&tx, t, 1);
    tx.savepoint("a").unwrap();
    put(&tx, t, 2);
    tx.savepoint("b").unwrap();
    put(&tx, t, 3);
    tx.rollback_to_savepoint("b").unwrap();
    tx.release_savepoint("a").unwrap();
    tx.commit().unwrap();
    // One that never ends: its released level's rows go with it.
    let open = db.begin(ReadCommitted).unwrap();
    open.savepoint("x").unwrap();
    put(&open, t, 4);
    open.release_savepoint("x").unwrap();
    open.vanish();
    // A prepared one, with a released and a rolled-back level.
    let p = db.begin(ReadCommitted).unwrap();
    p.savepoint("y").unwrap();
    put(&p, t, 5);
    p.delete(t, tids[0]).unwrap();
    p.savepoint("z").unwrap();
    put(&p, t, 6);
    p.rollback_to_savepoint("z").unwrap();
    p.prepare("g").unwrap();
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    assert_eq!(ids(committed(&db, t)), [0, 1, 2]);
    // The prepared transaction's subtransaction still deletes row 0: an update waits.
    let w = db.begin(ReadCommitted).unwrap();
    w.set_lock_timeout(Some(50));
    let e = w
        .update(t, tids[0], &[Value::Int(0), Value::Int(1)])
        .unwrap_err();
    assert_eq!(e.sqlstate(), "55P03", "{e}");
    w.rollback().unwrap();
    db.commit_prepared("g").unwrap();
    assert_eq!(ids(committed(&db, t)), [1, 2, 5]);
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    assert_eq!(
        ids(committed(&db, t)),
        [1, 2, 5],
        "redo of the commit record's subxids"
    );
}

#[test]
fn rollback_prepared_rolls_back_every_subtransaction() {
    let (_vfs, db) = new_db(9, config());
    let (t, _) = committing(&db, |tx| create_pairs(tx, "t", "v", [(1, 1)]));
    let p = db.begin(ReadCommitted).unwrap();
    p.savepoint("y").unwrap();
    put(&p, t, 5);
    p.release_savepoint("y").unwrap();
    p.prepare("g").unwrap();
    db.rollback_prepared("g").unwrap();
    assert_eq!(committed(&db, t), [(1, 1)]);
}

/// Scans `t` `n` times in a new transaction; returns the time per scan.
fn scan_time(db: &quire_engine::Database, t: quire_engine::TableId, n: u32) -> std::time::Duration {
    let start = std::time::Instant::now();
    for _ in 0..n {
        committed(db, t);
    }
    start.elapsed() / n
}

#[test]
fn snapshots_do_not_grow_with_subtransactions() {
    let (_vfs, db) = new_db(10, config());
    let (t, _) = committing(&db, |tx| create_pairs(tx, "t", "v", []));
    let (flat, _) = committing(&db, |tx| create_pairs(tx, "flat", "v", []));
    let plain = db.begin(ReadCommitted).unwrap();
    let deep = db.begin(ReadCommitted).unwrap();
    for id in 0..1000 {
        put(&plain, flat, id);
        deep.savepoint("s").unwrap();
        put(&deep, t, id);
    }
    let snap = db
        .transactions()
        .snapshot(quire_engine::txn::ProcId(u64::MAX));
    assert_eq!(
        snap.xip.len(),
        2,
        "one id per running transaction, none per subtransaction"
    );
    // What a reader pays: 1,000 rows of a running transaction, written under one id or
    // under 1,000 subtransaction ids (each mapped to its top-level id).
    let (one, many) = (scan_time(&db, flat, 20), scan_time(&db, t, 20));
    eprintln!("scan of 1,000 uncommitted rows: one id {one:?}, 1,000 subtransaction ids {many:?}");
    plain.commit().unwrap();
    deep.commit().unwrap();
    assert_eq!(committed(&db, t).len(), 1000);
    let (one, many) = (scan_time(&db, flat, 20), scan_time(&db, t, 20));
    eprintln!("scan of 1,000 committed rows: one id {one:?}, 1,000 subtransaction ids {many:?}");
}
