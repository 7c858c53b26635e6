//! Regular-expression functions of PostgreSQL's `regexp.c`: `regexp_replace`,
//! `regexp_match`, `regexp_like`, `regexp_count`, `regexp_instr`, `regexp_substr` and
//! `regexp_split_to_array`, with PostgreSQL's flags (`g`, `i`, `c`, `n`, `s`, `x`, `q`) and
//! errors. Patterns are matched by `regex_lite` (no backtracking, so no pattern takes
//! exponential time); its syntax is PostgreSQL's ARE for what applications write (classes,
//! `[[:alpha:]]`, quantifiers, groups, anchors) but has no back references in patterns.
//!
//! ## Rules
//! - A compiled pattern is kept per thread, most recently used first, at most
//!   [`CACHE_ENTRIES`] of them (PostgreSQL's `MAX_CACHED_RES`), each at most
//!   [`NFA_BYTES`]; a pattern longer than [`MAX_PATTERN_BYTES`] is 2201B.
//! - By default `.` and `[^...]` match a newline, as in PostgreSQL; `n` makes them stop at
//!   one and `^` / `$` match at lines.
//! - The interrupt is checked between matches, and a result's size against 1 GB as it
//!   grows (54000).
//! - Positions count characters, from 1.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use quire_engine::{SqlState, Value};

use super::string::{int, text};
use super::Func;
use crate::error::{Result, SqlError};
use crate::interrupt::Interrupt;
use crate::types::array::Builder;
use crate::types::{self, SqlType};

/// The longest pattern: patterns come from clients, and a compiled one grows with them.
pub(crate) const MAX_PATTERN_BYTES: usize = 10_000;
/// Memory for one compiled pattern.
pub(crate) const NFA_BYTES: usize = 1 << 20;
/// Patterns kept per thread.
const CACHE_ENTRIES: usize = 16;

/// A regular-expression function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReFn {
    /// regexp_replace(s, p, r [, flags]) or (s, p, r, start [, n [, flags]]).
    Replace {
        positional: bool,
    },
    Match,
    Like,
    Count,
    Instr,
    Substr,
    SplitToArray,
    /// substring(s FROM pattern): POSIX regular-expression substring.
    Substring,
    /// substring(s SIMILAR pattern ESCAPE e), also written substring(s FROM p FOR e).
    SubstringSimilar,
}

/// How a pattern is compiled: PostgreSQL's flag letters, parsed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)] // one per flag letter, as PostgreSQL's are
pub(crate) struct Flags {
    pub global: bool,
    pub case_insensitive: bool,
    pub newline_sensitive: bool,
    pub extended: bool,
    pub literal: bool,
}

impl Flags {
    /// Parses `flags` (22023 for a letter PostgreSQL does not know or quire lacks).
    pub(crate) fn parse(flags: &str) -> Result<Flags> {
        let mut f = Flags::default();
        for c in flags.chars() {
            match c {
                'g' => f.global = true,
                'i' => f.case_insensitive = true,
                'c' => f.case_insensitive = false,
                'n' | 'm' => f.newline_sensitive = true,
                's' => f.newline_sensitive = false,
                'x' => f.extended = true,
                'e' | 't' => {}
                'q' => f.literal = true,
                _ => {
                    return Err(SqlError::new(
                        SqlState::INVALID_PARAMETER_VALUE,
                        format!("invalid regular expression option: \"{c}\""),
                    ))
                }
            }
        }
        Ok(f)
    }
}

type Resolved = (Func, Vec<Option<SqlType>>, SqlType);

