//! The date/time functions: `EXTRACT` and `date_part`, `date_trunc`, `justify_*`,
//! `make_date`, `make_timestamp`, `make_interval`, `isfinite`, `age`, `to_timestamp`.
//! A timestamp is read in UTC (the session's one time zone).

use quire_engine::{Interval, Numeric, SqlState, Value};

use super::arith::justify_hours;
use super::interval::is_finite;
use super::{
    civil_from_days, days_from_civil, days_in_month, interval_out_of_range, timestamp_out_of_range,
    US_PER_DAY, US_PER_HOUR, US_PER_MINUTE, US_PER_SEC,
};
use crate::error::{Result, SqlError};

/// The type of a date/time function's argument (a date is an engine `Int`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Date,
    Timestamp,
    Timestamptz,
    Interval,
}

impl Kind {
    fn type_name(self) -> &'static str {
        match self {
            Kind::Date => "date",
            Kind::Timestamp => "timestamp without time zone",
            Kind::Timestamptz => "timestamp with time zone",
            Kind::Interval => "interval",
        }
    }
}

/// A date/time function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DtFunc {
    /// `EXTRACT` (numeric) or `date_part` (double precision) of a field.
    Extract {
        kind: Kind,
        numeric: bool,
    },
    DateTrunc(Kind),
    JustifyDays,
    JustifyHours,
    JustifyInterval,
    IsFinite(Kind),
    MakeDate,
    MakeTimestamp,
    MakeInterval,
    /// age(a, b), or age(a) from today's midnight.
    Age,
    /// `date_bin(stride, ts, origin)`.
    DateBin,
    /// `timezone(zone, ts)`, `ts AT TIME ZONE zone`: of a timestamptz, its wall-clock time
    /// in the zone; of a timestamp, the instant it is in the zone.
    AtZone(Kind),
    ToTimestamp,
}

fn unit_error(unit: &str, kind: Kind, supported: bool) -> SqlError {
    if supported {
        SqlError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            format!(
                "unit \"{unit}\" not supported for type {}",
                kind.type_name()
            ),
        )
    } else {
        SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!(
                "unit \"{unit}\" not recognized for type {}",
                kind.type_name()
            ),
        )
    }
}

/// A unit's canonical name (PostgreSQL's abbreviations and plurals read as the unit).
fn canonical(unit: &str) -> Option<&'static str> {
    Some(match unit.to_ascii_lowercase().trim() {
        "microsecond" | "microseconds" | "us" | "usec" | "usecs" | "useconds" => "microseconds",
        "millisecond" | "milliseconds" | "ms" | "msec" | "msecs" | "mseconds" => "milliseconds",
        "second" | "seconds" | "s" | "sec" | "secs" => "second",
        "minute" | "minutes" | "m" | "min" | "mins" => "minute",
        "hour" | "hours" | "h" | "hr" | "hrs" => "hour",
        "day" | "days" | "d" => "day",
        "week" | "weeks" | "w" => "week",
        "month" | "months" | "mon" | "mons" => "month",
        "quarter" | "qtr" => "quarter",
        "year" | "years" | "y" | "yr" | "yrs" => "year",
        "decade" | "decades" | "dec" | "decs" => "decade",
        "century" | "centuries" | "c" | "cent" => "century",
        "millennium" | "millennia" | "mil" | "mils" => "millennium",
        "epoch" => "epoch",
        "dow" => "dow",
        "isodow" => "isodow",
        "doy" => "doy",
        "isoyear" => "isoyear",
        "julian" | "j" => "julian",
        "timezone" => "timezone",
        "timezone_h" | "timezone_hour" => "timezone_hour",
        "timezone_m" | "timezone_minute" => "timezone_minute",
        _ => return None,
    })
}

/// A field's value as an exact decimal: `value × 10^-scale`.
type Scaled = (i128, u16);

/// PostgreSQL's year of an astronomical year (year 0 is 1 BC, printed as -1).
fn bc_year(y: i64) -> i64 {
    if y > 0 {
        y
    } else {
        y - 1
    }
}

