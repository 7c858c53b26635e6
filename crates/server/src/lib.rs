//! # quire-server
//!
//! `quire serve`: PostgreSQL's wire protocol (v3, through the `pgwire` crate) in front of
//! the SQL layer (DESIGN.md layer 12). psql, drivers and `tokio-postgres` connect unchanged.
//!
//! ## Rules
//!
//! - The shared async runtime only accepts connections and watches the engine's health; it
//!   never runs engine or SQL work. Each connection has an OS thread of its own with a
//!   single-threaded runtime for its socket ([`socket`]), and its handlers call the
//!   connection's `quire_sql::Session` in place ([`session`]): a session waiting for a row
//!   lock blocks only its own thread. Opening and closing the database run on the
//!   blocking pool.
//! - A connection from a loopback address moves its thread to its client's CPU, at most
//!   ⌈such connections / CPUs⌉ to one CPU (`client_cpu_affinity`, on by default;
//!   [`affinity`]'s rules). Placement only: it never fails a connection.
//! - Errors reach the client as ErrorResponse with the SQLSTATE of the engine or the SQL
//!   layer; protocol and startup errors use PostgreSQL's codes (53300 beyond
//!   `max_connections`, 28000 and 28P01 for authentication, below). After an error
//!   inside a transaction block the session refuses everything with 25P02 until ROLLBACK;
//!   ReadyForQuery reports I, T or E accordingly.
//! - A statement is stopped only through its session's `quire_sql::Interrupt` ([`cancel`]):
//!   a CancelRequest naming the session's process id and secret key, or the watchdog thread
//!   when `statement_timeout` passes. Never by dropping a thread.
//! - COPY FROM STDIN data goes to the session chunk by chunk as it arrives; the
//!   session keeps at most one incomplete line.
//! - Message sizes are bounded by pgwire's codec as by PostgreSQL: 1 GiB for Query, Parse,
//!   Bind and CopyData, 10,000 bytes for the small control messages; a longer length
//!   header ends the connection before anything is allocated.
//! - Authentication follows `pg_hba.conf` ([`hba`]'s rules: the first matching line decides;
//!   no match is FATAL 28000). Methods: `trust`, `scram-sha-256`, `password`, `reject`. Roles
//!   and their SCRAM verifiers live in the SQL layer's roles table (`quire_sql`'s `roles`);
//!   the server never sees or keeps a stored password, only verifiers. A wrong password, an
//!   unknown role and a role without a password all end in the same FATAL 28P01 after a
//!   full exchange (a mock salt for an unknown role), so a client learns nothing about which
//!   roles exist; a role without LOGIN hears 28000 only after its password was right.
//! - A new data directory gets a `pg_hba.conf` that trusts 127.0.0.1/32 and ::1/128 only,
//!   and has the `postgres` superuser (no password). The server refuses to start listening
//!   on a non-loopback address while a `trust` line covers a non-loopback address (the error
//!   names the file and line); any other rules may face the network. Never weaken this: a
//!   `trust` line reaching beyond loopback would give anyone on the network a superuser.
//! - TLS (`ssl = on`): `ssl_cert_file` and `ssl_key_file` (PEM, relative to the data
//!   directory) are loaded at start, and a bad or missing one refuses the start; clients
//!   then may negotiate TLS (SSLRequest or direct). `hostssl` lines match only TLS
//!   connections, and refuse the start while `ssl` is off. SCRAM is offered without channel
//!   binding (no SCRAM-SHA-256-PLUS).
//! - Between two commands a session may wait at most `idle_in_transaction_session_timeout`
//!   inside a block and `idle_session_timeout` outside one (both off by default); then the
//!   connection ends with PostgreSQL's FATAL 25P03 or 57P05 ([`socket`]), and its
//!   transaction rolls back. A prepared statement keeps its plan in the session until a
//!   definition changes (`quire_sql`'s plan cache), and so does the shape of a
//!   simple-protocol statement (`Session::execute_query`).
//! - Shutdown (the future given to [`Server::run`] completes, e.g. on SIGINT/SIGTERM): stop
//!   accepting, cancel running statements, end every connection (FATAL 57P01 to a client
//!   between commands), each session rolling back its open transaction; wait for the
//!   connection threads, then `Database::close()` (the shutdown checkpoint).
//! - The engine's failed state (PostgreSQL's PANIC) is PostgreSQL's `restart_after_crash`:
//!   the server notices it within [`HEALTH_CHECK_PERIOD`], ends every connection (FATAL
//!   57P02), waits for the connection threads, drops the failed database without a checkpoint
//!   and opens the directory again, which recovers from the WAL; meanwhile new connections
//!   wait in the listen backlog.
#![deny(unsafe_code)]

