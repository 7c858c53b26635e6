//! SELECT ... FOR UPDATE between sessions: NOWAIT fails at once with 55P03 naming the table,
//! SKIP LOCKED leaves out the rows another transaction holds and LIMIT counts only the rows
//! it locked (a job queue's workers each take different rows).

mod common;

use std::sync::Arc;

use common::{open, query, run};
use quire_engine::Value;
use quire_sql::Session;

fn ids(s: &mut Session, sql: &str) -> Vec<i64> {
    query(s, sql)
        .1
        .into_iter()
        .map(|r| match r.first() {
            Some(Value::Int(i)) => *i,
            other => panic!("not an id: {other:?}"),
        })
        .collect()
}

const TAKE: &str =
    "SELECT id FROM jobs WHERE state = 'new' ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED";

#[test]
fn skip_locked_workers_take_different_rows_and_nowait_fails_at_once() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut a = Session::new(Arc::clone(&db));
    let mut b = Session::new(Arc::clone(&db));
    run(
        &mut a,
        "CREATE TABLE jobs (id integer PRIMARY KEY, state text NOT NULL); \
         INSERT INTO jobs SELECT g, 'new' FROM generate_series(1, 5) g",
    )
    .unwrap();
    run(&mut a, "BEGIN").unwrap();
    assert_eq!(ids(&mut a, TAKE), [1, 2]);
    run(&mut b, "BEGIN").unwrap();
    assert_eq!(ids(&mut b, TAKE), [3, 4]);
    // A third worker (a's rows and b's held) gets what is left.
    let mut c = Session::new(Arc::clone(&db));
    assert_eq!(ids(&mut c, TAKE), [5]);
    let e = run(&mut c, "SELECT * FROM jobs WHERE id = 2 FOR UPDATE NOWAIT").unwrap_err();
    assert_eq!(e, "55P03 could not obtain lock on row in relation \"jobs\"");
    // A row being updated is held too.
    run(&mut a, "UPDATE jobs SET state = 'done' WHERE id = 1").unwrap();
    run(&mut a, "COMMIT").unwrap();
    assert_eq!(ids(&mut c, TAKE), [2, 5]);
    run(&mut b, "ROLLBACK").unwrap();
    assert_eq!(ids(&mut c, TAKE), [2, 3]);
    assert_eq!(
        ids(&mut c, "SELECT id FROM jobs ORDER BY id FOR UPDATE NOWAIT"),
        [1, 2, 3, 4, 5]
    );
    Ok(())
}
