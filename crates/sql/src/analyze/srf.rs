//! Set-returning functions bound: `generate_series`, `unnest` and `generate_subscripts` in
//! a select list (PostgreSQL 10's ProjectSet semantics) and in FROM.
//!
//! ## Rules
//! - In a select list (and its ORDER BY), and among GROUP BY's keys, a call stands as a
//!   placeholder column ([`SRF_COLUMN_BASE`] + its index) until the SELECT's other nodes
//!   are built; then [`project_set_nodes`] puts the calls in ProjectSet nodes (GROUP BY's
//!   over the SELECT's input, below the aggregate; the select list's over the rest) and
//!   reads each placeholder as the column the call's values are in. A call among another's
//!   arguments runs in a ProjectSet below the other's
//!   (`generate_series(1, generate_series(1, 3))`).
//! - Anywhere else a call is refused as PostgreSQL refuses it (0A000 naming the clause:
//!   WHERE, JOIN conditions, HAVING, LIMIT, OFFSET, VALUES, RETURNING, the arguments of an
//!   aggregate or window call, CASE and COALESCE, and below the top level of FROM); where
//!   PostgreSQL takes one that quire does not run (a window's PARTITION BY, ...) it is
//!   0A000 naming that.
//! - In FROM the calls' arguments read only enclosing rows (LATERAL); `unnest(a, b, ...)`
//!   is one call per array, in lockstep; WITH ORDINALITY adds a `bigint` column.

use quire_engine::SqlState;
use sqlparser::ast::{self, Expr as AstExpr};

use super::{ident_name, Binder, Scope};
use crate::error::{Result, SqlError};
use crate::func::json::JsonSrf;
use crate::func::regex::TextSrf;
use crate::func::Func;
use crate::nodes::{Expr, Node, SeriesKind, SrfCall, SrfFunc};
use crate::types::SqlType;

/// The first placeholder column of a select list's set-returning calls (below the window
/// calls' placeholders, far above any real column).
pub(super) const SRF_COLUMN_BASE: usize = usize::MAX / 4;

/// The set-returning calls of one select list, in the order their binding ended (a call's
/// nested calls before it).
#[derive(Default)]
pub(crate) struct SrfCtx {
    pub(super) calls: Vec<SrfCall>,
}

/// Whether `name` (possibly `pg_catalog.`-qualified) is a set-returning function.
pub(super) fn is_set_returning(name: &str) -> bool {
    matches!(
        short_name(name),
        "generate_series" | "unnest" | "generate_subscripts" | "pg_options_to_table"
    ) || JsonSrf::named(short_name(name)).is_some()
        || TextSrf::named(short_name(name)).is_some()
}

fn short_name(name: &str) -> &str {
    name.strip_prefix("pg_catalog.").unwrap_or(name)
}

const MOVE_HINT: &str =
    "You might be able to move the set-returning function into a LATERAL FROM item.";

fn refused(msg: impl Into<String>) -> SqlError {
    SqlError::new(SqlState::FEATURE_NOT_SUPPORTED, msg)
}

/// What binding FROM's function arguments sets as the clause.
pub(super) const FROM_FUNCTION: &str = "functions in FROM";

