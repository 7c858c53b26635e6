//! Transactions on heap tables under power loss: a seeded workload of concurrent transactions
//! (inserts, updates, deletes — one row in eight with a value large enough for TOAST —,
//! TRUNCATE, CREATE and DROP TABLE, some inside nested
//! savepoints that are released or rolled back to; ended by commit, rollback, PREPARE
//! TRANSACTION, or not at all), with VACUUM (pruning, freeing, truncation), VACUUM
//! of the whole database (freezing, then commit-log segments removed), checkpoints and buffer
//! write-back at random moments, then a simulated power loss (unsynced writes lost, kept, or
//! torn), then recovery:
//!
//! - every committed transaction's changes are there, exactly (toasted values included), in the tables and in their
//!   unique indexes (which pass the amcheck-style verification);
//! - nothing of an aborted, open or rolled-back-prepared transaction is — read through the
//!   hints of frozen versions where the commit log no longer has their statuses;
//! - every prepared transaction survives, listed, still holding its table locks (another
//!   transaction's NOWAIT lock fails with 55P03), and can be committed or rolled back after
//!   the restart — whose outcome survives a second power loss.
//!
//! Seeds: `QUIRE_CRASH_SEEDS` (default 400), or one seed with `QUIRE_CRASH_SEED`; half of
//! them tear unsynced writes.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use common::{crash_seeds, gids, lookup_error, new_db, open_db, pair, power_loss, table_is_locked};
use quire_engine::rng::SplitMix64;
use quire_engine::{
    Changed, Column, Config, Database, IsolationLevel, TableId, Tid, Transaction, Type, Value,
};

const TABLES: usize = 5;

fn config() -> Config {
    Config {
        // Small enough that pages are evicted (written back) during the workload.
        shared_buffers_bytes: 24 * 8192,
        wal_segment_size_bytes: 256 * 1024,
        wal_buffers_bytes: 1024 * 1024,
        checkpoint_timeout_s: 3600,
        max_prepared_transactions: 8,
        // Commit timestamps too, and no recent statuses kept beyond what vacuum needs: the
        // database-wide vacuums below remove commit-log segments of both logs.
        track_commit_timestamp: true,
        vacuum_freeze_min_age: 0,
        autovacuum: false,
        ..Config::default()
    }
}

/// The committed contents of one table: id → (value, address of the current version).
type Rows = BTreeMap<i64, (i64, Tid)>;

/// What the test knows is committed: per table slot, its oid and rows (None: no table).
#[derive(Clone, Default)]
struct Model {
    tables: [Option<(TableId, Rows)>; TABLES],
}

/// A transaction's effects, applied to the model if and when it commits.
struct Pending {
    tables: [Option<(TableId, Rows)>; TABLES],
    /// Table slots whose rows or definition this transaction touched (others must not touch
    /// them until it ends: one thread cannot wait for itself).
    touched: [bool; TABLES],
}

fn row(id: i64, value: i64) -> Vec<Value> {
    vec![
        Value::Int(id),
        Value::Int(value),
        Value::Text(pad(id, value)),
    ]
}

/// The pad of row `id` at `value`: mostly short; one in eight is long (2 to 24 KB, half
/// of it random letters, so that it compresses only so far), which TOAST compresses or
/// moves out of line: its chunks are written, deleted and vacuumed through the crashes.
fn pad(id: i64, value: i64) -> String {
    let mut r = SplitMix64::new(id.cast_unsigned() << 20 ^ value.cast_unsigned());
    let n = r.next();
    if !n.is_multiple_of(8) {
        return "p".repeat((n % 300) as usize);
    }
    let len = 2_000 + (r.next() % 22_000) as usize;
    (0..len)
        .map(|i| match i % 2 {
            0 => char::from(b'a' + (r.next() % 26) as u8),
            _ => 'x',
        })
        .collect()
}

fn columns() -> Vec<Column> {
    vec![
        Column::new("id", Type::Int),
        Column::new("value", Type::Int),
        Column::new("pad", Type::Text),
    ]
}

