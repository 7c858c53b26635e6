//! Running out of file descriptors costs an operation, never the engine (issue 36: a flood of
//! client sockets took every descriptor, the next checkpoint's fsync failed with EMFILE and
//! the engine stopped).
//!
//! Fault model: every open of a relation file fails with EMFILE, as in a process whose
//! descriptors a flood of sockets took, and the storage manager's cache holds no file it
//! could close; then the flood ends. Verified: the checkpoint that needed such an open fails
//! with an ordinary error (53000), the engine keeps running and accepting commits, the sync
//! requests that checkpoint did not get to stay pending, and the next checkpoint fsyncs them
//! (a power loss after it keeps every commit). The contrast: a failed fsync still stops the
//! engine. And the budget a server bounds its sockets by.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::{close_cached_files, committed, committing, crash, create_accounts, open_db};

use quire_engine::sync::SyncTarget;
use quire_engine::vfs::{Fault, SimVfs};
use quire_engine::{Config, Database, HealthState, TableId, Value};

fn config() -> Config {
    Config {
        autovacuum: false,
        ..common::config()
    }
}

/// `accounts` with 1..=20 checkpointed, then 21..=40 committed and written to their files,
/// none of which stays open: the next checkpoint must open each file to fsync it. Returns
/// the pending sync requests.
fn uncached_requests(db: &Database) -> (TableId, Vec<SyncTarget>) {
    let (t, _) = committing(db, |tx| create_accounts(tx, 20));
    db.checkpointer().checkpoint().unwrap();
    committing(db, |tx| {
        for id in 21..=40 {
            tx.insert(t, &[Value::Int(id), Value::Int(100 * id)])
                .unwrap();
        }
    });
    db.buffer_pool().flush_all().unwrap();
    close_cached_files(db);
    let pending = db.smgr().sync_queue().pending();
    assert!(!pending.is_empty(), "the writes filed sync requests");
    (t, pending)
}

fn rows(ids: std::ops::RangeInclusive<i64>) -> Vec<(i64, i64)> {
    ids.map(|id| (id, 100 * id)).collect()
}

#[test]
fn a_checkpoint_that_cannot_open_a_file_to_fsync_it_fails_alone_and_the_next_one_syncs_it() {
    let vfs = Arc::new(SimVfs::new(36));
    let db = open_db(&vfs, config());
    let (t, pending) = uncached_requests(&db);
    let stats = db.checkpointer().stats();
    let (checkpoints, fsyncs) = (
        stats.checkpoints.load(Ordering::Relaxed),
        stats.file_fsyncs.load(Ordering::Relaxed),
    );

    vfs.set_fault_rate(Fault::TooManyFiles, 1.0, Some("/data/base/"));
    let e = db.checkpointer().checkpoint().unwrap_err();
    assert_eq!(e.sqlstate(), "53000", "{e}");
    let SyncTarget::Segment { rel, fork, segno } = pending[0];
    let first = db.smgr().segment_path(rel, fork, segno);
    assert!(
        e.to_string()
            .contains(&format!("could not open file \"{}\"", first.display())),
        "the first request's reopen failed: {e}"
    );
    assert_eq!(db.health(), HealthState::Running, "not the failed state");
    assert_eq!(db.smgr().sync_queue().pending(), pending, "requests kept");
    assert_eq!(stats.checkpoints.load(Ordering::Relaxed), checkpoints);
    // The engine goes on: a commit (WAL only) and a read (from the buffer pool).
    committing(&db, |tx| {
        tx.insert(t, &[Value::Int(41), Value::Int(4100)]).unwrap()
    });
    assert_eq!(committed(&db, t), rows(1..=41));

    // The flood ends: the next checkpoint opens and fsyncs every file the failed one owed.
    vfs.set_fault_rate(Fault::TooManyFiles, 0.0, Some("/data/base/"));
    db.checkpointer().checkpoint().unwrap();
    assert!(db.smgr().sync_queue().is_empty());
    let fsynced = stats.file_fsyncs.load(Ordering::Relaxed) - fsyncs;
    assert!(fsynced >= pending.len() as u64, "{fsynced} fsyncs");
    assert_eq!(stats.checkpoints.load(Ordering::Relaxed), checkpoints + 1);
    assert!(vfs.faults_injected().get(Fault::TooManyFiles) >= 1);
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    assert_eq!(committed(&db, t), rows(1..=41));
}

/// The contrast: when the open succeeds and the fsync fails, the engine stops.
#[test]
fn a_failed_fsync_of_a_reopened_file_still_stops_the_engine() {
    let vfs = Arc::new(SimVfs::new(37));
    let db = open_db(&vfs, config());
    let (t, _) = uncached_requests(&db);
    vfs.inject(Fault::FsyncIo, Some("/data/base/"));
    let e = db.checkpointer().checkpoint().unwrap_err();
    assert!(
        matches!(db.health(), HealthState::Failed { .. }),
        "{e}, {:?}",
        db.health()
    );
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    assert_eq!(committed(&db, t), rows(1..=40));
}

/// What the server bounds its sockets by: the engine takes `max_files_per_process` relation
/// files at most, and never more than half of what the limit leaves.
#[test]
fn the_descriptor_budget_leaves_room_for_clients() {
    let vfs = Arc::new(SimVfs::new(38));
    let db = open_db(&vfs, config());
    let b = db.file_descriptors();
    eprintln!(
        "descriptors: soft limit {}, open at start {}, engine at most {} (relation files {}, \
         WAL {}, reserved {}), left for clients {}",
        b.soft_limit,
        b.already_open,
        b.engine_max(),
        b.cached_files,
        b.fixed_files,
        b.reserved,
        b.for_clients()
    );
    let half_left = (b.soft_limit - b.already_open - b.fixed_files - b.reserved) / 2;
    assert_eq!(b.cached_files, half_left.min(1000), "{b:?}");
    assert!(b.soft_limit >= b.already_open + b.engine_max() + b.for_clients());
    assert!(b.for_clients() >= b.cached_files, "{b:?}");
    drop(db);

    let greedy = Config {
        max_files_per_process: 100_000_000,
        ..config()
    };
    let db = open_db(&vfs, greedy);
    let b = db.file_descriptors();
    assert!(b.cached_files < 100_000_000, "{b:?}");
    assert!(b.for_clients() >= b.cached_files, "{b:?}");
}
