//! Backend messages, appended to an output buffer in PostgreSQL's layouts. Each function
//! writes one whole message (type byte, length, body); the length is patched in at the end,
//! so a body is written once, without a second buffer.

use quire_engine::SqlState;

/// ReadyForQuery's transaction status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxStatus {
    Idle,
    InBlock,
    Failed,
}

/// One field of a RowDescription.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field<'a> {
    pub name: &'a str,
    /// The table's oid and the column's number, or 0 for an expression.
    pub table_oid: u32,
    pub column: i16,
    pub type_oid: u32,
    pub type_size: i16,
    pub type_modifier: i32,
    pub binary: bool,
}

/// An ErrorResponse's or NoticeResponse's fields, as PostgreSQL sends them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice<'a> {
    /// ERROR, FATAL, WARNING, NOTICE, INFO, ...
    pub severity: &'a str,
    pub sqlstate: SqlState,
    pub message: &'a str,
    pub detail: Option<&'a str>,
    pub hint: Option<&'a str>,
    /// A 1-based character position in the query string.
    pub position: Option<usize>,
    /// Where inside the data or the call stack the error is (CONTEXT).
    pub context: Option<&'a str>,
}

impl<'a> Notice<'a> {
    /// A notice of these three fields alone.
    pub fn new(severity: &'a str, sqlstate: SqlState, message: &'a str) -> Self {
        Notice {
            severity,
            sqlstate,
            message,
            detail: None,
            hint: None,
            position: None,
            context: None,
        }
    }
}

/// Starts a message of type `tag`; returns where its length goes.
fn begin(out: &mut Vec<u8>, tag: u8) -> usize {
    out.push(tag);
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    at
}

/// Ends the message whose length goes at `at`.
fn end(out: &mut [u8], at: usize) {
    let len = out.len() - at;
    // Every message is built from bounded parts: a row is at most 1 GB of fields and the
    // caller refuses larger (see `data_row`); anything larger is a bug here.
    let len = u32::try_from(len).expect("a backend message fits its length word");
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
}

