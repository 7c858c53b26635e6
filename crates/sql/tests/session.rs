//! The SQL layer without the network: a `Session` on a temporary database, statements in,
//! outcomes and SQLSTATEs out.

use std::sync::Arc;

use quire_engine::vfs::{OsVfs, Vfs};
use quire_engine::{Config, Database, Value};
use quire_sql::{parse, OutcomeKind, Session, SqlType, TxStatus};

fn open(dir: &std::path::Path) -> anyhow::Result<Arc<Database>> {
    let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
    let config = Config {
        shared_buffers_bytes: 4 * 1024 * 1024,
        autovacuum: false,
        ..Config::default()
    };
    let db = Database::open(&vfs, dir, config)?;
    Session::bootstrap(&db)?;
    Ok(Arc::new(db))
}

/// Runs every statement of `sql`; the first error's SQLSTATE, or the last outcome's tag.
fn run(s: &mut Session, sql: &str) -> Result<String, &'static str> {
    let mut tag = String::new();
    for stmt in parse(sql).map_err(|e| e.sqlstate())? {
        tag = s.execute(&stmt, &[], &[]).map_err(|e| e.sqlstate())?.tag;
    }
    Ok(tag)
}

fn rows(s: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    let stmt = parse(sql).unwrap().pop().unwrap();
    match s.execute(&stmt, &[], &[]).unwrap().kind {
        OutcomeKind::Rows { rows, .. } => rows,
        other => panic!("no rows: {other:?}"),
    }
}

const SETUP: &str = "CREATE TABLE t (id integer PRIMARY KEY, s smallint, name varchar(3) NOT NULL, f real, at timestamp); \
                     INSERT INTO t VALUES (1, 1, 'a', 1.5, '2020-01-01 00:00:00'), (2, NULL, 'b', NULL, NULL)";

/// Each statement and the SQLSTATE it must fail with, the session staying usable.
const ERRORS: &[(&str, &str)] = &[
    ("SELEC 1", "42601"),
    ("SELECT FROM WHERE", "42601"),
    ("SELECT * FROM nowhere", "42P01"),
    ("SELECT nope FROM t", "42703"),
    ("INSERT INTO t (nope) VALUES (1)", "42703"),
    ("CREATE TABLE t (a int)", "42P07"),
    ("INSERT INTO t VALUES (1, 1, 'x', 0, NULL)", "23505"),
    ("INSERT INTO t (id) VALUES (3)", "23502"),
    ("UPDATE t SET name = NULL WHERE id = 1", "23502"),
    ("INSERT INTO t (id, name) VALUES ('x1', 'c')", "22P02"),
    (
        "INSERT INTO t (id, name, at) VALUES (3, 'c', 'yesterday-ish')",
        "22P02",
    ),
    ("INSERT INTO t (id, name) VALUES (true, 'c')", "42804"),
    ("UPDATE t SET s = 'abc' WHERE id = 1", "22P02"),
    (
        "INSERT INTO t (id, s, name) VALUES (3, 40000, 'c')",
        "22003",
    ),
    ("INSERT INTO t (id, name) VALUES (3, 'long')", "22001"),
    ("UPDATE t SET id = id / 0", "22012"),
    ("SELECT * FROM t WHERE name = 1", "42883"),
    ("CREATE INDEX i ON t (name)", "0A000"),
    ("SELECT id FROM t GROUP BY id", "0A000"),
    ("SELECT a.id FROM t a JOIN t b ON a.id = b.id", "0A000"),
    ("SELECT * FROM t WHERE id = 1 OR id = 2", "0A000"),
    ("SAVEPOINT x", "0A000"),
    ("CREATE TABLE quire_mine (a int)", "42501"),
    ("DROP TABLE quire_sql_columns", "42501"),
    ("DELETE FROM quire_sql_columns", "42501"),
    (
        "CREATE TABLE u (a int PRIMARY KEY, b int PRIMARY KEY)",
        "42P16",
    ),
    ("DROP TABLE nowhere", "42P01"),
];

#[test]
fn errors_carry_their_sqlstate_and_leave_the_session_usable() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    run(&mut s, SETUP).unwrap();
    for (sql, code) in ERRORS {
        assert_eq!(run(&mut s, sql), Err(*code), "{sql}");
        assert_eq!(s.status(), TxStatus::Idle, "{sql}");
    }
    // Nothing the failed statements did remains.
    assert_eq!(rows(&mut s, "SELECT count(*) FROM t"), [[Value::Int(2)]]);
    Ok(())
}

#[test]
fn an_error_in_a_block_aborts_it_until_rollback() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    run(&mut s, SETUP).unwrap();
    run(&mut s, "BEGIN; INSERT INTO t (id, name) VALUES (3, 'c')").unwrap();
    assert_eq!(s.status(), TxStatus::InBlock);
    assert_eq!(run(&mut s, "SELECT * FROM nowhere"), Err("42P01"));
    assert_eq!(s.status(), TxStatus::Failed);
    assert_eq!(run(&mut s, "SELECT 1"), Err("25P02"));
    assert_eq!(run(&mut s, "BEGIN"), Err("25P02"));
    assert_eq!(run(&mut s, "COMMIT"), Ok("ROLLBACK".into()));
    assert_eq!(s.status(), TxStatus::Idle);
    assert_eq!(rows(&mut s, "SELECT count(*) FROM t"), [[Value::Int(2)]]);
    Ok(())
}

