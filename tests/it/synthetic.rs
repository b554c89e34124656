//! Cluster reports of any size without a network, for the tests of what a person reads at
//! scale: every node is the InfiniBand fixture node (8 H100s, eno1 and ib0) with its own name
//! and addresses, every ordered pair is connected on both networks, throughput is measured on
//! the ring neighbours and two matchings; then the real node checks, cluster checks and advice
//! judge it, and the report is built as the coordinator builds it (links compacted above 64).

use crate::common::fixture;
use preflight::advise::healthy::HealthyInput;
use preflight::advise::{ClusterAdviceInput, advise_cluster};
use preflight::report::ReportBuilder;
use preflight::runtime::job::JobShape;
use preflight_checks::cluster::{ClusterInput, check_cluster};
use preflight_checks::collective::{CollectiveInput, check_collectives};
use preflight_checks::model::{
    CollectiveResult, CollectiveRow, IfAddr, LinkOutcome, LinkResult, Mode, NodeFacts,
    PlacementInfo, Report,
};
use preflight_checks::networks;

/// What is broken in the cluster (ranks).
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Joined, then answered nothing: every link to and from it times out.
    pub dead: Option<u32>,
    /// Drops input: every link to it times out.
    pub firewalled: Option<u32>,
    /// One pair refused (from, to) on eno1.
    pub bad_link: Option<(u32, u32)>,
    /// One pair broken both ways on every network (a cable, a switch port): every connection
    /// between the two times out, in each direction.
    pub broken_pair: Option<(u32, u32)>,
    /// Every pair measured from or to it runs at a tenth of the others' speed.
    pub slow: Option<u32>,
    /// Measured links of the large sizes only: the cluster checks and the advice are skipped
    /// (they are the runtime's to scale); node checks still run.
    pub links_only: bool,
    /// Every node keeps the old default listen backlog (somaxconn and the SYN backlog 128,
    /// everything else raised) and the job is 8 processes on each of the `n` nodes, so
    /// `sys.listen-backlog` fires on every node once the world passes 128.
    pub old_backlog: bool,
    /// A TCP ring all-reduce over every node in rank order on ib0, at 90% of its slowest hop,
    /// judged as the coordinator judges it (`collective.busbw`).
    pub allreduce: bool,
    /// Attach the healthy set and the faster set as the coordinator does (before the links
    /// are compacted).
    pub advise_sets: bool,
}

/// A small deterministic hash of a pair, for RTTs and throughputs that vary like real ones.
fn jitter(a: u32, b: u32, salt: u32) -> f64 {
    let mut x = (u64::from(a) * 0x9E37_79B9) ^ (u64::from(b) * 0x85EB_CA6B) ^ u64::from(salt);
    x ^= x >> 13;
    x = x.wrapping_mul(0xC2B2_AE35);
    x ^= x >> 16;
    (x % 1000) as f64 / 1000.0
}

fn node(rank: u32, n: u32) -> NodeFacts {
    let text = std::fs::read_to_string(fixture("facts/ib-node.json")).expect("ib-node facts");
    let mut f: NodeFacts = serde_json::from_str(&text).expect("ib-node facts parse");
    let width = if n > 999 {
        4
    } else {
        2.max(n.to_string().len())
    };
    f.hostname = format!("gpu{:0width$}", rank + 1);
    f.host_id = format!("{}-boot", f.hostname);
    let (hi, lo) = ((rank + 1) / 250, (rank + 1) % 250 + 1);
    for i in &mut f.net.interfaces {
        let addr = match i.name.as_str() {
            "eno1" => format!("10.1.{hi}.{lo}"),
            "ib0" => format!("192.168.{hi}.{lo}"),
            _ => continue,
        };
        i.ipv4 = vec![IfAddr {
            addr: addr.parse().unwrap(),
            prefix: 16,
        }];
    }
    // A healthy node: the fixture's own faults (a stale NCCL_SOCKET_IFNAME, IB disabled, a
    // GPU in use, a small memlock limit, the hostname on loopback, a port down) repaired.
    f.env.remove("NCCL_SOCKET_IFNAME");
    f.env.remove("NCCL_IB_DISABLE");
    for g in &mut f.gpu.gpus {
        g.processes.clear();
        g.memory_used_bytes = Some(0);
    }
    f.sys.memlock_soft = None;
    f.sys.memlock_hard = None;
    f.sys.hostname_addrs = vec![format!("10.1.{hi}.{lo}").parse().unwrap()];
    f.ib.devices.retain(|d| d.name == "mlx5_0");
    f.net.interfaces.retain(|i| i.name != "ib1");
    f
}

