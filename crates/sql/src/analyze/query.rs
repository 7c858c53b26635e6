//! Queries: FROM (tables, pg_catalog tables, generate_series, subqueries, LATERAL, joins),
//! WHERE, GROUP BY/HAVING with aggregates, the select list, DISTINCT, ORDER BY,
//! LIMIT/OFFSET and UNION ALL; and the access path of a single table (an index for equality
//! and range predicates on its leading columns, a sequential scan otherwise).
//!
//! Joins: a nested loop whose inner side is an index scan keyed by the outer row when the
//! join condition equates an indexed column of the right table with an expression of the
//! left; a hash join on the other equi-joins; a plain nested loop otherwise.

use std::borrow::Cow;

use quire_engine::SqlState;
use sqlparser::ast::{
    self, Expr as AstExpr, GroupByExpr, JoinConstraint, JoinOperator, LimitClause, OrderByKind,
    OrderBySort, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, SetOperator, SetQuantifier,
    TableFactor, TableWithJoins,
};

use super::window::{self, CallSyntax};
use super::{ident_name, name_parts, Binder, OutColumn};
use crate::catalog::{self, TableInfo};
use crate::error::{Result, SqlError};
use crate::func::AggFunc;
use crate::nodes::{Agg, JoinKind, Node, SortKey, WinCall, Window};
use crate::nodes::{CmpOp, Expr};
use crate::pg_catalog::CatalogTable;
use crate::types::SqlType;

/// A column a name can refer to.
#[derive(Clone, Debug)]
pub(crate) struct ScopeCol {
    pub qualifier: Option<String>,
    pub name: String,
    pub ty: SqlType,
    /// A dropped column: it holds its place in the row, but `*` leaves it out.
    pub hidden: bool,
}

/// The columns of the current row, left to right, with the table names or aliases that
/// qualify them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scope {
    pub cols: Vec<ScopeCol>,
}

impl Scope {
    pub(crate) fn empty() -> Scope {
        Scope::default()
    }

    pub(crate) fn of_table(t: &TableInfo, qualifier: Option<&str>) -> Scope {
        Scope {
            cols: t
                .columns
                .iter()
                .map(|c| ScopeCol {
                    qualifier: qualifier.map(str::to_string),
                    name: c.name.clone(),
                    ty: c.ty,
                    hidden: c.dropped,
                })
                .collect(),
        }
    }

    fn of_out(out: &[OutColumn], qualifier: Option<&str>) -> Scope {
        Scope {
            cols: out
                .iter()
                .map(|c| ScopeCol {
                    qualifier: qualifier.map(str::to_string),
                    name: c.name.clone(),
                    ty: c.ty,
                    hidden: false,
                })
                .collect(),
        }
    }

    pub(crate) fn append(&mut self, other: Scope) {
        self.cols.extend(other.cols);
    }

    pub(crate) fn width(&self) -> usize {
        self.cols.len()
    }

    /// The position and type of `qualifier.name` (or `name`): `None` if no column has that
    /// name, 42702 if several do.
    pub(crate) fn resolve(
        &self,
        qualifier: Option<&str>,
        name: &str,
    ) -> Result<Option<(usize, SqlType)>> {
        let mut found = None;
        for (i, c) in self.cols.iter().enumerate() {
            let q_ok = qualifier.is_none_or(|q| c.qualifier.as_deref() == Some(q));
            if q_ok && c.name == name {
                if found.is_some() {
                    return Err(SqlError::new(
                        SqlState::AMBIGUOUS_COLUMN,
                        format!("column reference \"{name}\" is ambiguous"),
                    ));
                }
                found = Some((i, c.ty));
            }
        }
        Ok(found)
    }

    pub(crate) fn has_qualifier(&self, q: &str) -> bool {
        self.cols.iter().any(|c| c.qualifier.as_deref() == Some(q))
    }
}

/// The aggregation context of a grouped SELECT: expressions are evaluated on the
/// aggregate's output row (group keys, then aggregates).
pub(crate) struct AggCtx {
    /// Each group key's SQL text (an expression written the same reads the key) and type.
    pub keys: Vec<(String, SqlType)>,
    /// Each group key bound over the input row: a column reference reads the key that is
    /// that very column (by position, never by name).
    pub bound: Vec<Expr>,
    pub aggs: Vec<Agg>,
    /// The scope aggregate arguments are bound in (the FROM clause's row).
    pub input: Scope,
}

impl AggCtx {
    /// The aggregate row's column that holds group key `Column(column)` of the input row.
    pub(crate) fn key_of_column(&self, column: usize) -> Option<Expr> {
        self.bound
            .iter()
            .position(|k| matches!(k, Expr::Column(c) if *c == column))
            .map(Expr::Column)
    }
}

/// What one ORDER BY item sorts on.
enum OrderTarget<'a> {
    Output(usize),
    Expr(&'a AstExpr),
}

/// A query in the making: the select list and ORDER BY of one SELECT.
struct Shape {
    exprs: Vec<Expr>,
    out: Vec<OutColumn>,
    sort: Vec<(Expr, bool, bool)>,
    /// The window calls `exprs` read (as placeholder columns until they are placed).
    windows: Vec<(Window, WinCall)>,
}

