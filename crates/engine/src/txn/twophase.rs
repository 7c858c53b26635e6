//! Prepared transactions (two-phase commit, seed 003).
//!
//! `PREPARE TRANSACTION 'gid'` writes a prepare record holding everything needed to finish
//! the transaction later — its locks, the relation files to drop at commit and at abort —
//! flushes it, and hands the transaction's locks and running id to a `GlobalTxn` owned by
//! no session. The transaction survives crashes and restarts still holding its locks, until
//! `COMMIT PREPARED` or `ROLLBACK PREPARED`.
//!
//! ## Where the state is found when the transaction is finished
//! - `twophase_state = memory` (default): the decoded state stays in memory from PREPARE to
//!   the end, so COMMIT PREPARED opens no file and reads no WAL. Memory is bounded by
//!   `max_prepared_transactions` × the largest prepare record ([`MAX_STATE_BYTES`]).
//! - `twophase_state = reread_wal`: PostgreSQL's behaviour — the state is re-read from the
//!   prepare record, in the WAL segment file opened for the purpose, at every COMMIT/ROLLBACK
//!   PREPARED (PostgreSQL's `XlogReadTwoPhaseData`).
//! - Either way, a checkpoint writes a state file (`pg_twophase/<xid in hex>`, written to a
//!   temporary name, fsynced, renamed, directory fsynced) for every prepared transaction whose
//!   prepare record lies before its redo point, so that the WAL holding the record can be
//!   recycled; from then on `reread_wal` reads the file, as PostgreSQL does.
//!
//! ## Rules
//! - The prepare record and the registration of the `GlobalTxn` are one section under
//!   [`Wal::delay_checkpoint`], so a checkpoint whose redo point follows the record always
//!   finds the transaction and writes its state file.
//! - A state file of a transaction the commit log says has finished is stale (a crash between
//!   the finishing record and the file's removal) and is removed at startup.
//! - A transaction is finished by one caller at a time (`busy`); others get SQLSTATE 55000.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::lock::{LockMode, LockTag};
use super::{put_rels, read_rels};
use crate::bytes::Reader;
use crate::config::TwophaseStateMode;
use crate::error::{Error, Result};

use crate::types::{Lsn, MAX_RECORD_SIZE, RelFileLocator, Xid};
use crate::vfs::{OpenMode, Vfs};
use crate::wal::{DecodedRecord, Wal};

/// PostgreSQL's limit on a global transaction id (`GIDSIZE` is 200 bytes).
pub const MAX_GID_BYTES: usize = 200;
/// The largest prepared state: it must fit in one WAL record.
pub const MAX_STATE_BYTES: usize = MAX_RECORD_SIZE - crate::types::PREPARE_RECORD_OVERHEAD_BYTES;
const STATE_FILE_MAGIC: u32 = 0x5154_5350; // "PSTQ"
const STATE_FILE_HEADER_BYTES: usize = 12;

/// What a prepare record (and a state file) holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedState {
    pub xid: Xid,
    /// Its live subtransaction ids: COMMIT/ROLLBACK PREPARED ends them with it, and startup
    /// puts them in the subtransaction map again.
    pub subxids: Vec<Xid>,
    pub gid: String,
    /// Microseconds since 1970.
    pub prepared_at_micros: u64,
    pub locks: Vec<(LockTag, LockMode)>,
    pub commit_drops: Vec<RelFileLocator>,
    pub abort_drops: Vec<RelFileLocator>,
}

