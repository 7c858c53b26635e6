//! The server's sessions as SQL sees them (PostgreSQL's ProcArray of PGPROCs): each
//! session's process id and secret key (what a CancelRequest names), its role, and the
//! handle that stops its statement or ends it. `pg_backend_pid`, `pg_cancel_backend` and
//! `pg_terminate_backend` read it, and the server's cancel requests and statement-timeout
//! watchdog.
//!
//! ## Rules
//! - A session registers when it is made in a registry ([`crate::Session::attached`]) and
//!   leaves it when it is dropped. Process ids are random, positive and unique among the
//!   registered; secret keys are 32 random bits, compared in constant time.
//! - Stopping a statement or ending a session only sets a reason on its [`Interrupt`] and
//!   wakes its connection ([`Backend::set_waker`]); the session's own thread acts on it,
//!   at its next interrupt check or wait for its client. No thread is ever dropped.
//! - Sessions made without a registry (in-process use, tests) still have a process id, from
//!   a counter, so `pg_backend_pid()` answers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use quire_engine::{Database, SqlState};

use crate::error::{Result, SqlError};
use crate::interrupt::Interrupt;

/// Most sessions a registry holds: a bound far above any `max_connections`.
const MAX_BACKENDS: usize = 1 << 20;
/// Random process ids tried before giving up (each is free with probability > 99.9%).
const MAX_PID_TRIES: usize = 64;

/// A session's identity and its handles.
pub struct Backend {
    pid: i32,
    key: [u8; 4],
    interrupt: Arc<Interrupt>,
    /// The authenticated role, and whether it is a superuser (PostgreSQL's rules for who
    /// may signal whom look at the target's role).
    user: Mutex<(String, bool)>,
    terminate: AtomicBool,
    waker: OnceLock<Box<dyn Fn() + Send + Sync>>,
    registry: Option<Arc<Backends>>,
}

impl Backend {
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The secret key the client was given with the process id (BackendKeyData).
    pub fn key(&self) -> [u8; 4] {
        self.key
    }

    pub fn interrupt(&self) -> &Arc<Interrupt> {
        &self.interrupt
    }

    /// How the server wakes the session's thread when it waits for its client (set once).
    pub fn set_waker(&self, waker: Box<dyn Fn() + Send + Sync>) {
        let _ = self.waker.set(waker);
    }

    /// Whether the session was told to end (`pg_terminate_backend`).
    pub fn terminate_requested(&self) -> bool {
        self.terminate.load(Ordering::Acquire)
    }

    pub(crate) fn set_user(&self, name: &str, superuser: bool) {
        *self.user.lock() = (name.to_string(), superuser);
    }

    pub(crate) fn user(&self) -> (String, bool) {
        self.user.lock().clone()
    }

    pub(crate) fn registry(&self) -> Option<&Arc<Backends>> {
        self.registry.as_ref()
    }

    /// Ends the session: its running statement stops with FATAL 57P01, and a session
    /// waiting for its client is woken to end.
    pub(crate) fn terminate(&self, db: &Database) {
        self.terminate.store(true, Ordering::Release);
        self.interrupt.terminate(db);
        self.wake();
    }

    fn wake(&self) {
        if let Some(w) = self.waker.get() {
            w();
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(r) = &self.registry {
            r.map.lock().remove(&self.pid);
        }
    }
}

/// The registered sessions by process id.
#[derive(Default)]
pub struct Backends {
    map: Mutex<HashMap<i32, std::sync::Weak<Backend>>>,
}

/// Process ids of sessions made without a registry.
static NEXT_LOCAL_PID: AtomicI32 = AtomicI32::new(1);

fn random_bytes<const N: usize>() -> Result<[u8; N]> {
    use ring::rand::SecureRandom;
    let mut b = [0u8; N];
    ring::rand::SystemRandom::new().fill(&mut b).map_err(|_| {
        SqlError::new(
            SqlState::INTERNAL_ERROR,
            "could not generate random cancel key",
        )
    })?;
    Ok(b)
}

impl Backends {
    /// A new session's entry, registered under a fresh random process id.
    pub(crate) fn register(self: &Arc<Self>, interrupt: Arc<Interrupt>) -> Result<Arc<Backend>> {
        let key = random_bytes()?;
        let mut map = self.map.lock();
        if map.len() >= MAX_BACKENDS {
            return Err(SqlError::new(
                SqlState::TOO_MANY_CONNECTIONS,
                "sorry, too many clients already",
            ));
        }
        // Bounded: the map holds at most MAX_BACKENDS of 2^31 ids, so a free one is found
        // within a few tries with overwhelming likelihood; the bound makes it certain.
        let mut pid = 0;
        for _ in 0..MAX_PID_TRIES {
            let candidate = i32::from_be_bytes(random_bytes()?) & i32::MAX;
            if candidate > 0 && !map.contains_key(&candidate) {
                pid = candidate;
                break;
            }
        }
        if pid == 0 {
            return Err(SqlError::new(
                SqlState::INTERNAL_ERROR,
                "could not choose a process id",
            ));
        }
        let backend = Arc::new(Backend {
            pid,
            key,
            interrupt,
            user: Mutex::default(),
            terminate: AtomicBool::new(false),
            waker: OnceLock::new(),
            registry: Some(Arc::clone(self)),
        });
        map.insert(pid, Arc::downgrade(&backend));
        Ok(backend)
    }

