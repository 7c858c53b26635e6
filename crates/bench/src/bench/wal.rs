//! `quire-bench wal`: WAL insert throughput with 1, 2, 4 and 8 threads (records/s, MB/s; the
//! median of `--rounds` rounds, 5 by default, in which the thread counts take turns);
//! commits/s and fsyncs per commit with N = 1, 2, 4, 8, 16 and 32 concurrent committers
//! (insert + flush each), against one committer, whose rate is the single-fdatasync rate (the
//! ratio is the group-commit gain; the target is at most 1.25 / N + 0.02 fsyncs per commit);
//! and asynchronous commits (`synchronous_commit = off`: insert only, the background WAL
//! writer flushes every `wal_writer_delay`).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::ensure;
use quire_engine::recovery::testrm::TestRecord;
use quire_engine::types::{Lsn, Xid};
use quire_engine::vfs::{OpCounts, OpKind, OsVfs, SimVfs, Vfs};
use quire_engine::wal::{Wal, WalRecord, WalWriter, WalWriterJobs, FIRST_LSN};
use quire_engine::Config;
use serde_json::json;

use super::{progress, BenchArgs, Cell, Report};

/// Main-data bytes per record: a small heap-tuple change, as OLTP logs mostly.
const RECORD_BYTES: usize = 100;
const INSERT_THREADS: [u64; 4] = [1, 2, 4, 8];
const COMMITTERS: [u64; 6] = [1, 2, 4, 8, 16, 32];
const ASYNC_COMMITTERS: [u64; 2] = [1, 8];

/// How each thread ends its records.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// No flush (insertion throughput).
    Insert,
    /// Flush each record before the next (a synchronous commit).
    Commit,
    /// No flush; the WAL writer flushes in the background (an asynchronous commit).
    AsyncCommit,
}

struct Run {
    records: u64,
    seconds: f64,
    bytes: u64,
    fsyncs: u64,
    calls: OpCounts,
}

/// The WAL on the real disk, or, with a simulated fsync latency, on the simulated file
/// system (so the group-commit gain does not depend on how fast this machine's disk syncs).
fn open(
    dir: &Path,
    fsync_latency: Option<Duration>,
    config: &Config,
) -> anyhow::Result<(Arc<dyn Vfs>, Wal)> {
    let vfs: Arc<dyn Vfs> = match fsync_latency {
        None => Arc::new(OsVfs::new()),
        Some(latency) => {
            let sim = SimVfs::new(1);
            sim.set_latency(OpKind::Fsync, latency);
            Arc::new(sim)
        }
    };
    let wal = Wal::open_at(Arc::clone(&vfs), dir, config, FIRST_LSN, Lsn::INVALID)?;
    Ok((vfs, wal))
}

/// `threads` threads write `per_thread` records each, ended as `mode` says.
fn run(
    dir: &Path,
    threads: u64,
    per_thread: u64,
    mode: Mode,
    fsync_latency: Option<Duration>,
    config: &Config,
) -> anyhow::Result<Run> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let (vfs, wal) = open(dir, fsync_latency, config)?;
    let wal = Arc::new(wal);
    let writer = (mode == Mode::AsyncCommit)
        .then(|| {
            WalWriter::start(
                Arc::clone(&wal),
                Duration::from_millis(config.wal_writer_delay_ms),
                WalWriterJobs {
                    flush: true,
                    prepare_segments: false,
                },
            )
        })
        .transpose()?;
    let before = vfs.counters().snapshot();
    let main = vec![7u8; RECORD_BYTES];
    // Every committer is a transaction with an id: the others count for commit_siblings.
    let others = threads.saturating_sub(1) as usize;
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
                        if mode == Mode::Commit {
                            wal.flush_commit(end, &|| others)?;
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
    let seconds = t0.elapsed().as_secs_f64();
    drop(writer);
    wal.flush(wal.insert_lsn())?;
    let calls = vfs.counters().snapshot().since(&before);
    Ok(Run {
        records: threads * per_thread,
        seconds,
        bytes: wal.inserted().1,
        fsyncs: calls.get(OpKind::Fsync),
        calls,
    })
}

/// The run of median rate among a thread count's rounds.
fn median_rate(mut runs: Vec<Run>) -> Run {
    assert!(!runs.is_empty(), "at least one round");
    runs.sort_by(|a, b| (a.records as f64 / a.seconds).total_cmp(&(b.records as f64 / b.seconds)));
    let mid = runs.len() / 2;
    runs.swap_remove(mid)
}

/// The target for N committers: one fsync serves (nearly) the whole group.
fn fsync_target(committers: u64) -> f64 {
    1.25 / committers as f64 + 0.02
}