mod affinity;
mod cancel;
mod handler;
pub mod hba;
mod session;
mod socket;
mod wire;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::thread::JoinHandle;

use pgwire::api::RandomPidSecretKeyGenerator;
use pgwire::tokio::TlsAcceptor;
use quire_engine::vfs::{OsVfs, Vfs};
use quire_engine::{Config, Database, HealthState};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::cancel::Registry;
use crate::handler::{Auth, Connection, Slot, SqlParser};
use crate::hba::Hba;
use crate::session::SessionHandle;

/// PostgreSQL's default port is 5432; quire's is one above, so both can run side by side.
pub const DEFAULT_PORT: u16 = 5433;

/// The server's settings (PostgreSQL's names: `listen_addresses`, `port`, `hba_file`, `ssl`,
/// `ssl_cert_file`, `ssl_key_file`; the engine's in `engine`, `max_connections` among them).
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub data_dir: PathBuf,
    /// One address; `localhost` means 127.0.0.1.
    pub listen_addresses: String,
    /// 0 picks a free port (tests).
    pub port: u16,
    /// The authentication rules ([`hba`]); `None`: `pg_hba.conf` in the data directory,
    /// written with trust on loopback when missing. A relative path is in the data directory.
    pub hba_file: Option<PathBuf>,
    /// TLS (`ssl`, off by default): when on, the certificate and key are loaded at start and
    /// clients may ask for TLS; `hostssl` rules need it.
    pub ssl: bool,
    /// PEM files; relative paths are in the data directory. Defaults `server.crt` and
    /// `server.key`, as PostgreSQL's.
    pub ssl_cert_file: PathBuf,
    pub ssl_key_file: PathBuf,
    /// Whether a connection from a loopback address moves its thread to its client's CPU
    /// (`client_cpu_affinity`, on by default; [`affinity`]'s rules).
    pub client_cpu_affinity: bool,
    pub engine: Config,
}

