//! Arrays of every scalar type, kept in their canonical text form, as PostgreSQL's
//! `array_out` writes it: `{1,2,NULL}`, `{{1,2},{3,4}}`, `[0:1]={a,b}`.
//!
//! Rules:
//! - The engine stores an array as text. Every array value a plan holds is canonical: made by
//!   [`input`] (each element through its type's input and then output function), by a
//!   constructor or by a cast. So two arrays of one type are equal exactly when their texts
//!   are, and equality, hashing, DISTINCT and GROUP BY compare the text.
//! - [`parse`] reads any text form into dimensions and element texts; [`write`] is the one
//!   writer of the canonical form. Both are bounded: at most [`MAX_DIMS`] dimensions, and
//!   the text at most `MAX_VALUE_BYTES` (54000 beyond, before it is built).
//! - An element type carries no typmod (`varchar(10)[]` is `character varying[]`).

use std::fmt::Write as _;

use quire_engine::{SqlState, Value};

use super::SqlType;
use crate::error::{Result, SqlError};

/// PostgreSQL's `MAXDIM`.
pub const MAX_DIMS: usize = 6;

/// Bytes an element takes once parsed, beyond its text (its `Option<String>`, the heap
/// block, and the value it may become): what [`check_parsed_size`] charges.
pub(crate) const ELEMENT_OVERHEAD_BYTES: usize = 64;

/// 54000 once the parsed elements of one array would take more than `MAX_VALUE_BYTES`:
/// short elements cost far more parsed than written (`{1,1,...}`), so the text's own
/// limit does not bound them.
pub(crate) fn check_parsed_size(bytes: usize) -> Result<()> {
    if bytes > super::MAX_VALUE_BYTES {
        return Err(SqlError::new(
            SqlState::PROGRAM_LIMIT_EXCEEDED,
            "array size exceeds the maximum allowed: its elements would take more than 1 GB",
        ));
    }
    Ok(())
}

/// One dimension of an array: its length and its lower bound (1 unless written otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dim {
    pub len: usize,
    pub lower: i64,
}

/// An array read from its text: the dimensions, outermost first, and the elements in
/// row-major order (`None` for NULL). No dimensions means the empty array.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Parsed {
    pub dims: Vec<Dim>,
    pub elems: Vec<Option<String>>,
}

impl Parsed {
    /// The elements as values of `elem`, row-major.
    pub fn values(&self, elem: SqlType) -> Result<Vec<Value>> {
        self.elems
            .iter()
            .map(|e| match e {
                None => Ok(Value::Null),
                Some(s) => super::parse_text(elem, s),
            })
            .collect()
    }

    /// A one-dimensional array of `elems` (empty if there are none).
    pub fn flat(elems: Vec<Option<String>>) -> Parsed {
        let dims = if elems.is_empty() {
            vec![]
        } else {
            vec![Dim {
                len: elems.len(),
                lower: 1,
            }]
        };
        Parsed { dims, elems }
    }
}

/// Every scalar type quire has, one per oid, each with its array type's oid: pg_type
/// lists them, and type oids are looked up among them.
pub static SCALAR_TYPES: [(SqlType, u32); 26] = [
    (SqlType::Bool, 1000),
    (SqlType::Bytea, 1001),
    (SqlType::Char, 1002),
    (SqlType::Name, 1003),
    (SqlType::Int2, 1005),
    (SqlType::Int4, 1007),
    (SqlType::Text, 1009),
    (SqlType::Bpchar(None), 1014),
    (SqlType::Varchar(None), 1015),
    (SqlType::Int8, 1016),
    (SqlType::Float4, 1021),
    (SqlType::Float8, 1022),
    (SqlType::Oid, 1028),
    (SqlType::Timestamp, 1115),
    (SqlType::Date, 1182),
    (SqlType::Timestamptz, 1185),
    (SqlType::Interval, 1187),
    (SqlType::Numeric(None), 1231),
    (SqlType::Uuid, 2951),
    (SqlType::Regclass, 2210),
    (SqlType::Regtype, 2211),
    (SqlType::Regnamespace, 4090),
    (SqlType::Regproc, 1008),
    (SqlType::PgLsn, 3221),
    (SqlType::Json, 199),
    (SqlType::Jsonb, 3807),
];

