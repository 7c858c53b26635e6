//! Limits (issue 36): statements as deep, values as large and loops as long as a client
//! cares to make them end with PostgreSQL's error, never with the end of the server. Deep
//! statements run on a session's stack ([`quire_sql::run_on_session_stack`]), as the
//! server runs them; each scenario then checks that the session still answers.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::open;
use quire_engine::{Database, Value};
use quire_sql::{parse, run_on_session_stack, OutcomeKind, Session, SqlError};

/// The rows of the last statement of `sql` (a simple-protocol query string), or the first
/// error.
fn outcome(s: &mut Session, sql: &str) -> Result<Vec<Vec<Value>>, SqlError> {
    let mut rows = Vec::new();
    for r in s.execute_query(sql) {
        if let OutcomeKind::Rows { rows: r, .. } = r?.kind {
            rows = r;
        }
    }
    Ok(rows)
}

fn code(s: &mut Session, sql: &str) -> String {
    match outcome(s, sql) {
        Ok(rows) => panic!(
            "{}...: succeeded with {} rows",
            &sql[..sql.len().min(60)],
            rows.len()
        ),
        Err(e) => e.sqlstate().to_string(),
    }
}

fn one(s: &mut Session, sql: &str) -> Value {
    let mut rows = outcome(s, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.remove(0).remove(0)
}

fn still_answers(s: &mut Session) {
    assert_eq!(one(s, "SELECT 1"), Value::Int(1));
}

/// A session on a new database, run on a session's stack.
fn with_session<T: Send>(f: impl FnOnce(&mut Session, Arc<Database>) -> T + Send) -> T {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = open(dir.path()).expect("a database");
    run_on_session_stack(move || {
        let mut s = Session::new(Arc::clone(&db));
        f(&mut s, db)
    })
}

const HINT_2MB: &str = "Increase the configuration parameter \"max_stack_depth\" (currently 2048kB), after ensuring the platform's stack depth limit is adequate.";

/// Each attack of the issue at 100,000 levels, and what it must give: PostgreSQL's 54001
/// (PostgreSQL itself gives 54001 for the `+`, cast and UNION chains, and 42601 for nesting
/// beyond its parser's 10,000 levels), or, for the AND and OR chains that PostgreSQL
/// flattens, the answer. NOT past `sqlparser`'s recursion limit gives 42601: `sqlparser`
/// tries another reading when its recursion fails there, and reports that one's syntax
/// error (PostgreSQL's answer too: `memory exhausted at or near "not"`).
const DEEP: &[(&str, &str, &str, &str, Option<&str>)] = &[
    // name, head, repeated, tail repeated as often, the SQLSTATE or None for one row
    ("plus", "select 1", "+1", "", Some("54001")),
    ("casts", "select 1", "::int", "", Some("54001")),
    ("unions", "select 1", " union select 1", "", Some("54001")),
    ("is null", "select 1", " is null", "", Some("54001")),
    ("or", "select 1 where 1=1", " or 1=1", "", None),
    ("and", "select 1 where 1=1", " and 1=1", "", None),
    ("parentheses", "select ", "(", ")", Some("54001")),
    (
        "case",
        "select ",
        "case when true then ",
        " end",
        Some("54001"),
    ),
    ("subqueries", "select ", "(select ", ")", Some("54001")),
    ("functions", "select ", "abs(", ")", Some("54001")),
    ("not", "select ", "not ", "", Some("42601")),
    ("minus", "select ", "- ", "", Some("54001")),
];

fn deep(head: &str, repeated: &str, tail: &str, n: usize) -> String {
    let core = if tail.is_empty() { "" } else { "1" };
    let core = if repeated == "not " { "true" } else { core };
    let core = if repeated == "- " { "1" } else { core };
    format!("{head}{}{core}{}", repeated.repeat(n), tail.repeat(n))
}

#[test]
fn statements_100000_levels_deep_fail_with_54001_or_answer() {
    with_session(|s, _| {
        for &(name, head, repeated, tail, expect) in DEEP {
            let sql = deep(head, repeated, tail, 100_000);
            match (expect, outcome(s, &sql)) {
                (Some(code), Err(e)) => {
                    assert_eq!(e.sqlstate(), code, "{name}: {e}");
                    if code == "54001" {
                        assert_eq!(e.message(), "stack depth limit exceeded", "{name}");
                        assert_eq!(e.hint(), Some(HINT_2MB), "{name}");
                    }
                }
                (None, Ok(rows)) => assert_eq!(rows, [[Value::Int(1)]], "{name}"),
                (_, r) => panic!("{name}: {:?}", r.map(|r| r.len())),
            }
            still_answers(s);
        }
    });
}

/// What ran before the limits still runs: a few hundred levels of each kind.
#[test]
fn statements_of_ordinary_depth_still_answer() {
    with_session(|s, _| {
        let plus = deep("select 1", "+1", "", 299);
        assert_eq!(one(s, &plus), Value::Int(300));
        let parens = deep("select ", "(", ")", 200);
        assert_eq!(one(s, &parens), Value::Int(1));
        let case = deep("select ", "case when true then ", " end", 100);
        assert_eq!(one(s, &case), Value::Int(1));
        let subqueries = deep("select ", "(select ", ")", 50);
        assert_eq!(one(s, &subqueries), Value::Int(1));
        let unions = format!(
            "select count(*) from ({}) u",
            deep("select 1", " union all select 1", "", 199)
        );
        assert_eq!(one(s, &unions), Value::Int(200));
        let casts = deep("select 1", "::int", "", 200);
        assert_eq!(one(s, &casts), Value::Int(1));
    });
}

/// A Parse of 40,000 `+` terms (the server keeps the parsed statement), then the statement
/// goes away as when its connection closes: dropping the tree must not recurse the stack
/// away.
#[test]
fn a_parsed_40000_term_statement_is_dropped_without_harm() {
    with_session(|s, _| {
        let sql = deep("select 1", "+1", "", 40_000);
        let statements = parse(&sql).expect("a chain of 40,000 terms parses");
        assert_eq!(statements.len(), 1);
        let e = s.describe(&sql, &statements[0], &[]).unwrap_err();
        assert_eq!(e.sqlstate(), "54001");
        drop(statements);
        still_answers(s);
    });
}

/// Beyond the deepest tree dropping can afford, the statement is refused before it is
/// parsed, fast, whatever the chain: 54001.
#[test]
fn trees_deeper_than_the_bound_are_refused_before_parsing() {
    let sql = deep("select 1", "+1", "", 300_000);
    let t = Instant::now();
    let e = parse(&sql).unwrap_err();
    assert_eq!(e.sqlstate(), "54001");
    assert_eq!(e.hint(), Some(HINT_2MB));
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let e = parse(&deep("select ", "(", ")", 2_000)).unwrap_err();
    assert_eq!(e.sqlstate(), "54001", "parser recursion beyond its limit");
}

#[test]
fn max_stack_depth_is_a_setting_with_postgresqls_units_and_range() {
    with_session(|s, _| {
        assert_eq!(one(s, "SHOW max_stack_depth"), Value::Text("2MB".into()));
        let plus = deep("select 1", "+1", "", 299);
        outcome(s, "SET max_stack_depth = '100kB'").unwrap();
        assert_eq!(one(s, "SHOW max_stack_depth"), Value::Text("100kB".into()));
        let e = outcome(s, &plus).unwrap_err();
        assert_eq!(e.sqlstate(), "54001");
        assert_eq!(
            e.hint(),
            Some("Increase the configuration parameter \"max_stack_depth\" (currently 100kB), after ensuring the platform's stack depth limit is adequate.")
        );
        outcome(s, "RESET max_stack_depth").unwrap();
        assert_eq!(one(s, &plus), Value::Int(300));
        for (value, shown) in [("3000", "3000kB"), ("'2.5MB'", "2560kB"), ("'1MB'", "1MB")] {
            outcome(s, &format!("SET max_stack_depth = {value}")).unwrap();
            assert_eq!(one(s, "SHOW max_stack_depth"), Value::Text(shown.into()));
        }
        let e = outcome(s, "SET max_stack_depth = 50").unwrap_err();
        assert_eq!(e.sqlstate(), "22023");
        assert_eq!(
            e.message(),
            "50 kB is outside the valid range for parameter \"max_stack_depth\" (100 .. 2147483647)"
        );
        let e = outcome(s, "SET max_stack_depth = '1GB'").unwrap_err();
        assert_eq!(e.sqlstate(), "22023");
        assert_eq!(
            e.message(),
            "invalid value for parameter \"max_stack_depth\": 1048576"
        );
        assert_eq!(
            e.detail(),
            Some(
                format!(
                    "\"max_stack_depth\" must not exceed {}kB.",
                    quire_sql::MAX_MAX_STACK_DEPTH_KB
                )
                .as_str()
            )
        );
        assert_eq!(code(s, "SET max_stack_depth = 'deep'"), "22023");
        assert_eq!(one(s, "SHOW max_stack_depth"), Value::Text("1MB".into()));
    });
}

/// On a thread smaller than `max_stack_depth` allows (a 2 MiB test thread, the largest
/// `max_stack_depth`), the check of the stack left answers 54001 before the thread's stack
/// ends.
#[test]
fn a_thread_smaller_than_max_stack_depth_still_gets_54001() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::new(open(dir.path()).unwrap());
    let max = format!(
        "SET max_stack_depth = '{}kB'",
        quire_sql::MAX_MAX_STACK_DEPTH_KB
    );
    outcome(&mut s, &max).unwrap();
    let e = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let e = outcome(&mut s, &deep("select 1", "+1", "", 5_000)).unwrap_err();
            still_answers(&mut s);
            e
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(e.sqlstate(), "54001");
}

