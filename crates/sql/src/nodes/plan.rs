//! Plans and their execution. A plan is a tree of [`Node`]s; executing one gives an iterator
//! of rows (pull-based, one row at a time, so `LIMIT 1` over a large table reads one row).
//! Nodes that must see all their input first (sort, aggregate, DISTINCT, the inner side of
//! a nested loop) materialize it, bounded by [`MAX_MATERIALIZED_ROWS`].
//!
//! ## Rules
//! - A node's output row is a `Vec<Value>` whose layout the binder fixed: a join's row is the
//!   left row then the right row; an aggregate's is its group keys then its aggregates.
//! - Expressions see the current row as `Column(i)` and enclosing rows through the
//!   context's frames: a LATERAL right side (and an index nested loop's inner scan) runs
//!   once per left row with that row as its innermost frame.
//! - Scans read through the engine's `Transaction`, so every row respects the statement's
//!   snapshot; a scan with `with_tid` appends the row's TID (encoded by [`tid_value`]) for
//!   UPDATE and DELETE.
//! - [`open`] and EXPLAIN recurse over the plan and check the stack at each node
//!   (`crate::stack`); reading a row recurses through the open nodes, no deeper than the
//!   plan, which binding built under the same check. A plan is dropped without recursion
//!   (its `Drop` takes it apart on an explicit stack, [`crate::nodes::dismantle`]).
//! - A loop that reads no row checks the interrupt (`crate::interrupt`) as it goes; a sort
//!   is a merge sort of its own so that it can stop between two comparisons.

use std::ops::Bound;

use quire_engine::{IndexId, TableId, Tid, Value};

use super::expr::{dismantle, Expr, Part};
use super::srf::SrfCall;
use crate::catalog::TableInfo;
use crate::error::Result;
use crate::func::{AggFunc, WinFunc};
use crate::pg_catalog::CatalogTable;
use crate::types::SqlType;

/// Most rows a node materializes (a sort's input, a hash of groups, a nested loop's inner
/// side), so that memory is bounded whatever the data: beyond it the statement fails with
/// 54000 rather than exhaust the server's memory.
pub const MAX_MATERIALIZED_ROWS: usize = 10_000_000;

/// A join's type: which sides keep their rows that match none of the other side (padded
/// with NULLs for the other side's columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JoinKind {
    Inner,
    Left,
    Right,
    Full,
}

impl JoinKind {
    /// Whether the left side's unmatched rows are kept.
    pub(crate) fn keeps_left(self) -> bool {
        matches!(self, JoinKind::Left | JoinKind::Full)
    }

    /// Whether the right side's unmatched rows are kept.
    pub(crate) fn keeps_right(self) -> bool {
        matches!(self, JoinKind::Right | JoinKind::Full)
    }

