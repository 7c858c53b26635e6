//! Every fault the simulated file system injects, against the whole engine, then a power
//! loss and a restart.
//!
//! Fault model: for each kind of [`Fault`] that fails an operation (ENOSPC and EIO on write
//! and on extension, short writes, EIO on read, open and fsync, EMFILE), a seeded rate of
//! 3% on the data files or on the WAL while transactions commit, scans read evicted pages
//! back, checkpoints run and a small pool evicts; then a power loss that keeps each unsynced write and directory change with
//! even odds (torn writes on), and a restart without faults. Bit flips: one random bit of a
//! relation file flipped on disk.
//!
//! Verified: no panic; a call that fails gets an error; a failed fsync stops the engine (the
//! failed state); the restart succeeds, every acknowledged commit is there, and nothing is
//! there that was neither acknowledged nor in flight (a commit that returned an error may go
//! either way, as in PostgreSQL). A flipped bit is reported as corruption (XX001) naming the
//! block, or lies where no row is read. `QUIRE_CRASH_SEEDS=N` runs N seeds per case.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{committing, crash_seeds, create_pairs, lossy, new_db, open_db};

use quire_engine::vfs::{Fault, FaultCounts, SimVfs};
use quire_engine::{Column, Config, Database, HealthState, IsolationLevel, TableId, Type, Value};

const RATE: f64 = 0.03;
const TRANSACTIONS: i64 = 60;
/// Rows per transaction: 60 × 20 rows of about 220 bytes fill some 35 pages.
const ROWS: i64 = 20;

fn config() -> Config {
    Config {
        // 16 buffers, four segment files cached: pages are evicted and read back, and files
        // closed and opened again, while the faults strike.
        shared_buffers_bytes: 16 * 8192,
        max_files_per_process: 4,
        segment_size_blocks: 4,
        wal_segment_size_bytes: 64 * 1024,
        ..common::config()
    }
}

/// What one run saw.
#[derive(Default)]
struct Outcome {
    acknowledged: usize,
    stopped: bool,
    errors: usize,
}

/// Inserts rows `id * ROWS ..` (with a filler, so rows fill pages) in one transaction.
fn insert(db: &Database, t: TableId, id: i64) -> quire_engine::Result<()> {
    let tx = db.begin(IsolationLevel::ReadCommitted)?;
    for row in id * ROWS..(id + 1) * ROWS {
        tx.insert(t, &[Value::Int(row), Value::Text("x".repeat(200))])?;
    }
    tx.commit()
}

/// How many rows a new transaction sees.
fn scan_count(db: &Database, t: TableId) -> quire_engine::Result<usize> {
    let tx = db.begin(IsolationLevel::ReadCommitted)?;
    let mut n = 0;
    for row in tx.scan(t)? {
        row?;
        n += 1;
    }
    tx.commit()?;
    Ok(n)
}

/// The ids a restarted engine sees (the scan must not fail: no fault is left).
fn visible(db: &Database, t: TableId) -> BTreeSet<i64> {
    committing(db, |tx| {
        tx.scan(t)
            .unwrap()
            .map(|r| r.unwrap().1[0].as_int().unwrap() / ROWS)
            .collect()
    })
}

fn run(seed: u64, fault: Fault, target: &str) -> (Outcome, FaultCounts) {
    let (vfs, db) = new_db(seed, config());
    let t = committing(&db, |tx| {
        let columns = [
            Column::new("id", Type::Int),
            Column::new("filler", Type::Text),
        ];
        tx.create_table("t", &columns).unwrap()
    });
    insert(&db, t, 0).unwrap();
    db.checkpointer().checkpoint().unwrap();
    let mut acknowledged: BTreeSet<i64> = [0].into();
    let mut uncertain = BTreeSet::new();
    let mut outcome = Outcome::default();
    vfs.set_fault_rate(fault, RATE, Some(target));
    for id in 1..=TRANSACTIONS {
        if insert(&db, t, id).is_ok() {
            acknowledged.insert(id);
        } else {
            outcome.errors += 1;
            uncertain.insert(id);
        }
        if id % 5 == 0 && db.checkpointer().checkpoint().is_err() {
            outcome.errors += 1;
        }
        // A full scan now and then reads evicted pages back.
        if id % 4 == 0 && scan_count(&db, t).is_err() {
            outcome.errors += 1;
        }
        if matches!(db.health(), HealthState::Failed { .. }) {
            outcome.stopped = true;
            break;
        }
    }
    vfs.set_fault_rate(fault, 0.0, Some(target));
    drop(db);
    vfs.crash(&lossy(true));
    let db = open_db(&vfs, config());
    let seen = visible(&db, t);
    let missing: Vec<_> = acknowledged.difference(&seen).collect();
    assert!(
        missing.is_empty(),
        "seed {seed} {} on {target}: acknowledged commits lost: {missing:?}",
        fault.name()
    );
    let unexplained: Vec<_> = seen
        .iter()
        .filter(|id| !acknowledged.contains(id) && !uncertain.contains(id))
        .collect();
    assert!(
        unexplained.is_empty(),
        "seed {seed} {} on {target}: rows never committed: {unexplained:?}",
        fault.name()
    );
    outcome.acknowledged = acknowledged.len();
    (outcome, vfs.faults_injected())
}

