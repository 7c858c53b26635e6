//! DDL and statement errors as a PostgreSQL user expects them, through the embedded API:
//!
//! - CREATE TABLE is transactional: rolled back, neither the table (42P01) nor its file is
//!   left; a duplicate name fails with 42P07, and a concurrent CREATE of the same name waits
//!   for the first to end (then fails if it committed, succeeds if it aborted);
//! - TRUNCATE gives the table a new relation file; at commit the old file, its buffers and
//!   its pending sync requests are gone; at rollback the old rows are back and the new file
//!   is gone; it waits for readers (ACCESS SHARE) to finish; DROP TABLE likewise, and a
//!   reader that waited for the dropped table gets 42P01;
//! - 200 tables truncated one transaction each come back after a crash and a clean restart:
//!   empty, with their catalog, and without a single old file;
//! - rows are checked: wrong arity or type 42804, too large even for TOAST 54000, before
//!   anything changes;
//! - an error aborts the transaction (25P02 until its end, and COMMIT rolls it back);
//! - `Database::close` is refused (25000) while a transaction is open;
//! - the definition caches (shared, and each thread's) never serve an uncommitted or a
//!   replaced definition, nor one of another database.
//!
//! Blocked statements run on their own thread; the test waits until the lock manager reports
//! the session waiting (bounded poll), never on a sleep.

mod common;

use std::collections::BTreeSet;

use common::{
    blocks_until, committed_ids, committing, config, crash, exists, file_of, ids_in, lookup_error,
    new_db, open_db, rel_of, try_open,
};
use quire_engine::heap::tuple::HEADER_BYTES;
use quire_engine::heap::MAX_TUPLE_BYTES;
use quire_engine::sync::SyncTarget;
use quire_engine::value::encoded_row_len;
use quire_engine::vfs::{SimVfs, Vfs};
use quire_engine::{
    Changed, Column, Database, IsolationLevel::*, LockMode, RelFileLocator, TableId, Type, Value,
};

fn columns() -> Vec<Column> {
    vec![
        Column::new("id", Type::Int),
        Column::new("note", Type::Text),
    ]
}

fn row(id: i64) -> Vec<Value> {
    vec![Value::Int(id), Value::Text(format!("row {id}"))]
}

/// Creates table `name` holding rows 1..=n and commits.
fn create_with_rows(db: &Database, name: &str, n: i64) -> TableId {
    committing(db, |tx| {
        let t = tx.create_table(name, &columns()).unwrap();
        for id in 1..=n {
            tx.insert(t, &row(id)).unwrap();
        }
        t
    })
}

// ---------------------------------------------------------------------------- definition cache

/// The columns of table `t` as a lookup by oid without a lock finds them (through the
/// definition cache kept across transactions, PostgreSQL's relcache).
fn columns_seen(tx: &quire_engine::Transaction, t: TableId) -> usize {
    match tx.relation(t).unwrap() {
        Some(quire_engine::Entry::Table(def)) => def.columns.len(),
        other => panic!("table {t} is {other:?}"),
    }
}

/// The definition cache serves only what a fresh lookup would: a transaction's uncommitted
/// ADD COLUMN reaches no other transaction through it, its own lookups see it, a rollback
/// leaves the old definition, and once committed everyone sees the new one.
#[test]
fn the_definition_cache_never_shows_an_uncommitted_definition() {
    let (_vfs, db) = new_db(1, config());
    let t = create_with_rows(&db, "cached", 3);
    let reader = db.begin(ReadCommitted).unwrap();
    assert_eq!(
        reader.table_def(t).unwrap().columns.len(),
        2,
        "fills the cache"
    );
    assert_eq!(columns_seen(&reader, t), 2);
    reader.commit().unwrap();

    let writer = db.begin(ReadCommitted).unwrap();
    writer
        .add_column(t, Column::new("extra", Type::Int))
        .unwrap();
    assert_eq!(columns_seen(&writer, t), 3, "its creator sees it");
    assert_eq!(writer.table_def(t).unwrap().columns.len(), 3);
    let other = db.begin(ReadCommitted).unwrap();
    for _ in 0..2 {
        assert_eq!(columns_seen(&other, t), 2, "uncommitted: not for others");
    }
    other.commit().unwrap();
    writer.rollback().unwrap();
    let after = db.begin(ReadCommitted).unwrap();
    assert_eq!(columns_seen(&after, t), 2, "rolled back");
    assert_eq!(after.table_def(t).unwrap().columns.len(), 2);
    after.commit().unwrap();

    committing(&db, |tx| {
        tx.add_column(t, Column::new("extra", Type::Int)).unwrap();
    });
    let after = db.begin(ReadCommitted).unwrap();
    assert_eq!(columns_seen(&after, t), 3, "committed: for everyone");
    assert_eq!(after.table_def(t).unwrap().columns.len(), 3);
    after.commit().unwrap();
}

