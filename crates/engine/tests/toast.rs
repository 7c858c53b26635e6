//! TOAST: values larger than a page are compressed and moved out of line into the table's
//! TOAST relation, read back whole, kept by updates that leave them unchanged, deleted with
//! the row version that held them (and vacuumed), dropped with the table, and recovered
//! after a power loss.

mod common;

use common::{committing, crash, exists, file_of, new_db, open_db, rel_of};
use quire_engine::rng::SplitMix64;
use quire_engine::{
    Changed, Column, Database, Fork, IsolationLevel, Numeric, RelFileLocator, TableId, Transaction,
    Type, Value,
};

fn columns() -> Vec<Column> {
    vec![
        Column::new("id", Type::Int),
        Column::new("t", Type::Text),
        Column::new("b", Type::Bytea),
        Column::new("n", Type::Int),
    ]
}

/// `len` random letters (lz4 gains little on them), seeded by `seed`.
fn random_text(seed: u64, len: usize) -> String {
    let mut r = SplitMix64::new(seed);
    (0..len)
        .map(|_| char::from(b'a' + (r.next() % 26) as u8))
        .collect()
}

fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut r = SplitMix64::new(seed);
    (0..len).map(|_| r.next() as u8).collect()
}

fn row(id: i64, t: &str, b: &[u8]) -> Vec<Value> {
    vec![
        Value::Int(id),
        Value::Text(t.into()),
        Value::Bytea(b.to_vec()),
        Value::Int(0),
    ]
}

fn toast_blocks(db: &Database, rel: RelFileLocator) -> u32 {
    db.smgr().nblocks(rel.toast(), Fork::Main).unwrap_or(0)
}

fn rows_of(tx: &Transaction, t: TableId) -> Vec<Vec<Value>> {
    let mut rows: Vec<Vec<Value>> = tx.scan(t).unwrap().map(|r| r.unwrap().1).collect();
    rows.sort_by_key(|r| r[0].as_int());
    rows
}

/// The values of every kind and size come back as they went in: small ones in line,
/// compressible ones compressed in line, large ones out of line (a megabyte, multi-byte
/// characters across chunk boundaries, and a large numeric).
#[test]
fn values_of_every_size_come_back_whole() {
    let (_vfs, db) = new_db(1, common::config());
    let wide: String = "é€𝄞a".repeat(60_000);
    let cases: Vec<(String, Vec<u8>)> = vec![
        (String::new(), Vec::new()),
        ("x".repeat(2_000), vec![7; 2_000]),
        ("abc".repeat(40_000), vec![1; 300_000]),
        (random_text(1, 9_000), random_bytes(2, 9_000)),
        (random_text(3, 200_000), random_bytes(4, 1_000_000)),
        (wide, random_bytes(5, 7_999)),
    ];
    let t = committing(&db, |tx| {
        let t = tx.create_table("t", &columns()).unwrap();
        for (i, (s, b)) in (0..).zip(&cases) {
            tx.insert(t, &row(i, s, b)).unwrap();
        }
        t
    });
    let rel = rel_of(&db, t);
    assert!(toast_blocks(&db, rel) > 100, "a megabyte went out of line");
    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
    let rows = rows_of(&tx, t);
    assert_eq!(rows.len(), cases.len());
    for (r, (s, b)) in rows.iter().zip(&cases) {
        assert!(r[1] == Value::Text(s.clone()), "text of row {:?}", r[0]);
        assert!(r[2] == Value::Bytea(b.clone()), "bytea of row {:?}", r[0]);
    }
    tx.commit().unwrap();
    // A numeric of 80,000 digits is toasted too.
    let digits: Vec<u8> = (0..80_000).map(|i| (i % 10) as u8).collect();
    let big = Numeric::from_digits(false, &digits, 0).unwrap();
    let n = committing(&db, |tx| {
        let n = tx
            .create_table("n", &[Column::new("v", Type::Numeric)])
            .unwrap();
        tx.insert(n, &[Value::Numeric(big.clone())]).unwrap();
        n
    });
    committing(&db, |tx| {
        assert_eq!(rows_of(tx, n), vec![vec![Value::Numeric(big.clone())]]);
    });
}

