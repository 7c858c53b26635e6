//! `quire-bench twophase` (seed 003): one client loops BEGIN; update one random row of a
//! table of `--rows` rows (default 1,000,000); PREPARE TRANSACTION; COMMIT PREPARED — with
//! `twophase_state = reread_wal` (PostgreSQL's behaviour: the prepare record is re-read from
//! its WAL segment, opened for the purpose) and `memory` (quire's default) — against the same
//! loop ending in a plain COMMIT.
//!
//! The modes take turns in `--rounds` rounds on one open database (the switch is flipped
//! between rounds), so that drift of a noisy machine hits them alike. By default on the real
//! file system; `--open-latency-ms` runs on the simulated one with that cost per `open()`
//! (the seed's 2.7 ms came from an anti-virus scanner hooking `open()`), and
//! `--fsync-latency-ms` adds a cost per fsync there.
//!
//! Figures: transactions per second, the latency of each step, and per COMMIT PREPARED the
//! files opened and the WAL records read. As in pgbench, the row is found through the table's
//! unique index on `id` (`test_table_pkey`); the update changes only `md5`, so it is a HOT
//! update that adds no index entry.

use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::ensure;
use quire_engine::config::TwophaseStateMode;
use quire_engine::rng::SplitMix64;
use quire_engine::vfs::{OpKind, OsVfs, SimVfs, Vfs};
use quire_engine::{
    Changed, Column, Config, Database, IndexId, IsolationLevel, TableId, Type, Value,
};
use serde_json::json;

use super::{progress, BenchArgs, Cell, Report};

fn config() -> Config {
    Config {
        shared_buffers_bytes: 256 << 20,
        max_prepared_transactions: 10,
        // Reproducible runs: no background vacuum in the timed loop.
        autovacuum: false,
        ..Config::default()
    }
}

/// How a transaction ends.
#[derive(Clone, Copy)]
enum Ending {
    Commit,
    Prepared(TwophaseStateMode),
}

impl Ending {
    fn name(self) -> String {
        match self {
            Ending::Commit => "commit".into(),
            Ending::Prepared(m) => format!("prepared/{}", m.name()),
        }
    }
}

#[derive(Default)]
struct Timings {
    transactions: u64,
    update: Duration,
    prepare: Duration,
    finish: Duration,
    finish_opens: u64,
    finish_wal_reads: u64,
    fsyncs: u64,
    total: Duration,
}

/// Creates the table, its rows and its primary-key index.
fn load(db: &Database, rows: u64) -> anyhow::Result<(TableId, IndexId)> {
    let tx = db.begin(IsolationLevel::ReadCommitted)?;
    let t = tx.create_table(
        "test_table",
        &[Column::new("id", Type::Int), Column::new("md5", Type::Text)],
    )?;
    let bar = progress(rows, "loading test_table");
    for id in 0..rows {
        tx.insert(t, &[Value::Int(id.cast_signed()), Value::Text(hex32(id))])?;
        if id % 65_536 == 0 {
            bar.set_position(id);
        }
    }
    bar.finish_and_clear();
    let pkey = tx.create_index("test_table_pkey", t, &["id"], true)?;
    tx.commit()?;
    db.checkpointer().checkpoint()?;
    Ok((t, pkey))
}

/// 32 hex digits standing for PostgreSQL's `md5(clock_timestamp()::text)`.
fn hex32(seed: u64) -> String {
    let mut r = SplitMix64::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    format!("{:016x}{:016x}", r.next(), r.next())
}

fn wal_reads(db: &Database) -> u64 {
    let s = db.wal().stats();
    s.reads_from_buffers.load(Ordering::Relaxed) + s.reads_from_files.load(Ordering::Relaxed)
}

/// The loaded database and what the client knows of it.
struct Client<'a> {
    db: &'a Database,
    vfs: &'a dyn Vfs,
    table: TableId,
    pkey: IndexId,
    rows: u64,
    rng: SplitMix64,
}

/// Runs `n` transactions ending as `ending`, adding to `t`.
fn run_round(c: &mut Client<'_>, ending: Ending, n: u64, t: &mut Timings) -> anyhow::Result<()> {
    let Client {
        db,
        vfs,
        table,
        pkey,
        rows,
        rng,
    } = c;
    let (db, vfs, table, pkey, rows) = (*db, *vfs, *table, *pkey, *rows);
    if let Ending::Prepared(mode) = ending {
        db.set_twophase_state(mode);
    }
    let opens = || vfs.counters().snapshot().get(OpKind::Open);
    let fsyncs_before = vfs.counters().snapshot().get(OpKind::Fsync);
    let started = Instant::now();
    for _ in 0..n {
        let id = (rng.next() % rows).cast_signed();
        let t0 = Instant::now();
        let tx = db.begin(IsolationLevel::ReadCommitted)?;
        let new = Value::Text(hex32(rng.next()));
        let key = [Value::Int(id)];
        let found = tx
            .index_scan(pkey, Bound::Included(&key), Bound::Included(&key))?
            .next();
        let Some(found) = found else {
            anyhow::bail!("row {id} is missing from test_table_pkey");
        };
        let (tid, _) = found?;
        let changed = tx.update_with(table, tid, |row| Some(vec![row[0].clone(), new.clone()]))?;
        if let Changed::Skipped = changed {
            anyhow::bail!("row {id} vanished");
        }
        let t1 = Instant::now();
        t.update += t1 - t0;
        match ending {
            Ending::Commit => {
                tx.commit()?;
                t.finish += t1.elapsed();
            }
            Ending::Prepared(_) => {
                let gid = format!("prep_{}", t.transactions % 4);
                tx.prepare(&gid)?;
                let t2 = Instant::now();
                t.prepare += t2 - t1;
                let (opens_before, reads_before) = (opens(), wal_reads(db));
                db.commit_prepared(&gid)?;
                t.finish += t2.elapsed();
                t.finish_opens += opens() - opens_before;
                t.finish_wal_reads += wal_reads(db) - reads_before;
            }
        }
        t.transactions += 1;
    }
    t.total += started.elapsed();
    t.fsyncs += vfs.counters().snapshot().get(OpKind::Fsync) - fsyncs_before;
    Ok(())
}