/// Each thread keeps its own copies of the definitions it used (in front of the shared
/// cache): a change committed by another thread reaches it at once, and two databases used
/// from one thread, with the same oids and generations, never see each other's.
#[test]
fn a_thread_s_cached_definitions_follow_other_threads_and_stay_with_their_database() {
    let (_vfs, db) = new_db(1, config());
    let t = create_with_rows(&db, "cached", 3);
    let seen_by_a_thread = |db: &Database| {
        std::thread::scope(|s| {
            s.spawn(|| {
                let tx = db.begin(ReadCommitted).unwrap();
                let seen = (columns_seen(&tx, t), tx.table_def(t).unwrap().columns.len());
                tx.commit().unwrap();
                seen
            })
            .join()
            .unwrap()
        })
    };
    std::thread::scope(|s| {
        let (ask, asked) = std::sync::mpsc::channel::<()>();
        let (tell, told) = std::sync::mpsc::channel();
        let db = &db;
        let reader = s.spawn(move || {
            // The same thread looks twice: before and after the other thread's ADD COLUMN.
            for () in asked {
                let tx = db.begin(ReadCommitted).unwrap();
                tell.send((columns_seen(&tx, t), tx.table_def(t).unwrap().columns.len()))
                    .unwrap();
                tx.commit().unwrap();
            }
        });
        ask.send(()).unwrap();
        assert_eq!(told.recv().unwrap(), (2, 2), "fills the thread's cache");
        committing(db, |tx| {
            tx.add_column(t, Column::new("extra", Type::Int)).unwrap();
        });
        ask.send(()).unwrap();
        assert_eq!(
            told.recv().unwrap(),
            (3, 3),
            "another thread's commit reaches it"
        );
        drop(ask);
        reader.join().unwrap();
    });

    // A second database on this thread, made by the same DDL (the same oids, the same
    // generations) but for the name of the column added.
    let (_vfs2, other) = new_db(1, config());
    let t2 = create_with_rows(&other, "cached", 3);
    assert_eq!(t2, t, "the databases number their tables alike");
    committing(&other, |tx| {
        tx.add_column(t, Column::new("different", Type::Int))
            .unwrap();
    });
    let last_column = |db: &Database| {
        let tx = db.begin(ReadCommitted).unwrap();
        let Some(quire_engine::Entry::Table(def)) = tx.relation(t).unwrap() else {
            panic!("table {t} is gone");
        };
        tx.commit().unwrap();
        def.columns.last().map(|c| c.name.clone())
    };
    for _ in 0..2 {
        assert_eq!(last_column(&db).as_deref(), Some("extra"));
        assert_eq!(
            last_column(&other).as_deref(),
            Some("different"),
            "not the first database's definition"
        );
    }
    assert_eq!(seen_by_a_thread(&other), (3, 3));
    assert_eq!(seen_by_a_thread(&db), (3, 3));
}

// ---------------------------------------------------------------------------- CREATE

