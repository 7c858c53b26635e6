//! Isolation interleavings in the style of the Hermitage suite (github.com/ept/hermitage,
//! `postgres.md`), at READ COMMITTED and REPEATABLE READ, checking that each anomaly is
//! prevented or allowed exactly as PostgreSQL prevents or allows it:
//!
//! | name      | anomaly                              | READ COMMITTED | REPEATABLE READ |
//! |-----------|--------------------------------------|----------------|-----------------|
//! | G0        | write cycles (dirty writes)          | prevented      | prevented       |
//! | G1a       | aborted reads                        | prevented      | prevented       |
//! | G1b       | intermediate reads                   | prevented      | prevented       |
//! | G1c       | circular information flow            | prevented      | prevented       |
//! | OTV       | observed transaction vanishes        | prevented      | prevented       |
//! | PMP       | predicate-many-preceders             | allowed        | prevented       |
//! | P4        | lost update (client read-modify-write)| allowed       | prevented       |
//! | G-single  | single anti-dependency (read skew)   | allowed        | prevented       |
//! | G2-item   | item anti-dependency (write skew)    | allowed        | allowed         |
//! | G2        | anti-dependency cycles               | allowed        | allowed         |
//!
//! Each anomaly is one row of the table [`HERMITAGE`]: Hermitage's statements on the table
//! `test (id, value)` holding (1, 10) and (2, 20), the statement that decides whether the
//! anomaly happens, and what it returns at each level (allowed or prevented, and the SQLSTATE
//! where it fails); one driver, [`hermitage`], runs a row at a level and checks every
//! statement's result. A statement that blocks runs on its own thread; the driver waits until
//! the lock manager reports that session waiting before it goes on, so nothing relies on
//! timing.

mod common;

use common::{blocks_until, committed, committing, create_pairs, new_db, pair, rows_in};
use quire_engine::{
    Changed, Config, Database, IsolationLevel, IsolationLevel::*, Result, TableId, Transaction,
    Value,
};

fn setup() -> (Database, TableId) {
    let config = Config {
        deadlock_timeout_ms: 50,
        ..Config::default()
    };
    let (_vfs, db) = new_db(7, config);
    let (t, _) = committing(&db, |tx| {
        create_pairs(tx, "test", "value", [(1, 10), (2, 20)])
    });
    (db, t)
}

/// `select * from test where pred` (sorted by id).
fn select(tx: &Transaction, t: TableId, pred: impl Fn(i64, i64) -> bool) -> Vec<(i64, i64)> {
    let mut rows = rows_in(tx, t);
    rows.retain(|&(id, v)| pred(id, v));
    rows
}

/// `update test set value = new(value) where pred`: the rows the statement's snapshot sees,
/// each re-checked on its newest version (READ COMMITTED's re-evaluation). Returns how many
/// rows it updated.
fn update_where(
    tx: &Transaction,
    t: TableId,
    pred: impl Fn(i64, i64) -> bool,
    new: impl Fn(i64) -> i64,
) -> Result<usize> {
    let targets: Vec<_> = tx
        .scan(t)?
        .map(|r| r.unwrap())
        .filter(|(_, row)| {
            let (id, v) = pair(row);
            pred(id, v)
        })
        .collect();
    let mut n = 0;
    for (tid, _) in targets {
        let changed = tx.update_with(t, tid, |row| {
            let (id, v) = pair(row);
            pred(id, v).then(|| vec![Value::Int(id), Value::Int(new(v))])
        })?;
        n += usize::from(matches!(changed, Changed::Done(..)));
    }
    Ok(n)
}

/// `update test set value = v where id = id`.
fn set(tx: &Transaction, t: TableId, id: i64, v: i64) -> Result<usize> {
    update_where(tx, t, move |i, _| i == id, move |_| v)
}

/// `delete from test where pred`.
fn delete_where(tx: &Transaction, t: TableId, pred: impl Fn(i64, i64) -> bool) -> Result<usize> {
    let targets: Vec<_> = tx
        .scan(t)?
        .map(|r| r.unwrap())
        .filter(|(_, row)| {
            let (id, v) = pair(row);
            pred(id, v)
        })
        .collect();
    let mut n = 0;
    for (tid, _) in targets {
        let changed = tx.delete_if(t, tid, |row| {
            let (id, v) = pair(row);
            pred(id, v)
        })?;
        n += usize::from(matches!(changed, Changed::Done(..)));
    }
    Ok(n)
}

