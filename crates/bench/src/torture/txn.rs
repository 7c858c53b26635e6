//! The `txn` workload: transactions on a heap table `torture (id int, value int, pad text)`.
//!
//! Each of `--clients` threads runs its own deterministic sequence of steps ([`Plan`], seeded
//! by `--seed` and the client number) on its own range of row ids, so clients never wait on
//! each other: transaction `i` inserts, updates and deletes a few rows and then commits, rolls
//! back, or (every [`PREPARE_EVERY`]-th) is PREPAREd as `t-<client>-<i>` and finished by
//! COMMIT PREPARED or ROLLBACK PREPARED a few (sometimes dozens of) transactions later. A
//! thread forces checkpoints every few milliseconds, so kills land in them and prepared
//! transactions cross redo points and get state files, and now and then a VACUUM of the whole
//! database that freezes the table and removes commit-log segments (the ids are first moved
//! on to the next segment). `run` wants a new directory (the plans start from an empty
//! table). Printed, each line once the step it names has returned (so it is durable:
//! `synchronous_commit` is on):
//!
//! ```text
//! created                                   the table exists
//! committed <client> <i>                    transaction i committed
//! rolledback <client> <i>                   transaction i rolled back
//! prepared <client> <i> <gid>               transaction i prepared
//! finished <client> <i> <gid> commit|rollback   the prepared transaction i was finished
//! checkpoint <n>                            a forced checkpoint completed
//! vacuum <n> oldest_xid=<x> segments_removed=<k>   a database-wide VACUUM completed
//! closed                                    a run with --ops ended and closed cleanly
//! ```
//!
//! `verify --acked FILE` reads those lines (the complete ones: a line cut by the kill was
//! never acknowledged), checks that each client's lines are its plan's steps in order, and
//! models the crash exactly: a client's acknowledged steps all happened; the step after them
//! may have been running at the kill, so it happened or not (a client prints before it starts
//! its next step), and nothing later started. It then checks, after recovery, every client's
//! rows (exactly; the in-flight step counted as either), the prepared transactions (every
//! acknowledged, unfinished one is listed; only an in-flight PREPARE or finish may add or
//! remove one), that they still hold their locks (a NOWAIT ACCESS EXCLUSIVE lock of the table
//! fails with 55P03 while any is prepared, and succeeds after), then finishes them as the plan
//! says, checks the rows again, closes, reopens and checks once more. It prints `recovered`
//! followed by `key=value` counts.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use quire_engine::rng::SplitMix64;
use quire_engine::txn::twophase::TwoPhase;
use quire_engine::{
    Changed, Column, Config, Database, IsolationLevel, LockMode, SqlState, TableId, Tid,
    TwophaseStateMode, Type, Value,
};

use super::{mix, open, say};

const TABLE: &str = "torture";
pub(super) const MAX_CLIENTS: u32 = 16;
/// The ids of client `c` are `c * ID_STRIDE + n`, n ≥ 1: disjoint ranges, so no client ever
/// waits for another's rows, and each client's rows depend on its own steps only.
const ID_STRIDE: i64 = 1 << 32;
/// Every PREPARE_EVERY-th transaction of a client is prepared (unless it rolls back)...
const PREPARE_EVERY: u64 = 3;
/// ... and finished before one of the next 1..=SHORT_PREPARED_FOR transactions starts, so
/// most kills find some prepared; but one in LONG_ONE_IN lasts LONG_PREPARED_FOR more
/// transactions, long enough for checkpoints to pass it and write its state file.
const SHORT_PREPARED_FOR: u64 = 6;
const LONG_ONE_IN: u64 = 4;
const LONG_PREPARED_FOR: u64 = 60;
/// Below this many rows a client mostly inserts; above, inserts and deletes balance.
const TARGET_ROWS: usize = 120;
/// Row changes per transaction at most (below 8: values are `8 * i + k`).
const MAX_OPS: u64 = 6;
/// Pads are shorter than this.
const MAX_PAD: u64 = 400;

