//! A real process crash: run `quire torture run`, `kill -9` it after some acknowledged
//! changes, then `quire torture verify` must recover every acknowledged change, and only a
//! prefix of the sequence.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn quire() -> Command {
    Command::new(env!("CARGO_BIN_EXE_quire"))
}

#[test]
fn kill_9_loses_no_acknowledged_change() {
    for (round, kill_after) in [(1u64, 200u64), (2, 3_000), (3, 20_000)] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let mut child = quire()
            .args(["torture", "--seed", &round.to_string(), "--data-dir"])
            .arg(&data)
            .args(["run"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start quire torture run");
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
        let out = quire()
            .args(["torture", "--seed", &round.to_string(), "--data-dir"])
            .arg(&data)
            .arg("verify")
            .output()
            .expect("run quire torture verify");
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
