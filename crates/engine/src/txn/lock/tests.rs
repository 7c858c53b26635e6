use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Barrier};
use std::thread;

use super::*;
use crate::rng::SplitMix64;
use crate::types::{Oid, Xid};

use LockMode::{
    AccessExclusive, AccessShare, Exclusive, RowExclusive, RowShare, Share, ShareRowExclusive,
    ShareUpdateExclusive,
};

/// Short, so deadlock tests finish quickly; long enough that a check is not run on every
/// wake-up.
const DEADLOCK_TIMEOUT: Duration = Duration::from_millis(20);
/// How long a test waits for something that must happen before calling it a hang.
const PATIENCE: Duration = Duration::from_secs(10);

fn manager() -> Arc<LockManager> {
    Arc::new(LockManager::new(1000, DEADLOCK_TIMEOUT))
}

fn rel(rel_oid: u64) -> LockTag {
    LockTag::Relation {
        db_oid: 1,
        rel_oid: Oid(rel_oid),
    }
}

fn xact(xid: u64) -> LockTag {
    LockTag::Transaction { xid: Xid(xid) }
}

/// Acquires in a new thread; the result arrives on the channel.
fn spawn_acquire(
    lm: &Arc<LockManager>,
    owner: LockOwner,
    tag: LockTag,
    mode: LockMode,
    wait: LockWait,
) -> Receiver<Result<()>> {
    let lm = Arc::clone(lm);
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(lm.acquire(owner, tag, mode, wait));
    });
    rx
}

/// Like [`spawn_acquire`], then `release_all` whatever the outcome (a transaction that ends).
fn spawn_acquire_then_end(
    lm: &Arc<LockManager>,
    owner: LockOwner,
    tag: LockTag,
    mode: LockMode,
) -> Receiver<Result<()>> {
    let lm = Arc::clone(lm);
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let r = lm.acquire(owner, tag, mode, LockWait::Block);
        lm.release_all(owner);
        let _ = tx.send(r);
    });
    rx
}

