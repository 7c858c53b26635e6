//! The SQL layer without the network: a `Session` on a temporary database, statements in,
//! outcomes and SQLSTATEs out.

mod common;

use std::sync::Arc;

use common::open;
use quire_engine::vfs::{OsVfs, Vfs};
use quire_engine::{Config, Database, Value};
use quire_sql::{parse, OutcomeKind, Session, SqlType, TxStatus};

/// Runs every statement of `sql`; the first error's SQLSTATE, or the last outcome's tag.
fn run(s: &mut Session, sql: &str) -> Result<String, &'static str> {
    let mut tag = String::new();
    for stmt in parse(sql).map_err(|e| e.sqlstate().code())? {
        tag = s
            .execute(&stmt, &[], &[])
            .map_err(|e| e.sqlstate().code())?
            .tag;
    }
    Ok(tag)
}

/// The rows of a query, sent as a simple-protocol query string (its shape, if any, runs as
/// a prepared statement).
fn rows(s: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    match s.execute_query(sql).pop().unwrap().unwrap().kind {
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
        "22007",
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
    ("CREATE MATERIALIZED VIEW v AS SELECT 1", "0A000"),
    ("SELECT a.id FROM t a FULL JOIN t b ON a.id < b.id", "0A000"),
    ("SELECT id, count(*) FROM t GROUP BY s", "42803"),
    ("SELECT (SELECT id FROM t)", "21000"),
    // PostgreSQL aggregates such a call in the outer query; quire refuses it.
    ("SELECT (SELECT max(o.id) FROM t i) FROM t o", "0A000"),
    (
        "SELECT * FROM t a JOIN t b ON a.id = b.id WHERE id = 1",
        "42702",
    ),
    ("SELECT x.id FROM t", "42P01"),
    // The match reaches the lone trailing escape with text left.
    ("SELECT * FROM t WHERE name LIKE '\\'", "22025"),
    ("SAVEPOINT x", "25P01"),
    ("COMMIT PREPARED 'nope'", "42704"),
    ("PREPARE TRANSACTION 'p'", "25P01"),
    ("COPY t FROM '/etc/passwd'", "42501"),
    ("SET TimeZone = 'Mars/Olympus_Mons'", "22023"),
    ("SET shared_buffers = '1GB'", "55P02"),
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
    let d = s.describe("q", &stmt, &[])?;
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
    let stmts = parse(sql).map_err(|e| e.sqlstate().code())?;
    s.execute_simple(&stmts)
        .into_iter()
        .map(|r| r.map(|o| o.tag).map_err(|e| e.sqlstate().code()))
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

fn col(r: Vec<Vec<Value>>) -> Vec<Value> {
    r.into_iter().map(|mut r| r.remove(0)).collect()
}

/// The lines of an EXPLAIN statement's plan, as one string.
fn explain(s: &mut Session, sql: &str) -> String {
    col(rows(s, sql))
        .into_iter()
        .map(|v| v.as_text().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn ints(v: &[i64]) -> Vec<Value> {
    v.iter().map(|&i| Value::Int(i)).collect()
}

#[test]
fn queries_join_group_sort_and_nest() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    run(
        &mut s,
        "CREATE TABLE b (bid int PRIMARY KEY, region text); \
         CREATE TABLE a (aid int PRIMARY KEY, bid int, bal int NOT NULL); \
         INSERT INTO b SELECT g, CASE WHEN g % 2 = 0 THEN 'even' ELSE 'odd' END FROM generate_series(1, 4) AS g; \
         INSERT INTO a (aid, bid, bal) SELECT aid, (aid - 1) / 3 + 1, aid * 10 FROM generate_series(1, 10) AS aid",
    )
    .unwrap();
    // Grouping with aggregates, HAVING and ORDER BY an aggregate.
    assert_eq!(
        rows(&mut s, "SELECT bid, count(*), sum(bal), max(aid) FROM a GROUP BY bid HAVING count(*) > 1 ORDER BY sum(bal) DESC"),
        [ints(&[3, 3, 240, 9]), ints(&[2, 3, 150, 6]), ints(&[1, 3, 60, 3])]
    );
    // Inner and left joins (a hash join on the equality), with qualified names.
    assert_eq!(
        col(rows(
            &mut s,
            "SELECT count(*) FROM a JOIN b ON a.bid = b.bid WHERE b.region = 'even'"
        )),
        ints(&[4])
    );
    assert_eq!(
        rows(&mut s, "SELECT b.bid, count(a.aid) FROM b LEFT JOIN a ON a.bid = b.bid AND a.bal > 85 GROUP BY b.bid ORDER BY 1"),
        [ints(&[1, 0]), ints(&[2, 0]), ints(&[3, 1]), ints(&[4, 1])]
    );
    // Subqueries: IN, EXISTS (correlated), scalar, and in FROM.
    assert_eq!(
        col(rows(&mut s, "SELECT aid FROM a WHERE bid IN (SELECT bid FROM b WHERE region = 'odd') AND aid > 7 ORDER BY aid")),
        ints(&[8, 9])
    );
    assert_eq!(
        col(rows(
            &mut s,
            "SELECT bid FROM b WHERE NOT EXISTS (SELECT 1 FROM a WHERE a.bid = b.bid) ORDER BY bid"
        )),
        Vec::<Value>::new()
    );
    assert_eq!(
        col(rows(
            &mut s,
            "SELECT (SELECT max(bal) FROM a WHERE a.bid = b.bid) FROM b ORDER BY bid DESC LIMIT 2"
        )),
        ints(&[100, 90])
    );
    assert_eq!(
        col(rows(
            &mut s,
            "SELECT n FROM (SELECT bid * 100 AS n FROM b) AS x WHERE n > 150 ORDER BY n OFFSET 1"
        )),
        ints(&[300, 400])
    );
    // DISTINCT, UNION ALL, OR/NOT, BETWEEN, LIKE, COALESCE, string functions.
    assert_eq!(
        col(rows(
            &mut s,
            "SELECT DISTINCT region FROM b ORDER BY region"
        )),
        [Value::Text("even".into()), Value::Text("odd".into())]
    );
    assert_eq!(
        col(rows(&mut s, "SELECT 1 UNION ALL SELECT 2")),
        ints(&[1, 2])
    );
    assert_eq!(
        col(rows(&mut s, "SELECT aid FROM a WHERE (aid BETWEEN 2 AND 3 OR aid = 10) AND NOT aid = 3 ORDER BY aid")),
        ints(&[2, 10])
    );
    assert_eq!(
        rows(&mut s, "SELECT upper(region) || '-' || length(region), coalesce(NULL, 'x'), substr('hello', 2, 3) FROM b WHERE region LIKE 'o%' AND bid = 1"),
        [[Value::Text("ODD-3".into()), Value::Text("x".into()), Value::Text("ell".into())]]
    );
    // UPDATE and DELETE with RETURNING; INSERT ... ON CONFLICT.
    assert_eq!(
        rows(
            &mut s,
            "UPDATE a SET bal = bal + 1 WHERE aid = 1 RETURNING bal"
        ),
        [ints(&[11])]
    );
    assert_eq!(
        rows(&mut s, "DELETE FROM a WHERE aid = 10 RETURNING aid, bid"),
        [ints(&[10, 4])]
    );
    assert_eq!(
        run(
            &mut s,
            "INSERT INTO a VALUES (1, 1, 0) ON CONFLICT DO NOTHING"
        ),
        Ok("INSERT 0 0".into())
    );
    assert_eq!(
        rows(&mut s, "INSERT INTO a VALUES (1, 1, 5) ON CONFLICT (aid) DO UPDATE SET bal = a.bal + excluded.bal RETURNING bal"),
        [ints(&[16])]
    );
    // The planner: primary-key equality and ranges through the index, equi-joins hashed.
    let plan = explain;
    assert!(plan(&mut s, "EXPLAIN SELECT bal FROM a WHERE aid = 3")
        .contains("Index Scan using a_pkey (key equality)"));
    assert!(plan(&mut s, "EXPLAIN UPDATE a SET bal = 0 WHERE aid > 8")
        .contains("Index Scan using a_pkey (key range)"));
    assert!(plan(&mut s, "EXPLAIN SELECT bal FROM a WHERE bal = 3").contains("Seq Scan on a"));
    assert!(plan(&mut s, "EXPLAIN SELECT * FROM a JOIN b ON a.bid = b.bid").contains("Hash Join"));
    // A comma join's WHERE: equalities between items hash the join, a condition on one
    // item goes down to it (here: the primary key's index); same rows as the cross product.
    let comma = "SELECT a.aid, b.bid FROM a, b WHERE a.bid = b.bid AND a.aid = 3 AND b.bid > 0";
    let p = plan(&mut s, &format!("EXPLAIN {comma}"));
    assert!(
        p.contains("Hash Join") && p.contains("Index Scan using a_pkey"),
        "{p}"
    );
    assert_eq!(
        rows(&mut s, comma),
        rows(
            &mut s,
            "SELECT a.aid, b.bid FROM a CROSS JOIN b WHERE a.bid = b.bid AND a.aid = 3 AND b.bid > 0"
        )
    );
    assert_eq!(rows(&mut s, comma).len(), 1);
    // Catalog views, as psql's \dt reads them.
    assert_eq!(
        col(rows(&mut s, "SELECT c.relname FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                          WHERE c.relkind IN ('r', 'p', '') AND n.nspname <> 'pg_catalog' AND n.nspname !~ '^pg_toast' \
                          AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 1")),
        [Value::Text("a".into()), Value::Text("b".into())]
    );
    assert_eq!(
        col(rows(&mut s, "SELECT pg_catalog.pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid WHERE c.relname = 'a'")),
        [Value::Text("CREATE UNIQUE INDEX a_pkey ON public.a USING btree (aid)".into())]
    );
    Ok(())
}

#[test]
fn pgbench_setup_copy_keys_and_two_phase_commit() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut s = Session::new(Arc::clone(&db));
    run(&mut s, "create table acc(aid int not null, bid int, abalance int, filler char(84)) with (fillfactor=100)").unwrap();
    // COPY FROM STDIN in pieces that split lines, then the primary key over the rows.
    let stmt = parse("copy acc from stdin with (freeze on)")?
        .pop()
        .unwrap();
    assert!(matches!(
        s.execute(&stmt, &[], &[])?.kind,
        OutcomeKind::CopyIn {
            columns: 4,
            binary: false
        }
    ));
    s.copy_data(b"1\t1\t0\t\n2\t1");
    s.copy_data(b"\t0\t\n3\t1\t\\N\tx\n");
    assert_eq!(s.copy_done()?.tag, "COPY 3");
    assert_eq!(
        run(&mut s, "alter table acc add primary key (aid)"),
        Ok("ALTER TABLE".into())
    );
    assert_eq!(
        rows(
            &mut s,
            "SELECT length(filler), abalance FROM acc WHERE aid = 3"
        ),
        [[Value::Int(84), Value::Null]]
    );
    // A bad line rolls the whole COPY back.
    let stmt = parse("copy acc (aid, bid) from stdin (format csv)")?
        .pop()
        .unwrap();
    s.execute(&stmt, &[], &[])?;
    s.copy_data(b"4,1\nfive,1\n");
    assert_eq!(s.copy_done().unwrap_err().sqlstate(), "22P02");
    assert_eq!(rows(&mut s, "SELECT count(*) FROM acc"), [[Value::Int(3)]]);
    // COPY TO STDOUT in CSV.
    let stmt = parse("COPY acc (aid, abalance) TO STDOUT WITH CSV HEADER")?
        .pop()
        .unwrap();
    let OutcomeKind::CopyOut { lines, .. } = s.execute(&stmt, &[], &[])?.kind else {
        panic!("copy out")
    };
    assert_eq!(lines.concat(), b"aid,abalance\n1,0\n2,0\n3,\n");
    // COPY (query) TO STDOUT, outside a block and inside one (seeing the block's changes).
    let copy_lines = |s: &mut Session, sql: &str| -> anyhow::Result<(String, Vec<u8>)> {
        let stmt = parse(sql)?.pop().unwrap();
        let done = s.execute(&stmt, &[], &[])?;
        let OutcomeKind::CopyOut { lines, .. } = done.kind else {
            panic!("copy out")
        };
        Ok((done.tag, lines.concat()))
    };
    let (tag, data) = copy_lines(
        &mut s,
        "COPY (SELECT aid, abalance, 'a''b)' AS t FROM acc WHERE aid > 1 ORDER BY aid) TO STDOUT WITH (FORMAT csv, HEADER)",
    )?;
    assert_eq!(
        (tag.as_str(), &data[..]),
        ("COPY 2", &b"aid,abalance,t\n2,0,a'b)\n3,,a'b)\n"[..])
    );
    run(&mut s, "BEGIN; UPDATE acc SET abalance = 7 WHERE aid = 3").unwrap();
    let (_, data) = copy_lines(
        &mut s,
        "copy (select abalance, null from acc where aid = 3) to stdout",
    )?;
    assert_eq!(data, b"7\t\\N\n");
    assert_eq!(run(&mut s, "ROLLBACK"), Ok("ROLLBACK".into()));
    for (sql, sqlstate) in [
        ("COPY (VALUES (1)) FROM STDIN", "42601"),
        ("COPY (SELECT 1; SELECT 2) TO STDOUT", "42601"),
        ("COPY (SELECT nosuch) TO STDOUT", "42703"),
        ("COPY (INSERT INTO acc (aid) VALUES (9)) TO STDOUT", "0A000"),
    ] {
        let r = parse(sql).and_then(|mut stmts| s.execute(&stmts.pop().unwrap(), &[], &[]));
        assert_eq!(r.map(|o| o.tag).unwrap_err().sqlstate(), sqlstate, "{sql}");
    }
    assert_eq!(s.status(), TxStatus::Idle);
    // The two-phase script, and VACUUM outside a block only.
    assert_eq!(
        run(
            &mut s,
            "BEGIN; UPDATE acc SET abalance = abalance + 1 WHERE aid = 1"
        ),
        Ok("UPDATE 1".into())
    );
    assert_eq!(run(&mut s, "VACUUM acc"), Err("25001"));
    assert_eq!(run(&mut s, "ROLLBACK"), Ok("ROLLBACK".into()));
    let two_pc = Config {
        max_prepared_transactions: 2,
        ..db.config().clone()
    };
    drop(s);
    let db = Arc::try_unwrap(db).map_err(|_| anyhow::anyhow!("database still shared"))?;
    db.close()?;
    let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
    let db = Arc::new(Database::open(&vfs, dir.path(), two_pc)?);
    let mut s = Session::new(db);
    run(
        &mut s,
        "BEGIN; UPDATE acc SET abalance = abalance + 1 WHERE aid = 1",
    )
    .unwrap();
    assert_eq!(
        run(&mut s, "PREPARE TRANSACTION 'p_1'"),
        Ok("PREPARE TRANSACTION".into())
    );
    assert_eq!(s.status(), TxStatus::Idle);
    assert_eq!(
        col(rows(&mut s, "SELECT gid FROM pg_prepared_xacts")),
        [Value::Text("p_1".into())]
    );
    assert_eq!(
        run(&mut s, "COMMIT PREPARED 'p_1'"),
        Ok("COMMIT PREPARED".into())
    );
    assert_eq!(
        rows(&mut s, "SELECT abalance FROM acc WHERE aid = 1"),
        [[Value::Int(1)]]
    );
    assert_eq!(run(&mut s, "VACUUM ANALYZE acc"), Ok("VACUUM".into()));
    assert_eq!(run(&mut s, "CHECKPOINT"), Ok("CHECKPOINT".into()));
    assert_eq!(
        col(rows(&mut s, "SHOW max_prepared_transactions")),
        [Value::Text("2".into())]
    );
    // transaction_isolation is the running transaction's.
    run(&mut s, "BEGIN ISOLATION LEVEL REPEATABLE READ").unwrap();
    assert_eq!(
        col(rows(&mut s, "SHOW transaction_isolation")),
        [Value::Text("repeatable read".into())]
    );
    run(&mut s, "COMMIT").unwrap();
    assert_eq!(
        col(rows(&mut s, "SHOW transaction_isolation")),
        [Value::Text("read committed".into())]
    );
    Ok(())
}

/// Queries at the edges of what the binder and executor handle: each either runs or fails
/// with a SQLSTATE; none panics, and the session stays usable after each.
#[test]
fn odd_queries_fail_cleanly_or_run() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    run(&mut s, SETUP).unwrap();
    let queries = [
        "SELECT * FROM t a JOIN t b USING (id)",
        "SELECT count(*) OVER () FROM t",
        "SELECT g, x FROM generate_series(1, 3) g, LATERAL (SELECT g * 2 AS x) y",
        "SELECT sum(x), avg(x), min(x) FROM (VALUES (1), (2), (NULL)) AS v(x)",
        "SELECT $1",
        "SELECT ARRAY['a', 'b'][1]",
        "SELECT (ARRAY['a'])[5]",
        "SELECT * FROM generate_series(1, 10, 0)",
        "SELECT * FROM generate_series(1, 1000000000000) LIMIT 3",
        "SELECT id FROM t ORDER BY 7",
        "SELECT id FROM t GROUP BY 9",
        "SELECT id FROM t LIMIT -1",
        "SELECT id FROM t LIMIT 'x'",
        "SELECT count(*) FROM t HAVING count(*) > 1",
        "SELECT id, count(*) FROM t GROUP BY 1 ORDER BY count(*) DESC, 1",
        "SELECT * FROM t WHERE id IN (SELECT id, id FROM t)",
        "SELECT * FROM t WHERE (SELECT 1 WHERE false) IS NULL",
        "SELECT DISTINCT id FROM t ORDER BY name",
        "SELECT name || id, id::text || 'x', 1::bool FROM t",
        "SELECT 'abc' ~ '(', 'abc' ~ 'a+'",
        "SELECT upper(), lower(1, 2), nosuch(1)",
        "SELECT * FROM t, t",
        "SELECT t.* FROM t WHERE id BETWEEN 2 AND 1",
        "SELECT CASE WHEN id = 1 THEN 'one' WHEN id = 2 THEN 2 END FROM t",
        "SELECT CASE id WHEN 1 THEN 'one' ELSE NULL END FROM t",
        "INSERT INTO t SELECT * FROM t",
        "INSERT INTO t (id, name) SELECT id + 100, name FROM t RETURNING *",
        "UPDATE t SET name = name || 'x' WHERE id > 100 RETURNING id, name",
        "DELETE FROM t WHERE id > 100 RETURNING *",
        "SELECT 1 UNION SELECT 'a'",
        "SELECT 9223372036854775807 + 1",
        "SELECT -(-9223372036854775807 - 1)",
        "SELECT 1.0 / 0",
        "SELECT substr('x', 1, -1)",
        "SELECT now() - now()",
        "SELECT '2020-01-01'::date + 1",
        "SELECT 'not a uuid'::uuid",
        "SELECT '6ba7b810-9dad-11d1-80b4-00c04fd430c8'::uuid",
        "SELECT x FROM (SELECT 1) AS s(x, y)",
        "COPY t TO STDOUT WITH (FORMAT binary)",
        "COPY (SELECT 1) TO STDOUT",
        "VACUUM (FULL) t",
        "VACUUM nosuch",
        "SHOW ALL",
        "RESET ALL",
        "SET search_path TO public, pg_catalog",
        "SELECT current_setting('search_path'), current_setting('nosuch', true)",
    ];
    for q in queries {
        match parse(q) {
            Ok(stmts) => {
                for stmt in stmts {
                    let _ = s.execute(&stmt, &[], &[]);
                }
            }
            Err(e) => assert_eq!(e.sqlstate().code().len(), 5, "{q}"),
        }
        assert_eq!(s.status(), TxStatus::Idle, "{q}");
    }
    assert_eq!(rows(&mut s, "SELECT count(*) FROM t"), [[Value::Int(2)]]);
    Ok(())
}

#[test]
fn select_for_update_locks_the_rows_until_commit() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut a = Session::new(Arc::clone(&db));
    run(&mut a, SETUP).unwrap();
    run(&mut a, "BEGIN").unwrap();
    assert_eq!(
        rows(&mut a, "SELECT id, name FROM t WHERE id = 1 FOR UPDATE"),
        [[Value::Int(1), Value::Text("a".into())]]
    );
    let (done, finished) = std::sync::mpsc::channel();
    let writer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            let mut b = Session::new(db);
            let r = run(&mut b, "UPDATE t SET name = 'z' WHERE id = 1");
            done.send(r).expect("the test waits for it");
        })
    };
    // The writer waits for the lock (the row is locked, not only read).
    assert!(finished
        .recv_timeout(std::time::Duration::from_millis(300))
        .is_err());
    assert_eq!(run(&mut a, "COMMIT"), Ok("COMMIT".into()));
    assert_eq!(
        finished.recv_timeout(std::time::Duration::from_secs(10))?,
        Ok("UPDATE 1".into())
    );
    writer.join().expect("the writer thread ends");
    assert_eq!(
        run(
            &mut a,
            "SELECT * FROM t a JOIN t b ON a.id = b.id FOR UPDATE"
        ),
        Err("0A000")
    );
    Ok(())
}

