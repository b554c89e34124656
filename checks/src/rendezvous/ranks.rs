//! `cluster.rendezvous`: which ranks never joined the coordinator, and what a node that cannot reach it says about itself.

use crate::core::ClusterInput;
use crate::core::cluster_common::{LIST_CAP, host_port};
use crate::core::{Finding, Fix, LinkOutcome, Status};
use crate::rendezvous::joining::{Dialed, is_name};
use serde_json::{Value, json};

/// The error text the agent uses when the master port answered but the peer does not speak preflight.
pub const NOT_PREFLIGHT: &str = "the port answered but is not preflight";

pub(crate) fn rendezvous(input: &ClusterInput) -> Finding {
    let joined = input.joined();
    let missing: Vec<u32> = (0..input.nnodes).filter(|r| !joined.contains(r)).collect();
    let master = host_port(&input.master_label(), input.master_port);
    let joined_list: Vec<u32> = joined.iter().copied().collect();
    if missing.is_empty() {
        return Finding::new(
            crate::rendezvous::ids::RENDEZVOUS,
            Status::Pass,
            master,
            format!("all {} nodes joined", input.nnodes),
        )
        .with("joined", &joined_list)
        .with("nnodes", input.nnodes);
    }
    let described: Vec<String> = missing
        .iter()
        .take(LIST_CAP)
        .map(|r| {
            let who = match input.expected_host(*r) {
                Some(h) => format!("rank {r} ({h})"),
                None => format!("rank {r}"),
            };
            match input.refused.iter().find(|x| x.claimed_rank == Some(*r)) {
                Some(x) => format!(
                    "{who} connected from {} and was refused ({}; see cluster.refused)",
                    x.address, x.reason
                ),
                None if input.expected_host(*r).is_none() => format!("{who} (unknown host)"),
                None => who,
            }
        })
        .collect();
    let more = missing.len().saturating_sub(LIST_CAP);
    let more_text = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let refused_rank = |r: &u32| input.refused.iter().any(|x| x.claimed_rank == Some(*r));
    let missing_ev: Vec<Value> = missing
        .iter()
        .map(|r| json!({"rank": r, "host": input.expected_host(*r), "refused": refused_rank(r)}))
        .collect();
    let never: Vec<u32> = missing
        .iter()
        .copied()
        .filter(|r| !refused_rank(r))
        .collect();
    let verb = if never.is_empty() {
        "did not join"
    } else {
        "never joined"
    };
    let known_hosts: Vec<String> = missing
        .iter()
        .filter_map(|r| input.expected_host(*r))
        .collect();
    let where_ = if known_hosts.is_empty() {
        "the missing nodes".to_string()
    } else {
        known_hosts
            .iter()
            .take(LIST_CAP)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mport = input.master_port;
    let (mhost, loopback_note) = dialed_master(input);
    let at = host_port(&mhost, mport);
    let master_shown = host_port(&input.master_label(), mport);
    Finding::new(
        crate::rendezvous::ids::RENDEZVOUS,
        Status::Fail,
        master.clone(),
        format!(
            "{} of {} nodes {verb} the coordinator at {at}{loopback_note}: {}{more_text}",
            missing.len(),
            input.nnodes,
            described.join(", ")
        ),
    )
    .with("joined", &joined_list)
    .with("missing", missing_ev)
    .with("nnodes", input.nnodes)
    .with("master_port", input.master_port)
    .with("never_connected", &never)
    .with("master", master_shown)
    .with("dialed", &at)
    .fix(if never.is_empty() {
        Fix::new(
            "Start the refused nodes with the same flags as rank 0 (cluster.refused says what differs on each), then rerun on every node",
        )
        .command("ps -o args= -C preflight")
    } else {
        Fix::new(format!(
            "Start `preflight cluster` with the same flags on {where_}; if it is running there, check from that host that it reaches {at} (a node that cannot reach the master says why in its own report)"
        ))
        .command(format!("nc -vz {mhost} {mport}"))
    })
}

/// The address the other nodes dial, as the summary and the `nc` line name it: rank 0's own
/// address when the master name resolves to loopback on rank 0 itself (Debian's `127.0.1.1
/// vm`), with a clause saying so; else the master as given to the nodes (or rank 0's name).
fn dialed_master(input: &ClusterInput) -> (String, String) {
    let rank0 = input.nodes.iter().find(|(r, _)| *r == 0).map(|(_, f)| *f);
    let given = input
        .nodes
        .iter()
        .find_map(|(_, f)| f.master_resolution.as_ref())
        .map(|m| m.name.trim().to_string())
        .filter(|n| !n.is_empty());
    let label = input
        .expected_host(0)
        .or_else(|| given.clone())
        .unwrap_or_else(|| input.master_label());
    let Some(f) = rank0 else {
        return (label, String::new());
    };
    let loopback: Vec<std::net::IpAddr> = f
        .master_resolution
        .as_ref()
        .map(|m| m.addrs.iter().filter_map(|a| a.parse().ok()).collect())
        .unwrap_or_default();
    let own = crate::net::candidate_interfaces(&f.net)
        .first()
        .and_then(|i| i.usable_addrs().first().map(|a| a.addr));
    match own {
        Some(addr) if !loopback.is_empty() && loopback.iter().all(|a| a.is_loopback()) => (
            addr.to_string(),
            format!(
                " (rank 0's address; the master name {label} resolves to loopback {} on rank 0, see net.hostname-loopback)",
                loopback
                    .iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        _ => (label, String::new()),
    }
}

/// Says, on a node's failed-join finding for an IP master address, the name torchrun's own
/// errors will show for it: c10d prints the reverse entry of the address (pytorch#85300), which
/// reads like another host. Unchanged for a name, or an address without a reverse entry.
pub fn with_reverse_name(mut f: Finding, master: &str, reverse: Option<&str>) -> Finding {
    let Some(name) = reverse.filter(|n| !is_name(master) && !n.eq_ignore_ascii_case(master)) else {
        return f;
    };
    f.summary = format!(
        "{}; torchrun's own errors will name {master} as {name} (the reverse entry of the address here, pytorch#85300): the same address, not another host",
        f.summary
    );
    f.with("reverse_name", name)
}

/// The finding a node reports about itself when it could not reach the coordinator.
pub fn master_unreachable(
    rank: u32,
    master: &str,
    port: u16,
    outcome: LinkOutcome,
    waited_s: f64,
    error: &str,
    dialed: &Dialed,
) -> Finding {
    let target = host_port(master, port);
    let nc = format!("nc -vz {master} {port}");
    let not_preflight = error.to_ascii_lowercase().contains("not preflight");
    let (summary, fix) = match outcome {
        LinkOutcome::Timeout => (
            format!(
                "cannot reach the coordinator at {target}: connections time out (filtered: a firewall on the master, or between, drops packets to {port})"
            ),
            Fix::new(format!(
                "On the master, as root, accept TCP {port} with the command for the firewall it runs; then check from this node"
            ))
            .command(format!("iptables -I INPUT -p tcp --dport {port} -j ACCEPT"))
            .command(format!("ufw allow {port}/tcp"))
            .command(format!("firewall-cmd --add-port={port}/tcp"))
            .command(nc),
        ),
        LinkOutcome::Refused => (
            format!(
                "cannot reach the coordinator at {target}: connection refused (nothing listens on {target}, or a firewall REJECT rule)"
            ),
            Fix::new(format!(
                "Start rank 0 first (it hosts the coordinator on port {port}) with the same --master-port; if it runs, look for a REJECT rule for {port} on the master"
            ))
            .command(format!("ss -ltnp 'sport = :{port}'"))
            .command("iptables -S INPUT | grep -i reject")
            .command(nc),
        ),
        LinkOutcome::Unreachable => (
            format!(
                "cannot reach the coordinator at {target}: no route to {master} ({error})"
            ),
            Fix::new(format!(
                "Check the master address ({master}) and that this node has an interface on its subnet or a route to it"
            ))
            .command(format!("ip route get {master}"))
            .command(nc),
        ),
        _ if not_preflight => (
            format!(
                "the port {target} answered but is not preflight: something else (a leftover torchrun or training process?) holds port {port} on the master"
            ),
            Fix::new(format!(
                "On the master, find and stop the process holding port {port}, or use another --master-port on every node"
            ))
            .command(format!("ss -ltnp 'sport = :{port}'")),
        ),
        _ => (
            format!("cannot reach the coordinator at {target}: {error}"),
            Fix::new(format!(
                "Check that rank 0 runs preflight with the same flags (and the same --token or PREFLIGHT_TOKEN) on {target}"
            ))
            .command(nc),
        ),
    };
    // Where the name led on this node: the first thing to compare when rank 0 is elsewhere.
    let how = dialed.describe(master);
    let stale = if is_name(master) && !dialed.resolved.is_empty() && outcome != LinkOutcome::Error {
        format!(
            "; if rank 0 is not at {}, this node's /etc/hosts or DNS entry for {master} is stale (compare `getent hosts {master}` here and on rank 0)",
            dialed.resolved.join(", ")
        )
    } else {
        String::new()
    };
    let summary = format!("{summary}; {how}{stale}");
    // For a name, what it resolves to here comes first: a stale entry explains any outcome.
    let fix = if is_name(master) {
        let mut first = Fix::new(fix.hint).command(format!("getent hosts {master}"));
        first.commands.extend(fix.commands);
        first
    } else {
        fix
    };
    Finding::new(
        crate::rendezvous::ids::RENDEZVOUS,
        Status::Fail,
        target,
        summary,
    )
    .on_node(Some(rank))
    .with("master", master)
    .with("port", port)
    .with("result", outcome.as_str())
    .with("waited_s", waited_s)
    .with("error", error)
    .with("resolved", &dialed.resolved)
    .with("tried", &dialed.tried)
    .with("resolve_error", &dialed.resolve_error)
    .fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;

    fn none() -> Dialed {
        Dialed::default()
    }

    #[test]
    fn an_ip_masters_reverse_name_is_said_as_torchrun_will_print_it() {
        let f = master_unreachable(
            1,
            "10.0.0.9",
            29500,
            LinkOutcome::Unreachable,
            5.0,
            "No route to host (os error 113)",
            &none(),
        );
        let named = with_reverse_name(f.clone(), "10.0.0.9", Some("fake-host"));
        assert!(
            named.summary.ends_with(
                "torchrun's own errors will name 10.0.0.9 as fake-host (the reverse entry of the address here, pytorch#85300): the same address, not another host"
            ),
            "{}",
            named.summary
        );
        assert_eq!(named.evidence["reverse_name"], "fake-host");
        assert_eq!(with_reverse_name(f.clone(), "10.0.0.9", None), f);
        assert_eq!(with_reverse_name(f.clone(), "node0", Some("x")), f);
    }

    #[test]
    fn a_failed_join_names_what_the_master_name_resolved_to_and_what_was_tried() {
        let dialed = Dialed {
            resolved: vec!["10.200.1.9".into()],
            tried: vec!["10.200.1.9:29500".into()],
            resolve_error: None,
        };
        let f = master_unreachable(
            2,
            "node0",
            29500,
            LinkOutcome::Unreachable,
            10.0,
            "No route to host (os error 113)",
            &dialed,
        );
        assert!(
            f.summary
                .contains("node0 resolved to 10.200.1.9 on this node (tried 10.200.1.9:29500)"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("stale"), "{}", f.summary);
        assert_eq!(f.evidence["resolved"], json!(["10.200.1.9"]));
        assert_eq!(f.evidence["tried"], json!(["10.200.1.9:29500"]));
        assert!(commands(&f).contains(&"getent hosts node0".to_string()));
        // An address needs no resolving: only what was tried, and no getent.
        let ip = master_unreachable(
            1,
            "10.0.0.1",
            29500,
            LinkOutcome::Refused,
            1.0,
            "",
            &Dialed {
                resolved: vec!["10.0.0.1".into()],
                tried: vec!["10.0.0.1:29500".into()],
                resolve_error: None,
            },
        );
        assert!(
            ip.summary.contains("; tried 10.0.0.1:29500"),
            "{}",
            ip.summary
        );
        assert!(!commands(&ip).iter().any(|c| c.starts_with("getent")));
    }

    #[test]
    fn rendezvous_names_missing_ranks_with_expected_hosts() {
        let mut c = Cluster::healthy(4);
        c.expected = (1..=4).map(|i| format!("gpu{i:02}")).collect();
        c.not_joined = vec![2];
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::RENDEZVOUS);
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.node, None);
        assert!(f.summary.contains("rank 2 (gpu03)"), "{}", f.summary);
        assert_eq!(f.evidence["joined"], json!([0, 1, 3]));
        assert_eq!(
            f.evidence["missing"],
            json!([{"rank": 2, "host": "gpu03", "refused": false}])
        );
        assert_eq!(commands(f), vec!["nc -vz gpu01 29500"]);
    }

    #[test]
    fn a_refused_rank_is_said_refused_not_never_joined() {
        let mut c = Cluster::healthy(3);
        c.not_joined = vec![2];
        c.refused = vec![crate::core::Refusal {
            address: "10.0.0.3".into(),
            claimed_rank: Some(2),
            hostname: None,
            kind: crate::core::RefusalKind::Nnodes,
            reason: "rank 0 expects 3 nodes; rank 2 was started with --nnodes=4".into(),
            holder: None,
        }];
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::RENDEZVOUS);
        assert_eq!(f.status, Status::Fail);
        assert!(!f.summary.contains("never joined"), "{}", f.summary);
        assert!(!f.summary.contains("unknown host"), "{}", f.summary);
        assert!(
            f.summary
                .contains("rank 2 connected from 10.0.0.3 and was refused"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("see cluster.refused"), "{}", f.summary);
        assert_eq!(f.evidence["missing"][0]["refused"], json!(true));
        assert_eq!(f.evidence["never_connected"], json!([]));
    }

    #[test]
    fn rendezvous_says_unknown_host_without_a_host_list() {
        let mut c = Cluster::healthy(3);
        c.nnodes = 4;
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::RENDEZVOUS);
        assert_eq!(f.status, Status::Fail);
        assert!(f.summary.contains("rank 3 (unknown host)"), "{}", f.summary);
        assert_eq!(commands(f), vec!["nc -vz node01 29500"]);
    }

    /// Issue 55 (4): the master name resolves to loopback on rank 0 (`127.0.0.1 vm`): the
    /// summary and the `nc` line name rank 0's own address, not the name.
    #[test]
    fn a_master_name_that_is_loopback_on_rank_0_names_rank_0s_address() {
        let mut c = Cluster::healthy(1);
        c.nnodes = 2;
        for f in &mut c.facts {
            f.master_resolution = Some(crate::core::MasterResolution {
                name: "vm".into(),
                addrs: vec!["127.0.0.1".into()],
                joined_via: Some("127.0.0.1:29500".into()),
                ..Default::default()
            });
        }
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::RENDEZVOUS);
        assert!(
            f.summary.starts_with(
                "1 of 2 nodes never joined the coordinator at 10.0.0.1:29500 (rank 0's address; the master name vm resolves to loopback 127.0.0.1 on rank 0, see net.hostname-loopback)"
            ),
            "{}",
            f.summary
        );
        assert_eq!(commands(f), vec!["nc -vz 10.0.0.1 29500"]);
    }

    #[test]
    fn master_timeout_is_a_filter_with_firewall_commands_for_the_master() {
        let f = master_unreachable(
            2,
            "10.0.0.1",
            29500,
            LinkOutcome::Timeout,
            60.0,
            "",
            &none(),
        );
        assert_eq!(f.id, crate::rendezvous::ids::RENDEZVOUS);
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.node, Some(2));
        assert_eq!(f.subject, "10.0.0.1:29500");
        assert!(f.summary.contains("filtered"), "{}", f.summary);
        let cmds = commands(&f);
        assert!(cmds.contains(&"iptables -I INPUT -p tcp --dport 29500 -j ACCEPT".to_string()));
        assert!(cmds.contains(&"ufw allow 29500/tcp".to_string()));
        assert!(cmds.contains(&"firewall-cmd --add-port=29500/tcp".to_string()));
        assert!(cmds.contains(&"nc -vz 10.0.0.1 29500".to_string()));
        assert_eq!(f.evidence["result"], json!("timeout"));
        assert_eq!(f.evidence["waited_s"], json!(60.0));
    }

    #[test]
    fn master_refused_unreachable_and_foreign_listener_are_told_apart() {
        let refused = master_unreachable(1, "gpu01", 29500, LinkOutcome::Refused, 0.1, "", &none());
        assert!(refused.summary.contains("nothing listens on gpu01:29500"));
        assert!(refused.summary.contains("REJECT"));
        assert!(
            refused
                .fix
                .as_ref()
                .unwrap()
                .hint
                .contains("Start rank 0 first")
        );

        let route = master_unreachable(
            1,
            "10.9.0.1",
            29500,
            LinkOutcome::Unreachable,
            0.0,
            "No route to host (os error 113)",
            &none(),
        );
        assert!(route.summary.contains("no route"));
        assert!(commands(&route).contains(&"ip route get 10.9.0.1".to_string()));

        let foreign = master_unreachable(
            3,
            "fd00::1",
            29500,
            LinkOutcome::Error,
            0.2,
            NOT_PREFLIGHT,
            &none(),
        );
        assert_eq!(foreign.subject, "[fd00::1]:29500");
        assert!(foreign.summary.contains("is not preflight"));
        assert!(foreign.summary.contains("leftover torchrun"));

        let other = master_unreachable(
            1,
            "gpu01",
            29500,
            LinkOutcome::Error,
            0.2,
            "bad token",
            &none(),
        );
        assert!(other.summary.contains("bad token"));
        assert!(other.fix.as_ref().unwrap().hint.contains("--token"));
    }
}