impl Binder<'_> {
    /// A query: its plan and output columns.
    pub(super) fn query(&mut self, q: &ast::Query) -> Result<(Node, Vec<OutColumn>)> {
        crate::stack::check_stack_depth()?;
        if q.with.is_some() || q.fetch.is_some() {
            return Err(SqlError::unsupported("WITH or FETCH"));
        }
        if let SetExpr::Select(sel) = &*q.body {
            let (node, out) = self.select(sel, q.order_by.as_ref())?;
            return Ok((self.limit(node, q.limit_clause.as_ref())?, out));
        }
        let (node, out) = self.set_expr(&q.body)?;
        let node = match &q.order_by {
            None => node,
            Some(ob) => {
                let scope = Scope::of_out(&out, None);
                let mut keys = Vec::new();
                for (target, desc, nulls_first) in order_items(ob, &out)? {
                    let expr = match target {
                        OrderTarget::Output(i) => Expr::Column(i),
                        OrderTarget::Expr(e) => self.expr(e, &scope)?.0,
                    };
                    keys.push(SortKey {
                        expr,
                        descending: desc,
                        nulls_first,
                    });
                }
                Node::Sort {
                    input: Box::new(node),
                    keys,
                }
            }
        };
        Ok((self.limit(node, q.limit_clause.as_ref())?, out))
    }

    fn set_expr(&mut self, body: &SetExpr) -> Result<(Node, Vec<OutColumn>)> {
        crate::stack::check_stack_depth()?;
        match body {
            SetExpr::Select(sel) => self.select(sel, None),
            SetExpr::Query(q) => self.query(q),
            SetExpr::SetOperation {
                left,
                op: SetOperator::Union,
                set_quantifier,
                right,
            } => {
                let (l, out) = self.set_expr(left)?;
                let (r, rout) = self.set_expr(right)?;
                if out.len() != rout.len() {
                    return Err(SqlError::syntax(
                        "each UNION query must have the same number of columns",
                    ));
                }
                let node = Node::Append(vec![l, r]);
                let node = match set_quantifier {
                    SetQuantifier::All => node,
                    SetQuantifier::None | SetQuantifier::Distinct => Node::Distinct {
                        input: Box::new(node),
                    },
                    other => return Err(SqlError::unsupported(format!("UNION {other}"))),
                };
                Ok((node, out))
            }
            SetExpr::Values(v) => self.values(v),
            other => Err(SqlError::unsupported(format!("query {other}"))),
        }
    }

    fn values(&mut self, v: &ast::Values) -> Result<(Node, Vec<OutColumn>)> {
        let saved = self.set_clause(Some("VALUES"));
        let r = self.values_rows(v);
        self.clause = saved;
        r
    }

    fn values_rows(&mut self, v: &ast::Values) -> Result<(Node, Vec<OutColumn>)> {
        let mut rows = Vec::with_capacity(v.rows.len());
        let mut out: Vec<OutColumn> = Vec::new();
        for r in &v.rows {
            if let [e] = r.content.as_slice() {
                if let Some(run) = super::expr::constant_list(e) {
                    for row in super::expr::constant_rows(run) {
                        push_values_row(row?, &mut out, &mut rows)?;
                    }
                    continue;
                }
            }
            let row = r
                .content
                .iter()
                .map(|e| self.expr(e, &Scope::empty()))
                .collect::<Result<Vec<_>>>()?;
            push_values_row(row, &mut out, &mut rows)?;
        }
        Ok((Node::Values(rows), out))
    }

    fn limit(&mut self, node: Node, lc: Option<&LimitClause>) -> Result<Node> {
        let (limit, offset) = match lc {
            None => return Ok(node),
            Some(LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            }) if limit_by.is_empty() => (limit.as_ref(), offset.as_ref().map(|o| &o.value)),
            Some(LimitClause::OffsetCommaLimit { offset, limit }) => (Some(limit), Some(offset)),
            Some(_) => return Err(SqlError::unsupported("LIMIT BY")),
        };
        let saved = self.set_clause(Some("LIMIT"));
        let count = self.limit_value(limit, "LIMIT");
        self.clause = Some("OFFSET");
        let offset = self.limit_value(offset, "OFFSET");
        self.clause = saved;
        let (count, offset) = (count?, offset?);
        Ok(Node::Limit {
            input: Box::new(node),
            offset,
            count,
        })
    }

    /// A LIMIT or OFFSET value (`what`): a bigint.
    fn limit_value(&mut self, e: Option<&AstExpr>, what: &str) -> Result<Option<Expr>> {
        let Some(e) = e else { return Ok(None) };
        let (x, ty) = self.expr_expecting(e, &Scope::empty(), Some(SqlType::Int8))?;
        if !(ty.is_int() || ty == SqlType::Unknown) {
            return Err(SqlError::type_mismatch(format!(
                "argument of {what} must be type bigint, not type {}",
                ty.name()
            )));
        }
        Ok(Some(x))
    }

    /// One SELECT. Its FROM and WHERE are bound with no aggregate allowed; its select list
    /// and ORDER BY first as if it were not grouped, watching for an aggregate call: if one
    /// is met, they are bound again over the rows of an Aggregate node ([`Binder::grouped`]).
    /// An enclosing SELECT's watch is set aside meanwhile (its own aggregates are its own).
    fn select(
        &mut self,
        sel: &ast::Select,
        order_by: Option<&ast::OrderBy>,
    ) -> Result<(Node, Vec<OutColumn>)> {
        let probe = self.agg_probe.take();
        let win = self.win.take();
        let in_window = std::mem::take(&mut self.in_window);
        let clause = self.set_clause(None);
        let r = self.select_inner(sel, order_by);
        self.agg_probe = probe;
        self.win = win;
        self.in_window = in_window;
        self.clause = clause;
        r
    }

    fn select_inner(
        &mut self,
        sel: &ast::Select,
        order_by: Option<&ast::OrderBy>,
    ) -> Result<(Node, Vec<OutColumn>)> {
        if sel.into.is_some() || !sel.lateral_views.is_empty() || sel.top.is_some() {
            return Err(SqlError::unsupported("SELECT INTO, TOP or LATERAL VIEW"));
        }
        let (mut node, scope) = self.from(&sel.from)?;
        if let Some(w) = &sel.selection {
            self.clause = Some("WHERE");
            let pred = self.predicate(w, &scope)?;
            self.clause = None;
            node = filtered(node, pred);
        }
        let group_by: &[AstExpr] = match &sel.group_by {
            GroupByExpr::Expressions(g, mods) if mods.is_empty() => g,
            _ => return Err(SqlError::unsupported("GROUP BY ALL or modifiers")),
        };
        let items = expand_items(&sel.projection, &scope)?;
        let order = match order_by {
            Some(ob) => order_items(ob, &items_out_names(&items))?,
            None => Vec::new(),
        };
        let grouped = !group_by.is_empty() || sel.having.is_some();
        let shape = if grouped {
            None
        } else {
            self.agg_probe = Some(false);
            let s = self.shape(&items, &order, sel, &scope)?;
            let has_aggregates = self.agg_probe.take() == Some(true);
            (!has_aggregates).then_some(s)
        };
        let (mut shape, width) = if let Some(s) = shape {
            (s, scope.width())
        } else {
            let (agg_node, shape, width) =
                self.grouped(node, &items, &order, group_by, sel, &scope)?;
            node = agg_node;
            (shape, width)
        };
        if !shape.windows.is_empty() {
            let calls = std::mem::take(&mut shape.windows);
            let (windowed, columns) = window::window_nodes(node, calls, width);
            node = windowed;
            window::place_window_columns(&mut shape.exprs, &columns);
        }
        Self::finish_select(node, shape, sel)
    }

    /// Projection, DISTINCT, ORDER BY and the hidden sort columns' removal.
    fn finish_select(
        node: Node,
        shape: Shape,
        sel: &ast::Select,
    ) -> Result<(Node, Vec<OutColumn>)> {
        let Shape {
            exprs, out, sort, ..
        } = shape;
        let visible = out.len();
        debug_assert!(
            exprs.len() >= visible,
            "hidden sort columns follow the output"
        );
        let keys: Vec<SortKey> = sort
            .into_iter()
            .map(|(expr, descending, nulls_first)| SortKey {
                expr,
                descending,
                nulls_first,
            })
            .collect();
        let widened = exprs.len() > visible;
        let mut node = Node::Project {
            input: Box::new(node),
            exprs,
        };
        match &sel.distinct {
            None => {}
            Some(ast::Distinct::Distinct) => {
                if widened {
                    return Err(SqlError::new(
                        SqlState::INVALID_COLUMN_REFERENCE,
                        "for SELECT DISTINCT, ORDER BY expressions must appear in select list",
                    ));
                }
                node = Node::Distinct {
                    input: Box::new(node),
                };
            }
            Some(_) => return Err(SqlError::unsupported("DISTINCT ON")),
        }
        if !keys.is_empty() {
            node = Node::Sort {
                input: Box::new(node),
                keys,
            };
        }
        if widened {
            node = Node::Project {
                input: Box::new(node),
                exprs: (0..visible).map(Expr::Column).collect(),
            };
        }
        Ok((node, out))
    }

    /// The select list and ORDER BY bound against `scope` (or, in a grouped query, against
    /// the aggregate's row through `self.agg`).
    fn shape(
        &mut self,
        items: &[Item],
        order: &[(OrderTarget, bool, bool)],
        sel: &ast::Select,
        scope: &Scope,
    ) -> Result<Shape> {
        let saved = self.win.replace(window::WinCtx::default());
        let r = self
            .named_windows(&sel.named_window, scope)
            .and_then(|()| self.shape_inner(items, order, scope));
        let ctx = std::mem::replace(&mut self.win, saved);
        let mut shape = r?;
        shape.windows = ctx.map(|c| c.calls).unwrap_or_default();
        Ok(shape)
    }

    /// [`Binder::shape`] within its window context.
    fn shape_inner(
        &mut self,
        items: &[Item],
        order: &[(OrderTarget, bool, bool)],
        scope: &Scope,
    ) -> Result<Shape> {
        let mut exprs = Vec::with_capacity(items.len());
        let mut out = Vec::with_capacity(items.len());
        for it in items {
            let (e, ty) = match &it.expr {
                ItemExpr::Column(i) => (Expr::Column(*i), scope.cols[*i].ty),
                ItemExpr::Ast(a) => self.expr(a, scope)?,
            };
            let e = match (&self.agg, &it.expr) {
                (Some(_), ItemExpr::Column(i)) => {
                    let c = &scope.cols[*i];
                    let a = match &c.qualifier {
                        Some(q) => format!("{q}.{}", c.name),
                        None => c.name.clone(),
                    };
                    self.agg_key(*i, &a)?
                }
                _ => e,
            };
            exprs.push(e);
            out.push(OutColumn {
                name: it.name.clone(),
                ty: if ty == SqlType::Unknown {
                    SqlType::Text
                } else {
                    ty
                },
            });
        }
        // Each sort key is an output column, or an expression over the input that becomes
        // a hidden projection column (removed again after the sort).
        let mut sort = Vec::new();
        for (target, desc, nulls_first) in order {
            let col = match target {
                OrderTarget::Output(i) => *i,
                OrderTarget::Expr(a) => {
                    let (e, _) = self.expr(a, scope)?;
                    let same = |x: &Expr| format!("{x:?}") == format!("{e:?}");
                    if let Some(i) = exprs[..out.len()].iter().position(same) {
                        i
                    } else {
                        exprs.push(e);
                        exprs.len() - 1
                    }
                }
            };
            sort.push((Expr::Column(col), *desc, *nulls_first));
        }
        Ok(Shape {
            exprs,
            out,
            sort,
            windows: Vec::new(),
        })
    }

    /// A grouped query: the Aggregate node (with HAVING), the shape over its rows and their
    /// width.
    fn grouped(
        &mut self,
        input: Node,
        items: &[Item],
        order: &[(OrderTarget, bool, bool)],
        group_by: &[AstExpr],
        sel: &ast::Select,
        scope: &Scope,
    ) -> Result<(Node, Shape, usize)> {
        let mut keys = Vec::new();
        let mut key_meta = Vec::new();
        let saved = self.set_clause(Some("GROUP BY"));
        for g in group_by {
            let g = match g {
                AstExpr::Value(v) => match &v.value {
                    ast::Value::Number(n, _) => {
                        let k: usize = n
                            .parse()
                            .map_err(|_| SqlError::syntax("bad GROUP BY position"))?;
                        let item = items.get(k.wrapping_sub(1)).ok_or_else(|| {
                            SqlError::new(
                                SqlState::INVALID_COLUMN_REFERENCE,
                                format!("GROUP BY position {k} is not in select list"),
                            )
                        })?;
                        item.ast_expr(scope)
                    }
                    _ => Cow::Borrowed(g),
                },
                AstExpr::Identifier(id) if scope.resolve(None, &ident_name(id))?.is_none() => {
                    let n = ident_name(id);
                    items
                        .iter()
                        .find(|i| i.name == n)
                        .map_or(Cow::Borrowed(g), |i| i.ast_expr(scope))
                }
                _ => Cow::Borrowed(g),
            };
            let (e, ty) = self.expr(&g, scope)?;
            keys.push(e);
            key_meta.push((g.to_string(), ty));
        }
        self.clause = saved;
        let saved = self.agg.replace(AggCtx {
            keys: key_meta,
            bound: keys.clone(),
            aggs: Vec::new(),
            input: scope.clone(),
        });
        let result: Result<(Shape, Option<Expr>)> = (|| {
            let shape = self.shape(items, order, sel, scope)?;
            let saved = self.set_clause(Some("HAVING"));
            let having = sel.having.as_ref().map(|h| self.predicate(h, scope));
            self.clause = saved;
            Ok((shape, having.transpose()?))
        })();
        let ctx = std::mem::replace(&mut self.agg, saved).expect("the context set above");
        let (shape, having) = result?;
        let width = keys.len() + ctx.aggs.len();
        let node = Node::Aggregate {
            input: Box::new(input),
            keys,
            aggs: ctx.aggs,
        };
        Ok((filtered_opt(node, having), shape, width))
    }

    /// In a grouped query, the group key that is input column `column` (42803 naming it as
    /// `text` if none).
    fn agg_key(&self, column: usize, text: &str) -> Result<Expr> {
        let ctx = self.agg.as_ref().expect("called in a grouped query");
        ctx.key_of_column(column).ok_or_else(|| must_group(text))
    }
    /// An aggregate call. In a grouped query its arguments (and FILTER and ORDER BY) are
    /// bound over the input row, once, and it reads as a column of the aggregate's row; in a
    /// select list bound first as if ungrouped ([`Binder::select`]) it is noted and stands
    /// as a NULL of its type; anywhere else it is refused (42803), as are nested aggregates.
    pub(super) fn aggregate_call(
        &mut self,
        call: &CallSyntax,
        func: AggFunc,
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        if self.in_aggregate {
            return Err(SqlError::new(
                SqlState::GROUPING_ERROR,
                "aggregate function calls cannot be nested",
            ));
        }
        let Some(ctx) = self.agg.take() else {
            if self.agg_probe.is_none() {
                return Err(SqlError::new(
                    SqlState::GROUPING_ERROR,
                    format!(
                        "aggregate functions are not allowed in {}",
                        self.clause.unwrap_or("this context")
                    ),
                ));
            }
            self.agg_probe = Some(true);
            let (_, ty) = self.aggregate_parts(call, func, scope)?;
            return Ok((Expr::Const(quire_engine::Value::Null), ty));
        };
        let input = ctx.input.clone();
        let bound = self.aggregate_parts(call, func, &input);
        self.agg = Some(ctx);
        let (agg, ty) = bound?;
        let ctx = self.agg.as_mut().expect("restored above");
        let nkeys = ctx.keys.len();
        ctx.aggs.push(agg);
        Ok((Expr::Column(nkeys + ctx.aggs.len() - 1), ty))
    }

    /// An aggregate's arguments, FILTER and ORDER BY bound over `input` (no aggregate may
    /// be among them), with the aggregate's result type.
    fn aggregate_parts(
        &mut self,
        call: &CallSyntax,
        func: AggFunc,
        input: &Scope,
    ) -> Result<(Agg, SqlType)> {
        let agg = self.agg.take();
        self.in_aggregate = true;
        let r = self.aggregate_exprs(call, input);
        self.in_aggregate = false;
        self.agg = agg;
        let (bound, filter, order) = r?;
        if call.distinct {
            let written: Vec<String> = bound.iter().map(|(e, _)| format!("{e:?}")).collect();
            if order
                .iter()
                .any(|k| !written.contains(&format!("{:?}", k.expr)))
            {
                return Err(SqlError::new(
                    SqlState::INVALID_COLUMN_REFERENCE,
                    "in an aggregate with DISTINCT, ORDER BY expressions must appear in argument list",
                ));
            }
        }
        let (args, ty) = self.aggregate_signature(call.name, func, bound)?;
        let agg = Agg {
            func,
            args,
            distinct: call.distinct,
            filter,
            order,
        };
        Ok((agg, ty))
    }

    /// The bound arguments, FILTER and ORDER BY of an aggregate call.
    #[allow(clippy::type_complexity)] // the three parts, named where they are taken apart
    fn aggregate_exprs(
        &mut self,
        call: &CallSyntax,
        input: &Scope,
    ) -> Result<(Vec<(Expr, SqlType)>, Option<Expr>, Vec<SortKey>)> {
        let mut bound = Vec::with_capacity(call.args.len());
        for a in call.args {
            bound.push(self.expr(a, input)?);
        }
        let filter = call.filter.map(|f| self.predicate(f, input)).transpose()?;
        let mut order = Vec::with_capacity(call.order.len());
        for o in call.order {
            let (descending, nulls_first) = sort_options(&o.options)?;
            order.push(SortKey {
                expr: self.expr(&o.expr, input)?.0,
                descending,
                nulls_first,
            });
        }
        Ok((bound, filter, order))
    }

    /// An aggregate's bound arguments cast as it takes them, and its result type; 42883 for
    /// a call no aggregate of that name takes.
    pub(super) fn aggregate_signature(
        &mut self,
        name: &str,
        func: AggFunc,
        mut bound: Vec<(Expr, SqlType)>,
    ) -> Result<(Vec<Expr>, SqlType)> {
        let types: Vec<SqlType> = bound.iter().map(|(_, t)| *t).collect();
        let no_such = || crate::func::no_such_function(name, &types);
        if func == AggFunc::Count && bound.is_empty() {
            return Err(SqlError::new(
                SqlState::WRONG_OBJECT_TYPE,
                format!("{name}(*) must be used to call a parameterless aggregate function"),
            ));
        }
        if bound.len() != func.arity() {
            return Err(no_such());
        }
        let Some(mut arg_ty) = bound.first().map(|(_, t)| *t) else {
            // count(*): no argument.
            return Ok((Vec::new(), SqlType::Int8));
        };
        // sum(bigint) and avg of any integer add up as numeric, as in PostgreSQL (exact, no
        // overflow); the state then adds numerics.
        if matches!((func, arg_ty), (AggFunc::Sum, SqlType::Int8))
            || func == AggFunc::Avg && arg_ty.is_int()
        {
            let (e, t) = bound.remove(0);
            let numeric = SqlType::Numeric(None);
            bound.insert(0, (Expr::Cast(Box::new(e), t, numeric), numeric));
            arg_ty = numeric;
        }
        if arg_ty == SqlType::Unknown {
            arg_ty = SqlType::Text;
        }
        let ty = func.result_type(arg_ty).ok_or_else(no_such)?;
        Ok((bound.into_iter().map(|(e, _)| e).collect(), ty))
    }

    /// In a grouped query, an expression that is a whole group key reads it.
    pub(super) fn group_key_expr(&self, e: &AstExpr) -> Option<(Expr, SqlType)> {
        let ctx = self.agg.as_ref()?;
        // Formatted no further than the longest key: an expression is met at every level of
        // its tree, and formatting each level whole would cost the square of its size.
        let longest = ctx.keys.iter().map(|(k, _)| k.len()).max()?;
        let text = text_up_to(e, longest)?;
        ctx.keys
            .iter()
            .position(|(k, _)| *k == text)
            .map(|i| (Expr::Column(i), ctx.keys[i].1))
    }

    /// FROM: the joined row source and its scope.
    fn from(&mut self, from: &[TableWithJoins]) -> Result<(Node, Scope)> {
        let mut acc: Option<(Node, Scope)> = None;
        for twj in from {
            let (node, scope) = self.table_with_joins(twj)?;
            acc = Some(match acc {
                None => (node, scope),
                Some((ln, mut ls)) => {
                    let (left_width, right_width) = (ls.width(), scope.width());
                    ls.append(scope);
                    (
                        Node::Join {
                            kind: JoinKind::Inner,
                            left: Box::new(ln),
                            right: Box::new(node),
                            on: None,
                            left_width,
                            right_width,
                            lateral: false,
                        },
                        ls,
                    )
                }
            });
        }
        Ok(acc.unwrap_or_else(|| (Node::Values(vec![Vec::new()]), Scope::empty())))
    }

    fn table_with_joins(&mut self, twj: &TableWithJoins) -> Result<(Node, Scope)> {
        crate::stack::check_stack_depth()?;
        let (mut node, mut scope) = self.factor(&twj.relation, None)?.0;
        for j in &twj.joins {
            let (kind, constraint) = match &j.join_operator {
                JoinOperator::Join(c) | JoinOperator::Inner(c) | JoinOperator::CrossJoin(c) => {
                    (JoinKind::Inner, Some(c))
                }
                JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (JoinKind::Left, Some(c)),
                other => {
                    return Err(SqlError::unsupported(
                        format!("join {other:?}")
                            .split('(')
                            .next()
                            .unwrap_or("this join")
                            .to_string(),
                    ))
                }
            };
            let ((right, rscope), lateral) = self.factor(&j.relation, Some(&scope))?;
            let left_width = scope.width();
            let right_width = rscope.width();
            let mut combined = scope.clone();
            combined.append(rscope);
            let on = match constraint {
                None | Some(JoinConstraint::None) => None,
                Some(JoinConstraint::On(e)) => {
                    let saved = self.set_clause(Some("JOIN conditions"));
                    let on = self.predicate(e, &combined);
                    self.clause = saved;
                    Some(on?)
                }
                Some(JoinConstraint::Using(cols)) => {
                    Some(using(cols, &scope, &combined, left_width)?)
                }
                Some(_) => return Err(SqlError::unsupported("NATURAL joins")),
            };
            node = Node::Join {
                kind,
                left: Box::new(node),
                right: Box::new(right),
                on,
                left_width,
                right_width,
                lateral,
            };
            scope = combined;
        }
        Ok((node, scope))
    }

    /// One FROM item; `left` is the scope a LATERAL item may refer to. Returns whether the
    /// item is lateral (runs per left row).
    fn factor(&mut self, tf: &TableFactor, left: Option<&Scope>) -> Result<((Node, Scope), bool)> {
        crate::stack::check_stack_depth()?;
        match tf {
            TableFactor::Table {
                name,
                alias,
                args: None,
                ..
            } => {
                let parts = name_parts(name)?;
                let alias_name = alias.as_ref().map(|a| ident_name(&a.name));
                let rel = parts.last().cloned().unwrap_or_default();
                let qualifier = alias_name.unwrap_or_else(|| rel.clone());
                let catalog_schema = matches!(
                    parts.first().map(String::as_str),
                    Some("pg_catalog" | "information_schema")
                ) && parts.len() == 2;
                if catalog_schema || (parts.len() == 1 && catalog::find(self.tx, &rel)?.is_none()) {
                    if let Some(t) = CatalogTable::named(&rel) {
                        let scope = Scope {
                            cols: t
                                .columns()
                                .iter()
                                .map(|(n, ty)| ScopeCol {
                                    qualifier: Some(qualifier.clone()),
                                    name: (*n).to_string(),
                                    ty: *ty,
                                    hidden: false,
                                })
                                .collect(),
                        };
                        return Ok(((Node::Catalog(t), rename(scope, alias.as_ref())), false));
                    }
                }
                let table = self.table(&super::table_name(name)?)?;
                let scope = Scope::of_table(&table, Some(&qualifier));
                Ok((
                    (
                        Node::Relation {
                            table: Box::new(table),
                            with_tid: false,
                        },
                        rename(scope, alias.as_ref()),
                    ),
                    false,
                ))
            }
            TableFactor::Table {
                name,
                alias,
                args: Some(args),
                ..
            } => {
                let fname = name_parts(name)?.join(".");
                let args: Vec<&AstExpr> = args
                    .args
                    .iter()
                    .map(|a| match a {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Ok(e),
                        _ => Err(SqlError::unsupported(
                            "named or wildcard table function arguments",
                        )),
                    })
                    .collect::<Result<_>>()?;
                let outer_scope = left.cloned().unwrap_or_default();
                let lateral = left.is_some() && !outer_scope.cols.is_empty();
                if lateral {
                    self.outer.push(outer_scope);
                }
                let r = self.table_function(&fname, &args, alias.as_ref());
                if lateral {
                    self.outer.pop();
                }
                Ok((r?, lateral))
            }
            TableFactor::UNNEST {
                alias,
                array_exprs,
                with_offset: false,
                with_ordinality: false,
                ..
            } => {
                let outer_scope = left.cloned().unwrap_or_default();
                let lateral = left.is_some() && !outer_scope.cols.is_empty();
                if lateral {
                    self.outer.push(outer_scope);
                }
                let args: Vec<&AstExpr> = array_exprs.iter().collect();
                let r = self.unnest(&args, alias.as_ref());
                if lateral {
                    self.outer.pop();
                }
                Ok((r?, lateral))
            }
            TableFactor::Derived {
                lateral,
                subquery,
                alias,
                ..
            } => {
                let lateral = *lateral && left.is_some();
                if lateral {
                    self.outer.push(left.cloned().unwrap_or_default());
                }
                let saved_agg = self.agg.take();
                let r = self.query(subquery);
                self.agg = saved_agg;
                if lateral {
                    self.outer.pop();
                }
                let (node, out) = r?;
                let q = alias.as_ref().map(|a| ident_name(&a.name));
                let scope = Scope::of_out(&out, q.as_deref());
                Ok(((node, rename(scope, alias.as_ref())), lateral))
            }
            TableFactor::NestedJoin {
                table_with_joins,
                alias: None,
            } => Ok((self.table_with_joins(table_with_joins)?, false)),
            other => Err(SqlError::unsupported(format!("FROM item {other}"))),
        }
    }

    fn table_function(
        &mut self,
        name: &str,
        args: &[&AstExpr],
        alias: Option<&ast::TableAlias>,
    ) -> Result<(Node, Scope)> {
        let short = name.strip_prefix("pg_catalog.").unwrap_or(name);
        if short == "unnest" {
            return self.unnest(args, alias);
        }
        if short != "generate_series" {
            return Err(SqlError::unsupported(format!("table function {name}")));
        }
        let mut bound = Vec::with_capacity(args.len());
        for a in args {
            bound.push(self.expr_expecting(a, &Scope::empty(), Some(SqlType::Int8))?);
        }
        let types: Vec<SqlType> = bound.iter().map(|(_, t)| *t).collect();
        let numeric = types.iter().any(|t| t.is_numeric());
        let fits = |t: &SqlType| t.is_int() || t.is_numeric() || *t == SqlType::Unknown;
        if !(2..=3).contains(&types.len()) || !types.iter().all(fits) {
            return Err(crate::func::no_such_function(short, &types));
        }
        let ty = if numeric {
            SqlType::Numeric(None)
        } else {
            SqlType::Int8
        };
        let mut it = Vec::with_capacity(bound.len());
        for (e, t) in bound {
            it.push(self.coerce(e, t, ty)?);
        }
        let mut it = it.into_iter();
        let (Some(start), Some(stop)) = (it.next(), it.next()) else {
            return Err(crate::func::no_such_function(short, &types));
        };
        let step = it.next();
        let scope = function_scope("generate_series", alias, ty);
        Ok((
            Node::Series {
                start,
                stop,
                step,
                numeric,
            },
            scope,
        ))
    }

    /// `unnest(array)` in FROM: one row per element (psql's `\d+` unnests reloptions).
    fn unnest(
        &mut self,
        args: &[&AstExpr],
        alias: Option<&ast::TableAlias>,
    ) -> Result<(Node, Scope)> {
        let [arg] = args else {
            return Err(SqlError::unsupported("unnest of several arrays"));
        };
        let (array, ty) = self.expr(arg, &Scope::empty())?;
        let elem = match ty {
            SqlType::TextArray => SqlType::Text,
            SqlType::Int2Array => SqlType::Int2,
            other => {
                return Err(SqlError::new(
                    SqlState::UNDEFINED_FUNCTION,
                    format!("function unnest({}) does not exist", other.name()),
                ))
            }
        };
        let scope = function_scope("unnest", alias, elem);
        Ok((Node::Unnest { array, elem }, scope))
    }
}

