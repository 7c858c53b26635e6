//! # quire-server
//!
//! `quire serve`: PostgreSQL's wire protocol (v3, quire's own codec: [`protocol`]) in front
//! of the SQL layer (DESIGN.md layer 12). psql, drivers and `tokio-postgres` connect
//! unchanged.
//!
//! ## Layers, bottom to top
//!
//! A module may use the modules listed before it, never one after it (the engine's
//! `tests/layering.rs` checks this list against every `crate::` path here).
//!
//! 0. Leaves: [`hba`] (`pg_hba.conf`), `affinity` (a loopback session's thread beside its
//!    client's CPU), `watchdog` (`statement_timeout`).
//! 1. [`protocol`]: the messages as bytes, strict to their declared lengths (fuzzed).
//! 2. `scram`: the server's side of SCRAM-SHA-256; `wire`: values in text and binary
//!    format; `fuzzing`: the entry points of the fuzz targets.
//! 3. `transport`: a session's socket on its own thread (poll, latch, buffers).
//! 4. `conn`: the protocol after authentication, on the session's thread.
//! 5. `startup`: TLS negotiation, the startup packet, cancel requests and authentication,
//!    on the shared async runtime.
//! 6. `session`: a session's thread, from an authenticated client.
//!
//! This file: the server (settings, accept loop, limits, shutdown, restart).
//!
//! ## Rules
//!
//! - The shared async runtime only accepts connections, runs their startup up to an
//!   authenticated role, and watches the engine's health; it never runs engine or SQL work
//!   (role lookups and password checks go to the blocking pool). A connection costs no
//!   thread until it has authenticated; then it gets an OS thread of its own that owns its
//!   `quire_sql::Session` and its socket ([`session`], [`conn`]): a session waiting for a
//!   row lock blocks only its own thread. Opening and closing the database run on the
//!   blocking pool.
//! - Limits on what a client can take: `max_connections` sessions, the last
//!   `superuser_reserved_connections` of them for superusers (53300); at most
//!   `max_startup_connections` connections before authentication, the oldest dropped first
//!   when a new one comes (so a flood of idle sockets never locks out a real client), each
//!   for at most `authentication_timeout`; `max_message_size` bytes in one message (1 GB,
//!   PostgreSQL's limit, at most). The sockets these allow fit in the file descriptors the
//!   engine leaves free (its own are reserved apart): a client flood never makes an engine
//!   open or fsync fail.
//! - A connection from a loopback address moves its thread to its client's CPU, at most
//!   ⌈such connections / CPUs⌉ to one CPU (`client_cpu_affinity`, on by default;
//!   [`affinity`]'s rules). Placement only: it never fails a connection.
//! - Errors reach the client as ErrorResponse with the SQLSTATE of the engine or the SQL
//!   layer; protocol and startup errors use PostgreSQL's codes. A message that cannot be
//!   framed ends its connection with FATAL 08P01 after the error is sent; nothing a client
//!   sends ends any other connection or the server.
//! - A statement is stopped only through its session's `quire_sql::Interrupt`: a
//!   CancelRequest naming the session's process id and secret key (random, compared in
//!   constant time), `pg_cancel_backend`, or the watchdog thread when `statement_timeout`
//!   passes. Never by dropping a thread.
//! - Authentication follows `pg_hba.conf` ([`hba`]'s rules: the first matching line decides;
//!   no match is FATAL 28000). Methods: `trust`, `scram-sha-256`, `password`, `reject`. Roles
//!   and their SCRAM verifiers live in the SQL layer's roles table (`quire_sql`'s `roles`);
//!   the server never sees or keeps a stored password, only verifiers ([`startup`]'s rules).
//! - A new data directory gets a `pg_hba.conf` that trusts 127.0.0.1/32 and ::1/128 only,
//!   and has the `postgres` superuser (no password). The server refuses to start listening
//!   on a non-loopback address while a `trust` line covers a non-loopback address (the error
//!   names the file and line); any other rules may face the network. Never weaken this: a
//!   `trust` line reaching beyond loopback would give anyone on the network a superuser.
//! - TLS (`ssl = on`): `ssl_cert_file` and `ssl_key_file` (PEM, relative to the data
//!   directory) are loaded at start, and a bad or missing one, or a key file that others
//!   can read, refuses the start; clients then may negotiate TLS (SSLRequest or direct).
//!   `hostssl` lines match only TLS connections, and refuse the start while `ssl` is off.
//!   SCRAM is offered without channel binding (no SCRAM-SHA-256-PLUS).
//! - Shutdown (the future given to [`Server::run`] completes, e.g. on SIGINT/SIGTERM): stop
//!   accepting, drop the connections still starting, cancel running statements, end every
//!   session (FATAL 57P01), each rolling back its open transaction; wait for the session
//!   threads, then `Database::close()` (the shutdown checkpoint).
//! - The engine's failed state (PostgreSQL's PANIC) is PostgreSQL's `restart_after_crash`:
//!   the server notices it within [`HEALTH_CHECK_PERIOD`], ends every session (FATAL
//!   57P02), waits for the session threads, drops the failed database without a checkpoint
//!   and opens the directory again, which recovers from the WAL; meanwhile new connections
//!   wait in the listen backlog.
#![deny(unsafe_code)]

