//! Pruning heap pages (`heap::prune`): HOT chains collapse to redirects, dead roots become
//! dead line pointers, leftovers of aborted updates become unused, nothing an open snapshot
//! can see is removed, redo rebuilds the same page, and a row updated thousands of times
//! stays on its page.

mod common;

use common::{committed, committing, crash, create_pairs, new_db, open_db, rows_in};

use quire_engine::heap::tuple::{TupleHeader, XMIN_COMMITTED};
use quire_engine::heap::Heap;
use quire_engine::page::{ItemState, Page};
use quire_engine::types::BufferTag;
use quire_engine::{
    Changed, Config, Database, Fork, IsolationLevel::ReadCommitted, IsolationLevel::RepeatableRead,
    RelFileLocator, TableId, Tid, Value,
};

/// `t (id, v)` holding the row (1, 0): the table, its file, the row's address.
fn table(db: &Database) -> (TableId, RelFileLocator, Tid) {
    committing(db, |tx| {
        let (t, tids) = create_pairs(tx, "t", "v", [(1, 0)]);
        (t, tx.table_def(t).unwrap().rel, tids[0])
    })
}

/// Updates the row at `tid` in its own transaction; returns the new version's address.
fn bump(db: &Database, t: TableId, tid: Tid, commit: bool) -> Tid {
    let tx = db.begin(ReadCommitted).unwrap();
    let Changed::Done(new, _) = tx
        .update_with(t, tid, |row| {
            Some(vec![row[0].clone(), Value::Int(row[1].as_int()? + 1)])
        })
        .unwrap()
    else {
        panic!("update skipped")
    };
    if commit {
        tx.commit().unwrap();
    } else {
        tx.rollback().unwrap();
    }
    new
}

/// `table`, then three committed HOT updates of its row: the table, its file, the row's
/// root and its newest version.
fn three_hot_updates(db: &Database) -> (TableId, RelFileLocator, Tid, Tid) {
    let (t, rel, root) = table(db);
    let mut tid = root;
    for _ in 0..3 {
        tid = bump(db, t, tid, true);
    }
    (t, rel, root, tid)
}

fn prune(db: &Database, rel: RelFileLocator) -> quire_engine::heap::prune::Prune {
    let heap = Heap::new(db.buffer_pool(), db.wal(), rel);
    let buf = db
        .buffer_pool()
        .read_buffer(BufferTag::new(rel, Fork::Main, 0))
        .unwrap();
    let mut page = buf.write();
    let horizon = db.transactions().global_xmin();
    heap.prune_page(&mut page, horizon, db.transactions())
        .unwrap()
}

/// (state, redirect target or item length) of every line pointer of block 0.
fn pointers(db: &Database, rel: RelFileLocator) -> Vec<(ItemState, u16)> {
    let buf = db
        .buffer_pool()
        .read_buffer(BufferTag::new(rel, Fork::Main, 0))
        .unwrap();
    let page = buf.read();
    let p = Page::new(&page);
    (1..=p.item_count())
        .map(|off| {
            let id = p.item_id(off).unwrap();
            match id.state {
                ItemState::Redirect => (id.state, id.offset),
                _ => (id.state, u16::from(id.len_bytes > 0)),
            }
        })
        .collect()
}

#[test]
fn a_hot_chain_collapses_to_a_redirect_and_redo_rebuilds_it() {
    let (vfs, db) = new_db(1, Config::default());
    let (t, rel, root, tid) = three_hot_updates(&db);
    assert_eq!(tid, Tid::new(0, 4), "HOT: every version on the same page");
    let p = prune(&db, rel);
    assert_eq!(p.redirected, vec![(1, 4)]);
    assert_eq!(p.unused, vec![2, 3]);
    assert!(p.dead.is_empty());
    let expected = vec![
        (ItemState::Redirect, 4),
        (ItemState::Unused, 0),
        (ItemState::Unused, 0),
        (ItemState::Normal, 1),
    ];
    assert_eq!(pointers(&db, rel), expected);
    // An index's address (the root) still leads to the row.
    let heap = Heap::new(db.buffer_pool(), db.wal(), rel);
    let snap = db.transactions().snapshot(quire_engine::txn::ProcId(0));
    let looker = quire_engine::heap::Looker {
        snapshot: &snap,
        own: &quire_engine::txn::OwnXids::default(),
        cid: 0,
    };
    let found = heap.fetch_chain(root, &looker, db.transactions()).unwrap();
    assert_eq!(found.map(|h| h.tid), Some(Tid::new(0, 4)));
    assert_eq!(committed(&db, t), [(1, 3)]);
    // Redo of the pruning record rebuilds the same line pointers.
    db.wal().flush(db.wal().insert_lsn()).unwrap();
    crash(db, &vfs);
    let db = open_db(&vfs, Config::default());
    assert_eq!(pointers(&db, rel), expected);
    assert_eq!(committed(&db, t), [(1, 3)]);
    // Pruning again changes nothing.
    assert!(prune(&db, rel).is_empty());
}

