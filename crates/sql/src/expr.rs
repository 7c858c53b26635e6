//! Typed expressions and their evaluation. The binder ([`crate::bind`]) resolves names and
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

use std::cmp::Ordering;

use quire_engine::{Database, SqlState, Transaction, Value};

use crate::error::{Result, SqlError};
use crate::func::Func;
use crate::interrupt::Interrupt;
use crate::plan::{self, Node};
use crate::session::Settings;
use crate::types::{self, SqlType};

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
    /// `ARRAY(SELECT ...)`: the first column's values as a `text[]`.
    Array,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    fn holds(self, o: Ordering) -> bool {
        match self {
            CmpOp::Eq => o.is_eq(),
            CmpOp::Ne => o.is_ne(),
            CmpOp::Lt => o.is_lt(),
            CmpOp::Le => o.is_le(),
            CmpOp::Gt => o.is_gt(),
            CmpOp::Ge => o.is_ge(),
        }
    }

    /// The operator with its operands swapped (`a < b` is `b > a`).
    pub(crate) fn flip(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            op => op,
        }
    }
}

/// The rows of the enclosing query levels, innermost first (a linked list on the stack:
/// a subquery pushes its outer row for the time it runs).
#[derive(Clone, Copy)]
pub(crate) struct Frame<'a> {
    pub row: &'a [Value],
    pub up: Option<&'a Frame<'a>>,
}

/// What a statement's expressions are evaluated against.
pub(crate) struct Cx<'a> {
    pub db: &'a Database,
    pub tx: &'a Transaction,
    pub params: &'a [Value],
    pub settings: &'a Settings,
    pub interrupt: &'a crate::interrupt::Interrupt,
    /// The session as the registry of sessions knows it (`pg_backend_pid`, signals).
    pub backend: &'a crate::backends::Backend,
    /// The session's `currval` values.
    pub sequences: &'a crate::sequence::SessionSequences,
    /// The statement's start (`now()`, `CURRENT_TIMESTAMP`), microseconds since 1970.
    pub now_us: i64,
    pub outer: Option<&'a Frame<'a>>,
}

