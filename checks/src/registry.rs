//! Cluster-wide checks over every node's facts and the pairwise link results (pure functions).
//!
//! [`check_cluster`] runs on the coordinator once every node has joined (or the
//! join timeout ended); [`master_unreachable`] is what a node says about itself
//! when it could not reach the coordinator at all. Each group of findings lives
//! in its own module; `ib.partial` and `cluster.gpus` live beside the node
//! checks of their concern ([`crate::ib`], [`crate::gpu`]).

pub mod as_written;
mod attribution;
pub(crate) mod common;
mod degraded;
mod fqdn;
pub(crate) mod gpu_compute;
mod gpu_health;
pub mod healthy_set;
mod hosts;
mod idle_timeout;
mod ifname_choice;
mod intercepted;
mod joining;
mod latency;
mod launcher_master;
mod master_name;
mod mtu;
mod mtu_blackhole;
mod nat;
pub mod nccl_auto_pick;
mod refused;
mod rendezvous;
mod resolution;
mod slow;
mod unreachable;
mod versions;
mod vertex_cover;

pub use joining::{Dialed, MasterIsSelf, ThisNode, refused_here};
pub use master_name::master_never_resolved;
pub use refused::{Refusal, RefusalKind};
pub use rendezvous::{NOT_PREFLIGHT, master_unreachable, with_reverse_name};
pub use slow::{SLOW_SHARE, throughput_samples};

use crate::model::{Finding, LinkResult, NodeFacts};
use crate::networks::NetworkEval;
use std::collections::BTreeSet;

/// Everything the cluster checks look at.
pub struct ClusterInput<'a> {
    /// The ranks that joined, with their facts.
    pub nodes: &'a [(u32, &'a NodeFacts)],
    /// Expected number of nodes.
    pub nnodes: u32,
    /// Expected host per rank when known (from --hosts / Slurm), else empty.
    pub expected_hosts: &'a [String],
    /// Every ordered pair x every candidate address of the target.
    pub links: &'a [LinkResult],
    /// `networks::evaluate(...)`, best first.
    pub evals: &'a [NetworkEval],
    /// `networks::choose(...)`.
    pub chosen: Option<&'a NetworkEval>,
    pub master_port: u16,
    /// Nodes that reached the coordinator and were turned away.
    pub refused: &'a [Refusal],
    /// `--min-link-gbit`: a pair under it is slow whatever the others measure.
    pub min_link_gbit: Option<f64>,
    /// Ordered pairs (from, to, the address of `to`) measured again before the judgment: the
    /// suspects of a first judgment, against known-fast partners.
    pub retested: &'a [(u32, u32, String)],
}

impl<'a> ClusterInput<'a> {
    /// The nodes' facts alone: no links, networks, refusals or retests (judgments of the facts,
    /// and their tests).
    pub fn of_nodes(nodes: &'a [(u32, &'a NodeFacts)], nnodes: u32) -> Self {
        ClusterInput {
            nodes,
            nnodes,
            expected_hosts: &[],
            links: &[],
            evals: &[],
            chosen: None,
            master_port: 29500,
            refused: &[],
            min_link_gbit: None,
            retested: &[],
        }
    }

    pub(crate) fn facts(&self, rank: u32) -> Option<&NodeFacts> {
        self.nodes.iter().find(|(r, _)| *r == rank).map(|(_, f)| *f)
    }

    pub(crate) fn joined(&self) -> BTreeSet<u32> {
        self.nodes.iter().map(|(r, _)| *r).collect()
    }

    /// The host a rank runs on, as best known: its own hostname, else the expected one.
    pub(crate) fn host(&self, rank: u32) -> Option<String> {
        self.facts(rank)
            .map(|f| f.hostname.trim().to_string())
            .filter(|h| !h.is_empty())
            .or_else(|| self.expected_host(rank))
    }

    pub(crate) fn expected_host(&self, rank: u32) -> Option<String> {
        self.expected_hosts
            .get(rank as usize)
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
    }

    /// "rank 2 (node03)" or "rank 2".
    pub(crate) fn who(&self, rank: u32) -> String {
        match self.host(rank) {
            Some(h) => format!("rank {rank} ({h})"),
            None => format!("rank {rank}"),
        }
    }

    /// The hosts of `ranks` as a hostlist of about `max_chars` ("node[01-03]"); a rank whose
    /// host is unknown reads `rank<N>`.
    pub(crate) fn hosts_within(&self, ranks: &[u32], max_chars: usize) -> String {
        let names: Vec<String> = ranks
            .iter()
            .map(|r| self.host(*r).unwrap_or_else(|| format!("rank{r}")))
            .collect();
        crate::hostlist::compress_within(&names, max_chars)
    }

    /// What the other nodes dial to reach the coordinator, as best known here.
    pub(crate) fn master_label(&self) -> String {
        self.expected_host(0)
            .or_else(|| self.host(0))
            .or_else(|| {
                // The master address as the nodes that joined were given it.
                self.nodes.iter().find_map(|(_, f)| {
                    f.master_resolution
                        .as_ref()
                        .map(|m| m.name.trim().to_string())
                        .filter(|n| !n.is_empty())
                })
            })
            .unwrap_or_else(|| "MASTER".to_string())
    }
}

