//! Set-returning functions run: a call's values made one at a time as they are read, and
//! the two nodes that run calls in lockstep, `FunctionScan` (FROM) and `ProjectSet` (a
//! select list); the rules are [`crate::nodes::SrfCall`]'s module's.

use quire_engine::{Interval, SqlState, Value};

use super::run::{open, Rows};
use crate::context::Cx;
use crate::error::{Result, SqlError};
use crate::nodes::{Node, SeriesKind, SrfCall, SrfFunc};

/// The values of one call, made as they are read.
type Values<'a> = Box<dyn Iterator<Item = Result<Value>> + 'a>;

/// Starts `call` with its arguments evaluated against `row`.
fn open_call<'a>(call: &SrfCall, cx: &'a Cx<'a>, row: &[Value]) -> Result<Values<'a>> {
    let mut args = Vec::with_capacity(call.args.len());
    for a in &call.args {
        args.push(a.eval(cx, row)?);
    }
    if args.iter().any(Value::is_null) {
        return Ok(Box::new(std::iter::empty()));
    }
    match call.func {
        SrfFunc::Series(kind) => series(kind, args, cx),
        SrfFunc::Unnest(elem) => match args.first() {
            Some(Value::Text(t)) => {
                let values = crate::types::array::values(t, elem)?;
                Ok(Box::new(values.into_iter().map(Ok)))
            }
            _ => Err(crate::types::internal("unnest argument")),
        },
        SrfFunc::Subscripts => subscripts(&args),
        SrfFunc::Json(f) => Ok(Box::new(f.values(&args[0])?.into_iter().map(Ok))),
        SrfFunc::Text(f) => Ok(Box::new(f.values(&args, cx.interrupt)?.into_iter().map(Ok))),
        SrfFunc::Options { value } => match args.first() {
            Some(Value::Text(t)) => {
                let options = crate::types::array::values(t, crate::types::SqlType::Text)?;
                Ok(Box::new(options.into_iter().map(move |o| {
                    Ok(match o {
                        Value::Text(o) => {
                            let (n, v) = o.split_once('=').unwrap_or((&o, ""));
                            Value::Text(if value { v } else { n }.to_string())
                        }
                        other => other,
                    })
                })))
            }
            _ => Err(crate::types::internal("pg_options_to_table argument")),
        },
    }
}

/// Calls running in lockstep: each row has one value per call, NULL for a call that has
/// given all its values; none once every call has.
struct Lockstep<'a> {
    calls: Vec<Option<Values<'a>>>,
}

impl<'a> Lockstep<'a> {
    fn open(calls: &[SrfCall], cx: &'a Cx<'a>, row: &[Value]) -> Result<Self> {
        let mut open = Vec::with_capacity(calls.len());
        for c in calls {
            open.push(Some(open_call(c, cx, row)?));
        }
        Ok(Lockstep { calls: open })
    }

    fn next_row(&mut self) -> Option<Result<Vec<Value>>> {
        let mut out = Vec::with_capacity(self.calls.len());
        let mut any = false;
        for slot in &mut self.calls {
            match slot.as_mut().and_then(Iterator::next) {
                Some(Ok(v)) => {
                    any = true;
                    out.push(v);
                }
                Some(Err(e)) => return Some(Err(e)),
                None => {
                    *slot = None;
                    out.push(Value::Null);
                }
            }
        }
        any.then_some(Ok(out))
    }
}

/// `Node::FunctionScan`: the calls' arguments read the enclosing rows only.
pub(super) fn function_scan<'a>(
    funcs: &[SrfCall],
    ordinality: bool,
    cx: &'a Cx<'a>,
) -> Result<Rows<'a>> {
    let mut calls = Lockstep::open(funcs, cx, &[])?;
    let mut n: i64 = 0;
    Ok(Box::new(std::iter::from_fn(move || {
        let mut row = match calls.next_row()? {
            Ok(row) => row,
            Err(e) => return Some(Err(e)),
        };
        if let Err(e) = cx.interrupt.check() {
            return Some(Err(e));
        }
        n += 1;
        if ordinality {
            row.push(Value::Int(n));
        }
        Some(Ok(row))
    })))
}