/// The `pad` of row (`id`, `value`): derived from both, so every scanned row is checked
/// whole (a row mixing two versions is caught), and 0..MAX_PAD bytes long, so rows fill
/// pages unevenly.
fn pad(id: i64, value: i64) -> String {
    let mut rng = SplitMix64::new(mix(&[id.cast_unsigned(), value.cast_unsigned(), 0x70AD]));
    let len = rng.below(MAX_PAD);
    (0..len)
        .map(|_| char::from(b'a' + rng.below(26) as u8))
        .collect()
}

fn row(id: i64, value: i64) -> Vec<Value> {
    vec![
        Value::Int(id),
        Value::Int(value),
        Value::Text(pad(id, value)),
    ]
}

fn columns() -> Vec<Column> {
    vec![
        Column::new("id", Type::Int),
        Column::new("value", Type::Int),
        Column::new("pad", Type::Text),
    ]
}

/// A client's committed rows: id → value (the pad follows from both).
type Rows = BTreeMap<i64, i64>;

/// What a transaction does to the rows if it commits: each id's new value, or `None` for
/// deleted.
type Delta = Vec<(i64, Option<i64>)>;

fn apply(rows: &mut Rows, delta: &Delta) {
    for &(id, value) in delta {
        match value {
            Some(v) => rows.insert(id, v),
            None => rows.remove(&id),
        };
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RowOp {
    Insert { id: i64, value: i64 },
    Update { id: i64, value: i64 },
    Delete { id: i64 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum End {
    Commit,
    Rollback,
    Prepare(String),
}

/// One step of a client: a transaction, or the end of one it prepared earlier.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Txn { i: u64, ops: Vec<RowOp>, end: End },
    Finish { i: u64, gid: String, commit: bool },
}

impl Step {
    /// The line `run` prints once the step has returned.
    fn line(&self, client: u32) -> String {
        match self {
            Step::Txn {
                i,
                end: End::Commit,
                ..
            } => format!("committed {client} {i}"),
            Step::Txn {
                i,
                end: End::Rollback,
                ..
            } => format!("rolledback {client} {i}"),
            Step::Txn {
                i,
                end: End::Prepare(gid),
                ..
            } => format!("prepared {client} {i} {gid}"),
            Step::Finish { i, gid, commit } => {
                let how = if *commit { "commit" } else { "rollback" };
                format!("finished {client} {i} {gid} {how}")
            }
        }
    }
}

/// A prepared transaction not finished yet, as the plan knows it.
#[derive(Clone, Debug)]
struct Prepared {
    i: u64,
    gid: String,
    /// Finished before transaction `finish_before` starts.
    finish_before: u64,
    commit: bool,
    delta: Delta,
}

/// One client's deterministic sequence of steps (from the seed and the client number) and
/// the committed rows they leave. `run` executes it; `verify` replays it to know what each
/// acknowledged prefix of it left behind.
struct Plan {
    seed: u64,
    client: u32,
    next_txn: u64,
    next_id: i64,
    rows: Rows,
    pending: Vec<Prepared>,
}

impl Plan {
    fn new(seed: u64, client: u32) -> Self {
        Plan {
            seed,
            client,
            next_txn: 0,
            next_id: i64::from(client) * ID_STRIDE + 1,
            rows: Rows::new(),
            pending: Vec::new(),
        }
    }

    /// The next step; `self.rows` becomes the rows committed once it has run.
    fn next_step(&mut self) -> Step {
        if let Some(k) = self
            .pending
            .iter()
            .position(|p| p.finish_before <= self.next_txn)
        {
            let p = self.pending.remove(k);
            if p.commit {
                apply(&mut self.rows, &p.delta);
            }
            return Step::Finish {
                i: p.i,
                gid: p.gid,
                commit: p.commit,
            };
        }
        let i = self.next_txn;
        self.next_txn += 1;
        let mut rng = SplitMix64::new(mix(&[self.seed, u64::from(self.client), i]));
        // A prepared transaction keeps its rows locked until it is finished, by this very
        // client: changing one of them would wait for ever.
        let held: BTreeSet<i64> = self
            .pending
            .iter()
            .flat_map(|p| p.delta.iter().map(|&(id, _)| id))
            .collect();
        let mut free: Vec<i64> = self
            .rows
            .keys()
            .copied()
            .filter(|id| !held.contains(id))
            .collect();
        let growing = self.rows.len() < TARGET_ROWS;
        let mut ops = Vec::new();
        let mut delta = Delta::new();
        for k in 0..=rng.below(MAX_OPS) {
            let value = (8 * i + k).cast_signed();
            let r = rng.below(10);
            let op = if free.is_empty() || r < if growing { 5 } else { 2 } {
                let id = self.next_id;
                self.next_id += 1;
                RowOp::Insert { id, value }
            } else {
                // Removed from `free`: each row is changed once per transaction.
                let id = free.swap_remove(rng.below(free.len() as u64) as usize);
                if r < 8 {
                    RowOp::Update { id, value }
                } else {
                    RowOp::Delete { id }
                }
            };
            delta.push(match op {
                RowOp::Insert { id, value } | RowOp::Update { id, value } => (id, Some(value)),
                RowOp::Delete { id } => (id, None),
            });
            ops.push(op);
        }
        let end = if rng.next().is_multiple_of(10) {
            End::Rollback
        } else if i % PREPARE_EVERY == PREPARE_EVERY - 1 {
            let gid = format!("t-{}-{i}", self.client);
            self.pending.push(Prepared {
                i,
                gid: gid.clone(),
                finish_before: i
                    + 1
                    + rng.below(SHORT_PREPARED_FOR)
                    + if rng.next().is_multiple_of(LONG_ONE_IN) {
                        LONG_PREPARED_FOR
                    } else {
                        0
                    },
                commit: !rng.next().is_multiple_of(3),
                delta,
            });
            End::Prepare(gid)
        } else {
            apply(&mut self.rows, &delta);
            End::Commit
        };
        Step::Txn { i, ops, end }
    }
}

fn txn_config(seed: u64) -> Config {
    Config {
        // Small: pages are evicted and written back in the middle of transactions.
        shared_buffers_bytes: 48 * 8192,
        // Small: checkpoints remove the WAL segments holding prepare records, so prepared
        // transactions must come back from their state files.
        wal_segment_size_bytes: 256 * 1024,
        wal_buffers_bytes: 1024 * 1024,
        checkpoint_timeout_s: 1,
        // The background writer as often as it may: its writes race the transactions'.
        bgwriter_delay_ms: 10,
        max_prepared_transactions: 64,
        // Database-wide vacuums (see force_checkpoints) remove commit-log segments of both
        // logs as soon as nothing needs them.
        track_commit_timestamp: true,
        vacuum_freeze_min_age: 0,
        // Both ways of finding a prepared transaction's state, by seed.
        twophase_state: if seed.is_multiple_of(2) {
            TwophaseStateMode::Memory
        } else {
            TwophaseStateMode::RereadWal
        },
        ..Config::default()
    }
}

pub(super) fn run(dir: &Path, seed: u64, clients: u32, txns: u64) -> anyhow::Result<()> {
    let db = open(dir, txn_config(seed))?;
    let table = create_table(&db)?;
    say("created")?;
    let stop = AtomicBool::new(false);
    let outcome = std::thread::scope(|s| {
        let checkpoints = s.spawn(|| force_checkpoints(&db, seed, &stop));
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let (db, stop) = (&db, &stop);
                s.spawn(move || {
                    let r = client(db, table, seed, c, txns, stop);
                    if r.is_err() {
                        stop.store(true, Ordering::Release);
                    }
                    r
                })
            })
            .collect();
        let mut outcome = Ok(());
        for h in handles {
            let r = h
                .join()
                .unwrap_or_else(|_| Err(anyhow!("a client thread panicked")));
            outcome = outcome.and(r);
        }
        stop.store(true, Ordering::Release);
        let r = checkpoints
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the checkpoint thread panicked")));
        outcome.and(r)
    });
    outcome?;
    db.close()?;
    say("closed")
}

/// Creates the table. Refuses a directory that has it: the plans start from an empty table.
fn create_table(db: &Database) -> anyhow::Result<TableId> {
    let tx = db.begin(IsolationLevel::ReadCommitted)?;
    if tx.tables()?.iter().any(|t| *t.name == *TABLE) {
        bail!(
            "{} already holds a workload; use a new directory",
            db.data_dir().display()
        );
    }
    let oid = tx.create_table(TABLE, &columns())?;
    tx.commit()?;
    Ok(oid)
}

/// Forces a checkpoint every 5 to 50 ms, so kills land in the middle of checkpoints and
/// prepared transactions cross redo points (and get state files); one time in eight, a
/// VACUUM of the whole database instead, after moving the transaction ids on to the next
/// commit-log segment, so that kills land in the middle of freezing and of commit-log
/// truncations too.
fn force_checkpoints(db: &Database, seed: u64, stop: &AtomicBool) -> anyhow::Result<()> {
    let mut rng = SplitMix64::new(mix(&[seed, u64::MAX, 0]));
    let (mut checkpoints, mut vacuums) = (0u64, 0u64);
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(5 + rng.below(45)));
        if stop.load(Ordering::Acquire) {
            break;
        }
        if rng.next().is_multiple_of(8) {
            let t = db.transactions();
            let per_segment = quire_engine::clog::STATUS_LOG.per_segment();
            t.skip_xids(per_segment - t.next_xid().0 % per_segment);
            let done = db.vacuum_all().context("vacuum")?;
            vacuums += 1;
            say(&format!(
                "vacuum {vacuums} oldest_xid={} segments_removed={}",
                done.oldest_xid, done.log_segments_removed
            ))?;
        } else {
            db.checkpointer().checkpoint().context("checkpoint")?;
            checkpoints += 1;
            say(&format!("checkpoint {checkpoints}"))?;
        }
    }
    Ok(())
}