/// The one column of a table function in FROM: named by the alias's column list, else the
/// alias, else the function, as PostgreSQL names it.
fn function_scope(function: &str, alias: Option<&ast::TableAlias>, ty: SqlType) -> Scope {
    let q = alias.map_or_else(|| function.to_string(), |a| ident_name(&a.name));
    let col = alias
        .and_then(|a| a.columns.first().map(|c| ident_name(&c.name)))
        .unwrap_or_else(|| q.clone());
    Scope {
        cols: vec![ScopeCol {
            qualifier: Some(q),
            name: col,
            ty,
            hidden: false,
        }],
    }
}

/// One bound row of VALUES: its types name the output columns (the first row's; `text`
/// for an untyped one); every row as wide as the first.
fn push_values_row(
    row: Vec<(Expr, SqlType)>,
    out: &mut Vec<OutColumn>,
    rows: &mut Vec<Vec<Expr>>,
) -> Result<()> {
    for (i, (_, ty)) in row.iter().enumerate() {
        if out.len() <= i {
            out.push(OutColumn {
                name: format!("column{}", i + 1),
                ty: if *ty == SqlType::Unknown {
                    SqlType::Text
                } else {
                    *ty
                },
            });
        }
    }
    if row.len() != out.len() {
        return Err(SqlError::syntax("VALUES lists must all be the same length"));
    }
    rows.push(row.into_iter().map(|(x, _)| x).collect());
    Ok(())
}

