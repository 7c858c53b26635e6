//! The thread of a connection's engine work. Each connection gets one OS thread that owns
//! its [`Session`] (and so the engine `Transaction` inside it); the async side sends it
//! jobs over a bounded channel and awaits the reply on a oneshot channel. A statement that
//! waits for a row lock or for I/O blocks only this thread, never a runtime worker.
//! When the connection's handle is dropped, the channel closes and the thread rolls back
//! whatever transaction is open and ends.

use std::sync::Arc;
use std::thread::JoinHandle;

use quire_engine::Database;
use quire_sql::{Session, SqlError};
use tokio::sync::{mpsc, oneshot};

type Job = Box<dyn FnOnce(&mut Session) + Send>;

/// Jobs in flight per connection: the async side awaits each reply before sending the next,
/// so one is enough; the bound keeps a misbehaving caller from queueing without limit.
const JOB_QUEUE_LEN: usize = 1;

/// The async side's handle on a session thread.
pub(crate) struct SessionHandle {
    jobs: mpsc::Sender<Job>,
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
        Ok((SessionHandle { jobs }, thread))
    }

    /// Runs `f` on the session thread and awaits its result.
    pub(crate) async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Session) -> R + Send + 'static,
    ) -> Result<R, SqlError> {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |s| {
            // The receiver is gone only if the connection was dropped meanwhile.
            let _ = reply.send(f(s));
        });
        let gone = || SqlError::new("XX000", "the session's thread has ended");
        self.jobs.send(job).await.map_err(|_| gone())?;
        answer.await.map_err(|_| gone())
    }
}