/// The RTT p50 of the pair on network 0 (eno1) or 1 (ib0), as the report holds it.
pub fn rtt_us(from: u32, to: u32, net: u32) -> f64 {
    let base = if net == 0 { 38.0 } else { 12.0 };
    (base * (1.0 + jitter(from, to, net)) * 10.0).round() / 10.0
}

/// Pairs whose throughput is measured: ring neighbours both ways and two matchings.
fn measured(from: u32, to: u32, n: u32) -> bool {
    let d = (to + n - from) % n;
    d == 1 || d == n - 1 || d == n / 2 || (n > 4 && d == n / 3)
}

/// A report of `n` nodes with `faults`.
pub fn cluster(n: u32, faults: &Faults) -> Report {
    let mut facts: Vec<NodeFacts> = (0..n).map(|r| node(r, n)).collect();
    if faults.old_backlog {
        for f in &mut facts {
            f.scale = preflight_checks::model::ScaleFacts {
                probed: true,
                somaxconn: Some(128),
                tcp_max_syn_backlog: Some(128),
                tcp_abort_on_overflow: Some(0),
                port_range: Some([1024, 65535]),
                neigh_gc_thresh3_v4: Some(1 << 16),
                neigh_gc_thresh3_v6: Some(1 << 16),
                nofile_soft: Some(1 << 20),
                nofile_hard: Some(1 << 20),
                ..Default::default()
            };
        }
    }
    let mut links = Vec::with_capacity((2 * n * n) as usize);
    for (net, iface, gbit, base_rtt) in [(0, "eno1", 23.0, 38.0), (1u32, "ib0", 95.0, 12.0)] {
        for from in 0..n {
            for to in (0..n).filter(|t| *t != from) {
                let addr = facts[to as usize]
                    .net
                    .interfaces
                    .iter()
                    .find(|i| i.name == iface)
                    .and_then(|i| i.ipv4.first())
                    .map(|a| a.addr.to_string())
                    .unwrap_or_default();
                let failed = if faults.dead.is_some_and(|d| d == from || d == to)
                    || faults.firewalled == Some(to)
                    || faults
                        .broken_pair
                        .is_some_and(|(a, b)| (a, b) == (from, to) || (b, a) == (from, to))
                {
                    Some(LinkOutcome::Timeout)
                } else if net == 0 && faults.bad_link == Some((from, to)) {
                    Some(LinkOutcome::Refused)
                } else {
                    None
                };
                let mut l = LinkResult {
                    from,
                    to,
                    interface: iface.into(),
                    address: addr.into(),
                    port: 40000 + (to % 20000) as u16,
                    result: failed.unwrap_or(LinkOutcome::Ok),
                    mtu: Some(if net == 0 { 1500 } else { 2044 }),
                    ..Default::default()
                };
                if failed.is_none() {
                    let rtt = base_rtt * (1.0 + jitter(from, to, net));
                    l.rtt_us = Some(rtt_us(from, to, net) as f32);
                    l.rtt_p99_us = Some(((rtt * 18.0).round() / 10.0) as f32);
                    if measured(from, to, n) {
                        let slow = faults.slow.is_some_and(|s| s == from || s == to);
                        let g = gbit * (0.96 + 0.04 * jitter(to, from, net));
                        l.throughput_gbit_s = Some((if slow { g / 10.0 } else { g }) as f32);
                    }
                } else {
                    l.error = Some("timed out after 3 s".into());
                }
                links.push(l);
            }
        }
    }
    let nodes: Vec<(u32, &NodeFacts)> = facts
        .iter()
        .enumerate()
        .map(|(r, f)| (r as u32, f))
        .collect();
    let shape = JobShape {
        nproc_per_node: Some(8),
        nnodes: faults.old_backlog.then_some(n),
        ..Default::default()
    };
    let mut b = ReportBuilder::new(Mode::Cluster);
    let mut findings = Vec::new();
    for (r, f) in &nodes {
        findings.extend(preflight::runtime::node::node_findings(*r, f, 29500, shape));
    }
    let mut rec = None;
    if !faults.links_only {
        let ranks: Vec<u32> = (0..n).collect();
        let evals = networks::evaluate(&networks::discover(&nodes, &links), &links, &ranks);
        findings.extend(check_cluster(&ClusterInput {
            nodes: &nodes,
            nnodes: n,
            expected_hosts: &[],
            links: &preflight_checks::model::Links::borrowed(&links),
            evals: &evals,
            chosen: networks::choose(&evals),
            master_port: 29500,
            refused: &[],
            min_link_gbit: None,
            retested: &[],
        }));
        rec = Some(advise_cluster(
            &nodes,
            &evals,
            &ClusterAdviceInput {
                nnodes: n,
                master_port: 29500,
                nproc_per_node: Some(8),
                script: vec!["train.py".into()],
                env_override: Default::default(),
                coordinator_note: None,
                given_master: None,
                c10d: None,
                rail_verdict: None,
            },
        ));
    }
    let collectives = if faults.allreduce {
        vec![ring_allreduce(&facts, &links)]
    } else {
        Vec::new()
    };
    if !collectives.is_empty() {
        let table = preflight_checks::model::Links::borrowed(&links);
        let input = CollectiveInput {
            results: &collectives,
            links: &table,
            min_busbw_gb_s: None,
            not_run: None,
            one_node: false,
            slow_parts: Vec::new(),
            link_reference_gbit: None,
        }
        .with_link_verdict(&findings);
        let judged = check_collectives(&input);
        findings.extend(judged);
    }
    for (r, f) in nodes {
        b = b.node(r, f.clone());
    }
    let mut report = b
        .findings(findings)
        .links(links)
        .collectives(collectives)
        .recommendation(rec)
        .placement(Some(PlacementInfo {
            source: "slurm".into(),
            ..Default::default()
        }))
        .build();
    if faults.advise_sets {
        let input = HealthyInput::new(&Default::default(), n, Some(8), &["train.py".to_string()]);
        preflight::advise::healthy::attach(&mut report, &input);
        preflight::advise::faster::attach(&mut report, &input);
    }
    preflight::report_compact::compacted(report)
}