impl Binder<'_> {
    /// A set-returning call met in an expression: a placeholder column in a select list,
    /// an error anywhere else.
    pub(super) fn srf_call(
        &mut self,
        name: &str,
        args: &[&AstExpr],
        scope: &Scope,
    ) -> Result<(Expr, SqlType)> {
        if self.in_aggregate {
            return Err(refused(
                "aggregate function calls cannot contain set-returning function calls",
            )
            .with_hint(MOVE_HINT));
        }
        if self.in_window {
            return Err(refused(
                "window function calls cannot contain set-returning function calls",
            )
            .with_hint(MOVE_HINT));
        }
        if self.srf.is_none() {
            return Err(self.srf_misplaced());
        }
        if let Some(f @ JsonSrf::EachKey { .. }) = JsonSrf::named(short_name(name)) {
            return Err(SqlError::unsupported(format!(
                "{} in a select list (it returns a record): call it in FROM",
                f.name()
            )));
        }
        if short_name(name) == "pg_options_to_table" {
            return Err(SqlError::unsupported(
                "pg_options_to_table in a select list (it returns a record): call it in FROM",
            ));
        }
        let (call, ty) = self.srf_bind(name, args, scope)?;
        let ctx = self
            .srf
            .as_mut()
            .ok_or_else(|| SqlError::internal("set-returning call context"))?;
        ctx.calls.push(call);
        Ok((Expr::Column(SRF_COLUMN_BASE + ctx.calls.len() - 1), ty))
    }

    /// The error of a set-returning call where none may be.
    fn srf_misplaced(&self) -> SqlError {
        match self.clause {
            Some(FROM_FUNCTION) => {
                refused("set-returning functions must appear at top level of FROM")
            }
            Some(
                c @ ("WHERE" | "JOIN conditions" | "HAVING" | "LIMIT" | "OFFSET" | "VALUES"
                | "RETURNING" | "check constraints"),
            ) => refused(format!("set-returning functions are not allowed in {c}")),
            Some(c) => SqlError::unsupported(format!("set-returning functions in {c}")),
            None => SqlError::unsupported("set-returning functions in this place"),
        }
    }

    /// A set-returning call's arguments bound and brought to the types of the function
    /// they choose, and the type of its values.
    pub(super) fn srf_bind(
        &mut self,
        name: &str,
        args: &[&AstExpr],
        scope: &Scope,
    ) -> Result<(SrfCall, SqlType)> {
        let mut bound = Vec::with_capacity(args.len());
        for a in args {
            bound.push(self.expr(a, scope)?);
        }
        if let Some(f) = JsonSrf::named(short_name(name)) {
            return self.bind_json(f, bound);
        }
        if let Some(f) = TextSrf::named(short_name(name)) {
            return self.bind_text(f, bound);
        }
        match short_name(name) {
            "unnest" => Self::bind_unnest(bound),
            "pg_options_to_table" => self.bind_options(bound),
            "generate_subscripts" => self.bind_subscripts(bound),
            _ => self.bind_series(bound),
        }
    }

    /// A json set-returning call: its one argument brought to the document's type.
    fn bind_json(&mut self, f: JsonSrf, bound: Vec<(Expr, SqlType)>) -> Result<(SrfCall, SqlType)> {
        let types: Vec<SqlType> = bound.iter().map(|(_, t)| *t).collect();
        let doc = f.doc_type();
        let Ok([(e, t)]) = <[_; 1]>::try_from(bound) else {
            return Err(crate::func::no_such_function(f.name(), &types));
        };
        if t != doc && t != SqlType::Unknown {
            return Err(crate::func::no_such_function(f.name(), &types));
        }
        let call = SrfCall {
            func: SrfFunc::Json(f),
            args: vec![self.coerce(e, t, doc)?],
        };
        Ok((call, f.value_type()))
    }

    /// A text set-returning call: two or three text arguments.
    fn bind_text(&mut self, f: TextSrf, bound: Vec<(Expr, SqlType)>) -> Result<(SrfCall, SqlType)> {
        let types: Vec<SqlType> = bound.iter().map(|(_, t)| *t).collect();
        let texty = |t: &SqlType| {
            matches!(
                t,
                SqlType::Text
                    | SqlType::Unknown
                    | SqlType::Varchar(_)
                    | SqlType::Bpchar(_)
                    | SqlType::Name
            )
        };
        if !(2..=3).contains(&bound.len()) || !types.iter().all(texty) {
            return Err(crate::func::no_such_function(f.name(), &types));
        }
        let mut args = Vec::with_capacity(bound.len());
        for (e, t) in bound {
            args.push(self.coerce(e, t, SqlType::Text)?);
        }
        Ok((
            SrfCall {
                func: SrfFunc::Text(f),
                args,
            },
            f.value_type(),
        ))
    }

    fn bind_unnest(bound: Vec<(Expr, SqlType)>) -> Result<(SrfCall, SqlType)> {
        let types: Vec<SqlType> = bound.iter().map(|(_, t)| *t).collect();
        let Ok([(array, ty)]) = <[_; 1]>::try_from(bound) else {
            return Err(crate::func::no_such_function("unnest", &types));
        };
        let elem = array_element("unnest", &array, ty)?;
        let call = SrfCall {
            func: SrfFunc::Unnest(elem),
            args: vec![array],
        };
        Ok((call, elem))
    }

    /// `pg_options_to_table(options)`: the options' names (the values are a second call,
    /// [`Self::function_calls`]).
    fn bind_options(&mut self, bound: Vec<(Expr, SqlType)>) -> Result<(SrfCall, SqlType)> {
        let types: Vec<SqlType> = bound.iter().map(|(_, t)| *t).collect();
        let Ok([(e, t)]) = <[_; 1]>::try_from(bound) else {
            return Err(crate::func::no_such_function("pg_options_to_table", &types));
        };
        let options = self.srf_coerce(e, t, SqlType::TEXT_ARRAY, "pg_options_to_table", &types)?;
        let call = SrfCall {
            func: SrfFunc::Options { value: false },
            args: vec![options],
        };
        Ok((call, SqlType::Text))
    }

    fn bind_subscripts(&mut self, bound: Vec<(Expr, SqlType)>) -> Result<(SrfCall, SqlType)> {
        let types: Vec<SqlType> = bound.iter().map(|(_, t)| *t).collect();
        if !(2..=3).contains(&bound.len()) {
            return Err(crate::func::no_such_function("generate_subscripts", &types));
        }
        let mut args = Vec::with_capacity(bound.len());
        for (i, (e, t)) in bound.into_iter().enumerate() {
            args.push(match i {
                0 => {
                    array_element("generate_subscripts", &e, t)?;
                    e
                }
                1 => self.srf_coerce(e, t, SqlType::Int4, "generate_subscripts", &types)?,
                _ => self.srf_coerce(e, t, SqlType::Bool, "generate_subscripts", &types)?,
            });
        }
        let call = SrfCall {
            func: SrfFunc::Subscripts,
            args,
        };
        Ok((call, SqlType::Int4))
    }

    /// `e` coerced to `to`, or 42883 for the call if its type cannot be.
    fn srf_coerce(
        &mut self,
        e: Expr,
        from: SqlType,
        to: SqlType,
        name: &str,
        types: &[SqlType],
    ) -> Result<Expr> {
        let fits = from == to
            || from == SqlType::Unknown
            || (to.is_int() && from.is_int())
            || (to == SqlType::Numeric(None) && (from.is_int() || from.is_numeric()));
        if !fits {
            return Err(crate::func::no_such_function(name, types));
        }
        self.coerce(e, from, to)
    }

    fn bind_series(&mut self, bound: Vec<(Expr, SqlType)>) -> Result<(SrfCall, SqlType)> {
        let types: Vec<SqlType> = bound.iter().map(|(_, t)| *t).collect();
        let no_such = || crate::func::no_such_function("generate_series", &types);
        if !(2..=3).contains(&types.len()) {
            return Err(no_such());
        }
        let (kind, ty) = series_type(&types).ok_or_else(no_such)?;
        let mut args = Vec::with_capacity(bound.len());
        for (i, (e, t)) in bound.into_iter().enumerate() {
            args.push(match (kind, i) {
                (SeriesKind::Timestamp { .. }, 2) => {
                    if !matches!(t, SqlType::Interval | SqlType::Unknown) {
                        return Err(no_such());
                    }
                    self.coerce(e, t, SqlType::Interval)?
                }
                (SeriesKind::Timestamp { .. }, _) if t == SqlType::Date => {
                    Expr::Cast(Box::new(e), t, ty)
                }
                (SeriesKind::Timestamp { .. }, _) => self.coerce(e, t, ty)?,
                _ => self.srf_coerce(e, t, ty, "generate_series", &types)?,
            });
        }
        let call = SrfCall {
            func: SrfFunc::Series(kind),
            args,
        };
        Ok((call, ty))
    }
}

