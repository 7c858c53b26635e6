//! Startup refuses a data directory it cannot trust, with a message naming what is wrong,
//! and the directories a data directory is made of survive a power loss.
//!
//! Fault model: files lost or cut short while the engine was down (a missing or truncated WAL
//! segment, a lost control file, a lost middle segment of a relation, a lost relation file),
//! each made durable before the restart; and a power loss that keeps only what was fsynced,
//! directory entries included. Verified: the open fails with SQLSTATE XX000 or 58030 and a
//! message naming the file or block, rather than starting on a silently damaged directory.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{committed, committing, crash, create_accounts, new_db, open_db, try_open};

use quire_engine::recovery::{storage, testrm};
use quire_engine::vfs::{SimVfs, Vfs};
use quire_engine::{Config, Database, Fork, IsolationLevel, Lsn, RelFileLocator};

fn config() -> Config {
    Config {
        // Small segments, so the WAL spans several files and relations several segments.
        wal_segment_size_bytes: 64 * 1024,
        segment_size_blocks: 2,
        max_prepared_transactions: 2,
        ..common::config()
    }
}

fn test_rel() -> RelFileLocator {
    RelFileLocator::new(1, 900_000)
}

/// Creates the test relation (WAL-logged) with `blocks` blocks, each changed once.
fn fill_test_rel(db: &Database, blocks: u32) {
    let wal = db.wal();
    db.smgr().create(test_rel(), Fork::Main).unwrap();
    wal.flush(storage::log_create(wal, test_rel(), Fork::Main).unwrap())
        .unwrap();
    for b in 0..blocks {
        let buf = db.buffer_pool().extend(test_rel(), Fork::Main).unwrap();
        let end = testrm::set_bytes(wal, &buf, 64, &u64::from(b + 1).to_le_bytes()).unwrap();
        wal.flush(end).unwrap();
    }
}

/// Removes a file durably (its directory fsynced), as a lost file would be after a restart.
fn remove_durably(vfs: &SimVfs, path: &Path) {
    vfs.remove_file(path).unwrap();
    vfs.sync_dir(path.parent().unwrap()).unwrap();
}

fn wal_segment(lsn: Lsn) -> PathBuf {
    let segno = lsn.segment_of(config().wal_segment_size_bytes);
    PathBuf::from(format!("/data/wal/{segno:016X}"))
}

/// The error of opening the directory, which must fail.
fn refused(vfs: &Arc<SimVfs>) -> String {
    let err = try_open(vfs, config())
        .err()
        .expect("startup must refuse this directory");
    assert!(
        ["XX000", "58030"].contains(&err.sqlstate().code()),
        "{}: {err}",
        err.sqlstate()
    );
    err.to_string()
}

/// A database whose WAL spans several segments, crashed after a checkpoint; returns the
/// checkpoint record's LSN.
fn crashed_after_checkpoint(seed: u64) -> (Arc<SimVfs>, Lsn) {
    let (vfs, db) = new_db(seed, config());
    fill_test_rel(&db, 12);
    let checkpoint = db.checkpointer().checkpoint().unwrap();
    committing(&db, |tx| create_accounts(tx, 50));
    crash(db, &vfs);
    (vfs, checkpoint)
}

#[test]
fn a_missing_wal_segment_before_the_checkpoint_record_is_refused() {
    let (vfs, checkpoint) = crashed_after_checkpoint(1);
    remove_durably(&vfs, &wal_segment(checkpoint));
    let err = refused(&vfs);
    assert!(
        err.contains("before the checkpoint record") && err.contains("missing or truncated"),
        "{err}"
    );
}

#[test]
fn a_wal_segment_cut_before_the_checkpoint_record_is_refused() {
    let (vfs, checkpoint) = crashed_after_checkpoint(2);
    let segment = vfs
        .open(
            &wal_segment(checkpoint),
            quire_engine::vfs::OpenMode::Existing,
        )
        .unwrap();
    let cut = checkpoint.offset_in(config().wal_segment_size_bytes) / 8192 * 8192;
    segment.set_len(cut).unwrap();
    segment.sync_all().unwrap();
    drop(segment);
    let err = refused(&vfs);
    assert!(err.contains("before the checkpoint record"), "{err}");
}

