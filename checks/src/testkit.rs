//! Test fixture for the cluster checks: a healthy cluster to break one thing at a time, and finding lookups.

use crate::core::ClusterInput;
use crate::core::{
    Finding, Gpu, IfAddr, IfKind, Interface, LinkOutcome, LinkResult, NetFacts, NodeFacts,
};
use crate::net::networks::{choose, discover, evaluate};
use crate::registry::check_cluster;

pub(crate) fn iface(
    name: &str,
    addr: &str,
    mtu: u32,
    speed: Option<u64>,
    kind: IfKind,
) -> Interface {
    Interface {
        name: name.into(),
        kind,
        up: true,
        oper_state: "up".into(),
        mtu: Some(mtu),
        speed_mbps: speed,
        ipv4: vec![IfAddr {
            addr: addr.parse().unwrap(),
            prefix: 24,
        }],
        ..Default::default()
    }
}

pub(crate) fn gpu(name: &str, index: u32) -> Gpu {
    Gpu {
        index,
        name: name.into(),
        ..Default::default()
    }
}

/// A healthy node: eno1 on 10.0.0.0/24 (10 Gbit/s), docker0 with the same address everywhere, 8 H100s.
pub(crate) fn node(rank: u32) -> NodeFacts {
    let mut f = NodeFacts {
        hostname: format!("node{:02}", rank + 1),
        host_id: format!("node{:02}-boot{rank}", rank + 1),
        net: NetFacts {
            interfaces: vec![
                iface(
                    "eno1",
                    &format!("10.0.0.{}", rank + 1),
                    1500,
                    Some(10_000),
                    IfKind::Physical,
                ),
                iface("docker0", "172.17.0.1", 1500, None, IfKind::Docker),
            ],
            error: None,
        },
        ..Default::default()
    };
    f.gpu.driver_version = Some("550.54.15".into());
    f.gpu.cuda_driver_version = Some("12.4".into());
    f.gpu.gpus = (0..8).map(|i| gpu("NVIDIA H100 80GB HBM3", i)).collect();
    f.nccl.version = Some("2.21.5".into());
    f.nccl.torch_version = Some("2.5.1+cu124".into());
    f.nccl.source = Some("python:/opt/venv".into());
    f.master_resolution = Some(crate::core::MasterResolution {
        name: "node01".into(),
        addrs: vec!["10.0.0.1".into()],
        joined_via: Some("10.0.0.1:29500".into()),
        ..Default::default()
    });
    f.joined_from = Some(format!("10.0.0.{}", rank + 1));
    f
}

pub(crate) fn link(
    from: u32,
    to: u32,
    addr: &str,
    result: LinkOutcome,
    tp: Option<f64>,
) -> LinkResult {
    LinkResult {
        from,
        to,
        interface: "eno1".into(),
        address: addr.into(),
        port: 40000 + to as u16,
        result,
        throughput_gbit_s: tp.map(|t| t as f32),
        ..Default::default()
    }
}

pub(crate) struct Cluster {
    pub(crate) facts: Vec<NodeFacts>,
    pub(crate) links: Vec<LinkResult>,
    pub(crate) nnodes: u32,
    pub(crate) expected: Vec<String>,
    pub(crate) not_joined: Vec<u32>,
    pub(crate) refused: Vec<crate::core::Refusal>,
    pub(crate) min_link_gbit: Option<f64>,
}

impl Cluster {
    /// `n` healthy nodes, every pair ok at 9 Gbit/s and 50 us on eno1, docker0 failing.
    pub(crate) fn healthy(n: u32) -> Self {
        let mut links = Vec::new();
        for from in 0..n {
            for to in (0..n).filter(|t| *t != from) {
                let addr = format!("10.0.0.{}", to + 1);
                let mut ok = link(from, to, &addr, LinkOutcome::Ok, Some(9.0));
                ok.rtt_us = Some(50.0);
                links.push(ok);
                links.push(link(from, to, "172.17.0.1", LinkOutcome::Error, None));
            }
        }
        Cluster {
            facts: (0..n).map(node).collect(),
            links,
            nnodes: n,
            expected: Vec::new(),
            not_joined: Vec::new(),
            refused: Vec::new(),
            min_link_gbit: None,
        }
    }