#[test]
fn string_functions_answer_as_postgresql_does() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    let text = |s: &mut Session, q: &str| -> Vec<Value> { rows(s, q).remove(0) };
    let t = |v: &str| Value::Text(v.into());
    assert_eq!(
        text(&mut s, "SELECT left('abcde', 2), right('abcde', 2), left('abcde', -2), right('abcde', -2), left('ab', 5)"),
        [t("ab"), t("de"), t("abc"), t("cde"), t("ab")]
    );
    assert_eq!(
        text(&mut s, "SELECT replace('a-b-c', '-', '+'), replace('abc', '', 'x'), repeat('ab', 3), repeat('x', -1)"),
        [t("a+b+c"), t("abc"), t("ababab"), t("")]
    );
    assert_eq!(
        text(&mut s, "SELECT trim('  x  '), ltrim('  x  '), rtrim('  x  '), btrim('xxaxx', 'x'), trim(leading 'x' from 'xxaxx'), trim(trailing from ' a ')"),
        [t("x"), t("x  "), t("  x"), t("a"), t("axx"), t(" a")]
    );
    assert_eq!(
        text(
            &mut s,
            "SELECT strpos('héllo', 'l'), position('z' in 'abc'), position('b' in 'abc')"
        ),
        [Value::Int(3), Value::Int(0), Value::Int(2)]
    );
    assert_eq!(
        text(
            &mut s,
            "SELECT current_date = now()::date, CURRENT_DATE = now()::date"
        ),
        [Value::Bool(true), Value::Bool(true)]
    );
    assert_eq!(run(&mut s, "SELECT repeat('x', 2000000000)"), Err("54000"));
    Ok(())
}

