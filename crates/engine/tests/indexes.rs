//! Indexes through the transaction API: lookups and ranges agree with sequential scans under
//! every snapshot, unique indexes refuse duplicates (and wait for a conflicting inserter),
//! HOT updates add no entries, CREATE INDEX serves old snapshots, vacuum removes dead entries,
//! TRUNCATE and DROP carry indexes along, crashes lose nothing — and after all of it, every
//! version has its entries and every index is sound (`verify_indexes`).

mod common;

use std::ops::Bound;

use common::{blocks_until, new_db, open_db, power_loss};
use quire_engine::rng::SplitMix64;
use quire_engine::{
    Changed, Column, Config, Database, IsolationLevel::ReadCommitted,
    IsolationLevel::RepeatableRead, TableId, Tid, Transaction, Type, Value,
};

fn config() -> Config {
    Config {
        deadlock_timeout_ms: 50,
        autovacuum: false,
        ..Config::default()
    }
}

fn columns() -> Vec<Column> {
    vec![
        Column::new("id", Type::Int),
        Column::new("name", Type::Text),
        Column::new("v", Type::Int),
    ]
}

fn row(id: i64, v: i64) -> Vec<Value> {
    vec![
        Value::Int(id),
        Value::Text(format!("name-{id}")),
        Value::Int(v),
    ]
}

fn int(i: i64) -> Value {
    Value::Int(i)
}

/// The (id, v) pairs an index scan on `index` between ids `lo..=hi` returns, in order.
fn by_index(tx: &Transaction, index: quire_engine::IndexId, lo: i64, hi: i64) -> Vec<(i64, i64)> {
    tx.index_scan(
        index,
        Bound::Included(&[int(lo)]),
        Bound::Included(&[int(hi)]),
    )
    .unwrap()
    .map(|r| {
        let row = r.unwrap().1;
        (row[0].as_int().unwrap(), row[2].as_int().unwrap())
    })
    .collect()
}

/// The same through a sequential scan.
fn by_scan(tx: &Transaction, t: TableId, lo: i64, hi: i64) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = tx
        .scan(t)
        .unwrap()
        .map(|r| {
            let row = r.unwrap().1;
            (row[0].as_int().unwrap(), row[2].as_int().unwrap())
        })
        .filter(|&(id, _)| (lo..=hi).contains(&id))
        .collect();
    v.sort_unstable();
    v
}

/// A table of ids `0..n` with a unique index on id.
fn table_with_pk(db: &Database, n: i64) -> (TableId, quire_engine::IndexId, Vec<Tid>) {
    let tx = db.begin(ReadCommitted).unwrap();
    let t = tx.create_table("t", &columns()).unwrap();
    let pk = tx.create_index("t_pkey", t, &["id"], true).unwrap();
    let tids = (0..n).map(|i| tx.insert(t, &row(i, 0)).unwrap()).collect();
    tx.commit().unwrap();
    (t, pk, tids)
}