/// Runs client `c`'s plan until `txns` transactions have started or another thread failed.
fn client(
    db: &Database,
    table: TableId,
    seed: u64,
    c: u32,
    txns: u64,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let mut plan = Plan::new(seed, c);
    // Where each committed row's current version is (the plan knows values, not addresses).
    let mut tids: HashMap<i64, Tid> = HashMap::new();
    // Where a prepared transaction's rows will be if it commits.
    let mut prepared: HashMap<String, Vec<(i64, Option<Tid>)>> = HashMap::new();
    while plan.next_txn < txns && !stop.load(Ordering::Acquire) {
        let step = plan.next_step();
        run_step(db, table, &step, &mut tids, &mut prepared)
            .with_context(|| format!("client {c}: {}", step.line(c)))?;
        say(&step.line(c))?;
    }
    Ok(())
}

fn run_step(
    db: &Database,
    table: TableId,
    step: &Step,
    tids: &mut HashMap<i64, Tid>,
    prepared: &mut HashMap<String, Vec<(i64, Option<Tid>)>>,
) -> anyhow::Result<()> {
    let at = |tids: &HashMap<i64, Tid>, id: i64| {
        tids.get(&id)
            .copied()
            .ok_or_else(|| anyhow!("the plan changes row {id}, which this client never wrote"))
    };
    let moved = |changes: Vec<(i64, Option<Tid>)>, tids: &mut HashMap<i64, Tid>| {
        for (id, tid) in changes {
            match tid {
                Some(t) => tids.insert(id, t),
                None => tids.remove(&id),
            };
        }
    };
    match step {
        Step::Txn { ops, end, .. } => {
            let tx = db.begin(IsolationLevel::ReadCommitted)?;
            let mut changes = Vec::with_capacity(ops.len());
            for &op in ops {
                changes.push(match op {
                    RowOp::Insert { id, value } => (id, Some(tx.insert(table, &row(id, value))?)),
                    RowOp::Update { id, value } => {
                        let tid = at(tids, id)?;
                        match tx.update(table, tid, &row(id, value))? {
                            Changed::Done(new, _) => (id, Some(new)),
                            Changed::Skipped => {
                                bail!("the update of row {id} at {tid} was skipped")
                            }
                        }
                    }
                    RowOp::Delete { id } => {
                        let tid = at(tids, id)?;
                        match tx.delete(table, tid)? {
                            Changed::Done(..) => (id, None),
                            Changed::Skipped => {
                                bail!("the delete of row {id} at {tid} was skipped")
                            }
                        }
                    }
                });
            }
            match end {
                End::Commit => {
                    tx.commit()?;
                    moved(changes, tids);
                }
                End::Rollback => tx.rollback()?,
                End::Prepare(gid) => {
                    tx.prepare(gid)?;
                    prepared.insert(gid.clone(), changes);
                }
            }
        }
        Step::Finish { gid, commit, .. } => {
            let changes = prepared
                .remove(gid)
                .ok_or_else(|| anyhow!("{gid} was never prepared"))?;
            if *commit {
                db.commit_prepared(gid)?;
                moved(changes, tids);
            } else {
                db.rollback_prepared(gid)?;
            }
        }
    }
    Ok(())
}

