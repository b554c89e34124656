//! Cluster mode: rendezvous on the master port, pairwise measurements, one report for every node.

pub mod agent;
pub mod auth;
pub mod coordinator;
pub mod launcher;
pub mod wire;

use crate::cli::ClusterArgs;

/// A line on stderr, prefixed so it is told apart from the report.
pub fn log(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "preflight: {msg}");
}

/// Runs `preflight cluster` on this node.
pub fn run(args: ClusterArgs) -> anyhow::Result<u8> {
    agent::run(args)
}
