//! Predicate pushdown. A filter over a join splits into its conjuncts: each that reads
//! columns of one side only (and no subquery, whose correlation its column list does not
//! show) moves onto that side; the rest that read both sides join the join's condition. A
//! conjunct that reads no column of the row (constants, parameters, outer rows) or a
//! subquery stays where it was. An inner join's own condition is split the same way.
//!
//! Outer joins: a LEFT join keeps every left row, so only what its condition says about the
//! right side may move (onto the right input); a filter above it may move onto the left
//! input only.

use crate::nodes::{and_of, conjuncts, Expr, JoinKind, Node};

/// Pushes the predicate of a `Filter` over a `Join`, and an inner `Join`'s own condition,
/// down one level. The children then take their share further down when visited.
pub(super) fn push_filter(node: &mut Node) {
    if let Node::Filter { input, pred } = node {
        if matches!(**input, Node::Join { .. }) {
            let rest = push_into_join(input, split(pred));
            if let Some(p) = and_of(rest) {
                *pred = p;
            } else {
                let inner = std::mem::replace(&mut **input, Node::empty());
                *node = inner;
            }
        }
    }
    if let Node::Join {
        kind: JoinKind::Inner,
        on,
        ..
    } = node
    {
        if let Some(p) = on.take() {
            let rest = push_into_join(node, split(&p));
            if let Node::Join { on, .. } = node {
                // What could not move stays in the condition, beside what moved into it.
                let mut all: Vec<Expr> = on.take().into_iter().collect();
                all.extend(rest);
                *on = and_of(all);
            }
        }
    }
}

/// The conjuncts of `pred`, owned.
fn split(pred: &Expr) -> Vec<Expr> {
    conjuncts(pred).into_iter().cloned().collect()
}

/// Moves what it can of `preds` (conjuncts over the join's row) into `join`: onto a side, or
/// into an inner join's condition. Returns what must stay above the join.
fn push_into_join(join: &mut Node, preds: Vec<Expr>) -> Vec<Expr> {
    let Node::Join {
        kind,
        left,
        right,
        on,
        left_width,
        right_width,
        ..
    } = join
    else {
        return preds;
    };
    let (lw, rw) = (*left_width, *right_width);
    let inner = matches!(kind, JoinKind::Inner);
    let mut stay = Vec::new();
    let mut to_left = Vec::new();
    let mut to_right = Vec::new();
    let mut to_on = Vec::new();
    for p in preds {
        match side(&p, lw, rw) {
            Some(Side::Left) => to_left.push(p),
            Some(Side::Right) if inner => to_right.push(p.rebased(lw)),
            Some(Side::Both) if inner => to_on.push(p),
            _ => stay.push(p),
        }
    }
    add_filter(left, to_left);
    add_filter(right, to_right);
    if !to_on.is_empty() {
        to_on.extend(on.take());
        *on = and_of(to_on);
    }
    stay
}

enum Side {
    Left,
    Right,
    Both,
}

/// Which side of a join of widths `lw` and `rw` the conjunct reads; `None` when it may not
/// move (no column of the row, a subquery, or a column beyond the row).
fn side(p: &Expr, lw: usize, rw: usize) -> Option<Side> {
    let cols = p.columns();
    if cols.is_empty() || p.uses_subquery() || cols.iter().any(|&c| c >= lw + rw) {
        return None;
    }
    let left = cols.iter().all(|&c| c < lw);
    let right = cols.iter().all(|&c| c >= lw);
    Some(match (left, right) {
        (true, _) => Side::Left,
        (_, true) => Side::Right,
        _ => Side::Both,
    })
}

/// `node` filtered by `preds` as well (merged into a filter it already is).
fn add_filter(node: &mut Node, preds: Vec<Expr>) {
    let Some(p) = and_of(preds) else { return };
    if let Node::Filter { pred, .. } = node {
        let old = std::mem::replace(pred, Expr::Const(quire_engine::Value::Null));
        *pred = and_of(vec![old, p]).expect("two conjuncts");
        return;
    }
    let input = std::mem::replace(node, Node::empty());
    *node = Node::Filter {
        input: Box::new(input),
        pred: p,
    };
}
