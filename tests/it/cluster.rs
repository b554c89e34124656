//! Multi-node scenarios: real `preflight cluster` processes in network namespaces.
//!
//! Each test builds its own hosts (unique names, so tests may run concurrently), injects one
//! fault, runs every node, and checks finding ids, the ranks they name, and the recommendation.
//! Expected run time per test (2 cores): healthy ones 2-5 s, fault ones about `--timeout` + 1-3 s.

use crate::netns::{Cluster, Host, MASTER_PORT, Net, NodeRun, SLACK, Verdict, node};
use serde_json::Value;
use std::thread;
use std::time::{Duration, Instant};

/// `--timeout` for runs expected to succeed: only an upper bound, they finish sooner.
const HEALTHY_TIMEOUT: u64 = 15;
/// `--timeout` for runs where something never answers: the time they must give up within.
const FAULT_TIMEOUT: u64 = 4;
/// Keys of `evidence` that hold the rank(s) a finding is about.
const RANK_KEYS: &[&str] = &[
    "rank",
    "ranks",
    "to",
    "from",
    "node",
    "nodes",
    "missing",
    "missing_ranks",
    "dst",
    "peer",
];

// ---------------------------------------------------------------- helpers over the JSON report

/// A rank written as a number or a numeric string.
fn as_rank(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.parse().ok())
}

fn text(v: &Value) -> String {
    v.to_string().to_lowercase()
}

/// Does `finding` name `rank` (or its hostname): as its node, in its subject, or in evidence?
fn names_rank(finding: &Value, rank: u64, hostname: &str) -> bool {
    if as_rank(&finding["node"]) == Some(rank) {
        return true;
    }
    let subject = finding["subject"].as_str().unwrap_or_default();
    let mut words = subject.split(|c: char| !c.is_ascii_alphanumeric());
    if words.any(|w| w == rank.to_string() || w == hostname) {
        return true;
    }
    evidence_names_rank(&finding["evidence"], rank, hostname)
}

fn evidence_names_rank(v: &Value, rank: u64, hostname: &str) -> bool {
    match v {
        Value::String(s) => s == hostname,
        Value::Array(items) => items.iter().any(|i| evidence_names_rank(i, rank, hostname)),
        Value::Object(map) => map.iter().any(|(key, value)| {
            let rank_here = RANK_KEYS.contains(&key.as_str())
                && (as_rank(value) == Some(rank)
                    || value
                        .as_array()
                        .is_some_and(|a| a.iter().any(|x| as_rank(x) == Some(rank))));
            rank_here || key == &rank.to_string() || evidence_names_rank(value, rank, hostname)
        }),
        _ => false,
    }
}

fn failing<'a>(findings: &[&'a Value]) -> Vec<&'a Value> {
    findings
        .iter()
        .copied()
        .filter(|f| f["status"] == "fail")
        .collect()
}

/// The interface names an `*_SOCKET_IFNAME` value selects: comma items, `^` exclusions dropped,
/// the `=` exact-match marker stripped.
fn selected_ifnames(v: &Value) -> Vec<String> {
    v.as_str()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty() && !i.starts_with('^'))
        .map(|i| i.trim_start_matches('=').to_string())
        .collect()
}

/// The interface `NCCL_SOCKET_IFNAME` selects for `rank`: its `node_env` value, else `env`.
fn nccl_ifnames_for(rec: &Value, rank: usize) -> Vec<String> {
    let own = &rec["node_env"][rank.to_string()]["NCCL_SOCKET_IFNAME"];
    if own.is_string() {
        selected_ifnames(own)
    } else {
        selected_ifnames(&rec["env"]["NCCL_SOCKET_IFNAME"])
    }
}

fn gloo_ifnames_for(rec: &Value, rank: usize) -> Vec<String> {
    let own = &rec["node_env"][rank.to_string()]["GLOO_SOCKET_IFNAME"];
    if own.is_string() {
        selected_ifnames(own)
    } else {
        selected_ifnames(&rec["env"]["GLOO_SOCKET_IFNAME"])
    }
}

