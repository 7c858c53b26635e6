//! json and jsonb operators bound: `->`, `->>`, `#>`, `#>>` (json and jsonb), and jsonb's
//! `?`, `?|`, `?&`, `#-`, `@>`, `<@`, `||` and `-`.
//!
//! ## Rules
//! - The document's type chooses the operator: json or jsonb, else 42883; an untyped
//!   document is 42725 (PostgreSQL cannot choose between json's and jsonb's).
//! - A json builder's values and a json aggregate's are wrapped in `JsonFn::ToJson` of
//!   their types ([`wrap_args`], [`agg_args`]): the calls get JSON texts, not types.
//! - `->` and `->>` take an integer as an index and anything else as a key (an untyped
//!   literal is a key, as PostgreSQL prefers text); `-` likewise, and a `text[]` for keys.

use quire_engine::SqlState;
use sqlparser::ast::{BinaryOperator, Expr as AstExpr};

use super::expr::no_operator;
use super::{Binder, Scope};
use crate::error::{Result, SqlError};
use crate::func::json::JsonFn;
use crate::func::{AggFunc, Func};
use crate::nodes::Expr;
use crate::types::SqlType;

fn not_unique(lt: SqlType, op: &BinaryOperator, rt: SqlType) -> SqlError {
    SqlError::new(
        SqlState::AMBIGUOUS_FUNCTION,
        format!("operator is not unique: {} {op} {}", lt.name(), rt.name()),
    )
    .with_hint(
        "Could not choose a best candidate operator. You might need to add explicit type casts.",
    )
}

/// Whether `op` is one of the operators this module binds (containment, `||` and `-`
/// come through their general forms).
pub(super) fn is_json_operator(op: &BinaryOperator) -> bool {
    matches!(
        op,
        BinaryOperator::Arrow
            | BinaryOperator::LongArrow
            | BinaryOperator::HashArrow
            | BinaryOperator::HashLongArrow
            | BinaryOperator::Question
            | BinaryOperator::QuestionAnd
            | BinaryOperator::QuestionPipe
            | BinaryOperator::HashMinus
    )
}

impl Binder<'_> {
    /// `a op b` for an operator [`is_json_operator`] accepts.
    #[allow(clippy::many_single_char_names)] // a/b: the operands, l/r: bound
    pub(super) fn json_operator(
        &mut self,
        a: &AstExpr,
        op: &BinaryOperator,
        b: &AstExpr,
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        let (l, lt) = self.expr(a, scope)?;
        let (r, rt) = self.expr(b, scope)?;
        let json = match lt {
            SqlType::Json => true,
            SqlType::Jsonb => false,
            SqlType::Unknown => return Err(not_unique(lt, op, rt)),
            _ => return Err(no_operator(lt, &op.to_string(), rt)),
        };
        let text = matches!(
            op,
            BinaryOperator::LongArrow | BinaryOperator::HashLongArrow
        );
        let (f, right, ret) = match op {
            BinaryOperator::Arrow | BinaryOperator::LongArrow => {
                let index = rt.is_int();
                if !(index || rt.is_text() || rt == SqlType::Unknown) {
                    return Err(no_operator(lt, &op.to_string(), rt));
                }
                let to = if index { SqlType::Int8 } else { SqlType::Text };
                let ret = if text { SqlType::Text } else { lt };
                (JsonFn::Get { json, index, text }, to, ret)
            }
            BinaryOperator::HashArrow | BinaryOperator::HashLongArrow => {
                let ret = if text { SqlType::Text } else { lt };
                let f = JsonFn::Path {
                    text,
                    variadic: false,
                };
                (f, SqlType::TEXT_ARRAY, ret)
            }
            _ if json => return Err(no_operator(lt, &op.to_string(), rt)),
            BinaryOperator::Question => (JsonFn::Exists, SqlType::Text, SqlType::Bool),
            BinaryOperator::QuestionPipe => (JsonFn::ExistsAny, SqlType::TEXT_ARRAY, SqlType::Bool),
            BinaryOperator::QuestionAnd => (JsonFn::ExistsAll, SqlType::TEXT_ARRAY, SqlType::Bool),
            _ => (JsonFn::DeletePath, SqlType::TEXT_ARRAY, SqlType::Jsonb),
        };
        let fits = rt == right
            || rt == SqlType::Unknown
            || (right.is_text() && rt.is_text())
            || (right.is_int() && rt.is_int());
        if !fits {
            return Err(no_operator(lt, &op.to_string(), rt));
        }
        let r = self.coerce(r, rt, right)?;
        Ok((Expr::Func(Func::Json(f), vec![l, r]), ret))
    }

    /// `a @> b` and `a <@ b` when either side is jsonb.
    pub(super) fn jsonb_containment(
        &mut self,
        (l, lt): (Expr, SqlType),
        op: &BinaryOperator,
        (r, rt): (Expr, SqlType),
    ) -> Result<(Expr, SqlType)> {
        for t in [lt, rt] {
            if !matches!(t, SqlType::Jsonb | SqlType::Unknown) {
                return Err(no_operator(lt, &op.to_string(), rt));
            }
        }
        let l = self.coerce(l, lt, SqlType::Jsonb)?;
        let r = self.coerce(r, rt, SqlType::Jsonb)?;
        let args = if *op == BinaryOperator::ArrowAt {
            vec![r, l]
        } else {
            vec![l, r]
        };
        Ok((
            Expr::Func(Func::Json(JsonFn::Contains), args),
            SqlType::Bool,
        ))
    }

    /// `a || b` when either side is jsonb and the other jsonb or untyped.
    pub(super) fn jsonb_concat(
        &mut self,
        (l, lt): (Expr, SqlType),
        (r, rt): (Expr, SqlType),
    ) -> Result<(Expr, SqlType)> {
        let l = self.coerce(l, lt, SqlType::Jsonb)?;
        let r = self.coerce(r, rt, SqlType::Jsonb)?;
        let f = Func::Json(JsonFn::Concat);
        Ok((Expr::Func(f, vec![l, r]), SqlType::Jsonb))
    }

    /// `jsonb - key`, `jsonb - text[]`, `jsonb - index`.
    pub(super) fn jsonb_minus(
        &mut self,
        l: Expr,
        b: &AstExpr,
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        let (r, rt) = self.expr(b, scope)?;
        let (f, to) = if rt.is_int() {
            (JsonFn::DeleteIndex, SqlType::Int8)
        } else if rt.is_text() || rt == SqlType::Unknown {
            (JsonFn::DeleteKey, SqlType::Text)
        } else if rt.element().is_some_and(SqlType::is_text) {
            (JsonFn::DeleteKeys, SqlType::TEXT_ARRAY)
        } else {
            return Err(no_operator(SqlType::Jsonb, "-", rt));
        };
        let r = self.coerce(r, rt, to)?;
        Ok((Expr::Func(Func::Json(f), vec![l, r]), SqlType::Jsonb))
    }
}

