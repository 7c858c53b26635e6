//! Window functions: `f(...) OVER (...)`, the WINDOW clause, and the WindowAgg nodes a
//! SELECT gets for them.
//!
//! ## Rules
//! - Window calls are allowed in a SELECT's list and ORDER BY only (42P20 elsewhere, naming
//!   the clause), never nested (42P20) nor inside an aggregate's arguments (42803). They are
//!   bound over the row the select list sees: the FROM clause's, or the aggregate's in a
//!   grouped query (window functions are evaluated after GROUP BY and HAVING).
//! - While the select list is bound, a call reads a placeholder column
//!   ([`WINDOW_COLUMN_BASE`] + its number); once the WindowAgg nodes are built the
//!   placeholders are renumbered to the columns those nodes append. Identical calls over
//!   identical windows are computed once.
//! - Each distinct window gets one WindowAgg node over a Sort on its PARTITION BY and ORDER
//!   BY keys, as PostgreSQL plans them.
//! - Named windows follow PostgreSQL's rules: `OVER w` is w itself; `OVER (w ...)` copies
//!   w's PARTITION BY and ORDER BY and may add an ORDER BY (if w has none) and a frame (w
//!   must have none).

use quire_engine::SqlState;
use sqlparser::ast::{self, Expr as AstExpr, WindowFrameBound, WindowFrameUnits};

use super::query::sort_options;
use super::{ident_name, Binder, Scope};
use crate::error::{Result, SqlError};
use crate::func::{self, AggFunc, WinFunc};
use crate::nodes::{Expr, FrameBound, FrameUnits, KeyOrder, Node, SortKey, WinCall, Window};
use crate::types::SqlType;

/// The first placeholder column of a window call's result (see the module's rules).
pub(super) const WINDOW_COLUMN_BASE: usize = usize::MAX / 2;

/// A window definition bound: a WINDOW clause entry, or an OVER clause before its frame.
#[derive(Clone)]
struct WindowDef {
    partition: Vec<Expr>,
    order: Vec<SortKey>,
    order_types: Vec<SqlType>,
    frame: Option<(FrameUnits, FrameBound, FrameBound)>,
}

/// The window calls of one SELECT's list and ORDER BY, and its named windows.
#[derive(Default)]
pub(crate) struct WinCtx {
    named: Vec<(String, WindowDef)>,
    /// Each call with its window, in the order met.
    pub(super) calls: Vec<(Window, WinCall)>,
}

/// What a call is, besides its window: written as the parser gave it.
pub(super) struct CallSyntax<'a> {
    pub name: &'a str,
    pub args: &'a [&'a AstExpr],
    pub star: bool,
    pub distinct: bool,
    /// `ORDER BY` inside the parentheses.
    pub order: &'a [ast::OrderByExpr],
    pub filter: Option<&'a AstExpr>,
}

fn windowing(msg: impl Into<String>) -> SqlError {
    SqlError::new(SqlState::WINDOWING_ERROR, msg)
}

/// 0A000 with PostgreSQL's own message for what it does not implement either.
fn not_implemented(msg: impl Into<String>) -> SqlError {
    SqlError::new(SqlState::FEATURE_NOT_SUPPORTED, msg)
}