/// What `run` printed before the kill.
struct Acks {
    created: bool,
    /// Each client's step lines, in order.
    steps: Vec<Vec<String>>,
    checkpoints: u64,
    vacuums: u64,
    /// Commit-log segments the acknowledged vacuums removed.
    segments_removed: u64,
}

fn read_acks(path: &Path, clients: u32) -> anyhow::Result<Acks> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the acknowledgements in {}", path.display()))?;
    // A line without its newline was being written at the kill: not acknowledged.
    let complete = text.rfind('\n').map_or("", |end| &text[..=end]);
    let mut acks = Acks {
        created: false,
        steps: vec![Vec::new(); clients as usize],
        checkpoints: 0,
        vacuums: 0,
        segments_removed: 0,
    };
    for (n, line) in complete.lines().enumerate() {
        let where_ = || format!("{}:{}", path.display(), n + 1);
        let mut words = line.split_whitespace();
        match words.next() {
            Some("created") => acks.created = true,
            Some("checkpoint") => acks.checkpoints += 1,
            Some("vacuum") => {
                acks.vacuums += 1;
                acks.segments_removed += words
                    .find_map(|w| w.strip_prefix("segments_removed="))
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| anyhow!("{}: {line:?} has no segments_removed", where_()))?;
            }
            Some("closed") => {}
            Some("committed" | "rolledback" | "prepared" | "finished") => {
                let c = words
                    .next()
                    .and_then(|w| w.parse::<u32>().ok())
                    .filter(|&c| c < clients)
                    .ok_or_else(|| {
                        anyhow!("{}: {line:?} names no client of 0..{clients}", where_())
                    })?;
                if !acks.created {
                    bail!("{}: {line:?} comes before `created`", where_());
                }
                acks.steps[c as usize].push(line.to_string());
            }
            _ => bail!("{}: unexpected line {line:?}", where_()),
        }
    }
    Ok(acks)
}

