//! Power loss under the storage manager and buffer pool, on the simulated file system: synced
//! pages survive; unsynced rewrites survive whole, vanish, or are torn at 512-byte sectors, and
//! a torn page is always *detected* by its checksum, never returned as valid data.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{crash_seeds, lossy};
use quire_engine::buffer::BufferPool;
use quire_engine::page::{Page, PageMut};
use quire_engine::smgr::Smgr;
use quire_engine::types::{BufferTag, PAGE_SIZE};
use quire_engine::vfs::{CrashOptions, SimVfs, Vfs};
use quire_engine::{Config, Error, Fork, RelFileLocator};

const REL: RelFileLocator = RelFileLocator {
    db_oid: 1,
    rel_number: 42,
};
const BLOCKS: u32 = 10;

/// The item every version of block `block` holds: every byte depends on (block, version), so
/// two versions differ in every 512-byte sector and a torn mix cannot pass for either.
fn body(block: u32, version: u8) -> Vec<u8> {
    (0..7000u32)
        .map(|i| (i as u8) ^ (block as u8).wrapping_mul(31) ^ version.wrapping_mul(97))
        .collect()
}

fn write_version(page: &mut [u8; PAGE_SIZE], block: u32, version: u8) {
    let mut p = PageMut::new(page);
    p.init(0);
    p.add_item(&body(block, version), None)
        .expect("an empty page has room for 7000 bytes");
}

fn version_of(page: &[u8; PAGE_SIZE], block: u32) -> Option<u8> {
    let item = Page::new(page).item(1)?;
    [1u8, 2]
        .into_iter()
        .find(|v| item == body(block, *v).as_slice())
}

fn open(vfs: &Arc<SimVfs>, config: &Config) -> (Arc<Smgr>, BufferPool) {
    let smgr =
        Arc::new(Smgr::new(Arc::clone(vfs) as Arc<dyn Vfs>, Path::new("/data"), config).unwrap());
    let pool = BufferPool::new(Arc::clone(&smgr), config, None).unwrap();
    (smgr, pool)
}

#[derive(Default, Debug)]
struct Outcomes {
    old: usize,
    new: usize,
    torn_detected: usize,
}

fn run_seed(seed: u64, outcomes: &mut Outcomes) {
    let vfs = Arc::new(SimVfs::new(seed));
    let config = Config {
        shared_buffers_bytes: 32 * PAGE_SIZE as u64,
        segment_size_blocks: 4,
        ..Config::default()
    };
    {
        let (smgr, pool) = open(&vfs, &config);
        smgr.create(REL, Fork::Main).unwrap();
        for b in 0..BLOCKS {
            let buf = pool.extend(REL, Fork::Main).unwrap();
            let mut page = buf.write();
            write_version(&mut page, b, 1);
            page.mark_dirty();
        }
        pool.flush_all().unwrap();
        smgr.sync(REL, Fork::Main).unwrap();
        // Version 2 reaches the files but is never synced.
        for b in 0..BLOCKS {
            let buf = pool
                .read_buffer(BufferTag::new(REL, Fork::Main, b))
                .unwrap();
            let mut page = buf.write();
            write_version(&mut page, b, 2);
            page.mark_dirty();
        }
        pool.flush_all().unwrap();
    }
    // Half the seeds tear surviving writes at 512-byte sectors, half keep them whole.
    vfs.crash(&lossy(seed % 2 == 1));
    let (smgr, pool) = open(&vfs, &config);
    assert_eq!(
        smgr.nblocks(REL, Fork::Main).unwrap(),
        BLOCKS,
        "seed {seed}"
    );
    for b in 0..BLOCKS {
        match pool.read_buffer(BufferTag::new(REL, Fork::Main, b)) {
            Ok(buf) => match version_of(&buf.read(), b) {
                Some(1) => outcomes.old += 1,
                Some(2) => outcomes.new += 1,
                other => panic!(
                    "seed {seed} block {b}: a page passed its checksum with version {other:?}"
                ),
            },
            Err(Error::CorruptPage {
                rel, fork, block, ..
            }) => {
                assert_eq!((rel, fork, block), (REL, Fork::Main, b), "seed {seed}");
                outcomes.torn_detected += 1;
            }
            Err(e) => panic!("seed {seed} block {b}: unexpected error {e}"),
        }
    }
    pool.check_invariants().unwrap();
}

#[test]
fn synced_pages_survive_and_torn_pages_are_detected() {
    let seeds = crash_seeds(300);
    let mut outcomes = Outcomes::default();
    for seed in 0..seeds {
        run_seed(seed, &mut outcomes);
    }
    // Every outcome must actually occur, or the test proves nothing.
    assert!(
        outcomes.old > 0 && outcomes.new > 0 && outcomes.torn_detected > 0,
        "{outcomes:?}"
    );
    eprintln!("{seeds} crashes: {outcomes:?}");
}

#[test]
fn unsynced_relation_creation_vanishes_at_power_loss() {
    let vfs = Arc::new(SimVfs::new(7));
    let config = Config::default();
    {
        let (smgr, pool) = open(&vfs, &config);
        smgr.create(REL, Fork::Main).unwrap();
        let buf = pool.extend(REL, Fork::Main).unwrap();
        let mut page = buf.write();
        write_version(&mut page, 0, 1);
        page.mark_dirty();
        drop(page);
        drop(buf);
        pool.flush_all().unwrap();
    }
    vfs.crash(&CrashOptions::default());
    let (smgr, _pool) = open(&vfs, &config);
    assert!(!smgr.exists(REL, Fork::Main).unwrap());
}
