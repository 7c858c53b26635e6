//! `to_char` of dates, timestamps and intervals: PostgreSQL's template patterns
//! (`formatting.c`'s DCH keywords) with the FM and TH modifiers.
//!
//! ## Rules
//! - A template is read left to right; at each place the longest keyword wins (`HH24`
//!   before `HH`, `YYYY` before `YY`), with `FM`/`TM` before it and `TH`/`th`/`SP` after.
//!   Anything else is copied, `"quoted text"` without its quotes (`\"` a quote inside).
//! - Keywords come in PostgreSQL's spellings: upper case, lower case, and for names the
//!   capitalized form (`Day`, `Month`, `Mon`, `Dy`), whose case the output follows.
//! - A timestamptz prints on the session zone's clock, `TZ`/`OF`/`TZH`/`TZM` its zone; a
//!   timestamp has no zone (`TZ` prints nothing, `OF` `+00`).
//! - An infinite timestamp gives NULL. An interval refuses the calendar keywords (day
//!   names, weeks, Julian days) with PostgreSQL's 22007.
//! - The output is bounded: a template longer than [`MAX_TEMPLATE_CHARS`] is refused.

use std::fmt::Write as _;

use quire_engine::{Interval, SqlState};

use crate::datetime::{civil_from_days, days_from_civil, US_PER_DAY, US_PER_HOUR, US_PER_MINUTE};
use crate::datetime::{ts_is_finite, DAY_NAMES, MONTH_NAMES, US_PER_SEC};
use crate::error::{Result, SqlError};

/// The longest template `to_char` reads.
pub(crate) const MAX_TEMPLATE_CHARS: usize = 64 * 1024;

/// Roman months, December first, as PostgreSQL's `rm_months_upper`.
const ROMAN_MONTHS: [&str; 12] = [
    "XII", "XI", "X", "IX", "VIII", "VII", "VI", "V", "IV", "III", "II", "I",
];

/// A value's fields as `to_char` reads them.
struct Fields {
    /// The astronomical year (0 is 1 BC), or an interval's years.
    year: i64,
    month: i64,
    mday: i64,
    hour: i64,
    min: i64,
    sec: i64,
    usec: i64,
    /// Days since 1970-01-01 (timestamps only).
    days: i64,
    /// The zone: offset east in seconds and abbreviation (timestamptz only).
    zone: Option<(i32, String)>,
    interval: bool,
}

/// `to_char(timestamp[tz], template)`: `utc_us` printed on the session zone's clock when
/// `zoned`; `None` for an infinity.
pub(crate) fn timestamp(us: i64, zoned: bool, template: &str) -> Result<Option<String>> {
    if !ts_is_finite(us) {
        return Ok(None);
    }
    let (local, zone) = if zoned {
        let style = crate::datetime::style::current();
        let (offset, abbrev) = style.zone.offset_at(us);
        (
            us.saturating_add(i64::from(offset) * US_PER_SEC),
            Some((offset, abbrev)),
        )
    } else {
        (us, None)
    };
    let days = local.div_euclid(US_PER_DAY);
    let tod = local.rem_euclid(US_PER_DAY);
    let (year, month, mday) = civil_from_days(days);
    let f = Fields {
        year,
        month: i64::from(month),
        mday: i64::from(mday),
        hour: tod / US_PER_HOUR,
        min: tod / US_PER_MINUTE % 60,
        sec: tod / US_PER_SEC % 60,
        usec: tod % US_PER_SEC,
        days,
        zone,
        interval: false,
    };
    render(&f, template).map(Some)
}

/// `to_char(interval, template)`; `None` for an infinity.
pub(crate) fn interval(i: Interval, template: &str) -> Result<Option<String>> {
    if !crate::datetime::interval::is_finite(i) {
        return Ok(None);
    }
    let p = crate::datetime::interval::Parts::of(i);
    let f = Fields {
        year: p.year,
        month: p.mon,
        mday: p.mday,
        hour: p.hour,
        min: p.min,
        sec: p.sec,
        usec: p.fsec,
        days: 0,
        zone: None,
        interval: true,
    };
    render(&f, template).map(Some)
}

