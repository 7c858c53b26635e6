//! Frontend messages: the startup-phase packets (StartupMessage, SSLRequest,
//! GSSENCRequest, CancelRequest) and the typed messages after them, decoded from their
//! bytes by PostgreSQL's layouts (`postmaster.c`'s `ProcessStartupPacket`, `postgres.c`'s
//! `exec_*_message` and `pqformat.c`'s readers), with its errors.

use super::{limits, ProtocolError};
use quire_engine::SqlState;

/// The protocol version quire speaks: 3.0.
pub const PROTOCOL_3_0: u32 = 3 << 16;
const SSL_REQUEST_CODE: u32 = 80_877_103;
const GSSENC_REQUEST_CODE: u32 = 80_877_104;
const CANCEL_REQUEST_CODE: u32 = 80_877_102;

/// A packet of the startup phase (before the first typed message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Startup {
    /// StartupMessage: the protocol version the client asks for and its parameters, in the
    /// order sent (`user`, `database`, `options`, `application_name`, `_pq_.*`, ...).
    Startup {
        major: u16,
        minor: u16,
        params: Vec<(String, String)>,
    },
    SslRequest,
    GssEncRequest,
    /// CancelRequest: the process id and secret key of the session whose statement to stop.
    Cancel {
        pid: i32,
        key: Vec<u8>,
    },
}

/// A typed frontend message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Query(String),
    Parse {
        name: String,
        query: String,
        /// The type oids the client declared (0: unspecified).
        param_types: Vec<u32>,
    },
    Bind(Bind),
    Describe {
        target: Target,
        name: String,
    },
    Execute {
        portal: String,
        /// Most rows to return; 0 for all (PostgreSQL also reads a negative count as all).
        max_rows: u32,
    },
    Close {
        target: Target,
        name: String,
    },
    Flush,
    Sync,
    Terminate,
    CopyData(Vec<u8>),
    CopyDone,
    CopyFail(String),
    /// `p`: a password, SASLInitialResponse or SASLResponse; which one the authentication
    /// in progress says ([`password`], [`sasl_initial_response`]).
    Password(Vec<u8>),
    /// `F`: the legacy fast-path function call, which quire refuses.
    FunctionCall,
}

/// Bind: a portal from a prepared statement and parameter values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bind {
    pub portal: String,
    pub statement: String,
    /// None, one for all parameters, or one per parameter (checked here).
    pub param_formats: Vec<Format>,
    /// Each parameter's bytes; `None` is SQL NULL.
    pub params: Vec<Option<Vec<u8>>>,
    /// None, one for all result columns, or one per column (checked once the columns are
    /// known).
    pub result_formats: Vec<Format>,
}

impl Bind {
    /// The format of parameter `i` (PostgreSQL's rule for zero, one or one-per formats).
    pub fn param_format(&self, i: usize) -> Format {
        formats_for(&self.param_formats, i)
    }
}

/// The format of value `i` under a list of zero, one or one-per-value format codes.
pub fn formats_for(formats: &[Format], i: usize) -> Format {
    match formats {
        [] => Format::Text,
        [one] => *one,
        many => many.get(i).copied().unwrap_or(Format::Text),
    }
}

/// What Describe or Close names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Statement,
    Portal,
}

/// A value's format on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Binary,
}

impl Format {
    fn from_code(code: i16) -> Result<Format, ProtocolError> {
        match code {
            0 => Ok(Format::Text),
            1 => Ok(Format::Binary),
            other => Err(ProtocolError {
                sqlstate: SqlState::INVALID_PARAMETER_VALUE,
                message: format!("unsupported format code: {other}"),
                fatal: false,
            }),
        }
    }
}

/// The body length of a startup-phase packet from its length word (which counts itself):
/// FATAL 08P01 `invalid length of startup packet` outside PostgreSQL's bounds.
pub fn startup_length(word: [u8; 4]) -> Result<usize, ProtocolError> {
    let len = u32::from_be_bytes(word) as usize;
    // At least the length and a 4-byte code; at most PostgreSQL's limit.
    if !(8..=limits::MAX_STARTUP_PACKET_BYTES).contains(&len) {
        return Err(ProtocolError::fatal("invalid length of startup packet"));
    }
    Ok(len - 4)
}

