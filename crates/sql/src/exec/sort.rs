//! Sorting in at most `work_mem` (PostgreSQL's tuplesort). Rows and their evaluated sort
//! keys are gathered in memory up to `work_mem`; when a load would pass it, the load is
//! sorted and written to a temp file as a run, and the next load begins. At the end, a sort
//! that never spilled returns its one load; otherwise the runs are merged: at most
//! [`merge_order`] at once (each reads through a [`RUN_BUFFER_BYTES`] buffer), in passes
//! that write longer runs until one merge gives the rows.
//!
//! ## Rules
//! - Memory: one load (at most `work_mem`, or one row beyond it) and one buffer per run
//!   being merged; never the input. Temp files go when the sort's rows are dropped.
//! - Stable: rows with equal keys keep their input order (a load is sorted stably, and the
//!   merge takes the earlier run first on ties), as the in-memory sort always did.
//! - The interrupt is checked every [`INTERRUPT_EVERY`] comparisons and for every row read.
//! - A run's record is the row's sort key values followed by the row, so keys are
//!   evaluated once per row.

use std::cmp::Ordering;

use quire_engine::{Row, Value};

use super::run::Rows;
use crate::context::Cx;
use crate::error::Result;
use crate::nodes::{KeyOrder, SortKey};
use crate::spool::{row_cost_bytes, RunReader, RunWriter, RUN_BUFFER_BYTES};

/// Comparisons between two interrupt checks.
pub(crate) const INTERRUPT_EVERY: usize = 4096;

/// Fewest runs merged at once, whatever `work_mem` (PostgreSQL's MINORDER).
const MIN_MERGE_ORDER: usize = 6;

/// Most runs merged at once.
const MAX_MERGE_ORDER: usize = 512;

/// A row with its sort key values in front.
type Keyed = Row;

/// The rows of `input` in the order of `keys`.
pub(crate) fn sort<'a>(input: Rows<'a>, keys: &'a [SortKey], cx: &'a Cx<'a>) -> Result<Rows<'a>> {
    let budget = usize::try_from(cx.settings.work_mem_bytes()).unwrap_or(usize::MAX);
    let mut load: Vec<Keyed> = Vec::new();
    let mut load_bytes = 0usize;
    let mut runs: Vec<RunReader> = Vec::new();
    for row in input {
        let row = row?;
        let mut keyed: Keyed = Vec::with_capacity(keys.len() + row.len());
        for k in keys {
            keyed.push(k.expr.eval(cx, &row)?);
        }
        keyed.extend(row);
        load_bytes += row_cost_bytes(&keyed);
        load.push(keyed);
        if load_bytes > budget {
            runs.push(write_run(
                sort_load(std::mem::take(&mut load), keys, cx)?,
                cx,
            )?);
            load_bytes = 0;
        }
    }
    let n = keys.len();
    if runs.is_empty() {
        let sorted = sort_load(load, keys, cx)?;
        return Ok(Box::new(
            sorted.into_iter().map(move |mut k| Ok(k.split_off(n))),
        ));
    }
    if !load.is_empty() {
        runs.push(write_run(sort_load(load, keys, cx)?, cx)?);
    }
    let order = merge_order(budget);
    // Bounded: each pass divides the number of runs by at least `order` (>= 2).
    while runs.len() > order {
        runs = merge_pass(runs, order, keys, cx)?;
    }
    let merge = Merge::new(runs, keys, cx)?;
    Ok(Box::new(merge.map(move |r| r.map(|mut k| k.split_off(n)))))
}

/// How many runs one merge reads at once: as many buffers as half of `work_mem` holds.
fn merge_order(budget_bytes: usize) -> usize {
    (budget_bytes / 2 / RUN_BUFFER_BYTES).clamp(MIN_MERGE_ORDER, MAX_MERGE_ORDER)
}

/// One merge pass: each group of `order` runs merged into one longer run.
fn merge_pass(
    runs: Vec<RunReader>,
    order: usize,
    keys: &[SortKey],
    cx: &Cx,
) -> Result<Vec<RunReader>> {
    let mut out = Vec::with_capacity(runs.len().div_ceil(order));
    let mut runs = runs.into_iter();
    loop {
        let group: Vec<RunReader> = runs.by_ref().take(order).collect();
        if group.is_empty() {
            return Ok(out);
        }
        let mut writer = RunWriter::new(cx.db)?;
        for keyed in Merge::new(group, keys, cx)? {
            writer.push(&keyed?)?;
        }
        out.push(writer.finish()?);
    }
}

fn write_run(sorted: Vec<Keyed>, cx: &Cx) -> Result<RunReader> {
    let mut writer = RunWriter::new(cx.db)?;
    for keyed in sorted {
        cx.interrupt.check()?;
        writer.push(&keyed)?;
    }
    writer.finish()
}

