//! The planner: logical nodes become physical ones (PostgreSQL's planner after its
//! optimizer rules; Calcite's implementation step). It chooses, per node:
//! - a table's access path ([`access`]): a sequential scan, or an index scan under a filter
//!   an index serves; a full index scan instead of a sort under ORDER BY ... LIMIT;
//! - a join's method ([`join`]): hash join or nested loop.
//!
//! ## Rules
//! - Input: a statement from `crate::analyze`, rewritten by `crate::optimize`. Output: the
//!   same statement with no logical node left (`crate::nodes`' rules), subqueries in
//!   expressions included.
//! - The planner changes how rows are found, never which: each physical node gives the rows
//!   its logical node means. A filter stays above the index scan it chose (the scan may
//!   return more rows than the predicate keeps).
//! - Recursion follows the plan's depth and checks the stack at each node.
//! - The session's planner switches ([`PlannerSwitches`], PostgreSQL's `enable_*`) steer
//!   the choices as PostgreSQL's costs do: a switched-off method is avoided where another
//!   serves, never made impossible (an index path stays when nothing else is).

mod access;
mod join;

use crate::error::Result;
use crate::nodes::{Bound, Node, Plan};
use crate::settings::PlannerSwitches;

/// Plans every query of a bound statement, under the session's planner switches.
pub(crate) fn plan(mut bound: Bound, switches: PlannerSwitches) -> Result<Bound> {
    plan_statement(&mut bound.plan, switches)?;
    Ok(bound)
}

fn plan_statement(plan: &mut Plan, sw: PlannerSwitches) -> Result<()> {
    let plan_node = |node: &mut Node| plan_node(node, sw);
    match plan {
        Plan::Query { node, .. } => plan_node(node),
        Plan::Insert { source, .. } => plan_node(source),
        Plan::Update { scan, .. }
        | Plan::Delete { scan, .. }
        | Plan::SelectForUpdate { scan, .. } => plan_node(scan),
        Plan::CreateTableAs { query, .. } => plan_node(query),
        Plan::Explain(inner) => plan_statement(inner, sw),
        _ => Ok(()),
    }?;
    plan.try_for_each_expr_subquery(&mut |n| plan_node(n))
}

/// Plans `node` in place: its subqueries, its children, then itself.
fn plan_node(node: &mut Node, sw: PlannerSwitches) -> Result<()> {
    crate::stack::check_stack_depth()?;
    node.try_for_each_subquery(|n| plan_node(n, sw))?;
    // ORDER BY ... LIMIT over one table: the table, read before its access path is chosen.
    let ordered_table = match node {
        Node::Limit { input, .. } if sw.indexscan || !sw.seqscan => access::ordered_relation(input),
        _ => None,
    };
    // A filtered table: the access path the filter allows (the filter stays above it).
    if let Node::Filter { input, pred } = node {
        if let Node::Relation { table, with_tid } = &**input {
            let path = access::access_path(table, Some(pred), *with_tid, sw);
            **input = path;
        }
    }
    node.try_for_each_child(|n| plan_node(n, sw))?;
    implement(node, sw)?;
    if let (Some(table), Node::Limit { input, .. }) = (ordered_table, &mut *node) {
        let planned = std::mem::replace(&mut **input, Node::empty());
        **input = access::ordered_by_index(planned, &table);
    }
    Ok(())
}

/// `node`, whose children are planned, made physical if it is logical.
fn implement(node: &mut Node, sw: PlannerSwitches) -> Result<()> {
    let physical = match node {
        Node::Relation { table, with_tid } => Node::Scan {
            table: table.def.oid,
            with_tid: *with_tid,
        },
        Node::Join {
            kind,
            left,
            right,
            on,
            left_width,
            right_width,
            lateral,
        } => join::join(
            *kind,
            std::mem::replace(&mut **left, Node::empty()),
            std::mem::replace(&mut **right, Node::empty()),
            on.take(),
            *left_width,
            *right_width,
            *lateral,
            sw,
        )?,
        _ => return Ok(()),
    };
    *node = physical;
    Ok(())
}
