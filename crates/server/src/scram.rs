//! The server's side of a SCRAM-SHA-256 exchange (RFC 5802 and 7677, as PostgreSQL's
//! `auth-scram.c` runs it), against a role's stored verifier. No I/O: the connection feeds
//! the client's two messages in and sends what comes out.
//!
//! ## Rules
//! - Channel binding is not offered (no SCRAM-SHA-256-PLUS): a client that asks for it
//!   (`p=`) is refused; `y` (the client could bind but thinks the server cannot) and `n` are
//!   accepted, as PostgreSQL does when it offers no binding.
//! - The user name inside the SCRAM message is ignored: the startup packet's is the one
//!   authenticated (PostgreSQL does the same).
//! - A malformed message is 08P01 `malformed SCRAM message` with a DETAIL; a wrong proof is
//!   only "not verified": the caller reports it as a failed password (28P01), which is also
//!   what a mock verifier (an unknown role) always gives, so the two cannot be told apart.
//! - The proof is compared in constant time.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use quire_sql::ScramVerifier;
use ring::{digest, hmac};

use crate::protocol::ProtocolError;

/// PostgreSQL's SCRAM_RAW_NONCE_LEN: the server's share of the nonce.
pub(crate) const SERVER_NONCE_BYTES: usize = 18;
/// Longest attribute value accepted (a nonce, a proof): far above any real one.
const MAX_ATTRIBUTE_BYTES: usize = 1024;

fn malformed(detail: &str) -> ProtocolError {
    ProtocolError::fatal(format!("malformed SCRAM message: {detail}"))
}

/// The exchange after the server's first message, waiting for the client's final one.
pub(crate) struct Exchange {
    verifier: ScramVerifier,
    /// The GS2 header the client sent (`n,,` or `y,,`), which its final message repeats.
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange").finish_non_exhaustive()
    }
}

/// How the client's final message ended the exchange.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The proof matches: send this server-final message.
    Verified(String),
    /// The proof does not match (a wrong password, or a mock verifier).
    Refused,
}

/// The client's first message (`gs2-header client-first-bare`): returns the server's
/// first message and the exchange to finish. `server_nonce` is the server's share of the
/// nonce (random).
pub(crate) fn first(
    verifier: ScramVerifier,
    message: &[u8],
    server_nonce: &[u8; SERVER_NONCE_BYTES],
) -> Result<(String, Exchange), ProtocolError> {
    let text = std::str::from_utf8(message).map_err(|_| malformed("not UTF-8"))?;
    let (gs2_header, bare) = split_gs2(text)?;
    let attrs = attributes(bare)?;
    if attrs.first().map(|(k, _)| *k) != Some('n') || attrs.get(1).map(|(k, _)| *k) != Some('r') {
        return Err(malformed("expected the user name and nonce attributes"));
    }
    let client_nonce = attrs[1].1;
    if client_nonce.is_empty()
        || !client_nonce
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b',')
    {
        return Err(malformed("invalid nonce"));
    }
    let nonce = format!("{client_nonce}{}", B64.encode(server_nonce));
    let server_first = format!(
        "r={nonce},s={},i={}",
        B64.encode(&verifier.salt),
        verifier.iterations
    );
    let exchange = Exchange {
        verifier,
        gs2_header: gs2_header.to_string(),
        client_first_bare: bare.to_string(),
        server_first: server_first.clone(),
        nonce,
    };
    Ok((server_first, exchange))
}

/// The GS2 header (up to the second comma) and the rest.
fn split_gs2(text: &str) -> Result<(&str, &str), ProtocolError> {
    match text.as_bytes().first() {
        Some(b'n' | b'y') => {}
        Some(b'p') => return Err(ProtocolError::fatal(
            "channel binding is not supported by this server (SCRAM-SHA-256-PLUS is not offered)",
        )),
        _ => return Err(malformed("unexpected channel-binding flag")),
    }
    if text.as_bytes().get(1) != Some(&b',') {
        return Err(malformed("comma expected after the channel-binding flag"));
    }
    // An authorization identity (`a=`) is not supported, as in PostgreSQL.
    let rest = &text[2..];
    let Some(rest) = rest.strip_prefix(',') else {
        return Err(malformed(
            "client uses authorization identity, which is not supported",
        ));
    };
    Ok((&text[..3], rest))
}

/// `k=v` attributes separated by commas, in order.
fn attributes(text: &str) -> Result<Vec<(char, &str)>, ProtocolError> {
    text.split(',')
        .map(|a| {
            let mut chars = a.chars();
            let key = chars.next().filter(char::is_ascii_alphabetic);
            match (key, chars.next()) {
                (Some(k), Some('=')) if a.len() - 2 <= MAX_ATTRIBUTE_BYTES => Ok((k, &a[2..])),
                _ => Err(malformed("expected an attribute")),
            }
        })
        .collect()
}

