//! Helpers the integration tests share: opening a database on the simulated file system,
//! power loss, a relation's file, and running a statement that must block on a lock.
//!
//! Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quire_engine::vfs::{CrashOptions, SimVfs, Vfs};
use quire_engine::{
    Column, Config, Database, Fork, IsolationLevel, RelFileLocator, TableId, Tid, Transaction,
    Type, Value,
};

/// Opens (creating or recovering) the database at `/data` on `vfs`.
pub fn open_db(vfs: &Arc<SimVfs>, config: Config) -> Database {
    let vfs: Arc<dyn Vfs> = Arc::clone(vfs) as Arc<dyn Vfs>;
    Database::open(&vfs, Path::new("/data"), config).unwrap_or_else(|e| panic!("open: {e}"))
}

/// Power loss without tearing: everything not fsynced is lost, everything fsynced stays.
pub fn crash(db: Database, vfs: &SimVfs) {
    drop(db);
    vfs.crash(&CrashOptions {
        keep_unsynced_probability: 0.0,
        tear_writes: false,
    });
}

/// The relation that holds table `t`'s rows now.
pub fn rel_of(db: &Database, t: TableId) -> RelFileLocator {
    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
    let rel = tx.table_def(t).unwrap().rel;
    tx.commit().unwrap();
    rel
}

/// The first segment file of `rel`'s main fork.
pub fn file_of(db: &Database, rel: RelFileLocator) -> PathBuf {
    db.smgr().segment_path(rel, Fork::Main, 0)
}

pub fn exists(vfs: &SimVfs, path: &Path) -> bool {
    vfs.exists(path).unwrap()
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

/// Creates `accounts (id, balance)` in `tx` holding rows 1..=n with balance 100 × id; returns
/// the table and the rows' addresses, by id from 1.
pub fn create_accounts(tx: &Transaction, n: i64) -> (TableId, Vec<Tid>) {
    let columns = [
        Column::new("id", Type::Int),
        Column::new("balance", Type::Int),
    ];
    let t = tx.create_table("accounts", &columns).unwrap();
    let tids = (1..=n)
        .map(|id| {
            tx.insert(t, &[Value::Int(id), Value::Int(100 * id)])
                .unwrap()
        })
        .collect();
    (t, tids)
}
