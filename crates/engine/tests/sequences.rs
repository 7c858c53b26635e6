//! Sequences as PostgreSQL's behave, through the embedded API:
//!
//! - `nextval` is not transactional: a value handed out in a transaction that rolls back is
//!   not handed out again; CREATE and DROP SEQUENCE are transactional;
//! - ALTER SEQUENCE's new options are transactional and survive a crash; the value stays;
//! - bounds: 2200H past MAXVALUE (or MINVALUE going down) without CYCLE, wrap with CYCLE;
//!   `setval` outside the bounds 22003; a table's oid given as a sequence 42809;
//! - durability: after power loss at any point of a run of `nextval`s (and across
//!   checkpoints taken in between), the sequence resumes past every value returned; after
//!   a clean shutdown it resumes exactly where it was.

mod common;

use common::{committing, config, crash, lookup_error, new_db, open_db, power_loss};
use quire_engine::{Column, IsolationLevel::*, SeqOptions, Type};

fn opts() -> SeqOptions {
    SeqOptions::default()
}

#[test]
fn nextval_survives_rollback_and_create_drop_are_transactional() {
    let (vfs, db) = new_db(11, config());
    let s = committing(&db, |tx| tx.create_sequence("s", &opts()).unwrap());
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(tx.nextval(s).unwrap(), 1);
    assert_eq!(tx.nextval(s).unwrap(), 2);
    tx.rollback().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(
        tx.nextval(s).unwrap(),
        3,
        "a rolled-back value is not given again"
    );
    tx.setval(s, 10, false).unwrap();
    assert_eq!(tx.nextval(s).unwrap(), 10);
    tx.setval(s, 20, true).unwrap();
    assert_eq!(tx.nextval(s).unwrap(), 21);
    tx.commit().unwrap();

    // A rolled-back CREATE leaves nothing; a rolled-back DROP keeps the sequence.
    let tx = db.begin(ReadCommitted).unwrap();
    let ghost = tx.create_sequence("ghost", &opts()).unwrap();
    assert_eq!(tx.nextval(ghost).unwrap(), 1);
    tx.rollback().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    assert!(tx.relation_named("ghost").unwrap().is_none());
    tx.drop_sequence(s).unwrap();
    tx.rollback().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(tx.nextval(s).unwrap(), 22);
    let err = tx.create_sequence("s", &opts()).unwrap_err();
    assert_eq!(err.sqlstate(), "42P07", "{err}");
    tx.rollback().unwrap();
    committing(&db, |tx| tx.drop_sequence(s).unwrap());
    assert_eq!(lookup_error(&db, "s"), Some("42P01"));
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    let tx = db.begin(ReadCommitted).unwrap();
    assert!(tx.relation_named("s").unwrap().is_none());
    assert!(tx.relation_named("ghost").unwrap().is_none());
    tx.commit().unwrap();
    db.close().unwrap();
}

#[test]
fn alter_sequence_changes_options_under_the_transaction() {
    let (vfs, db) = new_db(12, config());
    let s = committing(&db, |tx| tx.create_sequence("s", &opts()).unwrap());
    let by10 = SeqOptions {
        increment: 10,
        ..opts()
    };
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(tx.nextval(s).unwrap(), 1);
    tx.alter_sequence(s, &by10).unwrap();
    assert_eq!(
        tx.nextval(s).unwrap(),
        11,
        "the value stays, the step changes"
    );
    tx.rollback().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(tx.nextval(s).unwrap(), 12, "the rolled-back step is gone");
    tx.alter_sequence(s, &by10).unwrap();
    tx.commit().unwrap();
    crash(db, &vfs);
    let db = open_db(&vfs, config());
    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(tx.sequence_def(s).unwrap().options.increment, 10);
    let bad = SeqOptions {
        min_value: 5,
        max_value: 1,
        ..opts()
    };
    assert!(tx.alter_sequence(s, &bad).is_err());
    tx.rollback().unwrap();
    db.close().unwrap();
}