/// What one client's acknowledgements imply.
struct Expect {
    /// The rows committed after its acknowledged steps...
    before: Rows,
    /// ... and after the next step too, had it taken effect before the kill.
    after: Rows,
    /// The step after the acknowledged ones: it may have been running at the kill.
    in_flight: Step,
    /// Prepared and not finished by the acknowledged steps (the in-flight step may be the
    /// finish of one of them).
    pending: Vec<Prepared>,
    /// The transaction the in-flight step prepares, if it is a PREPARE.
    in_flight_prepare: Option<Prepared>,
    commits: u64,
    rollbacks: u64,
    prepares: u64,
    finishes: u64,
}

fn expect(seed: u64, client: u32, lines: &[String]) -> anyhow::Result<Expect> {
    let mut plan = Plan::new(seed, client);
    let (mut commits, mut rollbacks, mut prepares, mut finishes) = (0, 0, 0, 0);
    for (k, line) in lines.iter().enumerate() {
        let step = plan.next_step();
        let want = step.line(client);
        if *line != want {
            bail!(
                "client {client}'s acknowledgement {} is {line:?}, but step {k} of its plan is \
                 {want:?}: run and verify disagree on --seed or --clients",
                k + 1
            );
        }
        match step {
            Step::Txn {
                end: End::Commit, ..
            } => commits += 1,
            Step::Txn {
                end: End::Rollback, ..
            } => rollbacks += 1,
            Step::Txn {
                end: End::Prepare(_),
                ..
            } => prepares += 1,
            Step::Finish { .. } => finishes += 1,
        }
    }
    let before = plan.rows.clone();
    let pending = plan.pending.clone();
    let in_flight = plan.next_step();
    let in_flight_prepare = match &in_flight {
        Step::Txn {
            end: End::Prepare(_),
            ..
        } => plan.pending.last().cloned(),
        _ => None,
    };
    Ok(Expect {
        before,
        after: plan.rows,
        in_flight,
        pending,
        in_flight_prepare,
        commits,
        rollbacks,
        prepares,
        finishes,
    })
}

