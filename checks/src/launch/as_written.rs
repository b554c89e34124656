//! `launch.as-written`: would the job as the user gave it (their master address, their `NCCL_SOCKET_IFNAME`) hang where the advice changes it? A change forced by a network that cannot carry the job is a warning that says so; a change for speed only stays a note.

use crate::core::ClusterInput;
use crate::core::NetworkEval;
use crate::core::{Finding, Fix, LinkOutcome, Recommendation, Status};
use crate::net::ifname::IfnameSpec;
use std::net::IpAddr;

pub use crate::launch::ids::AS_WRITTEN as ID;

/// The master address the job was given: as written, and what it resolved to.
pub struct Given<'a> {
    pub master: &'a str,
    pub ips: &'a [IpAddr],
}

/// How the failing pairs of a network failed: "timeout" (filtered), "refused", ...
fn failure_words(input: &ClusterInput, eval: &NetworkEval) -> String {
    // A link that is not ok is always a record: the table's plain cells are skipped.
    let mut words: Vec<&str> =
        input
            .links
            .records()
            .filter(|l| {
                l.result != LinkOutcome::Ok
                    && eval.network.members.get(&l.to).is_some_and(|m| {
                        m.address.to_string() == l.address.trim_matches(['[', ']'])
                    })
            })
            .map(|l| l.result.as_str())
            .collect();
    words.sort_unstable();
    words.dedup();
    if words.is_empty() {
        "not measured".into()
    } else {
        words.join(", ")
    }
}

/// What the launch as written would do: why it hangs, why it works anyway, and the evidence.
#[derive(Default)]
struct Judged<'a> {
    hangs: Vec<String>,
    notes: Vec<String>,
    ev: Vec<(&'a str, serde_json::Value)>,
}

/// One judgment of the user's launch as written against the advice.
pub fn as_written(input: &ClusterInput, given: Option<Given<'_>>, rec: &Recommendation) -> Finding {
    let Some(chosen) = input.chosen else {
        return Finding::new(
            ID,
            Status::Skip,
            "launch",
            "no network carries the job yet (see link.unreachable): nothing to compare the command as written with",
        );
    };
    let mut j = Judged::default();
    if let Some(g) = &given {
        judge_master(input, chosen, g, rec, &mut j);
    }
    for var in ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"] {
        judge_ifname(input, chosen, rec, var, &mut j);
    }
    let mut f = verdict(&j, rec);
    for (k, v) in j.ev {
        f = f.with(k, v);
    }
    f.with("recommended_master", &rec.master_addr)
        .with("chosen_network", &chosen.network.id)
}

/// The master address given, when it lies on another network than the chosen one.
fn judge_master<'a>(
    input: &ClusterInput,
    chosen: &NetworkEval,
    g: &Given<'_>,
    rec: &Recommendation,
    j: &mut Judged<'a>,
) {
    let recommended = rec.master_addr.clone().unwrap_or_default();
    let given_net = input.evals.iter().find(|e| {
        e.network
            .members
            .get(&0)
            .is_some_and(|m| g.ips.contains(&m.address))
    });
    if let Some(net) = given_net.filter(|n| n.network.id != chosen.network.id) {
        let iface = net
            .network
            .members
            .get(&0)
            .map(|m| m.interface.clone())
            .unwrap_or_default();
        j.ev.push(("given_master", g.master.into()));
        j.ev.push(("given_network", net.network.id.clone().into()));
        j.ev.push(("given_pairs_ok", net.pairs_ok.into()));
        j.ev.push(("given_pairs_total", net.pairs_total.into()));
        if net.fully_connected {
            j.notes.push(format!(
                "the master address {} (rank 0's {iface} on {}) also carries the job; the advice moves it to {recommended} on {} only because that network is faster",
                g.master, net.network.id, chosen.network.id
            ));
        } else {
            j.hangs.push(format!(
                "{} (rank 0's {iface}) is on {}, which passes only the master port {}: every node joined through it, but {} of {} pairs on NCCL's random high ports failed there ({}); use the master address {recommended} on {} and the environment below",
                g.master,
                net.network.id,
                input.master_port,
                net.pairs_total.saturating_sub(net.pairs_ok),
                net.pairs_total,
                failure_words(input, net),
                chosen.network.id
            ));
        }
    }
}

