//! EXPLAIN: a plan's lines, PostgreSQL's node names, children indented under `->`; a
//! query level's CTEs as PostgreSQL prints them (`CTE t` and its plan, under the level's top
//! node, or under the scan a CTE's one reference streams it through).

use std::ops::Bound;

use crate::catalog::TableInfo;
use crate::error::{Result, SqlError};
use crate::nodes::{JoinKind, Node, Plan, SetOpKind};

/// EXPLAIN's lines for `node`: PostgreSQL's node names, children indented under `->`.
pub(crate) fn explain(node: &Node, tx: &quire_engine::Transaction) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    explain_into(node, tx, None, &mut lines)?;
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

/// A node's line in EXPLAIN and what is printed under it: its CTEs (name and plan), its
/// children, and a hash join's hashed side (under a `Hash` line, as PostgreSQL prints it).
struct Entry<'n> {
    label: String,
    ctes: Vec<(&'n str, &'n Node)>,
    children: Vec<&'n Node>,
    hashed: Option<&'n Node>,
}

/// `node`'s lines: its label after `->` at column `arrow` (at the start for the top node),
/// then its CTEs and children two columns further in.
fn explain_into(
    node: &Node,
    tx: &quire_engine::Transaction,
    arrow: Option<usize>,
    out: &mut Vec<String>,
) -> Result<()> {
    crate::stack::check_stack_depth()?;
    // A query level's CTEs print under its top node.
    let (node, ctes) = match node {
        Node::With { ctes, input } => {
            (&**input, ctes.iter().map(|c| (&*c.name, &c.plan)).collect())
        }
        _ => (node, Vec::new()),
    };
    let mut entry = entry(node, tx)?;
    entry.ctes.splice(0..0, ctes);
    let column = match arrow {
        None => {
            out.push(entry.label);
            0
        }
        Some(a) => {
            out.push(format!("{}->  {}", " ".repeat(a), entry.label));
            a + 4
        }
    };
    for (name, plan) in entry.ctes {
        out.push(format!("{}CTE {name}", " ".repeat(column + 2)));
        explain_into(plan, tx, Some(column + 4), out)?;
    }
    for c in entry.children {
        explain_into(c, tx, Some(column + 2), out)?;
    }
    if let Some(h) = entry.hashed {
        out.push(format!("{}->  Hash", " ".repeat(column + 2)));
        explain_into(h, tx, Some(column + 8), out)?;
    }
    Ok(())
}

/// A scanned relation's name, and its alias when it has another.
fn scan_name(name: &str, alias: Option<&String>) -> String {
    match alias {
        Some(a) if a != name => format!("{name} {a}"),
        _ => name.to_string(),
    }
}

fn entry<'n>(node: &'n Node, tx: &quire_engine::Transaction) -> Result<Entry<'n>> {
    let mut ctes = Vec::new();
    let mut hashed = None;
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
        Node::FunctionScan { funcs, alias, .. } => {
            (function_scan_label(funcs, alias.as_ref()), vec![])
        }
        Node::ProjectSet { input, .. } => ("ProjectSet".into(), vec![&**input]),
        Node::Filter { input, .. } => ("Filter".into(), vec![&**input]),
        Node::Project { input, .. } => ("Result".into(), vec![&**input]),
        Node::NestedLoop {
            kind, left, right, ..
        } => (
            match kind {
                JoinKind::Inner => "Nested Loop".into(),
                k => format!("Nested Loop{} Join", k.explain_word()),
            },
            vec![&**left, &**right],
        ),
        Node::HashJoin {
            kind, left, right, ..
        } => {
            hashed = Some(&**right);
            (format!("Hash{} Join", kind.explain_word()), vec![&**left])
        }
        Node::Aggregate { input, keys, .. } => (
            if keys.is_empty() {
                "Aggregate".into()
            } else {
                "HashAggregate".into()
            },
            vec![&**input],
        ),
        Node::WindowAgg { input, .. } => ("WindowAgg".into(), vec![&**input]),
        Node::InitPlan { input, .. } => ("InitPlan".into(), vec![&**input]),
        Node::Sort { input, .. } => ("Sort".into(), vec![&**input]),
        Node::Distinct { input, .. } => ("Unique".into(), vec![&**input]),
        Node::Limit { input, .. } => ("Limit".into(), vec![&**input]),
        Node::Append(nodes) => ("Append".into(), nodes.iter().collect()),
        Node::SetOp {
            op,
            all,
            left,
            right,
        } => (
            format!(
                "HashSetOp {}{}",
                match op {
                    SetOpKind::Intersect => "Intersect",
                    SetOpKind::Except => "Except",
                },
                if *all { " All" } else { "" }
            ),
            vec![&**left, &**right],
        ),
        Node::With { .. } => {
            return Err(SqlError::internal(
                "EXPLAIN of a WITH below its level's top",
            ))
        }
        Node::CteScan {
            name, alias, plan, ..
        } => {
            if let Some(p) = plan {
                ctes.push((name.as_str(), &**p));
            }
            (
                format!("CTE Scan on {}", scan_name(name, alias.as_ref())),
                vec![],
            )
        }
        Node::WorkTableScan { name, alias, .. } => (
            format!("WorkTable Scan on {}", scan_name(name, alias.as_ref())),
            vec![],
        ),
        Node::RecursiveUnion { base, step, .. } => {
            ("Recursive Union".into(), vec![&**base, &**step])
        }
    };
    Ok(Entry {
        label,
        ctes,
        children,
        hashed,
    })
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
    tx: &quire_engine::Transaction,
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

/// PostgreSQL's label of a FROM item's functions: `Function Scan on unnest x`, the alias
/// alone for several functions.
fn function_scan_label(funcs: &[crate::nodes::SrfCall], alias: Option<&String>) -> String {
    match (funcs, alias) {
        ([one], Some(a)) => format!("Function Scan on {} {a}", one.func.name()),
        ([one], None) => format!("Function Scan on {}", one.func.name()),
        (_, Some(a)) => format!("Function Scan on {a}"),
        (_, None) => "Function Scan on unnest".into(),
    }
}
