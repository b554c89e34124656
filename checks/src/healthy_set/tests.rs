//! Tests of the healthy set from reports built with the cluster testkit.

use super::*;
use crate::core::{
    Finding, IfKind, LinkResult, Mode, NodeEntry, Recommendation, SCHEMA, Tool, overall_status,
};
use crate::testkit::{Cluster, iface, node};

/// The report the coordinator would write for this cluster (findings from the real checks).
pub(crate) fn report(c: &Cluster) -> Report {
    let findings = c.findings();
    let nodes = c
        .facts
        .iter()
        .enumerate()
        .filter(|(r, _)| !c.not_joined.contains(&(*r as u32)))
        .map(|(r, f)| NodeEntry {
            rank: r as u32,
            hostname: f.hostname.clone(),
            facts: f.clone(),
        })
        .collect();
    Report {
        schema: SCHEMA.into(),
        tool: Tool {
            name: "preflight".into(),
            version: "test".into(),
        },
        mode: Mode::Cluster,
        status: overall_status(&findings),
        nodes,
        findings,
        links: c.links.clone(),
        collectives: Vec::new(),
        recommendation: Some(Recommendation {
            master_port: 29500,
            ..Default::default()
        }),
        placement: None,
        trimmed: None,
        link_matrix: None,
        run_id: None,
        measurement: None,
    }
}

/// Every link to `to` times out (its firewall drops what it is sent).
fn filter_inbound(c: &mut Cluster, to: u32) {
    for from in (0..c.nnodes).filter(|f| *f != to) {
        c.set(from, to, LinkOutcome::Timeout);
    }
}

/// Ten nodes: rank 3 never joined, rank 5 filters its listeners, the pair 7-8 is broken.
fn ten() -> Cluster {
    let mut c = Cluster::healthy(10);
    c.expected = (0..10).map(|r| format!("node{:02}", r + 1)).collect();
    c.not_joined = vec![3];
    c.links.retain(|l| l.from != 3 && l.to != 3);
    filter_inbound(&mut c, 5);
    c.set(7, 8, LinkOutcome::Timeout);
    c
}

fn ids(s: &HealthySet) -> Vec<(u32, Vec<String>)> {
    s.excluded
        .iter()
        .map(|e| (e.rank, e.reasons.clone()))
        .collect()
}

#[test]
fn a_dead_node_a_filtered_node_and_a_broken_pair_leave_seven() {
    let s = healthy_set(&report(&ten()), &HealthyOptions::default()).unwrap();
    assert_eq!(s.order, vec![0, 1, 2, 4, 6, 7, 9]);
    assert_eq!(s.total, 10);
    assert_eq!(
        ids(&s),
        vec![
            (3, vec![crate::rendezvous::ids::RENDEZVOUS.to_string()]),
            (5, vec![crate::link::ids::UNREACHABLE.to_string()]),
            (8, vec![crate::link::ids::UNREACHABLE.to_string()]),
        ]
    );
    assert_eq!(s.excluded[0].hostname, "node04");
    assert!(s.largest && s.met);
    assert_eq!(s.master, Some(0));
    assert_eq!(s.master_reason, None);
    assert_eq!(s.network.as_deref(), Some("10.0.0.0/24"));
}

#[test]
fn a_passing_cluster_has_no_healthy_set() {
    let r = report(&Cluster::healthy(4));
    assert_eq!(r.status, Status::Pass);
    assert!(healthy_set(&r, &HealthyOptions::default()).is_none());
}

#[test]
fn ties_keep_rank_0_then_the_faster_node_then_the_lower_rank() {
    let mut c = Cluster::healthy(6);
    c.set(0, 4, LinkOutcome::Timeout);
    c.set(2, 3, LinkOutcome::Refused);
    // Rank 2's links are slower than rank 3's: rank 2 goes although its rank is lower.
    for l in &mut c.links {
        if (l.from == 2 || l.to == 2) && l.throughput_gbit_s.is_some() {
            l.throughput_gbit_s = Some(3.0);
        }
    }
    let s = healthy_set(&report(&c), &HealthyOptions::default()).unwrap();
    let out: Vec<u32> = s.excluded.iter().map(|e| e.rank).collect();
    assert_eq!(out, vec![2, 4]);
    assert_eq!(s.order, vec![0, 1, 3, 5]);
    // Equal speed: the higher rank goes.
    let mut c = Cluster::healthy(4);
    c.set(1, 2, LinkOutcome::Timeout);
    let s = healthy_set(&report(&c), &HealthyOptions::default()).unwrap();
    assert_eq!(s.order, vec![0, 1, 3]);
}