impl ServerConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        ServerConfig {
            data_dir: data_dir.into(),
            listen_addresses: "127.0.0.1".into(),
            port: DEFAULT_PORT,
            hba_file: None,
            ssl: false,
            ssl_cert_file: "server.crt".into(),
            ssl_key_file: "server.key".into(),
            client_cpu_affinity: true,
            engine: Config::default(),
        }
    }

    /// The server's own settings as SHOW and `pg_settings` show them, by PostgreSQL's names,
    /// with the port it listens on and the authentication file it read.
    fn shown(&self, port: u16, hba_path: &Path) -> Arc<[(&'static str, String)]> {
        let on_off = |b: bool| quire_engine::config::on_off(b).to_string();
        let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        Arc::new([
            ("port", port.to_string()),
            ("listen_addresses", self.listen_addresses.clone()),
            (
                "data_directory",
                absolute(&self.data_dir).display().to_string(),
            ),
            ("hba_file", absolute(hba_path).display().to_string()),
            ("ssl", on_off(self.ssl)),
            ("ssl_cert_file", self.ssl_cert_file.display().to_string()),
            ("ssl_key_file", self.ssl_key_file.display().to_string()),
            ("client_cpu_affinity", on_off(self.client_cpu_affinity)),
        ])
    }

    /// `path` as the server reads it: relative to the data directory.
    fn in_data_dir(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.data_dir.join(path)
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("listen_addresses = \"{0}\" is not an IP address (or \"localhost\")")]
    BadAddress(String),
    #[error("refusing to listen on {addr}: {path} line {line} trusts connections from beyond loopback (allow `trust` only for 127.0.0.0/8 or ::1/128, or listen on loopback)")]
    TrustBeyondLoopback {
        addr: IpAddr,
        path: PathBuf,
        line: usize,
    },
    #[error(transparent)]
    Hba(#[from] hba::HbaError),
    #[error("{path} line {line}: a hostssl rule cannot match because ssl is off (set ssl = on with a certificate)")]
    HostSslWithoutSsl { path: PathBuf, line: usize },
    #[error("TLS: {0}")]
    Tls(String),
    #[error("the system's random number generator failed")]
    Random,
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
    auth: Arc<Auth>,
    tls: Option<TlsAcceptor>,
    affinity: Option<Arc<affinity::Affinity>>,
    /// The server's own settings, as SHOW shows them.
    settings: Arc<[(&'static str, String)]>,
    /// What opening the database again (after the engine's failed state) needs.
    reopen: Reopen,
}

#[derive(Clone)]
struct Reopen {
    vfs: Arc<dyn Vfs>,
    data_dir: PathBuf,
    engine: Config,
}

impl Reopen {
    /// Opens (creating or recovering) the data directory, on the blocking pool.
    async fn open(&self) -> Result<Database, ServerError> {
        let Reopen {
            vfs,
            data_dir,
            engine,
        } = self.clone();
        tokio::task::spawn_blocking(move || -> Result<Database, ServerError> {
            vfs.create_dir_all(&data_dir)
                .map_err(|source| ServerError::DataDir {
                    path: data_dir.clone(),
                    source,
                })?;
            let db = Database::open(&vfs, &data_dir, engine)?;
            quire_sql::Session::bootstrap(&db)?;
            Ok(db)
        })
        .await
        .map_err(|e| ServerError::Join(e.to_string()))?
    }
}

/// Why [`serve`] stopped serving.
enum Ended {
    Shutdown,
    /// The engine entered its failed state (PostgreSQL's PANIC), for this reason.
    EngineFailed(String),
}

/// How often the server looks at the engine's health: how soon after a PANIC the sessions
/// end and the restart begins.
const HEALTH_CHECK_PERIOD: std::time::Duration = std::time::Duration::from_millis(50);

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
        Self::start_on(config, Arc::new(OsVfs::new())).await
    }

    /// [`Server::start`] on a file system of the caller's choosing (tests use the simulated
    /// one, to make the engine fail).
    pub async fn start_on(config: ServerConfig, vfs: Arc<dyn Vfs>) -> Result<Server, ServerError> {
        let ip = listen_ip(&config.listen_addresses)?;
        vfs.create_dir_all(&config.data_dir)
            .map_err(|source| ServerError::DataDir {
                path: config.data_dir.clone(),
                source,
            })?;
        let hba_path = config.in_data_dir(
            config
                .hba_file
                .as_deref()
                .unwrap_or_else(|| Path::new("pg_hba.conf")),
        );
        let hba = Hba::load(vfs.as_ref(), &hba_path, config.hba_file.is_none())?;
        if !ip.is_loopback() {
            if let Some(rule) = hba.trust_beyond_loopback() {
                return Err(ServerError::TrustBeyondLoopback {
                    addr: ip,
                    path: hba.path.clone(),
                    line: rule.line,
                });
            }
        }
        if let (false, Some(rule)) = (config.ssl, hba.needs_ssl()) {
            return Err(ServerError::HostSslWithoutSsl {
                path: hba.path.clone(),
                line: rule.line,
            });
        }
        let tls = if config.ssl {
            Some(tls_acceptor(
                &config.in_data_dir(&config.ssl_cert_file),
                &config.in_data_dir(&config.ssl_key_file),
            )?)
        } else {
            None
        };
        let auth = Arc::new(Auth::new(hba)?);
        let max_connections = config.engine.max_connections;
        let reopen = Reopen {
            vfs,
            data_dir: config.data_dir.clone(),
            engine: config.engine.clone(),
        };
        let db = reopen.open().await?;
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
            ssl = tls.is_some(),
            "quire is ready to accept connections"
        );
        let port = listener.local_addr().map_or(config.port, |a| a.port());
        Ok(Server {
            db: Arc::new(db),
            listener,
            max_connections,
            auth,
            tls,
            affinity: config
                .client_cpu_affinity
                .then(affinity::Affinity::new)
                .flatten(),
            settings: config.shown(port, &hba_path),
            reopen,
        })
    }

    /// The address it listens on (the port chosen when `port` was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has a local address")
    }

    /// Serves connections until `shutdown` completes, then shuts down cleanly. When the
    /// engine enters its failed state, every session ends and the database is opened again,
    /// which recovers from the WAL (PostgreSQL's `restart_after_crash`); then serving goes on.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServerError> {
        let Server {
            mut db,
            listener,
            max_connections,
            auth,
            tls,
            affinity,
            settings,
            reopen,
        } = self;
        let endpoint = Endpoint {
            listener,
            max_connections,
            auth,
            tls,
            affinity,
            settings,
        };
        tokio::pin!(shutdown);
        loop {
            let ended = serve(&db, &endpoint, &mut shutdown).await?;
            let reason = match ended {
                Ended::Shutdown => break,
                Ended::EngineFailed(reason) => reason,
            };
            tracing::warn!(
                reason,
                "all sessions ended after the engine failed; restarting, which recovers from the WAL"
            );
            let failed = take_last(db)?;
            // No shutdown checkpoint: a failed engine writes nothing more. Dropping it
            // releases the directory; recovery replays the WAL from the last checkpoint.
            drop(failed);
            db = Arc::new(reopen.open().await?);
            tracing::info!("recovered after the engine failed; accepting connections again");
        }
        drop(endpoint);
        let db = take_last(db)?;
        tokio::task::spawn_blocking(move || db.close())
            .await
            .map_err(|e| ServerError::Join(e.to_string()))??;
        tracing::info!("database closed (shutdown checkpoint written)");
        Ok(())
    }
}

