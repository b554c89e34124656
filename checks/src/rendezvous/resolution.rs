//! `cluster.master-resolution`: the joined nodes resolved the master's name to different addresses,
//! or to the same ones in another order (the job dials them in the resolver's order).
//!
//! Each node reports how it resolved the master address when it joined
//! (`NodeFacts::master_resolution`). Nodes that joined reached rank 0, but a name that means
//! different machines on different nodes (a stale /etc/hosts line, split DNS) is what made other
//! nodes miss it, and what torchrun and NCCL will resolve again at launch.

use crate::core::ClusterInput;
use crate::core::cluster_common::{LIST_CAP, rank_map};
use crate::core::{Finding, Fix, Status};
use crate::rendezvous::joining::is_name;
use std::collections::BTreeMap;

pub(crate) fn master_resolution(input: &ClusterInput) -> Finding {
    use crate::rendezvous::ids::MASTER_RESOLUTION as ID;
    let answers: BTreeMap<u32, (&str, Vec<String>)> = input
        .nodes
        .iter()
        .filter_map(|(r, f)| {
            let m = f.master_resolution.as_ref()?;
            // In the resolver's order: the job dials the first address first and waits on it,
            // so the same addresses in another order are another answer.
            let mut addrs: Vec<String> = Vec::with_capacity(m.addrs.len());
            for a in &m.addrs {
                if !addrs.contains(a) {
                    addrs.push(a.clone());
                }
            }
            Some((*r, (m.name.as_str(), addrs)))
        })
        .collect();
    let Some((_, (name, _))) = answers.iter().next() else {
        return Finding::new(
            ID,
            Status::Skip,
            "master",
            "no node reported how it resolved the master address",
        );
    };
    let name = name.to_string();
    let by_rank: BTreeMap<u32, Vec<String>> =
        answers.iter().map(|(r, (_, a))| (*r, a.clone())).collect();
    if !is_name(&name) && answers.values().all(|(n, _)| *n == name) {
        return Finding::new(
            ID,
            Status::Pass,
            name.clone(),
            format!("the master address {name} is an IP address: nothing to resolve"),
        )
        .with("name", &name)
        .with("resolved", rank_map(&by_rank));
    }
    // Group the ranks by answer.
    let mut groups: BTreeMap<(&str, &Vec<String>), Vec<u32>> = BTreeMap::new();
    for (r, (n, a)) in &answers {
        groups.entry((*n, a)).or_default().push(*r);
    }
    if groups.len() == 1 {
        let addrs = answers.values().next().map(|(_, a)| a.join(", "));
        return Finding::new(
            ID,
            Status::Pass,
            name.clone(),
            format!(
                "every node that joined resolved {name} to {}",
                addrs.unwrap_or_default()
            ),
        )
        .with("name", &name)
        .with("resolved", rank_map(&by_rank));
    }
    let described: Vec<String> = groups
        .iter()
        .take(LIST_CAP)
        .map(|((n, a), ranks)| {
            let who = if ranks.len() == 1 {
                format!("rank {}", ranks[0])
            } else {
                format!(
                    "ranks {}",
                    ranks
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            let addrs = if a.is_empty() {
                "nothing".to_string()
            } else {
                a.join(", ")
            };
            format!("{who}: {n} -> {addrs}")
        })
        .collect();
    let names: Vec<&str> = {
        let mut v: Vec<&str> = answers.values().map(|(n, _)| *n).collect();
        v.sort();
        v.dedup();
        v
    };
    let r0 = answers
        .get(&0)
        .map(|(_, a)| a.join(", "))
        .filter(|a| !a.is_empty());
    let hint = match &r0 {
        Some(a) => format!(
            "Make /etc/hosts or DNS agree on every node: {name} should resolve to rank 0's address ({a}) everywhere; fix the node(s) whose answer differs, then rerun"
        ),
        None => format!(
            "Make /etc/hosts or DNS agree on every node so {name} resolves to rank 0's address everywhere, then rerun"
        ),
    };
    let fix = names.iter().fold(Fix::new(hint), |f, n| {
        f.command(format!("getent hosts {n}"))
    });
    Finding::new(
        ID,
        Status::Warn,
        name.clone(),
        format!(
            "the nodes resolved the master address {name} differently ({}, each in its resolver's order, the order the job dials): a node with another answer, or another first address, may reach another machine, or none, and torchrun resolves the name again at launch",
            described.join("; ")
        ),
    )
    .with("name", &name)
    .with("names", &names)
    .with("resolved", rank_map(&by_rank))
    .with("answers", groups.len())
    .fix(fix)
}

#[cfg(test)]
mod tests {
    use crate::core::{MasterResolution, Status};
    use crate::testkit::*;
    use serde_json::json;

    fn resolved(c: &mut Cluster, rank: usize, name: &str, addrs: &[&str]) {
        c.facts[rank].master_resolution = Some(MasterResolution {
            name: name.into(),
            addrs: addrs.iter().map(|s| s.to_string()).collect(),
            joined_via: addrs.first().map(|a| format!("{a}:29500")),
            ..Default::default()
        });
    }

    #[test]
    fn nodes_that_resolved_the_master_differently_are_listed_with_getent() {
        let mut c = Cluster::healthy(3);
        resolved(&mut c, 0, "node01", &["10.0.0.1"]);
        resolved(&mut c, 1, "node01", &["10.0.0.1"]);
        resolved(&mut c, 2, "node01", &["10.0.0.1", "10.0.0.77"]);
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::MASTER_RESOLUTION);
        assert_eq!(f.status, Status::Warn);
        assert!(
            f.summary.contains("ranks 0, 1: node01 -> 10.0.0.1"),
            "{}",
            f.summary
        );
        assert!(
            f.summary.contains("rank 2: node01 -> 10.0.0.1, 10.0.0.77"),
            "{}",
            f.summary
        );
        assert_eq!(
            f.evidence["resolved"]["2"],
            json!(["10.0.0.1", "10.0.0.77"])
        );
        assert_eq!(commands(f), vec!["getent hosts node01"]);
        assert!(f.fix.as_ref().unwrap().hint.contains("(10.0.0.1)"));
    }

    #[test]
    fn agreeing_nodes_an_ip_address_or_no_reports_do_not_warn() {
        let mut c = Cluster::healthy(2);
        c.facts.iter_mut().for_each(|f| f.master_resolution = None);
        assert_eq!(
            only(&c.findings(), crate::rendezvous::ids::MASTER_RESOLUTION).status,
            Status::Skip
        );
        resolved(&mut c, 0, "node01", &["10.0.0.1"]);
        resolved(&mut c, 1, "node01", &["10.0.0.1"]);
        assert_eq!(
            only(&c.findings(), crate::rendezvous::ids::MASTER_RESOLUTION).status,
            Status::Pass
        );
        resolved(&mut c, 0, "10.0.0.1", &["10.0.0.1"]);
        resolved(&mut c, 1, "10.0.0.1", &["10.0.0.1"]);
        let f = c.findings();
        let f = only(&f, crate::rendezvous::ids::MASTER_RESOLUTION);
        assert_eq!(f.status, Status::Pass);
        assert!(f.summary.contains("nothing to resolve"));
    }

    #[test]
    fn the_same_addresses_in_another_order_are_another_answer() {
        let mut c = Cluster::healthy(2);
        resolved(&mut c, 0, "node01", &["10.0.0.1", "10.0.0.77"]);
        resolved(&mut c, 1, "node01", &["10.0.0.77", "10.0.0.1"]);
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::MASTER_RESOLUTION);
        assert_eq!(f.status, Status::Warn, "{f:#?}");
        assert!(
            f.summary.contains("rank 1: node01 -> 10.0.0.77, 10.0.0.1"),
            "{}",
            f.summary
        );
        assert!(
            f.summary.contains("the order the job dials"),
            "{}",
            f.summary
        );
    }
}