#[test]
fn order_by_limit_reads_an_index_in_order() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    run(&mut s, "CREATE TABLE o (id int PRIMARY KEY, v int, n int)").unwrap();
    for id in [5, 3, 9, 1, 7, 2, 8, 4, 6] {
        run(
            &mut s,
            &format!("INSERT INTO o VALUES ({id}, {}, NULL)", id * 10),
        )
        .unwrap();
    }
    let plan = |s: &mut Session, q: &str| explain(s, &format!("EXPLAIN {q}"));
    let q = "SELECT id, v FROM o ORDER BY id LIMIT 3";
    let p = plan(&mut s, q);
    assert!(
        p.contains("Index Scan using o_pkey") && !p.contains("Sort"),
        "{p}"
    );
    assert_eq!(
        rows(&mut s, q),
        [ints(&[1, 10]), ints(&[2, 20]), ints(&[3, 30])]
    );
    let q = "SELECT v FROM o WHERE id > 4 AND v < 90 ORDER BY id LIMIT 2 OFFSET 1";
    assert!(!plan(&mut s, q).contains("Sort"));
    assert_eq!(rows(&mut s, q), [ints(&[60]), ints(&[70])]);
    // Not served by the index: descending, a nullable column, no LIMIT.
    for q in [
        "SELECT id FROM o ORDER BY id DESC LIMIT 2",
        "SELECT id FROM o ORDER BY v LIMIT 2",
        "SELECT id FROM o ORDER BY id",
    ] {
        assert!(plan(&mut s, q).contains("Sort"), "{q}");
    }
    assert_eq!(
        rows(&mut s, "SELECT id FROM o ORDER BY id DESC LIMIT 2"),
        [ints(&[9]), ints(&[8])]
    );
    Ok(())
}

