//! Clusters that are not one flat subnet: racks behind a router, /32 cloud addresses, an IPv6-only data network, a dead data NIC on one node.
//!
//! Real `preflight cluster` processes in network namespaces (see `netns.rs`). Each test checks
//! the network the advice chose, the finding ids and the time the run took.

use crate::netns::{Cluster, Host, Net, NodeRun};
use serde_json::Value;
use std::time::{Duration, Instant};

/// `--timeout` for runs expected to succeed: an upper bound, they finish sooner.
const TIMEOUT: u64 = 15;
/// A healthy run on these few nodes finishes well within this.
const HEALTHY_WITHIN: Duration = Duration::from_secs(12);

/// Runs every node and checks each exited with `code` within `within`; returns the runs.
fn run_all(cluster: &Cluster, extra: &[&str], code: i32, within: Duration) -> Vec<NodeRun> {
    let started = Instant::now();
    let runs = cluster.preflight().timeout(TIMEOUT).args(extra).run();
    for r in &runs {
        assert_eq!(r.exit_code, Some(code), "{}", r.describe());
        assert!(r.elapsed < within, "took {:?}: {}", r.elapsed, r.describe());
    }
    eprintln!("wall time: {:.1?}", started.elapsed());
    runs
}

fn statuses<'a>(run: &'a NodeRun, id: &str) -> Vec<&'a str> {
    run.findings(id)
        .iter()
        .filter_map(|f| f["status"].as_str())
        .collect()
}

