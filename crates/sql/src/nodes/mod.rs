//! The trees a statement becomes: typed expressions ([`Expr`]), plan nodes ([`Node`]) and
//! statements ([`Plan`]). Only their shape and the walks over them live here; what builds
//! them is `crate::analyze` (logical nodes), `crate::optimize` (rules that rewrite logical
//! nodes) and `crate::planner` (physical nodes), and what runs them is `crate::exec`.
//!
//! ## Rules
//! - One node algebra, two conventions (as Calcite's logical and physical operators): the
//!   analyzer emits logical nodes only (a relation, a join with its condition); the planner
//!   replaces each with a physical one (a sequential or index scan; a nested loop, index
//!   nested loop or hash join). Nodes that are both (filter, project, sort, limit, ...)
//!   pass through. The executor refuses a logical node (XX000): a plan reaches it planned.
//! - Trees are as deep as clients make them: walks that cannot fail are loops over an
//!   explicit stack, and trees are dropped without recursion ([`dismantle`]).

mod expr;
mod plan;
mod srf;
mod statement;

#[cfg(test)]
pub(crate) use expr::dismantle;
pub(crate) use expr::{and_of, conjuncts, ArithOp, CmpOp, Expr, SubqueryKind};
pub use plan::MAX_MATERIALIZED_ROWS;
pub(crate) use plan::{
    tid_value, value_tid, Agg, Cte, FrameBound, FrameUnits, JoinKind, KeyOrder, Node, SetOpKind,
    SortKey, WinCall, Window,
};
pub(crate) use srf::{SeriesKind, SrfCall, SrfFunc};
pub(crate) use statement::{Bound, BoundCheck, NewCheck, NewForeignKey, OnConflict, Plan};
pub use statement::{OutColumn, OutColumns};
