//! `quire serve`: opens (or creates) a data directory and serves PostgreSQL's protocol
//! until SIGINT or SIGTERM, then shuts down cleanly (open transactions rolled back, a
//! shutdown checkpoint).

use std::path::PathBuf;

use anyhow::Context;
use quire_server::{Server, ServerConfig, DEFAULT_PORT};

#[derive(clap::Args)]
pub struct ServeArgs {
    /// The data directory: created on first start, recovered on later ones.
    #[arg(long, default_value = "./quire-data")]
    data_dir: PathBuf,
    /// The TCP port (PostgreSQL's `port`).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// The address to listen on (PostgreSQL's `listen_addresses`; loopback only for now).
    #[arg(long, default_value = "127.0.0.1")]
    listen_addresses: String,
    /// Sessions at most (PostgreSQL's `max_connections`).
    #[arg(long)]
    max_connections: Option<usize>,
    /// A setting by PostgreSQL's name, as `postgres -c`: `-c max_prepared_transactions=10`.
    /// Applied after the `QUIRE_<SETTING>` environment variables, so flags win.
    #[arg(short = 'c', value_name = "NAME=VALUE")]
    set: Vec<String>,
}

/// Environment variables that are not settings (the log filter).
const NOT_SETTINGS: &[&str] = &["QUIRE_LOG"];

pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let mut config = ServerConfig::new(&args.data_dir);
    config.port = args.port;
    config.listen_addresses.clone_from(&args.listen_addresses);
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("QUIRE_") && !NOT_SETTINGS.contains(&k.as_str()))
        .collect();
    env.sort();
    for (k, v) in env {
        let name = k["QUIRE_".len()..].to_lowercase();
        config
            .engine
            .set(&name, &v)
            .with_context(|| format!("environment variable {k}"))?;
    }
    for s in &args.set {
        let (name, value) = s
            .split_once('=')
            .with_context(|| format!("-c {s}: expected NAME=VALUE"))?;
        config
            .engine
            .set(name.trim(), value.trim())
            .with_context(|| format!("-c {s}"))?;
    }
    if let Some(n) = args.max_connections {
        config.engine.max_connections = n;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("quire-io")
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let server = Server::start(config).await?;
        server.run(shutdown_signal()).await?;
        anyhow::Ok(())
    })
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("SIGINT received"),
        () = term => tracing::info!("SIGTERM received"),
    }
}
