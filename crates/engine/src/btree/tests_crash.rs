//! Crash safety on the simulated file system: trees built with splits under a small buffer
//! pool (so pages are evicted), checkpoints and write-back at random moments, then a power
//! loss (unsynced writes lost, kept or torn) and recovery by redo. Every entry whose WAL was
//! flushed must be there exactly once, nothing else may be, and `verify` must pass — also
//! when the crash falls between a split and its parent's downlink.
//!
//! Seeds: `QUIRE_CRASH_SEEDS` (default 200), or one seed with `QUIRE_CRASH_SEED`.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;

use super::insert::SKIP_DOWNLINK;
use super::tests::{all_entries, desc, open};
use super::*;
use crate::config::Config;
use crate::rng::SplitMix64;
use crate::vacuum::{DeadTids, TidStore};
use crate::vfs::{CrashOptions, SimVfs};
use crate::types::Lsn;

fn config() -> Config {
    Config {
        // Small enough that index pages are evicted (written back) during the workload.
        shared_buffers_bytes: 32 * 8192,
        wal_segment_size_bytes: 256 * 1024,
        wal_buffers_bytes: 1024 * 1024,
        checkpoint_timeout_s: 3600,
        ..Config::default()
    }
}

fn crash(vfs: &SimVfs, seed: u64) {
    vfs.crash(&CrashOptions {
        keep_unsynced_probability: 0.5,
        tear_writes: seed % 2 == 1,
    });
}

/// What the test knows about one entry.
#[derive(Clone, Copy, Debug, Default)]
struct Fate {
    /// `insert_lsn` right after the insert: durable once WAL is flushed to it.
    inserted_at: Lsn,
    /// Likewise for the bulk delete that removed it, if any.
    deleted_at: Option<Lsn>,
}

fn key_for(seed: u64, r: u64) -> Vec<Value> {
    if seed.is_multiple_of(3) {
        // Large text keys: deep trees from few entries.
        let len = 100 + (r % 900) as usize;
        vec![Value::Text(format!("{:05}", r % 50_000) + &"q".repeat(len))]
    } else {
        vec![Value::Int((r % 100_000).cast_signed())]
    }
}

fn crash_once(seed: u64) -> (usize, u64) {
    let vfs = Arc::new(SimVfs::new(seed));
    let mut rng = SplitMix64::new(seed * 7 + 3);
    let types = if seed.is_multiple_of(3) {
        vec![Type::Text]
    } else {
        vec![Type::Int]
    };
    let d = desc(900_100 + seed, false, types);
    let db = open(&vfs, config());
    let tree = BTree::new(
        db.buffer_pool(),
        db.wal(),
        db.btree_roots(),
        std::sync::Arc::new(d.clone()),
    );
    tree.create().unwrap();
    db.wal().flush(db.wal().insert_lsn()).unwrap();
    let mut fates: BTreeMap<(u64, Tid), (Vec<Value>, Fate)> = BTreeMap::new();
    let mut flushed = db.wal().flushed_lsn();
    let inserts = 600 + rng.next() % 1500;
    for n in 0..inserts {
        if rng.next().is_multiple_of(400) {
            // A stretch where splits stop before their downlinks, as a crash would there.
            SKIP_DOWNLINK.with(|s| s.set(!s.get()));
        }
        let r = rng.next();
        let key = key_for(seed, r);
        let tid = Tid::new((n / 100) as u32, (n % 100) as u16 + 1);
        tree.insert(&key, tid, Xid(10 + n), None)
            .unwrap_or_else(|e| panic!("seed {seed}: insert {n}: {e}"));
        let fate = Fate {
            inserted_at: db.wal().insert_lsn(),
            deleted_at: None,
        };
        fates.insert((r, tid), (key, fate));
        match rng.next() % 1000 {
            0..=2 => {
                db.checkpointer().checkpoint().unwrap();
            }
            3..=6 => db.buffer_pool().flush_all().unwrap(),
            7..=30 => {
                db.wal().flush(db.wal().insert_lsn()).unwrap();
                flushed = db.wal().flushed_lsn();
            }
            31 | 32 => {
                // Vacuum removes a random tenth of the entries.
                let mut dead: BTreeMap<u32, BTreeSet<u16>> = BTreeMap::new();
                let chosen: Vec<(u64, Tid)> = fates
                    .iter()
                    .filter(|(_, (_, f))| f.deleted_at.is_none())
                    .map(|(k, _)| *k)
                    .filter(|_| rng.next().is_multiple_of(10))
                    .collect();
                for (_, t) in &chosen {
                    dead.entry(t.block).or_default().insert(t.offset);
                }
                let mut store = TidStore::new(1 << 20);
                for (block, offs) in dead {
                    store
                        .add_block(block, &offs.into_iter().collect::<Vec<_>>())
                        .unwrap();
                }
                tree.bulk_delete(&store).unwrap();
                let at = db.wal().insert_lsn();
                for k in chosen {
                    fates.get_mut(&k).expect("chosen from fates").1.deleted_at = Some(at);
                }
            }
            _ => {}
        }
    }
    SKIP_DOWNLINK.with(|s| s.set(false));
    // Evictions and checkpoints flush WAL too: this is what is surely durable now. (WAL past
    // it may survive as well, so records after it may or may not be replayed.)
    let flushed = flushed.max(db.wal().flushed_lsn());
    drop(db);
    crash(&vfs, seed);

    let db = open(&vfs, config());
    let tree = BTree::new(
        db.buffer_pool(),
        db.wal(),
        db.btree_roots(),
        std::sync::Arc::new(d.clone()),
    );
    let report = tree
        .verify()
        .unwrap_or_else(|e| panic!("seed {seed}: verify after the crash: {e}"));
    check_entries(&tree, &fates, flushed, seed);
    // The recovered tree takes more inserts (repairing missing downlinks on the way).
    for n in 0..300u64 {
        let r = rng.next();
        tree.insert(
            &key_for(seed, r),
            Tid::new(1_000_000, (n + 1) as u16),
            Xid(5),
            None,
        )
        .unwrap_or_else(|e| panic!("seed {seed}: insert after the crash: {e}"));
    }
    let after = tree
        .verify()
        .unwrap_or_else(|e| panic!("seed {seed}: verify after more inserts: {e}"));
    assert!(
        after.leaf_entries >= report.leaf_entries + 300,
        "seed {seed}"
    );
    db.buffer_pool().check_invariants().unwrap();
    drop(db);
    (fates.len(), report.missing_downlinks)
}

