//! WindowAgg: window functions over input sorted on the window's partition and order keys.
//!
//! ## Rules
//! - Rows are buffered one partition at a time, in one place ([`Partitions`]), bounded by
//!   `MAX_MATERIALIZED_ROWS` (54000 beyond it); a partition's rows leave as soon as its
//!   values are computed.
//! - Frames follow PostgreSQL: ROWS counts rows, GROUPS counts peer groups (rows equal on
//!   the ORDER BY keys), RANGE compares the one ORDER BY key with the current row's plus or
//!   minus the offset (a NULL key's frame is its peers). Offsets are evaluated once, when
//!   the node opens (22004 for NULL, 22013 for a negative one).
//! - An aggregate over frames does no quadratic work for the common frames: a frame that
//!   keeps its start and grows its end extends a running state (UNBOUNDED PRECEDING ..
//!   CURRENT ROW), and a frame equal to the previous row's reuses its value (the whole
//!   partition is aggregated once).

use std::cmp::Ordering;

use quire_engine::{Row, SqlState, Value};

use super::run::{too_many_rows, Rows};
use crate::context::Cx;
use crate::error::{Result, SqlError};
use crate::func::{AggFunc, AggState, WinFunc};
use crate::nodes::{Expr, FrameBound, FrameUnits, WinCall, Window, MAX_MATERIALIZED_ROWS};
use crate::types::compare;

/// The WindowAgg node's rows: each input row followed by one value per call.
pub(super) fn window_agg<'a>(
    input: Rows<'a>,
    window: &'a Window,
    calls: &'a [WinCall],
    cx: &'a Cx<'a>,
) -> Result<Rows<'a>> {
    let offsets = [
        offset(&window.start, window.units, "starting", cx)?,
        offset(&window.end, window.units, "ending", cx)?,
    ];
    let mut parts = Partitions {
        input,
        keys: &window.partition,
        next: None,
        cx,
    };
    let mut pending = Vec::new().into_iter();
    let mut failed = false;
    Ok(Box::new(std::iter::from_fn(move || loop {
        if failed {
            return None;
        }
        if let Some(r) = pending.next() {
            return Some(Ok(r));
        }
        let computed = parts.next_partition().and_then(|p| match p {
            None => Ok(None),
            Some(rows) => {
                let p = Partition::new(rows, window, &offsets, cx)?;
                p.compute(calls, cx).map(Some)
            }
        });
        match computed {
            Ok(None) => return None,
            Ok(Some(rows)) => pending = rows.into_iter(),
            Err(e) => {
                failed = true;
                return Some(Err(e));
            }
        }
    })))
}

/// A frame bound's offset, evaluated: NULL and negative offsets are PostgreSQL's errors.
fn offset(b: &FrameBound, units: FrameUnits, which: &str, cx: &Cx) -> Result<Option<Value>> {
    let (FrameBound::Preceding(e) | FrameBound::Following(e)) = b else {
        return Ok(None);
    };
    let v = e.eval(cx, &[])?;
    if v.is_null() {
        return Err(SqlError::new(
            SqlState::NULL_VALUE_NOT_ALLOWED,
            format!("frame {which} offset must not be null"),
        ));
    }
    let zero = match &v {
        Value::Numeric(_) => Value::Numeric(crate::numeric::from_i64(0)),
        _ => Value::Int(0),
    };
    if compare(&v, &zero).is_lt() {
        let msg = if units == FrameUnits::Range {
            "invalid preceding or following size in window function".to_string()
        } else {
            format!("frame {which} offset must not be negative")
        };
        return Err(SqlError::new(
            SqlState::INVALID_PRECEDING_OR_FOLLOWING_SIZE,
            msg,
        ));
    }
    Ok(Some(v))
}

/// Sorted input read one partition at a time: the one place a WindowAgg buffers rows.
struct Partitions<'a> {
    input: Rows<'a>,
    keys: &'a [Expr],
    /// The first row of the next partition, with its partition key, once read.
    next: Option<(Row, Row)>,
    cx: &'a Cx<'a>,
}

impl Partitions<'_> {
    /// The next partition's rows, `None` after the last.
    fn next_partition(&mut self) -> Result<Option<Vec<Row>>> {
        let Some((first, key)) = self
            .next
            .take()
            .map_or_else(|| self.read(), |n| Ok(Some(n)))?
        else {
            return Ok(None);
        };
        let mut rows = vec![first];
        while let Some((row, k)) = self.read()? {
            if !same_values(&k, &key) {
                self.next = Some((row, k));
                break;
            }
            if rows.len() >= MAX_MATERIALIZED_ROWS {
                return Err(too_many_rows());
            }
            rows.push(row);
        }
        Ok(Some(rows))
    }

    /// The next input row and its partition key.
    fn read(&mut self) -> Result<Option<(Row, Row)>> {
        let Some(row) = self.input.next().transpose()? else {
            return Ok(None);
        };
        let key = eval_all(self.keys, &row, self.cx)?;
        Ok(Some((row, key)))
    }
}

