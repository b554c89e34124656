//! Candidate networks across nodes: one address per node that every other node reached, whatever the subnets.
//!
//! DESIGN.md's rule: a candidate network is an interface per node whose address
//! every other node reached: one flat subnet, racks on their own subnets behind
//! routers, /32 cloud addresses, pod CIDRs, IPv4 or IPv6. Subnets and interface
//! names only seed the grouping; the pairwise links decide. Prefer reachable by
//! all > highest measured throughput (else rated speed) > physical over virtual >
//! the same name on every node.

use crate::core::{
    AsLinks, IfAddr, Interface, Label, LinkOutcome, LinkResult, Links, Member, Network,
    NetworkEval, NodeFacts, PairSet, RankText, prefix_of, side_of,
};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// Interfaces a peer could reach: up, with a usable address.
fn reachable_candidates(facts: &NodeFacts) -> impl Iterator<Item = &Interface> {
    facts
        .net
        .interfaces
        .iter()
        .filter(|i| i.up && !i.usable_addrs().is_empty())
}

fn member(iface: &Interface, a: &IfAddr) -> Member {
    Member {
        interface: iface.name.clone(),
        address: a.addr,
        subnet: prefix_of(a.addr, a.prefix),
        mtu: iface.mtu,
        speed_mbps: iface.speed_mbps,
        is_virtual: iface.is_virtual(),
    }
}

/// Every (interface, address) of a node a peer could connect to, IPv4 and IPv6.
fn addresses(facts: &NodeFacts) -> Vec<Member> {
    reachable_candidates(facts)
        .flat_map(|i| i.usable_addrs().into_iter().map(move |a| member(i, &a)))
        .collect()
}

type Seed = BTreeMap<u32, Member>;

/// Groups to start from: members of one subnet, and interfaces of one name and family.
fn seeds(all: &BTreeMap<u32, Vec<Member>>) -> Vec<Seed> {
    let mut by_subnet: BTreeMap<String, Seed> = BTreeMap::new();
    let mut by_name: BTreeMap<(String, bool), Seed> = BTreeMap::new();
    for (rank, members) in all {
        for m in members {
            by_subnet
                .entry(m.subnet.clone())
                .or_default()
                .entry(*rank)
                .or_insert_with(|| m.clone());
            by_name
                .entry((m.interface.clone(), m.address.is_ipv6()))
                .or_default()
                .entry(*rank)
                .or_insert_with(|| m.clone());
        }
    }
    by_subnet
        .into_values()
        .chain(by_name.into_values())
        .collect()
}

/// Ordered pairs (from, to, address) that connected, sorted and found by binary search (24
/// bytes each: a tree of a million is half as large again). Built only when a node lacks the
/// network's interface name (see `complete`), so a uniform cluster never holds it.
enum OkSet<'a> {
    /// Looked up in the links' table.
    Table(&'a Links<'a>),
    Sorted(Vec<(u32, u32, &'a str)>),
}

impl<'a> OkSet<'a> {
    fn of(links: &'a Links<'a>) -> OkSet<'a> {
        if links.is_dense() {
            return OkSet::Table(links);
        }
        let mut ok: Vec<(u32, u32, &str)> = links
            .iter()
            .filter(|l| l.result == LinkOutcome::Ok && l.from != l.to)
            .map(|l| (l.from, l.to, l.address.as_str()))
            .collect();
        ok.sort_unstable();
        ok.dedup();
        OkSet::Sorted(ok)
    }

    fn contains(&self, key: &(u32, u32, &str)) -> bool {
        match self {
            OkSet::Table(links) => key.0 != key.1 && links.connected(key.0, key.1, key.2),
            OkSet::Sorted(ok) => ok.binary_search(key).is_ok(),
        }
    }
}

/// Every node's addresses, and the names of all its interfaces (down ones too).
struct Nodes {
    addrs: BTreeMap<u32, Vec<Member>>,
    names: BTreeMap<u32, BTreeSet<String>>,
}

