//! `json` and `jsonb` values. A leaf: `types` calls the input functions, `func` and
//! `exec` call the operations.
//!
//! ## Rules
//! - `json` is kept as the text it was written in, checked by the parser without building
//!   anything (no memory beyond the text). Its operators read the text ([`members`]) and
//!   return pieces of it as written, as PostgreSQL's `json` functions do.
//! - `jsonb` is kept as its canonical text: the output of a parsed [`Jsonb`] tree, keys
//!   sorted (shorter first, then by bytes) without duplicates (the last one written wins),
//!   numbers as `numeric` prints them. One writer ([`Jsonb::to_text`]) makes every stored
//!   value, so equal values have equal texts except numbers of different scales (`1.0` and
//!   `1`), which [`Jsonb::compare`] finds equal as PostgreSQL does.
//! - A parse follows at most [`MAX_DEPTH`] levels (54001 beyond, as PostgreSQL's stack
//!   check) and holds at most [`MAX_PARSED_BYTES`] of tree (54000 beyond). Trees are
//!   dropped without recursion ([`Jsonb`]'s `Drop`); every recursive walk is bounded by the
//!   depth a parse allows plus one level per function applied.

use std::cmp::Ordering;
use std::ops::Range;

use quire_engine::{Numeric, SqlState, Value};

use crate::error::{Result, SqlError};

mod ops;
mod write;

pub(crate) use ops::{PathStep, SetMode};

/// Deepest nesting of arrays and objects a parse follows.
pub(crate) const MAX_DEPTH: usize = 6400;

/// The most bytes a parsed tree may take (PostgreSQL's 1 GB allocation limit).
pub(crate) const MAX_PARSED_BYTES: usize = 1 << 30;

/// What one node of a parsed tree is charged beyond its strings' bytes.
const NODE_BYTES: usize = 64;

/// A parsed JSON value, as jsonb models it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Jsonb {
    Null,
    Bool(bool),
    Number(Numeric),
    String(String),
    Array(Vec<Jsonb>),
    /// Pairs sorted by [`key_order`], keys unique.
    Object(Vec<(String, Jsonb)>),
}

impl Drop for Jsonb {
    fn drop(&mut self) {
        let mut stack = Vec::new();
        take_children(self, &mut stack);
        while let Some(mut v) = stack.pop() {
            take_children(&mut v, &mut stack);
        }
    }
}

fn take_children(v: &mut Jsonb, stack: &mut Vec<Jsonb>) {
    match v {
        Jsonb::Array(items) => stack.append(items),
        Jsonb::Object(pairs) => stack.extend(pairs.drain(..).map(|(_, v)| v)),
        _ => {}
    }
}

/// jsonb's order of object keys: shorter first, then by bytes.
pub(crate) fn key_order(a: &str, b: &str) -> Ordering {
    a.len()
        .cmp(&b.len())
        .then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

impl Jsonb {
    /// An object from pairs in any order: sorted by [`key_order`], a key written twice
    /// keeping its last value.
    pub(crate) fn object(mut pairs: Vec<(String, Jsonb)>) -> Jsonb {
        // Stable: equal keys stay in written order, and the last of each run is kept.
        pairs.sort_by(|a, b| key_order(&a.0, &b.0));
        let mut out: Vec<(String, Jsonb)> = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            match out.last_mut() {
                Some(last) if last.0 == k => last.1 = v,
                _ => out.push((k, v)),
            }
        }
        Jsonb::Object(out)
    }

    /// The value of key `k`, if this is an object that has it.
    pub(crate) fn get(&self, k: &str) -> Option<&Jsonb> {
        match self {
            Jsonb::Object(pairs) => pairs
                .binary_search_by(|(x, _)| key_order(x, k))
                .ok()
                .map(|i| &pairs[i].1),
            _ => None,
        }
    }

    pub(crate) fn is_scalar(&self) -> bool {
        !matches!(self, Jsonb::Array(_) | Jsonb::Object(_))
    }
}

/// The position of index `i` (negative counts from the end) in `len` elements.
pub(crate) fn array_index(len: usize, i: i64) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let i = if i < 0 { len + i } else { i };
    (0..len)
        .contains(&i)
        .then(|| usize::try_from(i).ok())
        .flatten()
}

