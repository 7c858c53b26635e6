//! The commit logs forget old transactions: a database-wide VACUUM freezes every version
//! (hints instead of commit-log lookups), then the segments of both logs below the oldest id
//! any table still names are removed — never one that a running or prepared transaction, or
//! an unvacuumed table, still needs — and everything reads the same afterwards, after a
//! restart and after a power loss, with the statuses gone.

mod common;

use std::ops::Bound;

use common::{
    committing, crash, create_accounts, exists, new_db, open_db, pair, rows_in, wait_for,
};
use quire_engine::clog::{COMMIT_TS_LOG, STATUS_LOG};
use quire_engine::heap::tuple::{TupleHeader, XMIN_COMMITTED};
use quire_engine::page::Page;
use quire_engine::types::BufferTag;
use quire_engine::types::Xid;
use quire_engine::vfs::SimVfs;
use quire_engine::{
    Changed, Config, Database, Fork, IsolationLevel::ReadCommitted, IsolationLevel::RepeatableRead,
    RelFileLocator, TableId, Tid, Value,
};

fn config() -> Config {
    Config {
        track_commit_timestamp: true,
        max_prepared_transactions: 4,
        autovacuum: false,
        // Keep no recent statuses beyond what vacuum needs: segment 0 goes at once.
        vacuum_freeze_min_age: 0,
        ..common::config()
    }
}

/// Is segment `segno` of the status log on disk?
fn status_segment_exists(db: &Database, vfs: &SimVfs, segno: u64) -> bool {
    exists(
        vfs,
        &db.smgr()
            .segment_path(STATUS_LOG.segment_rel(segno), Fork::Main, 0),
    )
}

fn ts_segment_exists(db: &Database, vfs: &SimVfs, segno: u64) -> bool {
    exists(
        vfs,
        &db.smgr()
            .segment_path(COMMIT_TS_LOG.segment_rel(segno), Fork::Main, 0),
    )
}

/// Moves the next transaction id into the next status segment.
fn next_segment(db: &Database) {
    let t = db.transactions();
    let next = t.next_xid();
    let to = (STATUS_LOG.segment_of(next) + 1) * STATUS_LOG.per_segment();
    t.skip_xids(to - next.0);
}

/// `accounts (id, balance)` with a unique index on `id`: rows 1..=n with balance 100 × id.
fn setup(db: &Database, n: i64) -> TableId {
    committing(db, |tx| {
        let (t, _) = create_accounts(tx, n);
        tx.create_index("accounts_pkey", t, &["id"], true).unwrap();
        t
    })
}

/// The table's rows, by a sequential scan and by the index (which must agree).
fn contents(db: &Database, t: TableId) -> Vec<(i64, i64)> {
    committing(db, |tx| {
        let rows = rows_in(tx, t);
        let pkey = tx.index("accounts_pkey").unwrap();
        let by_index: Vec<(i64, i64)> = tx
            .index_scan(pkey, Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .map(|r| pair(&r.unwrap().1))
            .collect();
        assert_eq!(rows, by_index, "the index disagrees with the heap");
        tx.verify_indexes(t).unwrap();
        rows
    })
}

fn tid_of(db: &Database, id: i64) -> Tid {
    committing(db, |tx| {
        let pkey = tx.index("accounts_pkey").unwrap();
        let key = [Value::Int(id)];
        let found = tx
            .index_scan(pkey, Bound::Included(&key), Bound::Included(&key))
            .unwrap()
            .next()
            .expect("the row exists")
            .unwrap();
        found.0
    })
}

/// A history in segment 0 that leaves every kind of header behind: committed inserts,
/// updates (HOT), a delete, an aborted insert, an aborted update, a finished row lock.
/// Returns (an id that committed, an id that aborted), both in segment 0.
fn history(db: &Database, t: TableId) -> (Xid, Xid) {
    let tx = db.begin(ReadCommitted).unwrap();
    for id in [1, 2] {
        let tid = tid_of(db, id);
        let r = tx.update(t, tid, &[Value::Int(id), Value::Int(7)]).unwrap();
        assert!(matches!(r, Changed::Done(..)));
    }
    tx.delete(t, tid_of(db, 3)).unwrap();
    let committed = tx.xid().expect("it wrote");
    tx.commit().unwrap();

    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(1000), Value::Int(0)]).unwrap();
    tx.update(t, tid_of(db, 4), &[Value::Int(4), Value::Int(-1)])
        .unwrap();
    let aborted = tx.xid().unwrap();
    tx.rollback().unwrap();

    let tx = db.begin(ReadCommitted).unwrap();
    tx.lock_row(t, tid_of(db, 5)).unwrap();
    tx.commit().unwrap();
    (committed, aborted)
}

