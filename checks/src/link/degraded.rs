//! `link.degraded`: a faster network that some node breaks (its NIC down, no carrier, no address, filtered, no route), and what falling back to the chosen one costs.

use crate::core::ClusterInput;
use crate::core::NetworkEval;
use crate::core::cluster_common::ranks_phrase;
use crate::core::{Finding, Fix, Interface, LinkOutcome, NodeFacts, Status};
use crate::link::unreachable::accept_subnet_commands;
use serde_json::{Value, json};
use std::collections::BTreeMap;

use crate::link::ids::DEGRADED as ID;
/// A network counts as faster when it beats the chosen one by more than this factor.
const FASTER: f64 = 1.2;

/// A network's speed: measured (slowest pair, Gbit/s) when both sides were measured, else rated.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Speed {
    Measured(f64),
    Rated(f64),
}

impl Speed {
    fn gbit(self) -> f64 {
        match self {
            Speed::Measured(g) | Speed::Rated(g) => g,
        }
    }

    fn words(self) -> String {
        match self {
            Speed::Measured(g) => format!("{g:.2} Gbit/s measured"),
            Speed::Rated(g) => format!("{g} Gbit/s rated"),
        }
    }
}

/// The two networks' speeds on a common basis, when one exists.
fn speeds(lost: &NetworkEval, chosen: &NetworkEval) -> Option<(Speed, Speed)> {
    match (lost.min_throughput_gbit_s, chosen.min_throughput_gbit_s) {
        (Some(a), Some(b)) => Some((Speed::Measured(a), Speed::Measured(b))),
        _ => {
            let a = lost.min_rated_mbps? as f64 / 1000.0;
            let b = chosen.min_rated_mbps? as f64 / 1000.0;
            Some((Speed::Rated(a), Speed::Rated(b)))
        }
    }
}

/// The interface name most members use.
fn main_name(eval: &NetworkEval) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for m in eval.network.members.values() {
        *counts.entry(m.interface.as_str()).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|(n, c)| (*c, std::cmp::Reverse(*n)))
        .map(|(n, _)| n.to_string())
        .unwrap_or_default()
}

/// How one node breaks the network, with the fix for it.
struct Break {
    rank: u32,
    interface: String,
    reason: String,
    fix: Vec<String>,
}

/// Why a node has no member on the network: its interface of that name, or none.
fn absent_reason(rank: u32, facts: Option<&NodeFacts>, name: &str) -> Break {
    let iface: Option<&Interface> =
        facts.and_then(|f| f.net.interfaces.iter().find(|i| i.name == name));
    let (reason, fix) = match iface {
        None => (
            format!("has no interface named {name}"),
            vec!["ip -br link".to_string()],
        ),
        Some(i) if !i.up => {
            let state = if i.oper_state.is_empty() {
                "unknown"
            } else {
                i.oper_state.as_str()
            };
            let what = match (i.admin_up, i.carrier, state) {
                (Some(false), _, _) => "is administratively down",
                (_, Some(false), _) | (_, _, "lowerlayerdown" | "notpresent" | "dormant") => {
                    "has no carrier (cable, switch port or peer down)"
                }
                (_, _, "down") => "is down or has no carrier",
                _ => "is not up",
            };
            (
                format!("{name} {what} (operstate {state})"),
                vec![
                    format!("ip link set dev {name} up"),
                    format!("ip -br link show dev {name}"),
                    format!("ethtool {name}"),
                ],
            )
        }
        Some(_) => (
            format!("{name} has no usable address"),
            vec![format!("ip -br addr show dev {name}")],
        ),
    };
    Break {
        rank,
        interface: name.to_string(),
        reason,
        fix,
    }
}

