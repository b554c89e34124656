//! Candidate networks across nodes: interfaces grouped by IPv4 subnet, judged by the pairwise link results.
//!
//! DESIGN.md's rule: a candidate network is an interface per node whose addresses
//! every other node reached. Prefer reachable by all > highest measured throughput
//! (else rated speed) > physical over virtual > the same name on every node.

use crate::model::{Interface, LinkOutcome, LinkResult, NodeFacts};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

/// One node's interface on a network.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Member {
    pub interface: String,
    pub address: IpAddr,
    pub mtu: Option<u32>,
    pub speed_mbps: Option<u64>,
    pub is_virtual: bool,
}

/// A subnet seen on one or more nodes, with each node's interface on it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Network {
    /// "10.200.2.0/24"
    pub id: String,
    /// rank -> that node's interface on this network.
    pub members: BTreeMap<u32, Member>,
}

/// A network judged by the links measured on it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct NetworkEval {
    pub network: Network,
    /// Ordered pairs among `ranks` whose connection to the member address was ok.
    pub pairs_ok: usize,
    /// Ordered pairs that should exist among `ranks` (n*(n-1)).
    pub pairs_total: usize,
    /// Every node has a member and every ordered pair connected.
    pub fully_connected: bool,
    /// Lowest measured pair throughput, Gbit/s.
    pub min_throughput_gbit_s: Option<f64>,
    /// Lowest rated speed among members, Mbit/s.
    pub min_rated_mbps: Option<u64>,
    pub all_physical: bool,
    pub same_name: bool,
    /// Links on this network that did not come back ok.
    pub failures: Vec<LinkResult>,
}

impl NetworkEval {
    /// Interface name on every member when they agree.
    pub fn common_name(&self) -> Option<&str> {
        let mut names = self.network.members.values().map(|m| m.interface.as_str());
        let first = names.next()?;
        names.all(|n| n == first).then_some(first)
    }
}

fn v4_subnet(addr: Ipv4Addr, prefix: u8) -> String {
    let p = prefix.min(32);
    let mask: u32 = if p == 0 { 0 } else { u32::MAX << (32 - p) };
    format!("{}/{p}", Ipv4Addr::from(u32::from(addr) & mask))
}

/// Interfaces a peer could reach: up, with a usable address.
fn reachable_candidates(facts: &NodeFacts) -> impl Iterator<Item = &Interface> {
    facts
        .net
        .interfaces
        .iter()
        .filter(|i| i.up && !i.usable_addrs().is_empty())
}

/// Groups every node's up IPv4 interfaces by subnet.
pub fn discover(nodes: &[(u32, &NodeFacts)]) -> Vec<Network> {
    let mut by_id: BTreeMap<String, Network> = BTreeMap::new();
    for (rank, facts) in nodes {
        for iface in reachable_candidates(facts) {
            for a in iface
                .ipv4
                .iter()
                .filter(|a| crate::net::is_usable_addr(&a.addr))
            {
                let IpAddr::V4(v4) = a.addr else { continue };
                let id = v4_subnet(v4, a.prefix);
                let net = by_id.entry(id.clone()).or_insert_with(|| Network {
                    id,
                    members: BTreeMap::new(),
                });
                net.members.entry(*rank).or_insert_with(|| Member {
                    interface: iface.name.clone(),
                    address: a.addr,
                    mtu: iface.mtu,
                    speed_mbps: iface.speed_mbps,
                    is_virtual: iface.is_virtual(),
                });
            }
        }
    }
    by_id.into_values().collect()
}

/// The member address a link targeted, if it belongs to `net`.
fn link_on(net: &Network, link: &LinkResult) -> bool {
    net.members
        .get(&link.to)
        .is_some_and(|m| m.address.to_string() == link.address)
}

/// Judges every network against the links and sorts best first.
pub fn evaluate(networks: &[Network], links: &[LinkResult], ranks: &[u32]) -> Vec<NetworkEval> {
    let n = ranks.len();
    let mut evals: Vec<NetworkEval> = networks
        .iter()
        .map(|net| {
            let on_net: Vec<&LinkResult> = links
                .iter()
                .filter(|l| link_on(net, l) && ranks.contains(&l.from) && ranks.contains(&l.to))
                .collect();
            let ok_pairs: std::collections::BTreeSet<(u32, u32)> = on_net
                .iter()
                .filter(|l| l.result == LinkOutcome::Ok && l.from != l.to)
                .map(|l| (l.from, l.to))
                .collect();
            let all_members = ranks.iter().all(|r| net.members.contains_key(r));
            let pairs_total = n * n.saturating_sub(1);
            let min_tp = on_net
                .iter()
                .filter_map(|l| l.throughput_gbit_s)
                .fold(None, |acc: Option<f64>, x| {
                    Some(acc.map_or(x, |a| a.min(x)))
                });
            NetworkEval {
                pairs_ok: ok_pairs.len(),
                pairs_total,
                fully_connected: all_members && n > 0 && ok_pairs.len() == pairs_total,
                min_throughput_gbit_s: min_tp,
                min_rated_mbps: net.members.values().filter_map(|m| m.speed_mbps).min(),
                all_physical: net.members.values().all(|m| !m.is_virtual),
                same_name: {
                    let mut names = net.members.values().map(|m| &m.interface);
                    let first = names.next();
                    names.all(|x| Some(x) == first)
                },
                failures: on_net
                    .iter()
                    .filter(|l| l.result != LinkOutcome::Ok)
                    .map(|l| (*l).clone())
                    .collect(),
                network: net.clone(),
            }
        })
        .collect();
    evals.sort_by(|a, b| compare(b, a));
    evals
}

