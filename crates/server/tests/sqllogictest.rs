//! The SQL test files of the repository's `tests/sql/` (sqllogictest format), run against
//! quire in-process or, with `QUIRE_SLT_URL`, against any PostgreSQL-wire server.
//!
//! Rules the files and this runner keep:
//! - Every `*.slt` file under `tests/sql/` runs (recursively, in path order), each on a fresh
//!   database: quire, a new in-process server on a new temporary directory; an outside
//!   server, a new database `slt_<n>` made and dropped by an admin connection on
//!   `QUIRE_SLT_URL` (a libpq-style connection string). `QUIRE_SLT_FILTER=substring` runs
//!   only the files whose path under `tests/sql/` contains it; a filter that matches no file
//!   fails, so that a typo cannot pass.
//! - Statements go by the simple query protocol, so values come back as the server's text:
//!   NULL is `NULL`, the empty string `(empty)`. A row compares as its values joined by
//!   spaces, with runs of whitespace made one space on both sides; the `query` header's
//!   type letters are not checked, only their number against the result's columns.
//! - An error reads `<SQLSTATE>: <message>` (`42P01: relation "nope" does not exist`), so a
//!   file matches the SQLSTATE, the message or both by regex: `statement error 42P01`.
//! - Every record of every file runs, whatever failed before it; the test fails at the end
//!   with each failure's file:line, SQL, and expected against actual output.
//! - `QUIRE_SLT_COMPLETE=1` rewrites the files with the actual output instead of comparing
//!   (sqllogictest's override mode). Allowed only with `QUIRE_SLT_URL`: expected output
//!   comes from PostgreSQL, never from quire.
//! - The runner is shown to fail: `the_runner_reports_every_wrong_record` runs right records
//!   and records wrong in each way (a value, NULL for empty, order, columns, rows, SQLSTATE,
//!   an error missing or unexpected, a count), each of which must be reported.

mod common;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use common::{config, Running};
use futures::StreamExt;
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType, Normalizer, Record, Runner};
use tokio::task::JoinHandle;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

/// Files run at once (the machine this was written on has 2 cores).
const PARALLEL_FILES: usize = 2;
/// The longest one statement may run before its record fails.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(60);
/// The most files a run takes (a bound on the directory walk).
const MAX_FILES: usize = 10_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_files() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/sql");
    let filter = std::env::var("QUIRE_SLT_FILTER").unwrap_or_default();
    let files = slt_files(&root, &filter)?;
    anyhow::ensure!(
        !files.is_empty(),
        "no .slt file under {} matches QUIRE_SLT_FILTER={filter:?}",
        root.display()
    );
    let target = Target::from_env()?;
    if std::env::var_os("QUIRE_SLT_COMPLETE").is_some() {
        return complete(&target, &root, &files).await;
    }
    let started = Instant::now();
    let outcomes: Vec<FileOutcome> = futures::stream::iter(files.iter().enumerate())
        .map(|(n, file)| run_file(&target, &root, n, file))
        .buffer_unordered(PARALLEL_FILES)
        .collect()
        .await;
    let summary = summarize(outcomes, started.elapsed());
    eprintln!("{}", summary.text);
    anyhow::ensure!(
        summary.failures == 0,
        "{} records failed (above: each with its file:line, SQL, expected and actual)",
        summary.failures
    );
    Ok(())
}

/// One record for each convention the files rely on: NULL, the empty string, sorting,
/// errors by message and by SQLSTATE, counts.
const RIGHT: &str = "\
statement ok
CREATE TABLE t (id integer PRIMARY KEY, s text)

statement count 3
INSERT INTO t VALUES (1, NULL), (2, ''), (3, 'x')

query IT
SELECT id, s FROM t ORDER BY id
----
1 NULL
2 (empty)
3 x

query I rowsort
SELECT id FROM t ORDER BY id DESC
----
1
2
3

statement error 23505: duplicate key value violates unique constraint \"t_pkey\"
INSERT INTO t VALUES (1, 'y')

statement error (23505)
INSERT INTO t VALUES (1, 'y')
";