mod affinity;
mod conn;
#[doc(hidden)]
pub mod fuzzing;
pub mod hba;
pub mod protocol;
mod scram;
mod session;
mod startup;
mod transport;
mod watchdog;
mod wire;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use futures::future::AbortHandle;
use quire_engine::vfs::{OsVfs, Vfs};
use quire_engine::{Config, Database, HealthState};
use quire_sql::Backends;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::hba::Hba;
use crate::startup::Gatekeeper;
use crate::transport::Wakeup;
use crate::watchdog::Watchdog;

/// PostgreSQL's default port is 5432; quire's is one above, so both can run side by side.
pub const DEFAULT_PORT: u16 = 5433;

/// The server's settings (PostgreSQL's names: `listen_addresses`, `port`, `hba_file`, `ssl`,
/// `ssl_cert_file`, `ssl_key_file`, `authentication_timeout`,
/// `superuser_reserved_connections`; quire's `max_startup_connections` and
/// `max_message_size`; the engine's in `engine`, `max_connections` among them).
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
    /// `authentication_timeout`: how long a connection may take to authenticate
    /// (PostgreSQL's default, 1 minute; 1 s to 600 s).
    pub authentication_timeout: Duration,
    /// `max_startup_connections`: most connections still authenticating; a new one drops
    /// the oldest. quire's (PostgreSQL forks a process for each and has no such bound).
    pub max_startup_connections: usize,
    /// `superuser_reserved_connections`: the last of `max_connections` slots, kept for
    /// superusers (PostgreSQL's default, 3).
    pub superuser_reserved_connections: usize,
    /// `max_message_size`: the longest message a client may send, in bytes (PostgreSQL's
    /// 1 GB limit, which is also the most allowed).
    pub max_message_size: usize,
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
            authentication_timeout: Duration::from_secs(60),
            max_startup_connections: 1000,
            superuser_reserved_connections: 3,
            max_message_size: protocol::limits::LARGE_MESSAGE_BYTES,
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
            (
                "authentication_timeout",
                format!("{}s", self.authentication_timeout.as_secs()),
            ),
            (
                "max_startup_connections",
                self.max_startup_connections.to_string(),
            ),
            (
                "superuser_reserved_connections",
                self.superuser_reserved_connections.to_string(),
            ),
            ("max_message_size", self.max_message_size.to_string()),
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

    /// The limits checked before the server starts: PostgreSQL's ranges.
    fn check_limits(&self) -> Result<(), ServerError> {
        let bad = |what: String| Err(ServerError::Setting(what));
        let timeout = self.authentication_timeout.as_secs();
        if !(1..=600).contains(&timeout) {
            return bad(format!(
                "authentication_timeout = {timeout}s is outside the valid range (1s .. 600s)"
            ));
        }
        if self.superuser_reserved_connections >= self.engine.max_connections {
            return bad(format!(
                "superuser_reserved_connections ({}) must be less than max_connections ({})",
                self.superuser_reserved_connections, self.engine.max_connections
            ));
        }
        if self.max_startup_connections == 0 {
            return bad("max_startup_connections must be at least 1".into());
        }
        if !(1024..=protocol::limits::LARGE_MESSAGE_BYTES).contains(&self.max_message_size) {
            return bad(format!(
                "max_message_size = {} is outside the valid range (1024 .. {})",
                self.max_message_size,
                protocol::limits::LARGE_MESSAGE_BYTES
            ));
        }
        Ok(())
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
    #[error("{0}")]
    Setting(String),
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
    endpoint: Endpoint,
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
const HEALTH_CHECK_PERIOD: Duration = Duration::from_millis(50);

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
        config.check_limits()?;
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
        check_hba(&config, ip, &hba)?;
        let tls = if config.ssl {
            Some(tls_acceptor(
                &config.in_data_dir(&config.ssl_cert_file),
                &config.in_data_dir(&config.ssl_key_file),
            )?)
        } else {
            None
        };
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
        let port = listener.local_addr().map_or(config.port, |a| a.port());
        let limits = Limits::of(&config, db.file_descriptors().for_clients());
        tracing::info!(
            data_dir = %config.data_dir.display(),
            addr = %listener.local_addr().unwrap_or(addr),
            max_connections = limits.max_connections,
            max_startup_connections = limits.max_startup,
            ssl = tls.is_some(),
            "quire is ready to accept connections"
        );
        let endpoint = Endpoint {
            listener,
            limits,
            hba,
            mock_secret: mock_secret()?,
            tls,
            affinity: config
                .client_cpu_affinity
                .then(affinity::Affinity::new)
                .flatten(),
            settings: config.shown(port, &hba_path),
        };
        Ok(Server {
            db: Arc::new(db),
            endpoint,
            reopen,
        })
    }

    /// The address it listens on (the port chosen when `port` was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.endpoint
            .listener
            .local_addr()
            .expect("a bound listener has a local address")
    }

    /// Serves connections until `shutdown` completes, then shuts down cleanly. When the
    /// engine enters its failed state, every session ends and the database is opened again,
    /// which recovers from the WAL (PostgreSQL's `restart_after_crash`); then serving goes on.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServerError> {
        let Server {
            mut db,
            endpoint,
            reopen,
        } = self;
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

