//! Expressions: names resolved against the scope (then the enclosing queries' scopes, for
//! correlated subqueries), types inferred and checked, untyped literals and parameters
//! given the type of what they meet (`aid = $1` makes `$1` an integer), implicit casts
//! made explicit.

use quire_engine::{SqlState, Value};
use sqlparser::ast::{
    self, BinaryOperator, Expr as AstExpr, FunctionArg, FunctionArgExpr, FunctionArguments,
    UnaryOperator, Value as AstValue,
};

use super::query::expand_items;
use super::window::CallSyntax;
use super::Scope;
use super::{ident_name, Binder, OutColumn, MAX_PARAMS};
use crate::catalog::ColumnInfo;
use crate::datetime::fields::DtFunc;
use crate::error::{Result, SqlError};
use crate::func::string::StrFn;
use crate::func::{self, unify, AggFunc, Func};
use crate::nodes::{ArithOp, CmpOp, Expr, SubqueryKind};
use crate::types::{self, SqlType};

impl Binder<'_> {
    pub(crate) fn expr(&mut self, e: &AstExpr, scope: &Scope) -> Result<(Expr, SqlType)> {
        self.expr_expecting(e, scope, None)
    }

    /// A predicate: a boolean expression (42804 otherwise).
    pub(crate) fn predicate(&mut self, e: &AstExpr, scope: &Scope) -> Result<Expr> {
        let (x, ty) = self.expr_expecting(e, scope, Some(SqlType::Bool))?;
        let x = self.coerce(x, ty, SqlType::Bool)?;
        if !matches!(ty, SqlType::Bool | SqlType::Unknown) {
            return Err(SqlError::type_mismatch(format!(
                "argument of WHERE must be type boolean, not type {}",
                ty.name()
            )));
        }
        Ok(x)
    }

    /// A value assigned to `col` (INSERT, UPDATE SET), cast to its type.
    pub(crate) fn assigned(
        &mut self,
        e: &AstExpr,
        col: &ColumnInfo,
        scope: &Scope,
    ) -> Result<Expr> {
        let (x, ty) = self.expr_expecting(e, scope, Some(col.ty))?;
        let x = match x {
            Expr::Param(n) => {
                self.type_param(n, col.ty);
                return assign_expr(Expr::Param(n), self.params[n], col);
            }
            x => x,
        };
        match e {
            AstExpr::Value(lit) if ty == SqlType::Unknown => {
                assign_expr(x, ty, col).map_err(|err| at_literal(err, lit.span))
            }
            _ => assign_expr(x, ty, col),
        }
    }

    /// A select list (RETURNING) over `scope`.
    pub(crate) fn select_list(
        &mut self,
        items: &[ast::SelectItem],
        scope: &Scope,
    ) -> Result<(Vec<Expr>, Vec<OutColumn>)> {
        let mut exprs = Vec::new();
        let mut out = Vec::new();
        for it in expand_items(items, scope, true)? {
            let (e, ty) = match &it.expr {
                super::query::ItemExpr::Column(i) => {
                    (scope.cols[*i].source.clone(), scope.cols[*i].ty)
                }
                super::query::ItemExpr::Ast(a) => self.expr(a, scope)?,
            };
            exprs.push(e);
            out.push(OutColumn {
                name: it.name,
                ty: if ty == SqlType::Unknown {
                    SqlType::Text
                } else {
                    ty
                },
            });
        }
        Ok((exprs, out))
    }

    fn type_param(&mut self, n: usize, ty: SqlType) {
        if self.params.len() <= n {
            self.params.resize(n + 1, SqlType::Unknown);
        }
        if self.params[n] == SqlType::Unknown {
            self.params[n] = ty;
        }
    }

    /// `e` brought to type `to`: an untyped literal parses as `to`, an untyped parameter
    /// takes it, anything else gets an implicit cast (42804 where none exists).
    pub(crate) fn coerce(&mut self, e: Expr, from: SqlType, to: SqlType) -> Result<Expr> {
        if from == to || to == SqlType::Unknown {
            return Ok(e);
        }
        let mut e = e;
        if from == SqlType::Unknown {
            if let Expr::Const(Value::Text(s)) = &mut e {
                let s = std::mem::take(s);
                // A relation or type name is looked up when the statement runs (the catalog
                // may change between a prepared statement's bind and its execution).
                if to.is_named_oid() {
                    return Ok(Expr::Cast(
                        Box::new(Expr::Const(Value::Text(s))),
                        SqlType::Text,
                        to,
                    ));
                }
                return Ok(Expr::Const(types::parse_text(to, &s)?));
            }
        }
        match e {
            Expr::Const(Value::Null) => Ok(e),
            Expr::Param(n)
                if self.params.get(n) == Some(&SqlType::Unknown) || self.params.len() <= n =>
            {
                self.type_param(n, to);
                Ok(e)
            }
            e => {
                // The runtime compares integers with floats and text-like types with each
                // other directly; a cast is needed only where the representation differs.
                let same_family = (from.is_int() || from.is_oid())
                    && (to.is_int() || to.is_oid() || to.is_float())
                    || from.is_float() && to.is_float()
                    || from.is_text() && to.is_text()
                    || from == to;
                if same_family && !(from.is_int() && to.is_float()) {
                    return Ok(e);
                }
                if unify(from, to).is_none() && !(from == SqlType::Unknown) {
                    return Err(SqlError::type_mismatch(format!(
                        "cannot use a value of type {} as {}",
                        from.name(),
                        to.name()
                    )));
                }
                Ok(Expr::Cast(Box::new(e), from, to))
            }
        }
    }

    #[allow(clippy::many_single_char_names)] // e: the expression, a/b: operands, l/r: bound
    pub(crate) fn expr_expecting(
        &mut self,
        e: &AstExpr,
        scope: &Scope,
        expected: Option<SqlType>,
    ) -> Result<(Expr, SqlType)> {
        crate::stack::check_stack_depth()?;
        if let Some(k) = self.group_key_expr(e) {
            return Ok(k);
        }
        match e {
            AstExpr::Nested(inner) => self.expr_expecting(inner, scope, expected),
            AstExpr::Identifier(id) => self.column(None, &ident_name(id), scope),
            AstExpr::CompoundIdentifier(ids) => {
                let names: Vec<String> = ids.iter().map(ident_name).collect();
                match names.as_slice() {
                    [q, c] => self.column(Some(q), c, scope),
                    [_schema, q, c] => self.column(Some(q), c, scope),
                    _ => Err(SqlError::unsupported(format!("the name {e}"))),
                }
            }
            AstExpr::Value(v) => match &v.value {
                AstValue::Placeholder(p) if crate::literals::run_text(p).is_some() => {
                    Err(SqlError::unsupported("a list of constants in this place"))
                }
                AstValue::Placeholder(p) => {
                    let n = p
                        .strip_prefix('$')
                        .and_then(|n| n.parse::<usize>().ok())
                        .filter(|n| (1..=MAX_PARAMS).contains(n))
                        .ok_or_else(|| {
                            SqlError::new(
                                SqlState::UNDEFINED_PARAMETER,
                                format!("there is no parameter {p}"),
                            )
                        })?;
                    if let Some(t) = expected {
                        self.type_param(n - 1, t);
                    } else if self.params.len() < n {
                        self.params.resize(n, SqlType::Unknown);
                    }
                    Ok((Expr::Param(n - 1), self.params[n - 1]))
                }
                other => literal(other),
            },
            AstExpr::TypedString(ts) => {
                let to = SqlType::from_ast(&ts.data_type)?;
                let AstValue::SingleQuotedString(s) = &ts.value.value else {
                    return Err(SqlError::unsupported(format!("literal {e}")));
                };
                let v = types::parse_text(to, s).map_err(|e| at_literal(e, ts.value.span))?;
                Ok((Expr::Const(v), to))
            }
            AstExpr::AtTimeZone {
                timestamp,
                time_zone,
            } => self.call("timezone", &[time_zone.as_ref(), timestamp.as_ref()], scope),
            AstExpr::Extract { field, expr, .. } => {
                let (x, t) = self.expr(expr, scope)?;
                let t = if t == SqlType::Unknown {
                    SqlType::Timestamptz
                } else {
                    t
                };
                let Some(kind) = super::datetime::kind(t) else {
                    return Err(SqlError::new(
                        SqlState::UNDEFINED_FUNCTION,
                        format!(
                            "function pg_catalog.extract(unknown, {}) does not exist",
                            t.name()
                        ),
                    ));
                };
                let x = self.coerce(x, t, t)?;
                let unit = Expr::Const(Value::Text(super::datetime::extract_field(field)));
                let f = Func::DateTimeFn(DtFunc::Extract {
                    kind,
                    numeric: true,
                });
                Ok((Expr::Func(f, vec![unit, x]), SqlType::Numeric(None)))
            }
            AstExpr::Interval(iv) => {
                let v = super::datetime::interval_literal(iv).map_err(|e| match &*iv.value {
                    AstExpr::Value(lit) => at_literal(e, lit.span),
                    _ => e,
                })?;
                Ok((Expr::Const(v), SqlType::Interval))
            }
            AstExpr::UnaryOp { op, expr } => self.unary(*op, expr, scope, expected),
            AstExpr::BinaryOp { left, op, right } => self.binary(left, op, right, scope),
            AstExpr::IsNull(x) | AstExpr::IsNotNull(x) => {
                let (x, _) = self.expr(x, scope)?;
                Ok((
                    Expr::IsNull(Box::new(x), matches!(e, AstExpr::IsNotNull(_))),
                    SqlType::Bool,
                ))
            }
            AstExpr::IsTrue(x)
            | AstExpr::IsNotTrue(x)
            | AstExpr::IsFalse(x)
            | AstExpr::IsNotFalse(x) => {
                let x = self.predicate(x, scope)?;
                Ok((
                    Expr::IsBool {
                        expr: Box::new(x),
                        value: matches!(e, AstExpr::IsTrue(_) | AstExpr::IsNotTrue(_)),
                        negated: matches!(e, AstExpr::IsNotTrue(_) | AstExpr::IsNotFalse(_)),
                    },
                    SqlType::Bool,
                ))
            }
            AstExpr::IsDistinctFrom(a, b) | AstExpr::IsNotDistinctFrom(a, b) => {
                let (l, r, ty) = self.pair(a, "=", b, scope)?;
                // a IS DISTINCT FROM b: NULLs compare as equal to each other.
                let both_null = Expr::And(vec![
                    Expr::IsNull(Box::new(l.clone()), false),
                    Expr::IsNull(Box::new(r.clone()), false),
                ]);
                let equal = Expr::Func(
                    Func::Coalesce,
                    vec![
                        Expr::Cmp(CmpOp::Eq, ty, Box::new(l), Box::new(r)),
                        Expr::Const(Value::Bool(false)),
                    ],
                );
                let same = Expr::Or(vec![both_null, equal]);
                let out = if matches!(e, AstExpr::IsDistinctFrom(..)) {
                    Expr::Not(Box::new(same))
                } else {
                    same
                };
                Ok((out, SqlType::Bool))
            }
            AstExpr::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let (x, lo, t1) = self.pair(expr, ">=", low, scope)?;
                // Each bound brings the operand to a common type of its own.
                let (x2, hi, t2) = self.pair(expr, "<=", high, scope)?;
                let b = Expr::And(vec![
                    Expr::Cmp(CmpOp::Ge, t1, Box::new(x), Box::new(lo)),
                    Expr::Cmp(CmpOp::Le, t2, Box::new(x2), Box::new(hi)),
                ]);
                Ok((
                    if *negated { Expr::Not(Box::new(b)) } else { b },
                    SqlType::Bool,
                ))
            }
            AstExpr::Like {
                negated,
                expr,
                pattern,
                escape_char,
                any: false,
            }
            | AstExpr::ILike {
                negated,
                expr,
                pattern,
                escape_char,
                any: false,
            } => {
                let x = self.text_operand(expr, scope)?;
                let mut p = self.text_operand(pattern, scope)?;
                if let Some(escape) = escape_char {
                    // PostgreSQL's `like_escape(pattern, escape)`: the pattern rewritten
                    // with backslash as its escape character.
                    let esc = self.text_operand(escape, scope)?;
                    p = Expr::Func(Func::Str(StrFn::LikeEscape), vec![p, esc]);
                }
                Ok((
                    Expr::Like {
                        expr: Box::new(x),
                        pattern: Box::new(p),
                        case_insensitive: matches!(e, AstExpr::ILike { .. }),
                        negated: *negated,
                    },
                    SqlType::Bool,
                ))
            }
            AstExpr::SimilarTo {
                negated,
                expr,
                pattern,
                escape_char,
            } => {
                // PostgreSQL's rewrite: `x ~ similar_to_escape(pattern [, escape])`.
                let x = self.text_operand(expr, scope)?;
                let mut args = vec![self.text_operand(pattern, scope)?];
                if let Some(escape) = escape_char {
                    args.push(self.text_operand(escape, scope)?);
                }
                let p = Expr::Func(Func::Str(StrFn::SimilarEscape), args);
                Ok((
                    Expr::Regex {
                        expr: Box::new(x),
                        pattern: Box::new(p),
                        case_insensitive: false,
                        negated: *negated,
                    },
                    SqlType::Bool,
                ))
            }
            AstExpr::In {
                expr,
                target,
                negated,
                ..
            } => match target {
                ast::InTarget::List(list) => self.in_list(expr, list, *negated, scope),
                ast::InTarget::Subquery(q) => self.in_subquery(expr, q, *negated, scope),
                _ => Err(SqlError::unsupported("IN UNNEST or IN table")),
            },
            AstExpr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => self.case(
                operand.as_deref(),
                conditions,
                else_result.as_deref(),
                scope,
            ),
            AstExpr::Cast {
                kind: ast::CastKind::Cast | ast::CastKind::DoubleColon,
                expr,
                data_type,
                format: None,
            } => {
                let to = SqlType::from_ast(data_type)?;
                // A name for a reg* type is looked up when the statement runs (a parameter
                // stays text); other casts type their parameter.
                let param_type = if to.is_oid() && to != SqlType::Oid {
                    SqlType::Text
                } else {
                    to
                };
                let (inner, from) = self.expr_expecting(expr, scope, Some(param_type))?;
                if let Expr::Param(n) = inner {
                    self.type_param(n, param_type);
                    if self.params[n] == to {
                        return Ok((Expr::Param(n), to));
                    }
                    return Ok((Expr::Cast(Box::new(Expr::Param(n)), self.params[n], to), to));
                }
                if from == to {
                    return Ok((inner, to));
                }
                if let Expr::Const(Value::Text(s)) = &inner {
                    if from == SqlType::Unknown && !to.is_named_oid() {
                        let v = types::parse_text(to, s);
                        let v = match &**expr {
                            AstExpr::Value(lit) => v.map_err(|e| at_literal(e, lit.span))?,
                            _ => v?,
                        };
                        return Ok((Expr::Const(v), to));
                    }
                }
                Ok((Expr::Cast(Box::new(inner), from, to), to))
            }
            AstExpr::Collate { expr, .. } => self.expr_expecting(expr, scope, expected),
            AstExpr::Function(f) => self.function(f, scope),
            AstExpr::Substring {
                expr,
                substring_from,
                substring_for,
                shorthand,
                ..
            } => {
                let one = AstExpr::value(ast::Value::Number("1".into(), false));
                let mut args = vec![&**expr, substring_from.as_deref().unwrap_or(&one)];
                args.extend(substring_for.as_deref());
                self.call(
                    if *shorthand { "substr" } else { "substring" },
                    &args,
                    scope,
                )
            }
            AstExpr::Overlay {
                expr,
                overlay_what,
                overlay_from,
                overlay_for,
            } => {
                let mut args = vec![&**expr, &**overlay_what, &**overlay_from];
                args.extend(overlay_for.as_deref());
                self.call("overlay", &args, scope)
            }
            AstExpr::Trim {
                expr,
                trim_where,
                trim_what,
                trim_characters,
            } => {
                if trim_characters.is_some() {
                    return Err(SqlError::unsupported("TRIM with a character list"));
                }
                let name = match trim_where {
                    None | Some(ast::TrimWhereField::Both) => "btrim",
                    Some(ast::TrimWhereField::Leading) => "ltrim",
                    Some(ast::TrimWhereField::Trailing) => "rtrim",
                };
                let mut args = vec![&**expr];
                args.extend(trim_what.as_deref());
                self.call(name, &args, scope)
            }
            AstExpr::Position { expr, r#in } => {
                // position(needle IN haystack) is position(haystack, needle) (gram.y).
                self.call("position", &[&**r#in, &**expr], scope)
            }
            AstExpr::Ceil {
                expr,
                field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime),
            } => self.call("ceil", &[&**expr], scope),
            AstExpr::Floor {
                expr,
                field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime),
            } => self.call("floor", &[&**expr], scope),
            AstExpr::CompoundFieldAccess { root, access_chain } => {
                self.subscript(root, access_chain, scope)
            }
            AstExpr::AnyOp {
                left,
                compare_op,
                right,
                ..
            } => self.quantified(left, compare_op, right, false, scope),
            AstExpr::AllOp {
                left,
                compare_op,
                right,
            } => self.quantified(left, compare_op, right, true, scope),
            AstExpr::Exists { subquery, negated } => {
                let (node, _) = self.subquery(subquery, scope, Some(1))?;
                let x = Expr::Subquery(Box::new(node), SubqueryKind::Exists);
                Ok((
                    if *negated { Expr::Not(Box::new(x)) } else { x },
                    SqlType::Bool,
                ))
            }
            AstExpr::Subquery(q) => {
                // Two rows tell one from too many (21000).
                let (node, out) = self.subquery(q, scope, Some(2))?;
                let [col] = out.as_slice() else {
                    return Err(SqlError::syntax("subquery must return only one column"));
                };
                Ok((Expr::Subquery(Box::new(node), SubqueryKind::Scalar), col.ty))
            }
            AstExpr::Array(a) => self.array_constructor(&a.elem, scope),
            other => Err(SqlError::unsupported(format!("expression {other}"))),
        }
    }

    fn column(
        &mut self,
        qualifier: Option<&str>,
        name: &str,
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        if qualifier.is_none() && self.agg.is_none() {
            // CURRENT_USER and friends parse as identifiers in some positions.
            if let Some(f) = bare_function(name) {
                return self.call(f, &[], scope);
            }
        }
        if let Some(c) = scope.resolve(qualifier, name)? {
            let (source, ty) = (c.source.clone(), c.ty);
            if self.agg.is_some() {
                // PostgreSQL names the column by its relation, as written or not.
                let text = match c.qualifier.as_deref().or(qualifier) {
                    Some(q) => format!("{q}.{name}"),
                    None => name.to_string(),
                };
                let e = self.agg_key(&source, &text)?;
                let kt = self.agg_key_type(&e).unwrap_or(ty);
                return Ok((e, kt));
            }
            return Ok((source, ty));
        }
        for (depth, s) in self.outer.iter().rev().enumerate() {
            if let Some(c) = s.resolve(qualifier, name)? {
                if s.lateral_refused {
                    return Err(lateral_refused(c.qualifier.as_deref()));
                }
                let index = self.outer.len() - 1 - depth;
                self.lowest_outer_ref = self.lowest_outer_ref.min(index);
                return Ok((c.source.as_outer(depth + 1), c.ty));
            }
        }
        if let Some(f) = bare_function(name) {
            return self.call(f, &[], scope);
        }
        let hidden = |s: &Scope| {
            s.hidden_tables
                .iter()
                .find(|(t, _)| Some(t.as_str()) == qualifier)
                .cloned()
        };
        Err(match qualifier {
            Some(q)
                if !scope.has_qualifier(q) && !self.outer.iter().any(|s| s.has_qualifier(q)) =>
            {
                if let Some((t, alias)) =
                    hidden(scope).or_else(|| self.outer.iter().find_map(hidden))
                {
                    return Err(super::scope::hidden_table_error(&t, alias.as_deref()));
                }
                SqlError::new(
                    SqlState::UNDEFINED_TABLE,
                    format!("missing FROM-clause entry for table \"{q}\""),
                )
            }
            Some(q) => SqlError::new(
                SqlState::UNDEFINED_COLUMN,
                format!("column {q}.{name} does not exist"),
            ),
            None => SqlError::new(
                SqlState::UNDEFINED_COLUMN,
                format!("column \"{name}\" does not exist"),
            ),
        })
    }

    fn agg_key_type(&self, e: &Expr) -> Option<SqlType> {
        let Expr::Column(i) = e else { return None };
        self.agg.as_ref()?.keys.get(*i).map(|(_, t)| *t)
    }

    /// A subquery in an expression, bound with `scope` as its enclosing row. One that
    /// refers to no enclosing query's row is an [`Node::InitPlan`]: run once per statement,
    /// its rows kept (the first `rows_needed` of them, when the expression reads no more).
    pub(super) fn subquery(
        &mut self,
        q: &ast::Query,
        scope: &Scope,
        rows_needed: Option<i64>,
    ) -> Result<(crate::nodes::Node, Vec<OutColumn>)> {
        let level = self.outer.len();
        self.outer.push(scope.clone());
        self.sublinks += 1;
        let saved = self.agg.take();
        let outer_refs = std::mem::replace(&mut self.lowest_outer_ref, usize::MAX);
        let r = self.query(q);
        let correlated = self.lowest_outer_ref <= level;
        self.lowest_outer_ref = self.lowest_outer_ref.min(outer_refs);
        self.agg = saved;
        self.sublinks -= 1;
        self.outer.pop();
        let (node, out) = r?;
        if correlated {
            return Ok((node, out));
        }
        let input = match rows_needed {
            Some(n) => crate::nodes::Node::Limit {
                input: Box::new(node),
                offset: None,
                count: Some(Expr::Const(quire_engine::Value::Int(n))),
                ties: Vec::new(),
            },
            None => node,
        };
        let id = self.next_cte;
        self.next_cte += 1;
        let plan = crate::nodes::Node::InitPlan {
            id,
            input: Box::new(input),
        };
        Ok((plan, out))
    }

    fn unary(
        &mut self,
        op: UnaryOperator,
        x: &AstExpr,
        scope: &Scope,
        expected: Option<SqlType>,
    ) -> Result<(Expr, SqlType)> {
        match op {
            UnaryOperator::Not => Ok((
                Expr::Not(Box::new(self.predicate(x, scope)?)),
                SqlType::Bool,
            )),
            UnaryOperator::Plus => self.expr_expecting(x, scope, expected),
            UnaryOperator::Minus => {
                if let AstExpr::Value(v) = x {
                    if let AstValue::Number(n, _) = &v.value {
                        return number(&format!("-{n}"));
                    }
                }
                let (inner, ty) = self.expr_expecting(x, scope, expected)?;
                if ty == SqlType::Interval {
                    let op = Func::DateTime(crate::datetime::arith::DtOp::IntervalNeg);
                    return Ok((Expr::Func(op, vec![inner]), ty));
                }
                if !(ty.is_int() || ty.is_float() || ty.is_numeric() || ty == SqlType::Unknown) {
                    return Err(SqlError::new(
                        SqlState::UNDEFINED_FUNCTION,
                        format!("operator does not exist: - {}", ty.name()),
                    ));
                }
                Ok((Expr::Neg(Box::new(inner)), ty))
            }
            // PostgreSQL's prefix operators for abs, sqrt and cbrt.
            UnaryOperator::PGAbs => self.call("abs", &[x], scope),
            UnaryOperator::PGSquareRoot => self.call("sqrt", &[x], scope),
            UnaryOperator::PGCubeRoot => self.call("cbrt", &[x], scope),
            other => Err(SqlError::unsupported(format!("operator {other}"))),
        }
    }

    /// Two operands brought to a common type (for comparisons): the typed side decides
    /// an untyped literal's or parameter's type.
    #[allow(clippy::many_single_char_names)] // e: the expression, a/b: operands, l/r: bound
    fn pair(
        &mut self,
        a: &AstExpr,
        op: &str,
        b: &AstExpr,
        scope: &Scope,
    ) -> Result<(Expr, Expr, SqlType)> {
        let (l, lt) = self.expr(a, scope)?;
        let (r, rt) = self.expr_expecting(b, scope, (lt != SqlType::Unknown).then_some(lt))?;
        self.bound_pair((l, lt), op, (r, rt))
    }

    /// [`Self::pair`] of operands already bound.
    fn bound_pair(
        &mut self,
        (l, lt): (Expr, SqlType),
        op: &str,
        (r, rt): (Expr, SqlType),
    ) -> Result<(Expr, Expr, SqlType)> {
        let (l, lt) = match (&l, lt) {
            (Expr::Param(n), SqlType::Unknown) if rt != SqlType::Unknown => {
                self.type_param(*n, rt);
                (l, rt)
            }
            _ => (l, lt),
        };
        let ty = match (lt, rt) {
            (SqlType::Unknown, SqlType::Unknown) => SqlType::Text,
            (x, y) => unify(x, y).ok_or_else(|| no_operator(x, op, y))?,
        };
        let l = self.coerce(l, lt, ty)?;
        let r = self.coerce(r, rt, ty)?;
        Ok((l, r, ty))
    }

    /// `l op r` when either side is a date/time type: PostgreSQL's operator for the pair
    /// (`super::datetime`), or 42883 when it has none.
    fn datetime_arith(
        &mut self,
        (l, lt): (Expr, SqlType),
        op: &BinaryOperator,
        (r, rt): (Expr, SqlType),
    ) -> Result<(Expr, SqlType)> {
        let symbol = match op {
            BinaryOperator::Plus => '+',
            BinaryOperator::Minus => '-',
            BinaryOperator::Multiply => '*',
            BinaryOperator::Divide => '/',
            _ => '%',
        };
        let Some(res) = super::datetime::resolve(symbol, lt, rt) else {
            if symbol == '+' && matches!((lt, rt), (SqlType::Date, SqlType::Unknown)) {
                // date + integer, date + interval and date + time all take it.
                return Err(SqlError::new(
                    SqlState::AMBIGUOUS_FUNCTION,
                    format!("operator is not unique: {} + {}", lt.name(), rt.name()),
                )
                .with_hint(
                    "Could not choose a best candidate operator. \
                     You might need to add explicit type casts.",
                ));
            }
            return Err(no_operator(lt, &op.to_string(), rt));
        };
        let ((x, xt), (y, yt)) = if res.swap {
            ((r, rt), (l, lt))
        } else {
            ((l, lt), (r, rt))
        };
        let x = self.coerce(x, xt, res.args[0])?;
        let y = self.coerce(y, yt, res.args[1])?;
        Ok((Expr::Func(Func::DateTime(res.op), vec![x, y]), res.result))
    }

    fn text_operand(&mut self, x: &AstExpr, scope: &Scope) -> Result<Expr> {
        let (e, ty) = self.expr_expecting(x, scope, Some(SqlType::Text))?;
        if !ty.is_text() {
            return Err(SqlError::new(
                SqlState::UNDEFINED_FUNCTION,
                format!("operator does not exist: {} ~~ text", ty.name()),
            ));
        }
        self.coerce(e, ty, SqlType::Text)
    }

    #[allow(clippy::many_single_char_names)] // e: the expression, a/b: operands, l/r: bound
    fn binary(
        &mut self,
        a: &AstExpr,
        op: &BinaryOperator,
        b: &AstExpr,
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        let cmp = match op {
            BinaryOperator::Eq => Some(CmpOp::Eq),
            BinaryOperator::NotEq => Some(CmpOp::Ne),
            BinaryOperator::Lt => Some(CmpOp::Lt),
            BinaryOperator::LtEq => Some(CmpOp::Le),
            BinaryOperator::Gt => Some(CmpOp::Gt),
            BinaryOperator::GtEq => Some(CmpOp::Ge),
            _ => None,
        };
        if let Some(c) = cmp {
            let (l, r, ty) = self.pair(a, &op.to_string(), b, scope)?;
            if ty == SqlType::Json {
                // json has no comparison operators (jsonb has).
                return Err(no_operator(ty, &op.to_string(), ty));
            }
            return Ok((Expr::Cmp(c, ty, Box::new(l), Box::new(r)), SqlType::Bool));
        }
        let arith = match op {
            BinaryOperator::Plus => Some(ArithOp::Add),
            BinaryOperator::Minus => Some(ArithOp::Sub),
            BinaryOperator::Multiply => Some(ArithOp::Mul),
            BinaryOperator::Divide => Some(ArithOp::Div),
            BinaryOperator::Modulo => Some(ArithOp::Mod),
            _ => None,
        };
        if let Some(o) = arith {
            let (l, lt) = self.expr(a, scope)?;
            if lt == SqlType::Jsonb && o == ArithOp::Sub {
                return self.jsonb_minus(l, b, scope);
            }
            let expect = (lt != SqlType::Unknown && !is_datetime(lt)).then_some(lt);
            let (r, rt) = self.expr_expecting(b, scope, expect)?;
            if is_datetime(lt) || is_datetime(rt) {
                return self.datetime_arith((l, lt), op, (r, rt));
            }
            let (l, r, ty) = self.bound_pair((l, lt), &op.to_string(), (r, rt))?;
            if !(ty.is_int()
                || ty.is_float()
                || ty.is_numeric()
                || (ty == SqlType::Timestamp && matches!(o, ArithOp::Add | ArithOp::Sub)))
            {
                return Err(no_operator(ty, &op.to_string(), ty));
            }
            // numeric's operators return an unconstrained numeric, whatever the operands'
            // typmods.
            let ty = if ty.is_numeric() {
                SqlType::Numeric(None)
            } else {
                ty
            };
            return Ok((Expr::Arith(o, ty, Box::new(l), Box::new(r)), ty));
        }
        if super::json::is_json_operator(op) {
            return self.json_operator(a, op, b, scope);
        }
        match op {
            BinaryOperator::PGExp => self.call("power", &[a, b], scope),
            BinaryOperator::And | BinaryOperator::Or => self.logic_chain(a, op, b, scope),
            BinaryOperator::StringConcat => {
                let (l, lt) = self.expr(a, scope)?;
                let (r, rt) = self.expr(b, scope)?;
                if lt.element().is_some() || rt.element().is_some() {
                    return self.array_concat((l, lt), (r, rt));
                }
                let jsonb_or_untyped = |t: SqlType| matches!(t, SqlType::Jsonb | SqlType::Unknown);
                if (lt == SqlType::Jsonb || rt == SqlType::Jsonb)
                    && jsonb_or_untyped(lt)
                    && jsonb_or_untyped(rt)
                {
                    return self.jsonb_concat((l, lt), (r, rt));
                }
                Ok((
                    Expr::Concat(Box::new(to_text(l, lt)), Box::new(to_text(r, rt))),
                    SqlType::Text,
                ))
            }
            BinaryOperator::PGRegexMatch
            | BinaryOperator::PGRegexIMatch
            | BinaryOperator::PGRegexNotMatch
            | BinaryOperator::PGRegexNotIMatch => self.regex(a, b, op, scope),
            BinaryOperator::PGCustomBinaryOperator(parts) => {
                let name = parts.last().map_or("", String::as_str);
                let op = match name {
                    "~" => BinaryOperator::PGRegexMatch,
                    "~*" => BinaryOperator::PGRegexIMatch,
                    "!~" => BinaryOperator::PGRegexNotMatch,
                    "!~*" => BinaryOperator::PGRegexNotIMatch,
                    "=" => BinaryOperator::Eq,
                    "<>" => BinaryOperator::NotEq,
                    "<" => BinaryOperator::Lt,
                    ">" => BinaryOperator::Gt,
                    "<=" => BinaryOperator::LtEq,
                    ">=" => BinaryOperator::GtEq,
                    _ => {
                        return Err(SqlError::unsupported(format!(
                            "operator {}",
                            parts.join(".")
                        )))
                    }
                };
                self.binary(a, &op, b, scope)
            }
            BinaryOperator::PGLikeMatch
            | BinaryOperator::PGNotLikeMatch
            | BinaryOperator::PGILikeMatch
            | BinaryOperator::PGNotILikeMatch => {
                let x = self.text_operand(a, scope)?;
                let p = self.text_operand(b, scope)?;
                Ok((
                    Expr::Like {
                        expr: Box::new(x),
                        pattern: Box::new(p),
                        case_insensitive: matches!(
                            op,
                            BinaryOperator::PGILikeMatch | BinaryOperator::PGNotILikeMatch
                        ),
                        negated: matches!(
                            op,
                            BinaryOperator::PGNotLikeMatch | BinaryOperator::PGNotILikeMatch
                        ),
                    },
                    SqlType::Bool,
                ))
            }
            BinaryOperator::AtArrow | BinaryOperator::ArrowAt | BinaryOperator::PGOverlap => {
                self.containment(a, op, b, scope)
            }
            other => Err(SqlError::unsupported(format!("operator {other}"))),
        }
    }

    /// `a AND b AND c ...` (or OR) as one flat node, as PostgreSQL's grammar makes it:
    /// `sqlparser` nests such a chain to the left, one level per operator, and the chain is
    /// walked here in a loop, so a chain of any length binds without recursion.
    fn logic_chain(
        &mut self,
        a: &AstExpr,
        op: &BinaryOperator,
        b: &AstExpr,
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        let mut rights = vec![b];
        let mut first = a;
        while let AstExpr::BinaryOp { left, op: o, right } = first {
            if o != op || self.group_key_expr(first).is_some() {
                break;
            }
            rights.push(right);
            first = left;
        }
        let mut operands = Vec::with_capacity(rights.len() + 1);
        for e in std::iter::once(first).chain(rights.into_iter().rev()) {
            let mut x = self.predicate(e, scope)?;
            match (op, &mut x) {
                (BinaryOperator::And, Expr::And(inner)) | (BinaryOperator::Or, Expr::Or(inner)) => {
                    operands.append(inner);
                }
                _ => operands.push(x),
            }
        }
        let chain = if *op == BinaryOperator::And {
            Expr::And(operands)
        } else {
            Expr::Or(operands)
        };
        Ok((chain, SqlType::Bool))
    }

    fn regex(
        &mut self,
        a: &AstExpr,
        b: &AstExpr,
        op: &BinaryOperator,
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        let x = self.text_operand(a, scope)?;
        let p = self.text_operand(b, scope)?;
        Ok((
            Expr::Regex {
                expr: Box::new(x),
                pattern: Box::new(p),
                case_insensitive: matches!(
                    op,
                    BinaryOperator::PGRegexIMatch | BinaryOperator::PGRegexNotIMatch
                ),
                negated: matches!(
                    op,
                    BinaryOperator::PGRegexNotMatch | BinaryOperator::PGRegexNotIMatch
                ),
            },
            SqlType::Bool,
        ))
    }

    fn in_list(
        &mut self,
        x: &AstExpr,
        list: &[AstExpr],
        negated: bool,
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        let (e, mut ty) = self.expr(x, scope)?;
        if let [only] = list {
            if let Some(run) = constant_list(only) {
                return self.in_constants(x, e, ty, run, negated, scope);
            }
        }
        let mut items = Vec::with_capacity(list.len());
        for item in list {
            let (i, it) =
                self.expr_expecting(item, scope, (ty != SqlType::Unknown).then_some(ty))?;
            items.push((i, it));
        }
        for (_, it) in &items {
            ty = unify(ty, *it).ok_or_else(|| {
                SqlError::new(
                    SqlState::UNDEFINED_FUNCTION,
                    format!("operator does not exist: {} = {}", ty.name(), it.name()),
                )
            })?;
        }
        if ty == SqlType::Unknown {
            ty = SqlType::Text;
        }
        let (e0, t0) = (e, self.expr(x, scope)?.1);
        let e = self.coerce(e0, t0, ty)?;
        let list = items
            .into_iter()
            .map(|(i, it)| self.coerce(i, it, ty))
            .collect::<Result<_>>()?;
        Ok((
            Expr::InList {
                expr: Box::new(e),
                list,
                negated,
            },
            SqlType::Bool,
        ))
    }

    /// `x IN (constants)` of a list kept as text: the constants' common type found first,
    /// then each constant bound straight into the list, of that type (as [`Binder::in_list`]
    /// binds them, without a second copy of the list).
    fn in_constants(
        &mut self,
        x: &AstExpr,
        e: Expr,
        mut ty: SqlType,
        run: &str,
        negated: bool,
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        let mut count = 0usize;
        for c in constants(run) {
            let (_, it) = c?;
            ty = unify(ty, it).ok_or_else(|| {
                SqlError::new(
                    SqlState::UNDEFINED_FUNCTION,
                    format!("operator does not exist: {} = {}", ty.name(), it.name()),
                )
            })?;
            count += 1;
        }
        if ty == SqlType::Unknown {
            ty = SqlType::Text;
        }
        let (e0, t0) = (e, self.expr(x, scope)?.1);
        let e = self.coerce(e0, t0, ty)?;
        let mut list = Vec::with_capacity(count);
        for c in constants(run) {
            let (i, it) = c?;
            list.push(self.coerce(i, it, ty)?);
        }
        Ok((
            Expr::InList {
                expr: Box::new(e),
                list,
                negated,
            },
            SqlType::Bool,
        ))
    }

    pub(super) fn in_subquery(
        &mut self,
        x: &AstExpr,
        q: &ast::Query,
        negated: bool,
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        let (e, _) = self.expr(x, scope)?;
        let (node, out) = self.subquery(q, scope, None)?;
        if out.len() != 1 {
            return Err(SqlError::syntax("subquery has too many columns"));
        }
        Ok((
            Expr::Subquery(
                Box::new(node),
                SubqueryKind::In {
                    expr: Box::new(e),
                    negated,
                },
            ),
            SqlType::Bool,
        ))
    }

    fn case(
        &mut self,
        operand: Option<&AstExpr>,
        conditions: &[ast::CaseWhen],
        otherwise: Option<&AstExpr>,
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        let subject = operand.map(|o| self.expr(o, scope)).transpose()?;
        let mut whens = Vec::new();
        let mut results = Vec::new();
        for c in conditions {
            let when = match &subject {
                Some((_, st)) => {
                    let (w, wt) = self.expr_expecting(&c.condition, scope, Some(*st))?;
                    self.coerce(w, wt, *st)?
                }
                None => self.predicate(&c.condition, scope)?,
            };
            whens.push(when);
            results.push(self.expr(&c.result, scope)?);
        }
        let other = otherwise.map(|o| self.expr(o, scope)).transpose()?;
        let mut ty = SqlType::Unknown;
        for (_, t) in results.iter().chain(other.iter()) {
            ty = unify(ty, *t).ok_or_else(|| {
                SqlError::new(
                    SqlState::DATATYPE_MISMATCH,
                    format!(
                        "CASE types {} and {} cannot be matched",
                        ty.name(),
                        t.name()
                    ),
                )
            })?;
        }
        if ty == SqlType::Unknown {
            ty = SqlType::Text;
        }
        let mut pairs = Vec::new();
        for (w, (r, rt)) in whens.into_iter().zip(results) {
            pairs.push((w, self.coerce(r, rt, ty)?));
        }
        let otherwise = match other {
            Some((o, ot)) => Some(Box::new(self.coerce(o, ot, ty)?)),
            None => None,
        };
        Ok((
            Expr::Case {
                operand: subject.map(|(s, _)| Box::new(s)),
                whens: pairs,
                otherwise,
            },
            ty,
        ))
    }

    fn function(&mut self, f: &ast::Function, scope: &Scope) -> Result<(Expr, SqlType)> {
        if !f.within_group.is_empty() {
            return Err(SqlError::unsupported("WITHIN GROUP"));
        }
        let name = super::name_parts(&f.name)?.join(".");
        let (args, distinct, star, order) = match &f.args {
            FunctionArguments::None => (Vec::new(), false, false, &[][..]),
            FunctionArguments::Subquery(q) if name == "array" => {
                let (node, out) = self.subquery(q, scope, None)?;
                if out.len() != 1 {
                    return Err(SqlError::syntax("subquery must return only one column"));
                }
                let elem = match out[0].ty {
                    SqlType::Unknown => SqlType::Text,
                    t => t,
                };
                let ty =
                    SqlType::array_of(elem).ok_or_else(|| super::array::no_array_type(elem))?;
                return Ok((
                    Expr::Subquery(Box::new(node), SubqueryKind::Array(elem)),
                    ty,
                ));
            }
            FunctionArguments::Subquery(_) => {
                return Err(SqlError::unsupported("a subquery as a function argument"))
            }
            FunctionArguments::List(list) => call_arguments(&name, list)?,
        };
        let call = CallSyntax {
            name: &name,
            args: &args,
            star,
            distinct,
            order,
            filter: f.filter.as_deref(),
        };
        let r = if let Some(over) = &f.over {
            self.window_call(&call, over, scope)
        } else if let Some(agg) = func::aggregate(&name) {
            let agg = if star { AggFunc::CountStar } else { agg };
            self.aggregate_call(&call, agg, scope)
        } else if func::window_function(&name).is_some() {
            Err(SqlError::new(
                SqlState::WRONG_OBJECT_TYPE,
                format!("window function {name} requires an OVER clause"),
            ))
        } else if f.filter.is_some() {
            Err(SqlError::new(
                SqlState::WRONG_OBJECT_TYPE,
                format!("FILTER specified, but {name} is not an aggregate function"),
            ))
        } else if !order.is_empty() {
            Err(SqlError::new(
                SqlState::WRONG_OBJECT_TYPE,
                format!("ORDER BY specified, but {name} is not an aggregate function"),
            ))
        } else if star || distinct {
            return Err(SqlError::syntax(format!(
                "{name}(*) or DISTINCT is valid only for aggregates"
            )));
        } else if super::srf::is_set_returning(&name) {
            self.srf_call(&name, &args, scope)
        } else {
            self.call(&name, &args, scope)
        };
        r.map_err(|e| at_function(e, f))
    }

    fn call(&mut self, name: &str, args: &[&AstExpr], scope: &Scope) -> Result<(Expr, SqlType)> {
        let mut bound = Vec::with_capacity(args.len());
        for a in args {
            bound.push(self.expr(a, scope)?);
        }
        let types: Vec<SqlType> = bound.iter().map(|(_, t)| *t).collect();
        let (f, casts, ret) = match super::datetime::function(name, &types) {
            Some((f, casts, ret)) => (Func::DateTimeFn(f), casts, ret),
            None => func::resolve(name, &types)?,
        };
        let mut exprs = Vec::with_capacity(bound.len());
        for ((e, t), c) in bound.into_iter().zip(casts) {
            exprs.push(match c {
                Some(to) if to.is_text() && !t.is_text() && t != SqlType::Unknown => to_text(e, t),
                Some(to) => self.coerce(e, t, to)?,
                None => e,
            });
        }
        let exprs = super::json::wrap_args(f, exprs, &types);
        Ok((Expr::Func(f, exprs), ret))
    }
}