#[test]
fn relation_files_without_a_control_file_are_refused() {
    let (vfs, db) = new_db(3, config());
    committing(&db, |tx| create_accounts(tx, 5));
    db.close().unwrap();
    remove_durably(&vfs, Path::new("/data/global/quire_control"));
    let err = refused(&vfs);
    assert!(
        err.contains("/data/base exists") && err.contains("control file"),
        "{err}"
    );
    // Only the WAL left: still not a new directory.
    let vfs2 = Arc::new(SimVfs::new(4));
    quire_engine::vfs::create_dir_durable(&*vfs2, Path::new("/data/wal")).unwrap();
    let err = refused(&vfs2);
    assert!(err.contains("/data/wal exists"), "{err}");
}

#[test]
fn a_missing_middle_segment_is_refused() {
    let (vfs, db) = new_db(5, config());
    fill_test_rel(&db, 7); // four segments of two blocks
    db.close().unwrap();
    let path = format!("/data/base/1/{}.1", test_rel().rel_number);
    remove_durably(&vfs, Path::new(&path));
    let err = refused(&vfs);
    assert!(
        err.contains("segment 1") && err.contains(&path) && err.contains("later segment"),
        "{err}"
    );
}

/// Redo changes a block of a relation file that is gone, with no full-page image and no
/// creation record, and no later record drops the relation: that is lost data, and startup
/// says so instead of rebuilding the page from the one change it has (PostgreSQL's
/// invalid-page table). Dropped later in the WAL, the same loss is explained, and startup
/// goes on.
#[test]
fn a_change_to_a_lost_file_is_refused_unless_the_relation_is_dropped_later() {
    for drop_later in [false, true] {
        let (vfs, db) = new_db(6, config());
        fill_test_rel(&db, 2);
        db.checkpointer().checkpoint().unwrap();
        // A change logged without a full-page image (as with full_page_writes off): the
        // redo point is lowered below the page's LSN for this one change.
        db.wal().set_redo_point(Lsn(1));
        let buf = db
            .buffer_pool()
            .read_buffer(quire_engine::types::BufferTag::new(
                test_rel(),
                Fork::Main,
                1,
            ))
            .unwrap();
        let end = testrm::set_bytes(db.wal(), &buf, 80, &[9; 8]).unwrap();
        drop(buf);
        db.wal().flush(end).unwrap();
        if drop_later {
            let wal = db.wal();
            wal.flush(storage::log_drop(wal, &[test_rel()]).unwrap())
                .unwrap();
        }
        crash(db, &vfs);
        remove_durably(
            &vfs,
            Path::new(&format!("/data/base/1/{}", test_rel().rel_number)),
        );
        if drop_later {
            let db = open_db(&vfs, config());
            assert!(!db.smgr().exists(test_rel(), Fork::Main).unwrap());
        } else {
            let err = refused(&vfs);
            assert!(
                err.contains("block 1 of relation") && err.contains("does not exist"),
                "{err}"
            );
        }
    }
}

/// Issue 12, item 5: every directory of a data directory is durable once created, so a
/// power loss right after the first open, or after the first prepared transaction, keeps
/// them (and the files in them).
#[test]
fn the_directories_of_a_data_directory_survive_a_power_loss() {
    let (vfs, db) = new_db(7, config());
    let (t, _) = committing(&db, |tx| create_accounts(tx, 3));
    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
    tx.insert(
        t,
        &[quire_engine::Value::Int(9), quire_engine::Value::Int(9)],
    )
    .unwrap();
    tx.prepare("p").unwrap();
    db.checkpointer().checkpoint().unwrap();
    crash(db, &vfs);
    for dir in [
        "/data",
        "/data/base",
        "/data/base/1",
        "/data/wal",
        "/data/global",
        "/data/pg_twophase",
    ] {
        assert!(vfs.exists(Path::new(dir)).unwrap(), "{dir} was lost");
    }
    let db = open_db(&vfs, config());
    assert_eq!(committed(&db, t), [(1, 100), (2, 200), (3, 300)]);
    assert_eq!(common::gids(&db), ["p"]);
}