/// The array type whose elements are `elem` (its typmod dropped), and the array's oid;
/// `None` for a type without one (arrays of arrays, `void`, `unknown`).
pub(super) fn array_type(elem: SqlType) -> Option<(&'static SqlType, u32)> {
    let base = match elem {
        SqlType::Bpchar(_) => SqlType::Bpchar(None),
        SqlType::Varchar(_) => SqlType::Varchar(None),
        SqlType::Numeric(_) => SqlType::Numeric(None),
        t => t,
    };
    SCALAR_TYPES
        .iter()
        .find(|(t, _)| *t == base)
        .map(|(t, oid)| (t, *oid))
}

fn malformed(text: &str, detail: &str) -> SqlError {
    SqlError::new(
        SqlState::INVALID_TEXT_REPRESENTATION,
        format!("malformed array literal: \"{text}\""),
    )
    .with_detail(detail.to_string())
}

pub(crate) fn too_many_dims(n: usize) -> SqlError {
    SqlError::new(
        SqlState::PROGRAM_LIMIT_EXCEEDED,
        format!("number of array dimensions ({n}) exceeds the maximum allowed ({MAX_DIMS})"),
    )
}

/// Whitespace as `array_in` skips it (C's `isspace`).
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\u{b}' | '\u{c}')
}

/// A reader of an array's text form, one character at a time.
struct Reader<'a> {
    text: &'a str,
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
    /// Per depth: the number of items seen at that depth in the current sub-array, and the
    /// length every sub-array at that depth must have (set by the first one).
    counts: Vec<usize>,
    lens: Vec<Option<usize>>,
    /// The depth at which elements appear (set by the first element).
    leaf_depth: Option<usize>,
    elems: Vec<Option<String>>,
    /// What the elements take parsed ([`check_parsed_size`]).
    parsed_bytes: usize,
}

