//! `link.unreachable`: pairs of nodes that cannot connect on the judged network, one finding per destination (or one for a node that fails with every peer), with the command that opens it.

mod destination;
mod isolated;

use crate::core::ClusterInput;
use crate::core::cluster_common::{LIST_CAP, MemberAddrs, host_port, rank_map, ranks_phrase};
use crate::core::{Finding, FirewallFacts, Fix, LinkOutcome, LinkResult, Status};
use crate::core::{Links, PairSet, side_of};
use crate::core::{Member, NetworkEval};
use crate::firewall::{Direction, accept_peer_commands};
use crate::link::attribution::{
    Attribution, Culprit, attribute, culprit_fix, culprit_phrase, undecided_fix,
};
use destination::*;
use isolated::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The evaluation the link checks judge: the chosen network, else the best evaluated one.
fn judged_network<'a>(input: &'a ClusterInput) -> Option<&'a NetworkEval> {
    input.chosen.or_else(|| input.evals.first())
}

fn other_networks(input: &ClusterInput, judged: Option<&NetworkEval>) -> Value {
    let judged_id = judged.map(|e| e.network.id.as_str());
    Value::Array(
        input
            .evals
            .iter()
            .filter(|e| Some(e.network.id.as_str()) != judged_id)
            .map(|e| {
                json!({
                    "network": e.network.id,
                    "ok": e.pairs_ok,
                    "total": e.pairs_total,
                })
            })
            .collect(),
    )
}

fn interfaces_by_rank(eval: &NetworkEval) -> Value {
    let m: BTreeMap<u32, String> = eval
        .network
        .members
        .iter()
        .map(|(r, m)| (*r, m.interface.clone()))
        .collect();
    rank_map(&m)
}

/// Commands that make a node accept every connection from `source` (a prefix), for the
/// firewall it runs and the address family.
pub(crate) fn accept_subnet_commands(fw: Option<&FirewallFacts>, source: &str) -> Vec<String> {
    accept_peer_commands(fw, Direction::Incoming, source)
}

/// What happened on one ordered pair on the judged network.
#[derive(Clone, Copy)]
enum PairState<'a> {
    Ok,
    Failed(&'a LinkResult),
    NotMeasured,
}

/// Every ordered pair's state, indexed once (looked up, never scanned: the judgment stays
/// linear in the links at thousands of nodes). The pairs that worked, most of a million at a
/// thousand nodes, are a sorted list of 8 bytes each; only the failed ones are a map.
struct Pairs<'a> {
    ok: PairSet,
    /// Per destination rank: the members that connected to it (each once), when the set can
    /// tell (a bit matrix); a destination every other member reached has no finding.
    ok_into: Option<Vec<u32>>,
    /// Pairs with no link that worked: the first failed link.
    failed: HashMap<(u32, u32), &'a LinkResult>,
}

impl<'a> Pairs<'a> {
    /// The pairs of the links to `eval`'s member addresses: the table's cells read as bytes,
    /// the records one by one.
    fn of(links: &'a Links<'a>, eval: &NetworkEval, side: u32, joined: &[u32]) -> Pairs<'a> {
        let members = MemberAddrs::of(eval);
        let mut failed_links: Vec<&'a LinkResult> = Vec::new();
        let mut ok_records: Vec<(u32, u32)> = Vec::new();
        let mut ok = PairSet::new(side);
        let mut member = vec![false; side as usize];
        for r in joined
            .iter()
            .filter(|r| eval.network.members.contains_key(r))
        {
            member[*r as usize] = true;
        }
        let mut ok_into = Some(vec![0u32; side as usize]);
        let count = |ok_into: &mut Option<Vec<u32>>, new: Option<bool>, from: u32, to: u32| match (
            new,
            ok_into.as_mut(),
        ) {
            (None, _) => *ok_into = None,
            (Some(true), Some(into)) if member.get(from as usize) == Some(&true) => {
                if let Some(n) = into.get_mut(to as usize) {
                    *n += 1;
                }
            }
            _ => {}
        };
        links.scan(
            |to, address| members.is_member(to, address).then_some(()),
            |l, ()| {
                if l.from != l.to {
                    let new = ok.insert(l.from, l.to);
                    count(&mut ok_into, new, l.from, l.to);
                }
            },
            |l, ()| {
                if l.from == l.to {
                    // Not a pair.
                } else if l.result == LinkOutcome::Ok {
                    ok_records.push((l.from, l.to));
                } else {
                    failed_links.push(l);
                }
            },
        );
        for (a, b) in ok_records {
            let new = ok.insert(a, b);
            count(&mut ok_into, new, a, b);
        }
        let ok = ok.done();
        let mut failed = HashMap::new();
        for l in failed_links {
            if !ok.contains(l.from, l.to) {
                failed.entry((l.from, l.to)).or_insert(l);
            }
        }
        Pairs {
            ok,
            ok_into,
            failed,
        }
    }

    fn state(&self, from: u32, to: u32) -> PairState<'a> {
        if self.ok.contains(from, to) {
            return PairState::Ok;
        }
        self.failed
            .get(&(from, to))
            .map_or(PairState::NotMeasured, |l| PairState::Failed(l))
    }
}