impl<'a> Cx<'a> {
    /// The same context with `row` as the innermost outer row (for a subquery or the right
    /// side of a LATERAL join).
    pub(crate) fn nested<'b>(&'b self, frame: &'b Frame<'b>) -> Cx<'b>
    where
        'a: 'b,
    {
        Cx {
            db: self.db,
            tx: self.tx,
            params: self.params,
            settings: self.settings,
            interrupt: self.interrupt,
            backend: self.backend,
            sequences: self.sequences,
            now_us: self.now_us,
            outer: Some(frame),
        }
    }
}

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
    fn for_each_child<'a>(&'a self, mut f: impl FnMut(&'a Expr)) {
        match self {
            Expr::Const(_)
            | Expr::Param(_)
            | Expr::Column(_)
            | Expr::Outer { .. }
            | Expr::Subquery(
                _,
                SubqueryKind::Scalar | SubqueryKind::Exists | SubqueryKind::Array,
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
                SubqueryKind::Scalar | SubqueryKind::Exists | SubqueryKind::Array,
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
        let mut pending = vec![&mut e];
        while let Some(x) = pending.pop() {
            match x {
                Expr::Column(c) => *c -= offset,
                x => x.for_each_child_mut(|c| pending.push(c)),
            }
        }
        e
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

    pub(crate) fn eval(&self, cx: &Cx, row: &[Value]) -> Result<Value> {
        if !self.is_leaf() {
            crate::stack::check_stack_depth()?;
        }
        Ok(match self {
            Expr::Const(v) => v.clone(),
            Expr::Param(n) => cx.params.get(*n).cloned().ok_or_else(|| {
                SqlError::new(
                    SqlState::PROTOCOL_VIOLATION,
                    format!("no value for parameter ${}", n + 1),
                )
            })?,
            Expr::Column(c) => row.get(*c).cloned().ok_or_else(|| internal("column"))?,
            Expr::Outer { levels, column } => outer_value(cx, *levels, *column)?,
            Expr::Arith(op, ty, l, r) => arith(*op, *ty, l.eval(cx, row)?, r.eval(cx, row)?)?,
            Expr::Neg(inner) => match inner.eval(cx, row)? {
                Value::Int(i) => Value::Int(i.checked_neg().ok_or_else(out_of_range)?),
                Value::Float(f) => Value::Float(-f),
                Value::Numeric(n) => Value::Numeric(crate::numeric::negate(&n)?),
                v => v,
            },
            Expr::Cmp(op, _, l, r) => {
                let (l, r) = (l.eval(cx, row)?, r.eval(cx, row)?);
                if l.is_null() || r.is_null() {
                    Value::Null
                } else {
                    Value::Bool(op.holds(compare(&l, &r)))
                }
            }
            Expr::Concat(l, r) => match (l.eval(cx, row)?, r.eval(cx, row)?) {
                (Value::Text(a), Value::Text(b)) => {
                    types::check_value_len(a.len().saturating_add(b.len()))?;
                    Value::Text(a + &b)
                }
                (Value::Null, _) | (_, Value::Null) => Value::Null,
                _ => return Err(internal("|| operands")),
            },
            Expr::Like {
                expr,
                pattern,
                case_insensitive,
                negated,
            } => match (expr.eval(cx, row)?, pattern.eval(cx, row)?) {
                (Value::Text(s), Value::Text(p)) => {
                    Value::Bool(like(&s, &p, *case_insensitive, cx.interrupt)? != *negated)
                }
                _ => Value::Null,
            },
            Expr::Regex {
                expr,
                pattern,
                case_insensitive,
                negated,
            } => match (expr.eval(cx, row)?, pattern.eval(cx, row)?) {
                (Value::Text(s), Value::Text(p)) => {
                    Value::Bool(regex_match(&s, &p, *case_insensitive, cx.interrupt)? != *negated)
                }
                _ => Value::Null,
            },
            Expr::And(v) => and(v, cx, row)?,
            Expr::Or(v) => or(v, cx, row)?,
            Expr::Not(e) => match e.eval(cx, row)? {
                Value::Bool(b) => Value::Bool(!b),
                _ => Value::Null,
            },
            Expr::IsNull(e, negated) => Value::Bool(e.eval(cx, row)?.is_null() != *negated),
            Expr::IsBool {
                expr,
                value,
                negated,
            } => {
                let is = matches!(expr.eval(cx, row)?, Value::Bool(b) if b == *value);
                Value::Bool(is != *negated)
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => in_list(&expr.eval(cx, row)?, list, *negated, cx, row)?,
            Expr::Case {
                operand,
                whens,
                otherwise,
            } => case(operand.as_deref(), whens, otherwise.as_deref(), cx, row)?,
            Expr::Cast(e, from, to) => cast(e.eval(cx, row)?, *from, *to, cx)?,
            Expr::Func(f, args) => {
                let values = args
                    .iter()
                    .map(|e| e.eval(cx, row))
                    .collect::<Result<Vec<_>>>()?;
                f.call(values, cx)?
            }
            Expr::Subquery(node, kind) => subquery(node, kind, cx, row)?,
        })
    }

    /// Whether the predicate holds (true, not false or NULL).
    pub(crate) fn holds(&self, cx: &Cx, row: &[Value]) -> Result<bool> {
        Ok(matches!(self.eval(cx, row)?, Value::Bool(true)))
    }
}

/// A part of a tree being taken apart ([`dismantle`]): a node, or a list of them (taken
/// one at a time, so that the explicit stack stays as small as the tree is deep, however
/// wide it is).
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

fn outer_value(cx: &Cx, levels: usize, column: usize) -> Result<Value> {
    let mut frame = cx.outer.ok_or_else(|| internal("outer row"))?;
    for _ in 1..levels {
        frame = frame.up.ok_or_else(|| internal("outer row"))?;
    }
    frame
        .row
        .get(column)
        .cloned()
        .ok_or_else(|| internal("outer column"))
}

fn and(v: &[Expr], cx: &Cx, row: &[Value]) -> Result<Value> {
    let mut unknown = false;
    for e in v {
        match e.eval(cx, row)? {
            Value::Bool(false) => return Ok(Value::Bool(false)),
            Value::Bool(true) => {}
            _ => unknown = true,
        }
    }
    Ok(if unknown {
        Value::Null
    } else {
        Value::Bool(true)
    })
}

fn or(v: &[Expr], cx: &Cx, row: &[Value]) -> Result<Value> {
    let mut unknown = false;
    for e in v {
        match e.eval(cx, row)? {
            Value::Bool(true) => return Ok(Value::Bool(true)),
            Value::Bool(false) => {}
            _ => unknown = true,
        }
    }
    Ok(if unknown {
        Value::Null
    } else {
        Value::Bool(false)
    })
}

/// `v IN (values)` with SQL's NULL rules: true on a match, NULL if no match but a NULL
/// was involved, false otherwise.
fn in_values<'v>(v: &Value, values: impl Iterator<Item = &'v Value>, negated: bool) -> Value {
    if v.is_null() {
        return Value::Null;
    }
    let mut unknown = false;
    for x in values {
        if x.is_null() {
            unknown = true;
        } else if compare(v, x).is_eq() {
            return Value::Bool(!negated);
        }
    }
    if unknown {
        Value::Null
    } else {
        Value::Bool(negated)
    }
}

/// `v IN (list)`, each element evaluated only until one matches (a list may hold millions
/// of constants: none is copied, and an interrupt is checked as it goes).
fn in_list(v: &Value, list: &[Expr], negated: bool, cx: &Cx, row: &[Value]) -> Result<Value> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let mut unknown = false;
    for (i, e) in list.iter().enumerate() {
        if i % MATCH_STEPS_PER_CHECK == MATCH_STEPS_PER_CHECK - 1 {
            cx.interrupt.check()?;
        }
        let x = match e {
            Expr::Const(x) => std::borrow::Cow::Borrowed(x),
            e => std::borrow::Cow::Owned(e.eval(cx, row)?),
        };
        if x.is_null() {
            unknown = true;
        } else if compare(v, &x).is_eq() {
            return Ok(Value::Bool(!negated));
        }
    }
    Ok(if unknown {
        Value::Null
    } else {
        Value::Bool(negated)
    })
}

fn case(
    operand: Option<&Expr>,
    whens: &[(Expr, Expr)],
    otherwise: Option<&Expr>,
    cx: &Cx,
    row: &[Value],
) -> Result<Value> {
    let subject = operand.map(|o| o.eval(cx, row)).transpose()?;
    for (when, then) in whens {
        let hit = match &subject {
            Some(s) => {
                let w = when.eval(cx, row)?;
                !s.is_null() && !w.is_null() && compare(s, &w).is_eq()
            }
            None => when.holds(cx, row)?,
        };
        if hit {
            return then.eval(cx, row);
        }
    }
    otherwise.map_or(Ok(Value::Null), |o| o.eval(cx, row))
}

/// Casts that need the catalog (an oid shown as a relation or type name) happen here;
/// the rest are [`types::cast`].
fn cast(v: Value, from: SqlType, to: SqlType, cx: &Cx) -> Result<Value> {
    match (&v, from, to) {
        (Value::Int(oid), SqlType::Regclass, t) if t.is_text() => {
            let oid = u32::try_from(*oid).unwrap_or(0);
            Ok(Value::Text(
                crate::pg_catalog::relation_name(cx.tx, oid)?.unwrap_or_else(|| oid.to_string()),
            ))
        }
        (Value::Int(oid), SqlType::Regtype, t) if t.is_text() => {
            let oid = u32::try_from(*oid).unwrap_or(0);
            Ok(Value::Text(
                SqlType::from_oid(oid).map_or_else(|| oid.to_string(), SqlType::name),
            ))
        }
        (Value::Int(oid), SqlType::Regnamespace, t) if t.is_text() => Ok(Value::Text(
            crate::pg_catalog::namespace_name(*oid).unwrap_or_else(|| oid.to_string()),
        )),
        (Value::Text(name), f, SqlType::Regclass) if f.is_text() => {
            let oid = crate::pg_catalog::relation_oid(cx.tx, name)?.ok_or_else(|| {
                SqlError::new(
                    SqlState::UNDEFINED_TABLE,
                    format!("relation \"{name}\" does not exist"),
                )
            })?;
            Ok(Value::Int(i64::from(oid)))
        }
        (Value::Text(name), f, SqlType::Regtype) if f.is_text() => {
            let ty = SqlType::from_name(name.trim()).ok_or_else(|| {
                SqlError::new(
                    SqlState::UNDEFINED_OBJECT,
                    format!("type \"{name}\" does not exist"),
                )
            })?;
            Ok(Value::Int(i64::from(ty.oid())))
        }
        _ => types::cast(v, from, to),
    }
}

fn subquery(node: &Node, kind: &SubqueryKind, cx: &Cx, row: &[Value]) -> Result<Value> {
    let frame = Frame { row, up: cx.outer };
    let inner = cx.nested(&frame);
    match kind {
        SubqueryKind::Exists => {
            let mut rows = plan::open(node, &inner)?;
            Ok(Value::Bool(rows.next().transpose()?.is_some()))
        }
        SubqueryKind::Scalar => {
            let mut rows = plan::open(node, &inner)?;
            let Some(first) = rows.next().transpose()? else {
                return Ok(Value::Null);
            };
            if rows.next().transpose()?.is_some() {
                return Err(SqlError::new(
                    SqlState::CARDINALITY_VIOLATION,
                    "more than one row returned by a subquery used as an expression",
                ));
            }
            Ok(first.into_iter().next().unwrap_or(Value::Null))
        }
        SubqueryKind::Array => {
            let mut text = crate::func::ArrayText::new();
            for r in plan::open(node, &inner)? {
                let v = r?.into_iter().next().unwrap_or(Value::Null);
                let ty = v.type_of().map_or(SqlType::Text, SqlType::of_engine_type);
                text.push(&types::format_text(&v, ty).unwrap_or_else(|| "NULL".into()))?;
            }
            Ok(Value::Text(text.finish()))
        }
        SubqueryKind::In { expr, negated } => {
            let v = expr.eval(cx, row)?;
            let values: Vec<Value> = plan::open(node, &inner)?
                .map(|r| r.map(|r| r.into_iter().next().unwrap_or(Value::Null)))
                .collect::<Result<_>>()?;
            Ok(in_values(&v, values.iter(), *negated))
        }
    }
}

/// Values compared the way SQL compares them: integers and floats numerically, text by
/// bytes (quire's one collation is C), NULLs last (only ORDER BY sees them here).
pub(crate) fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Int(x), Value::Float(y)) => (*x as f64).total_cmp(y),
        (Value::Float(x), Value::Int(y)) => x.total_cmp(&(*y as f64)),
        _ => a.compare(b),
    }
}

