//! `quire`: the command-line entry point: the server (`quire serve`), the benchmarks of the
//! seed experiments (`quire bench <name>`) and the crash workload (`quire torture`).

mod bench;
mod serve;
mod torture;

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
    /// Reproduce a seed experiment: old and new behaviour measured side by side in one run.
    Bench(bench::BenchArgs),
    /// A crash workload for `kill -9` tests: `run` until killed, then `verify`.
    Torture(torture::TortureArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The server logs its startup and shutdown; the benchmarks only warnings.
    let default_level = if matches!(cli.command, Command::Serve(_)) {
        "info"
    } else {
        "warn"
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("QUIRE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        // Colours only on a terminal: a log file or a pipe gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match cli.command {
        Command::Serve(args) => serve::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Torture(args) => torture::run(&args),
    }
}
