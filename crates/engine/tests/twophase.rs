//! Two-phase commit as a PostgreSQL user knows it (`PREPARE TRANSACTION`, `COMMIT PREPARED`,
//! `ROLLBACK PREPARED`, `pg_prepared_xacts`), through the embedded API:
//!
//! - the errors and their SQLSTATEs: disabled (55000), limit reached (53200), duplicate gid
//!   (42710), gid too long (22023), unknown gid (42704), failed transaction (25P02) — and a
//!   PREPARE that fails rolls its transaction back;
//! - a prepared transaction's changes are invisible until COMMIT PREPARED, discarded by
//!   ROLLBACK PREPARED; it is listed by gid, with its id and time;
//! - it keeps its row locks, table locks and the names of tables it creates until it is
//!   finished, from another session, also across a clean restart and a crash; a concurrent
//!   COMMIT PREPARED and ROLLBACK PREPARED of one gid finish it exactly once;
//! - seed 003's figure: COMMIT PREPARED opens no file and reads no WAL with
//!   `twophase_state = memory`, one open and one WAL read with `reread_wal`, and reads the
//!   state file once a checkpoint wrote one;
//! - recovery from the WAL, from a state file whose prepare record is before the redo point
//!   (its WAL segment recycled), and removal of a stale state file;
//! - TRUNCATE and DROP TABLE in a prepared transaction keep the old file until COMMIT
//!   PREPARED; ROLLBACK PREPARED removes the new file and brings the old rows back.
//!
//! Two shapes are written once and driven by tables: a refused PREPARE ([`refuse`]), and the
//! life of a prepared transaction ([`lifecycle`]: what it changes, what happens to the
//! database while it is prepared, whether COMMIT or ROLLBACK PREPARED ends it, and whether a
//! session waits for its locks meanwhile), each row of [`lifecycle_tests!`] a test.
//!
//! Blocked statements run on their own thread; the test waits until the lock manager reports
//! the session waiting (bounded poll), never on a sleep.

mod common;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::{
    blocks_until, committed, committing, crash, create_accounts, exists, file_of, gids, ids_in,
    lookup_error, new_db, open_db, pair, rel_of, rows_in, table_is_locked, try_rows_in,
};
use quire_engine::config::TwophaseStateMode;
use quire_engine::types::Xid;
use quire_engine::vfs::{OpKind, SimVfs, Vfs};
use quire_engine::{
    Changed, Column, Config, Database, Error, IsolationLevel, IsolationLevel::*, LockMode,
    RelFileLocator, Result, TableId, Tid, Transaction, Type, Value,
};

/// The rows of `accounts` as [`create_accounts`] makes them.
const START: &[(i64, i64)] = &[(1, 100), (2, 200), (3, 300)];

fn config(max_prepared: usize) -> Config {
    Config {
        max_prepared_transactions: max_prepared,
        ..common::config()
    }
}

/// `accounts (id, balance)` holding [`START`]; the table and the rows' addresses by id.
fn setup(db: &Database) -> (TableId, Vec<Tid>) {
    committing(db, |tx| create_accounts(tx, 3))
}

fn state_file(xid: Xid) -> PathBuf {
    PathBuf::from(format!("/data/pg_twophase/{:016X}", xid.0))
}

fn add(tx: &Transaction, t: TableId, tid: Tid, delta: i64) -> Result<Changed> {
    tx.update_with(t, tid, |row| {
        let (id, v) = pair(row);
        Some(vec![Value::Int(id), Value::Int(v + delta)])
    })
}

fn opens(vfs: &SimVfs) -> u64 {
    vfs.counters().snapshot().get(OpKind::Open)
}

/// WAL records read back (from the WAL buffers, from segment files).
fn wal_reads(db: &Database) -> (u64, u64) {
    let s = db.wal().stats();
    (
        s.reads_from_buffers.load(Ordering::Relaxed),
        s.reads_from_files.load(Ordering::Relaxed),
    )
}

/// The two-phase counters: (state reads from WAL, state reads from files, files written).
fn twophase_reads(db: &Database) -> (u64, u64, u64) {
    let s = db.twophase_stats();
    (
        s.state_reads_from_wal.load(Ordering::Relaxed),
        s.state_reads_from_files.load(Ordering::Relaxed),
        s.state_files_written.load(Ordering::Relaxed),
    )
}

// ---------------------------------------------------------------------------- errors

/// A PREPARE TRANSACTION that must be refused.
struct Refusal<'a> {
    seed: u64,
    /// `max_prepared_transactions` (0, the default: PREPARE is disabled).
    max_prepared: usize,
    /// Prepared first, in this order, each inserting a row (10 + its index, 0).
    prepared_before: &'a [&'a str],
    /// Whether a statement of the transaction fails (42804) before its PREPARE.
    failed_first: bool,
    gid: &'a str,
    sqlstate: &'static str,
    /// What the error message must name.
    says: &'a str,
}

/// What a refusal leaves for the test's own checks.
struct Refused {
    db: Database,
    t: TableId,
    err: Error,
    /// The ids of `prepared_before`.
    xids: Vec<Xid>,
}

