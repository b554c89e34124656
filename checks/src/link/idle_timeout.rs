//! `link.idle-timeout`: connections between ring neighbours that carried data when opened and no longer after a silence (a stateful firewall or NAT that forgets idle connections), with the node's own conntrack timeout as the cause where it is the shorter one.

use crate::core::ClusterInput;
use crate::core::{Finding, Fix, IdleLink, IdleOutcome, IdleTest, Status};
use serde_json::json;

/// The finding's id.
pub(crate) use crate::link::ids::IDLE_TIMEOUT as ID;

/// The kernel's default `nf_conntrack_tcp_timeout_established` (5 days), the value the fix
/// restores on a Linux box that was set shorter.
pub const KERNEL_DEFAULT_ESTABLISHED_S: u64 = 432_000;

/// A held link that no longer carried data, with the test that held it.
struct Died<'a> {
    link: &'a IdleLink,
    test: &'a IdleTest,
}

/// One `fail` per neighbour listener whose held connections stopped carrying data, or one
/// `pass` (or `skip` when the test did not run).
pub(crate) fn idle_timeout(input: &ClusterInput) -> Vec<Finding> {
    let tests: Vec<&IdleTest> = input
        .nodes
        .iter()
        .filter_map(|(_, f)| f.idle_test.as_ref())
        .collect();
    if tests.is_empty() {
        return vec![Finding::new(
            ID,
            Status::Skip,
            "idle connections",
            "the idle test did not run (--idle-test 0 or --quick, one node, or facts from files)",
        )];
    }
    let all = || {
        tests
            .iter()
            .flat_map(|t| t.links.iter().map(move |l| (l, *t)))
    };
    let died: Vec<Died> = all()
        .filter(|(l, _)| l.opened > 0 && l.answered < l.opened)
        .map(|(link, test)| Died { link, test })
        .collect();
    let not_opened = all().filter(|(l, _)| l.opened == 0).count();
    if died.is_empty() {
        let held: u32 = all().map(|(l, _)| l.opened).sum();
        let silent = all().map(|(l, _)| l.silent_s).fold(0.0, f64::max);
        let (status, summary) = if held == 0 {
            (
                Status::Skip,
                "no connection to a ring neighbour could be held (see the connectivity findings)"
                    .to_string(),
            )
        } else {
            (
                Status::Pass,
                format!(
                    "{held} connections between ring neighbours carried data again after {} s of silence",
                    secs(silent)
                ),
            )
        };
        return vec![
            Finding::new(ID, status, "idle connections", summary)
                .with("held", held)
                .with("silent_s", round(silent))
                .with("not_opened", not_opened),
        ];
    }
    died.iter().map(|d| finding(input, d)).collect()
}

fn finding(input: &ClusterInput, d: &Died) -> Finding {
    let l = d.link;
    let network = input
        .chosen
        .map(|c| c.network.id.clone())
        .unwrap_or_else(|| l.interface.clone());
    let what = match l.outcome {
        IdleOutcome::Reset => {
            "it was reset (something between the nodes no longer knew the connection and answered in the peer's place)".to_string()
        }
        IdleOutcome::Closed => "it was closed before it answered".to_string(),
        _ => format!(
            "no answer within {} s (the data was dropped on the way)",
            secs(d.test.answer_wait_s)
        ),
    };
    let short = own_short_timeouts(input, l);
    let cause = match short.first() {
        Some((rank, t)) => format!(
            "{}'s own nf_conntrack_tcp_timeout_established is {t} s, shorter than the {} s of silence: its connection tracking forgets such connections",
            input.who(*rank),
            secs(l.silent_s)
        ),
        None => "a stateful firewall or NAT between the nodes drops idle connections (neither node's own connection tracking expires them this soon)".to_string(),
    };
    let summary = format!(
        "{} -> {} at {} ({}, network {network}): {} connections carried data when opened, and after {} s of silence {} of them no longer did: {what}; {cause}. NCCL keeps its sockets open and silent between collectives, so the job's next collective after such a pause hangs.",
        input.who(l.from),
        input.who(l.to),
        l.address,
        l.interface,
        l.opened,
        secs(l.silent_s),
        l.opened - l.answered,
    );
    let conntrack: serde_json::Map<String, serde_json::Value> = [l.from, l.to]
        .iter()
        .map(|r| {
            let v = input.facts(*r).and_then(|f| f.sys.conntrack_established_s);
            (r.to_string(), json!(v))
        })
        .collect();
    let fix = match short.first() {
        Some((rank, _)) => Fix::new(format!(
            "Raise the established-connection timeout on {} above the longest pause of the job (the kernel's default is {KERNEL_DEFAULT_ESTABLISHED_S} s, 5 days); make it last with a file in /etc/sysctl.d",
            input.who(*rank)
        ))
        .command(format!(
            "sysctl -w net.netfilter.nf_conntrack_tcp_timeout_established={KERNEL_DEFAULT_ESTABLISHED_S}"
        )),
        None => Fix::new(format!(
            "Raise the idle (established-connection) timeout of the firewall or NAT between {} and {} above the longest pause of the job (a checkpoint or an evaluation can leave the sockets silent for minutes), or keep the job's traffic out of its connection tracking; NCCL sends no keepalives of its own. Where the box in between is Linux, on it:",
            input.who(l.from),
            input.who(l.to)
        ))
        .command(format!(
            "sysctl -w net.netfilter.nf_conntrack_tcp_timeout_established={KERNEL_DEFAULT_ESTABLISHED_S}"
        )),
    };
    Finding::new(
        ID,
        Status::Fail,
        format!("{}->{} {}", l.from, l.to, l.interface),
        summary,
    )
    .with("from", l.from)
    .with("to", l.to)
    .with("from_host", input.host(l.from))
    .with("to_host", input.host(l.to))
    .with("address", &l.address)
    .with("port", l.port)
    .with("interface", &l.interface)
    .with("network", network)
    .with("opened", l.opened)
    .with("answered", l.answered)
    .with("silent_s", round(l.silent_s))
    .with("outcome", l.outcome.as_str())
    .with("answer_wait_s", round(d.test.answer_wait_s))
    .with("error", &l.error)
    .with("conntrack_established_s", conntrack)
    .with("cause", &cause)
    .fix(fix)
}