fn cstr(out: &mut Vec<u8>, s: &str) {
    // A string with a NUL inside would end early on the client's side: cut it there, as
    // PostgreSQL's text can hold no NUL in the first place.
    let s = s.split('\0').next().unwrap_or("");
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

fn message(out: &mut Vec<u8>, tag: u8, body: impl FnOnce(&mut Vec<u8>)) {
    let at = begin(out, tag);
    body(out);
    end(out, at);
}

pub fn authentication_ok(out: &mut Vec<u8>) {
    message(out, b'R', |o| o.extend_from_slice(&0i32.to_be_bytes()));
}

pub fn authentication_cleartext_password(out: &mut Vec<u8>) {
    message(out, b'R', |o| o.extend_from_slice(&3i32.to_be_bytes()));
}

/// AuthenticationSASL with the mechanisms offered.
pub fn authentication_sasl(out: &mut Vec<u8>, mechanisms: &[&str]) {
    message(out, b'R', |o| {
        o.extend_from_slice(&10i32.to_be_bytes());
        for m in mechanisms {
            cstr(o, m);
        }
        o.push(0);
    });
}

pub fn authentication_sasl_continue(out: &mut Vec<u8>, data: &[u8]) {
    message(out, b'R', |o| {
        o.extend_from_slice(&11i32.to_be_bytes());
        o.extend_from_slice(data);
    });
}

pub fn authentication_sasl_final(out: &mut Vec<u8>, data: &[u8]) {
    message(out, b'R', |o| {
        o.extend_from_slice(&12i32.to_be_bytes());
        o.extend_from_slice(data);
    });
}

pub fn backend_key_data(out: &mut Vec<u8>, pid: i32, key: &[u8]) {
    message(out, b'K', |o| {
        o.extend_from_slice(&pid.to_be_bytes());
        o.extend_from_slice(key);
    });
}

pub fn parameter_status(out: &mut Vec<u8>, name: &str, value: &str) {
    message(out, b'S', |o| {
        cstr(o, name);
        cstr(o, value);
    });
}

/// NegotiateProtocolVersion: the newest minor version quire speaks and the protocol options
/// (`_pq_.*`) it did not recognize.
pub fn negotiate_protocol_version(out: &mut Vec<u8>, minor: u32, unrecognized: &[&str]) {
    message(out, b'v', |o| {
        o.extend_from_slice(&((3u32 << 16) | minor).to_be_bytes());
        o.extend_from_slice(&(unrecognized.len() as u32).to_be_bytes());
        for name in unrecognized {
            cstr(o, name);
        }
    });
}

pub fn ready_for_query(out: &mut Vec<u8>, status: TxStatus) {
    let s = match status {
        TxStatus::Idle => b'I',
        TxStatus::InBlock => b'T',
        TxStatus::Failed => b'E',
    };
    message(out, b'Z', |o| o.push(s));
}

/// A count the protocol sends in 16 bits. The SQL layer bounds every such count: at most
/// 1664 result columns, 65535 parameters.
fn count16(n: usize) -> [u8; 2] {
    u16::try_from(n)
        .expect("a count of at most 65535 (the SQL layer's limits)")
        .to_be_bytes()
}

pub fn row_description(out: &mut Vec<u8>, fields: &[Field<'_>]) {
    message(out, b'T', |o| {
        o.extend_from_slice(&count16(fields.len()));
        for f in fields {
            cstr(o, f.name);
            o.extend_from_slice(&f.table_oid.to_be_bytes());
            o.extend_from_slice(&f.column.to_be_bytes());
            o.extend_from_slice(&f.type_oid.to_be_bytes());
            o.extend_from_slice(&f.type_size.to_be_bytes());
            o.extend_from_slice(&f.type_modifier.to_be_bytes());
            o.extend_from_slice(&i16::from(f.binary).to_be_bytes());
        }
    });
}

/// Starts a DataRow of `columns` fields; each follows with [`data_row_field`], then
/// [`data_row_end`] with the returned position.
pub fn data_row_begin(out: &mut Vec<u8>, columns: i16) -> usize {
    let at = begin(out, b'D');
    out.extend_from_slice(&columns.to_be_bytes());
    at
}

/// One field of a DataRow: its bytes, or `None` for NULL. The caller keeps each field under
/// 1 GB (the value limit), so its length fits.
pub fn data_row_field(out: &mut Vec<u8>, value: Option<&[u8]>) {
    match value {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(v) => {
            let len =
                i32::try_from(v.len()).expect("a value of at most 1 GB (the SQL layer's cap)");
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(v);
        }
    }
}

pub fn data_row_end(out: &mut [u8], at: usize) {
    end(out, at);
}

pub fn command_complete(out: &mut Vec<u8>, tag: &str) {
    message(out, b'C', |o| cstr(o, tag));
}

pub fn empty_query_response(out: &mut Vec<u8>) {
    message(out, b'I', |_| {});
}

/// ErrorResponse.
pub fn error_response(out: &mut Vec<u8>, e: &Notice<'_>) {
    notice_fields(out, b'E', e);
}

/// NoticeResponse.
pub fn notice_response(out: &mut Vec<u8>, n: &Notice<'_>) {
    notice_fields(out, b'N', n);
}

fn notice_fields(out: &mut Vec<u8>, tag: u8, n: &Notice<'_>) {
    message(out, tag, |o| {
        let mut field = |code: u8, value: &str| {
            o.push(code);
            cstr(o, value);
        };
        field(b'S', n.severity);
        field(b'V', n.severity);
        field(b'C', n.sqlstate.code());
        field(b'M', n.message);
        if let Some(d) = n.detail {
            field(b'D', d);
        }
        if let Some(h) = n.hint {
            field(b'H', h);
        }
        if let Some(p) = n.position {
            field(b'P', &p.to_string());
        }
        if let Some(w) = n.context {
            field(b'W', w);
        }
        o.push(0);
    });
}

pub fn parse_complete(out: &mut Vec<u8>) {
    message(out, b'1', |_| {});
}

pub fn bind_complete(out: &mut Vec<u8>) {
    message(out, b'2', |_| {});
}

pub fn close_complete(out: &mut Vec<u8>) {
    message(out, b'3', |_| {});
}

pub fn no_data(out: &mut Vec<u8>) {
    message(out, b'n', |_| {});
}

pub fn portal_suspended(out: &mut Vec<u8>) {
    message(out, b's', |_| {});
}

pub fn parameter_description(out: &mut Vec<u8>, type_oids: &[u32]) {
    message(out, b't', |o| {
        o.extend_from_slice(&count16(type_oids.len()));
        for t in type_oids {
            o.extend_from_slice(&t.to_be_bytes());
        }
    });
}

/// CopyInResponse (`G`) or CopyOutResponse (`H`): text format, `columns` columns.
/// CopyInResponse or CopyOutResponse: the overall format (0 text, 1 binary) and each
/// column's, all alike.
pub fn copy_response(out: &mut Vec<u8>, copy_in: bool, columns: usize, binary: bool) {
    let tag = if copy_in { b'G' } else { b'H' };
    message(out, tag, |o| {
        o.push(u8::from(binary));
        let n = i16::try_from(columns).unwrap_or(i16::MAX);
        o.extend_from_slice(&n.to_be_bytes());
        for _ in 0..n {
            o.extend_from_slice(&i16::from(binary).to_be_bytes());
        }
    });
}

pub fn copy_data(out: &mut Vec<u8>, data: &[u8]) {
    message(out, b'd', |o| o.extend_from_slice(data));
}

pub fn copy_done(out: &mut Vec<u8>) {
    message(out, b'c', |_| {});
}

/// A single byte answer to an SSLRequest or GSSENCRequest (`S` or `N`).
pub fn negotiation_answer(out: &mut Vec<u8>, accept: bool) {
    out.push(if accept { b'S' } else { b'N' });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte-exact layouts of the messages clients parse most.
    #[test]
    fn layouts_are_postgresqls() {
        let mut out = Vec::new();
        ready_for_query(&mut out, TxStatus::InBlock);
        assert_eq!(out, b"Z\0\0\0\x05T");
        out.clear();
        command_complete(&mut out, "SELECT 1");
        assert_eq!(out, b"C\0\0\0\x0dSELECT 1\0");
        out.clear();
        let at = data_row_begin(&mut out, 2);
        data_row_field(&mut out, Some(b"42"));
        data_row_field(&mut out, None);
        data_row_end(&mut out, at);
        assert_eq!(out, b"D\0\0\0\x10\0\x02\0\0\0\x0242\xff\xff\xff\xff");
        out.clear();
        error_response(
            &mut out,
            &Notice {
                position: Some(3),
                ..Notice::new("ERROR", SqlState::SYNTAX_ERROR, "x")
            },
        );
        assert_eq!(out, b"E\0\0\0\x20SERROR\0VERROR\0C42601\0Mx\0P3\0\0");
    }
}
