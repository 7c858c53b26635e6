//! The engine as one object: a data directory opened exclusively, with its storage manager,
//! buffer pool, WAL, checkpointer, transactions, locks, catalog and prepared transactions.
//! [`Database::open`] is startup: it refuses a data directory that another user owns or
//! that others may write into or read (PostgreSQL's `checkDataDir`; a new one is created
//! `0700`, or set to `0700` if others could only read it, as initdb does), computes the engine's share of the file descriptors (PostgreSQL's
//! `set_max_safe_fds`, [`Database::file_descriptors`]), reads the control file and, unless
//! the last stop was clean, redoes the WAL from the last checkpoint's redo point; it refuses
//! a directory it cannot trust (relation files or WAL but no control file, a fork with a missing middle
//! segment, WAL that ends before the checkpoint the control file names, a changed block
//! that does not exist and was never dropped), each with a message naming what is wrong;
//! then it loads the catalog,
//! brings back the prepared transactions (with their locks), and writes an end-of-recovery
//! checkpoint. [`Database::close`] writes a shutdown checkpoint, so the next start replays
//! nothing. Dropping a `Database` without closing it is a crash as far as the data directory
//! is concerned. After an I/O failure the engine stops ([`crate::health`],
//! [`Database::health`]): every call fails until a new `Database` is opened, which recovers.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::autovacuum::Autovacuum;
use crate::buffer::bgwriter::{BgWriter, BgWriterSettings};
use crate::buffer::{BufferPool, WriteBackHook};
use crate::catalog::Catalog;
use crate::checkpoint::{CheckpointHook, Checkpointer, ControlData, DbState};
use crate::clog::TxnStatus;
use crate::commands::vacuum::{vacuum_database, vacuum_table, DatabaseVacuum};
use crate::config::Config;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::health::{Health, HealthState};
use crate::recovery::{
    redo_all, InvalidPages, RecoveryStats, RedoContext, Registry, ResourceManager,
};
use crate::session::{IsolationLevel, Transaction};
use crate::smgr::Smgr;
use crate::stats::{StatsRegistry, TableStats};
use crate::txn::lock::{LockManager, LockOwner, LockWait};
use crate::txn::twophase::{PreparedXact, TwoPhase, TwoPhaseRedo};
use crate::txn::{TransactionManager, TxnRecord, FIRST_XID};
use crate::types::{BufferTag, Lsn, Rmid};
use crate::vacuum::VacuumStats;
use crate::vfs::{create_dir_durable, FdBudget, Vfs};
use crate::wal::{Wal, WalReader, WalWriter, WalWriterJobs, FIRST_LSN};

/// The buffer pool's WAL rule, bound once the WAL is open. During redo it is unbound: every
/// page redo dirties carries the LSN of WAL that is already durable. A WAL that stopped by
/// itself fails the engine here, so that no page is written after it (its flush would pass
/// a page whose WAL was flushed before the failure).
struct LateWal {
    wal: OnceLock<Arc<Wal>>,
    health: Arc<Health>,
}

impl WriteBackHook for LateWal {
    fn before_write(&self, tag: BufferTag, page_lsn: Lsn) -> Result<()> {
        let Some(wal) = self.wal.get() else {
            return Ok(());
        };
        if wal.is_failed() && !self.health.is_failed() {
            self.health
                .fail_because("the WAL stopped after a failed write or fsync");
        }
        self.health.check()?;
        wal.before_write(tag, page_lsn)
    }
}

/// Refuses a data directory that holds relation files or WAL but no control file: it is
/// not new (taking it for new would start an empty database over the old files) and
/// without the control file nothing says where redo starts.
fn refuse_without_control_file(vfs: &Arc<dyn Vfs>, data_dir: &Path) -> Result<()> {
    for sub in ["base", "wal"] {
        let path = data_dir.join(sub);
        let exists = vfs
            .exists(&path)
            .map_err(|e| Error::file("look for", &path, e))?;
        if exists {
            return Err(Error::StartupRefused {
                reason: format!(
                    "{} exists but the control file {} is missing: the directory is not new \
                     and nothing says where recovery starts (restore the control file, or \
                     remove the directory if its creation was interrupted)",
                    path.display(),
                    ControlData::path(data_dir).display()
                ),
            });
        }
    }
    Ok(())
}

