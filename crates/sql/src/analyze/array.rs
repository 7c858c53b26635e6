//! Array expressions: `ARRAY[...]` and `ARRAY(subquery)`'s element types, subscripts,
//! `||` between arrays and elements, and `x op ANY | ALL (array or subquery)`.
//!
//! ## Rules
//! - `ARRAY[...]` takes the common type of its elements (text if all are untyped); when the
//!   elements are arrays, it is one dimension more. `ARRAY[]` alone has no type: it is an
//!   untyped `{}` until a cast gives it one.
//! - `x op ANY (SELECT ...)` other than `= ANY` (which is IN) and every ALL compare against
//!   the subquery's values gathered as an array: the same answer, NULLs included.

use sqlparser::ast::{self, BinaryOperator, Expr as AstExpr};

use super::{Binder, Scope};
use crate::error::{Result, SqlError};
use crate::func::array::ArrayFn;
use crate::func::{unify, Func};
use crate::nodes::{CmpOp, Expr, SubqueryKind};
use crate::types::{array, SqlType};
use quire_engine::{SqlState, Value};

/// 42704 for a type that has no array type.
pub(super) fn no_array_type(elem: SqlType) -> SqlError {
    SqlError::new(
        SqlState::UNDEFINED_OBJECT,
        format!("could not find array type for data type {}", elem.name()),
    )
}

/// One bound of a subscript: left out (`a[:2]`), the 1 a single subscript means in a slice,
/// or an expression.
#[derive(Clone, Copy)]
enum Bound<'a> {
    Omitted,
    One,
    At(&'a AstExpr),
}

impl<'a> Bound<'a> {
    fn of(e: Option<&'a AstExpr>) -> Bound<'a> {
        e.map_or(Bound::Omitted, Bound::At)
    }
}

fn cmp_op(op: &BinaryOperator) -> Result<CmpOp> {
    Ok(match op {
        BinaryOperator::Eq => CmpOp::Eq,
        BinaryOperator::NotEq => CmpOp::Ne,
        BinaryOperator::Lt => CmpOp::Lt,
        BinaryOperator::LtEq => CmpOp::Le,
        BinaryOperator::Gt => CmpOp::Gt,
        BinaryOperator::GtEq => CmpOp::Ge,
        other => {
            return Err(SqlError::unsupported(format!(
                "operator {other} with ANY or ALL"
            )))
        }
    })
}

impl Binder<'_> {
    /// `ARRAY[...]`.
    pub(super) fn array_constructor(
        &mut self,
        elems: &[AstExpr],
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        if elems.is_empty() {
            return Ok((Expr::Const(Value::Text("{}".into())), SqlType::Unknown));
        }
        let mut bound = Vec::with_capacity(elems.len());
        let mut ty = SqlType::Unknown;
        for x in elems {
            let (e, t) = self.expr(x, scope)?;
            ty = unify(ty, t).ok_or_else(|| {
                SqlError::type_mismatch(format!(
                    "ARRAY types {} and {} cannot be matched",
                    ty.name(),
                    t.name()
                ))
            })?;
            bound.push((e, t));
        }
        let nested = ty.element().is_some();
        let ty = if ty == SqlType::Unknown {
            SqlType::Text
        } else {
            ty
        };
        let mut args = Vec::with_capacity(bound.len());
        for (e, t) in bound {
            args.push(self.coerce(e, t, ty)?);
        }
        let (elem, array) = match ty.element() {
            Some(e) => (e, ty),
            None => (ty, SqlType::array_of(ty).ok_or_else(|| no_array_type(ty))?),
        };
        let f = Func::Array(ArrayFn::Make { elem, nested });
        Ok((Expr::Func(f, args), array))
    }