#[test]
fn lock_table_holds_its_mode_to_the_end_of_the_block() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut a = Session::new(Arc::clone(&db));
    let mut b = Session::new(Arc::clone(&db));
    run(&mut a, SETUP).unwrap();
    assert_eq!(run(&mut a, "LOCK TABLE t"), Err("25P01"), "outside a block");
    run(&mut a, "BEGIN").unwrap();
    assert_eq!(
        run(&mut a, "LOCK TABLE t IN SHARE MODE"),
        Ok("LOCK TABLE".into())
    );
    // SHARE admits readers and other SHARE lockers, not writers.
    assert_eq!(col(rows(&mut b, "SELECT count(*) FROM t")), [Value::Int(2)]);
    run(&mut b, "BEGIN").unwrap();
    assert_eq!(
        run(&mut b, "LOCK t IN SHARE MODE NOWAIT"),
        Ok("LOCK TABLE".into())
    );
    assert_eq!(run(&mut b, "ROLLBACK"), Ok("ROLLBACK".into()));
    run(&mut b, "BEGIN").unwrap();
    assert_eq!(
        run(&mut b, "LOCK t IN ROW EXCLUSIVE MODE NOWAIT"),
        Err("55P03")
    );
    assert_eq!(run(&mut b, "ROLLBACK"), Ok("ROLLBACK".into()));
    run(&mut a, "COMMIT").unwrap();
    run(&mut b, "BEGIN").unwrap();
    assert_eq!(
        run(&mut b, "LOCK t NOWAIT"),
        Ok("LOCK TABLE".into()),
        "free after COMMIT"
    );
    assert_eq!(run(&mut b, "LOCK nowhere"), Err("42P01"));
    Ok(())
}