    /// The entry of a session made without a registry.
    pub(crate) fn local(interrupt: Arc<Interrupt>) -> Arc<Backend> {
        Arc::new(Backend {
            pid: NEXT_LOCAL_PID.fetch_add(1, Ordering::Relaxed),
            key: [0; 4],
            interrupt,
            user: Mutex::default(),
            terminate: AtomicBool::new(false),
            waker: OnceLock::new(),
            registry: None,
        })
    }

    /// The session `pid`, if registered.
    pub fn get(&self, pid: i32) -> Option<Arc<Backend>> {
        self.map.lock().get(&pid).and_then(std::sync::Weak::upgrade)
    }

    /// A CancelRequest: stops the statement of session `pid` if `key` is its secret
    /// (compared in constant time). Returns whether a statement was stopped.
    pub fn cancel(&self, db: &Database, pid: i32, key: &[u8]) -> bool {
        let Some(b) = self.get(pid) else {
            return false;
        };
        let same = key.len() == b.key.len()
            && key.iter().zip(b.key).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0;
        same && b.interrupt.cancel(db)
    }

    /// Every registered session.
    pub fn all(&self) -> Vec<Arc<Backend>> {
        self.map
            .lock()
            .values()
            .filter_map(std::sync::Weak::upgrade)
            .collect()
    }

    pub fn len(&self) -> usize {
        self.map.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What `pg_cancel_backend` and `pg_terminate_backend` do to a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signal {
    Cancel,
    Terminate,
}

/// Who sends a signal: the current role, whether it is a superuser, and whether it has the
/// privileges of a given role (membership, PostgreSQL's `has_privs_of_role`).
pub(crate) struct Signaller<'a> {
    pub role: &'a str,
    pub superuser: bool,
    pub has_privs_of: &'a dyn Fn(&str) -> bool,
}

/// `pg_cancel_backend(pid)` / `pg_terminate_backend(pid)` by PostgreSQL's
/// `pg_signal_backend` rules: only a superuser may signal a superuser's session; others need
/// the privileges of the target's role or of `pg_signal_backend`. Returns whether the
/// signal was sent (false for a process id that is no session's).
pub(crate) fn signal(
    me: &Backend,
    db: &Database,
    pid: i32,
    who: &Signaller<'_>,
    what: Signal,
) -> Result<bool> {
    let target = me.registry().and_then(|r| r.get(pid));
    let Some(target) = target else {
        return Ok(false);
    };
    let (role, superuser) = target.user();
    let (verb, object) = match what {
        Signal::Cancel => ("cancel", "query"),
        Signal::Terminate => ("terminate", "process"),
    };
    if superuser && !who.superuser {
        return Err(SqlError::new(
            SqlState::INSUFFICIENT_PRIVILEGE,
            format!("permission denied to {verb} {object}"),
        )
        .with_detail(format!(
            "Only roles with the SUPERUSER attribute may {verb} {} of roles with the SUPERUSER attribute.",
            if what == Signal::Cancel { "queries" } else { "processes" }
        )));
    }
    let allowed = who.superuser
        || role == who.role
        || (who.has_privs_of)(&role)
        || (who.has_privs_of)("pg_signal_backend");
    if !allowed {
        let this = if what == Signal::Cancel {
            "query is being canceled or with privileges of the \"pg_signal_backend\" role may cancel this query"
        } else {
            "process is being terminated or with privileges of the \"pg_signal_backend\" role may terminate this process"
        };
        return Err(SqlError::new(
            SqlState::INSUFFICIENT_PRIVILEGE,
            format!("permission denied to {verb} {object}"),
        )
        .with_detail(format!(
            "Only roles with privileges of the role whose {this}."
        )));
    }
    match what {
        Signal::Cancel => {
            target.interrupt.cancel(db);
        }
        Signal::Terminate => target.terminate(db),
    }
    Ok(true)
}
