//! Every fsync failure stops the engine (PostgreSQL's PANIC), and a stopped engine writes
//! nothing, accepts nothing, answers one error, and recovers on restart.
//!
//! Fault model: one fsync (of a data file, a directory, the two-phase state file, the WAL or
//! the control file) fails with EIO and, as Linux does, drops the file's unsynced writes.
//! Verified for each: the engine reports the failed state naming the failure; a new
//! transaction, a checkpoint and a write-back of dirty buffers are refused and write nothing;
//! after a power loss a restart recovers every acknowledged transaction from the WAL.

mod common;

use std::sync::Arc;

use common::{committed, committing, crash, create_accounts, open_db};

use quire_engine::recovery::{storage, testrm};
use quire_engine::vfs::{Fault, OpKind, SimVfs, Vfs};
use quire_engine::{
    Config, Database, Fork, HealthState, IsolationLevel, RelFileLocator, SyncMode, TableId, Value,
};

fn config() -> Config {
    Config {
        max_prepared_transactions: 4,
        ..common::config()
    }
}

/// The table every case starts with: 1..=20 committed and checkpointed, then 21..=40
/// committed after the checkpoint (acknowledged, in the WAL only).
fn setup(seed: u64, config: Config) -> (Arc<SimVfs>, Database, TableId) {
    let (vfs, db) = common::new_db(seed, config);
    let (t, _) = committing(&db, |tx| create_accounts(tx, 20));
    db.checkpointer().checkpoint().unwrap();
    committing(&db, |tx| {
        for id in 21..=40 {
            tx.insert(t, &[Value::Int(id), Value::Int(100 * id)])
                .unwrap();
        }
    });
    (vfs, db, t)
}

fn expected_rows() -> Vec<(i64, i64)> {
    (1..=40).map(|id| (id, 100 * id)).collect()
}

/// A relation of the test resource manager, outside the catalog.
fn test_rel() -> RelFileLocator {
    RelFileLocator::new(1, 900_000)
}

/// Creates the test relation, WAL-logged.
fn create_test_rel(db: &Database) {
    let wal = db.wal();
    db.smgr().create(test_rel(), Fork::Main).unwrap();
    wal.flush(storage::log_create(wal, test_rel(), Fork::Main).unwrap())
        .unwrap();
}

/// Dirties `blocks` new blocks of the test relation (WAL-logged, flushed), until the
/// first error (an eviction's write-back failing), which it returns.
fn dirty_blocks(db: &Database, blocks: u32) -> Option<quire_engine::Error> {
    let wal = db.wal();
    for b in 0..blocks {
        let step = db
            .buffer_pool()
            .extend(test_rel(), Fork::Main)
            .and_then(|buf| testrm::set_bytes(wal, &buf, 64, &u64::from(b + 1).to_le_bytes()))
            .and_then(|end| wal.flush(end));
        if let Err(e) = step {
            return Some(e);
        }
    }
    None
}

/// One way an fsync fails: the configuration it needs and what triggers it.
struct Case {
    name: &'static str,
    config: fn() -> Config,
    /// Makes the fsync fail; returns the error the triggering call got.
    trigger: fn(&SimVfs, &Database, TableId) -> quire_engine::Error,
}

fn checkpoint_err(db: &Database) -> quire_engine::Error {
    db.checkpointer()
        .checkpoint()
        .expect_err("the checkpoint's fsync was made to fail")
}

