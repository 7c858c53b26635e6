//! What an slt file (one session) cannot show: a temporary table is seen by its session
//! only, and goes when the session ends or when a crash left it; and the planner switches
//! (`enable_*`) change the plan EXPLAIN shows.

mod common;

use common::{code, open, rows, run};
use quire_engine::Value;
use quire_sql::Session;

/// The lines of an EXPLAIN statement's plan, as one string.
fn explain(s: &mut Session, sql: &str) -> String {
    rows(s, sql)
        .into_iter()
        .map(|r| r[0].as_text().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The engine's names of the temporary tables there are.
fn temp_tables(db: &quire_engine::Database) -> anyhow::Result<Vec<String>> {
    let tx = db.begin(quire_engine::IsolationLevel::ReadCommitted)?;
    Ok(tx
        .tables()?
        .into_iter()
        .filter(|t| t.name.starts_with("quire_temp_"))
        .map(|t| t.name.to_string())
        .collect())
}

#[test]
fn a_temporary_table_is_its_sessions_and_goes_with_it() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut a = Session::new(db.clone());
    let mut b = Session::new(db.clone());
    run(&mut a, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)").unwrap();
    run(
        &mut a,
        "CREATE TEMP TABLE t (x int); INSERT INTO t VALUES (2)",
    )
    .unwrap();
    run(
        &mut b,
        "CREATE TEMP TABLE t (x int); INSERT INTO t VALUES (3)",
    )
    .unwrap();
    assert_eq!(rows(&mut a, "SELECT x FROM t"), [[Value::Int(2)]]);
    assert_eq!(rows(&mut b, "SELECT x FROM t"), [[Value::Int(3)]]);
    assert_eq!(rows(&mut b, "SELECT x FROM public.t"), [[Value::Int(1)]]);
    run(&mut a, "CREATE TEMP TABLE only_a (x int)").unwrap();
    assert_eq!(code(run(&mut b, "SELECT * FROM only_a")), "42P01");
    assert_eq!(code(run(&mut b, "SELECT * FROM pg_temp.only_a")), "42P01");
    // Ending with a transaction open: it rolls back, then the tables go.
    run(&mut a, "BEGIN; INSERT INTO only_a VALUES (1)").unwrap();
    drop(a);
    let mut c = Session::new(db.clone());
    assert_eq!(rows(&mut c, "SELECT x FROM t"), [[Value::Int(1)]]);
    assert_eq!(
        temp_tables(&db)?,
        ["quire_temp_".to_string() + &b.backend().pid().to_string() + "_t"]
    );
    drop(b);
    assert!(temp_tables(&db)?.is_empty());
    // A crash (no session end) leaves a session's table: the next start drops it.
    let tx = db.begin(quire_engine::IsolationLevel::ReadCommitted)?;
    tx.create_table("quire_temp_999_left", &[])?;
    tx.commit()?;
    Session::bootstrap(&db)?;
    assert!(temp_tables(&db)?.is_empty());
    Ok(())
}

#[test]
fn planner_switches_change_the_plan() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut s = Session::new(db);
    run(
        &mut s,
        "CREATE TABLE a (id int PRIMARY KEY, v int); CREATE TABLE b (id int, w int)",
    )
    .unwrap();
    let join = "EXPLAIN SELECT * FROM a JOIN b ON a.id = b.id";
    let by_key = "EXPLAIN SELECT v FROM a WHERE id = 3";
    assert!(explain(&mut s, join).contains("Hash Join"));
    run(&mut s, "SET enable_hashjoin = off").unwrap();
    assert!(explain(&mut s, join).contains("Nested Loop"));
    run(&mut s, "RESET enable_hashjoin").unwrap();
    assert!(explain(&mut s, join).contains("Hash Join"));
    assert!(explain(&mut s, by_key).contains("Index Scan"));
    run(&mut s, "SET enable_indexscan = off").unwrap();
    // The bitmap scan is quire's index scan too: both must be off.
    assert!(explain(&mut s, by_key).contains("Index Scan"));
    run(&mut s, "SET enable_bitmapscan = off").unwrap();
    assert!(explain(&mut s, by_key).contains("Seq Scan"));
    // With sequential scans off too, the index path is the cheaper one again.
    run(&mut s, "SET enable_seqscan = off").unwrap();
    assert!(explain(&mut s, by_key).contains("Index Scan"));
    Ok(())
}