impl Binder<'_> {
    /// Binds the WINDOW clause into the current window context (each definition may build
    /// on an earlier one).
    pub(super) fn named_windows(
        &mut self,
        defs: &[ast::NamedWindowDefinition],
        scope: &Scope,
    ) -> Result<()> {
        for ast::NamedWindowDefinition(name, def) in defs {
            let name = ident_name(name);
            let ast::NamedWindowExpr::WindowSpec(spec) = def else {
                return Err(SqlError::syntax(
                    "a window defined as another window's name",
                ));
            };
            let def = self.window_def(spec, scope)?;
            let ctx = self
                .win
                .as_mut()
                .ok_or_else(|| SqlError::internal("no window context"))?;
            if ctx.named.iter().any(|(n, _)| *n == name) {
                return Err(windowing(format!("window \"{name}\" is already defined")));
            }
            ctx.named.push((name, def));
        }
        Ok(())
    }

    /// A named window of the current context (42704 if there is none of that name).
    fn named_window(&self, name: &ast::Ident) -> Result<WindowDef> {
        let name = ident_name(name);
        self.win
            .as_ref()
            .and_then(|c| c.named.iter().find(|(n, _)| *n == name))
            .map(|(_, d)| d.clone())
            .ok_or_else(|| {
                SqlError::new(
                    SqlState::UNDEFINED_OBJECT,
                    format!("window \"{name}\" does not exist"),
                )
            })
    }

    /// A window specification bound, with PostgreSQL's rules for one that names another.
    fn window_def(&mut self, spec: &ast::WindowSpec, scope: &Scope) -> Result<WindowDef> {
        let (mut def, base) = match &spec.window_name {
            Some(base) => (self.named_window(base)?, Some(ident_name(base))),
            None => (
                WindowDef {
                    partition: Vec::new(),
                    order: Vec::new(),
                    order_types: Vec::new(),
                    frame: None,
                },
                None,
            ),
        };
        if let Some(base) = &base {
            if !spec.partition_by.is_empty() {
                return Err(windowing(format!(
                    "cannot override PARTITION BY clause of window \"{base}\""
                )));
            }
            if !spec.order_by.is_empty() && !def.order.is_empty() {
                return Err(windowing(format!(
                    "cannot override ORDER BY clause of window \"{base}\""
                )));
            }
            if def.frame.is_some() {
                let e = windowing(format!(
                    "cannot copy window \"{base}\" because it has a frame clause"
                ));
                return Err(if spec.order_by.is_empty() && spec.window_frame.is_none() {
                    e.with_hint("Omit the parentheses in this OVER clause.")
                } else {
                    e
                });
            }
        }
        let saved = self.set_clause(Some("window definition"));
        let r = self.window_keys(spec, scope, &mut def);
        self.clause = saved;
        r?;
        if let Some(frame) = &spec.window_frame {
            def.frame = Some(self.frame(frame, &def.order_types, scope)?);
        }
        Ok(def)
    }

    /// Binds a specification's PARTITION BY and ORDER BY into `def`.
    fn window_keys(
        &mut self,
        spec: &ast::WindowSpec,
        scope: &Scope,
        def: &mut WindowDef,
    ) -> Result<()> {
        for p in &spec.partition_by {
            def.partition.push(self.expr(p, scope)?.0);
        }
        if !spec.order_by.is_empty() {
            def.order.clear();
            def.order_types.clear();
        }
        for o in &spec.order_by {
            let (descending, nulls_first) = sort_options(&o.options)?;
            let (expr, ty) = self.expr(&o.expr, scope)?;
            def.order.push(SortKey {
                expr,
                descending,
                nulls_first,
                order: KeyOrder::of(ty),
            });
            def.order_types.push(ty);
        }
        Ok(())
    }

    /// A frame clause bound: its units and bounds, checked as PostgreSQL's grammar does.
    fn frame(
        &mut self,
        frame: &ast::WindowFrame,
        order_types: &[SqlType],
        scope: &Scope,
    ) -> Result<(FrameUnits, FrameBound, FrameBound)> {
        use WindowFrameBound as B;
        let units = match frame.units {
            WindowFrameUnits::Rows => FrameUnits::Rows,
            WindowFrameUnits::Range => FrameUnits::Range,
            WindowFrameUnits::Groups => FrameUnits::Groups,
        };
        let end = frame.end_bound.as_ref().unwrap_or(&B::CurrentRow);
        match (&frame.start_bound, end) {
            (B::Following(None), _) => {
                return Err(windowing("frame start cannot be UNBOUNDED FOLLOWING"))
            }
            (_, B::Preceding(None)) => {
                return Err(windowing("frame end cannot be UNBOUNDED PRECEDING"))
            }
            (B::CurrentRow, B::Preceding(Some(_))) => {
                return Err(windowing(
                    "frame starting from current row cannot have preceding rows",
                ))
            }
            (B::Following(Some(_)), B::CurrentRow) if frame.end_bound.is_none() => {
                return Err(windowing(
                    "frame starting from following row cannot end with current row",
                ))
            }
            (B::Following(Some(_)), B::Preceding(Some(_)) | B::CurrentRow) => {
                return Err(windowing(
                    "frame starting from following row cannot have preceding rows",
                ))
            }
            _ => {}
        }
        let has_offset = |b: &B| matches!(b, B::Preceding(Some(_)) | B::Following(Some(_)));
        if units == FrameUnits::Range
            && (has_offset(&frame.start_bound) || has_offset(end))
            && order_types.len() != 1
        {
            return Err(windowing(
                "RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY column",
            ));
        }
        if units == FrameUnits::Groups && order_types.is_empty() {
            return Err(windowing("GROUPS mode requires an ORDER BY clause"));
        }
        let start = self.frame_bound(&frame.start_bound, units, order_types, scope)?;
        let end = self.frame_bound(end, units, order_types, scope)?;
        Ok((units, start, end))
    }

    /// One frame bound; an offset is a constant of bigint (ROWS, GROUPS) or of a type
    /// PostgreSQL's `in_range` takes with the ORDER BY column's (RANGE).
    fn frame_bound(
        &mut self,
        b: &WindowFrameBound,
        units: FrameUnits,
        order_types: &[SqlType],
        scope: &Scope,
    ) -> Result<FrameBound> {
        let (offset, preceding) = match b {
            WindowFrameBound::CurrentRow => return Ok(FrameBound::CurrentRow),
            WindowFrameBound::Preceding(None) => return Ok(FrameBound::UnboundedPreceding),
            WindowFrameBound::Following(None) => return Ok(FrameBound::UnboundedFollowing),
            WindowFrameBound::Preceding(Some(e)) => (e, true),
            WindowFrameBound::Following(Some(e)) => (e, false),
        };
        let what = match units {
            FrameUnits::Rows => "ROWS",
            FrameUnits::Range => "RANGE",
            FrameUnits::Groups => "GROUPS",
        };
        let target = match (units, order_types.first()) {
            (FrameUnits::Range, Some(t)) => *t,
            _ => SqlType::Int8,
        };
        let (e, ty) = self.expr_expecting(offset, scope, Some(target))?;
        if e.uses_current_row() {
            return Err(SqlError::new(
                SqlState::INVALID_COLUMN_REFERENCE,
                format!("argument of {what} must not contain variables"),
            ));
        }
        let e = if units == FrameUnits::Range {
            range_offset(e, ty, target)?
        } else if ty.is_int() || ty == SqlType::Unknown {
            self.coerce(e, ty, SqlType::Int8)?
        } else {
            return Err(SqlError::type_mismatch(format!(
                "argument of {what} must be type bigint, not type {}",
                ty.name()
            )));
        };
        Ok(if preceding {
            FrameBound::Preceding(e)
        } else {
            FrameBound::Following(e)
        })
    }

    /// A call with an OVER clause: bound, noted in the window context, read as its
    /// placeholder column.
    pub(super) fn window_call(
        &mut self,
        call: &CallSyntax,
        over: &ast::WindowType,
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        if self.in_aggregate {
            return Err(SqlError::new(
                SqlState::GROUPING_ERROR,
                "aggregate function calls cannot contain window function calls",
            ));
        }
        if self.in_window {
            return Err(windowing("window function calls cannot be nested"));
        }
        if self.win.is_none() {
            return Err(windowing(format!(
                "window functions are not allowed in {}",
                self.clause.unwrap_or("this context")
            )));
        }
        if call.distinct {
            return Err(not_implemented(
                "DISTINCT is not implemented for window functions",
            ));
        }
        if !call.order.is_empty() {
            return Err(not_implemented(
                "aggregate ORDER BY is not implemented for window functions",
            ));
        }
        self.in_window = true;
        let r = self.window_call_inner(call, over, scope);
        self.in_window = false;
        let (window, wc, ty) = r?;
        let ctx = self
            .win
            .as_mut()
            .ok_or_else(|| SqlError::internal("no window context"))?;
        let key = format!("{:?}", (&window, &wc));
        let found = ctx
            .calls
            .iter()
            .position(|c| format!("{:?}", (&c.0, &c.1)) == key);
        let k = if let Some(k) = found {
            k
        } else {
            ctx.calls.push((window, wc));
            ctx.calls.len() - 1
        };
        Ok((Expr::Column(WINDOW_COLUMN_BASE + k), ty))
    }

    fn window_call_inner(
        &mut self,
        call: &CallSyntax,
        over: &ast::WindowType,
        scope: &Scope,
    ) -> Result<(Window, WinCall, SqlType)> {
        let func = match (func::window_function(call.name), func::aggregate(call.name)) {
            (Some(f), _) => f,
            (None, Some(_)) if call.star => WinFunc::Agg(AggFunc::CountStar),
            (None, Some(a)) => WinFunc::Agg(a),
            (None, None) => return Err(self.not_a_window_function(call, scope)),
        };
        if call.filter.is_some() && !matches!(func, WinFunc::Agg(_)) {
            return Err(not_implemented(
                "FILTER is not implemented for non-aggregate window functions",
            ));
        }
        let mut bound = Vec::with_capacity(call.args.len());
        for a in call.args {
            bound.push(self.expr(a, scope)?);
        }
        let func = match func {
            WinFunc::Agg(a) => WinFunc::Agg(a.typed(bound.first().map(|(_, t)| *t))),
            f => f,
        };
        let (args, ty) = match func {
            WinFunc::Agg(a) => Self::aggregate_signature(call.name, a, bound)?,
            f => self.window_signature(call.name, f, bound)?,
        };
        let filter = call.filter.map(|f| self.predicate(f, scope)).transpose()?;
        let window = self.over(over, scope)?;
        Ok((window, WinCall { func, args, filter }, ty))
    }

    /// A built-in window function's arguments cast to its signature, and its result type.
    fn window_signature(
        &mut self,
        name: &str,
        f: WinFunc,
        bound: Vec<(Expr, SqlType)>,
    ) -> Result<(Vec<Expr>, SqlType)> {
        let hypothetical = matches!(
            f,
            WinFunc::Rank | WinFunc::DenseRank | WinFunc::PercentRank | WinFunc::CumeDist
        );
        if hypothetical && !bound.is_empty() {
            // With arguments these name PostgreSQL's hypothetical-set aggregates.
            return Err(SqlError::new(
                SqlState::WRONG_OBJECT_TYPE,
                format!("WITHIN GROUP is required for ordered-set aggregate {name}"),
            ));
        }
        let types: Vec<SqlType> = bound.iter().map(|(_, t)| *t).collect();
        let (casts, ty) = f
            .signature(&types)
            .ok_or_else(|| func::no_such_function(name, &types))?;
        let mut args = Vec::with_capacity(bound.len());
        for ((e, t), c) in bound.into_iter().zip(casts) {
            args.push(match c {
                Some(to) => self.coerce(e, t, to)?,
                None => e,
            });
        }
        Ok((args, ty))
    }

    /// The error for OVER on what is no window function nor aggregate.
    fn not_a_window_function(&mut self, call: &CallSyntax, scope: &Scope) -> SqlError {
        let mut types = Vec::new();
        for a in call.args {
            match self.expr(a, scope) {
                Ok((_, t)) => types.push(t),
                Err(e) => return e,
            }
        }
        match func::resolve(call.name, &types) {
            Ok(_) => SqlError::new(
                SqlState::WRONG_OBJECT_TYPE,
                format!(
                    "OVER specified, but {} is not a window function nor an aggregate function",
                    call.name
                ),
            ),
            Err(e) => e,
        }
    }

    /// The window an OVER clause names or specifies, with PostgreSQL's default frame
    /// where it gives none.
    fn over(&mut self, over: &ast::WindowType, scope: &Scope) -> Result<Window> {
        let def = match over {
            ast::WindowType::NamedWindow(name) => self.named_window(name)?,
            ast::WindowType::WindowSpec(spec) => self.window_def(spec, scope)?,
        };
        let (units, start, end) = def.frame.unwrap_or((
            FrameUnits::Range,
            FrameBound::UnboundedPreceding,
            FrameBound::CurrentRow,
        ));
        Ok(Window {
            partition: def.partition,
            order: def.order,
            units,
            start,
            end,
        })
    }
}

