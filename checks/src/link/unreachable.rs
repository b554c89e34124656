//! `link.unreachable`: pairs of nodes that cannot connect on the judged network, one finding per destination (or one for a node that fails with every peer), with the command that opens it.

use crate::core::ClusterInput;
use crate::core::cluster_common::{LIST_CAP, host_port, links_on, rank_map, ranks_phrase};
use crate::core::{Finding, FirewallFacts, Fix, LinkOutcome, LinkResult, Status};
use crate::core::{Member, NetworkEval};
use crate::firewall::{Direction, accept_peer_commands};
use crate::link::attribution::{
    Attribution, Culprit, attribute, culprit_fix, culprit_phrase, undecided_fix,
};
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
    ok: Vec<(u32, u32)>,
    /// Pairs with no link that worked: the first failed link.
    failed: HashMap<(u32, u32), &'a LinkResult>,
}

impl<'a> Pairs<'a> {
    fn of(links: &[&'a LinkResult]) -> Pairs<'a> {
        let mut ok: Vec<(u32, u32)> = Vec::with_capacity(links.len());
        ok.extend(
            links
                .iter()
                .filter(|l| l.result == LinkOutcome::Ok)
                .map(|l| (l.from, l.to)),
        );
        ok.sort_unstable();
        ok.dedup();
        let mut failed = HashMap::new();
        for l in links.iter().filter(|l| l.result != LinkOutcome::Ok) {
            if ok.binary_search(&(l.from, l.to)).is_err() {
                failed.entry((l.from, l.to)).or_insert(*l);
            }
        }
        Pairs { ok, failed }
    }

    fn state(&self, from: u32, to: u32) -> PairState<'a> {
        if self.ok.binary_search(&(from, to)).is_ok() {
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
    let links = links_on(input, eval);
    let pairs = Pairs::of(&links);
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

/// The nodes (of three or more) that fail with every peer, one way or the other, while most
/// nodes do not: each is the cause of its own failures. Linear in the failed pairs.
fn isolated_nodes(pairs: &Pairs, members: &[u32]) -> BTreeSet<u32> {
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
fn only_involving(pairs: &Pairs, members: &[u32], nodes: &BTreeSet<u32>) -> bool {
    let in_net: BTreeSet<u32> = members.iter().copied().collect();
    pairs.failed.keys().all(|(a, b)| {
        let failed_here = in_net.contains(a) && in_net.contains(b);
        !failed_here || nodes.contains(a) || nodes.contains(b)
    })
}

/// A node that fails with every peer: the cause is on that node (its firewall, its route, its
/// interface), said once. `alone`: every other pair connects.
fn isolated_node(
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
    let subnet = &eval.network.id;
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
        match dominant {
            LinkOutcome::Timeout | LinkOutcome::Refused => {
                let what = if dominant == LinkOutcome::Timeout {
                    "drops"
                } else {
                    "rejects"
                };
                let reason = match dirs.as_slice() {
                    [Direction::Outgoing] => format!(
                        "its firewall {what} its own outgoing connections on {iface} (to NCCL's random high ports on the other nodes){}",
                        rule_note(input, x, Direction::Outgoing, &outbound)
                    ),
                    [Direction::Incoming] => format!(
                        "its firewall {what} connections on {iface} (NCCL's random high ports{}){}",
                        if direction == "inbound" {
                            ""
                        } else {
                            ", and its answers"
                        },
                        rule_note(input, x, Direction::Incoming, &inbound)
                    ),
                    _ => format!(
                        "its firewall {what} connections on {iface} both ways (incoming{}, and its own outgoing{})",
                        rule_note(input, x, Direction::Incoming, &inbound),
                        rule_note(input, x, Direction::Outgoing, &outbound)
                    ),
                };
                let fw = facts.map(|f| &f.firewall);
                let lead = match dirs.as_slice() {
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
                    let errs: BTreeSet<&str> =
                        all.iter().filter_map(|l| l.error.as_deref()).collect();
                    format!(
                        "the connections failed: {}",
                        errs.into_iter().collect::<Vec<_>>().join("; ")
                    )
                },
                Fix::new(format!("Check the connections to and from {who} by hand")).command(
                    format!("nc -vz {addr} {}", all.first().map_or(0, |l| l.port)),
                ),
            ),
        }
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

/// The directions a node failing with every peer filters, from the failures' direction and
/// (when they were read) its own rules: outbound only is its output path, inbound only its
/// input path; both ways is whichever of its paths drops, else its input (answers included).
fn isolated_directions(
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
fn rule_note(input: &ClusterInput, x: u32, dir: Direction, links: &[&LinkResult]) -> String {
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

/// Who the failures into one destination are blamed on.
enum Blame {
    /// The destination's incoming rules (the rule when one was read).
    Receiver(Option<String>),
    /// The sources' outgoing rules.
    Senders(Vec<Culprit>),
    /// One source, and no rule read on either side explains it.
    Undecided(Attribution),
}

fn blame(input: &ClusterInput, to: u32, failed: &[&LinkResult], dominant: LinkOutcome) -> Blame {
    if !matches!(dominant, LinkOutcome::Timeout | LinkOutcome::Refused) {
        return Blame::Receiver(None);
    }
    let atts: Vec<Attribution> = failed.iter().map(|l| attribute(input, l)).collect();
    let receiver_rule = atts.iter().find_map(|a| match a {
        Attribution::Rules(c) => c
            .iter()
            .find(|c| c.node == to && c.dir == Direction::Incoming)
            .map(|c| c.rule.clone()),
        _ => None,
    });
    if receiver_rule.is_some() {
        return Blame::Receiver(receiver_rule);
    }
    if !atts.is_empty() && atts.iter().all(|a| matches!(a, Attribution::Rules(_))) {
        let culprits = atts
            .into_iter()
            .flat_map(|a| match a {
                Attribution::Rules(c) => c,
                _ => Vec::new(),
            })
            .collect();
        return Blame::Senders(culprits);
    }
    match atts.as_slice() {
        [one] => Blame::Undecided(one.clone()),
        _ => Blame::Receiver(None),
    }
}

fn absent_members(
    input: &ClusterInput,
    eval: &NetworkEval,
    absent: &[u32],
    others: &Value,
) -> Finding {
    // An absent node whose interface of the others' name is down: that is the cause.
    let names: BTreeSet<&str> = eval
        .network
        .members
        .values()
        .map(|m| m.interface.as_str())
        .collect();
    let down: Vec<(u32, String, String)> = absent
        .iter()
        .filter_map(|r| {
            let i = input
                .facts(*r)?
                .net
                .interfaces
                .iter()
                .find(|i| !i.up && names.contains(i.name.as_str()))?;
            Some((*r, i.name.clone(), i.oper_state.clone()))
        })
        .collect();
    let who: Vec<String> = absent
        .iter()
        .take(LIST_CAP)
        .map(|r| match down.iter().find(|(d, _, _)| d == r) {
            Some((_, name, state)) => format!(
                "{} (its interface {name} is not up: operstate {state}, down or no carrier)",
                input.who(*r)
            ),
            None => input.who(*r),
        })
        .collect();
    let down_ev: Vec<Value> = down
        .iter()
        .map(|(r, n, st)| json!({"rank": r, "interface": n, "oper_state": st}))
        .collect();
    let mut fix = Fix::new(format!(
        "Give {} an address on {} (or connect it to a network every node shares), then rerun; compare the addresses on each node",
        ranks_phrase(absent),
        eval.network.id
    ));
    for (_, name, _) in down.iter().take(1) {
        fix = fix.command(format!("ip link set dev {name} up"));
    }
    let fix = fix.command("ip -br addr");
    Finding::new(
        crate::link::ids::UNREACHABLE,
        Status::Fail,
        eval.network.id.clone(),
        format!(
            "no network connects every node: the best one, {}, has no address on {}",
            eval.network.id,
            who.join(", ")
        ),
    )
    .with("network", &eval.network.id)
    .with("absent", absent)
    .with("interfaces", interfaces_by_rank(eval))
    .with("pairs_ok", eval.pairs_ok)
    .with("pairs_total", eval.pairs_total)
    .with("other_networks", others.clone())
    .with("interfaces_down", down_ev)
    .fix(fix)
}

fn unreachable_destination(
    input: &ClusterInput,
    eval: &NetworkEval,
    pairs: &Pairs,
    members: &[u32],
    explained: &BTreeSet<u32>,
    to: u32,
    others: &Value,
) -> Option<Finding> {
    let member = eval.network.members.get(&to)?;
    let mut failed: Vec<&LinkResult> = Vec::new();
    let mut not_measured: Vec<u32> = Vec::new();
    // A source that fails with every peer has its own finding: its failures are explained.
    for from in members
        .iter()
        .copied()
        .filter(|f| *f != to && !explained.contains(f))
    {
        match pairs.state(from, to) {
            PairState::Ok => {}
            PairState::Failed(l) => failed.push(l),
            PairState::NotMeasured => not_measured.push(from),
        }
    }
    if failed.is_empty() && not_measured.is_empty() {
        return None;
    }
    let sources: Vec<u32> = failed
        .iter()
        .map(|l| l.from)
        .chain(not_measured.iter().copied())
        .collect();
    let subject = format!(
        "{}->{to} {}",
        sources
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
        member.interface
    );
    let addr = member.address.to_string();
    let ports: BTreeSet<u16> = failed.iter().map(|l| l.port).filter(|p| *p != 0).collect();
    let ports: Vec<u16> = ports.into_iter().collect();
    let where_ = match ports.as_slice() {
        [p] => host_port(&addr, p),
        _ => addr.clone(),
    };
    let sources_ev: Vec<Value> = failed
        .iter()
        .map(|l| {
            json!({
                "from": l.from,
                "host": input.host(l.from),
                "result": l.result.as_str(),
                "port": l.port,
                "error": l.error,
            })
        })
        .collect();
    let dominant = dominant_outcome(&failed);
    let blamed = blame(input, to, &failed, dominant);
    let summary = if failed.is_empty() {
        format!(
            "{} at {addr} on {} was not measured from {}",
            input.who(to),
            member.interface,
            ranks_phrase(&not_measured)
        )
    } else {
        destination_summary(
            input, eval, pairs, to, member, &failed, &where_, dominant, &blamed,
        )
    };
    let (cause_node, cause_direction, cause_rule) = match &blamed {
        Blame::Receiver(rule) if !failed.is_empty() => {
            (Some(to), Some(Direction::Incoming.as_str()), rule.clone())
        }
        Blame::Senders(c) => (
            c.first().map(|c| c.node),
            Some(Direction::Outgoing.as_str()),
            c.first().map(|c| c.rule.clone()),
        ),
        _ => (None, None, None),
    };
    let shown_on = match &blamed {
        Blame::Senders(c) if c.iter().all(|x| Some(x.node) == cause_node) => cause_node,
        _ => Some(to),
    };
    let mut f = Finding::new(
        crate::link::ids::UNREACHABLE,
        Status::Fail,
        subject,
        summary,
    )
    .on_node(shown_on)
    .with("cause_node", cause_node)
    .with("cause_direction", cause_direction)
    .with("cause_rule", &cause_rule)
    .with("network", &eval.network.id)
    .with("to", to)
    .with("to_host", input.host(to))
    .with("interface", &member.interface)
    .with("address", &addr)
    .with("ports", &ports)
    .with("sources", sources_ev)
    .with("not_measured", &not_measured)
    .with("pairs_ok", eval.pairs_ok)
    .with("pairs_total", eval.pairs_total)
    .with("other_networks", others.clone());
    if !failed.is_empty() {
        f = f.fix(match &blamed {
            Blame::Senders(c) => culprit_fix(input, c, &eval.network.sources()),
            Blame::Undecided(_) => undecided_fix(input, failed[0], &addr),
            Blame::Receiver(_) => destination_fix(input, eval, to, &failed, &addr, dominant),
        });
        if local_drop(input, to, member, dominant).is_some()
            && let Some(own) = local_drop_fix(input, to)
        {
            f = f.fix(own);
        }
    }
    Some(f)
}

#[allow(clippy::too_many_arguments)]
fn destination_summary(
    input: &ClusterInput,
    eval: &NetworkEval,
    pairs: &Pairs,
    to: u32,
    member: &Member,
    failed: &[&LinkResult],
    where_: &str,
    dominant: LinkOutcome,
    blamed: &Blame,
) -> String {
    let (verb, word) = if dominant == LinkOutcome::Timeout {
        ("time out", "drop")
    } else {
        ("are refused", "reject")
    };
    let blamed_cause = match blamed {
        Blame::Receiver(Some(rule)) => Some(format!(
            "connections {verb}: the firewall on {} {word}s incoming connections to that port (`{rule}`)",
            input.who(to)
        )),
        Blame::Senders(c) => Some(format!(
            "connections {verb}: {}",
            c.iter()
                .map(|c| culprit_phrase(input, c))
                .collect::<Vec<_>>()
                .join("; and ")
        )),
        Blame::Undecided(Attribution::Between) => failed.first().map(|l| {
            format!(
                "connections {verb}, and neither node's rules {word} them ({}'s incoming and {}'s outgoing rules accept port {}): most likely a firewall between them (a switch ACL, a security group); the fix says how to tell",
                input.who(to),
                input.who(l.from),
                l.port
            )
        }),
        Blame::Undecided(Attribution::Unknown { unread }) => failed.first().map(|l| {
            let unread: Vec<String> = unread
                .iter()
                .map(|(n, d)| format!("{}'s {} rules", input.who(*n), d.as_str()))
                .collect();
            format!(
                "connections {verb}: either {}'s incoming rules or {}'s outgoing rules {word} them, or a firewall between them ({} not read); the fix says how to tell",
                input.who(to),
                input.who(l.from),
                unread.join(" and ")
            )
        }),
        _ => None,
    };
    let cause = blamed_cause.unwrap_or_else(|| match dominant {
        LinkOutcome::Timeout => format!(
            "connections time out: a firewall on {} drops packets to NCCL's random high ports",
            input.who(to)
        ),
        LinkOutcome::Refused => format!(
            "connections are refused: a REJECT rule on {}, or nothing listened on the port",
            input.who(to)
        ),
        LinkOutcome::Unreachable => format!("there is no route to {}", member.address),
        _ => {
            let errs: BTreeSet<&str> = failed.iter().filter_map(|l| l.error.as_deref()).collect();
            format!(
                "the connection failed: {}",
                errs.into_iter().collect::<Vec<_>>().join("; ")
            )
        }
    });
    let cause = local_drop(input, to, member, dominant).unwrap_or(cause);
    if let [one] = failed {
        let back_ok = eval
            .network
            .members
            .contains_key(&one.from)
            .then(|| pairs.state(to, one.from))
            .is_some_and(|s| matches!(s, PairState::Ok));
        let results = one.result.as_str();
        return if back_ok {
            format!(
                "{} cannot connect to {} at {where_} on {} ({results}), though {} reaches {} the other way: {cause}",
                input.who(one.from),
                input.who(to),
                member.interface,
                input.who(to),
                input.who(one.from),
            )
        } else {
            format!(
                "{} cannot connect to {} at {where_} on {} ({results}): {cause}",
                input.who(one.from),
                input.who(to),
                member.interface,
            )
        };
    }
    let per_source: Vec<String> = failed
        .iter()
        .map(|l| format!("{} from {}", l.result.as_str(), l.from))
        .collect();
    format!(
        "{} at {where_} on {} is not reachable from {} ({}): {cause}",
        input.who(to),
        member.interface,
        ranks_phrase(&failed.iter().map(|l| l.from).collect::<Vec<_>>()),
        per_source.join(", ")
    )
}

fn destination_fix(
    input: &ClusterInput,
    eval: &NetworkEval,
    to: u32,
    failed: &[&LinkResult],
    addr: &str,
    dominant: LinkOutcome,
) -> Fix {
    let sources = eval.network.sources();
    let subnet = sources.join(", ");
    let fw = input.facts(to).map(|f| &f.firewall);
    match dominant {
        LinkOutcome::Timeout | LinkOutcome::Refused => {
            let lead = if dominant == LinkOutcome::Timeout {
                format!(
                    "On {} (the node that filters), accept every connection from the nodes' network ({subnet}): NCCL listens on random high ports, so opening only the master port is not enough",
                    input.who(to)
                )
            } else {
                format!(
                    "On {}, remove the REJECT rule or accept every connection from {subnet} (if no rule rejects, the listener was not up: rerun preflight)",
                    input.who(to)
                )
            };
            sources
                .iter()
                .flat_map(|s| accept_subnet_commands(fw, s))
                .fold(Fix::new(lead), Fix::command)
        }
        LinkOutcome::Unreachable => {
            let from: Vec<u32> = failed.iter().map(|l| l.from).collect();
            Fix::new(format!(
                "On {}, check the route to {addr}: it should leave through the interface on {}",
                ranks_phrase(&from),
                eval.network.id
            ))
            .command(format!("ip route get {addr}"))
        }
        _ => {
            let port = failed.first().map(|l| l.port).unwrap_or(0);
            Fix::new(format!(
                "Check the connection by hand from {} to {}",
                ranks_phrase(&failed.iter().map(|l| l.from).collect::<Vec<_>>()),
                input.who(to)
            ))
            .command(format!("nc -vz {addr} {port}"))
        }
    }
}

/// The fix for [`local_drop`]: `net.arp-flux`'s, run on the node that drops.
fn local_drop_fix(input: &ClusterInput, node: u32) -> Option<Fix> {
    let own = crate::net::arp_flux::check(input.facts(node)?).fix?;
    Some(Fix {
        hint: format!(
            "On {}: {}{}",
            input.who(node),
            own.hint.get(..1).unwrap_or_default().to_lowercase(),
            own.hint.get(1..).unwrap_or_default()
        ),
        commands: own.commands,
    })
}

/// A drop on the receiving node that no firewall rule makes: strict rp_filter on the dialled NIC
/// while another NIC shares its subnet (`net.arp-flux` on that node). The kernel discards the
/// SYN (a timeout) or already the ARP request (no answer: "no route to host").
fn local_drop(
    input: &ClusterInput,
    to: u32,
    member: &Member,
    dominant: LinkOutcome,
) -> Option<String> {
    let how = match dominant {
        LinkOutcome::Timeout => "connections time out",
        LinkOutcome::Unreachable => "connections find no route (ARP gets no answer)",
        _ => return None,
    };
    let (subnet, others) =
        crate::net::arp_flux::strict_shared_nic(input.facts(to)?, &member.interface)?;
    Some(format!(
        "{how} because {} drops them itself: its {} shares {subnet} with {} and has rp_filter 1 (strict), so a packet or ARP request arriving on {} whose route back leaves by another NIC is discarded (see net.arp-flux on that node; no firewall is involved)",
        input.who(to),
        member.interface,
        others.join(", "),
        member.interface
    ))
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
