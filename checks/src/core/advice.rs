//! The advice in a report: the NCCL/Gloo environment, the master, the launch lines and the healthy set.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
pub struct LaunchCommand {
    pub node_rank: u32,
    pub command: String,
}

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct Recommendation {
    pub env: BTreeMap<String, String>,
    /// Per-node values, keyed by rank, only where a node needs its own.
    pub node_env: BTreeMap<String, BTreeMap<String, String>>,
    pub master_addr: Option<String>,
    pub master_port: u16,
    pub launch: Vec<LaunchCommand>,
    pub reasons: Vec<String>,
    /// Single-node command (`torchrun --standalone ...`), in node mode.
    pub standalone: Option<String>,
    /// When the cluster fails: the nodes to train on now, those to leave out and why, and the
    /// launch on the rest (absent when the cluster passes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_set: Option<HealthySetAdvice>,
    /// When nodes `link.slow` names slow hold the ring all-reduce back by more than their share
    /// of the work: the set without them, the predicted gain and the launch on it (absent
    /// otherwise; the launch on every node above stays valid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faster_set: Option<FasterSetAdvice>,
}

/// `recommendation.faster_set`: train faster without the slow nodes. The model: a ring
/// all-reduce runs at the pace of its slowest hop, a node's rate is the lower median of its
/// measured sends and receives among the set, and the bus bandwidth scales with the ring's
/// bound; offered when the speed-up beats `nodes_with / nodes_without`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct FasterSetAdvice {
    /// In words: "faster without gpu51: ~8.3x the all-reduce's bus bandwidth".
    pub summary: String,
    /// The slow nodes left out (original ranks), and their hosts in hostlist syntax.
    pub slow: Vec<u32>,
    pub slow_hosts: String,
    /// Nodes of the launch it is compared with (every node, or the healthy set when the
    /// cluster fails) and nodes without the slow ones.
    pub nodes_with: u32,
    pub nodes_without: u32,
    /// The ring's bound (its slowest node's rate, Gbit/s) with and without the slow nodes.
    pub ring_gbit_s_with: f64,
    pub ring_gbit_s_without: f64,
    /// All-reduce bus bandwidth (GB/s) with them (measured when `measured`, else the bound)
    /// and predicted without them.
    pub busbw_gb_s_with: f64,
    pub busbw_gb_s_without: f64,
    pub measured: bool,
    /// Seconds to all-reduce 1 GB (a step's gradients of that size), with and without.
    pub seconds_per_gb_with: f64,
    pub seconds_per_gb_without: f64,
    /// `busbw_gb_s_without / busbw_gb_s_with`.
    pub speedup: f64,
    /// The speed-up that only pays for the nodes left out: `nodes_with / nodes_without`.
    pub break_even: f64,
    /// Samples per second without against with, when the step is all all-reduce (an upper bound).
    pub throughput_gain: f64,
    /// The set without the slow nodes: hosts, exclusions, environment and launch, as the
    /// healthy set carries them (`preflight launch --report FILE --healthy-set --exclude-slow`).
    pub set: HealthySetAdvice,
}

/// `recommendation.healthy_set`: the largest set of nodes the measurements show working together.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct HealthySetAdvice {
    /// Nodes in the set.
    pub count: u32,
    /// Nodes the job expected.
    pub total: u32,
    /// The set's hosts in Slurm hostlist syntax (`node[02-04,06]`).
    pub hosts: String,
    /// Original ranks in the set, in their order within it (the master first).
    pub ranks: Vec<u32>,
    /// Nodes left out, with the finding ids that explain each.
    pub excluded: Vec<HealthyExclusion>,
    /// The excluded hosts in hostlist syntax (for `srun --exclude=` / `sbatch --exclude=`).
    pub exclude_hosts: String,
    pub master_addr: Option<String>,
    pub master_port: u16,
    /// Why the master is not rank 0, when it is not.
    pub master_reason: Option<String>,
    pub env: BTreeMap<String, String>,
    /// Per-node values, keyed by the original rank, only where a node needs its own.
    pub node_env: BTreeMap<String, BTreeMap<String, String>>,
    pub launch: Vec<HealthyLaunch>,
    /// True when no larger set meets the same rules; false when the search was cut short (best found).
    pub largest: bool,
    pub constraints: HealthyConstraints,
    /// The network the set connects on.
    pub network: Option<String>,
    /// The command that re-checks the set (`preflight cluster --hosts ...`).
    pub recheck: String,
    /// Why the set cannot be used, when `constraints.met` is false.
    pub why: Option<String>,
}

/// A node left out of the healthy set.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct HealthyExclusion {
    /// The node's original rank.
    pub node: u32,
    pub hostname: String,
    /// Finding ids that explain it (empty for a node left idle by `--nodes-multiple-of`).
    pub reasons: Vec<String>,
    /// It works but stays idle to round the set down (`--nodes-multiple-of`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub idle: bool,
    /// Why, in words.
    pub why: String,
}

/// One node's launch on the healthy set.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct HealthyLaunch {
    /// The node's original rank.
    pub node: u32,
    pub hostname: String,
    /// Its rank within the set (torchrun's --node-rank).
    pub node_rank: u32,
    pub command: String,
}

/// The user's constraints on the healthy set, and whether it meets them.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct HealthyConstraints {
    pub min_nodes: u32,
    pub multiple_of: u32,
    pub met: bool,
}
