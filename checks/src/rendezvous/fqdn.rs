//! `cluster.fqdn`: under torchrun's c10d rendezvous the workers reach the TCPStore at the name
//! rank 0 publishes, `socket.getfqdn()`, unless `--local-addr` is given (pytorch/pytorch
//! #73682, #150532). Every other node must resolve that name to an address of rank 0 it
//! reached.

use crate::core::ClusterInput;
use crate::core::{Finding, Fix, LinkOutcome, Status};
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

/// Nodes named in the evidence; the count says how many there were in all.
const NODES_SHOWN: usize = 64;

pub(crate) fn fqdn(input: &ClusterInput) -> Finding {
    let id = crate::rendezvous::ids::FQDN;
    let lookups: Vec<(u32, &crate::core::NameLookup)> = input
        .nodes
        .iter()
        .filter(|(r, _)| *r != 0)
        .filter_map(|(r, f)| f.sys.master_fqdn.as_ref().map(|l| (*r, l)))
        .collect();
    let Some(name) = lookups.first().map(|(_, l)| l.name.clone()) else {
        return Finding::new(
            id,
            Status::Skip,
            "fqdn",
            "not a c10d rendezvous (or no node looked rank 0's name up): the static rendezvous uses the master address as given",
        );
    };
    // Rank 0's addresses each node reached, from the links (indexed once).
    let mut reached: HashMap<u32, BTreeSet<IpAddr>> = HashMap::new();
    for l in input
        .links
        .iter()
        .filter(|l| l.to == 0 && l.result == LinkOutcome::Ok)
    {
        if let Ok(ip) = l.address.parse::<IpAddr>() {
            reached.entry(l.from).or_default().insert(ip);
        }
    }
    let mut bad: Vec<(u32, String, Value)> = Vec::new();
    for (r, l) in &lookups {
        let got: &[IpAddr] = &l.addresses;
        let theirs = reached.get(r);
        let why = if got.is_empty() {
            Some(format!(
                "{name} does not resolve on {} ({})",
                input.who(*r),
                l.error.as_deref().unwrap_or("no address")
            ))
        } else if got.iter().all(|a| a.is_loopback()) {
            Some(format!(
                "{name} resolves to loopback {} on {}",
                list(got),
                input.who(*r)
            ))
        } else if !got.iter().any(|a| theirs.is_some_and(|t| t.contains(a))) {
            Some(format!(
                "{name} resolves to {} on {}, an address of rank 0 it did not reach{}",
                list(got),
                input.who(*r),
                match theirs {
                    Some(t) if !t.is_empty() => format!(
                        " (it reached rank 0 at {})",
                        list(&t.iter().copied().collect::<Vec<_>>())
                    ),
                    _ => String::new(),
                }
            ))
        } else {
            None
        };
        if let Some(why) = why {
            bad.push((
                *r,
                why,
                json!({"rank": r, "host": input.host(*r), "resolved": got, "error": l.error}),
            ));
        }
    }
    let judged = lookups.len();
    if bad.is_empty() {
        return Finding::new(
            id,
            Status::Pass,
            name.clone(),
            format!(
                "rank 0's FQDN {name} (what torchrun's c10d publishes) resolves on every node to an address of rank 0 it reached ({judged} node(s) checked)"
            ),
        )
        .with("fqdn", &name)
        .with("nodes_checked", judged);
    }
    let target = input
        .chosen
        .and_then(|e| e.network.members.get(&0))
        .map(|m| m.address.to_string())
        .or_else(|| {
            reached
                .values()
                .flat_map(|s| s.iter())
                .next()
                .map(|a| a.to_string())
        });
    let ranks: Vec<u32> = bad.iter().map(|(r, _, _)| *r).collect();
    let first = bad[0].1.clone();
    let summary = if bad.len() == 1 {
        format!(
            "{first}: under torchrun's c10d rendezvous the workers connect to rank 0's TCPStore at the name it publishes, so this node's workers would time out at init"
        )
    } else {
        format!(
            "rank 0's FQDN {name} (what torchrun's c10d publishes for the TCPStore) does not lead to rank 0 on {} of {judged} nodes ({}); e.g. {first}: their workers would time out at init",
            bad.len(),
            crate::core::cluster_common::ranks_phrase(&ranks)
        )
    };
    let mut fix = Fix::new(format!(
        "Either start rank 0's torchrun with --local-addr=<its address on the chosen network> (torchrun then publishes that address instead of {name}), or make {name} resolve to that address on every node (DNS or /etc/hosts)"
    ));
    if let Some(addr) = &target {
        fix = fix
            .command(format!(
                "torchrun --local-addr={addr} ...   # on rank 0 ({}), with the rest of its line",
                input.host(0).unwrap_or_default()
            ))
            .command(format!(
                "echo '{addr} {name}' >> /etc/hosts   # on the nodes above"
            ));
    }
    fix = fix.command(format!(
        "getent hosts {name}   # on a node above: what it resolves to"
    ));
    Finding::new(id, Status::Warn, name.clone(), summary)
        .with("fqdn", &name)
        .with("nodes_checked", judged)
        .with("nodes_failing", bad.len())
        .with(
            "nodes",
            bad.iter()
                .take(NODES_SHOWN)
                .map(|(_, _, v)| v.clone())
                .collect::<Vec<_>>(),
        )
        .with("rank0_address", &target)
        .fix(fix)
}

