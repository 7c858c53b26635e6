//! What a client may take, and how it is stopped: strict framing (a message smuggled inside
//! another's length, plaintext behind an SSLRequest), the bounds on connections still
//! starting and on sessions (superuser_reserved_connections), authentication_timeout, the
//! `options` startup parameter, lock_timeout, pg_cancel_backend and pg_terminate_backend,
//! random cancel keys, and a portal run in parts whose rows spill past work_mem.

mod common;

use std::time::{Duration, Instant};

use common::{
    code, config, frontend, message, query_messages, raw_connect, read_until_ready, simple, Running,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_postgres::NoTls;

/// The fields of an ErrorResponse body by their codes.
fn error_field(body: &[u8], code: u8) -> Option<String> {
    body.split(|&b| b == 0)
        .find(|f| f.first() == Some(&code))
        .map(|f| String::from_utf8_lossy(&f[1..]).into_owned())
}

/// Reads until the server closes the connection (or 10 s pass); returns what it sent.
async fn read_to_close(sock: &mut tokio::net::TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), sock.read_to_end(&mut all)).await;
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_inside_another_ones_length_is_refused_and_not_run() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Running::start(config(dir.path())).await?;
    let (mut sock, _) = raw_connect(server.addr).await?;
    let mut body = b"SELECT 1\0".to_vec();
    body.extend(frontend(b'Q', b"SELECT 2\0"));
    sock.write_all(&frontend(b'Q', &body)).await?;
    let messages = read_until_ready(&mut sock).await?;
    let kinds: Vec<u8> = messages.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, b"EZ", "an error, and neither statement ran");
    assert_eq!(error_field(&messages[0].1, b'C').as_deref(), Some("08P01"));
    assert_eq!(
        error_field(&messages[0].1, b'M').as_deref(),
        Some("invalid message format")
    );
    // The frame was whole: the connection goes on.
    let messages = query_messages(&mut sock, "SELECT 3").await?;
    assert_eq!(messages[1], (b'D', vec![0, 1, 0, 0, 0, 1, b'3']));
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_behind_an_ssl_request_is_refused() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Running::start(config(dir.path())).await?;
    let mut sock = tokio::net::TcpStream::connect(server.addr).await?;
    let mut bytes = 8i32.to_be_bytes().to_vec();
    bytes.extend(80_877_103i32.to_be_bytes());
    // The startup packet right behind, before the server's answer could have been read.
    let mut startup = 196_608i32.to_be_bytes().to_vec();
    startup.extend(b"user\0postgres\0\0");
    bytes.extend(i32::try_from(startup.len() + 4)?.to_be_bytes());
    bytes.extend(startup);
    sock.write_all(&bytes).await?;
    let answer = read_to_close(&mut sock).await;
    let text = String::from_utf8_lossy(&answer);
    assert!(
        text.contains("received unencrypted data after SSL request") && text.contains("08P01"),
        "{text:?}"
    );
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oldest_connections_still_starting_make_room_and_time_out() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut c = config(dir.path());
    c.max_startup_connections = 4;
    c.authentication_timeout = Duration::from_secs(2);
    let server = Running::start(c).await?;
    let mut idle = Vec::new();
    for _ in 0..8 {
        idle.push(tokio::net::TcpStream::connect(server.addr).await?);
        // Accepted in order, so that "oldest" is well defined.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The first four were dropped to make room for the next four.
    for sock in &mut idle[..4] {
        let mut buf = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf)).await??;
        assert_eq!(n, 0, "an old idle connection was closed");
    }
    // A real client still gets in (it drops the oldest of the idle ones).
    let client = server.connect().await?;
    assert_eq!(simple(&client, "SELECT 1").await?, [[Some("1".into())]]);
    // The rest are closed once authentication_timeout passes.
    let start = Instant::now();
    for sock in &mut idle[5..] {
        let mut buf = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(10), sock.read(&mut buf)).await??;
        assert_eq!(n, 0);
    }
    assert!(start.elapsed() < Duration::from_secs(5));
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_slots_are_kept_for_superusers() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut c = config(dir.path());
    c.engine.max_connections = 3;
    c.superuser_reserved_connections = 1;
    let server = Running::start(c).await?;
    let admin = server.connect().await?;
    admin.batch_execute("CREATE ROLE plain LOGIN").await?;
    let login = || {
        let mut cfg = tokio_postgres::Config::new();
        cfg.host("127.0.0.1")
            .port(server.addr.port())
            .user("plain")
            .dbname("quire");
        async move { cfg.connect(NoTls).await }
    };
    let (plain, conn) = login().await?;
    tokio::spawn(conn);
    // admin and plain hold two of three slots; the third is a superuser's.
    let e = login().await.err().expect("refused");
    assert_eq!(code(&e), "53300");
    assert_eq!(
        message(&e),
        "remaining connection slots are reserved for roles with the SUPERUSER attribute"
    );
    let admin2 = server.connect().await?;
    let e = server.connect().await.expect_err("refused");
    assert_eq!(message(&e), "sorry, too many clients already");
    drop((plain, admin2));
    drop(admin);
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_set_statement_timeout_and_lock_timeout_stops_a_wait() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Running::start(config(dir.path())).await?;
    let client = server
        .connect_with_options("-c statement_timeout=300 --lock-timeout=200")
        .await?;
    assert_eq!(
        simple(&client, "SHOW statement_timeout").await?,
        [[Some("300".into())]]
    );
    let start = Instant::now();
    let e = client
        .simple_query("SELECT count(*) FROM generate_series(1, 90000000)")
        .await
        .expect_err("stopped");
    assert_eq!(code(&e), "57014");
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );

    // lock_timeout: a row another session holds.
    let other = server.connect().await?;
    other
        .batch_execute("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)")
        .await?;
    other
        .batch_execute("BEGIN; UPDATE t SET id = 1 WHERE id = 1")
        .await?;
    let start = Instant::now();
    let e = client
        .simple_query("UPDATE t SET id = 1 WHERE id = 1")
        .await
        .expect_err("gave up");
    assert_eq!(code(&e), "55P03");
    assert_eq!(message(&e), "canceling statement due to lock timeout");
    assert!(start.elapsed() >= Duration::from_millis(200));
    other.batch_execute("ROLLBACK").await?;

    // A bad options string ends the connection as PostgreSQL does.
    let e = tokio_postgres::Config::new()
        .host("127.0.0.1")
        .port(server.addr.port())
        .user("postgres")
        .options("-d 5")
        .connect(NoTls)
        .await
        .err()
        .expect("refused");
    assert_eq!(code(&e), "42601");
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_cancelled_and_terminated_by_their_process_ids() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Running::start(config(dir.path())).await?;
    let admin = server.connect().await?;
    let (victim, ended) = server.connect_watched().await?;
    let pid: i32 = victim
        .query_one("SELECT pg_backend_pid()", &[])
        .await?
        .get(0);
    let admin_pid: i32 = admin
        .query_one("SELECT pg_backend_pid()", &[])
        .await?
        .get(0);
    assert_ne!(pid, admin_pid);

    let busy = tokio::spawn(async move {
        let r = victim
            .simple_query("SELECT count(*) FROM generate_series(1, 90000000)")
            .await;
        (victim, r)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cancelled: bool = admin
        .query_one("SELECT pg_cancel_backend($1)", &[&pid])
        .await?
        .get(0);
    assert!(cancelled);
    let (victim, r) = busy.await?;
    assert_eq!(code(&r.expect_err("cancelled")), "57014");

    // A plain role may not signal a superuser's session.
    admin.batch_execute("CREATE ROLE plain LOGIN").await?;
    let (plain, conn) = tokio_postgres::Config::new()
        .host("127.0.0.1")
        .port(server.addr.port())
        .user("plain")
        .dbname("quire")
        .connect(NoTls)
        .await?;
    tokio::spawn(conn);
    let e = plain
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .expect_err("refused");
    assert_eq!(code(&e), "42501");
    assert_eq!(message(&e), "permission denied to terminate process");

    // Terminated while idle: FATAL 57P01, the connection ends.
    let ok: bool = admin
        .query_one("SELECT pg_terminate_backend($1, 5000)", &[&pid])
        .await?
        .get(0);
    assert!(ok, "the session ended within the timeout");
    let r = tokio::time::timeout(Duration::from_secs(10), ended).await??;
    assert_eq!(code(&r.expect_err("terminated")), "57P01");
    assert!(victim.is_closed());
    // An unknown process id: false.
    let ok: bool = admin
        .query_one("SELECT pg_cancel_backend(12345)", &[])
        .await?
        .get(0);
    assert!(!ok || pid == 12345);
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_keys_are_random() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Running::start(config(dir.path())).await?;
    let mut keys = Vec::new();
    for _ in 0..4 {
        let (_sock, messages) = raw_connect(server.addr).await?;
        let (_, body) = messages
            .iter()
            .find(|(k, _)| *k == b'K')
            .expect("BackendKeyData");
        keys.push(body.clone());
    }
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 4, "no two sessions share a process id and key");
    let pids: Vec<i32> = keys
        .iter()
        .map(|k| i32::from_be_bytes([k[0], k[1], k[2], k[3]]))
        .collect();
    assert!(pids.iter().all(|&p| p > 0));
    let consecutive = pids.windows(2).all(|w| (w[1] - w[0]).abs() == 1);
    assert!(!consecutive, "process ids are not a counter: {pids:?}");
    server.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_portal_run_in_parts_spills_past_work_mem_and_loses_nothing() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = Running::start(config(dir.path())).await?;
    let (mut sock, _) = raw_connect(server.addr).await?;
    let messages = query_messages(&mut sock, "SET work_mem = '64kB'").await?;
    assert_eq!(messages[0].0, b'C');
    let mut parse = vec![0];
    parse.extend_from_slice(b"SELECT g, repeat('x', 100) FROM generate_series(1, 20000) g\0\0\0");
    let mut batch = frontend(b'P', &parse);
    batch.extend(frontend(b'B', &[0, 0, 0, 0, 0, 0, 0, 0]));
    let execute = |n: i32| {
        let mut body = vec![0];
        body.extend_from_slice(&n.to_be_bytes());
        frontend(b'E', &body)
    };
    batch.extend(execute(1000));
    sock.write_all(&batch).await?;
    sock.write_all(&frontend(b'H', &[])).await?;
    let tmp = dir.path().join("base").join("pgsql_tmp");
    let mut got = 0i64;
    let mut spilled = false;
    // Bounded: 20 Executes of 1000 rows, then one that finds the end.
    for round in 0..30 {
        if round > 0 {
            sock.write_all(&execute(1000)).await?;
            sock.write_all(&frontend(b'H', &[])).await?;
        }
        let (done, rows) = read_portal_part(&mut sock, &mut got).await?;
        spilled |= std::fs::read_dir(&tmp).is_ok_and(|mut d| d.next().is_some());
        if done {
            assert_eq!(rows, 0, "the last Execute finds the end");
            break;
        }
        assert_eq!(rows, 1000);
    }
    assert_eq!(got, 20_000);
    assert!(
        spilled,
        "20,000 rows of 100 bytes went past 64 kB into a temp file"
    );
    sock.write_all(&frontend(b'S', &[])).await?;
    read_until_ready(&mut sock).await?;
    assert!(
        std::fs::read_dir(&tmp)?.next().is_none(),
        "the temp file went with the portal"
    );
    server.stop().await
}

/// Reads one Execute's answer: DataRows (checking they continue the count), then
/// PortalSuspended or CommandComplete (returns true for the latter) and the rows read.
async fn read_portal_part(
    sock: &mut tokio::net::TcpStream,
    got: &mut i64,
) -> anyhow::Result<(bool, usize)> {
    let mut rows = 0;
    loop {
        let kind = sock.read_u8().await?;
        let len = usize::try_from(sock.read_i32().await?)? - 4;
        let mut body = vec![0; len];
        sock.read_exact(&mut body).await?;
        match kind {
            b'1' | b'2' => {}
            b'D' => {
                let n = i32::from_be_bytes([body[2], body[3], body[4], body[5]]);
                let value: i64 = std::str::from_utf8(&body[6..6 + usize::try_from(n)?])?.parse()?;
                *got += 1;
                assert_eq!(value, *got, "rows in order");
                rows += 1;
            }
            b's' => return Ok((false, rows)),
            b'C' => return Ok((true, rows)),
            other => anyhow::bail!("unexpected message {}", other as char),
        }
    }
}