/// A call's argument list: its arguments, whether DISTINCT, whether `(*)`, and the ORDER
/// BY inside the parentheses.
#[allow(clippy::type_complexity)] // the four parts, named where they are taken apart
fn call_arguments<'a>(
    name: &str,
    list: &'a ast::FunctionArgumentList,
) -> Result<(Vec<&'a AstExpr>, bool, bool, &'a [ast::OrderByExpr])> {
    let mut order: &[ast::OrderByExpr] = &[];
    for c in &list.clauses {
        match c {
            ast::FunctionArgumentClause::OrderBy(o) => order = o,
            _ => return Err(SqlError::unsupported(format!("clauses in {name}()"))),
        }
    }
    let distinct = matches!(
        list.duplicate_treatment,
        Some(ast::DuplicateTreatment::Distinct)
    );
    let mut star = false;
    let mut args = Vec::new();
    for a in &list.args {
        match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => args.push(e),
            FunctionArg::Unnamed(FunctionArgExpr::Wildcard) => star = true,
            _ => return Err(SqlError::unsupported("named function arguments")),
        }
    }
    Ok((args, distinct, star, order))
}

/// An error of the call itself (no such function, an aggregate where none may be, ...), not
/// of one of its arguments (which has its position already), located at the function's
/// name, as PostgreSQL locates it.
/// 42883 for a binary operator no operand types take, PostgreSQL's message and hint.
pub(super) fn no_operator(left: SqlType, op: &str, right: SqlType) -> SqlError {
    SqlError::new(
        SqlState::UNDEFINED_FUNCTION,
        format!(
            "operator does not exist: {} {op} {}",
            left.name(),
            right.name()
        ),
    )
    .with_hint(
        "No operator matches the given name and argument types. You might need to add explicit type casts.",
    )
}