/// One load sorted by its key values, stably.
fn sort_load(load: Vec<Keyed>, keys: &[SortKey], cx: &Cx) -> Result<Vec<Keyed>> {
    let n = keys.len();
    let mut comparisons = 0usize;
    let order = merge_sort(load.len(), |a, b| {
        comparisons += 1;
        if comparisons.is_multiple_of(INTERRUPT_EVERY) {
            cx.interrupt.check()?;
        }
        Ok(compare_keys(keys, &load[a][..n], &load[b][..n]).is_le())
    })?;
    let mut load: Vec<Option<Keyed>> = load.into_iter().map(Some).collect();
    Ok(order
        .into_iter()
        .filter_map(|i| load.get_mut(i).and_then(Option::take))
        .collect())
}

/// The positions `0..n` in order under `le` (`a` sorts before or with `b`), stable: runs of
/// 1, 2, 4, ... merged pairwise from one buffer into the other.
pub(crate) fn merge_sort(
    n: usize,
    mut le: impl FnMut(usize, usize) -> Result<bool>,
) -> Result<Vec<usize>> {
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

/// Two non-NULL values of a sort key in its order. Arrays and jsonb values are stored
/// canonical, so they parse; were one not to, it would sort by its text.
fn key_compare(order: KeyOrder, x: &Value, y: &Value) -> Ordering {
    match order {
        KeyOrder::Value => crate::types::compare(x, y),
        KeyOrder::Typed(ty) => {
            crate::types::compare_typed(x, y, ty).unwrap_or_else(|_| crate::types::compare(x, y))
        }
    }
}

/// The order of two rows' sort key values under `keys` (direction, NULLs first or last).
pub(crate) fn compare_keys(keys: &[SortKey], left: &[Value], right: &[Value]) -> Ordering {
    for (i, k) in keys.iter().enumerate() {
        let (x, y) = (&left[i], &right[i]);
        let o = match (x.is_null(), y.is_null()) {
            (true, true) => Ordering::Equal,
            (true, false) if k.nulls_first => Ordering::Less,
            (true, false) => Ordering::Greater,
            (false, true) if k.nulls_first => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => {
                let o = key_compare(k.order, x, y);
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
    Ordering::Equal
}

/// A k-way merge of sorted runs: a binary heap of the runs by their next row.
struct Merge<'a> {
    runs: Vec<RunReader>,
    /// Each run's next keyed row (`None` once it is read out).
    heads: Vec<Option<Keyed>>,
    /// Runs with a head, as a heap: `heap[0]` has the smallest head.
    heap: Vec<usize>,
    keys: &'a [SortKey],
    cx: &'a Cx<'a>,
}

impl<'a> Merge<'a> {
    fn new(mut runs: Vec<RunReader>, keys: &'a [SortKey], cx: &'a Cx<'a>) -> Result<Merge<'a>> {
        let heads = runs
            .iter_mut()
            .map(RunReader::next_row)
            .collect::<Result<Vec<_>>>()?;
        let mut merge = Merge {
            runs,
            heads,
            heap: Vec::new(),
            keys,
            cx,
        };
        for run in 0..merge.heads.len() {
            if merge.heads[run].is_some() {
                merge.heap.push(run);
                merge.sift_up(merge.heap.len() - 1);
            }
        }
        Ok(merge)
    }

    /// Whether run `first`'s head comes before run `second`'s (the earlier run on ties:
    /// stable).
    fn before(&self, first: usize, second: usize) -> bool {
        let n = self.keys.len();
        match (&self.heads[first], &self.heads[second]) {
            (Some(x), Some(y)) => match compare_keys(self.keys, &x[..n], &y[..n]) {
                Ordering::Equal => first < second,
                o => o.is_lt(),
            },
            (Some(_), None) => true,
            _ => false,
        }
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if !self.before(self.heap[i], self.heap[parent]) {
                break;
            }
            self.heap.swap(i, parent);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut least = i;
            if l < self.heap.len() && self.before(self.heap[l], self.heap[least]) {
                least = l;
            }
            if r < self.heap.len() && self.before(self.heap[r], self.heap[least]) {
                least = r;
            }
            if least == i {
                return;
            }
            self.heap.swap(i, least);
            i = least;
        }
    }

    fn next_row(&mut self) -> Result<Option<Keyed>> {
        self.cx.interrupt.check()?;
        let Some(&run) = self.heap.first() else {
            return Ok(None);
        };
        let next = self.runs[run].next_row()?;
        let row = std::mem::replace(&mut self.heads[run], next);
        if self.heads[run].is_none() {
            let last = self.heap.len() - 1;
            self.heap.swap(0, last);
            self.heap.pop();
        }
        self.sift_down(0);
        Ok(row)
    }
}

impl Iterator for Merge<'_> {
    type Item = Result<Keyed>;

    fn next(&mut self) -> Option<Result<Keyed>> {
        self.next_row().transpose()
    }
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
                return Err(crate::error::SqlError::new(
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

    #[test]
    fn the_merge_order_follows_work_mem() {
        assert_eq!(merge_order(64 * 1024), MIN_MERGE_ORDER);
        assert_eq!(merge_order(4 << 20), 32);
        assert_eq!(merge_order(usize::MAX), MAX_MERGE_ORDER);
    }
}
