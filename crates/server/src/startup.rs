//! A connection before it is authenticated, on the shared async runtime: no thread of its
//! own until it has proved who it is. TLS negotiation (SSLRequest, GSSENCRequest, a direct
//! TLS handshake), the startup packet, cancel requests, and authentication by the first
//! matching `pg_hba.conf` rule (trust, SCRAM-SHA-256, password, reject). What comes out is
//! an authenticated client for a session thread ([`crate::conn`]), or nothing.
//!
//! ## Rules
//! - Every read is bounded before it happens: the startup packet by PostgreSQL's 10,000
//!   bytes, a password or SASL message by its 65,535 ([`limits`]); the caller bounds the
//!   whole phase by `authentication_timeout` and the number of such connections by
//!   `max_startup_connections`.
//! - Bytes that arrive behind an SSLRequest or GSSENCRequest, before the answer could have
//!   been read, are refused (FATAL 08P01), as PostgreSQL 14.1+ does: they were not
//!   encrypted and may have been injected (CVE-2021-23214).
//! - Engine work (the role lookup, a password's key derivation) runs on the blocking pool,
//!   never on the runtime's threads.
//! - Authentication answers as PostgreSQL's does, so that nothing tells whether a role
//!   exists: under `scram-sha-256` or `password`, an unknown role, a role without a
//!   password and a wrong password all end in FATAL 28P01 after a full exchange (an unknown
//!   role gets a mock verifier whose salt is stable per name, as PostgreSQL's
//!   `scram_mock_salt`). Only once the password is right does a role without LOGIN hear
//!   28000.
//! - A cancel request is answered with nothing (the client learns nothing, as in
//!   PostgreSQL); it stops the statement of the session whose process id and secret key it
//!   names.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use quire_engine::{Database, SqlState};
use quire_sql::{Backends, Role, ScramVerifier};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::hba::{Hba, Method};
use crate::protocol::frontend::{self, Startup};
use crate::protocol::{backend, limits, ProtocolError};
use crate::scram;
use crate::transport::Stream;
use crate::{Slot, Slots};

/// What every connection's startup shares.
pub(crate) struct Gatekeeper {
    pub db: Arc<Database>,
    pub hba: Hba,
    /// The secret behind the mock salts of unknown roles. Per process: across a restart an
    /// unknown role's salt changes while a real one's does not (PostgreSQL keeps its
    /// `mock_auth_nonce` in pg_control for that reason).
    pub mock_secret: [u8; 32],
    pub tls: Option<TlsAcceptor>,
    pub backends: Arc<Backends>,
}

/// A client that proved who it is.
pub(crate) struct Authenticated {
    pub stream: Stream,
    pub role: Role,
    /// The startup packet's parameters, in order (`user`, `database`, `options`, ...).
    pub params: Vec<(String, String)>,
    /// Bytes the client sent past its last startup message.
    pub leftover: Vec<u8>,
    pub peer: SocketAddr,
}

/// The mechanism quire offers (no channel binding: SCRAM-SHA-256-PLUS is not offered).
const SCRAM_SHA_256: &str = "SCRAM-SHA-256";

/// TLS's first byte (a handshake record): a client that starts TLS at once (PostgreSQL 17's
/// `sslnegotiation=direct`) rather than with an SSLRequest.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// A startup error: what the client is told (FATAL), if anything.
struct Refusal {
    sqlstate: SqlState,
    message: String,
}

impl From<ProtocolError> for Refusal {
    fn from(e: ProtocolError) -> Self {
        Refusal {
            sqlstate: e.sqlstate,
            message: e.message,
        }
    }
}

fn refusal(sqlstate: SqlState, message: impl Into<String>) -> Refusal {
    Refusal {
        sqlstate,
        message: message.into(),
    }
}

/// Why the startup ended without a client to serve.
enum Ended {
    /// Tell the client this, then close.
    Refused(Refusal),
    /// Close without a word (the client left, a cancel request was handled).
    Quietly,
}

