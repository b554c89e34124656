//! A node that fails with every peer on the judged network: named as the node (its direction, its own rule), not as n-1 broken links.

use super::*;

/// The nodes (of three or more) that fail with every peer, one way or the other, while most
/// nodes do not: each is the cause of its own failures. Linear in the failed pairs.
pub(super) fn isolated_nodes(pairs: &Pairs, members: &[u32]) -> BTreeSet<u32> {
    if members.len() < 3 {
        return BTreeSet::new();
    }
    let in_net: BTreeSet<u32> = members.iter().copied().collect();
    let mut partners: HashMap<u32, BTreeSet<u32>> = HashMap::new();
    for (a, b) in pairs.failed.keys() {
        if in_net.contains(a) && in_net.contains(b) {
            partners.entry(*a).or_default().insert(*b);
            partners.entry(*b).or_default().insert(*a);
        }
    }
    let isolated: BTreeSet<u32> = partners
        .into_iter()
        .filter(|(_, with)| with.len() + 1 == members.len())
        .map(|(x, _)| x)
        .collect();
    // A node is isolated against a working majority; when most nodes fail with everyone, the
    // network itself is the problem and the per-destination findings say so.
    if isolated.len() * 2 > members.len() {
        return BTreeSet::new();
    }
    isolated
}

/// Whether every failed pair involves a node of `nodes`.
pub(super) fn only_involving(pairs: &Pairs, members: &[u32], nodes: &BTreeSet<u32>) -> bool {
    let in_net: BTreeSet<u32> = members.iter().copied().collect();
    pairs.failed.keys().all(|(a, b)| {
        let failed_here = in_net.contains(a) && in_net.contains(b);
        !failed_here || nodes.contains(a) || nodes.contains(b)
    })
}