pub fn run_bench(args: &BenchArgs, dir: &Path) -> anyhow::Result<Report> {
    let inserts = args
        .transactions
        .unwrap_or(if args.quick { 200_000 } else { 2_000_000 });
    let commits = if args.quick { 640 } else { 6_400 };
    ensure!(inserts > 0, "--transactions must be positive");
    let fsync_latency = args
        .fsync_latency_ms
        .map(|ms| Duration::from_secs_f64(ms / 1000.0));
    let config = Config::default();
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
            "target_fsyncs_per_commit",
        ],
    );
    report.params = vec![
        ("records", json!(inserts)),
        ("commits", json!(commits)),
        ("record_bytes", json!(RECORD_BYTES)),
        ("wal_buffers_bytes", json!(config.wal_buffers_bytes)),
        ("fsync_latency_ms", json!(args.fsync_latency_ms)),
        ("commit_delay_us", json!(config.commit_delay_us)),
        ("wal_writer_delay_ms", json!(config.wal_writer_delay_ms)),
    ];
    // Insertion is CPU-bound, so a busy moment of a noisy machine moves it most: every
    // thread count runs in each of `rounds` rounds, the counts taking turns, and the table
    // shows the median round.
    let rounds = args.rounds.unwrap_or(if args.quick { 1 } else { 5 });
    ensure!(rounds > 0, "--rounds must be positive");
    report.params.push(("insert_rounds", json!(rounds)));
    let runs = INSERT_THREADS.len() * rounds as usize + COMMITTERS.len() + ASYNC_COMMITTERS.len();
    let bar = progress(runs as u64, "wal");
    let mut insert_runs: Vec<Vec<Run>> = INSERT_THREADS.iter().map(|_| Vec::new()).collect();
    for _ in 0..rounds {
        for (i, &t) in INSERT_THREADS.iter().enumerate() {
            insert_runs[i].push(run(
                &dir.join(format!("insert-{t}")),
                t,
                inserts / t,
                Mode::Insert,
                None,
                &config,
            )?);
            bar.inc(1);
        }
    }
    let mut insert_rates = Vec::new();
    for (&t, runs) in INSERT_THREADS.iter().zip(insert_runs) {
        let r = median_rate(runs);
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
                Cell::Text("-".into()),
            ],
        ));
    }
    let mut commit_rates = Vec::new();
    for &t in &COMMITTERS {
        let r = run(
            &dir.join(format!("commit-{t}")),
            t,
            commits / t,
            Mode::Commit,
            fsync_latency,
            &config,
        )?;
        let rate = r.records as f64 / r.seconds;
        let fsyncs = r.fsyncs as f64 / r.records as f64;
        commit_rates.push((rate, fsyncs));
        report.rows.push((
            "commit".to_string(),
            vec![
                Cell::Int(t),
                Cell::Int(r.records),
                Cell::Float(rate),
                Cell::Float(r.bytes as f64 / r.seconds / 1e6),
                Cell::Float(rate),
                Cell::Float(fsyncs),
                Cell::Float(fsync_target(t)),
            ],
        ));
        report
            .syscalls
            .push((format!("commit, {t} committers"), r.calls));
        bar.inc(1);
    }
    for &t in &ASYNC_COMMITTERS {
        let r = run(
            &dir.join(format!("async-{t}")),
            t,
            inserts / 10 / t,
            Mode::AsyncCommit,
            fsync_latency,
            &config,
        )?;
        let rate = r.records as f64 / r.seconds;
        report.rows.push((
            "async_commit".to_string(),
            vec![
                Cell::Int(t),
                Cell::Int(r.records),
                Cell::Float(rate),
                Cell::Float(r.bytes as f64 / r.seconds / 1e6),
                Cell::Float(rate),
                Cell::Float(r.fsyncs as f64 / r.records as f64),
                Cell::Text("-".into()),
            ],
        ));
        bar.inc(1);
    }
    bar.finish_and_clear();
    for (i, &t) in INSERT_THREADS.iter().enumerate().skip(1) {
        report.ratios.push((
            format!("insert_{t}_threads_over_1"),
            insert_rates[i] / insert_rates[0],
        ));
    }
    for (i, &t) in COMMITTERS.iter().enumerate().skip(1) {
        report.ratios.push((
            format!("group_commit_gain_{t}_committers"),
            commit_rates[i].0 / commit_rates[0].0,
        ));
    }
    for (i, &t) in COMMITTERS.iter().enumerate().skip(1) {
        // At most 1 when the target is met.
        report.ratios.push((
            format!("fsyncs_per_commit_{t}_committers_over_target"),
            commit_rates[i].1 / fsync_target(t),
        ));
    }
    report.notes.push(match args.fsync_latency_ms {
        None => "commits ran on this machine's disk: one committer's commits/s is its single-fdatasync rate; the gain is N committers' rate over it (target: 8 committers >= 3x)".into(),
        Some(ms) => format!("commits ran on the simulated file system with {ms} ms per fsync (inserts on the real disk); the gain is N committers' rate over one; target fsyncs per commit: 1.25 / N + 0.02"),
    });
    report.notes.push(
        format!("insert rows: the median of {rounds} rounds; insert targets: 2 threads >= 1.3x one thread, 8 threads >= 1x; async_commit: insert only, the WAL writer flushes every wal_writer_delay"),
    );
    // Synchronous commits only: asynchronous ones wait for no fsync and would flatten the
    // scale.
    let commits = |l: &str| l == "commit";
    report.figure = Some(super::plot::Figure {
        title: "wal: group commit".into(),
        panels: vec![
            report.lines_panel(
                "commits/s against committers",
                "threads",
                "commits_per_s",
                true,
                commits,
            ),
            report.lines_panel(
                "fsyncs per commit against committers",
                "threads",
                "fsyncs_per_commit",
                true,
                commits,
            ),
        ],
    });
    Ok(report)
}
