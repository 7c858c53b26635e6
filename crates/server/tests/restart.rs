//! PostgreSQL's `restart_after_crash`: when the engine enters its failed state (here: an
//! fsync fails during CHECKPOINT, on the simulated file system), every session ends with
//! 57P02, the server opens the data directory again (recovering from the WAL) and serves
//! new connections, with every acknowledged transaction there.

use std::sync::Arc;
use std::time::Duration;

use quire_engine::vfs::{SimVfs, Vfs};
use quire_server::{Server, ServerConfig};
use tokio_postgres::{Client, NoTls};

async fn connect(
    addr: std::net::SocketAddr,
) -> Result<
    (
        Client,
        tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>,
    ),
    tokio_postgres::Error,
> {
    let (client, connection) = tokio_postgres::Config::new()
        .host(addr.ip().to_string())
        .port(addr.port())
        .user("postgres")
        .connect(NoTls)
        .await?;
    Ok((client, tokio::spawn(connection)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_engine_restarts_and_recovers_every_acknowledged_commit() -> anyhow::Result<()> {
    let sim = Arc::new(SimVfs::new(7));
    let vfs: Arc<dyn Vfs> = sim.clone();
    let mut config = ServerConfig::new("/data");
    config.port = 0;
    config.engine.shared_buffers_bytes = 4 * 1024 * 1024;
    config.engine.autovacuum = false;
    let server = Server::start_on(config, vfs).await?;
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));

    let (client, connection) = connect(addr).await?;
    client
        .batch_execute("CREATE TABLE r (id int PRIMARY KEY, v text)")
        .await?;
    for i in 0..50 {
        client
            .execute("INSERT INTO r VALUES ($1, 'x')", &[&i])
            .await?;
    }
    sim.fail_next_fsync(Some("base/"));
    let e = client
        .batch_execute("CHECKPOINT")
        .await
        .expect_err("the checkpoint's fsync fails");
    let db = e.as_db_error().expect("an ErrorResponse");
    assert!(db.message().contains("Input/output error"), "{db:?}");

    // The session ends with PostgreSQL's crash message.
    let ended = tokio::time::timeout(Duration::from_secs(10), connection).await??;
    let e = ended.expect_err("the server ends every session after the engine failed");
    assert_eq!(
        e.code().map(tokio_postgres::error::SqlState::code),
        Some("57P02"),
        "{e}"
    );

    // The server comes back by itself.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let client = loop {
        match connect(addr).await {
            Ok((c, _)) => match c.simple_query("SELECT 1").await {
                Ok(_) => break c,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(error = %e, "not yet");
                }
                Err(e) => return Err(e.into()),
            },
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::debug!(error = %e, "not yet");
            }
            Err(e) => return Err(e.into()),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let n: i64 = client
        .query_one("SELECT count(*) FROM r", &[])
        .await?
        .get(0);
    assert_eq!(n, 50, "every acknowledged insert survives the restart");
    client
        .execute("INSERT INTO r VALUES (50, 'after')", &[])
        .await?;
    let n: i64 = client
        .query_one("SELECT count(*) FROM r", &[])
        .await?
        .get(0);
    assert_eq!(n, 51);
    drop(client);

    let _ = stop.send(());
    task.await??;
    Ok(())
}