const CASES: &[Case] = &[
    Case {
        name: "data file fsync at a checkpoint",
        config,
        trigger: |vfs, db, _| {
            create_test_rel(db);
            assert!(dirty_blocks(db, 4).is_none());
            vfs.fail_next_fsync(Some("base/"));
            checkpoint_err(db)
        },
    },
    Case {
        name: "the writer's own fsync (sync = immediate)",
        config: || Config {
            sync: SyncMode::Immediate,
            ..config()
        },
        trigger: |vfs, db, _| {
            create_test_rel(db);
            assert!(dirty_blocks(db, 4).is_none());
            vfs.fail_next_fsync(Some("base/"));
            db.buffer_pool()
                .flush_all()
                .expect_err("the write-back's fsync was made to fail")
        },
    },
    Case {
        name: "the writer's own fsync (the sync queue is full)",
        config: || Config {
            // 16 buffers, so a 16-request queue; one block per segment file, so each
            // written block is a request of its own.
            shared_buffers_bytes: 16 * 8192,
            segment_size_blocks: 1,
            ..config()
        },
        trigger: |vfs, db, _| {
            create_test_rel(db);
            db.checkpointer().checkpoint().unwrap();
            vfs.fail_next_fsync(Some("base/"));
            dirty_blocks(db, 40).expect("an eviction's own fsync was made to fail")
        },
    },
    Case {
        name: "directory fsync creating a database directory",
        config,
        trigger: |vfs, db, _| {
            vfs.inject(Fault::FsyncIo, Some("/data/base"));
            db.smgr()
                .create(RelFileLocator::new(77, 5000), Fork::Main)
                .expect_err("the fsync of base/ was made to fail")
        },
    },
    Case {
        name: "directory fsync at a checkpoint",
        config,
        trigger: |vfs, db, _| {
            db.checkpointer().checkpoint().unwrap();
            create_test_rel(db);
            vfs.inject(Fault::FsyncIo, Some("/data/base/1"));
            checkpoint_err(db)
        },
    },
    Case {
        name: "two-phase state file fsync",
        config,
        trigger: |vfs, db, t| {
            let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
            tx.insert(t, &[Value::Int(41), Value::Int(1)]).unwrap();
            tx.prepare("p1").unwrap();
            vfs.fail_next_fsync(Some("pg_twophase"));
            checkpoint_err(db)
        },
    },
    Case {
        name: "WAL fsync at a commit",
        config,
        trigger: |vfs, db, t| {
            let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
            tx.insert(t, &[Value::Int(41), Value::Int(1)]).unwrap();
            vfs.fail_next_fsync(Some("/wal/"));
            tx.commit()
                .expect_err("the commit's WAL fsync was made to fail")
        },
    },
    Case {
        name: "control file fsync at a checkpoint",
        config,
        trigger: |vfs, db, _| {
            vfs.fail_next_fsync(Some("quire_control"));
            checkpoint_err(db)
        },
    },
];

/// What a stopped engine must do: name the failure, refuse new work and checkpoints with
/// SQLSTATE 58030, and write no page.
fn assert_stopped(vfs: &SimVfs, db: &Database, t: TableId, case: &str) {
    let HealthState::Failed { reason } = db.health() else {
        panic!("{case}: the engine still runs after a failed fsync");
    };
    assert!(
        reason.contains("Input/output error") || reason.contains("WAL stopped"),
        "{case}: the reason names the failure: {reason}"
    );
    let err = db
        .begin(IsolationLevel::ReadCommitted)
        .err()
        .unwrap_or_else(|| panic!("{case}: a new transaction was accepted by a stopped engine"));
    assert_eq!(err.sqlstate(), "58030", "{case}: {err}");
    assert!(err.to_string().contains(&reason), "{case}: {err}");
    let writes = vfs.counters().snapshot();
    let err = db.checkpointer().checkpoint().unwrap_err();
    assert_eq!(err.sqlstate(), "58030", "{case}: checkpoint: {err}");
    // Refused when a buffer is dirty; the count below says nothing was written either way.
    if let Err(e) = db.buffer_pool().flush_all() {
        assert_eq!(e.sqlstate(), "58030", "{case}: write-back: {e}");
    }
    assert!(db.vacuum(t).is_err(), "{case}: vacuum");
    let after = vfs.counters().snapshot().since(&writes);
    assert_eq!(
        after.get(OpKind::Write),
        0,
        "{case}: a stopped engine wrote"
    );
    assert_eq!(
        after.get(OpKind::Fsync),
        0,
        "{case}: a stopped engine fsynced"
    );
}

