//! The engine as one object: a data directory opened exclusively, with its storage manager
//! and buffer pool. Later layers (WAL, checkpointer, transactions) hang off this too.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::buffer::BufferPool;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::smgr::Smgr;
use crate::vfs::{DirLock, Vfs};

/// An open data directory.
pub struct Database {
    data_dir: PathBuf,
    config: Config,
    smgr: Arc<Smgr>,
    pool: Arc<BufferPool>,
    // Dropped last: the directory stays locked until everything above is gone.
    _lock: Box<dyn DirLock>,
}

impl Database {
    /// Opens (creating if needed) a data directory. Fails if another engine has it open.
    pub fn open(vfs: Arc<dyn Vfs>, data_dir: &Path, config: Config) -> Result<Self> {
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
        let smgr = Arc::new(Smgr::new(vfs, data_dir, &config)?);
        let pool = Arc::new(BufferPool::new(Arc::clone(&smgr), &config, None)?);
        Ok(Database {
            data_dir: data_dir.to_path_buf(),
            config,
            smgr,
            pool,
            _lock: lock,
        })
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::{OsVfs, SimVfs};

    #[test]
    fn a_data_directory_is_opened_by_one_engine_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
        let db = Database::open(Arc::clone(&vfs), dir.path(), Config::default()).unwrap();
        let err = Database::open(Arc::clone(&vfs), dir.path(), Config::default())
            .err()
            .expect("the directory is locked");
        assert!(err.to_string().contains("another quire"), "{err}");
        drop(db);
        Database::open(vfs, dir.path(), Config::default()).unwrap();
    }

    #[test]
    fn bad_settings_are_refused_with_the_setting_named() {
        let vfs: Arc<dyn Vfs> = Arc::new(SimVfs::new(1));
        let config = Config {
            shared_buffers_bytes: 1000,
            ..Config::default()
        };
        let err = Database::open(vfs, Path::new("/data"), config)
            .err()
            .unwrap();
        assert!(err.to_string().contains("shared_buffers"), "{err}");
    }
}
