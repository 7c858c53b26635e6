//! `quire-bench relsize` (seed 002): repeated reads of cached pages across M relations. Each
//! read asks the relation's size first, as a scan or the planner does (PostgreSQL's
//! `RelationGetNumberOfBlocks`, an `lseek(SEEK_END)` each time), then reads a page through the
//! buffer pool. Measured with `relsize_cache = off` (PostgreSQL 13), `recovery_only`
//! (PostgreSQL 14-17, which caches sizes in recovery only, so probes here too) and `on`
//! (quire): size probes per read and reads/s.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::ensure;

use quire_engine::rng::SplitMix64;
use quire_engine::types::BufferTag;
use quire_engine::vfs::{OpKind, OsVfs, Vfs};
use quire_engine::{Config, Database, Fork, RelFileLocator};
use serde_json::json;

use super::{populate, progress, BenchArgs, Cell, Report};

pub fn run(args: &BenchArgs, dir: &Path) -> anyhow::Result<Report> {
    let relations = args.relations.unwrap_or(1_000);
    let pages = args.pages.unwrap_or(4);
    let reads = args
        .reads
        .unwrap_or(if args.quick { 200_000 } else { 2_000_000 });
    ensure!(
        relations > 0 && pages > 0 && reads > 0,
        "sizes must be positive"
    );
    let needed_bytes = relations * u64::from(pages) * 8192;
    let pool_bytes = args.pool.unwrap_or((needed_bytes * 2).max(128 << 20));
    ensure!(
        pool_bytes >= needed_bytes,
        "--pool {pool_bytes} cannot cache {relations} relations of {pages} pages"
    );
    let mut report = Report::new(
        "relsize",
        args.quick,
        vec![
            "reads",
            "reads_per_s",
            "ns_per_read",
            "size_probes_per_read",
            "opens_per_read",
            "disk_reads_per_read",
        ],
    );
    report.params = vec![
        ("relations", json!(relations)),
        ("pages", json!(pages)),
        ("reads", json!(reads)),
        ("pool_bytes", json!(pool_bytes)),
        ("seed", json!(args.seed)),
    ];
    let mut rates = Vec::new();
    let mut probes = Vec::new();
    for mode in super::RELSIZE_BASELINES {
        let sub = dir.join(mode.name());
        let config = Config {
            shared_buffers_bytes: pool_bytes,
            relsize_cache: mode,
            // Every relation's file stays open, as in a warmed-up PostgreSQL backend.
            max_files_per_process: relations as usize + 16,
            ..Config::default()
        };
        let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
        let db = Database::open(&vfs, &sub, config)?;
        let (smgr, pool) = (db.smgr(), db.buffer_pool());
        let rels: Vec<RelFileLocator> = (0..relations)
            .map(|i| RelFileLocator::new(5, 200_000 + i))
            .collect();
        populate(
            &db,
            &rels,
            pages,
            &format!("setup relsize_cache={}", mode.name()),
        )?;
        pool.flush_all()?;

        let mut rng = SplitMix64::new(args.seed);
        let calls_before = vfs.counters().snapshot();
        let bar = progress(reads, &format!("reads relsize_cache={}", mode.name()));
        let t0 = Instant::now();
        let mut checksum = 0u64;
        for i in 0..reads {
            let rel = rels[(rng.next() % relations) as usize];
            let nblocks = smgr.nblocks(rel, Fork::Main)?;
            let block = (rng.next() % u64::from(nblocks)) as u32;
            let buf = pool.read_buffer(BufferTag::new(rel, Fork::Main, block))?;
            checksum = checksum.wrapping_add(u64::from(buf.read()[14]));
            if i % 65_536 == 0 {
                bar.set_position(i);
            }
        }
        let elapsed = t0.elapsed();
        bar.finish_and_clear();
        let calls = vfs.counters().snapshot().since(&calls_before);
        std::hint::black_box(checksum);
        let per_read = |k: OpKind| calls.get(k) as f64 / reads as f64;
        let rate = reads as f64 / elapsed.as_secs_f64();
        rates.push(rate);
        probes.push(per_read(OpKind::SizeProbe));
        report.rows.push((
            super::relsize_behaviour(mode),
            vec![
                Cell::Int(reads),
                Cell::Float(rate),
                Cell::Float(elapsed.as_secs_f64() * 1e9 / reads as f64),
                Cell::Float(per_read(OpKind::SizeProbe)),
                Cell::Float(per_read(OpKind::Open)),
                Cell::Float(per_read(OpKind::Read)),
            ],
        ));
        report
            .syscalls
            .push((format!("relsize_cache={}", mode.name()), calls));
        drop(db);
        let _ = std::fs::remove_dir_all(&sub);
    }
    report
        .ratios
        .push(("on_over_off_reads_per_s".to_string(), rates[2] / rates[0]));
    report.ratios.push((
        "on_over_recovery_only_reads_per_s".to_string(),
        rates[2] / rates[1],
    ));
    report.notes.push(format!(
        "size probes per read: off {:.3}, recovery_only {:.3} (normal running: PostgreSQL 14-17 caches sizes in recovery only), on {:.3} (target 0 with the cache on, after the first open)",
        probes[0], probes[1], probes[2]
    ));
    report.figure = Some(super::plot::Figure {
        title: "relsize (seed 002): a size probe per page read".into(),
        panels: vec![report.bars_panel("page reads per second", None, "reads_per_s")],
    });
    Ok(report)
}
