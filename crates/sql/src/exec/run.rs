//! Plan execution: [`open`] gives an iterator of a node's rows (pull-based, one row at a
//! time, so `LIMIT 1` over a large table reads one row).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ops::Bound;
use std::rc::Rc;

use quire_engine::{IndexId, Row, SqlState, Value};

use super::sort::{compare_keys, merge_sort, INTERRUPT_EVERY};
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
        Node::FunctionScan {
            funcs, ordinality, ..
        } => super::srf::function_scan(funcs, *ordinality, cx)?,
        Node::ProjectSet { input, srfs } => super::srf::project_set(input, srfs, cx)?,
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
            left_width,
            right_width,
            lateral,
        } => {
            let j = JoinArgs {
                kind: *kind,
                left,
                right,
                left_width: *left_width,
                right_width: *right_width,
            };
            nested_loop(j, on.as_ref(), *lateral, cx)?
        }
        Node::HashJoin {
            kind,
            left,
            right,
            left_keys,
            right_keys,
            residual,
            left_width,
            right_width,
        } => {
            let j = JoinArgs {
                kind: *kind,
                left,
                right,
                left_width: *left_width,
                right_width: *right_width,
            };
            hash_join(j, left_keys, right_keys, residual.as_ref(), cx)?
        }
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
        Node::Sort { input, keys } => super::sort::sort(open(input, cx)?, keys, cx)?,
        Node::Distinct { input, on } => distinct(open(input, cx)?, on, cx),
        Node::Limit {
            input,
            offset,
            count,
            ties,
        } => {
            let offset = limit_value(offset.as_ref(), "OFFSET", cx)?.unwrap_or(0);
            let count = limit_value(count.as_ref(), "LIMIT", cx)?;
            let rows = open(input, cx)?.skip(offset);
            match count {
                Some(n) if !ties.is_empty() => with_ties(Box::new(rows), n, ties, cx),
                Some(n) => Box::new(rows.take(n)),
                None => Box::new(rows),
            }
        }
        Node::SetOp {
            op,
            all,
            left,
            right,
        } => super::setop::set_op(*op, *all, left, right, cx)?,
        Node::With { ctes, input } => super::cte::with(ctes, input, cx)?,
        Node::CteScan { plan: Some(p), .. } => open(p, cx)?,
        Node::InitPlan { id, input } => super::cte::init_plan(*id, input, cx)?,
        Node::CteScan { id, .. } | Node::WorkTableScan { id, .. } => super::cte::stored(*id, cx)?,
        Node::RecursiveUnion {
            id,
            distinct,
            base,
            step,
            ..
        } => super::cte::recursive_union(*id, *distinct, base, step, cx)?,
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

/// The first row of each group of rows equal on `on` (on the whole row if `on` is empty).
fn distinct<'a>(rows: Rows<'a>, on: &'a [Expr], cx: &'a Cx<'a>) -> Rows<'a> {
    let mut seen = HashSet::new();
    let key = move |row: &Row| -> Result<Row> {
        if on.is_empty() {
            return Ok(row.clone());
        }
        on.iter().map(|e| e.eval(cx, row)).collect()
    };
    Box::new(rows.filter_map(move |r| {
        let step = || -> Result<Option<Row>> {
            let row = r?;
            cx.interrupt.check()?;
            if seen.len() >= MAX_MATERIALIZED_ROWS {
                return Err(too_many_rows());
            }
            Ok(seen.insert(RowKey(key(&row)?)).then_some(row))
        };
        step().transpose()
    }))
}

/// The first `n` rows, then those that follow equal to the `n`th on `ties` (FETCH FIRST
/// ... WITH TIES).
fn with_ties<'a>(rows: Rows<'a>, n: usize, ties: &'a [SortKey], cx: &'a Cx<'a>) -> Rows<'a> {
    let mut given = 0usize;
    let mut last: Option<Row> = None;
    let key =
        move |row: &Row| -> Result<Row> { ties.iter().map(|k| k.expr.eval(cx, row)).collect() };
    Box::new(
        rows.map(move |r| -> Result<Option<Row>> {
            let row = r?;
            if given < n {
                given += 1;
                if given == n {
                    last = Some(key(&row)?);
                }
                return Ok(Some(row));
            }
            let tied = match &last {
                Some(k) => compare_keys(ties, k, &key(&row)?).is_eq(),
                None => false,
            };
            Ok(tied.then_some(row))
        })
        .map_while(Result::transpose),
    )
}