/// json's input function: `text` unchanged when it is one JSON value (blanks around
/// allowed), 22P02 otherwise.
pub(crate) fn parse(text: &str) -> Result<Value> {
    let mut p = Parser::new(text, false);
    p.whole()?;
    Ok(Value::Text(text.to_string()))
}

/// Parses jsonb's input into its tree.
pub(crate) fn parse_jsonb(text: &str) -> Result<Jsonb> {
    Parser::new(text, true).whole()
}

/// Parses a json text into a tree that keeps its objects' keys as written (order and
/// duplicates), for the json functions that rebuild a document.
pub(crate) fn parse_json_tree(text: &str) -> Result<Jsonb> {
    let mut p = Parser::new(text, true);
    p.keep_order = true;
    p.whole()
}

/// jsonb's input function: the canonical text of `text`'s value.
pub(crate) fn jsonb_in(text: &str) -> Result<Value> {
    Ok(Value::Text(parse_jsonb(text)?.to_text()))
}

/// The tree of a stored jsonb value (its canonical text).
pub(crate) fn jsonb_of(v: &Value) -> Result<Jsonb> {
    match v {
        Value::Text(t) => parse_jsonb(t),
        _ => Err(SqlError::internal("jsonb value is not text")),
    }
}

/// The pieces of a json text one level down, as written.
pub(crate) enum Members {
    Object(Vec<(String, Range<usize>)>),
    Array(Vec<Range<usize>>),
    Scalar,
}

/// The members of the json value `text` (already checked to be JSON): an object's keys
/// (decoded) with the byte ranges of their values, an array's elements' ranges.
pub(crate) fn members(text: &str) -> Result<Members> {
    let mut p = Parser::new(text, false);
    p.blank();
    let r = match p.peek() {
        Some(b'{') => p.object_members().map(Members::Object),
        Some(b'[') => p.array_members().map(Members::Array),
        _ => Ok(Members::Scalar),
    };
    r.map_err(|d| p.fail(d))
}

/// The kind of the json value `text` (`json_typeof`).
pub(crate) fn json_type_name(text: &str) -> &'static str {
    let t = text.trim_start_matches([' ', '\t', '\n', '\r']);
    match t.as_bytes().first() {
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b'"') => "string",
        Some(b't' | b'f') => "boolean",
        Some(b'n') => "null",
        _ => "number",
    }
}

/// A json piece as `->>` gives it: a string decoded, `null` as SQL NULL, anything else as
/// written.
pub(crate) fn json_piece_text(piece: &str) -> Result<Value> {
    let t = piece.trim_matches([' ', '\t', '\n', '\r']);
    match t.as_bytes().first() {
        Some(b'"') => {
            let mut p = Parser::new(t, true);
            p.string().map(Value::Text).map_err(|d| p.fail(d))
        }
        Some(b'n') => Ok(Value::Null),
        _ => Ok(Value::Text(t.to_string())),
    }
}

fn syntax_error(detail: String) -> SqlError {
    SqlError::new(
        SqlState::INVALID_TEXT_REPRESENTATION,
        "invalid input syntax for type json",
    )
    .with_detail(detail)
}

/// Bytes that continue a token PostgreSQL's JSON lexer reads as one word.
fn word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

struct Parser<'a> {
    text: &'a str,
    s: &'a [u8],
    i: usize,
    /// Whether to build the tree (jsonb) or only check the text (json).
    build: bool,
    /// Whether objects keep their keys as written (json), not sorted and unique (jsonb).
    keep_order: bool,
    parsed_bytes: usize,
    /// Where the token an error is about ends (the CONTEXT shows the text up to it).
    err_end: usize,
    /// An error that is not a syntax error (depth, size, `\u0000`).
    hard: Option<SqlError>,
}

/// A step of the parse; its error is the DETAIL of a syntax error.
type Step<T> = std::result::Result<T, String>;

impl<'a> Parser<'a> {
    fn new(text: &'a str, build: bool) -> Self {
        Parser {
            text,
            s: text.as_bytes(),
            i: 0,
            build,
            keep_order: false,
            parsed_bytes: 0,
            err_end: 0,
            hard: None,
        }
    }

    fn fail(&mut self, detail: String) -> SqlError {
        match self.hard.take() {
            Some(e) => e,
            None => syntax_error(detail).with_context(self.context(self.err_end)),
        }
    }

