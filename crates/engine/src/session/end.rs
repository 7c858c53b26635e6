//! The end of a transaction: COMMIT, ROLLBACK and PREPARE TRANSACTION, the statistics a
//! transaction publishes when it ends, and the locks it releases.

use super::Transaction;
use crate::error::{Error, Result};
use crate::txn::lock::LockOwner;
use crate::txn::twophase::{PreparedState, MAX_STATE_BYTES};
use crate::txn::{now_micros, TxnRecord};
use crate::wal::WalRecord;

impl Transaction {
    /// COMMIT. A failed transaction is rolled back instead, and the error says so.
    pub fn commit(self) -> Result<()> {
        if let Err(stopped) = self.engine.check_health() {
            // Nothing more reaches the WAL; the rollback only releases what this process
            // holds (recovery aborts the transaction), so its error says nothing new.
            if let Err(e) = self.finish(false) {
                tracing::debug!(error = %e, "rolling back in a failed engine");
            }
            return Err(stopped);
        }
        if self.st.borrow().failed {
            self.finish(false)?;
            return Err(Error::InFailedTransaction);
        }
        let result = self.finish(true);
        if let Err(e) = &result {
            self.engine.note_failure(e);
        }
        result
    }

    /// ROLLBACK.
    pub fn rollback(self) -> Result<()> {
        self.finish(false)
    }

    pub(super) fn finish(&self, commit: bool) -> Result<()> {
        let (xid, drops, changes) = {
            let mut st = self.st.borrow_mut();
            if st.finished {
                return Ok(());
            }
            st.finished = true;
            let drops = if commit {
                std::mem::take(&mut st.drop_at_commit)
            } else {
                std::mem::take(&mut st.drop_at_abort)
            };
            (st.xid, drops, std::mem::take(&mut st.changes))
        };
        let subxids = self.st.borrow().own.subxids().to_vec();
        let definitions_changed = self.st.borrow().definitions_changed;
        let result = if !xid.is_valid() {
            Ok(())
        } else if commit {
            self.engine.txns.commit(self.proc, xid, &subxids, &drops).map(|_| ())
        } else {
            self.engine.txns.abort(self.proc, xid, &subxids, &drops).map(|_| ())
        };
        if definitions_changed {
            // Before the locks go: whoever takes them next must see the new generation.
            self.engine.catalog.invalidate();
        }
        self.engine.locks.release_all(self.owner());
        if self.owner().backend_pid().is_none() {
            // Nobody keeps session-level locks past a transaction without a session.
            self.engine.locks.release_session_all(self.owner());
        }
        self.engine.txns.procs().unregister(self.proc);
        self.engine
            .table_stats
            .report(&changes, commit && result.is_ok());
        result
    }

    /// PREPARE TRANSACTION `gid`: the transaction's fate is decided later, by
    /// [`Database::commit_prepared`](crate::Database::commit_prepared) or
    /// [`Database::rollback_prepared`](crate::Database::rollback_prepared), from any session,
    /// after any crash; until then it keeps its locks.
    pub fn prepare(self, gid: &str) -> Result<()> {
        if let Err(stopped) = self.engine.check_health() {
            if let Err(e) = self.finish(false) {
                tracing::debug!(error = %e, "rolling back in a failed engine");
            }
            return Err(stopped);
        }
        if self.st.borrow().failed {
            self.finish(false)?;
            return Err(Error::InFailedTransaction);
        }
        let e = &self.engine;
        if let Err(err) = e.twophase.reserve(gid) {
            self.finish(false)?;
            return Err(err);
        }
        if e.locks.held_at_both_levels(self.owner()).is_some() {
            e.twophase.unreserve(gid);
            self.finish(false)?;
            return Err(Error::FeatureNotSupported {
                what: "cannot PREPARE while holding both session-level and transaction-level locks on the same object".into(),
            });
        }
        let result = self.write_prepare(gid);
        if result.is_err() {
            e.twophase.unreserve(gid);
            self.finish(false)?;
            return result;
        }
        self.st.borrow_mut().finished = true;
        Ok(())
    }

    fn write_prepare(&self, gid: &str) -> Result<()> {
        let e = &self.engine;
        let xid = self.ensure_top_xid()?;
        let state = {
            let st = self.st.borrow();
            PreparedState {
                xid,
                subxids: st.own.subxids().to_vec(),
                gid: gid.to_string(),
                prepared_at_micros: now_micros(),
                locks: e.locks.locks_of(self.owner()),
                commit_drops: st.drop_at_commit.clone(),
                abort_drops: st.drop_at_abort.clone(),
            }
        };
        let main = state.encode();
        if main.len() > MAX_STATE_BYTES {
            return Err(Error::ProgramLimitExceeded {
                what: format!(
                    "the transaction holds too many locks and files to prepare ({} bytes of state, at most {MAX_STATE_BYTES})",
                    main.len()
                ),
            });
        }
        {
            let _delay = e.wal.delay_checkpoint();
            let (start, end) =
                e.wal
                    .insert(&WalRecord::new(xid, TxnRecord::Prepare, &[], &main))?;
            // Durable before PREPARE returns, in a commit's group (its flush gathers the
            // other committers as a commit's does, and `commit_delay` applies, as
            // PostgreSQL's XLogFlush applies it to every flush).
            let other_active = || e.txns.procs().with_xid().saturating_sub(1);
            e.wal.flush_commit(end, &other_active)?;
            e.twophase.prepared(state, start, end);
        }
        e.txns.procs().prepare(self.proc, xid);
        e.locks.transfer_all(self.owner(), LockOwner::prepared(xid));
        e.txns.procs().unregister(self.proc);
        e.twophase.ready(gid);
        // Counted as committed: most prepared transactions are (an estimate either way).
        let changes = std::mem::take(&mut self.st.borrow_mut().changes);
        e.table_stats.report(&changes, true);
        Ok(())
    }
}
