//! # quire-sql
//!
//! quire's SQL layer (DESIGN.md layers 10-11): parse with `sqlparser`, bind against the
//! catalog, plan, and execute through [`quire_engine::Transaction`]. It is synchronous, like
//! the engine, and knows nothing of the network.
//!
//! ## Modules, bottom to top
//! - [`types`]: SQL types over the engine's, text input and output, casts.
//! - [`stack`](run_on_session_stack): `max_stack_depth` and `check_stack_depth()`; the
//!   stack a session's thread needs ([`SESSION_STACK_BYTES`]).
//! - `parse`: statement splitting, `sqlparser` (its trees' depth and memory bounded before
//!   it runs), and the utility commands it lacks.
//! - `literals`: long lists of constants kept as their text.
//! - `numeric`: exact decimal arithmetic with PostgreSQL's result scales.
//! - `expr`, `func`: typed expressions and functions, and their evaluation.
//! - `plan`: plan nodes and their pull-based execution.
//! - `catalog`, `pg_catalog`: what SQL keeps of a table, and PostgreSQL's catalog views.
//! - `sequence`: CREATE SEQUENCE's options, `nextval` and its kin, `serial` columns.
//! - `roles`: roles and their SCRAM-SHA-256 verifiers (CREATE/ALTER/DROP ROLE).
//! - `bind`: names, types and access paths: a statement becomes a plan.
//! - `copy`: COPY's text and CSV formats.
//! - `interrupt`: cancel requests and `statement_timeout`; `backends`: the server's
//!   sessions by process id (cancel keys, `pg_cancel_backend`, `pg_terminate_backend`).
//! - `shape`: a simple-protocol statement's shape, its constants taken out as parameters.
//! - `spool`: rows kept for later in memory up to `work_mem`, then in a temp file.
//! - `session`: a client's transaction state, settings and COPY; statement execution; the
//!   plans kept per session (extended-protocol statements and simple-protocol shapes).
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
//! - Memory: every node that materializes rows (sort, aggregate, hash join, DISTINCT, a
//!   statement's result) is bounded by `plan::MAX_MATERIALIZED_ROWS`; beyond it the
//!   statement fails with 54000. Every value a function or operator builds is at most
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

mod backends;
mod bind;
mod catalog;
mod copy;
mod error;
mod expr;
mod func;
mod interrupt;
mod literals;
mod numeric;
mod parse;
mod pg_catalog;
mod plan;
mod roles;
mod sequence;
mod session;
mod shape;
mod spool;
mod stack;
mod types;

pub use backends::{Backend, Backends};
pub use bind::{OutColumn, OutColumns};
pub use error::{Result, SqlError};
pub use func::array_to_binary;
pub use interrupt::{Alarm, Interrupt};
pub use numeric::{from_binary as numeric_from_binary, to_binary as numeric_to_binary};
pub use parse::{parse, CopyFormat, CopyStmt, Statement, VacuumStmt};
pub use plan::MAX_MATERIALIZED_ROWS;
pub use roles::{lookup_role, Identity, Role, RoleStmt, ScramVerifier, BOOTSTRAP_SUPERUSER};
pub use session::{
    Collect, Description, IdleLimit, Outcome, OutcomeKind, Output, Session, Settings, TxStatus,
    SERVER_VERSION,
};
pub use spool::Spool;
pub use stack::{
    run_on_session_stack, DEFAULT_MAX_STACK_DEPTH_KB, MAX_MAX_STACK_DEPTH_KB, SESSION_STACK_BYTES,
};
pub use types::{
    check_numeric, format_text, format_timestamp, parse_text, SqlType, PG_EPOCH_OFFSET_US,
};
