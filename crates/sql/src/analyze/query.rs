//! Queries: FROM (tables, pg_catalog tables, generate_series, subqueries, LATERAL, joins),
//! WHERE, GROUP BY/HAVING with aggregates, the select list, DISTINCT [ON], ORDER BY,
//! OFFSET and LIMIT or FETCH FIRST [WITH TIES], VALUES and TABLE; and the access path of a
//! single table (an index for equality and range predicates on its leading columns, a
//! sequential scan otherwise).
//!
//! Joins: a nested loop whose inner side is an index scan keyed by the outer row when the
//! join condition equates an indexed column of the right table with an expression of the
//! left; a hash join on the other equi-joins; a plain nested loop otherwise.

use std::borrow::Cow;

use quire_engine::SqlState;
use sqlparser::ast::{
    self, Expr as AstExpr, GroupByExpr, JoinConstraint, JoinOperator, LimitClause, OrderByKind,
    OrderBySort, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, TableFactor, TableWithJoins,
};

use super::scope::{rename, rename_as, using_names, Matching, ScopeCol};
use super::window::{self, CallSyntax};
use super::{ident_name, name_parts, Binder, OutColumn, Scope};
use crate::catalog;
use crate::error::{Result, SqlError};
use crate::func::AggFunc;
use crate::nodes::Expr;
use crate::nodes::{Agg, JoinKind, KeyOrder, Node, SortKey, SrfCall, WinCall, Window};
use crate::pg_catalog::CatalogTable;
use crate::types::SqlType;

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
    /// The aggregate row's column that holds group key `source` (a column of the input
    /// row, or a join's merged column), matched by what it reads, never by name.
    pub(crate) fn key_of(&self, source: &Expr) -> Option<Expr> {
        let same = |k: &Expr| match (k, source) {
            (Expr::Column(a), Expr::Column(b)) => a == b,
            (Expr::Column(_), _) | (_, Expr::Column(_)) => false,
            (k, s) => format!("{k:?}") == format!("{s:?}"),
        };
        self.bound.iter().position(same).map(Expr::Column)
    }
}

/// What one ORDER BY item sorts on.
pub(super) enum OrderTarget<'a> {
    Output(usize),
    Expr(&'a AstExpr),
}

/// A query in the making: the select list and ORDER BY of one SELECT.
struct Shape {
    exprs: Vec<Expr>,
    out: Vec<OutColumn>,
    sort: Vec<SortKey>,
    /// The window calls `exprs` read (as placeholder columns until they are placed).
    windows: Vec<(Window, WinCall)>,
    /// The set-returning calls `exprs` read (as placeholder columns until they are placed).
    srfs: Vec<SrfCall>,
}