/// ISO 8601 week-numbering year and week of a date (days since 1970).
pub(crate) fn iso_week(days: i64) -> (i64, i64) {
    let isodow = (days + 3).rem_euclid(7) + 1; // 1970-01-01 was a Thursday
    let thursday = days - isodow + 4;
    let (y, _, _) = civil_from_days(thursday);
    let jan1 = days_from_civil(y, 1, 1);
    (y, (thursday - jan1) / 7 + 1)
}

fn extract_ts(unit: &'static str, us: i64, kind: Kind, raw: &str) -> Result<Scaled> {
    let days = us.div_euclid(US_PER_DAY);
    let tod = us.rem_euclid(US_PER_DAY);
    let (y, m, d) = civil_from_days(days);
    let sec_us = i128::from(tod % US_PER_MINUTE);
    let date_only = kind == Kind::Date;
    let v: i128 = match unit {
        "microseconds" if !date_only => sec_us,
        "milliseconds" if !date_only => return Ok((sec_us, 3)),
        "second" if !date_only => return Ok((sec_us, 6)),
        "minute" if !date_only => i128::from(tod / US_PER_MINUTE % 60),
        "hour" if !date_only => i128::from(tod / US_PER_HOUR),
        "day" => i128::from(d),
        "month" => i128::from(m),
        "quarter" => i128::from((m - 1) / 3 + 1),
        "year" => i128::from(bc_year(y)),
        "decade" => i128::from(if y >= 0 {
            y / 10
        } else {
            -((8 - (y - 1)) / 10)
        }),
        "century" => i128::from(if y > 0 {
            (y + 99) / 100
        } else {
            -((99 - (y - 1)) / 100)
        }),
        "millennium" => i128::from(if y > 0 {
            (y + 999) / 1000
        } else {
            -((999 - (y - 1)) / 1000)
        }),
        "week" => i128::from(iso_week(days).1),
        "isoyear" => i128::from(bc_year(iso_week(days).0)),
        "dow" => i128::from((days + 4).rem_euclid(7)),
        "isodow" => i128::from((days + 3).rem_euclid(7) + 1),
        "doy" => i128::from(days - days_from_civil(y, 1, 1) + 1),
        "epoch" if date_only => i128::from(days) * 86_400,
        "epoch" => return Ok((i128::from(us), 6)),
        "julian" if date_only || tod == 0 => i128::from(days) + 2_440_588,
        _ => return Err(unit_error(raw, kind, true)),
    };
    Ok((v, 0))
}

/// A `timestamptz`'s fields on the session zone's clock; `epoch` and the zone's offset
/// (`timezone`, seconds east) from the instant.
fn extract_tstz(unit: &'static str, utc_us: i64, raw: &str) -> Result<Scaled> {
    let zone = &super::style::current().zone;
    let off = i128::from(zone.offset_secs(utc_us));
    Ok(match unit {
        "epoch" => (i128::from(utc_us), 6),
        "timezone" => (off, 0),
        "timezone_hour" => (off / 3600, 0),
        "timezone_minute" => (off / 60 % 60, 0),
        _ => return extract_ts(unit, zone.utc_to_local(utc_us), Kind::Timestamptz, raw),
    })
}

/// `date_trunc(unit, timestamptz)` as PostgreSQL's `timestamptz_trunc`: truncated on the
/// session zone's clock; from a day up, the result's own offset applies, below it the
/// original one.
fn trunc_tstz(unit_text: &str, utc_us: i64) -> Result<i64> {
    let zone = &super::style::current().zone;
    let off = i64::from(zone.offset_secs(utc_us)) * US_PER_SEC;
    let local = trunc_ts(unit_text, utc_us.saturating_add(off), Kind::Timestamptz)?;
    let below_day = matches!(
        canonical(unit_text),
        Some("microseconds" | "milliseconds" | "second" | "minute" | "hour")
    );
    Ok(if below_day {
        local.saturating_sub(off)
    } else {
        zone.local_to_utc(local)
    })
}

