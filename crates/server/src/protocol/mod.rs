//! PostgreSQL's frontend/backend protocol, version 3.0, as bytes: the frontend messages
//! decoded ([`frontend`]) and the backend messages encoded ([`backend`]). No I/O and no
//! state: the connection code frames the socket with [`frontend::header`] and
//! [`frontend::startup_length`], and hands each whole message body here. It is public so
//! that the fuzz targets (`fuzz/`) reach it.
//!
//! ## Rules
//! - Strict framing: a message is read exactly to its declared length. A length below its
//!   minimum or above its limit is FATAL 08P01 before anything is allocated for it
//!   ([`limits`]); the connection closes, since the stream can no longer be framed. A body
//!   that does not match its type's layout (a field running past the declared end, bytes
//!   left over after the last field, a string without its terminator) is ERROR 08P01
//!   `invalid message format` (or PostgreSQL's more precise message): the frame was whole,
//!   so the connection goes on, as PostgreSQL's `pq_getmsgend` does.
//! - Nothing is allocated from a count or length the client sent before that many bytes
//!   are known to be in the body: a count of parameters or formats is checked against
//!   the bytes left first. Row limits are decoded, never used to allocate.
//! - Strings are UTF-8 (the only client_encoding quire speaks): invalid bytes are 22021.
//! - Decoding never panics, whatever the bytes (the fuzz targets' property).

use quire_engine::SqlState;

pub mod backend;
pub mod frontend;

/// The limits of PostgreSQL's protocol code (`pqcomm.h`, `postmaster.c`, `auth.c`).
pub mod limits {
    /// `MAX_STARTUP_PACKET_LENGTH`: the startup packet, an SSLRequest or a CancelRequest.
    pub const MAX_STARTUP_PACKET_BYTES: usize = 10_000;
    /// `PQ_SMALL_MESSAGE_LIMIT`: every message type but the large ones below.
    pub const SMALL_MESSAGE_BYTES: usize = 10_000;
    /// `PQ_LARGE_MESSAGE_LIMIT` (`MaxAllocSize - 1`): Query, Parse, Bind, FunctionCall,
    /// CopyData and password messages; `max_message_size` may lower it.
    pub const LARGE_MESSAGE_BYTES: usize = 0x3fff_fffe;
    /// `PG_MAX_AUTH_TOKEN_LENGTH`: a password or SASL message during authentication.
    pub const MAX_AUTH_MESSAGE_BYTES: usize = 65_535;
    /// PostgreSQL 18's longest cancel key (protocol 3.2); 3.0 keys are 4 bytes.
    pub const MAX_CANCEL_KEY_BYTES: usize = 256;
}

/// A message the protocol does not allow: its SQLSTATE, message and whether the stream can
/// still be framed (`fatal`: it cannot, and the connection ends after the error is sent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError {
    pub sqlstate: SqlState,
    pub message: String,
    pub fatal: bool,
}

impl ProtocolError {
    /// 08P01 with `message`; the connection goes on (the frame was whole).
    pub fn violation(message: impl Into<String>) -> Self {
        ProtocolError {
            sqlstate: SqlState::PROTOCOL_VIOLATION,
            message: message.into(),
            fatal: false,
        }
    }

    /// 08P01 with `message`; the connection ends.
    pub fn fatal(message: impl Into<String>) -> Self {
        ProtocolError {
            sqlstate: SqlState::PROTOCOL_VIOLATION,
            message: message.into(),
            fatal: true,
        }
    }

    /// `self`, ending the connection.
    #[must_use]
    pub fn into_fatal(mut self) -> Self {
        self.fatal = true;
        self
    }
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.sqlstate)
    }
}

impl std::error::Error for ProtocolError {}