/// Decodes a startup-phase packet's body (what follows its length word).
pub fn decode_startup(body: &[u8]) -> Result<Startup, ProtocolError> {
    let mut r = Reader::new(body);
    let code = r.u32().map_err(ProtocolError::into_fatal)?;
    match code {
        SSL_REQUEST_CODE | GSSENC_REQUEST_CODE => {
            if r.remaining() != 0 {
                return Err(ProtocolError::fatal("invalid length of startup packet"));
            }
            Ok(if code == SSL_REQUEST_CODE {
                Startup::SslRequest
            } else {
                Startup::GssEncRequest
            })
        }
        CANCEL_REQUEST_CODE => {
            let pid = r.i32().map_err(ProtocolError::into_fatal)?;
            let key = r.rest();
            if !(4..=limits::MAX_CANCEL_KEY_BYTES).contains(&key.len()) {
                return Err(ProtocolError::fatal(
                    "invalid length of query cancel packet",
                ));
            }
            Ok(Startup::Cancel {
                pid,
                key: key.to_vec(),
            })
        }
        version => startup_message(version, &mut r),
    }
}

fn startup_message(version: u32, r: &mut Reader<'_>) -> Result<Startup, ProtocolError> {
    let (major, minor) = ((version >> 16) as u16, (version & 0xffff) as u16);
    if major != 3 {
        return Err(ProtocolError {
            sqlstate: SqlState::FEATURE_NOT_SUPPORTED,
            message: format!(
                "unsupported frontend protocol {major}.{minor}: server supports 3.0 to 3.0"
            ),
            fatal: true,
        });
    }
    let layout =
        || ProtocolError::fatal("invalid startup packet layout: expected terminator as last byte");
    let mut params = Vec::new();
    // Bounded by the packet's length: each pair takes at least two bytes.
    loop {
        let name = r.cstr().map_err(super::ProtocolError::into_fatal)?;
        if name.is_empty() {
            break;
        }
        let value = r.cstr().map_err(|_| layout())?;
        params.push((name.to_string(), value.to_string()));
    }
    if r.remaining() != 0 {
        return Err(layout());
    }
    Ok(Startup::Startup {
        major,
        minor,
        params,
    })
}

/// The body length of a typed message from its 5-byte header (type, then a length that
/// counts itself), checked against the type's limit; `max_large` is the limit of the large
/// types (`max_message_size`). An unknown type or a length out of bounds is FATAL 08P01.
pub fn header(tag: u8, len: i32, max_large: usize) -> Result<usize, ProtocolError> {
    let limit = match tag {
        b'Q' | b'P' | b'B' | b'F' | b'd' | b'p' => max_large.min(limits::LARGE_MESSAGE_BYTES),
        b'X' | b'C' | b'D' | b'E' | b'H' | b'S' | b'c' | b'f' => limits::SMALL_MESSAGE_BYTES,
        other => {
            return Err(ProtocolError::fatal(format!(
                "invalid frontend message type {other}"
            )))
        }
    };
    let body = usize::try_from(len)
        .ok()
        .and_then(|l| l.checked_sub(4))
        .ok_or_else(|| ProtocolError::fatal("invalid message length"))?;
    if body > limit {
        return Err(ProtocolError::fatal("invalid message length"));
    }
    Ok(body)
}