// ---------------------------------------------------------------------------- the table

/// A Hermitage session: T1, T2 and T3 begin (in that order, at the level under test) before
/// the first statement; `Fresh` is a new READ COMMITTED transaction for one statement,
/// committed after it (a look at the table from outside).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Who {
    T1,
    T2,
    T3,
    Fresh,
}

/// A `where` clause on (id, value).
type Pred = fn(i64, i64) -> bool;

/// One of Hermitage's statements on `test`.
#[derive(Clone, Copy)]
enum Stmt {
    /// `select * from test where ...`
    Select(Pred),
    /// `update test set value = v where id = id`, as `Set(id, v)`.
    Set(i64, i64),
    /// `update test set value = f(value) where ...`
    Update(Pred, fn(i64) -> i64),
    /// `delete from test where ...`
    Delete(Pred),
    /// `insert into test values (id, value)`
    Insert(i64, i64),
    Commit,
    Rollback,
}

/// What a statement returns.
#[derive(Clone, Copy, Debug)]
enum Res {
    /// The rows a select sees, sorted by id.
    Rows(&'static [(i64, i64)]),
    /// How many rows an update or delete changed.
    Count(usize),
    /// An insert, commit or rollback went through.
    Done,
    /// The statement failed with this SQLSTATE.
    Fails(&'static str),
}

/// A session's statement and what it must return.
type Step = (Who, Stmt, Res);

/// Whether an anomaly happens at a level, and what the deciding statement returns then.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    /// The anomaly happens.
    Allowed(Res),
    /// It does not: the deciding statement fails (`Res::Fails`), or it succeeds because it
    /// waited for the other transaction or its snapshot hides the other's change.
    Prevented(Res),
}

/// One anomaly, as Hermitage tests it.
struct Anomaly {
    /// Hermitage's name.
    name: &'static str,
    /// The statements before the deciding one.
    before: &'static [Step],
    /// The statement whose result shows whether the anomaly happens.
    decide: (Who, Stmt),
    /// When not empty, the deciding statement waits for a lock until these statements (of
    /// other sessions) end the session that holds it.
    until: &'static [Step],
    read_committed: Outcome,
    repeatable_read: Outcome,
    /// The statements after the deciding one when it succeeded ...
    then: &'static [Step],
    /// ... and when it failed (they end its transaction).
    or_else: &'static [Step],
}

fn all(_: i64, _: i64) -> bool {
    true
}

fn id<const ID: i64>(id: i64, _: i64) -> bool {
    id == ID
}

fn value<const V: i64>(_: i64, v: i64) -> bool {
    v == V
}

fn value_divisible_by<const D: i64>(_: i64, v: i64) -> bool {
    v % D == 0
}

use Outcome::{Allowed, Prevented};
use Res::{Count, Done, Fails, Rows};
use Stmt::{Commit, Delete, Insert, Rollback, Select, Set, Update};
use Who::{Fresh, T1, T2, T3};

/// The table's rows before any statement.
const START: &[(i64, i64)] = &[(1, 10), (2, 20)];

/// G-single's statements before the deciding one (shared with its write-predicate form): T1
/// reads row 1, then T2 changes both rows and commits.
const SKEWING: &[Step] = &[
    (T1, Select(id::<1>), Rows(&[(1, 10)])),
    (T2, Select(all), Rows(START)),
    (T2, Set(1, 12), Count(1)),
    (T2, Set(2, 18), Count(1)),
    (T2, Commit, Done),
];

const HERMITAGE: &[Anomaly] = &[
    Anomaly {
        name: "G0",
        before: &[(T1, Set(1, 11), Count(1))],
        decide: (T2, Set(1, 12)),
        until: &[(T1, Set(2, 21), Count(1)), (T1, Commit, Done)],
        // READ COMMITTED: T2 updates T1's version once T1 committed.
        read_committed: Prevented(Count(1)),
        repeatable_read: Prevented(Fails("40001")),
        then: &[
            (Fresh, Select(all), Rows(&[(1, 11), (2, 21)])),
            (T2, Set(2, 22), Count(1)),
            (T2, Commit, Done),
            (Fresh, Select(all), Rows(&[(1, 12), (2, 22)])),
        ],
        or_else: &[
            (Fresh, Select(all), Rows(&[(1, 11), (2, 21)])),
            // A failed transaction cannot commit.
            (T2, Commit, Fails("25P02")),
            (Fresh, Select(all), Rows(&[(1, 11), (2, 21)])),
        ],
    },
    Anomaly {
        name: "G1a",
        before: &[
            (T1, Set(1, 101), Count(1)),
            (T2, Select(all), Rows(START)),
            (T1, Rollback, Done),
        ],
        decide: (T2, Select(all)),
        until: &[],
        read_committed: Prevented(Rows(START)),
        repeatable_read: Prevented(Rows(START)),
        then: &[(T2, Commit, Done)],
        or_else: &[],
    },
    Anomaly {
        name: "G1b",
        before: &[
            (T1, Set(1, 101), Count(1)),
            (T2, Select(all), Rows(START)),
            (T1, Set(1, 11), Count(1)),
            (T1, Commit, Done),
        ],
        // Never 101.
        decide: (T2, Select(all)),
        until: &[],
        read_committed: Prevented(Rows(&[(1, 11), (2, 20)])),
        repeatable_read: Prevented(Rows(START)),
        then: &[(T2, Commit, Done)],
        or_else: &[],
    },
    Anomaly {
        name: "G1c",
        before: &[
            (T1, Set(1, 11), Count(1)),
            (T2, Set(2, 22), Count(1)),
            (T1, Select(id::<2>), Rows(&[(2, 20)])),
        ],
        decide: (T2, Select(id::<1>)),
        until: &[],
        read_committed: Prevented(Rows(&[(1, 10)])),
        repeatable_read: Prevented(Rows(&[(1, 10)])),
        then: &[
            (T1, Commit, Done),
            (T2, Commit, Done),
            (Fresh, Select(all), Rows(&[(1, 11), (2, 22)])),
        ],
        or_else: &[],
    },
    Anomaly {
        name: "OTV",
        before: &[(T1, Set(1, 11), Count(1)), (T1, Set(2, 19), Count(1))],
        decide: (T2, Set(1, 12)),
        until: &[(T1, Commit, Done)],
        read_committed: Prevented(Count(1)),
        repeatable_read: Prevented(Fails("40001")),
        then: &[
            (T3, Select(all), Rows(&[(1, 11), (2, 19)])),
            (T2, Set(2, 18), Count(1)),
            // T2 is not committed.
            (T3, Select(all), Rows(&[(1, 11), (2, 19)])),
            (T2, Commit, Done),
            (T3, Select(all), Rows(&[(1, 12), (2, 18)])),
            (T3, Commit, Done),
        ],
        or_else: &[
            (T3, Select(all), Rows(&[(1, 11), (2, 19)])),
            (T2, Rollback, Done),
            (T3, Select(all), Rows(&[(1, 11), (2, 19)])),
            (T3, Commit, Done),
        ],
    },
    Anomaly {
        name: "PMP",
        before: &[
            (T1, Select(value::<30>), Rows(&[])),
            (T2, Insert(3, 30), Done),
            (T2, Commit, Done),
        ],
        decide: (T1, Select(value_divisible_by::<3>)),
        until: &[],
        // The phantom appears.
        read_committed: Allowed(Rows(&[(3, 30)])),
        repeatable_read: Prevented(Rows(&[])),
        then: &[(T1, Commit, Done)],
        or_else: &[],
    },
    Anomaly {
        name: "PMP write predicates",
        before: &[(T1, Update(all, |v| v + 10), Count(2))],
        decide: (T2, Delete(value::<20>)),
        until: &[(T1, Commit, Done)],
        // Re-evaluated on the new version (value 30): nothing is deleted; and yet row 1 now
        // has value 20, as in PostgreSQL ("despite ostensibly having deleted rows with value
        // 20").
        read_committed: Allowed(Count(0)),
        repeatable_read: Prevented(Fails("40001")),
        then: &[
            (T2, Select(value::<20>), Rows(&[(1, 20)])),
            (T2, Commit, Done),
            (Fresh, Select(all), Rows(&[(1, 20), (2, 30)])),
        ],
        or_else: &[
            (T2, Rollback, Done),
            (Fresh, Select(all), Rows(&[(1, 20), (2, 30)])),
        ],
    },
    Anomaly {
        name: "P4",
        // Both read 10 and write 11 (a client-side increment).
        before: &[
            (T1, Select(id::<1>), Rows(&[(1, 10)])),
            (T2, Select(id::<1>), Rows(&[(1, 10)])),
            (T1, Set(1, 11), Count(1)),
        ],
        decide: (T2, Set(1, 11)),
        until: &[(T1, Commit, Done)],
        // T1's increment is lost.
        read_committed: Allowed(Count(1)),
        repeatable_read: Prevented(Fails("40001")),
        then: &[
            (T2, Commit, Done),
            (Fresh, Select(all), Rows(&[(1, 11), (2, 20)])),
        ],
        or_else: &[
            (T2, Rollback, Done),
            (Fresh, Select(all), Rows(&[(1, 11), (2, 20)])),
        ],
    },
    Anomaly {
        name: "G-single",
        before: SKEWING,
        decide: (T1, Select(id::<2>)),
        until: &[],
        // 10 + 18 is a skewed sum.
        read_committed: Allowed(Rows(&[(2, 18)])),
        repeatable_read: Prevented(Rows(&[(2, 20)])),
        then: &[(T1, Commit, Done)],
        or_else: &[],
    },
    Anomaly {
        name: "G-single predicate dependencies",
        before: &[
            (T1, Select(value_divisible_by::<5>), Rows(START)),
            (T2, Update(value::<10>, |_| 12), Count(1)),
            (T2, Commit, Done),
        ],
        decide: (T1, Select(value_divisible_by::<3>)),
        until: &[],
        read_committed: Allowed(Rows(&[(1, 12)])),
        repeatable_read: Prevented(Rows(&[])),
        then: &[(T1, Commit, Done)],
        or_else: &[],
    },
    Anomaly {
        name: "G-single write predicate",
        before: SKEWING,
        decide: (T1, Delete(value::<20>)),
        until: &[],
        // The committed value is 18.
        read_committed: Allowed(Count(0)),
        repeatable_read: Prevented(Fails("40001")),
        then: &[
            (T1, Commit, Done),
            (Fresh, Select(all), Rows(&[(1, 12), (2, 18)])),
        ],
        or_else: &[
            (T1, Rollback, Done),
            (Fresh, Select(all), Rows(&[(1, 12), (2, 18)])),
        ],
    },
    Anomaly {
        name: "G2-item",
        before: &[
            (T1, Select(all), Rows(START)),
            (T2, Select(all), Rows(START)),
            (T1, Set(1, 11), Count(1)),
            (T2, Set(2, 21), Count(1)),
            (T1, Commit, Done),
        ],
        decide: (T2, Commit),
        until: &[],
        read_committed: Allowed(Done),
        repeatable_read: Allowed(Done),
        then: &[(Fresh, Select(all), Rows(&[(1, 11), (2, 21)]))],
        or_else: &[],
    },
    Anomaly {
        name: "G2",
        before: &[
            (T1, Select(value_divisible_by::<3>), Rows(&[])),
            (T2, Select(value_divisible_by::<3>), Rows(&[])),
            (T1, Insert(3, 30), Done),
            (T2, Insert(4, 42), Done),
            (T1, Commit, Done),
        ],
        decide: (T2, Commit),
        until: &[],
        read_committed: Allowed(Done),
        repeatable_read: Allowed(Done),
        then: &[(
            Fresh,
            Select(all),
            Rows(&[(1, 10), (2, 20), (3, 30), (4, 42)]),
        )],
        or_else: &[],
    },
];

/// One test per anomaly and level, so that a failure names the case.
macro_rules! hermitage_tests {
    ($($test:ident => $name:literal,)*) => {
        $(
            mod $test {
                use super::{hermitage, IsolationLevel::*};

                #[test]
                fn read_committed() {
                    hermitage($name, ReadCommitted);
                }

                #[test]
                fn repeatable_read() {
                    hermitage($name, RepeatableRead);
                }
            }
        )*

        #[test]
        fn every_anomaly_of_the_table_is_tested() {
            let tested = [$($name),*];
            for a in HERMITAGE {
                assert!(tested.contains(&a.name), "{} has no test", a.name);
            }
        }
    };
}

hermitage_tests! {
    g0_write_cycles => "G0",
    g1a_aborted_reads => "G1a",
    g1b_intermediate_reads => "G1b",
    g1c_circular_information_flow => "G1c",
    otv_observed_transaction_vanishes => "OTV",
    pmp_predicate_many_preceders => "PMP",
    pmp_write_predicates => "PMP write predicates",
    p4_lost_update => "P4",
    g_single_read_skew => "G-single",
    g_single_with_predicate_dependencies => "G-single predicate dependencies",
    g_single_with_a_write_predicate => "G-single write predicate",
    g2_item_write_skew => "G2-item",
    g2_anti_dependency_cycles => "G2",
}

// ---------------------------------------------------------------------------- the driver

/// What a statement returned.
#[derive(Debug)]
enum Got {
    Rows(Vec<(i64, i64)>),
    Count(usize),
    Done,
}

/// Runs anomaly `name` of [`HERMITAGE`] at `level`, checking every statement's result, and
/// that the statements end every session they begin.
fn hermitage(name: &str, level: IsolationLevel) {
    let a = HERMITAGE
        .iter()
        .find(|a| a.name == name)
        .unwrap_or_else(|| panic!("no anomaly {name} in the table"));
    let outcome = match level {
        ReadCommitted => a.read_committed,
        RepeatableRead => a.repeatable_read,
    };
    let (db, t) = setup();
    let mut run = Run {
        db: &db,
        t,
        sessions: (0..a.sessions())
            .map(|_| Some(db.begin(level).unwrap()))
            .collect(),
        case: format!("{name} at {level:?}"),
    };
    run.steps("before", a.before);
    let got = run.decide(a);
    let (Allowed(want) | Prevented(want)) = outcome;
    let what = format!("{}: the deciding statement ({outcome:?})", run.case);
    check(&got, want, &what).unwrap_or_else(|e| panic!("{e}"));
    if got.is_ok() {
        run.steps("then", a.then);
    } else {
        run.steps("or_else", a.or_else);
    }
    assert!(
        run.sessions.iter().all(Option::is_none),
        "{}: a session is left open",
        run.case
    );
}

impl Anomaly {
    /// How many of T1, T2, T3 the statements use.
    fn sessions(&self) -> usize {
        let steps = [self.before, self.until, self.then, self.or_else];
        let used = steps.iter().flat_map(|s| s.iter().map(|&(who, _, _)| who));
        used.chain([self.decide.0])
            .filter(|&who| who != Fresh)
            .max()
            .map_or(0, |last| last as usize + 1)
    }
}

/// The sessions of one anomaly's run.
struct Run<'a> {
    db: &'a Database,
    t: TableId,
    /// T1, T2, T3 (as many as used); None once ended.
    sessions: Vec<Option<Transaction>>,
    case: String,
}

