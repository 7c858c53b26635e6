//! The date/time operators of PostgreSQL's table (the binder picks one, `analyze::datetime`).

use quire_engine::{Interval, SqlState, Value};

use super::interval::{is_finite, INFINITY, NEG_INFINITY};
use super::{civil_from_days, days_from_civil, days_in_month};
use super::{interval_out_of_range, timestamp_out_of_range, US_PER_DAY};
use crate::error::{Result, SqlError};

/// A date/time operator, its operands in the order listed (the binder swaps commuted ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DtOp {
    IntervalAdd,
    IntervalSub,
    IntervalNeg,
    /// interval * float8, interval / float8.
    IntervalMul,
    IntervalDiv,
    /// timestamp ± interval.
    TsAddInterval,
    TsSubInterval,
    /// timestamptz ± interval: months and days on the session zone's clock.
    TstzAddInterval,
    TstzSubInterval,
    /// timestamp - timestamp: an interval of days and time (`justify_hours`).
    TsSub,
    /// date ± integer days.
    DateAddDays,
    DateSubDays,
    /// date - date: days.
    DateSub,
}

fn operand(what: &str) -> SqlError {
    SqlError::internal(format_args!("bad {what} operand in a bound plan"))
}

fn interval_arg(v: &Value) -> Result<Interval> {
    match v {
        Value::Interval(i) => Ok(*i),
        _ => Err(operand("interval")),
    }
}

fn int_arg(v: &Value) -> Result<i64> {
    v.as_int().ok_or_else(|| operand("integer"))
}

fn float_arg(v: &Value) -> Result<f64> {
    match v {
        Value::Float(f) => Ok(*f),
        _ => Err(operand("float")),
    }
}

fn ts_arg(v: &Value) -> Result<i64> {
    match v {
        Value::Timestamp(t) => Ok(*t),
        _ => Err(operand("timestamp")),
    }
}

impl DtOp {
    pub(crate) fn call(self, args: &[Value]) -> Result<Value> {
        if args.iter().any(Value::is_null) {
            return Ok(Value::Null);
        }
        let (a, b) = (&args[0], args.get(1).unwrap_or(&Value::Null));
        Ok(match self {
            DtOp::IntervalAdd => Value::Interval(add(interval_arg(a)?, interval_arg(b)?)?),
            DtOp::IntervalSub => Value::Interval(add(interval_arg(a)?, negate(interval_arg(b)?)?)?),
            DtOp::IntervalNeg => Value::Interval(negate(interval_arg(a)?)?),
            DtOp::IntervalMul => Value::Interval(scale(interval_arg(a)?, float_arg(b)?, false)?),
            DtOp::IntervalDiv => Value::Interval(scale(interval_arg(a)?, float_arg(b)?, true)?),
            DtOp::TsAddInterval => Value::Timestamp(ts_add(ts_arg(a)?, interval_arg(b)?)?),
            DtOp::TsSubInterval => Value::Timestamp(ts_add(ts_arg(a)?, negate(interval_arg(b)?)?)?),
            DtOp::TstzAddInterval => Value::Timestamp(tstz_add(ts_arg(a)?, interval_arg(b)?)?),
            DtOp::TstzSubInterval => {
                Value::Timestamp(tstz_add(ts_arg(a)?, negate(interval_arg(b)?)?)?)
            }
            DtOp::TsSub => Value::Interval(ts_sub(ts_arg(a)?, ts_arg(b)?)?),
            DtOp::DateAddDays => Value::Int(date_add(int_arg(a)?, int_arg(b)?)?),
            DtOp::DateSubDays => Value::Int(date_add(int_arg(a)?, -int_arg(b)?)?),
            DtOp::DateSub => Value::Int(
                i32::try_from(int_arg(a)? - int_arg(b)?)
                    .map(i64::from)
                    .map_err(|_| date_out_of_range())?,
            ),
        })
    }
}

fn date_out_of_range() -> SqlError {
    SqlError::new(SqlState::DATETIME_FIELD_OVERFLOW, "date out of range")
}

/// PostgreSQL's dates: Julian day 0 (4714-11-24 BC) to 5874897-12-31, as days from 1970.
const DATE_MIN: i64 = -2_440_588;
const DATE_END: i64 = 2_147_483_494 - 2_440_588;

fn date_add(days: i64, n: i64) -> Result<i64> {
    days.checked_add(n)
        .filter(|d| (DATE_MIN..DATE_END).contains(d))
        .ok_or_else(date_out_of_range)
}