/// Prepares `prepared_before`; then a transaction adds 2 to row 2 (and fails a statement, if
/// `failed_first`), and its PREPARE is refused with the SQLSTATE and message. That rolls it
/// back: it is not running and did not commit, nothing is listed beyond `prepared_before`, the
/// rows are unchanged, its row lock is gone and, when nothing else holds one, its table lock.
fn refuse(r: &Refusal) -> Refused {
    let (_vfs, db) = new_db(r.seed, config(r.max_prepared));
    let (t, tids) = setup(&db);
    let mut xids = Vec::new();
    for (id, gid) in (10..).zip(r.prepared_before) {
        let tx = db.begin(ReadCommitted).unwrap();
        tx.insert(t, &[Value::Int(id), Value::Int(0)]).unwrap();
        xids.push(tx.xid().unwrap());
        tx.prepare(gid).unwrap();
    }
    let tx = db.begin(ReadCommitted).unwrap();
    add(&tx, t, tids[1], 2).unwrap();
    let xid = tx.xid().unwrap();
    if r.failed_first {
        let err = tx.insert(t, &[Value::Int(5)]).unwrap_err();
        assert_eq!(err.sqlstate(), "42804", "{err}");
    }
    let err = tx.prepare(r.gid).unwrap_err();
    assert_eq!(err.sqlstate(), r.sqlstate, "{err}");
    assert!(
        err.to_string().contains(r.says),
        "the error should name {}: {err}",
        r.says
    );
    assert_eq!(gids(&db), r.prepared_before);
    assert!(!db.transactions().is_running(xid));
    assert!(!db.transactions().did_commit(xid).unwrap());
    assert_eq!(committed(&db, t), START);
    if r.prepared_before.is_empty() {
        assert!(
            !table_is_locked(&db, t),
            "the rolled-back transaction's lock"
        );
    }
    // Its row lock is gone: row 2 is changed at once (no wait here).
    let tx = db.begin(ReadCommitted).unwrap();
    assert!(matches!(
        add(&tx, t, tids[1], 0).unwrap(),
        Changed::Done(..)
    ));
    tx.rollback().unwrap();
    Refused { db, t, err, xids }
}

#[test]
fn prepare_is_disabled_by_default_and_rolls_the_transaction_back() {
    let r = refuse(&Refusal {
        seed: 1,
        max_prepared: 0,
        prepared_before: &[],
        failed_first: false,
        gid: "g1",
        sqlstate: "55000",
        // The setting that enables PREPARE.
        says: "max_prepared_transactions",
    });
    assert_eq!(Config::default().max_prepared_transactions, 0);
    assert_eq!(r.db.config().max_prepared_transactions, 0);
    r.db.close().unwrap();
}

#[test]
fn prepare_beyond_max_prepared_transactions_fails_53200_naming_the_setting() {
    let r = refuse(&Refusal {
        seed: 2,
        max_prepared: 2,
        prepared_before: &["g1", "g2"],
        failed_first: false,
        gid: "g3",
        sqlstate: "53200",
        says: "max_prepared_transactions",
    });
    let (db, t) = (r.db, r.t);
    match &r.err {
        Error::OutOfSharedMemory { what, hint } => {
            assert!(what.contains("prepared transactions"), "{what}");
            assert!(hint.contains("max_prepared_transactions"), "{hint}");
            assert!(
                hint.contains('2'),
                "the hint gives the current value: {hint}"
            );
        }
        other => panic!("expected OutOfSharedMemory, got {other:?}"),
    }
    // A finished one frees its slot.
    db.commit_prepared("g1").unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(13), Value::Int(0)]).unwrap();
    tx.prepare("g3").unwrap();
    assert_eq!(gids(&db), ["g2", "g3"]);
    db.rollback_prepared("g2").unwrap();
    db.commit_prepared("g3").unwrap();
    // Row 2's update was rolled back by the failed PREPARE, 11 by ROLLBACK PREPARED.
    assert_eq!(
        committed(&db, t),
        vec![(1, 100), (2, 200), (3, 300), (10, 0), (13, 0)]
    );
    db.close().unwrap();
}

#[test]
fn a_duplicate_gid_fails_42710_and_the_first_transaction_stays_prepared() {
    let r = refuse(&Refusal {
        seed: 3,
        max_prepared: 4,
        prepared_before: &["dup"],
        failed_first: false,
        gid: "dup",
        sqlstate: "42710",
        says: "\"dup\"",
    });
    let (db, t) = (r.db, r.t);
    // The first one is still prepared, untouched.
    let listed = db.prepared_transactions();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].gid.as_str(), listed[0].xid), ("dup", r.xids[0]));
    assert!(db.transactions().is_running(r.xids[0]));
    db.commit_prepared("dup").unwrap();
    assert_eq!(
        committed(&db, t),
        vec![(1, 100), (2, 200), (3, 300), (10, 0)]
    );
    db.close().unwrap();
}

#[test]
fn a_gid_longer_than_200_bytes_fails_22023() {
    let r = refuse(&Refusal {
        seed: 4,
        max_prepared: 4,
        prepared_before: &[],
        failed_first: false,
        gid: &"x".repeat(201),
        sqlstate: "22023",
        says: "too long",
    });
    let (db, t) = (r.db, r.t);
    // 200 bytes is the limit itself (PostgreSQL's GIDSIZE), counted in bytes, not chars.
    let at_limit = "y".repeat(200);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(5), Value::Int(500)]).unwrap();
    tx.prepare(&at_limit).unwrap();
    let multibyte = "é".repeat(101); // 202 bytes, 101 chars
    let tx = db.begin(ReadCommitted).unwrap();
    let err = tx.prepare(&multibyte).unwrap_err();
    assert_eq!(err.sqlstate(), "22023", "{err}");
    assert_eq!(gids(&db), std::slice::from_ref(&at_limit));
    db.commit_prepared(&at_limit).unwrap();
    assert_eq!(
        committed(&db, t),
        vec![(1, 100), (2, 200), (3, 300), (5, 500)]
    );
    db.close().unwrap();
}

#[test]
fn preparing_a_failed_transaction_fails_25p02_and_rolls_it_back() {
    let r = refuse(&Refusal {
        seed: 6,
        max_prepared: 4,
        prepared_before: &[],
        failed_first: true,
        gid: "failed",
        sqlstate: "25P02",
        says: "current transaction is aborted",
    });
    let (db, t) = (r.db, r.t);
    // The gid was not used up.
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(6), Value::Int(600)]).unwrap();
    tx.prepare("failed").unwrap();
    db.commit_prepared("failed").unwrap();
    assert_eq!(
        committed(&db, t),
        vec![(1, 100), (2, 200), (3, 300), (6, 600)]
    );
    db.close().unwrap();
}

