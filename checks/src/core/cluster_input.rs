//! What the cluster checks look at: every node's facts, the measured links, the candidate
//! networks, the refused nodes and the retested pairs, with the helpers that name a rank.

use super::{Links, NetworkEval, NodeFacts, Refusal};
use std::collections::BTreeSet;

/// No links (judgments of the facts alone).
static NO_LINKS: Links<'static> = Links::none();

/// Everything the cluster checks look at.
pub struct ClusterInput<'a> {
    /// The ranks that joined, with their facts.
    pub nodes: &'a [(u32, &'a NodeFacts)],
    /// Expected number of nodes.
    pub nnodes: u32,
    /// Expected host per rank when known (from --hosts / Slurm), else empty.
    pub expected_hosts: &'a [String],
    /// Every ordered pair x every candidate address of the target (compact above 64 nodes:
    /// see [`Links`]).
    pub links: &'a Links<'a>,
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
            links: &NO_LINKS,
            evals: &[],
            chosen: None,
            master_port: 29500,
            refused: &[],
            min_link_gbit: None,
            retested: &[],
        }
    }

    /// The facts of `rank`: found by binary search in the nodes (kept in rank order by the
    /// coordinator), else by a scan, so a lookup per node stays cheap at thousands of nodes.
    pub(crate) fn facts(&self, rank: u32) -> Option<&NodeFacts> {
        match self.nodes.binary_search_by_key(&rank, |(r, _)| *r) {
            Ok(i) => Some(self.nodes[i].1),
            Err(_) => self.nodes.iter().find(|(r, _)| *r == rank).map(|(_, f)| *f),
        }
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
        crate::infra::hostlist::compress_within(&names, max_chars)
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