/// `Node::ProjectSet`: each input row followed by the calls' values, as many rows as the
/// longest call gives for it.
pub(super) fn project_set<'a>(
    input: &'a Node,
    srfs: &'a [SrfCall],
    cx: &'a Cx<'a>,
) -> Result<Rows<'a>> {
    let mut rows = open(input, cx)?;
    let mut current: Option<(Vec<Value>, Lockstep<'a>)> = None;
    Ok(Box::new(std::iter::from_fn(move || loop {
        if let Some((row, calls)) = &mut current {
            match calls.next_row() {
                Some(Ok(values)) => {
                    if let Err(e) = cx.interrupt.check() {
                        return Some(Err(e));
                    }
                    let mut out = Vec::with_capacity(row.len() + values.len());
                    out.extend_from_slice(row);
                    out.extend(values);
                    return Some(Ok(out));
                }
                Some(Err(e)) => return Some(Err(e)),
                None => current = None,
            }
        }
        let row = match rows.next()? {
            Ok(row) => row,
            Err(e) => return Some(Err(e)),
        };
        match Lockstep::open(srfs, cx, &row) {
            Ok(calls) => current = Some((row, calls)),
            Err(e) => return Some(Err(e)),
        }
    })))
}

fn zero_step() -> SqlError {
    SqlError::new(
        SqlState::INVALID_PARAMETER_VALUE,
        "step size cannot equal zero",
    )
}

/// `generate_series`: its values made one at a time as they are read (no bound on their
/// number: a consumer that keeps them has its own).
fn series<'a>(kind: SeriesKind, args: Vec<Value>, cx: &'a Cx<'a>) -> Result<Values<'a>> {
    let mut args = args.into_iter();
    let (Some(a), Some(b)) = (args.next(), args.next()) else {
        return Err(crate::types::internal("generate_series arguments"));
    };
    let step = args.next();
    match kind {
        SeriesKind::Int => int_series(a, b, step.unwrap_or(Value::Int(1))),
        SeriesKind::Numeric => numeric_series(a, b, step.unwrap_or(Value::Int(1)), cx),
        SeriesKind::Timestamp { zoned } => match (a, b, step) {
            (Value::Timestamp(a), Value::Timestamp(b), Some(Value::Interval(s))) => {
                timestamp_series(a, b, s, zoned)
            }
            _ => Err(crate::types::internal("generate_series argument")),
        },
    }
}

fn int_series<'a>(a: Value, b: Value, step: Value) -> Result<Values<'a>> {
    let (Value::Int(a), Value::Int(b), Value::Int(step)) = (a, b, step) else {
        return Err(crate::types::internal("generate_series argument"));
    };
    if step == 0 {
        return Err(zero_step());
    }
    let mut next = Some(a);
    Ok(Box::new(std::iter::from_fn(move || {
        let v = next.take()?;
        if (step > 0 && v > b) || (step < 0 && v < b) {
            return None;
        }
        next = v.checked_add(step);
        Some(Ok(Value::Int(v)))
    })))
}

fn numeric_series<'a>(a: Value, b: Value, step: Value, cx: &'a Cx<'a>) -> Result<Values<'a>> {
    let as_numeric = |v: Value| match v {
        Value::Numeric(n) => Ok(n),
        Value::Int(i) => Ok(crate::numeric::from_i64(i)),
        _ => Err(crate::types::internal("generate_series argument")),
    };
    let (a, b, step) = (as_numeric(a)?, as_numeric(b)?, as_numeric(step)?);
    for (n, what) in [
        (&a, "start value"),
        (&b, "stop value"),
        (&step, "step size"),
    ] {
        let problem = match n.as_special() {
            Some(quire_engine::NumericSpecial::NaN) => "NaN",
            Some(_) if what != "step size" => "infinity",
            _ => continue,
        };
        return Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("{what} cannot be {problem}"),
        ));
    }
    let zero = crate::numeric::from_i64(0);
    let ascending = match step.cmp(&zero) {
        std::cmp::Ordering::Equal => return Err(zero_step()),
        o => o.is_gt(),
    };
    let mut next = Some(a);
    Ok(Box::new(std::iter::from_fn(move || {
        let v = next.take()?;
        let past = if ascending { v > b } else { v < b };
        if past {
            return None;
        }
        if let Err(e) = cx.interrupt.check() {
            return Some(Err(e));
        }
        match crate::numeric::arith(crate::numeric::Op::Add, &v, &step) {
            Ok(n) => next = Some(n),
            Err(e) => return Some(Err(e)),
        }
        Some(Ok(Value::Numeric(v)))
    })))
}