/// Waits (bounded) until `owner` is queued: observes the block instead of sleeping and hoping.
fn await_waiting(lm: &LockManager, owner: LockOwner) {
    let start = Instant::now();
    while !lm.is_waiting(owner) {
        assert!(
            start.elapsed() < PATIENCE,
            "owner {owner} never started waiting"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

fn outcome(rx: &Receiver<Result<()>>) -> Result<()> {
    match rx.recv_timeout(PATIENCE) {
        Ok(r) => r,
        Err(e) => panic!("acquire did not finish: {e}"),
    }
}

fn assert_still_blocked(lm: &LockManager, owner: LockOwner, rx: &Receiver<Result<()>>) {
    assert!(lm.is_waiting(owner), "owner {owner} should still wait");
    assert!(
        matches!(rx.try_recv(), Err(mpsc::TryRecvError::Empty)),
        "owner {owner} should not have finished"
    );
}

fn ok(lm: &LockManager, owner: LockOwner, tag: LockTag, mode: LockMode) {
    lm.acquire(owner, tag, mode, LockWait::NoWait)
        .unwrap_or_else(|e| panic!("owner {owner} {mode} on {tag}: {e}"));
}

fn assert_empty(lm: &LockManager) {
    lm.check_invariants().unwrap();
    assert_eq!(lm.entries_in_use(), 0);
    for g in &lm.fast {
        assert!(g.0.lock().holds.is_empty());
    }
    for (slot, n) in lm.strong.iter().enumerate() {
        assert_eq!(n.load(Ordering::SeqCst), 0, "strong-lock slot {slot}");
    }
    for p in &lm.partitions {
        assert!(p.0.lock().locks.is_empty());
    }
    for p in &lm.owners {
        assert!(p.0.lock().owners.is_empty());
    }
}

// ------------------------------------------------------------------------------ modes, tags

#[test]
fn lock_conflict_matrix_is_postgresqls() {
    // PostgreSQL manual, "Table 13.2. Conflicting Lock Modes". Rows: requested mode; columns:
    // existing mode, in the order AccessShare .. AccessExclusive.
    const Y: bool = true;
    const N: bool = false;
    let expected: [(LockMode, [bool; 8]); 8] = [
        (AccessShare, [N, N, N, N, N, N, N, Y]),
        (RowShare, [N, N, N, N, N, N, Y, Y]),
        (RowExclusive, [N, N, N, N, Y, Y, Y, Y]),
        (ShareUpdateExclusive, [N, N, N, Y, Y, Y, Y, Y]),
        (Share, [N, N, Y, Y, N, Y, Y, Y]),
        (ShareRowExclusive, [N, N, Y, Y, Y, Y, Y, Y]),
        (Exclusive, [N, Y, Y, Y, Y, Y, Y, Y]),
        (AccessExclusive, [Y, Y, Y, Y, Y, Y, Y, Y]),
    ];
    let columns = [
        AccessShare,
        RowShare,
        RowExclusive,
        ShareUpdateExclusive,
        Share,
        ShareRowExclusive,
        Exclusive,
        AccessExclusive,
    ];
    assert_eq!(columns, LockMode::ALL);
    for (requested, row) in expected {
        for (existing, want) in columns.iter().zip(row) {
            assert_eq!(
                requested.conflicts_with(*existing),
                want,
                "{requested:?} vs {existing:?}"
            );
        }
    }
}

#[test]
fn lock_mode_names_and_numbers() {
    let names: Vec<&str> = LockMode::ALL.iter().map(|m| m.name()).collect();
    assert_eq!(
        names,
        [
            "AccessShareLock",
            "RowShareLock",
            "RowExclusiveLock",
            "ShareUpdateExclusiveLock",
            "ShareLock",
            "ShareRowExclusiveLock",
            "ExclusiveLock",
            "AccessExclusiveLock"
        ]
    );
    for (i, m) in LockMode::ALL.iter().enumerate() {
        assert_eq!(m.to_u8(), i as u8 + 1);
        assert_eq!(LockMode::from_u8(m.to_u8()), Some(*m));
    }
    for b in [0u8, 9, 100, 255] {
        assert_eq!(LockMode::from_u8(b), None);
    }
    assert!(LockMode::ALL.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn lock_tag_encoding_round_trips_and_rejects_garbage() {
    let tags = [
        rel(16384),
        LockTag::Relation {
            db_oid: u32::MAX,
            rel_oid: Oid(u64::MAX),
        },
        xact(0),
        xact(u64::MAX),
    ];
    let mut buf = Vec::new();
    for t in &tags {
        t.encode(&mut buf);
    }
    assert_eq!(buf.len(), tags.len() * LockTag::ENCODED_LEN);
    let mut at = 0;
    for t in &tags {
        let (got, used) = LockTag::decode(&buf[at..]).unwrap();
        assert_eq!((got, used), (*t, LockTag::ENCODED_LEN));
        at += used;
    }
    // Truncated, unknown kind, non-zero padding.
    let mut one = Vec::new();
    xact(7).encode(&mut one);
    for len in 0..LockTag::ENCODED_LEN {
        assert_eq!(LockTag::decode(&one[..len]), None);
    }
    let mut bad = one.clone();
    bad[0] = 9;
    assert_eq!(LockTag::decode(&bad), None);
    let mut bad = one.clone();
    bad[12] = 1;
    assert_eq!(LockTag::decode(&bad), None);
    // Random garbage never panics, and whatever decodes re-encodes to the same bytes.
    let mut rng = SplitMix64::new(42);
    for _ in 0..20_000 {
        let len = (rng.next() % 20) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if let Some(b) = bytes.first_mut() {
            *b %= 4;
        }
        if let Some((tag, used)) = LockTag::decode(&bytes) {
            let mut again = Vec::new();
            tag.encode(&mut again);
            assert_eq!(&bytes[..used], &again[..]);
        }
    }
    assert_eq!(rel(16384).to_string(), "relation 16384 of database 1");
    assert_eq!(xact(1234).to_string(), "transaction 1234");
}

// ------------------------------------------------------------------------------ holding

#[test]
fn lock_holds_are_counted_and_reentrant() {
    let lm = manager();
    let t = rel(1);
    ok(&lm, LockOwner(1), t, AccessExclusive);
    ok(&lm, LockOwner(1), t, AccessExclusive);
    ok(&lm, LockOwner(1), t, AccessShare);
    ok(&lm, LockOwner(1), t, RowExclusive);
    assert_eq!(
        lm.entries_in_use(),
        1,
        "several modes on one tag are one entry"
    );
    assert!(lm.release(LockOwner(1), t, AccessExclusive));
    assert!(
        lm.holds(LockOwner(1), t, AccessExclusive),
        "one of two holds remains"
    );
    assert!(
        lm.acquire(LockOwner(2), t, AccessShare, LockWait::NoWait)
            .is_err(),
        "the remaining hold still excludes others"
    );
    assert!(lm.release(LockOwner(1), t, AccessExclusive));
    assert!(!lm.holds(LockOwner(1), t, AccessExclusive));
    assert!(
        !lm.release(LockOwner(1), t, AccessExclusive),
        "not held any more"
    );
    assert!(!lm.release(LockOwner(1), t, Share), "never held");
    assert!(!lm.release(LockOwner(9), t, AccessShare), "other owner");
    assert!(!lm.release(LockOwner(1), rel(2), AccessShare), "other tag");
    ok(&lm, LockOwner(2), t, AccessShare);
    assert!(lm.release(LockOwner(1), t, AccessShare));
    assert!(lm.release(LockOwner(1), t, RowExclusive));
    assert_eq!(lm.locks_of(LockOwner(1)), []);
    assert!(lm.release(LockOwner(2), t, AccessShare));
    assert_empty(&lm);
    assert_eq!(lm.stats().acquired.get(), 5);
}

#[test]
fn lock_only_holder_upgrades_at_once() {
    let lm = manager();
    let t = rel(1);
    ok(&lm, LockOwner(1), t, AccessShare);
    ok(&lm, LockOwner(1), t, RowExclusive);
    ok(&lm, LockOwner(1), t, AccessExclusive);
    assert_eq!(
        lm.locks_of(LockOwner(1)),
        [(t, AccessShare), (t, RowExclusive), (t, AccessExclusive)]
    );
    // With a second holder, the upgrade conflicts and waits.
    ok(&lm, LockOwner(2), rel(2), AccessShare);
    ok(&lm, LockOwner(1), rel(2), AccessShare);
    assert!(matches!(
        lm.acquire(LockOwner(1), rel(2), AccessExclusive, LockWait::NoWait),
        Err(Error::LockNotAvailable { .. })
    ));
    assert!(
        lm.holds(LockOwner(1), rel(2), AccessShare),
        "a refused upgrade keeps the hold"
    );
    lm.check_invariants().unwrap();
}

#[test]
fn lock_release_all_releases_everything_and_wakes() {
    let lm = manager();
    for r in 0..10 {
        ok(&lm, LockOwner(1), rel(r), RowExclusive);
        ok(&lm, LockOwner(1), rel(r), RowExclusive);
        ok(&lm, LockOwner(1), rel(r), Share);
    }
    ok(&lm, LockOwner(1), xact(1), Exclusive);
    let rx = spawn_acquire(&lm, LockOwner(2), rel(3), AccessExclusive, LockWait::Block);
    await_waiting(&lm, LockOwner(2));
    assert_eq!(lm.entries_in_use(), 12);
    lm.release_all(LockOwner(1));
    outcome(&rx).unwrap();
    assert_eq!(lm.locks_of(LockOwner(1)), []);
    assert_eq!(lm.locks_of(LockOwner(2)), [(rel(3), AccessExclusive)]);
    lm.release_all(LockOwner(2));
    lm.release_all(LockOwner(2)); // nothing left: a no-op
    assert_empty(&lm);
}

#[test]
fn lock_locks_of_lists_each_mode_once_sorted() {
    let lm = manager();
    ok(&lm, LockOwner(1), xact(5), Exclusive);
    ok(&lm, LockOwner(1), rel(9), RowExclusive);
    ok(&lm, LockOwner(1), rel(9), RowExclusive);
    ok(&lm, LockOwner(1), rel(9), AccessShare);
    ok(&lm, LockOwner(1), rel(2), AccessShare);
    ok(&lm, LockOwner(2), rel(2), AccessShare);
    assert_eq!(
        lm.locks_of(LockOwner(1)),
        [
            (rel(2), AccessShare),
            (rel(9), AccessShare),
            (rel(9), RowExclusive),
            (xact(5), Exclusive),
        ]
    );
    assert_eq!(lm.locks_of(LockOwner(2)), [(rel(2), AccessShare)]);
    assert_eq!(lm.locks_of(LockOwner(3)), []);
}

#[test]
fn lock_transfer_all_keeps_third_party_blocked() {
    let lm = manager();
    let (session, prepared, third) = (LockOwner(1), LockOwner(1_000_001), LockOwner(3));
    ok(&lm, session, rel(1), RowExclusive);
    ok(&lm, session, rel(1), RowExclusive);
    ok(&lm, session, xact(100), Exclusive);
    ok(&lm, session, rel(2), AccessShare);
    let rx = spawn_acquire(&lm, third, rel(1), AccessExclusive, LockWait::Block);
    await_waiting(&lm, third);
    let before = lm.entries_in_use();

    lm.transfer_all(session, prepared);

    lm.check_invariants().unwrap();
    assert_eq!(lm.locks_of(session), []);
    assert_eq!(
        lm.locks_of(prepared),
        [
            (rel(1), RowExclusive),
            (rel(2), AccessShare),
            (xact(100), Exclusive)
        ]
    );
    // The session's fast hold on rel(2) is in the table now: a prepared transaction's locks
    // all are.
    assert_eq!(lm.entries_in_use(), before + 1);
    // Both holds moved: the prepared owner must release RowExclusive twice.
    assert!(lm.release(prepared, rel(1), RowExclusive));
    assert!(lm.holds(prepared, rel(1), RowExclusive));
    // The old owner ending (as the session does after PREPARE) frees nothing.
    lm.release_all(session);
    assert_still_blocked(&lm, third, &rx);
    assert!(lm
        .acquire(LockOwner(4), xact(100), Share, LockWait::NoWait)
        .is_err());
    lm.release_all(prepared); // COMMIT PREPARED
    outcome(&rx).unwrap();
    lm.release_all(third);
    assert_empty(&lm);
}

#[test]
fn lock_transfer_all_merges_into_existing_holds() {
    let lm = manager();
    ok(&lm, LockOwner(1), rel(1), AccessShare);
    ok(&lm, LockOwner(2), rel(1), AccessShare);
    ok(&lm, LockOwner(2), rel(1), RowExclusive);
    lm.transfer_all(LockOwner(1), LockOwner(2));
    lm.check_invariants().unwrap();
    assert_eq!(lm.entries_in_use(), 1);
    assert!(lm.release(LockOwner(2), rel(1), AccessShare));
    assert!(lm.release(LockOwner(2), rel(1), AccessShare));
    assert!(!lm.release(LockOwner(2), rel(1), AccessShare));
    lm.transfer_all(LockOwner(2), LockOwner(2)); // to itself: nothing happens
    lm.transfer_all(LockOwner(7), LockOwner(8)); // nothing held: nothing happens
    lm.release_all(LockOwner(2));
    assert_empty(&lm);
}

// ------------------------------------------------------------------------------ waiting

#[test]
fn lock_waiter_is_granted_when_holder_releases() {
    let lm = manager();
    let t = rel(1);
    ok(&lm, LockOwner(1), t, AccessExclusive);
    ok(&lm, LockOwner(1), t, AccessExclusive);
    let rx = spawn_acquire(&lm, LockOwner(2), t, AccessShare, LockWait::Block);
    await_waiting(&lm, LockOwner(2));
    assert_eq!(lm.waiting_for(LockOwner(2)), Some((t, AccessShare)));
    lm.check_invariants().unwrap();
    assert!(lm.release(LockOwner(1), t, AccessExclusive));
    // One hold is left: still blocked.
    assert_still_blocked(&lm, LockOwner(2), &rx);
    assert!(lm.release(LockOwner(1), t, AccessExclusive));
    outcome(&rx).unwrap();
    assert!(lm.holds(LockOwner(2), t, AccessShare));
    assert!(!lm.is_waiting(LockOwner(2)));
    assert_eq!(lm.stats().waits.load(Ordering::Relaxed), 1);
    lm.release_all(LockOwner(2));
    assert_empty(&lm);
}

#[test]
fn lock_release_wakes_every_compatible_waiter_in_order() {
    let lm = manager();
    let t = rel(1);
    ok(&lm, LockOwner(1), t, AccessExclusive);
    let first = spawn_acquire(&lm, LockOwner(2), t, AccessShare, LockWait::Block);
    await_waiting(&lm, LockOwner(2));
    let second = spawn_acquire(&lm, LockOwner(3), t, RowExclusive, LockWait::Block);
    await_waiting(&lm, LockOwner(3));
    let third = spawn_acquire(&lm, LockOwner(4), t, Share, LockWait::Block);
    await_waiting(&lm, LockOwner(4));
    let fourth = spawn_acquire(&lm, LockOwner(5), t, AccessShare, LockWait::Block);
    await_waiting(&lm, LockOwner(5));
    lm.release_all(LockOwner(1));
    // AccessShare and RowExclusive go; Share conflicts with RowExclusive; the AccessShare
    // behind it does not conflict with Share, so it goes too.
    outcome(&first).unwrap();
    outcome(&second).unwrap();
    outcome(&fourth).unwrap();
    assert_still_blocked(&lm, LockOwner(4), &third);
    lm.check_invariants().unwrap();
    lm.release_all(LockOwner(3));
    outcome(&third).unwrap();
    for o in 2..=5 {
        lm.release_all(LockOwner(o));
    }
    assert_empty(&lm);
}

#[test]
fn lock_queue_is_fair_but_holders_go_ahead() {
    let lm = manager();
    let t = rel(1);
    ok(&lm, LockOwner(1), t, AccessShare);
    ok(&lm, LockOwner(5), t, AccessShare);
    let ae = spawn_acquire(&lm, LockOwner(2), t, AccessExclusive, LockWait::Block);
    await_waiting(&lm, LockOwner(2));
    // Share does not conflict with the AccessShare held, but with the AccessExclusive queued.
    assert!(matches!(
        lm.acquire(LockOwner(3), t, Share, LockWait::NoWait),
        Err(Error::LockNotAvailable { .. })
    ));
    let share = spawn_acquire(&lm, LockOwner(3), t, Share, LockWait::Block);
    await_waiting(&lm, LockOwner(3));
    // A holder skips the queue: Share and even Exclusive (compatible with owner 5's
    // AccessShare) are granted at once to owner 1.
    ok(&lm, LockOwner(1), t, Share);
    lm.release(LockOwner(1), t, Share);
    ok(&lm, LockOwner(1), t, Exclusive);
    lm.check_invariants().unwrap();
    lm.release_all(LockOwner(1));
    assert_still_blocked(&lm, LockOwner(2), &ae);
    lm.release_all(LockOwner(5));
    outcome(&ae).unwrap();
    assert_still_blocked(&lm, LockOwner(3), &share);
    lm.release_all(LockOwner(2));
    outcome(&share).unwrap();
    lm.release_all(LockOwner(3));
    assert_empty(&lm);
}

#[test]
fn lock_upgrade_waits_for_other_holders_not_the_queue() {
    let lm = manager();
    let t = rel(1);
    ok(&lm, LockOwner(1), t, AccessShare);
    ok(&lm, LockOwner(2), t, AccessShare);
    // Owner 3 queues for AccessExclusive behind both holders.
    let third = spawn_acquire(&lm, LockOwner(3), t, AccessExclusive, LockWait::Block);
    await_waiting(&lm, LockOwner(3));
    // Owner 1 upgrades to AccessExclusive: it waits for owner 2, not for owner 3.
    let up = spawn_acquire(&lm, LockOwner(1), t, AccessExclusive, LockWait::Block);
    await_waiting(&lm, LockOwner(1));
    lm.check_invariants().unwrap();
    lm.release_all(LockOwner(2));
    outcome(&up).unwrap();
    assert_still_blocked(&lm, LockOwner(3), &third);
    lm.release_all(LockOwner(1));
    outcome(&third).unwrap();
    lm.release_all(LockOwner(3));
    assert_empty(&lm);
}

#[test]
fn lock_nowait_and_timeout_fail_without_trace() {
    let lm = manager();
    let t = rel(1);
    ok(&lm, LockOwner(1), t, AccessExclusive);
    let used = lm.entries_in_use();

    let e = lm
        .acquire(LockOwner(2), t, AccessShare, LockWait::NoWait)
        .unwrap_err();
    assert_eq!(e.sqlstate(), "55P03");
    assert_eq!(
        e.to_string(),
        "could not obtain AccessShareLock on relation 1 of database 1"
    );
    assert!(!lm.is_waiting(LockOwner(2)));
    assert_eq!(lm.entries_in_use(), used);
    // Nothing for a tag that nobody else holds either.
    assert!(lm
        .acquire(LockOwner(2), rel(99), AccessShare, LockWait::NoWait)
        .is_ok());
    lm.release_all(LockOwner(2));

    let start = Instant::now();
    let e = lm
        .acquire(LockOwner(2), t, Share, LockWait::TimeoutMs(30))
        .unwrap_err();
    assert!(start.elapsed() >= Duration::from_millis(30));
    assert_eq!(e.sqlstate(), "55P03");
    assert_eq!(e.to_string(), "canceling statement due to lock timeout");
    assert!(matches!(&e, Error::LockTimeout { what } if what.contains("within 30 ms")), "{e:?}");
    assert!(!lm.is_waiting(LockOwner(2)));
    assert_eq!(lm.locks_of(LockOwner(2)), []);
    assert_eq!(lm.entries_in_use(), used);
    lm.check_invariants().unwrap();

    // A queue with a leftover conflicting request would refuse this NoWait AccessExclusive.
    lm.release_all(LockOwner(1));
    ok(&lm, LockOwner(3), t, AccessExclusive);
    lm.release_all(LockOwner(3));
    assert_empty(&lm);
}

#[test]
fn lock_timeout_of_a_queued_waiter_lets_those_behind_go() {
    let lm = manager();
    let t = rel(1);
    ok(&lm, LockOwner(1), t, AccessShare);
    let ae = spawn_acquire(
        &lm,
        LockOwner(2),
        t,
        AccessExclusive,
        LockWait::TimeoutMs(60),
    );
    await_waiting(&lm, LockOwner(2));
    // AccessShare is compatible with the hold but queues behind the AccessExclusive request.
    let share = spawn_acquire(&lm, LockOwner(3), t, AccessShare, LockWait::Block);
    await_waiting(&lm, LockOwner(3));
    assert!(matches!(outcome(&ae), Err(Error::LockTimeout { .. })));
    // Owner 1 never released: owner 3 goes because the request ahead of it left.
    outcome(&share).unwrap();
    lm.check_invariants().unwrap();
    lm.release_all(LockOwner(1));
    lm.release_all(LockOwner(3));
    assert_empty(&lm);
}

#[test]
fn lock_second_concurrent_wait_of_one_owner_is_refused() {
    let lm = manager();
    ok(&lm, LockOwner(1), rel(1), AccessExclusive);
    ok(&lm, LockOwner(1), rel(2), AccessExclusive);
    let rx = spawn_acquire(&lm, LockOwner(2), rel(1), AccessShare, LockWait::Block);
    await_waiting(&lm, LockOwner(2));
    let e = lm
        .acquire(LockOwner(2), rel(2), AccessShare, LockWait::Block)
        .unwrap_err();
    assert_eq!(e.sqlstate(), "25000");
    lm.check_invariants().unwrap();
    lm.release_all(LockOwner(1));
    outcome(&rx).unwrap();
    lm.release_all(LockOwner(2));
    assert_empty(&lm);
}

// ------------------------------------------------------------------------------ deadlocks

/// Runs the owners' waiting requests (each after its first lock was taken) and checks that
/// exactly one is a deadlock victim, and that all others complete once the victim ended.
fn expect_one_victim(lm: &Arc<LockManager>, waits: &[(LockOwner, LockTag, LockMode)]) -> String {
    let rxs: Vec<_> = waits
        .iter()
        .map(|&(o, t, m)| spawn_acquire_then_end(lm, o, t, m))
        .collect();
    let mut victims = Vec::new();
    for (rx, &(owner, _, _)) in rxs.iter().zip(waits) {
        match outcome(rx) {
            Ok(()) => {}
            Err(e) => {
                assert_eq!(e.sqlstate(), "40P01", "{e}");
                let Error::Deadlock { detail } = e else {
                    unreachable!()
                };
                victims.push((owner, detail));
            }
        }
    }
    assert_eq!(victims.len(), 1, "{victims:?}");
    assert_eq!(lm.stats().deadlocks.load(Ordering::Relaxed), 1);
    assert_empty(lm);
    let (victim, detail) = victims.pop().expect("one victim");
    assert!(
        detail.starts_with(&format!("Process {victim} waits for ")),
        "{detail}"
    );
    assert_eq!(detail.lines().count(), waits.len(), "{detail}");
    detail
}

#[test]
fn lock_deadlock_of_two_has_exactly_one_victim() {
    let lm = manager();
    let (a, b) = (LockOwner(7), LockOwner(9));
    ok(&lm, a, rel(1), AccessExclusive);
    ok(&lm, b, rel(2), AccessExclusive);
    let detail = expect_one_victim(
        &lm,
        &[(a, rel(2), AccessExclusive), (b, rel(1), AccessExclusive)],
    );
    let want_a = "Process 7 waits for AccessExclusiveLock on relation 2 of database 1; \
                  blocked by process 9.\n\
                  Process 9 waits for AccessExclusiveLock on relation 1 of database 1; \
                  blocked by process 7.";
    let want_b = "Process 9 waits for AccessExclusiveLock on relation 1 of database 1; \
                  blocked by process 7.\n\
                  Process 7 waits for AccessExclusiveLock on relation 2 of database 1; \
                  blocked by process 9.";
    assert!(detail == want_a || detail == want_b, "{detail}");
}

#[test]
fn lock_deadlock_of_three_has_exactly_one_victim() {
    let lm = manager();
    for o in 1..=3 {
        ok(&lm, LockOwner(o), rel(o), RowExclusive);
    }
    expect_one_victim(
        &lm,
        &[
            (LockOwner(1), rel(2), Share),
            (LockOwner(2), rel(3), Share),
            (LockOwner(3), rel(1), Share),
        ],
    );
}

#[test]
fn lock_deadlock_through_transaction_tags() {
    // Row-lock style: each transaction holds its own xid Exclusive and waits (Share) for the
    // other's xid, as two updaters of each other's rows do.
    let lm = manager();
    ok(&lm, LockOwner(100), xact(100), Exclusive);
    ok(&lm, LockOwner(200), xact(200), Exclusive);
    let detail = expect_one_victim(
        &lm,
        &[
            (LockOwner(100), xact(200), Share),
            (LockOwner(200), xact(100), Share),
        ],
    );
    assert!(
        detail.contains("waits for ShareLock on transaction 200; blocked by process 200.")
            && detail.contains("waits for ShareLock on transaction 100; blocked by process 100."),
        "{detail}"
    );
}

#[test]
fn lock_deadlock_through_queue_position() {
    // A holds AccessShare on T1; B queues for AccessExclusive on T1 (waits for A); C queues for
    // AccessShare on T1 behind B (waits for B: a soft edge) and holds T2, which A then wants.
    // Cycle A → C → B → A.
    let lm = manager();
    let (a, b, c) = (LockOwner(1), LockOwner(2), LockOwner(3));
    ok(&lm, a, rel(1), AccessShare);
    ok(&lm, c, rel(2), AccessExclusive);
    let rb = spawn_acquire_then_end(&lm, b, rel(1), AccessExclusive);
    await_waiting(&lm, b);
    let rc = spawn_acquire_then_end(&lm, c, rel(1), AccessShare);
    await_waiting(&lm, c);
    let ra = spawn_acquire_then_end(&lm, a, rel(2), AccessShare);
    let results = [outcome(&ra), outcome(&rb), outcome(&rc)];
    let victims = results.iter().filter(|r| r.is_err()).count();
    assert_eq!(victims, 1, "{results:?}");
    assert!(results.iter().all(|r| r
        .as_ref()
        .map_or_else(|e| e.sqlstate() == "40P01", |()| true)));
    assert_empty(&lm);
}

#[test]
fn lock_long_wait_behind_a_running_holder_is_no_deadlock() {
    let lm = manager();
    let t = rel(1);
    ok(&lm, LockOwner(1), t, AccessExclusive);
    // The holder also waits, but for something unrelated to the waiter: still no cycle.
    ok(&lm, LockOwner(3), rel(2), AccessExclusive);
    let holder_waits = spawn_acquire(&lm, LockOwner(1), rel(2), Share, LockWait::Block);
    await_waiting(&lm, LockOwner(1));
    let rx = spawn_acquire(&lm, LockOwner(2), t, AccessShare, LockWait::Block);
    await_waiting(&lm, LockOwner(2));
    // Let the check run several times (each after DEADLOCK_TIMEOUT).
    let start = Instant::now();
    while lm.stats().deadlock_checks.load(Ordering::Relaxed) < 6 {
        assert!(
            start.elapsed() < PATIENCE,
            "the deadlock check does not run"
        );
        thread::sleep(Duration::from_millis(2));
    }
    assert_still_blocked(&lm, LockOwner(2), &rx);
    assert_eq!(lm.stats().deadlocks.load(Ordering::Relaxed), 0);
    lm.release_all(LockOwner(3));
    outcome(&holder_waits).unwrap();
    lm.release_all(LockOwner(1));
    outcome(&rx).unwrap();
    lm.release_all(LockOwner(2));
    assert_empty(&lm);
}

// ------------------------------------------------------------------------------ capacity

#[test]
fn lock_table_full_is_out_of_shared_memory() {
    let lm = Arc::new(LockManager::new(4, DEADLOCK_TIMEOUT));
    // ShareUpdateExclusive is neither weak nor strong: always in the table.
    for r in 0..4 {
        ok(&lm, LockOwner(1), rel(r), ShareUpdateExclusive);
    }
    let e = lm
        .acquire(LockOwner(1), rel(4), ShareUpdateExclusive, LockWait::Block)
        .unwrap_err();
    assert_eq!(e.sqlstate(), "53200");
    assert_eq!(
        e.to_string(),
        "out of shared memory: the lock table is full (4 locks) \
         (hint: Increase max_locks_per_transaction.)"
    );
    lm.check_invariants().unwrap();
    assert_eq!(lm.locks_of(LockOwner(1)).len(), 4);
    // More holds of what is held need no new entry.
    ok(&lm, LockOwner(1), rel(0), ShareUpdateExclusive);
    ok(&lm, LockOwner(1), rel(0), AccessExclusive);
    // Weak locks on the fast path need none either (as in PostgreSQL).
    ok(&lm, LockOwner(3), rel(9), AccessShare);
    assert!(lm.release(LockOwner(3), rel(9), AccessShare));
    // A waiter's queue entry counts: with one entry free, a waiter takes it.
    assert!(lm.release(LockOwner(1), rel(3), ShareUpdateExclusive));
    let rx = spawn_acquire(&lm, LockOwner(2), rel(0), AccessShare, LockWait::Block);
    await_waiting(&lm, LockOwner(2));
    assert_eq!(lm.entries_in_use(), 4);
    let e = lm
        .acquire(LockOwner(3), rel(7), ShareUpdateExclusive, LockWait::NoWait)
        .unwrap_err();
    assert_eq!(e.sqlstate(), "53200");
    // A request that would have to wait but finds no room fails the same way, leaving nothing.
    let e = lm
        .acquire(LockOwner(3), rel(1), AccessExclusive, LockWait::Block)
        .unwrap_err();
    assert_eq!(e.sqlstate(), "53200");
    assert!(!lm.is_waiting(LockOwner(3)));
    lm.check_invariants().unwrap();
    lm.release_all(LockOwner(1));
    outcome(&rx).unwrap();
    lm.release_all(LockOwner(2));
    assert_empty(&lm);
    let none = LockManager::new(0, DEADLOCK_TIMEOUT);
    assert_eq!(
        none.acquire(LockOwner(1), rel(1), ShareUpdateExclusive, LockWait::Block)
            .unwrap_err()
            .sqlstate(),
        "53200"
    );
    assert_empty(&none);
}

// ------------------------------------------------------------------------------ the checker

#[test]
fn lock_check_invariants_catches_corruption() {
    // The checker must be able to fail, or the stress test proves nothing.
    let lm = manager();
    ok(&lm, LockOwner(1), rel(1), ShareUpdateExclusive);
    lm.check_invariants().unwrap();
    {
        let mut part = lm.partition(&rel(1));
        let entry = part.locks.get_mut(&rel(1)).unwrap();
        entry.add_hold(LockOwner(2), AccessExclusive); // conflicts, and owner 2 files nothing
    }
    assert!(lm.check_invariants().is_err());
    {
        let mut part = lm.partition(&rel(1));
        part.locks
            .get_mut(&rel(1))
            .unwrap()
            .take_xact_holds(LockOwner(2));
    }
    lm.check_invariants().unwrap();
    lm.entries_used.fetch_add(1, Ordering::Relaxed);
    assert!(lm
        .check_invariants()
        .unwrap_err()
        .contains("counts disagree"));
}

#[test]
fn lock_check_invariants_catches_fast_path_corruption() {
    let lm = manager();
    ok(&lm, LockOwner(1), rel(1), AccessShare);
    lm.check_invariants().unwrap();
    // A conflicting hold appears in the table behind the fast path's back (no announcement,
    // so the fast hold stayed out of the table).
    {
        let mut part = lm.partition(&rel(1));
        part.entry_mut(rel(1)).add_hold(LockOwner(2), AccessExclusive);
    }
    let e = lm.check_invariants().unwrap_err();
    assert!(e.contains("conflicts with a hold in the table"), "{e}");
    {
        let mut part = lm.partition(&rel(1));
        part.locks
            .get_mut(&rel(1))
            .unwrap()
            .take_xact_holds(LockOwner(2));
        part.discard_if_empty(rel(1));
    }
    lm.check_invariants().unwrap();
    // A strong hold the counter does not cover.
    ok(&lm, LockOwner(3), rel(2), Share);
    lm.check_invariants().unwrap();
    lm.strong[fastpath::strong_slot(&rel(2))].store(0, Ordering::SeqCst);
    let e = lm.check_invariants().unwrap_err();
    assert!(e.contains("strong-lock slot"), "{e}");
    lm.strong[fastpath::strong_slot(&rel(2))].store(1, Ordering::SeqCst);
    // A fast hold filed in another owner's group.
    lm.fast[fastpath::fast_group_of(LockOwner(1)) + 1]
        .0
        .lock()
        .holds
        .push(fastpath::FastHold {
            owner: LockOwner(1),
            tag: rel(5),
            counts: [1, 0, 0],
        });
    let e = lm.check_invariants().unwrap_err();
    assert!(e.contains("misfiled"), "{e}");
}

#[test]
fn lock_weak_locks_take_the_fast_path_until_a_strong_one_comes() {
    let lm = manager();
    let t = rel(1);
    ok(&lm, LockOwner(1), t, AccessShare);
    ok(&lm, LockOwner(1), t, AccessShare);
    ok(&lm, LockOwner(2), t, RowExclusive);
    assert_eq!(lm.stats().fast_path.get(), 3);
    assert_eq!(lm.entries_in_use(), 0, "fast holds are outside the table");
    assert!(lm.holds(LockOwner(1), t, AccessShare));
    assert!(!lm.holds(LockOwner(1), t, RowExclusive));
    assert_eq!(lm.locks_of(LockOwner(2)), [(t, RowExclusive)]);
    // A strong request moves every fast hold on the relation into the table, and waits for
    // them there.
    let rx = spawn_acquire(&lm, LockOwner(3), t, AccessExclusive, LockWait::Block);
    await_waiting(&lm, LockOwner(3));
    assert_eq!(lm.entries_in_use(), 3);
    lm.check_invariants().unwrap();
    // While it waits, weak requests go to the table and queue behind it (PostgreSQL's rule:
    // a new weak request does not overtake a strong waiter), as long as their owner holds
    // nothing there; owner 1 holds, so it goes ahead.
    ok(&lm, LockOwner(1), t, AccessShare);
    let late = spawn_acquire(&lm, LockOwner(4), t, AccessShare, LockWait::Block);
    await_waiting(&lm, LockOwner(4));
    // Weak locks on other relations still take the fast path.
    ok(&lm, LockOwner(4 + 64), rel(2), AccessShare);
    assert_eq!(lm.stats().fast_path.get(), 4);
    // Owner 1 releases its three holds one by one (moved, so from the table).
    for _ in 0..3 {
        assert!(lm.release(LockOwner(1), t, AccessShare));
    }
    assert!(!lm.release(LockOwner(1), t, AccessShare));
    lm.release_all(LockOwner(2));
    outcome(&rx).unwrap();
    lm.check_invariants().unwrap();
    assert_still_blocked(&lm, LockOwner(4), &late);
    lm.release_all(LockOwner(3));
    outcome(&late).unwrap();
    lm.release_all(LockOwner(4));
    lm.release_all(LockOwner(4 + 64));
    // The strong count is down again: weak locks take the fast path once more.
    ok(&lm, LockOwner(5), t, RowShare);
    assert_eq!(lm.stats().fast_path.get(), 5);
    assert_eq!(lm.entries_in_use(), 0);
    lm.release_all(LockOwner(5));
    assert_empty(&lm);
}

#[test]
fn lock_a_failed_strong_request_leaves_the_fast_path_open() {
    let lm = manager();
    let t = rel(1);
    ok(&lm, LockOwner(1), t, RowExclusive);
    // NoWait fails at once, a timeout later, and a cancelled wait too: none leaves the
    // relation's strong count up.
    assert!(lm.acquire(LockOwner(2), t, Share, LockWait::NoWait).is_err());
    assert!(lm
        .acquire(LockOwner(2), t, Exclusive, LockWait::TimeoutMs(5))
        .is_err());
    lm.check_invariants().unwrap();
    lm.release_all(LockOwner(2));
    lm.release_all(LockOwner(1));
    assert_empty(&lm);
    ok(&lm, LockOwner(3), t, AccessShare);
    assert_eq!(lm.entries_in_use(), 0);
    lm.release_all(LockOwner(3));
    assert_empty(&lm);
}

#[test]
fn lock_fast_slots_are_bounded_per_owner() {
    let lm = manager();
    let owner = LockOwner(1);
    let n = fastpath::FAST_PER_OWNER as u64;
    for r in 0..n + 3 {
        ok(&lm, owner, rel(r), AccessShare);
    }
    // The first sixteen on the fast path, the rest in the table.
    assert_eq!(lm.stats().fast_path.get(), n);
    assert_eq!(lm.entries_in_use(), 3);
    assert_eq!(lm.locks_of(owner).len(), (n + 3) as usize);
    lm.check_invariants().unwrap();
    // PREPARE moves them all into the table.
    let prepared = LockOwner(1 << 63 | 1);
    lm.transfer_all(owner, prepared);
    assert_eq!(lm.entries_in_use(), (n + 3) as usize);
    assert_eq!(lm.locks_of(owner), []);
    assert_eq!(lm.locks_of(prepared).len(), (n + 3) as usize);
    lm.check_invariants().unwrap();
    lm.release_all(prepared);
    assert_empty(&lm);
}

// ------------------------------------------------------------------------------ stress

#[test]
fn lock_stress_random_modes_with_deadlocks() {
    const THREADS: u64 = 8;
    const ITERATIONS: u64 = 300;
    const TAGS: u64 = 4;
    let budget = Duration::from_secs(3);
    let lm = Arc::new(LockManager::new(10_000, Duration::from_millis(5)));
    let barrier = Arc::new(Barrier::new(THREADS as usize + 1));
    let done = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let lm = Arc::clone(&lm);
            let barrier = Arc::clone(&barrier);
            let done = Arc::clone(&done);
            thread::spawn(move || {
                let mut rng = SplitMix64::new(t + 1);
                let mut committed = 0u64;
                barrier.wait();
                for i in 0..ITERATIONS {
                    if started.elapsed() > budget {
                        break;
                    }
                    let owner = LockOwner((t << 32) | i);
                    let mut failed = false;
                    for _ in 0..=rng.next() % 3 {
                        let tag = if rng.next().is_multiple_of(5) {
                            xact(rng.next() % TAGS)
                        } else {
                            rel(rng.next() % TAGS)
                        };
                        let mode = LockMode::ALL[(rng.next() % 8) as usize];
                        let wait = match rng.next() % 10 {
                            0 => LockWait::NoWait,
                            1 => LockWait::TimeoutMs(rng.next() % 4),
                            _ => LockWait::Block,
                        };
                        match lm.acquire(owner, tag, mode, wait) {
                            Ok(()) => assert!(lm.holds(owner, tag, mode)),
                            Err(
                                Error::Deadlock { .. }
                                | Error::LockNotAvailable { .. }
                                | Error::LockTimeout { .. },
                            ) => {
                                failed = true;
                                break;
                            }
                            Err(e) => panic!("unexpected {e}"),
                        }
                        thread::yield_now();
                    }
                    if failed {
                        lm.release_all(owner);
                        continue;
                    }
                    match rng.next() % 4 {
                        // PREPARE, then COMMIT PREPARED.
                        0 => {
                            let prepared = LockOwner(owner.0 | (1 << 63));
                            lm.transfer_all(owner, prepared);
                            assert_eq!(lm.locks_of(owner), []);
                            lm.release_all(prepared);
                        }
                        // Release one by one.
                        1 => {
                            for (tag, mode) in lm.locks_of(owner) {
                                for _ in 0..8 {
                                    if !lm.release(owner, tag, mode) {
                                        break;
                                    }
                                }
                            }
                            assert_eq!(lm.locks_of(owner), []);
                        }
                        _ => lm.release_all(owner),
                    }
                    committed += 1;
                }
                done.fetch_add(1, Ordering::Relaxed);
                committed
            })
        })
        .collect();
    barrier.wait();
    let mut checks = 0u64;
    while done.load(Ordering::Relaxed) < THREADS as usize {
        if let Err(e) = lm.check_invariants() {
            panic!("invariant broken under load: {e}");
        }
        checks += 1;
        assert!(
            started.elapsed() < budget + PATIENCE,
            "the stress test hangs"
        );
        thread::sleep(Duration::from_millis(1));
    }
    let committed: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_empty(&lm);
    let stats = lm.stats();
    let deadlocks = stats.deadlocks.load(Ordering::Relaxed);
    eprintln!(
        "stress: {committed} committed, {deadlocks} deadlocks, {} waits, {} checks by the detector, \
         {checks} invariant checks, {:?}",
        stats.waits.load(Ordering::Relaxed),
        stats.deadlock_checks.load(Ordering::Relaxed),
        started.elapsed()
    );
    assert!(committed > THREADS * 10, "too little progress: {committed}");
    assert!(deadlocks > 0, "the workload is meant to deadlock");
    assert!(stats.waits.load(Ordering::Relaxed) > 0);
}

#[test]
fn a_cancelled_wait_fails_with_57014_and_leaves_no_trace() {
    let lm = Arc::new(LockManager::new(1000, Duration::from_secs(3600)));
    let t = rel(1);
    ok(&lm, LockOwner(1), t, AccessExclusive);
    let used = lm.entries_in_use();
    // Nothing to cancel before the wait.
    assert!(!lm.cancel_wait(LockOwner(2)));
    let waiter = spawn_acquire(&lm, LockOwner(2), t, AccessShare, LockWait::Block);
    let start = Instant::now();
    while !lm.is_waiting(LockOwner(2)) {
        assert!(start.elapsed() < PATIENCE, "the waiter never queued");
        thread::yield_now();
    }
    assert!(lm.cancel_wait(LockOwner(2)));
    // The waiter wakes at once, not after deadlock_timeout (an hour here).
    let e = waiter.recv_timeout(PATIENCE).expect("the wait ends").unwrap_err();
    assert_eq!(e.sqlstate(), "57014");
    assert!(!lm.is_waiting(LockOwner(2)));
    assert_eq!(lm.locks_of(LockOwner(2)), []);
    assert_eq!(lm.entries_in_use(), used);
    lm.release_all(LockOwner(1));
}

fn advisory(key: u64) -> LockTag {
    LockTag::Advisory {
        db_oid: 5,
        key,
        pair: false,
    }
}

#[test]
fn a_session_hold_outlives_release_all_and_ends_with_release_session() {
    let lm = manager();
    let (a, b) = (LockOwner::backend(7), LockOwner::backend(8));
    let t = advisory(42);
    lm.acquire_session(a, t, Exclusive, LockWait::NoWait).unwrap();
    lm.acquire_session(a, t, Exclusive, LockWait::NoWait).unwrap();
    lm.release_all(a); // the transaction that took them ends
    assert!(lm.holds(a, t, Exclusive));
    assert_eq!(lm.locks_of(a), []); // nothing at transaction level
    let waiter = spawn_acquire(&lm, b, t, Share, LockWait::Block);
    assert!(lm.release_session(a, t, Exclusive));
    assert!(lm.holds(a, t, Exclusive), "held twice, released once");
    assert!(waiter.recv_timeout(Duration::from_millis(50)).is_err());
    assert!(lm.release_session(a, t, Exclusive));
    assert!(!lm.release_session(a, t, Exclusive), "nothing left to release");
    waiter.recv_timeout(PATIENCE).unwrap().unwrap();
    lm.check_invariants().unwrap();
    lm.release_all(b);
    assert_empty(&lm);
}

#[test]
fn transaction_ends_and_prepare_leave_session_holds_and_take_the_others() {
    let lm = manager();
    let a = LockOwner::backend(7);
    let (s, x) = (advisory(1), advisory(2));
    lm.acquire_session(a, s, Exclusive, LockWait::NoWait).unwrap();
    ok(&lm, a, x, Share);
    assert_eq!(lm.held_at_both_levels(a), None);
    ok(&lm, a, s, Exclusive);
    assert_eq!(lm.held_at_both_levels(a), Some(s));
    // A transaction-level release never takes a session hold.
    assert!(lm.release(a, s, Exclusive));
    assert!(!lm.release(a, s, Exclusive));
    assert!(lm.holds(a, s, Exclusive));
    let prepared = LockOwner::prepared(Xid(900));
    lm.transfer_all(a, prepared);
    assert_eq!(lm.locks_of(prepared), [(x, Share)]);
    assert!(lm.holds(a, s, Exclusive) && !lm.holds(a, x, Share));
    lm.check_invariants().unwrap();
    lm.release_all(prepared);
    lm.release_session_all(a);
    assert_empty(&lm);
}

#[test]
fn a_deadlock_through_a_session_hold_is_found() {
    let lm = manager();
    let (a, b) = (LockOwner::backend(7), LockOwner::backend(8));
    lm.acquire_session(a, advisory(1), Exclusive, LockWait::NoWait)
        .unwrap();
    ok(&lm, b, advisory(2), Exclusive);
    // b ends its transaction whatever it gets, so a goes on if b is the victim.
    let first = spawn_acquire_then_end(&lm, b, advisory(1), Exclusive);
    await_waiting(&lm, b);
    let mine = lm.acquire(a, advisory(2), Exclusive, LockWait::Block);
    // Exactly one of the two is the victim, whichever checked first.
    let e = match mine {
        Err(e) => {
            lm.release_session_all(a);
            first.recv_timeout(PATIENCE).unwrap().unwrap();
            e
        }
        Ok(()) => first.recv_timeout(PATIENCE).unwrap().unwrap_err(),
    };
    assert_eq!(e.sqlstate(), "40P01");
    let text = e.to_string();
    assert!(text.contains("advisory lock [5,0,1,1]"), "{text}");
    assert!(text.contains("advisory lock [5,0,2,1]"), "{text}");
    lm.release_all(a);
    lm.release_session_all(a);
    lm.release_all(b);
    assert_empty(&lm);
}

#[test]
fn status_lists_holders_waiters_and_fast_holds() {
    let lm = manager();
    let (a, b) = (LockOwner::backend(7), LockOwner::backend(8));
    ok(&lm, a, rel(1), AccessShare);
    lm.acquire_session(a, advisory(3), Exclusive, LockWait::NoWait)
        .unwrap();
    let waiter = spawn_acquire(&lm, b, advisory(3), Share, LockWait::Block);
    let start = Instant::now();
    while !lm.is_waiting(b) {
        assert!(start.elapsed() < PATIENCE, "b never queued");
        thread::yield_now();
    }
    let mut rows = lm.status();
    rows.sort_by_key(|r| (r.owner, r.tag, r.mode));
    let want = [
        (a, rel(1), AccessShare, true, true),
        (a, advisory(3), Exclusive, true, false),
        (b, advisory(3), Share, false, false),
    ];
    let got: Vec<_> = rows
        .iter()
        .map(|r| (r.owner, r.tag, r.mode, r.granted, r.fast_path))
        .collect();
    assert_eq!(got, want);
    lm.release_session_all(a);
    waiter.recv_timeout(PATIENCE).unwrap().unwrap();
    lm.release_all(a);
    lm.release_all(b);
    assert_empty(&lm);
}

#[test]
fn advisory_tags_round_trip_and_print_as_postgresql() {
    for tag in [
        advisory(u64::MAX),
        LockTag::Advisory {
            db_oid: 5,
            key: (1 << 32) | 2,
            pair: true,
        },
    ] {
        let mut bytes = Vec::new();
        tag.encode(&mut bytes);
        assert_eq!(bytes.len(), LockTag::ENCODED_LEN);
        assert_eq!(LockTag::decode(&bytes), Some((tag, LockTag::ENCODED_LEN)));
    }
    let pair = LockTag::Advisory {
        db_oid: 5,
        key: (1 << 32) | 2,
        pair: true,
    };
    assert_eq!(pair.to_string(), "advisory lock [5,1,2,2]");
    assert_eq!(LockOwner::backend(1234).to_string(), "1234");
    assert_eq!(LockOwner::backend(1234).backend_pid(), Some(1234));
    assert_eq!(LockOwner::prepared(Xid(3)).backend_pid(), None);
}
