//! Date and time: the `interval` type's input, output and arithmetic, and the operators
//! that mix dates, timestamps and intervals (PostgreSQL's operator table for them).
//!
//! ## Rules
//! - Every computation is checked: a result outside a type's range is PostgreSQL's error
//!   (22008 `interval out of range` / `timestamp out of range`), never a panic or a wrap.
//! - An interval keeps its three fields apart (`quire_engine::Interval`); only comparison
//!   and hashing normalize (a month = 30 days, a day = 24 hours).

pub(crate) mod arith;
pub(crate) mod encode;
pub(crate) mod fields;
pub(crate) mod interval;
pub(crate) mod parse;
pub(crate) mod style;
pub(crate) mod zone;

use quire_engine::SqlState;

use crate::error::SqlError;

pub(crate) const US_PER_SEC: i64 = 1_000_000;
pub(crate) const US_PER_MINUTE: i64 = 60 * US_PER_SEC;
pub(crate) const US_PER_HOUR: i64 = 60 * US_PER_MINUTE;
pub(crate) const US_PER_DAY: i64 = 24 * US_PER_HOUR;

/// Month names, January first (output abbreviates them to three letters; input takes
/// any prefix of three or more, any case).
pub(crate) const MONTH_NAMES: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Day names, Sunday first (day 0, as PostgreSQL's `tm_wday`).
pub(crate) const DAY_NAMES: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// `timestamp 'infinity'` and `'-infinity'`: PostgreSQL's `DT_NOEND` and `DT_NOBEGIN`, the
/// largest and least microsecond counts. Arithmetic keeps them; zones do not move them.
pub(crate) const TS_INFINITY: i64 = i64::MAX;
pub(crate) const TS_NEG_INFINITY: i64 = i64::MIN;

/// Whether a timestamp is neither infinity.
pub(crate) fn ts_is_finite(us: i64) -> bool {
    us != TS_INFINITY && us != TS_NEG_INFINITY
}

/// 22008 `interval out of range`.
pub(crate) fn interval_out_of_range() -> SqlError {
    SqlError::new(SqlState::DATETIME_FIELD_OVERFLOW, "interval out of range")
}

/// 22008 `timestamp out of range`.
pub(crate) fn timestamp_out_of_range() -> SqlError {
    SqlError::new(SqlState::DATETIME_FIELD_OVERFLOW, "timestamp out of range")
}

pub(crate) fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of days since 1970-01-01 (the inverse of [`days_from_civil`]).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}