/// The function `name` for arguments of types `args`, if it is one of these.
pub(super) fn resolve(name: &str, args: &[SqlType]) -> Option<Resolved> {
    use SqlType as T;
    let text = Some(T::Text);
    let int = Some(T::Int4);
    let f = |f: ReFn, c: Vec<Option<SqlType>>, r: SqlType| Some((Func::Regex(f), c, r));
    let is_int = |t: &SqlType| t.is_int();
    let is_text = |t: &SqlType| t.is_text() || *t == T::Unknown;
    match (name, args) {
        // substring(text, text) and substring(text, text, text); an integer position or
        // length is the other substring (func.rs).
        ("substring", [_, p]) if is_text(p) => f(ReFn::Substring, vec![text; 2], T::Text),
        ("substring", [_, p, e]) if is_text(p) && is_text(e) => {
            f(ReFn::SubstringSimilar, vec![text; 3], T::Text)
        }
        ("regexp_replace", [_, _, _]) => {
            f(ReFn::Replace { positional: false }, vec![text; 3], T::Text)
        }
        ("regexp_replace", [_, _, _, a]) if !is_int(a) => {
            f(ReFn::Replace { positional: false }, vec![text; 4], T::Text)
        }
        ("regexp_replace", [_, _, _, _] | [_, _, _, _, _] | [_, _, _, _, _, _]) => {
            let mut c = vec![text, text, text, int];
            c.extend([int, text].into_iter().take(args.len() - 4));
            f(ReFn::Replace { positional: true }, c, T::Text)
        }
        ("regexp_match", [_, _] | [_, _, _]) => {
            f(ReFn::Match, vec![text; args.len()], T::TEXT_ARRAY)
        }
        ("regexp_like", [_, _] | [_, _, _]) => f(ReFn::Like, vec![text; args.len()], T::Bool),
        ("regexp_split_to_array", [_, _] | [_, _, _]) => {
            f(ReFn::SplitToArray, vec![text; args.len()], T::TEXT_ARRAY)
        }
        ("regexp_count", [_, _] | [_, _, _] | [_, _, _, _]) => {
            let c = [text, text, int, text];
            f(ReFn::Count, c[..args.len()].to_vec(), T::Int4)
        }
        ("regexp_instr", _) if (2..=7).contains(&args.len()) => {
            let c = [text, text, int, int, int, text, int];
            f(ReFn::Instr, c[..args.len()].to_vec(), T::Int4)
        }
        ("regexp_substr", _) if (2..=6).contains(&args.len()) => {
            let c = [text, text, int, int, text, int];
            f(ReFn::Substr, c[..args.len()].to_vec(), T::Text)
        }
        _ => None,
    }
}

fn invalid(what: &str, v: i64) -> SqlError {
    SqlError::new(
        SqlState::INVALID_PARAMETER_VALUE,
        format!("invalid value for parameter \"{what}\": {v}"),
    )
}

impl ReFn {
    /// Evaluates the function over non-NULL arguments of the resolved types.
    pub(super) fn call(self, args: &[Value], interrupt: &Interrupt) -> Result<Value> {
        let s = text(&args[0]);
        let pattern = text(&args[1]);
        let flags_at = |i: usize| {
            args.get(i)
                .map_or(Ok(Flags::default()), |v| Flags::parse(text(v)))
        };
        match self {
            ReFn::Replace { positional } => {
                let (start, n, flags) = if positional {
                    let n = args.get(4).map(int);
                    (int(&args[3]), n, flags_at(5)?)
                } else {
                    (1, None, flags_at(3)?)
                };
                if start <= 0 {
                    return Err(invalid("start", start));
                }
                if let Some(n) = n.filter(|&n| n < 0) {
                    return Err(invalid("n", n));
                }
                // A given N replaces that match only (0: all of them).
                let which = match n {
                    Some(0) => None,
                    Some(n) => Some(n),
                    None if flags.global => None,
                    None => Some(1),
                };
                replace(s, pattern, text(&args[2]), start, which, flags, interrupt)
            }
            ReFn::Match => {
                let flags = flags_at(2)?;
                if flags.global {
                    return Err(SqlError::new(
                        SqlState::INVALID_PARAMETER_VALUE,
                        "regexp_match() does not support the \"global\" option",
                    )
                    .with_hint("Use the regexp_matches function instead."));
                }
                first_match(s, pattern, flags, interrupt)
            }
            ReFn::Like => {
                let flags = no_global(flags_at(2)?, "regexp_like()")?;
                Ok(Value::Bool(lite(pattern, flags)?.is_match(s)))
            }
            ReFn::Count => {
                let start = args.get(2).map_or(1, int);
                let flags = no_global(flags_at(3)?, "regexp_count()")?;
                let found = matches_from(s, pattern, start, flags, usize::MAX, interrupt)?;
                Ok(Value::Int(i64::try_from(found.len()).unwrap_or(i64::MAX)))
            }
            ReFn::Instr => instr(s, pattern, args, interrupt),
            ReFn::Substr => substr(s, pattern, args, interrupt),
            ReFn::SplitToArray => {
                let flags = no_global(flags_at(2)?, "regexp_split_to_array()")?;
                split(s, pattern, flags, interrupt)
            }
            ReFn::Substring => substring(s, pattern, interrupt),
            ReFn::SubstringSimilar => {
                let pattern = super::string::similar_escape(pattern, Some(text(&args[2])))?;
                substring(s, &pattern, interrupt)
            }
        }
    }
}

