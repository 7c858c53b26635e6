//! Real process crashes: run `quire-bench torture run`, `kill -9` it, then `quire-bench
//! torture verify` must recover exactly what was acknowledged.
//!
//! - `pages`: raw WAL-logged page changes; every acknowledged change must survive, and
//!   only a prefix of the sequence.
//! - `txn`: concurrent transactions on a heap table (commits, rollbacks, prepared
//!   transactions finished later, forced checkpoints); every acknowledged commit must
//!   survive, nothing unacknowledged beyond the one step each client had in flight, every
//!   acknowledged prepared transaction must come back holding its locks. The last test
//!   shows that `verify` does catch a lost or an extra transaction.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn quire_bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_quire-bench"))
}

#[test]
fn kill_9_loses_no_acknowledged_change() {
    for (round, kill_after) in [(1u64, 200u64), (2, 3_000), (3, 20_000)] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let mut child = quire_bench()
            .args(["torture", "--seed", &round.to_string(), "--data-dir"])
            .arg(&data)
            .args(["run"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start quire-bench torture run");
        let stdout = child.stdout.take().unwrap();
        let mut acked = 0u64;
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if let Some(n) = line.strip_prefix("acked ") {
                acked = n.parse().unwrap();
                if acked >= kill_after {
                    break;
                }
            }
        }
        child.kill().expect("kill -9"); // SIGKILL on unix
        child.wait().unwrap();
        assert!(
            acked >= kill_after,
            "round {round}: the workload stopped early at {acked}"
        );
        let out = quire_bench()
            .args(["torture", "--seed", &round.to_string(), "--data-dir"])
            .arg(&data)
            .arg("verify")
            .output()
            .expect("run quire-bench torture verify");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "round {round}: verify failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let recovered: u64 = text
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("round {round}: unexpected output {text}"));
        assert!(
            recovered >= acked,
            "round {round}: acknowledged {acked}, recovered {recovered}"
        );
        eprintln!("round {round}: killed after {acked} acknowledged, recovered {recovered}");
    }
}

// ---------------------------------------------------------------------- transactions

fn txn(seed: u64, data: &Path) -> Command {
    let mut c = quire_bench();
    c.args(["torture", "--workload", "txn", "--seed", &seed.to_string()])
        .arg("--data-dir")
        .arg(data);
    c
}

/// Lines that acknowledge a step of a client (as opposed to `created`, `checkpoint N`).
fn is_step(line: &str) -> bool {
    ["committed ", "rolledback ", "prepared ", "finished "]
        .iter()
        .any(|p| line.starts_with(p))
}

fn verify(seed: u64, data: &Path, acked: &Path) -> Output {
    txn(seed, data)
        .arg("verify")
        .arg("--acked")
        .arg(acked)
        .output()
        .expect("run quire-bench torture verify")
}

/// The `key=value` counts of verify's `recovered ...` line.
fn counts(out: &Output, what: &str) -> BTreeMap<String, u64> {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what}: verify failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("recovered "))
        .unwrap_or_else(|| panic!("{what}: no `recovered` line in {text}"));
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

/// A round waits at most this long for its kill point (once the table exists), so a slow
/// disk (slow fsyncs, slow commits) makes the test kill earlier, not run longer.
const MAX_ROUND: Duration = Duration::from_secs(3);

/// One round: start `run`, read its acknowledgements until `kill_after` step lines (`None`:
/// kill at once, perhaps before the table exists; `Some(0)`: as soon as it does) or
/// [`MAX_ROUND`], `kill -9` it, collect every line it wrote before dying, and verify.
fn txn_round(seed: u64, kill_after: Option<usize>) -> BTreeMap<String, u64> {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let stderr_path = dir.path().join("stderr");
    let mut child = txn(seed, &data)
        .arg("run")
        .stdout(Stdio::piped())
        .stderr(File::create(&stderr_path).unwrap())
        .spawn()
        .expect("start quire-bench torture run");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut acked = String::new();
    let (mut created, mut steps) = (false, 0);
    let died = |what: &str| {
        let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        panic!("seed {seed}: the run {what} before the kill: {err}")
    };
    if let Some(wanted) = kill_after {
        let start = Instant::now();
        // Lines come often (the forced checkpoints print too), so the clock is looked at
        // often enough.
        while !created || (steps < wanted && start.elapsed() < MAX_ROUND) {
            let mut line = String::new();
            if out.read_line(&mut line).unwrap() == 0 {
                died("ended");
            }
            created |= line == "created\n";
            steps += usize::from(is_step(&line));
            acked.push_str(&line);
        }
    }
    child.kill().expect("kill -9"); // SIGKILL on unix
    let status = child.wait().unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt as _;
        if status.signal() != Some(9) {
            died(&format!("exited ({status})"));
        }
    }
    #[cfg(not(unix))]
    let _ = status;
    // Everything written before the kill was acknowledged, also what was not read yet.
    out.read_to_string(&mut acked).unwrap();
    let acked_path = dir.path().join("acked");
    std::fs::write(&acked_path, &acked).unwrap();
    let lines = acked.lines().filter(|l| is_step(l)).count();
    let mut c = counts(
        &verify(seed, &data, &acked_path),
        &format!("seed {seed}, killed after {lines} steps"),
    );
    eprintln!("seed {seed}: killed after {lines} acknowledged steps: {c:?}");
    c.insert("acknowledged_steps".into(), lines as u64);
    c
}

