//! `numeric` through SQL, as PostgreSQL answers: exact input and output with the display
//! scale kept, `numeric(p, s)` rounding and overflow (22003), PostgreSQL's result scales for
//! `+ - * / %`, decimal constants as numeric, comparisons with integers and floats, casts,
//! `round` and `abs`, `sum` / `avg` (sum(bigint) and avg(integer) as numeric), an index
//! over a numeric column (order by value, 1.0 = 1.00), and values surviving a restart.

mod common;

use std::sync::Arc;

use common::{code, open, run};
use quire_sql::{format_text, parse, OutcomeKind, Session, SqlType};

/// The first row as PostgreSQL's text output, with the column types.
fn texts(s: &mut Session, sql: &str) -> Vec<(String, String)> {
    let stmt = parse(sql).unwrap().pop().unwrap();
    match s.execute(&stmt, &[], &[]).unwrap().kind {
        OutcomeKind::Rows { columns, rows } => rows[0]
            .iter()
            .zip(columns.iter())
            .map(|(v, c)| (format_text(v, c.ty).unwrap_or("NULL".into()), c.ty.name()))
            .collect(),
        other => panic!("no rows: {other:?}"),
    }
}

fn text(s: &mut Session, sql: &str) -> String {
    texts(s, sql).remove(0).0
}

#[test]
fn numeric_arithmetic_and_output_match_postgresql() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    for (sql, want) in [
        ("SELECT 1.50", "1.50"),
        ("SELECT 1.5 + 2.25", "3.75"),
        ("SELECT 1.5 * 2.25", "3.375"),
        ("SELECT 1 / 3.0", "0.33333333333333333333"),
        ("SELECT 10 / 4.0", "2.5000000000000000"),
        ("SELECT -7.5 % 2", "-1.5"),
        ("SELECT 2 + 0.5", "2.5"),
        ("SELECT '12.340'::numeric", "12.340"),
        ("SELECT CAST('1e3' AS numeric)", "1000"),
        ("SELECT 123.456::numeric(5,2)", "123.46"),
        ("SELECT round(2.5)", "3"),
        ("SELECT round(-1234.5678, 2)", "-1234.57"),
        ("SELECT round(1234.5678, -2)", "1200"),
        ("SELECT abs(-0.10)", "0.10"),
        ("SELECT 2.5::integer", "3"),
        ("SELECT 0.1::float8 + 0.2", "0.30000000000000004"),
        ("SELECT 99999999999999999999 + 1", "100000000000000000000"),
        ("SELECT -(1.5)", "-1.5"),
    ] {
        assert_eq!(text(&mut s, sql), want, "{sql}");
    }
    assert_eq!(
        texts(&mut s, "SELECT 1.5, 1.5::float8 + 1, 1 + 1")
            .into_iter()
            .map(|(_, t)| t)
            .collect::<Vec<_>>(),
        ["numeric", "double precision", "integer"]
    );
    assert_eq!(text(&mut s, "SELECT 1.0 = 1.00"), "t");
    assert_eq!(text(&mut s, "SELECT 2 > 1.5"), "t");
    assert_eq!(text(&mut s, "SELECT 1.5 < 1.6::float8"), "t");
    assert_eq!(code(run(&mut s, "SELECT 1 / 0.0")), "22012");
    assert_eq!(code(run(&mut s, "SELECT 1234.5::numeric(5,2)")), "22003");
    assert_eq!(code(run(&mut s, "SELECT 'abc'::numeric")), "22P02");
    assert_eq!(code(run(&mut s, "SELECT 1e30::bigint")), "22003");
    assert_eq!(
        code(run(&mut s, "CREATE TABLE bad (a numeric(2000, 1))")),
        "22023"
    );
    Ok(())
}

#[test]
fn numeric_columns_store_index_and_aggregate() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut s = Session::new(Arc::clone(&db));
    run(
        &mut s,
        "CREATE TABLE m (id int PRIMARY KEY, price numeric(10,2) NOT NULL, x numeric, n bigint); \
         CREATE INDEX m_price ON m (price); \
         INSERT INTO m VALUES (1, 10.005, 1.0, 9223372036854775807), (2, 3, 2.50, 1), \
         (3, -4.1, NULL, 2), (4, 3.00, 0.001, NULL)",
    )
    .unwrap();
    assert_eq!(
        texts(&mut s, "SELECT price, x FROM m WHERE id = 1")
            .into_iter()
            .map(|(v, _)| v)
            .collect::<Vec<_>>(),
        ["10.01", "1.0"]
    );
    // The index orders by value and finds 3 and 3.00 alike.
    let ids = |s: &mut Session, sql: &str| -> Vec<String> {
        let stmt = parse(sql).unwrap().pop().unwrap();
        match s.execute(&stmt, &[], &[]).unwrap().kind {
            OutcomeKind::Rows { rows, .. } => rows
                .iter()
                .map(|r| format_text(&r[0], SqlType::Int4).unwrap())
                .collect(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        ids(&mut s, "SELECT id FROM m WHERE price = 3 ORDER BY id"),
        ["2", "4"]
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT id FROM m WHERE price > 2.999 ORDER BY price, id"
        ),
        ["2", "4", "1"]
    );
    assert_eq!(
        ids(&mut s, "SELECT id FROM m ORDER BY price LIMIT 1"),
        ["3"]
    );
    let row = texts(
        &mut s,
        "SELECT sum(price), avg(price), min(x), max(x), sum(n), avg(id), sum(id) FROM m",
    );
    assert_eq!(
        row,
        [
            ("11.91", "numeric"),
            ("2.9775000000000000", "numeric"),
            ("0.001", "numeric"),
            ("2.50", "numeric"),
            ("9223372036854775810", "numeric"),
            ("2.5000000000000000", "numeric"),
            ("10", "bigint"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    run(&mut s, "UPDATE m SET price = price * 1.1 WHERE id = 2").unwrap();
    assert_eq!(text(&mut s, "SELECT price FROM m WHERE id = 2"), "3.30");
    assert_eq!(
        code(run(&mut s, "UPDATE m SET price = 1e9 WHERE id = 2")),
        "22003"
    );
    // pg_attribute's typmod gives psql its `numeric(10,2)`.
    assert_eq!(
        text(
            &mut s,
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = 'm'::regclass AND attname = 'price'"
        ),
        "numeric(10,2)"
    );
    drop(s);
    Arc::into_inner(db).expect("the only handle").close()?;
    let mut s = Session::new(open(dir.path())?);
    assert_eq!(
        text(&mut s, "SELECT sum(price) FROM m WHERE price < 100"),
        "12.21"
    );
    Ok(())
}
