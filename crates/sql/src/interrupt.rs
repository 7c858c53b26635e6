//! Stopping a running statement from another thread: a client's cancel request (the server
//! receives it on another connection) or the session's `statement_timeout` (a watchdog
//! thread notices the deadline). The executor checks [`Interrupt::check`] for every row it
//! reads; a statement waiting for a lock is woken through the engine
//! ([`quire_engine::Database::cancel_lock_wait`]). Either way the statement fails with
//! SQLSTATE 57014 and, inside a block, aborts it, as in PostgreSQL.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use quire_engine::{Database, LockOwner};

use crate::error::{Result, SqlError};

const NONE: u8 = 0;
const CANCELED: u8 = 1;
const TIMED_OUT: u8 = 2;

/// The running statement of one session, as other threads see it.
#[derive(Default)]
pub struct Interrupt {
    reason: AtomicU8,
    /// While a statement runs: its engine session (for a lock wait) and its deadline.
    running: Mutex<Option<Running>>,
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
        self.reason.store(NONE, Ordering::Relaxed);
    }

    /// The statement ended: a cancel that comes now finds nothing to cancel.
    pub(crate) fn end(&self) {
        *self.running.lock() = None;
        self.reason.store(NONE, Ordering::Relaxed);
    }

    /// A client's cancel request: the running statement, if any, stops. Returns whether
    /// one was running.
    pub fn cancel(&self, db: &Database) -> bool {
        self.stop(db, CANCELED)
    }

    /// The watchdog's look: stops the running statement if its deadline has passed.
    pub fn check_deadline(&self, db: &Database, now: Instant) {
        let due = self
            .running
            .lock()
            .and_then(|r| r.deadline)
            .is_some_and(|d| now >= d);
        if due {
            self.stop(db, TIMED_OUT);
        }
    }

    fn stop(&self, db: &Database, reason: u8) -> bool {
        let running = self.running.lock();
        let Some(r) = *running else {
            return false;
        };
        self.reason.store(reason, Ordering::Relaxed);
        // Under the lock, so that the statement cannot end and another begin in between.
        db.cancel_lock_wait(r.owner);
        true
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
        SqlError::new(
            "57014",
            if reason == TIMED_OUT {
                "canceling statement due to statement timeout"
            } else {
                "canceling statement due to user request"
            },
        )
    }
}
