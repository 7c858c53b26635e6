//! Input of `date`, `timestamp` and `timestamptz`: PostgreSQL's `ParseDateTime` and
//! `DecodeDateTime`, the forms its manual lists (section 8.5.1) and its regression files use.
//!
//! ## Rules
//! - A text splits into fields: numbers, date fields (`1997-02-10`, `02/10/1997`,
//!   `10.02.1997`, `1999-Jan-08`), times (`17:32:01.5`), words (months, week days, `AM`/`PM`,
//!   `BC`/`AD`, zone abbreviations, special values) and zone offsets (`-08`, `+0530`).
//! - Numbers that could be month, day or year read in the session's `DateStyle` order;
//!   a field of three or more digits, or over 31, is a year; a two-digit year is 1970-2069.
//! - A zone is an offset, an abbreviation of PostgreSQL's `Default` set, or a zone name
//!   (`America/New_York`); `date` and `timestamp` ignore it, as PostgreSQL does.
//! - `epoch`, `now`, `today`, `tomorrow`, `yesterday` and `allballs` are PostgreSQL's special
//!   values; `now` is the clock's time when the text is read.
//! - Field values out of range are 22008 `date/time field value out of range`; anything
//!   else that does not read is the caller's 22007.

use super::style::DateOrder;
use super::zone::{offset, Zone};
use super::{days_from_civil, days_in_month, US_PER_DAY, US_PER_HOUR, US_PER_MINUTE, US_PER_SEC};

/// Why a text is not a date/time.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Bad {
    /// 22007: not a date/time at all.
    Syntax,
    /// 22008: a field out of its range.
    FieldRange,
    /// 22008 for a month out of its range, which PostgreSQL hints may be read in another
    /// `DateStyle` order.
    MonthRange,
}

/// A text's zone.
#[derive(Debug)]
pub(crate) enum ZoneSpec {
    /// Seconds east of UTC.
    Offset(i32),
    Named(Zone),
}

/// A decoded text: the wall-clock time and the zone it named, if any.
#[derive(Debug)]
pub(crate) struct Decoded {
    /// Microseconds since 1970-01-01 on the wall clock the text gave.
    pub local_us: i64,
    pub zone: Option<ZoneSpec>,
}

#[derive(Default)]
struct Fields {
    year: Option<(i64, usize)>,
    month: Option<u32>,
    day: Option<u32>,
    time_us: Option<i64>,
    pm: Option<bool>,
    bc: bool,
    zone: Option<ZoneSpec>,
    special_days: Option<i64>,
    julian: Option<i64>,
}

const MONTH_NAMES: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];
const DAY_NAMES: [&str; 7] = [
    "sunday",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
];

/// Abbreviations of PostgreSQL's `Default` set (`timezonesets/Default`) that are fixed
/// offsets, seconds east of UTC.
const ABBREVIATIONS: &[(&str, i32)] = &[
    ("acdt", 37800),
    ("acst", 34200),
    ("adt", -10800),
    ("aedt", 39600),
    ("aest", 36000),
    ("akdt", -28800),
    ("akst", -32400),
    ("ast", -14400),
    ("awst", 28800),
    ("bst", 3600),
    ("cdt", -18000),
    ("cest", 7200),
    ("cet", 3600),
    ("cst", -21600),
    ("eadt", 39600),
    ("east", -21600),
    ("edt", -14400),
    ("eest", 10800),
    ("eet", 7200),
    ("est", -18000),
    ("gmt", 0),
    ("hdt", -32400),
    ("hkt", 28800),
    ("hst", -36000),
    ("idt", 10800),
    ("ist", 7200),
    ("jst", 32400),
    ("kst", 32400),
    ("mdt", -21600),
    ("mest", 7200),
    ("met", 3600),
    ("msk", 10800),
    ("mst", -25200),
    ("ndt", -9000),
    ("nst", -12600),
    ("nzdt", 46800),
    ("nzst", 43200),
    ("pdt", -25200),
    ("pst", -28800),
    ("sast", 7200),
    ("ut", 0),
    ("utc", 0),
    ("wadt", 28800),
    ("wast", 25200),
    ("wet", 0),
    ("west", 3600),
    ("z", 0),
    ("zulu", 0),
];

