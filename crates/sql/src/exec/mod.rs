//! The executor: expressions evaluated ([`eval`]), plans run ([`run`]) and explained
//! ([`explain`]). It receives physical plans only (`crate::nodes`' rules).

mod cte;
mod eval;
mod explain;
mod run;
mod setop;
mod sort;
mod srf;
mod window;

pub(crate) use eval::reg_output;
pub(crate) use explain::explain_statement;
pub(crate) use run::{collect, limit_value, open, too_many_rows};
pub(crate) use sort::compare_keys;
