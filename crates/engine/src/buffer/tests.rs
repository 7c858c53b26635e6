use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::Mutex;

use super::*;
use crate::config::Config;
use crate::vfs::{OpKind, OsVfs};

/// Where test pages keep their stamp: in the hole between line pointers and items, which the
/// checksum covers like any other byte.
const STAMP_AT: usize = 64;

fn init_page(p: &mut [u8; PAGE_SIZE], tag: BufferTag, version: u64) {
    crate::page::PageMut::new(p).init(0);
    stamp(p, tag, version);
}

fn stamp(p: &mut [u8; PAGE_SIZE], tag: BufferTag, version: u64) {
    p[STAMP_AT..STAMP_AT + 8].copy_from_slice(&tag.rel.rel_number.to_le_bytes());
    p[STAMP_AT + 8..STAMP_AT + 12].copy_from_slice(&tag.block.to_le_bytes());
    p[STAMP_AT + 12..STAMP_AT + 20].copy_from_slice(&version.to_le_bytes());
}

fn read_stamp(p: &[u8; PAGE_SIZE]) -> (u64, u32, u64) {
    let word = |r: std::ops::Range<usize>| {
        let mut b = [0u8; 8];
        b[..r.len()].copy_from_slice(&p[r]);
        u64::from_le_bytes(b)
    };
    (
        word(STAMP_AT..STAMP_AT + 8),
        word(STAMP_AT + 8..STAMP_AT + 12) as u32,
        word(STAMP_AT + 12..STAMP_AT + 20),
    )
}

struct Fixture {
    _dir: tempfile::TempDir,
    smgr: Arc<Smgr>,
    config: Config,
}

fn fixture(nbuffers: usize, drop_mode: BufferDropMode) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        shared_buffers_bytes: (nbuffers * PAGE_SIZE) as u64,
        segment_size_blocks: 8,
        buffer_drop: drop_mode,
        ..Config::default()
    };
    let smgr = Arc::new(Smgr::new(Arc::new(OsVfs::new()), dir.path(), &config).unwrap());
    Fixture {
        _dir: dir,
        smgr,
        config,
    }
}

impl Fixture {
    fn pool(&self) -> BufferPool {
        BufferPool::new(Arc::clone(&self.smgr), &self.config, None).unwrap()
    }
    fn writes(&self) -> u64 {
        self.smgr.vfs().counters().snapshot().get(OpKind::Write)
    }
}

fn rel(n: u64) -> RelFileLocator {
    RelFileLocator::new(1, n)
}

/// Creates `rel` with `nblocks` initialised, stamped, dirty pages.
fn populate(pool: &BufferPool, r: RelFileLocator, nblocks: u32) {
    pool.smgr().create(r, Fork::Main).unwrap();
    for b in 0..nblocks {
        let buf = pool.extend(r, Fork::Main).unwrap();
        assert_eq!(buf.tag().block, b);
        let mut page = buf.write();
        init_page(&mut page, buf.tag(), 1);
        page.mark_dirty();
    }
}

#[test]
fn pages_survive_eviction_and_a_new_pool() {
    let f = fixture(16, BufferDropMode::Indexed);
    let pool = f.pool();
    populate(&pool, rel(10), 100);
    for b in 0..100 {
        let buf = pool
            .read_buffer(BufferTag::new(rel(10), Fork::Main, b))
            .unwrap();
        assert_eq!(read_stamp(&buf.read()), (10, b, 1));
    }
    pool.flush_all().unwrap();
    pool.check_invariants().unwrap();
    drop(pool);
    let pool = f.pool();
    for b in (0..100).rev() {
        let buf = pool
            .read_buffer(BufferTag::new(rel(10), Fork::Main, b))
            .unwrap();
        assert_eq!(read_stamp(&buf.read()), (10, b, 1));
    }
}