#[test]
fn the_node_that_explains_the_most_failures_goes_first() {
    // Rank 1 fails with 2, 3 and 4; the pair 4-5 also fails: removing 1 and 4 (or 5) is enough.
    let mut c = Cluster::healthy(6);
    for to in [2, 3, 4] {
        c.set(1, to, LinkOutcome::Timeout);
    }
    c.set(5, 4, LinkOutcome::Timeout);
    let s = healthy_set(&report(&c), &HealthyOptions::default()).unwrap();
    assert_eq!(s.count(), 4, "{s:#?}");
    assert!(s.excluded.iter().any(|e| e.rank == 1));
    assert!(s.largest);
}

#[test]
fn rank_0_left_out_gives_a_new_master_with_a_proven_port() {
    let mut c = Cluster::healthy(5);
    filter_inbound(&mut c, 0);
    for f in &mut c.facts {
        f.ports.port = 29500;
        f.ports.ipv4.status = BindStatus::Free;
        f.ports.ipv6.status = BindStatus::Free;
    }
    let s = healthy_set(&report(&c), &HealthyOptions::default()).unwrap();
    assert_eq!(s.order, vec![1, 2, 3, 4]);
    assert_eq!(s.master, Some(1));
    assert_eq!(s.master_port, 29500);
    let why = s.master_reason.unwrap();
    assert!(
        why.contains("rank 0 is left out") && why.contains("port 29500 was bound"),
        "{why}"
    );
    // Rank 1's port is held: the next node with a proven port is the master.
    c.facts[1].ports.ipv4.status = BindStatus::InUse;
    let s = healthy_set(&report(&c), &HealthyOptions::default()).unwrap();
    assert_eq!(s.master, Some(2));
    assert_eq!(s.order, vec![2, 1, 3, 4]);
}

#[test]
fn multiple_of_rounds_down_leaving_the_slowest_idle() {
    let mut c = ten();
    for l in &mut c.links {
        if (l.from == 6 || l.to == 6) && l.throughput_gbit_s.is_some() {
            l.throughput_gbit_s = Some(5.0);
        }
    }
    let opts = HealthyOptions {
        multiple_of: 4,
        ..Default::default()
    };
    let s = healthy_set(&report(&c), &opts).unwrap();
    assert_eq!(s.count(), 4);
    assert!(s.met);
    let idle: Vec<u32> = s
        .excluded
        .iter()
        .filter(|e| e.idle)
        .map(|e| e.rank)
        .collect();
    assert_eq!(
        idle,
        vec![6, 7, 9],
        "the slowest (6), then the highest ranks"
    );
    assert!(
        s.excluded
            .iter()
            .filter(|e| e.idle)
            .all(|e| e.reasons.is_empty())
    );
}

#[test]
fn min_nodes_not_met_says_why_and_names_the_costliest_findings() {
    let opts = HealthyOptions {
        min_nodes: 9,
        ..Default::default()
    };
    let s = healthy_set(&report(&ten()), &opts).unwrap();
    assert!(!s.met);
    assert_eq!(s.count(), 7);
    assert_eq!(
        s.shortfall().unwrap(),
        "the healthy set has 7 of 10 nodes, fewer than --min-nodes 9; the findings that cost the most nodes: link.unreachable (2 nodes), cluster.rendezvous (1 node)"
    );
    let met = healthy_set(&report(&ten()), &HealthyOptions::default()).unwrap();
    assert_eq!(met.shortfall(), None);
}

#[test]
fn the_larger_version_group_is_kept() {
    let mut c = Cluster::healthy(5);
    c.set(0, 1, LinkOutcome::Timeout);
    c.facts[3].nccl.torch_version = Some("2.4.0".into());
    let s = healthy_set(&report(&c), &HealthyOptions::default()).unwrap();
    let three = s.excluded.iter().find(|e| e.rank == 3).unwrap();
    assert_eq!(
        three.reasons,
        vec![crate::rendezvous::ids::VERSIONS.to_string()]
    );
    assert!(
        three
            .why
            .contains("torch 2.4.0 (the larger group: 2.5.1+cu124)"),
        "{}",
        three.why
    );
    assert_eq!(s.order, vec![0, 2, 4]);
}