impl Binder<'_> {
    /// A query: its plan and output columns (an untyped literal's column is `text`).
    pub(super) fn query(&mut self, q: &ast::Query) -> Result<(Node, Vec<OutColumn>)> {
        let (node, mut out) = self.query_keeping_unknowns(q)?;
        for c in &mut out {
            if c.ty == SqlType::Unknown {
                c.ty = SqlType::Text;
            }
        }
        Ok((node, out))
    }

    /// [`Binder::query`], an untyped literal's column left `unknown`: INSERT ... SELECT
    /// coerces it to its target column's type, as PostgreSQL's `transformInsertStmt` does.
    pub(super) fn query_keeping_unknowns(
        &mut self,
        q: &ast::Query,
    ) -> Result<(Node, Vec<OutColumn>)> {
        crate::stack::check_stack_depth()?;
        // A subquery's set-returning calls are its own select list's.
        let saved_srf = self.srf.take();
        let r = match &q.with {
            None => self.query_body(q),
            Some(with) => self.with_query(with, q),
        };
        self.srf = saved_srf;
        r
    }

    /// A query without its WITH clause: its body, ORDER BY, OFFSET and LIMIT or FETCH.
    /// Output columns of untyped literals stay `unknown` (a set operation resolves them).
    pub(super) fn query_body(&mut self, q: &ast::Query) -> Result<(Node, Vec<OutColumn>)> {
        let limit = self.limit_spec(q)?;
        if let SetExpr::Select(sel) = &*q.body {
            return self.select(sel, q.order_by.as_ref(), limit);
        }
        let (node, out) = self.set_expr(&q.body)?;
        let mut keys = Vec::new();
        if let Some(ob) = &q.order_by {
            for (target, descending, nulls_first) in order_items(ob, &out)? {
                let OrderTarget::Output(i) = target else {
                    return Err(setop_order_by_error(&target));
                };
                keys.push(SortKey {
                    expr: Expr::Column(i),
                    descending,
                    nulls_first,
                    order: KeyOrder::of(out.get(i).map_or(SqlType::Text, |o| o.ty)),
                });
            }
        }
        let node = if keys.is_empty() {
            node
        } else {
            Node::Sort {
                input: Box::new(node),
                keys: keys.clone(),
            }
        };
        Ok((apply_limit(node, limit, &keys)?, out))
    }

    pub(super) fn set_expr(&mut self, body: &SetExpr) -> Result<(Node, Vec<OutColumn>)> {
        crate::stack::check_stack_depth()?;
        match body {
            SetExpr::Select(sel) => self.select(sel, None, None),
            SetExpr::Query(q) => self.query(q),
            SetExpr::SetOperation {
                left,
                op,
                set_quantifier,
                right,
            } => self.set_operation(left, *op, *set_quantifier, right),
            SetExpr::Values(v) => self.values(v),
            SetExpr::Table(t) => self.table_statement(t),
            SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_) => {
                Err(SqlError::unsupported("data-modifying statements in WITH"))
            }
        }
    }

    /// `TABLE name`: every column of the table, as `SELECT * FROM name`.
    fn table_statement(&mut self, t: &ast::Table) -> Result<(Node, Vec<OutColumn>)> {
        let idents: Vec<ast::Ident> = t.schema_name.iter().chain(&t.table_name).cloned().collect();
        let (node, scope) = self.named_table(&ast::ObjectName::from(idents), None)?;
        let mut exprs = Vec::new();
        let mut out = Vec::new();
        for (i, c) in scope
            .cols
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.hidden && !c.system)
        {
            exprs.push(Expr::Column(i));
            out.push(OutColumn {
                name: c.name.clone(),
                ty: c.ty,
            });
        }
        let node = Node::Project {
            input: Box::new(node),
            exprs,
        };
        Ok((node, out))
    }

    fn values(&mut self, v: &ast::Values) -> Result<(Node, Vec<OutColumn>)> {
        let saved = self.set_clause(Some("VALUES"));
        let r = self.values_rows(v);
        self.clause = saved;
        r
    }

    /// VALUES rows: each column's type is the common type of its rows (PostgreSQL's
    /// `select_common_type`; untyped literals alone make text), every row cast to it.
    fn values_rows(&mut self, v: &ast::Values) -> Result<(Node, Vec<OutColumn>)> {
        let mut rows: Vec<Vec<(Expr, SqlType)>> = Vec::with_capacity(v.rows.len());
        for r in &v.rows {
            if let [e] = r.content.as_slice() {
                if let Some(run) = super::expr::constant_list(e) {
                    for row in super::expr::constant_rows(run) {
                        rows.push(row?);
                    }
                    continue;
                }
            }
            let row = r
                .content
                .iter()
                .map(|e| self.expr(e, &Scope::empty()))
                .collect::<Result<Vec<_>>>()?;
            rows.push(row);
        }
        let width = rows.first().map_or(0, Vec::len);
        if rows.iter().any(|r| r.len() != width) {
            return Err(SqlError::syntax("VALUES lists must all be the same length"));
        }
        let mut types = vec![SqlType::Unknown; width];
        for row in &rows {
            for (t, (_, ty)) in types.iter_mut().zip(row) {
                *t = crate::func::unify(*t, *ty).ok_or_else(|| {
                    SqlError::type_mismatch(format!(
                        "VALUES types {} and {} cannot be matched",
                        t.name(),
                        ty.name()
                    ))
                })?;
            }
        }
        for t in &mut types {
            if *t == SqlType::Unknown {
                *t = SqlType::Text;
            }
        }
        let mut bound = Vec::with_capacity(rows.len());
        for row in rows {
            let mut exprs = Vec::with_capacity(width);
            for ((x, ty), &to) in row.into_iter().zip(&types) {
                exprs.push(if ty == to { x } else { self.coerce(x, ty, to)? });
            }
            bound.push(exprs);
        }
        let out = types
            .into_iter()
            .enumerate()
            .map(|(i, ty)| OutColumn {
                name: format!("column{}", i + 1),
                ty,
            })
            .collect();
        Ok((Node::Values(bound), out))
    }

    /// A query's OFFSET and LIMIT or FETCH FIRST, bound.
    pub(super) fn limit_spec(&mut self, q: &ast::Query) -> Result<Option<LimitSpec>> {
        let (limit, offset) = match &q.limit_clause {
            None => (None, None),
            Some(LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            }) if limit_by.is_empty() => (limit.as_ref(), offset.as_ref().map(|o| &o.value)),
            Some(LimitClause::OffsetCommaLimit { offset, limit }) => (Some(limit), Some(offset)),
            Some(_) => return Err(SqlError::unsupported("LIMIT BY")),
        };
        let one = AstExpr::value(ast::Value::Number("1".into(), false));
        let (limit, with_ties) = match &q.fetch {
            None => (limit, false),
            Some(f) if f.percent => return Err(SqlError::unsupported("FETCH ... PERCENT")),
            Some(_) if limit.is_some() => {
                return Err(SqlError::syntax("multiple LIMIT clauses not allowed"));
            }
            Some(f) => (Some(f.quantity.as_ref().unwrap_or(&one)), f.with_ties),
        };
        if limit.is_none() && offset.is_none() {
            return Ok(None);
        }
        let saved = self.set_clause(Some("LIMIT"));
        let count = self.limit_value(limit, "LIMIT");
        self.clause = Some("OFFSET");
        let offset = self.limit_value(offset, "OFFSET");
        self.clause = saved;
        Ok(Some(LimitSpec {
            offset: offset?,
            count: count?,
            with_ties,
        }))
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
        limit: Option<LimitSpec>,
    ) -> Result<(Node, Vec<OutColumn>)> {
        let probe = self.agg_probe.take();
        let win = self.win.take();
        let in_window = std::mem::take(&mut self.in_window);
        let clause = self.set_clause(None);
        let srf = self.srf.take();
        let r = self.select_inner(sel, order_by, limit);
        self.srf = srf;
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
        limit: Option<LimitSpec>,
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
        let items = expand_items(&sel.projection, &scope, !sel.from.is_empty())?;
        if self.star_target == Some(sel.projection.as_ptr() as usize) {
            self.star_items = Some(super::view::spelled_out(&items, &scope));
        }
        let names = items_out_names(&items);
        let mut order = match order_by {
            Some(ob) => order_items(ob, &names)?,
            None => Vec::new(),
        };
        // DISTINCT ON's expressions follow ORDER BY's, as targets of their own.
        let on = match &sel.distinct {
            Some(ast::Distinct::On(exprs)) => exprs
                .iter()
                .map(|e| Ok((order_target(e, &names)?, false, false)))
                .collect::<Result<Vec<_>>>()?,
            _ => Vec::new(),
        };
        let sorts = order.len();
        order.extend(on);
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
        let mut width = width;
        let mut srfs = std::mem::take(&mut shape.srfs);
        if !shape.windows.is_empty() {
            let calls = std::mem::take(&mut shape.windows);
            let input_width = width;
            width += calls.len();
            let (windowed, columns) = window::window_nodes(node, calls, input_width);
            node = windowed;
            window::place_window_columns(&mut shape.exprs, &columns);
            for c in &mut srfs {
                window::place_window_columns(&mut c.args, &columns);
            }
        }
        if !srfs.is_empty() {
            node = super::srf::project_set_nodes(node, srfs, width, &mut shape.exprs)?;
        }
        Self::finish_select(node, shape, sorts, sel, limit)
    }

    /// Projection, DISTINCT [ON], ORDER BY, OFFSET and LIMIT, and the hidden sort columns'
    /// removal. `shape.sort`'s first `sorts` keys are ORDER BY's, the rest DISTINCT ON's.
    fn finish_select(
        node: Node,
        shape: Shape,
        sorts: usize,
        sel: &ast::Select,
        limit: Option<LimitSpec>,
    ) -> Result<(Node, Vec<OutColumn>)> {
        let Shape {
            exprs,
            out,
            mut sort,
            ..
        } = shape;
        let visible = out.len();
        let on: Vec<SortKey> = sort.split_off(sorts.min(sort.len()));
        let widened = exprs.len() > visible;
        let mut node = Node::Project {
            input: Box::new(node),
            exprs,
        };
        if matches!(sel.distinct, Some(ast::Distinct::Distinct)) {
            if widened {
                return Err(SqlError::new(
                    SqlState::INVALID_COLUMN_REFERENCE,
                    "for SELECT DISTINCT, ORDER BY expressions must appear in select list",
                ));
            }
            node = Node::Distinct {
                input: Box::new(node),
                on: Vec::new(),
            };
        }
        let distinct_on = matches!(sel.distinct, Some(ast::Distinct::On(_)));
        if distinct_on {
            sort = distinct_on_sort(sort, &on)?;
        }
        let keys = sort;
        if !keys.is_empty() {
            node = Node::Sort {
                input: Box::new(node),
                keys: keys.clone(),
            };
        }
        if distinct_on {
            node = Node::Distinct {
                input: Box::new(node),
                on: on.into_iter().map(|k| k.expr).collect(),
            };
        }
        node = apply_limit(node, limit, &keys)?;
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
        let r = self.named_windows(&sel.named_window, scope).and_then(|()| {
            let saved_srf = self.srf.replace(super::srf::SrfCtx::default());
            let r = self.shape_inner(items, order, scope);
            let srf = std::mem::replace(&mut self.srf, saved_srf);
            let mut shape = r?;
            shape.srfs = srf.map(|c| c.calls).unwrap_or_default();
            Ok(shape)
        });
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
                ItemExpr::Column(i) => (scope.cols[*i].source.clone(), scope.cols[*i].ty),
                ItemExpr::Ast(a) => self.expr(a, scope)?,
            };
            let e = match (&self.agg, &it.expr) {
                (Some(_), ItemExpr::Column(i)) => {
                    let c = &scope.cols[*i];
                    let a = match &c.qualifier {
                        Some(q) => format!("{q}.{}", c.name),
                        None => c.name.clone(),
                    };
                    self.agg_key(&e, &a)?
                }
                _ => e,
            };
            exprs.push(e);
            out.push(OutColumn {
                name: it.name.clone(),
                ty,
            });
        }
        // Each sort key is an output column, or an expression over the input that becomes
        // a hidden projection column (removed again after the sort).
        let mut sort = Vec::new();
        for (target, desc, nulls_first) in order {
            let (col, ty) = match target {
                OrderTarget::Output(i) => (*i, out.get(*i).map_or(SqlType::Text, |o| o.ty)),
                OrderTarget::Expr(a) => {
                    let (e, ty) = self.expr(a, scope)?;
                    let same = |x: &Expr| format!("{x:?}") == format!("{e:?}");
                    if let Some(i) = exprs.iter().position(same) {
                        (i, ty)
                    } else {
                        exprs.push(e);
                        (exprs.len() - 1, ty)
                    }
                }
            };
            sort.push(SortKey {
                expr: Expr::Column(col),
                descending: *desc,
                nulls_first: *nulls_first,
                order: KeyOrder::of(ty),
            });
        }
        Ok(Shape {
            exprs,
            out,
            sort,
            windows: Vec::new(),
            srfs: Vec::new(),
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
        // Set-returning calls among the keys run in a ProjectSet below the aggregate.
        let saved_srf = self.srf.replace(super::srf::SrfCtx::default());
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
        let srf = std::mem::replace(&mut self.srf, saved_srf);
        let mut input = input;
        if let Some(ctx) = srf.filter(|c| !c.calls.is_empty()) {
            input = super::srf::project_set_nodes(input, ctx.calls, scope.width(), &mut keys)?;
        }
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

    /// In a grouped query, the group key that is input column `source` (42803 naming it as
    /// `text` if none).
    pub(super) fn agg_key(&self, source: &Expr, text: &str) -> Result<Expr> {
        let ctx = self.agg.as_ref().expect("called in a grouped query");
        ctx.key_of(source).ok_or_else(|| must_group(text))
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
        let parts = bound.iter().map(|(e, _)| e);
        let parts = parts.chain(&filter).chain(order.iter().map(|k| &k.expr));
        if reads_only_outer_rows(parts) {
            // PostgreSQL evaluates such a call in the enclosing query (its level is the
            // lowest its arguments reference); here it would aggregate the wrong rows.
            return Err(SqlError::unsupported(
                "an aggregate whose arguments read only an enclosing query's columns",
            ));
        }
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
        let func = func.typed(bound.first().map(|(_, t)| *t));
        let (args, ty) = Self::aggregate_signature(call.name, func, bound)?;
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
            let (expr, ty) = self.expr(&o.expr, input)?;
            order.push(SortKey {
                expr,
                descending,
                nulls_first,
                order: KeyOrder::of(ty),
            });
        }
        Ok((bound, filter, order))
    }

    /// An aggregate's bound arguments cast as it takes them, and its result type; 42883 for
    /// a call no aggregate of that name takes.
    pub(super) fn aggregate_signature(
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
        let cast = |bound: &mut Vec<(Expr, SqlType)>, i: usize, to: SqlType| {
            let (e, t) = bound.remove(i);
            let e = if t == to {
                e
            } else {
                Expr::Cast(Box::new(e), t, to)
            };
            bound.insert(i, (e, to));
        };
        let numeric = SqlType::Numeric(None);
        // sum(bigint) and avg of any integer add up as numeric, as in PostgreSQL (exact, no
        // overflow); the state then adds numerics. So do the spread aggregates of integers and
        // numerics; they take float4 as float8.
        let spread = matches!(func, AggFunc::Spread(_));
        if matches!((func, arg_ty), (AggFunc::Sum, SqlType::Int8))
            || (func == AggFunc::Avg || spread) && arg_ty.is_int()
        {
            cast(&mut bound, 0, numeric);
            arg_ty = numeric;
        } else if spread && arg_ty.is_float() {
            cast(&mut bound, 0, SqlType::Float8);
            arg_ty = SqlType::Float8;
        }
        // The regression aggregates take double precision (Y, X).
        if matches!(func, AggFunc::Regr(_)) {
            for i in 0..2 {
                let t = bound[i].1;
                if !(t.is_int() || t.is_float() || t.is_numeric() || t == SqlType::Unknown) {
                    return Err(no_such());
                }
                cast(&mut bound, i, SqlType::Float8);
            }
            arg_ty = SqlType::Float8;
        }
        // string_agg(bytea, bytea): an unknown separator is bytea's input.
        if func == AggFunc::StringAgg && arg_ty == SqlType::Bytea {
            match bound[1].1 {
                SqlType::Unknown => cast(&mut bound, 1, SqlType::Bytea),
                SqlType::Bytea => {}
                _ => return Err(no_such()),
            }
        }
        if arg_ty == SqlType::Unknown {
            arg_ty = SqlType::Text;
        }
        let ty = func.result_type(arg_ty).ok_or_else(no_such)?;
        Ok((super::json::agg_args(func, bound), ty))
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

    /// FROM: the joined row source and its scope. An item may refer to the items before
    /// it (LATERAL, or a function call).
    pub(super) fn from(&mut self, from: &[TableWithJoins]) -> Result<(Node, Scope)> {
        let mut acc: Option<(Node, Scope)> = None;
        for twj in from {
            let ((node, scope), lateral) =
                self.table_with_joins(twj, acc.as_ref().map(|a| &a.1))?;
            acc = Some(match acc {
                None => (node, scope),
                Some((ln, mut ls)) => {
                    let (left_width, right_width) = (ls.width(), scope.width());
                    ls.append(scope);
                    let join = Node::Join {
                        kind: JoinKind::Inner,
                        left: Box::new(ln),
                        right: Box::new(node),
                        on: None,
                        left_width,
                        right_width,
                        lateral,
                    };
                    (join, ls)
                }
            });
        }
        Ok(acc.unwrap_or_else(|| (Node::Values(vec![Vec::new()]), Scope::empty())))
    }

    /// One FROM list item: a table and the tables joined to it. `before` is the scope of
    /// the items before it in the list, which its first table may refer to laterally;
    /// returns whether it does.
    fn table_with_joins(
        &mut self,
        twj: &TableWithJoins,
        before: Option<&Scope>,
    ) -> Result<((Node, Scope), bool)> {
        crate::stack::check_stack_depth()?;
        // A factor is on an outer join's nullable side if a later RIGHT or FULL join has it
        // on its left, or (for a join's own factor) the join is LEFT or FULL; WITH RECURSIVE
        // refuses a recursive reference there (42P19).
        let left_nullable = |from: usize| {
            twj.joins[from..]
                .iter()
                .any(|j| join_kind(&j.join_operator).is_ok_and(|(k, _)| k.keeps_right()))
        };
        let first = self.with_outer_join(left_nullable(0), |b| b.factor(&twj.relation, before));
        let ((mut node, mut scope), lateral) = first?;
        for (i, j) in twj.joins.iter().enumerate() {
            (node, scope) = self.join(node, &scope, j, left_nullable(i + 1))?;
        }
        Ok(((node, scope), lateral))
    }

    /// `f` counted as under an outer join's nullable side when `nullable`.
    fn with_outer_join<T>(&mut self, nullable: bool, f: impl FnOnce(&mut Self) -> T) -> T {
        self.outer_joins += usize::from(nullable);
        let r = f(self);
        self.outer_joins -= usize::from(nullable);
        r
    }

    /// `left JOIN j`: the join node and its scope. `nullable` says whether a later join
    /// makes this one's right side nullable.
    fn join(
        &mut self,
        left: Node,
        scope: &Scope,
        j: &ast::Join,
        nullable: bool,
    ) -> Result<(Node, Scope)> {
        let (kind, constraint) = join_kind(&j.join_operator)?;
        // The right side of a RIGHT or FULL join may not refer to the left side (42P10).
        let mut seen = scope.clone();
        seen.lateral_refused = kind.keeps_right();
        let right = self.with_outer_join(nullable || kind.keeps_left(), |b| {
            b.factor(&j.relation, Some(&seen))
        });
        let ((right, rscope), lateral) = right?;
        let (left_width, right_width) = (scope.width(), rscope.width());
        let mut combined = scope.clone();
        combined.append(rscope);
        let matching = match constraint {
            JoinConstraint::On(e) => Matching::On(e),
            JoinConstraint::Using(cols) => Matching::Using(using_names(cols)?, None),
            JoinConstraint::UsingAlias(cols, alias) => {
                Matching::Using(using_names(cols)?, Some(ident_name(alias)))
            }
            JoinConstraint::Natural => Matching::Natural,
            JoinConstraint::None => Matching::None,
        };
        let (joined, on) = self.join_scope(kind, scope, combined, matching)?;
        let node = Node::Join {
            kind,
            left: Box::new(left),
            right: Box::new(right),
            on,
            left_width,
            right_width,
            lateral,
        };
        Ok((node, joined))
    }

    /// `f` with `left` (if any) as the innermost enclosing scope: what a LATERAL item binds
    /// in.
    fn in_lateral<T>(
        &mut self,
        left: Option<&Scope>,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        let Some(left) = left else { return f(self) };
        self.outer.push(left.clone());
        let r = f(self);
        self.outer.pop();
        r
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
            } => Ok((self.named_table(name, alias.as_ref())?, false)),
            TableFactor::Table {
                name,
                alias,
                args: Some(args),
                with_ordinality,
                ..
            } => {
                let fname = name_parts(name)?.join(".");
                let args = function_args(&args.args)?;
                let ordinality = *with_ordinality;
                let r = self.in_lateral(left, |b| {
                    b.table_function(&fname, &args, alias.as_ref(), ordinality)
                });
                Ok((r?, is_lateral(left)))
            }
            TableFactor::Function {
                name,
                args,
                with_ordinality,
                alias,
                ..
            } => {
                let fname = name_parts(name)?.join(".");
                let args = function_args(args)?;
                let ordinality = *with_ordinality;
                let r = self.in_lateral(left, |b| {
                    b.table_function(&fname, &args, alias.as_ref(), ordinality)
                });
                Ok((r?, is_lateral(left)))
            }
            TableFactor::UNNEST {
                alias,
                array_exprs,
                with_offset: false,
                with_ordinality,
                ..
            } => {
                let args: Vec<&AstExpr> = array_exprs.iter().collect();
                let ordinality = *with_ordinality;
                let r = self.in_lateral(left, |b| {
                    b.function_item("unnest", &args, alias.as_ref(), ordinality)
                });
                Ok((r?, is_lateral(left)))
            }
            TableFactor::Derived {
                lateral,
                subquery,
                alias,
                ..
            } => {
                let left = left.filter(|_| *lateral);
                let saved_agg = self.agg.take();
                let r = self.in_lateral(left, |b| b.query(subquery));
                self.agg = saved_agg;
                let (node, out) = r?;
                let lateral = is_lateral(left);
                let q = alias.as_ref().map(|a| ident_name(&a.name));
                let scope = Scope::of_out(&out, q.as_deref());
                Ok(((node, rename(scope, alias.as_ref())?), lateral))
            }
            TableFactor::NestedJoin {
                table_with_joins,
                alias,
            } => {
                // Parentheses group joins; what is before them is not theirs to see.
                let ((node, scope), _) = self.table_with_joins(table_with_joins, None)?;
                let scope = rename_as(scope, alias.as_ref(), "join expression")?;
                Ok(((node, scope), false))
            }
            other => Err(SqlError::unsupported(format!("FROM item {other}"))),
        }
    }

    /// A FROM item that is a name: a CTE in scope, a pg_catalog table or view, or a table.
    pub(super) fn named_table(
        &mut self,
        name: &ast::ObjectName,
        alias: Option<&ast::TableAlias>,
    ) -> Result<(Node, Scope)> {
        let parts = name_parts(name)?;
        if let ([only], [ast::ObjectNamePart::Identifier(ident)]) =
            (parts.as_slice(), name.0.as_slice())
        {
            let found = self.cte_reference(only, alias).map_err(|e| {
                if e.message().starts_with("recursive reference") {
                    super::with::at_ident(e, ident)
                } else {
                    e
                }
            })?;
            if let Some(found) = found {
                // A CTE's rows may change with an enclosing query's row: a subquery that
                // reads one is never run just once.
                self.lowest_outer_ref = 0;
                return Ok(found);
            }
        }
        let alias_name = alias.map(|a| ident_name(&a.name));
        let rel = parts.last().cloned().unwrap_or_default();
        let qualifier = alias_name.unwrap_or_else(|| rel.clone());
        let catalog_schema = matches!(
            parts.first().map(String::as_str),
            Some("pg_catalog" | "information_schema")
        ) && parts.len() == 2;
        if catalog_schema || (parts.len() == 1 && catalog::find(self.tx, &rel)?.is_none()) {
            let schema = parts
                .first()
                .filter(|_| parts.len() == 2)
                .map(String::as_str);
            if let Some(t) = CatalogTable::resolve(schema, &rel) {
                let mut scope = Scope::of_named(t.columns(), Some(&qualifier));
                if let Some(oid) = t.oid() {
                    scope = scope.with_tableoid(oid, &qualifier);
                }
                return Ok((Node::Catalog(t), rename(scope, alias)?));
            }
        }
        let in_public = parts.len() == 1 || (parts.len() == 2 && parts[0] == "public");
        let reserved = rel.starts_with(catalog::RESERVED_PREFIX);
        if in_public && !reserved && catalog::find(self.tx, &rel)?.is_none() {
            // One lookup for what else the name may be: a view or a sequence.
            match self.tx.relation_named(&rel)? {
                Some(quire_engine::Entry::View(v)) => {
                    return self.view_reference(v.oid, &v.name, &qualifier, alias);
                }
                Some(quire_engine::Entry::Sequence(s)) => {
                    self.note_read(s.oid);
                    let t = CatalogTable::SequenceData(u32::try_from(s.oid.0).unwrap_or(0));
                    let scope = Scope::of_named(t.columns(), Some(&qualifier));
                    return Ok((Node::Catalog(t), rename(scope, alias)?));
                }
                _ => {}
            }
        }
        let table = match self.table_of(name) {
            Err(e) if parts.len() == 1 => return Err(self.hidden_cte_hint(e, &rel)),
            other => other?,
        };
        self.note_read(table.def.oid);
        let scope = Scope::of_table(&table, Some(&qualifier))
            .with_tableoid(u32::try_from(table.def.oid.0).unwrap_or(0), &qualifier);
        let mut scope = rename(scope, alias)?;
        if qualifier != rel {
            scope.hidden_tables.push((rel, Some(qualifier)));
        }
        let node = Node::Relation {
            table: Box::new(table),
            with_tid: false,
        };
        Ok((node, scope))
    }

    fn table_function(
        &mut self,
        name: &str,
        args: &[&AstExpr],
        alias: Option<&ast::TableAlias>,
        ordinality: bool,
    ) -> Result<(Node, Scope)> {
        let short = name.strip_prefix("pg_catalog.").unwrap_or(name);
        if short == "pg_partition_ancestors" {
            return self.partition_ancestors(args, alias, ordinality);
        }
        if !super::srf::is_set_returning(short) {
            return Err(SqlError::unsupported(format!("table function {name}")));
        }
        self.function_item(short, args, alias, ordinality)
    }

    /// `pg_partition_ancestors(rel)` in FROM [WITH ORDINALITY]: the relation and its
    /// ancestors, nearest first; quire has no partitions, so the relation alone (psql's
    /// `\d` asks for it).
    fn partition_ancestors(
        &mut self,
        args: &[&AstExpr],
        alias: Option<&ast::TableAlias>,
        ordinality: bool,
    ) -> Result<(Node, Scope)> {
        let [arg] = args else {
            let types = vec![SqlType::Unknown; args.len()];
            return Err(crate::func::no_such_function(
                "pg_partition_ancestors",
                &types,
            ));
        };
        let (e, ty) = self.expr_expecting(arg, &Scope::empty(), Some(SqlType::Regclass))?;
        let rel = self.coerce(e, ty, SqlType::Regclass)?;
        let q = alias.map_or_else(
            || "pg_partition_ancestors".to_string(),
            |a| ident_name(&a.name),
        );
        let named = |i: usize, default: &str| {
            alias
                .and_then(|a| a.columns.get(i).map(|c| ident_name(&c.name)))
                .unwrap_or_else(|| default.to_string())
        };
        let mut cols = vec![(named(0, "relid"), SqlType::Regclass)];
        let mut row = vec![rel];
        if ordinality {
            cols.push((named(1, "ordinality"), SqlType::Int8));
            row.push(Expr::Const(quire_engine::Value::Int(1)));
        }
        let cols: Vec<(&str, SqlType)> = cols.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        Ok((Node::Values(vec![row]), Scope::of_named(&cols, Some(&q))))
    }
}

