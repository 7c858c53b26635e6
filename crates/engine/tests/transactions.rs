//! Transactions and the commit log under power loss: every synchronously committed
//! transaction is committed after recovery; nothing that never wrote a commit record is;
//! asynchronous commits may be lost but never turn into aborts; torn commit-log pages are
//! repaired from their WAL images; every committed transaction has its commit timestamp; no
//! transaction id is handed out twice.

mod common;

use std::path::Path;

use common::{crash, crash_seeds, new_db, open_db, power_loss};
use quire_engine::clog::{TxnStatus, XIDS_PER_PAGE};
use quire_engine::rng::SplitMix64;
use quire_engine::txn::{ProcId, TransactionManager};
use quire_engine::types::Xid;
use quire_engine::vfs::Vfs;
use quire_engine::Config;

fn config(synchronous_commit: bool) -> Config {
    Config {
        shared_buffers_bytes: 16 * 8192,
        wal_segment_size_bytes: 64 * 1024,
        wal_buffers_bytes: 1024 * 1024,
        checkpoint_timeout_s: 3600,
        synchronous_commit,
        track_commit_timestamp: true,
        max_connections: 1000,
        ..Config::default()
    }
}

/// A transaction with an id: the commit log's view of a transaction, without table work.
fn begin(t: &TransactionManager) -> (ProcId, Xid) {
    let proc = t.register().unwrap();
    (proc, t.assign_xid(proc))
}

/// An id handed out to a transaction that then vanished without a record (as if its
/// session died before writing anything).
fn burn(t: &TransactionManager) -> Xid {
    let (proc, xid) = begin(t);
    t.procs().unregister(proc);
    xid
}

fn end(t: &TransactionManager, proc: ProcId, xid: Xid, commit: bool) {
    if commit {
        t.commit(proc, xid, &[], &[]).unwrap();
    } else {
        t.abort(proc, xid, &[], &[]).unwrap();
    }
    t.procs().unregister(proc);
}

#[test]
fn statuses_across_pages_survive_a_clean_restart() {
    let (vfs, db) = new_db(1, config(true));
    let t = db.transactions();
    let mut ended = Vec::new();
    for i in 0..(2 * XIDS_PER_PAGE + 10) {
        let (proc, xid) = begin(t);
        if i % 10_000 == 0 {
            end(t, proc, xid, true);
            ended.push((xid, TxnStatus::Committed));
        } else if i % 10_000 == 1 {
            end(t, proc, xid, false);
            ended.push((xid, TxnStatus::Aborted));
        } else {
            t.procs().unregister(proc);
        }
    }
    let last = burn(t);
    assert_eq!(t.status(last).unwrap(), TxnStatus::InProgress);
    db.close().unwrap();
    let db = open_db(&vfs, config(true));
    for (xid, status) in &ended {
        assert_eq!(
            db.transactions().status(*xid).unwrap(),
            *status,
            "xid {xid}"
        );
    }
    assert!(burn(db.transactions()) > last, "an id was handed out twice");
}

/// What the workload did with each transaction.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fate {
    Committed { acked: bool },
    Aborted,
    Open,
}

fn crash_once(seed: u64, sync: bool) -> (usize, usize) {
    let (vfs, db) = new_db(seed, config(sync));
    let mut rng = SplitMix64::new(seed * 7 + 1);
    let t = db.transactions();
    let mut fates: Vec<(Xid, Fate)> = Vec::new();
    let n = 30 + rng.next() % 120;
    for _ in 0..n {
        // Spread ids over many 512-byte sectors and several pages, so torn commit-log
        // pages mix old and new sectors.
        for _ in 0..rng.next() % 3000 {
            burn(t);
        }
        let (proc, xid) = begin(t);
        let fate = match rng.next() % 10 {
            0..=5 => {
                end(t, proc, xid, true);
                Fate::Committed { acked: sync }
            }
            6 | 7 => {
                end(t, proc, xid, false);
                Fate::Aborted
            }
            _ => Fate::Open,
        };
        fates.push((xid, fate));
        if rng.next().is_multiple_of(25) {
            db.checkpointer().checkpoint().unwrap();
        }
        if rng.next().is_multiple_of(15) {
            db.buffer_pool().flush_all().unwrap();
        }
    }
    power_loss(db, &vfs, seed % 2 == 1);
    let db = open_db(&vfs, config(sync));
    let t = db.transactions();
    let mut committed = 0;
    for &(xid, fate) in &fates {
        let status = t.status(xid).unwrap();
        match fate {
            Fate::Committed { acked: true } => {
                assert_eq!(
                    status,
                    TxnStatus::Committed,
                    "seed {seed}: acked commit of {xid} lost"
                );
            }
            Fate::Committed { acked: false } => {
                assert_ne!(
                    status,
                    TxnStatus::Aborted,
                    "seed {seed}: async commit {xid} became an abort"
                );
            }
            Fate::Aborted => {
                assert_ne!(
                    status,
                    TxnStatus::Committed,
                    "seed {seed}: aborted {xid} is committed"
                );
            }
            Fate::Open => {
                assert_eq!(
                    status,
                    TxnStatus::InProgress,
                    "seed {seed}: open {xid} has a status"
                );
            }
        }
        if status == TxnStatus::Committed {
            committed += 1;
            assert!(
                t.commit_timestamp(xid)
                    .unwrap()
                    .is_some_and(|us| us > 1_600_000_000_000_000),
                "seed {seed}: committed {xid} has no commit timestamp"
            );
            assert!(
                t.next_xid() > xid,
                "seed {seed}: next id {} reuses {xid}",
                t.next_xid()
            );
        }
    }
    db.buffer_pool().check_invariants().unwrap();
    (fates.len(), committed)
}

