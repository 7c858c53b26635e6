//! EXPLAIN: a plan's lines, PostgreSQL's node names, children indented under `->`.

use std::ops::Bound;

use quire_engine::Transaction;

use crate::catalog::TableInfo;
use crate::error::{Result, SqlError};
use crate::nodes::{JoinKind, Node, Plan};

/// EXPLAIN's lines for `node`: PostgreSQL's node names, children indented under `->`.
pub(crate) fn explain(node: &Node, tx: &quire_engine::Transaction) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    explain_into(node, tx, 0, &mut lines)?;
    Ok(lines)
}

fn relation(tx: &quire_engine::Transaction, oid: quire_engine::Oid) -> Result<String> {
    let name = u32::try_from(oid.0)
        .ok()
        .map(|o| crate::pg_catalog::relation_name(tx, o))
        .transpose()?
        .flatten();
    Ok(name.unwrap_or_else(|| oid.0.to_string()))
}

fn explain_into(
    node: &Node,
    tx: &quire_engine::Transaction,
    depth: usize,
    out: &mut Vec<String>,
) -> Result<()> {
    crate::stack::check_stack_depth()?;
    let left_join = |k: &JoinKind| {
        if matches!(k, JoinKind::Left) {
            " Left"
        } else {
            ""
        }
    };
    let (label, children): (String, Vec<&Node>) = match node {
        Node::Relation { .. } | Node::Join { .. } => {
            return Err(SqlError::internal(
                "EXPLAIN of a plan the planner has not seen",
            ))
        }
        Node::Scan { table, .. } => (format!("Seq Scan on {}", relation(tx, *table)?), vec![]),
        Node::IndexScan {
            index,
            lower,
            upper,
            ..
        } => {
            let cond = match (lower, upper) {
                (Bound::Included(a), Bound::Included(b)) if a.len() == b.len() => "key equality",
                _ => "key range",
            };
            (
                format!("Index Scan using {} ({cond})", relation(tx, *index)?),
                vec![],
            )
        }
        Node::Catalog(t) => (format!("Catalog Scan on {t:?}"), vec![]),
        Node::Values(rows) => (format!("Values Scan ({} rows)", rows.len()), vec![]),
        Node::Series { .. } => ("Function Scan on generate_series".into(), vec![]),
        Node::Unnest { .. } => ("Function Scan on unnest".into(), vec![]),
        Node::Filter { input, .. } => ("Filter".into(), vec![&**input]),
        Node::Project { input, .. } => ("Result".into(), vec![&**input]),
        Node::NestedLoop {
            kind,
            left,
            right,
            lateral,
            ..
        } => (
            format!(
                "Nested Loop{}{}",
                left_join(kind),
                if *lateral { " (lateral)" } else { "" }
            ),
            vec![&**left, &**right],
        ),
        Node::HashJoin {
            kind, left, right, ..
        } => (
            format!("Hash{} Join", left_join(kind)),
            vec![&**left, &**right],
        ),
        Node::Aggregate { input, keys, .. } => (
            if keys.is_empty() {
                "Aggregate".into()
            } else {
                "HashAggregate".into()
            },
            vec![&**input],
        ),
        Node::WindowAgg { input, .. } => ("WindowAgg".into(), vec![&**input]),
        Node::Sort { input, .. } => ("Sort".into(), vec![&**input]),
        Node::Distinct { input } => ("Unique".into(), vec![&**input]),
        Node::Limit { input, .. } => ("Limit".into(), vec![&**input]),
        Node::Append(nodes) => ("Append".into(), nodes.iter().collect()),
    };
    let line = if depth == 0 {
        label
    } else {
        format!("{}->  {label}", " ".repeat(depth * 6 - 4))
    };
    out.push(line);
    for c in children {
        explain_into(c, tx, depth + 1, out)?;
    }
    Ok(())
}

/// EXPLAIN's lines for a planned statement: a query's plan, or the change INSERT, UPDATE or
/// DELETE makes over the plan of its rows.
pub(crate) fn explain_statement(
    plan: &Plan,
    tx: &quire_engine::Transaction,
) -> Result<Vec<String>> {
    match plan {
        Plan::Query { node, .. } => explain(node, tx),
        Plan::Update { scan, table, .. } => explain_dml("Update", table, scan, tx),
        Plan::Delete { scan, table, .. } => explain_dml("Delete", table, scan, tx),
        Plan::Insert { table, source, .. } => explain_dml("Insert", table, source, tx),
        _ => Err(SqlError::unsupported("EXPLAIN of this statement")),
    }
}

/// EXPLAIN of INSERT, UPDATE or DELETE: the change over the plan of its rows.
fn explain_dml(
    what: &str,
    table: &TableInfo,
    rows: &Node,
    tx: &Transaction,
) -> Result<Vec<String>> {
    let mut lines = vec![format!("{what} on {}", table.def.name)];
    for l in explain(rows, tx)? {
        lines.push(if l.starts_with(' ') {
            format!("      {l}")
        } else {
            format!("  ->  {l}")
        });
    }
    Ok(lines)
}
