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
        let (client, connection) = self.config().dbname("postgres").connect(NoTls).await?;
        Ok((client, tokio::spawn(connection)))
    }

    /// A client configuration as `postgres` for this server.
    fn config(&self) -> tokio_postgres::Config {
        let mut config = tokio_postgres::Config::new();
        config
            .host(self.addr.ip().to_string())
            .port(self.addr.port())
            .user("postgres");
        config
    }

    /// A client as `postgres` whose startup packet carries `options` (as PGOPTIONS).
    pub async fn connect_with_options(
        &self,
        options: &str,
    ) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = self
            .config()
            .dbname("quire")
            .options(options)
            .connect(NoTls)
            .await?;
        tokio::spawn(connection);
        Ok(client)
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

/// A connection without a client library: the startup message sent, the messages up to
/// the first ReadyForQuery read.
pub async fn raw_connect(
    addr: SocketAddr,
) -> anyhow::Result<(tokio::net::TcpStream, Vec<(u8, Vec<u8>)>)> {
    use tokio::io::AsyncWriteExt;
    let mut sock = tokio::net::TcpStream::connect(addr).await?;
    let mut body = 196_608i32.to_be_bytes().to_vec(); // protocol 3.0
    for s in ["user", "postgres", "database", "postgres", ""] {
        body.extend_from_slice(s.as_bytes());
        body.push(0);
    }
    let mut msg = i32::try_from(4 + body.len())?.to_be_bytes().to_vec();
    msg.extend_from_slice(&body);
    sock.write_all(&msg).await?;
    let messages = read_until_ready(&mut sock).await?;
    Ok((sock, messages))
}

/// One extended-protocol message: its type byte and body, with the length header.
pub fn frontend(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(&i32::try_from(4 + body.len()).expect("small").to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// Parse, Bind and Execute of `sql` on the unnamed statement and portal, no parameters.
pub fn parse_bind_execute(sql: &str) -> Vec<u8> {
    let mut parse = vec![0];
    parse.extend_from_slice(sql.as_bytes());
    parse.extend_from_slice(&[0, 0, 0]);
    let mut out = frontend(b'P', &parse);
    out.extend(frontend(b'B', &[0, 0, 0, 0, 0, 0, 0, 0]));
    out.extend(frontend(b'E', &[0, 0, 0, 0, 0]));
    out
}

/// Reads backend messages until ReadyForQuery; returns them as (type byte, body).
pub async fn read_until_ready(
    sock: &mut tokio::net::TcpStream,
) -> anyhow::Result<Vec<(u8, Vec<u8>)>> {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    loop {
        let kind = sock.read_u8().await?;
        let len = usize::try_from(sock.read_i32().await?)? - 4;
        let mut body = vec![0; len];
        sock.read_exact(&mut body).await?;
        let done = kind == b'Z';
        out.push((kind, body));
        if done {
            return Ok(out);
        }
    }
}

/// Sends a simple query; returns the transaction status of the ReadyForQuery that ends it.
pub async fn send_query(sock: &mut tokio::net::TcpStream, sql: &str) -> anyhow::Result<u8> {
    let messages = query_messages(sock, sql).await?;
    let (_, status) = messages.last().expect("ReadyForQuery");
    Ok(status[0])
}

/// Sends a simple query; returns every message up to ReadyForQuery.
pub async fn query_messages(
    sock: &mut tokio::net::TcpStream,
    sql: &str,
) -> anyhow::Result<Vec<(u8, Vec<u8>)>> {
    use tokio::io::AsyncWriteExt;
    let mut msg = vec![b'Q'];
    msg.extend_from_slice(&i32::try_from(4 + sql.len() + 1)?.to_be_bytes());
    msg.extend_from_slice(sql.as_bytes());
    msg.push(0);
    sock.write_all(&msg).await?;
    read_until_ready(sock).await
}