    /// PostgreSQL's word for the type in EXPLAIN (`Hash Full Join`), empty for INNER.
    pub(crate) fn explain_word(self) -> &'static str {
        match self {
            JoinKind::Inner => "",
            JoinKind::Left => " Left",
            JoinKind::Right => " Right",
            JoinKind::Full => " Full",
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct SortKey {
    pub expr: Expr,
    pub descending: bool,
    pub nulls_first: bool,
    pub order: KeyOrder,
}

/// How a sort key's values compare: as the engine orders their values, or by their SQL
/// type where that orders them otherwise (arrays element by element, jsonb by its rules;
/// both are stored as text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyOrder {
    Value,
    Typed(SqlType),
}

impl KeyOrder {
    pub(crate) fn of(ty: SqlType) -> KeyOrder {
        if ty.element().is_some() || ty == SqlType::Jsonb {
            KeyOrder::Typed(ty)
        } else {
            KeyOrder::Value
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Agg {
    pub func: AggFunc,
    pub args: Vec<Expr>,
    pub distinct: bool,
    /// `FILTER (WHERE ...)`: only rows it holds for are aggregated.
    pub filter: Option<Expr>,
    /// `ORDER BY` inside the call: the order the rows are fed in.
    pub order: Vec<SortKey>,
}

/// A window's frame units (`ROWS`, `RANGE`, `GROUPS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameUnits {
    Rows,
    Range,
    Groups,
}

/// One end of a window frame; offsets are constant expressions (evaluated once per run).
#[derive(Clone, Debug)]
pub(crate) enum FrameBound {
    UnboundedPreceding,
    Preceding(Expr),
    CurrentRow,
    Following(Expr),
    UnboundedFollowing,
}

/// A window: its partitioning, its order and its frame (PostgreSQL's default frame is
/// `RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW`).
#[derive(Clone, Debug)]
pub(crate) struct Window {
    pub partition: Vec<Expr>,
    pub order: Vec<SortKey>,
    pub units: FrameUnits,
    pub start: FrameBound,
    pub end: FrameBound,
}

/// A window function call: a built-in window function or an aggregate over the frame.
#[derive(Clone, Debug)]
pub(crate) struct WinCall {
    pub func: WinFunc,
    pub args: Vec<Expr>,
    pub filter: Option<Expr>,
}

#[derive(Clone, Debug)]
pub(crate) enum Node {
    /// Logical: every row of a table, with its TID as a last column if `with_tid`. The
    /// planner makes it a sequential scan, or an index scan under a filter an index serves.
    Relation {
        table: Box<TableInfo>,
        with_tid: bool,
    },
    /// Logical: a join and its condition over the row `left ++ right`. The planner picks
    /// the method (hash join, nested loop). A lateral right side reads the left row as
    /// its innermost outer frame.
    Join {
        kind: JoinKind,
        left: Box<Node>,
        right: Box<Node>,
        on: Option<Expr>,
        left_width: usize,
        right_width: usize,
        lateral: bool,
    },
    Scan {
        table: TableId,
        with_tid: bool,
    },
    /// Rows through an index whose key bounds are evaluated when the scan opens (constants,
    /// parameters, or the outer row of an index nested loop).
    IndexScan {
        index: IndexId,
        lower: Bound<Vec<Expr>>,
        upper: Bound<Vec<Expr>>,
        with_tid: bool,
    },
    Catalog(CatalogTable),
    Values(Vec<Vec<Expr>>),
    /// Set-returning functions in FROM (`unnest(a, b)`, `generate_series(1, 3)`): one
    /// column per call, the calls in lockstep ([`super::srf`]), and with `ordinality` a
    /// last `bigint` column counting the rows from 1. `alias`: the FROM item's, for EXPLAIN.
    FunctionScan {
        funcs: Vec<SrfCall>,
        ordinality: bool,
        alias: Option<String>,
    },
    /// Set-returning functions in a select list (PostgreSQL's ProjectSet): for each input
    /// row, the input row followed by one column per call, the calls in lockstep, as many
    /// rows as the longest call gives (none when every call gives none).
    ProjectSet {
        input: Box<Node>,
        srfs: Vec<SrfCall>,
    },
    Filter {
        input: Box<Node>,
        pred: Expr,
    },
    Project {
        input: Box<Node>,
        exprs: Vec<Expr>,
    },
    /// A nested loop. Unless `lateral`, the right side does not depend on the left row and
    /// is materialized once; a lateral right side runs once per left row (INNER or LEFT
    /// only). RIGHT and FULL keep the materialized right rows no left row matched.
    NestedLoop {
        kind: JoinKind,
        left: Box<Node>,
        right: Box<Node>,
        on: Option<Expr>,
        left_width: usize,
        right_width: usize,
        lateral: bool,
    },
    /// An equi-join: the right side is hashed on `right_keys`, the left probes it; RIGHT
    /// and FULL keep the hashed rows no left row matched, after the last left row.
    HashJoin {
        kind: JoinKind,
        left: Box<Node>,
        right: Box<Node>,
        left_keys: Vec<Expr>,
        right_keys: Vec<Expr>,
        residual: Option<Expr>,
        left_width: usize,
        right_width: usize,
    },
    Aggregate {
        input: Box<Node>,
        keys: Vec<Expr>,
        aggs: Vec<Agg>,
    },
    /// Window functions over input sorted by the window's partition and order keys: each
    /// row is the input row followed by one value per call.
    WindowAgg {
        input: Box<Node>,
        window: Window,
        calls: Vec<WinCall>,
    },
    Sort {
        input: Box<Node>,
        keys: Vec<SortKey>,
    },
    /// The first row of each group of rows equal on `on` (the whole row when `on` is
    /// empty): DISTINCT, and DISTINCT ON over rows sorted by its keys.
    Distinct {
        input: Box<Node>,
        on: Vec<Expr>,
    },
    /// OFFSET and LIMIT (or FETCH FIRST); with `ties` (FETCH ... WITH TIES over sorted
    /// rows), the rows after the last counted one that equal it on those keys too.
    Limit {
        input: Box<Node>,
        offset: Option<Expr>,
        count: Option<Expr>,
        ties: Vec<SortKey>,
    },
    Append(Vec<Node>),
    /// INTERSECT or EXCEPT [ALL] of two inputs of the same width (PostgreSQL's multiset
    /// semantics: a row `m` times on the left and `n` on the right comes `min(m, n)` or
    /// `max(m - n, 0)` times with ALL, once or not at all without).
    SetOp {
        op: SetOpKind,
        all: bool,
        left: Box<Node>,
        right: Box<Node>,
    },
    /// A subquery that reads no enclosing query's row (PostgreSQL's initplan): `input` runs
    /// at its first read in the statement, its rows are kept under `id` (in the store CTEs
    /// use) and every later read replays them.
    InitPlan {
        id: usize,
        input: Box<Node>,
    },
    /// A query level's materialized common table expressions, each computed once (in
    /// order, before `input` runs) and read by its [`Node::CteScan`]s.
    With {
        ctes: Vec<Cte>,
        input: Box<Node>,
    },
    /// The rows of common table expression `id`: those [`Node::With`] materialized, or,
    /// when the rewrite moved the CTE's plan here (its one reference), that plan's rows.
    CteScan {
        id: usize,
        /// The CTE's name and the alias it is read under (EXPLAIN).
        name: String,
        alias: Option<String>,
        plan: Option<Box<Node>>,
    },
    /// A recursive CTE: `base`'s rows, then `step`'s run again and again over the rows the
    /// previous run gave (the working table, read by [`Node::WorkTableScan`] `id`) until
    /// it gives none; with `distinct`, rows already given are discarded.
    RecursiveUnion {
        id: usize,
        distinct: bool,
        base: Box<Node>,
        step: Box<Node>,
    },
    /// The working table of recursive CTE `id` (its reference inside its recursive term).
    WorkTableScan {
        id: usize,
        name: String,
        alias: Option<String>,
    },
}

/// INTERSECT or EXCEPT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetOpKind {
    Intersect,
    Except,
}

/// A common table expression of a [`Node::With`]: its plan and what the rewrite rules
/// need to know of it.
#[derive(Clone, Debug)]
pub(crate) struct Cte {
    pub id: usize,
    pub name: String,
    pub plan: Node,
    /// `WITH RECURSIVE` and its plan reads itself: never inlined.
    pub recursive: bool,
    /// `AS MATERIALIZED` (`Some(true)`), `AS NOT MATERIALIZED` (`Some(false)`).
    pub materialized: Option<bool>,
    /// A CTE of INSERT, UPDATE or DELETE, which their expressions (SET, RETURNING) may read
    /// as well as the rows they change: always computed in its `With`.
    pub statement_level: bool,
}

impl Node {
    /// A node of no rows and no children: what a taken-apart node leaves in its place.
    pub(crate) fn empty() -> Node {
        Node::Values(Vec::new())
    }

