//! Issue 54 on the real Slurm of the tests: hooks an operator can leave on. A running job's
//! master port is that job's (the health check never drains for it; another job on the node
//! fails its tasks with the reason, the node stays in service); a warning over ten checks and
//! a multi-task job never drain, and the job is one run in the node's history; a user's
//! `NCCL_SOCKET_IFNAME` that does not work is replaced and said in the task's output. The
//! hooks run with slurmd's empty environment: no SLURM_CONF, found from slurmd itself.

use crate::slurm::{SlurmCluster, bin, text};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The three example hooks as slurm.conf runs them, each with its node's own store and log and
/// no `SLURM_CONF` (slurmd gives its hooks an empty environment: preflight finds the file
/// slurmd was started with).
fn hooks_cluster(tag: &str, n: usize) -> Option<SlurmCluster> {
    let common = "export PREFLIGHT=@BIN@ PREFLIGHT_ARGS=--no-gpu PREFLIGHT_HISTORY=@DIR@/history-$SLURMD_NODENAME.db";
    let c = SlurmCluster::up(
        tag,
        n,
        "HealthCheckProgram=@DIR@/health.sh\nHealthCheckInterval=10\nHealthCheckNodeState=ANY\n\
         Prolog=@DIR@/prolog.sh\nTaskProlog=@DIR@/taskprolog.sh\n",
        &[
            (
                "health.sh",
                format!(
                    "#!/bin/sh\nunset SLURM_CONF\n{common} PREFLIGHT_LOG=@DIR@/health-$SLURMD_NODENAME.log\n\
                     exec @EXAMPLES@/preflight-health.sh\n"
                ),
            ),
            (
                "prolog.sh",
                format!(
                    "#!/bin/sh\nunset SLURM_CONF\n{common} PREFLIGHT_LOG=@DIR@/prolog-$SLURMD_NODENAME.log\n\
                     exec @EXAMPLES@/preflight-prolog.sh\n"
                ),
            ),
            (
                "taskprolog.sh",
                format!(
                    "#!/bin/sh\n{common} PREFLIGHT_LOG=@DIR@/taskprolog-$SLURMD_NODENAME.log\n\
                     exec @EXAMPLES@/preflight-taskprolog.sh\n"
                ),
            ),
        ],
    )?;
    let (ok, v) = c.wait_nodes(Duration::from_secs(20), |v| {
        v.values().all(|(s, r)| s == "idle" && r.is_empty())
    });
    assert!(ok, "not all idle at the start: {v:?}");
    Some(c)
}

/// Health checks of `node` whose log line says `what`.
fn logged(c: &SlurmCluster, node: &str, what: &str) -> usize {
    c.read(&format!("health-{node}.log"))
        .lines()
        .filter(|l| l.contains(what))
        .count()
}

/// Waits until `node`'s health log has `n` lines saying `what` (at most 40 s).
fn until_logged(c: &SlurmCluster, node: &str, what: &str, n: usize) {
    let start = Instant::now();
    while logged(c, node, what) < n && start.elapsed() < Duration::from_secs(40) {
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        logged(c, node, what) >= n,
        "{node}'s health check did not say {what:?} {n} times in 40 s:\n{}",
        c.read(&format!("health-{node}.log"))
    );
}