/// The outcome that best explains a destination's failures: a filter (timeout) first, then refused, no route, error.
fn dominant_outcome(failed: &[&LinkResult]) -> LinkOutcome {
    [
        LinkOutcome::Timeout,
        LinkOutcome::Refused,
        LinkOutcome::Unreachable,
    ]
    .into_iter()
    .find(|o| failed.iter().any(|l| l.result == *o))
    .unwrap_or(LinkOutcome::Error)
}

pub(crate) fn unreachable_links(input: &ClusterInput) -> Vec<Finding> {
    let joined: Vec<u32> = input.joined().into_iter().collect();
    if joined.len() < 2 {
        return vec![
            Finding::new(
                crate::link::ids::UNREACHABLE,
                Status::Skip,
                "links",
                "fewer than two nodes joined: no pairs to test",
            )
            .with("joined", &joined),
        ];
    }
    let Some(eval) = judged_network(input) else {
        return vec![
            Finding::new(
                crate::link::ids::UNREACHABLE,
                Status::Fail,
                "links",
                "the nodes share no network: no up interface with a usable IPv4 or IPv6 address was found to test",
            )
            .with("joined", &joined)
            .fix(
                Fix::new("Give every node an address on a common network (see net.no-interface on each node)")
                    .command("ip -br addr"),
            ),
        ];
    };
    let others = other_networks(input, Some(eval));
    let members: Vec<u32> = joined
        .iter()
        .copied()
        .filter(|r| eval.network.members.contains_key(r))
        .collect();
    let absent: Vec<u32> = joined
        .iter()
        .copied()
        .filter(|r| !eval.network.members.contains_key(r))
        .collect();
    let side = side_of(joined.iter().copied());
    let pairs = Pairs::of(input.links, eval, side, &joined);
    let mut out = Vec::new();
    if !absent.is_empty() {
        out.push(absent_members(input, eval, &absent, &others));
    }
    // A node failing with every peer is the cause: one finding on it, not n-1 link findings,
    // however many such nodes there are; the pairs left are judged per destination.
    let isolated = isolated_nodes(&pairs, &members);
    let alone = isolated.len() == 1 && only_involving(&pairs, &members, &isolated);
    for x in &isolated {
        // Its failures with the other isolated nodes are theirs too: the direction and the
        // cause are read from the pairs with the working nodes.
        let peers: Vec<u32> = members
            .iter()
            .copied()
            .filter(|m| m == x || !isolated.contains(m))
            .collect();
        if let Some(f) = isolated_node(input, eval, &pairs, &peers, *x, alone, &others) {
            out.push(f);
        }
    }
    for to in members.iter().filter(|m| !isolated.contains(m)) {
        // Every other member connected to it: nothing to say (no pair read).
        let reached = pairs.ok_into.as_ref().and_then(|v| v.get(*to as usize));
        if reached.is_some_and(|n| *n as usize + 1 == members.len()) {
            continue;
        }
        if let Some(f) =
            unreachable_destination(input, eval, &pairs, &members, &isolated, *to, &others)
        {
            out.push(f);
        }
    }
    if out.is_empty() {
        if eval.fully_connected || input.chosen.is_some() {
            out.push(
                Finding::new(
                    crate::link::ids::UNREACHABLE,
                    Status::Pass,
                    eval.network.id.clone(),
                    format!(
                        "every node reaches every other on {} ({} of {} ordered pairs)",
                        eval.network.id, eval.pairs_ok, eval.pairs_total
                    ),
                )
                .with("network", &eval.network.id)
                .with("interfaces", interfaces_by_rank(eval))
                .with("pairs_ok", eval.pairs_ok)
                .with("pairs_total", eval.pairs_total)
                .with("other_networks", others),
            );
        } else {
            out.push(
                Finding::new(
                    crate::link::ids::UNREACHABLE,
                    Status::Fail,
                    eval.network.id.clone(),
                    format!(
                        "no network connects every node: the best, {}, has {} of {} ordered pairs connected",
                        eval.network.id, eval.pairs_ok, eval.pairs_total
                    ),
                )
                .with("network", &eval.network.id)
                .with("pairs_ok", eval.pairs_ok)
                .with("pairs_total", eval.pairs_total)
                .with("other_networks", others)
                .fix(Fix::new("Rerun preflight on every node; if it repeats, send the JSON report (links[]) with the issue")),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;

    #[test]
    fn dropped_high_ports_fail_once_for_the_filtering_node_with_its_firewall_command() {
        let mut c = Cluster::healthy(3);
        c.set(0, 2, LinkOutcome::Timeout);
        c.set(1, 2, LinkOutcome::Timeout);
        c.facts[2].firewall.ufw = Some("active".into());
        let fs = c.findings();
        let v = with_id(&fs, crate::link::ids::UNREACHABLE);
        assert_eq!(v.len(), 1, "{v:#?}");
        let f = v[0];
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.node, Some(2));
        // Rank 2 fails with both of its peers: the node is the cause, said once.
        assert_eq!(f.subject, "2<->* eno1");
        assert!(f.summary.contains("rank 2 (node03)"), "{}", f.summary);
        assert!(f.summary.contains("timeout inbound"), "{}", f.summary);
        assert!(f.summary.contains("10.0.0.3"), "{}", f.summary);
        assert_eq!(commands(f), vec!["ufw allow from 10.0.0.0/24"]);
        assert_eq!(f.evidence["inbound"][0]["result"], json!("timeout"));
        assert_eq!(f.evidence["inbound"][0]["port"], json!(40002));
        assert_eq!(
            f.evidence["other_networks"][0]["network"],
            json!("172.17.0.0/24")
        );
        // Nothing is chosen, so the MTU and speed checks have nothing to judge.
        assert_eq!(
            only(&fs, crate::link::ids::MTU_MISMATCH).status,
            Status::Skip
        );
    }

    #[test]
    fn a_node_failing_with_every_peer_both_ways_is_one_finding_naming_its_firewall() {
        let mut c = Cluster::healthy(4);
        for peer in [0, 1, 3] {
            c.set(peer, 2, LinkOutcome::Timeout);
            c.set(2, peer, LinkOutcome::Timeout);
        }
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::UNREACHABLE);
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.node, Some(2));
        assert!(
            f.summary.contains(
                "rank 2 (node03) fails with every peer on eno1 at 10.0.0.3 (timeout both ways"
            ),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("its firewall drops"), "{}", f.summary);
        assert_eq!(f.evidence["cause"], json!("firewall"));
        assert_eq!(f.evidence["inbound"].as_array().unwrap().len(), 3);
        assert_eq!(f.evidence["outbound"].as_array().unwrap().len(), 3);
        assert_eq!(
            commands(f),
            vec!["iptables -I INPUT -s 10.0.0.0/24 -j ACCEPT"]
        );
    }

    #[test]
    fn a_node_whose_outgoing_connections_all_fail_gets_an_output_fix() {
        let mut c = Cluster::healthy(3);
        for peer in [0, 1] {
            c.set(2, peer, LinkOutcome::Timeout);
        }
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::UNREACHABLE);
        assert_eq!(f.node, Some(2));
        assert_eq!(f.evidence["direction"], json!("outbound"));
        assert!(
            f.summary.contains("its own outgoing connections"),
            "{}",
            f.summary
        );
        // Derived from the same fact as the wording: OUTPUT, not INPUT.
        assert_eq!(
            commands(f),
            vec!["iptables -I OUTPUT -d 10.0.0.0/24 -j ACCEPT"]
        );
        assert!(f.fix.as_ref().unwrap().hint.contains("OUTPUT path"));
        // Both ways with only its output rules read as dropping (a drop policy drops its
        // answers too): the output fix alone.
        for peer in [0, 1] {
            c.set(peer, 2, LinkOutcome::Timeout);
        }
        c.facts[2].firewall.output = Some(crate::core::InputChain {
            policy: "drop".into(),
            name: Some("filter OUTPUT".into()),
            ..Default::default()
        });
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::UNREACHABLE);
        assert_eq!(
            commands(f),
            vec!["iptables -I OUTPUT -d 10.0.0.0/24 -j ACCEPT"]
        );
        assert!(
            f.summary.contains("filter OUTPUT policy drop"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn a_node_with_its_interface_down_or_no_route_is_told_by_the_outcome() {
        let mut c = Cluster::healthy(3);
        for peer in [0, 1] {
            c.set(peer, 2, LinkOutcome::Unreachable);
            c.set(2, peer, LinkOutcome::Unreachable);
        }
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::UNREACHABLE);
        assert_eq!(f.evidence["cause"], json!("route"), "{f:#?}");
        assert!(f.summary.contains("no route"), "{}", f.summary);
        c.facts[2].net.interfaces[0].up = false;
        c.facts[2].net.interfaces[0].oper_state = "down".into();
        // A node whose interface is down has no address on the network: named with why.
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::UNREACHABLE);
        assert_eq!(f.evidence["absent"], json!([2]));
        assert_eq!(f.evidence["interfaces_down"][0]["interface"], json!("eno1"));
        assert!(
            f.summary.contains("its interface eno1 is not up"),
            "{}",
            f.summary
        );
        assert!(commands(f).contains(&"ip link set dev eno1 up".to_string()));
    }

    #[test]
    fn inbound_only_filtering_is_one_finding_and_a_single_pair_stays_a_link_finding() {
        let mut c = Cluster::healthy(3);
        c.set(0, 2, LinkOutcome::Timeout);
        c.set(1, 2, LinkOutcome::Timeout);
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::UNREACHABLE);
        assert_eq!(f.evidence["direction"], json!("inbound"));
        assert!(f.summary.contains("fails with every peer"), "{}", f.summary);
        // One failing pair of three nodes: a link finding, not a node's.
        let mut c = Cluster::healthy(3);
        c.set(0, 2, LinkOutcome::Timeout);
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::UNREACHABLE);
        assert!(!f.summary.contains("every peer"), "{}", f.summary);
        assert_eq!(f.subject, "0->2 eno1");
        // Two nodes: a failing pair cannot tell which side is the cause.
        let mut c = Cluster::healthy(2);
        c.set(0, 1, LinkOutcome::Timeout);
        c.set(1, 0, LinkOutcome::Timeout);
        let fs = c.findings();
        assert!(
            with_id(&fs, crate::link::ids::UNREACHABLE)
                .iter()
                .all(|f| !f.summary.contains("every peer"))
        );
    }

    #[test]
    fn firewall_command_follows_the_nodes_firewall() {
        let fw = |f: FirewallFacts| accept_subnet_commands(Some(&f), "10.0.0.0/24");
        assert_eq!(
            fw(FirewallFacts {
                firewalld: Some("running".into()),
                ..Default::default()
            })[0],
            "firewall-cmd --zone=trusted --add-source=10.0.0.0/24"
        );
        assert_eq!(
            fw(FirewallFacts {
                backend: Some("nftables".into()),
                ufw: Some("inactive".into()),
                ..Default::default()
            }),
            vec!["nft insert rule inet filter input ip saddr 10.0.0.0/24 accept"]
        );
        assert_eq!(
            fw(FirewallFacts::default()),
            vec!["iptables -I INPUT -s 10.0.0.0/24 -j ACCEPT"]
        );
    }

    #[test]
    fn one_way_failure_names_both_ends_and_refused_is_not_a_timeout() {
        let mut c = Cluster::healthy(2);
        c.set(0, 1, LinkOutcome::Refused);
        c.facts[1].firewall.backend = Some("nftables".into());
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::UNREACHABLE);
        assert_eq!(f.node, Some(1));
        assert!(
            f.summary
                .contains("rank 0 (node01) cannot connect to rank 1 (node02)"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("the other way"), "{}", f.summary);
        assert!(f.summary.contains("refused"), "{}", f.summary);
        assert!(!f.summary.contains("time out"), "{}", f.summary);
        assert!(f.fix.as_ref().unwrap().hint.contains("REJECT"));
        // No rules were read on either side: both possibilities, and nc to tell them apart.
        assert!(
            f.summary.contains(
                "either rank 1 (node02)'s incoming rules or rank 0 (node01)'s outgoing rules"
            ),
            "{}",
            f.summary
        );
        assert!(
            commands(f)[0].starts_with("nc -l -k 40001"),
            "{:?}",
            commands(f)
        );
        // Several sources failing into one node: the receiver, the common factor, is blamed.
        let mut c = Cluster::healthy(3);
        c.set(0, 1, LinkOutcome::Refused);
        c.set(2, 1, LinkOutcome::Refused);
        c.facts[1].firewall.backend = Some("nftables".into());
        let fs = c.findings();
        assert_eq!(
            commands(only(&fs, crate::link::ids::UNREACHABLE)),
            vec!["nft insert rule inet filter input ip saddr 10.0.0.0/24 accept"]
        );
    }

    #[test]
    fn no_route_points_at_the_sources_routing() {
        let mut c = Cluster::healthy(2);
        c.set(1, 0, LinkOutcome::Unreachable);
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::UNREACHABLE);
        assert_eq!(commands(f), vec!["ip route get 10.0.0.1"]);
    }

    #[test]
    fn a_node_without_an_address_on_the_best_network_is_named() {
        let mut c = Cluster::healthy(3);
        // Its NIC has another name and an address no other node reaches.
        c.facts[2].net.interfaces[0].name = "eno9".into();
        c.facts[2].net.interfaces[0].ipv4[0].addr = "10.9.9.3".parse().unwrap();
        let fs = c.findings();
        let v = with_id(&fs, crate::link::ids::UNREACHABLE);
        let absent = v
            .iter()
            .find(|f| f.evidence.contains_key("absent"))
            .expect("absent finding");
        assert_eq!(absent.evidence["absent"], json!([2]));
        assert!(absent.summary.contains("rank 2 (node03)"));
    }

    #[test]
    fn strict_rp_filter_on_the_receiver_is_the_cause_and_its_fix() {
        let mut c = Cluster::healthy(3);
        // node03's eno1 shares 10.0.0.0/24 with a second NIC, and rp_filter is strict.
        let f = &mut c.facts[2];
        f.net.interfaces.push(iface(
            "eno2",
            "10.0.0.103",
            1500,
            Some(10_000),
            crate::core::IfKind::Physical,
        ));
        f.scale.rp_filter.insert("all".into(), 1);
        f.scale.ip_rules = Some(Vec::new());
        for from in [0, 1] {
            c.set(from, 2, LinkOutcome::Timeout);
        }
        let fs = c.findings();
        let f = with_id(&fs, crate::link::ids::UNREACHABLE)
            .into_iter()
            .find(|f| f.status == Status::Fail)
            .expect("a failing link.unreachable");
        assert!(
            f.summary.contains("because rank 2 (node03) drops them itself: its eno1 shares 10.0.0.0/24 with eno2 and has rp_filter 1 (strict)"),
            "{}",
            f.summary
        );
        assert!(!f.summary.contains("firewall between"), "{}", f.summary);
        let fix = f.fix.as_ref().unwrap();
        assert!(
            fix.hint.starts_with("On rank 2 (node03): make each NIC answer ARP only for its own address, accept what arrives on it (rp_filter=2, loose)"),
            "{}",
            fix.hint
        );
        assert!(
            fix.commands
                .contains(&"sysctl -w net.ipv4.conf.all.rp_filter=2".to_string())
        );
        // Loose rp_filter: no such cause.
        c.facts[2].scale.rp_filter.insert("all".into(), 2);
        let fs = c.findings();
        assert!(
            with_id(&fs, crate::link::ids::UNREACHABLE)
                .iter()
                .all(|f| !f.summary.contains("drops them itself"))
        );
    }
}
