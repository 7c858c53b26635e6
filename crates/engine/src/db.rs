//! The engine as one object: a data directory opened exclusively, with its storage manager,
//! buffer pool, WAL and checkpointer. [`Database::open`] is startup: it reads the control file
//! and, unless the last stop was clean, redoes the WAL from the last checkpoint's redo point,
//! then writes an end-of-recovery checkpoint. [`Database::close`] writes a shutdown checkpoint,
//! so the next start replays nothing. Dropping a `Database` without closing it is a crash as
//! far as the data directory is concerned.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::buffer::{BufferPool, BufferTag, WriteBackHook};
use crate::checkpoint::{Checkpointer, ControlData, DbState};
use crate::clog::{COMMIT_TS_LOG, STATUS_LOG};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::recovery::{redo_all, RecoveryStats, RedoContext, Registry};
use crate::smgr::Smgr;
use crate::txn::{TransactionManager, FIRST_XID};
use crate::vfs::{DirLock, Vfs};
use crate::wal::{Wal, WalReader, FIRST_LSN};
use std::sync::atomic::AtomicU64;

/// The buffer pool's WAL rule, bound once the WAL is open. During redo it is unbound: every
/// page redo dirties carries the LSN of WAL that is already durable.
#[derive(Default)]
struct LateWal(OnceLock<Arc<Wal>>);

impl WriteBackHook for LateWal {
    fn before_write(&self, tag: BufferTag, page_lsn: u64) -> Result<()> {
        match self.0.get() {
            Some(wal) => wal.before_write(tag, page_lsn),
            None => Ok(()),
        }
    }
}

/// An open data directory.
pub struct Database {
    data_dir: PathBuf,
    config: Config,
    smgr: Arc<Smgr>,
    pool: Arc<BufferPool>,
    wal: Arc<Wal>,
    checkpointer: Checkpointer,
    txn: TransactionManager,
    recovery: RecoveryStats,
    // Dropped last: the directory stays locked until everything above is gone.
    _lock: Box<dyn DirLock>,
}

impl Database {
    /// Opens (creating if needed) a data directory, recovering it if it was not shut down
    /// cleanly. Fails if another engine has it open.
    pub fn open(vfs: &Arc<dyn Vfs>, data_dir: &Path, config: Config) -> Result<Self> {
        config.validate()?;
        vfs.create_dir_all(data_dir)
            .map_err(|e| Error::file("create data directory", data_dir, e))?;
        let lock = vfs.lock_dir(data_dir).map_err(|e| {
            let op = if e.kind() == io::ErrorKind::WouldBlock {
                "lock (is another quire running on it?)"
            } else {
                "lock"
            };
            Error::file(op, data_dir, e)
        })?;
        let smgr = Arc::new(Smgr::new(Arc::clone(vfs), data_dir, &config)?);
        let hook = Arc::new(LateWal::default());
        let pool = Arc::new(BufferPool::new(
            Arc::clone(&smgr),
            &config,
            Some(hook.clone()),
        )?);

        let control = ControlData::read(vfs, data_dir)?;
        let (start, clean) = match control {
            None => (FIRST_LSN, false),
            Some(c) if c.state == DbState::ShutDown => (c.checkpoint_lsn, true),
            Some(c) => (c.redo_lsn, false),
        };
        let mut reader = WalReader::new(
            Arc::clone(vfs),
            &Wal::dir_of(data_dir),
            config.wal_segment_size_bytes,
            start,
        );
        let ctx = RedoContext {
            smgr: &smgr,
            pool: &pool,
        };
        STATUS_LOG.ensure_created(&smgr)?;
        COMMIT_TS_LOG.ensure_created(&smgr)?;
        let recovery = redo_all(&mut reader, &Registry::with_builtins(), &ctx)?;
        if recovery.records > 0 || !clean {
            tracing::info!(
                records = recovery.records,
                bytes = recovery.bytes,
                seconds = recovery.duration.as_secs_f64(),
                from_lsn = start,
                to_lsn = reader.end_lsn(),
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
        if hook.0.set(Arc::clone(&wal)).is_err() {
            unreachable!("the hook is bound once, here");
        }
        let next_xid = Arc::new(AtomicU64::new(recovery.next_xid.max(FIRST_XID)));
        let checkpointer = Checkpointer::new(
            Arc::clone(vfs),
            data_dir,
            &config,
            Arc::clone(&wal),
            Arc::clone(&smgr),
            Arc::clone(&pool),
            Arc::clone(&next_xid),
        );
        let txn = TransactionManager::new(
            Arc::clone(&wal),
            Arc::clone(&pool),
            next_xid,
            config.synchronous_commit,
            config.track_commit_timestamp,
        );
        if clean && recovery.records == 0 {
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
        checkpointer.start()?;
        Ok(Database {
            data_dir: data_dir.to_path_buf(),
            config,
            smgr,
            pool,
            wal,
            checkpointer,
            txn,
            recovery,
            _lock: lock,
        })
    }

    /// Writes the shutdown checkpoint and closes: the next open replays nothing.
    pub fn close(self) -> Result<()> {
        self.checkpointer.shutdown()?;
        Ok(())
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn smgr(&self) -> &Arc<Smgr> {
        &self.smgr
    }

    pub fn buffer_pool(&self) -> &Arc<BufferPool> {
        &self.pool
    }

    pub fn wal(&self) -> &Arc<Wal> {
        &self.wal
    }

    pub fn checkpointer(&self) -> &Checkpointer {
        &self.checkpointer
    }

    /// Transaction ids, commit and abort.
    pub fn transactions(&self) -> &TransactionManager {
        &self.txn
    }

    /// What the startup redo did.
    pub fn recovery_stats(&self) -> RecoveryStats {
        self.recovery
    }
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
        use crate::buffer::BufferTag;
        use crate::recovery::testrm;
        use crate::smgr::{Fork, RelFileLocator};
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
        let buf = db
            .buffer_pool()
            .read_buffer(BufferTag::new(rel, Fork::Main, 0))
            .unwrap();
        assert_eq!(&buf.read()[100..109], b"spread me");
        drop(buf);
        db.close().unwrap();
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