impl PreparedState {
    /// Whether finishing this transaction may change a definition others see. The state
    /// does not record it, but every DDL creates or drops a relation file or holds ACCESS
    /// EXCLUSIVE on what it changes, and an ordinary write does neither.
    pub fn may_change_definitions(&self) -> bool {
        !self.commit_drops.is_empty()
            || !self.abort_drops.is_empty()
            || self
                .locks
                .iter()
                .any(|(_, mode)| *mode == LockMode::AccessExclusive)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.locks.len() * 16);
        out.extend_from_slice(&self.xid.0.to_le_bytes());
        out.extend_from_slice(&self.prepared_at_micros.to_le_bytes());
        out.extend_from_slice(&(self.gid.len() as u16).to_le_bytes());
        out.extend_from_slice(self.gid.as_bytes());
        out.extend_from_slice(&(self.locks.len() as u32).to_le_bytes());
        for (tag, mode) in &self.locks {
            tag.encode(&mut out);
            out.push(mode.to_u8());
        }
        put_rels(&self.commit_drops, &mut out);
        put_rels(&self.abort_drops, &mut out);
        out.extend_from_slice(&(self.subxids.len() as u32).to_le_bytes());
        for x in &self.subxids {
            out.extend_from_slice(&x.0.to_le_bytes());
        }
        out
    }

    /// Decodes [`encode`](Self::encode); `None` on anything malformed (never panics).
    pub fn decode(b: &[u8]) -> Option<PreparedState> {
        let mut r = Reader::new(b);
        let xid = Xid(r.u64()?);
        let prepared_at_micros = r.u64()?;
        let gid = std::str::from_utf8(r.bytes_u16()?).ok()?.to_string();
        let nlocks = r.u32()? as usize;
        // Bounded by the input: each lock takes at least one byte.
        if nlocks > r.remaining() {
            return None;
        }
        let mut locks = Vec::with_capacity(nlocks);
        for _ in 0..nlocks {
            let (tag, _) = LockTag::decode(r.take(LockTag::ENCODED_LEN)?)?;
            let mode = LockMode::from_u8(r.u8()?)?;
            locks.push((tag, mode));
        }
        let commit_drops = read_rels(&mut r)?;
        let abort_drops = read_rels(&mut r)?;
        let n = r.u32()? as usize;
        // Bounded by the input.
        if n > r.remaining() / 8 {
            return None;
        }
        let subxids = (0..n).map(|_| r.u64().map(Xid)).collect::<Option<Vec<_>>>()?;
        r.done()?;
        Some(PreparedState {
            xid,
            subxids,
            gid,
            prepared_at_micros,
            locks,
            commit_drops,
            abort_drops,
        })
    }
}

/// The contents of a state file: `magic u32 | length u32 | crc32c(state) u32 | state`.
fn encode_state_file(state: &PreparedState) -> Vec<u8> {
    let body = state.encode();
    let mut bytes = Vec::with_capacity(STATE_FILE_HEADER_BYTES + body.len());
    bytes.extend_from_slice(&STATE_FILE_MAGIC.to_le_bytes());
    bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    bytes.extend_from_slice(&body);
    bytes
}

/// Decodes [`encode_state_file`]; `Err` says what is wrong.
fn decode_state_file(bytes: &[u8]) -> std::result::Result<PreparedState, &'static str> {
    let mut r = Reader::new(bytes);
    let (Some(magic), Some(len), Some(crc)) = (r.u32(), r.u32(), r.u32()) else {
        return Err("short file");
    };
    if magic != STATE_FILE_MAGIC {
        return Err("bad magic number");
    }
    let body = r.rest();
    if len as usize != body.len() {
        return Err("length mismatch");
    }
    if crc != crc32c::crc32c(body) {
        return Err("checksum mismatch");
    }
    PreparedState::decode(body).ok_or("malformed state")
}

/// A prepared transaction, as listed (PostgreSQL's `pg_prepared_xacts`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedXact {
    pub gid: String,
    pub xid: Xid,
    pub prepared_at_micros: u64,
}

/// A prepared transaction in memory.
struct GlobalTxn {
    xid: Xid,
    prepared_at_micros: u64,
    /// Where its prepare record lies.
    prepare_lsn: Lsn,
    prepare_end: Lsn,
    /// The decoded state (`twophase_state = memory`, or always while recovering).
    state: Option<Arc<PreparedState>>,
    /// A state file exists.
    on_disk: bool,
    /// Someone is finishing it.
    busy: bool,
}

