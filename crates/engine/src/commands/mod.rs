//! # commands — utility commands that drive several access methods
//!
//! PostgreSQL's `commands/`: what a statement does when it is more than one access method's
//! work. [`vacuum`] is VACUUM: lazy vacuum of a table's heap and of each of its indexes under
//! the table's lock, and VACUUM of the whole database, which then lets the commit logs drop
//! old segments.
//!
//! ## Rules
//! - Above the session layer: a command runs in a [`Transaction`](crate::Transaction) of its
//!   own and takes its locks through it, as any session does.
//! - Below the façade ([`crate::Database`]) and the background workers
//!   ([`crate::autovacuum`]), which call it.

pub mod vacuum;
