//! Helpers the integration tests share, each written once here: the configuration most tests
//! start from, opening a database on the simulated file system, crashes and power loss, the
//! two-integer-column tables most tests use and reading them back, a relation's file, table
//! locks and prepared transactions, and running a statement that must block on a lock.
//!
//! Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quire_engine::recovery::testrm;
use quire_engine::vfs::{CrashOptions, SimVfs, Vfs};
use quire_engine::{
    Column, Config, Database, Fork, IsolationLevel, LockMode, RelFileLocator, Result, TableId, Tid,
    Transaction, Type, Value,
};

// ---------------------------------------------------------------------------- databases

/// The configuration most tests start from: a 4 MiB pool, and no timed checkpoint during a
/// test (the checkpoints are the ones the test takes).
pub fn config() -> Config {
    Config {
        shared_buffers_bytes: 4 << 20,
        checkpoint_timeout_s: 3600,
        ..Config::default()
    }
}

/// Opens (creating or recovering) the database at `/data` on `vfs`, for tests that expect
/// the open to fail.
pub fn try_open(vfs: &Arc<SimVfs>, config: Config) -> Result<Database> {
    let vfs: Arc<dyn Vfs> = Arc::clone(vfs) as Arc<dyn Vfs>;
    // The page-level crash tests log the test resource manager's records.
    Database::open_with_resource_managers(
        &vfs,
        Path::new("/data"),
        config,
        &[testrm::registration()],
    )
}

/// Opens (creating or recovering) the database at `/data` on `vfs`.
pub fn open_db(vfs: &Arc<SimVfs>, config: Config) -> Database {
    try_open(vfs, config).unwrap_or_else(|e| panic!("open: {e}"))
}

/// A new database on a new simulated file system whose randomness is seeded with `seed`.
pub fn new_db(seed: u64, config: Config) -> (Arc<SimVfs>, Database) {
    let vfs = Arc::new(SimVfs::new(seed));
    let db = open_db(&vfs, config);
    (vfs, db)
}

/// Closes every relation file the storage manager keeps open, so that the next use of each
/// opens it again.
pub fn close_cached_files(db: &Database) {
    // Bounded: the cache holds at most max_files_per_process files.
    for _ in 0..=db.config().max_files_per_process {
        if !db.smgr().release_one_file() {
            break;
        }
    }
    assert_eq!(db.smgr().open_files(), 0, "a file nobody holds stayed open");
}

/// Power loss without tearing: everything not fsynced is lost, everything fsynced stays.
pub fn crash(db: Database, vfs: &SimVfs) {
    drop(db);
    vfs.crash(&CrashOptions::default());
}

/// Power loss as the randomized crash tests model it: each write not yet fsynced survives
/// or not (even odds), and one that survives is torn at 512-byte sectors when `tear`.
pub fn power_loss(db: Database, vfs: &SimVfs, tear: bool) {
    drop(db);
    vfs.crash(&lossy(tear));
}

/// The crash of [`power_loss`], for tests below the `Database`.
pub fn lossy(tear: bool) -> CrashOptions {
    CrashOptions {
        keep_unsynced_probability: 0.5,
        tear_writes: tear,
    }
}

