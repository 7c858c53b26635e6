//! Predicate pushdown and outer-join simplification.
//!
//! Pushdown: a filter over a join splits into its conjuncts; each that reads columns of
//! one side only (and no subquery, whose correlation its column list does not show) moves
//! onto that side, and those that read both sides join an inner join's condition. A
//! conjunct that reads no column of the row (constants, parameters, outer rows) or a
//! subquery stays where it was. A join's own condition splits the same way.
//!
//! Outer joins: a filter above a join may move only onto a side whose rows the join never
//! pads with NULLs (LEFT: the left side; RIGHT: the right; FULL: neither); a condition of a
//! join may move only onto a side the join pads (LEFT: the right side; RIGHT: the left;
//! FULL: neither), since on a preserved side it decides padding, not presence.
//!
//! Simplification (PostgreSQL's `reduce_outer_joins`): a conjunct that holds above an outer
//! join and cannot be true for a row whose padded side is all NULL removes the padded rows,
//! so the join loses that side's padding: LEFT or RIGHT becomes INNER, FULL becomes LEFT,
//! RIGHT or INNER. What is known of a join's rows holds for its children's where the join
//! keeps them whole (both sides of an inner join, the preserved side of an outer one), and
//! a join's condition is known of the padded side's rows it matches.

use std::ops::Range;

use crate::error::Result;
use crate::nodes::{and_of, conjuncts, Expr, JoinKind, Node};

/// Simplifies outer joins under a `Filter` and pushes the predicate of a `Filter` over a
/// `Join`, and a `Join`'s own condition, down one level. The children then take their share
/// further down when visited.
pub(super) fn push_filter(node: &mut Node) -> Result<()> {
    if let Node::Filter { input, pred } = node {
        if matches!(**input, Node::Join { .. }) {
            reduce_outer_joins(input, &conjuncts(pred), 0)?;
            let rest = push_into_join(input, split(pred), true);
            if let Some(p) = and_of(rest) {
                *pred = p;
            } else {
                let inner = std::mem::replace(&mut **input, Node::empty());
                *node = inner;
            }
        }
    }
    if let Node::Join { on, .. } = node {
        if let Some(p) = on.take() {
            let rest = push_into_join(node, split(&p), false);
            if let Node::Join { on, .. } = node {
                // What could not move stays in the condition, beside what moved into it.
                let mut all: Vec<Expr> = on.take().into_iter().collect();
                all.extend(rest);
                *on = and_of(all);
            }
        }
    }
    Ok(())
}

/// The conjuncts of `pred`, owned.
fn split(pred: &Expr) -> Vec<Expr> {
    conjuncts(pred).into_iter().cloned().collect()
}