fn eval_all(exprs: &[Expr], row: &[Value], cx: &Cx) -> Result<Row> {
    exprs.iter().map(|e| e.eval(cx, row)).collect()
}

/// Whether two keys are equal, NULLs equal to each other (as sorting groups them).
fn same_values(a: &[Value], b: &[Value]) -> bool {
    a.iter()
        .zip(b)
        .all(|(x, y)| x.is_null() == y.is_null() && (x.is_null() || compare(x, y).is_eq()))
}

/// One partition's rows and its peer groups (rows equal on the ORDER BY keys).
struct Partition<'a> {
    rows: Vec<Row>,
    /// Each row's ORDER BY key values.
    order: Vec<Row>,
    /// Each row's peer group.
    peer: Vec<usize>,
    /// Each peer group's rows, `start..end`.
    groups: Vec<(usize, usize)>,
    window: &'a Window,
    offsets: &'a [Option<Value>; 2],
}

impl<'a> Partition<'a> {
    fn new(
        rows: Vec<Row>,
        window: &'a Window,
        offsets: &'a [Option<Value>; 2],
        cx: &Cx,
    ) -> Result<Partition<'a>> {
        let order_exprs: Vec<Expr> = window.order.iter().map(|k| k.expr.clone()).collect();
        let mut order = Vec::with_capacity(rows.len());
        let mut peer = Vec::with_capacity(rows.len());
        let mut groups: Vec<(usize, usize)> = Vec::new();
        for (i, r) in rows.iter().enumerate() {
            cx.interrupt.check()?;
            let k = eval_all(&order_exprs, r, cx)?;
            let new_group = order.last().is_none_or(|p: &Row| !same_values(p, &k));
            if new_group {
                groups.push((i, i + 1));
            } else if let Some(g) = groups.last_mut() {
                g.1 = i + 1;
            }
            peer.push(groups.len() - 1);
            order.push(k);
        }
        Ok(Partition {
            rows,
            order,
            peer,
            groups,
            window,
            offsets,
        })
    }

    /// The partition's rows, each followed by its calls' values.
    fn compute(self, calls: &[WinCall], cx: &Cx) -> Result<Vec<Row>> {
        let needs_frames = calls.iter().any(|c| {
            matches!(
                c.func,
                WinFunc::Agg(_) | WinFunc::FirstValue | WinFunc::LastValue | WinFunc::NthValue
            )
        });
        let frames = if needs_frames {
            (0..self.rows.len())
                .map(|i| self.frame(i))
                .collect::<Result<Vec<_>>>()?
        } else {
            Vec::new()
        };
        let mut columns = Vec::with_capacity(calls.len());
        for c in calls {
            columns.push(self.call(c, &frames, cx)?);
        }
        let mut out = self.rows;
        for col in columns {
            for (row, v) in out.iter_mut().zip(col) {
                row.push(v);
            }
        }
        Ok(out)
    }

    /// One call's value for each row.
    fn call(&self, c: &WinCall, frames: &[(usize, usize)], cx: &Cx) -> Result<Vec<Value>> {
        let n = self.rows.len();
        let args: Vec<Row> = self
            .rows
            .iter()
            .map(|r| eval_all(&c.args, r, cx))
            .collect::<Result<_>>()?;
        let rank = |i: usize| self.groups[self.peer[i]].0 + 1;
        let count = |i: usize| i64::try_from(i).unwrap_or(i64::MAX);
        Ok(match c.func {
            WinFunc::RowNumber => (0..n).map(|i| Value::Int(count(i + 1))).collect(),
            WinFunc::Rank => (0..n).map(|i| Value::Int(count(rank(i)))).collect(),
            WinFunc::DenseRank => (0..n)
                .map(|i| Value::Int(count(self.peer[i] + 1)))
                .collect(),
            WinFunc::PercentRank => (0..n)
                .map(|i| {
                    Value::Float(if n > 1 {
                        (rank(i) - 1) as f64 / (n - 1) as f64
                    } else {
                        0.0
                    })
                })
                .collect(),
            WinFunc::CumeDist => (0..n)
                .map(|i| Value::Float(self.groups[self.peer[i]].1 as f64 / n as f64))
                .collect(),
            WinFunc::Ntile => ntile(&args, n)?,
            WinFunc::Lag | WinFunc::Lead => shifted(&args, c.func == WinFunc::Lag),
            WinFunc::FirstValue | WinFunc::LastValue | WinFunc::NthValue => {
                frame_value(c.func, &args, frames)?
            }
            WinFunc::Agg(f) => {
                let keep = match &c.filter {
                    None => vec![true; n],
                    Some(p) => self
                        .rows
                        .iter()
                        .map(|r| Ok(matches!(p.eval(cx, r)?, Value::Bool(true))))
                        .collect::<Result<_>>()?,
                };
                frame_aggregate(f, &args, &keep, frames, cx)?
            }
        })
    }

    /// Row `i`'s frame, `start..end` (empty when its end comes before its start).
    fn frame(&self, i: usize) -> Result<(usize, usize)> {
        let start = self.edge(i, &self.window.start, self.offsets[0].as_ref(), true)?;
        let end = self.edge(i, &self.window.end, self.offsets[1].as_ref(), false)?;
        Ok((start, end.max(start)))
    }

    /// Where a frame bound puts row `i`'s frame start (`is_start`) or its end (exclusive).
    fn edge(
        &self,
        i: usize,
        bound: &FrameBound,
        off: Option<&Value>,
        is_start: bool,
    ) -> Result<usize> {
        let len = self.rows.len();
        let group = self.peer[i];
        let (gs, ge) = self.groups[group];
        let units = self.window.units;
        let preceding = match bound {
            FrameBound::UnboundedPreceding => return Ok(0),
            FrameBound::UnboundedFollowing => return Ok(len),
            FrameBound::CurrentRow => {
                return Ok(match (units, is_start) {
                    (FrameUnits::Rows, true) => i,
                    (FrameUnits::Rows, false) => i + 1,
                    (_, true) => gs,
                    (_, false) => ge,
                })
            }
            FrameBound::Preceding(_) => true,
            FrameBound::Following(_) => false,
        };
        let Some(off) = off else {
            return Err(SqlError::internal("a frame offset that was not evaluated"));
        };
        if units == FrameUnits::Range {
            return self.range_edge(i, off, preceding, is_start);
        }
        let k = match off {
            Value::Int(k) => usize::try_from(*k).unwrap_or(usize::MAX),
            _ => return Err(SqlError::internal("a ROWS or GROUPS offset not a bigint")),
        };
        let last_group = self.groups.len() - 1;
        Ok(match (units, preceding, is_start) {
            (FrameUnits::Rows, true, true) => i.saturating_sub(k),
            (FrameUnits::Rows, true, false) => (i + 1).saturating_sub(k),
            (FrameUnits::Rows, false, true) => i.saturating_add(k).min(len),
            (FrameUnits::Rows, false, false) => i.saturating_add(k).saturating_add(1).min(len),
            (_, true, true) => self.groups[group.saturating_sub(k)].0,
            (_, true, false) if group < k => 0,
            (_, true, false) => self.groups[group - k].1,
            (_, false, true) => self
                .groups
                .get(group.saturating_add(k))
                .map_or(len, |x| x.0),
            (_, false, false) => self.groups[group.saturating_add(k).min(last_group)].1,
        })
    }

    /// A RANGE bound with an offset: the first row past the frame's start (or its end),
    /// found by binary search over the sorted key.
    fn range_edge(&self, i: usize, off: &Value, preceding: bool, is_start: bool) -> Result<usize> {
        let key = &self.window.order[0];
        let v = &self.order[i][0];
        if v.is_null() {
            let (gs, ge) = self.groups[self.peer[i]];
            return Ok(if is_start { gs } else { ge });
        }
        let target = shift(v, off, preceding != key.descending)?;
        // Whether row j lies before the frame (start) or within or before it (end).
        let before = |j: usize| -> bool {
            let x = &self.order[j][0];
            if x.is_null() {
                return key.nulls_first;
            }
            let o = compare(x, &target);
            let o = if key.descending { o.reverse() } else { o };
            if is_start {
                o == Ordering::Less
            } else {
                o != Ordering::Greater
            }
        };
        let (mut lo, mut hi) = (0, self.rows.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }
}

