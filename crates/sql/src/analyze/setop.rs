//! Set operations: UNION, INTERSECT and EXCEPT, each [ALL]. `sqlparser` gives INTERSECT
//! its higher precedence and keeps parentheses as nesting.
//!
//! ## Rules
//! - Both sides have as many columns (42601 otherwise); each column's type is the common
//!   type of both sides' (PostgreSQL's select_common_type: an untyped literal takes the
//!   other side's type, integer and numeric give numeric; 42804 when there is none), and a
//!   side whose type differs is cast to it. Column names are the left side's.
//! - UNION ALL appends; UNION keeps the first of equal rows; INTERSECT and EXCEPT are
//!   [`Node::SetOp`].

use quire_engine::SqlState;
use sqlparser::ast::{SetExpr, SetOperator, SetQuantifier};

use super::{Binder, OutColumn};
use crate::error::{Result, SqlError};
use crate::func::unify;
use crate::nodes::{Expr, Node, SetOpKind};
use crate::types::SqlType;

/// The name PostgreSQL's messages give a set operation.
fn op_name(op: SetOperator) -> &'static str {
    match op {
        SetOperator::Intersect => "INTERSECT",
        SetOperator::Except | SetOperator::Minus => "EXCEPT",
        SetOperator::Union => "UNION",
    }
}

impl Binder<'_> {
    /// `left op right`.
    pub(super) fn set_operation(
        &mut self,
        left: &SetExpr,
        op: SetOperator,
        quantifier: SetQuantifier,
        right: &SetExpr,
    ) -> Result<(Node, Vec<OutColumn>)> {
        let all = match quantifier {
            SetQuantifier::All => true,
            SetQuantifier::None | SetQuantifier::Distinct => false,
            other => return Err(SqlError::unsupported(format!("{op} {other}"))),
        };
        let (l, lout) = self.set_expr(left)?;
        let (r, rout) = self.set_expr(right)?;
        let (l, r, out) = self.unify_sides(op_name(op), (l, lout), (r, &rout))?;
        let node = match op {
            SetOperator::Union if all => Node::Append(vec![l, r]),
            SetOperator::Union => Node::Distinct {
                input: Box::new(Node::Append(vec![l, r])),
                on: Vec::new(),
            },
            SetOperator::Intersect | SetOperator::Except => Node::SetOp {
                op: if op == SetOperator::Intersect {
                    SetOpKind::Intersect
                } else {
                    SetOpKind::Except
                },
                all,
                left: Box::new(l),
                right: Box::new(r),
            },
            other @ SetOperator::Minus => return Err(SqlError::unsupported(format!("{other}"))),
        };
        Ok((node, out))
    }

    /// Both sides of a set operation brought to their columns' common types; the output
    /// columns (the left side's names).
    pub(super) fn unify_sides(
        &mut self,
        what: &str,
        (l, mut out): (Node, Vec<OutColumn>),
        (r, rout): (Node, &[OutColumn]),
    ) -> Result<(Node, Node, Vec<OutColumn>)> {
        if out.len() != rout.len() {
            return Err(SqlError::syntax(format!(
                "each {what} query must have the same number of columns"
            )));
        }
        let ltypes: Vec<SqlType> = out.iter().map(|c| c.ty).collect();
        let rtypes: Vec<SqlType> = rout.iter().map(|c| c.ty).collect();
        let mut common = Vec::with_capacity(out.len());
        for (&a, &b) in ltypes.iter().zip(&rtypes) {
            common.push(unify(a, b).ok_or_else(|| {
                SqlError::new(
                    SqlState::DATATYPE_MISMATCH,
                    format!(
                        "{what} types {} and {} cannot be matched",
                        a.name(),
                        b.name()
                    ),
                )
            })?);
        }
        let l = self.cast_columns(l, &ltypes, &common)?;
        let r = self.cast_columns(r, &rtypes, &common)?;
        for (c, ty) in out.iter_mut().zip(common) {
            c.ty = ty;
        }
        Ok((l, r, out))
    }

    /// `node`'s columns of types `from` brought to types `to`: in its projection when it
    /// is one (an untyped literal is then read as its type at once), else by one above it.
    pub(super) fn cast_columns(
        &mut self,
        node: Node,
        from: &[SqlType],
        to: &[SqlType],
    ) -> Result<Node> {
        if from == to {
            return Ok(node);
        }
        let mut node = node;
        let (input, exprs) = match &mut node {
            Node::Project { input, exprs } if exprs.len() == from.len() => (
                std::mem::replace(&mut **input, Node::empty()),
                std::mem::take(exprs),
            ),
            _ => (node, (0..from.len()).map(Expr::Column).collect()),
        };
        let mut cast = Vec::with_capacity(exprs.len());
        for ((e, &f), &t) in exprs.into_iter().zip(from).zip(to) {
            let f = match (&e, f) {
                // An untyped value read from a row below is text.
                (Expr::Column(_), SqlType::Unknown) => SqlType::Text,
                _ => f,
            };
            cast.push(self.coerce(e, f, t)?);
        }
        Ok(Node::Project {
            input: Box::new(input),
            exprs: cast,
        })
    }
}
