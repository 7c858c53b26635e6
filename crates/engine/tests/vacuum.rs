//! Lazy vacuum: it removes what no snapshot can see and nothing else, frees space for reuse,
//! truncates an emptied table (dropping its buffers), marks pages all-visible and then skips
//! them, runs as many index passes as its memory needs, and survives crashes.

mod common;

use common::{
    committed, committing, crash, new_db, open_db, power_loss, rel_of, rows_in, wait_for,
};
use quire_engine::rng::SplitMix64;
use quire_engine::{
    Changed, Column, Config, Database, DeadTidsMode, Fork, IsolationLevel::ReadCommitted,
    IsolationLevel::RepeatableRead, TableId, Tid, Transaction, Type, Value,
};

/// A table of `rows` rows (id, value, 100 bytes of padding); their addresses by id.
fn filled(db: &Database, rows: i64) -> (TableId, Vec<Tid>) {
    let columns = [
        Column::new("id", Type::Int),
        Column::new("v", Type::Int),
        Column::new("pad", Type::Text),
    ];
    committing(db, |tx| {
        let t = tx.create_table("t", &columns).unwrap();
        let pad = Value::Text("x".repeat(100));
        let tids = (0..rows)
            .map(|i| {
                tx.insert(t, &[Value::Int(i), Value::Int(0), pad.clone()])
                    .unwrap()
            })
            .collect();
        (t, tids)
    })
}

fn delete_all(db: &Database, t: TableId) {
    committing(db, |tx| {
        let tids: Vec<Tid> = tx.scan(t).unwrap().map(|r| r.unwrap().0).collect();
        for tid in tids {
            tx.delete(t, tid).unwrap();
        }
    });
}

#[test]
fn vacuum_of_an_emptied_table_truncates_it_to_nothing() {
    let (vfs, db) = new_db(1, Config::default());
    let (t, _) = filled(&db, 2_000);
    let rel = rel_of(&db, t);
    let pages = db.smgr().nblocks(rel, Fork::Main).unwrap();
    assert!(pages > 20, "{pages}");
    delete_all(&db, t);
    let stats = db.vacuum(t).unwrap();
    assert_eq!(stats.pages, pages);
    assert_eq!(stats.dead_tuples_removed, 2_000);
    assert_eq!(stats.live_tuples, 0);
    assert_eq!(stats.pages_truncated, pages);
    assert_eq!(db.smgr().nblocks(rel, Fork::Main).unwrap(), 0);
    assert_eq!(
        db.buffer_pool().cached_buffers_of_fork(rel, Fork::Main),
        0,
        "buffers dropped"
    );
    // The table works on: inserts go to a new first page.
    let tx = db.begin(ReadCommitted).unwrap();
    let tid = tx
        .insert(
            t,
            &[Value::Int(7), Value::Int(7), Value::Text(String::new())],
        )
        .unwrap();
    assert_eq!(tid, Tid::new(0, 1));
    tx.commit().unwrap();
    // Redo does the truncation too.
    db.wal().flush(db.wal().insert_lsn()).unwrap();
    crash(db, &vfs);
    let db = open_db(&vfs, Config::default());
    assert_eq!(committed(&db, t), vec![(7, 7)]);
    assert_eq!(db.smgr().nblocks(rel, Fork::Main).unwrap(), 1);
}

#[test]
fn vacuum_keeps_what_an_open_snapshot_sees() {
    let (_vfs, db) = new_db(2, Config::default());
    let (t, _) = filled(&db, 500);
    let old = db.begin(RepeatableRead).unwrap();
    let before = rows_in(&old, t);
    delete_all(&db, t);
    let stats = db.vacuum(t).unwrap();
    assert_eq!(stats.dead_tuples_removed, 0);
    assert_eq!(stats.recently_dead_tuples, 500);
    assert_eq!(stats.pages_truncated, 0);
    assert_eq!(
        rows_in(&old, t),
        before,
        "the old snapshot's view is intact"
    );
    old.commit().unwrap();
    let stats = db.vacuum(t).unwrap();
    assert_eq!(stats.dead_tuples_removed, 500);
    assert!(stats.pages_truncated > 0);
}