/// Versions in `rel` inserted below `oldest` that lack the `XMIN_COMMITTED` hint.
fn unhinted_below(db: &Database, rel: RelFileLocator, oldest: Xid) -> usize {
    let mut unhinted = 0;
    for block in 0..db.smgr().nblocks(rel, Fork::Main).unwrap() {
        let buf = db
            .buffer_pool()
            .read_buffer(BufferTag::new(rel, Fork::Main, block))
            .unwrap();
        let page = buf.read();
        let p = Page::new(&page);
        for off in 1..=p.item_count() {
            let Some(h) = p.item(off).and_then(TupleHeader::read) else {
                continue; // not a version: a dead, unused or redirect pointer
            };
            if h.xmin < oldest && h.infomask & XMIN_COMMITTED == 0 {
                unhinted += 1;
            }
        }
    }
    unhinted
}

fn expected(n: i64) -> Vec<(i64, i64)> {
    (1..=n)
        .filter(|&id| id != 3)
        .map(|id| (id, if id <= 2 { 7 } else { 100 * id }))
        .collect()
}

#[test]
fn a_database_vacuum_removes_old_segments_and_everything_reads_the_same() {
    let (vfs, db) = new_db(1, config());
    let t = setup(&db, 300);
    let rel = committing(&db, |tx| tx.table_def(t).unwrap().rel);
    let (committed, aborted) = history(&db, t);
    assert_eq!(STATUS_LOG.segment_of(committed), 0);
    let committed_at = db
        .transactions()
        .commit_timestamp(committed)
        .unwrap()
        .expect("tracked");
    assert!(committed_at > 0);
    next_segment(&db);
    // A commit in segment 1, so the table also names an id above the horizon's segment.
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(301), Value::Int(30_100)])
        .unwrap();
    let recent = tx.xid().unwrap();
    tx.commit().unwrap();
    assert_eq!(STATUS_LOG.segment_of(recent), 1);
    assert!(db
        .transactions()
        .commit_timestamp(recent)
        .unwrap()
        .is_some());
    db.checkpointer().checkpoint().unwrap();
    assert!(status_segment_exists(&db, &vfs, 0));
    assert!(ts_segment_exists(
        &db,
        &vfs,
        COMMIT_TS_LOG.segment_of(committed)
    ));
    let mut want = expected(300);
    want.push((301, 30_100));
    assert_eq!(contents(&db, t), want);

    let done = db.vacuum_all().unwrap();
    assert_eq!(done.skipped, 0);
    assert!(done.oldest_xid > committed && done.oldest_xid > aborted);
    assert!(done.log_segments_removed >= 2, "{done:?}");
    // Vacuum hinted what pruning on full pages (the updates above) had not hinted already:
    // between them, every version below the new oldest id carries its hint.
    let frozen: u64 = done.tables.iter().map(|(_, s)| s.tuples_frozen).sum();
    assert!(frozen > 0, "{done:?}");
    assert_eq!(unhinted_below(&db, rel, done.oldest_xid), 0);
    assert!(!status_segment_exists(&db, &vfs, 0));
    assert!(!ts_segment_exists(
        &db,
        &vfs,
        COMMIT_TS_LOG.segment_of(committed)
    ));
    assert!(status_segment_exists(&db, &vfs, 1));
    // The statuses are gone; asking is an error (for an id the status cache does not hold),
    // a commit timestamp is unknown.
    let err = db
        .transactions()
        .status(Xid(STATUS_LOG.per_segment() - 1))
        .unwrap_err();
    assert_eq!(err.sqlstate(), "XX001", "{err}");
    assert_eq!(db.transactions().commit_timestamp(committed).unwrap(), None);
    assert_eq!(contents(&db, t), want);

    // A clean restart empties the status cache: every old version is read through its
    // hints, or this fails.
    db.close().unwrap();
    let db = open_db(&vfs, config());
    assert_eq!(db.transactions().oldest_xid(), done.oldest_xid);
    assert_eq!(contents(&db, t), want);
    // The frozen rows can still be changed, and the change survives a power loss.
    let tx = db.begin(ReadCommitted).unwrap();
    tx.update(t, tid_of(&db, 10), &[Value::Int(10), Value::Int(-10)])
        .unwrap();
    tx.delete(t, tid_of(&db, 11)).unwrap();
    tx.commit().unwrap();
    want.retain(|&(id, _)| id != 11);
    want.iter_mut().find(|(id, _)| *id == 10).expect("row 10").1 = -10;
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    assert_eq!(db.transactions().oldest_xid(), done.oldest_xid);
    assert!(!status_segment_exists(&db, &vfs, 0));
    assert_eq!(contents(&db, t), want);
    db.close().unwrap();
}