/// Refuses a redo that stopped before the checkpoint record the control file names: the
/// WAL holding it is missing or cut short, and what the checkpoint promised is not there.
fn refuse_redo_short_of(control: Option<&ControlData>, end: Lsn, wal_dir: &Path) -> Result<()> {
    match control {
        Some(c) if end <= c.checkpoint_lsn => Err(Error::StartupRefused {
            reason: format!(
                "the WAL in {} ends at {end}, before the checkpoint record at {} that the \
                 control file names: a WAL segment is missing or truncated",
                wal_dir.display(),
                c.checkpoint_lsn
            ),
        }),
        _ => Ok(()),
    }
}

/// The permission bits a data directory must not have (PostgreSQL's `PG_MODE_MASK_GROUP`):
/// group write and everything for others. So PostgreSQL 15 starts on `0700` and `0750` (and
/// on the odd `0710` or `0740`), and refuses `0770`, `0755` or `0777`.
const DATA_DIR_FORBIDDEN_MODE: u32 = 0o027;
/// Write permission for the group or others: whoever had it may have put files in the
/// directory, so such a directory is never fixed, only refused.
const WRITABLE_BY_OTHERS: u32 = 0o022;

/// PostgreSQL's `checkDataDir`: refuses a data directory that another user owns, or whose
/// permissions let others in (see [`DATA_DIR_FORBIDDEN_MODE`]). But opening a new data
/// directory (`new`: no control file yet) is also quire's initdb, which sets an existing
/// directory to `0700` ("fixing permissions on existing directory"): so a new directory
/// that others may only read (`0755`, as `mkdir` and `tempfile` make them) is set to
/// `0700`, while one that others may write into is refused, since anybody may have put
/// files in it. On a file system without owners and modes (the simulator) there is nothing
/// to check.
fn check_data_dir(vfs: &Arc<dyn Vfs>, data_dir: &Path, new: bool) -> Result<()> {
    let ownership = vfs
        .ownership(data_dir)
        .map_err(|e| Error::file("read permissions of", data_dir, e))?;
    let Some(ownership) = ownership else {
        return Ok(());
    };
    if !ownership.owned_by_process_user {
        return Err(Error::DataDirOwnership {
            path: data_dir.to_path_buf(),
        });
    }
    if ownership.mode & DATA_DIR_FORBIDDEN_MODE == 0 {
        return Ok(());
    }
    if new && ownership.mode & WRITABLE_BY_OTHERS == 0 {
        let mode = format!("{:04o}", ownership.mode);
        tracing::info!(dir = %data_dir.display(), mode, "fixing permissions on existing directory");
        return vfs
            .restrict_dir_to_owner(data_dir)
            .map_err(|e| Error::file("change permissions of", data_dir, e));
    }
    Err(Error::DataDirPermissions {
        path: data_dir.to_path_buf(),
        mode: ownership.mode,
    })
}

/// The engine's share of the process's file descriptors (PostgreSQL's `set_max_safe_fds`,
/// see [`crate::vfs::fd`]): the storage manager caches at most `max_files_per_process`
/// relation files, fewer if the limit leaves less.
fn descriptor_budget(config: &Config) -> Result<FdBudget> {
    let fixed_files = crate::wal::max_open_files(config);
    let computed = FdBudget::of_this_process(config.max_files_per_process as u64, fixed_files)
        .map_err(|e| Error::file("read the limit on open files of", "/proc/self", e))?;
    let budget = computed.map_err(|short| Error::InsufficientDescriptors {
        allows: short.allows,
        needs: short.needs,
    })?;
    tracing::debug!(
        ?budget,
        for_clients = budget.for_clients(),
        "file descriptors"
    );
    Ok(budget)
}

/// An open data directory.
pub struct Database {
    // The background workers come first: fields drop in order, and a worker must stop before
    // the engine (whose last reference holds the directory's lock) can go.
    autovacuum: Option<Autovacuum>,
    /// Writes the WAL behind inserters; also makes asynchronous commits durable
    /// (`synchronous_commit = off`) and prepares the next WAL segment (`wal_init_zero`).
    /// `None` only once the database is shutting down.
    wal_writer: Option<WalWriter>,
    /// Runs unless `bgwriter_lru_maxpages` is 0.
    bgwriter: Option<BgWriter>,
    checkpointer: Checkpointer,
    data_dir: PathBuf,
    engine: Arc<Engine>,
    recovery: RecoveryStats,
    /// The shared counters as of their last reset (`pg_stat_reset_shared`).
    shared_stats: crate::stats::SharedBaselines,
    /// Where spills go ([`Database::temp_file`]).
    temp_files: crate::temp::TempFiles,
    /// The engine's share of the file descriptors, computed at open.
    descriptors: FdBudget,
}

