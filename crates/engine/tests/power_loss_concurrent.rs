//! Power loss while several threads work at once (issue 12, item 9): committers inserting
//! and deleting rows of a ledger and moving balances between accounts, a thread preparing
//! transactions and committing them prepared, a vacuum thread and a checkpoint thread, all
//! running when the simulated power goes (every file-system call fails from then on; unsynced
//! writes lost, kept or torn). After recovery:
//!
//! - every acknowledged commit is there: each acknowledged ledger insert present unless its
//!   acknowledged delete removed it, and the accounts' total unchanged (every transfer is
//!   all or nothing);
//! - nothing unacknowledged is visible beyond the operations in flight at the crash (at most
//!   one per thread, which may have landed or not);
//! - a prepared transaction comes back only if it was in flight (from the start of its
//!   PREPARE to the end of its COMMIT PREPARED), and then with its row;
//! - every index agrees with its heap (amcheck-style verification, and an index scan
//!   returning exactly the heap's rows).
//!
//! Each round runs the threads for a seeded time before cutting the power; the crash point
//! is wherever the threads are, not between operations. Rounds: `QUIRE_CRASH_SEEDS`
//! (default 12).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{crash_seeds, lossy, open_db};
use quire_engine::rng::SplitMix64;
use quire_engine::vfs::SimVfs;
use quire_engine::{
    Changed, Column, Config, Database, IsolationLevel, TableId, Transaction, Type, Value,
};

const ACCOUNTS: i64 = 32;
const OPENING_BALANCE: i64 = 1000;
const COMMITTERS: u64 = 3;

fn config() -> Config {
    Config {
        // Small enough that pages are written back during the run.
        shared_buffers_bytes: 48 * 8192,
        wal_segment_size_bytes: 256 * 1024,
        checkpoint_timeout_s: 3600,
        max_prepared_transactions: 4,
        autovacuum: false,
        ..Config::default()
    }
}

fn columns() -> Vec<Column> {
    vec![
        Column::new("id", Type::Int),
        Column::new("value", Type::Int),
    ]
}

/// What the threads did: acknowledged operations, and the one each thread had in flight.
#[derive(Default)]
struct Log {
    inserted: BTreeSet<i64>,
    deleted: BTreeSet<i64>,
    /// Ledger ids whose insert or delete was in flight at the crash.
    uncertain: BTreeSet<i64>,
    /// Prepared transactions in flight (between PREPARE and the end of COMMIT PREPARED),
    /// with their ledger id.
    prepared_in_flight: BTreeMap<String, i64>,
}

struct Shared {
    db: Database,
    ledger: TableId,
    accounts: TableId,
    log: Mutex<Log>,
    stop: AtomicBool,
}

fn begin(db: &Database) -> quire_engine::Result<Transaction> {
    db.begin(IsolationLevel::ReadCommitted)
}

/// One committer's loop: insert a ledger row, sometimes delete one of its own earlier rows,
/// sometimes move money between two accounts. Stops at the first error (the power is gone).
fn committer(s: &Shared, worker: u64, seed: u64) {
    let mut rng = SplitMix64::new(seed ^ (worker << 32));
    let mut mine: Vec<i64> = Vec::new();
    let mut next = 0i64;
    // Bounded: the main thread cuts the power within a second.
    for _ in 0..100_000 {
        if s.stop.load(Ordering::Acquire) {
            return;
        }
        let r = match rng.below(4) {
            0 if !mine.is_empty() => {
                let id = mine.swap_remove(rng.below(mine.len() as u64) as usize);
                s.log.lock().unwrap().uncertain.insert(id);
                delete_row(s, id).map(|()| {
                    let mut log = s.log.lock().unwrap();
                    log.uncertain.remove(&id);
                    log.deleted.insert(id);
                })
            }
            1 => transfer(s, &mut rng),
            _ => {
                next += 1;
                let id = worker.cast_signed() * 1_000_000 + next;
                s.log.lock().unwrap().uncertain.insert(id);
                insert_row(s, id).map(|()| {
                    let mut log = s.log.lock().unwrap();
                    log.uncertain.remove(&id);
                    log.inserted.insert(id);
                    mine.push(id);
                })
            }
        };
        if r.is_err() {
            return;
        }
    }
}

fn insert_row(s: &Shared, id: i64) -> quire_engine::Result<()> {
    let tx = begin(&s.db)?;
    tx.insert(s.ledger, &[Value::Int(id), Value::Int(id)])?;
    tx.commit()
}

