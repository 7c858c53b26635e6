//! Plan execution: [`open`] gives an iterator of a node's rows (pull-based, one row at a
//! time, so `LIMIT 1` over a large table reads one row).

use std::collections::{HashMap, HashSet};
use std::ops::Bound;

use quire_engine::{IndexId, Row, SqlState, Value};

use crate::context::{Cx, Frame};
use crate::error::{Result, SqlError};
use crate::func::AggState;
use crate::nodes::{tid_value, Agg, Expr, JoinKind, Node, SortKey, MAX_MATERIALIZED_ROWS};
use crate::types::compare;

pub(crate) type Rows<'a> = Box<dyn Iterator<Item = Result<Row>> + 'a>;

pub(crate) fn too_many_rows() -> SqlError {
    SqlError::new(
        SqlState::PROGRAM_LIMIT_EXCEEDED,
        format!("a statement may hold at most {MAX_MATERIALIZED_ROWS} rows in memory at one step"),
    )
}

/// All rows of `rows`, bounded by [`MAX_MATERIALIZED_ROWS`].
pub(crate) fn collect(rows: Rows) -> Result<Vec<Row>> {
    let mut out = Vec::new();
    for r in rows {
        if out.len() >= MAX_MATERIALIZED_ROWS {
            return Err(too_many_rows());
        }
        out.push(r?);
    }
    Ok(out)
}

/// Starts executing `node`.
pub(crate) fn open<'a>(node: &'a Node, cx: &'a Cx<'a>) -> Result<Rows<'a>> {
    crate::stack::check_stack_depth()?;
    Ok(match node {
        Node::Relation { .. } | Node::Join { .. } => {
            return Err(SqlError::internal(
                "a logical plan node reached the executor",
            ))
        }
        Node::Scan { table, with_tid } => {
            let with_tid = *with_tid;
            Box::new(cx.tx.scan(*table)?.map(move |r| {
                cx.interrupt.check()?;
                let (tid, mut row) = r?;
                if with_tid {
                    row.push(tid_value(tid));
                }
                Ok(row)
            }))
        }
        Node::IndexScan {
            index,
            lower,
            upper,
            with_tid,
        } => index_scan(*index, lower, upper, *with_tid, cx)?,
        Node::Catalog(t) => Box::new(t.rows(cx)?.into_iter().map(Ok)),
        Node::Values(rows) => Box::new(rows.iter().map(move |r| {
            cx.interrupt.check()?;
            r.iter().map(|e| e.eval(cx, &[])).collect()
        })),
        Node::Series {
            start,
            stop,
            step,
            numeric,
        } => series(start, stop, step.as_ref(), *numeric, cx)?,
        Node::Unnest { array, elem } => match array.eval(cx, &[])? {
            // A row per element, made as it is read.
            Value::Text(t) => Box::new(crate::func::array_elements(t).map(move |e| {
                cx.interrupt.check()?;
                crate::types::parse_text(*elem, &e).map(|v| vec![v])
            })),
            _ => Box::new(std::iter::empty()),
        },
        Node::Filter { input, pred } => {
            let rows = open(input, cx)?;
            Box::new(rows.filter_map(move |r| match r {
                Ok(row) => match pred.holds(cx, &row) {
                    Ok(true) => Some(Ok(row)),
                    Ok(false) => None,
                    Err(e) => Some(Err(e)),
                },
                Err(e) => Some(Err(e)),
            }))
        }
        Node::Project { input, exprs } => {
            let rows = open(input, cx)?;
            Box::new(rows.map(move |r| {
                let row = r?;
                exprs.iter().map(|e| e.eval(cx, &row)).collect()
            }))
        }
        Node::NestedLoop {
            kind,
            left,
            right,
            on,
            right_width,
            lateral,
        } => nested_loop(kind, left, right, on.as_ref(), *right_width, *lateral, cx)?,
        Node::HashJoin {
            kind,
            left,
            right,
            left_keys,
            right_keys,
            residual,
            right_width,
        } => hash_join(
            kind,
            left,
            right,
            left_keys,
            right_keys,
            residual.as_ref(),
            *right_width,
            cx,
        )?,
        Node::Aggregate { input, keys, aggs } => Box::new(
            aggregate(open(input, cx)?, keys, aggs, cx)?
                .into_iter()
                .map(Ok),
        ),
        Node::WindowAgg {
            input,
            window,
            calls,
        } => super::window::window_agg(open(input, cx)?, window, calls, cx)?,
        Node::Sort { input, keys } => Box::new(
            sort(collect(open(input, cx)?)?, keys, cx)?
                .into_iter()
                .map(Ok),
        ),
        Node::Distinct { input } => {
            let mut seen = HashSet::new();
            let rows = open(input, cx)?;
            Box::new(rows.filter_map(move |r| match r {
                Ok(row) => {
                    if let Err(e) = cx.interrupt.check() {
                        return Some(Err(e));
                    }
                    if seen.len() >= MAX_MATERIALIZED_ROWS {
                        return Some(Err(too_many_rows()));
                    }
                    seen.insert(RowKey(row.clone())).then_some(Ok(row))
                }
                Err(e) => Some(Err(e)),
            }))
        }
        Node::Limit {
            input,
            offset,
            count,
        } => {
            let offset = limit_value(offset.as_ref(), "OFFSET", cx)?.unwrap_or(0);
            let count = limit_value(count.as_ref(), "LIMIT", cx)?;
            let rows = open(input, cx)?.skip(offset);
            match count {
                Some(n) => Box::new(rows.take(n)),
                None => Box::new(rows),
            }
        }
        Node::Append(nodes) => {
            // One after the other, not a chain of chains: reading a row never recurses
            // through the inputs.
            let inputs = nodes
                .iter()
                .map(|n| open(n, cx))
                .collect::<Result<Vec<Rows>>>()?;
            Box::new(inputs.into_iter().flatten())
        }
    })
}

