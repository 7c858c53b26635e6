//! Row visibility (MVCC) as a PostgreSQL user expects it, through the embedded API:
//!
//! - visibility checks rarely touch the commit log: scanning 10,000 rows of one committed
//!   transaction many times costs a handful of commit-log lookups (the status cache answers
//!   the rest), also right after a restart;
//! - a transaction sees its own inserts, updates and deletes in its later calls (and a scan
//!   does not see what its own loop changes); others do not before commit; READ COMMITTED
//!   sees them after commit, REPEATABLE READ not when its snapshot is older;
//! - aborted inserts stay invisible after a restart; transactions open at a crash are
//!   aborted by it: their rows are invisible and the rows they locked or changed can be
//!   changed at once;
//! - SELECT ... FOR UPDATE (`lock_row`) makes another transaction's DELETE wait for the
//!   locker's end, then go through (rollback or commit of the locker: the row is unchanged).
//!
//! Blocked statements run on their own thread; the test waits until the lock manager reports
//! the session waiting (bounded poll), never on a sleep.

mod common;

use common::{
    blocks_until, committed, committing, config, crash, create_pairs, new_db, open_db, pair,
    rows_in,
};
use quire_engine::clog::TxnStatus;
use quire_engine::{Changed, Database, IsolationLevel::*, TableId, Tid, Value};

/// Creates `t (id, v)` holding (id, 10 * id) for ids 1..=n; returns it and the rows'
/// addresses by id - 1.
fn setup(db: &Database, n: i64) -> (TableId, Vec<Tid>) {
    committing(db, |tx| {
        create_pairs(tx, "t", "v", (1..=n).map(|id| (id, 10 * id)))
    })
}

/// (commit-log lookups, status-cache hits) so far.
fn status_counters(db: &Database) -> (u64, u64) {
    let s = db.transactions().stats();
    (s.clog_lookups.get(), s.status_cache_hits.get())
}

// ---------------------------------------------------------------------------- commit log

#[test]
fn visibility_checks_rarely_touch_the_commit_log() {
    const ROWS: i64 = 10_000;
    const SCANS: u64 = 20;
    let (vfs, db) = new_db(1, config());
    let (t, _) = setup(&db, ROWS);
    let scan_all = |db: &Database| {
        for _ in 0..SCANS {
            let tx = db.begin(ReadCommitted).unwrap();
            let mut n = 0;
            for r in tx.scan(t).unwrap() {
                r.unwrap();
                n += 1;
            }
            assert_eq!(n, ROWS);
            tx.commit().unwrap();
        }
    };
    let (lookups, hits) = status_counters(&db);
    scan_all(&db);
    let (lookups2, hits2) = status_counters(&db);
    assert!(
        lookups2 - lookups <= 4,
        "{} commit-log lookups for {SCANS} scans of {ROWS} rows",
        lookups2 - lookups
    );
    assert!(
        hits2 - hits >= SCANS * ROWS as u64,
        "{} status-cache hits for {SCANS} scans of {ROWS} rows",
        hits2 - hits
    );
    // After a restart the cache starts empty: the first look reads the commit log once.
    db.close().unwrap();
    let db = open_db(&vfs, config());
    let (lookups, hits) = status_counters(&db);
    scan_all(&db);
    let (lookups2, hits2) = status_counters(&db);
    assert!(
        (1..=4).contains(&(lookups2 - lookups)),
        "{} commit-log lookups after a restart",
        lookups2 - lookups
    );
    assert!(hits2 - hits >= SCANS * ROWS as u64 - 4);
    db.close().unwrap();
}

// ---------------------------------------------------------------------------- own changes

#[test]
fn a_transaction_sees_its_own_changes_in_later_calls() {
    let (_vfs, db) = new_db(2, config());
    let (t, tids) = setup(&db, 3);
    for level in [ReadCommitted, RepeatableRead] {
        let tx = db.begin(level).unwrap();
        let new = tx.insert(t, &[Value::Int(4), Value::Int(40)]).unwrap();
        let updated = match tx
            .update(t, tids[0], &[Value::Int(1), Value::Int(11)])
            .unwrap()
        {
            Changed::Done(tid, row) => {
                assert_eq!(pair(&row), (1, 11));
                tid
            }
            Changed::Skipped => panic!("{level:?}: own update skipped"),
        };
        assert!(matches!(tx.delete(t, tids[1]).unwrap(), Changed::Done(..)));
        assert_eq!(
            rows_in(&tx, t),
            vec![(1, 11), (3, 30), (4, 40)],
            "{level:?}"
        );
        assert_eq!(tx.fetch(t, new).unwrap().map(|r| pair(&r)), Some((4, 40)));
        assert_eq!(
            tx.fetch(t, updated).unwrap().map(|r| pair(&r)),
            Some((1, 11))
        );
        assert_eq!(tx.fetch(t, tids[0]).unwrap(), None, "the old version");
        assert_eq!(tx.fetch(t, tids[1]).unwrap(), None, "the deleted row");
        // Its own new version can be changed again.
        assert!(matches!(
            tx.update(t, updated, &[Value::Int(1), Value::Int(12)])
                .unwrap(),
            Changed::Done(..)
        ));
        assert_eq!(
            rows_in(&tx, t),
            vec![(1, 12), (3, 30), (4, 40)],
            "{level:?}"
        );
        // Another transaction sees none of it.
        assert_eq!(committed(&db, t), vec![(1, 10), (2, 20), (3, 30)]);
        tx.rollback().unwrap();
    }
    assert_eq!(committed(&db, t), vec![(1, 10), (2, 20), (3, 30)]);
    db.close().unwrap();
}