#[test]
fn a_power_loss_right_after_the_truncation_redoes_it() {
    let (vfs, db) = new_db(2, config());
    let t = setup(&db, 100);
    history(&db, t);
    db.checkpointer().checkpoint().unwrap();
    next_segment(&db);
    let done = db.vacuum_all().unwrap();
    assert!(done.log_segments_removed > 0);
    // No checkpoint since: the freezing and the truncation are only in the WAL (the
    // truncation record was flushed before the files went).
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    assert_eq!(db.transactions().oldest_xid(), done.oldest_xid);
    assert!(!status_segment_exists(&db, &vfs, 0));
    assert_eq!(contents(&db, t), expected(100));
    db.close().unwrap();
}

#[test]
fn a_transaction_running_across_the_vacuum_keeps_its_segment() {
    let (vfs, db) = new_db(3, config());
    let t = setup(&db, 50);
    // A writer in segment 0 that stays open, and a reader whose snapshot predates it all.
    let reader = db.begin(RepeatableRead).unwrap();
    assert_eq!(contents(&db, t).len(), 50);
    reader.scan(t).unwrap().for_each(|r| drop(r.unwrap()));
    let writer = db.begin(ReadCommitted).unwrap();
    writer.insert(t, &[Value::Int(51), Value::Int(1)]).unwrap();
    let open_xid = writer.xid().unwrap();
    next_segment(&db);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(52), Value::Int(2)]).unwrap();
    tx.commit().unwrap();

    let done = db.vacuum_all().unwrap();
    assert!(done.oldest_xid <= open_xid, "{done:?}");
    assert!(status_segment_exists(&db, &vfs, 0));
    assert_eq!(reader.scan(t).unwrap().count(), 50);
    reader.commit().unwrap();
    writer.commit().unwrap();
    assert_eq!(
        db.transactions().status(open_xid).unwrap(),
        quire_engine::clog::TxnStatus::Committed
    );

    let done = db.vacuum_all().unwrap();
    assert!(done.oldest_xid > open_xid, "{done:?}");
    assert!(!status_segment_exists(&db, &vfs, 0));
    assert_eq!(contents(&db, t).len(), 52);
    db.close().unwrap();
}

