//! CTE inlining, as PostgreSQL 12+ does it: a CTE that is not recursive, not declared
//! MATERIALIZED and read once becomes the subquery it reads (so that the rules after this
//! one see into it); a CTE read by nothing is dropped. A CTE read once otherwise (recursive,
//! or MATERIALIZED) streams through its one scan, unless that scan is inside an expression
//! subquery (which may run many times); the rest stay in their [`Node::With`], computed
//! once and read by each scan, as do those of INSERT, UPDATE and DELETE (whose own
//! expressions may read them too).
//!
//! A CTE may read those before it, so a WITH's CTEs are seen last to first: an inlined
//! one's scans of earlier CTEs are then counted where they went.

use crate::error::Result;
use crate::nodes::{Cte, Expr, Node};

/// How a CTE is read: how many scans, and whether one is inside an expression subquery.
#[derive(Default)]
struct Uses {
    scans: usize,
    in_subquery: bool,
}

/// Inlines, streams or drops what it can of a `With` node's CTEs; a `With` left with none
/// becomes its input.
pub(super) fn inline_ctes(node: &mut Node) -> Result<()> {
    let Node::With { ctes, input } = node else {
        return Ok(());
    };
    for i in (0..ctes.len()).rev() {
        if ctes[i].statement_level {
            continue;
        }
        let id = ctes[i].id;
        let mut uses = Uses::default();
        count(input, id, false, &mut uses)?;
        for c in ctes.iter_mut().skip(i + 1) {
            count(&mut c.plan, id, false, &mut uses)?;
        }
        // A CTE that reads an enclosing row reads it from the WITH's level: moved into a
        // subquery it would count the levels from the wrong place.
        let outer = uses.in_subquery && reads_outer(&mut ctes[i].plan)?;
        let cte = &ctes[i];
        let inline = uses.scans == 1 && !cte.recursive && cte.materialized != Some(true) && !outer;
        let stream = uses.scans == 1 && !uses.in_subquery;
        if uses.scans > 1 || !(inline || stream || uses.scans == 0) {
            continue;
        }
        let Cte { mut plan, .. } = ctes.remove(i);
        if uses.scans == 0 {
            continue;
        }
        let mut plan = Some(std::mem::replace(&mut plan, Node::empty()));
        replace(input, id, &mut plan, inline)?;
        for c in ctes.iter_mut().skip(i) {
            replace(&mut c.plan, id, &mut plan, inline)?;
        }
    }
    if ctes.is_empty() {
        let input = std::mem::replace(&mut **input, Node::empty());
        *node = input;
    }
    Ok(())
}

/// Whether `node`, its children or its subqueries read an enclosing query's row (any outer
/// reference at all: a subquery's of its own parent counts too, which only keeps more CTEs
/// where they are).
fn reads_outer(node: &mut Node) -> Result<bool> {
    crate::stack::check_stack_depth()?;
    let mut found = false;
    node.for_each_expr_mut(|e| found = found || expr_reads_outer(e));
    node.try_for_each_subquery(|n| {
        found = found || reads_outer(n)?;
        Ok(())
    })?;
    node.try_for_each_child(|n| {
        found = found || reads_outer(n)?;
        Ok(())
    })?;
    Ok(found)
}

/// Whether expression `e` reads an enclosing query's row.
fn expr_reads_outer(e: &Expr) -> bool {
    let mut found = matches!(e, Expr::Outer { .. });
    e.for_each_child(|c| found = found || expr_reads_outer(c));
    found
}

/// Counts the scans of CTE `id` in `node`, its children and its subqueries.
fn count(node: &mut Node, id: usize, in_subquery: bool, uses: &mut Uses) -> Result<()> {
    crate::stack::check_stack_depth()?;
    if let Node::CteScan { id: scanned, .. } = node {
        if *scanned == id {
            uses.scans += 1;
            uses.in_subquery |= in_subquery;
        }
    }
    node.try_for_each_subquery(|n| count(n, id, true, uses))?;
    node.try_for_each_child(|n| count(n, id, in_subquery, uses))
}

/// The scan of CTE `id` given `plan`: replaced by it (`inline`) or streaming it.
fn replace(node: &mut Node, id: usize, plan: &mut Option<Node>, inline: bool) -> Result<()> {
    crate::stack::check_stack_depth()?;
    if plan.is_none() {
        return Ok(());
    }
    if let Node::CteScan {
        id: scanned,
        plan: streamed,
        ..
    } = node
    {
        if *scanned == id {
            let Some(p) = plan.take() else {
                return Ok(());
            };
            if inline {
                *node = p;
            } else {
                *streamed = Some(Box::new(p));
            }
            return Ok(());
        }
    }
    node.try_for_each_subquery(|n| replace(n, id, plan, inline))?;
    node.try_for_each_child(|n| replace(n, id, plan, inline))
}
