//! The plan cache of the extended protocol: a statement's plan is kept and used again, and
//! bound anew when a definition changes, in this session or another, committed directly or
//! through COMMIT PREPARED. And the table definitions the simple protocol's binding keeps,
//! under the same rule.

mod common;

use std::sync::Arc;

use common::query;
use quire_engine::vfs::{OsVfs, Vfs};
use quire_engine::{Config, Database, Value};
use quire_sql::{parse, OutcomeKind, Session};

fn open(dir: &std::path::Path) -> anyhow::Result<Arc<Database>> {
    let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
    let config = Config {
        shared_buffers_bytes: 4 * 1024 * 1024,
        autovacuum: false,
        max_prepared_transactions: 4,
        ..Config::default()
    };
    let db = Database::open(&vfs, dir, config)?;
    Session::bootstrap(&db)?;
    Ok(Arc::new(db))
}

fn run(s: &mut Session, sql: &str) -> anyhow::Result<()> {
    for stmt in parse(sql)? {
        s.execute(&stmt, &[], &[])?;
    }
    Ok(())
}

/// `sql` through the extended protocol's path (Describe, then Execute, both by its text):
/// the output column names and the rows.
fn prepared(s: &mut Session, sql: &str) -> anyhow::Result<(Vec<String>, Vec<Vec<Value>>)> {
    let stmt = parse(sql)?.pop().expect("one statement");
    let described = s.describe(sql, &stmt, &[])?;
    let mut collect = quire_sql::Collect::default();
    let r = s.execute_with(sql, &stmt, &[], &|_| Ok(Vec::new()), &mut collect);
    let out = collect.fill(r)?;
    let OutcomeKind::Rows { rows, .. } = out.kind else {
        anyhow::bail!("no rows from {sql}");
    };
    let names = described.columns.iter().map(|c| c.name.clone()).collect();
    Ok((names, rows))
}

fn explain(s: &mut Session, sql: &str) -> anyhow::Result<String> {
    let (_, rows) = prepared(s, sql)?;
    Ok(rows
        .iter()
        .map(|r| format!("{:?}", r[0]))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// Two sessions on a new database with a table `t (x, y)` holding (1, 2).
fn two_sessions_on_t(dir: &std::path::Path) -> anyhow::Result<(Session, Session)> {
    let db = open(dir)?;
    let mut a = Session::new(Arc::clone(&db));
    let b = Session::new(db);
    run(
        &mut a,
        "CREATE TABLE t (x int, y int); INSERT INTO t VALUES (1, 2)",
    )?;
    Ok((a, b))
}

#[test]
fn simple_statements_see_another_sessions_definitions_at_once() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (mut a, mut b) = two_sessions_on_t(dir.path())?;
    let q = "SELECT * FROM t";
    assert_eq!(query(&mut a, q).0, ["x", "y"]);
    assert_eq!(query(&mut a, q).0, ["x", "y"], "read again from the cache");

    run(&mut b, "ALTER TABLE t ADD COLUMN z int DEFAULT 5")?;
    let (names, rows) = query(&mut a, q);
    assert_eq!(names, ["x", "y", "z"]);
    assert_eq!(rows, [vec![Value::Int(1), Value::Int(2), Value::Int(5)]]);

    // A DEFAULT lives in the SQL layer's own table, not the engine's catalog.
    run(&mut b, "ALTER TABLE t ALTER COLUMN z SET DEFAULT 7")?;
    run(&mut a, "INSERT INTO t (x) VALUES (3)")?;
    assert_eq!(
        query(&mut a, "SELECT z FROM t WHERE x = 3").1,
        [vec![Value::Int(7)]]
    );
    // A primary key makes its column NOT NULL (the SQL layer's column rows).
    run(&mut b, "ALTER TABLE t ADD PRIMARY KEY (x)")?;
    let err = run(&mut a, "INSERT INTO t (y) VALUES (4)").expect_err("x is NOT NULL now");
    assert!(err.to_string().contains("null value"), "{err}");

    run(&mut b, "DROP TABLE t; CREATE TABLE t (p text)")?;
    assert_eq!(query(&mut a, q), (vec!["p".to_string()], Vec::new()));
    Ok(())
}

#[test]
fn a_table_recreated_by_another_session_is_bound_again() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (mut a, mut b) = two_sessions_on_t(dir.path())?;
    let q = "SELECT * FROM t";
    assert_eq!(prepared(&mut a, q)?.0, ["x", "y"]);
    assert_eq!(prepared(&mut a, q)?.1, [vec![Value::Int(1), Value::Int(2)]]);

    run(
        &mut b,
        "DROP TABLE t; CREATE TABLE t (p int, q int, r int); INSERT INTO t VALUES (7, 8, 9)",
    )?;
    let (names, rows) = prepared(&mut a, q)?;
    assert_eq!(names, ["p", "q", "r"]);
    assert_eq!(rows, [vec![Value::Int(7), Value::Int(8), Value::Int(9)]]);
    Ok(())
}

