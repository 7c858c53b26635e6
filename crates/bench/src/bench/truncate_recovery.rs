//! `quire-bench truncate-recovery` (seed 000, end to end): T tables (default 10,000) each
//! with a few pages of rows; delete every row; checkpoint; VACUUM the whole database (every
//! table is truncated to zero pages, dropping its buffers); crash (no shutdown checkpoint);
//! recover — the redo replays every truncation, dropping buffers again, as the seed's standby
//! did at failover. Vacuum time and recovery time in three rows: `buffer_drop = full_scan`
//! (PostgreSQL 13 and earlier: a scan of every buffer descriptor per drop), `pg14`
//! (PostgreSQL 14-17: in recovery, a lookup per block of a small relation whose size is
//! cached; a full scan otherwise) and `indexed` (quire: the per-relation buffer index), at
//! pools of 1 GiB and 8 GiB (`--pool` for one other size).
//!
//! The data is the same at every pool size and fits the smallest pool, so the difference
//! between pool sizes is the descriptors a drop must look at, nothing else.
//!
//! The fast path takes well under a second, where a noisy machine's hiccups show: each
//! (pool, mode) runs `--rounds` times (default 3), the rounds interleaving every cell, and
//! each time is the median of its rounds.
//!
//! By default on the simulated file system, in memory, and the crash is a power loss (what
//! was not fsynced is gone): a file truncation on the development machine's disk (ext4
//! mounted with `discard`) costs from 130 µs to several ms, the same in both modes, which
//! would drown what this experiment measures. `--real-fs` runs on the disk (`--data-dir`),
//! where the crash is a process crash.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use quire_engine::vfs::{CrashOptions, OpCounts, OsVfs, SimVfs, Vfs};
use quire_engine::{
    BufferDropMode, Column, Config, Database, IsolationLevel, TableId, Type, Value,
};
use serde_json::json;

use super::{bytes_name, check_pool_fits, progress, BenchArgs, Cell, Report};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// Rows of about 100 bytes: some 70 to a page.
const ROWS_PER_PAGE: u64 = 70;
/// Tables created (and emptied) per transaction while setting up.
const TABLES_PER_TXN: u64 = 100;

fn config(pool_bytes: u64, drop: BufferDropMode) -> Config {
    Config {
        shared_buffers_bytes: pool_bytes,
        buffer_drop: drop,
        // The experiment vacuums on purpose; a background vacuum would blur what is timed.
        autovacuum: false,
        // No checkpoint but ours: the crash must leave the whole vacuum to redo.
        checkpoint_timeout_s: 86_400,
        max_wal_size_bytes: 1 << 40,
        ..Config::default()
    }
}

struct Measured {
    vacuum_calls: OpCounts,
    redo_calls: OpCounts,
    vacuum: Duration,
    pages_truncated: u64,
    vacuum_examined: u64,
    redo: Duration,
    open: Duration,
    records: u64,
    redo_examined: u64,
}

/// Creates `tables` tables of `pages` pages of rows each, then deletes every row.
fn setup(db: &Database, tables: u64, pages: u64) -> anyhow::Result<Vec<TableId>> {
    let bar = progress(tables, "creating and emptying tables");
    let mut ids = Vec::with_capacity(tables as usize);
    let pad = "p".repeat(60);
    for first in (0..tables).step_by(TABLES_PER_TXN as usize) {
        let batch = (first..tables.min(first + TABLES_PER_TXN)).collect::<Vec<_>>();
        let tx = db.begin(IsolationLevel::ReadCommitted)?;
        for i in &batch {
            let t = tx.create_table(
                &format!("t{i}"),
                &[Column::new("id", Type::Int), Column::new("pad", Type::Text)],
            )?;
            for r in 0..pages * ROWS_PER_PAGE {
                tx.insert(t, &[Value::Int(r.cast_signed()), Value::Text(pad.clone())])?;
            }
            ids.push(t);
        }
        tx.commit()?;
        let tx = db.begin(IsolationLevel::ReadCommitted)?;
        for t in &ids[first as usize..] {
            let rows: Vec<_> = tx
                .scan(*t)?
                .map(|r| r.map(|(tid, _)| tid))
                .collect::<Result<_, _>>()?;
            for tid in rows {
                tx.delete(*t, tid)?;
            }
        }
        tx.commit()?;
        bar.inc(batch.len() as u64);
    }
    bar.finish_and_clear();
    Ok(ids)
}