fn find_table(db: &Database) -> anyhow::Result<Option<TableId>> {
    let tx = db.begin(IsolationLevel::ReadCommitted)?;
    let found = tx.tables()?.into_iter().find(|t| *t.name == *TABLE);
    tx.commit()?;
    Ok(found.map(|t| t.oid))
}

/// Every client's rows, as a new transaction sees them, each checked whole.
fn scan_rows(db: &Database, table: TableId, clients: u32) -> anyhow::Result<Vec<Rows>> {
    let tx = db.begin(IsolationLevel::ReadCommitted)?;
    let mut out = vec![Rows::new(); clients as usize];
    for r in tx.scan(table)? {
        let (tid, row) = r?;
        let [Value::Int(id), Value::Int(value), Value::Text(p)] = row.as_slice() else {
            bail!("the row at {tid} is not (int, int, text): {row:?}");
        };
        let (id, value) = (*id, *value);
        if *p != pad(id, value) {
            bail!("row {id} (value {value}) at {tid} has a pad that belongs to another version");
        }
        let c = id / ID_STRIDE;
        if id % ID_STRIDE == 0 || !(0..i64::from(clients)).contains(&c) {
            bail!("row {id} at {tid} belongs to no client");
        }
        if out[c as usize].insert(id, value).is_some() {
            bail!("row {id} is visible twice (again at {tid})");
        }
    }
    tx.commit()?;
    Ok(out)
}

/// The first few rows where `found` differs from `expected`.
fn differences(expected: &Rows, found: &Rows) -> String {
    let show = |v: Option<&i64>| v.map_or_else(|| "no row".to_string(), |v| format!("value {v}"));
    let ids: BTreeSet<&i64> = expected.keys().chain(found.keys()).collect();
    let diffs: Vec<String> = ids
        .into_iter()
        .filter(|id| expected.get(id) != found.get(id))
        .map(|id| {
            format!(
                "row {id}: expected {}, found {}",
                show(expected.get(id)),
                show(found.get(id))
            )
        })
        .collect();
    let more = if diffs.len() > 5 { "; ..." } else { "" };
    format!(
        "{} rows differ: {}{more}",
        diffs.len(),
        diffs[..diffs.len().min(5)].join("; ")
    )
}

fn check_rows(db: &Database, table: TableId, model: &[Rows], when: &str) -> anyhow::Result<()> {
    let found =
        scan_rows(db, table, model.len() as u32).with_context(|| format!("{when}: scan"))?;
    for (c, (want, got)) in model.iter().zip(&found).enumerate() {
        if want != got {
            bail!("{when}: client {c}: {}", differences(want, got));
        }
    }
    Ok(())
}

