//! The control file, `<data>/global/quire_control`: where recovery starts. Written
//! crash-safely (a new file, fsynced, renamed over the old one, directory fsynced), so a crash
//! leaves either the old or the new contents, never a mix. Byte layout (little-endian):
//!
//! ```text
//! 0       4         8       12       16                24              32              36     40
//! | magic | version | state | rsvd   | checkpoint_lsn  | redo_lsn      | crc32c(0..32) | zero |
//! ```
//! `magic` 0x5143544C, `version` 2 (the on-disk format: version 1 had heap tuple headers
//! of 34 bytes), `state` 1 shut down or 2 in production ([`DbState`]);
//! the reserved word and the last four bytes are zero.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::vfs::{OpenMode, Vfs};
use crate::types::Lsn;

const MAGIC: u32 = 0x5143_544C; // "QCTL"
/// The on-disk format's version; bumped whenever pages or records change shape.
const VERSION: u32 = 2;
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
    /// Where the control file of `data_dir` is: a data directory without one is new.
    pub fn path(data_dir: &Path) -> PathBuf {
        paths(data_dir).0
    }

    fn encode(&self) -> [u8; SIZE] {
        let mut b = [0u8; SIZE];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&VERSION.to_le_bytes());
        b[8..12].copy_from_slice(&(self.state as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.checkpoint_lsn.0.to_le_bytes());
        b[24..32].copy_from_slice(&self.redo_lsn.0.to_le_bytes());
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
        let u32_at = |at: usize| crate::bytes::u32_at(b, at).expect("the size is checked");
        let u64_at = |at: usize| crate::bytes::u64_at(b, at).expect("the size is checked");
        let crc = crc32c::crc32c(&b[..32]);
        if u32_at(32) != crc {
            return Err(bad(format!(
                "checksum mismatch: stored {:#010x}, computed {crc:#010x}",
                u32_at(32)
            )));
        }
        if u32_at(0) != MAGIC {
            return Err(bad("not a quire control file (bad magic)".to_string()));
        }
        if u32_at(4) != VERSION {
            return Err(bad(format!(
                "the data directory is in on-disk format version {}, this quire reads version \
                 {VERSION} only (dump it with the quire that made it, and restore it here)",
                u32_at(4)
            )));
        }
        let state = match u32_at(8) {
            1 => DbState::ShutDown,
            2 => DbState::InProduction,
            other => return Err(bad(format!("unknown state {other}"))),
        };
        Ok(ControlData {
            state,
            checkpoint_lsn: Lsn(u64_at(16)),
            redo_lsn: Lsn(u64_at(24)),
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
        crate::vfs::create_dir_durable(&**vfs, &dir)
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
    fn control_file_bytes_match_the_documented_layout() {
        let c = ControlData {
            state: DbState::InProduction,
            checkpoint_lsn: Lsn(0x0102_0304_0506_0708),
            redo_lsn: Lsn(0x1112_1314_1516_1718),
        };
        #[rustfmt::skip]
        let mut expected: [u8; 40] = [
            0x4C, 0x54, 0x43, 0x51, // magic 0x5143544C
            2, 0, 0, 0, // version
            2, 0, 0, 0, // state: in production
            0, 0, 0, 0, // reserved
            0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, // checkpoint_lsn
            0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, // redo_lsn
            0, 0, 0, 0, // crc32c(0..32), below
            0, 0, 0, 0, // zero
        ];
        let crc = crc32c::crc32c(&expected[..32]);
        expected[32..36].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(c.encode(), expected);
        let path = Path::new("quire_control");
        assert_eq!(ControlData::decode(&expected, path).unwrap(), c);
        let shut_down = ControlData {
            state: DbState::ShutDown,
            ..c
        };
        assert_eq!(shut_down.encode()[8..12], [1, 0, 0, 0]);
        // A data directory of the older format is refused by its version, in so many words.
        let mut older = expected;
        older[4..8].copy_from_slice(&1u32.to_le_bytes());
        let crc = crc32c::crc32c(&older[..32]);
        older[32..36].copy_from_slice(&crc.to_le_bytes());
        let refused = ControlData::decode(&older, path).unwrap_err().to_string();
        assert!(
            refused.contains("on-disk format version 1, this quire reads version 2"),
            "{refused}"
        );
        for len in [0, 36, 39, 41] {
            let mut b = expected.to_vec();
            b.resize(len, 0);
            let err = ControlData::decode(&b, path).unwrap_err().to_string();
            assert!(err.contains("expected 40"), "{err}");
        }
    }

    #[test]
    fn round_trips_survives_power_loss_and_detects_corruption() {
        let sim = Arc::new(SimVfs::new(1));
        let vfs: Arc<dyn Vfs> = sim.clone();
        let dir = Path::new("/data");
        assert_eq!(ControlData::read(&vfs, dir).unwrap(), None);
        let a = ControlData {
            state: DbState::InProduction,
            checkpoint_lsn: Lsn(100),
            redo_lsn: Lsn(50),
        };
        a.write(&vfs, dir).unwrap();
        sim.crash(&CrashOptions::default());
        assert_eq!(ControlData::read(&vfs, dir).unwrap(), Some(a));
        let b = ControlData {
            state: DbState::ShutDown,
            checkpoint_lsn: Lsn(900),
            redo_lsn: Lsn(900),
        };
        b.write(&vfs, dir).unwrap();
        assert_eq!(ControlData::read(&vfs, dir).unwrap(), Some(b));
        sim.flip_bit(&dir.join("global/quire_control"), 20, 1)
            .unwrap();
        let err = ControlData::read(&vfs, dir).unwrap_err();
        assert!(err.to_string().contains("checksum mismatch"), "{err}");
    }
}
