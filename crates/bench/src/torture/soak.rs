//! `quire-bench torture soak`: the kill -9 test for a given time. Each cycle starts
//! `quire-bench torture run` as a child process in a new directory (the two workloads in turn,
//! a new seed each time), lets it work for a random time between `--kill-min-ms` and
//! `--kill-max-ms`, kills it with SIGKILL, and runs `quire-bench torture verify` as another
//! process: the restart, which recovers the directory and checks it against every
//! acknowledgement the killed process printed. A cycle that fails stops the soak and keeps
//! its directory and output; one that passes is removed. A line per cycle, and a summary at
//! the end.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use quire_engine::rng::SplitMix64;

use super::mix;

/// What the soak was asked for.
pub(super) struct SoakOptions {
    pub root: PathBuf,
    pub seed: u64,
    pub clients: u32,
    pub duration: Duration,
    pub kill_min: Duration,
    pub kill_max: Duration,
}

/// Totals over the cycles.
#[derive(Default)]
struct Totals {
    cycles: u64,
    pages_cycles: u64,
    txn_cycles: u64,
    acknowledged: u64,
    redo_records: u64,
    verify_s: f64,
}

/// Most cycles a soak runs, whatever its duration (each takes at least `kill_min`).
const MAX_CYCLES: u64 = 1_000_000;

pub(super) fn soak(o: &SoakOptions) -> anyhow::Result<()> {
    if o.kill_min > o.kill_max || o.kill_max.is_zero() {
        bail!("--kill-min-ms must be at most --kill-max-ms, and --kill-max-ms above 0");
    }
    fs::create_dir_all(&o.root).with_context(|| format!("creating {}", o.root.display()))?;
    let exe = std::env::current_exe().context("finding the quire-bench binary")?;
    let start = Instant::now();
    let mut rng = SplitMix64::new(o.seed);
    let mut totals = Totals::default();
    while start.elapsed() < o.duration && totals.cycles < MAX_CYCLES {
        totals.cycles += 1;
        let cycle = totals.cycles;
        let workload = if cycle % 2 == 1 { "txn" } else { "pages" };
        let seed = mix(&[o.seed, cycle]);
        let dir = o.root.join(format!("cycle-{cycle}"));
        let span = o.kill_max.saturating_sub(o.kill_min).as_millis() as u64;
        let kill_after = o.kill_min + Duration::from_millis(rng.below(span + 1));
        let c = Cycle {
            exe: &exe,
            dir: &dir,
            workload,
            seed,
            clients: o.clients,
        };
        let outcome = c.run(kill_after).with_context(|| {
            format!(
                "cycle {cycle} ({workload}, seed {seed}) failed; its directory is kept: {}",
                dir.display()
            )
        })?;
        match workload {
            "txn" => totals.txn_cycles += 1,
            _ => totals.pages_cycles += 1,
        }
        totals.acknowledged += outcome.acknowledged;
        totals.redo_records += outcome.redo_records;
        totals.verify_s += outcome.verify_s;
        println!(
            "cycle {cycle:>5}  {workload:<5} seed {seed:>20}  killed after {:>5} ms  \
             {:>7} acknowledged  recovered and verified in {:.2} s ({} redo records)  {}",
            kill_after.as_millis(),
            outcome.acknowledged,
            outcome.verify_s,
            outcome.redo_records,
            outcome.summary
        );
        fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let minutes = start.elapsed().as_secs_f64() / 60.0;
    println!();
    println!("| soak | value |");
    println!("|---|---|");
    println!("| duration | {minutes:.1} min |");
    println!(
        "| kill -9 cycles, all verified | {} ({} txn, {} pages) |",
        totals.cycles, totals.txn_cycles, totals.pages_cycles
    );
    println!("| acknowledged steps checked | {} |", totals.acknowledged);
    println!(
        "| WAL records replayed at restarts | {} |",
        totals.redo_records
    );
    println!(
        "| mean restart (recovery + verify) | {:.2} s |",
        totals.verify_s / totals.cycles.max(1) as f64
    );
    Ok(())
}

/// One cycle: run, kill, verify.
struct Cycle<'a> {
    exe: &'a Path,
    dir: &'a Path,
    workload: &'a str,
    seed: u64,
    clients: u32,
}