impl From<io::Error> for Ended {
    fn from(e: io::Error) -> Self {
        tracing::debug!(error = %e, "a connection ended during its startup");
        Ended::Quietly
    }
}

impl From<Refusal> for Ended {
    fn from(r: Refusal) -> Self {
        Ended::Refused(r)
    }
}

impl From<ProtocolError> for Ended {
    fn from(e: ProtocolError) -> Self {
        Ended::Refused(e.into())
    }
}

/// The socket before and after TLS (`Moving` only while it moves into TLS).
enum Io {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    Moving,
}

fn moving() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the socket is moving into TLS")
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(t) => Pin::new(t).poll_read(cx, buf),
            Io::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
            Io::Moving => Poll::Ready(Err(moving())),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(t) => Pin::new(t).poll_write(cx, buf),
            Io::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
            Io::Moving => Poll::Ready(Err(moving())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(t) => Pin::new(t).poll_flush(cx),
            Io::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
            Io::Moving => Poll::Ready(Err(moving())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(t) => Pin::new(t).poll_shutdown(cx),
            Io::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
            Io::Moving => Poll::Ready(Ok(())),
        }
    }
}

/// The connection during startup: its socket and what was read and not yet used.
struct Client {
    io: Io,
    input: Vec<u8>,
    peer: SocketAddr,
}

impl Client {
    /// Reads until `n` bytes are buffered (bounded by the callers' limits on `n`).
    async fn need(&mut self, n: usize) -> io::Result<()> {
        while self.input.len() < n {
            let mut chunk = vec![0u8; (n - self.input.len()).clamp(512, 16 * 1024)];
            let got = self.io.read(&mut chunk).await?;
            if got == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            self.input.extend_from_slice(&chunk[..got]);
        }
        Ok(())
    }

    /// Takes `n` buffered bytes.
    fn take(&mut self, n: usize) -> Vec<u8> {
        let rest = self.input.split_off(n);
        std::mem::replace(&mut self.input, rest)
    }

    /// A startup-phase packet's body.
    async fn startup_packet(&mut self) -> Result<Startup, Ended> {
        self.need(4).await?;
        let word = [self.input[0], self.input[1], self.input[2], self.input[3]];
        let len = frontend::startup_length(word)?;
        self.need(4 + len).await?;
        let packet = self.take(4 + len);
        Ok(frontend::decode_startup(&packet[4..])?)
    }

    /// A typed message during authentication: only a password message (`p`), at most
    /// PostgreSQL's 65,535 bytes.
    async fn password_message(&mut self) -> Result<Vec<u8>, Ended> {
        self.need(5).await?;
        let tag = self.input[0];
        if tag != b'p' {
            return Err(refusal(
                SqlState::PROTOCOL_VIOLATION,
                format!("expected password response, got message type {tag}"),
            )
            .into());
        }
        let len = i32::from_be_bytes([self.input[1], self.input[2], self.input[3], self.input[4]]);
        let body = usize::try_from(len)
            .ok()
            .and_then(|l| l.checked_sub(4))
            .filter(|&b| b <= limits::MAX_AUTH_MESSAGE_BYTES)
            .ok_or_else(|| refusal(SqlState::PROTOCOL_VIOLATION, "invalid message length"))?;
        self.need(5 + body).await?;
        let mut message = self.take(5 + body);
        Ok(message.split_off(5))
    }

    async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.io.write_all(bytes).await?;
        self.io.flush().await
    }
}