fn list(addrs: &[IpAddr]) -> String {
    addrs
        .iter()
        .map(IpAddr::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use crate::core::{NameLookup, Status};
    use crate::testkit::*;

    fn c10d(c: &mut Cluster, resolved: &[(u32, &[&str])]) {
        for (r, addrs) in resolved {
            c.facts[*r as usize].sys.master_fqdn = Some(NameLookup {
                name: "node01.cluster.local".into(),
                addresses: addrs.iter().map(|a| a.parse().unwrap()).collect(),
                error: addrs.is_empty().then(|| "Name or service not known".into()),
            });
        }
    }

    #[test]
    fn a_static_rendezvous_is_skipped() {
        let fs = Cluster::healthy(3).findings();
        assert_eq!(only(&fs, crate::rendezvous::ids::FQDN).status, Status::Skip);
    }

    #[test]
    fn every_node_resolving_to_a_reached_address_passes() {
        let mut c = Cluster::healthy(3);
        c10d(&mut c, &[(1, &["10.0.0.1"]), (2, &["10.0.0.1"])]);
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::FQDN);
        assert_eq!(f.status, Status::Pass, "{f:#?}");
        assert_eq!(f.evidence["nodes_checked"], 2);
    }

    #[test]
    fn a_node_where_the_name_does_not_resolve_or_leads_elsewhere_warns_with_the_fix() {
        let mut c = Cluster::healthy(4);
        c10d(
            &mut c,
            &[(1, &["10.0.0.1"]), (2, &[]), (3, &["192.168.77.1"])],
        );
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::FQDN);
        assert_eq!(f.status, Status::Warn, "{f:#?}");
        assert_eq!(f.evidence["nodes_failing"], 2);
        assert!(
            f.summary.contains("does not resolve on rank 2"),
            "{}",
            f.summary
        );
        let nodes = f.evidence["nodes"].as_array().unwrap();
        assert_eq!(nodes[1]["resolved"][0], "192.168.77.1");
        let cmds = commands(f);
        assert!(
            cmds[0].starts_with("torchrun --local-addr=10.0.0.1 "),
            "{cmds:?}"
        );
        assert_eq!(
            cmds[1],
            "echo '10.0.0.1 node01.cluster.local' >> /etc/hosts   # on the nodes above"
        );
    }

    #[test]
    fn loopback_is_not_rank_0() {
        let mut c = Cluster::healthy(2);
        c10d(&mut c, &[(1, &["127.0.1.1"])]);
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::FQDN);
        assert_eq!(f.status, Status::Warn);
        assert!(f.summary.contains("loopback"), "{}", f.summary);
    }
}