fn delete_row(s: &Shared, id: i64) -> quire_engine::Result<()> {
    let tx = begin(&s.db)?;
    let index = tx.index("ledger_pkey")?;
    let key = [Value::Int(id)];
    let tids: Vec<_> = tx
        .index_scan(index, Bound::Included(&key[..]), Bound::Included(&key[..]))?
        .map(|r| r.map(|(tid, _)| tid))
        .collect::<quire_engine::Result<_>>()?;
    for tid in tids {
        tx.delete(s.ledger, tid)?;
    }
    tx.commit()
}

/// Moves 1..=50 from one account to another in one transaction.
fn transfer(s: &Shared, rng: &mut SplitMix64) -> quire_engine::Result<()> {
    let accounts = ACCOUNTS.unsigned_abs();
    let from = rng.below(accounts).cast_signed();
    let to = (from + 1 + rng.below(accounts - 1).cast_signed()) % ACCOUNTS;
    let amount = 1 + rng.below(50).cast_signed();
    let tx = begin(&s.db)?;
    let index = tx.index("accounts_pkey")?;
    // In id order, so that two transfers never wait on each other in a cycle.
    for (id, delta) in if from < to {
        [(from, -amount), (to, amount)]
    } else {
        [(to, amount), (from, -amount)]
    } {
        let key = [Value::Int(id)];
        let (tid, _) = tx
            .index_scan(index, Bound::Included(&key[..]), Bound::Included(&key[..]))?
            .next()
            .expect("every account exists")?;
        let changed = tx.update_with(s.accounts, tid, |row| {
            Some(vec![row[0].clone(), Value::Int(row[1].as_int()? + delta)])
        })?;
        assert!(matches!(changed, Changed::Done(..)), "an account vanished");
    }
    tx.commit()
}

/// Inserts a ledger row in a transaction it prepares, then commits it prepared.
fn preparer(s: &Shared, seed: u64) {
    let mut rng = SplitMix64::new(seed ^ 0xAB);
    for n in 0..100_000i64 {
        if s.stop.load(Ordering::Acquire) {
            return;
        }
        let id = 9_000_000 + n;
        let gid = format!("p{n}");
        {
            // In flight from the start of PREPARE: one that fails when the power goes may
            // have made its record durable first, and then it comes back prepared.
            let mut log = s.log.lock().unwrap();
            log.uncertain.insert(id);
            log.prepared_in_flight.insert(gid.clone(), id);
        }
        let prepared = (|| {
            let tx = begin(&s.db)?;
            tx.insert(s.ledger, &[Value::Int(id), Value::Int(id)])?;
            tx.prepare(&gid)
        })();
        if prepared.is_err() {
            return;
        }
        if rng.below(4) == 0 {
            thread::yield_now();
        }
        if s.db.commit_prepared(&gid).is_err() {
            return;
        }
        let mut log = s.log.lock().unwrap();
        log.prepared_in_flight.remove(&gid);
        log.uncertain.remove(&id);
        log.inserted.insert(id);
    }
}

/// VACUUM of the ledger and checkpoints, until the power goes.
fn maintenance(s: &Shared, checkpoints: bool) {
    for _ in 0..100_000 {
        if s.stop.load(Ordering::Acquire) {
            return;
        }
        let r = if checkpoints {
            s.db.checkpoint().map(|_| ())
        } else {
            s.db.vacuum(s.ledger).map(|_| ())
        };
        if r.is_err() {
            return;
        }
        thread::sleep(Duration::from_millis(3));
    }
}

fn setup(seed: u64) -> (Arc<SimVfs>, Database, TableId, TableId) {
    let vfs = Arc::new(SimVfs::new(seed));
    let db = open_db(&vfs, config());
    let tx = begin(&db).unwrap();
    let ledger = tx.create_table("ledger", &columns()).unwrap();
    tx.create_index("ledger_pkey", ledger, &["id"], true)
        .unwrap();
    let accounts = tx.create_table("accounts", &columns()).unwrap();
    tx.create_index("accounts_pkey", accounts, &["id"], true)
        .unwrap();
    for id in 0..ACCOUNTS {
        tx.insert(accounts, &[Value::Int(id), Value::Int(OPENING_BALANCE)])
            .unwrap();
    }
    tx.commit().unwrap();
    db.checkpoint().unwrap();
    (vfs, db, ledger, accounts)
}

/// The rows of a table through the heap and through its index, which must agree.
fn rows_checked(tx: &Transaction, table: TableId, index: &str, seed: u64) -> BTreeMap<i64, i64> {
    let mut heap = BTreeMap::new();
    for r in tx.scan(table).unwrap() {
        let (_, row) = r.unwrap();
        let (id, value) = (row[0].as_int().unwrap(), row[1].as_int().unwrap());
        assert!(
            heap.insert(id, value).is_none(),
            "seed {seed}: {index}: id {id} twice"
        );
    }
    tx.verify_indexes(table)
        .unwrap_or_else(|e| panic!("seed {seed}: {index}: {e}"));
    let index = tx.index(index).unwrap();
    let through_index: BTreeMap<i64, i64> = tx
        .index_scan(index, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| {
            let (_, row) = r.unwrap();
            (row[0].as_int().unwrap(), row[1].as_int().unwrap())
        })
        .collect();
    assert_eq!(through_index, heap, "seed {seed}: index and heap disagree");
    heap
}

