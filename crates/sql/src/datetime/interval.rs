//! `interval`: text input in PostgreSQL's forms (`1 day 2 hours`, `@ 1 minute ago`,
//! `P1Y2M3DT4H5M6S`, `1:02:03`, `-1 days +02:03`, `1-2`, fractional units), output in
//! IntervalStyle `postgres`, and the field qualifiers (`YEAR TO MONTH`, `SECOND(2)`).
//!
//! Input follows PostgreSQL's `DecodeInterval`: a unit applies to the number just before
//! it; a number without one is in the qualifier's last field (seconds without qualifier);
//! a number before a time (`1 2:03:04`) is days; `ago` negates everything.

use std::fmt::Write as _;

use quire_engine::{Interval, SqlState};

use super::encode::push_seconds;
use super::style::IntervalStyle;
use super::{interval_out_of_range, US_PER_DAY, US_PER_HOUR, US_PER_MINUTE, US_PER_SEC};
use crate::error::{Result, SqlError};

/// PostgreSQL's infinite intervals: every field at its maximum (minimum).
pub(crate) const INFINITY: Interval = Interval {
    months: i32::MAX,
    days: i32::MAX,
    micros: i64::MAX,
};
pub(crate) const NEG_INFINITY: Interval = Interval {
    months: i32::MIN,
    days: i32::MIN,
    micros: i64::MIN,
};

pub(crate) fn is_finite(i: Interval) -> bool {
    i != INFINITY && i != NEG_INFINITY
}

/// An interval's fields, from the most significant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Field {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
}

/// A type modifier: the fields kept (`DAY TO SECOND`: first and last) and the seconds'
/// fractional digits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Typmod {
    pub(crate) fields: Option<(Field, Field)>,
    pub(crate) precision: Option<u8>,
}

/// The fields being summed while parsing. Years, months and days each stay within an
/// int, as PostgreSQL's `pg_itm_in` keeps them (22015 past it); years become months only
/// at the end (22008 past that).
#[derive(Default)]
struct Acc {
    years: i64,
    months: i64,
    days: i64,
    micros: i64,
}

/// A parsed number: integer part and fraction, both with the number's sign.
#[derive(Clone, Copy)]
struct Num {
    int: i64,
    frac: f64,
}

fn bad(text: &str) -> SqlError {
    SqlError::new(
        SqlState::INVALID_DATETIME_FORMAT,
        format!("invalid input syntax for type interval: \"{text}\""),
    )
}

fn field_overflow(text: &str) -> SqlError {
    SqlError::new(
        SqlState::INTERVAL_FIELD_OVERFLOW,
        format!("interval field value out of range: \"{text}\""),
    )
}

/// The text input function, under a type modifier's fields (for a bare number's unit).
pub(crate) fn parse(text: &str, typmod: Typmod) -> Result<Interval> {
    let t = text.trim().to_ascii_lowercase();
    match t.as_str() {
        "infinity" | "+infinity" => return Ok(INFINITY),
        "-infinity" => return Ok(NEG_INFINITY),
        _ => {}
    }
    let acc = if let Some(iso) = t.strip_prefix('p') {
        parse_iso(iso).ok_or_else(|| bad(text))?
    } else {
        parse_postgres(&sql_standard_signs(t), typmod, text)?
    };
    let months = acc
        .years
        .checked_mul(12)
        .and_then(|y| y.checked_add(acc.months))
        .and_then(|m| i32::try_from(m).ok())
        .ok_or_else(interval_out_of_range)?;
    let days = i32::try_from(acc.days).map_err(|_| interval_out_of_range())?;
    let i = Interval {
        months,
        days,
        micros: acc.micros,
    };
    if !is_finite(i) {
        return Err(interval_out_of_range());
    }
    apply_typmod(i, typmod)
}