#[test]
fn commits_survive_power_loss_and_torn_commit_log_pages_are_repaired() {
    let seeds = crash_seeds(300);
    let (mut txns, mut committed) = (0, 0);
    for seed in 0..seeds {
        let (t, c) = crash_once(seed, true);
        txns += t;
        committed += c;
    }
    for seed in 0..seeds / 3 {
        crash_once(10_000 + seed, false);
    }
    eprintln!("{seeds} + {} crashes: {txns} transactions, {committed} committed after recovery, 0 failures", seeds / 3);
    assert!(committed > 0);
}

/// Two committers whose commit records are in one order and whose commit-log bits are set in
/// the other (records are inserted before the page is locked), the second setting its bit
/// first and so logging the page's first image after the checkpoint: redo must not let that
/// image, which lacks the other's bit, overwrite it (found by the kill -9 test).
#[test]
fn a_commit_log_image_never_erases_an_earlier_commit() {
    use quire_engine::clog::STATUS_LOG;
    use quire_engine::txn::{EndRecord, TxnRecord};
    use quire_engine::wal::WalRecord;
    let (vfs, db) = new_db(9, config(true));
    db.checkpointer().checkpoint().unwrap();
    let t = db.transactions();
    let (_, a) = begin(t);
    let (_, b) = begin(t);
    let record = |xid: Xid| {
        let mut main = Vec::new();
        EndRecord::default().encode(&mut main);
        let rec = WalRecord::new(xid, TxnRecord::Commit, &[], &main);
        db.wal().insert(&rec).unwrap().1
    };
    let end_a = record(a);
    let end_b = record(b);
    let committed = TxnStatus::Committed as u64;
    STATUS_LOG
        .set(db.wal(), db.buffer_pool(), b, committed, end_b)
        .unwrap();
    STATUS_LOG
        .set(db.wal(), db.buffer_pool(), a, committed, end_a)
        .unwrap();
    db.wal().flush(db.wal().insert_lsn()).unwrap();
    crash(db, &vfs);
    let db = open_db(&vfs, config(true));
    assert_eq!(db.transactions().status(a).unwrap(), TxnStatus::Committed);
    assert_eq!(db.transactions().status(b).unwrap(), TxnStatus::Committed);
}

/// A crash between creating the next WAL segment and sizing it leaves an empty file; the
/// writer must size it, or records in its partial last page are unreadable and a restart
/// loses them (found by the kill -9 test).
#[test]
fn an_empty_wal_segment_left_by_a_crash_is_sized_before_use() {
    let (vfs, db) = new_db(10, config(true));
    let segment_bytes = config(true).wal_segment_size_bytes;
    let next_segment = db.wal().insert_lsn().segment_of(segment_bytes) + 1;
    let path = Path::new("/data/wal").join(format!("{next_segment:016X}"));
    vfs.open(&path, quire_engine::vfs::OpenMode::CreateNew)
        .unwrap();
    let t = db.transactions();
    let mut last = Xid::INVALID;
    // Bounded: each commit adds a record.
    for _ in 0..100_000 {
        if db.wal().insert_lsn().0 > next_segment * segment_bytes + 9 * 1024 {
            break;
        }
        let (proc, xid) = begin(t);
        end(t, proc, xid, true);
        last = xid;
    }
    assert!(db.wal().insert_lsn().0 > next_segment * segment_bytes);
    db.close().unwrap();
    let db = open_db(&vfs, config(true));
    assert_eq!(
        db.transactions().status(last).unwrap(),
        TxnStatus::Committed
    );
    assert!(db.transactions().next_xid() > last, "ids restarted");
}
