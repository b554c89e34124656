//! `cluster.nat`: a node whose join reached rank 0 from an address none of its interfaces hold sits behind NAT, so the address NCCL and gloo advertise for it is one its peers cannot reach.

use crate::core::ClusterInput;
use crate::core::cluster_common::GROUP_CHARS;
use crate::core::{Finding, Fix, NodeFacts, Status};
use serde_json::json;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// The finding's id.
pub(crate) use crate::link::ids::NAT as ID;

/// Addresses of a node named in a summary before "and N more".
const ADDRS_SHOWN: usize = 3;

/// A node seen from an address it does not hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Translated {
    pub rank: u32,
    /// Where rank 0 saw its join come from.
    pub seen: IpAddr,
    /// Its own non-loopback addresses, in interface order.
    pub holds: Vec<IpAddr>,
}

/// `a` as an address, an IPv4-mapped IPv6 written as IPv4 (the same host either way).
fn parse_canonical(a: &str) -> Option<IpAddr> {
    let ip: IpAddr = a
        .trim()
        .trim_matches(|c| c == '[' || c == ']')
        .parse()
        .ok()?;
    Some(match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    })
}

/// Whether `facts` say the node was seen from an address it does not hold; `None` when that
/// cannot be told (no join address, no interfaces read, or a loopback join: rank 0 on the
/// same host).
fn translated_node(rank: u32, facts: &NodeFacts) -> Option<Translated> {
    let seen = parse_canonical(facts.joined_from.as_deref()?)?;
    if seen.is_loopback() || seen.is_unspecified() {
        return None;
    }
    let ifaces = &facts.net.interfaces;
    if ifaces.is_empty() || facts.net.error.is_some() {
        return None;
    }
    let all = || {
        ifaces
            .iter()
            .flat_map(|i| i.ipv4.iter().chain(i.ipv6.iter()))
    };
    // Any address of any interface counts: a secondary address, a pod's address on its own
    // interface, a VIP a node holds are all the node's own.
    if all().any(|a| a.addr == seen) {
        return None;
    }
    // The addresses a peer could be told (link-local ones are no one's to reach).
    let usable: Vec<IpAddr> = all()
        .map(|a| a.addr)
        .filter(crate::net::is_usable_addr)
        .collect();
    let holds = if usable.is_empty() {
        all().map(|a| a.addr).filter(|a| !a.is_loopback()).collect()
    } else {
        usable
    };
    Some(Translated { rank, seen, holds })
}

/// Every joined node seen from an address it does not hold, in rank order.
pub(crate) fn translated(input: &ClusterInput) -> Vec<Translated> {
    let mut out: Vec<Translated> = input
        .nodes
        .iter()
        .filter_map(|(r, f)| translated_node(*r, f))
        .collect();
    out.sort_by_key(|t| t.rank);
    out
}

fn addrs_text(addrs: &[IpAddr]) -> String {
    let shown: Vec<String> = addrs
        .iter()
        .take(ADDRS_SHOWN)
        .map(|a| a.to_string())
        .collect();
    let more = addrs.len().saturating_sub(ADDRS_SHOWN);
    match (shown.is_empty(), more) {
        (true, _) => "no address but loopback".to_string(),
        (false, 0) => format!("only {}", shown.join(", ")),
        (false, m) => format!("only {} and {m} more", shown.join(", ")),
    }
}

/// One `fail` per node behind NAT (each leaves the healthy set), or one `pass`.
pub(crate) fn nat(input: &ClusterInput) -> Vec<Finding> {
    let found = translated(input);
    if found.is_empty() {
        let checked = input
            .nodes
            .iter()
            .filter(|(_, f)| f.joined_from.is_some())
            .count();
        let (status, summary) = if checked == 0 {
            (
                Status::Skip,
                "no node's join address is known (facts from files, or an older release)"
                    .to_string(),
            )
        } else {
            (
                Status::Pass,
                format!("each of the {checked} nodes joined from an address its interfaces hold"),
            )
        };
        return vec![Finding::new(ID, status, "join addresses", summary).with("checked", checked)];
    }
    // Several nodes seen as one address: one NAT (a host's MASQUERADE, a cloud NAT gateway, a
    // proxy in front of the master port) translates them all.
    let mut sharing: BTreeMap<IpAddr, Vec<u32>> = BTreeMap::new();
    for t in &found {
        sharing.entry(t.seen).or_default().push(t.rank);
    }
    // Each shared address's note is written once (a hostlist of thousands costs O(n) each).
    let notes: BTreeMap<IpAddr, String> = sharing
        .iter()
        .filter(|(_, ranks)| ranks.len() > 1)
        .map(|(seen, ranks)| {
            (
                *seen,
                format!(
                    "; {} nodes ({}) all arrive as {seen}: one NAT translates them",
                    ranks.len(),
                    input.hosts_within(ranks, GROUP_CHARS)
                ),
            )
        })
        .collect();
    found
        .iter()
        .map(|t| {
            let who = input.who(t.rank);
            let holds = addrs_text(&t.holds);
            let advertised = t
                .holds
                .first()
                .map_or_else(|| "its own address".to_string(), |a| a.to_string());
            let same = sharing.get(&t.seen).map_or(0, Vec::len);
            let shared_note = notes.get(&t.seen).map_or("", String::as_str);
            Finding::new(
                ID,
                Status::Fail,
                format!("rank {}", t.rank),
                format!(
                    "{who} connects from {} but its interfaces hold {holds}: it sits behind NAT, so its peers cannot reach the address NCCL and gloo will advertise ({advertised}){shared_note}",
                    t.seen
                ),
            )
            .on_node(Some(t.rank))
            .with("rank", t.rank)
            .with("host", input.host(t.rank))
            .with("seen_from", t.seen.to_string())
            .with(
                "addresses",
                t.holds.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            )
            .with("same_source_nodes", same)
            .fix(
                Fix::new(format!(
                    "Run {who} with the host's network instead of a NATed one (Docker: `--network=host`; Kubernetes: `hostNetwork: true`), or give it an address the other nodes can reach and route to directly; publishing only the master port is not enough, since NCCL and gloo connect to every rank on random ports"
                ))
                .command("ip -br addr"),
            )
        })
        .collect()
}