/// `e` as SQL text, if no longer than `max_bytes`: formatting stops as soon as it is longer.
fn text_up_to(e: &AstExpr, max_bytes: usize) -> Option<String> {
    struct Bounded {
        text: String,
        max_bytes: usize,
    }
    impl std::fmt::Write for Bounded {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            if self.text.len() + s.len() > self.max_bytes {
                return Err(std::fmt::Error);
            }
            self.text.push_str(s);
            Ok(())
        }
    }
    let mut out = Bounded {
        text: String::new(),
        max_bytes,
    };
    std::fmt::write(&mut out, format_args!("{e}")).ok()?;
    Some(out.text)
}

fn must_group(name: &str) -> SqlError {
    SqlError::new(
        SqlState::GROUPING_ERROR,
        format!("column \"{name}\" must appear in the GROUP BY clause or be used in an aggregate function"),
    )
}

fn filtered(node: Node, pred: Expr) -> Node {
    Node::Filter {
        input: Box::new(node),
        pred,
    }
}

fn filtered_opt(node: Node, pred: Option<Expr>) -> Node {
    match pred {
        Some(p) => filtered(node, p),
        None => node,
    }
}

/// Column aliases (`AS o(n)`) rename the scope's columns and set its qualifier.
fn rename(mut scope: Scope, alias: Option<&ast::TableAlias>) -> Scope {
    if let Some(a) = alias {
        let q = ident_name(&a.name);
        for c in &mut scope.cols {
            c.qualifier = Some(q.clone());
        }
        for (c, new) in scope.cols.iter_mut().zip(&a.columns) {
            c.name = ident_name(&new.name);
        }
    }
    scope
}

