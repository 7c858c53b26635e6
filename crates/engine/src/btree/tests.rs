//! B-tree tests: a model-checked proptest, unique checks, splits at every level, concurrency,
//! bulk delete and its interlock with scans, build, corruption detection. Crash tests are in
//! `tests_crash.rs`.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;

use super::page::{BtPage, META_BLOCK};
use super::*;

use crate::config::Config;
use crate::rng::SplitMix64;
use crate::vacuum::{DeadTids, TidStore};
use crate::vfs::{SimVfs, Vfs};
use crate::Database;
use crate::types::BufferTag;

// ------------------------------------------------------------------------------ harness

pub(super) struct Env {
    pub vfs: Arc<SimVfs>,
    pub db: Database,
    pub desc: IndexDesc,
}

pub(super) fn desc(rel_number: u64, unique: bool, key_types: Vec<Type>) -> IndexDesc {
    IndexDesc {
        rel: RelFileLocator::new(1, rel_number),
        name: format!("idx{rel_number}"),
        unique,
        key_types,
    }
}

pub(super) fn open(vfs: &Arc<SimVfs>, config: Config) -> Database {
    let dyn_vfs: Arc<dyn Vfs> = Arc::clone(vfs) as Arc<dyn Vfs>;
    Database::open(&dyn_vfs, Path::new("/data"), config).expect("open")
}

impl Env {
    pub fn new(unique: bool, key_types: Vec<Type>) -> Env {
        Env::with_config(unique, key_types, Config::default(), 1)
    }

    pub fn with_config(unique: bool, key_types: Vec<Type>, config: Config, seed: u64) -> Env {
        let vfs = Arc::new(SimVfs::new(seed));
        let db = open(&vfs, config);
        let desc = desc(900_001, unique, key_types);
        let env = Env { vfs, db, desc };
        env.tree().create().expect("create");
        env
    }

    pub fn tree(&self) -> BTree<'_> {
        BTree::new(
            self.db.buffer_pool(),
            self.db.wal(),
            self.db.btree_roots(),
            std::sync::Arc::new(self.desc.clone()),
        )
    }
}

/// Every entry of the index, in scan order.
pub(super) fn all_entries(tree: &BTree<'_>) -> Vec<(Vec<Value>, Tid)> {
    tree.scan(Bound::Unbounded, Bound::Unbounded)
        .expect("scan")
        .collect::<Result<Vec<_>>>()
        .expect("scan entries")
}

fn int(i: i64) -> Value {
    Value::Int(i)
}

fn tid_of(n: u64) -> Tid {
    Tid::new((n / 200) as u32, (n % 200) as u16 + 1)
}

/// A heap that answers probes from a table (Live for unknown TIDs).
#[derive(Default)]
struct FakeHeap(HashMap<Tid, Probe>);

impl HeapProbe for FakeHeap {
    fn probe(&self, tid: Tid) -> Result<Probe> {
        Ok(self.0.get(&tid).copied().unwrap_or(Probe::Live))
    }
}

/// A model entry ordered as the index orders entries.
#[derive(Clone, Debug)]
struct ModelKey(Vec<Value>, Tid);

impl PartialEq for ModelKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for ModelKey {}
impl PartialOrd for ModelKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ModelKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_values(&self.0, &other.0).then(self.1.cmp(&other.1))
    }
}

fn compare_values(a: &[Value], b: &[Value]) -> Ordering {
    a.iter()
        .zip(b)
        .map(|(x, y)| x.compare(y))
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
}

/// Whether `key` (a full key) is within prefix bounds.
fn in_bounds(key: &[Value], lower: &Bound<Vec<Value>>, upper: &Bound<Vec<Value>>) -> bool {
    let cmp = |b: &[Value]| compare_values(&key[..b.len()], b);
    let above_lower = match lower {
        Bound::Included(b) => cmp(b) != Ordering::Less,
        Bound::Excluded(b) => cmp(b) == Ordering::Greater,
        Bound::Unbounded => true,
    };
    let below_upper = match upper {
        Bound::Included(b) => cmp(b) != Ordering::Greater,
        Bound::Excluded(b) => cmp(b) == Ordering::Less,
        Bound::Unbounded => true,
    };
    above_lower && below_upper
}

