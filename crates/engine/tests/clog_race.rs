//! Commit statuses at the birth of a commit-log page: several threads committing while the
//! ids cross into a new segment (`skip_xids`, as the torture workload's vacuum step does),
//! with checkpoints and database-wide vacuums (commit-log truncation) running, then a crash
//! that keeps every write (a process kill): every acknowledged commit must read committed
//! after recovery. (The status a 30-minute soak lost had a cause this test does not reach: a
//! block changed and evicted between its extension and the extender's buffer, see
//! `buffer::tests::a_change_made_between_an_extension_and_its_buffer_is_kept`.)

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use common::{config as base, open_db};
use quire_engine::clog::STATUS_LOG;
use quire_engine::types::Xid;
use quire_engine::vfs::{CrashOptions, SimVfs};
use quire_engine::{Column, Config, IsolationLevel, Type, Value};

fn config() -> Config {
    Config {
        track_commit_timestamp: true,
        vacuum_freeze_min_age: 0,
        autovacuum: false,
        ..base()
    }
}

#[test]
fn commits_at_a_new_commit_log_page_survive_a_kill() {
    for seed in 0..common::crash_seeds(40) {
        let vfs = Arc::new(SimVfs::new(seed));
        let db = Arc::new(open_db(&vfs, config()));
        let t = {
            let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
            let t = tx
                .create_table("t", &[Column::new("id", Type::Int)])
                .unwrap();
            tx.commit().unwrap();
            t
        };
        let acked: Arc<Mutex<Vec<Xid>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::new();
        for w in 0..3i64 {
            let (db, acked, stop) = (Arc::clone(&db), Arc::clone(&acked), Arc::clone(&stop));
            handles.push(thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Acquire) && n < 100_000 {
                    n += 1;
                    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
                    tx.insert(t, &[Value::Int(w * 1_000_000 + n)]).unwrap();
                    let xid = tx.xid().expect("an insert assigns one");
                    tx.commit().unwrap();
                    acked.lock().unwrap().push(xid);
                }
            }));
        }
        for round in 0..6 {
            let tm = db.transactions();
            let per_segment = STATUS_LOG.per_segment();
            tm.skip_xids(per_segment - tm.next_xid().0 % per_segment);
            if round % 2 == 0 {
                db.vacuum_all().unwrap();
            } else {
                db.checkpoint().unwrap();
            }
            thread::sleep(std::time::Duration::from_millis(2));
        }
        stop.store(true, Ordering::Release);
        for h in handles {
            h.join().unwrap();
        }
        let acked = acked.lock().unwrap().clone();
        let db = Arc::into_inner(db).expect("the only handle");
        drop(db);
        // A kill: every write survives, nothing more.
        vfs.crash(&CrashOptions {
            keep_unsynced_probability: 1.0,
            tear_writes: false,
        });
        let db = open_db(&vfs, config());
        let tm = db.transactions();
        let oldest = tm.oldest_xid();
        for xid in acked {
            if xid < oldest {
                continue;
            }
            assert_eq!(
                tm.did_commit(xid).ok(),
                Some(true),
                "seed {seed}: acknowledged commit of {xid:?} lost (per segment {}, offset {})",
                STATUS_LOG.per_segment(),
                xid.0 % STATUS_LOG.per_segment()
            );
        }
        db.close().unwrap();
    }
}
