//! What the server's test files share: an in-process server on a temporary directory and a
//! free loopback port, started and stopped, and reading a refused statement's SQLSTATE and
//! message.

// Each test file uses a part of these.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;

use quire_server::{Server, ServerConfig};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

/// The configuration the tests start from: a free port, a 4 MiB pool, no autovacuum.
pub fn config(dir: &Path) -> ServerConfig {
    let mut config = ServerConfig::new(dir);
    config.port = 0;
    config.engine.shared_buffers_bytes = 4 * 1024 * 1024;
    config.engine.autovacuum = false;
    config
}

/// A server serving in a task of the test's runtime.
pub struct Running {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), quire_server::ServerError>>>,
}

impl Running {
    pub async fn start(config: ServerConfig) -> anyhow::Result<Running> {
        let server = Server::start(config).await?;
        let addr = server.local_addr();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        Ok(Running {
            addr,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// A client as `postgres` (trust on loopback, the first start's rule).
    pub async fn connect(&self) -> Result<Client, tokio_postgres::Error> {
        Ok(self.connect_watched().await?.0)
    }

    /// A client and its connection's task, whose result says how the server ended it.
    pub async fn connect_watched(
        &self,
    ) -> Result<(Client, JoinHandle<Result<(), tokio_postgres::Error>>), tokio_postgres::Error>
    {
        let (client, connection) = tokio_postgres::Config::new()
            .host(self.addr.ip().to_string())
            .port(self.addr.port())
            .user("postgres")
            .dbname("postgres")
            .connect(NoTls)
            .await?;
        Ok((client, tokio::spawn(connection)))
    }

    /// Shuts the server down and waits until the database is closed.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let _ = self.stop.take().map(|s| s.send(()));
        self.task.take().expect("stopped once").await??;
        Ok(())
    }
}

/// The SQLSTATE of an error (or why it has none).
pub fn code(e: &tokio_postgres::Error) -> String {
    e.code()
        .map_or_else(|| format!("no SQLSTATE: {e}"), |c| c.code().to_string())
}

/// The server's message of an error, else the client's.
pub fn message(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map_or_else(|| e.to_string(), |d| d.message().to_string())
}

/// The values of a simple query's rows, as text.
pub async fn simple(
    client: &Client,
    sql: &str,
) -> Result<Vec<Vec<Option<String>>>, tokio_postgres::Error> {
    let mut rows = Vec::new();
    for m in client.simple_query(sql).await? {
        if let SimpleQueryMessage::Row(r) = m {
            rows.push((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect());
        }
    }
    Ok(rows)
}