/// Every `*_SOCKET_IFNAME` value in `env` and every `node_env`.
fn all_ifname_values(rec: &Value) -> Vec<String> {
    let mut envs = vec![&rec["env"]];
    if let Some(per_node) = rec["node_env"].as_object() {
        envs.extend(per_node.values());
    }
    let keys = ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"];
    envs.iter()
        .flat_map(|env| keys.iter().flat_map(|k| selected_ifnames(&env[*k])))
        .collect()
}

/// Does `command` pass `--flag=value` / `--flag value` (dash or underscore spelling)?
fn has_flag(command: &str, flag: &str, value: &str) -> bool {
    let spellings = [flag.to_string(), flag.replace('-', "_")];
    let words: Vec<&str> = command.split_whitespace().collect();
    spellings.iter().any(|f| {
        let joined = format!("--{f}={value}");
        let split = format!("--{f}");
        words.iter().any(|w| w.trim_matches('\'') == joined)
            || words
                .windows(2)
                .any(|p| p[0] == split && p[1].trim_matches('\'') == value)
    })
}

fn launch_command(rec: &Value, rank: usize) -> String {
    let launch = rec["launch"].as_array().cloned().unwrap_or_default();
    let entry = launch
        .iter()
        .find(|l| as_rank(&l["node_rank"]) == Some(rank as u64));
    let entry = entry.unwrap_or_else(|| panic!("no launch command for rank {rank}: {rec:#}"));
    entry["command"].as_str().unwrap_or_default().to_string()
}

fn links_between(run: &NodeRun, from: usize, to: usize) -> Vec<&Value> {
    run.links()
        .into_iter()
        .filter(|l| {
            as_rank(&l["from"]) == Some(from as u64) && as_rank(&l["to"]) == Some(to as u64)
        })
        .collect()
}

fn assert_link_result(run: &NodeRun, from: usize, to: usize, result: &str) {
    let links = links_between(run, from, to);
    assert!(
        links.iter().any(|l| l["result"] == result),
        "no {result} link {from}->{to}; links {from}->{to}: {links:#?}\n{}",
        run.describe()
    );
}

/// Every link to `to` (from any other rank) has `result`, and there is at least one per peer.
fn assert_links_to(run: &NodeRun, to: usize, peers: &[usize], result: &str) {
    for &from in peers {
        let links = links_between(run, from, to);
        assert!(
            !links.is_empty(),
            "no link {from}->{to} measured:\n{}",
            run.describe()
        );
        for l in links {
            assert_eq!(
                l["result"], result,
                "link {from}->{to} should be {result}: {l:#}"
            );
        }
    }
}

fn ordered_pairs(n: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..n).flat_map(move |a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)))
}

// ------------------------------------------------------------- helpers over process outcomes

fn assert_exit(run: &NodeRun, code: i32) {
    assert!(
        !run.timed_out,
        "hung past the deadline:\n{}",
        run.describe()
    );
    assert_eq!(
        run.exit_code,
        Some(code),
        "wrong exit code:\n{}",
        run.describe()
    );
}

/// Finished on its own, non-zero, within `--timeout` + `SLACK`.
fn assert_gave_up_in_time(run: &NodeRun, timeout_s: u64) {
    assert!(
        !run.timed_out,
        "hung past the deadline:\n{}",
        run.describe()
    );
    assert!(
        matches!(run.exit_code, Some(c) if c != 0),
        "should exit non-zero:\n{}",
        run.describe()
    );
    let limit = Duration::from_secs(timeout_s) + SLACK;
    assert!(
        run.elapsed <= limit,
        "took {:.1?}, more than --timeout={timeout_s} + {SLACK:?}:\n{}",
        run.elapsed,
        run.describe()
    );
}