#[test]
fn finishing_an_unknown_gid_fails_42704() {
    let (_vfs, db) = new_db(5, config(4));
    let (t, _) = setup(&db);
    for err in [
        db.commit_prepared("nope").unwrap_err(),
        db.rollback_prepared("nope").unwrap_err(),
    ] {
        assert_eq!(err.sqlstate(), "42704", "{err}");
        assert!(err.to_string().contains("\"nope\""), "{err}");
    }
    // Finished once: the gid is unknown afterwards.
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(4), Value::Int(400)]).unwrap();
    tx.prepare("once").unwrap();
    db.commit_prepared("once").unwrap();
    assert_eq!(db.commit_prepared("once").unwrap_err().sqlstate(), "42704");
    assert_eq!(
        db.rollback_prepared("once").unwrap_err().sqlstate(),
        "42704"
    );
    assert_eq!(
        committed(&db, t),
        vec![(1, 100), (2, 200), (3, 300), (4, 400)]
    );
    db.close().unwrap();
}

// ---------------------------------------------------------------------------- the life of one

/// What the prepared transaction does to `accounts` ([`START`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    /// Adds 5 to row 1, deletes row 2, inserts (4, 400): ROW EXCLUSIVE and row locks.
    Rows,
    /// TRUNCATE, then inserts (7, 700): ACCESS EXCLUSIVE, and a new relation file.
    Truncate,
    /// DROP TABLE: ACCESS EXCLUSIVE, and the file goes at COMMIT PREPARED.
    DropTable,
}

/// What happens to the database while the transaction is prepared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Between {
    Nothing,
    /// A clean shutdown (prepared transactions do not keep it from happening) and a restart.
    Restart,
    /// A crash: recovery finds it in the WAL.
    Crash,
    /// Its pages reach the disk (their tuples carry its id), then a crash.
    FlushAndCrash,
    /// A checkpoint writes its state file, then enough WAL and checkpoints to recycle the
    /// segment holding its prepare record, then a crash: only the state file can tell what
    /// it did.
    RecycleAndCrash,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Finish {
    CommitPrepared,
    RollbackPrepared,
}

/// One life of a prepared transaction.
struct Case {
    seed: u64,
    change: Change,
    /// Where COMMIT and ROLLBACK PREPARED read its state from.
    mode: TwophaseStateMode,
    between: Between,
    finish: Finish,
    /// A session at this level that waits for the prepared transaction's lock until it ends:
    /// an update of row 1 after [`Change::Rows`], a scan after TRUNCATE or DROP.
    waiter: Option<IsolationLevel>,
}

use Between::{Crash, FlushAndCrash, Nothing, RecycleAndCrash, Restart};
use Change::{DropTable, Rows, Truncate};
use Finish::{CommitPrepared, RollbackPrepared};
use TwophaseStateMode::{Memory, RereadWal};

/// One test per row, named after what it shows.
macro_rules! lifecycle_tests {
    ($($test:ident: $seed:literal, $change:ident, $mode:ident, $between:ident, $finish:ident, $waiter:expr;)*) => {
        $(
            #[test]
            fn $test() {
                lifecycle(&Case {
                    seed: $seed,
                    change: $change,
                    mode: $mode,
                    between: $between,
                    finish: $finish,
                    waiter: $waiter,
                });
            }
        )*
    };
}

lifecycle_tests! {
    // test:
    //     seed, change, twophase_state, between, finish, waiter;
    prepared_changes_are_invisible_until_commit_prepared:
        7, Rows, Memory, Nothing, CommitPrepared, None;
    rollback_prepared_discards_the_changes_and_releases_the_locks:
        8, Rows, Memory, Nothing, RollbackPrepared, None;
    a_prepared_transaction_keeps_its_row_locks_read_committed_then_updates_the_new_version:
        10, Rows, Memory, Nothing, CommitPrepared, Some(ReadCommitted);
    a_prepared_transaction_keeps_its_row_locks_repeatable_read_then_fails_40001:
        10, Rows, Memory, Nothing, CommitPrepared, Some(RepeatableRead);
    a_row_lock_waiter_proceeds_on_the_old_version_after_rollback_prepared:
        27, Rows, Memory, Nothing, RollbackPrepared, Some(RepeatableRead);
    a_prepared_transaction_survives_a_clean_restart_with_its_locks:
        15, Rows, Memory, Restart, CommitPrepared, Some(ReadCommitted);
    a_prepared_transaction_survives_a_crash_and_can_be_rolled_back:
        16, Rows, Memory, FlushAndCrash, RollbackPrepared, Some(ReadCommitted);
    reread_wal_reads_the_state_of_a_prepared_transaction_from_the_wal:
        30, Rows, RereadWal, Nothing, CommitPrepared, Some(ReadCommitted);
    truncate_in_a_prepared_transaction_drops_the_old_file_at_commit_prepared:
        19, Truncate, Memory, Nothing, CommitPrepared, Some(ReadCommitted);
    truncate_in_a_prepared_transaction_rolled_back_brings_the_old_rows_back:
        20, Truncate, Memory, Nothing, RollbackPrepared, None;
    truncate_in_a_prepared_transaction_rolled_back_after_a_restart:
        28, Truncate, Memory, Restart, RollbackPrepared, Some(ReadCommitted);
    reread_wal_recovers_a_prepared_truncate_after_a_crash:
        25, Truncate, RereadWal, Crash, CommitPrepared, None;
    a_prepare_record_before_the_redo_point_is_recovered_from_its_state_file:
        17, Truncate, Memory, RecycleAndCrash, CommitPrepared, None;
    drop_table_in_a_prepared_transaction_keeps_the_file_until_commit_prepared:
        21, DropTable, Memory, Nothing, CommitPrepared, Some(ReadCommitted);
    drop_table_in_a_prepared_transaction_rolled_back_keeps_the_table:
        22, DropTable, Memory, Nothing, RollbackPrepared, None;
    drop_table_prepared_before_a_crash_is_committed_after_it:
        24, DropTable, Memory, Crash, CommitPrepared, None;
    drop_table_prepared_before_a_crash_can_be_rolled_back_after_it:
        29, DropTable, Memory, FlushAndCrash, RollbackPrepared, Some(ReadCommitted);
}