/// Decodes `text`, `order` deciding numeric dates that could be read more than one way.
pub(crate) fn decode(text: &str, order: DateOrder) -> Result<Decoded, Bad> {
    let mut f = Fields::default();
    let tokens = tokenize(text)?;
    if tokens.is_empty() || tokens.len() > 32 {
        return Err(Bad::Syntax);
    }
    for (i, tok) in tokens.iter().enumerate() {
        let prev_was_time = i > 0 && matches!(tokens[i - 1], Tok::Time(_));
        field(&mut f, tok, order, prev_was_time)?;
    }
    finish(f)
}

#[derive(Debug)]
enum Tok {
    Number(String),
    Date(Vec<String>),
    Time(String),
    Word(String),
    Offset(i32),
}

fn tokenize(text: &str) -> Result<Vec<Tok>, Bad> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() || c == b',' {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b"-/.:".contains(&b[i])) {
                // Letters belong to a date with a month name (`08-Jan-1999`); `T` between
                // a date and a time, or a zone after a time (`01Z`), ends the field.
                let so_far = &text[start..i];
                let date_word = so_far.contains(['-', '/']) && !so_far.contains(':');
                if b[i].is_ascii_alphabetic() && (!date_word || matches!(b[i], b'T' | b't')) {
                    break;
                }
                // A sign after a time starts its zone offset (`17:32:01-08`).
                if b[i] == b'-' && so_far.contains(':') {
                    break;
                }
                i += 1;
            }
            out.push(number_token(&text[start..i])?);
        } else if c == b'+' || c == b'-' {
            let start = i + 1;
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b':') {
                i += 1;
            }
            let body = &text[start..i];
            if body.eq_ignore_ascii_case("infinity") {
                return Err(Bad::Syntax);
            }
            let secs = offset(body).ok_or(Bad::Syntax)?;
            out.push(Tok::Offset(if c == b'-' { -secs } else { secs }));
        } else if matches!(c, b'T' | b't') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
            // ISO 8601's `T` before the time.
            i += 1;
        } else if c.is_ascii_alphabetic() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b"/_+-.".contains(&b[i])) {
                if b[i] == b'-' || b[i] == b'+' {
                    // A sign after a word is an offset unless the word is a zone name.
                    if !text[start..i].contains('/') {
                        break;
                    }
                }
                i += 1;
            }
            let word = &text[start..i];
            out.push(Tok::Word(word.trim_end_matches('.').to_ascii_lowercase()));
        } else {
            return Err(Bad::Syntax);
        }
    }
    Ok(out)
}

fn number_token(s: &str) -> Result<Tok, Bad> {
    if s.contains(':') {
        return Ok(Tok::Time(s.to_string()));
    }
    if let Some(sep) = s.bytes().find(|b| b"-/".contains(b)) {
        let parts: Vec<String> = s.split(char::from(sep)).map(str::to_string).collect();
        return Ok(Tok::Date(parts));
    }
    // `10.02.1997`: two dots make a date; one is a fraction (`19970210.173201`).
    if s.matches('.').count() == 2 {
        return Ok(Tok::Date(s.split('.').map(str::to_string).collect()));
    }
    if s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Ok(Tok::Number(s.to_string()));
    }
    // `1997-02-10` glued to a word (`17:32PST`) is not PostgreSQL's either.
    Err(Bad::Syntax)
}

/// A zone abbreviation of PostgreSQL's `Default` set (lower case): seconds east of UTC.
pub(crate) fn abbreviation(word: &str) -> Option<i32> {
    ABBREVIATIONS
        .iter()
        .find(|(a, _)| *a == word)
        .map(|(_, s)| *s)
}