/// The function `generate_series` of argument types `types` is, and its result type:
/// of timestamps (with an interval step), numerics, `integer`s or `bigint`s.
fn series_type(types: &[SqlType]) -> Option<(SeriesKind, SqlType)> {
    use SqlType as T;
    let bounds = types.get(..2)?;
    if bounds
        .iter()
        .any(|t| matches!(t, T::Timestamp | T::Timestamptz | T::Date))
    {
        if types.len() != 3 {
            return None;
        }
        let plain = bounds
            .iter()
            .all(|t| matches!(t, T::Timestamp | T::Unknown));
        let ty = if plain { T::Timestamp } else { T::Timestamptz };
        let ok = bounds
            .iter()
            .all(|t| matches!(t, T::Timestamp | T::Timestamptz | T::Date | T::Unknown));
        return ok.then_some((SeriesKind::Timestamp { zoned: !plain }, ty));
    }
    let fits = |t: &T| t.is_int() || t.is_numeric() || *t == T::Unknown;
    if !types.iter().all(fits) {
        return None;
    }
    if types.iter().any(|t| t.is_numeric()) {
        return Some((SeriesKind::Numeric, T::Numeric(None)));
    }
    let small = types.iter().all(|t| matches!(t, T::Int2 | T::Int4));
    Some((SeriesKind::Int, if small { T::Int4 } else { T::Int8 }))
}

