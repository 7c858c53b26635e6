//! Which date/time operator (`datetime::arith::DtOp`) a `+ - * /` between two types is,
//! by PostgreSQL's operator table.

use quire_engine::Value;
use sqlparser::ast;

use crate::datetime::arith::DtOp;
use crate::datetime::fields::{DtFunc, Kind};
use crate::datetime::interval::{self, Field, Typmod};
use crate::error::{Result, SqlError};
use crate::types::SqlType;

/// How the binder is to call an operator: the operator, whether to swap the operands, the
/// types to coerce them to (after any swap) and the result type.
pub(super) struct Resolved {
    pub(super) op: DtOp,
    pub(super) swap: bool,
    pub(super) args: [SqlType; 2],
    pub(super) result: SqlType,
}

fn is_ts(t: SqlType) -> bool {
    matches!(t, SqlType::Timestamp | SqlType::Timestamptz)
}

fn is_number(t: SqlType) -> bool {
    t.is_int() || t.is_float() || t.is_numeric()
}

/// The operator `l op r` is when either side is a date/time type; `None` when neither is,
/// or no operator takes the pair (the binder reports 42883). An untyped literal takes the
/// type PostgreSQL's resolution gives it (the other side's, else interval).
#[allow(clippy::many_single_char_names)] // l/r: the operands, a/b: both timestamps or dates
pub(super) fn resolve(op: char, l: SqlType, r: SqlType) -> Option<Resolved> {
    use DtOp as D;
    use SqlType as T;
    let dt = |t: SqlType| is_ts(t) || matches!(t, T::Date | T::Interval);
    if !dt(l) && !dt(r) {
        return None;
    }
    let ok = |op, swap, a: SqlType, b: SqlType, result| {
        Some(Resolved {
            op,
            swap,
            args: [a, b],
            result,
        })
    };
    // An untyped literal beside a timestamp or date is its partner in the operator.
    let (l, r) = match (l, r) {
        (T::Unknown, x) if op == '-' => (x, x),
        (x, T::Unknown) if op == '-' && x != T::Interval => (x, x),
        (T::Unknown, _) => (T::Interval, r),
        (_, T::Unknown) if is_number(l) || l == T::Interval && matches!(op, '*' | '/') => {
            (l, T::Float8)
        }
        (T::Date, T::Unknown) => return None,
        (_, T::Unknown) => (l, T::Interval),
        _ => (l, r),
    };
    match (op, l, r) {
        ('+', T::Interval, T::Interval) => ok(D::IntervalAdd, false, l, r, T::Interval),
        ('-', T::Interval, T::Interval) => ok(D::IntervalSub, false, l, r, T::Interval),
        ('*', T::Interval, n) if is_number(n) => {
            ok(D::IntervalMul, false, l, T::Float8, T::Interval)
        }
        ('*', n, T::Interval) if is_number(n) => {
            ok(D::IntervalMul, true, r, T::Float8, T::Interval)
        }
        ('/', T::Interval, n) if is_number(n) => {
            ok(D::IntervalDiv, false, l, T::Float8, T::Interval)
        }
        ('+', T::Timestamptz, T::Interval) => ok(D::TstzAddInterval, false, l, r, l),
        ('+', T::Interval, T::Timestamptz) => ok(D::TstzAddInterval, true, r, l, r),
        ('-', T::Timestamptz, T::Interval) => ok(D::TstzSubInterval, false, l, r, l),
        ('+', T::Timestamp, T::Interval) => ok(D::TsAddInterval, false, l, r, l),
        ('+', T::Interval, T::Timestamp) => ok(D::TsAddInterval, true, r, l, r),
        ('-', T::Timestamp, T::Interval) => ok(D::TsSubInterval, false, l, r, l),
        ('+', T::Date, T::Interval) => ok(D::TsAddInterval, false, T::Timestamp, r, T::Timestamp),
        ('+', T::Interval, T::Date) => ok(D::TsAddInterval, true, T::Timestamp, l, T::Timestamp),
        ('-', T::Date, T::Interval) => ok(D::TsSubInterval, false, T::Timestamp, r, T::Timestamp),
        ('-', a, b)
            if (is_ts(a) || a == T::Date) && (is_ts(b) || b == T::Date) && a != b
                || is_ts(a) && a == b =>
        {
            let t = if a == T::Timestamptz || b == T::Timestamptz {
                T::Timestamptz
            } else {
                T::Timestamp
            };
            ok(D::TsSub, false, t, t, T::Interval)
        }
        ('+', T::Date, n) if n.is_int() => ok(D::DateAddDays, false, l, T::Int4, T::Date),
        ('+', n, T::Date) if n.is_int() => ok(D::DateAddDays, true, r, T::Int4, T::Date),
        ('-', T::Date, n) if n.is_int() => ok(D::DateSubDays, false, l, T::Int4, T::Date),
        ('-', T::Date, T::Date) => ok(D::DateSub, false, l, r, T::Int4),
        _ => None,
    }
}

/// The qualifier field of `INTERVAL '...' DAY` (`DAYS` and other plurals are not SQL's).
fn field(f: &ast::DateTimeField) -> Result<Field> {
    use ast::DateTimeField as F;
    Ok(match f {
        F::Year => Field::Year,
        F::Month => Field::Month,
        F::Day => Field::Day,
        F::Hour => Field::Hour,
        F::Minute => Field::Minute,
        F::Second => Field::Second,
        other => {
            return Err(SqlError::syntax(format!(
                "syntax error at or near \"{other}\""
            )))
        }
    })
}