/// A node that fails with every peer: the cause is on that node (its firewall, its route, its
/// interface), said once. `alone`: every other pair connects.
pub(super) fn isolated_node(
    input: &ClusterInput,
    eval: &NetworkEval,
    pairs: &Pairs,
    members: &[u32],
    x: u32,
    alone: bool,
    others: &Value,
) -> Option<Finding> {
    let failed = |a: u32, b: u32| pairs.state(a, b);
    let member = eval.network.members.get(&x)?;
    let mut inbound: Vec<&LinkResult> = Vec::new();
    let mut outbound: Vec<&LinkResult> = Vec::new();
    for y in members.iter().copied().filter(|y| *y != x) {
        if let PairState::Failed(l) = failed(y, x) {
            inbound.push(l);
        }
        if let PairState::Failed(l) = failed(x, y) {
            outbound.push(l);
        }
    }
    let all: Vec<&LinkResult> = inbound.iter().chain(outbound.iter()).copied().collect();
    let dominant = dominant_outcome(&all);
    let word = dominant.as_str();
    let direction = match (inbound.is_empty(), outbound.is_empty()) {
        (false, false) => "both ways",
        (false, true) => "inbound",
        _ => "outbound",
    };
    let who = input.who(x);
    let iface = &member.interface;
    let addr = member.address.to_string();
    let facts = input.facts(x);
    let nic = facts.and_then(|f| f.net.interfaces.iter().find(|i| &i.name == iface));
    let nic_down = nic.is_some_and(|i| !i.up);
    let dirs = isolated_directions(input, x, direction, &inbound, &outbound);
    let dropped_here = (direction != "outbound")
        .then(|| local_drop(input, x, member, dominant))
        .flatten()
        .zip(local_drop_fix(input, x));
    let (cause, reason, fix) = if let Some((reason, fix)) = dropped_here {
        ("rp-filter", reason, fix)
    } else if nic_down {
        let state = nic.map(|i| i.oper_state.clone()).unwrap_or_default();
        (
            "interface",
            format!("its interface {iface} is not up (operstate {state}: down or no carrier)"),
            Fix::new(format!(
                "On {who}, bring {iface} up and check its cable or link (carrier), then rerun"
            ))
            .command(format!("ip link set dev {iface} up"))
            .command(format!("ip -br link show dev {iface}")),
        )
    } else {
        remote_cause(
            input, eval, members, x, member, dominant, direction, &dirs, &inbound, &outbound, &all,
        )
    };
    let peers: Vec<u32> = members.iter().copied().filter(|y| *y != x).collect();
    let side = |l: &LinkResult, peer: u32| json!({"peer": peer, "host": input.host(peer), "result": l.result.as_str(), "port": l.port, "error": l.error});
    Some(
        Finding::new(
            crate::link::ids::UNREACHABLE,
            Status::Fail,
            format!("{x}<->* {iface}"),
            format!(
                "{who} fails with every peer on {iface} at {addr} ({word} {direction}, with {}): {reason}{}",
                ranks_phrase(&peers),
                if alone {
                    "; every other pair connects"
                } else {
                    ""
                }
            ),
        )
        .on_node(Some(x))
        .with("network", &eval.network.id)
        .with("node", x)
        .with("host", input.host(x))
        .with("interface", iface)
        .with("address", &addr)
        .with("cause", cause)
        .with("cause_node", x)
        .with(
            "cause_direction",
            (cause == "firewall").then(|| {
                dirs.iter()
                    .map(|d| d.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            }),
        )
        .with("direction", direction)
        .with("result", word)
        .with(
            "inbound",
            inbound.iter().map(|l| side(l, l.from)).collect::<Vec<_>>(),
        )
        .with(
            "outbound",
            outbound.iter().map(|l| side(l, l.to)).collect::<Vec<_>>(),
        )
        .with("pairs_ok", eval.pairs_ok)
        .with("pairs_total", eval.pairs_total)
        .with("other_networks", others.clone())
        .fix(fix),
    )
}

/// The cause of a node's failures with every peer when its interface is up and nothing drops
/// them on the node's own path: its firewall, its route, or the error the connections gave.
#[allow(clippy::too_many_arguments)]
fn remote_cause(
    input: &ClusterInput,
    eval: &NetworkEval,
    members: &[u32],
    x: u32,
    member: &Member,
    dominant: LinkOutcome,
    direction: &str,
    dirs: &[Direction],
    inbound: &[&LinkResult],
    outbound: &[&LinkResult],
    all: &[&LinkResult],
) -> (&'static str, String, Fix) {
    let who = input.who(x);
    let iface = &member.interface;
    let addr = member.address.to_string();
    let subnet = &eval.network.id;
    let facts = input.facts(x);
    match dominant {
        LinkOutcome::Timeout | LinkOutcome::Refused => {
            let what = if dominant == LinkOutcome::Timeout {
                "drops"
            } else {
                "rejects"
            };
            let reason = match dirs {
                [Direction::Outgoing] => format!(
                    "its firewall {what} its own outgoing connections on {iface} (to NCCL's random high ports on the other nodes){}",
                    rule_note(input, x, Direction::Outgoing, outbound)
                ),
                [Direction::Incoming] => format!(
                    "its firewall {what} connections on {iface} (NCCL's random high ports{}){}",
                    if direction == "inbound" {
                        ""
                    } else {
                        ", and its answers"
                    },
                    rule_note(input, x, Direction::Incoming, inbound)
                ),
                _ => format!(
                    "its firewall {what} connections on {iface} both ways (incoming{}, and its own outgoing{})",
                    rule_note(input, x, Direction::Incoming, inbound),
                    rule_note(input, x, Direction::Outgoing, outbound)
                ),
            };
            let fw = facts.map(|f| &f.firewall);
            let lead = match dirs {
                [Direction::Outgoing] => format!(
                    "On {who} (the node whose outgoing connections fail), let its new connections to the cluster's subnet {subnet} out: its OUTPUT path drops them, so an INPUT rule would not help; NCCL connects to random high ports, so opening only the master port is not enough"
                ),
                [Direction::Incoming] => format!(
                    "On {who} (the node that filters), accept every connection from the cluster's subnet {subnet}: NCCL listens on random high ports, so opening only the master port is not enough"
                ),
                _ => format!(
                    "On {who} (the node that filters both ways), accept every connection from the cluster's subnet {subnet} and let its own connections to it out: NCCL uses random high ports both ways"
                ),
            };
            (
                "firewall",
                reason,
                dirs.iter()
                    .flat_map(|d| accept_peer_commands(fw, *d, subnet))
                    .fold(Fix::new(lead), Fix::command),
            )
        }
        LinkOutcome::Unreachable => {
            let peer = members
                .iter()
                .find(|y| **y != x)
                .and_then(|y| eval.network.members.get(y))
                .map(|m| m.address.to_string())
                .unwrap_or_default();
            (
                "route",
                format!("no route between it and the others on {subnet} (its address {addr} or its routes)"),
                Fix::new(format!(
                    "On {who}, check its address and route on {subnet}: traffic to the other nodes should leave through {iface}"
                ))
                .command(format!("ip route get {peer}"))
                .command("ip -br addr"),
            )
        }
        _ => (
            "error",
            {
                let errs: BTreeSet<&str> = all.iter().filter_map(|l| l.error.as_deref()).collect();
                format!(
                    "the connections failed: {}",
                    errs.into_iter().collect::<Vec<_>>().join("; ")
                )
            },
            Fix::new(format!("Check the connections to and from {who} by hand")).command(format!(
                "nc -vz {addr} {}",
                all.first().map_or(0, |l| l.port)
            )),
        ),
    }
}

/// The directions a node failing with every peer filters, from the failures' direction and
/// (when they were read) its own rules: outbound only is its output path, inbound only its
/// input path; both ways is whichever of its paths drops, else its input (answers included).
pub(super) fn isolated_directions(
    input: &ClusterInput,
    x: u32,
    direction: &str,
    inbound: &[&LinkResult],
    outbound: &[&LinkResult],
) -> Vec<Direction> {
    match direction {
        "outbound" => vec![Direction::Outgoing],
        "inbound" => vec![Direction::Incoming],
        _ => {
            let drops = |links: &[&LinkResult], dir: Direction| {
                links.iter().any(|l| match attribute(input, l) {
                    Attribution::Rules(c) => c.iter().any(|c| c.node == x && c.dir == dir),
                    _ => false,
                })
            };
            let out = drops(outbound, Direction::Outgoing);
            let inn = drops(inbound, Direction::Incoming);
            match (inn, out) {
                (true, true) => vec![Direction::Incoming, Direction::Outgoing],
                (false, true) => vec![Direction::Outgoing],
                _ => vec![Direction::Incoming],
            }
        }
    }
}

/// " (`rule`)" when node `x`'s rules in `dir` drop one of `links`, else "".
pub(super) fn rule_note(
    input: &ClusterInput,
    x: u32,
    dir: Direction,
    links: &[&LinkResult],
) -> String {
    links
        .iter()
        .find_map(|l| match attribute(input, l) {
            Attribution::Rules(c) => c
                .into_iter()
                .find(|c| c.node == x && c.dir == dir)
                .map(|c| format!(" (`{}`)", c.rule)),
            _ => None,
        })
        .unwrap_or_default()
}