const NO_FUNCTION_HINT: &str =
    "No function matches the given name and argument types. You might need to add explicit type casts.";

/// Aggregates called wrongly answer as PostgreSQL does (they panicked the connection, or
/// let an internal SQLSTATE out): SQLSTATE, message, hint and position.
#[test]
fn misused_aggregates_fail_as_in_postgresql() {
    with_session(|s, _| {
        outcome(s, "CREATE TABLE t (a int, b text)").unwrap();
        let cases: &[(&str, &str, &str, Option<usize>)] = &[
            (
                "select avg()",
                "42883",
                "function avg() does not exist",
                Some(8),
            ),
            (
                "select sum()",
                "42883",
                "function sum() does not exist",
                Some(8),
            ),
            (
                "SELECT   Avg()",
                "42883",
                "function avg() does not exist",
                Some(10),
            ),
            (
                "select 1; select avg()",
                "42883",
                "function avg() does not exist",
                Some(18),
            ),
            (
                "select pg_catalog.avg()",
                "42883",
                "function pg_catalog.avg() does not exist",
                Some(8),
            ),
            (
                "select count(1, 2)",
                "42883",
                "function count(integer, integer) does not exist",
                Some(8),
            ),
            (
                "select max(1, 2)",
                "42883",
                "function max(integer, integer) does not exist",
                Some(8),
            ),
            (
                "select string_agg('a')",
                "42883",
                "function string_agg(unknown) does not exist",
                Some(8),
            ),
            (
                "select nosuch(1)",
                "42883",
                "function nosuch(integer) does not exist",
                Some(8),
            ),
            (
                "select count()",
                "42809",
                "count(*) must be used to call a parameterless aggregate function",
                Some(8),
            ),
            (
                "select 1 where count(*) > 0",
                "42803",
                "aggregate functions are not allowed in WHERE",
                Some(16),
            ),
            (
                "select 1 from t, t u where count(*) > 0",
                "42803",
                "aggregate functions are not allowed in WHERE",
                Some(28),
            ),
            (
                "update t set a = 1 where count(*) > 0",
                "42803",
                "aggregate functions are not allowed in WHERE",
                Some(26),
            ),
            (
                "update t set a = count(*)",
                "42803",
                "aggregate functions are not allowed in UPDATE",
                Some(18),
            ),
            (
                "delete from t returning sum(a)",
                "42803",
                "aggregate functions are not allowed in RETURNING",
                Some(25),
            ),
            (
                "select * from t join t u on count(*) > 0",
                "42803",
                "aggregate functions are not allowed in JOIN conditions",
                Some(29),
            ),
            (
                "values (count(*))",
                "42803",
                "aggregate functions are not allowed in VALUES",
                Some(9),
            ),
            (
                "select 1 limit count(*)",
                "42803",
                "aggregate functions are not allowed in LIMIT",
                Some(16),
            ),
            (
                "select a from t group by count(*)",
                "42803",
                "aggregate functions are not allowed in GROUP BY",
                Some(26),
            ),
            (
                "select avg(sum(a)) from t",
                "42803",
                "aggregate function calls cannot be nested",
                Some(12),
            ),
        ];
        for &(sql, code, message, position) in cases {
            let e = outcome(s, sql).unwrap_err();
            assert_eq!((e.sqlstate().code(), e.message()), (code, message), "{sql}");
            assert_eq!(e.position(), position, "{sql}");
            if code == "42883" {
                assert_eq!(e.hint(), Some(NO_FUNCTION_HINT), "{sql}");
            }
            still_answers(s);
        }
        outcome(s, "INSERT INTO t VALUES (1, 'x'), (2, 'y'), (2, 'z')").unwrap();
        assert_eq!(one(s, "select count(*) + 1 from t"), Value::Int(4));
        assert_eq!(one(s, "select sum(a) from t where a > 1"), Value::Int(4));
        assert_eq!(
            one(
                s,
                "select string_agg(b, ',') from (select b from t order by b) x"
            ),
            Value::Text("x,y,z".into())
        );
        assert_eq!(
            one(s, "select (select count(*) from t) + count(*) from t"),
            Value::Int(6)
        );
        assert_eq!(
            outcome(
                s,
                "select a, count(*) from t group by a having count(*) > 1"
            )
            .unwrap(),
            [[Value::Int(2), Value::Int(2)]]
        );
        assert_eq!(
            one(s, "select max(a) from t having min(a) < 2"),
            Value::Int(2)
        );
    });
}