fn job_id(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .last()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_running_jobs_port_never_drains_and_a_second_job_fails_with_the_users_reason() {
    let Some(c) = hooks_cluster("jobport", 1) else {
        return;
    };
    // Job A listens on 29500 on node1, as torchrun's master does.
    let listen = "import socket,time\ns=socket.socket()\ns.bind(('0.0.0.0',29500))\ns.listen()\ntime.sleep(300)";
    let o = c.run(
        &[
            "sbatch",
            "-n1",
            "-w",
            "node1",
            &format!("--output={}/job-a.out", c.path()),
            "--wrap",
            &format!("exec python3 -c \"{listen}\""),
        ],
        Duration::from_secs(30),
    );
    assert!(o.status.success(), "sbatch: {}", text(&o));
    let a = job_id(&o);
    let start = Instant::now();
    loop {
        let o = c.node(
            1,
            &["ss", "-ltnH", "sport = :29500"],
            Duration::from_secs(10),
        );
        if !String::from_utf8_lossy(&o.stdout).trim().is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "job {a} never listened"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Two health checks see it, a warning: the port is job A's, node1 stays in service.
    until_logged(&c, "node1", "passes (report status warn: port.in-use", 2);
    let conf = format!("SLURM_CONF={}/slurm.conf", c.path());
    let o = c.node(
        1,
        &[
            "env",
            &conf,
            bin(),
            "check",
            "--no-gpu",
            "--history",
            "off",
            "--format",
            "json",
        ],
        Duration::from_secs(60),
    );
    let report: Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    let port = report["findings"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["id"] == "port.in-use"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(port["status"], "warn", "{port}");
    assert_eq!(port["problem"], "user", "{port}");
    assert_eq!(port["evidence"]["jobs"][0], a.as_str(), "{port}");
    assert!(
        port["summary"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("held by running Slurm job {a}")),
        "{port}"
    );
    let v = c.nodes();
    assert_eq!(v["node1"].1, "", "node1 drained for job {a}'s port: {v:?}");
    let log = c.read("health-node1.log");
    println!("node1's health check with job {a} on 29500:\n{log}");
    assert!(!log.contains("drained node1"), "{log}");
    // Log lines carry the time: `2026-12-07T23:41:07Z preflight: ...`.
    assert!(
        log.lines()
            .filter(|l| l.contains("preflight: node1"))
            .all(|l| l.len() > 21 && l.as_bytes()[10] == b'T' && &l[19..21] == "Z "),
        "{log}"
    );
    // Job B on the same node, with the same MASTER_PORT: its task fails with the reason and
    // the free port; node1 is not drained and job B was not requeued.
    let o = c.run(
        &[
            "srun",
            "-n1",
            "-w",
            "node1",
            "--export=ALL,MASTER_PORT=29500",
            "echo",
            "trained",
        ],
        Duration::from_secs(60),
    );
    let out = text(&o);
    println!("job B's srun said:\n{out}");
    assert!(!o.status.success(), "{out}");
    assert!(!out.contains("trained"), "{out}");
    assert!(
        out.contains(&format!(
            "preflight: master port 29500 is held by running Slurm job {a}"
        )) && out.contains("port 29501 is free"),
        "{out}"
    );
    let prolog = c.read("prolog-node1.log");
    println!("node1's prolog for job B:\n{prolog}");
    assert!(
        prolog.contains("not drained: only user problems"),
        "{prolog}"
    );
    assert!(
        prolog.contains(" job "),
        "the job id on each line: {prolog}"
    );
    let v = c.nodes();
    assert_eq!(v["node1"].1, "", "{v:?}\n{}", c.sinfo_r());
    assert!(!v["node1"].0.starts_with("drain"), "{v:?}");
    let o = c.run(&["scancel", &a], Duration::from_secs(30));
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_warning_over_ten_checks_and_a_multi_task_job_never_drain_and_the_job_is_one_run() {
    let Some(c) = hooks_cluster("warnjob", 1) else {
        return;
    };
    // A firewall that filters part of NCCL's high ports on node1: a warning, never a drain.
    let o = c.node(
        1,
        &[
            "iptables",
            "-A",
            "INPUT",
            "-p",
            "tcp",
            "--dport",
            "50000:50100",
            "-j",
            "DROP",
        ],
        Duration::from_secs(30),
    );
    assert!(o.status.success(), "{}", text(&o));
    let health = format!("{}/health.sh", c.path());
    for i in 0..10 {
        // As slurmd runs it: an empty environment but its node name.
        let o = c.node(
            1,
            &[
                "env",
                "-i",
                "SLURMD_NODENAME=node1",
                "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                &format!("SLURM_CONF={}/slurm.conf", c.path()),
                "sh",
                "-c",
                // health.sh unsets SLURM_CONF (slurmd's hooks have none): a run by hand, with
                // no slurmd above it, passes it on as the guide says.
                &format!("sed 's/^unset SLURM_CONF$//' {health} | sh"),
            ],
            Duration::from_secs(60),
        );
        assert_eq!(o.status.code(), Some(0), "check {i}: {}", text(&o));
    }
    let log = c.read("health-node1.log");
    println!("node1's ten health checks with a firewall warning:\n{log}");
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("passes (report status warn: ") && l.contains("firewall.rules"))
            .count(),
        10,
        "{log}"
    );
    assert!(!log.contains("drained node1"), "{log}");
    assert!(!log.contains("history.lemon"), "{log}");
    // One job of four tasks, with a user's NCCL_SOCKET_IFNAME that names no interface.
    let o = c.run(
        &[
            "srun",
            "-n4",
            "-w",
            "node1",
            "-l",
            "--export=ALL,NCCL_SOCKET_IFNAME=nosuch0",
            "sh",
            "-c",
            "echo IFNAME=$NCCL_SOCKET_IFNAME",
        ],
        Duration::from_secs(90),
    );
    let out = text(&o);
    println!("the four tasks said:\n{out}");
    assert!(
        o.status.success(),
        "{out}\n{}",
        c.read("taskprolog-node1.log")
    );
    let got = out
        .lines()
        .filter(|l| l.split_once(": ").is_some_and(|(_, r)| r == "IFNAME=eth0"))
        .count();
    assert_eq!(got, 4, "{out}");
    assert_eq!(
        out.matches("preflight: your NCCL_SOCKET_IFNAME=nosuch0 does not work on this node")
            .count(),
        4,
        "{out}"
    );
    let v = c.nodes();
    assert_eq!(v["node1"].1, "", "{v:?}");
    // The node's history: one run for the job (its prolog and four TaskPrologs), one per check.
    let store = format!("{}/history-node1.db", c.path());
    let export = c.node(
        1,
        &[bin(), "history", "--history", &store, "--export"],
        Duration::from_secs(30),
    );
    let records: Vec<Value> = String::from_utf8_lossy(&export.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let of_job = records.iter().filter(|r| r["job"].is_string()).count();
    let checks = records.len() - of_job;
    assert!(of_job >= 5, "the prolog and 4 TaskPrologs: {records:?}");
    let o = c.node(
        1,
        &[bin(), "history", "--history", &store, "--format", "json"],
        Duration::from_secs(30),
    );
    let view: Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    println!("{}", String::from_utf8_lossy(&o.stdout));
    assert_eq!(view["records"], records.len(), "{view}");
    assert_eq!(view["node_runs"], checks + 1, "the job is one run: {view}");
    assert_eq!(o.status.code(), Some(0), "no lemon: {view}");
}