impl Reader<'_> {
    fn skip_space(&mut self) {
        while self.chars.next_if(|&(_, c)| is_space(c)).is_some() {}
    }

    fn err(&self, detail: &str) -> SqlError {
        malformed(self.text, detail)
    }

    /// One `{...}` at `depth` (its `{` already read).
    fn level(&mut self, depth: usize) -> Result<()> {
        if depth >= MAX_DIMS {
            return Err(too_many_dims(depth + 1));
        }
        crate::stack::check_stack_depth()?;
        if self.counts.len() <= depth {
            self.counts.push(0);
            self.lens.push(None);
        }
        self.counts[depth] = 0;
        self.skip_space();
        if self.chars.next_if(|&(_, c)| c == '}').is_some() {
            // `{}`: the empty array, only as the whole value.
            if depth > 0 {
                return Err(self.err(
                    "Multidimensional arrays must have sub-arrays with matching dimensions.",
                ));
            }
            return Ok(());
        }
        loop {
            self.skip_space();
            if self.chars.next_if(|&(_, c)| c == '{').is_some() {
                self.sub_level(depth)?;
            } else {
                self.element(depth)?;
            }
            self.counts[depth] += 1;
            self.skip_space();
            match self.chars.next() {
                Some((_, ',')) => {}
                Some((_, '}')) => break,
                Some(_) => return Err(self.err("Unexpected array element.")),
                None => return Err(self.err("Unexpected end of input.")),
            }
        }
        let n = self.counts[depth];
        match self.lens[depth] {
            Some(len) if len != n => {
                Err(self
                    .err("Multidimensional arrays must have sub-arrays with matching dimensions."))
            }
            _ => {
                self.lens[depth] = Some(n);
                Ok(())
            }
        }
    }

    fn sub_level(&mut self, depth: usize) -> Result<()> {
        if self.leaf_depth.is_some_and(|d| d <= depth) {
            return Err(self.err("Unexpected \"{\" character."));
        }
        self.level(depth + 1)
    }

    /// One element at `depth`: quoted, or unquoted up to `,` or `}` (an unquoted NULL is
    /// the null value).
    fn element(&mut self, depth: usize) -> Result<()> {
        match self.leaf_depth {
            None => self.leaf_depth = Some(depth),
            Some(d) if d != depth => {
                return Err(self
                    .err("Multidimensional arrays must have sub-arrays with matching dimensions."))
            }
            Some(_) => {}
        }
        let mut cur = String::new();
        let mut quoted_any = false;
        // The length of `cur` up to its last quoted or escaped character: trailing
        // whitespace after it is trimmed, not before it.
        let mut kept = 0;
        loop {
            let Some(&(_, c)) = self.chars.peek() else {
                return Err(self.err("Unexpected end of input."));
            };
            match c {
                ',' | '}' => break,
                '{' => return Err(self.err("Unexpected \"{\" character.")),
                '"' => {
                    self.chars.next();
                    quoted_any = true;
                    loop {
                        match self.chars.next() {
                            None => return Err(self.err("Unexpected end of input.")),
                            Some((_, '"')) => break,
                            Some((_, '\\')) => match self.chars.next() {
                                Some((_, e)) => cur.push(e),
                                None => return Err(self.err("Unexpected end of input.")),
                            },
                            Some((_, e)) => cur.push(e),
                        }
                    }
                    kept = cur.len();
                }
                '\\' => {
                    self.chars.next();
                    match self.chars.next() {
                        Some((_, e)) => cur.push(e),
                        None => return Err(self.err("Unexpected end of input.")),
                    }
                    kept = cur.len();
                }
                c => {
                    self.chars.next();
                    cur.push(c);
                    if !is_space(c) {
                        kept = cur.len();
                    }
                }
            }
            crate::types::check_growth(cur.len(), 1)?;
        }
        cur.truncate(kept);
        self.parsed_bytes += ELEMENT_OVERHEAD_BYTES + cur.len();
        check_parsed_size(self.parsed_bytes)?;
        if !quoted_any && cur.eq_ignore_ascii_case("NULL") {
            self.elems.push(None);
        } else {
            self.elems.push(Some(cur));
        }
        Ok(())
    }
}

/// Reads `[lo:hi][lo:hi]=` before the braces, if written.
/// Lower and upper bounds written before an array's braces.
type Bounds = Vec<(i64, i64)>;

fn read_bounds(text: &str) -> Result<(Option<Bounds>, &str)> {
    let t = text.trim_start_matches(is_space);
    if !t.starts_with('[') {
        return Ok((None, t));
    }
    let Some((decor, rest)) = t.split_once('=') else {
        return Err(malformed(text, "Missing \"=\" after array dimensions."));
    };
    let mut bounds = Vec::new();
    for part in decor.trim_end_matches(is_space).split_terminator(']') {
        let inner = part.trim_start_matches(is_space).strip_prefix('[');
        let Some(inner) = inner else {
            return Err(malformed(text, "Missing \"]\" after array dimensions."));
        };
        let (lo, hi) = match inner.split_once(':') {
            Some((lo, hi)) => (lo.trim().parse::<i64>(), hi.trim().parse::<i64>()),
            None => (Ok(1), inner.trim().parse::<i64>()),
        };
        let (Ok(lo), Ok(hi)) = (lo, hi) else {
            return Err(malformed(text, "Missing array dimension value."));
        };
        if hi < lo {
            return Err(SqlError::new(
                SqlState::ARRAY_SUBSCRIPT_ERROR,
                "upper bound cannot be less than lower bound",
            ));
        }
        bounds.push((lo, hi));
        if bounds.len() > MAX_DIMS {
            return Err(too_many_dims(bounds.len()));
        }
    }
    Ok((Some(bounds), rest))
}