/// Counters of the prepared-transaction machinery (seed 003's figures).
#[derive(Debug, Default)]
pub struct TwoPhaseStats {
    pub prepared: AtomicU64,
    pub finished: AtomicU64,
    /// States re-read from WAL at COMMIT/ROLLBACK PREPARED.
    pub state_reads_from_wal: AtomicU64,
    /// States read from state files.
    pub state_reads_from_files: AtomicU64,
    pub state_files_written: AtomicU64,
}

/// A transaction being finished: what the finisher needs.
pub struct Finishing {
    pub gid: String,
    pub xid: Xid,
    pub state: Arc<PreparedState>,
}

/// The prepared transactions of a data directory.
pub struct TwoPhase {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    /// `twophase_state = reread_wal`; a switch a benchmark may flip while running.
    reread_wal: AtomicBool,
    max_prepared: usize,
    gxacts: Mutex<HashMap<String, GlobalTxn>>,
    stats: TwoPhaseStats,
}

impl TwoPhase {
    pub fn dir_of(data_dir: &Path) -> PathBuf {
        data_dir.join("pg_twophase")
    }

    pub fn new(
        vfs: Arc<dyn Vfs>,
        data_dir: &Path,
        mode: TwophaseStateMode,
        max_prepared: usize,
    ) -> Self {
        TwoPhase {
            vfs,
            dir: Self::dir_of(data_dir),
            reread_wal: AtomicBool::new(mode == TwophaseStateMode::RereadWal),
            max_prepared,
            gxacts: Mutex::new(HashMap::new()),
            stats: TwoPhaseStats::default(),
        }
    }

    pub fn stats(&self) -> &TwoPhaseStats {
        &self.stats
    }

    /// Switches `twophase_state` for transactions prepared from now on.
    pub fn set_mode(&self, mode: TwophaseStateMode) {
        self.reread_wal
            .store(mode == TwophaseStateMode::RereadWal, Ordering::Relaxed);
    }

    fn keeps_state(&self) -> bool {
        !self.reread_wal.load(Ordering::Relaxed)
    }

    /// Checks that `gid` can be prepared now and reserves it (busy, not yet listed as
    /// prepared). Undo with [`TwoPhase::unreserve`] if the prepare fails before its record.
    pub fn reserve(&self, gid: &str) -> Result<()> {
        if self.max_prepared == 0 {
            return Err(Error::NotInPrerequisiteState {
                what: "prepared transactions are disabled (hint: set max_prepared_transactions to a nonzero value)".into(),
            });
        }
        if gid.len() > MAX_GID_BYTES {
            return Err(Error::InvalidParameter {
                what: format!("transaction identifier \"{gid}\" is too long"),
            });
        }
        let mut g = self.gxacts.lock();
        if g.contains_key(gid) {
            return Err(Error::DuplicateGid { gid: gid.into() });
        }
        if g.len() >= self.max_prepared {
            return Err(Error::OutOfSharedMemory {
                what: "maximum number of prepared transactions reached".into(),
                hint: format!(
                    "Increase max_prepared_transactions (currently {}).",
                    self.max_prepared
                ),
            });
        }
        g.insert(
            gid.to_string(),
            GlobalTxn {
                xid: Xid::INVALID,
                prepared_at_micros: 0,
                prepare_lsn: Lsn::INVALID,
                prepare_end: Lsn::INVALID,
                state: None,
                on_disk: false,
                busy: true,
            },
        );
        Ok(())
    }

    /// Gives back a reservation whose prepare failed.
    pub fn unreserve(&self, gid: &str) {
        let mut g = self.gxacts.lock();
        if g.get(gid).is_some_and(|t| !t.xid.is_valid()) {
            g.remove(gid);
        }
    }

    /// The prepare record of a reserved `gid` is in the WAL at `[lsn, end)`: it is prepared
    /// (listed, and written out by checkpoints) but stays busy until [`TwoPhase::ready`], once
    /// its locks and running id have been handed over. Called in the same checkpoint-delaying
    /// section as the record's insertion.
    pub fn prepared(&self, state: PreparedState, lsn: Lsn, end: Lsn) {
        let mut g = self.gxacts.lock();
        let t = g
            .get_mut(&state.gid)
            .expect("a gid is reserved before its prepare record is written");
        t.xid = state.xid;
        t.prepared_at_micros = state.prepared_at_micros;
        t.prepare_lsn = lsn;
        t.prepare_end = end;
        t.state = self.keeps_state().then(|| Arc::new(state));
        self.stats.prepared.fetch_add(1, Ordering::Relaxed);
    }