#[test]
fn lookups_and_ranges_agree_with_sequential_scans() {
    let (_vfs, db) = new_db(1, config());
    let (t, pk, _) = table_with_pk(&db, 5_000);
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(by_index(&tx, pk, 42, 42), vec![(42, 0)]);
    assert_eq!(
        by_index(&tx, pk, 4_990, 6_000),
        by_scan(&tx, t, 4_990, 6_000)
    );
    assert_eq!(
        by_index(&tx, pk, -5, 3),
        vec![(0, 0), (1, 0), (2, 0), (3, 0)]
    );
    assert!(by_index(&tx, pk, 7_000, 8_000).is_empty());
    let all: Vec<_> = tx
        .index_scan(pk, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .collect();
    assert_eq!(all.len(), 5_000);
    assert_eq!(tx.index("t_pkey").unwrap(), pk);
    assert_eq!(tx.verify_indexes(t).unwrap(), 5_000);
    tx.commit().unwrap();
}

#[test]
fn a_unique_index_refuses_duplicates_and_waits_for_an_undecided_one() {
    let (_vfs, db) = new_db(2, config());
    let (t, _, _) = table_with_pk(&db, 10);
    let tx = db.begin(ReadCommitted).unwrap();
    let err = tx.insert(t, &row(3, 1)).unwrap_err();
    assert_eq!(err.sqlstate(), "23505", "{err}");
    assert!(err.to_string().contains("t_pkey"), "{err}");
    tx.rollback().unwrap();
    // A duplicate of a deleted row is fine once the delete committed.
    let tx = db.begin(ReadCommitted).unwrap();
    let (tid, _) = tx
        .scan(t)
        .unwrap()
        .map(|r| r.unwrap())
        .find(|(_, r)| r[0] == int(4))
        .unwrap();
    tx.delete(t, tid).unwrap();
    tx.insert(t, &row(4, 9)).unwrap();
    tx.commit().unwrap();
    // An undecided inserter of the same key makes the second wait, then its fate decides.
    for first_commits in [true, false] {
        let t1 = db.begin(ReadCommitted).unwrap();
        let key = if first_commits { 100 } else { 101 };
        t1.insert(t, &row(key, 1)).unwrap();
        let t2 = db.begin(ReadCommitted).unwrap();
        let (t2, r) = blocks_until(
            &db,
            t2,
            |t2| t2.insert(t, &row(key, 2)),
            || {
                if first_commits {
                    t1.commit().unwrap();
                } else {
                    t1.rollback().unwrap();
                }
            },
        );
        if first_commits {
            assert_eq!(r.unwrap_err().sqlstate(), "23505");
            t2.rollback().unwrap();
        } else {
            r.unwrap();
            t2.commit().unwrap();
        }
    }
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(tx.verify_indexes(t).unwrap(), 12);
    tx.commit().unwrap();
}

#[test]
fn updates_keep_the_index_right_hot_or_not() {
    let (_vfs, db) = new_db(3, config());
    let tx = db.begin(ReadCommitted).unwrap();
    let t = tx.create_table("t", &columns()).unwrap();
    let by_v = tx.create_index("t_v", t, &["v"], false).unwrap();
    let pk = tx.create_index("t_pkey", t, &["id"], true).unwrap();
    let tid = tx.insert(t, &row(1, 10)).unwrap();
    tx.commit().unwrap();
    // Only the name changes: HOT, the new version on the same page, reached from the root.
    let tx = db.begin(ReadCommitted).unwrap();
    let Changed::Done(hot, _) = tx
        .update_with(t, tid, |r| {
            Some(vec![
                r[0].clone(),
                Value::Text("renamed".into()),
                r[2].clone(),
            ])
        })
        .unwrap()
    else {
        panic!("skipped")
    };
    assert_eq!(hot.block, tid.block);
    // An indexed column changes: the old key finds nothing any more, the new one the row.
    let Changed::Done(moved, _) = tx
        .update_with(t, hot, |r| Some(vec![r[0].clone(), r[1].clone(), int(20)]))
        .unwrap()
    else {
        panic!("skipped")
    };
    tx.commit().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    assert!(by_index(&tx, by_v, 10, 10).is_empty());
    assert_eq!(by_index(&tx, by_v, 20, 20), vec![(1, 20)]);
    assert_eq!(by_index(&tx, pk, 1, 1), vec![(1, 20)]);
    let found: Vec<Tid> = tx
        .index_scan(pk, Bound::Included(&[int(1)]), Bound::Included(&[int(1)]))
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(found, vec![moved]);
    // Only the last version is left for any snapshot: one row, checked in two indexes.
    assert_eq!(tx.verify_indexes(t).unwrap(), 2);
    tx.commit().unwrap();
}

#[test]
fn an_index_created_later_serves_an_older_snapshot() {
    let (_vfs, db) = new_db(4, config());
    let tx = db.begin(ReadCommitted).unwrap();
    let t = tx.create_table("t", &columns()).unwrap();
    let tids: Vec<Tid> = (0..50).map(|i| tx.insert(t, &row(i, i)).unwrap()).collect();
    tx.commit().unwrap();
    let old = db.begin(RepeatableRead).unwrap();
    assert_eq!(by_scan(&old, t, 0, 100).len(), 50); // takes its snapshot
                                                    // HOT updates change v (no index on it yet), then an index on v is built.
    let tx = db.begin(ReadCommitted).unwrap();
    for tid in &tids {
        tx.update_with(t, *tid, |r| {
            Some(vec![r[0].clone(), r[1].clone(), int(r[2].as_int()? + 1000)])
        })
        .unwrap();
    }
    tx.commit().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    let by_v = tx.create_index("t_v", t, &["v"], false).unwrap();
    tx.commit().unwrap();
    // The old snapshot finds its old values through the new index, each row once.
    let seen: Vec<(i64, i64)> = old
        .index_scan(by_v, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| {
            let row = r.unwrap().1;
            (row[0].as_int().unwrap(), row[2].as_int().unwrap())
        })
        .collect();
    assert_eq!(seen, (0..50).map(|i| (i, i)).collect::<Vec<_>>());
    old.commit().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    let now: Vec<i64> = tx
        .index_scan(by_v, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap().1[2].as_int().unwrap())
        .collect();
    assert_eq!(now, (1000..1050).collect::<Vec<_>>());
    tx.commit().unwrap();
    // A unique index over duplicate live values is refused.
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &row(7, 1007)).unwrap();
    let err = tx.create_index("t_v_unique", t, &["v"], true).unwrap_err();
    assert_eq!(err.sqlstate(), "23505", "{err}");
    tx.rollback().unwrap();
}

