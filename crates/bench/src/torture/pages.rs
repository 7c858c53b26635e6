//! The `pages` workload: WAL-logged page changes. `run` sets 8-byte slots of a few pages of
//! four relations through the test resource manager, change `i` writing `i + 1`, and prints
//! `acked N` each time the first N changes are durable (their WAL is flushed); `verify`
//! checks that every acknowledged change is there and that the changes that survived are
//! exactly a prefix of the sequence (nothing half-applied), and prints `recovered N`.

use std::path::Path;
use std::sync::Arc;

use anyhow::bail;

use quire_engine::recovery::{storage, testrm};
use quire_engine::rng::SplitMix64;
use quire_engine::types::BufferTag;
use quire_engine::{Config, Fork, RelFileLocator};

use super::{mix, open, say};

const RELS: u64 = 4;
const BLOCKS: u32 = 16;
const SLOTS: usize = 64;
const SLOT_BASE: usize = 64;

/// Change `i` of the sequence: (relation, block, slot).
fn op(seed: u64, i: u64) -> (u64, u32, usize) {
    let mut rng = SplitMix64::new(mix(&[seed, i]));
    (
        rng.below(RELS),
        rng.below(u64::from(BLOCKS)) as u32,
        rng.below(SLOTS as u64) as usize,
    )
}

fn rel(r: u64) -> RelFileLocator {
    RelFileLocator::new(1, 5000 + r)
}

fn pages_config() -> Config {
    Config {
        shared_buffers_bytes: 32 * 8192, // small: pages are evicted and written often
        checkpoint_timeout_s: 1,
        // The background writer as often as it may: its writes race the workload's.
        bgwriter_delay_ms: 10,
        ..Config::default()
    }
}

pub(super) fn run(dir: &Path, seed: u64, ops: u64) -> anyhow::Result<()> {
    let db = open(dir, pages_config())?;
    if db.smgr().exists(rel(0), Fork::Main)? {
        bail!(
            "{} already holds a workload; use a new directory",
            dir.display()
        );
    }
    let wal = Arc::clone(db.wal());
    let pool = db.buffer_pool();
    for r in 0..RELS {
        db.smgr().create(rel(r), Fork::Main)?;
        for _ in 0..BLOCKS {
            drop(pool.extend(rel(r), Fork::Main)?);
        }
        wal.flush(storage::log_create(&wal, rel(r), Fork::Main)?)?;
    }
    for i in 0..ops {
        let (r, block, slot) = op(seed, i);
        let buf = pool.read_buffer(BufferTag::new(rel(r), Fork::Main, block))?;
        let end = testrm::set_bytes(&wal, &buf, SLOT_BASE + slot * 8, &(i + 1).to_le_bytes())?;
        drop(buf);
        if i % 16 == 15 {
            wal.flush(end)?;
            say(&format!("acked {}", i + 1))?;
        }
    }
    db.close()?;
    Ok(())
}

pub(super) fn verify(dir: &Path, seed: u64) -> anyhow::Result<()> {
    let db = open(dir, pages_config())?;
    let pool = db.buffer_pool();
    let mut found = vec![[0u64; SLOTS]; (RELS * u64::from(BLOCKS)) as usize];
    for r in 0..RELS {
        let nblocks = db.smgr().nblocks(rel(r), Fork::Main)?.min(BLOCKS);
        for b in 0..nblocks {
            let buf = pool.read_buffer(BufferTag::new(rel(r), Fork::Main, b))?;
            let page = buf.read();
            for (s, v) in found[(r * u64::from(BLOCKS)) as usize + b as usize]
                .iter_mut()
                .enumerate()
            {
                let at = SLOT_BASE + s * 8;
                *v = u64::from_le_bytes(page[at..at + 8].try_into().expect("8 bytes"));
            }
        }
    }
    let survived = found.iter().flatten().copied().max().unwrap_or(0);
    let mut expect = vec![[0u64; SLOTS]; found.len()];
    for i in 0..survived {
        let (r, b, s) = op(seed, i);
        expect[(r * u64::from(BLOCKS)) as usize + b as usize][s] = i + 1;
    }
    if expect != found {
        bail!("recovered state is not the first {survived} changes: something was half-applied");
    }
    println!(
        "recovered {survived} (redo replayed {} records in {:.3} s)",
        db.recovery_stats().records,
        db.recovery_stats().duration.as_secs_f64()
    );
    db.close()?;
    Ok(())
}