/// A LATERAL reference to the left side of a RIGHT or FULL join (PostgreSQL's
/// `check_lateral_ref_ok`).
fn lateral_refused(table: Option<&str>) -> SqlError {
    SqlError::new(
        SqlState::INVALID_COLUMN_REFERENCE,
        format!(
            "invalid reference to FROM-clause entry for table \"{}\"",
            table.unwrap_or("unnamed_join")
        ),
    )
    .with_detail("The combining JOIN type must be INNER or LEFT for a LATERAL reference.")
}

/// An error reading a literal's text as its type, at the literal (as PostgreSQL places
/// errors of a constant's input function).
fn at_literal(e: SqlError, span: sqlparser::tokenizer::Span) -> SqlError {
    match usize::try_from(span.start.column) {
        Ok(p) if p > 0 && span.start.line == 1 && e.position().is_none() => e.with_position(p),
        _ => e,
    }
}

fn at_function(e: SqlError, f: &ast::Function) -> SqlError {
    let own = e.position().is_none()
        && match e.sqlstate() {
            SqlState::UNDEFINED_FUNCTION => e.message().starts_with("function "),
            SqlState::GROUPING_ERROR => e.message().starts_with("aggregate function"),
            SqlState::WINDOWING_ERROR => e.message().starts_with("window function"),
            SqlState::WRONG_OBJECT_TYPE => true,
            _ => false,
        };
    let at = f.name.0.first().and_then(|part| match part {
        ast::ObjectNamePart::Identifier(i) => usize::try_from(i.span.start.column).ok(),
        ast::ObjectNamePart::Function(_) => None,
    });
    match at {
        Some(p) if own && p > 0 => e.with_position(p),
        _ => e,
    }
}

