//! Simulated power loss under the whole engine: a seeded random workload of WAL-logged page
//! changes (with checkpoints, evictions and file extensions along the way), a crash at a
//! random point, recovery, and a check against a model: every change whose flush returned is
//! present, the changes that survived form a prefix of the WAL order (nothing half-applied),
//! and every page passes its checksum. Then a clean shutdown must replay nothing.

mod common;

use std::sync::Arc;

use common::{crash, crash_seeds, new_db, open_db, power_loss};

use quire_engine::recovery::{storage, testrm};
use quire_engine::{Config, Database, Fork, RelFileLocator};

const RELS: u64 = 3;
const BLOCKS: u32 = 12;
const SLOTS: usize = 16;
const SLOT_BASE: usize = 64;
/// Slots sit in different 512-byte sectors, so a torn page write mixes old and new slots and
/// fails its checksum: only the full-page image in the WAL can repair it.
const SLOT_STRIDE: usize = 504;

fn slot_at(slot: usize) -> usize {
    SLOT_BASE + slot * SLOT_STRIDE
}

fn config() -> Config {
    Config {
        // Small enough that pages are evicted (written before WAL is flushed past them,
        // which the WAL rule must handle) and files span several segments.
        shared_buffers_bytes: 20 * 8192,
        segment_size_blocks: 4,
        wal_segment_size_bytes: 64 * 1024,
        wal_buffers_bytes: 1024 * 1024,
        checkpoint_timeout_s: 3600,
        ..Config::default()
    }
}

fn rel(i: u64) -> RelFileLocator {
    RelFileLocator::new(1, 1000 + i)
}

use quire_engine::rng::SplitMix64 as Rng;
use quire_engine::types::BufferTag;

/// One change: `op` (its index + 1) written into `slot` of `block` of `rel`.
#[derive(Clone, Copy)]
struct Op {
    rel: u64,
    block: u32,
    slot: usize,
}

fn read_slots(db: &Database, r: u64, block: u32) -> [u64; SLOTS] {
    let buf = db
        .buffer_pool()
        .read_buffer(BufferTag::new(rel(r), Fork::Main, block))
        .unwrap_or_else(|e| panic!("rel {r} block {block}: {e}"));
    let page = buf.read();
    let mut out = [0u64; SLOTS];
    for (s, v) in out.iter_mut().enumerate() {
        let at = slot_at(s);
        *v = u64::from_le_bytes(page[at..at + 8].try_into().unwrap());
    }
    out
}

fn run_seed(seed: u64) -> (usize, usize) {
    let (vfs, db) = new_db(seed, config());
    let mut rng = Rng::new(seed.wrapping_mul(6_364_136_223_846_793_005));
    let wal = Arc::clone(db.wal());
    for r in 0..RELS {
        db.smgr().create(rel(r), Fork::Main).unwrap();
        let end = storage::log_create(&wal, rel(r), Fork::Main).unwrap();
        wal.flush(end).unwrap();
    }
    let mut ops: Vec<Op> = Vec::new();
    let mut acked = 0usize;
    let total = 50 + (rng.next() % 250) as usize;
    for _ in 0..total {
        let op = Op {
            rel: rng.next() % RELS,
            block: (rng.next() % u64::from(BLOCKS)) as u32,
            slot: (rng.next() % SLOTS as u64) as usize,
        };
        let pool = db.buffer_pool();
        while db.smgr().nblocks(rel(op.rel), Fork::Main).unwrap() <= op.block {
            drop(pool.extend(rel(op.rel), Fork::Main).unwrap());
        }
        let buf = pool
            .read_buffer(BufferTag::new(rel(op.rel), Fork::Main, op.block))
            .unwrap();
        let value = ops.len() as u64 + 1;
        let end = testrm::set_bytes(&wal, &buf, slot_at(op.slot), &value.to_le_bytes()).unwrap();
        drop(buf);
        ops.push(op);
        match rng.next() % 16 {
            0..=3 => {
                wal.flush(end).unwrap();
                acked = ops.len();
            }
            4 => {
                db.checkpointer().checkpoint().unwrap();
                acked = ops.len();
            }
            _ => {}
        }
    }
    power_loss(db, &vfs, seed % 2 == 1);

    let db = open_db(&vfs, config());
    // What each slot holds now, and the newest change that survived anywhere.
    let mut recovered = vec![[0u64; SLOTS]; (RELS as usize) * BLOCKS as usize];
    for r in 0..RELS {
        let nblocks = db.smgr().nblocks(rel(r), Fork::Main).unwrap();
        for b in 0..nblocks.min(BLOCKS) {
            recovered[(r as usize) * BLOCKS as usize + b as usize] = read_slots(&db, r, b);
        }
    }
    let survived = recovered.iter().flatten().copied().max().unwrap_or(0) as usize;
    assert!(
        survived >= acked,
        "seed {seed}: acknowledged change {acked} lost (newest left {survived})"
    );
    // The surviving changes are exactly ops[..survived]: every slot shows its last write
    // among them.
    let mut expect = vec![[0u64; SLOTS]; recovered.len()];
    for (i, op) in ops[..survived].iter().enumerate() {
        expect[(op.rel as usize) * BLOCKS as usize + op.block as usize][op.slot] = i as u64 + 1;
    }
    if expect != recovered {
        for (i, (e, r)) in expect.iter().zip(&recovered).enumerate() {
            if e != r {
                eprintln!(
                    "seed {seed} rel {} block {}: expected {e:?}\n   recovered {r:?}",
                    i / BLOCKS as usize,
                    i % BLOCKS as usize
                );
            }
        }
        panic!("seed {seed}: recovered state is not a prefix of the WAL (acked {acked}, newest {survived}, ops {})", ops.len());
    }
    db.buffer_pool().check_invariants().unwrap();

    // A clean shutdown, then a start that replays nothing.
    let end = {
        let buf = db
            .buffer_pool()
            .read_buffer(BufferTag::new(rel(0), Fork::Main, 0));
        buf.ok().map(|buf| {
            testrm::set_bytes(db.wal(), &buf, SLOT_BASE, &u64::MAX.to_le_bytes()).unwrap()
        })
    };
    if let Some(end) = end {
        db.wal().flush(end).unwrap();
    }
    db.close().unwrap();
    let db = open_db(&vfs, config());
    assert_eq!(
        db.recovery_stats().records,
        0,
        "seed {seed}: a clean restart replayed WAL"
    );
    if end.is_some() {
        assert_eq!(read_slots(&db, 0, 0)[0], u64::MAX, "seed {seed}");
    }
    (acked, survived)
}