#[test]
fn pg_stat_wal_counts_records_images_writes_and_fsyncs() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    run(&mut s, SETUP).unwrap();
    let wal = |s: &mut Session| -> Vec<i64> {
        let r = rows(
            s,
            "SELECT wal_records, wal_fpi, wal_bytes::int8, wal_buffers_full, wal_write, \
             wal_sync, (wal_write_time * 1000000)::int8, (wal_sync_time * 1000000)::int8, \
             (stats_reset <= now())::int4 FROM pg_stat_wal",
        );
        assert_eq!(r.len(), 1, "one row");
        r[0].iter().map(|v| v.as_int().unwrap()).collect()
    };
    run(&mut s, "CHECKPOINT").unwrap();
    let before = wal(&mut s);
    assert_eq!(
        before[8], 1,
        "the reset time is not in the future: {before:?}"
    );
    // The first change of a page after a checkpoint logs its image; the commit writes and
    // fsyncs the WAL.
    run(&mut s, "UPDATE t SET name = 'cc' WHERE id = 1").unwrap();
    let after = wal(&mut s);
    assert!(
        after[0] >= before[0] + 2,
        "a change and a commit: {before:?} -> {after:?}"
    );
    assert!(
        after[1] > before[1],
        "no page image after a checkpoint: {after:?}"
    );
    assert!(after[2] > before[2], "no bytes: {before:?} -> {after:?}");
    assert!(
        after[4] > before[4] && after[5] > before[5],
        "{before:?} -> {after:?}"
    );
    // The commit's write and fsync took time, counted in nanoseconds.
    assert!(
        after[6] > before[6] && after[7] > before[7],
        "{before:?} -> {after:?}"
    );
    // A second change of the same page needs no image.
    run(&mut s, "UPDATE t SET name = 'dd' WHERE id = 1").unwrap();
    assert_eq!(wal(&mut s)[1], after[1], "a second image of the same page");
    Ok(())
}