#[test]
fn a_rolled_back_create_table_leaves_no_table_and_no_file() {
    let (vfs, db) = new_db(1, config());
    let tx = db.begin(ReadCommitted).unwrap();
    let t = tx.create_table("ghost", &columns()).unwrap();
    tx.insert(t, &row(1)).unwrap();
    let rel = tx.table_def(t).unwrap().rel;
    assert_eq!(tx.table("ghost").unwrap(), t, "its creator sees it");
    assert_eq!(ids_in(&tx, t), vec![1]);
    assert!(exists(&vfs, &file_of(&db, rel)));
    // Others do not see it before commit.
    assert_eq!(lookup_error(&db, "ghost"), Some("42P01"));
    tx.rollback().unwrap();
    assert_eq!(lookup_error(&db, "ghost"), Some("42P01"));
    assert!(
        !exists(&vfs, &file_of(&db, rel)),
        "file of a rolled-back CREATE"
    );
    assert_eq!(db.buffer_pool().cached_buffers_of(rel), 0);
    // By its oid too.
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(tx.scan(t).err().unwrap().sqlstate(), "42P01");
    tx.rollback().unwrap();
    // And after a crash (the CREATE's WAL is redone, then its abort drops the file again).
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    assert_eq!(lookup_error(&db, "ghost"), Some("42P01"));
    assert!(!exists(&vfs, &file_of(&db, rel)));
    let tx = db.begin(ReadCommitted).unwrap();
    assert!(tx.tables().unwrap().is_empty());
    tx.commit().unwrap();
    db.close().unwrap();
}

#[test]
fn a_duplicate_table_name_fails_42p07() {
    let (_vfs, db) = new_db(2, config());
    let t = create_with_rows(&db, "dup", 2);
    let tx = db.begin(ReadCommitted).unwrap();
    let err = tx.create_table("dup", &columns()).unwrap_err();
    assert_eq!(err.sqlstate(), "42P07", "{err}");
    assert!(err.to_string().contains("\"dup\""), "{err}");
    tx.rollback().unwrap();
    // In one transaction: the second CREATE of a name fails too.
    let tx = db.begin(ReadCommitted).unwrap();
    tx.create_table("twice", &columns()).unwrap();
    assert_eq!(
        tx.create_table("twice", &columns()).unwrap_err().sqlstate(),
        "42P07"
    );
    tx.rollback().unwrap();
    // Once dropped (committed), the name is free again.
    let tx = db.begin(ReadCommitted).unwrap();
    tx.drop_table(t).unwrap();
    let t2 = tx.create_table("dup", &columns()).unwrap();
    assert_ne!(t2, t);
    tx.commit().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(tx.table("dup").unwrap(), t2);
    assert!(ids_in(&tx, t2).is_empty());
    assert_eq!(tx.tables().unwrap().len(), 1);
    tx.commit().unwrap();
    db.close().unwrap();
}

#[test]
fn find_table_answers_none_without_failing_the_transaction_and_table_fails_it() {
    let (_vfs, db) = new_db(3, config());
    let t = create_with_rows(&db, "here", 1);
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(tx.find_table("here").unwrap(), Some(t));
    assert_eq!(tx.find_table("nowhere").unwrap(), None);
    // The transaction goes on after a missing name (IF EXISTS needs that) ...
    assert_eq!(tx.table("here").unwrap(), t);
    // ... while `table` on a missing name is 42P01 and fails it, as in PostgreSQL.
    assert_eq!(tx.table("nowhere").unwrap_err().sqlstate(), "42P01");
    assert_eq!(tx.find_table("here").unwrap_err().sqlstate(), "25P02");
    tx.rollback().unwrap();
    db.close().unwrap();
}

#[test]
fn a_concurrent_create_of_the_same_name_waits_and_fails_if_the_first_commits() {
    let (_vfs, db) = new_db(3, config());
    let t1 = db.begin(ReadCommitted).unwrap();
    let first = t1.create_table("race", &columns()).unwrap();
    let t2 = db.begin(ReadCommitted).unwrap();
    let (t2, r) = blocks_until(
        &db,
        t2,
        |t2| t2.create_table("race", &columns()),
        || t1.commit().unwrap(),
    );
    assert_eq!(r.unwrap_err().sqlstate(), "42P07");
    t2.rollback().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(tx.table("race").unwrap(), first);
    assert_eq!(tx.tables().unwrap().len(), 1);
    tx.commit().unwrap();
    db.close().unwrap();
}