/// Item 1 and 3 of issue 12: each fsync failure ends in the one failed state, and a
/// restart recovers every acknowledged transaction.
#[test]
fn every_fsync_failure_stops_the_engine_until_a_restart_recovers() {
    for (seed, case) in (1..).zip(CASES) {
        let (vfs, db, t) = setup(seed, (case.config)());
        let err = (case.trigger)(&vfs, &db, t);
        assert!(
            err.to_string().contains("Input/output error"),
            "{}: the first caller gets the fsync's own error: {err}",
            case.name
        );
        assert_stopped(&vfs, &db, t, case.name);
        crash(db, &vfs);
        let db = open_db(&vfs, (case.config)());
        assert_eq!(db.health(), HealthState::Running, "{}", case.name);
        assert_eq!(committed(&db, t), expected_rows(), "{}", case.name);
        db.close().unwrap();
    }
}

/// An open transaction of a stopped engine: its next call, its commit and the ends of
/// prepared transactions answer the one error; nothing of it is committed.
#[test]
fn a_stopped_engine_answers_every_call_with_one_error() {
    let (vfs, db, t) = setup(11, config());
    let prepared = db.begin(IsolationLevel::ReadCommitted).unwrap();
    prepared
        .insert(t, &[Value::Int(50), Value::Int(5)])
        .unwrap();
    prepared.prepare("before").unwrap();
    let open = db.begin(IsolationLevel::ReadCommitted).unwrap();
    open.insert(t, &[Value::Int(60), Value::Int(6)]).unwrap();
    vfs.fail_next_fsync(Some("base/"));
    committing(&db, |tx| {
        tx.insert(t, &[Value::Int(41), Value::Int(1)]).unwrap()
    });
    checkpoint_err(&db);
    let errors = [
        open.insert(t, &[Value::Int(61), Value::Int(6)])
            .unwrap_err(),
        open.commit().unwrap_err(),
        db.commit_prepared("before").unwrap_err(),
        db.rollback_prepared("before").unwrap_err(),
        db.vacuum_all().unwrap_err(),
    ];
    let first = errors[0].to_string();
    for err in &errors {
        assert_eq!(err.sqlstate(), "58030", "{err}");
        assert_eq!(err.to_string(), first, "one error for every call");
    }
    assert!(
        first.contains("fsync") && first.contains("restart"),
        "{first}"
    );
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    let mut want = expected_rows();
    want.push((41, 1));
    want.sort_unstable();
    assert_eq!(committed(&db, t), want, "row 60 was never committed");
    assert_eq!(common::gids(&db), ["before"], "still prepared");
    db.commit_prepared("before").unwrap();
    want.push((50, 5));
    want.sort_unstable();
    assert_eq!(committed(&db, t), want);
}

/// The loss a retried fsync hides: a truncation whose fsync failed never reached the disk
/// (Linux dropped it with the failed writeback). Were the engine to go on, the next
/// checkpoint would fsync the file successfully, move the redo point past the truncation's
/// record, and a crash would bring the cut blocks back. Stopped, no checkpoint completes,
/// and redo repeats the truncation.
#[test]
fn no_checkpoint_moves_the_redo_point_past_a_truncation_whose_fsync_failed() {
    let config = || Config {
        sync: SyncMode::Immediate,
        ..config()
    };
    let (vfs, db, _) = setup(21, config());
    create_test_rel(&db);
    assert!(dirty_blocks(&db, 10).is_none());
    db.checkpointer().checkpoint().unwrap();
    let wal = db.wal();
    wal.flush(storage::log_truncate(wal, test_rel(), Fork::Main, 3).unwrap())
        .unwrap();
    db.buffer_pool()
        .drop_relation_buffers(test_rel(), Fork::Main, 3);
    vfs.fail_next_fsync(Some("base/"));
    let err = db.smgr().truncate(test_rel(), Fork::Main, 3).unwrap_err();
    assert!(err.to_string().contains("fsync"), "{err}");
    assert!(
        db.checkpointer().checkpoint().is_err(),
        "a checkpoint after a failed fsync must not complete"
    );
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    assert_eq!(
        db.smgr().nblocks(test_rel(), Fork::Main).unwrap(),
        3,
        "the truncation is redone"
    );
}
