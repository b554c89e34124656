//! Connections that die when idle (namespaces, real processes): two nodes on two subnets whose router forgets silent connections after a few seconds and drops what it no longer knows; `--idle-test` longer than that names `link.idle-timeout` on the pair, a shorter one passes; a node whose own conntrack forgets them is named as the cause; a ring of three holds its successors only.

use crate::netns::{Cluster, Host, Net, NodeRun, node};
use serde_json::{Value, json};
use std::time::Duration;

/// The router's established-connection timeout, in seconds.
const FORGETS_AFTER_S: u32 = 4;

fn idle_findings(run: &NodeRun) -> Vec<&Value> {
    run.findings("link.idle-timeout")
}

fn summary(f: &Value) -> &str {
    f["summary"].as_str().unwrap_or_default()
}

#[test]
fn a_router_that_forgets_idle_connections_is_named_and_a_shorter_silence_passes() {
    let Some(c) = Cluster::new("idle")
        .network(Net::new("rackA", 62))
        .network(Net::new("rackB", 63))
        .router(&["rackA", "rackB"])
        .host(Host::new("a0").on("rackA", "eth1"))
        .host(Host::new("b0").on("rackB", "eth1"))
        .needs(&["sysctl", "iptables"])
        .build()
    else {
        return;
    };
    c.forget_idle_on_router(0, FORGETS_AFTER_S);

    // The control: a silence shorter than the router's timeout passes.
    let runs = c.preflight().args(&["--idle-test=2"]).run();
    for r in &runs {
        assert_eq!(r.exit_code, Some(0), "{}", r.describe());
        assert!(r.elapsed < Duration::from_secs(25), "{}", r.describe());
    }
    let r0 = node(&runs, 0);
    let f = idle_findings(r0);
    assert_eq!(f.len(), 1, "{}", r0.describe());
    assert_eq!(f[0]["status"], "pass", "{}", f[0]);
    assert_eq!(f[0]["evidence"]["held"], 4, "{}", f[0]);
    eprintln!("control: {}", summary(f[0]));

    // Longer than the router's timeout: every held connection dies, and the control
    // connections (kept alive) and everything else still work.
    let idle_s = 8;
    let runs = c
        .preflight()
        .args(&[&format!("--idle-test={idle_s}")])
        .run();
    for r in &runs {
        assert_eq!(r.exit_code, Some(1), "{}", r.describe());
        // The silence, the answer wait (5 s) and the run's own few seconds: bounded.
        assert!(
            r.elapsed < Duration::from_secs(idle_s + 5 + 20),
            "took {:?}: {}",
            r.elapsed,
            r.describe()
        );
    }
    let r0 = node(&runs, 0);
    assert_eq!(
        r0.findings("cluster.rendezvous")[0]["status"],
        "pass",
        "{}",
        r0.describe()
    );
    assert_eq!(r0.findings("link.unreachable")[0]["status"], "pass");
    let mut found: Vec<&Value> = idle_findings(r0);
    found.sort_by_key(|f| f["subject"].as_str().unwrap_or_default().to_string());
    let subjects: Vec<&str> = found.iter().filter_map(|f| f["subject"].as_str()).collect();
    assert_eq!(subjects, ["0->1 eth1", "1->0 eth1"], "{}", r0.describe());
    let f = found[0];
    assert_eq!(f["status"], "fail");
    let text = summary(f);
    eprintln!("{text}");
    for part in [
        format!("rank 0 (a0) -> rank 1 (b0) at {} (eth1", c.addr(1, "rackB")),
        "2 connections carried data when opened, and after ".to_string(),
        " s of silence 2 of them no longer did".to_string(),
        "no answer within 5.0 s".to_string(),
        "a stateful firewall or NAT between the nodes drops idle connections".to_string(),
    ] {
        assert!(text.contains(&part), "{part}: {text}");
    }
    let e = &f["evidence"];
    assert_eq!(e["outcome"], "no_answer", "{e}");
    let silent = e["silent_s"].as_f64().unwrap_or_default();
    assert!(
        silent >= idle_s as f64 && silent < idle_s as f64 + 15.0,
        "{e}"
    );
    // Each node's own conntrack keeps connections for the kernel's 5 days: not the cause.
    assert_eq!(
        e["conntrack_established_s"],
        json!({"0": 432000, "1": 432000}),
        "{e}"
    );
    assert_eq!(
        f["fix"]["commands"],
        json!(["sysctl -w net.netfilter.nf_conntrack_tcp_timeout_established=432000"])
    );
    // What a person reads: the terminal report of rank 0's JSON, and its JUnit, name it too.
    let saved = c.host_tmp(0).join("idle-report.json");
    std::fs::write(&saved, &r0.stdout).expect("save the report");
    let render = |format: &str| {
        let out = crate::common::bin()
            .args(["render", "--format", format])
            .arg(&saved)
            .env("COLUMNS", "100")
            .env("NO_COLOR", "1")
            .output()
            .expect("preflight render");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let table = render("table");
    println!("{table}");
    assert!(table.contains("link.idle-timeout"), "{table}");
    assert!(
        table.contains("nf_conntrack_tcp_timeout_established=432000"),
        "{table}"
    );
    let junit = render("junit");
    assert!(
        junit.contains("link.idle-timeout") && junit.contains("<failure"),
        "{junit}"
    );
    // A path problem: no node is excluded for it.
    let excluded = &r0.report()["recommendation"]["healthy_set"]["excluded"];
    assert!(
        excluded.as_array().is_none_or(|x| x.is_empty()),
        "{excluded}"
    );
}

/// On a flat network of three, each node holds its connections to its ring successor only
/// (0 -> 1 -> 2 -> 0: one target per node whatever the size), and all of them pass.
#[test]
fn three_nodes_hold_their_ring_successor_only_and_pass() {
    let Some(c) = Cluster::flat("idle3", 3, "eth0").build() else {
        return;
    };
    let runs = c.preflight().args(&["--idle-test=2"]).run();
    for r in &runs {
        assert_eq!(r.exit_code, Some(0), "{}", r.describe());
    }
    let r0 = node(&runs, 0);
    let f = idle_findings(r0);
    assert_eq!(f.len(), 1, "{}", r0.describe());
    assert_eq!(f[0]["status"], "pass", "{}", f[0]);
    assert_eq!(f[0]["evidence"]["held"], 6, "{}", f[0]);
    let nodes = r0.report()["nodes"].as_array().cloned().unwrap_or_default();
    let mut held: Vec<(u64, u64, u64)> = nodes
        .iter()
        .flat_map(|n| {
            n["facts"]["idle_test"]["links"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|l| {
            (
                l["from"].as_u64().unwrap_or(99),
                l["to"].as_u64().unwrap_or(99),
                l["answered"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    held.sort();
    assert_eq!(held, [(0, 1, 2), (1, 2, 2), (2, 0, 2)], "{}", r0.describe());
}

/// A node's own firewall forgets idle connections (its conntrack timeout set to 4 s, loose
/// pickup off, INVALID dropped on input): the finding names that node's timeout as the cause
/// and the fix is on that node.
#[test]
fn a_nodes_own_short_conntrack_timeout_is_named_as_the_cause() {
    let Some(c) = Cluster::flat("idleown", 2, "eth0")
        .needs(&["sysctl", "iptables"])
        .build()
    else {
        return;
    };
    c.iptables(
        1,
        &[
            "-A",
            "INPUT",
            "-m",
            "conntrack",
            "--ctstate",
            "INVALID",
            "-j",
            "DROP",
        ],
    );
    let timeout = format!("net.netfilter.nf_conntrack_tcp_timeout_established={FORGETS_AFTER_S}");
    let out = c.exec(
        1,
        &[
            "sysctl",
            "-w",
            "net.netfilter.nf_conntrack_tcp_loose=0",
            &timeout,
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let runs = c.preflight().args(&["--idle-test=8"]).run();
    let r0 = node(&runs, 0);
    assert_eq!(r0.exit_code, Some(1), "{}", r0.describe());
    let found: Vec<&Value> = idle_findings(r0)
        .into_iter()
        .filter(|f| f["status"] == "fail")
        .collect();
    assert!(!found.is_empty(), "{}", r0.describe());
    for f in found {
        let text = summary(f);
        eprintln!("{text}");
        assert!(
            text.contains(&format!(
                "rank 1 (node1)'s own nf_conntrack_tcp_timeout_established is {FORGETS_AFTER_S} s"
            )),
            "{text}"
        );
        let hint = f["fix"]["hint"].as_str().unwrap_or_default();
        assert!(hint.contains("on rank 1 (node1)"), "{hint}");
        assert_eq!(
            f["evidence"]["conntrack_established_s"]["1"], FORGETS_AFTER_S,
            "{f}"
        );
    }
}
