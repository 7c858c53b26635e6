//! FOREIGN KEY constraints under concurrency: whatever the interleaving of transactions
//! that reference keys and transactions that delete them, at READ COMMITTED and REPEATABLE
//! READ, no referencing row without its key ever commits (the checks lock the referenced
//! row; REPEATABLE READ looks for referencing rows with the latest snapshot and fails with
//! 40001 rather than miss one).

mod common;

use std::sync::Arc;

use common::{one, open, run};
use quire_engine::Value;
use quire_sql::Session;

/// A deterministic generator (xorshift), one per thread.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

const KEYS: u64 = 6;
const ROUNDS: usize = 120;

/// What a transaction of the stress may fail with: the key is missing or still used, or
/// there already (two transactions putting a key back), a serialization failure, a deadlock.
fn expected_failure(e: &str) -> bool {
    ["23503", "23505", "40001", "40P01"]
        .iter()
        .any(|c| e.starts_with(c))
}

/// Runs `sql` as one transaction; a failure must be one the stress expects.
fn transaction(s: &mut Session, begin: &str, sql: &str) {
    run(s, begin).expect("BEGIN");
    match run(s, sql).and_then(|_| run(s, "COMMIT")) {
        Ok(_) => {}
        Err(e) => {
            assert!(expected_failure(&e), "unexpected failure: {e} for {sql}");
            let _ = run(s, "ROLLBACK");
        }
    }
}

fn stress(action: &str) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut s = Session::new(Arc::clone(&db));
    run(&mut s, "CREATE TABLE p (id int PRIMARY KEY)").unwrap();
    run(
        &mut s,
        &format!("CREATE TABLE c (id serial PRIMARY KEY, pid int REFERENCES p {action})"),
    )
    .unwrap();
    run(
        &mut s,
        "INSERT INTO p SELECT g FROM generate_series(1, 6) g",
    )
    .unwrap();
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                let mut s = Session::new(db);
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (t + 1));
                for _ in 0..ROUNDS {
                    let key = rng.below(KEYS) + 1;
                    let begin = if rng.below(2) == 0 {
                        "BEGIN ISOLATION LEVEL REPEATABLE READ"
                    } else {
                        "BEGIN"
                    };
                    let sql = match (t % 2, rng.below(3)) {
                        // Work between the check and COMMIT widens the window a
                        // deleter could slip through if the referenced row were not locked.
                        (0, _) => format!(
                            "INSERT INTO c (pid) VALUES ({key}); SELECT count(*) FROM generate_series(1, 3000)"
                        ),
                        (_, 0) => format!("DELETE FROM p WHERE id = {key}"),
                        (_, 1) => format!("INSERT INTO p VALUES ({key})"),
                        _ => format!("UPDATE c SET pid = {key} WHERE id % 7 = {}", key % 7),
                    };
                    transaction(&mut s, begin, &sql);
                }
            })
        })
        .collect();
    // Every snapshot, not only the last one, must be free of orphans: a key put back
    // later would hide one that committed meanwhile. (A READ COMMITTED statement reads its
    // two tables in one snapshot.)
    let mut seen = 0;
    while !threads.iter().all(std::thread::JoinHandle::is_finished) {
        assert_eq!(
            one(&mut s, ORPHANS),
            Value::Int(0),
            "no referencing row lost its key"
        );
        seen += 1;
    }
    for t in threads {
        t.join().expect("a stress thread ends");
    }
    assert_eq!(
        one(&mut s, ORPHANS),
        Value::Int(0),
        "no referencing row lost its key"
    );
    assert!(seen > 0);
    Ok(())
}

/// The referencing rows whose key is missing, in one snapshot.
const ORPHANS: &str =
    "SELECT count(*) FROM c LEFT JOIN p ON c.pid = p.id WHERE c.pid IS NOT NULL AND p.id IS NULL";

#[test]
fn no_orphan_commits_with_no_action() -> anyhow::Result<()> {
    stress("")
}

#[test]
fn no_orphan_commits_with_cascade() -> anyhow::Result<()> {
    stress("ON DELETE CASCADE")
}

/// A referencing row committed after a REPEATABLE READ snapshot: deleting its key fails
/// with 40001 instead of leaving it orphaned.
#[test]
fn repeatable_read_sees_a_later_reference() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut a = Session::new(Arc::clone(&db));
    let mut b = Session::new(Arc::clone(&db));
    run(&mut a, "CREATE TABLE p (id int PRIMARY KEY)").unwrap();
    run(&mut a, "CREATE TABLE c (pid int REFERENCES p)").unwrap();
    run(&mut a, "INSERT INTO p VALUES (1)").unwrap();
    run(&mut a, "BEGIN ISOLATION LEVEL REPEATABLE READ").unwrap();
    assert_eq!(one(&mut a, "SELECT count(*) FROM c"), Value::Int(0));
    run(&mut b, "INSERT INTO c VALUES (1)").unwrap();
    let e = run(&mut a, "DELETE FROM p WHERE id = 1").unwrap_err();
    assert!(e.starts_with("40001"), "{e}");
    run(&mut a, "ROLLBACK").unwrap();
    assert_eq!(one(&mut a, "SELECT count(*) FROM p"), Value::Int(1));
    Ok(())
}

/// A transaction that deleted the key first makes the referencing one wait, then fail.
#[test]
fn a_reference_waits_for_the_deleter() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut a = Session::new(Arc::clone(&db));
    run(&mut a, "CREATE TABLE p (id int PRIMARY KEY)").unwrap();
    run(&mut a, "CREATE TABLE c (pid int REFERENCES p)").unwrap();
    run(&mut a, "INSERT INTO p VALUES (1)").unwrap();
    run(&mut a, "BEGIN").unwrap();
    run(&mut a, "DELETE FROM p WHERE id = 1").unwrap();
    let (done, finished) = std::sync::mpsc::channel();
    let writer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            let mut b = Session::new(db);
            done.send(run(&mut b, "INSERT INTO c VALUES (1)"))
                .expect("the test waits for it");
        })
    };
    assert!(finished
        .recv_timeout(std::time::Duration::from_millis(300))
        .is_err());
    run(&mut a, "COMMIT").unwrap();
    let r = finished.recv_timeout(std::time::Duration::from_secs(10))?;
    assert!(r.as_ref().is_err_and(|e| e.starts_with("23503")), "{r:?}");
    writer.join().expect("the writer ends");
    Ok(())
}