#[test]
fn a_concurrent_create_of_the_same_name_waits_and_succeeds_if_the_first_aborts() {
    let (vfs, db) = new_db(4, config());
    let t1 = db.begin(ReadCommitted).unwrap();
    let first = t1.create_table("race", &columns()).unwrap();
    let first_rel = t1.table_def(first).unwrap().rel;
    let t2 = db.begin(ReadCommitted).unwrap();
    let (t2, r) = blocks_until(
        &db,
        t2,
        |t2| t2.create_table("race", &columns()),
        || t1.rollback().unwrap(),
    );
    let second = r.unwrap();
    assert_ne!(second, first);
    t2.insert(second, &row(1)).unwrap();
    t2.commit().unwrap();
    assert!(!exists(&vfs, &file_of(&db, first_rel)));
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(tx.table("race").unwrap(), second);
    assert_eq!(ids_in(&tx, second), vec![1]);
    tx.commit().unwrap();
    db.close().unwrap();
}

// ---------------------------------------------------------------------------- TRUNCATE

#[test]
fn truncate_commit_drops_the_old_file_its_buffers_and_its_sync_requests() {
    let (vfs, db) = new_db(5, config());
    let t = create_with_rows(&db, "t", 500);
    db.checkpointer().checkpoint().unwrap();
    let queue = db.smgr().sync_queue();
    assert_eq!(queue.len(), 0, "a checkpoint leaves no sync request");
    // More rows, written back: the old file now has pending sync requests, and buffers.
    let tx = db.begin(ReadCommitted).unwrap();
    for id in 501..=600 {
        tx.insert(t, &row(id)).unwrap();
    }
    tx.commit().unwrap();
    let old = rel_of(&db, t);
    db.buffer_pool().flush_relation(old).unwrap();
    assert!(
        !queue.is_empty(),
        "written pages of the old file wait for their fsync"
    );
    assert!(db.buffer_pool().cached_buffers_of(old) > 0);

    let tx = db.begin(ReadCommitted).unwrap();
    tx.truncate(t).unwrap();
    let new = tx.table_def(t).unwrap().rel;
    assert_ne!(new, old, "TRUNCATE gives a new relation file");
    assert!(ids_in(&tx, t).is_empty(), "its own TRUNCATE is seen");
    tx.insert(t, &row(1000)).unwrap();
    assert!(exists(&vfs, &file_of(&db, old)), "kept until commit");
    tx.commit().unwrap();

    assert!(
        !exists(&vfs, &file_of(&db, old)),
        "old file removed at commit"
    );
    assert_eq!(
        db.buffer_pool().cached_buffers_of(old),
        0,
        "old buffers dropped"
    );
    // The pending sync requests (done here as the checkpointer does them): none is for the
    // old file, so the next checkpoint fsyncs nothing of it.
    let pending = queue.pending();
    for target in &pending {
        let SyncTarget::Segment { rel, .. } = target;
        assert_ne!(*rel, old, "a sync request of the dropped file: {pending:?}");
    }
    db.smgr().sync_pending().unwrap();
    db.buffer_pool().check_invariants().unwrap();
    db.checkpointer().checkpoint().unwrap();
    assert_eq!(rel_of(&db, t), new);
    assert_eq!(committed_ids(&db, t), vec![1000]);
    // Also after a restart.
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    assert!(!exists(&vfs, &file_of(&db, old)));
    assert_eq!(rel_of(&db, t), new);
    assert_eq!(committed_ids(&db, t), vec![1000]);
    db.close().unwrap();
}

#[test]
fn truncate_rollback_brings_the_old_rows_back_and_removes_the_new_file() {
    let (vfs, db) = new_db(6, config());
    let t = create_with_rows(&db, "t", 50);
    let old = rel_of(&db, t);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.truncate(t).unwrap();
    tx.insert(t, &row(1000)).unwrap();
    let new = tx.table_def(t).unwrap().rel;
    assert!(exists(&vfs, &file_of(&db, new)));
    tx.rollback().unwrap();
    assert!(
        !exists(&vfs, &file_of(&db, new)),
        "new file removed at rollback"
    );
    assert_eq!(db.buffer_pool().cached_buffers_of(new), 0);
    assert!(exists(&vfs, &file_of(&db, old)));
    assert_eq!(rel_of(&db, t), old);
    assert_eq!(committed_ids(&db, t), (1..=50).collect::<Vec<_>>());
    // Dropping the transaction without ending it is a rollback too.
    {
        let tx = db.begin(ReadCommitted).unwrap();
        tx.truncate(t).unwrap();
    }
    assert_eq!(rel_of(&db, t), old);
    assert_eq!(committed_ids(&db, t).len(), 50);
    db.close().unwrap();
}

