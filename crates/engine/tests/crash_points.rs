//! A power cut at the Nth file-layer operation of a fixed workload, for N swept over the
//! whole workload (SQLite's crash tests stop at every sync the same way), so that crashes
//! land inside a checkpoint, a commit, a relation truncation, a two-phase state file and a
//! commit-log segment removal, not only between operations.
//!
//! Fault model: after N operations every file operation fails (the machine stopped), then a
//! power loss that keeps each unsynced write and directory change with even odds, torn at
//! 512-byte sectors. Verified after the restart, for every N: the restart succeeds; each
//! group of rows (one transaction's) is there entirely or not at all, there if its commit
//! was acknowledged, gone if its deletion was; the unique index agrees with the heap; a
//! transaction whose PREPARE was acknowledged is prepared or finished as acknowledged.
//! `QUIRE_CRASH_POINTS=N` sweeps N points (0: every operation; the default fits CI).

mod common;

use std::collections::BTreeMap;

use common::{committing, lossy, new_db};

use quire_engine::vfs::{OpCounts, OpKind, SimVfs, Vfs};
use quire_engine::{Column, Config, Database, IsolationLevel, TableId, Type, Value};

const GROUPS: i64 = 12;
const ROWS: i64 = 25;

fn config() -> Config {
    Config {
        shared_buffers_bytes: 24 * 8192,
        segment_size_blocks: 4,
        wal_segment_size_bytes: 64 * 1024,
        max_prepared_transactions: 2,
        // Few kept statuses, so that VACUUM of the database removes commit-log segments.
        vacuum_freeze_min_age: 0,
        ..common::config()
    }
}

/// What the workload was told about a group of rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// Its insert was acknowledged (and no deletion tried).
    Present,
    /// Its deletion was acknowledged.
    Absent,
    /// A commit or prepare that returned an error, or a prepared transaction: either.
    Either,
}

fn group_rows(g: i64) -> std::ops::Range<i64> {
    g * ROWS..(g + 1) * ROWS
}

fn insert_group(db: &Database, t: TableId, g: i64) -> quire_engine::Result<()> {
    let tx = db.begin(IsolationLevel::ReadCommitted)?;
    for id in group_rows(g) {
        tx.insert(t, &[Value::Int(id), Value::Text("y".repeat(150))])?;
    }
    tx.commit()
}

fn delete_group(db: &Database, t: TableId, g: i64) -> quire_engine::Result<()> {
    let tx = db.begin(IsolationLevel::ReadCommitted)?;
    let rows: Vec<_> = tx.scan(t)?.collect::<quire_engine::Result<_>>()?;
    for (tid, row) in rows {
        if group_rows(g).contains(&row[0].as_int().unwrap_or(-1)) {
            tx.delete(t, tid)?;
        }
    }
    tx.commit()
}

/// Runs the workload until its first failure; returns what it was told of each group.
fn workload(db: &Database, t: TableId) -> BTreeMap<i64, Fate> {
    let mut fates = BTreeMap::new();
    for g in 0..GROUPS {
        let fate = if insert_group(db, t, g).is_ok() {
            Fate::Present
        } else {
            Fate::Either
        };
        fates.insert(g, fate);
        let step = match g {
            3 | 7 | 9 => db.checkpointer().checkpoint().map(drop),
            // The last groups deleted, then VACUUM cuts the empty tail pages off.
            5 => delete_group(db, t, 4)
                .map(|()| {
                    fates.insert(4, Fate::Absent);
                })
                .and_then(|()| db.vacuum(t).map(drop)),
            6 => {
                let tx = db.begin(IsolationLevel::ReadCommitted);
                let prepared = tx.and_then(|tx| {
                    tx.insert(t, &[Value::Int(GROUPS * ROWS), Value::Text("p".into())])?;
                    tx.prepare("g")
                });
                fates.insert(GROUPS, Fate::Either);
                prepared
            }
            8 => db.commit_prepared("g").map(|()| {
                fates.insert(GROUPS, Fate::Present);
            }),
            10 => db.vacuum_all().map(drop),
            _ => Ok(()),
        };
        if step.is_err() && matches!(db.health(), quire_engine::HealthState::Failed { .. }) {
            break;
        }
        if step.is_err() {
            // A failed step other than a stop (an I/O error after the cut): the engine
            // may go on; nothing more can reach the disk anyway.
            for later in g + 1..GROUPS {
                fates.insert(later, Fate::Either);
            }
            break;
        }
    }
    fates
}