/// What [`serve`] accepts connections with.
struct Endpoint {
    listener: TcpListener,
    max_connections: usize,
    auth: Arc<Auth>,
    tls: Option<TlsAcceptor>,
    affinity: Option<Arc<affinity::Affinity>>,
    settings: Arc<[(&'static str, String)]>,
}

/// The TLS acceptor of a PEM certificate chain and private key (rustls with ring, which
/// pgwire's TLS negotiation uses).
fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, ServerError> {
    use pgwire::tokio::tokio_rustls::rustls;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let read = |p: &Path| {
        std::fs::read(p).map_err(|e| ServerError::Tls(format!("cannot read {}: {e}", p.display())))
    };
    let cert_pem = read(cert)?;
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ServerError::Tls(format!("{}: {e}", cert.display())))?;
    if certs.is_empty() {
        return Err(ServerError::Tls(format!(
            "{} holds no certificate",
            cert.display()
        )));
    }
    let key_der = PrivateKeyDer::from_pem_slice(&read(key)?)
        .map_err(|e| ServerError::Tls(format!("{}: {e}", key.display())))?;
    // The provider named, not the process default: which one is "default" depends on the
    // features other crates turn on.
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| ServerError::Tls(e.to_string()))?
    .with_no_client_auth()
    .with_single_cert(certs, key_der)
    .map_err(|e| ServerError::Tls(format!("{} and {}: {e}", cert.display(), key.display())))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// How the server tells one connection thread to end: the farewell its client hears.
type Stop = watch::Sender<Option<socket::Farewell>>;

/// The database once every session has let go of it.
fn take_last(db: Arc<Database>) -> Result<Database, ServerError> {
    Arc::try_unwrap(db).map_err(|_| {
        ServerError::Join("the database is still in use after the sessions ended".into())
    })
}

/// One connection, on its own thread: a single-threaded runtime speaks the protocol on the
/// socket and the handlers call the session in place ([`session`]'s rules).
fn connection_thread(
    socket: std::net::TcpStream,
    tls: Option<TlsAcceptor>,
    follower: Option<affinity::Follower>,
    conn: Arc<Connection>,
    idle: Option<Arc<session::IdleTimer>>,
    farewell: watch::Receiver<Option<socket::Farewell>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "cannot start a connection's runtime");
            return;
        }
    };
    let mut stopped = farewell.clone();
    let served = runtime.block_on(async move {
        let socket = tokio::net::TcpStream::from_std(socket)?;
        // Replies go out whole and at once (the message loop writes one per round trip), so
        // Nagle's algorithm only holds them back; PostgreSQL sets TCP_NODELAY too.
        socket.set_nodelay(true)?;
        // Biased, the connection first: between commands it says farewell itself. The stop
        // drops it only after FAREWELL_GRACE (a connection stuck writing to a client that
        // does not read): dropped at once, it lost its farewell now and then, when the stop
        // woke this select before the message loop saw it (under load, 1 run in 10 of the
        // restart test ended without the client's 57P02).
        let serving = socket::serve(socket, follower, tls, conn, idle, farewell);
        tokio::pin!(serving);
        tokio::select! {
            biased;
            r = &mut serving => r,
            _ = stopped.changed() => tokio::time::timeout(FAREWELL_GRACE, &mut serving)
                .await
                .unwrap_or(Ok(())),
        }
    });
    if let Err(e) = served {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// How long a connection told to stop may take to send its farewell.
const FAREWELL_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Resolves when the engine has entered its failed state, with the reason.
async fn engine_failed(db: &Database) -> String {
    let mut every = tokio::time::interval(HEALTH_CHECK_PERIOD);
    loop {
        every.tick().await;
        if let HealthState::Failed { reason } = db.health() {
            return reason;
        }
    }
}

/// Serves connections on `db` until `shutdown` completes or the engine fails; then ends
/// every connection and waits for every connection thread, so that `db` is no longer shared.
async fn serve(
    db: &Arc<Database>,
    endpoint: &Endpoint,
    shutdown: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
) -> Result<Ended, ServerError> {
    let Endpoint {
        listener,
        max_connections,
        auth,
        tls,
        affinity,
        settings,
    } = endpoint;
    let max_connections = *max_connections;
    let count = Arc::new(AtomicUsize::new(0));
    // Each connection thread with its own farewell channel: the thread polls it at every
    // wait for its client, and a channel of its own is a lock no other core touches (one
    // shared by all connections cost a contended lock per round trip).
    let mut threads: Vec<(JoinHandle<()>, Stop)> = Vec::new();
    let parameters = Arc::new(handler::server_parameters());
    let pids = Arc::new(RandomPidSecretKeyGenerator::default());
    let parser = Arc::new(SqlParser);
    let registry = Arc::new(Registry::default());
    let watchdog = registry
        .watchdog(Arc::clone(db))
        .map_err(|e| ServerError::Join(format!("cannot start the watchdog thread: {e}")))?;
    let mut next_id = 0u64;
    let ended = loop {
        let (socket, peer) = tokio::select! {
            () = shutdown.as_mut() => break Ended::Shutdown,
            reason = engine_failed(db) => break Ended::EngineFailed(reason),
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
        let session = slot
            .as_ref()
            .map(|_| SessionHandle::new(Arc::clone(db), next_id, Arc::clone(settings)));
        tracing::debug!(%peer, id = next_id, "connection accepted");
        let idle = session.as_ref().map(SessionHandle::idle_timer);
        let conn = Arc::new(Connection {
            session,
            db: Arc::clone(db),
            registry: Arc::clone(&registry),
            pid: std::sync::Mutex::new(None),
            auth: Arc::clone(auth),
            pending: std::sync::Mutex::default(),
            _slot: slot,
            parameters: Arc::clone(&parameters),
            pids: Arc::clone(&pids),
            parser: Arc::clone(&parser),
        });
        let (stop, farewell) = watch::channel(None);
        let tls = tls.clone();
        // A client on this machine only, and one with a session (see `affinity`).
        let follower = affinity
            .as_ref()
            .filter(|_| peer.ip().to_canonical().is_loopback())
            .filter(|_| conn.session.is_some())
            .map(|affinity| {
                let db = Arc::clone(db);
                affinity.follower(move || db.wal_counters().fsyncs)
            });
        let spawned = socket.into_std().and_then(|socket| {
            std::thread::Builder::new()
                .name(format!("quire-conn-{next_id}"))
                .spawn(move || connection_thread(socket, tls, follower, conn, idle, farewell))
        });
        match spawned {
            Ok(thread) => {
                // Reap finished threads so the list does not grow without bound.
                threads.retain(|(h, _)| !h.is_finished());
                threads.push((thread, stop));
            }
            Err(e) => tracing::warn!(%peer, error = %e, "cannot start a connection thread"),
        }
    };
    match &ended {
        Ended::Shutdown => {
            tracing::info!("shutting down: no new connections; rolling back open transactions");
        }
        Ended::EngineFailed(reason) => {
            tracing::error!(reason, "the engine failed: ending every session");
        }
    }
    let farewell = match ended {
        Ended::Shutdown => socket::SHUTDOWN,
        Ended::EngineFailed(_) => socket::ENGINE_FAILED,
    };
    for (_, stop) in &threads {
        // A thread that has ended dropped its receiver: nothing to tell.
        let _ = stop.send(Some(farewell));
    }
    // Statements still running stop at their next interrupt check, so that no session
    // thread keeps the shutdown (or the restart) waiting.
    let stopped_statements = registry.cancel_all(db);
    if stopped_statements > 0 {
        tracing::info!(stopped_statements, "cancelled running statements");
    }
    registry.stop_watchdog();
    tokio::task::spawn_blocking(move || {
        let _ = watchdog.join();
        for (t, _) in threads {
            let _ = t.join();
        }
    })
    .await
    .map_err(|e| ServerError::Join(e.to_string()))?;
    Ok(ended)
}
