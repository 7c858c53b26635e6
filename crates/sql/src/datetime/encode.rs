//! Output of `date`, `timestamp` and `timestamptz` in the session's `DateStyle`, as
//! PostgreSQL's `EncodeDateOnly`, `EncodeDateTime` and `EncodeTimezone` write them.
//!
//! ## Rules
//! - Years before 1 print as their BC year with ` BC` at the end (year 0 is 1 BC).
//! - Seconds print with two digits and the fraction's trailing zeros dropped.
//! - A `timestamptz` prints in the session's time zone: ISO with the numeric offset
//!   (`-08`, `+05:30`, `-07:52:58`), the other formats with the zone's abbreviation.

use std::fmt::Write as _;

use super::style::{current, DateFormat, DateOrder, Style};
use super::zone::push_offset;
use super::{civil_from_days, DAY_NAMES, MONTH_NAMES, US_PER_DAY, US_PER_SEC};

/// A date (days since 1970-01-01) in the session's style.
pub(crate) fn date(days: i64) -> String {
    let style = current();
    let (year, month, day) = civil_from_days(days);
    let mut s = String::with_capacity(16);
    push_date(&mut s, &style, year, month, day);
    push_era(&mut s, year);
    s
}

/// A timestamp without time zone in the session's style.
pub(crate) fn timestamp(us: i64) -> String {
    if let Some(word) = infinity(us) {
        return word.into();
    }
    date_time(&current(), us, None)
}

fn infinity(us: i64) -> Option<&'static str> {
    match us {
        super::TS_INFINITY => Some("infinity"),
        super::TS_NEG_INFINITY => Some("-infinity"),
        _ => None,
    }
}

/// A timestamp with time zone in the session's style and zone.
pub(crate) fn timestamptz(utc_us: i64) -> String {
    if let Some(word) = infinity(utc_us) {
        return word.into();
    }
    let style = current();
    let (offset, abbrev) = style.zone.offset_at(utc_us);
    let local = utc_us.saturating_add(i64::from(offset) * US_PER_SEC);
    date_time(&style, local, Some((offset, &abbrev)))
}

/// A timestamp in ISO form with no zone, whatever the session's style (logs, catalogs).
pub(crate) fn timestamp_iso(us: i64) -> String {
    if let Some(word) = infinity(us) {
        return word.into();
    }
    date_time(&Style::default(), us, None)
}

/// A date, timestamp or timestamptz as JSON writes it (PostgreSQL's `JsonEncodeDateTime`,
/// XML Schema's form): `2024-01-02`, `2024-01-02T03:04:05.5`, `2024-01-02T03:04:05+05:30`,
/// whatever the session's `DateStyle`; a timestamptz in the session's zone.
pub(crate) fn xsd(value: i64, kind: XsdKind) -> String {
    if kind != XsdKind::Date {
        if let Some(word) = infinity(value) {
            return word.into();
        }
    }
    let iso = Style::default();
    match kind {
        XsdKind::Date => {
            let (year, month, day) = civil_from_days(value);
            let mut s = String::with_capacity(16);
            push_date(&mut s, &iso, year, month, day);
            push_era(&mut s, year);
            s
        }
        XsdKind::Timestamp => date_time(&iso, value, None).replacen(' ', "T", 1),
        XsdKind::Timestamptz => {
            let (offset, _) = current().zone.offset_at(value);
            let local = value.saturating_add(i64::from(offset) * US_PER_SEC);
            let mut s = date_time(&iso, local, None).replacen(' ', "T", 1);
            let era = s.ends_with(" BC");
            if era {
                s.truncate(s.len() - 3);
            }
            let sign = if offset < 0 { '-' } else { '+' };
            let a = offset.unsigned_abs();
            let _ = write!(s, "{sign}{:02}:{:02}", a / 3600, a / 60 % 60);
            if a % 60 != 0 {
                let _ = write!(s, ":{:02}", a % 60);
            }
            if era {
                s.push_str(" BC");
            }
            s
        }
    }
}

/// What [`xsd`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum XsdKind {
    Date,
    Timestamp,
    Timestamptz,
}