const GID: &str = "the-prepared-one";

/// The prepared transaction, as the checks need it.
struct Prepared {
    t: TableId,
    tids: Vec<Tid>,
    xid: Xid,
    /// The table's file before, and after a TRUNCATE.
    old_rel: RelFileLocator,
    new_rel: Option<RelFileLocator>,
    /// (gid, xid, prepared at) as listed right after PREPARE.
    listed: Vec<(String, Xid, u64)>,
}

impl Case {
    fn config(&self) -> Config {
        let mut config = Config {
            twophase_state: self.mode,
            ..config(4)
        };
        if self.between == RecycleAndCrash {
            // Small WAL segments, so that a few thousand rows fill several and checkpoints
            // recycle them.
            config.wal_segment_size_bytes = 64 * 1024;
        }
        config
    }

    /// The rows once it ended, before any waiter's change; None: the table is gone.
    fn rows_after(&self) -> Option<Vec<(i64, i64)>> {
        match (self.change, self.finish) {
            (_, RollbackPrepared) => Some(START.to_vec()),
            (Rows, CommitPrepared) => Some(vec![(1, 105), (3, 300), (4, 400)]),
            (Truncate, CommitPrepared) => Some(vec![(7, 700)]),
            (DropTable, CommitPrepared) => None,
        }
    }

    /// The files that must be there once it ended, and the ones that must be gone.
    fn files_after(&self, p: &Prepared) -> (Option<RelFileLocator>, Option<RelFileLocator>) {
        match (self.change, self.finish) {
            (Truncate, CommitPrepared) => (p.new_rel, Some(p.old_rel)),
            (Truncate, RollbackPrepared) => (Some(p.old_rel), p.new_rel),
            (DropTable, CommitPrepared) => (None, Some(p.old_rel)),
            _ => (Some(p.old_rel), None),
        }
    }
}

/// Prepares the case's change, lets `between` happen, ends the transaction with a waiter if
/// the case has one, and checks every step: while it is prepared (listed, running, holding
/// its locks, its changes invisible, its files kept, also after the restart or crash),
/// where COMMIT or ROLLBACK PREPARED reads its state from, and afterwards (gone from the list,
/// its outcome in the commit log, the rows and files of that outcome, no lock left) — also
/// after another restart or crash of the same kind.
fn lifecycle(c: &Case) {
    let (vfs, db) = new_db(c.seed, c.config());
    let p = prepare(&db, c.change);
    if c.change != Rows {
        assert!(
            db.buffer_pool().cached_buffers_of(p.old_rel) > 0,
            "buffers of the old file are kept while prepared"
        );
    }
    check_prepared(&db, &vfs, c, &p);
    let db = pass(db, &vfs, c, &p, c.between);
    if c.between != Nothing {
        check_prepared(&db, &vfs, c, &p);
        assert!(
            exists(&vfs, &state_file(p.xid)),
            "the shutdown or end-of-recovery checkpoint wrote its state file"
        );
        let next = db.begin(ReadCommitted).unwrap();
        next.create_table("next", &[Column::new("id", Type::Int)])
            .unwrap();
        assert!(next.xid().unwrap() > p.xid, "an id handed out twice");
        next.rollback().unwrap();
    }
    let rows = finish(&db, &vfs, c, &p);
    check_ended(&db, &vfs, c, &p, rows.as_deref());
    let again = match c.between {
        Nothing => Nothing,
        Restart => Restart,
        Crash | FlushAndCrash | RecycleAndCrash => Crash,
    };
    let db = pass(db, &vfs, c, &p, again);
    check_ended(&db, &vfs, c, &p, rows.as_deref());
    db.close().unwrap();
}

/// Runs the change in a transaction and prepares it.
fn prepare(db: &Database, change: Change) -> Prepared {
    let (t, tids) = setup(db);
    let old_rel = rel_of(db, t);
    let tx = db.begin(ReadCommitted).unwrap();
    let mut new_rel = None;
    match change {
        Rows => {
            add(&tx, t, tids[0], 5).unwrap();
            assert!(matches!(tx.delete(t, tids[1]).unwrap(), Changed::Done(..)));
            tx.insert(t, &[Value::Int(4), Value::Int(400)]).unwrap();
        }
        Truncate => {
            tx.truncate(t).unwrap();
            tx.insert(t, &[Value::Int(7), Value::Int(700)]).unwrap();
            let rel = tx.table_def(t).unwrap().rel;
            assert_ne!(rel, old_rel, "TRUNCATE gives a new relation file");
            new_rel = Some(rel);
        }
        DropTable => tx.drop_table(t).unwrap(),
    }
    let xid = tx.xid().unwrap();
    tx.prepare(GID).unwrap();
    let listed = listing(db);
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].0.as_str(), listed[0].1), (GID, xid));
    Prepared {
        t,
        tids,
        xid,
        old_rel,
        new_rel,
        listed,
    }
}

fn listing(db: &Database) -> Vec<(String, Xid, u64)> {
    db.prepared_transactions()
        .into_iter()
        .map(|p| (p.gid, p.xid, p.prepared_at_micros))
        .collect()
}

/// Lets `between` happen to the database; returns it running again.
fn pass(db: Database, vfs: &Arc<SimVfs>, c: &Case, p: &Prepared, between: Between) -> Database {
    match between {
        Nothing => return db,
        Restart => db.close().unwrap(),
        Crash => crash(db, vfs),
        FlushAndCrash => {
            db.buffer_pool().flush_all().unwrap();
            crash(db, vfs);
        }
        RecycleAndCrash => {
            recycle_the_prepare_record(&db, vfs, p.xid);
            crash(db, vfs);
        }
    }
    let db = open_db(vfs, c.config());
    let replayed = db.recovery_stats().records;
    if between == Restart {
        assert_eq!(replayed, 0, "a clean stop replays nothing");
    } else {
        assert!(replayed > 0, "a crash leaves WAL to replay");
    }
    db
}