/// An array's text form read: its dimensions and element texts, not yet checked against
/// an element type (22P02 for a malformed literal, as `array_in`).
pub fn parse(text: &str) -> Result<Parsed> {
    let (bounds, body) = read_bounds(text)?;
    let body = body.trim_start_matches(is_space);
    let Some(inner) = body.strip_prefix('{') else {
        return Err(malformed(
            text,
            "Array value must start with \"{\" or dimension information.",
        ));
    };
    let mut r = Reader {
        text,
        chars: inner.char_indices().peekable(),
        counts: Vec::new(),
        lens: Vec::new(),
        leaf_depth: None,
        elems: Vec::new(),
        parsed_bytes: 0,
    };
    r.level(0)?;
    r.skip_space();
    if r.chars.next().is_some() {
        return Err(malformed(text, "Junk after closing right brace."));
    }
    let lens: Vec<usize> = match r.leaf_depth {
        None => vec![],
        Some(d) => r.lens[..=d].iter().map(|l| l.unwrap_or(0)).collect(),
    };
    let dims = match bounds {
        None => lens.iter().map(|&len| Dim { len, lower: 1 }).collect(),
        Some(b) => {
            let fits = b.len() == lens.len()
                && b.iter()
                    .zip(&lens)
                    .all(|(&(lo, hi), &len)| usize::try_from(hi - lo + 1).is_ok_and(|n| n == len));
            if !fits {
                return Err(malformed(
                    text,
                    "Specified array dimensions do not match array contents.",
                ));
            }
            b.iter()
                .zip(&lens)
                .map(|(&(lower, _), &len)| Dim { len, lower })
                .collect()
        }
    };
    Ok(Parsed {
        dims,
        elems: r.elems,
    })
}

/// Whether an element's text needs quotes in the array's text form.
fn needs_quotes(e: &str) -> bool {
    e.is_empty()
        || e.eq_ignore_ascii_case("NULL")
        || e.chars()
            .any(|c| matches!(c, ',' | '"' | '\\' | '{' | '}') || is_space(c))
}

/// The canonical text of an array: `[lo:hi]=` when a lower bound is not 1, nested braces,
/// elements quoted where needed. 54000 before the text passes `MAX_VALUE_BYTES`.
pub fn write(a: &Parsed) -> Result<String> {
    let mut out = String::new();
    if a.dims.is_empty() {
        return Ok("{}".into());
    }
    if a.dims.iter().any(|d| d.lower != 1) {
        for d in &a.dims {
            let hi = d.lower + i64::try_from(d.len).unwrap_or(i64::MAX) - 1;
            let _ = write!(out, "[{}:{}]", d.lower, hi);
        }
        out.push('=');
    }
    let mut elems = a.elems.iter();
    write_level(&mut out, &a.dims, &mut elems)?;
    Ok(out)
}

fn write_level<'a>(
    out: &mut String,
    dims: &[Dim],
    elems: &mut impl Iterator<Item = &'a Option<String>>,
) -> Result<()> {
    out.push('{');
    let Some((dim, inner)) = dims.split_first() else {
        return Err(crate::types::internal("array dimensions"));
    };
    for i in 0..dim.len {
        if i > 0 {
            out.push(',');
        }
        if !inner.is_empty() {
            write_level(out, inner, elems)?;
            continue;
        }
        let e = elems
            .next()
            .ok_or_else(|| crate::types::internal("array"))?;
        push_element(out, e.as_deref())?;
    }
    out.push('}');
    Ok(())
}

fn push_element(out: &mut String, e: Option<&str>) -> Result<()> {
    let Some(e) = e else {
        crate::types::check_growth(out.len(), 5)?;
        out.push_str("NULL");
        return Ok(());
    };
    if !needs_quotes(e) {
        crate::types::check_growth(out.len(), e.len() + 2)?;
        out.push_str(e);
        return Ok(());
    }
    let escapes = e.bytes().filter(|b| matches!(b, b'"' | b'\\')).count();
    crate::types::check_growth(out.len(), e.len() + escapes + 4)?;
    out.push('"');
    for c in e.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    Ok(())
}

/// The array type's input function: `text` read, each element through `elem`'s input and
/// output functions, written canonically.
pub fn input(text: &str, elem: SqlType) -> Result<Value> {
    let mut a = parse(text)?;
    for e in a.elems.iter_mut().flatten() {
        let v = super::parse_text(elem, e)?;
        *e = super::format_text(&v, elem).unwrap_or_default();
    }
    write(&a).map(Value::Text)
}

