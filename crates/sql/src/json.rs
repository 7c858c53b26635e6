//! The `json` type's text: the input function (the text kept as it was written, once
//! checked to be JSON as PostgreSQL's json parser reads it) and the escaping of strings in
//! JSON output. A leaf: `types` calls the input function, `func` builds json values.
//! quire has no `jsonb` and no json operators yet.

use quire_engine::{SqlState, Value};

use crate::error::{Result, SqlError};

/// Deepest nesting of arrays and objects the parser follows (PostgreSQL stops at
/// `max_stack_depth`; this bounds the recursion the same way).
const MAX_DEPTH: usize = 6400;

/// json's input function: `text` unchanged when it is one JSON value (blanks around
/// allowed), 22P02 otherwise.
pub(crate) fn parse(text: &str) -> Result<Value> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    p.blank();
    let r = p.value(0);
    p.blank();
    match r {
        Ok(()) if p.i == p.s.len() => Ok(Value::Text(text.to_string())),
        Ok(()) => Err(bad(format!("Token \"{}\" is invalid.", p.token()))),
        Err(detail) => Err(bad(detail)),
    }
}

fn bad(detail: String) -> SqlError {
    let e = SqlError::new(
        SqlState::INVALID_TEXT_REPRESENTATION,
        "invalid input syntax for type json",
    );
    e.with_detail(detail)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

type Step = std::result::Result<(), String>;

impl Parser<'_> {
    fn blank(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    /// The token at the current position, for an error's detail.
    fn token(&self) -> String {
        let rest = &self.s[self.i.min(self.s.len())..];
        let n = rest
            .iter()
            .position(|b| !b.is_ascii_alphanumeric())
            .unwrap_or(rest.len())
            .max(1)
            .min(rest.len());
        String::from_utf8_lossy(&rest[..n]).into_owned()
    }

    fn unexpected(&self) -> String {
        if self.i >= self.s.len() {
            "The input string ended unexpectedly.".into()
        } else {
            format!("Token \"{}\" is invalid.", self.token())
        }
    }

    fn value(&mut self, depth: usize) -> Step {
        if depth > MAX_DEPTH {
            return Err("JSON nested too deep.".into());
        }
        match self.peek() {
            Some(b'{') => {
                self.i += 1;
                self.blank();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    if self.peek() != Some(b'"') {
                        return Err(self.unexpected());
                    }
                    self.string()?;
                    self.blank();
                    if self.peek() != Some(b':') {
                        return Err(self.unexpected());
                    }
                    self.i += 1;
                    self.blank();
                    self.value(depth + 1)?;
                    self.blank();
                    match self.peek() {
                        Some(b',') => {
                            self.i += 1;
                            self.blank();
                        }
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return Err(self.unexpected()),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                self.blank();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.value(depth + 1)?;
                    self.blank();
                    match self.peek() {
                        Some(b',') => {
                            self.i += 1;
                            self.blank();
                        }
                        Some(b']') => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return Err(self.unexpected()),
                    }
                }
            }
            Some(b'"') => self.string(),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't' | b'f' | b'n') => {
                let word = self.token();
                if matches!(word.as_str(), "true" | "false" | "null") {
                    self.i += word.len();
                    Ok(())
                } else {
                    Err(self.unexpected())
                }
            }
            _ => Err(self.unexpected()),
        }
    }

    fn string(&mut self) -> Step {
        self.i += 1; // the opening quote
        while let Some(b) = self.peek() {
            self.i += 1;
            match b {
                b'"' => return Ok(()),
                b'\\' => match self.peek() {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.i += 1,
                    Some(b'u') => {
                        let hex = self.s.get(self.i + 1..self.i + 5);
                        if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                            return Err(
                                "\"\\u\" must be followed by four hexadecimal digits.".into()
                            );
                        }
                        self.i += 5;
                    }
                    _ => {
                        return Err(format!(
                            "Escape sequence \"\\{}\" is invalid.",
                            self.token()
                        ))
                    }
                },
                0..=0x1f => return Err(format!("Character with value 0x{b:02x} must be escaped.")),
                _ => {}
            }
        }
        Err("The input string ended unexpectedly.".into())
    }

    fn number(&mut self) -> Step {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let digits = |p: &mut Self| {
            let from = p.i;
            while p.peek().is_some_and(|b| b.is_ascii_digit()) {
                p.i += 1;
            }
            p.i - from
        };
        let int = digits(self);
        let leading_zero = int > 1 && self.s[self.i - int] == b'0';
        let mut ok = int > 0 && !leading_zero;
        if ok && self.peek() == Some(b'.') {
            self.i += 1;
            ok = digits(self) > 0;
        }
        if ok && matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            ok = digits(self) > 0;
        }
        if ok && !self.peek().is_some_and(|b| b.is_ascii_alphanumeric()) {
            return Ok(());
        }
        self.i = start;
        Err(self.unexpected())
    }
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
