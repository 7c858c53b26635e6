//! INTERSECT and EXCEPT, hashed: the right input's rows are counted, then the left input's
//! rows are matched against the counts (PostgreSQL's HashSetOp). Rows come in the order of
//! their first appearance on the left.
//!
//! ## Rules
//! - Rows compare as DISTINCT does: NULLs equal each other.
//! - Both inputs are bounded by `MAX_MATERIALIZED_ROWS` distinct rows; each row checks the
//!   interrupt.

use std::collections::HashMap;

use super::run::{open, too_many_rows, RowKey, Rows};
use crate::context::Cx;
use crate::error::Result;
use crate::nodes::{Node, SetOpKind, MAX_MATERIALIZED_ROWS};

/// Each distinct row of `rows` with how many times it came, in order of first appearance.
fn counted(rows: Rows, cx: &Cx) -> Result<(Vec<RowKey>, HashMap<RowKey, usize>)> {
    let mut order = Vec::new();
    let mut counts: HashMap<RowKey, usize> = HashMap::new();
    for r in rows {
        let key = RowKey(r?);
        cx.interrupt.check()?;
        if let Some(n) = counts.get_mut(&key) {
            *n += 1;
            continue;
        }
        if counts.len() >= MAX_MATERIALIZED_ROWS {
            return Err(too_many_rows());
        }
        order.push(key.clone());
        counts.insert(key, 1);
    }
    Ok((order, counts))
}

/// How many copies of a row that comes `m` times on the left and `n` on the right the
/// operation gives.
fn copies(op: SetOpKind, all: bool, m: usize, n: usize) -> usize {
    match (op, all) {
        (SetOpKind::Intersect, true) => m.min(n),
        (SetOpKind::Intersect, false) => usize::from(m > 0 && n > 0),
        (SetOpKind::Except, true) => m.saturating_sub(n),
        (SetOpKind::Except, false) => usize::from(m > 0 && n == 0),
    }
}

pub(super) fn set_op<'a>(
    op: SetOpKind,
    all: bool,
    left: &'a Node,
    right: &'a Node,
    cx: &'a Cx<'a>,
) -> Result<Rows<'a>> {
    let (order, lefts) = counted(open(left, cx)?, cx)?;
    let (_, rights) = counted(open(right, cx)?, cx)?;
    let rows = order.into_iter().flat_map(move |key| {
        let m = lefts.get(&key).copied().unwrap_or(0);
        let n = rights.get(&key).copied().unwrap_or(0);
        std::iter::repeat_n(key.0, copies(op, all, m, n))
    });
    Ok(Box::new(rows.map(move |row| {
        cx.interrupt.check()?;
        Ok(row)
    })))
}