/// Appends to the symptom findings (a failed link into a node behind NAT, the network it is
/// absent from) that the cause is `cluster.nat`, in words and in `evidence.caused_by`.
pub(crate) fn point_symptoms(input: &ClusterInput, findings: &mut [Finding]) {
    let found = translated(input);
    if found.is_empty() {
        return;
    }
    let behind: Vec<u32> = found.iter().map(|t| t.rank).collect();
    for f in findings
        .iter_mut()
        .filter(|f| f.status == Status::Fail && f.id.starts_with("link."))
    {
        let named = involved_ranks(f);
        let mine: Vec<u32> = behind
            .iter()
            .copied()
            .filter(|r| named.contains(r))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let who = if mine.len() == 1 {
            input.who(mine[0])
        } else {
            format!(
                "{} nodes ({})",
                mine.len(),
                input.hosts_within(&mine, GROUP_CHARS)
            )
        };
        // The symptom's own guess (a route, a firewall) gives way to the cause.
        let head = f
            .summary
            .split_once(": ")
            .map_or(f.summary.clone(), |(h, _)| h.to_string());
        f.summary = format!("{head}: the cause: {who} sits behind NAT (see {ID})");
        f.fix = Some(Fix::new(format!(
            "The cause is {ID}: run {who} with the host's network (or an address the others reach directly), then rerun"
        )));
        f.evidence.insert("caused_by".into(), json!([ID]));
    }
}