fn as_ref_bound(b: &Bound<Vec<Value>>) -> Bound<&[Value]> {
    match b {
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn dead_store(tids: &[Tid]) -> TidStore {
    let mut by_block: BTreeMap<u32, Vec<u16>> = BTreeMap::new();
    for t in tids {
        by_block.entry(t.block).or_default().push(t.offset);
    }
    let mut store = TidStore::new(64 << 20);
    for (block, mut offs) in by_block {
        offs.sort_unstable();
        offs.dedup();
        store.add_block(block, &offs).expect("sorted input");
    }
    store
}

// ------------------------------------------------------------------------------ model test

/// Key shapes the property test draws from.
#[derive(Clone, Copy, Debug)]
enum Shape {
    Int,
    Text,
    IntText,
}

impl Shape {
    fn types(self) -> Vec<Type> {
        match self {
            Shape::Int => vec![Type::Int],
            Shape::Text => vec![Type::Text],
            Shape::IntText => vec![Type::Int, Type::Text],
        }
    }

    /// A key from a small domain (so duplicates are common), NULLs included.
    fn key(self, a: u16, b: u16, null: bool) -> Vec<Value> {
        let text = |n: u16| {
            // Long values now and then, so text pages split after few entries.
            let pad = if n.is_multiple_of(7) {
                600
            } else {
                usize::from(n % 5) * 20
            };
            Value::Text(format!("k{:04}{}", n % 300, "x".repeat(pad)))
        };
        match self {
            Shape::Int | Shape::Text if null => vec![Value::Null],
            Shape::Int => vec![int(i64::from(a % 500) - 250)],
            Shape::Text => vec![text(a)],
            Shape::IntText => vec![
                if null && a.is_multiple_of(2) {
                    Value::Null
                } else {
                    int(i64::from(a % 40))
                },
                if null && a % 2 == 1 {
                    Value::Null
                } else {
                    text(b)
                },
            ],
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert {
        a: u16,
        b: u16,
        null: bool,
        tid: u16,
    },
    /// Remove the entries whose TIDs are selected (by index into the model, modulo).
    BulkDelete(Vec<u16>),
    Scan {
        lower: (u8, u16, u16),
        upper: (u8, u16, u16),
        prefix: bool,
    },
    Verify,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (any::<u16>(), any::<u16>(), prop::bool::weighted(0.05), any::<u16>())
            .prop_map(|(a, b, null, tid)| Op::Insert { a, b, null, tid }),
        1 => prop::collection::vec(any::<u16>(), 0..40).prop_map(Op::BulkDelete),
        3 => ((0u8..3, any::<u16>(), any::<u16>()), (0u8..3, any::<u16>(), any::<u16>()), any::<bool>())
            .prop_map(|(lower, upper, prefix)| Op::Scan { lower, upper, prefix }),
        1 => Just(Op::Verify),
    ]
}

fn bound(shape: Shape, (kind, a, b): (u8, u16, u16), prefix: bool) -> Bound<Vec<Value>> {
    let mut key = shape.key(a, b, false);
    if prefix {
        key.truncate(1);
    }
    match kind {
        0 => Bound::Unbounded,
        1 => Bound::Included(key),
        _ => Bound::Excluded(key),
    }
}

fn run_model(shape: Shape, ops: Vec<Op>) -> std::result::Result<(), TestCaseError> {
    let env = Env::new(false, shape.types());
    let tree = env.tree();
    let mut model: BTreeSet<ModelKey> = BTreeSet::new();
    for op in ops {
        match op {
            Op::Insert { a, b, null, tid } => {
                let key = shape.key(a, b, null);
                let tid = Tid::new(u32::from(tid % 64), tid / 64 % 50 + 1);
                prop_assert_eq!(
                    tree.insert(&key, tid, Xid(7), None).unwrap(),
                    InsertOutcome::Inserted
                );
                model.insert(ModelKey(key, tid));
            }
            Op::BulkDelete(selectors) => {
                let keys: Vec<&ModelKey> = model.iter().collect();
                if keys.is_empty() {
                    continue;
                }
                let dead: Vec<Tid> = selectors
                    .iter()
                    .map(|s| keys[usize::from(*s) % keys.len()].1)
                    .collect();
                let store = dead_store(&dead);
                let stats = tree.bulk_delete(&store).unwrap();
                let before = model.len();
                model.retain(|k| !store.contains(k.1));
                prop_assert_eq!(stats.entries_removed as usize, before - model.len());
                prop_assert_eq!(stats.entries_seen as usize, before);
            }
            Op::Scan {
                lower,
                upper,
                prefix,
            } => {
                let (lo, hi) = (bound(shape, lower, prefix), bound(shape, upper, prefix));
                let got: Vec<(Vec<Value>, Tid)> = tree
                    .scan(as_ref_bound(&lo), as_ref_bound(&hi))
                    .unwrap()
                    .collect::<Result<_>>()
                    .unwrap();
                let want: Vec<(Vec<Value>, Tid)> = model
                    .iter()
                    .filter(|k| in_bounds(&k.0, &lo, &hi))
                    .map(|k| (k.0.clone(), k.1))
                    .collect();
                prop_assert_eq!(got.len(), want.len(), "scan {:?}..{:?}", lo, hi);
                for (g, w) in got.iter().zip(&want) {
                    prop_assert_eq!(compare_values(&g.0, &w.0), Ordering::Equal);
                    prop_assert_eq!(g.1, w.1);
                }
            }
            Op::Verify => {
                let report = tree.verify().unwrap();
                prop_assert_eq!(report.leaf_entries as usize, model.len());
                prop_assert_eq!(report.missing_downlinks, 0);
            }
        }
    }
    let report = tree.verify().unwrap();
    prop_assert_eq!(report.leaf_entries as usize, model.len());
    let all = all_entries(&tree);
    prop_assert_eq!(all.len(), model.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn model_int_keys(ops in prop::collection::vec(op(), 1..1500)) {
        run_model(Shape::Int, ops)?;
    }

    #[test]
    fn model_text_keys(ops in prop::collection::vec(op(), 1..800)) {
        run_model(Shape::Text, ops)?;
    }

    #[test]
    fn model_multi_column_keys_with_prefix_bounds(ops in prop::collection::vec(op(), 1..800)) {
        run_model(Shape::IntText, ops)?;
    }
}

// ------------------------------------------------------------------------------ unique

#[test]
fn unique_duplicate_of_a_live_key_fails_23505_with_the_key() {
    let env = Env::new(true, vec![Type::Int]);
    let tree = env.tree();
    let heap = FakeHeap::default();
    assert_eq!(
        tree.insert(&[int(42)], Tid::new(0, 1), Xid(5), Some(&heap))
            .unwrap(),
        InsertOutcome::Inserted
    );
    let err = tree
        .insert(&[int(42)], Tid::new(0, 2), Xid(6), Some(&heap))
        .unwrap_err();
    assert_eq!(err.sqlstate(), "23505");
    assert_eq!(
        err.to_string(),
        "duplicate key value violates unique constraint \"idx900001\" (Key (42) already exists)"
    );
    assert_eq!(
        all_entries(&tree).len(),
        1,
        "the failed insert left nothing behind"
    );
    // Without a probe (the caller knows better, e.g. a HOT-chain re-insert), no check.
    tree.insert(&[int(42)], Tid::new(0, 3), Xid(6), None)
        .unwrap();
    assert_eq!(all_entries(&tree).len(), 2);
}

#[test]
fn unique_duplicate_of_a_dead_key_succeeds_and_of_an_in_progress_one_must_wait() {
    let env = Env::new(true, vec![Type::Int, Type::Text]);
    let tree = env.tree();
    let mut heap = FakeHeap::default();
    let key = [int(1), Value::Text("a".into())];
    tree.insert(&key, Tid::new(0, 1), Xid(5), Some(&heap))
        .unwrap();
    heap.0.insert(Tid::new(0, 1), Probe::Dead);
    assert_eq!(
        tree.insert(&key, Tid::new(0, 2), Xid(6), Some(&heap))
            .unwrap(),
        InsertOutcome::Inserted
    );
    heap.0
        .insert(Tid::new(0, 2), Probe::InProgress { xid: Xid(6) });
    assert_eq!(
        tree.insert(&key, Tid::new(0, 3), Xid(7), Some(&heap))
            .unwrap(),
        InsertOutcome::MustWait { xid: Xid(6) }
    );
    assert_eq!(all_entries(&tree).len(), 2, "MustWait inserted nothing");
    // Nothing is held after MustWait: another insert (and a scan) proceed at once.
    tree.insert(
        &[int(2), Value::Text("b".into())],
        Tid::new(0, 4),
        Xid(8),
        Some(&heap),
    )
    .unwrap();
    // The inserter aborted: its entry is dead, the retry succeeds.
    heap.0.insert(Tid::new(0, 2), Probe::Dead);
    assert_eq!(
        tree.insert(&key, Tid::new(0, 3), Xid(7), Some(&heap))
            .unwrap(),
        InsertOutcome::Inserted
    );
    // A prefix-equal key is not a duplicate.
    tree.insert(
        &[int(1), Value::Text("b".into())],
        Tid::new(0, 5),
        Xid(9),
        Some(&heap),
    )
    .unwrap();
    tree.verify().unwrap();
}

#[test]
fn unique_index_allows_several_nulls() {
    let env = Env::new(true, vec![Type::Int, Type::Int]);
    let tree = env.tree();
    let heap = FakeHeap::default();
    for i in 0..5 {
        tree.insert(
            &[Value::Null, int(1)],
            Tid::new(0, i + 1),
            Xid(5),
            Some(&heap),
        )
        .unwrap();
        tree.insert(
            &[int(1), Value::Null],
            Tid::new(1, i + 1),
            Xid(5),
            Some(&heap),
        )
        .unwrap();
    }
    assert_eq!(all_entries(&tree).len(), 10);
    let err = {
        tree.insert(&[int(1), int(1)], Tid::new(2, 1), Xid(5), Some(&heap))
            .unwrap();
        tree.insert(&[int(1), int(1)], Tid::new(2, 2), Xid(5), Some(&heap))
            .unwrap_err()
    };
    assert_eq!(err.sqlstate(), "23505");
}

#[test]
fn unique_check_sees_a_live_duplicate_pages_to_the_right() {
    // Many dead versions of one key fill several leaves; the one live version is far right.
    let env = Env::new(true, vec![Type::Text]);
    let tree = env.tree();
    let mut heap = FakeHeap::default();
    let key = [Value::Text("k".repeat(1500))];
    for i in 0..40u16 {
        let tid = Tid::new(7, i + 1);
        tree.insert(&key, tid, Xid(5), Some(&heap)).unwrap();
        heap.0.insert(tid, Probe::Dead);
    }
    heap.0.remove(&Tid::new(7, 40)); // the last one is live
    let report = tree.verify().unwrap();
    assert!(
        report.pages_per_level[0] >= 8,
        "the duplicates span pages: {report:?}"
    );
    // A smaller TID goes to the leftmost page, yet the check must reach the live entry.
    let err = tree
        .insert(&key, Tid::new(0, 1), Xid(6), Some(&heap))
        .unwrap_err();
    assert_eq!(err.sqlstate(), "23505");
    heap.0
        .insert(Tid::new(7, 40), Probe::InProgress { xid: Xid(77) });
    assert_eq!(
        tree.insert(&key, Tid::new(9, 1), Xid(6), Some(&heap))
            .unwrap(),
        InsertOutcome::MustWait { xid: Xid(77) }
    );
}

// ------------------------------------------------------------------------------ splits

/// Inserts `keys`, each shifted past 32 bits so that it takes the eight-byte form (the
/// entry counts below are sized for it), and checks the tree.
fn levels_after(keys: impl Iterator<Item = i64>, count: usize) -> VerifyReport {
    let env = Env::new(false, vec![Type::Int]);
    let tree = env.tree();
    for (n, k) in keys.enumerate() {
        tree.insert(&[int(k << 33)], tid_of(n as u64), Xid(3), None)
            .unwrap();
    }
    let report = tree.verify().unwrap();
    assert_eq!(report.leaf_entries as usize, count);
    assert_eq!(report.missing_downlinks, 0);
    let all = all_entries(&tree);
    assert_eq!(all.len(), count);
    let ordered = |w: &[(Vec<Value>, Tid)]| w[0].0[0].compare(&w[1].0[0]).then(w[0].1.cmp(&w[1].1));
    assert!(all.windows(2).all(|w| ordered(w) == Ordering::Less));
    report
}

#[test]
fn ascending_inserts_make_a_three_level_tree_of_full_pages() {
    let n = 90_000;
    let report = levels_after(0..i64::try_from(n).unwrap(), n);
    assert!(report.levels >= 3, "{report:?}");
    // The right-edge split keeps 90%: far fewer leaves than a 50/50 split would leave.
    let per_leaf = n as u64 / report.pages_per_level[0];
    assert!(per_leaf > 230, "{per_leaf} entries per leaf: {report:?}");
}

#[test]
fn descending_inserts_make_a_three_level_tree() {
    let n = 60_000;
    let report = levels_after((0..i64::try_from(n).unwrap()).rev(), n);
    assert!(report.levels >= 3, "{report:?}");
}

#[test]
fn random_inserts_make_a_three_level_tree() {
    let n = 70_000;
    let mut rng = SplitMix64::new(11);
    let report = levels_after((0..n).map(|_| (rng.next() % 1_000_000).cast_signed()), n);
    assert!(report.levels >= 3, "{report:?}");
}

#[test]
fn large_text_keys_split_at_every_level() {
    let env = Env::new(false, vec![Type::Text, Type::Int]);
    let tree = env.tree();
    let mut rng = SplitMix64::new(5);
    let mut model = BTreeSet::new();
    for n in 0..3000u64 {
        let r = rng.next();
        // Up to the largest key allowed (a third of a page).
        let len = if r.is_multiple_of(10) {
            2600
        } else {
            200 + (r % 700) as usize
        };
        let key = vec![
            Value::Text(format!("{:06}", r % 100_000) + &"t".repeat(len)),
            int((r >> 20).cast_signed() % 3),
        ];
        let tid = tid_of(n);
        tree.insert(&key, tid, Xid(3), None).unwrap();
        model.insert(ModelKey(key, tid));
    }
    let report = tree.verify().unwrap();
    assert!(report.levels >= 4, "{report:?}");
    let all = all_entries(&tree);
    let want: Vec<(Vec<Value>, Tid)> = model.into_iter().map(|k| (k.0, k.1)).collect();
    assert_eq!(all, want);
    // Too large a key is refused before anything changes.
    let err = tree
        .insert(
            &[Value::Text("x".repeat(3000)), int(0)],
            Tid::new(0, 1),
            Xid(3),
            None,
        )
        .unwrap_err();
    assert_eq!(err.sqlstate(), "54000", "{err}");
}

#[test]
fn keys_of_the_wrong_shape_are_refused() {
    let env = Env::new(false, vec![Type::Int, Type::Text]);
    let tree = env.tree();
    assert_eq!(
        tree.insert(&[int(1)], Tid::new(0, 1), Xid(3), None)
            .unwrap_err()
            .sqlstate(),
        "42804"
    );
    let wrong_type = [Value::Text("a".into()), Value::Text("b".into())];
    assert_eq!(
        tree.insert(&wrong_type, Tid::new(0, 1), Xid(3), None)
            .unwrap_err()
            .sqlstate(),
        "42804"
    );
    let too_long = [int(1), Value::Text("a".into()), int(2)];
    assert!(tree
        .scan(Bound::Included(&too_long[..]), Bound::Unbounded)
        .is_err());
}

// ------------------------------------------------------------------------------ concurrency

#[test]
fn concurrent_writers_and_readers_keep_the_tree_consistent() {
    const WRITERS: u64 = 4;
    const PER_WRITER: u64 = 12_000;
    let env = Env::new(false, vec![Type::Int]);
    let tree = env.tree();
    let tree = &tree;
    let done = AtomicBool::new(false);
    let mut inserted: Vec<(i64, Tid)> = Vec::new();
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                s.spawn(move || {
                    let mut rng = SplitMix64::new(w + 100);
                    let mut mine = Vec::new();
                    for i in 0..PER_WRITER {
                        // Disjoint keys: the low bits name the writer.
                        let k = ((rng.next() % 1_000_000) * WRITERS + w).cast_signed();
                        let tid = Tid::new(w as u32, i as u16 + 1);
                        tree.insert(&[int(k)], tid, Xid(1), None).unwrap();
                        mine.push((k, tid));
                    }
                    mine
                })
            })
            .collect();
        let readers: Vec<_> = (0..2u64)
            .map(|r| {
                let done = &done;
                s.spawn(move || {
                    let mut rng = SplitMix64::new(r + 7);
                    let mut scans = 0;
                    while !done.load(AtomicOrdering::Acquire) || scans < 5 {
                        let lo = (rng.next() % 4_000_000).cast_signed();
                        let hi = lo + (rng.next() % 400_000).cast_signed();
                        let got: Vec<(Vec<Value>, Tid)> = tree
                            .scan(
                                Bound::Included(&[int(lo)][..]),
                                Bound::Excluded(&[int(hi)][..]),
                            )
                            .unwrap()
                            .collect::<Result<_>>()
                            .unwrap();
                        for pair in got.windows(2) {
                            let ord = pair[0].0[0]
                                .compare(&pair[1].0[0])
                                .then(pair[0].1.cmp(&pair[1].1));
                            assert_eq!(
                                ord,
                                Ordering::Less,
                                "a scan returned out of order or twice"
                            );
                        }
                        assert!(got
                            .iter()
                            .all(|(k, _)| (lo..hi).contains(&k[0].as_int().unwrap())));
                        scans += 1;
                    }
                    scans
                })
            })
            .collect();
        for w in writers {
            inserted.extend(w.join().unwrap());
        }
        done.store(true, AtomicOrdering::Release);
        for r in readers {
            assert!(r.join().unwrap() >= 5);
        }
    });
    inserted.sort_unstable();
    let found: Vec<(i64, Tid)> = all_entries(tree)
        .into_iter()
        .map(|(k, t)| (k[0].as_int().unwrap(), t))
        .collect();
    assert_eq!(found.len(), inserted.len(), "every entry exactly once");
    assert_eq!(found, inserted);
    let report = tree.verify().unwrap();
    assert_eq!(report.leaf_entries, WRITERS * PER_WRITER);
    assert_eq!(
        report.missing_downlinks, 0,
        "every split finished its downlink"
    );
    assert!(report.levels >= 2);
}