/// The keywords, longest first where one begins another.
const KEYWORDS: &[&str] = &[
    "A.D.", "A.M.", "AD", "AM", "B.C.", "BC", "CC", "DAY", "DDD", "DD", "DY", "D", "FF1", "FF2",
    "FF3", "FF4", "FF5", "FF6", "FX", "HH24", "HH12", "HH", "IDDD", "ID", "IW", "IYYY", "IYY",
    "IY", "I", "J", "MI", "MM", "MONTH", "MON", "MS", "OF", "P.M.", "PM", "Q", "RM", "SSSSS",
    "SSSS", "SS", "TZH", "TZM", "TZ", "US", "WW", "W", "Y,YYY", "YYYY", "YYY", "YY", "Y",
];

/// The keyword at the start of `s`, in the spelling found there: its canonical (upper case)
/// name, its length, and its case (`Upper`, `Lower`, `Capital`).
fn keyword(s: &str) -> Option<(&'static str, usize, Case)> {
    for &k in KEYWORDS {
        let Some(found) = s.get(..k.len()) else {
            continue;
        };
        if found == k {
            return Some((k, k.len(), Case::Upper));
        }
        if found == k.to_ascii_lowercase() {
            return Some((k, k.len(), Case::Lower));
        }
        let capital = matches!(k, "DAY" | "DY" | "MONTH" | "MON")
            && found.starts_with(&k[..1])
            && found[1..] == k[1..].to_ascii_lowercase();
        if capital {
            return Some((k, k.len(), Case::Capital));
        }
    }
    None
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    Upper,
    Lower,
    Capital,
}

fn render(f: &Fields, template: &str) -> Result<String> {
    if template.chars().count() > MAX_TEMPLATE_CHARS {
        return Err(SqlError::new(
            SqlState::PROGRAM_LIMIT_EXCEEDED,
            "to_char template is too long",
        ));
    }
    let mut out = String::with_capacity(template.len() * 2);
    let mut rest = template;
    while !rest.is_empty() {
        let (fill, after) = modifiers(rest);
        if let Some((k, len, case)) = keyword(after) {
            let mut tail = &after[len..];
            let th = match tail.get(..2) {
                Some("TH") => Some(true),
                Some("th") => Some(false),
                _ => None,
            };
            if th.is_some() {
                tail = &tail[2..];
            }
            if tail.get(..2).is_some_and(|s| s.eq_ignore_ascii_case("sp")) {
                tail = &tail[2..];
            }
            field(&mut out, f, k, case, fill, th)?;
            rest = tail;
            continue;
        }
        rest = literal(&mut out, rest);
    }
    Ok(out)
}

/// `FM` (fill mode: no padding) and `TM` (translation: quire's names are English) before
/// a keyword; returns fill mode and what follows them.
fn modifiers(mut s: &str) -> (bool, &str) {
    let mut fm = false;
    loop {
        match s.get(..2) {
            Some("FM" | "fm") => {
                fm = true;
                s = &s[2..];
            }
            Some("TM" | "tm") => s = &s[2..],
            _ => return (fm, s),
        }
    }
}

/// Copies what is not a keyword: a quoted string without its quotes, else one character.
fn literal<'a>(out: &mut String, s: &'a str) -> &'a str {
    let mut chars = s.char_indices();
    let Some((_, c)) = chars.next() else {
        return s;
    };
    if c == '"' {
        let mut escaped = false;
        for (i, c) in chars {
            if escaped {
                out.push(c);
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                return &s[i + 1..];
            } else {
                out.push(c);
            }
        }
        return "";
    }
    if c == '\\' && s[1..].starts_with('"') {
        out.push('"');
        return &s[2..];
    }
    out.push(c);
    &s[c.len_utf8()..]
}