/// The hba rules the server refuses to start with.
fn check_hba(config: &ServerConfig, ip: IpAddr, hba: &Hba) -> Result<(), ServerError> {
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
    Ok(())
}

/// The secret behind the mock salts of unknown roles ([`startup`]'s rules).
fn mock_secret() -> Result<[u8; 32], ServerError> {
    use ring::rand::SecureRandom;
    let mut secret = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut secret)
        .map_err(|_| ServerError::Random)?;
    Ok(secret)
}

/// The bounds on what clients may hold.
#[derive(Clone, Copy, Debug)]
struct Limits {
    max_connections: usize,
    superuser_reserved: usize,
    max_startup: usize,
    authentication_timeout: Duration,
    max_message_bytes: usize,
}

/// Descriptors kept apart for the server's own use (the runtime's epoll and wakers, the
/// watchdog, logging, a blocking pool's), beyond what the engine reserves.
const SERVER_RESERVED_FDS: usize = 64;

impl Limits {
    /// The limits of `config` on a database whose engine left `for_clients` descriptors
    /// (`quire_engine::vfs::FdBudget::for_clients`).
    fn of(config: &ServerConfig, for_clients: u64) -> Limits {
        let max_connections = config.engine.max_connections;
        // Each session holds its socket and its latch; what is left of the descriptors
        // the engine does not take bounds the connections still starting.
        let for_sockets = usize::try_from(for_clients)
            .unwrap_or(usize::MAX)
            .saturating_sub(SERVER_RESERVED_FDS + 2 * max_connections);
        let max_startup = config.max_startup_connections.min(for_sockets.max(1));
        if max_startup < config.max_startup_connections {
            tracing::warn!(
                max_startup,
                "max_startup_connections lowered to what the open-file limit leaves"
            );
        }
        Limits {
            max_connections,
            superuser_reserved: config.superuser_reserved_connections,
            max_startup,
            authentication_timeout: config.authentication_timeout,
            max_message_bytes: config.max_message_size,
        }
    }
}

