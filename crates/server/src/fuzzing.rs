//! Entry points for the fuzz targets (`fuzz/`): each takes arbitrary bytes to one decoder
//! or exchange of the protocol and must return, never panic. Not an API: hidden from the
//! documentation, and nothing in the server calls it.

use quire_sql::ScramVerifier;

use crate::protocol::frontend;
use crate::scram;

/// The startup phase: a length word, then the packet it frames.
pub fn startup(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let word = [data[0], data[1], data[2], data[3]];
    if let Ok(len) = frontend::startup_length(word) {
        let body = &data[4..];
        let _ = frontend::decode_startup(&body[..len.min(body.len())]);
    }
    let _ = frontend::decode_startup(data);
}

/// A typed message: the first byte is its type, the next four its length, the rest its
/// body; then the body decoded whatever the length said, and the auth messages' layouts.
pub fn message(data: &[u8]) {
    let Some((&tag, rest)) = data.split_first() else {
        return;
    };
    if rest.len() >= 4 {
        let len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let _ = frontend::header(tag, len, usize::MAX);
        let _ = frontend::header(tag, len, 1 << 20);
    }
    let _ = frontend::decode(tag, rest);
    let _ = frontend::password(rest);
    let _ = frontend::sasl_initial_response(rest);
}

/// A SCRAM exchange against a fixed verifier: the input split at its first NUL into the
/// client's first and final messages.
pub fn scram_exchange(data: &[u8]) {
    let (first, last) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let verifier = ScramVerifier::from_password("pencil", b"0123456789abcdef", 16);
    if let Ok((_, exchange)) = scram::first(verifier, first, &[7; scram::SERVER_NONCE_BYTES]) {
        let _ = exchange.last(last);
    }
}
