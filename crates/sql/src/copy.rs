//! COPY's text, CSV and binary formats, as PostgreSQL reads and writes them.
//!
//! - Text and CSV: one row per line, fields split by the delimiter; in text format `\N` is
//!   NULL and backslash escapes (`\t`, `\n`, `\\`, octal, `\x` hex) stand for special
//!   characters; in CSV an unquoted empty field is NULL and double quotes enclose fields
//!   that hold delimiters, quotes or newlines.
//! - Binary: a header (`PGCOPY\n\377\r\n\0`, flags, extension length), then per row a
//!   16-bit field count and each field as a 32-bit length (-1 for NULL) and the value's
//!   binary form (`crate::types::binary`), then a count of -1 as the trailer.

use crate::error::{Result, SqlError};
use crate::parse::{CopyFormat, CopyStmt};
use crate::types::SqlType;
use quire_engine::{SqlState, Value};

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
        CopyFormat::Binary => Err(crate::types::internal("binary COPY line")),
    }
}

/// The binary format's signature, before its flags and header extension length.
const BINARY_SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";

/// The binary format's header: signature, no flags, no extension.
pub(crate) fn binary_header() -> Vec<u8> {
    let mut out = BINARY_SIGNATURE.to_vec();
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    out
}

/// The binary format's trailer.
pub(crate) fn binary_trailer() -> Vec<u8> {
    (-1i16).to_be_bytes().to_vec()
}

/// One row in the binary format; 54000 beyond `MAX_VALUE_BYTES`.
pub(crate) fn binary_row(row: &[Value], types: &[SqlType]) -> Result<Vec<u8>> {
    let count = i16::try_from(row.len()).map_err(|_| bad("too many columns for COPY"))?;
    let mut out = count.to_be_bytes().to_vec();
    for (v, &ty) in row.iter().zip(types) {
        match crate::types::binary::send(v, ty)? {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(b) => {
                crate::types::check_growth(out.len(), b.len().saturating_add(4))?;
                let len = i32::try_from(b.len()).map_err(|_| bad("field too large"))?;
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&b);
            }
        }
    }
    Ok(out)
}

/// What the next bytes of binary COPY data hold: each field of a row as its byte range in
/// the buffer (`None` for NULL), and how many bytes the item takes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BinaryItem {
    Header(usize),
    Row(Vec<Option<std::ops::Range<usize>>>, usize),
    Trailer(usize),
    /// The bytes end inside the item: more data is needed.
    Incomplete,
}

fn read_i32(buf: &[u8], at: usize) -> Option<i32> {
    buf.get(at..at + 4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// The next item of binary COPY data in `buf`: the header if `header` (still expected),
/// else a row of `columns` fields or the trailer. 22P04 for anything else.
pub(crate) fn binary_next(buf: &[u8], header: bool, columns: usize) -> Result<BinaryItem> {
    if header {
        let n = buf.len().min(BINARY_SIGNATURE.len());
        if buf[..n] != BINARY_SIGNATURE[..n] {
            return Err(bad("COPY file signature not recognized"));
        }
        if buf.len() < BINARY_SIGNATURE.len() + 8 {
            return Ok(BinaryItem::Incomplete);
        }
        // PostgreSQL's reader: bit 16 says OIDs follow; any other bit of the high half is
        // a critical flag it does not know.
        let flags = read_i32(buf, 11).unwrap_or(0).cast_unsigned();
        if flags & (1 << 16) != 0 {
            return Err(bad("invalid COPY file header (WITH OIDS)"));
        }
        if flags >> 16 != 0 {
            return Err(bad(
                "invalid COPY file header (unrecognized critical flags)",
            ));
        }
        let ext = usize::try_from(read_i32(buf, 15).unwrap_or(-1))
            .map_err(|_| bad("invalid COPY file header (wrong length)"))?;
        let len = 19usize.saturating_add(ext);
        return Ok(if buf.len() < len {
            BinaryItem::Incomplete
        } else {
            BinaryItem::Header(len)
        });
    }
    let Some(count) = buf.get(..2).map(|b| i16::from_be_bytes([b[0], b[1]])) else {
        return Ok(BinaryItem::Incomplete);
    };
    if count == -1 {
        return Ok(BinaryItem::Trailer(2));
    }
    if usize::try_from(count).ok() != Some(columns) {
        return Err(bad(format!(
            "row field count is {count}, expected {columns}"
        )));
    }
    let mut at = 2usize;
    let mut fields = Vec::with_capacity(columns);
    for _ in 0..columns {
        let Some(len) = read_i32(buf, at) else {
            return Ok(BinaryItem::Incomplete);
        };
        at += 4;
        if len == -1 {
            fields.push(None);
            continue;
        }
        let len = usize::try_from(len).map_err(|_| bad("invalid field size"))?;
        if buf.len() - at < len {
            return Ok(BinaryItem::Incomplete);
        }
        fields.push(Some(at..at + len));
        at += len;
    }
    Ok(BinaryItem::Row(fields, at))
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
            (Some(s), CopyFormat::Text | CopyFormat::Binary) => {
                escape_into(s, c.delimiter, &mut out);
            }
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
    fn binary_rows_round_trip_and_bad_data_is_refused() {
        let types = [SqlType::Int4, SqlType::Text, SqlType::INT2_ARRAY];
        let row = vec![Value::Int(7), Value::Null, Value::Text("{1,2}".into())];
        let mut data = binary_header();
        data.extend(binary_row(&row, &types).unwrap());
        data.extend(binary_trailer());
        let BinaryItem::Header(h) = binary_next(&data, true, 3).unwrap() else {
            panic!("no header")
        };
        let BinaryItem::Row(fields, n) = binary_next(&data[h..], false, 3).unwrap() else {
            panic!("no row")
        };
        let body = &data[h..];
        let back: Vec<Value> = fields
            .iter()
            .zip(types)
            .map(|(f, t)| {
                f.clone().map_or(Value::Null, |r| {
                    crate::types::binary::recv(&body[r], t).unwrap()
                })
            })
            .collect();
        assert_eq!(back, row);
        assert_eq!(
            binary_next(&data[h + n..], false, 3).unwrap(),
            BinaryItem::Trailer(2)
        );
        // Every prefix of a row is incomplete, never an error or a row.
        for cut in 0..n {
            assert_eq!(
                binary_next(&body[..cut], false, 3).unwrap(),
                BinaryItem::Incomplete
            );
        }
        assert!(binary_next(b"garbage", true, 3).is_err());
        assert!(binary_next(&body[..n], false, 2).is_err());
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