#[test]
fn concurrent_unique_inserters_of_one_key_let_exactly_one_in() {
    let env = Env::new(true, vec![Type::Int]);
    let tree = env.tree();
    let tree = &tree;
    let heap = FakeHeap::default(); // every existing entry is live
    let ok = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..4u32 {
            let (heap, ok) = (&heap, &ok);
            s.spawn(move || {
                for k in 0..2000i64 {
                    match tree.insert(&[int(k)], Tid::new(w, (k + 1) as u16), Xid(1), Some(heap)) {
                        Ok(InsertOutcome::Inserted) => {
                            ok.fetch_add(1, AtomicOrdering::Relaxed);
                        }
                        Err(Error::UniqueViolation { .. }) => {}
                        other => panic!("{other:?}"),
                    }
                }
            });
        }
    });
    assert_eq!(ok.load(AtomicOrdering::Relaxed), 2000, "one winner per key");
    let keys: Vec<i64> = all_entries(tree)
        .iter()
        .map(|(k, _)| k[0].as_int().unwrap())
        .collect();
    assert_eq!(keys, (0..2000).collect::<Vec<_>>());
    tree.verify().unwrap();
}

// ------------------------------------------------------------------------------ bulk delete

fn filled(n: u64) -> (Env, Vec<(i64, Tid)>) {
    let env = Env::new(false, vec![Type::Int]);
    let mut rng = SplitMix64::new(n);
    let mut entries = Vec::new();
    {
        let tree = env.tree();
        for i in 0..n {
            let k = (rng.next() % 10_000).cast_signed();
            let tid = tid_of(i);
            tree.insert(&[int(k)], tid, Xid(3), None).unwrap();
            entries.push((k, tid));
        }
    }
    entries.sort_unstable();
    (env, entries)
}