/// A checkpoint writes the state file; then much more WAL, and checkpoints that recycle the
/// segment holding the prepare record.
fn recycle_the_prepare_record(db: &Database, vfs: &SimVfs, xid: Xid) {
    db.checkpointer().checkpoint().unwrap();
    assert!(exists(vfs, &state_file(xid)));
    let other = committing(db, |tx| {
        tx.create_table("other", &[Column::new("pad", Type::Text)])
            .unwrap()
    });
    for round in 0..4 {
        committing(db, |tx| {
            for i in 0..200 {
                let pad = format!("{round}-{i}-{}", "p".repeat(200));
                tx.insert(other, &[Value::Text(pad)]).unwrap();
            }
        });
        db.checkpointer().checkpoint().unwrap();
    }
    assert!(
        db.checkpointer()
            .stats()
            .wal_segments_removed
            .load(Ordering::Relaxed)
            > 0,
        "no WAL segment was recycled: the test does not test what it says"
    );
    committing(db, |tx| {
        tx.insert(other, &[Value::Text("after the last checkpoint".into())])
            .unwrap()
    });
}

/// While it is prepared: listed as it was, running, holding its table lock (NOWAIT locks
/// fail), its changes invisible, its files kept.
fn check_prepared(db: &Database, vfs: &SimVfs, c: &Case, p: &Prepared) {
    assert_eq!(listing(db), p.listed, "same gid, xid and time");
    assert!(
        db.transactions().is_running(p.xid),
        "prepared = still running"
    );
    assert!(table_is_locked(db, p.t), "its table lock");
    let other = db.begin(ReadCommitted).unwrap();
    let err = other.lock_table(p.t, LockMode::Share, true).unwrap_err();
    assert_eq!(err.sqlstate(), "55P03", "{err}");
    other.rollback().unwrap();
    assert!(exists(vfs, &file_of(db, p.old_rel)), "old file kept");
    if let Some(new_rel) = p.new_rel {
        assert!(exists(vfs, &file_of(db, new_rel)));
    }
    match c.change {
        Rows => assert_eq!(committed(db, p.t), START),
        // The table is still there for others (the drop is not committed), but locked.
        DropTable => assert_eq!(committing(db, |tx| tx.table("accounts").unwrap()), p.t),
        // A reader would wait for the lock.
        Truncate => {}
    }
}

/// Ends the prepared transaction (while a waiter waits for it, if the case has one, and with
/// snapshots taken before it ended); checks what it read its state from; returns the rows
/// that must now be committed (None: the table is gone).
fn finish(db: &Database, vfs: &SimVfs, c: &Case, p: &Prepared) -> Option<Vec<(i64, i64)>> {
    let mut rows = c.rows_after();
    // Snapshots taken while it is prepared (only with row changes: a reader would wait for
    // TRUNCATE's or DROP's lock).
    let snapshots = (c.change == Rows).then(|| {
        let rr = db.begin(RepeatableRead).unwrap();
        assert_eq!(rows_in(&rr, p.t), START);
        let rc = db.begin(ReadCommitted).unwrap();
        assert_eq!(rows_in(&rc, p.t), START);
        (rr, rc)
    });
    let state_file_written = exists(vfs, &state_file(p.xid));
    let (from_wal, from_files, _) = twophase_reads(db);
    let wal = wal_reads(db);
    let end = || match c.finish {
        CommitPrepared => db.commit_prepared(GID).unwrap(),
        RollbackPrepared => db.rollback_prepared(GID).unwrap(),
    };
    match c.waiter {
        None => end(),
        Some(level) => wait_for_the_end(db, c, p, level, end, &mut rows),
    }
    let (from_wal2, from_files2, _) = twophase_reads(db);
    let state_reads = (from_wal2 - from_wal, from_files2 - from_files);
    match (c.mode, state_file_written) {
        (Memory, _) => assert_eq!(state_reads, (0, 0), "memory: nothing read"),
        (RereadWal, true) => assert_eq!(state_reads, (0, 1), "read from its state file"),
        (RereadWal, false) => assert_eq!(state_reads, (1, 0), "read from the WAL"),
    }
    if (c.mode, state_file_written) == (RereadWal, false) {
        assert_ne!(wal_reads(db), wal, "the WAL is read");
    } else {
        assert_eq!(wal_reads(db), wal, "no WAL read");
    }
    if let Some((rr, rc)) = snapshots {
        assert_eq!(
            rows_in(&rc, p.t),
            rows.clone().expect("rows change, the table stays"),
            "READ COMMITTED: a new snapshot per call"
        );
        assert_eq!(
            rows_in(&rr, p.t),
            START,
            "REPEATABLE READ: the old snapshot"
        );
        rr.commit().unwrap();
        rc.commit().unwrap();
    }
    rows
}

/// A session at `level` waits for the prepared transaction's lock; `end` (on this thread,
/// another than the waiter's) releases it. After a row change the waiter adds 1 to row 1
/// (its change is added to `rows`); after TRUNCATE or DROP it scans the table.
fn wait_for_the_end(
    db: &Database,
    c: &Case,
    p: &Prepared,
    level: IsolationLevel,
    end: impl FnOnce(),
    rows: &mut Option<Vec<(i64, i64)>>,
) {
    let waiter = db.begin(level).unwrap();
    if c.change == Rows {
        // Its snapshot is taken before the end.
        assert_eq!(rows_in(&waiter, p.t), START);
        let (waiter, r) = blocks_until(db, waiter, |w| add(w, p.t, p.tids[0], 1), end);
        let rows = rows.as_mut().expect("the table stays");
        if (level, c.finish) == (RepeatableRead, CommitPrepared) {
            // The row changed after the waiter's snapshot.
            let err = r.unwrap_err();
            assert_eq!(err.sqlstate(), "40001", "{err}");
            assert_eq!(waiter.commit().unwrap_err().sqlstate(), "25P02");
        } else {
            // After a commit the waiter updates the new version; after a rollback even
            // REPEATABLE READ goes on: the row did not change after all.
            rows[0].1 += 1;
            match r.unwrap() {
                Changed::Done(_, row) => assert_eq!(pair(&row), rows[0]),
                Changed::Skipped => panic!("the row was skipped"),
            }
            waiter.commit().unwrap();
        }
        return;
    }
    // A reader waits for the ACCESS EXCLUSIVE lock, then sees the outcome's table and file.
    let (waiter, r) = blocks_until(db, waiter, |w| try_rows_in(w, p.t), end);
    if let Some(rows) = rows {
        assert_eq!(r.unwrap(), *rows);
        waiter.commit().unwrap();
    } else {
        assert_eq!(r.unwrap_err().sqlstate(), "42P01");
        waiter.rollback().unwrap();
    }
}