    /// `a[i]`, `a[i][j]`...
    pub(super) fn subscript(
        &mut self,
        root: &AstExpr,
        chain: &[ast::AccessExpr],
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        let (arr, at) = self.expr(root, scope)?;
        if at == SqlType::Name {
            return name_subscript(arr, chain);
        }
        let Some(elem) = at.element() else {
            return Err(SqlError::new(
                SqlState::DATATYPE_MISMATCH,
                format!(
                    "cannot subscript type {} because it does not support subscripting",
                    at.name()
                ),
            ));
        };
        let slice = chain
            .iter()
            .any(|a| matches!(a, ast::AccessExpr::Subscript(ast::Subscript::Slice { .. })));
        let mut args = vec![arr];
        let mut omitted = 0u16;
        for access in chain {
            let bounds = match access {
                ast::AccessExpr::Subscript(ast::Subscript::Index { index }) if slice => {
                    // In a slice, a single subscript i means 1:i.
                    [Bound::One, Bound::At(index)]
                }
                ast::AccessExpr::Subscript(ast::Subscript::Index { index }) => {
                    [Bound::At(index), Bound::Omitted]
                }
                ast::AccessExpr::Subscript(ast::Subscript::Slice {
                    lower_bound,
                    upper_bound,
                    stride: None,
                }) => [
                    Bound::of(lower_bound.as_ref()),
                    Bound::of(upper_bound.as_ref()),
                ],
                other => return Err(SqlError::unsupported(format!("subscript {other}"))),
            };
            if args.len() > 2 * array::MAX_DIMS {
                return Err(array::too_many_dims(chain.len()));
            }
            for b in bounds.into_iter().take(if slice { 2 } else { 1 }) {
                match b {
                    Bound::Omitted => {
                        omitted |= 1 << (args.len() - 1);
                        args.push(Expr::Const(Value::Null));
                    }
                    Bound::One => args.push(Expr::Const(Value::Int(1))),
                    Bound::At(b) => {
                        let (i, it) = self.expr_expecting(b, scope, Some(SqlType::Int4))?;
                        args.push(self.coerce(i, it, SqlType::Int4)?);
                    }
                }
            }
        }
        if slice {
            let f = ArrayFn::Slice { elem, omitted };
            return Ok((Expr::Func(Func::Array(f), args), at));
        }
        Ok((
            Expr::Func(Func::Array(ArrayFn::Subscript(elem)), args),
            elem,
        ))
    }

    /// `a @> b`, `a <@ b`, `a && b` between arrays.
    #[allow(clippy::many_single_char_names)] // l/r: the operands, lt/rt: their types
    pub(super) fn containment(
        &mut self,
        left: &AstExpr,
        op: &BinaryOperator,
        right: &AstExpr,
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        let (l, lt) = self.expr(left, scope)?;
        let (r, rt) = self.expr_expecting(right, scope, lt.element().map(|_| lt))?;
        if (lt == SqlType::Jsonb || rt == SqlType::Jsonb) && *op != BinaryOperator::PGOverlap {
            return self.jsonb_containment((l, lt), op, (r, rt));
        }
        let lt2 = if lt == SqlType::Unknown { rt } else { lt };
        let rt2 = if rt == SqlType::Unknown { lt2 } else { rt };
        let no_op = || super::expr::no_operator(lt, &op.to_string(), rt);
        let (Some(x), Some(y)) = (lt2.element(), rt2.element()) else {
            return Err(no_op());
        };
        let elem = unify(x, y).ok_or_else(no_op)?;
        let array = SqlType::array_of(elem).ok_or_else(no_op)?;
        let l = self.coerce(l, lt, array)?;
        let r = self.coerce(r, rt, array)?;
        let (f, args) = match op {
            BinaryOperator::AtArrow => (ArrayFn::Contains(elem), vec![l, r]),
            BinaryOperator::ArrowAt => (ArrayFn::Contains(elem), vec![r, l]),
            _ => (ArrayFn::Overlap(elem), vec![l, r]),
        };
        Ok((Expr::Func(Func::Array(f), args), SqlType::Bool))
    }