/// What [`serve`] accepts connections with.
struct Endpoint {
    listener: TcpListener,
    limits: Limits,
    hba: Hba,
    mock_secret: [u8; 32],
    tls: Option<TlsAcceptor>,
    affinity: Option<Arc<affinity::Affinity>>,
    settings: Arc<[(&'static str, String)]>,
}

/// The TLS acceptor of a PEM certificate chain and private key (rustls with ring). A key
/// file that others may read refuses the start, as PostgreSQL's `check_ssl_key_file_permissions`.
fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, ServerError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use tokio_rustls::rustls;
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
    check_key_permissions(key)?;
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

/// PostgreSQL's rule for the private key file: owned by the server's user with no access
/// for group or others (0600 or stricter), or owned by root with group read at most (0640).
fn check_key_permissions(key: &Path) -> Result<(), ServerError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(key).map_err(|e| {
        ServerError::Tls(format!(
            "could not access private key file \"{}\": {e}",
            key.display()
        ))
    })?;
    if !meta.is_file() {
        return Err(ServerError::Tls(format!(
            "private key file \"{}\" is not a regular file",
            key.display()
        )));
    }
    let mode = meta.mode() & 0o777;
    let allowed = if meta.uid() == 0 { 0o640 } else { 0o600 };
    if mode & !allowed != 0 {
        return Err(ServerError::Tls(format!(
            "private key file \"{}\" has group or world access (mode {mode:04o}); it must be u=rw (0600) or less if owned by the server's user, or u=rw,g=r (0640) or less if owned by root",
            key.display()
        )));
    }
    Ok(())
}

/// The database once every session has let go of it.
fn take_last(db: Arc<Database>) -> Result<Database, ServerError> {
    Arc::try_unwrap(db).map_err(|_| {
        ServerError::Join("the database is still in use after the sessions ended".into())
    })
}

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

/// A session's slot under `max_connections`, released when the session ends.
pub(crate) struct Slot(Arc<AtomicUsize>);

/// The count of sessions against `max_connections`.
pub(crate) struct Slots {
    count: Arc<AtomicUsize>,
    max: usize,
    reserved: usize,
}

impl Slots {
    /// A slot for a session of a role that is (or is not) a superuser: PostgreSQL's 53300
    /// when none is left for it.
    pub(crate) fn acquire(&self, superuser: bool) -> Result<Slot, &'static str> {
        let limit = if superuser {
            self.max
        } else {
            self.max - self.reserved
        };
        let taken = self
            .count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            });
        match taken {
            Ok(_) => Ok(Slot(Arc::clone(&self.count))),
            Err(n) if n < self.max => Err(
                "remaining connection slots are reserved for roles with the SUPERUSER attribute",
            ),
            Err(_) => Err("sorry, too many clients already"),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The connections still starting, oldest first, bounded: a new one beyond the bound drops
/// the oldest (its startup is aborted, which closes its socket).
#[derive(Default)]
struct Starting {
    tasks: Mutex<BTreeMap<u64, AbortHandle>>,
}

impl Starting {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, AbortHandle>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes room for one more under `max`: drops the oldest while full. Returns how many
    /// were dropped.
    fn make_room(&self, max: usize) -> usize {
        let mut tasks = self.lock();
        let mut dropped = 0;
        while tasks.len() >= max {
            let Some((_, oldest)) = tasks.pop_first() else {
                break;
            };
            oldest.abort();
            dropped += 1;
        }
        dropped
    }

    fn add(&self, id: u64, task: AbortHandle) {
        self.lock().insert(id, task);
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    fn abort_all(&self) {
        for (_, t) in std::mem::take(&mut *self.lock()) {
            t.abort();
        }
    }
}

/// Removes a starting connection from [`Starting`] however its task ends.
struct StartingGuard {
    starting: Arc<Starting>,
    id: u64,
}

impl Drop for StartingGuard {
    fn drop(&mut self) {
        self.starting.remove(self.id);
    }
}

/// The session threads of one serving period, with what wakes each; `closed` once the
/// period ends (no thread may start after that).
#[derive(Default)]
struct Threads {
    list: Vec<(JoinHandle<()>, Arc<Wakeup>)>,
    closed: bool,
}

/// What every connection of one serving period shares.
struct Shared {
    gate: Gatekeeper,
    slots: Slots,
    starting: Arc<Starting>,
    threads: Mutex<Threads>,
    watchdog: Arc<Watchdog>,
    affinity: Option<Arc<affinity::Affinity>>,
    settings: Arc<[(&'static str, String)]>,
    limits: Limits,
}

/// Serves connections on `db` until `shutdown` completes or the engine fails; then ends
/// every connection and waits for every session thread, so that `db` is no longer shared.
async fn serve(
    db: &Arc<Database>,
    endpoint: &Endpoint,
    shutdown: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
) -> Result<Ended, ServerError> {
    let backends = Arc::new(Backends::default());
    let watchdog = Arc::new(Watchdog::default());
    let watchdog_thread = watchdog
        .start(Arc::clone(db), Arc::clone(&backends))
        .map_err(|e| ServerError::Join(format!("cannot start the watchdog thread: {e}")))?;
    let shared = Arc::new(Shared {
        gate: Gatekeeper {
            db: Arc::clone(db),
            hba: endpoint.hba.clone(),
            mock_secret: endpoint.mock_secret,
            tls: endpoint.tls.clone(),
            backends: Arc::clone(&backends),
        },
        slots: Slots {
            count: Arc::new(AtomicUsize::new(0)),
            max: endpoint.limits.max_connections,
            reserved: endpoint.limits.superuser_reserved,
        },
        starting: Arc::default(),
        threads: Mutex::default(),
        watchdog: Arc::clone(&watchdog),
        affinity: endpoint.affinity.clone(),
        settings: Arc::clone(&endpoint.settings),
        limits: endpoint.limits,
    });
    let mut next_id = 0u64;
    let ended = loop {
        let (socket, peer) = tokio::select! {
            () = shutdown.as_mut() => break Ended::Shutdown,
            reason = engine_failed(db) => break Ended::EngineFailed(reason),
            accepted = endpoint.listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: log, pause, go on.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        next_id += 1;
        accept(&shared, socket, peer, next_id);
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
        Ended::Shutdown => transport::SHUTDOWN,
        Ended::EngineFailed(_) => transport::ENGINE_FAILED,
    };
    shared.starting.abort_all();
    let threads = {
        let mut t = shared
            .threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        t.closed = true;
        std::mem::take(&mut t.list)
    };
    for (_, wakeup) in &threads {
        wakeup.end(farewell);
    }
    // Statements still running stop at their next interrupt check, so that no session
    // thread keeps the shutdown (or the restart) waiting.
    let stopped = backends
        .all()
        .iter()
        .filter(|b| b.interrupt().cancel(db))
        .count();
    if stopped > 0 {
        tracing::info!(stopped, "cancelled running statements");
    }
    watchdog.stop();
    // The startups just aborted let go of the database as the runtime drops them.
    for _ in 0..MAX_STARTUP_DRAIN_WAITS {
        if Arc::strong_count(&shared) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(shared);
    tokio::task::spawn_blocking(move || {
        let _ = watchdog_thread.join();
        for (t, _) in threads {
            let _ = t.join();
        }
    })
    .await
    .map_err(|e| ServerError::Join(e.to_string()))?;
    Ok(ended)
}

/// A new connection: its startup as a task of the runtime, bounded in number and time;
/// once authenticated, a session thread.
fn accept(shared: &Arc<Shared>, socket: tokio::net::TcpStream, peer: SocketAddr, id: u64) {
    let dropped = shared.starting.make_room(shared.limits.max_startup);
    if dropped > 0 {
        tracing::debug!(dropped, "dropped the oldest connections still starting");
    }
    // Replies go out whole (the session writes one per round trip), so Nagle's algorithm
    // only holds them back; PostgreSQL sets TCP_NODELAY too.
    if let Err(e) = socket.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
    }
    let s = Arc::clone(shared);
    let guard = StartingGuard {
        starting: Arc::clone(&shared.starting),
        id,
    };
    let (startup, abort) = futures::future::abortable(async move {
        let started = tokio::time::timeout(
            s.limits.authentication_timeout,
            startup::run(&s.gate, &s.slots, socket, peer),
        )
        .await;
        drop(guard);
        let Ok(Some((auth, slot))) = started else {
            return;
        };
        let follower = s
            .affinity
            .as_ref()
            .filter(|_| session::follows(&peer))
            .map(|affinity| {
                let db = Arc::clone(&s.gate.db);
                affinity.follower(move || db.wal_counters().fsyncs)
            });
        let start = session::SessionStart {
            auth,
            db: Arc::clone(&s.gate.db),
            backends: Arc::clone(&s.gate.backends),
            watchdog: Arc::clone(&s.watchdog),
            follower,
            settings: Arc::clone(&s.settings),
            max_message_bytes: s.limits.max_message_bytes,
            slot,
        };
        let mut threads = s.threads.lock().unwrap_or_else(PoisonError::into_inner);
        if threads.closed {
            return;
        }
        match session::spawn(start, id) {
            Ok(thread) => {
                // Reap finished threads so the list does not grow without bound.
                threads.list.retain(|(h, _)| !h.is_finished());
                threads.list.push(thread);
            }
            Err(e) => tracing::warn!(%peer, error = %e, "cannot start a session thread"),
        }
    });
    // Registered before it runs, so that its end always finds its entry.
    shared.starting.add(id, abort);
    tokio::spawn(startup);
}

/// How long (in 10 ms waits) the end of a serving period waits for aborted startups to let
/// go of the database.
const MAX_STARTUP_DRAIN_WAITS: usize = 500;
