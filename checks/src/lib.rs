//! preflight-checks: the facts model, the OS probes and the pure checks behind `preflight`.
//!
//! Data flows one way: probe -> facts -> checks -> findings. The layers point one way too:
//! [`infra`] (utilities) < [`core`] (the report's types, facts, findings, typed ids, the
//! context) < one folder per concern (its probe, node and cluster judgment, ids and catalog
//! texts, tests) < [`collect`], [`registry`] and [`explain`], which name every concern.

pub mod core;
pub mod infra;

pub mod collective;
pub mod env;
pub mod firewall;
pub mod gpu;
pub mod healthy_set;
pub mod history;
pub mod launch;
pub mod link;
pub mod nccl;
pub mod net;
pub mod ports;
pub mod rdma;
pub mod rendezvous;
pub mod sys;

pub mod collect;
pub mod explain;
pub mod registry;
#[cfg(test)]
pub(crate) mod testkit;

pub use crate::core::CheckContext;
pub use registry::{check_cluster, check_node};

// Paths the binary crate used before the concern folders; they name the new homes.
pub use crate::core::schema;
pub use explain::catalog;
pub use explain::log as explain_log;
pub use gpu::health as gpu_health;
pub use gpu::visible_devices;
pub use infra::{budget, hostlist, root, shellword, stats};
pub use link::fail_slow;
pub use net::ifname;
pub use rdma::rails;

/// The report's types (now [`crate::core`]).
pub mod model {
    pub use crate::core::*;
}

/// Candidate networks: their types ([`crate::core`]) and their discovery ([`crate::net::networks`]).
pub mod networks {
    pub use crate::core::{Member, Network, NetworkEval, covering_prefix, prefix_of};
    pub use crate::net::networks::*;
}

/// The cluster judgments' old home: their inputs and the checks the binary calls directly.
pub mod cluster {
    pub use crate::core::{ClusterInput, Refusal, RefusalKind};
    pub use crate::healthy_set;
    pub use crate::launch::as_written;
    pub use crate::link::{SLOW_SHARE, throughput_samples};
    pub use crate::net::nccl_auto_pick;
    pub use crate::registry::check_cluster;
    pub use crate::rendezvous::{
        Dialed, MasterIsSelf, NOT_PREFLIGHT, ThisNode, master_never_resolved, master_unreachable,
        refused_here, with_reverse_name,
    };
}

/// The probes' old home.
pub mod probe {
    pub use crate::collect::{ProbeOptions, collect};
    pub use crate::env::probe as env;
    pub use crate::gpu::probe as gpu;
    pub use crate::gpu::probe::load as gpu_load;
    pub use crate::gpu::probe::node as gpu_node;
    pub use crate::gpu::probe::snapshot as gpu_snapshot;
    pub use crate::infra::parse_hex_u32;
    pub use crate::net::probe as net;
    pub use crate::rdma::probe::ib;
    pub use crate::rdma::probe::paths as rdma;
    pub use crate::sys::name_origin;
    pub use crate::sys::probe as sys;
    pub use crate::sys::scale_probe as scale;
}