#[test]
fn vacuum_removes_dead_entries_and_truncate_and_drop_carry_indexes() {
    let (_vfs, db) = new_db(5, config());
    let (t, pk, tids) = table_with_pk(&db, 3_000);
    let tx = db.begin(ReadCommitted).unwrap();
    for tid in &tids[..2_000] {
        tx.delete(t, *tid).unwrap();
    }
    tx.commit().unwrap();
    let stats = db.vacuum(t).unwrap();
    assert_eq!(stats.dead_tuples_removed, 2_000);
    assert_eq!(stats.index_entries_removed, 2_000);
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(tx.verify_indexes(t).unwrap(), 1_000);
    assert_eq!(by_index(&tx, pk, 0, 5_000), by_scan(&tx, t, 0, 5_000));
    // Freed slots are reused by new rows, which the index finds (no stale entry misleads).
    for i in 0..2_000 {
        tx.insert(t, &row(10_000 + i, 1)).unwrap();
    }
    assert_eq!(by_index(&tx, pk, 0, 20_000).len(), 3_000);
    tx.commit().unwrap();
    // TRUNCATE: the index is emptied too; rolled back, it is whole again.
    let tx = db.begin(ReadCommitted).unwrap();
    tx.truncate(t).unwrap();
    assert!(by_index(&tx, pk, 0, 20_000).is_empty());
    tx.insert(t, &row(1, 1)).unwrap();
    assert_eq!(by_index(&tx, pk, 0, 20_000), vec![(1, 1)]);
    tx.rollback().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(by_index(&tx, pk, 0, 20_000).len(), 3_000);
    tx.truncate(t).unwrap();
    tx.commit().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    assert!(by_index(&tx, pk, 0, 20_000).is_empty());
    tx.insert(t, &row(5, 5)).unwrap();
    assert_eq!(tx.insert(t, &row(5, 6)).unwrap_err().sqlstate(), "23505");
    tx.rollback().unwrap();
    // DROP TABLE takes its index with it.
    let tx = db.begin(ReadCommitted).unwrap();
    tx.drop_table(t).unwrap();
    tx.commit().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(tx.index("t_pkey").unwrap_err().sqlstate(), "42P01");
    tx.rollback().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    let t2 = tx.create_table("t", &columns()).unwrap();
    tx.create_index("t_pkey", t2, &["id"], true).unwrap();
    tx.commit().unwrap();
}

#[test]
fn indexes_survive_crashes_whole() {
    let (vfs, db) = new_db(6, config());
    let (t, pk, mut tids) = table_with_pk(&db, 2_000);
    db.checkpointer().checkpoint().unwrap();
    let mut rng = SplitMix64::new(6);
    let tx = db.begin(ReadCommitted).unwrap();
    for tid in &mut tids {
        if rng.next().is_multiple_of(3) {
            if let Changed::Done(new, _) = tx
                .update_with(t, *tid, |r| {
                    Some(vec![
                        int(r[0].as_int()? + 100_000),
                        r[1].clone(),
                        r[2].clone(),
                    ])
                })
                .unwrap()
            {
                *tid = new;
            }
        }
    }
    tx.commit().unwrap();
    db.buffer_pool().flush_all().unwrap();
    power_loss(db, &vfs, true);
    let db = open_db(&vfs, config());
    let tx = db.begin(ReadCommitted).unwrap();
    assert!(tx.verify_indexes(t).unwrap() >= 2_000);
    assert_eq!(
        by_index(&tx, pk, -1, 1_000_000),
        by_scan(&tx, t, -1, 1_000_000)
    );
    assert_eq!(by_scan(&tx, t, -1, 1_000_000).len(), 2_000);
    tx.commit().unwrap();
}