#[test]
fn truncate_waits_for_a_reader_to_finish() {
    let (_vfs, db) = new_db(7, config());
    let t = create_with_rows(&db, "t", 10);
    let reader = db.begin(RepeatableRead).unwrap();
    assert_eq!(ids_in(&reader, t).len(), 10);
    let truncater = db.begin(ReadCommitted).unwrap();
    let (truncater, r) = blocks_until(
        &db,
        truncater,
        |tx| tx.truncate(t),
        || {
            // The reader keeps reading the old rows while TRUNCATE waits.
            assert_eq!(ids_in(&reader, t).len(), 10);
            reader.commit().unwrap();
        },
    );
    r.unwrap();
    truncater.insert(t, &row(99)).unwrap();
    // A new reader now waits for the TRUNCATE; READ COMMITTED takes the statement's snapshot
    // once it has the lock (as PostgreSQL does), so it sees what the TRUNCATE committed.
    let reader = db.begin(ReadCommitted).unwrap();
    let (reader, ids) = blocks_until(
        &db,
        reader,
        |r| ids_in(r, t),
        || truncater.commit().unwrap(),
    );
    assert_eq!(ids, vec![99]);
    reader.commit().unwrap();
    db.close().unwrap();
}

// ---------------------------------------------------------------------------- DROP

#[test]
fn drop_table_waits_for_a_reader_and_a_reader_that_waited_gets_42p01() {
    let (vfs, db) = new_db(8, config());
    let t = create_with_rows(&db, "doomed", 10);
    let rel = rel_of(&db, t);
    let reader = db.begin(ReadCommitted).unwrap();
    assert_eq!(ids_in(&reader, t).len(), 10);
    let dropper = db.begin(ReadCommitted).unwrap();
    let (dropper, r) = blocks_until(
        &db,
        dropper,
        |tx| tx.drop_table(t),
        || reader.commit().unwrap(),
    );
    r.unwrap();
    assert!(exists(&vfs, &file_of(&db, rel)), "kept until commit");
    let reader = db.begin(ReadCommitted).unwrap();
    let (reader, r) = blocks_until(
        &db,
        reader,
        |r| r.scan(t).map(|_| ()),
        || dropper.commit().unwrap(),
    );
    let err = r.unwrap_err();
    assert_eq!(err.sqlstate(), "42P01", "{err}");
    assert_eq!(reader.commit().unwrap_err().sqlstate(), "25P02");
    assert!(!exists(&vfs, &file_of(&db, rel)), "dropped at commit");
    assert_eq!(db.buffer_pool().cached_buffers_of(rel), 0);
    assert_eq!(lookup_error(&db, "doomed"), Some("42P01"));
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    assert_eq!(lookup_error(&db, "doomed"), Some("42P01"));
    assert!(!exists(&vfs, &file_of(&db, rel)));
    db.close().unwrap();
}

#[test]
fn drop_table_rolled_back_keeps_table_rows_and_file() {
    let (vfs, db) = new_db(9, config());
    let t = create_with_rows(&db, "kept", 10);
    let rel = rel_of(&db, t);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.drop_table(t).unwrap();
    assert_eq!(tx.table("kept").unwrap_err().sqlstate(), "42P01");
    tx.rollback().unwrap();
    assert!(exists(&vfs, &file_of(&db, rel)));
    assert_eq!(lookup_error(&db, "kept"), None);
    assert_eq!(committed_ids(&db, t), (1..=10).collect::<Vec<_>>());
    db.close().unwrap();
}

// ---------------------------------------------------------------------------- many tables

const MANY: usize = 200;