impl Database {
    /// Opens (creating if needed) a data directory, recovering it if it was not shut down
    /// cleanly. Fails if another engine has it open.
    pub fn open(vfs: &Arc<dyn Vfs>, data_dir: &Path, config: Config) -> Result<Self> {
        Self::open_with(vfs, data_dir, config, &[])
    }

    /// [`Database::open`], with resource managers beyond the engine's own (each with its
    /// `rmid`) for WAL records that only tests and tools write, such as the page-level
    /// records of [`crate::recovery::testrm`]. Redo of a record whose manager is not
    /// registered fails, so a data directory with such records needs them at every open.
    #[cfg(any(test, feature = "testing"))]
    pub fn open_with_resource_managers(
        vfs: &Arc<dyn Vfs>,
        data_dir: &Path,
        config: Config,
        extra: &[(Rmid, Arc<dyn ResourceManager>)],
    ) -> Result<Self> {
        Self::open_with(vfs, data_dir, config, extra)
    }

    fn open_with(
        vfs: &Arc<dyn Vfs>,
        data_dir: &Path,
        config: Config,
        extra: &[(Rmid, Arc<dyn ResourceManager>)],
    ) -> Result<Self> {
        config.validate()?;
        create_dir_durable(&**vfs, data_dir)
            .map_err(|e| Error::file("create data directory", data_dir, e))?;
        let control_path = ControlData::path(data_dir);
        let new = !vfs
            .exists(&control_path)
            .map_err(|e| Error::file("look for", &control_path, e))?;
        check_data_dir(vfs, data_dir, new)?;
        let descriptors = descriptor_budget(&config)?;
        let lock = vfs.lock_dir(data_dir).map_err(|e| {
            let op = if e.kind() == io::ErrorKind::WouldBlock {
                "lock (is another quire running on it?)"
            } else {
                "lock"
            };
            Error::file(op, data_dir, e)
        })?;
        crate::temp::remove_leftovers(&**vfs, data_dir)?;
        let control = ControlData::read(vfs, data_dir)?;
        if control.is_none() {
            refuse_without_control_file(vfs, data_dir)?;
        }
        let smgr_config = Config {
            max_files_per_process: descriptors.cached_files as usize,
            ..config.clone()
        };
        let smgr = Arc::new(Smgr::new(Arc::clone(vfs), data_dir, &smgr_config)?);
        // From here on every file is opened through the storage manager's descriptor pool,
        // which closes its cached files when an open runs out of descriptors.
        let vfs = &Arc::clone(smgr.vfs());
        smgr.check_segments().map_err(|e| Error::StartupRefused {
            reason: format!("{e}, though a later segment exists"),
        })?;
        let wal_dir = Wal::dir_of(data_dir);
        let hook = Arc::new(LateWal {
            wal: OnceLock::new(),
            health: Arc::clone(smgr.health()),
        });
        let pool = Arc::new(BufferPool::new(
            Arc::clone(&smgr),
            &config,
            Some(hook.clone()),
        )?);

        let (start, clean) = match control {
            None => (FIRST_LSN, false),
            Some(c) if c.state == DbState::ShutDown => (c.checkpoint_lsn, true),
            Some(c) => (c.redo_lsn, false),
        };
        let mut reader = WalReader::new(
            Arc::clone(vfs),
            &wal_dir,
            config.wal_segment_size_bytes,
            start,
        );
        let invalid_pages = InvalidPages::default();
        let ctx = RedoContext {
            smgr: &smgr,
            pool: &pool,
            invalid_pages: &invalid_pages,
        };
        let twophase_redo = Arc::new(TwoPhaseRedo::new(Arc::clone(vfs), data_dir));
        let mut registry = resource_managers(Arc::clone(&twophase_redo));
        for (rmid, rm) in extra {
            registry.register(*rmid, Arc::clone(rm));
        }
        smgr.set_in_recovery(true);
        let recovery = redo_all(&mut reader, &registry, &ctx);
        smgr.set_in_recovery(false);
        let recovery = recovery?;
        refuse_redo_short_of(control.as_ref(), reader.end_lsn(), &wal_dir)?;
        if recovery.records > 0 || !clean {
            tracing::info!(
                records = recovery.records,
                bytes = recovery.bytes,
                seconds = recovery.duration.as_secs_f64(),
                from_lsn = %start,
                to_lsn = %reader.end_lsn(),
                "redo done"
            );
        }
        let wal = Arc::new(Wal::open_at(
            Arc::clone(vfs),
            data_dir,
            &config,
            reader.end_lsn(),
            reader.prev_lsn(),
        )?);
        wal.set_redo_point(start);
        if hook.wal.set(Arc::clone(&wal)).is_err() {
            unreachable!("the hook is bound once, here");
        }
        // A failure anywhere stops the WAL too: nothing more is logged, no commit is made.
        let stopped = Arc::clone(&wal);
        smgr.health().on_fail(move |reason| stopped.fail(reason));
        let txns = TransactionManager::new(
            Arc::clone(&wal),
            Arc::clone(&pool),
            // An id at or above the oldest kept one may never have reached the WAL (ids
            // skipped, or a transaction that failed before writing): never hand one out
            // again below it.
            recovery.next_xid.max(recovery.oldest_xid).max(FIRST_XID),
            recovery.oldest_xid.max(FIRST_XID),
            &config,
        );
        let (catalog, catalog_next_oid) = Catalog::load(&pool, &wal)?;
        let next_oid = AtomicU64::new(recovery.next_oid.max(catalog_next_oid).0);
        let engine = Arc::new(Engine {
            locks: LockManager::new(
                config.lock_table_capacity(),
                Duration::from_millis(config.deadlock_timeout_ms),
            ),
            twophase: TwoPhase::new(
                Arc::clone(vfs),
                data_dir,
                config.twophase_state,
                config.max_prepared_transactions,
            ),
            config,
            smgr,
            pool,
            wal,
            txns,
            catalog,
            roots: crate::btree::roots::RootCache::default(),
            next_oid,
            toast_create: parking_lot::Mutex::new(()),
            table_stats: StatsRegistry::default(),
            _dir_lock: lock,
        });
        restore_prepared(&engine, &twophase_redo)?;
        let checkpointer = Checkpointer::new(
            Arc::clone(vfs),
            data_dir,
            &engine.config,
            Arc::clone(&engine.wal),
            Arc::clone(&engine.smgr),
            Arc::clone(&engine.pool),
            Arc::clone(&engine) as Arc<dyn CheckpointHook>,
        );
        if clean && recovery.records == 0 && engine.wal.inserted().0 == 0 {
            // Running again: a crash from now on must redo from the shutdown checkpoint.
            ControlData {
                state: DbState::InProduction,
                checkpoint_lsn: start,
                redo_lsn: start,
            }
            .write(vfs, data_dir)?;
        } else {
            // End of recovery (or a new directory): make everything redone durable.
            checkpointer.checkpoint()?;
        }
        engine.debug_check_idle("after recovery");
        checkpointer.start()?;
        let wal_writer_jobs = WalWriterJobs {
            flush: !engine.config.synchronous_commit,
            prepare_segments: engine.config.wal_init_zero,
        };
        let wal_writer = Some(WalWriter::start(
            Arc::clone(&engine.wal),
            Duration::from_millis(engine.config.wal_writer_delay_ms),
            wal_writer_jobs,
        )?);
        let bgwriter = if engine.config.bgwriter_lru_maxpages > 0 {
            Some(BgWriter::start(
                Arc::clone(&engine.pool),
                BgWriterSettings {
                    delay: Duration::from_millis(engine.config.bgwriter_delay_ms),
                    lru_maxpages: engine.config.bgwriter_lru_maxpages,
                    lru_multiplier: engine.config.bgwriter_lru_multiplier,
                },
            )?)
        } else {
            None
        };
        let autovacuum = if engine.config.autovacuum {
            Some(Autovacuum::start(Arc::clone(&engine))?)
        } else {
            None
        };
        Ok(Database {
            data_dir: data_dir.to_path_buf(),
            engine,
            checkpointer,
            autovacuum,
            wal_writer,
            bgwriter,
            recovery,
            shared_stats: crate::stats::SharedBaselines::new(crate::txn::now_micros()),
            temp_files: crate::temp::TempFiles::new(Arc::clone(vfs), data_dir),
            descriptors,
        })
    }

