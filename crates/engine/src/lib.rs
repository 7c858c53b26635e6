//! # quire-engine
//!
//! quire's storage engine as a synchronous Rust library: no async runtime, no SQL. It stores
//! data the way PostgreSQL does (8 KiB pages, relations split into segment files, a shared
//! buffer pool) and is built so that the slow paths named in `shared/seeds/` are fast by
//! design.
//!
//! ## Layers, bottom to top
//!
//! Each layer is one module with its rules in its `//!` header. A module may use the modules
//! listed before it and never one listed after it: `tests/layering.rs` reads this list and
//! every `crate::` path of the engine's code, and fails on an import that goes up.
//!
//! 0. Leaves, which name no other module: [`sqlstate`] (the SQLSTATEs, generated from
//!    `errcodes.txt`), [`types`] (the small shared types and limits:
//!    relation locator, fork, block number, buffer tag, LSN, page size), `hash` (the hash
//!    used by the engine's tables, and by the SQL layer's plan cache), `bytes` (the one
//!    little-endian reader of stored and logged bytes), [`rng`] (the one deterministic
//!    random generator), `padded` (a value alone on its cache lines), `periodic` (the one
//!    way to run a background worker).
//! 1. [`vfs`]: the only code that touches files (OS and a crash-simulating implementation),
//!    and the engine's file descriptors ([`vfs::fd`]: its budget, release and retry).
//! 2. [`page`]: the 8 KiB page layout and its CRC32C checksum.
//! 3. [`error`]: the one error type, each variant with its SQLSTATE; [`health`]: the
//!    engine's failed state (PostgreSQL's PANIC); [`config`]: every setting; [`sync`]: the
//!    sync-request queue; [`temp`]: temporary files for what outgrows memory.
//! 4. [`smgr`]: relations as segment files, and the relation-size cache.
//! 5. [`buffer`]: the shared buffer pool, whose relation drop does not scan the pool.
//! 6. [`wal`]: the write-ahead log: parallel insertion, group commit, reading back;
//!    [`recovery`]: the redo framework (the resource managers are listed where the engine
//!    is assembled, at the top).
//! 7. [`checkpoint`]: the checkpointer, the control file.
//! 8. [`clog`]: commit status, commit timestamps and the subtransaction map, on pages in
//!    the buffer pool.
//! 9. [`txn`]: transaction ids, snapshots, commit and abort, table and row-wait locks
//!    ([`txn::lock`]), two-phase commit ([`txn::twophase`]).
//! 10. Access methods: [`value`] (the data types), `hintfork` (one byte of hint per heap
//!     block), [`fsm`] (the free-space map), [`vm`] (the visibility map), [`heap`] (MVCC
//!     tables), [`vacuum`] (the heap's lazy vacuum and the dead-TID store, seed 004),
//!     [`btree`] (B+tree indexes: Lehman-Yao, unique checks, bulk delete, bottom-up build),
//!     [`sequence`] (one-page sequences, changed in place outside transactions), [`toast`]
//!     (values too large for a page: compressed, or out of line in the table's TOAST heap).
//! 11. [`catalog`]: table, index and sequence definitions, stored transactionally in a
//!     system heap.
//! 12. [`stats`]: per-table tuple counts (PostgreSQL's pgstat), and the shared counters'
//!     resets (`pg_stat_bgwriter`, `pg_stat_wal`).
//! 13. `engine`: the state every session of a data directory shares.
//! 14. [`session`]: one transaction's work ([`Transaction`]).
//! 15. [`commands`]: VACUUM, which drives heap and indexes under the table's lock.
//! 16. [`autovacuum`]: the background worker that runs VACUUM.
//! 17. `db`: [`Database`], which assembles the engine, lists the resource managers and runs
//!     startup recovery.
//!
//! ## Lock order across the layers
//!
//! A thread takes locks in this order: one further down the list may be taken while holding
//! one above it, never the reverse. Each module's header gives the order within its level.
//!
//! 1. Table and transaction locks ([`txn::lock`]), waited for only while holding none of the
//!    locks below (the deadlock check sees only the lock table).
//! 2. A section that delays checkpoints (`Wal::delay_checkpoint`, shared: a commit record and
//!    its commit-log bits); the checkpointer takes it exclusively while holding nothing.
//! 3. Buffer content locks, in each access method's own order: B-tree one page per level,
//!    left before right, the metapage last; heap pages in block order, the visibility map's
//!    page after the heap page; the free-space map a leaf, then its root.
//! 4. The WAL's locks: an insertion slot, then the reservation, ring-init or writer mutex
//!    ([`wal`]). The buffer pool's write-back flushes WAL under a shared content lock.
//! 5. Leaves, never held while taking a lock of another layer: the buffer pool's mapping
//!    and relation-index partitions and header bits ([`buffer`]), the storage manager's
//!    extension lock and caches ([`smgr`]), the sync queue, the statistics.
//!
//! On top, the embedded API: [`Database`] opens a data directory (exclusively) and recovers
//! it; [`Transaction`] ([`session`]) is one transaction's work (DDL, rows, locks, PREPARE).
//! [`Config`] holds every setting; [`Error`] is the one error type of the library, each
//! variant with its PostgreSQL SQLSTATE.
//!
//! ```
//! use std::sync::Arc;
//! use quire_engine::vfs::{OsVfs, Vfs};
//! use quire_engine::{Column, Config, Database, IsolationLevel, Type, Value};
//! use std::ops::Bound::Included;
//!
//! let dir = tempfile::tempdir()?;
//! let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
//! let config = Config { max_prepared_transactions: 10, ..Config::default() };
//! let db = Database::open(&vfs, dir.path(), config)?; // creates or recovers the directory
//!
//! // CREATE TABLE and INSERT, in one transaction.
//! let tx = db.begin(IsolationLevel::ReadCommitted)?;
//! let accounts = tx.create_table(
//!     "accounts",
//!     &[Column::new("id", Type::Int), Column::new("balance", Type::Int)],
//! )?;
//! let pkey = tx.create_index("accounts_pkey", accounts, &["id"], true)?; // UNIQUE
//! let alice = tx.insert(accounts, &[Value::Int(1), Value::Int(100)])?;
//! tx.insert(accounts, &[Value::Int(2), Value::Int(50)])?;
//! tx.commit()?;
//!
//! // UPDATE accounts SET balance = balance - 30 WHERE id = 1: the new value is computed
//! // from the row's current version (READ COMMITTED re-evaluates it after a concurrent
//! // update; REPEATABLE READ fails with SQLSTATE 40001 instead).
//! let tx = db.begin(IsolationLevel::RepeatableRead)?;
//! tx.update_with(accounts, alice, |row| {
//!     Some(vec![row[0].clone(), Value::Int(row[1].as_int()? - 30)])
//! })?;
//! // PREPARE TRANSACTION; COMMIT PREPARED may come from any session, even after a crash.
//! tx.prepare("transfer-42")?;
//! assert_eq!(db.prepared_transactions()[0].gid, "transfer-42");
//! db.commit_prepared("transfer-42")?;
//!
//! // SELECT: a sequential scan under the transaction's snapshot.
//! let tx = db.begin(IsolationLevel::ReadCommitted)?;
//! let mut balances = Vec::new();
//! for row in tx.scan(accounts)? {
//!     let (_tid, row) = row?;
//!     balances.push((row[0].as_int(), row[1].as_int()));
//! }
//! balances.sort();
//! assert_eq!(balances, [(Some(1), Some(70)), (Some(2), Some(50))]);
//! // WHERE id = 2, through the index (the row is checked in the heap, as PostgreSQL does).
//! let key = [Value::Int(2)];
//! let by_key: Vec<_> = tx.index_scan(pkey, Included(&key[..]), Included(&key[..]))?.collect();
//! assert_eq!(by_key.len(), 1);
//! // A duplicate key: SQLSTATE 23505, and the transaction is aborted.
//! let err = tx.insert(accounts, &[Value::Int(2), Value::Int(0)]).unwrap_err();
//! assert_eq!(err.sqlstate(), "23505");
//! tx.rollback()?;
//!
//! let tx = db.begin(IsolationLevel::ReadCommitted)?;
//! tx.truncate(accounts)?; // a new, empty relation file; the old one is dropped at commit
//! tx.rollback()?; // ... or not: the rows are back
//! db.vacuum(accounts)?; // VACUUM (autovacuum also runs in the background)
//! let all = db.vacuum_all()?; // VACUUM with no table: all tables, the catalog, the commit logs
//! assert_eq!(all.skipped, 0); // it waits for locks (autovacuum skips busy tables instead)
//! db.close()?; // a shutdown checkpoint: the next open replays nothing
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// `unsafe` only in the WAL ring (`wal/ring.rs`) and in the three system calls the standard
// library lacks (`vfs/sys.rs`: getrlimit, setrlimit, geteuid), each allowing it for itself,
// with a `SAFETY:` argument at each use.
#![deny(unsafe_code)]
// Without `testing`, items that only tests and tools use are unused; the workspace build
// (tests and tools on) still reports dead code.
#![cfg_attr(not(feature = "testing"), allow(dead_code, unused_imports))]