fn extract_interval(unit: &'static str, i: Interval, raw: &str) -> Result<Scaled> {
    let sec_us = i128::from(i.micros % US_PER_MINUTE);
    let years = i128::from(i.months / 12);
    let v: i128 = match unit {
        "microseconds" => sec_us,
        "milliseconds" => return Ok((sec_us, 3)),
        "second" => return Ok((sec_us, 6)),
        "minute" => i128::from(i.micros / US_PER_MINUTE % 60),
        "hour" => i128::from(i.micros / US_PER_HOUR),
        "day" => i128::from(i.days),
        "month" => i128::from(i.months % 12),
        "quarter" => i128::from((i.months % 12) / 3 + 1),
        "year" => years,
        "decade" => years / 10,
        "century" => years / 100,
        "millennium" => years / 1000,
        "epoch" => {
            // A year is 365.25 days, a month 30.
            let secs = 31_557_600 * years
                + 2_592_000 * i128::from(i.months % 12)
                + 86_400 * i128::from(i.days);
            return Ok((secs * 1_000_000 + i128::from(i.micros), 6));
        }
        _ => return Err(unit_error(raw, Kind::Interval, true)),
    };
    Ok((v, 0))
}

/// `±digits × 10^-scale` as a numeric.
fn scaled_numeric((v, scale): Scaled) -> Result<Numeric> {
    let digits: Vec<u8> = v
        .unsigned_abs()
        .to_string()
        .bytes()
        .map(|c| c - b'0')
        .collect();
    Numeric::from_digits(v < 0, &digits, scale)
        .map_err(|e| SqlError::internal(format_args!("extract: {e}")))
}

fn extract(unit_text: &str, v: &Value, kind: Kind, numeric: bool) -> Result<Value> {
    let unit = canonical(unit_text).ok_or_else(|| unit_error(unit_text, kind, false))?;
    let scaled = match (v, kind) {
        (Value::Interval(i), _) if !is_finite(*i) => return Ok(Value::Null),
        (Value::Interval(i), _) => extract_interval(unit, *i, unit_text)?,
        (Value::Int(days), Kind::Date) => {
            let us = days
                .checked_mul(US_PER_DAY)
                .ok_or_else(timestamp_out_of_range)?;
            extract_ts(unit, us, kind, unit_text)?
        }
        // PostgreSQL's fields of an infinity: the ones that grow without end are that
        // infinity, the others NULL.
        (Value::Timestamp(us), _) if !super::ts_is_finite(*us) => {
            let growing = [
                "epoch",
                "year",
                "decade",
                "century",
                "millennium",
                "julian",
                "isoyear",
            ];
            if !growing.contains(&unit) || numeric {
                return Ok(Value::Null);
            }
            let inf = if *us > 0 {
                f64::INFINITY
            } else {
                f64::NEG_INFINITY
            };
            return Ok(Value::Float(inf));
        }
        (Value::Timestamp(us), Kind::Timestamptz) => extract_tstz(unit, *us, unit_text)?,
        (Value::Timestamp(us), _) => extract_ts(unit, *us, kind, unit_text)?,
        _ => return Err(SqlError::internal("bad extract operand in a bound plan")),
    };
    Ok(if numeric {
        Value::Numeric(scaled_numeric(scaled)?)
    } else {
        Value::Float(scaled.0 as f64 / 10f64.powi(i32::from(scaled.1)))
    })
}

/// `date_trunc(unit, timestamp)`: the timestamp with every field below `unit` at its least.
fn trunc_ts(unit_text: &str, us: i64, kind: Kind) -> Result<i64> {
    let unit = canonical(unit_text).ok_or_else(|| unit_error(unit_text, kind, false))?;
    let days = us.div_euclid(US_PER_DAY);
    let (y, m, _) = civil_from_days(days);
    let floor = |unit: i64| us.div_euclid(unit) * unit;
    let ymd = |y: i64, m: u32| days_from_civil(y, m, 1) * US_PER_DAY;
    Ok(match unit {
        "microseconds" => us,
        "milliseconds" => floor(1000),
        "second" => floor(US_PER_SEC),
        "minute" => floor(US_PER_MINUTE),
        "hour" => floor(US_PER_HOUR),
        "day" => floor(US_PER_DAY),
        "week" => (days - (days + 3).rem_euclid(7)) * US_PER_DAY,
        "month" => ymd(y, m),
        "quarter" => ymd(y, (m - 1) / 3 * 3 + 1),
        "year" => ymd(y, 1),
        "decade" => ymd(y.div_euclid(10) * 10, 1),
        "century" => ymd((y - 1).div_euclid(100) * 100 + 1, 1),
        "millennium" => ymd((y - 1).div_euclid(1000) * 1000 + 1, 1),
        _ => return Err(unit_error(unit_text, kind, true)),
    })
}

