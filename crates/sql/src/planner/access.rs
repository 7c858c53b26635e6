//! Access paths: how the rows of one table are read. An index scan when a predicate fixes
//! the leading key columns of an index (equality, or a range on the first), a sequential
//! scan otherwise; and a full index scan in place of a sort when ORDER BY ... LIMIT asks
//! for an index's order.

use std::ops::Bound;

use crate::catalog::TableInfo;
use crate::nodes::{conjuncts, CmpOp, Expr, KeyOrder, Node};
use crate::settings::PlannerSwitches;
use crate::types::SqlType;

/// The access path of one table under predicate `pred`: an index scan when a predicate
/// fixes the leading key columns of an index (equality, or a range on the first), a
/// sequential scan otherwise, or when `enable_indexscan` and `enable_bitmapscan` are off and
/// `enable_seqscan` is not. The predicate is still applied on top (the caller filters).
pub(super) fn access_path(
    table: &TableInfo,
    pred: Option<&Expr>,
    with_tid: bool,
    sw: PlannerSwitches,
) -> Node {
    let seq = Node::Scan {
        table: table.def.oid,
        with_tid,
    };
    let Some(pred) = pred else { return seq };
    if !sw.indexscan && sw.seqscan {
        return seq;
    }
    let conj = conjuncts(pred);
    // (column, op, key expression) for each `column op constant-ish` conjunct whose
    // comparison type stores like the column.
    let mut terms: Vec<(usize, CmpOp, &Expr)> = Vec::new();
    for c in &conj {
        if let Expr::Cmp(op, ty, a, b) = c {
            let (col, op, key) = match (&**a, &**b) {
                (Expr::Column(i), k) if !k.uses_current_row() => (*i, *op, k),
                (k, Expr::Column(i)) if !k.uses_current_row() => (*i, op.flip(), k),
                _ => continue,
            };
            // Arrays and jsonb order by their type, not as their stored text does (and
            // jsonb's `=` finds `1.0` equal to `1`): the index cannot find them.
            let typed = ty.element().is_some() || *ty == SqlType::Jsonb;
            if op == CmpOp::Ne
                || typed && (op != CmpOp::Eq || *ty == SqlType::Jsonb)
                || table
                    .columns
                    .get(col)
                    .is_none_or(|c| c.ty.engine_type() != ty.engine_type())
            {
                continue;
            }
            terms.push((col, op, key));
        }
    }
    let mut best: Option<(usize, Node)> = None;
    for idx in &table.indexes {
        let mut eq_keys = Vec::new();
        for &kc in idx.columns.iter() {
            match terms
                .iter()
                .find(|(c, op, _)| *c == usize::from(kc) && *op == CmpOp::Eq)
            {
                Some((_, _, k)) => eq_keys.push((*k).clone()),
                None => break,
            }
        }
        let score =
            eq_keys.len() * 4 + usize::from(idx.unique && eq_keys.len() == idx.columns.len()) * 2;
        let node = if eq_keys.is_empty() {
            let first = usize::from(idx.columns[0]);
            let mut lower = Bound::Unbounded;
            let mut upper = Bound::Unbounded;
            for (c, op, k) in &terms {
                if *c != first {
                    continue;
                }
                match op {
                    CmpOp::Gt => lower = Bound::Excluded(vec![(*k).clone()]),
                    CmpOp::Ge => lower = Bound::Included(vec![(*k).clone()]),
                    CmpOp::Lt => upper = Bound::Excluded(vec![(*k).clone()]),
                    CmpOp::Le => upper = Bound::Included(vec![(*k).clone()]),
                    _ => {}
                }
            }
            if matches!((&lower, &upper), (Bound::Unbounded, Bound::Unbounded)) {
                continue;
            }
            Node::IndexScan {
                index: idx.oid,
                lower,
                upper,
                with_tid,
            }
        } else {
            Node::IndexScan {
                index: idx.oid,
                lower: Bound::Included(eq_keys.clone()),
                upper: Bound::Included(eq_keys),
                with_tid,
            }
        };
        let score = score.max(1);
        if best.as_ref().is_none_or(|(s, _)| score > *s) {
            best = Some((score, node));
        }
    }
    best.map_or(seq, |(_, n)| n)
}

