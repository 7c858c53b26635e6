//! `quire`: the command-line entry point. Today it runs the benchmarks of the seed
//! experiments (`quire bench <name>`); the server (`quire serve`) comes with the SQL layers.

mod bench;
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
    /// Reproduce a seed experiment: old and new behaviour measured side by side in one run.
    Bench(bench::BenchArgs),
    /// A crash workload for `kill -9` tests: `run` until killed, then `verify`.
    Torture(torture::TortureArgs),
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("QUIRE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Bench(args) => bench::run(&args),
        Command::Torture(args) => torture::run(&args),
    }
}