/// Under `IntervalStyle = sql_standard`, a leading minus sign with no other sign in the text
/// applies to every field (`-1 2:03:04` is minus one day and minus 2:03:04), as the SQL
/// standard reads it; PostgreSQL's own style keeps each field's sign.
fn sql_standard_signs(t: String) -> String {
    let standard = super::style::current().interval == IntervalStyle::SqlStandard;
    let fields: Vec<&str> = t.split_whitespace().collect();
    let more_signs = fields.iter().skip(1).any(|f| f.starts_with(['-', '+']));
    if !standard || !t.starts_with('-') || more_signs {
        return t;
    }
    let mut out = String::with_capacity(t.len() + fields.len());
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(' ');
            if f.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
                out.push('-');
            }
        }
        out.push_str(f);
    }
    out
}

/// Splits into tokens: at blanks, and where digits meet letters (`1day`).
fn tokens(t: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in t.split_whitespace() {
        let mut cur = String::new();
        let mut prev_alpha: Option<bool> = None;
        for c in word.chars() {
            let alpha = c.is_ascii_alphabetic();
            if prev_alpha == Some(!alpha) && !cur.is_empty() && (alpha || c.is_ascii_digit()) {
                out.push(std::mem::take(&mut cur));
            }
            cur.push(c);
            prev_alpha = Some(alpha);
        }
        if !cur.is_empty() {
            out.push(cur);
        }
    }
    out
}

fn parse_postgres(t: &str, typmod: Typmod, text: &str) -> Result<Acc> {
    let mut toks = tokens(t);
    if toks.first().is_some_and(|f| f == "@") {
        toks.remove(0);
    } else if let Some(rest) = toks.first().and_then(|f| f.strip_prefix('@')) {
        toks[0] = rest.to_string();
    }
    let ago = toks.last().is_some_and(|l| l == "ago");
    if ago {
        toks.pop();
    }
    if toks.is_empty() {
        return Err(bad(text));
    }
    let mut acc = Acc::default();
    // Backwards, as PostgreSQL reads them: a unit names the number before it.
    let mut unit: Option<Field> = None;
    let mut unit_scale = 1i64;
    for tok in toks.iter().rev() {
        if tok.contains(':') {
            let us = parse_time(tok, typmod).ok_or_else(|| bad(text))?;
            acc.micros = acc
                .micros
                .checked_add(us)
                .ok_or_else(|| field_overflow(text))?;
            unit = Some(Field::Day);
            unit_scale = 1;
        } else if tok.starts_with(|c: char| c.is_ascii_alphabetic()) {
            let (f, scale) = unit_of(tok).ok_or_else(|| bad(text))?;
            unit = Some(f);
            unit_scale = scale;
        } else if let Some((y, m)) = year_month(tok) {
            acc.years += y;
            acc.months += m;
            check_fields(&acc).ok_or_else(|| field_overflow(text))?;
            unit = None;
        } else {
            let n = parse_number(tok).ok_or_else(|| {
                // Digits that do not fit are out of range, not bad syntax.
                let digits = tok.trim_start_matches(['-', '+']);
                if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
                    field_overflow(text)
                } else {
                    bad(text)
                }
            })?;
            let (f, scale) = match unit.take() {
                Some(f) => (f, std::mem::replace(&mut unit_scale, 1)),
                None => (default_field(typmod), 1),
            };
            add(&mut acc, n, f, scale)
                .and_then(|()| check_fields(&acc))
                .ok_or_else(|| field_overflow(text))?;
            // A number before hours is days (`'1 2' DAY TO HOUR`), as in PostgreSQL.
            if f == Field::Hour {
                unit = Some(Field::Day);
            }
        }
    }
    if ago {
        acc.years = -acc.years;
        acc.months = -acc.months;
        acc.days = -acc.days;
        acc.micros = acc
            .micros
            .checked_neg()
            .ok_or_else(|| field_overflow(text))?;
    }
    Ok(acc)
}