#[test]
fn bulk_delete_removes_exactly_the_dead_entries() {
    let (env, entries) = filled(20_000);
    let tree = env.tree();
    let dead: Vec<Tid> = entries
        .iter()
        .map(|e| e.1)
        .filter(|t| t.offset.is_multiple_of(3))
        .collect();
    let store = dead_store(&dead);
    let stats = tree.bulk_delete(&store).unwrap();
    assert_eq!(stats.entries_seen, 20_000);
    assert_eq!(stats.entries_removed, dead.len() as u64);
    assert!(
        stats.pages_changed > 1 && stats.leaf_pages >= stats.pages_changed,
        "{stats:?}"
    );
    let left: Vec<(i64, Tid)> = all_entries(&tree)
        .into_iter()
        .map(|(k, t)| (k[0].as_int().unwrap(), t))
        .collect();
    let want: Vec<(i64, Tid)> = entries
        .iter()
        .copied()
        .filter(|e| e.1.offset % 3 != 0)
        .collect();
    assert_eq!(left, want);
    // A second pass finds nothing; everything dead leaves empty pages in place.
    assert_eq!(tree.bulk_delete(&store).unwrap().entries_removed, 0);
    let all = dead_store(&entries.iter().map(|e| e.1).collect::<Vec<_>>());
    let stats = tree.bulk_delete(&all).unwrap();
    assert_eq!(stats.empty_leaf_pages, stats.leaf_pages, "{stats:?}");
    let report = tree.verify().unwrap();
    assert_eq!(report.leaf_entries, 0);
    assert!(
        report.pages_per_level[0] > 1,
        "no page deletion: the leaves stay"
    );
    // The empty tree takes inserts again.
    for (k, t) in entries.iter().take(1000) {
        tree.insert(&[int(*k)], *t, Xid(4), None).unwrap();
    }
    assert_eq!(tree.verify().unwrap().leaf_entries, 1000);
}

