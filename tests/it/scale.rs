//! Settings that bite only at scale, for real: a 3-node `preflight cluster --nproc-per-node 10`
//! (world size 30) in network namespaces, whose per-namespace sysctls (somaxconn,
//! tcp_max_syn_backlog, tcp_abort_on_overflow) and one node's RLIMIT_NOFILE (`prlimit`) are set
//! with the host's own tools; the same cluster with the settings raised reports none of them.

use crate::netns::{Cluster, NodeRun, node};
use serde_json::Value;

/// `--timeout` for these runs (an upper bound: a healthy run ends sooner).
const TIMEOUT: u64 = 20;
/// The ids these runs must not raise (those that depend on the host machine, such as its
/// /dev/shm or cgroup, are left out).
const SCALE_IDS: &[&str] = &[
    "sys.listen-backlog",
    "sys.nofile",
    "sys.port-range",
    "sys.neigh-table",
    "ib.gid-index",
    "net.arp-flux",
    "launch.tcpstore",
];

fn sysctl(c: &Cluster, rank: usize, setting: &str) {
    let out = c.exec(rank, &["sysctl", "-w", setting]);
    assert!(
        out.status.success(),
        "sysctl -w {setting} in {}: {}",
        c.ns(rank),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every finding of rank 0's report whose status is warn or worse and whose id is in
/// [`SCALE_IDS`], as (id, node, status).
fn raised(run: &NodeRun) -> Vec<(String, Option<u64>, String)> {
    run.report()["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| SCALE_IDS.contains(&f["id"].as_str().unwrap_or_default()))
        .filter(|f| !["pass", "skip"].contains(&f["status"].as_str().unwrap_or_default()))
        .map(|f| {
            (
                f["id"].as_str().unwrap_or_default().to_string(),
                f["node"].as_u64(),
                f["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn finding<'a>(run: &'a NodeRun, id: &str, rank: u64) -> &'a Value {
    run.report()["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|f| f["id"] == id && f["node"].as_u64() == Some(rank))
        .unwrap_or_else(|| panic!("no {id} finding for rank {rank}:\n{}", run.describe()))
}

fn run(c: &Cluster, nofile: &str) -> Vec<NodeRun> {
    let limit = format!("--nofile={nofile}");
    c.preflight()
        .timeout(TIMEOUT)
        .args(&["--nproc-per-node=10", "--no-gpu", "--allreduce=off"])
        .wrap_on(2, &["prlimit", &limit, "--"])
        .run()
}

#[test]
fn a_30_rank_job_warns_of_the_master_backlog_and_one_nodes_fd_limit_and_not_once_raised() {
    let Some(c) = Cluster::flat("scale", 3, "eth0")
        .needs(&["sysctl", "prlimit"])
        .build()
    else {
        return;
    };
    sysctl(&c, 0, "net.core.somaxconn=20");
    sysctl(&c, 0, "net.ipv4.tcp_abort_on_overflow=1");
    let runs = run(&c, "24:4096");
    let r0 = node(&runs, 0);
    let got = raised(r0);
    println!("3 nodes × 10, rank 0 somaxconn 20 + abort, rank 2 nofile 24:4096: {got:?}");
    let mut want = vec![
        (
            "sys.listen-backlog".to_string(),
            Some(0),
            "warn".to_string(),
        ),
        ("sys.nofile".to_string(), Some(2), "warn".to_string()),
    ];
    want.sort();
    let mut got_sorted = got.clone();
    got_sorted.sort();
    assert_eq!(got_sorted, want, "\n{}", r0.describe());
    let backlog = finding(r0, "sys.listen-backlog", 0);
    println!("{}", serde_json::to_string_pretty(backlog).unwrap());
    assert_eq!(backlog["evidence"]["somaxconn"], 20);
    assert_eq!(backlog["evidence"]["tcp_abort_on_overflow"], 1);
    assert_eq!(backlog["evidence"]["world_size"], 30);
    assert!(backlog["summary"].as_str().unwrap().contains("reset"));
    let nofile = finding(r0, "sys.nofile", 2);
    println!("{}", serde_json::to_string_pretty(nofile).unwrap());
    assert_eq!(nofile["evidence"]["nofile_soft"], "24");
    assert_eq!(nofile["evidence"]["nofile_hard"], "4096");
    assert!(nofile["evidence"]["need"].as_u64().unwrap() > 24);
    assert_eq!(nofile["fix"]["commands"][0], "ulimit -n 4096");
    for rank in [1, 2] {
        assert_eq!(finding(r0, "sys.listen-backlog", rank)["status"], "pass");
    }

    // Raised: somaxconn and the SYN backlog 65535 on every node, nofile at the hard limit.
    for rank in 0..3 {
        sysctl(&c, rank, "net.core.somaxconn=65535");
        sysctl(&c, rank, "net.ipv4.tcp_max_syn_backlog=65535");
    }
    let runs = run(&c, "4096:4096");
    let r0 = node(&runs, 0);
    let got = raised(r0);
    println!("raised: {got:?}");
    assert!(got.is_empty(), "\n{}", r0.describe());
    for rank in 0..3 {
        assert_eq!(finding(r0, "sys.listen-backlog", rank)["status"], "pass");
        assert_eq!(finding(r0, "sys.nofile", rank)["status"], "pass");
    }
}