/// Whether years, months and days are each within an int.
fn check_fields(acc: &Acc) -> Option<()> {
    let fits = |v: i64| i32::try_from(v).is_ok();
    (fits(acc.years) && fits(acc.months) && fits(acc.days)).then_some(())
}

/// The field of a number without a unit: the qualifier's last one, else seconds.
fn default_field(typmod: Typmod) -> Field {
    typmod.fields.map_or(Field::Second, |(_, last)| last)
}

/// `Y-M`, SQL's year-month form (either part signed by a leading sign).
fn year_month(tok: &str) -> Option<(i64, i64)> {
    let (neg, body) = match tok.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, tok.strip_prefix('+').unwrap_or(tok)),
    };
    let (y, m) = body.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(y) || !digits(m) {
        return None;
    }
    let (y, m): (i64, i64) = (y.parse().ok()?, m.parse().ok()?);
    Some(if neg { (-y, -m) } else { (y, m) })
}

/// A unit's field and multiplier (a week is 7 days, a decade 10 years, ...).
fn unit_of(word: &str) -> Option<(Field, i64)> {
    Some(match word {
        "microsecond" | "microseconds" | "microsecon" | "us" | "usec" | "usecs" | "useconds"
        | "usecond" => (Field::Second, -1_000_000),
        "millisecond" | "milliseconds" | "millisecon" | "ms" | "msec" | "msecs" | "mseconds"
        | "msecond" => (Field::Second, -1000),
        "s" | "sec" | "secs" | "second" | "seconds" => (Field::Second, 1),
        "m" | "min" | "mins" | "minute" | "minutes" => (Field::Minute, 1),
        "h" | "hr" | "hrs" | "hour" | "hours" => (Field::Hour, 1),
        "d" | "day" | "days" => (Field::Day, 1),
        "w" | "week" | "weeks" => (Field::Day, 7),
        "mon" | "mons" | "month" | "months" => (Field::Month, 1),
        "y" | "yr" | "yrs" | "year" | "years" => (Field::Year, 1),
        "dec" | "decs" | "decade" | "decades" => (Field::Year, 10),
        "c" | "cent" | "century" | "centuries" => (Field::Year, 100),
        "mil" | "mils" | "millennium" | "millennia" => (Field::Year, 1000),
        _ => return None,
    })
}

/// `[+-]digits[.digits]` (or `.digits`).
fn parse_number(tok: &str) -> Option<Num> {
    let (neg, body) = match tok.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, tok.strip_prefix('+').unwrap_or(tok)),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    // Signed before parsing, so that the least i64 reads.
    let int: i64 = if int.is_empty() {
        0
    } else {
        format!("{}{int}", if neg { "-" } else { "" })
            .parse()
            .ok()?
    };
    let frac: f64 = if frac.is_empty() {
        0.0
    } else {
        format!("0.{frac}").parse().ok()?
    };
    Some(Num {
        int,
        frac: if neg { -frac } else { frac },
    })
}

/// Adds `n` units of `field` times `scale` (a negative scale divides: milliseconds are
/// seconds / 1000), with PostgreSQL's cascade of fractions into the smaller fields.
fn add(acc: &mut Acc, n: Num, field: Field, scale: i64) -> Option<()> {
    match field {
        Field::Year => {
            acc.years = acc.years.checked_add(n.int.checked_mul(scale)?)?;
            // `1.5 years`: the fraction becomes whole months, rounded.
            let extra = (n.frac * scale as f64 * 12.0).round_ties_even();
            acc.months = acc.months.checked_add(f64_to_i64(extra)?)?;
        }
        Field::Month => {
            acc.months = acc.months.checked_add(n.int.checked_mul(scale)?)?;
            add_fract_days(acc, n.frac * scale as f64, 30.0)?;
        }
        Field::Day => {
            acc.days = acc.days.checked_add(n.int.checked_mul(scale)?)?;
            if scale == 1 {
                add_fract_micros(acc, n.frac, US_PER_DAY)?;
            } else {
                add_fract_days(acc, n.frac, scale as f64)?;
            }
        }
        Field::Hour | Field::Minute | Field::Second => {
            let unit = match field {
                Field::Hour => US_PER_HOUR,
                Field::Minute => US_PER_MINUTE,
                _ if scale < 0 => US_PER_SEC / -scale,
                _ => US_PER_SEC,
            };
            acc.micros = acc.micros.checked_add(n.int.checked_mul(unit)?)?;
            add_fract_micros(acc, n.frac, unit)?;
        }
    }
    Some(())
}

