//! Authentication and roles against a real client (`tokio-postgres`): each test starts a
//! server in-process on a temporary directory with the `pg_hba.conf` it needs, connects as
//! PostgreSQL's clients do, and checks what PostgreSQL would answer: SCRAM-SHA-256 logins,
//! 28P01 alike for a wrong password and an unknown role, trust on loopback by default, the
//! "no pg_hba.conf entry" refusal, role DDL that rolls back with its block, the refusal to
//! listen beyond loopback under `trust`, and TLS with the committed test certificate
//! (`tests/fixtures`: `ca.crt` signed `server.crt` for localhost, 127.0.0.1 and ::1).

mod common;

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use common::{code, config, message, simple, Running};
use quire_server::{Server, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};
use tokio_postgres::{Client, NoTls, Socket};
use tokio_rustls::{self, rustls};

/// A configuration whose rules are `hba` (written to the data directory).
fn config_with_hba(dir: &Path, hba: &str) -> anyhow::Result<ServerConfig> {
    let mut c = config(dir);
    let path = dir.join("custom_hba.conf");
    std::fs::write(&path, hba)?;
    c.hba_file = Some(path);
    Ok(c)
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

impl Running {
    fn client_config(&self, user: &str, password: Option<&str>) -> tokio_postgres::Config {
        let mut c = tokio_postgres::Config::new();
        c.host(self.addr.ip().to_string())
            .port(self.addr.port())
            .user(user)
            .dbname("quire");
        if let Some(p) = password {
            c.password(p);
        }
        c
    }

    async fn login(
        &self,
        user: &str,
        password: Option<&str>,
    ) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = self.client_config(user, password).connect(NoTls).await?;
        tokio::spawn(connection);
        Ok(client)
    }

    async fn login_tls(
        &self,
        user: &str,
        password: Option<&str>,
    ) -> Result<Client, tokio_postgres::Error> {
        let mut c = self.client_config(user, password);
        c.ssl_mode(SslMode::Require);
        let (client, connection) = c.connect(RustlsConnect::trusting_test_ca()).await?;
        tokio::spawn(connection);
        Ok(client)
    }
}

/// The SQLSTATE and message of a refused connection.
fn refusal(r: Result<Client, tokio_postgres::Error>) -> (String, String) {
    match r {
        Ok(_) => panic!("the connection was accepted"),
        Err(e) => (code(&e), message(&e)),
    }
}

async fn one(client: &Client, sql: &str) -> anyhow::Result<Option<String>> {
    let rows = simple(client, sql).await?;
    anyhow::ensure!(rows.len() == 1 && rows[0].len() == 1, "{sql}: {rows:?}");
    Ok(rows[0][0].clone())
}

/// The rules of most tests: `postgres` trusted on loopback, everybody else by password.
const TRUST_POSTGRES_SCRAM_OTHERS: &str = "\
host all postgres 127.0.0.1/32 trust
host all erin 127.0.0.1/32 password
host all all 127.0.0.1/32 scram-sha-256
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_logins_succeed_and_failures_do_not_tell_whether_the_role_exists(
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Running::start(config_with_hba(dir.path(), TRUST_POSTGRES_SCRAM_OTHERS)?).await?;
    let admin = server.login("postgres", None).await?;
    client_ok(&admin, "CREATE USER alice WITH PASSWORD 'sesame'").await?;
    client_ok(&admin, "CREATE ROLE carol PASSWORD 'sesame'").await?;
    client_ok(&admin, "CREATE USER nopass").await?;
    client_ok(&admin, "CREATE USER erin PASSWORD 'clear'").await?;

    let alice = server.login("alice", Some("sesame")).await?;
    assert_eq!(
        one(&alice, "SELECT current_user").await?.as_deref(),
        Some("alice")
    );
    drop(alice);

    // A wrong password, an unknown role and a role without a password: one answer.
    for (user, password) in [("alice", "open"), ("mallory", "sesame"), ("nopass", "")] {
        let (c, m) = refusal(server.login(user, Some(password)).await);
        assert_eq!(c, "28P01", "{user}: {m}");
        assert_eq!(
            m,
            format!("password authentication failed for user \"{user}\"")
        );
    }
    // Without LOGIN, only once the password is right.
    let (c, m) = refusal(server.login("carol", Some("sesame")).await);
    assert_eq!(
        (c.as_str(), m.as_str()),
        ("28000", "role \"carol\" is not permitted to log in")
    );
    let (c, _) = refusal(server.login("carol", Some("wrong")).await);
    assert_eq!(c, "28P01");

    // The `password` method: the password in clear, checked against the verifier.
    let erin = server.login("erin", Some("clear")).await?;
    assert_eq!(one(&erin, "SELECT 1").await?.as_deref(), Some("1"));
    let (c, _) = refusal(server.login("erin", Some("muddy")).await);
    assert_eq!(c, "28P01");

    // A verifier given as the password (psql's \password sends one) is stored as is.
    let v = quire_sql::ScramVerifier::from_password("given", b"0123456789abcdef", 4096).to_string();
    client_ok(&admin, &format!("CREATE USER dave PASSWORD '{v}'")).await?;
    assert_eq!(
        one(
            &admin,
            "SELECT rolpassword FROM pg_authid WHERE rolname = 'dave'"
        )
        .await?,
        Some(v)
    );
    assert_eq!(
        one(
            &admin,
            "SELECT rolpassword FROM pg_roles WHERE rolname = 'dave'"
        )
        .await?
        .as_deref(),
        Some("********")
    );
    server.login("dave", Some("given")).await?;
    // Never the password itself.
    let stored = one(
        &admin,
        "SELECT rolpassword FROM pg_authid WHERE rolname = 'alice'",
    )
    .await?;
    let stored = stored.unwrap_or_default();
    assert!(
        stored.starts_with("SCRAM-SHA-256$4096:") && !stored.contains("sesame"),
        "{stored}"
    );
    assert_eq!(
        simple(&admin, "SELECT usename FROM pg_user ORDER BY usename").await?,
        ["alice", "dave", "erin", "nopass", "postgres"].map(|u| vec![Some(u.to_string())])
    );
    server.stop().await
}