impl Run<'_> {
    /// Runs the deciding statement; on another thread if it waits for `until`.
    fn decide(&mut self, a: &Anomaly) -> Result<Got> {
        let (who, stmt) = a.decide;
        if a.until.is_empty() {
            return self.exec(who, stmt);
        }
        let tx = self.sessions[who as usize].take().expect("a session");
        let (db, t) = (self.db, self.t);
        let mut until = Ok(());
        let (tx, got) = blocks_until(
            db,
            tx,
            |tx| statement(tx, t, stmt),
            || {
                until = self.try_steps("until", a.until);
                if until.is_err() {
                    // Rolled back, so that the waiting statement goes on and the test fails
                    // instead of hanging.
                    self.sessions.iter_mut().for_each(|s| drop(s.take()));
                }
            },
        );
        until.unwrap_or_else(|e| panic!("{e}"));
        self.sessions[who as usize] = Some(tx);
        got
    }

    fn steps(&mut self, part: &str, steps: &[Step]) {
        self.try_steps(part, steps)
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Runs `steps`; the first unexpected result is the error.
    fn try_steps(&mut self, part: &str, steps: &[Step]) -> std::result::Result<(), String> {
        for (n, &(who, stmt, want)) in steps.iter().enumerate() {
            let got = self.exec(who, stmt);
            check(&got, want, &format!("{}: {part}[{n}] ({who:?})", self.case))?;
        }
        Ok(())
    }

    fn exec(&mut self, who: Who, stmt: Stmt) -> Result<Got> {
        if who == Fresh {
            return committing(self.db, |tx| statement(tx, self.t, stmt));
        }
        let Some(tx) = self.sessions[who as usize].take() else {
            panic!("{}: {who:?} has ended", self.case);
        };
        match stmt {
            Commit => tx.commit().map(|()| Got::Done),
            Rollback => tx.rollback().map(|()| Got::Done),
            _ => {
                let got = statement(&tx, self.t, stmt);
                self.sessions[who as usize] = Some(tx);
                got
            }
        }
    }
}

