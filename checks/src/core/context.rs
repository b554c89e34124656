//! What the checks need to know beyond the facts: the job the user is about to launch.

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
