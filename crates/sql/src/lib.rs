//! # quire-sql
//!
//! quire's SQL layer (DESIGN.md layers 10-11): parse with `sqlparser`, analyze against the
//! catalog, optimize, plan, and execute through [`quire_engine::Transaction`]. It is synchronous, like
//! the engine, and knows nothing of the network.
//!
//! ## Layers, bottom to top
//!
//! A statement goes through the stages PostgreSQL and the best query engines separate:
//! parse → analyze → optimize (rewrite rules) → plan → execute, each one module. A module
//! may use the modules listed before it and never one listed after it: the engine's
//! `tests/layering.rs` reads this list and every `crate::` path of this crate's code, and
//! fails on an import that goes up.
//!
//! 0. Leaves: [`error`] (the one error type, PostgreSQL's SQLSTATEs), `literals` (long
//!    lists of constants kept as their text), `stack` (`max_stack_depth`,
//!    `check_stack_depth()`), `interrupt` (cancel and `statement_timeout`), `numeric`
//!    (exact decimal arithmetic), `datetime` (calendar, interval and date/time arithmetic),
//!    `spool` (rows past `work_mem` in a temp file), `json` (the json type's input
//!    function and string escaping).
//! 1. `types`: SQL types over the engine's, text input and output, casts, comparison;
//!    arrays in their canonical text form (`types::array`) and every type's binary format
//!    (`types::binary`).
//! 2. `roles` (roles and their SCRAM-SHA-256 verifiers), `catalog` (what SQL keeps of a
//!    table), `backends` (the server's sessions by process id), `shape` (a statement's
//!    constants taken out as parameters).
//! 3. `parse`: statement splitting, `sqlparser` (its trees' depth and memory bounded), and
//!    the utility commands it lacks; `copy`: COPY's text, CSV and binary formats; `sequence`
//!    (CREATE and ALTER SEQUENCE's options, `nextval`).
//! 4. `settings`: a session's parameters (PostgreSQL's GUCs) and the server's; the running
//!    transaction's characteristics and the scope of SET / SET LOCAL.
//! 5. `context`: what expressions and plans are evaluated against (transaction,
//!    parameters, settings, outer rows).
//! 6. `pg_catalog`: PostgreSQL's catalog tables and views, as rows.
//! 7. `func`: functions and aggregates: resolution by argument types, and implementations.
//! 8. `nodes`: the trees: typed expressions, plan nodes (logical and physical), statements.
//! 9. `exec`: the executor: expression evaluation, plan execution, EXPLAIN.
//! 10. `analyze`: names, types and parameters resolved: a statement becomes logical nodes
//!     (it chooses no access path and no join method).
//! 11. `optimize`: rewrite rules over logical nodes (CTE inlining, predicate pushdown).
//! 12. `planner`: logical nodes become physical ones (access paths, join methods).
//! 13. `session`: a client's transaction state and modes, settings, COPY and prepared
//!     statements; the pipeline per statement; the plans kept per session.
//!
//! ## Rules
//!
//! - A [`Session`] is one client's state and is used by one thread at a time: the server
//!   gives each connection an OS thread that owns its `Session` and the engine
//!   `Transaction` inside it. Anything here may block (a row lock, I/O); the async runtime
//!   never calls into this crate directly.
//! - Table definitions are the engine's catalog; what SQL adds (declared types such as
//!   `integer` over the engine's `Int`, NOT NULL, DEFAULT expressions and the sequences
//!   serial columns own, roles) lives in engine tables of its own written in the same
//!   transaction, so DDL rolls back as a whole ([`catalog`]'s rules). Sequences and numeric
//!   values are the engine's own (its `sequence` layer and value type).
//! - Memory: a sort holds at most `work_mem` of rows and spills the rest to temp files
//!   (`exec::sort`); the other nodes that materialize rows (aggregate, hash join, DISTINCT,
//!   a nested loop's inner side) are bounded by `nodes::MAX_MATERIALIZED_ROWS`, beyond
//!   which the statement fails with 54000; a statement's result is streamed. Every value a function or operator builds is at most
//!   1 GB (`types::MAX_VALUE_BYTES`, PostgreSQL's `MaxAllocSize`), its length computed and
//!   checked (54000) before it is allocated. A query string whose syntax trees would take
//!   more than 1 GB (`parse::MAX_PARSE_MEMORY_BYTES`, estimated from its tokens before
//!   `sqlparser` sees them) fails with 54000; long lists of constants, which cost
//!   `sqlparser` some 300 bytes a byte, are kept as text (`literals`) and cost about 30.
//! - Stack: a statement's trees are as deep as the client makes them. Every recursive
//!   function calls `stack::check_stack_depth()` (54001 past `max_stack_depth`, or when the
//!   thread's own stack runs short); walks that cannot fail are loops; bound expressions and
//!   plans are dropped without recursion; `sqlparser`'s trees are bounded in depth before
//!   they are built. The server runs each session on a thread of [`SESSION_STACK_BYTES`].
//! - Interrupts: a cancel request or `statement_timeout` stops a statement within a few
//!   milliseconds wherever it loops: reading rows, and in every loop that reads none (a
//!   series, a sort's comparisons, a nested loop's inner side, hashing, aggregation,
//!   DISTINCT, building a long value, LIKE and regular expressions over a long text).
//! - Errors: one type, [`SqlError`], with PostgreSQL's SQLSTATE, message, detail, hint and
//!   position. Engine errors keep theirs (23505, 40001, 42P01, ...); this layer adds 42601
//!   (syntax), 42703, 42804, 42883, 22P02, 23502, 25001, 25P02 and 0A000 for what is valid
//!   SQL that quire does not do yet (it names the feature). Only SQLSTATEs PostgreSQL
//!   defines leave the crate: a bug of its own is XX000 with a message saying what.
//! - No panics: no input makes this crate panic. Arithmetic on what a client sends is
//!   checked (22003) or bounded before it is done (dates, zone offsets, numeric digits,
//!   subscripts); an index into a row or an argument list is one binding proved.
//! - An error inside a transaction block rolls the engine transaction back at once (its
//!   locks go) and the block then refuses every statement with 25P02 until COMMIT or
//!   ROLLBACK, as PostgreSQL does.
#![deny(unsafe_code)]