/// The ranks a link finding is about: its node, its destination, its absent members.
fn involved_ranks(f: &Finding) -> Vec<u32> {
    let mut out: Vec<u32> = f.node.into_iter().collect();
    for key in ["to", "node", "cause_node"] {
        if let Some(r) = f.evidence.get(key).and_then(|v| v.as_u64()) {
            out.push(r as u32);
        }
    }
    if let Some(a) = f.evidence.get("sources").and_then(|v| v.as_array()) {
        out.extend(
            a.iter()
                .filter_map(|v| v["from"].as_u64())
                .map(|r| r as u32),
        );
    }
    if let Some(a) = f.evidence.get("absent").and_then(|v| v.as_array()) {
        out.extend(a.iter().filter_map(|v| v.as_u64()).map(|r| r as u32));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{IfAddr, LinkOutcome};
    use crate::testkit::*;

    fn joined_from_own(c: &mut Cluster) {
        for (r, f) in c.facts.iter_mut().enumerate() {
            f.joined_from = Some(format!("10.0.0.{}", r + 1));
        }
    }

    /// Rank 1 is a container on a bridge: its interface holds 172.18.0.2, its join arrives
    /// as its host's 10.0.0.2, and no peer reaches 172.18.0.2.
    fn behind_nat(n: u32, natted: &[u32]) -> Cluster {
        let mut c = Cluster::healthy(n);
        joined_from_own(&mut c);
        for r in natted {
            let f = &mut c.facts[*r as usize];
            f.net.interfaces[0].ipv4[0].addr = format!("172.18.{}.2", r % 250).parse().unwrap();
            for from in (0..n).filter(|x| x != r) {
                c.set(from, *r, LinkOutcome::Timeout);
            }
        }
        c
    }

    #[test]
    fn a_node_behind_nat_is_named_with_both_addresses_and_the_fix() {
        let c = behind_nat(2, &[1]);
        let fs = c.findings();
        let f = only(&fs, ID);
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.node, Some(1));
        assert!(
            f.summary.starts_with(
                "rank 1 (node02) connects from 10.0.0.2 but its interfaces hold only 172.18.1.2, 172.17.0.1: it sits behind NAT"
            ),
            "{}",
            f.summary
        );
        assert_eq!(f.evidence["seen_from"], "10.0.0.2");
        let fix = f.fix.as_ref().unwrap();
        assert!(fix.hint.contains("--network=host") && fix.hint.contains("hostNetwork: true"));
        // The symptom names its cause.
        let sym: Vec<&Finding> = with_id(&fs, crate::link::ids::UNREACHABLE)
            .into_iter()
            .filter(|f| f.status == Status::Fail)
            .collect();
        assert!(!sym.is_empty(), "{fs:#?}");
        for s in sym {
            assert!(
                s.summary.contains("sits behind NAT (see cluster.nat)"),
                "{}",
                s.summary
            );
            assert_eq!(s.evidence["caused_by"], json!([ID]));
        }
    }

    #[test]
    fn legitimate_sources_are_not_nat() {
        let mut c = Cluster::healthy(3);
        joined_from_own(&mut c);
        // An IPv4-mapped IPv6 source, a loopback join (rank 0 on the same host), and a
        // secondary address on the node's interface.
        c.facts[0].joined_from = Some("127.0.0.1".into());
        c.facts[1].joined_from = Some("::ffff:10.0.0.2".into());
        c.facts[2].net.interfaces[0].ipv4.push(IfAddr {
            addr: "10.0.0.33".parse().unwrap(),
            prefix: 24,
        });
        c.facts[2].joined_from = Some("10.0.0.33".into());
        let f = only(&c.findings(), ID).clone();
        assert_eq!(f.status, Status::Pass, "{f:#?}");
        assert_eq!(f.evidence["checked"], 3);
        // Facts without a join address (from files): nothing to judge.
        let mut c = Cluster::healthy(2);
        for f in &mut c.facts {
            f.joined_from = None;
        }
        assert_eq!(only(&c.findings(), ID).status, Status::Skip);
        // Interfaces not read: no claim.
        let mut c = behind_nat(2, &[1]);
        c.facts[1].net.interfaces.clear();
        c.facts[1].net.error = Some("netlink: permission denied".into());
        assert_ne!(only(&c.findings(), ID).status, Status::Fail);
    }

    #[test]
    fn a_pod_address_on_its_own_interface_is_not_nat() {
        let mut c = Cluster::healthy(2);
        joined_from_own(&mut c);
        c.facts[1].net.interfaces[0].name = "eth0".into();
        c.facts[1].net.interfaces[0].ipv4[0].addr = "10.244.3.17".parse().unwrap();
        c.facts[1].joined_from = Some("10.244.3.17".into());
        assert_eq!(only(&c.findings(), ID).status, Status::Pass);
    }

    /// `n` nodes of which every one but rank 0 arrives as 10.9.9.9 from 172.18.0.2, built
    /// from facts alone (the judgment needs no links).
    fn one_nat_for_all(n: u32) -> Cluster {
        let facts = (0..n)
            .map(|r| {
                let mut f = node(r % 200);
                f.hostname = format!("node{:04}", r + 1);
                let own = if r == 0 { "10.0.0.1" } else { "172.18.0.2" };
                f.net.interfaces[0].ipv4[0].addr = own.parse().unwrap();
                f.joined_from = Some(if r == 0 { own } else { "10.9.9.9" }.into());
                f
            })
            .collect();
        Cluster {
            facts,
            links: Vec::new(),
            nnodes: n,
            ..Cluster::healthy(1)
        }
    }

    #[test]
    fn many_nodes_behind_one_nat_share_one_bounded_note_at_any_size() {
        for n in [2u32, 3, 4096] {
            let c = one_nat_for_all(n);
            let nodes: Vec<(u32, &NodeFacts)> = c
                .facts
                .iter()
                .enumerate()
                .map(|(r, f)| (r as u32, f))
                .collect();
            // This judgment alone: the others' cost at 4096 nodes is theirs to test.
            let fs = super::nat(&ClusterInput::of_nodes(&nodes, n));
            let nat = with_id(&fs, ID);
            assert_eq!(nat.len(), n as usize - 1);
            assert!(nat.iter().all(|f| f.status == Status::Fail));
            let longest = nat.iter().map(|f| f.summary.len()).max().unwrap_or(0);
            assert!(longest < 400, "{longest}: {}", nat[0].summary);
            if n > 2 {
                assert!(
                    nat[0].summary.contains(&format!("{} nodes (node", n - 1)),
                    "{}",
                    nat[0].summary
                );
            } else {
                assert!(!nat[0].summary.contains("one NAT translates"));
            }
        }
    }

    #[test]
    fn two_nodes_judged_alike() {
        let c = behind_nat(2, &[0]);
        let fs = c.findings();
        assert_eq!(only(&fs, ID).node, Some(0));
    }
}
