//! The server against a real client (`tokio-postgres`): each test starts a server in-process
//! on a temporary directory and a free loopback port, talks to it, and shuts it down.

mod common;

use std::path::Path;

use common::{
    code, config, frontend, message, parse_bind_execute, query_messages, raw_connect,
    read_until_ready, send_query, simple, Running,
};
use tokio_postgres::{NoTls, SimpleQueryMessage};

/// A server with `max_connections` connections.
async fn start(dir: &Path, max_connections: usize) -> anyhow::Result<Running> {
    let mut config = config(dir);
    config.engine.max_connections = max_connections;
    // Every slot for the tests' superuser, postgres.
    config.superuser_reserved_connections = 0;
    Running::start(config).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simple_query_runs_several_statements_and_reports_tags() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let client = server.connect().await?;
    let messages = client
        .simple_query(
            "CREATE TABLE t (id integer PRIMARY KEY, name text NOT NULL, score double precision); \
             INSERT INTO t VALUES (1, 'one', 1.5), (2, 'two', NULL); \
             INSERT INTO t (name, id) VALUES ('three', 3); \
             UPDATE t SET score = 7 WHERE id >= 2; \
             DELETE FROM t WHERE id = 3; \
             SELECT id, name, score FROM t ORDER BY id",
        )
        .await?;
    let tags: Vec<u64> = messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::CommandComplete(n) => Some(*n),
            _ => None,
        })
        .collect();
    // CREATE TABLE 0, INSERT 2, INSERT 1, UPDATE 2, DELETE 1, SELECT 2.
    assert_eq!(tags, [0, 2, 1, 2, 1, 2]);
    let rows = simple(&client, "SELECT * FROM t ORDER BY id DESC").await?;
    assert_eq!(
        rows,
        [
            vec![Some("2".into()), Some("two".into()), Some("7".into())],
            vec![Some("1".into()), Some("one".into()), Some("1.5".into())],
        ]
    );
    assert_eq!(
        simple(&client, "SELECT count(*) FROM t WHERE score IS NOT NULL").await?,
        [vec![Some("2".into())]]
    );
    assert_eq!(
        simple(&client, "SELECT 1, 'x', true").await?,
        [vec![Some("1".into()), Some("x".into()), Some("t".into())]]
    );
    // Empty query and a statement after an error in the same message (not run).
    client.simple_query("").await?;
    let e = client
        .simple_query("SELECT 1; SELEC 2; DROP TABLE t")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "42601");
    let e = client
        .simple_query("INSERT INTO t VALUES (5, 'x', 0); SELECT nope FROM t; DROP TABLE t")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "42703");
    // One message is one implicit transaction: the INSERT before the error is gone too,
    // and the DROP after it never ran.
    assert_eq!(
        simple(&client, "SELECT count(*) FROM t").await?,
        [vec![Some("2".into())]]
    );
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_protocol_with_parameters_in_text_and_binary() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let client = server.connect().await?;
    client
        .batch_execute(
            "CREATE TABLE acc (id bigint PRIMARY KEY, small smallint, n integer, ok boolean, \
             name varchar(10), f double precision, r real, b bytea, at timestamp)",
        )
        .await?;
    // Parameter types inferred from the columns; tokio-postgres sends them in binary.
    let n = client
        .execute(
            "INSERT INTO acc VALUES ($1, $2, $3, $4, $5, $6, $7, $8, '2026-11-23 19:15:00')",
            &[
                &1i64,
                &7i16,
                &-3i32,
                &true,
                &"alice",
                &2.5f64,
                &0.5f32,
                &vec![1u8, 2, 255],
            ],
        )
        .await?;
    assert_eq!(n, 1);
    client
        .execute(
            "INSERT INTO acc (id, name) VALUES ($1, $2)",
            &[&2i64, &"bob"],
        )
        .await?;
    let stmt = client
        .prepare("SELECT id, small, n, ok, name, f, r, b FROM acc WHERE id = $1")
        .await?;
    assert_eq!(stmt.params(), &[tokio_postgres::types::Type::INT8]);
    let row = client.query_one(&stmt, &[&1i64]).await?;
    assert_eq!(row.get::<_, i64>(0), 1);
    assert_eq!(row.get::<_, i16>(1), 7);
    assert_eq!(row.get::<_, i32>(2), -3);
    assert!(row.get::<_, bool>(3));
    assert_eq!(row.get::<_, String>(4), "alice");
    // Exact: 2.5 and 0.5 are binary fractions, sent in binary.
    assert!((row.get::<_, f64>(5) - 2.5).abs() < f64::EPSILON);
    assert!((row.get::<_, f32>(6) - 0.5).abs() < f32::EPSILON);
    assert_eq!(row.get::<_, Vec<u8>>(7), vec![1, 2, 255]);
    let row = client.query_one(&stmt, &[&2i64]).await?;
    assert_eq!(row.get::<_, Option<i16>>(1), None);
    // A parameter typed by a cast, without a table.
    let row = client.query_one("SELECT $1::int8", &[&42i64]).await?;
    assert_eq!(row.get::<_, i64>(0), 42);
    assert_eq!(row.columns()[0].name(), "int8");
    // Ranges, <>, IS NULL, LIMIT with a parameter, UPDATE with col + n.
    let ids: Vec<i64> = client
        .query(
            "SELECT id FROM acc WHERE id > $1 AND name <> 'x' ORDER BY id LIMIT $2",
            &[&0i64, &5i64],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids, [1, 2]);
    let updated = client
        .execute("UPDATE acc SET n = n + 10 WHERE id = $1", &[&1i64])
        .await?;
    assert_eq!(updated, 1);
    let n: i32 = client
        .query_one("SELECT n FROM acc WHERE id = 1", &[])
        .await?
        .get(0);
    assert_eq!(n, 7);
    let nulls = client
        .query("SELECT id FROM acc WHERE n IS NULL", &[])
        .await?;
    assert_eq!(nulls.len(), 1);
    // A value too long for varchar(10): 22001; a bad integer in text: 22P02.
    let e = client
        .execute(
            "INSERT INTO acc (id, name) VALUES (3, $1)",
            &[&"far too long a name"],
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), "22001");
    let e = client
        .execute("INSERT INTO acc (id) VALUES ('12a')", &[])
        .await
        .unwrap_err();
    assert_eq!(code(&e), "22P02");
    let e = client
        .execute("INSERT INTO acc (id, ok) VALUES (4, 5)", &[])
        .await
        .unwrap_err();
    assert_eq!(code(&e), "42804");
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_commit_roll_back_and_abort() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let mut client = server.connect().await?;
    let other = server.connect().await?;
    client
        .batch_execute("CREATE TABLE k (id int PRIMARY KEY, v int)")
        .await?;
    // Committed: the other session sees the rows after COMMIT, not before.
    client
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; INSERT INTO k VALUES (1, 10)")
        .await?;
    assert_eq!(
        simple(&other, "SELECT count(*) FROM k").await?,
        [vec![Some("0".into())]]
    );
    client.batch_execute("COMMIT").await?;
    assert_eq!(
        simple(&other, "SELECT count(*) FROM k").await?,
        [vec![Some("1".into())]]
    );
    // Rolled back, DDL included.
    client
        .batch_execute(
            "START TRANSACTION; INSERT INTO k VALUES (2, 20); CREATE TABLE gone (a int); ROLLBACK",
        )
        .await?;
    assert_eq!(
        simple(&other, "SELECT count(*) FROM k").await?,
        [vec![Some("1".into())]]
    );
    assert_eq!(
        code(&other.simple_query("SELECT * FROM gone").await.unwrap_err()),
        "42P01"
    );
    // tokio-postgres' transaction API (extended protocol) commits.
    let tx = client.transaction().await?;
    tx.execute("INSERT INTO k VALUES ($1, $2)", &[&3i32, &30i32])
        .await?;
    tx.commit().await?;
    // An error inside a block: 23505, then 25P02 for everything until ROLLBACK.
    client.batch_execute("BEGIN").await?;
    let e = client
        .batch_execute("INSERT INTO k VALUES (1, 0)")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "23505");
    let e = client.batch_execute("SELECT 1").await.unwrap_err();
    assert_eq!(code(&e), "25P02");
    let e = client
        .query("SELECT v FROM k WHERE id = $1", &[&1i32])
        .await
        .unwrap_err();
    assert_eq!(code(&e), "25P02");
    client.batch_execute("ROLLBACK").await?;
    assert_eq!(
        simple(&client, "SELECT v FROM k WHERE id = 3").await?,
        [vec![Some("30".into())]]
    );
    // COMMIT of an aborted block rolls back.
    client
        .batch_execute("BEGIN; INSERT INTO k VALUES (4, 40)")
        .await?;
    assert!(client.batch_execute("SELECT * FROM nowhere").await.is_err());
    client.batch_execute("COMMIT").await?;
    assert_eq!(
        simple(&client, "SELECT count(*) FROM k").await?,
        [vec![Some("2".into())]]
    );
    // Outside a block, a unique violation leaves the session usable.
    assert_eq!(
        code(
            &client
                .batch_execute("INSERT INTO k VALUES (3, 0)")
                .await
                .unwrap_err()
        ),
        "23505"
    );
    assert_eq!(
        code(
            &client
                .batch_execute("INSERT INTO k (v) VALUES (1)")
                .await
                .unwrap_err()
        ),
        "23502"
    );
    assert_eq!(
        code(
            &client
                .batch_execute("CREATE TABLE k (a int)")
                .await
                .unwrap_err()
        ),
        "42P07"
    );
    assert_eq!(
        code(
            &client
                .batch_execute("CREATE MATERIALIZED VIEW kv AS SELECT a FROM k")
                .await
                .unwrap_err()
        ),
        "0A000"
    );
    client
        .batch_execute("CREATE TABLE IF NOT EXISTS k (a int); DROP TABLE IF EXISTS nothing_here")
        .await?;
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_waiting_on_a_row_lock_holds_no_runtime_thread() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let a = server.connect().await?;
    let b = server.connect().await?;
    a.batch_execute("CREATE TABLE c (id int PRIMARY KEY, n int); INSERT INTO c VALUES (1, 0)")
        .await?;
    a.batch_execute("BEGIN; UPDATE c SET n = n + 1 WHERE id = 1")
        .await?;
    // b waits for a's row lock; with two runtime threads, two more sessions still work.
    let waiter = tokio::spawn(async move {
        b.batch_execute("UPDATE c SET n = n + 1 WHERE id = 1")
            .await
            .map(|()| b)
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    for _ in 0..2 {
        let c = server.connect().await?;
        assert_eq!(
            simple(&c, "SELECT n FROM c WHERE id = 1").await?,
            [vec![Some("0".into())]]
        );
    }
    assert!(!waiter.is_finished());
    a.batch_execute("COMMIT").await?;
    let b = waiter.await??;
    assert_eq!(
        simple(&b, "SELECT n FROM c").await?,
        [vec![Some("2".into())]]
    );
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_connections_refuses_with_53300_and_frees_slots() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 2).await?;
    let first = server.connect().await?;
    let second = server.connect().await?;
    let e = server.connect().await.unwrap_err();
    assert_eq!(code(&e), "53300");
    drop(second);
    // The slot comes back once the connection's task has noticed the close.
    let mut third = None;
    for _ in 0..50 {
        match server.connect().await {
            Ok(c) => {
                third = Some(c);
                break;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    }
    let third = third.expect("a slot is free again");
    assert_eq!(simple(&third, "SELECT 1").await?, [vec![Some("1".into())]]);
    assert_eq!(simple(&first, "SELECT 2").await?, [vec![Some("2".into())]]);
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_on_the_same_directory_finds_the_data() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let client = server.connect().await?;
    client.batch_execute("CREATE TABLE kept (id int PRIMARY KEY, s text); INSERT INTO kept VALUES (1, 'a'), (2, 'b')").await?;
    // An open transaction at shutdown is rolled back.
    client
        .batch_execute("BEGIN; INSERT INTO kept VALUES (3, 'lost')")
        .await?;
    server.stop().await?;
    drop(client);
    let server = start(dir.path(), 10).await?;
    let client = server.connect().await?;
    let rows: Vec<(i32, String)> = client
        .query("SELECT id, s FROM kept ORDER BY id", &[])
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(rows, [(1, "a".to_string()), (2, "b".to_string())]);
    // The declared type survived too: `id` is still integer (int4), not the engine's int8.
    let stmt = client.prepare("SELECT id FROM kept").await?;
    assert_eq!(
        stmt.columns()[0].type_(),
        &tokio_postgres::types::Type::INT4
    );
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_reports_parameters_and_refuses_unknown_users() -> anyhow::Result<()> {
    // Listening beyond loopback: tests/auth.rs.
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let e = tokio_postgres::Config::new()
        .host("127.0.0.1")
        .port(server.addr.port())
        .user("mallory")
        .connect(NoTls)
        .await
        .err()
        .expect("an unknown user is refused");
    assert_eq!(code(&e), "28000");
    let client = server.connect().await?;
    // The settings clients read: SHOW answers them, an unknown one is 42704.
    let shown = client.simple_query("SHOW server_version").await?;
    let SimpleQueryMessage::Row(row) = &shown[1] else {
        panic!("SHOW returns a row: {shown:?}")
    };
    assert_eq!(row.get(0), Some(quire_sql::SERVER_VERSION));
    assert_eq!(
        code(
            &client
                .simple_query("SHOW no_such_setting")
                .await
                .unwrap_err()
        ),
        "42704"
    );
    assert_eq!(simple(&client, "SELECT 3").await?, [vec![Some("3".into())]]);
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_protocol_parameter_status_and_ready_for_query_states() -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let (mut sock, messages) = raw_connect(server.addr).await?;
    let mut params = std::collections::HashMap::new();
    for (kind, body) in &messages {
        if *kind == b'S' {
            let mut parts = body
                .split(|b| *b == 0)
                .map(|p| String::from_utf8_lossy(p).into_owned());
            params.insert(
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
            );
        }
    }
    let expected = [
        ("server_version", "16.0 (quire 0.1.0)"),
        ("server_encoding", "UTF8"),
        ("client_encoding", "UTF8"),
        ("DateStyle", "ISO, MDY"),
        ("integer_datetimes", "on"),
        ("standard_conforming_strings", "on"),
        ("TimeZone", "UTC"),
    ];
    for (name, value) in expected {
        assert_eq!(params.get(name).map(String::as_str), Some(value), "{name}");
    }
    assert_eq!(messages.last().map(|(_, b)| b[0]), Some(b'I'));
    assert_eq!(send_query(&mut sock, "BEGIN").await?, b'T');
    assert_eq!(send_query(&mut sock, "SELECT 1").await?, b'T');
    assert_eq!(send_query(&mut sock, "SELECT * FROM missing").await?, b'E');
    assert_eq!(send_query(&mut sock, "SELECT 1").await?, b'E');
    assert_eq!(send_query(&mut sock, "ROLLBACK").await?, b'I');
    assert_eq!(send_query(&mut sock, "SELECT * FROM missing").await?, b'I');
    assert_eq!(
        send_query(&mut sock, "BEGIN; SELECT 1; COMMIT").await?,
        b'I'
    );
    // VACUUM VERBOSE reports as PostgreSQL does: an INFO NoticeResponse before its
    // CommandComplete.
    send_query(
        &mut sock,
        "CREATE TABLE v (a int); INSERT INTO v VALUES (1)",
    )
    .await?;
    let messages = query_messages(&mut sock, "VACUUM VERBOSE v").await?;
    let kinds: Vec<u8> = messages.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, b"NCZ", "{messages:?}");
    let notice = String::from_utf8_lossy(&messages[0].1);
    assert!(
        notice.contains("SINFO") && notice.contains("vacuuming"),
        "{notice}"
    );
    // Garbage after startup: an error, never a crash; the server keeps serving others.
    sock.write_all(&[b'?', 0, 0, 0, 4]).await?;
    drop(sock);
    let client = server.connect().await?;
    assert_eq!(simple(&client, "SELECT 5").await?, [vec![Some("5".into())]]);
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_moves_rows_both_ways_and_a_bad_line_loses_nothing() -> anyhow::Result<()> {
    use futures::{SinkExt, StreamExt};
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let client = server.connect().await?;
    client
        .batch_execute("CREATE TABLE c (id int PRIMARY KEY, name text, at timestamp)")
        .await?;
    // COPY FROM STDIN in text format, in chunks that split lines.
    let sink = client.copy_in("COPY c FROM STDIN").await?;
    futures::pin_mut!(sink);
    for chunk in [
        "1\tone\t2020-01-01 00:00:00\n2\t",
        "two\t\\N\n3\tth\\tree\t\\N\n",
    ] {
        sink.send(bytes::Bytes::from(chunk)).await?;
    }
    assert_eq!(sink.finish().await?, 3);
    // CSV with a header; a line that does not parse rolls the whole COPY back.
    let sink = client
        .copy_in("COPY c (id, name) FROM STDIN WITH (FORMAT csv, HEADER true)")
        .await?;
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from("id,name\n4,four\nfive,5\n"))
        .await?;
    let e = sink.finish().await.unwrap_err();
    assert_eq!(code(&e), "22P02");
    assert_eq!(
        simple(&client, "SELECT count(*) FROM c").await?,
        [[Some("3".into())]]
    );
    // COPY TO STDOUT in CSV.
    let out = client
        .copy_out("COPY c (id, name, at) TO STDOUT WITH CSV")
        .await?;
    futures::pin_mut!(out);
    let mut text = Vec::new();
    while let Some(chunk) = out.next().await {
        text.extend_from_slice(&chunk?);
    }
    assert_eq!(
        String::from_utf8(text)?,
        "1,one,2020-01-01 00:00:00\n2,two,\n3,th\tree,\n"
    );
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_queries_and_settings_answer_as_postgresql_does() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let client = server.connect().await?;
    client
        .batch_execute(
            "CREATE TABLE acc (aid int NOT NULL, bid int, filler char(8)); \
             ALTER TABLE acc ADD PRIMARY KEY (aid); CREATE INDEX acc_bid ON acc (bid)",
        )
        .await?;
    // pgbench's start-up query (LATERAL, array_position, current_schemas, GROUP BY).
    let rows = simple(
        &client,
        "select o.n, p.partstrat, pg_catalog.count(i.inhparent) from pg_catalog.pg_class as c \
         join pg_catalog.pg_namespace as n on (n.oid = c.relnamespace) \
         cross join lateral (select pg_catalog.array_position(pg_catalog.current_schemas(true), n.nspname)) as o(n) \
         left join pg_catalog.pg_partitioned_table as p on (p.partrelid = c.oid) \
         left join pg_catalog.pg_inherits as i on (c.oid = i.inhparent) \
         where c.relname = 'acc' and o.n is not null group by 1, 2 order by 1 asc limit 1",
    )
    .await?;
    assert_eq!(rows, [[Some("2".into()), None, Some("0".into())]]);
    // psql's column query for \d, through the extended protocol with a parameter.
    let rows = client
        .query(
            "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull \
             FROM pg_catalog.pg_attribute a WHERE a.attrelid = $1::regclass AND a.attnum > 0 \
             ORDER BY a.attnum",
            &[&"acc"],
        )
        .await?;
    let cols: Vec<(String, String, bool)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        cols,
        [
            ("aid".into(), "integer".into(), true),
            ("bid".into(), "integer".into(), false),
            ("filler".into(), "character(8)".into(), false),
        ]
    );
    let defs = simple(
        &client,
        "SELECT pg_catalog.pg_get_indexdef(i.indexrelid) FROM pg_catalog.pg_index i \
         WHERE i.indrelid = 'acc'::regclass ORDER BY 1",
    )
    .await?;
    assert_eq!(
        defs,
        [
            [Some(
                "CREATE INDEX acc_bid ON public.acc USING btree (bid)".into()
            )],
            [Some(
                "CREATE UNIQUE INDEX acc_pkey ON public.acc USING btree (aid)".into()
            )],
        ]
    );
    // SET and SHOW of session settings; a server setting cannot change at run time.
    client
        .batch_execute("SET application_name = 'quire-test'")
        .await?;
    assert_eq!(
        simple(&client, "SHOW application_name").await?,
        [[Some("quire-test".into())]]
    );
    assert_eq!(
        code(
            &client
                .batch_execute("SET buffer_drop = 'scan'")
                .await
                .unwrap_err()
        ),
        "55P02"
    );
    // The server's own settings too, as PostgreSQL shows them.
    assert_eq!(
        simple(&client, "SHOW port").await?,
        [[Some(server.addr.port().to_string())]]
    );
    assert_eq!(simple(&client, "SHOW ssl").await?, [[Some("off".into())]]);
    assert_eq!(
        simple(
            &client,
            "SELECT name, setting FROM pg_settings WHERE name IN ('listen_addresses', 'client_cpu_affinity', 'hba_file') ORDER BY name"
        )
        .await?,
        [
            [Some("client_cpu_affinity".into()), Some("on".into())],
            [
                Some("hba_file".into()),
                Some(dir.path().join("pg_hba.conf").display().to_string())
            ],
            [Some("listen_addresses".into()), Some("127.0.0.1".into())],
        ]
    );
    assert_eq!(
        code(&client.batch_execute("SET port = 1").await.unwrap_err()),
        "55P02"
    );
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_and_statement_timeout_stop_scans_and_lock_waits() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let a = server.connect().await?;
    let b = server.connect().await?;
    // A long scan, cancelled by a CancelRequest from another connection.
    let token = b.cancel_token();
    let long = tokio::spawn(async move {
        let r = b.simple_query(LONG_SCAN).await;
        (b, r)
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    token.cancel_query(NoTls).await?;
    let (b, r) = long.await?;
    let e = r.unwrap_err();
    assert_eq!(code(&e), "57014");
    assert!(message(&e).contains("due to user request"), "{e:?}");
    // A lock wait, cancelled the same way; inside a block the error aborts it.
    a.batch_execute("CREATE TABLE l (id int PRIMARY KEY, v int); INSERT INTO l VALUES (1, 0)")
        .await?;
    a.batch_execute("BEGIN; UPDATE l SET v = 1 WHERE id = 1")
        .await?;
    let token = b.cancel_token();
    let waiting = tokio::spawn(async move {
        let r = b
            .batch_execute("BEGIN; UPDATE l SET v = 2 WHERE id = 1")
            .await;
        (b, r)
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    token.cancel_query(NoTls).await?;
    let (b, r) = waiting.await?;
    assert_eq!(code(&r.unwrap_err()), "57014");
    assert_eq!(
        code(&b.batch_execute("SELECT 1").await.unwrap_err()),
        "25P02"
    );
    b.batch_execute("ROLLBACK").await?;
    // statement_timeout: a scan and a lock wait past it fail with 57014.
    b.batch_execute("SET statement_timeout = '200ms'").await?;
    let started = std::time::Instant::now();
    let e = b.simple_query(LONG_SCAN).await.unwrap_err();
    assert_eq!(code(&e), "57014");
    assert!(message(&e).contains("due to statement timeout"), "{e:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    let e = b
        .batch_execute("UPDATE l SET v = 3 WHERE id = 1")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "57014");
    a.batch_execute("COMMIT").await?;
    b.batch_execute("SET statement_timeout = 0; UPDATE l SET v = 4 WHERE id = 1")
        .await?;
    assert_eq!(simple(&a, "SELECT v FROM l").await?, [[Some("4".into())]]);
    server.stop().await
}

/// A scan that runs for seconds unless it is stopped.
const LONG_SCAN: &str = "SELECT count(*) FROM generate_series(1, 100000000)";

/// The watchdog sleeps until the earliest deadline it knows: a statement that starts with an
/// earlier deadline than the one it sleeps for wakes it, and one that starts with a later
/// deadline (which takes no lock) is found when the watchdog wakes for the earlier one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_deadline_wakes_the_watchdog_that_sleeps_for_a_later_one() -> anyhow::Result<()>
{
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let late = server.connect().await?;
    let early = server.connect().await?;
    let middle = server.connect().await?;
    late.batch_execute("SET statement_timeout = '60s'").await?;
    early
        .batch_execute("SET statement_timeout = '100ms'")
        .await?;
    middle
        .batch_execute("SET statement_timeout = '1500ms'")
        .await?;
    let token = late.cancel_token();
    let long = tokio::spawn(async move { late.simple_query(LONG_SCAN).await });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    let first = tokio::spawn(async move { early.simple_query(LONG_SCAN).await });
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    let e = middle.simple_query(LONG_SCAN).await.unwrap_err();
    for e in [first.await?.unwrap_err(), e] {
        assert_eq!(code(&e), "57014");
        assert!(message(&e).contains("due to statement timeout"), "{e:?}");
    }
    let waited = started.elapsed();
    assert!(
        waited < std::time::Duration::from_secs(20),
        "stopped after {waited:?}: the watchdog slept for the latest deadline"
    );
    token.cancel_query(NoTls).await?;
    let e = long.await?.unwrap_err();
    assert!(message(&e).contains("due to user request"), "{e:?}");
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_ends_its_connection_only() -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let mut raw = tokio::net::TcpStream::connect(server.addr).await?;
    let mut startup = Vec::new();
    startup.extend_from_slice(&196_608i32.to_be_bytes());
    startup.extend_from_slice(b"user\0postgres\0database\0quire\0\0");
    let len = i32::try_from(startup.len() + 4)?;
    raw.write_all(&len.to_be_bytes()).await?;
    raw.write_all(&startup).await?;
    // Read until ReadyForQuery ('Z', length 5, status).
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(6).any(|w| w == [b'Z', 0, 0, 0, 5, b'I']) {
        let n =
            tokio::time::timeout(std::time::Duration::from_secs(10), raw.read(&mut buf)).await??;
        anyhow::ensure!(n > 0, "the server closed before ReadyForQuery");
        seen.extend_from_slice(&buf[..n]);
    }
    // A query claiming 2 GiB: refused from its header, nothing allocated or awaited.
    raw.write_all(&[b'Q', 0x7f, 0xff, 0xff, 0xff]).await?;
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        raw.read_to_end(&mut rest),
    )
    .await?;
    assert!(
        rest.is_empty() || rest[0] == b'E',
        "an error or a closed connection, got {rest:?}"
    );
    // The server goes on serving.
    let client = server.connect().await?;
    assert_eq!(simple(&client, "SELECT 1").await?, [[Some("1".into())]]);
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_timeouts_end_the_connection_and_roll_back() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let other = server.connect().await?;
    other
        .batch_execute(
            "CREATE TABLE idle (id int PRIMARY KEY, n int); INSERT INTO idle VALUES (1, 0)",
        )
        .await?;

    // Idle in a transaction that holds a row lock: the server ends it with 25P03.
    let (client, ended) = server.connect_watched().await?;
    client
        .batch_execute(
            "SET idle_in_transaction_session_timeout = '200ms'; BEGIN; UPDATE idle SET n = 1 WHERE id = 1",
        )
        .await?;
    let r = tokio::time::timeout(std::time::Duration::from_secs(10), ended).await??;
    let e = r.expect_err("the server must end an idle-in-transaction connection");
    assert_eq!(code(&e), "25P03", "{e}");
    assert!(client.is_closed());
    // Its transaction was rolled back and its row lock released: this does not wait.
    let updated = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        other.execute("UPDATE idle SET n = n + 10 WHERE id = 1", &[]),
    )
    .await??;
    assert_eq!(updated, 1);
    assert_eq!(
        simple(&other, "SELECT n FROM idle").await?,
        [[Some("10".into())]]
    );

    // A busy or idle-outside-a-block session is not touched by that setting...
    other
        .batch_execute("SET idle_in_transaction_session_timeout = '100ms'")
        .await?;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(simple(&other, "SELECT 1").await?, [[Some("1".into())]]);

    // ... but idle_session_timeout ends an idle session with 57P05.
    let (client, ended) = server.connect_watched().await?;
    client
        .batch_execute("SET idle_session_timeout = 150")
        .await?;
    let r = tokio::time::timeout(std::time::Duration::from_secs(10), ended).await??;
    assert_eq!(code(&r.expect_err("idle session ended")), "57P05");
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_protocol_writes_up_to_sync_are_one_implicit_transaction() -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let other = server.connect().await?;
    other
        .batch_execute("CREATE TABLE p (id int PRIMARY KEY)")
        .await?;
    let (mut sock, _) = raw_connect(server.addr).await?;
    let count = || async { simple(&other, "SELECT count(*) FROM p").await };

    // Two inserts, then a failing one, then Sync: all three roll back together.
    let mut batch = parse_bind_execute("INSERT INTO p VALUES (1)");
    batch.extend(parse_bind_execute("INSERT INTO p VALUES (2)"));
    batch.extend(parse_bind_execute("INSERT INTO p VALUES (1)"));
    batch.extend(frontend(b'S', &[]));
    sock.write_all(&batch).await?;
    let kinds: Vec<u8> = read_until_ready(&mut sock)
        .await?
        .iter()
        .map(|(k, _)| *k)
        .collect();
    assert_eq!(
        kinds, b"12C12C12EZ",
        "a duplicate key error after two inserts"
    );
    // The ReadyForQuery after the error: idle, nothing left open.
    assert_eq!(
        count().await?,
        [[Some("0".into())]],
        "the error rolled back the whole batch"
    );

    // Two inserts, not yet synced: invisible to others; Sync commits both.
    let mut batch = parse_bind_execute("INSERT INTO p VALUES (1)");
    batch.extend(parse_bind_execute("INSERT INTO p VALUES (2)"));
    batch.extend(frontend(b'H', &[])); // Flush: the results now, the Sync later
    sock.write_all(&batch).await?;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(
        count().await?,
        [[Some("0".into())]],
        "uncommitted before Sync"
    );
    sock.write_all(&frontend(b'S', &[])).await?;
    let messages = read_until_ready(&mut sock).await?;
    let kinds: Vec<u8> = messages.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, b"12C12CZ");
    assert_eq!(messages.last().map(|(_, b)| b[0]), Some(b'I'));
    assert_eq!(count().await?, [[Some("2".into())]], "Sync committed both");
    server.stop().await
}

/// Execute of the unnamed portal with a row limit (0: all rows).
fn execute(max_rows: i32) -> Vec<u8> {
    let mut body = vec![0];
    body.extend_from_slice(&max_rows.to_be_bytes());
    frontend(b'E', &body)
}

/// Each message's type byte, and the command tags of the CommandCompletes in order.
fn kinds_and_tags(messages: &[(u8, Vec<u8>)]) -> (Vec<u8>, Vec<String>) {
    let kinds = messages.iter().map(|(k, _)| *k).collect();
    let tags = messages
        .iter()
        .filter(|(k, _)| *k == b'C')
        .map(|(_, b)| String::from_utf8_lossy(b.strip_suffix(&[0]).unwrap_or(b)).into_owned())
        .collect();
    (kinds, tags)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_portal_runs_in_parts_or_whole_and_then_answers_no_rows() -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let (mut sock, _) = raw_connect(server.addr).await?;
    send_query(
        &mut sock,
        "CREATE TABLE r (a int); INSERT INTO r VALUES (1), (2), (3)",
    )
    .await?;

    // Two rows, suspended; the rest; then nothing: the portal is done.
    let mut batch = parse_bind_execute("SELECT a FROM r ORDER BY a");
    batch.truncate(batch.len() - execute(0).len());
    for max_rows in [2, 0, 0] {
        batch.extend(execute(max_rows));
    }
    batch.extend(frontend(b'S', &[]));
    sock.write_all(&batch).await?;
    let (kinds, tags) = kinds_and_tags(&read_until_ready(&mut sock).await?);
    assert_eq!(kinds, b"12DDsDCCZ");
    assert_eq!(tags, ["SELECT 1", "SELECT 0"]);

    // All rows at the first Execute (the direct path), then nothing at the second.
    let mut batch = parse_bind_execute("SELECT a FROM r ORDER BY a");
    batch.extend(execute(0));
    batch.extend(frontend(b'S', &[]));
    sock.write_all(&batch).await?;
    let (kinds, tags) = kinds_and_tags(&read_until_ready(&mut sock).await?);
    assert_eq!(kinds, b"12DDDCCZ");
    assert_eq!(tags, ["SELECT 3", "SELECT 0"]);

    // A block opened and closed through Execute: ReadyForQuery follows it.
    for (sql, status) in [
        ("BEGIN", b'T'),
        ("INSERT INTO r VALUES (4)", b'T'),
        ("COMMIT", b'I'),
    ] {
        let mut batch = parse_bind_execute(sql);
        batch.extend(frontend(b'S', &[]));
        sock.write_all(&batch).await?;
        let messages = read_until_ready(&mut sock).await?;
        assert_eq!(messages.last().map(|(_, b)| b[0]), Some(status), "{sql}");
    }
    assert_eq!(send_query(&mut sock, "SELECT 1").await?, b'I');
    let messages = query_messages(&mut sock, "SELECT count(*) FROM r").await?;
    assert_eq!(messages[1], (b'D', vec![0, 1, 0, 0, 0, 1, b'4']));

    // Two result formats for three columns: PostgreSQL's 08P01 at Bind (no BindComplete),
    // then everything up to Sync is skipped, and the connection goes on.
    for describe in [true, false] {
        let mut parse = vec![0];
        parse.extend_from_slice(b"SELECT 1, 2, 3\0\0\0");
        let mut batch = frontend(b'P', &parse);
        batch.extend(frontend(b'B', &[0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1]));
        if describe {
            batch.extend(frontend(b'D', b"P\0"));
        }
        batch.extend(execute(0));
        batch.extend(frontend(b'S', &[]));
        sock.write_all(&batch).await?;
        let messages = read_until_ready(&mut sock).await?;
        let (kinds, _) = kinds_and_tags(&messages);
        assert_eq!(kinds, b"1EZ", "describe: {describe}");
        let error = String::from_utf8_lossy(&messages[1].1);
        assert!(
            error.contains("C08P01")
                && error.contains("bind message has 2 result formats but query has 3 columns"),
            "{error}"
        );
    }
    assert_eq!(send_query(&mut sock, "SELECT 1").await?, b'I');
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_carry_postgresql_detail_and_position() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let client = server.connect().await?;
    client
        .batch_execute("CREATE TABLE u (id int PRIMARY KEY, k int); INSERT INTO u VALUES (1, 1)")
        .await?;
    let e = client
        .batch_execute("INSERT INTO u VALUES (1, 2)")
        .await
        .expect_err("duplicate key");
    let db = e.as_db_error().expect("an ErrorResponse");
    assert_eq!(db.code().code(), "23505");
    assert_eq!(
        db.message(),
        "duplicate key value violates unique constraint \"u_pkey\""
    );
    assert_eq!(db.detail(), Some("Key (id)=(1) already exists."));

    let e = client
        .batch_execute("SELECT k FROM u WHERE )")
        .await
        .expect_err("syntax error");
    let db = e.as_db_error().expect("an ErrorResponse");
    assert_eq!(db.code().code(), "42601");
    assert_eq!(db.message(), "syntax error at or near \")\"");
    assert_eq!(
        db.position(),
        Some(&tokio_postgres::error::ErrorPosition::Original(23))
    );
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_running_statements_and_waits_for_nothing_else() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let busy = server.connect().await?;
    let long = tokio::spawn(async move { busy.simple_query(LONG_SCAN).await });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // Without cancelling it the statement would run for many minutes and so would the
    // shutdown, which waits for every session thread.
    tokio::time::timeout(std::time::Duration::from_secs(20), server.stop()).await??;
    assert!(long.await?.is_err(), "the running statement was stopped");
    Ok(())
}

/// A numeric in PostgreSQL's binary form (`numeric_send`), as a driver sends and reads it.
#[derive(Debug, PartialEq)]
struct RawNumeric(Vec<u8>);

impl tokio_postgres::types::ToSql for RawNumeric {
    fn to_sql(
        &self,
        _: &tokio_postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<tokio_postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(&self.0);
        Ok(tokio_postgres::types::IsNull::No)
    }

    fn accepts(ty: &tokio_postgres::types::Type) -> bool {
        *ty == tokio_postgres::types::Type::NUMERIC
    }

    tokio_postgres::types::to_sql_checked!();
}

impl<'a> tokio_postgres::types::FromSql<'a> for RawNumeric {
    fn from_sql(
        _: &tokio_postgres::types::Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(RawNumeric(raw.to_vec()))
    }

    fn accepts(ty: &tokio_postgres::types::Type) -> bool {
        *ty == tokio_postgres::types::Type::NUMERIC
    }
}

#[tokio::test]
async fn numeric_travels_in_binary_and_text_as_postgresql_sends_it() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let client = server.connect().await?;
    client
        .batch_execute("CREATE TABLE prices (id int PRIMARY KEY, p numeric(10,3))")
        .await?;
    // 12345.678 as numeric_send writes it: ndigits 3, weight 1, sign +, dscale 3,
    // base-10000 digits 1, 2345, 6780.
    let wire = vec![0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1a, 0x7c];
    client
        .execute(
            "INSERT INTO prices VALUES (1, $1)",
            &[&RawNumeric(wire.clone())],
        )
        .await?;
    let row = client
        .query_one("SELECT p FROM prices WHERE id = 1", &[])
        .await?;
    assert_eq!(row.get::<_, RawNumeric>(0), RawNumeric(wire));
    let text = simple(&client, "SELECT p, p * 2, p::text FROM prices").await?;
    let some = |v: &[&str]| v.iter().map(|s| Some((*s).to_string())).collect::<Vec<_>>();
    assert_eq!(text, [some(&["12345.678", "24691.356", "12345.678"])]);
    // The column's typmod rounds what a driver sends.
    let four_places = vec![0, 2, 0, 0, 0, 0, 0, 4, 0, 1, 0x16, 0x2e]; // 1.5678
    client
        .execute(
            "INSERT INTO prices VALUES (2, $1)",
            &[&RawNumeric(four_places)],
        )
        .await?;
    assert_eq!(
        simple(&client, "SELECT p FROM prices WHERE id = 2").await?,
        [some(&["1.568"])]
    );
    Ok(())
}

#[tokio::test]
async fn arrays_travel_in_binary_as_array_send_writes_them() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), 10).await?;
    let client = server.connect().await?;
    client
        .batch_execute("CREATE TABLE k (a int, b int, PRIMARY KEY (b, a))")
        .await?;
    // tokio-postgres asks for every result column in binary.
    let row = client
        .query_one("SELECT current_schemas(true)", &[])
        .await?;
    assert_eq!(row.get::<_, Vec<String>>(0), ["pg_catalog", "public"]);
    let row = client
        .query_one(
            "SELECT indkey FROM pg_index WHERE indrelid = 'k'::regclass",
            &[],
        )
        .await?;
    assert_eq!(row.get::<_, Vec<i16>>(0), [2, 1]);
    let row = client.query_one("SELECT '{}'::text[]", &[]).await?;
    assert!(row.get::<_, Vec<String>>(0).is_empty());
    Ok(())
}