mod analyze;
mod backends;
mod catalog;
mod context;
mod copy;
mod datetime;
mod error;
mod exec;
mod func;
mod interrupt;
mod json;
mod literals;
mod nodes;
mod numeric;
mod optimize;
mod parse;
mod pg_catalog;
mod planner;
mod roles;
mod sequence;
mod session;
mod settings;
mod shape;
mod spool;
mod stack;
mod types;

pub use backends::{Backend, Backends};
pub use error::{Notice, Result, Severity, SqlError};
pub use interrupt::{Alarm, Interrupt};
pub use nodes::MAX_MATERIALIZED_ROWS;
pub use nodes::{OutColumn, OutColumns};
pub use numeric::{from_binary as numeric_from_binary, to_binary as numeric_to_binary};
pub use parse::{parse, CopyFormat, CopyStmt, Statement, VacuumStmt};
pub use roles::{lookup_role, Identity, Role, RoleStmt, ScramVerifier, BOOTSTRAP_SUPERUSER};
pub use session::{
    Collect, Description, IdleLimit, Outcome, OutcomeKind, Output, Session, TxStatus,
};
pub use settings::{Settings, SERVER_VERSION};
pub use spool::Spool;
pub use stack::{
    run_on_session_stack, DEFAULT_MAX_STACK_DEPTH_KB, MAX_MAX_STACK_DEPTH_KB, SESSION_STACK_BYTES,
};
pub use types::{array, binary};
pub use types::{
    check_numeric, format_output, format_text, format_timestamp, parse_text, SqlType,
    PG_EPOCH_OFFSET_US,
};