#[test]
fn a_scan_does_not_see_the_rows_its_own_loop_changes() {
    let (_vfs, db) = new_db(3, config());
    let (t, _) = setup(&db, 500);
    let tx = db.begin(ReadCommitted).unwrap();
    // UPDATE t SET v = v + 1: each row once, though new versions land ahead of the scan.
    let mut updated = 0;
    for r in tx.scan(t).unwrap() {
        let (tid, _) = r.unwrap();
        let changed = tx
            .update_with(t, tid, |row| {
                let (id, v) = pair(row);
                Some(vec![Value::Int(id), Value::Int(v + 1)])
            })
            .unwrap();
        assert!(matches!(changed, Changed::Done(..)));
        updated += 1;
    }
    assert_eq!(updated, 500);
    let rows = rows_in(&tx, t);
    assert_eq!(rows.len(), 500);
    assert!(
        rows.iter().all(|&(id, v)| v == 10 * id + 1),
        "some row updated twice"
    );
    tx.commit().unwrap();
    db.close().unwrap();
}

#[test]
fn read_committed_sees_commits_at_once_repeatable_read_keeps_its_snapshot() {
    let (_vfs, db) = new_db(4, config());
    let (t, tids) = setup(&db, 3);
    let before = vec![(1, 10), (2, 20), (3, 30)];
    let after = vec![(1, 11), (3, 30), (4, 40)];
    let rc = db.begin(ReadCommitted).unwrap();
    let rr = db.begin(RepeatableRead).unwrap();
    assert_eq!(
        rows_in(&rr, t),
        before,
        "REPEATABLE READ takes its snapshot here"
    );
    let writer = db.begin(ReadCommitted).unwrap();
    writer.insert(t, &[Value::Int(4), Value::Int(40)]).unwrap();
    writer
        .update(t, tids[0], &[Value::Int(1), Value::Int(11)])
        .unwrap();
    writer.delete(t, tids[1]).unwrap();
    // Not before commit, at either level.
    assert_eq!(rows_in(&rc, t), before);
    assert_eq!(rows_in(&rr, t), before);
    // A REPEATABLE READ transaction whose snapshot is taken after the changes but before
    // the commit does not see them either.
    let rr_late = db.begin(RepeatableRead).unwrap();
    assert_eq!(rows_in(&rr_late, t), before);
    writer.commit().unwrap();
    assert_eq!(
        rows_in(&rc, t),
        after,
        "READ COMMITTED: a new snapshot per call"
    );
    assert_eq!(
        rows_in(&rr, t),
        before,
        "REPEATABLE READ: its first snapshot"
    );
    assert_eq!(rows_in(&rr_late, t), before);
    assert_eq!(
        rr.fetch(t, tids[1]).unwrap().map(|r| pair(&r)),
        Some((2, 20))
    );
    rc.commit().unwrap();
    rr.commit().unwrap();
    rr_late.commit().unwrap();
    let rr_new = db.begin(RepeatableRead).unwrap();
    assert_eq!(rows_in(&rr_new, t), after);
    rr_new.commit().unwrap();
    db.close().unwrap();
}

// ---------------------------------------------------------------------------- crashes

#[test]
fn aborted_inserts_stay_invisible_after_restarts() {
    let (vfs, db) = new_db(5, config());
    let (t, tids) = setup(&db, 3);
    let tx = db.begin(ReadCommitted).unwrap();
    for id in 100..400 {
        tx.insert(t, &[Value::Int(id), Value::Int(0)]).unwrap();
    }
    tx.update(t, tids[0], &[Value::Int(1), Value::Int(0)])
        .unwrap();
    let aborted = tx.xid().unwrap();
    tx.rollback().unwrap();
    // The aborted versions reach the disk.
    db.buffer_pool().flush_all().unwrap();
    let expected = vec![(1, 10), (2, 20), (3, 30)];
    assert_eq!(committed(&db, t), expected);
    db.close().unwrap();
    let db = open_db(&vfs, config());
    assert_eq!(committed(&db, t), expected, "after a clean restart");
    assert_eq!(
        db.transactions().status(aborted).unwrap(),
        TxnStatus::Aborted
    );
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    assert_eq!(committed(&db, t), expected, "after a crash");
    // The row its update had marked is free.
    let tx = db.begin(RepeatableRead).unwrap();
    assert!(matches!(
        tx.update(t, tids[0], &[Value::Int(1), Value::Int(1)])
            .unwrap(),
        Changed::Done(..)
    ));
    tx.commit().unwrap();
    db.close().unwrap();
}

