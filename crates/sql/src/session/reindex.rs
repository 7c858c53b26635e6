//! REINDEX: indexes built again from their tables ([`quire_engine::Transaction::reindex`]).
//!
//! ## Rules
//! - INDEX and TABLE run in the open block or in a transaction of their own; SCHEMA and
//!   DATABASE refuse a block (25001) and rebuild each table's indexes in a transaction of
//!   its own, as PostgreSQL's `ReindexMultipleTables`. SYSTEM has nothing to rebuild: the
//!   catalog is a heap read whole, with no B-tree.
//! - CONCURRENTLY is refused (0A000), as CREATE INDEX CONCURRENTLY is: the rebuild locks
//!   the table against writes, which is what CONCURRENTLY promises not to do. Its 25001 in
//!   a block comes first, as in PostgreSQL.
//! - Errors and notices are PostgreSQL's: `"t" is not an index` / `is not a table or
//!   materialized view` (42809), `table "t" has no indexes to reindex`, `can only reindex
//!   the currently open database` (0A000); VERBOSE reports each index at INFO.

use std::time::Instant;

use quire_engine::{SqlState, Transaction};

use super::commands::read_only_error;
use super::{command, in_block_error, Outcome, Session, State};
use crate::catalog;
use crate::error::{Notice, Result, SqlError};
use crate::parse::{ReindexKind, ReindexStmt};

impl Session {
    pub(super) fn reindex(&mut self, stmt: &ReindexStmt) -> Result<Outcome> {
        let in_block = !matches!(self.state, State::Idle);
        if stmt.concurrently {
            if in_block {
                return Err(in_block_error("REINDEX CONCURRENTLY"));
            }
            return Err(SqlError::unsupported("REINDEX CONCURRENTLY"));
        }
        if self.settings.read_only() {
            return Err(read_only_error("REINDEX"));
        }
        let name = stmt.name.as_deref().unwrap_or_default();
        let name = name.strip_prefix("public.").unwrap_or(name);
        let notices = match stmt.kind {
            ReindexKind::Index => self.in_block_or_own(|tx| self.reindex_index(tx, name, stmt))?,
            ReindexKind::Table => {
                self.in_block_or_own(|tx| self.reindex_table(tx, name, stmt, true))?
            }
            kind => {
                if in_block {
                    return Err(in_block_error(&format!("REINDEX {}", kind.keyword())));
                }
                self.reindex_many(stmt)?
            }
        };
        let mut out = command("REINDEX");
        out.notices = notices;
        Ok(out)
    }

    /// REINDEX INDEX `name`: an index named in SQL, or one named after a temporary table
    /// (its key's index, `tt_pkey`, carries the table's session-prefixed name).
    fn reindex_index(
        &self,
        tx: &Transaction,
        name: &str,
        stmt: &ReindexStmt,
    ) -> Result<Vec<Notice>> {
        let temp = self.plans.tables.borrow().temp.engine_name(name);
        let found = match tx.find_index(name)? {
            Some(i) => Some(i),
            None => tx.find_index(&temp)?,
        };
        let Some(index) = found else {
            return Err(match tx.relation_named(name)? {
                Some(_) => not_a(name, "an index"),
                None => no_relation(name),
            });
        };
        let started = Instant::now();
        tx.reindex(index)?;
        Ok(verbose_notice(stmt, name, started).into_iter().collect())
    }

    /// REINDEX TABLE `name`: each of its indexes (`say_none`: a NOTICE if it has none).
    fn reindex_table(
        &self,
        tx: &Transaction,
        name: &str,
        stmt: &ReindexStmt,
        say_none: bool,
    ) -> Result<Vec<Notice>> {
        if tx.find_index(name)?.is_some() {
            return Err(not_a(name, "a table or materialized view"));
        }
        let engine_name = self.plans.tables.borrow().temp.resolve(tx, name)?;
        let table = catalog::lookup(tx, &engine_name)?;
        let indexes = tx.table_indexes(table.def.oid)?;
        if indexes.is_empty() && say_none {
            return Ok(vec![Notice::new(format!(
                "table \"{name}\" has no indexes to reindex"
            ))]);
        }
        let mut notices = Vec::new();
        for index in indexes {
            let started = Instant::now();
            tx.reindex(index.oid)?;
            notices.extend(verbose_notice(stmt, &index.name, started));
        }
        Ok(notices)
    }

    /// REINDEX SCHEMA, DATABASE and SYSTEM: each table's indexes in a transaction of its
    /// own.
    fn reindex_many(&self, stmt: &ReindexStmt) -> Result<Vec<Notice>> {
        let name = stmt.name.as_deref();
        // Only user tables have indexes to rebuild: in schema public, or in the database.
        let user_tables = if stmt.kind == ReindexKind::Schema {
            let schema = name.unwrap_or_default();
            if crate::pg_catalog::namespace_oid(schema).is_none() && schema != "information_schema"
            {
                return Err(SqlError::new(
                    SqlState::UNDEFINED_SCHEMA,
                    format!("schema \"{schema}\" does not exist"),
                ));
            }
            schema == "public"
        } else {
            if name.is_some_and(|n| n != crate::pg_catalog::DATABASE_NAME) {
                return Err(SqlError::new(
                    SqlState::FEATURE_NOT_SUPPORTED,
                    "can only reindex the currently open database",
                ));
            }
            stmt.kind == ReindexKind::Database
        };
        if !user_tables {
            return Ok(Vec::new());
        }
        let tables = self.in_block_or_own(|tx| {
            Ok(tx
                .tables()?
                .into_iter()
                .filter(|t| !t.name.starts_with(catalog::RESERVED_PREFIX))
                .map(|t| t.name.to_string())
                .collect::<Vec<String>>())
        })?;
        let mut notices = Vec::new();
        for table in tables {
            notices.extend(self.in_block_or_own(|tx| self.reindex_table(tx, &table, stmt, false))?);
        }
        Ok(notices)
    }
}

/// VERBOSE's INFO for one index rebuilt (with the elapsed time; quire does not measure
/// the CPU time PostgreSQL's DETAIL also gives).
fn verbose_notice(stmt: &ReindexStmt, index: &str, started: Instant) -> Option<Notice> {
    stmt.verbose.then(|| {
        Notice::info(format!("index \"{index}\" was reindexed"))
            .with_detail(format!("elapsed: {:.2} s", started.elapsed().as_secs_f64()))
    })
}

fn not_a(name: &str, what: &str) -> SqlError {
    SqlError::new(
        SqlState::WRONG_OBJECT_TYPE,
        format!("\"{name}\" is not {what}"),
    )
}

fn no_relation(name: &str) -> SqlError {
    SqlError::new(
        SqlState::UNDEFINED_TABLE,
        format!("relation \"{name}\" does not exist"),
    )
}