/// `int2vector` / `oidvector` input: values separated by spaces, kept as an array with
/// subscripts from 0.
pub fn vector_input(text: &str, elem: SqlType) -> Result<Value> {
    let mut elems = Vec::new();
    for e in text.split(is_space).filter(|e| !e.is_empty()) {
        let v = super::parse_text(elem, e)?;
        elems.push(super::format_text(&v, elem));
    }
    Ok(vector(elems))
}

/// A vector of element texts as its stored array (`[0:n-1]={...}`, `{}` when empty).
pub fn vector(elems: Vec<Option<String>>) -> Value {
    let mut a = Parsed::flat(elems);
    if let Some(d) = a.dims.first_mut() {
        d.lower = 0;
    }
    // Numbers need no quotes: writing cannot pass the size limit of the input it came from.
    Value::Text(write(&a).unwrap_or_default())
}

/// `int2vector` / `oidvector` output: the elements separated by spaces.
pub fn vector_output(stored: &str) -> String {
    match parse(stored) {
        Ok(a) => a.elems.into_iter().flatten().collect::<Vec<_>>().join(" "),
        Err(_) => stored.to_string(),
    }
}

/// The elements of a canonical array value as values of `elem`, row-major (`unnest`).
pub fn values(text: &str, elem: SqlType) -> Result<Vec<Value>> {
    parse(text)?.values(elem)
}

/// Each element of an array of `from` converted to `to` by `convert` (a cast), the shape
/// kept.
pub fn map_elements(
    text: &str,
    from: SqlType,
    to: SqlType,
    convert: impl Fn(Value) -> Result<Value>,
) -> Result<Value> {
    let mut a = parse(text)?;
    for e in &mut a.elems {
        if let Some(s) = e {
            let v = convert(super::parse_text(from, s)?)?;
            *e = super::format_text(&v, to);
        }
    }
    write(&a).map(Value::Text)
}

/// A one-dimensional array's canonical text, built an element at a time (`array_agg`,
/// `ARRAY(subquery)`); 54000 before it passes `MAX_VALUE_BYTES`.
#[derive(Clone, Debug)]
pub struct Builder {
    text: String,
    count: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            text: String::from("{"),
            count: 0,
        }
    }
}

impl Builder {
    /// Appends an element's text (`None` for NULL).
    pub fn push(&mut self, e: Option<&str>) -> Result<()> {
        if self.count > 0 {
            self.text.push(',');
        }
        self.count += 1;
        push_element(&mut self.text, e)
    }

    /// Appends a value of `elem`.
    pub fn push_value(&mut self, v: &Value, elem: SqlType) -> Result<()> {
        self.push(super::format_text(v, elem).as_deref())
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn finish(mut self) -> Value {
        self.text.push('}');
        Value::Text(self.text)
    }
}

/// array_agg of arrays: equal-shaped arrays stacked into one of a dimension more.
#[derive(Clone, Debug, Default)]
pub struct Stacker {
    inner: Option<Vec<Dim>>,
    elems: Vec<Option<String>>,
    count: usize,
    bytes: usize,
    parsed_bytes: usize,
}

impl Stacker {
    /// Adds one array (22004 for NULL, 2202E for an empty one or another shape).
    pub fn push(&mut self, v: &Value) -> Result<()> {
        let Value::Text(text) = v else {
            return Err(SqlError::new(
                SqlState::NULL_VALUE_NOT_ALLOWED,
                "cannot accumulate null arrays",
            ));
        };
        let a = parse(text)?;
        if a.dims.is_empty() {
            return Err(SqlError::new(
                SqlState::ARRAY_SUBSCRIPT_ERROR,
                "cannot accumulate empty arrays",
            ));
        }
        match &self.inner {
            None if a.dims.len() >= MAX_DIMS => return Err(too_many_dims(a.dims.len() + 1)),
            None => self.inner = Some(a.dims.clone()),
            Some(d) if d.iter().map(|d| d.len).ne(a.dims.iter().map(|d| d.len)) => {
                return Err(SqlError::new(
                    SqlState::ARRAY_SUBSCRIPT_ERROR,
                    "cannot accumulate arrays of different dimensionality",
                ))
            }
            Some(_) => {}
        }
        super::check_growth(self.bytes, text.len())?;
        self.bytes += text.len();
        self.parsed_bytes += a.elems.len() * ELEMENT_OVERHEAD_BYTES + text.len();
        check_parsed_size(self.parsed_bytes)?;
        self.count += 1;
        self.elems.extend(a.elems);
        Ok(())
    }