fn no_global(flags: Flags, function: &str) -> Result<Flags> {
    if flags.global {
        return Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("{function} does not support the \"global\" option"),
        ));
    }
    Ok(flags)
}

thread_local! {
    static CACHE: RefCell<VecDeque<(String, Flags, Rc<regex_lite::Regex>)>> =
        const { RefCell::new(VecDeque::new()) };
}

/// `pattern` compiled with `flags` (the `g` flag aside), from the thread's cache or built;
/// 2201B for a pattern that is too long or invalid, with `regex_lite`'s words.
pub(crate) fn lite(pattern: &str, flags: Flags) -> Result<Rc<regex_lite::Regex>> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(SqlError::new(
            SqlState::INVALID_REGULAR_EXPRESSION,
            "invalid regular expression: pattern too long",
        ));
    }
    let key = Flags {
        global: false,
        ..flags
    };
    let hit = CACHE.with_borrow_mut(|cache| {
        let at = cache
            .iter()
            .position(|(p, f, _)| p == pattern && *f == key)?;
        let entry = cache.remove(at)?;
        let re = Rc::clone(&entry.2);
        cache.push_front(entry);
        Some(re)
    });
    if let Some(re) = hit {
        return Ok(re);
    }
    let source = if key.literal {
        regex_lite::escape(pattern)
    } else {
        pattern.to_string()
    };
    let re = regex_lite::RegexBuilder::new(&source)
        .case_insensitive(key.case_insensitive)
        .dot_matches_new_line(!key.newline_sensitive)
        .multi_line(key.newline_sensitive)
        .ignore_whitespace(key.extended)
        .size_limit(NFA_BYTES)
        .build()
        .map_err(|e| {
            SqlError::new(
                SqlState::INVALID_REGULAR_EXPRESSION,
                format!("invalid regular expression: {e}"),
            )
        })?;
    let re = Rc::new(re);
    CACHE.with_borrow_mut(|cache| {
        cache.push_front((pattern.to_string(), key, Rc::clone(&re)));
        cache.truncate(CACHE_ENTRIES);
    });
    Ok(re)
}

/// The byte offset of character `pos` (from 1) of `s`; `s.len()` past its end.
fn byte_at(s: &str, pos: i64) -> usize {
    let skip = usize::try_from(pos.saturating_sub(1)).unwrap_or(usize::MAX);
    s.char_indices().nth(skip).map_or(s.len(), |(b, _)| b)
}

/// The character position (from 1) of byte offset `b` of `s`.
fn char_pos(s: &str, b: usize) -> i64 {
    i64::try_from(s[..b].chars().count()).unwrap_or(i64::MAX) + 1
}

/// A match's groups as byte spans of the text (group 0 the whole match; `None` for a group
/// the match did not take part in).
type Groups = Vec<Option<(usize, usize)>>;

/// Each match's captures (group 0 the whole match) from character `start` on, the first
/// `limit` of them: PostgreSQL's scan, which after an empty match goes on one character
/// later.
fn matches_from(
    s: &str,
    pattern: &str,
    start: i64,
    flags: Flags,
    limit: usize,
    interrupt: &Interrupt,
) -> Result<Vec<Groups>> {
    if start <= 0 {
        return Err(invalid("start", start));
    }
    let re = lite(pattern, flags)?;
    let mut at = byte_at(s, start);
    let mut out = Vec::new();
    while at <= s.len() && out.len() < limit {
        interrupt.check()?;
        let Some(caps) = re.captures_at(s, at) else {
            break;
        };
        let groups: Groups = (0..caps.len())
            .map(|i| caps.get(i).map(|m| (m.start(), m.end())))
            .collect();
        let (m_start, m_end) = groups[0].unwrap_or((at, at));
        out.push(groups);
        at = if m_end > m_start {
            m_end
        } else {
            match s[m_end..].chars().next() {
                Some(c) => m_end + c.len_utf8(),
                None => break,
            }
        };
    }
    Ok(out)
}