    fn whole(&mut self) -> Result<Jsonb> {
        self.blank();
        let r = self.value(0, "JSON value");
        self.blank();
        match r {
            Ok(v) if self.i == self.s.len() => Ok(v),
            Ok(_) => {
                let detail = self.found("end of input");
                Err(self.fail(detail))
            }
            Err(detail) => Err(self.fail(detail)),
        }
    }

    /// PostgreSQL's CONTEXT of a JSON error: the line up to the end of the token (at most
    /// about 50 bytes of it), `...` around it where the text goes on.
    fn context(&self, end: usize) -> String {
        let mut end = end.min(self.s.len());
        while !self.text.is_char_boundary(end) {
            end += 1;
        }
        let line_start = self.text[..end].rfind('\n').map_or(0, |i| i + 1);
        let line = self.text[..line_start].matches('\n').count() + 1;
        let mut start = line_start;
        while end - start >= 50 {
            start += self.text[start..].chars().next().map_or(1, char::len_utf8);
        }
        if start - line_start <= 3 {
            start = line_start;
        }
        let prefix = if start > line_start { "..." } else { "" };
        let more = end < self.s.len() && !matches!(self.s[end], b'\n' | b'\r');
        let suffix = if more { "..." } else { "" };
        format!(
            "JSON data, line {line}: {prefix}{}{suffix}",
            &self.text[start..end]
        )
    }

    fn blank(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    /// The end of the token that starts at `at`, and whether it is a valid token.
    fn token_at(&self, at: usize) -> (usize, bool) {
        match self.s[at] {
            b'{' | b'}' | b'[' | b']' | b',' | b':' => (at + 1, true),
            b'"' => {
                let mut j = at + 1;
                while j < self.s.len() {
                    match self.s[j] {
                        b'"' => return (j + 1, true),
                        b'\\' => j += 2,
                        _ => j += 1,
                    }
                }
                (self.s.len(), false)
            }
            b'-' | b'0'..=b'9' => {
                let (end, ok) = number_end(self.s, at);
                let mut j = end;
                while j < self.s.len() && word_byte(self.s[j]) {
                    j += 1;
                }
                (j, ok && j == end)
            }
            _ => {
                let mut j = at;
                while j < self.s.len() && word_byte(self.s[j]) {
                    j += 1;
                }
                if j == at {
                    let c = self.text[at..].chars().next().map_or(1, char::len_utf8);
                    return (at + c, false);
                }
                let word = &self.s[at..j];
                (j, matches!(word, b"true" | b"false" | b"null"))
            }
        }
    }

    /// The error for the token at the current position where `expected` should be:
    /// PostgreSQL's "Expected ..., but found" for a valid token, "Token ... is invalid"
    /// otherwise, "ended unexpectedly" at the end.
    fn found(&mut self, expected: &str) -> String {
        if self.i >= self.s.len() {
            self.err_end = self.s.len();
            return "The input string ended unexpectedly.".into();
        }
        let (end, valid) = self.token_at(self.i);
        self.err_end = end;
        let token = String::from_utf8_lossy(&self.s[self.i..end]);
        if valid {
            format!("Expected {expected}, but found \"{token}\".")
        } else {
            format!("Token \"{token}\" is invalid.")
        }
    }

    /// A detail for an error whose context ends at `end`.
    fn at(&mut self, end: usize, detail: impl Into<String>) -> String {
        self.err_end = end;
        detail.into()
    }

    fn hard_error(&mut self, e: SqlError) -> String {
        self.hard = Some(e);
        String::new()
    }

    fn charge(&mut self, bytes: usize) -> Step<()> {
        if !self.build {
            return Ok(());
        }
        self.parsed_bytes = self.parsed_bytes.saturating_add(NODE_BYTES + bytes);
        if self.parsed_bytes > MAX_PARSED_BYTES {
            return Err(self.hard_error(SqlError::new(
                SqlState::PROGRAM_LIMIT_EXCEEDED,
                "total size of jsonb value exceeds the maximum of 1073741824 bytes",
            )));
        }
        Ok(())
    }

    /// A value where `expected` names what may come (for the error).
    fn value(&mut self, depth: usize, expected: &str) -> Step<Jsonb> {
        if depth > MAX_DEPTH {
            return Err(self.hard_error(crate::stack::too_deep()));
        }
        if let Err(e) = crate::stack::check_stack_depth() {
            return Err(self.hard_error(e));
        }
        self.charge(0)?;
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => {
                let s = self.string()?;
                self.charge(s.len())?;
                Ok(Jsonb::String(s))
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't' | b'f' | b'n') => {
                let (end, valid) = self.token_at(self.i);
                if !valid {
                    return Err(self.found(expected));
                }
                let v = match &self.s[self.i..end] {
                    b"true" => Jsonb::Bool(true),
                    b"false" => Jsonb::Bool(false),
                    _ => Jsonb::Null,
                };
                self.i = end;
                Ok(v)
            }
            _ => Err(self.found(expected)),
        }
    }

