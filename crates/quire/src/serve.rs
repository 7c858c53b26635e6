//! `quire serve`: opens (or creates) a data directory and serves PostgreSQL's protocol
//! until SIGINT or SIGTERM, then shuts down cleanly (open transactions rolled back, a
//! shutdown checkpoint).

use std::path::PathBuf;

use anyhow::Context;
use quire_server::{Server, ServerConfig};

#[derive(clap::Args)]
pub struct ServeArgs {
    /// A TOML file of settings by PostgreSQL's names (`port = 5433`,
    /// `shared_buffers = "1GB"`, `max_prepared_transactions = 16`, ...). Environment variables
    /// `QUIRE_<SETTING>` override it, and flags override both.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The data directory: created on first start, recovered on later ones (`data_directory`;
    /// default `./quire-data`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The TCP port (PostgreSQL's `port`; default 5433).
    #[arg(long)]
    port: Option<u16>,
    /// The address to listen on (PostgreSQL's `listen_addresses`; default 127.0.0.1). A
    /// non-loopback address is refused while a `trust` rule of `pg_hba.conf` covers one.
    #[arg(long)]
    listen_addresses: Option<String>,
    /// Sessions at most (PostgreSQL's `max_connections`).
    #[arg(long)]
    max_connections: Option<usize>,
    /// A setting by PostgreSQL's name, as `postgres -c`: `-c max_prepared_transactions=10`.
    #[arg(short = 'c', value_name = "NAME=VALUE")]
    set: Vec<String>,
}

/// Environment variables that are not settings (the log filter).
const NOT_SETTINGS: &[&str] = &["QUIRE_LOG"];

/// One setting applied to the server's configuration: the server's own (`port`,
/// `listen_addresses`, `data_directory`, `hba_file`, `ssl`, `ssl_cert_file`, `ssl_key_file`,
/// `client_cpu_affinity`, `authentication_timeout`, `max_startup_connections`,
/// `superuser_reserved_connections`, `max_message_size`) or the engine's.
fn apply(config: &mut ServerConfig, name: &str, value: &str) -> anyhow::Result<()> {
    match name {
        "port" => {
            config.port = value
                .trim()
                .parse()
                .with_context(|| format!("port: \"{value}\" is not a port number"))?;
        }
        "listen_addresses" => config.listen_addresses = value.trim().to_string(),
        "data_directory" => config.data_dir = PathBuf::from(value.trim()),
        "hba_file" => config.hba_file = Some(PathBuf::from(value.trim())),
        "ssl" => config.ssl = boolean(name, value)?,
        "client_cpu_affinity" => config.client_cpu_affinity = boolean(name, value)?,
        "ssl_cert_file" => config.ssl_cert_file = PathBuf::from(value.trim()),
        "ssl_key_file" => config.ssl_key_file = PathBuf::from(value.trim()),
        "authentication_timeout" => {
            // PostgreSQL's unit for it is seconds.
            let v = value.trim();
            let ms = if v.bytes().all(|b| b.is_ascii_digit()) {
                v.parse::<u64>()
                    .map(|s| s.saturating_mul(1000))
                    .map_err(|e| e.to_string())
            } else {
                quire_engine::config::parse_millis(v)
            };
            let ms = ms.map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            config.authentication_timeout = std::time::Duration::from_millis(ms);
        }
        "max_startup_connections" => config.max_startup_connections = count(name, value)?,
        "superuser_reserved_connections" => {
            config.superuser_reserved_connections = count(name, value)?;
        }
        "max_message_size" => {
            let bytes = quire_engine::config::parse_bytes(value)
                .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            config.max_message_size = usize::try_from(bytes)?;
        }
        _ => config.engine.set(name, value)?,
    }
    Ok(())
}

/// A count setting's value.
fn count(name: &str, value: &str) -> anyhow::Result<usize> {
    value
        .trim()
        .parse()
        .with_context(|| format!("{name}: \"{value}\" is not a whole number"))
}

/// A boolean setting's value, as the engine reads its own.
fn boolean(name: &str, value: &str) -> anyhow::Result<bool> {
    quire_engine::config::parse_on_off(value).map_err(|reason| anyhow::anyhow!("{name}: {reason}"))
}

