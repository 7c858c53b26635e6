//! Typed expressions and their evaluation. The binder ([`crate::analyze`]) resolves names and
//! types; what reaches here is positional (`Column(i)` of the current row, `Outer(d, i)` of
//! the row `d` query levels out) and every operator already knows its operands' types, so
//! evaluation does no name lookup and no type inference.
//!
//! SQL's three-valued logic: comparisons and most functions are NULL when an operand is
//! NULL; AND and OR follow the truth tables (`false AND NULL` is false); a WHERE clause keeps
//! a row only when its predicate is true.
//!
//! ## Rules
//! - Trees are as deep as clients make them. [`Expr::eval`] checks the stack at each inner
//!   node (`crate::stack`); walks that cannot fail ([`Expr::visit`], [`Expr::rebased`]) are
//!   loops over an explicit stack; an expression is dropped without recursion
//!   ([`dismantle`]). Cloning and `Debug` recurse: an expression is at most a few levels
//!   deeper than the binder's checked recursion that built it, and each of their levels
//!   takes less stack than one of the binder's.
//! - A value built here (`||`, an ARRAY(SELECT ...)) has its length checked first
//!   (`types::check_value_len`, 54000); LIKE and regular expressions check the interrupt as
//!   they go through a long text.

use quire_engine::Value;

use super::plan::Node;
use crate::func::Func;
use crate::types::SqlType;

/// A typed expression.
#[derive(Clone, Debug)]
pub(crate) enum Expr {
    Const(Value),
    /// `$n`, zero-based.
    Param(usize),
    /// A column of the current row.
    Column(usize),
    /// A column of an enclosing query's row: `levels` 1 is the immediately enclosing one
    /// (a correlated subquery's outer row, or a LATERAL item's left side).
    Outer {
        levels: usize,
        column: usize,
    },
    Arith(ArithOp, SqlType, Box<Expr>, Box<Expr>),
    Neg(Box<Expr>),
    /// A comparison; the type is the one both operands were brought to (the planner uses
    /// an index only when it matches the indexed column's).
    Cmp(CmpOp, SqlType, Box<Expr>, Box<Expr>),
    /// `text || text`.
    Concat(Box<Expr>, Box<Expr>),
    /// LIKE (case-insensitive for ILIKE), negated for NOT LIKE.
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        case_insensitive: bool,
        negated: bool,
    },
    /// POSIX regular expression match (`~`, `~*`, `!~`, `!~*`).
    Regex {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        case_insensitive: bool,
        negated: bool,
    },
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
    IsNull(Box<Expr>, bool),
    /// `IS [NOT] TRUE/FALSE` (never NULL).
    IsBool {
        expr: Box<Expr>,
        value: bool,
        negated: bool,
    },
    InList {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
    },
    Case {
        operand: Option<Box<Expr>>,
        whens: Vec<(Expr, Expr)>,
        otherwise: Option<Box<Expr>>,
    },
    Cast(Box<Expr>, SqlType, SqlType),
    Func(Func, Vec<Expr>),
    Subquery(Box<Node>, SubqueryKind),
}