fn limit_value(e: Option<&Expr>, what: &str, cx: &Cx) -> Result<Option<usize>> {
    match e.map(|e| e.eval(cx, &[])).transpose()? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Int(n)) if n >= 0 => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
        Some(Value::Int(_)) => Err(SqlError::new(
            SqlState::INVALID_ROW_COUNT_IN_LIMIT_CLAUSE,
            format!("{what} must not be negative"),
        )),
        Some(_) => Err(SqlError::type_mismatch(format!(
            "argument of {what} must be type bigint"
        ))),
    }
}

fn index_scan<'a>(
    index: IndexId,
    lower: &Bound<Vec<Expr>>,
    upper: &Bound<Vec<Expr>>,
    with_tid: bool,
    cx: &'a Cx<'a>,
) -> Result<Rows<'a>> {
    let eval = |b: &Bound<Vec<Expr>>| -> Result<Option<Bound<Vec<Value>>>> {
        let keys = |v: &Vec<Expr>| -> Result<Option<Vec<Value>>> {
            let vals: Vec<Value> = v.iter().map(|e| e.eval(cx, &[])).collect::<Result<_>>()?;
            // A NULL key matches nothing (`col = NULL` is never true).
            Ok((!vals.iter().any(Value::is_null)).then_some(vals))
        };
        Ok(match b {
            Bound::Unbounded => Some(Bound::Unbounded),
            Bound::Included(v) => keys(v)?.map(Bound::Included),
            Bound::Excluded(v) => keys(v)?.map(Bound::Excluded),
        })
    };
    let (Some(lo), Some(hi)) = (eval(lower)?, eval(upper)?) else {
        return Ok(Box::new(std::iter::empty()));
    };
    let rows = cx.tx.index_scan(
        index,
        lo.as_ref().map(Vec::as_slice),
        hi.as_ref().map(Vec::as_slice),
    )?;
    Ok(Box::new(rows.map(move |r| {
        cx.interrupt.check()?;
        let (tid, mut row) = r?;
        if with_tid {
            row.push(tid_value(tid));
        }
        Ok(row)
    })))
}