    /// The preparing session has handed over: COMMIT/ROLLBACK PREPARED may now finish `gid`.
    pub fn ready(&self, gid: &str) {
        if let Some(t) = self.gxacts.lock().get_mut(gid) {
            t.busy = false;
        }
    }

    /// The prepared transactions, sorted by gid.
    pub fn list(&self) -> Vec<PreparedXact> {
        let g = self.gxacts.lock();
        let mut v: Vec<PreparedXact> = g
            .iter()
            .filter(|(_, t)| t.xid.is_valid())
            .map(|(gid, t)| PreparedXact {
                gid: gid.clone(),
                xid: t.xid,
                prepared_at_micros: t.prepared_at_micros,
            })
            .collect();
        v.sort_by(|a, b| a.gid.cmp(&b.gid));
        v
    }

    /// Starts finishing `gid`: marks it busy and gets its state (from memory, a state file,
    /// or the WAL, by the rules of the module header). Undo with
    /// [`TwoPhase::finish_failed`], complete with [`TwoPhase::finished`].
    pub fn begin_finish(&self, gid: &str, wal: &Wal) -> Result<Finishing> {
        let (xid, state, on_disk, lsn) = {
            let mut g = self.gxacts.lock();
            let t = g
                .get_mut(gid)
                .filter(|t| t.xid.is_valid())
                .ok_or_else(|| Error::NoSuchPreparedTransaction { gid: gid.into() })?;
            if t.busy {
                return Err(Error::NotInPrerequisiteState {
                    what: format!("prepared transaction with identifier \"{gid}\" is busy"),
                });
            }
            t.busy = true;
            (t.xid, t.state.clone(), t.on_disk, t.prepare_lsn)
        };
        let state = match state {
            Some(s) => Ok(s),
            None if on_disk => self.read_state_file(xid).map(Arc::new),
            None => self.read_state_from_wal(wal, lsn).map(Arc::new),
        };
        let state = state.and_then(|s| {
            if s.xid == xid && s.gid == gid {
                Ok(s)
            } else {
                Err(Error::WalCorrupt {
                    lsn,
                    reason: format!(
                        "the prepare record holds transaction {} \"{}\", expected {xid} \"{gid}\"",
                        s.xid, s.gid
                    ),
                })
            }
        });
        match state {
            Ok(state) => Ok(Finishing {
                gid: gid.to_string(),
                xid,
                state,
            }),
            Err(e) => {
                self.finish_failed(gid);
                Err(e)
            }
        }
    }

    /// A finish that failed before its record: the transaction stays prepared.
    pub fn finish_failed(&self, gid: &str) {
        if let Some(t) = self.gxacts.lock().get_mut(gid) {
            t.busy = false;
        }
    }

    /// The finishing record of `gid` is written: forget it and remove its state file.
    pub fn finished(&self, gid: &str) -> Result<()> {
        let removed = self.gxacts.lock().remove(gid);
        self.stats.finished.fetch_add(1, Ordering::Relaxed);
        match removed {
            Some(t) if t.on_disk => self.remove_state_file(t.xid),
            _ => Ok(()),
        }
    }

    fn read_state_from_wal(&self, wal: &Wal, lsn: Lsn) -> Result<PreparedState> {
        self.stats
            .state_reads_from_wal
            .fetch_add(1, Ordering::Relaxed);
        let rec = wal.read_record_from_file(lsn)?;
        PreparedState::decode(&rec.main).ok_or_else(|| Error::WalCorrupt {
            lsn,
            reason: "malformed prepare record".into(),
        })
    }

    fn state_path(&self, xid: Xid) -> PathBuf {
        self.dir.join(format!("{:016X}", xid.0))
    }

