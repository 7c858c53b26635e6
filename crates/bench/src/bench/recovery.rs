//! `quire-bench recovery`: crash recovery of a large WAL of page changes over many relations.
//! The WAL is generated once (no checkpoint during it), the engine is dropped without a
//! shutdown checkpoint (a crash), and the crashed directory is copied and recovered once per
//! mode: `relsize_cache = off` (a size probe per replayed record, as PostgreSQL 13's redo
//! does), `recovery_only` (PostgreSQL 14-17, which caches sizes during recovery) and `on`
//! (quire). Reports the redo rate and the file-layer calls per replayed record.

use std::path::Path;
use std::sync::Arc;

use anyhow::{ensure, Context};

use quire_engine::recovery::{storage, testrm};
use quire_engine::rng::SplitMix64;
use quire_engine::types::BufferTag;
use quire_engine::vfs::{OpKind, OsVfs, Vfs};
use quire_engine::{Config, Database, Fork, RelFileLocator, RelsizeCacheMode};
use serde_json::json;

use super::{bytes_name, progress, BenchArgs, Cell, Report};

fn config(pool_bytes: u64, relsize: RelsizeCacheMode) -> Config {
    Config {
        shared_buffers_bytes: pool_bytes,
        relsize_cache: relsize,
        // No checkpoint while the WAL is generated: all of it is redone.
        max_wal_size_bytes: 1 << 40,
        checkpoint_timeout_s: 86_400,
        ..Config::default()
    }
}

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    // 0700: the engine refuses a data directory others may read (PostgreSQL's rule).
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if entry.file_name() != "quire.lock" {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Writes about `wal_bytes` of WAL-logged page changes, then drops the engine uncleanly.
fn generate(
    dir: &Path,
    pool_bytes: u64,
    relations: u64,
    pages: u32,
    wal_bytes: u64,
    seed: u64,
) -> anyhow::Result<u64> {
    let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
    let db = Database::open_with_resource_managers(
        &vfs,
        dir,
        config(pool_bytes, RelsizeCacheMode::On),
        &[testrm::registration()],
    )?;
    let wal = Arc::clone(db.wal());
    let pool = db.buffer_pool();
    let rels: Vec<_> = (0..relations)
        .map(|i| RelFileLocator::new(5, 300_000 + i))
        .collect();
    for &rel in &rels {
        db.smgr().create(rel, Fork::Main)?;
        storage::log_create(&wal, rel, Fork::Main)?;
        for _ in 0..pages {
            drop(pool.extend(rel, Fork::Main)?);
        }
    }
    let start = wal.insert_lsn();
    let bar = progress(wal_bytes >> 20, "generate WAL (MiB)");
    let mut rng = SplitMix64::new(seed);
    let mut changes = 0u64;
    let payload = [0x5Au8; 100];
    while wal.insert_lsn() - start < wal_bytes {
        let x = rng.next();
        let rel = rels[(x % relations) as usize];
        let block = ((x >> 20) % u64::from(pages)) as u32;
        let slot = 64 + ((x >> 40) % 64) as usize * 100;
        let buf = pool.read_buffer(BufferTag::new(rel, Fork::Main, block))?;
        testrm::set_bytes(&wal, &buf, slot, &payload)?;
        changes += 1;
        if changes.is_multiple_of(65_536) {
            bar.set_position((wal.insert_lsn() - start) >> 20);
        }
    }
    wal.flush(wal.insert_lsn())?;
    bar.finish_and_clear();
    drop(db); // a crash: no shutdown checkpoint
    Ok(changes)
}

pub fn run_bench(args: &BenchArgs, dir: &Path) -> anyhow::Result<Report> {
    let relations = args
        .relations
        .unwrap_or(if args.quick { 200 } else { 1_000 });
    let pages = args.pages.unwrap_or(16);
    let wal_bytes: u64 = if args.quick { 64 << 20 } else { 1 << 30 };
    let pool_bytes = args.pool.unwrap_or(256 << 20);
    ensure!(
        relations > 0 && pages > 0,
        "--relations and --pages must be positive"
    );
    ensure!(
        relations * u64::from(pages) * 8192 <= pool_bytes,
        "the pool must hold every page ({relations} relations of {pages} pages)"
    );
    let gen_dir = dir.join("crashed");
    let changes = generate(&gen_dir, pool_bytes, relations, pages, wal_bytes, args.seed)
        .context("generating the WAL")?;
    let mut report = Report::new(
        "recovery",
        args.quick,
        vec![
            "records",
            "wal_mb",
            "redo_s",
            "records_per_s",
            "mb_per_s",
            "size_probes_per_record",
            "opens_per_record",
            "reads_per_record",
            "fsyncs_during_redo",
        ],
    );
    report.params = vec![
        ("relations", json!(relations)),
        ("pages", json!(pages)),
        ("wal_bytes", json!(wal_bytes)),
        ("pool_bytes", json!(pool_bytes)),
        ("changes", json!(changes)),
    ];
    let mut rates = Vec::new();
    for mode in super::RELSIZE_BASELINES {
        let sub = dir.join(format!("recover-{}", mode.name()));
        copy_dir(&gen_dir, &sub)?;
        let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
        let db = Database::open_with_resource_managers(
            &vfs,
            &sub,
            config(pool_bytes, mode),
            &[testrm::registration()],
        )?;
        let s = db.recovery_stats();
        drop(db);
        let _ = std::fs::remove_dir_all(&sub);
        let per = |k: OpKind| s.calls.get(k) as f64 / s.records.max(1) as f64;
        let secs = s.duration.as_secs_f64();
        rates.push(s.records as f64 / secs);
        report.rows.push((
            super::relsize_behaviour(mode),
            vec![
                Cell::Int(s.records),
                Cell::Float(s.bytes as f64 / 1e6),
                Cell::Float(secs),
                Cell::Float(s.records as f64 / secs),
                Cell::Float(s.bytes as f64 / 1e6 / secs),
                Cell::Float(per(OpKind::SizeProbe)),
                Cell::Float(per(OpKind::Open)),
                Cell::Float(per(OpKind::Read)),
                Cell::Int(s.calls.get(OpKind::Fsync)),
            ],
        ));
        report
            .syscalls
            .push((format!("redo, relsize_cache={}", mode.name()), s.calls));
    }
    report
        .ratios
        .push(("on_over_off_records_per_s".into(), rates[2] / rates[0]));
    report.ratios.push((
        "on_over_recovery_only_records_per_s".into(),
        rates[2] / rates[1],
    ));
    report.notes.push(format!(
        "WAL of {} generated with {changes} page changes; redo time excludes the end-of-recovery checkpoint; reads are WAL pages and first reads of data pages",
        bytes_name(wal_bytes)
    ));
    let _ = std::fs::remove_dir_all(&gen_dir);
    report.figure = Some(super::plot::Figure {
        title: "recovery: redo of a large WAL".into(),
        panels: vec![report.bars_panel("records replayed per second", None, "records_per_s")],
    });
    Ok(report)
}