/// Decodes a typed message's body (its header already passed [`header`]).
pub fn decode(tag: u8, body: &[u8]) -> Result<Message, ProtocolError> {
    let mut r = Reader::new(body);
    let m = match tag {
        b'Q' => Message::Query(r.cstr()?.to_string()),
        b'P' => parse(&mut r)?,
        b'B' => Message::Bind(bind(&mut r)?),
        b'D' | b'C' => {
            let target = match r.u8()? {
                b'S' => Target::Statement,
                b'P' => Target::Portal,
                other => {
                    let what = if tag == b'D' { "DESCRIBE" } else { "CLOSE" };
                    return Err(ProtocolError::violation(format!(
                        "invalid {what} message subtype {other}"
                    )));
                }
            };
            let name = r.cstr()?.to_string();
            if tag == b'D' {
                Message::Describe { target, name }
            } else {
                Message::Close { target, name }
            }
        }
        b'E' => Message::Execute {
            portal: r.cstr()?.to_string(),
            max_rows: u32::try_from(r.i32()?).unwrap_or(0),
        },
        b'H' => Message::Flush,
        b'S' => Message::Sync,
        b'X' => Message::Terminate,
        b'd' => Message::CopyData(r.rest().to_vec()),
        b'c' => Message::CopyDone,
        b'f' => Message::CopyFail(r.cstr()?.to_string()),
        b'p' => Message::Password(r.rest().to_vec()),
        b'F' => {
            r.rest();
            Message::FunctionCall
        }
        other => {
            return Err(ProtocolError::fatal(format!(
                "invalid frontend message type {other}"
            )))
        }
    };
    r.end()?;
    Ok(m)
}

fn parse(r: &mut Reader<'_>) -> Result<Message, ProtocolError> {
    let name = r.cstr()?.to_string();
    let query = r.cstr()?.to_string();
    let n = usize::from(r.u16()?);
    r.check_room(n, 4)?;
    let param_types = (0..n).map(|_| r.u32()).collect::<Result<_, _>>()?;
    Ok(Message::Parse {
        name,
        query,
        param_types,
    })
}

fn bind(r: &mut Reader<'_>) -> Result<Bind, ProtocolError> {
    let portal = r.cstr()?.to_string();
    let statement = r.cstr()?.to_string();
    let param_formats = formats(r)?;
    let n = usize::from(r.u16()?);
    if param_formats.len() > 1 && param_formats.len() != n {
        return Err(ProtocolError::violation(format!(
            "bind message has {} parameter formats but {n} parameters",
            param_formats.len()
        )));
    }
    r.check_room(n, 4)?;
    let mut params = Vec::with_capacity(n);
    for _ in 0..n {
        let len = r.i32()?;
        params.push(match len {
            -1 => None,
            len => {
                let len = usize::try_from(len).map_err(|_| insufficient())?;
                Some(r.bytes(len)?.to_vec())
            }
        });
    }
    let result_formats = formats(r)?;
    Ok(Bind {
        portal,
        statement,
        param_formats,
        params,
        result_formats,
    })
}

/// A count of format codes, then the codes.
fn formats(r: &mut Reader<'_>) -> Result<Vec<Format>, ProtocolError> {
    let n = usize::from(r.u16()?);
    r.check_room(n, 2)?;
    (0..n).map(|_| Format::from_code(r.i16()?)).collect()
}

/// A password message's password (the `password` method).
pub fn password(body: &[u8]) -> Result<String, ProtocolError> {
    let mut r = Reader::new(body);
    let p = r.cstr()?.to_string();
    r.end()?;
    Ok(p)
}

/// SASLInitialResponse: the mechanism the client chose and its first message, if any.
pub fn sasl_initial_response(body: &[u8]) -> Result<(String, Option<Vec<u8>>), ProtocolError> {
    let mut r = Reader::new(body);
    let mechanism = r.cstr()?.to_string();
    let data = match r.i32()? {
        -1 => None,
        len => {
            let len = usize::try_from(len).map_err(|_| insufficient())?;
            Some(r.bytes(len)?.to_vec())
        }
    };
    r.end()?;
    Ok((mechanism, data))
}

fn insufficient() -> ProtocolError {
    ProtocolError::violation("insufficient data left in message")
}