/// PostgreSQL's `AdjustFractDays`: whole days of `frac * scale`, the rest as microseconds.
fn add_fract_days(acc: &mut Acc, frac: f64, scale: f64) -> Option<()> {
    let days = frac * scale;
    let whole = days.trunc();
    acc.days = acc.days.checked_add(f64_to_i64(whole)?)?;
    add_fract_micros(acc, days - whole, US_PER_DAY)
}

/// PostgreSQL's `AdjustFractMicroseconds`: `frac * scale` microseconds, rounded.
fn add_fract_micros(acc: &mut Acc, frac: f64, scale: i64) -> Option<()> {
    if frac == 0.0 {
        return Some(());
    }
    let us = frac * scale as f64;
    acc.micros = acc.micros.checked_add(f64_to_i64(us.round())?)?;
    Some(())
}

fn f64_to_i64(f: f64) -> Option<i64> {
    (-9.2e18..=9.2e18).contains(&f).then_some(f as i64)
}

/// `[+-]h:m[:s[.f]]` (`m:s.f` when two parts have a fraction, or under `MINUTE TO SECOND`)
/// in microseconds.
fn parse_time(tok: &str, typmod: Typmod) -> Option<i64> {
    let (neg, body) = match tok.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, tok.strip_prefix('+').unwrap_or(tok)),
    };
    let parts: Vec<&str> = body.split(':').collect();
    let int = |s: &str| -> Option<i64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let seconds = |s: &str| -> Option<i64> {
        let n = parse_number(s).filter(|_| !s.starts_with(['-', '+']))?;
        if n.int > 59 {
            return None;
        }
        Some(n.int * US_PER_SEC + (n.frac * US_PER_SEC as f64).round() as i64)
    };
    let minutes_first = parts.len() == 2
        && (parts[1].contains('.') || typmod.fields == Some((Field::Minute, Field::Second)));
    let us = match parts.as_slice() {
        [m, s] if minutes_first => int(m)?
            .checked_mul(US_PER_MINUTE)?
            .checked_add(seconds(s)?)?,
        [h, m] | [h, m, _] => {
            let m = int(m).filter(|m| *m <= 59)?;
            let s = if parts.len() == 3 {
                seconds(parts[2])?
            } else {
                0
            };
            int(h)?
                .checked_mul(US_PER_HOUR)?
                .checked_add(m * US_PER_MINUTE + s)?
        }
        _ => return None,
    };
    Some(if neg { -us } else { us })
}

/// ISO 8601's format with designators, after the `P`: `1Y2M3W4DT5H6M7.5S`.
fn parse_iso(body: &str) -> Option<Acc> {
    let mut acc = Acc::default();
    let (date, time) = body.split_once('t').unwrap_or((body, ""));
    if body.is_empty() || body.ends_with('t') {
        return None;
    }
    for (part, in_time) in [(date, false), (time, true)] {
        let mut rest = part;
        while !rest.is_empty() {
            let end = rest.find(|c: char| c.is_ascii_alphabetic())?;
            let n = parse_number(&rest[..end])?;
            let (field, scale) = match (rest.as_bytes()[end], in_time) {
                (b'y', false) => (Field::Year, 1),
                (b'm', false) => (Field::Month, 1),
                (b'w', false) => (Field::Day, 7),
                (b'd', false) => (Field::Day, 1),
                (b'h', true) => (Field::Hour, 1),
                (b'm', true) => (Field::Minute, 1),
                (b's', true) => (Field::Second, 1),
                _ => return None,
            };
            add(&mut acc, n, field, scale)?;
            rest = &rest[end + 1..];
        }
    }
    Some(acc)
}