/// Runs a statement that does not end its transaction.
fn statement(tx: &Transaction, t: TableId, stmt: Stmt) -> Result<Got> {
    match stmt {
        Select(pred) => Ok(Got::Rows(select(tx, t, pred))),
        Set(id, v) => set(tx, t, id, v).map(Got::Count),
        Update(pred, new) => update_where(tx, t, pred, new).map(Got::Count),
        Delete(pred) => delete_where(tx, t, pred).map(Got::Count),
        Insert(id, v) => tx
            .insert(t, &[Value::Int(id), Value::Int(v)])
            .map(|_| Got::Done),
        Commit | Rollback => unreachable!("ending a transaction takes the session"),
    }
}

/// Did the statement return what the table says? The error names the statement.
fn check(got: &Result<Got>, want: Res, what: &str) -> std::result::Result<(), String> {
    let ok = match (got, want) {
        (Ok(Got::Rows(rows)), Rows(w)) => rows == w,
        (Ok(Got::Count(n)), Count(w)) => *n == w,
        (Ok(Got::Done), Done) => true,
        (Err(e), Fails(sqlstate)) => e.sqlstate() == sqlstate,
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{what}: expected {want:?}, got {got:?}"))
    }
}

// ---------------------------------------------------------------------------- beyond Hermitage