fn round(seed: u64) -> (usize, usize) {
    let (vfs, db, ledger, accounts) = setup(seed);
    let shared = Arc::new(Shared {
        db,
        ledger,
        accounts,
        log: Mutex::new(Log::default()),
        stop: AtomicBool::new(false),
    });
    let mut handles = Vec::new();
    for w in 0..COMMITTERS {
        let s = Arc::clone(&shared);
        handles.push(thread::spawn(move || committer(&s, w + 1, seed)));
    }
    for job in 0..3 {
        let s = Arc::clone(&shared);
        handles.push(thread::spawn(move || match job {
            0 => preparer(&s, seed),
            1 => maintenance(&s, false),
            _ => maintenance(&s, true),
        }));
    }
    let mut rng = SplitMix64::new(seed);
    thread::sleep(Duration::from_millis(20 + rng.below(120)));
    // The power goes while every thread is somewhere in its work: from now on every file
    // system call fails, as on a machine that stopped, so nothing the threads do next can
    // reach the disk (a WAL page written and synced after the loss would make redo refuse a
    // WAL whose earlier pages were lost). The loss itself, which restores the power, comes
    // once they are gone.
    vfs.cut_power_after(0);
    shared.stop.store(true, Ordering::Release);
    for h in handles {
        h.join().expect("no worker panics");
    }
    let shared = Arc::into_inner(shared).expect("the workers are gone");
    let log = shared.log.into_inner().unwrap();
    drop(shared.db);
    vfs.crash(&lossy(seed.is_multiple_of(2)));

    let db = open_db(&vfs, config());
    // In-flight prepared transactions come back prepared (or already committed, when the
    // COMMIT PREPARED was in flight); finish them and count their rows as uncertain.
    let prepared: BTreeSet<String> = db
        .prepared_transactions()
        .into_iter()
        .map(|p| p.gid)
        .collect();
    for gid in &prepared {
        assert!(
            log.prepared_in_flight.contains_key(gid),
            "seed {seed}: prepared transaction {gid} was never left in flight"
        );
        db.commit_prepared(gid).unwrap();
    }
    let tx = begin(&db).unwrap();
    let ledger_rows = rows_checked(&tx, ledger, "ledger_pkey", seed);
    for id in &log.inserted {
        if !log.deleted.contains(id) && !log.uncertain.contains(id) {
            assert!(
                ledger_rows.contains_key(id),
                "seed {seed}: acknowledged insert {id} lost"
            );
        }
    }
    for id in log.deleted.iter().filter(|id| !log.uncertain.contains(id)) {
        assert!(
            !ledger_rows.contains_key(id),
            "seed {seed}: acknowledged delete of {id} undone"
        );
    }
    for id in ledger_rows.keys() {
        assert!(
            log.inserted.contains(id) || log.uncertain.contains(id),
            "seed {seed}: row {id} was never acknowledged nor in flight"
        );
    }
    for (gid, id) in &log.prepared_in_flight {
        if prepared.contains(gid) {
            assert!(ledger_rows.contains_key(id), "seed {seed}: {gid}'s row");
        }
    }
    let balances = rows_checked(&tx, accounts, "accounts_pkey", seed);
    assert_eq!(
        i64::try_from(balances.len()).expect("a few accounts"),
        ACCOUNTS,
        "seed {seed}: accounts"
    );
    assert_eq!(
        balances.values().sum::<i64>(),
        ACCOUNTS * OPENING_BALANCE,
        "seed {seed}: a transfer landed half"
    );
    tx.commit().unwrap();
    db.close().unwrap();
    (log.inserted.len(), log.uncertain.len())
}

#[test]
fn concurrent_commits_prepares_and_vacuums_survive_power_loss_mid_flight() {
    let (mut acked, mut in_flight) = (0, 0);
    for seed in 0..crash_seeds(12) {
        let (a, u) = round(seed);
        acked += a;
        in_flight += u;
    }
    // The rounds did work before the crash, and the crash caught work in flight.
    assert!(
        acked > 0 && in_flight > 0,
        "acked {acked}, in flight {in_flight}"
    );
    eprintln!("acknowledged inserts {acked}, operations in flight at the crash {in_flight}");
}
