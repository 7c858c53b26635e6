//! # health — the engine's failed state (PostgreSQL's PANIC)
//!
//! After a failed fsync the data it covered may be gone while a retried fsync reports success
//! (the lesson of 2018's "fsyncgate"), and after a failed write of a page that a commit may
//! depend on nothing written later can be trusted. PostgreSQL PANICs there: every backend
//! stops and the postmaster restarts the server, which recovers from the WAL. [`Health`] is
//! that state for quire, one per data directory (the storage manager holds it, since every
//! data write passes through it).
//!
//! ## Rules
//! - Every fsync failure, of any file or directory, by any thread, calls [`Health::fail`];
//!   nobody retries an fsync or returns its error to one caller and goes on.
//! - Once failed, the state never clears in this process: no data page is written (the
//!   storage manager refuses every write, extension, truncation, creation and removal), no
//!   checkpoint runs, no new work is accepted; every refused call gets one error,
//!   [`Error::EngineFailed`] (SQLSTATE 58030), naming the first failure. The way on is a
//!   restart: recovery replays the WAL from the last completed checkpoint.
//! - The first failure is the one kept and reported; later ones are only logged.
//! - Hooks ([`Health::on_fail`]) run once, on the thread that failed, holding no lock of
//!   this module: they stop other parts (the WAL) and must not block.

use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::error::{Error, Result};

/// What [`Health::state`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthState {
    /// Accepting work.
    Running,
    /// Stopped by an I/O failure; only a restart goes on.
    Failed { reason: String },
}

type Hook = Arc<dyn Fn(&str) + Send + Sync>;

/// The failed state of one engine.
#[derive(Default)]
pub struct Health {
    reason: OnceLock<String>,
    hooks: Mutex<Vec<Hook>>,
}

impl Health {
    pub fn new() -> Self {
        Self::default()
    }

    /// Enters the failed state because of `cause` and gives `cause` back, for the caller to
    /// return: `return Err(health.fail(e))`.
    pub fn fail(&self, cause: Error) -> Error {
        self.fail_because(&cause.to_string());
        cause
    }

    /// Enters the failed state for `reason` (the first reason is kept).
    pub fn fail_because(&self, reason: &str) {
        let mut first = false;
        self.reason.get_or_init(|| {
            first = true;
            reason.to_string()
        });
        if !first {
            tracing::error!(reason, "another I/O failure after the engine stopped");
            return;
        }
        tracing::error!(
            reason,
            "I/O failure: the engine stops and must be restarted, which recovers from the WAL"
        );
        // Taken, not cloned: hooks run once, and none may be added after this (see on_fail).
        let hooks = std::mem::take(&mut *self.hooks.lock());
        for hook in hooks {
            hook(reason);
        }
    }

    /// Runs `hook` with the reason when the engine fails (at once if it already has).
    pub fn on_fail(&self, hook: impl Fn(&str) + Send + Sync + 'static) {
        let mut hooks = self.hooks.lock();
        // Checked under the lock that `fail_because` takes after setting the reason: a hook
        // is either run there or here, never missed.
        if let Some(reason) = self.reason.get() {
            drop(hooks);
            hook(reason);
            return;
        }
        hooks.push(Arc::new(hook));
    }

    /// `Ok` while running; the one error of the failed state otherwise.
    pub fn check(&self) -> Result<()> {
        match self.reason.get() {
            None => Ok(()),
            Some(reason) => Err(Error::EngineFailed {
                reason: reason.clone(),
            }),
        }
    }

    pub fn state(&self) -> HealthState {
        match self.reason.get() {
            None => HealthState::Running,
            Some(reason) => HealthState::Failed {
                reason: reason.clone(),
            },
        }
    }

    pub fn is_failed(&self) -> bool {
        self.reason.get().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn the_first_failure_is_kept_and_hooks_run_once() {
        let health = Health::new();
        assert!(health.check().is_ok());
        assert_eq!(health.state(), HealthState::Running);
        let runs = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&runs);
        health.on_fail(move |reason| {
            assert!(reason.contains("first"));
            r.fetch_add(1, Ordering::SeqCst);
        });
        let cause = Error::InvalidParameter {
            what: "first".into(),
        };
        let back = health.fail(cause);
        assert!(
            matches!(back, Error::InvalidParameter { .. }),
            "the cause comes back"
        );
        health.fail_because("second");
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        let err = health.check().unwrap_err();
        assert_eq!(err.sqlstate(), "58030");
        assert!(err.to_string().contains("first"), "{err}");
        assert!(!err.to_string().contains("second"), "{err}");
        // A hook added after the failure runs at once.
        let r = Arc::clone(&runs);
        health.on_fail(move |_| {
            r.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert!(matches!(health.state(), HealthState::Failed { reason } if reason == "first"));
    }
}