/// `e` (of type `t`) in its JSON form, as `to_json` (or `to_jsonb`) makes it; an untyped
/// literal is text.
fn to_json_expr(e: Expr, t: SqlType, jsonb: bool) -> Expr {
    let from = if t == SqlType::Unknown {
        SqlType::Text
    } else {
        t
    };
    Expr::Func(Func::Json(JsonFn::ToJson { from, jsonb }), vec![e])
}

/// An object key: `e`'s text, as PostgreSQL writes a key of any type.
fn key_text(e: Expr, t: SqlType) -> Expr {
    Expr::Cast(Box::new(e), t, SqlType::Text)
}

/// A builder's arguments made ready for it: its values in JSON form ([`to_json_expr`]),
/// an object's keys as text.
pub(super) fn wrap_args(f: Func, args: Vec<Expr>, types: &[SqlType]) -> Vec<Expr> {
    let (object, jsonb) = match f {
        Func::Json(JsonFn::BuildObject { jsonb }) => (true, jsonb),
        Func::Json(JsonFn::BuildArray { jsonb }) => (false, jsonb),
        _ => return args,
    };
    args.into_iter()
        .zip(types)
        .enumerate()
        .map(|(i, (e, &t))| {
            if object && i % 2 == 0 {
                key_text(e, t)
            } else {
                to_json_expr(e, t, jsonb)
            }
        })
        .collect()
}

/// A json aggregate's arguments made ready for it, as a builder's ([`wrap_args`]); other
/// aggregates' as they are.
pub(super) fn agg_args(f: AggFunc, bound: Vec<(Expr, SqlType)>) -> Vec<Expr> {
    let (AggFunc::JsonAgg { jsonb } | AggFunc::JsonObjectAgg { jsonb }) = f else {
        return bound.into_iter().map(|(e, _)| e).collect();
    };
    let object = matches!(f, AggFunc::JsonObjectAgg { .. });
    bound
        .into_iter()
        .enumerate()
        .map(|(i, (e, t))| {
            if object && i == 0 {
                key_text(e, t)
            } else {
                to_json_expr(e, t, jsonb)
            }
        })
        .collect()
}
