use std::collections::HashSet;
use std::sync::Arc;

use super::*;
use crate::vfs::{OpKind, OsVfs};

fn setup(cache: RelsizeCacheMode, max_files: usize) -> (tempfile::TempDir, Smgr) {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        segment_size_blocks: 4,
        max_files_per_process: max_files,
        relsize_cache: cache,
        ..Config::default()
    };
    let smgr = Smgr::new(Arc::new(OsVfs::new()), dir.path(), &config).unwrap();
    (dir, smgr)
}

/// Equal but for the checksum field (bytes 8..12), which smgr sets on the copy it writes.
fn same_page(a: &[u8; PAGE_SIZE], b: &[u8; PAGE_SIZE]) -> bool {
    a[..8] == b[..8] && a[12..] == b[12..]
}

/// A page with a recognisable header (a valid, initialised page) for block `n`.
fn page_for(n: u32) -> Box<[u8; PAGE_SIZE]> {
    let mut p = Box::new([0u8; PAGE_SIZE]);
    crate::page::PageMut::new(&mut p).init(0);
    let tail = PAGE_SIZE - 8;
    p[tail..tail + 4].copy_from_slice(&n.to_le_bytes());
    p
}

const REL: RelFileLocator = RelFileLocator {
    db_oid: 5,
    rel_number: 16384,
};

#[test]
fn extend_read_write_across_segments() {
    let (_dir, smgr) = setup(RelsizeCacheMode::On, 100);
    smgr.create(REL, Fork::Main).unwrap();
    for n in 0..10 {
        assert_eq!(smgr.extend(REL, Fork::Main, &page_for(n)).unwrap(), n);
    }
    assert_eq!(smgr.nblocks(REL, Fork::Main).unwrap(), 10);
    assert!(
        smgr.segment_path(REL, Fork::Main, 2).exists(),
        "10 blocks of 4 need 3 segments"
    );
    smgr.write(REL, Fork::Main, 5, &page_for(500)).unwrap();
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    for n in 0..10 {
        smgr.read(REL, Fork::Main, n, &mut buf).unwrap();
        let want = if n == 5 { 500 } else { n };
        assert!(same_page(&buf, &page_for(want)), "block {n}");
    }
    assert!(matches!(
        smgr.create(REL, Fork::Main),
        Err(Error::RelationExists { .. })
    ));
}

#[test]
fn zero_extend_grows_within_a_segment_and_creates_the_next_ones() {
    let (_dir, smgr) = setup(RelsizeCacheMode::On, 100);
    smgr.create(REL, Fork::Main).unwrap();
    smgr.extend(REL, Fork::Main, &page_for(0)).unwrap();
    // 1 block to 10 with segments of 4: grows segment 0, creates 1 and 2.
    smgr.zero_extend(REL, Fork::Main, 10).unwrap();
    assert_eq!(smgr.nblocks(REL, Fork::Main).unwrap(), 10);
    for segno in 0..3 {
        let len = std::fs::metadata(smgr.segment_path(REL, Fork::Main, segno))
            .unwrap()
            .len();
        let want_blocks = if segno == 2 { 2 } else { 4 };
        assert_eq!(len, want_blocks * PAGE_SIZE as u64, "segment {segno}");
    }
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    smgr.read(REL, Fork::Main, 0, &mut buf).unwrap();
    assert!(same_page(&buf, &page_for(0)), "the existing block is kept");
    for n in 1..10 {
        smgr.read(REL, Fork::Main, n, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0), "block {n} reads as zeros");
    }
    // Never shrinks; the next extension follows the new end.
    smgr.zero_extend(REL, Fork::Main, 3).unwrap();
    assert_eq!(smgr.extend(REL, Fork::Main, &page_for(10)).unwrap(), 10);
    assert!(matches!(
        smgr.zero_extend(REL, Fork::Main, MAX_BLOCKS + 1),
        Err(Error::BlockIo { op: "extend", .. })
    ));
}

