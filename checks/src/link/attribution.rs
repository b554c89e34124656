//! Which node's firewall explains a failed connection: the receiver's incoming rules, the sender's outgoing rules, both, or neither (a firewall between them), from the rules each node read.

use crate::core::ClusterInput;
use crate::core::{Fix, LinkResult};
use crate::firewall::{Direction, accept_peer_commands, path_verdict, verdict_text};

/// The side whose rules drop a connection, with the rule that does.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Culprit {
    /// The node holding the rule.
    pub node: u32,
    /// Incoming on the receiver, outgoing on the sender.
    pub dir: Direction,
    /// The deciding rule or policy, as the tool prints it.
    pub rule: String,
}

/// What the two nodes' rules say about one failed connection.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Attribution {
    /// One side's rules drop it (or both sides' do: receiver first).
    Rules(Vec<Culprit>),
    /// No rule on either side drops it: both sides' rules were read and accept.
    Between,
    /// Not known: `unread` names the sides whose rules were not read.
    Unknown { unread: Vec<(u32, Direction)> },
}

/// The attribution of the failed connection `link` (from `link.from` to `link.to`, port `link.port`).
pub(crate) fn attribute(input: &ClusterInput, link: &LinkResult) -> Attribution {
    let v6 = link.address.contains(':');
    let side = |node: u32, dir: Direction| {
        input
            .facts(node)
            .and_then(|f| path_verdict(&f.firewall, dir, link.port, v6))
    };
    let incoming = side(link.to, Direction::Incoming);
    let outgoing = side(link.from, Direction::Outgoing);
    let mut culprits = Vec::new();
    if let Some(v) = incoming.as_ref().filter(|v| !v.accepted) {
        culprits.push(Culprit {
            node: link.to,
            dir: Direction::Incoming,
            rule: verdict_text(v),
        });
    }
    if let Some(v) = outgoing.as_ref().filter(|v| !v.accepted) {
        culprits.push(Culprit {
            node: link.from,
            dir: Direction::Outgoing,
            rule: verdict_text(v),
        });
    }
    if !culprits.is_empty() {
        return Attribution::Rules(culprits);
    }
    let mut unread = Vec::new();
    if incoming.is_none() {
        unread.push((link.to, Direction::Incoming));
    }
    if outgoing.is_none() {
        unread.push((link.from, Direction::Outgoing));
    }
    if unread.is_empty() {
        Attribution::Between
    } else {
        Attribution::Unknown { unread }
    }
}

/// "rank 1 (node02)'s outgoing rules drop it (`-A OUTPUT ... -j DROP`)".
pub(crate) fn culprit_phrase(input: &ClusterInput, c: &Culprit) -> String {
    let what = match c.dir {
        Direction::Incoming => "incoming connections",
        Direction::Outgoing => "its own outgoing connections",
    };
    format!(
        "the firewall on {} drops {what} to that port (`{}`)",
        input.who(c.node),
        c.rule
    )
}

/// The fix for attributed culprits: on each node, accept the peer network in the culprit's direction.
pub(crate) fn culprit_fix(input: &ClusterInput, culprits: &[Culprit], peers: &[String]) -> Fix {
    let parts: Vec<String> = culprits
        .iter()
        .map(|c| match c.dir {
            Direction::Incoming => format!(
                "on {}, accept incoming connections from the nodes' network ({})",
                input.who(c.node),
                peers.join(", ")
            ),
            Direction::Outgoing => format!(
                "on {}, let its outgoing connections to the nodes' network ({}) out (its OUTPUT path drops them; an INPUT rule would not help)",
                input.who(c.node),
                peers.join(", ")
            ),
        })
        .collect();
    let hint = format!(
        "The node whose rules drop the connection is the one to change: {}. NCCL connects to random high ports, so opening only the master port is not enough.",
        parts.join("; and ")
    );
    culprits
        .iter()
        .flat_map(|c| {
            let fw = input.facts(c.node).map(|f| &f.firewall);
            peers
                .iter()
                .flat_map(move |p| accept_peer_commands(fw, c.dir, p))
        })
        .fold(Fix::new(hint), Fix::command)
}