    /// A new temporary file for data that outgrows memory, removed when dropped
    /// ([`crate::temp`]'s rules).
    pub fn temp_file(&self) -> Result<crate::temp::TempFile> {
        self.temp_files.create()
    }

    /// How many temp files were made since the database opened.
    pub fn temp_files_created(&self) -> u64 {
        self.temp_files.created()
    }

    /// The process's file descriptors and the engine's share of them, as computed when this
    /// database opened ([`crate::vfs::fd`], PostgreSQL's `set_max_safe_fds`): the soft limit
    /// (raised to the hard limit), what was open then, and the most the engine holds. A
    /// server keeps its client sockets (the listening one included) under
    /// [`FdBudget::for_clients`], so that a flood of connections never takes a descriptor
    /// the engine needs. Computed per database: a process that opens several shares one
    /// limit among them.
    pub fn file_descriptors(&self) -> FdBudget {
        self.descriptors
    }

    /// Writes the shutdown checkpoint and closes: the next open replays nothing. Prepared
    /// transactions stay prepared. Refused while transactions are open (end them first,
    /// see [`Database::open_transactions`]): the `Database` is then dropped without a
    /// shutdown checkpoint — a crash as far as the directory is concerned — and the
    /// directory stays locked until the last of those transactions has ended.
    pub fn close(mut self) -> Result<()> {
        // The worker ends first: a vacuum it runs is a transaction too. The background and WAL
        // writers too: the shutdown checkpoint writes and flushes what is left, and then
        // nothing may write.
        drop(self.autovacuum.take());
        drop(self.bgwriter.take());
        drop(self.wal_writer.take());
        let open = self.open_transactions();
        if open > 0 {
            return Err(Error::InvalidTransactionState {
                what: format!("cannot close the database: {open} transactions are still open"),
            });
        }
        self.checkpointer.shutdown()?;
        self.engine
            .debug_check_idle("after the shutdown checkpoint");
        Ok(())
    }

