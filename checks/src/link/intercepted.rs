//! `link.intercepted`: connections that were accepted but never authenticated as the peer they dialled: a nat rule of the dialer (output) or of the peer (prerouting) that sends them elsewhere, named, else something between the nodes that answers in the peer's place. Told apart from a slow handshake.

use crate::core::ClusterInput;
use crate::core::cluster_common::GROUP_CHARS;
use crate::core::{Finding, Fix, HandshakeFailure, LinkOutcome, LinkResult, NatRule, Status};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::IpAddr;

/// The finding's id.
pub(crate) use crate::link::ids::INTERCEPTED as ID;

/// Whether `addr` lies in `prefix` ("10.0.0.0/24", "10.0.0.7", "fd00::/64"); an unreadable
/// prefix (a set, a negation) counts as matching: the rule may apply.
fn in_prefix(addr: IpAddr, prefix: &str) -> bool {
    let (net, len) = match prefix.split_once('/') {
        Some((n, l)) => (n, l.parse::<u32>().ok()),
        None => (prefix, None),
    };
    let Ok(net) = net.trim().parse::<IpAddr>() else {
        return true;
    };
    match (addr, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let len = len.unwrap_or(32).min(32);
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let len = len.unwrap_or(128).min(128);
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// Whether a nat rule on `hook` rewrites a TCP connection to `addr`:`port`.
fn rewrites(rule: &NatRule, hook: &str, addr: IpAddr, port: u16) -> bool {
    let m = &rule.matches;
    rule.hook == hook
        && m.protocol.as_deref().is_none_or(|p| p == "tcp")
        && (m.dports.is_empty() || m.dports.iter().any(|(a, b)| *a <= port && port <= *b))
        && m.destination.as_deref().is_none_or(|d| in_prefix(addr, d))
        && m.out_interface.as_deref().is_none_or(|i| i != "lo")
        && m.in_interface.as_deref().is_none_or(|i| i != "lo")
}

/// The first rule of node `rank` on `hook` that rewrites `link`.
fn rule_for<'a>(
    input: &'a ClusterInput,
    rank: u32,
    hook: &str,
    link: &LinkResult,
) -> Option<&'a NatRule> {
    let addr: IpAddr = link
        .address
        .trim_matches(|c| c == '[' || c == ']')
        .parse()
        .ok()?;
    input
        .facts(rank)?
        .firewall
        .nat
        .iter()
        .find(|r| rewrites(r, hook, addr, link.port))
}

/// Who answers in the peer's place.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Culprit {
    /// A nat rule on node `rank` (the dialer's output hook, or the peer's prerouting).
    Rule {
        rank: u32,
        hook: String,
        text: String,
        target: String,
        to: Option<String>,
    },
    /// Neither node's rules: something on the path into `to`.
    Between { to: u32 },
}

/// The links that were accepted and then failed their handshake, with no link of the same
/// pair and address that worked.
fn accepted_failures<'a>(input: &'a ClusterInput) -> Vec<&'a LinkResult> {
    let failed: Vec<&LinkResult> = input
        .links
        .records()
        .filter(|l| l.result != LinkOutcome::Ok && l.handshake.is_some() && l.from != l.to)
        .collect();
    if failed.is_empty() {
        return failed;
    }
    if input.links.is_dense() {
        return failed
            .into_iter()
            .filter(|l| !input.links.connected(l.from, l.to, &l.address))
            .collect();
    }
    let ok: HashSet<(u32, u32, &str)> = input
        .links
        .iter()
        .filter(|l| l.result == LinkOutcome::Ok)
        .map(|l| (l.from, l.to, l.address.as_str()))
        .collect();
    failed
        .into_iter()
        .filter(|l| !ok.contains(&(l.from, l.to, l.address.as_ref())))
        .collect()
}

/// Of the destinations (rank, address) of `failed`, those that authenticated at least one
/// dialer: a listener that completes other nodes' handshakes in time is not too slow for this
/// one's. One pass over the links, and none when nothing failed.
fn answering<'a>(input: &'a ClusterInput, failed: &[&LinkResult]) -> BTreeSet<(u32, &'a str)> {
    let wanted: BTreeSet<(u32, &str)> = failed.iter().map(|l| (l.to, l.address.as_str())).collect();
    if wanted.is_empty() {
        return BTreeSet::new();
    }
    input
        .links
        .iter()
        .filter(|l| l.result == LinkOutcome::Ok)
        .map(|l| (l.to, l.address.as_str()))
        .filter(|k| wanted.contains(k))
        .collect()
}