fn run_one(
    dir: &Path,
    real_fs: bool,
    tables: u64,
    pages: u64,
    pool_bytes: u64,
    drop_mode: BufferDropMode,
) -> anyhow::Result<Measured> {
    let sim = (!real_fs).then(|| Arc::new(SimVfs::new(1)));
    let vfs: Arc<dyn Vfs> = if let Some(s) = &sim {
        Arc::clone(s) as Arc<dyn Vfs>
    } else {
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
        }
        Arc::new(OsVfs::new())
    };
    let db = Database::open(&vfs, dir, config(pool_bytes, drop_mode))?;
    setup(&db, tables, pages)?;
    // Redo starts here: it replays the vacuum, not the setup.
    db.checkpointer().checkpoint()?;
    let examined = || {
        db.buffer_pool()
            .stats()
            .drop_descriptors_examined
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let before = examined();
    let calls_before = vfs.counters().snapshot();
    let t0 = Instant::now();
    let done = db.vacuum_all()?.tables;
    let vacuum = t0.elapsed();
    let vacuum_calls = vfs.counters().snapshot().since(&calls_before);
    let vacuum_examined = examined() - before;
    let pages_truncated: u64 = done.iter().map(|(_, s)| u64::from(s.pages_truncated)).sum();
    let not_emptied = done
        .iter()
        .filter(|(_, s)| s.pages_truncated != s.pages || s.pages == 0)
        .count();
    ensure!(
        done.len() as u64 == tables && not_emptied == 0,
        "vacuum left {not_emptied} of {} tables untruncated",
        done.len()
    );
    db.wal().flush(db.wal().insert_lsn())?;
    // A crash: no shutdown checkpoint (on the simulated file system, a power loss).
    drop(db);
    if let Some(s) = &sim {
        s.crash(&CrashOptions::default());
    }
    let t0 = Instant::now();
    let db = Database::open(&vfs, dir, config(pool_bytes, drop_mode))?;
    let open = t0.elapsed();
    let stats = db.recovery_stats();
    let redo_examined = db
        .buffer_pool()
        .stats()
        .drop_descriptors_examined
        .load(std::sync::atomic::Ordering::Relaxed);
    db.close()?;
    Ok(Measured {
        vacuum_calls,
        redo_calls: stats.calls,
        vacuum,
        pages_truncated,
        vacuum_examined,
        redo: stats.duration,
        open,
        records: stats.records,
        redo_examined,
    })
}

/// The first round's counts (the same in every round: the work is deterministic) with the
/// median of each time over the rounds.
fn median_of(mut runs: Vec<Measured>) -> Measured {
    assert!(!runs.is_empty(), "at least one round");
    let median = |runs: &[Measured], time: fn(&Measured) -> Duration| {
        let mut t: Vec<Duration> = runs.iter().map(time).collect();
        t.sort_unstable();
        t[t.len() / 2]
    };
    let vacuum = median(&runs, |m| m.vacuum);
    let redo = median(&runs, |m| m.redo);
    let open = median(&runs, |m| m.open);
    let first = runs.swap_remove(0);
    Measured {
        vacuum,
        redo,
        open,
        ..first
    }
}

