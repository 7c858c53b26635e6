//! The message loop of one client connection: pgwire's `process_socket` (TLS negotiation,
//! the authentication timeout, each message through [`process_message`], errors through
//! [`process_error`]), with what quire adds:
//! - Between two commands the loop also waits on the session's [`IdleTimer`] and, when it
//!   expires, sends PostgreSQL's FATAL error (25P03 idle in transaction, 57P05 idle session)
//!   and closes the connection. Closing drops the session's handle, so its open
//!   transaction rolls back and its locks go. Likewise when the server stops serving
//!   ([`Farewell`]): a client waiting between commands gets PostgreSQL's FATAL (57P01 at
//!   shutdown, 57P02 after the engine failed). Each connection has a farewell channel of
//!   its own, so that the wait polls no lock another connection takes.
//! - The four messages of an extended-protocol round trip go straight to the handlers
//!   ([`dispatch`]); Execute of a portal run whole takes a direct path
//!   (`Connection::on_execute`).
//! - Replies are written when the connection is about to wait for its client, not message
//!   by message ([`Coalescing`]), as PostgreSQL's backends flush before they wait for
//!   input: a Bind/Execute/Sync round trip is one `send` and one wakeup of the client, not
//!   four. At most [`WRITE_BUFFER_BYTES`] wait; a larger reply is written as it grows.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use pgwire::api::query::ExtendedQueryHandler;
use pgwire::api::{ClientInfo, PgWireConnectionState};
use pgwire::error::{ErrorInfo, PgWireResult};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::tokio::server::{
    negotiate_tls, process_error, process_message, MaybeTls, PgWireMessageServerCodec,
};
use pgwire::tokio::TlsAcceptor;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_util::codec::{Framed, FramedParts};

use crate::affinity::Follower;
use crate::handler::{Connection, Prepared};
use crate::session::IdleTimer;

/// Most reply bytes held back until the connection waits for its client.
pub(crate) const WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// PostgreSQL's `authentication_timeout` default: a client that has not finished its
/// startup by then is dropped.
const AUTHENTICATION_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the server ends every connection, as the clients are told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Farewell {
    pub sqlstate: &'static str,
    pub message: &'static str,
}

pub(crate) const SHUTDOWN: Farewell = Farewell {
    sqlstate: "57P01",
    message: "terminating connection due to administrator command",
};

pub(crate) const ENGINE_FAILED: Farewell = Farewell {
    sqlstate: "57P02",
    message: "terminating connection because the engine failed (an I/O failure); the server restarts and recovers from the WAL",
};

/// Serves one connection until the client leaves, a FATAL error, its idle timer expires or
/// `stop` names a farewell. `idle` is `None` for a connection without a session (refused:
/// too many clients); `follower` moves this thread beside its client's CPU
/// ([`crate::affinity`]), for a connection without TLS.
pub(crate) async fn serve(
    tcp: TcpStream,
    follower: Option<Follower>,
    tls: Option<TlsAcceptor>,
    conn: Arc<Connection>,
    idle: Option<Arc<IdleTimer>>,
    stop: watch::Receiver<Option<Farewell>>,
) -> io::Result<()> {
    let startup_timeout = tokio::time::sleep(AUTHENTICATION_TIMEOUT);
    tokio::pin!(startup_timeout);
    let socket = tokio::select! {
        () = &mut startup_timeout => return Ok(()),
        socket = negotiate_tls::<Prepared>(tcp, tls) => socket?,
    };
    // A direct TLS handshake without a certificate configured: nothing to talk to.
    let Some(socket) = socket else {
        return Ok(());
    };
    let idle = idle.unwrap_or_default();
    let parts = socket.into_parts();
    match parts.io {
        MaybeTls::Plain(tcp) => {
            let mut socket = reframed(Coalescing::new(tcp, follower), parts.codec, parts.read_buf);
            let served = messages(&mut socket, &conn, &idle, stop, startup_timeout).await;
            // What the last messages left in the buffer: a FATAL, a farewell.
            if let Err(e) = socket.get_mut().drain().await {
                tracing::debug!(error = %e, "the client left before the last reply");
            }
            served
        }
        io => {
            let mut socket = reframed(io, parts.codec, parts.read_buf);
            messages(&mut socket, &conn, &idle, stop, startup_timeout).await
        }
    }
}