/// An update that leaves a large value alone writes no chunk; one that changes it writes
/// new chunks and deletes the old ones, which vacuum then frees for reuse, so the TOAST
/// relation stops growing.
#[test]
fn updates_keep_unchanged_values_and_vacuum_reclaims_replaced_ones() {
    let (_vfs, db) = new_db(2, common::config());
    let big = random_text(7, 100_000);
    let t = committing(&db, |tx| {
        let t = tx.create_table("t", &columns()).unwrap();
        tx.insert(t, &row(1, &big, b"")).unwrap();
        t
    });
    let rel = rel_of(&db, t);
    let before = toast_blocks(&db, rel);
    for i in 1..=20 {
        committing(&db, |tx| {
            let (tid, _) = tx.scan(t).unwrap().next().unwrap().unwrap();
            let changed = tx
                .update_with(t, tid, |r| {
                    let mut r = r.clone();
                    r[3] = Value::Int(i);
                    Some(r)
                })
                .unwrap();
            assert!(matches!(changed, Changed::Done(..)));
        });
    }
    assert_eq!(
        toast_blocks(&db, rel),
        before,
        "unchanged values were not written again"
    );
    // Changing the value: each round writes a new copy; vacuum frees the old ones.
    for i in 0..30 {
        committing(&db, |tx| {
            let (tid, _) = tx.scan(t).unwrap().next().unwrap().unwrap();
            tx.update(t, tid, &row(1, &random_text(100 + i, 100_000), b""))
                .unwrap();
        });
        db.vacuum(t).unwrap();
    }
    let after = toast_blocks(&db, rel);
    assert!(
        after <= 3 * before,
        "the TOAST relation grew from {before} to {after} blocks"
    );
    committing(&db, |tx| {
        let rows = rows_of(tx, t);
        assert!(rows[0][1] == Value::Text(random_text(129, 100_000)));
    });
    // Deleted and vacuumed: every chunk is gone.
    committing(&db, |tx| {
        let (tid, _) = tx.scan(t).unwrap().next().unwrap().unwrap();
        tx.delete(t, tid).unwrap();
    });
    let stats = db.vacuum(t).unwrap();
    let toast = stats
        .toast
        .expect("the TOAST relation is vacuumed with its table");
    assert_eq!(toast.live_tuples, 0, "{toast:?}");
}

/// Chunks of an aborted insert or of a rolled-back savepoint are dead: vacuum removes them.
/// A TOAST relation created by a transaction that created its table goes with it at abort.
#[test]
fn aborted_values_are_vacuumed_and_aborted_tables_leave_no_toast_file() {
    let (vfs, db) = new_db(3, common::config());
    let t = committing(&db, |tx| tx.create_table("t", &columns()).unwrap());
    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
    tx.insert(t, &row(1, &random_text(1, 50_000), b"")).unwrap();
    tx.savepoint("s").unwrap();
    tx.insert(t, &row(2, &random_text(2, 50_000), b"")).unwrap();
    tx.rollback_to_savepoint("s").unwrap();
    tx.insert(t, &row(3, &random_text(3, 50_000), b"")).unwrap();
    tx.rollback().unwrap();
    let stats = db.vacuum(t).unwrap();
    let toast = stats.toast.expect("a TOAST relation");
    assert_eq!(toast.live_tuples, 0, "{toast:?}");
    assert!(toast.dead_tuples_removed > 0, "{toast:?}");

    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
    let u = tx.create_table("u", &columns()).unwrap();
    tx.insert(u, &row(1, &random_text(4, 50_000), b"")).unwrap();
    let rel = tx.table_def(u).unwrap().rel;
    assert!(exists(&vfs, &file_of(&db, rel.toast())));
    tx.rollback().unwrap();
    assert!(
        !exists(&vfs, &file_of(&db, rel.toast())),
        "dropped with its table"
    );
}

/// TRUNCATE and DROP TABLE remove the TOAST relation with the table's.
#[test]
fn truncate_and_drop_remove_the_toast_relation() {
    let (vfs, db) = new_db(4, common::config());
    let t = committing(&db, |tx| {
        let t = tx.create_table("t", &columns()).unwrap();
        tx.insert(t, &row(1, &random_text(1, 50_000), b"")).unwrap();
        t
    });
    let old = rel_of(&db, t);
    committing(&db, |tx| tx.truncate(t).unwrap());
    assert!(!exists(&vfs, &file_of(&db, old.toast())), "truncated away");
    committing(&db, |tx| {
        tx.insert(t, &row(2, &random_text(2, 50_000), b"")).unwrap();
        assert_eq!(rows_of(tx, t).len(), 1);
    });
    let new = rel_of(&db, t);
    assert!(exists(&vfs, &file_of(&db, new.toast())));
    committing(&db, |tx| tx.drop_table(t).unwrap());
    assert!(!exists(&vfs, &file_of(&db, new.toast())), "dropped");
}

