//! A session's socket, on the session's own thread: plain or TLS, non-blocking, waited on
//! with `poll` beside a latch that other threads set to wake it (PostgreSQL's
//! WaitEventSet with the backend's latch and socket).
//!
//! ## Rules
//! - Replies wait in [`Transport::out`] until the session is about to wait for its client
//!   ([`Transport::fill`] flushes first), as PostgreSQL's backends flush before they wait
//!   for input: a Bind/Execute/Sync round trip is one `send`. A longer reply (a result
//!   streamed row by row) is written whenever the buffer passes [`WRITE_BUFFER_BYTES`], so
//!   the buffer never holds much more than that.
//! - Before it waits, a read that finds nothing is tried first: on a busy machine the
//!   client's next message is often there already, and a `recv` costs less than a wait.
//! - A wait ends on data, the deadline (an idle timeout) or the latch ([`Wakeup`]): the
//!   server's farewell (shutdown, the engine's failed state) or `pg_terminate_backend`.
//!   A write stuck on a client that does not read also gives up when a farewell is set,
//!   so no session can keep the server from stopping.
//! - Nothing here allocates by what the client declares: reads grow the input buffer by
//!   what arrives.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use quire_engine::SqlState;
use tokio_rustls::rustls::ServerConnection;

use crate::affinity::Follower;

/// Reply bytes held back at most before they are written, waiting or not.
pub(crate) const WRITE_BUFFER_BYTES: usize = 64 * 1024;
/// Bytes read at once when nothing asks for more.
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// Most bytes read at once however much is needed (a large message arrives in such steps).
const MAX_READ_CHUNK_BYTES: usize = 1 << 20;

/// Why the server ends a session, as its client is told (FATAL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Farewell {
    pub sqlstate: SqlState,
    pub message: &'static str,
}

pub(crate) const SHUTDOWN: Farewell = Farewell {
    sqlstate: SqlState::ADMIN_SHUTDOWN,
    message: "terminating connection due to administrator command",
};

pub(crate) const TERMINATED: Farewell = SHUTDOWN;

pub(crate) const ENGINE_FAILED: Farewell = Farewell {
    sqlstate: SqlState::CRASH_SHUTDOWN,
    message: "terminating connection because the engine failed (an I/O failure); the server restarts and recovers from the WAL",
};

/// What wakes a session's thread: a latch (an eventfd) and the farewell it is woken for.
pub(crate) struct Wakeup {
    latch: EventFd,
    farewell: Mutex<Option<Farewell>>,
}

impl Wakeup {
    pub(crate) fn new() -> io::Result<Wakeup> {
        let latch = EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)
            .map_err(io::Error::from)?;
        Ok(Wakeup {
            latch,
            farewell: Mutex::new(None),
        })
    }

    /// Tells the session to end with `farewell` (the first one told wins) and wakes it.
    pub(crate) fn end(&self, farewell: Farewell) {
        self.farewell
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(farewell);
        self.wake();
    }

    /// Wakes the session if it waits.
    pub(crate) fn wake(&self) {
        // A full counter (never: it counts to 2^64) or a closed descriptor: nothing to do.
        let _ = self.latch.write(1);
    }

    pub(crate) fn farewell(&self) -> Option<Farewell> {
        *self.farewell.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn reset(&self) {
        // Non-blocking: EAGAIN when it was not set.
        let _ = self.latch.read();
    }
}

/// The socket, plain or under TLS.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<ServerConnection>, TcpStream),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(t) | Stream::Tls(_, t) => t,
        }
    }
}

/// How a wait for the client ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fill {
    /// More bytes are in the input buffer.
    Data,
    /// The client closed the connection.
    Closed,
    /// The latch was set ([`Wakeup`]).
    Woken,
    /// The deadline passed.
    TimedOut,
}

/// A session's socket with its buffers.
pub(crate) struct Transport {
    stream: Stream,
    wakeup: Arc<Wakeup>,
    follower: Option<Follower>,
    /// The input buffer: `input[start..end]` were read and not taken yet; the rest is room
    /// to read into. It is zeroed once when it grows, never per read.
    input: Vec<u8>,
    start: usize,
    end: usize,
    /// Replies not written yet.
    pub(crate) out: Vec<u8>,
}