/// SQL's special names that are function calls without parentheses.
#[allow(clippy::match_same_arms)] // a table: each name on its own line
fn bare_function(name: &str) -> Option<&'static str> {
    Some(match name {
        "current_timestamp" => "now",
        "current_date" => "current_date",
        "current_user" => "current_user",
        "session_user" => "session_user",
        "user" => "user",
        "current_role" => "current_role",
        "current_schema" => "current_schema",
        "current_catalog" => "current_database",
        "localtimestamp" => "now",
        _ => return None,
    })
}

/// `e` as text (for `||` and text function arguments): a cast unless already text-like.
fn to_text(e: Expr, ty: SqlType) -> Expr {
    if ty.is_text() || ty == SqlType::Unknown {
        e
    } else {
        Expr::Cast(Box::new(e), ty, SqlType::Text)
    }
}

/// The text of a list of constants `crate::parse` kept as text, if `e` is one
/// ([`crate::literals`]).
pub(crate) fn constant_list(e: &AstExpr) -> Option<&str> {
    match e {
        AstExpr::Value(v) => match &v.value {
            AstValue::Placeholder(p) => crate::literals::run_text(p),
            _ => None,
        },
        _ => None,
    }
}

/// The rows of a list of constants kept as text, each constant bound as `sqlparser`'s
/// literal for it would be ([`constant`]).
pub(crate) fn constant_rows(run: &str) -> impl Iterator<Item = Result<Vec<(Expr, SqlType)>>> + '_ {
    crate::literals::Rows::new(run).map(|row| {
        row.map_err(|()| unreadable_list())?
            .into_iter()
            .map(constant)
            .collect()
    })
}