/// `regexp_replace`: every match (`which` None) or the `which`-th only, from character
/// `start`, replaced by `replacement` with `\1`..`\9` and `\&` expanded.
fn replace(
    s: &str,
    pattern: &str,
    replacement: &str,
    start: i64,
    which: Option<i64>,
    flags: Flags,
    interrupt: &Interrupt,
) -> Result<Value> {
    let limit = which.map_or(usize::MAX, |w| usize::try_from(w).unwrap_or(usize::MAX));
    let found = matches_from(s, pattern, start, flags, limit, interrupt)?;
    let mut out = String::with_capacity(s.len());
    let mut copied = 0;
    for (i, groups) in found.iter().enumerate() {
        let nth = i64::try_from(i).unwrap_or(i64::MAX) + 1;
        if which.is_some_and(|w| w != nth) {
            continue;
        }
        let Some((m_start, m_end)) = groups[0] else {
            continue;
        };
        out.push_str(&s[copied..m_start]);
        expand(&mut out, replacement, s, groups)?;
        copied = m_end;
    }
    types::check_growth(out.len(), s.len() - copied)?;
    out.push_str(&s[copied..]);
    Ok(Value::Text(out))
}

/// Appends `replacement` with its references to `groups` expanded, as PostgreSQL's
/// `appendStringInfoRegexpSubstr`: `\n` group n, `\&` the match, `\\` a backslash; another
/// backslash stays.
fn expand(
    out: &mut String,
    replacement: &str,
    s: &str,
    groups: &[Option<(usize, usize)>],
) -> Result<()> {
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        let piece = match (c, chars.peek().copied()) {
            ('\\', Some(d @ '1'..='9')) => {
                chars.next();
                let n = d as usize - '0' as usize;
                groups
                    .get(n)
                    .copied()
                    .flatten()
                    .map_or("", |(a, b)| &s[a..b])
            }
            ('\\', Some('&')) => {
                chars.next();
                groups[0].map_or("", |(a, b)| &s[a..b])
            }
            ('\\', Some('\\')) => {
                chars.next();
                "\\"
            }
            _ => {
                out.push(c);
                continue;
            }
        };
        types::check_growth(out.len(), piece.len())?;
        out.push_str(piece);
    }
    Ok(())
}

/// `regexp_match`: the first match's groups (or the whole match when there are none) as a
/// text array, NULL when there is no match.
fn first_match(s: &str, pattern: &str, flags: Flags, interrupt: &Interrupt) -> Result<Value> {
    match matches_from(s, pattern, 1, flags, 1, interrupt)?.first() {
        Some(groups) => groups_array(s, groups),
        None => Ok(Value::Null),
    }
}

/// The arguments `regexp_instr` and `regexp_substr` share after the pattern: start, N,
/// and (at `flags_at`) flags and the subexpression.
struct Nth {
    start: i64,
    n: i64,
    flags: Flags,
    subexpr: usize,
}

fn nth_args(args: &[Value], flags_at: usize, function: &str) -> Result<Nth> {
    let start = args.get(2).map_or(1, int);
    let n = args.get(3).map_or(1, int);
    if n <= 0 {
        return Err(invalid("n", n));
    }
    let flags = args
        .get(flags_at)
        .map_or(Ok(Flags::default()), |v| Flags::parse(text(v)))?;
    let flags = no_global(flags, function)?;
    let subexpr = args.get(flags_at + 1).map_or(0, int);
    if subexpr < 0 {
        return Err(invalid("subexpr", subexpr));
    }
    Ok(Nth {
        start,
        n,
        flags,
        subexpr: usize::try_from(subexpr).unwrap_or(usize::MAX),
    })
}

