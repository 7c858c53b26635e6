//! Advisory locks between sessions: waits, their end by unlock, commit or the session's end,
//! deadlocks through them, and what PREPARE refuses.

mod common;

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use common::{one as value, open, open_with};
use quire_engine::{Database, Value};
use quire_sql::Session;

/// Runs every statement of `sql`; the first error's SQLSTATE, or the last outcome's tag.
fn run(s: &mut Session, sql: &str) -> Result<String, String> {
    common::run(s, sql).map_err(|e| e[..5].to_string())
}

/// Runs `sql` in a new session on another thread; its result arrives on the channel.
fn spawn(db: &Arc<Database>, sql: &'static str) -> mpsc::Receiver<Result<String, String>> {
    let (tx, rx) = mpsc::channel();
    let db = Arc::clone(db);
    std::thread::spawn(move || {
        let mut s = Session::new(db);
        let _ = tx.send(run(&mut s, sql));
    });
    rx
}

const BLOCKED: Duration = Duration::from_millis(300);
const PATIENCE: Duration = Duration::from_secs(10);

#[test]
fn a_session_lock_makes_others_wait_until_unlocked() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut a = Session::new(Arc::clone(&db));
    run(&mut a, "SELECT pg_advisory_lock(7)").unwrap();
    // Held past the statement's transaction: another session's try fails, its lock waits.
    let mut b = Session::new(Arc::clone(&db));
    assert_eq!(
        value(&mut b, "SELECT pg_try_advisory_lock(7)"),
        Value::Bool(false)
    );
    assert_eq!(
        value(&mut b, "SELECT pg_try_advisory_lock(0, 7)"),
        Value::Bool(true)
    );
    let waiter = spawn(&db, "SELECT pg_advisory_xact_lock_shared(7)");
    assert!(waiter.recv_timeout(BLOCKED).is_err());
    assert_eq!(
        value(
            &mut a,
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 7 AND NOT granted"
        ),
        Value::Int(1)
    );
    // The same session takes it again at once (re-entrant), and must unlock twice.
    run(&mut a, "SELECT pg_advisory_lock(7)").unwrap();
    assert_eq!(
        value(&mut a, "SELECT pg_advisory_unlock(7)"),
        Value::Bool(true)
    );
    assert!(waiter.recv_timeout(BLOCKED).is_err());
    assert_eq!(
        value(&mut a, "SELECT pg_advisory_unlock(7)"),
        Value::Bool(true)
    );
    assert_eq!(waiter.recv_timeout(PATIENCE)?, Ok("SELECT 1".into()));
    assert_eq!(
        value(&mut a, "SELECT pg_advisory_unlock(7)"),
        Value::Bool(false)
    );
    Ok(())
}

#[test]
fn a_sessions_end_and_a_transactions_end_release_their_locks() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut a = Session::new(Arc::clone(&db));
    run(
        &mut a,
        "SELECT pg_advisory_lock(1); BEGIN; SELECT pg_advisory_xact_lock(2)",
    )
    .unwrap();
    let mut b = Session::new(Arc::clone(&db));
    assert_eq!(
        value(&mut b, "SELECT pg_try_advisory_lock(2)"),
        Value::Bool(false)
    );
    run(&mut a, "COMMIT").unwrap();
    assert_eq!(
        value(&mut b, "SELECT pg_try_advisory_xact_lock(2)"),
        Value::Bool(true)
    );
    assert_eq!(
        value(&mut b, "SELECT pg_try_advisory_lock(1)"),
        Value::Bool(false)
    );
    drop(a);
    assert_eq!(
        value(&mut b, "SELECT pg_try_advisory_lock(1)"),
        Value::Bool(true)
    );
    run(&mut b, "SELECT pg_advisory_unlock_all()").unwrap();
    assert_eq!(
        value(
            &mut b,
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
        ),
        Value::Int(0)
    );
    Ok(())
}