#[test]
fn a_prepared_transaction_keeps_its_segment_across_a_restart() {
    let (vfs, db) = new_db(4, config());
    let t = setup(&db, 20);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.update(t, tid_of(&db, 1), &[Value::Int(1), Value::Int(-1)])
        .unwrap();
    let prepared_xid = tx.xid().unwrap();
    tx.prepare("xa-1").unwrap();
    next_segment(&db);
    let done = db.vacuum_all().unwrap();
    assert!(done.oldest_xid <= prepared_xid, "{done:?}");
    assert!(status_segment_exists(&db, &vfs, 0));
    crash(db, &vfs);

    let db = open_db(&vfs, config());
    assert_eq!(db.prepared_transactions().len(), 1);
    assert!(db.transactions().next_xid() >= done.oldest_xid);
    db.commit_prepared("xa-1").unwrap();
    // The skipped ids were never logged: the crash took the next id back to the oldest kept.
    next_segment(&db);
    let done = db.vacuum_all().unwrap();
    assert!(done.oldest_xid > prepared_xid, "{done:?}");
    assert!(!status_segment_exists(&db, &vfs, 0));
    let rows = contents(&db, t);
    assert_eq!(rows[0], (1, -1));
    assert_eq!(rows.len(), 20);
    db.close().unwrap();
}

#[test]
fn the_catalog_forgets_the_versions_vacuum_removed() {
    let (vfs, db) = new_db(5, config());
    let t = setup(&db, 10);
    for _ in 0..200 {
        let tx = db.begin(ReadCommitted).unwrap();
        tx.truncate(t).unwrap();
        tx.insert(t, &[Value::Int(1), Value::Int(100)]).unwrap();
        tx.commit().unwrap();
    }
    let done = db.vacuum_all().unwrap();
    let catalog = done.catalog.clone().expect("the catalog was vacuumed");
    // Two definitions (the table and its index), each at one address or two (a redirect
    // and its version): the other 200 versions' addresses are forgotten.
    assert!(done.catalog_addresses <= 4, "{done:?}");
    assert!(done.catalog_addresses_forgotten > 0, "{done:?}");
    assert!(
        catalog.dead_tuples_removed + catalog.pruned > 0,
        "{catalog:?}"
    );
    assert_eq!(contents(&db, t), vec![(1, 100)]);
    // A restart rebuilds the catalog's index from what is left.
    db.close().unwrap();
    let db = open_db(&vfs, config());
    assert_eq!(contents(&db, t), vec![(1, 100)]);
    db.close().unwrap();
}

#[test]
fn autovacuum_vacuums_the_whole_database_when_the_logs_grow_old() {
    let config = Config {
        autovacuum: true,
        autovacuum_naptime_ms: 10,
        autovacuum_freeze_max_age: 100_000,
        ..config()
    };
    let (vfs, db) = new_db(6, config.clone());
    let t = setup(&db, 30);
    history(&db, t);
    next_segment(&db);
    wait_for("autovacuum to truncate the commit log", || {
        !status_segment_exists(&db, &vfs, 0)
    });
    assert!(db.transactions().oldest_xid().0 >= STATUS_LOG.per_segment());
    assert_eq!(contents(&db, t), expected(30));
    db.close().unwrap();
}

#[test]
fn the_statuses_of_recent_transactions_are_kept_for_vacuum_freeze_min_age() {
    let config = Config {
        vacuum_freeze_min_age: 2 * STATUS_LOG.per_segment(),
        ..config()
    };
    let (vfs, db) = new_db(7, config.clone());
    let t = setup(&db, 10);
    let (committed, _) = history(&db, t);
    next_segment(&db);
    let done = db.vacuum_all().unwrap();
    // Everything is frozen, but the last two segments' worth of statuses stay.
    assert!(done.tables[0].1.frozen_xid > committed, "{done:?}");
    assert!(status_segment_exists(&db, &vfs, 0));
    assert!(db
        .transactions()
        .commit_timestamp(committed)
        .unwrap()
        .is_some());
    next_segment(&db);
    next_segment(&db);
    let done = db.vacuum_all().unwrap();
    assert!(done.log_segments_removed > 0, "{done:?}");
    assert!(!status_segment_exists(&db, &vfs, 0));
    assert_eq!(db.transactions().commit_timestamp(committed).unwrap(), None);
    assert_eq!(contents(&db, t), expected(10));
    db.close().unwrap();
}