/// Runs a new connection's startup; with its role authenticated, takes it a slot among
/// `slots`. `None` when there is no session to start (refused, cancelled, gone); the
/// refusal was sent.
pub(crate) async fn run(
    gate: &Gatekeeper,
    slots: &Slots,
    tcp: TcpStream,
    peer: SocketAddr,
) -> Option<(Authenticated, Slot)> {
    let mut client = Client {
        io: Io::Plain(tcp),
        input: Vec::new(),
        peer,
    };
    let admitted = match authenticate(gate, &mut client).await {
        Ok((role, params)) => slots
            .acquire(role.superuser)
            .map(|slot| (role, params, slot))
            .map_err(|message| Ended::Refused(refusal(SqlState::TOO_MANY_CONNECTIONS, message))),
        Err(e) => Err(e),
    };
    match admitted {
        Ok((role, params, slot)) => hand_over(client, role, params).map(|a| (a, slot)),
        Err(Ended::Quietly) => None,
        Err(Ended::Refused(r)) => {
            tracing::debug!(%peer, sqlstate = r.sqlstate.code(), message = r.message, "startup refused");
            let mut out = Vec::new();
            backend::error_response(
                &mut out,
                &backend::Notice::new("FATAL", r.sqlstate, &r.message),
            );
            let _ = client.send(&out).await;
            let _ = client.io.shutdown().await;
            None
        }
    }
}

/// The socket as the session thread takes it: non-blocking, TLS state included.
fn hand_over(client: Client, role: Role, params: Vec<(String, String)>) -> Option<Authenticated> {
    let stream = match client.io {
        Io::Plain(t) => Stream::Plain(t.into_std().ok()?),
        Io::Tls(t) => {
            let (tcp, conn) = t.into_inner();
            Stream::Tls(Box::new(conn), tcp.into_std().ok()?)
        }
        Io::Moving => return None,
    };
    Some(Authenticated {
        stream,
        role,
        params,
        leftover: client.input,
        peer: client.peer,
    })
}

/// The startup up to a verified role.
async fn authenticate(
    gate: &Gatekeeper,
    client: &mut Client,
) -> Result<(Role, Vec<(String, String)>), Ended> {
    direct_tls(gate, client).await?;
    let mut negotiated = (false, false); // SSL, GSS
                                         // Bounded: at most one SSLRequest and one GSSENCRequest before the startup packet.
    let (minor, params) = loop {
        match client.startup_packet().await? {
            Startup::SslRequest if !negotiated.0 => {
                negotiated.0 = true;
                negotiate_ssl(gate, client).await?;
            }
            Startup::GssEncRequest if !negotiated.1 => {
                negotiated.1 = true;
                refuse_pipelined(client, "GSSAPI encryption")?;
                client.send(b"N").await?;
            }
            Startup::SslRequest | Startup::GssEncRequest => {
                return Err(refusal(
                    SqlState::PROTOCOL_VIOLATION,
                    "unsupported frontend protocol",
                )
                .into())
            }
            Startup::Cancel { pid, key } => {
                cancel(gate, pid, key).await;
                return Err(Ended::Quietly);
            }
            Startup::Startup { minor, params, .. } => break (minor, params),
        }
    };
    negotiate_version(client, minor, &params).await?;
    let role = log_in(gate, client, &params).await?;
    Ok((role, params))
}

/// A client that starts with TLS's handshake instead of an SSLRequest: TLS at once, when
/// the server has it; else the connection closes.
async fn direct_tls(gate: &Gatekeeper, client: &mut Client) -> Result<(), Ended> {
    let Io::Plain(tcp) = &client.io else {
        return Ok(());
    };
    let mut first = [0u8; 1];
    if tcp.peek(&mut first).await? == 0 || first[0] != TLS_HANDSHAKE_RECORD {
        return Ok(());
    }
    let Some(acceptor) = &gate.tls else {
        return Err(Ended::Quietly);
    };
    start_tls(acceptor, client).await
}

async fn start_tls(acceptor: &TlsAcceptor, client: &mut Client) -> Result<(), Ended> {
    let Io::Plain(tcp) = std::mem::replace(&mut client.io, Io::Moving) else {
        return Err(Ended::Quietly);
    };
    let tls = acceptor.accept(tcp).await?;
    client.io = Io::Tls(Box::new(tls));
    Ok(())
}

/// SSLRequest: `S` and TLS when the server has a certificate, else `N`.
async fn negotiate_ssl(gate: &Gatekeeper, client: &mut Client) -> Result<(), Ended> {
    refuse_pipelined(client, "SSL")?;
    if matches!(client.io, Io::Tls(_)) {
        return Err(refusal(
            SqlState::PROTOCOL_VIOLATION,
            "unsupported frontend protocol",
        )
        .into());
    }
    if let Some(acceptor) = &gate.tls {
        client.send(b"S").await?;
        start_tls(acceptor, client).await
    } else {
        client.send(b"N").await?;
        Ok(())
    }
}

