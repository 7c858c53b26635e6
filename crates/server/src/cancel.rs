//! Cancel requests and statement timeouts. Every session registers its
//! [`Interrupt`] under the process id and secret key its client received at startup; a
//! CancelRequest (on a connection of its own) that names both stops that session's running
//! statement. A watchdog thread stops statements past their `statement_timeout`.
//!
//! ## The watchdog's rule
//! It sleeps until the earliest deadline it knows of, and without one until it is told of
//! one: a statement that starts with a deadline tells it ([`Alarm::wake_by`]) when that
//! deadline is earlier than the one it sleeps for. Woken, it forgets its deadline, looks at
//! every session (stopping those past theirs), and sleeps for the earliest deadline still to
//! come. A deadline told while it looks is kept, not lost: it is set under the same lock the
//! watchdog takes before it sleeps. So an idle server, or one whose sessions set no
//! `statement_timeout` (the default), never wakes it; before, it woke 100 times a second.
//!
//! A statement whose deadline is not earlier than the one the watchdog sleeps for takes no
//! lock (every statement but a few, deadlines growing with time): it reads the watchdog's
//! deadline from an atomic copy, and the watchdog, woken, finds it in its look. That look
//! cannot miss it: the watchdog forgets its deadline before it looks, and a statement that
//! read the old deadline had registered itself (under its session's lock) before.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use pgwire::messages::startup::SecretKey;
use quire_engine::Database;
use quire_sql::{Alarm, Interrupt};

/// The running sessions by process id.
#[derive(Default)]
pub(crate) struct Registry {
    sessions: Mutex<HashMap<i32, (SecretKey, Arc<Interrupt>)>>,
    watchdog: Arc<Watchdog>,
}

/// What the watchdog sleeps for.
struct Watchdog {
    state: Mutex<WatchdogState>,
    wake: Condvar,
    /// `state.next` in nanoseconds since `origin` (`NO_DEADLINE` for none), written under
    /// the lock, read without it by statements whose deadline is no earlier.
    next_ns: AtomicU64,
    origin: Instant,
}

const NO_DEADLINE: u64 = u64::MAX;

impl Default for Watchdog {
    fn default() -> Self {
        Watchdog {
            state: Mutex::default(),
            wake: Condvar::new(),
            next_ns: AtomicU64::new(NO_DEADLINE),
            origin: Instant::now(),
        }
    }
}

#[derive(Default)]
struct WatchdogState {
    /// The earliest deadline told since the watchdog last looked.
    next: Option<Instant>,
    stop: bool,
}

impl Watchdog {
    fn lock(&self) -> std::sync::MutexGuard<'_, WatchdogState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps until the earliest deadline is due (forgetting it) or the watchdog must stop;
    /// returns false for the latter.
    fn sleep(&self) -> bool {
        let mut state = self.lock();
        loop {
            if state.stop {
                return false;
            }
            let now = Instant::now();
            state = match state.next {
                Some(d) if d <= now => {
                    state.next = None;
                    self.next_ns.store(NO_DEADLINE, Ordering::Release);
                    return true;
                }
                Some(d) => {
                    self.wake
                        .wait_timeout(state, d - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                None => self
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner),
            };
        }
    }

    fn stop(&self) {
        self.lock().stop = true;
        self.wake.notify_all();
    }

    fn nanos(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX - 1)
    }
}

impl Alarm for Watchdog {
    fn wake_by(&self, deadline: Instant) {
        // No earlier than the deadline the watchdog sleeps for: its look will find this one.
        if self.nanos(deadline) >= self.next_ns.load(Ordering::Acquire) {
            return;
        }
        let mut state = self.lock();
        if state.next.is_none_or(|d| deadline < d) {
            state.next = Some(deadline);
            self.next_ns.store(self.nanos(deadline), Ordering::Release);
            drop(state);
            self.wake.notify_all();
        }
    }
}

impl Registry {
    pub(crate) fn register(&self, pid: i32, key: SecretKey, interrupt: Arc<Interrupt>) {
        interrupt.set_alarm(Arc::clone(&self.watchdog) as Arc<dyn Alarm>);
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

    /// Starts the statement-timeout watchdog (see the module header); it ends at
    /// [`Registry::stop_watchdog`].
    pub(crate) fn watchdog(self: &Arc<Self>, db: Arc<Database>) -> std::io::Result<JoinHandle<()>> {
        let registry = Arc::clone(self);
        std::thread::Builder::new()
            .name("quire-watchdog".into())
            .spawn(move || {
                while registry.watchdog.sleep() {
                    let now = Instant::now();
                    let interrupts: Vec<Arc<Interrupt>> = registry
                        .lock()
                        .values()
                        .map(|(_, i)| Arc::clone(i))
                        .collect();
                    let still_to_come = interrupts
                        .iter()
                        .filter_map(|i| i.check_deadline(&db, now))
                        .min();
                    if let Some(d) = still_to_come {
                        registry.watchdog.wake_by(d);
                    }
                }
            })
    }

    /// Ends the watchdog thread.
    pub(crate) fn stop_watchdog(&self) {
        self.watchdog.stop();
    }
}
