//! The cause of a failed join, said on the node where it happens (namespaces, real processes):
//! a rank given its own address as the master, another `--rdzv-id`, another `--nnodes`, a stale
//! /etc/hosts entry for the master's name, and a node that fails with every peer.
//!
//! Expected run time per test (2 cores): the master-is-itself runs 3-4 s each, the others about
//! `--timeout` + 1-3 s.

use crate::netns::{Cluster, MASTER_PORT, NodeRun, SLACK, Verdict, node};
use serde_json::Value;
use std::time::Duration;

/// `--timeout` for runs where a node never joins: the time rank 0 gives up within.
const FAULT_TIMEOUT: u64 = 5;

fn failing<'a>(run: &'a NodeRun, id: &str) -> Vec<&'a Value> {
    run.findings(id)
        .into_iter()
        .filter(|f| f["status"] == "fail")
        .collect()
}

fn one_failing<'a>(run: &'a NodeRun, id: &str) -> &'a Value {
    let v = failing(run, id);
    assert_eq!(v.len(), 1, "expected one failing {id}:\n{}", run.describe());
    v[0]
}

fn summary(f: &Value) -> &str {
    f["summary"].as_str().unwrap_or_default()
}

fn within(run: &NodeRun, limit: Duration) {
    assert!(
        !run.timed_out && run.elapsed <= limit,
        "took {:.1?}, more than {limit:?}:\n{}",
        run.elapsed,
        run.describe()
    );
}

#[test]
fn a_rank_given_its_own_address_as_master_says_so_within_seconds() {
    let Some(c) = Cluster::flat("mself", 2, "eth0").build() else {
        return;
    };
    let own = c.addr(1, "data");
    // Only rank 1 runs (rank 0 is elsewhere); --timeout is 30 s, the answer must come in a few.
    let runs = c
        .preflight()
        .ranks(&[1])
        .master_host(&own)
        .timeout(30)
        .run();
    let r1 = node(&runs, 1);
    within(r1, Duration::from_secs(8));
    assert_eq!(r1.exit_code, Some(1), "{}", r1.describe());
    let f = one_failing(r1, "cluster.rendezvous");
    assert_eq!(f["node"], 1);
    assert_eq!(f["evidence"]["cause"], "master-is-self");
    assert_eq!(f["evidence"]["resolved"][0], own.as_str());
    assert!(
        summary(f).contains(&format!(
            "rank 1 was given its own address {own} as the master address"
        )),
        "{}",
        summary(f)
    );
    assert!(
        summary(f).contains("cannot know rank 0's address"),
        "{}",
        summary(f)
    );
    assert!(!summary(f).contains("connection refused"), "{}", summary(f));

    // With the host list, rank 1 knows rank 0's address and says it.
    let runs = c
        .preflight()
        .ranks(&[1])
        .master_host(&own)
        .timeout(30)
        .args(&["--hosts=node0,node1"])
        .run();
    let r1 = node(&runs, 1);
    within(r1, Duration::from_secs(8));
    let f = one_failing(r1, "cluster.rendezvous");
    let rank0 = c.addr(0, "data");
    assert!(
        summary(f).contains(&format!("rank 0's address is {rank0} (node0)")),
        "{}",
        summary(f)
    );
    assert_eq!(f["evidence"]["rank0_addresses"][0], rank0.as_str());
}

#[test]
fn a_node_with_another_rdzv_id_is_refused_and_says_the_secret_differs() {
    let Some(c) = Cluster::flat("rdzvid", 3, "eth0").build() else {
        return;
    };
    let runs = c
        .preflight()
        .no_token()
        .timeout(FAULT_TIMEOUT)
        .args_on(0, &["--rdzv-id=jobA"])
        .args_on(1, &["--rdzv-id=jobA"])
        .args_on(2, &["--rdzv-id=jobB"])
        .run();
    let r0 = node(&runs, 0);
    within(r0, Duration::from_secs(FAULT_TIMEOUT) + SLACK);
    let refused = one_failing(r0, "cluster.refused");
    assert_eq!(refused["evidence"]["address"], c.addr(2, "data").as_str());
    assert_eq!(refused["evidence"]["claimed_rank"], 2);
    assert_eq!(refused["evidence"]["kind"], "secret");
    let rdzv = one_failing(r0, "cluster.rendezvous");
    assert!(summary(rdzv).contains("was refused"), "{}", summary(rdzv));
    assert!(
        summary(rdzv).contains("see cluster.refused"),
        "{}",
        summary(rdzv)
    );
    assert!(!summary(rdzv).contains("never joined"), "{}", summary(rdzv));
    assert!(!summary(rdzv).contains("unknown host"), "{}", summary(rdzv));

    let r2 = node(&runs, 2);
    within(r2, Duration::from_secs(4));
    let own = one_failing(r2, "cluster.refused");
    assert_eq!(own["node"], 2);
    assert!(
        summary(own).contains("the secret differs"),
        "{}",
        summary(own)
    );
    assert!(summary(own).contains("--rdzv-id=jobB"), "{}", summary(own));
}