    /// Whether the node has no child node and no expression.
    pub(crate) fn is_leaf(&self) -> bool {
        match self {
            Node::Scan { .. }
            | Node::Catalog(_)
            | Node::Relation { .. }
            | Node::WorkTableScan { .. }
            | Node::CteScan { plan: None, .. } => true,
            Node::Values(rows) => rows.is_empty(),
            _ => false,
        }
    }

    /// Moves the child nodes and the expressions that have children of their own to `out`,
    /// leaving leaves in their place (see [`crate::nodes::dismantle`]).
    pub(crate) fn take_children(&mut self, out: &mut Vec<Part>) {
        let wide = |v: &[Expr]| v.iter().any(|e| !e.is_leaf());
        match self {
            // Long lists go whole, their elements taken one at a time.
            Node::Values(rows) if rows.iter().any(|r| wide(r)) => {
                out.push(Part::Rows(std::mem::take(rows)));
            }
            Node::Project { exprs, .. } if wide(exprs) => {
                out.push(Part::Exprs(std::mem::take(exprs)));
            }
            Node::Append(nodes) if !nodes.is_empty() => {
                out.push(Part::Nodes(std::mem::take(nodes)));
            }
            Node::With { ctes, .. } if !ctes.is_empty() => {
                let plans = std::mem::take(ctes)
                    .into_iter()
                    .map(|mut c| std::mem::replace(&mut c.plan, Node::empty()));
                out.push(Part::Nodes(plans.collect()));
            }
            _ => {}
        }
        let mut node = |n: &mut Node| {
            if !n.is_leaf() {
                out.push(Part::Node(std::mem::replace(n, Node::empty())));
            }
        };
        match self {
            Node::Scan { .. }
            | Node::Relation { .. }
            | Node::Catalog(_)
            | Node::IndexScan { .. }
            | Node::Values(_)
            | Node::FunctionScan { .. }
            | Node::WorkTableScan { .. }
            | Node::CteScan { plan: None, .. }
            | Node::Append(_) => {}
            Node::Filter { input, .. }
            | Node::ProjectSet { input, .. }
            | Node::Project { input, .. }
            | Node::Aggregate { input, .. }
            | Node::WindowAgg { input, .. }
            | Node::Sort { input, .. }
            | Node::Distinct { input, .. }
            | Node::With { input, .. }
            | Node::InitPlan { input, .. }
            | Node::CteScan {
                plan: Some(input), ..
            }
            | Node::Limit { input, .. } => node(input),
            Node::NestedLoop { left, right, .. }
            | Node::HashJoin { left, right, .. }
            | Node::SetOp { left, right, .. }
            | Node::RecursiveUnion {
                base: left,
                step: right,
                ..
            }
            | Node::Join { left, right, .. } => {
                node(left);
                node(right);
            }
        }
        self.for_each_expr_mut(|e| {
            if !e.is_leaf() {
                out.push(Part::Expr(std::mem::replace(e, Expr::Const(Value::Null))));
            }
        });
    }