    /// After `{` or `[`: true (and past it) if the container closes with `close` at once.
    fn empty(&mut self, close: u8) -> bool {
        self.i += 1;
        self.blank();
        if self.peek() == Some(close) {
            self.i += 1;
            return true;
        }
        false
    }

    /// After a member: true at the container's end (past `close`), false after a comma.
    fn next_member(&mut self, close: u8) -> Step<bool> {
        self.blank();
        match self.peek() {
            Some(b',') => {
                self.i += 1;
                self.blank();
                Ok(false)
            }
            Some(c) if c == close => {
                self.i += 1;
                Ok(true)
            }
            _ if close == b']' => Err(self.found("\",\" or \"]\"")),
            _ => Err(self.found("\",\" or \"}\"")),
        }
    }

    fn key(&mut self, first: bool) -> Step<String> {
        if self.peek() != Some(b'"') {
            return Err(self.found(if first { "string or \"}\"" } else { "string" }));
        }
        let k = self.string()?;
        self.blank();
        if self.peek() != Some(b':') {
            return Err(self.found("\":\""));
        }
        self.i += 1;
        self.blank();
        Ok(k)
    }

    fn object(&mut self, depth: usize) -> Step<Jsonb> {
        let mut pairs = Vec::new();
        if !self.empty(b'}') {
            let mut first = true;
            loop {
                let k = self.key(first)?;
                first = false;
                self.charge(k.len())?;
                let v = self.value(depth + 1, "JSON value")?;
                if self.build {
                    pairs.push((k, v));
                }
                if self.next_member(b'}')? {
                    break;
                }
            }
        }
        Ok(match (self.build, self.keep_order) {
            (false, _) => Jsonb::Null,
            (true, true) => Jsonb::Object(pairs),
            (true, false) => Jsonb::object(pairs),
        })
    }

    fn array(&mut self, depth: usize) -> Step<Jsonb> {
        let mut items = Vec::new();
        if !self.empty(b']') {
            let mut expected = "array element or \"]\"";
            loop {
                let v = self.value(depth + 1, expected)?;
                expected = "JSON value";
                if self.build {
                    items.push(v);
                }
                if self.next_member(b']')? {
                    break;
                }
            }
        }
        Ok(Jsonb::Array(items))
    }

    /// An object's members one level down: keys decoded, values' byte ranges.
    fn object_members(&mut self) -> Step<Vec<(String, Range<usize>)>> {
        let build = std::mem::replace(&mut self.build, true);
        let mut out = Vec::new();
        if !self.empty(b'}') {
            let mut first = true;
            loop {
                let k = self.key(first)?;
                first = false;
                self.build = false;
                let start = self.i;
                self.value(1, "JSON value")?;
                self.build = true;
                out.push((k, start..self.i));
                if self.next_member(b'}')? {
                    break;
                }
            }
        }
        self.build = build;
        Ok(out)
    }

