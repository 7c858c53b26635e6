//! Running out of file descriptors for real: the kernel's EMFILE, with every descriptor the
//! process may have taken (as a flood of client sockets takes them).
//!
//! Fault model: after the engine cached some relation files, the rest of the process opens
//! descriptors until the kernel refuses one, and keeps them. Verified: a read of a relation
//! file not cached and a checkpoint that must open files both succeed, each by closing a
//! cached file first (PostgreSQL's `ReleaseLruFile`); with nothing cached left, a checkpoint
//! fails with 53000 and the engine keeps running; once the descriptors are given back, the
//! next checkpoint completes and a restart finds every commit.
//!
//! The only test of its binary: it takes every descriptor of the process, so it must not
//! share the process with other tests.

mod common;

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use common::{close_cached_files, committed, committing, create_pairs, rel_of};

use quire_engine::vfs::{is_out_of_descriptors, OsVfs, Vfs};
use quire_engine::{Config, Database, Fork, HealthState, TableId, Value};

fn config() -> Config {
    Config {
        autovacuum: false,
        ..common::config()
    }
}

fn open(dir: &Path) -> Database {
    let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
    Database::open(&vfs, dir, config()).unwrap()
}

/// Reads block 0 of `t`'s file through the storage manager (not the buffer pool).
fn read_file_of(db: &Database, t: TableId) -> quire_engine::Result<()> {
    let mut page = Box::new([0u8; 8192]);
    db.smgr().read(rel_of(db, t), Fork::Main, 0, &mut page)
}

/// Opens descriptors until the kernel refuses one with EMFILE; returns them.
fn take_every_descriptor(soft_limit: u64) -> Vec<File> {
    let mut held = Vec::new();
    // Bounded by the limit.
    for _ in 0..=soft_limit {
        match File::open("/dev/null") {
            Ok(f) => held.push(f),
            Err(e) if is_out_of_descriptors(&e) => return held,
            Err(e) => panic!("open /dev/null: {e}"),
        }
    }
    panic!("the limit of {soft_limit} was never reached");
}

#[test]
fn with_every_descriptor_taken_the_engine_closes_cached_files_to_open_others() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    let db = open(&dir);
    let tables: Vec<TableId> = (0..10)
        .map(|i| {
            committing(&db, |tx| {
                create_pairs(tx, &format!("t{i}"), "v", [(i, i)]).0
            })
        })
        .collect();
    db.checkpointer().checkpoint().unwrap();
    close_cached_files(&db);
    for &t in &tables[..5] {
        read_file_of(&db, t).unwrap();
    }
    assert_eq!(db.smgr().open_files(), 5);

    let held = take_every_descriptor(db.file_descriptors().soft_limit);
    assert!(
        File::open("/dev/null").is_err(),
        "every descriptor is taken"
    );
    // A file not cached: one cached file is closed to open it.
    read_file_of(&db, tables[9]).unwrap();
    assert_eq!(db.smgr().open_files(), 5, "one closed, one opened");
    // A checkpoint that writes a page of an uncached file, fsyncs it, its directory and
    // the control file: it closes what it needs.
    committing(&db, |tx| {
        tx.insert(tables[8], &[Value::Int(80), Value::Int(80)])
            .unwrap()
    });
    db.checkpointer().checkpoint().unwrap();
    assert_eq!(db.health(), HealthState::Running);

    // Nothing cached left (and what the cache gave back taken too): the next checkpoint
    // cannot open its files, and fails alone.
    close_cached_files(&db);
    let held_too = take_every_descriptor(db.file_descriptors().soft_limit);
    assert!(
        File::open("/dev/null").is_err(),
        "every descriptor is taken again"
    );
    committing(&db, |tx| {
        tx.insert(tables[7], &[Value::Int(70), Value::Int(70)])
            .unwrap()
    });
    let e = db.checkpointer().checkpoint().unwrap_err();
    assert_eq!(e.sqlstate(), "53000", "{e}");
    assert_eq!(db.health(), HealthState::Running, "{e}");

    drop((held, held_too));
    db.checkpointer().checkpoint().unwrap();
    assert_eq!(db.health(), HealthState::Running);
    db.close().unwrap();
    let db = open(&dir);
    assert_eq!(committed(&db, tables[7]), vec![(7, 7), (70, 70)]);
    assert_eq!(committed(&db, tables[8]), vec![(8, 8), (80, 80)]);
    db.close().unwrap();
}