    /// Calls `f` on each child node, left to right, until it fails.
    pub(crate) fn try_for_each_child(
        &mut self,
        mut f: impl FnMut(&mut Node) -> Result<()>,
    ) -> Result<()> {
        match self {
            Node::Scan { .. }
            | Node::Relation { .. }
            | Node::Catalog(_)
            | Node::IndexScan { .. }
            | Node::Values(_)
            | Node::FunctionScan { .. }
            | Node::WorkTableScan { .. }
            | Node::CteScan { plan: None, .. } => Ok(()),
            Node::Append(nodes) => nodes.iter_mut().try_for_each(f),
            Node::With { ctes, input } => {
                ctes.iter_mut().try_for_each(|c| f(&mut c.plan))?;
                f(input)
            }
            Node::Filter { input, .. }
            | Node::ProjectSet { input, .. }
            | Node::Project { input, .. }
            | Node::Aggregate { input, .. }
            | Node::WindowAgg { input, .. }
            | Node::Sort { input, .. }
            | Node::Distinct { input, .. }
            | Node::InitPlan { input, .. }
            | Node::CteScan {
                plan: Some(input), ..
            }
            | Node::Limit { input, .. } => f(input),
            Node::NestedLoop { left, right, .. }
            | Node::HashJoin { left, right, .. }
            | Node::SetOp { left, right, .. }
            | Node::RecursiveUnion {
                base: left,
                step: right,
                ..
            }
            | Node::Join { left, right, .. } => {
                f(left)?;
                f(right)
            }
        }
    }