#[test]
fn all_visible_pages_are_skipped_until_changed() {
    let (vfs, db) = new_db(3, Config::default());
    let (t, tids) = filled(&db, 1_000);
    let first = db.vacuum(t).unwrap();
    assert_eq!(first.pages_set_all_visible, first.pages);
    let second = db.vacuum(t).unwrap();
    assert_eq!(second.pages_skipped_all_visible, second.pages);
    assert_eq!(second.pages_scanned, 0);
    // One update: its page (and the new version's) is scanned again.
    let tx = db.begin(ReadCommitted).unwrap();
    tx.update(
        t,
        tids[500],
        &[Value::Int(500), Value::Int(1), Value::Text(String::new())],
    )
    .unwrap();
    tx.commit().unwrap();
    let third = db.vacuum(t).unwrap();
    assert!(
        (1..=2).contains(&third.pages_scanned),
        "{} scanned",
        third.pages_scanned
    );
    // The visibility map survives a crash (set again by redo, never left set wrongly).
    db.wal().flush(db.wal().insert_lsn()).unwrap();
    power_loss(db, &vfs, true);
    let db = open_db(&vfs, Config::default());
    let after = db.vacuum(t).unwrap();
    assert_eq!(after.dead_tuples_removed, 0);
    assert_eq!(committed(&db, t).len(), 1_000);
}

#[test]
fn freed_space_is_reused_and_the_table_stops_growing() {
    let (_vfs, db) = new_db(4, Config::default());
    let (t, mut tids) = filled(&db, 1_000);
    let rel = rel_of(&db, t);
    let mut rng = SplitMix64::new(4);
    let mut sizes = Vec::new();
    for round in 0..6 {
        // Rewrite every row with a different length: not HOT-able in place, new versions
        // spread over the table.
        let tx = db.begin(ReadCommitted).unwrap();
        for tid in &mut tids {
            let pad = "y".repeat((rng.next() % 150) as usize);
            let Changed::Done(new, _) = tx
                .update_with(t, *tid, |row| {
                    Some(vec![
                        row[0].clone(),
                        Value::Int(round),
                        Value::Text(pad.clone()),
                    ])
                })
                .unwrap()
            else {
                panic!("skipped")
            };
            *tid = new;
        }
        tx.commit().unwrap();
        db.vacuum(t).unwrap();
        sizes.push(db.smgr().nblocks(rel, Fork::Main).unwrap());
    }
    // After the first rounds the table reuses freed space instead of growing.
    assert!(
        sizes[5] <= sizes[1] + 2,
        "the table kept growing: {sizes:?}"
    );
    let tx = db.begin(ReadCommitted).unwrap();
    let all = rows_in(&tx, t);
    assert_eq!(all.len(), 1_000);
    assert!(all.iter().all(|&(_, v)| v == 5));
    tx.commit().unwrap();
}

#[test]
fn a_small_budget_means_several_index_passes() {
    let config = Config {
        dead_tids: DeadTidsMode::Array,
        maintenance_work_mem_bytes: 1 << 20, // 174,762 six-byte TIDs
        shared_buffers_bytes: 64 << 20,
        ..Config::default()
    };
    let (_vfs, db) = new_db(5, config);
    let tx = db.begin(ReadCommitted).unwrap();
    let t = tx
        .create_table("t", &[Column::new("id", Type::Int)])
        .unwrap();
    for i in 0..400_000 {
        tx.insert(t, &[Value::Int(i)]).unwrap();
    }
    tx.commit().unwrap();
    delete_all(&db, t);
    let stats = db.vacuum(t).unwrap();
    assert_eq!(stats.dead_tuples_removed, 400_000);
    assert_eq!(stats.index_passes, 3, "{stats:?}");
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(tx.scan(t).unwrap().count(), 0);
    tx.commit().unwrap();
}

