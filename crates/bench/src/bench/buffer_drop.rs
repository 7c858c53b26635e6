//! `quire-bench buffer-drop` (seed 000): R relations with K cached, dirty pages each in a pool
//! of P bytes; drop them one by one (as a thousand single-table TRUNCATEs do, and their
//! redo); time per drop with `buffer_drop = full_scan` (PostgreSQL's scan of every buffer
//! descriptor) against `indexed` (quire's per-relation index).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use quire_engine::vfs::{OpCounts, OsVfs, Vfs};
use quire_engine::{BufferDropMode, Config, Database, RelFileLocator};
use serde_json::json;

use super::{bytes_name, check_pool_fits, populate, progress, BenchArgs, Cell, Report};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

struct Measured {
    relations: u64,
    drop_total: Duration,
    examined: u64,
    dropped: u64,
    drop_calls: OpCounts,
}

pub fn run(args: &BenchArgs, dir: &Path) -> anyhow::Result<Report> {
    let relations = args
        .relations
        .unwrap_or(if args.quick { 2_000 } else { 10_000 });
    let pages = args.pages.unwrap_or(8);
    ensure!(
        relations > 0 && pages > 0,
        "--relations and --pages must be positive"
    );
    let pools: Vec<u64> = match (args.sweep, args.quick) {
        (true, false) => vec![128 * MIB, GIB, 4 * GIB, 16 * GIB],
        (true, true) => vec![128 * MIB, GIB],
        (false, _) => vec![args.pool.unwrap_or(GIB)],
    };
    let mut report = Report::new(
        "buffer-drop",
        args.quick,
        vec![
            "pool",
            "relations",
            "drop_ms_total",
            "us_per_drop",
            "descriptors_examined_per_drop",
            "buffers_dropped",
        ],
    );
    report.params = vec![
        ("relations", json!(relations)),
        ("pages", json!(pages)),
        (
            "pool_bytes",
            json!(if pools.len() == 1 {
                json!(pools[0])
            } else {
                json!(pools)
            }),
        ),
        ("sweep", json!(args.sweep)),
    ];
    // Every pool size gets the same data, or the comparison across sizes measures the data:
    // as many relations as the smallest pool holds entirely (its pages must stay cached, or
    // eviction rather than the drop decides what is dropped).
    let smallest_pool_pages = pools.iter().min().copied().unwrap_or(GIB) / 8192;
    let requested = relations;
    let relations = requested.min(smallest_pool_pages / u64::from(pages));
    ensure!(
        relations > 0,
        "the pool cannot hold even one relation of {pages} pages"
    );
    if relations < requested {
        report.notes.push(format!(
            "{relations} of the {requested} relations asked for were used, at every pool size: as many as the smallest pool ({}) holds",
            bytes_name(pools.iter().min().copied().unwrap_or(GIB))
        ));
    }
    let mut per_drop_indexed = Vec::new();
    for &pool_bytes in &pools {
        check_pool_fits(pool_bytes)?;
        let mut us = [0.0f64; 2];
        for (i, mode) in [BufferDropMode::FullScan, BufferDropMode::Indexed]
            .into_iter()
            .enumerate()
        {
            let sub = dir.join(format!("{}-{}", mode.name(), bytes_name(pool_bytes)));
            let m = measure(&sub, mode, pool_bytes, relations, pages)?;
            let _ = std::fs::remove_dir_all(&sub);
            let us_per_drop = m.drop_total.as_secs_f64() * 1e6 / m.relations as f64;
            us[i] = us_per_drop;
            report.rows.push((
                mode.name().to_string(),
                vec![
                    Cell::Text(bytes_name(pool_bytes)),
                    Cell::Int(m.relations),
                    Cell::Float(m.drop_total.as_secs_f64() * 1e3),
                    Cell::Float(us_per_drop),
                    Cell::Float(m.examined as f64 / m.relations as f64),
                    Cell::Int(m.dropped),
                ],
            ));
            report.syscalls.push((
                format!("{} {} (drops)", mode.name(), bytes_name(pool_bytes)),
                m.drop_calls,
            ));
            if mode == BufferDropMode::Indexed {
                per_drop_indexed.push((pool_bytes, us_per_drop));
            }
        }
        let key = if pools.len() == 1 {
            "full_scan_over_indexed".to_string()
        } else {
            format!("full_scan_over_indexed_at_{}", bytes_name(pool_bytes))
        };
        report.ratios.push((key, us[0] / us[1]));
    }
    if let (Some(first), Some(last)) = (per_drop_indexed.first(), per_drop_indexed.last()) {
        if pools.len() > 1 {
            report.ratios.push((
                format!(
                    "indexed_us_per_drop_{}_over_{}",
                    bytes_name(last.0),
                    bytes_name(first.0)
                ),
                last.1 / first.1,
            ));
        }
    }
    report.notes.push(
        "the time is that of the buffer drop alone (what seed 000 measures); file unlinks are not in it"
            .to_string(),
    );
    report.figure = Some(super::plot::Figure {
        title: "buffer-drop (seed 000): dropping one relation's buffers".into(),
        panels: vec![report.bars_panel(
            "µs per drop against pool size",
            Some("pool"),
            "us_per_drop",
        )],
    });
    Ok(report)
}

