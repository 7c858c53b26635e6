//! Session state a client sets up through the protocol: settings from the `options` startup
//! parameter (applied, and what RESET returns to), transaction modes they choose, and the
//! protocol's named statements as SQL sees them (`pg_prepared_statements`, DEALLOCATE ALL
//! dropping them, as psycopg's `DEALLOCATE ALL` after a ROLLBACK or DDL needs).

mod common;

use common::{code, config, message, simple, Running};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_choose_transaction_modes_and_are_what_reset_returns_to() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Running::start(config(dir.path())).await?;
    let client = server.connect_with_options("-c default_transaction_read_only=on -c work_mem=8MB --default-transaction-isolation=repeatable\\ read").await?;
    let show = |sql: &'static str| simple(&client, sql);
    assert_eq!(show("SHOW work_mem").await?, [[Some("8MB".into())]]);
    assert_eq!(
        show("SHOW transaction_isolation").await?,
        [[Some("repeatable read".into())]]
    );
    let e = client
        .simple_query("CREATE TABLE t (a int)")
        .await
        .expect_err("read only");
    assert_eq!(code(&e), "25006");
    assert_eq!(
        message(&e),
        "cannot execute CREATE TABLE in a read-only transaction"
    );
    client
        .batch_execute("SET work_mem = '1MB'; RESET work_mem")
        .await?;
    assert_eq!(show("SHOW work_mem").await?, [[Some("8MB".into())]]);
    client
        .batch_execute("SET work_mem = '2MB'; RESET ALL")
        .await?;
    assert_eq!(
        show("SELECT source FROM pg_settings WHERE name = 'work_mem'").await?,
        [[Some("client".into())]]
    );
    // The session may still write once it chooses READ WRITE.
    client
        .batch_execute("BEGIN READ WRITE; CREATE TABLE t (a int); COMMIT")
        .await?;
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_statements_show_in_pg_prepared_statements_and_deallocate_all_drops_them(
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Running::start(config(dir.path())).await?;
    let client = server.connect().await?;
    let stmt = client.prepare("SELECT $1::int + 1").await?;
    let row = client.query_one(&stmt, &[&41i32]).await?;
    assert_eq!(row.get::<_, i32>(0), 42);
    let listed = simple(
        &client,
        "SELECT statement, from_sql, name FROM pg_prepared_statements",
    )
    .await?;
    let [row] = listed.as_slice() else {
        panic!("one statement listed: {listed:?}");
    };
    let [text, from_sql, Some(name)] = row.as_slice() else {
        panic!("a row of three: {row:?}");
    };
    assert_eq!(text.as_deref(), Some("SELECT $1::int + 1"));
    assert_eq!(from_sql.as_deref(), Some("f"));
    // SQL's PREPARE shares the namespace.
    let e = client
        .simple_query(&format!("PREPARE {name} AS SELECT 1"))
        .await
        .expect_err("name in use");
    assert_eq!(code(&e), "42P05");
    client.batch_execute("DEALLOCATE ALL").await?;
    assert_eq!(
        simple(&client, "SELECT count(*) FROM pg_prepared_statements").await?,
        [[Some("0".into())]]
    );
    let e = client
        .query_one(&stmt, &[&1i32])
        .await
        .expect_err("deallocated");
    assert_eq!(code(&e), "26000");
    // DEALLOCATE of one protocol statement by name, and DISCARD ALL.
    let again = client.prepare("SELECT 2").await?;
    let listed = simple(&client, "SELECT name FROM pg_prepared_statements").await?;
    let [row] = listed.as_slice() else {
        panic!("one statement listed: {listed:?}");
    };
    let [Some(name)] = row.as_slice() else {
        panic!("a name: {row:?}");
    };
    client.batch_execute(&format!("DEALLOCATE {name}")).await?;
    let e = client.query(&again, &[]).await.expect_err("deallocated");
    assert_eq!(code(&e), "26000");
    let third = client.prepare("SELECT 3").await?;
    client.batch_execute("DISCARD ALL").await?;
    let e = client.query(&third, &[]).await.expect_err("discarded");
    assert_eq!(code(&e), "26000");
    server.stop().await
}