    fn read_state_file(&self, xid: Xid) -> Result<PreparedState> {
        self.stats
            .state_reads_from_files
            .fetch_add(1, Ordering::Relaxed);
        let path = self.state_path(xid);
        let bad = |reason: &str| Error::TwoPhaseStateFile {
            path: path.clone(),
            reason: reason.into(),
        };
        let f = self
            .vfs
            .open(&path, OpenMode::Existing)
            .map_err(|e| Error::file("open two-phase state file", &path, e))?;
        let len = f
            .size()
            .map_err(|e| Error::file("size two-phase state file", &path, e))?;
        if len > (MAX_STATE_BYTES + STATE_FILE_HEADER_BYTES) as u64 {
            return Err(bad("too large"));
        }
        let mut bytes = vec![0u8; len as usize];
        let n = f
            .read_at(&mut bytes, 0)
            .map_err(|e| Error::file("read two-phase state file", &path, e))?;
        if n != bytes.len() {
            return Err(bad("short file"));
        }
        let state = decode_state_file(&bytes).map_err(bad)?;
        if state.xid != xid {
            return Err(bad("holds another transaction"));
        }
        Ok(state)
    }

    fn write_state_file(&self, state: &PreparedState) -> Result<()> {
        let bytes = encode_state_file(state);
        let path = self.state_path(state.xid);
        let tmp = path.with_extension("tmp");
        crate::vfs::create_dir_durable(&*self.vfs, &self.dir)
            .map_err(|e| Error::file("create directory", &self.dir, e))?;
        let f = self
            .vfs
            .open(&tmp, OpenMode::CreateIfMissing)
            .map_err(|e| Error::file("create two-phase state file", &tmp, e))?;
        let written = f
            .set_len(0)
            .and_then(|()| f.write_at(&bytes, 0))
            .and_then(|()| f.sync_all());
        written.map_err(|e| Error::file("write and fsync two-phase state file", &tmp, e))?;
        drop(f);
        self.vfs
            .rename(&tmp, &path)
            .map_err(|e| Error::file("rename two-phase state file", &path, e))?;
        self.vfs
            .sync_dir(&self.dir)
            .map_err(|e| Error::file("fsync directory", &self.dir, e))?;
        self.stats
            .state_files_written
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn remove_state_file(&self, xid: Xid) -> Result<()> {
        let path = self.state_path(xid);
        match self.vfs.remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::file("remove two-phase state file", path, e)),
        }
    }

    /// At a checkpoint with redo point `redo`: writes the state file of every prepared
    /// transaction whose prepare record lies before it (its WAL may be recycled after this
    /// checkpoint). Errors fail the checkpoint.
    pub fn checkpoint(&self, redo: Lsn, wal: &Wal) -> Result<usize> {
        let due: Vec<(String, Xid, Lsn, Option<Arc<PreparedState>>)> = self
            .gxacts
            .lock()
            .iter()
            .filter(|(_, t)| t.xid.is_valid() && !t.on_disk && t.prepare_end <= redo)
            .map(|(gid, t)| (gid.clone(), t.xid, t.prepare_lsn, t.state.clone()))
            .collect();
        let mut written = 0;
        for (gid, xid, lsn, state) in due {
            let state = match state {
                Some(s) => s,
                None => Arc::new(self.read_state_from_wal(wal, lsn)?),
            };
            self.write_state_file(&state)?;
            written += 1;
            let mut g = self.gxacts.lock();
            match g.get_mut(&gid) {
                Some(t) if t.xid == xid => t.on_disk = true,
                // Finished meanwhile: its file must not outlive it.
                _ => {
                    drop(g);
                    self.remove_state_file(xid)?;
                }
            }
        }
        Ok(written)
    }

    /// At startup, after redo: the prepared transactions that redo found (`from_wal`) and
    /// those whose state files hold them, minus those the commit log says finished (their
    /// files are stale and removed). `finished(xid)` asks the commit log. Registers them and
    /// returns their states, for the caller to restore their running ids and locks.
    pub fn recover(
        &self,
        from_wal: Vec<(PreparedState, Lsn, Lsn)>,
        finished: impl Fn(Xid) -> Result<bool>,
    ) -> Result<Vec<Arc<PreparedState>>> {
        let mut found: HashMap<Xid, (PreparedState, Lsn, Lsn, bool)> = from_wal
            .into_iter()
            .map(|(s, lsn, end)| (s.xid, (s, lsn, end, false)))
            .collect();
        let names = match self.vfs.list_dir(&self.dir) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(Error::file("list", &self.dir, e)),
        };
        for name in names {
            let Some(name) = name.to_str() else { continue };
            if Path::new(name).extension().is_some() {
                // A temporary file of a checkpoint that did not finish.
                self.vfs
                    .remove_file(&self.dir.join(name))
                    .map_err(|e| Error::file("remove", self.dir.join(name), e))?;
                continue;
            }
            let Ok(xid) = u64::from_str_radix(name, 16).map(Xid) else {
                continue;
            };
            if let Some(entry) = found.get_mut(&xid) {
                entry.3 = true;
                continue;
            }
            if finished(xid)? {
                tracing::info!(xid = %xid, "removing stale two-phase state file");
                self.remove_state_file(xid)?;
                continue;
            }
            let state = self.read_state_file(xid)?;
            // Not in the WAL redo read: the state file is all there is.
            found.insert(xid, (state, Lsn::INVALID, Lsn::INVALID, true));
        }
        let mut out = Vec::new();
        let mut g = self.gxacts.lock();
        for (xid, (state, lsn, end, on_disk)) in found {
            if finished(xid)? {
                continue;
            }
            let state = Arc::new(state);
            g.insert(
                state.gid.clone(),
                GlobalTxn {
                    xid,
                    prepared_at_micros: state.prepared_at_micros,
                    prepare_lsn: lsn,
                    prepare_end: end,
                    state: (self.keeps_state() || lsn == Lsn::INVALID).then(|| Arc::clone(&state)),
                    on_disk,
                    busy: false,
                },
            );
            out.push(state);
        }
        Ok(out)
    }
}