/// Checks the 200 tables: each found by name, at relation file `rels[i]`, empty; and the
/// database directory holds the files of those relations and nothing else.
fn verify_many(db: &Database, vfs: &SimVfs, tables: &[TableId], rels: &[RelFileLocator]) {
    let tx = db.begin(ReadCommitted).unwrap();
    let defs = tx.tables().unwrap();
    assert_eq!(defs.len(), MANY, "the catalog lost or gained tables");
    for (i, (&t, &rel)) in tables.iter().zip(rels).enumerate() {
        assert_eq!(tx.table(&format!("t{i:03}")).unwrap(), t);
        assert_eq!(tx.table_def(t).unwrap().rel, rel, "table {i}");
        assert_eq!(*tx.table_def(t).unwrap().columns, columns());
        assert!(ids_in(&tx, t).is_empty(), "table {i} is not empty");
    }
    tx.commit().unwrap();
    let expected: BTreeSet<u64> = rels.iter().map(|r| r.rel_number).collect();
    let dir = file_of(db, rels[0]).parent().unwrap().to_path_buf();
    let found: BTreeSet<u64> = vfs
        .list_dir(&dir)
        .unwrap()
        .iter()
        .map(|name| {
            let name = name.file_name().unwrap().to_str().unwrap();
            let digits: String = name.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().unwrap()
        })
        .collect();
    assert_eq!(found, expected, "files in {}", dir.display());
}

#[test]
fn two_hundred_truncated_tables_come_back_empty_without_their_old_files() {
    let (vfs, db) = new_db(10, config());
    let mut tables = Vec::new();
    for chunk in 0..MANY / 20 {
        let tx = db.begin(ReadCommitted).unwrap();
        for i in chunk * 20..(chunk + 1) * 20 {
            let t = tx.create_table(&format!("t{i:03}"), &columns()).unwrap();
            for id in 0..5 {
                tx.insert(t, &row(id)).unwrap();
            }
            tables.push(t);
        }
        tx.commit().unwrap();
    }
    db.checkpointer().checkpoint().unwrap();
    let old: Vec<RelFileLocator> = tables.iter().map(|&t| rel_of(&db, t)).collect();
    let mut rels = Vec::new();
    for &t in &tables {
        let tx = db.begin(ReadCommitted).unwrap();
        tx.truncate(t).unwrap();
        rels.push(tx.table_def(t).unwrap().rel);
        tx.commit().unwrap();
    }
    for r in &old {
        assert_eq!(db.buffer_pool().cached_buffers_of(*r), 0);
    }
    verify_many(&db, &vfs, &tables, &rels);
    // A crash: nothing after the checkpoint is durable but the WAL; redo re-creates the new
    // files and drops the old ones again.
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    verify_many(&db, &vfs, &tables, &rels);
    db.close().unwrap();
    let db = open_db(&vfs, config());
    verify_many(&db, &vfs, &tables, &rels);
    // Truncated again, then a clean restart.
    for (t, rel) in tables.iter().zip(rels.iter_mut()) {
        let tx = db.begin(ReadCommitted).unwrap();
        tx.truncate(*t).unwrap();
        *rel = tx.table_def(*t).unwrap().rel;
        tx.commit().unwrap();
    }
    db.close().unwrap();
    let db = open_db(&vfs, config());
    assert_eq!(db.recovery_stats().records, 0);
    verify_many(&db, &vfs, &tables, &rels);
    db.close().unwrap();
}

// ---------------------------------------------------------------------------- rows

#[test]
fn rows_of_the_wrong_arity_or_type_fail_42804() {
    let (_vfs, db) = new_db(11, config());
    let t = create_with_rows(&db, "typed", 1);
    let bad_rows: [Vec<Value>; 4] = [
        vec![Value::Int(2)],
        vec![Value::Int(2), Value::Text("x".into()), Value::Int(3)],
        vec![Value::Text("2".into()), Value::Text("x".into())],
        vec![Value::Int(2), Value::Int(3)],
    ];
    for bad in &bad_rows {
        let tx = db.begin(ReadCommitted).unwrap();
        let err = tx.insert(t, bad).unwrap_err();
        assert_eq!(err.sqlstate(), "42804", "{bad:?}: {err}");
        tx.rollback().unwrap();
    }
    let tid = {
        let tx = db.begin(ReadCommitted).unwrap();
        let tid = tx.scan(t).unwrap().next().unwrap().unwrap().0;
        tx.rollback().unwrap();
        tid
    };
    for bad in &bad_rows {
        let tx = db.begin(ReadCommitted).unwrap();
        let err = tx.update(t, tid, bad).unwrap_err();
        assert_eq!(err.sqlstate(), "42804", "{bad:?}: {err}");
        tx.rollback().unwrap();
    }
    // NULL fits every column.
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Null, Value::Null]).unwrap();
    tx.commit().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(tx.scan(t).unwrap().count(), 2);
    tx.commit().unwrap();
    db.close().unwrap();
}

