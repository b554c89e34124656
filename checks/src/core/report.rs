//! The report (JSON contract `preflight.report.v1`): nodes, findings, links, collectives and the advice.
//!
//! Field names are a public contract: add fields freely, never rename or drop one.

use super::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Schema name written into every report.
pub const SCHEMA: &str = "preflight.report.v1";

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct CollectiveRow {
    pub bytes: u64,
    pub time_us: f64,
    pub algbw_gb_s: f64,
    pub busbw_gb_s: f64,
    pub wrong: u64,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct CollectiveResult {
    pub op: String,
    pub transport: String,
    pub ranks: u32,
    pub env: BTreeMap<String, String>,
    pub net: Option<String>,
    pub rows: Vec<CollectiveRow>,
    /// Node ranks in ring order (TCP: the ring itself; NCCL: the node order).
    pub order: Vec<u32>,
    /// The address each node rank used (key: rank), on the network the run went over.
    pub addresses: BTreeMap<String, String>,
    /// The network's label ("eth0", "eth0/eth1" when names differ), as in the advice.
    pub network: Option<String>,
    /// TCP connections per ring neighbour (TCP), GPUs in total (NCCL: `ranks` counts GPUs).
    pub streams: Option<u32>,
    /// `"advice"` for the recommended environment, `"compare"` for `--compare-env`.
    pub config: String,
    /// Why the run could not finish, with the node that failed; rows hold what was measured before.
    pub error: Option<String>,
    /// Node ranks whose own result differed (a rank that saw wrong values or failed).
    pub failed_ranks: Vec<u32>,
    /// When NCCL used another network than the advice named: what it used and what was advised.
    pub net_mismatch: Option<String>,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
pub struct NodeEntry {
    pub rank: u32,
    pub hostname: String,
    pub facts: NodeFacts,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Node,
    Cluster,
}

/// The whole report. Renderers read only this.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
pub struct Report {
    pub schema: String,
    pub tool: Tool,
    pub mode: Mode,
    pub status: Status,
    pub nodes: Vec<NodeEntry>,
    pub findings: Vec<Finding>,
    pub links: Vec<LinkResult>,
    pub collectives: Vec<CollectiveResult>,
    pub recommendation: Option<Recommendation>,
    /// How the ranks and the master were found (absent in node mode and older reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementInfo>,
    /// One id for the run, the same in every node's copy of a cluster report (rank 0 makes
    /// it): the nodes' history stores file their records of the run under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Set on a node's copy of a cluster report too big to send whole: what was left out of
    /// it (rank 0's own report, and its `-o FILE`, are always whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trimmed: Option<Trimmed>,
    /// How the cluster's measurements were run (cluster mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measurement: Option<Measurement>,
    /// Above 64 nodes: every pair's result and RTT per network, compactly; `links` then holds
    /// only the links that are not ok and a bounded sample of measured ones. Absent up to 64
    /// nodes, where `links` has one entry per ordered pair and address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_matrix: Option<LinkMatrix>,
}

impl Report {
    /// The node entry of `rank`: at index `rank` when the nodes are in rank order (as the
    /// coordinator writes them), else found by a scan.
    pub fn node(&self, rank: u32) -> Option<&NodeEntry> {
        self.nodes
            .get(rank as usize)
            .filter(|n| n.rank == rank)
            .or_else(|| self.nodes.iter().find(|n| n.rank == rank))
    }

    /// The hostname `rank` reported.
    pub fn hostname(&self, rank: u32) -> Option<&str> {
        self.node(rank).map(|n| n.hostname.as_str())
    }
}

/// Every ordered pair's result and RTT, per network, for a cluster above 64 nodes.
///
/// For each network, `ranks[i]` is the i-th row and column; the pair from `ranks[i]` to
/// `ranks[j]` is cell `i * ranks.len() + j` (row: from, column: to), measured on `to`'s
/// `addresses[j]` (owned by its interface `interfaces[j]`). Each matrix is the cells in that
/// order, deflated (RFC 1951, raw) and then base64 (RFC 4648, with padding).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct LinkMatrix {
    /// "deflate+base64": how `result` and `rtt_us` are encoded (see above).
    pub encoding: String,
    pub networks: Vec<MatrixNetwork>,
    /// Links in the whole measurement (every network), and how many of them `links` keeps.
    pub links_total: u64,
    pub links_kept: u64,
    /// Links not ok that are left out of `links` because a network had too many of them (their
    /// result and RTT are still in the matrix; the error text is not).
    pub failed_omitted: u64,
}

/// One network of a [`LinkMatrix`].
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct MatrixNetwork {
    /// The subnet of the target addresses (`10.0.0.0/24`), else the interface name.
    pub name: String,
    pub ranks: Vec<u32>,
    /// Per column: the address the pair connected to, and the interface owning it.
    pub addresses: Vec<String>,
    pub interfaces: Vec<String>,
    /// One byte per cell: 0 not measured (and the diagonal), 1 ok, 2 refused, 3 timeout,
    /// 4 unreachable, 5 error, 6 invalid.
    pub result: String,
    /// Two bytes per cell, little-endian: the RTT p50 in microseconds rounded, 0 when none
    /// was measured, 65535 for 65535 µs or more.
    pub rtt_us: String,
}

/// How the ranks and the master were found.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
pub struct PlacementInfo {
    /// "flags" | "--hosts" | "slurm" | "torchrun-env" | "c10d-join" (ranks assigned at join, as
    /// torchrun's c10d rendezvous does: the node owning the endpoint is rank 0, the others are
    /// numbered in the order they joined).
    pub source: String,
    /// With "c10d-join": the endpoint (HOST:PORT) whose owner is rank 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// With "c10d-join": this node never got a rank (no rank 0 answered), so its `nodes[]`
    /// entry carries 4294967295 and its findings name no node.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unassigned: bool,
}

/// What a node's copy of the cluster report leaves out, and why.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
pub struct Trimmed {
    /// Links in the whole report.
    pub links_total: u64,
    /// Links kept here: those from or to this node.
    pub links_kept: u64,
    /// Nodes whose facts are left out here (their rank, hostname and findings stay).
    pub facts_omitted: u32,
    /// Why, in words, and where the whole report is.
    pub why: String,
}
