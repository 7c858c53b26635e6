//! Sequences, `serial` columns and DEFAULT expressions through SQL, as PostgreSQL answers:
//! nextval/currval/setval/lastval and their errors, serial columns numbered by their own
//! sequence (dropped with the table, refused to DROP SEQUENCE alone), DEFAULT in INSERT
//! (left out, `DEFAULT`, DEFAULT VALUES, INSERT ... SELECT) and UPDATE, the catalog views
//! psql reads (pg_class relkind 'S', pg_attrdef, pg_sequence), and all of it surviving a
//! restart.

mod common;

use std::sync::Arc;

use common::{code, one, open, rows, run};
use quire_engine::Value;
use quire_sql::Session;

#[test]
fn sequences_hand_out_values_outside_transactions() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    run(&mut s, "CREATE SEQUENCE s START 10 INCREMENT BY 5").unwrap();
    assert_eq!(code(run(&mut s, "SELECT currval('s')")), "55000");
    assert_eq!(code(run(&mut s, "SELECT lastval()")), "55000");
    assert_eq!(one(&mut s, "SELECT nextval('s')"), Value::Int(10));
    run(&mut s, "BEGIN").unwrap();
    assert_eq!(one(&mut s, "SELECT nextval('s')"), Value::Int(15));
    run(&mut s, "ROLLBACK").unwrap();
    assert_eq!(one(&mut s, "SELECT nextval('s'::regclass)"), Value::Int(20));
    assert_eq!(one(&mut s, "SELECT currval('s')"), Value::Int(20));
    assert_eq!(one(&mut s, "SELECT lastval()"), Value::Int(20));
    assert_eq!(one(&mut s, "SELECT setval('s', 100)"), Value::Int(100));
    assert_eq!(one(&mut s, "SELECT nextval('s')"), Value::Int(105));
    assert_eq!(one(&mut s, "SELECT setval('s', 7, false)"), Value::Int(7));
    assert_eq!(one(&mut s, "SELECT nextval('s')"), Value::Int(7));
    assert_eq!(code(run(&mut s, "SELECT nextval('nope')")), "42P01");
    run(&mut s, "CREATE TABLE t (a int)").unwrap();
    assert_eq!(code(run(&mut s, "SELECT nextval('t')")), "42809");
    assert_eq!(code(run(&mut s, "DROP SEQUENCE t")), "42809");
    run(&mut s, "CREATE SEQUENCE tiny AS smallint MAXVALUE 2").unwrap();
    run(&mut s, "SELECT nextval('tiny'); SELECT nextval('tiny')").unwrap();
    let err = run(&mut s, "SELECT nextval('tiny')").unwrap_err();
    assert!(
        err.starts_with("2200H nextval: reached maximum value of sequence \"tiny\" (2)"),
        "{err}"
    );
    assert_eq!(code(run(&mut s, "SELECT setval('tiny', 0)")), "22003");
    assert_eq!(code(run(&mut s, "CREATE SEQUENCE s")), "42P07");
    run(&mut s, "CREATE SEQUENCE IF NOT EXISTS s").unwrap();
    // CREATE and DROP SEQUENCE are transactional.
    run(&mut s, "BEGIN; DROP SEQUENCE s; ROLLBACK").unwrap();
    assert_eq!(one(&mut s, "SELECT nextval('s')"), Value::Int(12));
    run(&mut s, "BEGIN; CREATE SEQUENCE ghost; ROLLBACK").unwrap();
    assert_eq!(code(run(&mut s, "SELECT nextval('ghost')")), "42P01");
    run(&mut s, "DROP SEQUENCE s, tiny").unwrap();
    run(&mut s, "DROP SEQUENCE IF EXISTS s").unwrap();
    assert_eq!(code(run(&mut s, "DROP SEQUENCE s")), "42P01");
    Ok(())
}