/// `date_trunc(unit, interval)`.
fn trunc_interval(unit_text: &str, i: Interval) -> Result<Interval> {
    let unit = canonical(unit_text).ok_or_else(|| unit_error(unit_text, Kind::Interval, false))?;
    if !is_finite(i) {
        return Ok(i);
    }
    let t = |unit: i64| i.micros / unit * unit;
    let years = |n: i32| Interval {
        months: i.months / 12 / n * n * 12,
        days: 0,
        micros: 0,
    };
    Ok(match unit {
        "microseconds" => i,
        "milliseconds" => Interval {
            micros: t(1000),
            ..i
        },
        "second" => Interval {
            micros: t(US_PER_SEC),
            ..i
        },
        "minute" => Interval {
            micros: t(US_PER_MINUTE),
            ..i
        },
        "hour" => Interval {
            micros: t(US_PER_HOUR),
            ..i
        },
        "day" => Interval { micros: 0, ..i },
        "month" => Interval {
            months: i.months,
            days: 0,
            micros: 0,
        },
        "quarter" => Interval {
            months: i.months / 3 * 3,
            days: 0,
            micros: 0,
        },
        "year" => years(1),
        "decade" => years(10),
        "century" => years(100),
        "millennium" => years(1000),
        _ => return Err(unit_error(unit_text, Kind::Interval, true)),
    })
}

/// `justify_days`: whole 30-day runs into months, the signs made to agree.
fn justify_days(i: Interval) -> Result<Interval> {
    if !is_finite(i) {
        return Ok(i);
    }
    let mut months = i64::from(i.months) + i64::from(i.days / 30);
    let mut days = i64::from(i.days % 30);
    if months > 0 && days < 0 {
        days += 30;
        months -= 1;
    } else if months < 0 && days > 0 {
        days -= 30;
        months += 1;
    }
    Ok(Interval {
        months: i32::try_from(months).map_err(|_| interval_out_of_range())?,
        days: i32::try_from(days).map_err(|_| interval_out_of_range())?,
        micros: i.micros,
    })
}

/// `justify_interval`: hours into days and days into months, one sign throughout.
fn justify_interval(i: Interval) -> Result<Interval> {
    if !is_finite(i) {
        return Ok(i);
    }
    let mut months = i64::from(i.months);
    let mut days = i64::from(i.days) + i.micros / US_PER_DAY;
    let mut micros = i.micros % US_PER_DAY;
    months += days / 30;
    days %= 30;
    if months > 0 && (days < 0 || days == 0 && micros < 0) {
        days += 30;
        months -= 1;
    } else if months < 0 && (days > 0 || days == 0 && micros > 0) {
        days -= 30;
        months += 1;
    }
    if days > 0 && micros < 0 {
        micros += US_PER_DAY;
        days -= 1;
    } else if days < 0 && micros > 0 {
        micros -= US_PER_DAY;
        days += 1;
    }
    Ok(Interval {
        months: i32::try_from(months).map_err(|_| interval_out_of_range())?,
        days: i32::try_from(days).map_err(|_| interval_out_of_range())?,
        micros,
    })
}

fn field_range(what: &str, shown: &str) -> SqlError {
    SqlError::new(
        SqlState::DATETIME_FIELD_OVERFLOW,
        format!("{what} field value out of range: {shown}"),
    )
}