/// JOIN ... USING (cols): equality of the same-named columns of both sides.
fn using(
    cols: &[ast::ObjectName],
    left: &Scope,
    combined: &Scope,
    left_width: usize,
) -> Result<Expr> {
    let mut conj = Vec::new();
    for c in cols {
        let n = name_parts(c)?.join(".");
        let (l, lt) = left.resolve(None, &n)?.ok_or_else(|| {
            SqlError::new(
                SqlState::UNDEFINED_COLUMN,
                format!("column \"{n}\" specified in USING clause does not exist in left table"),
            )
        })?;
        let r = combined.cols[left_width..]
            .iter()
            .position(|x| x.name == n)
            .ok_or_else(|| {
                SqlError::new(
                    SqlState::UNDEFINED_COLUMN,
                    format!(
                        "column \"{n}\" specified in USING clause does not exist in right table"
                    ),
                )
            })?;
        conj.push(Expr::Cmp(
            CmpOp::Eq,
            lt,
            Box::new(Expr::Column(l)),
            Box::new(Expr::Column(left_width + r)),
        ));
    }
    Ok(if conj.len() == 1 {
        conj.remove(0)
    } else {
        Expr::And(conj)
    })
}

/// A select-list item after `*` expansion.
pub(crate) struct Item<'a> {
    pub name: String,
    pub expr: ItemExpr<'a>,
}