#[test]
fn pg_stat_bgwriter_counts_checkpoints_and_pg_stat_reset_shared_resets() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    run(&mut s, SETUP).unwrap();
    let bgwriter = |s: &mut Session| -> Vec<i64> {
        let r = rows(
            s,
            "SELECT checkpoints_timed, checkpoints_req, (checkpoint_write_time * 1000)::int8, \
             (checkpoint_sync_time * 1000)::int8, buffers_checkpoint, buffers_clean, \
             maxwritten_clean, buffers_backend, buffers_backend_fsync, buffers_alloc, \
             stats_reset FROM pg_stat_bgwriter",
        );
        assert_eq!(r.len(), 1, "one row");
        r[0].iter()
            .map(|v| match v {
                Value::Timestamp(us) => *us,
                v => v.as_int().unwrap(),
            })
            .collect()
    };
    run(&mut s, "UPDATE t SET name = 'cc' WHERE id = 1").unwrap();
    let before = bgwriter(&mut s);
    run(&mut s, "CHECKPOINT").unwrap();
    let after = bgwriter(&mut s);
    // CHECKPOINT is a requested checkpoint; it wrote the page the UPDATE dirtied, and its
    // write and sync phases took time.
    assert_eq!(after[1], before[1] + 1, "{before:?} -> {after:?}");
    assert!(after[4] > before[4], "no buffer written: {after:?}");
    assert!(
        after[2] > before[2] && after[3] > before[3],
        "{before:?} -> {after:?}"
    );
    assert!(after[9] > 0, "buffers were allocated: {after:?}");
    assert_eq!(after[8], 0, "statements never fsync");
    // A reset starts the counters from zero and moves stats_reset on; pg_stat_wal is
    // separate.
    let wal_records = |s: &mut Session| {
        rows(s, "SELECT wal_records FROM pg_stat_wal")[0][0]
            .as_int()
            .unwrap()
    };
    let wal_before = wal_records(&mut s);
    assert_eq!(
        rows(&mut s, "SELECT pg_stat_reset_shared('bgwriter')")[0][0],
        Value::Text(String::new())
    );
    let reset = bgwriter(&mut s);
    assert_eq!(reset[..9], [0; 9], "{reset:?}");
    assert!(
        reset[10] > after[10],
        "stats_reset moved: {after:?} -> {reset:?}"
    );
    assert!(
        wal_records(&mut s) >= wal_before,
        "the WAL counters were not reset"
    );
    rows(&mut s, "SELECT pg_stat_reset_shared('wal')");
    assert!(
        wal_records(&mut s) < wal_before,
        "the WAL counters were reset"
    );
    // PostgreSQL's targets quire has nothing for are accepted; others are refused.
    rows(&mut s, "SELECT pg_stat_reset_shared('archiver')");
    assert_eq!(
        run(&mut s, "SELECT pg_stat_reset_shared('bgwriters')"),
        Err("22023")
    );
    Ok(())
}

