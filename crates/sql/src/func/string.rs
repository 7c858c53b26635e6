//! String functions of PostgreSQL's `varlena.c`, `oracle_compat.c` and `encode.c`:
//! `split_part`, `chr`, `ascii`, `initcap`, `translate`, `reverse`, `lpad` / `rpad`,
//! `starts_with`, `octet_length`, `bit_length`, `to_hex` / `to_oct` / `to_bin`, `crc32` /
//! `crc32c`, `format`, `similar_to_escape`, `encode` / `decode` (hex, base64,
//! escape) and `sha256` / `sha384` / `sha512`, with PostgreSQL's errors. `concat_ws` is
//! [`super::Func::ConcatWs`], beside `concat`, whose argument handling it shares.
//!
//! ## Rules
//! - A result's length is known before it is built and checked against 1 GB (54000), as
//!   the module rules of [`super`] say: `lpad` / `rpad` from the length asked for.
//! - Positions and lengths count characters, not bytes.

use quire_engine::{SqlState, Value};

use super::Func;
use crate::error::{Result, SqlError};
use crate::types::{self, SqlType};

/// A string function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StrFn {
    SplitPart,
    Chr,
    Ascii,
    Initcap,
    Translate,
    Reverse,
    /// lpad (`left`) and rpad.
    Pad {
        left: bool,
    },
    StartsWith,
    /// overlay(s PLACING r FROM start [FOR count]) of text.
    Overlay,
    /// octet_length, and bit_length (`bits`), of text or bytea.
    Length {
        bits: bool,
    },
    /// to_hex, to_oct and to_bin (`radix` 16, 8, 2) of int4 or int8 (`bytes`), negative
    /// values in two's complement.
    ToBase {
        bytes: u8,
        radix: u8,
    },
    /// crc32 (`castagnoli` false) and crc32c of bytea.
    Crc32 {
        castagnoli: bool,
    },
    Encode,
    Decode,
    /// like_escape(pattern, escape): the LIKE pattern with `escape` (one character, or
    /// none when empty) as its escape character rewritten with backslash as it (what
    /// `LIKE pattern ESCAPE escape` matches with).
    LikeEscape,
    /// similar_to_escape(pattern [, escape]): a SIMILAR TO pattern as the regular
    /// expression that matches the same (what `x SIMILAR TO p` matches with `~`).
    SimilarEscape,
    /// sha256, sha384, sha512 of bytea (`bits`).
    Sha {
        bits: u16,
    },
}

type Resolved = (Func, Vec<Option<SqlType>>, SqlType);

/// The function `name` for arguments of types `args`, if it is one of these.
pub(super) fn resolve(name: &str, args: &[SqlType]) -> Option<Resolved> {
    use SqlType as T;
    let text = Some(T::Text);
    let int = Some(T::Int4);
    let f = |f: StrFn, c: Vec<Option<SqlType>>, r: SqlType| Some((Func::Str(f), c, r));
    match (name, args) {
        ("split_part", [_, _, _]) => f(StrFn::SplitPart, vec![text, text, int], T::Text),
        ("chr", [_]) => f(StrFn::Chr, vec![int], T::Text),
        ("ascii", [_]) => f(StrFn::Ascii, vec![text], T::Int4),
        ("initcap", [_]) => f(StrFn::Initcap, vec![text], T::Text),
        ("translate", [_, _, _]) => f(StrFn::Translate, vec![text; 3], T::Text),
        ("reverse", [_]) => f(StrFn::Reverse, vec![text], T::Text),
        ("lpad" | "rpad", [_, _] | [_, _, _]) => {
            let mut c = vec![text, int];
            if args.len() == 3 {
                c.push(text);
            }
            let left = name == "lpad";
            f(StrFn::Pad { left }, c, T::Text)
        }
        ("starts_with", [_, _]) => f(StrFn::StartsWith, vec![text, text], T::Bool),
        ("overlay", [_, _, _] | [_, _, _, _]) => {
            let c = [text, text, Some(T::Int4), Some(T::Int4)];
            f(StrFn::Overlay, c[..args.len()].to_vec(), T::Text)
        }
        ("octet_length" | "bit_length", [a]) => {
            let c = if *a == T::Bytea { None } else { text };
            let bits = name == "bit_length";
            f(StrFn::Length { bits }, vec![c], T::Int4)
        }
        ("like_escape", [_, _]) => f(StrFn::LikeEscape, vec![text, text], T::Text),
        ("similar_to_escape", [_] | [_, _]) => {
            f(StrFn::SimilarEscape, vec![text; args.len()], T::Text)
        }
        ("encode", [_, _]) => f(StrFn::Encode, vec![Some(T::Bytea), text], T::Text),
        ("decode", [_, _]) => f(StrFn::Decode, vec![text, text], T::Bytea),
        ("sha256" | "sha384" | "sha512", [_]) => {
            let bits = name[3..].parse().ok()?;
            f(StrFn::Sha { bits }, vec![Some(T::Bytea)], T::Bytea)
        }
        ("to_hex" | "to_oct" | "to_bin", [a]) if a.is_int() || *a == T::Unknown => {
            let (c, bytes) = if *a == T::Int8 {
                (T::Int8, 8)
            } else {
                (T::Int4, 4)
            };
            let radix = match name {
                "to_hex" => 16,
                "to_oct" => 8,
                _ => 2,
            };
            f(StrFn::ToBase { bytes, radix }, vec![Some(c)], T::Text)
        }
        ("crc32" | "crc32c", [_]) => {
            let castagnoli = name == "crc32c";
            f(StrFn::Crc32 { castagnoli }, vec![Some(T::Bytea)], T::Int8)
        }
        _ => None,
    }
}

