//! ALTER TABLE ADD COLUMN and DROP COLUMN as PostgreSQL behaves: stored rows are not
//! rewritten for a column without a DEFAULT (they read it as NULL), a DEFAULT (or a serial)
//! fills the existing rows, NOT NULL without one fails on a non-empty table (23502); a
//! dropped column disappears from `*`, column lists, COPY and psql's catalog (attisdropped),
//! takes the indexes over it with it, and its name may be used again. All of it rolls back
//! and survives a restart.

mod common;

use std::sync::Arc;

use common::{code, open, query, rows, run};
use quire_engine::Value;
use quire_sql::Session;

fn int(i: i64) -> Value {
    Value::Int(i)
}

fn text(t: &str) -> Value {
    Value::Text(t.into())
}

#[test]
fn add_column_reads_null_or_fills_its_default() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    run(
        &mut s,
        "CREATE TABLE t (id int PRIMARY KEY, a text); INSERT INTO t VALUES (1, 'x'), (2, 'y')",
    )
    .unwrap();
    run(&mut s, "ALTER TABLE t ADD COLUMN b int").unwrap();
    assert_eq!(
        query(&mut s, "SELECT * FROM t ORDER BY id"),
        (
            vec!["id".into(), "a".into(), "b".into()],
            vec![
                vec![int(1), text("x"), Value::Null],
                vec![int(2), text("y"), Value::Null]
            ]
        )
    );
    // Old rows take updates and index lookups at the new width.
    run(&mut s, "UPDATE t SET b = 7 WHERE id = 2").unwrap();
    assert_eq!(rows(&mut s, "SELECT b FROM t WHERE id = 2"), [[int(7)]]);
    // Several actions in one statement, each seeing the ones before it.
    run(
        &mut s,
        "ALTER TABLE t ADD c int NOT NULL DEFAULT 5, ADD d serial",
    )
    .unwrap();
    run(&mut s, "INSERT INTO t (id) VALUES (3)").unwrap();
    assert_eq!(
        rows(&mut s, "SELECT id, b, c, d FROM t ORDER BY id"),
        [
            [int(1), Value::Null, int(5), int(1)],
            [int(2), int(7), int(5), int(2)],
            [int(3), Value::Null, int(5), int(3)]
        ]
    );
    assert_eq!(
        code(run(&mut s, "ALTER TABLE t ADD e int NOT NULL")),
        "23502"
    );
    assert_eq!(code(run(&mut s, "ALTER TABLE t ADD a int")), "42701");
    run(&mut s, "ALTER TABLE t ADD COLUMN IF NOT EXISTS a int").unwrap();
    // Rolled back: the column is gone again, the rows as they were.
    run(
        &mut s,
        "BEGIN; ALTER TABLE t ADD z text DEFAULT 'zz'; ROLLBACK",
    )
    .unwrap();
    assert_eq!(code(run(&mut s, "SELECT z FROM t")), "42703");
    assert_eq!(query(&mut s, "SELECT * FROM t").0.len(), 5);
    // An empty table takes a NOT NULL column without a default.
    run(
        &mut s,
        "CREATE TABLE e (a int); ALTER TABLE e ADD b int NOT NULL",
    )
    .unwrap();
    assert_eq!(code(run(&mut s, "INSERT INTO e (a) VALUES (1)")), "23502");
    Ok(())
}