/// Lost updates never happen when the new value is computed from the current one: many
/// threads increment one counter, at both levels (REPEATABLE READ retrying on 40001).
#[test]
fn concurrent_increments_are_never_lost() {
    const THREADS: i64 = 4;
    const INCREMENTS: i64 = 150;
    for level in [ReadCommitted, RepeatableRead] {
        let (db, t) = setup();
        let retries = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    for _ in 0..INCREMENTS {
                        // Bounded: a retry happens only when another commit won the row.
                        for attempt in 0.. {
                            assert!(attempt < 10_000, "starved");
                            let tx = db.begin(level).unwrap();
                            // Found anew by each transaction, as a client's query would.
                            let tid = tx
                                .scan(t)
                                .unwrap()
                                .map(|r| r.unwrap())
                                .find(|(_, row)| row[0] == Value::Int(1))
                                .unwrap()
                                .0;
                            let r = tx.update_with(t, tid, |row| {
                                Some(vec![row[0].clone(), Value::Int(row[1].as_int()? + 1)])
                            });
                            match r {
                                Ok(Changed::Done(..)) => {
                                    tx.commit().unwrap();
                                    break;
                                }
                                Err(e) if e.sqlstate() == "40001" => {
                                    tx.rollback().unwrap();
                                    retries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                }
                                other => panic!("{other:?}"),
                            }
                        }
                    }
                });
            }
        });
        let final_value = select(&db.begin(ReadCommitted).unwrap(), t, |id, _| id == 1);
        assert_eq!(
            final_value,
            vec![(1, 10 + THREADS * INCREMENTS)],
            "{level:?} lost an update"
        );
        eprintln!(
            "{level:?}: {} increments, {} serialization retries",
            THREADS * INCREMENTS,
            retries.load(std::sync::atomic::Ordering::Relaxed)
        );
    }
}