/// A text argument's string (`""` for another value: callers pass resolved types).
pub(super) fn text(v: &Value) -> &str {
    match v {
        Value::Text(s) => s,
        _ => "",
    }
}

/// An integer argument's value (0 for another value).
pub(super) fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        _ => 0,
    }
}

impl StrFn {
    /// Evaluates the function over non-NULL arguments of the resolved types.
    pub(super) fn call(self, args: &[Value]) -> Result<Value> {
        let a0 = args.first().unwrap_or(&Value::Null);
        Ok(match self {
            StrFn::SplitPart => split_part(text(a0), text(&args[1]), int(&args[2]))?,
            StrFn::Chr => Value::Text(chr(int(a0))?.to_string()),
            StrFn::Ascii => Value::Int(
                text(a0)
                    .chars()
                    .next()
                    .map_or(0, |c| i64::from(u32::from(c))),
            ),
            StrFn::Initcap => Value::Text(initcap(text(a0))),
            StrFn::Translate => Value::Text(translate(text(a0), text(&args[1]), text(&args[2]))),
            StrFn::Reverse => Value::Text(text(a0).chars().rev().collect()),
            StrFn::Pad { left } => {
                let fill = args.get(2).map_or(" ", text);
                pad(text(a0), int(&args[1]), fill, left)?
            }
            StrFn::StartsWith => Value::Bool(text(a0).starts_with(text(&args[1]))),
            StrFn::Overlay => overlay(
                text(a0),
                text(&args[1]),
                int(&args[2]),
                args.get(3).map(int),
            )?,
            StrFn::Length { bits } => {
                let bytes = match a0 {
                    Value::Bytea(b) => b.len(),
                    v => text(v).len(),
                };
                let n = i64::try_from(bytes).unwrap_or(i64::MAX);
                Value::Int(if bits { n * 8 } else { n })
            }
            StrFn::Encode => {
                let Value::Bytea(b) = a0 else {
                    return Err(types::internal("encode argument"));
                };
                Value::Text(encode(b, text(&args[1]))?)
            }
            StrFn::Decode => Value::Bytea(decode(text(a0), text(&args[1]))?),
            StrFn::LikeEscape => Value::Text(like_escape(text(a0), text(&args[1]))?),
            StrFn::SimilarEscape => Value::Text(similar_escape(text(a0), args.get(1).map(text))?),
            StrFn::Sha { bits } => {
                let Value::Bytea(b) = a0 else {
                    return Err(types::internal("sha argument"));
                };
                let alg = match bits {
                    256 => &ring::digest::SHA256,
                    384 => &ring::digest::SHA384,
                    _ => &ring::digest::SHA512,
                };
                Value::Bytea(ring::digest::digest(alg, b).as_ref().to_vec())
            }
            StrFn::ToBase { bytes, radix } => {
                let v = int(a0);
                let u = if bytes == 8 {
                    v.cast_unsigned()
                } else {
                    u64::from((v as i32).cast_unsigned())
                };
                Value::Text(match radix {
                    16 => format!("{u:x}"),
                    8 => format!("{u:o}"),
                    _ => format!("{u:b}"),
                })
            }
            StrFn::Crc32 { castagnoli } => {
                let Value::Bytea(b) = a0 else {
                    return Err(types::internal("crc32 argument"));
                };
                let crc = if castagnoli {
                    crc32c::crc32c(b)
                } else {
                    crc32_ieee(b)
                };
                Value::Int(i64::from(crc))
            }
        })
    }
}

