//! The control file, `<data>/global/quire_control`: where recovery starts. Written
//! crash-safely (a new file, fsynced, renamed over the old one, directory fsynced), so a crash
//! leaves either the old or the new contents, never a mix. Byte layout (little-endian):
//!
//! ```text
//! 0       4         8       12       16                24              32              40
//! | magic | version | state | rsvd   | checkpoint_lsn  | redo_lsn      | crc32c(0..32) |
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::vfs::{OpenMode, Vfs};
use crate::wal::Lsn;

const MAGIC: u32 = 0x5143_544C; // "QCTL"
const VERSION: u32 = 1;
const SIZE: usize = 40;

/// How the engine last stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DbState {
    /// A shutdown checkpoint was written: nothing to redo.
    ShutDown = 1,
    /// Running (or crashed while running): redo from the redo point.
    InProduction = 2,
}

/// The contents of the control file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlData {
    pub state: DbState,
    /// Where the last checkpoint record starts.
    pub checkpoint_lsn: Lsn,
    /// Where redo starts: the WAL insert position when that checkpoint began.
    pub redo_lsn: Lsn,
}

fn paths(data_dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let dir = data_dir.join("global");
    (
        dir.join("quire_control"),
        dir.join("quire_control.tmp"),
        dir,
    )
}

impl ControlData {
    fn encode(&self) -> [u8; SIZE] {
        let mut b = [0u8; SIZE];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&VERSION.to_le_bytes());
        b[8..12].copy_from_slice(&(self.state as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.checkpoint_lsn.to_le_bytes());
        b[24..32].copy_from_slice(&self.redo_lsn.to_le_bytes());
        let crc = crc32c::crc32c(&b[..32]);
        b[32..36].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8], path: &Path) -> Result<Self> {
        let bad = |reason: String| Error::ControlFile {
            path: path.to_path_buf(),
            reason,
        };
        if b.len() != SIZE {
            return Err(bad(format!("{} bytes, expected {SIZE}", b.len())));
        }
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let crc = crc32c::crc32c(&b[..32]);
        if u32_at(32) != crc {
            return Err(bad(format!(
                "checksum mismatch: stored {:#010x}, computed {crc:#010x}",
                u32_at(32)
            )));
        }
        if u32_at(0) != MAGIC || u32_at(4) != VERSION {
            return Err(bad(format!(
                "not a quire control file of version {VERSION}"
            )));
        }
        let state = match u32_at(8) {
            1 => DbState::ShutDown,
            2 => DbState::InProduction,
            other => return Err(bad(format!("unknown state {other}"))),
        };
        Ok(ControlData {
            state,
            checkpoint_lsn: u64_at(16),
            redo_lsn: u64_at(24),
        })
    }

    /// Reads the control file; `None` if there is none (a new data directory).
    pub fn read(vfs: &Arc<dyn Vfs>, data_dir: &Path) -> Result<Option<Self>> {
        let (path, _, _) = paths(data_dir);
        let file = match vfs.open(&path, OpenMode::Existing) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::file("open", &path, e)),
        };
        let mut b = [0u8; SIZE + 1];
        let n = file
            .read_at(&mut b, 0)
            .map_err(|e| Error::file("read", &path, e))?;
        Self::decode(&b[..n], &path).map(Some)
    }

    /// Replaces the control file crash-safely.
    pub fn write(&self, vfs: &Arc<dyn Vfs>, data_dir: &Path) -> Result<()> {
        let (path, tmp, dir) = paths(data_dir);
        vfs.create_dir_all(&dir)
            .map_err(|e| Error::file("create directory", &dir, e))?;
        let file = vfs
            .open(&tmp, OpenMode::CreateIfMissing)
            .map_err(|e| Error::file("create", &tmp, e))?;
        file.set_len(0)
            .map_err(|e| Error::file("truncate", &tmp, e))?;
        file.write_at(&self.encode(), 0)
            .map_err(|e| Error::file("write", &tmp, e))?;
        file.sync_all().map_err(|e| Error::file("fsync", &tmp, e))?;
        drop(file);
        vfs.rename(&tmp, &path)
            .map_err(|e| Error::file("rename", &tmp, e))?;
        vfs.sync_dir(&dir)
            .map_err(|e| Error::file("fsync directory", &dir, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::{CrashOptions, SimVfs};

    #[test]
    fn round_trips_survives_power_loss_and_detects_corruption() {
        let sim = Arc::new(SimVfs::new(1));
        let vfs: Arc<dyn Vfs> = sim.clone();
        let dir = Path::new("/data");
        assert_eq!(ControlData::read(&vfs, dir).unwrap(), None);
        let a = ControlData {
            state: DbState::InProduction,
            checkpoint_lsn: 100,
            redo_lsn: 50,
        };
        a.write(&vfs, dir).unwrap();
        sim.crash(&CrashOptions::default());
        assert_eq!(ControlData::read(&vfs, dir).unwrap(), Some(a));
        let b = ControlData {
            state: DbState::ShutDown,
            checkpoint_lsn: 900,
            redo_lsn: 900,
        };
        b.write(&vfs, dir).unwrap();
        assert_eq!(ControlData::read(&vfs, dir).unwrap(), Some(b));
        sim.flip_bit(&dir.join("global/quire_control"), 20, 1)
            .unwrap();
        let err = ControlData::read(&vfs, dir).unwrap_err();
        assert!(err.to_string().contains("checksum mismatch"), "{err}");
    }
}