/// One random change in `tx` on table slot `slot`, mirrored in `p`.
fn change(tx: &Transaction, p: &mut Pending, slot: usize, rng: &mut SplitMix64, next_id: &mut i64) {
    let name = format!("t{slot}");
    let empty = p.tables[slot]
        .as_ref()
        .is_some_and(|(_, rows)| rows.is_empty());
    let op = rng.next() % 20;
    if empty && op >= 9 {
        return; // an update or delete of a row of an empty table: nothing to do
    }
    // Touched: the transaction holds a lock on the table (and its name) from now on.
    p.touched[slot] = true;
    let Some((oid, rows)) = &mut p.tables[slot] else {
        let oid = tx.create_table(&name, &columns()).unwrap();
        // Every table has a unique index: its splits, entries and vacuum pass crash too.
        tx.create_index(&format!("{name}_pkey"), oid, &["id"], true)
            .unwrap();
        p.tables[slot] = Some((oid, Rows::new()));
        return;
    };
    let oid = *oid;
    match op {
        0 => {
            tx.truncate(oid).unwrap();
            rows.clear();
        }
        1 => {
            tx.drop_table(oid).unwrap();
            p.tables[slot] = None;
        }
        2..=8 => {
            let id = *next_id;
            *next_id += 1;
            let v = (rng.next() % 1000).cast_signed();
            let tid = tx.insert(oid, &row(id, v)).unwrap();
            rows.insert(id, (v, tid));
        }
        _ if rows.is_empty() => {}
        9..=16 => {
            let ids: Vec<i64> = rows.keys().copied().collect();
            let id = ids[(rng.next() % ids.len() as u64) as usize];
            let (v, tid) = rows[&id];
            let new = row(id, v + 1);
            match tx.update(oid, tid, &new).unwrap() {
                Changed::Done(new_tid, _) => rows.insert(id, (v + 1, new_tid)),
                Changed::Skipped => panic!("update of {id} skipped"),
            };
        }
        _ => {
            let ids: Vec<i64> = rows.keys().copied().collect();
            let id = ids[(rng.next() % ids.len() as u64) as usize];
            let (_, tid) = rows[&id];
            assert!(matches!(tx.delete(oid, tid).unwrap(), Changed::Done(..)));
            rows.remove(&id);
        }
    }
}

/// ROLLBACK TO SAVEPOINTs run, for the summary.
static ROLLBACKS_TO: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Now and then a savepoint step instead of a change (returns whether it took one): open a
/// savepoint (at most 4 deep), release the innermost, or roll back to it — which undoes the
/// level's changes and releases the table locks it took, so the model goes back to the
/// savepoint's copy, touched slots included.
fn savepoint_step(
    tx: &Transaction,
    p: &mut Pending,
    levels: &mut Vec<Pending>,
    rng: &mut SplitMix64,
) -> bool {
    let name = |depth: usize| format!("sp{}", depth.saturating_sub(1) % 2);
    match rng.next() % 8 {
        0 if levels.len() < 4 => {
            levels.push(Pending {
                tables: p.tables.clone(),
                touched: p.touched,
            });
            tx.savepoint(&name(levels.len())).unwrap();
        }
        1 if !levels.is_empty() => {
            tx.release_savepoint(&name(levels.len())).unwrap();
            levels.pop();
        }
        2 if !levels.is_empty() => {
            tx.rollback_to_savepoint(&name(levels.len())).unwrap();
            ROLLBACKS_TO.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let saved = levels.last().expect("a level is open");
            p.tables.clone_from(&saved.tables);
            p.touched = saved.touched;
        }
        _ => return false,
    }
    true
}

