//! What the SQL layer's test files share: a database on a temporary directory, and running
//! statements through a `Session` with their outcomes, rows and SQLSTATEs.

// Each test file uses a part of these.
#![allow(dead_code)]

use std::sync::Arc;

use quire_engine::vfs::{OsVfs, Vfs};
use quire_engine::{Config, Database, Value};
use quire_sql::{parse, OutcomeKind, Session};

/// Opens (creating or recovering) a database in `dir`, with the SQL layer's tables.
pub fn open(dir: &std::path::Path) -> anyhow::Result<Arc<Database>> {
    open_with(dir, |_| {})
}

/// [`open`] with `tune` applied to the configuration first.
pub fn open_with(
    dir: &std::path::Path,
    tune: impl FnOnce(&mut Config),
) -> anyhow::Result<Arc<Database>> {
    let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
    let mut config = Config {
        shared_buffers_bytes: 4 * 1024 * 1024,
        autovacuum: false,
        ..Config::default()
    };
    tune(&mut config);
    let db = Database::open(&vfs, dir, config)?;
    Session::bootstrap(&db)?;
    Ok(Arc::new(db))
}

/// Runs every statement of `sql`: the last outcome's tag, or the first error as
/// "SQLSTATE message".
pub fn run(s: &mut Session, sql: &str) -> Result<String, String> {
    let mut tag = String::new();
    for stmt in parse(sql).map_err(|e| e.sqlstate().to_string())? {
        tag = s
            .execute(&stmt, &[], &[])
            .map_err(|e| format!("{} {}", e.sqlstate(), e))?
            .tag;
    }
    Ok(tag)
}

/// The SQLSTATE of a statement that must fail.
pub fn code(r: Result<String, String>) -> String {
    r.expect_err("must fail")[..5].to_string()
}

/// The column names and rows of a query, sent as a simple-protocol query string (so that
/// its shape, if it has one, runs as a prepared statement: `crate::shape`).
pub fn query(s: &mut Session, sql: &str) -> (Vec<String>, Vec<Vec<Value>>) {
    match s.execute_query(sql).pop().unwrap().unwrap().kind {
        OutcomeKind::Rows { columns, rows } => {
            (columns.iter().map(|c| c.name.clone()).collect(), rows)
        }
        other => panic!("no rows: {other:?}"),
    }
}

pub fn rows(s: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    query(s, sql).1
}

/// The first value of the first row.
pub fn one(s: &mut Session, sql: &str) -> Value {
    rows(s, sql).remove(0).remove(0)
}