/// The header of the version at `off` of block 0.
fn header_at(db: &Database, rel: RelFileLocator, off: u16) -> TupleHeader {
    let buf = db
        .buffer_pool()
        .read_buffer(BufferTag::new(rel, Fork::Main, 0))
        .unwrap();
    let page = buf.read();
    TupleHeader::read(Page::new(&page).item(off).unwrap()).unwrap()
}

#[test]
fn pruning_hints_the_live_version_so_nobody_asks_the_commit_log_again() {
    let (vfs, db) = new_db(5, Config::default());
    let (t, rel, _, _) = three_hot_updates(&db);
    assert_eq!(header_at(&db, rel, 4).infomask & XMIN_COMMITTED, 0);
    let p = prune(&db, rel);
    assert_eq!(p.hinted, vec![4], "the chain's first live version");
    assert_ne!(header_at(&db, rel, 4).infomask & XMIN_COMMITTED, 0);
    // Reading the row now needs no status lookup: the hint answers.
    let stats = db.transactions().stats();
    let asked = || stats.clog_lookups.get() + stats.status_cache_hits.get();
    let before = asked();
    assert_eq!(committed(&db, t), [(1, 3)]);
    assert_eq!(
        asked(),
        before,
        "a hinted version is read without the commit log"
    );
    // The hint is in the pruning's record: redo sets it too.
    let hinted = header_at(&db, rel, 4);
    db.wal().flush(db.wal().insert_lsn()).unwrap();
    crash(db, &vfs);
    let db = open_db(&vfs, Config::default());
    assert_eq!(header_at(&db, rel, 4), hinted);
    assert_eq!(committed(&db, t), [(1, 3)]);
    // Pruning with nothing to remove sets no hint (it would need a record of its own).
    let (_, rel2, _) = committing(&db, |tx| {
        let (t, tids) = create_pairs(tx, "u", "v", [(1, 0)]);
        (t, tx.table_def(t).unwrap().rel, tids[0])
    });
    let p = prune(&db, rel2);
    assert!(p.is_empty() && p.hinted.is_empty());
    assert_eq!(header_at(&db, rel2, 1).infomask & XMIN_COMMITTED, 0);
}

#[test]
fn nothing_an_open_snapshot_can_see_is_pruned() {
    let (_vfs, db) = new_db(2, Config::default());
    let (t, rel, root) = table(&db);
    let old = db.begin(RepeatableRead).unwrap();
    assert_eq!(old.scan(t).unwrap().count(), 1); // takes its snapshot
    let mut tid = root;
    for _ in 0..3 {
        tid = bump(&db, t, tid, true);
    }
    assert!(
        prune(&db, rel).is_empty(),
        "the old snapshot still sees version 1"
    );
    assert_eq!(rows_in(&old, t), [(1, 0)]);
    old.commit().unwrap();
    let p = prune(&db, rel);
    assert_eq!(p.redirected, vec![(1, 4)]);
}

#[test]
fn dead_roots_and_aborted_versions() {
    let (_vfs, db) = new_db(3, Config::default());
    let (t, rel, root) = table(&db);
    // An aborted insert, a committed delete, and an aborted HOT update of the first row.
    let tx = db.begin(ReadCommitted).unwrap();
    tx.insert(t, &[Value::Int(2), Value::Int(0)]).unwrap();
    tx.rollback().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    let doomed = tx.insert(t, &[Value::Int(3), Value::Int(0)]).unwrap();
    tx.commit().unwrap();
    let tx = db.begin(ReadCommitted).unwrap();
    tx.delete(t, doomed).unwrap();
    tx.commit().unwrap();
    let aborted_version = bump(&db, t, root, false);
    assert_eq!(aborted_version, Tid::new(0, 4));
    let p = prune(&db, rel);
    assert_eq!(p.dead, vec![2, 3], "aborted insert and committed delete");
    assert_eq!(p.unused, vec![4], "the aborted update's new version");
    assert!(p.redirected.is_empty());
    assert_eq!(committed(&db, t), [(1, 0)]);
    // The first row is still updatable through its root.
    assert_eq!(bump(&db, t, root, true), Tid::new(0, 4), "slot 4 is reused");
    assert_eq!(committed(&db, t), [(1, 1)]);
}

#[test]
fn a_row_updated_thousands_of_times_stays_on_its_page() {
    let (_vfs, db) = new_db(4, Config::default());
    let (t, rel, root) = table(&db);
    let mut tid = root;
    for _ in 0..5_000 {
        tid = bump(&db, t, tid, true);
    }
    assert_eq!(committed(&db, t), [(1, 5_000)]);
    assert_eq!(
        db.smgr().nblocks(rel, Fork::Main).unwrap(),
        1,
        "pruning on a full page made room for every new version"
    );
    assert_eq!(tid.block, 0);
}
