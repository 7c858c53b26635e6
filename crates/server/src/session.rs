//! A connection's [`Session`]. Each connection runs on an OS thread of its own, with a
//! single-threaded tokio runtime that speaks the protocol on its socket ([`crate::socket`]);
//! the handlers call the session directly on that thread. A statement that waits for a row
//! lock or for I/O blocks only its connection's thread, never a thread another connection
//! needs, and a message costs one wakeup (the socket's), as a PostgreSQL backend's does,
//! not three (runtime worker, session thread, runtime worker again).
//! When the handle is dropped (the connection ends), the session rolls back whatever
//! transaction is open.
//!
//! After each call the session says how long it may now wait for the next command
//! ([`quire_sql::IdleLimit`]); the handle arms its [`IdleTimer`] with that, and disarms it
//! when the next call starts. The connection's message loop ends the connection when the
//! timer expires.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use quire_engine::Database;
use quire_sql::{IdleLimit, Session};

/// A connection's session.
pub(crate) struct SessionHandle {
    /// Locked only by the connection's own thread, one call at a time: uncontended.
    session: Mutex<Session>,
    id: u64,
    idle: Arc<IdleTimer>,
    /// After the last call: an implicit transaction of the extended protocol is open, and
    /// the next Sync must commit it.
    awaits_sync: AtomicBool,
}

/// When the connection, waiting for its client's next command, must end. Armed and
/// disarmed only by [`SessionHandle::call`], on the connection's own thread, between two
/// waits of its message loop: what is armed when a wait begins holds for the whole wait, so
/// the wait needs no wakeup when it changes.
#[derive(Default)]
pub(crate) struct IdleTimer {
    armed: Mutex<Option<(Instant, IdleLimit)>>,
    /// Whether `armed` holds a limit: disarming or waiting on a timer that is not armed
    /// (every call and every wait of a session without idle limits, the default) then
    /// takes no lock. Written and read by the connection's own thread only.
    is_armed: AtomicBool,
}

impl IdleTimer {
    fn set(&self, armed: Option<(Instant, IdleLimit)>) {
        if armed.is_none() && !self.is_armed.load(Ordering::Relaxed) {
            return;
        }
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner) = armed;
        self.is_armed.store(armed.is_some(), Ordering::Relaxed);
    }

    fn get(&self) -> Option<(Instant, IdleLimit)> {
        if !self.is_armed.load(Ordering::Relaxed) {
            return None;
        }
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Completes when the timer, armed as it is now, expires; never if it is disarmed.
    pub(crate) async fn expired(&self) -> IdleLimit {
        match self.get() {
            None => std::future::pending().await,
            Some((at, limit)) => {
                tokio::time::sleep_until(at.into()).await;
                limit
            }
        }
    }
}

impl SessionHandle {
    /// The session of connection `id`, in a server with `settings` (see [`Session::set_server_settings`]).
    pub(crate) fn new(
        db: Arc<Database>,
        id: u64,
        settings: Arc<[(&'static str, String)]>,
    ) -> SessionHandle {
        let mut session = Session::new(db);
        session.set_server_settings(settings);
        SessionHandle {
            session: Mutex::new(session),
            id,
            idle: Arc::default(),
            awaits_sync: AtomicBool::new(false),
        }
    }

    /// Whether the session's last call left an implicit transaction for Sync to commit.
    pub(crate) fn awaits_sync(&self) -> bool {
        self.awaits_sync.load(Ordering::Acquire)
    }

    /// The timer the connection's message loop waits on between commands.
    pub(crate) fn idle_timer(&self) -> Arc<IdleTimer> {
        Arc::clone(&self.idle)
    }

    /// Runs `f` on the session (on the connection's own thread, which it may block).
    pub(crate) fn call<R>(&self, f: impl FnOnce(&mut Session) -> R) -> R {
        self.idle.set(None);
        let mut session = self.session.lock().unwrap_or_else(PoisonError::into_inner);
        let r = f(&mut session);
        self.awaits_sync
            .store(session.awaits_sync(), Ordering::Release);
        let limit = session.idle_limit();
        drop(session);
        self.idle.set(limit.map(|l| (Instant::now() + l.after, l)));
        r
    }
}

impl Drop for SessionHandle {
    fn drop(&mut self) {
        let session = self
            .session
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = session.close() {
            tracing::warn!(session = self.id, error = %e, "rolling back at disconnect failed");
        }
        tracing::debug!(session = self.id, "session ends");
    }
}
