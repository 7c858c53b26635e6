//! Set-returning function calls: `generate_series`, `unnest` and `generate_subscripts`,
//! which give any number of values per call. They run in two plan nodes, as in PostgreSQL:
//! a FROM item (`Node::FunctionScan`) and a select list's `Node::ProjectSet`.
//!
//! ## Rules
//! - A call's arguments are evaluated once, when the call starts (against the input row of
//!   a ProjectSet, or the enclosing rows of a FROM item); its values are then made one at a
//!   time as they are read (a series is never collected; an array's elements are, the
//!   array value itself being bounded).
//! - Several calls in one node run in lockstep: the node's rows are as many as the longest
//!   call's values, the shorter ones padded with NULLs; when every call gives no value, the
//!   node gives no row (for that input row).

use super::expr::Expr;
use crate::types::SqlType;

/// What `generate_series` counts in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SeriesKind {
    /// Integers (`integer` or `bigint` results, both engine `Int`s).
    Int,
    Numeric,
    /// `timestamp` or (`zoned`) `timestamptz` with an `interval` step; a `timestamptz`
    /// steps its days and months on the session zone's clock.
    Timestamp {
        zoned: bool,
    },
}

/// A set-returning function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SrfFunc {
    /// `generate_series(start, stop [, step])`.
    Series(SeriesKind),
    /// `unnest(array)`: the elements, row-major, as values of the element type.
    Unnest(SqlType),
    /// `generate_subscripts(array, dim [, reverse])`: the subscripts of dimension `dim`.
    Subscripts,
    /// The json and jsonb set-returning functions (one column each; `json(b)_each` is
    /// two calls in lockstep, its keys and its values).
    Json(crate::func::json::JsonSrf),
    /// `pg_options_to_table(text[])`: of each `name=value` element its name (`value`
    /// false) or its value; two calls in lockstep give the two columns.
    Options { value: bool },
    /// `regexp_matches`, `regexp_split_to_table`, `string_to_table`.
    Text(crate::func::regex::TextSrf),
}

impl SrfFunc {
    /// The function's SQL name (EXPLAIN's `Function Scan on ...`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            SrfFunc::Series(_) => "generate_series",
            SrfFunc::Unnest(_) => "unnest",
            SrfFunc::Subscripts => "generate_subscripts",
            SrfFunc::Json(f) => f.name(),
            SrfFunc::Options { .. } => "pg_options_to_table",
            SrfFunc::Text(f) => f.name(),
        }
    }
}

/// A call of a set-returning function with its bound arguments.
#[derive(Clone, Debug)]
pub(crate) struct SrfCall {
    pub func: SrfFunc,
    pub args: Vec<Expr>,
}