/// `make_date(year, month, day)`: a negative year is BC; there is no year 0.
fn make_date(y: i64, m: i64, d: i64) -> Result<i64> {
    let shown = || format!("{y}-{m:02}-{d:02}");
    let astro = if y < 0 { y + 1 } else { y };
    let month = u32::try_from(m).ok().filter(|m| (1..=12).contains(m));
    match month {
        Some(month)
            if y != 0
                && (-4713..=5_874_897).contains(&y)
                && d >= 1
                && d <= i64::from(days_in_month(astro, month)) =>
        {
            Ok(days_from_civil(astro, month, d as u32))
        }
        _ => Err(field_range("date", &shown())),
    }
}

fn make_timestamp(a: &[i64], secs: f64) -> Result<i64> {
    let days = make_date(a[0], a[1], a[2])?;
    let (h, mi) = (a[3], a[4]);
    // 24:00:00 is the next midnight, as PostgreSQL's time fields allow.
    let midnight = h == 24 && mi == 0 && secs == 0.0;
    if !midnight
        && (!(0..=23).contains(&h) || !(0..=59).contains(&mi) || !(0.0..60.0).contains(&secs))
    {
        return Err(field_range("time", &format!("{h}:{mi:02}:{secs:02}")));
    }
    let tod = h * US_PER_HOUR + mi * US_PER_MINUTE + (secs * 1e6).round() as i64;
    days.checked_mul(US_PER_DAY)
        .and_then(|v| v.checked_add(tod))
        .ok_or_else(timestamp_out_of_range)
}

/// `make_interval(years, months, weeks, days, hours, mins, secs)`, missing ones zero.
fn make_interval(ints: &[i64], secs: f64) -> Result<Interval> {
    let get = |k: usize| ints.get(k).copied().unwrap_or(0);
    let months = get(0).checked_mul(12).and_then(|v| v.checked_add(get(1)));
    let days = get(2).checked_mul(7).and_then(|v| v.checked_add(get(3)));
    let us = (secs * 1e6).round();
    if !us.is_finite() || us.abs() >= 9.2e18 {
        return Err(interval_out_of_range());
    }
    let micros = get(4)
        .checked_mul(US_PER_HOUR)
        .and_then(|v| v.checked_add(get(5).checked_mul(US_PER_MINUTE)?))
        .and_then(|v| v.checked_add(us as i64));
    let i = Interval {
        months: months
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(interval_out_of_range)?,
        days: days
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(interval_out_of_range)?,
        micros: micros.ok_or_else(interval_out_of_range)?,
    };
    if is_finite(i) {
        Ok(i)
    } else {
        Err(interval_out_of_range())
    }
}

/// Broken-down time: year, month, day, hour, minute, second, microsecond.
fn broken_down(us: i64) -> [i64; 7] {
    let (days, tod) = (us.div_euclid(US_PER_DAY), us.rem_euclid(US_PER_DAY));
    let (y, m, d) = civil_from_days(days);
    [
        y,
        i64::from(m),
        i64::from(d),
        tod / US_PER_HOUR,
        tod / US_PER_MINUTE % 60,
        tod / US_PER_SEC % 60,
        tod % US_PER_SEC,
    ]
}