/// `generate_series` of timestamps: `start`, `start + step`, ... while not past `stop`
/// (PostgreSQL compares the step with zero as intervals compare: a month is 30 days).
fn timestamp_series<'a>(a: i64, b: i64, step: Interval, zoned: bool) -> Result<Values<'a>> {
    const US_PER_DAY: i128 = 86_400_000_000;
    if !crate::datetime::interval::is_finite(step) {
        return Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            "step size cannot be infinite",
        ));
    }
    let span = (i128::from(step.months) * 30 + i128::from(step.days)) * US_PER_DAY
        + i128::from(step.micros);
    if span == 0 {
        return Err(zero_step());
    }
    let mut next = Some(a);
    Ok(Box::new(std::iter::from_fn(move || {
        let v = next.take()?;
        if (span > 0 && v > b) || (span < 0 && v < b) {
            return None;
        }
        next = if zoned {
            crate::datetime::arith::tstz_add(v, step).ok()
        } else {
            crate::datetime::arith::ts_add(v, step).ok()
        };
        Some(Ok(Value::Timestamp(v)))
    })))
}

/// `generate_subscripts(array, dim [, reverse])`: no values for a dimension the array
/// lacks.
fn subscripts<'a>(args: &[Value]) -> Result<Values<'a>> {
    let (Some(Value::Text(text)), Some(Value::Int(dim))) = (args.first(), args.get(1)) else {
        return Err(crate::types::internal("generate_subscripts argument"));
    };
    let reverse = matches!(args.get(2), Some(Value::Bool(true)));
    let parsed = crate::types::array::parse(text)?;
    let found = usize::try_from(*dim)
        .ok()
        .and_then(|d| d.checked_sub(1))
        .and_then(|d| parsed.dims.get(d).copied());
    let Some(d) = found else {
        return Ok(Box::new(std::iter::empty()));
    };
    let len = i64::try_from(d.len).map_err(|_| crate::types::internal("array length"))?;
    let (lower, upper) = (d.lower, d.lower.saturating_add(len) - 1);
    let values: Box<dyn Iterator<Item = i64>> = if reverse {
        Box::new((lower..=upper).rev())
    } else {
        Box::new(lower..=upper)
    };
    Ok(Box::new(values.map(|i| Ok(Value::Int(i)))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(values: Values) -> Vec<Value> {
        values.map(|v| v.expect("a value")).collect()
    }

    #[test]
    fn calls_in_lockstep_pad_the_shorter_with_nulls() {
        let series = int_series(Value::Int(1), Value::Int(3), Value::Int(1)).expect("series");
        let one: Values = Box::new(std::iter::once(Ok(Value::Int(9))));
        let mut calls = Lockstep {
            calls: vec![Some(series), Some(one)],
        };
        let mut rows = Vec::new();
        while let Some(row) = calls.next_row() {
            rows.push(row.expect("a row"));
        }
        let expected = vec![
            vec![Value::Int(1), Value::Int(9)],
            vec![Value::Int(2), Value::Null],
            vec![Value::Int(3), Value::Null],
        ];
        assert_eq!(rows, expected);
    }

    #[test]
    fn series_stops_at_the_largest_integer_without_overflow() {
        let (max, step) = (Value::Int(i64::MAX), Value::Int(i64::MAX));
        let values = int_series(Value::Int(i64::MAX - 1), max, step).expect("series");
        assert_eq!(ints(values), vec![Value::Int(i64::MAX - 1)]);
        assert!(int_series(Value::Int(1), Value::Int(2), Value::Int(0)).is_err());
    }

    #[test]
    fn subscripts_follow_the_dimension_bounds() {
        let arr = Value::Text("[2:4]={1,2,3}".into());
        let values = subscripts(&[arr.clone(), Value::Int(1), Value::Bool(true)]);
        assert_eq!(
            ints(values.expect("subscripts")),
            vec![Value::Int(4), Value::Int(3), Value::Int(2)]
        );
        let none = subscripts(&[arr, Value::Int(2)]).expect("subscripts");
        assert!(ints(none).is_empty());
    }

    #[test]
    fn timestamp_series_steps_by_months_and_refuses_a_zero_step() {
        let day = 86_400_000_000;
        let month = Interval {
            months: 1,
            days: 0,
            micros: 0,
        };
        let values = timestamp_series(0, 40 * day, month, false).expect("series");
        assert_eq!(ints(values).len(), 2);
        let zero = Interval {
            months: 0,
            days: 0,
            micros: 0,
        };
        assert!(timestamp_series(0, day, zero, false).is_err());
    }
}