fn culprit(
    input: &ClusterInput,
    l: &LinkResult,
    answering: &BTreeSet<(u32, &str)>,
) -> Option<Culprit> {
    let of = |rank: u32, hook: &str| {
        rule_for(input, rank, hook, l).map(|r| Culprit::Rule {
            rank,
            hook: hook.to_string(),
            text: r.matches.text.clone(),
            target: r.target.clone(),
            to: r.to.clone(),
        })
    };
    if let Some(c) = of(l.from, "output").or_else(|| of(l.to, "prerouting")) {
        return Some(c);
    }
    // No rule read explains it: a stranger's answer is never a slow peer; silence or a close
    // is, unless the same listener completed other nodes' handshakes.
    let stranger = l.handshake == Some(HandshakeFailure::Stranger);
    let others_answered = answering.contains(&(l.to, l.address.as_ref()));
    (stranger || others_answered).then_some(Culprit::Between { to: l.to })
}

/// One `fail` per culprit (a node's rule, or the path into one destination), or one `pass`.
pub(crate) fn intercepted(input: &ClusterInput) -> Vec<Finding> {
    let failed = accepted_failures(input);
    let answering = answering(input, &failed);
    let mut by: BTreeMap<Culprit, Vec<&LinkResult>> = BTreeMap::new();
    for l in failed {
        if let Some(c) = culprit(input, l, &answering) {
            by.entry(c).or_default().push(l);
        }
    }
    if by.is_empty() {
        return vec![Finding::new(
            ID,
            Status::Pass,
            "handshakes",
            "every connection that was accepted authenticated as the peer it dialled (or failed for another reason)",
        )];
    }
    by.into_iter()
        .map(|(c, links)| finding(input, &c, &links))
        .collect()
}

fn finding(input: &ClusterInput, c: &Culprit, links: &[&LinkResult]) -> Finding {
    let sources: Vec<u32> = dedup(links.iter().map(|l| l.from));
    let dests: Vec<u32> = dedup(links.iter().map(|l| l.to));
    let hosts = |r: &[u32]| {
        if r.len() == 1 {
            input.who(r[0])
        } else {
            format!("{} nodes ({})", r.len(), input.hosts_within(r, GROUP_CHARS))
        }
    };
    let how = how_text(links);
    let example = links
        .first()
        .map(|l| crate::core::cluster_common::host_port(&l.address, l.port))
        .unwrap_or_default();
    let ports: BTreeSet<u16> = links.iter().map(|l| l.port).collect();
    let subnet = input
        .chosen
        .or_else(|| input.evals.first())
        .map_or_else(|| "the cluster's subnet".into(), |e| e.network.id.clone());
    let mesh_hint = format!(
        "exclude the job's traffic from the mesh: on Istio, annotate the pods with `traffic.sidecar.istio.io/excludeOutboundIPRanges: {subnet}` (or `excludeOutboundPorts` / `excludeInboundPorts` with the master port and the ports NCCL and gloo listen on, which are random unless fixed), or run the job's pods without the sidecar (`sidecar.istio.io/inject: \"false\"`)"
    );
    let (node, summary, fix, cause) = match c {
        Culprit::Rule {
            rank,
            hook,
            text,
            target,
            to,
        } => {
            let whose = if hook == "output" {
                format!("{}'s own nat rule", input.who(*rank))
            } else {
                format!("the nat rule of {} (the peer)", input.who(*rank))
            };
            let sends = match (target.as_str(), to) {
                ("REDIRECT", Some(p)) => format!("to its local port {p}"),
                ("REDIRECT", None) => "to a local port".to_string(),
                (_, Some(d)) => format!("to {d}"),
                _ => "elsewhere".to_string(),
            };
            let summary = format!(
                "connections from {} to {} (e.g. {example}) were accepted but never authenticated as the peer they dialled ({how}): {whose} `{text}` ({hook}) sends them {sends}, where a sidecar or transparent proxy answers in the peer's place",
                hosts(&sources),
                hosts(&dests),
            );
            let mut fix = Fix::new(format!(
                "On {}, {mesh_hint}; or delete the rule if nothing needs it",
                input.who(*rank)
            ));
            if let Some(del) = delete_command(text) {
                fix = fix.command(del);
            }
            let fix = fix.command("iptables-save -t nat");
            (Some(*rank), summary, fix, "rule")
        }
        Culprit::Between { to } => {
            let summary = format!(
                "connections from {} to {} (e.g. {example}) were accepted but never authenticated as {} ({how}), while neither node's nat rules redirect them and {}: something between the nodes (a sidecar, a transparent proxy, a load balancer) answers in the peer's place",
                hosts(&sources),
                input.who(*to),
                input.who(*to),
                if links
                    .iter()
                    .all(|l| l.handshake == Some(HandshakeFailure::Stranger))
                {
                    "what answered is not preflight".to_string()
                } else {
                    "the same listener authenticated other nodes in time, so it is not slow"
                        .to_string()
                },
            );
            let port = ports.iter().next().copied().unwrap_or(0);
            let fix = Fix::new(format!(
                "Find what intercepts the connections into {} ({mesh_hint}); on {} compare what answers with the listener",
                input.who(*to),
                input.who(sources[0])
            ))
            .command(format!(
                "nc -v {} {port} </dev/null",
                links.first().map(|l| l.address.to_string()).unwrap_or_default()
            ))
            .command("iptables-save -t nat");
            (Some(*to), summary, fix, "between")
        }
    };
    Finding::new(
        ID,
        Status::Fail,
        format!(
            "{}->{}",
            input.hosts_within(&sources, GROUP_CHARS),
            input.hosts_within(&dests, GROUP_CHARS)
        ),
        summary,
    )
    .on_node(node)
    .with("cause", cause)
    .with("cause_node", node)
    .with("sources", sources.iter().take(64).collect::<Vec<_>>())
    .with("destinations", dests.iter().take(64).collect::<Vec<_>>())
    .with("links", links.len())
    .with(
        "handshake",
        dedup(links.iter().filter_map(|l| l.handshake).map(|h| h.as_str()))
            .into_iter()
            .collect::<Vec<_>>(),
    )
    .with(
        "rule",
        match c {
            Culprit::Rule { text, hook, .. } => Some(json!({"text": text, "hook": hook})),
            Culprit::Between { .. } => None,
        },
    )
    .fix(fix)
}