/// Two transactions each waiting for a row the other changed: one is chosen as the victim
/// (SQLSTATE 40P01) and the other proceeds once the victim rolls back.
#[test]
fn a_row_lock_deadlock_has_one_victim() {
    for level in [ReadCommitted, RepeatableRead] {
        let (db, t) = setup();
        let t1 = db.begin(level).unwrap();
        let t2 = db.begin(level).unwrap();
        set(&t1, t, 1, 11).unwrap();
        set(&t2, t, 2, 22).unwrap();
        let (r1, r2) = std::thread::scope(|s| {
            let h1 = s.spawn(|| {
                let r = set(&t1, t, 2, 21);
                if r.is_err() {
                    (r, t1.rollback())
                } else {
                    (r, t1.commit())
                }
            });
            let h2 = s.spawn(|| {
                let r = set(&t2, t, 1, 12);
                if r.is_err() {
                    (r, t2.rollback())
                } else {
                    (r, t2.commit())
                }
            });
            (h1.join().unwrap(), h2.join().unwrap())
        });
        let victims = [&r1.0, &r2.0]
            .iter()
            .filter(|r| matches!(r, Err(e) if e.sqlstate() == "40P01"))
            .count();
        assert_eq!(victims, 1, "{level:?}: {r1:?} {r2:?}");
        let (winner, end) = if r1.0.is_ok() {
            (&r1, "T1")
        } else {
            (&r2, "T2")
        };
        // READ COMMITTED: the winner updated; REPEATABLE READ: the row it waited for was
        // only changed by the victim, which rolled back, so it updates too.
        assert_eq!(*winner.0.as_ref().unwrap(), 1, "{end}");
        winner.1.as_ref().unwrap();
        let rows = committed(&db, t);
        assert!(
            rows == vec![(1, 11), (2, 21)] || rows == vec![(1, 12), (2, 22)],
            "{rows:?}"
        );
    }
}