/// The bytes of match `nth.n`'s subexpression, if there is one.
fn nth_span(
    s: &str,
    pattern: &str,
    nth: &Nth,
    interrupt: &Interrupt,
) -> Result<Option<(usize, usize)>> {
    let index = usize::try_from(nth.n - 1).unwrap_or(usize::MAX);
    let found = matches_from(
        s,
        pattern,
        nth.start,
        nth.flags,
        index.saturating_add(1),
        interrupt,
    )?;
    Ok(found
        .get(index)
        .and_then(|groups| groups.get(nth.subexpr).copied().flatten()))
}

/// regexp_instr(s, p [, start [, N [, endoption [, flags [, subexpr]]]]]): the position of
/// the match (after it with endoption 1), 0 when there is none.
fn instr(s: &str, pattern: &str, args: &[Value], interrupt: &Interrupt) -> Result<Value> {
    let end_option = args.get(4).map_or(0, int);
    if !(0..=1).contains(&end_option) {
        return Err(invalid("endoption", end_option));
    }
    let nth = nth_args(args, 5, "regexp_instr()")?;
    Ok(Value::Int(match nth_span(s, pattern, &nth, interrupt)? {
        Some((a, b)) => char_pos(s, if end_option == 1 { b } else { a }),
        None => 0,
    }))
}

/// regexp_substr(s, p [, start [, N [, flags [, subexpr]]]]): the match's text, NULL when
/// there is none.
fn substr(s: &str, pattern: &str, args: &[Value], interrupt: &Interrupt) -> Result<Value> {
    let nth = nth_args(args, 4, "regexp_substr()")?;
    Ok(nth_span(s, pattern, &nth, interrupt)?
        .map_or(Value::Null, |(a, b)| Value::Text(s[a..b].to_string())))
}

/// substring(s FROM pattern) (`textregexsubstr`): the text the pattern's first parenthesized
/// subexpression matched if it has one, else the whole match; NULL for no match.
fn substring(s: &str, pattern: &str, interrupt: &Interrupt) -> Result<Value> {
    let found = matches_from(s, pattern, 1, Flags::default(), 1, interrupt)?;
    let Some(groups) = found.first() else {
        return Ok(Value::Null);
    };
    let span = groups.get(1).copied().unwrap_or(groups[0]);
    Ok(span.map_or(Value::Null, |(a, b)| Value::Text(s[a..b].to_string())))
}

/// regexp_split_to_array: the text between matches, PostgreSQL's way: an empty match at
/// the start or end of the text, or right after another match, splits nothing.
fn split(s: &str, pattern: &str, flags: Flags, interrupt: &Interrupt) -> Result<Value> {
    let found = matches_from(s, pattern, 1, flags, usize::MAX, interrupt)?;
    let mut b = Builder::default();
    let mut prev_end = 0;
    for groups in &found {
        let Some((a, e)) = groups[0] else {
            continue;
        };
        if a == e && (a == 0 || a == s.len() || a == prev_end && prev_end != 0) {
            continue;
        }
        b.push(Some(&s[prev_end..a]))?;
        prev_end = e;
    }
    b.push(Some(&s[prev_end..]))?;
    Ok(b.finish())
}

/// A text set-returning function: `regexp_matches`, `regexp_split_to_table` and
/// `string_to_table`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TextSrf {
    /// regexp_matches(s, p [, flags]): each match's groups as a text array (every match
    /// with `g`, else the first).
    RegexpMatches,
    /// regexp_split_to_table(s, p [, flags]): regexp_split_to_array's elements.
    RegexpSplitToTable,
    /// string_to_table(s, sep [, null_string]): string_to_array's elements.
    StringToTable,
}