#[test]
fn acknowledged_changes_survive_power_loss_and_nothing_is_half_applied() {
    let seeds = crash_seeds(1000);
    let (mut acked, mut survived) = (0, 0);
    for seed in 0..seeds {
        let (a, s) = run_seed(seed);
        acked += a;
        survived += s;
    }
    eprintln!("{seeds} crashes: {acked} changes acknowledged, {survived} recovered, 0 failures");
    assert!(
        survived > acked,
        "no unacknowledged change ever survived: the crash is too gentle"
    );
}

/// A data-file fsync fails during a checkpoint: the checkpoint never completes, the engine
/// refuses further writes, and a restart recovers everything acknowledged from the WAL.
#[test]
fn a_failed_data_fsync_stops_the_engine_and_recovery_restores_everything() {
    let (vfs, db) = new_db(42, config());
    let wal = Arc::clone(db.wal());
    db.smgr().create(rel(0), Fork::Main).unwrap();
    wal.flush(storage::log_create(&wal, rel(0), Fork::Main).unwrap())
        .unwrap();
    for b in 0..6u32 {
        let buf = db.buffer_pool().extend(rel(0), Fork::Main).unwrap();
        let end =
            testrm::set_bytes(&wal, &buf, SLOT_BASE, &(u64::from(b) + 1).to_le_bytes()).unwrap();
        wal.flush(end).unwrap();
    }
    vfs.fail_next_fsync(Some("base/"));
    let err = db.checkpointer().checkpoint().unwrap_err();
    assert!(err.to_string().contains("checkpoint failed"), "{err}");
    // Nothing more may be written: a retried fsync could lie about the lost pages.
    let buf = db
        .buffer_pool()
        .read_buffer(BufferTag::new(rel(0), Fork::Main, 0))
        .unwrap();
    let refused = testrm::set_bytes(&wal, &buf, SLOT_BASE, &99u64.to_le_bytes()).unwrap_err();
    assert!(refused.to_string().contains("failed state"), "{refused}");
    drop(buf);
    assert!(
        db.checkpointer().checkpoint().is_err(),
        "the checkpoint must never complete"
    );
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    assert!(
        db.recovery_stats().records >= 6,
        "{:?}",
        db.recovery_stats()
    );
    for b in 0..6u32 {
        assert_eq!(read_slots(&db, 0, b)[0], u64::from(b) + 1, "block {b}");
    }
}

