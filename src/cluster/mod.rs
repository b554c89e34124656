//! Cluster mode: rendezvous on the master port, pairwise measurements, one report for every node.

pub mod launcher;

use crate::cli::ClusterArgs;

/// Runs `preflight cluster` on this node.
pub fn run(_args: ClusterArgs) -> anyhow::Result<u8> {
    anyhow::bail!("preflight cluster is not built yet")
}