/// Records that are each wrong in one way, with what the runner's report of it must say.
const WRONG: [(&str, &str); 9] = [
    (
        "query IT\nSELECT id, s FROM t WHERE id = 1\n----\n1 (empty)\n",
        "1 NULL",
    ),
    (
        "query IT\nSELECT id, s FROM t WHERE id = 2\n----\n2 NULL\n",
        "2 (empty)",
    ),
    (
        "query I\nSELECT id FROM t ORDER BY id DESC\n----\n1\n2\n3\n",
        "+   3",
    ),
    (
        "query I\nSELECT id, s FROM t WHERE id = 3\n----\n3 x\n",
        "columns mismatch",
    ),
    ("query I\nSELECT id FROM t WHERE id > 5\n----\n6\n", "-   6"),
    (
        "statement error 23502\nINSERT INTO t VALUES (1, 'y')\n",
        "23505: duplicate key value violates unique constraint \"t_pkey\"",
    ),
    ("statement error\nSELECT 1\n", "expected to fail"),
    (
        "statement ok\nSELECT * FROM nope\n",
        "42P01: relation \"nope\" does not exist",
    ),
    (
        "statement count 5\nUPDATE t SET s = s\n",
        "actually affected 3 rows",
    ),
];

/// The runner itself, on quire: the right records pass, and each wrong one is reported on
/// its own line, after the others, with what it got.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_reports_every_wrong_record() -> anyhow::Result<()> {
    let mut script = RIGHT.to_string();
    let mut lines = Vec::new();
    for (record, _) in WRONG {
        script.push('\n');
        lines.push(script.lines().count() + 1);
        script += record;
    }
    let (fresh, conn) = Fresh::make(&Target::Quire, 0).await?;
    let mut right = FileOutcome::new(Path::new("right.slt"));
    run_script(RIGHT, "right.slt", conn.clone(), &mut right).await;
    fresh.remove().await?;
    assert_eq!(right.failures, Vec::<String>::new());
    assert_eq!(right.records, 6);

    let (fresh, conn) = Fresh::make(&Target::Quire, 0).await?;
    let mut wrong = FileOutcome::new(Path::new("wrong.slt"));
    run_script(&script, "wrong.slt", conn, &mut wrong).await;
    fresh.remove().await?;
    assert_eq!(wrong.failures.len(), WRONG.len(), "{:#?}", wrong.failures);
    for ((failure, line), (_, says)) in wrong.failures.iter().zip(lines).zip(WRONG) {
        assert!(
            failure.contains(&format!("at wrong.slt:{line}\n")),
            "{failure}"
        );
        assert!(failure.contains(says), "{says:?} not in: {failure}");
    }
    Ok(())
}

/// The `*.slt` files under `root` whose relative path contains `filter`, sorted.
fn slt_files(root: &Path, filter: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "slt") {
                found.push(path.strip_prefix(root)?.to_path_buf());
            }
            anyhow::ensure!(found.len() <= MAX_FILES, "more than {MAX_FILES} files");
        }
    }
    found.retain(|p| p.to_string_lossy().contains(filter));
    found.sort();
    Ok(found)
}

/// Where the files run.
enum Target {
    /// A new in-process quire server per file.
    Quire,
    /// A new database per file on the server `admin` connects to.
    External { admin: Box<tokio_postgres::Config> },
}

impl Target {
    fn from_env() -> anyhow::Result<Target> {
        match std::env::var("QUIRE_SLT_URL") {
            Ok(url) => Ok(Target::External {
                admin: Box::new(tokio_postgres::Config::from_str(&url)?),
            }),
            Err(_) => Ok(Target::Quire),
        }
    }
}

/// A fresh database for one file, and what removes it.
enum Fresh {
    Quire {
        server: Running,
        _dir: tempfile::TempDir,
    },
    External {
        admin: Client,
        name: String,
    },
}

impl Fresh {
    /// A fresh database for file number `n`, and how to connect to it.
    async fn make(target: &Target, n: usize) -> anyhow::Result<(Fresh, tokio_postgres::Config)> {
        match target {
            Target::Quire => {
                let dir = tempfile::tempdir()?;
                let server = Running::start(config(dir.path())).await?;
                let mut conn = tokio_postgres::Config::new();
                conn.host(server.addr.ip().to_string())
                    .port(server.addr.port())
                    .user("postgres")
                    .dbname("postgres");
                Ok((Fresh::Quire { server, _dir: dir }, conn))
            }
            Target::External { admin } => {
                let (client, connection) = admin.connect(NoTls).await?;
                tokio::spawn(connection);
                let name = format!("slt_{n}");
                // A run stopped halfway may have left it.
                client
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await?;
                client
                    .batch_execute(&format!("CREATE DATABASE {name}"))
                    .await?;
                let mut conn = tokio_postgres::Config::clone(admin);
                conn.dbname(&name);
                Ok((
                    Fresh::External {
                        admin: client,
                        name,
                    },
                    conn,
                ))
            }
        }
    }

