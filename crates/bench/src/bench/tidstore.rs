//! `quire-bench tidstore` (seed 004): the dead-TID structures of lazy vacuum on the eight
//! distributions of Masahiko Sawada's comparison (pgsql-hackers, "[PoC] Improve dead tuple
//! storage for lazy vacuum", 2021-07-27), measured side by side in one process: quire's
//! [`TidStore`] (`dead_tids = store`), PostgreSQL's sorted array [`TidArray`]
//! (`dead_tids = array`), and `roaring::RoaringTreemap` as an outside peer.
//!
//! ## The distributions
//!
//! Each test is the seed's `prepare(max_block, dead_per_page, interval_in_page,
//! consecutive_pages, page_interval)`, following `prepare()` in `bdbench/bdbench.c` of
//! MasahikoSawada/pgtools (the extension the seed ran): with `N = dead_per_page ×
//! interval_in_page`, block `b < max_block` has dead tuples iff `b % page_interval <
//! consecutive_pages`, and its dead offsets are the multiples of `interval_in_page` in
//! `1..=N` (so `interval, 2·interval, …, dead_per_page·interval`). The table has `N` tuples on
//! every page. Two departures, both printed:
//! - with this generator test 1 has 500,000 dead TIDs at 1,000,000 blocks, while the seed's
//!   array size for test 1 (57.23 MB = 10,000,000 × 6 bytes) implies 10,000,000; the `tids`
//!   column shows what was measured;
//! - test 7 ("dead tuples in the first and last 1,000 blocks") is defined relative to the
//!   table: `consecutive_pages = max_block / 1000`, `page_interval = max_block -
//!   consecutive_pages`, which is the seed's (1000, 999000) at 1,000,000 blocks and gives the
//!   seed's x10 array size (17.17 MB = 3,000,000 TIDs) at 10,000,000.
//!
//! A ninth distribution, `random`, is not in the seed: every page holds 100 tuples, each dead
//! with probability 1/8, independently. The seed's tests give every dead-bearing page the same
//! offsets, which the store shares; `random` shows what it costs when pages differ.
//!
//! Four more, also not in the seed, are what OLTP updates leave (issue 14): pages of 100
//! tuples, each page dead-bearing with probability 1/P independently, with one dead tuple at
//! a random offset: `sparse10` (P = 10), `sparse1` (every page), `sparse100` (P = 100),
//! `sparse1000` (P = 1000); and
//! `sparse10x3`, two or three dead tuples at random offsets on one page in ten. Few pages share
//! a pattern and chunks of 64 blocks hold only a few TIDs, so per-chunk and per-container
//! overheads show here, where PostgreSQL's array pays its flat 6 bytes per TID.
//!
//! ## Shuffled lookups
//!
//! A "shuffled lookup" is what an index pass does: for every TID an index of the table holds
//! (live and dead alike), in an order unrelated to the heap's, ask whether it is dead. The
//! seed's `bench()` probed every `(block, offset)` of the table in shuffled order; with up to
//! hundreds of millions of them, this benchmark draws `--lookups` TIDs uniformly at random
//! from that set (block in `0..max_block`, offset in `1..=N`) with the seeded generator, the
//! same sequence for every structure, and checks that every structure finds the same number of
//! dead ones as the generator's own predicate.
//!
//! ## What is measured
//!
//! - `memory_mb`: bytes allocated by building the structure (net of frees, counted by a
//!   counting global allocator around the build, so every structure is measured the same
//!   way), in MiB as the seed's `pg_size_pretty` "MB". `own_accounting_mb` is the structure's
//!   own `memory_bytes` (n/a for roaring). The array is sized to the exact TID count up front,
//!   as bdbench's `array_init` did.
//! - `attach_s`: adding every dead block in block order (roaring: appending, then
//!   `optimize()` to choose run containers, as a user would for a set that will not change).
//! - `lookup_s`, `ns_per_lookup`: the shuffled lookups; `hits`: how many were dead.
//! - `index_passes`: index passes vacuum would run over this table at the default
//!   `maintenance_work_mem` (64 MB): a separate fill that clears the structure whenever it
//!   says it is full. n/a for roaring (it has no budget).
//!
//! One structure exists at a time: each is dropped before the next is built.
//!
//! The counting allocator is this binary's global allocator; it forwards to the system
//! allocator and counts only while this benchmark has switched counting on (one relaxed
//! load per allocation otherwise), so the other benchmarks are unaffected.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Instant;