pub(crate) enum ItemExpr<'a> {
    /// A column of the FROM row (from `*` or `t.*`).
    Column(usize),
    Ast(&'a AstExpr),
}

impl<'a> Item<'a> {
    /// The item as an expression (for GROUP BY position references).
    fn ast_expr(&self, scope: &Scope) -> Cow<'a, AstExpr> {
        match &self.expr {
            ItemExpr::Ast(a) => Cow::Borrowed(*a),
            ItemExpr::Column(i) => {
                let c = &scope.cols[*i];
                Cow::Owned(match &c.qualifier {
                    Some(q) => AstExpr::CompoundIdentifier(vec![
                        ast::Ident::new(q),
                        ast::Ident::new(&c.name),
                    ]),
                    None => AstExpr::Identifier(ast::Ident::new(&c.name)),
                })
            }
        }
    }
}

fn items_out_names(items: &[Item]) -> Vec<OutColumn> {
    items
        .iter()
        .map(|i| OutColumn {
            name: i.name.clone(),
            ty: SqlType::Unknown,
        })
        .collect()
}

/// The select list with `*` and `t.*` expanded to the FROM row's columns.
pub(crate) fn expand_items<'a>(
    projection: &'a [SelectItem],
    scope: &Scope,
) -> Result<Vec<Item<'a>>> {
    let mut items = Vec::new();
    for item in projection {
        match item {
            SelectItem::Wildcard(_) => {
                if scope.cols.is_empty() {
                    return Err(SqlError::syntax(
                        "SELECT * with no tables specified is not valid",
                    ));
                }
                for (i, c) in scope.cols.iter().enumerate().filter(|(_, c)| !c.hidden) {
                    items.push(Item {
                        name: c.name.clone(),
                        expr: ItemExpr::Column(i),
                    });
                }
            }
            SelectItem::QualifiedWildcard(kind, _) => {
                let SelectItemQualifiedWildcardKind::ObjectName(name) = kind else {
                    return Err(SqlError::unsupported("this wildcard"));
                };
                let q = name_parts(name)?.last().cloned().unwrap_or_default();
                if !scope.has_qualifier(&q) {
                    return Err(SqlError::new(
                        SqlState::UNDEFINED_TABLE,
                        format!("missing FROM-clause entry for table \"{q}\""),
                    ));
                }
                for (i, c) in scope.cols.iter().enumerate().filter(|(_, c)| !c.hidden) {
                    if c.qualifier.as_deref() == Some(q.as_str()) {
                        items.push(Item {
                            name: c.name.clone(),
                            expr: ItemExpr::Column(i),
                        });
                    }
                }
            }
            SelectItem::UnnamedExpr(e) => items.push(Item {
                name: output_name(e),
                expr: ItemExpr::Ast(e),
            }),
            SelectItem::ExprWithAlias { expr, alias } => items.push(Item {
                name: ident_name(alias),
                expr: ItemExpr::Ast(expr),
            }),
            SelectItem::ExprWithAliases { .. } => {
                return Err(SqlError::unsupported("several aliases"))
            }
        }
    }
    Ok(items)
}