/// Once it ended: not listed, not running, its outcome in the commit log, its state file
/// removed, the outcome's files and rows, and no lock left on the table, its rows or its name.
fn check_ended(db: &Database, vfs: &SimVfs, c: &Case, p: &Prepared, rows: Option<&[(i64, i64)]>) {
    assert!(db.prepared_transactions().is_empty());
    assert!(!db.transactions().is_running(p.xid));
    assert_eq!(
        db.transactions().did_commit(p.xid).unwrap(),
        c.finish == CommitPrepared
    );
    assert!(!exists(vfs, &state_file(p.xid)), "state file removed");
    let (kept, dropped) = c.files_after(p);
    if let Some(rel) = kept {
        assert!(exists(vfs, &file_of(db, rel)));
        assert_eq!(rel_of(db, p.t), rel);
    }
    if let Some(rel) = dropped {
        assert!(!exists(vfs, &file_of(db, rel)), "file dropped");
        assert_eq!(db.buffer_pool().cached_buffers_of(rel), 0);
    }
    let Some(rows) = rows else {
        assert_eq!(lookup_error(db, "accounts"), Some("42P01"));
        return;
    };
    assert_eq!(committed(db, p.t), rows);
    assert!(!table_is_locked(db, p.t));
    // Every row can be changed at once: no row lock is left.
    let tx = db.begin(RepeatableRead).unwrap();
    let tids: Vec<Tid> = tx.scan(p.t).unwrap().map(|r| r.unwrap().0).collect();
    for tid in tids {
        assert!(matches!(add(&tx, p.t, tid, 0).unwrap(), Changed::Done(..)));
    }
    tx.rollback().unwrap();
    // The name is free of locks: a CREATE of the same name fails as a duplicate, at once.
    let tx = db.begin(ReadCommitted).unwrap();
    let err = tx
        .create_table("accounts", &[Column::new("id", Type::Int)])
        .unwrap_err();
    assert_eq!(err.sqlstate(), "42P07", "{err}");
    tx.rollback().unwrap();
}

// ---------------------------------------------------------------------------- listing and locks

#[test]
fn prepared_transactions_are_listed_by_gid_with_xid_and_time_until_finished() {
    let (_vfs, db) = new_db(9, config(8));
    let (t, _) = setup(&db);
    let started = now_micros();
    let mut xids = Vec::new();
    for (id, gid) in (10..).zip(["b", "a", "c"]) {
        let tx = db.begin(ReadCommitted).unwrap();
        tx.insert(t, &[Value::Int(id), Value::Int(0)]).unwrap();
        xids.push((gid.to_string(), tx.xid().unwrap()));
        tx.prepare(gid).unwrap();
    }
    // A read-only transaction can be prepared too (it gets an id for it).
    let ro = db.begin(ReadCommitted).unwrap();
    assert_eq!(rows_in(&ro, t).len(), 3);
    assert_eq!(ro.xid(), None);
    ro.prepare("d-read-only").unwrap();
    let ended = now_micros();
    xids.sort();
    let listed = db.prepared_transactions();
    assert_eq!(
        listed.iter().map(|p| p.gid.as_str()).collect::<Vec<_>>(),
        ["a", "b", "c", "d-read-only"]
    );
    for (p, (gid, xid)) in listed.iter().zip(&xids) {
        assert_eq!((&p.gid, p.xid), (gid, *xid));
    }
    let mut seen_xids: Vec<Xid> = listed.iter().map(|p| p.xid).collect();
    seen_xids.sort_unstable();
    seen_xids.dedup();
    assert_eq!(seen_xids.len(), 4, "distinct ids: {listed:?}");
    for p in &listed {
        assert!(
            (started..=ended).contains(&p.prepared_at_micros),
            "{p:?} not prepared between {started} and {ended}"
        );
    }
    db.commit_prepared("b").unwrap();
    db.rollback_prepared("a").unwrap();
    db.commit_prepared("d-read-only").unwrap();
    assert_eq!(gids(&db), ["c"]);
    db.commit_prepared("c").unwrap();
    assert!(db.prepared_transactions().is_empty());
    assert_eq!(
        committed(&db, t),
        vec![(1, 100), (2, 200), (3, 300), (10, 0), (12, 0)]
    );
    db.close().unwrap();
}

fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

#[test]
fn a_prepared_transaction_keeps_its_table_locks() {
    let (_vfs, db) = new_db(11, config(4));
    let (t, _) = setup(&db);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(4), Value::Int(400)]).unwrap();
    tx.prepare("table-lock").unwrap();
    // ROW EXCLUSIVE held: ACCESS EXCLUSIVE NOWAIT fails, SHARE NOWAIT too; readers pass.
    assert!(table_is_locked(&db, t));
    let other = db.begin(ReadCommitted).unwrap();
    let err = other.lock_table(t, LockMode::Share, true).unwrap_err();
    assert_eq!(err.sqlstate(), "55P03", "{err}");
    other.rollback().unwrap();
    assert_eq!(committed(&db, t), vec![(1, 100), (2, 200), (3, 300)]);
    // A waiting ACCESS EXCLUSIVE gets it at COMMIT PREPARED.
    let waiter = db.begin(ReadCommitted).unwrap();
    let (waiter, r) = blocks_until(
        &db,
        waiter,
        |w| w.lock_table(t, LockMode::AccessExclusive, false),
        || db.commit_prepared("table-lock").unwrap(),
    );
    r.unwrap();
    assert_eq!(rows_in(&waiter, t).len(), 4);
    waiter.commit().unwrap();
    assert!(!table_is_locked(&db, t));
    db.close().unwrap();
}