#[test]
fn size_cache_makes_no_size_probes_once_open() {
    let (_dir, smgr) = setup(RelsizeCacheMode::On, 100);
    smgr.create(REL, Fork::Main).unwrap();
    smgr.extend(REL, Fork::Main, &page_for(0)).unwrap();
    let before = smgr.vfs().counters().snapshot();
    for _ in 0..1000 {
        assert_eq!(smgr.nblocks(REL, Fork::Main).unwrap(), 1);
    }
    let c = smgr.vfs().counters().snapshot().since(&before);
    assert_eq!(c.get(OpKind::SizeProbe), 0);
    assert_eq!(c.get(OpKind::Open), 0);
}

#[test]
fn size_cache_off_probes_every_call() {
    let (_dir, smgr) = setup(RelsizeCacheMode::Off, 100);
    smgr.create(REL, Fork::Main).unwrap();
    smgr.extend(REL, Fork::Main, &page_for(0)).unwrap();
    let before = smgr.vfs().counters().snapshot();
    for _ in 0..100 {
        assert_eq!(smgr.nblocks(REL, Fork::Main).unwrap(), 1);
    }
    let c = smgr.vfs().counters().snapshot().since(&before);
    assert_eq!(c.get(OpKind::SizeProbe), 100);
}

/// `recovery_only` (PostgreSQL 14-17): the cache answers during startup redo, and every
/// call probes in normal running.
#[test]
fn size_cache_recovery_only_answers_only_in_recovery() {
    let (_dir, smgr) = setup(RelsizeCacheMode::RecoveryOnly, 100);
    smgr.create(REL, Fork::Main).unwrap();
    smgr.extend(REL, Fork::Main, &page_for(0)).unwrap();
    let probes = |smgr: &Smgr| {
        let before = smgr.vfs().counters().snapshot();
        for _ in 0..100 {
            assert_eq!(smgr.nblocks(REL, Fork::Main).unwrap(), 1);
        }
        smgr.vfs().counters().snapshot().since(&before).get(OpKind::SizeProbe)
    };
    assert_eq!(probes(&smgr), 100, "normal running");
    assert_eq!(smgr.cached_nblocks(REL, Fork::Main), None);
    smgr.set_in_recovery(true);
    assert!(probes(&smgr) <= 1, "recovery: at most the first call probes");
    assert_eq!(smgr.cached_nblocks(REL, Fork::Main), Some(1));
    smgr.set_in_recovery(false);
    assert_eq!(probes(&smgr), 100, "normal running again");
}

#[test]
fn a_reopened_storage_manager_learns_sizes_by_probing_once() {
    let (dir, smgr) = setup(RelsizeCacheMode::On, 100);
    smgr.create(REL, Fork::Main).unwrap();
    for n in 0..9 {
        smgr.extend(REL, Fork::Main, &page_for(n)).unwrap();
    }
    drop(smgr);
    let config = Config {
        segment_size_blocks: 4,
        ..Config::default()
    };
    let smgr = Smgr::new(Arc::new(OsVfs::new()), dir.path(), &config).unwrap();
    assert_eq!(smgr.nblocks(REL, Fork::Main).unwrap(), 9);
    let probes = smgr.vfs().counters().snapshot().get(OpKind::SizeProbe);
    assert_eq!(probes, 3, "one probe per segment, the first time");
    assert_eq!(smgr.nblocks(REL, Fork::Main).unwrap(), 9);
    assert_eq!(
        smgr.vfs().counters().snapshot().get(OpKind::SizeProbe),
        probes
    );
}