fn field(f: &mut Fields, tok: &Tok, order: DateOrder, after_time: bool) -> Result<(), Bad> {
    match tok {
        Tok::Time(t) => {
            if f.time_us.is_some() {
                return Err(Bad::Syntax);
            }
            f.time_us = Some(time_of_day(t)?);
        }
        Tok::Date(parts) => date_field(f, parts, order)?,
        Tok::Number(n) => number(f, n, after_time)?,
        Tok::Offset(secs) => {
            if f.time_us.is_none() && f.zone.is_none() && f.year.is_none() {
                return Err(Bad::Syntax);
            }
            set_zone(f, ZoneSpec::Offset(*secs))?;
        }
        Tok::Word(w) => word(f, w)?,
    }
    Ok(())
}

fn set_zone(f: &mut Fields, z: ZoneSpec) -> Result<(), Bad> {
    if f.zone.is_some() {
        return Err(Bad::Syntax);
    }
    f.zone = Some(z);
    Ok(())
}

fn word(f: &mut Fields, w: &str) -> Result<(), Bad> {
    let month = MONTH_NAMES
        .iter()
        .position(|m| w.len() >= 3 && m.starts_with(w) || (w == "sept" && *m == "september"));
    if let Some(m) = month {
        if f.month.is_some() {
            return Err(Bad::Syntax);
        }
        f.month = Some(m as u32 + 1);
        return Ok(());
    }
    let is_day = DAY_NAMES.iter().any(|d| w.len() >= 3 && d.starts_with(w))
        || ["tues", "wednes", "thur", "thurs"].contains(&w);
    if is_day {
        return Ok(());
    }
    match w {
        "am" | "a.m" => f.pm = Some(false),
        "pm" | "p.m" => f.pm = Some(true),
        "bc" | "b.c" => f.bc = true,
        "ad" | "a.d" | "at" | "on" => {}
        "epoch" => f.special_days = Some(0),
        "allballs" => f.time_us = Some(0),
        _ if w.starts_with('j') && w.len() > 1 && w[1..].bytes().all(|b| b.is_ascii_digit()) => {
            f.julian = Some(w[1..].parse().map_err(|_| Bad::FieldRange)?);
        }
        _ => {
            if let Some(secs) = abbreviation(w) {
                return set_zone(f, ZoneSpec::Offset(secs));
            }
            match Zone::parse(w) {
                Some(z) if w.parse::<f64>().is_err() => set_zone(f, ZoneSpec::Named(z))?,
                _ => return Err(Bad::Syntax),
            }
        }
    }
    Ok(())
}

/// `HH:MM[:SS[.frac]]`.
#[allow(clippy::many_single_char_names)] // h, m, s: the fields as PostgreSQL names them
fn time_of_day(t: &str) -> Result<i64, Bad> {
    let mut parts = t.split(':');
    let h = parts.next().ok_or(Bad::Syntax)?;
    let m = parts.next().ok_or(Bad::Syntax)?;
    let s = parts.next().unwrap_or("0");
    if parts.next().is_some() {
        return Err(Bad::Syntax);
    }
    let int = |v: &str| {
        if v.is_empty() || v.len() > 9 || !v.bytes().all(|b| b.is_ascii_digit()) {
            Err(Bad::Syntax)
        } else {
            v.parse::<i64>().map_err(|_| Bad::Syntax)
        }
    };
    let (h, m) = (int(h)?, int(m)?);
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let sec = int(whole)?;
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Bad::Syntax);
    }
    // Round the fraction to microseconds, as PostgreSQL does.
    let frac_us = if frac.is_empty() {
        0
    } else {
        let digits: String = frac.chars().chain(std::iter::repeat('0')).take(7).collect();
        let v: i64 = digits.parse().map_err(|_| Bad::Syntax)?;
        (v + 5) / 10
    };
    if h > 24 || m > 59 || sec > 60 {
        return Err(Bad::FieldRange);
    }
    let us = h * US_PER_HOUR + m * US_PER_MINUTE + sec * US_PER_SEC + frac_us;
    if us > 24 * US_PER_HOUR {
        return Err(Bad::FieldRange);
    }
    Ok(us)
}