/// `var` (NCCL_SOCKET_IFNAME or GLOO_SOCKET_IFNAME) as the nodes have it, when it selects
/// another interface than the chosen network's.
fn judge_ifname<'a>(
    input: &ClusterInput,
    chosen: &NetworkEval,
    rec: &Recommendation,
    var: &'a str,
    j: &mut Judged<'a>,
) {
    let mut users: Vec<(u32, String)> = Vec::new();
    let mut selected: Vec<&NetworkEval> = Vec::new();
    for (rank, facts) in input.nodes {
        let Some(raw) = facts.env.get(var) else {
            continue;
        };
        let spec = if var == "GLOO_SOCKET_IFNAME" {
            IfnameSpec::parse_gloo(raw)
        } else {
            IfnameSpec::parse(raw)
        };
        if spec.ignored {
            continue;
        }
        let chosen_iface = chosen.network.members.get(rank).map(|m| &m.interface);
        if chosen_iface.is_some_and(|i| spec.matches(i)) {
            continue;
        }
        users.push((*rank, raw.clone()));
        for e in input.evals {
            let hit = e
                .network
                .members
                .get(rank)
                .is_some_and(|m| spec.matches(&m.interface));
            if hit && !selected.iter().any(|s| s.network.id == e.network.id) {
                selected.push(e);
            }
        }
    }
    if users.is_empty() || selected.is_empty() {
        // Matching no interface at all is env.socket-ifname's finding on that node.
        return;
    }
    let value = &users[0].1;
    let nets: Vec<String> = selected
        .iter()
        .map(|e| {
            format!(
                "{} ({} of {} pairs)",
                e.network.id, e.pairs_ok, e.pairs_total
            )
        })
        .collect();
    j.ev.push((var, value.clone().into()));
    if selected.iter().all(|e| !e.fully_connected) {
        j.hangs.push(format!(
            "{var}={value} selects {}, where not every pair connects ({}); use {var} below ({} on {})",
            nets.join(", "),
            failure_words(input, selected[0]),
            rec.env.get(var).map_or("per node", String::as_str),
            chosen.network.id
        ));
    } else {
        j.notes.push(format!(
            "{var}={value} selects {}, which also carries the job; the advice prefers {}",
            nets.join(", "),
            chosen.network.id
        ));
    }
}