/// Why a member's links on the network fail: into it (filtered, refused), or out of it to
/// members that others reach (its route).
fn member_reason(
    input: &ClusterInput,
    eval: &NetworkEval,
    rank: u32,
    filtered: &[u32],
) -> Option<Break> {
    let m = eval.network.members.get(&rank)?;
    let members = &eval.network.members;
    let into: Vec<LinkOutcome> = eval
        .failures
        .iter()
        .filter(|l| l.to == rank && members.contains_key(&l.from))
        .map(|l| l.result)
        .collect();
    let out_of: Vec<LinkOutcome> = eval
        .failures
        .iter()
        .filter(|l| l.from == rank && members.contains_key(&l.to) && !filtered.contains(&l.to))
        .map(|l| l.result)
        .collect();
    let addr = m.address.to_string();
    let fw = input.facts(rank).map(|f| &f.firewall);
    let (reason, fix) = if let Some(o) = into.first() {
        let fix = match o {
            LinkOutcome::Timeout | LinkOutcome::Refused => eval
                .network
                .sources()
                .iter()
                .flat_map(|s| accept_subnet_commands(fw, s))
                .collect(),
            _ => vec![format!("ip route get {addr}")],
        };
        let why = match o {
            LinkOutcome::Timeout => "filtered: connections to it time out",
            LinkOutcome::Refused => "connections to it are refused",
            LinkOutcome::Unreachable => "no route to it",
            _ => "connections to it fail",
        };
        (
            format!("{} at {addr}: {why} ({})", m.interface, o.as_str()),
            fix,
        )
    } else if let Some(o) = out_of.first() {
        (
            format!("{} cannot reach the others ({})", m.interface, o.as_str()),
            vec!["ip route".to_string()],
        )
    } else {
        return None;
    };
    Some(Break {
        rank,
        interface: m.interface.clone(),
        reason,
        fix,
    })
}

fn degraded(input: &ClusterInput, lost: &NetworkEval, chosen: &NetworkEval) -> Option<Finding> {
    // A virtual network (docker0, a CNI bridge) is no fabric to lose, unless every network is
    // virtual (VMs with virtual NICs, the test harness's veths).
    let virtual_only = !lost.all_physical && chosen.all_physical;
    if lost.fully_connected || virtual_only || lost.network.members.len() < 2 || lost.pairs_ok == 0
    {
        return None;
    }
    let (lost_speed, chosen_speed) = speeds(lost, chosen)?;
    if lost_speed.gbit() <= chosen_speed.gbit() * FASTER {
        return None;
    }
    let name = main_name(lost);
    let filtered: Vec<u32> = lost
        .network
        .members
        .keys()
        .copied()
        .filter(|r| {
            lost.failures
                .iter()
                .any(|l| l.to == *r && lost.network.members.contains_key(&l.from))
        })
        .collect();
    let breaks: Vec<Break> = input
        .joined()
        .into_iter()
        .filter_map(|r| {
            if lost.network.members.contains_key(&r) {
                member_reason(input, lost, r, &filtered)
            } else {
                Some(absent_reason(r, input.facts(r), &name))
            }
        })
        .collect();
    if breaks.is_empty() {
        return None;
    }
    let reaches: Vec<u32> = lost
        .network
        .members
        .keys()
        .copied()
        .filter(|r| !breaks.iter().any(|b| b.rank == *r))
        .collect();
    let said: Vec<String> = breaks
        .iter()
        .map(|b| format!("{}: {}", input.who(b.rank), b.reason))
        .collect();
    let summary = format!(
        "{} ({name}, {}) is faster than the chosen {} ({}) but does not connect every node: {}. Until that is fixed the job runs on the slower network{}",
        lost.network.id,
        lost_speed.words(),
        chosen.network.id,
        chosen_speed.words(),
        said.join("; "),
        if reaches.is_empty() {
            String::new()
        } else {
            format!(" ({name} works between {})", ranks_phrase(&reaches))
        }
    );
    let broken_by: Vec<Value> = breaks
        .iter()
        .map(|b| {
            json!({
                "rank": b.rank,
                "host": input.host(b.rank),
                "interface": b.interface,
                "reason": b.reason,
            })
        })
        .collect();
    let mut fix = Fix::new(format!(
        "Repair {name} on {} and rerun; the advice then moves to {}",
        ranks_phrase(&breaks.iter().map(|b| b.rank).collect::<Vec<_>>()),
        lost.network.id
    ));
    for b in &breaks {
        for c in &b.fix {
            fix = fix.command(c.clone());
        }
    }
    let node = match breaks.as_slice() {
        [one] => Some(one.rank),
        _ => None,
    };
    Some(
        Finding::new(
            ID,
            Status::Warn,
            format!("{name} {}", lost.network.id),
            summary,
        )
        .on_node(node)
        .with("network", &lost.network.id)
        .with("chosen_network", &chosen.network.id)
        .with("broken_by", broken_by)
        .with("lost_gbit_s", lost_speed.gbit())
        .with("chosen_gbit_s", chosen_speed.gbit())
        .with(
            "basis",
            match lost_speed {
                Speed::Measured(_) => "measured",
                Speed::Rated(_) => "rated",
            },
        )
        .with("pairs_ok", lost.pairs_ok)
        .with("pairs_total", lost.pairs_total)
        .fix(fix),
    )
}