/// The settings of a TOML file: `name = value` at the top level.
fn file_settings(path: &std::path::Path) -> anyhow::Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the configuration file {}", path.display()))?;
    let doc: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("parsing {}", path.display()))?;
    let mut out = Vec::new();
    for (key, item) in doc.iter() {
        let Some(v) = item.as_value() else {
            anyhow::bail!(
                "{}: \"{key}\" is a table; settings are top-level `name = value` lines",
                path.display()
            );
        };
        let text = match v {
            toml_edit::Value::String(s) => s.value().clone(),
            toml_edit::Value::Integer(i) => i.value().to_string(),
            toml_edit::Value::Float(f) => f.value().to_string(),
            toml_edit::Value::Boolean(b) => quire_engine::config::on_off(*b.value()).to_string(),
            _ => anyhow::bail!(
                "{}: \"{key}\" must be a string, number or boolean",
                path.display()
            ),
        };
        out.push((key.to_string(), text));
    }
    Ok(out)
}

/// The server's configuration: defaults, then the file, then the environment, then flags.
fn server_config(args: &ServeArgs) -> anyhow::Result<ServerConfig> {
    let mut config = ServerConfig::new("./quire-data");
    if let Some(path) = &args.config {
        for (name, value) in file_settings(path)? {
            apply(&mut config, &name, &value)
                .with_context(|| format!("{}: {name}", path.display()))?;
        }
    }
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("QUIRE_") && !NOT_SETTINGS.contains(&k.as_str()))
        .collect();
    env.sort();
    for (k, v) in env {
        let name = k["QUIRE_".len()..].to_lowercase();
        apply(&mut config, &name, &v).with_context(|| format!("environment variable {k}"))?;
    }
    for s in &args.set {
        let (name, value) = s
            .split_once('=')
            .with_context(|| format!("-c {s}: expected NAME=VALUE"))?;
        apply(&mut config, name.trim(), value.trim()).with_context(|| format!("-c {s}"))?;
    }
    if let Some(d) = &args.data_dir {
        config.data_dir.clone_from(d);
    }
    if let Some(p) = args.port {
        config.port = p;
    }
    if let Some(l) = &args.listen_addresses {
        config.listen_addresses.clone_from(l);
    }
    if let Some(n) = args.max_connections {
        config.engine.max_connections = n;
    }
    config.engine.validate()?;
    Ok(config)
}

pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let config = server_config(args)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(config: Option<PathBuf>, set: &[&str], port: Option<u16>) -> ServeArgs {
        ServeArgs {
            config,
            data_dir: None,
            port,
            listen_addresses: None,
            max_connections: None,
            set: set.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn settings_come_from_the_file_then_c_flags_then_named_flags() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("quire.toml");
        std::fs::write(
            &file,
            "port = 6000\nshared_buffers = \"16MB\"\nmax_prepared_transactions = 8\n\
             synchronous_commit = false\ndata_directory = \"/tmp/q\"\n",
        )?;
        let c = server_config(&args(Some(file.clone()), &[], None))?;
        assert_eq!(c.port, 6000);
        assert_eq!(c.engine.shared_buffers_bytes, 16 << 20);
        assert_eq!(c.engine.max_prepared_transactions, 8);
        assert!(!c.engine.synchronous_commit);
        assert_eq!(c.data_dir, PathBuf::from("/tmp/q"));
        assert!(!c.ssl);
        let c = server_config(&args(
            None,
            &["ssl=on", "ssl_cert_file=/c.pem", "hba_file=/h.conf"],
            None,
        ))?;
        assert!(c.ssl);
        assert_eq!(c.ssl_cert_file, PathBuf::from("/c.pem"));
        assert_eq!(c.ssl_key_file, PathBuf::from("server.key"));
        assert_eq!(c.hba_file, Some(PathBuf::from("/h.conf")));
        let c = server_config(&args(Some(file.clone()), &["port=6001"], None))?;
        assert_eq!(c.port, 6001);
        let c = server_config(&args(Some(file.clone()), &["port=6001"], Some(6002)))?;
        assert_eq!(c.port, 6002);
        // A name quire does not know, and a value that does not parse, are refused with the
        // setting named.
        std::fs::write(&file, "no_such_setting = 1\n")?;
        let e = server_config(&args(Some(file.clone()), &[], None)).unwrap_err();
        assert!(format!("{e:#}").contains("no_such_setting"), "{e:#}");
        let e = server_config(&args(None, &["shared_buffers=lots"], None)).unwrap_err();
        assert!(format!("{e:#}").contains("shared_buffers"), "{e:#}");
        Ok(())
    }
}