/// `generate_series`: its rows made one at a time as they are read (no bound on their
/// number: a consumer that keeps them has its own), each read checking for an interrupt.
fn series<'a>(
    start: &Expr,
    stop: &Expr,
    step: Option<&Expr>,
    numeric: bool,
    cx: &'a Cx<'a>,
) -> Result<Rows<'a>> {
    let (a, b) = (start.eval(cx, &[])?, stop.eval(cx, &[])?);
    let step = match step {
        Some(e) => e.eval(cx, &[])?,
        None => Value::Int(1),
    };
    if a.is_null() || b.is_null() || step.is_null() {
        return Ok(Box::new(std::iter::empty()));
    }
    let zero_step = || {
        SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            "step size cannot equal zero",
        )
    };
    if !numeric {
        let (Value::Int(a), Value::Int(b), Value::Int(step)) = (a, b, step) else {
            return Err(crate::types::internal("generate_series argument"));
        };
        if step == 0 {
            return Err(zero_step());
        }
        let mut next = Some(a);
        return Ok(Box::new(std::iter::from_fn(move || {
            let v = next.take()?;
            if (step > 0 && v > b) || (step < 0 && v < b) {
                return None;
            }
            if let Err(e) = cx.interrupt.check() {
                return Some(Err(e));
            }
            next = v.checked_add(step);
            Some(Ok(vec![Value::Int(v)]))
        })));
    }
    let as_numeric = |v: Value| match v {
        Value::Numeric(n) => Ok(n),
        Value::Int(i) => Ok(crate::numeric::from_i64(i)),
        _ => Err(crate::types::internal("generate_series argument")),
    };
    let (a, b, step) = (as_numeric(a)?, as_numeric(b)?, as_numeric(step)?);
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
        Some(Ok(vec![Value::Numeric(v)]))
    })))
}

#[allow(clippy::too_many_arguments)]
fn nested_loop<'a>(
    kind: &'a JoinKind,
    left: &'a Node,
    right: &'a Node,
    on: Option<&'a Expr>,
    right_width: usize,
    lateral: bool,
    cx: &'a Cx<'a>,
) -> Result<Rows<'a>> {
    let fixed_right = if lateral {
        None
    } else {
        Some(collect(open(right, cx)?)?)
    };
    let lefts = open(left, cx)?;
    let joined = lefts.map(move |l| -> Result<Vec<Row>> {
        let l = l?;
        cx.interrupt.check()?;
        let frame = Frame {
            row: &l,
            up: cx.outer,
        };
        let inner_cx = cx.nested(&frame);
        let per_row;
        let rights = if let Some(r) = &fixed_right {
            r
        } else {
            per_row = collect(open(right, &inner_cx)?)?;
            &per_row
        };
        let mut out = Vec::new();
        for (i, r) in rights.iter().enumerate() {
            if i % INTERRUPT_EVERY == INTERRUPT_EVERY - 1 {
                cx.interrupt.check()?;
            }
            let mut row = l.clone();
            row.extend_from_slice(r);
            let keep = match on {
                Some(p) => p.holds(cx, &row)?,
                None => true,
            };
            if keep {
                out.push(row);
            }
        }
        if out.is_empty() && matches!(kind, JoinKind::Left) {
            let mut row = l;
            row.extend(std::iter::repeat_n(Value::Null, right_width));
            out.push(row);
        }
        Ok(out)
    });
    Ok(flatten(joined))
}