/// The connection's frames over `io`, keeping what was read past the TLS negotiation.
fn reframed<S: AsyncRead + AsyncWrite>(
    io: S,
    codec: PgWireMessageServerCodec<Prepared>,
    read_buf: bytes::BytesMut,
) -> Framed<S, PgWireMessageServerCodec<Prepared>> {
    let mut parts = FramedParts::new(io, codec);
    parts.read_buf = read_buf;
    Framed::from_parts(parts)
}

async fn messages<S>(
    socket: &mut Framed<S, PgWireMessageServerCodec<Prepared>>,
    conn: &Arc<Connection>,
    idle: &IdleTimer,
    mut stop: watch::Receiver<Option<Farewell>>,
    mut startup_timeout: Pin<&mut tokio::time::Sleep>,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static,
{
    loop {
        let starting = matches!(
            socket.state(),
            PgWireConnectionState::AwaitingStartup
                | PgWireConnectionState::AuthenticationInProgress
        );
        let farewell = *stop.borrow_and_update();
        if let Some(f) = farewell {
            return fatal(socket, f.sqlstate, f.message).await;
        }
        // Biased, the socket first: a message already read (clients send Bind, Describe,
        // Execute and Sync together) is taken without polling the other branches (polling
        // `stop` takes its channel's locks); the farewell is still seen at the top of the
        // next turn, and the other branches are polled whenever the socket has nothing.
        let msg = tokio::select! {
            biased;
            msg = socket.next() => msg,
            () = &mut startup_timeout, if starting => None,
            limit = idle.expired(), if !starting => {
                tracing::info!(sqlstate = limit.sqlstate, "{}", limit.message);
                return fatal(socket, limit.sqlstate, limit.message).await;
            }
            _ = stop.changed() => continue,
        };
        let Some(Ok(msg)) = msg else {
            return Ok(());
        };
        // Terminate: the client leaves and waits for the server to close the socket.
        if matches!(msg, PgWireFrontendMessage::Terminate(_)) {
            return Ok(());
        }
        let extended_query = match socket.state() {
            PgWireConnectionState::CopyInProgress(extended) => extended,
            _ => msg.is_extended_query(),
        };
        let cancel_request = matches!(msg, PgWireFrontendMessage::CancelRequest(_));
        let processed = dispatch(msg, socket, conn).await;
        if let Err(e) = processed {
            let fatal = e.is_fatal();
            process_error(socket, e, extended_query).await?;
            if fatal {
                return Ok(());
            }
        }
        if cancel_request {
            return Ok(());
        }
    }
}

/// Hands one message to its handler. The four messages of an extended-protocol round trip
/// (Bind, Describe, Execute, Sync), between two commands, go to the connection's handlers
/// directly, as pgwire's `process_message` would send them, without the five handle
/// clones it takes per message; everything else (startup, the states after an error or
/// during COPY, the simple protocol) is pgwire's.
async fn dispatch<S>(
    msg: PgWireFrontendMessage,
    socket: &mut Framed<S, PgWireMessageServerCodec<Prepared>>,
    conn: &Arc<Connection>,
) -> PgWireResult<()>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static,
{
    let direct = matches!(socket.state(), PgWireConnectionState::ReadyForQuery);
    match msg {
        PgWireFrontendMessage::Bind(bind) if direct => conn.on_bind(socket, bind).await,
        PgWireFrontendMessage::Describe(d) if direct => conn.on_describe(socket, d).await,
        PgWireFrontendMessage::Execute(e) if direct => conn.on_execute(socket, e).await,
        PgWireFrontendMessage::Sync(sync) if direct => conn.on_sync(socket, sync).await,
        msg => {
            let c = || Arc::clone(conn);
            process_message(msg, socket, c(), c(), c(), c(), c()).await
        }
    }
}

/// A socket whose writes wait in a buffer until the connection is about to wait for its
/// client: a read that finds nothing to read writes the buffer first. A flush alone writes
/// nothing (the read that follows it will); a shutdown writes everything first.
///
/// Once the replies are out, the read first asks the socket itself (a non-blocking `recv`)
/// and only then the runtime, as PostgreSQL's backend tries `recv` before it waits on its
/// latch. On a busy machine the client often runs as soon as the reply wakes it, and its
/// next message is there before this thread would sleep; through the runtime alone, every
/// message cost an `epoll_wait` and the runtime's park and wake, because tokio forgets a
/// socket's readiness after a short read. A read that finds nothing costs one `recv`
/// (EAGAIN); the runtime then waits as before.
///
/// Before it waits, the connection's [`Follower`], if any, takes its turn.
pub(crate) struct Coalescing<T> {
    io: T,
    follower: Option<Follower>,
    out: Vec<u8>,
    /// Bytes of `out` already written.
    written: usize,
}

impl<T: AsyncWrite + Unpin> Coalescing<T> {
    fn new(io: T, follower: Option<Follower>) -> Self {
        Coalescing {
            io,
            follower,
            out: Vec::new(),
            written: 0,
        }
    }

    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.out.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.out[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.out.clear();
        self.written = 0;
        Pin::new(&mut self.io).poll_flush(cx)
    }

    /// Writes everything buffered.
    async fn drain(&mut self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.poll_drain(cx)).await
    }
}

