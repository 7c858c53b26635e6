//! Cancel requests and statement timeouts. Every session registers its
//! [`Interrupt`] under the process id and secret key its client received at startup; a
//! CancelRequest (on a connection of its own) that names both stops that session's running
//! statement. A watchdog thread looks at every registered session each
//! [`WATCHDOG_PERIOD`] and stops statements past their `statement_timeout`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pgwire::messages::startup::SecretKey;
use quire_engine::Database;
use quire_sql::Interrupt;

/// How often the watchdog looks for statements past their timeout: the precision of
/// `statement_timeout`.
pub(crate) const WATCHDOG_PERIOD: Duration = Duration::from_millis(10);

/// The running sessions by process id.
#[derive(Default)]
pub(crate) struct Registry {
    sessions: Mutex<HashMap<i32, (SecretKey, Arc<Interrupt>)>>,
}

impl Registry {
    pub(crate) fn register(&self, pid: i32, key: SecretKey, interrupt: Arc<Interrupt>) {
        self.lock().insert(pid, (key, interrupt));
    }

    pub(crate) fn deregister(&self, pid: i32) {
        self.lock().remove(&pid);
    }

    /// A CancelRequest: stops the statement of session `pid` if `key` is its secret (by
    /// value: the request's connection may decode a 4-byte key in another form).
    /// Returns whether a statement was stopped.
    pub(crate) fn cancel(&self, db: &Database, pid: i32, key: &SecretKey) -> bool {
        let target = self
            .lock()
            .get(&pid)
            .filter(|(k, _)| k.eq_value(key))
            .map(|(_, i)| Arc::clone(i));
        target.is_some_and(|i| i.cancel(db))
    }

    /// Stops every running statement (shutdown, the engine's failed state): PostgreSQL's
    /// fast shutdown, where each backend stops at its next interrupt check. Returns how
    /// many statements were stopped.
    pub(crate) fn cancel_all(&self, db: &Database) -> usize {
        let interrupts: Vec<Arc<Interrupt>> =
            self.lock().values().map(|(_, i)| Arc::clone(i)).collect();
        interrupts.into_iter().filter(|i| i.cancel(db)).count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i32, (SecretKey, Arc<Interrupt>)>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts the statement-timeout watchdog; it ends when `stop` is set.
    pub(crate) fn watchdog(
        self: &Arc<Self>,
        db: Arc<Database>,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<JoinHandle<()>> {
        let registry = Arc::clone(self);
        std::thread::Builder::new()
            .name("quire-watchdog".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(WATCHDOG_PERIOD);
                    let now = Instant::now();
                    let interrupts: Vec<Arc<Interrupt>> = registry
                        .lock()
                        .values()
                        .map(|(_, i)| Arc::clone(i))
                        .collect();
                    for i in interrupts {
                        i.check_deadline(&db, now);
                    }
                }
            })
    }
}