// ---------------------------------------------------------------------------- seed 003

/// Runs `n` rounds of "update row 1, PREPARE, COMMIT PREPARED" and returns what the COMMIT
/// PREPAREDs did: (files opened, WAL reads from buffers, from files, state reads from WAL,
/// from files).
fn commit_prepared_cost(
    db: &Database,
    vfs: &SimVfs,
    t: TableId,
    tid: &mut Tid,
    n: usize,
    checkpoint_between: bool,
) -> [u64; 5] {
    let mut cost = [0u64; 5];
    for i in 0..n {
        let tx = db.begin(ReadCommitted).unwrap();
        match add(&tx, t, *tid, 1).unwrap() {
            Changed::Done(new, _) => *tid = new,
            Changed::Skipped => panic!("row skipped"),
        }
        let xid = tx.xid().unwrap();
        let gid = format!("prep_{i}");
        tx.prepare(&gid).unwrap();
        if checkpoint_between {
            db.checkpointer().checkpoint().unwrap();
            assert!(
                exists(vfs, &state_file(xid)),
                "checkpoint wrote no state file"
            );
        }
        let o = opens(vfs);
        let (wb, wf) = wal_reads(db);
        let (sw, sf, _) = twophase_reads(db);
        db.commit_prepared(&gid).unwrap();
        let (wb2, wf2) = wal_reads(db);
        let (sw2, sf2, _) = twophase_reads(db);
        let d = [opens(vfs) - o, wb2 - wb, wf2 - wf, sw2 - sw, sf2 - sf];
        for (c, d) in cost.iter_mut().zip(d) {
            *c += d;
        }
        assert!(!exists(vfs, &state_file(xid)), "state file left behind");
    }
    cost
}

#[test]
fn seed_003_commit_prepared_opens_no_file_and_reads_no_wal_in_memory_mode() {
    let (vfs, db) = new_db(12, config(4));
    assert_eq!(db.config().twophase_state, TwophaseStateMode::Memory);
    let (t, tids) = setup(&db);
    let mut tid = tids[0];
    let n = 20;
    let cost = commit_prepared_cost(&db, &vfs, t, &mut tid, n, false);
    assert_eq!(
        cost, [0; 5],
        "memory: [opens, wal buffer reads, wal file reads, state reads from wal, from files]"
    );

    db.set_twophase_state(TwophaseStateMode::RereadWal);
    let cost = commit_prepared_cost(&db, &vfs, t, &mut tid, n, false);
    let n = n as u64;
    assert_eq!(
        cost,
        [n, 0, n, n, 0],
        "reread_wal: one open and one WAL read (from the file) per COMMIT PREPARED"
    );
    assert_eq!(committed(&db, t), vec![(1, 140), (2, 200), (3, 300)]);
    db.close().unwrap();
}

#[test]
fn seed_003_reread_wal_from_the_start_opens_one_file_per_commit_prepared() {
    let (vfs, db) = new_db(
        13,
        Config {
            twophase_state: TwophaseStateMode::RereadWal,
            ..config(4)
        },
    );
    let (t, tids) = setup(&db);
    let mut tid = tids[0];
    let cost = commit_prepared_cost(&db, &vfs, t, &mut tid, 10, false);
    assert_eq!(cost, [10, 0, 10, 10, 0]);
    // Switched back: nothing read again.
    db.set_twophase_state(TwophaseStateMode::Memory);
    let cost = commit_prepared_cost(&db, &vfs, t, &mut tid, 10, false);
    assert_eq!(cost, [0; 5]);
    db.close().unwrap();
}

#[test]
fn seed_003_after_a_checkpoint_the_state_file_replaces_the_wal() {
    let (vfs, db) = new_db(14, config(4));
    let (t, tids) = setup(&db);
    let mut tid = tids[0];
    let (_, _, written) = twophase_reads(&db);
    // memory: the state file is written (the WAL may be recycled) but never read.
    let cost = commit_prepared_cost(&db, &vfs, t, &mut tid, 5, true);
    assert_eq!(cost, [0; 5], "memory mode after a checkpoint");
    assert_eq!(
        twophase_reads(&db).2 - written,
        5,
        "one state file per checkpoint"
    );
    // reread_wal: the state file is read (one open), not the WAL.
    db.set_twophase_state(TwophaseStateMode::RereadWal);
    let cost = commit_prepared_cost(&db, &vfs, t, &mut tid, 5, true);
    assert_eq!(cost, [5, 0, 0, 0, 5], "reread_wal mode after a checkpoint");
    assert_eq!(twophase_reads(&db).2 - written, 10);
    assert_eq!(committed(&db, t), vec![(1, 110), (2, 200), (3, 300)]);
    db.close().unwrap();
}

// ---------------------------------------------------------------------------- restarts and races

#[test]
fn a_stale_state_file_is_removed_at_startup() {
    let (vfs, db) = new_db(18, config(4));
    let (t, _) = setup(&db);
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(4), Value::Int(400)]).unwrap();
    let xid = tx.xid().unwrap();
    tx.prepare("stale").unwrap();
    db.checkpointer().checkpoint().unwrap();
    assert!(vfs.durable_contents(&state_file(xid)).is_some());
    db.commit_prepared("stale").unwrap();
    // The file's removal is not durable (PostgreSQL does not fsync the directory either):
    // after a crash it comes back. With the commit record before the redo point, only the
    // commit log can tell that it is stale.
    assert!(!exists(&vfs, &state_file(xid)));
    db.checkpointer().checkpoint().unwrap();
    assert!(
        vfs.durable_contents(&state_file(xid)).is_some(),
        "the removal became durable: the test does not test what it says"
    );
    crash(db, &vfs);
    assert!(exists(&vfs, &state_file(xid)), "the stale file is back");

    let db = open_db(&vfs, config(4));
    assert!(db.prepared_transactions().is_empty());
    assert!(!exists(&vfs, &state_file(xid)), "stale state file removed");
    assert!(db.transactions().did_commit(xid).unwrap());
    assert!(!table_is_locked(&db, t));
    assert_eq!(
        committed(&db, t),
        vec![(1, 100), (2, 200), (3, 300), (4, 400)]
    );
    db.close().unwrap();
}