/// Every value a function or operator builds stays within 1 GB: 54000, found before the
/// value is allocated. (Each case builds operands of up to 1 GB.)
#[test]
fn values_beyond_one_gigabyte_fail_with_54000() {
    with_session(|s, _| {
        let half = "repeat('x', 536870912)";
        let cases = [
            (
                "select repeat('x', 1073741824)",
                "requested length too large",
            ),
            (
                "select repeat('xx', 536870912)",
                "requested length too large",
            ),
            (
                "select repeat('x', 9223372036854775807)",
                "requested length too large",
            ),
            (
                "select replace(repeat('x', 1000000), 'x', repeat('y', 2000))",
                "invalid memory alloc request size 2000000000",
            ),
            (
                &*format!("select length({half} || {half})"),
                "invalid memory alloc request size 1073741824",
            ),
            (
                &*format!("select length(concat({half}, {half}))"),
                "out of memory",
            ),
            (
                &*format!("select length(ARRAY[{half}, {half}]::text)"),
                "out of memory",
            ),
            (
                &*format!("select length(string_agg({half}, '')) from generate_series(1, 2)"),
                "out of memory",
            ),
        ];
        for (sql, message) in cases {
            let e = outcome(s, sql).unwrap_err();
            assert_eq!(
                (e.sqlstate().code(), e.message()),
                ("54000", message),
                "{sql}"
            );
            still_answers(s);
        }
        assert_eq!(
            one(s, "select length(repeat('ab', 1000))"),
            Value::Int(2000)
        );
        assert_eq!(
            one(s, "select replace('abcabc', 'b', 'XYZ')"),
            Value::Text("aXYZcaXYZc".into())
        );
    });
}