#[test]
fn hits_do_no_io() {
    let f = fixture(64, BufferDropMode::Indexed);
    let pool = f.pool();
    populate(&pool, rel(1), 8);
    let before = f.smgr.vfs().counters().snapshot();
    for _ in 0..100 {
        for b in 0..8 {
            let _ = pool
                .read_buffer(BufferTag::new(rel(1), Fork::Main, b))
                .unwrap();
        }
    }
    let c = f.smgr.vfs().counters().snapshot().since(&before);
    assert_eq!(c, crate::vfs::OpCounts::default(), "{c}");
}

#[test]
fn all_pinned_is_an_error_not_a_hang() {
    let f = fixture(16, BufferDropMode::Indexed);
    let pool = f.pool();
    pool.smgr().create(rel(1), Fork::Main).unwrap();
    let pins: Vec<_> = (0..16)
        .map(|_| pool.extend(rel(1), Fork::Main).unwrap())
        .collect();
    let err = pool
        .extend(rel(1), Fork::Main)
        .err()
        .expect("pool is full of pins");
    assert!(
        matches!(err, Error::NoFreeBuffers { nbuffers: 16 }),
        "{err}"
    );
    drop(pins);
    pool.extend(rel(1), Fork::Main).unwrap();
}

/// `extend` is two steps, the block appended (everyone sees it from then on) and then its
/// buffer; another thread may read the block, change it and have it evicted between them.
/// The extender's buffer must hold that change, not a zeroed page that hides it and would
/// later be written over it (how a soak lost a committed transaction's commit-log status).
#[test]
fn a_change_made_between_an_extension_and_its_buffer_is_kept() {
    let f = fixture(16, BufferDropMode::Indexed);
    let pool = f.pool();
    pool.smgr().create(rel(1), Fork::Main).unwrap();
    let block = pool.smgr().extend(rel(1), Fork::Main, &ZERO_PAGE).unwrap();
    let tag = BufferTag::new(rel(1), Fork::Main, block);
    {
        // The other thread: it finds the block through the fork's size.
        let buf = pool.read_buffer(tag).unwrap();
        let mut page = buf.write();
        init_page(&mut page, tag, 7);
        page.mark_dirty();
    }
    // Enough other pages to evict it (written back, then forgotten by the pool).
    populate(&pool, rel(2), 32);
    let buf = pool.extended_block(tag).unwrap();
    assert_eq!(read_stamp(&buf.read()), (1, block, 7));
}

fn drop_never_writes(mode: BufferDropMode) {
    let f = fixture(256, mode);
    let pool = f.pool();
    for r in 1..=10 {
        populate(&pool, rel(r), 10);
    }
    let before = f.writes();
    pool.drop_relations(&[rel(3), rel(7)]);
    assert_eq!(pool.cached_buffers_of(rel(3)), 0);
    assert_eq!(pool.cached_buffers_of(rel(7)), 0);
    assert_eq!(pool.cached_buffers_of(rel(4)), 10);
    pool.check_invariants().unwrap();
    pool.flush_all().unwrap();
    assert_eq!(
        f.writes() - before,
        80,
        "only the 8 surviving relations are written"
    );
    assert_eq!(pool.stats().invalidated.load(Ordering::Relaxed), 20);
}

#[test]
fn dropped_dirty_pages_are_never_written_indexed() {
    drop_never_writes(BufferDropMode::Indexed);
}

#[test]
fn dropped_dirty_pages_are_never_written_full_scan() {
    drop_never_writes(BufferDropMode::FullScan);
}

#[test]
fn indexed_drop_examines_only_the_relations_buffers() {
    for (mode, expect_examined) in [
        (BufferDropMode::Indexed, 10),
        (BufferDropMode::FullScan, 1024),
    ] {
        let f = fixture(1024, mode);
        let pool = f.pool();
        for r in 1..=20 {
            populate(&pool, rel(r), 10);
        }
        let before = pool
            .stats()
            .drop_descriptors_examined
            .load(Ordering::Relaxed);
        pool.drop_relations(&[rel(5)]);
        let examined = pool
            .stats()
            .drop_descriptors_examined
            .load(Ordering::Relaxed)
            - before;
        assert_eq!(examined, expect_examined, "{mode:?}");
    }
}