#[test]
fn kill_9_keeps_every_acknowledged_transaction() {
    // Kill points: at once, right after the table exists, then later and later (up to a
    // few seconds of work), each round on a new directory with its own seed (even seeds
    // keep prepared states in memory, odd ones re-read them from the WAL or state files).
    let rounds = [
        (1, None),
        (2, Some(0)),
        (3, Some(1)),
        (4, Some(10)),
        (5, Some(60)),
        (6, Some(250)),
        (7, Some(800)),
        (8, Some(2_500)),
        (9, Some(6_000)),
        (10, Some(12_000)),
    ];
    let mut total: BTreeMap<String, u64> = BTreeMap::new();
    for (seed, kill_after) in rounds {
        for (k, v) in txn_round(seed, kill_after) {
            *total.entry(k).or_default() += v;
        }
    }
    let get = |k: &str| total.get(k).copied().unwrap_or(0);
    eprintln!(
        "{} kills, {} acknowledged steps: {} acknowledged commits and {} acknowledged \
         prepares verified; in flight at the kill: {} commits ({} had committed), {} prepares \
         ({} had prepared), {} finishes ({} had finished); {} prepared transactions recovered \
         with their locks ({} from state files; then {} committed, {} rolled back); {} forced \
         checkpoints and {} database-wide vacuums ({} commit-log segments removed) acknowledged",
        rounds.len(),
        get("acknowledged_steps"),
        get("committed"),
        get("prepared"),
        get("in_flight_commits"),
        get("in_flight_committed"),
        get("in_flight_prepares"),
        get("in_flight_prepared"),
        get("in_flight_finishes"),
        get("in_flight_finished"),
        get("prepared_recovered"),
        get("state_files"),
        get("prepared_committed"),
        get("prepared_rolled_back"),
        get("checkpoints"),
        get("vacuums"),
        get("segments_removed"),
    );
    // Low bars: a slow disk makes every round stop at MAX_ROUND, with fewer commits.
    assert!(get("committed") > 100, "too few commits: {total:?}");
    assert!(
        get("prepared_recovered") > 0,
        "no kill left a prepared transaction to recover: {total:?}"
    );
    assert!(
        get("vacuums") > 0,
        "no database-wide vacuum before a kill: {total:?}"
    );
}

/// A run that ends by itself (`--ops`) closes cleanly, leaving its last prepared
/// transactions prepared; verify finds them and everything else.
fn run_to_end(seed: u64, data: &Path, txns: u32, acked: &Path) {
    let out = txn(seed, data)
        .args(["run", "--ops", &txns.to_string()])
        .output()
        .expect("run quire-bench torture run");
    assert!(
        out.status.success(),
        "run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).ends_with("closed\n"));
    std::fs::write(acked, &out.stdout).unwrap();
}

#[test]
fn verify_catches_a_lost_and_an_extra_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let (short, long) = (dir.path().join("short"), dir.path().join("long"));
    let (short_acks, long_acks) = (
        dir.path().join("short.acked"),
        dir.path().join("long.acked"),
    );
    // Same seed: the long run's steps continue the short run's.
    run_to_end(9, &short, 20, &short_acks);
    run_to_end(9, &long, 40, &long_acks);
    // The short directory lacks transactions the long run acknowledged: lost commits.
    let lost = verify(9, &short, &long_acks);
    assert!(!lost.status.success(), "a lost commit went unnoticed");
    // The long directory holds transactions the short run never acknowledged.
    let extra = verify(9, &long, &short_acks);
    assert!(
        !extra.status.success(),
        "an unacknowledged commit went unnoticed"
    );
    for out in [&lost, &extra] {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("rows differ") || err.contains("prepared transaction"),
            "unexpected failure: {err}"
        );
    }
    // And the truth passes.
    counts(&verify(9, &short, &short_acks), "the short run");
    counts(&verify(9, &long, &long_acks), "the long run");
}

// ---------------------------------------------------------------------- soak

/// `quire-bench torture soak` for a few seconds: cycles of run, kill -9, verify, all passing,
/// with its summary table.
#[test]
fn a_short_soak_kills_and_verifies_every_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let out = quire_bench()
        .args(["torture", "--seed", "7", "--data-dir"])
        .arg(dir.path().join("soak"))
        .args([
            "soak",
            "--minutes",
            "0.05",
            "--kill-min-ms",
            "200",
            "--kill-max-ms",
            "600",
        ])
        .output()
        .expect("run quire-bench torture soak");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "soak failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cycles = text.lines().filter(|l| l.starts_with("cycle ")).count();
    assert!(cycles >= 2, "at least one cycle of each workload: {text}");
    assert!(text.contains(" txn ") && text.contains(" pages "), "{text}");
    assert!(text.contains("| kill -9 cycles, all verified |"), "{text}");
    // Passing cycles leave nothing behind.
    assert_eq!(
        std::fs::read_dir(dir.path().join("soak")).unwrap().count(),
        0,
        "cycle directories left"
    );
}