/// `Sort(Project(scan))` (under the projection that cuts hidden sort columns, if any) where
/// the sort keys are ascending columns that lead an index and
/// can hold no NULL (an index does not order NULLs as `NULLS LAST` promises without
/// checking): the scan reads through that index instead and the sort goes, so that a LIMIT
/// above stops after its rows. Any other shape comes back as it was.
pub(super) fn ordered_by_index(mut node: Node, table: &TableInfo) -> Node {
    // Hidden sort columns (ORDER BY what the select list lacks) are cut above the sort.
    let sort = match &mut node {
        Node::Project { input, .. } if matches!(**input, Node::Sort { .. }) => &mut **input,
        other => other,
    };
    if let Some(read_in_order) = index_order_of(sort, table) {
        *sort = read_in_order;
    }
    node
}

/// `Project(scan)` reading through an index in its order, for `sort` (a `Sort(Project(scan))`)
/// whose keys that index gives, leaving the projection's expressions behind; `None` otherwise.
fn index_order_of(sort: &mut Node, table: &TableInfo) -> Option<Node> {
    let Node::Sort { input, keys } = sort else {
        return None;
    };
    let Node::Project {
        input: inner,
        exprs,
    } = &mut **input
    else {
        return None;
    };
    let key_columns: Option<Vec<usize>> = keys
        .iter()
        .map(|k| match (&k.expr, k.descending, k.nulls_first) {
            (Expr::Column(i), false, false) if k.order == KeyOrder::Value => match exprs.get(*i) {
                Some(Expr::Column(c)) if table.columns.get(*c).is_some_and(|c| c.not_null) => {
                    Some(*c)
                }
                _ => None,
            },
            _ => None,
        })
        .collect();
    let index = table.indexes.iter().find(|i| {
        key_columns.as_ref().is_some_and(|cols| {
            i.columns.len() >= cols.len()
                && cols
                    .iter()
                    .zip(i.columns.iter())
                    .all(|(c, ic)| *c == usize::from(*ic))
        })
    })?;
    let scan = with_index_order(inner, table, index)?;
    Some(Node::Project {
        input: Box::new(scan),
        exprs: std::mem::take(exprs),
    })
}

/// `node` (a scan of `table`, maybe filtered) reading through `index`, in its order: a
/// sequential scan becomes a full index scan, a scan of that index stays; `None` otherwise.
fn with_index_order(
    node: &Node,
    table: &TableInfo,
    index: &quire_engine::IndexDef,
) -> Option<Node> {
    if crate::stack::check_stack_depth().is_err() {
        return None; // too deep to read in order: the sort stays
    }
    match node {
        Node::Scan {
            table: t,
            with_tid: false,
        } if *t == table.def.oid => Some(Node::IndexScan {
            index: index.oid,
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
            with_tid: false,
        }),
        Node::IndexScan { index: i, .. } if *i == index.oid => Some(node.clone()),
        Node::Filter { input, pred } => Some(Node::Filter {
            input: Box::new(with_index_order(input, table, index)?),
            pred: pred.clone(),
        }),
        _ => None,
    }
}

/// The table under `Project?(Sort(Project(Filter?(Relation))))`: a query whose ORDER BY an
/// index of that table may give ([`ordered_by_index`]).
pub(super) fn ordered_relation(node: &Node) -> Option<TableInfo> {
    let sort = match node {
        Node::Project { input, .. } if matches!(**input, Node::Sort { .. }) => &**input,
        other => other,
    };
    let Node::Sort { input, .. } = sort else {
        return None;
    };
    let Node::Project { input, .. } = &**input else {
        return None;
    };
    let scan = match &**input {
        Node::Filter { input, .. } => &**input,
        other => other,
    };
    match scan {
        Node::Relation {
            table,
            with_tid: false,
        } => Some((**table).clone()),
        _ => None,
    }
}