#[allow(clippy::too_many_arguments)]
fn hash_join<'a>(
    kind: &'a JoinKind,
    left: &'a Node,
    right: &'a Node,
    left_keys: &'a [Expr],
    right_keys: &'a [Expr],
    residual: Option<&'a Expr>,
    right_width: usize,
    cx: &'a Cx<'a>,
) -> Result<Rows<'a>> {
    let mut table: HashMap<RowKey, Vec<Row>> = HashMap::new();
    let mut n = 0usize;
    for r in open(right, cx)? {
        let r = r?;
        cx.interrupt.check()?;
        let key: Row = right_keys
            .iter()
            .map(|e| e.eval(cx, &r))
            .collect::<Result<_>>()?;
        if key.iter().any(Value::is_null) {
            continue;
        }
        n += 1;
        if n > MAX_MATERIALIZED_ROWS {
            return Err(too_many_rows());
        }
        table.entry(RowKey(key)).or_default().push(r);
    }
    let lefts = open(left, cx)?;
    let joined = lefts.map(move |l| -> Result<Vec<Row>> {
        let l = l?;
        let key: Row = left_keys
            .iter()
            .map(|e| e.eval(cx, &l))
            .collect::<Result<_>>()?;
        let mut out = Vec::new();
        if let Some(matches) = table.get(&RowKey(key)) {
            for r in matches {
                let mut row = l.clone();
                row.extend_from_slice(r);
                if residual.map_or(Ok(true), |p| p.holds(cx, &row))? {
                    out.push(row);
                }
            }
        }
        if out.is_empty() && matches!(kind, JoinKind::Left) {
            let mut row = l;
            row.extend(std::iter::repeat_n(Value::Null, right_width));
            out.push(row);
        }
        Ok(out)
    });
    Ok(flatten(joined))
}

/// The rows of a join's per-left-row batches, an error ending them.
fn flatten<'a>(batches: impl Iterator<Item = Result<Vec<Row>>> + 'a) -> Rows<'a> {
    Box::new(batches.flat_map(|r| -> Vec<Result<Row>> {
        match r {
            Ok(rows) => rows.into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        }
    }))
}

/// A row usable as a hash key: floats by their bits, so that equal rows hash equally.
#[derive(Clone, Debug)]
struct RowKey(Row);

impl PartialEq for RowKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|(a, b)| a.is_null() == b.is_null() && compare(a, b).is_eq())
    }
}

impl Eq for RowKey {}

impl std::hash::Hash for RowKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        for v in &self.0 {
            match v {
                Value::Null => 0u8.hash(h),
                Value::Bool(b) => b.hash(h),
                // Integers hash as floats so that 1 and 1.0 (equal under compare) agree.
                Value::Int(i) => (*i as f64).to_bits().hash(h),
                Value::Float(f) => f.to_bits().hash(h),
                Value::Text(s) => s.hash(h),
                Value::Bytea(b) => b.hash(h),
                Value::Timestamp(t) => t.hash(h),
                // By value: 1.0 and 1.00 are equal (the encoding minus the display scale).
                Value::Numeric(n) => n.as_bytes()[2..].hash(h),
            }
        }
    }
}

/// One group's aggregates: their states, the argument values DISTINCT has seen, and the
/// rows an aggregate with ORDER BY keeps until the group ends (arguments, sort keys).
struct Group {
    states: Vec<AggState>,
    seen: Vec<HashSet<RowKey>>,
    ordered: Vec<Vec<(Row, Row)>>,
}

impl Group {
    fn new(aggs: &[Agg]) -> Group {
        Group {
            states: aggs.iter().map(|a| AggState::new(a.func)).collect(),
            seen: aggs.iter().map(|_| HashSet::new()).collect(),
            ordered: aggs.iter().map(|_| Vec::new()).collect(),
        }
    }