/// Reads one message body: every read checks the bytes left (PostgreSQL's `pq_getmsg*`).
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], ProtocolError> {
        if n > self.remaining() {
            return Err(insufficient());
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ProtocolError> {
        let b = self.bytes(N)?;
        let mut a = [0; N];
        a.copy_from_slice(b);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, ProtocolError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, ProtocolError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn i16(&mut self) -> Result<i16, ProtocolError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, ProtocolError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, ProtocolError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    /// That `n` items of at least `size` bytes each can still be in the body: checked
    /// before anything is allocated for them.
    fn check_room(&self, n: usize, size: usize) -> Result<(), ProtocolError> {
        if n.saturating_mul(size) > self.remaining() {
            return Err(insufficient());
        }
        Ok(())
    }

    /// A null-terminated UTF-8 string.
    fn cstr(&mut self) -> Result<&'a str, ProtocolError> {
        let rest = &self.buf[self.pos..];
        let Some(end) = rest.iter().position(|&b| b == 0) else {
            return Err(ProtocolError::violation("invalid string in message"));
        };
        let s = std::str::from_utf8(&rest[..end]).map_err(|e| invalid_utf8(&rest[..end], &e))?;
        self.pos += end + 1;
        Ok(s)
    }

    /// Everything left.
    fn rest(&mut self) -> &'a [u8] {
        let b = &self.buf[self.pos..];
        self.pos = self.buf.len();
        b
    }

    /// The body must end here (PostgreSQL's `pq_getmsgend`).
    fn end(&self) -> Result<(), ProtocolError> {
        if self.remaining() != 0 {
            return Err(ProtocolError::violation("invalid message format"));
        }
        Ok(())
    }
}

