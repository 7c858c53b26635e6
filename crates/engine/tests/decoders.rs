//! Issue 12, item 10: every decoder of bytes that come from disk (or the WAL) answers
//! arbitrary and mutated-valid input with an error or a value, never a panic and never an
//! allocation sized by an untrusted length field (a length of 4 GB must not allocate 4 GB:
//! the test process would abort).
//!
//! Each property runs `PROPTEST_CASES` cases (256 by default, a few thousand in all); a long
//! run by hand: `PROPTEST_CASES=1000000 cargo test --release -p quire-engine --test decoders`.
//!
//! Covered here: rows, WAL records, checkpoint records, transaction end records, prepared
//! transaction states, lock tags, heap prune and freeze records, B-tree pages and meta
//! pages, the header and line pointers of any page, and — through a whole startup, since
//! their decoders are private — the WAL's pages and the control file, with bits flipped on
//! the simulated file system. Beside their code, with the same properties: the dead-TID
//! store's chunks and containers (`vacuum/tidstore/tests.rs`, in memory only), numeric
//! values (`value/numeric.rs`) and sequence pages (`sequence/mod.rs`).

mod common;

use std::path::Path;

use proptest::prelude::*;
use quire_engine::btree::page::{BtPage, Meta, Tuple};
use quire_engine::heap::{freeze, prune};
use quire_engine::page::Page;
use quire_engine::recovery::xlog::CheckpointRecord;
use quire_engine::txn::lock::LockTag;
use quire_engine::txn::twophase::PreparedState;
use quire_engine::txn::EndRecord;
use quire_engine::types::{Lsn, RelFileLocator, PAGE_SIZE};
use quire_engine::value::{decode_row, encode_row};
use quire_engine::wal::record;
use quire_engine::Value;

/// Up to a few KiB of arbitrary bytes.
fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..4096)
}

/// `valid` with a few bytes overwritten, a cut, or bytes appended.
fn mutated(valid: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = valid.len().max(1);
    (
        prop::collection::vec((0..len, any::<u8>()), 1..8),
        0..=valid.len(),
        prop::collection::vec(any::<u8>(), 0..16),
        0..3u8,
    )
        .prop_map(move |(edits, cut, tail, how)| {
            let mut v = valid.clone();
            match how {
                0 => {
                    for (at, b) in &edits {
                        if let Some(x) = v.get_mut(*at) {
                            *x = *b;
                        }
                    }
                }
                1 => v.truncate(cut),
                _ => v.extend_from_slice(&tail),
            }
            v
        })
}

fn a_row() -> Vec<u8> {
    let mut out = Vec::new();
    encode_row(
        &[
            Value::Int(-7),
            Value::Text("quire".into()),
            Value::Null,
            Value::Bool(true),
            Value::Bytea(vec![0, 1, 2, 255]),
            Value::Float(1.5),
            Value::Timestamp(-1),
        ],
        &mut out,
    );
    out
}

fn a_page(bytes: &[u8]) -> Box<[u8; PAGE_SIZE]> {
    let mut page = Box::new([0u8; PAGE_SIZE]);
    let n = bytes.len().min(PAGE_SIZE);
    page[..n].copy_from_slice(&bytes[..n]);
    page
}

proptest! {
    #[test]
    fn rows_decode_or_fail(b in bytes(), natts in 0usize..100_000) {
        let _ = decode_row(&b, natts);
    }

    #[test]
    fn mutated_rows_decode_or_fail(b in mutated(a_row()), natts in 0usize..8) {
        let _ = decode_row(&b, natts);
    }

    #[test]
    fn wal_records_decode_or_fail(b in bytes(), lsn in any::<u64>()) {
        let _ = record::decode(&b, Lsn(lsn), Lsn(lsn.saturating_add(b.len() as u64)));
    }

    #[test]
    fn small_records_decode_or_fail(b in bytes()) {
        let _ = CheckpointRecord::decode(&b);
        let _ = EndRecord::decode(&b);
        let _ = PreparedState::decode(&b);
        let _ = LockTag::decode(&b);
        let _ = prune::decode(&b);
        let _ = freeze::decode(&b);
        let _ = Meta::decode(&b);
    }

    #[test]
    fn mutated_end_records_decode_or_fail(b in mutated({
        let mut out = Vec::new();
        EndRecord::default().encode(&mut out);
        out
    })) {
        let _ = EndRecord::decode(&b);
    }

    #[test]
    fn mutated_prune_records_decode_or_fail(b in mutated({
        let mut out = Vec::new();
        prune::encode(
            &prune::Prune {
                redirected: vec![(1, 2)],
                dead: vec![3, 4],
                unused: vec![5],
                hinted: vec![6],
            },
            &mut out,
        );
        out
    })) {
        let _ = prune::decode(&b);
    }

    #[test]
    fn pages_are_checked_or_refused(b in prop::collection::vec(any::<u8>(), 0..PAGE_SIZE)) {
        let page = a_page(&b);
        let view = Page::new(&page);
        if view.check_header().is_ok() {
            let _ = view.check_items();
        }
        let _ = Tuple::parse(&b);
        if let Ok(bt) = BtPage::new(&page, RelFileLocator::new(1, 16384), 0) {
            for off in 1..=bt.item_count() {
                let _ = bt.tuple(off);
            }
            let _ = bt.high_key();
        }
    }
}

/// A small committed workload on the simulated file system, then a power loss.
fn crashed_database(seed: u64) -> std::sync::Arc<quire_engine::vfs::SimVfs> {
    let (vfs, db) = common::new_db(seed, common::config());
    common::committing(&db, |tx| common::create_accounts(tx, 50));
    common::crash(db, &vfs);
    vfs
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Startup reads the WAL's page headers and records: flipped bits end the WAL early or
    /// refuse startup with an error; they never panic it.
    #[test]
    fn startup_survives_or_refuses_a_damaged_wal(
        seed in 1u64..1000,
        flips in prop::collection::vec((0u64..(256 << 10), 0u8..8), 1..16),
    ) {
        let vfs = crashed_database(seed);
        for (offset, bit) in flips {
            // An offset past the end of the segment's bytes is refused; that is fine.
            let _ = vfs.flip_bit(Path::new("/data/wal/0000000000000000"), offset, bit);
        }
        if let Ok(db) = common::try_open(&vfs, common::config()) {
            drop(db);
        }
    }

    /// The control file: any flipped bit in its checksummed bytes refuses startup with an
    /// error naming the file; none panics it.
    #[test]
    fn startup_refuses_a_damaged_control_file(
        flips in prop::collection::vec((0u64..40, 0u8..8), 1..4),
    ) {
        let vfs = crashed_database(7);
        for (offset, bit) in &flips {
            vfs.flip_bit(Path::new("/data/global/quire_control"), *offset, *bit)
                .expect("the control file is 40 bytes");
        }
        // Two flips of one bit cancel out: only a net change must be refused.
        let mut net = std::collections::HashMap::new();
        for f in &flips {
            *net.entry(*f).or_insert(0u32) += 1;
        }
        let changed = net.iter().any(|((offset, _), n)| *offset < 36 && n % 2 == 1);
        match common::try_open(&vfs, common::config()) {
            Ok(_) => prop_assert!(!changed, "a damaged control file was accepted"),
            Err(e) => prop_assert!(e.to_string().contains("quire_control"), "{e}"),
        }
    }
}