struct Outcome {
    acknowledged: u64,
    redo_records: u64,
    verify_s: f64,
    /// Verify's own summary line.
    summary: String,
}

impl Cycle<'_> {
    fn command(&self) -> Command {
        let mut c = Command::new(self.exe);
        c.args(["torture", "--workload", self.workload])
            .args(["--seed", &self.seed.to_string()])
            .args(["--clients", &self.clients.to_string()])
            .arg("--data-dir")
            .arg(self.dir.join("data"));
        c
    }

    fn run(&self, kill_after: Duration) -> anyhow::Result<Outcome> {
        fs::create_dir_all(self.dir)?;
        let mut child = self
            .command()
            .arg("run")
            .stdout(Stdio::piped())
            .stderr(fs::File::create(self.dir.join("run.stderr"))?)
            .spawn()
            .context("starting quire-bench torture run")?;
        // Every line the child prints, read as it prints them (a full pipe would stall it).
        let stdout = child.stdout.take().context("the child's stdout")?;
        let reader = thread::spawn(move || -> Vec<String> {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect()
        });
        thread::sleep(kill_after);
        kill(&mut child)?;
        let lines = reader
            .join()
            .map_err(|_| anyhow::anyhow!("the reader panicked"))?;
        let acked_path = self.dir.join("acked");
        // Each line with its newline: a run killed before it printed anything leaves an
        // empty file, not one blank line (which is no acknowledgement verify knows).
        let text: String = lines.iter().flat_map(|l| [l.as_str(), "\n"]).collect();
        fs::write(&acked_path, text)?;
        let t0 = Instant::now();
        let mut verify = self.command();
        verify.arg("verify");
        if self.workload == "txn" {
            verify.arg("--acked").arg(&acked_path);
        }
        let out = verify
            .output()
            .context("running quire-bench torture verify")?;
        let verify_s = t0.elapsed().as_secs_f64();
        let summary = check_verify(&out)?;
        let acknowledged = if self.workload == "txn" {
            lines.iter().filter(|l| is_step(l)).count() as u64
        } else {
            // pages: `acked N` lines; the state recovered must cover the last one.
            let acked = lines
                .iter()
                .filter_map(|l| l.strip_prefix("acked ")?.parse::<u64>().ok())
                .max()
                .unwrap_or(0);
            let recovered: u64 = summary
                .split_whitespace()
                .nth(1)
                .and_then(|n| n.parse().ok())
                .context("verify printed no recovered count")?;
            if recovered < acked {
                bail!("acknowledged {acked} changes, recovered {recovered}");
            }
            acked
        };
        Ok(Outcome {
            acknowledged,
            redo_records: redo_records(&summary),
            verify_s,
            summary,
        })
    }
}

fn kill(child: &mut Child) -> anyhow::Result<()> {
    // SIGKILL on unix: no destructor, no flush, no shutdown checkpoint.
    child.kill().context("kill -9")?;
    child.wait().context("reaping the killed run")?;
    Ok(())
}

/// The `recovered ...` line of a successful verify, or the failure with its output.
fn check_verify(out: &Output) -> anyhow::Result<String> {
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "verify failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    text.lines()
        .find(|l| l.starts_with("recovered "))
        .map(str::to_string)
        .with_context(|| format!("verify printed no `recovered` line: {text}"))
}

/// Lines that acknowledge a txn client's step (as opposed to `created`, `checkpoint N`).
fn is_step(line: &str) -> bool {
    ["committed ", "rolledback ", "prepared ", "finished "]
        .iter()
        .any(|p| line.starts_with(p))
}

/// The redo record count in a verify summary (`redo_records=N`, or `replayed N records`).
fn redo_records(summary: &str) -> u64 {
    if let Some(n) = summary
        .split_whitespace()
        .find_map(|w| w.strip_prefix("redo_records="))
    {
        return n.parse().unwrap_or(0);
    }
    summary
        .split("replayed ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}