#[derive(Clone, Debug)]
pub(crate) enum SubqueryKind {
    /// `(SELECT x ...)`: its one value, NULL for no row, 21000 for more than one.
    Scalar,
    Exists,
    /// `ARRAY(SELECT ...)`: the first column's values (of this type) as an array.
    Array(SqlType),
    /// `expr [NOT] IN (SELECT ...)`.
    In {
        expr: Box<Expr>,
        negated: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

pub(crate) use crate::types::CmpOp;

impl Expr {
    /// Whether the expression reads the current row (not only constants, parameters and
    /// outer rows): an index key must not.
    pub(crate) fn uses_current_row(&self) -> bool {
        let mut found = false;
        self.visit(&mut |e| {
            if matches!(e, Expr::Column(_) | Expr::Subquery(..)) {
                found = true;
            }
        });
        found
    }

    /// Calls `f` on this expression and each subexpression (not inside subqueries), parents
    /// before children, left to right; a loop, not a recursion.
    pub(crate) fn visit(&self, f: &mut impl FnMut(&Expr)) {
        let mut pending = vec![self];
        while let Some(e) = pending.pop() {
            f(e);
            let first_child = pending.len();
            e.for_each_child(|c| pending.push(c));
            pending[first_child..].reverse();
        }
    }

    /// Whether the expression has no subexpression (and no subquery).
    pub(crate) fn is_leaf(&self) -> bool {
        matches!(
            self,
            Expr::Const(_) | Expr::Param(_) | Expr::Column(_) | Expr::Outer { .. }
        )
    }

    /// Calls `f` on each direct subexpression, left to right (not those inside a subquery).
    pub(crate) fn for_each_child<'a>(&'a self, mut f: impl FnMut(&'a Expr)) {
        match self {
            Expr::Const(_)
            | Expr::Param(_)
            | Expr::Column(_)
            | Expr::Outer { .. }
            | Expr::Subquery(
                _,
                SubqueryKind::Scalar | SubqueryKind::Exists | SubqueryKind::Array(_),
            ) => {}
            Expr::Subquery(_, SubqueryKind::In { expr, .. })
            | Expr::Neg(expr)
            | Expr::Not(expr)
            | Expr::IsNull(expr, _)
            | Expr::Cast(expr, _, _)
            | Expr::IsBool { expr, .. } => f(expr),
            Expr::Arith(_, _, a, b)
            | Expr::Cmp(_, _, a, b)
            | Expr::Concat(a, b)
            | Expr::Like {
                expr: a,
                pattern: b,
                ..
            }
            | Expr::Regex {
                expr: a,
                pattern: b,
                ..
            } => {
                f(a);
                f(b);
            }
            Expr::And(v) | Expr::Or(v) | Expr::Func(_, v) => v.iter().for_each(f),
            Expr::InList { expr, list, .. } => {
                f(expr);
                list.iter().for_each(f);
            }
            Expr::Case {
                operand,
                whens,
                otherwise,
            } => {
                operand.as_deref().into_iter().for_each(&mut f);
                for (w, t) in whens {
                    f(w);
                    f(t);
                }
                otherwise.as_deref().into_iter().for_each(f);
            }
        }
    }

    /// [`Expr::for_each_child`], mutable.
    fn for_each_child_mut<'a>(&'a mut self, mut f: impl FnMut(&'a mut Expr)) {
        match self {
            Expr::Const(_)
            | Expr::Param(_)
            | Expr::Column(_)
            | Expr::Outer { .. }
            | Expr::Subquery(
                _,
                SubqueryKind::Scalar | SubqueryKind::Exists | SubqueryKind::Array(_),
            ) => {}
            Expr::Subquery(_, SubqueryKind::In { expr, .. })
            | Expr::Neg(expr)
            | Expr::Not(expr)
            | Expr::IsNull(expr, _)
            | Expr::Cast(expr, _, _)
            | Expr::IsBool { expr, .. } => f(expr),
            Expr::Arith(_, _, a, b)
            | Expr::Cmp(_, _, a, b)
            | Expr::Concat(a, b)
            | Expr::Like {
                expr: a,
                pattern: b,
                ..
            }
            | Expr::Regex {
                expr: a,
                pattern: b,
                ..
            } => {
                f(a);
                f(b);
            }
            Expr::And(v) | Expr::Or(v) | Expr::Func(_, v) => v.iter_mut().for_each(f),
            Expr::InList { expr, list, .. } => {
                f(expr);
                list.iter_mut().for_each(f);
            }
            Expr::Case {
                operand,
                whens,
                otherwise,
            } => {
                operand.as_deref_mut().into_iter().for_each(&mut f);
                for (w, t) in whens {
                    f(w);
                    f(t);
                }
                otherwise.as_deref_mut().into_iter().for_each(f);
            }
        }
    }

    /// Moves the children that have children of their own (subqueries' plans included) to
    /// `out`, leaving leaves in their place: what [`Drop`] does instead of recursing.
    fn take_children(&mut self, out: &mut Vec<Part>) {
        match self {
            Expr::Subquery(node, _) if !node.is_leaf() => {
                out.push(Part::Node(std::mem::replace(&mut **node, Node::empty())));
            }
            // A list goes whole, its elements taken one at a time: however long.
            Expr::And(v) | Expr::Or(v) | Expr::Func(_, v) | Expr::InList { list: v, .. }
                if v.iter().any(|e| !e.is_leaf()) =>
            {
                out.push(Part::Exprs(std::mem::take(v)));
            }
            _ => {}
        }
        self.for_each_child_mut(|c| {
            if !c.is_leaf() {
                out.push(Part::Expr(std::mem::replace(c, Expr::Const(Value::Null))));
            }
        });
    }

    /// The expression with each current-row column `c` read as column `c - offset` (the
    /// right side of a join evaluated on the right row alone).
    pub(crate) fn rebased(&self, offset: usize) -> Expr {
        let mut e = self.clone();
        e.map_columns(|c| c - offset);
        e
    }

    /// Reads each current-row column `c` as column `f(c)` instead (not inside subqueries).
    pub(crate) fn map_columns(&mut self, f: impl Fn(usize) -> usize) {
        let mut pending = vec![self];
        while let Some(x) = pending.pop() {
            match x {
                Expr::Column(c) => *c = f(*c),
                x => x.for_each_child_mut(|c| pending.push(c)),
            }
        }
    }

    /// The expression with each current-row column `c` read as column `c + offset` (a
    /// join's right side's column in the joined row).
    pub(crate) fn shifted(&self, offset: usize) -> Expr {
        let mut e = self.clone();
        let mut pending = vec![&mut e];
        while let Some(x) = pending.pop() {
            match x {
                Expr::Column(c) => *c += offset,
                x => x.for_each_child_mut(|c| pending.push(c)),
            }
        }
        e
    }

    /// The expression as seen from `levels` query levels further in: each current-row
    /// column becomes that outer row's, and each outer reference reaches `levels` further.
    pub(crate) fn as_outer(&self, levels: usize) -> Expr {
        let mut e = self.clone();
        let mut pending = vec![&mut e];
        while let Some(x) = pending.pop() {
            match x {
                Expr::Column(c) => *x = Expr::Outer { levels, column: *c },
                Expr::Outer { levels: l, .. } => *l += levels,
                x => x.for_each_child_mut(|c| pending.push(c)),
            }
        }
        e
    }

    /// Calls `f` on the plan of each subquery in the expression (not inside those plans),
    /// until it fails; a loop over the expression, not a recursion.
    pub(crate) fn try_for_each_subquery(
        &mut self,
        f: &mut impl FnMut(&mut Node) -> crate::error::Result<()>,
    ) -> crate::error::Result<()> {
        let mut pending = vec![self];
        while let Some(e) = pending.pop() {
            if let Expr::Subquery(node, _) = e {
                f(node)?;
            }
            e.for_each_child_mut(|c| pending.push(c));
        }
        Ok(())
    }

    /// Whether the expression contains a subquery.
    pub(crate) fn uses_subquery(&self) -> bool {
        let mut found = false;
        self.visit(&mut |e| found |= matches!(e, Expr::Subquery(..)));
        found
    }

    /// The current-row columns the expression reads (not inside subqueries).
    pub(crate) fn columns(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.visit(&mut |e| {
            if let Expr::Column(c) = e {
                out.push(*c);
            }
        });
        out
    }
}

/// The conjuncts of a predicate (`a AND b AND c`).
pub(crate) fn conjuncts(e: &Expr) -> Vec<&Expr> {
    let mut out = Vec::new();
    let mut pending = vec![e];
    while let Some(x) = pending.pop() {
        match x {
            Expr::And(v) => pending.extend(v.iter().rev()),
            x => out.push(x),
        }
    }
    out
}

/// `a AND b AND ...`, or `None` for no conjunct.
pub(crate) fn and_of(mut conjuncts: Vec<Expr>) -> Option<Expr> {
    match conjuncts.len() {
        0 => None,
        1 => conjuncts.pop(),
        _ => Some(Expr::And(conjuncts)),
    }
}

/// A part of a tree being taken apart ([`dismantle`]): a node, or a list of them (taken
/// one at a time, so that the explicit stack stays as small as the tree is deep, however
/// wide it is).
#[allow(clippy::large_enum_variant)] // a few at a time, on the dismantling stack
pub(crate) enum Part {
    Expr(Expr),
    Node(Node),
    Exprs(Vec<Expr>),
    Rows(Vec<Vec<Expr>>),
    Nodes(Vec<Node>),
}

/// Drops trees without recursion: each part's children that have children are moved onto
/// an explicit stack before the part itself drops, so every drop that runs is of a node
/// whose children are leaves. Trees are as deep as clients make them; the thread's stack
/// is not. Returns the most parts that waited at once (as deep as the tree, not as wide).
pub(crate) fn dismantle(mut pending: Vec<Part>) -> usize {
    let mut most = pending.len();
    while let Some(part) = pending.pop() {
        match part {
            Part::Expr(mut e) => e.take_children(&mut pending),
            Part::Node(mut n) => n.take_children(&mut pending),
            Part::Exprs(mut v) => {
                if let Some(e) = v.pop() {
                    pending.push(Part::Exprs(v));
                    pending.push(Part::Expr(e));
                }
            }
            Part::Rows(mut rows) => {
                if let Some(row) = rows.pop() {
                    pending.push(Part::Rows(rows));
                    pending.push(Part::Exprs(row));
                }
            }
            Part::Nodes(mut v) => {
                if let Some(n) = v.pop() {
                    pending.push(Part::Nodes(v));
                    pending.push(Part::Node(n));
                }
            }
        }
        most = most.max(pending.len());
    }
    most
}

impl Drop for Expr {
    fn drop(&mut self) {
        if self.is_leaf() {
            return;
        }
        let mut pending = Vec::new();
        self.take_children(&mut pending);
        dismantle(pending);
    }
}
