//! Long lists of constants kept as their text. `x IN (1, 2, 3, ...)` and
//! `VALUES (1, 'a'), (2, 'b'), ...` with many plain constants cost `sqlparser` about 300
//! bytes of memory per byte of text (a token of 88 bytes, an expression of 328, for each
//! `1,`); a 20 MB list took 5.7 GB. So `crate::parse` finds such lists before tokenizing
//! and hands `sqlparser` each as one placeholder token holding the list's text; the binder
//! reads the constants from that text ([`run_text`], [`Rows`]) straight into bound
//! expressions, as it would have bound each constant.
//!
//! ## Rules
//! - A list is taken only if all its elements are plain constants: numbers (with a sign),
//!   standard strings (`'it''s'`), NULL, TRUE and FALSE, separated by commas, and there
//!   are at least [`MIN_RUN_ELEMENTS`] of them. Anything else (an expression, a cast, an
//!   `E'...'` string, a parameter) leaves the list to `sqlparser`.
//! - Only the list of `IN (...)` and the rows after `VALUES` are taken.
//! - The placeholder's text is the list's text with one space before it, so that it shows
//!   as written when the statement is printed, and so that no placeholder a client writes
//!   (`$1`, `?`) can pass for one: `sqlparser` never starts those with a space.
//! - A constant binds exactly as `sqlparser`'s literal for it would (the binder's own
//!   `literal` and `number` functions): the lists are an encoding, not a second grammar.

use std::borrow::Cow;

/// Fewest elements (a list's constants, or VALUES' rows) a list must have to be kept as
/// text: below it, `sqlparser`'s cost does not matter.
pub(crate) const MIN_RUN_ELEMENTS: usize = 256;

/// A plain constant of a kept list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Literal<'a> {
    /// A number as written, its minus sign included.
    Number(Cow<'a, str>),
    /// A string's contents (doubled quotes undone).
    String(Cow<'a, str>),
    Null,
    Bool(bool),
}

/// A kept list's text, if `placeholder` (a placeholder token's text) is one.
pub(crate) fn run_text(placeholder: &str) -> Option<&str> {
    placeholder.strip_prefix(' ')
}

/// The placeholder text for a kept list.
pub(crate) fn placeholder(run: &str) -> String {
    format!(" {run}")
}

fn skip_space(s: &str) -> &str {
    s.trim_start_matches(|c: char| c.is_ascii_whitespace())
}

/// Whether `b` continues a word (letters, digits, `_`, `$`, non-ASCII).
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// The constant at the start of `s` (no leading space), and the rest.
fn literal(s: &str) -> Option<(Literal<'_>, &str)> {
    let b = s.as_bytes();
    match *b.first()? {
        b'\'' => string(s),
        b'-' | b'+' | b'0'..=b'9' | b'.' => number(s),
        _ => {
            let end = b.iter().position(|&c| !is_word_byte(c)).unwrap_or(b.len());
            let lit = match s[..end].to_ascii_lowercase().as_str() {
                "null" => Literal::Null,
                "true" => Literal::Bool(true),
                "false" => Literal::Bool(false),
                _ => return None,
            };
            Some((lit, &s[end..]))
        }
    }
}

/// A standard string `'...'` (a doubled quote stands for one; a backslash is itself).
fn string(s: &str) -> Option<(Literal<'_>, &str)> {
    let b = s.as_bytes();
    let mut i = 1;
    let mut doubled = false;
    loop {
        match b.get(i)? {
            b'\'' if b.get(i + 1) == Some(&b'\'') => {
                doubled = true;
                i += 2;
            }
            b'\'' => break,
            _ => i += 1,
        }
    }
    let body = &s[1..i];
    let text = if doubled {
        Cow::Owned(body.replace("''", "'"))
    } else {
        Cow::Borrowed(body)
    };
    Some((Literal::String(text), &s[i + 1..]))
}

/// A number: `[+-]digits[.digits][e[+-]digits]` or `[+-].digits...`, not followed by a
/// word character (`1e` or `0x1F` are left to `sqlparser`). A `+` is dropped.
fn number(s: &str) -> Option<(Literal<'_>, &str)> {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b[0], b'-' | b'+'));
    let digits = |mut j: usize| {
        while b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        j
    };
    let int_end = digits(i);
    let mut end = int_end;
    if b.get(end) == Some(&b'.') {
        end = digits(end + 1);
    }
    if end == i || (end == int_end + 1 && int_end == i) {
        return None; // no digit at all ("-", ".", "-.")
    }
    if matches!(b.get(end), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(b.get(end + 1), Some(b'-' | b'+')));
        let exp_end = digits(end + 1 + sign);
        if exp_end == end + 1 + sign {
            return None;
        }
        end = exp_end;
    }
    if b.get(end).is_some_and(|&c| is_word_byte(c) || c == b'.') {
        return None;
    }
    let text = if b[0] == b'+' {
        i = 1;
        Cow::Borrowed(&s[i..end])
    } else {
        Cow::Borrowed(&s[..end])
    };
    Some((Literal::Number(text), &s[end..]))
}

/// The constants of one row at the start of `s`, up to (not including) its `)`: their
/// count and the rest from the `)`.
fn row(s: &str) -> Option<(usize, &str)> {
    let mut rest = skip_space(s);
    let mut count = 0;
    loop {
        let (_, after) = literal(rest)?;
        count += 1;
        rest = skip_space(after);
        match rest.as_bytes().first()? {
            b',' => rest = skip_space(&rest[1..]),
            b')' => return Some((count, rest)),
            _ => return None,
        }
    }
}