#[test]
fn bounds_cycle_and_wrong_kinds_fail_as_in_postgresql() {
    let (_vfs, db) = new_db(12, config());
    let tx = db.begin(ReadCommitted).unwrap();
    let small = tx
        .create_sequence(
            "small",
            &SeqOptions {
                max_value: 2,
                ..opts()
            },
        )
        .unwrap();
    let cyc = tx
        .create_sequence(
            "cyc",
            &SeqOptions {
                increment: -1,
                min_value: 1,
                max_value: 2,
                start: 2,
                cycle: true,
                ..opts()
            },
        )
        .unwrap();
    let t = tx
        .create_table("t", &[Column::new("id", Type::Int)])
        .unwrap();
    tx.commit().unwrap();

    let tx = db.begin(ReadCommitted).unwrap();
    assert_eq!(
        (0..5).map(|_| tx.nextval(cyc).unwrap()).collect::<Vec<_>>(),
        [2, 1, 2, 1, 2]
    );
    assert_eq!(tx.nextval(small).unwrap(), 1);
    assert_eq!(tx.nextval(small).unwrap(), 2);
    let err = tx.nextval(small).unwrap_err();
    assert_eq!(err.sqlstate(), "2200H");
    assert_eq!(
        err.to_string(),
        "nextval: reached maximum value of sequence \"small\" (2)"
    );
    tx.rollback().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    let err = tx.setval(small, 3, true).unwrap_err();
    assert_eq!(err.sqlstate(), "22003", "{err}");
    tx.rollback().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    let err = tx.nextval(t).unwrap_err();
    assert_eq!(err.sqlstate(), "42809", "{err}");
    tx.rollback().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    let bad = SeqOptions { start: 0, ..opts() };
    assert_eq!(
        tx.create_sequence("bad", &bad).unwrap_err().sqlstate(),
        "22023"
    );
    tx.rollback().unwrap();
    db.close().unwrap();
}

#[test]
fn after_power_loss_a_sequence_resumes_past_every_value_returned() {
    for seed in 0..8u64 {
        let (vfs, db) = new_db(100 + seed, config());
        let s = committing(&db, |tx| tx.create_sequence("s", &opts()).unwrap());
        let mut last = 0;
        // Rounds of nextvals, some across checkpoints, each ended by a power loss that may
        // keep any unsynced write (torn or not).
        for round in 0..4u64 {
            let tx = db_begin(&db);
            let n = 5 + (seed * 7 + round * 13) % 70;
            for i in 0..n {
                let v = tx.nextval(s).unwrap();
                assert!(v > last, "seed {seed}: {v} after {last}");
                last = v;
                if (seed + i) % 29 == 0 {
                    db.checkpoint().unwrap();
                }
            }
            tx.rollback().unwrap();
            if round == 3 {
                break;
            }
        }
        power_loss(db, &vfs, seed % 2 == 0);
        let db = open_db(&vfs, config());
        let tx = db_begin(&db);
        let v = tx.nextval(s).unwrap();
        assert!(
            v > last,
            "seed {seed}: {v} after a crash, {last} was returned"
        );
        assert!(
            v <= last + 1 + quire_engine::sequence::LOG_AHEAD_VALUES,
            "seed {seed}: at most 32 values skipped ({v} after {last})"
        );
        tx.commit().unwrap();
        db.close().unwrap();
    }
}

#[test]
fn after_a_clean_shutdown_a_sequence_resumes_exactly() {
    let (vfs, db) = new_db(13, config());
    let s = committing(&db, |tx| tx.create_sequence("s", &opts()).unwrap());
    let tx = db_begin(&db);
    for want in 1..=5 {
        assert_eq!(tx.nextval(s).unwrap(), want);
    }
    tx.commit().unwrap();
    db.close().unwrap();
    let db = open_db(&vfs, config());
    let tx = db_begin(&db);
    assert_eq!(tx.nextval(s).unwrap(), 6);
    let state = tx.sequence_state(s).unwrap();
    assert_eq!((state.last_value, state.is_called), (6, true));
    tx.commit().unwrap();
    db.close().unwrap();
}

fn db_begin(db: &quire_engine::Database) -> quire_engine::Transaction {
    db.begin(ReadCommitted).unwrap()
}