/// A row of `n` bigint columns, each `v`.
fn wide(n: usize, v: i64) -> Vec<Value> {
    vec![Value::Int(v); n]
}

/// The most bigint columns whose row of `i64::MAX`s still fits in a tuple (nothing in it
/// TOAST could compress or move out of line).
fn widest() -> usize {
    let mut n = 0;
    while HEADER_BYTES + encoded_row_len(&wide(n + 1, i64::MAX)) <= MAX_TUPLE_BYTES {
        n += 1;
    }
    n
}

#[test]
fn a_row_toast_cannot_shrink_below_a_page_fails_54000_and_changes_nothing() {
    let (_vfs, db) = new_db(12, config());
    let ncols = widest() + 1;
    let cols: Vec<Column> = (0..ncols)
        .map(|i| Column::new(&format!("c{i}"), Type::Int))
        .collect();
    let t = committing(&db, |tx| {
        let t = tx.create_table("wide", &cols).unwrap();
        tx.insert(t, &wide(ncols, 1)).unwrap();
        t
    });
    let (tid, before) = {
        let tx = db.begin(ReadCommitted).unwrap();
        let first = tx.scan(t).unwrap().next().unwrap().unwrap();
        tx.rollback().unwrap();
        first
    };
    // One column fewer at the largest values: fits.
    let fits = committing(&db, |tx| {
        let u = tx.create_table("fits", &cols[1..]).unwrap();
        tx.insert(u, &wide(ncols - 1, i64::MAX)).unwrap();
        u
    });
    assert_eq!(committed_rows(&db, fits), vec![wide(ncols - 1, i64::MAX)]);
    // One byte more: refused, on insert and on update.
    let too_big = wide(ncols, i64::MAX);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &wide(ncols, 2)).unwrap();
    let err = tx.insert(t, &too_big).unwrap_err();
    assert_eq!(err.sqlstate(), "54000", "{err}");
    assert_eq!(tx.commit().unwrap_err().sqlstate(), "25P02");
    let tx = db.begin(ReadCommitted).unwrap();
    let err = tx.update(t, tid, &too_big).unwrap_err();
    assert_eq!(err.sqlstate(), "54000", "{err}");
    tx.rollback().unwrap();
    // Nothing changed, and the row is not left locked: changed at once by another.
    assert_eq!(committed_rows(&db, t), vec![wide(ncols, 1)]);
    let tx = db.begin(RepeatableRead).unwrap();
    assert_eq!(tx.fetch(t, tid).unwrap(), Some(before));
    assert!(matches!(
        tx.update(t, tid, &wide(ncols, 3)).unwrap(),
        Changed::Done(..)
    ));
    tx.commit().unwrap();
    db.close().unwrap();
}

/// Every row of `t` committed now.
fn committed_rows(db: &Database, t: TableId) -> Vec<Vec<Value>> {
    committing(db, |tx| tx.scan(t).unwrap().map(|r| r.unwrap().1).collect())
}

#[test]
fn a_failed_statement_aborts_the_transaction() {
    let (_vfs, db) = new_db(13, config());
    let t = create_with_rows(&db, "t", 2);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &row(3)).unwrap();
    let err = tx.table("missing").unwrap_err();
    assert_eq!(err.sqlstate(), "42P01");
    let tid = tx.insert(t, &row(4)).unwrap_err();
    assert_eq!(tid.sqlstate(), "25P02", "{tid}");
    assert!(tid.to_string().contains("current transaction is aborted"));
    assert_eq!(tx.scan(t).err().unwrap().sqlstate(), "25P02");
    assert_eq!(tx.table("t").unwrap_err().sqlstate(), "25P02");
    assert_eq!(tx.truncate(t).unwrap_err().sqlstate(), "25P02");
    assert_eq!(
        tx.lock_table(t, LockMode::AccessShare, true)
            .unwrap_err()
            .sqlstate(),
        "25P02"
    );
    // COMMIT of a failed transaction rolls it back, and says so.
    assert_eq!(tx.commit().unwrap_err().sqlstate(), "25P02");
    assert_eq!(committed_ids(&db, t), vec![1, 2]);
    // Its locks are gone.
    let tx = db.begin(ReadCommitted).unwrap();
    tx.lock_table(t, LockMode::AccessExclusive, true).unwrap();
    tx.commit().unwrap();
    db.close().unwrap();
}

