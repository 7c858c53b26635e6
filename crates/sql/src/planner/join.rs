//! Join methods: a hash join on the conjuncts that equate an expression of the left row with
//! one of the right row, a nested loop otherwise (and always for a lateral right side, and
//! under `enable_hashjoin = off`). A FULL join needs a hash join unless its condition reads
//! no column (PostgreSQL's 0A000 otherwise: its FULL joins are merge or hash joins).

use quire_engine::SqlState;

use crate::error::{Result, SqlError};
use crate::nodes::{conjuncts, CmpOp, Expr, JoinKind, Node};
use crate::settings::PlannerSwitches;

/// A join of `left` and `right` with the best method the condition and the switches allow.
#[allow(clippy::too_many_arguments)]
pub(super) fn join(
    kind: JoinKind,
    left: Node,
    right: Node,
    on: Option<Expr>,
    left_width: usize,
    right_width: usize,
    lateral: bool,
    sw: PlannerSwitches,
) -> Result<Node> {
    if let (Some(p), false, true) = (&on, lateral, sw.hashjoin) {
        // A hash join on the conjuncts that equate an expression of the left row with one
        // of the right row; the whole condition is checked again on each match.
        let mut left_keys = Vec::new();
        let mut right_keys = Vec::new();
        for c in conjuncts(p) {
            if let Expr::Cmp(CmpOp::Eq, _, a, b) = c {
                let (ac, bc) = (a.columns(), b.columns());
                let left_only = |cs: &[usize], e: &Expr| {
                    !cs.is_empty() && cs.iter().all(|&i| i < left_width) && !e.uses_subquery()
                };
                let right_only = |cs: &[usize], e: &Expr| {
                    !cs.is_empty() && cs.iter().all(|&i| i >= left_width) && !e.uses_subquery()
                };
                if left_only(&ac, a) && right_only(&bc, b) {
                    left_keys.push((**a).clone());
                    right_keys.push(b.rebased(left_width));
                } else if left_only(&bc, b) && right_only(&ac, a) {
                    left_keys.push((**b).clone());
                    right_keys.push(a.rebased(left_width));
                }
            }
        }
        if !left_keys.is_empty() {
            return Ok(Node::HashJoin {
                kind,
                left: Box::new(left),
                right: Box::new(right),
                left_keys,
                right_keys,
                residual: on,
                left_width,
                right_width,
            });
        }
    }
    // A condition of constants only (`ON true`) is PostgreSQL's join with no clause.
    let constant = on.as_ref().is_none_or(|p| !p.uses_current_row());
    if kind == JoinKind::Full && !constant {
        return Err(SqlError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            "FULL JOIN is only supported with merge-joinable or hash-joinable join conditions",
        ));
    }
    Ok(Node::NestedLoop {
        kind,
        left: Box::new(left),
        right: Box::new(right),
        on,
        left_width,
        right_width,
        lateral,
    })
}