    /// Adds one input row (FILTER first; rows of an aggregate with ORDER BY are kept, counted
    /// in `kept` against [`MAX_MATERIALIZED_ROWS`]).
    fn add(&mut self, aggs: &[Agg], row: &[Value], kept: &mut usize, cx: &Cx) -> Result<()> {
        for (i, a) in aggs.iter().enumerate() {
            if let Some(f) = &a.filter {
                if !matches!(f.eval(cx, row)?, Value::Bool(true)) {
                    continue;
                }
            }
            let args: Row = a
                .args
                .iter()
                .map(|e| e.eval(cx, row))
                .collect::<Result<_>>()?;
            if !a.order.is_empty() {
                let keys: Row = a
                    .order
                    .iter()
                    .map(|k| k.expr.eval(cx, row))
                    .collect::<Result<_>>()?;
                *kept += 1;
                if *kept > MAX_MATERIALIZED_ROWS {
                    return Err(too_many_rows());
                }
                self.ordered[i].push((args, keys));
                continue;
            }
            self.feed(i, a, args)?;
        }
        Ok(())
    }

    /// Feeds one row's arguments to aggregate `i` (once per distinct value under DISTINCT).
    fn feed(&mut self, i: usize, a: &Agg, args: Row) -> Result<()> {
        if a.distinct && !self.seen[i].insert(RowKey(args.clone())) {
            return Ok(());
        }
        self.states[i].add(a.func, &args)
    }

    /// The group's aggregate values (the kept rows fed in their ORDER BY order first).
    fn finish(mut self, aggs: &[Agg], cx: &Cx) -> Result<Vec<Value>> {
        for (i, a) in aggs.iter().enumerate() {
            let kept = std::mem::take(&mut self.ordered[i]);
            if kept.is_empty() {
                continue;
            }
            let mut comparisons = 0usize;
            let order = merge_sort(kept.len(), |x, y| {
                comparisons += 1;
                if comparisons.is_multiple_of(INTERRUPT_EVERY) {
                    cx.interrupt.check()?;
                }
                Ok(compare_keys(&a.order, &kept[x].1, &kept[y].1).is_le())
            })?;
            let mut kept: Vec<Option<Row>> = kept.into_iter().map(|(args, _)| Some(args)).collect();
            for j in order {
                if let Some(args) = kept.get_mut(j).and_then(Option::take) {
                    self.feed(i, a, args)?;
                }
            }
        }
        self.states
            .into_iter()
            .zip(aggs)
            .map(|(s, a)| s.finish(a.func))
            .collect()
    }
}

fn aggregate(input: Rows, keys: &[Expr], aggs: &[Agg], cx: &Cx) -> Result<Vec<Row>> {
    let mut order: Vec<RowKey> = Vec::new();
    let mut groups: HashMap<RowKey, Group> = HashMap::new();
    let mut kept = 0usize;
    for r in input {
        let row = r?;
        cx.interrupt.check()?;
        let key: Row = keys
            .iter()
            .map(|e| e.eval(cx, &row))
            .collect::<Result<_>>()?;
        let key = RowKey(key);
        if !groups.contains_key(&key) {
            if groups.len() >= MAX_MATERIALIZED_ROWS {
                return Err(too_many_rows());
            }
            order.push(key.clone());
            groups.insert(key.clone(), Group::new(aggs));
        }
        let g = groups.get_mut(&key).expect("the group was inserted above");
        g.add(aggs, &row, &mut kept, cx)?;
    }
    // Without GROUP BY, an aggregate over no rows still gives one row (count 0).
    if keys.is_empty() && order.is_empty() {
        order.push(RowKey(Vec::new()));
        groups.insert(RowKey(Vec::new()), Group::new(aggs));
    }
    let mut out = Vec::with_capacity(order.len());
    for key in order {
        let g = groups.remove(&key).expect("every ordered key has a group");
        let mut row = key.0;
        row.extend(g.finish(aggs, cx)?);
        out.push(row);
    }
    Ok(out)
}

/// Rows a loop that reads no row (a sort's comparisons, a nested loop's inner side) goes
/// through between two interrupt checks.
const INTERRUPT_EVERY: usize = 4096;