/// One warning per faster network that some node breaks; a pass when none is lost.
pub(crate) fn degraded_networks(input: &ClusterInput) -> Vec<Finding> {
    if input.joined().len() < 2 {
        return vec![Finding::new(
            ID,
            Status::Skip,
            "networks",
            "fewer than two nodes joined: no network to compare",
        )];
    }
    let Some(chosen) = input.chosen else {
        return vec![Finding::new(
            ID,
            Status::Skip,
            "networks",
            "no network connects every node (see link.unreachable): nothing to fall back to",
        )];
    };
    let out: Vec<Finding> = input
        .evals
        .iter()
        .filter(|e| e.network.id != chosen.network.id)
        .filter_map(|e| degraded(input, e, chosen))
        .collect();
    if out.is_empty() {
        vec![
            Finding::new(
                ID,
                Status::Pass,
                chosen.network.id.clone(),
                format!(
                    "no faster network is lost: {} is the fastest that connects every node",
                    chosen.network.id
                ),
            )
            .with("network", &chosen.network.id),
        ]
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;

    /// Three healthy nodes with a second, 100 Gbit/s network on eth1 (10.1.0.0/24).
    fn two_networks(data_gbit: f64) -> Cluster {
        let mut c = Cluster::healthy(3);
        c.add_fast_eth1();
        for from in 0..3u32 {
            for to in (0..3u32).filter(|t| *t != from) {
                c.add_eth1_link(from, to, data_gbit);
            }
        }
        c
    }

    #[test]
    fn a_healthy_faster_network_is_chosen_and_nothing_is_lost() {
        let fs = two_networks(90.0).findings();
        let f = only(&fs, ID);
        assert_eq!(f.status, Status::Pass, "{f:#?}");
        assert_eq!(f.evidence["network"], json!("10.1.0.0/24"));
    }

    #[test]
    fn a_dead_nic_on_one_node_names_the_node_the_interface_and_the_cost() {
        let mut c = two_networks(90.0);
        let eth1 = &mut c.facts[2].net.interfaces[2];
        eth1.up = false;
        eth1.admin_up = Some(true);
        eth1.carrier = Some(false);
        eth1.oper_state = "down".into();
        c.links.retain(|l| {
            !(l.address == "10.1.0.3" || (l.from == 2 && l.address.starts_with("10.1.")))
        });
        let fs = c.findings();
        let f = only(&fs, ID);
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.node, Some(2));
        assert_eq!(f.evidence["network"], json!("10.1.0.0/24"));
        assert_eq!(f.evidence["chosen_network"], json!("10.0.0.0/24"));
        assert_eq!(f.evidence["lost_gbit_s"], json!(90.0));
        assert_eq!(f.evidence["chosen_gbit_s"], json!(9.0));
        assert_eq!(f.evidence["broken_by"][0]["interface"], json!("eth1"));
        assert!(f.summary.contains("eth1 has no carrier"), "{}", f.summary);
        assert!(f.summary.contains("90.00 Gbit/s"), "{}", f.summary);
        assert!(f.summary.contains("9.00 Gbit/s"), "{}", f.summary);
        assert!(commands(f).contains(&"ip link set dev eth1 up".to_string()));
    }

    #[test]
    fn a_filtered_member_is_named_with_its_firewall_command() {
        let mut c = two_networks(90.0);
        for l in c.links.iter_mut().filter(|l| l.address == "10.1.0.2") {
            l.result = LinkOutcome::Timeout;
            l.throughput_gbit_s = None;
        }
        let fs = c.findings();
        let f = only(&fs, ID);
        assert_eq!(f.status, Status::Warn, "{f:#?}");
        assert_eq!(f.node, Some(1));
        assert!(f.summary.contains("filtered"), "{}", f.summary);
        assert!(
            commands(f).contains(&"iptables -I INPUT -s 10.1.0.0/24 -j ACCEPT".to_string()),
            "{:?}",
            commands(f)
        );
    }

    #[test]
    fn a_slower_broken_network_is_not_a_loss() {
        let mut c = two_networks(1.0);
        for f in &mut c.facts {
            f.net.interfaces[2].speed_mbps = Some(1000);
        }
        c.facts[2].net.interfaces[2].up = false;
        c.links.retain(|l| l.address != "10.1.0.3");
        let fs = c.findings();
        assert_eq!(only(&fs, ID).status, Status::Pass);
    }
}