/// CRC-32 as zlib and PostgreSQL 18's `crc32` compute it (reflected polynomial
/// 0xEDB88320), a bit at a time: the function is for checksums of values, not bulk data.
fn crc32_ieee(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

/// `split_part(s, delimiter, n)`: the n-th field from 1, or from the end when negative;
/// `''` past the last; 22023 for 0.
fn split_part(s: &str, delimiter: &str, n: i64) -> Result<Value> {
    if n == 0 {
        return Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            "field position must not be zero",
        ));
    }
    let fields: Vec<&str> = if delimiter.is_empty() {
        vec![s]
    } else {
        s.split(delimiter).collect()
    };
    let len = i64::try_from(fields.len()).unwrap_or(i64::MAX);
    let at = if n > 0 { n - 1 } else { len + n };
    Ok(Value::Text(
        usize::try_from(at)
            .ok()
            .and_then(|i| fields.get(i))
            .map_or_else(String::new, |f| (*f).to_string()),
    ))
}

/// `chr(n)`: the character with code point `n` (54000 for 0, negatives, surrogates and
/// beyond Unicode, as PostgreSQL's UTF-8 `chr`).
fn chr(n: i64) -> Result<char> {
    let too = |msg: String| SqlError::new(SqlState::PROGRAM_LIMIT_EXCEEDED, msg);
    if n == 0 {
        return Err(too("null character not permitted".into()));
    }
    if n < 0 {
        return Err(too("character number must be positive".into()));
    }
    let code = u32::try_from(n)
        .map_err(|_| too(format!("requested character too large for encoding: {n}")))?;
    if code > 0x10_FFFF {
        return Err(too(format!(
            "requested character too large for encoding: {n}"
        )));
    }
    char::from_u32(code)
        .ok_or_else(|| too(format!("requested character not valid for encoding: {n}")))
}

/// `initcap`: each word's first letter in upper case, the others in lower case; a word is
/// a run of letters and digits.
fn initcap(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_word = false;
    for c in s.chars() {
        if in_word {
            out.extend(c.to_lowercase());
        } else {
            out.extend(c.to_uppercase());
        }
        in_word = c.is_alphanumeric();
    }
    out
}

/// `translate(s, from, to)`: each character of `from` in `s` replaced by the one at its
/// place in `to`, or removed when `to` is shorter.
fn translate(s: &str, from: &str, to: &str) -> String {
    let from: Vec<char> = from.chars().collect();
    let to: Vec<char> = to.chars().collect();
    s.chars()
        .filter_map(|c| match from.iter().position(|&f| f == c) {
            Some(i) => to.get(i).copied(),
            None => Some(c),
        })
        .collect()
}

/// `lpad` / `rpad(s, length, fill)`: `s` cut to `length` characters, or filled up to it with
/// `fill` repeated (on the left for lpad).
fn pad(s: &str, length: i64, fill: &str, left: bool) -> Result<Value> {
    let Ok(length) = usize::try_from(length) else {
        return Ok(Value::Text(String::new()));
    };
    let have = s.chars().count();
    if have >= length || fill.is_empty() {
        return Ok(Value::Text(s.chars().take(length).collect()));
    }
    let need = length - have;
    let max_char = fill.chars().map(char::len_utf8).max().unwrap_or(1);
    types::check_requested_len(
        need.checked_mul(max_char)
            .and_then(|b| b.checked_add(s.len())),
    )?;
    let filler: String = fill.chars().cycle().take(need).collect();
    Ok(Value::Text(if left {
        filler + s
    } else {
        format!("{s}{filler}")
    }))
}