/// SELECT ... FOR UPDATE blocks a writer until the locker ends, and a locked row's update
/// by another REPEATABLE READ transaction after the locker committed its own change fails.
#[test]
fn select_for_update_blocks_writers() {
    let (db, t) = setup();
    let t1 = db.begin(ReadCommitted).unwrap();
    let t2 = db.begin(ReadCommitted).unwrap();
    let (tid, _) = t1
        .scan(t)
        .unwrap()
        .map(|r| r.unwrap())
        .find(|(_, row)| row[0] == Value::Int(1))
        .unwrap();
    assert!(matches!(t1.lock_row(t, tid).unwrap(), Changed::Done(..)));
    let (t2, r) = blocks_until(&db, t2, |t2| set(t2, t, 1, 12), || t1.commit().unwrap());
    assert_eq!(r.unwrap(), 1, "the lock ended with its holder");
    t2.commit().unwrap();
    assert_eq!(committed(&db, t), vec![(1, 12), (2, 20)]);
}

#[test]
fn a_statement_does_not_see_its_own_changes_while_scanning() {
    let (db, t) = setup();
    let tx = db.begin(ReadCommitted).unwrap();
    let mut updated = 0;
    // Halloween: updating every row while scanning must visit each row once.
    for r in tx.scan(t).unwrap() {
        let (tid, row) = r.unwrap();
        tx.update(
            t,
            tid,
            &[row[0].clone(), Value::Int(row[1].as_int().unwrap() + 1)],
        )
        .unwrap();
        updated += 1;
    }
    assert_eq!(updated, 2);
    assert_eq!(rows_in(&tx, t), vec![(1, 11), (2, 21)]);
    tx.commit().unwrap();
}

#[test]
fn isolation_level_is_kept() {
    let (db, _) = setup();
    let tx = db.begin(IsolationLevel::RepeatableRead).unwrap();
    assert_eq!(tx.isolation(), IsolationLevel::RepeatableRead);
    tx.commit().unwrap();
}