pub fn run_bench(args: &BenchArgs, dir: &Path) -> anyhow::Result<Report> {
    let tables = args
        .relations
        .unwrap_or(if args.quick { 500 } else { 10_000 });
    let pages = u64::from(args.pages.unwrap_or(2));
    ensure!(
        tables > 0 && pages > 0,
        "--relations and --pages must be positive"
    );
    let pools: Vec<u64> = match (args.pool, args.quick) {
        (Some(p), _) => vec![p],
        (None, true) => vec![128 * MIB, GIB],
        (None, false) => vec![GIB, 8 * GIB],
    };
    for p in &pools {
        check_pool_fits(*p)?;
    }
    let smallest_pages = pools.iter().min().copied().unwrap_or(GIB) / 8192;
    ensure!(
        tables * pages * 2 < smallest_pages,
        "{tables} tables of {pages} pages do not fit the smallest pool ({})",
        bytes_name(pools.iter().min().copied().unwrap_or(GIB))
    );
    let mut report = Report::new(
        "truncate-recovery",
        args.quick,
        vec![
            "pool",
            "tables",
            "pages_truncated",
            "vacuum_s",
            "us_per_table_vacuum",
            "descriptors_examined_vacuum",
            "redo_records",
            "redo_s",
            "open_s",
            "descriptors_examined_redo",
        ],
    );
    report.params = vec![
        ("relations", json!(tables)),
        ("pages", json!(pages)),
        ("pool_bytes", json!(pools)),
        (
            "file_system",
            json!(if args.real_fs { "real" } else { "simulated" }),
        ),
    ];
    let rounds = args.rounds.unwrap_or(if args.quick { 1 } else { 3 });
    ensure!(rounds > 0, "--rounds must be positive");
    report.params.push(("rounds", json!(rounds)));
    let cells: Vec<(u64, BufferDropMode)> = pools
        .iter()
        .flat_map(|&p| super::DROP_BASELINES.map(|d| (p, d)))
        .collect();
    let mut runs: Vec<Vec<Measured>> = cells.iter().map(|_| Vec::new()).collect();
    for _ in 0..rounds {
        for (&(pool, drop), runs) in cells.iter().zip(&mut runs) {
            runs.push(run_one(
                &dir.join("data"),
                args.real_fs,
                tables,
                pages,
                pool,
                drop,
            )?);
        }
    }
    let mut results = Vec::new();
    for (&(pool, drop), runs) in cells.iter().zip(runs) {
        let m = median_of(runs);
        report.rows.push((
            super::drop_behaviour(drop),
            vec![
                Cell::Text(bytes_name(pool)),
                Cell::Int(tables),
                Cell::Int(m.pages_truncated),
                Cell::Float(m.vacuum.as_secs_f64()),
                Cell::Float(m.vacuum.as_secs_f64() * 1e6 / tables as f64),
                Cell::Int(m.vacuum_examined),
                Cell::Int(m.records),
                Cell::Float(m.redo.as_secs_f64()),
                Cell::Float(m.open.as_secs_f64()),
                Cell::Int(m.redo_examined),
            ],
        ));
        report.syscalls.push((
            format!("{} {} vacuum", drop.name(), bytes_name(pool)),
            m.vacuum_calls,
        ));
        report.syscalls.push((
            format!("{} {} redo", drop.name(), bytes_name(pool)),
            m.redo_calls,
        ));
        results.push((pool, drop, m));
    }
    let find = |pool: u64, drop: BufferDropMode| {
        results
            .iter()
            .find(|(p, d, _)| *p == pool && *d == drop)
            .map(|(_, _, m)| m)
    };
    for &pool in &pools {
        if let (Some(full), Some(pg14), Some(fast)) = (
            find(pool, BufferDropMode::FullScan),
            find(pool, BufferDropMode::Pg14),
            find(pool, BufferDropMode::Indexed),
        ) {
            let name = bytes_name(pool);
            report.ratios.push((
                format!("pg14_over_indexed_vacuum_at_{name}"),
                pg14.vacuum.as_secs_f64() / fast.vacuum.as_secs_f64(),
            ));
            report.ratios.push((
                format!("pg14_over_indexed_redo_at_{name}"),
                pg14.redo.as_secs_f64() / fast.redo.as_secs_f64(),
            ));
            report.ratios.push((
                format!("full_scan_over_indexed_vacuum_at_{name}"),
                full.vacuum.as_secs_f64() / fast.vacuum.as_secs_f64(),
            ));
            report.ratios.push((
                format!("full_scan_over_indexed_redo_at_{name}"),
                full.redo.as_secs_f64() / fast.redo.as_secs_f64(),
            ));
        }
    }
    if let (Some(&small), Some(&large)) = (pools.first(), pools.last()) {
        if small != large {
            if let (Some(a), Some(b)) = (
                find(small, BufferDropMode::Indexed),
                find(large, BufferDropMode::Indexed),
            ) {
                let (s, l) = (bytes_name(small), bytes_name(large));
                report.ratios.push((
                    format!("indexed_vacuum_{l}_over_{s}"),
                    b.vacuum.as_secs_f64() / a.vacuum.as_secs_f64(),
                ));
                report.ratios.push((
                    format!("indexed_redo_{l}_over_{s}"),
                    b.redo.as_secs_f64() / a.redo.as_secs_f64(),
                ));
            }
        }
    }
    report.notes.push(
        format!(
            "times are medians of {rounds} rounds; vacuum_s: VACUUM of every table (prune, free, truncate to zero pages, buffers dropped); redo_s: crash recovery of that vacuum's WAL; open_s adds the end-of-recovery checkpoint; {}",
            if args.real_fs {
                "real file system, process crash"
            } else {
                "simulated file system in memory, power loss"
            }
        ),
    );
    report.figure = Some(super::plot::Figure {
        title: "truncate-recovery (seed 000): VACUUM truncating every table, then crash recovery"
            .into(),
        panels: vec![
            report.bars_panel("VACUUM time per pool size", Some("pool"), "vacuum_s"),
            report.bars_panel("redo time per pool size", Some("pool"), "redo_s"),
        ],
    });
    Ok(report)
}