/// ORDER BY items: an output position or name, or an expression.
fn order_items<'a>(
    ob: &'a ast::OrderBy,
    out: &[OutColumn],
) -> Result<Vec<(OrderTarget<'a>, bool, bool)>> {
    let OrderByKind::Expressions(exprs) = &ob.kind else {
        return Err(SqlError::unsupported("ORDER BY ALL"));
    };
    let mut v = Vec::new();
    for e in exprs {
        let (desc, nulls_first) = sort_options(&e.options)?;
        let target = match &e.expr {
            AstExpr::Value(v) if matches!(v.value, ast::Value::Number(..)) => {
                let ast::Value::Number(n, _) = &v.value else {
                    unreachable!()
                };
                let k: usize = n
                    .parse()
                    .map_err(|_| SqlError::syntax("bad ORDER BY position"))?;
                if k == 0 || k > out.len() {
                    return Err(SqlError::new(
                        SqlState::INVALID_COLUMN_REFERENCE,
                        format!("ORDER BY position {k} is not in select list"),
                    ));
                }
                OrderTarget::Output(k - 1)
            }
            AstExpr::Identifier(id)
                if out.iter().filter(|o| o.name == ident_name(id)).count() == 1 =>
            {
                OrderTarget::Output(
                    out.iter()
                        .position(|o| o.name == ident_name(id))
                        .expect("counted above"),
                )
            }
            other => OrderTarget::Expr(other),
        };
        v.push((target, desc, nulls_first));
    }
    Ok(v)
}