/// The list of constants just after an `IN (`: `s` starts after the `(`. Its byte length
/// (up to the `)`), if it is a list of at least [`MIN_RUN_ELEMENTS`] constants.
pub(crate) fn in_list_at(s: &str) -> Option<usize> {
    let (count, rest) = row(s)?;
    (count >= MIN_RUN_ELEMENTS).then(|| s.len() - rest.len())
}

/// The rows of constants after a `VALUES`: `s` starts just after the first row's `(`.
/// The byte length up to the last row's `)`, if there are at least [`MIN_RUN_ELEMENTS`]
/// rows and nothing but constants in them.
pub(crate) fn values_rows_at(s: &str) -> Option<usize> {
    let mut rest = s;
    let mut rows = 0;
    loop {
        let (_, at_close) = row(rest)?;
        rows += 1;
        let after = skip_space(&at_close[1..]);
        match after.strip_prefix(',').map(skip_space) {
            Some(next) if next.starts_with('(') => rest = &next[1..],
            _ => return (rows >= MIN_RUN_ELEMENTS).then(|| s.len() - at_close.len()),
        }
    }
}

/// The constants of a kept list's text, one at a time (an IN list's; no row is built).
/// The text was checked when it was kept; one that does not read so ends with `Err`.
pub(crate) fn constants(run: &str) -> impl Iterator<Item = Result<Literal<'_>, ()>> {
    let mut rest = Some(skip_space(run));
    std::iter::from_fn(move || {
        let s = rest.take()?;
        let Some((lit, after)) = literal(s) else {
            return Some(Err(()));
        };
        let after = skip_space(after);
        match after.as_bytes().first() {
            None => {}
            Some(b',') => rest = Some(skip_space(&after[1..])),
            Some(_) => return Some(Err(())),
        }
        Some(Ok(lit))
    })
}

/// The rows of a kept list's text (an IN list is one row): each row's constants in order.
/// The text was checked when it was kept; a text that does not read so ends the rows with
/// `Err` (a bug, reported as XX000 by the caller).
pub(crate) struct Rows<'a> {
    rest: &'a str,
    done: bool,
}

impl<'a> Rows<'a> {
    pub(crate) fn new(run: &'a str) -> Self {
        Rows {
            rest: run,
            done: false,
        }
    }
}

impl<'a> Iterator for Rows<'a> {
    type Item = Result<Vec<Literal<'a>>, ()>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut out = Vec::new();
        let mut rest = skip_space(self.rest);
        loop {
            let Some((lit, after)) = literal(rest) else {
                self.done = true;
                return Some(Err(()));
            };
            out.push(lit);
            rest = skip_space(after);
            match rest.as_bytes().first() {
                Some(b',') => rest = skip_space(&rest[1..]),
                None => {
                    self.done = true;
                    return Some(Ok(out));
                }
                Some(b')') => {
                    // `), (` between two rows.
                    let next = skip_space(&rest[1..]);
                    let Some(next) = next.strip_prefix(',').map(skip_space) else {
                        self.done = true;
                        return Some(Err(()));
                    };
                    let Some(next) = next.strip_prefix('(') else {
                        self.done = true;
                        return Some(Err(()));
                    };
                    self.rest = next;
                    return Some(Ok(out));
                }
                Some(_) => {
                    self.done = true;
                    return Some(Err(()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(n: usize, item: &str) -> String {
        vec![item; n].join(", ")
    }

    #[test]
    fn constants_read_as_sqlparser_reads_them() {
        let rows: Vec<_> = Rows::new("1, -2.5e3, +7, 'it''s', '', NULL, true, FaLsE, .5")
            .collect::<Result<_, ()>>()
            .unwrap();
        assert_eq!(
            rows,
            [vec![
                Literal::Number("1".into()),
                Literal::Number("-2.5e3".into()),
                Literal::Number("7".into()),
                Literal::String("it's".into()),
                Literal::String("".into()),
                Literal::Null,
                Literal::Bool(true),
                Literal::Bool(false),
                Literal::Number(".5".into()),
            ]]
        );
        let rows: Vec<_> = Rows::new("1, 'a'), (2, 'b' ) ,( 3,'c'")
            .collect::<Result<_, ()>>()
            .unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(
            rows[2],
            [Literal::Number("3".into()), Literal::String("c".into())]
        );
        let flat: Vec<_> = constants(" 1 ,'a',NULL ")
            .collect::<Result<_, ()>>()
            .unwrap();
        assert_eq!(
            flat,
            [
                Literal::Number("1".into()),
                Literal::String("a".into()),
                Literal::Null
            ]
        );
        assert!(constants("1, 2 3").any(|c| c.is_err()));
    }

    #[test]
    fn only_long_lists_of_plain_constants_are_kept() {
        let long = format!("{})", list(MIN_RUN_ELEMENTS, "1"));
        assert_eq!(in_list_at(&long), Some(long.len() - 1));
        let short = format!("{})", list(MIN_RUN_ELEMENTS - 1, "1"));
        assert_eq!(in_list_at(&short), None);
        for odd in [
            "a",
            "1 + 1",
            "$1",
            "E'x'",
            "'a'::text",
            "0x1F",
            "1e",
            "-",
            "'open",
        ] {
            let text = format!("{}, {odd})", list(MIN_RUN_ELEMENTS, "1"));
            assert_eq!(in_list_at(&text), None, "{odd}");
        }
        let rows = format!(
            "{}) on conflict do nothing",
            vec!["1, 'x'"; MIN_RUN_ELEMENTS].join("), (")
        );
        let len = values_rows_at(&rows).unwrap();
        assert!(rows[len..].starts_with(") on conflict"));
        assert_eq!(values_rows_at("1), (2), (now())"), None);
    }
}
