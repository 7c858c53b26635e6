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

mod access;
mod join;

use crate::error::Result;
use crate::nodes::{Bound, Node, Plan};

/// Plans every query of a bound statement.
pub(crate) fn plan(mut bound: Bound) -> Result<Bound> {
    plan_statement(&mut bound.plan)?;
    Ok(bound)
}

fn plan_statement(plan: &mut Plan) -> Result<()> {
    match plan {
        Plan::Query { node, .. } => plan_node(node),
        Plan::Insert { source, .. } => plan_node(source),
        Plan::Update { scan, .. }
        | Plan::Delete { scan, .. }
        | Plan::SelectForUpdate { scan, .. } => plan_node(scan),
        Plan::Explain(inner) => plan_statement(inner),
        _ => Ok(()),
    }?;
    plan.try_for_each_expr_subquery(&mut plan_node)
}

/// Plans `node` in place: its subqueries, its children, then itself.
fn plan_node(node: &mut Node) -> Result<()> {
    crate::stack::check_stack_depth()?;
    node.try_for_each_subquery(plan_node)?;
    // ORDER BY ... LIMIT over one table: the table, read before its access path is chosen.
    let ordered_table = match node {
        Node::Limit { input, .. } => access::ordered_relation(input),
        _ => None,
    };
    // A filtered table: the access path the filter allows (the filter stays above it).
    if let Node::Filter { input, pred } = node {
        if let Node::Relation { table, with_tid } = &**input {
            let path = access::access_path(table, Some(pred), *with_tid);
            **input = path;
        }
    }
    node.try_for_each_child(plan_node)?;
    implement(node)?;
    if let (Some(table), Node::Limit { input, .. }) = (ordered_table, &mut *node) {
        let planned = std::mem::replace(&mut **input, Node::empty());
        **input = access::ordered_by_index(planned, &table);
    }
    Ok(())
}

/// `node`, whose children are planned, made physical if it is logical.
fn implement(node: &mut Node) -> Result<()> {
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
        )?,
        _ => return Ok(()),
    };
    *node = physical;
    Ok(())
}