/// Checks that the database holds exactly the model's tables and rows, except in the slots
/// `skip` (held by prepared transactions, whose locks a reader would wait for).
fn verify(db: &Database, model: &Model, skip: [bool; TABLES], seed: u64, when: &str) {
    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
    for (slot, table) in model.tables.iter().enumerate() {
        if skip[slot] {
            continue;
        }
        let name = format!("t{slot}");
        match table {
            None => assert_eq!(
                lookup_error(db, &name),
                Some("42P01"),
                "seed {seed} {when}: {name} should not exist"
            ),
            Some((oid, rows)) => {
                let found = tx
                    .table(&name)
                    .unwrap_or_else(|e| panic!("seed {seed} {when}: table {name}: {e}"));
                assert_eq!(found, *oid, "seed {seed} {when}: table {name}");
                let mut seen = BTreeMap::new();
                for r in tx.scan(*oid).unwrap() {
                    let (tid, row) =
                        r.unwrap_or_else(|e| panic!("seed {seed} {when}: scan of {name}: {e}"));
                    let (id, value) = pair(&row);
                    assert!(
                        row[2] == Value::Text(pad(id, value)),
                        "seed {seed} {when}: {name} row {id}: its pad"
                    );
                    let dup = seen.insert(id, (value, tid));
                    assert!(dup.is_none(), "seed {seed} {when}: {name} row {id} twice");
                }
                assert_eq!(&seen, rows, "seed {seed} {when}: rows of {name}");
                // The index agrees, and is sound (amcheck-style).
                tx.verify_indexes(*oid)
                    .unwrap_or_else(|e| panic!("seed {seed} {when}: index of {name}: {e}"));
                let index = tx.index(&format!("{name}_pkey")).unwrap();
                let through_index: BTreeMap<i64, (i64, Tid)> = tx
                    .index_scan(index, Bound::Unbounded, Bound::Unbounded)
                    .unwrap()
                    .map(|r| {
                        let (tid, row) = r.unwrap();
                        let (id, value) = pair(&row);
                        (id, (value, tid))
                    })
                    .collect();
                assert_eq!(&through_index, rows, "seed {seed} {when}: index of {name}");
            }
        }
    }
    tx.commit().unwrap();
}

/// A prepared transaction: its gid, the model after it commits, and the slots it holds.
struct Prepared {
    gid: String,
    commit_model: [Option<(TableId, Rows)>; TABLES],
    touched: [bool; TABLES],
}

fn apply(model: &mut Model, tables: &[Option<(TableId, Rows)>; TABLES], touched: [bool; TABLES]) {
    for slot in 0..TABLES {
        if touched[slot] {
            model.tables[slot].clone_from(&tables[slot]);
        }
    }
}