/// A NOWAIT ACCESS EXCLUSIVE lock of the table must fail with 55P03 while a prepared
/// transaction holds its ROW EXCLUSIVE lock on it (`held`), and succeed otherwise.
fn check_lock(db: &Database, table: TableId, held: bool, when: &str) -> anyhow::Result<()> {
    let tx = db
        .begin(IsolationLevel::ReadCommitted)
        .with_context(|| format!("{when}: BEGIN"))?;
    let r = tx.lock_table(table, LockMode::AccessExclusive, true);
    tx.rollback().with_context(|| format!("{when}: ROLLBACK"))?;
    match (r, held) {
        (Err(e), true) if e.sqlstate() == SqlState::LOCK_NOT_AVAILABLE => Ok(()),
        (Err(e), _) => bail!(
            "{when}: LOCK TABLE NOWAIT failed with SQLSTATE {}: {e}",
            e.sqlstate()
        ),
        (Ok(()), true) => bail!(
            "{when}: the table could be locked ACCESS EXCLUSIVE although prepared transactions \
             hold ROW EXCLUSIVE on it: their locks were not recovered"
        ),
        (Ok(()), false) => Ok(()),
    }
}

/// Steps in flight at the kill, by kind, and how many of them had taken effect.
#[derive(Default)]
struct InFlight {
    commits: u64,
    committed: u64,
    prepares: u64,
    prepared: u64,
    finishes: u64,
    finished: u64,
}

/// The prepared-transaction state files in `dir` (not counting a checkpoint's temporary
/// ones, which have an extension).
fn count_state_files(dir: &Path) -> anyhow::Result<usize> {
    let twophase = TwoPhase::dir_of(dir);
    let entries = match std::fs::read_dir(&twophase) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e).with_context(|| format!("listing {}", twophase.display())),
    };
    let mut n = 0;
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", twophase.display()))?;
        n += usize::from(Path::new(&entry.file_name()).extension().is_none());
    }
    Ok(n)
}