/// Truncation and drop are WAL-logged before the files change, and their redo drops buffers
/// and cuts files exactly as the primary did.
#[test]
fn truncate_and_drop_are_redone_after_a_crash() {
    let (vfs, db) = new_db(77, config());
    let wal = Arc::clone(db.wal());
    let pool = db.buffer_pool();
    for r in 0..2 {
        db.smgr().create(rel(r), Fork::Main).unwrap();
        wal.flush(storage::log_create(&wal, rel(r), Fork::Main).unwrap())
            .unwrap();
        for b in 0..10u32 {
            let buf = pool.extend(rel(r), Fork::Main).unwrap();
            let end = testrm::set_bytes(&wal, &buf, SLOT_BASE, &(u64::from(b) + 7).to_le_bytes())
                .unwrap();
            wal.flush(end).unwrap();
        }
    }
    // Truncate rel 0 to 3 blocks: WAL first (flushed), then buffers, then the file.
    let end = storage::log_truncate(&wal, rel(0), Fork::Main, 3).unwrap();
    wal.flush(end).unwrap();
    pool.drop_relation_buffers(rel(0), Fork::Main, 3);
    db.smgr().truncate(rel(0), Fork::Main, 3).unwrap();
    // Drop rel 1.
    let end = storage::log_drop(&wal, &[rel(1)]).unwrap();
    wal.flush(end).unwrap();
    pool.drop_relations(&[rel(1)]);
    db.smgr().unlink(rel(1)).unwrap();
    power_loss(db, &vfs, true);
    let db = open_db(&vfs, config());
    assert_eq!(db.smgr().nblocks(rel(0), Fork::Main).unwrap(), 3);
    for b in 0..3u32 {
        assert_eq!(read_slots(&db, 0, b)[0], u64::from(b) + 7);
    }
    assert!(
        !db.smgr().exists(rel(1), Fork::Main).unwrap(),
        "the dropped relation came back"
    );
    assert_eq!(db.buffer_pool().cached_buffers_of(rel(1)), 0);
    db.buffer_pool().check_invariants().unwrap();
}

/// A checkpoint fsyncs each written file once, however many writes it absorbed, and no
/// foreground write fsyncs a data file (seed 001).
#[test]
fn a_checkpoint_fsyncs_each_written_file_once() {
    use quire_engine::vfs::{OpKind, Vfs};
    let (vfs, db) = new_db(5, config());
    let wal = Arc::clone(db.wal());
    db.smgr().create(rel(0), Fork::Main).unwrap();
    // 12 blocks = 3 segments of 4; every page changed 10 times and written back repeatedly
    // through a 20-buffer pool.
    for round in 0..10u64 {
        for b in 0..12u32 {
            if db.smgr().nblocks(rel(0), Fork::Main).unwrap() <= b {
                drop(db.buffer_pool().extend(rel(0), Fork::Main).unwrap());
            }
            let buf = db
                .buffer_pool()
                .read_buffer(BufferTag::new(rel(0), Fork::Main, b))
                .unwrap();
            testrm::set_bytes(&wal, &buf, SLOT_BASE, &round.to_le_bytes()).unwrap();
        }
        db.buffer_pool().flush_all().unwrap();
    }
    let before = vfs.counters().snapshot();
    let files_before = db
        .checkpointer()
        .stats()
        .file_fsyncs
        .load(std::sync::atomic::Ordering::Relaxed);
    db.checkpointer().checkpoint().unwrap();
    let files = db
        .checkpointer()
        .stats()
        .file_fsyncs
        .load(std::sync::atomic::Ordering::Relaxed)
        - files_before;
    assert_eq!(files, 3, "one fsync per segment file");
    let c = vfs.counters().snapshot().since(&before);
    // 3 data files, the WAL segment(s) of the checkpoint record, the control file.
    assert!(c.get(OpKind::Fsync) <= 3 + 2 + 1, "{c}");
}

/// A requested checkpoint does not wait at the pace of one the background thread started:
/// that one finishes at full speed, then the requested one runs (PostgreSQL's
/// `CHECKPOINT_IMMEDIATE`). Before, CHECKPOINT waited for up to 0.9 x `checkpoint_timeout`.
#[test]
fn a_requested_checkpoint_hurries_a_paced_one_in_progress() {
    let config = Config {
        // No eviction: a buffer written means the background checkpoint has begun.
        shared_buffers_bytes: 16 << 20,
        wal_segment_size_bytes: 64 * 1024,
        max_wal_size_bytes: 256 * 1024,
        checkpoint_timeout_s: 3600,
        ..Config::default()
    };
    let (_vfs, db) = new_db(43, config);
    let db = Arc::new(db);
    // Past max_wal_size: the background thread begins a checkpoint, paced over 54 minutes
    // (and over a WAL budget nothing more fills), so after its first write it waits.
    common::committing(&db, |tx| {
        common::create_pairs(tx, "t", "v", (0..20_000).map(|i| (i, i)));
    });
    let began = std::time::Instant::now();
    while db
        .buffer_pool()
        .stats()
        .writes
        .load(std::sync::atomic::Ordering::Relaxed)
        == 0
    {
        assert!(
            began.elapsed() < std::time::Duration::from_secs(20),
            "no background checkpoint began"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (done, finished) = std::sync::mpsc::channel();
    let requester = Arc::clone(&db);
    std::thread::spawn(move || done.send(requester.checkpoint().map(|_| ())));
    finished
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the requested checkpoint waited at the paced one's speed")
        .expect("the checkpoint succeeds");
}