/// Redo's view of prepared transactions: prepared by a record redo saw, not yet finished.
pub struct TwoPhaseRedo {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    pending: Mutex<HashMap<Xid, (PreparedState, Lsn, Lsn)>>,
}

impl TwoPhaseRedo {
    pub fn new(vfs: Arc<dyn Vfs>, data_dir: &Path) -> Self {
        TwoPhaseRedo {
            vfs,
            dir: TwoPhase::dir_of(data_dir),
            pending: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn redo_prepare(&self, rec: &DecodedRecord) -> Result<()> {
        let state = PreparedState::decode(&rec.main)
            .filter(|s| s.xid == rec.xid)
            .ok_or_else(|| Error::WalCorrupt {
                lsn: rec.lsn,
                reason: "malformed prepare record".into(),
            })?;
        self.pending
            .lock()
            .insert(rec.xid, (state, rec.lsn, rec.end_lsn));
        Ok(())
    }

    pub(super) fn redo_finish(&self, xid: Xid) -> Result<()> {
        self.pending.lock().remove(&xid);
        let path = self.dir.join(format!("{:016X}", xid.0));
        match self.vfs.remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::file("remove two-phase state file", path, e)),
        }
    }

    /// What redo found still prepared at the end of the WAL.
    pub fn take(&self) -> Vec<(PreparedState, Lsn, Lsn)> {
        self.pending.lock().drain().map(|(_, v)| v).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Oid;

    fn state() -> PreparedState {
        PreparedState {
            subxids: vec![Xid(78), Xid(80)],
            xid: Xid(77),
            gid: "xa:1".into(),
            prepared_at_micros: 5,
            locks: vec![
                (
                    LockTag::Relation {
                        db_oid: 1,
                        rel_oid: Oid(16384),
                    },
                    LockMode::RowExclusive,
                ),
                (LockTag::Transaction { xid: Xid(77) }, LockMode::Exclusive),
            ],
            commit_drops: vec![RelFileLocator::new(1, 16390)],
            abort_drops: vec![RelFileLocator::new(1, 16391)],
        }
    }

    #[test]
    fn prepared_state_round_trips_and_every_truncation_is_refused() {
        let s = state();
        let b = s.encode();
        assert_eq!(PreparedState::decode(&b), Some(s));
        for cut in 0..b.len() {
            assert!(PreparedState::decode(&b[..cut]).is_none(), "cut at {cut}");
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(PreparedState::decode(&longer).is_none());
    }

    #[test]
    fn state_file_bytes_match_the_documented_layout() {
        let s = PreparedState {
            subxids: vec![Xid(0x7172_7374_7576_7778)],
            xid: Xid(0x0102_0304_0506_0708),
            gid: "xa".into(),
            prepared_at_micros: 0x1112_1314_1516_1718,
            locks: vec![
                (
                    LockTag::Relation {
                        db_oid: 0x2122_2324,
                        rel_oid: Oid(0x3132_3334_3536_3738),
                    },
                    LockMode::RowExclusive,
                ),
                (
                    LockTag::Transaction {
                        xid: Xid(0x4142_4344_4546_4748),
                    },
                    LockMode::Exclusive,
                ),
            ],
            commit_drops: vec![RelFileLocator::new(0x5152_5354, 0x6162_6364_6566_6768)],
            abort_drops: Vec::new(),
        };
        #[rustfmt::skip]
        let state: Vec<u8> = vec![
            0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, // xid
            0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, // prepared_at
            2, 0, b'x', b'a', // gid_len, gid
            2, 0, 0, 0, // nlocks
            1, 0x24, 0x23, 0x22, 0x21, // relation tag: kind, db_oid,
            0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31, // rel_oid,
            3, // mode RowExclusiveLock
            2, 0x48, 0x47, 0x46, 0x45, 0x44, 0x43, 0x42, 0x41, // transaction tag: kind, xid,
            0, 0, 0, 0, // zero
            7, // mode ExclusiveLock
            1, 0, 0, 0, // commit drops: n,
            0x54, 0x53, 0x52, 0x51, 0x68, 0x67, 0x66, 0x65, 0x64, 0x63, 0x62, 0x61, // db_oid, rel_number
            0, 0, 0, 0, // abort drops: n
            1, 0, 0, 0, // subxids: n,
            0x78, 0x77, 0x76, 0x75, 0x74, 0x73, 0x72, 0x71, // subxid
        ];
        assert_eq!(s.encode(), state);
        let mut file = b"PSTQ".to_vec(); // magic 0x51545350
        file.extend_from_slice(&[84, 0, 0, 0]); // length
        file.extend_from_slice(&crc32c::crc32c(&state).to_le_bytes());
        file.extend_from_slice(&state);
        assert_eq!(encode_state_file(&s), file);
        assert_eq!(decode_state_file(&file), Ok(s));
    }

    #[test]
    fn damaged_state_files_are_refused_naming_the_damage() {
        let good = encode_state_file(&state());
        let with = |at: usize, byte: u8| {
            let mut b = good.clone();
            b[at] ^= byte;
            decode_state_file(&b)
        };
        assert_eq!(with(0, 1), Err("bad magic number"));
        assert_eq!(with(4, 1), Err("length mismatch"));
        assert_eq!(with(8, 1), Err("checksum mismatch"));
        assert_eq!(with(good.len() - 1, 1), Err("checksum mismatch"));
        assert_eq!(decode_state_file(&good[..11]), Err("short file"));
        assert_eq!(
            decode_state_file(&good[..good.len() - 1]),
            Err("length mismatch")
        );
        // A state file whose body is sealed but is no prepared state.
        let mut bad_body = good[..12].to_vec();
        bad_body[4..8].copy_from_slice(&1u32.to_le_bytes());
        bad_body[8..12].copy_from_slice(&crc32c::crc32c(&[9]).to_le_bytes());
        bad_body.push(9);
        assert_eq!(decode_state_file(&bad_body), Err("malformed state"));
    }
}
