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
use super::{
    days_from_civil, days_in_month, DAY_NAMES, MONTH_NAMES, US_PER_DAY, US_PER_HOUR, US_PER_MINUTE,
    US_PER_SEC,
};

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
    /// 22023: a zone name (with a `/`) the database does not have.
    UnknownZone(String),
    /// 22009: a zone offset beyond 15:59:59.
    ZoneRange,
    /// 22008: a date before 4714-11-24 BC or a timestamp after 294276 (`timestamp out of
    /// range`, `date out of range`).
    TypeRange,
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
#[allow(clippy::struct_excessive_bools)] // the decoder's flags, as PostgreSQL's are
struct Fields {
    year: Option<i64>,
    /// The year was one or two digits: 1970-2069 unless BC (PostgreSQL's `is2digits`).
    two_digit_year: bool,
    month: Option<i64>,
    day: Option<i64>,
    /// A day of the year (`1999.008`), which sets month and day at the end.
    day_of_year: Option<i64>,
    /// The month was a name, which changes how the numbers around it read.
    text_month: bool,
    time_us: Option<i64>,
    pm: Option<bool>,
    bc: bool,
    zone: Option<ZoneSpec>,
    special_days: Option<i64>,
    julian: Option<i64>,
    /// `infinity` or `-infinity`.
    infinite: Option<i64>,
    /// The time `now` and its relatives read: UTC, on the session's clock, its offset.
    now: Option<(i64, i64, i32)>,
    /// The last field was a zone abbreviation, which a POSIX offset may follow (`GMT+8`).
    after_zone_word: bool,
}

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

/// Decodes `text`, `order` deciding numeric dates that could be read more than one way;
/// `now_us` (UTC) and `zone` (the session's) are what `now`, `today` and friends read.
pub(crate) fn decode(
    text: &str,
    order: DateOrder,
    now_us: i64,
    zone: &Zone,
) -> Result<Decoded, Bad> {
    let mut f = Fields {
        now: Some((now_us, zone.utc_to_local(now_us), zone.offset_secs(now_us))),
        ..Fields::default()
    };
    let tokens = tokenize(text)?;
    if tokens.is_empty() || tokens.len() > MAX_FIELDS {
        return Err(Bad::Syntax);
    }
    for tok in &tokens {
        field(&mut f, tok, order)?;
    }
    finish(f)
}

/// The most fields a date/time text may have.
const MAX_FIELDS: usize = 32;

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
        // PostgreSQL's MAXDATEFIELDS: more fields than a date/time has is not one.
        if out.len() > MAX_FIELDS {
            return Err(Bad::Syntax);
        }
        let c = b[i];
        if c.is_ascii_whitespace() || c == b',' {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            i = digit_field_end(b, i);
            out.push(number_token(&text[start..i])?);
        } else if c == b'+' || c == b'-' {
            let start = i + 1;
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b':') {
                i += 1;
            }
            let body = &text[start..i];
            if body.eq_ignore_ascii_case("infinity") {
                let word = if c == b'-' { "-infinity" } else { "infinity" };
                out.push(Tok::Word(word.into()));
                continue;
            }
            let secs = offset(body).ok_or_else(|| {
                let numeric =
                    !body.is_empty() && body.bytes().all(|b| b.is_ascii_digit() || b == b':');
                if numeric {
                    Bad::ZoneRange
                } else {
                    Bad::Syntax
                }
            })?;
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
            // A month name that starts a date (`Feb-10-1997`).
            let sep = b.get(i).copied().filter(|s| matches!(s, b'-' | b'/'));
            if let Some(sep) = sep.filter(|_| month_number(&word.to_ascii_lowercase()).is_some()) {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == sep) {
                    i += 1;
                }
                let parts = text[start..i].split(char::from(sep)).map(str::to_string);
                out.push(Tok::Date(parts.collect()));
                continue;
            }
            out.push(Tok::Word(word.trim_end_matches('.').to_ascii_lowercase()));
        } else {
            return Err(Bad::Syntax);
        }
    }
    Ok(out)
}

