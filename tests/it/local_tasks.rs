//! Several tasks per node from the launcher's variables (environment fixtures under `tests/fixtures/local-tasks`): MPICH/PMI groups, and layouts that cannot be trusted as a `launch.tasks-per-node` failure.

use crate::common::{fixture, json_of};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// `KEY=VALUE` lines of a fixture; `#` comments and blank lines skipped.
fn fixture_env(name: &str) -> BTreeMap<String, String> {
    let path = fixture("local-tasks").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap_or_else(|| panic!("{name}: {l}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `preflight cluster` of one node with only `env` (and PATH, TMPDIR) in its environment.
fn task(env: &BTreeMap<String, String>, tmp: &Path, port: u16, format: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args([
            "cluster",
            "--nnodes",
            "1",
            "--no-gpu",
            "--quick",
            "--timeout",
            "10",
        ])
        .args(["--master-port", &port.to_string(), "--format", format])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TMPDIR", tmp)
        .env("PREFLIGHT_HISTORY", "off")
        .env("NO_COLOR", "1")
        .env("COLUMNS", "80")
        .envs(env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn preflight")
}

fn wait(child: Child, limit: Duration) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("wait"),
        Err(_) => {
            // SAFETY: kill on a pid we spawned and have not reaped yet.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("pid {pid} still running after {limit:?}");
        }
    }
}

fn layout_findings(report: &Value) -> Vec<&Value> {
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["id"] == "launch.tasks-per-node")
        .collect()
}

#[test]
fn layouts_that_cannot_be_trusted_fail_with_the_variables_and_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            "intel-mpi-mismatch.env",
            "MPI_LOCALRANKID/MPI_LOCALNRANKS say local rank 1 of 8, PMI_LOCAL_RANK/PMI_LOCAL_SIZE say local rank 1 of 2",
            "mpiexec -ppn 1",
        ),
        (
            "pmi-size-missing.env",
            "PMI_LOCAL_RANK is set but PMI_LOCAL_SIZE is missing",
            "mpiexec -ppn 1",
        ),
        (
            "slurm-localid-past-count.env",
            "local rank 1 (SLURM_LOCALID) is not below the node's 1 tasks (SLURM_STEP_TASKS_PER_NODE at SLURM_NODEID=3)",
            "srun --ntasks-per-node=1 preflight cluster",
        ),
    ];
    for (name, problem, command) in cases {
        let out = wait(
            task(&fixture_env(name), tmp.path(), free_port(), "json"),
            Duration::from_secs(30),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        let report = json_of(&out.stdout);
        assert_eq!(report["status"], "fail", "{name}");
        let found = layout_findings(&report);
        assert_eq!(found.len(), 1, "{name}: {report}");
        let f = found[0];
        assert_eq!(f["status"], "fail");
        let summary = f["summary"].as_str().unwrap();
        assert!(summary.contains(problem), "{name}: {summary}");
        for cause in ["firewall", "/etc/hosts", "refused", "DNS"] {
            assert!(!summary.contains(cause), "{name}: {summary}");
        }
        let vars = f["evidence"]["variables"].as_str().unwrap();
        for (k, v) in fixture_env(name)
            .iter()
            .filter(|(k, _)| k.contains("LOCAL") || k.ends_with("TASKS_PER_NODE"))
        {
            assert!(vars.contains(&format!("{k}={v}")), "{name}: {vars}");
        }
        let commands = f["fix"]["commands"].as_array().unwrap();
        assert!(
            commands
                .iter()
                .any(|c| c.as_str().unwrap().starts_with(command)),
            "{name}: {commands:?}"
        );
        // The task never joined anything: no rendezvous, no links.
        assert_eq!(report["links"].as_array().unwrap().len(), 0);
    }
}

#[test]
fn the_mismatch_reads_plainly_in_the_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let out = wait(
        task(
            &fixture_env("intel-mpi-mismatch.env"),
            tmp.path(),
            free_port(),
            "table",
        ),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let host = host.trim();
    let text = String::from_utf8_lossy(&out.stdout)
        .replace(&format!("node check on {host}\n"), "node check on HOST\n")
        .replace(&format!(" - {host} - "), " - HOST - ")
        .replace(&format!(" on {host} (above)"), " on HOST (above)");
    insta::assert_snapshot!(text);
}

#[test]
fn mpich_tasks_of_one_node_share_one_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let follower_env = fixture_env("mpich-hydra-rank1.env");
    let mut leader_env = follower_env.clone();
    leader_env.insert("MPI_LOCALRANKID".into(), "0".into());
    leader_env.insert("PMI_RANK".into(), "0".into());
    let follower = task(&follower_env, tmp.path(), port, "json");
    let leader = task(&leader_env, tmp.path(), port, "json");
    let leader = wait(leader, Duration::from_secs(60));
    let follower = wait(follower, Duration::from_secs(60));
    let lerr = String::from_utf8_lossy(&leader.stderr);
    let ferr = String::from_utf8_lossy(&follower.stderr);
    let code = leader.status.code().expect("leader's exit code");
    assert!(code == 0 || code == 1, "{lerr}");
    assert_eq!(follower.status.code(), Some(code), "{ferr}");
    let report = json_of(&leader.stdout);
    assert!(layout_findings(&report).is_empty(), "{report}");
    let status = report["status"].as_str().unwrap();
    // The follower prints one line with the leader's status, and no report.
    assert!(follower.stdout.is_empty());
    let lines: Vec<&str> = ferr.lines().collect();
    assert_eq!(lines.len(), 1, "{ferr}");
    assert!(
        lines[0].contains(&format!(
            " task 1: same verdict as task 0: {status} (exit code {code}; local rank 1 of 2 under MPICH/Intel MPI (PMI);"
        )),
        "{ferr}"
    );
}

#[test]
fn two_tasks_claiming_local_rank_0_both_fail_and_name_each_other() {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut env = fixture_env("mpich-hydra-rank1.env");
    env.insert("MPI_LOCALRANKID".into(), "0".into());
    let first = task(&env, tmp.path(), port, "json");
    // The second starts once the first holds the claim (its file is there).
    let started = std::time::Instant::now();
    while !std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with(".leader"))
    {
        assert!(started.elapsed() < Duration::from_secs(20), "no claim");
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = task(&env, tmp.path(), port, "json");
    let first = wait(first, Duration::from_secs(60));
    let second = wait(second, Duration::from_secs(60));
    for (who, out) in [("first", &first), ("second", &second)] {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{who}: {err}");
        let report = json_of(&out.stdout);
        let found = layout_findings(&report);
        assert_eq!(found.len(), 1, "{who}: {report}");
        let summary = found[0]["summary"].as_str().unwrap();
        assert!(summary.contains("claim local rank 0"), "{who}: {summary}");
    }
    // The leader also names the follower that never came (local rank 1 of 2).
    let report = json_of(&first.stdout);
    let summary = layout_findings(&report)[0]["summary"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        summary.contains("but local rank 1 never started"),
        "{summary}"
    );
}