/// A unique index over a table with large values: inserts probe the keys (reading only
/// the key's columns), and duplicates are refused.
#[test]
fn unique_indexes_work_beside_toasted_columns() {
    let (_vfs, db) = new_db(5, common::config());
    let t = committing(&db, |tx| {
        let t = tx.create_table("t", &columns()).unwrap();
        tx.create_index("t_pkey", t, &["id"], true).unwrap();
        for i in 0..10 {
            tx.insert(t, &row(i, &random_text(i as u64, 30_000), b""))
                .unwrap();
        }
        t
    });
    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
    let err = tx.insert(t, &row(3, "dup", b"")).unwrap_err();
    assert_eq!(err.sqlstate().code(), "23505");
    tx.rollback().unwrap();
    committing(&db, |tx| assert_eq!(tx.verify_indexes(t).unwrap(), 10));
}

/// Committed large values survive a power loss; an uncommitted one does not.
#[test]
fn toasted_values_survive_power_loss() {
    let (vfs, db) = new_db(6, common::config());
    let t = committing(&db, |tx| {
        let t = tx.create_table("t", &columns()).unwrap();
        for i in 0..5 {
            tx.insert(
                t,
                &row(i, &random_text(i as u64, 40_000), &random_bytes(9, 20_000)),
            )
            .unwrap();
        }
        t
    });
    db.checkpoint().unwrap();
    committing(&db, |tx| {
        tx.insert(t, &row(5, &random_text(5, 40_000), b"")).unwrap();
        let (tid, _) = tx.scan(t).unwrap().next().unwrap().unwrap();
        tx.delete(t, tid).unwrap();
    });
    let open = db.begin(IsolationLevel::ReadCommitted).unwrap();
    open.insert(t, &row(99, &random_text(99, 40_000), b""))
        .unwrap();
    open.vanish();
    crash(db, &vfs);
    let db = open_db(&vfs, common::config());
    committing(&db, |tx| {
        let rows = rows_of(tx, t);
        let ids: Vec<i64> = rows.iter().filter_map(|r| r[0].as_int()).collect();
        assert_eq!(ids, vec![1, 2, 3, 4, 5]);
        for r in &rows {
            let i = r[0].as_int().unwrap();
            assert!(
                r[1] == Value::Text(random_text(i as u64, 40_000)),
                "row {i}"
            );
        }
    });
}

/// The storage strategies (SET STORAGE) decide, per column, what TOAST may do: EXTERNAL
/// moves a value out of line uncompressed, EXTENDED compresses it first, MAIN keeps it in
/// line unless the row would not fit a page, PLAIN never moves it (54000 beyond a page).
/// The choice is in the catalog and survives a restart.
#[test]
fn storage_strategies_decide_compression_and_placement() {
    use quire_engine::Storage;
    let (vfs, db) = new_db(7, common::config());
    let table = |name: &str, storage: Storage| {
        committing(&db, |tx| {
            let t = tx.create_table(name, &columns()).unwrap();
            tx.set_storage(t, 1, storage).unwrap();
            t
        })
    };
    let compressible = "abc".repeat(40_000);
    let (ext, extd) = (
        table("ext", Storage::External),
        table("extd", Storage::Extended),
    );
    committing(&db, |tx| {
        tx.insert(ext, &row(1, &compressible, b"")).unwrap();
        tx.insert(extd, &row(1, &compressible, b"")).unwrap();
    });
    assert!(
        toast_blocks(&db, rel_of(&db, ext)) >= 14,
        "out of line, uncompressed"
    );
    assert_eq!(
        toast_blocks(&db, rel_of(&db, extd)),
        0,
        "compressed in line"
    );
    let main = table("main", Storage::Main);
    committing(&db, |tx| {
        tx.insert(main, &row(1, &random_text(1, 3_000), b""))
            .unwrap();
    });
    assert_eq!(
        toast_blocks(&db, rel_of(&db, main)),
        0,
        "in line: the row fits a page"
    );
    committing(&db, |tx| {
        tx.insert(main, &row(2, &random_text(2, 30_000), b""))
            .unwrap();
    });
    assert!(
        toast_blocks(&db, rel_of(&db, main)) > 0,
        "out of line: it would not fit"
    );
    let plain = table("plain", Storage::Plain);
    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
    tx.insert(plain, &row(1, &random_text(3, 7_000), b""))
        .unwrap();
    let err = tx.insert(plain, &row(2, &compressible, b"")).unwrap_err();
    assert_eq!(err.sqlstate().code(), "54000", "{err}");
    tx.rollback().unwrap();
    drop(db);
    let db = open_db(&vfs, common::config());
    committing(&db, |tx| {
        let storages: Vec<Storage> = [ext, extd, main, plain]
            .iter()
            .map(|&t| tx.table_def(t).unwrap().columns[1].storage)
            .collect();
        let want = [
            Storage::External,
            Storage::Extended,
            Storage::Main,
            Storage::Plain,
        ];
        assert_eq!(storages, want);
        assert!(rows_of(tx, ext)[0][1] == Value::Text(compressible.clone()));
        assert_eq!(rows_of(tx, main).len(), 2);
    });
}