/// Every node printed the full cluster report: mode cluster, one node entry per started rank.
fn assert_full_report(run: &NodeRun, cluster: &Cluster, ranks: &[usize]) {
    let report = run.report();
    assert_eq!(report["mode"], "cluster", "{}", run.describe());
    let nodes = report["nodes"].as_array().cloned().unwrap_or_default();
    for &rank in ranks {
        let entry = nodes
            .iter()
            .find(|n| as_rank(&n["rank"]) == Some(rank as u64));
        let entry = entry.unwrap_or_else(|| panic!("rank {rank} missing from nodes[]: {report:#}"));
        assert_eq!(
            entry["hostname"],
            cluster.hostname(rank),
            "rank {rank}'s hostname"
        );
    }
}

fn finding_text(f: &Value) -> String {
    format!("{} {}", text(&f["summary"]), text(&f["evidence"]))
}

fn fix_text(f: &Value) -> String {
    text(&f["fix"])
}

// ---------------------------------------------------------------------------------- scenarios

#[test]
fn three_healthy_nodes() {
    let Some(c) = Cluster::flat("healthy", 3, "ens5").build() else {
        return;
    };
    let runs = c
        .preflight()
        .timeout(HEALTHY_TIMEOUT)
        .script(&["train.py", "--epochs", "1"])
        .run();
    for run in &runs {
        assert_exit(run, 0);
        assert_full_report(run, &c, &[0, 1, 2]);
        let status = &run.report()["status"];
        assert!(status != "fail" && status != "error", "status {status}");
        assert!(failing(&run.findings("cluster.rendezvous")).is_empty());
        assert!(failing(&run.findings("cluster.duplicate-host")).is_empty());
    }
    let r0 = node(&runs, 0);
    for (a, b) in ordered_pairs(3) {
        assert_link_result(r0, a, b, "ok");
    }
    let rec = r0.recommendation();
    assert_eq!(
        selected_ifnames(&rec["env"]["NCCL_SOCKET_IFNAME"]),
        ["ens5"],
        "{rec:#}"
    );
    assert_eq!(rec["env"]["GLOO_SOCKET_IFNAME"], "ens5", "{rec:#}");
    assert_eq!(rec["master_addr"], c.addr(0, "data"), "{rec:#}");
    assert_eq!(rec["master_port"], MASTER_PORT, "{rec:#}");
    let launch = rec["launch"].as_array().cloned().unwrap_or_default();
    assert_eq!(launch.len(), 3, "{rec:#}");
    for rank in 0..3 {
        let cmd = launch_command(rec, rank);
        assert!(has_flag(&cmd, "node-rank", &rank.to_string()), "{cmd}");
        assert!(has_flag(&cmd, "nnodes", "3"), "{cmd}");
        assert!(has_flag(&cmd, "master-addr", &c.addr(0, "data")), "{cmd}");
        assert!(
            cmd.contains("train.py --epochs 1"),
            "script words missing: {cmd}"
        );
    }
}

#[test]
fn master_port_dropped_gives_timeout_not_hang() {
    let Some(c) = Cluster::flat("mdrop", 3, "eth0")
        .needs(&["iptables"])
        .build()
    else {
        return;
    };
    c.block_port(0, MASTER_PORT, Verdict::Drop);
    let runs = c.preflight().timeout(FAULT_TIMEOUT).run();
    for rank in [1, 2] {
        let run = node(&runs, rank);
        assert_gave_up_in_time(run, FAULT_TIMEOUT);
        assert_eq!(run.exit_code, Some(1), "{}", run.describe());
        let mut failed = failing(&run.findings("cluster.rendezvous"));
        failed.extend(failing(&run.findings("link.unreachable")));
        let timeout = failed.iter().find(|f| {
            let t = finding_text(f);
            t.contains("timeout") || t.contains("timed out")
        });
        let timeout = timeout.unwrap_or_else(|| {
            panic!(
                "rank {rank}: no fail finding saying timeout:\n{}",
                run.describe()
            )
        });
        assert!(
            fix_text(timeout).contains(&MASTER_PORT.to_string()),
            "fix does not mention port {MASTER_PORT}: {timeout:#}"
        );
    }
    let r0 = node(&runs, 0);
    assert_gave_up_in_time(r0, FAULT_TIMEOUT);
    let missing = failing(&r0.findings("cluster.rendezvous"));
    for rank in [1, 2] {
        assert!(
            missing
                .iter()
                .any(|f| names_rank(f, rank, c.hostname(rank as usize))),
            "rank 0's cluster.rendezvous does not name rank {rank}:\n{}",
            r0.describe()
        );
    }
}