/// The ends of `l` whose own conntrack established timeout is shorter than the silence, with
/// that timeout.
fn own_short_timeouts(input: &ClusterInput, l: &IdleLink) -> Vec<(u32, u64)> {
    [l.from, l.to]
        .into_iter()
        .filter_map(|r| {
            let t = input.facts(r)?.sys.conntrack_established_s?;
            ((t as f64) < l.silent_s).then_some((r, t))
        })
        .collect()
}

/// Seconds as a person reads them: whole above 10, one decimal below.
fn secs(s: f64) -> String {
    if s >= 10.0 {
        format!("{:.0}", s)
    } else {
        format!("{:.1}", s)
    }
}

fn round(s: f64) -> f64 {
    (s * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::NodeFacts;

    fn node(rank: u32, links: Vec<IdleLink>, conntrack: Option<u64>) -> NodeFacts {
        let mut f = NodeFacts {
            hostname: format!("node{rank}"),
            ..Default::default()
        };
        f.sys.conntrack_established_s = conntrack;
        f.idle_test = Some(IdleTest {
            idle_s: 8.0,
            answer_wait_s: 5.0,
            links,
        });
        f
    }

    fn link(from: u32, to: u32, answered: u32, outcome: IdleOutcome) -> IdleLink {
        IdleLink {
            from,
            to,
            interface: "eth0".into(),
            address: format!("10.200.{to}.2"),
            port: 40000,
            opened: 2,
            answered,
            silent_s: 8.2,
            outcome,
            error: None,
        }
    }

    fn judge(facts: &[NodeFacts]) -> Vec<Finding> {
        let nodes: Vec<(u32, &NodeFacts)> = facts
            .iter()
            .enumerate()
            .map(|(i, f)| (i as u32, f))
            .collect();
        idle_timeout(&ClusterInput::of_nodes(&nodes, nodes.len() as u32))
    }

    #[test]
    fn not_run_is_a_skip_and_all_answered_is_a_pass() {
        let f = judge(&[NodeFacts::default(), NodeFacts::default()]);
        assert_eq!((f.len(), f[0].status), (1, Status::Skip));
        let f = judge(&[
            node(0, vec![link(0, 1, 2, IdleOutcome::Ok)], Some(432000)),
            node(1, vec![link(1, 0, 2, IdleOutcome::Ok)], None),
        ]);
        assert_eq!((f.len(), f[0].status), (1, Status::Pass), "{f:#?}");
        assert_eq!(f[0].evidence["held"], json!(4));
        assert!(
            f[0].summary.contains("after 8.2 s of silence"),
            "{}",
            f[0].summary
        );
    }

    #[test]
    fn a_dead_connection_names_the_pair_the_silence_and_the_path_as_cause() {
        let f = judge(&[
            node(0, vec![link(0, 1, 0, IdleOutcome::NoAnswer)], Some(432000)),
            node(1, vec![link(1, 0, 2, IdleOutcome::Ok)], None),
        ]);
        assert_eq!(f.len(), 1, "{f:#?}");
        let f = &f[0];
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.subject, "0->1 eth0");
        for part in [
            "rank 0 (node0) -> rank 1 (node1) at 10.200.1.2",
            "2 connections carried data when opened, and after 8.2 s of silence 2 of them no longer did",
            "no answer within 5.0 s",
            "a stateful firewall or NAT between the nodes",
        ] {
            assert!(f.summary.contains(part), "{part}: {}", f.summary);
        }
        assert_eq!(
            f.evidence["conntrack_established_s"],
            json!({"0": 432000, "1": null})
        );
        let fix = f.fix.as_ref().unwrap();
        assert!(
            fix.hint
                .contains("between rank 0 (node0) and rank 1 (node1)")
        );
        assert_eq!(
            fix.commands,
            ["sysctl -w net.netfilter.nf_conntrack_tcp_timeout_established=432000"]
        );
    }

    #[test]
    fn a_nodes_own_short_conntrack_timeout_is_the_cause_only_when_shorter_than_the_silence() {
        let f = judge(&[
            node(0, vec![link(0, 1, 1, IdleOutcome::Reset)], None),
            node(1, vec![], Some(5)),
        ]);
        let f = &f[0];
        assert!(
            f.summary
                .contains("rank 1 (node1)'s own nf_conntrack_tcp_timeout_established is 5 s"),
            "{}",
            f.summary
        );
        assert!(
            f.summary.contains("silence 1 of them no longer did"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("it was reset"));
        assert!(f.fix.as_ref().unwrap().hint.contains("on rank 1 (node1)"));
        // A timeout longer than the silence is no cause.
        let f = judge(&[
            node(0, vec![link(0, 1, 0, IdleOutcome::NoAnswer)], None),
            node(1, vec![], Some(60)),
        ]);
        assert!(
            f[0].summary.contains("between the nodes"),
            "{}",
            f[0].summary
        );
    }

    #[test]
    fn links_never_opened_are_no_idle_failure() {
        let mut l = link(0, 1, 0, IdleOutcome::NotOpened);
        l.opened = 0;
        let f = judge(&[node(0, vec![l], None), node(1, vec![], None)]);
        assert_eq!((f.len(), f[0].status), (1, Status::Skip), "{f:#?}");
    }
}
