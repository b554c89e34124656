//! Cluster-wide checks over every node's facts and the pairwise link results (pure functions).

// TEMPORARY stub until the cluster-checks branch lands.
use crate::model::{Finding, LinkOutcome, LinkResult, NodeFacts};
use crate::networks::NetworkEval;
pub struct ClusterInput<'a> {
    pub nodes: &'a [(u32, &'a NodeFacts)],
    pub nnodes: u32,
    pub expected_hosts: &'a [String],
    pub links: &'a [LinkResult],
    pub evals: &'a [NetworkEval],
    pub chosen: Option<&'a NetworkEval>,
    pub master_port: u16,
}
pub fn check_cluster(_input: &ClusterInput) -> Vec<Finding> {
    Vec::new()
}
pub fn master_unreachable(
    rank: u32,
    master: &str,
    port: u16,
    outcome: LinkOutcome,
    _waited_s: f64,
    error: &str,
) -> Finding {
    Finding::new(
        "cluster.rendezvous",
        crate::model::Status::Fail,
        format!("{master}:{port}"),
        format!("rank {rank}: {outcome:?} {error}"),
    )
}