#[test]
fn high_ports_dropped_on_rank2_times_out_links_to_it() {
    let Some(c) = Cluster::flat("hdrop", 3, "eth0")
        .needs(&["iptables"])
        .build()
    else {
        return;
    };
    c.block_high_ports(2, MASTER_PORT, Verdict::Drop);
    let runs = c.preflight().timeout(FAULT_TIMEOUT).run();
    assert_unreachable_rank2(&c, &runs, "timeout");
}

#[test]
fn high_ports_rejected_with_reset_on_rank2_are_refused() {
    rejected_high_ports_are_refused("hreset", Verdict::RejectTcpReset);
}

#[test]
fn high_ports_rejected_with_icmp_on_rank2_are_refused() {
    rejected_high_ports_are_refused("hicmp", Verdict::RejectPortUnreachable);
}

fn rejected_high_ports_are_refused(tag: &str, verdict: Verdict) {
    let Some(c) = Cluster::flat(tag, 3, "eth0").needs(&["iptables"]).build() else {
        return;
    };
    c.block_high_ports(2, MASTER_PORT, verdict);
    let runs = c.preflight().timeout(FAULT_TIMEOUT).run();
    assert_unreachable_rank2(&c, &runs, "refused");
}

/// Everyone joined, links into rank 2 all have `result`, `link.unreachable` fails naming rank 2.
fn assert_unreachable_rank2(c: &Cluster, runs: &[NodeRun], result: &str) {
    for run in runs {
        assert_exit(run, 1);
        assert_full_report(run, c, &[0, 1, 2]);
    }
    let r0 = node(runs, 0);
    assert_links_to(r0, 2, &[0, 1], result);
    assert_link_result(r0, 0, 1, "ok");
    assert_link_result(r0, 1, 0, "ok");
    let unreachable = failing(&r0.findings("link.unreachable"));
    assert!(
        unreachable.iter().any(|f| names_rank(f, 2, c.hostname(2))),
        "no link.unreachable fail naming rank 2:\n{}",
        r0.describe()
    );
    assert!(
        unreachable.iter().any(|f| finding_text(f).contains(result)),
        "link.unreachable does not say {result}: {unreachable:#?}"
    );
}