// ---------------------------------------------------------------------------- close

#[test]
fn close_is_refused_while_a_transaction_is_open() {
    let (_vfs, db) = new_db(14, config());
    let t = create_with_rows(&db, "t", 2);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &row(3)).unwrap();
    let err = db.close().unwrap_err();
    assert_eq!(err.sqlstate(), "25000", "{err}");
    assert!(
        err.to_string().contains("1 transactions are still open"),
        "{err}"
    );
    drop(tx);
}

#[test]
fn close_succeeds_once_the_transactions_ended() {
    let (vfs, db) = new_db(15, config());
    let t = create_with_rows(&db, "t", 2);
    let reader = db.begin(RepeatableRead).unwrap();
    assert_eq!(ids_in(&reader, t), vec![1, 2]);
    reader.commit().unwrap();
    let writer = db.begin(ReadCommitted).unwrap();
    writer.insert(t, &row(3)).unwrap();
    writer.rollback().unwrap();
    db.close().unwrap();
    let db = open_db(&vfs, config());
    assert_eq!(
        db.recovery_stats().records,
        0,
        "a clean close replays nothing"
    );
    assert_eq!(committed_ids(&db, t), vec![1, 2]);
    db.close().unwrap();
}

#[test]
fn a_refused_close_keeps_the_data_directory_locked() {
    let (vfs, db) = new_db(16, config());
    let t = create_with_rows(&db, "t", 2);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &row(3)).unwrap();
    assert_eq!(db.close().unwrap_err().sqlstate(), "25000");
    // The first engine is still alive (the transaction holds it) ...
    let second = try_open(&vfs, config());
    // ... so a second one must not open the same directory.
    let refused = second.is_err();
    tx.commit().unwrap();
    assert!(
        refused,
        "a second engine opened /data while the first one's transaction was still open"
    );
    // Once the transaction ended, the directory is free, and its commit is recovered.
    let db = open_db(&vfs, config());
    assert_eq!(committed_ids(&db, t), vec![1, 2, 3]);
    db.close().unwrap();
}

#[test]
fn truncate_of_a_table_created_in_the_same_transaction() {
    let (vfs, db) = new_db(17, config());
    for commit in [true, false] {
        let tx = db.begin(ReadCommitted).unwrap();
        let t = tx.create_table("fresh", &columns()).unwrap();
        tx.insert(t, &row(1)).unwrap();
        let first = tx.table_def(t).unwrap().rel;
        tx.truncate(t).unwrap();
        tx.insert(t, &row(2)).unwrap();
        let second = tx.table_def(t).unwrap().rel;
        tx.truncate(t).unwrap();
        tx.insert(t, &row(3)).unwrap();
        let third = tx.table_def(t).unwrap().rel;
        assert_eq!(ids_in(&tx, t), vec![3]);
        if commit {
            tx.commit().unwrap();
            assert_eq!(committed_ids(&db, t), vec![3]);
            assert!(exists(&vfs, &file_of(&db, third)));
            let tx = db.begin(ReadCommitted).unwrap();
            tx.drop_table(t).unwrap();
            tx.commit().unwrap();
        } else {
            tx.rollback().unwrap();
            assert_eq!(lookup_error(&db, "fresh"), Some("42P01"));
        }
        for rel in [first, second, third] {
            assert!(!exists(&vfs, &file_of(&db, rel)), "commit {commit}: {rel}");
            assert_eq!(db.buffer_pool().cached_buffers_of(rel), 0);
        }
    }
    db.close().unwrap();
}