#[test]
fn wal_positions_are_pg_lsn_values_that_move_with_commits() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    run(&mut s, SETUP).unwrap();
    let lsns = |s: &mut Session| -> Vec<String> {
        let r = rows(
            s,
            "SELECT pg_current_wal_insert_lsn()::text, pg_current_wal_lsn()::text, \
             pg_current_wal_flush_lsn()::text",
        );
        r[0].iter()
            .map(|v| v.as_text().unwrap().to_string())
            .collect()
    };
    let before = lsns(&mut s);
    // PostgreSQL's form: two upper-case hexadecimal numbers.
    for l in &before {
        let (hi, lo) = l.split_once('/').unwrap();
        assert!(
            [hi, lo].iter().all(|p| !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase())),
            "{before:?}"
        );
    }
    run(&mut s, "UPDATE t SET name = 'cc' WHERE id = 1").unwrap();
    let after = lsns(&mut s);
    // Compared as pg_lsn, not as text: insert >= write >= flush, and a commit moves all
    // three (it is flushed before COMMIT returns).
    let cmp = |a: &str, op: &str, b: &str, s: &mut Session| -> bool {
        rows(s, &format!("SELECT '{a}'::pg_lsn {op} '{b}'::pg_lsn"))[0][0] == Value::Bool(true)
    };
    assert!(cmp(&after[0], ">=", &after[1], &mut s), "{after:?}");
    assert!(cmp(&after[1], ">=", &after[2], &mut s), "{after:?}");
    assert!(
        cmp(&after[2], ">", &before[2], &mut s),
        "{before:?} -> {after:?}"
    );
    let diff = rows(
        &mut s,
        &format!(
            "SELECT pg_wal_lsn_diff('{}', '{}')::int8, pg_wal_lsn_diff('0/10', '1/0')",
            after[2], before[2]
        ),
    );
    assert!(diff[0][0].as_int().unwrap() > 0, "{diff:?}");
    assert_eq!(
        quire_sql::format_text(&diff[0][1], quire_sql::SqlType::Numeric(None)).as_deref(),
        Some("-4294967280")
    );
    // Input and output forms, and bad input (22P02, PostgreSQL's message).
    assert_eq!(
        rows(&mut s, "SELECT '16/b374d848'::pg_lsn::text")[0][0],
        Value::Text("16/B374D848".into())
    );
    for bad in ["'16'", "'/1'", "'1/123456789'", "'g/0'"] {
        assert_eq!(
            run(&mut s, &format!("SELECT {bad}::pg_lsn")),
            Err("22P02"),
            "{bad}"
        );
    }
    Ok(())
}

