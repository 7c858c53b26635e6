//! The optimizer: rules that rewrite a statement's logical nodes into equivalent ones that
//! cost less to run (DataFusion's optimizer rules; PostgreSQL's prep and path steps before
//! costing). Each rule is a module; [`optimize`] runs them in order.
//!
//! - [`cte`]: CTE inlining: a CTE read once becomes a subquery where PostgreSQL inlines
//!   one (before pushdown, which then sees into it).
//! - [`pushdown`]: predicate pushdown: a filter's conjuncts go as low as they can, onto the
//!   one input they read (where an index may serve them) or into the condition of the
//!   lowest join that has all they read (where a hash join can use them); and outer-join
//!   simplification (an outer join under a filter that rejects its padded rows is not
//!   outer).
//!
//! ## Rules
//! - A rule keeps the rows a node gives, and their order where the node has one: it changes
//!   where work happens, never the result.
//! - Rules see logical nodes only (`crate::nodes`): they run before the planner.
//! - Walks recurse with the plan's depth and check the stack at each node.

mod cte;
mod pushdown;

use crate::error::Result;
use crate::nodes::{Bound, Node, Plan};

/// Applies every rule to every query of a bound statement, subqueries included.
pub(crate) fn optimize(mut bound: Bound) -> Result<Bound> {
    optimize_statement(&mut bound.plan)?;
    Ok(bound)
}

fn optimize_statement(plan: &mut Plan) -> Result<()> {
    match plan {
        Plan::Query { node, .. } => optimize_node(node),
        Plan::Insert { source, .. } => optimize_node(source),
        Plan::Update { scan, .. }
        | Plan::Delete { scan, .. }
        | Plan::SelectForUpdate { scan, .. } => optimize_node(scan),
        Plan::CreateTableAs { query, .. } => optimize_node(query),
        Plan::Explain(inner) => optimize_statement(inner),
        _ => Ok(()),
    }?;
    plan.try_for_each_expr_subquery(&mut optimize_node)
}

/// The rules over `node`, top down: a node is rewritten before its children, so that what
/// a rule moves down is seen again below.
fn optimize_node(node: &mut Node) -> Result<()> {
    crate::stack::check_stack_depth()?;
    node.try_for_each_subquery(optimize_node)?;
    cte::inline_ctes(node)?;
    pushdown::push_filter(node)?;
    node.try_for_each_child(optimize_node)
}
