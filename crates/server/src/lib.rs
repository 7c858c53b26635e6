//! # quire-server
//!
//! `quire serve`: PostgreSQL's wire protocol (v3, through the `pgwire` crate) in front of
//! the SQL layer (DESIGN.md layer 12). psql, drivers and `tokio-postgres` connect unchanged.
//!
//! ## Rules
//!
//! - The async runtime never runs engine or SQL work. Each connection has an OS thread of
//!   its own ([`session`]) that owns the connection's `quire_sql::Session` and with it the
//!   engine `Transaction`; the connection's async task sends it jobs over a bounded channel
//!   and awaits the reply. A session waiting for a row lock holds its own thread, no
//!   runtime thread. Opening and closing the database run on the blocking pool.
//! - Errors reach the client as ErrorResponse with the SQLSTATE of the engine or the SQL
//!   layer; protocol and startup errors use PostgreSQL's codes (53300 beyond
//!   `max_connections`, 28000 for an unknown user or a non-loopback peer). After an error
//!   inside a transaction block the session refuses everything with 25P02 until ROLLBACK;
//!   ReadyForQuery reports I, T or E accordingly.
//! - A statement is stopped only through its session's `quire_sql::Interrupt` ([`cancel`]):
//!   a CancelRequest naming the session's process id and secret key, or the watchdog thread
//!   when `statement_timeout` passes. Never by dropping a thread.
//! - COPY FROM STDIN data goes to the session thread chunk by chunk as it arrives; the
//!   session keeps at most one incomplete line.
//! - Message sizes are bounded by pgwire's codec as by PostgreSQL: 1 GiB for Query, Parse,
//!   Bind and CopyData, 10,000 bytes for the small control messages; a longer length
//!   header ends the connection before anything is allocated.
//! - Authentication is `trust` for the user `postgres` on loopback only, and the server
//!   refuses to listen on a non-loopback address until password authentication exists.
//! - Shutdown (the future given to [`Server::run`] completes, e.g. on SIGINT/SIGTERM): stop
//!   accepting, drop every connection (each session thread rolls back its open
//!   transaction), wait for the session threads, then `Database::close()` (the shutdown
//!   checkpoint).
#![deny(unsafe_code)]

mod cancel;
mod handler;
mod session;
mod socket;
mod wire;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use pgwire::api::RandomPidSecretKeyGenerator;
use quire_engine::vfs::{OsVfs, Vfs};
use quire_engine::{Config, Database};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::cancel::Registry;
use crate::handler::{Connection, Handlers, Slot, SqlParser};
use crate::session::SessionHandle;

/// PostgreSQL's default port is 5432; quire's is one above, so both can run side by side.
pub const DEFAULT_PORT: u16 = 5433;

/// The server's settings (PostgreSQL's names: `listen_addresses`, `port`; the engine's in
/// `engine`, `max_connections` among them).
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub data_dir: PathBuf,
    /// One address; `localhost` means 127.0.0.1.
    pub listen_addresses: String,
    /// 0 picks a free port (tests).
    pub port: u16,
    pub engine: Config,
}

impl ServerConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        ServerConfig {
            data_dir: data_dir.into(),
            listen_addresses: "127.0.0.1".into(),
            port: DEFAULT_PORT,
            engine: Config::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("listen_addresses = \"{0}\" is not an IP address (or \"localhost\")")]
    BadAddress(String),
    #[error("refusing to listen on {0}: only loopback addresses are allowed until password authentication exists (trust authentication is loopback-only)")]
    NotLoopback(IpAddr),
    #[error("cannot create the data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Engine(#[from] quire_engine::Error),
    #[error(transparent)]
    Sql(#[from] quire_sql::SqlError),
    #[error("a blocking task failed: {0}")]
    Join(String),
}

/// A started server: the database is open and the socket listening.
pub struct Server {
    db: Arc<Database>,
    listener: TcpListener,
    max_connections: usize,
}

fn listen_ip(s: &str) -> Result<IpAddr, ServerError> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("localhost") {
        return Ok(IpAddr::from([127, 0, 0, 1]));
    }
    s.parse()
        .map_err(|_| ServerError::BadAddress(s.to_string()))
}