/// A table function's arguments (positional ones only).
fn function_args(args: &[ast::FunctionArg]) -> Result<Vec<&AstExpr>> {
    args.iter()
        .map(|a| match a {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Ok(e),
            _ => Err(SqlError::unsupported(
                "named or wildcard table function arguments",
            )),
        })
        .collect()
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

/// A join operator's type and how it matches rows (CROSS JOIN matches all).
fn join_kind(op: &JoinOperator) -> Result<(JoinKind, &JoinConstraint)> {
    Ok(match op {
        JoinOperator::Join(c) | JoinOperator::Inner(c) | JoinOperator::CrossJoin(c) => {
            (JoinKind::Inner, c)
        }
        JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (JoinKind::Left, c),
        JoinOperator::Right(c) | JoinOperator::RightOuter(c) => (JoinKind::Right, c),
        JoinOperator::FullOuter(c) => (JoinKind::Full, c),
        other => {
            let text = format!("{other:?}");
            let name = text.split('(').next().unwrap_or("this join");
            return Err(SqlError::unsupported(format!("join {name}")));
        }
    })
}

/// Whether an item that may see `left` runs per left row: there is a left side, with
/// columns, that the join type lets it see.
fn is_lateral(left: Option<&Scope>) -> bool {
    left.is_some_and(|l| !l.cols.is_empty() && !l.lateral_refused)
}

/// A select-list item after `*` expansion.
pub(crate) struct Item<'a> {
    pub name: String,
    pub expr: ItemExpr<'a>,
}