#[test]
fn create_table_in_a_prepared_transaction_keeps_the_name_locked() {
    let (vfs, db) = new_db(23, config(4));
    let tx = db.begin(ReadCommitted).unwrap();
    let t = tx
        .create_table("pending", &[Column::new("id", Type::Int)])
        .unwrap();
    tx.insert(t, &[Value::Int(1)]).unwrap();
    let rel = tx.table_def(t).unwrap().rel;
    tx.prepare("create").unwrap();
    // Across a restart too: the name's lock is one of the locks a prepared one keeps.
    db.close().unwrap();
    let db = open_db(&vfs, config(4));
    assert_eq!(lookup_error(&db, "pending"), Some("42P01"));
    // A CREATE of the same name waits; after ROLLBACK PREPARED it succeeds.
    let other = db.begin(ReadCommitted).unwrap();
    let (other, r) = blocks_until(
        &db,
        other,
        |o| o.create_table("pending", &[Column::new("id", Type::Int)]),
        || db.rollback_prepared("create").unwrap(),
    );
    let t2 = r.unwrap();
    assert_ne!(t2, t);
    other.commit().unwrap();
    assert!(
        !exists(&vfs, &file_of(&db, rel)),
        "file of the rolled-back CREATE"
    );
    let probe = db.begin(ReadCommitted).unwrap();
    assert_eq!(probe.table("pending").unwrap(), t2);
    assert!(ids_in(&probe, t2).is_empty());
    probe.commit().unwrap();
    db.close().unwrap();
}

#[test]
fn concurrent_commit_and_rollback_prepared_of_one_gid_finish_it_once() {
    let (_vfs, db) = new_db(26, config(4));
    let (t, tids) = setup(&db);
    let mut tid = tids[0];
    let mut balance = 100;
    for round in 0..30 {
        let tx = db.begin(ReadCommitted).unwrap();
        match add(&tx, t, tid, 1).unwrap() {
            Changed::Done(new, _) => tid = new,
            Changed::Skipped => panic!("row skipped"),
        }
        let xid = tx.xid().unwrap();
        let gid = format!("race-{round}");
        tx.prepare(&gid).unwrap();
        let barrier = std::sync::Barrier::new(2);
        let (a, b) = std::thread::scope(|s| {
            let commit = s.spawn(|| {
                barrier.wait();
                db.commit_prepared(&gid)
            });
            let rollback = s.spawn(|| {
                barrier.wait();
                db.rollback_prepared(&gid)
            });
            (commit.join().unwrap(), rollback.join().unwrap())
        });
        let loser = match (&a, &b) {
            (Ok(()), Err(e)) | (Err(e), Ok(())) => e.sqlstate(),
            _ => panic!("round {round}: exactly one must finish it: {a:?} {b:?}"),
        };
        assert!(
            loser == "55000" || loser == "42704",
            "round {round}: the loser got {loser}"
        );
        assert!(db.prepared_transactions().is_empty());
        assert!(!db.transactions().is_running(xid));
        if a.is_ok() {
            assert!(db.transactions().did_commit(xid).unwrap());
            balance += 1;
        } else {
            assert!(!db.transactions().did_commit(xid).unwrap());
            // The update was rolled back: the row is at its old address.
            let tx = db.begin(ReadCommitted).unwrap();
            tid = tx
                .scan(t)
                .unwrap()
                .map(Result::unwrap)
                .find(|(_, row)| pair(row).0 == 1)
                .unwrap()
                .0;
            tx.commit().unwrap();
        }
        assert_eq!(committed(&db, t)[0], (1, balance), "round {round}");
    }
    db.close().unwrap();
}

#[test]
fn a_prepared_transactions_advisory_lock_survives_a_crash_and_ends_with_it() {
    use quire_engine::{AdvisoryKey, AdvisoryRequest, LockOwner};
    let (vfs, db) = common::new_db(11, config(2));
    setup(&db);
    let req = |key, session, try_only| AdvisoryRequest {
        key,
        shared: false,
        session,
        try_only,
    };
    let key = AdvisoryKey::Pair(-1, 7);
    let tx = db.begin_as(ReadCommitted, LockOwner::backend(41)).unwrap();
    assert!(tx.advisory_lock(req(key, false, false)).unwrap());
    // A session-level lock of the same session does not go with the prepared transaction.
    assert!(tx
        .advisory_lock(req(AdvisoryKey::Bigint(9), true, false))
        .unwrap());
    tx.prepare("adv").unwrap();
    let other = db.begin_as(ReadCommitted, LockOwner::backend(42)).unwrap();
    assert!(!other.advisory_lock(req(key, false, true)).unwrap());
    assert!(!other
        .advisory_lock(req(AdvisoryKey::Bigint(9), false, true))
        .unwrap());
    other.rollback().unwrap();
    crash(db, &vfs);
    let db = common::open_db(&vfs, config(2));
    let other = db.begin_as(ReadCommitted, LockOwner::backend(42)).unwrap();
    assert!(
        !other.advisory_lock(req(key, false, true)).unwrap(),
        "recovered with its lock"
    );
    assert!(
        other
            .advisory_lock(req(AdvisoryKey::Bigint(9), false, true))
            .unwrap(),
        "the session's went with it"
    );
    other.rollback().unwrap();
    db.commit_prepared("adv").unwrap();
    let other = db.begin_as(ReadCommitted, LockOwner::backend(42)).unwrap();
    assert!(other.advisory_lock(req(key, false, true)).unwrap());
    other.rollback().unwrap();
    db.close().unwrap();
}