/// PostgreSQL's `AdjustIntervalForTypmod`: the fields below the last one kept are zeroed,
/// the seconds rounded to the precision.
pub(crate) fn apply_typmod(i: Interval, typmod: Typmod) -> Result<Interval> {
    if !is_finite(i) {
        return Ok(i);
    }
    let mut out = i;
    if let Some((_, last)) = typmod.fields {
        let trunc = |us: i64, unit: i64| us / unit * unit;
        match last {
            Field::Year => {
                out.months = i.months / 12 * 12;
                out.days = 0;
                out.micros = 0;
            }
            Field::Month => {
                out.days = 0;
                out.micros = 0;
            }
            Field::Day => out.micros = 0,
            Field::Hour => out.micros = trunc(i.micros, US_PER_HOUR),
            Field::Minute => out.micros = trunc(i.micros, US_PER_MINUTE),
            Field::Second => {}
        }
    }
    if let Some(p) = typmod.precision.filter(|p| *p < 6) {
        let unit = 10i64.pow(6 - u32::from(p));
        let half = unit / 2;
        let r = if out.micros >= 0 {
            out.micros.checked_add(half).map(|v| v / unit * unit)
        } else {
            out.micros.checked_sub(half).map(|v| v / unit * unit)
        };
        out.micros = r.ok_or_else(interval_out_of_range)?;
    }
    Ok(out)
}

/// The text output function, IntervalStyle `postgres`: `1 year 2 mons -3 days +04:05:06.5`.
pub(crate) fn format(i: Interval) -> String {
    if i == INFINITY {
        return "infinity".into();
    }
    if i == NEG_INFINITY {
        return "-infinity".into();
    }
    let parts = Parts::of(i);
    match super::style::current().interval {
        IntervalStyle::Postgres => parts.postgres(),
        IntervalStyle::PostgresVerbose => parts.verbose(),
        IntervalStyle::SqlStandard => parts.sql_standard(),
        IntervalStyle::Iso8601 => parts.iso_8601(),
    }
}

/// An interval's fields as PostgreSQL's `interval2itm` splits it: the time fields all carry
/// the sign of the microseconds.
pub(crate) struct Parts {
    pub year: i64,
    pub mon: i64,
    pub mday: i64,
    pub hour: i64,
    pub min: i64,
    pub sec: i64,
    pub fsec: i64,
}

impl Parts {
    pub(crate) fn of(i: Interval) -> Parts {
        Parts {
            year: i64::from(i.months / 12),
            mon: i64::from(i.months % 12),
            mday: i64::from(i.days),
            hour: i.micros / US_PER_HOUR,
            min: i.micros % US_PER_HOUR / US_PER_MINUTE,
            sec: i.micros % US_PER_MINUTE / US_PER_SEC,
            fsec: i.micros % US_PER_SEC,
        }
    }

    fn time_is_zero(&self) -> bool {
        self.hour == 0 && self.min == 0 && self.sec == 0 && self.fsec == 0
    }

    fn time_is_negative(&self) -> bool {
        self.hour < 0 || self.min < 0 || self.sec < 0 || self.fsec < 0
    }