/// PostgreSQL 14-17's rule: a full scan in normal running; in recovery, a lookup of each
/// block when the sizes are cached and the relation is below NBuffers/32 blocks, a full
/// scan above. The same buffers go either way.
#[test]
fn pg14_drop_looks_blocks_up_only_in_recovery_and_below_the_threshold() {
    let examined = |pool: &BufferPool, rels: &[RelFileLocator]| {
        let before = pool.stats().drop_descriptors_examined.load(Ordering::Relaxed);
        pool.drop_relations(rels);
        pool.stats().drop_descriptors_examined.load(Ordering::Relaxed) - before
    };
    let f = fixture(1024, BufferDropMode::Pg14);
    let pool = f.pool();
    for r in 1..=4 {
        populate(&pool, rel(r), 10);
    }
    populate(&pool, rel(9), 40); // 1024 / 32 = 32 blocks: above the threshold
    assert_eq!(examined(&pool, &[rel(1)]), 1024, "normal running: a full scan");
    pool.smgr().set_in_recovery(true);
    // Only Main exists: the other forks are skipped, Main's 10 blocks looked up.
    assert_eq!(examined(&pool, &[rel(2)]), 10, "recovery: one lookup per block");
    assert_eq!(examined(&pool, &[rel(9)]), 1024, "recovery, large: a full scan");
    pool.smgr().set_in_recovery(false);
    for r in [1, 2, 9] {
        assert_eq!(pool.cached_buffers_of(rel(r)), 0, "rel {r}'s buffers dropped");
    }
    assert_eq!(pool.cached_buffers_of(rel(3)), 10, "another relation's stay");
}

#[test]
fn truncate_drops_only_the_tail_and_never_reads_it_back() {
    for mode in [BufferDropMode::Indexed, BufferDropMode::FullScan] {
        let f = fixture(128, mode);
        let pool = f.pool();
        populate(&pool, rel(1), 20);
        pool.flush_all().unwrap();
        // Dirty every page again with version 2, then truncate to 12 blocks.
        for b in 0..20 {
            let buf = pool
                .read_buffer(BufferTag::new(rel(1), Fork::Main, b))
                .unwrap();
            let mut page = buf.write();
            stamp(&mut page, buf.tag(), 2);
            page.mark_dirty();
        }
        pool.drop_relation_buffers(rel(1), Fork::Main, 12);
        pool.smgr().truncate(rel(1), Fork::Main, 12).unwrap();
        pool.check_invariants().unwrap();
        assert_eq!(pool.cached_buffers_of(rel(1)), 12);
        // Re-extend: the new block 12 must be a fresh zero page, not the stale version 2.
        let buf = pool.extend(rel(1), Fork::Main).unwrap();
        assert_eq!(buf.tag().block, 12);
        assert!(buf.read().iter().all(|b| *b == 0), "stale page came back");
        drop(buf);
        let before = f.writes();
        pool.flush_all().unwrap();
        assert_eq!(
            f.writes() - before,
            12,
            "the 12 surviving dirty pages, not the dropped 8"
        );
        drop(pool);
        let pool = f.pool();
        for b in 0..12 {
            let buf = pool
                .read_buffer(BufferTag::new(rel(1), Fork::Main, b))
                .unwrap();
            assert_eq!(read_stamp(&buf.read()), (1, b, 2));
        }
    }
}

struct RecordingHook {
    calls: Mutex<Vec<(BufferTag, Lsn)>>,
}

impl WriteBackHook for RecordingHook {
    fn before_write(&self, tag: BufferTag, page_lsn: Lsn) -> Result<()> {
        self.calls.lock().push((tag, page_lsn));
        if page_lsn == Lsn(666) {
            return Err(Error::Config {
                name: "test".into(),
                reason: "WAL flush failed".into(),
            });
        }
        Ok(())
    }
}