impl Server {
    /// Opens (creating or recovering) the data directory and starts listening.
    pub async fn start(config: ServerConfig) -> Result<Server, ServerError> {
        let ip = listen_ip(&config.listen_addresses)?;
        if !ip.is_loopback() {
            return Err(ServerError::NotLoopback(ip));
        }
        let max_connections = config.engine.max_connections;
        let data_dir = config.data_dir.clone();
        let engine = config.engine.clone();
        let db = tokio::task::spawn_blocking(move || -> Result<Database, ServerError> {
            std::fs::create_dir_all(&data_dir).map_err(|source| ServerError::DataDir {
                path: data_dir.clone(),
                source,
            })?;
            let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
            let db = Database::open(&vfs, &data_dir, engine)?;
            quire_sql::Session::bootstrap(&db)?;
            Ok(db)
        })
        .await
        .map_err(|e| ServerError::Join(e.to_string()))??;
        let addr = SocketAddr::new(ip, config.port);
        let listener = match TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(source) => {
                // Close what was opened: the shutdown checkpoint, the lock on the directory.
                let _ = tokio::task::spawn_blocking(move || db.close()).await;
                return Err(ServerError::Listen { addr, source });
            }
        };
        tracing::info!(
            data_dir = %config.data_dir.display(),
            addr = %listener.local_addr().unwrap_or(addr),
            max_connections,
            "quire is ready to accept connections"
        );
        Ok(Server {
            db: Arc::new(db),
            listener,
            max_connections,
        })
    }

    /// The address it listens on (the port chosen when `port` was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has a local address")
    }

    /// Serves connections until `shutdown` completes, then shuts down cleanly.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServerError> {
        let Server {
            db,
            listener,
            max_connections,
        } = self;
        let (stop, stopped) = watch::channel(false);
        let count = Arc::new(AtomicUsize::new(0));
        let threads: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let parameters = Arc::new(handler::server_parameters());
        let pids = Arc::new(RandomPidSecretKeyGenerator::default());
        let parser = Arc::new(SqlParser);
        let registry = Arc::new(Registry::default());
        let watchdog_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watchdog = registry
            .watchdog(Arc::clone(&db), Arc::clone(&watchdog_stop))
            .map_err(|e| ServerError::Join(format!("cannot start the watchdog thread: {e}")))?;
        let mut connections = JoinSet::new();
        let mut next_id = 0u64;
        tokio::pin!(shutdown);
        loop {
            let (socket, peer) = tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: log, pause, go on.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            next_id += 1;
            let slot = Slot::acquire(&count, max_connections);
            let session = match &slot {
                None => None,
                Some(_) => match SessionHandle::spawn(Arc::clone(&db), next_id) {
                    Ok((handle, thread)) => {
                        let mut t = threads
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        t.retain(|h| !h.is_finished());
                        t.push(thread);
                        Some(handle)
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot start a session thread");
                        None
                    }
                },
            };
            tracing::debug!(%peer, id = next_id, "connection accepted");
            let idle = session.as_ref().map(SessionHandle::idle_timer);
            let conn = Arc::new(Connection {
                session,
                db: Arc::clone(&db),
                registry: Arc::clone(&registry),
                pid: std::sync::Mutex::new(None),
                _slot: slot,
                parameters: Arc::clone(&parameters),
                pids: Arc::clone(&pids),
                parser: Arc::clone(&parser),
            });
            let mut stopped = stopped.clone();
            connections.spawn(async move {
                tokio::select! {
                    r = socket::serve(socket, None, Handlers(conn), idle) => {
                        if let Err(e) = r {
                            tracing::debug!(%peer, error = %e, "connection ended with an error");
                        }
                    }
                    _ = stopped.changed() => {}
                }
            });
            // Reap finished connection tasks so the set does not grow without bound.
            while connections.try_join_next().is_some() {}
        }
        tracing::info!("shutting down: no new connections; rolling back open transactions");
        drop(listener);
        let _ = stop.send(true);
        while connections.join_next().await.is_some() {}
        watchdog_stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = watchdog.join();
        let threads = std::mem::take(
            &mut *threads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        tokio::task::spawn_blocking(move || -> Result<(), ServerError> {
            for t in threads {
                let _ = t.join();
            }
            match Arc::try_unwrap(db) {
                Ok(db) => Ok(db.close()?),
                Err(_) => Err(ServerError::Join(
                    "the database is still in use after the sessions ended".into(),
                )),
            }
        })
        .await
        .map_err(|e| ServerError::Join(e.to_string()))??;
        tracing::info!("database closed (shutdown checkpoint written)");
        Ok(())
    }
}
