//! COPY's text and CSV formats, as PostgreSQL reads and writes them: one row per line,
//! fields split by the delimiter; in text format `\N` is NULL and backslash escapes
//! (`\t`, `\n`, `\\`, octal, `\x` hex) stand for special characters; in CSV an unquoted
//! empty field is NULL and double quotes enclose fields that hold delimiters, quotes or
//! newlines.

use crate::error::{Result, SqlError};
use crate::parse::{CopyFormat, CopyStmt};
use quire_engine::SqlState;

/// Finds line ends in COPY data: every newline in text format (data newlines are escaped
/// as `\n`), newlines outside quotes in CSV.
pub(crate) struct Lines<'a> {
    buf: &'a [u8],
    pos: usize,
    csv: bool,
}

impl<'a> Lines<'a> {
    pub(crate) fn new(buf: &'a [u8], format: CopyFormat) -> Lines<'a> {
        Lines {
            buf,
            pos: 0,
            csv: format == CopyFormat::Csv,
        }
    }

    /// The index of the next line's terminating newline, if the buffer holds one.
    pub(crate) fn next_end(&mut self) -> Option<usize> {
        let mut quoted = false;
        let start = self.pos;
        let mut i = start;
        while i < self.buf.len() {
            match self.buf[i] {
                b'"' if self.csv => quoted = !quoted,
                b'\n' if !quoted => {
                    self.pos = i + 1;
                    return Some(i);
                }
                _ => {}
            }
            i += 1;
        }
        None
    }
}

fn bad(message: impl Into<String>) -> SqlError {
    SqlError::new(SqlState::BAD_COPY_FILE_FORMAT, message)
}

/// The fields of one line (`None` for NULL).
pub(crate) fn parse_line(line: &[u8], c: &CopyStmt) -> Result<Vec<Option<String>>> {
    let text = std::str::from_utf8(line).map_err(|_| {
        SqlError::new(
            SqlState::CHARACTER_NOT_IN_REPERTOIRE,
            "invalid byte sequence for encoding \"UTF8\" in COPY data",
        )
    })?;
    match c.format {
        CopyFormat::Text => Ok(text
            .split(c.delimiter)
            .map(|f| {
                if f == c.null {
                    Ok(None)
                } else {
                    unescape(f).map(Some)
                }
            })
            .collect::<Result<_>>()?),
        CopyFormat::Csv => csv_fields(text, c),
    }
}

/// Text format's backslash escapes.
fn unescape(f: &str) -> Result<String> {
    if !f.contains('\\') {
        return Ok(f.to_string());
    }
    let mut out = String::with_capacity(f.len());
    let mut chars = f.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch != '\\' {
            out.push(ch);
            continue;
        }
        let Some(e) = chars.next() else {
            return Err(bad("unterminated backslash escape in COPY data"));
        };
        match e {
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            'x' => {
                let mut v = 0u32;
                let mut n = 0;
                while n < 2 && chars.peek().is_some_and(char::is_ascii_hexdigit) {
                    v = v * 16 + chars.next().and_then(|d| d.to_digit(16)).unwrap_or(0);
                    n += 1;
                }
                out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
            }
            '0'..='7' => {
                let mut v = e.to_digit(8).unwrap_or(0);
                let mut n = 1;
                while n < 3 && chars.peek().is_some_and(|d| ('0'..='7').contains(d)) {
                    v = v * 8 + chars.next().and_then(|d| d.to_digit(8)).unwrap_or(0);
                    n += 1;
                }
                out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

fn csv_fields(line: &str, c: &CopyStmt) -> Result<Vec<Option<String>>> {
    let mut fields = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        let mut field = String::new();
        let mut quoted = false;
        if chars.peek() == Some(&'"') {
            quoted = true;
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(ch) => field.push(ch),
                    None => return Err(bad("unterminated CSV quoted field")),
                }
            }
        }
        while let Some(&ch) = chars.peek() {
            if ch == c.delimiter {
                break;
            }
            field.push(ch);
            chars.next();
        }
        fields.push(if !quoted && field == c.null {
            None
        } else {
            Some(field)
        });
        if chars.next().is_none() {
            return Ok(fields);
        }
    }
}

/// One line of COPY TO output, with its newline; 54000 for a line beyond
/// [`crate::types::MAX_VALUE_BYTES`] (PostgreSQL's limit on its line buffer), found as
/// each field is added, before it is copied (escapes at most double a field).
pub(crate) fn format_line(fields: &[Option<String>], c: &CopyStmt) -> Result<Vec<u8>> {
    let mut out = String::new();
    for (i, f) in fields.iter().enumerate() {
        let field_bytes = f
            .as_ref()
            .map_or(c.null.len(), |s| s.len().saturating_mul(2) + 2);
        crate::types::check_growth(out.len(), field_bytes.saturating_add(1))?;
        if i > 0 {
            out.push(c.delimiter);
        }
        match (f, c.format) {
            (None, _) => out.push_str(&c.null),
            (Some(s), CopyFormat::Text) => escape_into(s, c.delimiter, &mut out),
            (Some(s), CopyFormat::Csv) => {
                let needs =
                    s.is_empty() || s.contains([c.delimiter, '"', '\n', '\r']) || *s == c.null;
                if needs {
                    out.push('"');
                    out.push_str(&s.replace('"', "\"\""));
                    out.push('"');
                } else {
                    out.push_str(s);
                }
            }
        }
    }
    out.push('\n');
    Ok(out.into_bytes())
}

fn escape_into(s: &str, delimiter: char, out: &mut String) {
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' if delimiter == '\t' => out.push_str("\\t"),
            ch if ch == delimiter => {
                out.push('\\');
                out.push(ch);
            }
            ch => out.push(ch),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stmt(format: CopyFormat) -> CopyStmt {
        CopyStmt {
            query: None,
            table: "t".into(),
            columns: Vec::new(),
            from: true,
            format,
            delimiter: if format == CopyFormat::Csv { ',' } else { '\t' },
            null: if format == CopyFormat::Csv {
                String::new()
            } else {
                "\\N".into()
            },
            header: false,
        }
    }

    #[test]
    fn text_lines_round_trip_with_escapes_and_nulls() {
        let c = stmt(CopyFormat::Text);
        let fields = vec![Some("a\tb\\c\nd".to_string()), None, Some(String::new())];
        let line = format_line(&fields, &c).unwrap();
        assert_eq!(line, b"a\\tb\\\\c\\nd\t\\N\t\n");
        let parsed = parse_line(&line[..line.len() - 1], &c).unwrap();
        assert_eq!(parsed, fields);
        assert_eq!(
            parse_line(b"\\101\\x42", &c).unwrap(),
            vec![Some("AB".to_string())]
        );
    }

    #[test]
    fn csv_quotes_delimiters_quotes_and_newlines() {
        let c = stmt(CopyFormat::Csv);
        let fields = vec![
            Some("x,y".to_string()),
            Some("say \"hi\"".into()),
            None,
            Some(String::new()),
        ];
        let line = format_line(&fields, &c).unwrap();
        assert_eq!(line, b"\"x,y\",\"say \"\"hi\"\"\",,\"\"\n");
        assert_eq!(parse_line(&line[..line.len() - 1], &c).unwrap(), fields);
        let data = b"1,\"a\nb\"\n2,c\n";
        let mut lines = Lines::new(data, CopyFormat::Csv);
        assert_eq!(lines.next_end(), Some(7));
        assert_eq!(lines.next_end(), Some(11));
        assert_eq!(lines.next_end(), None);
        assert!(parse_line(b"\"open", &c).is_err());
    }
}
