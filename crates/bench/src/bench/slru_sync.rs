//! `quire-bench slru-sync` (seed 001): N transactions commit with commit timestamps on
//! (`synchronous_commit = off`, as the seed ran pgbench), then a crash, then recovery with an
//! injected fsync latency (2.5 ms by default, what the seed measured). Recovery time and fsync
//! counts for `sync = immediate` (every commit-log page written back during redo is fsynced at
//! once, as PostgreSQL's SLRUs did) against `sync = checkpointer` (redo fsyncs nothing; the
//! end-of-recovery checkpoint fsyncs each file once).
//!
//! The buffer pool is small by default (`--pool`, 1 MiB = 128 pages), like PostgreSQL's SLRU
//! caches of a few dozen pages, so that redo has to write commit-log pages back. With a large
//! pool quire's redo writes nothing at all and both modes are equally fast.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::ensure;
use quire_engine::vfs::{CrashOptions, OpKind, SimVfs, Vfs};
use quire_engine::{Config, Database, SyncMode};
use serde_json::json;

use super::{bytes_name, progress, BenchArgs, Cell, Report};

fn config(pool_bytes: u64, sync: SyncMode) -> Config {
    Config {
        shared_buffers_bytes: pool_bytes,
        sync,
        synchronous_commit: false,
        track_commit_timestamp: true,
        // No checkpoint while the transactions run: recovery redoes all of them.
        checkpoint_timeout_s: 86_400,
        max_wal_size_bytes: 1 << 40,
        ..Config::default()
    }
}

struct Recovery {
    records: u64,
    redo: Duration,
    open: Duration,
    redo_fsyncs: u64,
    redo_writes: u64,
    open_fsyncs: u64,
}

fn run_mode(
    transactions: u64,
    pool_bytes: u64,
    sync: SyncMode,
    latency: Duration,
) -> anyhow::Result<Recovery> {
    let sim = Arc::new(SimVfs::new(1));
    let vfs: Arc<dyn Vfs> = sim.clone();
    let dir = Path::new("/data");
    {
        let db = Database::open(&vfs, dir, config(pool_bytes, SyncMode::Checkpointer))?;
        let t = db.transactions();
        let bar = progress(transactions, &format!("transactions ({})", sync.name()));
        // Transactions that only commit: the commit log is what this experiment is about, and
        // heap changes would add data-page writes to redo that the seed does not measure.
        let proc = t.register()?;
        for i in 0..transactions {
            let xid = t.assign_xid(proc);
            t.commit(proc, xid, &[], &[])?;
            if i % 65_536 == 0 {
                bar.set_position(i);
            }
        }
        t.procs().unregister(proc);
        bar.finish_and_clear();
        let wal = db.wal();
        wal.flush(wal.insert_lsn())?;
        // A crash: no shutdown checkpoint; unsynced data-file writes are lost.
    }
    sim.crash(&CrashOptions::default());
    sim.set_latency(OpKind::Fsync, latency);
    let before = vfs.counters().snapshot();
    let t0 = Instant::now();
    let db = Database::open(&vfs, dir, config(pool_bytes, sync))?;
    let open = t0.elapsed();
    let total = vfs.counters().snapshot().since(&before);
    let stats = db.recovery_stats();
    drop(db);
    Ok(Recovery {
        records: stats.records,
        redo: stats.duration,
        open,
        redo_fsyncs: stats.calls.get(OpKind::Fsync),
        redo_writes: stats.calls.get(OpKind::Write),
        open_fsyncs: total.get(OpKind::Fsync),
    })
}

pub fn run_bench(args: &BenchArgs) -> anyhow::Result<Report> {
    let transactions = args
        .transactions
        .unwrap_or(if args.quick { 100_000 } else { 1_000_000 });
    let pool_bytes = args.pool.unwrap_or(1 << 20);
    let latency_ms = args.fsync_latency_ms.unwrap_or(2.5);
    ensure!(transactions > 0, "--transactions must be positive");
    let latency = Duration::from_secs_f64(latency_ms / 1000.0);
    let mut report = Report::new(
        "slru-sync",
        args.quick,
        vec![
            "transactions",
            "records_redone",
            "redo_s",
            "redo_fsyncs",
            "redo_writes",
            "open_s",
            "fsyncs_in_open",
        ],
    );
    report.params = vec![
        ("transactions", json!(transactions)),
        ("pool_bytes", json!(pool_bytes)),
        ("fsync_latency_ms", json!(latency_ms)),
        ("track_commit_timestamp", json!(true)),
        ("synchronous_commit", json!(false)),
    ];
    let mut redo_s = Vec::new();
    for sync in [SyncMode::Immediate, SyncMode::Checkpointer] {
        let r = run_mode(transactions, pool_bytes, sync, latency)?;
        redo_s.push(r.redo.as_secs_f64());
        report.rows.push((
            sync.name().to_string(),
            vec![
                Cell::Int(transactions),
                Cell::Int(r.records),
                Cell::Float(r.redo.as_secs_f64()),
                Cell::Int(r.redo_fsyncs),
                Cell::Int(r.redo_writes),
                Cell::Float(r.open.as_secs_f64()),
                Cell::Int(r.open_fsyncs),
            ],
        ));
    }
    report.ratios.push((
        "immediate_over_checkpointer_redo_s".into(),
        redo_s[0] / redo_s[1],
    ));
    report.notes.push(format!(
        "simulated file system with {latency_ms} ms per fsync; a {} pool, like PostgreSQL's small SLRU caches, so redo writes commit-log pages back; open_s adds the end-of-recovery checkpoint",
        bytes_name(pool_bytes)
    ));
    report.figure = Some(super::plot::Figure {
        title: "slru-sync (seed 001): recovery with commit timestamps".into(),
        panels: vec![
            report.bars_panel("redo time per mode", None, "redo_s"),
            report.bars_panel("fsyncs during redo per mode", None, "redo_fsyncs"),
        ],
    });
    Ok(report)
}