/// `age(a, b)`: PostgreSQL's field-by-field difference, borrowing from the month of the
/// earlier timestamp (`timestamp_age`).
fn age(a: i64, b: i64) -> Result<Interval> {
    use super::{ts_is_finite, TS_INFINITY, TS_NEG_INFINITY};
    use crate::datetime::interval::{INFINITY, NEG_INFINITY};
    // PostgreSQL's `timestamp_age` of infinities: the same ones have no age.
    if !ts_is_finite(a) || !ts_is_finite(b) {
        return match (a, b) {
            (TS_NEG_INFINITY, TS_NEG_INFINITY) | (TS_INFINITY, TS_INFINITY) => {
                Err(interval_out_of_range())
            }
            (TS_NEG_INFINITY, _) => Ok(NEG_INFINITY),
            (TS_INFINITY, _) | (_, TS_NEG_INFINITY) => Ok(INFINITY),
            _ => Ok(NEG_INFINITY),
        };
    }
    let (t1, t2) = (broken_down(a), broken_down(b));
    let mut f: [i64; 7] = std::array::from_fn(|k| t1[k] - t2[k]);
    let neg = a < b;
    if neg {
        for v in &mut f {
            *v = -*v;
        }
    }
    // Microseconds, seconds, minutes, hours borrow from the next field up.
    for (low, n) in [(6, 1_000_000), (5, 60), (4, 60), (3, 24)] {
        while f[low] < 0 {
            f[low] += n;
            f[low - 1] -= 1;
        }
    }
    let [year, mon, mday, ..] = &mut f;
    let (ry, rm) = if neg { (t1[0], t1[1]) } else { (t2[0], t2[1]) };
    while *mday < 0 {
        *mday += i64::from(days_in_month(ry, rm as u32));
        *mon -= 1;
    }
    while *mon < 0 {
        *mon += 12;
        *year -= 1;
    }
    if neg {
        for v in &mut f {
            *v = -*v;
        }
    }
    let [year, mon, mday, hour, min, sec, usec] = f;
    let months = year.checked_mul(12).and_then(|v| v.checked_add(mon));
    Ok(Interval {
        months: months
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(interval_out_of_range)?,
        days: i32::try_from(mday).map_err(|_| interval_out_of_range())?,
        micros: ((hour * 60 + min) * 60 + sec) * US_PER_SEC + usec,
    })
}

fn to_timestamp(secs: f64) -> Result<i64> {
    if secs.is_nan() {
        return Err(SqlError::new(
            SqlState::DATETIME_FIELD_OVERFLOW,
            "timestamp cannot be NaN",
        ));
    }
    let us = (secs * 1e6).round();
    if !(-2.1e17..9.2e18).contains(&us) {
        return Err(timestamp_out_of_range());
    }
    Ok(us as i64)
}

/// The zone of `AT TIME ZONE`, as PostgreSQL's `timestamptz_zone` reads it: an offset
/// (`-08`, `+05:30`, POSIX's sign: hours west of UTC), an abbreviation (`PST`) or a zone
/// name.
fn at_zone(name: &str) -> Result<super::zone::Zone> {
    let t = name.trim();
    let offset = match t.as_bytes().first() {
        // A number is POSIX's: hours west of UTC.
        Some(b'+' | b'-' | b'0'..=b'9') => super::zone::offset_text(t).map(|s| -s),
        _ => super::parse::abbreviation(&t.to_ascii_lowercase()),
    };
    offset
        .map(super::zone::Zone::fixed)
        .or_else(|| super::zone::Zone::parse(t).filter(|_| t.parse::<f64>().is_err()))
        .ok_or_else(|| {
            SqlError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                format!("time zone \"{name}\" not recognized"),
            )
        })
}

/// `date_bin(stride, ts, origin)` as PostgreSQL's `timestamp_bin`: the start of the
/// stride-wide bin, counted from `origin`, that holds `ts`.
fn date_bin(stride: Interval, ts: i64, origin: i64) -> Result<i64> {
    if !super::ts_is_finite(ts) {
        return Ok(ts);
    }
    if !super::ts_is_finite(origin) {
        return Err(SqlError::new(
            SqlState::DATETIME_FIELD_OVERFLOW,
            "origin out of range",
        ));
    }
    if !is_finite(stride) {
        return Err(SqlError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            "timestamps cannot be binned into infinite intervals",
        ));
    }
    if stride.months != 0 {
        return Err(SqlError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            "timestamps cannot be binned into intervals containing months or years",
        ));
    }
    let stride_us = i64::from(stride.days)
        .checked_mul(US_PER_DAY)
        .and_then(|d| d.checked_add(stride.micros))
        .ok_or_else(interval_out_of_range)?;
    if stride_us <= 0 {
        return Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            "stride must be greater than zero",
        ));
    }
    let diff = ts.checked_sub(origin).ok_or_else(interval_out_of_range)?;
    let mut delta = diff - diff % stride_us;
    if diff < 0 && diff % stride_us != 0 {
        delta -= stride_us;
    }
    origin.checked_add(delta).ok_or_else(timestamp_out_of_range)
}

fn operand(what: &str) -> SqlError {
    SqlError::internal(format_args!("bad {what} argument in a bound plan"))
}