#[test]
fn snapshots_see_the_same_rows_before_and_after_vacuum() {
    let (_vfs, db) = new_db(6, Config::default());
    let (t, mut tids) = filled(&db, 300);
    let mut rng = SplitMix64::new(6);
    let mut snapshots: Vec<(Transaction, Vec<(i64, i64)>)> = Vec::new();
    for round in 0..12 {
        let tx = db.begin(ReadCommitted).unwrap();
        for _ in 0..60 {
            let i = (rng.next() % tids.len() as u64) as usize;
            match rng.next() % 3 {
                0 => {
                    let _ = tx.delete(t, tids[i]).unwrap();
                }
                _ => {
                    if let Changed::Done(new, _) = tx
                        .update_with(t, tids[i], |row| {
                            Some(vec![row[0].clone(), Value::Int(round), row[2].clone()])
                        })
                        .unwrap()
                    {
                        tids[i] = new;
                    }
                }
            }
        }
        if rng.next().is_multiple_of(4) {
            tx.rollback().unwrap();
        } else {
            tx.commit().unwrap();
        }
        if rng.next().is_multiple_of(3) {
            let snap = db.begin(RepeatableRead).unwrap();
            let seen = rows_in(&snap, t);
            snapshots.push((snap, seen));
        }
        db.vacuum(t).unwrap();
        for (snap, seen) in &snapshots {
            assert_eq!(
                &rows_in(snap, t),
                seen,
                "round {round}: vacuum removed a visible row"
            );
        }
        if rng.next().is_multiple_of(3) && !snapshots.is_empty() {
            let (snap, _) = snapshots.remove(0);
            snap.commit().unwrap();
        }
    }
}

#[test]
fn autovacuum_vacuums_a_table_past_its_threshold_and_only_then() {
    let config = Config {
        autovacuum_naptime_ms: 20,
        autovacuum_vacuum_threshold: 100,
        autovacuum_vacuum_scale_factor: 0.0,
        ..Config::default()
    };
    let (_vfs, db) = new_db(7, config);
    let (t, tids) = filled(&db, 300);
    let rel = rel_of(&db, t);
    // 50 dead tuples: below the threshold.
    let tx = db.begin(ReadCommitted).unwrap();
    for tid in &tids[..50] {
        tx.delete(t, *tid).unwrap();
    }
    tx.commit().unwrap();
    let stats = db.table_stats(t).unwrap();
    assert_eq!((stats.live_tuples, stats.dead_tuples), (250, 50));
    // An aborted transaction's inserts are dead tuples too: 60 more.
    let tx = db.begin(ReadCommitted).unwrap();
    for i in 0..60 {
        tx.insert(
            t,
            &[
                Value::Int(1000 + i),
                Value::Int(0),
                Value::Text(String::new()),
            ],
        )
        .unwrap();
    }
    tx.rollback().unwrap();
    assert_eq!(db.table_stats(t).unwrap().dead_tuples, 110);
    // The worker naps 20 ms.
    wait_for("autovacuum", || {
        db.table_stats(t).unwrap().autovacuum_count > 0
    });
    let stats = db.table_stats(t).unwrap();
    assert_eq!((stats.live_tuples, stats.dead_tuples), (250, 0));
    assert_eq!(stats.vacuum_count, 0);
    assert_eq!(committed(&db, t).len(), 250);
    assert!(db.smgr().nblocks(rel, Fork::Main).unwrap() > 0);
    db.close().unwrap();
}

#[test]
fn autovacuum_off_never_vacuums() {
    let config = Config {
        autovacuum: false,
        autovacuum_naptime_ms: 1,
        autovacuum_vacuum_threshold: 0,
        ..Config::default()
    };
    let (_vfs, db) = new_db(8, config);
    let (t, _) = filled(&db, 100);
    delete_all(&db, t);
    // Far longer than a nap: nothing may happen.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let stats = db.table_stats(t).unwrap();
    assert_eq!((stats.dead_tuples, stats.autovacuum_count), (100, 0));
    db.close().unwrap();
}