    fn array_members(&mut self) -> Step<Vec<Range<usize>>> {
        let mut out = Vec::new();
        if !self.empty(b']') {
            loop {
                let start = self.i;
                self.value(1, "array element or \"]\"")?;
                out.push(start..self.i);
                if self.next_member(b']')? {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// A string, decoded when building (checked only, and empty, when not).
    fn string(&mut self) -> Step<String> {
        let start = self.i;
        self.i += 1; // the opening quote
        let mut out = Vec::new();
        let mut high: Option<u32> = None;
        while let Some(b) = self.peek() {
            self.i += 1;
            match b {
                b'"' => {
                    if high.is_some() && self.build {
                        return Err(self.low_surrogate_missing());
                    }
                    return String::from_utf8(out).map_err(|_| "invalid UTF-8".into());
                }
                b'\\' => self.escape(&mut out, &mut high)?,
                0..=0x1f => {
                    let end = self.i - 1;
                    return Err(self.at(
                        end,
                        format!("Character with value 0x{b:02x} must be escaped."),
                    ));
                }
                _ => {
                    if high.is_some() && self.build {
                        return Err(self.low_surrogate_missing());
                    }
                    if self.build {
                        out.push(b);
                    }
                }
            }
        }
        let token = String::from_utf8_lossy(&self.s[start..]).into_owned();
        let end = self.s.len();
        Err(self.at(end, format!("Token \"{token}\" is invalid.")))
    }

    fn low_surrogate_missing(&mut self) -> String {
        let end = self.i;
        self.at(end, "Unicode low surrogate must follow a high surrogate.")
    }

    /// The escape after a backslash, appended to `out` when building; `high` holds a high
    /// surrogate waiting for its low half.
    fn escape(&mut self, out: &mut Vec<u8>, high: &mut Option<u32>) -> Step<()> {
        let c = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => return self.unicode_escape(out, high),
            Some(_) => {
                let c = self.text[self.i..].chars().next().unwrap_or('?');
                let end = self.i + c.len_utf8();
                return Err(self.at(end, format!("Escape sequence \"\\{c}\" is invalid.")));
            }
            None => {
                let end = self.s.len();
                return Err(self.at(end, "The input string ended unexpectedly."));
            }
        };
        self.i += 1;
        if self.build {
            if high.is_some() {
                return Err(self.low_surrogate_missing());
            }
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
        Ok(())
    }

    fn unicode_escape(&mut self, out: &mut Vec<u8>, high: &mut Option<u32>) -> Step<()> {
        let hex = self.s.get(self.i + 1..self.i + 5);
        let Some(code) = hex
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok())
        else {
            let digits = self.s[self.i + 1..]
                .iter()
                .take(4)
                .take_while(|b| b.is_ascii_hexdigit())
                .count();
            let end = self.i + 2 + digits;
            return Err(self.at(end, "\"\\u\" must be followed by four hexadecimal digits."));
        };
        self.i += 5;
        if !self.build {
            return Ok(());
        }
        let c = match (code, high.take()) {
            (0xD800..=0xDBFF, None) => {
                *high = Some(code);
                return Ok(());
            }
            (0xD800..=0xDBFF, Some(_)) => {
                let end = self.i;
                return Err(self.at(
                    end,
                    "Unicode high surrogate must not follow a high surrogate.",
                ));
            }
            (0xDC00..=0xDFFF, Some(h)) => 0x10000 + ((h - 0xD800) << 10) + (code - 0xDC00),
            (0xDC00..=0xDFFF, None) | (_, Some(_)) => return Err(self.low_surrogate_missing()),
            (0, None) => {
                let context = self.context(self.i);
                return Err(self.hard_error(
                    SqlError::new(
                        SqlState::UNTRANSLATABLE_CHARACTER,
                        "unsupported Unicode escape sequence",
                    )
                    .with_detail("\\u0000 cannot be converted to text.")
                    .with_context(context),
                ));
            }
            (c, None) => c,
        };
        let c = char::from_u32(c).ok_or("invalid Unicode code point")?;
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        Ok(())
    }

    fn number(&mut self) -> Step<Jsonb> {
        let (end, valid) = self.token_at(self.i);
        if !valid {
            return Err(self.found("JSON value"));
        }
        let start = self.i;
        self.i = end;
        if !self.build {
            return Ok(Jsonb::Null);
        }
        match crate::numeric::parse(&self.text[start..end]) {
            Ok(n) => Ok(Jsonb::Number(n)),
            Err(e) => Err(self.hard_error(e)),
        }
    }
}

/// Where the JSON number starting at `at` ends, and whether it is well formed (an
/// optional minus, digits without a leading zero, a fraction, an exponent).
fn number_end(s: &[u8], at: usize) -> (usize, bool) {
    let mut i = at;
    if s.get(i) == Some(&b'-') {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let from = *i;
        while s.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - from
    };
    let int = digits(&mut i);
    let leading_zero = int > 1 && s[i - int] == b'0';
    let mut ok = int > 0 && !leading_zero;
    if ok && s.get(i) == Some(&b'.') {
        i += 1;
        ok = digits(&mut i) > 0;
    }
    if ok && matches!(s.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(s.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        ok = digits(&mut i) > 0;
    }
    (i, ok)
}

/// `s` as a JSON string, escaped as PostgreSQL's `escape_json` does.
pub(crate) fn push_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                use std::fmt::Write as _;
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests;