pub fn run_bench(args: &BenchArgs, dir: &Path) -> anyhow::Result<Report> {
    let rows = args
        .rows
        .unwrap_or(if args.quick { 100_000 } else { 1_000_000 });
    let transactions = args
        .transactions
        .unwrap_or(if args.quick { 3_000 } else { 30_000 });
    let rounds = args.rounds.unwrap_or(if args.quick { 3 } else { 5 });
    ensure!(
        rows > 0 && transactions > 0 && rounds > 0,
        "--rows, --transactions and --rounds must be positive"
    );
    let vfs: Arc<dyn Vfs> = match args.open_latency_ms {
        None => Arc::new(OsVfs::new()),
        Some(ms) => {
            let sim = SimVfs::new(args.seed);
            sim.set_latency(OpKind::Open, Duration::from_secs_f64(ms / 1000.0));
            if let Some(f) = args.fsync_latency_ms {
                sim.set_latency(OpKind::Fsync, Duration::from_secs_f64(f / 1000.0));
            }
            Arc::new(sim)
        }
    };
    let mut report = Report::new(
        "twophase",
        args.quick,
        vec![
            "transactions",
            "tps",
            "update_ms",
            "prepare_ms",
            "finish_ms",
            "opens_per_finish",
            "wal_reads_per_finish",
            "fsyncs_per_txn",
        ],
    );
    report.params = vec![
        ("rows", json!(rows)),
        ("transactions", json!(transactions)),
        ("rounds", json!(rounds)),
        ("clients", json!(1)),
        ("open_latency_ms", json!(args.open_latency_ms)),
        ("fsync_latency_ms", json!(args.fsync_latency_ms)),
        ("seed", json!(args.seed)),
    ];
    let db = Database::open(&vfs, dir, config())?;
    let (table, pkey) = load(&db, rows)?;
    let mut client = Client {
        db: &db,
        vfs: vfs.as_ref(),
        table,
        pkey,
        rows,
        rng: SplitMix64::new(args.seed),
    };
    let endings = [
        Ending::Commit,
        Ending::Prepared(TwophaseStateMode::RereadWal),
        Ending::Prepared(TwophaseStateMode::Memory),
    ];
    let mut timings: Vec<Timings> = endings.iter().map(|_| Timings::default()).collect();
    let per_round = transactions.div_ceil(rounds);
    let bar = progress(per_round * rounds * endings.len() as u64, "transactions");
    for _ in 0..rounds {
        for (ending, t) in endings.iter().zip(&mut timings) {
            run_round(&mut client, *ending, per_round, t)?;
            bar.inc(per_round);
        }
    }
    bar.finish_and_clear();
    db.close()?;
    for (ending, t) in endings.iter().zip(&timings) {
        let n = t.transactions as f64;
        let ms = |d: Duration| d.as_secs_f64() * 1000.0 / n;
        let prepared = |c: Cell| match ending {
            Ending::Prepared(_) => c,
            Ending::Commit => Cell::Text("-".into()),
        };
        report.rows.push((
            ending.name(),
            vec![
                Cell::Int(t.transactions),
                Cell::Float(n / t.total.as_secs_f64()),
                Cell::Float(ms(t.update)),
                prepared(Cell::Float(ms(t.prepare))),
                Cell::Float(ms(t.finish)),
                prepared(Cell::Float(t.finish_opens as f64 / n)),
                prepared(Cell::Float(t.finish_wal_reads as f64 / n)),
                Cell::Float(t.fsyncs as f64 / n),
            ],
        ));
    }
    let tps = |i: usize| timings[i].transactions as f64 / timings[i].total.as_secs_f64();
    let finish = |i: usize| timings[i].finish.as_secs_f64() / timings[i].transactions as f64;
    report
        .ratios
        .push(("memory_over_reread_wal_tps".into(), tps(2) / tps(1)));
    report.ratios.push((
        "reread_wal_over_memory_commit_prepared_ms".into(),
        finish(1) / finish(2),
    ));
    report.ratios.push((
        "prepared_memory_over_plain_commit_tps".into(),
        tps(2) / tps(0),
    ));
    report.notes.push(format!(
        "finish = COMMIT, or COMMIT PREPARED (whose file opens and WAL reads are counted); {}",
        match args.open_latency_ms {
            None => "real file system".to_string(),
            Some(ms) => format!("simulated file system with {ms} ms per open()"),
        }
    ));
    report.figure = Some(super::plot::Figure {
        title: "twophase (seed 003): COMMIT PREPARED".into(),
        panels: vec![report.bars_panel("transactions per second per ending", None, "tps")],
    });
    Ok(report)
}
