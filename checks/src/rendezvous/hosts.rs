//! `cluster.duplicate-host`: ranks that NCCL would see as one host.

use crate::core::ClusterInput;
use crate::core::cluster_common::{rank_map, ranks_phrase};
use crate::core::{Finding, Fix, NodeFacts, Status};
use std::collections::{BTreeMap, BTreeSet};

/// NCCL's identity of a node: `host_id` as probed, else hostname + boot id.
fn nccl_host_id(f: &NodeFacts) -> Option<String> {
    let id = f.host_id.trim();
    if !id.is_empty() {
        return Some(id.to_string());
    }
    let host = f.hostname.trim();
    let boot = f.boot_id.as_deref().unwrap_or("").trim();
    (!host.is_empty() || !boot.is_empty()).then(|| format!("{host}{boot}"))
}

pub(crate) fn duplicate_hosts(input: &ClusterInput) -> Vec<Finding> {
    let mut by_id: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (rank, facts) in input.nodes {
        if let Some(id) = nccl_host_id(facts) {
            by_id.entry(id).or_default().push(*rank);
        }
    }
    let mut out: Vec<Finding> = by_id
        .into_iter()
        .filter(|(_, ranks)| ranks.len() > 1)
        .map(|(id, mut ranks)| {
            ranks.sort_unstable();
            let hosts: BTreeMap<u32, String> = ranks
                .iter()
                .map(|r| (*r, input.host(*r).unwrap_or_default()))
                .collect();
            let names: BTreeSet<&str> = hosts.values().map(String::as_str).collect();
            let names: Vec<&str> = names.into_iter().collect();
            let mut fix = Fix::new(
                "Run one rank per machine (fix the host list or --node-rank), or, when ranks share a machine on purpose, give each its own NCCL_HOSTID",
            );
            for r in &ranks {
                fix = fix.command(format!("export NCCL_HOSTID=preflight-rank{r}   # on rank {r}"));
            }
            Finding::new(
                crate::rendezvous::ids::DUPLICATE_HOST,
                Status::Fail,
                id.clone(),
                format!(
                    "{} run on one host ({}): NCCL treats them as a single host",
                    ranks_phrase(&ranks),
                    names.join(", ")
                ),
            )
            .with("ranks", &ranks)
            .with("hostnames", rank_map(&hosts))
            .with("host_id", id)
            .fix(fix)
        })
        .collect();
    if out.is_empty() {
        out.push(
            Finding::new(
                crate::rendezvous::ids::DUPLICATE_HOST,
                Status::Pass,
                "hosts",
                format!("{} nodes, each on its own host", input.nodes.len()),
            )
            .with("nodes", input.nodes.len()),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::core::Status;
    use crate::testkit::*;
    use serde_json::json;

    #[test]
    fn duplicate_host_fires_on_a_shared_host_id_only() {
        let mut c = Cluster::healthy(3);
        assert_eq!(
            only(&c.findings(), crate::rendezvous::ids::DUPLICATE_HOST).status,
            Status::Pass
        );
        c.facts[2].host_id = c.facts[1].host_id.clone();
        c.facts[2].hostname = c.facts[1].hostname.clone();
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::DUPLICATE_HOST);
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.evidence["ranks"], json!([1, 2]));
        assert!(f.summary.contains("ranks 1, 2"), "{}", f.summary);
        assert!(f.summary.contains("node02"));
        assert!(commands(f).iter().any(|c| c.contains("NCCL_HOSTID")));
    }

    #[test]
    fn duplicate_host_falls_back_to_hostname_and_boot_id() {
        let mut c = Cluster::healthy(2);
        for f in &mut c.facts {
            f.host_id.clear();
            f.hostname = "same".into();
            f.boot_id = Some("b1".into());
        }
        assert_eq!(
            only(&c.findings(), crate::rendezvous::ids::DUPLICATE_HOST).status,
            Status::Fail
        );
        c.facts[1].boot_id = Some("b2".into());
        assert_eq!(
            only(&c.findings(), crate::rendezvous::ids::DUPLICATE_HOST).status,
            Status::Pass
        );
    }
}
