//! What a node reports about itself ([`NodeFacts`]), one file per concern's facts.
//!
//! These types are part of the report's JSON contract (`nodes[].facts`), which every concern
//! reads, so they live in `core`; the probe that fills each sits in its concern's folder.
//! Everything here is plain serde data: add fields freely, never rename or drop one.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod firewall;
mod gpu;
mod gpu_health;
mod history;
mod label;
mod name_order;
mod nccl;
mod net;
mod ports;
mod rdma;
mod sys;
pub use firewall::*;
pub use gpu::*;
pub use gpu_health::*;
pub use history::{
    FIELD_CHARS, FindingRec, FindingTotal, HistorySummary, NodeRun, RUN_FINDINGS, SUMMARY_RUNS,
    TOTALS,
};
pub use label::{Label, Labels};
pub use name_order::{AddressOrigin, FirstDial};
pub use nccl::*;
pub use net::*;
pub use ports::*;
pub use rdma::*;
pub use sys::*;

/// Everything one node knows about itself. Written by `preflight facts`, read by `--facts`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct NodeFacts {
    pub hostname: String,
    /// NCCL's idea of the host: `NCCL_HOSTID`, else hostname + boot id.
    pub host_id: String,
    pub boot_id: Option<String>,
    pub kernel: Option<String>,
    pub net: NetFacts,
    pub ib: IbFacts,
    pub gpu: GpuFacts,
    pub nccl: NcclFacts,
    pub ports: PortFacts,
    pub firewall: FirewallFacts,
    pub sys: SysFacts,
    /// Node settings that only bite at scale (sysctls, limits, cgroup pids, GIDs, /dev/shm
    /// leftovers); absent in facts of older releases, which the scale checks then leave alone.
    #[serde(skip_serializing_if = "ScaleFacts::is_unprobed")]
    pub scale: ScaleFacts,
    /// The environment variables that matter to a torchrun/NCCL job (NCCL_*, GLOO_*, CUDA_*, MASTER_*, ranks).
    pub env: BTreeMap<String, String>,
    /// How this node resolved the master address when it joined the coordinator (cluster runs
    /// only; absent in `preflight facts` and in reports of older releases).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master_resolution: Option<MasterResolution>,
    /// The address rank 0 saw this node's join come from (the peer address of its connection,
    /// an IPv4-mapped IPv6 written as IPv4); filled by rank 0, absent outside cluster runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub joined_from: Option<String>,
    /// The connections this node held silent to its ring neighbour and what reusing them gave
    /// (`link.idle-timeout`); filled by rank 0 from the node's answer, absent outside cluster
    /// runs and when `--idle-test 0`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_test: Option<IdleTest>,
    /// A bounded summary of this node's own past runs from its history store (issue 44); absent
    /// with `--history off`, in `preflight facts` and in reports of older releases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<HistorySummary>,
}