/// `like_escape(pattern, escape)`: `pattern` with backslash as its escape character.
fn like_escape(pattern: &str, escape: &str) -> Result<String> {
    let mut esc = escape.chars();
    let esc = match (esc.next(), esc.next()) {
        (None, _) => None,
        (Some(c), None) => Some(c),
        _ => {
            return Err(
                SqlError::new(SqlState::INVALID_ESCAPE_SEQUENCE, "invalid escape string")
                    .with_hint("Escape string must be empty or one character."),
            )
        }
    };
    types::check_requested_len(pattern.len().checked_mul(2))?;
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if Some(c) == esc {
            // A lone escape at the end stays one (the match may then fail on it).
            out.push('\\');
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else if c == '\\' {
            out.push_str("\\\\");
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

fn unrecognized(format: &str) -> SqlError {
    SqlError::new(
        SqlState::INVALID_PARAMETER_VALUE,
        format!("unrecognized encoding: \"{format}\""),
    )
}

/// `encode(bytes, format)`: hex (lower case), base64 (a newline after each 76 characters,
/// as PostgreSQL writes it) or escape (a backslash doubled, a zero byte and bytes from 0x80
/// as `\ooo`).
fn encode(b: &[u8], format: &str) -> Result<String> {
    use base64::Engine as _;
    use std::fmt::Write as _;
    types::check_requested_len(b.len().checked_mul(4))?;
    Ok(match format.to_ascii_lowercase().as_str() {
        "hex" => {
            let mut s = String::new();
            types::hex_encode(b, &mut s);
            s
        }
        "base64" => {
            let flat = base64::engine::general_purpose::STANDARD.encode(b);
            let lines: Vec<&str> = flat
                .as_bytes()
                .chunks(76)
                .map(|c| std::str::from_utf8(c).unwrap_or_default())
                .collect();
            lines.join("\n")
        }
        "escape" => {
            let mut s = String::with_capacity(b.len());
            for &x in b {
                match x {
                    b'\\' => s.push_str("\\\\"),
                    0 | 0x80.. => {
                        let _ = write!(s, "\\{x:03o}");
                    }
                    _ => s.push(char::from(x)),
                }
            }
            s
        }
        _ => return Err(unrecognized(format)),
    })
}

/// `decode(text, format)`: the inverse of [`encode`]; blanks between hex pairs
/// ([`types::hex_decode`]) and in base64 are skipped.
fn decode(t: &str, format: &str) -> Result<Vec<u8>> {
    use base64::Engine as _;
    let bad = |msg: String| SqlError::new(SqlState::INVALID_PARAMETER_VALUE, msg);
    match format.to_ascii_lowercase().as_str() {
        "hex" => types::hex_decode(t),
        "base64" => {
            let flat: String = t.chars().filter(|c| !c.is_ascii_whitespace()).collect();
            base64::engine::general_purpose::STANDARD
                .decode(flat.as_bytes())
                .map_err(|e| bad(format!("invalid base64 sequence: {e}")))
        }
        "escape" => types::parse_text(SqlType::Bytea, t).and_then(|v| match v {
            Value::Bytea(b) if !t.starts_with("\\x") => Ok(b),
            _ => Err(bad("invalid input syntax for type bytea".into())),
        }),
        _ => Err(unrecognized(format)),
    }
}

fn format_error(msg: impl Into<String>) -> SqlError {
    SqlError::new(SqlState::INVALID_PARAMETER_VALUE, msg)
}

/// A value as `format` and `concat` print it (arguments come as text, or boolean: see
/// `as_output_text`); `None` for NULL.
pub(super) fn format_arg(v: &Value) -> Option<std::borrow::Cow<'_, str>> {
    match v {
        Value::Null => None,
        Value::Text(t) => Some(std::borrow::Cow::Borrowed(t)),
        Value::Bool(b) => Some(std::borrow::Cow::Borrowed(if *b { "t" } else { "f" })),
        other => types::format_text(other, SqlType::Text).map(std::borrow::Cow::Owned),
    }
}

/// Reads digits at `chars` (a position or width); `None` if there are none.
fn format_number(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<Option<usize>> {
    let mut n: Option<usize> = None;
    while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
        chars.next();
        let d = usize::try_from(d).unwrap_or(0);
        n = Some(
            n.unwrap_or(0)
                .checked_mul(10)
                .and_then(|x| x.checked_add(d))
                .filter(|&x| x < (1 << 30))
                .ok_or_else(|| format_error("number is out of range"))?,
        );
    }
    Ok(n)
}

/// PostgreSQL's `format(formatstr, args...)`: `%[n$][-][width]{s|I|L}` and `%%`; a width
/// may be `*` or `*n$` (an argument; negative means left-justified).
pub(super) fn format(f: &str, args: &[Value]) -> Result<String> {
    let mut out = String::with_capacity(f.len());
    let mut chars = f.chars().peekable();
    let mut next_arg = 0usize;
    let arg = |i: usize| {
        args.get(i)
            .ok_or_else(|| format_error("too few arguments for format()"))
    };
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
            continue;
        }
        let unterminated = || format_error("unterminated format() type specifier");
        // An argument position: digits followed by `$` (else the digits are a width).
        let mut width: Option<usize> = None;
        let mut left = false;
        let n = format_number(&mut chars)?;
        if chars.peek() == Some(&'$') {
            chars.next();
            let n = n.filter(|&n| n > 0).ok_or_else(|| {
                format_error("format specifies argument 0, but arguments are numbered from 1")
            })?;
            next_arg = n - 1;
        } else {
            width = n;
        }
        if width.is_none() {
            while chars.peek() == Some(&'-') {
                chars.next();
                left = true;
            }
            if chars.peek() == Some(&'*') {
                chars.next();
                let at = match format_number(&mut chars)? {
                    Some(p) if chars.peek() == Some(&'$') => {
                        chars.next();
                        p.checked_sub(1).ok_or_else(unterminated)?
                    }
                    Some(_) => return Err(unterminated()),
                    None => {
                        next_arg += 1;
                        next_arg - 1
                    }
                };
                let w = match arg(at)? {
                    Value::Int(i) => *i,
                    Value::Text(t) => t.trim().parse::<i64>().map_err(|_| {
                        format_error(format!("invalid input syntax for type integer: \"{t}\""))
                    })?,
                    _ => 0, // NULL: no width
                };
                left |= w < 0;
                width = Some(usize::try_from(w.unsigned_abs()).unwrap_or(usize::MAX));
            } else {
                width = format_number(&mut chars)?;
            }
        }
        let kind = chars.next().ok_or_else(unterminated)?;
        if !matches!(kind, 's' | 'I' | 'L') {
            return Err(
                format_error(format!("unrecognized format() type specifier \"{kind}\""))
                    .with_hint("For a single \"%\" use \"%%\"."),
            );
        }
        let v = arg(next_arg)?;
        next_arg += 1;
        let piece: String = match (kind, format_arg(v)) {
            ('s', None) => String::new(),
            ('s', Some(t)) => t.into_owned(),
            ('I', None) => {
                return Err(SqlError::new(
                    SqlState::NULL_VALUE_NOT_ALLOWED,
                    "null values cannot be formatted as an SQL identifier",
                ))
            }
            ('I', Some(t)) => crate::parse::quote_ident(&t),
            (_, None) => "NULL".into(),
            (_, Some(t)) => super::quote_literal(&t),
        };
        let pad = width.unwrap_or(0).saturating_sub(piece.chars().count());
        types::check_growth(out.len(), piece.len().saturating_add(pad))?;
        if !left {
            out.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(&piece);
        if left {
            out.extend(std::iter::repeat_n(' ', pad));
        }
    }
    Ok(out)
}

/// PostgreSQL's `similar_escape_internal`: a SIMILAR TO pattern as a regular expression
/// anchored at both ends: `%` is `.*`, `_` is `.`, a group does not capture, `.`, `^`, `$`
/// and a backslash stand for themselves, and the escape character (default backslash, none
/// when empty) makes the next one literal; two escaped double quotes mark the part
/// `substring` returns.
/// `overlay(s PLACING r FROM start [FOR count])` (`textoverlay`): the characters of `s`
/// before `start`, then `r`, then those from `start + count` on (`count` defaults to `r`'s
/// length); 22011 for a start before the first character.
fn overlay(s: &str, r: &str, start: i64, count: Option<i64>) -> Result<Value> {
    let count = count.unwrap_or_else(|| i64::try_from(r.chars().count()).unwrap_or(i64::MAX));
    let resume = start.checked_add(count).ok_or_else(|| {
        SqlError::new(SqlState::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range")
    })?;
    if start < 1 {
        return Err(SqlError::new(
            SqlState::SUBSTRING_ERROR,
            "negative substring length not allowed",
        ));
    }
    let head = usize::try_from(start - 1).unwrap_or(usize::MAX);
    let tail = usize::try_from(resume.max(1) - 1).unwrap_or(usize::MAX);
    let mut out: String = s.chars().take(head).collect();
    out.push_str(r);
    out.extend(s.chars().skip(tail));
    crate::types::check_value_len(out.len())?;
    Ok(Value::Text(out))
}

pub(super) fn similar_escape(pattern: &str, escape: Option<&str>) -> Result<String> {
    let escape = match escape {
        None => Some('\\'),
        Some(e) => {
            let mut chars = e.chars();
            match (chars.next(), chars.next()) {
                (None, _) => None,
                (Some(c), None) => Some(c),
                _ => {
                    return Err(SqlError::new(
                        SqlState::INVALID_ESCAPE_SEQUENCE,
                        "invalid escape string",
                    )
                    .with_hint("Escape string must be empty or one character."))
                }
            }
        }
    };
    let mut out = String::with_capacity(pattern.len() + 8);
    out.push_str("^(?:");
    let (mut after_escape, mut in_class, mut quotes) = (false, false, 0);
    for c in pattern.chars() {
        if after_escape {
            if c == '"' && !in_class {
                out.push_str(match quotes {
                    0 => "){1,1}?(",
                    1 => "){1,1}(?:",
                    _ => {
                        return Err(SqlError::new(
                            SqlState::INVALID_USE_OF_ESCAPE_CHARACTER,
                            "SQL regular expression may not contain more than two escape-double-quote separators",
                        ))
                    }
                });
                quotes += 1;
            } else {
                out.push('\\');
                out.push(c);
            }
            after_escape = false;
        } else if Some(c) == escape {
            after_escape = true;
        } else if in_class {
            if c == '\\' {
                out.push('\\');
            }
            out.push(c);
            in_class = c != ']';
        } else {
            match c {
                '[' => {
                    out.push(c);
                    in_class = true;
                }
                '%' => out.push_str(".*"),
                '_' => out.push('.'),
                '(' => out.push_str("(?:"),
                '\\' | '.' | '^' | '$' => {
                    out.push('\\');
                    out.push(c);
                }
                c => out.push(c),
            }
        }
    }
    out.push_str(")$");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_part_counts_from_either_end() {
        let f = |s, d, n| match split_part(s, d, n) {
            Ok(Value::Text(t)) => t,
            other => panic!("{other:?}"),
        };
        assert_eq!(f("a,b,c", ",", 2), "b");
        assert_eq!(f("a,b,c", ",", -1), "c");
        assert_eq!(f("a,b,c", ",", 4), "");
        assert_eq!(f("a,b,c", ",", -4), "");
        assert_eq!(f("abc", "", 1), "abc");
        assert_eq!(f("abc", "", 2), "");
        assert!(split_part("a", ",", 0).is_err());
    }

    #[test]
    fn chr_refuses_what_utf8_cannot_hold() {
        assert_eq!(chr(65).ok(), Some('A'));
        assert_eq!(chr(0x1F600).ok(), Some('😀'));
        for bad in [0, -1, 0xD800, 0x11_0000, i64::MAX] {
            assert!(chr(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn pad_cuts_fills_and_bounds_its_result() {
        let p = |s, n, f, l| match pad(s, n, f, l) {
            Ok(Value::Text(t)) => t,
            other => panic!("{other:?}"),
        };
        assert_eq!(p("hi", 5, "xy", true), "xyxhi");
        assert_eq!(p("hi", 5, "xy", false), "hixyx");
        assert_eq!(p("hello", 3, "x", true), "hel");
        assert_eq!(p("hi", -1, "x", true), "");
        assert_eq!(p("hi", 5, "", true), "hi");
        assert!(pad("x", i64::from(i32::MAX), "é", true).is_err());
    }

    #[test]
    fn encodings_round_trip() {
        let bytes: Vec<u8> = (0..=255).collect();
        for format in ["hex", "base64", "escape"] {
            let text = encode(&bytes, format).expect("encodes");
            assert_eq!(decode(&text, format).expect("decodes"), bytes, "{format}");
        }
        assert_eq!(
            encode(b"a\\\x00", "escape").ok().as_deref(),
            Some("a\\\\\\000")
        );
        assert!(decode("abc", "hex").is_err());
        assert!(decode("zz", "hex").is_err());
        assert!(encode(b"x", "rot13").is_err());
    }

    #[test]
    fn initcap_and_translate() {
        assert_eq!(initcap("hi THOMAS o'neil2x"), "Hi Thomas O'Neil2x");
        assert_eq!(translate("12345", "143", "ax"), "a2x5");
    }
}