#[test]
fn cleanup_lock_waits_for_other_pins_and_gives_up_after_its_limit() {
    let (env, _) = filled(10);
    let pool = env.db.buffer_pool();
    let tag = BufferTag::new(env.desc.rel, crate::types::Fork::Main, 1);
    let mine = pool.read_buffer(tag).unwrap();
    let other = pool.read_buffer(tag).unwrap();
    let err = mine
        .lock_for_cleanup(Duration::from_millis(50))
        .err()
        .expect("pinned twice");
    assert_eq!(err.sqlstate(), "55P03", "{err}");
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let t0 = std::time::Instant::now();
            let g = mine.lock_for_cleanup(Duration::from_secs(30)).unwrap();
            drop(g);
            t0.elapsed()
        });
        std::thread::sleep(Duration::from_millis(100));
        drop(other);
        let waited = waiter.join().unwrap();
        assert!(
            waited >= Duration::from_millis(90),
            "granted while pinned: {waited:?}"
        );
        assert!(
            waited < Duration::from_secs(5),
            "not woken by the unpin: {waited:?}"
        );
    });
}

#[test]
fn bulk_delete_waits_for_a_scan_that_holds_copies_of_the_entries() {
    let (env, entries) = filled(3000);
    let tree = env.tree();
    let mut scan = tree.scan(Bound::Unbounded, Bound::Unbounded).unwrap();
    let first = scan.next().unwrap().unwrap();
    assert_eq!((first.0[0].as_int().unwrap(), first.1), entries[0]);
    // Every entry is dead: vacuum would empty the leaf the scan stands on.
    let store = dead_store(&entries.iter().map(|e| e.1).collect::<Vec<_>>());
    let finished = AtomicBool::new(false);
    std::thread::scope(|s| {
        let vacuum = s.spawn(|| {
            let stats = tree.bulk_delete(&store).unwrap();
            finished.store(true, AtomicOrdering::Release);
            stats
        });
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            !finished.load(AtomicOrdering::Acquire),
            "vacuum passed a pinned leaf"
        );
        // The scan still returns the entries it copied from its leaf.
        let second = scan.next().unwrap().unwrap();
        assert_eq!((second.0[0].as_int().unwrap(), second.1), entries[1]);
        drop(scan);
        let stats = vacuum.join().unwrap();
        assert_eq!(stats.entries_removed, 3000);
    });
    assert!(all_entries(&tree).is_empty());
    tree.verify().unwrap();
}

// ------------------------------------------------------------------------------ cached roots

#[test]
fn descents_follow_the_root_as_it_splits_and_never_start_from_a_stale_one() {
    let env = Env::new(false, vec![Type::Int]);
    let tree = env.tree();
    let rel = env.desc.rel;
    let mut levels_seen = Vec::new();
    for n in 0..90_000i64 {
        tree.insert(&[int(n << 33)], tid_of(n as u64), Xid(3), None)
            .unwrap();
        if n % 500 == 0 {
            // A search caches the root it started from: the metapage's, whenever the cached
            // one split since.
            let found = tree
                .scan(Bound::Included(&[int(n << 33)]), Bound::Included(&[int(n << 33)]))
                .unwrap()
                .count();
            assert_eq!(found, 1, "{n}");
            let root = env.db.btree_roots().get(rel).expect("a descent caches the root");
            let buf = tree.pin(root.block).unwrap();
            let g = buf.read();
            let page = tree.view(&g, root.block).unwrap();
            assert!(page.special.is_root(), "cached {root:?} is not the root after {n}");
            assert_eq!(page.special.level, root.level);
            levels_seen.push(root.level);
        }
    }
    levels_seen.dedup();
    assert_eq!(levels_seen, [0, 1, 2], "the root split twice while cached");
    assert_eq!(all_entries(&tree).len(), 90_000);
}