/// Moves what it can of `preds` (conjuncts over the join's row, from a filter `above` it
/// or from its own condition) into `join`: onto a side, or into an inner join's condition.
/// Returns what must stay where it was.
fn push_into_join(join: &mut Node, preds: Vec<Expr>, above: bool) -> Vec<Expr> {
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
    // Above the join, a side may take a filter if the join never pads it; in the join's
    // condition, if the join pads it (or the join is inner).
    let (to_left_ok, to_right_ok) = if above {
        (!kind.keeps_right(), !kind.keeps_left())
    } else {
        (
            !kind.keeps_left() && *kind != JoinKind::Full,
            !kind.keeps_right() && *kind != JoinKind::Full,
        )
    };
    let into_on = above && *kind == JoinKind::Inner;
    let mut stay = Vec::new();
    let mut to_left = Vec::new();
    let mut to_right = Vec::new();
    let mut to_on = Vec::new();
    for p in preds {
        match side(&p, lw, rw) {
            Some(Side::Left) if to_left_ok => to_left.push(p),
            Some(Side::Right) if to_right_ok => to_right.push(p.rebased(lw)),
            Some(Side::Both) if into_on => to_on.push(p),
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

/// Outer-join simplification: `preds` hold for every row of `node` (its columns are the
/// preds' columns `base..`); each outer join they prove never pads a side loses that
/// padding, down through the joins that keep their children's rows whole.
fn reduce_outer_joins(node: &mut Node, preds: &[&Expr], base: usize) -> Result<()> {
    crate::stack::check_stack_depth()?;
    let Node::Join {
        kind,
        left,
        right,
        on,
        left_width,
        right_width,
        ..
    } = node
    else {
        return Ok(());
    };
    let (lw, rw) = (*left_width, *right_width);
    let left_nulls = preds.iter().any(|p| rejects_nulls(p, &(base..base + lw)));
    let right_nulls = preds
        .iter()
        .any(|p| rejects_nulls(p, &(base + lw..base + lw + rw)));
    *kind = match *kind {
        JoinKind::Left if right_nulls => JoinKind::Inner,
        JoinKind::Right if left_nulls => JoinKind::Inner,
        JoinKind::Full => match (left_nulls, right_nulls) {
            (true, true) => JoinKind::Inner,
            (true, false) => JoinKind::Left,
            (false, true) => JoinKind::Right,
            (false, false) => JoinKind::Full,
        },
        k => k,
    };
    // What holds for the join's rows holds for the children's rows it keeps; the join's
    // condition holds for the rows of a side it drops when unmatched.
    let own: Vec<&Expr> = on.as_ref().map(conjuncts).unwrap_or_default();
    let known = |drops_unmatched: bool| -> Vec<&Expr> {
        let mut v = preds.to_vec();
        if drops_unmatched {
            v.extend(own.iter().copied());
        }
        v
    };
    let (left_known, right_known) = (known(!kind.keeps_left()), known(!kind.keeps_right()));
    reduce_outer_joins(left, &left_known, base)?;
    reduce_outer_joins(right, &right_known, base + lw)
}

/// Whether `p` cannot be true when every column in `cols` is NULL (PostgreSQL's
/// `find_nonnullable_rels`, conservatively; `false` when unsure).
fn rejects_nulls(p: &Expr, cols: &Range<usize>) -> bool {
    if crate::stack::check_stack_depth().is_err() {
        return false; // too deep to tell: the join stays as it is
    }
    match p {
        Expr::And(v) => v.iter().any(|x| rejects_nulls(x, cols)),
        Expr::Or(v) => !v.is_empty() && v.iter().all(|x| rejects_nulls(x, cols)),
        Expr::IsNull(x, true) => is_null_when(x, cols),
        p => is_null_when(p, cols),
    }
}

/// Whether `e` is NULL when every column in `cols` is NULL: a column among them, or a
/// strict operator (comparison, arithmetic, cast, LIKE, ...) over such an operand.
fn is_null_when(e: &Expr, cols: &Range<usize>) -> bool {
    let mut pending = vec![e];
    while let Some(x) = pending.pop() {
        match x {
            Expr::Column(c) if cols.contains(c) => return true,
            // Strict in every operand: NULL in, NULL out.
            Expr::Arith(..)
            | Expr::Cmp(..)
            | Expr::Concat(..)
            | Expr::Like { .. }
            | Expr::Regex { .. }
            | Expr::Neg(_)
            | Expr::Not(_)
            | Expr::Cast(..) => x.for_each_child(|c| pending.push(c)),
            // Strict in its tested value only: a NULL in the list may still leave a match.
            Expr::InList { expr, .. } => pending.push(expr),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use quire_engine::Value;

    use super::*;
    use crate::nodes::CmpOp;
    use crate::types::SqlType;

    /// A leaf of one row of `width` columns.
    fn leaf(width: usize) -> Node {
        Node::Values(vec![vec![Expr::Const(Value::Int(1)); width]])
    }

    fn eq(col: usize, v: i64) -> Expr {
        let (c, k) = (Expr::Column(col), Expr::Const(Value::Int(v)));
        Expr::Cmp(CmpOp::Eq, SqlType::Int4, Box::new(c), Box::new(k))
    }

    /// `Filter(pred, Join(kind, [2 cols], [2 cols], on))` after the rule, at every level.
    fn pushed(kind: JoinKind, on: Option<Expr>, pred: Expr) -> Node {
        let join = Node::Join {
            kind,
            left: Box::new(leaf(2)),
            right: Box::new(leaf(2)),
            on,
            left_width: 2,
            right_width: 2,
            lateral: false,
        };
        let mut node = Node::Filter {
            input: Box::new(join),
            pred,
        };
        push_filter(&mut node).unwrap();
        if let Node::Filter { input, .. } = &mut node {
            push_filter(input).unwrap();
        }
        node
    }

    /// The join in `node` (under a filter that stayed, if any), and whether a filter stayed.
    fn join_of(node: &Node) -> (&Node, bool) {
        match node {
            Node::Filter { input, .. } => (input, true),
            other => (other, false),
        }
    }

    fn filtered(n: &Node) -> bool {
        matches!(n, Node::Filter { .. })
    }

    #[test]
    fn a_filter_moves_only_onto_a_side_the_join_never_pads() {
        // `b.x IS NULL` above a LEFT join keeps the padded rows: it stays, the join stays.
        let is_null = Expr::IsNull(Box::new(Expr::Column(2)), false);
        let node = pushed(JoinKind::Left, None, is_null);
        let (join, stayed) = join_of(&node);
        let Node::Join { kind, right, .. } = join else {
            panic!("{node:?}")
        };
        assert!(stayed && *kind == JoinKind::Left && !filtered(right));
        // A filter on the left side of a RIGHT or FULL join stays above it.
        for kind in [JoinKind::Right, JoinKind::Full] {
            let node = pushed(
                kind,
                None,
                Expr::Or(vec![
                    eq(0, 1),
                    Expr::IsNull(Box::new(Expr::Column(0)), false),
                ]),
            );
            let (join, stayed) = join_of(&node);
            let Node::Join { left, kind: k, .. } = join else {
                panic!("{node:?}")
            };
            assert!(stayed && !filtered(left) && *k == kind, "{node:?}");
        }
    }

    #[test]
    fn a_null_rejecting_filter_makes_an_outer_join_inner() {
        // `b.x = 1` above `a LEFT JOIN b`: no padded row passes, the join is inner and the
        // filter goes onto b.
        let node = pushed(JoinKind::Left, None, eq(2, 1));
        let (join, stayed) = join_of(&node);
        let Node::Join { kind, right, .. } = join else {
            panic!("{node:?}")
        };
        assert!(
            !stayed && *kind == JoinKind::Inner && filtered(right),
            "{node:?}"
        );
        // Above a FULL join, rejecting the left side's NULLs leaves a LEFT join.
        let node = pushed(JoinKind::Full, None, eq(0, 1));
        let (join, _) = join_of(&node);
        let Node::Join { kind, left, .. } = join else {
            panic!("{node:?}")
        };
        assert!(*kind == JoinKind::Left && filtered(left), "{node:?}");
    }

    #[test]
    fn a_join_condition_moves_only_onto_the_padded_side() {
        // `ON a.x = 1 AND b.x = 1` of a LEFT join: `b.x = 1` may filter b; `a.x = 1` decides
        // which left rows are padded, so it stays in the condition.
        let on = Expr::And(vec![eq(0, 1), eq(2, 1)]);
        let mut node = Node::Join {
            kind: JoinKind::Left,
            left: Box::new(leaf(2)),
            right: Box::new(leaf(2)),
            on: Some(on),
            left_width: 2,
            right_width: 2,
            lateral: false,
        };
        push_filter(&mut node).unwrap();
        let Node::Join {
            left, right, on, ..
        } = &node
        else {
            panic!("{node:?}")
        };
        assert!(!filtered(left) && filtered(right), "{node:?}");
        assert!(on.as_ref().is_some_and(|p| p.columns() == [0]), "{node:?}");
        // A FULL join's condition stays whole.
        let mut node = Node::Join {
            kind: JoinKind::Full,
            left: Box::new(leaf(2)),
            right: Box::new(leaf(2)),
            on: Some(Expr::And(vec![eq(0, 1), eq(2, 1)])),
            left_width: 2,
            right_width: 2,
            lateral: false,
        };
        push_filter(&mut node).unwrap();
        let Node::Join { left, right, .. } = &node else {
            panic!("{node:?}")
        };
        assert!(!filtered(left) && !filtered(right), "{node:?}");
    }
}