pub(crate) fn limit_value(e: Option<&Expr>, what: &str, cx: &Cx) -> Result<Option<usize>> {
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

/// What a join node runs with, whatever its method.
#[derive(Clone, Copy)]
struct JoinArgs<'a> {
    kind: JoinKind,
    left: &'a Node,
    right: &'a Node,
    left_width: usize,
    right_width: usize,
}

/// The right side's rows of a join kept whole, with whether a left row matched each: RIGHT
/// and FULL joins give the unmatched ones after the last left row.
#[derive(Default)]
struct Matched {
    rows: Vec<Row>,
    matched: Vec<bool>,
}

impl Matched {
    fn new(rows: Vec<Row>) -> Matched {
        let matched = vec![false; rows.len()];
        Matched { rows, matched }
    }

    /// Left row `l` joined with the right rows at `candidates` for which `cond` holds (each
    /// marked matched); `l` padded with NULLs if none does and the join keeps left rows.
    fn join_row(
        &mut self,
        l: Row,
        candidates: impl Iterator<Item = usize>,
        cond: Option<&Expr>,
        kind: JoinKind,
        right_width: usize,
        cx: &Cx,
    ) -> Result<Vec<Row>> {
        let mut out = Vec::new();
        for (n, i) in candidates.enumerate() {
            if n % INTERRUPT_EVERY == INTERRUPT_EVERY - 1 {
                cx.interrupt.check()?;
            }
            let mut row = l.clone();
            row.extend_from_slice(&self.rows[i]);
            if cond.map_or(Ok(true), |p| p.holds(cx, &row))? {
                self.matched[i] = true;
                out.push(row);
            }
        }
        if out.is_empty() && kind.keeps_left() {
            out.push(pad_right(l, right_width));
        }
        Ok(out)
    }
}

/// `l` followed by `right_width` NULLs: a left row no right row matched.
fn pad_right(mut l: Row, right_width: usize) -> Row {
    l.extend(std::iter::repeat_n(Value::Null, right_width));
    l
}

/// `rows`, then (for RIGHT and FULL) the right rows no left row matched, padded with NULLs
/// for the left side, once `rows` is exhausted.
fn with_unmatched<'a>(
    rows: Rows<'a>,
    j: &JoinArgs<'a>,
    state: Rc<RefCell<Matched>>,
    cx: &'a Cx<'a>,
) -> Rows<'a> {
    if !j.kind.keeps_right() {
        return rows;
    }
    let left_width = j.left_width;
    let tail = std::iter::once(()).flat_map(move |()| {
        let Matched { rows, matched } = std::mem::take(&mut *state.borrow_mut());
        rows.into_iter()
            .zip(matched)
            .enumerate()
            .filter_map(move |(i, (r, m))| {
                if i % INTERRUPT_EVERY == INTERRUPT_EVERY - 1 {
                    if let Err(e) = cx.interrupt.check() {
                        return Some(Err(e));
                    }
                }
                (!m).then(|| {
                    let mut row = vec![Value::Null; left_width];
                    row.extend(r);
                    Ok(row)
                })
            })
    });
    Box::new(rows.chain(tail))
}

/// A nested loop: the right side materialized once (or, lateral, once per left row), each
/// left row joined with every right row the condition holds for.
fn nested_loop<'a>(
    j: JoinArgs<'a>,
    on: Option<&'a Expr>,
    lateral: bool,
    cx: &'a Cx<'a>,
) -> Result<Rows<'a>> {
    if lateral {
        return lateral_loop(j, on, cx);
    }
    let state = Rc::new(RefCell::new(Matched::new(collect(open(j.right, cx)?)?)));
    let probe = Rc::clone(&state);
    let (kind, right_width) = (j.kind, j.right_width);
    let joined = open(j.left, cx)?.map(move |l| -> Result<Vec<Row>> {
        let l = l?;
        cx.interrupt.check()?;
        let mut st = probe.borrow_mut();
        let n = st.rows.len();
        st.join_row(l, 0..n, on, kind, right_width, cx)
    });
    Ok(with_unmatched(flatten(joined), &j, state, cx))
}

