//! Stopping a running statement from another thread: a client's cancel request (the server
//! receives it on another connection) or the session's `statement_timeout` (a watchdog
//! thread notices the deadline). The executor checks [`Interrupt::check`] for every row it
//! reads, and in every loop that can run long without reading one: each row of a series
//! or of VALUES, every few thousand comparisons of a sort or rows of a nested loop's inner
//! side, each row hashed, aggregated or made DISTINCT, each megabyte `repeat` builds, every
//! 64 KiB a LIKE or a regular expression goes through; a statement waiting for a lock is
//! woken through the engine
//! ([`quire_engine::Database::cancel_lock_wait`]). Either way the statement fails with
//! SQLSTATE 57014 and, inside a block, aborts it, as in PostgreSQL.
//!
//! The watchdog sleeps until the earliest deadline it knows of, not by a fixed period: a
//! statement that starts with a deadline tells it through the [`Alarm`] the server set
//! ([`Interrupt::set_alarm`]), so a server whose sessions have no `statement_timeout` (the
//! default) is never woken for them, as PostgreSQL arms a timer only when one is set.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use parking_lot::Mutex;
use quire_engine::{Database, LockOwner, SqlState};

use crate::error::{Result, SqlError};

const NONE: u8 = 0;
const CANCELED: u8 = 1;
const TIMED_OUT: u8 = 2;
/// The session must end (`pg_terminate_backend`, a fast shutdown): FATAL 57P01.
const TERMINATED: u8 = 3;

/// Who watches deadlines: told of each one as its statement starts.
pub trait Alarm: Send + Sync {
    /// A statement must be stopped at `deadline` unless it ends first.
    fn wake_by(&self, deadline: Instant);
}

/// The running statement of one session, as other threads see it.
#[derive(Default)]
pub struct Interrupt {
    reason: AtomicU8,
    /// While a statement runs: its engine session (for a lock wait) and its deadline.
    running: Mutex<Option<Running>>,
    /// Told of each statement's deadline. Without one (a session no server registered)
    /// nobody is: `statement_timeout` is the server's watchdog's to enforce.
    alarm: OnceLock<Arc<dyn Alarm>>,
}

#[derive(Clone, Copy)]
struct Running {
    owner: LockOwner,
    deadline: Option<Instant>,
}

impl Interrupt {
    /// A statement starts (its transaction's lock owner, its `statement_timeout` deadline).
    pub(crate) fn begin(&self, owner: LockOwner, deadline: Option<Instant>) {
        *self.running.lock() = Some(Running { owner, deadline });
        // A termination outlives the statement it stopped.
        let _ = self
            .reason
            .compare_exchange(CANCELED, NONE, Ordering::Relaxed, Ordering::Relaxed);
        let _ = self
            .reason
            .compare_exchange(TIMED_OUT, NONE, Ordering::Relaxed, Ordering::Relaxed);
        if let (Some(d), Some(alarm)) = (deadline, self.alarm.get()) {
            alarm.wake_by(d);
        }
    }

    /// Names who watches this session's deadlines (once; a second alarm is ignored).
    pub fn set_alarm(&self, alarm: Arc<dyn Alarm>) {
        let _ = self.alarm.set(alarm);
    }

    /// The statement ended: a cancel that comes now finds nothing to cancel.
    pub(crate) fn end(&self) {
        *self.running.lock() = None;
        if self.reason.load(Ordering::Relaxed) != TERMINATED {
            self.reason.store(NONE, Ordering::Relaxed);
        }
    }

    /// A client's cancel request: the running statement, if any, stops. Returns whether
    /// one was running.
    pub fn cancel(&self, db: &Database) -> bool {
        self.stop(db, CANCELED)
    }

    /// Ends the session's running statement, if any, with FATAL 57P01; the reason stays
    /// set until the session ends, so that a statement started meanwhile stops too.
    pub(crate) fn terminate(&self, db: &Database) {
        let running = self.running.lock();
        self.reason.store(TERMINATED, Ordering::Relaxed);
        if let Some(r) = *running {
            db.cancel_lock_wait(r.owner);
        }
    }

    /// The watchdog's look: stops the running statement if its deadline has passed.
    /// Returns the deadline still to come, if the running statement has one.
    pub fn check_deadline(&self, db: &Database, now: Instant) -> Option<Instant> {
        let running = self.running.lock();
        let r = (*running)?;
        let deadline = r.deadline?;
        if now < deadline {
            return Some(deadline);
        }
        // Under the lock, so that the statement cannot end and another begin in between.
        self.stop_running(db, r, TIMED_OUT);
        None
    }

    fn stop(&self, db: &Database, reason: u8) -> bool {
        let running = self.running.lock();
        let Some(r) = *running else {
            return false;
        };
        // Under the lock, as above.
        self.stop_running(db, r, reason);
        true
    }

    fn stop_running(&self, db: &Database, r: Running, reason: u8) {
        // A termination is never weakened to a cancel.
        let _ = self
            .reason
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
                (now != TERMINATED).then_some(reason)
            });
        db.cancel_lock_wait(r.owner);
    }

    /// Fails with 57014 once the running statement was stopped.
    pub(crate) fn check(&self) -> Result<()> {
        match self.reason.load(Ordering::Relaxed) {
            NONE => Ok(()),
            r => Err(Self::error(r)),
        }
    }

    /// The error a stopped statement reports (also for an engine lock wait it ended).
    pub(crate) fn reported(&self, e: SqlError) -> SqlError {
        match self.reason.load(Ordering::Relaxed) {
            NONE => e,
            r => Self::error(r),
        }
    }

    fn error(reason: u8) -> SqlError {
        match reason {
            TERMINATED => SqlError::new(
                SqlState::ADMIN_SHUTDOWN,
                "terminating connection due to administrator command",
            ),
            TIMED_OUT => SqlError::new(
                SqlState::QUERY_CANCELED,
                "canceling statement due to statement timeout",
            ),
            _ => SqlError::new(
                SqlState::QUERY_CANCELED,
                "canceling statement due to user request",
            ),
        }
    }
}