#[test]
fn serial_and_default_columns_fill_what_a_statement_leaves_out() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = open(dir.path())?;
    let mut s = Session::new(Arc::clone(&db));
    run(
        &mut s,
        "CREATE TABLE items (id serial PRIMARY KEY, big bigserial, name text DEFAULT 'none', \
         qty int NOT NULL DEFAULT 1 + 1, at timestamptz DEFAULT now())",
    )
    .unwrap();
    run(&mut s, "INSERT INTO items (name) VALUES ('a'), (DEFAULT)").unwrap();
    run(&mut s, "INSERT INTO items DEFAULT VALUES").unwrap();
    run(
        &mut s,
        "INSERT INTO items (id, name, qty) VALUES (DEFAULT, 'b', 5)",
    )
    .unwrap();
    run(
        &mut s,
        "INSERT INTO items (name) SELECT 'c' || g FROM generate_series(1, 2) g",
    )
    .unwrap();
    assert_eq!(
        rows(
            &mut s,
            "SELECT id, big, name, qty, at IS NOT NULL FROM items ORDER BY id"
        ),
        [
            (1, "a", 2),
            (2, "none", 2),
            (3, "none", 2),
            (4, "b", 5),
            (5, "c1", 2),
            (6, "c2", 2)
        ]
        .map(|(id, name, qty)| vec![
            Value::Int(id),
            Value::Int(id),
            Value::Text(name.into()),
            Value::Int(qty),
            Value::Bool(true)
        ])
    );
    run(
        &mut s,
        "UPDATE items SET qty = DEFAULT, name = DEFAULT WHERE id = 4",
    )
    .unwrap();
    assert_eq!(
        rows(&mut s, "SELECT name, qty FROM items WHERE id = 4"),
        [[Value::Text("none".into()), Value::Int(2)]]
    );
    assert_eq!(one(&mut s, "SELECT currval('items_id_seq')"), Value::Int(6));
    // psql's \d reads the defaults from pg_attrdef through pg_get_expr.
    assert_eq!(
        rows(
            &mut s,
            "SELECT a.attname, pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a \
             JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
             WHERE a.attrelid = 'items'::regclass AND a.atthasdef ORDER BY a.attnum"
        ),
        [
            ("id", "nextval('items_id_seq'::regclass)"),
            ("big", "nextval('items_big_seq'::regclass)"),
            ("name", "'none'::text"),
            ("qty", "1 + 1"),
            ("at", "now()"),
        ]
        .map(|(a, b)| vec![Value::Text(a.into()), Value::Text(b.into())])
    );
    assert_eq!(
        rows(
            &mut s,
            "SELECT relname FROM pg_class WHERE relkind = 'S' ORDER BY relname"
        ),
        [
            [Value::Text("items_big_seq".into())],
            [Value::Text("items_id_seq".into())]
        ]
    );
    assert_eq!(
        one(
            &mut s,
            "SELECT seqmax FROM pg_sequence WHERE seqrelid = 'items_id_seq'::regclass"
        ),
        Value::Int(i64::from(i32::MAX))
    );
    // ALTER COLUMN SET/DROP DEFAULT; DROP DEFAULT keeps the serial column's sequence.
    run(
        &mut s,
        "ALTER TABLE items ALTER COLUMN name SET DEFAULT 'x' || 'y'",
    )
    .unwrap();
    run(&mut s, "ALTER TABLE items ALTER COLUMN qty DROP DEFAULT").unwrap();
    run(&mut s, "ALTER TABLE items ALTER id DROP DEFAULT").unwrap();
    assert_eq!(
        code(run(&mut s, "INSERT INTO items (big) VALUES (0)")),
        "23502"
    );
    run(
        &mut s,
        "BEGIN; ALTER TABLE items ALTER COLUMN qty SET DEFAULT 9; ROLLBACK",
    )
    .unwrap();
    let err = run(
        &mut s,
        "INSERT INTO items (id, big) VALUES (nextval('items_id_seq'), 0)",
    );
    assert!(
        err.unwrap_err().contains("column \"qty\""),
        "no default for qty"
    );
    run(
        &mut s,
        "INSERT INTO items (id, big, qty) VALUES (nextval('items_id_seq'), 0, 3)",
    )
    .unwrap();
    assert_eq!(
        rows(&mut s, "SELECT id, name, qty FROM items WHERE big = 0"),
        [[Value::Int(8), Value::Text("xy".into()), Value::Int(3)]]
    );
    assert_eq!(
        code(run(&mut s, "ALTER TABLE items ALTER nope DROP DEFAULT")),
        "42703"
    );
    run(
        &mut s,
        "DELETE FROM items WHERE big = 0; \
         ALTER TABLE items ALTER id SET DEFAULT nextval('items_id_seq'::regclass); \
         ALTER TABLE items ALTER name SET DEFAULT 'none'; \
         ALTER TABLE items ALTER qty SET DEFAULT 1 + 1",
    )
    .unwrap();
    // The column owns its sequence: not dropped alone, dropped with the table.
    assert_eq!(code(run(&mut s, "DROP SEQUENCE items_id_seq")), "2BP01");
    // Bad defaults are refused when the table is made.
    assert_eq!(
        code(run(&mut s, "CREATE TABLE bad (a int DEFAULT 'x')")),
        "22P02"
    );
    assert_eq!(
        code(run(&mut s, "CREATE TABLE bad (a int DEFAULT b)")),
        "0A000"
    );
    assert_eq!(
        code(run(&mut s, "CREATE TABLE bad (a serial DEFAULT 1)")),
        "42601"
    );
    // COPY leaving out a column with a DEFAULT is refused, not filled with NULL.
    assert_eq!(code(run(&mut s, "COPY items (name) FROM STDIN")), "0A000");
    drop(s);

    // After a clean restart: the defaults, and the sequence right after its last value
    // (the shutdown checkpoint wrote its page; a crash would skip up to 32 values).
    Arc::into_inner(db).expect("the only handle").close()?;
    let mut s = Session::new(open(dir.path())?);
    run(&mut s, "INSERT INTO items (name) VALUES ('after')").unwrap();
    assert_eq!(
        one(&mut s, "SELECT id FROM items WHERE name = 'after'"),
        Value::Int(9)
    );
    run(&mut s, "DROP TABLE items").unwrap();
    assert!(rows(&mut s, "SELECT relname FROM pg_class WHERE relkind = 'S'").is_empty());
    assert_eq!(code(run(&mut s, "SELECT nextval('items_id_seq')")), "42P01");
    // A name taken: the next serial's sequence gets a number.
    run(&mut s, "CREATE SEQUENCE u_id_seq").unwrap();
    run(&mut s, "CREATE TABLE u (id serial)").unwrap();
    run(&mut s, "INSERT INTO u DEFAULT VALUES").unwrap();
    assert_eq!(one(&mut s, "SELECT currval('u_id_seq1')"), Value::Int(1));
    Ok(())
}