/// Every entry durably inserted and never deleted is there once; every entry there was
/// inserted; none durably deleted is there. (An entry deleted by a record after `flushed` may
/// be either: WAL beyond the flushed point may survive the crash.)
fn check_entries(
    tree: &BTree<'_>,
    fates: &BTreeMap<(u64, Tid), (Vec<Value>, Fate)>,
    flushed: Lsn,
    seed: u64,
) {
    let mut by_tid: BTreeMap<Tid, (&Vec<Value>, Fate)> = BTreeMap::new();
    for ((_, tid), (key, fate)) in fates {
        by_tid.insert(*tid, (key, *fate));
    }
    let found = all_entries(tree);
    let mut seen = BTreeSet::new();
    for (key, tid) in &found {
        assert!(seen.insert(*tid), "seed {seed}: entry {tid} twice");
        let Some((want, fate)) = by_tid.get(tid) else {
            panic!("seed {seed}: entry {tid} was never inserted");
        };
        assert_eq!(*want, key, "seed {seed}: entry {tid} has the wrong key");
        if let Some(d) = fate.deleted_at {
            assert!(
                d > flushed,
                "seed {seed}: entry {tid} was durably deleted, yet is there"
            );
        }
    }
    let required = |fate: &Fate| fate.inserted_at <= flushed && fate.deleted_at.is_none();
    let missing: Vec<Tid> = by_tid
        .iter()
        .filter(|(tid, (_, fate))| required(fate) && !seen.contains(tid))
        .map(|(tid, _)| *tid)
        .collect();
    assert!(
        missing.is_empty(),
        "seed {seed}: {} durable entries missing (of {} found): {:?}",
        missing.len(),
        found.len(),
        &missing[..missing.len().min(20)]
    );
    for (tid, (key, fate)) in &by_tid {
        let required = required(fate);
        if required && tid.offset.is_multiple_of(7) {
            // Point lookups go through the descent, not only the leaf chain.
            let hits: Vec<_> = tree
                .scan(Bound::Included(&key[..]), Bound::Included(&key[..]))
                .unwrap()
                .map(|e| e.unwrap().1)
                .collect();
            assert!(
                hits.contains(tid),
                "seed {seed}: lookup of {key:?} misses {tid}"
            );
        }
    }
}