/// The most [`Coalescing`] reads at once without the runtime.
const READ_NOW_BYTES: usize = 4096;

/// A socket that can be read without the runtime (see [`Coalescing`]).
pub(crate) trait ReadNow {
    /// Reads what has arrived, without waiting: `None` if nothing has.
    fn read_now(&self, buf: &mut [u8]) -> io::Result<Option<usize>>;

    /// The CPU that last received for this socket (`SO_INCOMING_CPU`), if known.
    fn incoming_cpu(&self) -> Option<usize>;
}

impl ReadNow for TcpStream {
    fn read_now(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // The socket is non-blocking (the runtime's): `recv` returns at once.
        let socket = socket2::SockRef::from(self);
        // Bounded: retried only when a signal interrupted it.
        loop {
            match std::io::Read::read(&mut &*socket, buf) {
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn incoming_cpu(&self) -> Option<usize> {
        socket2::SockRef::from(self).cpu_affinity().ok()
    }
}

impl<T: AsyncRead + AsyncWrite + ReadNow + Unpin> AsyncRead for Coalescing<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.out.is_empty() && buf.remaining() > 0 {
            // About to wait for the client: it must have every reply first.
            ready!(this.poll_drain(cx))?;
            if let Some(follower) = &mut this.follower {
                follower.turn(|| this.io.incoming_cpu());
            }
            // Only this much of the buffer is zeroed for the read (the runtime's reads need
            // no zeroing; a safe read does): a message between two replies is small, and a
            // longer one is read on by the next call.
            let len = buf.remaining().min(READ_NOW_BYTES);
            if let Some(n) = this.io.read_now(buf.initialize_unfilled_to(len))? {
                buf.advance(n);
                return Poll::Ready(Ok(()));
            }
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalescing<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.out.len() >= WRITE_BUFFER_BYTES {
            ready!(this.poll_drain(cx))?;
        }
        this.out.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Deferred to the read that waits next (see the type's rule).
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

/// Sends a FATAL error; the caller then closes the connection.
async fn fatal<S>(socket: &mut S, sqlstate: &str, message: &str) -> io::Result<()>
where
    S: futures::Sink<PgWireBackendMessage> + Unpin,
    io::Error: From<S::Error>,
{
    let info = ErrorInfo::new("FATAL".into(), sqlstate.into(), message.into());
    socket
        .send(PgWireBackendMessage::ErrorResponse(info.into()))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A connected pair: the server's end wrapped as the connection loop wraps it.
    async fn pair() -> (Coalescing<TcpStream>, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (Coalescing::new(server, None), client)
    }

    /// Replies wait for the next read; the message read after them arrives whole and in
    /// order, whether it was there before the read (taken by the read without the runtime)
    /// or came after (through the runtime); a closed client reads as the end.
    #[tokio::test]
    async fn replies_go_out_before_a_read_and_the_next_message_arrives_whole() {
        for sent_before_the_read in [true, false] {
            let (mut server, mut client) = pair().await;
            server.write_all(b"reply").await.unwrap();
            server.flush().await.unwrap(); // deferred: nothing written yet
            if sent_before_the_read {
                client.write_all(b"next").await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let client_side = tokio::spawn(async move {
                let mut reply = [0u8; 5];
                client.read_exact(&mut reply).await.unwrap();
                assert_eq!(&reply, b"reply");
                if !sent_before_the_read {
                    client.write_all(b"next").await.unwrap();
                }
                client.shutdown().await.unwrap();
                drop(client);
            });
            let mut got = Vec::new();
            // Bounded by the client's close.
            loop {
                let mut buf = [0u8; 16];
                let n = server.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, b"next", "sent before the read: {sent_before_the_read}");
            client_side.await.unwrap();
        }
    }
}