/// Ordering by preference (greater is better).
fn compare(a: &NetworkEval, b: &NetworkEval) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let key_reach = |e: &NetworkEval| (e.fully_connected, e.pairs_ok);
    key_reach(a)
        .cmp(&key_reach(b))
        .then_with(|| {
            // Measured throughput wins when both were measured and differ by more than 20%.
            match (a.min_throughput_gbit_s, b.min_throughput_gbit_s) {
                (Some(x), Some(y)) if x > y * 1.2 => Ordering::Greater,
                (Some(x), Some(y)) if y > x * 1.2 => Ordering::Less,
                (Some(_), None) => Ordering::Greater,
                (None, Some(_)) => Ordering::Less,
                _ => a
                    .min_rated_mbps
                    .unwrap_or(0)
                    .cmp(&b.min_rated_mbps.unwrap_or(0)),
            }
        })
        .then_with(|| a.all_physical.cmp(&b.all_physical))
        .then_with(|| a.same_name.cmp(&b.same_name))
        .then_with(|| b.network.id.cmp(&a.network.id))
}

/// The best network every node can use, if any.
pub fn choose(evals: &[NetworkEval]) -> Option<&NetworkEval> {
    evals.first().filter(|e| e.fully_connected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{IfAddr, IfKind, NetFacts};

    fn iface(name: &str, addr: &str, speed: Option<u64>, kind: IfKind) -> Interface {
        Interface {
            name: name.into(),
            kind,
            up: true,
            oper_state: "up".into(),
            mtu: Some(1500),
            speed_mbps: speed,
            ipv4: vec![IfAddr {
                addr: addr.parse().unwrap(),
                prefix: 24,
            }],
            ..Default::default()
        }
    }

    fn node(ifaces: Vec<Interface>) -> NodeFacts {
        NodeFacts {
            net: NetFacts {
                interfaces: ifaces,
                error: None,
            },
            ..Default::default()
        }
    }

    fn link(from: u32, to: u32, addr: &str, result: LinkOutcome, tp: Option<f64>) -> LinkResult {
        LinkResult {
            from,
            to,
            address: addr.into(),
            result,
            throughput_gbit_s: tp,
            ..Default::default()
        }
    }

    fn ranked(facts: &[NodeFacts]) -> Vec<(u32, &NodeFacts)> {
        facts
            .iter()
            .enumerate()
            .map(|(i, f)| (i as u32, f))
            .collect()
    }

    fn two_nets() -> Vec<NodeFacts> {
        (0..2)
            .map(|r| {
                node(vec![
                    iface(
                        "eno1",
                        &format!("10.200.1.{}", r + 1),
                        Some(1000),
                        IfKind::Physical,
                    ),
                    iface(
                        "bond0",
                        &format!("10.200.2.{}", r + 1),
                        Some(1000),
                        IfKind::Bond,
                    ),
                    iface("docker0", "10.200.255.1", None, IfKind::Docker),
                ])
            })
            .collect()
    }

    #[test]
    fn groups_by_subnet_and_names_members() {
        let facts = two_nets();
        let nodes = ranked(&facts);
        let nets = discover(&nodes);
        let ids: Vec<&str> = nets.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(
            ids,
            vec!["10.200.1.0/24", "10.200.2.0/24", "10.200.255.0/24"]
        );
        assert_eq!(nets[1].members[&1].interface, "bond0");
    }

    #[test]
    fn measured_throughput_beats_rated_speed_and_unreachable_loses() {
        let facts = two_nets();
        let nodes = ranked(&facts);
        let nets = discover(&nodes);
        let links = vec![
            link(0, 1, "10.200.1.2", LinkOutcome::Ok, Some(0.1)),
            link(1, 0, "10.200.1.1", LinkOutcome::Ok, Some(0.1)),
            link(0, 1, "10.200.2.2", LinkOutcome::Ok, Some(9.0)),
            link(1, 0, "10.200.2.1", LinkOutcome::Ok, Some(8.0)),
            // docker0: both nodes have the same address; the connection reached the wrong host.
            link(0, 1, "10.200.255.1", LinkOutcome::Error, None),
            link(1, 0, "10.200.255.1", LinkOutcome::Error, None),
        ];
        let evals = evaluate(&nets, &links, &[0, 1]);
        let best = choose(&evals).unwrap();
        assert_eq!(best.network.id, "10.200.2.0/24");
        assert_eq!(best.common_name(), Some("bond0"));
        assert!(
            !evals
                .iter()
                .find(|e| e.network.id == "10.200.255.0/24")
                .unwrap()
                .fully_connected
        );
    }

    #[test]
    fn nothing_chosen_when_no_network_is_fully_connected() {
        let facts = two_nets();
        let nodes = ranked(&facts);
        let nets = discover(&nodes);
        let links = vec![
            link(0, 1, "10.200.2.2", LinkOutcome::Ok, None),
            link(1, 0, "10.200.2.1", LinkOutcome::Timeout, None),
        ];
        let evals = evaluate(&nets, &links, &[0, 1]);
        assert!(choose(&evals).is_none());
        assert_eq!(evals[0].network.id, "10.200.2.0/24");
        assert_eq!(evals[0].failures.len(), 1);
    }
}