fn invalid_for_interval() -> SqlError {
    SqlError::new(
        SqlState::INVALID_DATETIME_FORMAT,
        "invalid format specification for an interval value",
    )
    .with_hint("Intervals are not tied to specific calendar dates.")
}

/// A number `width` digits wide with zeros (none in fill mode), and its ordinal suffix.
fn number(out: &mut String, v: i64, width: usize, fill: bool, th: Option<bool>) {
    if fill {
        let _ = write!(out, "{v}");
    } else if v < 0 {
        let _ = write!(
            out,
            "-{:0width$}",
            v.unsigned_abs(),
            width = width.saturating_sub(1)
        );
    } else {
        let _ = write!(out, "{v:0width$}");
    }
    if let Some(upper) = th {
        push_ordinal(out, v, upper);
    }
}

/// `v`'s English ordinal suffix, upper case (`TH`) or lower (`th`).
pub(super) fn push_ordinal(out: &mut String, v: i64, upper: bool) {
    let suffix = ordinal(v);
    if upper {
        out.push_str(&suffix.to_ascii_uppercase());
    } else {
        out.push_str(suffix);
    }
}

/// English ordinal suffix of `v` (`st`, `nd`, `rd`, `th`).
fn ordinal(v: i64) -> &'static str {
    let v = v.unsigned_abs();
    match (v % 10, v % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    }
}

/// A name in the keyword's case, padded to `width` unless in fill mode.
fn name(out: &mut String, n: &str, case: Case, width: usize, fill: bool) {
    let shown = match case {
        Case::Upper => n.to_ascii_uppercase(),
        Case::Lower => n.to_ascii_lowercase(),
        Case::Capital => n.to_string(),
    };
    if fill {
        out.push_str(&shown);
    } else {
        let _ = write!(out, "{shown:<width$}");
    }
}

/// `true` for a marker with dots (`A.M.`), and the two spellings.
fn marker(out: &mut String, k: &str, case: Case, first: bool) {
    let (a, b) = match k {
        "AM" | "PM" => ("AM", "PM"),
        "A.M." | "P.M." => ("A.M.", "P.M."),
        "AD" | "BC" => ("AD", "BC"),
        _ => ("A.D.", "B.C."),
    };
    let s = if first { a } else { b };
    out.push_str(&if case == Case::Lower {
        s.to_ascii_lowercase()
    } else {
        s.to_string()
    });
}

/// The year as printed: a BC year by its number (`44` for 44 BC); an interval's as is.
fn shown_year(f: &Fields) -> i64 {
    if f.interval || f.year > 0 {
        f.year
    } else {
        1 - f.year
    }
}