/// The element type of an array argument (`anyarray`): PostgreSQL's errors for an untyped
/// one and for a type that is no array.
fn array_element(name: &str, e: &Expr, ty: SqlType) -> Result<SqlType> {
    if let Some(elem) = ty.element() {
        return Ok(elem);
    }
    Err(match (ty, e) {
        (SqlType::Unknown, Expr::Param(_)) => SqlError::new(
            SqlState::DATATYPE_MISMATCH,
            "could not determine polymorphic type because input has type unknown",
        ),
        (SqlType::Unknown, _) => SqlError::new(
            SqlState::AMBIGUOUS_FUNCTION,
            format!("function {name}(unknown) is not unique"),
        )
        .with_hint(
            "Could not choose a best candidate function. You might need to add explicit type casts.",
        ),
        _ => crate::func::no_such_function(name, &[ty]),
    })
}

/// The placeholder index `c` stands for, if it is a set-returning call's.
fn placeholder(c: usize) -> Option<usize> {
    c.checked_sub(SRF_COLUMN_BASE)
        .filter(|k| *k < super::window::WINDOW_COLUMN_BASE - SRF_COLUMN_BASE)
}

fn reads_placeholder(e: &Expr) -> bool {
    e.columns().into_iter().any(|c| placeholder(c).is_some())
}

/// 0A000 if a set-returning call is inside CASE or COALESCE in `e`, as PostgreSQL refuses
/// (their branches would be evaluated for rows they are not taken in).
fn check_conditional(e: &Expr) -> Result<()> {
    let mut found = None;
    e.visit(&mut |x| {
        let what = match x {
            Expr::Case { .. } => "CASE",
            Expr::Func(Func::Coalesce, _) => "COALESCE",
            _ => return,
        };
        if found.is_none() && reads_placeholder(x) {
            found = Some(what);
        }
    });
    match found {
        Some(what) => Err(
            refused(format!("set-returning functions are not allowed in {what}"))
                .with_hint(MOVE_HINT),
        ),
        None => Ok(()),
    }
}

/// `input` (rows `width` wide) under the ProjectSet nodes that run `calls`, each call at
/// the level above the calls among its arguments; the placeholders in `exprs` and in the
/// calls' arguments read as the columns the calls' values are in.
pub(super) fn project_set_nodes(
    mut input: Node,
    calls: Vec<SrfCall>,
    width: usize,
    exprs: &mut [Expr],
) -> Result<Node> {
    for e in exprs.iter().chain(calls.iter().flat_map(|c| &c.args)) {
        check_conditional(e)?;
    }
    let mut levels: Vec<usize> = Vec::with_capacity(calls.len());
    for c in &calls {
        let inner = c
            .args
            .iter()
            .flat_map(Expr::columns)
            .filter_map(placeholder);
        let level = inner
            .map(|k| levels.get(k).map_or(0, |l| l + 1))
            .max()
            .unwrap_or(0);
        levels.push(level);
    }
    let mut columns = vec![0; calls.len()];
    let mut calls: Vec<Option<SrfCall>> = calls.into_iter().map(Some).collect();
    let mut next = width;
    let top = levels.iter().copied().max().unwrap_or(0);
    for level in 0..=top {
        let mut group = Vec::new();
        for (k, slot) in calls.iter_mut().enumerate() {
            if levels.get(k) != Some(&level) {
                continue;
            }
            let Some(mut call) = slot.take() else {
                continue;
            };
            for a in &mut call.args {
                place(a, &columns);
            }
            columns[k] = next;
            next += 1;
            group.push(call);
        }
        input = Node::ProjectSet {
            input: Box::new(input),
            srfs: group,
        };
    }
    for e in exprs {
        place(e, &columns);
    }
    Ok(input)
}