/// PostgreSQL's 22021 for bytes that are not UTF-8: the offending bytes in hex.
fn invalid_utf8(bytes: &[u8], e: &std::str::Utf8Error) -> ProtocolError {
    let start = e.valid_up_to();
    let bad = &bytes[start..bytes.len().min(start + e.error_len().unwrap_or(1).max(1))];
    let hex: Vec<String> = bad.iter().map(|b| format!("0x{b:02x}")).collect();
    ProtocolError {
        sqlstate: SqlState::CHARACTER_NOT_IN_REPERTOIRE,
        message: format!(
            "invalid byte sequence for encoding \"UTF8\": {}",
            hex.join(" ")
        ),
        fatal: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cstr(s: &str) -> Vec<u8> {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        v
    }

    #[test]
    fn startup_packets_decode_and_refuse_bad_layouts() {
        let mut body = PROTOCOL_3_0.to_be_bytes().to_vec();
        for s in ["user", "alice", "database", "db", ""] {
            body.extend(cstr(s));
        }
        assert_eq!(
            decode_startup(&body),
            Ok(Startup::Startup {
                major: 3,
                minor: 0,
                params: vec![
                    ("user".into(), "alice".into()),
                    ("database".into(), "db".into())
                ],
            })
        );
        // No terminator, or bytes after it.
        let e = decode_startup(&body[..body.len() - 1]).unwrap_err();
        assert!(e.fatal && e.sqlstate == "08P01", "{e}");
        body.push(b'x');
        assert!(decode_startup(&body).unwrap_err().fatal);
        // Protocol 2.0 and 4.0.
        let e = decode_startup(&(2u32 << 16).to_be_bytes()).unwrap_err();
        assert_eq!(e.sqlstate, "0A000");
        assert_eq!(
            decode_startup(&80_877_103u32.to_be_bytes()),
            Ok(Startup::SslRequest)
        );
        let mut cancel = 80_877_102u32.to_be_bytes().to_vec();
        cancel.extend(7i32.to_be_bytes());
        assert!(decode_startup(&cancel).is_err(), "a key of no bytes");
        cancel.extend([1, 2, 3, 4]);
        assert_eq!(
            decode_startup(&cancel),
            Ok(Startup::Cancel {
                pid: 7,
                key: vec![1, 2, 3, 4]
            })
        );
        assert!(startup_length(7u32.to_be_bytes()).is_err());
        assert!(startup_length(10_001u32.to_be_bytes()).is_err());
        assert_eq!(startup_length(8u32.to_be_bytes()), Ok(4));
    }

    #[test]
    fn headers_bound_each_type() {
        assert_eq!(header(b'Q', 4, 1 << 20), Ok(0));
        assert!(header(b'Q', 3, 1 << 20).unwrap_err().fatal);
        assert!(header(b'Q', -1, 1 << 20).unwrap_err().fatal);
        assert!(header(b'Q', (1 << 20) + 5, 1 << 20).is_err());
        assert!(header(b'S', 10_005, usize::MAX).is_err(), "Sync is small");
        assert!(
            header(b'Z', 4, 100).unwrap_err().fatal,
            "no such frontend type"
        );
    }

    #[test]
    fn a_query_is_read_exactly_to_its_end() {
        let mut body = cstr("SELECT 1");
        assert_eq!(decode(b'Q', &body), Ok(Message::Query("SELECT 1".into())));
        // A second message smuggled inside the declared length.
        body.extend(b"Q\0\0\0\x0dSELECT 2\0");
        let e = decode(b'Q', &body).unwrap_err();
        assert_eq!(
            (e.sqlstate.code(), e.message.as_str(), e.fatal),
            ("08P01", "invalid message format", false)
        );
        let e = decode(b'Q', b"SELECT 1").unwrap_err();
        assert_eq!(e.message, "invalid string in message");
        let e = decode(b'Q', b"\xff\0").unwrap_err();
        assert_eq!(e.sqlstate, "22021");
    }

    #[test]
    fn bind_counts_are_checked_against_the_bytes_left() {
        let mut body = cstr("");
        body.extend(cstr("s"));
        body.extend(0u16.to_be_bytes());
        body.extend(u16::MAX.to_be_bytes()); // 65535 parameters, no bytes for them
        let e = decode(b'B', &body).unwrap_err();
        assert_eq!(e.message, "insufficient data left in message");
        let mut body = cstr("p");
        body.extend(cstr("s"));
        body.extend(1u16.to_be_bytes());
        body.extend(1i16.to_be_bytes());
        body.extend(2u16.to_be_bytes());
        body.extend((-1i32).to_be_bytes());
        body.extend(2i32.to_be_bytes());
        body.extend([7, 8]);
        body.extend(1u16.to_be_bytes());
        body.extend(0i16.to_be_bytes());
        let Ok(Message::Bind(b)) = decode(b'B', &body) else {
            panic!("bind decodes");
        };
        assert_eq!(b.params, vec![None, Some(vec![7, 8])]);
        assert_eq!(b.param_format(1), Format::Binary);
        assert_eq!(b.result_formats, vec![Format::Text]);
        // A negative length other than -1, and a format code other than 0 or 1.
        let mut bad = body.clone();
        let at = bad.len() - 2 - 2 - 2 - 4;
        bad[at..at + 4].copy_from_slice(&(-2i32).to_be_bytes());
        assert!(decode(b'B', &bad).is_err());
        let mut bad = body.clone();
        let last = bad.len() - 1;
        bad[last] = 7;
        assert_eq!(decode(b'B', &bad).unwrap_err().sqlstate, "22023");
    }

    #[test]
    fn execute_reads_a_negative_row_count_as_all() {
        let mut body = cstr("");
        body.extend((-5i32).to_be_bytes());
        assert_eq!(
            decode(b'E', &body),
            Ok(Message::Execute {
                portal: String::new(),
                max_rows: 0
            })
        );
        body.extend([0]);
        assert!(decode(b'E', &body).is_err());
    }

    #[test]
    fn sasl_initial_response_layout() {
        let mut body = cstr("SCRAM-SHA-256");
        body.extend(3i32.to_be_bytes());
        body.extend(b"abc");
        assert_eq!(
            sasl_initial_response(&body),
            Ok(("SCRAM-SHA-256".into(), Some(b"abc".to_vec())))
        );
        let mut body = cstr("SCRAM-SHA-256");
        body.extend(4i32.to_be_bytes());
        body.extend(b"abc");
        assert!(sasl_initial_response(&body).is_err());
    }
}