#[test]
fn truncate_cuts_segments_and_keeps_the_cache_exact() {
    for mode in [RelsizeCacheMode::On, RelsizeCacheMode::Off] {
        let (_dir, smgr) = setup(mode, 100);
        smgr.create(REL, Fork::Main).unwrap();
        for n in 0..11 {
            smgr.extend(REL, Fork::Main, &page_for(n)).unwrap();
        }
        smgr.truncate(REL, Fork::Main, 5).unwrap();
        assert_eq!(smgr.nblocks(REL, Fork::Main).unwrap(), 5);
        assert!(!smgr.segment_path(REL, Fork::Main, 2).exists());
        let mut buf = Box::new([0u8; PAGE_SIZE]);
        smgr.read(REL, Fork::Main, 4, &mut buf).unwrap();
        assert!(smgr.read(REL, Fork::Main, 5, &mut buf).is_err());
        // Extending again reuses the block numbers with fresh content.
        assert_eq!(smgr.extend(REL, Fork::Main, &page_for(77)).unwrap(), 5);
        smgr.read(REL, Fork::Main, 5, &mut buf).unwrap();
        assert!(same_page(&buf, &page_for(77)));
        smgr.truncate(REL, Fork::Main, 0).unwrap();
        assert_eq!(smgr.nblocks(REL, Fork::Main).unwrap(), 0);
        assert!(smgr.segment_path(REL, Fork::Main, 0).exists());
        assert!(!smgr.segment_path(REL, Fork::Main, 1).exists());
    }
}

#[test]
fn unlink_removes_every_fork() {
    let (_dir, smgr) = setup(RelsizeCacheMode::On, 100);
    smgr.create(REL, Fork::Main).unwrap();
    smgr.create(REL, Fork::Fsm).unwrap();
    for n in 0..6 {
        smgr.extend(REL, Fork::Main, &page_for(n)).unwrap();
    }
    smgr.unlink(REL).unwrap();
    assert!(!smgr.exists(REL, Fork::Main).unwrap());
    assert!(!smgr.segment_path(REL, Fork::Main, 1).exists());
    assert!(!smgr.segment_path(REL, Fork::Fsm, 0).exists());
    assert!(matches!(
        smgr.nblocks(REL, Fork::Main),
        Err(Error::NoSuchRelation { .. })
    ));
}

#[test]
fn corrupt_page_is_reported_with_relation_fork_and_block() {
    let (_dir, smgr) = setup(RelsizeCacheMode::On, 100);
    smgr.create(REL, Fork::Main).unwrap();
    for n in 0..6 {
        smgr.extend(REL, Fork::Main, &page_for(n)).unwrap();
    }
    // Block 5 is block 1 of segment 1; flip a byte in its body behind the engine's back.
    let path = smgr.segment_path(REL, Fork::Main, 1);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[PAGE_SIZE + 4000] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    let err = smgr.read(REL, Fork::Main, 5, &mut buf).unwrap_err();
    assert!(
        matches!(err, Error::CorruptPage { block: 5, fork: Fork::Main, rel, .. } if rel == REL),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("block 5") && text.contains("base/5/16384"),
        "{text}"
    );
    smgr.read(REL, Fork::Main, 4, &mut buf).unwrap();
}