#[allow(clippy::too_many_lines)] // one arm per keyword, as PostgreSQL's DCH_to_char
fn field(
    out: &mut String,
    f: &Fields,
    k: &str,
    case: Case,
    fill: bool,
    th: Option<bool>,
) -> Result<()> {
    let calendar = matches!(
        k,
        "DAY"
            | "DY"
            | "D"
            | "ID"
            | "IW"
            | "IDDD"
            | "IYYY"
            | "IYY"
            | "IY"
            | "I"
            | "WW"
            | "W"
            | "J"
            | "MONTH"
            | "MON"
    );
    if f.interval && calendar {
        return Err(invalid_for_interval());
    }
    let dow = (f.days + 4).rem_euclid(7);
    let doy = || f.days - days_from_civil(f.year, 1, 1) + 1;
    let iso = || iso_fields(f.days);
    match k {
        "A.D." | "AD" | "B.C." | "BC" => marker(out, k, case, f.year > 0),
        "A.M." | "AM" | "P.M." | "PM" => marker(out, k, case, f.hour % 24 < 12),
        "CC" => {
            let cc = if f.interval {
                f.year / 100
            } else if f.year > 0 {
                (f.year - 1) / 100 + 1
            } else {
                f.year / 100 - 1
            };
            let width = if cc < 0 { 3 } else { 2 };
            number(
                out,
                cc,
                if (-99..=99).contains(&cc) { width } else { 0 },
                fill,
                th,
            );
        }
        "DAY" => name(out, DAY_NAMES[dow as usize], case, 9, fill),
        "DY" => name(out, &DAY_NAMES[dow as usize][..3], case, 3, true),
        "DDD" => number(out, if f.interval { f.mday } else { doy() }, 3, fill, th),
        "DD" => number(out, f.mday, 2, fill, th),
        "D" => number(out, dow + 1, 1, fill, th),
        "FF1" | "FF2" | "FF3" | "FF4" | "FF5" | "FF6" => {
            let digits = usize::from(k.as_bytes()[2] - b'0');
            let v = f.usec.abs() / 10i64.pow(6 - digits as u32);
            number(out, v, digits, false, th);
        }
        "HH24" => number(out, f.hour, 2, fill, th),
        "HH" | "HH12" => {
            let h = if f.hour % 12 == 0 { 12 } else { f.hour % 12 };
            number(out, h, 2, fill, th);
        }
        "IDDD" => number(out, iso().2, 3, fill, th),
        "ID" => number(out, (dow + 6) % 7 + 1, 1, fill, th),
        "IW" => number(out, iso().1, 2, fill, th),
        "IYYY" => number(out, iso().0, 4, fill, th),
        "IYY" => number(out, iso().0 % 1000, 3, fill, th),
        "IY" => number(out, iso().0 % 100, 2, fill, th),
        "I" => number(out, iso().0 % 10, 1, fill, th),
        "J" => number(out, f.days + 2_440_588, 0, fill, th),
        "MI" => number(out, f.min, 2, fill, th),
        "MM" => number(out, f.month, 2, fill, th),
        "MONTH" if f.month > 0 => name(out, MONTH_NAMES[(f.month - 1) as usize], case, 9, fill),
        "MON" if f.month > 0 => name(
            out,
            &MONTH_NAMES[(f.month - 1) as usize][..3],
            case,
            3,
            true,
        ),
        "MS" => number(out, f.usec.abs() / 1000, 3, fill, th),
        "OF" => {
            let off = f.zone.as_ref().map_or(0, |z| z.0);
            out.push(if off >= 0 { '+' } else { '-' });
            let a = i64::from(off.unsigned_abs());
            number(out, a / 3600, 2, fill, None);
            if a % 3600 != 0 {
                let _ = write!(out, ":{:02}", a % 3600 / 60);
            }
        }
        "Q" if f.month > 0 => number(out, (f.month - 1) / 3 + 1, 1, fill, th),
        // FX (fixed format) matters only when reading; a month or quarter of an interval
        // with no months prints nothing, as in PostgreSQL.
        "FX" | "MONTH" | "MON" | "Q" => {}
        "RM" => roman_month(out, f, case, fill),
        "SSSS" | "SSSSS" => number(out, f.hour * 3600 + f.min * 60 + f.sec, 0, fill, th),
        "SS" => number(out, f.sec, 2, fill, th),
        "TZH" => {
            let off = f.zone.as_ref().map_or(0, |z| z.0);
            out.push(if off >= 0 { '+' } else { '-' });
            number(out, i64::from(off.unsigned_abs()) / 3600, 2, fill, None);
        }
        "TZM" => {
            let off = f.zone.as_ref().map_or(0, |z| z.0);
            number(
                out,
                i64::from(off.unsigned_abs()) % 3600 / 60,
                2,
                fill,
                None,
            );
        }
        "TZ" => {
            if let Some((_, abbrev)) = &f.zone {
                let s = if case == Case::Lower {
                    abbrev.to_ascii_lowercase()
                } else {
                    abbrev.to_ascii_uppercase()
                };
                out.push_str(&s);
            }
        }
        "US" => number(out, f.usec.abs(), 6, fill, th),
        "WW" => number(out, (doy() - 1) / 7 + 1, 2, fill, th),
        "W" => number(out, (f.mday - 1) / 7 + 1, 1, fill, th),
        "Y,YYY" => {
            let y = shown_year(f);
            let _ = write!(out, "{},{:03}", y / 1000, (y % 1000).abs());
            if let Some(upper) = th {
                push_ordinal(out, y, upper);
            }
        }
        "YYYY" => number(out, shown_year(f), 4, fill, th),
        "YYY" => number(out, shown_year(f) % 1000, 3, fill, th),
        "YY" => number(out, shown_year(f) % 100, 2, fill, th),
        "Y" => number(out, shown_year(f) % 10, 1, fill, th),
        _ => return Err(SqlError::internal(format_args!("to_char keyword {k}"))),
    }
    Ok(())
}