/// The finding: a warning naming what hangs with the fix, a note, or a pass.
fn verdict(j: &Judged, rec: &Recommendation) -> Finding {
    if !j.hangs.is_empty() {
        let mut fix = Fix::new(
            "Launch with the master address and the environment below (the launch commands carry them), not the command as written: what it names cannot carry the job's traffic.",
        );
        for var in ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"] {
            if let Some(v) = rec.env.get(var) {
                fix = fix.command(format!("export {var}={v}"));
            }
        }
        if let Some(l) = rec.launch.iter().find(|l| l.node_rank == 0) {
            fix = fix.command(l.command.clone());
        }
        Finding::new(
            ID,
            Status::Warn,
            "launch",
            format!("your command as written hangs: {}", j.hangs.join("; and ")),
        )
        .fix(fix)
    } else if !j.notes.is_empty() {
        Finding::new(
            ID,
            Status::Pass,
            "launch",
            format!(
                "your command as written works too: {}",
                j.notes.join("; and ")
            ),
        )
    } else {
        Finding::new(
            ID,
            Status::Pass,
            "launch",
            "the advice keeps the master address and interfaces the job was given",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::networks::{choose, discover, evaluate};
    use crate::testkit::*;

    /// eno1 (10.0.0.0/24) passes only the master port; eth1 (10.1.0.0/24) carries everything.
    fn mgmt_only_master_port(eno1_works: bool) -> Cluster {
        let mut c = Cluster::healthy(3);
        c.add_fast_eth1();
        for from in 0..3 {
            for to in (0..3).filter(|t| *t != from) {
                c.add_eth1_link(from, to, 90.0);
                if !eno1_works {
                    c.set(from, to, LinkOutcome::Timeout);
                }
            }
        }
        c
    }

    fn judge(c: &Cluster, given: &str) -> Finding {
        let nodes: Vec<(u32, &crate::core::NodeFacts)> = c
            .facts
            .iter()
            .enumerate()
            .map(|(i, f)| (i as u32, f))
            .collect();
        let ranks: Vec<u32> = nodes.iter().map(|(r, _)| *r).collect();
        let evals = evaluate(&discover(&nodes, &c.links), &c.links, &ranks);
        let chosen = choose(&evals);
        let input = ClusterInput {
            nodes: &nodes,
            nnodes: 3,
            expected_hosts: &[],
            links: &crate::core::Links::borrowed(&c.links),
            evals: &evals,
            chosen,
            master_port: 29500,
            refused: &[],
            min_link_gbit: None,
            retested: &[],
        };
        let rec = Recommendation {
            master_addr: chosen
                .and_then(|e| e.network.members.get(&0))
                .map(|m| m.address.to_string()),
            env: [
                ("NCCL_SOCKET_IFNAME".to_string(), "eth1".to_string()),
                ("GLOO_SOCKET_IFNAME".to_string(), "eth1".to_string()),
            ]
            .into(),
            launch: vec![crate::core::LaunchCommand {
                node_rank: 0,
                command: "NCCL_SOCKET_IFNAME=eth1 torchrun --master-addr=10.1.0.1 train.py".into(),
            }],
            ..Default::default()
        };
        let ips: Vec<IpAddr> = vec![given.parse().unwrap()];
        as_written(
            &input,
            Some(Given {
                master: given,
                ips: &ips,
            }),
            &rec,
        )
    }

    #[test]
    fn a_master_on_a_network_that_passes_only_the_master_port_warns_that_it_hangs() {
        let c = mgmt_only_master_port(false);
        let f = judge(&c, "10.0.0.1");
        assert_eq!(f.status, Status::Warn, "{}", f.summary);
        assert!(
            f.summary.starts_with("your command as written hangs: 10.0.0.1 (rank 0's eno1) is on 10.0.0.0/24, which passes only the master port 29500"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("6 of 6 pairs"), "{}", f.summary);
        assert!(f.summary.contains("(timeout)"), "{}", f.summary);
        assert!(
            f.summary
                .contains("use the master address 10.1.0.1 on 10.1.0.0/24"),
            "{}",
            f.summary
        );
        let fix = f.fix.expect("fix");
        assert_eq!(fix.commands[0], "export NCCL_SOCKET_IFNAME=eth1");
        assert!(fix.commands[2].contains("--master-addr=10.1.0.1"));
        assert_eq!(f.evidence["given_network"], "10.0.0.0/24");
    }

    #[test]
    fn a_faster_network_is_only_a_note_and_the_same_master_is_silent() {
        let c = mgmt_only_master_port(true);
        let f = judge(&c, "10.0.0.1");
        assert_eq!(f.status, Status::Pass, "{}", f.summary);
        assert!(f.summary.contains("works too"), "{}", f.summary);
        assert!(f.summary.contains("faster"), "{}", f.summary);
        let f = judge(&c, "10.1.0.1");
        assert_eq!(f.status, Status::Pass);
        assert!(
            f.summary.contains("keeps the master address"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn a_users_ifname_on_the_broken_network_warns() {
        let mut c = mgmt_only_master_port(false);
        for f in &mut c.facts {
            f.env.insert("NCCL_SOCKET_IFNAME".into(), "eno1".into());
        }
        let f = judge(&c, "10.1.0.1");
        assert_eq!(f.status, Status::Warn, "{}", f.summary);
        assert!(
            f.summary
                .contains("NCCL_SOCKET_IFNAME=eno1 selects 10.0.0.0/24 (0 of 6 pairs)"),
            "{}",
            f.summary
        );
        assert!(
            f.summary.contains("use NCCL_SOCKET_IFNAME below (eth1"),
            "{}",
            f.summary
        );
        // The same value on a network that works is a preference: a note.
        let mut c = mgmt_only_master_port(true);
        for f in &mut c.facts {
            f.env.insert("NCCL_SOCKET_IFNAME".into(), "eno1".into());
        }
        assert_eq!(judge(&c, "10.1.0.1").status, Status::Pass);
    }
}