/// The fix when no rule on either node explains a one-way failure: three `nc` commands (listen
/// on the receiver, connect from the sender, connect from any other host) and, a line each,
/// what their results mean and the command that then fixes it. The hint's lines are separated
/// by `\n`: the terminal shows each on lines of its own.
pub(crate) fn undecided_fix(input: &ClusterInput, link: &LinkResult, addr: &str) -> Fix {
    let (from, to) = (input.who(link.from), input.who(link.to));
    let port = link.port;
    let mut lines = Vec::new();
    if link.result == crate::core::LinkOutcome::Refused {
        lines.push(
            "A refusal comes from a REJECT rule or a port nothing listened on (rerun preflight if no rule rejects)."
                .to_string(),
        );
    }
    lines.push(format!(
        "Find where it drops with nc: listen on {to} (1), connect from {from} (2), then from any other host (3)."
    ));
    lines.push(format!(
        "(2) fails, (3) connects: {from}'s OUTPUT drops it: `iptables -I OUTPUT -d {addr} -j ACCEPT` there."
    ));
    lines.push(format!(
        "(2) and (3) fail: {to}'s INPUT drops it: `iptables -I INPUT -s <{from}'s address> -j ACCEPT` there."
    ));
    lines.push(format!(
        "(2) and (3) fail, and `iptables -vnL INPUT` on {to} counts no drop: a firewall between them (a switch ACL, a security group)."
    ));
    Fix::new(lines.join("\n"))
        .command(format!("nc -l -k {port}   # (1) on {to}"))
        .command(format!("nc -vz -w 5 {addr} {port}   # (2) on {from}"))
        .command(format!("nc -vz -w 5 {addr} {port}   # (3) on another host"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{FirewallFacts, FwAction, FwRule, InputChain, LinkOutcome};
    use crate::testkit::*;

    fn output_drop() -> InputChain {
        InputChain {
            policy: "accept".into(),
            name: Some("filter OUTPUT".into()),
            rules: vec![FwRule {
                action: FwAction::Drop,
                protocol: Some("tcp".into()),
                dports: vec![(1024, 65535)],
                ct_state: Some("NEW".into()),
                text: "-A OUTPUT -p tcp -m tcp --dport 1024:65535 --syn -j DROP".into(),
                ..Default::default()
            }],
            then: Vec::new(),
        }
    }

    fn accepting(name: &str) -> InputChain {
        InputChain {
            policy: "accept".into(),
            name: Some(name.into()),
            ..Default::default()
        }
    }

    fn read(output: Option<InputChain>) -> FirewallFacts {
        FirewallFacts {
            backend: Some("iptables".into()),
            input: Some(accepting("filter INPUT")),
            output: Some(output.unwrap_or_else(|| accepting("filter OUTPUT"))),
            ..Default::default()
        }
    }

    #[test]
    fn the_senders_output_drop_is_the_cause_and_the_receivers_input_is_not() {
        let mut c = Cluster::healthy(2);
        c.set(1, 0, LinkOutcome::Timeout);
        c.facts[0].firewall = read(None);
        c.facts[1].firewall = read(Some(output_drop()));
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::UNREACHABLE);
        assert_eq!(f.node, Some(1), "{f:#?}");
        assert!(
            f.summary.contains("rank 1 (node02) drops its own outgoing"),
            "{}",
            f.summary
        );
        assert!(!f.summary.contains("firewall on rank 0"), "{}", f.summary);
        assert_eq!(
            commands(f),
            vec!["iptables -I OUTPUT -d 10.0.0.0/24 -j ACCEPT"]
        );
        assert!(f.fix.as_ref().unwrap().hint.contains("OUTPUT"));
        assert_eq!(f.evidence["cause_direction"], serde_json::json!("outgoing"));
        assert_eq!(f.evidence["cause_node"], serde_json::json!(1));
    }

    #[test]
    fn the_receivers_input_drop_keeps_the_input_fix() {
        let mut c = Cluster::healthy(2);
        c.set(1, 0, LinkOutcome::Timeout);
        let mut fw = read(None);
        fw.input = Some(InputChain {
            policy: "drop".into(),
            ..accepting("filter INPUT")
        });
        c.facts[0].firewall = fw;
        c.facts[1].firewall = read(None);
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::UNREACHABLE);
        assert_eq!(f.node, Some(0));
        assert_eq!(
            commands(f),
            vec!["iptables -I INPUT -s 10.0.0.0/24 -j ACCEPT"]
        );
        assert_eq!(f.evidence["cause_direction"], serde_json::json!("incoming"));
    }

    #[test]
    fn no_rule_on_either_side_says_both_and_how_to_tell() {
        let mut c = Cluster::healthy(2);
        c.set(1, 0, LinkOutcome::Timeout);
        c.facts[0].firewall = read(None);
        c.facts[1].firewall = read(None);
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::UNREACHABLE);
        assert!(f.summary.contains("between them"), "{}", f.summary);
        let cmds = commands(f);
        assert!(cmds[0].starts_with("nc -l -k "), "{cmds:?}");
        assert!(cmds[0].ends_with("# (1) on rank 0 (node01)"), "{cmds:?}");
        assert!(cmds[1].ends_with("# (2) on rank 1 (node02)"), "{cmds:?}");
        assert!(cmds[2].ends_with("# (3) on another host"), "{cmds:?}");
        // One line for how to run them, then one line per result: what it means, what fixes it.
        let hint = &f.fix.as_ref().unwrap().hint;
        let lines: Vec<&str> = hint.lines().collect();
        assert_eq!(lines.len(), 4, "{hint}");
        assert!(
            lines[1].starts_with("(2) fails, (3) connects: rank 1 (node02)'s OUTPUT"),
            "{hint}"
        );
        assert!(
            lines[2].contains("rank 0 (node01)'s INPUT drops it"),
            "{hint}"
        );
        assert!(lines[3].contains("a firewall between them"), "{hint}");
        assert_eq!(f.evidence["cause_direction"], serde_json::Value::Null);
        // Unread rules on one side: both possibilities too, naming what was not read.
        c.facts[1].firewall = FirewallFacts::default();
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::UNREACHABLE);
        assert!(f.summary.contains("not read"), "{}", f.summary);
        assert!(commands(f)[0].starts_with("nc -l -k "));
    }

    #[test]
    fn an_ipv6_link_is_judged_by_the_ipv6_rules() {
        let nodes_facts = {
            let mut c = Cluster::healthy(2);
            // IPv4 output drops, IPv6 output accepts on rank 1; rank 0's IPv6 input drops.
            c.facts[1].firewall = read(Some(output_drop()));
            c.facts[1].firewall.output6 = Some(accepting("ip6 filter OUTPUT"));
            c.facts[0].firewall = read(None);
            c.facts[0].firewall.input6 = Some(InputChain {
                policy: "drop".into(),
                ..accepting("ip6 filter INPUT")
            });
            c.facts
        };
        let nodes: Vec<(u32, &crate::core::NodeFacts)> = nodes_facts
            .iter()
            .enumerate()
            .map(|(i, f)| (i as u32, f))
            .collect();
        let input = ClusterInput::of_nodes(&nodes, 2);
        let link = LinkResult {
            from: 1,
            to: 0,
            address: "fd00::1".into(),
            port: 40001,
            result: LinkOutcome::Timeout,
            ..Default::default()
        };
        match attribute(&input, &link) {
            Attribution::Rules(v) => {
                assert_eq!(v.len(), 1, "{v:?}");
                assert_eq!((v[0].node, v[0].dir), (0, Direction::Incoming));
                assert!(v[0].rule.contains("ip6 filter INPUT"), "{v:?}");
            }
            other => panic!("{other:?}"),
        }
        // IPv6 rules not read (an old facts file): unknown, not judged by the IPv4 rules.
        let v4_only = {
            let mut f = nodes_facts.clone();
            f[0].firewall.input6 = None;
            f[1].firewall.output6 = None;
            f
        };
        let nodes: Vec<(u32, &crate::core::NodeFacts)> = v4_only
            .iter()
            .enumerate()
            .map(|(i, f)| (i as u32, f))
            .collect();
        let input = ClusterInput {
            nodes: &nodes,
            ..input
        };
        assert!(matches!(
            attribute(&input, &link),
            Attribution::Unknown { .. }
        ));
    }

    #[test]
    fn attribution_reads_both_sides() {
        let mut c = Cluster::healthy(2);
        c.facts[1].firewall = read(Some(output_drop()));
        c.facts[0].firewall = FirewallFacts {
            ufw: Some("active".into()),
            ufw_outgoing: Some("deny".into()),
            ..Default::default()
        };
        let nodes: Vec<(u32, &crate::core::NodeFacts)> = c
            .facts
            .iter()
            .enumerate()
            .map(|(i, f)| (i as u32, f))
            .collect();
        let input = ClusterInput::of_nodes(&nodes, 2);
        let link = LinkResult {
            from: 1,
            to: 0,
            port: 40001,
            result: LinkOutcome::Timeout,
            ..Default::default()
        };
        match attribute(&input, &link) {
            Attribution::Rules(v) => {
                assert_eq!(v.len(), 1);
                assert_eq!(v[0].node, 1);
                assert_eq!(v[0].dir, Direction::Outgoing);
            }
            other => panic!("{other:?}"),
        }
        let back = LinkResult {
            from: 0,
            to: 1,
            ..link
        };
        // Rank 0's rules are unread but ufw's outgoing default denies: that decides.
        match attribute(&input, &back) {
            Attribution::Rules(v) => {
                assert_eq!(v[0].node, 0);
                assert!(v[0].rule.contains("ufw default outgoing"), "{v:?}");
            }
            other => panic!("{other:?}"),
        }
    }
}
