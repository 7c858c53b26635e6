//! `quire bench wal`: WAL insert throughput with 1, 2, 4 and 8 threads (records/s, MB/s), and
//! commits/s with N concurrent committers (insert + flush each) against one committer, whose
//! rate is the single-fdatasync rate: the ratio is the group-commit gain.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::ensure;
use quire_engine::recovery::testrm::TestRecord;
use quire_engine::types::{Lsn, Xid};
use quire_engine::vfs::{OpCounts, OpKind, OsVfs, SimVfs, Vfs};
use quire_engine::wal::{Wal, WalRecord, FIRST_LSN};
use quire_engine::Config;
use serde_json::json;

use super::{progress, BenchArgs, Cell, Report};

/// Main-data bytes per record: a small heap-tuple change, as OLTP logs mostly.
const RECORD_BYTES: usize = 100;

struct Run {
    records: u64,
    seconds: f64,
    bytes: u64,
    fsyncs: u64,
    calls: OpCounts,
}

/// The WAL on the real disk, or, with a simulated fsync latency, on the simulated file
/// system (so the group-commit gain does not depend on how fast this machine's disk syncs).
fn open(dir: &Path, fsync_latency: Option<Duration>) -> anyhow::Result<(Arc<dyn Vfs>, Wal)> {
    let vfs: Arc<dyn Vfs> = match fsync_latency {
        None => Arc::new(OsVfs::new()),
        Some(latency) => {
            let sim = SimVfs::new(1);
            sim.set_latency(OpKind::Fsync, latency);
            Arc::new(sim)
        }
    };
    let wal = Wal::open_at(
        Arc::clone(&vfs),
        dir,
        &Config::default(),
        FIRST_LSN,
        Lsn::INVALID,
    )?;
    Ok((vfs, wal))
}

/// `threads` threads insert `per_thread` records each; with `commit`, each record is flushed.
fn run(
    dir: &Path,
    threads: u64,
    per_thread: u64,
    commit: bool,
    fsync_latency: Option<Duration>,
) -> anyhow::Result<Run> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let (vfs, wal) = open(dir, fsync_latency)?;
    let before = vfs.counters().snapshot();
    let main = vec![7u8; RECORD_BYTES];
    let t0 = Instant::now();
    std::thread::scope(|s| -> anyhow::Result<()> {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (wal, main) = (&wal, &main);
                s.spawn(move || -> anyhow::Result<()> {
                    for i in 0..per_thread {
                        // Never redone (this WAL is only written): any record type does.
                        let (_, end) = wal.insert(&WalRecord::new(
                            Xid(t << 32 | i),
                            TestRecord::SetBytes,
                            &[],
                            main,
                        ))?;
                        if commit {
                            wal.flush(end)?;
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().expect("bench thread panicked")?;
        }
        Ok(())
    })?;
    wal.flush(wal.insert_lsn())?;
    let seconds = t0.elapsed().as_secs_f64();
    let calls = vfs.counters().snapshot().since(&before);
    Ok(Run {
        records: threads * per_thread,
        seconds,
        bytes: wal.inserted().1,
        fsyncs: calls.get(OpKind::Fsync),
        calls,
    })
}

pub fn run_bench(args: &BenchArgs, dir: &Path) -> anyhow::Result<Report> {
    let inserts = args
        .transactions
        .unwrap_or(if args.quick { 200_000 } else { 2_000_000 });
    let commits = if args.quick { 400 } else { 4_000 };
    ensure!(inserts > 0, "--transactions must be positive");
    let fsync_latency = args
        .fsync_latency_ms
        .map(|ms| Duration::from_secs_f64(ms / 1000.0));
    let mut report = Report::new(
        "wal",
        args.quick,
        vec![
            "threads",
            "records",
            "records_per_s",
            "mb_per_s",
            "commits_per_s",
            "fsyncs_per_commit",
        ],
    );
    report.params = vec![
        ("records", json!(inserts)),
        ("commits", json!(commits)),
        ("record_bytes", json!(RECORD_BYTES)),
        (
            "wal_buffers_bytes",
            json!(Config::default().wal_buffers_bytes),
        ),
        ("fsync_latency_ms", json!(args.fsync_latency_ms)),
    ];
    let thread_counts = [1u64, 2, 4, 8];
    let bar = progress(thread_counts.len() as u64 * 2, "wal");
    let mut insert_rates = Vec::new();
    for &t in &thread_counts {
        let r = run(
            &dir.join(format!("insert-{t}")),
            t,
            inserts / t,
            false,
            None,
        )?;
        let rate = r.records as f64 / r.seconds;
        insert_rates.push(rate);
        report.rows.push((
            "insert".to_string(),
            vec![
                Cell::Int(t),
                Cell::Int(r.records),
                Cell::Float(rate),
                Cell::Float(r.bytes as f64 / r.seconds / 1e6),
                Cell::Text("-".into()),
                Cell::Text("-".into()),
            ],
        ));
        bar.inc(1);
    }
    let mut commit_rates = Vec::new();
    for &t in &thread_counts {
        let r = run(
            &dir.join(format!("commit-{t}")),
            t,
            commits / t,
            true,
            fsync_latency,
        )?;
        let rate = r.records as f64 / r.seconds;
        commit_rates.push(rate);
        report.rows.push((
            "commit".to_string(),
            vec![
                Cell::Int(t),
                Cell::Int(r.records),
                Cell::Float(rate),
                Cell::Float(r.bytes as f64 / r.seconds / 1e6),
                Cell::Float(rate),
                Cell::Float(r.fsyncs as f64 / r.records as f64),
            ],
        ));
        report
            .syscalls
            .push((format!("commit, {t} committers"), r.calls));
        bar.inc(1);
    }
    bar.finish_and_clear();
    for (i, &t) in thread_counts.iter().enumerate().skip(1) {
        report.ratios.push((
            format!("insert_{t}_threads_over_1"),
            insert_rates[i] / insert_rates[0],
        ));
    }
    for (i, &t) in thread_counts.iter().enumerate().skip(1) {
        report.ratios.push((
            format!("group_commit_gain_{t}_committers"),
            commit_rates[i] / commit_rates[0],
        ));
    }
    report.notes.push(match args.fsync_latency_ms {
        None => "commits ran on this machine's disk: one committer's commits/s is its single-fdatasync rate; the gain is N committers' rate over it".into(),
        Some(ms) => format!("commits ran on the simulated file system with {ms} ms per fsync (inserts on the real disk); the gain is N committers' rate over one"),
    });
    Ok(report)
}