impl Transport {
    /// `stream` must be in non-blocking mode.
    pub(crate) fn new(stream: Stream, wakeup: Arc<Wakeup>, follower: Option<Follower>) -> Self {
        Transport {
            stream,
            wakeup,
            follower,
            input: vec![0; READ_CHUNK_BYTES],
            start: 0,
            end: 0,
            out: Vec::with_capacity(WRITE_BUFFER_BYTES),
        }
    }

    /// Bytes read elsewhere (by the startup) that come before what the socket has.
    pub(crate) fn push_input(&mut self, bytes: &[u8]) {
        self.make_room(bytes.len(), bytes.len());
        self.input[self.end..self.end + bytes.len()].copy_from_slice(bytes);
        self.end += bytes.len();
    }

    /// The bytes read and not taken yet.
    pub(crate) fn buffered(&self) -> &[u8] {
        &self.input[self.start..self.end]
    }

    /// Takes `n` buffered bytes.
    pub(crate) fn consume(&mut self, n: usize) {
        assert!(n <= self.end - self.start, "consumed past the input");
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// At least `n` bytes of room after `end`: the unread bytes moved to the front, and the
    /// buffer grown when that is not enough (doubled, zeroed, but never past `useful` bytes
    /// of room: a message's remaining length, so a 1 GB message takes 1 GB, not 2).
    fn make_room(&mut self, n: usize, useful: usize) {
        // A buffer grown for one large message goes back to its usual size once empty.
        if self.end == 0 && self.input.len() > MAX_READ_CHUNK_BYTES && n <= READ_CHUNK_BYTES {
            self.input.truncate(READ_CHUNK_BYTES);
            self.input.shrink_to_fit();
        }
        if self.input.len() - self.end >= n {
            return;
        }
        if self.start > 0 {
            self.input.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.input.len() - self.end < n {
            let target = (self.input.len() * 2)
                .min(self.end + useful.max(n))
                .max(self.end + n);
            self.input.resize(target, 0);
        }
    }

    pub(crate) fn wakeup(&self) -> &Arc<Wakeup> {
        &self.wakeup
    }

    /// Waits until more bytes arrive (at least one; `want` says how many are needed, to
    /// read in larger steps), the client leaves, the latch is set or `deadline` passes.
    /// Replies are written first.
    pub(crate) fn fill(&mut self, want: usize, deadline: Option<Instant>) -> io::Result<Fill> {
        self.flush()?;
        if let Some(f) = &mut self.follower {
            let tcp = self.stream.tcp();
            f.turn(|| socket2::SockRef::from(tcp).cpu_affinity().ok());
        }
        // Bounded: each turn reads, or waits until the deadline or an event.
        loop {
            match self.read_now(want)? {
                Some(0) => return Ok(Fill::Closed),
                Some(_) => return Ok(Fill::Data),
                None => {}
            }
            match self.wait(PollFlags::POLLIN, deadline)? {
                Waited::Ready => {}
                Waited::Woken => return Ok(Fill::Woken),
                Waited::TimedOut => return Ok(Fill::TimedOut),
            }
        }
    }

    /// Reads what has arrived without waiting: `Some(0)` at the end, `None` for nothing.
    fn read_now(&mut self, want: usize) -> io::Result<Option<usize>> {
        self.make_room(
            want.clamp(1, MAX_READ_CHUNK_BYTES),
            want.max(READ_CHUNK_BYTES),
        );
        let room = &mut self.input[self.end..];
        let n = match &mut self.stream {
            Stream::Plain(tcp) => read_plain(tcp, room),
            Stream::Tls(conn, tcp) => read_tls(conn, tcp, room),
        }?;
        self.end += n.unwrap_or(0);
        Ok(n)
    }

    /// Writes every buffered reply, waiting for the socket as needed. Gives up (an error)
    /// when a farewell is set while the client does not read.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        let mut written = 0;
        // Bounded: each turn writes some bytes or waits for the socket (which fails once a
        // farewell is set, see `wait_writable`).
        loop {
            let progress = match &mut self.stream {
                Stream::Plain(tcp) => {
                    if written == self.out.len() {
                        break;
                    }
                    match tcp.write(&self.out[written..]) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(n) => {
                            written += n;
                            true
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => true,
                        Err(e) => return Err(e),
                    }
                }
                Stream::Tls(conn, tcp) => {
                    // Plaintext into rustls up to its buffer limit, ciphertext out.
                    if written < self.out.len() {
                        written += conn.writer().write(&self.out[written..])?;
                    }
                    if !conn.wants_write() {
                        if written == self.out.len() {
                            break;
                        }
                        continue;
                    }
                    match conn.write_tls(tcp) {
                        Ok(_) => true,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => true,
                        Err(e) => return Err(e),
                    }
                }
            };
            if !progress {
                self.wait_writable()?;
            }
        }
        self.out.clear();
        if self.out.capacity() > 4 * WRITE_BUFFER_BYTES {
            self.out.shrink_to(WRITE_BUFFER_BYTES);
        }
        Ok(())
    }

    /// Writes the buffer if it has grown past [`WRITE_BUFFER_BYTES`] (a result streamed).
    pub(crate) fn flush_if_full(&mut self) -> io::Result<()> {
        if self.out.len() >= WRITE_BUFFER_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn wait_writable(&self) -> io::Result<()> {
        // Bounded: returns on writability, or fails once a farewell is set.
        loop {
            match self.wait(PollFlags::POLLOUT, None)? {
                Waited::Ready => return Ok(()),
                Waited::Woken if self.wakeup.farewell().is_some() => {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "the session ends while its client does not read",
                    ))
                }
                Waited::Woken | Waited::TimedOut => {}
            }
        }
    }