impl TextSrf {
    pub(crate) fn named(name: &str) -> Option<TextSrf> {
        Some(match name {
            "regexp_matches" => TextSrf::RegexpMatches,
            "regexp_split_to_table" => TextSrf::RegexpSplitToTable,
            "string_to_table" => TextSrf::StringToTable,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            TextSrf::RegexpMatches => "regexp_matches",
            TextSrf::RegexpSplitToTable => "regexp_split_to_table",
            TextSrf::StringToTable => "string_to_table",
        }
    }

    /// The type of each value.
    pub(crate) fn value_type(self) -> SqlType {
        match self {
            TextSrf::RegexpMatches => SqlType::TEXT_ARRAY,
            _ => SqlType::Text,
        }
    }

    /// The values over non-NULL text arguments.
    pub(crate) fn values(self, args: &[Value], interrupt: &Interrupt) -> Result<Vec<Value>> {
        let s = text(&args[0]);
        let pattern = text(&args[1]);
        let flags = || {
            args.get(2)
                .map_or(Ok(Flags::default()), |v| Flags::parse(text(v)))
        };
        let array = match self {
            TextSrf::RegexpMatches => {
                let flags = flags()?;
                let limit = if flags.global { usize::MAX } else { 1 };
                let found = matches_from(s, pattern, 1, flags, limit, interrupt)?;
                return found.iter().map(|groups| groups_array(s, groups)).collect();
            }
            TextSrf::RegexpSplitToTable => {
                split(s, pattern, no_global(flags()?, self.name())?, interrupt)?
            }
            TextSrf::StringToTable => super::array::string_to_array(args)?,
        };
        match array {
            Value::Text(t) => crate::types::array::values(&t, SqlType::Text),
            _ => Ok(Vec::new()),
        }
    }
}

/// A match's groups (the whole match when there are none) as a text array.
fn groups_array(s: &str, groups: &[Option<(usize, usize)>]) -> Result<Value> {
    let mut b = Builder::default();
    let wanted = if groups.len() == 1 {
        &groups[..1]
    } else {
        &groups[1..]
    };
    for g in wanted {
        b.push(g.map(|(a, e)| &s[a..e]))?;
    }
    Ok(b.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(f: ReFn, args: &[&str]) -> Value {
        let vals: Vec<Value> = args.iter().map(|a| Value::Text((*a).into())).collect();
        f.call(&vals, &Interrupt::default()).unwrap()
    }

    fn t(s: &str) -> Value {
        Value::Text(s.into())
    }

    #[test]
    fn replace_expands_references_once_or_globally() {
        let r = ReFn::Replace { positional: false };
        assert_eq!(call(r, &["foobarbaz", "b(..)", "X\\1Y"]), t("fooXarYbaz"));
        assert_eq!(
            call(r, &["foobarbaz", "b(..)", "X\\1Y", "g"]),
            t("fooXarYXazY")
        );
        assert_eq!(call(r, &["abc", "b", "[\\&]\\\\"]), t("a[b]\\c"));
        assert_eq!(call(r, &["ABC", "b", "x", "gi"]), t("AxC"));
        assert_eq!(call(r, &["abc", "", "-", "g"]), t("-a-b-c-"));
    }

    #[test]
    fn split_skips_degenerate_matches_as_postgresql() {
        assert_eq!(
            call(ReFn::SplitToArray, &["hello world", "\\s*"]),
            t("{h,e,l,l,o,w,o,r,l,d}")
        );
        assert_eq!(
            call(ReFn::SplitToArray, &["a,b,,c", ","]),
            t("{a,b,\"\",c}")
        );
    }

    #[test]
    fn match_gives_groups_or_the_whole_match() {
        assert_eq!(
            call(ReFn::Match, &["foobarbequebaz", "(bar)(beque)"]),
            t("{bar,beque}")
        );
        assert_eq!(call(ReFn::Match, &["foobar", "o+"]), t("{oo}"));
        assert_eq!(call(ReFn::Match, &["foobar", "x"]), Value::Null);
        let err = ReFn::Match
            .call(&[t("a"), t("a"), t("g")], &Interrupt::default())
            .unwrap_err();
        assert_eq!(err.sqlstate(), SqlState::INVALID_PARAMETER_VALUE);
    }

    #[test]
    fn dot_matches_a_newline_unless_newline_sensitive() {
        assert_eq!(call(ReFn::Like, &["a\nb", "a.b"]), Value::Bool(true));
        assert_eq!(call(ReFn::Like, &["a\nb", "a.b", "n"]), Value::Bool(false));
    }
}