    /// Running, or stopped by an I/O failure (PostgreSQL's PANIC; see [`crate::health`]):
    /// then every call fails with SQLSTATE 58030 naming the failure, and only opening the
    /// directory again (which recovers from the WAL) goes on.
    pub fn health(&self) -> HealthState {
        // Checked, not just read: a WAL that stopped by itself is noticed here too.
        let _ = self.engine.check_health();
        self.engine.smgr.health().state()
    }

    /// Transactions begun and not yet ended.
    pub fn open_transactions(&self) -> usize {
        self.engine.txns.procs().sessions()
    }

    /// BEGIN: a new transaction at `isolation`, its locks held by its own process-array slot.
    pub fn begin(&self, isolation: IsolationLevel) -> Result<Transaction> {
        Transaction::begin(Arc::clone(&self.engine), isolation, None)
    }

    /// BEGIN in a client session: the transaction's locks are held by `owner` (a
    /// [`LockOwner::backend`]), so they and the session's advisory locks are one holder's
    /// (they never conflict, and the deadlock check sees one process). At most one
    /// transaction of an owner runs at a time.
    pub fn begin_as(&self, isolation: IsolationLevel, owner: LockOwner) -> Result<Transaction> {
        Transaction::begin(Arc::clone(&self.engine), isolation, Some(owner))
    }

    /// A client session ends: its session-level advisory locks go
    /// (`pg_advisory_unlock_all` at backend exit).
    pub fn release_session_locks(&self, owner: LockOwner) {
        self.engine.locks.release_session_all(owner);
    }

    /// Every lock held or awaited, for `pg_locks`.
    pub fn lock_status(&self) -> Vec<crate::LockStatus> {
        self.engine.locks.status()
    }

    /// VACUUM of one table: removes the versions no snapshot can see any more, frees their
    /// line pointers (and index entries), records free space, marks all-visible pages, and
    /// cuts empty pages off the end of the table when ACCESS EXCLUSIVE can be had at once
    /// (else it leaves them, as PostgreSQL does). Runs alongside reads and writes.
    pub fn vacuum(&self, table: crate::TableId) -> Result<VacuumStats> {
        self.engine.check_health()?;
        let stats = vacuum_table(&self.engine, table, true)?;
        Ok(stats.expect("a vacuum that waits for its lock always runs"))
    }

    /// What is known of a table's tuples (PostgreSQL's `pg_stat_user_tables`): estimates
    /// since the start, exact after a vacuum. `None` for a table nothing was counted for.
    pub fn table_stats(&self, table: crate::TableId) -> Option<TableStats> {
        self.engine.table_stats.get(table)
    }

    /// VACUUM of every table and of the catalog (PostgreSQL's database-wide `VACUUM`), then
    /// the commit logs drop the statuses no table needs any more (their old segments are
    /// removed). Waits for each table's lock.
    pub fn vacuum_all(&self) -> Result<DatabaseVacuum> {
        vacuum_database(&self.engine, true)
    }

    /// COMMIT PREPARED `gid`.
    pub fn commit_prepared(&self, gid: &str) -> Result<()> {
        self.finish_prepared(gid, true)
    }