    /// Stops the server, or drops the database.
    async fn remove(self) -> anyhow::Result<()> {
        match self {
            Fresh::Quire { server, _dir } => server.stop().await,
            Fresh::External { admin, name } => {
                let sql = format!("DROP DATABASE {name} WITH (FORCE)");
                Ok(admin.batch_execute(&sql).await?)
            }
        }
    }
}

/// What one file's run found.
struct FileOutcome {
    file: PathBuf,
    records: usize,
    failures: Vec<String>,
    elapsed: Duration,
}

impl FileOutcome {
    fn new(file: &Path) -> FileOutcome {
        FileOutcome {
            file: file.to_path_buf(),
            records: 0,
            failures: Vec::new(),
            elapsed: Duration::ZERO,
        }
    }
}

/// Runs every record of `tests/sql/<file>` on a fresh database.
async fn run_file(target: &Target, root: &Path, n: usize, file: &Path) -> FileOutcome {
    let started = Instant::now();
    let mut outcome = FileOutcome::new(file);
    match Fresh::make(target, n).await {
        Ok((fresh, conn)) => {
            run_records(&root.join(file), &display_name(file), conn, &mut outcome).await;
            if let Err(e) = fresh.remove().await {
                outcome
                    .failures
                    .push(format!("removing the database: {e:#}"));
            }
        }
        Err(e) => outcome
            .failures
            .push(format!("making a fresh database: {e:#}")),
    }
    outcome.elapsed = started.elapsed();
    outcome
}

/// The name failures give a file: its path from the repository's root.
fn display_name(file: &Path) -> String {
    format!("tests/sql/{}", file.display())
}

/// Runs the records of `path` one by one, each failure noted and the next record run.
async fn run_records(
    path: &Path,
    name: &str,
    conn: tokio_postgres::Config,
    outcome: &mut FileOutcome,
) {
    match std::fs::read_to_string(path) {
        Ok(script) => run_script(&script, name, conn, outcome).await,
        Err(e) => outcome.failures.push(format!("{name}: {e}")),
    }
}

/// Runs the records of `script` one by one, each failure noted and the next record run.
async fn run_script(
    script: &str,
    name: &str,
    conn: tokio_postgres::Config,
    outcome: &mut FileOutcome,
) {
    let records = match sqllogictest::parse_with_name(script, name) {
        Ok(records) => records,
        Err(e) => return outcome.failures.push(format!("{name}: {e}")),
    };
    let mut runner = Runner::new(move || Wire::connect(conn.clone()));
    runner.with_validator(same_rows);
    runner.with_column_validator(same_column_count);
    for record in records {
        match record {
            Record::Halt { .. } => break,
            Record::Statement { .. } | Record::Query { .. } => outcome.records += 1,
            _ => {}
        }
        if let Err(e) = runner.run_async(record).await {
            outcome.failures.push(e.display(false).to_string());
        }
    }
    runner.shutdown_async().await;
}

/// Each row, its values joined by a space, equals its expected line, both with runs of
/// whitespace made one space (sqllogictest's default validator normalises each value alone,
/// so a value of spaces, as `char(n)` gives, left two spaces that no expected line has).
fn same_rows(normalizer: Normalizer, actual: &[Vec<String>], expected: &[String]) -> bool {
    actual.len() == expected.len()
        && actual
            .iter()
            .zip(expected)
            .all(|(row, line)| normalizer(&row.join(" ")) == normalizer(line))
}

/// The `query` header's letters are not checked, only that there is one per column.
#[allow(clippy::ptr_arg)] // sqllogictest's signature
fn same_column_count(actual: &Vec<DefaultColumnType>, expected: &Vec<DefaultColumnType>) -> bool {
    actual.len() == expected.len()
}

/// Rewrites each file with the output of an outside server (`QUIRE_SLT_COMPLETE`).
async fn complete(target: &Target, root: &Path, files: &[PathBuf]) -> anyhow::Result<()> {
    anyhow::ensure!(
        matches!(target, Target::External { .. }),
        "QUIRE_SLT_COMPLETE needs QUIRE_SLT_URL: expected output comes from PostgreSQL"
    );
    for (n, file) in files.iter().enumerate() {
        let (fresh, conn) = Fresh::make(target, n).await?;
        let mut runner = Runner::new(move || Wire::connect(conn.clone()));
        runner
            .update_test_file(
                root.join(file),
                " ",
                same_rows,
                sqllogictest::default_normalizer,
                same_column_count,
            )
            .await
            .map_err(|e| anyhow::anyhow!("{}: {e}", display_name(file)))?;
        runner.shutdown_async().await;
        fresh.remove().await?;
        eprintln!("completed {}", display_name(file));
    }
    Ok(())
}

