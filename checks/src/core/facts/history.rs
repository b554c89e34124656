//! A node's memory of its own past runs, as the history store keeps it and as the node sends a
//! bounded summary of it to rank 0 (`nodes[].facts.history`, issue 44).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most runs a node sends to rank 0 (its most recent): the lemon rules look at the last 10, the
/// XID bursts at 24 hours of them.
pub const SUMMARY_RUNS: usize = 30;
/// Most findings kept for one run (the worst first); a run with more says how many it dropped.
pub const RUN_FINDINGS: usize = 32;
/// Longest text kept in any field of a record (ids, partners, numbers).
pub const FIELD_CHARS: usize = 120;

/// One non-pass finding a node recorded in one run.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct FindingRec {
    /// Finding id, e.g. `link.slow`.
    pub id: String,
    /// `warn`, `fail` or `error`.
    pub status: String,
    /// The other node's host name for a fault of one pair (`link.*`); absent when the finding
    /// names this node as the culprit whatever its partner (a slow node).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partner: Option<String>,
    /// GPU index for `gpu.*` findings about one GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    /// XID number for `gpu.xid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xid: Option<u32>,
    /// The finding is the job's user's to fix (its `problem` was `user`): never a lemon.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub user: bool,
    /// When the event happened, in Unix seconds, where the finding dates it (`gpu.xid`: the
    /// newest XID's time): the XID burst rule counts events, not the runs that saw them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<i64>,
    /// How many nodes of the run had this finding id (this one included; 1 in a one-node run):
    /// the repeat rule counts a run only when some other node of it passed.
    pub with: u32,
    /// The finding's key numbers, `key=value` separated by spaces (at most [`FIELD_CHARS`]).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub numbers: String,
}

/// One node's record of one run.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct NodeRun {
    /// Run identity shared by the nodes of one cluster run (the job id where known, else rank
    /// 0's run id); unique per run otherwise.
    pub run: String,
    /// Unix seconds.
    pub time: i64,
    /// This node's host name.
    pub node: String,
    /// `check`, `cluster`, `slurm-prolog`, `slurm-health`, `npd`, `prom`, ...
    pub mode: String,
    /// Slurm/Kubernetes job id where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Nodes that took part in the run (1 for a one-node check or hook).
    pub nodes: u32,
    /// Whether the node was in the run's healthy set (`None` when the run had none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
    /// Non-pass findings, worst first, at most [`RUN_FINDINGS`].
    pub findings: Vec<FindingRec>,
    /// Findings beyond [`RUN_FINDINGS`] that were not kept.
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Most finding ids whose running totals a summary carries.
pub const TOTALS: usize = 128;

/// How many runs of a node had one finding id with one status, since its store began.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct FindingTotal {
    pub id: String,
    pub status: String,
    pub runs: u64,
}

/// What a node sends rank 0 about its past: its most recent runs (at most [`SUMMARY_RUNS`],
/// oldest first), or why it has none.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct HistorySummary {
    /// The node's recent runs, oldest first.
    pub runs: Vec<NodeRun>,
    /// Runs the store holds for this node in all (the summary keeps the last few).
    pub total_runs: u64,
    /// Runs per finding id and status since the store began (kept past the retention bound, so
    /// they only grow: the Prometheus counters), at most [`TOTALS`] ids, the most frequent first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub totals: Vec<FindingTotal>,
    /// Where the store is (a path), for the fix commands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// Why the store could not be read or written (unwritable, corrupt and set aside): the
    /// `history.store` warning's evidence. `None` when it worked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}