    /// `IntervalStyle = postgres`: `1 year 2 mons -3 days +04:05:06`.
    fn postgres(&self) -> String {
        let mut s = String::new();
        let (mut is_zero, mut is_before) = (true, false);
        for (v, unit) in [(self.year, "year"), (self.mon, "mon"), (self.mday, "day")] {
            if v == 0 {
                continue;
            }
            let space = if is_zero { "" } else { " " };
            let plus = if is_before && v > 0 { "+" } else { "" };
            let plural = if v == 1 { "" } else { "s" };
            let _ = write!(s, "{space}{plus}{v} {unit}{plural}");
            is_before = v < 0;
            is_zero = false;
        }
        if is_zero || !self.time_is_zero() {
            let space = if is_zero { "" } else { " " };
            let sign = if self.time_is_negative() {
                "-"
            } else if is_before {
                "+"
            } else {
                ""
            };
            let (h, m) = (self.hour.unsigned_abs(), self.min.unsigned_abs());
            let _ = write!(s, "{space}{sign}{h:02}:{m:02}:");
            push_seconds(&mut s, self.sec, self.fsec, true);
        }
        s
    }

    /// `IntervalStyle = postgres_verbose`: `@ 1 year 2 mons 3 days 4 hours ago`.
    fn verbose(&self) -> String {
        let mut s = String::from("@");
        let (mut is_zero, mut is_before) = (true, false);
        let units = [
            (self.year, "year"),
            (self.mon, "mon"),
            (self.mday, "day"),
            (self.hour, "hour"),
            (self.min, "min"),
        ];
        for (v, unit) in units {
            if v == 0 {
                continue;
            }
            // The first field that is not zero decides "ago"; later ones print against it.
            let shown = if is_zero {
                is_before = v < 0;
                v.abs()
            } else if is_before {
                -v
            } else {
                v
            };
            let plural = if shown == 1 { "" } else { "s" };
            let _ = write!(s, " {shown} {unit}{plural}");
            is_zero = false;
        }
        if self.sec != 0 || self.fsec != 0 {
            s.push(' ');
            if self.sec < 0 || (self.sec == 0 && self.fsec < 0) {
                if is_zero {
                    is_before = true;
                } else if !is_before {
                    s.push('-');
                }
            } else if is_before {
                s.push('-');
            }
            push_seconds(&mut s, self.sec, self.fsec, false);
            let plural = if self.sec.abs() != 1 || self.fsec != 0 {
                "s"
            } else {
                ""
            };
            let _ = write!(s, " sec{plural}");
            is_zero = false;
        }
        if is_zero {
            s.push_str(" 0");
        }
        if is_before {
            s.push_str(" ago");
        }
        s
    }

    /// `IntervalStyle = sql_standard`: `1-2`, `3 4:05:06`, or all fields with signs when
    /// the interval mixes signs or year-month with day-time fields.
    fn sql_standard(&self) -> String {
        let p = self;
        let neg = p.year < 0 || p.mon < 0 || p.mday < 0 || p.time_is_negative();
        let pos = p.year > 0
            || p.mon > 0
            || p.mday > 0
            || p.hour > 0
            || p.min > 0
            || p.sec > 0
            || p.fsec > 0;
        let has_year_month = p.year != 0 || p.mon != 0;
        let has_day_time = p.mday != 0 || !p.time_is_zero();
        let standard = !(neg && pos || has_year_month && has_day_time);
        let mut s = String::new();
        if !neg && !pos {
            return "0".into();
        }
        if !standard {
            let year_sign = if p.year < 0 || p.mon < 0 { '-' } else { '+' };
            let day_sign = if p.mday < 0 { '-' } else { '+' };
            let sec_sign = if p.time_is_negative() { '-' } else { '+' };
            let _ = write!(
                s,
                "{year_sign}{}-{} {day_sign}{} {sec_sign}{}:{:02}:",
                p.year.abs(),
                p.mon.abs(),
                p.mday.abs(),
                p.hour.abs(),
                p.min.abs()
            );
            push_seconds(&mut s, p.sec, p.fsec, true);
            return s;
        }
        if neg {
            s.push('-');
        }
        let (year, mon, mday) = (p.year.abs(), p.mon.abs(), p.mday.abs());
        let (hour, min) = (p.hour.abs(), p.min.abs());
        if has_year_month {
            let _ = write!(s, "{year}-{mon}");
        } else {
            if mday != 0 {
                let _ = write!(s, "{mday} ");
            }
            let _ = write!(s, "{hour}:{min:02}:");
            push_seconds(&mut s, p.sec, p.fsec, true);
        }
        s
    }

