//! The memory one large statement costs, for the figures in the README (issue 36): runs
//! `select 1 where 1 in (1, 1, ...)` (`in`) or `insert into t values (1), (2), ...`
//! (`values`) of about the given number of bytes of SQL text on a new database, and
//! prints the process's peak resident memory before and after, and their difference per
//! byte of SQL text.
//!
//! `cargo run --example statement_memory -- in 20000000`

use std::fmt::Write as _;
use std::sync::Arc;

use quire_engine::vfs::{OsVfs, Vfs};
use quire_engine::{Config, Database};
use quire_sql::Session;

/// The process's peak resident set (VmHWM), in bytes.
fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn statement(kind: &str, bytes: usize) -> String {
    let mut sql = String::with_capacity(bytes + 64);
    match kind {
        "in" => {
            sql.push_str("select 1 where 1 in (1");
            while sql.len() < bytes {
                sql.push_str(",1");
            }
            sql.push(')');
        }
        "values" => {
            sql.push_str("insert into t values (0)");
            let mut i = 1u64;
            while sql.len() < bytes {
                let _ = write!(sql, ",({i})");
                i += 1;
            }
        }
        "inexpr" => {
            sql.push_str("select 1 where 1 in (1+0");
            while sql.len() < bytes {
                sql.push_str(",1+0");
            }
            sql.push(')');
        }
        "select" => {
            sql.push_str("select 1");
            while sql.len() < bytes {
                sql.push_str(",1");
            }
        }
        "spaces" => {
            sql.push_str("select 1");
            while sql.len() < bytes {
                sql.push(' ');
            }
        }
        "string" => {
            sql.push_str("select length('");
            while sql.len() < bytes {
                sql.push('x');
            }
            sql.push_str("')");
        }
        "case" => {
            sql.push_str("select case 1");
            while sql.len() < bytes {
                sql.push_str(" when 2 then 3");
            }
            sql.push_str(" end");
        }
        "row" => {
            sql.push_str("select * from (values (1");
            while sql.len() < bytes {
                sql.push_str(",1");
            }
            sql.push_str(")) v");
        }
        other => panic!(
            "unknown kind {other}: use in, values, inexpr, select, spaces, string, case or row"
        ),
    }
    sql
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let kind = args.get(1).map_or("in", String::as_str);
    let bytes: usize = args.get(2).map_or(Ok(20_000_000), |b| b.parse())?;
    let dir = tempfile::tempdir()?;
    let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
    let config = Config {
        shared_buffers_bytes: 16 << 20,
        autovacuum: false,
        ..Config::default()
    };
    let db = Database::open(&vfs, dir.path(), config)?;
    Session::bootstrap(&db)?;
    let db = Arc::new(db);
    let text = statement(kind, bytes);
    let before = quire_sql::run_on_session_stack(|| -> anyhow::Result<u64> {
        let mut s = Session::new(Arc::clone(&db));
        for r in s.execute_query("create table t (a bigint)") {
            r?;
        }
        let before = peak_rss_bytes();
        let t = std::time::Instant::now();
        let out = s.execute_query(&text);
        let outcome = out.into_iter().last().map(|r| r.map(|o| o.tag));
        eprintln!("{kind}: {outcome:?} in {:?}", t.elapsed());
        Ok(before)
    })?;
    let after = peak_rss_bytes();
    let grew = after.saturating_sub(before);
    // Counted after the peak was read: the tokens themselves take memory.
    let tokens =
        sqlparser::tokenizer::Tokenizer::new(&sqlparser::dialect::PostgreSqlDialect {}, &text)
            .tokenize()
            .map_or(0, |t| t.len());
    println!(
        "{kind} {} bytes of SQL, {tokens} tokens: peak RSS {} MB before, {} MB after: {:.1} bytes per byte of SQL, {:.1} per token",
        text.len(),
        before >> 20,
        after >> 20,
        grew as f64 / text.len() as f64,
        grew as f64 / tokens.max(1) as f64
    );
    Ok(())
}
