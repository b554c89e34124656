//! Explanations: the catalog of every finding id, and a failed job's log read for its known errors.

pub mod catalog;
pub mod hang;
pub mod log;

use serde::Serialize;
use std::collections::BTreeMap;

/// What the log says about the job itself: its launch flags and NCCL environment.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct JobSeen {
    pub master_addr: Option<String>,
    pub master_port: Option<u16>,
    pub nnodes: Option<String>,
    pub nproc_per_node: Option<String>,
    pub rdzv_endpoint: Option<String>,
    /// `NCCL_SOCKET_IFNAME set by environment to bond0` and the like.
    pub env: BTreeMap<String, String>,
    /// The first torchrun command line seen.
    pub command: Option<String>,
}