/// Adds, for each node missing from `seed`, its address of the same family on an interface of
/// the seed's most-used name, whatever the links say (so a node whose firewall or route breaks
/// the network is still part of it). A node without an interface of that name at all joins
/// with the address that every seed member reached and that reached every seed member,
/// physical before virtual, fastest first. A node whose interface of that name is down or has no address
/// is left out: another of its NICs does not silently stand in for a dead one.
fn complete<'a>(
    seed: &Seed,
    nodes: &Nodes,
    links: &'a Links<'a>,
    ok: &std::cell::OnceCell<OkSet<'a>>,
) -> Seed {
    let all = &nodes.addrs;
    let v6 = seed.values().next().is_some_and(|m| m.address.is_ipv6());
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for m in seed.values() {
        *names.entry(m.interface.as_str()).or_default() += 1;
    }
    let main_name = names
        .iter()
        .max_by_key(|(n, c)| (**c, std::cmp::Reverse(**n)))
        .map(|(n, _)| n.to_string())
        .unwrap_or_default();
    let mut out = seed.clone();
    for (rank, members) in all.iter().filter(|(r, _)| !seed.contains_key(r)) {
        let mutual = |c: &Member| {
            let ok = ok.get_or_init(|| OkSet::of(links));
            let addr = c.address.to_string();
            seed.iter().all(|(r, m)| {
                ok.contains(&(*r, *rank, addr.as_str()))
                    && ok.contains(&(*rank, *r, m.address.to_string().as_str()))
            })
        };
        let mut same_family = members.iter().filter(|c| c.address.is_ipv6() == v6);
        let has_name = nodes
            .names
            .get(rank)
            .is_some_and(|n| n.contains(&main_name));
        let pick = if has_name {
            same_family.find(|c| c.interface == main_name)
        } else {
            same_family
                .filter(|c| mutual(c))
                .min_by_key(|c| (c.is_virtual, std::cmp::Reverse(c.speed_mbps.unwrap_or(0))))
        };
        if let Some(c) = pick {
            out.insert(*rank, c.clone());
        }
    }
    out
}

fn network_id(members: &Seed) -> String {
    let subnets: BTreeSet<&str> = members.values().map(|m| m.subnet.as_str()).collect();
    if let [one] = subnets.iter().collect::<Vec<_>>().as_slice() {
        return one.to_string();
    }
    let names: BTreeSet<&str> = members.values().map(|m| m.interface.as_str()).collect();
    let names: Vec<&str> = names.into_iter().collect();
    let family = if members.values().any(|m| m.address.is_ipv6()) {
        " (IPv6)"
    } else {
        ""
    };
    format!(
        "{} across {} subnets{family}",
        names.join("/"),
        subnets.len()
    )
}

/// The candidate networks: every node's addresses grouped by subnet and by interface name,
/// each group completed with the nodes that reach it (see `complete`), without repeats.
pub fn discover(nodes: &[(u32, &NodeFacts)], links: impl AsLinks) -> Vec<Network> {
    links.with_links(|links| discover_in(nodes, links))
}

fn discover_in<'a>(nodes: &[(u32, &NodeFacts)], links: &'a Links<'a>) -> Vec<Network> {
    let all = Nodes {
        addrs: nodes.iter().map(|(r, f)| (*r, addresses(f))).collect(),
        names: nodes
            .iter()
            .map(|(r, f)| {
                (
                    *r,
                    f.net.interfaces.iter().map(|i| i.name.clone()).collect(),
                )
            })
            .collect(),
    };
    let ok = std::cell::OnceCell::new();
    let mut seen: BTreeSet<Vec<(u32, IpAddr)>> = BTreeSet::new();
    let mut out = Vec::new();
    for seed in seeds(&all.addrs) {
        let members = complete(&seed, &all, links, &ok);
        let key: Vec<(u32, IpAddr)> = members.iter().map(|(r, m)| (*r, m.address)).collect();
        if seen.insert(key) {
            let mut id = network_id(&members);
            if out.iter().any(|n: &Network| n.id == id) {
                let names: BTreeSet<&str> =
                    members.values().map(|m| m.interface.as_str()).collect();
                id = format!("{id} ({})", names.into_iter().collect::<Vec<_>>().join("/"));
            }
            out.push(Network { id, members });
        }
    }
    out
}