    /// Calls `f` on the plan of each subquery in this node's expressions (not in its
    /// children's), until it fails.
    pub(crate) fn try_for_each_subquery(
        &mut self,
        mut f: impl FnMut(&mut Node) -> Result<()>,
    ) -> Result<()> {
        let mut result = Ok(());
        self.for_each_expr_mut(|e| {
            if result.is_ok() {
                result = e.try_for_each_subquery(&mut f);
            }
        });
        result
    }

    /// Calls `f` on each expression of this node (not of its children).
    pub(crate) fn for_each_expr_mut(&mut self, mut f: impl FnMut(&mut Expr)) {
        let mut bound = |b: &mut Bound<Vec<Expr>>| match b {
            Bound::Included(v) | Bound::Excluded(v) => v.iter_mut().for_each(&mut f),
            Bound::Unbounded => {}
        };
        match self {
            Node::Scan { .. }
            | Node::Relation { .. }
            | Node::Catalog(_)
            | Node::Append(_)
            | Node::SetOp { .. }
            | Node::With { .. }
            | Node::InitPlan { .. }
            | Node::CteScan { .. }
            | Node::RecursiveUnion { .. }
            | Node::WorkTableScan { .. } => {}
            Node::Distinct { on, .. } => on.iter_mut().for_each(f),
            Node::IndexScan { lower, upper, .. } => {
                bound(lower);
                bound(upper);
            }
            Node::Values(rows) => rows.iter_mut().flatten().for_each(f),
            Node::FunctionScan { funcs: calls, .. } | Node::ProjectSet { srfs: calls, .. } => {
                calls.iter_mut().flat_map(|c| &mut c.args).for_each(f);
            }
            Node::Filter { pred, .. } => f(pred),
            Node::Project { exprs, .. } => exprs.iter_mut().for_each(f),
            Node::NestedLoop { on, .. } | Node::Join { on, .. } => on.iter_mut().for_each(f),
            Node::HashJoin {
                left_keys,
                right_keys,
                residual,
                ..
            } => {
                left_keys.iter_mut().chain(right_keys).for_each(&mut f);
                residual.iter_mut().for_each(f);
            }
            Node::Aggregate { keys, aggs, .. } => {
                keys.iter_mut().for_each(&mut f);
                for a in aggs {
                    a.args.iter_mut().chain(&mut a.filter).for_each(&mut f);
                    a.order.iter_mut().map(|k| &mut k.expr).for_each(&mut f);
                }
            }
            Node::WindowAgg { window, calls, .. } => {
                window.partition.iter_mut().for_each(&mut f);
                window
                    .order
                    .iter_mut()
                    .map(|k| &mut k.expr)
                    .for_each(&mut f);
                for b in [&mut window.start, &mut window.end] {
                    if let FrameBound::Preceding(e) | FrameBound::Following(e) = b {
                        f(e);
                    }
                }
                for c in calls {
                    c.args.iter_mut().chain(&mut c.filter).for_each(&mut f);
                }
            }
            Node::Sort { keys, .. } => keys.iter_mut().map(|k| &mut k.expr).for_each(f),
            Node::Limit {
                offset,
                count,
                ties,
                ..
            } => offset
                .iter_mut()
                .chain(count)
                .chain(ties.iter_mut().map(|k| &mut k.expr))
                .for_each(f),
        }
    }
}

/// Plans are dropped without recursion, as expressions are ([`crate::nodes::dismantle`]).
impl Drop for Node {
    fn drop(&mut self) {
        if self.is_leaf() {
            return;
        }
        let mut pending = Vec::new();
        self.take_children(&mut pending);
        dismantle(pending);
    }
}

/// The TID of a row as a value (a scan's hidden last column for UPDATE and DELETE).
pub(crate) fn tid_value(tid: Tid) -> Value {
    Value::Int((i64::from(tid.block) << 16) | i64::from(tid.offset))
}

/// The inverse of [`tid_value`].
pub(crate) fn value_tid(v: &Value) -> Result<Tid> {
    match v {
        Value::Int(i) => Ok(Tid::new(
            u32::try_from(i >> 16).map_err(|_| crate::types::internal("tid"))?,
            (i & 0xffff) as u16,
        )),
        _ => Err(crate::types::internal("tid")),
    }
}