/// "id status: summary" of every finding that is not a pass or skip.
fn problems(run: &NodeRun) -> String {
    run.report()["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["status"] != "pass" && f["status"] != "skip")
        .map(|f| format!("{} {}: {}", f["id"], f["status"], f["summary"]))
        .collect::<Vec<_>>()
        .join("\n")
}

fn reasons(run: &NodeRun) -> String {
    run.recommendation()["reasons"].to_string()
}

/// Each host alone on its own /24 (or /32) behind one router, with interface eth1.
fn racks_per_node(tag: &str, n: usize, slash32: bool) -> Option<Cluster> {
    let nets: Vec<String> = (0..n).map(|i| format!("rack{i}")).collect();
    let refs: Vec<&str> = nets.iter().map(String::as_str).collect();
    let mut b = Cluster::new(tag).router(&refs);
    for (i, net) in nets.iter().enumerate() {
        b = b.network(Net::new(net, 10 + i as u8));
        let host = Host::new(&format!("node{i}"));
        b = b.host(if slash32 {
            host.on_slash32(net, "eth1")
        } else {
            host.on(net, "eth1")
        });
    }
    b.needs(&["sysctl"]).build()
}

fn assert_routed_choice(runs: &[NodeRun], cluster: &Cluster, subnets: usize) {
    let r0 = &runs[0];
    let rec = r0.recommendation();
    assert_eq!(rec["env"]["NCCL_SOCKET_IFNAME"], "eth1", "{rec:#}");
    assert_eq!(rec["env"]["GLOO_SOCKET_IFNAME"], "eth1");
    assert_eq!(rec["master_addr"], Value::from(cluster.addr(0, "rack0")));
    assert_eq!(statuses(r0, "link.unreachable"), vec!["pass"]);
    let id = format!("eth1 across {subnets} subnets");
    assert!(reasons(r0).contains(&id), "{}", reasons(r0));
    let ok = r0
        .links()
        .iter()
        .filter(|l| l["result"] == "ok" && l["throughput_gbit_s"].as_f64().is_some())
        .count();
    let n = cluster.len();
    assert!(ok >= n * (n - 1), "every pair measured: {ok}");
    assert_ne!(r0.report()["status"], "fail", "{}", problems(r0));
}

/// Three nodes, each on its own subnet behind a router, pass with eth1 chosen across the subnets.
fn three_routed_racks_pass(tag: &str, slash32: bool) {
    let Some(cluster) = racks_per_node(tag, 3, slash32) else {
        return;
    };
    let runs = run_all(&cluster, &[], 0, HEALTHY_WITHIN);
    assert_routed_choice(&runs, &cluster, 3);
}

#[test]
fn three_nodes_each_on_its_own_subnet_behind_a_router_pass() {
    three_routed_racks_pass("rt3", false);
}

#[test]
fn slash32_cloud_addresses_with_a_device_route_to_the_gateway_pass() {
    three_routed_racks_pass("s32", true);
}

#[test]
fn two_racks_of_two_nodes_joined_by_a_router_pass() {
    let Some(cluster) = Cluster::new("2rk")
        .network(Net::new("rackA", 20))
        .network(Net::new("rackB", 21))
        .router(&["rackA", "rackB"])
        .host(Host::new("a0").on("rackA", "eth1"))
        .host(Host::new("a1").on("rackA", "eth1"))
        .host(Host::new("b0").on("rackB", "eth1"))
        .host(Host::new("b1").on("rackB", "eth1"))
        .needs(&["sysctl"])
        .build()
    else {
        return;
    };
    let runs = run_all(&cluster, &[], 0, HEALTHY_WITHIN);
    let rec = runs[0].recommendation();
    assert_eq!(
        rec["env"]["NCCL_SOCKET_IFNAME"],
        "eth1",
        "{}",
        runs[0].describe()
    );
    assert!(reasons(&runs[0]).contains("eth1 across 2 subnets"));
    assert_ne!(runs[0].report()["status"], "fail", "{}", problems(&runs[0]));
}

#[test]
fn an_ipv6_only_data_network_is_chosen_with_the_socket_family() {
    let Some(cluster) = mgmt_and_data("v6", 2, true) else {
        return;
    };
    let runs = run_all(&cluster, &[], 0, HEALTHY_WITHIN);
    let r0 = &runs[0];
    let rec = r0.recommendation();
    assert_eq!(
        rec["env"]["NCCL_SOCKET_IFNAME"],
        "eth1",
        "{}",
        r0.describe()
    );
    assert_eq!(rec["env"]["NCCL_SOCKET_FAMILY"], "AF_INET6");
    assert_eq!(rec["master_addr"], Value::from(cluster.addr(0, "data")));
    // The given master (rank 0's IPv4 management address) differs: a reason says why.
    let why = reasons(r0);
    assert!(
        why.contains(&format!("instead of the given {}", cluster.addr(0, "mgmt"))),
        "{why}"
    );
    let v6_links = r0
        .links()
        .iter()
        .filter(|l| l["address"].as_str().is_some_and(|a| a.contains(':')) && l["result"] == "ok")
        .count();
    assert_eq!(v6_links, 2, "both directions connect over IPv6");
}

/// `n` hosts with a slow IPv4 management network on eth0 (shaped to 300 Mbit/s) and a fast
/// data network on eth1: IPv4 10.200.2.0/24, or with `v6` the IPv6-only ULA fd00:200:2::/64.
fn mgmt_and_data(tag: &str, n: usize, v6: bool) -> Option<Cluster> {
    let data = Net::new("data", 2);
    let mut b = Cluster::new(tag)
        .network(Net::new("mgmt", 1).rate("300mbit"))
        .network(if v6 { data.v6() } else { data });
    for i in 0..n {
        b = b.host(
            Host::new(&format!("node{i}"))
                .on("mgmt", "eth0")
                .on("data", "eth1"),
        );
    }
    b.build()
}

#[test]
fn a_dead_data_nic_on_one_node_is_named_with_what_falling_back_costs() {
    let Some(cluster) = mgmt_and_data("dead", 3, false) else {
        return;
    };
    cluster.cut(2, "data");
    let runs = run_all(&cluster, &[], 0, HEALTHY_WITHIN);
    let r0 = &runs[0];
    assert_eq!(
        r0.recommendation()["env"]["NCCL_SOCKET_IFNAME"],
        "eth0",
        "{}",
        r0.describe()
    );
    let degraded = r0.findings("link.degraded");
    assert_eq!(degraded.len(), 1, "{degraded:#?}");
    let f = degraded[0];
    assert_eq!(f["status"], "warn");
    assert_eq!(f["node"], 2, "{f:#}");
    assert_eq!(f["evidence"]["broken_by"][0]["interface"], "eth1");
    let reason = f["evidence"]["broken_by"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("no carrier"), "{reason}");
    let lost = f["evidence"]["lost_gbit_s"].as_f64().unwrap();
    let kept = f["evidence"]["chosen_gbit_s"].as_f64().unwrap();
    assert!(kept < 0.4, "the chosen network is the shaped one: {kept}");
    assert!(lost > kept * 1.2, "{lost} vs {kept}");
    let fix = f["fix"]["commands"].to_string();
    assert!(fix.contains("ip link set dev eth1 up"), "{fix}");
}

#[test]
fn a_user_socket_ifname_on_the_slower_network_warns_with_both_numbers() {
    let Some(cluster) = mgmt_and_data("slowif", 2, false) else {
        return;
    };
    let started = Instant::now();
    let runs = cluster
        .preflight()
        .timeout(TIMEOUT)
        .env_on(0, "NCCL_SOCKET_IFNAME", "eth0")
        .env_on(1, "NCCL_SOCKET_IFNAME", "eth0")
        .run();
    eprintln!("wall time: {:.1?}", started.elapsed());
    let r0 = &runs[0];
    assert_eq!(
        r0.recommendation()["env"]["NCCL_SOCKET_IFNAME"],
        "eth1",
        "{}",
        r0.describe()
    );
    let warns: Vec<&Value> = r0
        .findings("env.socket-ifname")
        .into_iter()
        .filter(|f| f["status"] == "warn" && f["evidence"]["selected_gbit_s"].is_number())
        .collect();
    assert_eq!(warns.len(), 1, "{}", r0.describe());
    let ev = &warns[0]["evidence"];
    assert!(ev["best_gbit_s"].as_f64().unwrap() > 1.2 * ev["selected_gbit_s"].as_f64().unwrap());
}
