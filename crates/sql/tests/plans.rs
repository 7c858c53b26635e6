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
    let out = s.execute_with(sql, &stmt, &[], &|_| Ok(Vec::new()))?;
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