#[test]
fn an_index_made_in_a_block_or_prepared_transaction_changes_the_plan_when_it_counts(
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (mut a, mut b) = two_sessions_on_t(dir.path())?;
    let q = "EXPLAIN SELECT y FROM t WHERE x = 1";
    assert!(explain(&mut a, q)?.contains("Seq Scan"));

    // In the session's own block: seen at once, gone again after ROLLBACK.
    run(&mut a, "BEGIN; CREATE INDEX t_x ON t (x)")?;
    assert!(explain(&mut a, q)?.contains("Index Scan"));
    run(&mut a, "ROLLBACK")?;
    assert!(explain(&mut a, q)?.contains("Seq Scan"));

    // Another session's prepared transaction: not seen until COMMIT PREPARED.
    run(
        &mut b,
        "BEGIN; CREATE INDEX t_x ON t (x); PREPARE TRANSACTION 'ddl'",
    )?;
    assert!(explain(&mut a, q)?.contains("Seq Scan"));
    run(&mut b, "COMMIT PREPARED 'ddl'")?;
    assert!(
        explain(&mut a, q)?.contains("Index Scan"),
        "COMMIT PREPARED of a DDL must make the cached plan go"
    );
    Ok(())
}

#[test]
fn an_unchanged_catalog_keeps_the_plan() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut a = Session::new(Arc::clone(&db));
    run(&mut a, "CREATE TABLE t (x int PRIMARY KEY, y int)")?;
    let generation = db.catalog_generation();
    for i in 0..20 {
        run(&mut a, &format!("INSERT INTO t VALUES ({i}, {i})"))?;
        prepared(&mut a, "SELECT y FROM t WHERE x = 3")?;
    }
    run(
        &mut a,
        "BEGIN; UPDATE t SET y = 0; PREPARE TRANSACTION 'dml'",
    )?;
    run(&mut a, "COMMIT PREPARED 'dml'")?;
    assert_eq!(
        db.catalog_generation(),
        generation,
        "ordinary writes, commits and 2PC must not invalidate plans"
    );
    Ok(())
}

/// What a statement gave, to compare two ways of running it: the tag and rows (with the
/// column names and types), or the error's SQLSTATE and message.
fn outcome_text(r: quire_sql::Result<quire_sql::Outcome>) -> String {
    match r {
        Ok(o) => format!("{} {:?}", o.tag, o.kind),
        Err(e) => format!("{} {}", e.sqlstate(), e),
    }
}