    /// The file layer's operation counts since the database opened (opens, reads, writes,
    /// size probes, fsyncs, ...): what `quire_stat_io` shows.
    pub fn io_counts(&self) -> crate::vfs::OpCounts {
        self.engine.smgr.vfs().counters().snapshot()
    }

    /// The WAL's counters since the database opened, never reset (`pg_stat_wal` shows
    /// [`Database::wal_stats`]).
    pub fn wal_counters(&self) -> crate::wal::WalCounters {
        self.engine.wal.counters()
    }

    /// `pg_stat_wal`'s counters since they were last reset (or the database opened), and
    /// when that was, in microseconds since the Unix epoch.
    pub fn wal_stats(&self) -> (crate::wal::WalCounters, u64) {
        self.shared_stats.wal(self.engine.wal.counters())
    }

    /// `pg_stat_bgwriter`'s counters since they were last reset (or the database opened),
    /// and when that was.
    pub fn bgwriter_stats(&self) -> (crate::stats::BgwriterCounters, u64) {
        self.shared_stats.bgwriter(self.bgwriter_counters())
    }

    /// `pg_stat_reset_shared`: `which` counters count from zero again, from now.
    pub fn reset_shared_stats(&self, which: crate::stats::SharedStats) {
        let now = crate::txn::now_micros();
        match which {
            crate::stats::SharedStats::Bgwriter => self
                .shared_stats
                .reset_bgwriter(self.bgwriter_counters(), now),
            crate::stats::SharedStats::Wal => {
                self.shared_stats.reset_wal(self.engine.wal.counters(), now);
            }
        }
    }

    fn bgwriter_counters(&self) -> crate::stats::BgwriterCounters {
        crate::stats::BgwriterCounters::read(self.checkpointer.stats(), self.engine.pool.stats())
    }

    /// The WAL's insert, write and flush positions: what `pg_current_wal_insert_lsn()`,
    /// `pg_current_wal_lsn()` and `pg_current_wal_flush_lsn()` show.
    pub fn wal_positions(&self) -> crate::wal::WalPositions {
        self.engine.wal.positions()
    }

    /// Ends the lock wait of the session `owner` (its transaction's
    /// [`Transaction::session_id`](crate::Transaction::session_id)), if it is waiting: the
    /// waiting call fails with SQLSTATE 57014. A client's cancel request and a statement
    /// timeout use it. Returns whether a wait was cancelled.
    pub fn cancel_lock_wait(&self, owner: crate::LockOwner) -> bool {
        self.engine.locks.cancel_wait(owner)
    }

    /// The catalog's generation: it moves whenever a definition may have changed for some
    /// transaction (a DDL's catalog write, the end of a transaction that made one). A plan
    /// cache keeps a plan while it is unchanged.
    pub fn catalog_generation(&self) -> u64 {
        self.engine.catalog.generation()
    }

    /// CHECKPOINT: an immediate checkpoint, as PostgreSQL's command requests one.
    pub fn checkpoint(&self) -> Result<Lsn> {
        self.checkpointer.checkpoint()
    }

    /// ROLLBACK PREPARED `gid`.
    pub fn rollback_prepared(&self, gid: &str) -> Result<()> {
        self.finish_prepared(gid, false)
    }

    fn finish_prepared(&self, gid: &str, commit: bool) -> Result<()> {
        let e = &self.engine;
        e.check_health()?;
        let f = e.twophase.begin_finish(gid, &e.wal)?;
        let (record_type, drops) = if commit {
            (TxnRecord::CommitPrepared, &f.state.commit_drops)
        } else {
            (TxnRecord::AbortPrepared, &f.state.abort_drops)
        };
        if let Err(err) = e
            .txns
            .end(f.xid, record_type, Some(gid), &f.state.subxids, drops)
        {
            e.twophase.finish_failed(gid);
            return Err(err);
        }
        e.txns.procs().end_prepared(f.xid);
        if f.state.may_change_definitions() {
            e.catalog.invalidate();
        }
        e.locks.release_all(LockOwner::prepared(f.xid));
        e.pool.drop_relation_files(drops)?;
        e.twophase.finished(gid)
    }