#[test]
fn write_back_calls_the_hook_with_the_page_lsn_first() {
    let f = fixture(16, BufferDropMode::Indexed);
    let hook = Arc::new(RecordingHook {
        calls: Mutex::new(Vec::new()),
    });
    let pool = BufferPool::new(Arc::clone(&f.smgr), &f.config, Some(hook.clone())).unwrap();
    pool.smgr().create(rel(1), Fork::Main).unwrap();
    for (b, lsn) in [(0u32, 1000u64), (1, 666)] {
        let buf = pool.extend(rel(1), Fork::Main).unwrap();
        let mut page = buf.write();
        init_page(&mut page, buf.tag(), 1);
        crate::page::PageMut::new(&mut page).set_lsn(Lsn(lsn));
        page.mark_dirty();
        assert_eq!(buf.tag().block, b);
    }
    let before = f.writes();
    // The hook refuses LSN 666: that page must not be written.
    assert!(pool.flush_all().is_err());
    let calls = hook.calls.lock().clone();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls.contains(&(BufferTag::new(rel(1), Fork::Main, 0), Lsn(1000))));
    assert_eq!(f.writes() - before, 1);
}

/// A fixture whose relation 1 has two pages on disk, block 1 with a flipped bit.
fn fixture_with_corrupt_block_1() -> Fixture {
    let f = fixture(16, BufferDropMode::Indexed);
    let pool = f.pool();
    populate(&pool, rel(1), 2);
    pool.flush_all().unwrap();
    drop(pool);
    let path = f.smgr.segment_path(rel(1), Fork::Main, 0);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[PAGE_SIZE + 3000] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    f
}

#[test]
fn a_corrupt_page_fails_the_read_and_leaves_the_pool_consistent() {
    let f = fixture_with_corrupt_block_1();
    let pool = f.pool();
    let err = pool
        .read_buffer(BufferTag::new(rel(1), Fork::Main, 1))
        .err()
        .expect("block 1 is corrupt");
    assert!(matches!(err, Error::CorruptPage { block: 1, .. }), "{err}");
    // A retry reads again (and fails again): the bad page never becomes valid.
    assert!(pool
        .read_buffer(BufferTag::new(rel(1), Fork::Main, 1))
        .is_err());
    pool.read_buffer(BufferTag::new(rel(1), Fork::Main, 0))
        .unwrap();
    pool.check_invariants().unwrap();
}