/// `v - off` (`sub`) or `v + off`, for RANGE offsets; integers widen to numeric where the
/// sum leaves bigint, so that a frame near the ends of the range stays right.
fn shift(v: &Value, off: &Value, sub: bool) -> Result<Value> {
    use crate::numeric::{arith, from_i64, Op};
    let op = if sub { Op::Sub } else { Op::Add };
    Ok(match (v, off) {
        (Value::Int(a), Value::Int(b)) => {
            let r = if sub {
                a.checked_sub(*b)
            } else {
                a.checked_add(*b)
            };
            match r {
                Some(r) => Value::Int(r),
                None => Value::Numeric(arith(op, &from_i64(*a), &from_i64(*b))?),
            }
        }
        (Value::Numeric(a), Value::Numeric(b)) => Value::Numeric(arith(op, a, b)?),
        (Value::Numeric(a), Value::Int(b)) => Value::Numeric(arith(op, a, &from_i64(*b))?),
        (a, b) => {
            let (a, b) = (
                crate::types::as_f64(a).unwrap_or(0.0),
                crate::types::as_f64(b).unwrap_or(0.0),
            );
            Value::Float(if sub { a - b } else { a + b })
        }
    })
}

/// ntile(n): the bucket of each row, the first `n` rows' argument deciding (NULL: NULL).
fn ntile(args: &[Row], n: usize) -> Result<Vec<Value>> {
    let buckets = match args.first().and_then(|a| a.first()) {
        None | Some(Value::Null) => return Ok(vec![Value::Null; n]),
        Some(Value::Int(b)) if *b > 0 => usize::try_from(*b).unwrap_or(usize::MAX),
        Some(_) => {
            return Err(SqlError::new(
                SqlState::INVALID_ARGUMENT_FOR_NTILE,
                "argument of ntile must be greater than zero",
            ))
        }
    };
    let per = n / buckets;
    let rem = n % buckets;
    let big = per + 1;
    Ok((0..n)
        .map(|i| {
            let b = if i < rem * big {
                i / big
            } else {
                rem + (i - rem * big) / per.max(1)
            };
            Value::Int(i64::try_from(b + 1).unwrap_or(i64::MAX))
        })
        .collect())
}