#[test]
fn after_a_build_descents_leave_the_empty_trees_root_for_the_built_one() {
    let env = Env::new(false, vec![Type::Int]);
    let tree = env.tree();
    let rel = env.desc.rel;
    // The empty tree's root leaf gets cached; the build rewrites that block as the first of
    // its leaves, no longer the root, so the next descent must notice and read the metapage.
    // (Starting from that leaf would still find every key, by moving right: what shows the
    // stale root was left is the cache itself.)
    let entries = (0..50_000u32).map(|n| Ok((vec![int(i64::from(n) << 33)], tid_of(u64::from(n)))));
    assert_eq!(all_entries(&tree).len(), 0);
    let empty_root = env.db.btree_roots().get(rel).expect("a descent caches the root");
    tree.build(entries, 64 * 1024 * 1024, Xid(4)).unwrap();
    assert_eq!(all_entries(&tree).len(), 50_000);
    let key = [int(49_999 << 33)];
    let hits = tree
        .scan(Bound::Included(&key), Bound::Included(&key))
        .unwrap()
        .count();
    assert_eq!(hits, 1);
    let meta = tree.read_meta().unwrap();
    let cached = env.db.btree_roots().get(rel).expect("a descent caches the root");
    assert_ne!(cached, empty_root, "the build made a taller tree");
    assert_eq!((cached.block, cached.level), (meta.root, meta.level));
}

// ------------------------------------------------------------------------------ build

#[test]
fn build_with_an_external_sort_equals_inserts() {
    let env = Env::new(false, vec![Type::Int, Type::Text]);
    let by_inserts = desc(900_002, false, vec![Type::Int, Type::Text]);
    let other = BTree::new(
        env.db.buffer_pool(),
        env.db.wal(),
        env.db.btree_roots(),
        std::sync::Arc::new(by_inserts.clone()),
    );
    other.create().unwrap();
    let mut rng = SplitMix64::new(99);
    let entries: Vec<(Vec<Value>, Tid)> = (0..200_000u32)
        .map(|n| {
            let r = rng.next();
            let text = if r.is_multiple_of(50) {
                Value::Null
            } else {
                Value::Text(format!("t{}", r % 31))
            };
            (
                vec![int((r % 40_000).cast_signed()), text],
                Tid::new(n / 150, (n % 150) as u16 + 1),
            )
        })
        .collect();
    let tree = env.tree();
    let stats = tree
        .build(entries.iter().cloned().map(Ok), 256 * 1024, Xid(4))
        .unwrap();
    assert_eq!(stats.entries, 200_000);
    assert!(
        stats.runs > 8 && stats.merge_passes >= 1,
        "not external: {stats:?}"
    );
    assert!(stats.levels >= 3, "{stats:?}");
    for (key, tid) in &entries {
        other.insert(key, *tid, Xid(4), None).unwrap();
    }
    let built = all_entries(&tree);
    assert_eq!(built.len(), 200_000);
    assert_eq!(built, all_entries(&other));
    let (a, b) = (tree.verify().unwrap(), other.verify().unwrap());
    assert_eq!(a.leaf_entries, b.leaf_entries);
    assert!(
        a.pages_per_level[0] < b.pages_per_level[0],
        "build packs pages: {a:?} vs {b:?}"
    );
    // The sort runs are gone.
    let tmp = Path::new("/data/base/pgsql_tmp");
    assert!(env.vfs.list_dir(tmp).unwrap().is_empty());
    // A built tree takes inserts and splits like any other.
    for n in 0..5000u16 {
        tree.insert(
            &[int(i64::from(n)), Value::Text("z".into())],
            Tid::new(5000, n + 1),
            Xid(5),
            None,
        )
        .unwrap();
    }
    assert_eq!(tree.verify().unwrap().leaf_entries, 205_000);
}

#[test]
fn build_of_large_keys_in_memory_makes_a_deep_tree() {
    let env = Env::new(true, vec![Type::Text]);
    let tree = env.tree();
    let entries = (0..4000u32).map(|n| {
        let key = vec![Value::Text(
            format!("{:08}", n.wrapping_mul(2_654_435_761) % 100_000_000) + &"w".repeat(900),
        )];
        Ok((key, Tid::new(n, 1)))
    });
    let stats = tree.build(entries, 64 << 20, Xid(4)).unwrap();
    assert_eq!(stats.runs, 0);
    assert!(stats.levels >= 4, "{stats:?}");
    let report = tree.verify().unwrap();
    assert_eq!(report.leaf_entries, 4000);
    assert_eq!(
        report.pages_per_level.iter().sum::<u64>(),
        stats.leaf_pages + stats.internal_pages
    );
}

#[test]
fn build_refuses_duplicates_in_a_unique_index_but_not_nulls_and_needs_an_empty_index() {
    let env = Env::new(true, vec![Type::Int]);
    let tree = env.tree();
    let nulls = (0..10u16).map(|i| Ok((vec![Value::Null], Tid::new(0, i + 1))));
    tree.build(nulls, 1 << 20, Xid(4)).unwrap();
    let err = tree.build(std::iter::empty(), 1 << 20, Xid(4)).unwrap_err();
    assert_eq!(err.sqlstate(), "55000", "{err}");
    let env = Env::new(true, vec![Type::Int]);
    let dups = [(1, 1), (2, 2), (1, 3)].map(|(k, o)| Ok((vec![int(k)], Tid::new(0, o))));
    let err = env
        .tree()
        .build(dups.into_iter(), 1 << 20, Xid(4))
        .unwrap_err();
    assert_eq!(err.sqlstate(), "23505", "{err}");
    // An error from the entries' source stops the build.
    let env = Env::new(false, vec![Type::Int]);
    let failing = [
        Ok((vec![int(1)], Tid::new(0, 1))),
        Err(Error::InvalidParameter {
            what: "boom".into(),
        }),
    ];
    assert!(env
        .tree()
        .build(failing.into_iter(), 1 << 20, Xid(4))
        .is_err());
}

