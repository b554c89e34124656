//! preflight-checks: the facts model, the OS probes and the pure checks behind `preflight`.
//!
//! Data flows one way: probe -> facts -> checks -> findings. Probes live in
//! [`probe`] and are the only code that touches the OS; every other module is a
//! pure function of [`model::NodeFacts`] and a [`CheckContext`].

pub mod budget;
pub mod catalog;
pub mod cluster;
pub mod collective;
pub mod env;
pub mod explain_log;
pub mod fail_slow;
pub mod firewall;
pub mod flight_recorder;
pub mod gpu;
pub mod gpu_compute;
pub mod gpu_health;
pub mod hostlist;
pub mod ib;
pub mod ifname;
pub mod model;
pub mod nccl;
pub mod net;
pub mod networks;
pub mod ports;
pub mod probe;
pub mod rails;
pub mod root;
pub mod scale;
pub mod schema;
pub mod shellword;
pub mod stats;
pub mod sys;
pub mod visible_devices;

#[cfg(test)]
mod testutil;

use model::{Finding, NodeFacts};

/// What the checks need to know beyond the facts: the job the user is about to launch.
#[derive(Clone, Debug, Default)]
pub struct CheckContext {
    /// The rank findings are attributed to (0 in node mode).
    pub rank: Option<u32>,
    /// The torchrun master port the job will use.
    pub master_port: u16,
    /// `--nproc-per-node`, when given.
    pub nproc_per_node: Option<u32>,
    /// `--expect-gpus`, when given.
    pub expect_gpus: Option<u32>,
    /// Nodes in the job (`--nnodes`, the launcher's environment, cluster mode), when known.
    pub nnodes: Option<u32>,
    /// Ranks in the whole job (nodes × processes per node), when known: the scale checks judge
    /// against it.
    pub world_size: Option<u32>,
    /// `--xid-window` in seconds: how far back a kernel-log XID counts (default 2 h).
    pub xid_window_s: Option<u64>,
}

impl CheckContext {
    /// GPUs the job needs on this node, if it says.
    pub fn gpus_expected(&self) -> Option<u32> {
        match (self.expect_gpus, self.nproc_per_node) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Runs every single-node check over one node's facts. Never panics; a check
/// that cannot judge reports `error`.
pub fn check_node(facts: &NodeFacts, ctx: &CheckContext) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(net::check(facts, ctx));
    out.extend(ib::check(facts, ctx));
    out.extend(rails::node::check(facts));
    out.extend(gpu::check(facts, ctx));
    out.extend(gpu_compute::check(ctx.rank.unwrap_or(0), facts));
    out.extend(nccl::check(facts, ctx));
    out.extend(ports::check(facts, ctx));
    out.extend(firewall::check(facts, ctx));
    out.extend(sys::check(facts, ctx));
    out.extend(env::check(facts, ctx));
    out.extend(scale::check(facts, ctx));
    for f in &mut out {
        if f.node.is_none() {
            f.node = ctx.rank;
        }
    }
    out
}