#[test]
fn master_port_held_by_leftover_process() {
    let Some(c) = Cluster::flat("held", 3, "eth0").needs(&["python3"]).build() else {
        return;
    };
    let holder = c.hold_port(0, MASTER_PORT);
    let runs = c.preflight().timeout(FAULT_TIMEOUT).run();
    let r0 = node(&runs, 0);
    assert_gave_up_in_time(r0, FAULT_TIMEOUT);
    let in_use = failing(&r0.findings("port.in-use"));
    let names_holder = in_use.iter().any(|f| {
        let holders = f["evidence"]["holders"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        holders
            .iter()
            .any(|h| h["pid"].as_u64() == Some(u64::from(holder)))
    });
    assert!(
        names_holder,
        "no port.in-use fail with holder pid {holder}:\n{}",
        r0.describe()
    );
    for rank in [1, 2] {
        assert_gave_up_in_time(node(&runs, rank), FAULT_TIMEOUT);
    }
}

#[test]
fn slow_management_network_loses_to_fast_data_network() {
    let built = Cluster::new("slow")
        .network(Net::new("mgmt", 1).rate("100mbit"))
        .network(Net::new("data", 2));
    let built = (0..3).fold(built, |b, i| {
        b.host(
            Host::new(&format!("node{i}"))
                .on("mgmt", "eno1")
                .on("data", "ens2f0"),
        )
    });
    let Some(c) = built.build() else {
        return;
    };
    // Launched the usual way: the master address is rank 0's management address.
    let runs = c
        .preflight()
        .timeout(HEALTHY_TIMEOUT)
        .master_net("mgmt")
        .run();
    for run in &runs {
        assert_exit(run, 0);
    }
    let rec = node(&runs, 0).recommendation();
    for rank in 0..3 {
        assert_eq!(
            nccl_ifnames_for(rec, rank),
            ["ens2f0"],
            "rank {rank}: {rec:#}"
        );
    }
    assert_eq!(rec["master_addr"], c.addr(0, "data"), "{rec:#}");
    let reasons = rec["reasons"].as_array().cloned().unwrap_or_default();
    let cites_speed = reasons.iter().any(|r| {
        let r = text(r);
        ["throughput", "gbit", "mbit", "slow", "eno1"]
            .iter()
            .any(|w| r.contains(w))
    });
    assert!(
        cites_speed,
        "no reason mentions throughput or the slow network: {reasons:#?}"
    );
}

#[test]
fn interface_names_differ_per_node() {
    let Some(c) = Cluster::new("names")
        .network(Net::new("data", 1))
        .host(Host::new("node0").on("data", "bond0"))
        .host(Host::new("node1").on("data", "bond0"))
        .host(Host::new("node2").on("data", "eno1"))
        .build()
    else {
        return;
    };
    let runs = c
        .preflight()
        .timeout(HEALTHY_TIMEOUT)
        .script(&["train.py"])
        .run();
    for run in &runs {
        assert_exit(run, 0);
    }
    let rec = node(&runs, 0).recommendation();
    for (rank, other) in [(0, "eno1"), (1, "eno1"), (2, "bond0")] {
        let own = c.ifname(rank, "data");
        let env = &rec["node_env"][rank.to_string()];
        assert_eq!(
            selected_ifnames(&env["NCCL_SOCKET_IFNAME"]),
            [own],
            "{rec:#}"
        );
        assert_eq!(env["GLOO_SOCKET_IFNAME"], own, "{rec:#}");
        let cmd = launch_command(rec, rank);
        assert!(
            cmd.contains(own) && !cmd.contains(other),
            "rank {rank}: {cmd}"
        );
    }
}

#[test]
fn docker0_on_every_node_is_never_chosen() {
    let built = Cluster::new("docker").network(Net::new("data", 1));
    let built = (0..3).fold(built, |b, i| {
        b.host(Host::new(&format!("node{i}")).on("data", "eth0").docker0())
    });
    let Some(c) = built.build() else {
        return;
    };
    let runs = c.preflight().timeout(HEALTHY_TIMEOUT).run();
    for run in &runs {
        // docker0 on every node is the normal case, not a failure.
        assert_exit(run, 0);
    }
    let rec = node(&runs, 0).recommendation();
    let chosen = all_ifname_values(rec);
    assert!(
        chosen.iter().all(|i| !i.starts_with("docker")),
        "docker0 chosen: {rec:#}"
    );
    for rank in 0..3 {
        assert_eq!(
            nccl_ifnames_for(rec, rank),
            ["eth0"],
            "rank {rank}: {rec:#}"
        );
        assert_eq!(
            gloo_ifnames_for(rec, rank),
            ["eth0"],
            "rank {rank}: {rec:#}"
        );
    }
    assert_ne!(rec["master_addr"], "10.200.255.1", "{rec:#}");
}

#[test]
fn jumbo_mtu_on_one_node_is_an_mtu_mismatch() {
    let Some(c) = Cluster::new("mtu")
        .network(Net::new("data", 1).mtu(1500))
        .host(Host::new("node0").on("data", "eth0"))
        .host(Host::new("node1").on("data", "eth0").mtu("data", 9000))
        .host(Host::new("node2").on("data", "eth0"))
        .build()
    else {
        return;
    };
    let runs = c.preflight().timeout(HEALTHY_TIMEOUT).run();
    for run in &runs {
        // A warning only: exit 0 without --strict.
        assert_exit(run, 0);
    }
    let r0 = node(&runs, 0);
    let mismatch: Vec<_> = r0
        .findings("link.mtu-mismatch")
        .into_iter()
        .filter(|f| f["status"] == "warn")
        .collect();
    assert!(
        !mismatch.is_empty(),
        "no link.mtu-mismatch warn:\n{}",
        r0.describe()
    );
    assert!(
        mismatch.iter().any(|f| {
            let t = finding_text(f);
            t.contains("9000") && t.contains("1500") && names_rank(f, 1, c.hostname(1))
        }),
        "link.mtu-mismatch does not show node1's 9000 against 1500: {mismatch:#?}"
    );
}

#[test]
fn node_that_never_starts_is_named() {
    let Some(c) = Cluster::flat("absent", 3, "eth0").build() else {
        return;
    };
    let runs = c.preflight().timeout(FAULT_TIMEOUT).ranks(&[0, 1]).run();
    for run in &runs {
        assert_gave_up_in_time(run, FAULT_TIMEOUT);
        assert_eq!(run.exit_code, Some(1), "{}", run.describe());
        let missing = failing(&run.findings("cluster.rendezvous"));
        assert!(
            missing.iter().any(|f| names_rank(f, 2, c.hostname(2))),
            "rank {}: no cluster.rendezvous fail naming rank 2:\n{}",
            run.rank,
            run.describe()
        );
        assert_full_report(run, &c, &[0, 1]);
    }
}

#[test]
fn node_killed_mid_test_does_not_hang_the_others() {
    let Some(c) = Cluster::flat("killed", 3, "eth0").build() else {
        return;
    };
    let timeout = 8;
    let started = Instant::now();
    let mut running = c
        .preflight()
        .timeout(timeout)
        .thorough()
        .args(&["--sizes=1M:4M"])
        .deadline(Duration::from_secs(4 * timeout + 30))
        .start();
    // Kill rank 2 once it says it joined (or after 3 s), while --thorough measurements run.
    running.wait_stderr(2, "join", Duration::from_secs(3));
    thread::sleep(Duration::from_millis(500));
    running.kill(2);
    let runs = running.finish();
    println!(
        "killed rank 2 after joining; others done in {:.1?}",
        started.elapsed()
    );
    for rank in [0, 1] {
        let run = node(&runs, rank);
        assert!(!run.timed_out, "hung:\n{}", run.describe());
        assert!(
            matches!(run.exit_code, Some(0 | 1)),
            "expected a report and exit 0 or 1:\n{}",
            run.describe()
        );
        assert_full_report(run, &c, &[0, 1]);
        let all = run.report()["findings"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let blames_rank2 = all
            .iter()
            .any(|f| f["status"] == "fail" && names_rank(f, 2, c.hostname(2)));
        assert!(
            blames_rank2,
            "no fail finding names the killed rank 2:\n{}",
            run.describe()
        );
        let limit = Duration::from_secs(3 * timeout) + SLACK;
        assert!(
            run.elapsed <= limit,
            "took {:.1?}:\n{}",
            run.elapsed,
            run.describe()
        );
    }
}

#[test]
fn eight_nodes_healthy() {
    let Some(c) = Cluster::flat("eight", 8, "eth0").build() else {
        return;
    };
    let started = Instant::now();
    let runs = c.run_preflight_all(30, &[]);
    let slowest = runs.iter().map(|r| r.elapsed).max().unwrap_or_default();
    println!(
        "eight_nodes_healthy: {:.1?} wall, slowest node {slowest:.1?}",
        started.elapsed()
    );
    for run in &runs {
        assert_exit(run, 0);
    }
    let r0 = node(&runs, 0);
    assert_full_report(r0, &c, &(0..8).collect::<Vec<_>>());
    for (a, b) in ordered_pairs(8) {
        assert_link_result(r0, a, b, "ok");
    }
    let rec = r0.recommendation();
    assert_eq!(
        selected_ifnames(&rec["env"]["NCCL_SOCKET_IFNAME"]),
        ["eth0"],
        "{rec:#}"
    );
}