    /// The prepared transactions (PostgreSQL's `pg_prepared_xacts`), by gid.
    pub fn prepared_transactions(&self) -> Vec<PreparedXact> {
        self.engine.twophase.list()
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn config(&self) -> &Config {
        &self.engine.config
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn smgr(&self) -> &Arc<Smgr> {
        &self.engine.smgr
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn buffer_pool(&self) -> &Arc<BufferPool> {
        &self.engine.pool
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn wal(&self) -> &Arc<Wal> {
        &self.engine.wal
    }

    /// The cache of index roots every [`crate::btree::BTree`] of this database shares.
    #[cfg(any(test, feature = "testing"))]
    pub fn btree_roots(&self) -> &crate::btree::roots::RootCache {
        &self.engine.roots
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn checkpointer(&self) -> &Checkpointer {
        &self.checkpointer
    }

    /// Transaction ids, snapshots, commit-log lookups.
    #[cfg(any(test, feature = "testing"))]
    pub fn transactions(&self) -> &TransactionManager {
        &self.engine.txns
    }

    /// The table and transaction locks.
    #[cfg(any(test, feature = "testing"))]
    pub fn locks(&self) -> &LockManager {
        &self.engine.locks
    }

    /// Switches `twophase_state` (seed 003) for transactions prepared from now on, so a
    /// benchmark can run both behaviours on one open database.
    #[cfg(any(test, feature = "testing"))]
    pub fn set_twophase_state(&self, mode: crate::config::TwophaseStateMode) {
        self.engine.twophase.set_mode(mode);
    }

    /// Prepared-transaction counters (seed 003's figures).
    pub fn twophase_stats(&self) -> &crate::txn::twophase::TwoPhaseStats {
        self.engine.twophase.stats()
    }

    /// What the startup redo did.
    pub fn recovery_stats(&self) -> RecoveryStats {
        self.recovery
    }
}

/// The resource managers of this engine build, by `rmid` (PostgreSQL's `rmgrlist.h`): the
/// one place that names them all. Prepared transactions that redo finds are collected in
/// `twophase`.
fn resource_managers(twophase: Arc<TwoPhaseRedo>) -> Registry {
    use crate::recovery::rmid;
    let mut registry = Registry::new();
    registry.register(rmid::HEAP, Arc::new(crate::heap::redo::HeapRedo));
    registry.register(rmid::BTREE, Arc::new(crate::btree::redo::BTreeRedo));
    registry.register(rmid::SEQUENCE, Arc::new(crate::sequence::SequenceRedo));
    let txn = Arc::new(crate::txn::TxnRedo::new(twophase));
    registry.register(rmid::TXN, txn.clone());
    registry.register(rmid::CLOG, txn);
    registry
}

/// Brings back the prepared transactions that redo and the state files know: running again,
/// holding their locks.
fn restore_prepared(engine: &Engine, redo: &TwoPhaseRedo) -> Result<()> {
    // Below the oldest kept status nothing runs: a state file there is stale.
    let prepared = engine.twophase.recover(redo.take(), |xid| {
        Ok(xid < engine.txns.oldest_xid() || engine.txns.status(xid)? != TxnStatus::InProgress)
    })?;
    // The subtransaction map is unlogged: whatever survived the crash may be torn.
    engine.txns.reset_subtrans()?;
    for state in prepared {
        engine
            .txns
            .procs()
            .add_prepared(state.xid, !state.subxids.is_empty());
        for &sub in &state.subxids {
            engine.txns.note_subxid(sub, state.xid)?;
        }
        for (tag, mode) in &state.locks {
            engine.locks.acquire(
                LockOwner::prepared(state.xid),
                *tag,
                *mode,
                LockWait::NoWait,
            )?;
        }
        tracing::info!(gid = %state.gid, xid = %state.xid, "recovered a prepared transaction");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::{OsVfs, SimVfs};

    #[test]
    fn a_data_directory_is_opened_by_one_engine_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
        let db = Database::open(&vfs, dir.path(), Config::default()).unwrap();
        let err = Database::open(&vfs, dir.path(), Config::default())
            .err()
            .expect("the directory is locked");
        assert!(err.to_string().contains("another quire"), "{err}");
        db.close().unwrap();
        Database::open(&vfs, dir.path(), Config::default()).unwrap();
    }

    #[test]
    fn a_timed_checkpoint_spreads_its_writes_over_the_interval() {
        use crate::recovery::testrm;
        use crate::types::{Fork, RelFileLocator};
        use std::sync::atomic::Ordering;
        let vfs: Arc<dyn Vfs> = Arc::new(SimVfs::new(3));
        let config = Config {
            checkpoint_timeout_s: 1,
            checkpoint_completion_target: 0.8,
            ..Config::default()
        };
        let db = Database::open(&vfs, Path::new("/data"), config).unwrap();
        let rel = RelFileLocator::new(1, 9);
        db.smgr().create(rel, Fork::Main).unwrap();
        for _ in 0..100 {
            let buf = db.buffer_pool().extend(rel, Fork::Main).unwrap();
            testrm::set_bytes(db.wal(), &buf, 100, b"spread me").unwrap();
        }
        let stats = db.checkpointer().stats();
        let before = stats.checkpoints.load(Ordering::Relaxed);
        // Bounded wait: the timed checkpoint comes within 1 s and takes about 0.8 s.
        for _ in 0..100 {
            if stats.checkpoints.load(Ordering::Relaxed) > before {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(
            stats.checkpoints.load(Ordering::Relaxed) > before,
            "no timed checkpoint ran"
        );
        // Paced: the 100 writes were spread over (most of) the 0.8 s budget.
        let spread_ms = stats.last_write_ms.load(Ordering::Relaxed);
        assert!(spread_ms >= 500, "writes took {spread_ms} ms: not spread");
        // pg_stat_bgwriter counts it as timed (the checkpoint at open was requested), with
        // its 100 buffers and its write time.
        let (bg, _) = db.bgwriter_stats();
        assert!(bg.checkpoints_timed >= 1, "{bg:?}");
        assert!(bg.buffers_checkpoint >= 100, "{bg:?}");
        assert!(bg.checkpoint_write_us >= 500_000, "{bg:?}");
        let buf = db
            .buffer_pool()
            .read_buffer(BufferTag::new(rel, Fork::Main, 0))
            .unwrap();
        assert_eq!(&buf.read()[100..109], b"spread me");
        drop(buf);
        db.close().unwrap();
    }

    /// Each resource manager's record types carry the `rmid` and `info` bytes that
    /// `docs/design.md` documents, and decode back; the bytes around them name no type.
    #[test]
    fn record_types_have_the_documented_ids_and_info_bytes() {
        use crate::btree::redo::BTreeRecord as B;
        use crate::clog::XactLogRecord as C;
        use crate::heap::redo::HeapRecord as H;
        use crate::recovery::storage::StorageRecord as S;
        use crate::recovery::testrm::TestRecord;
        use crate::recovery::XlogRecord as X;
        use crate::txn::TxnRecord as T;
        use crate::wal::RecordType;

        fn bytes<R: RecordType + PartialEq>(all: &[R]) -> (u8, Vec<u8>) {
            let info: Vec<u8> = all.iter().map(|t| t.to_u8()).collect();
            for (&t, &b) in all.iter().zip(&info) {
                assert_eq!(R::from_u8(b), Some(t));
            }
            assert_eq!(R::from_u8(0), None);
            assert_eq!(R::from_u8(info.iter().max().expect("not empty") + 1), None);
            (R::RMID.0, info)
        }
        let xlog = [X::CheckpointOnline, X::CheckpointShutdown];
        assert_eq!(bytes(&xlog), (0, vec![1, 2]));
        assert_eq!(
            bytes(&[S::Create, S::Truncate, S::Drop]),
            (1, vec![1, 2, 3])
        );
        assert_eq!(bytes(&[C::Image, C::Truncate]), (2, vec![1, 2]));
        let txn = [
            T::Commit,
            T::Abort,
            T::Prepare,
            T::CommitPrepared,
            T::AbortPrepared,
        ];
        assert_eq!(bytes(&txn), (3, vec![1, 2, 3, 4, 5]));
        let heap = [
            H::Insert,
            H::Delete,
            H::Update,
            H::Lock,
            H::Prune,
            H::Visible,
            H::Free,
            H::Freeze,
        ];
        assert_eq!(bytes(&heap), (4, vec![1, 2, 3, 4, 5, 6, 7, 8]));
        let btree = [
            B::Create,
            B::Insert,
            B::Split,
            B::Delete,
            B::NewPages,
            B::Meta,
        ];
        assert_eq!(bytes(&btree), (5, vec![1, 2, 3, 4, 5, 6]));
        assert_eq!(bytes(&[TestRecord::SetBytes]), (255, vec![1]));
    }

    #[test]
    fn bad_settings_are_refused_with_the_setting_named() {
        let vfs: Arc<dyn Vfs> = Arc::new(SimVfs::new(1));
        let config = Config {
            shared_buffers_bytes: 1000,
            ..Config::default()
        };
        let err = Database::open(&vfs, Path::new("/data"), config)
            .err()
            .unwrap();
        assert!(err.to_string().contains("shared_buffers"), "{err}");
    }
}