    /// `IntervalStyle = iso_8601`: `P1Y2M3DT4H5M6S`.
    fn iso_8601(&self) -> String {
        let p = self;
        if p.year == 0 && p.mon == 0 && p.mday == 0 && p.time_is_zero() {
            return "PT0S".into();
        }
        let mut s = String::from("P");
        for (v, unit) in [(p.year, 'Y'), (p.mon, 'M'), (p.mday, 'D')] {
            if v != 0 {
                let _ = write!(s, "{v}{unit}");
            }
        }
        if !p.time_is_zero() {
            s.push('T');
        }
        for (v, unit) in [(p.hour, 'H'), (p.min, 'M')] {
            if v != 0 {
                let _ = write!(s, "{v}{unit}");
            }
        }
        if p.sec != 0 || p.fsec != 0 {
            if p.sec < 0 || p.fsec < 0 {
                s.push('-');
            }
            push_seconds(&mut s, p.sec, p.fsec, false);
            s.push('S');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(t: &str) -> String {
        format(parse(t, Typmod::default()).unwrap())
    }

    #[test]
    fn reads_and_prints_postgresqls_forms() {
        assert_eq!(p("1 day 2 hours"), "1 day 02:00:00");
        assert_eq!(p("1 year 2 mons"), "1 year 2 mons");
        assert_eq!(p("@ 1 minute ago"), "-00:01:00");
        assert_eq!(p("P1Y2M3DT4H5M6S"), "1 year 2 mons 3 days 04:05:06");
        assert_eq!(p("1:02:03"), "01:02:03");
        assert_eq!(p("-1 days +02:03"), "-1 days +02:03:00");
        assert_eq!(p("1.5 years"), "1 year 6 mons");
        assert_eq!(p("1.5 months"), "1 mon 15 days");
        assert_eq!(p("1 2:03:04"), "1 day 02:03:04");
        assert_eq!(p("12:34.5"), "00:12:34.5");
        assert_eq!(p("1-2"), "1 year 2 mons");
        assert_eq!(p("-1 day -02:03:04.5"), "-1 days -02:03:04.5");
        assert_eq!(p("-1 mons 2 days"), "-1 mons +2 days");
        assert_eq!(p("0"), "00:00:00");
        assert_eq!(p("1.5"), "00:00:01.5");
        assert_eq!(p("1 week 1.5 days"), "8 days 12:00:00");
        assert_eq!(p("100000000 hours"), "100000000:00:00");
        assert_eq!(p("-infinity"), "-infinity");
    }

    #[test]
    fn refuses_garbage_and_overflow() {
        let code = |t: &str| parse(t, Typmod::default()).unwrap_err().sqlstate().code();
        assert_eq!(code("foo"), "22007");
        assert_eq!(code("1 fortnight"), "22007");
        assert_eq!(code(""), "22007");
        assert_eq!(code("2147483648 years"), "22015");
        assert_eq!(code("2147483647 years"), "22008");
        assert_eq!(code("9223372036854775807 hours"), "22015");
    }

    #[test]
    fn a_qualifier_names_a_bare_number_and_truncates() {
        let q = |t: &str, first, last| {
            let typmod = Typmod {
                fields: Some((first, last)),
                precision: None,
            };
            format(parse(t, typmod).unwrap())
        };
        assert_eq!(q("1", Field::Day, Field::Day), "1 day");
        assert_eq!(q("1", Field::Year, Field::Year), "1 year");
        assert_eq!(
            q("1 day 3 hours 4 minutes", Field::Hour, Field::Hour),
            "1 day 03:00:00"
        );
        assert_eq!(q("1:02", Field::Minute, Field::Second), "00:01:02");
    }
}