fn setup(seed: u64) -> (std::sync::Arc<SimVfs>, Database, TableId) {
    let (vfs, db) = new_db(seed, config());
    let t = committing(&db, |tx| {
        let columns = [
            Column::new("id", Type::Int),
            Column::new("filler", Type::Text),
        ];
        let t = tx.create_table("t", &columns).unwrap();
        tx.create_index("t_pkey", t, &["id"], true).unwrap();
        t
    });
    (vfs, db, t)
}

fn total(c: &OpCounts) -> u64 {
    OpKind::ALL.iter().map(|&k| c.get(k)).sum()
}

/// One crash at operation `cut` of the workload; checks the restarted database.
fn crash_at(cut: u64) {
    let (vfs, db, t) = setup(cut);
    vfs.cut_power_after(cut);
    let fates = workload(&db, t);
    drop(db);
    vfs.crash(&lossy(true));
    let db = common::try_open(&vfs, config())
        .unwrap_or_else(|e| panic!("cut at {cut}: the restart failed: {e}"));
    // A recovered prepared transaction holds its table lock: end it first (its fate is
    // open either way; rolled back, its row is not counted).
    for gid in common::gids(&db) {
        db.rollback_prepared(&gid).unwrap();
    }
    let tx = db.begin(IsolationLevel::ReadCommitted).unwrap();
    let mut seen: BTreeMap<i64, i64> = BTreeMap::new();
    for row in tx.scan(t).unwrap() {
        let id = row.unwrap().1[0].as_int().unwrap();
        *seen.entry(id / ROWS).or_default() += 1;
    }
    tx.verify_indexes(t)
        .unwrap_or_else(|e| panic!("cut at {cut}: the index disagrees: {e}"));
    tx.commit().unwrap();
    for (g, fate) in &fates {
        let n = seen.get(g).copied().unwrap_or(0);
        let want = if *g == GROUPS { 1 } else { ROWS };
        assert!(
            n == 0 || n == want,
            "cut at {cut}: group {g} half there ({n} rows)"
        );
        match fate {
            Fate::Present => assert_eq!(n, want, "cut at {cut}: acknowledged group {g} lost"),
            Fate::Absent => assert_eq!(n, 0, "cut at {cut}: deleted group {g} came back"),
            Fate::Either => {}
        }
    }
    for g in seen.keys() {
        assert!(
            fates.contains_key(g),
            "cut at {cut}: group {g} was never inserted"
        );
    }
    db.close().unwrap();
}

#[test]
fn a_power_cut_at_any_operation_of_the_workload_recovers() {
    // The workload's length in operations, measured on a run without a cut.
    let (vfs, db, t) = setup(0);
    let before = vfs.counters().snapshot();
    let fates = workload(&db, t);
    assert!(
        fates.values().all(|f| *f != Fate::Either),
        "without a cut every step succeeds: {fates:?}"
    );
    let ops = total(&vfs.counters().snapshot().since(&before));
    drop(db);
    let points = std::env::var("QUIRE_CRASH_POINTS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(40);
    // 0 points: every operation.
    let step = ops.checked_div(points).unwrap_or(1).max(1);
    let mut cuts = 0;
    for cut in (0..=ops).step_by(step as usize) {
        crash_at(cut);
        cuts += 1;
    }
    eprintln!("{cuts} power cuts over a workload of {ops} file operations");
}