/// A RANGE offset over an ORDER BY column of type `column`: integers with integers,
/// numerics and floats with any number (PostgreSQL's `in_range` support).
fn range_offset(e: Expr, ty: SqlType, column: SqlType) -> Result<Expr> {
    let numeric = SqlType::Numeric(None);
    let to = if column.is_int() && ty.is_int() {
        SqlType::Int8
    } else if column.is_numeric() && (ty.is_int() || ty.is_numeric()) {
        numeric
    } else if column.is_float() && (ty.is_int() || ty.is_numeric() || ty.is_float()) {
        SqlType::Float8
    } else {
        return Err(not_implemented(format!(
            "RANGE with offset PRECEDING/FOLLOWING is not supported for column type {} and offset type {}",
            column.name(),
            ty.name()
        ))
        .with_hint("Cast the offset value to an appropriate type."));
    };
    Ok(if ty == to || ty.is_int() && to.is_int() {
        e
    } else {
        Expr::Cast(Box::new(e), ty, to)
    })
}

/// Window calls that share one window: its text as a key, the window, the calls with their
/// positions.
type CallGroup = (String, Window, Vec<(usize, WinCall)>);

/// `input` under one WindowAgg node per distinct window of `calls` (each over a Sort on its
/// keys), and the column each call's result is in; `width` is `input`'s row width.
pub(super) fn window_nodes(
    mut input: Node,
    calls: Vec<(Window, WinCall)>,
    width: usize,
) -> (Node, Vec<usize>) {
    let mut columns = vec![0; calls.len()];
    let mut groups: Vec<CallGroup> = Vec::new();
    for (i, (w, c)) in calls.into_iter().enumerate() {
        let key = format!("{w:?}");
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => g.2.push((i, c)),
            None => groups.push((key, w, vec![(i, c)])),
        }
    }
    let mut next = width;
    for (_, window, members) in groups {
        let mut keys: Vec<SortKey> = window
            .partition
            .iter()
            .map(|e| SortKey {
                expr: e.clone(),
                descending: false,
                nulls_first: false,
                // Partitions need only equal values together, which the engine's order gives.
                order: KeyOrder::Value,
            })
            .collect();
        keys.extend(window.order.iter().cloned());
        if !keys.is_empty() {
            input = Node::Sort {
                input: Box::new(input),
                keys,
            };
        }
        let mut wcalls = Vec::with_capacity(members.len());
        for (i, c) in members {
            columns[i] = next;
            next += 1;
            wcalls.push(c);
        }
        input = Node::WindowAgg {
            input: Box::new(input),
            window,
            calls: wcalls,
        };
    }
    (input, columns)
}

/// Reads each window call's placeholder column as the column its result is in.
pub(super) fn place_window_columns(exprs: &mut [Expr], columns: &[usize]) {
    for e in exprs {
        e.map_columns(|c| match c.checked_sub(WINDOW_COLUMN_BASE) {
            Some(k) => columns.get(k).copied().unwrap_or(c),
            None => c,
        });
    }
}