#[test]
fn psql_reads_owners_sizes_and_unnested_arrays() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = Session::new(open(dir.path())?);
    run(
        &mut s,
        "CREATE TABLE t (id bigserial PRIMARY KEY, v text); \
         INSERT INTO t (v) SELECT 'x' FROM generate_series(1, 500)",
    )
    .unwrap();
    // `\d t_id_seq`'s "Owned by": pg_depend's auto dependency, found through regclass casts
    // of catalog names.
    assert_eq!(
        rows(
            &mut s,
            "SELECT c.relname, a.attname, d.deptype FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_depend d ON c.oid = d.refobjid \
             JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = d.refobjsubid \
             WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass \
             AND d.objid = 't_id_seq'::regclass"
        ),
        [[
            Value::Text("t".into()),
            Value::Text("id".into()),
            Value::Text("a".into())
        ]]
    );
    assert_eq!(
        one(
            &mut s,
            "SELECT format_type(seqtypid, NULL) FROM pg_sequence"
        ),
        Value::Text("bigint".into())
    );
    // Sizes: whole pages, the table's forks, its index, and PostgreSQL's pretty units.
    let main = one(&mut s, "SELECT pg_relation_size('t')");
    let Value::Int(main) = main else {
        panic!("{main:?}")
    };
    assert!(main > 0 && main % 8192 == 0, "{main}");
    let total = one(&mut s, "SELECT pg_total_relation_size('t')");
    let Value::Int(total) = total else {
        panic!("{total:?}")
    };
    assert!(total > main, "{total} > {main}: the index counts");
    assert_eq!(
        one(&mut s, "SELECT pg_indexes_size('t') + pg_table_size('t')"),
        Value::Int(total)
    );
    assert_eq!(
        one(&mut s, "SELECT pg_relation_size(999999) IS NULL"),
        Value::Bool(true)
    );
    for (bytes, pretty) in [
        (8192_i64, "8192 bytes"),
        (10240, "10 kB"),
        (1_572_864, "1536 kB"),
        (10_485_760, "10 MB"),
        (5_368_709_120, "5120 MB"),
    ] {
        assert_eq!(
            one(&mut s, &format!("SELECT pg_size_pretty({bytes}::bigint)")),
            Value::Text(pretty.into()),
            "{bytes}"
        );
    }
    assert_eq!(
        rows(&mut s, "SELECT x FROM unnest('{b,a}'::text[]) x ORDER BY 1"),
        [[Value::Text("a".into())], [Value::Text("b".into())]]
    );
    assert!(rows(&mut s, "SELECT * FROM pg_proc").is_empty());
    assert!(rows(&mut s, "SELECT * FROM pg_extension").is_empty());
    Ok(())
}