fn date_time(style: &Style, us: i64, zone: Option<(i32, &str)>) -> String {
    let days = us.div_euclid(US_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let in_day = us.rem_euclid(US_PER_DAY);
    let mut s = String::with_capacity(32);
    if style.format == DateFormat::Postgres {
        let dow = &DAY_NAMES[usize::try_from((days + 4).rem_euclid(7)).unwrap_or(0)][..3];
        let mon = &MONTH_NAMES[(month as usize).saturating_sub(1) % 12][..3];
        if style.order == DateOrder::Dmy {
            let _ = write!(s, "{dow} {day:02} {mon} ");
        } else {
            let _ = write!(s, "{dow} {mon} {day:02} ");
        }
        push_time(&mut s, in_day);
        let _ = write!(s, " {:04}", era_year(year));
    } else {
        push_date(&mut s, style, year, month, day);
        s.push(' ');
        push_time(&mut s, in_day);
    }
    if let Some((offset, abbrev)) = zone {
        if style.format == DateFormat::Iso {
            push_offset(&mut s, offset);
        } else {
            s.push(' ');
            s.push_str(abbrev);
        }
    }
    push_era(&mut s, year);
    s
}

fn push_date(s: &mut String, style: &Style, year: i64, month: u32, day: u32) {
    let y = era_year(year);
    let dmy = style.order == DateOrder::Dmy;
    let _ = match style.format {
        DateFormat::Iso => write!(s, "{y:04}-{month:02}-{day:02}"),
        DateFormat::Sql if dmy => write!(s, "{day:02}/{month:02}/{y:04}"),
        DateFormat::Sql => write!(s, "{month:02}/{day:02}/{y:04}"),
        DateFormat::German => write!(s, "{day:02}.{month:02}.{y:04}"),
        DateFormat::Postgres if dmy => write!(s, "{day:02}-{month:02}-{y:04}"),
        DateFormat::Postgres => write!(s, "{month:02}-{day:02}-{y:04}"),
    };
}

/// `HH:MM:SS[.ffffff]`, the fraction's trailing zeros dropped.
fn push_time(s: &mut String, in_day_us: i64) {
    let secs = in_day_us / US_PER_SEC;
    let _ = write!(s, "{:02}:{:02}:", secs / 3600, secs / 60 % 60);
    push_seconds(s, secs % 60, in_day_us % US_PER_SEC, true);
}

/// Whole seconds (two digits when `pad`) and a fraction of `frac_us`, trailing zeros
/// dropped: PostgreSQL's `AppendSeconds` (signs are the caller's).
pub(crate) fn push_seconds(s: &mut String, secs: i64, frac_us: i64, pad: bool) {
    let secs = secs.unsigned_abs();
    if pad {
        let _ = write!(s, "{secs:02}");
    } else {
        let _ = write!(s, "{secs}");
    }
    let frac = frac_us.unsigned_abs();
    if frac != 0 {
        let f = format!(".{frac:06}");
        s.push_str(f.trim_end_matches('0'));
    }
}

/// PostgreSQL's year of an astronomical one: year 0 is 1 BC.
fn era_year(year: i64) -> i64 {
    if year > 0 {
        year
    } else {
        1 - year
    }
}

fn push_era(s: &mut String, year: i64) {
    if year <= 0 {
        s.push_str(" BC");
    }
}

#[cfg(test)]
mod tests {
    use super::super::style::{install, Style};
    use super::*;
    use crate::datetime::days_from_civil;
    use std::sync::Arc;

    fn with_style(datestyle: &str, zone: &str, f: impl FnOnce()) {
        install(Arc::new(Style::of(datestyle, "postgres", zone)));
        f();
        install(Arc::new(Style::default()));
    }

    #[test]
    fn styles() {
        let d = days_from_civil(1997, 2, 10);
        let us = (d * 86_400 + 17 * 3600 + 32 * 60 + 1) * US_PER_SEC;
        let utc = us + 8 * 3600 * US_PER_SEC;
        with_style("Postgres, MDY", "America/Los_Angeles", || {
            assert_eq!(date(d), "02-10-1997");
            assert_eq!(timestamp(us), "Mon Feb 10 17:32:01 1997");
            assert_eq!(timestamptz(utc), "Mon Feb 10 17:32:01 1997 PST");
        });
        with_style("ISO, MDY", "America/Los_Angeles", || {
            assert_eq!(timestamptz(utc), "1997-02-10 17:32:01-08");
        });
        with_style("SQL, DMY", "UTC", || {
            assert_eq!(date(d), "10/02/1997");
            assert_eq!(timestamptz(us), "10/02/1997 17:32:01 UTC");
        });
        with_style("German", "-8", || {
            assert_eq!(timestamptz(utc), "10.02.1997 17:32:01 -08");
        });
    }
}