/// Reads each placeholder in `e` as the column `columns` gives it.
fn place(e: &mut Expr, columns: &[usize]) {
    e.map_columns(|c| match placeholder(c) {
        Some(k) => columns.get(k).copied().unwrap_or(c),
        None => c,
    });
}

impl Binder<'_> {
    /// Set-returning functions in FROM: `unnest(a, b, ...)` (one call per array),
    /// `generate_series(...)`, `generate_subscripts(...)`, WITH ORDINALITY or not; the
    /// columns named by the alias's column list, else (one column) the alias, else the
    /// function.
    pub(super) fn function_item(
        &mut self,
        name: &str,
        args: &[&AstExpr],
        alias: Option<&ast::TableAlias>,
        ordinality: bool,
    ) -> Result<(Node, Scope)> {
        let short = short_name(name);
        let saved_srf = self.srf.take();
        let saved = self.set_clause(Some(FROM_FUNCTION));
        let r = self.function_calls(short, args);
        self.clause = saved;
        self.srf = saved_srf;
        let (funcs, types, columns) = r?;
        let q = alias.map_or_else(|| short.to_string(), |a| ident_name(&a.name));
        let named = |i: usize| alias.and_then(|a| a.columns.get(i).map(|c| ident_name(&c.name)));
        let mut cols: Vec<(String, SqlType)> = Vec::with_capacity(types.len() + 1);
        for (i, ty) in types.iter().enumerate() {
            let default = if let Some(c) = columns.get(i) {
                (*c).to_string()
            } else if types.len() == 1 {
                q.clone()
            } else {
                short.to_string()
            };
            cols.push((named(i).unwrap_or(default), *ty));
        }
        if ordinality {
            let n = named(types.len()).unwrap_or_else(|| "ordinality".into());
            cols.push((n, SqlType::Int8));
        }
        if let Some(a) = alias.filter(|a| a.columns.len() > cols.len()) {
            return Err(SqlError::new(
                SqlState::INVALID_COLUMN_REFERENCE,
                format!(
                    "table \"{q}\" has {} columns available but {} columns specified",
                    cols.len(),
                    a.columns.len()
                ),
            ));
        }
        let cols: Vec<(&str, SqlType)> = cols.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        let node = Node::FunctionScan {
            funcs,
            ordinality,
            alias: alias.map(|a| ident_name(&a.name)),
        };
        Ok((node, Scope::of_named(&cols, Some(&q))))
    }

    /// The calls of a FROM function, their column types, and their columns' names when
    /// the function names them (`json_each`'s `key` and `value`).
    #[allow(clippy::type_complexity)] // the three parts, named where they are taken apart
    fn function_calls(
        &mut self,
        short: &str,
        args: &[&AstExpr],
    ) -> Result<(Vec<SrfCall>, Vec<SqlType>, Vec<&'static str>)> {
        let empty = Scope::empty();
        if let Some(JsonSrf::EachKey { json, text }) = JsonSrf::named(short) {
            let (keys, kt) = self.srf_bind(short, args, &empty)?;
            let values = JsonSrf::EachValue { json, text };
            let call = SrfCall {
                func: SrfFunc::Json(values),
                args: keys.args.clone(),
            };
            let types = vec![kt, values.value_type()];
            return Ok((vec![keys, call], types, vec!["key", "value"]));
        }
        if short == "pg_options_to_table" {
            let (names, t) = self.srf_bind(short, args, &empty)?;
            let values = SrfCall {
                func: SrfFunc::Options { value: true },
                args: names.args.clone(),
            };
            let columns = vec!["option_name", "option_value"];
            return Ok((vec![names, values], vec![t, t], columns));
        }
        if short == "unnest" && args.len() > 1 {
            let mut calls = Vec::with_capacity(args.len());
            let mut types = Vec::with_capacity(args.len());
            for a in args {
                let (c, t) = self.srf_bind(short, &[*a], &empty)?;
                calls.push(c);
                types.push(t);
            }
            return Ok((calls, types, Vec::new()));
        }
        let (c, t) = self.srf_bind(short, args, &empty)?;
        // The array_elements functions name their column (an OUT parameter).
        let named = matches!(c.func, SrfFunc::Json(JsonSrf::Elements { .. }));
        let columns = if named { vec!["value"] } else { Vec::new() };
        Ok((vec![c], vec![t], columns))
    }
}
