//! `quire-bench`: the tools that measure and break the engine's layers directly, kept out of
//! the server binary.
//!
//! - `quire-bench [EXPERIMENT] [flags]` reproduces a seed experiment ([`bench`]), old and new
//!   behaviour side by side in one run; without an experiment, every one runs in turn
//!   (`quire-bench --quick` is CI's smoke run).
//! - `quire-bench torture [flags] run|verify|soak` is the crash workload for `kill -9` tests
//!   ([`torture`]).
//!
//! ## Rules
//!
//! - **Never built together with `quire`.** This crate turns on the engine's `testing`
//!   feature (internal layers public, hooks such as `Transaction::vanish`). Cargo unifies a
//!   dependency's features across the packages one invocation builds, so a `cargo build`
//!   that selected both would link the server binary against that engine too. The crate is
//!   therefore a workspace member but not a default member: build and test it with
//!   `-p quire-bench` (`cargo build --release -p quire-bench`, `cargo test -p quire-bench`),
//!   never with `--workspace` when the `quire` binary is the artifact wanted.

mod bench;
mod torture;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "quire-bench",
    version,
    about = "quire's seed experiments (old and new behaviour side by side) and crash workload",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    tool: Option<Tool>,
    #[command(flatten)]
    bench: bench::BenchArgs,
}

#[derive(Subcommand)]
enum Tool {
    /// A crash workload for `kill -9` tests: `run` until killed, then `verify`.
    Torture(torture::TortureArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // Warnings only: the figures and the acknowledgements are on stdout.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("QUIRE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colours only on a terminal: a log file or a pipe gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match cli.tool {
        Some(Tool::Torture(args)) => torture::run(&args),
        None => bench::run(&cli.bench),
    }
}