    /// Gives every node a second, 100 Gbit/s network: eth1 on 10.1.0.0/24 (no links on it yet).
    pub(crate) fn add_fast_eth1(&mut self) {
        for (r, f) in self.facts.iter_mut().enumerate() {
            f.net.interfaces.push(iface(
                "eth1",
                &format!("10.1.0.{}", r + 1),
                1500,
                Some(100_000),
                IfKind::Physical,
            ));
        }
    }

    /// Adds the link `from -> to` to eth1's address (see `add_fast_eth1`), ok at `gbit`.
    pub(crate) fn add_eth1_link(&mut self, from: u32, to: u32, gbit: f64) {
        let addr = format!("10.1.0.{}", to + 1);
        self.links
            .push(link(from, to, &addr, LinkOutcome::Ok, Some(gbit)));
    }

    /// Replaces the result of every link `from -> to` on eno1.
    pub(crate) fn set(&mut self, from: u32, to: u32, result: LinkOutcome) {
        let addr = format!("10.0.0.{}", to + 1);
        for l in &mut self.links {
            if l.from == from && l.to == to && l.address == addr {
                l.result = result;
                l.throughput_gbit_s = None;
            }
        }
    }

    pub(crate) fn findings(&self) -> Vec<Finding> {
        let nodes: Vec<(u32, &NodeFacts)> = self
            .facts
            .iter()
            .enumerate()
            .map(|(i, f)| (i as u32, f))
            .filter(|(r, _)| !self.not_joined.contains(r))
            .collect();
        let ranks: Vec<u32> = nodes.iter().map(|(r, _)| *r).collect();
        let nets = discover(&nodes, &self.links);
        let evals = evaluate(&nets, &self.links, &ranks);
        let chosen = choose(&evals);
        check_cluster(&ClusterInput {
            nodes: &nodes,
            nnodes: self.nnodes,
            expected_hosts: &self.expected,
            links: &crate::core::Links::borrowed(&self.links),
            evals: &evals,
            chosen,
            master_port: 29500,
            refused: &self.refused,
            min_link_gbit: self.min_link_gbit,
            retested: &[],
        })
    }
}

pub(crate) fn with_id(findings: &[Finding], id: crate::core::FindingId) -> Vec<&Finding> {
    findings.iter().filter(|f| f.id == id).collect()
}

pub(crate) fn only(findings: &[Finding], id: crate::core::FindingId) -> &Finding {
    let v = with_id(findings, id);
    assert_eq!(v.len(), 1, "expected one {id}, got {v:#?}");
    v[0]
}

pub(crate) fn commands(f: &Finding) -> Vec<String> {
    f.fix
        .as_ref()
        .map(|x| x.commands.clone())
        .unwrap_or_default()
}

pub(crate) const IDS: &[crate::core::FindingId] = &[
    crate::rendezvous::ids::RENDEZVOUS,
    crate::rendezvous::ids::REFUSED,
    crate::rendezvous::ids::MASTER_RESOLUTION,
    crate::rendezvous::ids::DUPLICATE_HOST,
    crate::rendezvous::ids::VERSIONS,
    crate::gpu::ids::GPUS,
    crate::rdma::ids::PARTIAL,
    crate::link::ids::UNREACHABLE,
    crate::link::ids::MTU_MISMATCH,
    crate::link::ids::MTU_BLACKHOLE,
    crate::link::ids::DEGRADED,
    crate::link::ids::SLOW,
    crate::link::ids::LATENCY,
    crate::link::ids::NAT,
    crate::link::ids::INTERCEPTED,
];