/// lag (`back`) and lead: the value `offset` rows away in the partition, else the default.
fn shifted(args: &[Row], back: bool) -> Vec<Value> {
    let n = args.len();
    (0..n)
        .map(|i| {
            let a = &args[i];
            let off = match a.get(1) {
                None => 1,
                Some(Value::Int(k)) => *k,
                Some(_) => return Value::Null,
            };
            let off = if back { off.checked_neg() } else { Some(off) };
            let j = off
                .and_then(|o| isize::try_from(o).ok())
                .and_then(|o| i.checked_add_signed(o))
                .filter(|j| *j < n);
            match j {
                Some(j) => args[j].first().cloned().unwrap_or(Value::Null),
                None => a.get(2).cloned().unwrap_or(Value::Null),
            }
        })
        .collect()
}

/// first_value, last_value and nth_value over each row's frame.
fn frame_value(f: WinFunc, args: &[Row], frames: &[(usize, usize)]) -> Result<Vec<Value>> {
    let mut out = Vec::with_capacity(args.len());
    for (a, &(s, e)) in args.iter().zip(frames) {
        let row = match f {
            WinFunc::FirstValue => Some(s),
            WinFunc::LastValue => e.checked_sub(1),
            _ => match a.get(1) {
                Some(Value::Int(k)) if *k > 0 => {
                    usize::try_from(*k - 1).ok().and_then(|k| s.checked_add(k))
                }
                Some(Value::Int(_)) => {
                    return Err(SqlError::new(
                        SqlState::INVALID_ARGUMENT_FOR_NTH_VALUE,
                        "argument of nth_value must be greater than zero",
                    ))
                }
                _ => None,
            },
        };
        let v = row
            .filter(|r| *r >= s && *r < e)
            .and_then(|r| args[r].first().cloned());
        out.push(v.unwrap_or(Value::Null));
    }
    Ok(out)
}

/// An aggregate over each row's frame (rows `keep` refuses, by FILTER, left out): a frame
/// that keeps its start and grows its end extends the running state; one equal to the
/// previous row's reuses its value.
fn frame_aggregate(
    f: AggFunc,
    args: &[Row],
    keep: &[bool],
    frames: &[(usize, usize)],
    cx: &Cx,
) -> Result<Vec<Value>> {
    let mut out: Vec<Value> = Vec::with_capacity(frames.len());
    let mut state = AggState::new(f);
    let (mut start, mut end) = (0, 0);
    let mut previous: Option<(usize, usize)> = None;
    for &(s, e) in frames {
        if previous == Some((s, e)) {
            let v = out.last().cloned().unwrap_or(Value::Null);
            out.push(v);
            continue;
        }
        if s != start || e < end {
            state = AggState::new(f);
            (start, end) = (s, s);
        }
        for j in end..e {
            cx.interrupt.check()?;
            if keep[j] {
                state.add(f, &args[j])?;
            }
        }
        end = e;
        out.push(state.clone().finish(f)?);
        previous = Some((s, e));
    }
    Ok(out)
}