fn dedup<T: Ord + Copy>(items: impl Iterator<Item = T>) -> Vec<T> {
    items
        .collect::<BTreeSet<T>>()
        .into_iter()
        .collect::<Vec<_>>()
}

fn how_text(links: &[&LinkResult]) -> String {
    let kinds: BTreeSet<HandshakeFailure> = links.iter().filter_map(|l| l.handshake).collect();
    let words: Vec<&str> = [
        (HandshakeFailure::Silent, "nothing answered the handshake"),
        (HandshakeFailure::Closed, "closed during the handshake"),
        (HandshakeFailure::Stranger, "a stranger answered"),
    ]
    .into_iter()
    .filter(|(k, _)| kinds.contains(k))
    .map(|(_, w)| w)
    .collect();
    words.join("; ")
}

/// `iptables -t nat -D ...` for an iptables-save line (`-A CHAIN ...`).
fn delete_command(text: &str) -> Option<String> {
    let rest = text.trim().strip_prefix("-A ")?;
    Some(format!("iptables -t nat -D {rest}"))
}

/// Appends to the symptom findings (a failed link from or into a node a `link.intercepted`
/// finding names) that the cause is `link.intercepted`.
pub(crate) fn point_symptoms(findings: &mut [Finding]) {
    let pairs: Vec<(BTreeSet<u64>, BTreeSet<u64>)> = findings
        .iter()
        .filter(|f| f.id == ID && f.status == Status::Fail)
        .map(|f| {
            (
                ranks(&f.evidence["sources"]),
                ranks(&f.evidence["destinations"]),
            )
        })
        .collect();
    if pairs.is_empty() {
        return;
    }
    for f in findings
        .iter_mut()
        .filter(|f| f.status == Status::Fail && f.id == crate::link::ids::UNREACHABLE)
    {
        let to = f.evidence.get("to").and_then(|v| v.as_u64());
        let node = f.evidence.get("node").and_then(|v| v.as_u64());
        let from: BTreeSet<u64> = f
            .evidence
            .get("sources")
            .and_then(|s| s.as_array())
            .map(|a| a.iter().filter_map(|x| x["from"].as_u64()).collect())
            .unwrap_or_default();
        let hit = pairs.iter().any(|(s, d)| {
            to.is_some_and(|t| {
                d.contains(&t) && (from.is_empty() || from.iter().any(|x| s.contains(x)))
            }) || node.is_some_and(|n| s.contains(&n) || d.contains(&n))
        });
        if hit {
            // The symptom's own guess (a firewall, a route) gives way to the cause.
            let head = f
                .summary
                .split_once(": ")
                .map_or(f.summary.clone(), |(h, _)| h.to_string());
            f.summary = format!(
                "{head}: the connections were accepted and then intercepted, not filtered (see {ID})"
            );
            f.fix = Some(Fix::new(format!(
                "The cause is {ID} (its finding names the rule or the path): fix that, then rerun"
            )));
            let mut causes: Vec<serde_json::Value> = f
                .evidence
                .get("caused_by")
                .and_then(|v| v.as_array())
                .cloned()
                .unwrap_or_default();
            causes.push(json!(ID));
            f.evidence.insert("caused_by".into(), json!(causes));
        }
    }
}