/// The kinds of failed operation, each on the data files and on the WAL.
#[test]
fn every_injected_fault_is_survived_without_losing_an_acknowledged_commit() {
    let kinds = [
        Fault::WriteNoSpace,
        Fault::WriteIo,
        Fault::ExtendNoSpace,
        Fault::ExtendIo,
        Fault::ShortWrite,
        Fault::ReadIo,
        Fault::OpenIo,
        Fault::TooManyFiles,
        Fault::FsyncIo,
    ];
    let seeds = crash_seeds(2);
    let mut total = FaultCounts::default();
    eprintln!("fault            target  runs  injected  stopped  errors  acknowledged_verified");
    for (k, fault) in kinds.into_iter().enumerate() {
        for target in ["/data/base/", "/data/wal/"] {
            let (mut injected, mut stopped, mut errors, mut acknowledged) = (0, 0, 0, 0);
            for s in 0..seeds {
                let seed = 1000 * k as u64 + s + if target.contains("wal") { 500 } else { 0 };
                let (outcome, counts) = run(seed, fault, target);
                injected += counts.get(fault);
                stopped += usize::from(outcome.stopped);
                errors += outcome.errors;
                acknowledged += outcome.acknowledged;
                total += counts;
            }
            eprintln!(
                "{:<16} {:<7} {seeds:>4}  {injected:>8}  {stopped:>7}  {errors:>6}  {acknowledged:>21}",
                fault.name(),
                if target.contains("wal") { "wal" } else { "base" },
            );
        }
    }
    eprintln!("all faults injected: {total}");
    for fault in kinds {
        assert!(total.get(fault) > 0, "{} was never injected", fault.name());
    }
    if seeds >= 2 {
        assert!(
            total.get(Fault::LostNameChange) > 0,
            "no directory change was lost"
        );
    }
}

/// A bit flipped on disk in a relation file: reading it reports corruption naming the
/// block, or the bit lies where the rows read do not (free space, another page's tail).
#[test]
fn a_flipped_bit_in_a_relation_file_is_reported_not_returned() {
    let mut detected = 0;
    let seeds = crash_seeds(8);
    for seed in 0..seeds {
        let (vfs, db) = new_db(seed, config());
        let rows = (0..400).map(|id| (id, id * 7));
        let (t, _) = committing(&db, |tx| create_pairs(tx, "t", "v", rows));
        let path = common::file_of(&db, common::rel_of(&db, t));
        db.close().unwrap();
        flip(&vfs, &path);
        let db = open_db(&vfs, config());
        let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
        let scanned: Result<Vec<i64>, _> = tx.scan(t).and_then(|s| {
            s.map(|r| r.map(|(_, row)| row[0].as_int().unwrap()))
                .collect()
        });
        match scanned {
            Ok(mut ids) => {
                ids.sort_unstable();
                assert_eq!(ids, (0..400).collect::<Vec<_>>(), "seed {seed}: wrong rows");
            }
            Err(e) => {
                assert_eq!(e.sqlstate(), "XX001", "seed {seed}: {e}");
                assert!(e.to_string().contains("block"), "seed {seed}: {e}");
                detected += 1;
            }
        }
        assert_eq!(vfs.faults_injected().get(Fault::BitFlip), 1);
    }
    eprintln!("bit flips: {seeds} injected, {detected} detected by checksum, 0 wrong rows");
    assert!(detected > 0, "no flip was detected in {seeds} seeds");
}

fn flip(vfs: &SimVfs, path: &Path) {
    vfs.flip_random_bit(path).unwrap();
}

/// A new WAL segment whose sizing fails (ENOSPC) stops the engine, as PostgreSQL PANICs when
/// it cannot create a WAL segment (issue 12, item 2: a WAL write failure is fatal): the
/// commit that needed it is refused, nothing more is written, and a restart recovers every
/// acknowledged commit (found by the matrix above, seed 2509, when a failed sizing was
/// retried and the segment's name never fsynced).
#[test]
fn a_failed_wal_segment_sizing_stops_the_engine_and_a_restart_keeps_every_commit() {
    let (vfs, db) = new_db(1, config());
    let t = committing(&db, |tx| {
        let columns = [
            Column::new("id", Type::Int),
            Column::new("filler", Type::Text),
        ];
        tx.create_table("t", &columns).unwrap()
    });
    vfs.inject(Fault::ExtendNoSpace, Some("/data/wal/"));
    let mut acknowledged = BTreeSet::new();
    let mut id = 0;
    // Bounded: each transaction logs some 5 kB, a segment is 64 kB.
    while vfs.faults_injected().get(Fault::ExtendNoSpace) == 0 {
        assert!(id < 100, "no new WAL segment was needed");
        if insert(&db, t, id).is_ok() {
            acknowledged.insert(id);
        }
        id += 1;
    }
    // Stopped: every later commit is refused with the failed state's error.
    for id in id..id + 5 {
        let e = insert(&db, t, id).unwrap_err();
        assert_eq!(e.sqlstate(), "58030", "{e}");
    }
    assert!(db.checkpointer().checkpoint().is_err());
    common::crash(db, &vfs);
    let db = open_db(&vfs, config());
    assert!(visible(&db, t).is_superset(&acknowledged));
}