// ------------------------------------------------------------------------------ corruption

/// Applies `f` to block `block` of the index in the buffer pool (as a bug or bad disk would).
fn tamper(env: &Env, block: u32, f: impl FnOnce(&mut [u8; crate::types::PAGE_SIZE])) {
    let tag = BufferTag::new(env.desc.rel, crate::types::Fork::Main, block);
    let buf = env.db.buffer_pool().read_buffer(tag).unwrap();
    let mut g = buf.write();
    f(&mut g);
    g.mark_dirty();
}

fn corrupt_block(err: &Error) -> u32 {
    match err {
        Error::CorruptIndex { block, .. } => *block,
        other => panic!("expected CorruptIndex, got {other}"),
    }
}

#[test]
fn verify_names_the_block_of_out_of_order_keys() {
    let (env, _) = filled(2000);
    let tree = env.tree();
    let report = tree.verify().unwrap();
    let leaf = {
        let meta = tree.read_meta().unwrap();
        let buf = tree.pin(meta.root).unwrap();
        let g = buf.read();
        let p = BtPage::new(&g, env.desc.rel, meta.root).unwrap();
        p.tuple(p.first_data() + 1).unwrap().downlink
    };
    tamper(&env, leaf, |page| {
        // Swap the key bytes of two adjacent entries.
        let p = crate::page::PageMut::new(page);
        let a = p.as_page().item(3).unwrap().to_vec();
        let b = p.as_page().item(4).unwrap().to_vec();
        assert_ne!(a[12..], b[12..]);
        p.as_page();
        crate::page::PageMut::new(page).item_mut(3).unwrap()[12..].copy_from_slice(&b[12..]);
        crate::page::PageMut::new(page).item_mut(4).unwrap()[12..].copy_from_slice(&a[12..]);
    });
    let err = tree.verify().unwrap_err();
    assert_eq!(corrupt_block(&err), leaf, "{err}");
    assert_eq!(err.sqlstate(), "XX001");
    assert!(report.levels >= 2);
}