/// Each statement through the simple protocol's query string (where its shape runs as a
/// prepared statement with its constants as parameters) and through its own parse tree (its
/// constants as written): the same outcome, twice in a row (the second from the kept plan),
/// then with other constants.
#[test]
fn statement_shapes_give_what_the_statements_give() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut shaped = Session::new(Arc::clone(&db));
    let mut written = Session::new(Arc::clone(&db));
    run(
        &mut written,
        "CREATE TABLE k (i integer PRIMARY KEY, b bigint, n numeric, s text, d date); \
         INSERT INTO k VALUES (1, 3000000000, 1.50, 'it''s', '2020-01-01'), \
           (2, -5, 2, 'b', '2021-06-30'), (3, 7, 0.25, 'a', NULL), (4, 7, 10, 'a', '2020-01-01')",
    )?;
    let pairs: &[(&str, &str)] = &[
        (
            "SELECT i, s FROM k WHERE i = 2",
            "SELECT i, s FROM k WHERE i = 3",
        ),
        (
            "SELECT i FROM k WHERE b = 3000000000",
            "SELECT i FROM k WHERE b = 7",
        ),
        (
            "SELECT i FROM k WHERE b > -2147483648 ORDER BY i",
            "SELECT i FROM k WHERE b > 0 ORDER BY i",
        ),
        (
            "SELECT i FROM k WHERE n = 1.5",
            "SELECT i FROM k WHERE n = 10",
        ),
        (
            "SELECT i FROM k WHERE n > 99999999999999999999",
            "SELECT i FROM k WHERE n < 99999999999999999999 ORDER BY i",
        ),
        (
            "SELECT i FROM k WHERE s = 'it''s'",
            "SELECT i FROM k WHERE s = 'a' ORDER BY 1",
        ),
        (
            "SELECT i FROM k WHERE d = '2020-01-01' ORDER BY i",
            "SELECT i FROM k WHERE d > '2020-06-01'",
        ),
        (
            "SELECT i, s FROM k ORDER BY 2, 1",
            "SELECT i, s FROM k ORDER BY 1 DESC",
        ),
        (
            "SELECT s, count(*) FROM k GROUP BY 1 ORDER BY 1",
            "SELECT b, count(*) FROM k GROUP BY 1 ORDER BY 1",
        ),
        (
            "SELECT i FROM k ORDER BY i LIMIT 2 OFFSET 1",
            "SELECT i FROM k ORDER BY i LIMIT 1",
        ),
        (
            "SELECT i FROM k WHERE i IN (1, 3) ORDER BY i",
            "SELECT i FROM k WHERE i IN (2, 4, 9) ORDER BY i",
        ),
        (
            "SELECT i * 2 + 1, i / 2, -i FROM k WHERE i = 3",
            "SELECT i * 3 + 0, i / 3, -i FROM k WHERE i = 4",
        ),
        (
            "SELECT 'x' || s FROM k WHERE i = 1",
            "SELECT 'y' || s FROM k WHERE i = 2",
        ),
        ("SELECT 'x', 5, 2.5", "SELECT 'y', 6, 3.5"),
        ("SELECT i / 0 FROM k WHERE i = 1", "SELECT 1 / 0"),
        (
            "SELECT i FROM k WHERE i = 'abc'",
            "SELECT i FROM k WHERE i = '2'",
        ),
        (
            "SELECT i FROM k WHERE i = 3000000000",
            "SELECT i FROM k WHERE i = 2147483647",
        ),
        (
            "SELECT i FROM missing WHERE i = 1",
            "SELECT i FROM k WHERE nothing = 1",
        ),
        (
            "UPDATE k SET b = b + 1 WHERE i = 3 RETURNING b",
            "UPDATE k SET b = b - 1 WHERE i = 3 RETURNING b",
        ),
        (
            "INSERT INTO k VALUES (10, 1, 1, 'new', '2022-02-02') RETURNING i",
            "INSERT INTO k VALUES (11, 2, 2.5, 'x', NULL) RETURNING d",
        ),
        (
            "INSERT INTO k VALUES (10, 1, 1, 'dup', NULL)",
            "INSERT INTO k (i, s) VALUES (12, 'z')",
        ),
        (
            "DELETE FROM k WHERE i = 12 RETURNING s",
            "DELETE FROM k WHERE i = 11",
        ),
        (
            "SELECT i FROM k WHERE i = 1 AND 'k'::regclass IS NOT NULL",
            "SELECT 'k'::regclass::oid > 2",
        ),
    ];
    for (first, second) in pairs {
        for sql in [first, first, second] {
            let stmt = parse(sql)?.pop().expect("one statement");
            // Writes change the table: each way runs in a block rolled back afterwards.
            run(&mut written, "BEGIN")?;
            let want = outcome_text(written.execute(&stmt, &[], &[]));
            run(&mut written, "ROLLBACK")?;
            // Outside a block first, where a new shape is learned before it runs.
            if sql.starts_with("SELECT") {
                let mut got = shaped.execute_query(sql);
                assert_eq!(outcome_text(got.remove(0)), want, "{sql} outside a block");
            }
            run(&mut shaped, "BEGIN")?;
            let mut got = shaped.execute_query(sql);
            run(&mut shaped, "ROLLBACK")?;
            assert_eq!(got.len(), 1, "{sql}");
            assert_eq!(outcome_text(got.remove(0)), want, "{sql}");
        }
    }
    Ok(())
}

/// A statement whose table does not exist fails with its own error (42P01), and works
/// once the table is made; a write through a shape outside a block commits at once, as the
/// simple protocol's writes do. (That the shape is learned again is checked inside the
/// session's module, where it can be seen.)
#[test]
fn shaped_writes_commit_at_once_and_a_missing_table_errors_as_written() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut s = Session::new(Arc::clone(&db));
    let mut other = Session::new(Arc::clone(&db));
    let missing = s.execute_query("SELECT a FROM later WHERE a = 1").remove(0);
    assert_eq!(missing.map(|_| ()).unwrap_err().sqlstate(), "42P01");
    run(&mut other, "CREATE TABLE later (a integer)")?;
    for a in 1..=3 {
        let inserted = s
            .execute_query(&format!("INSERT INTO later VALUES ({a})"))
            .remove(0)?;
        assert_eq!(inserted.tag, "INSERT 0 1");
        assert!(
            !s.awaits_sync(),
            "a simple-protocol write waits for no Sync"
        );
    }
    let (_, rows) = query(&mut other, "SELECT count(*) FROM later WHERE a >= 2");
    assert_eq!(rows, vec![vec![Value::Int(2)]]);
    let OutcomeKind::Rows { rows, .. } = s
        .execute_query("SELECT a FROM later WHERE a = 1")
        .remove(0)?
        .kind
    else {
        anyhow::bail!("no rows");
    };
    assert_eq!(rows, vec![vec![Value::Int(1)]]);
    Ok(())
}