#[test]
fn rollback_to_savepoint_releases_a_transaction_lock_taken_after_it() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut a = Session::new(Arc::clone(&db));
    let mut b = Session::new(Arc::clone(&db));
    run(
        &mut a,
        "BEGIN; SELECT pg_advisory_xact_lock(1); SAVEPOINT s; SELECT pg_advisory_xact_lock(2); SELECT pg_advisory_lock(3)",
    )
    .unwrap();
    run(&mut a, "ROLLBACK TO SAVEPOINT s").unwrap();
    assert_eq!(
        value(&mut b, "SELECT pg_try_advisory_lock(1)"),
        Value::Bool(false)
    );
    assert_eq!(
        value(&mut b, "SELECT pg_try_advisory_xact_lock(2)"),
        Value::Bool(true)
    );
    // A session-level lock stays: only its unlock or the session's end releases it.
    assert_eq!(
        value(&mut b, "SELECT pg_try_advisory_xact_lock(3)"),
        Value::Bool(false)
    );
    run(&mut a, "ROLLBACK").unwrap();
    assert_eq!(
        value(&mut b, "SELECT pg_try_advisory_xact_lock(1)"),
        Value::Bool(true)
    );
    assert_eq!(
        value(&mut b, "SELECT pg_try_advisory_xact_lock(3)"),
        Value::Bool(false)
    );
    Ok(())
}

#[test]
fn a_cycle_through_advisory_locks_is_a_deadlock() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut a = Session::new(Arc::clone(&db));
    run(&mut a, "SELECT pg_advisory_lock(1)").unwrap();
    let b = spawn(
        &db,
        "BEGIN; SELECT pg_advisory_xact_lock(2); SELECT pg_sleep(0.2); SELECT pg_advisory_xact_lock(1)",
    );
    std::thread::sleep(Duration::from_millis(100));
    // One of the two is the victim (40P01); the other gets its lock.
    let mine = run(&mut a, "SELECT pg_advisory_lock(2)");
    if mine.is_ok() {
        assert_eq!(b.recv_timeout(PATIENCE)?, Err("40P01".into()));
    } else {
        assert_eq!(mine, Err("40P01".into()));
        run(&mut a, "SELECT pg_advisory_unlock_all()").unwrap();
        assert_eq!(b.recv_timeout(PATIENCE)?, Ok("SELECT 1".into()));
    }
    Ok(())
}

#[test]
fn prepare_refuses_a_key_held_at_both_levels_and_keeps_session_locks() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open_with(dir.path(), |c| c.max_prepared_transactions = 2)?;
    let mut a = Session::new(Arc::clone(&db));
    let mut b = Session::new(Arc::clone(&db));
    run(
        &mut a,
        "SELECT pg_advisory_lock(1); BEGIN; SELECT pg_advisory_xact_lock(1)",
    )
    .unwrap();
    assert_eq!(run(&mut a, "PREPARE TRANSACTION 'p'"), Err("0A000".into()));
    run(&mut a, "BEGIN; SELECT pg_advisory_xact_lock(2)").unwrap();
    assert_eq!(
        run(&mut a, "PREPARE TRANSACTION 'q'"),
        Ok("PREPARE TRANSACTION".into())
    );
    // The prepared transaction holds 2; the session still holds 1.
    assert_eq!(
        value(&mut b, "SELECT pg_try_advisory_lock(2)"),
        Value::Bool(false)
    );
    assert_eq!(
        value(
            &mut b,
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid IS NULL AND objid = 2"
        ),
        Value::Int(1)
    );
    drop(a);
    assert_eq!(
        value(&mut b, "SELECT pg_try_advisory_lock(1)"),
        Value::Bool(true)
    );
    run(&mut b, "COMMIT PREPARED 'q'").unwrap();
    assert_eq!(
        value(&mut b, "SELECT pg_try_advisory_lock(2)"),
        Value::Bool(true)
    );
    Ok(())
}