/// Bytes behind an encryption request, sent before its answer: refused.
fn refuse_pipelined(client: &Client, what: &str) -> Result<(), Ended> {
    if client.input.is_empty() {
        return Ok(());
    }
    Err(Refusal {
        sqlstate: SqlState::PROTOCOL_VIOLATION,
        message: format!(
            "received unencrypted data after {} request",
            if what == "SSL" {
                "SSL"
            } else {
                "GSSAPI encryption"
            }
        ),
    }
    .into())
}

/// A cancel request: stops the named session's statement if the key is its own.
async fn cancel(gate: &Gatekeeper, pid: i32, key: Vec<u8>) {
    let db = Arc::clone(&gate.db);
    let backends = Arc::clone(&gate.backends);
    let stopped = tokio::task::spawn_blocking(move || backends.cancel(&db, pid, &key)).await;
    tracing::debug!(pid, stopped = stopped.unwrap_or(false), "cancel request");
}

/// Protocol 3.x with x > 0, or `_pq_.` options: NegotiateProtocolVersion names 3.0 and the
/// options quire does not know (all of them), as PostgreSQL does.
async fn negotiate_version(
    client: &mut Client,
    minor: u16,
    params: &[(String, String)],
) -> Result<(), Ended> {
    let unknown: Vec<&str> = params
        .iter()
        .filter(|(n, _)| n.starts_with("_pq_."))
        .map(|(n, _)| n.as_str())
        .collect();
    if minor == 0 && unknown.is_empty() {
        return Ok(());
    }
    let mut out = Vec::new();
    backend::negotiate_protocol_version(&mut out, 0, &unknown);
    client.send(&out).await?;
    Ok(())
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// The first matching `pg_hba.conf` rule decides how the client proves who it is.
async fn log_in(
    gate: &Gatekeeper,
    client: &mut Client,
    params: &[(String, String)],
) -> Result<Role, Ended> {
    let user = param(params, "user").unwrap_or_default().to_string();
    if user.is_empty() {
        return Err(refusal(
            SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
            "no PostgreSQL user name specified in startup packet",
        )
        .into());
    }
    if let Some(r) = param(params, "replication").filter(|r| !is_false(r)) {
        return Err(refusal(
            SqlState::FEATURE_NOT_SUPPORTED,
            format!("replication connections are not supported yet (replication={r})"),
        )
        .into());
    }
    let database = param(params, "database").unwrap_or(&user).to_string();
    let peer = client.peer.ip().to_canonical();
    let ssl = matches!(client.io, Io::Tls(_));
    let encryption = if ssl {
        "SSL encryption"
    } else {
        "no encryption"
    };
    let Some(rule) = gate.hba.matching(peer, ssl, &user, &database) else {
        return Err(refusal(
            SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
            format!("no pg_hba.conf entry for host \"{peer}\", user \"{user}\", database \"{database}\", {encryption}"),
        )
        .into());
    };
    tracing::debug!(%peer, user, database, line = rule.line, method = ?rule.method, "pg_hba.conf rule");
    let role = match rule.method {
        Method::Reject => {
            return Err(refusal(
                SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
                format!("pg_hba.conf rejects connection for host \"{peer}\", user \"{user}\", database \"{database}\", {encryption}"),
            )
            .into())
        }
        Method::Trust => lookup(gate, &user)
            .await?
            .ok_or_else(|| refusal(SqlState::INVALID_AUTHORIZATION_SPECIFICATION, format!("role \"{user}\" does not exist")))?,
        Method::ScramSha256 => scram_exchange(gate, client, &user).await?,
        Method::Password => password_exchange(gate, client, &user).await?,
    };
    if !role.login {
        return Err(refusal(
            SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
            format!("role \"{}\" is not permitted to log in", role.name),
        )
        .into());
    }
    Ok(role)
}

fn is_false(v: &str) -> bool {
    matches!(
        v.to_ascii_lowercase().as_str(),
        "false" | "off" | "no" | "0"
    )
}

/// The role named `user`, read on the blocking pool.
async fn lookup(gate: &Gatekeeper, user: &str) -> Result<Option<Role>, Ended> {
    let db = Arc::clone(&gate.db);
    let name = user.to_string();
    let found = tokio::task::spawn_blocking(move || quire_sql::lookup_role(&db, &name))
        .await
        .map_err(|e| refusal(SqlState::INTERNAL_ERROR, format!("role lookup failed: {e}")))?;
    found.map_err(|e| Ended::Refused(refusal(e.sqlstate(), e.message().to_string())))
}

fn password_failed(user: &str) -> Ended {
    refusal(
        SqlState::INVALID_PASSWORD,
        format!("password authentication failed for user \"{user}\""),
    )
    .into()
}

/// SCRAM-SHA-256 ([`scram`]): against the role's verifier, or a mock one when there is no
/// role or no SCRAM secret, so that the exchange fails at its end as a wrong password does.
async fn scram_exchange(gate: &Gatekeeper, client: &mut Client, user: &str) -> Result<Role, Ended> {
    let role = lookup(gate, user).await?;
    let verifier = role
        .as_ref()
        .and_then(|r| r.password.as_deref())
        .and_then(ScramVerifier::parse);
    let (role, verifier) = match verifier {
        Some(v) => (role, v),
        None => (None, ScramVerifier::mock(user, &gate.mock_secret)),
    };
    let mut out = Vec::new();
    backend::authentication_sasl(&mut out, &[SCRAM_SHA_256]);
    client.send(&out).await?;
    let initial = client.password_message().await?;
    let (mechanism, data) = frontend::sasl_initial_response(&initial)?;
    if mechanism != SCRAM_SHA_256 {
        return Err(refusal(
            SqlState::PROTOCOL_VIOLATION,
            "client selected an invalid SASL authentication mechanism",
        )
        .into());
    }
    let data = data.ok_or_else(|| {
        refusal(
            SqlState::PROTOCOL_VIOLATION,
            "malformed SCRAM message: empty",
        )
    })?;
    let mut nonce = [0u8; scram::SERVER_NONCE_BYTES];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce)
        .map_err(|_| refusal(SqlState::INTERNAL_ERROR, "could not generate random nonce"))?;
    let (server_first, exchange) = scram::first(verifier, &data, &nonce)?;
    out.clear();
    backend::authentication_sasl_continue(&mut out, server_first.as_bytes());
    client.send(&out).await?;
    let last = client.password_message().await?;
    match exchange.last(&last)? {
        scram::Verdict::Verified(server_final) => {
            // A mock verifier matches no proof; this is the belt to that brace.
            let Some(role) = role else {
                return Err(password_failed(user));
            };
            out.clear();
            backend::authentication_sasl_final(&mut out, server_final.as_bytes());
            client.send(&out).await?;
            Ok(role)
        }
        scram::Verdict::Refused => Err(password_failed(user)),
    }
}

/// The `password` method: the password in clear, checked against the role's verifier on
/// the blocking pool (a key derivation of 4096 rounds).
async fn password_exchange(
    gate: &Gatekeeper,
    client: &mut Client,
    user: &str,
) -> Result<Role, Ended> {
    let role = lookup(gate, user).await?;
    let mut out = Vec::new();
    backend::authentication_cleartext_password(&mut out);
    client.send(&out).await?;
    let body = client.password_message().await?;
    let password = frontend::password(&body)?;
    let verifier = role
        .as_ref()
        .and_then(|r| r.password.as_deref())
        .and_then(ScramVerifier::parse);
    let ok = match verifier {
        Some(v) => tokio::task::spawn_blocking(move || v.matches_password(&password))
            .await
            .unwrap_or(false),
        None => false,
    };
    match role {
        Some(role) if ok => Ok(role),
        _ => Err(password_failed(user)),
    }
}