#[test]
fn a_node_with_another_nnodes_is_refused_and_says_both_counts() {
    let Some(c) = Cluster::flat("nnodes", 3, "eth0").build() else {
        return;
    };
    let runs = c.preflight().timeout(FAULT_TIMEOUT).nnodes_on(2, 4).run();
    let r0 = node(&runs, 0);
    within(r0, Duration::from_secs(FAULT_TIMEOUT) + SLACK);
    let refused = one_failing(r0, "cluster.refused");
    assert_eq!(refused["evidence"]["address"], c.addr(2, "data").as_str());
    assert_eq!(refused["evidence"]["claimed_rank"], 2);
    assert_eq!(refused["evidence"]["kind"], "nnodes");
    assert!(
        summary(refused).contains("rank 0 expects 3 nodes; rank 2 was started with --nnodes=4"),
        "{}",
        summary(refused)
    );
    let rdzv = one_failing(r0, "cluster.rendezvous");
    assert!(summary(rdzv).contains("was refused"), "{}", summary(rdzv));
    assert!(!summary(rdzv).contains("unknown host"), "{}", summary(rdzv));

    let r2 = node(&runs, 2);
    within(r2, Duration::from_secs(4));
    let own = one_failing(r2, "cluster.refused");
    assert!(
        summary(own).contains("rank 0 expects 3 nodes; rank 2 was started with --nnodes=4"),
        "{}",
        summary(own)
    );
}

#[test]
fn a_stale_hosts_entry_for_the_master_is_named_where_it_resolves() {
    let Some(c) = Cluster::flat("stale", 3, "eth0").build() else {
        return;
    };
    // node0 answers on a second address too; node1 knows it by that one, node2 by a dead one.
    let added = c.exec(0, &["ip", "addr", "add", "10.200.1.101/24", "dev", "eth0"]);
    assert!(added.status.success(), "{added:?}");
    c.map_host(1, "node0", "10.200.1.101");
    c.map_host(2, "node0", "10.200.1.9");
    let runs = c
        .preflight()
        .master_host("node0")
        .timeout(FAULT_TIMEOUT)
        .run();
    let r2 = node(&runs, 2);
    within(r2, Duration::from_secs(FAULT_TIMEOUT) + SLACK);
    let f = one_failing(r2, "cluster.rendezvous");
    assert_eq!(f["evidence"]["resolved"], serde_json::json!(["10.200.1.9"]));
    assert_eq!(
        f["evidence"]["tried"],
        serde_json::json!([format!("10.200.1.9:{MASTER_PORT}")])
    );
    assert!(
        summary(f).contains("node0 resolved to 10.200.1.9 on this node (tried 10.200.1.9:29500)"),
        "{}",
        summary(f)
    );
    assert!(summary(f).contains("getent hosts node0"), "{}", summary(f));

    // Ranks 0 and 1 joined, through different answers for node0: rank 0 warns with both.
    let r0 = node(&runs, 0);
    within(r0, Duration::from_secs(FAULT_TIMEOUT) + SLACK);
    let res = r0.findings("cluster.master-resolution");
    assert_eq!(res.len(), 1, "{}", r0.describe());
    let res = res[0];
    assert_eq!(res["status"], "warn", "{res:#?}");
    assert_eq!(res["evidence"]["resolved"]["0"][0], "10.200.1.1");
    assert_eq!(res["evidence"]["resolved"]["1"][0], "10.200.1.101");
    assert!(
        summary(res).contains("rank 1: node0 -> 10.200.1.101"),
        "{}",
        summary(res)
    );
    let cmds = res["fix"]["commands"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(cmds.iter().any(|c| c == "getent hosts node0"), "{res:#?}");
}

#[test]
fn a_node_failing_with_every_peer_is_one_finding_on_that_node() {
    let Some(c) = Cluster::flat("everyp", 4, "eth0")
        .needs(&["iptables"])
        .build()
    else {
        return;
    };
    c.block_high_ports(2, MASTER_PORT, Verdict::Drop);
    let runs = c.preflight().timeout(FAULT_TIMEOUT).run();
    let r0 = node(&runs, 0);
    within(r0, Duration::from_secs(2 * FAULT_TIMEOUT) + SLACK);
    let links: Vec<&Value> = r0.findings("link.unreachable");
    assert_eq!(links.len(), 1, "{links:#?}");
    let f = links[0];
    assert_eq!(f["status"], "fail");
    assert_eq!(f["node"], 2);
    assert_eq!(f["evidence"]["cause"], "firewall");
    assert!(
        summary(f).contains("rank 2 (node2) fails with every peer"),
        "{}",
        summary(f)
    );
    assert!(summary(f).contains("timeout"), "{}", summary(f));
    assert_eq!(f["evidence"]["inbound"].as_array().map(Vec::len), Some(3));
}