fn text(v: &Value) -> Result<&str> {
    v.as_text().ok_or_else(|| operand("text"))
}

fn interval(v: &Value) -> Result<Interval> {
    match v {
        Value::Interval(i) => Ok(*i),
        _ => Err(operand("interval")),
    }
}

fn ts(v: &Value) -> Result<i64> {
    match v {
        Value::Timestamp(t) => Ok(*t),
        _ => Err(operand("timestamp")),
    }
}

fn float(v: &Value) -> Result<f64> {
    match v {
        Value::Float(f) => Ok(*f),
        _ => Err(operand("float")),
    }
}

fn ints(args: &[Value]) -> Result<Vec<i64>> {
    args.iter()
        .map(|v| v.as_int().ok_or_else(|| operand("integer")))
        .collect()
}

impl DtFunc {
    /// Evaluates the function (strict: a NULL argument is a NULL result); `today_us` is
    /// the transaction's midnight, for `age(x)`.
    pub(crate) fn call(self, args: &[Value], today_us: i64) -> Result<Value> {
        if args.iter().any(Value::is_null) {
            return Ok(Value::Null);
        }
        Ok(match self {
            DtFunc::Extract { kind, numeric } => extract(text(&args[0])?, &args[1], kind, numeric)?,
            DtFunc::DateTrunc(Kind::Interval) => {
                Value::Interval(trunc_interval(text(&args[0])?, interval(&args[1])?)?)
            }
            DtFunc::DateTrunc(kind) if matches!(args[1], Value::Timestamp(us) if !super::ts_is_finite(us)) =>
            {
                // The unit is checked all the same; an infinity truncates to itself.
                trunc_ts(text(&args[0])?, 0, kind)?;
                args[1].clone()
            }
            DtFunc::DateTrunc(Kind::Timestamptz) => {
                Value::Timestamp(trunc_tstz(text(&args[0])?, ts(&args[1])?)?)
            }
            DtFunc::DateTrunc(kind) => {
                Value::Timestamp(trunc_ts(text(&args[0])?, ts(&args[1])?, kind)?)
            }
            DtFunc::JustifyDays => Value::Interval(justify_days(interval(&args[0])?)?),
            DtFunc::JustifyHours => Value::Interval(justify_hours(interval(&args[0])?)?),
            DtFunc::JustifyInterval => Value::Interval(justify_interval(interval(&args[0])?)?),
            DtFunc::IsFinite(Kind::Interval) => Value::Bool(is_finite(interval(&args[0])?)),
            DtFunc::IsFinite(Kind::Date) => Value::Bool(true),
            DtFunc::IsFinite(_) => Value::Bool(super::ts_is_finite(ts(&args[0])?)),
            DtFunc::MakeDate => {
                let a = ints(args)?;
                Value::Int(make_date(a[0], a[1], a[2])?)
            }
            DtFunc::MakeTimestamp => {
                Value::Timestamp(make_timestamp(&ints(&args[..5])?, float(&args[5])?)?)
            }
            DtFunc::MakeInterval => {
                let n = args.len();
                let (int_args, secs) = if n == 7 {
                    (&args[..6], float(&args[6])?)
                } else {
                    (args, 0.0)
                };
                Value::Interval(make_interval(&ints(int_args)?, secs)?)
            }
            DtFunc::Age => {
                let b = ts(&args[args.len() - 1])?;
                let a = if args.len() == 2 {
                    ts(&args[0])?
                } else {
                    today_us
                };
                Value::Interval(age(a, b)?)
            }
            DtFunc::ToTimestamp => Value::Timestamp(to_timestamp(float(&args[0])?)?),
            DtFunc::DateBin => {
                Value::Timestamp(date_bin(interval(&args[0])?, ts(&args[1])?, ts(&args[2])?)?)
            }
            DtFunc::AtZone(kind) => {
                let zone = at_zone(text(&args[0])?)?;
                let us = ts(&args[1])?;
                Value::Timestamp(if kind == Kind::Timestamptz {
                    zone.utc_to_local(us)
                } else {
                    zone.local_to_utc(us)
                })
            }
        })
    }
}