#[allow(clippy::many_single_char_names)] // y, m, d and a, b, c: fields and their order
fn date_field(f: &mut Fields, parts: &[String], order: DateOrder) -> Result<(), Bad> {
    if parts.len() != 3 || f.year.is_some() || f.day.is_some() {
        // `1999-Jan` or two dates: PostgreSQL reads neither.
        if parts.len() == 2 && f.month.is_none() {
            return Err(Bad::Syntax);
        }
        return Err(Bad::Syntax);
    }
    let mut numbers = Vec::new();
    for p in parts {
        if p.bytes().all(|b| b.is_ascii_digit()) && !p.is_empty() {
            numbers.push(p.as_str());
        } else {
            word(f, &p.to_ascii_lowercase())?;
            if f.month.is_none() {
                return Err(Bad::Syntax);
            }
        }
    }
    let value = |p: &str| p.parse::<i64>().map_err(|_| Bad::FieldRange);
    match (numbers.as_slice(), f.month.is_some()) {
        // A month by name: `1999-Jan-08` (year first when it is long) or `08-Jan-1999`.
        ([a, b], true) => {
            let (d, y) = if a.len() >= 3 || order == DateOrder::Ymd {
                (b, a)
            } else {
                (a, b)
            };
            f.day = Some(u32::try_from(value(d)?).map_err(|_| Bad::FieldRange)?);
            f.year = Some((value(y)?, y.len()));
        }
        ([a, b, c], false) => {
            let (y, m, d) = if a.len() >= 3 {
                (a, b, c)
            } else {
                match order {
                    DateOrder::Mdy => (c, a, b),
                    DateOrder::Dmy => (c, b, a),
                    DateOrder::Ymd => (a, b, c),
                }
            };
            f.year = Some((value(y)?, y.len()));
            f.month = Some(u32::try_from(value(m)?).map_err(|_| Bad::FieldRange)?);
            f.day = Some(u32::try_from(value(d)?).map_err(|_| Bad::FieldRange)?);
        }
        _ => return Err(Bad::Syntax),
    }
    Ok(())
}

fn number(f: &mut Fields, n: &str, after_time: bool) -> Result<(), Bad> {
    let (int, frac) = n.split_once('.').unwrap_or((n, ""));
    // `YYYYMMDD` or `YYMMDD`, with `.HHMMSS` after it.
    if (int.len() == 8 || int.len() == 6) && f.year.is_none() && f.month.is_none() {
        let k = int.len() - 4;
        f.year = Some((int[..k].parse().map_err(|_| Bad::Syntax)?, k));
        f.month = Some(int[k..k + 2].parse().map_err(|_| Bad::Syntax)?);
        f.day = Some(int[k + 2..].parse().map_err(|_| Bad::Syntax)?);
        if !frac.is_empty() {
            let t = format!("{frac:0<6}");
            if t.len() != 6 {
                return Err(Bad::Syntax);
            }
            f.time_us = Some(time_of_day(&format!(
                "{}:{}:{}",
                &t[..2],
                &t[2..4],
                &t[4..]
            ))?);
        }
        return Ok(());
    }
    if !frac.is_empty() {
        return Err(Bad::Syntax);
    }
    let v: i64 = int.parse().map_err(|_| Bad::FieldRange)?;
    if f.month.is_some() && f.day.is_none() && int.len() <= 2 && !after_time {
        f.day = Some(u32::try_from(v).map_err(|_| Bad::FieldRange)?);
    } else if f.year.is_none() {
        f.year = Some((v, int.len()));
    } else if f.day.is_none() && int.len() <= 2 {
        f.day = Some(u32::try_from(v).map_err(|_| Bad::FieldRange)?);
    } else {
        return Err(Bad::Syntax);
    }
    Ok(())
}