/// Sorts `rows` by `keys` (stable). An interrupt is checked for each row's keys and every
/// [`INTERRUPT_EVERY`] comparisons: a bottom-up merge sort of row positions, since a
/// comparison that gives up cannot stop `slice::sort_by` (it needs a total order).
fn sort(rows: Vec<Row>, keys: &[SortKey], cx: &Cx) -> Result<Vec<Row>> {
    let mut sort_keys: Vec<Row> = Vec::with_capacity(rows.len());
    for r in &rows {
        cx.interrupt.check()?;
        let k: Row = keys
            .iter()
            .map(|k| k.expr.eval(cx, r))
            .collect::<Result<_>>()?;
        sort_keys.push(k);
    }
    let mut comparisons = 0usize;
    let order = merge_sort(rows.len(), |a, b| {
        comparisons += 1;
        if comparisons.is_multiple_of(INTERRUPT_EVERY) {
            cx.interrupt.check()?;
        }
        Ok(compare_keys(keys, &sort_keys[a], &sort_keys[b]).is_le())
    })?;
    let mut rows: Vec<Option<Row>> = rows.into_iter().map(Some).collect();
    Ok(order
        .into_iter()
        .filter_map(|i| rows.get_mut(i).and_then(Option::take))
        .collect())
}

/// The positions `0..n` in order under `le` (`a` sorts before or with `b`), stable: runs of
/// 1, 2, 4, ... merged pairwise from one buffer into the other.
fn merge_sort(n: usize, mut le: impl FnMut(usize, usize) -> Result<bool>) -> Result<Vec<usize>> {
    let mut src: Vec<usize> = (0..n).collect();
    let mut dst: Vec<usize> = Vec::with_capacity(n);
    let mut width = 1;
    while width < n {
        dst.clear();
        for lo in (0..n).step_by(2 * width) {
            let mid = (lo + width).min(n);
            let hi = (lo + 2 * width).min(n);
            let (mut i, mut j) = (lo, mid);
            while i < mid && j < hi {
                if le(src[i], src[j])? {
                    dst.push(src[i]);
                    i += 1;
                } else {
                    dst.push(src[j]);
                    j += 1;
                }
            }
            dst.extend_from_slice(&src[i..mid]);
            dst.extend_from_slice(&src[j..hi]);
        }
        std::mem::swap(&mut src, &mut dst);
        width *= 2;
    }
    debug_assert_eq!(src.len(), n);
    Ok(src)
}

/// The order of two rows' sort key values under `keys` (direction, NULLs first or last).
fn compare_keys(keys: &[SortKey], left: &[Value], right: &[Value]) -> std::cmp::Ordering {
    for (i, k) in keys.iter().enumerate() {
        let (x, y) = (&left[i], &right[i]);
        let o = match (x.is_null(), y.is_null()) {
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) => {
                if k.nulls_first {
                    std::cmp::Ordering::Less
                } else {
                    std::cmp::Ordering::Greater
                }
            }
            (false, true) => {
                if k.nulls_first {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Less
                }
            }
            (false, false) => {
                let o = compare(x, y);
                if k.descending {
                    o.reverse()
                } else {
                    o
                }
            }
        };
        if o.is_ne() {
            return o;
        }
    }
    std::cmp::Ordering::Equal
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_sort_orders_stably_and_stops_when_asked() {
        let keys = [5, 3, 5, 1, 3, 9, 0, 5];
        let order = merge_sort(keys.len(), |a, b| Ok(keys[a] <= keys[b])).unwrap();
        assert_eq!(
            order,
            [6, 3, 1, 4, 0, 2, 7, 5],
            "ties keep their input order"
        );
        assert_eq!(merge_sort(0, |_, _| Ok(true)).unwrap(), Vec::<usize>::new());
        let mut comparisons = 0;
        let e = merge_sort(1000, |a, b| {
            comparisons += 1;
            if comparisons == 100 {
                return Err(SqlError::new(
                    quire_engine::SqlState::QUERY_CANCELED,
                    "stop",
                ));
            }
            Ok(a >= b)
        })
        .unwrap_err();
        assert_eq!(e.sqlstate(), "57014");
        assert_eq!(comparisons, 100, "no comparison after the error");
    }
}
