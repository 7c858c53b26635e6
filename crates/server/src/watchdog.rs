//! The statement-timeout watchdog: a thread that stops statements past their
//! `statement_timeout` (cancel requests themselves go through the registry of sessions,
//! `quire_sql::Backends`).
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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use quire_engine::Database;
use quire_sql::{Alarm, Backends};

/// What the watchdog sleeps for.
pub(crate) struct Watchdog {
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

    /// Ends the watchdog thread.
    pub(crate) fn stop(&self) {
        self.lock().stop = true;
        self.wake.notify_all();
    }

    fn nanos(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX - 1)
    }

    /// Starts the watchdog's thread over the sessions of `backends`; it ends at
    /// [`Watchdog::stop`].
    pub(crate) fn start(
        self: &Arc<Self>,
        db: Arc<Database>,
        backends: Arc<Backends>,
    ) -> std::io::Result<JoinHandle<()>> {
        let watchdog = Arc::clone(self);
        std::thread::Builder::new()
            .name("quire-watchdog".into())
            .spawn(move || {
                while watchdog.sleep() {
                    let now = Instant::now();
                    let still_to_come = backends
                        .all()
                        .iter()
                        .filter_map(|b| b.interrupt().check_deadline(&db, now))
                        .min();
                    if let Some(d) = still_to_come {
                        watchdog.wake_by(d);
                    }
                }
            })
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
