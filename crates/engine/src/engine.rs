//! # engine — the state every session of a data directory shares
//!
//! One [`Engine`] per open data directory: the storage manager, buffer pool, WAL,
//! transactions, locks, catalog, prepared transactions, the oid counter and the table
//! statistics. [`crate::Database`] assembles it at startup; sessions
//! ([`crate::Transaction`]), commands and background workers hold an `Arc` of it.
//!
//! ## Rules
//! - Built once, by [`crate::Database::open`], after redo: nothing here exists during redo.
//! - Its fields are shared by every thread: each guards itself (see each layer's rules);
//!   `Engine` adds no lock of its own.
//! - It lives as long as its last holder, an open transaction outliving its `Database`
//!   included, and so does the data directory's lock, which it drops last.
//! - Every entry point (a new transaction, each call of one, COMMIT, the ends of prepared
//!   transactions, VACUUM) asks [`Engine::check_health`] first: a failed engine accepts no
//!   work ([`crate::health`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::btree::roots::RootCache;
use crate::buffer::BufferPool;
use crate::catalog::Catalog;
use crate::checkpoint::{CheckpointHook, CheckpointIds};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::smgr::Smgr;
use crate::stats::StatsRegistry;
use crate::txn::lock::LockManager;
use crate::txn::twophase::TwoPhase;
use crate::txn::TransactionManager;
use crate::types::{Lsn, Oid};
use crate::vfs::DirLock;
use crate::wal::Wal;

/// What every transaction of a data directory shares.
pub(crate) struct Engine {
    pub config: Config,
    pub smgr: Arc<Smgr>,
    pub pool: Arc<BufferPool>,
    pub wal: Arc<Wal>,
    pub txns: TransactionManager,
    pub locks: LockManager,
    pub catalog: Catalog,
    /// Where each index's root is (a hint for descents).
    pub roots: RootCache,
    pub twophase: TwoPhase,
    /// The next oid handed out (an [`Oid`]'s value).
    pub next_oid: AtomicU64,
    pub table_stats: StatsRegistry,
    /// Held while a table's TOAST relation is created (the first value out of line), so
    /// that two writers do not both create it.
    pub toast_create: parking_lot::Mutex<()>,
    /// The data directory's lock, held while anything of the engine lives — an open
    /// transaction outliving its `Database` included — and dropped last.
    pub _dir_lock: Box<dyn DirLock>,
}

impl Engine {
    /// A new oid (and relation file number): never reused, also across crashes (checkpoints
    /// and relation-creation records carry the counter).
    pub fn new_oid(&self) -> Oid {
        Oid(self.next_oid.fetch_add(1, Ordering::AcqRel))
    }
}

impl Engine {
    /// `Ok` while the engine runs; once it failed, the one error of the failed state. A WAL
    /// that stopped by itself (its own write or fsync failed) fails the engine here, if no
    /// error has yet done so ([`Engine::note_failure`]).
    pub fn check_health(&self) -> Result<()> {
        let health = self.smgr.health();
        if self.wal.is_failed() && !health.is_failed() {
            health.fail_because("the WAL stopped after a failed write or fsync");
        }
        health.check()
    }

    /// After a call failed with `e`: if the WAL has stopped, `e` is (or follows) what stopped
    /// it, and becomes the failed state's reason unless one was kept before.
    pub fn note_failure(&self, e: &Error) {
        if self.wal.is_failed() {
            self.smgr.health().fail_because(&e.to_string());
        }
    }

    /// Debug builds check the buffer pool's invariants where nothing else uses it: after the
    /// end-of-recovery checkpoint and after the shutdown checkpoint.
    pub fn debug_check_idle(&self, when: &str) {
        if cfg!(debug_assertions) {
            if let Err(e) = self.pool.check_invariants() {
                panic!("buffer pool {when}: {e}");
            }
        }
    }
}

impl CheckpointHook for Engine {
    fn at_checkpoint(&self, redo: Lsn) -> Result<()> {
        if cfg!(debug_assertions) {
            // Every checkpoint of every test checks the lock table (under all its partition
            // locks, so it is consistent while sessions run).
            if let Err(e) = self.locks.check_invariants() {
                panic!("lock table at a checkpoint: {e}");
            }
        }
        self.twophase.checkpoint(redo, &self.wal).map(|_| ())
    }

    fn ids(&self) -> CheckpointIds {
        CheckpointIds {
            next_xid: self.txns.next_xid(),
            next_oid: Oid(self.next_oid.load(Ordering::Acquire)),
            oldest_xid: self.txns.oldest_xid(),
        }
    }
}
