//! # quire-sql
//!
//! quire's SQL layer (DESIGN.md layers 10-11): parse with `sqlparser`, bind against the
//! engine's catalog, execute through [`quire_engine::Transaction`]. It is synchronous, like
//! the engine, and knows nothing of the network.
//!
//! ## Rules
//!
//! - A [`Session`] is one client's state and is used by one thread at a time: the server
//!   gives each connection an OS thread that owns its `Session` and the engine
//!   `Transaction` inside it. Anything here may block (a row lock, I/O); the async runtime
//!   never calls into this crate directly.
//! - Table definitions are the engine's catalog; what SQL adds (declared types such as
//!   `integer` over the engine's `Int`, NOT NULL) lives in an engine table of its own
//!   written in the same transaction, so DDL rolls back as a whole ([`catalog`]'s rules).
//! - Errors: one type, [`SqlError`], with PostgreSQL's SQLSTATE. Engine errors keep theirs
//!   (23505, 40001, 42P01, ...); this layer adds 42601 (syntax), 42703, 42804, 22P02, 23502,
//!   25P02 and 0A000 for what is valid SQL that quire does not do yet (it names the
//!   feature). No input makes this crate panic.
//! - An error inside a transaction block rolls the engine transaction back at once (its
//!   locks go) and the block then refuses every statement with 25P02 until COMMIT or
//!   ROLLBACK, as PostgreSQL does.
#![deny(unsafe_code)]

mod bind;
mod catalog;
mod error;
mod session;
mod types;

pub use bind::OutColumn;
pub use error::{Result, SqlError};
pub use session::{
    parse, Description, Outcome, OutcomeKind, Session, Statement, TxStatus, MAX_ROWS_PER_STATEMENT,
};
pub use types::{format_text, format_timestamp, parse_text, SqlType, PG_EPOCH_OFFSET_US};