/// Runs every cluster-wide check. Each id appears at least once, with `pass` or `skip` when nothing is wrong.
pub fn check_cluster(input: &ClusterInput) -> Vec<Finding> {
    let mut out = vec![rendezvous::rendezvous(input)];
    out.extend(refused::refused(input));
    out.push(resolution::master_resolution(input));
    out.push(fqdn::fqdn(input));
    out.push(master_name::master_late(input));
    out.push(launcher_master::launcher_master(input));
    out.extend(master_name::master_elsewhere(input));
    out.extend(hosts::duplicate_hosts(input));
    out.extend(versions::versions(input));
    out.push(crate::gpu::check_cluster_gpus(input));
    out.extend(gpu_health::gpu_health(input));
    out.extend(gpu_compute::gpu_compute(input));
    out.push(crate::ib::check_partial(input));
    out.extend(crate::rails::across::check_cluster(input));
    out.extend(crate::scale::gid_across::check_cluster(input));
    out.extend(unreachable::unreachable_links(input));
    out.extend(degraded::degraded_networks(input));
    out.extend(ifname_choice::slower_ifname(input));
    out.push(mtu::mtu_mismatch(input));
    out.push(mtu_blackhole::mtu_blackhole(input));
    out.extend(slow::slow_links(input));
    out.extend(latency::high_latency(input));
    out.extend(nat::nat(input));
    out.extend(intercepted::intercepted(input));
    out.extend(idle_timeout::idle_timeout(input));
    nat::point_symptoms(input, &mut out);
    intercepted::point_symptoms(&mut out);
    out
}

#[cfg(test)]
pub(crate) mod testkit;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::testkit::*;
    use crate::model::Status;
    use serde_json::json;

    #[test]
    fn healthy_cluster_passes_every_check_once() {
        let fs = Cluster::healthy(3).findings();
        for id in IDS {
            let f = only(&fs, id);
            let expected = if *id == "ib.partial" {
                Status::Skip
            } else {
                Status::Pass
            };
            assert_eq!(f.status, expected, "{f:#?}");
            assert!(f.fix.is_none(), "no fix on {id}");
        }
        let link = only(&fs, "link.unreachable");
        assert_eq!(link.evidence["pairs_ok"], json!(6));
        assert_eq!(link.evidence["network"], json!("10.0.0.0/24"));
        // docker0's failures are no finding, only evidence.
        assert_eq!(
            link.evidence["other_networks"],
            json!([{"network": "172.17.0.0/24", "ok": 0, "total": 6}])
        );
    }

    #[test]
    fn a_single_node_skips_the_link_checks_and_never_panics_on_empty_input() {
        let c = Cluster::healthy(1);
        let fs = c.findings();
        assert_eq!(only(&fs, "link.unreachable").status, Status::Skip);
        let empty = check_cluster(&ClusterInput::of_nodes(&[], 0));
        for id in IDS {
            assert!(!with_id(&empty, id).is_empty(), "{id} missing");
        }
    }
}