/// Judges every network against the links and sorts best first: one pass over the links per
/// network, the pairs that worked counted in a bit matrix (2 MiB at 4096 nodes). Judged once
/// per links, networks and ranks (the advice and the report ask alike).
pub fn evaluate(networks: &[Network], links: impl AsLinks, ranks: &[u32]) -> Vec<NetworkEval> {
    links.with_links(|links| links.judged(networks, ranks, || evaluate_in(networks, links, ranks)))
}

fn evaluate_in(networks: &[Network], links: &Links, ranks: &[u32]) -> Vec<NetworkEval> {
    let n = ranks.len();
    let side = side_of(ranks.iter().copied());
    let ranks: std::collections::HashSet<u32> = ranks.iter().copied().collect();
    // A flag per rank where the ranks are a cluster's (a hash per link is most of the time).
    let flags: Vec<bool> = if side <= 1 << 20 {
        let mut f = vec![false; side as usize];
        for r in &ranks {
            f[*r as usize] = true;
        }
        f
    } else {
        Vec::new()
    };
    let is_rank = |r: u32| {
        if flags.is_empty() {
            ranks.contains(&r)
        } else {
            flags.get(r as usize).copied().unwrap_or(false)
        }
    };
    // The plain links per target from the ranks' rows, counted once for every network.
    let plain = std::cell::OnceCell::new();
    let mut evals: Vec<NetworkEval> = networks
        .iter()
        .map(|net| {
            let texts = RankText::new(net.members.iter().map(|(r, m)| (*r, m.address.to_string())));
            let mut min_tp: Option<f64> = None;
            let mut failures = Vec::new();
            let accepted =
                |to: u32, address: &Label| is_rank(to) && texts.matches(to, address, |_| false);
            let mut record = |l: &LinkResult| {
                if let Some(t) = l.throughput_gbit_s.map(f64::from) {
                    min_tp = Some(min_tp.map_or(t, |a| a.min(t)));
                }
                if l.result != LinkOutcome::Ok {
                    failures.push(l.clone());
                    false
                } else {
                    l.from != l.to
                }
            };
            let pairs_ok = match links.cells().filter(|_| !flags.is_empty()) {
                // Every link in a cell, and a rank's member address one target: each pair
                // that connected is one cell, counted from the state bytes (once for every
                // network), and the records one by one.
                Some(cells) => {
                    let counts = plain.get_or_init(|| cells.plain_counts(&flags));
                    let mut ok: usize = cells
                        .targets()
                        .iter()
                        .zip(counts)
                        .filter(|(t, _)| accepted(t.to, &t.address))
                        .map(|(_, c)| *c as usize)
                        .sum();
                    for l in links.records() {
                        if is_rank(l.from) && accepted(l.to, &l.address) && record(l) {
                            ok += 1;
                        }
                    }
                    ok
                }
                None => {
                    let mut ok_pairs = PairSet::new(side);
                    let mut ok_records: Vec<(u32, u32)> = Vec::new();
                    // Counted from the table's bytes: the links that connected to a member
                    // address (the target judged once), and the records one by one.
                    links.scan(
                        |to, address| accepted(to, address).then_some(()),
                        |l, ()| {
                            if l.from != l.to && is_rank(l.from) {
                                ok_pairs.insert(l.from, l.to);
                            }
                        },
                        |l, ()| {
                            if is_rank(l.from) && record(l) {
                                ok_records.push((l.from, l.to));
                            }
                        },
                    );
                    for (a, b) in ok_records {
                        ok_pairs.insert(a, b);
                    }
                    ok_pairs.done().len()
                }
            };
            let all_members = ranks.iter().all(|r| net.members.contains_key(r));
            let pairs_total = n * n.saturating_sub(1);
            NetworkEval {
                pairs_ok,
                pairs_total,
                fully_connected: all_members && n > 0 && pairs_ok == pairs_total,
                min_throughput_gbit_s: min_tp,
                min_rated_mbps: net.members.values().filter_map(|m| m.speed_mbps).min(),
                all_physical: net.members.values().all(|m| !m.is_virtual),
                same_name: {
                    let mut names = net.members.values().map(|m| &m.interface);
                    let first = names.next();
                    names.all(|x| Some(x) == first)
                },
                failures,
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
    use crate::core::covering_prefix;
    use crate::core::{IfKind, NetFacts};

    fn iface(name: &str, addr: &str, speed: Option<u64>, kind: IfKind) -> Interface {
        let (addr, prefix) = match addr.split_once('/') {
            Some((a, p)) => (a, p.parse().unwrap()),
            None => (addr, 24),
        };
        let a = IfAddr {
            addr: addr.parse().unwrap(),
            prefix,
        };
        let (ipv4, ipv6) = if a.addr.is_ipv6() {
            (vec![], vec![a])
        } else {
            (vec![a], vec![])
        };
        Interface {
            name: name.into(),
            kind,
            up: true,
            oper_state: "up".into(),
            mtu: Some(1500),
            speed_mbps: speed,
            ipv4,
            ipv6,
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
            throughput_gbit_s: tp.map(|t| t as f32),
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

    /// Every ordered pair connects to every address of the other node (a fully routed fabric).
    fn all_ok(facts: &[NodeFacts]) -> Vec<LinkResult> {
        let mut out = Vec::new();
        for (from, _) in facts.iter().enumerate() {
            for (to, f) in facts.iter().enumerate().filter(|(t, _)| *t != from) {
                for a in f.net.interfaces.iter().flat_map(|i| i.usable_addrs()) {
                    let addr = a.addr.to_string();
                    out.push(link(from as u32, to as u32, &addr, LinkOutcome::Ok, None));
                }
            }
        }
        out
    }

    #[test]
    fn groups_by_subnet_and_names_members() {
        let facts = two_nets();
        let nodes = ranked(&facts);
        let nets = discover(&nodes, &[]);
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
        let links = vec![
            link(0, 1, "10.200.1.2", LinkOutcome::Ok, Some(0.1)),
            link(1, 0, "10.200.1.1", LinkOutcome::Ok, Some(0.1)),
            link(0, 1, "10.200.2.2", LinkOutcome::Ok, Some(9.0)),
            link(1, 0, "10.200.2.1", LinkOutcome::Ok, Some(8.0)),
            // docker0: both nodes have the same address; the connection reached the wrong host.
            link(0, 1, "10.200.255.1", LinkOutcome::Error, None),
            link(1, 0, "10.200.255.1", LinkOutcome::Error, None),
        ];
        let evals = evaluate(&discover(&nodes, &links), &links, &[0, 1]);
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
        let links = vec![
            link(0, 1, "10.200.2.2", LinkOutcome::Ok, None),
            link(1, 0, "10.200.2.1", LinkOutcome::Timeout, None),
        ];
        let evals = evaluate(&discover(&nodes, &links), &links, &[0, 1]);
        assert!(choose(&evals).is_none());
        assert_eq!(evals[0].network.id, "10.200.2.0/24");
        assert_eq!(evals[0].failures.len(), 1);
    }

    /// Three racks, each node alone on its own /24 behind a router, plus a per-rack management net.
    fn routed(prefix: u8) -> Vec<NodeFacts> {
        (0..3)
            .map(|r| {
                node(vec![
                    iface(
                        "eth0",
                        &format!("10.200.{}.1/{prefix}", 20 + r),
                        Some(1000),
                        IfKind::Physical,
                    ),
                    iface(
                        "eth1",
                        &format!("10.200.{}.1/{prefix}", 10 + r),
                        Some(100_000),
                        IfKind::Physical,
                    ),
                ])
            })
            .collect()
    }

    #[test]
    fn a_routed_fabric_is_one_network_across_subnets() {
        for prefix in [24, 32] {
            let facts = routed(prefix);
            let nodes = ranked(&facts);
            let links = all_ok(&facts);
            let evals = evaluate(&discover(&nodes, &links), &links, &[0, 1, 2]);
            let best = choose(&evals).expect("the routed eth1 network reaches every node");
            assert_eq!(best.common_name(), Some("eth1"), "/{prefix}");
            assert_eq!(best.network.id, "eth1 across 3 subnets");
            assert!(best.network.routed());
            assert_eq!(best.pairs_ok, 6);
            assert_eq!(
                best.network.sources(),
                vec![
                    format!("10.200.10.{}/{prefix}", if prefix == 32 { 1 } else { 0 }),
                    format!("10.200.11.{}/{prefix}", if prefix == 32 { 1 } else { 0 }),
                    format!("10.200.12.{}/{prefix}", if prefix == 32 { 1 } else { 0 }),
                ]
            );
            // eth0 is a candidate too, chosen second (slower rated speed).
            assert!(evals.iter().filter(|e| e.fully_connected).count() >= 2);
        }
    }

    #[test]
    fn a_node_whose_firewall_breaks_a_routed_network_stays_a_member() {
        let facts = routed(24);
        let nodes = ranked(&facts);
        let mut links = all_ok(&facts);
        for l in links.iter_mut().filter(|l| l.to == 2) {
            l.result = LinkOutcome::Timeout;
        }
        let nets = discover(&nodes, &links);
        let eth1 = nets
            .iter()
            .find(|n| n.members.get(&0).is_some_and(|m| m.interface == "eth1"))
            .unwrap();
        assert_eq!(eth1.members.len(), 3, "{eth1:?}");
        assert_eq!(eth1.members[&2].interface, "eth1");
        let evals = evaluate(&nets, &links, &[0, 1, 2]);
        assert!(choose(&evals).is_none());
    }

    #[test]
    fn different_names_join_by_reachability_and_a_dead_nic_is_not_replaced() {
        // Rank 2 names its data NIC ens5; rank 1's data NIC has no carrier.
        let mut facts = routed(24);
        facts[2].net.interfaces[1].name = "ens5".into();
        facts[1].net.interfaces[1].up = false;
        facts[1].net.interfaces[1].oper_state = "lowerlayerdown".into();
        let nodes = ranked(&facts);
        let links = all_ok(&facts);
        let nets = discover(&nodes, &links);
        let data = nets
            .iter()
            .find(|n| n.members.get(&0).is_some_and(|m| m.interface == "eth1"))
            .unwrap();
        let names: Vec<(u32, &str)> = data
            .members
            .iter()
            .map(|(r, m)| (*r, m.interface.as_str()))
            .collect();
        // Rank 1's eth0 reaches everything, but it is another network: it does not stand in
        // for the dead eth1 (every node's eth0 is a network of its own).
        assert!(names.contains(&(2, "ens5")), "{names:?}");
        assert!(!data.members.contains_key(&1), "{names:?}");
    }

    #[test]
    fn ipv6_addresses_are_candidates_of_their_own_family() {
        let facts: Vec<NodeFacts> = (0..2)
            .map(|r| {
                node(vec![
                    iface(
                        "eth0",
                        &format!("10.200.1.{}", r + 1),
                        Some(1000),
                        IfKind::Physical,
                    ),
                    iface(
                        "eth1",
                        &format!("fd00:200:2::{}/64", r + 1),
                        Some(100_000),
                        IfKind::Physical,
                    ),
                ])
            })
            .collect();
        let nodes = ranked(&facts);
        let links = all_ok(&facts);
        let evals = evaluate(&discover(&nodes, &links), &links, &[0, 1]);
        let best = choose(&evals).unwrap();
        assert_eq!(best.network.id, "fd00:200:2::/64");
        assert!(best.network.is_ipv6());
        for e in &evals {
            let v6: BTreeSet<bool> = e
                .network
                .members
                .values()
                .map(|m| m.address.is_ipv6())
                .collect();
            assert_eq!(v6.len(), 1, "families mixed in {}", e.network.id);
        }
    }

    #[test]
    fn covering_prefix_is_the_smallest_that_holds_every_address() {
        let a = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            covering_prefix(&[a("10.200.10.1"), a("10.200.11.2"), a("10.200.12.3")]).unwrap(),
            "10.200.8.0/21"
        );
        assert_eq!(
            covering_prefix(&[a("10.200.1.1")]).unwrap(),
            "10.200.1.1/32"
        );
        assert_eq!(
            covering_prefix(&[a("fd00:200:1::1"), a("fd00:200:2::1")]).unwrap(),
            "fd00:200::/46"
        );
        assert_eq!(covering_prefix(&[a("10.0.0.1"), a("fd00::1")]), None);
    }
}