#[test]
fn select_filters_orders_limits_and_uses_declared_types() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    run(&mut s, SETUP).unwrap();
    run(
        &mut s,
        "INSERT INTO t (id, name, s) VALUES (3, 'c', 7), (4, 'd', -2)",
    )
    .unwrap();
    let ids = |r: Vec<Vec<Value>>| {
        r.into_iter()
            .map(|r| r[0].as_int().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(rows(
            &mut s,
            "SELECT id FROM t WHERE id > 1 AND id <= 3 ORDER BY id DESC"
        )),
        [3, 2]
    );
    assert_eq!(ids(rows(&mut s, "SELECT id FROM t WHERE s IS NULL")), [2]);
    assert_eq!(
        ids(rows(&mut s, "SELECT id FROM t ORDER BY s LIMIT 2")),
        [4, 1]
    );
    assert_eq!(
        ids(rows(&mut s, "SELECT id FROM t WHERE at < '2021-01-01'")),
        [1]
    );
    assert_eq!(ids(rows(&mut s, "SELECT id FROM t WHERE f = 1.5")), [1]);
    assert_eq!(
        rows(&mut s, "SELECT 2 + 3 * 4, -5, 'x'"),
        [[Value::Int(14), Value::Int(-5), Value::Text("x".into())]]
    );
    assert_eq!(
        run(&mut s, "UPDATE t SET s = s + 1 WHERE s <> 7"),
        Ok("UPDATE 2".into())
    );
    assert_eq!(
        run(&mut s, "DELETE FROM t WHERE id = 4"),
        Ok("DELETE 1".into())
    );
    assert_eq!(run(&mut s, "TRUNCATE t"), Ok("TRUNCATE TABLE".into()));
    assert_eq!(rows(&mut s, "SELECT count(*) FROM t"), [[Value::Int(0)]]);
    // Described types: the declared ones, and parameters typed by their context.
    let stmt = parse("SELECT id, s, name, f FROM t WHERE id = $1 AND name = $2")
        .unwrap()
        .pop()
        .unwrap();
    let d = s.describe(&stmt, &[])?;
    assert_eq!(d.params, [SqlType::Int4, SqlType::Varchar(Some(3))]);
    let types: Vec<SqlType> = d.columns.iter().map(|c| c.ty).collect();
    assert_eq!(
        types,
        [
            SqlType::Int4,
            SqlType::Int2,
            SqlType::Varchar(Some(3)),
            SqlType::Float4
        ]
    );
    run(&mut s, "DROP TABLE t").unwrap();
    assert_eq!(run(&mut s, "SELECT * FROM t"), Err("42P01"));
    Ok(())
}

#[test]
fn malformed_input_never_panics() {
    let deep = format!("SELECT {}1{}", "(".repeat(10_000), ")".repeat(10_000));
    for sql in [
        "",
        ";;",
        "'",
        "SELECT $0",
        "SELECT $99999999999",
        "\0",
        &deep,
        "INSERT INTO",
        "SELECT 1e999999",
    ] {
        if let Ok(stmts) = parse(sql) {
            let dir = tempfile::tempdir().unwrap();
            let mut s = Session::new(open(dir.path()).unwrap());
            for stmt in stmts {
                let _ = s.execute(&stmt, &[], &[]);
            }
        }
    }
}

/// `execute_simple` of every statement in `sql`: the tags, or the first error's SQLSTATE.
fn simple(s: &mut Session, sql: &str) -> Result<Vec<String>, &'static str> {
    let stmts = parse(sql).map_err(|e| e.sqlstate())?;
    s.execute_simple(&stmts)
        .into_iter()
        .map(|r| r.map(|o| o.tag).map_err(|e| e.sqlstate()))
        .collect()
}

#[test]
fn a_multi_statement_message_is_one_implicit_transaction() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    run(&mut s, SETUP).unwrap();
    // The second INSERT fails: the first is rolled back with it, and the session is idle.
    let r = simple(
        &mut s,
        "INSERT INTO t (id, name) VALUES (10, 'x'); INSERT INTO t (id, name) VALUES (1, 'dup')",
    );
    assert_eq!(r, Err("23505"));
    assert_eq!(s.status(), TxStatus::Idle);
    assert_eq!(rows(&mut s, "SELECT count(*) FROM t"), [[Value::Int(2)]]);
    // Without an error, all of it commits.
    simple(
        &mut s,
        "INSERT INTO t (id, name) VALUES (10, 'x'); INSERT INTO t (id, name) VALUES (11, 'y')",
    )
    .unwrap();
    assert_eq!(rows(&mut s, "SELECT count(*) FROM t"), [[Value::Int(4)]]);
    // A BEGIN inside makes an ordinary block that stays open, and aborts on an error.
    simple(
        &mut s,
        "INSERT INTO t (id, name) VALUES (12, 'z'); BEGIN; DELETE FROM t WHERE id = 12",
    )
    .unwrap();
    assert_eq!(s.status(), TxStatus::InBlock);
    assert_eq!(
        simple(&mut s, "SELECT 1; SELECT * FROM nowhere"),
        Err("42P01")
    );
    assert_eq!(s.status(), TxStatus::Failed);
    assert_eq!(simple(&mut s, "ROLLBACK").unwrap(), ["ROLLBACK"]);
    assert_eq!(rows(&mut s, "SELECT count(*) FROM t"), [[Value::Int(4)]]);
    // COMMIT inside: what precedes commits; what follows is a transaction of its own.
    assert_eq!(simple(&mut s, "INSERT INTO t (id, name) VALUES (13, 'a'); COMMIT; INSERT INTO t (id, name) VALUES (13, 'b'); SELECT 1"), Err("23505"));
    assert_eq!(rows(&mut s, "SELECT count(*) FROM t"), [[Value::Int(5)]]);
    assert_eq!(s.status(), TxStatus::Idle);
    Ok(())
}