/// A lateral nested loop: the right side run again for each left row, with that row as
/// its innermost outer frame (INNER and LEFT joins only: the analyzer refuses a lateral
/// reference from the right side of a RIGHT or FULL join).
fn lateral_loop<'a>(j: JoinArgs<'a>, on: Option<&'a Expr>, cx: &'a Cx<'a>) -> Result<Rows<'a>> {
    if j.kind.keeps_right() {
        return Err(SqlError::internal("a lateral RIGHT or FULL join"));
    }
    let JoinArgs {
        kind,
        left,
        right,
        right_width,
        ..
    } = j;
    let joined = open(left, cx)?.map(move |l| -> Result<Vec<Row>> {
        let l = l?;
        cx.interrupt.check()?;
        let frame = Frame {
            row: &l,
            up: cx.outer,
        };
        let inner_cx = cx.nested(&frame);
        let rights = collect(open(right, &inner_cx)?)?;
        let mut out = Vec::new();
        for (i, r) in rights.iter().enumerate() {
            if i % INTERRUPT_EVERY == INTERRUPT_EVERY - 1 {
                cx.interrupt.check()?;
            }
            let mut row = l.clone();
            row.extend_from_slice(r);
            if on.map_or(Ok(true), |p| p.holds(cx, &row))? {
                out.push(row);
            }
        }
        if out.is_empty() && kind.keeps_left() {
            out.push(pad_right(l, right_width));
        }
        Ok(out)
    });
    Ok(flatten(joined))
}

/// A hash join's right rows, and their positions by key.
type HashTable = (Vec<Row>, HashMap<RowKey, Vec<usize>>);

/// The hash table of a hash join: the right rows by their key (rows whose key has a NULL
/// are kept, for RIGHT and FULL, but match nothing).
fn build_hash(right: &Node, right_keys: &[Expr], cx: &Cx) -> Result<HashTable> {
    let mut rows = Vec::new();
    let mut table: HashMap<RowKey, Vec<usize>> = HashMap::new();
    for r in open(right, cx)? {
        let r = r?;
        cx.interrupt.check()?;
        if rows.len() >= MAX_MATERIALIZED_ROWS {
            return Err(too_many_rows());
        }
        let key: Row = right_keys
            .iter()
            .map(|e| e.eval(cx, &r))
            .collect::<Result<_>>()?;
        if !key.iter().any(Value::is_null) {
            table.entry(RowKey(key)).or_default().push(rows.len());
        }
        rows.push(r);
    }
    Ok((rows, table))
}

/// A hash join: the right side hashed on its keys, each left row probing it; a match counts
/// when the whole condition (`residual`) holds on the joined row.
fn hash_join<'a>(
    j: JoinArgs<'a>,
    left_keys: &'a [Expr],
    right_keys: &'a [Expr],
    residual: Option<&'a Expr>,
    cx: &'a Cx<'a>,
) -> Result<Rows<'a>> {
    let (rows, table) = build_hash(j.right, right_keys, cx)?;
    let state = Rc::new(RefCell::new(Matched::new(rows)));
    let probe = Rc::clone(&state);
    let (kind, right_width) = (j.kind, j.right_width);
    let joined = open(j.left, cx)?.map(move |l| -> Result<Vec<Row>> {
        let l = l?;
        let key: Row = left_keys
            .iter()
            .map(|e| e.eval(cx, &l))
            .collect::<Result<_>>()?;
        let candidates = if key.iter().any(Value::is_null) {
            None
        } else {
            table.get(&RowKey(key))
        };
        let candidates = candidates.into_iter().flatten().copied();
        probe
            .borrow_mut()
            .join_row(l, candidates, residual, kind, right_width, cx)
    });
    Ok(with_unmatched(flatten(joined), &j, state, cx))
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
pub(super) struct RowKey(pub(super) Row);

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
                // By span: `1 mon` and `30 days` are equal.
                Value::Interval(i) => i.span().hash(h),
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
            self.feed(i, a, &args)?;
        }
        Ok(())
    }

    /// Feeds one row's arguments to aggregate `i` (once per distinct value under DISTINCT).
    fn feed(&mut self, i: usize, a: &Agg, args: &[Value]) -> Result<()> {
        if a.distinct && !self.seen[i].insert(RowKey(args.to_vec())) {
            return Ok(());
        }
        self.states[i].add(a.func, args)
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
                    self.feed(i, a, &args)?;
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