use anyhow::ensure;
use quire_engine::page::{OffsetNumber, Tid};
use quire_engine::rng::SplitMix64;
use quire_engine::vacuum::tidstore::TidStoreStats;
use quire_engine::vacuum::{DeadTids, TidArray, TidStore};
use quire_engine::Config;
use roaring::{RoaringBitmap, RoaringTreemap};
use serde_json::json;

use super::{progress, BenchArgs, Cell, Report};

// ---------------------------------------------------------------------------------------------
// Counting allocator.

/// Whether allocations are being counted (only around a structure's build).
static COUNTING: AtomicBool = AtomicBool::new(false);
/// Bytes allocated minus bytes freed while counting.
static NET_BYTES: AtomicI64 = AtomicI64::new(0);

/// The system allocator, counting requested bytes while [`COUNTING`] is on.
struct CountingAllocator;

/// A size as a signed count (sizes never exceed `isize::MAX`, so this is exact).
fn signed(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

fn count(delta: i64) {
    if COUNTING.load(Ordering::Relaxed) {
        NET_BYTES.fetch_add(delta, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract is `System`'s; the counting touches only two atomics and never
// allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(signed(layout.size()));
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(signed(layout.size()));
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.dealloc(ptr, layout) };
        count(-signed(layout.size()));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(signed(new_size) - signed(layout.size()));
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Runs `build` with allocation counting on; returns its result and the net bytes it kept.
fn counted<T>(build: impl FnOnce() -> T) -> (T, i64) {
    NET_BYTES.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    let value = build();
    COUNTING.store(false, Ordering::SeqCst);
    (value, NET_BYTES.load(Ordering::SeqCst))
}

// ---------------------------------------------------------------------------------------------
// The distributions.

/// One distribution: a test of the seed, with svtm's size as published in the seed (MB at
/// 1,000,000 and at 10,000,000 blocks; reference constants, not measured here), or quire's own
/// random one.
struct Test {
    name: &'static str,
    shape: Shape,
}

enum Shape {
    /// `prepare(max_block, dead_per_page, interval_in_page, consecutive_pages,
    /// page_interval)`.
    Seed {
        params: [u32; 4],
        published_svtm_mb: f64,
        published_svtm_x10_mb: f64,
    },
    /// Not in the seed: every page holds `tuples_per_page` tuples, each dead with probability
    /// 1/8, independently (drawn with the seeded generator). No two pages need share a
    /// pattern, so this shows the store's cost when it cannot share containers.
    Random { tuples_per_page: u32 },
    /// Not in the seed: what OLTP updates leave behind. Each page is dead-bearing with
    /// probability `1 / one_page_in`, independently; a dead-bearing page has between
    /// `dead_min` and `dead_max` dead tuples (uniformly), at distinct offsets drawn uniformly
    /// from `1..=tuples_per_page` (with the seeded generator).
    Sparse {
        one_page_in: u32,
        dead_min: u32,
        dead_max: u32,
        tuples_per_page: u32,
    },
}

const fn seed_test(name: &'static str, params: [u32; 4], svtm_mb: f64, svtm_x10_mb: f64) -> Test {
    Test {
        name,
        shape: Shape::Seed {
            params,
            published_svtm_mb: svtm_mb,
            published_svtm_x10_mb: svtm_x10_mb,
        },
    }
}

const fn sparse_test(name: &'static str, one_page_in: u32, dead_min: u32, dead_max: u32) -> Test {
    Test {
        name,
        shape: Shape::Sparse {
            one_page_in,
            dead_min,
            dead_max,
            tuples_per_page: 100,
        },
    }
}

/// Seed 004's eight tests (`prepare(max_block, ...)`'s other four arguments; test 7's page
/// parameters are recomputed from the table size, see the module documentation), then the
/// random distribution, then the sparse ones (issue 14).
const TESTS: [Test; 14] = [
    seed_test("test1", [10, 1, 1, 20], 27.28, 274.07),
    seed_test("test2", [10, 1, 1, 1], 5.78, 54.60),
    seed_test("test3", [2, 100, 1, 1], 9.28, 92.59),
    seed_test("test4", [100, 1, 1, 1], 7.28, 73.60),
    seed_test("test5", [150, 1, 10_000, 20_000], 3.66, 37.10),
    seed_test("test6", [10, 1, 10_000, 20_000], 3.16, 27.60),
    seed_test("test7", [150, 1, 1_000, 999_000], 0.52, 0.61),
    seed_test("test8", [100, 1, 50, 100], 4.28, 37.60),
    Test {
        name: "random",
        shape: Shape::Random {
            tuples_per_page: 100,
        },
    },
    sparse_test("sparse10", 10, 1, 1),
    sparse_test("sparse1", 1, 1, 1),
    sparse_test("sparse10x3", 10, 2, 3),
    sparse_test("sparse100", 100, 1, 1),
    sparse_test("sparse1000", 1000, 1, 1),
];

impl Test {
    /// svtm's size as published in the seed for this table size, if the seed has one.
    fn published_svtm_mb(&self, x10: bool) -> Option<f64> {
        match self.shape {
            Shape::Seed {
                published_svtm_mb,
                published_svtm_x10_mb,
                ..
            } => Some(if x10 {
                published_svtm_x10_mb
            } else {
                published_svtm_mb
            }),
            Shape::Random { .. } | Shape::Sparse { .. } => None,
        }
    }
}

/// Which offsets of a page are dead.
enum DeadOffsets {
    /// The seed's tests: pages `b % page_interval < consecutive_pages` have dead tuples, all
    /// at the same offsets (as in bdbench).
    Same {
        consecutive_pages: u32,
        page_interval: u32,
        offsets: Vec<OffsetNumber>,
    },
    /// Per page, bit `o - 1` set for each dead offset `o` (at most 128 tuples per page).
    PerPage(Vec<u128>),
}

/// A test at a table size: which blocks have dead tuples, and their offsets.
struct Plan {
    max_block: u32,
    /// Tuples per page (`N`): every page holds offsets `1..=N`.
    tuples_per_page: u32,
    dead: DeadOffsets,
}

impl Plan {
    fn new(t: &Test, max_block: u32, seed: u64) -> anyhow::Result<Self> {
        match t.shape {
            Shape::Seed { params, .. } => {
                let [dead_per_page, interval_in_page, consecutive_pages, page_interval] = params;
                let (consecutive_pages, page_interval) = if t.name == "test7" {
                    let consecutive = (max_block / 1000).max(1);
                    (consecutive, max_block.saturating_sub(consecutive).max(1))
                } else {
                    (consecutive_pages, page_interval)
                };
                let tuples_per_page = dead_per_page * interval_in_page;
                ensure!(
                    (1..=u32::from(u16::MAX)).contains(&tuples_per_page),
                    "{}: {tuples_per_page} tuples per page do not fit offset numbers",
                    t.name
                );
                let offsets = (1..=tuples_per_page)
                    .filter(|o| o % interval_in_page == 0)
                    .map(|o| o as OffsetNumber)
                    .collect();
                Ok(Plan {
                    max_block,
                    tuples_per_page,
                    dead: DeadOffsets::Same {
                        consecutive_pages,
                        page_interval,
                        offsets,
                    },
                })
            }
            Shape::Random { tuples_per_page } => {
                ensure!(tuples_per_page <= 128, "at most 128 tuples per page");
                let mut rng = SplitMix64::new(seed ^ 0x5EED_0004);
                let span = if tuples_per_page == 128 {
                    u128::MAX
                } else {
                    (1u128 << tuples_per_page) - 1
                };
                let mut word = || {
                    // Three random words ANDed: each bit is set with probability 1/8.
                    let mut w = || u128::from(rng.next()) << 64 | u128::from(rng.next());
                    w() & w() & w()
                };
                let masks = (0..max_block).map(|_| word() & span).collect();
                Ok(Plan {
                    max_block,
                    tuples_per_page,
                    dead: DeadOffsets::PerPage(masks),
                })
            }
            Shape::Sparse {
                one_page_in,
                dead_min,
                dead_max,
                tuples_per_page,
            } => {
                ensure!(tuples_per_page <= 128, "at most 128 tuples per page");
                ensure!(
                    one_page_in >= 1 && 1 <= dead_min && dead_min <= dead_max,
                    "{}: bad sparse parameters",
                    t.name
                );
                ensure!(dead_max <= tuples_per_page, "{}: too many dead", t.name);
                let mut rng = SplitMix64::new(seed ^ 0x5EED_0014);
                let masks = (0..max_block)
                    .map(|_| {
                        if rng.below(u64::from(one_page_in)) != 0 {
                            return 0;
                        }
                        let dead = dead_min + rng.below(u64::from(dead_max - dead_min + 1)) as u32;
                        let mut mask = 0u128;
                        // Distinct offsets: redraw on a collision. Each draw is new with
                        // probability >= 1 - dead_max / tuples_per_page, so the limit (which
                        // `ensure` below would report) is never reached in practice.
                        for _ in 0..64 * tuples_per_page {
                            if mask.count_ones() >= dead {
                                break;
                            }
                            mask |= 1u128 << rng.below(u64::from(tuples_per_page));
                        }
                        mask
                    })
                    .collect::<Vec<u128>>();
                ensure!(
                    masks.iter().all(|m| *m == 0 || m.count_ones() >= dead_min),
                    "{}: could not draw distinct offsets",
                    t.name
                );
                Ok(Plan {
                    max_block,
                    tuples_per_page,
                    dead: DeadOffsets::PerPage(masks),
                })
            }
        }
    }

    fn is_dead(&self, tid: Tid) -> bool {
        let offset = u32::from(tid.offset);
        if tid.block >= self.max_block || offset == 0 || offset > self.tuples_per_page {
            return false;
        }
        match &self.dead {
            DeadOffsets::Same {
                consecutive_pages,
                page_interval,
                offsets,
            } => {
                tid.block % page_interval < *consecutive_pages
                    && offsets.binary_search(&tid.offset).is_ok()
            }
            DeadOffsets::PerPage(masks) => masks[tid.block as usize] >> (offset - 1) & 1 != 0,
        }
    }

    /// Calls `add` for every block with dead tuples, in block order, with its dead offsets.
    fn for_each_dead_block(
        &self,
        mut add: impl FnMut(u32, &[OffsetNumber]) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        match &self.dead {
            DeadOffsets::Same {
                consecutive_pages,
                page_interval,
                offsets,
            } => {
                for block in (0..self.max_block).filter(|b| b % page_interval < *consecutive_pages)
                {
                    add(block, offsets)?;
                }
            }
            DeadOffsets::PerPage(masks) => {
                let mut offsets = Vec::with_capacity(128);
                for (block, &mask) in (0..self.max_block).zip(masks) {
                    offsets.clear();
                    offsets.extend(
                        (0..128u16)
                            .filter(|bit| mask >> bit & 1 != 0)
                            .map(|bit| bit + 1),
                    );
                    if !offsets.is_empty() {
                        add(block, &offsets)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn dead_tids(&self) -> u64 {
        match &self.dead {
            DeadOffsets::Same {
                consecutive_pages,
                page_interval,
                offsets,
            } => {
                (0..self.max_block)
                    .filter(|b| b % page_interval < *consecutive_pages)
                    .count() as u64
                    * offsets.len() as u64
            }
            DeadOffsets::PerPage(masks) => masks.iter().map(|m| u64::from(m.count_ones())).sum(),
        }
    }

    /// `count` TIDs drawn uniformly from the table's `max_block × N` TIDs, and how many of
    /// them are dead.
    fn lookups(&self, count: u64, seed: u64) -> (Vec<Tid>, u64) {
        let mut rng = SplitMix64::new(seed);
        let mut below = |n: u32| rng.below(u64::from(n)) as u32;
        let mut dead = 0;
        let tids: Vec<Tid> = (0..count)
            .map(|_| {
                let block = below(self.max_block);
                let offset = 1 + below(self.tuples_per_page) as OffsetNumber;
                let tid = Tid::new(block, offset);
                dead += u64::from(self.is_dead(tid));
                tid
            })
            .collect();
        (tids, dead)
    }
}

// ---------------------------------------------------------------------------------------------
// The structures, behind one small interface so that each is called directly (no dynamic
// dispatch in the timed loops).

trait Subject {
    fn add(&mut self, block: u32, offsets: &[OffsetNumber]) -> anyhow::Result<()>;
    fn finish(&mut self) {}
    fn contains(&self, tid: Tid) -> bool;
    fn tids(&self) -> u64;
    fn own_bytes(&self) -> Option<usize>;
}

/// Both of the engine's structures, through the interface vacuum uses.
impl<T: DeadTids> Subject for T {
    fn add(&mut self, block: u32, offsets: &[OffsetNumber]) -> anyhow::Result<()> {
        Ok(self.add_block(block, offsets)?)
    }
    #[inline]
    fn contains(&self, tid: Tid) -> bool {
        DeadTids::contains(self, tid)
    }
    fn tids(&self) -> u64 {
        self.num_tids()
    }
    fn own_bytes(&self) -> Option<usize> {
        Some(self.memory_bytes())
    }
}

/// `RoaringTreemap` keyed by `block << 16 | offset`, built one 2^32-key bitmap at a time
/// (each optimized once complete) and assembled at the end.
#[derive(Default)]
struct Roaring {
    building: Vec<(u32, RoaringBitmap)>,
    map: RoaringTreemap,
}

impl Subject for Roaring {
    fn add(&mut self, block: u32, offsets: &[OffsetNumber]) -> anyhow::Result<()> {
        let high = block >> 16;
        if self.building.last().is_none_or(|(h, _)| *h != high) {
            if let Some((_, last)) = self.building.last_mut() {
                last.optimize();
            }
            self.building.push((high, RoaringBitmap::new()));
        }
        let (_, bitmap) = self.building.last_mut().expect("pushed above");
        let low = (block & 0xffff) << 16;
        bitmap
            .append(offsets.iter().map(|&o| low | u32::from(o)))
            .map_err(|e| anyhow::anyhow!("roaring refused unsorted input: {e:?}"))?;
        Ok(())
    }
    fn finish(&mut self) {
        if let Some((_, last)) = self.building.last_mut() {
            last.optimize();
        }
        self.map = RoaringTreemap::from_bitmaps(std::mem::take(&mut self.building));
    }
    #[inline]
    fn contains(&self, tid: Tid) -> bool {
        self.map
            .contains((u64::from(tid.block) << 16) | u64::from(tid.offset))
    }
    fn tids(&self) -> u64 {
        self.map.len()
    }
    fn own_bytes(&self) -> Option<usize> {
        None
    }
}

// ---------------------------------------------------------------------------------------------
// Measuring.

struct Measured {
    tids: u64,
    memory_bytes: i64,
    own_bytes: Option<usize>,
    attach_s: f64,
    lookup_s: f64,
    hits: u64,
    stats: Option<TidStoreStats>,
}

fn measure<S: Subject>(
    make: impl FnOnce() -> S,
    plan: &Plan,
    lookups: &[Tid],
    stats: impl FnOnce(&S) -> Option<TidStoreStats>,
) -> anyhow::Result<Measured> {
    let t0 = Instant::now();
    let (built, memory_bytes) = counted(|| -> anyhow::Result<S> {
        let mut s = make();
        plan.for_each_dead_block(|block, offsets| s.add(block, offsets))?;
        s.finish();
        Ok(s)
    });
    let attach_s = t0.elapsed().as_secs_f64();
    let s = built?;
    let t0 = Instant::now();
    let mut hits = 0u64;
    for &tid in lookups {
        hits += u64::from(s.contains(tid));
    }
    let lookup_s = t0.elapsed().as_secs_f64();
    Ok(Measured {
        tids: s.tids(),
        memory_bytes,
        own_bytes: s.own_bytes(),
        attach_s,
        lookup_s,
        hits,
        stats: stats(&s),
    })
}

/// The index passes vacuum would run on this table with `budget_bytes` of
/// `maintenance_work_mem`: one each time the structure says it is full, one for the rest.
fn index_passes(mut dead: impl DeadTids, plan: &Plan) -> anyhow::Result<u64> {
    let mut passes = 0;
    plan.for_each_dead_block(|block, offsets| {
        dead.add_block(block, offsets)?;
        if dead.is_full() {
            passes += 1;
            dead.clear();
        }
        Ok(())
    })?;
    Ok(passes + u64::from(dead.num_tids() > 0))
}

const MIB: f64 = 1024.0 * 1024.0;

fn row(
    report: &mut Report,
    structure: &str,
    test: &Test,
    m: &Measured,
    lookups: u64,
    passes: Option<u64>,
) {
    report.rows.push((
        structure.to_string(),
        vec![
            Cell::Text(test.name.to_string()),
            Cell::Int(m.tids),
            Cell::Float(m.memory_bytes as f64 / MIB),
            m.own_bytes
                .map_or(Cell::Text("n/a".into()), |b| Cell::Float(b as f64 / MIB)),
            Cell::Float(m.memory_bytes as f64 / m.tids.max(1) as f64),
            Cell::Float(m.attach_s),
            Cell::Int(lookups),
            Cell::Float(m.lookup_s),
            Cell::Float(m.lookup_s * 1e9 / lookups.max(1) as f64),
            Cell::Int(m.hits),
            passes.map_or(Cell::Text("n/a".into()), Cell::Int),
        ],
    ));
}

pub fn run_bench(args: &BenchArgs) -> anyhow::Result<Report> {
    let max_block: u32 = match (args.quick, args.x10) {
        (true, false) => 100_000,
        (true, true) | (false, false) => 1_000_000,
        (false, true) => 10_000_000,
    };
    let lookups = args
        .lookups
        .unwrap_or(if args.quick { 1_000_000 } else { 20_000_000 });
    ensure!(lookups > 0, "--lookups must be positive");
    let budget_bytes = Config::default().maintenance_work_mem_bytes;
    let mut report = Report::new(
        "tidstore",
        args.quick,
        vec![
            "test",
            "tids",
            "memory_mb",
            "own_accounting_mb",
            "bytes_per_tid",
            "attach_s",
            "lookups",
            "lookup_s",
            "ns_per_lookup",
            "hits",
            "index_passes",
        ],
    );
    report.params = vec![
        ("max_block", json!(max_block)),
        ("x10", json!(args.x10)),
        ("lookups", json!(lookups)),
        ("seed", json!(args.seed)),
        ("maintenance_work_mem_bytes", json!(budget_bytes)),
    ];
    // The seed's svtm figures were measured at 1,000,000 (and 10,000,000) blocks: a ratio
    // against them means something only at the same table size.
    let published_size = !args.quick;
    let bar = progress(TESTS.len() as u64 * 3, "tidstore");
    let mut stats_notes = Vec::new();
    let mut array_notes = Vec::new();
    for test in &TESTS {
        let plan = Plan::new(test, max_block, args.seed)?;
        let expected_tids = plan.dead_tids();
        bar.set_message(format!("{} lookups", test.name));
        let (tids, expected_hits) = plan.lookups(lookups, args.seed);

        bar.set_message(format!("{} store", test.name));
        let store = measure(
            || TidStore::new(u64::MAX),
            &plan,
            &tids,
            |s| Some(s.stats()),
        )?;
        let store_passes = index_passes(TidStore::new(budget_bytes), &plan)?;
        bar.inc(1);

        bar.set_message(format!("{} array", test.name));
        let array_limit = TidArray::new(u64::MAX).limit_tids();
        let array = if expected_tids <= array_limit {
            Some(measure(
                || {
                    let mut a = TidArray::new(u64::MAX);
                    a.reserve_exact_tids(expected_tids);
                    a
                },
                &plan,
                &tids,
                |_| None,
            )?)
        } else {
            array_notes.push(format!(
                "{}: the array row is n/a: {expected_tids} TIDs need {:.0} MB, more than the 1 GB (MaxAllocSize) PostgreSQL's array may take; vacuum needs several index passes instead",
                test.name,
                expected_tids as f64 * 6.0 / MIB
            ));
            None
        };
        let array_passes = index_passes(TidArray::new(budget_bytes), &plan)?;
        bar.inc(1);

        bar.set_message(format!("{} roaring", test.name));
        let roaring = measure(Roaring::default, &plan, &tids, |_| None)?;
        bar.inc(1);
        drop(tids);

        for (name, m) in [
            ("store", Some(&store)),
            ("array", array.as_ref()),
            ("roaring", Some(&roaring)),
        ] {
            let Some(m) = m else { continue };
            ensure!(
                m.tids == expected_tids,
                "{} {name}: holds {} TIDs, the generator made {expected_tids}",
                test.name,
                m.tids
            );
            ensure!(
                m.hits == expected_hits,
                "{} {name}: found {} dead TIDs among the lookups, expected {expected_hits}",
                test.name,
                m.hits
            );
        }

        row(
            &mut report,
            "store",
            test,
            &store,
            lookups,
            Some(store_passes),
        );
        match &array {
            Some(m) => row(&mut report, "array", test, m, lookups, Some(array_passes)),
            None => report.rows.push((
                "array".to_string(),
                vec![
                    Cell::Text(test.name.to_string()),
                    Cell::Int(expected_tids),
                    Cell::Text("n/a".into()),
                    Cell::Text("n/a".into()),
                    Cell::Text("n/a".into()),
                    Cell::Text("n/a".into()),
                    Cell::Int(lookups),
                    Cell::Text("n/a".into()),
                    Cell::Text("n/a".into()),
                    Cell::Text("n/a".into()),
                    Cell::Int(array_passes),
                ],
            )),
        }
        row(&mut report, "roaring", test, &roaring, lookups, None);

        let store_mb = store.memory_bytes as f64 / MIB;
        if let Some(a) = &array {
            report.ratios.push((
                format!("{}_array_over_store_memory", test.name),
                a.memory_bytes as f64 / store.memory_bytes as f64,
            ));
            report.ratios.push((
                format!("{}_array_over_store_lookup", test.name),
                a.lookup_s / store.lookup_s,
            ));
        }
        report.ratios.push((
            format!("{}_roaring_over_store_memory", test.name),
            roaring.memory_bytes as f64 / store.memory_bytes as f64,
        ));
        report.ratios.push((
            format!("{}_roaring_over_store_lookup", test.name),
            roaring.lookup_s / store.lookup_s,
        ));
        if let (true, Some(svtm_mb)) = (published_size, test.published_svtm_mb(args.x10)) {
            report.ratios.push((
                format!("{}_store_over_published_svtm_memory", test.name),
                store_mb / svtm_mb,
            ));
        }
        if let Some(s) = store.stats {
            stats_notes.push(format!(
                "{}: {} blocks in {} chunks, {} of them rank and {} list ({} bytes); distinct containers {} array / {} runs / {} bitmap, {} container bytes, {} metadata bytes; {} directory bytes; {} of {} leaves lists of TIDs ({} bytes)",
                test.name,
                s.blocks,
                s.chunks,
                s.rank_chunks,
                s.list_chunks,
                s.compact_bytes,
                s.array_containers,
                s.run_containers,
                s.bitmap_containers,
                s.container_bytes,
                s.metadata_bytes,
                s.directory_bytes,
                s.tid_list_leaves,
                s.leaves,
                s.tid_list_bytes
            ));
        }
    }
    bar.finish_and_clear();

    report.notes.push(format!(
        "tables of {max_block} blocks{}; test1-test8 are the seed's prepare() (bdbench, MasahikoSawada/pgtools), test 7's dead pages being the first and last {} of the table; random (not in the seed): 100 tuples per page, each dead with probability 1/8; sparseP (not in the seed, issue 14): 100 tuples per page, each page dead-bearing with probability 1/P, with one dead tuple at a random offset (sparse10x3: two or three)",
        if args.quick { " (QUICK: the seed used 1,000,000)" } else { "" },
        (max_block / 1000).max(1)
    ));
    report.notes.push(format!(
        "lookups: {lookups} TIDs drawn uniformly (seed {}) from every TID of the table, live and dead (N = dead_per_page x interval_in_page tuples on each page); the same sequence for every structure",
        args.seed
    ));
    report.notes.push(
        "memory_mb: bytes allocated by the build (counting allocator, net of frees), MiB as the seed's MB; the array is sized to its exact TID count up front, as bdbench's was".to_string(),
    );
    report.notes.push(format!(
        "index_passes: at maintenance_work_mem = {} MB; the array's limit is also capped at 1 GB",
        budget_bytes >> 20
    ));
    if !args.quick {
        let (seed_array_mb, implied_tids) = if args.x10 {
            ("572.21", "100,000,000")
        } else {
            ("57.23", "10,000,000")
        };
        report.notes.push(format!(
            "test1: bdbench's prepare() makes the {} dead TIDs shown; the seed's array size for test 1 ({seed_array_mb} MB at 6 bytes a TID) implies {implied_tids}, so the seed's test 1 row was not run with the parameters it prints",
            report.rows.first().map_or(String::new(), |(_, cells)| match &cells[1] {
                Cell::Int(n) => n.to_string(),
                _ => String::new(),
            })
        ));
    }
    if published_size {
        let which = if args.x10 { "10,000,000" } else { "1,000,000" };
        let sizes: Vec<String> = TESTS
            .iter()
            .filter_map(|t| Some(format!("{} {:.2}", t.name, t.published_svtm_mb(args.x10)?)))
            .collect();
        report.notes.push(format!(
            "store_over_published_svtm_memory divides the store's measured size by svtm's size AS PUBLISHED in seed 004 at {which} blocks (not measured here, another machine and allocator): {} MB",
            sizes.join(", ")
        ));
    } else {
        report.notes.push(
            "no comparison with the seed's published svtm sizes: they are for 1,000,000 blocks, this quick run is smaller".to_string(),
        );
    }
    report.notes.extend(array_notes);
    report.notes.push("store shape per test:".to_string());
    report
        .notes
        .extend(stats_notes.into_iter().map(|s| format!("  {s}")));
    report.figure = Some(super::plot::Figure {
        title: "tidstore (seed 004): dead-TID memory per test and structure".into(),
        panels: vec![
            report.bars_panel("bytes per dead TID", Some("test"), "bytes_per_tid"),
            report.bars_panel("ns per lookup", Some("test"), "ns_per_lookup"),
        ],
    });
    Ok(report)
}