fn measure(
    dir: &Path,
    mode: BufferDropMode,
    pool_bytes: u64,
    relations: u64,
    pages: u32,
) -> anyhow::Result<Measured> {
    let config = Config {
        shared_buffers_bytes: pool_bytes,
        buffer_drop: mode,
        ..Config::default()
    };
    let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
    let db = Database::open(&vfs, dir, config)?;
    let (_smgr, pool) = (db.smgr(), db.buffer_pool());
    ensure!(
        relations * u64::from(pages) <= pool.nbuffers() as u64,
        "{relations} relations of {pages} pages do not fit in {} buffers",
        pool.nbuffers()
    );
    let rels: Vec<RelFileLocator> = (0..relations)
        .map(|i| RelFileLocator::new(5, 100_000 + i))
        .collect();
    populate(
        &db,
        &rels,
        pages,
        &format!("setup {} {}", mode.name(), bytes_name(pool_bytes)),
    )?;
    let cached: usize = rels.iter().map(|r| pool.cached_buffers_of(*r)).sum();
    ensure!(
        cached as u64 == relations * u64::from(pages),
        "setup left {cached} pages cached, expected {}",
        relations * u64::from(pages)
    );

    let stats = pool.stats();
    let examined_before = stats
        .drop_descriptors_examined
        .load(std::sync::atomic::Ordering::Relaxed);
    let invalidated_before = stats.invalidated.load(std::sync::atomic::Ordering::Relaxed);
    let calls_before = vfs.counters().snapshot();
    let bar = progress(
        relations,
        &format!("drop {} {}", mode.name(), bytes_name(pool_bytes)),
    );
    let mut drop_total = Duration::ZERO;
    for &rel in &rels {
        let t0 = Instant::now();
        pool.drop_relations(&[rel]);
        drop_total += t0.elapsed();
        bar.inc(1);
    }
    bar.finish_and_clear();
    let drop_calls = vfs.counters().snapshot().since(&calls_before);
    let examined = stats
        .drop_descriptors_examined
        .load(std::sync::atomic::Ordering::Relaxed)
        - examined_before;
    let dropped = stats.invalidated.load(std::sync::atomic::Ordering::Relaxed) - invalidated_before;
    ensure!(
        dropped == relations * u64::from(pages),
        "{dropped} buffers dropped, expected {}",
        relations * u64::from(pages)
    );
    pool.check_invariants()
        .map_err(anyhow::Error::msg)
        .context("buffer pool invariants after the drops")?;
    Ok(Measured {
        relations,
        drop_total,
        examined,
        dropped,
        drop_calls,
    })
}