/// The value of an `INTERVAL '...' [qualifier]` literal: the text read under the
/// qualifier, the fields below its last one dropped, the seconds rounded to its precision.
pub(super) fn interval_literal(iv: &ast::Interval) -> Result<Value> {
    let text = match iv.value.as_ref() {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) => s.clone(),
            ast::Value::Number(n, _) => n.clone(),
            other => return Err(SqlError::unsupported(format!("interval literal {other}"))),
        },
        other => return Err(SqlError::unsupported(format!("interval literal {other}"))),
    };
    let first = iv.leading_field.as_ref().map(field).transpose()?;
    let last = iv.last_field.as_ref().map(field).transpose()?;
    let fields = first.map(|f| (f, last.unwrap_or(f)));
    let precision = match (
        fields,
        iv.fractional_seconds_precision,
        iv.leading_precision,
    ) {
        (Some((_, Field::Second)), Some(p), _) | (Some((Field::Second, _)), None, Some(p)) => {
            Some(u8::try_from(p.min(6)).unwrap_or(6))
        }
        _ => None,
    };
    let typmod = Typmod { fields, precision };
    interval::parse(&text, typmod).map(Value::Interval)
}

/// The kind of a date/time function's argument of type `t`.
pub(super) fn kind(t: SqlType) -> Option<Kind> {
    Some(match t {
        SqlType::Date => Kind::Date,
        SqlType::Timestamp => Kind::Timestamp,
        SqlType::Timestamptz => Kind::Timestamptz,
        SqlType::Interval => Kind::Interval,
        _ => return None,
    })
}

/// A date/time function by name and argument types: the function, the types its arguments
/// are coerced to, its result type; `None` when no date/time function takes them.
#[allow(clippy::type_complexity)] // the triple `func::resolve` returns
pub(super) fn function(
    name: &str,
    args: &[SqlType],
) -> Option<(DtFunc, Vec<Option<SqlType>>, SqlType)> {
    use SqlType as T;
    let name = name.strip_prefix("pg_catalog.").unwrap_or(name);
    let n = args.len();
    let ts_or = |t: SqlType| if t == T::Unknown { T::Timestamptz } else { t };
    let interval = || vec![Some(T::Interval)];
    Some(match (name, n) {
        ("date_part", 2) => {
            // date_part(text, date) reads the date as a timestamp.
            let t = match ts_or(args[1]) {
                T::Date => T::Timestamp,
                t => t,
            };
            let f = DtFunc::Extract {
                kind: kind(t)?,
                numeric: false,
            };
            (f, vec![Some(T::Text), Some(t)], T::Float8)
        }
        ("date_trunc", 2) => {
            let t = match ts_or(args[1]) {
                T::Date => T::Timestamptz,
                t => t,
            };
            (DtFunc::DateTrunc(kind(t)?), vec![Some(T::Text), Some(t)], t)
        }
        ("justify_days", 1) => (DtFunc::JustifyDays, interval(), T::Interval),
        ("justify_hours", 1) => (DtFunc::JustifyHours, interval(), T::Interval),
        ("justify_interval", 1) => (DtFunc::JustifyInterval, interval(), T::Interval),
        ("timezone", 2) => {
            // `ts AT TIME ZONE z`: a timestamptz to the zone's wall clock, a timestamp
            // read on it; a date is a timestamptz first, as PostgreSQL resolves it.
            let t = match ts_or(args[1]) {
                T::Date => T::Timestamptz,
                t => t,
            };
            let result = match t {
                T::Timestamptz => T::Timestamp,
                T::Timestamp => T::Timestamptz,
                _ => return None,
            };
            (
                DtFunc::AtZone(kind(t)?),
                vec![Some(T::Text), Some(t)],
                result,
            )
        }
        ("isfinite", 1) => {
            let t = ts_or(args[0]);
            (DtFunc::IsFinite(kind(t)?), vec![Some(t)], T::Bool)
        }
        ("make_date", 3) => (DtFunc::MakeDate, vec![Some(T::Int4); 3], T::Date),
        ("make_timestamp", 6) => {
            let mut c = vec![Some(T::Int4); 5];
            c.push(Some(T::Float8));
            (DtFunc::MakeTimestamp, c, T::Timestamp)
        }
        ("make_interval", 0..=7) => {
            let mut c = vec![Some(T::Int4); n.min(6)];
            if n == 7 {
                c.push(Some(T::Float8));
            }
            (DtFunc::MakeInterval, c, T::Interval)
        }
        ("date_bin", 3) => {
            let t = match (ts_or(args[1]), ts_or(args[2])) {
                (T::Timestamp, T::Timestamp | T::Unknown) => T::Timestamp,
                _ => T::Timestamptz,
            };
            (
                DtFunc::DateBin,
                vec![Some(T::Interval), Some(t), Some(t)],
                t,
            )
        }
        ("age", 1 | 2) => {
            let t = if args.contains(&T::Timestamptz) {
                T::Timestamptz
            } else {
                T::Timestamp
            };
            (DtFunc::Age, vec![Some(t); n], T::Interval)
        }
        ("to_timestamp", 1) if args[0] != T::Text => {
            (DtFunc::ToTimestamp, vec![Some(T::Float8)], T::Timestamptz)
        }
        _ => return None,
    })
}

/// The unit `EXTRACT(field FROM x)` names, as `date_part` takes it.
pub(super) fn extract_field(field: &ast::DateTimeField) -> String {
    match field {
        ast::DateTimeField::Custom(id) => id.value.to_lowercase(),
        other => other.to_string().to_lowercase(),
    }
}
