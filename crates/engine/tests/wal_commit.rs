//! Commits and the WAL: asynchronous commits made durable by the WAL writer, and a commit
//! whose WAL write failed. Fault model: power loss of the simulated file system that keeps
//! only what was fsynced (`common::crash`), and one injected WAL write failure (EIO).

mod common;

use std::time::Duration;

use common::*;
use quire_engine::vfs::{OpKind, Vfs};
use quire_engine::{Config, IsolationLevel, TableId, Value};

/// A table `t (id, v)` holding (1, 10), committed synchronously and durable.
fn table_with_one_row(seed: u64) -> (std::sync::Arc<quire_engine::vfs::SimVfs>, TableId) {
    let (vfs, db) = new_db(seed, config());
    let t = committing(&db, |tx| create_pairs(tx, "t", "v", [(1, 10)]).0);
    db.close().unwrap();
    (vfs, t)
}

fn asynchronous(wal_writer_delay_ms: u64) -> Config {
    Config {
        synchronous_commit: false,
        wal_writer_delay_ms,
        ..config()
    }
}

/// `synchronous_commit = off`: the commit returns without an fsync, and the WAL writer
/// makes it durable within three `wal_writer_delay`s. The second half shows the first can
/// fail: with a writer that has not run yet, the same commit is lost at power loss.
#[test]
fn an_asynchronous_commit_is_durable_within_three_wal_writer_delays() {
    for (seed, delay_ms, wait, survives) in [(31, 50, true, true), (32, 10_000, false, false)] {
        let (vfs, t) = table_with_one_row(seed);
        let db = open_db(&vfs, asynchronous(delay_ms));
        let before = vfs.counters().snapshot();
        committing(&db, |tx| {
            tx.insert(t, &[Value::Int(2), Value::Int(20)]).unwrap();
        });
        let during = vfs.counters().snapshot().since(&before);
        if !wait {
            assert_eq!(
                during.get(OpKind::Fsync),
                0,
                "an asynchronous commit fsynced"
            );
        }
        if wait {
            std::thread::sleep(Duration::from_millis(3 * delay_ms));
        }
        crash(db, &vfs);
        let db = open_db(&vfs, config());
        let expected = if survives {
            vec![(1, 10), (2, 20)]
        } else {
            vec![(1, 10)]
        };
        assert_eq!(
            committed(&db, t),
            expected,
            "wal_writer_delay {delay_ms} ms"
        );
    }
}

/// Issue 12 item 2: a commit whose WAL write failed is reported as failed; it must never
/// become durable in the same run, so no later commit may succeed and carry its record to
/// disk (the WAL stays failed until a restart).
#[test]
fn a_commit_whose_wal_write_failed_never_comes_back_as_committed() {
    let (vfs, t) = table_with_one_row(33);
    let db = open_db(&vfs, config());
    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(2), Value::Int(20)]).unwrap();
    vfs.fail_next_write(Some("wal"));
    assert!(tx.commit().is_err(), "the commit's WAL write failed");
    let later = db.begin(IsolationLevel::ReadCommitted).and_then(|tx| {
        tx.insert(t, &[Value::Int(3), Value::Int(30)])?;
        tx.commit()
    });
    assert!(
        later.is_err(),
        "a commit after a failed WAL write succeeded (and flushed the failed one's record)"
    );
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    assert_eq!(committed(&db, t), vec![(1, 10)]);
}