/// Readers and writers on stable relations, while another thread keeps creating, dirtying
/// and dropping relations, in a pool small enough that everything is evicted constantly.
fn stress(mode: BufferDropMode) {
    const STABLE: u64 = 4;
    const BLOCKS: u32 = 16;
    let fx = fixture(48, mode);
    let hook = Arc::new(DroppedWatch::default());
    let pool =
        Arc::new(BufferPool::new(Arc::clone(&fx.smgr), &fx.config, Some(hook.clone())).unwrap());
    for r in 1..=STABLE {
        populate(&pool, rel(r), BLOCKS);
    }
    // versions[r][b]: the version last written to that page.
    let versions: Arc<Vec<Vec<AtomicU64>>> = Arc::new(
        (0..=STABLE)
            .map(|_| (0..BLOCKS).map(|_| AtomicU64::new(1)).collect())
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for t in 0..3u64 {
        let (pool, versions, stop) = (Arc::clone(&pool), Arc::clone(&versions), Arc::clone(&stop));
        threads.push(std::thread::spawn(move || {
            let mut rng = crate::rng::SplitMix64::new(t + 1);
            let mut ops = 0u64;
            while !stop.load(Ordering::Relaxed) || ops < 2000 {
                let x = rng.next();
                let r = 1 + x % STABLE;
                let b = ((x >> 8) % u64::from(BLOCKS)) as u32;
                let tag = BufferTag::new(rel(r), Fork::Main, b);
                let buf = pool.read_buffer(tag).unwrap();
                if x.is_multiple_of(4) {
                    let mut page = buf.write();
                    let (rr, bb, v) = read_stamp(&page);
                    assert_eq!((rr, bb), (r, b), "buffer holds the wrong page");
                    stamp(&mut page, tag, v + 1);
                    versions[r as usize][b as usize].fetch_add(1, Ordering::Relaxed);
                    page.mark_dirty();
                } else {
                    let (rr, bb, _) = read_stamp(&buf.read());
                    assert_eq!((rr, bb), (r, b), "buffer holds the wrong page");
                }
                ops += 1;
            }
        }));
    }
    for round in 0..150u64 {
        let r = rel(1000 + round);
        populate(&pool, r, 6);
        if round % 2 == 0 {
            pool.drop_relations(&[r]);
        } else {
            pool.drop_relation_buffers(r, Fork::Main, 0);
        }
        hook.dropped.lock().insert(r);
        pool.smgr().unlink(r).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    pool.check_invariants().unwrap();
    assert!(
        hook.violations.lock().is_empty(),
        "{:?}",
        hook.violations.lock()
    );
    pool.flush_all().unwrap();
    drop(pool);
    let pool = fx.pool();
    for r in 1..=STABLE {
        for b in 0..BLOCKS {
            let buf = pool
                .read_buffer(BufferTag::new(rel(r), Fork::Main, b))
                .unwrap();
            let want = versions[r as usize][b as usize].load(Ordering::Relaxed);
            assert_eq!(read_stamp(&buf.read()), (r, b, want), "lost update");
        }
    }
}

/// Flags any write-back of a relation after its drop returned.
#[derive(Default)]
struct DroppedWatch {
    dropped: Mutex<HashSet<RelFileLocator>>,
    violations: Mutex<Vec<BufferTag>>,
}

impl WriteBackHook for DroppedWatch {
    fn before_write(&self, tag: BufferTag, _page_lsn: Lsn) -> Result<()> {
        if self.dropped.lock().contains(&tag.rel) {
            self.violations.lock().push(tag);
        }
        Ok(())
    }
}

#[test]
fn stress_concurrent_access_eviction_and_drops_indexed() {
    stress(BufferDropMode::Indexed);
}

#[test]
fn stress_concurrent_access_eviction_and_drops_full_scan() {
    stress(BufferDropMode::FullScan);
}

#[test]
fn zero_on_error_zeroes_a_corrupt_or_missing_page_that_normal_reports() {
    let f = fixture_with_corrupt_block_1();
    let pool = f.pool();
    let corrupt = BufferTag::new(rel(1), Fork::Main, 1);
    // Normal first: a failed read leaves nothing cached, so the second mode reads again.
    let err = pool.read_buffer(corrupt).err().expect("block 1 is corrupt");
    assert!(matches!(err, Error::CorruptPage { block: 1, .. }), "{err}");
    let buf = pool
        .read_buffer_mode(corrupt, ReadMode::ZeroOnError)
        .unwrap();
    assert!(
        buf.read().iter().all(|&b| b == 0),
        "corrupt page not zeroed"
    );
    drop(buf);
    // A good page is read as it is.
    let good = BufferTag::new(rel(1), Fork::Main, 0);
    let buf = pool.read_buffer_mode(good, ReadMode::ZeroOnError).unwrap();
    assert_eq!(read_stamp(&buf.read()), (1, 0, 1));
    drop(buf);
    // Past the end of the file (within the last segment): Normal fails, ZeroOnError zeroes.
    let past_end = BufferTag::new(rel(1), Fork::Main, 5);
    assert!(matches!(
        pool.read_buffer(past_end).err(),
        Some(Error::ShortRead { block: 5, .. })
    ));
    let buf = pool
        .read_buffer_mode(past_end, ReadMode::ZeroOnError)
        .unwrap();
    assert!(buf.read().iter().all(|&b| b == 0));
    drop(buf);
    pool.check_invariants().unwrap();
}

#[test]
fn the_cleaner_writes_the_next_victims_so_that_misses_write_nothing() {
    let f = fixture(32, BufferDropMode::Indexed);
    let pool = f.pool();
    // 64 dirty pages through a pool of 32: the sweep has taken (and written) the first half,
    // the second half is dirty in the pool.
    populate(&pool, rel(7), 64);
    let dirty = |pool: &BufferPool| {
        pool.descs
            .iter()
            .filter(|d| d.state.load(Ordering::Relaxed) & DIRTY != 0)
            .count()
    };
    assert_eq!(dirty(&pool), 32);
    // Nothing is reusable while every usage count is above zero: the cleaner only looks.
    let mut cleaner = Cleaner::default();
    let round = pool.clean_ahead(&mut cleaner, 100, 2.0, 32).unwrap();
    assert_eq!((round.reusable, round.written), (0, 0), "{round:?}");
    // One lap of the sweep brings the counts to zero (its victims are the pages read back).
    for b in 0..4 {
        let _ = pool
            .read_buffer(BufferTag::new(rel(7), Fork::Main, b))
            .unwrap();
    }
    let before = f.writes();
    let round = pool.clean_ahead(&mut cleaner, 100, 2.0, 32).unwrap();
    assert!(round.written > 0, "{round:?}");
    assert_eq!(f.writes() - before, round.written);
    assert_eq!(pool.stats().cleaned.get(), round.written);
    // The misses that follow find the victims the cleaner wrote: no write of their own.
    let before = f.writes();
    let misses = round.written.min(8) as u32;
    for b in 4..4 + misses {
        let buf = pool
            .read_buffer(BufferTag::new(rel(7), Fork::Main, b))
            .unwrap();
        assert_eq!(read_stamp(&buf.read()), (7, b, 1));
    }
    assert_eq!(f.writes() - before, 0, "a miss wrote a victim back");
    // At most `max_pages` per round.
    for b in 0..32 {
        let buf = pool
            .read_buffer(BufferTag::new(rel(7), Fork::Main, 32 + b))
            .unwrap();
        buf.write().mark_dirty();
    }
    assert_eq!(pool.stats().cleaner_max_rounds.load(Ordering::Relaxed), 0);
    let round = pool.clean_ahead(&mut cleaner, 3, 2.0, 32).unwrap();
    assert!(round.written <= 3, "{round:?}");
    // A round that stopped at the limit is counted (PostgreSQL's `maxwritten_clean`).
    assert_eq!(
        pool.stats().cleaner_max_rounds.load(Ordering::Relaxed),
        u64::from(round.written == 3),
        "{round:?}"
    );
    pool.check_invariants().unwrap();
}

#[test]
fn a_miss_that_writes_its_victim_pokes_the_background_writer_into_a_round() {
    use super::bgwriter::{BgWriter, BgWriterSettings};
    let f = fixture(32, BufferDropMode::Indexed);
    let pool = Arc::new(f.pool());
    // An hour between rounds: only a poke can run one within this test.
    let bgwriter = BgWriter::start(
        Arc::clone(&pool),
        BgWriterSettings {
            delay: Duration::from_secs(3600),
            lru_maxpages: 100,
            lru_multiplier: 2.0,
        },
    )
    .unwrap();
    // 96 dirty pages through a pool of 32: misses write dirty victims and poke.
    populate(&pool, rel(7), 96);
    assert!(pool.stats().victim_writes.get() > 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    while pool.stats().cleaned.get() == 0 {
        assert!(Instant::now() < deadline, "no round ran after the pokes");
        // Misses keep the sweep moving, so the buffers ahead come to usage zero, and every
        // page is dirtied again, so misses keep writing dirty victims and poking.
        for b in 0..96 {
            let buf = pool.read_buffer(BufferTag::new(rel(7), Fork::Main, b)).unwrap();
            buf.write().mark_dirty();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(bgwriter);
    assert!(pool.cleaner.is_empty(), "the stopped writer's poke is cleared");
    pool.check_invariants().unwrap();
}