#[test]
fn exclude_slow_leaves_out_a_straggler_only_when_asked() {
    let mut c = Cluster::healthy(6);
    c.set(0, 1, LinkOutcome::Timeout);
    for l in &mut c.links {
        if (l.from == 4 || l.to == 4) && l.throughput_gbit_s.is_some() {
            l.throughput_gbit_s = Some(1.0);
        }
    }
    let plain = healthy_set(&report(&c), &HealthyOptions::default()).unwrap();
    assert!(plain.order.contains(&4));
    let opts = HealthyOptions {
        exclude_slow: true,
        ..Default::default()
    };
    let s = healthy_set(&report(&c), &opts).unwrap();
    let four = s.excluded.iter().find(|e| e.rank == 4).unwrap();
    assert_eq!(four.reasons, vec![crate::link::ids::SLOW.to_string()]);
    assert!(!s.order.contains(&4));
}

/// A 4096-node report: two nodes never joined, three fail on their own (each with its failed
/// links), and ten flaky nodes with two bad links each (twenty bad links).
fn big() -> Report {
    const N: u32 = 4096;
    let addr = |r: u32| format!("10.1.{}.{}", r / 256, r % 256);
    let template = node(0);
    let facts = |r: u32| {
        let mut f = template.clone();
        f.hostname = format!("gpu{r:04}");
        let mut i = iface("eth0", &addr(r), 1500, Some(100_000), IfKind::Physical);
        i.ipv4[0].prefix = 16;
        f.net.interfaces = vec![i];
        f
    };
    let dead = [17, 2049];
    let bad = [5, 1000, 3000];
    let flaky = [11, 400, 777, 1234, 1500, 2222, 2600, 3100, 3600, 4000];
    let mut links = Vec::new();
    let link = |from: u32, to: u32, ok: bool| LinkResult {
        from,
        to,
        interface: "eth0".into(),
        address: addr(to).into(),
        port: 40000,
        result: if ok {
            LinkOutcome::Ok
        } else {
            LinkOutcome::Timeout
        },
        throughput_gbit_s: ok.then_some(90.0),
        ..Default::default()
    };
    for r in (0..N).filter(|r| !dead.contains(r)) {
        let mut next = (r + 1) % N;
        while dead.contains(&next) {
            next = (next + 1) % N;
        }
        let ok = !bad.contains(&r) && !bad.contains(&next);
        links.push(link(r, next, ok));
    }
    for (i, f) in flaky.iter().enumerate() {
        for k in 1..=2u32 {
            links.push(link(*f, (f + 97 * k + i as u32) % N, false));
        }
    }
    let mut findings = vec![
        Finding::new(
            crate::rendezvous::ids::RENDEZVOUS,
            Status::Fail,
            "gpu0000:29500",
            "2 of 4096 nodes never joined",
        )
        .with("nnodes", N)
        .with(
            "missing",
            serde_json::json!([{"rank": 17, "host": "gpu0017"}, {"rank": 2049, "host": "gpu2049"}]),
        ),
    ];
    for b in bad {
        findings.push(
            Finding::new(
                crate::link::ids::UNREACHABLE,
                Status::Fail,
                format!("{b}<->* eth0"),
                "fails with every peer",
            )
            .on_node(Some(b)),
        );
    }
    Report {
        schema: SCHEMA.into(),
        tool: Tool {
            name: "preflight".into(),
            version: "test".into(),
        },
        mode: Mode::Cluster,
        status: Status::Fail,
        nodes: (0..N)
            .filter(|r| !dead.contains(r))
            .map(|r| NodeEntry {
                rank: r,
                hostname: format!("gpu{r:04}"),
                facts: facts(r),
            })
            .collect(),
        findings,
        links,
        collectives: Vec::new(),
        recommendation: None,
        placement: None,
        trimmed: None,
        link_matrix: None,
        run_id: None,
        measurement: None,
    }
}

#[test]
fn four_thousand_nodes_with_five_bad_nodes_and_twenty_bad_links_in_under_a_second() {
    let r = big();
    let t = std::time::Instant::now();
    let s = healthy_set(&r, &HealthyOptions::default()).unwrap();
    let took = t.elapsed();
    eprintln!(
        "healthy set of 4096 nodes: {took:?}, {} excluded",
        s.excluded.len()
    );
    assert!(s.excluded.len() <= 15, "{:?}", ids(&s));
    assert_eq!(s.excluded.len(), 15);
    assert_eq!(s.count(), 4096 - 15);
    assert!(s.largest);
    for f in [
        11, 400, 777, 1234, 1500, 2222, 2600, 3100, 3600, 4000, 5, 1000, 3000, 17, 2049,
    ] {
        assert!(s.excluded.iter().any(|e| e.rank == f), "{f} not excluded");
    }
    // A debug build on a loaded 2-core machine: the margin is wide; release takes milliseconds.
    assert!(took.as_secs_f64() < 5.0, "took {took:?}");
}
