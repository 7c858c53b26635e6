//! `quire`: the server binary (`quire serve`).
//!
//! It is built without the engine's `testing` feature, so it carries none of the engine's
//! test hooks (`Transaction::vanish`, `TransactionManager::skip_xids`, the test resource
//! manager, the internal layers made public). The seed experiments and the crash workload,
//! which need them, are a binary of their own: `quire-bench` (crates/bench). `.ci/run` checks
//! that cargo built the release binary's engine without the feature.

mod serve;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "quire",
    version,
    about = "A PostgreSQL-compatible storage engine and server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve PostgreSQL's wire protocol on a data directory (created on first start).
    Serve(serve::ServeArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The server logs its startup and shutdown.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("QUIRE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colours only on a terminal: a log file or a pipe gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match cli.command {
        Command::Serve(args) => serve::run(&args),
    }
}