#[test]
fn verify_and_scans_catch_a_right_link_cycle_and_a_bad_downlink() {
    let (env, _) = filled(3000);
    let tree = env.tree();
    let meta = tree.read_meta().unwrap();
    let (first_leaf, second_leaf) = {
        let buf = tree.pin(meta.root).unwrap();
        let g = buf.read();
        let p = BtPage::new(&g, env.desc.rel, meta.root).unwrap();
        (
            p.tuple(p.first_data()).unwrap().downlink,
            p.tuple(p.first_data() + 1).unwrap().downlink,
        )
    };
    // The second leaf's right-link back to the first: a cycle.
    tamper(&env, second_leaf, |page| {
        page[crate::types::PAGE_SIZE - 16..crate::types::PAGE_SIZE - 12]
            .copy_from_slice(&first_leaf.to_le_bytes());
    });
    assert!(matches!(
        tree.verify().unwrap_err(),
        Error::CorruptIndex { .. }
    ));
    let scanned: Result<Vec<_>> = tree
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .collect();
    assert!(
        matches!(scanned.unwrap_err(), Error::CorruptIndex { .. }),
        "the scan must not loop forever"
    );

    // A downlink to the metapage.
    let (env, _) = filled(3000);
    let tree = env.tree();
    let meta = tree.read_meta().unwrap();
    tamper(&env, meta.root, |page| {
        let p = crate::page::PageMut::new(page);
        let item = p.as_page().item(2).map(<[u8]>::to_vec).unwrap();
        let mut changed = item;
        changed[8..12].copy_from_slice(&META_BLOCK.to_le_bytes());
        crate::page::PageMut::new(page)
            .item_mut(2)
            .unwrap()
            .copy_from_slice(&changed);
    });
    let err = tree.verify().unwrap_err();
    assert!(matches!(err, Error::CorruptIndex { .. }), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Garbage in a leaf never panics anything: every operation returns Ok or an error.
    #[test]
    fn garbage_pages_are_errors_not_panics(
        offset in 24usize..crate::types::PAGE_SIZE,
        bytes in prop::collection::vec(any::<u8>(), 1..64),
        which in 0u32..3,
    ) {
        let (env, entries) = filled(1500);
        let tree = env.tree();
        let block = 1 + which;
        tamper(&env, block, |page| {
            let end = (offset + bytes.len()).min(crate::types::PAGE_SIZE);
            page[offset..end].copy_from_slice(&bytes[..end - offset]);
        });
        let _ = tree.verify();
        let _ = tree.scan(Bound::Unbounded, Bound::Unbounded).map(Iterator::count);
        let _ = tree.scan(Bound::Included(&[int(5000)][..]), Bound::Unbounded).map(Iterator::count);
        for k in [0, 2500, 5000, 9999] {
            let _ = tree.insert(&[int(k)], Tid::new(60_000, 1), Xid(3), Some(&FakeHeap::default()));
        }
        let _ = tree.bulk_delete(&dead_store(&[entries[0].1]));
    }
}

/// Redo of a malformed record fails with WalCorrupt (XX001) or applies; it never panics.
/// Random records against one index: random main data, and truncated or bit-flipped copies
/// of well-formed records.
#[test]
fn redo_of_malformed_records_never_panics() {
    let (env, _) = filled(300);
    let ctx = crate::recovery::RedoContext {
        smgr: env.db.smgr(),
        pool: env.db.buffer_pool(),
        invalid_pages: &crate::recovery::InvalidPages::default(),
    };
    let leaf = super::page::encode_tuple(Tid::new(1, 1), 1, super::page::NO_BLOCK, &[3; 9]);
    let split = redo::SplitPlan {
        root_split: false,
        level: 0,
        new_index: 1,
        nleft: 2,
        new_tuple: leaf.clone(),
        pivot: leaf.clone(),
        right_link: super::page::NO_BLOCK,
        right_high_key: None,
        right_items: vec![leaf.clone(); 3],
    }
    .encode();
    let templates = [
        split,
        redo::insert_record(2, &leaf),
        redo::delete_record(&[1, 2, 3]),
    ];
    let mut rng = SplitMix64::new(17);
    let mut applied = 0;
    for n in 0..4000u64 {
        let r = rng.next();
        let mut main: Vec<u8> = if r.is_multiple_of(2) {
            let len = (rng.next() % 300) as usize;
            (0..len).map(|_| rng.next() as u8).collect()
        } else {
            let t = &templates[(rng.next() % 3) as usize];
            t[..(rng.next() as usize % (t.len() + 1))].to_vec()
        };
        if !main.is_empty() && r.is_multiple_of(3) {
            let at = rng.next() as usize % main.len();
            main[at] ^= 1 << (rng.next() % 8);
        }
        let nblocks = (rng.next() % 5) as u32;
        let first = (rng.next() % 4) as u32;
        let rec = crate::wal::DecodedRecord {
            lsn: crate::types::Lsn((1 << 40) + n * 1000),
            end_lsn: crate::types::Lsn((1 << 40) + n * 1000 + 100),
            prev: crate::types::Lsn::INVALID,
            xid: Xid(1),
            rmid: crate::recovery::rmid::BTREE,
            info: (rng.next() % 8) as u8,
            blocks: (0..nblocks)
                .map(|i| crate::wal::DecodedBlock {
                    tag: BufferTag::new(env.desc.rel, crate::types::Fork::Main, first + i),
                    image: None,
                })
                .collect(),
            main,
        };
        match crate::recovery::ResourceManager::redo(&redo::BTreeRedo, &ctx, &rec) {
            Ok(()) => applied += 1,
            Err(e) => assert_eq!(e.sqlstate(), "XX001", "record {n}: {e}"),
        }
    }
    // Some garbage is well-formed enough to apply: the paths past the parsing ran too.
    assert!(applied > 20, "only {applied} records applied");
}

#[test]
fn a_late_second_insert_of_a_downlink_adds_nothing() {
    // A downlink inserted twice (the splitter and a lazy repair) where, between the two, the
    // parent split right at it: the first copy became the minus-infinity entry of the new
    // parent page, with the key only as that page's lower bound.
    let env = Env::new(false, vec![Type::Text]);
    let tree = env.tree();
    for n in 0..1500u32 {
        let key = format!("{:08}", n.wrapping_mul(2_654_435_761) % 100_000_000) + &"d".repeat(900);
        tree.insert(&[Value::Text(key)], Tid::new(n, 1), Xid(3), None)
            .unwrap();
    }
    let before = tree.verify().unwrap();
    assert!(before.levels >= 3, "{before:?}");
    // The leftmost page of level 1 and its right sibling.
    let meta = tree.read_meta().unwrap();
    let mut block = meta.root;
    for _ in 1..meta.level {
        let buf = tree.pin(block).unwrap();
        let g = buf.read();
        let p = BtPage::new(&g, env.desc.rel, block).unwrap();
        block = p.tuple(p.first_data()).unwrap().downlink;
    }
    let (pivot, right) = {
        let buf = tree.pin(block).unwrap();
        let g = buf.read();
        let p = BtPage::new(&g, env.desc.rel, block).unwrap();
        assert_eq!(p.special.level, 1);
        (p.item_bytes(1).unwrap().to_vec(), p.special.right_link)
    };
    let first_child = {
        let buf = tree.pin(right).unwrap();
        let g = buf.read();
        let p = BtPage::new(&g, env.desc.rel, right).unwrap();
        p.tuple(p.first_data()).unwrap().downlink
    };
    let again = Downlink {
        level: 0,
        tuple: super::page::with_downlink(&pivot, first_child),
    };
    assert!(tree.insert_downlink(&again, Xid(3)).unwrap().is_none());
    let after = tree.verify().unwrap();
    assert_eq!(after.internal_entries, before.internal_entries);
}

#[test]
fn redo_refuses_a_well_formed_split_that_does_not_fit_the_page() {
    let (env, _) = filled(300);
    let ctx = crate::recovery::RedoContext {
        smgr: env.db.smgr(),
        pool: env.db.buffer_pool(),
        invalid_pages: &crate::recovery::InvalidPages::default(),
    };
    let block = |b: u32| crate::wal::DecodedBlock {
        tag: BufferTag::new(env.desc.rel, crate::types::Fork::Main, b),
        image: None,
    };
    let leaf = super::page::encode_tuple(
        Tid::new(1, 1),
        1,
        super::page::NO_BLOCK,
        &[3, 0, 0, 0, 0, 0, 0, 0, 0],
    );
    for (level, nleft, root_split) in [(u16::MAX, 1, true), (3, 1, false), (0, 60_000, false)] {
        let plan = redo::SplitPlan {
            root_split,
            level,
            new_index: 0,
            nleft,
            new_tuple: leaf.clone(),
            pivot: leaf.clone(),
            right_link: super::page::NO_BLOCK,
            right_high_key: None,
            right_items: vec![leaf.clone()],
        };
        let rec = crate::wal::DecodedRecord {
            lsn: crate::types::Lsn(1 << 40),
            end_lsn: crate::types::Lsn((1 << 40) + 100),
            prev: crate::types::Lsn::INVALID,
            xid: Xid(1),
            rmid: crate::recovery::rmid::BTREE,
            info: redo::BTreeRecord::Split as u8,
            blocks: if root_split {
                vec![block(1), block(2), block(3), block(0)]
            } else {
                vec![block(1), block(2)]
            },
            main: plan.encode(),
        };
        let err = crate::recovery::ResourceManager::redo(&redo::BTreeRedo, &ctx, &rec).unwrap_err();
        assert!(
            matches!(err, Error::WalCorrupt { .. }),
            "level {level}, nleft {nleft}: {err}"
        );
    }
}