/// An ORDER BY item's direction and NULLs placement: whether descending, whether NULLs
/// first (PostgreSQL's default: NULLs sort as if larger than every value).
pub(super) fn sort_options(o: &ast::OrderByOptions) -> Result<(bool, bool)> {
    let desc = match o.sort {
        None | Some(OrderBySort::Asc) => false,
        Some(OrderBySort::Desc) => true,
        Some(_) => return Err(SqlError::unsupported("ORDER BY ... USING")),
    };
    Ok((desc, o.nulls_first.unwrap_or(desc)))
}

/// The name PostgreSQL gives an unaliased select-list item.
pub(crate) fn output_name(e: &AstExpr) -> String {
    match e {
        AstExpr::Identifier(i) => ident_name(i),
        AstExpr::CompoundIdentifier(ids) => {
            ids.last().map_or_else(|| "?column?".into(), ident_name)
        }
        AstExpr::Cast {
            data_type, expr, ..
        } => match &**expr {
            AstExpr::Identifier(_) | AstExpr::CompoundIdentifier(_) => output_name(expr),
            _ => cast_name(data_type),
        },
        AstExpr::Nested(_) => {
            let mut inner = e;
            while let AstExpr::Nested(x) = inner {
                inner = x;
            }
            output_name(inner)
        }
        AstExpr::Function(f) => f.name.0.last().map_or_else(
            || "?column?".into(),
            |p| p.to_string().to_lowercase().trim_matches('"').to_string(),
        ),
        AstExpr::Case { .. } => "case".into(),
        AstExpr::Exists { .. } => "exists".into(),
        AstExpr::Array(_) => "array".into(),
        _ => "?column?".into(),
    }
}

/// PostgreSQL names a cast's output column after the type's internal name.
fn cast_name(t: &ast::DataType) -> String {
    match SqlType::from_ast(t) {
        Ok(SqlType::Int2) => "int2".into(),
        Ok(SqlType::Int4) => "int4".into(),
        Ok(SqlType::Int8) => "int8".into(),
        Ok(SqlType::Bool) => "bool".into(),
        Ok(SqlType::Float4) => "float4".into(),
        Ok(SqlType::Float8) => "float8".into(),
        Ok(SqlType::Varchar(_)) => "varchar".into(),
        Ok(SqlType::Bpchar(_)) => "bpchar".into(),
        Ok(SqlType::Timestamptz) => "timestamptz".into(),
        Ok(t) => t.name(),
        _ => t.to_string().to_lowercase(),
    }
}