#[test]
fn short_read_and_missing_segment_are_errors_not_panics() {
    let (_dir, smgr) = setup(RelsizeCacheMode::On, 100);
    smgr.create(REL, Fork::Main).unwrap();
    for n in 0..10 {
        smgr.extend(REL, Fork::Main, &page_for(n)).unwrap();
    }
    // Cut segment 0 in the middle of block 3, and remove segment 2, behind the engine's back.
    let seg0 = std::fs::OpenOptions::new()
        .write(true)
        .open(smgr.segment_path(REL, Fork::Main, 0))
        .unwrap();
    seg0.set_len(3 * PAGE_SIZE as u64 + 100).unwrap();
    std::fs::remove_file(smgr.segment_path(REL, Fork::Main, 2)).unwrap();
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    let err = smgr.read(REL, Fork::Main, 3, &mut buf).unwrap_err();
    assert!(
        matches!(
            err,
            Error::ShortRead {
                block: 3,
                read_bytes: 100,
                ..
            }
        ),
        "{err}"
    );
    // The engine still holds segment 2 open (unix keeps unlinked files readable); forget the
    // handle as a restart would.
    smgr.files.remove(&(REL, Fork::Main, 2));
    let err = smgr.read(REL, Fork::Main, 9, &mut buf).unwrap_err();
    assert!(
        matches!(
            err,
            Error::MissingSegment {
                block: 9,
                segment: 2,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn open_files_stay_within_the_bound() {
    let (_dir, smgr) = setup(RelsizeCacheMode::On, 4);
    let rels: Vec<_> = (0..20).map(|i| RelFileLocator::new(1, 100 + i)).collect();
    for rel in &rels {
        smgr.create(*rel, Fork::Main).unwrap();
        smgr.extend(*rel, Fork::Main, &page_for(1)).unwrap();
        assert!(smgr.open_files() <= 4);
    }
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    for rel in &rels {
        smgr.read(*rel, Fork::Main, 0, &mut buf).unwrap();
        assert!(smgr.open_files() <= 4);
    }
    let c = smgr.vfs().counters().snapshot();
    assert_eq!(
        c.get(OpKind::Open) - c.get(OpKind::Close),
        smgr.open_files() as u64
    );
}

#[test]
fn concurrent_extenders_get_distinct_blocks() {
    let (_dir, smgr) = setup(RelsizeCacheMode::On, 100);
    smgr.create(REL, Fork::Main).unwrap();
    let smgr = Arc::new(smgr);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let smgr = Arc::clone(&smgr);
            std::thread::spawn(move || {
                (0..50)
                    .map(|i| {
                        smgr.extend(REL, Fork::Main, &page_for(t * 1000 + i))
                            .unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all = HashSet::new();
    for t in threads {
        for b in t.join().unwrap() {
            assert!(all.insert(b), "block {b} handed out twice");
        }
    }
    assert_eq!(all.len(), 200);
    assert_eq!(smgr.nblocks(REL, Fork::Main).unwrap(), 200);
}

#[test]
fn an_io_error_names_relation_fork_and_block() {
    use crate::vfs::{CrashOptions, SimVfs};
    let vfs = Arc::new(SimVfs::new(3));
    let config = Config {
        segment_size_blocks: 4,
        ..Config::default()
    };
    let smgr = Smgr::new(vfs.clone(), Path::new("/data"), &config).unwrap();
    smgr.create(REL, Fork::Main).unwrap();
    smgr.extend(REL, Fork::Main, &page_for(0)).unwrap();
    // The open handle dies with the (simulated) machine: every later call is an I/O error.
    vfs.crash(&CrashOptions::default());
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    let err = smgr.read(REL, Fork::Main, 0, &mut buf).unwrap_err();
    assert!(
        matches!(
            err,
            Error::BlockIo {
                op: "read",
                block: 0,
                fork: Fork::Main,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("base/5/16384"), "{err}");
}

#[test]
fn writes_file_sync_requests_that_truncate_and_unlink_cancel() {
    use crate::config::SyncMode;
    use crate::sync::SyncTarget;
    let seg = |segno| SyncTarget::Segment {
        rel: REL,
        fork: Fork::Main,
        segno,
    };
    let (_dir, smgr) = setup(RelsizeCacheMode::On, 100);
    smgr.create(REL, Fork::Main).unwrap();
    let before = smgr.vfs().counters().snapshot();
    for n in 0..10 {
        smgr.extend(REL, Fork::Main, &page_for(n)).unwrap();
        smgr.write(REL, Fork::Main, n, &page_for(n + 100)).unwrap();
    }
    // 20 writes over 3 segments: 3 requests, no fsync in the foreground.
    assert_eq!(
        smgr.vfs()
            .counters()
            .snapshot()
            .since(&before)
            .get(OpKind::Fsync),
        0
    );
    assert_eq!(smgr.sync_queue().len(), 3);
    smgr.truncate(REL, Fork::Main, 6).unwrap();
    assert_eq!(
        smgr.sync_queue().pending(),
        vec![seg(0), seg(1)],
        "segment 2 is gone, segment 1 was cut"
    );
    assert_eq!(smgr.sync_pending().unwrap(), 2);
    assert!(smgr.sync_queue().is_empty());
    smgr.write(REL, Fork::Main, 0, &page_for(1)).unwrap();
    smgr.unlink(REL).unwrap();
    assert!(
        smgr.sync_queue().is_empty(),
        "a dropped relation's requests are cancelled"
    );
    // A request for a file that vanished is skipped, not an error.
    smgr.sync_target(seg(0)).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        sync: SyncMode::Immediate,
        ..Config::default()
    };
    let smgr = Smgr::new(Arc::new(OsVfs::new()), dir.path(), &config).unwrap();
    smgr.create(REL, Fork::Main).unwrap();
    let before = smgr.vfs().counters().snapshot();
    for n in 0..5 {
        smgr.extend(REL, Fork::Main, &page_for(n)).unwrap();
    }
    assert_eq!(
        smgr.vfs()
            .counters()
            .snapshot()
            .since(&before)
            .get(OpKind::Fsync),
        5
    );
}

/// Three relations of one block each on the simulator, every file cached; the first is the
/// least recently used.
fn three_cached(sim: &Arc<crate::vfs::SimVfs>) -> (Smgr, [RelFileLocator; 3]) {
    let config = Config {
        segment_size_blocks: 4,
        max_files_per_process: 100,
        ..Config::default()
    };
    let smgr = Smgr::new(sim.clone(), Path::new("/data"), &config).unwrap();
    let rels = [16390, 16391, 16392].map(|n| RelFileLocator::new(5, n));
    for rel in rels {
        smgr.create(rel, Fork::Main).unwrap();
        smgr.extend(rel, Fork::Main, &page_for(rel.rel_number as u32))
            .unwrap();
    }
    (smgr, rels)
}

/// Opens made by reading `rel`'s block 0 (0 if its file is cached), checking what it read.
fn opens_to_read(smgr: &Smgr, rel: RelFileLocator) -> u64 {
    let before = smgr.vfs().counters().snapshot();
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    smgr.read(rel, Fork::Main, 0, &mut buf).unwrap();
    assert!(same_page(&buf, &page_for(rel.rel_number as u32)), "{rel}");
    smgr.vfs().counters().snapshot().since(&before).get(OpKind::Open)
}

/// PostgreSQL's fd.c: an open that meets EMFILE closes the least recently used cached file
/// and tries again; only with nothing left to close does it fail, with an ordinary error
/// (53000) that leaves the engine running.
#[test]
fn a_read_that_meets_emfile_closes_a_cached_file_and_succeeds() {
    use crate::vfs::{Fault, SimVfs};
    let sim = Arc::new(SimVfs::new(36));
    let (smgr, [a, b, c]) = three_cached(&sim);
    assert!(smgr.release_one_file(), "a's file, the least recently used");
    assert_eq!(smgr.open_files(), 2);
    // b is now the least recently used of the cached files.
    sim.inject(Fault::TooManyFiles, Some(&smgr.segment_path(a, Fork::Main, 0).to_string_lossy()));
    assert_eq!(opens_to_read(&smgr, a), 2, "EMFILE, then the retry");
    assert_eq!(sim.faults_injected().get(Fault::TooManyFiles), 1);
    assert_eq!(smgr.open_files(), 2, "b closed, a opened");
    assert_eq!(opens_to_read(&smgr, c), 0, "c stayed open");
    assert_eq!(opens_to_read(&smgr, b), 1, "b was closed to make room");

    // A file someone holds is not closed: it would stay open through its handle.
    let held = smgr.segment(c, Fork::Main, 0, OpenMode::Existing).unwrap();
    // Nothing to close but what is held: every open fails, the engine goes on.
    sim.set_fault_rate(Fault::TooManyFiles, 1.0, None);
    smgr.release_one_file();
    smgr.release_one_file();
    assert_eq!(smgr.open_files(), 1, "only the held file is left");
    let mut buf = Box::new([0u8; PAGE_SIZE]);
    let e = smgr.read(a, Fork::Main, 0, &mut buf).unwrap_err();
    assert_eq!(e.sqlstate(), "53000", "{e}");
    assert!(e.to_string().contains("could not open file"), "{e}");
    assert!(!smgr.health().is_failed());
    drop(held);
    sim.set_fault_rate(Fault::TooManyFiles, 0.0, None);
    assert_eq!(opens_to_read(&smgr, a), 1);
}
