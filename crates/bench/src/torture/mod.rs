//! `quire-bench torture`: crash workloads for real process kills. `run` works until killed with
//! `kill -9` at any moment, printing a line each time something became durable; `verify`
//! recovers the directory and checks it against what `run` acknowledged. The kills come from
//! outside: `tests/kill9.rs` starts `run`, kills it at a random moment and runs `verify` (the
//! README shows the same by hand).
//!
//! `soak` ([`soak`]) does the kill and the verify itself, for a given time: a `run` child
//! killed with SIGKILL every few seconds, a `verify` child after each kill, the two
//! workloads in turn.
//!
//! Two workloads (`--workload`), one file each:
//!
//! - `pages` (default, [`pages`]): WAL-logged page changes; `verify` checks that the changes
//!   that survived are exactly a prefix of the sequence that covers every acknowledged one.
//! - `txn` ([`txn`]): transactions on a heap table from several client threads, with
//!   rollbacks, prepared transactions, forced checkpoints and database-wide vacuums; `verify`
//!   models the crash exactly from the acknowledgements.
//!
//! ## Rules
//!
//! - **A workload is a function of its options.** Every change follows from `--seed` (and
//!   `--clients`), drawn with the engine's one generator ([`quire_engine::rng`]); `verify`
//!   replays the sequence, so `run` and `verify` must be given the same options.
//! - **Acknowledge only what is durable.** `run` prints a line ([`say`]) only once the step it
//!   names has returned and its WAL is flushed. A kill may cut the last line: a line without
//!   its newline was never acknowledged.
//! - **A new directory for each `run`.** Both workloads start from nothing and refuse a
//!   directory that already holds one.

mod pages;
mod soak;
mod txn;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use quire_engine::recovery::testrm;
use quire_engine::rng::SplitMix64;
use quire_engine::vfs::{OsVfs, Vfs};
use quire_engine::{Config, Database};

#[derive(Args, Debug)]
pub struct TortureArgs {
    #[command(subcommand)]
    action: Action,
    /// The data directory.
    #[arg(long)]
    data_dir: PathBuf,
    /// Seed of the change sequence (run and verify must agree).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// What to change (run and verify must agree).
    #[arg(long, value_enum, default_value_t = Workload::Pages)]
    workload: Workload,
    /// txn: the number of client threads (run and verify must agree).
    #[arg(long, default_value_t = 3)]
    clients: u32,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    /// WAL-logged page changes.
    Pages,
    /// Transactions on a heap table: commits, rollbacks, prepared transactions.
    Txn,
}

#[derive(Subcommand, Debug)]
enum Action {
    /// Make changes until killed (or until --ops).
    Run {
        /// pages: changes in all; txn: transactions per client.
        #[arg(long, default_value_t = u64::MAX)]
        ops: u64,
    },
    /// Recover and check.
    Verify {
        /// txn: a file holding what `run` printed (its acknowledgements).
        #[arg(long)]
        acked: Option<PathBuf>,
    },
    /// For a given time: `run` (both workloads in turn, a new seed and a new directory under
    /// --data-dir each cycle), `kill -9` after a random time, `verify`; stops at the first
    /// failure, keeping its directory.
    Soak {
        /// How long to go on, in minutes.
        #[arg(long, default_value_t = 1.0)]
        minutes: f64,
        /// The shortest time a `run` lives before its kill, in milliseconds.
        #[arg(long, default_value_t = 1000)]
        kill_min_ms: u64,
        /// The longest, in milliseconds.
        #[arg(long, default_value_t = 5000)]
        kill_max_ms: u64,
    },
}

pub fn run(args: &TortureArgs) -> anyhow::Result<()> {
    let dir = &args.data_dir;
    match (&args.action, args.workload) {
        (
            Action::Soak {
                minutes,
                kill_min_ms,
                kill_max_ms,
            },
            _,
        ) => {
            if !(minutes.is_finite() && *minutes > 0.0) {
                bail!("--minutes must be a positive number");
            }
            soak::soak(&soak::SoakOptions {
                root: dir.clone(),
                seed: args.seed,
                clients: args.clients,
                duration: std::time::Duration::from_secs_f64(minutes * 60.0),
                kill_min: std::time::Duration::from_millis(*kill_min_ms),
                kill_max: std::time::Duration::from_millis(*kill_max_ms),
            })
        }
        (Action::Run { ops }, Workload::Pages) => pages::run(dir, args.seed, *ops),
        (Action::Verify { .. }, Workload::Pages) => pages::verify(dir, args.seed),
        (action, Workload::Txn) => {
            if !(1..=txn::MAX_CLIENTS).contains(&args.clients) {
                bail!("--clients must be between 1 and {}", txn::MAX_CLIENTS);
            }
            match action {
                Action::Soak { .. } => unreachable!("matched by the first arm"),
                Action::Run { ops } => txn::run(dir, args.seed, args.clients, *ops),
                Action::Verify { acked: Some(acked) } => {
                    txn::verify(dir, args.seed, args.clients, acked)
                }
                Action::Verify { acked: None } => bail!(
                    "verify --workload txn needs --acked FILE: the lines `run` printed before the kill"
                ),
            }
        }
    }
}

/// Opens (creating or recovering) the data directory on the real file system.
fn open(dir: &Path, config: Config) -> anyhow::Result<Database> {
    let vfs: Arc<dyn Vfs> = Arc::new(OsVfs::new());
    // The page workload writes the test resource manager's records.
    Database::open_with_resource_managers(&vfs, dir, config, &[testrm::registration()])
        .with_context(|| format!("opening {}", dir.display()))
}

/// Prints one acknowledgement line. One write per line (stdout is line-buffered, and the
/// line is far below PIPE_BUF), so a kill leaves whole lines in the pipe; `verify` ignores a
/// cut one anyway.
fn say(line: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(format!("{line}\n").as_bytes())?;
    out.flush()?;
    Ok(())
}

/// One seed from several numbers (a seed, a client, a step...): each is folded in through a
/// step of the generator, so neighbouring inputs give unrelated seeds.
fn mix(parts: &[u64]) -> u64 {
    parts
        .iter()
        .fold(0, |acc, &part| SplitMix64::new(acc ^ part).next())
}