/// The failures of all files, and one line per file.
struct Summary {
    text: String,
    failures: usize,
}

fn summarize(mut outcomes: Vec<FileOutcome>, elapsed: Duration) -> Summary {
    outcomes.sort_by(|a, b| a.file.cmp(&b.file));
    let mut lines = Vec::new();
    for o in &outcomes {
        let status = if o.failures.is_empty() {
            "ok"
        } else {
            "FAILED"
        };
        lines.push(format!(
            "{status:6} {} ({} records, {} failed, {:.2} s)",
            display_name(&o.file),
            o.records,
            o.failures.len(),
            o.elapsed.as_secs_f64()
        ));
    }
    for o in &outcomes {
        for f in &o.failures {
            lines.push(format!("\n---- {}\n{f}", display_name(&o.file)));
        }
    }
    let records: usize = outcomes.iter().map(|o| o.records).sum();
    let failures: usize = outcomes.iter().map(|o| o.failures.len()).sum();
    lines.push(format!(
        "\n{} files, {records} records, {failures} failed, {:.2} s",
        outcomes.len(),
        elapsed.as_secs_f64()
    ));
    Summary {
        text: lines.join("\n"),
        failures,
    }
}

/// A statement's error as the files match it: `<SQLSTATE>: <message>`.
#[derive(Debug)]
struct SqlError {
    sqlstate: Option<String>,
    text: String,
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for SqlError {}

impl From<tokio_postgres::Error> for SqlError {
    fn from(e: tokio_postgres::Error) -> SqlError {
        match e.as_db_error() {
            Some(db) => SqlError {
                sqlstate: Some(db.code().code().to_string()),
                text: format!("{}: {}", db.code().code(), db.message()),
            },
            None => SqlError {
                sqlstate: None,
                text: e.to_string(),
            },
        }
    }
}

/// One connection over the PostgreSQL wire protocol, simple queries only.
struct Wire {
    client: Option<Client>,
    connection: Option<JoinHandle<Result<(), tokio_postgres::Error>>>,
}

impl Wire {
    async fn connect(conn: tokio_postgres::Config) -> Result<Wire, SqlError> {
        let (client, connection) = conn.connect(NoTls).await?;
        Ok(Wire {
            client: Some(client),
            connection: Some(tokio::spawn(connection)),
        })
    }
}

#[async_trait::async_trait]
impl AsyncDB for Wire {
    type Error = SqlError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SqlError> {
        let client = self.client.as_ref().ok_or_else(|| SqlError {
            sqlstate: None,
            text: "the connection is shut down".into(),
        })?;
        let messages = tokio::time::timeout(STATEMENT_TIMEOUT, client.simple_query(sql))
            .await
            .map_err(|_| SqlError {
                sqlstate: None,
                text: format!("no answer in {STATEMENT_TIMEOUT:?}"),
            })??;
        Ok(output(&messages))
    }

    async fn shutdown(&mut self) {
        drop(self.client.take());
        if let Some(connection) = self.connection.take() {
            let _ = connection.await;
        }
    }

    fn engine_name(&self) -> &'static str {
        "postgres-wire"
    }

    async fn sleep(dur: Duration) {
        tokio::time::sleep(dur).await;
    }

    fn error_sql_state(err: &SqlError) -> Option<String> {
        err.sqlstate.clone()
    }
}

/// The rows of the statement that returned some (the last such), else the last statement's
/// count; a value as text, NULL as `NULL`, the empty string as `(empty)`.
fn output(messages: &[SimpleQueryMessage]) -> DBOutput<DefaultColumnType> {
    let mut columns = None;
    let mut rows = Vec::new();
    let mut count = 0;
    for m in messages {
        match m {
            SimpleQueryMessage::RowDescription(c) => {
                columns = Some(c.len());
                rows.clear();
            }
            SimpleQueryMessage::Row(r) => rows.push(
                (0..r.len())
                    .map(|i| match r.get(i) {
                        None => "NULL".to_string(),
                        Some("") => "(empty)".to_string(),
                        Some(v) => v.to_string(),
                    })
                    .collect(),
            ),
            SimpleQueryMessage::CommandComplete(n) => count = *n,
            _ => {}
        }
    }
    match columns {
        Some(n) => DBOutput::Rows {
            types: vec![DefaultColumnType::Any; n],
            rows,
        },
        None => DBOutput::StatementComplete(count),
    }
}
