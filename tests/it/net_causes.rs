//! Causes on the network path that are not firewalls (namespaces, real processes): a node
//! behind NAT (MASQUERADE, one port forwarded), connections intercepted by a nat REDIRECT to a
//! local sink, and the healthy control that names neither.

use crate::netns::{Cluster, MASTER_PORT, NodeRun, node};
use serde_json::Value;

fn failing<'a>(run: &'a NodeRun, id: &str) -> Vec<&'a Value> {
    run.findings(id)
        .into_iter()
        .filter(|f| f["status"] == "fail")
        .collect()
}

fn summary(f: &Value) -> &str {
    f["summary"].as_str().unwrap_or_default()
}

/// Rank 1 runs in an inner namespace behind its host's MASQUERADE, with only the master port
/// forwarded in: rank 0 sees it join from the host's address, which its interfaces do not hold.
#[test]
fn a_node_behind_nat_is_named_with_both_addresses() {
    let Some(c) = Cluster::flat("nat", 2, "eth0").needs(&["iptables"]).build() else {
        return;
    };
    let inner = c.behind_nat(1, 61, MASTER_PORT);
    let runs = c
        .preflight()
        .wrap_on(1, &["ip", "netns", "exec", &inner])
        .timeout(8)
        .run();
    let r0 = node(&runs, 0);
    let nat = failing(r0, "cluster.nat");
    assert_eq!(nat.len(), 1, "{}", r0.describe());
    let f = nat[0];
    let host_addr = c.addr(1, "data");
    let text = summary(f);
    assert!(
        text.contains(&format!(
            "connects from {host_addr} but its interfaces hold only 10.200.61.2: it sits behind NAT"
        )),
        "{text}"
    );
    assert_eq!(f["node"], 1);
    assert_eq!(f["evidence"]["seen_from"], host_addr.as_str());
    let fix = f["fix"]["hint"].as_str().unwrap_or_default();
    assert!(
        fix.contains("--network=host") && fix.contains("hostNetwork: true"),
        "{fix}"
    );
    // The symptom points to the cause.
    let sym = failing(r0, "link.unreachable");
    assert!(!sym.is_empty(), "{}", r0.describe());
    assert!(
        sym.iter().all(|s| summary(s).contains("(see cluster.nat)")),
        "{sym:#?}"
    );
    // The node behind NAT is left out of the healthy set, for cluster.nat.
    let set = &r0.report()["recommendation"]["healthy_set"];
    let out = set["excluded"].as_array().cloned().unwrap_or_default();
    assert!(
        out.iter()
            .any(|e| e["node"] == 1 && e["reasons"].to_string().contains("cluster.nat")),
        "{set:#}"
    );
    crate::fail_slow::save(r0, "nat");
    println!("SAMPLE cluster.nat: {text}");
}

/// Rank 1's own nat OUTPUT rule REDIRECTs its connections to rank 0's data ports to a local
/// sink that accepts and says nothing: named as interception, with the rule, on rank 1.
#[test]
fn an_output_redirect_to_a_local_sink_is_named_with_its_rule() {
    let Some(c) = Cluster::flat("icpt", 2, "eth0")
        .needs(&["iptables", "python3"])
        .build()
    else {
        return;
    };
    c.hold_port(1, 15001);
    let peer = format!("{}/32", c.addr(0, "data"));
    let master = MASTER_PORT.to_string();
    c.iptables(
        1,
        &[
            "-t",
            "nat",
            "-A",
            "OUTPUT",
            "-d",
            &peer,
            "-p",
            "tcp",
            "!",
            "--dport",
            &master,
            "-j",
            "REDIRECT",
            "--to-ports",
            "15001",
        ],
    );
    let runs = c.preflight().timeout(10).run();
    let r0 = node(&runs, 0);
    let found = failing(r0, "link.intercepted");
    assert_eq!(found.len(), 1, "{}", r0.describe());
    let f = found[0];
    let text = summary(f);
    assert_eq!(f["node"], 1, "{text}");
    assert!(text.contains("REDIRECT --to-ports 15001"), "{text}");
    assert!(text.contains("own nat rule"), "{text}");
    assert!(!text.contains("firewall between"), "{text}");
    let cmds = f["fix"]["commands"].to_string();
    assert!(cmds.contains("iptables -t nat -D OUTPUT"), "{cmds}");
    // The symptom names the cause, and no longer blames a firewall between the nodes.
    for s in failing(r0, "link.unreachable") {
        assert!(
            summary(s).contains("(see link.intercepted)"),
            "{}",
            summary(s)
        );
        assert!(!summary(s).contains("firewall between"), "{}", summary(s));
    }
    crate::fail_slow::save(r0, "intercepted");
    println!("SAMPLE link.intercepted: {text}");
}

/// The control: a plain cluster names neither NAT nor interception.
#[test]
fn a_plain_cluster_is_neither_nat_nor_intercepted() {
    let Some(c) = Cluster::flat("natok", 3, "eth0").build() else {
        return;
    };
    let runs = c.preflight().timeout(8).run();
    for r in &runs {
        assert_eq!(r.exit_code, Some(0), "{}", r.describe());
        for id in ["cluster.nat", "link.intercepted"] {
            let f = r.findings(id);
            assert_eq!(f.len(), 1, "{id}: {}", r.describe());
            assert_eq!(f[0]["status"], "pass", "{id}: {}", r.describe());
        }
    }
}