pub(crate) fn add(a: Interval, b: Interval) -> Result<Interval> {
    let (fa, fb) = (is_finite(a), is_finite(b));
    if !fa || !fb {
        // Infinities add as they do: opposite ones have no sum.
        return match (fa, fb) {
            (false, false) if a != b => Err(interval_out_of_range()),
            (false, _) => Ok(a),
            _ => Ok(b),
        };
    }
    let r = Interval {
        months: a
            .months
            .checked_add(b.months)
            .ok_or_else(interval_out_of_range)?,
        days: a
            .days
            .checked_add(b.days)
            .ok_or_else(interval_out_of_range)?,
        micros: a
            .micros
            .checked_add(b.micros)
            .ok_or_else(interval_out_of_range)?,
    };
    finite(r)
}

/// A computed interval, refused when it landed on an infinity's representation.
fn finite(i: Interval) -> Result<Interval> {
    if is_finite(i) {
        Ok(i)
    } else {
        Err(interval_out_of_range())
    }
}

pub(crate) fn negate(i: Interval) -> Result<Interval> {
    if i == INFINITY {
        return Ok(NEG_INFINITY);
    }
    if i == NEG_INFINITY {
        return Ok(INFINITY);
    }
    finite(Interval {
        months: i.months.checked_neg().ok_or_else(interval_out_of_range)?,
        days: i.days.checked_neg().ok_or_else(interval_out_of_range)?,
        micros: i.micros.checked_neg().ok_or_else(interval_out_of_range)?,
    })
}

/// Rounds to microseconds, as PostgreSQL's `TSROUND`.
fn tsround(x: f64) -> f64 {
    (x * 1e6).round_ties_even() / 1e6
}

fn fits_i32(x: f64) -> Option<i32> {
    (!x.is_nan() && x >= f64::from(i32::MIN) && x < -f64::from(i32::MIN)).then_some(x as i32)
}

/// `interval * factor` (or `/ factor`): PostgreSQL's `interval_mul`/`interval_div`, which
/// carry a fraction of a month into days and a fraction of a day into time.
fn scale(span: Interval, factor: f64, divide: bool) -> Result<Interval> {
    if divide && factor == 0.0 {
        return Err(SqlError::new(
            SqlState::DIVISION_BY_ZERO,
            "division by zero",
        ));
    }
    if factor.is_nan() {
        return Err(interval_out_of_range());
    }
    let sign = span.compare(Interval::default()) as i32;
    if !is_finite(span) {
        // An infinity times a positive (negative) number; zero has no product.
        if factor.is_infinite() && divide || factor == 0.0 {
            return Err(interval_out_of_range());
        }
        return Ok(if (factor < 0.0) == (sign > 0) {
            NEG_INFINITY
        } else {
            INFINITY
        });
    }
    if factor.is_infinite() {
        if divide {
            return Ok(Interval::default());
        }
        if sign == 0 {
            return Err(interval_out_of_range());
        }
        return Ok(if (factor < 0.0) == (sign > 0) {
            NEG_INFINITY
        } else {
            INFINITY
        });
    }
    let f = |x: f64| if divide { x / factor } else { x * factor };
    let months = fits_i32(f(f64::from(span.months))).ok_or_else(interval_out_of_range)?;
    let mut days = fits_i32(f(f64::from(span.days))).ok_or_else(interval_out_of_range)?;
    let month_rem_days = tsround((f(f64::from(span.months)) - f64::from(months)) * 30.0);
    let mut sec_rem = tsround(
        (f(f64::from(span.days)) - f64::from(days) + month_rem_days - month_rem_days.trunc())
            * 86_400.0,
    );
    if sec_rem.abs() >= 86_400.0 {
        let whole = (sec_rem / 86_400.0).trunc();
        days = days
            .checked_add(whole as i32)
            .ok_or_else(interval_out_of_range)?;
        sec_rem -= whole * 86_400.0;
    }
    days = days
        .checked_add(month_rem_days.trunc() as i32)
        .ok_or_else(interval_out_of_range)?;
    let micros = (f(span.micros as f64) + sec_rem * 1e6).round_ties_even();
    if !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&micros) {
        return Err(interval_out_of_range());
    }
    finite(Interval {
        months,
        days,
        micros: micros as i64,
    })
}

/// The least timestamp PostgreSQL has (4714-11-24 BC), in microseconds from 1970.
const TS_MIN: i64 = -210_866_803_200_000_000;

/// `timestamp + interval`: months first (the day clamped to the month's last), then days,
/// then time, as PostgreSQL's `timestamp_pl_interval`.
pub(crate) fn ts_add(ts: i64, span: Interval) -> Result<i64> {
    if !super::ts_is_finite(ts) {
        return Ok(ts);
    }
    if !is_finite(span) {
        return Err(timestamp_out_of_range());
    }
    let mut us = ts;
    if span.months != 0 {
        us = add_months(us, span.months)?;
    }
    us.checked_add(i64::from(span.days) * US_PER_DAY)
        .and_then(|v| v.checked_add(span.micros))
        .filter(|v| *v >= TS_MIN)
        .ok_or_else(timestamp_out_of_range)
}