fn finish(f: Fields) -> Result<Decoded, Bad> {
    if let Some(days) = f.special_days {
        return Ok(Decoded {
            local_us: days * US_PER_DAY,
            zone: Some(ZoneSpec::Offset(0)),
        });
    }
    let days = if let Some(j) = f.julian {
        j - 2_440_588
    } else {
        let (mut y, ylen) = f.year.ok_or(Bad::Syntax)?;
        let m = f.month.ok_or(Bad::Syntax)?;
        let d = f.day.ok_or(Bad::Syntax)?;
        if ylen <= 2 && !f.bc {
            y += if y < 70 { 2000 } else { 1900 };
        }
        if f.bc {
            if y <= 0 {
                return Err(Bad::FieldRange);
            }
            y = 1 - y;
        }
        if !(1..=12).contains(&m) {
            return Err(Bad::MonthRange);
        }
        if d < 1 || d > days_in_month(y, m) {
            return Err(Bad::FieldRange);
        }
        if !(-4713..=294_276).contains(&y) {
            return Err(Bad::FieldRange);
        }
        days_from_civil(y, m, d)
    };
    let mut time = f.time_us.unwrap_or(0);
    if let Some(pm) = f.pm {
        let hour = time / US_PER_HOUR;
        if !(1..=12).contains(&hour) && f.time_us.is_some() {
            return Err(Bad::FieldRange);
        }
        if pm && hour < 12 {
            time += 12 * US_PER_HOUR;
        } else if !pm && hour == 12 {
            time -= 12 * US_PER_HOUR;
        }
    }
    // PostgreSQL's timestamps end in 294276; its Julian days start at 4714-11-24 BC.
    let local_us = days
        .checked_mul(US_PER_DAY)
        .and_then(|us| us.checked_add(time))
        .filter(|_| (-2_440_588..=106_751_991).contains(&days))
        .ok_or(Bad::FieldRange)?;
    Ok(Decoded {
        local_us,
        zone: f.zone,
    })
}

/// `now`, `today`, `tomorrow`, `yesterday`: the wall-clock time or midnight in `zone`.
pub(crate) fn special(word: &str, now_us: i64, zone: &Zone) -> Option<i64> {
    let local = zone.utc_to_local(now_us);
    let midnight = local.div_euclid(US_PER_DAY) * US_PER_DAY;
    Some(match word.trim().to_ascii_lowercase().as_str() {
        "now" => local,
        "today" => midnight,
        "tomorrow" => midnight + US_PER_DAY,
        "yesterday" => midnight - US_PER_DAY,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(t: &str, order: DateOrder) -> Option<(i64, Option<i32>)> {
        let d = decode(t, order).ok()?;
        let z = match d.zone {
            Some(ZoneSpec::Offset(s)) => Some(s),
            Some(ZoneSpec::Named(_)) => Some(99),
            None => None,
        };
        Some((d.local_us, z))
    }

    #[test]
    fn forms() {
        let day = days_from_civil(1997, 2, 10) * US_PER_DAY;
        let t = day + 17 * US_PER_HOUR + 32 * US_PER_MINUTE + US_PER_SEC;
        let m = DateOrder::Mdy;
        assert_eq!(read("1997-02-10 17:32:01", m), Some((t, None)));
        assert_eq!(read("1997-02-10T17:32:01Z", m), Some((t, Some(0))));
        assert_eq!(
            read("Mon Feb 10 17:32:01 1997 PST", m),
            Some((t, Some(-28800)))
        );
        assert_eq!(read("02/10/1997 17:32:01-0800", m), Some((t, Some(-28800))));
        assert_eq!(read("10/02/1997 17:32:01", DateOrder::Dmy), Some((t, None)));
        assert_eq!(read("10.02.1997 17:32:01", DateOrder::Dmy), Some((t, None)));
        assert_eq!(read("Feb 10 5:32:01 PM 1997", m), Some((t, None)));
        assert_eq!(read("1997.041 17:32:01", m), None);
        assert_eq!(read("February 10, 1997", m), Some((day, None)));
        assert_eq!(read("1997-Feb-10", m), Some((day, None)));
        assert_eq!(read("10-Feb-1997", m), Some((day, None)));
        assert_eq!(read("97-02-10", DateOrder::Ymd), Some((day, None)));
        assert_eq!(read("J2450490", m), Some((day, None)));
        assert_eq!(
            read("1997-02-10 America/New_York", m).map(|r| r.1),
            Some(Some(99))
        );
        assert!(decode("1997-13-10", m).is_err_and(|e| e == Bad::MonthRange));
        assert!(decode("garbage", m).is_err_and(|e| e == Bad::Syntax));
    }
}