pub(crate) enum ItemExpr<'a> {
    /// A column of the FROM clause's scope (from `*` or `t.*`), by its place in the scope.
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

/// The select list with `*` and `t.*` expanded to the FROM row's columns (none for a table
/// without columns; `*` without FROM is an error).
pub(crate) fn expand_items<'a>(
    projection: &'a [SelectItem],
    scope: &Scope,
    has_from: bool,
) -> Result<Vec<Item<'a>>> {
    let mut items = Vec::new();
    for item in projection {
        match item {
            SelectItem::Wildcard(_) => {
                if !has_from {
                    return Err(SqlError::syntax(
                        "SELECT * with no tables specified is not valid",
                    ));
                }
                let starred = |(_, c): &(usize, &ScopeCol)| !c.hidden && !c.system && c.unqualified;
                for (i, c) in scope.cols.iter().enumerate().filter(starred) {
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
                for (i, c) in scope
                    .cols
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| !c.hidden && !c.system)
                {
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
pub(super) fn order_items<'a>(
    ob: &'a ast::OrderBy,
    out: &[OutColumn],
) -> Result<Vec<(OrderTarget<'a>, bool, bool)>> {
    let OrderByKind::Expressions(exprs) = &ob.kind else {
        return Err(SqlError::unsupported("ORDER BY ALL"));
    };
    let mut v = Vec::new();
    for e in exprs {
        let (desc, nulls_first) = sort_options(&e.options)?;
        let target = order_target(&e.expr, out)?;
        v.push((target, desc, nulls_first));
    }
    Ok(v)
}

/// What an ORDER BY (or DISTINCT ON) item names: an output position or an output column's
/// name, else an expression.
fn order_target<'a>(e: &'a AstExpr, out: &[OutColumn]) -> Result<OrderTarget<'a>> {
    Ok(match e {
        AstExpr::Value(v) if matches!(v.value, ast::Value::Number(..)) => {
            let ast::Value::Number(n, _) = &v.value else {
                return Err(SqlError::internal("a number that is not one"));
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
        AstExpr::Identifier(id) => {
            let name = ident_name(id);
            let mut matching = out.iter().enumerate().filter(|(_, o)| o.name == name);
            match (matching.next(), matching.next()) {
                (Some((i, _)), None) => OrderTarget::Output(i),
                _ => OrderTarget::Expr(e),
            }
        }
        other => OrderTarget::Expr(other),
    })
}

/// The error of an ORDER BY item of a set operation that is no output column.
fn setop_order_by_error(target: &OrderTarget) -> SqlError {
    if let OrderTarget::Expr(AstExpr::Identifier(id)) = target {
        return SqlError::new(
            SqlState::UNDEFINED_COLUMN,
            format!("column \"{}\" does not exist", ident_name(id)),
        );
    }
    SqlError::new(
        SqlState::FEATURE_NOT_SUPPORTED,
        "invalid UNION/INTERSECT/EXCEPT ORDER BY clause",
    )
    .with_detail("Only result column names can be used, not expressions or functions.")
    .with_hint("Add the expression/function to every SELECT, or move the UNION into a FROM clause.")
}

/// DISTINCT ON's sort: ORDER BY's keys, which must begin with DISTINCT ON's expressions
/// (in any order; 42P10 otherwise), with DISTINCT ON's others after those, as PostgreSQL's
/// transformDistinctOnClause orders them.
fn distinct_on_sort(sort: Vec<SortKey>, on: &[SortKey]) -> Result<Vec<SortKey>> {
    let same = |a: &Expr, b: &Expr| format!("{a:?}") == format!("{b:?}");
    let is_on = |e: &Expr| on.iter().any(|o| same(&o.expr, e));
    let mismatch = || {
        SqlError::new(
            SqlState::INVALID_COLUMN_REFERENCE,
            "SELECT DISTINCT ON expressions must match initial ORDER BY expressions",
        )
    };
    let mut skipped = false;
    for k in &sort {
        if !is_on(&k.expr) {
            skipped = true;
        } else if skipped {
            return Err(mismatch());
        }
    }
    let (mut keys, rest): (Vec<_>, Vec<_>) = sort.into_iter().partition(|k| is_on(&k.expr));
    for k in on {
        if !keys.iter().any(|x| same(&x.expr, &k.expr)) {
            if skipped {
                return Err(mismatch());
            }
            keys.push(k.clone());
        }
    }
    keys.extend(rest);
    Ok(keys)
}

/// A query's OFFSET and LIMIT (or FETCH FIRST), bound.
pub(super) struct LimitSpec {
    pub(super) offset: Option<Expr>,
    pub(super) count: Option<Expr>,
    /// FETCH FIRST ... WITH TIES.
    pub(super) with_ties: bool,
}

/// `node` under its OFFSET and LIMIT; WITH TIES compares on `sort` (42601 without one).
fn apply_limit(node: Node, limit: Option<LimitSpec>, sort: &[SortKey]) -> Result<Node> {
    let Some(limit) = limit else {
        return Ok(node);
    };
    if limit.with_ties && sort.is_empty() {
        return Err(SqlError::syntax(
            "WITH TIES cannot be specified without ORDER BY clause",
        ));
    }
    Ok(Node::Limit {
        input: Box::new(node),
        offset: limit.offset,
        count: limit.count,
        ties: if limit.with_ties {
            sort.to_vec()
        } else {
            Vec::new()
        },
    })
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
            // A name the operand has of its own wins over the type's (PostgreSQL's
            // FigureColname strengths).
            AstExpr::Identifier(_)
            | AstExpr::CompoundIdentifier(_)
            | AstExpr::Array(_)
            | AstExpr::Function(_)
            | AstExpr::Case { .. } => output_name(expr),
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
        AstExpr::TypedString(ts) => cast_name(&ts.data_type),
        AstExpr::Interval(_) => "interval".into(),
        AstExpr::Extract { .. } => "extract".into(),
        AstExpr::AtTimeZone { .. } => "timezone".into(),
        AstExpr::Ceil { .. } => "ceil".into(),
        AstExpr::Substring {
            shorthand: true, ..
        } => "substr".into(),
        AstExpr::Substring { .. } => "substring".into(),
        AstExpr::Position { .. } => "position".into(),
        AstExpr::Overlay { .. } => "overlay".into(),
        AstExpr::Trim { trim_where, .. } => match trim_where {
            Some(ast::TrimWhereField::Leading) => "ltrim",
            Some(ast::TrimWhereField::Trailing) => "rtrim",
            _ => "btrim",
        }
        .into(),
        AstExpr::Floor { .. } => "floor".into(),
        AstExpr::Case { .. } => "case".into(),
        AstExpr::Exists { .. } => "exists".into(),
        AstExpr::Array(_) => "array".into(),
        AstExpr::CompoundFieldAccess { root, .. } => output_name(root),
        // A scalar subquery is named after its first column (FigureColname's EXPR_SUBLINK).
        AstExpr::Subquery(q) => first_column_name(&q.body),
        _ => "?column?".into(),
    }
}

/// The name of a query body's first output column, as [`output_name`] gives it.
fn first_column_name(body: &SetExpr) -> String {
    match body {
        SetExpr::Select(s) => match s.projection.first() {
            Some(SelectItem::UnnamedExpr(e)) => output_name(e),
            Some(SelectItem::ExprWithAlias { alias, .. }) => ident_name(alias),
            _ => "?column?".into(),
        },
        SetExpr::Values(_) => "column1".into(),
        SetExpr::Query(q) => first_column_name(&q.body),
        SetExpr::SetOperation { left, .. } => first_column_name(left),
        _ => "?column?".into(),
    }
}

/// PostgreSQL names a cast's output column after the type's internal name.
fn cast_name(t: &ast::DataType) -> String {
    if let ast::DataType::Array(ast::ArrayElemTypeDef::SquareBracket(elem, _)) = t {
        return cast_name(elem);
    }
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
        Ok(SqlType::Timestamp) => "timestamp".into(),
        Ok(SqlType::Char) => "char".into(),
        Ok(t) => t.name(),
        _ => t.to_string().to_lowercase(),
    }
}

/// Whether the expressions read some enclosing query's row and never the current one.
fn reads_only_outer_rows<'e>(exprs: impl Iterator<Item = &'e Expr>) -> bool {
    let (mut outer, mut current) = (false, false);
    for e in exprs {
        e.visit(&mut |x| match x {
            Expr::Outer { .. } => outer = true,
            Expr::Column(_) => current = true,
            _ => {}
        });
    }
    outer && !current
}
