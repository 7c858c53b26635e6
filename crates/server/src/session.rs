//! The thread of a connection's engine work. Each connection gets one OS thread that owns
//! its [`Session`] (and so the engine `Transaction` inside it); the async side sends it
//! jobs over a bounded channel and awaits the reply on a oneshot channel. A statement that
//! waits for a row lock or for I/O blocks only this thread, never a runtime worker.
//! When the connection's handle is dropped, the channel closes and the thread rolls back
//! whatever transaction is open and ends.
//!
//! After each job the session says how long it may now wait for the next command
//! ([`quire_sql::IdleLimit`]); the handle arms its [`IdleTimer`] with that, and disarms it
//! when the next job starts. The connection's message loop ends the connection when the
//! timer expires.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use quire_engine::Database;
use quire_sql::{IdleLimit, Session, SqlError};
use tokio::sync::{mpsc, oneshot, Notify};

type Job = Box<dyn FnOnce(&mut Session) + Send>;

/// Jobs in flight per connection: the async side awaits each reply before sending the next,
/// so one is enough; the bound keeps a misbehaving caller from queueing without limit.
const JOB_QUEUE_LEN: usize = 1;

/// The async side's handle on a session thread.
pub(crate) struct SessionHandle {
    jobs: mpsc::Sender<Job>,
    idle: Arc<IdleTimer>,
    /// After the last job: an implicit transaction of the extended protocol is open, and
    /// the next Sync must commit it (saves a trip to the thread for every other Sync).
    awaits_sync: AtomicBool,
}

/// When the connection, waiting for its client's next command, must end.
#[derive(Default)]
pub(crate) struct IdleTimer {
    armed: Mutex<Option<(Instant, IdleLimit)>>,
    /// Wakes the waiter in [`IdleTimer::expired`] when the timer is armed or disarmed.
    changed: Notify,
}

impl IdleTimer {
    fn set(&self, armed: Option<(Instant, IdleLimit)>) {
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner) = armed;
        self.changed.notify_one();
    }

    fn get(&self) -> Option<(Instant, IdleLimit)> {
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Completes when the timer, armed, expires without having been re-armed or disarmed.
    pub(crate) async fn expired(&self) -> IdleLimit {
        loop {
            let armed = self.get();
            match armed {
                None => self.changed.notified().await,
                Some((at, limit)) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at.into()) => {
                            if self.get() == armed {
                                return limit;
                            }
                        }
                        () = self.changed.notified() => {}
                    }
                }
            }
        }
    }
}

impl SessionHandle {
    /// Starts the thread of connection `id`.
    pub(crate) fn spawn(
        db: Arc<Database>,
        id: u64,
    ) -> std::io::Result<(SessionHandle, JoinHandle<()>)> {
        let (jobs, mut rx) = mpsc::channel::<Job>(JOB_QUEUE_LEN);
        let thread = std::thread::Builder::new()
            .name(format!("quire-session-{id}"))
            .spawn(move || {
                let mut session = Session::new(db);
                while let Some(job) = rx.blocking_recv() {
                    job(&mut session);
                }
                if let Err(e) = session.close() {
                    tracing::warn!(session = id, error = %e, "rolling back at disconnect failed");
                }
                tracing::debug!(session = id, "session thread ends");
            })?;
        let idle = Arc::default();
        let handle = SessionHandle {
            jobs,
            idle,
            awaits_sync: AtomicBool::new(false),
        };
        Ok((handle, thread))
    }

    /// Whether the session's last job left an implicit transaction for Sync to commit.
    pub(crate) fn awaits_sync(&self) -> bool {
        self.awaits_sync.load(Ordering::Acquire)
    }

    /// The timer the connection's message loop waits on between commands.
    pub(crate) fn idle_timer(&self) -> Arc<IdleTimer> {
        Arc::clone(&self.idle)
    }

    /// Runs `f` on the session thread and awaits its result.
    pub(crate) async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Session) -> R + Send + 'static,
    ) -> Result<R, SqlError> {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |s| {
            let r = f(s);
            // The receiver is gone only if the connection was dropped meanwhile.
            let _ = reply.send((r, s.idle_limit(), s.awaits_sync()));
        });
        let gone = || SqlError::new("XX000", "the session's thread has ended");
        self.idle.set(None);
        self.jobs.send(job).await.map_err(|_| gone())?;
        let (r, limit, awaits_sync) = answer.await.map_err(|_| gone())?;
        self.awaits_sync.store(awaits_sync, Ordering::Release);
        self.idle.set(limit.map(|l| (Instant::now() + l.after, l)));
        Ok(r)
    }
}