    /// Waits for `events` on the socket, the latch, or `deadline`.
    fn wait(&self, events: PollFlags, deadline: Option<Instant>) -> io::Result<Waited> {
        let timeout = match deadline {
            None => PollTimeout::NONE,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(Waited::TimedOut);
                }
                // Rounded up, so that the wait does not end just before the deadline.
                let ms = left.as_millis().saturating_add(1).min(i32::MAX as u128);
                PollTimeout::try_from(ms as i32).unwrap_or(PollTimeout::MAX)
            }
        };
        let tcp = self.stream.tcp();
        let mut fds = [
            PollFd::new(tcp.as_fd(), events),
            PollFd::new(self.wakeup.latch.as_fd(), PollFlags::POLLIN),
        ];
        match nix::poll::poll(&mut fds, timeout) {
            Ok(0) => return Ok(Waited::TimedOut),
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => return Ok(Waited::Ready),
            Err(e) => return Err(e.into()),
        }
        let latch = fds[1].revents().unwrap_or(PollFlags::empty());
        if latch.contains(PollFlags::POLLIN) {
            self.wakeup.reset();
            return Ok(Waited::Woken);
        }
        Ok(Waited::Ready)
    }

    /// Sends TLS's close_notify (a plain socket needs nothing) and writes what is left.
    pub(crate) fn close(&mut self) {
        if let Stream::Tls(conn, _) = &mut self.stream {
            conn.send_close_notify();
        }
        if let Err(e) = self.flush() {
            tracing::debug!(error = %e, "the client left before the last reply");
        }
    }
}

enum Waited {
    Ready,
    Woken,
    TimedOut,
}

/// A non-blocking read: `Some(n)` bytes (0 at the end), `None` when nothing has arrived.
fn read_plain(tcp: &mut TcpStream, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // Bounded: retried only when a signal interrupted it.
    loop {
        match tcp.read(buf) {
            Ok(n) => return Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// A non-blocking read of plaintext under TLS: what rustls has decrypted, else what the
/// socket has, decrypted.
fn read_tls(
    conn: &mut ServerConnection,
    tcp: &mut TcpStream,
    buf: &mut [u8],
) -> io::Result<Option<usize>> {
    // Bounded: each turn takes plaintext, or ciphertext from the socket, or returns.
    loop {
        match conn.reader().read(buf) {
            Ok(n) => return Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            // The peer closed without close_notify: the end, as for a plain socket.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Some(0)),
            Err(e) => return Err(e),
        }
        match conn.read_tls(tcp) {
            Ok(0) => return Ok(Some(0)),
            Ok(_) => {
                conn.process_new_packets()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