    pub fn finish(self) -> Result<Value> {
        let mut dims = vec![Dim {
            len: self.count,
            lower: 1,
        }];
        dims.extend(self.inner.unwrap_or_default());
        write(&Parsed {
            dims,
            elems: self.elems,
        })
        .map(Value::Text)
    }
}

/// Two arrays of `elem` compared as PostgreSQL's `array_cmp` does: element by element in
/// row-major order (NULL after any value), then the one with more elements is greater,
/// then by dimensions.
pub fn compare(left: &str, right: &str, elem: SqlType) -> Result<std::cmp::Ordering> {
    use std::cmp::Ordering;
    let (left, right) = (parse(left)?, parse(right)?);
    for pair in left.elems.iter().zip(&right.elems) {
        let o = match pair {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some(l), Some(r)) => {
                super::compare(&super::parse_text(elem, l)?, &super::parse_text(elem, r)?)
            }
        };
        if o.is_ne() {
            return Ok(o);
        }
    }
    let dims = |p: &Parsed| p.dims.iter().map(|d| (d.len, d.lower)).collect::<Vec<_>>();
    Ok(left
        .elems
        .len()
        .cmp(&right.elems.len())
        .then_with(|| left.dims.len().cmp(&right.dims.len()))
        .then_with(|| dims(&left).cmp(&dims(&right))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(text: &str, elem: SqlType) -> String {
        match input(text, elem) {
            Ok(Value::Text(s)) => s,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn input_writes_the_canonical_form() {
        assert_eq!(canon("{1, 2 ,NULL}", SqlType::Int4), "{1,2,NULL}");
        assert_eq!(canon(" { 01 , +2 } ", SqlType::Int8), "{1,2}");
        assert_eq!(canon("{{1,2},{3,4}}", SqlType::Int4), "{{1,2},{3,4}}");
        assert_eq!(canon("{}", SqlType::Int4), "{}");
        assert_eq!(
            canon(r#"{a b,"c,d","",null,"NULL",x\"y}"#, SqlType::Text),
            r#"{"a b","c,d","",NULL,"NULL","x\"y"}"#
        );
        assert_eq!(canon("[0:1]={t,f}", SqlType::Bool), "[0:1]={t,f}");
        assert_eq!(canon("[1:2]={t,f}", SqlType::Bool), "{t,f}");
    }

    #[test]
    fn malformed_literals_are_refused() {
        for bad in [
            "1,2",
            "{1,2",
            "{1,{2}}",
            "{{1},{2,3}}",
            "{1}x",
            "[1:3]={1,2}",
            "{{}}",
        ] {
            let e = input(bad, SqlType::Int4).unwrap_err();
            assert_eq!(e.sqlstate(), "22P02", "{bad}");
        }
        assert_eq!(input("{a}", SqlType::Int4).unwrap_err().sqlstate(), "22P02");
        let deep = "{{{{{{{1}}}}}}}";
        assert_eq!(input(deep, SqlType::Int4).unwrap_err().sqlstate(), "54000");
    }

    #[test]
    fn parse_keeps_shape_and_nulls() {
        let a = parse("{{a,NULL},{\"\",d}}").unwrap();
        assert_eq!(a.dims.len(), 2);
        assert_eq!(a.dims[0].len, 2);
        assert_eq!(
            a.elems,
            vec![
                Some("a".into()),
                None,
                Some(String::new()),
                Some("d".into())
            ]
        );
        assert_eq!(write(&a).unwrap(), "{{a,NULL},{\"\",d}}");
    }
}