    /// `l || r` where either side is an array: array_cat, array_append or array_prepend.
    #[allow(clippy::many_single_char_names)] // l/r: the operands, lt/rt: their types
    pub(super) fn array_concat(
        &mut self,
        (l, lt): (Expr, SqlType),
        (r, rt): (Expr, SqlType),
    ) -> Result<(Expr, SqlType)> {
        let no_op = || super::expr::no_operator(lt, "||", rt);
        // An untyped side of an array is an array (PostgreSQL's anyarray || anyarray).
        let lt2 = if lt == SqlType::Unknown { rt } else { lt };
        let rt2 = if rt == SqlType::Unknown { lt } else { rt };
        let (f, ty) = match (lt2.element(), rt2.element()) {
            (Some(x), Some(y)) => {
                let e = unify(x, y).ok_or_else(no_op)?;
                (ArrayFn::Cat(e), e)
            }
            (Some(x), None) => {
                let e = unify(x, rt2).ok_or_else(no_op)?;
                (ArrayFn::Append(e), e)
            }
            (None, Some(y)) => {
                let e = unify(lt2, y).ok_or_else(no_op)?;
                (ArrayFn::Prepend(e), e)
            }
            (None, None) => return Err(no_op()),
        };
        let array = SqlType::array_of(ty).ok_or_else(|| no_array_type(ty))?;
        let side = |t: SqlType| if t.element().is_some() { array } else { ty };
        let l = self.coerce(l, lt, side(lt2))?;
        let r = self.coerce(r, rt, side(rt2))?;
        Ok((Expr::Func(Func::Array(f), vec![l, r]), array))
    }

    /// `left op ANY (right)` or `left op ALL (right)`.
    pub(super) fn quantified(
        &mut self,
        left: &AstExpr,
        op: &BinaryOperator,
        right: &AstExpr,
        all: bool,
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        let cmp = cmp_op(op)?;
        let (l, lt, r, rt) = if let AstExpr::Subquery(q) = right {
            if cmp == CmpOp::Eq && !all {
                return self.in_subquery(left, q, false, scope);
            }
            let (l, lt) = self.expr(left, scope)?;
            let (node, out) = self.subquery(q, scope, None)?;
            let [col] = out.as_slice() else {
                return Err(SqlError::syntax("subquery has too many columns"));
            };
            let elem = if col.ty == SqlType::Unknown {
                SqlType::Text
            } else {
                col.ty
            };
            let rt = SqlType::array_of(elem).ok_or_else(|| no_array_type(elem))?;
            (
                l,
                lt,
                Expr::Subquery(Box::new(node), SubqueryKind::Array(elem)),
                rt,
            )
        } else {
            let (l, lt) = self.expr(left, scope)?;
            let want = SqlType::array_of(if lt == SqlType::Unknown {
                SqlType::Text
            } else {
                lt
            });
            let (r, rt) = self.expr_expecting(right, scope, want)?;
            let target = if rt == SqlType::Unknown { want } else { None };
            match target {
                Some(t) => (l, lt, self.coerce(r, rt, t)?, t),
                None => (l, lt, r, rt),
            }
        };
        let Some(elem) = rt.element() else {
            return Err(SqlError::new(
                SqlState::WRONG_OBJECT_TYPE,
                "op ANY/ALL (array) requires array on right side",
            ));
        };
        let ty = unify(lt, elem).ok_or_else(|| {
            SqlError::new(
                SqlState::UNDEFINED_FUNCTION,
                format!(
                    "operator does not exist: {} {op} {}",
                    lt.name(),
                    elem.name()
                ),
            )
        })?;
        let l = self.coerce(l, lt, ty)?;
        let f = ArrayFn::Any {
            op: cmp,
            all,
            elem,
            ty,
        };
        Ok((Expr::Func(Func::Array(f), vec![l, r]), SqlType::Bool))
    }
}

/// `name[i]`: PostgreSQL's `name` is a fixed array of 64 `"char"`s from 0, so `typname[0]`
/// is its first character (pg_dump asks for it). Only a constant subscript is taken.
fn name_subscript(name: Expr, chain: &[ast::AccessExpr]) -> Result<(Expr, SqlType)> {
    let index = match chain {
        [ast::AccessExpr::Subscript(ast::Subscript::Index {
            index: AstExpr::Value(v),
        })] => match &v.value {
            ast::Value::Number(n, _) => n.parse::<i64>().ok(),
            _ => None,
        },
        _ => None,
    };
    let Some(i) = index.filter(|i| (0..64).contains(i)) else {
        return Err(SqlError::unsupported(
            "a subscript of a name other than a constant from 0 to 63",
        ));
    };
    let args = vec![
        name,
        Expr::Const(Value::Int(i + 1)),
        Expr::Const(Value::Int(1)),
    ];
    Ok((Expr::Func(Func::Substr, args), SqlType::Char))
}