pub(super) fn verify(dir: &Path, seed: u64, clients: u32, acked: &Path) -> anyhow::Result<()> {
    let acks = read_acks(acked, clients)?;
    let expects = (0..clients)
        .map(|c| expect(seed, c, &acks.steps[c as usize]))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // Prepared transactions that crossed a redo point before the kill have state files.
    let state_files = count_state_files(dir)?;
    let db = open(dir, txn_config(seed))?;
    let redo_records = db.recovery_stats().records;
    let listed: BTreeSet<String> = db
        .prepared_transactions()
        .into_iter()
        .map(|p| p.gid)
        .collect();
    let Some(table) = find_table(&db)? else {
        // Killed before the table's creation committed (or while it did).
        if acks.created {
            bail!("the table {TABLE} is gone, though its creation was acknowledged");
        }
        if !listed.is_empty() {
            bail!("prepared transactions {listed:?} exist, but the table was never created");
        }
        db.close()?;
        println!("recovered table=absent redo_records={redo_records}");
        return Ok(());
    };

    // Prepared transactions: the acknowledged, unfinished ones are all listed; one being
    // prepared or finished at the kill may be listed or not; nothing else may be.
    let mut known: BTreeMap<String, (usize, Prepared)> = BTreeMap::new();
    for (c, e) in expects.iter().enumerate() {
        let finishing = match &e.in_flight {
            Step::Finish { gid, .. } => Some(gid),
            Step::Txn { .. } => None,
        };
        for p in &e.pending {
            if finishing != Some(&p.gid) && !listed.contains(&p.gid) {
                bail!(
                    "prepared transaction {} was acknowledged as prepared, not finished, \
                     but is not listed after recovery",
                    p.gid
                );
            }
            known.insert(p.gid.clone(), (c, p.clone()));
        }
        if let Some(p) = &e.in_flight_prepare {
            known.insert(p.gid.clone(), (c, p.clone()));
        }
    }
    if let Some(gid) = listed.iter().find(|g| !known.contains_key(*g)) {
        bail!(
            "prepared transaction {gid} is listed after recovery, but its PREPARE was never \
             started or its finish was acknowledged"
        );
    }
    check_lock(&db, table, !listed.is_empty(), "after recovery")?;

    // Rows: exactly what the acknowledged steps committed, give or take the in-flight step.
    let found = scan_rows(&db, table, clients).context("after recovery: scan")?;
    let mut model = Vec::with_capacity(expects.len());
    // In flight at the kill, and of those, how many had taken effect.
    let mut in_flight = InFlight::default();
    for (c, (e, got)) in expects.iter().zip(&found).enumerate() {
        let possible: Vec<&Rows> = match &e.in_flight {
            // Whether the finish happened is known: its transaction is no longer listed.
            Step::Finish { gid, .. } => {
                in_flight.finishes += 1;
                if listed.contains(gid) {
                    vec![&e.before]
                } else {
                    in_flight.finished += 1;
                    vec![&e.after]
                }
            }
            Step::Txn {
                end: End::Commit, ..
            } => {
                in_flight.commits += 1;
                vec![&e.before, &e.after]
            }
            Step::Txn {
                end: End::Prepare(gid),
                ..
            } => {
                in_flight.prepares += 1;
                in_flight.prepared += u64::from(listed.contains(gid));
                vec![&e.before]
            }
            Step::Txn { .. } => vec![&e.before],
        };
        let Some(rows) = possible.iter().copied().find(|r| *r == got) else {
            let diffs: Vec<String> = possible.iter().map(|r| differences(r, got)).collect();
            bail!(
                "after recovery: client {c} (in flight at the kill: {}): {}",
                e.in_flight.line(c as u32),
                diffs.join("; or, had that step taken effect: ")
            );
        };
        if matches!(
            &e.in_flight,
            Step::Txn {
                end: End::Commit,
                ..
            }
        ) && *rows == e.after
        {
            in_flight.committed += 1;
        }
        model.push(rows.clone());
    }

    // Finish the prepared transactions as their plans say; the lock goes with the last.
    let (mut prepared_committed, mut prepared_rolled_back) = (0, 0);
    for (left, gid) in listed
        .iter()
        .enumerate()
        .map(|(k, g)| (listed.len() - k - 1, g))
    {
        let (c, p) = known
            .get(gid)
            .ok_or_else(|| anyhow!("{gid} is listed but unknown (checked above)"))?;
        if p.commit {
            db.commit_prepared(gid)
                .with_context(|| format!("COMMIT PREPARED {gid}"))?;
            apply(&mut model[*c], &p.delta);
            prepared_committed += 1;
        } else {
            db.rollback_prepared(gid)
                .with_context(|| format!("ROLLBACK PREPARED {gid}"))?;
            prepared_rolled_back += 1;
        }
        check_lock(&db, table, left > 0, &format!("after finishing {gid}"))?;
    }
    if let Some(p) = db.prepared_transactions().first() {
        bail!("{} is still prepared after all were finished", p.gid);
    }
    check_rows(
        &db,
        table,
        &model,
        "after finishing the prepared transactions",
    )?;
    db.close().context("closing after the checks")?;

    let db = open(dir, txn_config(seed)).context("reopening after a clean close")?;
    check_rows(&db, table, &model, "after a clean restart")?;
    if let Some(p) = db.prepared_transactions().first() {
        bail!("{} is prepared again after a clean restart", p.gid);
    }
    db.close()?;

    let sum = |f: fn(&Expect) -> u64| expects.iter().map(f).sum::<u64>();
    println!(
        "recovered committed={} rolledback={} prepared={} finished={} \
         in_flight_commits={} in_flight_committed={} in_flight_prepares={} in_flight_prepared={} \
         in_flight_finishes={} in_flight_finished={} prepared_recovered={} state_files={state_files} \
         prepared_committed={prepared_committed} prepared_rolled_back={prepared_rolled_back} \
         rows={} checkpoints={} vacuums={} segments_removed={} redo_records={redo_records}",
        sum(|e| e.commits),
        sum(|e| e.rollbacks),
        sum(|e| e.prepares),
        sum(|e| e.finishes),
        in_flight.commits,
        in_flight.committed,
        in_flight.prepares,
        in_flight.prepared,
        in_flight.finishes,
        in_flight.finished,
        listed.len(),
        model.iter().map(BTreeMap::len).sum::<usize>(),
        acks.checkpoints,
        acks.vacuums,
        acks.segments_removed,
    );
    Ok(())
}