#[test]
fn quire_stat_io_counts_the_file_layer_operations() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    run(&mut s, SETUP).unwrap();
    let counts = |s: &mut Session| -> std::collections::HashMap<String, i64> {
        rows(s, "SELECT op, count FROM quire_stat_io")
            .into_iter()
            .map(|r| (r[0].as_text().unwrap().to_string(), r[1].as_int().unwrap()))
            .collect()
    };
    let before = counts(&mut s);
    assert_eq!(before.len(), 10, "{before:?}");
    // A primary-key read probes no file size (the relation-size cache) and opens nothing.
    rows(&mut s, "SELECT name FROM t WHERE id = 1");
    let after_read = counts(&mut s);
    assert_eq!(after_read["size_probe"], before["size_probe"]);
    assert_eq!(after_read["open"], before["open"]);
    // A commit flushes the WAL: at least one fsync.
    run(&mut s, "INSERT INTO t (id, name) VALUES (9, 'i')").unwrap();
    assert!(counts(&mut s)["fsync"] > after_read["fsync"]);
    Ok(())
}

/// The notices of each statement sent alone: (severity, SQLSTATE, message).
fn notices(s: &mut Session, sql: &str) -> Vec<(&'static str, &'static str, String)> {
    let mut notices = Vec::new();
    for stmt in parse(sql).unwrap() {
        let out = s.execute(&stmt, &[], &[]).unwrap();
        for n in out.notices {
            notices.push((n.severity.name(), n.code.code(), n.message));
        }
    }
    notices
}

#[test]
fn notices_have_postgresqls_severity_and_sqlstate() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    let one = |sev, code, msg: &str| vec![(sev, code, msg.to_string())];
    assert_eq!(
        notices(&mut s, "COMMIT"),
        one("WARNING", "25P01", "there is no transaction in progress")
    );
    assert_eq!(
        notices(&mut s, "ROLLBACK"),
        one("WARNING", "25P01", "there is no transaction in progress")
    );
    assert_eq!(
        notices(&mut s, "SET LOCAL work_mem = '8MB'"),
        one(
            "WARNING",
            "25P01",
            "SET LOCAL can only be used in transaction blocks"
        )
    );
    assert_eq!(
        notices(&mut s, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"),
        one(
            "WARNING",
            "25P01",
            "SET TRANSACTION can only be used in transaction blocks"
        )
    );
    assert_eq!(
        notices(&mut s, "DROP TABLE IF EXISTS nothing_here"),
        one(
            "NOTICE",
            "00000",
            "table \"nothing_here\" does not exist, skipping"
        )
    );
    assert_eq!(notices(&mut s, "BEGIN"), vec![]);
    assert_eq!(
        notices(&mut s, "BEGIN"),
        one(
            "WARNING",
            "25001",
            "there is already a transaction in progress"
        )
    );
    assert_eq!(notices(&mut s, "SET LOCAL work_mem = '8MB'"), vec![]);
    assert_eq!(notices(&mut s, "COMMIT"), vec![]);
    s.execute_query("CREATE TABLE v (a int)");
    let verbose = notices(&mut s, "VACUUM VERBOSE v");
    assert_eq!(verbose.len(), 1);
    assert_eq!((verbose[0].0, verbose[0].1), ("INFO", "00000"));
    Ok(())
}

#[test]
fn set_returning_functions_run_lazily_in_project_set_and_function_scan() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    let plan = explain(&mut s, "EXPLAIN SELECT unnest('{1,2}'::int[]) + 1");
    assert!(plan.contains("ProjectSet"), "{plan}");
    let q = "EXPLAIN SELECT * FROM unnest('{1,2}'::int[]) WITH ORDINALITY AS x";
    let plan = explain(&mut s, q);
    assert!(plan.contains("Function Scan on unnest x"), "{plan}");
    // Rows are made as they are read: a series of 2^63 values under LIMIT ends at once.
    let big = "generate_series(1, 9223372036854775807)";
    let q = format!("SELECT {big}, unnest('{{7,8}}'::int[]) LIMIT 3");
    assert_eq!(
        rows(&mut s, &q),
        [
            ints(&[1, 7]),
            ints(&[2, 8]),
            vec![Value::Int(3), Value::Null]
        ]
    );
    let q = format!("SELECT * FROM {big} WITH ORDINALITY LIMIT 2");
    assert_eq!(rows(&mut s, &q), [ints(&[1, 1]), ints(&[2, 2])]);
    Ok(())
}