/// How many seeds a randomized crash test runs: `QUIRE_CRASH_SEEDS`, else `default`.
pub fn crash_seeds(default: u64) -> u64 {
    std::env::var("QUIRE_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

// ---------------------------------------------------------------------------- tables

/// Runs `f` in a new READ COMMITTED transaction and commits it.
pub fn committing<T>(db: &Database, f: impl FnOnce(&Transaction) -> T) -> T {
    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
    let out = f(&tx);
    tx.commit().unwrap();
    out
}

/// Creates `name (id, <value>)`, two integer columns, in `tx` holding `rows`; returns the
/// table and the rows' addresses in the order given.
pub fn create_pairs(
    tx: &Transaction,
    name: &str,
    value: &str,
    rows: impl IntoIterator<Item = (i64, i64)>,
) -> (TableId, Vec<Tid>) {
    let columns = [Column::new("id", Type::Int), Column::new(value, Type::Int)];
    let t = tx.create_table(name, &columns).unwrap();
    let tids = rows
        .into_iter()
        .map(|(id, v)| tx.insert(t, &[Value::Int(id), Value::Int(v)]).unwrap())
        .collect();
    (t, tids)
}

/// Creates `accounts (id, balance)` in `tx` holding rows 1..=n with balance 100 × id; returns
/// the table and the rows' addresses, by id from 1.
pub fn create_accounts(tx: &Transaction, n: i64) -> (TableId, Vec<Tid>) {
    create_pairs(tx, "accounts", "balance", (1..=n).map(|id| (id, 100 * id)))
}

/// A row's first two columns, both integers.
pub fn pair(row: &[Value]) -> (i64, i64) {
    (row[0].as_int().unwrap(), row[1].as_int().unwrap())
}

/// The first two columns of the rows `tx` sees in `t`, sorted.
pub fn rows_in(tx: &Transaction, t: TableId) -> Vec<(i64, i64)> {
    try_rows_in(tx, t).unwrap()
}

/// [`rows_in`], or the error the scan starts with (it waits for its lock first).
pub fn try_rows_in(tx: &Transaction, t: TableId) -> Result<Vec<(i64, i64)>> {
    let mut rows: Vec<(i64, i64)> = tx.scan(t)?.map(|r| pair(&r.unwrap().1)).collect();
    rows.sort_unstable();
    Ok(rows)
}

/// What a new READ COMMITTED transaction sees of `t` (first two columns, sorted).
pub fn committed(db: &Database, t: TableId) -> Vec<(i64, i64)> {
    committing(db, |tx| rows_in(tx, t))
}

/// The ids (first column) of the rows `tx` sees in `t`, sorted.
pub fn ids_in(tx: &Transaction, t: TableId) -> Vec<i64> {
    let mut ids: Vec<i64> = tx
        .scan(t)
        .unwrap()
        .map(|r| r.unwrap().1[0].as_int().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

/// The ids a new READ COMMITTED transaction sees in `t`.
pub fn committed_ids(db: &Database, t: TableId) -> Vec<i64> {
    committing(db, |tx| ids_in(tx, t))
}

/// The SQLSTATE of looking `name` up in a transaction of its own (None: found). Its own,
/// because the error aborts the transaction it happens in.
pub fn lookup_error(db: &Database, name: &str) -> Option<&'static str> {
    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
    let r = tx.table(name);
    tx.rollback().unwrap();
    r.err().map(|e| e.sqlstate().code())
}

// ---------------------------------------------------------------------------- files

/// The relation that holds table `t`'s rows now.
pub fn rel_of(db: &Database, t: TableId) -> RelFileLocator {
    committing(db, |tx| tx.table_def(t).unwrap().rel)
}

/// The first segment file of `rel`'s main fork.
pub fn file_of(db: &Database, rel: RelFileLocator) -> PathBuf {
    db.smgr().segment_path(rel, Fork::Main, 0)
}

pub fn exists(vfs: &SimVfs, path: &Path) -> bool {
    vfs.exists(path).unwrap()
}

// ---------------------------------------------------------------------------- locks

/// Does a conflicting ACCESS EXCLUSIVE NOWAIT on `t` fail with 55P03 (someone holds a lock)?
pub fn table_is_locked(db: &Database, t: TableId) -> bool {
    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
    let r = tx.lock_table(t, LockMode::AccessExclusive, true);
    tx.rollback().unwrap();
    match r {
        Ok(()) => false,
        Err(e) => {
            assert_eq!(e.sqlstate(), "55P03", "{e}");
            true
        }
    }
}

/// The gids of the prepared transactions, in the order the database lists them (by gid).
pub fn gids(db: &Database) -> Vec<String> {
    db.prepared_transactions()
        .into_iter()
        .map(|p| p.gid)
        .collect()
}

/// Waits until `done` holds, polling every millisecond; fails the test after 30 s (a
/// background worker or a blocked thread that never gets there).
pub fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits (bounded) until session `id` waits for a lock.
pub fn wait_until_blocked(db: &Database, id: quire_engine::txn::lock::LockOwner) {
    wait_for(&format!("session {id} blocked"), || {
        db.locks().is_waiting(id)
    });
}

/// Runs `blocked` in `tx` on another thread, checks that it blocks, runs `unblock` on this
/// thread (which must end the blocker), and returns `tx` with the blocked statement's result.
pub fn blocks_until<T: Send>(
    db: &Database,
    tx: Transaction,
    blocked: impl FnOnce(&Transaction) -> T + Send,
    unblock: impl FnOnce(),
) -> (Transaction, T) {
    let id = tx.session_id();
    std::thread::scope(|s| {
        let h = s.spawn(move || {
            let r = blocked(&tx);
            (tx, r)
        });
        wait_until_blocked(db, id);
        unblock();
        h.join().expect("the blocked statement panicked")
    })
}