fn ranks(v: &serde_json::Value) -> BTreeSet<u64> {
    v.as_array()
        .map(|a| a.iter().filter_map(|x| x.as_u64()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::FwRule;
    use crate::testkit::*;

    fn redirect(hook: &str, text: &str, dest: Option<&str>) -> NatRule {
        NatRule {
            hook: hook.into(),
            target: "REDIRECT".into(),
            matches: FwRule {
                protocol: Some("tcp".into()),
                destination: dest.map(str::to_string),
                text: text.into(),
                ..Default::default()
            },
            to: Some("15001".into()),
        }
    }

    /// Every link from `from` to `to` accepted, then silent.
    fn silent(c: &mut Cluster, from: u32, to: u32, how: HandshakeFailure) {
        c.set(from, to, LinkOutcome::Timeout);
        let addr = format!("10.0.0.{}", to + 1);
        for l in &mut c.links {
            if l.from == from && l.to == to && l.address == addr {
                l.handshake = Some(how);
            }
        }
    }

    #[test]
    fn the_dialers_own_output_redirect_is_named_not_a_firewall_between() {
        let mut c = Cluster::healthy(2);
        let rule = "-A OUTPUT -d 10.0.0.0/24 -p tcp -j REDIRECT --to-ports 15001";
        c.facts[1].firewall.nat = vec![redirect("output", rule, Some("10.0.0.0/24"))];
        silent(&mut c, 1, 0, HandshakeFailure::Silent);
        let fs = c.findings();
        let f = only(&fs, ID);
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.node, Some(1));
        assert!(f.summary.contains(rule), "{}", f.summary);
        assert!(
            f.summary.contains("to its local port 15001"),
            "{}",
            f.summary
        );
        assert!(
            commands(f).contains(
                &"iptables -t nat -D OUTPUT -d 10.0.0.0/24 -p tcp -j REDIRECT --to-ports 15001"
                    .to_string()
            )
        );
        assert!(
            f.fix
                .as_ref()
                .unwrap()
                .hint
                .contains("excludeOutboundIPRanges: 10.0.0.0/24")
        );
        let unreachable: Vec<&Finding> = with_id(&fs, crate::link::ids::UNREACHABLE)
            .into_iter()
            .filter(|f| f.status == Status::Fail)
            .collect();
        assert!(!unreachable.is_empty());
        for u in unreachable {
            assert!(
                u.summary.contains("(see link.intercepted)"),
                "{}",
                u.summary
            );
        }
    }

    #[test]
    fn the_peers_prerouting_rule_and_a_rule_for_another_network_are_told_apart() {
        let mut c = Cluster::healthy(3);
        let rule = "-A PREROUTING -p tcp -j REDIRECT --to-ports 15006";
        c.facts[0].firewall.nat = vec![redirect("prerouting", rule, None)];
        // Rank 2's rule is for another network: it is not the cause.
        c.facts[2].firewall.nat = vec![redirect(
            "output",
            "-A OUTPUT -d 192.168.0.0/16 -j REDIRECT",
            Some("192.168.0.0/16"),
        )];
        silent(&mut c, 2, 0, HandshakeFailure::Closed);
        let fs = c.findings();
        let f = only(&fs, ID);
        assert_eq!(f.node, Some(0));
        assert!(
            f.summary
                .contains("the nat rule of rank 0 (node01) (the peer)"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn a_slow_handshake_is_not_interception_but_a_stranger_is() {
        // Rank 0 answers nobody in time: a busy node, not an interception.
        let mut c = Cluster::healthy(3);
        silent(&mut c, 1, 0, HandshakeFailure::Silent);
        silent(&mut c, 2, 0, HandshakeFailure::Silent);
        assert_eq!(only(&c.findings(), ID).status, Status::Pass);
        // Rank 0 answers rank 2 but rank 1's connections go silent: something between.
        let mut c = Cluster::healthy(3);
        silent(&mut c, 1, 0, HandshakeFailure::Silent);
        let f = only(&c.findings(), ID).clone();
        assert_eq!(f.status, Status::Fail);
        assert!(
            f.summary.contains("something between the nodes"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("not slow"), "{}", f.summary);
        // A stranger's answer is never slowness.
        let mut c = Cluster::healthy(2);
        silent(&mut c, 1, 0, HandshakeFailure::Stranger);
        let f = only(&c.findings(), ID).clone();
        assert!(
            f.summary.contains("what answered is not preflight"),
            "{}",
            f.summary
        );
        // No accepted failures at all: pass.
        assert_eq!(
            only(&Cluster::healthy(2).findings(), ID).status,
            Status::Pass
        );
    }

    #[test]
    fn one_rule_on_many_nodes_is_one_finding_each_with_a_bounded_summary() {
        for n in [4u32, 40] {
            let mut c = Cluster::healthy(n);
            let rule = "-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001";
            for r in 1..n {
                c.facts[r as usize].firewall.nat = vec![redirect("output", rule, None)];
                for to in (0..n).filter(|t| *t != r) {
                    silent(&mut c, r, to, HandshakeFailure::Silent);
                }
            }
            let fs = c.findings();
            let found = with_id(&fs, ID);
            assert_eq!(found.len(), n as usize - 1);
            assert!(
                found.iter().all(|f| f.summary.len() < 700),
                "{}",
                found[0].summary
            );
        }
    }

    /// At 2, 3 and 4096 nodes (every node but rank 0 behind one rule, one link each into rank
    /// 0): one finding per node with the rule, none longer with n.
    #[test]
    fn the_judgment_alone_at_2_3_and_4096_nodes() {
        for n in [2u32, 3, 4096] {
            let rule = "-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001";
            let facts: Vec<crate::core::NodeFacts> = (0..n)
                .map(|r| {
                    let mut f = node(r % 200);
                    f.hostname = format!("node{:04}", r + 1);
                    if r > 0 {
                        f.firewall.nat = vec![redirect("output", rule, None)];
                    }
                    f
                })
                .collect();
            let links: Vec<LinkResult> = (1..n)
                .map(|r| {
                    let mut l = link(r, 0, "10.0.0.1", LinkOutcome::Timeout, None);
                    l.handshake = Some(HandshakeFailure::Silent);
                    l
                })
                .collect();
            let nodes: Vec<(u32, &crate::core::NodeFacts)> = facts
                .iter()
                .enumerate()
                .map(|(r, f)| (r as u32, f))
                .collect();
            let fs = intercepted(&ClusterInput {
                links: &crate::core::Links::borrowed(&links),
                ..ClusterInput::of_nodes(&nodes, n)
            });
            assert_eq!(fs.len(), n as usize - 1);
            assert!(
                fs.iter()
                    .all(|f| f.status == Status::Fail && f.node.is_some())
            );
            let longest = fs.iter().map(|f| f.summary.len()).max().unwrap_or(0);
            assert!(longest < 600, "{}", fs[0].summary);
        }
    }

    #[test]
    fn prefixes() {
        let a: IpAddr = "10.0.0.7".parse().unwrap();
        assert!(in_prefix(a, "10.0.0.0/24"));
        assert!(!in_prefix(a, "10.0.1.0/24"));
        assert!(in_prefix(a, "10.0.0.7"));
        assert!(in_prefix(a, "0.0.0.0/0"));
        assert!(!in_prefix(a, "fd00::/8"));
        assert!(in_prefix(a, "{ 10.0.0.7, 10.0.0.8 }"));
    }
}