#[test]
fn btree_survives_power_loss_at_random_moments() {
    let seeds: u64 = std::env::var("QUIRE_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let only: Option<u64> = std::env::var("QUIRE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let (mut entries, mut missing) = (0, 0);
    for seed in only.map_or(0..seeds, |s| s..s + 1) {
        let (e, m) = crash_once(seed);
        entries += e;
        missing += m;
    }
    eprintln!(
        "{seeds} power losses: {entries} entries checked, {missing} missing downlinks tolerated"
    );
    assert!(
        only.is_some() || missing > 0,
        "no crash fell between a split and its downlink"
    );
}

#[test]
fn a_crash_between_a_split_and_its_downlink_leaves_a_searchable_tree() {
    let vfs = Arc::new(SimVfs::new(42));
    let d = desc(900_200, false, vec![Type::Int]);
    let db = open(&vfs, config());
    let tree = BTree::new(
        db.buffer_pool(),
        db.wal(),
        db.btree_roots(),
        std::sync::Arc::new(d.clone()),
    );
    tree.create().unwrap();
    // Every other key now, the rest later: later inserts land inside existing leaves.
    for k in 0..3000i64 {
        tree.insert(&[Value::Int(k * 2)], Tid::new(0, 1), Xid(5), None)
            .unwrap();
    }
    assert_eq!(tree.verify().unwrap().missing_downlinks, 0);
    SKIP_DOWNLINK.with(|s| s.set(true));
    let mut k = 1;
    while tree.verify().unwrap().missing_downlinks < 3 {
        tree.insert(&[Value::Int(k)], Tid::new(0, 1), Xid(5), None)
            .unwrap();
        k += 2;
    }
    SKIP_DOWNLINK.with(|s| s.set(false));
    db.wal().flush(db.wal().insert_lsn()).unwrap();
    drop(db);
    crash(&vfs, 1);

    let db = open(&vfs, config());
    let tree = BTree::new(
        db.buffer_pool(),
        db.wal(),
        db.btree_roots(),
        std::sync::Arc::new(d.clone()),
    );
    let report = tree.verify().unwrap();
    assert_eq!(report.missing_downlinks, 3, "{report:?}");
    let keys: Vec<i64> = all_entries(&tree)
        .iter()
        .map(|(k, _)| k[0].as_int().unwrap())
        .collect();
    let mut want: Vec<i64> = (0..3000).map(|k| k * 2).chain((1..k).step_by(2)).collect();
    want.sort_unstable();
    assert_eq!(keys, want);
    for &k in &want {
        let key = [Value::Int(k)];
        let hits = tree
            .scan(Bound::Included(&key[..]), Bound::Included(&key[..]))
            .unwrap()
            .count();
        assert_eq!(hits, 1, "lookup of {k}");
    }
    // Inserts that walk across the pages without downlinks repair them (each insert the
    // first page it crosses, so a chain of them takes a few).
    for k in 0..2 * k {
        tree.insert(&[Value::Int(k)], Tid::new(0, 2), Xid(5), None)
            .unwrap();
    }
    let report = tree.verify().unwrap();
    assert_eq!(report.missing_downlinks, 0, "{report:?}");
}

#[test]
fn a_built_index_survives_a_crash_after_its_wal_is_flushed() {
    let vfs = Arc::new(SimVfs::new(7));
    let d = desc(900_300, false, vec![Type::Int, Type::Text]);
    let db = open(&vfs, config());
    let tree = BTree::new(
        db.buffer_pool(),
        db.wal(),
        db.btree_roots(),
        std::sync::Arc::new(d.clone()),
    );
    tree.create().unwrap();
    let mut rng = SplitMix64::new(3);
    let entries: Vec<(Vec<Value>, Tid)> = (0..30_000u32)
        .map(|n| {
            let r = rng.next();
            let key = vec![
                Value::Int((r % 5000).cast_signed()),
                Value::Text(format!("v{}", r % 97)),
            ];
            (key, Tid::new(n / 100, (n % 100) as u16 + 1))
        })
        .collect();
    let stats = tree
        .build(entries.iter().cloned().map(Ok), 64 * 1024, Xid(9))
        .unwrap();
    assert!(stats.levels >= 2 && stats.runs > 1, "{stats:?}");
    db.wal().flush(db.wal().insert_lsn()).unwrap();
    let before = all_entries(&tree);
    assert_eq!(before.len(), entries.len());
    drop(db);
    crash(&vfs, 3);

    let db = open(&vfs, config());
    let tree = BTree::new(
        db.buffer_pool(),
        db.wal(),
        db.btree_roots(),
        std::sync::Arc::new(d.clone()),
    );
    tree.verify().unwrap();
    assert_eq!(all_entries(&tree), before);
    // And it grows like any other tree.
    for n in 0..2000u16 {
        tree.insert(
            &[Value::Int(i64::from(n)), Value::Text("new".into())],
            Tid::new(999, n + 1),
            Xid(5),
            None,
        )
        .unwrap();
    }
    assert_eq!(tree.verify().unwrap().leaf_entries, 32_000);
}