/// Returns (commits, prepared transactions, dead tuples vacuumed, commit-log truncations).
fn crash_once(seed: u64) -> (usize, usize, u64, u64) {
    let (vfs, db) = new_db(seed, config());
    let mut rng = SplitMix64::new(seed * 31 + 7);
    let mut model = Model::default();
    let mut prepared: Vec<Prepared> = Vec::new();
    let mut next_id = 1;
    let mut committed = 0;
    // Transactions left open at the crash (their changes must vanish), and the table slots
    // they hold.
    let mut open_txns: Vec<Transaction> = Vec::new();
    let mut held = [false; TABLES];
    let mut vacuumed = 0;
    let mut truncations = 0;
    let rounds = 20 + rng.next() % 80;
    for round in 0..rounds {
        let busy: Vec<bool> = (0..TABLES)
            .map(|s| held[s] || prepared.iter().any(|p| p.touched[s]))
            .collect();
        let free: Vec<usize> = (0..TABLES).filter(|&s| !busy[s]).collect();
        if free.is_empty() || rng.next().is_multiple_of(15) {
            // Finish a prepared transaction now.
            if let Some(p) = prepared.pop() {
                if rng.next().is_multiple_of(3) {
                    db.rollback_prepared(&p.gid).unwrap();
                } else {
                    db.commit_prepared(&p.gid).unwrap();
                    apply(&mut model, &p.commit_model, p.touched);
                    committed += 1;
                }
            }
            continue;
        }
        let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
        let mut p = Pending {
            tables: model.tables.clone(),
            touched: [false; TABLES],
        };
        let mut levels: Vec<Pending> = Vec::new();
        for _ in 0..=(rng.next() % 12) {
            if savepoint_step(&tx, &mut p, &mut levels, &mut rng) {
                continue;
            }
            let slot = free[(rng.next() % free.len() as u64) as usize];
            change(&tx, &mut p, slot, &mut rng, &mut next_id);
        }
        match rng.next() % 10 {
            0..=4 => {
                tx.commit().unwrap();
                apply(&mut model, &p.tables, p.touched);
                committed += 1;
            }
            5 | 6 => tx.rollback().unwrap(),
            7 | 8 if prepared.len() < 6 => {
                let gid = format!("gid-{seed}-{round}");
                tx.prepare(&gid).unwrap();
                prepared.push(Prepared {
                    gid,
                    commit_model: p.tables,
                    touched: p.touched,
                });
            }
            _ => {
                // Left open: it holds its locks; its tables are off limits from now on.
                for (slot, t) in p.touched.iter().enumerate() {
                    held[slot] |= *t;
                }
                open_txns.push(tx);
            }
        }
        if rng.next().is_multiple_of(4) {
            // VACUUM of a table no open or prepared transaction holds (it would wait for
            // their locks, and this test is one thread).
            let held_now: Vec<bool> = (0..TABLES)
                .map(|s| held[s] || prepared.iter().any(|p| p.touched[s]))
                .collect();
            let slot = (rng.next() % TABLES as u64) as usize;
            if !held_now.contains(&true) && rng.next().is_multiple_of(3) {
                // VACUUM of the whole database: freezing, then the commit logs drop the
                // segments below (ids move on a segment first, now and then, so that there
                // is one to drop).
                if rng.next().is_multiple_of(2) {
                    let t = db.transactions();
                    let next = t.next_xid();
                    let per = quire_engine::clog::STATUS_LOG.per_segment();
                    t.skip_xids(per - next.0 % per);
                }
                let done = db.vacuum_all().unwrap();
                vacuumed += done
                    .tables
                    .iter()
                    .map(|(_, s)| s.dead_tuples_removed)
                    .sum::<u64>();
                truncations += u64::from(done.log_segments_removed > 0);
            } else if let (false, Some((oid, _))) = (held_now[slot], &model.tables[slot]) {
                vacuumed += db.vacuum(*oid).unwrap().dead_tuples_removed;
            }
        }
        if rng.next().is_multiple_of(8) {
            db.checkpointer().checkpoint().unwrap();
        }
        if rng.next().is_multiple_of(6) {
            db.buffer_pool().flush_all().unwrap();
        }
    }
    // A crash: they never end.
    for tx in open_txns {
        tx.vanish();
    }
    let tear = seed % 2 == 1;
    power_loss(db, &vfs, tear);

    let db = open_db(&vfs, config());
    let mut held_by_prepared = [false; TABLES];
    for p in &prepared {
        for (slot, t) in p.touched.iter().enumerate() {
            held_by_prepared[slot] |= *t;
        }
    }
    verify(&db, &model, held_by_prepared, seed, "after the crash");
    let listed = gids(&db);
    let mut expected: Vec<String> = prepared.iter().map(|p| p.gid.clone()).collect();
    expected.sort();
    assert_eq!(listed, expected, "seed {seed}: prepared transactions");
    // Their locks survived: a conflicting NOWAIT lock fails.
    for p in &prepared {
        for (slot, touched) in p.touched.iter().enumerate() {
            let Some((oid, _)) = &model.tables[slot] else {
                continue;
            };
            if *touched {
                assert!(
                    table_is_locked(&db, *oid),
                    "seed {seed}: a prepared transaction's lock vanished"
                );
            }
        }
    }
    let n_prepared = prepared.len();
    for p in prepared {
        if rng.next().is_multiple_of(2) {
            db.commit_prepared(&p.gid).unwrap();
            apply(&mut model, &p.commit_model, p.touched);
        } else {
            db.rollback_prepared(&p.gid).unwrap();
        }
    }
    assert!(db.prepared_transactions().is_empty());
    verify(
        &db,
        &model,
        [false; TABLES],
        seed,
        "after finishing the prepared transactions",
    );
    power_loss(db, &vfs, tear);
    let db = open_db(&vfs, config());
    verify(&db, &model, [false; TABLES], seed, "after the second crash");
    assert!(db.prepared_transactions().is_empty(), "seed {seed}");
    db.buffer_pool().check_invariants().unwrap();
    db.close().unwrap();
    (committed, n_prepared, vacuumed, truncations)
}

#[test]
fn transactions_and_prepared_transactions_survive_power_loss() {
    let seeds = crash_seeds(400);
    let (mut committed, mut prepared, mut vacuumed, mut truncations) = (0, 0, 0, 0);
    let only: Option<u64> = std::env::var("QUIRE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    for seed in only.map_or(0..seeds, |s| s..s + 1) {
        let (c, p, v, t) = crash_once(seed);
        committed += c;
        prepared += p;
        vacuumed += v;
        truncations += t;
    }
    eprintln!(
        "{seeds} power losses: {committed} committed transactions verified, {prepared} prepared transactions recovered with their locks, {vacuumed} dead tuples vacuumed, {truncations} commit-log truncations, {} rollbacks to a savepoint",
        ROLLBACKS_TO.load(std::sync::atomic::Ordering::Relaxed)
    );
    assert!(committed > 0);
    assert!(only.is_some() || (prepared > 0 && truncations > 0));
}