/// The month in Roman numerals (`RM`, `rm`), an interval's counted back from December when
/// negative, as PostgreSQL's.
fn roman_month(out: &mut String, f: &Fields, case: Case, fill: bool) {
    if f.month == 0 && f.year == 0 {
        return;
    }
    let at = match f.month {
        0 if f.year >= 0 => 0,
        0 => 11,
        m if m < 0 => -(m + 1),
        m => 12 - m,
    };
    let numeral = ROMAN_MONTHS[usize::try_from(at).unwrap_or(0).min(11)];
    let shown = if case == Case::Lower {
        numeral.to_ascii_lowercase()
    } else {
        numeral.to_string()
    };
    if fill {
        out.push_str(&shown);
    } else {
        let _ = write!(out, "{shown:<4}");
    }
}

/// ISO 8601 year, week and day of the year of a date (days since 1970-01-01).
fn iso_fields(days: i64) -> (i64, i64, i64) {
    let (year, week) = crate::datetime::fields::iso_week(days);
    let isodow = (days + 3).rem_euclid(7) + 1;
    (year, week, (week - 1) * 7 + isodow)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(year: i64, month: u32, day: u32, hour: i64, min: i64, sec: i64) -> i64 {
        days_from_civil(year, month, day) * US_PER_DAY
            + hour * US_PER_HOUR
            + min * US_PER_MINUTE
            + sec * US_PER_SEC
    }

    #[test]
    fn templates() {
        let t = ts(1997, 2, 10, 17, 32, 1);
        let p = |fmt: &str| timestamp(t, false, fmt).unwrap().unwrap();
        assert_eq!(
            p("DAY Day day DY Dy dy"),
            "MONDAY    Monday    monday    MON Mon mon"
        );
        assert_eq!(p("FMMonth FMDD, YYYY"), "February 10, 1997");
        assert_eq!(
            p("Y,YYY YYYY YYY YY Y CC Q MM WW DDD DD D J"),
            "1,997 1997 997 97 7 20 1 02 06 041 10 2 2450490"
        );
        assert_eq!(p("HH HH12 HH24 MI SS SSSS"), "05 05 17 32 01 63121");
        assert_eq!(p("YYYYTH YYYYth Jth"), "1997TH 1997th 2450490th");
        assert_eq!(
            p("YYYY A.D. bc HH:MI:SS P.M. pm"),
            "1997 A.D. ad 05:32:01 P.M. pm"
        );
        assert_eq!(p("IYYY IYY IY I IW IDDD ID"), "1997 997 97 7 07 043 1");
        assert_eq!(
            p(r#""HH:MI:SS is" HH:MI:SS "\"quoted\"""#),
            r#"HH:MI:SS is 05:32:01 "quoted""#
        );
        assert_eq!(p("RM rm"), "II   ii  ");
        assert!(timestamp(i64::MAX, false, "YYYY").unwrap().is_none());
        let iv = Interval {
            months: -13,
            days: 0,
            micros: 0,
        };
        assert_eq!(interval(iv, "RM").unwrap().unwrap(), "XII ");
        assert!(interval(iv, "Day").is_err());
    }
}