/// The server's statement-timeout watchdog, for a test: it looks at the session's running
/// statement every few milliseconds until dropped.
struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    fn new(s: &Session, db: &Arc<Database>) -> Watchdog {
        let stop = Arc::new(AtomicBool::new(false));
        let (interrupt, db, stopping) = (s.interrupt(), Arc::clone(db), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                interrupt.check_deadline(&db, Instant::now());
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Watchdog {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `statement_timeout` stops loops that read no table: a series, a long `repeat`, a sort,
/// a nested loop, a regular expression and LIKE over a large text. Each stops with 57014
/// soon after its 300 ms.
#[test]
fn statement_timeout_stops_every_long_loop() {
    with_session(|s, db| {
        let _watchdog = Watchdog::new(s, &db);
        outcome(s, "SET statement_timeout = 300").unwrap();
        let long = [
            "select count(*) from generate_series(1, 1e10)",
            "select count(*) from generate_series(1, 10000000000)",
            "select length(repeat('x', 900000000))",
            "select count(*) from (select x from generate_series(1, 1e10) x order by x desc) s",
            "select count(*) from generate_series(1, 100000) a, generate_series(1, 100000) b where a.a + b.b < 0",
            "select repeat('ab', 400000000) ~ 'b{3}'",
            "select repeat('a', 2000000) like '%' || repeat('a', 1000) || 'b'",
            "select count(distinct x) from generate_series(1, 1e10) x",
        ];
        for sql in long {
            let t = Instant::now();
            let e = outcome(s, sql).expect_err(sql);
            let took = t.elapsed();
            assert_eq!(e.sqlstate(), "57014", "{sql}: {e}");
            assert_eq!(e.message(), "canceling statement due to statement timeout");
            assert!(took < Duration::from_secs(5), "{sql} took {took:?}");
            still_answers(s);
        }
    });
}

/// A cancel request stops a statement the same way.
#[test]
fn a_cancel_request_stops_a_long_series() {
    with_session(|s, db| {
        let interrupt = s.interrupt();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            for _ in 0..500 {
                if interrupt.cancel(&db) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let e = outcome(s, "select count(*) from generate_series(1, 1e12)").unwrap_err();
        canceller.join().unwrap();
        assert_eq!(
            (e.sqlstate().code(), e.message()),
            ("57014", "canceling statement due to user request")
        );
        still_answers(s);
    });
}

fn list(n: usize, item: impl Fn(usize) -> String) -> String {
    (0..n).map(item).collect::<Vec<_>>().join(",")
}

/// Long lists of constants (kept as text, `crate::literals`) answer exactly as short ones
/// do: the same types, NULL rules and errors.
#[test]
fn long_lists_of_constants_answer_as_short_ones() {
    with_session(|s, _| {
        let ints = list(1000, |i| i.to_string());
        assert_eq!(
            one(s, &format!("select 999 in ({ints})")),
            Value::Bool(true)
        );
        assert_eq!(
            one(s, &format!("select 1000 in ({ints})")),
            Value::Bool(false)
        );
        assert_eq!(
            one(s, &format!("select 1000 not in ({ints}, NULL)")),
            Value::Null
        );
        assert_eq!(
            one(s, &format!("select 2.5 in ({ints}, 2.5)")),
            Value::Bool(true)
        );
        let strings = list(1000, |i| format!("'it''s {i}'"));
        assert_eq!(
            one(s, &format!("select 'it''s 7' in ({strings})")),
            Value::Bool(true)
        );
        let e = outcome(s, &format!("select 1 in ({ints}, true)")).unwrap_err();
        assert_eq!(e.sqlstate(), "42883", "{e}");
        let e = outcome(s, &format!("select 1 in ({strings})")).unwrap_err();
        assert_eq!(e.sqlstate(), "22P02", "{e}");

        outcome(s, "create table t (a bigint, b text, c boolean)").unwrap();
        let rows = list(1000, |i| format!("({i}, 'r{i}', {})", i % 2 == 0));
        outcome(s, &format!("insert into t values {rows}")).unwrap();
        let partial = list(300, |i| format!("(-{})", i + 1));
        outcome(s, &format!("insert into t values {partial} returning a")).unwrap();
        assert_eq!(one(s, "select count(*) from t"), Value::Int(1300));
        assert_eq!(
            one(s, "select count(*) from t where b is null"),
            Value::Int(300)
        );
        assert_eq!(
            one(s, "select b from t where a = 777"),
            Value::Text("r777".into())
        );
        assert_eq!(one(s, "select count(*) from t where c"), Value::Int(500));
        let e = outcome(
            s,
            &format!("insert into t values {rows}, (1, 'x', true, 4)"),
        )
        .unwrap_err();
        assert_eq!(e.sqlstate(), "42601", "{e}");
        let wide = list(1000, |i| format!("({i}, 'x', 1, 2)"));
        let e = outcome(s, &format!("insert into t values {wide}")).unwrap_err();
        assert_eq!(
            e.message(),
            "INSERT has more expressions than target columns"
        );
        let values = list(1000, |i| format!("({i}, 'v')"));
        assert_eq!(
            one(s, &format!("select sum(column1) from (values {values}) v")),
            Value::Int(499_500)
        );
        let e = outcome(s, &format!("select * from (values {values}, (1)) v")).unwrap_err();
        assert_eq!(e.message(), "VALUES lists must all be the same length");
    });
}

/// A statement whose parse would take more than the limit is refused before it is parsed
/// (54000), whatever its kind; a long list of constants, which costs far less, passes.
#[test]
fn statements_too_large_to_parse_are_refused_before_parsing() {
    with_session(|s, _| {
        let select = format!("select {}", list(2_000_000, |_| "1".into()));
        let e = outcome(s, &select).unwrap_err();
        assert_eq!(e.sqlstate(), "54000");
        assert!(
            e.message()
                .starts_with("statement too large: parsing it would take about"),
            "{e}"
        );
        let expressions = format!(
            "select 1 where 1 in ({})",
            list(1_000_000, |_| "1+0".into())
        );
        assert_eq!(code(s, &expressions), "54000");
        let constants = format!("select 1 where 1 in ({})", list(1_000_000, |_| "1".into()));
        assert_eq!(one(s, &constants), Value::Int(1));
    });
}

/// Extreme arguments to every operator and function that does arithmetic on what a
/// client sends: each answers or fails with a SQLSTATE; none panics (a debug build panics
/// on integer overflow, so this finds unchecked arithmetic).
#[test]
fn extreme_values_never_panic() {
    with_session(|s, _| {
        let statements = [
            "select pg_size_pretty(-9223372036854775808)",
            "select pg_size_pretty(9223372036854775807)",
            "select abs(-9223372036854775808)",
            "select -(-9223372036854775807 - 1)",
            "select 9223372036854775807 * 2, (-9223372036854775807 - 1) / -1",
            "select (-9223372036854775807 - 1) % -1",
            "select 32767::int2 + 1::int2, -2147483648 * -1",
            "select round(1.5, 2147483647), round(1.5, -2147483648)",
            "select round(1e300::float8, 2147483647), round(1e300::float8, -2147483648)",
            "select substr('abc', -9223372036854775808, 9223372036854775807)",
            "select substr('abc', 9223372036854775807, 9223372036854775807)",
            "select substring('abc' from -9223372036854775808 for 9223372036854775807)",
            "select left('abc', -9223372036854775808), right('abc', -9223372036854775808)",
            "select left('abc', 9223372036854775807), right('abc', 9223372036854775807)",
            "select repeat('x', -1), repeat('', 9223372036854775807)",
            "select (array['a'])[-9223372036854775808], (array['a'])[9223372036854775807]",
            "select array_upper(array['a'], 2147483647), array_position(array['a'], 'b')",
            "select '294277-01-01'::timestamp",
            "select '9223372036854775807-01-01'::timestamp",
            "select '2020-01-01 00:00:00+9223372036854775807'::timestamptz",
            "select '2020-01-01 00:00:00-99:99'::timestamptz",
            "select '294276-12-31 23:59:59'::timestamp + 9223372036854775807",
            "select date '2020-01-01' + 9223372036854775807",
            "select '1e100000'::numeric",
            "select ('1' || repeat('0', 200000))::numeric",
            "select ('0.' || repeat('0', 20000) || '1')::numeric",
            "select 1e1000::numeric * 1e1000::numeric * 1e1000::numeric",
            "select 1::numeric / 3::numeric, 10::numeric % 0::numeric",
            "select 1 limit 9223372036854775807 offset 9223372036854775807",
            "select * from generate_series(9223372036854775806, 9223372036854775807)",
            "select * from generate_series(-9223372036854775807, -9223372036854775808, -1)",
            "select count(*) from generate_series(1, 10, -9223372036854775808)",
            "select count(*) from generate_series(1.5, 3, 0.5)",
            "select * from generate_series(1, 2, 0.0)",
            "select format_type(1, 2147483647), format_type(23, -2147483648)",
            "select 'x' ~ repeat('(', 5000), 'x' ~ '(?<', 'x' ~ '\\p{Greek}'",
            "select 'x' like repeat('\\', 3), '' like '', 'a' like '%%%%%_'",
            "select '\\x'::bytea, '\\xZZ'::bytea, ''::bytea",
            "select 'NaN'::float8::int, 'Infinity'::float8::bigint, 1e308::float8 * 10",
            "select 9223372036854775807::float8::bigint",
            "select '-0'::numeric, '+.5e-1000'::numeric, '.'::numeric",
            "select strpos('', ''), quote_ident(''), md5(''), upper(''), lower('ß')",
            "select pg_wal_lsn_diff('FFFFFFFF/FFFFFFFF', '0/0')",
            "select sum(x) from (values (9223372036854775807), (9223372036854775807)) v(x)",
            "select avg(x) from (values (9223372036854775807::bigint), (1)) v(x)",
            "select string_agg(x, repeat(',', 10)) from (values ('a'), ('b')) v(x)",
            "select concat(1, 2.5, true, null, '\\x00'::bytea), concat()",
            "select nullif(1, 1), coalesce(), greatest(), least(1)",
            "select 1 in (), 1 = any(array[]::text[])",
            "select to_char(now(), 'YYYY'), current_setting(repeat('x', 100000), true)",
        ];
        for sql in statements {
            let _ = outcome(s, sql);
            still_answers(s);
        }
    });
}

/// Random statements from SQL's words, operators and extreme constants: whatever comes,
/// a result or a SQLSTATE, never a panic.
#[test]
fn random_statements_never_panic() {
    const WORDS: &[&str] = &[
        "select",
        "from",
        "where",
        "and",
        "or",
        "not",
        "in",
        "is",
        "null",
        "true",
        "false",
        "case",
        "when",
        "then",
        "else",
        "end",
        "(",
        ")",
        ",",
        "+",
        "-",
        "*",
        "/",
        "%",
        "||",
        "=",
        "<>",
        "<",
        ">=",
        "::int",
        "::text",
        "::numeric",
        "::bigint",
        "::bool",
        "::date",
        "1",
        "0",
        "-1",
        "9223372036854775807",
        "-9223372036854775808",
        "2147483648",
        "1e308",
        "1.5",
        "'a'",
        "''",
        "'1'",
        "'2020-01-01'",
        "avg(",
        "sum(",
        "count(*)",
        "count(",
        "repeat(",
        "substr(",
        "left(",
        "abs(",
        "round(",
        "coalesce(",
        "array[",
        "]",
        "[1]",
        "generate_series(",
        "union",
        "values",
        "group by",
        "order by",
        "limit",
        "offset",
        "having",
        "distinct",
        "like",
        "~",
        "between",
        "exists",
        "(select",
        "as x",
        "x",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    with_session(|s, _| {
        for _ in 0..3000 {
            let len = 1 + next(24);
            let words: Vec<&str> = (0..len).map(|_| WORDS[next(WORDS.len())]).collect();
            let sql = format!("select {}", words.join(" "));
            let _ = outcome(s, &sql);
        }
        still_answers(s);
    });
}

/// On a thread of the test harness's 2 MiB, a tree deeper than that stack can drop is
/// refused when parsed (on a session's stack it parses, and binding stops it).
#[test]
fn a_small_thread_refuses_what_it_could_not_drop() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::new(open(dir.path()).unwrap());
    let sql = deep("select 1", "+1", "", 100_000);
    let e = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let e = outcome(&mut s, &sql).unwrap_err();
            still_answers(&mut s);
            e
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(
        (e.sqlstate().code(), e.message()),
        ("54001", "stack depth limit exceeded")
    );
}

/// An array of millions of elements is read an element at a time (its elements were
/// collected into a vector of strings, some 40 bytes each, by every array function).
#[test]
fn large_arrays_are_read_an_element_at_a_time() {
    with_session(|s, _| {
        let array = "('{' || repeat('7,', 2000000) || '8}')::text[]";
        assert_eq!(
            one(s, &format!("select array_length({array}, 1)")),
            Value::Int(2_000_001)
        );
        assert_eq!(
            one(s, &format!("select array_position({array}, '8')")),
            Value::Int(2_000_001)
        );
        assert_eq!(
            one(s, &format!("select '8' = any({array})")),
            Value::Bool(true)
        );
        assert_eq!(
            one(s, &format!("select ({array})[2000001]")),
            Value::Text("8".into())
        );
        assert_eq!(
            one(s, &format!("select count(*) from unnest({array}) u")),
            Value::Int(2_000_001)
        );
        assert_eq!(
            one(s, &format!("select length(array_to_string({array}, ''))")),
            Value::Int(2_000_001)
        );
        assert_eq!(
            one(s, &format!("select array_length({array} || {array}, 1)")),
            Value::Int(4_000_002)
        );
    });
}