/// The constants of a list kept as text (an IN list), bound one at a time.
fn constants(run: &str) -> impl Iterator<Item = Result<(Expr, SqlType)>> + '_ {
    crate::literals::constants(run).map(|c| c.map_err(|()| unreadable_list()).and_then(constant))
}

fn unreadable_list() -> SqlError {
    SqlError::internal("a list of constants kept as text does not read back")
}

/// A constant of a list kept as text, bound as `sqlparser`'s literal for it would be
/// ([`literal`], [`number`]).
fn constant(c: crate::literals::Literal) -> Result<(Expr, SqlType)> {
    use crate::literals::Literal;
    match c {
        Literal::Number(n) => number(&n),
        Literal::String(s) => Ok((Expr::Const(Value::Text(s.into_owned())), SqlType::Unknown)),
        Literal::Null => Ok((Expr::Const(Value::Null), SqlType::Unknown)),
        Literal::Bool(b) => Ok((Expr::Const(Value::Bool(b)), SqlType::Bool)),
    }
}

/// A literal other than a placeholder.
fn literal(v: &AstValue) -> Result<(Expr, SqlType)> {
    match v {
        AstValue::Number(n, _) => number(n),
        AstValue::SingleQuotedString(s) | AstValue::EscapedStringLiteral(s) => {
            Ok((Expr::Const(Value::Text(s.clone())), SqlType::Unknown))
        }
        AstValue::Boolean(b) => Ok((Expr::Const(Value::Bool(*b)), SqlType::Bool)),
        AstValue::Null => Ok((Expr::Const(Value::Null), SqlType::Unknown)),
        AstValue::DollarQuotedString(d) => {
            Ok((Expr::Const(Value::Text(d.value.clone())), SqlType::Unknown))
        }
        other => Err(SqlError::unsupported(format!("literal {other}"))),
    }
}