#[test]
fn transactions_open_at_a_crash_are_aborted_by_it() {
    let (vfs, db) = new_db(6, config());
    let (t, tids) = setup(&db, 4);
    let open_tx = db.begin(ReadCommitted).unwrap();
    open_tx.insert(t, &[Value::Int(5), Value::Int(50)]).unwrap();
    open_tx
        .update(t, tids[0], &[Value::Int(1), Value::Int(11)])
        .unwrap();
    open_tx.delete(t, tids[1]).unwrap();
    assert!(matches!(
        open_tx.lock_row(t, tids[2]).unwrap(),
        Changed::Done(..)
    ));
    let xid = open_tx.xid().unwrap();
    // Its changes reach the disk (WAL first), and a checkpoint covers them.
    db.buffer_pool().flush_all().unwrap();
    db.checkpointer().checkpoint().unwrap();
    // A crash: the transaction never ends.
    open_tx.vanish();
    crash(db, &vfs);

    let db = open_db(&vfs, config());
    assert!(!db.transactions().is_running(xid));
    assert!(!db.transactions().did_commit(xid).unwrap());
    let expected = vec![(1, 10), (2, 20), (3, 30), (4, 40)];
    assert_eq!(committed(&db, t), expected);
    // Each row it updated, deleted or locked is changed at once (no wait for a dead id).
    let tx = db.begin(RepeatableRead).unwrap();
    for (id, tid) in (1..).zip(tids.iter().take(3)) {
        let r = tx
            .update(t, *tid, &[Value::Int(id), Value::Int(id * 10 + 1)])
            .unwrap();
        assert!(matches!(r, Changed::Done(..)), "row {id}: {r:?}");
        assert!(!db.locks().is_waiting(tx.session_id()));
    }
    assert!(tx.xid().unwrap() > xid, "an id handed out twice");
    tx.commit().unwrap();
    assert_eq!(committed(&db, t), vec![(1, 11), (2, 21), (3, 31), (4, 40)]);
    db.close().unwrap();
}

// ---------------------------------------------------------------------------- row locks

/// T1 locks row 1 FOR UPDATE; T2's delete of it waits until T1 ends (commits if
/// `commit_t1`, else rolls back), then deletes it.
fn for_update_blocks_delete(commit_t1: bool) {
    let (_vfs, db) = new_db(7, config());
    let (t, tids) = setup(&db, 2);
    let t1 = db.begin(ReadCommitted).unwrap();
    match t1.lock_row(t, tids[0]).unwrap() {
        Changed::Done(tid, row) => assert_eq!((tid, pair(&row)), (tids[0], (1, 10))),
        Changed::Skipped => panic!("lock skipped"),
    }
    // A plain read is not blocked by the lock.
    assert_eq!(committed(&db, t), vec![(1, 10), (2, 20)]);
    // Nor is a change of another row.
    let other = db.begin(ReadCommitted).unwrap();
    assert!(matches!(
        other.delete(t, tids[1]).unwrap(),
        Changed::Done(..)
    ));
    other.rollback().unwrap();
    let t2 = db.begin(RepeatableRead).unwrap();
    let (t2, r) = blocks_until(
        &db,
        t2,
        |t2| t2.delete(t, tids[0]),
        || {
            if commit_t1 {
                t1.commit().unwrap();
            } else {
                t1.rollback().unwrap();
            }
        },
    );
    match r.unwrap() {
        Changed::Done(tid, row) => assert_eq!((tid, pair(&row)), (tids[0], (1, 10))),
        Changed::Skipped => panic!("delete skipped"),
    }
    t2.commit().unwrap();
    assert_eq!(committed(&db, t), vec![(2, 20)]);
    db.close().unwrap();
}

#[test]
fn for_update_makes_a_delete_wait_and_the_delete_succeeds_after_rollback() {
    for_update_blocks_delete(false);
}

#[test]
fn for_update_makes_a_delete_wait_and_the_delete_succeeds_after_commit() {
    // Only locked, not changed: even REPEATABLE READ may delete it after the commit.
    for_update_blocks_delete(true);
}