async fn client_ok(client: &Client, sql: &str) -> anyhow::Result<()> {
    client.simple_query(sql).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_start_trusts_loopback_only_and_refuses_what_no_rule_names() -> anyhow::Result<()>
{
    let dir = tempfile::tempdir()?;
    let server = Running::start(config(dir.path())).await?;
    let client = server.login("postgres", None).await?;
    assert_eq!(
        one(&client, "SELECT current_user").await?.as_deref(),
        Some("postgres")
    );
    let written = std::fs::read_to_string(dir.path().join("pg_hba.conf"))?;
    assert_eq!(written, quire_server::hba::DEFAULT_HBA);
    // Trust, but no such role.
    let (c, m) = refusal(server.login("mallory", None).await);
    assert_eq!(
        (c.as_str(), m.as_str()),
        ("28000", "role \"mallory\" does not exist")
    );
    server.stop().await?;

    let dir = tempfile::tempdir()?;
    let hba = "host all postgres 127.0.0.1/32 trust\nhost all bob 127.0.0.1/32 reject\n";
    let server = Running::start(config_with_hba(dir.path(), hba)?).await?;
    let (c, m) = refusal(server.login("alice", Some("x")).await);
    assert_eq!(c, "28000");
    assert_eq!(
        m,
        "no pg_hba.conf entry for host \"127.0.0.1\", user \"alice\", database \"quire\", no encryption"
    );
    let (c, m) = refusal(server.login("bob", None).await);
    assert_eq!(c, "28000");
    assert!(
        m.starts_with("pg_hba.conf rejects connection for host \"127.0.0.1\", user \"bob\""),
        "{m}"
    );
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_statements_roll_back_with_their_transaction() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Running::start(config_with_hba(dir.path(), TRUST_POSTGRES_SCRAM_OTHERS)?).await?;
    let admin = server.login("postgres", None).await?;
    // The predefined roles (pg_database_owner) left out.
    let roles =
        "SELECT rolname, rolcanlogin, rolsuper FROM pg_roles WHERE left(rolname, 3) <> 'pg_' ORDER BY oid";
    let row = |n: &str, login: &str, sup: &str| {
        vec![
            Some(n.to_string()),
            Some(login.to_string()),
            Some(sup.to_string()),
        ]
    };

    client_ok(&admin, "BEGIN; CREATE ROLE ghost LOGIN; ROLLBACK").await?;
    assert_eq!(simple(&admin, roles).await?, [row("postgres", "t", "t")]);
    client_ok(&admin, "BEGIN; CREATE USER alice PASSWORD 'one'; COMMIT").await?;
    client_ok(&admin, "CREATE ROLE boss WITH SUPERUSER NOLOGIN").await?;
    assert_eq!(
        simple(&admin, roles).await?,
        [
            row("postgres", "t", "t"),
            row("alice", "t", "f"),
            row("boss", "f", "t")
        ]
    );
    let oids = simple(
        &admin,
        "SELECT oid FROM pg_roles WHERE left(rolname, 3) <> 'pg_' ORDER BY oid",
    )
    .await?;
    assert_eq!(
        oids[..2],
        [vec![Some("10".into())], vec![Some("16384".into())]]
    );

    // A new password rolled back leaves the old one.
    client_ok(
        &admin,
        "BEGIN; ALTER USER alice WITH PASSWORD 'two'; ROLLBACK",
    )
    .await?;
    server.login("alice", Some("one")).await?;
    assert_eq!(refusal(server.login("alice", Some("two")).await).0, "28P01");
    client_ok(&admin, "ALTER ROLE alice PASSWORD 'two'").await?;
    server.login("alice", Some("two")).await?;
    client_ok(&admin, "ALTER ROLE alice NOLOGIN").await?;
    assert_eq!(refusal(server.login("alice", Some("two")).await).0, "28000");
    client_ok(&admin, "ALTER ROLE alice LOGIN PASSWORD NULL").await?;
    assert_eq!(refusal(server.login("alice", Some("two")).await).0, "28P01");

    // A DROP rolled back keeps the role.
    client_ok(&admin, "BEGIN; DROP ROLE boss; ROLLBACK").await?;
    assert_eq!(simple(&admin, roles).await?.len(), 3);
    client_ok(&admin, "DROP USER boss").await?;
    assert_eq!(simple(&admin, roles).await?.len(), 2);

    // PostgreSQL's errors, and a failed block that refuses until ROLLBACK.
    let err = |sql: &'static str| {
        let admin = &admin;
        async move { code(&admin.simple_query(sql).await.expect_err(sql)) }
    };
    assert_eq!(err("CREATE ROLE alice").await, "42710");
    assert_eq!(err("DROP ROLE nobody").await, "42704");
    assert_eq!(err("ALTER ROLE nobody LOGIN").await, "42704");
    // PostgreSQL 15 answers this one: the session's own role goes first.
    assert_eq!(err("DROP ROLE postgres").await, "55006");
    assert_eq!(err("ALTER ROLE alice SET work_mem = '1MB'").await, "0A000");
    client_ok(&admin, "DROP ROLE IF EXISTS nobody").await?;
    client_ok(&admin, "BEGIN").await?;
    assert_eq!(err("CREATE ROLE alice").await, "42710");
    assert_eq!(err("SELECT 1").await, "25P02");
    client_ok(&admin, "ROLLBACK").await?;
    // The extended protocol too.
    admin.execute("CREATE ROLE viaparse", &[]).await?;
    assert_eq!(
        one(
            &admin,
            "SELECT count(*) FROM pg_roles WHERE rolname = 'viaparse'"
        )
        .await?
        .as_deref(),
        Some("1")
    );
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_refuses_to_listen_beyond_loopback_under_trust() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let hba = "host all all 127.0.0.1/32 trust\nhost all all 0.0.0.0/0 trust\n";
    let mut c = config_with_hba(dir.path(), hba)?;
    c.listen_addresses = "0.0.0.0".into();
    let e = Server::start(c.clone()).await.err().expect("refused");
    let s = e.to_string();
    assert!(s.contains("refusing to listen on 0.0.0.0"), "{s}");
    assert!(s.contains("custom_hba.conf line 2"), "{s}");
    // On loopback the same rules are harmless: no client from elsewhere can reach it.
    c.listen_addresses = "127.0.0.1".into();
    Running::start(c).await?.stop().await?;

    // Password authentication beyond loopback (and the default rules, trust on loopback
    // only) let it listen everywhere.
    for hba in [
        "host all postgres 127.0.0.1/32 trust\nhost all all 0.0.0.0/0 scram-sha-256\n",
        quire_server::hba::DEFAULT_HBA,
    ] {
        let dir = tempfile::tempdir()?;
        let mut c = config_with_hba(dir.path(), hba)?;
        c.listen_addresses = "0.0.0.0".into();
        let server = Running::start(c).await?;
        let client = tokio_postgres::Config::new()
            .host("127.0.0.1")
            .port(server.addr.port())
            .user("postgres")
            .connect(NoTls)
            .await?;
        tokio::spawn(client.1);
        assert_eq!(one(&client.0, "SELECT 2").await?.as_deref(), Some("2"));
        server.stop().await?;
    }

    // A line that does not parse refuses the start, naming the file and line.
    let dir = tempfile::tempdir()?;
    let c = config_with_hba(dir.path(), "# rules\nhost all all 127.0.0.1/32 md5\n")?;
    let e = Server::start(c).await.err().expect("refused");
    assert!(
        e.to_string()
            .contains("custom_hba.conf: line 2: invalid authentication method"),
        "{e}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_the_configured_certificate_and_hostssl_rules() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let hba =
        "hostnossl all postgres 127.0.0.1/32 trust\nhostssl all alice 127.0.0.1/32 scram-sha-256\n";
    let mut c = config_with_hba(dir.path(), hba)?;
    // hostssl without ssl: refused at start.
    let e = Server::start(c.clone()).await.err().expect("refused");
    assert!(e.to_string().contains("hostssl"), "{e}");
    c.ssl = true;
    c.ssl_cert_file = fixture("server.crt");
    // The key as a checkout has it (0644): others may read it, which refuses the start,
    // as PostgreSQL does; copied with 0600 it is accepted.
    c.ssl_key_file = fixture("server.key");
    let e = Server::start(c.clone()).await.err().expect("refused");
    assert!(e.to_string().contains("group or world access"), "{e}");
    let key = dir.path().join("server.key");
    std::fs::copy(fixture("server.key"), &key)?;
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    c.ssl_key_file = key;
    let server = Running::start(c).await?;
    let admin = server.login("postgres", None).await?;
    client_ok(&admin, "CREATE USER alice PASSWORD 'sesame'").await?;
    // Over TLS the hostssl rule matches; in the clear no rule does.
    let alice = server.login_tls("alice", Some("sesame")).await?;
    assert_eq!(
        one(&alice, "SELECT current_user").await?.as_deref(),
        Some("alice")
    );
    let (c, m) = refusal(server.login("alice", Some("sesame")).await);
    assert_eq!(c, "28000");
    assert!(m.ends_with("no encryption"), "{m}");
    // And postgres over TLS matches neither line.
    let (c, m) = refusal(server.login_tls("postgres", None).await);
    assert_eq!(c, "28000");
    assert!(m.ends_with("SSL encryption"), "{m}");
    drop(alice);
    server.stop().await?;

    // A missing certificate refuses the start.
    let dir = tempfile::tempdir()?;
    let mut c = config(dir.path());
    c.ssl = true;
    let e = Server::start(c).await.err().expect("refused");
    assert!(e.to_string().contains("server.crt"), "{e}");
    Ok(())
}

/// tokio-postgres over rustls (the tokio-rustls the server uses), trusting only the
/// test CA.
#[derive(Clone)]
struct RustlsConnect(Arc<rustls::ClientConfig>);

impl RustlsConnect {
    fn trusting_test_ca() -> RustlsConnect {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::CertificateDer;
        let mut roots = rustls::RootCertStore::empty();
        let ca = CertificateDer::from_pem_file(fixture("ca.crt")).expect("the test CA parses");
        roots.add(ca).expect("the test CA is a trust anchor");
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        RustlsConnect(Arc::new(config))
    }
}

struct RustlsConnectOne {
    config: Arc<rustls::ClientConfig>,
    name: rustls::pki_types::ServerName<'static>,
}

struct RustlsStream(tokio_rustls::client::TlsStream<Socket>);

impl MakeTlsConnect<Socket> for RustlsConnect {
    type Stream = RustlsStream;
    type TlsConnect = RustlsConnectOne;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> io::Result<RustlsConnectOne> {
        let name = rustls::pki_types::ServerName::try_from(domain.to_string())
            .map_err(io::Error::other)?;
        Ok(RustlsConnectOne {
            config: Arc::clone(&self.0),
            name,
        })
    }
}

impl TlsConnect<Socket> for RustlsConnectOne {
    type Stream = RustlsStream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream>> + Send>>;

    fn connect(self, stream: Socket) -> Self::Future {
        Box::pin(async move {
            let s = tokio_rustls::TlsConnector::from(self.config)
                .connect(self.name, stream)
                .await?;
            Ok(RustlsStream(s))
        })
    }
}

impl AsyncRead for RustlsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for RustlsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

impl tokio_postgres::tls::TlsStream for RustlsStream {
    fn channel_binding(&self) -> ChannelBinding {
        // quire offers SCRAM-SHA-256 without -PLUS.
        ChannelBinding::none()
    }
}