// The public surface: the embedded API re-exported below, the settings, the error type,
// the shared small types, and the file layer (an embedding program chooses it).
pub mod config;
pub mod error;
pub mod health;
pub mod sqlstate;
pub mod temp;
pub mod types;
pub mod vfs;

/// Declares the engine's internal layers: public with the `testing` feature, which the
/// crate's integration tests, the benchmarks and the torture tool enable (they reach into
/// the layers to measure and to break them), crate-private otherwise.
macro_rules! internal_modules {
    ($($name:ident),* $(,)?) => {
        $(
            #[cfg(feature = "testing")]
            pub mod $name;
            #[cfg(not(feature = "testing"))]
            pub(crate) mod $name;
        )*
    };
}

internal_modules! {
    autovacuum, btree, buffer, catalog, checkpoint, clog, commands, fsm, heap, page, recovery,
    rng, sequence, session, smgr, stats, sync, toast, txn, vacuum, value, vm, wal,
}

mod bytes;
mod db;
mod engine;
mod hash;
mod hintfork;
mod padded;
mod periodic;

// The embedded API: what `Database` and `Transaction` take and return.
pub use catalog::{
    Column, Entry, IndexDef, IndexId, RowShape, Storage, TableDef, TableId, ViewDef,
};
pub use commands::vacuum::DatabaseVacuum;
pub use config::{
    BufferDropMode, Config, DeadTidsMode, RelsizeCacheMode, SyncMode, TwophaseStateMode,
};
pub use db::Database;
pub use error::{Error, Result};
pub use hash::{FxBuildHasher, FxHashMap, FxHasher};
pub use health::HealthState;
pub use padded::StripedCounter;
pub use page::{PageError, Tid};
pub use recovery::RecoveryStats;
pub use sequence::{SeqOptions, SeqState, SequenceDef};
pub use session::{
    AdvisoryKey, AdvisoryRequest, Changed, IndexRows, IsolationLevel, RowWait, Scan, Sees,
    Transaction,
};
pub use sqlstate::SqlState;
pub use stats::{BgwriterCounters, SharedStats, TableStats};
pub use txn::lock::{LockMode, LockOwner, LockStatus, LockTag};
pub use txn::twophase::{PreparedXact, TwoPhaseStats};
pub use txn::ProcId;
pub use types::{BlockNumber, Fork, Lsn, Oid, RelFileLocator, Xid};
pub use vacuum::VacuumStats;
pub use value::{
    decode_row, encode_row, encoded_row_len, DecodeError, Interval, Numeric, NumericError,
    NumericSpecial, Row, Type, Value,
};
pub use wal::{WalCounters, WalPositions};