/// Where a field that starts with a digit ends, as PostgreSQL's `ParseDateTime` finds it:
/// a time runs over digits, `:` and `.`; a date whose second part is digits takes only digits
/// and its first separator (`1999-08-Jan` ends before `Jan`, and fails); one whose second
/// part is a month name takes letters too (`08-Jan-1999`).
fn digit_field_end(b: &[u8], mut i: usize) -> usize {
    let digits = |b: &[u8], mut i: usize| {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    i = digits(b, i);
    match b.get(i) {
        Some(b':') => {
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b':' || b[i] == b'.') {
                i += 1;
            }
            i
        }
        Some(&delim @ (b'-' | b'/' | b'.')) => {
            i += 1;
            if b.get(i).is_some_and(u8::is_ascii_digit) {
                i = digits(b, i);
                if b.get(i) == Some(&delim) {
                    while i < b.len() && (b[i].is_ascii_digit() || b[i] == delim) {
                        i += 1;
                    }
                }
            } else {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == delim) {
                    i += 1;
                }
            }
            i
        }
        _ => i,
    }
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

fn field(f: &mut Fields, tok: &Tok, order: DateOrder) -> Result<(), Bad> {
    let after_zone_word = std::mem::take(&mut f.after_zone_word);
    match tok {
        Tok::Time(t) => {
            if f.time_us.is_some() {
                return Err(Bad::Syntax);
            }
            f.time_us = Some(time_of_day(t)?);
        }
        Tok::Date(parts) => date_field(f, parts, order)?,
        Tok::Number(n) => number(f, n, order)?,
        // `GMT+8`, `PST+8`: a POSIX zone, hours west of UTC.
        Tok::Offset(secs) if after_zone_word => f.zone = Some(ZoneSpec::Offset(-*secs)),
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

/// A month's number by its name or an abbreviation of three letters or more.
fn month_number(w: &str) -> Option<i64> {
    let prefix = |name: &str| w.len() >= 3 && name.to_ascii_lowercase().starts_with(w);
    MONTH_NAMES
        .iter()
        .position(|m| prefix(m) || (w == "sept" && *m == "September"))
        .and_then(|m| i64::try_from(m + 1).ok())
}

fn word(f: &mut Fields, w: &str) -> Result<(), Bad> {
    if let Some(m) = month_number(w) {
        if f.month.is_some() {
            return Err(Bad::Syntax);
        }
        f.month = Some(m);
        f.text_month = true;
        return Ok(());
    }
    let is_day = DAY_NAMES
        .iter()
        .any(|d| w.len() >= 3 && d.to_ascii_lowercase().starts_with(w))
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
        "infinity" => f.infinite = Some(super::TS_INFINITY),
        "-infinity" => f.infinite = Some(super::TS_NEG_INFINITY),
        "today" | "tomorrow" | "yesterday" | "now" => today(f, w)?,
        "allballs" => f.time_us = Some(0),
        _ if w.starts_with('j') && w.len() > 1 && w[1..].bytes().all(|b| b.is_ascii_digit()) => {
            f.julian = Some(w[1..].parse().map_err(|_| Bad::FieldRange)?);
        }
        _ => {
            if let Some(secs) = abbreviation(w) {
                f.after_zone_word = true;
                return set_zone(f, ZoneSpec::Offset(secs));
            }
            match Zone::named(w) {
                Some(z) => set_zone(f, ZoneSpec::Named(z))?,
                None if w.contains('/') => return Err(Bad::UnknownZone(w.to_string())),
                None => return Err(Bad::Syntax),
            }
        }
    }
    Ok(())
}

/// `today`, `tomorrow`, `yesterday` (midnight on the session's clock) and `now` (the
/// instant, with the session's offset).
fn today(f: &mut Fields, w: &str) -> Result<(), Bad> {
    let (_, local, offset) = f.now.ok_or(Bad::Syntax)?;
    if f.year.is_some() || f.month.is_some() || f.day.is_some() {
        return Err(Bad::Syntax);
    }
    let days = local.div_euclid(US_PER_DAY)
        + match w {
            "tomorrow" => 1,
            "yesterday" => -1,
            _ => 0,
        };
    let (year, month, day) = super::civil_from_days(days);
    f.year = Some(year);
    f.month = Some(i64::from(month));
    f.day = Some(i64::from(day));
    if w == "now" {
        f.time_us = Some(local.rem_euclid(US_PER_DAY));
        set_zone(f, ZoneSpec::Offset(offset))?;
    } else if f.time_us.is_none() {
        f.time_us = Some(0);
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

/// A date field with separators (`1997-02-10`, `Jan-08-99`, `1999.008`), as PostgreSQL's
/// `DecodeDate`: month names first, then the numbers in their order.
fn date_field(f: &mut Fields, parts: &[String], order: DateOrder) -> Result<(), Bad> {
    if parts.len() > 3 || parts.iter().any(String::is_empty) {
        return Err(Bad::Syntax);
    }
    let (names, numbers): (Vec<&String>, Vec<&String>) = parts
        .iter()
        .partition(|p| !p.bytes().all(|b| b.is_ascii_digit()));
    for name in names {
        let before = f.month;
        word(f, &name.to_ascii_lowercase())?;
        if before.is_some() || f.month.is_none() {
            return Err(Bad::Syntax);
        }
    }
    for n in numbers {
        decode_number(f, n, order)?;
    }
    Ok(())
}

/// A field of digits (maybe with a fraction), as PostgreSQL's `DecodeDateTime` sorts them:
/// `1999.008` is a date, six digits or more are `YYYYMMDD` or `HHMMSS`, others one field.
fn number(f: &mut Fields, n: &str, order: DateOrder) -> Result<(), Bad> {
    let have_date = f.year.is_some() || f.month.is_some() || f.day.is_some();
    let int_len = n.find('.').unwrap_or(n.len());
    if n.contains('.') && !have_date {
        let parts: Vec<String> = n.split('.').map(str::to_string).collect();
        return date_field(f, &parts, order);
    }
    let have_full_date = f.year.is_some() && f.month.is_some() && f.day.is_some();
    if n.contains('.') && int_len > 2 || int_len >= 6 && !(have_full_date && f.time_us.is_some()) {
        return number_field(f, n);
    }
    if n.contains('.') {
        return Err(Bad::Syntax);
    }
    decode_number(f, n, order)
}

/// PostgreSQL's `DecodeNumberField`: `YYYYMMDD`/`YYMMDD` while the date is incomplete, else
/// `HHMMSS`/`HHMM`, with a fraction of seconds after a dot.
fn number_field(f: &mut Fields, n: &str) -> Result<(), Bad> {
    let (digits, frac) = n.split_once('.').unwrap_or((n, ""));
    let num = |s: &str| s.parse::<i64>().map_err(|_| Bad::Syntax);
    let len = digits.len();
    let have_full_date = f.year.is_some() && f.month.is_some() && f.day.is_some();
    if frac.is_empty() && !have_full_date && len >= 6 {
        f.day = Some(num(&digits[len - 2..])?);
        f.month = Some(num(&digits[len - 4..len - 2])?);
        f.year = Some(num(&digits[..len - 4])?);
        f.two_digit_year = len - 4 == 2;
        return Ok(());
    }
    if f.time_us.is_some() || !(len == 6 || len == 4) {
        return Err(Bad::Syntax);
    }
    let sec = if len == 6 { &digits[4..] } else { "0" };
    let text = format!("{}:{}:{sec}", &digits[..2], &digits[2..4]);
    let text = if frac.is_empty() {
        text
    } else {
        format!("{text}.{frac}")
    };
    f.time_us = Some(time_of_day(&text)?);
    Ok(())
}

/// PostgreSQL's `DecodeNumber`: one number, placed by what the date has so far and the
/// `DateStyle` order.
fn decode_number(f: &mut Fields, n: &str, order: DateOrder) -> Result<(), Bad> {
    let len = n.len();
    let v: i64 = n.parse().map_err(|_| Bad::FieldRange)?;
    let have = (f.year.is_some(), f.month.is_some(), f.day.is_some());
    if len == 3 && have == (true, false, false) && (1..=366).contains(&v) {
        f.day_of_year = Some(v);
        f.month = Some(1);
        f.day = Some(1);
        return Ok(());
    }
    let set_year = |f: &mut Fields, v: i64| {
        f.year = Some(v);
        f.two_digit_year = len <= 2;
    };
    match have {
        (false, false, false) => {
            if len >= 3 || order == DateOrder::Ymd {
                set_year(f, v);
            } else if order == DateOrder::Dmy {
                f.day = Some(v);
            } else {
                f.month = Some(v);
            }
        }
        (true, false, false) | (false, false, true) => f.month = Some(v),
        (false, true, false) => {
            if f.text_month && (len >= 3 || order == DateOrder::Ymd) {
                set_year(f, v);
            } else {
                f.day = Some(v);
            }
        }
        (true, true, false) => {
            if f.text_month && len >= 3 && f.two_digit_year {
                // The first number was the day after all (`08-Jan-1999` in YMD).
                f.day = f.year;
                set_year(f, v);
            } else {
                f.day = Some(v);
            }
        }
        (false, true, true) => set_year(f, v),
        (true, true, true) => return number_field(f, n),
        _ => return Err(Bad::Syntax),
    }
    Ok(())
}

fn finish(f: Fields) -> Result<Decoded, Bad> {
    if let Some(inf) = f.infinite {
        return Ok(Decoded {
            local_us: inf,
            zone: None,
        });
    }
    if let Some(days) = f.special_days {
        return Ok(Decoded {
            local_us: days * US_PER_DAY,
            zone: Some(ZoneSpec::Offset(0)),
        });
    }
    let days = if let Some(j) = f.julian {
        j - 2_440_588
    } else {
        let mut y = f.year.ok_or(Bad::Syntax)?;
        let m = f.month.ok_or(Bad::Syntax)?;
        let d = f.day.ok_or(Bad::Syntax)?;
        if f.bc {
            if y <= 0 {
                return Err(Bad::FieldRange);
            }
            y = 1 - y;
        } else if f.two_digit_year {
            y += if y < 70 { 2000 } else { 1900 };
        }
        if !(-4713..=294_276).contains(&y) {
            return Err(Bad::TypeRange);
        }
        if let Some(doy) = f.day_of_year {
            days_from_civil(y, 1, 1) + doy - 1
        } else {
            // PostgreSQL's ValidateDate: month and day ranges first (hinting at DateStyle),
            // then the day within its month.
            if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
                return Err(Bad::MonthRange);
            }
            let (m, d) = (m as u32, d as u32);
            if d > days_in_month(y, m) {
                return Err(Bad::FieldRange);
            }
            days_from_civil(y, m, d)
        }
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
        .ok_or(Bad::TypeRange)?;
    Ok(Decoded {
        local_us,
        zone: f.zone,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(t: &str, order: DateOrder) -> Option<(i64, Option<i32>)> {
        let d = decode(t, order, 0, &Zone::utc()).ok()?;
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
        assert_eq!(read("1997.041 17:32:01", m), Some((t, None)));
        assert_eq!(read("February 10, 1997", m), Some((day, None)));
        assert_eq!(read("1997-Feb-10", m), Some((day, None)));
        assert_eq!(read("10-Feb-1997", m), Some((day, None)));
        assert_eq!(read("97-02-10", DateOrder::Ymd), Some((day, None)));
        assert_eq!(read("J2450490", m), Some((day, None)));
        assert_eq!(
            read("1997-02-10 America/New_York", m).map(|r| r.1),
            Some(Some(99))
        );
        assert!(decode("1997-13-10", m, 0, &Zone::utc()).is_err_and(|e| e == Bad::MonthRange));
        assert!(decode("garbage", m, 0, &Zone::utc()).is_err_and(|e| e == Bad::Syntax));
    }
}