/// Writers on disjoint key ranges (inserts, updates of the key and of other columns, deletes)
/// with vacuums and readers, concurrently; then the index equals the table, and is sound.
#[test]
fn concurrent_writers_vacuum_and_readers_keep_index_and_table_in_step() {
    const WRITERS: i64 = 3;
    const OPS: usize = 400;
    let (_vfs, db) = new_db(7, config());
    let (t, pk, _) = table_with_pk(&db, 0);
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let db = &db;
            s.spawn(move || {
                let mut rng = SplitMix64::new(w as u64 + 1);
                let base = w * 1_000_000;
                let mut mine: Vec<(i64, Tid)> = Vec::new();
                for op in 0..OPS {
                    let tx = db.begin(ReadCommitted).unwrap();
                    match rng.next() % 4 {
                        0 | 1 => {
                            let id = base + i64::try_from(op).expect("a few hundred ops");
                            mine.push((id, tx.insert(t, &row(id, 0)).unwrap()));
                        }
                        2 if !mine.is_empty() => {
                            let i = (rng.next() % mine.len() as u64) as usize;
                            let (id, tid) = mine[i];
                            // The key stays or moves, within this writer's own range.
                            let new_id = match (rng.next() % 2, id < base + 500_000) {
                                (0, _) => id,
                                (_, true) => id + 500_000,
                                (_, false) => id - 500_000,
                            };
                            if let Changed::Done(n, _) = tx
                                .update_with(t, tid, |r| {
                                    Some(vec![int(new_id), r[1].clone(), int(r[2].as_int()? + 1)])
                                })
                                .unwrap()
                            {
                                mine[i] = (new_id, n);
                            }
                        }
                        3 if !mine.is_empty() => {
                            let i = (rng.next() % mine.len() as u64) as usize;
                            tx.delete(t, mine.swap_remove(i).1).unwrap();
                        }
                        _ => {}
                    }
                    tx.commit().unwrap();
                }
            });
        }
        s.spawn(|| {
            for _ in 0..20 {
                db.vacuum(t).unwrap();
            }
        });
        s.spawn(|| {
            for _ in 0..40 {
                let tx = db.begin(RepeatableRead).unwrap();
                let a = by_index(&tx, pk, i64::MIN + 1, i64::MAX - 1);
                let b = by_scan(&tx, t, i64::MIN + 1, i64::MAX - 1);
                assert_eq!(a, b, "an index scan and a sequential scan disagree");
                tx.commit().unwrap();
            }
        });
    });
    db.vacuum(t).unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    tx.verify_indexes(t).unwrap();
    assert_eq!(
        by_index(&tx, pk, i64::MIN + 1, i64::MAX - 1),
        by_scan(&tx, t, i64::MIN + 1, i64::MAX - 1)
    );
    tx.commit().unwrap();
}

/// REINDEX builds an index again into a new file: it agrees with the table, serves the
/// transaction that rebuilt it, is undone whole by a rollback (the old file still serves),
/// refuses a duplicate key of a unique index (23505), and survives a power loss.
#[test]
fn reindex_rebuilds_into_a_new_file_undone_by_abort_and_kept_by_crashes() {
    let (vfs, db) = new_db(7, config());
    let (t, pk, tids) = table_with_pk(&db, 3_000);
    let file_of = |tx: &Transaction| tx.table_indexes(t).unwrap()[0].rel;
    let tx = db.begin(ReadCommitted).unwrap();
    let before = file_of(&tx);
    for tid in tids.iter().step_by(3) {
        tx.delete(t, *tid).unwrap();
    }
    tx.reindex(pk).unwrap();
    let rebuilt = file_of(&tx);
    assert_ne!(before, rebuilt, "a new file");
    assert_eq!(by_index(&tx, pk, 0, 5_000), by_scan(&tx, t, 0, 5_000));
    // Every version has its entry, the deleted ones too (old snapshots may still see them).
    assert_eq!(tx.verify_indexes(t).unwrap(), 3_000);
    tx.rollback().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(file_of(&tx), before, "rolled back: the old file again");
    assert_eq!(by_index(&tx, pk, 0, 5_000).len(), 3_000);
    tx.reindex(pk).unwrap();
    tx.insert(t, &row(9_999, 1)).unwrap();
    tx.commit().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(
        tx.insert(t, &row(9_999, 2)).unwrap_err().sqlstate(),
        "23505"
    );
    tx.rollback().unwrap();
    // A unique index over rows that share a key cannot be rebuilt.
    let tx = db.begin(ReadCommitted).unwrap();
    let v = tx.create_index("t_v", t, &["v"], false).unwrap();
    tx.reindex(v).unwrap();
    let err = tx.create_index("t_v_unique", t, &["v"], true).unwrap_err();
    assert_eq!(err.sqlstate(), "23505", "{err}");
    assert!(
        err.to_string().contains("could not create unique index"),
        "{err}"
    );
    tx.rollback().unwrap();
    db.buffer_pool().flush_all().unwrap();
    power_loss(db, &vfs, true);
    let db = open_db(&vfs, config());
    let tx = db.begin(ReadCommitted).unwrap();
    assert_ne!(file_of(&tx), before);
    assert!(tx.verify_indexes(t).unwrap() >= 3_001);
    assert_eq!(by_index(&tx, pk, -1, 100_000), by_scan(&tx, t, -1, 100_000));
    tx.commit().unwrap();
}