/// `timestamptz + interval` as PostgreSQL's `timestamptz_pl_interval`: the months, then
/// the days, each added on the session zone's wall clock (so `+ 1 day` across a DST change
/// keeps the time of day), then the time as elapsed microseconds.
pub(crate) fn tstz_add(ts: i64, span: Interval) -> Result<i64> {
    if !super::ts_is_finite(ts) {
        return Ok(ts);
    }
    if !is_finite(span) {
        return Err(timestamp_out_of_range());
    }
    let zone = &super::style::current().zone;
    let mut us = ts;
    if span.months != 0 {
        us = zone.local_to_utc(add_months(zone.utc_to_local(us), span.months)?);
    }
    if span.days != 0 {
        let local = zone
            .utc_to_local(us)
            .checked_add(i64::from(span.days) * US_PER_DAY)
            .ok_or_else(timestamp_out_of_range)?;
        us = zone.local_to_utc(local);
    }
    us.checked_add(span.micros)
        .filter(|v| *v >= TS_MIN)
        .ok_or_else(timestamp_out_of_range)
}

/// A wall-clock time `months` later, its day kept within the new month.
fn add_months(us: i64, months: i32) -> Result<i64> {
    let (days, tod) = (us.div_euclid(US_PER_DAY), us.rem_euclid(US_PER_DAY));
    let (y, m, d) = civil_from_days(days);
    let total = y * 12 + i64::from(m) - 1 + i64::from(months);
    let (ny, nm) = (total.div_euclid(12), (total.rem_euclid(12) + 1) as u32);
    let nd = d.min(days_in_month(ny, nm));
    days_from_civil(ny, nm, nd)
        .checked_mul(US_PER_DAY)
        .and_then(|v| v.checked_add(tod))
        .ok_or_else(timestamp_out_of_range)
}

/// `timestamp - timestamp`: days and time, the time under a day (`justify_hours`).
fn ts_sub(a: i64, b: i64) -> Result<Interval> {
    use super::{ts_is_finite, TS_INFINITY, TS_NEG_INFINITY};
    // An infinity less anything else is that infinity; the same infinities have no difference.
    match (ts_is_finite(a), ts_is_finite(b)) {
        (true, true) => {}
        (false, false) if a == b => return Err(interval_out_of_range()),
        (false, _) => {
            return Ok(if a == TS_INFINITY {
                INFINITY
            } else {
                NEG_INFINITY
            })
        }
        (true, false) => {
            return Ok(if b == TS_NEG_INFINITY {
                INFINITY
            } else {
                NEG_INFINITY
            })
        }
    }
    let micros = a.checked_sub(b).ok_or_else(interval_out_of_range)?;
    justify_hours(Interval {
        months: 0,
        days: 0,
        micros,
    })
}

/// `justify_hours`: whole days of the time into days, the signs made to agree.
pub(crate) fn justify_hours(i: Interval) -> Result<Interval> {
    if !is_finite(i) {
        return Ok(i);
    }
    let mut days = i64::from(i.days) + i.micros / US_PER_DAY;
    let mut micros = i.micros % US_PER_DAY;
    if days > 0 && micros < 0 {
        micros += US_PER_DAY;
        days -= 1;
    } else if days < 0 && micros > 0 {
        micros -= US_PER_DAY;
        days += 1;
    }
    finite(Interval {
        months: i.months,
        days: i32::try_from(days).map_err(|_| interval_out_of_range())?,
        micros,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(months: i32, days: i32, micros: i64) -> Interval {
        Interval {
            months,
            days,
            micros,
        }
    }

    #[test]
    fn scaling_carries_fractions_down() {
        // PostgreSQL: '1 mon'::interval / 2 = '15 days'; '1 day' * 1.5 = '1 day 12:00:00'.
        assert_eq!(scale(iv(1, 0, 0), 2.0, true).unwrap(), iv(0, 15, 0));
        assert_eq!(
            scale(iv(0, 1, 0), 1.5, false).unwrap(),
            iv(0, 1, 12 * 3_600_000_000)
        );
        assert!(scale(iv(i32::MAX - 1, 0, 0), 2.0, false).is_err());
        assert!(scale(iv(1, 0, 0), 0.0, true).is_err());
    }

    #[test]
    fn month_arithmetic_clamps_to_the_months_last_day() {
        // 2020-01-31 + 1 month = 2020-02-29.
        let jan31 = days_from_civil(2020, 1, 31) * US_PER_DAY;
        let feb29 = days_from_civil(2020, 2, 29) * US_PER_DAY;
        assert_eq!(ts_add(jan31, iv(1, 0, 0)).unwrap(), feb29);
        assert!(ts_add(i64::MAX - 5, iv(0, 0, 10)).is_err());
        assert!(add(INFINITY, NEG_INFINITY).is_err());
        assert!(negate(iv(i32::MIN, 0, 0)).is_err());
    }
}