#[test]
fn drop_column_hides_it_drops_its_indexes_and_frees_its_name() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut s = Session::new(Arc::clone(&db));
    run(
        &mut s,
        "CREATE TABLE t (id int PRIMARY KEY, a text NOT NULL, b int, n serial); \
         CREATE INDEX t_b ON t (b); CREATE INDEX t_ab ON t (a, id); \
         INSERT INTO t (id, a, b) VALUES (1, 'x', 10), (2, 'y', 20)",
    )
    .unwrap();
    run(&mut s, "BEGIN; ALTER TABLE t DROP COLUMN b; ROLLBACK").unwrap();
    assert_eq!(rows(&mut s, "SELECT b FROM t WHERE id = 1"), [[int(10)]]);
    // A failing action undoes the ones before it in the statement.
    assert_eq!(
        code(run(&mut s, "ALTER TABLE t DROP COLUMN a, DROP nope")),
        "42703"
    );
    assert_eq!(rows(&mut s, "SELECT a FROM t WHERE id = 1"), [[text("x")]]);
    run(&mut s, "ALTER TABLE t DROP COLUMN a").unwrap();
    run(&mut s, "ALTER TABLE t DROP COLUMN IF EXISTS nope").unwrap();
    assert_eq!(code(run(&mut s, "ALTER TABLE t DROP COLUMN nope")), "42703");
    assert_eq!(
        query(&mut s, "SELECT * FROM t ORDER BY id"),
        (
            vec!["id".into(), "b".into(), "n".into()],
            vec![vec![int(1), int(10), int(1)], vec![int(2), int(20), int(2)]]
        )
    );
    assert_eq!(code(run(&mut s, "SELECT a FROM t")), "42703");
    // Its NOT NULL went with it; INSERT without a column list skips it.
    run(&mut s, "INSERT INTO t VALUES (3, 30)").unwrap();
    run(&mut s, "INSERT INTO t (id) VALUES (4)").unwrap();
    // The index over it went with it; the others stay.
    let idx = rows(
        &mut s,
        "SELECT relname FROM pg_class WHERE relkind = 'i' ORDER BY relname",
    );
    assert_eq!(idx, [[text("t_b")], [text("t_pkey")]]);
    // psql's column list (attisdropped filtered) and its name free for a new column.
    assert_eq!(
        rows(
            &mut s,
            "SELECT attname FROM pg_attribute WHERE attrelid = 't'::regclass \
             AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
        ),
        [[text("id")], [text("b")], [text("n")]]
    );
    run(&mut s, "ALTER TABLE t ADD a int DEFAULT 0").unwrap();
    assert_eq!(
        query(&mut s, "SELECT * FROM t WHERE id = 1"),
        (
            vec!["id".into(), "b".into(), "n".into(), "a".into()],
            vec![vec![int(1), int(10), int(1), int(0)]]
        )
    );
    // Dropping the primary key's column drops the key; a serial column takes its sequence.
    run(&mut s, "ALTER TABLE t DROP n").unwrap();
    assert_eq!(code(run(&mut s, "SELECT nextval('t_n_seq')")), "42P01");
    run(&mut s, "ALTER TABLE t DROP id").unwrap();
    run(&mut s, "INSERT INTO t (b) VALUES (10)").unwrap();
    assert_eq!(
        rows(&mut s, "SELECT count(*) FROM t WHERE b = 10"),
        [[int(2)]]
    );
    // COPY's columns leave it out too.
    drop(s);
    Arc::into_inner(db).expect("the only handle").close()?;
    let mut s = Session::new(open(dir.path())?);
    assert_eq!(
        query(&mut s, "SELECT * FROM t ORDER BY b, a LIMIT 1"),
        (vec!["b".into(), "a".into()], vec![vec![int(10), int(0)]])
    );
    Ok(())
}

/// ADD CONSTRAINT ... CHECK that waits for a writer's lock verifies the rows that writer
/// committed meanwhile (DDL reads after its lock, not with a snapshot from before it).
#[test]
fn a_check_added_after_a_wait_sees_what_the_writer_committed() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut a = Session::new(Arc::clone(&db));
    run(&mut a, "CREATE TABLE w (x int)").unwrap();
    run(&mut a, "BEGIN").unwrap();
    run(&mut a, "INSERT INTO w VALUES (-1)").unwrap();
    let (done, finished) = std::sync::mpsc::channel();
    let alter = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            let mut b = Session::new(db);
            done.send(run(&mut b, "ALTER TABLE w ADD CHECK (x > 0)"))
                .expect("the test waits for it");
        })
    };
    assert!(finished
        .recv_timeout(std::time::Duration::from_millis(300))
        .is_err());
    run(&mut a, "COMMIT").unwrap();
    let r = finished.recv_timeout(std::time::Duration::from_secs(10))?;
    assert_eq!(code(r), "23514");
    alter.join().expect("the ALTER thread ends");
    Ok(())
}