/// A TCP all-reduce of 64 MiB around the ring 0, 1, ..., n-1 on ib0, its bus bandwidth 90% of
/// the slowest hop's measured throughput.
fn ring_allreduce(facts: &[NodeFacts], links: &[LinkResult]) -> CollectiveResult {
    let n = facts.len() as u32;
    let ib0 = |r: u32| {
        facts[r as usize]
            .net
            .interfaces
            .iter()
            .find(|i| i.name == "ib0")
            .and_then(|i| i.ipv4.first())
            .map(|a| a.addr.to_string())
            .unwrap_or_default()
    };
    let hop = |from: u32, to: u32| {
        links
            .iter()
            .find(|l| l.from == from && l.to == to && l.address == ib0(to))
            .and_then(|l| l.throughput_gbit_s)
            .map_or(f64::INFINITY, f64::from)
    };
    let slowest = (0..n)
        .map(|r| hop(r, (r + 1) % n))
        .fold(f64::INFINITY, f64::min);
    let busbw = 0.9 * slowest / 8.0;
    let algbw = busbw * f64::from(n) / (2.0 * f64::from(n - 1));
    let bytes = 64u64 << 20;
    CollectiveResult {
        op: "allreduce".into(),
        transport: "tcp".into(),
        ranks: n,
        rows: vec![CollectiveRow {
            bytes,
            time_us: bytes as f64 / algbw / 1e3,
            algbw_gb_s: algbw,
            busbw_gb_s: busbw,
            wrong: 0,
        }],
        order: (0..n).collect(),
        addresses: (0..n).map(|r| (r.to_string(), ib0(r))).collect(),
        network: Some("ib0".into()),
        streams: Some(1),
        config: "advice".into(),
        ..Default::default()
    }
}

/// The 1024-node report (links only, the pair 3 -> 9 refused on eno1), built once for every
/// test that reads it: building it takes most of a minute in a debug build on a busy machine.
pub fn cluster_1024() -> &'static Report {
    static BIG: std::sync::OnceLock<Report> = std::sync::OnceLock::new();
    BIG.get_or_init(|| {
        cluster(
            1024,
            &Faults {
                links_only: true,
                bad_link: Some((3, 9)),
                ..Default::default()
            },
        )
    })
}