pub(crate) fn internal(what: &str) -> SqlError {
    SqlError::internal(format_args!("bad {what} in a bound plan"))
}

fn out_of_range_of(ty: SqlType) -> SqlError {
    let name = match ty {
        SqlType::Int2 => "smallint",
        SqlType::Int4 => "integer",
        _ => "bigint",
    };
    SqlError::new(
        SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
        format!("{name} out of range"),
    )
}

fn out_of_range() -> SqlError {
    out_of_range_of(SqlType::Int8)
}

fn division_by_zero() -> SqlError {
    SqlError::new(SqlState::DIVISION_BY_ZERO, "division by zero")
}

/// Arithmetic on two values; `ty` is the result type the binder chose (its range is
/// checked, as PostgreSQL's `int4pl` checks int4's).
pub(crate) fn arith(op: ArithOp, ty: SqlType, left: Value, right: Value) -> Result<Value> {
    Ok(match (left, right) {
        (Value::Null, _) | (_, Value::Null) => Value::Null,
        (Value::Numeric(a), Value::Numeric(b)) => {
            use crate::numeric::Op;
            let op = match op {
                ArithOp::Add => Op::Add,
                ArithOp::Sub => Op::Sub,
                ArithOp::Mul => Op::Mul,
                ArithOp::Div => Op::Div,
                ArithOp::Mod => Op::Mod,
            };
            Value::Numeric(crate::numeric::arith(op, &a, &b)?)
        }
        (Value::Int(a), Value::Int(b)) if !ty.is_float() => {
            if b == 0 && matches!(op, ArithOp::Div | ArithOp::Mod) {
                return Err(division_by_zero());
            }
            let v = match op {
                ArithOp::Add => a.checked_add(b),
                ArithOp::Sub => a.checked_sub(b),
                ArithOp::Mul => a.checked_mul(b),
                ArithOp::Div => a.checked_div(b),
                ArithOp::Mod => a.checked_rem(b),
            }
            .ok_or_else(|| out_of_range_of(ty))?;
            if ty.is_int() {
                types::check_int_range(v, ty).map_err(|_| out_of_range_of(ty))?
            } else {
                Value::Int(v)
            }
        }
        (Value::Timestamp(t), Value::Int(days)) if ty == SqlType::Timestamp => {
            let us = days.checked_mul(86_400_000_000).ok_or_else(out_of_range)?;
            Value::Timestamp(
                match op {
                    ArithOp::Add => t.checked_add(us),
                    ArithOp::Sub => t.checked_sub(us),
                    _ => None,
                }
                .ok_or_else(out_of_range)?,
            )
        }
        (lv, rv) => {
            let (Some(x), Some(y)) = (as_f64(&lv), as_f64(&rv)) else {
                return Err(internal("arithmetic operands"));
            };
            Value::Float(match op {
                ArithOp::Add => x + y,
                ArithOp::Sub => x - y,
                ArithOp::Mul => x * y,
                ArithOp::Div if y == 0.0 => return Err(division_by_zero()),
                ArithOp::Div => x / y,
                ArithOp::Mod => {
                    return Err(SqlError::new(
                        SqlState::UNDEFINED_FUNCTION,
                        "operator does not exist: double precision % double precision",
                    ))
                }
            })
        }
    })
}