impl Exchange {
    /// The client's final message (`c=...,r=...,p=...`).
    pub(crate) fn last(self, message: &[u8]) -> Result<Verdict, ProtocolError> {
        let text = std::str::from_utf8(message).map_err(|_| malformed("not UTF-8"))?;
        let attrs = attributes(text)?;
        let get = |i: usize, k: char| -> Result<&str, ProtocolError> {
            match attrs.get(i) {
                Some((key, v)) if *key == k => Ok(*v),
                _ => Err(malformed(&format!("expected attribute \"{k}\""))),
            }
        };
        let binding = get(0, 'c')?;
        if binding != B64.encode(&self.gs2_header) {
            return Err(malformed("unexpected SCRAM channel-binding attribute"));
        }
        if get(1, 'r')? != self.nonce {
            return Err(malformed("nonce does not match"));
        }
        let (last_key, proof) = attrs.last().copied().unwrap_or(('x', ""));
        if last_key != 'p' || attrs.len() < 3 {
            return Err(malformed("expected the proof attribute last"));
        }
        let proof = B64.decode(proof).map_err(|_| malformed("invalid proof"))?;
        let Ok(proof) = <[u8; 32]>::try_from(proof) else {
            return Err(malformed("invalid proof length"));
        };
        // The final message without its proof: everything before ",p=".
        let without_proof = &text[..text.rfind(",p=").unwrap_or(0)];
        let auth_message = format!(
            "{},{},{without_proof}",
            self.client_first_bare, self.server_first
        );
        let signature = hmac_sha256(&self.verifier.stored_key, auth_message.as_bytes());
        let mut client_key = [0u8; 32];
        for (k, (p, s)) in client_key.iter_mut().zip(proof.iter().zip(&signature)) {
            *k = p ^ s;
        }
        let stored = digest::digest(&digest::SHA256, &client_key);
        if !constant_time_eq(stored.as_ref(), &self.verifier.stored_key) {
            return Ok(Verdict::Refused);
        }
        let server_signature = hmac_sha256(&self.verifier.server_key, auth_message.as_bytes());
        Ok(Verdict::Verified(format!(
            "v={}",
            B64.encode(server_signature)
        )))
    }
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data);
    let mut out = [0; 32];
    out.copy_from_slice(tag.as_ref());
    out
}

/// Whether `a` and `b` are equal, in time that depends only on their lengths.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client's side of the exchange, as libpq computes it.
    fn client_final(
        password: &str,
        salt: &[u8],
        iterations: u32,
        first_bare: &str,
        server_first: &str,
        nonce: &str,
    ) -> String {
        let v = ScramVerifier::from_password(password, salt, iterations);
        // SaltedPassword is not kept in the verifier: recompute it as the client does.
        let mut salted = [0u8; 32];
        ring::pbkdf2::derive(
            ring::pbkdf2::PBKDF2_HMAC_SHA256,
            std::num::NonZeroU32::new(iterations).expect("iterations"),
            salt,
            password.as_bytes(),
            &mut salted,
        );
        let client_key = hmac_sha256(&salted, b"Client Key");
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("{first_bare},{server_first},{without_proof}");
        let signature = hmac_sha256(&v.stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        format!("{without_proof},p={}", B64.encode(proof))
    }

    fn exchange(password: &str, given: &str) -> Result<Verdict, ProtocolError> {
        let salt = b"0123456789abcdef";
        let v = ScramVerifier::from_password(password, salt, 4096);
        let first_bare = "n=,r=clientnonce";
        let (server_first, ex) = first(v, format!("n,,{first_bare}").as_bytes(), &[7; 18])?;
        let nonce = server_first[2..server_first.find(',').unwrap_or(2)].to_string();
        ex.last(client_final(given, salt, 4096, first_bare, &server_first, &nonce).as_bytes())
    }

    #[test]
    fn the_right_password_verifies_and_a_wrong_one_is_refused() {
        assert!(matches!(
            exchange("secret", "secret"),
            Ok(Verdict::Verified(_))
        ));
        assert_eq!(exchange("secret", "guess"), Ok(Verdict::Refused));
    }

    #[test]
    fn malformed_messages_are_08p01_never_a_panic() {
        let v = || ScramVerifier::from_password("x", b"salt", 4096);
        let r = [1u8; SERVER_NONCE_BYTES];
        for bad in [
            &b""[..],
            b"n",
            b"n,",
            b"x,,n=,r=a",
            b"n,a=x,n=,r=a",
            b"n,,r=a",
            b"n,,n=,r=",
            b"\xff",
        ] {
            let e = first(v(), bad, &r).unwrap_err();
            assert_eq!(e.sqlstate, "08P01", "{bad:?}");
        }
        assert!(first(v(), b"p=tls-server-end-point,,n=,r=a", &r).is_err());
        let (_, ex) = first(v(), b"n,,n=,r=abc", &r).expect("first");
        assert!(
            ex.last(b"c=biws,r=abc,p=AAAA").is_err(),
            "the nonce lacks the server's part"
        );
    }
}
