//! `client_cpu_affinity` against a real client: a test binary of its own, so that the only
//! connection threads in the process are this test's.

mod common;

use common::{config, simple, Running};

/// The CPUs (`Cpus_allowed_list`) of this process's threads named `quire-conn-*`, and of
/// the process.
fn connection_cpus() -> anyhow::Result<(Vec<String>, String)> {
    let allowed = |status: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|v| v.trim().to_string())
    };
    let process = allowed(&std::fs::read_to_string("/proc/self/status")?)
        .ok_or_else(|| anyhow::anyhow!("no Cpus_allowed_list in /proc/self/status"))?;
    let mut threads = Vec::new();
    for task in std::fs::read_dir("/proc/self/task")? {
        let path = task?.path();
        let Ok(name) = std::fs::read_to_string(path.join("comm")) else {
            continue; // the thread has ended
        };
        if name.starts_with("quire-conn-") {
            if let Some(cpus) = std::fs::read_to_string(path.join("status"))
                .ok()
                .as_deref()
                .and_then(allowed)
            {
                threads.push(cpus);
            }
        }
    }
    Ok((threads, process))
}

/// A loopback connection's thread runs on one CPU, its client's, once it has answered; with
/// `client_cpu_affinity` off it keeps the process's CPUs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_connection_moves_to_its_clients_cpu() -> anyhow::Result<()> {
    let (_, process) = connection_cpus()?;
    if !process.contains([',', '-']) {
        eprintln!("skipped: one CPU ({process})");
        return Ok(());
    }
    for follow in [true, false] {
        let dir = tempfile::tempdir()?;
        let mut config = config(dir.path());
        config.client_cpu_affinity = follow;
        let server = Running::start(config).await?;
        let client = server.connect().await?;
        for _ in 0..20 {
            simple(&client, "SELECT 1").await?;
        }
        let (threads, _) = connection_cpus()?;
        assert_eq!(threads.len(), 1, "one connection thread: {threads:?}");
        let cpus = &threads[0];
        if follow {
            let cpu: usize = cpus
                .parse()
                .map_err(|_| anyhow::anyhow!("not one CPU: {cpus}"))?;
            assert!(cpu < 4096, "CPU {cpu}");
        } else {
            assert_eq!(cpus, &process);
        }
        drop(client);
        server.stop().await?;
    }
    Ok(())
}