pub(crate) fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        Value::Numeric(n) => Some(crate::numeric::to_f64(n)),
        _ => None,
    }
}

/// Steps of a matching loop (LIKE's, a regular expression's) between two interrupt checks.
const MATCH_STEPS_PER_CHECK: usize = 1 << 16;

/// SQL LIKE: `%` any run, `_` one character, `\` escapes the next.
fn like(s: &str, pattern: &str, case_insensitive: bool, interrupt: &Interrupt) -> Result<bool> {
    if pattern.ends_with('\\') && pattern.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
    {
        return Err(like_escape_error());
    }
    if case_insensitive {
        like_match(&s.to_lowercase(), &pattern.to_lowercase(), interrupt)
    } else {
        like_match(s, pattern, interrupt)
    }
}

fn like_escape_error() -> SqlError {
    SqlError::new(
        SqlState::INVALID_ESCAPE_SEQUENCE,
        "LIKE pattern must not end with escape character",
    )
}

/// The bytes of the UTF-8 character whose first byte is `lead`.
fn utf8_len(lead: u8) -> usize {
    match lead {
        0..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

/// LIKE's matching over the texts' bytes (a character compared as its UTF-8 bytes, `_`
/// taking one character), iterative with one backtrack point per `%`: no recursion, no
/// copy of the text, and an interrupt check every [`MATCH_STEPS_PER_CHECK`] steps (the
/// backtracking makes it quadratic at worst).
fn like_match(s: &str, p: &str, interrupt: &Interrupt) -> Result<bool> {
    let (s, p) = (s.as_bytes(), p.as_bytes());
    let (mut si, mut pi) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    let mut steps = 0usize;
    while si < s.len() {
        steps += 1;
        if steps.is_multiple_of(MATCH_STEPS_PER_CHECK) {
            interrupt.check()?;
        }
        let advanced = match p.get(pi) {
            Some(b'%') => {
                star = Some((pi, si));
                pi += 1;
                continue;
            }
            Some(b'_') => {
                si += utf8_len(s[si]);
                pi += 1;
                continue;
            }
            Some(b'\\') => {
                let lead = *p.get(pi + 1).ok_or_else(like_escape_error)?;
                let c = p.get(pi + 1..pi + 1 + utf8_len(lead)).unwrap_or_default();
                s[si..].starts_with(c).then(|| {
                    si += c.len();
                    pi += 1 + c.len();
                })
            }
            Some(&lead) => {
                let c = p.get(pi..pi + utf8_len(lead)).unwrap_or_default();
                s[si..].starts_with(c).then(|| {
                    si += c.len();
                    pi += c.len();
                })
            }
            None => None,
        };
        if advanced.is_some() {
            continue;
        }
        match star {
            Some((sp, ss)) => {
                let next = ss + utf8_len(s[ss]);
                pi = sp + 1;
                si = next;
                star = Some((sp, next));
            }
            None => return Ok(false),
        }
    }
    Ok(p[pi..].iter().all(|&c| c == b'%'))
}

/// The longest pattern a regular expression may have: patterns come from clients, and a
/// compiled regex's size grows with its pattern.
const MAX_REGEX_PATTERN_BYTES: usize = 10_000;
/// Memory for a pattern's compiled automaton and for its lazy DFA's states.
const REGEX_NFA_BYTES: usize = 1 << 20;
const REGEX_CACHE_BYTES: usize = 2 << 20;

/// `s ~ pattern`: a lazy DFA walked a byte at a time, the interrupt checked every
/// [`MATCH_STEPS_PER_CHECK`] bytes, so that a match over a large text can be stopped. A
/// pattern the DFA cannot take (a Unicode word boundary) is matched by `regex_lite` in one
/// call, which nothing interrupts.
fn regex_match(
    s: &str,
    pattern: &str,
    case_insensitive: bool,
    interrupt: &Interrupt,
) -> Result<bool> {
    use regex_automata::{hybrid::dfa::DFA, nfa::thompson, util::syntax};
    if pattern.len() > MAX_REGEX_PATTERN_BYTES {
        return Err(SqlError::new(
            SqlState::INVALID_REGULAR_EXPRESSION,
            "invalid regular expression: pattern too long",
        ));
    }
    let dfa = DFA::builder()
        .syntax(syntax::Config::new().case_insensitive(case_insensitive))
        .thompson(thompson::Config::new().nfa_size_limit(Some(REGEX_NFA_BYTES)))
        .configure(
            DFA::config()
                .cache_capacity(REGEX_CACHE_BYTES)
                .minimum_cache_clear_count(None),
        )
        .build(pattern);
    if let Ok(dfa) = dfa {
        if let Some(found) = dfa_is_match(&dfa, s.as_bytes(), interrupt)? {
            return Ok(found);
        }
    }
    let re = regex_lite::RegexBuilder::new(pattern)
        .case_insensitive(case_insensitive)
        .size_limit(REGEX_NFA_BYTES)
        .build()
        .map_err(|e| {
            SqlError::new(
                SqlState::INVALID_REGULAR_EXPRESSION,
                format!("invalid regular expression: {e}"),
            )
        })?;
    Ok(re.is_match(s))
}

/// Whether `dfa` matches somewhere in `hay`; `None` if the DFA gave up (it cannot decide
/// with what it was built with).
fn dfa_is_match(
    dfa: &regex_automata::hybrid::dfa::DFA,
    hay: &[u8],
    interrupt: &Interrupt,
) -> Result<Option<bool>> {
    let mut cache = dfa.create_cache();
    let Ok(mut sid) = dfa.start_state_forward(&mut cache, &regex_automata::Input::new(hay)) else {
        return Ok(None);
    };
    for (i, &b) in hay.iter().enumerate() {
        if i % MATCH_STEPS_PER_CHECK == MATCH_STEPS_PER_CHECK - 1 {
            interrupt.check()?;
        }
        let Ok(next) = dfa.next_state(&mut cache, sid, b) else {
            return Ok(None);
        };
        sid = next;
        if sid.is_tagged() {
            if sid.is_match() {
                return Ok(Some(true));
            }
            if sid.is_dead() {
                return Ok(Some(false));
            }
            if sid.is_quit() {
                return Ok(None);
            }
        }
    }
    Ok(dfa
        .next_eoi_state(&mut cache, sid)
        .ok()
        .map(|sid| sid.is_match()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(s: &str, p: &str) -> bool {
        like(s, p, false, &Interrupt::default()).unwrap()
    }

    #[test]
    fn like_matches_percent_underscore_and_escapes() {
        assert!(l("pgbench_accounts", "pgbench%"));
        assert!(l("abc", "a_c"));
        assert!(!l("abc", "a_"));
        assert!(l("a%c", "a\\%c"));
        assert!(!l("abc", "a\\%c"));
        assert!(l("", "%"));
        assert!(l("xaaay", "x%a%y"));
        assert!(!l("xaaaz", "x%a%y"));
        let none = Interrupt::default();
        assert!(like("ABC", "a%", true, &none).unwrap());
        assert_eq!(
            like("a", "a\\", false, &none).unwrap_err().sqlstate(),
            "22025"
        );
        assert!(l("héllo wörld", "h_llo w%d"));
        assert!(!l("héllo", "h_lo"));
        assert!(l("a\\b", "a\\\\b"));
    }

    /// Trees far deeper than a small stack could drop by recursion go without harm: a
    /// million nested expressions and a hundred thousand nested plan nodes (each holding an
    /// expression with a subquery) on a thread of 256 KiB.
    #[test]
    fn deep_trees_drop_without_recursion() {
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(|| {
                let mut e = Expr::Column(0);
                for i in 0..1_000_000 {
                    e = match i % 3 {
                        0 => Expr::Neg(Box::new(e)),
                        1 => Expr::Func(Func::Abs, vec![e, Expr::Param(1)]),
                        _ => Expr::Arith(
                            ArithOp::Add,
                            SqlType::Int8,
                            Box::new(e),
                            Box::new(Expr::Param(0)),
                        ),
                    };
                }
                drop(e);
                let mut n = Node::empty();
                for _ in 0..100_000 {
                    let pred = Expr::Subquery(
                        Box::new(Node::Values(vec![vec![Expr::Param(0)]])),
                        SubqueryKind::Exists,
                    );
                    n = Node::Filter {
                        input: Box::new(n),
                        pred: Expr::Not(Box::new(pred)),
                    };
                }
                let deep_subqueries = (0..100_000).fold(Expr::Param(0), |e, _| {
                    Expr::Subquery(
                        Box::new(Node::Project {
                            input: Box::new(Node::empty()),
                            exprs: vec![e],
                        }),
                        SubqueryKind::Scalar,
                    )
                });
                // Wide, too: a VALUES of a million rows each with an inner expression
                // (a column's DEFAULT), under an APPEND of as many inputs.
                let row = || vec![Expr::Neg(Box::new(Expr::Param(0))), Expr::Param(1)];
                let values = Node::Values((0..1_000_000).map(|_| row()).collect());
                let mut append = Node::Append(vec![
                    values,
                    Node::Project {
                        input: Box::new(Node::empty()),
                        exprs: (0..100_000)
                            .map(|_| Expr::Not(Box::new(Expr::Param(0))))
                            .collect(),
                    },
                ]);
                let mut pending = Vec::new();
                append.take_children(&mut pending);
                let most = dismantle(pending);
                assert!(most < 10, "{most} parts waited at once");
                drop((n, deep_subqueries));
            })
            .unwrap()
            .join()
            .expect("dropped without overflowing 256 KiB");
    }

    #[test]
    fn in_lists_follow_sql_null_rules() {
        let one = Value::Int(1);
        let vals = [Value::Int(2), Value::Null];
        assert_eq!(in_values(&one, vals.iter(), false), Value::Null);
        let vals = [Value::Int(1), Value::Null];
        assert_eq!(in_values(&one, vals.iter(), false), Value::Bool(true));
        let vals = [Value::Int(2)];
        assert_eq!(in_values(&one, vals.iter(), true), Value::Bool(true));
    }

    #[test]
    fn arithmetic_checks_the_result_type_range() {
        let e = arith(
            ArithOp::Add,
            SqlType::Int4,
            Value::Int(i64::from(i32::MAX)),
            Value::Int(1),
        )
        .unwrap_err();
        assert_eq!(e.message(), "integer out of range");
        assert_eq!(
            arith(ArithOp::Div, SqlType::Int4, Value::Int(1), Value::Int(0))
                .unwrap_err()
                .sqlstate(),
            "22012"
        );
        assert_eq!(
            arith(
                ArithOp::Div,
                SqlType::Float8,
                Value::Int(1),
                Value::Float(4.0)
            )
            .unwrap(),
            Value::Float(0.25)
        );
    }
}
