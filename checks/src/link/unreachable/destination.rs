//! One `link.unreachable` finding per destination that some peers cannot reach: who is to blame (the receiver's rules, the senders', a firewall between them), the summary and the command that opens it.

use super::*;

/// Who the failures into one destination are blamed on.
pub(super) enum Blame {
    /// The destination's incoming rules (the rule when one was read).
    Receiver(Option<String>),
    /// The sources' outgoing rules.
    Senders(Vec<Culprit>),
    /// One source, and no rule read on either side explains it.
    Undecided(Attribution),
}

pub(super) fn blame(
    input: &ClusterInput,
    to: u32,
    failed: &[&LinkResult],
    dominant: LinkOutcome,
) -> Blame {
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

pub(super) fn absent_members(
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

pub(super) fn unreachable_destination(
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
    let sources_ev = sources_evidence(input, &failed);
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
    let (cause_node, cause_direction, cause_rule) = cause(&blamed, to, &failed);
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

/// Each failed source's evidence: who, its outcome, the port and the error.
fn sources_evidence(input: &ClusterInput, failed: &[&LinkResult]) -> Vec<Value> {
    failed
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
        .collect()
}

/// The node, direction and rule the blame points at (none when undecided or nothing failed).
fn cause(
    blamed: &Blame,
    to: u32,
    failed: &[&LinkResult],
) -> (Option<u32>, Option<&'static str>, Option<String>) {
    match blamed {
        Blame::Receiver(rule) if !failed.is_empty() => {
            (Some(to), Some(Direction::Incoming.as_str()), rule.clone())
        }
        Blame::Senders(c) => (
            c.first().map(|c| c.node),
            Some(Direction::Outgoing.as_str()),
            c.first().map(|c| c.rule.clone()),
        ),
        _ => (None, None, None),
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn destination_summary(
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

pub(super) fn destination_fix(
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
pub(super) fn local_drop_fix(input: &ClusterInput, node: u32) -> Option<Fix> {
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
pub(super) fn local_drop(
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