fn is_datetime(t: SqlType) -> bool {
    matches!(
        t,
        SqlType::Date | SqlType::Timestamp | SqlType::Timestamptz | SqlType::Interval
    )
}

/// A numeric literal: integer if it fits (int4, else int8), else double precision.
fn number(n: &str) -> Result<(Expr, SqlType)> {
    if let Ok(i) = n.parse::<i64>() {
        let ty = if i32::try_from(i).is_ok() {
            SqlType::Int4
        } else {
            SqlType::Int8
        };
        return Ok((Expr::Const(Value::Int(i)), ty));
    }
    // A constant with a point or an exponent, or beyond bigint, is numeric (PostgreSQL).
    crate::numeric::parse(n)
        .map(|v| (Expr::Const(Value::Numeric(v)), SqlType::Numeric(None)))
        .map_err(|e| {
            if e.sqlstate() == "22P02" {
                SqlError::syntax(format!("invalid number \"{n}\""))
            } else {
                e
            }
        })
}

/// The expression of a value assigned to `col`: a cast where the types differ, refused at
/// bind time where no assignment cast exists (bool into an integer, ...).
pub(crate) fn assign_expr(e: Expr, ty: SqlType, col: &ColumnInfo) -> Result<Expr> {
    if ty == col.ty {
        return Ok(e);
    }
    let numeric = |t: SqlType| t.is_int() || t.is_float() || t.is_oid() || t.is_numeric();
    // Any type goes into a string column through its text form (PostgreSQL's automatic I/O
    // conversion casts are assignment casts).
    let family_ok = ty == SqlType::Unknown
        || numeric(ty) && numeric(col.ty)
        || col.ty.is_text()
        || matches!(
            (ty, col.ty),
            (SqlType::Timestamptz | SqlType::Date, SqlType::Timestamp)
                | (SqlType::Timestamp | SqlType::Date, SqlType::Timestamptz)
        )
        || ty.engine_type() == col.ty.engine_type()
            && ty != SqlType::Uuid
            && col.ty != SqlType::Uuid
            && !ty.is_text()
            && !col.ty.is_text();
    if !family_ok {
        return Err(SqlError::type_mismatch(format!(
            "column \"{}\" is of type {} but expression is of type {}",
            col.name,
            col.ty.name(),
            ty.name()
        )));
    }
    if let Expr::Const(v) = &e {
        return types::assign(v.clone(), ty, col.ty, &format!("column \"{}\"", col.name))
            .map(Expr::Const);
    }
    if col.ty.is_text() && !ty.is_text() && ty != SqlType::Unknown {
        let text = Expr::Cast(Box::new(e), ty, SqlType::Text);
        return Ok(Expr::Cast(Box::new(text), SqlType::Text, col.ty));
    }
    Ok(Expr::Cast(Box::new(e), ty, col.ty))
}
